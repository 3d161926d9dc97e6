"""SAC's (and OPD's MSE distillation's) update and acting as one C++ call each.

``sac_grads`` writes the backward pass out by hand, but it still issues about 600 tensor
operations per update from Python, and at [64,64] that dispatch, not arithmetic, is most of
the update's time. ``csrc/sac_update.cpp`` does the same arithmetic in one call from the raw
batch: normalisation, every matrix product as one BLAS ``sgemm`` on raw pointers (the BLAS
torch links, MKL on x86), bias, ReLU and their backward passes as loops, ATen's vectorised
kernels for the tanh-Gaussian's ``tanh``/``exp``/``softplus``, activations in scratch buffers
kept between calls. The noise is drawn here, from the learner's generator, exactly as
``sac_grads`` draws it, so the random stream and the learning curve stay the same (the numbers
agree to float rounding: the C++ sums in a different order). The same call then applies Adam
(torch's arithmetic, on ``FusedAdam``'s own state, so checkpoints do not change) and the target
critic's Polyak update, each parameter right after its gradient is written (``FusedSAC.update``).
Acting goes through C++ too (``FusedSAC.act``): one env step's actor forward is a few tiny
products, cheaper without a dozen module calls around them. The update call flushes denormal
floats to zero while it runs (as ``denormals_flushed`` does for Python code).

The extension is compiled on first use with ``torch.utils.cpp_extension`` (a C++ compiler and
``ninja`` are needed; about 15 s once per source version, cached under
``~/.cache/agentic_rl/extensions/<source hash>``). If it cannot be built, ``available()`` warns
once and returns False, and SAC keeps using ``sac_grads``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from agentic_rl.algos.optim import FusedAdam

SOURCE = Path(__file__).resolve().parents[1] / "csrc" / "sac_update.cpp"
CFLAGS = ("-O3", "-fno-math-errno")
METRICS = ("critic_loss", "alpha_loss", "q_mean", "entropy", "policy_std", "actor_sac_loss",
           "actor_total_loss", "actor_distill_loss", "alpha")
_loaded: bool | None = None  # None: not tried yet in this process


def available() -> bool:
    """Build and load the extension once per process; False (with one warning) if that fails."""
    global _loaded
    if _loaded is None:
        try:
            build()
            _loaded = True
        except Exception as error:  # no compiler, no ninja, read-only cache: fall back
            warnings.warn(f"the fused SAC update could not be built ({error}); using the "
                          "Python gradients (sac_grads) instead", RuntimeWarning, stacklevel=2)
            _loaded = False
    return _loaded


def build() -> None:
    """Compile (or find in torch's extension cache) and load ``csrc/sac_update.cpp``."""
    from torch.utils.cpp_extension import load
    if shutil.which("ninja") is None:  # torch runs `ninja`; the pip package's may be off PATH
        import ninja
        os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
    # A cached build loads in a fraction of a second; say so only when it is compiling.
    notice = threading.Timer(2.0, lambda: print(
        f"agentic-rl: compiling {SOURCE.name} (once per source version, about 15 s)",
        file=sys.stderr, flush=True))
    notice.start()
    directory = build_directory()
    try:
        with build_lock(directory):
            load("agentic_rl_sac_update", [str(SOURCE)], is_python_module=False,
                 extra_cflags=list(CFLAGS), build_directory=str(directory))
    finally:
        notice.cancel()


def build_directory() -> Path:
    """A build folder per source, flags, torch and Python version (torch's default cache is
    one folder per extension name, so installs with different sources rebuild each other).
    ``AGENTIC_RL_EXTENSIONS`` moves the root (default ``~/.cache/agentic_rl/extensions``)."""
    key = hashlib.sha256(b"\0".join([SOURCE.read_bytes(), " ".join(CFLAGS).encode(),
                                      torch.__version__.encode(), sys.version.encode()]))
    root = Path(os.environ.get("AGENTIC_RL_EXTENSIONS",
                               Path.home() / ".cache" / "agentic_rl" / "extensions"))
    directory = root / key.hexdigest()[:16]
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@contextlib.contextmanager
def build_lock(directory: Path) -> Iterator[None]:
    """One builder at a time, by an OS lock that dies with its process: torch's own lock file
    stays behind when a build is killed and then blocks every later build forever, so it is
    removed here (whoever made it no longer holds this lock)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: torch's lock file alone
        yield
        return
    with open(directory / "agentic_rl.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        (directory / "lock").unlink(missing_ok=True)
        yield


def supports(sac: Any) -> bool:
    """The fused call covers what ``sac_grads`` covers, on CPU, in float32."""
    params = [*sac.actor.parameters(), *sac.critic.parameters()]
    return (sac.device.type == "cpu" and all(p.dtype == torch.float32 for p in params)
            and available())


def parameter_lists(sac: Any) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
    """Actor ``[W_1, b_1, ..., W_mean, b_mean, W_log_std, b_log_std]`` and the online and
    target critics' ``[W_1, b_1, ...]``, in the order the C++ code reads them."""
    actor = sac.actor
    actor_params = [p for linear in list(actor.trunk)[::2] for p in (linear.weight, linear.bias)]
    actor_params += [actor.mean_head.weight, actor.mean_head.bias, actor.log_std_head.weight,
                     actor.log_std_head.bias]

    def ensemble(critic: torch.nn.Module) -> list[torch.Tensor]:
        return [p for linear in list(critic.net)[::2] for p in (linear.weight, linear.bias)]

    return actor_params, ensemble(sac.critic), ensemble(sac.target_critic)


def gradient_buffers(params: list[torch.Tensor]) -> list[torch.Tensor]:
    """Each parameter's ``.grad``, allocated once and then overwritten by every update."""
    for param in params:
        if param.grad is None or param.grad.shape != param.shape:
            param.grad = torch.zeros_like(param)
    return [param.grad for param in params]


@contextlib.contextmanager
def denormals_flushed() -> Iterator[None]:
    """Floats below 1.2e-38 read and written as 0 inside the block (FTZ/DAZ on this thread;
    x86), the caller's mode restored after. Adam's second moments of dead units decay into that
    range after some thousands of updates, and its step then runs up to 9x slower
    (``benchmarks/README.md``); the values flushed are far below anything that matters."""
    previous = torch.ops.agentic_rl.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.ops.agentic_rl.set_flush_denormal(previous)


class FusedSAC:
    """One learner's fused calls: ``update`` is one whole SAC step (``sac_grads.sac_gradients``,
    the same gradients written into ``.grad`` of every parameter, then Adam and the target
    update), ``gradients`` the C++ call behind it, ``act`` the actor's acting forward. The
    parameter lists are gathered once (parameters keep their identity; loading a checkpoint
    copies into them)."""

    def __init__(self, sac: Any) -> None:
        self.sac = sac
        self.actor, self.critic, self.target = parameter_lists(sac)
        self.params = [*self.actor, *self.critic, sac.log_alpha]
        self.act_dim = sac.actor.mean_head.out_features
        self.grads: list[torch.Tensor] = []
        self.grad_lists: tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor] | None = None
        self.gradients_op = torch.ops.agentic_rl.sac_gradients
        self.act_op = torch.ops.agentic_rl.sac_act

    def gradient_lists(self) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
        """The actor's, the critic's and the temperature's ``.grad`` buffers, made again if
        they were replaced (``zero_grad(set_to_none=True)`` clears all of them, so checking
        the first parameter is enough: the check runs on every update)."""
        if self.grad_lists is None or self.params[0].grad is not self.grads[0]:
            self.grads = gradient_buffers(self.params)
            actor_count = len(self.actor)
            self.grad_lists = (self.grads[:actor_count], self.grads[actor_count:-1],
                               self.grads[-1])
        return self.grad_lists

    def normalizers(self) -> tuple[list[torch.Tensor], list[float]]:
        """The observation and goal normalisers' ``[mean, scale]`` tensors and clip values
        (goal ones empty for a learner without goals)."""
        sac = self.sac
        obs_mean, obs_scale, obs_clip = sac.obs_normalizer.affine()
        if not sac.goal_conditioned:
            return [obs_mean, obs_scale, torch.empty(0), torch.empty(0)], [obs_clip, 0.0]
        goal_mean, goal_scale, goal_clip = sac.goal_normalizer.affine()
        return [obs_mean, obs_scale, goal_mean, goal_scale], [obs_clip, goal_clip]

    @torch.no_grad()
    def update(self, batch: dict[str, Any], prototype: dict[str, Any] | None, weight: float,
               optimizer: FusedAdam, tau: float) -> dict[str, float]:
        """One SAC step: the gradients (``gradients``), Adam's step on actor, critic and
        temperature, and the target critic's Polyak update by ``tau``. Where the optimiser's
        state allows (``FusedAdam.flat_state``: from its second step on) all three happen in
        the C++ call, each parameter stepped right after its gradient is written; otherwise
        the optimiser and one ``lerp`` follow the call. Returns the losses and statistics (and
        ``alpha`` before the step) as floats."""
        adam = optimizer.flat_state(self.params)
        values = self.gradients(batch, prototype, weight, adam, tau)
        if adam is None:
            with denormals_flushed():  # the C++ call flushes them itself
                optimizer.apply_gradients()
                torch._foreach_lerp_(self.target, self.critic, tau)
        metrics = dict(zip(METRICS, values.tolist()))
        if prototype is None:
            del metrics["actor_distill_loss"]
        return metrics

    @torch.no_grad()
    def gradients(self, batch: dict[str, Any], prototype: dict[str, Any] | None, weight: float,
                  adam: tuple[list[torch.Tensor], list[float], list[float]] | None = None,
                  tau: float = 0.0) -> torch.Tensor:
        """``sac_grads.sac_gradients`` from the raw batch (the C++ code normalises): the same
        gradients in ``.grad``, the losses and statistics named by ``METRICS`` as one tensor.
        ``prototype`` holds raw ``obs``, ``desired_goal`` and ``action`` of the MSE distillation
        term. With ``adam`` (``FusedAdam.flat_state``), Adam's step and the target update by
        ``tau`` too. A batch with ``weight [B]`` (prioritised replay) weights the critic loss
        and gets ``td_error [B]``."""
        sac = self.sac
        noise = torch.randn((2 * batch["obs"].shape[0], self.act_dim), generator=sac.generator)
        actor_grads, critic_grads, log_alpha_grad = self.gradient_lists()
        goal = _float(batch.get("desired_goal")) if sac.goal_conditioned else None
        proto = prototype or {}
        proto_goal = _float(proto.get("desired_goal")) if sac.goal_conditioned else None
        state, lrs, hyper = adam or ([], [], [])
        is_weight = _float(batch.get("weight"))  # prioritised replay's importance weights
        if is_weight is not None:
            batch["td_error"] = torch.empty_like(is_weight)
        return self.gradients_op(
            _float(batch["obs"]), _float(batch["next_obs"]), goal, _float(batch["action"]),
            _float(batch["reward"]), _float(batch["terminated"]), noise, _float(proto.get("obs")),
            proto_goal, _float(proto.get("action")), float(weight), *self.normalizers(),
            self.actor, actor_grads, self.critic, critic_grads, self.target,
            sac.log_alpha.detach(), log_alpha_grad, float(sac.config.gamma),
            float(sac.target_entropy), state, lrs, [*hyper, tau] if adam else [], is_weight,
            batch.get("td_error"))

    @torch.no_grad()
    def act(self, obs: torch.Tensor, goal: torch.Tensor | None, deterministic: bool
            ) -> torch.Tensor:
        """``actor.deterministic`` or ``actor.sample_action`` (the same noise draw) of the raw
        observation and goal, ``[N, act_dim]`` in (-1, 1)."""
        sac = self.sac
        noise = None if deterministic else torch.randn((obs.shape[0], self.act_dim),
                                                       generator=sac.generator)
        return self.act_op(_float(obs), _float(goal) if sac.goal_conditioned else None, noise,
                           *self.normalizers(), self.actor)


def _float(tensor: torch.Tensor | None) -> torch.Tensor | None:
    return None if tensor is None else tensor.float().contiguous()

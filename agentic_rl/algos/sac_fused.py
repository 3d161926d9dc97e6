"""SAC's (and OPD's MSE distillation's) gradients as one C++ call.

``sac_grads`` writes the backward pass out by hand, but it still issues about 600 tensor
operations per update from Python, and at [64,64] that dispatch, not arithmetic, is most of
the update's time. ``csrc/sac_update.cpp`` does the same arithmetic in one call: the matrix
products go to ATen (MKL) as before, and the elementwise parts over ``[2B, act_dim]`` and
``[num_q, 2B]`` values are plain loops. The noise is drawn here, from the learner's generator,
exactly as ``sac_grads`` draws it, so the random stream and the learning curve stay the same
(the numbers agree to float rounding: the C++ sums in a different order).

The extension is compiled on first use with ``torch.utils.cpp_extension`` (a C++ compiler and
``ninja`` are needed; about 15 s once per machine, cached under ``TORCH_EXTENSIONS_DIR`` or
``~/.cache/torch_extensions``). If it cannot be built, ``available()`` warns once and returns
False, and SAC keeps using ``sac_grads``.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import torch

SOURCE = Path(__file__).resolve().parents[1] / "csrc" / "sac_update.cpp"
METRICS = ("critic_loss", "alpha_loss", "q_mean", "entropy", "policy_std", "actor_sac_loss",
           "actor_total_loss", "actor_distill_loss")
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
    logging.getLogger(__name__).info("building %s (once per machine)", SOURCE.name)
    load("agentic_rl_sac_update", [str(SOURCE)], is_python_module=False, extra_cflags=["-O3"])


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


@torch.no_grad()
def sac_gradients(sac: Any, batch: dict[str, Any], x: torch.Tensor, next_x: torch.Tensor,
                  prototype: tuple[torch.Tensor, torch.Tensor, float] | None
                  ) -> dict[str, torch.Tensor]:
    """``sac_grads.sac_gradients`` in one C++ call: the same gradients written into ``.grad``
    of every parameter, the same losses and statistics returned (0-dim tensors)."""
    rows, act_dim = x.shape[0], sac.actor.mean_head.out_features
    noise = torch.randn((2 * rows, act_dim), generator=sac.generator, dtype=x.dtype)
    actor_params, critic_params, target_params = parameter_lists(sac)
    proto_x, proto_action, weight = (None, None, 0.0) if prototype is None else prototype

    def contiguous(tensor: torch.Tensor | None) -> torch.Tensor | None:
        return None if tensor is None else tensor.float().contiguous()

    values = torch.ops.agentic_rl.sac_gradients(
        contiguous(x), contiguous(next_x), contiguous(batch["action"]),
        contiguous(batch["reward"]), contiguous(batch["terminated"]), noise,
        contiguous(proto_x), contiguous(proto_action), float(weight),
        actor_params, gradient_buffers(actor_params), critic_params,
        gradient_buffers(critic_params), target_params, sac.log_alpha.detach(),
        gradient_buffers([sac.log_alpha])[0], float(sac.config.gamma), float(sac.target_entropy))
    metrics = dict(zip(METRICS, values.unbind()))
    if prototype is None:
        del metrics["actor_distill_loss"]
    return metrics

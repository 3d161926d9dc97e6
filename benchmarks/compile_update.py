"""One SAC update three ways: fused C++ call, eager autograd, torch.compile'd pure function.

For FetchReach-sized inputs (obs 10, goal 3, action 4, batch 256, twin Q) and each hidden size,
one gradient update (critic + actor + temperature losses, Adam, target lerp) is timed as

- ``fused``: ``SAC.update`` with ``fused_update=True`` (the library default, one C++ call);
- ``eager``: ``SAC.update`` with ``fused_update=False`` and ``manual_gradients=False``, i.e.
  ``SAC.unfused_update(..., manual=False)`` -> ``autograd_gradients`` + ``FusedAdam``;
- ``compiled``: ``pure_update(params, buffers, adam, batch, noise) -> (params, adam, metrics)``
  below (``torch.func.functional_call`` on the learner's modules, ``torch.func.grad_and_value``,
  the losses of ``agentic_rl.algos.losses``, Adam in plain tensor ops, target lerp), wrapped in
  ``torch.compile`` (inductor, CPU, ``dynamic=False``). The Gaussian noise is an input.

"first call s" is the wall time of the first update (for ``compiled``: tracing + inductor
compile, with a fresh inductor cache unless ``--warm-cache``; for ``fused``: after the C++
extension was loaded, whose time is in the note). updates/s is measured after a warm-up over
at least ``--seconds``, with the same batch every update and fresh noise (drawn inside the
timed loop for every path). Parity: from the eager learner's weights, normaliser statistics and
generator state (so the noise is the same draws the learner makes), one step of the pure
function run eagerly is compared with one ``compiled`` step and with one ``SAC.update`` of the
eager learner (actor, critic, target critic, log alpha; rtol 1e-4, atol 1e-5).

    python benchmarks/compile_update.py --seconds 3 --threads 1
    python benchmarks/compile_update.py --hidden 64,64 --seconds 1 --out /tmp/compile.json
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

if "--warm-cache" not in sys.argv:  # before torch reads it: time a cold inductor compile
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor_")
    atexit.register(shutil.rmtree, os.environ["TORCHINDUCTOR_CACHE_DIR"], ignore_errors=True)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.func import functional_call, grad_and_value  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import markdown_table, write_json  # noqa: E402

from agentic_rl.algos import losses  # noqa: E402
from agentic_rl.algos.sac import SAC, SACConfig  # noqa: E402
from agentic_rl.nets.actors import gaussian_log_prob, tanh_log_det_jacobian  # noqa: E402

OBS, GOAL, ACT, BATCH = 10, 3, 4, 256  # FetchReach
SPACES = {"obs_dim": OBS, "goal_dim": GOAL, "act_dim": ACT,
          "action_low": -np.ones(ACT, np.float32), "action_high": np.ones(ACT, np.float32)}


def make_learner(hidden: list[int], fused: bool, seed: int = 0) -> SAC:
    """A SAC learner with non-trivial normaliser statistics (same for every seed-equal call)."""
    torch.manual_seed(seed)
    learner = SAC(SACConfig(batch_size=BATCH, hidden_sizes=hidden, fused_update=fused), SPACES)
    if not fused:
        learner.manual_gradients = False  # the autograd reference path
    g = torch.Generator().manual_seed(seed + 1)
    learner.observe({"observation": torch.randn(500, OBS, generator=g) * 2 + 1,
                     "desired_goal": torch.randn(500, GOAL, generator=g) * 0.1 + 1,
                     "achieved_goal": torch.randn(500, GOAL, generator=g) * 0.1 + 1})
    return learner


def make_batch(seed: int = 2) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"obs": torch.randn(BATCH, OBS, generator=g) * 2 + 1,
            "next_obs": torch.randn(BATCH, OBS, generator=g) * 2 + 1,
            "desired_goal": torch.randn(BATCH, GOAL, generator=g) * 0.1 + 1,
            "action": torch.rand(BATCH, ACT, generator=g) * 2 - 1,
            "reward": -(torch.rand(BATCH, generator=g) > 0.3).float(),
            "terminated": torch.zeros(BATCH)}


def pure_state(learner: SAC) -> tuple[dict, dict, dict]:
    """``params`` (``actor.*``, ``critic.*``, ``log_alpha``, ``target.*``), ``buffers`` (the
    normalisers' float32 mean / scale) and a fresh Adam state, all copies of the learner's."""
    params = {f"{prefix}.{name}": p.detach().clone() for prefix, module in
              (("actor", learner.actor), ("critic", learner.critic),
               ("target", learner.target_critic)) for name, p in module.named_parameters()}
    params["log_alpha"] = learner.log_alpha.detach().clone()
    (obs_mean, obs_scale, _), (goal_mean, goal_scale, _) = (
        learner.obs_normalizer.affine(), learner.goal_normalizer.affine())
    buffers = {"obs_mean": obs_mean.clone(), "obs_scale": obs_scale.clone(),
               "goal_mean": goal_mean.clone(), "goal_scale": goal_scale.clone()}
    trainable = [k for k in params if not k.startswith("target.")]
    adam = {"step": torch.zeros(()), **{f"m.{k}": torch.zeros_like(params[k]) for k in trainable},
            **{f"v.{k}": torch.zeros_like(params[k]) for k in trainable}}
    return params, buffers, adam


def make_pure_update(learner: SAC):
    """The pure update for ``learner``'s modules and hyper-parameters (``noise [2, B, act]``:
    the draws for ``a' ~ pi(s')``, then for ``a ~ pi(s)``, in ``autograd_gradients``' order)."""
    actor, critic, cfg = learner.actor, learner.critic, learner.config
    gamma, tau, target_entropy = cfg.gamma, cfg.tau, learner.target_entropy
    clip = learner.obs_normalizer.clip
    group = learner.optimizer.param_groups[0]
    (beta1, beta2), eps = group["betas"], group["eps"]
    lr_of = {"actor": cfg.actor_lr, "critic": cfg.critic_lr, "log_alpha": cfg.alpha_lr}

    def sub(params: dict, prefix: str, detach: bool = False) -> dict:
        n = len(prefix) + 1
        return {k[n:]: (v.detach() if detach else v) for k, v in params.items()
                if k.startswith(prefix + ".")}

    def sample(actor_params: dict, x: torch.Tensor, noise: torch.Tensor):
        """``TanhGaussianActor.sample`` with the noise given."""
        mean, log_std = functional_call(actor, actor_params, (x,))
        std = log_std.exp()
        pre_tanh = mean + std * noise
        log_prob = gaussian_log_prob(noise, log_std) - tanh_log_det_jacobian(pre_tanh)
        return torch.tanh(pre_tanh), log_prob, std

    def total_loss(trainable: dict, target: dict, x, next_x, batch, noise):
        alpha = trainable["log_alpha"].detach().exp()
        next_action, next_log_prob, _ = sample(sub(trainable, "actor", True), next_x, noise[0])
        next_q = functional_call(critic, target, (next_x, next_action))
        q_target = losses.soft_q_target(batch["reward"], batch["terminated"], next_q,
                                        next_log_prob, alpha, gamma).detach()
        q = functional_call(critic, sub(trainable, "critic"), (x, batch["action"]))
        critic_loss = losses.critic_loss(q, q_target)
        action, log_prob, std = sample(sub(trainable, "actor"), x, noise[1])
        q_pi = functional_call(critic, sub(trainable, "critic", True), (x, action))  # frozen
        actor_loss = losses.sac_actor_loss(q_pi, log_prob, alpha)
        alpha_loss = losses.temperature_loss(trainable["log_alpha"], log_prob, target_entropy)
        metrics = {"critic_loss": critic_loss.detach(), "actor_loss": actor_loss.detach(),
                   "alpha_loss": alpha_loss.detach(), "q_mean": q.detach().mean(),
                   "entropy": -log_prob.detach().mean(), "policy_std": std.detach().mean(),
                   "alpha": alpha}
        return critic_loss + actor_loss + alpha_loss, metrics

    def pure_update(params: dict, buffers: dict, adam: dict, batch: dict, noise: torch.Tensor):
        goal = ((batch["desired_goal"] - buffers["goal_mean"]) * buffers["goal_scale"]).clamp(
            -clip, clip)
        x, next_x = (torch.cat([((batch[key] - buffers["obs_mean"]) * buffers["obs_scale"])
                                .clamp(-clip, clip), goal], dim=-1) for key in ("obs", "next_obs"))
        trainable = {k: v for k, v in params.items() if not k.startswith("target.")}
        grads, (_, metrics) = grad_and_value(total_loss, has_aux=True)(
            trainable, sub(params, "target"), x, next_x, batch, noise)
        step = adam["step"] + 1  # torch's Adam (fused kernel) arithmetic
        step_size = -1.0 / (1 - beta1 ** step)
        bias2_sqrt = (1 - beta2 ** step).sqrt()
        # Outputs keep the inputs' key order: fed back in, they hit the same compiled graph.
        new_params, new_adam = dict.fromkeys(params), dict.fromkeys(adam)
        new_adam["step"] = step
        for key, grad in grads.items():
            m = adam[f"m.{key}"].lerp(grad, 1 - beta1)
            v = adam[f"v.{key}"] * beta2 + (1 - beta2) * grad * grad
            lr = lr_of[key.split(".")[0]]
            new_params[key] = params[key] + (lr * step_size) * m / (v.sqrt() / bias2_sqrt + eps)
            new_adam[f"m.{key}"], new_adam[f"v.{key}"] = m, v
        for key, value in params.items():
            if key.startswith("target."):  # Polyak update towards the new online critic
                new_params[key] = value.lerp(new_params["critic." + key[7:]], tau)
        return new_params, new_adam, metrics

    return pure_update


def max_diff(a: dict, b: dict) -> tuple[float, bool]:
    """Largest absolute difference over all parameters, and whether all are allclose."""
    diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    return diff, all(torch.allclose(a[k], b[k], rtol=1e-4, atol=1e-5) for k in a)


def rate(step, seconds: float, warmup: float = 0.3) -> float:
    """Updates/s of ``step()`` over at least ``seconds`` after ``warmup`` seconds of calls."""
    for budget in (warmup, seconds):
        count, started = 0, time.perf_counter()
        while time.perf_counter() - started < budget:
            step()
            count += 1
    return count / (time.perf_counter() - started)


def timed(fn):
    started = time.perf_counter()
    return fn(), time.perf_counter() - started


def measure(hidden: list[int], seconds: float) -> list[dict]:
    batch, rows = make_batch(), []
    noise_gen = torch.Generator().manual_seed(3)

    def row(path, first, ups, note, **extra):
        return {"hidden": hidden, "path": path, "first_call_s": first, "updates_per_s": ups,
                "note": note, **extra}

    fused = make_learner(hidden, fused=True)
    calls, load_s = timed(fused.fused)
    if calls is None:
        rows.append(row("fused", None, None, "unavailable: fused() is None (extension not built)"))
    else:
        _, first = timed(lambda: fused.update(batch))
        rows.append(row("fused", first, rate(lambda: fused.update(batch), seconds),
                        f"extension load {load_s:.2f} s"))

    # eager (and the parity reference)
    eager = make_learner(hidden, fused=False)
    params, buffers, adam = pure_state(eager)
    g = torch.Generator().set_state(eager.generator.get_state())  # the learner's next draws
    noise = torch.stack([torch.randn(BATCH, ACT, generator=g) for _ in range(2)])
    pure_update = make_pure_update(eager)
    pure_params, _, _ = pure_update(params, buffers, adam, batch, noise)
    _, first = timed(lambda: eager.update(batch))
    learner_diff, learner_ok = max_diff(pure_params, pure_state(eager)[0])
    rows.append(row("eager", first, rate(lambda: eager.update(batch), seconds),
                    f"pure eager fn vs SAC.update (same noise): max abs diff {learner_diff:.2e}"
                    f"{'' if learner_ok else ' NOT allclose'}",
                    parity_vs_learner={"max_abs_diff": learner_diff, "allclose": learner_ok}))

    # compiled
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()  # graph counts per hidden size
    compiled = torch.compile(pure_update, dynamic=False)
    try:
        out, first = timed(lambda: compiled(params, buffers, adam, batch, noise))
        diff, ok = max_diff(out[0], pure_params)
        state = list(out[:2])

        def step() -> None:
            step_noise = torch.randn(2, BATCH, ACT, generator=noise_gen)
            state[0], state[1], _ = compiled(state[0], buffers, state[1], batch, step_noise)

        ups = rate(step, seconds)
        counters = torch._dynamo.utils.counters
        graphs, breaks = counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())
        rows.append(row("compiled", first, ups, f"vs pure eager fn: max abs diff {diff:.2e}"
                        f"{'' if ok else ' NOT allclose'}; {graphs} graph(s), {breaks} graph "
                        "break(s)",
                        parity_vs_pure_eager={"max_abs_diff": diff, "allclose": ok},
                        graphs=graphs, graph_breaks=breaks))
    except Exception as error:  # noqa: BLE001 - report any compile failure, keep the rest
        text = " ".join(f"{type(error).__name__}: {error}".split())[:300]
        rows.append(row("compiled", None, None, f"compiled path failed: {text}"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", nargs="+", default=["64,64", "256,256"],
                        help="hidden sizes, one comma-separated list per network size")
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per path")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warm-cache", action="store_true",
                        help="use the default (possibly warm) inductor cache")
    parser.add_argument("--out", default="benchmarks/results/compile_update.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message=".*autograd \\(reference\\) update.*")
    rows = [r for h in args.hidden for r in measure([int(w) for w in h.split(",")], args.seconds)]
    print(markdown_table(
        ["hidden", "path", "first call s", "updates/s", "note"],
        [[r["hidden"], r["path"], "-" if r["first_call_s"] is None else f"{r['first_call_s']:.3f}",
          "-" if r["updates_per_s"] is None else f"{r['updates_per_s']:.0f}", r["note"]]
         for r in rows]))
    print(f"\ntorch {torch.__version__}, {args.threads} thread(s), batch {BATCH}, "
          f"load average {os.getloadavg()[0]:.2f}")
    write_json(args.out, {"torch": torch.__version__, "threads": args.threads, "batch": BATCH,
                          "dims": {"obs": OBS, "goal": GOAL, "act": ACT},
                          "seconds": args.seconds, "rows": rows,
                          "load_average": os.getloadavg()[0]})


if __name__ == "__main__":
    main()

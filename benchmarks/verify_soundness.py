"""Soundness, tightness and speed of the verifier (issue: verification, SPEC V4).

Usage::

    python benchmarks/verify_soundness.py --json out.json [--actor actor.safetensors]
        [--prefix actor.] [--activation relu] [--nets 200] [--seed 0]

* ``samples_outside_bounds``: over ``--nets`` random small networks (Linear / ReLU / Tanh /
  LayerNorm / Clamp, widths 2-8) and random boxes, how many of 10,000 sampled inputs per network
  (plus the box corners' low/high points) fall outside the IBP or CROWN bounds (float64, 1e-9
  tolerance). Must be 0.
* ``false_proofs``: on the same networks, ``verify_action_property`` on ``y_0 <= t`` with ``t``
  spread around the sampled maximum; a false proof is ``proved`` while a sample violates. Also
  ``false_counterexamples``: ``falsified`` with a point that does not violate. Both must be 0.
* ``tightness_ratio_crown_vs_interval``: mean width of IBP bounds / mean width of CROWN bounds of
  the deterministic ``TanhGaussianActor(13, 4, [256, 256])`` with the normaliser layers in front,
  over +-0.01 boxes of raw inputs around 20 states.
* ``max_verify_seconds``: the slowest proof/falsification of an action-bound property
  ``|a - a(centre)| <= delta`` over those boxes (delta spread so that some are proved and some
  falsified).

``--actor FILE`` loads a safetensors file holding the actor's ``state_dict()`` (keys ``trunk.*``,
``mean_head.*``, ``log_std_head.*``, after stripping ``--prefix``) and, if present, the normaliser
statistics ``obs_norm.mean`` / ``obs_norm.var`` (plus ``goal_norm.mean`` / ``goal_norm.var``,
concatenated after them, when the observation normaliser alone is shorter than the actor input).
Box centres are then ``mean + sqrt(var) * z`` with ``z ~ N(0, 1)`` clipped to [-2, 2]. Without
``--actor`` a randomly initialised actor with an identity normaliser and ``z`` centres is used.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from torch import nn

from agentic_rl.nets.actors import TanhGaussianActor
from agentic_rl.verify.bounds import Clamp, crown_bounds, interval_bounds, normalised_policy
from agentic_rl.verify.prove import verify_action_property


def random_net(gen: torch.Generator, in_dim: int) -> nn.Sequential:
    """A random float64 MLP with 1-3 hidden layers of width 2-8 and mixed nonlinearities."""
    layers: list[nn.Module] = []
    width = in_dim
    depth = int(torch.randint(1, 4, (1,), generator=gen))
    for _ in range(depth):
        hidden = int(torch.randint(2, 9, (1,), generator=gen))
        kind = int(torch.randint(0, 4, (1,), generator=gen))
        layers.append(nn.Linear(width, hidden))
        layers.append([nn.ReLU(), nn.Tanh(), nn.LayerNorm(hidden), Clamp(-0.5, 0.7)][kind])
        width = hidden
    layers += [nn.Linear(width, 2), nn.Tanh()]
    net = nn.Sequential(*layers).double()
    with torch.no_grad():
        for param in net.parameters():
            param.copy_(torch.randn(param.shape, generator=gen, dtype=torch.float64))
    return net


def soundness(n_nets: int, seed: int) -> dict[str, int]:
    """Sampled-outside-bounds and false-proof counts over random networks and boxes."""
    gen = torch.Generator().manual_seed(seed)
    outside = false_proofs = false_cex = proved = falsified = 0
    for _ in range(n_nets):
        in_dim = int(torch.randint(1, 6, (1,), generator=gen))
        net = random_net(gen, in_dim)
        low = torch.randn(in_dim, generator=gen, dtype=torch.float64)
        high = low + 2 * torch.rand(in_dim, generator=gen, dtype=torch.float64)
        samples = low + (high - low) * torch.rand(10_000, in_dim, generator=gen, dtype=torch.float64)
        samples = torch.cat([samples, low[None], high[None]])
        with torch.no_grad():
            outputs = net(samples)
        for lo, hi in (interval_bounds(net, low, high), crown_bounds(net, low, high)):
            outside += int(((outputs < lo - 1e-9) | (outputs > hi + 1e-9)).any(-1).sum())
        spread = float(outputs[:, 0].max() - outputs[:, 0].min())
        offset = float(torch.empty(1).uniform_(-0.5, 0.2, generator=gen))
        threshold = float(outputs[:, 0].max()) + offset * spread
        result = verify_action_property(net, low, high, action_high=torch.tensor([threshold, 9.0]),
                                        max_seconds=0.3, generator=gen)
        violated = bool((outputs[:, 0] > threshold).any())
        proved += result.status == "proved"
        falsified += result.status == "falsified"
        false_proofs += result.status == "proved" and violated
        if result.status == "falsified":
            x = torch.tensor(result.counterexample, dtype=torch.float64)
            with torch.no_grad():
                false_cex += not bool(net(x[None])[0, 0] > threshold)
    return {"samples_outside_bounds": outside, "false_proofs": false_proofs,
            "false_counterexamples": false_cex, "soundness_nets": n_nets,
            "soundness_proved": proved, "soundness_falsified": falsified}


def load_actor(path: Path, prefix: str, activation: str) -> tuple[nn.Sequential, torch.Tensor, torch.Tensor]:
    """Actor policy net plus normaliser ``mean, var [in_dim]`` from a safetensors file."""
    from safetensors.torch import load_file

    tensors = load_file(str(path))
    state = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
    trunk = sorted({int(k.split(".")[1]) for k in state if k.startswith("trunk.")})
    linear = [i for i in trunk if state[f"trunk.{i}.weight"].dim() == 2]
    if not linear or "mean_head.weight" not in state:
        raise ValueError(f"{path}: no 'trunk.<i>.weight' / 'mean_head.weight' keys after prefix "
                         f"{prefix!r}; found {sorted(tensors)[:8]}...")
    hidden = [state[f"trunk.{i}.weight"].shape[0] for i in linear]
    in_dim = state[f"trunk.{linear[0]}.weight"].shape[1]
    layer_norm = len(trunk) > len(linear)
    actor = TanhGaussianActor(in_dim, state["mean_head.weight"].shape[0], hidden, activation,
                              layer_norm)
    actor.load_state_dict(state)
    mean, var = torch.zeros(in_dim, dtype=torch.float64), torch.ones(in_dim, dtype=torch.float64)
    if "obs_norm.mean" in tensors:
        mean, var = tensors["obs_norm.mean"].double(), tensors["obs_norm.var"].double()
        if mean.numel() < in_dim and "goal_norm.mean" in tensors:
            mean = torch.cat([mean, tensors["goal_norm.mean"].double()])
            var = torch.cat([var, tensors["goal_norm.var"].double()])
        if mean.numel() != in_dim:
            raise ValueError(f"{path}: normaliser has {mean.numel()} entries, actor input {in_dim}")
    return actor.deterministic_net(), mean, var


def actor_checks(net: nn.Sequential, mean: torch.Tensor, var: torch.Tensor, seed: int) -> dict:
    """Tightness ratio and slowest action-bound verification on +-0.01 boxes."""
    policy = normalised_policy(net, mean, var)
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(20, mean.numel(), generator=gen, dtype=torch.float64).clamp(-2, 2)
    centres = mean + var.sqrt() * z
    low, high = centres - 0.01, centres + 0.01
    ibp_lo, ibp_hi = interval_bounds(policy, low, high)
    crown_lo, crown_hi = crown_bounds(policy, low, high)
    ratio = float((ibp_hi - ibp_lo).mean() / (crown_hi - crown_lo).mean())
    seconds, statuses = [], {"proved": 0, "falsified": 0, "unknown": 0}
    for i in range(centres.shape[0]):
        with torch.no_grad():
            action = policy(centres[i : i + 1].float())[0].double()
        width = float((crown_hi[i] - crown_lo[i]).max())
        for delta in (0.25 * width, 0.5 * width, 0.75 * width, 1.5 * width):
            result = verify_action_property(policy, low[i], high[i], action_low=action - delta,
                                            action_high=action + delta, max_seconds=1.0,
                                            generator=gen)
            seconds.append(result.seconds)
            statuses[result.status] += 1
    return {"tightness_ratio_crown_vs_interval": ratio, "max_verify_seconds": max(seconds),
            "mean_verify_seconds": sum(seconds) / len(seconds), "verify_statuses": statuses,
            "mean_interval_width": float((ibp_hi - ibp_lo).mean()),
            "mean_crown_width": float((crown_hi - crown_lo).mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, required=True, help="where to write the results")
    parser.add_argument("--actor", type=Path, help="safetensors with the actor state_dict")
    parser.add_argument("--prefix", default="", help="key prefix of the actor in --actor")
    parser.add_argument("--activation", default="relu", choices=["relu", "tanh"])
    parser.add_argument("--nets", type=int, default=200, help="random networks for soundness")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    results = soundness(args.nets, args.seed)
    if args.actor is not None:
        net, mean, var = load_actor(args.actor, args.prefix, args.activation)
        results["actor"] = str(args.actor)
    else:
        net = TanhGaussianActor(13, 4, [256, 256]).deterministic_net()
        mean, var = torch.zeros(13, dtype=torch.float64), torch.ones(13, dtype=torch.float64)
        results["actor"] = "random init TanhGaussianActor(13, 4, [256, 256]), identity normaliser"
    results.update(actor_checks(net, mean, var, args.seed))
    results["total_seconds"] = time.perf_counter() - start
    args.json.write_text(json.dumps(results, indent=2))
    width = max(len(k) for k in results)
    for key, value in results.items():
        print(f"{key:<{width}}  {value}")


if __name__ == "__main__":
    main()

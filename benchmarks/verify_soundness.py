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
  over boxes of half-width ``--radius`` (default 0.01) around 20 states, in raw input units or,
  with ``--radius-units std``, in units of each input's normaliser standard deviation.
* ``max_verify_seconds``: the slowest proof/falsification of an action-bound property
  ``|a - a(centre)| <= delta`` over those boxes (delta spread so that some are proved and some
  falsified; each query has a 1 s budget). Queries that end ``unknown`` at the budget are counted
  in ``verify_statuses`` and timed in ``max_seconds_including_unknown``.

* ``suite`` (``--suite N``): N queries of ``verify_suite.py``'s adversarial suite on float32
  policies (random, degenerate, deployed, LayerNorm, point, saturated, trained, closed loop):
  false proofs, counterexamples that fail to replay, proved / falsified rates, query times.

``--actor FILE`` loads a safetensors file (a checkpoint's ``model.safetensors`` works as is):
keys ``<prefix>actor.trunk.*`` / ``<prefix>actor.mean_head.*`` (or the bare ``actor.state_dict()``
keys directly under ``<prefix>``) and the normaliser statistics ``<prefix>obs_normalizer.mean/var``
plus ``<prefix>goal_normalizer.mean/var`` (``obs_norm.`` / ``goal_norm.`` also accepted); see
``agentic_rl.verify.policy.policy_from_tensors``. ``--prefix`` defaults to ``algo.`` (checkpoint
layout); pass ``--prefix ''`` for a file with ``actor.*`` and ``obs_norm.*`` at the top level.
Box centres are ``mean + std * z`` with ``z ~ N(0, 1)`` clipped to [-2, 2]. Without ``--actor`` a
randomly initialised actor with an identity normaliser is used (the output says so).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from torch import nn

from agentic_rl.nets.actors import TanhGaussianActor
from agentic_rl.verify.bounds import Clamp, crown_bounds, interval_bounds, normalised_policy
from agentic_rl.verify.policy import policy_from_tensors
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
        result = verify_action_property(net, low, high, action_high=torch.tensor([threshold, 9.0], dtype=torch.float64),
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


def load_actor(path: Path, prefix: str, activation: str) -> nn.Sequential:
    """The executed policy over raw inputs, normaliser layers in front, from a safetensors file."""
    from safetensors.torch import load_file

    return policy_from_tensors(load_file(str(path)), prefix=prefix, activation=activation)


def normaliser_stats(policy: nn.Sequential) -> tuple[torch.Tensor, torch.Tensor]:
    """``mean, std [d]`` recovered from the policy's leading ``Affine`` (x * scale + shift)."""
    scale, shift = policy[0].scale, policy[0].shift
    return -shift / scale, 1.0 / scale


def actor_checks(policy: nn.Sequential, seed: int, radius: float = 0.01,
                 units: str = "raw") -> dict:
    """Tightness ratio and slowest action-bound verification on small boxes of raw inputs."""
    mean, std = normaliser_stats(policy)
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(20, mean.numel(), generator=gen, dtype=torch.float64).clamp(-2, 2)
    centres = mean + std * z
    half_width = radius * (std if units == "std" else torch.ones_like(std))
    low, high = centres - half_width, centres + half_width
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
            seconds.append((result.seconds, result.status))
            statuses[result.status] += 1
    decided = [t for t, status in seconds if status != "unknown"] or [float("nan")]
    return {"tightness_ratio_crown_vs_interval": ratio, "max_verify_seconds": max(decided),
            "mean_verify_seconds": sum(decided) / len(decided), "verify_statuses": statuses,
            "max_seconds_including_unknown": max(t for t, _ in seconds),
            "mean_interval_width": float((ibp_hi - ibp_lo).mean()),
            "mean_crown_width": float((crown_hi - crown_lo).mean())}


def main() -> None:
    """Parse arguments, run the three measurements, print a table and write ``--json``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, required=True, help="where to write the results")
    parser.add_argument("--actor", type=Path, help="safetensors with the actor state_dict")
    parser.add_argument("--prefix", default="algo.",
                        help="prefix before actor./obs_normalizer./goal_normalizer. keys")
    parser.add_argument("--activation", default="relu", choices=["relu", "tanh"])
    parser.add_argument("--nets", type=int, default=200, help="random networks for soundness")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--radius", type=float, default=0.01, help="box half-width")
    parser.add_argument("--radius-units", choices=["raw", "std"], default="raw",
                        help="raw input units, or normaliser standard deviations")
    parser.add_argument("--suite", type=int, default=0,
                        help="also run this many queries of the adversarial suite "
                             "(verify_suite.py: float32 policies, judged by sampling and replay)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    results = soundness(args.nets, args.seed)
    if args.actor is not None:
        policy = load_actor(args.actor, args.prefix, args.activation)
        results["actor"] = str(args.actor)
    else:
        net = TanhGaussianActor(13, 4, [256, 256]).deterministic_net()
        policy = normalised_policy(net, torch.zeros(13), torch.ones(13))
        results["actor"] = "random init TanhGaussianActor(13, 4, [256, 256]), identity normaliser"
    results.update(actor_checks(policy, args.seed, args.radius, args.radius_units))
    results["box"] = f"+-{args.radius} ({args.radius_units} units)"
    if args.suite:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from verify_suite import suite

        results["suite"] = suite(args.suite, args.seed)
    results["total_seconds"] = time.perf_counter() - start
    args.json.write_text(json.dumps(results, indent=2))
    width = max(len(k) for k in results)
    for key, value in results.items():
        print(f"{key:<{width}}  {value}")


if __name__ == "__main__":
    main()

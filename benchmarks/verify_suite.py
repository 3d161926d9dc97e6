"""An adversarial query suite for ``agentic-rl verify`` (issue 20), checked against the policy
as it runs: every ``proved`` against dense sampling plus gradient search of the float32
network, every counterexample replayed (inside the region, in float64, then rounded as the
agent rounds its observation).

    python benchmarks/verify_suite.py --queries 600 --json F

Families (cycled): ``random`` float32 MLPs (ReLU / Tanh / LayerNorm / Clamp, widths 2-16),
``degenerate`` (huge weights, ReLU inputs crossing 0 by less than 1e-12), ``deployed`` (actors
rebuilt by ``policy_from_tensors`` from normalisers with var = 0 inputs and means float32
cannot represent, in an action box; counterexamples replayed through ``SAC.act``),
``layernorm`` (``TanhGaussianActor(layer_norm=True)``), ``point`` (point regions) and
``saturated`` (bounds at or near the tanh's limits), ``trained`` (a SAC actor trained on
PointReach for 1,500 steps by the library, replayed through its ``act``) and ``closed_loop``
(state invariants of random policies through ``x' = x + 0.05 a`` over 3 steps, judged on
dense rollouts). Each query is ``y_j <= t`` or
``y_j >= t`` with ``t`` the estimated extreme moved by a signed gap: ``+1e-2`` or more (true
with margin), ``-1e-3`` or more (false), or within 1e-6 (boundary-tight; only soundness
counts). ``tests/unit/test_verify_suite.py`` runs a small slice in the default tests.
Answers can differ a little between machines and loads: the counterexample search restarts for
as long as its share of the budget allows, so the random stream depends on the clock.
"""

from __future__ import annotations

import argparse
import atexit
import json
import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from agentic_rl.nets.actors import TanhGaussianActor
from agentic_rl.verify.layers import Clamp
from agentic_rl.verify.policy import policy_from_tensors
from agentic_rl.verify.prove import verify_action_property
from agentic_rl.verify.search import search_counterexample

FAMILIES = ("random", "degenerate", "deployed", "layernorm", "point", "saturated", "trained",
            "closed_loop")
MAX_SECONDS = 0.5


@dataclass
class Query:
    family: str
    net: nn.Module
    low: torch.Tensor
    high: torch.Tensor
    output: int
    upper: bool  # y_j <= threshold (else y_j >= threshold)
    actor: object = None  # a SAC learner that runs the policy (deployed family)


def _randn(gen, *shape, scale=1.0):
    return torch.randn(*shape, generator=gen, dtype=torch.float64) * scale


def random_mlp(gen: torch.Generator, in_dim: int, weight_scale: float = 1.0) -> nn.Sequential:
    layers: list[nn.Module] = []
    width = in_dim
    for _ in range(int(torch.randint(1, 4, (1,), generator=gen))):
        hidden = int(torch.randint(2, 17, (1,), generator=gen))
        kind = int(torch.randint(0, 4, (1,), generator=gen))
        layers += [nn.Linear(width, hidden),
                   [nn.ReLU(), nn.Tanh(), nn.LayerNorm(hidden), Clamp(-0.5, 0.7)][kind]]
        width = hidden
    net = nn.Sequential(*layers, nn.Linear(width, 2), nn.Tanh())
    with torch.no_grad():
        for param in net.parameters():
            param.copy_(torch.randn(param.shape, generator=gen) * weight_scale)
    return net


def make_query(family: str, gen: torch.Generator) -> Query:
    in_dim = int(torch.randint(1, 6, (1,), generator=gen))
    low = _randn(gen, in_dim)
    width = torch.rand(in_dim, generator=gen, dtype=torch.float64) * 0.5
    if family == "random":
        net = random_mlp(gen, in_dim)
    elif family == "degenerate":
        net = random_mlp(gen, in_dim, weight_scale=30.0)
        width = width * torch.tensor([1e-13, 1e-6, 1.0])[int(torch.randint(0, 3, (1,),
                                                                          generator=gen))]
    elif family == "layernorm":
        torch.manual_seed(int(torch.randint(0, 2**31, (1,), generator=gen)))
        net = TanhGaussianActor(in_dim, 2, [32, 32], layer_norm=True).deterministic_net()
        width = width * 0.1
    elif family == "saturated":
        net = random_mlp(gen, in_dim, weight_scale=4.0)
    elif family == "point":
        net, width = random_mlp(gen, in_dim), torch.zeros(in_dim, dtype=torch.float64)
    elif family == "trained":
        return trained_query(gen)
    elif family == "closed_loop":
        net, width = random_mlp(gen, 2, weight_scale=0.5), width[:1].expand(2) * 0.2
        low = _randn(gen, 2)
    else:
        return deployed_query(gen)
    output, upper = int(torch.randint(0, 2, (1,), generator=gen)), bool(
        torch.randint(0, 2, (1,), generator=gen))
    return Query(family, net, low, low + width, output, upper)


def deployed_query(gen: torch.Generator) -> Query:
    """A SAC actor behind a normaliser with a zero-variance input and large means, rescaled to
    an action box; the verified network is rebuilt from its tensors."""
    import numpy as np

    from agentic_rl.algos.sac import SAC, SACConfig

    obs_dim, act_dim = 4, 2
    torch.manual_seed(int(torch.randint(0, 2**31, (1,), generator=gen)))
    spaces = {"obs_dim": obs_dim, "goal_dim": 0, "act_dim": act_dim,
              "action_low": np.array([-2.0, 0.1], np.float32),
              "action_high": np.array([1.0, 0.7], np.float32)}
    learner = SAC(SACConfig(hidden_sizes=[16, 16], fused_update=False), spaces)
    mean = _randn(gen, obs_dim, scale=500.0) + 0.1
    samples = mean + _randn(gen, 64, obs_dim) * torch.tensor([0.0, 0.3, 2.0, 0.01])
    learner.obs_normalizer.update(samples)
    tensors = {f"algo.actor.{k}": v for k, v in learner.actor.state_dict().items()}
    tensors |= {f"algo.obs_normalizer.{k}": v
                for k, v in learner.obs_normalizer.state_dict().items()}
    net = policy_from_tensors(tensors, action_low=spaces["action_low"],
                              action_high=spaces["action_high"])
    low = samples[0] - 0.01 * torch.rand(obs_dim, generator=gen, dtype=torch.float64)
    high = low + 0.02 * torch.rand(obs_dim, generator=gen, dtype=torch.float64)
    return Query("deployed", net, low, high, int(torch.randint(0, 2, (1,), generator=gen)),
                 bool(torch.randint(0, 2, (1,), generator=gen)), learner)


_TRAINED: dict = {}


def trained_learner():
    """A SAC learner trained on PointReach by the library (once per process) and its policy
    rebuilt from the checkpoint."""
    if not _TRAINED:
        import tempfile

        from safetensors.torch import load_file

        from agentic_rl.config import validate_config
        from agentic_rl.data.checkpoint import latest_checkpoint
        from agentic_rl.train.run import train
        from agentic_rl.verify.replay import deployed_learner

        raw = {"algorithm": {"name": "sac", "hidden_sizes": [32, 32], "batch_size": 64},
               "environment": {"name": "agentic_rl/PointReach-v0"},
               "training": {"total_timesteps": 1500, "learning_starts": 200,
                            "eval_freq": 1500, "num_eval_episodes": 5,
                            "checkpoint_freq": 1500, "seed": 0}}
        folder = Path(tempfile.mkdtemp(prefix="verify_suite_"))
        atexit.register(shutil.rmtree, folder, True)  # the run is only needed in this process
        train(validate_config(raw), folder / "run", show_progress=False)
        checkpoint = latest_checkpoint(folder / "run")
        learner, _ = deployed_learner(raw, checkpoint)
        tensors = load_file(str(checkpoint / "model.safetensors"))
        low, high = learner.action_box.low.numpy(), learner.action_box.high.numpy()
        _TRAINED.update(learner=learner, net=policy_from_tensors(
            tensors, action_low=low, action_high=high))
    return _TRAINED["learner"], _TRAINED["net"]


def trained_query(gen: torch.Generator) -> Query:
    learner, net = trained_learner()
    centre = torch.cat([_randn(gen, 2, scale=0.5), _randn(gen, 2, scale=0.5)])
    half = torch.rand(4, generator=gen, dtype=torch.float64) * 0.05
    return Query("trained", net, centre - half, centre + half,
                 int(torch.randint(0, 2, (1,), generator=gen)),
                 bool(torch.randint(0, 2, (1,), generator=gen)), learner)


def deployed_outputs(query: Query, x: torch.Tensor) -> torch.Tensor:
    """``[N, k]`` float64 outputs of the policy that runs at float64 inputs ``x [N, d]``."""
    with torch.no_grad():
        if query.actor is not None:
            obs_dim = query.actor.obs_normalizer.mean.shape[0]
            obs = {"observation": x[:, :obs_dim].float(), "desired_goal": x[:, obs_dim:].float(),
                   "is_first": torch.ones(x.shape[0], dtype=torch.bool)}
            return query.actor.act(obs, None, "deterministic")[0].double()
        return query.net(x.float()).double()


def extreme(query: Query, gen: torch.Generator) -> float:
    """The largest (``upper``) or smallest output ``j`` found by dense sampling and search."""
    d = query.low.numel()
    x = query.low + (query.high - query.low) * torch.rand(20_000, d, generator=gen,
                                                          dtype=torch.float64)
    x = torch.cat([x, query.low[None], query.high[None]])
    values = deployed_outputs(query, x)[:, query.output]
    sign = 1.0 if query.upper else -1.0
    spec = torch.zeros(1, 2, dtype=torch.float64)
    spec[0, query.output] = sign
    found = search_counterexample(query.net, query.low, query.high, spec,
                                  torch.tensor([sign * 1e9]), starts=32, steps=40,
                                  generator=gen)
    searched = deployed_outputs(query, found.point[None].double())[0, query.output]
    return float(max((sign * values).max(), sign * searched)) * sign


STEP = 0.05  # closed loop: x' = x + STEP * a
HORIZON = 3


def rollout_extreme(query: Query, starts: torch.Tensor) -> torch.Tensor:
    """``[N]``: the largest (``upper``) or smallest state entry ``j`` over ``HORIZON`` steps of
    the float32 policy from float64 ``starts [N, 2]``."""
    states, values = starts, [starts[:, query.output]]
    for _ in range(HORIZON):
        states = states + STEP * deployed_outputs(query, states)
        values.append(states[:, query.output])
    stacked = torch.stack(values)
    return stacked.amax(0) if query.upper else stacked.amin(0)


def run_closed_loop(query: Query, gap: float, gen: torch.Generator) -> dict:
    import numpy as np

    from agentic_rl.verify.closed_loop import verify_closed_loop
    from agentic_rl.verify.step_model import AffineStepModel

    starts = query.low + (query.high - query.low) * torch.rand(
        20_000, 2, generator=gen, dtype=torch.float64)
    sign = 1.0 if query.upper else -1.0
    top = float((sign * rollout_extreme(query, starts)).max()) * sign
    threshold = top + sign * gap
    invariant_low, invariant_high = np.full(2, -1e9), np.full(2, 1e9)
    (invariant_high if query.upper else invariant_low)[query.output] = threshold
    model = AffineStepModel(np.arange(2), np.eye(2), STEP * np.eye(2), np.zeros(2))
    start = time.perf_counter()
    result = verify_closed_loop(query.net, model, query.low, query.high,
                                (invariant_low, invariant_high), HORIZON,
                                max_seconds=MAX_SECONDS, generator=gen)
    record = {"family": query.family, "gap": gap, "status": result.status,
              "seconds": time.perf_counter() - start}
    if result.status == "proved":
        record["false_proof"] = gap < 0
    if result.status == "falsified":
        x = torch.tensor(result.counterexample, dtype=torch.float64)
        inside = bool(((x >= query.low) & (x <= query.high)).all())
        value = float(rollout_extreme(query, x[None])[0])
        record["replays"] = inside and sign * (value - threshold) > 0
    return record


def run_query(query: Query, gap: float, gen: torch.Generator) -> dict:
    """Verify ``y_j <= t`` (or ``>= t``) with ``t`` the extreme moved outwards by ``gap``
    (negative: into the reachable range, a false property) and judge the answer."""
    if query.family == "closed_loop":
        return run_closed_loop(query, gap, gen)
    top = extreme(query, gen)
    sign = 1.0 if query.upper else -1.0
    threshold = top + sign * gap
    bound = torch.full((2,), sign * torch.inf, dtype=torch.float64)
    bound[query.output] = threshold
    kwargs = {"action_high": bound} if query.upper else {"action_low": bound}
    start = time.perf_counter()
    result = verify_action_property(query.net, query.low, query.high, max_seconds=MAX_SECONDS,
                                    generator=gen, **kwargs)
    seconds = time.perf_counter() - start
    record = {"family": query.family, "gap": gap, "status": result.status, "seconds": seconds}
    if result.status == "proved":  # a violation anywhere sampled is a false proof
        record["false_proof"] = gap < 0 or sign * (top - threshold) > 0
    if result.status == "falsified":
        x = torch.tensor(result.counterexample, dtype=torch.float64)
        inside = bool(((x >= query.low) & (x <= query.high)).all())
        value = float(deployed_outputs(query, x[None])[0, query.output])
        record["replays"] = inside and sign * (value - threshold) > 0
    return record


def gap_for(index: int, gen: torch.Generator) -> float:
    kind = index % 5
    magnitude = float(torch.rand(1, generator=gen)) * 0.05
    if kind in (0, 1):
        return 1e-2 + magnitude  # true with margin >= 1e-2
    if kind in (2, 3):
        return -(1e-3 + magnitude)  # false with violation >= 1e-3
    return (float(torch.rand(1, generator=gen)) - 0.5) * 2e-6  # boundary-tight


def suite(queries: int, seed: int) -> dict:
    gen = torch.Generator().manual_seed(seed)
    records = []
    for index in range(queries):
        family = FAMILIES[index % len(FAMILIES)]
        records.append(run_query(make_query(family, gen), gap_for(index // len(FAMILIES), gen),
                                 gen))
    return summarise(records)


def _rate(records: list[dict], status: str) -> float | None:
    return sum(r["status"] == status for r in records) / len(records) if records else None


def summarise(records: list[dict]) -> dict:
    true = [r for r in records if r["gap"] >= 1e-2]
    false = [r for r in records if r["gap"] <= -1e-3]
    seconds = [r["seconds"] for r in records]
    per_family = {family: {
        "queries": sum(r["family"] == family for r in records),
        "proved_rate_true": _rate([r for r in true if r["family"] == family], "proved"),
        "falsified_rate_false": _rate([r for r in false if r["family"] == family], "falsified")}
        for family in FAMILIES}
    return {"queries": len(records),
            "false_proofs": sum(r.get("false_proof", False) for r in records),
            "counterexamples_not_replaying": sum(r.get("replays") is False for r in records),
            "proved_rate_true_with_margin": _rate(true, "proved"),
            "falsified_rate_false_by_1e-3": _rate(false, "falsified"),
            "median_seconds": statistics.median(seconds), "max_seconds": max(seconds),
            "over_budget": sum(s > MAX_SECONDS * 1.1 for s in seconds),
            "over_budget_families": sorted({r["family"] for r in records
                                            if r["seconds"] > MAX_SECONDS * 1.1}),
            "statuses": {s: sum(r["status"] == s for r in records)
                         for s in ("proved", "falsified", "unknown")},
            "per_family": per_family}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    result = suite(args.queries, args.seed)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return result


if __name__ == "__main__":
    sys.exit(main() is None)

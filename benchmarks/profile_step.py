"""Where one off-policy training step spends its time: collect, store, normalise, sample,
update. Wall-clock per phase over N steps after a warm-up, on FetchReach-v4.

    python benchmarks/profile_step.py --net 64,64 --steps 500 [--algo opd] [--json FILE]
    python benchmarks/profile_step.py --net 256,256 --update-parts   # also split the update
    python benchmarks/profile_step.py --net 64,64 --python-update    # sac_grads, not the C++ call

``--update-parts`` times the parts of the Python gradient path (``sac_grads``), so it implies
``--python-update``; the fused C++ update (the default) is one call.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import markdown_table, write_json  # noqa: E402

from agentic_rl.collect.collector import Collector  # noqa: E402
from agentic_rl.config import validate_config  # noqa: E402
from agentic_rl.train.setup import build_run  # noqa: E402


UPDATE_PARTS = {"actor_forward": "actor forward [s'; s]", "critic_forward":
                "critic forward [(s,a); (s,pi(s))]", "critic_backward": "critic backward",
                "actor_backward": "actor backward"}


def time_update_parts(algo, seconds: dict[str, float]) -> None:
    """Accumulate wall-clock of the update's parts (hand-written gradient path) into
    ``seconds`` by wrapping them; the rest of ``sac_gradients`` is elementwise glue."""
    from agentic_rl.algos import sac_grads

    def timed(name, function):
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            result = function(*args, **kwargs)
            seconds[name] += time.perf_counter() - started
            return result
        return wrapper

    for attribute, name in UPDATE_PARTS.items():
        setattr(sac_grads, attribute, timed(name, getattr(sac_grads, attribute)))
    sac_grads.sac_gradients = timed("sac_gradients", sac_grads.sac_gradients)
    algo.target_critic.forward = timed("target critic forward", algo.target_critic.forward)
    algo.optimizer.apply_gradients = timed("optimiser step", algo.optimizer.apply_gradients)


def profile(net: list[int], steps: int, algo: str, warmup: int = 300,
            update_parts: bool = False, python_update: bool = False
            ) -> tuple[dict[str, float], dict[str, float]]:
    folder = tempfile.mkdtemp()
    extra = {"prototype_batch_size": 256} if algo == "opd" else {}
    extra |= {"hidden_sizes": net, "fused_update": not (python_update or update_parts)}
    if algo == "opd":
        extra["prototype_data_path"] = str(Path(folder) / "demos.npz")
    config = validate_config({
        "algorithm": {"name": algo, "batch_size": 256, **extra},
        "environment": {"name": "FetchReach-v4"}, "training": {"torch_threads": 1}})
    run = build_run(config, Path(folder))
    collector = Collector(run.envs, run.rng)
    collector.reset_all()
    seconds: dict[str, float] = defaultdict(float)
    parts: dict[str, float] = defaultdict(float)
    if update_parts:
        time_update_parts(run.algo, parts)
    for step in range(warmup + steps):
        if step == warmup:
            parts.clear()
        marks = [time.perf_counter()]
        obs = collector.policy_obs()
        env_action, _, extras = run.algo.act(obs, None, "explore")
        marks.append(time.perf_counter())
        transition, end, finished = collector.step(env_action, extras["unit_action"])
        marks.append(time.perf_counter())
        observed = run.storage.add(collector.record(transition, extras, end, finished, obs))
        marks.append(time.perf_counter())
        for episode in observed:
            run.algo.observe(episode)
        marks.append(time.perf_counter())
        if run.storage.replay.num_sampleable() == 0 and not run.storage.warm:
            continue
        batch = run.storage.sample(None, run.sample_generator)
        marks.append(time.perf_counter())
        run.algo.update(batch)
        marks.append(time.perf_counter())
        if step >= warmup:
            for name, (a, b) in zip(("act", "env step", "store", "episode end", "sample",
                                     "update"), zip(marks, marks[1:])):
                seconds[name] += b - a
    if parts:  # the glue: sac_gradients minus its timed parts
        inner = sum(v for k, v in parts.items() if k not in ("sac_gradients", "optimiser step"))
        parts["elementwise glue (log-probs, losses, dL/dQ, ...)"] = parts.pop("sac_gradients") - inner
    return ({name: 1000 * value / steps for name, value in seconds.items()},
            {name: 1000 * value / steps for name, value in parts.items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--net", default="64,64")
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--algo", default="sac", choices=("sac", "opd"))
    parser.add_argument("--update-parts", action="store_true",
                        help="also time the parts of the update (Python gradient path)")
    parser.add_argument("--python-update", action="store_true",
                        help="the Python gradients (sac_grads) instead of the fused C++ call")
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    net = [int(x) for x in args.net.split(",")]
    ms, parts = profile(net, args.steps, args.algo, update_parts=args.update_parts,
                        python_update=args.python_update)
    total = sum(ms.values())
    print(markdown_table(["phase", "ms per env step", "share"],
                         [[k, f"{v:.2f}", f"{v / total:.0%}"] for k, v in ms.items()]
                         + [["total", f"{total:.2f}", "100%"]]))
    if parts:
        print()
        print(markdown_table(["part of the update", "ms"],
                             [[k, f"{v:.2f}"] for k, v in parts.items()]))
    print(f"\nload average {os.getloadavg()[0]:.2f}")
    write_json(args.json, {"net": net, "algo": args.algo, "python_update": args.python_update,
                           "ms_per_step": ms, "total_ms": total,
                           "update_parts_ms": parts, "load_average": os.getloadavg()[0]})


if __name__ == "__main__":
    main()

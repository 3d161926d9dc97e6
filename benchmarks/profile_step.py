"""Where one off-policy training step spends its time: collect, store, normalise, sample,
update. Wall-clock per phase over N steps after a warm-up, on FetchReach-v4.

    python benchmarks/profile_step.py --net 64,64 --steps 500 [--algo opd] [--json FILE]
"""

from __future__ import annotations

import argparse
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
from agentic_rl.train.loop import on_episode_end, sample_batch  # noqa: E402
from agentic_rl.train.setup import build_run  # noqa: E402


def profile(net: list[int], steps: int, algo: str, warmup: int = 300) -> dict[str, float]:
    folder = tempfile.mkdtemp()
    extra = {"prototype_batch_size": 256} if algo == "opd" else {}
    agent = {"hidden_sizes": net}
    if algo == "opd":
        agent["prototype_data_path"] = str(Path(folder) / "demos.npz")
    config = validate_config({
        "algorithm": {"name": algo, "batch_size": 256, **extra}, "agent": agent,
        "environment": {"name": "FetchReach-v4"}, "training": {"torch_threads": 1}})
    run = build_run(config, Path(folder))
    collector = Collector(run.envs, run.rng)
    collector.reset_all()
    run.collector_goals = collector.obs["desired_goal"]
    seconds: dict[str, float] = defaultdict(float)
    for step in range(warmup + steps):
        marks = [time.perf_counter()]
        env_action, _, extras = run.algo.act(collector.obs, None, deterministic=False)
        marks.append(time.perf_counter())
        transition, end, finished = collector.step(env_action, extras["unit_action"])
        marks.append(time.perf_counter())
        run.replay.add(transition, end)
        marks.append(time.perf_counter())
        for episode in finished:
            on_episode_end(run, episode)
        marks.append(time.perf_counter())
        if run.replay.num_sampleable() == 0 and run.demo_replay is None:
            continue
        batch = sample_batch(run, 256)
        marks.append(time.perf_counter())
        run.algo.update(batch)
        marks.append(time.perf_counter())
        if step >= warmup:
            for name, (a, b) in zip(("act", "env step", "store", "episode end", "sample",
                                     "update"), zip(marks, marks[1:])):
                seconds[name] += b - a
    return {name: 1000 * value / steps for name, value in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--net", default="64,64")
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--algo", default="sac", choices=("sac", "opd"))
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    net = [int(x) for x in args.net.split(",")]
    ms = profile(net, args.steps, args.algo)
    total = sum(ms.values())
    print(markdown_table(["phase", "ms per env step", "share"],
                         [[k, f"{v:.2f}", f"{v / total:.0%}"] for k, v in ms.items()]
                         + [["total", f"{total:.2f}", "100%"]]))
    write_json(args.json, {"net": net, "algo": args.algo, "ms_per_step": ms, "total_ms": total})


if __name__ == "__main__":
    main()

"""Training throughput: our SAC against Stable-Baselines3 SAC on FetchReach-v4.

Identical hyper-parameters (networks, batch 256, one gradient step per env step, 256 warm-up
steps, gamma, tau, learning rates, no observation normalisation, same torch thread count), runs
alternated within one invocation; reports env steps/s of the whole loop (collect + store +
sample + update) and the ratio, median over the repeated pairs.

    python benchmarks/speed_vs_sb3.py --steps 2000 --repeats 3 --json bench_out/speed.json
    python benchmarks/speed_vs_sb3.py --her --opd ...   # also HER-sampled SAC and OPD rows
    python benchmarks/speed_vs_sb3.py --overlap ...     # also ours with training.overlap_env
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import markdown_table, write_json  # noqa: E402

from agentic_rl.config import validate_config  # noqa: E402
from agentic_rl.envs.make import register_all  # noqa: E402
from agentic_rl.train.run import train  # noqa: E402

ENV_ID = "FetchReach-v4"
WARMUP = 256


def ours_steps_per_s(net: list[int], steps: int, variant: str, threads: int,
                     overlap: bool = False) -> float:
    algorithm = {"name": "opd" if variant == "opd" else "sac", "batch_size": 256,
                 "gamma": 0.95, "tau": 0.05,
                 "her": {"strategy": "future" if variant != "plain" else "none",
                         "relabel_ratio": 0.8}}
    algorithm |= {"hidden_sizes": net, "actor_lr": 1e-3, "critic_lr": 1e-3, "alpha_lr": 1e-3}
    with tempfile.TemporaryDirectory() as folder:
        if variant == "opd":
            algorithm["prototype_batch_size"] = 256
            algorithm["prototype_data_path"] = str(Path(folder) / "demos.npz")
            algorithm["prototypes_in_replay"] = False
        config = validate_config({
            "algorithm": algorithm,
            "environment": {"name": ENV_ID, "normalize_obs": False, "normalize_goal": False},
            "training": {"total_timesteps": steps, "learning_starts": WARMUP,
                         "eval_freq": 10 * steps, "checkpoint_freq": 10 * steps,
                         "log_freq": steps, "num_eval_episodes": 1, "torch_threads": threads,
                         "overlap_env": overlap}})
        summary = train(config, Path(folder) / "run", show_progress=False)
    return steps / summary["wall_seconds"]


def sb3_steps_per_s(net: list[int], steps: int, variant: str, threads: int) -> float:
    import gymnasium as gym
    from stable_baselines3 import SAC, HerReplayBuffer
    from stable_baselines3.common.logger import Logger

    torch.set_num_threads(threads)
    register_all()
    her = {} if variant == "plain" else {
        "replay_buffer_class": HerReplayBuffer,
        "replay_buffer_kwargs": {"n_sampled_goal": 4, "goal_selection_strategy": "future"}}
    model = SAC("MultiInputPolicy", gym.make(ENV_ID), learning_rate=1e-3, buffer_size=steps + 1,
                batch_size=256, gamma=0.95, tau=0.05, learning_starts=WARMUP, train_freq=1,
                gradient_steps=1, policy_kwargs={"net_arch": net}, seed=0, verbose=0, **her)
    model.set_logger(Logger(None, []))  # no SB3-* log folder left in /tmp
    started = time.perf_counter()
    model.learn(total_timesteps=steps)
    return steps / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3, help="alternated pairs per row")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--nets", default="64,64;256,256")
    parser.add_argument("--her", action="store_true", help="add SAC+HER rows (vs SB3 SAC+HER)")
    parser.add_argument("--opd", action="store_true", help="add OPD rows (vs SB3 SAC+HER)")
    parser.add_argument("--overlap", action="store_true",
                        help="also time ours with training.overlap_env (env in a worker process)")
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    nets = [[int(x) for x in spec.split(",")] for spec in args.nets.split(";")]
    variants = ["plain"] + ["her"] * args.her + ["opd"] * args.opd
    results = []
    for variant in variants:
        for net in nets:
            ours, sb3, overlapped = [], [], []
            for _ in range(args.repeats):
                ours.append(ours_steps_per_s(net, args.steps, variant, args.threads))
                sb3.append(sb3_steps_per_s(net, args.steps, variant, args.threads))
                if args.overlap:
                    overlapped.append(ours_steps_per_s(net, args.steps, variant, args.threads,
                                                       overlap=True))
                print(f"{variant} {net}: ours {ours[-1]:.1f}/s, sb3 {sb3[-1]:.1f}/s"
                      + (f", ours overlapped {overlapped[-1]:.1f}/s" if args.overlap else ""),
                      flush=True)
            ratios = [o / s for o, s in zip(ours, sb3)]
            row = {"variant": variant, "net": net,
                   "ours_steps_per_s": round(statistics.median(ours), 1),
                   "sb3_steps_per_s": round(statistics.median(sb3), 1),
                   "ratio": round(statistics.median(ratios), 2),
                   "ratios": [round(r, 2) for r in ratios],
                   "load_average": round(os.getloadavg()[0], 2)}
            if args.overlap:
                overlap_ratios = [o / s for o, s in zip(overlapped, sb3)]
                row.update(overlap_steps_per_s=round(statistics.median(overlapped), 1),
                           overlap_ratio=round(statistics.median(overlap_ratios), 2))
            results.append(row)
    label = {"plain": "SAC vs SAC", "her": "SAC+HER vs SAC+HER", "opd": "OPD vs SAC+HER"}
    extra = ["ours overlapped steps/s", "ratio overlapped"] if args.overlap else []
    print(markdown_table(
        ["comparison", "net", "ours steps/s", "SB3 steps/s", "ratio (median)", *extra,
         "load avg"],
        [[label[r["variant"]], r["net"], r["ours_steps_per_s"], r["sb3_steps_per_s"], r["ratio"],
          *([r["overlap_steps_per_s"], r["overlap_ratio"]] if args.overlap else []),
          r["load_average"]] for r in results]))
    write_json(args.json, {"env": ENV_ID, "steps": args.steps, "threads": args.threads,
                           "repeats": args.repeats, "results": results})


if __name__ == "__main__":
    main()

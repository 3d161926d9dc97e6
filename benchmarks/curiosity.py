"""Curiosity and self-imitation on the key-door grid: flat PPO with and without RND, and HGPO
with its two key-door pieces switched off one at a time, same budget.

    python benchmarks/curiosity.py --seeds 3 --jobs 2 --json curiosity.json

Each run goes through ``agentic_rl.train.run.train`` (``hgpo_vs_flat.run``): final
deterministic eval success, sampled-policy success, eval curve and env steps/s per seed.
Variants (``--variants`` picks some): ``ppo`` / ``ppo_rnd`` (``configs/ppo_keydoor.yaml``,
``configs/ppo_keydoor_rnd.yaml``); ``hgpo`` (``configs/hgpo_keydoor.yaml``: a curious Manager
and self-imitation); ``hgpo_no_imitation``, ``hgpo_no_curiosity`` and ``hgpo_plain`` (the same
without ``self_imitation``, without ``manager_curiosity``, without both); ``hgpo_rnd``
(``configs/hgpo_keydoor_rnd.yaml``: ``hgpo_plain`` with RND for the Worker).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hgpo_vs_flat import CONFIGS, run_job, summarise  # noqa: E402

# variant -> (config file, algorithm keys removed from it)
VARIANTS = {
    "ppo": ("ppo_keydoor", ()), "ppo_rnd": ("ppo_keydoor_rnd", ()),
    "hgpo": ("hgpo_keydoor", ()),
    "hgpo_no_imitation": ("hgpo_keydoor", ("self_imitation",)),
    "hgpo_no_curiosity": ("hgpo_keydoor", ("manager_curiosity",)),
    "hgpo_plain": ("hgpo_keydoor", ("self_imitation", "manager_curiosity")),
    "hgpo_rnd": ("hgpo_keydoor_rnd", ()),
}


def variant_config(name: str) -> dict:
    """The config dict of a variant: its file, less the algorithm keys it switches off."""
    file, removed = VARIANTS[name]
    config = yaml.safe_load((CONFIGS / f"{file}.yaml").read_text())
    algorithm = {k: v for k, v in config["algorithm"].items() if k not in removed}
    return {**config, "algorithm": algorithm}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="seeds first-seed .. first-seed + seeds - 1 (held-out seeds)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--budget", type=int, default=None, help="env steps (default: config's)")
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS))
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    start = time.perf_counter()
    unknown = sorted(set(args.variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {sorted(VARIANTS)}")
    configs = {k: variant_config(k) for k in args.variants}
    budget = args.budget or configs[args.variants[0]]["training"]["total_timesteps"]
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    jobs = [(configs[k], seed, budget, None) for k in args.variants for seed in seeds]
    if args.jobs > 1:
        with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
            runs = pool.map(run_job, jobs, chunksize=1)
    else:
        runs = [run_job(job) for job in jobs]
    result = {"budget_steps": budget, "seeds": list(seeds),
              "configs": {k: {"file": f, "removed": list(r)} for k, (f, r) in VARIANTS.items()}}
    print(f"budget {budget} env steps, seeds {list(seeds)}")
    print("| method | deterministic success (per seed) | sampled success (per seed) | env steps/s |")
    print("|---|---|---|---|")
    for index, key in enumerate(args.variants):
        r = result[key] = summarise(runs[index * args.seeds:(index + 1) * args.seeds])
        fps = sum(r["env_steps_per_second"]) / len(r["env_steps_per_second"])
        print(f"| {key} | {r['success_mean']:.2f} +- {r['success_std']:.2f} {r['per_seed']} | "
              f"{r['stochastic_success_mean']:.2f} {r['stochastic_per_seed']} | {fps:,.0f} |")
    result["wall_seconds"] = time.perf_counter() - start
    args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

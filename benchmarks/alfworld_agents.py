"""ALFWorld text agents: the ablation of issue 7, evaluated on valid_seen (no expert information
at test time, except the HGPO oracle row, which reads the env's plan and is labelled as such).

Variants (``ppo``, ``episode``, ``anchor`` and ``hog`` start from the same imitation checkpoint; the
hierarchical ones, whose Worker takes a subgoal input, and ``no_manager`` are trained from scratch
with their own imitation phase, DAgger rounds included in ``--rl-steps``):

* ``imitation``: behaviour cloning on the demonstrations only.
* ``ppo``: + PPO with the value head (GAE, truncation bootstrapped), distillation kept on.
* ``episode``: + critic-free group update, episode-level advantage (GRPO-style).
* ``anchor``: + group update, hierarchy-of-groups with k = 0 only (anchor-state grouping).
* ``hog``: + group update, hierarchy-of-groups advantages (k = 0..hog_levels).
* ``hgpo_oracle``: Manager/Worker, the Manager's subgoals from the expert-plan planner.
* ``no_manager``: the ``hog`` recipe trained from scratch (imitation, DAgger and RL within the
  same ``--rl-steps`` budget as the hierarchical rows): the baseline the Manager rows compare to.
* ``manager``: the learned Manager over templated subgoals (``configs/alfworld_text_hgpo.yaml``'s
  Manager): imitation of the demonstrations' subgoal sequence, then its own group RL.
* ``manager_imitation``: the learned Manager by imitation only (greedy in training too).
* ``manager_predictor``: ``manager`` + the Worker's success-predictor reward.

    python benchmarks/alfworld_agents.py --demos data/alfworld_demos_train.npz \
        --valid ../shared/alfworld/valid_seen_slim.tar.xz --rl-steps 20000 --workers 2 \
        --json bench_out/alfworld_agents.json

Runs split over processes (one variant and seed each, two at a time) are put back together,
mean +- std over seeds and the Manager's share of the no-Manager-to-oracle gap, with
``--merge A.json B.json ... --json all.json`` (nothing is trained or evaluated).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine_facts, markdown_table, write_json  # noqa: E402

LEARNED_MANAGER = ["algorithm.manager.planner=learned", "algorithm.manager.period=10"]
VARIANTS: dict[str, list[str]] = {
    # env steps only for the DAgger rounds (12 rounds x 32 envs x <= 50 steps)
    "imitation": ["algorithm.rl=none", "training.total_timesteps=19200"],
    "ppo": ["algorithm.rl=ppo"],
    "episode": ["algorithm.rl=group", "algorithm.advantage=episode"],
    "anchor": ["algorithm.rl=group", "algorithm.advantage=hog", "algorithm.hog_levels=0"],
    "hog": ["algorithm.rl=group", "algorithm.advantage=hog"],
    # the handcoded expert's next command as the subgoal; no per-game Fast Downward plan
    "hgpo_oracle": ["algorithm.rl=group", "algorithm.advantage=hog",
                    "algorithm.manager.planner=expert_plan",
                    "environment.kwargs.use_planner=false"],
    "no_manager": ["algorithm.rl=group", "algorithm.advantage=hog"],
    "manager": ["algorithm.rl=group", "algorithm.advantage=hog", *LEARNED_MANAGER],
    "manager_imitation": ["algorithm.rl=group", "algorithm.advantage=hog", *LEARNED_MANAGER,
                          "algorithm.manager.rl=none"],
    "manager_predictor": ["algorithm.rl=group", "algorithm.advantage=hog", *LEARNED_MANAGER,
                          "algorithm.success_predictor=1.0"],
}
FROM_IMITATION = {"ppo", "episode", "anchor", "hog"}


def train_variant(job: tuple[str, str, list[str], str, str | None]) -> dict:
    """Train one variant (in a worker process) and return its summary."""
    name, config_path, overrides, run_dir, init_from = job
    import torch

    torch.set_num_threads(1)
    from agentic_rl.config import load_config
    from agentic_rl.train.run import train

    summary_file = Path(run_dir) / "summary.json"
    if summary_file.exists():  # reuse a finished run (e.g. the shared imitation phase)
        return json.loads(summary_file.read_text())
    config = load_config(config_path, overrides)
    return train(config, run_dir, init_from=init_from, show_progress=False)


def evaluate_variant(job: tuple[str, str, str]) -> dict:
    """Greedy valid_seen evaluation of one trained variant's best model."""
    name, run_dir, valid = job
    import torch

    torch.set_num_threads(1)
    from agentic_rl.config import load_config
    from agentic_rl.train.text_eval import evaluate_text_model

    config = load_config(Path(run_dir) / "config.yaml")
    return evaluate_text_model(config, run_dir, valid)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/alfworld_text_opd.yaml")
    parser.add_argument("--demos", default="data/alfworld_demos_train.npz")
    parser.add_argument("--valid", default="../shared/alfworld/valid_seen_slim.tar.xz")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--rl-steps", type=int, default=20000, help="env steps of RL per variant")
    parser.add_argument("--seed", type=int, default=0, help="the first seed")
    parser.add_argument("--seeds", type=int, default=1, help="seeds seed, seed+1, ...")
    parser.add_argument("--workers", type=int, default=2, help="variants trained at once")
    parser.add_argument("--out-dir", default="bench_out/alfworld_agents")
    parser.add_argument("--imitation-run", default=None,
                        help="start the RL variants from this finished imitation run (e.g. "
                             "seed 0's) instead of training one: RL seeds on one base")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="extra config overrides for every variant")
    parser.add_argument("--json", default=None)
    parser.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                        help="only merge the JSON files of earlier runs of this script")
    args = parser.parse_args(argv)
    if args.merge:
        payload = merge_payloads([json.loads(Path(f).read_text()) for f in args.merge])
        print(results_table(payload["results"]))
        if payload["gap"]:
            print(gap_text(payload["gap"]))
        write_json(args.json, payload)
        return payload

    start = time.time()
    seeds = list(range(args.seed, args.seed + args.seeds))
    jobs, bases = [], {}
    for seed in seeds:  # runs of one seed in a folder of their own (the first seed's: out-dir)
        out = Path(args.out_dir) / (f"seed{seed}" if seed != args.seed else "")
        common = [f"algorithm.prototype_data_path={args.demos}", f"training.seed={seed}",
                  *args.set]
        bases[seed] = base = args.imitation_run or str(out / "imitation")
        if args.imitation_run is None and ("imitation" in args.variants
                                           or FROM_IMITATION & set(args.variants)):
            train_variant(("imitation", args.config, common + VARIANTS["imitation"], base, None))
        for name in sorted(args.variants, key=lambda n: n in FROM_IMITATION):
            if name == "imitation":  # the variants trained from scratch first: the longest
                continue
            overrides = common + VARIANTS[name] + [f"training.total_timesteps={args.rl_steps}"]
            if name in FROM_IMITATION:  # --init-from brings the imitation run's policy
                overrides += ["algorithm.bc_steps=0", "algorithm.dagger_rounds=0"]
            jobs.append(((name, seed), args.config, overrides, str(out / name),
                         base if name in FROM_IMITATION else None))
    context = multiprocessing.get_context("spawn")
    with context.Pool(max(1, min(args.workers, len(jobs) or 1))) as pool:
        summaries = dict(zip([j[0] for j in jobs], pool.map(train_variant, jobs)))
        if "imitation" in args.variants:
            for seed in seeds:
                summaries["imitation", seed] = json.loads(
                    (Path(bases[seed]) / "summary.json").read_text())
        keys = [(n, seed) for seed in seeds for n in args.variants if (n, seed) in summaries]
        folders = {job[0]: job[3] for job in jobs}
        reports = pool.map(evaluate_variant, [
            (key[0], bases[key[1]] if key[0] == "imitation" else folders[key], args.valid)
            for key in keys])
    machine = machine_facts()
    runs = {key: {"valid_seen": report, "env_steps": summaries[key]["env_steps"],
                  "train_wall_seconds": summaries[key]["wall_seconds"],
                  "best_holdout_success": summaries[key]["best_success_rate"],
                  "oracle": report["oracle"], "seed": key[1], "machine": machine}
            for key, report in zip(keys, reports)}
    results = summarise(runs, args.variants, seeds)
    print(results_table(results))
    payload = {"rl_steps": args.rl_steps, "seeds": seeds, "results": results,
               "wall_seconds": round(time.time() - start, 1)}
    write_json(args.json, payload)
    return payload


def summarise(runs: dict, variants: list[str], seeds: list[int]) -> dict:
    """Per variant: mean and std over seeds of the valid_seen success (overall and per task
    type) and the per-seed runs."""
    results = {}
    for name in variants:
        mine = [runs[(name, seed)] for seed in seeds if (name, seed) in runs]
        if not mine:
            continue
        types = sorted({t for r in mine for t in r["valid_seen"]["per_task_type"]})
        overall = [r["valid_seen"]["success_rate"] for r in mine]
        results[name] = {
            "success_mean": float(np.mean(overall)), "success_std": float(np.std(overall)),
            "per_task_type": {t: float(np.mean([r["valid_seen"]["per_task_type"][t]
                                                ["success_rate"] for r in mine])) for t in types},
            "mean_steps": float(np.mean([r["valid_seen"]["mean_steps"] for r in mine])),
            "oracle": mine[0]["oracle"], "per_seed": mine}
    return results


def merge_payloads(payloads: list[dict]) -> dict:
    """The JSON of several runs of this script as one: each (variant, seed) once, summarised
    over all seeds, with the gap the learned Manager closes (``gap``, None without the three
    rows it needs)."""
    runs, variants = {}, []
    for payload in payloads:
        if payload.get("rl_steps") != payloads[0].get("rl_steps"):
            raise ValueError("cannot merge runs of different --rl-steps "
                             f"({payload.get('rl_steps')} and {payloads[0].get('rl_steps')})")
        for name, result in payload["results"].items():
            seeds = [run.get("seed") for run in result["per_seed"]]
            if None in seeds:  # files written before runs named their seed
                if len(result["per_seed"]) != len(payload["seeds"]):
                    raise ValueError(f"{name}: cannot tell which seed each run is")
                seeds = payload["seeds"]
            for seed, run in zip(seeds, result["per_seed"]):
                if (name, seed) in runs:
                    raise ValueError(f"{name} seed {seed} is in two of the files")
                runs[name, seed] = run | {"seed": seed}
            variants += [name] if name not in variants else []
    seeds = sorted({seed for _, seed in runs})
    results = summarise(runs, variants, seeds)
    return {"rl_steps": payloads[0].get("rl_steps"), "seeds": seeds, "results": results,
            "gap": gap_closed(results)}


def gap_closed(results: dict) -> dict | None:
    """The share of the gap between the agent without a Manager and the oracle planner that the
    learned Manager closes, on the means over seeds, and the Manager's lead per common seed."""
    if not {"no_manager", "manager", "hgpo_oracle"} <= set(results):
        return None
    low, high = results["no_manager"]["success_mean"], results["hgpo_oracle"]["success_mean"]
    mine = results["manager"]["success_mean"]
    by_seed = {name: {run["seed"]: run["valid_seen"]["success_rate"]
                      for run in results[name]["per_seed"]} for name in ("no_manager", "manager")}
    common = sorted(set(by_seed["manager"]) & set(by_seed["no_manager"]))
    return {"gap": high - low, "closed": mine - low,
            "share": (mine - low) / (high - low) if high != low else float("nan"),
            "lead_per_seed": {seed: by_seed["manager"][seed] - by_seed["no_manager"][seed]
                              for seed in common}}


def gap_text(gap: dict) -> str:
    leads = ", ".join(f"seed {seed}: {lead:+.3f}" for seed, lead in gap["lead_per_seed"].items())
    return (f"learned Manager closes {gap['closed']:.3f} of the {gap['gap']:.3f} gap from no "
            f"Manager to the oracle planner: {gap['share']:.0%} (lead over no Manager, {leads})")


def results_table(results: dict) -> str:
    """Markdown: one row per variant, success mean +- std over seeds and per task type."""
    types = sorted({t for r in results.values() for t in r["per_task_type"]})
    rows = []
    for name, r in results.items():
        seeds = r["per_seed"]
        rows.append([name + (" (oracle)" if r["oracle"] else ""),
                     f"**{r['success_mean']:.3f}** +- {r['success_std']:.3f}",
                     ", ".join(f"{s['valid_seen']['success_rate']:.3f}" for s in seeds),
                     *[f"{r['per_task_type'][t]:.2f}" for t in types],
                     f"{r['mean_steps']:.1f}", seeds[0]["env_steps"],
                     f"{np.mean([s['train_wall_seconds'] for s in seeds]):.0f}",
                     ", ".join(f"{s['best_holdout_success']:.2f}" for s in seeds)])
    return markdown_table(["variant", "valid_seen", "per seed",
                           *[t.replace("_then_place_in_recep", "") for t in types],
                           "mean steps", "env steps", "train s", "held-out best"], rows)


if __name__ == "__main__":
    main()

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
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import markdown_table, write_json  # noqa: E402

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
    import yaml

    torch.set_num_threads(1)
    from agentic_rl.config import validate_config
    from agentic_rl.train.text_eval import evaluate_text_model

    config = validate_config(yaml.safe_load((Path(run_dir) / "config.yaml").read_text()))
    return evaluate_text_model(config, run_dir, valid)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/alfworld_text_opd.yaml")
    parser.add_argument("--demos", default="data/alfworld_demos_train.npz")
    parser.add_argument("--valid", default="../shared/alfworld/valid_seen_slim.tar.xz")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--rl-steps", type=int, default=20000, help="env steps of RL per variant")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2, help="variants trained at once")
    parser.add_argument("--out-dir", default="bench_out/alfworld_agents")
    parser.add_argument("--imitation-run", default=None,
                        help="start the RL variants from this finished imitation run (e.g. "
                             "seed 0's) instead of training one: RL seeds on one base")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="extra config overrides for every variant")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    out = Path(args.out_dir)
    common = [f"algorithm.prototype_data_path={args.demos}", f"training.seed={args.seed}", *args.set]
    start = time.time()
    context = multiprocessing.get_context("spawn")
    base = args.imitation_run or str(out / "imitation")
    if args.imitation_run is None and ("imitation" in args.variants
                                       or FROM_IMITATION & set(args.variants)):
        train_variant(("imitation", args.config, common + VARIANTS["imitation"], base, None))
    jobs = []  # the variant trained from scratch first: it takes longest
    for name in sorted(args.variants, key=lambda n: n in FROM_IMITATION):
        if name == "imitation":
            continue
        overrides = common + VARIANTS[name] + [f"training.total_timesteps={args.rl_steps}"]
        if name in FROM_IMITATION:  # --init-from brings the imitation run's policy
            overrides += ["algorithm.bc_steps=0", "algorithm.dagger_rounds=0"]
        jobs.append((name, args.config, overrides, str(out / name),
                     base if name in FROM_IMITATION else None))
    with context.Pool(max(1, min(args.workers, len(jobs) or 1))) as pool:
        summaries = dict(zip([j[0] for j in jobs], pool.map(train_variant, jobs)))
        if "imitation" in args.variants:
            summaries["imitation"] = json.loads((Path(base) / "summary.json").read_text())
        names = [n for n in args.variants if n in summaries]
        reports = pool.map(evaluate_variant, [
            (n, base if n == "imitation" else str(out / n), args.valid) for n in names])
    results = {}
    for name, report in zip(names, reports):
        summary = summaries[name]
        results[name] = {"valid_seen": report, "env_steps": summary["env_steps"],
                         "train_wall_seconds": summary["wall_seconds"],
                         "best_holdout_success": summary["best_success_rate"],
                         "oracle": report["oracle"]}
    types = sorted({t for r in results.values() for t in r["valid_seen"]["per_task_type"]})
    rows = []
    for name, r in results.items():
        per_type = r["valid_seen"]["per_task_type"]
        rows.append([name + (" (oracle)" if r["oracle"] else ""),
                     f"**{r['valid_seen']['success_rate']:.3f}**",
                     *[f"{per_type[t]['success_rate']:.2f}" if t in per_type else "-"
                       for t in types],
                     f"{r['valid_seen']['mean_steps']:.1f}", r["env_steps"],
                     f"{r['train_wall_seconds']:.0f}"])
    print(markdown_table(["variant", "valid_seen", *[t.replace("_then_place_in_recep", "")
                                                      for t in types],
                          "mean steps", "RL env steps", "train s"], rows))
    payload = {"rl_steps": args.rl_steps, "seed": args.seed, "results": results,
               "wall_seconds": round(time.time() - start, 1)}
    write_json(args.json, payload)
    return payload


if __name__ == "__main__":
    main()

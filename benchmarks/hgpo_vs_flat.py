"""HGPO against a flat baseline at an equal env-step budget, several seeds.

    python benchmarks/hgpo_vs_flat.py --env keydoor --seeds 3 --json hgpo_keydoor.json
    python benchmarks/hgpo_vs_flat.py --env pointmaze --seeds 3 --jobs 2 --json pointmaze.json
    python benchmarks/hgpo_vs_flat.py --env pointmaze --methods hgpo \
        --hgpo-set algorithm.subgoals=relative algorithm.goal_scale=1.0 --json relative.json
    python benchmarks/hgpo_vs_flat.py --goal-reaching --json goal_reaching.json
    python benchmarks/hgpo_vs_flat.py --env antmaze --seeds 3 --jobs 2 --run-root ~/ant \
        --final-episodes 50 --json antmaze.json

``--run-root`` keeps each run in a folder that outlives the command: Ctrl-C checkpoints the
runs, the same command continues them (or extends them to a larger ``--budget``); a run that
finished writes its result to ``hgpo_vs_flat_result.json`` in its folder, and the same command
reads it back instead of scoring that learner again.

Each run trains from ``configs/hgpo_<env>.yaml`` and the flat config of ``FLAT`` (PPO on the
grid, SAC+HER on the continuous mazes) and scores the final deterministic evaluation
(``eval/success_rate`` over ``num_eval_episodes``). Every run goes through
``agentic_rl.train.run.train`` in a temporary run folder and reports env steps/s; on-policy
runs (``hgpo``, ``ppo``) also evaluate the final policy with sampled actions
(``stochastic_*``). ``--final-episodes N`` scores the final learner on N episodes instead
(10 episodes give a rate only to within about 0.13). Writes
``{"budget_steps", "hgpo": {"success_mean", "success_std", ...}, "flat": {...}, "wall_seconds"}``.
``--goal-reaching`` is the check of doc 1 section 6.1: a Worker trained in an open grid with
random goals must reach hand-picked cells (goal = phi(target state)) in >= 80% of trials.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import signal
import sys
import tempfile
import time
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import yaml

from agentic_rl.algos.hgpo import HGPO
from agentic_rl.algos.hgpo_sac import HGPOSAC
from agentic_rl.config import apply_override, read_config, validate_config
from agentic_rl.data.checkpoint import has_checkpoint, latest_checkpoint, load_learner
from agentic_rl.envs.gridworld import BatchGridWorld
from agentic_rl.envs.make import make_env
from agentic_rl.train.evaluate import evaluate
from agentic_rl.train.logger import read_metrics
from agentic_rl.train.run import train
from agentic_rl.train.setup import build_algo, build_run
from agentic_rl.train.state import restore_run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_json  # noqa: E402
from hgpo_plots import phi_traces, plot_curves, plot_goals, subgoal_traces  # noqa: E402

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
FLAT = {"keydoor": "ppo_keydoor", "pointmaze": "sac_her_pointmaze",
        "pointmaze_large": "sac_her_pointmaze_large", "antmaze": "sac_her_antmaze"}
SUBGOAL_KEYS = ("subgoal_reached_rate", "subgoal_saturation", "subgoal_path_distance",
                "subgoal_distance")


def run(config: dict[str, Any], seed: int, budget: int, goal_plot: Path | None = None,
        run_dir: Path | None = None, final_episodes: int | None = None) -> dict[str, Any]:
    """Train one seed through the library's own ``train``, in ``run_dir`` (resumed from its
    last checkpoint where it holds one: a run stopped by Ctrl-C, or one to extend to a larger
    budget) or a temporary folder; returns the final deterministic eval success, the eval
    curve, wall-clock seconds and env steps/s over all its sessions (and
    ``learning_steps_per_second``, the mean logged ``time/fps`` after ``learning_starts``: the
    steady rate). With ``final_episodes`` the final learner is evaluated again on that many
    episodes (its replay restored, so a planner plans from it) and that evaluation gives the
    success and subgoal measures.
    On-policy learners are also evaluated with sampled actions (``success_stochastic``). With
    ``goal_plot`` (hierarchical learners) also draws the Manager's goals to that PNG."""
    torch.set_num_threads(1)
    raw = {**config, "training": {**config["training"], "seed": seed, "total_timesteps": budget}}
    with tempfile.TemporaryDirectory() as folder:
        validated = validate_config(raw)
        resume = run_dir is not None and has_checkpoint(run_dir)
        run_dir = run_dir or Path(folder) / "run"
        summary = train(validated, run_dir, resume=resume, show_progress=False)
        final = summary["eval_history"][-1] if summary["eval_history"] else {}
        success = summary["success_rate"]
        if final_episodes:
            final = evaluate_checkpoint(run_dir, latest_checkpoint(run_dir), [], final_episodes)
            success = final["success_rate"]
        env_cfg = validated.environment
        env = make_env(env_cfg.name, env_cfg.kwargs, env_cfg.goal_region)
        algo = build_algo(validated, env)
        load_learner(algo, latest_checkpoint(run_dir))
        learning_fps = [fps for step, fps in read_metrics(run_dir / "metrics.csv").get(
            "time/fps", []) if step > validated.training.learning_starts]
    curve = [(e["step"], e["success_rate"]) for e in summary["eval_history"]]
    on_policy = validated.algorithm.name in ("ppo", "hgpo")
    sampled = evaluate(algo, env, validated.training.num_eval_episodes, seed + 2000,
                       mode="explore").success_rate if on_policy else None
    if goal_plot is not None and isinstance(algo, HGPO):
        plot_goals(phi_traces(algo, env), goal_plot, grid=True)
    elif goal_plot is not None and isinstance(algo, HGPOSAC):
        plot_goals(subgoal_traces(algo, env), goal_plot, grid=False, env=env)
    return {"success": success, "success_episodes": final.get("episodes"),
            "success_stochastic": sampled, "curve": curve,
            "wall_seconds": summary["wall_seconds"],
            "env_steps_per_second": summary["env_steps"] / summary["wall_seconds"],
            "learning_steps_per_second": float(np.mean(learning_fps)) if learning_fps else None,
            **{key: final[key] for key in SUBGOAL_KEYS if key in final}}


def evaluate_checkpoint(run_dir: Path, folder: Path, overrides: list[str], episodes: int,
                        goal_plot: Path | None = None) -> dict[str, float]:
    """Success and subgoal diagnostics of ``episodes`` deterministic episodes of the learner
    of checkpoint ``folder``, built from the run's config with ``overrides`` and its replay
    restored (a planner builds its graph from what the run had seen); with ``goal_plot``, also
    the D1 plot of its subgoals in three of them (SAC levels)."""
    config = validate_config(read_config(run_dir / "config.yaml", overrides))
    with tempfile.TemporaryDirectory() as scratch:
        run = build_run(config, Path(scratch))
        restore_run(run, folder)
        result = evaluate(run.algo, run.eval_env, episodes, config.training.seed)
        if goal_plot is not None:
            plot_goals(subgoal_traces(run.algo, run.eval_env), goal_plot, grid=False,
                       env=run.eval_env)
        run.envs.close()
    return result.to_dict()


RESULT_FILE = "hgpo_vs_flat_result.json"  # a finished run's result, in its --run-root folder


def run_job(job: tuple) -> dict[str, Any]:
    """``run(*job)``; a kept run (``run_dir``) writes its result beside its checkpoints, and a
    later command with the same config, seed, budget and ``final_episodes`` reads it back
    instead of scoring the same learner again (a run finished in an earlier session of a long
    benchmark)."""
    config, seed, budget, goal_plot, run_dir, final_episodes = job
    stamp = {"config": config, "seed": seed, "budget": budget, "final_episodes": final_episodes}
    saved = run_dir / RESULT_FILE if run_dir is not None else None
    if saved is not None and goal_plot is None and saved.exists():
        kept = json.loads(saved.read_text())
        if kept["stamp"] == stamp and has_checkpoint(run_dir) \
                and latest_checkpoint(run_dir).name == kept["checkpoint"]:
            print(f"{run_dir.name}: finished earlier, its result read from {RESULT_FILE}")
            return kept["result"]
    result = run(*job)
    if saved is not None:
        write_json(saved, {"stamp": stamp, "checkpoint": latest_checkpoint(run_dir).name,
                           "result": result})
        episodes = result["success_episodes"] or "the config's"
        print(f"{run_dir.name}: success {result['success']:.2f} over {episodes} episodes",
              flush=True)
    return result


_INTERRUPTED = False  # set in a pool worker once a run of its stopped on Ctrl-C


def guarded(function: Callable[[tuple], dict[str, Any]], job: tuple) -> dict[str, Any]:
    """``function(job)`` in a pool worker, unless an earlier run of this worker stopped on
    Ctrl-C: the pool hands a worker its next queued job even after the parent cancelled the
    rest (a job already in the pool's call queue cannot be cancelled), so the worker refuses it
    itself."""
    global _INTERRUPTED
    if _INTERRUPTED:
        raise KeyboardInterrupt("not started: an earlier run in this process was interrupted")
    try:
        return function(job)
    except KeyboardInterrupt:
        _INTERRUPTED = True
        raise


def run_all(jobs: list[tuple], processes: int,
            function: Callable[[tuple], dict[str, Any]] = run_job) -> list[dict[str, Any]]:
    """``function`` (default ``run_job``) over ``jobs`` in order, in ``processes`` parallel
    processes. Ctrl-C reaches every run, which checkpoints and stops; no queued run starts
    after that and this process waits for the running ones to finish writing before it raises
    (their exception)."""
    if processes == 1:
        return [function(job) for job in jobs]
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the runs handle it
    try:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(processes, mp_context=context) as pool:
            futures = [pool.submit(guarded, function, job) for job in jobs]
            done, pending = wait(futures, return_when=FIRST_EXCEPTION)
            if any(future.exception() is not None for future in done):
                for future in pending:
                    future.cancel()
                wait(pending)
    finally:
        signal.signal(signal.SIGINT, previous)
    return [future.result() for future in futures]


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    success = np.array([r["success"] for r in runs])
    out = {"success_mean": float(success.mean()), "success_std": float(success.std()),
           "per_seed": success.tolist(), "wall_seconds": sum(r["wall_seconds"] for r in runs),
           "curves": [r["curve"] for r in runs]}
    if runs[0]["success_stochastic"] is not None:
        sampled = np.array([r["success_stochastic"] for r in runs])
        out |= {"stochastic_success_mean": float(sampled.mean()),
                "stochastic_success_std": float(sampled.std()),
                "stochastic_per_seed": sampled.tolist()}
    if "env_steps_per_second" in runs[0]:
        out["env_steps_per_second"] = [r["env_steps_per_second"] for r in runs]
        out["learning_steps_per_second"] = [r["learning_steps_per_second"] for r in runs]
    for key in SUBGOAL_KEYS:  # SAC-level HGPO: subgoal quality in the final evaluation
        if key in runs[0]:
            out[key] = float(np.mean([r[key] for r in runs]))
            out[f"{key}_per_seed"] = [r[key] for r in runs]
    return out


def goal_reaching_check(seed: int, budget: int) -> dict[str, Any]:
    """Train HGPO in a 10x10 open room with random starts and goals, then drive the Worker alone
    to hand-picked cells (goal = phi(target)) from random starts at most ``period`` steps away."""
    torch.set_num_threads(1)
    kwargs = {"layout": "open", "size": 10, "max_episode_steps": 60, "random_start": True,
              "random_goal": True}
    config = validate_config({
        "algorithm": {"name": "hgpo", "period": 8, "rollout_steps": 64,
                      "manager": {"ent_coef": 0.0}, "worker": {"learning_rate": 1e-3,
                                                               "n_epochs": 10}},
        "environment": {"name": "agentic_rl/GridWorld-v0", "num_envs": 16, "kwargs": kwargs},
        "training": {"total_timesteps": budget, "seed": seed, "eval_freq": budget}})
    with tempfile.TemporaryDirectory() as folder:
        train(config, Path(folder) / "run", show_progress=False)
        algo = build_algo(config, make_env("agentic_rl/GridWorld-v0", kwargs))
        load_learner(algo, latest_checkpoint(Path(folder) / "run"))
    period = config.algorithm.period
    targets = [(1, 1), (1, 10), (10, 1), (10, 10), (5, 5), (3, 8), (8, 3), (6, 9), (2, 4), (9, 6)]
    result: dict[str, Any] = {"trials": 5 * len(targets), "train_steps": budget}
    for deterministic in (True, False):
        probe = BatchGridWorld(num_envs=1, seed=seed, **kwargs)
        rng, reached = np.random.default_rng(seed), 0
        for target in targets:
            for _ in range(5):
                reached += reach(algo, probe, target, period, rng, deterministic)
        key = "goal_reaching_rate" if deterministic else "goal_reaching_rate_sampled"
        result[key] = reached / result["trials"]
    return result


def reach(algo: HGPO, probe: BatchGridWorld, target, period: int, rng, deterministic: bool) -> bool:
    """Start within ``period`` steps of ``target``; does the Worker get there in ``2 period``?"""
    probe.reset()
    free = probe.core.layout.free_cells()
    near = free[np.abs(free - np.array(target)).sum(1) <= period]
    probe.pos[:] = near[rng.integers(len(near))]
    goal = torch.as_tensor(probe.core.to_coords(np.array([target])))
    for _ in range(2 * period):
        obs = probe.core.observe(probe.pos, probe.has_key, probe.goal)
        obs = {k: torch.as_tensor(v) for k, v in obs.items()}
        obs["action_mask"] = torch.as_tensor(probe.core.action_mask(probe.pos, probe.has_key))
        action = algo.worker_act(obs, goal, deterministic).numpy()
        probe.pos, probe.has_key = probe.core.move(probe.pos, probe.has_key, action)
        if (probe.pos[0] == np.array(target)).all():
            return True
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", choices=sorted(FLAT), default="keydoor")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel processes")
    parser.add_argument("--budget", type=int, default=None, help="env steps (default: config's)")
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--goal-reaching", action="store_true", help="run the section 6.1 check")
    parser.add_argument("--goal-plot", type=Path, default=None, help="PNG of seed 0's goals (D1)")
    parser.add_argument("--hgpo-set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="overrides of the HGPO config (e.g. algorithm.subgoals=relative)")
    parser.add_argument("--methods", nargs="*", choices=["hgpo", "flat"],
                        default=["hgpo", "flat"], help="which of the two to run")
    parser.add_argument("--curves-plot", type=Path, default=None,
                        help="PNG of eval success against env steps, mean +- std (D1)")
    parser.add_argument("--run-root", type=Path, default=None,
                        help="keep the runs in ROOT/<config>_seed<S> (as agentic-rl train "
                        "--log-dir ROOT names them) and resume any that holds a checkpoint: "
                        "stop with Ctrl-C, rerun the same command to continue")
    parser.add_argument("--final-episodes", type=int, default=None, metavar="N",
                        help="score each run's final learner on N deterministic episodes (its "
                        "replay restored) instead of the config's num_eval_episodes")
    parser.add_argument("--replot", action="store_true",
                        help="only draw --curves-plot from an existing --json result")
    args = parser.parse_args()
    start = time.perf_counter()
    if args.replot:
        result = json.loads(args.json.read_text())
        plot_curves(result, result["configs"], args.curves_plot)
        return
    if args.goal_reaching:
        result = goal_reaching_check(seed=0, budget=args.budget or 100_000)
        print(f"goal reaching over {result['trials']} trials: deterministic Worker "
              f"{result['goal_reaching_rate']:.2f}, "
              f"sampled {result['goal_reaching_rate_sampled']:.2f}")
    else:
        names = {key: name for key, name in (("hgpo", f"hgpo_{args.env}"),
                                             ("flat", FLAT[args.env])) if key in args.methods}
        configs = {k: yaml.safe_load((CONFIGS / f"{v}.yaml").read_text()) for k, v in names.items()}
        for override in args.hgpo_set if "hgpo" in configs else ():
            apply_override(configs["hgpo"], override)
        budget = args.budget or next(iter(configs.values()))["training"]["total_timesteps"]
        result = {"env": args.env, "budget_steps": budget, "seeds": args.seeds, "configs": names,
                  "hgpo_overrides": args.hgpo_set, "final_episodes": args.final_episodes}
        jobs = [(configs[key], seed, budget,
                 args.goal_plot if key == "hgpo" and seed == 0 else None,
                 args.run_root / f"{names[key]}_seed{seed}" if args.run_root else None,
                 args.final_episodes)
                for key in names for seed in range(args.seeds)]
        runs = run_all(jobs, args.jobs)
        for index, key in enumerate(names):
            result[key] = summarise(runs[index * args.seeds:(index + 1) * args.seeds])
        print(f"budget {budget} env steps, {args.seeds} seeds; success = deterministic eval, "
              "sampled = stochastic-policy eval (on-policy runs only)")
        print(f"{'method':8s} {'success':>14s} {'sampled':>14s} {'wall s':>8s}")
        for key in names:
            r = result[key]
            sampled = (f"{r['stochastic_success_mean']:7.2f} +- {r['stochastic_success_std']:.2f}"
                       if "stochastic_success_mean" in r else f"{'-':>14s}")
            print(f"{key:8s} {r['success_mean']:7.2f} +- {r['success_std']:.2f} {sampled} "
                  f"{r['wall_seconds']:8.1f}")
        if args.curves_plot is not None:
            plot_curves(result, names, args.curves_plot)
    result["wall_seconds"] = time.perf_counter() - start
    write_json(args.json, result)


if __name__ == "__main__":
    main()

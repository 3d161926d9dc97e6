"""Rollout workers on Ray (issue 18): throughput against the in-process loop, and learning
with workers against learning without.

    python benchmarks/scale_out.py --task speed --json F       # machine idle: timed runs
    python benchmarks/scale_out.py --task alfworld --json F    # machine idle: timed runs
    python benchmarks/scale_out.py --task learning --seeds 3 --json F
    python benchmarks/scale_out.py --task kill --json F

speed: SAC+HER on FetchReach-v4 ([256,256], one torch thread per process), the whole loop
(collection and updates) in-process, with 1 and with 2 rollout workers. env steps/s is the
steady state: the median of the ``time/fps`` log intervals after the first (the first holds
the workers' start-up: importing torch and MuJoCo, building the envs). Alternated runs, median
of ``--repeats``. alfworld: the text agent's collection alone (the loop's step source consumed
with no storage and no updates), 8 env slots (4 games x 2) on real ALFWorld train games
(``$ALFWORLD_SLIM``, default ``../shared/alfworld/train_slim.tar.xz``), in-process, split over 1
and over 2 workers; env steps/s after a warm-up of 1,000 env steps (one chunk), each run with a
cold sentence-encoder cache. learning: the same config at its own budget (6,000 env steps), in-process and
with 2 workers, the eval success curve of each seed and the first step at >= 0.95. kill: the same run with
2 workers, one of them killed (``kill -9``) at the third evaluation: restarts, lost chunks,
env steps and final success.

Every Ray address is local: the script starts a local Ray on 127.0.0.1 and stops it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import markdown_table, write_json  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "sac_her_fetch_reach.yaml"
SETUPS = {"in-process": (), "1 worker": ("training.rollout_workers=1",),
          "2 workers": ("training.rollout_workers=2",)}


def run(overrides: tuple[str, ...], run_dir: Path) -> dict:
    from agentic_rl.config import load_config
    from agentic_rl.train.logger import read_metrics
    from agentic_rl.train.run import train

    summary = train(load_config(CONFIG, list(overrides)), run_dir, show_progress=False)
    fps = [value for _, value in read_metrics(run_dir / "metrics.csv")["time/fps"]][1:]
    return {"summary": summary, "steady_fps": statistics.median(fps)}


def speed(args: argparse.Namespace, folder: Path) -> dict:
    steps = args.steps
    common = (f"training.total_timesteps={steps}", f"training.eval_freq={steps}",
              "training.num_eval_episodes=1", f"training.checkpoint_freq={steps}",
              "training.log_freq=500")
    fps: dict[str, list[float]] = {name: [] for name in SETUPS}
    for repeat in range(args.repeats):
        for name, overrides in SETUPS.items():
            result = run(common + overrides, folder / f"speed_{name.replace(' ', '_')}_{repeat}")
            fps[name].append(round(result["steady_fps"], 1))
            print(f"{name} repeat {repeat}: {fps[name][-1]} env steps/s", flush=True)
    median = {name: statistics.median(values) for name, values in fps.items()}
    ratios = {"fetchreach_1_worker_vs_local": round(median["1 worker"] / median["in-process"], 3),
              "fetchreach_2_vs_1_workers": round(median["2 workers"] / median["1 worker"], 3)}
    print(markdown_table(["collection", "env steps/s per repeat", "median", "vs in-process"],
                         [[name, fps[name], median[name],
                           round(median[name] / median["in-process"], 3)] for name in SETUPS]))
    return {"steps": steps, "fps": fps, "median_fps": median, **ratios}


def alfworld_config(folder: Path, workers: int):
    """A text agent over real ALFWorld train games; its demonstration file (4 expert episodes,
    recorded once) only marks games as demonstrated."""
    import os

    from agentic_rl.config import validate_config
    from agentic_rl.envs.alfworld.demos import run_episodes, save_episodes

    data = os.environ.get("ALFWORLD_SLIM", str(REPO.parent / "shared" / "alfworld" /
                                               "train_slim.tar.xz"))
    demos = folder / "alfworld_demos.npz"
    if not demos.exists():
        save_episodes(run_episodes({"data_path": data, "max_steps": 50}, 4, "expert"), demos,
                      "agentic_rl/ALFWorld-v0")
    training = {"rollout_workers": workers} if workers else {}
    return validate_config({
        "algorithm": {"name": "text_opd", "games_per_iteration": 4, "group_size": 2,
                      "dagger_rounds": 0, "prototype_data_path": str(demos)},
        "environment": {"name": "agentic_rl/ALFWorld-v0",
                        "kwargs": {"data_path": data, "max_steps": 50}},
        "training": {"total_timesteps": 10**9, **training}})


def collection_fps(config, folder: Path, steps: int, warm_up: int) -> float:
    """env steps/s of the loop's step source alone, after ``warm_up`` env steps. Every
    process starts with a cold sentence-encoder cache: a worker is a new process, and this one
    forgets what an earlier repeat encoded."""
    import time

    from agentic_rl.envs.alfworld import text_encoder
    from agentic_rl.train.loop import Updates, step_source
    from agentic_rl.train.setup import build_run

    text_encoder._SHARED.clear()  # the process-wide encoder and its cache of embeddings
    run = build_run(config, folder)
    source = step_source(run)
    try:
        start = None
        for step in source.steps(run, Updates()):
            run.step += source.num_envs
            if start is None and run.step >= warm_up:
                start, first = time.perf_counter(), run.step
            elif start is not None and run.step - first >= steps:
                return (run.step - first) / (time.perf_counter() - start)
    finally:
        source.close()
    raise RuntimeError("the step source ended early")


def alfworld(args: argparse.Namespace, folder: Path) -> dict:
    fps: dict[str, list[float]] = {name: [] for name in SETUPS}
    workers = {"in-process": 0, "1 worker": 1, "2 workers": 2}
    for repeat in range(args.repeats):
        for name in SETUPS:
            config = alfworld_config(folder, workers[name])
            fps[name].append(round(collection_fps(config, folder / f"alf_{repeat}",
                                                  args.steps, args.warm_up), 1))
            print(f"alfworld {name} repeat {repeat}: {fps[name][-1]} env steps/s", flush=True)
    median = {name: statistics.median(values) for name, values in fps.items()}
    print(markdown_table(["text agent collection", "env steps/s per repeat", "median",
                          "vs in-process"],
                         [[name, fps[name], median[name],
                           round(median[name] / median["in-process"], 3)] for name in SETUPS]))
    return {"steps": args.steps, "fps": fps, "median_fps": median,
            "alfworld_2_vs_1_workers": round(median["2 workers"] / median["1 worker"], 3),
            "alfworld_1_worker_vs_local": round(median["1 worker"] / median["in-process"], 3)}


def first_at(history: list[dict], target: float) -> int | None:
    return next((row["step"] for row in history if row["success_rate"] >= target), None)


def learning(args: argparse.Namespace, folder: Path) -> dict:
    results = {}
    for name in ("in-process", "2 workers"):
        rows = []
        for seed in range(args.seeds):
            result = run(SETUPS[name] + (f"training.seed={seed}",),
                         folder / f"learn_{name.replace(' ', '_')}_{seed}")
            summary = result["summary"]
            rows.append({"seed": seed, "final": summary["success_rate"],
                         "best": summary["best_success_rate"],
                         "steps_to_0.95": first_at(summary["eval_history"], 0.95),
                         "wall_seconds": summary["wall_seconds"]})
            print(f"{name} seed {seed}: {rows[-1]}", flush=True)
        results[name] = rows
    print(markdown_table(
        ["collection", "final success per seed", "steps to 0.95 per seed", "wall s per seed"],
        [[name, [r["final"] for r in rows], [r["steps_to_0.95"] for r in rows],
          [r["wall_seconds"] for r in rows]] for name, rows in results.items()]))
    return {"runs": results, "budget": 6000}


def process_title(pid: str) -> bytes:
    """The process's title (Ray names its actor processes ``ray::<class>...``)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def kill(args: argparse.Namespace, folder: Path) -> dict:
    import os
    import signal

    from agentic_rl.config import load_config
    from agentic_rl.train.run import train

    killed: list[int] = []

    def kill_at_third_evaluation(step: int, metrics: dict) -> None:
        if len(killed) < 1 and step >= 600:
            pids = [pid for pid in os.listdir("/proc") if pid.isdigit()
                    and process_title(pid).startswith(b"ray::RolloutWorker")]
            os.kill(int(pids[0]), signal.SIGKILL)
            killed.append(step)
            print(f"killed rollout worker pid {pids[0]} at step {step}", flush=True)

    config = load_config(CONFIG, list(SETUPS["2 workers"]))
    summary = train(config, folder / "kill", show_progress=False,
                    on_evaluation=kill_at_third_evaluation)
    result = {"killed_at_step": killed[0] if killed else None,
              "env_steps": summary["env_steps"], "final_success": summary["success_rate"],
              "steps_to_0.95": first_at(summary["eval_history"], 0.95),
              **summary["rollout_workers"]}
    print(result)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=["speed", "alfworld", "learning", "kill"],
                        required=True)
    parser.add_argument("--steps", type=int, default=4000, help="speed: env steps per run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warm-up", type=int, default=1000,
                        help="alfworld: env steps before timing (a multiple of one chunk)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out-dir", help="run folders (default: a temporary folder)")
    parser.add_argument("--json")
    args = parser.parse_args()
    from agentic_rl.train.ray_session import ray_session

    with tempfile.TemporaryDirectory() as scratch, ray_session(None):
        folder = Path(args.out_dir or scratch)
        result = {"speed": speed, "alfworld": alfworld, "learning": learning,
                  "kill": kill}[args.task](args, folder)
    write_json(args.json, {"task": args.task, **result})


if __name__ == "__main__":
    main()

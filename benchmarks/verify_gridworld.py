"""Grid-world exhaustive check (issue 8): a PPO policy trained without the safety property is
refuted with a replayable counterexample; the same policy behind the one-step shield is proved
safe for every (start, goal) pair. Also reports liveness (goal reached within N steps).

    python benchmarks/verify_gridworld.py --json bench_out/verify_grid.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import markdown_table, write_json  # noqa: E402

from agentic_rl.config import load_config  # noqa: E402
from agentic_rl.envs.gridworld import GridWorldEnv  # noqa: E402
from agentic_rl.data.checkpoint import latest_checkpoint, load_learner  # noqa: E402
from agentic_rl.envs.make import make_env  # noqa: E402
from agentic_rl.train.run import train  # noqa: E402
from agentic_rl.train.setup import build_algo  # noqa: E402
from agentic_rl.verify.finite import gridworld_system, verify_finite  # noqa: E402
from agentic_rl.verify.grid_runner import greedy, replay_in_env  # noqa: E402
from agentic_rl.verify.spec import load_properties  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO / "configs/ppo_gridworld_goals.yaml"))
    parser.add_argument("--property", default=str(REPO / "configs/safety/gridworld_lava.yaml"))
    parser.add_argument("--run-dir", default="bench_out/verify_grid/ppo_gridworld_goals_seed0")
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--json")
    args = parser.parse_args()
    config = load_config(args.config)
    run_dir = Path(args.run_dir)
    if not (run_dir / "summary.json").exists():
        train(config, run_dir, show_progress=False)
    algo = build_algo(config, make_env(config.environment.name, config.environment.kwargs))
    load_learner(algo, latest_checkpoint(run_dir))
    env_kwargs = {"layout": "open", **config.environment.kwargs}
    core = GridWorldEnv(**env_kwargs).core
    properties = load_properties(args.property)
    system = gridworld_system(core, properties)
    rows, results = [], {}
    for shield in (False, True):
        for require_goal in (False, True):
            result = verify_finite(system, greedy(algo), args.max_steps, shield=shield,
                                   require_goal=require_goal)
            entry = result.to_dict()
            if result.status == "falsified" and "forbidden" in result.details["reason"]:
                entry["replayed_in_env_enters_forbidden"] = replay_in_env(
                    env_kwargs, result.details, properties)
            key = f"{'shielded' if shield else 'unshielded'}_{'safe+goal' if require_goal else 'safe'}"
            results[key] = entry
            rows.append([shield, "never lava + goal" if require_goal else "never lava",
                         result.status, result.details["pairs"], result.details["failures"],
                         result.details.get("reason", ""),
                         entry.get("replayed_in_env_enters_forbidden", "")])
    print(markdown_table(["shield", "property", "status", "(start, goal) pairs", "failures",
                          "first failure", "replayed in env"], rows))
    write_json(args.json, {"max_steps": args.max_steps, "results": results})


if __name__ == "__main__":
    main()

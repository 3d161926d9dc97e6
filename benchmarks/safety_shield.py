"""Shield acceptance (issue 8): FetchReach with a forbidden box between the start and part of
the goal range (goals only where the property allows them).

Trains OPD with the shield in training and evaluation, and without it, then evaluates each on
100 deterministic episodes, with and without the shield, counting violations.

    python benchmarks/safety_shield.py --episodes 100 --json bench_out/safety.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import markdown_table, write_json  # noqa: E402

from agentic_rl.config import load_config  # noqa: E402
from agentic_rl.envs.make import make_env  # noqa: E402
from agentic_rl.data.checkpoint import latest_checkpoint, load_learner  # noqa: E402
from agentic_rl.train.evaluate import evaluate  # noqa: E402
from agentic_rl.train.run import train  # noqa: E402
from agentic_rl.train.safety import build_safety  # noqa: E402
from agentic_rl.train.setup import build_algo  # noqa: E402

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "opd_fetch_reach_safe.yaml"


def trained(run_dir: Path, shielded: bool, seed: int):
    flag = str(shielded).lower()
    config = load_config(CONFIG, [f"verification.shield_train={flag}",
                                  f"verification.shield_eval={flag}", f"training.seed={seed}"])
    if not (run_dir / "summary.json").exists():
        train(config, run_dir, show_progress=False)
    return config, json.loads((run_dir / "summary.json").read_text())


def evaluate_run(config, run_dir: Path, episodes: int, shield: bool) -> dict:
    env = make_env(config.environment.name, config.environment.kwargs,
                   config.environment.goal_region)
    algo = build_algo(config, env)
    load_learner(algo, latest_checkpoint(run_dir))
    forced = config.model_copy(update={"verification": config.verification.model_copy(
        update={"shield_eval": True})})
    safety = build_safety(forced, env)
    result = evaluate(algo, env, episodes, seed=777, shield=safety.eval_shield if shield else None,
                      monitor=safety.eval_monitor)
    per_episode = safety.eval_monitor.summary()
    return {"success_rate": result.success_rate, "violations": per_episode["violations"],
            "violating_steps": per_episode["violating_steps"],
            "shield_interventions": safety.eval_shield.interventions if shield else 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", default="bench_out/safety_shield")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows, payload = [], {"episodes": args.episodes, "runs": []}
    for shielded in (True, False):
        run_dir = Path(args.out_dir) / f"{'shielded' if shielded else 'unshielded'}_seed{args.seed}"
        config, summary = trained(run_dir, shielded, args.seed)
        train_violations = summary["safety"]["train"]["violations"]
        for shield_eval in (True, False):
            result = evaluate_run(config, run_dir, args.episodes, shield_eval)
            payload["runs"].append({"trained_with_shield": shielded, "eval_shield": shield_eval,
                                    "train_violations": train_violations, **result})
            rows.append([shielded, shield_eval, train_violations, result["success_rate"],
                         result["violations"], result["violating_steps"],
                         result["shield_interventions"]])
    print(markdown_table(["trained with shield", "eval shield", "training violations",
                          f"success ({args.episodes} eps)", "eval violations",
                          "violating steps", "shield interventions"], rows))
    write_json(args.json, payload)


if __name__ == "__main__":
    main()

"""``training.device: cuda`` for every family of the shared loop, on a machine with a GPU.

    python benchmarks/device_check.py --json device_check.json

Trains ppo and hgpo (FourRooms) and sac, td3 and hgpo_sac (PointReach) briefly with the
networks on CUDA, checks that the learner's parameters live there, and that a run resumed
from its checkpoint continues. Needs no MuJoCo: both tasks are this project's own envs.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import traceback
from pathlib import Path

import torch

from agentic_rl.config import validate_config
from agentic_rl.data.checkpoint import latest_checkpoint, load_learner
from agentic_rl.envs.make import make_env
from agentic_rl.train.run import train
from agentic_rl.train.setup import build_algo

GRID = {"name": "agentic_rl/FourRooms-v0", "num_envs": 8, "kwargs": {"max_episode_steps": 100}}
POINT = {"name": "agentic_rl/PointReach-v0"}
FAMILIES = {
    "ppo": ({"name": "ppo", "rollout_steps": 64}, GRID, 20_000),
    "hgpo": ({"name": "hgpo", "rollout_steps": 64, "period": 8}, GRID, 20_000),
    "sac": ({"name": "sac", "batch_size": 64, "hidden_sizes": [64, 64]}, POINT, 1_500),
    "td3": ({"name": "td3", "batch_size": 64, "hidden_sizes": [64, 64]}, POINT, 1_500),
    "hgpo_sac": ({"name": "hgpo_sac", "period": 5}, POINT, 1_500),
}


def parameter_devices(obj, depth: int = 0) -> set[str]:
    """Devices of the parameters of the modules ``obj`` holds (one level of helpers down)."""
    found: set[str] = set()
    for value in vars(obj).values():
        if isinstance(value, torch.nn.Module):
            found |= {str(p.device) for p in value.parameters()}
        elif depth == 0 and hasattr(value, "__dict__") and not isinstance(value, type):
            found |= parameter_devices(value, 1)
    return found


def check(family: str, folder: Path, device: str) -> dict:
    algorithm, environment, steps = FAMILIES[family]
    raw = {"algorithm": algorithm, "environment": environment,
           "training": {"total_timesteps": steps, "eval_freq": steps // 2, "device": device,
                        "num_eval_episodes": 10, "checkpoint_freq": steps // 2}}
    config = validate_config(raw)
    start = time.perf_counter()
    half = validate_config({**raw, "training": {**raw["training"], "total_timesteps": steps // 2}})
    train(half, folder / family, show_progress=False)
    summary = train(config, folder / family, resume=True, show_progress=False)
    algo = build_algo(config, make_env(environment["name"], environment.get("kwargs")))
    load_learner(algo, latest_checkpoint(folder / family))
    devices = sorted(parameter_devices(algo))
    return {"success_rate": summary["success_rate"], "env_steps": summary["env_steps"],
            "parameter_devices": devices, "seconds": round(time.perf_counter() - start, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--families", nargs="*", default=list(FAMILIES))
    parser.add_argument("--device", default="cuda", help="cpu: try the script without a GPU")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this check runs on a machine with a GPU")
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for family in args.families:
            try:
                results[family] = check(family, Path(folder), args.device)
            except Exception as error:  # report every family, then fail
                results[family] = {"error": f"{type(error).__name__}: {error}",
                                   "where": traceback.format_exc(limit=-4)}
            print(family, json.dumps(results[family]), flush=True)
    expected = ["cuda:0"] if args.device == "cuda" else ["cpu"]
    results["device"] = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    failed = [f for f in args.families if "error" in results[f]
              or results[f]["parameter_devices"] != expected]
    if failed:
        raise SystemExit(f"failed: {failed}")


if __name__ == "__main__":
    main()

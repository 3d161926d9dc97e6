"""Counterexamples checked on the policy that runs: the learner rebuilt from the checkpoint,
acting through its own ``act`` on the float32 observation the collector would hand it.

A ``falsified`` answer for an action property keeps that status only if its input, moved into
the region exactly (float64, as stored), makes the deployed policy violate the property;
otherwise the answer becomes ``unknown`` and says why. Each replayed result records how.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentic_rl.verify.result import VerifyResult
from agentic_rl.verify.spec import ActionBox, PropertySet

HOW = ("the learner rebuilt from the checkpoint, act(mode='deterministic') on float32 of the "
       "input (as the collector passes observations)")


def deployed_learner(config: dict[str, Any], folder: Path):
    """The learner of a run's config with the checkpoint's weights, and its observation size."""
    from agentic_rl.algos import LOOP_ALGORITHMS
    from agentic_rl.config import validate_config
    from agentic_rl.data.checkpoint import load_learner
    from agentic_rl.envs.make import make_env

    validated = validate_config(config)
    env_cfg = validated.environment
    env = make_env(env_cfg.name, env_cfg.kwargs, env_cfg.goal_region)
    algo = LOOP_ALGORITHMS[validated.algorithm.name].from_config(validated, env)
    load_learner(algo, folder)
    return algo, int(np.prod(env.observation_space["observation"].shape))


def replay(results: list[VerifyResult], properties: PropertySet, algo: Any, obs_dim: int,
           low: np.ndarray, high: np.ndarray, env_units: bool) -> None:
    """Check every falsified action property on ``algo`` (in place); ``env_units``: the
    properties are in the env's action units (else the learner's [-1, 1] actions)."""
    boxes = {p.name: p for p in properties.properties if isinstance(p, ActionBox)}
    for result in results:
        prop = boxes.get(result.name)
        if result.status != "falsified" or prop is None or result.counterexample is None:
            continue
        x = np.clip(np.asarray(result.counterexample, np.float64), low, high)
        obs = {"observation": torch.as_tensor(x[None, :obs_dim], dtype=torch.float32),
               "desired_goal": torch.as_tensor(x[None, obs_dim:], dtype=torch.float32),
               "is_first": torch.ones(1, dtype=torch.bool)}
        with torch.no_grad():
            env_action, _, extras = algo.act(obs, None, "deterministic")
        action = (env_action if env_units else extras.get("unit_action", env_action))[0]
        action = action.double().cpu().numpy()
        violates = bool(prop.violations(action[None])[0])
        result.counterexample = x.tolist()
        result.output_at_counterexample = action.tolist()
        result.details["replay"] = {"how": HOW, "inside_region": True, "violates": violates}
        if not violates:
            result.status = "unknown"
            result.details["reason"] = ("the search's counterexample does not violate the "
                                        "property under the deployed policy")

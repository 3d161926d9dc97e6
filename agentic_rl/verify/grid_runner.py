"""``agentic-rl verify`` for grid-world runs: every property by exhaustive enumeration.

A grid world is finite and deterministic, so instead of bounds the greedy policy is rolled out
from every (start cell, goal cell) pair (``finite.verify_finite``): a state property is proved
when no pair ever enters a violating state within the horizon, a ``forbidden_actions``
property when no pair's trajectory takes a forbidden action. A counterexample is a start and
goal with the actions taken, replayed in a real ``GridWorldEnv`` before it is reported.
Continuous-action and text properties do not apply to a grid policy and answer ``unknown``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentic_rl.verify.finite import gridworld_system, verify_finite
from agentic_rl.verify.result import VerifyResult
from agentic_rl.verify.spec import (
    ForbiddenActions,
    ForbiddenBox,
    PropertySet,
    StateBox,
    StateHalfspace,
)

STATELESS_LEARNERS = ("ppo", "ppo_lag")  # act(obs, None) is the whole greedy policy
HOW = ("the start and goal set in a GridWorldEnv built from the run's config, the recorded "
       "actions stepped and every observation checked against the property")


def is_grid_env(name: str) -> bool:
    from agentic_rl.envs.gridworld import ENV_IDS

    return name in ENV_IDS


def greedy(algo: Any):
    """The learner's deterministic policy over enumerated observations; ``allowed`` masks
    moves (the shielded policy)."""

    def policy(obs: dict[str, np.ndarray], allowed: np.ndarray | None) -> np.ndarray:
        tensors = {k: torch.as_tensor(v) for k, v in obs.items()}
        tensors["is_first"] = torch.ones(len(next(iter(obs.values()))), dtype=torch.bool)
        if allowed is not None:
            tensors["action_mask"] = torch.as_tensor(allowed)
        with torch.no_grad():
            action, _, _ = algo.act(tensors, None, "deterministic")
        return action.numpy().astype(np.int64)

    return policy


def replay_in_env(env_kwargs: dict, details: dict, properties: PropertySet) -> bool:
    """Step the counterexample's actions from its start and goal in a real env; True if some
    observation breaks a state property of ``properties``."""
    from agentic_rl.envs.gridworld import GridWorldEnv

    env = GridWorldEnv(**env_kwargs)
    env.reset(seed=0)
    env._pos[:] = details["start_state"][:2]
    env._has_key[:] = bool(details["start_state"][2])
    env._goal[:] = details["goal"]
    for action in details["actions"]:
        obs, *_ = env.step(action)
        if any(p.violations(obs["observation"][None], properties.parts)[0]
               for p in properties.properties
               if isinstance(p, (StateBox, StateHalfspace, ForbiddenBox))):
            return True
    return False


def verify_grid(algo: Any, env_name: str, env_kwargs: dict, properties: PropertySet
                ) -> list[VerifyResult]:
    """One result per property, in file order, for a grid learner ``algo``; a property
    without a horizon is checked over the env's episode limit."""
    from agentic_rl.envs.make import make_env

    env = make_env(env_name, env_kwargs).unwrapped
    core, max_steps = env.core, int(env.max_episode_steps)
    kwargs = {**_registered_kwargs(env_name), **env_kwargs}
    results = []
    for prop in properties.properties:
        steps = properties.horizon_of(prop) or max_steps
        single = PropertySet(parts=properties.parts, properties=[prop])
        if isinstance(prop, (StateBox, StateHalfspace, ForbiddenBox)):
            result = verify_finite(gridworld_system(core, single), greedy(algo), steps,
                                   require_goal=False, name=prop.name)
            if result.status == "falsified":
                violates = replay_in_env(kwargs, result.details, single)
                result.details["replay"] = {"how": HOW, "violates": violates}
                if not violates:
                    result.status = "unknown"
                    result.details["reason"] = "the counterexample does not replay in the env"
        elif isinstance(prop, ForbiddenActions):
            result = _forbidden_actions(core, prop, algo, steps)
        else:
            result = VerifyResult(prop.name, "unknown", 0.0, details={
                "reason": f"{prop.kind} concerns continuous or text actions, not a grid policy"})
        results.append(result)
    return results


def _forbidden_actions(core: Any, prop: ForbiddenActions, algo: Any, steps: int
                       ) -> VerifyResult:
    """Roll the greedy policy from every (start, goal) pair and watch its actions."""
    start = time.perf_counter()
    system = gridworld_system(core, None)  # nothing forbidden: the actions are watched
    base, seen = greedy(algo), []

    def watched(obs: dict[str, np.ndarray], allowed: np.ndarray | None) -> np.ndarray:
        actions = base(obs, allowed)
        bad = prop.violations(actions)
        if bad.any() and not seen:
            index = int(np.flatnonzero(bad)[0])
            seen.append({key: value[index].tolist() for key, value in obs.items()}
                        | {"action": int(actions[index])})
        return actions

    rollout = verify_finite(system, watched, steps, require_goal=False, name=prop.name)
    details = {"method": "exhaustive", "pairs": rollout.details["pairs"], "max_steps": steps}
    if not seen:
        return VerifyResult(prop.name, "proved", time.perf_counter() - start, details=details)
    first = seen[0]
    return VerifyResult(prop.name, "falsified", time.perf_counter() - start,
                        [*first["observation"], *first["desired_goal"]], [first["action"]],
                        details | {"reason": f"takes forbidden action {first['action']}"})


def _registered_kwargs(env_name: str) -> dict:
    from agentic_rl.envs.gridworld import ENV_IDS

    return dict(ENV_IDS[env_name])


def check_grid_learner(config: dict, folder: Path) -> None:
    name = config.get("algorithm", {}).get("name")
    if name not in STATELESS_LEARNERS:
        from agentic_rl.data.checkpoint import CheckpointError

        raise CheckpointError(f"{folder}: verify enumerates grid worlds for {STATELESS_LEARNERS} "
                              f"learners; this run's is {name!r}")

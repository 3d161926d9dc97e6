"""Exhaustive checks for finite deterministic environments (capability V4, grid worlds).

``verify_finite`` enumerates every (initial state, goal) pair, rolls the greedy policy forward
for at most ``max_steps`` steps (all pairs at once), and answers ``proved`` when no pair ever
enters a forbidden state and every pair reaches its goal in time; otherwise ``falsified`` with the
first failing pair's start, goal, actions and states, which replay exactly in the environment.
This is a proof by enumeration, not by bounds: it is exact for a deterministic environment.

``gridworld_system`` adapts ``agentic_rl.envs.gridworld.GridCore`` (duck-typed: ``move``,
``observe``, ``layout.free_cells()``) and takes the forbidden states from a property file's state
properties evaluated on the flat observation ``[row, col, has_key]`` (coordinates in [-1, 1]).
``safe_action_mask`` is the matching one-step shield: it masks actions whose next state breaks a
property (``grid_states_from_obs`` recovers the states from observations).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentic_rl.verify.result import VerifyResult
from agentic_rl.verify.spec import ForbiddenBox, PropertySet, StateBox, StateHalfspace

States = np.ndarray
Policy = Callable[[Any, np.ndarray | None], np.ndarray]


@dataclass
class FiniteSystem:
    """A deterministic environment small enough to enumerate.

    Attributes:
        initial_states: ``[S, s]`` integer states.
        goals: ``[G, g]`` goals.
        step: ``(states [N, s], actions [N]) -> states [N, s]``, deterministic.
        observe: ``(states [N, s], goals [N, g]) -> policy input`` (e.g. a dict of arrays).
        reached: ``(states, goals) -> [N]`` bool.
        forbidden: ``states -> [N]`` bool.
        n_actions: number of discrete actions.
    """

    initial_states: States
    goals: np.ndarray
    step: Callable[[States, np.ndarray], States]
    observe: Callable[[States, np.ndarray], Any]
    reached: Callable[[States, np.ndarray], np.ndarray]
    forbidden: Callable[[States], np.ndarray]
    n_actions: int


def safe_action_mask(system: FiniteSystem, states: States) -> np.ndarray:
    """``[N, n_actions]``: actions whose next state is not forbidden (all True if none is)."""
    n = states.shape[0]
    mask = np.stack([~system.forbidden(system.step(states, np.full(n, a)))
                     for a in range(system.n_actions)], axis=1)
    mask[~mask.any(1)] = True  # nothing is safe: leave the choice to the policy, it will fail
    return mask


def verify_finite(system: FiniteSystem, policy: Policy, max_steps: int, shield: bool = False,
                  require_goal: bool = True, name: str = "finite") -> VerifyResult:
    """Check "never forbidden (and goal reached) within ``max_steps``" for every (start, goal).

    Args:
        system: the enumerable environment.
        policy: ``(obs, allowed [N, n_actions] or None) -> actions [N]``, greedy.
        max_steps: steps checked (and the budget to reach the goal).
        shield: pass ``safe_action_mask`` to the policy (the shielded policy).
        require_goal: also require reaching the goal within ``max_steps``; False checks safety
            only (a one-step shield keeps a policy safe but can make it loop).
    """
    start_time = time.perf_counter()
    n_starts, n_goals = len(system.initial_states), len(system.goals)
    starts = np.repeat(system.initial_states, n_goals, axis=0)
    goals = np.tile(system.goals, (n_starts, 1))
    states, actions = starts.copy(), np.zeros((len(starts), max_steps), dtype=np.int64)
    taken = np.zeros(len(starts), dtype=np.int64)
    history = [states.copy()]
    failed = system.forbidden(states)
    reason = np.where(failed, "starts in a forbidden state", "").astype(object)
    done = failed | system.reached(states, goals)
    for t in range(max_steps):
        active = np.flatnonzero(~done)
        if active.size == 0:
            break
        allowed = safe_action_mask(system, states[active]) if shield else None
        chosen = np.asarray(policy(system.observe(states[active], goals[active]), allowed))
        actions[active, t] = chosen
        taken[active] += 1
        states = states.copy()
        states[active] = system.step(states[active], chosen)
        history.append(states.copy())
        bad = np.zeros(len(states), bool)
        bad[active] = system.forbidden(states[active])
        reason[bad] = f"enters a forbidden state at step {t + 1}"
        failed |= bad
        done |= bad | system.reached(states, goals)
    late = ~done if require_goal else np.zeros_like(done)
    reason[late] = f"does not reach the goal within {max_steps} steps"
    failed |= late
    details: dict[str, Any] = {"method": "exhaustive", "pairs": int(len(starts)),
                               "failures": int(failed.sum()), "max_steps": max_steps,
                               "require_goal": require_goal}
    if not failed.any():
        return VerifyResult(name, "proved", time.perf_counter() - start_time, details=details)
    index = int(np.flatnonzero(failed)[0])
    length = int(taken[index])
    trajectory = np.stack([h[index] for h in history[: length + 1]])
    details.update({"reason": str(reason[index]), "start_state": starts[index].tolist(),
                    "goal": goals[index].tolist(), "actions": actions[index, :length].tolist(),
                    "trajectory": trajectory.tolist(),
                    "failure_reasons": _reason_counts(reason[failed])})
    return VerifyResult(name, "falsified", time.perf_counter() - start_time,
                        starts[index].astype(float).tolist(),
                        actions[index, :1].astype(float).tolist(), details)


def _reason_counts(reasons: np.ndarray) -> dict[str, int]:
    kinds = ["forbidden" if "forbidden" in r else "goal not reached" for r in reasons]
    return {k: kinds.count(k) for k in sorted(set(kinds))}


def grid_states_from_obs(core: Any, observation: np.ndarray) -> States:
    """Integer states ``[N, 3]`` (row, col, has_key) from grid observations ``[N, 3]``.

    Inverts ``GridCore.to_coords``, so a loop that only sees observations can call
    ``safe_action_mask`` (e.g. to mask a PPO policy's logits before sampling).
    """
    observation = np.atleast_2d(np.asarray(observation, dtype=float))
    cells = np.rint((observation[:, :2] + 1.0) / core.scale + 1.0).astype(np.int64)
    return np.concatenate([cells, np.rint(observation[:, 2:3]).astype(np.int64)], axis=1)


def gridworld_system(core: Any, properties: PropertySet | None, goals: np.ndarray | None = None
                     ) -> FiniteSystem:
    """A ``FiniteSystem`` for a grid world: states ``[row, col, has_key]``, 4 actions.

    Initial states are the allowed free cells, without the key; goals default to every allowed
    free cell. Forbidden = any state property of ``properties``
    violated by the observation ``core.observe(...)["observation"]``; ``properties=None``
    forbids nothing (to watch something else along the rollouts, such as the actions).
    """
    state_props = [] if properties is None else [
        p for p in properties.properties if isinstance(p, (StateBox, StateHalfspace, ForbiddenBox))]
    if properties is not None and not state_props:
        raise ValueError("the property file has no state property to check on the grid")

    def observation(states: States) -> np.ndarray:
        pos, key = states[:, :2], states[:, 2].astype(bool)
        return core.observe(pos, key, pos)["observation"]

    def forbidden(states: States) -> np.ndarray:
        if not state_props:
            return np.zeros(len(states), dtype=bool)
        obs = observation(states)
        return np.any([p.violations(obs, properties.parts) for p in state_props], axis=0)

    def step(states: States, actions: np.ndarray) -> States:
        pos, key = core.move(states[:, :2], states[:, 2].astype(bool), np.asarray(actions))
        return np.concatenate([pos, key[:, None].astype(np.int64)], axis=1)

    cells = np.asarray(core.layout.free_cells(), dtype=np.int64)
    initial = np.concatenate([cells, np.zeros((len(cells), 1), np.int64)], axis=1)
    allowed = ~forbidden(initial)
    initial = initial[allowed]
    if goals is None:
        goals = cells[allowed]
    return FiniteSystem(
        initial_states=initial, goals=np.asarray(goals, dtype=np.int64), step=step,
        observe=lambda states, g: core.observe(states[:, :2], states[:, 2].astype(bool), g),
        reached=lambda states, g: (states[:, :2] == g).all(-1), forbidden=forbidden, n_actions=4)

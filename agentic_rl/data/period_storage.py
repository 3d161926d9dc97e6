"""Two replays for a Manager / Worker learner with off-policy levels (``hgpo_sac``).

The Worker's replay holds one row per env step with the current subgoal as its desired goal;
the Manager's holds one row per period: its start observation, the env goal, the subgoal (its
action), the env reward summed over the period and the observation where the period ended.
Both relabel goals with HER at sample time. Where a level's HER is on, every sampled row's
reward, relabelled or not, is the reward function at the row's last state: a Manager row then
earns the reward of the state its period ended in (-1 or 0 per period for a sparse env, HAC's
upper-level reward), not the stored sum. Which rows an env step makes is the algorithm's
business (``rows``); this module does the period bookkeeping, the update schedule of each
level (``update_every``) and the checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from agentic_rl.data.replay import ReplayBuffer
from agentic_rl.data.checkpoint import prefixed, with_prefix
from agentic_rl.data.replay_storage import her_kwargs, replay_shapes
from agentic_rl.data.storage import StepRecord, StorageSpec

LEVELS = ("worker", "manager")
# (transition, extras) -> (Worker row, Manager input before the step, Manager input after)
RowFn = Callable[[dict, dict], tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class LevelSettings:
    """One level's replay: sizes, batch, HER (``HERConfig``) and update rate."""

    obs_dim: int
    goal_dim: int
    act_dim: int
    batch_size: int
    her: Any
    update_every: int
    extra_fields: tuple[str, ...] = ()  # the learner's own scalar fields per row
    goal_fns: Any = None  # the level's reward / success tests for HER (None: the env's)


class PeriodRecorder:
    """Turns env steps into Manager transitions, one per period, and hands over each env's
    transitions as an episode when it ends."""

    def __init__(self, num_envs: int) -> None:
        self.start: dict[str, torch.Tensor] = {}
        self.reward = torch.zeros(num_envs)
        self.unreached = torch.zeros(num_envs, dtype=torch.bool)  # tested, not reached yet
        self.episodes: list[list[dict[str, torch.Tensor]]] = [[] for _ in range(num_envs)]

    def step(self, manager_obs: torch.Tensor, manager_next_obs: torch.Tensor,
             transition: dict[str, torch.Tensor], extras: dict[str, torch.Tensor],
             episode_end: torch.Tensor, reached: torch.Tensor | None = None
             ) -> list[tuple[int, dict]]:
        """Record one env step; returns ``(env, episode fields [L, ...])`` of ended episodes.

        ``manager_obs`` / ``manager_next_obs [N, o]`` are the Manager's inputs before and after
        the step; ``extras`` holds ``new_goal`` / ``period_end [N]`` and ``goal_unit [N, G]``.
        Subgoal testing: with ``extras["testing"] [N]`` (the period's subgoal is tested) and
        ``reached [N]`` (the step reached the subgoal), each Manager transition gets
        ``missed``: 1.0 where a tested subgoal was not reached in its period."""
        new = extras["new_goal"]
        testing = "testing" in extras
        if testing:
            self.unreached[new] = extras["testing"][new].bool()
            self.unreached &= ~reached.bool()
        start = {"obs": manager_obs, "achieved_goal": transition["achieved_goal"],
                 "desired_goal": transition["desired_goal"], "action": extras["goal_unit"]}
        if not self.start:
            self.start = {k: v.clone() for k, v in start.items()}
        if new.any():  # most steps start no period: skip the masked writes
            for key, value in start.items():
                self.start[key][new] = value[new]
            self.reward[new] = 0.0
        self.reward += transition["reward"]
        ended = []
        for env in torch.nonzero(extras["period_end"] | episode_end).flatten().tolist():
            self.episodes[env].append({
                **{k: v[env].clone() for k, v in self.start.items()},
                "reward": self.reward[env].clone(),
                "next_obs": manager_next_obs[env],
                "next_achieved_goal": transition["next_achieved_goal"][env],
                "terminated": transition["terminated"][env],
                **({"missed": self.unreached[env].float()} if testing else {})})
            if episode_end[env]:
                steps = self.episodes[env]
                ended.append((env, {k: torch.stack([s[k] for s in steps]) for k in steps[0]}))
                self.episodes[env] = []
        return ended


class PeriodStorage:
    """See the module docstring; ``add`` returns ``{"worker", "manager"}`` episodes."""

    warm = False

    def __init__(self, spec: StorageSpec, levels: dict[str, LevelSettings], period: int,
                 rows: RowFn) -> None:
        self.spec, self.levels, self.rows = spec, levels, rows
        capacity = {"worker": max(spec.buffer_size // spec.num_envs, spec.horizon + 1),
                    "manager": max(spec.buffer_size // period, spec.horizon + 1)}
        self.replays = {level: ReplayBuffer(
            capacity[level], spec.num_envs if level == "worker" else 1,
            replay_shapes(s.obs_dim, s.goal_dim, s.act_dim) | dict.fromkeys(s.extra_fields, ()))
            for level, s in levels.items()}
        self.her = {level: her_kwargs(s.her, s.goal_fns or spec.goal_fns)
                    for level, s in levels.items()}
        self.recorder = PeriodRecorder(spec.num_envs)
        self.debt = {level: 0.0 for level in LEVELS}  # updates owed, fractional

    def add(self, step: StepRecord) -> list[dict[str, dict[str, torch.Tensor]]]:
        row, manager_obs, manager_next = self.rows(step.transition, step.extras)
        self.replays["worker"].add(row, step.episode_end)
        observed = []
        reached = (self.spec.goal_fns.success_fn(step.transition["next_achieved_goal"],
                                                 step.extras["goal"])
                   if "testing" in step.extras else None)
        for env, episode in self.recorder.step(manager_obs, manager_next, step.transition,
                                               step.extras, step.episode_end, reached):
            self.replays["manager"].add_episode(episode)
            observed.append({"worker": self.replays["worker"].last_episode(env),
                             "manager": episode})
        return observed

    def owed(self, env_steps: int, new_steps: int) -> list[str]:
        if env_steps < self.spec.learning_starts or self.replays["manager"].num_sampleable() == 0:
            return []
        requests = []
        for level in LEVELS:
            self.debt[level] += new_steps / self.levels[level].update_every
            while self.debt[level] >= 1:
                requests.append(level)
                self.debt[level] -= 1
        return requests

    def sample(self, level: str, generator: torch.Generator) -> dict[str, dict]:
        return {level: self.replays[level].sample(self.levels[level].batch_size, generator,
                                                  **self.her[level])}

    def metrics(self) -> dict[str, float]:
        return {}

    def abandon(self, envs: np.ndarray) -> None:
        """The episodes in progress in ``envs`` (``[N]`` bool) will never finish: the Worker's
        rows are never sampled, the Manager's periods so far are dropped."""
        self.replays["worker"].drop_unfinished(envs)
        for env in np.flatnonzero(envs).tolist():
            self.recorder.episodes[env] = []

    def set_task(self, task_id: str, finished_stage: list) -> None:
        """Curriculum stages change the env only; both replays keep their data."""

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays = {}
        for level, replay in self.replays.items():
            arrays |= with_prefix(replay.state_arrays(), level)
        return arrays, {"debt": self.debt}

    def load_state(self, arrays: dict[str, np.ndarray], meta: dict[str, Any],
                   exact: bool) -> None:
        for level, replay in self.replays.items():
            replay.load_state_arrays(prefixed(arrays, level))
        self.debt = {level: float(v) for level, v in meta["debt"].items()}
        if not exact:  # the Manager's rows are added per finished episode: nothing to drop
            self.replays["worker"].drop_unfinished()

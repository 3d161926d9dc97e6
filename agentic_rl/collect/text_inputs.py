"""Admissible-command text envs (ALFWorld) as integer observations for the shared collector.

:class:`TextInputs` wraps one env: every text (task, observation, inventory, the previous
command, the Manager's subgoal, each admissible command) becomes a
:class:`~agentic_rl.data.text_table.TextTable` row id, and each command slot gets its history and
match buckets, so a vector env of them batches like any ``Dict`` env and the learner sees only
integers (the table encodes the new texts of all envs together in its next forward pass).
Which game each episode plays comes from a schedule (``collect.game_schedule``); with a planner
the wrapper refreshes the text subgoal every ``period`` steps or as soon as the planner says the
last step reached it (``planner.reached``), handing it the episode's ``(command, feedback)``
steps so far.
"""

from __future__ import annotations

import collections
from typing import Any

import gymnasium as gym
import numpy as np

from agentic_rl.data.object_memory import ObjectMemory
from agentic_rl.data.revisits import RevisitMemory
from agentic_rl.data.text_table import TextTable, history_bucket, moved_there
from agentic_rl.plan.text_subgoals import subgoal_text

ROW_IDS = ("task", "observation", "inventory", "previous_command", "subgoal", "expert_command",
           "expert_subgoal")
COMMAND_SLOTS = ("commands", "history", "match")
EPISODE_TAGS = ("game", "episode", "labelled")
INT_MAX = np.iinfo(np.int64).max


class TextInputs(gym.Wrapper):
    """One text env with integer observations.

    Observation (int64): ``task``, ``observation``, ``inventory``, ``previous_command``,
    ``subgoal``, ``expert_command`` and ``expert_subgoal`` row ids (0: none; the expert's command
    and the subgoal it pursues, as a templated subgoal text, only in episodes the schedule marks
    for labelling), ``commands``, ``history`` and ``match`` ``[max_commands]``
    (0-padded), ``game`` (index into the env's game list), ``episode`` (the schedule's
    episode number of this slot) and ``labelled`` (1 in episodes the expert labels). ``info["action_mask"] [max_commands]`` marks the admissible
    commands; ``info["is_success"]`` is ``info["won"]``.

    Args:
        env: an ``ALFWorldEnv`` (text observations, ``info["admissible_commands"]``).
        table: the text table shared with the learner (lazy encoding).
        schedule: ``assign(slot, seed) -> (game index, episode number, label with expert)``.
        slot: this env's index in its vector env.
        max_commands: admissible commands beyond this are dropped.
        planner: optional subgoal planner (:mod:`agentic_rl.plan`) and its ``period``.
    """

    def __init__(self, env: gym.Env, table: TextTable, schedule, slot: int = 0,
                 max_commands: int = 64, planner=None, period: int = 5) -> None:
        super().__init__(env)
        self.table, self.schedule, self.slot = table, schedule, slot
        self.width, self.planner, self.period = max_commands, planner, period
        self.expert_always = bool(planner is not None and planner.needs_expert)
        spaces = {k: gym.spaces.Box(0, INT_MAX, (), np.int64) for k in ROW_IDS + EPISODE_TAGS}
        spaces.update({k: gym.spaces.Box(0, INT_MAX, (max_commands,), np.int64)
                       for k in COMMAND_SLOTS})
        self.observation_space = gym.spaces.Dict(spaces)
        self.action_space = gym.spaces.Discrete(max_commands)
        self.counts: collections.Counter = collections.Counter()
        self.previous = self.subgoal = ""
        self.subgoal_age, self.game, self.episode, self.labelled = 0, 0, 0, False
        self.commands: list[str] = []
        self.trajectory: list[tuple[str, str]] = []  # (command, feedback) with a planner
        self.memory = ObjectMemory("")
        self.revisits = RevisitMemory()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.game, self.episode, self.labelled = self.schedule.assign(self.slot, seed)
        self.env.unwrapped.expert_enabled = self.labelled or self.expert_always
        obs, info = self.env.reset(seed=seed, options={"game_index": self.game})
        self.counts.clear()
        self.previous = self.subgoal = ""
        self.subgoal_age = 0
        self.trajectory = []
        self.memory = ObjectMemory(obs["task"])
        self.revisits = RevisitMemory()
        return self._inputs(obs, info), self._info(info)

    def step(self, action):
        index = int(action)
        command = self.commands[index] if 0 <= index < len(self.commands) else ""
        self.counts[command] += 1
        self.previous, self.subgoal_age = command, self.subgoal_age + 1
        obs, reward, terminated, truncated, info = self.env.step(index)
        if self.planner is not None:
            self.trajectory.append((command, obs["observation"]))
        return self._inputs(obs, info), reward, terminated, truncated, self._info(info)

    def _info(self, info: dict[str, Any]) -> dict[str, Any]:
        mask = np.zeros(self.width, bool)
        mask[: len(self.commands)] = True
        return {"action_mask": mask, "is_success": bool(info.get("won", False)),
                "task_type": str(info.get("task_type", ""))}

    def _inputs(self, obs: dict[str, Any], info: dict[str, Any]) -> dict[str, np.ndarray]:
        self.commands = list(info["admissible_commands"][: self.width])
        if self.planner is not None:
            self._refresh_subgoal(obs, info)
        expert = (info.get("expert_command") or "") if self.labelled else ""
        pursued = info.get("expert_subgoal") if self.labelled else None
        ids = self.table.ids([obs["task"], obs["observation"], obs["inventory"], self.previous,
                              self.subgoal, expert, subgoal_text(*pursued) if pursued else "",
                              *self.commands])
        out = {key: np.int64(ids[i]) for i, key in enumerate(ROW_IDS)}
        n = len(self.commands)
        commands = np.zeros(self.width, np.int64)
        commands[:n] = ids[len(ROW_IDS):]
        self.memory.update(self.previous, obs["observation"])
        self.revisits.update(self.previous)
        history = np.zeros(self.width, np.int64)
        history[:n] = history_bucket(np.asarray([self.counts[c] for c in self.commands], np.int64),
                                     [bool(self.previous) and c == self.previous
                                      for c in self.commands],
                                     [moved_there(c) in self.counts for c in self.commands],
                                     self.memory.remembered(self.commands),
                                     self.revisits.revisits(self.commands))
        match = np.zeros(self.width, np.int64)
        match[:n] = self.table.match_buckets(int(out["task"]), int(out["observation"]),
                                             commands[:n])
        return {**out, "commands": commands, "history": history, "match": match,
                "game": np.int64(self.game), "episode": np.int64(self.episode),
                "labelled": np.int64(self.labelled)}

    def _refresh_subgoal(self, obs: dict[str, Any], info: dict[str, Any]) -> None:
        reached = bool(self.trajectory) and self.planner.reached(self.subgoal,
                                                                  *self.trajectory[-1])
        if not self.subgoal or reached or self.subgoal_age >= self.period:
            where = {**info, "slot": self.slot, "episode": self.episode}
            self.subgoal = self.planner.subgoal(obs["task"], obs["observation"],
                                                obs["inventory"], self.commands, where,
                                                self.trajectory)
            self.subgoal_age = 0

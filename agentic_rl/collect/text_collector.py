"""Plays admissible-command text envs (ALFWorld) in lockstep with a text learner.

B envs are reset on chosen games, and every step the learner acts for all unfinished ones in one
batched forward pass (texts looked up in the shared :class:`~agentic_rl.nets.text.TextTable`;
unseen texts of all envs are encoded together). With a planner, a Manager refreshes each env's
text subgoal every ``period`` steps or as soon as the Worker issues it ("reached"). Truncated
episodes get one more forward pass for the value that bootstraps them.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import numpy as np
import torch

from agentic_rl.data.text_episodes import TextEpisode, text_episode
from agentic_rl.data.text_table import TextTable, history_bucket


@dataclasses.dataclass
class _Playing:
    """One env's episode in progress (texts until it ends)."""

    obs: dict[str, Any]
    info: dict[str, Any]
    task: str = ""
    observations: list[str] = dataclasses.field(default_factory=list)
    inventories: list[str] = dataclasses.field(default_factory=list)
    command_lists: list[list[str]] = dataclasses.field(default_factory=list)
    actions: list[int] = dataclasses.field(default_factory=list)
    rewards: list[float] = dataclasses.field(default_factory=list)
    log_probs: list[float] = dataclasses.field(default_factory=list)
    values: list[float] = dataclasses.field(default_factory=list)
    subgoals: list[str] = dataclasses.field(default_factory=list)
    labels: list[str] = dataclasses.field(default_factory=list)
    counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    previous: str = ""
    subgoal: str = ""
    subgoal_age: int = 0
    terminated: bool = False
    truncated: bool = False
    bootstrap: float = 0.0


class TextCollector:
    """Runs up to ``len(envs)`` episodes at once.

    Args:
        envs: ALFWorld-like envs (``Discrete`` admissible-command actions, text observations,
            ``info["admissible_commands"]``).
        table: shared text table (with an encoder).
        learner: has ``act(table, step, memory, deterministic)`` and ``policy``.
        planner: optional subgoal planner (see :mod:`agentic_rl.plan`).
        period: Manager period C.
        max_commands: admissible commands beyond this are dropped.
        expert_labels: record ``info["expert_command"]`` at every step (for DAgger; the envs
            must compute it).
    """

    def __init__(self, envs: list, table: TextTable, learner, planner=None, period: int = 5,
                 max_commands: int = 64, expert_labels: bool = False) -> None:
        self.envs, self.table, self.learner = envs, table, learner
        self.planner, self.period, self.max_commands = planner, period, max_commands
        self.expert_labels = expert_labels

    def play(self, game_indices: list[int], seeds: list[int],
             deterministic: bool = False) -> list[TextEpisode]:
        """One episode per ``(game index, seed)``, in that order (at most ``len(envs)``)."""
        if len(game_indices) > len(self.envs):
            raise ValueError(f"{len(game_indices)} games but only {len(self.envs)} envs")
        playing = []
        for env, game, seed in zip(self.envs, game_indices, seeds):
            obs, info = env.reset(seed=int(seed), options={"game_index": int(game)})
            playing.append(_Playing(obs, info, task=obs["task"]))
        policy = self.learner.policy
        memory = policy.initial_state(len(playing))
        active = list(range(len(playing)))
        while active:
            step = self._inputs([playing[i] for i in active])
            action, log_prob, value, new_memory = self.learner.act(
                self.table.tensor(), step, memory[:, active], deterministic)
            memory[:, active] = new_memory
            still = []
            for row, i in enumerate(active):
                p = playing[i]
                if p.truncated:  # this pass only valued the state after the last step
                    p.bootstrap = float(value[row])
                    continue
                self._record(p, int(action[row]), float(log_prob[row]), float(value[row]))
                obs, reward, terminated, truncated, info = self.envs[i].step(int(action[row]))
                p.obs, p.info = obs, info
                p.rewards.append(float(reward))
                p.terminated, p.truncated = bool(terminated), bool(truncated)
                if not terminated:
                    still.append(i)
            active = still
        return [self._episode(p, env) for p, env in zip(playing, self.envs)]

    def _inputs(self, batch: list[_Playing]) -> dict[str, torch.Tensor]:
        """``[A, 1, ...]`` policy inputs for the envs in ``batch`` (updates their subgoals)."""
        lists = [p.info["admissible_commands"][: self.max_commands] for p in batch]
        for p, commands in zip(batch, lists):
            if self.planner is not None and not p.truncated:
                self._refresh_subgoal(p, commands)
        texts = [t for p, commands in zip(batch, lists) for t in
                 (p.task, p.obs["observation"], p.obs["inventory"], p.previous, p.subgoal,
                  *commands)]
        ids = self.table.ids(texts)
        width = max(len(c) for c in lists)
        out = {key: np.zeros((len(batch), 1), np.int64) for key in
               ("task", "observation", "inventory", "previous_command", "subgoal")}
        out["commands"] = np.zeros((len(batch), 1, width), np.int64)
        out["history"] = np.zeros((len(batch), 1, width), np.int64)
        out["match"] = np.zeros((len(batch), 1, width), np.int64)
        out["command_mask"] = np.zeros((len(batch), 1, width), bool)
        start = 0
        for row, (p, commands) in enumerate(zip(batch, lists)):
            for key, offset in (("task", 0), ("observation", 1), ("inventory", 2),
                                ("previous_command", 3), ("subgoal", 4)):
                out[key][row, 0] = ids[start + offset]
            n = len(commands)
            out["commands"][row, 0, :n] = ids[start + 5 : start + 5 + n]
            out["history"][row, 0, :n] = history_bucket(
                np.asarray([p.counts[c] for c in commands], np.int64),
                [bool(p.previous) and c == p.previous for c in commands])
            out["match"][row, 0, :n] = self.table.match_buckets(
                int(out["task"][row, 0]), int(out["observation"][row, 0]),
                out["commands"][row, 0, :n])
            out["command_mask"][row, 0, :n] = True
            start += 5 + n
        batch_tensors = {key: torch.from_numpy(value) for key, value in out.items()}
        if self.learner.policy.use_subgoal:
            batch_tensors["subgoal"] = self.table.tensor()[batch_tensors["subgoal"]]
        return batch_tensors

    def _refresh_subgoal(self, p: _Playing, commands: list[str]) -> None:
        reached = bool(p.subgoal) and p.previous == p.subgoal
        if not p.subgoal or reached or p.subgoal_age >= self.period:
            p.subgoal = self.planner.subgoal(p.task, p.obs["observation"], p.obs["inventory"],
                                             commands, p.info)
            p.subgoal_age = 0

    def _record(self, p: _Playing, action: int, log_prob: float, value: float) -> None:
        commands = list(p.info["admissible_commands"][: self.max_commands])
        p.observations.append(p.obs["observation"])
        p.inventories.append(p.obs["inventory"])
        p.command_lists.append(commands)
        p.actions.append(action)
        p.log_probs.append(log_prob)
        p.values.append(value)
        p.subgoals.append(p.subgoal)
        if self.expert_labels:
            p.labels.append(p.info.get("expert_command") or "")
        p.subgoal_age += 1
        p.counts[commands[action]] += 1
        p.previous = commands[action]

    def _episode(self, p: _Playing, env) -> TextEpisode:
        episode = text_episode(
            self.table, p.task, p.observations, p.inventories, p.command_lists, p.actions,
            p.rewards, p.terminated, subgoals=p.subgoals if self.planner is not None else None,
            game=str(p.info.get("gamefile", "")), task_type=str(p.info.get("task_type", "")),
            success=bool(p.info.get("won", False)), source="rollout",
            bootstrap_value=p.bootstrap)
        episode.log_prob = np.asarray(p.log_probs, np.float32)
        episode.value = np.asarray(p.values, np.float32)
        if self.expert_labels:
            episode.expert_command = self.table.ids(p.labels)
        return episode


def success_table(episodes: list[TextEpisode]) -> dict[str, Any]:
    """``{"success_rate", "mean_steps", "episodes", "per_task_type": {type: {...}}}``."""
    by_type: dict[str, list[TextEpisode]] = collections.defaultdict(list)
    for episode in episodes:
        by_type[episode.task_type].append(episode)

    def stats(group: list[TextEpisode]) -> dict[str, float]:
        return {"success_rate": float(np.mean([e.success for e in group])),
                "mean_steps": float(np.mean([len(e) for e in group])), "episodes": len(group)}

    return {**stats(episodes),
            "per_task_type": {k: stats(v) for k, v in sorted(by_type.items())}}

"""Lists of :class:`~agentic_rl.data.text_episodes.TextEpisode` as flat arrays and JSON, for
checkpoints (no pickling): per-step fields concatenated, command rows padded to one width."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from agentic_rl.data.text_episodes import TextEpisode

STEP_ARRAYS = ("observation", "inventory", "previous_command", "num_commands", "action",
               "reward", "log_prob", "value", "subgoal", "expert_command", "expert_subgoal")
ROW_ARRAYS = ("commands", "match")
META = ("task", "terminated", "bootstrap_value", "game", "task_type", "success", "source")


def pack_episodes(episodes: list[TextEpisode], prefix: str
                  ) -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
    """``(arrays under prefix.*, one JSON-able dict per episode)``."""
    if not episodes:
        return {}, []
    arrays = {f"{prefix}.lengths": np.asarray([len(e) for e in episodes], np.int64)}
    for key in STEP_ARRAYS:
        arrays[f"{prefix}.{key}"] = np.concatenate([
            _step_field(e, key) for e in episodes])
    width = max(e.commands.shape[1] for e in episodes)
    for key in ROW_ARRAYS:
        arrays[f"{prefix}.{key}"] = np.concatenate([
            np.pad(getattr(e, key), ((0, 0), (0, width - e.commands.shape[1])))
            for e in episodes])
    meta = [{key: getattr(e, key) for key in META} for e in episodes]
    return arrays, meta


def unpack_episodes(arrays: dict[str, np.ndarray], meta: list[dict[str, Any]],
                    prefix: str) -> list[TextEpisode]:
    """Inverse of :func:`pack_episodes`."""
    if not meta:
        return []
    bounds = np.concatenate([[0], np.cumsum(arrays[f"{prefix}.lengths"])])
    episodes = []
    for i, info in enumerate(meta):
        part = slice(int(bounds[i]), int(bounds[i + 1]))
        steps = {key: _stored(arrays, f"{prefix}.{key}", part) for key in STEP_ARRAYS}
        width = int(steps["num_commands"].max())
        rows = {key: arrays[f"{prefix}.{key}"][part, :width].copy() for key in ROW_ARRAYS}
        episodes.append(TextEpisode(**steps, **rows, **info))
    return episodes


def _step_field(episode: TextEpisode, key: str) -> np.ndarray:
    value = getattr(episode, key)
    if value is None:  # expert labels where no expert labelled the episode
        return np.zeros(len(episode), np.int64)
    return value


def _stored(arrays: dict[str, np.ndarray], key: str, part: slice) -> np.ndarray:
    if key not in arrays:  # checkpoints written before expert_subgoal existed
        return np.zeros(part.stop - part.start, np.int64)
    return arrays[key][part].copy()


def with_final_step(episode: TextEpisode, final: dict[str, np.ndarray]) -> TextEpisode:
    """The episode with one more step: the state it was truncated in (``final``: its inputs
    as ``[1, ...]`` arrays, as ``collect.text_inputs`` gives them)."""
    width = max(episode.commands.shape[1], int(final["action_mask"].sum()))
    pad = lambda rows: np.pad(rows, ((0, 0), (0, width - rows.shape[1])))  # noqa: E731
    extend = lambda key: np.concatenate([getattr(episode, key), final[key]])  # noqa: E731
    return dataclasses.replace(
        episode, observation=extend("observation"), inventory=extend("inventory"),
        previous_command=extend("previous_command"), subgoal=extend("subgoal"),
        commands=np.concatenate([pad(episode.commands), final["commands"][:, :width]]),
        match=np.concatenate([pad(episode.match), final["match"][:, :width]]),
        num_commands=np.append(episode.num_commands, int(final["action_mask"].sum())),
        action=np.append(episode.action, 0), reward=np.append(episode.reward, 0.0),
        log_prob=np.append(episode.log_prob, 0.0), value=np.append(episode.value, 0.0),
        expert_command=None, expert_subgoal=None, final=None)

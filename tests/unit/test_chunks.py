"""Chunks of env steps (what a rollout worker sends) and the storages' ``abandon`` (what the
loop does when a worker dies): hand-built steps, exact expected arrays."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agentic_rl.collect.chunks import CollectedStep, join, pack, unpack
from agentic_rl.collect.collector import FinishedEpisode
from agentic_rl.data.replay import ReplayBuffer
from agentic_rl.data.rollout_storage import RolloutStorage
from agentic_rl.data.storage import StepRecord


def step(t: int, num_envs: int, ended: tuple[int, ...] = ()) -> CollectedStep:
    """Step ``t`` of ``num_envs`` envs whose values encode ``(t, env)``."""
    values = torch.tensor([[10.0 * t + env] for env in range(num_envs)])
    end = torch.tensor([env in ended for env in range(num_envs)])
    record = StepRecord({"reward": values[:, 0], "terminated": end.float()},
                        {"unit_action": values}, end,
                        [FinishedEpisode(env, True, 1.0, t + 1) for env in ended],
                        {"observation": values + 1}, {"observation": values,
                                                      "is_first": torch.zeros(num_envs, dtype=bool)},
                        {"observation": values + 1})
    return CollectedStep(record, values * 2, np.full(num_envs, t))


def test_pack_unpack_round_trip_keeps_every_field():
    steps = [step(0, 2), step(1, 2, ended=(1,))]
    chunk = pack(steps)
    assert chunk.steps == 2 and chunk.num_envs == 2
    assert chunk.arrays["transition/reward"].shape == (2, 2)
    back = unpack(chunk, 1)
    assert torch.equal(back.record.transition["reward"], torch.tensor([10.0, 11.0]))
    assert torch.equal(back.record.obs["is_first"], torch.tensor([False, False]))
    assert torch.equal(back.record.episode_end, torch.tensor([False, True]))
    assert torch.equal(back.env_action, torch.tensor([[20.0], [22.0]]))
    assert back.episode_step.tolist() == [1, 1]
    assert back.record.finished == [FinishedEpisode(1, True, 1.0, 2)]


def test_join_puts_workers_side_by_side_and_offsets_finished_envs():
    first = pack([step(0, 2), step(1, 2)])
    second = pack([step(0, 3, ended=(2,)), step(1, 3, ended=(0,))])
    joined = join([first, second])
    assert joined.num_envs == 5
    rewards = unpack(joined, 1).record.transition["reward"]
    assert rewards.tolist() == [10.0, 11.0, 10.0, 11.0, 12.0]
    assert [e.env_index for e in joined.finished[0]] == [4]
    assert [e.env_index for e in joined.finished[1]] == [2]
    assert joined.arrays["transition/reward"].flags.writeable


def test_join_refuses_chunks_of_different_lengths():
    with pytest.raises(ValueError, match="same number of steps"):
        join([pack([step(0, 1)]), pack([step(0, 1), step(1, 1)])])


def test_replay_drop_unfinished_forgets_only_the_given_envs():
    shapes = {"obs": (1,), "achieved_goal": (1,), "desired_goal": (1,), "action": (1,),
              "reward": (), "next_obs": (1,), "next_achieved_goal": (1,), "terminated": ()}
    buffer = ReplayBuffer(10, 2, shapes)
    row = {k: torch.zeros(2, *s) for k, s in shapes.items()}
    for _ in range(2):
        buffer.add(row, torch.tensor([False, False]))
    buffer.drop_unfinished(np.array([True, False]))  # env 0's worker died
    buffer.add(row, torch.tensor([True, True]))
    # env 0: only the step after the drop is an episode; env 1: all three steps
    lengths = buffer.episode_length[:3]
    assert lengths[:, 0].tolist() == [0, 0, 1] and lengths[:, 1].tolist() == [3, 3, 3]


def test_rollout_abandon_truncates_the_last_stored_step():
    storage = RolloutStorage(3)
    obs = {"observation": torch.zeros(2, 1), "is_first": torch.zeros(2, dtype=bool)}
    record = StepRecord({"action": torch.zeros(2, 1), "reward": torch.zeros(2),
                         "terminated": torch.zeros(2)}, {"unit_action": torch.zeros(2, 1)},
                        torch.tensor([False, False]), [], obs, obs, obs)
    storage.abandon(np.array([True, False]))  # nothing stored yet: nothing to cut
    storage.add(record)
    storage.add(record)
    storage.abandon(np.array([True, False]))
    truncated = storage.buffer._data.truncated
    assert truncated[:2].tolist() == [[False, False], [True, False]]
    assert storage.steps_per_update == 3


class LengthEncoder:
    """A two-number sentence 'encoder' (length, word count): enough to number rows."""

    dim = 2

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray([[len(t), len(t.split())] for t in texts], np.float32)


def test_row_maps_renumber_a_workers_rows_into_the_learners_table():
    from agentic_rl.data.text_table import TextTable
    from agentic_rl.train.remote_steps import RowMaps

    learner, worker = TextTable(LengthEncoder(), lazy=True), TextTable(LengthEncoder(), lazy=True)
    learner.ids(["go north", "take apple"])  # rows 1, 2 of the learner
    ids = worker.ids(["take apple", "open fridge"])  # rows 1, 2 of the worker
    arrays = {"obs/task": ids[None, :], "obs/commands": np.array([[[2, 0], [1, 2]]]),
              "obs/game": np.array([[1, 2]])}
    chunk = pack([step(0, 2)])
    chunk.arrays, chunk.texts = arrays, worker.texts[1:]
    rows = RowMaps(learner, ("task", "commands"), workers=1)
    mapped = rows.apply(chunk, 0).arrays
    assert [learner.texts[i] for i in mapped["obs/task"][0]] == ["take apple", "open fridge"]
    assert mapped["obs/commands"].tolist() == [[[3, 0], [2, 3]]]  # 0 stays the empty text
    assert mapped["obs/game"].tolist() == [[1, 2]]  # not a row id: untouched
    rows.restart(0)
    assert rows.maps[0].tolist() == [0]

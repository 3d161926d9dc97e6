"""The text agent's parts of the shared loop: the game schedule, the lazy text table, episode
arrays for checkpoints, the episode storage's phases, and the learner's contract."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agentic_rl.algos.base import check_algorithm
from agentic_rl.algos.text_opd import TextOPD, TextOPDConfig
from agentic_rl.collect.game_schedule import GroupSchedule, SeedSchedule
from agentic_rl.data.storage import StepRecord
from agentic_rl.collect.collector import FinishedEpisode
from agentic_rl.data.text_episode_arrays import pack_episodes, unpack_episodes, with_final_step
from agentic_rl.data.text_storage import IMITATE, TextEpisodeStorage, TextStorageSettings
from agentic_rl.data.text_table import TextTable
from tests.unit.test_text_losses import _episode

WIDTH = 4  # command slots


class _Encoder:
    dim = 3

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts):
        self.calls.append(list(texts))
        return np.asarray([[len(t), 1.0, 0.0] for t in texts], np.float32)


def test_groups_play_one_game_per_group_and_dagger_rounds_distinct_games():
    schedule = GroupSchedule(list(range(10, 30)), groups=2, group_size=3, dagger_rounds=1, seed=4)
    dagger = [schedule.assign(slot, None) for slot in range(6)]
    assert all(labelled and episode == 0 for _, episode, labelled in dagger)
    assert len({game for game, _, _ in dagger}) == 6
    group = [schedule.assign(slot, None) for slot in range(6)]
    games = [game for game, _, _ in group]
    assert games[:3] == [games[0]] * 3 and games[3:] == [games[3]] * 3 and games[0] != games[3]
    assert {episode for _, episode, _ in group} == {1} and not any(l for _, _, l in group)
    saved = schedule.state()  # every slot is in its episode 1: a restore assigns it again
    restored = GroupSchedule(list(range(10, 30)), 2, 3, 1, seed=4)
    restored.load_state(saved)
    assert [restored.assign(slot, None) for slot in range(6)] == group


def test_evaluation_plays_the_game_its_seed_names():
    schedule = SeedSchedule([7, 8, 9], base_seed=100)
    assert [schedule.assign(0, 100 + i)[0] for i in (0, 1, 2, 3, 5)] == [7, 8, 9, 7, 9]


def test_a_lazy_table_numbers_texts_at_once_and_encodes_them_together():
    encoder = _Encoder()
    table = TextTable(encoder, lazy=True)
    np.testing.assert_array_equal(table.ids(["go", "look"]), [1, 2])
    np.testing.assert_array_equal(table.ids(["look", "open it"]), [2, 3])
    assert encoder.calls == []
    vectors = table.tensor()
    assert encoder.calls == [["go", "look", "open it"]] and vectors[3, 0] == 7
    texts, arrays = table.state()
    other = TextTable(_Encoder(), lazy=True)
    other.ids(["unrelated"])
    other.load_state(texts, arrays)
    assert other.ids(["open it"])[0] == 3 and torch.equal(other.tensor(), vectors)


def test_episode_arrays_round_trip():
    episodes = [_episode([0.0, 1.0], width=2, game="a"), _episode([0.5], width=3, game="b")]
    episodes[1].success, episodes[1].source = True, "self"
    arrays, meta = pack_episodes(episodes, "own")
    back = unpack_episodes(arrays, meta, "own")
    for original, copy in zip(episodes, back):
        for key in ("observation", "commands", "match", "reward", "action", "num_commands"):
            np.testing.assert_array_equal(getattr(copy, key), getattr(original, key))
        assert (copy.game, copy.success, copy.source) == (original.game, original.success,
                                                          original.source)
    # checkpoints written before the expert's subgoal was stored read it as "none"
    older = unpack_episodes({k: v for k, v in arrays.items() if "expert_subgoal" not in k},
                            meta, "own")
    assert [e.expert_subgoal.tolist() for e in older] == [[0, 0], [0]]


def _settings(**changes) -> TextStorageSettings:
    values = dict(bc_steps=3, dagger_rounds=1, dagger_steps=2, distill_batch=2,
                  self_capacity=5, group_updates=True)
    return TextStorageSettings(**{**values, **changes})


def _step(episode_number: int, ended: bool, success: bool = False) -> StepRecord:
    """Two envs, both at the same step of episode ``episode_number``."""
    ids = lambda value: torch.full((2,), value, dtype=torch.int64)  # noqa: E731
    obs = {key: ids(1) for key in ("task", "observation", "inventory", "previous_command",
                                   "subgoal", "game")}
    obs |= {"expert_command": ids(2), "expert_subgoal": ids(3), "episode": ids(episode_number),
            "commands": torch.tensor([[2, 3, 0, 0]] * 2), "match": torch.zeros(2, WIDTH, dtype=torch.int64),
            "action_mask": torch.tensor([[True, True, False, False]] * 2)}
    extras = {"unit_action": torch.tensor([0, 1]), "log_prob": torch.zeros(2),
              "value": torch.zeros(2)}
    transition = {"reward": torch.full((2,), float(success)),
                  "terminated": torch.full((2,), float(ended))}
    finished = [FinishedEpisode(env, success, float(success), 1) for env in range(2)] if ended \
        else []
    return StepRecord(transition, extras, torch.full((2,), ended), finished, obs, obs, obs)


def test_storage_owes_imitation_then_dagger_then_group_updates():
    table = TextTable(_Encoder())
    table.ids(["task", "go", "look"])
    demos = [_episode([1.0], width=2)]
    storage = TextEpisodeStorage(2, table, demos, _settings(), seed=0)
    storage.add(_step(0, ended=False))
    assert storage.owed(2, 2) == [IMITATE] * 3  # behaviour cloning first, once
    storage.add(_step(0, ended=True))
    assert storage.owed(4, 2) == [IMITATE] * 2  # the DAgger round is complete
    assert len(storage.labelled) == 2 and storage.labelled[0].source == "dagger"
    batch = storage.sample(IMITATE, torch.Generator())
    assert batch.kind == IMITATE and len(batch.episodes) == 2
    storage.add(_step(1, ended=True, success=True))
    assert storage.owed(6, 2) == [1]
    arrays, meta = storage.state()  # a checkpoint holds the waiting group
    group = storage.sample(1, torch.Generator())
    assert group.kind == "group" and len(group.episodes) == 2 and len(storage.own) == 2
    assert len(group.prototypes(4)) == 4
    restored = TextEpisodeStorage(2, TextTable(_Encoder()), demos, _settings(), seed=0)
    restored.load_state(arrays, meta, exact=True)
    assert restored.owed(6, 0) == [1] and len(restored.labelled) == 2
    assert len(restored.sample(1, torch.Generator()).episodes) == 2


def test_the_text_learner_follows_the_contract_and_masks_commands():
    table = TextTable(_Encoder(), lazy=True)
    table.ids(["task", "go", "look", "open"])
    learner = TextOPD(TextOPDConfig(hidden=8), table, torch.Generator().manual_seed(0))
    check_algorithm(learner)
    obs = {key: torch.tensor([1, 1]) for key in ("task", "observation", "inventory",
                                                 "previous_command", "subgoal")}
    obs |= {"commands": torch.tensor([[2, 3, 4, 0], [2, 3, 4, 0]]),
            "history": torch.zeros(2, WIDTH, dtype=torch.int64),
            "match": torch.zeros(2, WIDTH, dtype=torch.int64),
            "action_mask": torch.tensor([[True, True, False, False], [True] * 3 + [False]]),
            "is_first": torch.tensor([True, True])}
    for mode in ("explore", "random", "deterministic"):
        action, memory, extras = learner.act(obs, None, mode)
        assert action.tolist()[0] in (0, 1) and action.tolist()[1] in (0, 1, 2)
        assert memory.shape == (1, 2, 8) and set(extras) == {"unit_action", "log_prob", "value"}
    _, fresh, _ = learner.act(obs, torch.ones(1, 2, 8), "deterministic")
    torch.testing.assert_close(fresh, memory)  # is_first: the old memory is forgotten
    with pytest.raises(ValueError, match="on-policy"):
        learner.executed(extras, extras["unit_action"] + 1)


def test_a_truncated_episode_is_valued_in_the_state_it_stopped_in():
    episode = _episode([0.0, 0.0], width=2, terminated=False)
    final = {"observation": np.array([9]), "inventory": np.array([1]),
             "previous_command": np.array([1]), "subgoal": np.array([0]),
             "commands": np.array([[1, 2, 3, 0]]), "match": np.zeros((1, 4), np.int64),
             "action_mask": np.array([[True, True, True, False]])}
    extended = with_final_step(episode, final)
    assert len(extended) == 3 and extended.commands.shape == (3, 3)
    assert extended.observation[-1] == 9 and extended.num_commands[-1] == 3


def test_commands_a_shield_removed_are_dropped_and_the_action_renumbered():
    storage = TextEpisodeStorage(2, TextTable(_Encoder()), [], _settings(bc_steps=0), seed=0)
    step = _step(0, ended=True)
    step.obs["action_mask"] = torch.tensor([[True, False, True, False]] * 2)
    step.extras["unit_action"] = torch.tensor([2, 0])
    first, second = storage.add(step)
    np.testing.assert_array_equal(first.commands, [[2, 0]])  # slot 1 (command 3) removed
    assert first.action.tolist() == [1] and second.action.tolist() == [0]
    assert first.num_commands.tolist() == [2]


def test_envs_in_labelled_episodes_play_greedily_while_exploring():
    table = TextTable(_Encoder(), lazy=True)
    table.ids(["task", "go", "look", "open"])
    learner = TextOPD(TextOPDConfig(hidden=8), table, torch.Generator().manual_seed(0))
    obs = {key: torch.tensor([1] * 8) for key in ("task", "observation", "inventory",
                                                 "previous_command", "subgoal")}
    obs |= {"commands": torch.tensor([[2, 3, 4, 0]] * 8),
            "history": torch.zeros(8, WIDTH, dtype=torch.int64),
            "match": torch.zeros(8, WIDTH, dtype=torch.int64),
            "action_mask": torch.tensor([[True, True, True, False]] * 8),
            "is_first": torch.ones(8, dtype=torch.bool),
            "labelled": torch.tensor([1, 1, 1, 1, 0, 0, 0, 0])}
    greedy, _, _ = learner.act(obs, None, "deterministic")
    explored, _, _ = learner.act(obs, None, "explore")
    assert torch.equal(explored[:4], greedy[:4])

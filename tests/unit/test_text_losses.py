"""Text-agent losses and advantages against hand computations (discrete OPD, GRPO-style groups,
hierarchy-of-groups, GAE with truncation, history buckets, batching)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from agentic_rl.algos.text_losses import (
    command_cross_entropy,
    context_groups,
    group_advantages,
    hierarchy_of_groups_advantages,
)
from agentic_rl.algos.text_losses import gae_episode
from agentic_rl.algos.text_opd import TextOPD, TextOPDConfig
from agentic_rl.data.text_table import TextTable
from agentic_rl.data.text_episodes import (
    TextEpisode,
    collate,
    discounted_returns,
    history_buckets,
)
from tests.unit.scripted_text import ScriptedTextEnv, collected_steps


def test_command_cross_entropy_by_hand():
    inf = float("inf")
    logits = torch.tensor([[0.0, 0.0, -inf], [1.0, 0.0, 0.0]])
    target = torch.tensor([1, 0])
    both = command_cross_entropy(logits, target, torch.tensor([True, True]))
    expected = (math.log(2) - math.log(math.e / (math.e + 2))) / 2
    assert both.item() == pytest.approx(expected, rel=1e-6)
    first = command_cross_entropy(logits, target, torch.tensor([True, False]))
    assert first.item() == pytest.approx(math.log(2), rel=1e-6)
    assert command_cross_entropy(logits, target, torch.tensor([False, False])).item() == 0.0


def test_group_advantages_by_hand():
    adv, sizes = group_advantages(np.array([1.0, 2.0, 3.0, 10.0]), np.array([7, 7, 7, 2]))
    np.testing.assert_allclose(adv, [-1.0, 0.0, 1.0, 0.0], atol=1e-6)
    np.testing.assert_array_equal(sizes, [3, 3, 3, 1])
    adv, _ = group_advantages(np.array([1.0, 2.0, 3.0, 10.0]), np.array([7, 7, 7, 2]),
                              normalize_std=True)
    std = math.sqrt(2 / 3)
    np.testing.assert_allclose(adv, [-1 / std, 0.0, 1 / std, 0.0], rtol=1e-5)


def test_context_groups_pad_the_episode_start_and_separate_games():
    levels = context_groups(["g", "g", "h"], [np.array([1, 2]), np.array([1, 3]), np.array([1])],
                            levels=1)
    np.testing.assert_array_equal(levels[0], [0, 1, 0, 2, 3])  # (g,1) (g,2) (g,1) (g,3) (h,1)
    np.testing.assert_array_equal(levels[1], [0, 1, 0, 2, 3])  # (g,-,1) (g,1,2) ... (h,-,1)
    # k=1 splits steps whose last observation matches but whose one before does not
    levels = context_groups(["g", "g"], [np.array([1, 2]), np.array([3, 2])], levels=1)
    assert levels[0][1] == levels[0][3] and levels[1][1] != levels[1][3]


def test_hierarchy_of_groups_advantages_on_a_hand_built_batch():
    # one game, episode A observes 1,2,3 and episode B 1,2,2
    returns = np.array([1.0, 2.0, 3.0, 3.0, 4.0, 5.0])  # A0 A1 A2 B0 B1 B2
    levels = context_groups(["g", "g"], [np.array([1, 2, 3]), np.array([1, 2, 2])], levels=1)
    adv = hierarchy_of_groups_advantages(returns, levels, alpha=1.0)
    # k=0 groups {A0,B0} mean 2, {A1,B1,B2} mean 11/3, {A2} alone;
    # k=1 groups {A0,B0} mean 2, {A1,B1} mean 3, {A2}, {B2} alone; weights 1 and 2
    expected = [-1.0, (-5 / 3 + 2 * -1) / 3, 0.0, 1.0, (1 / 3 + 2 * 1) / 3, 4 / 3]
    np.testing.assert_allclose(adv, expected, rtol=1e-5, atol=1e-6)
    # anchor-state grouping (k = 0 only) is the plain group advantage
    anchor = hierarchy_of_groups_advantages(returns, levels[:1], alpha=1.0)
    np.testing.assert_allclose(anchor, [-1.0, -5 / 3, 0.0, 1.0, 1 / 3, 4 / 3], rtol=1e-5)
    # alpha = 0 weighs the levels equally
    flat = hierarchy_of_groups_advantages(returns, levels, alpha=0.0)
    assert flat[1] == pytest.approx((-5 / 3 - 1) / 2, rel=1e-5)


def test_discounted_returns_and_gae_with_truncation_by_hand():
    np.testing.assert_allclose(discounted_returns(np.array([0.0, 0.0, 1.0]), 0.5),
                               [0.25, 0.5, 1.0])
    episode = _episode([0.0, 1.0], value=[0.5, 0.2], terminated=True)
    adv, ret = gae_episode(episode, gamma=0.9, lam=0.8)
    np.testing.assert_allclose(adv, [-0.32 + 0.72 * 0.8, 0.8], rtol=1e-5)
    np.testing.assert_allclose(ret, adv + np.array([0.5, 0.2]), rtol=1e-6)
    episode = _episode([0.0, 1.0], value=[0.5, 0.2], terminated=False, bootstrap=1.0)
    adv, _ = gae_episode(episode, gamma=0.9, lam=0.8)
    np.testing.assert_allclose(adv, [-0.32 + 0.72 * 1.7, 1.7], rtol=1e-5)


def test_history_buckets_count_earlier_commands_and_flag_the_previous_one():
    a, b = 5, 6
    commands = np.array([[a, b, 0], [a, b, 0], [b, a, 0]])
    previous = np.array([0, a, a])  # issued a at t=0 and again at t=1
    np.testing.assert_array_equal(history_buckets(commands, previous),
                                  [[0, 0, 0], [1 + 4, 0, 0], [0, 2 + 4, 0]])


def test_take_back_bits_online_and_from_stored_episodes_agree():
    """The collector's buckets (``TextInputs``) and the learner's (``history_buckets`` over
    the stored row ids and the table's texts) flag the take that undoes the agent's move."""
    env = ScriptedTextEnv("put two watch in sidetable.",
                          ["take watch 1 from dresser 1", "move watch 1 to sidetable 1",
                           "take watch 1 from sidetable 1", "go to dresser 1"])
    # take the watch from the dresser, move it to the sidetable
    table, steps = collected_steps(env, (0, 1))
    rows = [s["commands"] for s in steps]
    previous = [s["previous_command"] for s in steps]
    online = [s["history"] for s in steps]
    # after the move: "take watch 1 from sidetable 1" takes it back (8); the first take was
    # issued once (1); the move was the previous command (4 + 1)
    np.testing.assert_array_equal(online[2], [1, 4 + 1, 8, 0])
    offline = history_buckets(np.stack(rows), np.asarray(previous), table.texts)
    np.testing.assert_array_equal(offline, np.stack(online))
    # without the texts there are no take-back bits, and a policy without the feature reads
    # the buckets modulo 8
    assert history_buckets(np.stack(rows), np.asarray(previous))[2].tolist() == [1, 5, 0, 0]


def test_episode_grouping_gives_every_step_its_episode_advantage():
    learner = TextOPD(TextOPDConfig(rl="group", advantage="episode"), TextTable(dim=4),
                      torch.Generator())
    episodes = [_episode([0, 1], game="g"), _episode([0, 0, 0], game="g"),
                _episode([0, 1], game="h")]
    adv, _ = learner.advantages(episodes)
    np.testing.assert_allclose(adv, [0.5, 0.5, -0.5, -0.5, -0.5, 0.0, 0.0])


def test_collate_pads_steps_and_commands():
    short, long = _episode([0.0], width=2), _episode([0.0, 0.0, 1.0], width=3)
    batch = collate([short, long])
    assert batch["commands"].shape == (2, 3, 3)
    np.testing.assert_array_equal(batch["step_mask"], [[True, False, False], [True] * 3])
    np.testing.assert_array_equal(batch["command_mask"][0, 0], [True, True, False])
    assert batch["command_mask"][0, 1:, 0].all()  # padded steps keep one finite logit
    assert not batch["command_mask"][0, 1:, 1:].any()
    vectors = torch.arange(20.0).view(10, 2)
    with_subgoals = collate([short, long], vectors)
    assert with_subgoals["subgoal"].shape == (2, 3, 2)


def _episode(reward, value=None, terminated=True, bootstrap=0.0, game="g",
             width=2) -> TextEpisode:
    length = len(reward)
    commands = np.tile(np.arange(1, width + 1), (length, 1))
    return TextEpisode(
        task=1, observation=np.arange(1, length + 1), inventory=np.ones(length, np.int64),
        previous_command=np.zeros(length, np.int64), commands=commands,
        num_commands=np.full(length, width), action=np.zeros(length, np.int64),
        reward=np.asarray(reward, np.float32), log_prob=np.zeros(length, np.float32),
        value=np.asarray(value if value is not None else np.zeros(length), np.float32),
        subgoal=np.zeros(length, np.int64), terminated=terminated, bootstrap_value=bootstrap,
        game=game, match=np.zeros((length, width), np.int64))


def test_expert_relabelling_keeps_the_agents_states_and_imitates_the_expert():
    from agentic_rl.data.text_episodes import expert_relabelled

    episode = _episode([0.0, 0.0, 0.0], width=2)
    episode.commands[:] = [[1, 2], [1, 2], [1, 2]]
    episode.previous_command = np.array([0, 1, 1])  # the agent issued command 1 twice
    episode.expert_command = np.array([2, 9, 0])  # 9 is not listed; no label at t=2
    table = TextTable(dim=2)
    table.add([f"go to place {i}" for i in range(1, 10)], np.zeros((9, 2), np.float32))
    relabelled = expert_relabelled(episode, table)
    assert len(relabelled) == 2 and relabelled.source == "dagger"
    np.testing.assert_array_equal(relabelled.action, [1, 1])
    np.testing.assert_array_equal(relabelled.commands, [[1, 2], [1, 9]])  # last slot taken
    np.testing.assert_array_equal(relabelled.previous_command, [0, 1])
    episode.expert_command = np.array([0, 2, 2])
    assert expert_relabelled(episode, table) is None

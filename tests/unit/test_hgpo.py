"""HGPO: period bookkeeping, intrinsic reward, HIRO relabelling, losses, goal encoders, config."""

from __future__ import annotations

import math

import pytest
import torch
from gymnasium import spaces
from pydantic import ValidationError

from agentic_rl.algos.hgpo import HGPO, HGPOConfig
from agentic_rl.algos.hgpo_goals import period_log_likelihood, relabel_goals
from agentic_rl.algos.hgpo_losses import (
    distance_intrinsic_reward,
    goal_change_penalty,
    select_relabel_goals,
    success_progress_reward,
    temporal_contrastive_loss,
)
from agentic_rl.data.hierarchical import manager_segments, period_ends, period_sums
from agentic_rl.data.rollout import RolloutBuffer
from agentic_rl.nets.goal_encoder import GoalConditioner

torch.set_num_threads(1)

OBS_SPACE = spaces.Dict(
    {
        "observation": spaces.Box(-1, 1, (3,)),
        "achieved_goal": spaces.Box(-1, 1, (2,)),
        "desired_goal": spaces.Box(-1, 1, (2,)),
    }
)


def make_obs(n: int, is_first: bool = False) -> dict[str, torch.Tensor]:
    return {
        "observation": torch.zeros(n, 3), "achieved_goal": torch.zeros(n, 2),
        "desired_goal": torch.zeros(n, 2), "is_first": torch.full((n,), is_first),
    }


def test_goals_change_exactly_every_period_and_at_episode_start():
    algo = HGPO(HGPOConfig(period=3), OBS_SPACE, spaces.Discrete(4))
    state, flags, goals = None, [], []
    episode_starts = {0, 5}  # env 0 starts a new episode at step 5
    for t in range(10):
        obs = make_obs(2, is_first=False)
        obs["is_first"] = torch.tensor([t in episode_starts, t == 0])
        _, state, extras = algo.act(obs, state, "explore")
        flags.append(extras["new_goal"].tolist())
        goals.append(extras["goal"].clone())
    env0 = [f[0] for f in flags]
    env1 = [f[1] for f in flags]
    assert env0 == [True, False, False, True, False, True, False, False, True, False]
    assert env1 == [True, False, False, True, False, False, True, False, False, True]
    for t in range(1, 10):  # the goal is constant inside a period and redrawn at each start
        for n, column in enumerate((env0, env1)):
            same = torch.equal(goals[t][n], goals[t - 1][n])
            assert same != column[t]
    algo.updates += 1  # after an update every env re-proposes a goal
    _, state, extras = algo.act(make_obs(2), state, "explore")
    assert extras["new_goal"].all() and not extras["has_prev_goal"].any()


def test_period_ends_and_manager_segments_sum_rewards_per_period():
    new_goal = torch.tensor([[1, 1], [0, 0], [1, 0], [0, 1], [1, 0]]).bool()
    dones = torch.tensor([[0, 0], [0, 0], [0, 1], [0, 0], [0, 0]]).bool()
    terminated = dones.clone()
    rewards = torch.tensor([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0], [5.0, 50.0]])
    ends = period_ends(new_goal, dones)
    assert ends.T.tolist() == [[False, True, False, True, True], [False, False, True, False, True]]
    seg = manager_segments(new_goal, dones, terminated, rewards)
    assert seg.start_t.tolist() == [0, 2, 4, 0, 3] and seg.env.tolist() == [0, 0, 0, 1, 1]
    assert seg.end_t.tolist() == [1, 3, 4, 2, 4]
    assert seg.reward_sum.tolist() == [3.0, 7.0, 5.0, 60.0, 90.0]
    assert seg.terminated.tolist() == [False, False, False, True, False]
    assert seg.done.tolist() == [False, False, True, True, True]
    assert seg.step_segment.T.tolist() == [[0, 0, 1, 1, 2], [3, 3, 3, 4, 4]]
    with pytest.raises(ValueError, match="first step"):
        manager_segments(new_goal[1:], dones[1:], terminated[1:], rewards[1:])
    bonus = torch.tensor([[0.5, -1.0], [0.25, 0.0], [0.0, 2.0], [1.0, 0.0], [-2.0, 4.0]])
    sums = period_sums(bonus, seg.start_t, seg.end_t, seg.env)  # same periods, any values
    assert sums.tolist() == [0.75, 1.0, -2.0, 1.0, 4.0]


def test_intrinsic_reward_is_negative_goal_distance():
    phi_next = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    goal = torch.tensor([[3.0, 4.0], [1.0, 1.0]])
    torch.testing.assert_close(distance_intrinsic_reward(phi_next, goal), torch.tensor([-5.0, 0.0]))
    torch.testing.assert_close(
        success_progress_reward(torch.tensor([0.9]), torch.tensor([0.4])), torch.tensor([0.5])
    )
    algo = HGPO(HGPOConfig(intrinsic_scale=2.0), OBS_SPACE, spaces.Discrete(4))
    obs, next_obs = make_obs(2), make_obs(2)
    next_obs["achieved_goal"] = torch.tensor([[0.0, 0.0], [0.6, 0.8]])
    reward = algo.intrinsic_reward(obs, next_obs, torch.tensor([[0.0, 0.5], [0.0, 0.0]]))
    torch.testing.assert_close(reward, torch.tensor([-1.0, -2.0]))


def test_goal_change_penalty_and_contrastive_loss_by_hand():
    mean = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    prev = torch.tensor([[0.0, 0.0], [5.0, 5.0]])
    assert goal_change_penalty(mean, prev, torch.tensor([True, False])).item() == 1.0
    anchor, positive = torch.tensor([[0.0], [1.0]]), torch.tensor([[0.0], [2.0]])
    # logits = -d^2 / T with T = 1: row 0 [0, -4], row 1 [-1, -1]
    expected = 0.5 * (math.log(1 + math.exp(-4)) + math.log(2))
    assert temporal_contrastive_loss(anchor, positive, 1.0).item() == pytest.approx(expected)


def relabel_fixture():
    """One env, one 3-step period; the worker's logits are 10 * [g0, g1, -g0, -g1]."""
    cfg = HGPOConfig(period=3, worker={"hidden_sizes": []}, relabel_candidates=4)
    algo = HGPO(cfg, OBS_SPACE, spaces.Discrete(4))
    head = algo.worker.policy.net[-1]
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
        head.weight[:, 3:] = 10.0 * torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    buffer = RolloutBuffer(3)
    for t, action in enumerate([1, 1, 0]):  # mostly "right": goal (.., 1) explains them best
        obs = make_obs(1, is_first=t == 0)
        extras = {"new_goal": torch.tensor([t == 0]), "goal": torch.tensor([[-1.0, 0.0]])}
        buffer.add(obs, obs, torch.tensor([action]), torch.zeros(1), torch.zeros(1).bool(),
                   torch.zeros(1).bool(), extras)
    rollout = buffer.get()
    seg = manager_segments(rollout.extras["new_goal"], rollout.dones, rollout.terminated, rollout.rewards)
    return algo, rollout, seg


def test_period_log_likelihood_matches_hand_computation():
    algo, rollout, seg = relabel_fixture()
    candidates = torch.tensor([[[-1.0, 0.0], [0.2, 1.0], [1.0, 0.0]]])
    log_lik = period_log_likelihood(algo, rollout, seg, candidates)

    def hand(g0: float, g1: float) -> float:
        logits = 10.0 * torch.tensor([g0, g1, -g0, -g1], dtype=torch.float32)
        log_p = torch.log_softmax(logits, 0)
        return float(2 * log_p[1] + log_p[0])

    torch.testing.assert_close(log_lik, torch.tensor([[hand(-1, 0), hand(0.2, 1), hand(1, 0)]]))
    goals, index = select_relabel_goals(candidates, log_lik)
    assert index.tolist() == [1]
    torch.testing.assert_close(goals, candidates[:, 1])


def test_relabelling_replaces_goal_with_highest_likelihood_candidate():
    algo, rollout, seg = relabel_fixture()
    rollout.next_obs["achieved_goal"][-1] = torch.tensor([[0.3, 1.0]])  # phi at the period end
    goals, index = relabel_goals(algo, rollout, seg, torch.tensor([[-1.0, 0.0]]))
    assert index.item() != 0  # the stored goal (-1, 0) explains "right, right, up" worst
    candidates_lik = period_log_likelihood(algo, rollout, seg, torch.stack([goals, torch.tensor([[-1.0, 0.0]])], 1))
    assert candidates_lik[0, 0] > candidates_lik[0, 1]


def test_film_conditioning_modulates_features_by_goal():
    cond = GoalConditioner(3, 2, "film", film_width=4)
    obs = torch.randn(1, 3)
    assert not torch.allclose(cond(obs, torch.zeros(1, 2)), cond(obs, torch.ones(1, 2)))
    with pytest.raises(ValueError, match="conditioning"):
        GoalConditioner(3, 2, "sum")


def test_config_validation_names_bad_keys():
    with pytest.raises(ValidationError, match="perod"):
        HGPOConfig(perod=3)
    with pytest.raises(ValidationError, match="learning_rte"):
        HGPOConfig(manager={"learning_rte": 1.0})


def test_log_std_cap_schedule_by_hand():
    cap = HGPOConfig(manager_log_std_cap={"start_step": 100, "end_step": 200, "start": 1.0,
                                          "end": -2.0}).manager_log_std_cap
    values = [cap.value(step) for step in (0, 100, 150, 175, 200, 300)]
    assert values == pytest.approx([1.0, 1.0, -0.5, -1.25, -2.0, -2.0])


def test_log_std_cap_needs_end_after_start():
    with pytest.raises(ValidationError, match="must exceed"):
        HGPOConfig(manager_log_std_cap={"start_step": 10, "end_step": 10})

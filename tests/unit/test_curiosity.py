"""Random network distillation: errors and bonus by hand, running statistics, novelty, and
PPO / HGPO carrying it through an update and a state-dict round trip."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agentic_rl.algos.curiosity import (RND, CuriosityConfig, curiosity_bonus,
                                        prediction_errors, scaled_bonus)
from agentic_rl.algos.hgpo import HGPO, HGPOConfig
from agentic_rl.algos.ppo import PPO, PPOConfig
from agentic_rl.data.rollout import RolloutBuffer

torch.set_num_threads(1)
OBS = spaces.Dict({"observation": spaces.Box(-1, 1, (3,)), "achieved_goal": spaces.Box(-1, 1, (2,)),
                   "desired_goal": spaces.Box(-1, 1, (2,))})


def test_errors_and_bonus_by_hand():
    predicted, target = torch.tensor([[1.0, 2.0], [0.0, 0.0]]), torch.tensor([[0.0, 0.0], [0.0, 1.0]])
    errors = prediction_errors(predicted, target)
    torch.testing.assert_close(errors, torch.tensor([2.5, 0.5]))  # (1 + 4) / 2, (0 + 1) / 2
    torch.testing.assert_close(scaled_bonus(errors, torch.tensor(4.0), 0.1),
                               torch.tensor([0.125, 0.025]))  # 0.1 * e / 2
    torch.testing.assert_close(scaled_bonus(errors, torch.tensor(4.0), 0.1, errors.mean()),
                               torch.tensor([0.05, -0.05]))  # 0.1 * (e - 1.5) / 2


def test_centred_bonus_has_zero_mean_and_keeps_the_order():
    torch.manual_seed(0)
    states = torch.randn(32, 3)
    plain = RND(CuriosityConfig(), in_dim=3)
    centred = RND(CuriosityConfig(center=True), in_dim=3)
    centred.load_state_dict(plain.state_dict())
    a, b = plain.bonus(states), centred.bonus(states)
    assert abs(float(b.mean())) < 1e-6 and float(a.min()) > 0
    torch.testing.assert_close(a - a.mean(), b)


def test_scheduled_weight_counts_the_states_scored():
    weight = {"start": 1.0, "end": 0.0, "steps": 100}
    rnd = RND(CuriosityConfig(weight=weight), in_dim=3)
    fixed = RND(CuriosityConfig(weight=1.0), in_dim=3)
    fixed.load_state_dict(rnd.state_dict())
    states = torch.randn(50, 3)
    torch.testing.assert_close(rnd.bonus(states), fixed.bonus(states))  # 0 states so far: 1.0
    torch.testing.assert_close(rnd.bonus(states), 0.5 * fixed.bonus(states))  # 50 of 100 steps
    assert float(rnd.bonus(states).abs().max()) == 0.0  # 100 states: the end, 0
    with pytest.raises(ValueError, match="curiosity weight"):
        CuriosityConfig(weight={"start": 1.0, "end": -1.0, "steps": 10})


def test_running_statistics_match_the_concatenated_batches():
    torch.manual_seed(0)
    rnd = RND(CuriosityConfig(), in_dim=3)
    first, second = torch.randn(5, 3), torch.randn(7, 3)
    rnd.bonus(first)
    rnd.bonus(second)
    with torch.no_grad():
        errors = prediction_errors(rnd.predictor(torch.cat([first, second])),
                                   rnd.target(torch.cat([first, second]))).numpy()
    assert rnd.errors.count.item() == 12
    assert rnd.errors.mean.item() == pytest.approx(errors.mean(), rel=1e-5)
    assert rnd.errors.var.item() == pytest.approx(errors.var(), rel=1e-4)


def test_visited_states_earn_less_than_new_ones():
    torch.manual_seed(0)
    rnd = RND(CuriosityConfig(learning_rate=1e-2), in_dim=3)
    seen, unseen = torch.full((16, 3), -0.5), torch.full((16, 3), 0.9)
    for _ in range(200):
        rnd.train_step(seen)
    assert rnd.bonus(seen).mean() < 0.2 * rnd.bonus(unseen).mean()


def rollout(steps: int = 8, envs: int = 2, discrete: bool = True):
    buffer, generator = RolloutBuffer(steps), torch.Generator().manual_seed(0)
    for t in range(steps):
        obs = {k: torch.rand(envs, s.shape[0], generator=generator) for k, s in OBS.items()}
        obs["is_first"] = torch.full((envs,), t == 0)
        extras = {"log_prob": torch.zeros(envs), "value": torch.zeros(envs),
                  "goal": torch.zeros(envs, 2), "new_goal": torch.full((envs,), t % 4 == 0),
                  "goal_log_prob": torch.zeros(envs), "manager_value": torch.zeros(envs),
                  "prev_goal": torch.zeros(envs, 2), "has_prev_goal": torch.zeros(envs).bool()}
        buffer.add(obs, {k: v for k, v in obs.items() if k != "is_first"},
                   torch.zeros(envs, dtype=torch.long), torch.zeros(envs),
                   torch.zeros(envs).bool(), torch.zeros(envs).bool(), extras)
    return buffer.get()


@pytest.mark.parametrize("cls, config", [
    (PPO, PPOConfig(curiosity={"weight": 0.5}, minibatch_size=8)),
    (HGPO, HGPOConfig(period=4, curiosity={"weight": 0.5})),
])
def test_learners_add_the_bonus_train_the_predictor_and_save_it(cls, config):
    algo = cls(config, OBS, spaces.Discrete(4), seed=0)
    metrics = algo.update(rollout())
    level = "worker_" if cls is HGPO else ""  # HGPO's Worker gets the bonus
    assert metrics[f"train/{level}curiosity_bonus"] > 0 and metrics[f"losses/{level}rnd_loss"] > 0
    clone = cls(config, OBS, spaces.Discrete(4), seed=1)
    clone.load_state_dict(algo.state_dict())
    states = torch.rand(4, 3)
    torch.testing.assert_close(clone.rnd.bonus(states.clone()), algo.rnd.bonus(states.clone()))
    assert clone.rnd.errors.count.item() == algo.rnd.errors.count.item()


def test_manager_curiosity_pays_the_manager_only_and_is_saved():
    config = HGPOConfig(period=4, manager_curiosity={"weight": 1.0, "center": True})
    plain, curious = (HGPO(c, OBS, spaces.Discrete(4), seed=0)
                      for c in (config.model_copy(update={"manager_curiosity": None}), config))
    metrics = curious.update(rollout())
    plain.update(rollout())
    for name, same in (("worker", True), ("manager", False)):
        a, b = getattr(plain, name).state_dict(), getattr(curious, name).state_dict()
        assert all(torch.equal(a[k], b[k]) for k in a) == same, name
    assert metrics["losses/manager_rnd_loss"] > 0 and curious.rnd is None
    clone = HGPO(config, OBS, spaces.Discrete(4), seed=1)
    clone.load_state_dict(curious.state_dict())
    states = torch.rand(4, 3)
    torch.testing.assert_close(clone.manager_rnd.bonus(states.clone()),
                               curious.manager_rnd.bonus(states.clone()))


def test_no_curiosity_no_bonus():
    assert curiosity_bonus(None, {"observation": torch.zeros(2, 3)}) == (0.0, {})
    assert np.isclose(PPO(PPOConfig(minibatch_size=8), OBS, spaces.Discrete(4)).update(
        rollout()).get("train/curiosity_bonus", 0.0), 0.0)

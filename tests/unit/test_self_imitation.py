"""HGPO self-imitation: the kept-episode buffer, the two losses by hand, the update and resume."""

from __future__ import annotations

import pytest
import torch
from gymnasium import spaces
from pydantic import ValidationError

from agentic_rl.algos.hgpo import HGPO, HGPOConfig
from agentic_rl.algos.hgpo_losses import action_imitation_loss, goal_imitation_loss
from agentic_rl.data.checkpoint import load_learner, save_model
from agentic_rl.data.elite_episodes import EliteEpisodes
from agentic_rl.data.hierarchical import manager_segments, period_end_values
from agentic_rl.data.rollout import RolloutBuffer

torch.set_num_threads(1)
OBS = spaces.Dict({"observation": spaces.Box(-1, 1, (3,)),
                   "achieved_goal": spaces.Box(-1, 1, (2,)),
                   "desired_goal": spaces.Box(-1, 1, (2,))})


def chunk(ids: list[list[float]], rewards: list[list[float]], dones: list[list[bool]]):
    """Rows ``id [T, N]`` (to follow rows through the buffer), rewards and dones ``[T, N]``."""
    ids_t = torch.tensor(ids)
    return ({"id": ids_t, "flag": ids_t.long() % 2 == 0}, torch.tensor(rewards),
            torch.tensor(dones))


def test_episodes_are_assembled_across_rollouts_and_ranked_by_return_then_length():
    elite = EliteEpisodes(capacity=2)
    # env 0: an episode of rows 0-3 that crosses the rollout boundary, return 1;
    # env 1: rows 10-11 end with return 0 (not kept), then rows 12-13 with return 1
    kept = elite.add_rollout(*chunk([[0, 10], [1, 11], [2, 12]], [[0, 0], [0, 0], [0, 0]],
                                    [[False, False], [False, True], [False, False]]))
    assert kept == 0 and len(elite) == 0
    kept = elite.add_rollout(*chunk([[3, 13], [4, 14], [5, 15]], [[1, 1], [0, 0], [0, 0]],
                                    [[True, True], [False, False], [False, False]]))
    assert kept == 2
    assert [e["id"].tolist() for e in elite.episodes] == [[12, 13], [0, 1, 2, 3]]
    assert elite.pending[0]["id"].tolist() == [4, 5] and elite.pending_return[0] == 0.0
    # a longer success does not displace them; a higher return goes first
    elite.add_rollout(*chunk([[6, 16], [7, 17]], [[1, 0], [0, 2]], [[True, False], [False, True]]))
    assert [e["id"].tolist() for e in elite.episodes] == [[14, 15, 16, 17], [12, 13]]
    assert elite.returns == [2.0, 1.0]
    assert elite.stats() == {"train/elite_episodes": 2.0, "train/elite_best_return": 2.0,
                             "train/elite_mean_length": 3.0}


def test_sampling_draws_kept_rows_and_filters_by_a_flag():
    elite = EliteEpisodes(capacity=4)
    assert elite.sample(8, torch.Generator().manual_seed(0)) == {}
    elite.add_rollout(*chunk([[0], [1], [2], [3]], [[0], [0], [0], [1]],
                             [[False], [False], [False], [True]]))
    rows = elite.sample(64, torch.Generator().manual_seed(0))
    assert set(rows["id"].tolist()) == {0, 1, 2, 3}
    even = elite.sample(64, torch.Generator().manual_seed(0), where="flag")
    assert set(even["id"].tolist()) == {0, 2}


def test_state_round_trip_continues_identically():
    elite = EliteEpisodes(capacity=3)
    elite.add_rollout(*chunk([[0, 10], [1, 11]], [[1, 0], [0, 0]], [[True, False], [False, False]]))
    clone = EliteEpisodes(capacity=3)
    clone.load_state(elite.state())
    more = chunk([[2, 12], [3, 13]], [[0, 1], [1, 0]], [[False, True], [True, False]])
    assert elite.add_rollout(*more) == clone.add_rollout(*more) == 2
    assert [e["id"].tolist() for e in clone.episodes] == [e["id"].tolist()
                                                          for e in elite.episodes]
    assert [e["id"].tolist() for e in elite.episodes] == [[0], [1, 2, 3], [10, 11, 12]]


def test_capacity_must_be_positive():
    with pytest.raises(ValueError, match="capacity"):
        EliteEpisodes(0)


def test_imitation_losses_by_hand():
    assert action_imitation_loss(torch.tensor([-1.0, -3.0])).item() == pytest.approx(2.0)
    mean = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    kept = torch.tensor([[0.3, 0.4], [1.0, 0.0]])
    # (0.09 + 0.16 + 0 + 1) / 2
    assert goal_imitation_loss(mean, kept).item() == pytest.approx(0.625)


def successful_rollout(steps: int = 8, envs: int = 2):
    """Env 0 succeeds (reward 1, terminated) at step 5; env 1 never does."""
    buffer, generator = RolloutBuffer(steps), torch.Generator().manual_seed(0)
    for t in range(steps):
        obs = {k: torch.rand(envs, s.shape[0], generator=generator) for k, s in OBS.spaces.items()}
        obs["is_first"] = torch.full((envs,), t == 0)
        end = torch.tensor([t == 5, False])
        extras = {"log_prob": torch.full((envs,), -1.4), "value": torch.zeros(envs),
                  "goal": torch.rand(envs, 2, generator=generator) * 2 - 1,
                  "new_goal": torch.full((envs,), t % 4 == 0),
                  "goal_log_prob": torch.zeros(envs), "manager_value": torch.zeros(envs),
                  "prev_goal": torch.zeros(envs, 2), "has_prev_goal": torch.zeros(envs).bool()}
        buffer.add(obs, {k: v for k, v in obs.items() if k != "is_first"},
                   torch.randint(4, (envs,), generator=generator), end.float(), end,
                   torch.zeros(envs).bool(), extras)
    return buffer.get()


def parameters(algo: HGPO, level: str) -> list[torch.Tensor]:
    return [p.detach().clone() for p in getattr(algo, level).parameters()]


def test_update_imitates_at_both_levels_and_coef_zero_is_plain_ppo():
    plain = HGPOConfig(period=4)
    configs = [plain, HGPOConfig(period=4, self_imitation={"coef": 0.0}),
               HGPOConfig(period=4, self_imitation={"coef": 1.0, "batch_size": 4})]
    learners = [HGPO(c, OBS, spaces.Discrete(4), seed=0) for c in configs]
    metrics = [algo.update(successful_rollout()) for algo in learners]
    for level in ("worker", "manager"):
        base, zero, imitating = (parameters(a, level) for a in learners)
        assert all(torch.equal(a, b) for a, b in zip(base, zero)), level
        assert not all(torch.equal(a, b) for a, b in zip(base, imitating)), level
        assert metrics[2][f"losses/{level}_imitation"] > 0
    assert metrics[2]["train/elite_episodes"] == 1.0 and len(learners[2].elite) == 1
    assert learners[2].elite.episodes[0]["action"].shape == (6,)  # steps 0-5 of env 0
    assert "losses/worker_imitation" not in metrics[0]


def test_kept_episodes_and_unfinished_rows_are_saved(tmp_path):
    config = HGPOConfig(period=4, self_imitation={"coef": 0.5})
    algo = HGPO(config, OBS, spaces.Discrete(4), seed=0)
    algo.update(successful_rollout())
    save_model(tmp_path / "model", algo, {})  # safetensors + JSON, as every checkpoint
    clone = HGPO(config, OBS, spaces.Discrete(4), seed=1)
    load_learner(clone, tmp_path / "model")
    assert torch.equal(clone.elite.episodes[0]["worker_x"], algo.elite.episodes[0]["worker_x"])
    assert sorted(clone.elite.pending) == [0, 1] and len(clone.elite.pending[1]["goal"]) == 8
    algo.update(successful_rollout())
    clone.update(successful_rollout())
    for level in ("worker", "manager"):
        assert all(torch.equal(a, b) for a, b in zip(parameters(algo, level),
                                                     parameters(clone, level))), level


def test_config_rejects_recurrent_manager_and_negative_coef():
    with pytest.raises(ValidationError, match="manager_recurrent"):
        HGPOConfig(self_imitation={}, manager_recurrent=True)
    with pytest.raises(ValidationError, match="coef"):
        HGPOConfig(self_imitation={"coef": -0.1})


def test_hindsight_goals_are_where_each_period_ended():
    # one env, periods start at t = 0 and 3; the episode ends at t = 4 and a new one starts
    new_goal = torch.tensor([[True], [False], [False], [True], [False], [True]])
    dones = torch.tensor([[False], [False], [False], [False], [True], [False]])
    seg = manager_segments(new_goal, dones, dones, torch.zeros(6, 1))
    reached = torch.arange(6.0).reshape(6, 1, 1)  # the state after step t is t
    assert period_end_values(reached, seg).flatten().tolist() == [2, 2, 2, 4, 4, 5]


def test_kept_rows_carry_hindsight_or_stored_goals():
    rollout = successful_rollout()
    for goals in ("hindsight", "stored"):
        algo = HGPO(HGPOConfig(period=4, self_imitation={"goals": goals}), OBS,
                    spaces.Discrete(4), seed=0)
        algo.update(rollout)
        kept = algo.elite.episodes[0]["goal"]  # env 0, steps 0-5: periods 0-3 and 4-5
        if goals == "stored":
            expected = rollout.extras["goal"][:6, 0]
        else:
            reached = rollout.next_obs["achieved_goal"][:, 0]
            expected = torch.stack([reached[3]] * 4 + [reached[5]] * 2)
        torch.testing.assert_close(kept, expected)


def test_rows_of_an_episode_that_never_ended_are_dropped_at_the_next_start():
    elite = EliteEpisodes(capacity=4)
    # env 0: rows 0-1 start an episode that is cut off (an env restarted, no end recorded);
    # a new episode starts at row 2 and succeeds at row 3
    rows, rewards, dones = chunk([[0], [1], [2], [3]], [[0], [5], [0], [1]],
                                 [[False], [False], [False], [True]])
    starts = torch.tensor([[True], [False], [True], [False]])
    assert elite.add_rollout(rows, rewards, dones, starts) == 1
    assert elite.episodes[0]["id"].tolist() == [2, 3] and elite.returns == [1.0]
    # unfinished rows of an earlier rollout are dropped by a start at row 0 too
    elite.add_rollout(*chunk([[4]], [[0]], [[False]]), torch.tensor([[True]]))
    elite.add_rollout(*chunk([[5]], [[1]], [[True]]), torch.tensor([[True]]))
    assert [e["id"].tolist() for e in elite.episodes] == [[5], [2, 3]]

"""Replay bookkeeping and hindsight relabelling (rewards must equal the env's compute_reward)."""

import numpy as np
import pytest
import torch

from agentic_rl.data.her import relabel_offsets
from agentic_rl.data.replay import ReplayBuffer
from agentic_rl.envs.goal import goal_functions
from agentic_rl.envs.make import make_env

SHAPES = {"obs": (2,), "next_obs": (2,), "achieved_goal": (3,), "desired_goal": (3,),
          "next_achieved_goal": (3,), "action": (1,)}


def fill(buffer, lengths, num_envs=1, rng=None):
    """Write episodes of the given lengths; next_achieved_goal encodes (episode, step)."""
    rng = rng or np.random.default_rng(0)
    for episode, length in enumerate(lengths):
        for step in range(length):
            transition = {k: torch.zeros(num_envs, *SHAPES.get(k, ())) for k in SHAPES}
            transition["reward"] = torch.zeros(num_envs)
            transition["terminated"] = torch.zeros(num_envs)
            transition["next_achieved_goal"][:, 0] = episode
            transition["next_achieved_goal"][:, 1] = step
            transition["desired_goal"][:] = torch.as_tensor(rng.normal(size=3))
            buffer.add(transition, torch.full((num_envs,), step == length - 1))


def test_relabel_offsets_stay_in_range():
    gen = torch.Generator().manual_seed(0)
    offset = torch.tensor([0, 3, 9, 5])
    length = torch.tensor([10, 10, 10, 6])
    for _ in range(50):
        future = relabel_offsets("future", offset, length, gen)
        assert ((future >= offset) & (future < length)).all()
        episode = relabel_offsets("episode", offset, length, gen)
        assert ((episode >= 0) & (episode < length)).all()
    assert relabel_offsets("final", offset, length).tolist() == [9, 9, 9, 5]


def test_only_finished_episodes_are_sampled_and_future_goals_come_from_the_same_episode():
    buffer = ReplayBuffer(100, 1, SHAPES)
    fill(buffer, [5, 7, 3])
    partial = {k: torch.zeros(1, *SHAPES.get(k, ())) for k in SHAPES}
    partial |= {"reward": torch.zeros(1), "terminated": torch.zeros(1)}
    buffer.add(partial, torch.tensor([False]))  # an unfinished episode
    assert buffer.num_sampleable() == 15
    gen = torch.Generator().manual_seed(0)
    batch = buffer.sample(500, gen, "future", 1.0, reward_fn=lambda a, d: torch.zeros(len(a)))
    own_episode, own_step = batch["next_achieved_goal"][:, 0], batch["next_achieved_goal"][:, 1]
    goal_episode, goal_step = batch["desired_goal"][:, 0], batch["desired_goal"][:, 1]
    assert torch.equal(goal_episode, own_episode)
    assert (goal_step >= own_step).all()


def test_overwritten_episodes_are_forgotten():
    buffer = ReplayBuffer(10, 1, SHAPES)
    fill(buffer, [6, 6])  # the second episode wraps and overwrites the first one's start
    assert buffer.num_sampleable() == 6
    batch = buffer.sample(200, torch.Generator().manual_seed(0), "future", 1.0,
                          reward_fn=lambda a, d: torch.zeros(len(a)))
    assert (batch["next_achieved_goal"][:, 0] == 1).all()
    assert (batch["desired_goal"][:, 0] == 1).all()


def test_her_rewards_equal_fetch_compute_reward():
    env = make_env("FetchReach-v4")
    fns = goal_functions(env)
    shapes = {"obs": (10,), "next_obs": (10,), "achieved_goal": (3,), "desired_goal": (3,),
              "next_achieved_goal": (3,), "action": (4,)}
    buffer = ReplayBuffer(200, 2, shapes)
    rng = np.random.default_rng(1)
    obs = [env.reset(seed=s)[0] for s in (0, 1)]
    for step in range(50):
        actions = rng.uniform(-1, 1, (2, 4)).astype(np.float32)
        transition = {k: [] for k in ("obs", "achieved_goal", "desired_goal", "action",
                                      "reward", "next_obs", "next_achieved_goal", "terminated")}
        for index in range(2):  # two synthetic trajectories with random-walk goals
            next_obs = {k: v + rng.normal(0, 0.05, v.shape).astype(np.float32)
                        for k, v in obs[index].items()}
            transition["obs"].append(obs[index]["observation"])
            transition["achieved_goal"].append(obs[index]["achieved_goal"])
            transition["desired_goal"].append(obs[index]["desired_goal"])
            transition["action"].append(actions[index])
            transition["reward"].append(env.unwrapped.compute_reward(
                next_obs["achieved_goal"], obs[index]["desired_goal"], {}))
            transition["next_obs"].append(next_obs["observation"])
            transition["next_achieved_goal"].append(next_obs["achieved_goal"])
            transition["terminated"].append(0.0)
            obs[index] = next_obs
        buffer.add({k: torch.as_tensor(np.array(v), dtype=torch.float32)
                    for k, v in transition.items()}, torch.full((2,), step == 49))
    batch = buffer.sample(1000, torch.Generator().manual_seed(0), "future", 0.8, fns.reward_fn)
    expected = env.unwrapped.compute_reward(batch["next_achieved_goal"].numpy(),
                                            batch["desired_goal"].numpy(), {})
    assert np.array_equal(batch["reward"].numpy(), expected.astype(np.float32))
    assert 0 < (batch["reward"] == 0).float().mean() < 1  # both outcomes present


def test_state_round_trip():
    buffer = ReplayBuffer(50, 1, SHAPES)
    fill(buffer, [5, 7])
    restored = ReplayBuffer(50, 1, SHAPES)
    restored.load_state_arrays(buffer.state_arrays())
    a = buffer.sample(64, torch.Generator().manual_seed(3), "future", 0.5,
                      reward_fn=lambda x, y: x[:, 0])
    b = restored.sample(64, torch.Generator().manual_seed(3), "future", 0.5,
                        reward_fn=lambda x, y: x[:, 0])
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_sampling_before_any_finished_episode_says_what_to_do():
    buffer = ReplayBuffer(10, 1, SHAPES)
    with pytest.raises(RuntimeError, match="learning_starts"):
        buffer.sample(4, torch.Generator())


def test_last_episode_returns_the_steps_just_finished_even_across_the_wrap():
    buffer = ReplayBuffer(10, 1, SHAPES)
    fill(buffer, [4])
    assert buffer.last_episode(0)["next_achieved_goal"][:, 1].tolist() == [0, 1, 2, 3]
    fill(buffer, [4, 8])  # the 8-step episode wraps around the end of the ring
    steps = buffer.last_episode(0)["next_achieved_goal"][:, 1].tolist()
    assert steps == list(range(8)) and buffer.num_sampleable() == 8


def test_failed_rows_keep_their_goal_and_the_random_stream_is_unchanged():
    shapes = {**SHAPES, "failed": ()}
    buffers = [ReplayBuffer(100, 1, shapes), ReplayBuffer(100, 1, SHAPES)]
    for buffer in buffers:
        for step in range(4):  # one episode whose last step failed
            transition = {k: torch.zeros(1, *shapes.get(k, ())) for k in shapes}
            transition |= {"reward": torch.zeros(1), "terminated": torch.zeros(1)}
            transition["next_achieved_goal"][:, 1] = step
            transition["desired_goal"][:] = 9.0
            if "failed" in buffer.fields:
                transition["failed"][:] = float(step == 3)
            buffer.add(transition, torch.tensor([step == 3]))
    reward = lambda a, d: -(a - d).norm(dim=-1)  # noqa: E731
    failing, plain = (b.sample(400, torch.Generator().manual_seed(1), "future", 1.0,
                               reward_fn=reward) for b in buffers)
    last = failing["failed"] == 1
    assert last.any() and (failing["desired_goal"][last] == 9.0).all()  # never relabelled
    # a plain buffer relabels the same last steps with their own achieved goal: reward 0
    assert (plain["reward"][plain["next_achieved_goal"][:, 1] == 3] == 0).all()
    assert torch.equal(failing["desired_goal"][~last], plain["desired_goal"][~last])

"""Prioritised replay: the sum tree, priorities and importance weights against hand
computations; the replay storage's prioritised batches; the weighted critic loss in all three
SAC update paths (autograd, Python gradients, fused C++) and in TD3."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agentic_rl.algos import losses
from agentic_rl.algos.sac_config import HERConfig, PrioritizedReplayConfig
from agentic_rl.data.priorities import Priorities, SumTree, importance_weights
from agentic_rl.data.replay_storage import ReplaySettings, ReplayStorage
from agentic_rl.data.storage import StepRecord, StorageSpec
from agentic_rl.envs.goal import GoalFunctions
from agentic_rl.train.loop import give_priorities
from tests.unit.test_sac_grads import _batch, _learner, _params


def test_sum_tree_finds_the_leaf_of_each_prefix_sum():
    tree = SumTree(5)  # leaves padded to 8
    tree.set(np.array([0, 1, 2, 3, 4]), np.array([1.0, 0.0, 3.0, 2.0, 0.5]))
    assert tree.total == 6.5
    prefixes = np.array([0.0, 0.99, 1.0, 3.99, 4.0, 5.99, 6.0, 6.49])
    assert tree.find(prefixes).tolist() == [0, 0, 2, 2, 3, 3, 4, 4]
    tree.set(np.array([2, 2]), np.array([9.0, 0.0]))  # the last value of a repeat wins
    assert tree.total == 3.5 and tree.find(np.array([1.0])).tolist() == [3]
    copy = SumTree(5)
    copy.load(tree.leaves().copy())
    assert copy.tree.tolist() == tree.tree.tolist()
    with pytest.raises(IndexError):
        tree.set(np.array([5]), 1.0)


def test_rounding_never_steps_into_an_empty_subtree():
    tree = SumTree(4)
    tree.set(np.array([0, 1]), np.array([0.1, 0.2]))  # right half empty
    assert tree.find(np.array([0.3, 0.30000000001])).tolist() == [1, 1]


def test_priorities_follow_td_errors_and_sampling_follows_priorities():
    priorities = Priorities(4, alpha=0.5, epsilon=0.0)
    priorities.add(np.array([0, 1, 2]))  # new transitions: the largest priority so far, 1
    assert priorities.tree.leaves().tolist() == [1.0, 1.0, 1.0, 0.0]
    priorities.update(torch.tensor([0, 1]), torch.tensor([4.0, -9.0]))  # |d| ** 0.5
    assert priorities.tree.leaves().tolist() == [2.0, 3.0, 1.0, 0.0]
    assert priorities.max_priority == 9.0
    priorities.add(np.array([3]))
    assert priorities.tree.leaves()[3] == 3.0
    priorities.remove(np.array([1]))
    generator = torch.Generator().manual_seed(0)
    index, probability = priorities.sample(6000, generator)
    counts = np.bincount(index.numpy(), minlength=4) / 6000
    assert counts == pytest.approx([2 / 6, 0.0, 1 / 6, 3 / 6], abs=1e-3)  # stratified
    assert probability[index == 0].unique().tolist() == [pytest.approx(2 / 6)]


def test_importance_weights_by_hand():
    weights = importance_weights(torch.tensor([0.5, 0.125]), 4, beta=0.5)
    assert weights.tolist() == pytest.approx([(4 * 0.5) ** -0.5, (4 * 0.125) ** -0.5])


def test_weighted_critic_loss_and_td_error_by_hand():
    q = torch.tensor([[1.0, 2.0], [0.0, 4.0]])  # [num_q=2, B=2]
    target = torch.tensor([0.0, 1.0])
    weight = torch.tensor([0.5, 1.0])
    # 0.5 * (mean(0.5*1, 1*1) + mean(0.5*0, 1*9)) = 0.5 * (0.75 + 4.5)
    assert losses.critic_loss(q, target, weight).item() == pytest.approx(2.625)
    assert losses.critic_loss(q, target).item() == pytest.approx(0.5 * (1.0 + 4.5))
    assert losses.td_error(q, target).tolist() == [1.0, 3.0]


def _weighted(batch: dict) -> dict:
    weights = torch.linspace(0.2, 1.0, batch["obs"].shape[0])
    return {**batch, "weight": weights, "index": torch.arange(batch["obs"].shape[0])}


@pytest.mark.parametrize("fused", [False, True], ids=["python", "fused"])
def test_weighted_sac_update_matches_autograd_and_reports_td_errors(fused):
    manual, reference = _learner("sac", fused=fused), _learner("sac")
    reference.manual_gradients = False
    for step in range(3):
        ours, theirs = _weighted(_batch(seed=step)), _weighted(_batch(seed=step))
        manual.update(ours)
        reference.update(theirs)
        assert torch.allclose(ours["td_error"], theirs["td_error"], rtol=1e-4, atol=1e-5)
        for a, b in zip(_params(manual), _params(reference), strict=True):
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), step
    assert manual.fused_update is fused


def test_weights_change_the_update():
    plain, weighted = _learner("sac"), _learner("sac")
    batch = _batch()
    plain.update(dict(batch))
    weighted.update(_weighted(batch))
    changed = [not torch.allclose(a.grad, b.grad) for a, b in zip(
        plain.critic.parameters(), weighted.critic.parameters())]
    assert all(changed)  # (Adam's first step is about lr * sign(gradient) either way)


def test_td3_weights_its_critic_loss_and_reports_td_errors():
    from agentic_rl.algos.td3 import TD3, TD3Config
    from tests.unit.test_sac_grads import SPACES

    torch.manual_seed(0)
    learner = TD3(TD3Config(batch_size=16, hidden_sizes=[16]), SPACES)
    batch = _weighted(_batch())
    learner.update(batch)
    assert batch["td_error"].shape == (16,) and (batch["td_error"] >= 0).all()


# ---------------------------------------------------------------------------- the storage
def _storage(num_envs=2, capacity=20, prioritized=True, total=100) -> ReplayStorage:
    goal_fns = GoalFunctions(lambda a, d: -(a - d).norm(dim=-1).gt(0.05).float(),
                             lambda a, d: (a - d).norm(dim=-1) <= 0.05, False)
    spec = StorageSpec(num_envs, capacity * num_envs, 5, 0, goal_fns, 0, total_timesteps=total)
    settings = ReplaySettings(3, 2, 2, 8, 1, HERConfig(),
                              prioritized=PrioritizedReplayConfig() if prioritized else None)
    from agentic_rl.algos.sac_config import DemoConfig
    return ReplayStorage(spec, settings, DemoConfig())


def _step(storage: ReplayStorage, t: int, end: bool) -> None:
    n = storage.spec.num_envs
    transition = {"obs": torch.full((n, 3), float(t)), "next_obs": torch.full((n, 3), t + 1.0),
                  "achieved_goal": torch.zeros(n, 2), "desired_goal": torch.ones(n, 2),
                  "next_achieved_goal": torch.zeros(n, 2), "action": torch.zeros(n, 2),
                  "reward": torch.zeros(n), "terminated": torch.zeros(n)}
    done = torch.full((n,), end)
    storage.add(StepRecord(transition, {}, done, [], {"desired_goal": torch.ones(n, 2)}, {}, {}))


def test_only_finished_episodes_have_priority_and_overwritten_ones_lose_it():
    storage = _storage(capacity=6)
    for t in range(5):
        _step(storage, t, end=t == 3)  # an episode of 4 steps, then one unfinished step
    leaves = storage.replay.priorities.tree.leaves()
    assert (leaves[:8] == 1.0).all() and (leaves[8:] == 0.0).all()
    for t in range(5, 8):  # rows 5, 0, 1 written: the first episode is overwritten
        _step(storage, t, end=False)
    assert storage.replay.priorities.tree.total == 0.0


def test_prioritised_batches_carry_weights_and_feed_back():
    storage = _storage()
    for t in range(10):
        _step(storage, t, end=t % 5 == 4)
    storage.owed(50, 1)  # half-way: beta = 0.4 + 0.6 * 0.5
    assert storage.beta() == pytest.approx(0.7)
    generator = torch.Generator().manual_seed(0)
    batch = storage.sample(None, generator)
    assert batch["weight"].max() == 1.0 and batch["index"].shape == (8,)
    assert set(batch["index"].tolist()) <= set(storage.replay.valid_indices().tolist())
    valid = storage.replay.valid_indices()
    storage.update_priorities(valid, torch.zeros(20))
    hot = int(batch["index"][0])
    storage.update_priorities(torch.tensor([hot]), torch.tensor([10.0]))
    counts = torch.bincount(torch.cat([storage.sample(None, generator)["index"]
                                       for _ in range(50)]), minlength=40)
    assert counts[hot] > 0.99 * counts.sum()  # (10 + eps) ** 0.6 against 19 eps ** 0.6


def test_demos_keep_their_share_and_their_own_priorities():
    storage = _storage()
    demo = {"obs": torch.zeros(10, 3), "next_obs": torch.zeros(10, 3),
            "achieved_goal": torch.zeros(10, 2), "desired_goal": torch.ones(10, 2),
            "next_achieved_goal": torch.zeros(10, 2), "action": torch.zeros(10, 2),
            "reward": torch.zeros(10), "terminated": torch.zeros(10)}
    storage.add_demos([("default", demo, False, 0.0)])
    for t in range(10):
        _step(storage, t, end=t % 5 == 4)  # 20 online transitions
    batch = storage.sample(None, torch.Generator().manual_seed(0))
    online_slots = storage.replay.capacity * storage.replay.num_envs
    demo_rows = batch["index"] >= online_slots
    assert int(demo_rows.sum()) == round(8 * 10 / 30)
    storage.update_priorities(batch["index"], torch.full((8,), 3.0))
    touched = batch["index"][demo_rows] - online_slots
    assert (storage.demo_replay.priorities.tree.leaves()[touched.numpy()] > 1.0).all()


def test_priorities_survive_a_checkpoint():
    storage, generator = _storage(), torch.Generator().manual_seed(0)
    for t in range(10):
        _step(storage, t, end=t % 5 == 4)
    batch = storage.sample(None, generator)
    storage.update_priorities(batch["index"], torch.rand(8))
    arrays, meta = storage.state()
    restored = _storage()
    restored.load_state(arrays, meta, exact=True)
    assert restored.replay.priorities.tree.tree.tolist() == \
        storage.replay.priorities.tree.tree.tolist()
    state = generator.get_state()
    a = storage.sample(None, generator)["index"]
    generator.set_state(state)
    assert restored.sample(None, generator)["index"].equal(a)
    uniform = _storage(prioritized=False)
    uniform_arrays, uniform_meta = uniform.state()
    with pytest.raises(ValueError, match="without prioritized replay"):
        _storage().load_state(uniform_arrays, uniform_meta, exact=True)


def test_a_learner_that_ignores_the_weights_is_an_error():
    class Run:
        algo, storage = object(), None

    with pytest.raises(RuntimeError, match="does not support prioritized replay"):
        give_priorities(Run(), {"weight": torch.ones(2), "index": torch.arange(2)})

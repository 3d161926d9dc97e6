"""Prototype buffer: metadata, samplers, caps and persistence."""

import numpy as np
import pytest
import torch

from agentic_rl.data.prototypes import PrototypeBuffer


def episode(goal, length=4, action=0.0):
    return {"obs": torch.randn(length, 3), "desired_goal": torch.tensor(goal).repeat(length, 1),
            "achieved_goal": torch.zeros(length, 2), "action": torch.full((length, 2), action)}


def test_metadata_and_source_caps():
    buffer = PrototypeBuffer(capacity=100)
    buffer.add_episode(episode([0.0, 0.0]), "expert", task_id="reach", episode_return=-3)
    for i in range(5):
        buffer.add_episode(episode([1.0, 1.0], action=i), "self", task_id="reach", timestamp=i)
    buffer.cap_source("self", 8)  # keep the two newest self episodes
    assert buffer.count("self") == 8 and buffer.count("expert") == 4
    assert [m["timestamp"] for m in buffer.metadata if m["source"] == "self"] == [3, 4]
    assert buffer.metadata[0] | {"timestamp": 0} == {"task_id": "reach", "success": True,
                                                      "return": -3.0, "source": "expert",
                                                      "timestamp": 0}
    with pytest.raises(ValueError, match="source"):
        buffer.add_episode(episode([0.0, 0.0]), "teacher")


def test_capacity_evicts_self_before_expert():
    buffer = PrototypeBuffer(capacity=8)
    buffer.add_episode(episode([0.0, 0.0]), "expert", timestamp=0)
    buffer.add_episode(episode([0.0, 0.0]), "self", timestamp=1)
    buffer.add_episode(episode([0.0, 0.0]), "self", timestamp=2)
    assert [m["source"] for m in buffer.metadata] == ["expert", "self"]
    assert buffer.metadata[1]["timestamp"] == 2


def test_return_prioritised_sampling_prefers_high_returns():
    buffer = PrototypeBuffer(capacity=100, sampling="return")
    buffer.add_episode(episode([0.0, 0.0], action=1.0), "expert", episode_return=10.0)
    buffer.add_episode(episode([0.0, 0.0], action=-1.0), "expert", episode_return=-10.0)
    batch = buffer.sample(3000, torch.Generator().manual_seed(0))
    share_best = (batch["action"][:, 0] == 1.0).float().mean().item()
    assert share_best == pytest.approx(2 / 3, abs=0.03)  # rank weights 1 and 1/2


def test_goal_sampling_picks_the_nearest_episodes():
    buffer = PrototypeBuffer(capacity=1000, sampling="goal", nearest_fraction=0.1)
    for i in range(20):
        buffer.add_episode(episode([float(i), 0.0], action=float(i)), "expert")
    batch = buffer.sample(200, torch.Generator().manual_seed(0),
                          current_goals=torch.tensor([[7.2, 0.0], [15.0, 0.1]]))
    assert set(batch["action"][:, 0].tolist()) == {7.0, 15.0}


def test_uniform_sampling_and_round_trip():
    buffer = PrototypeBuffer(capacity=100)
    buffer.add_episode(episode([0.0, 1.0], length=3), "expert", task_id="a", episode_return=1.5)
    buffer.add_episode(episode([2.0, 1.0], length=5), "curriculum", task_id="b", success=False)
    restored = PrototypeBuffer(capacity=100)
    restored.load_state_arrays({k: np.array(v) for k, v in buffer.state_arrays().items()})
    assert restored.metadata == buffer.metadata
    a = buffer.sample(50, torch.Generator().manual_seed(1))
    b = restored.sample(50, torch.Generator().manual_seed(1))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert a["obs"].shape == (50, 3) and a["action"].shape == (50, 2)

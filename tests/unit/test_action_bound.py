"""A policy bounded to a share of the env's action range (``shrunk_box``; SAC's
``action_bound``) acts inside it in every mode and keeps [-1, 1] as its own action range."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agentic_rl.algos.sac import SAC, SACConfig
from agentic_rl.algos.spaces import shrunk_box


def test_shrunk_box_by_hand():
    low, high = shrunk_box([-1.0, 0.0], [1.0, 4.0], 0.25)  # centres 0 and 2, half-widths 1, 2
    np.testing.assert_allclose(low, [-0.25, 1.5])
    np.testing.assert_allclose(high, [0.25, 2.5])
    for share in (0.0, 1.5):
        with pytest.raises(ValueError, match="share"):
            shrunk_box([-1.0], [1.0], share)


@pytest.mark.parametrize("fused", [True, False])
def test_a_bounded_sac_acts_inside_its_bound_in_every_mode(fused):
    spaces = {"obs_dim": 3, "goal_dim": 2, "act_dim": 2,
              "action_low": np.array([-2.0, 0.0], np.float32),
              "action_high": np.array([2.0, 1.0], np.float32)}
    sac = SAC(SACConfig(hidden_sizes=[8], action_bound=0.5, fused_update=fused), spaces)
    with torch.no_grad():  # a mean far beyond the tanh's range in the first coordinate
        sac.actor.mean_head.bias[0] = 50.0
    obs = {"observation": torch.randn(256, 3) * 10, "desired_goal": torch.randn(256, 2)}
    for mode in ("random", "explore", "deterministic"):
        action, _, extras = sac.act(obs, None, mode)
        assert (action[:, 0].abs() <= 1.0 + 1e-6).all(), mode  # 0.5 of [-2, 2]
        assert ((action[:, 1] >= 0.25 - 1e-6) & (action[:, 1] <= 0.75 + 1e-6)).all(), mode
        torch.testing.assert_close(sac.env_to_unit(action), extras["unit_action"])
        if mode != "random":  # saturated at the bound's edge, not the env's
            torch.testing.assert_close(action[:, 0], torch.ones(256), atol=1e-3, rtol=0)
    with pytest.raises(ValueError, match="demonstrations"):
        SACConfig(action_bound=0.5, prototype_data_path="demos.npz")

"""MaskShield narrows obs["action_mask"] to allowed actions before a discrete policy samples."""

import numpy as np
import torch

from agentic_rl.envs.gridworld import GridWorldEnv
from agentic_rl.train.safety import MaskShield
from agentic_rl.verify.spec import PropertySet, load_properties

LAVA = "configs/safety/gridworld_lava.yaml"


def test_forbidden_indices_are_removed_and_counted():
    properties = PropertySet.model_validate({"properties": [
        {"name": "no_third", "kind": "forbidden_actions", "actions": [2]}]})
    shield = MaskShield(properties, n_actions=3)
    obs = {"observation": torch.zeros(2, 1),
           "action_mask": torch.tensor([[True, True, True], [True, True, False]])}
    out = shield.restrict(obs)
    assert out["action_mask"].tolist() == [[True, True, False], [True, True, False]]
    assert shield.interventions == 1 and shield.steps == 2  # env 1 had nothing to lose
    assert shield.project(out, torch.tensor([0, 1])).tolist() == [0, 1]


def test_moves_into_a_forbidden_cell_are_masked():
    env = GridWorldEnv(layout="open", size=6)
    shield = MaskShield(load_properties(LAVA), 4, env.core)
    env.reset(seed=0)
    env._pos = np.array([[4, 3]])  # the lava cell (inner row 2, column 2 = grid cell 3, 3) is above
    obs = {"observation": torch.as_tensor(env._obs()["observation"])[None],
           "action_mask": torch.as_tensor(env.action_mask(), dtype=torch.bool)[None]}
    mask = shield.restrict(obs)["action_mask"][0]
    assert mask.tolist() == [False, True, True, True]  # up (0) leads into lava
    assert shield.interventions == 1

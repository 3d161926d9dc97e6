"""SafeVectorEnv masks forbidden discrete actions and text commands before sampling."""

import gymnasium as gym
import numpy as np

from agentic_rl.train.safety import SafeVectorEnv
from agentic_rl.verify.monitor import SafetyMonitor
from agentic_rl.verify.spec import PropertySet

COMMANDS = [["go to fridge", "heat cat with microwave", "look"],
            ["look", "take apple", "heat apple with microwave"]]


class TextChoices(gym.vector.VectorEnv):
    """Two envs, three indexed commands each, text commands in ``info``."""

    def __init__(self):
        self.num_envs = 2
        space = gym.spaces.Dict({"observation": gym.spaces.Box(-1, 1, (1,), np.float32)})
        self.single_observation_space = space
        self.single_action_space = gym.spaces.Discrete(3)
        self.observation_space = gym.vector.utils.batch_space(space, 2)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, 2)

    def _out(self):
        return {"observation": np.zeros((2, 1), np.float32)}, {
            "admissible_commands": np.array(COMMANDS, dtype=object)}

    def reset(self, **kwargs):
        return self._out()

    def step(self, actions):
        obs, info = self._out()
        return obs, np.zeros(2), np.zeros(2, bool), np.zeros(2, bool), info


def test_command_patterns_and_forbidden_indices_are_masked():
    properties = PropertySet.model_validate({"properties": [
        {"name": "no_heat_cat", "kind": "forbidden_commands", "patterns": ["^heat .*cat"]},
        {"name": "no_third", "kind": "forbidden_actions", "actions": [2]}]})
    env = SafeVectorEnv(TextChoices(), properties, SafetyMonitor(properties), shield=True)
    _, info = env.reset()
    assert info["action_mask"].tolist() == [[True, False, False], [True, True, False]]
    env.step(np.array([0, 2]))  # env 1 took a forbidden index: the monitor counts it
    assert env.monitor.counts["no_third"] == 1 and env.interventions == 4

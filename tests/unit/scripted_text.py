"""A scripted admissible-command env and a run of it through the text collector, for tests that
compare the collector's per-command buckets with the ones rebuilt from stored episodes."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from agentic_rl.data.text_table import TextTable


class ScriptedTextEnv(gym.Env):
    """One room, the same admissible commands at every step; each command answers with its
    reply (default "You did <command>.")."""

    observation_space = gym.spaces.Dict({})

    def __init__(self, task: str, commands: list[str], replies: list[str] | None = None):
        self.task, self.commands = task, commands
        self.replies = replies or [f"You did {c}." for c in commands]
        self.action_space = gym.spaces.Discrete(len(commands))

    def reset(self, *, seed=None, options=None):
        return self._obs("You are in a room."), {"admissible_commands": self.commands}

    def step(self, action):
        return (self._obs(self.replies[action]), 0.0, False, False,
                {"admissible_commands": self.commands})

    def _obs(self, text):
        return {"task": self.task, "observation": text, "inventory": "You carry nothing."}


class _Zeros:
    dim = 4

    def encode(self, texts):
        return np.zeros((len(texts), 4), np.float32)


def collected_steps(env: ScriptedTextEnv, actions) -> tuple[TextTable, list[dict]]:
    """The collector's (``TextInputs``) observations of the reset and of each action, and the
    text table they index."""
    from agentic_rl.collect.game_schedule import SeedSchedule
    from agentic_rl.collect.text_inputs import TextInputs

    table = TextTable(_Zeros())
    wrapped = TextInputs(env, table, SeedSchedule([0], 0), max_commands=len(env.commands))
    steps = [wrapped.reset(seed=0)[0]]
    for action in actions:
        steps.append(wrapped.step(action)[0])
    return table, steps

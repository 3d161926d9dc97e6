"""The shield on the real FetchReach dynamics: the approximate one-step model plus a 2 cm margin
keeps aggressive random actions out of a floor, a workspace box and a forbidden box."""

from __future__ import annotations

import gymnasium as gym
import gymnasium_robotics
import numpy as np

from agentic_rl.verify.monitor import SafetyMonitor
from agentic_rl.verify.shield import ContinuousShield
from agentic_rl.verify.spec import PropertySet
from agentic_rl.verify.step_model import fetch_reach_step_model

gym.register_envs(gymnasium_robotics)

PROPS = PropertySet.model_validate({"parts": {"grip_pos": [0, 3]}, "properties": [
    {"name": "floor", "kind": "state_halfspace", "part": "grip_pos", "a": [0, 0, -1], "b": -0.48},
    {"name": "ws", "kind": "state_box", "part": "grip_pos",
     "low": [1.2, 0.6, 0.3], "high": [1.45, 0.9, 0.8]},
    {"name": "nofly", "kind": "forbidden_box", "part": "grip_pos",
     "low": [1.36, 0.70, 0.48], "high": [1.42, 0.80, 0.56]},
    {"name": "limits", "kind": "action_box", "low": [-1] * 4, "high": [1] * 4}]})


def run(shield: ContinuousShield | None, episodes: int = 3) -> SafetyMonitor:
    env = gym.make("FetchReach-v4")
    rng = np.random.default_rng(0)
    monitor = SafetyMonitor(PROPS)
    for episode in range(episodes):
        obs, _ = env.reset(seed=episode)
        action = rng.uniform(-1, 1, 4)
        for _ in range(50):
            if rng.random() < 0.3:  # bang-bang actions, held for a few steps
                action = np.sign(rng.normal(size=4))
            executed = action if shield is None else shield.project(obs["observation"][None],
                                                                    action[None])[0]
            obs, *_ = env.step(executed)
            monitor.check(obs["observation"][None], executed[None])
    env.close()
    return monitor


def test_fetch_shield_with_margin_prevents_violations_that_happen_without_it():
    unshielded = run(None)
    assert unshielded.total_violations > 0
    shield = ContinuousShield(PROPS, fetch_reach_step_model(), margin=0.02)
    shielded = run(shield)
    assert shielded.summary()["per_property"] == {"floor": 0, "ws": 0, "nofly": 0, "limits": 0}
    assert shield.interventions > 0 and shield.infeasible == 0

"""agentic-rl: agents that set and pursue their own goals.

Data flows env -> collector -> buffer -> algorithm.update -> logger/checkpoint; see README.md.
"""

from agentic_rl.envs.registration import register_envs as _register_envs

__version__ = "0.1.0"
_register_envs()  # gym.make("agentic_rl/KeyDoor-v0") works after ``import agentic_rl``

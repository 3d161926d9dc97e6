"""ALFWorld (text household tasks) for agentic-rl: data, fast engine, Gym env, experts, generator.

Importing this package does not import alfworld/textworld; they load when an env is built
(extra ``agentic-rl[alfworld]``).
"""

from __future__ import annotations

from typing import Any

ENV_ID = "agentic_rl/ALFWorld-v0"


def register_envs() -> None:
    """Register ``agentic_rl/ALFWorld-v0`` with Gymnasium (idempotent)."""
    from agentic_rl.envs.registration import register_envs as register_all_ids

    register_all_ids()


def make_alfworld_env(**kwargs: Any) -> Any:
    """Build one :class:`~agentic_rl.envs.alfworld.gym_env.ALFWorldEnv` (see its arguments)."""
    from agentic_rl.envs.alfworld.gym_env import ALFWorldEnv

    return ALFWorldEnv(**kwargs)


class ALFWorldFactory:
    """Picklable env factory for process-based vector envs (each worker builds its own engine).

    Args:
        **kwargs: arguments of :class:`~agentic_rl.envs.alfworld.gym_env.ALFWorldEnv`.
    """

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    def __call__(self) -> Any:
        """Build the env (in the calling process)."""
        import torch

        torch.set_num_threads(1)
        return make_alfworld_env(**self.kwargs)


def make_alfworld_vec_env(num_envs: int, **kwargs: Any) -> Any:
    """``gymnasium.vector.AsyncVectorEnv`` of ALFWorld envs, one process each.

    Args:
        num_envs: number of worker processes.
        **kwargs: arguments of :class:`~agentic_rl.envs.alfworld.gym_env.ALFWorldEnv`; the
            split's games are shared by all workers, each drawing its own games.

    Returns:
        The vector env (observations batched per key; text keys as tuples).
    """
    from gymnasium.vector import AsyncVectorEnv

    return AsyncVectorEnv([ALFWorldFactory(**kwargs) for _ in range(num_envs)],
                          shared_memory=False, context="spawn")


__all__ = ["ENV_ID", "register_envs", "make_alfworld_env", "make_alfworld_vec_env",
           "ALFWorldFactory"]

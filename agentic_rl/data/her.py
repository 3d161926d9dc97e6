"""Hindsight experience replay (SPEC A2): goal relabelling at sample time.

Rewards of relabelled transitions come from a ``reward_fn(achieved_goal, desired_goal)`` over
tensors, never from the environment, so the buffer does not hold an env.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

RewardFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def relabel_offsets(
    strategy: str,
    offset: torch.Tensor,
    length: torch.Tensor,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Pick, for each sampled transition, the step whose achieved goal becomes its new goal.

    Args:
        strategy: ``"future"`` (a step in ``[offset, length - 1]``, the transition's own next
            achieved goal included), ``"final"`` (the last step) or ``"episode"`` (any step).
        offset: ``[B]`` position of the sampled transition in its episode.
        length: ``[B]`` length of that episode.
        generator: random source.

    Returns:
        ``[B]`` int64 positions; the new goal is the ``next_achieved_goal`` stored there.
    """
    if strategy == "final":
        return length - 1
    uniform = torch.rand(offset.shape, generator=generator)
    if strategy == "future":
        return offset + (uniform * (length - offset)).long().clamp(max=(length - offset - 1))
    if strategy == "episode":
        return (uniform * length).long().clamp(max=length - 1)
    raise ValueError(f"unknown HER strategy {strategy!r}; use future, final or episode")

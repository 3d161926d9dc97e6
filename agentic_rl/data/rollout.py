"""On-policy rollout storage on preallocated tensors, and GAE that bootstraps on truncation.

The collector stores, for every step ``t`` and env ``n``: the observation the action was chosen
from, the *true* next observation (the final observation where an episode ended, not the reset
one), the action, the reward, ``terminated`` and ``truncated`` kept apart, and whatever extras
``algo.act`` returned (log-probabilities, values, HGPO's goals and period flags). Algorithms turn
this into advantages with ``gae``: a terminated step does not bootstrap, a truncated one does,
from the value of its final observation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    dones: torch.Tensor,
    gamma: float | torch.Tensor,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over the leading (time) axis.

    ``delta_t = r_t + gamma_t (1 - terminated_t) V(s'_t) - V(s_t)`` and
    ``A_t = delta_t + gamma_t lam (1 - done_t) A_{t+1}``, where ``s'_t`` is the true next
    observation. ``done_t`` (terminated or truncated, or any other segment end such as an HGPO
    period boundary) cuts the recursion; only ``terminated_t`` removes the bootstrap.

    Args:
        rewards: ``[T, ...]``.
        values: ``[T, ...]`` V(s_t).
        next_values: ``[T, ...]`` V(s'_t) (value of the final observation where an episode ended).
        terminated: ``[T, ...]`` bool / 0-1, true terminal states only.
        dones: ``[T, ...]`` bool / 0-1, where the trajectory segment ends (terminated or truncated).
        gamma: discount, a float or ``[T, ...]`` per-step discounts (e.g. ``gamma**k`` for SMDPs).
        lam: GAE lambda.

    Returns:
        ``(advantages [T, ...], returns [T, ...])`` with ``returns = advantages + values``.
    """
    not_term = 1.0 - terminated.float()
    not_done = 1.0 - dones.float()
    gammas = torch.as_tensor(gamma, dtype=rewards.dtype, device=rewards.device).expand_as(rewards)
    deltas = rewards + gammas * not_term * next_values - values
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        running = deltas[t] + gammas[t] * lam * not_done[t] * running
        advantages[t] = running
    return advantages, advantages + values


def _alloc(steps: int, value: torch.Tensor) -> torch.Tensor:
    return torch.zeros((steps, *value.shape), dtype=value.dtype)


@dataclass
class Rollout:
    """``T`` steps of ``N`` envs; every tensor is ``[T, N, ...]``."""

    obs: dict[str, torch.Tensor]
    next_obs: dict[str, torch.Tensor]
    actions: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    extras: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def dones(self) -> torch.Tensor:
        """``terminated | truncated``, ``[T, N]`` bool."""
        return self.terminated | self.truncated

    def to(self, device: str | torch.device) -> Rollout:
        """The rollout with every tensor on ``device`` (itself when already there)."""
        if self.rewards.device == torch.device(device):
            return self

        def move(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
            return {k: v.to(device) for k, v in tensors.items()}

        return Rollout(move(self.obs), move(self.next_obs), self.actions.to(device),
                       self.rewards.to(device), self.terminated.to(device),
                       self.truncated.to(device), move(self.extras))

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.rewards.shape)  # type: ignore[return-value]


class RolloutBuffer:
    """Preallocated storage for ``num_steps`` steps; tensors are allocated on the first ``add``.

    Args:
        num_steps: steps per env per rollout (``T``).
    """

    def __init__(self, num_steps: int) -> None:
        if num_steps < 1:
            raise ValueError(f"num_steps must be >= 1, got {num_steps}")
        self.num_steps = num_steps
        self.step = 0
        self._data: Rollout | None = None

    def _allocate(self, obs, next_obs, action, extras) -> Rollout:
        steps, num_envs = self.num_steps, action.shape[0]
        return Rollout(
            obs={k: _alloc(steps, v) for k, v in obs.items()},
            next_obs={k: _alloc(steps, v) for k, v in next_obs.items()},
            actions=_alloc(steps, action),
            rewards=torch.zeros(steps, num_envs),
            terminated=torch.zeros(steps, num_envs, dtype=torch.bool),
            truncated=torch.zeros(steps, num_envs, dtype=torch.bool),
            extras={k: _alloc(steps, v) for k, v in extras.items()},
        )

    def add(
        self,
        obs: dict[str, torch.Tensor],
        next_obs: dict[str, torch.Tensor],
        action: torch.Tensor,
        reward: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        extras: dict[str, torch.Tensor],
    ) -> None:
        """Store one step of ``N`` envs (every tensor ``[N, ...]``)."""
        if self.step >= self.num_steps:
            raise RuntimeError("rollout buffer is full; call reset() after the update")
        if self._data is None:
            self._data = self._allocate(obs, next_obs, action, extras)
        data, t = self._data, self.step
        for key, value in obs.items():
            data.obs[key][t] = value
        for key, value in next_obs.items():
            data.next_obs[key][t] = value
        data.actions[t] = action
        data.rewards[t] = reward
        data.terminated[t] = terminated
        data.truncated[t] = truncated
        for key, value in extras.items():
            data.extras[key][t] = value
        self.step += 1

    @property
    def full(self) -> bool:
        return self.step == self.num_steps

    def get(self) -> Rollout:
        """The filled rollout (views on the buffer; valid until the next ``add``)."""
        if self._data is None or not self.full:
            raise RuntimeError(f"rollout has {self.step}/{self.num_steps} steps; fill it first")
        return self._data

    def reset(self) -> None:
        self.step = 0


def flatten_time(tensor: torch.Tensor) -> torch.Tensor:
    """``[T, N, ...] -> [T * N, ...]``."""
    return tensor.reshape(tensor.shape[0] * tensor.shape[1], *tensor.shape[2:])

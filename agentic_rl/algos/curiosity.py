"""Curiosity as an intrinsic reward: random network distillation (Burda et al., 2018).

A fixed, randomly initialised target network embeds each state; a predictor learns to match
it on the states the agent reaches. The prediction error is high on states seen rarely, so
``weight * error / running std(error)`` rewards visiting them. The on-policy learners add it
to the reward of every rollout step (PPO: the env reward; HGPO: the Worker's goal reward)
before GAE, then train the predictor on the rollout's states.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator
from torch import nn

from agentic_rl.algos.schedule import Scheduled, non_negative, value_at
from agentic_rl.nets.mlp import mlp
from agentic_rl.nets.normalizer import RunningNormalizer


class CuriosityConfig(BaseModel):
    """``curiosity`` of an on-policy learner's section (absent: no intrinsic reward)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["rnd"] = "rnd"
    weight: Scheduled = Field(0.1, description="scale of the normalised intrinsic reward: a "
                              "constant or a Schedule over the env steps the bonus has scored")
    obs_keys: list[str] = Field(default_factory=lambda: ["observation"])
    hidden_sizes: list[int] = Field(default_factory=lambda: [64, 64])
    embed_dim: int = Field(32, ge=1)
    learning_rate: float = Field(1e-3, gt=0)
    center: bool = Field(False, description="subtract the batch's mean error: a zero-mean "
                         "bonus, so states pay only for being newer than the others, and an "
                         "episode that ends (its goal reached) forfeits no bonus on average")

    @field_validator("weight")
    @classmethod
    def _non_negative(cls, value):
        return non_negative(value, "curiosity weight")


def prediction_errors(predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error per state: ``[B, E], [B, E] -> [B]``."""
    return (predicted - target).pow(2).mean(dim=-1)


def scaled_bonus(errors: torch.Tensor, running_var: torch.Tensor, weight: float,
                 center: torch.Tensor | float = 0.0) -> torch.Tensor:
    """``weight * (errors - center) / sqrt(running_var)``: the bonus on a scale that does not
    drift as the predictor gets better everywhere (``running_var`` of past errors, floored at
    1e-8; ``center`` 0 leaves the errors uncentred)."""
    return weight * (errors - center) / running_var.clamp_min(1e-8).sqrt()


class RND(nn.Module):
    """Target and predictor networks, the predictor's optimiser and the running variance of
    the errors (all saved with the learner)."""

    def __init__(self, config: CuriosityConfig, in_dim: int) -> None:
        super().__init__()
        self.config = config
        self.target = mlp(in_dim, config.hidden_sizes, config.embed_dim)
        self.predictor = mlp(in_dim, config.hidden_sizes, config.embed_dim)
        self.target.requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.predictor.parameters(), lr=config.learning_rate)
        self.errors = RunningNormalizer(1)  # running mean and variance of the errors

    def bonus(self, x: torch.Tensor) -> torch.Tensor:
        """Intrinsic reward ``[...]`` for states ``[..., in_dim]``; updates the error
        statistics with these states' errors first."""
        weight = value_at(self.config.weight, int(self.errors.count))
        with torch.no_grad():
            errors = prediction_errors(self.predictor(x), self.target(x))
            self.errors.update(errors.reshape(-1, 1))
            mean = errors.mean() if self.config.center else 0.0
            return scaled_bonus(errors, self.errors.var[0].to(errors.dtype), weight, mean)

    def train_step(self, x: torch.Tensor) -> float:
        """One predictor step on states ``[B, in_dim]``; returns the loss."""
        loss = prediction_errors(self.predictor(x), self.target(x)).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())

    def extra_state(self, prefix: str = "rnd") -> dict[str, Any]:
        return {prefix: self.state_dict(), f"{prefix}_opt": self.optimizer.state_dict()}

    def load_extra_state(self, state: dict[str, Any], prefix: str = "rnd") -> None:
        self.load_state_dict(state[prefix])
        self.optimizer.load_state_dict(state[f"{prefix}_opt"])


def curiosity_bonus(rnd: RND | None, next_obs: dict[str, torch.Tensor]
                    ) -> tuple[torch.Tensor | float, dict[str, float]]:
    """The bonus ``[T, N]`` for a rollout's reached states ``next_obs`` (0 without ``rnd``),
    then one predictor step on them; returns ``(bonus, metrics)``."""
    if rnd is None:
        return 0.0, {}
    states = torch.cat([next_obs[k].float() for k in rnd.config.obs_keys], dim=-1)
    bonus = rnd.bonus(states)
    loss = rnd.train_step(states.reshape(-1, states.shape[-1]))
    return bonus, {"train/curiosity_bonus": float(bonus.mean()), "losses/rnd_loss": loss}

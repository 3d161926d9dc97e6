"""PPO-Lagrangian (constrained MDP; as OmniSafe's PPO-Lag): PPO plus a cost value head and a
Lagrange multiplier that keeps the mean episode cost under ``cost_limit``, with no shield.

The cost of a step is 1 when it breaks a property of ``verification.property_file`` (the state
it reached, or the action taken); with ``cost_margin > 0`` the cost value head also learns a
cost near a state property's boundary (``algos.lagrangian.violation_costs``), while the
multiplier answers to the violations alone. Per update (one rollout):

* cost GAE with the cost value head (trained beside the value head, same clipping rules);
* policy advantage ``(A_r - lambda A_c) / (1 + lambda)`` (then PPO's own normalisation);
* multiplier: ``lambda <- max(0, lambda + lagrange_lr (J_c - cost_limit))``, ``J_c`` the mean
  cost of the episodes that ended in the rollout (unchanged when none did).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import torch

from agentic_rl.algos.hgpo_losses import value_loss
from agentic_rl.algos.lagrangian import (LagrangianConfig, lagrange_step, violation_costs,
                                         with_margin)
from agentic_rl.algos.ppo import PPO, PPOConfig, flat_obs, space_dim
from agentic_rl.algos.spaces import resolve_device
from agentic_rl.data.rollout import Rollout, flatten_time, gae
from agentic_rl.nets.categorical import ValueHead


class PPOLagConfig(PPOConfig, LagrangianConfig):
    """PPO-Lag (``name: ppo_lag``): PPO's keys plus the constraint."""

    name: Literal["ppo_lag"] = "ppo_lag"  # type: ignore[assignment]


def combined_advantage(reward_adv: torch.Tensor, cost_adv: torch.Tensor,
                       lagrange: float) -> torch.Tensor:
    """``(A_r - lambda A_c) / (1 + lambda)``: the Lagrangian's advantage, kept on A_r's scale."""
    return (reward_adv - lagrange * cost_adv) / (1.0 + lagrange)


def finished_episode_costs(costs: torch.Tensor, dones: torch.Tensor,
                           running: torch.Tensor) -> tuple[list[float], torch.Tensor]:
    """Costs ``[T, N]`` summed per episode: the totals of episodes that ended (``dones``), and
    each env's running total after the rollout (``running [N]`` before it)."""
    totals = []
    running = running.clone()
    for t in range(costs.shape[0]):
        running += costs[t]
        ended = dones[t]
        totals += running[ended].tolist()
        running[ended] = 0.0
    return totals, running


class PPOLag(PPO):
    """PPO with a cost value head and a Lagrange multiplier (see the module docstring)."""

    def __init__(self, config: PPOLagConfig, observation_space, action_space, seed: int = 0,
                 device: str = "cpu") -> None:
        super().__init__(config, observation_space, action_space, seed, device)
        self.cost_value = ValueHead(space_dim(observation_space, config.obs_keys),
                                    config.hidden_sizes, config.activation).to(self.device)
        self.optimizer.add_param_group({"params": list(self.cost_value.parameters())})
        self.lagrange = float(config.init_lagrange)
        self.properties: Any = None
        self.episode_cost: torch.Tensor | None = None  # [N] running cost of each env's episode

    @classmethod
    def from_config(cls, config: Any, env: Any) -> "PPOLag":
        from agentic_rl.config import ConfigError
        from agentic_rl.verify.spec import load_properties

        if config.verification.property_file is None:
            raise ConfigError("ppo_lag needs verification.property_file: its properties are "
                              "the constraint (cost 1 per violating step)")
        learner = cls(config.algorithm, env.observation_space, env.action_space,
                      seed=config.training.seed, device=resolve_device(config.training.device))
        learner.properties = load_properties(config.verification.property_file)
        return learner

    def act(self, obs, state, mode="explore"):
        action, state, extras = super().act(obs, state, mode)
        if "value" in extras:  # sampled actions: the rollout keeps the cost value too
            with torch.no_grad():
                x = flat_obs(obs, self.config.obs_keys).to(self.device)
                extras["cost_value"] = self.cost_value(x).cpu()
        return action, state, extras

    def step_costs(self, rollout: Rollout) -> tuple[torch.Tensor, torch.Tensor]:
        """``[T, N]`` twice: 1.0 where the step's reached state or env action broke a property
        (what the multiplier answers to), and the cost the cost value head learns (the same,
        or with ``cost_margin > 0`` also ``1 - d / margin`` near a state property's boundary)."""
        steps, envs = rollout.rewards.shape
        states = rollout.next_obs["observation"].reshape(steps * envs, -1).cpu().numpy()
        actions = self.scaler.to_env(rollout.actions.cpu()).reshape(steps * envs, -1).numpy()
        costs = violation_costs(self.properties, states,
                                actions.squeeze(-1) if self.scaler.discrete else actions)
        margin = self.config.cost_margin
        shaped = with_margin(costs, self.properties, states, margin) if margin > 0 else costs
        return tuple(torch.from_numpy(c.reshape(steps, envs)).to(self.device)
                     for c in (costs, shaped))

    def shape_batch(self, rollout: Rollout, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        cfg = self.config
        costs, shaped = self.step_costs(rollout)
        with torch.no_grad():
            next_cost_values = self.cost_value(flat_obs(rollout.next_obs, cfg.obs_keys))
            cost_adv, cost_returns = gae(shaped, rollout.extras["cost_value"], next_cost_values,
                                         rollout.terminated, rollout.dones, cfg.gamma,
                                         cfg.gae_lambda)
        running = self.episode_cost if self.episode_cost is not None else torch.zeros(
            costs.shape[1], device=self.device)
        totals, self.episode_cost = finished_episode_costs(costs, rollout.dones, running)
        if totals:
            self.lagrange = lagrange_step(self.lagrange, float(np.mean(totals)), cfg.cost_limit,
                                          cfg.lagrange_lr)
        batch["advantage"] = combined_advantage(batch["advantage"], flatten_time(cost_adv),
                                                self.lagrange)
        batch["cost_return"] = flatten_time(cost_returns)
        batch["cost_value"] = flatten_time(rollout.extras["cost_value"])
        return {"safety/cost": float(costs.mean()), "safety/lagrange_multiplier": self.lagrange,
                **({"safety/episode_cost": float(np.mean(totals))} if totals else {})}

    def extra_loss(self, mb: dict[str, torch.Tensor]) -> torch.Tensor:
        """The cost value head's loss, weighted like the value head's."""
        return self.config.vf_coef * value_loss(self.cost_value(mb["x"]), mb["cost_return"],
                                                mb["cost_value"], self.config.value_clip_range)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "cost_value": self.cost_value.state_dict(),
                "lagrange": self.lagrange, "episode_cost": self.episode_cost}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.cost_value.load_state_dict(state["cost_value"])
        self.lagrange, self.episode_cost = float(state["lagrange"]), state["episode_cost"]

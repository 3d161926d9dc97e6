"""SAC-Lagrangian (constrained MDP; as OmniSafe's SAC-Lag): SAC plus a cost critic and a
Lagrange multiplier that keeps the mean episode cost under ``cost_limit``, with no dynamics
model and no shield.

The cost of a transition is 1 when it breaks a property of ``verification.property_file``
(the state it reached, or the action taken), else 0; with ``cost_margin > 0`` the cost
critic's cost is also positive near a state property's boundary
(``algos.lagrangian.violation_costs``): a pointwise upper bound of the violation cost, so the
actor's penalty is conservative, while the multiplier answers to the violations alone. Like
HER's reward, it is computed when a batch is sampled (the replay keeps raw observations), so
demonstrations and relabelled goals get it too. Per update, on the reference (autograd) path:

* cost critic: ``Qc_i(s, a) -> c + gamma (1 - terminated) max_i Qc_i'(s', a')``, ``a' ~ pi``;
* actor: SAC's loss ``+ lambda * mean_b max_i Qc_i(s, pi(s))``;
* multiplier, once per finished training episode (the loop hands each to ``observe``):
  ``lambda <- max(0, lambda + lagrange_lr (C - cost_limit))``, ``C`` the episode's cost (its
  reached states judged against the state properties). Stepping it per episode rather than
  per gradient step keeps it on the scale of the costs it answers to.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

import torch
from pydantic import Field

from agentic_rl.algos.lagrangian import LagrangianConfig, lagrange_step, violation_costs
from agentic_rl.algos.losses import critic_loss
from agentic_rl.algos.sac import SAC
from agentic_rl.algos.sac_config import SACConfig
from agentic_rl.algos.spaces import flat_learner_from_config
from agentic_rl.data.replay_storage import ReplayStorage
from agentic_rl.data.storage import StorageSpec
from agentic_rl.nets.critics import EnsembleQ, frozen_alias


class SACLagConfig(SACConfig, LagrangianConfig):
    """SAC-Lag (``name: sac_lag``): SAC's keys plus the constraint."""

    name: Literal["sac_lag"] = "sac_lag"  # type: ignore[assignment]
    cost_critic_lr: float = Field(1e-3, gt=0)


def cost_q_target(cost: torch.Tensor, terminated: torch.Tensor, next_qc: torch.Tensor,
                  gamma: float) -> torch.Tensor:
    """``c + gamma (1 - terminated) max_i Qc_i(s', a')`` for ``cost, terminated [B]`` and
    ``next_qc [num_q, B]`` (pessimistic: the largest cost estimate)."""
    return cost + gamma * (1.0 - terminated) * next_qc.max(dim=0).values


class SACLag(SAC):
    """SAC with a cost critic and a Lagrange multiplier (see the module docstring).

    Args:
        properties: the ``verify.spec.PropertySet`` whose violations are the cost.
        (the others as :class:`~agentic_rl.algos.sac.SAC`)
    """

    def __init__(self, config: SACLagConfig, spaces: dict[str, Any], device: str = "cpu",
                 clip_obs: float = 5.0, normalize: tuple[bool, bool] = (True, True),
                 properties: Any = None) -> None:
        super().__init__(config, spaces, device, clip_obs, normalize)
        self.properties = properties  # from_config sets them from the property file
        in_dim = spaces["obs_dim"] + spaces["goal_dim"]
        self.cost_critic = EnsembleQ(in_dim, spaces["act_dim"], config.hidden_sizes,
                                     config.num_q).to(self.device)
        self.target_cost_critic = copy.deepcopy(self.cost_critic).requires_grad_(False)
        self.frozen_cost_critic = frozen_alias(self.cost_critic)
        self.cost_optimizer = torch.optim.Adam(self.cost_critic.parameters(),
                                               lr=config.cost_critic_lr)
        self.lagrange = float(config.init_lagrange)

    @classmethod
    def from_config(cls, config: Any, env: Any) -> "SACLag":
        from agentic_rl.config import ConfigError
        from agentic_rl.verify.spec import load_properties

        if config.verification.property_file is None:
            raise ConfigError("sac_lag needs verification.property_file: its properties are "
                              "the constraint (cost 1 per violating step)")
        learner = flat_learner_from_config(cls, config, env)
        learner.properties = load_properties(config.verification.property_file)
        return learner

    def modules(self) -> dict[str, torch.nn.Module]:
        out = super().modules()
        if hasattr(self, "cost_critic"):  # SAC.__init__ asks before the cost critic exists
            out |= {"cost_critic": self.cost_critic, "target_cost_critic": self.target_cost_critic}
        return out

    def make_storage(self, spec: StorageSpec) -> ReplayStorage:
        storage = super().make_storage(spec)
        storage.cost_fn = self.step_cost
        return storage

    def observe(self, obs: dict[str, torch.Tensor]) -> None:
        """Normaliser statistics, and the multiplier's step on the episode's cost."""
        super().observe(obs)
        if self.properties is not None:
            cost = violation_costs(self.properties, obs["observation"][1:].cpu().numpy()).sum()
            self.lagrange = lagrange_step(self.lagrange, float(cost), self.config.cost_limit,
                                          self.config.lagrange_lr)

    def step_cost(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """``[B]`` 1.0 where the transition broke a property (reached state or env action)."""
        if self.properties is None:
            raise ValueError("SACLag has no properties to compute a cost from")
        return torch.from_numpy(violation_costs(
            self.properties, batch["next_obs"].cpu().numpy(),
            self.unit_to_env(batch["action"]).cpu().numpy(), self.config.cost_margin))

    def autograd_gradients(self, batch, x, next_x, alpha):
        """SAC's losses with the Lagrangian actor term, and the cost critic's step."""
        with torch.no_grad():
            next_action, _, _, _ = self.actor.sample(next_x, self.generator)
            target = cost_q_target(batch["cost"], batch["terminated"],
                                   self.target_cost_critic(next_x, next_action), self.config.gamma)
        self.cost_optimizer.zero_grad(set_to_none=True)
        cost_loss = critic_loss(self.cost_critic(x, batch["action"]), target,
                                batch.get("weight"))
        metrics = super().autograd_gradients(batch, x, next_x, alpha)  # backward of SAC's part
        cost_loss.backward()
        self.cost_optimizer.step()
        with torch.no_grad():  # the target's Polyak step, as SAC's (one fused lerp)
            torch._foreach_lerp_(list(self.target_cost_critic.parameters()),
                                 list(self.cost_critic.parameters()), self.config.tau)
        return {**metrics, "losses/cost_critic_loss": cost_loss.detach(),
                "safety/cost_q_pi": self._cost_pi, "safety/lagrange_multiplier":
                torch.tensor(self.lagrange), "safety/batch_cost": batch["cost"].mean()}

    def actor_loss(self, q_pi, log_prob, alpha, batch):
        """SAC's actor loss ``+ lambda * mean_b max_i Qc_i(s, pi(s))`` (the cost term on an
        independent sample of ``pi(s)``: SAC's hook hands over Q, not the action)."""
        loss, metrics = super().actor_loss(q_pi, log_prob, alpha, batch)
        x = self.policy_input(batch["obs"], batch.get("desired_goal"))
        action, _, _, _ = self.actor.sample(x, self.generator)
        cost_pi = self.frozen_cost_critic(x, action).max(dim=0).values.mean()
        self._cost_pi = cost_pi.detach()
        total = loss + self.lagrange * cost_pi
        return total, {**metrics, "losses/actor_total_loss": total.detach()}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {**super().optimizers(), "cost_optimizer": self.cost_optimizer}

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "lagrange": self.lagrange}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.lagrange = float(state["lagrange"])

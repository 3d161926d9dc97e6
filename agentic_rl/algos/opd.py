"""Off-Policy Distillation (SPEC A3): SAC plus a distillation term on a prototype batch.

actor loss = SAC actor loss + opd_alpha(t) * distill(pi, prototypes), with distill the MSE
between the deterministic action and the prototype action, or the prototype action's negative
log-likelihood; an optional Q-filter keeps only prototypes the critic rates above the policy.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from pydantic import Field, field_validator

from agentic_rl.algos import losses
from agentic_rl.algos.sac import SAC, Batch, SACConfig
from agentic_rl.algos.sac_config import PrototypeBufferConfig
from agentic_rl.algos.schedule import Scheduled, non_negative, value_at


class OPDConfig(SACConfig, PrototypeBufferConfig):
    """SAC's hyper-parameters plus the prototype buffers and the distillation term's."""

    name: Literal["opd"] = "opd"  # type: ignore[assignment]
    opd_alpha: Scheduled = Field(0.2, description="distillation weight (per update)")
    distill_loss: Literal["mse", "nll"] = "mse"
    q_filter: bool = False
    prototype_batch_size: int = Field(256, ge=1)

    @field_validator("opd_alpha")
    @classmethod
    def _non_negative(cls, value: Scheduled) -> Scheduled:
        return non_negative(value, "opd_alpha")


class OPD(SAC):
    """SAC whose ``actor_loss`` adds ``opd_alpha * distill`` on ``batch["prototype"]``."""

    config: OPDConfig

    def opd_alpha(self) -> float:
        return value_at(self.config.opd_alpha, self.num_updates)

    def distill_batch_size(self) -> int:
        return self.config.prototype_batch_size

    # ----------------------------------------------------------- hand-written gradients
    def manual_gradients_for(self, batch: Batch) -> bool:
        """``sac_grads`` covers the MSE distillation term without the Q-filter."""
        return self.config.distill_loss == "mse" and not self.config.q_filter

    def distill_term(self, batch: Batch) -> tuple[Batch, float] | None:
        prototype = batch.get("prototype")
        return None if prototype is None else (prototype, self.opd_alpha())

    def manual_update_metrics(self, values: dict[str, Any]) -> dict[str, Any]:
        metrics = super().manual_update_metrics(values)
        metrics["losses/actor_distill_loss"] = values.get("actor_distill_loss", 0.0)
        metrics["train/opd_alpha"] = self.opd_alpha()
        return metrics

    def actor_loss(self, q_pi: torch.Tensor, log_prob: torch.Tensor, alpha: torch.Tensor,
                   batch: Batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        sac_loss = losses.sac_actor_loss(q_pi, log_prob, alpha)
        prototype = batch.get("prototype")
        if prototype is None:  # no prototypes yet (e.g. a skill whose buffer is still empty)
            zero = torch.zeros((), device=sac_loss.device)
            return sac_loss, {"losses/actor_sac_loss": sac_loss.detach(),
                              "losses/actor_distill_loss": zero, "losses/actor_total_loss":
                              sac_loss.detach(), "train/opd_alpha": zero + self.opd_alpha()}
        x = self.policy_input(prototype["obs"], prototype.get("desired_goal"))
        proto_action = prototype["action"]
        policy_action = self.actor.deterministic(x) if (
            self.config.distill_loss == "mse" or self.config.q_filter) else None
        mask = None
        if self.config.q_filter:
            with torch.no_grad():  # one critic pass over both action sets
                q = self.critic(torch.cat([x, x]), torch.cat([proto_action,
                                                              policy_action.detach()]))
                mask = losses.q_filter_mask(q[:, : x.shape[0]], q[:, x.shape[0]:])
        if self.config.distill_loss == "mse":
            distill = losses.distill_mse_loss(policy_action, proto_action, mask)
        else:
            distill = losses.distill_nll_loss(self.actor.log_prob(x, proto_action), mask)
        weight = self.opd_alpha()
        total = sac_loss + weight * distill
        metrics = {"losses/actor_sac_loss": sac_loss.detach(),
                   "losses/actor_distill_loss": distill.detach(),
                   "losses/actor_total_loss": total.detach(),
                   "train/opd_alpha": torch.tensor(weight)}
        if mask is not None:
            metrics["train/q_filter_fraction"] = mask.mean()
        return total, metrics

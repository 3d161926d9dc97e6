"""Run-time safety in the loops: a monitor on every step and an optional shield (SPEC V2, V3).

Built from ``config.verification``; the shield uses the one-step model the environment declares
(Fetch position control) and otherwise only clips to the declared action bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from agentic_rl.verify.monitor import SafetyMonitor
from agentic_rl.verify.shield import ContinuousShield
from agentic_rl.verify.spec import load_properties
from agentic_rl.verify.step_model import declared_step_model


@dataclass
class Safety:
    """The monitor, and the shields for training and evaluation (None when off)."""

    monitor: SafetyMonitor
    eval_monitor: SafetyMonitor
    train_shield: ContinuousShield | None
    eval_shield: ContinuousShield | None

    def shielded(self, shield: ContinuousShield | None, obs: dict[str, torch.Tensor],
                 env_action: torch.Tensor) -> torch.Tensor:
        """``env_action [N, m]`` projected by ``shield`` (unchanged without one)."""
        if shield is None:
            return env_action
        safe = shield.project(obs["observation"].numpy(), env_action.numpy())
        return torch.as_tensor(safe, dtype=env_action.dtype)

    def metrics(self) -> dict[str, float]:
        out = dict(self.monitor.metrics())
        out |= {k.replace("safety/", "safety/eval_"): v for k, v in self.eval_monitor.metrics().items()}
        for prefix, shield in (("", self.train_shield), ("eval_", self.eval_shield)):
            if shield is not None:
                out |= {k.replace("safety/", f"safety/{prefix}"): v
                        for k, v in shield.metrics().items()}
        return out

    def summary(self) -> dict[str, object]:
        out = {"train": self.monitor.summary(), "eval": self.eval_monitor.summary()}
        for name, shield in (("train_shield", self.train_shield),
                             ("eval_shield", self.eval_shield)):
            if shield is not None:
                out[name] = {"interventions": shield.interventions, "steps": shield.steps,
                             "infeasible": shield.infeasible}
        return out


def build_safety(config, env) -> Safety | None:
    """``Safety`` for ``config.verification`` (None without a property file)."""
    settings = config.verification
    if settings.property_file is None:
        return None
    properties = load_properties(settings.property_file)
    state_dim = int(np.prod(env.observation_space["observation"].shape))
    action_dim = int(np.prod(env.action_space.shape))
    model = declared_step_model(config.environment.name, state_dim, action_dim)

    def shield() -> ContinuousShield:
        return ContinuousShield(properties, model, env.action_space.low, env.action_space.high,
                                margin=settings.shield_margin)

    return Safety(SafetyMonitor(properties), SafetyMonitor(properties),
                  shield() if settings.shield_train else None,
                  shield() if settings.shield_eval else None)

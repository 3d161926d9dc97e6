"""Run-time safety in the loops: a monitor on every step and an optional shield (SPEC V2, V3).

Built from ``config.verification``. Continuous actions (off-policy loop): the shield uses the
one-step model the environment declares (Fetch position control) and otherwise only clips to
the declared action bounds. Discrete actions (on-policy loop): ``SafeVectorEnv`` masks
forbidden actions (and, in grid worlds, moves into forbidden cells) before sampling.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from agentic_rl.train.onpolicy import true_next_obs
from agentic_rl.verify.finite import grid_states_from_obs, gridworld_system, safe_action_mask
from agentic_rl.verify.monitor import SafetyMonitor
from agentic_rl.verify.shield import ContinuousShield, DiscreteShield
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


class SafeVectorEnv(gym.vector.VectorWrapper):
    """Monitor and (optionally) shield a discrete-action vector env for the on-policy loop.

    Every step is checked by ``monitor`` on the observation it reached (the final observation
    for episodes that ended). With a shield, ``info["action_mask"]`` (which the on-policy loop
    feeds to the policy before sampling) is intersected with the shield's mask: statically
    forbidden actions, and for grid worlds every move whose next cell breaks a state property.
    An intervention is an env step at which the shield removed an otherwise available action.
    """

    def __init__(self, env, properties, monitor: SafetyMonitor, shield: bool) -> None:
        super().__init__(env)
        self.monitor, self.shielded = monitor, shield
        self.static = DiscreteShield(properties)
        self.grid = None
        core = getattr(env, "core", None)
        if shield and core is not None and any(
                p.kind in ("state_box", "state_halfspace", "forbidden_box")
                for p in properties.properties):
            self.grid = (core, gridworld_system(core, properties))
        self.interventions = 0
        self.episode_step = np.zeros(env.num_envs, dtype=np.int64)

    def _mask(self, obs: dict, info: dict) -> dict:
        if not self.shielded:
            return info
        n_actions = int(self.env.single_action_space.n)
        base = info.get("action_mask", obs.get("action_mask") if isinstance(obs, dict) else None)
        base = (np.ones((self.num_envs, n_actions), bool) if base is None
                else np.asarray(base).astype(bool))
        mask = base & self.static.action_mask(n_actions)[None]
        for env, commands in enumerate(info.get("admissible_commands", [])):
            if commands is not None and len(commands):  # text actions: regex on each command
                allowed = self.static.command_mask(list(commands)[:n_actions])
                mask[env, : len(allowed)] &= allowed
        if self.grid is not None:
            core, system = self.grid
            mask &= safe_action_mask(system, grid_states_from_obs(core, obs["observation"]))
        mask[~mask.any(1)] = base[~mask.any(1)]  # nothing safe: leave the env's own choices
        self.interventions += int((mask != base).any(1).sum())
        return {**info, "action_mask": mask}

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.episode_step[:] = 0
        return obs, self._mask(obs, info)

    def step(self, actions):
        obs, reward, terminated, truncated, info = self.env.step(actions)
        done = np.logical_or(terminated, truncated)
        reached = true_next_obs(obs, info, done)
        self.monitor.check(reached["observation"], np.asarray(actions), self.episode_step)
        self.episode_step = np.where(done, 0, self.episode_step + 1)
        return obs, reward, terminated, truncated, self._mask(obs, info)

    def metrics(self, prefix: str = "") -> dict[str, float]:
        out = {k.replace("safety/", f"safety/{prefix}"): v
               for k, v in self.monitor.metrics().items()}
        if self.shielded:
            out[f"safety/{prefix}shield_interventions"] = float(self.interventions)
        return out


def wrap_onpolicy_safety(config, envs, eval_env):
    """``(envs, eval_env)`` wrapped per ``config.verification`` (unchanged without a file)."""
    settings = config.verification
    if settings.property_file is None:
        return envs, eval_env
    properties = load_properties(settings.property_file)
    if not isinstance(envs.single_action_space, gym.spaces.Discrete):
        raise ValueError("the on-policy safety wrapper handles discrete actions; continuous "
                         "actions are shielded in the off-policy loop")
    return (SafeVectorEnv(envs, properties, SafetyMonitor(properties), settings.shield_train),
            SafeVectorEnv(eval_env, properties, SafetyMonitor(properties), settings.shield_eval))

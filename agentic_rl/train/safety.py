"""Run-time safety in the loop: a monitor on every step and an optional shield (SPEC V2, V3).

Built from ``config.verification``, for every learner of the loop. A shield acts on both sides
of ``algo.act``: ``restrict`` narrows the observation before the policy chooses and ``project``
replaces the chosen action after. Continuous actions: ``ProjectionShield`` projects through the
one-step model the environment declares (Fetch position control), or only clips to the
declared action bounds. Discrete actions: ``MaskShield`` narrows ``obs["action_mask"]`` to the
allowed actions (and, in grid worlds, to moves whose next cell breaks no state property), so an
on-policy learner samples, and learns from, only what may run. Text agents: ``CommandShield``
narrows it to the admissible commands no ``forbidden_commands`` pattern matches, and the monitor
judges the command texts. ``ViolationReset`` (``verification.reset_on_violation``) ends a
training episode at its first violating step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import torch

from agentic_rl.verify.finite import grid_states_from_obs, gridworld_system, safe_action_mask
from agentic_rl.verify.monitor import SafetyMonitor, within_horizons
from agentic_rl.verify.shield import ContinuousShield, DiscreteShield
from agentic_rl.verify.spec import PropertySet, load_properties
from agentic_rl.verify.step_model import declared_step_model

Obs = dict[str, torch.Tensor]


class ProjectionShield:
    """Continuous actions: ``project`` each ``[N, m]`` action onto the safe set."""

    def __init__(self, shield: ContinuousShield) -> None:
        self.shield = shield

    def restrict(self, obs: Obs) -> Obs:
        return obs

    def project(self, obs: Obs, env_action: torch.Tensor) -> torch.Tensor:
        safe = self.shield.project(obs["observation"].numpy(), env_action.numpy())
        return torch.as_tensor(safe, dtype=env_action.dtype)

    def metrics(self) -> dict[str, float]:
        return self.shield.metrics()

    def summary(self) -> dict[str, int]:
        return {"interventions": self.shield.interventions, "steps": self.shield.steps,
                "infeasible": self.shield.infeasible}


class MaskShield:
    """Discrete actions: ``restrict`` intersects ``obs["action_mask"] [N, A]`` with the allowed
    actions. An intervention is a step at which an otherwise available action was removed.

    Args:
        properties: the property set.
        n_actions: the size of the ``Discrete`` action space.
        core: a grid world's ``GridCore`` to mask moves into forbidden cells (None: static
            ``forbidden_actions`` only).
    """

    def __init__(self, properties: PropertySet, n_actions: int, core: Any = None) -> None:
        self.n_actions, self.core = n_actions, core
        self.static = DiscreteShield(properties).action_mask(n_actions)
        self.system = gridworld_system(core, properties) if core is not None else None
        self.interventions = self.steps = 0

    def restrict(self, obs: Obs) -> Obs:
        n = obs["observation"].shape[0]
        base = obs["action_mask"].numpy() if "action_mask" in obs \
            else np.ones((n, self.n_actions), bool)
        mask = base & self.static[None]
        if self.system is not None:
            states = grid_states_from_obs(self.core, obs["observation"].numpy())
            mask &= safe_action_mask(self.system, states)
        mask[~mask.any(1)] = base[~mask.any(1)]  # nothing safe: leave the env's own choices
        self.interventions += int((mask != base).any(1).sum())
        self.steps += n
        return {**obs, "action_mask": torch.from_numpy(mask)}

    def project(self, obs: Obs, env_action: torch.Tensor) -> torch.Tensor:
        return env_action

    def metrics(self) -> dict[str, float]:
        return {"safety/shield_interventions": float(self.interventions),
                "safety/shield_intervention_rate": self.interventions / max(self.steps, 1)}

    def summary(self) -> dict[str, int]:
        return {"interventions": self.interventions, "steps": self.steps}


class CommandShield:
    """Text commands: ``restrict`` removes from ``obs["action_mask"] [N, W]`` the command slots
    (``obs["commands"]``: text-table row ids) whose text a ``forbidden_commands`` pattern
    matches; each row id is judged once."""

    def __init__(self, properties: PropertySet, table: Any) -> None:
        self.shield, self.table = DiscreteShield(properties), table
        self.allowed: dict[int, bool] = {0: True}
        self.interventions = self.steps = 0

    def restrict(self, obs: Obs) -> Obs:
        ids = obs["commands"].numpy()
        for row in np.unique(ids):
            if int(row) not in self.allowed:
                self.allowed[int(row)] = bool(self.shield.command_mask([self.table.texts[row]])[0])
        allowed = np.vectorize(self.allowed.__getitem__, otypes=[bool])(ids)
        base = obs["action_mask"].numpy()
        mask = base & allowed
        mask[~mask.any(1)] = base[~mask.any(1)]  # nothing safe: leave the env's own choices
        self.interventions += int((mask != base).any(1).sum())
        self.steps += len(ids)
        return {**obs, "action_mask": torch.from_numpy(mask)}

    project, metrics, summary = MaskShield.project, MaskShield.metrics, MaskShield.summary


def command_names(table: Any):
    """``(inputs, command indices [N]) -> the command texts`` (``table``: the text table the
    row ids index), for the monitor."""
    def names(inputs: Obs, action: np.ndarray) -> list[str]:
        rows = inputs["commands"].numpy()[np.arange(len(action)), np.asarray(action).reshape(-1)]
        return [table.texts[int(row)] for row in rows]
    return names


Shield = ProjectionShield | MaskShield | CommandShield


class ViolationReset(gym.Wrapper):
    """Ends an episode at its first step that breaks a property (``verification.
    reset_on_violation``, training envs only), as OmniSafe's early-terminated adapter with a
    cost limit of 0. The step comes back *truncated* with ``info["violation_reset"]``, its
    reward unchanged: OmniSafe ends it as terminated with reward 0, which under a reward of -1
    per step (Fetch, mazes) would make breaking a property the quickest way out; truncated,
    the learners bootstrap from the state reached as at a time limit, so only which states are
    visited changes, not what any of them is worth. The constraint stays the cost's job.

    Args:
        env: a goal env (the state properties judge ``obs["observation"]``).
        properties: the ``verify.spec.PropertySet``; a property with a horizon H only counts
            at episode steps ``< H``, as in the monitor.
    """

    def __init__(self, env: gym.Env, properties: PropertySet) -> None:
        super().__init__(env)
        self.properties = properties
        self.episode_step = 0

    def reset(self, **kwargs: Any):
        self.episode_step = 0
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        masks = self.properties.violations(np.asarray(obs["observation"])[None],
                                           np.asarray(action)[None])
        broke = any(mask[0] for mask in within_horizons(
            self.properties, masks, np.array([self.episode_step])).values())
        self.episode_step += 1
        if broke and not terminated:
            truncated, info = True, {**info, "violation_reset": True}
        return obs, reward, terminated, truncated, info


def violation_reset(config) -> Callable[[gym.Env], gym.Env] | None:
    """The wrapper ``build_envs`` puts on each training env (None unless
    ``verification.reset_on_violation``)."""
    if not config.verification.reset_on_violation:
        return None
    properties = load_properties(config.verification.property_file)
    return lambda env: ViolationReset(env, properties)


@dataclass
class Safety:
    """The monitor, and the shields for training and evaluation (None when off)."""

    monitor: SafetyMonitor
    eval_monitor: SafetyMonitor
    train_shield: Shield | None
    eval_shield: Shield | None

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
                out[name] = shield.summary()
        return out


def build_safety(config, env: gym.Env) -> Safety | None:
    """``Safety`` for ``config.verification`` (None without a property file); ``env`` is a
    single env of the run (its spaces choose the shield kind)."""
    settings = config.verification
    if settings.property_file is None:
        return None
    properties = load_properties(settings.property_file)
    table = getattr(env, "table", None)  # text envs: commands are text-table row ids
    names = command_names(table) if table is not None else None

    def shield() -> Shield:
        if table is not None:
            return CommandShield(properties, table)
        if isinstance(env.action_space, gym.spaces.Discrete):
            state_kinds = ("state_box", "state_halfspace", "forbidden_box")
            core = getattr(env.unwrapped, "core", None)
            use_core = core is not None and any(p.kind in state_kinds
                                                for p in properties.properties)
            return MaskShield(properties, int(env.action_space.n), core if use_core else None)
        state_dim = int(np.prod(env.observation_space["observation"].shape))
        action_dim = int(np.prod(env.action_space.shape))
        model = declared_step_model(config.environment.name, state_dim, action_dim,
                                    dict(config.environment.kwargs))
        return ProjectionShield(ContinuousShield(
            properties, model, env.action_space.low, env.action_space.high,
            margin=settings.shield_margin))

    return Safety(SafetyMonitor(properties, names), SafetyMonitor(properties, names),
                  shield() if settings.shield_train else None,
                  shield() if settings.shield_eval else None)

"""Run-time safety monitor (capability V2): checks every property on every step.

Pure numpy bookkeeping; the training / evaluation loop logs ``metrics()`` under ``safety/`` and
writes ``summary()`` into ``summary.json``.
"""

from __future__ import annotations

import numpy as np

from agentic_rl.verify.spec import PropertySet


def within_horizons(properties: PropertySet, masks: dict[str, np.ndarray],
                    episode_step: np.ndarray | None) -> dict[str, np.ndarray]:
    """``masks`` (``{name: violation mask [N]}``) with each property's violations at episode
    steps ``>= `` its horizon (its own or the file's) dropped; ``episode_step [N]``."""
    batch = len(next(iter(masks.values())))
    for prop in properties.properties:
        horizon = properties.horizon_of(prop)
        if horizon is None:
            continue
        if episode_step is None:
            raise ValueError(f"property {prop.name!r} has horizon {horizon}: pass episode_step")
        steps = np.asarray(episode_step).reshape(-1)
        if steps.shape[0] != batch:
            raise ValueError(f"episode_step has {steps.shape[0]} entries for {batch} envs")
        masks[prop.name] = masks[prop.name] & (steps < horizon)
    return masks


class SafetyMonitor:
    """Counts property violations over batches of env steps.

    ``safety/violations`` is the number of (env step, property) violations;
    ``safety/violation_rate`` is the fraction of env steps with at least one violation.
    A property with a horizon H (its own or the file's) only counts at episode steps ``< H``.
    """

    def __init__(self, properties: PropertySet, action_names=None) -> None:
        self.properties = properties
        # (inputs the action was chosen from, actions [N]) -> what the properties judge, e.g.
        # the command texts of a text agent's command indices
        self.action_names = action_names
        self.counts = {name: 0 for name in properties.names}
        self.steps = 0
        self.violating_steps = 0

    def check(self, obs: np.ndarray | None, action: np.ndarray | list[str] | None,
              episode_step: np.ndarray | None = None, inputs=None) -> dict[str, np.ndarray]:
        """Check one step of N envs.

        Args:
            obs: flat observations ``[N, obs_dim]`` to check against the state properties
                (None if none is declared). Pass the observation *reached* by the step
                (``next_obs["observation"]``) so every visited state is checked.
            action: the action executed, ``[N, act_dim]``, ``[N]`` ints or ``[N]`` strings.
            episode_step: ``[N]`` step index within each env's episode; required when a property
                has a horizon.
            inputs: the observation the action was chosen from, for ``action_names``.

        Returns:
            ``{name: violation mask [N]}`` (after the horizon filter).
        """
        if self.action_names is not None and inputs is not None:
            action = self.action_names(inputs, action)
        masks = within_horizons(self.properties, self.properties.violations(obs, action),
                                episode_step)
        batch = len(next(iter(masks.values())))
        for name, mask in masks.items():
            if mask.shape[0] != batch:
                raise ValueError(f"property {name!r} got {mask.shape[0]} rows, others {batch}; "
                                 "obs and action must have the same batch size")
            self.counts[name] += int(mask.sum())
        self.steps += batch
        self.violating_steps += int(np.any(list(masks.values()), axis=0).sum())
        return masks

    @property
    def total_violations(self) -> int:
        """Sum of violations over all properties."""
        return sum(self.counts.values())

    def metrics(self) -> dict[str, float]:
        """Scalars for the logger: totals plus ``safety/violations/<name>`` per property."""
        out = {"safety/violations": float(self.total_violations),
               "safety/violation_rate": self.violating_steps / max(self.steps, 1)}
        out.update({f"safety/violations/{name}": float(c) for name, c in self.counts.items()})
        return out

    def summary(self) -> dict[str, object]:
        """JSON-ready totals and per-property counts for ``summary.json``."""
        return {"steps": self.steps, "violations": self.total_violations,
                "violating_steps": self.violating_steps,
                "violation_rate": self.violating_steps / max(self.steps, 1),
                "per_property": dict(self.counts)}

    def reset(self) -> None:
        """Zero every counter (e.g. between evaluation rounds)."""
        self.counts = {name: 0 for name in self.counts}
        self.steps = self.violating_steps = 0

"""Run-time shields that enforce safety properties (capability V3).

``ContinuousShield.project(obs, action)`` returns, for each env, the action closest in L2 to the
proposed one whose *predicted* next state (through the environment's affine one-step model)
satisfies every state invariant of the property set, within the declared action bounds:

* Each invariant becomes linear constraints ``G a <= h(obs)`` in action space, projected onto
  exactly by ``projection.project``: rows touching a single action entry (boxes under
  FetchReach's diagonal model) tighten the action box, so the projection is a clip (closed
  form); general half-spaces are solved exactly by active-set enumeration (KKT), or by
  Dykstra's alternating projections for large constraint sets.
* A forbidden box is non-convex; its complement is the union of 2 * dim "outside this face"
  half-spaces. Envs whose convex projection enters one try every face (every combination for
  several boxes) and keep the closest feasible action.
* When no action can satisfy a constraint (the state is already outside and the action bounds
  cannot bring it back), the action moving furthest towards it is used and ``infeasible`` counts it.

Without a model the shield only clips to the action bounds. ``DiscreteShield`` masks forbidden
discrete actions / command strings before sampling.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

import numpy as np
import torch

from agentic_rl.verify.projection import project
from agentic_rl.verify.spec import (
    ActionBox, ForbiddenActions, ForbiddenBox, ForbiddenCommands, PropertySet, StateBox,
    StateHalfspace,
)
from agentic_rl.verify.step_model import AffineStepModel

_MAX_FACE_COMBINATIONS = 64


class ContinuousShield:
    """Projects continuous actions onto the set whose one-step prediction is safe.

    Args:
        properties: the property set; its state invariants and action boxes are enforced.
        model: affine one-step model over the flat observation, or None (clip only).
        action_low, action_high: extra action bounds ``[m]`` (intersected with action boxes).
        margin: shrink boxes / half-spaces (grow forbidden boxes) by this much, to absorb the
            model's error.
        iterations: most Dykstra sweeps, used only for large sets of general half-spaces (stops
            early once converged; thin feasible sets can need thousands).
    """

    def __init__(self, properties: PropertySet, model: AffineStepModel | None = None,
                 action_low: Sequence[float] | None = None,
                 action_high: Sequence[float] | None = None,
                 margin: float = 0.0, iterations: int = 5000) -> None:
        self.model, self.margin, self.iterations = model, float(margin), iterations
        self.interventions = self.steps = self.infeasible = 0
        self.low, self.high = _action_bounds(properties, action_low, action_high)
        rows: list[tuple[np.ndarray, np.ndarray, float]] = []
        self.forbidden: list[list[tuple[np.ndarray, np.ndarray, float]]] = []
        for prop in properties.properties:
            if not isinstance(prop, (StateBox, StateHalfspace, ForbiddenBox)) or model is None:
                continue
            start, stop = properties.parts[prop.part]
            s_rows, a_rows, offs = _model_rows(model, prop.name, range(start, stop))
            if isinstance(prop, StateBox):
                high, low = np.asarray(prop.high) - margin, np.asarray(prop.low) + margin
                rows += [(s_rows[j], a_rows[j], high[j] - offs[j]) for j in range(len(offs))]
                rows += [(-s_rows[j], -a_rows[j], offs[j] - low[j]) for j in range(len(offs))]
            elif isinstance(prop, StateHalfspace):
                w = np.asarray(prop.a)
                rows.append((w @ s_rows, w @ a_rows, prop.b - margin * np.linalg.norm(w) - w @ offs))
            else:
                self.forbidden.append(_face_rows(prop, s_rows, a_rows, offs, margin))
        if np.prod([len(f) for f in self.forbidden]) > _MAX_FACE_COMBINATIONS:
            raise ValueError("too many forbidden boxes for the shield (face combinations > 64); "
                             "merge or drop forbidden_box properties")
        self.rows = rows

    def project(self, obs: np.ndarray | None, action: np.ndarray) -> np.ndarray:
        """Safe actions ``[N, m]`` for observations ``[N, n]`` and proposed actions ``[N, m]``."""
        proposed = np.atleast_2d(np.asarray(action, dtype=float))
        if self.low.shape[0] not in (0, proposed.shape[1]):
            raise ValueError(f"actions have {proposed.shape[1]} entries, bounds {self.low.shape[0]}")
        low = self.low if self.low.size else np.full(proposed.shape[1], -np.inf)
        high = self.high if self.high.size else np.full(proposed.shape[1], np.inf)
        if self.rows or self.forbidden:
            obs = None if obs is None else np.atleast_2d(np.asarray(obs, float))
            if obs is None or obs.shape != (proposed.shape[0], self.model.state_dim):
                raise ValueError(f"the shield's one-step model needs observations "
                                 f"[{proposed.shape[0]}, {self.model.state_dim}] (the flat "
                                 f"obs['observation']), got {None if obs is None else obs.shape}")
            safe = self._project_state(obs, proposed, low, high)
        else:
            safe = np.clip(proposed, low, high)
        changed = np.abs(safe - proposed).max(axis=1) > 1e-12
        self.interventions += int(changed.sum())
        self.steps += proposed.shape[0]
        return safe

    def _project_state(self, obs: np.ndarray, proposed: np.ndarray, low: np.ndarray,
                       high: np.ndarray) -> np.ndarray:
        base = self._stack(self.rows, obs, proposed.shape[1])
        safe, ok = project(proposed, *base, low, high, self.iterations)
        if self.forbidden:
            inside = ~_satisfies_any_face(self.forbidden, obs, safe)
            best = safe[inside].copy()
            best_dist = np.full(inside.sum(), np.inf)
            ok_best = np.zeros(inside.sum(), bool)
            for combo in itertools.product(*self.forbidden):
                g, h = self._stack(self.rows + list(combo), obs[inside], proposed.shape[1])
                cand, cand_ok = project(proposed[inside], g, h, low, high, self.iterations)
                dist = np.linalg.norm(cand - proposed[inside], axis=1)
                take = (cand_ok & ~ok_best) | ((cand_ok == ok_best) & (dist < best_dist))
                best[take], best_dist[take], ok_best[take] = cand[take], dist[take], cand_ok[take]
            safe[inside], ok[inside] = best, ok_best
        self.infeasible += int((~ok).sum())
        return safe

    @staticmethod
    def _stack(rows, obs: np.ndarray, act_dim: int) -> tuple[np.ndarray, np.ndarray]:
        if not rows:
            return np.zeros((0, act_dim)), np.zeros((obs.shape[0], 0))
        g = np.stack([r[1] for r in rows])
        h = np.stack([r[2] - obs @ r[0] for r in rows], axis=1)
        return g, h

    def metrics(self) -> dict[str, float]:
        """``safety/shield_interventions`` (count), ``safety/shield_intervention_rate`` and
        ``safety/shield_infeasible`` (steps where no action could satisfy every constraint)."""
        return {"safety/shield_interventions": float(self.interventions),
                "safety/shield_intervention_rate": self.interventions / max(self.steps, 1),
                "safety/shield_infeasible": float(self.infeasible)}


def _action_bounds(properties: PropertySet, low, high) -> tuple[np.ndarray, np.ndarray]:
    boxes = [(np.asarray(p.low, float), np.asarray(p.high, float))
             for p in properties.properties if isinstance(p, ActionBox)]
    if low is not None or high is not None:
        if low is None or high is None:
            raise ValueError("give both action_low and action_high, or neither")
        boxes.append((np.asarray(low, float), np.asarray(high, float)))
    if not boxes:
        return np.zeros(0), np.zeros(0)
    if len({b[0].shape for b in boxes}) != 1:
        raise ValueError("action bounds of different lengths; fix the action_box properties")
    return np.max([b[0] for b in boxes], axis=0), np.min([b[1] for b in boxes], axis=0)


def _model_rows(model: AffineStepModel, name: str, entries: range):
    position = {int(i): k for k, i in enumerate(model.indices)}
    missing = [i for i in entries if i not in position]
    if missing:
        raise ValueError(f"property {name!r} constrains obs entries {missing} that the one-step "
                         "model does not predict; use a model that predicts them or no model")
    pick = [position[i] for i in entries]
    return model.state_matrix[pick], model.action_matrix[pick], model.offset[pick]


def _face_rows(prop: ForbiddenBox, s_rows, a_rows, offs, margin: float):
    """The 2 * dim half-spaces "strictly outside one face" of a forbidden box."""
    eps = 1e-9
    faces = []
    for j in range(len(offs)):
        faces.append((s_rows[j], a_rows[j], prop.low[j] - margin - eps - offs[j]))
        faces.append((-s_rows[j], -a_rows[j], offs[j] - prop.high[j] - margin - eps))
    return faces


def _satisfies_any_face(forbidden, obs: np.ndarray, action: np.ndarray) -> np.ndarray:
    """``[N]``: outside every forbidden box (some face half-space holds for each box)."""
    ok = np.ones(obs.shape[0], bool)
    for faces in forbidden:
        holds = [obs @ s + action @ a <= r + 1e-9 for s, a, r in faces]
        ok &= np.any(holds, axis=0)
    return ok


class DiscreteShield:
    """Masks forbidden discrete actions and command strings before sampling.

    ``interventions`` counts the steps where the policy's preferred (unmasked) choice was
    forbidden and the shield changed it.
    """

    def __init__(self, properties: PropertySet) -> None:
        self.forbidden = sorted({a for p in properties.properties
                                 if isinstance(p, ForbiddenActions) for a in p.actions})
        self.patterns = [re.compile(pat) for p in properties.properties
                         if isinstance(p, ForbiddenCommands) for pat in p.patterns]
        self.interventions = self.steps = 0

    def action_mask(self, n_actions: int) -> np.ndarray:
        """Allowed actions ``[n_actions]`` (bool)."""
        mask = np.ones(n_actions, bool)
        mask[[a for a in self.forbidden if 0 <= a < n_actions]] = False
        if not mask.any():
            raise ValueError(f"every one of the {n_actions} actions is forbidden; fix the properties")
        return mask

    def command_mask(self, commands: Sequence[str]) -> np.ndarray:
        """Allowed commands ``[len(commands)]`` (bool); a command is forbidden if a regex matches."""
        return np.array([not any(p.search(c) for p in self.patterns) for c in commands], bool)

    def mask_logits(self, logits: torch.Tensor, allowed: torch.Tensor | None = None) -> torch.Tensor:
        """Set forbidden entries of ``logits [N, n]`` to -inf; counts changed greedy choices.

        ``allowed [N, n]`` (optional) is an extra mask, e.g. from ``command_mask`` per env.
        """
        mask = torch.as_tensor(self.action_mask(logits.shape[-1]), device=logits.device)
        mask = mask.expand_as(logits) if allowed is None else mask & allowed.to(logits.device)
        if not mask.any(-1).all():
            raise ValueError("an env has no allowed action left after masking")
        greedy = logits.argmax(-1, keepdim=True)
        self.interventions += int((~mask.gather(-1, greedy)).sum())
        self.steps += logits.shape[0]
        return logits.masked_fill(~mask, float("-inf"))

    def filter_actions(self, actions: np.ndarray, scores: np.ndarray | None, n_actions: int
                       ) -> np.ndarray:
        """Replace forbidden ``actions [N]`` by the allowed action of highest ``scores [N, n]``
        (the lowest allowed index without scores); each replacement is an intervention."""
        actions = np.asarray(actions).reshape(-1).copy()
        mask = self.action_mask(n_actions)
        bad = ~mask[actions]
        if scores is None:
            actions[bad] = int(np.flatnonzero(mask)[0])
        else:
            actions[bad] = np.where(mask, np.asarray(scores, float), -np.inf)[bad].argmax(-1)
        self.interventions += int(bad.sum())
        self.steps += actions.shape[0]
        return actions

    def metrics(self) -> dict[str, float]:
        """``safety/shield_interventions`` and ``safety/shield_intervention_rate``."""
        return {"safety/shield_interventions": float(self.interventions),
                "safety/shield_intervention_rate": self.interventions / max(self.steps, 1)}

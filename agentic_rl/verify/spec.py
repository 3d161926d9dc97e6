"""Safety properties declared in YAML (capability V1).

A property file names slices of the flat observation vector and lists properties over them::

    parts:
      grip_pos: [0, 3]          # obs[0:3]; for FetchReach also the achieved goal
    horizon: 50                 # optional: "always" means steps 0..49 of each episode
    region: {center: [...], radius: 0.01}   # optional default region of raw network inputs
    properties:
      - {name: workspace, kind: state_box, part: grip_pos,
         low: [1.05, 0.40, 0.40], high: [1.55, 1.10, 0.90]}
      - {name: above_table, kind: state_halfspace, part: grip_pos, a: [0, 0, -1], b: -0.42}
      - {name: no_fly_zone, kind: forbidden_box, part: grip_pos,
         low: [1.2, 0.6, 0.4], high: [1.3, 0.9, 0.6]}
      - {name: action_limits, kind: action_box, low: [-1, -1, -1, -1], high: [1, 1, 1, 1]}
      - {name: no_noop, kind: forbidden_actions, actions: [4]}
      - {name: no_heat_cat, kind: forbidden_commands, patterns: ["^heat .*cat"]}

Every property evaluates vectorised over a batch and returns a boolean *violation* mask
``[N]`` (``True`` = the property is broken at that step).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal, Union

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

_STRICT = ConfigDict(extra="forbid", frozen=True)


class _Property(BaseModel):
    model_config = _STRICT
    name: str = Field(min_length=1)
    horizon: int | None = Field(default=None, ge=1)


class _PartProperty(_Property):
    part: str

    def part_values(self, obs: np.ndarray, parts: dict[str, tuple[int, int]]) -> np.ndarray:
        """The named slice of ``obs [N, obs_dim]`` as ``[N, part_dim]``."""
        start, stop = parts[self.part]
        obs = _as_batch(obs, f"observation for property {self.name!r}")
        if obs.shape[1] < stop:
            raise PropertyError(
                f"property {self.name!r}: part {self.part!r} is obs[{start}:{stop}] but the "
                f"observation has only {obs.shape[1]} entries; fix `parts` in the property file"
            )
        return obs[:, start:stop]


class _BoxMixin(BaseModel):
    low: list[float]
    high: list[float]

    @model_validator(mode="after")
    def _check_box(self) -> "_BoxMixin":
        if len(self.low) != len(self.high):
            raise ValueError(f"low has {len(self.low)} entries but high has {len(self.high)}")
        if any(lo > hi for lo, hi in zip(self.low, self.high)):
            raise ValueError("every low must be <= the matching high")
        return self


class StateBox(_PartProperty, _BoxMixin):
    """The part must stay inside ``[low, high]`` (closed box)."""

    kind: Literal["state_box"]

    def violations(self, obs: np.ndarray, parts: dict[str, tuple[int, int]]) -> np.ndarray:
        """``obs [N, obs_dim]`` -> violation mask ``[N]``."""
        x = self.part_values(obs, parts)
        return ((x < np.asarray(self.low)) | (x > np.asarray(self.high))).any(axis=1)

    def safe_distance(self, obs: np.ndarray, parts: dict[str, tuple[int, int]]) -> np.ndarray:
        """``[N]`` distance from the part to the box's nearest face (0 outside the box)."""
        x = self.part_values(obs, parts)
        inside = np.minimum(x - np.asarray(self.low), np.asarray(self.high) - x).min(axis=1)
        return np.maximum(inside, 0.0)


class StateHalfspace(_PartProperty):
    """The part must satisfy ``a . x <= b``."""

    kind: Literal["state_halfspace"]
    a: list[float]
    b: float

    def violations(self, obs: np.ndarray, parts: dict[str, tuple[int, int]]) -> np.ndarray:
        """``obs [N, obs_dim]`` -> violation mask ``[N]``."""
        return self.part_values(obs, parts) @ np.asarray(self.a) > self.b

    def safe_distance(self, obs: np.ndarray, parts: dict[str, tuple[int, int]]) -> np.ndarray:
        """``[N]`` Euclidean distance from the part to the plane ``a . x = b`` on the allowed
        side (0 on the other)."""
        a = np.asarray(self.a)
        slack = self.b - self.part_values(obs, parts) @ a
        return np.maximum(slack, 0.0) / max(float(np.linalg.norm(a)), 1e-12)


class ForbiddenBox(_PartProperty, _BoxMixin):
    """The part must never be inside ``[low, high]`` (closed box)."""

    kind: Literal["forbidden_box"]

    def violations(self, obs: np.ndarray, parts: dict[str, tuple[int, int]]) -> np.ndarray:
        """``obs [N, obs_dim]`` -> violation mask ``[N]``."""
        x = self.part_values(obs, parts)
        return ((x >= np.asarray(self.low)) & (x <= np.asarray(self.high))).all(axis=1)

    def safe_distance(self, obs: np.ndarray, parts: dict[str, tuple[int, int]]) -> np.ndarray:
        """``[N]`` Euclidean distance from the part to the box (0 inside it)."""
        x = self.part_values(obs, parts)
        gap = np.maximum(np.maximum(np.asarray(self.low) - x, x - np.asarray(self.high)), 0.0)
        return np.linalg.norm(gap, axis=1)


class ActionBox(_Property, _BoxMixin):
    """Continuous actions must stay inside ``[low, high]``."""

    kind: Literal["action_box"]

    def violations(self, action: np.ndarray) -> np.ndarray:
        """``action [N, act_dim]`` -> violation mask ``[N]``."""
        a = _as_batch(action, f"action for property {self.name!r}")
        if a.shape[1] != len(self.low):
            raise ValueError(
                f"property {self.name!r} bounds {len(self.low)} action entries but actions have "
                f"{a.shape[1]}; fix low/high in the property file"
            )
        return ((a < np.asarray(self.low)) | (a > np.asarray(self.high))).any(axis=1)


class ForbiddenActions(_Property):
    """Discrete actions (integers) that must never be taken."""

    kind: Literal["forbidden_actions"]
    actions: list[int] = Field(min_length=1)

    def violations(self, action: np.ndarray) -> np.ndarray:
        """Integer ``action [N]`` -> violation mask ``[N]``."""
        return np.isin(np.asarray(action).reshape(-1), self.actions)


class ForbiddenCommands(_Property):
    """Text commands matching any regex (``re.search``) must never be issued."""

    kind: Literal["forbidden_commands"]
    patterns: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _compile(self) -> "ForbiddenCommands":
        for pattern in self.patterns:
            try:
                re.compile(pattern)
            except re.error as err:
                raise ValueError(f"pattern {pattern!r} is not a valid regex: {err}") from err
        return self

    def matches(self, command: str) -> bool:
        """Whether one command is forbidden."""
        return any(re.search(pattern, command) for pattern in self.patterns)

    def violations(self, action: np.ndarray | list[str]) -> np.ndarray:
        """Commands ``[N]`` (strings) -> violation mask ``[N]``."""
        return np.array([self.matches(str(c)) for c in np.asarray(action).reshape(-1)], bool)


StateProperty = StateBox | StateHalfspace | ForbiddenBox
ActionProperty = ActionBox | ForbiddenActions | ForbiddenCommands
Property = Annotated[
    Union[StateBox, StateHalfspace, ForbiddenBox, ActionBox, ForbiddenActions, ForbiddenCommands],
    Field(discriminator="kind"),
]


class Region(BaseModel):
    """A box of raw network inputs (``low``/``high`` or ``center``/``radius``) for proofs."""

    model_config = _STRICT
    low: list[float] | None = None
    high: list[float] | None = None
    center: list[float] | None = None
    radius: float | list[float] | None = None

    @model_validator(mode="after")
    def _one_form(self) -> "Region":
        box = self.low is not None and self.high is not None
        ball = self.center is not None and self.radius is not None
        if box == ball:
            raise ValueError("give either low and high, or center and radius")
        lo, hi = self.bounds()
        if lo.shape != hi.shape or (lo > hi).any():
            raise ValueError("region needs low <= high with matching lengths")
        return self

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """``(low [d], high [d])`` as float64 arrays."""
        if self.low is not None and self.high is not None:
            return np.asarray(self.low, float), np.asarray(self.high, float)
        center = np.asarray(self.center, float)
        radius = np.broadcast_to(np.asarray(self.radius, float), center.shape)
        return center - radius, center + radius


class PropertySet(BaseModel):
    """All properties of one file, plus the observation parts they refer to."""

    model_config = _STRICT
    parts: dict[str, tuple[int, int]] = Field(default_factory=dict)
    horizon: int | None = Field(default=None, ge=1)
    region: Region | None = None
    properties: list[Property] = Field(min_length=1)

    @model_validator(mode="after")
    def _check_refs(self) -> "PropertySet":
        for name, (start, stop) in self.parts.items():
            if not 0 <= start < stop:
                raise ValueError(f"parts.{name}: need 0 <= start < stop, got [{start}, {stop}]")
        names = [p.name for p in self.properties]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"property names must be unique; repeated: {duplicates}")
        for i, prop in enumerate(self.properties):
            if isinstance(prop, _PartProperty):
                self._check_part(i, prop)
        return self

    def _check_part(self, index: int, prop: _PartProperty) -> None:
        if prop.part not in self.parts:
            raise ValueError(
                f"properties.{index}.part: unknown part {prop.part!r}; declare it under `parts` "
                f"(known: {sorted(self.parts)})"
            )
        start, stop = self.parts[prop.part]
        width = len(prop.a) if isinstance(prop, StateHalfspace) else len(prop.low)
        if width != stop - start:
            raise ValueError(
                f"properties.{index} ({prop.name}): part {prop.part!r} has {stop - start} "
                f"entries but the property gives {width}"
            )

    @property
    def names(self) -> list[str]:
        """Property names in file order."""
        return [p.name for p in self.properties]

    def horizon_of(self, prop: _Property) -> int | None:
        """A property's own horizon, else the file's."""
        return prop.horizon if prop.horizon is not None else self.horizon

    def violations(
        self, obs: np.ndarray | None = None, action: np.ndarray | list[str] | None = None
    ) -> dict[str, np.ndarray]:
        """Evaluate every property on a batch.

        Args:
            obs: flat observations ``[N, obs_dim]``; needed by state properties.
            action: actions ``[N, act_dim]`` (continuous), ``[N]`` ints or ``[N]`` strings.

        Returns:
            ``{name: violation mask [N]}``.
        """
        out: dict[str, np.ndarray] = {}
        for prop in self.properties:
            needs_obs = isinstance(prop, _PartProperty)
            given = obs if needs_obs else action
            if given is None:
                what = "obs" if needs_obs else "action"
                raise ValueError(f"property {prop.name!r} ({prop.kind}) needs `{what}`; pass it")
            out[prop.name] = prop.violations(given, self.parts) if needs_obs else prop.violations(given)
        return out


def _as_batch(x: np.ndarray, what: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2:
        raise ValueError(f"{what} must be [N, dim] or [dim], got shape {arr.shape}")
    return arr


class PropertyError(ValueError):
    """A property or region file is missing or invalid."""


def _load_yaml(path: str | Path, model: type[BaseModel]) -> BaseModel:
    path = Path(path)
    if not path.is_file():
        raise PropertyError(f"{model.__name__} file {path} does not exist")
    try:
        with path.open() as handle:
            raw = yaml.safe_load(handle)
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise PropertyError(f"{path} is not valid YAML{line}: "
                            f"{getattr(err, 'problem', None) or err}") from None
    try:
        return model.model_validate(raw if raw is not None else {})
    except ValidationError as err:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or '<top>'}: {e['msg']}"
                    for e in err.errors()]
        raise PropertyError(f"invalid {model.__name__} file {path}: " + "; ".join(problems)
                            ) from None


def load_properties(path: str | Path) -> PropertySet:
    """Read and validate a property YAML file; errors name the bad key path."""
    return _load_yaml(path, PropertySet)  # type: ignore[return-value]


def load_region(path: str | Path) -> Region:
    """Read and validate a region YAML file (``low``/``high`` or ``center``/``radius``)."""
    return _load_yaml(path, Region)  # type: ignore[return-value]

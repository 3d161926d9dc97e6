"""The answer of a verification query: proved, falsified (with a counterexample) or unknown."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["proved", "falsified", "unknown"]


@dataclass
class VerifyResult:
    """One property's verdict.

    Attributes:
        name: property name.
        status: ``proved`` only when sound bounds establish the property over the whole region;
            ``falsified`` with a concrete ``counterexample`` (network input ``[d]``) and the
            network's output there ``[k]``; otherwise ``unknown``.
        seconds: wall-clock time spent.
        details: method-specific facts (boxes explored, worst bound, assumptions, reasons).
    """

    name: str
    status: Status
    seconds: float
    counterexample: list[float] | None = None
    output_at_counterexample: list[float] | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict (non-finite floats become strings)."""
        return {"name": self.name, "status": self.status, "seconds": self.seconds,
                "counterexample": self.counterexample,
                "output_at_counterexample": self.output_at_counterexample,
                "details": _jsonable(self.details)}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist"):
        return _jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value

"""Helpers shared by the benchmark scripts: JSON output, Markdown tables, config edits."""

from __future__ import annotations

import json
from pathlib import Path


def write_json(path: str | None, payload: dict) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(payload, indent=2))


def markdown_table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def unconstrained(algorithm: dict, name: str) -> dict:
    """The ``algorithm`` section of a Lagrangian config (``sac_lag``, ``ppo_lag``) as the plain
    learner ``name`` runs it: the keys only the Lagrangian variant reads are dropped."""
    from agentic_rl.algos import CONFIGS

    extra = set(CONFIGS[f"{name}_lag"].model_fields) - set(CONFIGS[name].model_fields)
    return {key: value for key, value in algorithm.items() if key not in extra} | {"name": name}

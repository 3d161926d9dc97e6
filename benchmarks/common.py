"""Helpers shared by the benchmark scripts: JSON output, Markdown tables, config edits."""

from __future__ import annotations

import json
import platform
from pathlib import Path


def write_json(path: str | None, payload: dict) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(payload, indent=2))


def machine_facts() -> dict:
    """What a result may depend on beyond the code: training that is bit-exact on one machine
    rounds differently where the CPU's vector units (and so the kernels torch picks) differ."""
    import torch

    cpuinfo = Path("/proc/cpuinfo")
    names = [line.partition(":")[2].strip() for line in
             (cpuinfo.read_text().splitlines() if cpuinfo.exists() else [])
             if line.startswith("model name")]
    return {"cpu": names[0] if names else platform.processor() or platform.machine(),
            "avx512": torch.backends.cpu.get_cpu_capability().startswith("AVX512"),
            "torch": torch.__version__, "python": platform.python_version()}


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

"""Verify every property of a property file against one policy network (``agentic-rl verify``)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from agentic_rl.verify.closed_loop import verify_closed_loop
from agentic_rl.verify.grid_runner import (
    check_grid_learner,
    is_grid_env,
    verify_grid,
)
from agentic_rl.verify.policy import policy_from_tensors
from agentic_rl.verify.prove import verify_action_property
from agentic_rl.verify.replay import deployed_learner, replay
from agentic_rl.verify.result import VerifyResult
from agentic_rl.verify.spec import (
    ActionBox,
    ForbiddenBox,
    PropertyError,
    PropertySet,
    StateBox,
    StateHalfspace,
    load_properties,
    load_region,
)
from agentic_rl.verify.step_model import AffineStepModel, declared_step_model


def verify_properties(
    net: nn.Module, low, high, properties: PropertySet, model: AffineStepModel | None = None,
    horizon: int | None = None, max_seconds: float = 1.0,
    closed_loop_seconds: float | None = None,
    generator: torch.Generator | None = None,
) -> list[VerifyResult]:
    """One result per property, in file order.

    Args:
        net: deterministic policy over raw inputs ``[d] -> [k]``, normaliser layers included and
            actions in the units of the property file (``policy.policy_from_tensors``).
        low, high: the region of raw inputs ``[d]`` (initial box for state invariants).
        properties: the property set.
        model: affine one-step model over the network input, needed for state invariants.
        horizon: steps for state invariants; defaults to the property's / file's horizon.
        max_seconds: budget per action property; closed_loop_seconds: per state invariant
            (default: ``max_seconds`` too).
    """
    results = []
    for prop in properties.properties:
        if isinstance(prop, ActionBox):
            results.append(verify_action_property(
                net, low, high, torch.tensor(prop.low, dtype=torch.float64),
                torch.tensor(prop.high, dtype=torch.float64), name=prop.name,
                max_seconds=max_seconds, generator=generator))
        elif isinstance(prop, (StateBox, StateHalfspace, ForbiddenBox)):
            results.append(_state_property(net, low, high, properties, prop, model, horizon,
                                           closed_loop_seconds or max_seconds, generator))
        else:
            results.append(VerifyResult(prop.name, "unknown", 0.0, details={
                "reason": f"{prop.kind} concerns discrete/text actions, not this continuous "
                          "network; enforce it with DiscreteShield or check a finite env with "
                          "verify_finite"}))
    return results


def _state_property(net, low, high, properties, prop, model, horizon, seconds, generator):
    steps = horizon if horizon is not None else properties.horizon_of(prop)
    if steps is None:
        raise PropertyError(f"property {prop.name!r}: give a horizon (in the property file or "
                            "as an argument) to verify a state invariant")
    if model is None:
        return VerifyResult(prop.name, "unknown", 0.0, details={
            "reason": "state invariants need the environment's one-step model; none declared"})
    start = time.perf_counter()
    result = verify_closed_loop(net, model, low, high, prop, steps, parts=properties.parts,
                                name=prop.name, max_seconds=seconds, generator=generator)
    result.seconds = time.perf_counter() - start
    return result


def check_sizes(properties, in_dim: int, out_dim: int) -> None:
    """``PropertyError`` for an action box of the wrong length or a part beyond the inputs."""
    for prop in properties.properties:
        if isinstance(prop, ActionBox) and len(prop.low) != out_dim:
            raise PropertyError(f"property {prop.name!r}: its action box has {len(prop.low)} "
                                f"entries but the policy has {out_dim} actions")
    check_parts(properties, in_dim)


def check_parts(properties, in_dim: int) -> None:
    """``PropertyError`` for a ``parts`` slice beyond the policy's ``in_dim`` inputs."""
    for name, (start, stop) in properties.parts.items():
        if stop > in_dim:
            raise PropertyError(f"part {name!r} is obs[{start}:{stop}] but the policy's "
                                f"inputs have only {in_dim} entries; fix `parts`")


def results_report(results: list[VerifyResult]) -> dict:
    """JSON-ready ``{"results": [...], "counts": {status: n}, "seconds": total}``."""
    counts = {status: sum(r.status == status for r in results)
              for status in ("proved", "falsified", "unknown")}
    return {"results": [r.to_dict() for r in results], "counts": counts,
            "seconds": sum(r.seconds for r in results)}


def format_results(results: list[VerifyResult]) -> str:
    """A plain-text table: name, status, seconds, and the counterexample or reason."""
    rows = [("property", "status", "seconds", "detail")]
    for r in results:
        if r.status == "falsified":
            detail = (f"input {_short(r.counterexample)} -> "
                      f"output {_short(r.output_at_counterexample)}")
        else:
            detail = str(r.details.get("reason", r.details.get("method", "")))
        rows.append((r.name, r.status, f"{r.seconds:.3f}", detail))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:>{widths[2]}}  {d}"
                     for a, b, c, d in rows)


def _short(values: list[float] | None) -> str:
    return "[" + ", ".join(f"{v:.4g}" for v in values or []) + "]"


def verify_run(run_dir: str | Path, property_file: str | Path,
               region_file: str | Path | None = None, out_file: str | Path | None = None,
               action_low: Sequence[float] | None = None,
               action_high: Sequence[float] | None = None, max_seconds: float = 1.0,
               seed: int = 0) -> tuple[dict, list[VerifyResult]]:
    """``agentic-rl verify RUN_DIR --property FILE [--region FILE]`` as a function (grid-world
    runs: by exhaustive enumeration, ``grid_runner``; no region is needed there).

    Loads the newest checkpoint of ``run_dir`` (or a checkpoint folder), rebuilds the executed
    deterministic policy over raw ``[observation, desired_goal]`` inputs, verifies every property
    over the region (``region_file``, else the property file's ``region``) and writes the JSON
    report to ``out_file`` (default ``RUN_DIR/verify.json``) atomically.

    Args:
        action_low, action_high: the env's action box (``env.action_space.low/high``) when
            actions are not in [-1, 1], so action properties are checked in env units.

    Returns:
        The JSON report and the results (``format_results(results)`` prints the table).
    """
    from agentic_rl.data.checkpoint import latest_checkpoint, load_checkpoint

    properties = load_properties(property_file)
    folder = latest_checkpoint(run_dir)
    tensors, state, _ = load_checkpoint(folder, with_buffers=False)
    config = state.get("config", {})
    env = config.get("environment", {})
    # the run's thread count (default 1): more threads than free cores make every small
    # product many times slower, and the time budgets are wall clock
    torch.set_num_threads(int(config.get("training", {}).get("torch_threads", 1)))
    if is_grid_env(env.get("name", "")):
        check_grid_learner(config, folder)
        algo, _ = deployed_learner(config, folder)
        check_parts(properties, 3)  # grid observations are [row, col, has_key]
        results = verify_grid(algo, env["name"], dict(env.get("kwargs") or {}), properties)
        return _write_report({"checkpoint": str(folder), "property_file": str(property_file),
                              "method": "exhaustive enumeration of (start, goal) pairs",
                              **results_report(results)}, run_dir, out_file), results
    policy = _executed_policy(tensors, config, folder, action_low, action_high)
    low, high, (in_dim, out_dim) = _region(properties, property_file, region_file, policy)
    model = declared_step_model(env.get("name", ""), in_dim, out_dim, env.get("kwargs"))
    results = verify_properties(policy, torch.as_tensor(low), torch.as_tensor(high), properties,
                                model=model, max_seconds=max_seconds,
                                generator=torch.Generator().manual_seed(seed))
    if any(r.status == "falsified" for r in results):
        algo, obs_dim = deployed_learner(config, folder)
        replay(results, properties, algo, obs_dim, low, high, env_units=action_low is not None)
    report = {"checkpoint": str(folder), "property_file": str(property_file),
              "region": {"low": low.tolist(), "high": high.tolist()},
              "step_model": None if model is None else env.get("name"),
              **results_report(results)}
    return _write_report(report, run_dir, out_file), results


def _region(properties, property_file: str | Path, region_file: str | Path | None,
            policy: nn.Sequential) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """The region's bounds ``low, high [in]`` (``region_file``, else the property file's
    ``region``) and the policy's ``(inputs, outputs)``, with a clear error where the region
    or a property does not fit the policy."""
    region = load_region(region_file) if region_file is not None else properties.region
    if region is None:
        raise PropertyError(f"no region to verify over: pass --region FILE or add `region:` to "
                            f"{property_file}")
    low, high = region.bounds()
    in_dim = next(layer for layer in policy if isinstance(layer, nn.Linear)).in_features
    with torch.no_grad():
        out_dim = policy(torch.zeros(1, in_dim)).shape[1]
    if low.shape != (in_dim,):
        raise PropertyError(f"the region has {low.shape[0]} entries but the policy takes "
                            f"{in_dim} raw inputs [observation, desired_goal]; fix the region")
    check_sizes(properties, in_dim, out_dim)
    return low, high, (in_dim, out_dim)


def _executed_policy(tensors: dict, config: dict, folder: Path,
                     action_low: Sequence[float] | None,
                     action_high: Sequence[float] | None) -> nn.Sequential:
    """The deterministic float32 policy a flat continuous learner's checkpoint executes, over
    raw ``[observation, desired_goal]`` inputs (``policy_from_tensors``)."""
    from agentic_rl.data.checkpoint import CheckpointError

    env = config.get("environment", {})
    # the networks' settings: in the algorithm section (older run folders: the agent section)
    activation = {**config.get("agent", {}), **config.get("algorithm", {})}.get("activation",
                                                                                 "relu")
    try:
        return policy_from_tensors(
            tensors, activation=activation, clip=env.get("clip_obs", 5.0),
            normalize=(env.get("normalize_obs", True), env.get("normalize_goal", True)),
            action_low=action_low, action_high=action_high)
    except ValueError as error:
        raise CheckpointError(
            f"{folder}: verify checks the actor of a flat continuous learner (sac, opd, td3); "
            f"this checkpoint's does not fit ({error})") from None


def _write_report(report: dict, run_dir: str | Path, out_file: str | Path | None) -> dict:
    """Write ``report`` atomically to ``out_file`` (default ``RUN_DIR/verify.json``)."""
    target = Path(out_file) if out_file is not None else Path(run_dir) / "verify.json"
    temporary = target.with_suffix(target.suffix + ".tmp")
    temporary.write_text(json.dumps(report, indent=2))
    os.replace(temporary, target)
    return report

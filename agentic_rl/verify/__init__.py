"""Verification and safety (SPEC V1-V4): properties, monitor, shields, proofs.

* ``spec``: ``load_properties`` / ``load_region`` (YAML, validated) -> ``PropertySet``.
* ``monitor``: ``SafetyMonitor.check(obs, action, episode_step)`` every step; ``metrics()``.
* ``shield``: ``ContinuousShield.project(obs, action)``, ``DiscreteShield.mask_logits(...)``.
* ``bounds``: ``interval_bounds`` / ``crown_bounds`` through ``normalised_policy(actor_net, ...)``
  or ``policy_from_tensors(checkpoint_tensors, ...)`` (the executed policy over raw inputs).
* ``prove`` / ``closed_loop`` / ``runner``: ``verify_action_property``, ``verify_closed_loop``,
  ``verify_properties`` -> ``VerifyResult`` (proved / falsified / unknown, ``to_dict()``);
  ``verify_run(RUN_DIR, PROPERTY_FILE, REGION_FILE)`` is the ``agentic-rl verify`` command.
* ``finite``: exhaustive checks of grid worlds (``gridworld_system``, ``verify_finite``);
  ``grid_runner``: ``agentic-rl verify`` on grid-world runs through them.
* ``rounding``: the rigorous float32 rounding bound every proof adds (``rounding_bound``);
  ``tanh_head``: action bounds proved before a tanh.
"""

from agentic_rl.verify.bounds import crown_bounds, interval_bounds
from agentic_rl.verify.closed_loop import verify_closed_loop
from agentic_rl.verify.finite import (
    grid_states_from_obs,
    gridworld_system,
    safe_action_mask,
    verify_finite,
)
from agentic_rl.verify.layers import Affine, Clamp, normalised_policy
from agentic_rl.verify.monitor import SafetyMonitor
from agentic_rl.verify.policy import policy_from_tensors
from agentic_rl.verify.prove import branch_and_bound, verify_action_property
from agentic_rl.verify.result import VerifyResult
from agentic_rl.verify.runner import (
    format_results,
    results_report,
    verify_properties,
    verify_run,
)
from agentic_rl.verify.search import search_counterexample
from agentic_rl.verify.shield import ContinuousShield, DiscreteShield
from agentic_rl.verify.spec import PropertySet, Region, load_properties, load_region
from agentic_rl.verify.step_model import (
    AffineStepModel,
    declared_step_model,
    fetch_reach_step_model,
)

__all__ = [
    "Affine", "AffineStepModel", "Clamp", "ContinuousShield", "DiscreteShield", "PropertySet",
    "Region", "SafetyMonitor", "VerifyResult", "branch_and_bound", "crown_bounds",
    "declared_step_model", "fetch_reach_step_model", "format_results", "grid_states_from_obs",
    "gridworld_system", "interval_bounds", "load_properties", "load_region", "normalised_policy",
    "policy_from_tensors", "results_report", "safe_action_mask", "search_counterexample",
    "verify_action_property", "verify_closed_loop", "verify_finite", "verify_properties",
    "verify_run",
]

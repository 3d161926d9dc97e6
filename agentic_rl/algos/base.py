"""The algorithm contract every learner of the training loop follows (see DESIGN.md).

An algorithm never steps an environment, writes a file or logs: the loop in ``agentic_rl.train``
does that. The loop writes every env step, with the extras ``act`` returned, into the storage
the algorithm declared (``make_storage``); ``update`` is the only training entry point and
returns plain float metrics with namespaced keys (``losses/...``, ``train/...``).
``check_algorithm`` runs when a run builds its learner, so a class that breaks the contract
fails there with the missing piece named, not deep inside the loop.
"""

from __future__ import annotations

import inspect
from typing import Any, Literal, Protocol, runtime_checkable

import torch

from agentic_rl.data.storage import Storage, StorageSpec

# Config keys outside the ``algorithm`` section that some learners do not read (keys inside
# it belong to one algorithm's model, which forbids the others). Each
# algorithm config lists its own in a ``unread_keys`` ClassVar; ``config.validate_config``
# rejects such a key set away from its default, naming the algorithms that do read it.
ON_POLICY_TRAINING_KEYS = ("training.learning_starts", "training.buffer_size",
                           "training.overlap_env", "training.weight_sync_every")
ENV_NORMALISER_KEYS = ("environment.normalize_obs", "environment.normalize_goal",
                       "environment.clip_obs", "environment.goal_region")
ENV_INPUT_KEYS = ENV_NORMALISER_KEYS + ("environment.curriculum",)

ActMode = Literal["explore", "deterministic", "random"]
ACT_MODES = ("explore", "deterministic", "random")


@runtime_checkable
class Algorithm(Protocol):
    """What the loop, evaluator and checkpointer rely on."""

    def act(self, obs: dict[str, torch.Tensor], state: Any, mode: ActMode
            ) -> tuple[torch.Tensor, Any, dict[str, torch.Tensor]]:
        """Choose actions for a batch of observations.

        Args:
            obs: observation tensors with a leading env dimension ``[N, ...]`` (raw,
                unnormalised), plus ``is_first [N]`` (the env just reset).
            state: recurrent / hierarchical state carried between steps (``None`` at start).
            mode: ``explore`` (training), ``deterministic`` (evaluation) or ``random``
                (uniform actions before learning starts).

        Returns:
            ``(action [N, ...] in env units, new state, extras)``; ``extras["unit_action"]``
            is the action as the storage keeps it.
        """
        ...

    def executed(self, extras: dict[str, torch.Tensor], env_action: torch.Tensor
                 ) -> dict[str, torch.Tensor]:
        """``extras`` for an action a shield replaced: the learner learns what ran."""
        ...

    def make_storage(self, spec: StorageSpec) -> Storage:
        """The storage the loop fills for this learner."""
        ...

    def observe(self, episode: Any) -> None:
        """Statistics (normalisers) from one finished episode as the storage returned it."""
        ...

    def update(self, batch: Any) -> dict[str, float]:
        """One gradient step on a batch from the storage; returns metrics. A replay batch with
        ``weight [B]`` (prioritised replay) weights the critic loss by it and gets
        ``td_error [B]`` (``|TD error|``) written into it for the storage's priorities."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue training: networks, optimisers, normalisers."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of ``state_dict``."""
        ...


def check_own_action(to_env: Any, extras: dict[str, torch.Tensor], env_action: torch.Tensor
                     ) -> dict[str, torch.Tensor]:
    """``executed`` for on-policy learners, which learn only from actions they sampled (a
    discrete shield narrows ``obs["action_mask"]`` before sampling instead)."""
    if not torch.equal(to_env(extras["unit_action"]), env_action):
        raise ValueError("an on-policy learner cannot learn from an action a shield replaced; "
                         "for continuous actions use verification.shield_eval only")
    return extras


CONTRACT = ("act", "executed", "make_storage", "observe", "update", "state_dict",
            "load_state_dict")


def check_algorithm(algo: Any) -> None:
    """Raise ``TypeError`` naming what ``algo`` lacks of the contract."""
    name = type(algo).__name__
    missing = [m for m in CONTRACT if not callable(getattr(algo, m, None))]
    if missing:
        raise TypeError(f"{name} does not follow agentic_rl.algos.base.Algorithm: it has no "
                        f"{', '.join(missing)}")
    parameters = list(inspect.signature(algo.act).parameters)
    if parameters[:3] != ["obs", "state", "mode"]:
        raise TypeError(f"{name}.act must take (obs, state, mode); it takes "
                        f"({', '.join(parameters)})")


def check_mode(mode: str) -> None:
    if mode not in ACT_MODES:
        raise ValueError(f"act mode must be one of {ACT_MODES}, got {mode!r}")

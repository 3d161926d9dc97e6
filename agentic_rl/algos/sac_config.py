"""The config sections of SAC: its update (the ``algorithm`` section, ``name: sac``), its
networks and optimisers (the ``agent`` section extends ``SACNetworkConfig``; each
``hgpo_sac`` level has its own) and hindsight relabelling."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentic_rl.algos.base import PROTOTYPE_BUFFER_KEYS


class HERConfig(BaseModel):
    """Hindsight relabelling at sample time (SPEC A2)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    strategy: Literal["future", "final", "episode", "none"] = "future"
    relabel_ratio: float = Field(0.8, ge=0, le=1)


class SACNetworkConfig(BaseModel):
    """Networks, optimisers and temperature of a SAC learner (the config's ``agent`` section
    extends it; each HGPO level has its own)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    hidden_sizes: list[int] = Field(default_factory=lambda: [256, 256])
    activation: Literal["relu", "tanh"] = "relu"
    actor_lr: float = Field(1e-3, gt=0)
    critic_lr: float = Field(1e-3, gt=0)
    alpha_lr: float = Field(1e-3, gt=0)
    init_alpha: float = Field(0.1, gt=0)
    target_entropy: float | Literal["auto"] = "auto"
    # One C++ call for the whole update (gradients, Adam, target update; sac_fused) where
    # sac_grads applies; off, or where the extension cannot be built, the same update runs in
    # Python.
    fused_update: bool = True


class SACConfig(BaseModel):
    """Hyper-parameters of SAC's update."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: Literal["sac"] = "sac"
    unread_keys: ClassVar[tuple[str, ...]] = PROTOTYPE_BUFFER_KEYS
    batch_size: int = Field(256, ge=1)
    gamma: float = Field(0.95, gt=0, le=1)
    tau: float = Field(0.05, gt=0, le=1)
    updates_per_step: int = Field(1, ge=1)
    num_q: int = Field(2, ge=1)
    her: HERConfig = Field(default_factory=HERConfig)

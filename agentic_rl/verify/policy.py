"""Rebuild the deterministic policy over *raw* inputs from checkpoint tensors, for verification.

A SAC/OPD checkpoint's ``model.safetensors`` holds (under ``algo.``) the actor's ``state_dict``
(``actor.trunk.<i>.weight``, ``actor.mean_head.*``, ...; TD3's deterministic actor:
``actor.0.<i>.weight``, the same network without the log-std head) and the running normalisers
(``obs_normalizer.mean/var``, ``goal_normalizer.mean/var``; the shorter ``obs_norm.`` /
``goal_norm.`` prefixes are accepted too). The policy the agent executes is

    tanh(mean_head(trunk(concat(clamp((obs - m_o) * rsqrt(v_o + eps), -clip, clip),
                                clamp((goal - m_g) * rsqrt(v_g + eps), -clip, clip)))))

with the statistics rounded to float32 as the agent rounds them, optionally mapped from
[-1, 1] to the environment's action box by ``ActionBox.to_env``'s float32 scale and offset.
``policy_from_tensors`` returns exactly that as an ``nn.Sequential`` of verifiable layers
(``Affine``, ``Clamp``, trunk, head, ``Tanh``[, ``Affine``]).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from agentic_rl.nets.actors import TanhGaussianActor
from agentic_rl.nets.mlp import ACTIVATIONS
from agentic_rl.verify.layers import Affine, Clamp

Tensor = torch.Tensor


def actor_from_state_dict(state: Mapping[str, Tensor], activation: str = "relu") -> TanhGaussianActor:
    """A ``TanhGaussianActor`` whose sizes are read off ``state`` (keys as ``actor.state_dict()``).

    The activation is not stored in the weights: pass the one of the agent config.
    """
    trunk = sorted({int(k.split(".")[1]) for k in state if k.startswith("trunk.")})
    linear = [i for i in trunk if state[f"trunk.{i}.weight"].dim() == 2]
    if not linear or "mean_head.weight" not in state:
        raise ValueError("actor tensors need 'trunk.<i>.weight' and 'mean_head.weight' keys; "
                         f"got {sorted(state)[:6]}... (is the key prefix right?)")
    hidden = [int(state[f"trunk.{i}.weight"].shape[0]) for i in linear]
    in_dim = int(state[f"trunk.{linear[0]}.weight"].shape[1])
    actor = TanhGaussianActor(in_dim, int(state["mean_head.weight"].shape[0]), hidden, activation,
                              layer_norm=len(trunk) > len(linear))
    actor.load_state_dict(dict(state))
    return actor


def deterministic_layers(state: Mapping[str, Tensor], activation: str = "relu") -> list[nn.Module]:
    """The deterministic actor as layers ending in ``Tanh``: SAC/OPD's ``TanhGaussianActor``
    (trunk + mean head), or TD3's ``Sequential(mlp, Tanh)`` (keys ``0.<i>.weight``)."""
    if "mean_head.weight" in state:
        return list(actor_from_state_dict(state, activation).deterministic_net())
    linear = sorted({int(k.split(".")[1]) for k in state if k.startswith("0.")
                     and k.endswith(".weight") and state[k].dim() == 2})
    if not linear:
        actor_from_state_dict(state, activation)  # raises the missing-keys error
    layers: list[nn.Module] = []
    for position, index in enumerate(linear):
        weight, bias = state[f"0.{index}.weight"], state[f"0.{index}.bias"]
        layer = nn.Linear(weight.shape[1], weight.shape[0])
        layer.load_state_dict({"weight": weight, "bias": bias})
        layers.append(layer)
        if position < len(linear) - 1:
            layers.append(ACTIVATIONS[activation]())
    return [*layers, nn.Tanh()]


def _normaliser(tensors: Mapping[str, Tensor], prefix: str, names: Sequence[str]):
    for name in names:
        if f"{prefix}{name}.mean" in tensors:
            mean = tensors[f"{prefix}{name}.mean"].to(torch.float64).reshape(-1)
            return mean, tensors[f"{prefix}{name}.var"].to(torch.float64).reshape(-1)
    return None


def policy_from_tensors(
    tensors: Mapping[str, Tensor], prefix: str = "algo.", activation: str = "relu",
    clip: float = 5.0, eps: float = 1e-8, normalize: tuple[bool, bool] = (True, True),
    action_low: Sequence[float] | None = None, action_high: Sequence[float] | None = None,
) -> nn.Sequential:
    """The deterministic policy ``raw input [d] -> action [k]`` as verifiable layers.

    Args:
        tensors: checkpoint tensors (``safetensors.torch.load_file``).
        prefix: prefix before ``actor.`` / ``obs_normalizer.`` / ``goal_normalizer.`` (the
            actor's own keys may also sit directly under ``prefix``, without ``actor.``).
        activation: the agent's activation (``relu`` or ``tanh``).
        clip, eps: the normaliser's clip and epsilon.
        normalize: whether observation / goal normalisation is enabled (config flags).
        action_low, action_high: env action box; the output is mapped from [-1, 1] to it.

    Raises:
        ValueError: missing actor keys or normaliser sizes that do not add up to the input.
    """
    actor_prefix = f"{prefix}actor."
    if not any(k.startswith(actor_prefix) for k in tensors):
        actor_prefix = prefix  # a bare ``actor.state_dict()`` saved next to the normalisers
    state = {k[len(actor_prefix):]: v for k, v in tensors.items() if k.startswith(actor_prefix)}
    actor_layers = deterministic_layers(state, activation)
    in_dim = actor_layers[0].in_features
    parts = [_normaliser(tensors, prefix, ("obs_normalizer", "obs_norm")),
             _normaliser(tensors, prefix, ("goal_normalizer", "goal_norm"))]
    scale, centre, low, high, used = [], [], [], [], 0
    for stats, enabled in zip(parts, normalize):
        if stats is None or used == in_dim:
            continue
        mean, var = stats
        # what RunningNormalizer runs: float32(mean) and float32(rsqrt(var + eps))
        scale.append(torch.rsqrt(var + eps).float().double() if enabled
                     else torch.ones_like(var))
        centre.append(mean.float().double() if enabled else torch.zeros_like(mean))
        limit = clip if enabled else float("inf")
        low.append(torch.full_like(mean, -limit))
        high.append(torch.full_like(mean, limit))
        used += mean.numel()
    if used != in_dim:
        raise ValueError(f"normaliser statistics cover {used} inputs but the actor takes {in_dim}; "
                         f"expected {prefix}obs_normalizer.mean/var (and goal_normalizer) keys")
    layers: list[nn.Module] = [Affine(torch.cat(scale), centre=torch.cat(centre)),
                               Clamp(torch.cat(low), torch.cat(high)), *actor_layers]
    if (action_low is None) != (action_high is None):
        raise ValueError("give both action_low and action_high, or neither")
    if action_low is not None:  # algos.spaces.ActionBox.to_env's float32 scale and offset
        a_low = torch.as_tensor(action_low, dtype=torch.float32)
        a_high = torch.as_tensor(action_high, dtype=torch.float32)
        a_scale = 0.5 * (a_high - a_low)
        layers.append(Affine(a_scale.double(), (a_low + a_scale).double()))
    return nn.Sequential(*layers).requires_grad_(False)

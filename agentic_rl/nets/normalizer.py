"""Running mean/std normalisation that travels with the model (SPEC E1).

The statistics are buffers of an ``nn.Module``: they are saved in the checkpoint's safetensors
file with the networks and reused by evaluation, demos and the verifier. Data everywhere else in
the library (replay, prototypes, demo files) stays raw, so hindsight-relabelled goals are
normalised with the same statistics as real ones.
"""

from __future__ import annotations

import functools

import torch
from torch import nn


class RunningNormalizer(nn.Module):
    """``clamp((x - mean) / sqrt(var + eps), -clip, clip)`` with statistics merged batch by batch.

    Shapes: ``update(x [B, dim])``, ``forward(x [..., dim]) -> [..., dim]``.
    """

    def __init__(self, dim: int, clip: float = 5.0, eps: float = 1e-8, enabled: bool = True):
        super().__init__()
        self.clip, self.eps, self.enabled = clip, eps, enabled
        self.register_buffer("mean", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("var", torch.ones(dim, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self._cache: tuple[torch.Tensor, torch.Tensor] | None = None  # float32 (mean, 1/std)
        self.register_load_state_dict_post_hook(lambda module, _: module._invalidate())

    def _invalidate(self) -> None:
        self._cache = None

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge the batch statistics of ``x [B, dim]`` (Chan et al. parallel variance)."""
        if not self.enabled or x.numel() == 0:
            return
        x = x.reshape(-1, self.mean.shape[0]).to(self.mean.device, torch.float64)
        batch_count = x.shape[0]
        batch_mean = x.mean(dim=0)
        batch_var = x.var(dim=0, unbiased=False)
        total = self.count + batch_count
        delta = batch_mean - self.mean
        new_mean = self.mean + delta * (batch_count / total)
        m2 = self.var * self.count + batch_var * batch_count + delta.pow(2) * self.count * (
            batch_count / total)
        self.mean.copy_(new_mean)
        self.var.copy_(m2 / total)
        self.count.copy_(total)
        self._cache = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return x
        mean, scale = self._statistics(x.device)
        return ((x - mean) * scale).clamp(-self.clip, self.clip)

    def _statistics(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """float32 ``(mean, 1 / std)`` on ``device``, cached until the statistics change."""
        if self._cache is None or self._cache[0].device != device:
            self._cache = (self.mean.to(device, torch.float32),
                           torch.rsqrt(self.var + self.eps).to(device, torch.float32))
        return self._cache

    def affine(self) -> tuple[torch.Tensor, torch.Tensor, float]:
        """``(mean, scale, clip)`` with ``forward(x) = clamp((x - mean) * scale, -clip, clip)``
        (float32 CPU tensors; the identity when disabled): for code that normalises by itself,
        such as the fused SAC update."""
        if not self.enabled:
            dim = self.mean.shape[0]
            return *self._identity(dim), float("inf")
        mean, scale = self._statistics(torch.device("cpu"))
        return mean, scale, float(self.clip)

    @staticmethod
    @functools.cache
    def _identity(dim: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(zeros, ones)`` of size ``dim``, made once per size (never written to)."""
        return torch.zeros(dim), torch.ones(dim)

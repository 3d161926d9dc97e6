"""Sentence embeddings shared by the rollout workers of a text agent and their learner.

Every worker embeds the texts its envs produce, and so does the learner for the texts of the
chunks it learns from; many texts (commands, feedback, task texts) recur across games, so
without sharing each process embeds them again: with two workers on two cores a fifth of the
collection time was such repeated work. One ``EmbeddingStore`` actor holds what any of them
embedded; each process's encoder asks it for what its own cache misses before embedding, and
publishes what it had to embed (``envs.alfworld.text_encoder.EmbeddingPeers``).

Two processes that miss the same text at the same moment both embed it; the first published
copy is kept. Embeddings of one text from different batches can differ in the last bits of
float32 (padding changes the summation order), so a run with workers is not bit-reproducible,
which runs with workers never are (see ``train.remote_steps``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

STORE_CAPACITY = 200_000  # texts kept (oldest published dropped first): ~300 MB at MiniLM's 384


class EmbeddingStore:
    """The body of the Ray actor: text -> float32 ``[dim]`` embedding."""

    def __init__(self, capacity: int = STORE_CAPACITY) -> None:
        self.capacity = capacity
        self.vectors: dict[str, np.ndarray] = {}

    def fetch(self, texts: list[str]) -> tuple[list[str], np.ndarray | None]:
        """The texts of ``texts`` held here, and their embeddings ``[found, dim]``."""
        found = [text for text in texts if text in self.vectors]
        if not found:
            return found, None
        return found, np.stack([self.vectors[text] for text in found])

    def publish(self, texts: list[str], vectors: np.ndarray) -> None:
        for text, vector in zip(texts, vectors):
            self.vectors.setdefault(text, vector)
        while len(self.vectors) > self.capacity:  # dicts keep insertion order: oldest first
            del self.vectors[next(iter(self.vectors))]

    def size(self) -> int:
        return len(self.vectors)


class RayPeers:
    """``EmbeddingPeers`` over an ``EmbeddingStore`` actor: one round trip per fetch, none
    waited for per publish."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def fetch(self, texts: list[str]) -> dict[str, np.ndarray]:
        import ray

        found, vectors = ray.get(self.handle.fetch.remote(texts))
        return {} if vectors is None else dict(zip(found, vectors))

    def publish(self, texts: list[str], vectors: np.ndarray) -> None:
        self.handle.publish.remote(texts, vectors)


def start_store() -> Any:
    """A new store actor (no CPU reserved: it only moves arrays)."""
    import ray

    return ray.remote(EmbeddingStore).options(num_cpus=0).remote()


def share_embeddings(handle: Any) -> Any:
    """Make this process's text encoder use the store ``handle``; returns the encoder (set its
    ``peers`` to ``None`` to stop sharing)."""
    from agentic_rl.envs.alfworld.text_encoder import shared_encoder

    encoder = shared_encoder()
    encoder.peers = RayPeers(handle)
    return encoder

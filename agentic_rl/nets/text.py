"""Text policy for admissible-command environments (ALFWorld): score every command against the
encoded state, with a recurrent memory of past observations and actions.

Texts never enter the network as strings: a :class:`TextTable` gives every distinct text a row
id and holds its frozen sentence-encoder embedding, so episodes are small integer arrays and a
batch looks its vectors up with one index. Row 0 is the empty text (padding, zero vector).

Per step the policy sees the task, the feedback, the inventory, the previous command and (for
the hierarchical agent) a subgoal vector; a GRU runs over the steps of an episode. A command's
logit is ``(s_t + e(h_tn)) . c_n``: ``s_t`` the state vector, ``c_n`` the command's projection,
and ``e(h_tn)`` a learned vector for the command's history bucket (how often it was issued
earlier in the episode, whether it was the previous command), so the memory of where the agent
has been does not have to be squeezed through the GRU alone. A second bucket says how many of
the command's words are in the task and whether the object it names was just seen: sentence
embeddings blur which object a command is about, and BC agents walked past the task's object.
"""

from __future__ import annotations

import re
from typing import Iterable

import numpy as np
import torch
from torch import nn

COUNT_BUCKETS = 4  # issued 0, 1, 2, 3+ times before
HISTORY_BUCKETS = 2 * COUNT_BUCKETS  # x (was / was not the previous command)
OVERLAP_BUCKETS = 4  # 0, 1, 2, 3+ of the command's content words are in the task
MATCH_BUCKETS = 2 * OVERLAP_BUCKETS  # x (all its object words are in the last observation)
# Words that say nothing about which object or place a command is about.
FUNCTION_WORDS = frozenset(
    "a an the some to from in on with it its is are at of and or then you your see into "
    "under two".split())
# Task adjectives to the command verbs they call for ("put a hot mug ..." needs "heat mug ...").
WORD_FORMS = {"hot": "heat", "heated": "heat", "cold": "cool", "cooled": "cool",
              "cleaned": "clean"}


def history_bucket(issued: np.ndarray, is_previous: np.ndarray) -> np.ndarray:
    """``min(issued, 3) + 4 * is_previous``: a command's history bucket from how often it was
    issued earlier in the episode and whether it was the last command (int64, any shape)."""
    return np.minimum(issued, COUNT_BUCKETS - 1) + COUNT_BUCKETS * np.asarray(is_previous, np.int64)


class TextTable:
    """Row ids for texts and their (frozen) embeddings; encodes unseen texts in one batch.

    Args:
        encoder: anything with ``encode(list[str]) -> float32 [N, dim]`` and ``dim``
            (e.g. :class:`~agentic_rl.nets.text_encoder.TextEncoder`); None for tables that
            are only filled from arrays.
        dim: embedding size when there is no encoder.
    """

    def __init__(self, encoder=None, dim: int | None = None) -> None:
        self.encoder = encoder
        self.dim = int(encoder.dim if encoder is not None else dim)
        self.texts: list[str] = [""]
        self.index: dict[str, int] = {"": 0}
        self._vectors: list[np.ndarray] = [np.zeros((1, self.dim), np.float32)]
        self._tensor: torch.Tensor | None = None
        # per row: (content words, content words after the first word), filled on demand
        self._terms: list[tuple[frozenset[str], frozenset[str]] | None] = [
            (frozenset(), frozenset())]

    def __len__(self) -> int:
        return len(self.texts)

    def ids(self, texts: Iterable[str]) -> np.ndarray:
        """Row ids of ``texts`` (int64 ``[N]``), adding and encoding the unseen ones."""
        texts = list(texts)
        new = [t for t in dict.fromkeys(texts) if t not in self.index]
        if new:
            if self.encoder is None:
                raise KeyError(f"text not in the table and no encoder to embed it: {new[0]!r}")
            self.add(new, self.encoder.encode(new))
        return np.fromiter((self.index[t] for t in texts), np.int64, len(texts))

    def add(self, texts: list[str], vectors: np.ndarray) -> None:
        """Add already-embedded texts (float32 ``[N, dim]``); known texts are skipped."""
        keep = [i for i, text in enumerate(texts) if text not in self.index]
        if keep:
            self._vectors.append(np.asarray(vectors, np.float32)[keep])
            for i in keep:
                self.index[texts[i]] = len(self.texts)
                self.texts.append(texts[i])
            self._tensor = None

    def words(self, row: int) -> frozenset[str]:
        """Content words of a row's text (lower case letters only, function words dropped,
        task adjectives as their verbs)."""
        return self._text_terms(row)[0]

    def _text_terms(self, row: int) -> tuple[frozenset[str], frozenset[str]]:
        """``(content words, content words after the first word)`` of a row's text."""
        if len(self._terms) < len(self.texts):
            self._terms += [None] * (len(self.texts) - len(self._terms))
        terms = self._terms[row]
        if terms is None:
            tokens = [WORD_FORMS.get(w, w) for w in re.findall("[a-z]+", self.texts[row].lower())]
            terms = (frozenset(tokens) - FUNCTION_WORDS, frozenset(tokens[1:]) - FUNCTION_WORDS)
            self._terms[row] = terms
        return terms

    def match_buckets(self, task: int, observation: int, commands: np.ndarray) -> np.ndarray:
        """How each command relates to the task and to what the agent just saw.

        Args:
            task, observation: row ids.
            commands: ``[N]`` row ids (0 = padding).

        Returns:
            int64 ``[N]``: ``min(|command words & task words|, 3) + 4 * (the command's words
            after its verb all occur in the observation)``; 0 for padding.
        """
        task_words, seen = self.words(task), self.words(observation)
        out = np.zeros(len(commands), np.int64)
        for i, row in enumerate(commands):
            if row:
                words, objects = self._text_terms(int(row))
                out[i] = (min(len(words & task_words), OVERLAP_BUCKETS - 1)
                          + OVERLAP_BUCKETS * bool(objects and objects <= seen))
        return out

    def tensor(self) -> torch.Tensor:
        """All embeddings, float32 ``[len(self), dim]`` (row 0 zeros)."""
        if self._tensor is None:
            self._vectors = [np.concatenate(self._vectors)]
            self._tensor = torch.from_numpy(self._vectors[0])
        return self._tensor


def mlp(sizes: list[int]) -> nn.Sequential:
    """Linear layers with ReLU between them (none after the last)."""
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(fan_in, fan_out))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class TextPolicy(nn.Module):
    """Categorical policy over admissible commands, plus a value head.

    Args:
        embed_dim: sentence-embedding size (384 for MiniLM).
        hidden: width of the memory, state and command vectors.
        memory: run a GRU over the episode's steps (else each step is seen alone).
        subgoal: take a subgoal vector ``[embed_dim]`` per step (hierarchical Worker).
    """

    def __init__(self, embed_dim: int = 384, hidden: int = 256, memory: bool = True,
                 subgoal: bool = False) -> None:
        super().__init__()
        self.embed_dim, self.hidden, self.use_subgoal = embed_dim, hidden, subgoal
        self.step_in = mlp([3 * embed_dim, hidden])  # observation, inventory, previous command
        self.gru = nn.GRU(hidden, hidden, batch_first=True) if memory else None
        state_in = hidden + 3 * embed_dim + (embed_dim if subgoal else 0)
        self.state_mlp = mlp([state_in, hidden, hidden])
        self.command_mlp = mlp([embed_dim, hidden, hidden])
        # Per-slot features: a vector (dotted with the command) and a bias per bucket.
        self.history_embed = nn.Embedding(HISTORY_BUCKETS, hidden + 1)
        self.match_embed = nn.Embedding(MATCH_BUCKETS, hidden + 1)
        nn.init.zeros_(self.history_embed.weight)
        nn.init.zeros_(self.match_embed.weight)
        self.value_mlp = mlp([hidden, hidden, 1])

    def initial_state(self, batch: int) -> torch.Tensor:
        """Zero memory ``[1, batch, hidden]``."""
        return torch.zeros(1, batch, self.hidden)

    def forward(self, table: torch.Tensor, batch: dict[str, torch.Tensor],
                memory: torch.Tensor | None = None):
        """Logits and values for a batch of (partial) episodes.

        Args:
            table: embeddings ``[V, embed_dim]`` (``TextTable.tensor()``).
            batch: int64 row ids ``task [B, T]``, ``observation [B, T]``, ``inventory [B, T]``,
                ``previous_command [B, T]``, ``commands [B, T, N]``; ``history [B, T, N]``
                and ``match [B, T, N]`` buckets; bool ``command_mask [B, T, N]``; with ``subgoal=True`` also float
                ``subgoal [B, T, embed_dim]``.
            memory: GRU state ``[1, B, hidden]`` carried from earlier steps (None: zeros).

        Returns:
            ``(logits [B, T, N]`` (-inf outside the mask), ``values [B, T]``,
            ``memory [1, B, hidden])``.
        """
        task, obs = table[batch["task"]], table[batch["observation"]]
        inventory = table[batch["inventory"]]
        step = self.step_in(torch.cat([obs, inventory, table[batch["previous_command"]]], -1))
        if self.gru is not None:
            hidden, memory = self.gru(torch.relu(step), memory)
        else:
            hidden = step
        parts = [hidden, task, obs, inventory]
        if self.use_subgoal:
            parts.append(batch["subgoal"])
        state = self.state_mlp(torch.cat(parts, -1))  # [B, T, H]
        # Score the U distinct commands of the batch, then pick each slot's score: no
        # [B, T, N, H] tensor (the slots repeat a few hundred commands).
        unique, inverse = torch.unique(batch["commands"], return_inverse=True)  # [U], [B, T, N]
        commands = self.command_mlp(table[unique])  # [U, H]
        scores = torch.gather(state @ commands.T, -1, inverse)  # [B, T, N]
        # the constant last column turns each bucket's last weight into a plain bias
        commands = torch.cat([commands, torch.full_like(commands[:, :1], self.hidden ** 0.5)], 1)
        slots = ((self.history_embed.weight @ commands.T)[batch["history"], inverse]
                 + (self.match_embed.weight @ commands.T)[batch["match"], inverse])
        logits = (scores + slots) / self.hidden ** 0.5
        logits = logits.masked_fill(~batch["command_mask"], float("-inf"))
        values = self.value_mlp(state).squeeze(-1)
        return logits, values, memory

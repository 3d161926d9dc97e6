"""The text table of the text agents: every distinct text gets a row id and its frozen
sentence-encoder embedding, so episodes are small integer arrays (row 0: the empty text);
and the bucket features a command's logit adds (how often it was issued, how many of its words
are in the task, whether the object it names was just seen). Used by the text collector, the
episode storage and the policy (``nets.text``)."""

from __future__ import annotations

import re
from typing import Iterable

import numpy as np
import torch


COUNT_BUCKETS = 4  # issued 0, 1, 2, 3+ times before
HISTORY_BUCKETS = 2 * COUNT_BUCKETS  # x (was / was not the previous command)
TAKE_BACK_BUCKETS = 2 * HISTORY_BUCKETS  # x (takes back what the agent moved there itself)
MEMORY_BUCKETS = 2 * TAKE_BACK_BUCKETS  # x (goes to a place last seen holding a task object)
# Added to the bucket of a command that leads back to a state already visited
# (``data.revisits``): not embedded, a policy with ``avoid_revisits`` masks such commands.
REVISIT_FLAG = MEMORY_BUCKETS
OVERLAP_BUCKETS = 4  # 0, 1, 2, 3+ of the command's content words are in the task
MATCH_BUCKETS = 2 * OVERLAP_BUCKETS  # x (all its object words are in the last observation)
# Words that say nothing about which object or place a command is about.
FUNCTION_WORDS = frozenset(
    "a an the some to from in on with it its is are at of and or then you your see into "
    "under two".split())
TAKE = re.compile(r"^take (.+) from (.+)$")  # groups: the object, the place
# Task adjectives to the command verbs they call for ("put a hot mug ..." needs "heat mug ...").
WORD_FORMS = {"hot": "heat", "heated": "heat", "cold": "cool", "cooled": "cool",
              "cleaned": "clean"}


def history_bucket(issued: np.ndarray, is_previous: np.ndarray, takes_back=False,
                   remembered=False, revisits=False) -> np.ndarray:
    """``min(issued, 3) + 4 * is_previous + 8 * takes_back + 16 * remembered + 32 * revisits``:
    a command's history bucket from how often it was issued earlier in the episode, whether it
    was the last command, whether it takes back an object the agent itself moved there
    (:func:`moved_there`), whether it goes to a place the agent last saw holding a task object
    (:class:`~agentic_rl.data.object_memory.ObjectMemory`) and whether it leads back to a state
    already visited (:class:`~agentic_rl.data.revisits.RevisitMemory`; the ``REVISIT_FLAG``)
    (int64, any shape; a policy reads it modulo the buckets it embeds)."""
    return (np.minimum(issued, COUNT_BUCKETS - 1) + COUNT_BUCKETS * np.asarray(is_previous, np.int64)
            + HISTORY_BUCKETS * np.asarray(takes_back, np.int64)
            + TAKE_BACK_BUCKETS * np.asarray(remembered, np.int64)
            + REVISIT_FLAG * np.asarray(revisits, np.int64))


def moved_there(command: str) -> str | None:
    """The move a take command undoes: ``take watch 1 from sidetable 1`` -> ``move watch 1 to
    sidetable 1`` (None for any other command)."""
    found = TAKE.match(command)
    return f"move {found[1]} to {found[2]}" if found else None


class TextTable:
    """Row ids for texts and their (frozen) embeddings; encodes unseen texts in one batch.

    Args:
        encoder: anything with ``encode(list[str]) -> float32 [N, dim]`` and ``dim``
            (e.g. :class:`~agentic_rl.envs.alfworld.text_encoder.TextEncoder`); None for tables that
            are only filled from arrays.
        dim: embedding size when there is no encoder.
        lazy: ``ids`` only numbers unseen texts; ``tensor`` encodes all of them in one batch
            (the envs of a vector env each add their texts, the learner's next forward pass
            encodes them together).
    """

    def __init__(self, encoder=None, dim: int | None = None, lazy: bool = False) -> None:
        self.encoder, self.lazy = encoder, lazy
        self._pending: list[str] = []  # numbered, not yet encoded (lazy tables)
        self.dim = int(encoder.dim if encoder is not None else dim)
        self.texts: list[str] = [""]
        self.index: dict[str, int] = {"": 0}
        self._vectors: list[np.ndarray] = [np.zeros((1, self.dim), np.float32)]
        self._tensor: torch.Tensor | None = None
        # per row: (content words, content words after the first word), filled on demand
        self._terms: list[tuple[frozenset[str], frozenset[str]] | None] = [
            (frozenset(), frozenset())]
        self._objects: dict[int, str] = {}  # command row -> the word it acts on

    def __len__(self) -> int:
        return len(self.texts)

    def ids(self, texts: Iterable[str]) -> np.ndarray:
        """Row ids of ``texts`` (int64 ``[N]``), adding and encoding the unseen ones."""
        texts = list(texts)
        new = [t for t in dict.fromkeys(texts) if t not in self.index]
        if new:
            if self.encoder is None:
                raise KeyError(f"text not in the table and no encoder to embed it: {new[0]!r}")
            if self.lazy:
                for text in new:
                    self.index[text] = len(self.texts)
                    self.texts.append(text)
                self._pending += new
                self._tensor = None
            else:
                self.add(new, self.encoder.encode(new))
        return np.fromiter((self.index[t] for t in texts), np.int64, len(texts))

    def add(self, texts: list[str], vectors: np.ndarray) -> None:
        """Add already-embedded texts (float32 ``[N, dim]``); known texts are skipped."""
        self._encode_pending()
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

    def _object_word(self, row: int) -> str:
        """The word a command acts on: its first content word after the verb ("" if none)."""
        found = self._objects.get(row)
        if found is None:
            tokens = [w for w in re.findall("[a-z]+", self.texts[row].lower())
                      if w not in FUNCTION_WORDS]
            found = self._objects[row] = tokens[1] if len(tokens) > 1 else ""
        return found

    def object_in_task(self, tasks: torch.Tensor, commands: torch.Tensor) -> torch.Tensor:
        """Whether each command acts on a task word: the object it takes, moves, heats, cleans,
        cools or uses, or the place it goes to, opens or examines ("take cd 1 from dresser 1"
        does not act on "put some mug on dresser"; "take mug 1 from dresser 1" does).

        Args:
            tasks: int64 ``[...]`` task row ids.
            commands: int64 ``[..., N]`` command row ids (0: padding).

        Returns:
            int64 ``[..., N]``, 1 where it does (0 on padding).
        """
        flat_tasks, flat = tasks.reshape(-1), commands.reshape(-1, commands.shape[-1])
        out = torch.zeros_like(flat)
        for task in torch.unique(flat_tasks).tolist():
            rows = flat_tasks == task
            unique, inverse = torch.unique(flat[rows], return_inverse=True)
            words = self.words(task)
            hits = torch.tensor([bool(c) and self._object_word(c) in words
                                 for c in unique.tolist()], dtype=torch.int64)
            out[rows] = hits[inverse]
        return out.reshape(commands.shape)

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

    def _encode_pending(self) -> None:
        if self._pending:
            self._vectors.append(np.asarray(self.encoder.encode(self._pending), np.float32))
            self._pending = []

    def tensor(self) -> torch.Tensor:
        """All embeddings, float32 ``[len(self), dim]`` (row 0 zeros)."""
        if self._tensor is None:
            self._encode_pending()
            self._vectors = [np.concatenate(self._vectors)]
            self._tensor = torch.from_numpy(self._vectors[0])
        return self._tensor

    def state(self) -> tuple[list[str], np.ndarray]:
        """``(texts, embeddings [len(self), dim])`` for a checkpoint."""
        return list(self.texts), self.tensor().numpy()

    def load_state(self, texts: list[str], vectors: np.ndarray) -> None:
        """Replace the contents (in place: envs, storage and learner share the table)."""
        if len(texts) != len(vectors) or not texts or texts[0] != "":
            raise ValueError("a text table state holds the empty text first and one vector "
                             "per text")
        self.texts, self.index = list(texts), {t: i for i, t in enumerate(texts)}
        self._vectors, self._pending = [np.asarray(vectors, np.float32).copy()], []
        self._tensor = None
        self._terms = [(frozenset(), frozenset())]
        self._objects = {}

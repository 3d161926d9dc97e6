"""Episodes of admissible-command text environments as integer arrays, and their batches.

A :class:`TextEpisode` stores :class:`~agentic_rl.nets.text.TextTable` row ids (never strings),
so thousands of demonstration and rollout episodes fit in memory and batch by indexing. Episodes
of the same game form a group (``game``) for the group-based updates.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from agentic_rl.data.object_memory import ObjectMemory
from agentic_rl.data.revisits import RevisitMemory
from agentic_rl.data.text_table import TextTable, history_bucket, moved_there

STEP_FIELDS = ("observation", "inventory", "previous_command", "action", "reward", "log_prob",
               "value", "subgoal")


@dataclasses.dataclass
class TextEpisode:
    """One episode; per-step arrays have length ``L``.

    Attributes:
        task: row id of the task text.
        observation, inventory, previous_command: ``[L]`` row ids (previous command 0 at t=0).
        commands: ``[L, N]`` row ids of the admissible commands, 0-padded.
        num_commands: ``[L]``.
        action: ``[L]`` chosen index into ``commands[t]``.
        reward: ``[L]``.
        log_prob, value: ``[L]`` under the behaviour policy (zeros for demonstrations).
        subgoal: ``[L]`` row id of the subgoal text in force (0: none).
        bootstrap_value: value of the state after the last step if the episode was truncated.
        game, task_type, success, source: metadata (``source``: expert / self / rollout /
            dagger).
        expert_command: ``[L]`` row ids of the expert's command at each visited state (0: none),
            when the collector asked the env for it.
        expert_subgoal: ``[L]`` row ids of the templated subgoal the expert pursues there (0:
            none), likewise.
        match: ``[L, N]`` task/observation match buckets of the commands
            (:meth:`~agentic_rl.nets.text.TextTable.match_buckets`).
        final: the inputs of the state a truncated episode stopped in (``[1, ...]`` arrays, as
            in :func:`collate`'s per-step fields), until the learner has valued it.
    """

    task: int
    observation: np.ndarray
    inventory: np.ndarray
    previous_command: np.ndarray
    commands: np.ndarray
    num_commands: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    log_prob: np.ndarray
    value: np.ndarray
    subgoal: np.ndarray
    terminated: bool
    bootstrap_value: float = 0.0
    game: str = ""
    task_type: str = ""
    success: bool = False
    source: str = "rollout"
    expert_command: np.ndarray | None = None
    expert_subgoal: np.ndarray | None = None
    match: np.ndarray | None = None
    final: dict[str, np.ndarray] | None = dataclasses.field(default=None, repr=False)

    def __len__(self) -> int:
        return int(self.action.shape[0])

    def history(self, texts: Sequence[str] | None = None) -> np.ndarray:
        """``[L, N]`` history buckets of every admissible command (:func:`history_buckets`;
        the take-back and remembered bits need the table's ``texts``). Cached: collate reads
        it on every imitation step."""
        key = "_history" if texts is None else "_history_with_texts"
        if key not in self.__dict__:  # not a field: dataclasses.replace does not copy it
            self.__dict__[key] = history_buckets(self.commands, self.previous_command, texts,
                                                 self.observation, self.task)
        return self.__dict__[key]


def history_buckets(commands: np.ndarray, previous_command: np.ndarray,
                    texts: Sequence[str] | None = None, observation: np.ndarray | None = None,
                    task: int = 0) -> np.ndarray:
    """How often each admissible command was issued before, whether it was the last one and
    (with ``texts``) whether it takes back an object the agent moved there itself, whether it
    leads back to a state already visited and (with ``observation`` too) whether it goes to a
    place last seen holding a task object.

    Args:
        commands: ``[L, N]`` row ids (0 = padding).
        previous_command: ``[L]`` row id of the command issued at ``t - 1`` (0 at ``t = 0``).
        texts: the text table's texts (None: none of the last three bits).
        observation: ``[L]`` row ids of what each step's previous command returned.
        task: row id of the task text.

    Returns:
        int64 ``[L, N]``: ``min(count, 3) + 4 * (command == previous command) + 8 * takes
        back + 16 * remembered + 32 * revisits``, where count is the number of earlier steps
        that issued that command (:func:`~agentic_rl.data.text_table.history_bucket`).
    """
    counts: dict[int, int] = {}
    issued_texts: set[str] = set()
    memory = None if texts is None or observation is None else ObjectMemory(texts[task])
    revisits = RevisitMemory()
    out = np.zeros(commands.shape, np.int64)
    for t in range(commands.shape[0]):
        if t > 0:
            counts[int(previous_command[t])] = counts.get(int(previous_command[t]), 0) + 1
            if texts is not None:
                issued_texts.add(texts[int(previous_command[t])])
                revisits.update(texts[int(previous_command[t])])
        row = commands[t]
        row_texts = None if texts is None else [texts[int(c)] for c in row]
        issued = np.fromiter((counts.get(int(c), 0) for c in row), np.int64, row.shape[0])
        back = [moved_there(text) in issued_texts for text in row_texts] if issued_texts else False
        remembered = False
        if memory is not None:
            memory.update(texts[int(previous_command[t])] if t > 0 else "",
                          texts[int(observation[t])])
            remembered = memory.remembered(row_texts)
        again = revisits.revisits(row_texts) if row_texts is not None else False
        out[t] = history_bucket(issued, (row == previous_command[t]) & (row != 0) & (t > 0),
                                back, remembered, again)
    return out


def match_buckets(table: TextTable, task: int, observation: np.ndarray,
                  commands: np.ndarray) -> np.ndarray:
    """``[L, N]`` match buckets of every step's commands."""
    return np.stack([table.match_buckets(task, int(o), row)
                     for o, row in zip(observation, commands)])


def expert_relabelled(episode: TextEpisode, table: TextTable) -> TextEpisode | None:
    """DAgger: the episode's own states (and its own previous commands, which feed the memory
    and the history buckets) with the expert's command as the action to imitate. Cut at the
    first step without an expert command; a label beyond the listed commands takes the last
    slot. None if the first step has no label."""
    labels = episode.expert_command
    missing = np.flatnonzero(labels == 0)
    length = int(missing[0]) if missing.size else len(labels)
    if length == 0:
        return None
    commands, counts = episode.commands[:length].copy(), episode.num_commands[:length].copy()
    actions = np.zeros(length, np.int64)
    for t in range(length):
        hits = np.flatnonzero(commands[t, : counts[t]] == labels[t])
        if hits.size:
            actions[t] = hits[0]
        else:
            if counts[t] < commands.shape[1]:
                counts[t] += 1
            actions[t] = counts[t] - 1
            commands[t, actions[t]] = labels[t]
    zeros = np.zeros(length, np.float32)
    return dataclasses.replace(
        episode, observation=episode.observation[:length], inventory=episode.inventory[:length],
        previous_command=episode.previous_command[:length], commands=commands,
        num_commands=counts, action=actions, reward=zeros, log_prob=zeros, value=zeros,
        subgoal=episode.subgoal[:length], expert_command=labels[:length], source="dagger",
        expert_subgoal=None if episode.expert_subgoal is None else episode.expert_subgoal[:length],
        match=match_buckets(table, episode.task, episode.observation[:length], commands))


def discounted_returns(reward: np.ndarray, gamma: float) -> np.ndarray:
    """``G_t = sum_{s >= t} gamma^(s - t) r_s`` for one episode's ``reward [L]``."""
    out = np.zeros(len(reward), np.float32)
    running = 0.0
    for t in range(len(reward) - 1, -1, -1):
        running = float(reward[t]) + gamma * running
        out[t] = running
    return out


def collate(episodes: list[TextEpisode], subgoal_vectors: torch.Tensor | None = None,
            texts: Sequence[str] | None = None):
    """Pad episodes into a batch for :class:`~agentic_rl.nets.text.TextPolicy`.

    Args:
        episodes: E episodes.
        subgoal_vectors: the text table's embeddings, to turn ``subgoal`` ids into vectors.
        texts: the text table's texts, for the take-back bits of the history buckets.

    Returns:
        Dict of tensors ``[E, T, ...]`` (T the longest episode, N the most commands): the
        policy inputs plus ``action``, ``reward``, ``log_prob``, ``value`` ``[E, T]`` and
        ``step_mask [E, T]`` (True on real steps).
    """
    count, steps = len(episodes), max(len(e) for e in episodes)
    width = max(int(e.commands.shape[1]) for e in episodes)
    out = {key: np.zeros((count, steps), np.int64) for key in
           ("task", "observation", "inventory", "previous_command", "action", "subgoal")}
    out.update({key: np.zeros((count, steps), np.float32)
                for key in ("reward", "log_prob", "value")})
    out["commands"] = np.zeros((count, steps, width), np.int64)
    out["history"] = np.zeros((count, steps, width), np.int64)
    out["match"] = np.zeros((count, steps, width), np.int64)
    out["command_mask"] = np.zeros((count, steps, width), bool)
    out["step_mask"] = np.zeros((count, steps), bool)
    for i, episode in enumerate(episodes):
        length, n = len(episode), episode.commands.shape[1]
        out["task"][i, :length] = episode.task
        for key in STEP_FIELDS:
            out[key][i, :length] = getattr(episode, key)
        out["commands"][i, :length, :n] = episode.commands
        out["history"][i, :length, :n] = episode.history(texts)
        out["match"][i, :length, :n] = episode.match
        out["command_mask"][i, :length, :n] = (np.arange(n)[None, :]
                                               < episode.num_commands[:, None])
        out["step_mask"][i, :length] = True
    # Padded steps get one dummy admissible command so their logits stay finite.
    out["command_mask"][:, :, 0] |= ~out["step_mask"]
    batch = {key: torch.from_numpy(value) for key, value in out.items()}
    if subgoal_vectors is not None:
        batch["subgoal"] = subgoal_vectors[batch["subgoal"]]
    return batch


def episodes_from_demos(path: str | Path, table: TextTable,
                        max_commands: int = 64) -> list[TextEpisode]:
    """Read an ALFWorld demonstration ``.npz`` (``agentic-rl demos``) into episodes.

    Steps whose demonstrated command is not among the first ``max_commands`` are kept with the
    command list extended by it (so the label is always admissible).
    """
    with np.load(path) as archive:  # read each array once (indexing an NpzFile re-reads it)
        data = dict(archive)
    texts = {str(t) for key in ("task", "observation", "inventory") for t in data[key]}
    texts |= {c for row in data["admissible_commands"] for c in str(row).split("\n")}
    register_texts(table, sorted(texts), Path(path))
    episode_of = data["episode"]
    bounds = np.concatenate([[0], np.cumsum(data["episode_length"])])
    episodes = []
    for e in range(len(data["episode_length"])):
        part = slice(bounds[e], bounds[e + 1])
        assert (episode_of[part] == e).all()
        command_lists = [str(c).split("\n") for c in data["admissible_commands"][part]]
        chosen = [str(c) for c in data["command"][part]]
        lists = []
        for commands, command in zip(command_lists, chosen):
            commands = commands[:max_commands]
            if command not in commands:
                commands = commands[: max_commands - 1] + [command]
            lists.append(commands)
        episodes.append(text_episode(
            table, str(data["task"][part][0]), [str(o) for o in data["observation"][part]],
            [str(i) for i in data["inventory"][part]], lists,
            [c.index(command) for c, command in zip(lists, chosen)],
            data["reward"][part], terminated=bool(data["terminated"][part][-1]),
            game=str(data["gamefile"][e]), task_type=str(data["task_type"][e]),
            success=bool(data["episode_success"][e]), source="expert"))
    return episodes


def register_texts(table: TextTable, texts: list[str], demo_path: Path) -> None:
    """Add ``texts`` to the table in one batch, reusing the embeddings cached beside the demo
    file (``<demo>.embeddings.npz``, rewritten when the demo file or the encoder changes)."""
    cache = demo_path.with_name(demo_path.name + ".embeddings.npz")
    digest = hashlib.sha256(demo_path.read_bytes()).hexdigest()
    key = f"{digest}:{getattr(table.encoder, 'name', '')}:{table.dim}"
    hit = False
    if cache.exists():
        with np.load(cache) as saved:
            if str(saved["key"]) == key:
                table.add([str(t) for t in saved["texts"]], saved["vectors"])
                hit = True
    ids = table.ids(texts)  # encodes whatever the cache did not hold, in one batch
    if not hit:
        temporary = cache.with_name(f"{cache.name}.{os.getpid()}.tmp.npz")  # runs in parallel
        np.savez(temporary, key=np.asarray(key), texts=np.asarray(texts),
                 vectors=table.tensor().numpy()[ids])
        os.replace(temporary, cache)


def text_episode(table: TextTable, task: str, observations: list[str], inventories: list[str],
                 command_lists: list[list[str]], actions: list[int], rewards,
                 terminated: bool, subgoals: list[str] | None = None, **meta) -> TextEpisode:
    """Build a :class:`TextEpisode` from texts (all texts are added to ``table``)."""
    length = len(actions)
    width = max(len(c) for c in command_lists)
    commands = np.zeros((length, width), np.int64)
    for t, row in enumerate(command_lists):
        commands[t, : len(row)] = table.ids(row)
    taken = commands[np.arange(length), np.asarray(actions, np.int64)]
    previous = np.concatenate([[0], taken[:-1]]).astype(np.int64)
    task_id, observation_ids = int(table.ids([task])[0]), table.ids(observations)
    return TextEpisode(
        task=task_id, observation=observation_ids,
        inventory=table.ids(inventories), previous_command=previous, commands=commands,
        num_commands=np.asarray([len(c) for c in command_lists], np.int64),
        action=np.asarray(actions, np.int64), reward=np.asarray(rewards, np.float32),
        log_prob=np.zeros(length, np.float32), value=np.zeros(length, np.float32),
        subgoal=table.ids(subgoals) if subgoals else np.zeros(length, np.int64),
        terminated=terminated, match=match_buckets(table, task_id, observation_ids, commands),
        **meta)

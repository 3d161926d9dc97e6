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
With ``avoid_revisits`` the commands that lead back to a state already visited are masked
like inadmissible ones (``data.revisits``), so greedy play cannot loop.
"""

from __future__ import annotations

import torch
from torch import nn

from agentic_rl.data.text_table import (HISTORY_BUCKETS, MATCH_BUCKETS, MEMORY_BUCKETS,
                                       REVISIT_FLAG, TAKE_BACK_BUCKETS)


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
        success_head: also predict whether the current subgoal will be finished in its period
            (a logit from the detached state vector: it learns without moving the policy).
        object_match: a third per-slot feature, ``batch["object"]`` (1 where the command acts
            on a task word: ``TextTable.object_in_task``).
        take_back: read the take-back bit of the history buckets (``data.text_table``: the
            command takes back an object the agent moved there itself); else they are read
            modulo ``HISTORY_BUCKETS``.
        object_memory: also read their remembered bit (the command goes to a place last seen
            holding a task object: ``data.object_memory``); needs ``take_back``.
        avoid_revisits: mask the commands whose history bucket carries ``REVISIT_FLAG`` (they
            lead back to a state already visited: ``data.revisits``), unless no other command
            is admissible.
    """

    def __init__(self, embed_dim: int = 384, hidden: int = 256, memory: bool = True,
                 subgoal: bool = False, success_head: bool = False,
                 object_match: bool = False, take_back: bool = False,
                 object_memory: bool = False, avoid_revisits: bool = False) -> None:
        super().__init__()
        if object_memory and not take_back:
            raise ValueError("object_memory reads the bit above the take-back bit: set "
                             "take_back too")
        self.embed_dim, self.hidden, self.use_subgoal = embed_dim, hidden, subgoal
        self.avoid_revisits = avoid_revisits
        self.step_in = mlp([3 * embed_dim, hidden])  # observation, inventory, previous command
        self.gru = nn.GRU(hidden, hidden, batch_first=True) if memory else None
        state_in = hidden + 3 * embed_dim + (embed_dim if subgoal else 0)
        self.state_mlp = mlp([state_in, hidden, hidden])
        self.command_mlp = mlp([embed_dim, hidden, hidden])
        # Per-slot features: a vector (dotted with the command) and a bias per bucket.
        self.history_buckets = (MEMORY_BUCKETS if object_memory else
                                TAKE_BACK_BUCKETS if take_back else HISTORY_BUCKETS)
        self.history_embed = nn.Embedding(self.history_buckets, hidden + 1)
        self.match_embed = nn.Embedding(MATCH_BUCKETS, hidden + 1)
        self.object_embed = nn.Embedding(2, hidden + 1) if object_match else None
        for embedding in (self.history_embed, self.match_embed, self.object_embed):
            if embedding is not None:
                nn.init.zeros_(embedding.weight)
        self.value_mlp = mlp([hidden, hidden, 1])
        self.success_mlp = mlp([hidden, hidden, 1]) if success_head else None

    def allowed(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """bool ``[B, T, N]``: ``command_mask``, less the revisiting commands with
        ``avoid_revisits`` at steps where another command is admissible."""
        admissible = batch["command_mask"]
        if not self.avoid_revisits:
            return admissible
        fresh = admissible & (batch["history"] // REVISIT_FLAG % 2 == 0)
        return torch.where(fresh.any(-1, keepdim=True), fresh, admissible)

    def initial_state(self, batch: int) -> torch.Tensor:
        """Zero memory ``[1, batch, hidden]``."""
        return torch.zeros(1, batch, self.hidden)

    def forward(self, table: torch.Tensor, batch: dict[str, torch.Tensor],
                memory: torch.Tensor | None = None, success: bool = False):
        """Logits and values for a batch of (partial) episodes.

        Args:
            table: embeddings ``[V, embed_dim]`` (``TextTable.tensor()``).
            batch: int64 row ids ``task [B, T]``, ``observation [B, T]``, ``inventory [B, T]``,
                ``previous_command [B, T]``, ``commands [B, T, N]``; ``history [B, T, N]``
                and ``match [B, T, N]`` buckets; bool ``command_mask [B, T, N]``; with
                ``subgoal=True`` also float ``subgoal [B, T, embed_dim]``.
            memory: GRU state ``[1, B, hidden]`` carried from earlier steps (None: zeros).
            success: also return the success head's logits ``[B, T]``.

        Returns:
            ``(logits [B, T, N]`` (-inf outside the mask), ``values [B, T]``,
            ``memory [1, B, hidden])``, and ``success logits [B, T]`` if asked.
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
        history = batch["history"] % self.history_buckets
        slots = ((self.history_embed.weight @ commands.T)[history, inverse]
                 + (self.match_embed.weight @ commands.T)[batch["match"], inverse])
        if self.object_embed is not None:
            slots = slots + (self.object_embed.weight @ commands.T)[batch["object"], inverse]
        logits = (scores + slots) / self.hidden ** 0.5
        logits = logits.masked_fill(~self.allowed(batch), float("-inf"))
        values = self.value_mlp(state).squeeze(-1)
        if success:
            return logits, values, memory, self.success_mlp(state.detach()).squeeze(-1)
        return logits, values, memory

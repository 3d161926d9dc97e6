"""The learned Manager of the text agents: scores candidate subgoal texts
(``plan.text_subgoals``) given the task, what the agent carries and what it has completed."""

from __future__ import annotations

import torch
from torch import nn

COUNT_BUCKETS = 3  # a candidate completed 0, 1, 2+ times
TOTAL_BUCKETS = 8  # 0..7+ subgoals completed this episode


class TextManager(nn.Module):
    """Categorical policy over a variable set of candidate subgoals.

    A candidate's logit is ``w . relu(W [c; ctx] + e_count + e_held + e_total)`` passed through
    one more layer, where ``c`` is the candidate's sentence embedding, ``ctx`` the task, inventory
    and last completed subgoal embeddings, and the ``e_*`` learned vectors of how often it was
    completed, whether the agent carries what it acts on, and how many subgoals were completed.

    Args:
        embed_dim: sentence-embedding size (384 for MiniLM).
        hidden: width of the scoring layers.
    """

    def __init__(self, embed_dim: int = 384, hidden: int = 128) -> None:
        super().__init__()
        self.embed_dim = embed_dim
        self.context = nn.Linear(3 * embed_dim, hidden)
        self.candidate = nn.Linear(embed_dim, hidden)
        self.count_embed = nn.Embedding(COUNT_BUCKETS, hidden)
        self.total_embed = nn.Embedding(TOTAL_BUCKETS, hidden)
        self.held_embed = nn.Embedding(2, hidden)
        self.score = nn.Sequential(nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                   nn.Linear(hidden, 1))

    def forward(self, task: torch.Tensor, inventory: torch.Tensor, last: torch.Tensor,
                candidates: torch.Tensor, counts: torch.Tensor, held: torch.Tensor,
                total: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Logits over candidates.

        Args:
            task, inventory, last: ``[B, D]`` embeddings (last completed subgoal; zeros before).
            candidates: ``[B, K, D]`` candidate embeddings (padding rows anything).
            counts: int64 ``[B, K]`` completions of each candidate so far.
            held: int64 ``[B, K]`` 1 where the agent carries what the candidate acts on.
            total: int64 ``[B]`` completions so far.
            mask: bool ``[B, K]``, True on real candidates.

        Returns:
            ``[B, K]`` logits, -inf where ``mask`` is False.
        """
        context = self.context(torch.cat([task, inventory, last], -1))  # [B, H]
        hidden = (self.candidate(candidates) + context[:, None]
                  + self.count_embed(counts.clamp(max=COUNT_BUCKETS - 1))
                  + self.held_embed(held)
                  + self.total_embed(total.clamp(max=TOTAL_BUCKETS - 1))[:, None])
        logits = self.score(hidden).squeeze(-1)
        return logits.masked_fill(~mask, float("-inf"))

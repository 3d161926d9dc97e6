"""Discrete OPD for admissible-command text environments (ALFWorld).

loss = RL term + opd_alpha(t) * cross-entropy toward prototype commands - ent_coef * entropy.

The RL term, by ``rl``:

* ``none``: imitation only (the prototypes are expert demonstrations and the agent's successes).
* ``ppo``: clipped PPO with the policy's value head, GAE per episode (bootstrapped on
  truncation), invalid commands masked out of the softmax.
* ``group``: critic-free, several episodes of the same game per batch (GRPO-style), with the
  advantage of ``advantage``: ``episode`` (episode return minus its game group's mean) or
  ``hog`` (hierarchy-of-groups over matching observation histories, levels ``0..hog_levels``;
  ``hog_levels=0`` is anchor-state grouping).

The clipped surrogate is used for both on-policy terms so a batch can be reused for
``n_epochs`` passes.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from torch import nn

from agentic_rl.algos.base import ENV_INPUT_KEYS, OWN_DRIVER_TRAINING_KEYS, VERIFICATION_KEYS
from agentic_rl.algos.hgpo_losses import ppo_policy_loss, value_loss
from agentic_rl.algos.schedule import Schedule, Scheduled, non_negative, value_at
from agentic_rl.algos.text_losses import (
    command_cross_entropy,
    context_groups,
    group_advantages,
    hierarchy_of_groups_advantages,
)
from agentic_rl.data.text_episodes import TextEpisode, collate, discounted_returns
from agentic_rl.nets.text import TextPolicy


class ManagerConfig(BaseModel):
    """HGPO Manager on text tasks: a subgoal every ``period`` steps or when it is reached."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    planner: Literal["expert_plan", "openai"] = "expert_plan"
    period: int = Field(5, ge=1)
    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = Field(30.0, gt=0)

    @model_validator(mode="after")
    def _endpoint_given(self) -> "ManagerConfig":
        if self.planner == "openai" and not (self.base_url and self.model):
            raise ValueError("planner 'openai' needs base_url and model (an OpenAI-compatible "
                             "chat endpoint, e.g. base_url: http://localhost:8000/v1)")
        return self


class TextOPDConfig(BaseModel):
    """Hyper-parameters of discrete OPD (``algorithm.name: text_opd``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Literal["text_opd"] = "text_opd"

    @model_validator(mode="before")
    @classmethod
    def _legacy_opd_alpha(cls, raw: Any) -> Any:
        """Run folders written before the shared ``Schedule`` kept the weight in four keys
        (``opd_alpha``, ``opd_alpha_end``, ``opd_alpha_schedule``, ``opd_alpha_steps``)."""
        legacy = ("opd_alpha_end", "opd_alpha_schedule", "opd_alpha_steps")
        if not isinstance(raw, dict) or not any(key in raw for key in legacy):
            return raw
        raw = dict(raw)
        start = raw.get("opd_alpha", 1.0)
        end, kind = raw.pop("opd_alpha_end", 0.2), raw.pop("opd_alpha_schedule", "exponential")
        steps = raw.pop("opd_alpha_steps", 200)
        if kind != "constant" and start != 0:
            end = max(end, 1e-8) if kind == "exponential" else end
            raw["opd_alpha"] = {"schedule": kind, "start": start, "end": end, "steps": steps}
        return raw

    @field_validator("opd_alpha")
    @classmethod
    def _non_negative(cls, value: Any) -> Any:
        return non_negative(value, "opd_alpha")
    unread_keys: ClassVar[tuple[str, ...]] = (
        OWN_DRIVER_TRAINING_KEYS + ENV_INPUT_KEYS + VERIFICATION_KEYS + (
            "training.num_eval_episodes", "training.checkpoint_freq", "environment.num_envs"))
    prototype_data_path: str | list[str] | None = Field(
        None, description="ALFWorld demonstration .npz file(s) (`agentic-rl demos`)")
    hidden: int = Field(256, ge=8)
    memory: bool = True
    lr: float = Field(5e-4, gt=0)
    rl: Literal["none", "ppo", "group"] = "group"
    advantage: Literal["episode", "hog"] = "hog"
    hog_levels: int = Field(2, ge=0)
    hog_alpha: float = 1.0
    normalize_std: bool = False
    gamma: float = Field(0.95, gt=0, le=1)
    gae_lambda: float = Field(0.95, ge=0, le=1)
    clip_range: float = Field(0.2, gt=0)
    n_epochs: int = Field(2, ge=1)
    minibatch_episodes: int = Field(16, ge=1)
    ent_coef: float = Field(0.0, ge=0)
    vf_coef: float = Field(0.5, ge=0)
    max_grad_norm: float = Field(1.0, gt=0)
    opd_alpha: Scheduled = Field(
        default_factory=lambda: Schedule(schedule="exponential", start=1.0, end=0.2, steps=200),
        description="distillation weight over RL updates (a number: constant)")
    distill_batch_episodes: int = Field(16, ge=1)
    bc_steps: int = Field(2000, ge=0, description="imitation steps before any RL")
    dagger_rounds: int = Field(0, ge=0, description="after bc_steps: rounds of playing "
                               "dagger_games train games greedily, labelling the visited "
                               "states with the expert's command, and dagger_steps imitation "
                               "steps on demos + labelled episodes")
    dagger_games: int = Field(32, ge=1)
    dagger_steps: int = Field(200, ge=0)
    games_per_iteration: int = Field(8, ge=1)
    group_size: int = Field(4, ge=1, description="episodes per game in one batch")
    max_commands: int = Field(64, ge=2)
    self_prototype_capacity: int = Field(3000, ge=0, description="episodes")
    holdout_games: int = Field(60, ge=0, description="train games kept out for model selection")
    manager: ManagerConfig | None = None


class TextOPD:
    """The learner: a :class:`~agentic_rl.nets.text.TextPolicy` and its optimiser.

    Args:
        config: hyper-parameters.
        embed_dim: sentence-embedding size.
        generator: seeds minibatch shuffling.
    """

    def __init__(self, config: TextOPDConfig, embed_dim: int, generator: torch.Generator):
        self.config, self.generator = config, generator
        self.policy = TextPolicy(embed_dim, config.hidden, config.memory,
                                 subgoal=config.manager is not None)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=config.lr)
        self.updates = 0

    def opd_alpha(self) -> float:
        return value_at(self.config.opd_alpha, self.updates)

    @torch.no_grad()
    def act(self, table: torch.Tensor, step: dict[str, torch.Tensor], memory: torch.Tensor,
            deterministic: bool = False):
        """One step for B envs: ``step`` holds ``[B, 1, ...]`` policy inputs.

        Returns:
            ``(action [B], log_prob [B], value [B], memory [1, B, H])``.
        """
        logits, values, memory = self.policy(table, step, memory)
        logits, values = logits[:, 0], values[:, 0]
        log_prob = torch.log_softmax(logits, -1)
        if deterministic:
            action = logits.argmax(-1)
        else:
            action = torch.multinomial(log_prob.exp(), 1, generator=self.generator).squeeze(-1)
        return action, log_prob.gather(-1, action.unsqueeze(-1)).squeeze(-1), values, memory

    # ------------------------------------------------------------------ losses
    def _step_log_probs(self, table: torch.Tensor, batch: dict[str, torch.Tensor]):
        logits, values, _ = self.policy(table, batch)
        mask = batch["step_mask"]
        logits, values = logits[mask], values[mask]
        log_prob = torch.log_softmax(logits, -1)
        chosen = log_prob.gather(-1, batch["action"][mask].unsqueeze(-1)).squeeze(-1)
        probs = log_prob.exp()
        entropy = -(probs * log_prob.masked_fill(probs == 0, 0.0)).sum(-1)
        return logits, chosen, values, entropy

    def distill_loss(self, table: torch.Tensor, prototypes: list[TextEpisode],
                     subgoals: torch.Tensor | None = None) -> torch.Tensor:
        """Cross-entropy toward the prototype commands of a batch of episodes."""
        batch = collate(prototypes, subgoals)
        logits, _, _ = self.policy(table, batch)
        mask = batch["step_mask"]
        return command_cross_entropy(logits[mask], batch["action"][mask],
                                     torch.ones_like(batch["action"][mask], dtype=torch.bool))

    def advantages(self, episodes: list[TextEpisode]) -> tuple[np.ndarray, np.ndarray]:
        """Per-step ``(advantages, returns)`` in episode order, by ``rl`` and ``advantage``."""
        c = self.config
        if c.rl == "ppo":
            pairs = [gae_episode(e, c.gamma, c.gae_lambda) for e in episodes]
            return (np.concatenate([p[0] for p in pairs]),
                    np.concatenate([p[1] for p in pairs]))
        returns = np.concatenate([discounted_returns(e.reward, c.gamma) for e in episodes])
        games = [e.game for e in episodes]
        if c.advantage == "episode":
            totals = np.asarray([float(e.reward.sum()) for e in episodes])
            episode_adv, _ = group_advantages(totals, np.unique(games, return_inverse=True)[1],
                                              c.normalize_std)
            lengths = [len(e) for e in episodes]
            return np.repeat(episode_adv, lengths), returns
        observations = [e.observation * 1_000_003 + e.inventory for e in episodes]
        groups = context_groups(games, observations, c.hog_levels)
        return hierarchy_of_groups_advantages(returns, groups, c.hog_alpha,
                                              c.normalize_std), returns

    def _step(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.policy.parameters(), self.config.max_grad_norm)
        self.optimizer.step()

    def imitation_step(self, table: torch.Tensor, prototypes: list[TextEpisode],
                       subgoals: torch.Tensor | None = None) -> dict[str, float]:
        """One gradient step of cross-entropy only (behaviour cloning)."""
        loss = self.distill_loss(table, prototypes, subgoals)
        self._step(loss)
        return {"losses/distill_loss": float(loss.detach())}

    def update(self, table: torch.Tensor, episodes: list[TextEpisode],
               sample_prototypes, subgoals: torch.Tensor | None = None) -> dict[str, float]:
        """RL (+ distillation) epochs over one batch of rollout episodes.

        Args:
            table: text embeddings ``[V, D]``.
            episodes: the batch's rollouts (``group_size`` per game for ``rl=group``).
            sample_prototypes: ``n -> list[TextEpisode]`` (or None when there are none).
            subgoals: the embedding table again when the policy takes subgoals.

        Returns:
            Mean ``losses/*`` and ``train/*`` metrics.
        """
        c = self.config
        alpha = self.opd_alpha()
        advantages, returns = self.advantages(episodes)
        bounds = np.concatenate([[0], np.cumsum([len(e) for e in episodes])])
        sums: dict[str, float] = {}
        count = 0
        for _ in range(c.n_epochs):
            order = torch.randperm(len(episodes), generator=self.generator).tolist()
            for start in range(0, len(order), c.minibatch_episodes):
                chosen = order[start : start + c.minibatch_episodes]
                minibatch = [episodes[i] for i in chosen]
                steps = np.concatenate([np.arange(bounds[i], bounds[i + 1]) for i in chosen])
                batch = collate(minibatch, subgoals)
                _, log_prob, values, entropy = self._step_log_probs(table, batch)
                old = batch["log_prob"][batch["step_mask"]]
                adv = torch.from_numpy(advantages[steps])
                pg, kl, clip = ppo_policy_loss(log_prob, old, adv, c.clip_range)
                loss = pg - c.ent_coef * entropy.mean()
                metrics = {"losses/policy_loss": pg, "train/approx_kl": kl,
                           "train/clip_fraction": clip, "losses/entropy": entropy.mean()}
                if c.rl == "ppo":
                    v_loss = value_loss(values, torch.from_numpy(returns[steps]))
                    loss = loss + c.vf_coef * v_loss
                    metrics["losses/value_loss"] = v_loss
                prototypes = sample_prototypes(c.distill_batch_episodes) if alpha > 0 else None
                if prototypes:
                    distill = self.distill_loss(table, prototypes, subgoals)
                    loss = loss + alpha * distill
                    metrics["losses/distill_loss"] = distill
                self._step(loss)
                for key, value in metrics.items():
                    sums[key] = sums.get(key, 0.0) + float(value.detach())
                count += 1
        self.updates += 1
        out = {key: value / max(count, 1) for key, value in sums.items()}
        out["train/opd_alpha"] = alpha
        out["train/advantage_abs_mean"] = float(np.abs(advantages).mean())
        return out

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, Any]:
        return {"policy": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(),
                "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        if "optimizer" in state:
            self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state.get("updates", 0))


def gae_episode(episode: TextEpisode, gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """GAE over one episode: ``(advantages [L], returns [L])``; the value after the last step
    is 0 if it terminated and ``bootstrap_value`` if it was truncated."""
    values = np.append(episode.value, 0.0 if episode.terminated else episode.bootstrap_value)
    advantages = np.zeros(len(episode), np.float32)
    running = 0.0
    for t in range(len(episode) - 1, -1, -1):
        delta = episode.reward[t] + gamma * values[t + 1] - values[t]
        running = delta + gamma * lam * running
        advantages[t] = running
    return advantages, advantages + episode.value

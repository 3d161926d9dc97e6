"""The group update of :class:`~agentic_rl.algos.text_opd.TextOPD`: clipped-policy (+ value,
+ success predictor, + distillation) epochs over one batch of rollout episodes.

Functions over the learner, as ``sac_grads`` is over ``SAC``: the learner owns the policy, its
optimiser and the batch plumbing (``TextOPD.collated``); the losses' math is in
``hgpo_losses`` and ``text_losses``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import torch
from torch import nn

from agentic_rl.algos.hgpo_losses import ppo_policy_loss, value_loss
from agentic_rl.data.text_episodes import TextEpisode

if TYPE_CHECKING:
    from agentic_rl.algos.text_opd import TextOPD

__all__ = ["group_update", "minibatch_loss", "step_log_probs"]


def group_update(learner: TextOPD, episodes: list[TextEpisode],
                 sample_prototypes: Callable[[int], list[TextEpisode]] | None
                 ) -> dict[str, float]:
    """RL (+ distillation) epochs over one batch of rollout episodes.

    Args:
        learner: the text learner whose policy steps.
        episodes: the batch's rollouts (``group_size`` per game for ``rl=group``).
        sample_prototypes: ``n -> list[TextEpisode]`` (or None when there are none).

    Returns:
        Mean ``losses/*`` and ``train/*`` metrics.
    """
    c = learner.config
    alpha = learner.opd_alpha()
    rewards, labels = (learner.success_signals(episodes)
                       if learner.policy.success_mlp is not None else (None, None))
    advantages, returns = learner.advantages(episodes, rewards)
    bounds = np.concatenate([[0], np.cumsum([len(e) for e in episodes])])
    sums: dict[str, float] = {}
    count = 0
    for _ in range(c.n_epochs):
        order = torch.randperm(len(episodes), generator=learner.generator).tolist()
        for start in range(0, len(order), c.minibatch_episodes):
            chosen = order[start : start + c.minibatch_episodes]
            steps = np.concatenate([np.arange(bounds[i], bounds[i + 1]) for i in chosen])
            targets = {"advantage": advantages[steps], "return": returns[steps],
                       "success": None if labels is None else labels[steps]}
            loss, metrics = minibatch_loss(learner, [episodes[i] for i in chosen], targets)
            prototypes = sample_prototypes(c.distill_batch_episodes) if alpha > 0 else None
            if prototypes:
                distill = learner.distill_loss(prototypes)
                loss = loss + alpha * distill
                metrics["losses/distill_loss"] = distill
            learner.gradient_step(loss)
            for key, value in metrics.items():
                sums[key] = sums.get(key, 0.0) + float(value.detach())
            count += 1
    learner.updates += 1
    out = {key: value / max(count, 1) for key, value in sums.items()}
    if learner.manager is not None and c.manager.rl == "group":
        out |= learner.manager.group_update(episodes, c.manager.period, alpha, c.n_epochs,
                                            c.clip_range, learner.generator)
    out["train/opd_alpha"] = alpha
    out["train/advantage_abs_mean"] = float(np.abs(advantages).mean())
    return out


def minibatch_loss(learner: TextOPD, minibatch: list[TextEpisode], targets: dict[str, Any]
                   ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The clipped policy loss - entropy bonus (+ the value loss for ``rl=ppo``, + the
    success predictor's loss) on ``minibatch``, and its 0-dim statistics. ``targets``: the
    minibatch's steps' ``advantage``, ``return`` and ``success`` labels (or None), ``[S]``
    arrays in episode order."""
    c, device = learner.config, learner.device
    batch = learner.collated(minibatch)
    success, log_prob, values, entropy = step_log_probs(learner, batch)
    old = batch["log_prob"][batch["step_mask"]]
    adv = torch.from_numpy(targets["advantage"]).to(device)
    pg, kl, clip = ppo_policy_loss(log_prob, old, adv, c.clip_range)
    loss = pg - c.ent_coef * entropy.mean()
    metrics = {"losses/policy_loss": pg, "train/approx_kl": kl,
               "train/clip_fraction": clip, "losses/entropy": entropy.mean()}
    if c.rl == "ppo":
        v_loss = value_loss(values, torch.from_numpy(targets["return"]).to(device))
        loss = loss + c.vf_coef * v_loss
        metrics["losses/value_loss"] = v_loss
    if success is not None:
        target = torch.from_numpy(targets["success"]).to(device)
        predictor = nn.functional.binary_cross_entropy_with_logits(success, target)
        loss = loss + predictor  # the head reads a detached state
        metrics["losses/success_predictor"] = predictor
        metrics["train/subgoal_success_rate"] = target.mean()
    return loss, metrics


def step_log_probs(learner: TextOPD, batch: dict[str, torch.Tensor]
                   ) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(success logits or None, chosen log-probs, values, entropies)``, each ``[S]`` over
    the real steps of a collated ``batch`` (``step_mask``)."""
    success = learner.policy.success_mlp is not None
    logits, values, _, *head = learner.forward(batch, success=success)
    mask = batch["step_mask"]
    logits, values = logits[mask], values[mask]
    log_prob = torch.log_softmax(logits, -1)
    chosen = log_prob.gather(-1, batch["action"][mask].unsqueeze(-1)).squeeze(-1)
    probs = log_prob.exp()
    entropy = -(probs * log_prob.masked_fill(probs == 0, 0.0)).sum(-1)
    return (head[0][mask] if head else None), chosen, values, entropy

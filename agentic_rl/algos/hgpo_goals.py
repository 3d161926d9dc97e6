"""HGPO's goal-space helpers, apart from its PPO levels: HIRO relabelling of the Manager's
goals, the temporal-contrastive goal encoder's step and the success predictor's step. Each
takes the ``HGPO`` learner whose networks it reads and trains."""

from __future__ import annotations

from typing import Any

import torch

from agentic_rl.algos import hgpo_losses
from agentic_rl.algos.ppo import flat_obs
from agentic_rl.data.hierarchical import ManagerSegments
from agentic_rl.data.rollout import Rollout, flatten_time


def period_log_likelihood(
    algo: Any, rollout: Rollout, seg: ManagerSegments, candidates: torch.Tensor
) -> torch.Tensor:
    """``[M, K]``: sum over each period of ``log pi_w(a_t | s_t, candidate_k)``."""
    x_w = flatten_time(flat_obs(rollout.obs, algo.config.worker_obs_keys))
    actions = flatten_time(rollout.actions)
    mask = flatten_time(rollout.obs["action_mask"]) if "action_mask" in rollout.obs else None
    segment = seg.step_segment.reshape(-1)
    out = torch.zeros(candidates.shape[:2], device=algo.device)
    with torch.no_grad():
        for k in range(candidates.shape[1]):
            log_prob, _ = algo.worker.evaluate(x_w, candidates[segment, k], actions, mask)
            out[:, k] = torch.zeros(candidates.shape[0], device=algo.device).index_add_(
                0, segment, log_prob)
    return out


def relabel_goals(algo: Any, rollout: Rollout, seg: ManagerSegments, goals: torch.Tensor):
    """HIRO: candidates = stored goal, phi at the period end, Gaussian samples around it."""
    cfg = algo.config
    achieved = algo.phi(rollout.next_obs)[seg.end_t, seg.env]
    noise = cfg.relabel_std * torch.randn(
        (achieved.shape[0], cfg.relabel_candidates - 2, algo.goal_dim), generator=algo.generator,
        device=algo.device)
    candidates = torch.cat(
        [goals[:, None], achieved[:, None], (achieved[:, None] + noise).clamp(-1.0, 1.0)], 1
    )
    log_likelihood = period_log_likelihood(algo, rollout, seg, candidates)
    return hgpo_losses.select_relabel_goals(candidates, log_likelihood)


def encoder_step(algo: Any, rollout: Rollout) -> dict[str, float]:
    """Temporal-contrastive step on ``(s_t, s_{t+k})`` pairs inside one episode, then EMA."""
    cfg, k = algo.config, algo.config.encoder_offset
    x = flat_obs(rollout.obs, cfg.worker_obs_keys)
    dones = rollout.dones.long()
    done_count = torch.cat([torch.zeros_like(dones[:1]), dones.cumsum(0)])  # [T + 1, N]
    steps = dones.shape[0]
    valid = (done_count[k:steps] - done_count[: steps - k]) == 0  # no episode end in t..t+k-1
    t_idx, n_idx = valid.nonzero(as_tuple=True)
    if len(t_idx) < 2:
        return {}
    pick = torch.randperm(len(t_idx), generator=algo.generator, device=algo.device)[:256]
    t_idx, n_idx = t_idx[pick], n_idx[pick]
    loss = hgpo_losses.temporal_contrastive_loss(
        algo.encoder(x[t_idx, n_idx]),
        algo.encoder(x[t_idx + k, n_idx]),
        cfg.contrastive_temperature,
    )
    algo.encoder_opt.zero_grad()
    loss.backward()
    algo.encoder_opt.step()
    with torch.no_grad():
        for target, online in zip(algo.target_encoder.parameters(), algo.encoder.parameters()):
            target.lerp_(online, cfg.encoder_tau)
    return {"losses/encoder_loss": float(loss.detach())}


def predictor_step(algo: Any, rollout: Rollout, seg: ManagerSegments) -> dict[str, float]:
    """Label each step: does phi at its period's end lie within ``goal_tolerance`` of g?"""
    goal = rollout.extras["goal"]
    end_phi = algo.phi(rollout.next_obs)[seg.end_t, seg.env][seg.step_segment]
    label = ((end_phi - goal).norm(dim=-1) <= algo.config.goal_tolerance).float()
    logits = algo.predictor(algo.phi(rollout.obs), goal)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, label)
    algo.predictor_opt.zero_grad()
    loss.backward()
    algo.predictor_opt.step()
    return {"losses/predictor_loss": float(loss.detach())}

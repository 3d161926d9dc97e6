"""Pure loss and reward functions for PPO and HGPO, and the Manager-batch transforms of
``hgpo_sac`` and its Worker-batch transform (tensors in, tensors out).

No networks or optimisers here, so each function is checked against a hand computation in
``tests/unit/test_ppo.py``, ``tests/unit/test_hgpo.py`` and ``tests/unit/test_hgpo_sac.py``.
"""

from __future__ import annotations

import torch


def normalize_advantages(advantages: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``(A - mean) / (std + eps)`` over all entries; a single entry is only centred."""
    if advantages.numel() < 2:
        return advantages - advantages.mean()
    return (advantages - advantages.mean()) / (advantages.std() + eps)


MAX_LOG_RATIO = 20.0  # r up to ~5e8: far past any clip range, far from float32 overflow


def ppo_policy_loss(
    log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantages: torch.Tensor, clip_range: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Clipped surrogate ``-mean(min(r A, clip(r, 1-eps, 1+eps) A))``, ``r = exp(logp - logp_old)``.

    Args:
        log_prob: ``[B]`` under the current policy (carries gradient).
        old_log_prob: ``[B]`` under the behaviour policy.
        advantages: ``[B]``.
        clip_range: epsilon.

    Returns:
        ``(loss, approx_kl, clip_fraction)`` scalars; ``approx_kl = mean((r - 1) - log r)``.

    ``log r`` is clamped to ``[-MAX_LOG_RATIO, MAX_LOG_RATIO]`` (no gradient beyond): a sample
    far outside the policy (e.g. a HIRO-relabelled goal 100 std from a narrow Manager, log-prob
    ~ -1e4) swings ``log r`` by tens per step, and ``exp`` overflows float32 past 88.
    """
    log_ratio = (log_prob - old_log_prob).clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)
    ratio = log_ratio.exp()
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip_range, 1.0 + clip_range) * advantages
    loss = -torch.minimum(unclipped, clipped).mean()
    with torch.no_grad():
        approx_kl = ((ratio - 1.0) - log_ratio).mean()
        clip_fraction = ((ratio - 1.0).abs() > clip_range).float().mean()
    return loss, approx_kl, clip_fraction


def value_loss(
    values: torch.Tensor,
    returns: torch.Tensor,
    old_values: torch.Tensor | None = None,
    clip_range: float | None = None,
) -> torch.Tensor:
    """``0.5 mean((V - R)^2)``; with ``clip_range`` the PPO2 clipped variant
    ``0.5 mean(max((V - R)^2, (V_old + clip(V - V_old, -c, c) - R)^2))``. Shapes ``[B]``."""
    squared = (values - returns).pow(2)
    if clip_range is None or old_values is None:
        return 0.5 * squared.mean()
    clipped = old_values + (values - old_values).clamp(-clip_range, clip_range)
    return 0.5 * torch.maximum(squared, (clipped - returns).pow(2)).mean()


def distance_intrinsic_reward(phi_next: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
    """Worker reward ``-||phi(s') - g||_2``: ``phi_next [B, G]``, ``goal [B, G]`` -> ``[B]``."""
    return -(phi_next - goal).norm(dim=-1)


def failure_outcome(reward: torch.Tensor, terminated: torch.Tensor, failed: torch.Tensor,
                    gamma: float, cost: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(reward, terminated) [B]`` with the steps where the env ended the episode without
    reaching its goal (``failed [B]``, 1.0 / 0.0) made absorbing: the step's reward less
    ``cost``, as if repeated forever, ``(reward - cost) / (1 - gamma)``, and no bootstrap.
    Without the cost a failure is worth what never reaching the goal from there is, which is
    what a Worker that seldom reaches its subgoals expects anyway (measured on the ant: -39.7
    against -41 for carrying on), so it teaches nothing; Ant-v5 gets the same margin from its
    healthy reward of 1 per step alive. A plain termination would be worse still: it ends a
    stream of negative rewards and makes failing the quickest way out."""
    failed = failed.bool()
    return (torch.where(failed, (reward - cost) / (1.0 - gamma), reward),
            torch.where(failed, torch.ones_like(terminated), terminated))


def action_cost(action: torch.Tensor, coef: float) -> torch.Tensor:
    """``coef * ||a||^2`` per row of ``action [B, A]`` (unit actions) -> ``[B]``."""
    return coef * action.square().sum(dim=-1)


def success_progress_reward(p_next: torch.Tensor, p_now: torch.Tensor) -> torch.Tensor:
    """Worker reward from a learned success predictor: ``P(reach | s', g) - P(reach | s, g)``."""
    return p_next - p_now


def goal_change_penalty(
    goal_mean: torch.Tensor, previous_goal: torch.Tensor, has_previous: torch.Tensor
) -> torch.Tensor:
    """``mean_b has_prev_b ||mu(s_b) - g_prev_b||^2`` (zero where there is no previous goal).

    Shapes: ``goal_mean [B, G]``, ``previous_goal [B, G]``, ``has_previous [B]``.
    """
    weights = has_previous.float()
    return (weights * (goal_mean - previous_goal).pow(2).sum(-1)).sum() / weights.sum().clamp_min(1)


def action_imitation_loss(log_prob: torch.Tensor) -> torch.Tensor:
    """Self-imitation of the Worker: mean negative log-likelihood of the kept actions,
    ``log_prob [B] -> []``."""
    return -log_prob.mean()


def goal_imitation_loss(mean_goal: torch.Tensor, kept_goal: torch.Tensor) -> torch.Tensor:
    """Self-imitation of the Manager: squared distance of its mean goal (what deterministic
    evaluation proposes) to the kept goal, summed over goal dims and averaged over rows,
    ``[B, G], [B, G] -> []``."""
    return (mean_goal - kept_goal).pow(2).sum(-1).mean()


def select_relabel_goals(
    candidates: torch.Tensor, log_likelihood: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """HIRO relabelling: per manager transition pick the candidate goal under which the current
    worker assigns the highest likelihood to the stored low-level actions.

    Args:
        candidates: ``[M, K, G]`` candidate goals per transition.
        log_likelihood: ``[M, K]`` ``sum_t log pi_w(a_t | s_t, candidate)`` over the period.

    Returns:
        ``(goals [M, G], chosen index [M])``.
    """
    index = log_likelihood.argmax(dim=-1)
    return candidates[torch.arange(candidates.shape[0]), index], index


def temporal_contrastive_loss(
    anchor: torch.Tensor, positive: torch.Tensor, temperature: float = 0.1
) -> torch.Tensor:
    """InfoNCE loss that pulls ``phi`` of temporally close states together.

    Row ``i`` of ``positive [B, G]`` is a state a few steps after row ``i`` of ``anchor [B, G]``;
    every other row is a negative. ``-mean_i log softmax_j(-||a_i - p_j||^2 / T)_i``.
    """
    logits = -torch.cdist(anchor, positive).pow(2) / temperature
    targets = torch.arange(anchor.shape[0], device=anchor.device)
    return torch.nn.functional.cross_entropy(logits, targets)


# ----------------------------------------------------------------- hgpo_sac's Manager batches
def hindsight_subgoals(action: torch.Tensor, achieved_unit: torch.Tensor, ratio: float,
                       generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Replace each row of the Manager's stored ``action [B, G]`` (in [-1, 1]) by the subgoal
    the Worker actually reached, ``achieved_unit [B, G]`` (clamped to [-1, 1]), with
    probability ``ratio``; returns the actions and the ``[B]`` bool mask of replaced rows."""
    swap = torch.rand(action.shape[0], generator=generator) < ratio
    return torch.where(swap[:, None], achieved_unit.clamp(-1.0, 1.0), action), swap


def penalise_missed(batch: dict[str, torch.Tensor], kept: torch.Tensor, penalty: float
                    ) -> dict[str, torch.Tensor]:
    """HAC's subgoal-testing transitions: rows whose tested subgoal was missed
    (``batch["missed"] [B]``) and kept as stored (``kept [B]`` bool; a hindsight subgoal was
    reached by definition) get reward ``penalty`` and ``terminated = 1``."""
    hit = (batch["missed"] > 0) & kept
    return {**batch, "reward": torch.where(hit, torch.full_like(batch["reward"], penalty),
                                           batch["reward"]),
            "terminated": torch.where(hit, torch.ones_like(batch["terminated"]),
                                      batch["terminated"])}


def offset_appended(obs: torch.Tensor, goal: torch.Tensor, achieved: torch.Tensor
                    ) -> torch.Tensor:
    """``[B, o + G]``: ``obs [B, o]`` with the offset still to go, ``goal - achieved [B, G]``,
    appended (what a Worker with ``worker_goal_input: relative`` reads)."""
    return torch.cat([obs, goal - achieved], dim=-1)


def relative_goal_inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """HIRO's goal transition for a Worker batch: the (possibly relabelled) absolute subgoal
    ``desired_goal [B, G]`` becomes the offset still to go, appended to each state, so
    ``obs [B, o]`` -> ``[obs, g - achieved_goal] [B, o + G]`` and ``next_obs`` ->
    ``[next_obs, g - next_achieved_goal]``; ``desired_goal`` leaves the batch. Rewards and
    terminations were computed on the absolute goal and stay."""
    out = {k: v for k, v in batch.items() if k != "desired_goal"}
    goal = batch["desired_goal"]
    out["obs"] = offset_appended(batch["obs"], goal, batch["achieved_goal"])
    out["next_obs"] = offset_appended(batch["next_obs"], goal, batch["next_achieved_goal"])
    return out


def worker_inputs(batch: dict[str, torch.Tensor], gamma: float, failure_cost: float,
                  action_cost_coef: float, relative: bool) -> dict[str, torch.Tensor]:
    """A sampled ``hgpo_sac`` Worker batch as its SAC update reads it (a new dict): steps
    marked ``failed`` made absorbing (``failure_outcome``; after HER, which recomputes
    ``terminated`` by success alone), ``action_cost`` taken off the reward, and the goal made
    relative (``relative_goal_inputs``) where the Worker reads it so."""
    batch = dict(batch)
    if "failed" in batch:
        batch["reward"], batch["terminated"] = failure_outcome(
            batch["reward"], batch["terminated"], batch.pop("failed"), gamma, failure_cost)
    if action_cost_coef > 0:
        batch["reward"] = batch["reward"] - action_cost(batch["action"], action_cost_coef)
    return relative_goal_inputs(batch) if relative else batch


def manager_inputs(batch: dict[str, torch.Tensor], achieved_unit: torch.Tensor,
                   hindsight_ratio: float, missed_penalty: float, generator: torch.Generator
                   ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """A sampled ``hgpo_sac`` Manager batch as its SAC update reads it (a new dict): a
    ``hindsight_ratio`` share of subgoals replaced by ``achieved_unit [B, G]`` (what the
    Worker achieved, as a [-1, 1] action; ``hindsight_subgoals``), then, with a ``missed``
    field, tested subgoals kept and missed given ``missed_penalty`` (``penalise_missed``).
    Returns ``(batch, swapped [B] bool)``."""
    batch = dict(batch)
    batch["action"], swapped = hindsight_subgoals(batch["action"], achieved_unit,
                                                  hindsight_ratio, generator)
    if "missed" in batch:
        batch = penalise_missed(batch, ~swapped, missed_penalty)
    return batch, swapped

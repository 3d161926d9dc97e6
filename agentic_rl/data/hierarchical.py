"""Period bookkeeping for two-level (Manager / Worker) rollouts.

HGPO's ``act`` stores ``new_goal [T, N]`` (the Manager chose a goal at this step) with every
transition. From it and the episode flags this module derives both levels' views of a rollout:

* Worker: a goal-conditioned episode is one period; ``period_end`` cuts its GAE (bootstrapping
  from ``V(s', g)`` unless the environment terminated).
* Manager: one transition per period, from the step that chose the goal to the period's end, with
  the external reward summed over the period.

A rollout must start a period in every env at step 0 (HGPO re-proposes goals after each update),
so no period straddles two rollouts.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def period_ends(new_goal: torch.Tensor, dones: torch.Tensor) -> torch.Tensor:
    """``[T, N]`` bool: step ``t`` is the last of its period (next step picks a new goal, the
    episode ended, or the rollout ends)."""
    ends = dones.bool().clone()
    ends[:-1] |= new_goal[1:].bool()
    ends[-1] = True
    return ends


def period_sums(values: torch.Tensor, start_t: torch.Tensor, end_t: torch.Tensor,
                env: torch.Tensor) -> torch.Tensor:
    """``values [T, N]`` summed over each period ``start_t[m] .. end_t[m]`` of env ``env[m]``:
    ``[M]``."""
    cumulative = values.cumsum(0)
    return cumulative[end_t, env] - cumulative[start_t, env] + values[start_t, env]


@dataclass
class ManagerSegments:
    """Manager transitions ``[M]`` ordered by env, then time, and the step -> transition map."""

    start_t: torch.Tensor  # [M] step at which the goal was chosen
    env: torch.Tensor  # [M] env index
    end_t: torch.Tensor  # [M] last step of the period
    reward_sum: torch.Tensor  # [M] external reward summed over the period
    terminated: torch.Tensor  # [M] bool, the episode terminated at end_t
    done: torch.Tensor  # [M] bool, the manager's trajectory is cut after this transition
    step_segment: torch.Tensor  # [T, N] long, the transition each step belongs to


def manager_segments(
    new_goal: torch.Tensor, dones: torch.Tensor, terminated: torch.Tensor, rewards: torch.Tensor
) -> ManagerSegments:
    """Group steps into Manager periods.

    Args:
        new_goal: ``[T, N]`` bool, True where a goal was chosen (must be all True at ``t = 0``).
        dones: ``[T, N]`` bool, episode ended (terminated or truncated).
        terminated: ``[T, N]`` bool.
        rewards: ``[T, N]`` external rewards.

    Returns:
        The ``ManagerSegments``; ``done`` is set where the episode ended or the rollout ran out.
    """
    steps = new_goal.shape[0]
    new_goal = new_goal.bool()
    if not new_goal[0].all():
        raise ValueError("every env must choose a goal at the first step of a rollout")
    ends = period_ends(new_goal, dones)
    end_index = torch.empty_like(new_goal, dtype=torch.long)
    end_index[-1] = steps - 1
    for t in range(steps - 2, -1, -1):
        end_index[t] = torch.where(ends[t], t, end_index[t + 1])
    env, start_t = new_goal.T.nonzero(as_tuple=True)  # (n, t) pairs sorted by n, then t
    end_t = end_index[start_t, env]
    reward_sum = period_sums(rewards, start_t, end_t, env)
    step_segment = (new_goal.T.reshape(-1).long().cumsum(0) - 1).reshape(new_goal.shape[1], steps).T
    return ManagerSegments(
        start_t=start_t,
        env=env,
        end_t=end_t,
        reward_sum=reward_sum,
        terminated=terminated.bool()[end_t, env],
        done=dones.bool()[end_t, env] | (end_t == steps - 1),
        step_segment=step_segment,
    )


def period_end_values(values: torch.Tensor, seg: ManagerSegments) -> torch.Tensor:
    """``values [T, N, ...]`` as each step's period left them: row ``(t, n)`` gets the value at
    the last step of its period (HAC's hindsight goal, with ``values`` the goal-space state
    reached after each step)."""
    segment = seg.step_segment
    return values[seg.end_t[segment], seg.env[segment]]

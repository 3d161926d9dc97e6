"""Replay storage of the flat off-policy learners (SAC, OPD, TD3): the online replay, a demo
replay mixed into batches by its share of all stored transitions, HER at sample time, and one
prototype buffer per skill (filled by demos, passed curriculum stages and the agent's own
successful episodes) for a distillation batch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from agentic_rl.data.checkpoint import prefixed, with_prefix
from agentic_rl.data.priorities import Priorities, importance_weights
from agentic_rl.data.prototypes import PrototypeBuffer
from agentic_rl.data.replay import ReplayBuffer
from agentic_rl.data.phase_skills import PhaseSkills
from agentic_rl.data.skills import SkillManager
from agentic_rl.data.storage import StepRecord, StorageSpec

DEFAULT_SKILL = "default"


@dataclass(frozen=True)
class ReplaySettings:
    """What the algorithm decides about its replay.

    ``prototype_batch_size`` adds ``batch["prototype"]`` (the current skill's prototypes) to
    every batch; ``self_prototypes`` keeps the agent's successful episodes as prototypes."""

    obs_dim: int
    goal_dim: int
    act_dim: int
    batch_size: int
    updates_per_step: int
    her: Any  # algos.sac.HERConfig
    prototype_batch_size: int | None = None
    self_prototypes: bool = False
    self_prototype_capacity: int = 0
    prototype_capacity: int = 100_000
    prototype_sampling: str = "uniform"
    prioritized: Any = None  # algos.sac_config.PrioritizedReplayConfig; None: uniform replay


def replay_shapes(obs_dim: int, goal_dim: int, act_dim: int) -> dict[str, tuple[int, ...]]:
    obs, goal, act = (obs_dim,), (goal_dim,), (act_dim,)
    return {"obs": obs, "next_obs": obs, "achieved_goal": goal, "desired_goal": goal,
            "next_achieved_goal": goal, "action": act}


def her_kwargs(her, goal_fns) -> dict:
    """``ReplayBuffer.sample`` arguments for a ``HERConfig`` on an env's goal functions
    (``terminated`` is relabelled only where reaching the goal ends the episode)."""
    return dict(her_strategy=her.strategy, relabel_ratio=her.relabel_ratio,
                reward_fn=goal_fns.reward_fn,
                success_fn=goal_fns.success_fn if goal_fns.terminates_on_success else None)


def episode_states(steps: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every state of a stored episode, the final one included (what ``SAC.observe`` takes)."""
    return {"observation": torch.cat([steps["obs"], steps["next_obs"][-1:]]),
            "achieved_goal": torch.cat([steps["achieved_goal"], steps["next_achieved_goal"][-1:]]),
            "desired_goal": steps["desired_goal"]}


class ReplayStorage:
    """See the module docstring. ``demos`` is the learner's demonstration settings
    (``algos.sac_config.DemoConfig``: demo file, skills).

    With ``settings.prioritized`` the online and the demo replay each draw by priority
    (``data.priorities``), the demo share of a batch stays what it is uniformly, and batches
    carry ``weight [B]`` (importance-sampling weights, normalised by the batch's largest) and
    ``index [B]``; the learner writes ``td_error [B]`` into the batch, and the loop hands it
    back to ``update_priorities``. A HER-relabelled sample's TD error is the one for its new
    goal: a stored transition's priority is the TD error of the goal it was last drawn with,
    so it estimates how much the transition still teaches over the goals HER gives it."""

    def __init__(self, spec: StorageSpec, settings: ReplaySettings, demos: Any) -> None:
        self.spec, self.settings, self.demos = spec, settings, demos
        shapes = replay_shapes(settings.obs_dim, settings.goal_dim, settings.act_dim)
        capacity = max(spec.buffer_size // spec.num_envs, spec.horizon + 1)
        self.replay = ReplayBuffer(capacity, spec.num_envs, shapes)
        self.replay.priorities = self.new_priorities(self.replay.slots)
        self.demo_replay: ReplayBuffer | None = None
        self.env_steps = 0  # the latest ``owed`` call's (anneals the weights' exponent)
        names = [s.name for s in demos.skills] or [DEFAULT_SKILL]
        self.skills = SkillManager(names, demos.skill_selection,
                                   {s.name: s.task_ids for s in demos.skills})
        self.phase_skills = None if demos.phase_skills is None else PhaseSkills(
            demos.phase_skills.task, demos.phase_skills.selection, settings.prototype_capacity,
            settings.prototype_sampling)
        self.prototypes = self.phase_skills.prototypes if self.phase_skills is not None else {
            name: PrototypeBuffer(settings.prototype_capacity, settings.prototype_sampling)
            for name in names}
        self.her = her_kwargs(settings.her, spec.goal_fns)  # ReplayBuffer.sample arguments
        self.task_id = spec.task_id
        self.current_skills = [self.skills.select(self.task_id) for _ in range(spec.num_envs)]
        self.goals: torch.Tensor | None = None  # the current episodes' goals (goal sampling)
        self.updates_done = 0
        # batch -> cost [B], for constrained learners (computed at sample time, like HER's
        # reward: from the raw stored transition)
        self.cost_fn: Callable[[dict[str, torch.Tensor]], torch.Tensor] | None = None

    @property
    def warm(self) -> bool:
        return self.demo_replay is not None

    # ------------------------------------------------------------------------- demos
    def add_demos(self, episodes: list[tuple[str, dict[str, torch.Tensor], bool, float]]) -> None:
        """``(skill, episode fields [L, ...] with unit actions, success, return)`` per demo:
        successes become expert prototypes of their skill; all go to the demo replay when
        ``prototypes_in_replay``."""
        for skill, episode, success, episode_return in episodes:
            if success:
                self.keep_prototype(skill, episode, "expert", episode_return)
        if self.demos.prototypes_in_replay and episodes:
            total = sum(int(e["reward"].shape[0]) for _, e, _, _ in episodes)
            self.demo_replay = ReplayBuffer(total, 1, replay_shapes(
                self.settings.obs_dim, self.settings.goal_dim, self.settings.act_dim))
            self.demo_replay.priorities = self.new_priorities(self.demo_replay.slots)
            for _, episode, _, _ in episodes:
                self.demo_replay.add_episode(episode)

    # ------------------------------------------------------------------------- writing
    def add(self, step: StepRecord) -> list[dict[str, torch.Tensor]]:
        self.replay.add(step.transition, step.episode_end)
        self.goals = step.next_obs["desired_goal"]
        observed = []
        for episode in step.finished:
            steps = self.replay.last_episode(episode.env_index)
            observed.append(episode_states(steps))
            skill = self.current_skills[episode.env_index]
            self.skills.feedback(skill, episode.success)
            if episode.success and self.settings.self_prototypes:
                self.keep_prototype(skill, steps, "self", episode.episode_return)
            self.current_skills[episode.env_index] = self.skills.select(self.task_id)
        return observed

    def keep_prototype(self, skill: str, episode: dict[str, torch.Tensor], source: str,
                       episode_return: float) -> None:
        """A successful episode (fields ``[L, ...]``) as prototypes of ``skill``, or cut into
        phase skills."""
        if self.phase_skills is not None:
            self.phase_skills.add_episode(episode, source, episode_return)
        else:
            task_id = (self.task_id or skill) if source == "self" else skill
            self.prototypes[skill].add_episode(episode, source, task_id=task_id,
                                               episode_return=episode_return)
        if source == "self":
            for buffer in self.prototypes.values():
                buffer.cap_source("self", self.settings.self_prototype_capacity)

    def abandon(self, envs: np.ndarray) -> None:
        """The episodes in progress in ``envs`` (``[N]`` bool) will never finish (their rollout
        worker died): their rows are never sampled, and those envs start with a new skill."""
        self.replay.drop_unfinished(envs)
        for env in np.flatnonzero(envs).tolist():
            self.current_skills[env] = self.skills.select(self.task_id)

    def set_task(self, task_id: str, finished_stage: list[dict[str, torch.Tensor]]) -> None:
        for episode in finished_stage:
            for buffer in self.prototypes.values():
                buffer.add_episode(episode, "curriculum", task_id=self.task_id,
                                   episode_return=float(episode["return"]))
        self.task_id = task_id

    def new_priorities(self, slots: int) -> Priorities | None:
        config = self.settings.prioritized
        return None if config is None else Priorities(slots, config.alpha, config.epsilon)

    # ------------------------------------------------------------------------- reading
    def owed(self, env_steps: int, new_steps: int) -> list[None]:
        self.env_steps = env_steps
        if env_steps < self.spec.learning_starts:
            return []
        return [None] * (self.settings.updates_per_step * new_steps)

    def sample(self, request: None, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """A replay batch (demos mixed in by their share) with HER relabelling, plus the
        current skill's prototype batch where the algorithm asked for one."""
        size = self.settings.batch_size
        online = self.replay.num_sampleable()
        demos = self.demo_replay.num_sampleable() if self.demo_replay is not None else 0
        demo_count = round(size * demos / max(online + demos, 1))
        parts = []
        if size - demo_count > 0:
            parts.append(self.draw(self.replay, size - demo_count, online, generator, 0))
        if demo_count > 0:
            parts.append(self.draw(self.demo_replay, demo_count, demos, generator,
                                   self.replay.slots))
        batch = {k: torch.cat([p[k] for p in parts]) for k in parts[0]} if len(parts) > 1 \
            else parts[0]
        if self.settings.prioritized is not None:
            batch["weight"] = (batch["weight"] / batch["weight"].max()).float()
        if self.cost_fn is not None:
            batch["cost"] = self.cost_fn(batch)
        if self.settings.prototype_batch_size is not None and self.phase_skills is not None:
            prototype = self.phase_skills.prototype_batch(
                batch["obs"], batch["desired_goal"], self.settings.prototype_batch_size,
                generator)
            if prototype is not None:
                batch["prototype"] = prototype
        elif self.settings.prototype_batch_size is not None:
            skill = self.current_skills[self.updates_done % len(self.current_skills)]
            buffer = self.prototypes[skill]
            if len(buffer) > 0:
                goals = self.goals if buffer.sampling == "goal" else None
                batch["prototype"] = buffer.sample(self.settings.prototype_batch_size,
                                                   generator, goals)
        self.updates_done += 1
        return batch

    def draw(self, buffer: ReplayBuffer, count: int, sampleable: int,
             generator: torch.Generator, offset: int) -> dict[str, torch.Tensor]:
        """``count`` transitions of ``buffer`` (which holds ``sampleable``), uniformly or by
        priority (then with unnormalised ``weight`` and ``index`` = ``offset`` + the buffer's
        flat slot)."""
        if buffer.priorities is None:
            return buffer.sample(count, generator, **self.her)
        flat, probability = buffer.priorities.sample(count, generator)
        batch = buffer.sample(count, generator, **self.her, flat=flat)
        batch["weight"] = importance_weights(probability, sampleable, self.beta())
        batch["index"] = flat + offset
        return batch

    def beta(self) -> float:
        """The importance-sampling exponent: linear from its start value to 1 over the run."""
        start = self.settings.prioritized.beta
        progress = min(1.0, self.env_steps / max(self.spec.total_timesteps, 1))
        return start + (1.0 - start) * progress

    def update_priorities(self, index: torch.Tensor, td_error: torch.Tensor) -> None:
        """The TD errors ``[B]`` a learner measured on the batch with ``index [B]``."""
        online_slots = self.replay.slots
        demo = index >= online_slots
        self.replay.priorities.update(index[~demo], td_error[~demo])
        if demo.any():
            self.demo_replay.priorities.update(index[demo] - online_slots, td_error[demo])

    def metrics(self) -> dict[str, float]:
        metrics = self.skills.metrics() if self.phase_skills is None else \
            self.phase_skills.metrics()
        if self.settings.prioritized is not None:
            metrics |= {"replay/beta": self.beta(),
                        "replay/max_priority": self.replay.priorities.max_priority}
        return metrics

    # ------------------------------------------------------------------------- state
    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays = with_prefix(self.replay.state_arrays(), "replay")
        if self.demo_replay is not None:
            arrays |= with_prefix(self.demo_replay.state_arrays(), "demo_replay")
        for name, buffer in self.prototypes.items():
            arrays |= with_prefix(buffer.state_arrays(), f"prototypes.{name}")
        for name, buffer in (("replay", self.replay), ("demo_replay", self.demo_replay)):
            if buffer is not None and buffer.priorities is not None:
                used = len(buffer)  # slots written so far
                arrays |= with_prefix(buffer.priorities.state_arrays(used), f"{name}.priorities")
        meta = {"skills": self.skills.state_dict(), "current_skills": self.current_skills,
                "task_id": self.task_id, "updates_done": self.updates_done,
                "goals": None if self.goals is None else self.goals.tolist()}
        return arrays, meta

    def load_state(self, arrays: dict[str, np.ndarray], meta: dict[str, Any],
                   exact: bool) -> None:
        self.replay.load_state_arrays(prefixed(arrays, "replay"))
        if self.demo_replay is not None:
            self.demo_replay.load_state_arrays(prefixed(arrays, "demo_replay"))
        for name, buffer in self.prototypes.items():
            buffer.load_state_arrays(prefixed(arrays, f"prototypes.{name}"))
        for name, buffer in (("replay", self.replay), ("demo_replay", self.demo_replay)):
            if buffer is not None and buffer.priorities is not None:
                if f"{name}.priorities/leaves" not in arrays:
                    raise ValueError("the checkpoint was saved without prioritized replay; "
                                     "resume it with the same algorithm.prioritized setting")
                buffer.priorities.load_state_arrays(prefixed(arrays, f"{name}.priorities"))
        self.skills.load_state_dict(meta["skills"])
        self.current_skills = list(meta["current_skills"])
        self.task_id, self.updates_done = meta["task_id"], int(meta["updates_done"])
        self.goals = None if meta["goals"] is None else torch.tensor(meta["goals"])
        if not exact:
            self.replay.drop_unfinished()


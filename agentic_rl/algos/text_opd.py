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

import dataclasses
from typing import Any

import numpy as np
import torch
from torch import nn

from agentic_rl.algos.base import ActMode, check_mode, check_own_action
from agentic_rl.algos.spaces import resolve_device
from agentic_rl.algos.schedule import value_at
from agentic_rl.algos.text_manager import LearnedManagerTrainer, success_rewards
from agentic_rl.algos.text_losses import command_cross_entropy, step_advantages
from agentic_rl.algos.text_opd_config import ManagerConfig, TextOPDConfig
from agentic_rl.algos.text_opd_update import group_update
from agentic_rl.data.storage import StorageSpec
from agentic_rl.data.text_episode_arrays import with_final_step
from agentic_rl.data.text_episodes import TextEpisode, collate, episodes_from_demos
from agentic_rl.data.text_storage import (IMITATE, TextBatch, TextEpisodeStorage,
                                          TextStorageSettings)
from agentic_rl.data.text_table import TextTable
from agentic_rl.nets.text import TextPolicy
from agentic_rl.nets.text_manager import TextManager

__all__ = ["ManagerConfig", "TextOPD", "TextOPDConfig"]
POLICY_INPUTS = ("task", "observation", "inventory", "previous_command", "subgoal", "commands",
                 "history", "match")


class TextOPD:
    """The learner: a :class:`~agentic_rl.nets.text.TextPolicy` and its optimiser, in the shared
    loop (``algos.base.Algorithm``). Observations are the integer inputs of
    ``collect.text_inputs``; the recurrent state is the policy's GRU memory ``[1, N, H]``.

    Args:
        config: hyper-parameters.
        table: the text table shared with the envs (row ids -> frozen embeddings).
        generator: seeds action sampling and minibatch shuffling.
        device: where the policy lives and updates run (actions come back on the CPU).
    """

    def __init__(self, config: TextOPDConfig, table: TextTable, generator: torch.Generator,
                 device: str | torch.device = "cpu", manager: TextManager | None = None):
        self.config, self.table, self.generator = config, table, generator
        self.device = torch.device(device)
        self.policy = TextPolicy(table.dim, config.hidden, config.memory,
                                 subgoal=config.manager is not None,
                                 success_head=config.success_predictor > 0,
                                 object_match=config.object_match,
                                 take_back=config.take_back,
                                 object_memory=config.object_memory,
                                 avoid_revisits=config.avoid_revisits).to(self.device)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=config.lr)
        # the learned Manager stays on the CPU: the envs' planner runs the same object
        self.manager = (LearnedManagerTrainer(manager, table, config.lr, config.manager.period,
                                              config.manager.dagger) if manager else None)
        self.updates = 0
        self._device_table = torch.zeros(0, table.dim, device=self.device)

    @classmethod
    def build_envs(cls, config: Any, part: tuple[int, int] | None = None) -> tuple[Any, Any]:
        """Training envs (``games_per_iteration x group_size`` schedule slots, or rollout
        worker ``part=(index, count)``'s share of them) and the held-out eval env."""
        from agentic_rl.collect.text_envs import build_text_envs
        from agentic_rl.envs.make import check_text_env

        check_text_env(config.environment.name)
        manager = config.algorithm.manager
        if manager is not None and manager.planner == "learned" and config.training.rollout_workers:
            raise ValueError("the learned text Manager trains in the learner's process and its "
                             "envs' planner reads the same network: it cannot run with "
                             "training.rollout_workers")
        if not config.algorithm.prototype_data_path:
            raise ValueError("text_opd needs algorithm.prototype_data_path: an ALFWorld "
                             "demonstration file from `agentic-rl demos --env "
                             "agentic_rl/ALFWorld-v0`")
        return build_text_envs(config.algorithm, dict(config.environment.kwargs),
                               config.training.seed, part)

    @classmethod
    def from_config(cls, config: Any, env: Any) -> "TextOPD":
        generator = torch.Generator().manual_seed(config.training.seed)
        manager = config.algorithm.manager
        net = None
        if manager is not None and manager.planner == "learned":
            net = getattr(getattr(env, "planner", None), "net", None)
            if net is None:
                raise ValueError("manager.planner=learned: the envs were built without the "
                                 "learned Manager's planner")
        return cls(config.algorithm, env.table, generator,
                   resolve_device(config.training.device), net)

    def make_storage(self, spec: StorageSpec) -> TextEpisodeStorage:
        """Demonstrations as prototypes, then the phases of ``data.text_storage``."""
        c = self.config
        paths = c.prototype_data_path
        demos = [e for path in ([paths] if isinstance(paths, str) else paths)
                 for e in episodes_from_demos(path, self.table, c.max_commands) if e.success]
        if self.manager is not None:  # and the Worker imitates under hindsight subgoals
            self.manager.set_demos(demos)
        elif c.manager is not None:  # the expert reaches its planner subgoal on every step
            for e in demos:
                e.subgoal = e.commands[np.arange(len(e)), e.action]
        settings = TextStorageSettings(c.bc_steps, c.dagger_rounds, c.dagger_steps,
                                       c.distill_batch_episodes, c.self_prototype_capacity,
                                       c.rl != "none")
        return TextEpisodeStorage(spec.num_envs, self.table, demos, settings, spec.seed)

    def opd_alpha(self) -> float:
        return value_at(self.config.opd_alpha, self.updates)

    def embeddings(self) -> torch.Tensor:
        """The table's embeddings on the learner's device (new rows copied as they appear)."""
        table = self.table.tensor()
        if self.device.type == "cpu":
            return table
        if len(self._device_table) < len(table):
            new = table[len(self._device_table):].to(self.device)
            self._device_table = torch.cat([self._device_table, new])
        return self._device_table

    @torch.no_grad()
    def act(self, obs: dict[str, torch.Tensor], state: Any, mode: ActMode
            ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Commands for N envs; ``state`` is the memory ``[1, N, H]`` (reset where
        ``obs["is_first"]``). Envs in an episode the expert labels (``obs["labelled"]``) play
        greedily while exploring: DAgger labels the states the deployed policy reaches.
        Extras: ``unit_action``, ``log_prob`` and ``value`` ``[N]``."""
        check_mode(mode)
        table = self.embeddings()
        step = {key: obs[key][:, None].to(self.device) for key in POLICY_INPUTS}
        step["command_mask"] = obs["action_mask"][:, None].to(self.device)
        if self.policy.use_subgoal:
            step["subgoal"] = table[step["subgoal"]]
        count = obs["task"].shape[0]
        memory = self.policy.initial_state(count).to(self.device) if state is None else state
        if "is_first" in obs:
            memory = memory * (~obs["is_first"]).to(self.device, torch.float32)[None, :, None]
        logits, values, memory = self.forward(step, memory)
        log_prob = torch.log_softmax(logits[:, 0], -1)
        if mode == "deterministic":
            action = log_prob.argmax(-1)
        else:
            probs = logits[:, 0].isfinite().float() if mode == "random" else log_prob.exp()
            action = torch.multinomial(probs.cpu(), 1, generator=self.generator).squeeze(-1)
            action = action.to(self.device)
            if mode == "explore" and "labelled" in obs:  # DAgger: the states greedy play reaches
                greedy = obs["labelled"].to(self.device).bool()
                action = torch.where(greedy, log_prob.argmax(-1), action)
        chosen = log_prob.gather(-1, action[:, None]).squeeze(-1)
        action = action.cpu()
        return action, memory, {"unit_action": action, "log_prob": chosen.cpu(),
                                "value": values[:, 0].cpu()}

    def executed(self, extras: dict[str, torch.Tensor], env_action: torch.Tensor
                 ) -> dict[str, torch.Tensor]:
        return check_own_action(lambda action: action, extras, env_action)

    @torch.no_grad()
    def observe(self, episode: TextEpisode) -> None:
        """Value the state a truncated episode stopped in (its PPO bootstrap)."""
        final, episode.final = episode.final, None
        if final is None or self.config.rl != "ppo":
            return
        extended = with_final_step(episode, final)
        batch = self.collated([extended])
        _, values, _ = self.forward(batch)
        episode.bootstrap_value = float(values[0, len(episode)])

    def update(self, batch: TextBatch) -> dict[str, float]:
        """An imitation step (``batch.kind == "imitate"``) or a group update."""
        if self.manager is not None:
            self.manager.absorb(batch.labelled)
        if batch.kind == IMITATE:
            metrics = self.imitation_step(batch.episodes)
            if self.manager is not None:
                metrics |= self.manager.imitation_step(self.generator)
            return metrics
        return group_update(self, batch.episodes, batch.prototypes)

    def forward(self, batch: dict[str, torch.Tensor], memory: torch.Tensor | None = None,
                success: bool = False):
        """The policy's forward pass, with the object feature added to ``batch`` if used."""
        if self.policy.object_embed is not None:
            flags = self.table.object_in_task(batch["task"].cpu(), batch["commands"].cpu())
            batch = {**batch, "object": flags.to(self.device)}
        return self.policy(self.embeddings(), batch, memory, success)

    def collated(self, episodes: list[TextEpisode]) -> dict[str, torch.Tensor]:
        """``collate``'s padded ``[E, T, ...]`` batch of ``episodes`` on the learner's device,
        subgoal ids turned into table vectors when a Manager is configured."""
        subgoals = self.table.tensor() if self.config.manager is not None else None
        batch = collate(episodes, subgoals, self.table.texts)
        return {key: value.to(self.device) for key, value in batch.items()}

    # ------------------------------------------------------------------ losses (the group
    # update's epochs: ``text_opd_update``)
    @torch.no_grad()
    def success_signals(self, episodes: list[TextEpisode]
                        ) -> tuple[list[np.ndarray], np.ndarray]:
        """Shaped rewards and success labels (``text_manager.success_rewards``) from the
        predictor's chances on every step of ``episodes``."""
        batch = self.collated(episodes)
        chance = torch.sigmoid(self.forward(batch, success=True)[3]).cpu()
        return success_rewards(self.table.texts, episodes, chance.numpy(),
                               self.config.manager.period, self.config.success_predictor)

    def distill_loss(self, prototypes: list[TextEpisode]) -> torch.Tensor:
        """Cross-entropy toward the prototype commands of a batch of episodes."""
        batch = self.collated(prototypes)
        logits, _, _ = self.forward(batch)
        mask = batch["step_mask"]
        logits, target = logits[mask], batch["action"][mask]
        # a prototype command the policy masks (avoid_revisits) cannot be imitated
        allowed = logits.gather(-1, target[:, None]).squeeze(-1).isfinite()
        return command_cross_entropy(logits, target, allowed)

    def advantages(self, episodes: list[TextEpisode], rewards: list[np.ndarray] | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
        """Per-step ``(advantages, returns)`` in episode order (``text_losses.step_advantages``);
        ``rewards`` replaces the episodes' own (shaped rewards)."""
        if rewards is not None:
            episodes = [dataclasses.replace(e, reward=r) for e, r in zip(episodes, rewards)]
        return step_advantages(episodes, self.config)

    def gradient_step(self, loss: torch.Tensor) -> None:
        """One optimiser step on ``loss`` (0-dim), gradients clipped to ``max_grad_norm``."""
        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.policy.parameters(), self.config.max_grad_norm)
        self.optimizer.step()

    def imitation_step(self, prototypes: list[TextEpisode]) -> dict[str, float]:
        """One gradient step of cross-entropy only (behaviour cloning)."""
        if not prototypes:
            return {}
        loss = self.distill_loss(prototypes)
        self.gradient_step(loss)
        return {"losses/distill_loss": float(loss.detach())}

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, Any]:
        state = {"policy": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(),
                 "updates": self.updates, "generator": self.generator.get_state()}
        if self.manager is not None:
            state["manager"] = self.manager.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Also loads a model folder (``models/alfworld``, ``RUN_DIR/best``): the policy alone."""
        self.policy.load_state_dict(state["policy"])
        if self.manager is not None:
            self.manager.load_state_dict(state["manager"])
        if "optimizer" in state:
            self.optimizer.load_state_dict(state["optimizer"])
        if "generator" in state:
            self.generator.set_state(state["generator"])
        self.updates = int(state.get("updates", 0))


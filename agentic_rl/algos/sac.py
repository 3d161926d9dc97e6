"""Soft Actor-Critic (SPEC A1) for goal-conditioned and plain continuous control.

Twin Q as one batched ensemble, target critic updated with one fused ``lerp`` per step (inside
the fused C++ call where that runs), automatic entropy tuning. Observations arrive raw; the
normalisers inside the agent scale them.
Actions live in [-1, 1] inside the agent (``batch["action"]`` too) and are rescaled to the
environment's bounds only in ``act``.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from typing import Any

import gymnasium as gym
import torch

from agentic_rl.algos import losses, sac_fused, sac_grads
from agentic_rl.algos.base import ActMode, check_mode
from agentic_rl.algos.optim import FusedAdam, merge_optimizer_states
from agentic_rl.algos.sac_config import PrototypeBufferConfig, SACConfig
from agentic_rl.algos.spaces import ActionBox, flat_learner_from_config, shrunk_box
from agentic_rl.data.replay_demos import build_replay_storage
from agentic_rl.data.replay_storage import ReplaySettings, ReplayStorage
from agentic_rl.data.storage import StorageSpec
from agentic_rl.nets.actors import TanhGaussianActor
from agentic_rl.nets.critics import EnsembleQ, frozen_alias
from agentic_rl.nets.normalizer import RunningNormalizer

Batch = dict[str, Any]


class SAC:
    """SAC learner. ``update(batch)`` expects tensors ``obs [B, o]``, ``action [B, a]`` in
    [-1, 1], ``reward [B]``, ``next_obs [B, o]``, ``terminated [B]`` and, for goal tasks,
    ``desired_goal [B, g]`` (the goal the transition is evaluated against).
    """

    def __init__(self, config: SACConfig, spaces: dict[str, Any], device: str = "cpu",
                 clip_obs: float = 5.0, normalize: tuple[bool, bool] = (True, True)) -> None:
        self.config, self.device = config, torch.device(device)
        obs_dim, goal_dim, act_dim = spaces["obs_dim"], spaces["goal_dim"], spaces["act_dim"]
        self.action_box = ActionBox(*shrunk_box(spaces["action_low"], spaces["action_high"],
                                                config.action_bound))
        self.action_low, self.action_high = self.action_box.low, self.action_box.high
        self.obs_normalizer = RunningNormalizer(obs_dim, clip_obs, enabled=normalize[0])
        self.goal_normalizer = RunningNormalizer(max(goal_dim, 1), clip_obs, enabled=normalize[1])
        self.goal_conditioned = goal_dim > 0
        in_dim = obs_dim + goal_dim
        self.actor = TanhGaussianActor(in_dim, act_dim, config.hidden_sizes, config.activation)
        self.critic = EnsembleQ(in_dim, act_dim, config.hidden_sizes, config.num_q)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        for module in self.modules().values():
            module.to(self.device)
        self.log_alpha = torch.tensor(float(config.init_alpha), device=self.device).log()
        self.log_alpha.requires_grad_(True)
        self.target_entropy = (-float(act_dim) if config.target_entropy == "auto"
                               else float(config.target_entropy))
        # The actor loss reads Q through these aliases of the critic's weights, which take no
        # gradient, so critic, actor and temperature losses share one backward pass.
        self.frozen_critic = frozen_alias(self.critic)
        # One fused Adam over three parameter groups: one optimiser call per update.
        self.optimizer = FusedAdam(
            [{"params": self.actor.parameters(), "lr": config.actor_lr},
             {"params": self.critic.parameters(), "lr": config.critic_lr},
             {"params": [self.log_alpha], "lr": config.alpha_lr}])
        self.online_params = list(self.critic.parameters())
        self.target_params = list(self.target_critic.parameters())
        self.generator = torch.Generator(device=self.device)
        self.num_updates = 0
        # Hand-written gradients where sac_grads covers the networks (ReLU actor and critic)
        # and the losses; otherwise the autograd update (the reference), announced once.
        self.reference_reason = sac_grads.reference_reason(self)
        self.manual_gradients = self.reference_reason is None
        self.announced: set[str] = set()
        self.fused_update: bool | None = None if config.fused_update else False  # None: not yet
        self.fused_calls: sac_fused.FusedSAC | None = None

    @classmethod
    def from_config(cls, config: Any, env: gym.Env) -> SAC:
        """The learner of an experiment config (``ExperimentConfig``) for ``env``'s spaces."""
        return flat_learner_from_config(cls, config, env)

    # ----------------------------------------------------------------------------- acting
    def modules(self) -> dict[str, torch.nn.Module]:
        """Every module whose parameters or buffers belong in a checkpoint."""
        return {"actor": self.actor, "critic": self.critic, "target_critic": self.target_critic,
                "obs_normalizer": self.obs_normalizer, "goal_normalizer": self.goal_normalizer}

    def policy_input(self, obs: torch.Tensor, goal: torch.Tensor | None) -> torch.Tensor:
        """``[B, obs_dim + goal_dim]``: normalised observation, then normalised goal."""
        if not self.goal_conditioned:
            return self.obs_normalizer(obs)
        return torch.cat([self.obs_normalizer(obs), self.goal_normalizer(goal)], dim=-1)

    def unit_to_env(self, action: torch.Tensor) -> torch.Tensor:
        """Map [-1, 1] actions to the environment's box."""
        return self.action_box.to_env(action)

    def env_to_unit(self, action: torch.Tensor) -> torch.Tensor:
        """Inverse of ``unit_to_env`` (used to load demonstrations recorded in env units)."""
        return self.action_box.to_unit(action)

    @torch.no_grad()
    def act(self, obs: dict[str, torch.Tensor], state: Any = None, mode: ActMode = "explore"):
        """Actions ``[N, act_dim]`` in env units plus ``extras["unit_action"]`` in [-1, 1]."""
        check_mode(mode)
        if mode == "random":
            shape = (obs["observation"].shape[0], self.action_low.shape[0])
            unit = (torch.rand(shape, generator=self.generator, device=self.device) * 2 - 1).cpu()
            return self.unit_to_env(unit), state, {"unit_action": unit}
        deterministic = mode == "deterministic"
        fused = self.fused()
        if fused is not None:
            unit = fused.act(obs["observation"], obs.get("desired_goal"), deterministic)
        else:
            x = self.policy_input(obs["observation"].to(self.device),
                                  obs.get("desired_goal", torch.empty(0)).to(self.device))
            unit = (self.actor.deterministic(x) if deterministic
                    else self.actor.sample_action(x, self.generator)).cpu()
        return self.unit_to_env(unit), state, {"unit_action": unit}

    def executed(self, extras: dict[str, torch.Tensor], env_action: torch.Tensor
                 ) -> dict[str, torch.Tensor]:
        return {**extras, "unit_action": self.env_to_unit(env_action)}

    def distill_batch_size(self) -> int | None:
        """Prototype transitions per batch (``None``: SAC distils nothing)."""
        return None

    def make_storage(self, spec: StorageSpec) -> ReplayStorage:
        """Replay with HER, plus demos and prototypes where configured (OPD always)."""
        cfg, distill = self.config, self.distill_batch_size()
        buffers = cfg if isinstance(cfg, PrototypeBufferConfig) else PrototypeBufferConfig()
        return build_replay_storage(spec, ReplaySettings(
            self.obs_normalizer.mean.shape[0], self.goal_normalizer.mean.shape[0]
            if self.goal_conditioned else 0, self.action_low.shape[0], cfg.batch_size,
            cfg.updates_per_step, cfg.her, distill, distill is not None and buffers.self_prototypes,
            buffers.self_prototype_capacity, buffers.prototype_capacity,
            buffers.prototype_sampling, cfg.prioritized), cfg, self.env_to_unit, self.observe)

    def observe(self, obs: dict[str, torch.Tensor]) -> None:
        """Update the normaliser statistics with raw observations ``[T, ...]`` (the loop calls
        this once per finished episode; goal statistics use desired and achieved goals)."""
        self.obs_normalizer.update(obs["observation"])
        if self.goal_conditioned:
            self.goal_normalizer.update(torch.cat([obs["desired_goal"], obs["achieved_goal"]]))

    def fused(self) -> sac_fused.FusedSAC | None:
        """The C++ calls for acting and updating, where ``fused_update`` is on and
        ``sac_grads`` covers the networks; decided (and built, which may compile) at first use."""
        if self.fused_update is None:
            self.fused_update = self.manual_gradients and sac_fused.supports(self)
            self.fused_calls = sac_fused.FusedSAC(self) if self.fused_update else None
        return self.fused_calls

    # ----------------------------------------------------------------------------- learning
    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.detach().exp()

    def update(self, batch: Batch) -> dict[str, float]:
        """One gradient step on critic, actor and temperature (the gradient of the sum of their
        losses, each of which reaches only its own parameters); then the target update.
        The actor loss uses the critic as it was before this step's critic update.

        For the networks SAC builds the gradients are written out by hand (``sac_grads``: no
        autograd graph, about 40% fewer tensor operations), and computed in one C++ call
        (``sac_fused``, which also applies Adam and the target update) unless
        ``fused_update`` is off; other configurations go through autograd. Denormal floats are
        flushed to zero during the update where the fused calls are built (inside the C++ call,
        else ``sac_fused.denormals_flushed``)."""
        source = batch
        if self.device.type != "cpu":  # replay batches live on the CPU
            batch = {k: (v.to(self.device) if torch.is_tensor(v) else v) for k, v in batch.items()}
        fused = self.fused()
        manual = self.manual_gradients and self.manual_gradients_for(batch)
        if not manual:
            self.announce(self.reference_reason or f"{type(self).__name__}'s loss for this batch "
                          "(e.g. OPD's nll distillation or Q-filter) has no hand-written gradient")
        if manual and fused is not None:  # the C++ code normalises the raw batch itself
            term = self.distill_term(batch)
            values = fused.update(batch, *(term or (None, 0.)), self.optimizer, self.config.tau)
            metrics = {**self.manual_update_metrics(values), "train/alpha": values["alpha"]}
        else:
            with sac_fused.denormals_flushed() if fused is not None else contextlib.nullcontext():
                metrics = self.unfused_update(batch, manual)
        if batch is not source and "td_error" in batch:
            source["td_error"] = batch["td_error"].cpu()
        self.num_updates += 1
        return metrics

    def unfused_update(self, batch: Batch, manual: bool) -> dict[str, float]:
        """``update`` by the Python gradients (``sac_grads``) or autograd, torch's Adam step and
        one ``lerp`` for the target."""
        alpha = self.alpha
        goal = batch.get("desired_goal")
        x = self.policy_input(batch["obs"], goal)
        next_x = self.policy_input(batch["next_obs"], goal)
        if manual:
            metrics = self.manual_update_metrics(sac_grads.sac_gradients(
                self, batch, x, next_x, self.distill_rows(batch)))
        else:
            self.optimizer.zero_grad(set_to_none=True)
            metrics = self.autograd_gradients(batch, x, next_x, alpha)
        self.optimizer.apply_gradients()
        with torch.no_grad():
            torch._foreach_lerp_(self.target_params, self.online_params, self.config.tau)
        metrics["train/alpha"] = alpha
        values = torch.stack([torch.as_tensor(v).detach() for v in metrics.values()]).tolist()
        return dict(zip(metrics, values))

    def autograd_gradients(self, batch: Batch, x: torch.Tensor, next_x: torch.Tensor,
                           alpha: torch.Tensor) -> dict[str, torch.Tensor]:
        """Gradients by one backward pass over critic + actor + temperature losses."""
        with torch.no_grad():
            next_action, next_log_prob, _, _ = self.actor.sample(next_x, self.generator)
            next_q = self.target_critic(next_x, next_action)
            target = losses.soft_q_target(batch["reward"], batch["terminated"], next_q,
                                          next_log_prob, alpha, self.config.gamma)
        q = self.critic(x, batch["action"])
        critic_loss = losses.critic_loss(q, target, batch.get("weight"))
        if "weight" in batch:  # prioritised replay: the priorities' new TD errors
            batch["td_error"] = losses.td_error(q.detach(), target)
        action, log_prob, _, std = self.actor.sample(x, self.generator)
        q_pi = self.frozen_critic(x, action)
        actor_loss, actor_metrics = self.actor_loss(q_pi, log_prob, alpha, batch)
        alpha_loss = losses.temperature_loss(self.log_alpha, log_prob, self.target_entropy)
        (critic_loss + actor_loss + alpha_loss).backward()
        return {"losses/critic_loss": critic_loss.detach(), "losses/alpha_loss":
                alpha_loss.detach(), "train/q_mean": q.detach().mean(),
                "train/entropy": -log_prob.detach().mean(), "train/policy_std": std.detach().mean(),
                **actor_metrics}

    def announce(self, reason: str) -> None:
        """Say once per reason that this learner runs the reference (autograd) update."""
        if reason not in self.announced:
            self.announced.add(reason)
            warnings.warn(f"{type(self).__name__}: the autograd (reference) update runs "
                          f"instead of the fused one: {reason}", stacklevel=3)

    # Hooks for the hand-written gradients; OPD overrides them to add its distillation term.
    # A class that overrides ``actor_loss`` or ``autograd_gradients`` must also override
    # ``manual_gradients_for`` (saying when its hand-written gradient applies); otherwise the
    # reference path runs (``reference_reason``).
    def manual_gradients_for(self, batch: Batch) -> bool:
        """Whether ``sac_grads`` covers this update's losses."""
        return True

    def distill_term(self, batch: Batch) -> tuple[Batch, float] | None:
        """The raw prototype batch (``obs``, ``desired_goal``, ``action``) and the weight of an
        MSE distillation term, if any."""
        return None

    def distill_rows(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, float] | None:
        """``distill_term`` as ``(prototype policy inputs, prototype actions, weight)``."""
        term = self.distill_term(batch)
        if term is None:
            return None
        prototype, weight = term
        return (self.policy_input(prototype["obs"], prototype.get("desired_goal")),
                prototype["action"], weight)

    def manual_update_metrics(self, values: dict[str, Any]) -> dict[str, Any]:
        """``sac_grads`` (0-dim tensors) or ``sac_fused`` results (floats) under the keys
        ``autograd_gradients`` returns."""
        return {"losses/critic_loss": values["critic_loss"], "losses/alpha_loss":
                values["alpha_loss"], "train/q_mean": values["q_mean"],
                "train/entropy": values["entropy"], "train/policy_std": values["policy_std"],
                "losses/actor_sac_loss": values["actor_sac_loss"],
                "losses/actor_total_loss": values["actor_total_loss"]}

    def actor_loss(self, q_pi: torch.Tensor, log_prob: torch.Tensor, alpha: torch.Tensor,
                   batch: Batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """SAC's actor loss; OPD overrides this to add its distillation term."""
        loss = losses.sac_actor_loss(q_pi, log_prob, alpha)
        return loss, {"losses/actor_sac_loss": loss.detach(), "losses/actor_total_loss":
                      loss.detach()}

    # ----------------------------------------------------------------------------- state
    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"optimizer": self.optimizer}

    def state_dict(self) -> dict[str, Any]:
        """Nested state: module and optimiser state dicts, temperature, generator, counters."""
        return {**{name: module.state_dict() for name, module in self.modules().items()},
                **{name: opt.state_dict() for name, opt in self.optimizers().items()},
                "log_alpha": self.log_alpha.detach().clone(),
                "generator_state": self.generator.get_state(), "num_updates": self.num_updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, module in self.modules().items():
            module.load_state_dict(state[name])
        if "optimizer" not in state:  # checkpoints before the optimisers were merged
            state = {**state, "optimizer": merge_optimizer_states(
                [state[f"{name}_optimizer"] for name in ("actor", "critic", "alpha")])}
        for name, optimizer in self.optimizers().items():
            optimizer.load_state_dict(state[name])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.generator.set_state(state["generator_state"])
        self.num_updates = int(state["num_updates"])

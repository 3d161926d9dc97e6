"""PPO (SPEC A6): clipped policy gradient with GAE, discrete (masked) or continuous actions.

``act`` samples from the policy head (``nets.categorical``) and returns the log-probability, the
value and the action in policy units as extras; the loop stores them in the learner's
``RolloutStorage``, which hands a full ``Rollout`` to ``update``. ``update``
computes GAE (bootstrapping truncated episodes from their final observation) and runs
``n_epochs`` of minibatch PPO. ``ppo_epochs`` is shared with HGPO's on-policy levels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from gymnasium import spaces
from pydantic import BaseModel, ConfigDict, Field, field_validator
from torch import nn

from agentic_rl.algos.base import (ENV_NORMALISER_KEYS,
                                   ON_POLICY_TRAINING_KEYS, ActMode, check_mode,
                                   check_own_action)
from agentic_rl.algos.curiosity import RND, CuriosityConfig, curiosity_bonus
from agentic_rl.algos.schedule import Scheduled, non_negative, value_at
from agentic_rl.algos.spaces import resolve_device
from agentic_rl.algos.hgpo_losses import normalize_advantages, ppo_policy_loss, value_loss
from agentic_rl.data.rollout import Rollout, flatten_time, gae
from agentic_rl.data.rollout_storage import RolloutStorage
from agentic_rl.data.storage import StorageSpec
from agentic_rl.nets.categorical import ValueHead, make_policy_head


class PPOUpdateConfig(BaseModel):
    """The clipped-objective update's settings, shared by PPO and each HGPO level."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    learning_rate: float = Field(3e-4, gt=0)
    gamma: float = Field(0.99, ge=0, le=1)
    gae_lambda: float = Field(0.95, ge=0, le=1)
    clip_range: float = Field(0.2, gt=0)
    value_clip_range: float | None = Field(None, gt=0)
    ent_coef: Scheduled = Field(0.01, description="entropy bonus: a constant or a Schedule "
                                "over the learner's env steps")
    vf_coef: float = Field(0.5, ge=0)
    max_grad_norm: float = Field(0.5, gt=0)
    n_epochs: int = Field(4, ge=1)
    minibatch_size: int = Field(256, ge=1)
    normalize_advantage: bool = True
    target_kl: float | None = Field(None, gt=0, description="stop the epochs early above this")
    hidden_sizes: list[int] = Field(default_factory=lambda: [64, 64])

    @field_validator("ent_coef")
    @classmethod
    def _non_negative(cls, value):
        return non_negative(value, "ent_coef")


class PPOConfig(PPOUpdateConfig):
    """PPO hyper-parameters (the ``algorithm`` section of a config with ``name: ppo``)."""

    name: Literal["ppo"] = "ppo"
    unread_keys: ClassVar[tuple[str, ...]] = ON_POLICY_TRAINING_KEYS + ENV_NORMALISER_KEYS
    rollout_steps: int = Field(128, ge=1, description="steps per env between updates")
    activation: Literal["tanh", "relu"] = "tanh"
    continuous_head: Literal["tanh", "gaussian"] = "tanh"
    obs_keys: list[str] = Field(default_factory=lambda: ["observation", "desired_goal"])
    curiosity: CuriosityConfig | None = Field(None, description="RND bonus added to the reward")


def flat_obs(obs: dict[str, torch.Tensor], keys: Sequence[str]) -> torch.Tensor:
    """Concatenate the named observation parts along the last axis, ``[..., sum(dims)]``."""
    missing = [k for k in keys if k not in obs]
    if missing:
        raise KeyError(f"observation lacks {missing}; it has {sorted(obs)} (check obs_keys)")
    return torch.cat([obs[k].float() for k in keys], dim=-1)


def space_dim(observation_space: spaces.Space, keys: Sequence[str]) -> int:
    """Total flat size of the named parts of a ``Dict`` observation space."""
    if not isinstance(observation_space, spaces.Dict):
        raise TypeError(f"expected a Dict observation space, got {observation_space}")
    return int(sum(np.prod(observation_space[k].shape) for k in keys))


class ActionScaler:
    """Maps policy actions to env actions: identity for ``Discrete``, [-1, 1] -> [low, high]."""

    def __init__(self, action_space: spaces.Space) -> None:
        self.discrete = isinstance(action_space, spaces.Discrete)
        if not self.discrete and not isinstance(action_space, spaces.Box):
            raise TypeError(f"PPO/HGPO need a Discrete or Box action space, got {action_space}")
        self.dim = int(action_space.n) if self.discrete else int(action_space.shape[0])
        if not self.discrete:
            self.low = torch.as_tensor(action_space.low, dtype=torch.float32)
            self.high = torch.as_tensor(action_space.high, dtype=torch.float32)

    def to_env(self, action: torch.Tensor) -> torch.Tensor:
        if self.discrete:
            return action
        unit = action.clamp(-1.0, 1.0)
        return self.low + 0.5 * (unit + 1.0) * (self.high - self.low)


def ppo_epochs(
    batch: dict[str, torch.Tensor],
    evaluate: Callable[[dict[str, torch.Tensor]], tuple[torch.Tensor, torch.Tensor]],
    value_fn: Callable[[dict[str, torch.Tensor]], torch.Tensor],
    optimizer: torch.optim.Optimizer,
    config: Any,
    generator: torch.Generator,
    extra_loss: Callable[[dict[str, torch.Tensor]], torch.Tensor] | None = None,
    step: int = 0,
) -> dict[str, float]:
    """Minibatch PPO epochs over a flat batch.

    Args:
        batch: ``[B, ...]`` tensors with at least ``log_prob``, ``advantage``, ``return`` and
            ``value``.
        evaluate: minibatch -> ``(log_prob [b], entropy [b])`` under the current policy.
        value_fn: minibatch -> ``V [b]``.
        optimizer: over every trained parameter.
        config: any object with the ``PPOConfig`` optimisation fields.
        generator: shuffles the minibatches.
        extra_loss: optional minibatch -> scalar added to the loss (e.g. goal-change penalty).
        step: the learner's env steps, where ``config.ent_coef`` is a schedule.

    Returns:
        Means over minibatches of the ``losses/*`` and ``train/*`` metrics.
    """
    size = batch["advantage"].shape[0]
    params = [p for group in optimizer.param_groups for p in group["params"]]
    sums: dict[str, float] = {}
    count, ent_coef = 0, value_at(config.ent_coef, step)
    for _ in range(config.n_epochs):
        order = torch.randperm(size, generator=generator, device=generator.device)
        for start in range(0, size, config.minibatch_size):
            mb = {k: v[order[start : start + config.minibatch_size]] for k, v in batch.items()}
            loss, stats = minibatch_loss(mb, evaluate, value_fn, config, ent_coef, extra_loss)
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(params, config.max_grad_norm)
            optimizer.step()
            for key, value in stats.items():
                sums[key] = sums.get(key, 0.0) + float(value.detach())
            count += 1
        if config.target_kl is not None and float(stats["train/approx_kl"]) > config.target_kl:
            break
    return {key: value / count for key, value in sums.items()}


def minibatch_loss(
    mb: dict[str, torch.Tensor],
    evaluate: Callable[[dict[str, torch.Tensor]], tuple[torch.Tensor, torch.Tensor]],
    value_fn: Callable[[dict[str, torch.Tensor]], torch.Tensor],
    config: Any,
    ent_coef: float,
    extra_loss: Callable[[dict[str, torch.Tensor]], torch.Tensor] | None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO's loss on one minibatch (clipped policy loss + ``vf_coef`` value loss - entropy
    bonus + ``extra_loss``) and its 0-dim statistics under their ``losses/*`` and
    ``train/*`` names (arguments as ``ppo_epochs``)."""
    advantage = mb["advantage"]
    if config.normalize_advantage:
        advantage = normalize_advantages(advantage)
    log_prob, entropy = evaluate(mb)
    pi_loss, approx_kl, clip_frac = ppo_policy_loss(
        log_prob, mb["log_prob"], advantage, config.clip_range
    )
    v_loss = value_loss(value_fn(mb), mb["return"], mb["value"], config.value_clip_range)
    loss = pi_loss + config.vf_coef * v_loss - ent_coef * entropy.mean()
    if extra_loss is not None:
        loss = loss + extra_loss(mb)
    return loss, {"losses/policy_loss": pi_loss, "losses/value_loss": v_loss,
                  "losses/entropy": entropy.mean(), "train/approx_kl": approx_kl,
                  "train/clip_fraction": clip_frac}


class OnPolicyLearner:
    """The loop-facing methods PPO and HGPO share: built from the experiment config, one
    ``RolloutStorage`` of ``rollout_steps`` per update, learning only from sampled actions."""

    config: Any
    scaler: ActionScaler

    @classmethod
    def from_config(cls, config: Any, env: Any) -> Any:
        return cls(config.algorithm, env.observation_space, env.action_space,
                   seed=config.training.seed, device=resolve_device(config.training.device))

    def make_storage(self, spec: StorageSpec) -> RolloutStorage:
        return RolloutStorage(self.config.rollout_steps)

    def executed(self, extras: dict[str, torch.Tensor], env_action: torch.Tensor
                 ) -> dict[str, torch.Tensor]:
        return check_own_action(self.scaler.to_env, extras, env_action)

    def observe(self, episode: Any) -> None:
        """No statistics: the inputs are not normalised."""


class PPO(OnPolicyLearner):
    """Proximal policy optimisation for ``Dict`` observations and Discrete / Box actions.

    Args:
        config: hyper-parameters.
        observation_space: a ``Dict`` space holding ``config.obs_keys``.
        action_space: ``Discrete`` (optionally masked through ``obs["action_mask"] [N, A]``) or
            ``Box``.
        seed: seeds the action-sampling and minibatch generator and the network initialisation.
        device: where the networks live and updates run (actions come back on the CPU).
    """

    def __init__(
        self,
        config: PPOConfig,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        seed: int = 0,
        device: str = "cpu",
    ) -> None:
        self.config, self.device = config, torch.device(device)
        self.scaler = ActionScaler(action_space)
        in_dim = space_dim(observation_space, config.obs_keys)
        torch.manual_seed(seed)
        self.policy = make_policy_head(
            in_dim, self.scaler.dim, self.scaler.discrete, config.hidden_sizes,
            config.activation, config.continuous_head,
        )
        self.value = ValueHead(in_dim, config.hidden_sizes, config.activation)
        self.rnd = None if config.curiosity is None else RND(
            config.curiosity, space_dim(observation_space, config.curiosity.obs_keys))
        for module in (self.policy, self.value, self.rnd):
            if module is not None:
                module.to(self.device)
        self.optimizer = torch.optim.Adam(
            [*self.policy.parameters(), *self.value.parameters()], lr=config.learning_rate, eps=1e-5
        )
        self.generator = torch.Generator(self.device).manual_seed(seed)
        self.env_steps = 0

    def act(
        self, obs: dict[str, torch.Tensor], state: Any, mode: ActMode = "explore"
    ) -> tuple[torch.Tensor, Any, dict[str, torch.Tensor]]:
        """Actions for ``N`` envs; extras ``log_prob [N]``, ``value [N]``, ``unit_action`` (the
        sampled action before scaling to the env's box)."""
        check_mode(mode)
        if mode == "random":
            raise ValueError(f"{type(self).__name__} has no random-action phase")
        deterministic = mode == "deterministic"
        x = flat_obs(obs, self.config.obs_keys).to(self.device)
        mask = obs["action_mask"].to(self.device) if "action_mask" in obs else None
        with torch.no_grad():
            if deterministic:
                action = self.policy.mode(x, mask).cpu()
                return self.scaler.to_env(action), state, {"unit_action": action}
            action, log_prob = self.policy.sample(x, mask, self.generator)
            extras = {"log_prob": log_prob.cpu(), "value": self.value(x).cpu(),
                      "unit_action": action.cpu()}
        return self.scaler.to_env(extras["unit_action"]), state, extras

    def update(self, rollout: Rollout) -> dict[str, float]:
        """GAE over the rollout, then ``n_epochs`` of minibatch PPO; returns metrics."""
        cfg, rollout = self.config, rollout.to(self.device)
        bonus, curiosity = curiosity_bonus(self.rnd, rollout.next_obs)
        with torch.no_grad():
            x = flat_obs(rollout.obs, cfg.obs_keys)
            next_values = self.value(flat_obs(rollout.next_obs, cfg.obs_keys))
            advantages, returns = gae(
                rollout.rewards + bonus, rollout.extras["value"], next_values,
                rollout.terminated, rollout.dones, cfg.gamma, cfg.gae_lambda,
            )
        batch = {
            "x": flatten_time(x),
            "action": flatten_time(rollout.actions),
            "log_prob": flatten_time(rollout.extras["log_prob"]),
            "value": flatten_time(rollout.extras["value"]),
            "advantage": flatten_time(advantages),
            "return": flatten_time(returns),
        }
        if "action_mask" in rollout.obs:
            batch["mask"] = flatten_time(rollout.obs["action_mask"])
        shaped = self.shape_batch(rollout, batch)
        metrics = ppo_epochs(
            batch,
            lambda mb: self.policy.evaluate(mb["x"], mb["action"], mb.get("mask")),
            lambda mb: self.value(mb["x"]),
            self.optimizer, cfg, self.generator, self.extra_loss, self.env_steps,
        )
        self.env_steps += rollout.rewards.numel()
        metrics["train/return_mean"] = float(returns.mean())
        return metrics | curiosity | shaped

    # Hooks for variants (``ppo_lag``): change the flat batch before the epochs, add a loss.
    extra_loss: Callable[[dict[str, torch.Tensor]], torch.Tensor] | None = None

    def shape_batch(self, rollout: Rollout, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        """Edit ``batch`` (``[T*N, ...]``) in place before the epochs; returns metrics."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy.state_dict(),
            "value": self.value.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "generator": self.generator.get_state(), "env_steps": self.env_steps,
            **(self.rnd.extra_state() if self.rnd is not None else {}),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        self.value.load_state_dict(state["value"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        self.env_steps = int(state.get("env_steps", 0))  # older checkpoints did not count
        if self.rnd is not None:
            self.rnd.load_extra_state(state)

"""TD3 (Fujimoto et al., 2018), the off-policy learner under HIRO, with HER from the shared
replay storage: twin critics, target policy smoothing, delayed actor and target updates.

The whole algorithm is this file (see docs/adding_an_algorithm.md): the loop, collector and
CLI know nothing of it. Actions are in [-1, 1] inside the learner, env units only in ``act``.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar, Literal

import torch
from pydantic import Field
from torch import nn

from agentic_rl.algos.base import ActMode, check_mode
from agentic_rl.algos.losses import critic_loss, td_error
from agentic_rl.algos.sac_config import DemoConfig, NetworkConfig, OffPolicyUpdateConfig
from agentic_rl.algos.spaces import ActionBox, flat_learner_from_config
from agentic_rl.data.replay_demos import build_replay_storage
from agentic_rl.data.replay_storage import ReplaySettings, ReplayStorage
from agentic_rl.data.storage import StorageSpec
from agentic_rl.nets.critics import EnsembleQ, frozen_alias
from agentic_rl.nets.mlp import mlp
from agentic_rl.nets.normalizer import RunningNormalizer


class TD3Config(NetworkConfig, DemoConfig, OffPolicyUpdateConfig):
    """TD3 (the ``algorithm`` section with ``name: td3``): networks, demos and the update."""

    name: Literal["td3"] = "td3"
    unread_keys: ClassVar[tuple[str, ...]] = ()
    policy_delay: int = Field(2, ge=1, description="critic updates per actor/target update")
    policy_noise: float = Field(0.2, ge=0, description="target smoothing noise (unit actions)")
    noise_clip: float = Field(0.5, ge=0)
    exploration_noise: float = Field(0.2, ge=0, description="Gaussian noise while exploring")


def td3_target(reward: torch.Tensor, terminated: torch.Tensor, next_q: torch.Tensor,
               gamma: float) -> torch.Tensor:
    """Clipped double-Q target ``r + gamma (1 - terminated) min_i Q_i(s', a')`` for
    ``reward, terminated [B]`` and ``next_q [num_q, B]``."""
    return reward + gamma * (1.0 - terminated) * next_q.min(dim=0).values


def smoothed(action: torch.Tensor, std: float, clip: float,
             generator: torch.Generator) -> torch.Tensor:
    """Target policy smoothing: ``clamp(a + clamp(N(0, std), -clip, clip), -1, 1)``."""
    noise = torch.randn(action.shape, generator=generator, device=action.device) * std
    return (action + noise.clamp(-clip, clip)).clamp(-1.0, 1.0)


class TD3:
    """Deterministic tanh actor and twin critics on normalised ``[obs, goal]`` inputs."""

    def __init__(self, config: TD3Config, spaces: dict[str, Any],
                 device: str = "cpu", clip_obs: float = 5.0,
                 normalize: tuple[bool, bool] = (True, True)) -> None:
        self.config, self.device = config, torch.device(device)
        obs_dim, goal_dim, act_dim = spaces["obs_dim"], spaces["goal_dim"], spaces["act_dim"]
        box = ActionBox(spaces["action_low"], spaces["action_high"])
        self.unit_to_env, self.env_to_unit, self.act_dim = box.to_env, box.to_unit, act_dim
        self.obs_normalizer = RunningNormalizer(obs_dim, clip_obs, enabled=normalize[0])
        self.goal_normalizer = RunningNormalizer(max(goal_dim, 1), clip_obs, enabled=normalize[1])
        self.goal_dim = goal_dim
        hidden, activation = config.hidden_sizes, config.activation
        self.actor = nn.Sequential(mlp(obs_dim + goal_dim, hidden, act_dim, activation), nn.Tanh())
        self.critic = EnsembleQ(obs_dim + goal_dim, act_dim, hidden, 2)
        self.target_actor = copy.deepcopy(self.actor).requires_grad_(False)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        for module in self.modules().values():
            module.to(self.device)
        self.frozen_critic = frozen_alias(self.critic)  # the actor loss reaches only the actor
        self.optimizer = torch.optim.Adam([  # a step skips the group whose grads are None
            {"params": self.actor.parameters(), "lr": config.actor_lr},
            {"params": self.critic.parameters(), "lr": config.critic_lr}])
        self.generator = torch.Generator(device=self.device)
        self.num_updates = 0

    @classmethod
    def from_config(cls, config: Any, env: Any) -> TD3:
        return flat_learner_from_config(cls, config, env)

    def modules(self) -> dict[str, nn.Module]:
        return {"actor": self.actor, "critic": self.critic, "target_actor": self.target_actor,
                "target_critic": self.target_critic, "obs_normalizer": self.obs_normalizer,
                "goal_normalizer": self.goal_normalizer}

    def policy_input(self, obs: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        """``[B, obs_dim + goal_dim]`` normalised observation and goal."""
        x = self.obs_normalizer(obs.to(self.device))
        return torch.cat([x, self.goal_normalizer(goal.to(self.device))], -1) if self.goal_dim \
            else x

    @torch.no_grad()
    def act(self, obs: dict[str, torch.Tensor], state: Any = None, mode: ActMode = "explore"):
        """Actions ``[N, act_dim]`` in env units, ``extras["unit_action"]`` in [-1, 1]."""
        check_mode(mode)
        n, act_dim = obs["observation"].shape[0], self.act_dim
        if mode == "random":
            unit = torch.rand((n, act_dim), generator=self.generator, device=self.device) * 2 - 1
        else:
            unit = self.actor(self.policy_input(obs["observation"], obs.get("desired_goal")))
            if mode == "explore":
                noise = torch.randn(unit.shape, generator=self.generator, device=self.device)
                unit = (unit + self.config.exploration_noise * noise).clamp(-1.0, 1.0)
        unit = unit.cpu()
        return self.unit_to_env(unit), state, {"unit_action": unit}

    def executed(self, extras: dict[str, torch.Tensor], env_action: torch.Tensor) -> dict:
        return {**extras, "unit_action": self.env_to_unit(env_action)}

    def make_storage(self, spec: StorageSpec) -> ReplayStorage:
        cfg = self.config
        return build_replay_storage(spec, ReplaySettings(
            self.obs_normalizer.mean.shape[0], self.goal_dim, self.act_dim,
            cfg.batch_size, cfg.updates_per_step, cfg.her, prioritized=cfg.prioritized), cfg,
            self.env_to_unit, self.observe)

    def observe(self, episode: dict[str, torch.Tensor]) -> None:
        """Normaliser statistics from one episode's states ``[T, ...]``."""
        self.obs_normalizer.update(episode["observation"])
        if self.goal_dim:
            self.goal_normalizer.update(torch.cat([episode["desired_goal"],
                                                   episode["achieved_goal"]]))

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        """One critic step; every ``policy_delay`` steps also an actor and target step."""
        cfg, b = self.config, {k: v.to(self.device) for k, v in batch.items()}
        x = self.policy_input(b["obs"], b.get("desired_goal"))
        with torch.no_grad():
            next_x = self.policy_input(b["next_obs"], b.get("desired_goal"))
            next_action = smoothed(self.target_actor(next_x), cfg.policy_noise, cfg.noise_clip,
                                   self.generator)
            target = td3_target(b["reward"], b["terminated"],
                                self.target_critic(next_x, next_action), cfg.gamma)
        q = self.critic(x, b["action"])
        loss = critic_loss(q, target, b.get("weight"))
        if "weight" in b:  # prioritised replay: the priorities' new TD errors
            batch["td_error"] = td_error(q.detach(), target).cpu()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.num_updates += 1
        metrics = {"losses/critic_loss": loss.item()}
        if self.num_updates % cfg.policy_delay == 0:
            actor_loss = -self.frozen_critic(x, self.actor(x))[0].mean()
            self.optimizer.zero_grad(set_to_none=True)
            actor_loss.backward()
            self.optimizer.step()
            with torch.no_grad():
                for net, target_net in ((self.actor, self.target_actor),
                                        (self.critic, self.target_critic)):
                    for p, tp in zip(net.parameters(), target_net.parameters()):
                        tp.lerp_(p, cfg.tau)
            metrics["losses/actor_loss"] = actor_loss.item()
        return metrics

    def state_dict(self) -> dict[str, Any]:
        return {**{k: m.state_dict() for k, m in self.modules().items()},
                "optimizer": self.optimizer.state_dict(),
                "generator_state": self.generator.get_state(), "num_updates": self.num_updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, module in self.modules().items():
            module.load_state_dict(state[name])
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator_state"])
        self.num_updates = int(state["num_updates"])

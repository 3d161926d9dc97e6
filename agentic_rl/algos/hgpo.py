"""HGPO (SPEC A7): a Manager picks a goal every ``period`` steps; a Worker pi(a | s, g) chases it.

Both levels are PPO learners (``ppo.ppo_epochs``). The Manager's goal is a tanh-Gaussian sample in
[-1, 1]^G (its Gaussian is the exploration noise); it is re-drawn at episode start, every
``period`` steps, and for every env after each ``update`` (so no period straddles two rollouts).
The goal space is the env's ``achieved_goal`` or a learned encoder phi (temporal-contrastive,
with an EMA target encoder used for rewards). Worker reward: ``-||phi(s') - g||`` or the change
of a learned success predictor (plus an optional RND bonus); Manager reward: external reward
summed over its period, plus (``manager_curiosity``) the RND novelty of the states it reached.
Stabilisers: EMA target encoder, goal-change regularisation, HIRO goal relabelling, separate
learning rates and update frequencies per level, an annealed cap on the Manager's goal noise
(``manager_log_std_cap``; deterministic evaluation uses the Manager's mean goal), and
self-imitation of the best finished episodes at both levels (``self_imitation``,
``hgpo_imitation``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from agentic_rl.algos import hgpo_goals, hgpo_imitation, hgpo_losses
from agentic_rl.algos.base import ActMode, check_mode
from agentic_rl.algos.curiosity import RND, curiosity_bonus
from agentic_rl.algos.hgpo_config import HGPOConfig
from agentic_rl.algos.ppo import ActionScaler, OnPolicyLearner, flat_obs, ppo_epochs, space_dim
from agentic_rl.data.elite_episodes import EliteEpisodes
from agentic_rl.data.hierarchical import (ManagerSegments, manager_segments, period_ends,
                                         period_sums)
from agentic_rl.data.rollout import Rollout, flatten_time, gae
from agentic_rl.nets.goal_encoder import GoalEncoder, ManagerNet, SuccessPredictor, WorkerNet


RND_PREFIXES = ("rnd", "manager_rnd")  # the curiosity modules, saved as PREFIX and PREFIX_opt


@dataclass
class HGPOState:
    """Per-env hierarchical state carried between ``act`` calls."""

    goal: torch.Tensor  # [N, G] current goal
    step_in_period: torch.Tensor  # [N] steps taken under the current goal
    version: int  # update count when the goals were drawn
    hidden: torch.Tensor | None  # [N, H] Manager GRU state (recurrent only)


def level_metrics(metrics: dict[str, float], level: str) -> dict[str, float]:
    """``losses/policy_loss`` -> ``losses/worker_policy_loss``."""
    return {k.replace("/", f"/{level}_", 1): v for k, v in metrics.items()}


class HGPO(OnPolicyLearner):
    """Hierarchical goal-conditioned policy optimisation with PPO levels.

    Args:
        config: hyper-parameters.
        observation_space: ``Dict`` space with the manager/worker keys (and ``achieved_goal``).
        action_space: ``Discrete`` (masked through ``obs["action_mask"]``) or ``Box``.
        seed: seeds network initialisation, sampling and minibatches.
        device: where the networks live and updates run (actions come back on the CPU).
    """

    def __init__(self, config: HGPOConfig, observation_space, action_space, seed: int = 0,
                 device: str = "cpu") -> None:
        self.config = cfg = config
        self.device = torch.device(device)
        self.scaler = ActionScaler(action_space)
        torch.manual_seed(seed)
        self.generator = torch.Generator(self.device).manual_seed(seed)
        worker_dim = space_dim(observation_space, cfg.worker_obs_keys)
        if cfg.goal_space == "achieved_goal":
            self.goal_dim = space_dim(observation_space, ["achieved_goal"])
        else:
            self.goal_dim = cfg.goal_dim
            self.encoder = GoalEncoder(worker_dim, cfg.goal_dim, cfg.encoder_hidden_sizes)
            self.target_encoder = GoalEncoder(worker_dim, cfg.goal_dim, cfg.encoder_hidden_sizes)
            self.target_encoder.load_state_dict(self.encoder.state_dict())
            self.encoder_opt = torch.optim.Adam(self.encoder.parameters(), lr=cfg.encoder_lr)
        self.manager = ManagerNet(
            space_dim(observation_space, cfg.manager_obs_keys), self.goal_dim,
            cfg.manager.hidden_sizes, cfg.activation, cfg.manager_recurrent, cfg.gru_hidden,
            cfg.manager_init_log_std,
        )
        self.worker = WorkerNet(
            worker_dim, self.goal_dim, self.scaler.dim, self.scaler.discrete,
            cfg.worker.hidden_sizes, cfg.activation, cfg.conditioning, cfg.continuous_head,
        )
        self.rnd, self.manager_rnd = (
            None if c is None else RND(c, space_dim(observation_space, c.obs_keys))
            for c in (cfg.curiosity, cfg.manager_curiosity))
        for name in ("encoder", "target_encoder", "manager", "worker", *RND_PREFIXES):
            if getattr(self, name, None) is not None:
                getattr(self, name).to(self.device)
        self.manager_opt = torch.optim.Adam(self.manager.parameters(), lr=cfg.manager.learning_rate)
        self.worker_opt = torch.optim.Adam(self.worker.parameters(), lr=cfg.worker.learning_rate)
        if cfg.intrinsic_reward == "success_predictor":
            self.predictor = SuccessPredictor(self.goal_dim, cfg.encoder_hidden_sizes)
            self.predictor.to(self.device)
            self.predictor_opt = torch.optim.Adam(self.predictor.parameters(), lr=cfg.encoder_lr)
        self.elite = None if cfg.self_imitation is None else \
            EliteEpisodes(cfg.self_imitation.episodes)
        self.updates = 0
        self.env_steps = 0

    def phi(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Goal-space embedding ``[..., G]`` (target encoder when the space is learned)."""
        if self.config.goal_space == "achieved_goal":
            return obs["achieved_goal"].float() / self.config.goal_scale
        with torch.no_grad():
            return self.target_encoder(flat_obs(obs, self.config.worker_obs_keys))

    def worker_act(self, obs: dict[str, torch.Tensor], goal: torch.Tensor, deterministic: bool):
        """The Worker alone towards a given goal ``[N, G]``; returns env actions ``[N, ...]``."""
        obs, goal = self.on_device(obs), goal.to(self.device)
        x, mask = flat_obs(obs, self.config.worker_obs_keys), obs.get("action_mask")
        with torch.no_grad():
            if deterministic:
                return self.scaler.to_env(self.worker.mode(x, goal, mask).cpu())
            return self.scaler.to_env(self.worker.sample(x, goal, mask, self.generator)[0].cpu())

    def act(
        self, obs: dict[str, torch.Tensor], state: HGPOState | None, mode: ActMode = "explore"
    ) -> tuple[torch.Tensor, HGPOState, dict[str, torch.Tensor]]:
        """One step for ``N`` envs; new goals where ``is_first``, the period ran out, or after an
        update. Extras: ``goal``, ``new_goal``, ``goal_log_prob``, ``manager_value``,
        ``prev_goal``, ``has_prev_goal``, worker ``log_prob``, ``value``, ``unit_action``."""
        check_mode(mode)
        if mode == "random":
            raise ValueError(f"{type(self).__name__} has no random-action phase")
        deterministic, cfg, obs = mode == "deterministic", self.config, self.on_device(obs)
        x_m = flat_obs(obs, cfg.manager_obs_keys)
        n, device = x_m.shape[0], self.device
        is_first = obs.get("is_first", torch.zeros(n, dtype=torch.bool, device=device)).bool()
        if state is None or state.version != self.updates:
            hidden = torch.zeros(n, cfg.gru_hidden, device=device) if cfg.manager_recurrent \
                else None
            zeros = torch.zeros(n, self.goal_dim, device=device)
            state = HGPOState(zeros, torch.zeros(n, dtype=torch.long, device=device),
                              self.updates, hidden)
            new = torch.ones(n, dtype=torch.bool, device=device)
            has_prev = torch.zeros(n, dtype=torch.bool, device=device)
        else:
            new = is_first | (state.step_in_period >= cfg.period)
            has_prev = new & ~is_first
        h_prev = None if state.hidden is None else state.hidden * (~is_first).float()[:, None]
        with torch.no_grad():
            feat = self.manager.features(x_m, h_prev)
            if deterministic:
                proposal = self.manager.policy.mode(feat)
                goal_log_prob = torch.zeros(n, device=device)
            else:
                proposal, goal_log_prob = self.manager.policy.sample(feat, None, self.generator)
            goal = torch.where(new[:, None], proposal, state.goal)
            hidden = None if h_prev is None else torch.where(new[:, None], feat, h_prev)
            x_w, mask = flat_obs(obs, cfg.worker_obs_keys), obs.get("action_mask")
            if deterministic:
                action, log_prob = self.worker.mode(x_w, goal, mask), torch.zeros(n, device=device)
            else:
                action, log_prob = self.worker.sample(x_w, goal, mask, self.generator)
            extras = {
                "goal": goal, "new_goal": new, "goal_log_prob": goal_log_prob,
                "manager_value": self.manager.value(feat), "prev_goal": state.goal,
                "has_prev_goal": has_prev, "log_prob": log_prob,
                "value": self.worker.value_of(x_w, goal), "unit_action": action,
            }
        if h_prev is not None:
            extras["manager_hidden"] = h_prev
        step = torch.where(new, 1, state.step_in_period + 1)
        extras = {k: v.cpu() for k, v in extras.items()}
        state = HGPOState(goal, step, self.updates, hidden)
        return self.scaler.to_env(extras["unit_action"]), state, extras

    def on_device(self, obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {k: v.to(self.device) for k, v in obs.items()}

    def intrinsic_reward(self, obs, next_obs, goal: torch.Tensor) -> torch.Tensor:
        """Worker reward ``[...]`` for reaching towards ``goal [..., G]``."""
        phi_next = self.phi(next_obs)
        if self.config.intrinsic_reward == "distance":
            distance = hgpo_losses.distance_intrinsic_reward(phi_next, goal)
            return self.config.intrinsic_scale * distance
        with torch.no_grad():
            p_next = torch.sigmoid(self.predictor(phi_next, goal))
            p_now = torch.sigmoid(self.predictor(self.phi(obs), goal))
        return self.config.intrinsic_scale * hgpo_losses.success_progress_reward(p_next, p_now)

    def update(self, rollout: Rollout) -> dict[str, float]:
        """Worker PPO, Manager PPO (every ``manager.update_every``), encoder / predictor steps."""
        rollout = rollout.to(self.device)
        seg = manager_segments(
            rollout.extras["new_goal"], rollout.dones, rollout.terminated, rollout.rewards
        )
        metrics = hgpo_imitation.record(self, rollout, seg)
        if self.updates % self.config.worker.update_every == 0:
            metrics |= level_metrics(self._update_worker(rollout, seg), "worker")
        if self.updates % self.config.manager.update_every == 0:
            metrics |= level_metrics(self._update_manager(rollout, seg), "manager")
        if self.config.goal_space == "learned":
            metrics |= hgpo_goals.encoder_step(self, rollout)
        if self.config.intrinsic_reward == "success_predictor":
            metrics |= hgpo_goals.predictor_step(self, rollout, seg)
        self.updates += 1
        self.env_steps += rollout.rewards.numel()
        return metrics | self._cap_manager_log_std()

    def _cap_manager_log_std(self) -> dict[str, float]:
        """Project the Manager's log std onto its cap for ``env_steps`` (used by the next rollout,
        so a rollout's stored goal log-probs and its update see the same std)."""
        cap = self.config.manager_log_std_cap
        if cap is None:
            return {}
        bound = cap.value(self.env_steps)
        with torch.no_grad():
            self.manager.policy.log_std.clamp_(max=bound)
        return {"train/manager_log_std_cap": bound}

    def _update_worker(self, rollout: Rollout, seg: ManagerSegments) -> dict[str, float]:
        cfg, ex = self.config, rollout.extras
        x_w = flat_obs(rollout.obs, cfg.worker_obs_keys)
        bonus, curiosity = curiosity_bonus(self.rnd, rollout.next_obs)
        with torch.no_grad():
            reward = self.intrinsic_reward(rollout.obs, rollout.next_obs, ex["goal"]) + bonus
            next_x = flat_obs(rollout.next_obs, cfg.worker_obs_keys)
            next_value = self.worker.value_of(next_x, ex["goal"])
            ends = period_ends(ex["new_goal"], rollout.dones)
            adv, ret = gae(reward, ex["value"], next_value, rollout.terminated, ends,
                           cfg.worker.gamma, cfg.worker.gae_lambda)
        batch = {
            "x": x_w, "goal": ex["goal"], "action": rollout.actions, "log_prob": ex["log_prob"],
            "value": ex["value"], "advantage": adv, "return": ret,
        }
        if "action_mask" in rollout.obs:
            batch["mask"] = rollout.obs["action_mask"]
        imitation = hgpo_imitation.term(self, "worker")
        metrics = ppo_epochs(
            {k: flatten_time(v) for k, v in batch.items()},
            lambda mb: self.worker.evaluate(mb["x"], mb["goal"], mb["action"], mb.get("mask")),
            lambda mb: self.worker.value_of(mb["x"], mb["goal"]),
            self.worker_opt, cfg.worker, self.generator, imitation, step=self.env_steps,
        ) | (imitation.metrics() if imitation else {})
        end_phi = self.phi(rollout.next_obs)[seg.end_t, seg.env]
        reached = (end_phi - ex["goal"][seg.start_t, seg.env]).norm(dim=-1) <= cfg.goal_tolerance
        return metrics | curiosity | {
            "train/intrinsic_reward": float(reward.mean()),
            "train/goal_reached": float(reached.float().mean()),
        }

    def _update_manager(self, rollout: Rollout, seg: ManagerSegments) -> dict[str, float]:
        cfg, ex = self.config, rollout.extras
        start, env = seg.start_t, seg.env
        batch = {
            "x": flat_obs(rollout.obs, cfg.manager_obs_keys)[start, env],
            "goal": ex["goal"][start, env], "log_prob": ex["goal_log_prob"][start, env],
            "value": ex["manager_value"][start, env], "prev_goal": ex["prev_goal"][start, env],
            "has_prev": ex["has_prev_goal"][start, env],
        }
        if cfg.manager_recurrent:
            batch["h"] = ex["manager_hidden"][start, env]
        bonus, metrics = curiosity_bonus(self.manager_rnd, rollout.next_obs)
        reward = seg.reward_sum if self.manager_rnd is None else \
            seg.reward_sum + period_sums(bonus, seg.start_t, seg.end_t, seg.env)
        with torch.no_grad():
            feat = self.manager.features(batch["x"], batch.get("h"))
            x_next = flat_obs(rollout.next_obs, cfg.manager_obs_keys)[seg.end_t, env]
            next_feat = self.manager.features(x_next, feat if cfg.manager_recurrent else None)
            next_value = self.manager.value(next_feat)
            if cfg.relabel_goals:
                batch["goal"], chosen = hgpo_goals.relabel_goals(self, rollout, seg, batch["goal"])
                batch["log_prob"] = self.manager.policy.evaluate(feat, batch["goal"])[0]
                metrics["train/relabel_fraction"] = float((chosen != 0).float().mean())
            batch["advantage"], batch["return"] = gae(
                reward, batch["value"], next_value, seg.terminated, seg.done,
                cfg.manager.gamma, cfg.manager.gae_lambda,
            )

        def features(mb: dict[str, torch.Tensor]) -> torch.Tensor:
            return self.manager.features(mb["x"], mb.get("h"))

        imitation = hgpo_imitation.term(self, "manager")

        def extra_loss(mb: dict[str, torch.Tensor]) -> torch.Tensor:
            loss = torch.zeros((), device=self.device) if imitation is None else imitation(mb)
            if cfg.goal_change_coef > 0:
                mean_goal = self.manager.policy.mode(features(mb))
                loss = loss + cfg.goal_change_coef * hgpo_losses.goal_change_penalty(
                    mean_goal, mb["prev_goal"], mb["has_prev"])
            return loss

        metrics |= ppo_epochs(
            batch,
            lambda mb: self.manager.policy.evaluate(features(mb), mb["goal"]),
            lambda mb: self.manager.value(features(mb)),
            self.manager_opt, cfg.manager, self.generator,
            extra_loss if cfg.goal_change_coef > 0 or imitation else None, step=self.env_steps,
        ) | (imitation.metrics() if imitation else {})
        return metrics | {"train/period_reward": float(seg.reward_sum.mean())}

    def state_dict(self) -> dict[str, Any]:
        state = {
            "manager": self.manager.state_dict(), "worker": self.worker.state_dict(),
            "manager_opt": self.manager_opt.state_dict(),
            "worker_opt": self.worker_opt.state_dict(),
            "generator": self.generator.get_state(), "updates": self.updates,
            "env_steps": self.env_steps,
        }
        for name in ("encoder", "target_encoder", "encoder_opt", "predictor", "predictor_opt"):
            if hasattr(self, name):
                state[name] = getattr(self, name).state_dict()
        for prefix in RND_PREFIXES:
            if getattr(self, prefix) is not None:
                state |= getattr(self, prefix).extra_state(prefix)
        if self.elite is not None:
            state["elite"] = self.elite.state()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            if name == "generator":
                self.generator.set_state(value)
            elif name in ("updates", "env_steps"):
                setattr(self, name, int(value))
            elif name == "elite":
                self.elite.load_state(value)
            elif name.removesuffix("_opt") not in RND_PREFIXES:
                getattr(self, name).load_state_dict(value)
        for prefix in RND_PREFIXES:
            if getattr(self, prefix) is not None:
                getattr(self, prefix).load_extra_state(state, prefix)

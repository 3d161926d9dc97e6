"""SAC's merged optimiser loads checkpoints written with separate actor/critic/alpha optimisers,
and the gradient-free critic alias the actor loss reads Q through stays in step with the critic."""

from __future__ import annotations

import copy

import numpy as np
import torch

from agentic_rl.algos.optim import merge_optimizer_states
from agentic_rl.algos.sac import SAC, SACConfig
from agentic_rl.nets.critics import EnsembleQ, frozen_alias
from agentic_rl.data.checkpoint import flatten_state, unflatten_state

SPACES = {"obs_dim": 5, "goal_dim": 2, "act_dim": 3,
          "action_low": -np.ones(3, dtype=np.float32), "action_high": np.ones(3, dtype=np.float32)}


def _sac(seed: int = 0) -> SAC:
    torch.manual_seed(seed)
    return SAC(SACConfig(batch_size=8, hidden_sizes=[16, 16], actor_lr=1e-3, critic_lr=3e-4,
                         alpha_lr=1e-2), SPACES)


def _old_optimizers(sac: SAC) -> dict[str, torch.optim.Optimizer]:
    """The optimisers as SAC built them before they were merged (commit c5abd34)."""
    return {"actor_optimizer": torch.optim.Adam(sac.actor.parameters(), 1e-3, fused=True),
            "critic_optimizer": torch.optim.Adam(sac.critic.parameters(), 3e-4, fused=True),
            "alpha_optimizer": torch.optim.Adam([sac.log_alpha], 1e-2)}


def _random_grads(sac: SAC, generator: torch.Generator) -> None:
    for param in [*sac.actor.parameters(), *sac.critic.parameters(), sac.log_alpha]:
        param.grad = torch.randn(param.shape, generator=generator)


def _old_checkpoint(steps: int = 3) -> tuple[SAC, dict[str, torch.optim.Optimizer], dict]:
    """A SAC trained with the three old optimisers, and its state dict in the old layout
    (through the checkpoint's flatten/unflatten round trip)."""
    sac = _sac()
    optimizers = _old_optimizers(sac)
    generator = torch.Generator().manual_seed(3)
    for _ in range(steps):
        _random_grads(sac, generator)
        for optimizer in optimizers.values():
            optimizer.step()
    state = sac.state_dict()
    del state["optimizer"]
    state.update({name: copy.deepcopy(opt.state_dict()) for name, opt in optimizers.items()})
    tensors, skeleton = flatten_state(state, "algo")
    return sac, optimizers, unflatten_state(skeleton, tensors)


def test_merge_optimizer_states_offsets_ids_in_group_order():
    first = {"state": {0: {"step": 1}, 1: {"step": 2}}, "param_groups": [{"lr": 1, "params": [0, 1]}]}
    second = {"state": {1: {"step": 3}}, "param_groups": [{"lr": 2, "params": [0]},
                                                          {"lr": 3, "params": [1]}]}
    merged = merge_optimizer_states([first, second])
    assert [g["params"] for g in merged["param_groups"]] == [[0, 1], [2], [3]]
    assert [g["lr"] for g in merged["param_groups"]] == [1, 2, 3]
    assert merged["state"] == {0: {"step": 1}, 1: {"step": 2}, 3: {"step": 3}}


def test_old_checkpoint_loads_into_the_merged_optimiser_and_trains_on_identically():
    old, old_optimizers, state = _old_checkpoint()
    new = _sac(seed=1)  # different weights: everything must come from the checkpoint
    new.load_state_dict(state)
    merged = new.optimizer
    assert [g["lr"] for g in merged.param_groups] == [1e-3, 3e-4, 1e-2]
    old_params = [*old.actor.parameters(), *old.critic.parameters(), old.log_alpha]
    new_params = [*new.actor.parameters(), *new.critic.parameters(), new.log_alpha]
    old_states = [s for opt in old_optimizers.values() for s in
                  (opt.state[p] for g in opt.param_groups for p in g["params"])]
    for old_param, new_param, old_state in zip(old_params, new_params, old_states, strict=True):
        assert torch.equal(old_param, new_param)
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(merged.state[new_param][key], old_state[key])
        assert float(merged.state[new_param]["step"]) == float(old_state["step"]) == 3.0
    # The next steps (fast path included) move the weights as the separate optimisers would.
    for step in range(2):
        _random_grads(old, torch.Generator().manual_seed(10 + step))
        _random_grads(new, torch.Generator().manual_seed(10 + step))
        for optimizer in old_optimizers.values():
            optimizer.step()
        merged.step()
        for old_param, new_param in zip(old_params[:-1], new_params[:-1]):
            assert torch.equal(old_param, new_param)  # both fused Adam
        # the old alpha optimiser was torch's unfused Adam: same maths, other rounding
        assert torch.allclose(old.log_alpha, new.log_alpha, rtol=0, atol=1e-6)


def test_frozen_alias_shares_storage_and_takes_no_gradient():
    torch.manual_seed(0)
    critic = EnsembleQ(4, 2, [8, 8], num_q=2)
    alias = frozen_alias(critic)
    for (name, param), (alias_name, alias_param) in zip(critic.named_parameters(),
                                                        alias.named_parameters(), strict=True):
        assert name == alias_name
        assert alias_param.data_ptr() == param.data_ptr()
        assert not alias_param.requires_grad
    obs, action = torch.randn(5, 4), torch.randn(5, 2, requires_grad=True)
    q = alias(obs, action)
    assert torch.equal(q, critic(obs, action))
    q.sum().backward()
    assert action.grad is not None and action.grad.abs().sum() > 0
    assert all(p.grad is None for p in [*critic.parameters(), *alias.parameters()])


def test_frozen_alias_follows_optimiser_steps_and_load_state_dict():
    torch.manual_seed(0)
    critic = EnsembleQ(4, 2, [8, 8], num_q=2)
    alias = frozen_alias(critic)
    obs, action = torch.randn(5, 4), torch.randn(5, 2)
    optimizer = torch.optim.Adam(critic.parameters(), lr=0.1)
    before = alias(obs, action).detach().clone()
    critic(obs, action).pow(2).sum().backward()
    optimizer.step()
    assert not torch.equal(alias(obs, action), before)
    assert torch.equal(alias(obs, action), critic(obs, action))
    other = EnsembleQ(4, 2, [8, 8], num_q=2)
    critic.load_state_dict(other.state_dict())
    assert torch.equal(alias(obs, action), other(obs, action))

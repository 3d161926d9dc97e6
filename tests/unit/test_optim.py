"""FusedAdam: the same arithmetic and state as torch.optim.Adam(fused=True)."""

from __future__ import annotations

import copy

import torch

from agentic_rl.algos.optim import FusedAdam


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def _groups(model: torch.nn.Module, alpha: torch.Tensor, lrs: tuple[float, float, float]):
    return [{"params": model[0].parameters(), "lr": lrs[0]},
            {"params": model[2].parameters(), "lr": lrs[1]}, {"params": [alpha], "lr": lrs[2]}]


def _train(optimizer_cls, lrs, steps=6, **kwargs):
    model, alpha = _model(), torch.zeros((), requires_grad=True)
    optimizer = optimizer_cls(_groups(model, alpha, lrs), **kwargs)
    generator = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(16, 5, generator=generator)
        loss = model(x).pow(2).mean() + (alpha * x.mean()).sum() + alpha.exp()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return model, alpha, optimizer


def test_fused_adam_matches_torch_adam_bit_for_bit():
    for lrs in ((1e-3, 1e-3, 1e-3), (1e-3, 3e-4, 1e-2)):  # merged and separate groups
        ours_model, ours_alpha, ours = _train(FusedAdam, lrs)
        ref_model, ref_alpha, ref = _train(torch.optim.Adam, lrs, fused=True)
        for a, b in zip(ours_model.parameters(), ref_model.parameters()):
            assert torch.equal(a, b)
        assert torch.equal(ours_alpha, ref_alpha)
        ours_state, ref_state = ours.state_dict(), ref.state_dict()
        assert ours_state["state"].keys() == ref_state["state"].keys()
        for key, value in ref_state["state"].items():
            for name, tensor in value.items():
                assert torch.equal(ours_state["state"][key][name], tensor)


def test_fused_adam_resumes_from_a_state_dict_and_follows_lr_changes():
    model, alpha, optimizer = _train(FusedAdam, (1e-3, 1e-3, 1e-3), steps=3)
    saved = (copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict()))
    clone, clone_alpha = _model(), alpha.detach().clone().requires_grad_(True)
    clone.load_state_dict(saved[0])
    restored = FusedAdam(_groups(clone, clone_alpha, (1e-3, 1e-3, 1e-3)))
    restored.load_state_dict(saved[1])
    for opt in (optimizer, restored):
        opt.param_groups[1]["lr"] = 5e-2  # e.g. a schedule: the next step must use it
    for net, a, opt in ((model, alpha, optimizer), (clone, clone_alpha, restored)):
        loss = net(torch.ones(4, 5)).sum() + a
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    for a, b in zip(model.parameters(), clone.parameters()):
        assert torch.equal(a, b)


def test_fused_adam_state_dict_steps_do_not_share_memory():
    # The fast path keeps the step counts as views of one counter; a checkpoint (safetensors)
    # refuses tensors that share storage, so state_dict hands out separate copies.
    model, alpha, optimizer = _train(FusedAdam, (1e-3, 1e-3, 1e-3), steps=4)
    steps = [value["step"] for value in optimizer.state_dict()["state"].values()]
    assert len({step.untyped_storage().data_ptr() for step in steps}) == len(steps)
    assert all(float(step) == 4.0 for step in steps)


def test_flat_state_hands_out_the_state_a_step_would_use():
    model, alpha = _model(), torch.zeros((), requires_grad=True)
    optimizer = FusedAdam(_groups(model, alpha, (1e-3, 3e-4, 1e-2)))
    params = [*model.parameters(), alpha]
    assert optimizer.flat_state(params) is None  # no state before the first step
    model(torch.ones(2, 5)).sum().add(alpha).backward()
    optimizer.apply_gradients()
    state, lrs, hyper = optimizer.flat_state(params)
    count = len(params)
    assert lrs == [1e-3, 1e-3, 3e-4, 3e-4, 1e-2] and hyper == [0.9, 0.999, 1e-8]
    for i, param in enumerate(params):
        assert state[i] is optimizer.state[param]["exp_avg"]
        assert state[count + i] is optimizer.state[param]["exp_avg_sq"]
    for counter in state[2 * count:]:  # incrementing the counters counts the step
        counter.add_(1)
    assert all(float(optimizer.state[p]["step"]) == 2.0 for p in params)
    assert optimizer.flat_state(params[:-1]) is None  # not exactly the optimiser's parameters
    optimizer.param_groups[0]["lr"] = 5e-4  # changed hyper-parameters: torch's step first
    assert optimizer.flat_state(params) is None


def test_flat_state_after_loading_a_checkpoint_and_not_with_weight_decay():
    model, alpha, optimizer = _train(FusedAdam, (1e-3, 1e-3, 1e-3), steps=2)
    restored = FusedAdam(_groups(model, alpha, (1e-3, 1e-3, 1e-3)))
    restored.load_state_dict(optimizer.state_dict())
    assert restored.flat_state([*model.parameters(), alpha]) is not None
    _, _, decaying = _train(FusedAdam, (1e-3, 1e-3, 1e-3), steps=1, weight_decay=1e-2)
    assert decaying.flat_state([p for g in decaying.param_groups for p in g["params"]]) is None


def test_the_first_step_is_lean_too_and_creates_torchs_state_layout():
    ours_model, ours_alpha, ours = _train(FusedAdam, (1e-3, 3e-4, 1e-2), steps=1)
    ref_model, ref_alpha, ref = _train(torch.optim.Adam, (1e-3, 3e-4, 1e-2), steps=1, fused=True)
    assert ours._plan is not None  # the lean path ran the first step and kept its plan
    for a, b in zip([*ours_model.parameters(), ours_alpha], [*ref_model.parameters(), ref_alpha]):
        assert torch.equal(a, b)
    ours_state, ref_state = ours.state_dict()["state"], ref.state_dict()["state"]
    assert ours_state.keys() == ref_state.keys()
    for key in ref_state:
        for name in ("step", "exp_avg", "exp_avg_sq"):
            mine, theirs = ours_state[key][name], ref_state[key][name]
            assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
            assert torch.equal(mine, theirs)

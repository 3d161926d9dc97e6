"""The fused C++ SAC update (sac_fused): its fallback and its input checks. Its gradients are
checked against autograd in test_sac_grads.py."""

from __future__ import annotations

import platform

import pytest
import torch

from agentic_rl.algos import sac_fused
from tests.unit.test_sac_grads import _batch, _learner, _params


def test_fused_update_is_used_by_default_and_deterministic():
    runs = []
    for _ in range(2):
        learner, batch = _learner("sac", fused=True), _batch()
        metrics = [learner.update(batch) for _ in range(3)]
        assert learner.fused_update is True
        runs.append((metrics, [p.detach().clone() for p in _params(learner)]))
    assert runs[0][0] == runs[1][0]
    assert all(a.equal(b) for a, b in zip(runs[0][1], runs[1][1], strict=True))


def test_a_failed_build_warns_once_and_falls_back_to_python(monkeypatch):
    def no_compiler() -> None:
        raise OSError("no C++ compiler")

    monkeypatch.setattr(sac_fused, "_loaded", None)
    monkeypatch.setattr(sac_fused, "build", no_compiler)
    learner = _learner("sac", fused=True)
    with pytest.warns(RuntimeWarning, match="no C.. compiler"):
        learner.update(_batch())
    assert learner.fused_update is False  # the Python gradients (sac_grads) took over
    assert not sac_fused.available()  # decided once per process


def test_bad_inputs_raise_clear_errors():
    learner, batch = _learner("sac", fused=True), _batch()
    learner.update(batch)
    x = learner.policy_input(batch["obs"], batch["desired_goal"])
    with pytest.raises(RuntimeError, match="reward must be"):
        learner.fused().gradients({**batch, "reward": batch["reward"][:-1]}, x, x, None)
    with pytest.raises(RuntimeError, match="critic's input"):
        learner.fused().gradients(batch, x[:, :5], x[:, :5], None)
    with pytest.raises(RuntimeError, match="contiguous float32"):
        torch.ops.agentic_rl.sac_gradients(
            x.t().contiguous().t(), x, batch["action"], batch["reward"], batch["terminated"],
            torch.zeros(32, 4), None, None, 0.0, *_lists(learner), learner.log_alpha.detach(),
            torch.zeros(()), 0.9, -4.0)


def _lists(learner) -> list[list[torch.Tensor]]:
    actor, critic, target = sac_fused.parameter_lists(learner)
    return [actor, [p.grad for p in actor], critic, [p.grad for p in critic], target]


@pytest.mark.parametrize("deterministic", [True, False])
def test_fused_act_matches_the_actor(deterministic):
    fused, python = _learner("sac", fused=True), _learner("sac")
    obs = {"observation": torch.randn(5, 6), "desired_goal": torch.randn(5, 3)}
    for _ in range(3):  # the same noise draws from the same generator state
        ours, _, extras = fused.act(obs, deterministic=deterministic)
        theirs, _, python_extras = python.act(obs, deterministic=deterministic)
        assert torch.allclose(ours, theirs, atol=1e-6)
        assert torch.allclose(extras["unit_action"], python_extras["unit_action"], atol=1e-6)
    assert fused.fused_calls is not None and python.fused_calls is None
    assert fused.generator.get_state().equal(python.generator.get_state())


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="MXCSR is x86's")
def test_denormals_are_flushed_inside_the_block_only():
    tiny = torch.tensor([1e-39])  # a float32 denormal
    assert sac_fused.available()
    with sac_fused.denormals_flushed():
        assert (tiny * 1.0).item() == 0.0
        with sac_fused.denormals_flushed():  # nested blocks restore the outer mode
            pass
        assert (tiny * 1.0).item() == 0.0
    assert (tiny * 1.0).item() == pytest.approx(1e-39)

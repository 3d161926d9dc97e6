"""The fused C++ SAC update (sac_fused): its fallback and its input checks. Its gradients are
checked against autograd in test_sac_grads.py."""

from __future__ import annotations

import platform

import pytest
import torch

from agentic_rl.algos import sac_fused
from agentic_rl.algos.sac import SAC, SACConfig
from tests.unit.test_sac_grads import SPACES, _batch, _learner, _params


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
    fused = learner.fused()
    with pytest.raises(RuntimeError, match="reward must be"):
        fused.gradients({**batch, "reward": batch["reward"][:-1]}, None, 0.0)
    with pytest.raises(RuntimeError, match=r"observations must be \[rows, 6\]"):
        fused.gradients({**batch, "obs": batch["obs"][:, :5], "next_obs": batch["next_obs"][:, :5]},
                        None, 0.0)
    with pytest.raises(RuntimeError, match="prototype actions"):
        fused.gradients(batch, {**_batch(prototypes=8)["prototype"], "action": torch.zeros(8, 3)},
                        0.5)
    with pytest.raises(RuntimeError, match="contiguous float32"):
        fused.gradients_op(
            batch["obs"].t().contiguous().t(), batch["next_obs"], batch["desired_goal"],
            batch["action"], batch["reward"], batch["terminated"], torch.zeros(32, 4), None, None,
            None, 0.0, *fused.normalizers(), fused.actor, fused.grads[:len(fused.actor)],
            fused.critic, fused.grads[len(fused.actor):-1], fused.target,
            learner.log_alpha.detach(), torch.zeros(()), 0.9, -4.0, [], [], [])


@pytest.mark.parametrize("deterministic", [True, False])
def test_fused_act_matches_the_actor(deterministic):
    fused, python = _learner("sac", fused=True), _learner("sac")
    obs = {"observation": torch.randn(5, 6), "desired_goal": torch.randn(5, 3)}
    for _ in range(3):  # the same noise draws from the same generator state
        mode = "deterministic" if deterministic else "explore"
        ours, _, extras = fused.act(obs, None, mode)
        theirs, _, python_extras = python.act(obs, None, mode)
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
    learner, batch = _learner("sac", fused=True), _batch()
    for _ in range(2):  # the second update flushes inside the C++ call, Adam included
        learner.update(batch)
    assert (tiny * 1.0).item() == pytest.approx(1e-39)  # and restores the mode after it
    with sac_fused.denormals_flushed():
        learner.update(batch)
        assert (tiny * 1.0).item() == 0.0  # a caller's own flushing survives the call


@pytest.mark.parametrize("variant", ["no goal", "no normalisation"])
def test_fused_update_without_goals_or_normalisers_matches_python(variant):
    spaces = {**SPACES, "goal_dim": 0} if variant == "no goal" else SPACES
    normalize = (False, False) if variant == "no normalisation" else (True, True)
    learners = []
    for fused in (True, False):
        torch.manual_seed(0)
        config = SACConfig(batch_size=16, hidden_sizes=[16, 16], fused_update=fused)
        learner = SAC(config, spaces, normalize=normalize)
        learner.observe({"observation": torch.randn(40, 6) * 3, "desired_goal": torch.randn(40, 3),
                         "achieved_goal": torch.randn(40, 3)})
        learners.append(learner)
    batch = _batch()
    if variant == "no goal":
        del batch["desired_goal"]
    for _ in range(3):
        ours, theirs = (learner.update(batch) for learner in learners)
        assert ours == pytest.approx(theirs, rel=1e-4, abs=1e-5)
    obs = {"observation": batch["obs"][:3], "desired_goal": torch.randn(3, 3)}
    assert torch.allclose(learners[0].act(obs)[0], learners[1].act(obs)[0], atol=1e-5)
    for a, b in zip(_params(learners[0]), _params(learners[1]), strict=True):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5)


def test_adam_and_target_update_in_the_fused_call_match_torchs():
    # From the second step on the C++ call also applies Adam and the Polyak update; the same
    # learner with those left to FusedAdam and torch.lerp must end up with the same numbers.
    inside, outside = _learner("sac", fused=True), _learner("sac", fused=True)
    outside.optimizer.flat_state = lambda params: None
    batch = _batch()
    for _ in range(4):
        assert inside.update(batch) == pytest.approx(outside.update(batch), rel=1e-6, abs=1e-7)
    pairs = [*zip(_params(inside), _params(outside)),
             *zip(inside.target_critic.parameters(), outside.target_critic.parameters())]
    for a, b in pairs:
        assert torch.allclose(a, b, rtol=1e-6, atol=1e-8)
    inside_state, outside_state = (learner.optimizer.state_dict()["state"]
                                   for learner in (inside, outside))
    for key, value in outside_state.items():
        assert float(inside_state[key]["step"]) == float(value["step"]) == 4.0
        assert torch.allclose(inside_state[key]["exp_avg_sq"], value["exp_avg_sq"], rtol=1e-6)


def test_a_rejected_update_changes_nothing():
    learner, batch = _learner("sac", fused=True), _batch()
    for _ in range(2):  # from the second update on, Adam runs inside the C++ call
        learner.update(batch)
    before = [p.detach().clone() for p in _params(learner)]
    steps = [float(s["step"]) for s in learner.optimizer.state_dict()["state"].values()]
    bad = {**batch, "obs": batch["obs"][:, :5], "next_obs": batch["next_obs"][:, :5]}
    with pytest.raises(RuntimeError, match=r"observations must be \[rows, 6\]"):
        learner.update(bad)  # found after Adam's state was checked, before anything changed
    assert all(a.equal(b) for a, b in zip(_params(learner), before, strict=True))
    assert [float(s["step"]) for s in learner.optimizer.state_dict()["state"].values()] == steps

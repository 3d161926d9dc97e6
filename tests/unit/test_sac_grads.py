"""The hand-written SAC/OPD gradients against autograd on the same losses: in Python (sac_grads)
and in one C++ call (sac_fused)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agentic_rl.algos.opd import OPD, OPDConfig
from agentic_rl.algos.sac import SAC, SACConfig
from agentic_rl.config import load_config
from tests.conftest import REPO

SPACES = {"obs_dim": 6, "goal_dim": 3, "act_dim": 4,
          "action_low": -np.ones(4, dtype=np.float32), "action_high": np.ones(4, dtype=np.float32)}


def _learner(kind: str, seed: int = 0, fused: bool = False, hidden=(32, 24), **config):
    torch.manual_seed(seed)
    nets = {"hidden_sizes": list(hidden), "init_alpha": 0.3, "fused_update": fused}
    if kind == "opd":
        return OPD(OPDConfig(batch_size=16, **nets, **config), SPACES)
    return SAC(SACConfig(batch_size=16, num_q=config.pop("num_q", 2), **nets, **config), SPACES)


def _batch(rows: int = 16, prototypes: int = 0, seed: int = 1) -> dict:
    generator = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=generator)

    batch = {"obs": randn(rows, 6), "next_obs": randn(rows, 6), "desired_goal": randn(rows, 3),
             "action": torch.rand(rows, 4, generator=generator) * 2 - 1,
             "reward": -(torch.rand(rows, generator=generator) > 0.5).float(),
             "terminated": (torch.rand(rows, generator=generator) > 0.8).float()}
    if prototypes:
        batch["prototype"] = {"obs": randn(prototypes, 6), "desired_goal": randn(prototypes, 3),
                              "action": torch.rand(prototypes, 4, generator=generator) * 2 - 1}
    return batch


def _params(learner) -> list[torch.Tensor]:
    return [*learner.actor.parameters(), *learner.critic.parameters(), learner.log_alpha]


def _compare(kind: str, batch: dict, fused: bool, **config) -> None:
    manual, reference = _learner(kind, fused=fused, **config), _learner(kind, **config)
    reference.manual_gradients = False
    statistics = {"observation": torch.randn(50, 6) * 2 + 1, "desired_goal": torch.randn(50, 3),
                  "achieved_goal": torch.randn(50, 3)}
    for learner in (manual, reference):  # non-trivial normaliser statistics
        learner.observe(statistics)
    for step in range(3):  # after the first step the critic and actor have moved apart
        ours, theirs = manual.update(batch), reference.update(batch)
        assert ours.keys() == theirs.keys()
        for key in ours:
            assert ours[key] == pytest.approx(theirs[key], rel=1e-4, abs=1e-5), (step, key)
        for a, b in zip(_params(manual), _params(reference), strict=True):
            assert torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-6), step
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), step
        for a, b in zip(manual.target_critic.parameters(), reference.target_critic.parameters(),
                        strict=True):
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), step
    assert manual.generator.get_state().equal(reference.generator.get_state())
    assert manual.fused_update is fused


@pytest.mark.parametrize("fused", [False, True], ids=["python", "fused"])
def test_manual_sac_gradients_match_autograd(fused):
    _compare("sac", _batch(), fused)


@pytest.mark.parametrize("fused", [False, True], ids=["python", "fused"])
def test_manual_gradients_with_three_critics(fused):
    _compare("sac", _batch(), fused, num_q=3)


@pytest.mark.parametrize("fused", [False, True], ids=["python", "fused"])
def test_manual_opd_gradients_match_autograd_with_and_without_prototypes(fused):
    _compare("opd", _batch(prototypes=8), fused, opd_alpha=0.7)
    _compare("opd", _batch(), fused)


def test_fused_gradients_with_equal_widths_and_three_layers():
    # equal shapes in consecutive layers: the C++ scratch buffers must not alias each other
    _compare("sac", _batch(), True, hidden=(16, 16, 16))
    _compare("opd", _batch(prototypes=8), True, hidden=(16, 16, 16), opd_alpha=0.5)


def test_unsupported_configurations_use_autograd():
    assert _learner("sac").manual_gradients
    q_filtered = _learner("opd", q_filter=True)
    assert not q_filtered.manual_gradients_for(_batch(prototypes=8))
    torch.manual_seed(0)
    tanh_actor = SAC(SACConfig(hidden_sizes=[8], activation="tanh"), SPACES)
    assert not tanh_actor.manual_gradients
    tanh_actor.update(_batch())  # autograd path still trains


def test_manual_update_does_exactly_the_counted_matrix_flops():
    # benchmarks/update_floor.py counts the minimum products of one update; the hand-written
    # path does exactly those (autograd also computes the critic input's full gradient).
    import importlib.util

    from torch.utils.flop_counter import FlopCounterMode

    from tests.conftest import REPO

    spec = importlib.util.spec_from_file_location(
        "update_floor", REPO / "benchmarks" / "update_floor.py")
    update_floor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(update_floor)
    learner, batch = _learner("sac"), _batch()
    learner.update(batch)
    with FlopCounterMode(display=False) as counter:
        learner.update(batch)
    counted = update_floor.update_flops(9, 4, [32, 24], 16, num_q=2)
    assert counter.get_total_flops() == sum(counted.values())


class CountingSAC(SAC):
    """A user's extension: an extra actor-loss term through the documented hook."""

    calls = 0

    def actor_loss(self, q_pi, log_prob, alpha, batch):
        CountingSAC.calls += 1
        loss, metrics = super().actor_loss(q_pi, log_prob, alpha, batch)
        return loss + 0.0 * q_pi.sum(), metrics


@pytest.mark.parametrize("fused", [False, True], ids=["python", "fused"])
def test_an_overridden_loss_hook_runs_the_reference_update_and_says_so_once(fused):
    CountingSAC.calls = 0
    learner = CountingSAC(SACConfig(batch_size=16, hidden_sizes=[16, 16], fused_update=fused),
                          SPACES)
    assert not learner.manual_gradients and "CountingSAC overrides actor_loss" in \
        learner.reference_reason
    with pytest.warns(UserWarning, match="autograd .reference. update") as caught:
        learner.update(_batch())
        learner.update(_batch())
    assert len([w for w in caught if "reference" in str(w.message)]) == 1
    assert CountingSAC.calls == 2


def test_opd_declares_its_gradient_so_it_keeps_the_fast_path():
    assert _learner("opd").manual_gradients and _learner("sac").manual_gradients


def test_layer_norm_or_tanh_networks_announce_the_reference_update():
    torch.manual_seed(0)
    tanh = SAC(SACConfig(batch_size=16, hidden_sizes=[8], activation="tanh"), SPACES)
    with pytest.warns(UserWarning, match="ReLU MLPs only"):
        tanh.update(_batch())


def _shipped_build(path, fused: bool):
    """A learner of the shipped config at ``path`` (its algorithm and networks), small spaces."""
    config = load_config(path)
    cls = OPD if config.algorithm.name == "opd" else SAC
    torch.manual_seed(0)
    return cls(config.algorithm.model_copy(update={"fused_update": fused}),
               {**SPACES, "obs_dim": 6})


# The shipped SAC/OPD configs whose learner takes the hand-written / fused path.
FAST_PATH = [path for path in sorted((REPO / "configs").glob("*.yaml"))
             if load_config(path).algorithm.name in ("sac", "opd")
             and _shipped_build(path, fused=False).manual_gradients]


def test_the_shipped_fast_path_configs_are_found():
    assert {"opd_fetch_reach", "sac_her_fetch_reach"} <= {p.stem for p in FAST_PATH}


@pytest.mark.parametrize("path", FAST_PATH, ids=[p.stem for p in FAST_PATH])
def test_every_shipped_fused_config_computes_the_reference_update(path):
    """Each shipped SAC/OPD config whose learner takes the fused path: three fused updates
    equal three autograd updates from the same weights (networks as configured)."""
    fast, reference = _shipped_build(path, fused=True), _shipped_build(path, fused=False)
    reference.manual_gradients = False
    batch = _batch(prototypes=8 if isinstance(fast, OPD) else 0)
    for _ in range(3):
        fast.update(batch)
        reference.update(batch)
    for a, b in zip(_params(fast), _params(reference), strict=True):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5)

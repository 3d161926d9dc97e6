"""Issue 17's configs: on each continuous maze, HGPO's Worker and the flat SAC+HER baseline it is
compared with have the same networks, optimiser, update rate, torque bound, envs and budget."""

from __future__ import annotations

import pytest

from agentic_rl.config import read_config, validate_config
from tests.conftest import REPO

PAIRS = [("hgpo_pointmaze", "sac_her_pointmaze"),
         ("hgpo_pointmaze_large", "sac_her_pointmaze_large"),
         ("hgpo_antmaze", "sac_her_antmaze")]
SHARED_LEARNER_KEYS = ("hidden_sizes", "activation", "actor_lr", "critic_lr", "alpha_lr",
                       "init_alpha", "target_entropy", "batch_size", "tau", "num_q", "her",
                       "fused_update")
SHARED_TRAINING_KEYS = ("total_timesteps", "learning_starts", "eval_freq", "num_eval_episodes",
                        "buffer_size", "torch_threads")


def load(name: str):
    return validate_config(read_config(REPO / "configs" / f"{name}.yaml", []))


@pytest.mark.parametrize("hgpo_name, flat_name", PAIRS)
def test_the_worker_and_the_flat_baseline_are_the_same_learner(hgpo_name, flat_name):
    hgpo, flat = load(hgpo_name), load(flat_name)
    worker = hgpo.algorithm.worker.model_dump()
    baseline = flat.algorithm.model_dump()
    assert {k: worker[k] for k in SHARED_LEARNER_KEYS} == \
        {k: baseline[k] for k in SHARED_LEARNER_KEYS}
    # one gradient step per env step in both
    assert worker["update_every"] == 1 and baseline["updates_per_step"] == 1
    assert hgpo.algorithm.worker_action_bound == baseline["action_bound"]


@pytest.mark.parametrize("hgpo_name, flat_name", PAIRS)
def test_both_train_on_the_same_task_and_budget(hgpo_name, flat_name):
    hgpo, flat = load(hgpo_name), load(flat_name)
    assert hgpo.environment.name == flat.environment.name
    assert hgpo.environment.num_envs == flat.environment.num_envs
    for key in ("reward_type", "continuing_task"):
        assert hgpo.environment.kwargs[key] == flat.environment.kwargs[key]
    assert hgpo.environment.kwargs["reward_type"] == "sparse"
    assert hgpo.environment.kwargs["continuing_task"] is False  # ends on success
    for key in SHARED_TRAINING_KEYS:
        assert getattr(hgpo.training, key) == getattr(flat.training, key), key

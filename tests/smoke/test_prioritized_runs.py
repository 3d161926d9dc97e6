"""Prioritised replay through the shared loop: each off-policy family trains with it, logs
its annealed exponent, and a resumed run ends with the uninterrupted run's weights (the
priorities travel in the checkpoint)."""

from __future__ import annotations

import pytest

from agentic_rl.config import validate_config
from agentic_rl.train.logger import read_metrics
from agentic_rl.train.run import train
from tests.conftest import assert_same_final_weights
from tests.smoke.test_family_matrix import family_config

PRIORITIZED = {"prioritized": {"alpha": 0.6, "beta": 0.4}}


@pytest.mark.parametrize("family", ["sac", "opd", "td3"])
def test_a_prioritised_run_resumes_exactly(tmp_path, family):
    def config(**training):  # the exponent anneals over total_timesteps: keep it at 300
        return family_config(tmp_path, family, steps=300, algorithm=PRIORITIZED,
                             training=training)

    train(config(), tmp_path / "a", show_progress=False)
    train(config(stop_success_rate=0.0), tmp_path / "b", show_progress=False)  # stops at 100
    train(config(), tmp_path / "b", resume=True, show_progress=False)
    assert_same_final_weights(tmp_path / "a", tmp_path / "b")
    beta = read_metrics(tmp_path / "a" / "metrics.csv")["replay/beta"]
    assert beta[0][1] < beta[-1][1] == pytest.approx(1.0)  # annealed to 1 by the last step


def test_learners_without_a_replay_reject_the_key(tmp_path):
    raw = family_config(tmp_path, "ppo").model_dump(mode="json")
    raw["algorithm"]["prioritized"] = {}
    with pytest.raises(ValueError, match="prioritized"):
        validate_config(raw)

"""A user's mistake in any family's config is one ``error:`` line naming the fix: a key the
algorithm does not read, a wrong type, an unknown env."""

from __future__ import annotations

import pytest

from agentic_rl.cli import main
from tests.conftest import REPO

UNREAD = {"sac_her_fetch_reach": "algorithm.self_prototypes=false",
          "td3_her_fetch_reach": "algorithm.init_alpha=0.5",
          "hgpo_pointmaze": "algorithm.hidden_sizes=[32]",
          "ppo_fourrooms": "training.learning_starts=7",
          "hgpo_fourrooms": "environment.clip_obs=3.0",
          "alfworld_text_opd": "environment.normalize_obs=false"}
FAMILIES = [*UNREAD, "opd_point"]


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err, err
    return err


@pytest.mark.parametrize("config", FAMILIES)
def test_mistakes_are_one_line(tmp_path, capsys, config):
    base = ["train", str(REPO / "configs" / f"{config}.yaml"), "--log-dir", str(tmp_path),
            "--no-progress"]
    if config in UNREAD:
        assert main([*base, UNREAD[config]]) == 2
        assert "is not read by" in one_error_line(capsys)
    assert main([*base, "training.total_timesteps=lots"]) == 2
    assert "training.total_timesteps" in one_error_line(capsys)
    assert main([*base, "environment.name=FourRoom-v0"]) == 2
    assert "unknown environment id" in one_error_line(capsys)


def test_a_missing_demonstration_file_is_one_line(tmp_path, capsys):
    config = REPO / "configs" / "alfworld_text_opd.yaml"
    assert main(["train", str(config), "--log-dir", str(tmp_path), "--no-progress",
                 f"algorithm.prototype_data_path={tmp_path / 'none.npz'}"]) == 2
    assert "record ALFWorld demonstrations" in one_error_line(capsys)

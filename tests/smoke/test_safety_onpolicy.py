"""Monitor and discrete shield with PPO: a lava cell in an open grid room."""

import json

from agentic_rl.cli import main
from tests.conftest import REPO


def test_grid_shield_masks_moves_into_lava_and_the_monitor_counts_visits(tmp_path):
    base = ["train", str(REPO / "configs" / "ppo_gridworld_goals.yaml"), "--no-progress",
            "training.total_timesteps=4096", "training.eval_freq=4096",
            "training.checkpoint_freq=4096",
            f"verification.property_file={REPO / 'configs' / 'safety' / 'gridworld_lava.yaml'}"]
    assert main([*base, "--log-dir", str(tmp_path / "free")]) == 0
    assert main([*base, "--log-dir", str(tmp_path / "shielded"),
                 "verification.shield_train=true", "verification.shield_eval=true"]) == 0
    free = json.loads((tmp_path / "free" / "ppo_gridworld_goals_seed0" / "summary.json")
                      .read_text())["safety"]
    shielded = json.loads((tmp_path / "shielded" / "ppo_gridworld_goals_seed0" /
                           "summary.json").read_text())["safety"]
    assert free["train"]["violations"] > 0  # a random-ish early policy walks into the lava
    assert shielded["train"]["violations"] == 0 and shielded["eval"]["violations"] == 0
    assert shielded["train_shield"]["interventions"] > 0
    assert shielded["train"]["steps"] == free["train"]["steps"] == 4096

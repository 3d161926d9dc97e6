"""``plot`` groups runs by their resolved config: seeds share a curve, other settings do not,
and labels name what differs."""

from __future__ import annotations

from agentic_rl.train.plot import group_runs


def config(seed: int, alpha: str, steps: str = "3000") -> dict[str, str]:
    return {"algorithm.name": "opd", "algorithm.opd_alpha": alpha,
            "environment.name": "FetchReach-v4", "training.seed": str(seed),
            "training.total_timesteps": steps}


def test_seeds_share_a_curve_and_differing_settings_are_named():
    groups = group_runs({"a0": config(0, "0.2"), "a1": config(1, "0.2", "6000"),
                         "b0": config(0, "0.1")})
    assert groups == {"opd FetchReach-v4 (algorithm.opd_alpha=0.2)": ["a0", "a1"],
                      "opd FetchReach-v4 (algorithm.opd_alpha=0.1)": ["b0"]}


def test_one_experiment_keeps_the_short_label_and_folders_without_config_stand_alone():
    groups = group_runs({"a0": config(0, "0.2"), "a1": config(1, "0.2"), "x/loose": {}})
    assert groups == {"opd FetchReach-v4": ["a0", "a1"], "loose": ["x/loose"]}


def test_labels_from_real_run_folders(tmp_path):
    import yaml

    from agentic_rl.train.plot import flat_config

    for name, alpha in (("a", 0.2), ("b", 0.1)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.yaml").write_text(yaml.safe_dump({
            "algorithm": {"name": "opd", "opd_alpha": alpha, "her": {"strategy": "future"}},
            "environment": {"name": "FetchReach-v4"}, "training": {"seed": 0}}))
    groups = group_runs({name: flat_config(tmp_path / name) for name in ("a", "b")})
    assert sorted(groups) == ["opd FetchReach-v4 (algorithm.opd_alpha=0.1)",
                              "opd FetchReach-v4 (algorithm.opd_alpha=0.2)"]

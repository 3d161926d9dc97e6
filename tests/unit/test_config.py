"""Config validation: every user mistake gives one line naming the key and the fix."""

import pytest

from agentic_rl.algos.schedule import Schedule
from agentic_rl.config import ConfigError, apply_override, load_config, validate_config

MINIMAL = {"algorithm": {"name": "opd"}}


def test_defaults_and_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("algorithm: {name: opd}\ntraining: {total_timesteps: 1e4}\n")
    config = load_config(path, ["algorithm.opd_alpha=0.1", "environment.name=FetchPush-v4",
                                "algorithm.opd_alpha={schedule: linear, start: 0.2, end: 0.05, "
                                "steps: 100}"])
    assert config.training.total_timesteps == 10_000
    assert config.environment.name == "FetchPush-v4"
    assert isinstance(config.algorithm.opd_alpha, Schedule)
    assert config.algorithm.opd_alpha.value(50) == pytest.approx(0.125)


def test_unknown_key_names_path_and_closest_valid_key():
    with pytest.raises(ConfigError) as error:
        validate_config({"algorithm": {"name": "opd", "opd_alpah": 0.1}})
    message = str(error.value)
    assert "algorithm.opd_alpah" in message and "algorithm.opd_alpha" in message
    assert "\n" not in message
    with pytest.raises(ConfigError, match="training.eval_freq"):
        validate_config({**MINIMAL, "training": {"eval_frq": 3}})
    with pytest.raises(ConfigError, match="unknown config key 'trainig'"):
        validate_config({**MINIMAL, "trainig": {}})


def test_wrong_type_and_bad_values():
    with pytest.raises(ConfigError, match="'training.total_timesteps'"):
        validate_config({**MINIMAL, "training": {"total_timesteps": "lots"}})
    with pytest.raises(ConfigError, match="'algorithm.gamma'"):
        validate_config({"algorithm": {"name": "sac", "gamma": 1.5}})
    with pytest.raises(ConfigError, match="'algorithm.name': unknown algorithm 'ddpg'"):
        validate_config({"algorithm": {"name": "ddpg"}})
    with pytest.raises(ConfigError, match="exponential"):
        validate_config({"algorithm": {"name": "opd", "opd_alpha": {
            "schedule": "exponential", "start": 0.2, "end": 0.0, "steps": 10}}})


def test_bad_override_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="section.key=value"):
        apply_override({}, "algorithm.opd_alpha")
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("algorithm: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(tmp_path / "bad.yaml")


def test_every_shipped_config_validates_and_names_a_known_env():
    from agentic_rl.envs.make import register_all
    from tests.conftest import REPO

    import gymnasium as gym

    register_all()
    paths = sorted((REPO / "configs").glob("*.yaml"))
    assert len(paths) >= 15
    for path in paths:
        config = load_config(path)
        name = config.environment.name
        assert name in gym.registry or name.startswith("agentic_rl/ALFWorld"), (path, name)


@pytest.mark.parametrize("name, dotted, value", [
    ("ppo", "training.learning_starts", 7),
    ("hgpo", "algorithm.hidden_sizes", [32]),
    ("hgpo", "training.buffer_size", 1000),
    ("hgpo_sac", "algorithm.hidden_sizes", [32]),
    ("text_opd", "environment.normalize_obs", False),
    ("text_opd", "environment.num_envs", 8),
    ("td3", "algorithm.init_alpha", 0.5),
    ("sac", "algorithm.self_prototypes", False),
])
def test_a_key_the_algorithm_does_not_read_is_an_error_naming_its_readers(name, dotted, value):
    section, key = dotted.split(".")
    raw = {"algorithm": {"name": name}}
    raw.setdefault(section, {})[key] = value
    with pytest.raises(ConfigError) as caught:
        validate_config(raw)
    message = str(caught.value)
    assert f"'{dotted}' is not read by {name}" in message and "\n" not in message
    readers = message.split("read by ")[-1].rstrip(")")
    assert readers and name not in readers.split(", ")


@pytest.mark.parametrize("raw, message", [
    ({"training": {"weight_sync_every": 500}}, "read only with training.rollout_workers > 0"),
    ({"training": {"rollout_workers": 2, "overlap_env": True}}, "drop one"),
    ({"training": {"rollout_workers": 2}, "verification": {"shield_train": True}},
     "cannot run with training.rollout_workers"),
    ({"algorithm": {"name": "ppo"}, "training": {"rollout_workers": 2, "weight_sync_every": 64}},
     "'training.weight_sync_every' is not read by ppo"),
])
def test_rollout_worker_keys_that_cannot_work_together_are_one_line_errors(raw, message):
    with pytest.raises(ConfigError, match=message) as caught:
        validate_config({"algorithm": {"name": "sac"}, **raw})
    assert "\n" not in str(caught.value)


def test_an_agent_section_of_older_configs_is_merged_into_algorithm():
    config = validate_config({"algorithm": {"name": "opd", "opd_alpha": 0.5},
                              "agent": {"hidden_sizes": [32], "self_prototypes": False}})
    assert config.algorithm.hidden_sizes == [32] and not config.algorithm.self_prototypes
    assert "agent" not in config.model_dump()
    with pytest.raises(ConfigError, match="agent.hidden_sizes and algorithm.hidden_sizes both"):
        validate_config({"algorithm": {"name": "sac", "hidden_sizes": [8]},
                         "agent": {"hidden_sizes": [32]}})
    # a resolved older run folder: every agent key written at its default
    old = {"algorithm": {"name": "hgpo"}, "agent": {"hidden_sizes": [256, 256],
                                                    "self_prototype_capacity": 20_000}}
    assert validate_config(old).algorithm.name == "hgpo"


def test_unread_keys_at_their_defaults_pass_so_resolved_configs_reload():
    for name in ("ppo", "hgpo", "hgpo_sac", "text_opd", "td3"):
        config = validate_config({"algorithm": {"name": name}})
        validate_config(config.model_dump(mode="json"))  # the run folder's config.yaml
    for planner in ("expert_plan", "learned"):  # the learned Manager's keys at their defaults
        config = validate_config({"algorithm": {"name": "text_opd",
                                                "manager": {"planner": planner}}})
        validate_config(config.model_dump(mode="json"))


def test_one_schedule_model_for_every_scheduled_value():
    for name, key in (("opd", "opd_alpha"), ("text_opd", "opd_alpha")):
        config = validate_config({"algorithm": {"name": name, key: {
            "schedule": "linear", "start": 1.0, "end": 0.5, "steps": 10}}})
        assert getattr(config.algorithm, key).value(5) == pytest.approx(0.75)
    hgpo = validate_config({"algorithm": {"name": "hgpo", "manager_log_std_cap": {
        "start": 1.0, "end": -2.0, "steps": 100, "start_step": 100}}})
    cap = hgpo.algorithm.manager_log_std_cap
    assert [cap.value(s) for s in (0, 100, 150, 300)] == pytest.approx([1.0, 1.0, -0.5, -2.0])
    with pytest.raises(ConfigError, match="opd_alpha must stay >= 0"):
        validate_config({"algorithm": {"name": "opd", "opd_alpha": {
            "start": 1.0, "end": -0.1, "steps": 10}}})


def test_older_schedule_keys_still_load():
    text = validate_config({"algorithm": {"name": "text_opd", "opd_alpha": 1.0,
                                          "opd_alpha_end": 0.2, "opd_alpha_schedule": "exponential",
                                          "opd_alpha_steps": 200}})
    assert text.algorithm.opd_alpha == Schedule(schedule="exponential", start=1.0, end=0.2,
                                                steps=200)
    constant = validate_config({"algorithm": {"name": "text_opd", "opd_alpha": 0.5,
                                              "opd_alpha_schedule": "constant"}})
    assert constant.algorithm.opd_alpha == 0.5
    hgpo = validate_config({"algorithm": {"name": "hgpo", "manager_log_std_cap": {
        "start_step": 100, "end_step": 200, "start": 1.0, "end": -2.0}}})
    assert hgpo.algorithm.manager_log_std_cap.value(150) == pytest.approx(-0.5)

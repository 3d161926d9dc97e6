"""HGPO with SAC levels through the CLI: train, resume, evaluate (the shared loop)."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from agentic_rl.cli import main
from tests.conftest import REPO


def test_smoke_hgpo_sac_train_resume_eval(tmp_path, capsys):
    base = ["train", str(REPO / "configs" / "hgpo_pointmaze.yaml"), "--log-dir", str(tmp_path),
            "--no-progress", "environment.name=agentic_rl/PointMaze_UMaze-v3",
            "environment.kwargs.max_episode_steps=50", "training.learning_starts=200",
            "training.eval_freq=400", "training.log_freq=200", "training.checkpoint_freq=400",
            "training.num_eval_episodes=2"]
    assert main([*base, "training.total_timesteps=800"]) == 0
    run_dir = tmp_path / "hgpo_pointmaze_seed0"
    assert (run_dir / "checkpoints" / "latest").read_text() == "step_000000800"
    assert main([*base, "training.total_timesteps=1200", "--resume"]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] == 1200 and summary["algorithm"] == "hgpo_sac"
    metrics = (run_dir / "metrics.csv").read_text()
    for key in ("eval/success_rate", "losses/worker_critic_loss", "losses/manager_critic_loss",
                "rollout/success_rate", "eval/subgoal_reached_rate", "eval/subgoal_saturation"):
        assert key in metrics
    final = summary["eval_history"][-1]
    assert 0 <= final["subgoal_reached_rate"] <= 1 and 0 <= final["subgoal_saturation"] <= 1
    capsys.readouterr()
    assert main(["eval", str(run_dir), "--episodes", "2"]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["episodes"] == 2 and "subgoal_path_distance" in evaluated
    assert evaluated["subgoal_distance"] >= 0
    property_file = REPO / "configs" / "safety" / "fetch_reach_action_bounds.yaml"
    assert main(["verify", str(run_dir), "--property", str(property_file)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and "flat continuous learner" in err


def test_smoke_relative_tested_subgoals_train_and_resume(tmp_path):
    base = ["train", str(REPO / "configs" / "hgpo_pointmaze.yaml"), "--log-dir", str(tmp_path),
            "--no-progress", "environment.name=agentic_rl/PointMaze_UMaze-v3",
            "environment.kwargs.max_episode_steps=50", "training.learning_starts=200",
            "training.eval_freq=400", "training.log_freq=200", "training.checkpoint_freq=400",
            "training.num_eval_episodes=2", "algorithm.subgoals=relative",
            "algorithm.goal_scale=1.0", "algorithm.subgoal_testing=0.3"]
    assert main([*base, "training.total_timesteps=600"]) == 0
    assert main([*base, "training.total_timesteps=800", "--resume"]) == 0
    run_dir = tmp_path / "hgpo_pointmaze_seed0"
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] == 800
    assert ",hgpo/missed_tested_share," in (run_dir / "metrics.csv").read_text()


def test_smoke_relative_worker_input_trains_resumes_and_evaluates(tmp_path, capsys):
    base = ["train", str(REPO / "configs" / "hgpo_pointmaze.yaml"), "--log-dir", str(tmp_path),
            "--no-progress", "environment.name=agentic_rl/PointMaze_UMaze-v3",
            "environment.kwargs.max_episode_steps=50", "training.learning_starts=200",
            "training.eval_freq=400", "training.log_freq=200", "training.checkpoint_freq=400",
            "training.num_eval_episodes=2", "algorithm.planner=null",
            "algorithm.subgoals=relative", "algorithm.worker_goal_input=relative",
            "algorithm.worker_reward=distance", "algorithm.goal_scale=1.0",
            "algorithm.manager.obs_keys=[observation,achieved_goal]"]
    assert main([*base, "training.total_timesteps=600"]) == 0
    assert main([*base, "training.total_timesteps=800", "--resume"]) == 0
    run_dir = tmp_path / "hgpo_pointmaze_seed0"
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] == 800
    capsys.readouterr()
    assert main(["eval", str(run_dir), "--episodes", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 2


def test_smoke_ant_with_failures_and_the_visit_planner_trains_resumes_and_evaluates(tmp_path):
    # the ant ends an episode as a failure when it leaves its healthy range; the Worker's
    # replay keeps those steps, the checkpoint carries them; the visit graph plans in evaluation
    base = ["train", str(REPO / "configs" / "hgpo_antmaze.yaml"), "--log-dir", str(tmp_path),
            "--no-progress", "environment.num_envs=2", "environment.kwargs.max_episode_steps=60",
            "environment.kwargs.terminate_when_unhealthy=true", "training.learning_starts=150",
            "training.eval_freq=300", "training.log_freq=150", "training.checkpoint_freq=300",
            "training.num_eval_episodes=1", "algorithm.worker.hidden_sizes=[16,16]",
            "algorithm.visit_planner.refresh_every=100"]
    assert main([*base, "training.total_timesteps=450"]) == 0
    run_dir = tmp_path / "hgpo_antmaze_seed0"
    # built for the evaluation at 300, logged with the updates after it
    assert ",planner/cells," in (run_dir / "metrics.csv").read_text()
    assert main([*base, "training.total_timesteps=600", "--resume"]) == 0
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] == 600


@pytest.mark.parametrize("learner", ["sac", "td3"])
def test_flat_her_refuses_an_env_that_ends_episodes_in_failure(tmp_path, capsys, learner):
    config = yaml.safe_load((REPO / "configs" / "sac_her_antmaze.yaml").read_text())
    config["algorithm"].pop("action_bound")  # TD3 reads none
    (tmp_path / "flat.yaml").write_text(yaml.safe_dump(config))
    assert main(["train", str(tmp_path / "flat.yaml"), "--log-dir",
                 str(tmp_path), "--no-progress", "environment.num_envs=1",
                 "environment.kwargs.terminate_when_unhealthy=true",
                 f"algorithm.name={learner}"]) == 2
    err = capsys.readouterr().err
    assert "terminate_when_unhealthy" in err and "HER" in err


def test_an_evaluation_only_visit_planner_leaves_training_bit_exact_and_joins_on_resume(
        tmp_path, capsys):
    from safetensors.torch import load_file

    def args(folder, *extra):
        return ["train", str(REPO / "configs" / "hgpo_pointmaze.yaml"), "--log-dir",
                str(tmp_path / folder), "--no-progress",
                "environment.name=agentic_rl/PointMaze_UMaze-v3",
                "environment.kwargs.max_episode_steps=50", "training.learning_starts=200",
                "training.eval_freq=200", "training.log_freq=200",
                "training.checkpoint_freq=400", "training.num_eval_episodes=2",
                "algorithm.planner=null", "algorithm.subgoals=relative",
                "algorithm.worker_reward=distance", "algorithm.goal_scale=1.0", *extra]

    planner = "algorithm.visit_planner={cell: 0.5, reach: 1.0, refresh_every: 50}"
    assert main([*args("plain", "training.total_timesteps=600")]) == 0
    assert main([*args("planned", planner, "training.total_timesteps=600")]) == 0

    def weights(folder):
        run_dir = tmp_path / folder / "hgpo_pointmaze_seed0"
        tensors = load_file(run_dir / "checkpoints" / "step_000000600" / "model.safetensors")
        return {k: v for k, v in tensors.items() if ".planner." not in k}

    plain, planned = weights("plain"), weights("planned")
    assert plain.keys() == planned.keys()
    assert all(torch.equal(plain[k], planned[k]) for k in plain)
    evals = json.loads((tmp_path / "planned" / "hgpo_pointmaze_seed0" / "summary.json")
                       .read_text())["eval_history"]
    assert len(evals) == 3  # the planner did plan in them: its graph was built and logged
    assert ",planner/cells," in (tmp_path / "planned" / "hgpo_pointmaze_seed0" /
                                 "metrics.csv").read_text()
    # added to a run on resume: accepted; one that would choose training subgoals: refused
    capsys.readouterr()
    training = planner.replace("}", ", use: train_and_eval}")
    assert main([*args("plain", training, "training.total_timesteps=800", "--resume")]) == 2
    assert "only training.* and evaluation-only keys" in capsys.readouterr().err
    assert main([*args("plain", planner, "training.total_timesteps=800", "--resume")]) == 0

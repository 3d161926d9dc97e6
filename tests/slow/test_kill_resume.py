"""``kill -9`` at random moments, five times per family, then ``--resume`` to the end: the
final weights equal an uninterrupted run's bit for bit on CPU (``pytest -m slow``)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time

import pytest
from safetensors.torch import load_file

from agentic_rl.config import dump_config
from agentic_rl.data.checkpoint import latest_checkpoint
from agentic_rl.train.run import train
from tests.conftest import REPO
from tests.smoke.test_family_matrix import FAMILIES, family_config
from tests.smoke.test_text_family_matrix import games_and_demos, text_config  # noqa: F401

pytestmark = pytest.mark.slow
KILLS = 5
# Long enough that five kills at 1.5-5 s land before the end (3000 off-policy steps once
# finished after four); on-policy steps are cheaper.
STEPS = {"ppo": 12_000, "hgpo": 12_000}
OFF_POLICY_STEPS = 5000


@pytest.mark.parametrize("family", FAMILIES)
def test_kill_nine_five_times_then_resume_matches_an_uninterrupted_run(tmp_path, family):
    config = family_config(tmp_path, family, steps=STEPS.get(family, OFF_POLICY_STEPS),
                           training={"checkpoint_freq": 40})
    train(config, tmp_path / "reference", show_progress=False)
    path = tmp_path / "point.yaml"
    dump_config(config, path)
    command = [sys.executable, "-m", "agentic_rl.cli", "train", str(path), "--log-dir",
               str(tmp_path / "killed"), "--no-progress", "--resume"]
    moments = random.Random(f"{family}-kills")
    kills = 0
    while kills < KILLS:
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
        time.sleep(moments.uniform(1.5, 5.0))
        if process.poll() is not None:  # finished before the kill: start over from scratch
            assert process.returncode == 0, process.stderr.read()
            break
        process.send_signal(signal.SIGKILL)
        process.wait()
        kills += 1
    finished = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr
    reference = load_file(latest_checkpoint(tmp_path / "reference") / "model.safetensors")
    resumed = load_file(latest_checkpoint(tmp_path / "killed" / "point_seed0") /
                        "model.safetensors")
    assert reference.keys() == resumed.keys()
    for key in reference:
        assert (reference[key] == resumed[key]).all(), key
    assert kills == KILLS, "the run finished before five kills; lengthen it"


def test_text_agent_kill_nine_five_times_then_resume_matches(games_and_demos, tmp_path):
    """text_opd, with 3-step episodes that no game can be won in (so the 4 envs end their
    episodes together and every checkpoint is exact); kills land after the encoder loaded."""
    config = text_config(games_and_demos, steps=20_000, environment={"kwargs": {
        "data_path": str(games_and_demos[0]), "max_steps": 3}},
        training={"checkpoint_freq": 48, "eval_freq": 5000, "log_freq": 1000})
    train(config, tmp_path / "reference", show_progress=False)
    path = tmp_path / "text.yaml"
    dump_config(config, path)
    command = [sys.executable, "-m", "agentic_rl.cli", "train", str(path), "--log-dir",
               str(tmp_path / "killed"), "--no-progress", "--resume"]
    moments = random.Random("text-kills")
    for _ in range(KILLS):
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
        time.sleep(moments.uniform(8.0, 14.0))
        assert process.poll() is None, "the run finished before five kills; lengthen it"
        process.send_signal(signal.SIGKILL)
        process.wait()
    finished = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr
    reference = load_file(latest_checkpoint(tmp_path / "reference") / "model.safetensors")
    resumed = load_file(latest_checkpoint(tmp_path / "killed" / "text_seed0") /
                        "model.safetensors")
    for key in reference:
        assert (reference[key] == resumed[key]).all(), key

"""A sweep whose driver is killed (``kill -9`` of its process group, Ray's local processes
with it) halfway continues with ``--resume`` and reruns none of the trials already done."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from tests.conftest import REPO
from tests.smoke.test_sweep import TINY

pytest.importorskip("ray.tune", reason="sweeps need the [ray] extra (make test installs it)")
pytestmark = pytest.mark.slow


def test_killed_sweep_resumes_without_rerunning_finished_trials(tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({**TINY, "training": {**TINY["training"],
                                                           "total_timesteps": 400}}))
    command = [sys.executable, "-m", "agentic_rl.cli", "sweep", str(config), "--log-dir",
               str(tmp_path), "--seeds", "2", "--max-concurrent", "1",
               "--param", "algorithm.gamma=[0.8,0.9,0.95]"]
    folder = tmp_path / "sweep_tiny"
    driver = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    while len(list(folder.glob("*/run/summary.json"))) < 2 and time.time() < deadline:
        assert driver.poll() is None, "the sweep ended before it could be killed"
        time.sleep(0.2)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    done = {path: path.stat().st_mtime_ns for path in folder.glob("*/run/summary.json")}
    assert 2 <= len(done) < 6
    resumed = subprocess.run([*command, "--resume"], cwd=REPO, capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert len(list(folder.glob("*/run/summary.json"))) == 6
    assert {path: path.stat().st_mtime_ns for path in done} == done
    assert "| algorithm.gamma=0.95 | 2 (0) |" in resumed.stdout

"""``agentic-rl sweep --address`` and ``agentic-rl train --address`` with two rollout workers on
a two-node Ray cluster on the loopback range, both nodes
started (each with its own temp dir and one CPU) and stopped by the test. The nodes take
127.0.0.2 and 127.0.0.3: Ray turns 127.0.0.1 into the machine's own address on a cluster."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.smoke.test_sweep import TINY

pytest.importorskip("ray.tune", reason="sweeps need the [ray] extra (make test installs it)")
RAY = str(Path(sys.executable).with_name("ray"))
# A throwaway cluster on the loopback range: no token authentication between its parts.
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1"}
HEAD, WORKER = "127.0.0.2", "127.0.0.3"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HEAD, 0))
        return probe.getsockname()[1]


def ray_start(ip: str, *args: str) -> None:
    subprocess.run([RAY, "start", "--node-ip-address", ip, "--num-cpus", "1",
                    "--disable-usage-stats", *args], check=True, capture_output=True, timeout=120,
                   env=ENV)


def test_sweep_runs_on_a_two_node_cluster(tmp_path):
    port = free_port()
    # short temp dirs: Ray's socket paths must stay under the Unix limit
    head_dir, worker_dir = (tempfile.mkdtemp(prefix="rh", dir="/tmp"),
                            tempfile.mkdtemp(prefix="rw", dir="/tmp"))
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    try:
        ray_start(HEAD, "--head", "--port", str(port), "--temp-dir", head_dir,
                  "--include-dashboard=false")
        ray_start(WORKER, "--address", f"{HEAD}:{port}", "--temp-dir", worker_dir)
        count = ("import ray; ray.init(address='%s:%d'); "
                 "print(sorted(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']))"
                 % (HEAD, port))
        nodes = subprocess.run([sys.executable, "-c", count], capture_output=True, text=True,
                               timeout=120, cwd=REPO, env=ENV)
        assert nodes.stdout.strip().splitlines()[-1] == str([HEAD, WORKER]), nodes.stderr[-2000:]
        sweep = subprocess.run(
            [sys.executable, "-m", "agentic_rl.cli", "sweep", str(config), "--log-dir",
             str(tmp_path), "--param", "algorithm.gamma=[0.9,0.95]", "--address",
             f"{HEAD}:{port}"], capture_output=True, text=True, timeout=300, cwd=REPO,
            env=ENV)
        assert sweep.returncode == 0, sweep.stderr[-3000:]
        assert len(list((tmp_path / "sweep_tiny").glob("*/run/summary.json"))) == 2
        assert "| algorithm.gamma=0.95 | 1 (0) |" in sweep.stdout
        training = subprocess.run(  # one rollout worker on each node (one CPU each)
            [sys.executable, "-m", "agentic_rl.cli", "train", str(config), "--log-dir",
             str(tmp_path / "workers"), "--no-progress", "--address", f"{HEAD}:{port}",
             "training.rollout_workers=2", "training.weight_sync_every=20",
             "training.learning_starts=40"],
            capture_output=True, text=True, timeout=300, cwd=REPO, env=ENV)
        assert training.returncode == 0, training.stderr[-3000:]
        assert '"restarts": 0' in training.stdout and '"env_steps": 80' in training.stdout
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120, env=ENV)
        shutil.rmtree(head_dir, ignore_errors=True)
        shutil.rmtree(worker_dir, ignore_errors=True)

"""A new user's quick try stays quick: a short run imports nothing it does not need."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_a_short_training_run_never_imports_torch_dynamo(tmp_path):
    """torch's optimiser wrappers import torch._dynamo (over a second) on first use."""
    code = ("import sys; from agentic_rl.cli import main\n"
            f"main(['train', r'{REPO / 'configs' / 'opd_point.yaml'}', '--log-dir', "
            f"r'{tmp_path}', '--no-progress', 'training.total_timesteps=40', "
            f"'algorithm.prototype_data_path={tmp_path / 'demo.npz'}', "
            "'training.num_eval_episodes=2'])\n"
            "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"

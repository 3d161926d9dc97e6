"""Bit-for-bit parity of the shared loop across commits: train every loop family briefly on
the tiny tasks of the feature-matrix test (same seed) and print a hash of its final weights.
Run it in two checkouts (``git worktree add /tmp/old COMMIT``) and compare the lines; equal
hashes mean a change left every family's training exactly as it was.

    (cd /tmp/old && python /path/to/benchmarks/loop_parity.py) > old.txt
    python benchmarks/loop_parity.py > new.txt && diff old.txt new.txt
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file


def weights_digest(run_dir: Path) -> str:
    """sha256 over the latest checkpoint's tensors (generator states left out)."""
    from agentic_rl.data.checkpoint import latest_checkpoint

    weights = load_file(latest_checkpoint(run_dir) / "model.safetensors")
    digest = hashlib.sha256()
    for key in sorted(k for k in weights if "generator" not in k):
        digest.update(key.encode())
        digest.update(weights[key].contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args(argv)
    sys.path.insert(0, ".")  # the checkout this runs in, not an installed copy
    from agentic_rl.train.run import train
    from tests.smoke.test_family_matrix import FAMILIES, family_config

    torch.set_num_threads(1)
    for family in FAMILIES:
        with tempfile.TemporaryDirectory() as folder:
            folder = Path(folder)
            train(family_config(folder, family, steps=args.steps), folder / "run",
                  show_progress=False)
            print(family, weights_digest(folder / "run"), flush=True)


if __name__ == "__main__":
    main()

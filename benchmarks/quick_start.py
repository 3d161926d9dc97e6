"""A new user's quick try: seconds from interpreter start to the first env step, and to the
end, of ``agentic-rl train configs/opd_point.yaml training.total_timesteps=200`` (demos recorded
by the first round, so later rounds time a warm start). Issue 16's bar: first env step < 3 s.

    python benchmarks/quick_start.py --rounds 3
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBE = """
import sys, time
started = time.perf_counter()
import agentic_rl.collect.collector as collector
step_async = collector.Collector.step_async
def timed(self, action):
    if not getattr(collector, "first", None):
        collector.first = time.perf_counter() - started
    return step_async(self, action)
collector.Collector.step_async = timed
from agentic_rl.cli import main
main(["train", sys.argv[1], "--log-dir", sys.argv[2], "--no-progress",
      "training.total_timesteps=200", f"algorithm.prototype_data_path={sys.argv[3]}"])
print(f"{collector.first:.3f} {time.perf_counter() - started:.3f}")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    rows = []
    for index in range(args.rounds):
        out = subprocess.run([sys.executable, "-c", PROBE, str(REPO / "configs" / "opd_point.yaml"),
                              str(folder / f"run{index}"), str(folder / "demos.npz")],
                             capture_output=True, text=True, check=True, cwd=REPO)
        first, end = map(float, out.stdout.strip().splitlines()[-1].split())
        rows.append((index, first, end))
    print("| round | first env step s | whole run s |\n|---|---|---|")
    for index, first, end in rows:
        print(f"| {index} | {first:.2f} | {end:.2f} |")


if __name__ == "__main__":
    main()

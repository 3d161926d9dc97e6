"""A real sweep killed halfway and resumed (issue 18's sweep acceptance).

    python benchmarks/sweep_resume.py --log-dir /tmp/sweep_check --json sweep_resume.json

Runs ``agentic-rl sweep configs/opd_fetch_reach.yaml --param algorithm.opd_alpha=[1,20]
--seeds 3`` on the local Ray, kills the driver's process group (``kill -9``) once half of the
trials have finished, reruns the same command with ``--resume``, and reports how many trials
were done before the kill, whether any of them ran again (their ``summary.json`` rewritten),
the wall time of each part and the final table.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SWEEP = ["configs/opd_fetch_reach.yaml", "--param", "algorithm.opd_alpha=[1,20]", "--seeds", "3"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log-dir", type=Path, required=True)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    command = [sys.executable, "-m", "agentic_rl.cli", "sweep", *SWEEP, "--log-dir",
               str(args.log_dir)]
    folder = args.log_dir / "sweep_opd_fetch_reach"
    start = time.perf_counter()
    driver = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    while len(list(folder.glob("*/run/summary.json"))) < 3:
        if driver.poll() is not None:
            raise SystemExit(f"the sweep ended (status {driver.returncode}) before half its "
                             "trials were done")
        time.sleep(0.5)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    killed_after = time.perf_counter() - start
    done = {str(p): p.stat().st_mtime_ns for p in folder.glob("*/run/summary.json")}
    start = time.perf_counter()
    resumed = subprocess.run([*command, "--resume"], cwd=REPO, capture_output=True, text=True)
    if resumed.returncode != 0:
        raise SystemExit(resumed.stderr[-3000:])
    rerun = [p for p, stamp in done.items() if Path(p).stat().st_mtime_ns != stamp]
    result = {"trials": 6, "done_before_kill": len(done), "rerun_after_resume": len(rerun),
              "finished": len(list(folder.glob("*/run/summary.json"))),
              "seconds_before_kill": round(killed_after, 1),
              "seconds_resumed": round(time.perf_counter() - start, 1),
              "table": (folder / "sweep_summary.md").read_text()}
    print(json.dumps({k: v for k, v in result.items() if k != "table"}, indent=2))
    print(result["table"])
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

"""The machine's limit for one SAC update, measured in the same run as our update.

FLOPs of one update are counted analytically (2*m*n*k per GEMM: each layer's forward product,
its weight-gradient product where the weights learn, its input-gradient product where a
gradient has to flow further down; elementwise work, the optimiser and sampling are not
counted, so the floor is optimistic). The achieved GFLOP/s of large ``torch.mm`` products on
the same thread count give the best possible updates/s; our real ``SAC.update`` (FetchReach-v4,
HER-sampled batches from a filled replay buffer, exactly as in training) is timed in rounds
alternated with the matmul measurement, and the fraction is the median over the rounds.

    python benchmarks/update_floor.py --hidden 256 256 --batch 256 --threads 1 --json FILE
    python benchmarks/update_floor.py --hidden 64 64 --threads 2 --busy 1   # one spinning process
    python benchmarks/update_floor.py --hidden 256 256 --thread-study      # 1 vs 2 threads,
                                                  # no extra process vs one spinning process
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import markdown_table, write_json  # noqa: E402

from agentic_rl.collect.collector import Collector  # noqa: E402
from agentic_rl.config import validate_config  # noqa: E402
from agentic_rl.train.setup import build_run  # noqa: E402

ENV_ID = "FetchReach-v4"


def mlp_flops(batch: int, dims: list[int], weight_grad: bool, input_grad: str) -> int:
    """FLOPs of an MLP with layer widths ``dims`` on ``batch`` rows: forward, plus weight
    gradients if ``weight_grad``, plus input gradients for every layer above the first
    (``input_grad="hidden"``), also for the first (``"all"``) or none (``"none"``)."""
    total = 0
    for layer, (k, n) in enumerate(zip(dims, dims[1:])):
        gemm = 2 * batch * k * n
        total += gemm  # forward
        if weight_grad:
            total += gemm
        if input_grad == "all" or (input_grad == "hidden" and layer > 0):
            total += gemm
    return total


def update_flops(obs_dim: int, act_dim: int, hidden: list[int], batch: int,
                 num_q: int = 2, action_grad_members: int | None = None) -> dict[str, int]:
    """FLOPs of one SAC update, by part. ``obs_dim`` includes the goal.

    ``action_grad_members``: through how many critic members each row's actor-loss gradient is
    propagated: all ``num_q`` when written out densely (the Python gradients, the default), 1
    when only the member that gives min_i Q_i(s, pi(s)) is (the fused update; the others'
    gradient is zero)."""
    members = num_q if action_grad_members is None else action_grad_members
    actor = [obs_dim, *hidden]  # trunk; the mean and log-std heads are added below
    critic = [obs_dim + act_dim, *hidden, 1]

    def actor_flops(weight_grad: bool, input_grad: str) -> int:
        heads = 2 * (2 * batch * hidden[-1] * act_dim) * (1 + weight_grad
                                                          + (input_grad != "none"))
        return mlp_flops(batch, actor, weight_grad, input_grad) + heads

    # The actor-loss pass through the critic needs gradients only w.r.t. the action: its first
    # layer's input gradient is counted for the action columns only.
    action_input_grad = 2 * batch * act_dim * hidden[0] * members
    critic_forward = mlp_flops(batch, critic, False, "none")
    hidden_input_grads = mlp_flops(batch, critic, False, "hidden") - critic_forward
    return {
        "actor on s' (no grad)": actor_flops(False, "none"),
        "target critic on (s', a')": num_q * mlp_flops(batch, critic, False, "none"),
        "critic on (s, a), fwd + bwd": num_q * mlp_flops(batch, critic, True, "hidden"),
        "actor on s, fwd + bwd": actor_flops(True, "hidden"),
        "critic on (s, pi(s)), fwd + grad wrt a":
            num_q * critic_forward + members * hidden_input_grads + action_input_grad,
    }


def matmul_gflops(seconds: float, size: int = 1024) -> float:
    """Achieved GFLOP/s of ``size``-cubed ``torch.mm`` on the current thread count."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    out = torch.empty(size, size)
    torch.mm(a, b, out=out)
    count, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        torch.mm(a, b, out=out)
        count += 1
    return 2 * size**3 * count / (time.perf_counter() - started) / 1e9


def build_filled_run(hidden: list[int], batch: int, threads: int, fill_steps: int):
    """Our off-policy run (SAC + HER on FetchReach) with ``fill_steps`` policy steps stored."""
    config = validate_config({
        "algorithm": {"name": "sac", "batch_size": batch, "hidden_sizes": hidden},
        "environment": {"name": ENV_ID}, "training": {"torch_threads": threads}})
    run = build_run(config, Path(tempfile.mkdtemp()))
    collector = Collector(run.envs, run.rng)
    collector.reset_all()
    for _ in range(fill_steps):
        obs = collector.policy_obs()
        env_action, _, extras = run.algo.act(obs, None, "explore")
        transition, end, finished = collector.step(env_action, extras["unit_action"])
        for episode in run.storage.add(collector.record(transition, extras, end, finished,
                                                        obs)):
            run.algo.observe(episode)
    return run


def updates_per_s(run, batch: int, seconds: float) -> float:
    """Our update rate: a fresh HER batch per update (sampling not timed)."""
    elapsed, count = 0.0, 0
    while elapsed < seconds:
        sampled = run.storage.sample(None, run.sample_generator)  # config's batch_size
        started = time.perf_counter()
        run.algo.update(sampled)
        elapsed += time.perf_counter() - started
        count += 1
    return count / elapsed


def spin() -> None:
    while True:
        pass


def thread_study(run, batch: int, rounds: int, seconds: float) -> list[dict]:
    """Our updates/s with 1 and 2 torch threads, without and with one extra spinning process,
    the four conditions alternated in every round; medians over the rounds."""
    conditions = [(threads, busy) for busy in (0, 1) for threads in (1, 2)]
    rates: dict[tuple[int, int], list[float]] = {c: [] for c in conditions}
    for _ in range(rounds):
        for threads, busy in conditions:
            torch.set_num_threads(threads)
            spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(busy)]
            for process in spinners:
                process.start()
            try:
                updates_per_s(run, batch, 0.2)  # settle the thread pool and the spinner
                rates[(threads, busy)].append(updates_per_s(run, batch, seconds))
            finally:
                for process in spinners:
                    process.kill()
                    process.join()
    torch.set_num_threads(1)
    return [{"threads": t, "busy": b, "updates_per_s": statistics.median(rates[(t, b)]),
             "rounds": rates[(t, b)]} for t, b in conditions]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 256])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5, help="alternated measurement rounds")
    parser.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    parser.add_argument("--fill-steps", type=int, default=1000)
    parser.add_argument("--busy", type=int, default=0,
                        help="start this many spinning processes (a busy core) while measuring")
    parser.add_argument("--thread-study", action="store_true",
                        help="only time our update with 1/2 threads, other core free/busy")
    parser.add_argument("--json")
    args = parser.parse_args()
    run = build_filled_run(args.hidden, args.batch, args.threads, args.fill_steps)
    if args.thread_study:
        rows = thread_study(run, args.batch, args.rounds, args.seconds)
        one = {row["busy"]: row["updates_per_s"] for row in rows if row["threads"] == 1}
        print(markdown_table(
            ["hidden", "batch", "torch threads", "extra spinning process", "updates/s",
             "ms per update", "vs 1 thread"],
            [[args.hidden, args.batch, r["threads"], "yes" if r["busy"] else "no",
              f"{r['updates_per_s']:.1f}", f"{1000 / r['updates_per_s']:.2f}",
              f"{r['updates_per_s'] / one[r['busy']]:.2f}"] for r in rows]))
        print(f"\nload average {os.getloadavg()[0]:.2f}")
        write_json(args.json, {"env": ENV_ID, "hidden": args.hidden, "batch": args.batch,
                               "thread_study": rows, "load_average": os.getloadavg()[0]})
        return
    torch.set_num_threads(args.threads)
    spaces = run.algo.actor.trunk[0].in_features, run.algo.actor.mean_head.out_features
    fused = run.algo.fused() is not None  # the fused update back-propagates one member per row
    parts = update_flops(spaces[0], spaces[1], args.hidden, args.batch,
                         run.algo.config.num_q, 1 if fused else None)
    flops = sum(parts.values())
    spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for process in spinners:
        process.start()
    try:
        updates_per_s(run, args.batch, 0.5)  # warm-up
        rounds = []
        for _ in range(args.rounds):
            gflops = matmul_gflops(args.seconds)
            ours = updates_per_s(run, args.batch, args.seconds)
            rounds.append({"matmul_gflops": gflops, "floor_updates_per_s": gflops * 1e9 / flops,
                           "ours_updates_per_s": ours,
                           "fraction": ours / (gflops * 1e9 / flops)})
    finally:
        for process in spinners:
            process.kill()
    median = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    print(markdown_table(["part", "MFLOP"], [[k, f"{v / 1e6:.1f}"] for k, v in parts.items()]
                         + [["**one update**", f"{flops / 1e6:.1f}"]]))
    print()
    print(markdown_table(
        ["hidden", "batch", "threads", "busy", "matmul GFLOP/s", "floor updates/s",
         "ours updates/s", "ours ms", "fraction of floor"],
        [[args.hidden, args.batch, args.threads, args.busy, f"{median['matmul_gflops']:.1f}",
          f"{median['floor_updates_per_s']:.1f}", f"{median['ours_updates_per_s']:.1f}",
          f"{1000 / median['ours_updates_per_s']:.2f}", f"{median['fraction']:.2f}"]]))
    print(f"\nupdate: {'fused C++ call' if fused else 'Python gradients (sac_grads)'}; "
          f"load average {os.getloadavg()[0]:.2f}; fractions per round: "
          + ", ".join(f"{r['fraction']:.2f}" for r in rounds))
    write_json(args.json, {"env": ENV_ID, "hidden": args.hidden, "batch": args.batch,
                           "threads": args.threads, "busy": args.busy,
                           "fused_update": fused, "flops_per_update": flops,
                           "flops_by_part": parts,
                           "median": median, "rounds": rounds,
                           "load_average": os.getloadavg()[0]})


if __name__ == "__main__":
    main()

"""``agentic-rl``: train | sweep | eval | demos | verify | plot | alfworld-gen.

User errors (bad config, unknown env, missing demo file, corrupt checkpoint) end with one line
``error: ...`` that says what to fix, and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agentic_rl.algos import TEXT
from agentic_rl.config import ConfigError
from agentic_rl.train.loop_signals import CheckpointedInterrupt

RUNS_DIR = "runs"


def user_errors() -> tuple[type[BaseException], ...]:
    from agentic_rl.envs.make import EnvError
    from agentic_rl.experts import NoExpertError
    from agentic_rl.experts.demos import DemoError
    from agentic_rl.plan.planners import PlannerError
    from agentic_rl.data.checkpoint import CheckpointError
    from agentic_rl.verify.spec import PropertyError

    return (ConfigError, EnvError, DemoError, CheckpointError, FileNotFoundError,
            PropertyError, PlannerError, NoExpertError)


def cmd_train(args: argparse.Namespace) -> None:
    from agentic_rl.config import load_config
    from agentic_rl.train.plot import plot_runs
    from agentic_rl.train.run import train

    overrides = list(args.overrides)
    if args.seed is not None:
        overrides.append(f"training.seed={args.seed}")
    config = load_config(args.config, overrides)
    run_dir = Path(args.log_dir) / f"{Path(args.config).stem}_seed{config.training.seed}"
    print(f"run folder: {run_dir}")
    summary = train(config, run_dir, resume=args.resume, init_from=args.init_from,
                    show_progress=not args.no_progress, address=args.address)
    brief = {k: v for k, v in summary.items() if k != "eval_history"}
    print(json.dumps(brief, indent=2))
    if "csv" in config.training.loggers:  # the curve is drawn from metrics.csv
        print(f"learning curve: {plot_runs([run_dir], run_dir / 'learning_curve.png')}")


def require_positive(value: int | None, flag: str) -> None:
    if value is not None and value < 1:
        raise ConfigError(f"{flag} must be a positive number of episodes, got {value}")


def cmd_eval(args: argparse.Namespace) -> None:
    require_positive(args.episodes, "--episodes")
    import yaml

    from agentic_rl.config import validate_config
    from agentic_rl.envs.make import make_env
    from agentic_rl.data.checkpoint import latest_checkpoint, load_learner
    from agentic_rl.train.evaluate import evaluate
    from agentic_rl.train.safety import build_safety
    from agentic_rl.train.setup import build_algo

    run_dir = Path(args.run_dir)
    config_path = run_dir / "config.yaml"
    if not config_path.exists():
        raise FileNotFoundError(f"{config_path} not found; pass a run folder written by "
                                "`agentic-rl train` or a model folder such as models/alfworld")
    config = validate_config(yaml.safe_load(config_path.read_text()))
    if config.algorithm.name in TEXT:
        from agentic_rl.train.text_eval import evaluate_text_model

        if args.data is None:
            raise ConfigError("text agents are evaluated on ALFWorld games: pass --data PATH "
                              "(a slim pack such as ../shared/alfworld/valid_seen_slim.tar.xz, "
                              "or a folder in the standard layout)")
        report = evaluate_text_model(config, run_dir, args.data, args.split, args.episodes,
                                     args.seed)
        print(json.dumps(report, indent=2))
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2))
        return
    args.episodes = 100 if args.episodes is None else args.episodes
    env = make_env(config.environment.name, config.environment.kwargs,
                   config.environment.goal_region)
    algo = build_algo(config, env)
    load_learner(algo, latest_checkpoint(run_dir))
    safety = build_safety(config, env)
    shield = safety.eval_shield if safety and not args.no_shield else None
    result = evaluate(algo, env, args.episodes, args.seed, shield=shield,
                      monitor=safety.eval_monitor if safety else None)
    report = {"run": str(run_dir), "env": config.environment.name, **result.to_dict()}
    if safety is not None:
        report["safety"] = {"shield": shield is not None, **safety.eval_monitor.summary()}
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


def cmd_demos(args: argparse.Namespace) -> None:
    require_positive(args.episodes, "--episodes")
    from agentic_rl.envs.alfworld import cli as alfworld_cli
    from agentic_rl.experts.demos import record_demos, save_demos

    if args.env == alfworld_cli.ENV_ID:
        alfworld_cli.run_alfworld_demos(args)
        return

    arrays = record_demos(args.env, args.episodes, seed=args.seed,
                          successful_only=not args.keep_failures)
    save_demos(arrays, args.out)
    print(f"wrote {len(arrays['episode_length'])} episodes ({len(arrays['reward'])} steps) of "
          f"{args.env} to {args.out}; expert success rate "
          f"{float(arrays['expert_success_rate']):.2f}")


def cmd_verify(args: argparse.Namespace) -> None:
    import yaml

    from agentic_rl.algos.spaces import shrunk_box
    from agentic_rl.envs.make import make_env
    from agentic_rl.verify.runner import format_results, verify_run

    run_dir = Path(args.run_dir)
    config_path = run_dir / "config.yaml"
    low = high = None
    if config_path.exists():  # check action properties in the env's own units
        saved = yaml.safe_load(config_path.read_text())
        environment = saved["environment"]
        space = make_env(environment["name"], environment.get("kwargs")).action_space
        if hasattr(space, "low"):  # a Box (grid worlds' actions are discrete)
            # the box the policy's [-1, 1] output maps to (algorithm.action_bound shrinks it)
            bound = saved.get("algorithm", {}).get("action_bound", 1.0)
            low, high = (box.tolist() for box in shrunk_box(space.low, space.high, bound))
    out = args.json or run_dir / "verify.json"
    _, results = verify_run(run_dir, args.property, args.region, out, low, high,
                            max_seconds=args.max_seconds, seed=args.seed)
    print(format_results(results))
    print(f"report: {out}")


def cmd_sweep(args: argparse.Namespace) -> None:
    import yaml

    from agentic_rl.config import read_config, validate_config

    try:
        from agentic_rl.scale.sweep import SweepSpec, parse_params, run_sweep
    except ModuleNotFoundError as error:
        raise ConfigError(f"sweeps run on Ray Tune ({error.name} is missing): "
                          "pip install 'agentic-rl[ray]'") from None
    from agentic_rl.scale.sweep_report import write_report

    base = read_config(args.config, args.overrides)
    validate_config(base)  # one-line errors before Ray starts
    params = parse_params(args.param)
    if args.space:
        params |= {k: list(v) for k, v in (yaml.safe_load(Path(args.space).read_text())
                                           or {}).items()}
    spec = SweepSpec(str(args.config), base, params, args.seeds, args.search, args.num_samples,
                     args.scheduler, args.max_concurrent)
    folder = Path(args.log_dir) / f"sweep_{Path(args.config).stem}"
    print(f"sweep folder: {folder}")
    failed = run_sweep(spec, folder, args.address, args.resume)
    table, png = write_report(folder, spec.space_keys)
    print(table)
    print(f"table: {folder / 'sweep_summary.md'} (and .csv); curves: {png}")
    for trial in failed:
        print(f"failed trial {trial['trial']}: {trial['error']}", file=sys.stderr)


def cmd_plot(args: argparse.Namespace) -> None:
    from agentic_rl.scale.sweep_report import run_folders
    from agentic_rl.train.plot import plot_runs

    runs = [run for path in args.run_dirs for run in
            ([Path(path)] if (Path(path) / "metrics.csv").exists() else run_folders(path))]
    print(plot_runs(runs or args.run_dirs, args.out))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentic-rl", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_train, _add_sweep, _add_eval_and_demos, _add_verify_and_plot):
        add(sub)
    return parser


def _add_train(sub) -> None:
    train = sub.add_parser("train", help="train from a YAML config")
    train.add_argument("config", help="YAML file, e.g. configs/opd_fetch_reach.yaml")
    train.add_argument("--log-dir", default=RUNS_DIR,
                       help="parent folder; the run goes to LOG_DIR/<config>_seed<N>")
    train.add_argument("--seed", type=int, help="shorthand for training.seed=N")
    train.add_argument("--resume", action="store_true",
                       help="continue from the last checkpoint (from step 0 if the run stopped "
                       "before its first); Ctrl-C writes one")
    train.add_argument("--init-from", metavar="RUN_DIR",
                       help="start from another run: a flat learner's actor, normalisers and "
                       "prototypes, other learners' whole state")
    train.add_argument("--no-progress", action="store_true", help="no live progress bar")
    train.add_argument("--address", help="with training.rollout_workers=N: a running Ray "
                       "cluster (auto or HOST:PORT); default: a local Ray on this machine")
    train.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                       help="dotted overrides, e.g. algorithm.opd_alpha=0.1")
    train.set_defaults(func=cmd_train)


def _add_sweep(sub) -> None:
    sweep = sub.add_parser("sweep", help="settings x seeds of a config as Ray Tune trials")
    sweep.add_argument("config", help="YAML file, e.g. configs/opd_fetch_reach.yaml")
    sweep.add_argument("--param", action="append", default=[], metavar="KEY=[V1,V2,...]",
                       help="a swept key and its values (repeatable)")
    sweep.add_argument("--space", help="YAML file mapping swept keys to lists of values")
    sweep.add_argument("--seeds", type=int, default=1, help="seeds per setting (0..N-1)")
    sweep.add_argument("--search", default="grid", choices=["grid", "random", "optuna"])
    sweep.add_argument("--num-samples", type=int, default=4,
                       help="settings drawn by random and optuna search")
    sweep.add_argument("--scheduler", choices=["asha"],
                       help="stop weak trials early on eval success (ASHA)")
    sweep.add_argument("--max-concurrent", type=int, help="trials at once (default: cores)")
    sweep.add_argument("--address", help="a running Ray cluster (auto or HOST:PORT); default: "
                       "a local Ray on this machine")
    sweep.add_argument("--log-dir", default=RUNS_DIR,
                       help="parent folder; the sweep goes to LOG_DIR/sweep_<config>")
    sweep.add_argument("--resume", action="store_true",
                       help="continue a killed sweep; finished trials are not rerun")
    sweep.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                       help="dotted overrides of the base config")
    sweep.set_defaults(func=cmd_sweep)


def _add_eval_and_demos(sub) -> None:
    from agentic_rl.envs.alfworld import cli as alfworld_cli

    evaluation = sub.add_parser(
        "eval", help="evaluate a run's latest checkpoint (text agents: its best model)")
    evaluation.add_argument("run_dir", metavar="RUN_OR_MODEL_DIR",
                            help="run folder, or a model folder such as models/alfworld")
    evaluation.add_argument("--episodes", type=int,
                            help="episodes (default 100; text agents: one per game, all games)")
    evaluation.add_argument("--data", help="text agents: ALFWorld games to play (slim pack "
                            "file, split folder or data root)")
    evaluation.add_argument("--split", default="valid_seen",
                            help="text agents: split name when --data is a data root")
    evaluation.add_argument("--seed", type=int, default=12345)
    evaluation.add_argument("--json", help="also write the result to this file")
    evaluation.add_argument("--no-shield", action="store_true",
                            help="evaluate without the shield even if the config enables it")
    evaluation.set_defaults(func=cmd_eval)

    demos = sub.add_parser("demos", help="record scripted-expert demonstrations")
    demos.add_argument("--env", required=True, help="environment id, e.g. FetchReach-v4")
    demos.add_argument("--episodes", type=int, default=20)
    demos.add_argument("--out", required=True, help="output .npz file")
    demos.add_argument("--seed", type=int, default=0)
    demos.add_argument("--keep-failures", action="store_true",
                       help="also keep episodes the expert failed")
    demos.set_defaults(func=cmd_demos)
    alfworld_cli.add_demo_arguments(demos)
    alfworld_cli.register(sub)  # alfworld-gen


def _add_verify_and_plot(sub) -> None:
    verify = sub.add_parser("verify", help="prove or falsify safety properties of a policy")
    verify.add_argument("run_dir", help="run folder (its latest checkpoint) or a checkpoint")
    verify.add_argument("--property", required=True, help="property YAML file")
    verify.add_argument("--region", help="YAML region of raw inputs (else the property file's)")
    verify.add_argument("--max-seconds", type=float, default=1.0,
                        help="budget per property (action and state)")
    verify.add_argument("--seed", type=int, default=0, help="counterexample-search seed")
    verify.add_argument("--json", help="report file (default RUN_DIR/verify.json)")
    verify.set_defaults(func=cmd_verify)

    plot = sub.add_parser("plot", help="learning curves of runs (or of every run of a sweep)")
    plot.add_argument("run_dirs", nargs="+")
    plot.add_argument("--out", default="learning_curves.png")
    plot.set_defaults(func=cmd_plot)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # argparse cannot take positionals after flags once subcommands exist: collect KEY=VALUE.
    overrides = [item for item in extra if "=" in item and not item.startswith("-")]
    if args.command not in ("train", "sweep") and overrides or len(overrides) != len(extra):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if overrides:
        args.overrides = list(args.overrides) + overrides
    try:
        args.func(args)
    except user_errors() as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except CheckpointedInterrupt as interrupt:
        print(f"interrupted at step {interrupt.step}, checkpoint written; continue with --resume",
              file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("interrupted; continue with --resume (from the last checkpoint)", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

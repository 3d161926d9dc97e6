"""``agentic-rl sweep``: settings x seeds of one config, each an ordinary training run, as Ray
Tune trials.

The sweep folder ``LOG_DIR/sweep_<config>`` holds ``sweep.json`` (what was asked), Tune's
experiment state and one folder per trial with the usual run folder inside (``run/``; with
Optuna search a trial runs every seed of its setting, ``run_seed<N>/``). Trials report
``success_rate`` and ``env_steps`` to Tune after each evaluation, so ASHA can stop the weak
ones early. ``--resume`` restores the Tune experiment: finished trials are kept, unfinished
ones continue from their run folder's last checkpoint. At the end ``sweep_report`` writes the
table (Markdown, CSV) and the curves (PNG).
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from agentic_rl.config import ConfigError, apply_override, validate_config
from agentic_rl.train.ray_session import ray_session

SWEEP_FILE = "sweep.json"
METRIC = "success_rate"
SEARCHES = ("grid", "random", "optuna")


@dataclass
class SweepSpec:
    """What a sweep runs: the base config (overrides applied), swept values and how."""

    config_path: str
    base: dict[str, Any]
    params: dict[str, list[Any]]
    seeds: int = 1
    search: str = "grid"
    num_samples: int = 1  # settings drawn by random / Optuna search
    scheduler: str | None = None  # "asha" stops weak trials early
    max_concurrent: int | None = None
    sample_seed: int = 0
    workdir: str = field(default_factory=os.getcwd)  # relative paths in the config start here
    folder: str = ""  # the sweep folder (absolute); trials write their run folders into it
    space_keys: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.search not in SEARCHES:
            raise ConfigError(f"--search must be one of {SEARCHES}, got {self.search!r}")
        if self.seeds < 1 or self.num_samples < 1:
            raise ConfigError("--seeds and --num-samples must be at least 1")
        if not self.params:
            raise ConfigError("a sweep needs at least one --param KEY=[v1,v2,...] (or --space)")
        if "csv" not in validate_config(self.base).training.loggers:
            raise ConfigError("a sweep's table reads each run's metrics.csv: keep csv in "
                              "training.loggers")
        for key, values in self.params.items():
            for value in values:  # a wrong key or value fails here, not in every trial
                trial = copy.deepcopy(self.base)
                apply_override(trial, f"{key}={json.dumps(value)}")
                validate_config(trial)
        self.space_keys = sorted(self.params)


def parse_params(items: list[str]) -> dict[str, list[Any]]:
    """``["algorithm.opd_alpha=[0.1,0.5]", ...]`` -> ``{"algorithm.opd_alpha": [0.1, 0.5]}``."""
    params = {}
    for item in items:
        key, _, text = item.partition("=")
        values = yaml.safe_load(text) if text else None
        if not key or not isinstance(values, list) or not values:
            raise ConfigError(f"--param {item!r} must look like section.key=[v1,v2,...]")
        params[key.strip()] = values
    return params


def settings_of(spec: SweepSpec) -> list[dict[str, Any]]:
    """Every combination (grid) or ``num_samples`` seeded draws (random) of the values."""
    keys = spec.space_keys
    if spec.search == "grid":
        return [dict(zip(keys, values))
                for values in itertools.product(*(spec.params[k] for k in keys))]
    rng = np.random.default_rng(spec.sample_seed)
    return [{k: spec.params[k][int(rng.integers(len(spec.params[k])))] for k in keys}
            for _ in range(spec.num_samples)]


def trial_config(base: dict[str, Any], setting: dict[str, Any], seed: int):
    """The validated config of one run."""
    raw = copy.deepcopy(base)
    for key, value in {**setting, "training.seed": seed}.items():
        apply_override(raw, f"{key}={json.dumps(value)}")
    return validate_config(raw)


def run_trial(params: dict[str, Any], spec: dict[str, Any]) -> None:
    """The Tune trainable: one seed of one setting (grid / random), or every seed of the
    setting Optuna chose, each an ordinary run folder in the trial's folder."""
    from ray import tune

    from agentic_rl.data.checkpoint import has_checkpoint
    from agentic_rl.train.run import train

    # The sweep folder itself, not Tune's per-node staging folder: on a cluster it must be a
    # folder every machine shares (the trials' checkpoints are what --resume continues from).
    trial_dir = Path(spec["folder"]) / Path(tune.get_context().get_trial_dir()).name
    if Path(spec["workdir"]).is_dir():  # Tune starts trials in their own folder
        os.chdir(spec["workdir"])
    seeds = [params["seed"]] if "seed" in params else list(range(spec["seeds"]))
    done_steps, finals = 0, []
    for seed in seeds:
        config = trial_config(spec["base"], params["setting"], seed)
        run_dir = trial_dir / ("run" if "seed" in params else f"run_seed{seed}")
        offset = done_steps

        def report(step: int, metrics: dict[str, float], offset: int = offset) -> None:
            tune.report({METRIC: metrics["eval/success_rate"], "env_steps": offset + step})

        if (run_dir / "summary.json").exists():  # finished before the sweep was killed
            summary = json.loads((run_dir / "summary.json").read_text())
        else:
            summary = train(config, run_dir, resume=has_checkpoint(run_dir),
                            show_progress=False, on_evaluation=report)
        done_steps += int(summary["env_steps"])
        finals.append(float(summary.get("success_rate") or summary.get("best_holdout_success")
                            or 0.0))
    # the final result (for Optuna: the setting's mean over seeds, what it optimises)
    tune.report({METRIC: float(np.mean(finals)), "env_steps": done_steps})


def trial_dirname(trial) -> str:
    """``3_opd_alpha=0.5_seed=1``: the trial's index and what it runs."""
    config = trial.config
    parts = [f"{key.split('.')[-1]}={value}" for key, value in config["setting"].items()]
    if "seed" in config:
        parts.append(f"seed={config['seed']}")
    name = "_".join([trial.trial_id.split("_")[-1], *parts])
    return re.sub(r"[^A-Za-z0-9._=-]", "", name)[:120]


def build_tuner(spec: SweepSpec, folder: Path, resume: bool):
    """A new Tune experiment in ``folder``, or the one there restored (``resume``)."""
    from ray import tune

    trainable = tune.with_resources(tune.with_parameters(run_trial, spec=asdict(spec)),
                                    {"cpu": 1})
    if resume:
        return tune.Tuner.restore(str(folder), trainable, resume_unfinished=True,
                                  resume_errored=True)
    seeds = list(range(spec.seeds))
    if spec.search == "optuna":
        from ray.tune.search.optuna import OptunaSearch

        space = {"setting": {k: tune.choice(spec.params[k]) for k in spec.space_keys}}
        search_alg = OptunaSearch(metric=METRIC, mode="max", seed=spec.sample_seed)
        num_samples = spec.num_samples
    else:
        space = {"setting": tune.grid_search(settings_of(spec)), "seed": tune.grid_search(seeds)}
        search_alg, num_samples = None, 1
    scheduler = None
    if spec.scheduler == "asha":
        from ray.tune.schedulers import ASHAScheduler

        training = validate_config(spec.base).training
        budget = training.total_timesteps * (spec.seeds if spec.search == "optuna" else 1)
        # max_t past the budget: ASHA stops a trial that reaches max_t, which would cut a run
        # at its last evaluation, before its summary is written
        scheduler = ASHAScheduler(time_attr="env_steps", max_t=budget + training.eval_freq,
                                  grace_period=training.eval_freq, reduction_factor=2)
    return tune.Tuner(
        trainable, param_space=space,
        tune_config=tune.TuneConfig(metric=METRIC, mode="max", search_alg=search_alg,
                                    scheduler=scheduler, num_samples=num_samples,
                                    max_concurrent_trials=spec.max_concurrent,
                                    trial_dirname_creator=trial_dirname),
        run_config=tune.RunConfig(name=folder.name, storage_path=str(folder.parent.resolve()),
                                  verbose=1))


def prepare_folder(spec: SweepSpec, folder: Path, resume: bool) -> SweepSpec:
    """Write ``sweep.json`` for a new sweep; on ``--resume`` check it asks for the same."""
    saved = folder / SWEEP_FILE
    if resume:
        if not saved.exists():
            raise ConfigError(f"--resume: {folder} holds no sweep ({SWEEP_FILE} is missing)")
        previous = SweepSpec(**{k: v for k, v in json.loads(saved.read_text()).items()
                                if k not in ("space_keys", "workdir", "folder")})
        if (previous.params, previous.seeds, previous.base) != (spec.params, spec.seeds,
                                                                spec.base):
            raise ConfigError(f"--resume: {saved} was started with other settings; resume "
                              "with the same config, --param, --seeds and overrides")
        previous.folder = str(folder.resolve())
        return previous
    if saved.exists():
        raise ConfigError(f"{folder} already holds a sweep; pass --resume to continue it, "
                          "or choose another --log-dir")
    folder.mkdir(parents=True, exist_ok=True)
    spec.folder = str(folder.resolve())
    saved.write_text(json.dumps(asdict(spec), indent=2))
    return spec


def run_sweep(spec: SweepSpec, folder: Path, address: str | None = None,
              resume: bool = False) -> list[dict[str, str]]:
    """Run (or resume) the sweep on Ray: a local Ray sized to this machine's cores, or the
    cluster at ``address``; returns the trials that failed (``trial``, ``error``)."""
    spec = prepare_folder(spec, folder, resume)
    with ray_session(address):
        results = build_tuner(spec, folder, resume).fit()
    return [{"trial": Path(r.path).name, "error": str(r.error).strip().splitlines()[-1]}
            for r in results if r.error is not None]

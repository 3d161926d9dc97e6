"""Experiment configuration: YAML -> dotted CLI overrides -> validated, frozen pydantic models.

One file per experiment with the sections ``algorithm`` (the learner: its update, networks and
prototypes), ``environment``, ``training`` and ``verification`` (SPEC C1). Every model forbids
unknown keys, and ``load_config`` turns pydantic's errors into one line that names the key path
and, for a misspelt key, the closest valid one; a key of another algorithm's section names the
algorithms that read it. Configs written before the networks moved into ``algorithm`` kept them
in an ``agent`` section; it is still read, merged into ``algorithm``.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import (BaseModel, ConfigDict, Field, ValidationError, field_validator,
                      model_validator)

from agentic_rl.algos import CONFIGS
from agentic_rl.algos.sac_config import SACConfig


class Section(BaseModel):
    """Base for every config section: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class CurriculumStage(Section):
    """A stage: attributes set on the unwrapped env (e.g. ``target_range``) while it lasts."""

    name: str
    env_attrs: dict[str, float | int | bool] = Field(default_factory=dict)


class CurriculumConfig(Section):
    stages: list[CurriculumStage] = Field(min_length=1)
    success_threshold: float = Field(0.9, ge=0, le=1)


class GoalRegionConfig(Section):
    """Goals are redrawn at reset until inside ``[low, high]`` and outside ``exclude`` boxes."""

    low: list[float] | None = None
    high: list[float] | None = None
    exclude: list[tuple[list[float], list[float]]] = Field(default_factory=list)


class EnvironmentConfig(Section):
    """Which env to build and how observations are normalised."""

    name: str = "FetchReach-v4"
    kwargs: dict[str, Any] = Field(default_factory=dict)
    num_envs: int = Field(1, ge=1)
    normalize_obs: bool = True
    normalize_goal: bool = True
    clip_obs: float = Field(5.0, gt=0)
    curriculum: CurriculumConfig | None = None
    goal_region: GoalRegionConfig | None = None


class TrainingConfig(Section):
    """Loop length, evaluation, checkpoints, devices and threads."""

    total_timesteps: int = Field(10_000, ge=1)
    learning_starts: int = Field(100, ge=0)
    eval_freq: int = Field(1_000, ge=1)
    num_eval_episodes: int = Field(20, ge=1)
    stop_success_rate: float | None = Field(None, ge=0, le=1)
    checkpoint_freq: int = Field(5_000, ge=1)
    buffer_size: int = Field(1_000_000, ge=1)
    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "cpu"
    torch_threads: int = Field(1, ge=1)
    overlap_env: bool = False
    rollout_workers: int = Field(0, ge=0, description="Ray actors that collect (0: in-process)")
    weight_sync_every: int = Field(
        1_000, ge=1, description="off-policy with rollout workers: env steps (all workers "
        "together) per chunk, each chunk collected with the weights sent with it")
    log_freq: int = Field(500, ge=1)
    loggers: list[Literal["tensorboard", "csv", "wandb"]] = Field(
        default_factory=lambda: ["tensorboard", "csv"], min_length=1,
        description="where scalars go; plots, resume and sweeps read the csv")
    wandb_project: str = "agentic-rl"
    wandb_mode: Literal["offline", "online"] = Field(
        "offline", description="online uploads (wandb login first); offline keeps it on disk")

    @model_validator(mode="after")
    def _wandb_keys_need_wandb(self) -> "TrainingConfig":
        if "wandb" not in self.loggers and (self.wandb_project != "agentic-rl"
                                            or self.wandb_mode != "offline"):
            raise ValueError("training.wandb_project and training.wandb_mode are read only "
                             "with wandb in training.loggers, e.g. loggers=[tensorboard,csv,wandb]")
        if self.rollout_workers and self.overlap_env:
            raise ValueError("training.overlap_env steps in-process envs in a worker process; "
                             "with training.rollout_workers the workers step them: drop one")
        if not self.rollout_workers and self.weight_sync_every != 1_000:
            raise ValueError("training.weight_sync_every is read only with "
                             "training.rollout_workers > 0")
        if len(set(self.loggers)) != len(self.loggers):
            raise ValueError(f"training.loggers lists one twice: {self.loggers}")
        return self

    @field_validator("total_timesteps", "learning_starts", "eval_freq", "checkpoint_freq",
                     "buffer_size", "log_freq", "weight_sync_every", mode="before")
    @classmethod
    def _float_counts(cls, value: Any) -> Any:
        """Accept ``1e6`` in YAML for counts (YAML reads it as a float or a string)."""
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value


class VerificationConfig(Section):
    """Run-time safety (SPEC V2, V3): a property file, monitored on every step and optionally
    enforced by a shield in training and/or evaluation."""

    property_file: str | None = None
    shield_train: bool = False
    shield_eval: bool = False
    shield_margin: float = Field(0.0, ge=0)
    reset_on_violation: bool = Field(
        False, description="training envs only: an episode ends (truncated, so learners still "
        "bootstrap from the state reached) at its first step that breaks a property")


ALGORITHM_CONFIGS: dict[str, type[BaseModel]] = dict(CONFIGS)
AlgorithmConfig = Annotated[Union[tuple(ALGORITHM_CONFIGS.values())],  # noqa: UP007
                            Field(discriminator="name")]


class ExperimentConfig(Section):
    """The whole experiment."""

    algorithm: AlgorithmConfig
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    verification: VerificationConfig = Field(default_factory=VerificationConfig)

    @model_validator(mode="after")
    def _workers_without_train_shield(self) -> "ExperimentConfig":
        if self.training.rollout_workers and self.verification.shield_train:
            raise ValueError("verification.shield_train needs the envs in the learner's process; "
                             "it cannot run with training.rollout_workers (shield_eval can)")
        return self

    @model_validator(mode="after")
    def _reset_on_violation_needs_properties(self) -> "ExperimentConfig":
        if self.verification.reset_on_violation and self.verification.property_file is None:
            raise ValueError("verification.reset_on_violation needs verification.property_file "
                             "(its properties say which steps are violations)")
        return self

    @model_validator(mode="before")
    @classmethod
    def _legacy_agent_section(cls, raw: Any) -> Any:
        """Configs and run folders written before the networks and prototypes moved into
        ``algorithm`` kept them in an ``agent`` section: merge it into ``algorithm``."""
        if not isinstance(raw, dict) or not isinstance(raw.get("agent"), dict):
            return raw
        raw = dict(raw)
        agent, algorithm = raw.pop("agent"), dict(raw.get("algorithm") or {})
        fields = ALGORITHM_CONFIGS.get(str(algorithm.get("name", "sac")), SACConfig).model_fields
        for key, value in agent.items():
            if LEGACY_AGENT_DEFAULTS.get(key, object()) == value and (
                    key not in fields or key in algorithm):
                continue  # a resolved default this learner has no use for
            if key in algorithm and algorithm[key] != value:
                raise ValueError(f"agent.{key} and algorithm.{key} both set: the agent section "
                                 f"of older configs is now part of algorithm; keep algorithm.{key}")
            algorithm[key] = value  # a key the learner lacks fails as one of the algorithm's
        raw["algorithm"] = algorithm
        return raw

    @model_validator(mode="before")
    @classmethod
    def _text_evaluation_default(cls, raw: Any) -> Any:
        """A text agent evaluates on its held-out games, each once: ``num_eval_episodes``
        defaults to ``algorithm.holdout_games`` (more episodes cycle through them again)."""
        algorithm = raw.get("algorithm") if isinstance(raw, dict) else None
        if not isinstance(algorithm, dict) or algorithm.get("name") != "text_opd":
            return raw
        training = dict(raw.get("training") or {})
        holdout = ALGORITHM_CONFIGS["text_opd"].model_fields["holdout_games"].default
        training.setdefault("num_eval_episodes", algorithm.get("holdout_games", holdout))
        return {**raw, "training": training}


# What older resolved configs wrote in their ``agent`` section when a key was left at its default.
LEGACY_AGENT_DEFAULTS: dict[str, Any] = {
    "hidden_sizes": [256, 256], "activation": "relu", "actor_lr": 0.001, "critic_lr": 0.001,
    "alpha_lr": 0.001, "init_alpha": 0.1, "target_entropy": "auto", "fused_update": True,
    "prototype_data_path": None, "prototype_episodes": 20, "prototype_capacity": 100_000,
    "prototype_sampling": "uniform", "prototypes_in_replay": True, "self_prototypes": True,
    "self_prototype_capacity": 20_000, "skills": [], "skill_selection": "learned"}


class ConfigError(ValueError):
    """A config the user wrote is wrong; the message says where and how to fix it."""


def load_config(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read YAML, apply ``a.b.c=value`` overrides, validate.

    Raises:
        ConfigError: file missing, not YAML, bad override syntax, unknown key or wrong type.
    """
    return validate_config(read_config(path, overrides))


def read_config(path: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """The YAML file as a plain dict with ``a.b.c=value`` overrides applied, not validated
    (``ConfigError`` for a missing file, bad YAML or a bad override)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist; pass the path to a YAML file "
                          "such as configs/opd_fetch_reach.yaml")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not valid YAML: {error}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} must hold a mapping with sections algorithm, "
                          "environment, training (and verification)")
    for override in overrides or []:
        apply_override(raw, override)
    return raw


def validate_config(raw: dict[str, Any]) -> ExperimentConfig:
    """Validate a plain dict, converting pydantic errors into a ``ConfigError``; a key the
    chosen algorithm does not read, set away from its default, is an error too."""
    try:
        config = ExperimentConfig.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(describe_validation_error(error, raw)) from None
    check_keys_read(config)
    return config


def check_keys_read(config: ExperimentConfig) -> None:
    """Raise ``ConfigError`` for a key ``algorithm.name`` ignores (its config's
    ``unread_keys``) whose value differs from the default, naming the algorithms that read it."""
    name = config.algorithm.name
    for dotted in type(config.algorithm).unread_keys:
        section_name, key = dotted.split(".")
        section = getattr(config, section_name)
        default = type(section).model_fields[key].get_default(call_default_factory=True)
        if getattr(section, key) != default:
            readers = [n for n, cls in ALGORITHM_CONFIGS.items() if dotted not in cls.unread_keys]
            raise ConfigError(f"config key '{dotted}' is not read by {name}; remove it (it is "
                              f"read by {', '.join(readers) or 'no algorithm'})")


def apply_override(raw: dict[str, Any], override: str) -> None:
    """Set ``raw[a][b][c] = yaml(value)`` for an override ``a.b.c=value`` (in place)."""
    if "=" not in override:
        raise ConfigError(f"override {override!r} must look like section.key=value, "
                          "e.g. algorithm.opd_alpha=0.1")
    dotted, value_text = override.split("=", 1)
    keys = dotted.strip().split(".")
    node = raw
    for key in keys[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override {override!r}: {key} is a value, not a section")
        node = child
    node[keys[-1]] = yaml.safe_load(value_text) if value_text.strip() else None


def describe_validation_error(error: ValidationError, raw: dict[str, Any]) -> str:
    """One line per problem: key path, what is wrong, and the closest valid key if misspelt."""
    lines = []
    for item in error.errors():
        location = [str(part) for part in item["loc"]]
        # Pydantic inserts the discriminator tag (e.g. 'opd') into paths of union members.
        algorithm_name = str(raw.get("algorithm", {}).get("name", "")) if isinstance(
            raw.get("algorithm"), dict) else ""
        if len(location) > 1 and location[0] == "algorithm" and location[1] == algorithm_name:
            del location[1]
        path = ".".join(location)
        if not location:  # a whole-config check (e.g. an older agent section)
            lines.append(str(item["msg"]).removeprefix("Value error, "))
        elif item["type"] == "extra_forbidden" and location[0] == "algorithm" and (
                readers := readers_of(location[1:])):
            lines.append(f"config key '{path}' is not read by {algorithm_name}; remove it (it "
                         f"is read by {', '.join(readers)})")
        elif item["type"] == "extra_forbidden":
            valid = valid_keys(location[:-1], raw)
            close = difflib.get_close_matches(location[-1], valid, n=1, cutoff=0.5)
            hint = f"; did you mean '{'.'.join(location[:-1] + close)}'?" if close else ""
            lines.append(f"unknown config key '{path}'{hint} (valid keys here: "
                         f"{', '.join(sorted(valid))})")
        elif item["type"] == "union_tag_invalid":
            lines.append(f"'{path}.name': unknown algorithm {item['ctx']['tag']!r}; choose one of "
                         f"{item['ctx']['expected_tags']}")
        else:
            lines.append(f"config key '{path}': {item['msg']} (got {item.get('input')!r})")
    return "; ".join(lines)


def readers_of(location: list[str]) -> list[str]:
    """The algorithms whose section has the key path ``location`` (below ``algorithm``)."""
    if len(location) != 1:
        return []
    return [name for name, model in ALGORITHM_CONFIGS.items() if location[0] in model.model_fields]


def valid_keys(location: list[str], raw: dict[str, Any]) -> list[str]:
    """Field names of the model at ``location`` (section names for the root)."""
    model: type[BaseModel] = ExperimentConfig
    for part in location:
        if part == "algorithm":
            name = raw.get("algorithm", {}).get("name", "sac")
            model = ALGORITHM_CONFIGS.get(name, SACConfig)
            continue
        field = model.model_fields.get(part)
        annotation = getattr(field, "annotation", None)
        inner = [a for a in getattr(annotation, "__args__", (annotation,))
                 if isinstance(a, type) and issubclass(a, BaseModel)]
        if not inner:
            return []
        model = inner[0]
    return list(model.model_fields)


def dump_config(config: ExperimentConfig, path: str | Path) -> None:
    """Write the resolved config (every default filled in) as YAML."""
    Path(path).write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))

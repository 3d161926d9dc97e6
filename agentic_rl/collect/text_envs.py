"""Vector envs of text agents for the shared loop: ``games_per_iteration x group_size``
ALFWorld envs behind :class:`~agentic_rl.collect.text_inputs.TextInputs`, a held-out evaluation
env, and the text table they share with the learner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from agentic_rl.collect.collector import EVAL_SEED_OFFSET
from agentic_rl.collect.game_schedule import GroupSchedule, SeedSchedule
from agentic_rl.collect.text_inputs import ROW_IDS, TextInputs
from agentic_rl.data.text_table import TextTable
from agentic_rl.envs.make import LeanSyncVectorEnv


class TextVectorEnv(LeanSyncVectorEnv):
    """The training envs; their schedule's state is saved with the run (``env_state``).
    ``table`` is the text table their observations index; ``table_keys``
    the observation parts that hold its row ids (a rollout worker's rows are renumbered into
    the learner's table)."""

    table_keys = ROW_IDS + ("commands",)

    def __init__(self, env_fns, schedule: GroupSchedule, table: TextTable, planner=None) -> None:
        from gymnasium.vector import AutoresetMode

        super().__init__(env_fns, autoreset_mode=AutoresetMode.DISABLED)
        self.schedule, self.table, self.planner = schedule, table, planner

    def env_state(self) -> dict[str, Any]:
        return {"episodes": self.schedule.state()}

    def load_env_state(self, state: dict[str, Any]) -> None:
        self.schedule.load_state(state["episodes"])


def demo_games(paths: str | list[str] | None) -> set[str]:
    """Games (:func:`~agentic_rl.envs.alfworld.data.game_key`) of the successful episodes in
    ALFWorld demonstration files."""
    from agentic_rl.envs.alfworld.data import game_key

    games: set[str] = set()
    for path in [paths] if isinstance(paths, str) else (paths or []):
        if not Path(path).is_file():
            raise FileNotFoundError(
                f"algorithm.prototype_data_path: {path} does not exist; record ALFWorld "
                "demonstrations first (benchmarks/alfworld_demos.py, or `agentic-rl demos "
                "--env agentic_rl/ALFWorld-v0`)")
        with np.load(path) as archive:
            success = archive["episode_success"].astype(bool)
            games |= {game_key(g) for g in archive["gamefile"][success]}
    return games


def split_games(env_kwargs: dict[str, Any], holdout: int, seed: int,
                demonstrated: set[str]) -> tuple[list[str], list[int], list[int]]:
    """All games of the configured split, the indices to train on, and the held-out indices
    (a seeded choice among games without demonstrations; ``demonstrated``: their
    :func:`~agentic_rl.envs.alfworld.data.game_key`)."""
    from agentic_rl.envs.alfworld.data import game_key, list_games

    games = [str(g) for g in list_games(env_kwargs.get("split", "train"),
                                        env_kwargs.get("data_path"), env_kwargs.get("task_types"))]
    rng = np.random.default_rng(seed)
    free = [i for i, g in enumerate(games) if game_key(g) not in demonstrated]
    count = min(holdout, len(free))
    held = sorted(int(i) for i in rng.choice(free, count, replace=False)) if count else []
    if not held:
        raise ValueError("text_opd keeps held-out train games for evaluation, but every game "
                         "of the split has a demonstration; add games or demonstrate fewer")
    keep = set(held)
    return games, [i for i in range(len(games)) if i not in keep], held


def text_env(env_kwargs: dict[str, Any], games: list[str], table: TextTable, schedule,
             algo: Any, slot: int = 0, expert: bool = False, planner=None) -> TextInputs:
    """One ALFWorld env over ``games`` with integer inputs. ``expert``: the env can label states
    with the handcoded expert's command (DAgger; Fast Downward plans are not needed)."""
    from agentic_rl.envs.alfworld import make_alfworld_env

    kwargs = {k: v for k, v in env_kwargs.items() if k not in ("expert", "split", "data_path",
                                                               "task_types")}
    needs_expert = bool(planner is not None and planner.needs_expert)
    if expert and not needs_expert:
        kwargs["use_planner"] = False
    env = make_alfworld_env(**kwargs, games=games, encode=False, expert=expert or needs_expert)
    period = algo.manager.period if algo.manager else 5
    return TextInputs(env, table, schedule, slot, algo.max_commands, planner, period)


def build_text_envs(algo: Any, env_kwargs: dict[str, Any], seed: int,
                    part: tuple[int, int] | None = None) -> tuple[TextVectorEnv, TextInputs]:
    """``(training envs, held-out evaluation env)`` sharing one lazy text table and one planner
    (the training envs' ``planner``: a learned Manager's network is the learner's); with
    ``part=(index, count)`` the training envs are the ``index``-th of ``count`` near-equal
    contiguous shares of the schedule's slots (a rollout worker's)."""
    from agentic_rl.envs.alfworld.text_encoder import shared_encoder
    from agentic_rl.plan import build_planner

    games, train_ids, held = split_games(env_kwargs, algo.holdout_games, seed,
                                         demo_games(algo.prototype_data_path))
    table = TextTable(shared_encoder(), lazy=True)
    planner = build_planner(algo.manager, table)
    explorer = planner  # the training envs sample a learned Manager's subgoals (its RL)
    if getattr(algo.manager, "planner", None) == "learned" and algo.manager.rl != "none":
        explorer = planner.sampling(seed)
    schedule = GroupSchedule(train_ids, algo.games_per_iteration, algo.group_size,
                             algo.dagger_rounds, seed)
    labelled = algo.dagger_rounds > 0
    slots = list(range(schedule.width))
    if part is not None:  # train.remote_steps refuses more workers than slots
        slots = [int(s) for s in np.array_split(np.arange(schedule.width), part[1])[part[0]]]
    envs = TextVectorEnv([_thunk(env_kwargs, games, table, schedule, algo, slot, labelled,
                                 explorer) for slot in slots], schedule, table, explorer)
    eval_env = text_env(env_kwargs, games, table, SeedSchedule(held, seed + EVAL_SEED_OFFSET),
                        algo, planner=planner)
    return envs, eval_env


def _thunk(*args: Any):
    return lambda: text_env(*args)

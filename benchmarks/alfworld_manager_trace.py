"""Where a learned text Manager's agent loses: on train games without demonstrations (never
valid_seen), each step's subgoal from the learned Manager against the subgoal ALFWorld's
handcoded expert pursues in the same state, per task type, and each lost episode's subgoal
sequence. A lost episode whose Manager always chose the expert's subgoal is the Worker's loss.

    python benchmarks/alfworld_manager_trace.py models/alfworld --games 30 \\
        --types look_at_obj_in_light pick_two_obj_and_place --show-lost

RUN is a run folder (its ``best/``, else its latest checkpoint) or a model folder; the games
are the last ``--games`` of each type in the config's train data that no demonstration used.
Greedy, as evaluation; the expert only labels, it never acts or plans for the agent. RL
training may have played these games (they are in its schedule unless the run held them out):
the trace is a development signal chosen away from valid_seen, not a held-out score.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import markdown_table, write_json  # noqa: E402

from agentic_rl.algos.text_opd import TextOPD  # noqa: E402
from agentic_rl.collect.game_schedule import SeedSchedule  # noqa: E402
from agentic_rl.collect.text_envs import demo_games, text_env  # noqa: E402
from agentic_rl.config import read_config, validate_config  # noqa: E402
from agentic_rl.data.checkpoint import load_learner  # noqa: E402
from agentic_rl.data.text_table import TextTable  # noqa: E402
from agentic_rl.envs.alfworld.data import TASK_TYPES, game_key, list_games  # noqa: E402
from agentic_rl.envs.alfworld.expert import expert_subgoal  # noqa: E402
from agentic_rl.envs.alfworld.text_encoder import shared_encoder  # noqa: E402
from agentic_rl.plan import build_planner  # noqa: E402
from agentic_rl.plan.text_subgoals import subgoal_text  # noqa: E402
from agentic_rl.train.evaluate import batch_of_one  # noqa: E402
from agentic_rl.train.text_eval import text_model_folder  # noqa: E402


def undemonstrated_games(config, types: list[str], count: int) -> list[str]:
    """The last ``count`` train games of each type that no demonstration file used."""
    kwargs = dict(config.environment.kwargs)
    used = demo_games(config.algorithm.prototype_data_path)
    games = []
    for task_type in types:
        free = [str(g) for g in list_games("train", kwargs.get("data_path"), [task_type])
                if game_key(g) not in used]
        games += free[-count:]
    return games


def play(env, learner, seed: int) -> tuple[bool, str, list[tuple[str, str]]]:
    """One greedy episode: ``(won, task type, [(Manager's subgoal, expert's subgoal)] per step)``
    (the expert's is "" where it pursues none)."""
    obs, info = env.reset(seed=seed)
    engine = env.env.unwrapped.engine
    state, done, steps = None, False, []
    while not done:
        batch = {**batch_of_one(obs, info), "is_first": torch.tensor([not steps])}
        pursued = expert_subgoal(engine)
        steps.append((env.subgoal, subgoal_text(*pursued) if pursued else ""))
        action, state, _ = learner.act(batch, state, "deterministic")
        obs, _, terminated, truncated, info = env.step(int(action[0]))
        done = terminated or truncated
    return info["is_success"], info["task_type"], steps


def sequence(steps: list[tuple[str, str]]) -> str:
    """``take apple[=] > put apple in desk[put apple in shelf]``: each change of either
    subgoal, the expert's in brackets ("=" where it is the Manager's, "-" where it has none)."""
    changes = [pair for i, pair in enumerate(steps) if i == 0 or pair != steps[i - 1]]
    return " > ".join(f"{mine}[{'=' if mine == theirs else theirs or '-'}]"
                      for mine, theirs in changes)


def trace(run: Path, types: list[str], count: int, show_lost: bool) -> dict[str, dict]:
    """Per task type: games, wins, steps whose Manager subgoal is the expert's, lost games
    with at least one step that is not."""
    config = validate_config(read_config(run / "config.yaml"))
    manager = config.algorithm.manager
    if manager is None or manager.planner != "learned":
        raise SystemExit(f"{run}: the config has no learned Manager (algorithm.manager."
                         "planner: learned)")
    games = undemonstrated_games(config, types, count)
    table = TextTable(shared_encoder(), lazy=True)
    planner = build_planner(manager, table)
    env = text_env(dict(config.environment.kwargs), games, table,
                   SeedSchedule(list(range(len(games))), config.training.seed), config.algorithm,
                   expert=True, planner=planner)
    env.expert_always = True  # the handcoded expert follows every state (it labels, never acts)
    learner = TextOPD.from_config(config, env)
    load_learner(learner, text_model_folder(run))
    stats: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for index in range(len(games)):
        won, task_type, steps = play(env, learner, index)
        agree = [mine == theirs for mine, theirs in steps if theirs]
        row = stats[task_type]
        row.update(games=1, won=int(won), labelled_steps=len(agree), same=sum(agree),
                   lost_disagreeing=int(not won and not all(agree)))
        if show_lost and not won:
            print(f"lost {task_type} ({Path(games[index]).parent.name}): {sequence(steps)}")
    return {t: dict(stats[t]) for t in types if t in stats}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a text_opd run folder or model folder")
    parser.add_argument("--types", nargs="+", default=list(TASK_TYPES), choices=TASK_TYPES)
    parser.add_argument("--games", type=int, default=30, help="games per task type")
    parser.add_argument("--show-lost", action="store_true", help="print lost episodes")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    result = trace(args.run, args.types, args.games, args.show_lost)
    rows = [[t, f"{r['won']}/{r['games']}", f"{r['same'] / max(r['labelled_steps'], 1):.3f}",
             f"{r['lost_disagreeing']}/{r['games'] - r['won']}"] for t, r in result.items()]
    print(markdown_table(["task type", "won", "steps with the expert's subgoal",
                          "lost with a different subgoal"], rows))
    payload = {"run": str(args.run), "games_per_type": args.games, "types": result}
    write_json(str(args.json) if args.json else None, payload)
    return payload


if __name__ == "__main__":
    main()

"""Playable ALFWorld games for the logic the installed wheel ships (0.4.2).

Every trial is (re)built into a ``game.tw-pddl`` that uses the wheel's domain and grammar, so
all games play with the 0.4.2 command set ("move X to Y"): trials with only an
``initial_state.pddl`` get a game built, games built against the older 2.1.1 logic ("put X
in/on Y", official ``json_2.1.1`` downloads) are converted. ``data`` finds the trials.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from agentic_rl.envs.alfworld.install import ensure_alfworld_data_env, exclusive

GAME_FILE = "game.tw-pddl"
_TASK_RULE = re.compile(r'Your task is to: (.*?)\."')


def shipped_logic() -> tuple[str, str]:
    """Return the text of the ``alfred.pddl`` domain and ``alfred.twl2`` grammar of the wheel."""
    ensure_alfworld_data_env()
    import alfworld.info

    domain = Path(alfworld.info.ALFRED_PDDL_PATH).read_text()
    grammar = Path(alfworld.info.ALFRED_TWL2_PATH).read_text()
    return domain, grammar


def goal_from_grammar(grammar: str) -> str | None:
    """Extract the task text from a game grammar ("Your task is to: <goal>.").

    Args:
        grammar: text of a game's ``grammar`` entry (any ALFWorld version).

    Returns:
        The goal text, or None if the grammar still holds the ``UNKNOWN GOAL`` placeholder or no
        task rule.
    """
    match = _TASK_RULE.search(grammar)
    if match is None or match.group(1) == "UNKNOWN GOAL":
        return None
    return json.loads('"' + match.group(1) + '"')


def build_game(problem: str, goal: str) -> dict:
    """Build a playable game (``game.tw-pddl`` content) with the shipped domain and grammar.

    Args:
        problem: text of the PDDL problem (``initial_state.pddl``).
        goal: task text shown to the agent, e.g. ``"put two newspaper in drawer"``.

    Returns:
        Dict with ``pddl_domain``, ``grammar``, ``pddl_problem`` and ``solvable``.
    """
    domain, grammar = shipped_logic()
    escaped_goal = json.dumps(goal)[1:-1]
    return {
        "pddl_domain": domain,
        "grammar": grammar.replace("UNKNOWN GOAL", escaped_goal),
        "pddl_problem": problem,
        "solvable": True,
    }


def convert_game(old_game: dict, traj_data: dict | None = None) -> dict:
    """Convert a game built against older logic (json_2.1.1 downloads) to the shipped 0.4.2 logic.

    The PDDL problem and the task text are kept; the domain and grammar are replaced by those of
    the installed wheel, so the game plays with the 0.4.2 commands ("move X to Y").

    Args:
        old_game: content of an old ``game.tw-pddl``.
        traj_data: the trial's ``traj_data.json``, used for the goal if the grammar has none.

    Returns:
        The converted game dict.
    """
    goal = goal_from_grammar(old_game.get("grammar", "")) or trial_goal(traj_data or {})
    game = build_game(old_game["pddl_problem"], goal)
    game["solvable"] = bool(old_game.get("solvable", True))
    return game


def trial_goal(traj_data: dict) -> str:
    """Task text of a trial: ``goal`` if present, else ALFWorld's first template for its type."""
    if traj_data.get("goal"):
        return str(traj_data["goal"])
    ensure_alfworld_data_env()
    import alfworld.gen.goal_library as goal_library

    params = traj_data["pddl_params"]
    key = traj_data["task_type"] + ("_slice" if params.get("object_sliced") else "")
    template = goal_library.gdict[key]["templates"][0]
    return template.format(
        obj=params["object_target"].lower(),
        recep=params["parent_target"].lower(),
        toggle=params["toggle_target"].lower(),
        mrecep=params["mrecep_target"].lower(),
    )


def _logic_fingerprint() -> str:
    domain, grammar = shipped_logic()
    return hashlib.sha1((domain + grammar).encode()).hexdigest()[:12]


def prepare_trials(folder: Path, out_root: Path | None = None) -> list[Path]:
    """Build, for every trial folder under ``folder``, a game for the shipped logic.

    Games go to ``out_root`` (a mirror of ``folder``; default ``folder`` itself), next to a copy of
    the trial's ``traj_data.json`` (ALFWorld's expert reads it). Trials with only an
    ``initial_state.pddl`` get a game built; games built against other logic (json_2.1.1
    downloads) are converted. Trials ALFWorld itself skips (``movable``, ``Sliced``) and games
    marked unsolvable are left out.

    Args:
        folder: a split folder (or any folder holding trial folders).
        out_root: where the built games go (mirrors ``folder``'s tree).

    Returns:
        Sorted paths of the playable ``game.tw-pddl`` files.
    """
    out_root = out_root or folder
    with exclusive(out_root / ".prepare.lock"):
        return _prepare_trials(folder, out_root)


def _prepare_trials(folder: Path, out_root: Path) -> list[Path]:
    fingerprint = _logic_fingerprint()
    games = []
    for traj_path in sorted(folder.rglob("traj_data.json")):
        trial = traj_path.parent
        if "movable" in str(trial) or "Sliced" in str(trial):
            continue
        target = out_root / trial.relative_to(folder)
        game_path = target / GAME_FILE
        stamp = target / ".logic"  # "<logic fingerprint> <solvable 0|1>" of the built game
        state = stamp.read_text().split() if stamp.exists() else []
        if not (game_path.exists() and len(state) == 2 and state[0] == fingerprint):
            target.mkdir(parents=True, exist_ok=True)
            traj_data = json.loads(traj_path.read_text())
            source_game = trial / GAME_FILE
            if source_game.exists() and not (trial / ".logic").exists():
                game = convert_game(json.loads(source_game.read_text()), traj_data)
            else:
                problem = (trial / "initial_state.pddl").read_text()
                game = build_game(problem, trial_goal(traj_data))
            if target != trial:
                (target / "traj_data.json").write_text(traj_path.read_text())
            game_path.write_text(json.dumps(game))
            state = [fingerprint, str(int(bool(game.get("solvable", False))))]
            stamp.write_text(" ".join(state))
        if state[1] == "1":
            games.append(game_path)
    return games

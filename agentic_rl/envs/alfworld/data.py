"""ALFWorld game data: locating it, rebuilding playable games, 2.1.1 -> 0.4.2 conversion.

Layouts understood:

* the standard layout written by ``alfworld-download``:
  ``$ALFWORLD_DATA/json_2.1.1/<split>/<task>/<trial>/`` with ``traj_data.json``,
  ``initial_state.pddl`` and (in official downloads) a ``game.tw-pddl`` built against the
  older 2.1.1 logic ("put X in/on Y");
* the slim packs (``train_slim.tar.xz``, ``valid_seen_slim.tar.xz``): the same tree holding only
  ``traj_data.json`` and ``initial_state.pddl``; unpacked into a cache folder on first use;
* any folder that holds trial folders (e.g. games written by ``agentic-rl alfworld-gen``).

Every trial is (re)built into a ``game.tw-pddl`` that uses the domain and grammar shipped with
the installed alfworld wheel, so all games play with the 0.4.2 command set ("move X to Y").
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import tarfile
from pathlib import Path

TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
SPLITS: tuple[str, ...] = ("train", "valid_seen", "valid_unseen")
SLIM_PACKS: dict[str, str] = {"train": "train_slim.tar.xz", "valid_seen": "valid_seen_slim.tar.xz"}
GAME_FILE = "game.tw-pddl"
_TASK_RULE = re.compile(r'Your task is to: (.*?)\."')


class ALFWorldDataError(FileNotFoundError):
    """Raised when no ALFWorld game data can be found; the message says where data goes."""


def default_cache_dir() -> Path:
    """Folder for unpacked slim packs and rebuilt games (``$AGENTIC_RL_CACHE`` or ~/.cache)."""
    root = os.environ.get("AGENTIC_RL_CACHE", os.path.expanduser("~/.cache/agentic-rl"))
    return Path(root) / "alfworld"


def ensure_alfworld_data_env() -> str:
    """Point ``$ALFWORLD_DATA`` at a writable folder before alfworld is imported.

    alfworld creates ``$ALFWORLD_DATA`` on import (default ``~/.cache/alfworld``).

    Returns:
        The folder ``$ALFWORLD_DATA`` names.

    Raises:
        ModuleNotFoundError: alfworld is not installed (with the command that installs it).
    """
    import importlib.util

    if importlib.util.find_spec("alfworld") is None:
        raise ModuleNotFoundError(
            "ALFWorld needs the optional dependencies: pip install 'agentic-rl[alfworld]' "
            "(alfworld==0.4.2, about 3 minutes, compiles Fast Downward with g++/cmake)",
            name="alfworld")
    if "ALFWORLD_DATA" not in os.environ:
        os.environ["ALFWORLD_DATA"] = str(default_cache_dir() / "alfworld_data")
    Path(os.environ["ALFWORLD_DATA"]).mkdir(parents=True, exist_ok=True)
    return os.environ["ALFWORLD_DATA"]


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


@contextlib.contextmanager
def _exclusive(lock_file: Path):
    """Hold an exclusive lock on ``lock_file``: processes that first use the same data at once
    (an evaluation pool, rollout workers) wait for one to build it instead of reading its
    half-written files."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _unpack_slim(pack: Path, cache_dir: Path) -> Path:
    """Unpack a slim pack once into ``cache_dir`` and return the unpacked root.

    The folder is named after the pack's content (a few MB, hashed in milliseconds), so a pack
    copied or provisioned again keeps its unpacked games and the paths recorded with them.
    """
    with pack.open("rb") as stream:
        tag = hashlib.file_digest(stream, "sha1").hexdigest()
    root = cache_dir / f"{pack.name.split('.')[0]}-{tag[:10]}"
    done = root / ".unpacked"
    if not done.exists():
        with _exclusive(cache_dir / f".{root.name}.lock"):
            if not done.exists():
                root.mkdir(parents=True, exist_ok=True)
                with tarfile.open(pack) as archive:
                    archive.extractall(root, filter="data")
                done.write_text(pack.name)
    return root


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
    with _exclusive(out_root / ".prepare.lock"):
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


def games_root(folder: Path, cache_dir: Path) -> Path:
    """Where the games of ``folder`` are built: in place under the cache, else a cache mirror."""
    folder, cache_dir = folder.resolve(), cache_dir.resolve()
    if cache_dir in folder.parents:
        return folder
    return cache_dir / "games" / hashlib.sha1(str(folder).encode()).hexdigest()[:12]


def _missing(message: str) -> ALFWorldDataError:
    return ALFWorldDataError(
        message + "\nALFWorld data goes in one of: (1) $ALFWORLD_DATA/json_2.1.1/<split>/ "
        "(the layout `alfworld-download` writes); (2) the slim packs train_slim.tar.xz / "
        "valid_seen_slim.tar.xz in the folder named by $ALFWORLD_SLIM; (3) the config key "
        "`environment.data_path` (a split folder, a folder of trials, or a slim pack file). "
        "Games can also be generated with `agentic-rl alfworld-gen --out DIR --n N`."
    )


def resolve_split(split: str = "train", data_path: str | os.PathLike | None = None,
                  cache_dir: Path | None = None) -> Path:
    """Find the folder holding a split's trial folders, unpacking a slim pack when needed.

    Args:
        split: ``train``, ``valid_seen``, ``valid_unseen`` (ignored when ``data_path`` names a
            split folder or a pack file).
        data_path: explicit location: a slim pack file, a folder of trials, or a data root
            holding ``json_2.1.1/<split>`` or slim packs.
        cache_dir: where packs are unpacked (default :func:`default_cache_dir`).

    Returns:
        The folder holding the split's trial folders (writable copy for packs).

    Raises:
        ALFWorldDataError: nothing found; the message says where data goes.
    """
    cache_dir = cache_dir or default_cache_dir()
    candidates: list[Path] = []
    if data_path is not None:
        candidates.append(Path(os.path.expandvars(os.fspath(data_path))).expanduser())
    else:
        for variable in ("ALFWORLD_SLIM", "ALFWORLD_DATA"):
            if os.environ.get(variable):
                candidates.append(Path(os.environ[variable]).expanduser())
    for location in candidates:
        if location.is_file() and location.name.endswith(".tar.xz"):
            root = _unpack_slim(location, cache_dir)
            inner = [p for p in (root / "json_2.1.1").glob("*") if p.is_dir()]
            return inner[0] if len(inner) == 1 else root
        if (location / "json_2.1.1" / split).is_dir():
            return location / "json_2.1.1" / split
        if split in SLIM_PACKS and (location / SLIM_PACKS[split]).is_file():
            return resolve_split(split, location / SLIM_PACKS[split], cache_dir)
        if location.is_dir() and data_path is not None and any(location.rglob("traj_data.json")):
            return location
    where = ", ".join(str(c) for c in candidates) or "no location given"
    raise _missing(f"No ALFWorld games for split '{split}' ({where}).")


def list_games(split: str = "train", data_path: str | os.PathLike | None = None,
               task_types: tuple[str, ...] | list[str] | None = None,
               cache_dir: Path | None = None) -> list[Path]:
    """Return the playable game files of a split, optionally filtered by task type.

    Args:
        split: split name (see :func:`resolve_split`).
        data_path: explicit data location (see :func:`resolve_split`).
        task_types: keep only these task types (names from :data:`TASK_TYPES`).
        cache_dir: cache folder for slim packs.

    Returns:
        Sorted ``game.tw-pddl`` paths.

    Raises:
        ALFWorldDataError: no data, or no game of the requested task types.
        ValueError: an unknown task type.
    """
    unknown = sorted(set(task_types or ()) - set(TASK_TYPES))
    if unknown:
        raise ValueError(f"Unknown ALFWorld task types {unknown}; allowed: {list(TASK_TYPES)}")
    cache_dir = cache_dir or default_cache_dir()
    folder = resolve_split(split, data_path, cache_dir)
    games = prepare_trials(folder, games_root(folder, cache_dir))
    if task_types:
        games = [g for g in games if task_type_of(g) in set(task_types)]
    if not games:
        raise _missing(f"No playable ALFWorld games in {folder} (task types {task_types}).")
    return games


def task_type_of(game_path: str | os.PathLike) -> str:
    """Task type of a game, read from the ``traj_data.json`` next to it."""
    traj = json.loads((Path(game_path).parent / "traj_data.json").read_text())
    return str(traj["task_type"])


def game_key(game_path: str | os.PathLike) -> str:
    """A game's name that does not depend on where its pack was unpacked: the last three
    folders of its path, ``<split>/<task folder>/<trial>``. The folder above them depends on
    the cache folder, the pack's content and the machine, so game paths recorded elsewhere
    (demonstration files) must be compared with today's by this key."""
    return "/".join(Path(game_path).parts[-4:-1])

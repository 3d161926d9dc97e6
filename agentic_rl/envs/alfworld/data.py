"""ALFWorld game data: finding a split's trials and listing its playable games.

Layouts understood:

* the standard layout written by ``alfworld-download``:
  ``$ALFWORLD_DATA/json_2.1.1/<split>/<task>/<trial>/`` with ``traj_data.json``,
  ``initial_state.pddl`` and (in official downloads) a ``game.tw-pddl`` built against the
  older 2.1.1 logic ("put X in/on Y");
* the slim packs (``train_slim.tar.xz``, ``valid_seen_slim.tar.xz``): the same tree holding only
  ``traj_data.json`` and ``initial_state.pddl``; unpacked into a cache folder on first use;
* any folder that holds trial folders (e.g. games written by ``agentic-rl alfworld-gen``).

``games.prepare_trials`` builds each trial's game for the installed wheel's logic.
"""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
from pathlib import Path

from agentic_rl.envs.alfworld.games import prepare_trials
from agentic_rl.envs.alfworld.install import default_cache_dir, exclusive

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


class ALFWorldDataError(FileNotFoundError):
    """Raised when no ALFWorld game data can be found; the message says where data goes."""


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
        with exclusive(cache_dir / f".{root.name}.lock"):
            if not done.exists():
                root.mkdir(parents=True, exist_ok=True)
                with tarfile.open(pack) as archive:
                    archive.extractall(root, filter="data")
                done.write_text(pack.name)
    return root


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

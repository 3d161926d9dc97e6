"""Where ALFWorld's package data and our caches live, and a lock for building them.

``alfworld`` creates ``$ALFWORLD_DATA`` when it is imported, so every module that imports it
calls :func:`ensure_alfworld_data_env` first; unpacked packs and built games go under
:func:`default_cache_dir`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path


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


@contextlib.contextmanager
def exclusive(lock_file: Path):
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

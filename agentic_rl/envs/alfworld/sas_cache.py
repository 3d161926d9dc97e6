"""Cache of Fast Downward's PDDL -> SAS translations of ALFWorld games (memory and disk).

Translating a game's PDDL problem takes about 0.2 s of Python per game (twice: once for the
engine, once more, optimised, for the planner). The engine needs only the SAS text and a summary
of the translated task (action parameters, types, objects, initial facts), so that summary is
kept in an in-process LRU and in gzipped JSON files (no pickles) under the cache folder, keyed
by a hash of the domain and problem texts.
"""

from __future__ import annotations

import collections
import gzip
import hashlib
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import fast_downward

from agentic_rl.envs.alfworld.install import default_cache_dir

_MEMORY_SIZE = 64  # games kept in memory; the disk cache serves the rest
_FORMAT = 1


class LRU(collections.OrderedDict):
    """An ordered dict that keeps its ``maxsize`` most recently used entries."""

    def __init__(self, maxsize: int = _MEMORY_SIZE) -> None:
        super().__init__()
        self.maxsize = maxsize

    def get_or(self, key: Any, build: Callable[[], Any]) -> Any:
        if key in self:
            self.move_to_end(key)
            return self[key]
        value = self[key] = build()
        if len(self) > self.maxsize:
            self.popitem(last=False)
        return value


_TRANSLATIONS = LRU()
_REPLANS = LRU()


def digest(*texts: str) -> str:
    """SHA-1 of the texts (separated by NUL)."""
    return hashlib.sha1("\x00".join(texts).encode()).hexdigest()


def _disk_path(key: str, kind: str) -> Path | None:
    if os.environ.get("AGENTIC_RL_ALFWORLD_DISK_CACHE", "1") == "0":
        return None
    return default_cache_dir() / "sas" / key[:2] / f"{key}.{kind}.json.gz"


def _read(path: Path | None) -> dict | None:
    if path is None or not path.exists():
        return None
    try:
        data = json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, ValueError):
        return None  # a torn or foreign file: translate again (and overwrite it)
    return data if data.get("format") == _FORMAT else None


def _write(path: Path | None, data: dict) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(gzip.compress(json.dumps({**data, "format": _FORMAT}).encode(), 3))
    os.replace(tmp, path)


def _init_facts(task: Any, name2type: dict[str, str]) -> list[list]:
    """The task's initial atoms as [predicate, [[arg, type], ...]] (TextWorld's conversion)."""
    translate = fast_downward.translate
    facts = []
    for atom in task.init:
        if isinstance(atom, translate.pddl.conditions.Atom):
            if atom.predicate == "=":
                continue
            facts.append([atom.predicate, [[a, name2type[a]] for a in atom.args]])
        elif isinstance(atom, translate.pddl.f_expression.Assign):
            name = "{}".format(atom.expression.value)
            if atom.fluent.symbol == "total-cost" or str.isdigit(name):
                continue
            facts.append([name, [[a, name2type[a]] for a in atom.fluent.args]])
    return facts


def _summarise(task: Any, sas: str) -> dict:
    name2type = {o.name: o.type_name for o in task.objects}
    return {
        "sas": sas,
        "actions": {a.name: [[p.name, p.type_name] for p in a.parameters] for a in task.actions},
        "types": [[t.name, list(t.supertype_names)] for t in task.types],
        "objects": [[o.name, o.type_name] for o in task.objects],
        "init": _init_facts(task, name2type),
    }


def _namespace(data: dict) -> SimpleNamespace:
    actions = {name: SimpleNamespace(name=name, parameters=[
        SimpleNamespace(name=p, type_name=t) for p, t in params])
        for name, params in data["actions"].items()}
    return SimpleNamespace(sas=data["sas"], actions=actions, types=data["types"],
                           name2type={name: kind for name, kind in data["objects"]},
                           init=data["init"])


def translation(domain: str, problem: str) -> SimpleNamespace:
    """Translated task summary: ``sas``, ``actions`` (name -> parameters), ``types``,
    ``name2type`` and ``init`` facts, from memory, disk, or Fast Downward's translator."""

    def build() -> SimpleNamespace:
        path = _disk_path(digest(domain, problem), "sas")
        data = _read(path)
        if data is None:
            data = _summarise(*fast_downward.pddl2sas(domain, problem))
            _write(path, data)
        return _namespace(data)

    return _TRANSLATIONS.get_or(digest(domain, problem), build)


def replan_sas(domain: str, problem: str) -> str:
    """The optimised SAS text Fast Downward's planner uses, from memory, disk or the translator."""

    def build() -> str:
        path = _disk_path(digest(domain, problem), "replan")
        data = _read(path)
        if data is None:
            data = {"sas": fast_downward.pddl2sas(domain, problem, optimize=True)[1]}
            _write(path, data)
        return data["sas"]

    return _REPLANS.get_or(digest(domain, problem), build)

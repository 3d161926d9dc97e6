"""Building a ``ReplayStorage`` with its demonstrations: each skill's demo file (recorded by the
scripted expert when missing) into the demo replay and the expert prototypes."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from agentic_rl.data.replay_storage import DEFAULT_SKILL, ReplaySettings, ReplayStorage
from agentic_rl.data.storage import StorageSpec
from agentic_rl.experts import has_expert
from agentic_rl.experts.demos import load_demos, record_demos, save_demos, split_episodes


def build_replay_storage(spec: StorageSpec, settings: ReplaySettings, demos: Any,
                         to_unit: Callable[[torch.Tensor], torch.Tensor],
                         observe: Callable[[dict[str, torch.Tensor]], None]) -> ReplayStorage:
    """A ``ReplayStorage``; with demos (``prototype_data_path``, always where the learner
    distils) also a demo replay and expert prototypes, whose states go to ``observe``.
    Refuses an env that ends episodes in failure where HER relabels: it recomputes
    ``terminated`` by success alone and would erase the failures silently."""
    if spec.goal_fns.terminates_on_failure and settings.her.strategy != "none":
        from agentic_rl.config import ConfigError

        raise ConfigError("flat off-policy learners (SAC, OPD, SAC-Lag, TD3): the env ends "
                          "episodes in failure (e.g. environment.kwargs.terminate_when_unhealthy),"
                          " and HER relabels 'terminated' by success alone, which would erase "
                          "them; drop the option, or use hgpo_sac, whose Worker keeps them")
    storage = ReplayStorage(spec, settings, demos)
    if settings.prototype_batch_size is not None or demos.prototype_data_path:
        episodes = demo_episodes(spec, demos, to_unit)
        storage.add_demos(episodes)
        observe({key: torch.cat([e[field] for _, e, _, _ in episodes]) for key, field in (
            ("observation", "obs"), ("desired_goal", "desired_goal"),
            ("achieved_goal", "achieved_goal"))})
    return storage


def demo_episodes(spec: StorageSpec, demos: Any,
                  to_unit: Callable[[torch.Tensor], torch.Tensor]) -> list[tuple]:
    """Each skill's demonstration episodes as ``ReplayStorage.add_demos`` takes them,
    recording the file with the scripted expert first when it does not exist yet."""
    episodes = []
    for skill in demos.skills or [None]:
        name = skill.name if skill is not None else DEFAULT_SKILL
        path = skill.prototype_data_path if skill is not None else demos.prototype_data_path
        if path is None:
            raise ValueError(f"OPD needs prototypes: set algorithm.prototype_data_path (or "
                             f"prototype_data_path of skill {name!r}) to a demo .npz file")
        if isinstance(path, list):
            raise ValueError("algorithm.prototype_data_path takes one .npz file for SAC/OPD (lists "
                             "of files are for text agents)")
        path = Path(path)
        if not path.exists() and has_expert(spec.env_name):
            arrays = record_demos(spec.env_name, demos.prototype_episodes,
                                  seed=spec.seed + 10_000_000, env_kwargs=spec.env_kwargs,
                                  expert_kwargs=skill.expert_kwargs if skill else None,
                                  goal_region=spec.goal_region)
            save_demos(arrays, path)
        for episode in split_episodes(load_demos(path, spec.env_name)):
            tensors = {k: torch.as_tensor(v) for k, v in episode.items()
                       if isinstance(v, np.ndarray)}
            tensors["action"] = to_unit(tensors["action"])
            episodes.append((name, tensors, bool(episode["success"]), float(episode["return"])))
    return episodes

"""Scripted experts that produce prototype data, looked up by environment id."""

from __future__ import annotations

from typing import Callable

import numpy as np

Expert = Callable[[dict[str, np.ndarray]], np.ndarray]


class NoExpertError(LookupError):
    """The environment has no scripted expert to record demonstrations with."""


def expert_for(env_id: str, **kwargs: float) -> Expert:
    """The scripted expert for ``env_id`` (raw dict observation -> action in env units)."""
    from agentic_rl.envs.point import ENV_ID as POINT_ID, point_expert
    from agentic_rl.experts import fetch

    if env_id == POINT_ID:
        return point_expert(**kwargs)
    family = env_id.split("-")[0]
    makers = {"FetchReach": fetch.reach_expert, "FetchReachDense": fetch.reach_expert,
              "FetchPush": fetch.push_expert, "FetchPushDense": fetch.push_expert,
              "FetchPickAndPlace": fetch.pick_and_place_expert,
              "FetchPickAndPlaceDense": fetch.pick_and_place_expert}
    if family not in makers:
        raise NoExpertError(f"no scripted expert for {env_id!r}; experts exist for "
                       f"{sorted(makers)}. Record demonstrations another way and set "
                       "algorithm.prototype_data_path to the .npz file")
    return makers[family](**kwargs)


def has_expert(env_id: str) -> bool:
    try:
        expert_for(env_id)
    except NoExpertError:
        return False
    return True

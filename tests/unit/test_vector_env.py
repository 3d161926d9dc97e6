"""The training vector env (LeanSyncVectorEnv) steps exactly like gymnasium's SyncVectorEnv."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from agentic_rl.envs.make import LeanSyncVectorEnv, env_factory, make_vec_env


@pytest.mark.parametrize("env_id", ["agentic_rl/PointReach-v0", "FetchReach-v4"])
def test_lean_step_matches_sync_vector_env(env_id):
    kwargs = dict(autoreset_mode=AutoresetMode.DISABLED, copy=False)
    ours = LeanSyncVectorEnv([env_factory(env_id) for _ in range(2)], **kwargs)
    theirs = SyncVectorEnv([env_factory(env_id) for _ in range(2)], **kwargs)
    rng = np.random.default_rng(0)
    for envs in (ours, theirs):
        envs.reset(seed=[1, 2])
    for step in range(120):
        actions = rng.uniform(-1, 1, (2, *ours.single_action_space.shape)).astype(np.float32)
        results = [envs.step(actions) for envs in (ours, theirs)]
        (obs, reward, terminated, truncated, info), expected = results
        for key in expected[0]:
            np.testing.assert_array_equal(obs[key], expected[0][key])
        for got, want in zip((reward, terminated, truncated), expected[1:4]):
            np.testing.assert_array_equal(got, want)
        assert info.keys() == expected[4].keys()
        for key in info:
            np.testing.assert_array_equal(info[key], expected[4][key])
        stepped = {key: value.copy() for key, value in obs.items()}  # (buffers, reused)
        done = terminated | truncated
        if step == 7:  # env 1 starts over early: later resets leave env 0 mid-episode
            done = np.array([False, True])
        if done.any():  # the collector resets finished envs itself
            seeds = [step if d else None for d in done]
            ours_obs, theirs_obs = [envs.reset(seed=seeds, options={"reset_mask": done})[0]
                                    for envs in (ours, theirs)]
            for key in theirs_obs:  # and the envs not reset keep the observation they reached
                np.testing.assert_array_equal(ours_obs[key], theirs_obs[key])
                np.testing.assert_array_equal(ours_obs[key][~done], stepped[key][~done])
    ours.close(), theirs.close()


def test_training_envs_are_lean_and_refuse_a_finished_env():
    envs = make_vec_env("agentic_rl/PointReach-v0", 1)
    assert isinstance(envs, LeanSyncVectorEnv) and envs.lean
    envs.reset(seed=[0])
    action = np.zeros((1, *envs.single_action_space.shape), dtype=np.float32)
    done = False
    while not done:
        *_, terminated, truncated, _ = envs.step(action)
        done = bool(terminated[0] or truncated[0])
    with pytest.raises(RuntimeError, match="reset finished envs"):
        envs.step(action)

"""The place memory of the text agent: what was seen where, the same in the env wrapper (acting)
and rebuilt from stored episodes (training), and the policy feature it feeds."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from agentic_rl.collect.game_schedule import SeedSchedule
from agentic_rl.collect.text_inputs import TextInputs
from agentic_rl.data.text_places import (NOT_LOOKED, NOTHING_SEEN, TASK_WORD_SEEN, PlaceMemory,
                                         place_buckets, place_of)
from agentic_rl.data.text_table import TextTable
from agentic_rl.nets.text import TextPolicy
from tests.unit.test_text_agent import B, DIM, N, T, _batch

TASK = "put a pen on desk."
FEEDBACK = {
    "go to shelf 1": "You arrive at shelf 1. On the shelf 1, you see a pen 1.",
    "go to shelf 2": "You arrive at shelf 2. On the shelf 2, you see a cd 1.",
    "go to desk 1": "You arrive at desk 1. On the desk 1, you see nothing.",
    "go to drawer 1": "You arrive at drawer 1. The drawer 1 is closed.",
    "open drawer 1": "You open the drawer 1. The drawer 1 is open. In it, you see a pen 2.",
}
COMMANDS = list(FEEDBACK)
X, O, N_ = NOT_LOOKED, TASK_WORD_SEEN, NOTHING_SEEN


class _Encoder:
    dim = 3

    def encode(self, texts):
        return np.asarray([[len(t), 1.0, 0.0] for t in texts], np.float32)


class _RoomEnv(gym.Env):
    """A stand-in for ALFWorldEnv: five commands, fixed feedback, the texts TextInputs reads."""

    observation_space = gym.spaces.Discrete(1)  # not read by TextInputs
    action_space = gym.spaces.Discrete(len(COMMANDS))
    expert_enabled = False

    def _out(self, text: str):
        obs = {"task": TASK, "observation": text, "inventory": "nothing"}
        return obs, {"admissible_commands": list(COMMANDS), "won": False}

    def reset(self, *, seed=None, options=None):
        return self._out("You are in the middle of a room.")

    def step(self, action):
        obs, info = self._out(FEEDBACK[COMMANDS[int(action)]])
        return obs, 0.0, False, False, info


def test_place_of_reads_go_to_and_open():
    assert place_of("go to drawer 1") == place_of("open drawer 1") == "drawer 1"
    assert place_of("take pen 1 from drawer 1") == ""
    assert place_of("open drawer 1", ("go to ",)) == ""


def test_a_place_is_marked_by_its_last_description_and_its_own_name_does_not_count():
    table = TextTable(_Encoder())
    ids = dict(zip([TASK, *COMMANDS, *FEEDBACK.values()],
                   table.ids([TASK, *COMMANDS, *FEEDBACK.values()])))
    memory = PlaceMemory(table, int(ids[TASK]))
    commands = np.array([ids[c] for c in COMMANDS] + [0])
    np.testing.assert_array_equal(memory.buckets(commands), [X, X, X, X, X, X])
    for command in ("go to shelf 2", "go to shelf 1", "go to desk 1", "go to drawer 1"):
        memory.visit(int(ids[command]), int(ids[FEEDBACK[command]]))
    # a cd on shelf 2, a pen on shelf 1, nothing on the desk ("desk" is its own name), drawer
    # closed; "open drawer 1" is not a place to go to
    np.testing.assert_array_equal(memory.buckets(commands), [O, N_, N_, N_, X, X])
    memory.visit(int(ids["open drawer 1"]), int(ids[FEEDBACK["open drawer 1"]]))
    np.testing.assert_array_equal(memory.buckets(commands), [O, N_, N_, O, X, X])


def test_the_envs_place_buckets_equal_those_rebuilt_from_the_episode():
    table = TextTable(_Encoder(), lazy=True)
    env = TextInputs(_RoomEnv(), table, SeedSchedule([0], 0), max_commands=6)
    seen = [env.reset(seed=0)[0]]
    for action in (1, 0, 2, 3, 4, 0):
        seen.append(env.step(action)[0])
    stack = lambda key: torch.from_numpy(np.stack([o[key] for o in seen]))[None]  # noqa: E731
    rebuilt = place_buckets(table, stack("task"), stack("observation"),
                            stack("previous_command"), stack("commands"))
    online = stack("place")
    torch.testing.assert_close(rebuilt, online)
    assert online[0, :, :5].tolist() == [
        [X, X, X, X, X], [X, N_, X, X, X], [O, N_, X, X, X], [O, N_, N_, X, X],
        [O, N_, N_, N_, X], [O, N_, N_, O, X], [O, N_, N_, O, X]]
    again = env.reset(seed=0)[0]  # a new episode forgets the places
    assert not again["place"].any()


def test_the_place_feature_moves_only_the_go_to_commands_it_marks():
    policy = TextPolicy(DIM, hidden=16, memory=True, place_memory=True)
    batch = _batch(torch.Generator().manual_seed(0))
    table = torch.randn(20, DIM, generator=torch.Generator().manual_seed(1))
    batch["place"] = torch.zeros(B, T, N, dtype=torch.int64)
    with torch.no_grad():
        policy.place_embed.weight[NOTHING_SEEN, -1] = -5.0  # searched in vain: a penalty
        before, _, _ = policy(table, batch)
        batch["place"][:, :, 2] = NOTHING_SEEN
        after, _, _ = policy(table, batch)
    changed = after != before
    assert changed[:, :, 2].all() and not changed[:, :, [0, 1]].any()
    assert (after[:, :, 2] < before[:, :, 2]).all()

"""The text agent's object memory (``data.object_memory``) and its remembered bit in the history
buckets: hand-built episodes, the collector's buckets against the learner's, the policy and
config switch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agentic_rl.algos.text_opd_config import TextOPDConfig
from agentic_rl.data.object_memory import ObjectMemory
from agentic_rl.data.text_episodes import history_buckets
from agentic_rl.data.text_table import TAKE_BACK_BUCKETS
from agentic_rl.nets.text import TextPolicy
from tests.unit.scripted_text import ScriptedTextEnv, collected_steps

SIDETABLE = ("You arrive at sidetable 1. On the sidetable 1, you see a alarmclock 2, "
             "a alarmclock 1, a desklamp 1, and a pen 3.")
GOES = ["go to sidetable 1", "go to desk 1", "go to drawer 1"]
TASK = "Your task is to: put two alarmclock in desk."


def test_a_place_is_flagged_while_it_holds_a_task_object_not_yet_delivered():
    memory = ObjectMemory(TASK)
    memory.update("", "Looking quickly around you, you see a desk 1, and a sidetable 1.")
    assert memory.remembered(GOES) == [False, False, False]  # no contents yet
    memory.update("go to sidetable 1", SIDETABLE)
    assert memory.contents["sidetable 1"] == {"alarmclock 2", "alarmclock 1", "desklamp 1",
                                              "pen 3"}
    assert memory.remembered(GOES) == [True, False, False]
    assert memory.remembered(["take alarmclock 2 from sidetable 1"]) == [False]
    memory.update("take alarmclock 2 from sidetable 1", "You pick up the alarmclock 2 ...")
    assert memory.remembered(GOES) == [True, False, False]  # alarmclock 1 is left
    memory.update("go to desk 1", "You arrive at desk 1. On the desk 1, you see a cd 3.")
    memory.update("move alarmclock 2 to desk 1", "You move the alarmclock 2 to the desk 1.")
    # the desk holds only the alarmclock the agent delivered there (the task names the desk)
    assert memory.remembered(GOES) == [True, False, False]
    memory.update("take alarmclock 1 from sidetable 1", "You pick up the alarmclock 1 ...")
    assert memory.remembered(GOES) == [False, False, False]
    # put down where the task does not want it, it has to be fetched again
    memory.update("go to drawer 1", "You arrive at drawer 1. The drawer 1 is closed.")
    memory.update("move alarmclock 1 to drawer 1", "You move the alarmclock 1 to the drawer 1.")
    assert memory.remembered(GOES) == [False, False, True]
    memory.update("take alarmclock 1 from drawer 1", "You pick up the alarmclock 1 ...")
    assert memory.remembered(GOES) == [False, False, False]
    # a closed receptacle shows nothing and keeps what was known; an opened one replaces it
    memory.update("go to drawer 1", "You arrive at drawer 1. The drawer 1 is closed.")
    memory.update("open drawer 1", "You open the drawer 1. The drawer 1 is open. In it, you "
                  "see a alarmclock 3.")
    assert memory.contents["drawer 1"] == {"alarmclock 3"}
    assert memory.remembered(GOES) == [False, False, True]
    for task, flags in (("put a pen in desk.", [True, False, False]),
                        ("put a book in desk.", [False, False, False])):
        other = ObjectMemory(task)
        other.update("go to sidetable 1", SIDETABLE)
        assert other.remembered(GOES) == flags


def test_the_collector_and_the_stored_episode_give_the_same_remembered_bits():
    """A sidetable with two alarm clocks and a desk; replies follow the commands."""
    env = ScriptedTextEnv(
        "put two alarmclock in desk.",
        ["go to sidetable 1", "take alarmclock 1 from sidetable 1", "go to desk 1",
         "move alarmclock 1 to desk 1"],
        [SIDETABLE, "You pick up the alarmclock 1 from the sidetable 1.",
         "You arrive at desk 1. On the desk 1, you see a cd 3.",
         "You move the alarmclock 1 to the desk 1."])
    table, steps = collected_steps(env, (0, 1, 2, 3))
    online = np.stack([s["history"] for s in steps])
    # after "go to sidetable 1": it is flagged (16) and was the previous command (4 + 1)
    assert online[1].tolist() == [16 + 4 + 1, 0, 0, 0]
    # alarmclock 2 is still there after the take; the desk is never flagged
    assert [row[0] >= 16 for row in online] == [False, True, True, True, True]
    assert not (online[:, 2] >= 16).any()
    offline = history_buckets(np.stack([s["commands"] for s in steps]),
                              np.asarray([s["previous_command"] for s in steps]), table.texts,
                              np.asarray([s["observation"] for s in steps]),
                              int(steps[0]["task"]))
    np.testing.assert_array_equal(offline, online)


def test_only_a_policy_with_object_memory_reads_the_bit():
    torch.manual_seed(0)
    table = torch.randn(6, 8)
    batch = {"task": torch.ones(1, 1, dtype=torch.int64),
             "observation": torch.full((1, 1), 2), "inventory": torch.full((1, 1), 3),
             "previous_command": torch.zeros(1, 1, dtype=torch.int64),
             "commands": torch.tensor([[[4, 5]]]),
             "history": torch.zeros(1, 1, 2, dtype=torch.int64),
             "match": torch.zeros(1, 1, 2, dtype=torch.int64),
             "command_mask": torch.ones(1, 1, 2, dtype=torch.bool)}
    flagged = {**batch, "history": batch["history"] + TAKE_BACK_BUCKETS}
    for memory in (False, True):
        policy = TextPolicy(8, hidden=4, memory=False, take_back=True, object_memory=memory)
        torch.nn.init.normal_(policy.history_embed.weight)
        same = torch.equal(policy(table, flagged)[0], policy(table, batch)[0])
        assert same != memory
    with pytest.raises(ValueError, match="take_back"):
        TextPolicy(8, hidden=4, take_back=False, object_memory=True)
    with pytest.raises(ValueError, match="take_back"):
        TextOPDConfig(object_memory=True)

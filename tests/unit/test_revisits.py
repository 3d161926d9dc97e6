"""The revisit bit (``data.revisits``): hand-built episodes, the collector's buckets against the
learner's, the policy's mask and the imitation loss over a masked demonstration step."""

from __future__ import annotations

import numpy as np
import torch

from agentic_rl.algos.text_losses import command_cross_entropy
from agentic_rl.data.revisits import RevisitMemory
from agentic_rl.data.text_episodes import history_buckets
from agentic_rl.data.text_table import REVISIT_FLAG
from agentic_rl.nets.text import TextPolicy
from tests.unit.scripted_text import ScriptedTextEnv, collected_steps

GOES = ["go to shelf 1", "go to shelf 2", "look"]


def test_a_command_repeated_at_the_same_place_and_world_is_a_revisit():
    memory = RevisitMemory()
    memory.update("")
    assert memory.revisits(GOES) == [False, False, False]
    memory.update("go to shelf 1")
    memory.update("go to shelf 2")
    # at shelf 2 nothing was issued yet; "go to shelf 1" from the start does not count
    assert memory.revisits(GOES) == [False, False, False]
    memory.update("go to shelf 1")
    # back at shelf 1, world unchanged: "go to shelf 2" from here was issued before
    assert memory.revisits(GOES) == [False, True, False]
    memory.update("look")
    memory.update("examine shelf 1")  # neither changes the world
    assert memory.revisits(GOES) == [False, True, True]
    memory.update("take vase 1 from shelf 1")  # the world changed: nothing is a revisit
    assert memory.version == 1
    assert memory.revisits(GOES + ["take vase 1 from shelf 1"]) == [False] * 4
    memory.update("go to shelf 2")
    memory.update("go to shelf 1")
    assert memory.revisits(GOES) == [False, True, False]
    memory.update("open drawer 1")  # opening changes the world too
    assert memory.revisits(GOES) == [False, False, False]


def test_the_collector_and_the_stored_episode_give_the_same_revisit_bits():
    """Shelf 1 to shelf 2 and back: the third go-to from shelf 1 is flagged."""
    shelf = "You arrive at shelf {}. On the shelf {}, you see nothing."
    env = ScriptedTextEnv(
        "put a vase in desk.",
        ["go to shelf 1", "go to shelf 2", "go to desk 1"],
        [shelf.format(1, 1), shelf.format(2, 2), "You arrive at desk 1."])
    table, steps = collected_steps(env, (0, 1, 0, 1))
    online = np.stack([s["history"] for s in steps])
    flagged = online // REVISIT_FLAG % 2 == 1
    # steps: start, at shelf 1, at shelf 2, at shelf 1 again, at shelf 2 again
    assert flagged[:, :3].tolist() == [[False] * 3, [False] * 3, [False] * 3,
                                       [False, True, False], [True, False, False]]
    offline = history_buckets(np.stack([s["commands"] for s in steps]),
                              np.asarray([s["previous_command"] for s in steps]), table.texts,
                              np.asarray([s["observation"] for s in steps]),
                              int(steps[0]["task"]))
    np.testing.assert_array_equal(offline, online)


def _batch(history: list[int], mask: list[bool]) -> dict[str, torch.Tensor]:
    return {"task": torch.ones(1, 1, dtype=torch.int64),
            "observation": torch.full((1, 1), 2), "inventory": torch.full((1, 1), 3),
            "previous_command": torch.zeros(1, 1, dtype=torch.int64),
            "commands": torch.tensor([[[4, 5, 6]]]),
            "history": torch.tensor([[history]]),
            "match": torch.zeros(1, 1, 3, dtype=torch.int64),
            "command_mask": torch.tensor([[mask]])}


def test_the_policy_masks_revisits_unless_nothing_else_is_admissible():
    torch.manual_seed(0)
    table = torch.randn(7, 8)
    plain = _batch([1, 1, 0], [True, True, True])
    one_flagged = _batch([1, 1 + REVISIT_FLAG, 0], [True, True, True])
    avoiding = TextPolicy(8, hidden=4, memory=False, avoid_revisits=True)
    logits = avoiding(table, one_flagged)[0][0, 0]
    assert torch.isinf(logits[1]) and torch.isfinite(logits[[0, 2]]).all()
    # the flag is not embedded: the other commands score as without it
    torch.testing.assert_close(logits[[0, 2]], avoiding(table, plain)[0][0, 0, [0, 2]])
    # every admissible command flagged (the third is inadmissible): none is masked
    all_flagged = _batch([REVISIT_FLAG, 1 + REVISIT_FLAG, 0], [True, True, False])
    logits = avoiding(table, all_flagged)[0][0, 0]
    assert torch.isfinite(logits[:2]).all() and torch.isinf(logits[2])
    # a policy without avoid_revisits ignores the flag
    ignoring = TextPolicy(8, hidden=4, memory=False)
    ignoring.load_state_dict(avoiding.state_dict())
    torch.testing.assert_close(ignoring(table, one_flagged)[0], avoiding(table, plain)[0])


def test_a_masked_target_drops_out_of_the_cross_entropy():
    logits = torch.tensor([[0.0, float("-inf")], [0.0, 0.0]])
    target = torch.tensor([1, 0])
    loss = command_cross_entropy(logits, target, torch.tensor([False, True]))
    torch.testing.assert_close(loss, torch.tensor(np.log(2.0), dtype=torch.float32))

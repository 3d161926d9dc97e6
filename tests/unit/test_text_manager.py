"""The learned text Manager: templated subgoals from task texts, completion from commands and
feedback, the imitation labels cut from a demonstration (checked by hand), and the planner
choosing what its network learned."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from agentic_rl.algos.text_losses import success_shaping
from agentic_rl.algos.text_manager import LearnedManagerTrainer
from agentic_rl.algos.text_opd import ManagerConfig
from agentic_rl.data.text_episodes import text_episode
from agentic_rl.data.text_table import TextTable
from agentic_rl.nets.text_manager import TextManager
from agentic_rl.plan import build_planner
from agentic_rl.plan.learned import (LearnedTextManager, dagger_decisions, episode_decisions,
                                     manager_logits)
from agentic_rl.plan.text_subgoals import (abstract_command, completed, decision_points,
                                           decision_steps, period_outcomes,
                                           hindsight_subgoals, manager_inputs, subgoal_text,
                                           template_subgoals, task_words)


class _HashEncoder:
    """Distinct pseudo-random unit vectors per text (a stand-in for MiniLM)."""

    dim = 16

    def encode(self, texts: list[str]) -> np.ndarray:
        out = []
        for text in texts:
            seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
            vector = np.random.default_rng(seed).standard_normal(self.dim)
            out.append(vector / np.linalg.norm(vector))
        return np.asarray(out, np.float32)


TASK = "find two newspaper and put them in sofa."
# a pick-two demonstration: (command, the feedback it got)
DEMO = [("go to sidetable 1", "You arrive at sidetable 1."),
        ("take newspaper 1 from sidetable 1", "You pick up the newspaper 1."),
        ("go to sofa 1", "You arrive at sofa 1."),
        ("move newspaper 1 to sofa 1", "You move the newspaper 1 to the sofa 1."),
        ("take pen 1 from sofa 1", "Nothing happens."),
        ("go to drawer 1", "You arrive at drawer 1."),
        ("take newspaper 2 from drawer 1", "You pick up the newspaper 2."),
        ("go to sofa 1", "You arrive at sofa 1."),
        ("move newspaper 2 to sofa 1", "")]


def test_commands_become_subgoals_without_numbers_or_places():
    assert abstract_command("take apple 1 from countertop 2") == "take apple"
    assert abstract_command("move apple 1 to fridge 1") == "put apple in fridge"
    assert abstract_command("heat egg 2 with microwave 1") == "heat egg with microwave"
    assert abstract_command("clean mug 1 with sinkbasin 1") == "clean mug with sinkbasin"
    assert abstract_command("use desklamp 1") == "use desklamp"
    for command in ("go to fridge 1", "open drawer 1", "look", "inventory",
                    "examine sidetable 1"):
        assert abstract_command(command) is None
    assert completed("take pen 1 from sofa 1", "Nothing happens.") is None
    assert completed("take pen 1 from sofa 1", "You pick up the pen 1.") == "take pen"


def test_candidates_are_templates_over_the_task_words():
    assert task_words("put a clean apple in fridge.") == ["apple", "fridge"]
    assert task_words("look at pillow under the desklamp.") == ["pillow", "desklamp"]
    candidates = template_subgoals("put a clean apple in fridge.")
    assert candidates == ["take apple", "take fridge", "put apple in fridge",
                          "put fridge in apple", "heat apple with microwave",
                          "heat fridge with microwave", "cool apple with fridge",
                          "cool fridge with fridge", "clean apple with sinkbasin",
                          "clean fridge with sinkbasin", "use apple", "use fridge"]


def test_hindsight_subgoals_are_the_next_completed_subgoal():
    commands, feedbacks = zip(*DEMO)
    assert hindsight_subgoals(commands, feedbacks) == (
        ["take newspaper"] * 2 + ["put newspaper in sofa"] * 2 + ["take newspaper"] * 3
        + ["put newspaper in sofa"] * 2)


def test_decisions_count_completions_and_label_the_next_one():
    commands, feedbacks = zip(*DEMO)
    examples = decision_points(TASK, commands, feedbacks)
    assert [step for step, _, _ in examples] == [0, 2, 4, 7]  # start, after each completion
    chosen = [inputs.candidates[label] for _, inputs, label in examples]
    assert chosen == ["take newspaper", "put newspaper in sofa", "take newspaper",
                      "put newspaper in sofa"]
    third = examples[2][1]
    assert third.total == 2 and third.last == "put newspaper in sofa"
    assert third.counts[third.candidates.index("take newspaper")] == 1
    assert third.counts[third.candidates.index("put newspaper in sofa")] == 1
    # the failed "take pen" completed nothing; a completed subgoal naming a task word but off
    # the templates joins the candidates
    after = manager_inputs(TASK, [("move pen 1 to sofa 1", "You move the pen 1.")])
    assert after.candidates[-1] == "put pen in sofa" and after.counts[-1] == 1
    # what the agent carries, per candidate (the thing it acts on is in the inventory text)
    holding = manager_inputs(TASK, [], "You are carrying: a newspaper 1.")
    held = dict(zip(holding.candidates, holding.held))
    assert held["take newspaper"] and held["put newspaper in sofa"] and not held["take sofa"]
    assert not any(manager_inputs(TASK, [], "You are not carrying anything.").held)


def _demo_episode(table: TextTable, steps=DEMO, task: str = TASK):
    commands = [c for c, _ in steps]
    observations = ["You are in a room."] + [f for _, f in steps[:-1]]
    lists = [[c, "look"] for c in commands]
    return text_episode(table, task, observations, ["You carry nothing."] * len(steps), lists,
                        [0] * len(steps), np.zeros(len(steps)), terminated=True, success=True)


def test_the_manager_learns_the_demonstrated_sequence_and_the_planner_follows_it():
    torch.manual_seed(0)
    table = TextTable(_HashEncoder())
    episode = _demo_episode(table)
    planner = build_planner(ManagerConfig(planner="learned", hidden=32), table)
    assert isinstance(planner, LearnedTextManager) and not planner.needs_expert
    trainer = LearnedManagerTrainer(planner.net, table, lr=3e-3)
    trainer.set_demos([episode])
    assert [table.texts[i] for i in episode.subgoal] == hindsight_subgoals(*zip(*DEMO))
    generator = torch.Generator().manual_seed(0)
    first = trainer.imitation_step(generator)
    for _ in range(150):
        last = trainer.imitation_step(generator)
    assert last["losses/manager_imitation"] < 0.1 * first["losses/manager_imitation"]
    assert last["train/manager_accuracy"] == 1.0
    # the planner replays the sequence from the trajectory alone
    assert planner.subgoal(TASK, "", "You carry nothing.", [], {}, DEMO[:2]) \
        == "put newspaper in sofa"
    assert planner.subgoal(TASK, "", "You carry nothing.", [], {}, DEMO[:5]) == "take newspaper"
    assert planner.reached("take newspaper", *DEMO[1])
    assert not planner.reached("take newspaper", *DEMO[4])  # nothing happened
    # the learner saves and restores the network
    copy = LearnedManagerTrainer(TextManager(table.dim, 32), table, lr=3e-3)
    copy.load_state_dict(trainer.state_dict())
    for key, value in trainer.net.state_dict().items():
        assert torch.equal(copy.net.state_dict()[key], value)


def test_manager_config_refuses_a_width_without_a_network():
    with pytest.raises(ValueError, match="no network"):
        ManagerConfig(planner="expert_plan", hidden=64)
    with pytest.raises(ValueError, match="text table"):
        build_planner(ManagerConfig(planner="learned"))


def test_decision_steps_follow_completions_and_the_period():
    commands, feedbacks = zip(*DEMO)
    # completions at steps 1, 3 and 6 (step 4 answered "Nothing happens")
    assert decision_steps(commands, feedbacks, period=10) == [0, 2, 4, 7]
    assert decision_steps(commands, feedbacks, period=2) == [0, 2, 4, 6, 7]


def _rollout(table: TextTable, subgoal: str, reward: float, game: str):
    episode = _demo_episode(table, DEMO[:2])
    episode.subgoal = table.ids([subgoal, subgoal])
    episode.reward = np.asarray([0.0, reward], np.float32)
    episode.game = game
    return episode


def test_group_update_moves_the_manager_toward_the_rewarded_choice():
    torch.manual_seed(0)
    table = TextTable(_HashEncoder())
    planner = build_planner(ManagerConfig(planner="learned", hidden=32), table)
    trainer = LearnedManagerTrainer(planner.net, table, lr=1e-2)
    # two episodes of one game: one Manager chose "take newspaper" and won, one chose
    # "use sofa" and lost; a third game whose two episodes tie teaches nothing
    episodes = [_rollout(table, "take newspaper", 1.0, "g"), _rollout(table, "use sofa", 0.0, "g"),
                _rollout(table, "use sofa", 1.0, "h"), _rollout(table, "use sofa", 1.0, "h")]
    batch, chosen, owner = episode_decisions(table, episodes, period=10)
    assert owner.tolist() == [0, 1, 2, 3]  # one decision each (step 0; none after step 1)
    inputs = manager_inputs(TASK, [])
    assert [inputs.candidates[i] for i in chosen] == ["take newspaper"] + ["use sofa"] * 3

    @torch.no_grad()
    def preference() -> float:
        logits = manager_logits(planner.net, table.tensor(), batch.rows(torch.tensor([0])))[0]
        return float(logits[chosen[0]] - logits[chosen[1]])

    before = preference()
    metrics = trainer.group_update(episodes, period=10, alpha=0.0, epochs=4, clip_range=0.2,
                                   generator=torch.Generator().manual_seed(0))
    assert metrics["train/manager_decisions"] == 4
    assert preference() > before + 0.05


def test_a_sampling_manager_draws_per_episode_and_reproducibly():
    table = TextTable(_HashEncoder())
    greedy = build_planner(ManagerConfig(planner="learned", hidden=32), table)
    sampler = greedy.sampling(seed=3)
    assert sampler.net is greedy.net
    draws = [sampler.subgoal(TASK, "", "", [], {"slot": 0, "episode": e}) for e in range(40)]
    again = [sampler.subgoal(TASK, "", "", [], {"slot": 0, "episode": e}) for e in range(40)]
    assert draws == again and len(set(draws)) > 3  # an untrained Manager spreads its choices
    assert len({greedy.subgoal(TASK, "", "", [], {"episode": e}) for e in range(5)}) == 1


def test_period_outcomes_and_the_success_shaping_by_hand():
    commands, feedbacks = zip(*DEMO)
    subgoals = hindsight_subgoals(commands, feedbacks)
    subgoals[4:7] = ["use sofa"] * 3  # the third period's subgoal is not what it completes
    ends, succeeds = period_outcomes(commands, feedbacks, subgoals, period=10)
    assert ends == [False, True, False, True, False, False, True, False, True]
    assert succeeds == [True] * 4 + [False] * 3 + [True] * 2
    potential = np.array([0.2, 0.5, 0.4, 0.9, 0.3, 0.3, 0.6, 0.5, 0.8])
    bonus = success_shaping(potential, np.array(ends), np.array(succeeds))
    expected = [0.5 - 0.2, 1 - 0.5, 0.9 - 0.4, 1 - 0.9, 0.3 - 0.3, 0.6 - 0.3, 0 - 0.6,
                0.8 - 0.5, 1 - 0.8]
    np.testing.assert_allclose(bonus, expected, atol=1e-6)
    # a period's bonuses sum to its outcome minus the chance predicted at its start
    assert bonus[4:7].sum() == pytest.approx(0 - 0.3)


def test_expert_subgoals_read_as_the_commands_that_complete_them():
    assert subgoal_text("take", "apple") == "take apple"
    assert subgoal_text("put", "apple", "fridge") == "put apple in fridge"
    assert subgoal_text("clean", "mug", "sinkbasin") == "clean mug with sinkbasin"
    assert subgoal_text("use", "desklamp") == "use desklamp"
    for command in ("take apple 1 from table 1", "move apple 1 to fridge 1",
                    "clean mug 2 with sinkbasin 1", "use desklamp 3"):
        verb, obj, *rest = command.replace(" with ", " ").replace(" to ", " ").split()
        place = rest[1] if verb in ("move", "clean") else ""
        verb = "put" if verb == "move" else verb
        assert subgoal_text(verb, obj, place) == abstract_command(command)


def _dagger_episode(table: TextTable, expert_subgoals: list[str]):
    """The agent's pick-two trajectory DEMO[:6] (it tried to take a pen at step 4, where the
    expert went to the drawer), relabelled with the expert's commands."""
    from agentic_rl.data.text_episodes import expert_relabelled

    episode = _demo_episode(table, DEMO[:6])
    experts = [c for c, _ in DEMO[:4]] + ["go to drawer 1", "go to drawer 1"]
    episode.expert_command = table.ids(experts)
    episode.expert_subgoal = table.ids(expert_subgoals)
    return expert_relabelled(episode, table)


def test_dagger_labels_each_decision_with_the_experts_subgoal_there():
    table = TextTable(_HashEncoder())
    pursued = (["take newspaper"] * 2 + ["put newspaper in sofa"] * 2 + ["take newspaper"] * 2)
    relabelled = _dagger_episode(table, pursued)
    assert table.texts[relabelled.commands[4, relabelled.action[4]]] == "go to drawer 1"
    batch, labels = dagger_decisions(table, [relabelled], period=10)
    # the decisions the envs' Manager made: the start, after the take and after the move; the
    # agent's own commands (not the expert's) decide them and feed the Manager's inputs
    assert len(labels) == 3 and batch.total.tolist() == [0, 1, 2]
    inputs = manager_inputs(TASK, [])
    assert [inputs.candidates[i] for i in labels] == [
        "take newspaper", "put newspaper in sofa", "take newspaper"]
    # with a period of 1 every step is a decision; labels off the candidates are dropped
    odd = _dagger_episode(table, ["", "use lamp"] + pursued[2:])
    assert len(dagger_decisions(table, [odd], period=1)[1]) == 4
    assert dagger_decisions(table, [_demo_episode(table)], period=10) is None  # no labels


def test_the_trainer_adds_dagger_decisions_once_and_as_a_resumed_run_does():
    table = TextTable(_HashEncoder())
    pursued = (["take newspaper"] * 2 + ["put newspaper in sofa"] * 2 + ["take newspaper"] * 2)
    labelled = [_dagger_episode(table, pursued)]

    def trainer(dagger: bool) -> LearnedManagerTrainer:
        torch.manual_seed(0)
        out = LearnedManagerTrainer(TextManager(table.dim, 32), table, 3e-3, 10, dagger)
        out.set_demos([_demo_episode(table)])
        return out

    growing, demos = trainer(True), 4
    assert len(growing.labels) == demos
    growing.absorb(labelled[:1])
    assert len(growing.labels) == demos + 3
    labelled.append(_dagger_episode(table, pursued))  # the storage's list grows
    growing.absorb(labelled)
    metrics = growing.imitation_step(torch.Generator().manual_seed(0))
    assert metrics["train/manager_examples"] == demos + 6 and growing.absorbed == 2
    growing.absorb(labelled)
    assert len(growing.labels) == demos + 6  # nothing added twice
    resumed = trainer(True)
    resumed.absorb(labelled)  # all at once
    assert torch.equal(resumed.labels, growing.labels)
    assert torch.equal(resumed.decisions.candidates, growing.decisions.candidates)
    off = trainer(False)
    off.absorb(labelled)
    assert len(off.labels) == demos


def test_manager_dagger_is_a_learned_manager_key():
    with pytest.raises(ValueError, match="no network"):
        ManagerConfig(planner="expert_plan", dagger=False)

"""Templated text subgoals for ALFWorld-like tasks: what a learned Manager chooses from.

A subgoal is a command with its instance numbers and its location dropped ("take apple 1 from
countertop 2" -> ``take apple``, "move apple 1 to fridge 1" -> ``put apple in fridge``). The
candidates of an episode are built from the task text (every template over its content words)
plus the abstract form of every command the agent has issued that names a task word. A subgoal
is *completed* when a command of that abstract form was issued and the game did not answer
"Nothing happens.". Pure functions: the Manager at run time and the labels cut from expert
demonstrations read the same features, so they cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Iterable, Sequence

from agentic_rl.data.text_table import FUNCTION_WORDS

# Words of task texts that name no object or place: the text table's function words and the
# task templates' verbs and adjectives.
TASK_FUNCTION_WORDS = FUNCTION_WORDS | frozenset(
    "them put find look examine place heat hot cool cold clean cleaned heated cooled "
    "turn using by light".split())
# ALFWorld's appliances: the PDDL domain heats in a microwave, cools in a fridge and cleans in a
# sink basin, so these templates exist before the agent has seen the appliance.
APPLIANCE_TEMPLATES = (("heat", "microwave"), ("cool", "fridge"), ("clean", "sinkbasin"))
NOTHING_HAPPENS = "nothing happens"

_PATTERNS = (
    (re.compile(r"^take (\w+) \d+ from \w+ \d+$"), "take {0}"),
    (re.compile(r"^move (\w+) \d+ to (\w+) \d+$"), "put {0} in {1}"),
    (re.compile(r"^(heat|cool|clean) (\w+) \d+ with (\w+) \d+$"), "{0} {1} with {2}"),
    (re.compile(r"^use (\w+) \d+$"), "use {0}"),
)


def abstract_command(command: str) -> str | None:
    """The subgoal a command completes (None for moves, looks, opening, ...)."""
    command = command.strip().lower()
    for pattern, template in _PATTERNS:
        found = pattern.match(command)
        if found:
            return template.format(*found.groups())
    return None


def subgoal_text(verb: str, obj: str, place: str = "") -> str:
    """The subgoal ``(verb, object, place)`` (an expert's, as
    ``envs.alfworld.expert.expert_subgoal`` gives it) in the form of the command completing it:
    ``("put", "apple", "fridge")`` -> ``put apple in fridge``."""
    if verb == "put":
        return f"put {obj} in {place}"
    if verb in ("heat", "cool", "clean"):
        return f"{verb} {obj} with {place}"
    return f"{verb} {obj}"


def task_words(task: str) -> list[str]:
    """Content words of a task text, in order, without repeats."""
    words = re.findall("[a-z]+", task.lower())
    return list(dict.fromkeys(w for w in words if w not in TASK_FUNCTION_WORDS))


def template_subgoals(task: str) -> list[str]:
    """Every template over the task's content words (the candidates before any command)."""
    words = task_words(task)
    out = [f"take {w}" for w in words]
    out += [f"put {w} in {v}" for w in words for v in words if v != w]
    out += [f"{verb} {w} with {appliance}" for verb, appliance in APPLIANCE_TEMPLATES
            for w in words]
    out += [f"use {w}" for w in words]
    return out


def completed(command: str, feedback: str) -> str | None:
    """The subgoal a step completed: the command's abstract form unless nothing happened."""
    subgoal = abstract_command(command)
    if subgoal is None or feedback.strip().lower().startswith(NOTHING_HAPPENS):
        return None
    return subgoal


@dataclasses.dataclass(frozen=True)
class ManagerInputs:
    """What the Manager sees at a decision.

    Attributes:
        candidates: K subgoal texts (templates first, then completed off-template subgoals).
        counts: ``[K]`` how often each candidate was completed so far this episode.
        total: how many subgoals were completed so far.
        last: the last completed subgoal ("" before any).
        held: ``[K]`` whether the agent carries the thing each candidate acts on (its second
            word, named in the inventory text).
    """

    candidates: tuple[str, ...]
    counts: tuple[int, ...]
    total: int
    last: str
    held: tuple[bool, ...] = ()


def manager_inputs(task: str, trajectory: Iterable[tuple[str, str]],
                   inventory: str = "") -> ManagerInputs:
    """The Manager's inputs after the ``(command, feedback)`` steps of an episode so far, with
    the current ``inventory`` text."""
    words = set(task_words(task))
    done = [s for s in (completed(c, f) for c, f in trajectory) if s is not None]
    candidates = list(dict.fromkeys(template_subgoals(task)))
    extra = [s for s in done if s not in candidates and words & set(s.split()[1:])]
    candidates += list(dict.fromkeys(extra))
    counts = tuple(done.count(c) for c in candidates)
    carried = set(re.findall("[a-z]+", inventory.lower()))
    held = tuple(c.split()[1] in carried for c in candidates)
    return ManagerInputs(tuple(candidates), counts, len(done), done[-1] if done else "", held)


def hindsight_subgoals(commands: Sequence[str], feedbacks: Sequence[str]) -> list[str]:
    """Per step of a demonstration, the subgoal in force under a perfect Manager: the next
    subgoal the episode completes (at this step or later; "" after the last one).

    Args:
        commands: the L commands issued.
        feedbacks: the L observations that answered them.
    """
    out, upcoming = [""] * len(commands), ""
    for t in range(len(commands) - 1, -1, -1):
        upcoming = completed(commands[t], feedbacks[t]) or upcoming
        out[t] = upcoming
    return out


def decision_points(task: str, commands: Sequence[str], feedbacks: Sequence[str],
                    inventories: Sequence[str] | None = None
                    ) -> list[tuple[int, ManagerInputs, int]]:
    """The Manager's imitation examples in one demonstration: at the start and after every
    completed subgoal, ``(step, inputs, index of the next completed subgoal)``; decisions whose
    next subgoal is not a candidate are dropped. ``inventories``: the inventory text at each
    step (default: carrying nothing)."""
    examples = []
    steps = [0] + [t + 1 for t in range(len(commands))
                   if completed(commands[t], feedbacks[t]) is not None]
    upcoming = hindsight_subgoals(commands, feedbacks)
    for step in steps:
        if step >= len(commands) or not upcoming[step]:
            continue
        inputs = manager_inputs(task, zip(commands[:step], feedbacks[:step]),
                                inventories[step] if inventories else "")
        if upcoming[step] in inputs.candidates:
            examples.append((step, inputs, inputs.candidates.index(upcoming[step])))
    return examples


def decision_steps(commands: Sequence[str], feedbacks: Sequence[str], period: int) -> list[int]:
    """The steps at which a templated-subgoal Manager chose (``collect.text_inputs``'s rule
    with ``LearnedTextManager.reached``): the first step, every step after one that completed
    a subgoal, and every step ``period`` steps after the last choice.

    Args:
        commands, feedbacks: the episode's L steps (feedback: the observation that answered).
        period: the Manager's period.
    """
    steps, age = [0], 0
    for t in range(1, len(commands)):
        age += 1
        if completed(commands[t - 1], feedbacks[t - 1]) is not None or age >= period:
            steps.append(t)
            age = 0
    return steps


def period_outcomes(commands: Sequence[str], feedbacks: Sequence[str], subgoals: Sequence[str],
                    period: int) -> tuple[list[bool], list[bool]]:
    """Per step, whether it is the last step of its Manager period, and whether that period
    ends with its own subgoal completed (the label a success predictor learns).

    Args:
        commands, feedbacks: the episode's L steps.
        subgoals: the subgoal in force at each step.
        period: the Manager's period.

    Returns:
        ``(ends_period [L], period_succeeds [L])``.
    """
    starts = decision_steps(commands, feedbacks, period) + [len(commands)]
    ends, succeeds = [False] * len(commands), [False] * len(commands)
    for start, stop in zip(starts[:-1], starts[1:]):
        ends[stop - 1] = True
        done = completed(commands[stop - 1], feedbacks[stop - 1]) == subgoals[start] != ""
        succeeds[start:stop] = [done] * (stop - start)
    return ends, succeeds

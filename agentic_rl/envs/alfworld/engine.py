"""The ALFWorld text engine: TextWorld's PDDL environment, stock or fast, with ALFWorld wrappers.

:class:`FastPddlEnv` is TextWorld's ``PddlEnv`` with the same observable behaviour (feedback,
admissible commands, score, done, facts) but:

* text generation through :class:`~agentic_rl.envs.alfworld.textgen.FastDeriver` (memoised
  parses and derivations, no deep copies);
* the PDDL -> SAS translation of a problem cached in memory and on disk
  (:mod:`~agentic_rl.envs.alfworld.sas_cache`), the planner's SAS made only when a plan is
  requested;
* parsed game logic cached per process; a game grammar that differs from an already parsed one
  only by its task text reuses that parse with its own task rule.
"""

from __future__ import annotations

import collections
import copy
import functools
import json
from typing import Any

from agentic_rl.envs.alfworld.install import ensure_alfworld_data_env

ensure_alfworld_data_env()

import textworld  # noqa: E402
import textworld.envs.pddl.logic as pddl_logic  # noqa: E402
from textworld.envs.pddl import PddlEnv  # noqa: E402
from textworld.envs.pddl.textgen import ContextSensitiveGrammar  # noqa: E402

from agentic_rl.envs.alfworld import sas_cache  # noqa: E402
from agentic_rl.envs.alfworld.textgen import FactIndex, FastDeriver  # noqa: E402

_TASK_PREFIX = '"rhs": "Your task is to: '


_LOGIC = sas_cache.LRU()
_derivers_lru = sas_cache.LRU
_digest = sas_cache.digest


def _split_task(grammar: str) -> tuple[str, str | None]:
    """Return (grammar with the task text replaced by a placeholder, task rule rhs or None)."""
    start = grammar.find(_TASK_PREFIX)
    end = grammar.find('."', start + len(_TASK_PREFIX)) if start >= 0 else -1
    if start < 0 or end < 0 or grammar.find(_TASK_PREFIX, start + 1) >= 0:
        return grammar, None
    task_rhs = grammar[start + len('"rhs": '):end + 2]
    skeleton = grammar[:start] + _TASK_PREFIX + 'UNKNOWN GOAL."' + grammar[end + 2:]
    return skeleton, task_rhs


def load_logic(domain: str, grammar: str) -> pddl_logic.GameLogic:
    """Parse (or reuse) the game logic for a domain and grammar.

    Args:
        domain: PDDL domain text.
        grammar: TextWorld grammar (``.twl2``) text.

    Returns:
        A ``GameLogic`` equal to ``GameLogic(domain, grammar)``.
    """
    skeleton, task_rhs = _split_task(grammar)
    base = _LOGIC.get_or(_digest(domain, skeleton),
                         lambda: pddl_logic.GameLogic(domain=domain, grammar=skeleton))
    if task_rhs is None or skeleton == grammar:
        return base
    task_rule = {"task": [{"rhs": json.loads(task_rhs)}]}
    task_rules = ContextSensitiveGrammar.parse(json.dumps(task_rule))
    logic = copy.copy(base)
    logic.grammar = ContextSensitiveGrammar()
    logic.grammar._rules.update({name: list(rules) for name, rules in base.grammar._rules.items()})
    logic.grammar._rules["task"] = task_rules._rules["task"]
    return logic


class FastPddlState(pddl_logic.PddlState):
    """``PddlState`` whose PDDL -> SAS translations are cached and the planner's made on demand."""

    def __init__(self, downward_lib: Any, pddl_problem: str, logic: pddl_logic.GameLogic) -> None:
        self._facts = collections.defaultdict(set)
        self._vars_by_name = {}
        self._vars_by_type = collections.defaultdict(set)
        self._var_counts = collections.Counter()
        self._logic = logic
        self.downward_lib = downward_lib
        self.pddl_problem = pddl_problem
        task = sas_cache.translation(logic.domain, pddl_problem)
        self.sas = task.sas
        self._replan_loaded = False
        self._actions = task.actions
        for name, supertypes in task.types:
            try:
                self._logic.types.add(textworld.logic.Type(name, supertypes))
            except ValueError:
                pass
        self.downward_lib.load_sas(self.sas.encode("utf-8"))
        self.name2type = task.name2type
        Proposition, Variable = textworld.logic.Proposition, textworld.logic.Variable
        self.add_facts(Proposition(name, [Variable(a, t) for a, t in args])
                       for name, args in task.init)
        atoms = (pddl_logic.Atom * self.downward_lib.get_state_size())()
        self.downward_lib.get_state(atoms)
        facts = (atom.get_fact(self.name2type) for atom in atoms)
        self.add_facts(fact for fact in facts if not fact.is_negation)

    def replan(self, infos: dict) -> list[str]:
        """Plan from the current state with Fast Downward (translating the planner's SAS once)."""
        if not self._replan_loaded:
            sas = sas_cache.replan_sas(self._logic.domain, self.pddl_problem)
            self.downward_lib.load_sas_replan(sas.encode("utf-8"))
            self._replan_loaded = True
        return super().replan(infos)


class FastPddlEnv(PddlEnv):
    """TextWorld's ``PddlEnv`` with memoised text generation; same observable behaviour."""

    def __init__(self, infos: textworld.EnvInfos | None = None) -> None:
        super().__init__(infos)
        self._derivers = _derivers_lru(maxsize=16)  # per-game memo of derived texts
        self._deriver: FastDeriver | None = None

    def load(self, filename_or_data: Any) -> None:
        """Load a game file (path) or game dict."""
        try:
            with open(filename_or_data) as handle:
                data = json.load(handle)
            self._game_file = filename_or_data
        except TypeError:
            data = filename_or_data
            self._game_file = None
        self._game_data = data
        self.walkthrough = data.get("walkthrough", None)
        self._logic = load_logic(data["pddl_domain"], data["grammar"])
        self._pddl_state = FastPddlState(self.downward_lib, data["pddl_problem"], self._logic)
        self._entity_infos = self._get_entity_infos()
        self._game_key = _digest(data["pddl_domain"], data["grammar"], data["pddl_problem"])
        self._deriver = None

    def _readable_fact(self, fact: textworld.logic.Proposition) -> textworld.logic.Proposition:
        # Entity names are fixed once a game is loaded and named; the cache lives with the deriver.
        cache = self._get_deriver().readable_facts
        readable = cache.get(fact)
        if readable is None:
            readable = cache[fact] = self._get_human_readable_fact(fact)
        return readable

    def _context(self, mapping: dict) -> dict:
        return {
            "state": self._pddl_state,
            "facts": list(self._pddl_state.facts),
            "variables": {ph.name: self._entity_infos[var.name] for ph, var in mapping.items()},
            "mapping": mapping,
            "entity_infos": self._entity_infos,
        }

    def _get_deriver(self) -> FastDeriver:
        # Entity names are set by wrappers after load(), so the deriver is keyed on them here.
        if self._deriver is None:
            names = tuple(sorted((k, info.name) for k, info in self._entity_infos.items()))
            key = (self._game_key, names)
            self._deriver = self._derivers.get_or(key, lambda: FastDeriver(self._logic.grammar))
        return self._deriver

    def _derive(self, start: str, mapping: dict, facts: FactIndex) -> str:
        deriver = self._get_deriver()
        context = {"state": self._pddl_state, "facts": None, "variables": {},
                   "mapping": mapping, "entity_infos": self._entity_infos}
        if deriver.dependencies(start) is None:
            context = self._context(mapping)
        else:
            context["variables"] = {ph.name: self._entity_infos[var.name]
                                    for ph, var in mapping.items()}
        return deriver.derive(start, context, facts)

    def _gather_infos(self) -> None:
        facts = FactIndex(self._pddl_state)
        templates = set(action.template for action in self._logic.actions.values())
        self.state["command_templates"] = sorted(templates)
        self.state["won"] = self._pddl_state.check_goal()
        self.state["lost"] = False
        self.state["_entity_infos"] = dict(self._entity_infos)
        self.state["_facts"] = list(self._pddl_state.facts)
        if self.request_infos.facts:
            self.state["facts"] = list(map(self._readable_fact, self.state["_facts"]))
        self.state["last_action"] = None
        self.state["_last_action"] = self._last_action
        self.state["_valid_actions"] = list(self._pddl_state.all_applicable_actions())
        mapping = {k: info.name for k, info in self._entity_infos.items()}
        commands = []
        for action in self.state["_valid_actions"]:
            action.command_template = self._derive(action.command_template, action.mapping, facts)
            commands.append(action.format_command(mapping))
        self.state["_valid_commands"] = commands
        self.state["admissible_commands"] = sorted(set(commands))
        if self.request_infos.moves:
            self.state["moves"] = self._moves
        if self.request_infos.policy_commands:
            self.state["policy_commands"] = self._pddl_state.replan(self._entity_infos)

    def reset(self) -> textworld.GameState:
        """Start the loaded game again; returns the initial game state."""
        self._pddl_state = FastPddlState(self.downward_lib, self._game_data["pddl_problem"],
                                         self._logic)
        self.prev_state = None
        self.state = textworld.GameState()
        self._last_action = None
        self._moves = 0
        self.state.feedback = self._derive("#intro#", {}, FactIndex(self._pddl_state))
        self.state.raw = self.state.feedback
        self._gather_infos()
        if "walkthrough" in self.request_infos.extras:
            self.state["extra.walkthrough"] = (self.walkthrough
                                               or self._pddl_state.replan(self._entity_infos))
        return self.state

    def step(self, command: str) -> tuple[textworld.GameState, int, bool]:
        """Apply a command; unknown commands leave the game unchanged ("Nothing happens.")."""
        command = command.strip()
        self.prev_state = self.state
        self.state = textworld.GameState()
        self.state.last_command = command
        self._last_action = None
        try:
            index = self.prev_state["_valid_commands"].index(command)
        except ValueError:
            self.state.feedback = "Nothing happens."
        else:
            self._last_action = self.prev_state["_valid_actions"][index]
            self._pddl_state.apply(self._last_action)
            self.state.feedback = self._derive(self._last_action.feedback_rule,
                                               self._last_action.mapping,
                                               FactIndex(self._pddl_state))
            self._moves += 1
        self.state.raw = self.state.feedback
        self._gather_infos()
        if "walkthrough" in self.request_infos.extras:
            self.state["extra.walkthrough"] = self.prev_state["extra.walkthrough"]
        self.state["score"] = 1 if self.state["won"] else 0
        self.state["done"] = self.state["won"] or self.state["lost"]
        return self.state, self.state["score"], self.state["done"]


def inventory_text(env: textworld.Environment) -> str:
    """What the agent carries, as the game's ``inventory`` command would say (state unchanged)."""
    engine = env
    while hasattr(engine, "_wrapped_env"):
        engine = engine._wrapped_env
    if isinstance(engine, FastPddlEnv):
        return engine._derive("#inventory.feedback#", {}, FactIndex(engine._pddl_state))
    context = {"state": engine._pddl_state, "facts": list(engine._pddl_state.facts),
               "variables": {}, "mapping": {}, "entity_infos": engine._entity_infos}
    return engine._logic.grammar.derive("#inventory.feedback#", context)


def make_engine(fast: bool = True, infos: textworld.EnvInfos | None = None,
                expert: bool = False, domain_randomization: bool = False) -> textworld.Environment:
    """Build ALFWorld's TextWorld environment stack (engine + demangler + infos [+ expert]).

    Args:
        fast: use :class:`FastPddlEnv` (True) or TextWorld's stock ``PddlEnv`` (False).
        infos: what the game state should carry (default: won, admissible commands, facts,
            inventory and the game file).
        expert: add ALFWorld's handcoded expert (``extra.expert_plan`` in the state).
        domain_randomization: shuffle the numbering of same-named objects (ALFWorld training).

    Returns:
        A TextWorld environment: ``load(game_file)``, ``reset()``, ``step(command)``.
    """
    from alfworld.agents.environment.alfred_tw_env import (
        AlfredDemangler,
        AlfredExpert,
        AlfredInfos,
    )

    infos = infos or textworld.EnvInfos(won=True, admissible_commands=True, facts=True,
                                        score=True, extras=["gamefile"])
    engine = FastPddlEnv(infos) if fast else PddlEnv(infos)
    env = AlfredInfos(AlfredDemangler(engine, shuffle=domain_randomization))
    if expert:
        env = _guarded(AlfredExpert)(env)
    return env


@functools.cache
def _guarded(expert_class: type) -> type:
    """ALFWorld's expert wrapper whose handcoded expert has no command (instead of crashing
    the step) on states it cannot handle: some states an agent reaches, though never the expert
    itself, make it ``random.choice`` from an empty list. Its handcoded agent is
    :func:`~agentic_rl.envs.alfworld.expert.handcoded_agent_class` (moves tracked as puts)."""
    from agentic_rl.envs.alfworld.expert import handcoded_agent_class

    class GuardedAlfredExpert(expert_class):
        def load(self, gamefile: str) -> None:
            super().load(gamefile)
            self._handcoded_expert = handcoded_agent_class()(max_steps=200)

        def _gather_infos(self) -> None:
            try:
                super()._gather_infos()
            except (IndexError, KeyError, ValueError):
                self.state["extra.expert_plan"] = []

    return GuardedAlfredExpert

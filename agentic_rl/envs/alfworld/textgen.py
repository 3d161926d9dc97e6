"""Fast, output-identical replacement for TextWorld's PDDL text generation.

TextWorld's ``ContextSensitiveGrammar.derive`` re-parses its start string with tatsu on every
call, re-parses every rule condition and query, and deep-copies its context for every symbol. The
ALFWorld engine calls it for every admissible command on every step. :class:`FastDeriver`
performs the same derivation (same rule choice, same query order, same ``eval`` of expressions)
with parses memoised by text and without the deep copies, and memoises whole derivations keyed
on exactly what they read: the start string, the action's mapping and the facts of the
predicates its conditions and queries can reach.

Query results depend only on the *content* of those facts, because TextWorld iterates facts in
sorted order (``State._all_applicable_assignments``), so a key made of fact sets is exact.
"""

from __future__ import annotations

import builtins
import functools
import re
from typing import Any

import textworld.envs.pddl.textgen as tw_textgen
from textworld.envs.pddl.textgen import (
    ConditionalSymbol,
    EvalSymbol,
    ListSymbol,
    NonterminalSymbol,
    TerminalSymbol,
)
from textworld.logic import Rule

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_SAFE_ATTRIBUTES = frozenset({"name", "indefinite", "definite", "id", "type"})


@functools.lru_cache(maxsize=4096)
def parse_symbols(text: str) -> tuple:
    """Parse a grammar string into TextWorld symbols (memoised; callers must not mutate)."""
    return tuple(tw_textgen._parse_and_convert(text, rule_name="symbols"))


@functools.lru_cache(maxsize=4096)
def parse_query(text: str) -> Rule:
    """Parse a conjunctive query such as ``inreceptacle(o:object, r:receptacle)`` (memoised)."""
    return Rule.parse_conjunctive_query(text)


def _new_context(context: dict, mapping: dict) -> dict:
    variables = dict(context["variables"])
    variables.update({ph.name: context["entity_infos"][var.name] for ph, var in mapping.items()})
    merged = dict(context["mapping"])
    merged.update(mapping)
    return {"state": context["state"], "facts": context["facts"], "variables": variables,
            "mapping": merged, "entity_infos": context["entity_infos"]}


def _query(expression: str, context: dict) -> list[dict]:
    rule = parse_query(expression)
    return [_new_context(context, mapping)
            for mapping in context["state"].all_assignments(rule, context["mapping"])]


class FastDeriver:
    """Derives text from a TextWorld ``ContextSensitiveGrammar`` exactly as TextWorld does.

    Args:
        grammar: the game's parsed grammar (``GameLogic.grammar``).
    """

    def __init__(self, grammar: Any) -> None:
        self.grammar = grammar
        self._memo: dict[tuple, str] = {}
        self._dependencies: dict[str, Reads | None] = {}
        self.readable_facts: dict = {}  # fact -> fact with entity names (used by the engine)

    # ----------------------------------------------------------------- derivation (no memo)
    def _applicable_rules(self, symbol_name: str, context: dict) -> list:
        rules = self.grammar._rules.get(symbol_name)
        if not rules:
            raise tw_textgen.CSGUnknownSymbolError(symbol_name)
        applicable = []
        for rule in rules:
            if not rule.condition:
                applicable.append(rule)
                continue
            query = parse_query(rule.condition)
            assignments = context["state"].all_assignments(query, context["mapping"])
            if next(iter(assignments), None) is not None:
                applicable.append(rule)
        return applicable

    @staticmethod
    def _eval(symbol: EvalSymbol, context: dict) -> Any:
        scope = dict(context["variables"])
        scope.pop("value", None)
        scope.update({"self": symbol, "context": context})
        return eval(symbol.expression, vars(tw_textgen), scope)  # noqa: S307 (grammar code)

    def _expand(self, symbol: Any, context: dict) -> list[tuple[Any, dict]]:
        """One derivation step of a non-terminal symbol, as (symbol, context) pairs."""
        if isinstance(symbol, NonterminalSymbol):
            rule = self._applicable_rules(str(symbol), context)[0]
            return [(child, context) for child in rule.rhs]
        if isinstance(symbol, ConditionalSymbol):
            if len(context) == 0:
                raise ValueError("Empty context")
            contexts = _query(symbol.given, context) if symbol.given else [context]
            return [(symbol.expression, ctx) for ctx in contexts]
        if isinstance(symbol, EvalSymbol):
            return [(TerminalSymbol(self._eval(symbol, context)), context)]
        if isinstance(symbol, ListSymbol):
            items = self._expand(symbol.symbol, context)
            if len(items) == 0:
                return [(NonterminalSymbol("list_empty"), context)]
            if len(items) == 1:
                return items
            separator = (NonterminalSymbol("list_separator"), context)
            result = []
            for item in items[:-1]:
                result += [item, separator]
            result[-1] = (NonterminalSymbol("list_last_separator"), context)
            return result + [items[-1]]
        raise TypeError(f"Unknown symbol: {type(symbol)}")

    def derive_uncached(self, start: str, context: dict) -> str:
        """Derive ``start`` in ``context`` (same result as ``grammar.derive(start, context)``)."""
        stack = [(symbol, context) for symbol in reversed(parse_symbols(start))]
        derived = []
        while stack:
            symbol, ctx = stack.pop()
            if isinstance(symbol, TerminalSymbol):
                derived.append(str(symbol.symbol))
            else:
                stack += reversed(self._expand(symbol, ctx))
        return "".join(derived)

    # ----------------------------------------------------------------- memoisation
    def _collect(self, symbol: Any, reads: "Reads", seen: set[str]) -> bool:
        """Add what ``symbol`` can read to ``reads``; False if it cannot be analysed."""
        if isinstance(symbol, TerminalSymbol):
            return True
        if isinstance(symbol, EvalSymbol):
            identifiers = set(_IDENTIFIER.findall(symbol.expression)) - _SAFE_ATTRIBUTES
            reads.variables.update(identifiers)
            return not identifiers & _unsafe_names()
        if isinstance(symbol, ListSymbol):
            return self._collect(symbol.symbol, reads, seen)
        if isinstance(symbol, ConditionalSymbol):
            if symbol.given:
                reads.add_query(parse_query(symbol.given))
            return self._collect(symbol.expression, reads, seen)
        if isinstance(symbol, NonterminalSymbol):
            name = str(symbol)
            if name in seen:
                return True
            seen.add(name)
            for rule in self.grammar._rules.get(name, []):
                if rule.condition:
                    reads.add_query(parse_query(rule.condition))
                if not all(self._collect(child, reads, seen) for child in rule.rhs):
                    return False
            return True
        return False

    def dependencies(self, start: str) -> "Reads | None":
        """What a derivation of ``start`` can read, or None if it cannot be memoised."""
        if start not in self._dependencies:
            reads, seen = Reads(), set()
            ok = all(self._collect(s, reads, seen) for s in parse_symbols(start))
            self._dependencies[start] = reads if ok else None
        return self._dependencies[start]

    def derive(self, start: str, context: dict, facts_by_name: "FactIndex") -> str:
        """Derive ``start`` in ``context``, memoised on the start, mapping and relevant facts.

        The key holds the facts of every predicate the derivation's queries and conditions can
        reach, and the mapping entries it can read. When every query placeholder is bound by the
        mapping, entries of other placeholders cannot matter (TextWorld only consults the set of
        used variables for unbound placeholders) and are left out of the key; otherwise the
        whole mapping is in it.

        Args:
            start: grammar string (a command template or a feedback rule such as
                ``#GotoLocation.feedback#``).
            context: TextWorld derivation context (state, facts, variables, mapping, entities).
            facts_by_name: the current state's facts grouped by predicate name.

        Returns:
            The derived text.
        """
        reads = self.dependencies(start)
        if reads is None:
            return self.derive_uncached(start, context)
        items = context["mapping"].items()
        bound = {(ph.name, ph.type) for ph, _ in items}
        if reads.placeholders <= bound:
            relevant = reads.variables | {name for name, _ in reads.placeholders}
            items = [(ph, var) for ph, var in items if ph.name in relevant]
        mapping = sorted((ph.name, ph.type, var.name, var.type) for ph, var in items)
        key = (start, tuple(mapping), tuple(facts_by_name.get(name) for name in reads.predicates))
        text = self._memo.get(key)
        if text is None:
            text = self.derive_uncached(start, context)
            self._memo[key] = text
        return text


class Reads:
    """What a derivation can read: predicates, query placeholders and eval variable names."""

    def __init__(self) -> None:
        self._predicates: set[str] = set()
        self.placeholders: set[tuple[str, str]] = set()
        self.variables: set[str] = set()

    def add_query(self, rule: Rule) -> None:
        """Record a condition or query (its predicates and placeholders)."""
        for predicate in rule.preconditions:
            self._predicates.add(predicate.name)
            self.placeholders.update((ph.name, ph.type) for ph in predicate.parameters)

    @property
    def predicates(self) -> tuple[str, ...]:
        """Predicate names, sorted."""
        return tuple(sorted(self._predicates))


@functools.lru_cache(maxsize=1)
def _unsafe_names() -> frozenset[str]:
    """Names an eval expression could use to read more than its placeholders' entities.

    Any other identifier in an expression is a placeholder variable (fixed by the mapping and
    the queried facts, which are part of the memo key) or raises NameError in both engines.
    """
    return frozenset(vars(tw_textgen)) | frozenset(dir(builtins)) | {"self", "context", "value"}


class FactIndex:
    """The facts of one state grouped by predicate name, as frozensets (built lazily).

    Args:
        state: a TextWorld ``State`` (``PddlState``).
    """

    def __init__(self, state: Any) -> None:
        self._state = state
        self._by_name: dict[str, frozenset] = {}

    def get(self, name: str) -> frozenset:
        """All facts of predicate ``name`` in the state."""
        if name not in self._by_name:
            facts = [fact for signature, fact_set in self._state._facts.items()
                     if signature.name == name for fact in fact_set]
            self._by_name[name] = frozenset(facts)
        return self._by_name[name]

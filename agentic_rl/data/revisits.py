"""Which commands would take the text agent back to a state it has already been in: the
"revisit" bit of the history buckets (``data.text_table.history_bucket``), which a policy with
``avoid_revisits`` masks out (``nets.text``).

ALFWorld is deterministic, so the state after a command is fixed by the state before it. The
agent's state is its place (the last "go to P") and the world (what is where, open, held, hot,
...). Only commands whose verb changes nothing ("go to", "look", "inventory", "examine",
"help") leave the world as it is, so a counter of the other commands, the world version, is
equal at two steps exactly when the world did not change between them. A command issued again
at the same place and world version therefore leads to a state already visited: the greedy
policy's two-step loops ("go to shelf 1", "go to shelf 2", "go to shelf 1", ... until the step
limit, every lost pick_two episode of a traced seed) are made of such commands. Masking them
costs at most a detour: the place left too early can still be reached from any other place.
"""

from __future__ import annotations

STILL_VERBS = frozenset({"go", "look", "inventory", "examine", "help"})


class RevisitMemory:
    """Per-episode record of the (world version, place, command) triples already issued.

    Attributes:
        version: commands so far whose verb is not in :data:`STILL_VERBS`.
        place: the target of the last "go to" (None before the first).
    """

    def __init__(self) -> None:
        self.version = 0
        self.place: str | None = None
        self.issued: set[tuple[int, str | None, str]] = set()

    def update(self, command: str) -> None:
        """Fold in one issued command ("": none, the episode's first step)."""
        if not command:
            return
        self.issued.add((self.version, self.place, command))
        if command.startswith("go to "):
            self.place = command[len("go to "):]
        elif command.split()[0] not in STILL_VERBS:
            self.version += 1

    def revisits(self, commands: list[str]) -> list[bool]:
        """Per command: was it issued before at this place and world version."""
        return [(self.version, self.place, command) in self.issued for command in commands]

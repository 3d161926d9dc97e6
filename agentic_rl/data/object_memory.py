"""Where the text agent has seen the task's objects: a memory built only from its own
commands and the observations they returned, for the "remembered" bit of the history buckets
(``data.text_table.history_bucket``).

A place's contents are what the last "go to P" / "open P" showed ("On the sidetable 1, you see
a alarmclock 2, a alarmclock 1, ..."); a take removes the object from its place and a move puts
it there. Objects the agent itself moved to a place the task names do not count (a pick_two
agent should not be sent back to the first object it already put down); one it put down
anywhere else does (it has to fetch it again). A "go to P" command is flagged when P holds an
object the task names.
The GRU could in principle remember this, but a search that runs 30-50 steps (pick_two's second
object, an object put on the wrong receptacle and searched for again) is where it forgets.
"""

from __future__ import annotations

import re

from agentic_rl.data.text_table import TAKE

_SEEN = re.compile(r"you see (.*)", re.IGNORECASE | re.DOTALL)
_ITEM = re.compile(r"\ban? ([a-z]+ \d+)")
_GO_OR_OPEN = re.compile(r"^(?:go to|open) (.+)$")
_MOVE = re.compile(r"^move (.+) to (.+)$")
_GO = re.compile(r"^go to (.+)$")


def task_words(task: str) -> frozenset[str]:
    """Lower-case words of the task text (object names are single words: "alarmclock")."""
    return frozenset(re.findall("[a-z]+", task.lower()))


class ObjectMemory:
    """Per-episode memory of which objects were seen at which place.

    Args:
        task: the task text; its words (:func:`task_words`) say which objects and places count.

    Attributes:
        contents: place -> object names ("alarmclock 1") last seen or put there and not taken
            since.
        delivered: objects the agent itself moved to a place the task names.
    """

    def __init__(self, task: str) -> None:
        self.words = task_words(task)
        self.contents: dict[str, set[str]] = {}
        self.delivered: set[str] = set()

    def update(self, command: str, observation: str) -> None:
        """Fold in one step: ``command`` issued, ``observation`` returned ("" command: the
        episode's first observation, which names the places, not their contents)."""
        if found := _GO_OR_OPEN.match(command):
            seen = _SEEN.search(observation)
            if seen:
                self.contents[found[1]] = set(_ITEM.findall(seen[1]))
        elif found := TAKE.match(command):
            self.contents.get(found[2], set()).discard(found[1])
        elif found := _MOVE.match(command):
            self.contents.setdefault(found[2], set()).add(found[1])
            if found[2].split()[0] in self.words:
                self.delivered.add(found[1])

    def remembered(self, commands: list[str]) -> list[bool]:
        """Per command: is it "go to P" for a place P last known to hold an object the task
        names that the agent has not delivered to a place the task names."""
        out = []
        for command in commands:
            found = _GO.match(command)
            items = self.contents.get(found[1], ()) if found else ()
            out.append(any(item.split()[0] in self.words and item not in self.delivered
                           for item in items))
        return out

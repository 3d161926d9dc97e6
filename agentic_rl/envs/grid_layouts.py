"""Grid-world layouts: the maps as strings, and their parsing into walls, start, goal, key, door.

``#`` wall, ``.``/space floor, ``S`` start, ``G`` goal, ``K`` key, ``D`` door. Actions move by
``DELTAS``: ``0 up, 1 right, 2 down, 3 left``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DELTAS = np.array([[-1, 0], [0, 1], [1, 0], [0, -1]], dtype=np.int64)

LAYOUTS: dict[str, list[str]] = {
    "fourrooms": [
        "#############",
        "#     #    G#",
        "#     #     #",
        "#           #",
        "#     #     #",
        "#     #     #",
        "## ####     #",
        "#     ### ###",
        "#     #     #",
        "#     #     #",
        "#S          #",
        "#     #     #",
        "#############",
    ],
    # Shortest solution: S -> K (16) -> D (13) -> G (13) = 42 steps.
    "keydoor": [
        "#####################",
        "#K        #         #",
        "#         #         #",
        "#         #         #",
        "#         #         #",
        "#         D         #",
        "#         #         #",
        "#         #         #",
        "#         #         #",
        "#        S#        G#",
        "#####################",
    ],
    # Two 15 x 15 rooms, key and goal away from walls and corners (no wall-following to them);
    # shortest solution: S -> K (13) -> D (19) -> G (18) = 50 steps.
    "keydoor_large": [
        "#################################",
        "#               #               #",
        "#               #               #",
        "#               #               #",
        "#    K          #         G     #",
        "#               #               #",
        "#               #               #",
        "#               #               #",
        "#               #               #",
        "#               #               #",
        "#               #               #",
        "#               #               #",
        "#               D               #",
        "#               #               #",
        "#       S       #               #",
        "#               #               #",
        "#################################",
    ],
}


def open_room(size: int) -> list[str]:
    """An empty ``size x size`` floor surrounded by walls, start top-left, goal bottom-right."""
    if size < 2:
        raise ValueError(f"open room size must be >= 2, got {size}")
    inner = [" " * size for _ in range(size)]
    inner[0] = "S" + inner[0][1:]
    inner[-1] = inner[-1][:-1] + "G"
    return ["#" * (size + 2)] + [f"#{row}#" for row in inner] + ["#" * (size + 2)]


@dataclass(frozen=True)
class GridLayout:
    """A parsed layout: ``walls [H, W]`` bool and the special cells as ``(row, col)``."""

    walls: np.ndarray
    start: tuple[int, int] | None
    goal: tuple[int, int] | None
    key: tuple[int, int] | None
    door: tuple[int, int] | None

    @property
    def shape(self) -> tuple[int, int]:
        return self.walls.shape  # type: ignore[return-value]

    def free_cells(self) -> np.ndarray:
        """Floor cells other than the key and door, ``[F, 2]``."""
        free = ~self.walls
        for cell in (self.key, self.door):
            if cell is not None:
                free[cell] = False
        return np.argwhere(free)


def parse_layout(rows: Sequence[str]) -> GridLayout:
    """Parse a layout; raises ``ValueError`` naming the problem for a malformed map."""
    if not rows or len({len(r) for r in rows}) != 1:
        raise ValueError("layout rows must be non-empty and all of the same length")
    chars = np.array([list(r) for r in rows])
    unknown = set(np.unique(chars)) - set("#. SGKD")
    if unknown:
        raise ValueError(f"unknown layout characters {sorted(unknown)}; use '#. SGKD'")
    walls = chars == "#"
    if not (walls[0].all() and walls[-1].all() and walls[:, 0].all() and walls[:, -1].all()):
        raise ValueError("layout must be enclosed by walls ('#') on every side")

    def find(ch: str) -> tuple[int, int] | None:
        cells = np.argwhere(chars == ch)
        if len(cells) > 1:
            raise ValueError(f"layout has {len(cells)} {ch!r} cells; at most one allowed")
        return (int(cells[0][0]), int(cells[0][1])) if len(cells) else None

    layout = GridLayout(walls, find("S"), find("G"), find("K"), find("D"))
    if (layout.key is None) != (layout.door is None):
        raise ValueError("a layout needs both a key 'K' and a door 'D', or neither")
    return layout


def resolve_layout(layout: str | Sequence[str], size: int) -> GridLayout:
    """``"open"`` (uses ``size``), a name in ``LAYOUTS``, or explicit rows."""
    if isinstance(layout, str):
        if layout == "open":
            return parse_layout(open_room(size))
        if layout not in LAYOUTS:
            choices = ["open", *sorted(LAYOUTS)]
            raise ValueError(f"unknown layout {layout!r}; choose one of {choices}")
        return parse_layout(LAYOUTS[layout])
    return parse_layout(layout)

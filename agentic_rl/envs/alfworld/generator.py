"""Generate ALFWorld-compatible games (no download needed): tests and curricula use them.

Each game is a trial folder ``<out>/<task_type>-<Object>-None-<Receptacle>-<n>/trial_gen_<n>/``
holding ``initial_state.pddl`` (a problem for the shipped ``alfred`` domain), ``traj_data.json``
(task type, ``pddl_params`` the handcoded expert reads, goal text) and a ``game.tw-pddl`` built
with the shipped domain and grammar. Object ids follow ALFRED's mangling
(``Apple_bar__plus_00_dot_50_...``) so ALFWorld's demangler names them ``apple 1``. Every game is
played by Fast Downward's plan before it is written; games the plan does not win are discarded.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from agentic_rl.envs.alfworld.data import TASK_TYPES
from agentic_rl.envs.alfworld.games import build_game

FOOD = ["Apple", "Tomato", "Potato", "Egg", "Lettuce", "Bread"]
DISHES = ["Mug", "Cup", "Bowl", "Plate", "Pan", "Pot"]
UTENSILS = ["Knife", "Fork", "Spoon", "Spatula", "Ladle", "DishSponge"]
ROOMS: dict[str, dict[str, list[str]]] = {
    "kitchen": {
        "objects": FOOD + DISHES + UTENSILS + ["SaltShaker", "PepperShaker", "Kettle"],
        "receptacles": ["CounterTop", "Cabinet", "Drawer", "Fridge", "Microwave", "SinkBasin",
                        "StoveBurner", "DiningTable", "GarbageCan", "Shelf"],
    },
    "bathroom": {
        "objects": ["SoapBar", "SoapBottle", "SprayBottle", "Candle", "Cloth", "ToiletPaper",
                    "HandTowel", "Towel", "DishSponge"],
        "receptacles": ["CounterTop", "Cabinet", "Drawer", "SinkBasin", "Toilet", "Shelf",
                        "GarbageCan"],
    },
    "bedroom": {
        "objects": ["Book", "CellPhone", "Pillow", "Laptop", "AlarmClock", "CD", "Pencil", "Pen",
                    "KeyChain", "CreditCard", "Mug", "Bowl", "DeskLamp"],
        "receptacles": ["Bed", "Desk", "Drawer", "Dresser", "Shelf", "SideTable", "GarbageCan"],
    },
    "livingroom": {
        "objects": ["RemoteControl", "Newspaper", "Pillow", "Laptop", "KeyChain", "CreditCard",
                    "Box", "Statue", "Vase", "Watch", "DeskLamp"],
        "receptacles": ["Sofa", "CoffeeTable", "SideTable", "Shelf", "Drawer", "ArmChair",
                        "GarbageCan", "Dresser"],
    },
}
OPENABLE = {"Cabinet", "Drawer", "Fridge", "Microwave", "Box"}
HEATABLE = set(FOOD) | {"Mug", "Cup", "Bowl", "Plate"}
COOLABLE = set(FOOD) | set(DISHES)
CLEANABLE = set(FOOD) | set(DISHES) | set(UTENSILS) | {"Cloth", "SoapBar"}
RECEPTACLE_OBJECTS = {"Mug", "Cup", "Bowl", "Plate", "Pan", "Pot", "Box"}
NOT_PICKUPABLE = {"DeskLamp"}
LIMITED = {  # receptacles that only hold some object types; the rest hold every room object
    "Fridge": set(FOOD) | set(DISHES), "Microwave": set(FOOD) | {"Mug", "Cup", "Bowl", "Plate"},
    "SinkBasin": set(FOOD) | set(DISHES) | set(UTENSILS) | {"Cloth", "SoapBar", "DishSponge"},
    "StoveBurner": {"Pan", "Pot", "Kettle"}, "Toilet": {"SoapBar", "SprayBottle", "Candle",
                                                      "ToiletPaper", "Cloth"},
    "GarbageCan": set(FOOD) | {"SoapBar", "Cloth", "Pencil", "Pen", "CD", "Newspaper",
                               "CreditCard", "ToiletPaper", "SprayBottle"},
}
_NOT_TARGETS = {"Microwave", "StoveBurner", "SinkBasin"}  # appliances, never the goal receptacle
NEEDED = {"pick_clean_then_place_in_recep": ("SinkBasin", CLEANABLE),
          "pick_heat_then_place_in_recep": ("Microwave", HEATABLE),
          "pick_cool_then_place_in_recep": ("Fridge", COOLABLE)}


def _mangle(name: str, rng: random.Random, suffix: str = "", index: int = 0) -> str:
    """An ALFRED-style id: ``Name|x|y|z[|suffix]`` mangled; ``index`` keeps ids unique."""
    coords = [f"_plus_{index:02d}_dot_{rng.randint(0, 99):02d}"]
    for _ in range(2):
        value = rng.uniform(-3, 3)
        sign = "_plus_" if value >= 0 else "_minus_"
        coords.append(f"{sign}{abs(value):05.2f}".replace(".", "_dot_"))
    return name + "_bar_" + "_bar_".join(coords) + suffix


def can_contain(receptacle: str, obj: str, room_objects: list[str]) -> bool:
    """Whether a receptacle type can hold an object type in the generated worlds."""
    if obj == "DeskLamp":
        return receptacle in {"Desk", "SideTable", "Dresser", "Shelf"}
    return obj in LIMITED.get(receptacle, set(room_objects))


@dataclass
class GameSpec:
    """What one generated game contains."""

    task_type: str
    room: str
    target: str
    parent: str
    toggle: str = ""
    receptacles: list[str] = field(default_factory=list)
    objects: list[tuple[str, str]] = field(default_factory=list)  # (object type, receptacle id)


def _choose_task(task_type: str, room: str, rng: random.Random) -> tuple[str, str, str] | None:
    spec = ROOMS[room]
    objects = [o for o in spec["objects"] if o not in NOT_PICKUPABLE]
    receptacles = list(spec["receptacles"])
    toggle = ""
    if task_type in NEEDED:
        appliance, allowed = NEEDED[task_type]
        if appliance not in receptacles:
            return None
        objects = [o for o in objects if o in allowed]
    if task_type == "look_at_obj_in_light":
        if "DeskLamp" not in spec["objects"]:
            return None
        toggle = "DeskLamp"
    pairs = [(o, r) for o in objects for r in receptacles
             if can_contain(r, o, spec["objects"]) and r not in _NOT_TARGETS
             and (task_type == "pick_and_place_simple" or r != "GarbageCan")]
    if not pairs:
        return None
    target, parent = rng.choice(pairs)
    return target, parent, toggle


def sample_spec(task_type: str, room: str, rng: random.Random,
                max_receptacles: int = 12) -> GameSpec | None:
    """Draw a room layout that contains what ``task_type`` needs (None if the room cannot)."""
    chosen = _choose_task(task_type, room, rng)
    if chosen is None:
        return None
    target, parent, toggle = chosen
    spec = ROOMS[room]
    required = {parent} | ({NEEDED[task_type][0]} if task_type in NEEDED else set())
    types = sorted(required) + rng.sample(sorted(set(spec["receptacles"]) - required),
                                          k=min(len(set(spec["receptacles"]) - required),
                                                max(0, max_receptacles - len(required))))
    receptacle_types = []
    for rtype in types:
        receptacle_types += [rtype] * (rng.randint(1, 3) if rtype in {"Drawer", "Cabinet"} else 1)
    receptacle_types = receptacle_types[:max(max_receptacles, len(required))]
    game = GameSpec(task_type, room, target, parent, toggle)
    game.receptacles = [_mangle("Sink", rng, "_bar_SinkBasin", i) if r == "SinkBasin"
                        else _mangle(r, rng, index=i) for i, r in enumerate(receptacle_types)]
    rtype_of = dict(zip(game.receptacles, receptacle_types))
    holders = [r for r in game.receptacles if rtype_of[r] != parent]
    wanted = [target] * (2 if task_type == "pick_two_obj_and_place" else 1)
    wanted += [target] * rng.randint(0, 1) + ([toggle] if toggle else [])
    others = [o for o in spec["objects"] if o not in {target, toggle, "DeskLamp"}]
    wanted += rng.sample(others, k=min(len(others), rng.randint(3, 8)))
    for obj in wanted:
        options = [r for r in (holders or game.receptacles)
                   if can_contain(rtype_of[r], obj, spec["objects"])]
        if not options:
            if obj in {target, toggle}:
                return None
            continue
        game.objects.append((obj, rng.choice(options)))
    return game


_GOALS = {
    "pick_and_place_simple": "(inReceptacle ?o ?r) (objectType ?o {O}Type) "
                             "(receptacleType ?r {R}Type)",
    "pick_clean_then_place_in_recep": "(cleanable ?o) (objectType ?o {O}Type) (receptacleType "
                                      "?r {R}Type) (isClean ?o) (inReceptacle ?o ?r)",
    "pick_heat_then_place_in_recep": "(heatable ?o) (objectType ?o {O}Type) "
                                     "(receptacleType ?r {R}Type) (isHot ?o) (inReceptacle ?o ?r)",
    "pick_cool_then_place_in_recep": "(coolable ?o) (objectType ?o {O}Type) "
                                     "(receptacleType ?r {R}Type) (isCool ?o) (inReceptacle ?o ?r)",
}
_GOAL_TEXT = {
    "pick_and_place_simple": "put some {o} on {r}",
    "look_at_obj_in_light": "look at {o} under the {t}",
    "pick_clean_then_place_in_recep": "put a clean {o} in {r}",
    "pick_heat_then_place_in_recep": "put a hot {o} in {r}",
    "pick_cool_then_place_in_recep": "put a cool {o} in {r}",
    "pick_two_obj_and_place": "put two {o} in {r}",
}


def _goal_pddl(spec: GameSpec) -> str:
    if spec.task_type == "look_at_obj_in_light":
        return ("(and (exists (?ot - object ?r - receptacle ?a - agent ?l - location) (and "
                f"(objectType ?ot {spec.toggle}Type) (toggleable ?ot) (isToggled ?ot) "
                "(receptacleAtLocation ?r ?l) (atLocation ?a ?l) (inReceptacle ?ot ?r))) "
                f"(exists (?o - object ?a - agent) (and (objectType ?o {spec.target}Type) "
                "(holds ?a ?o))))")
    if spec.task_type == "pick_two_obj_and_place":
        one = "(objectType ?o{i} {O}Type) (receptacleType ?r {R}Type) (inReceptacle ?o{i} ?r)"
        return ("(and (exists (?r - receptacle) (exists (?o1 - object) (and "
                + one.format(i=1, O=spec.target, R=spec.parent)
                + " (exists (?o2 - object) (and (not (= ?o1 ?o2)) "
                + one.format(i=2, O=spec.target, R=spec.parent) + "))))))")
    body = _GOALS[spec.task_type].format(O=spec.target, R=spec.parent)
    return f"(and (exists (?r - receptacle) (exists (?o - object) (and {body}))))"


def problem_text(spec: GameSpec, name: str, rng: random.Random) -> str:
    """The PDDL problem of a game spec, in the layout of ALFWorld's ``initial_state.pddl``."""
    room_objects = ROOMS[spec.room]["objects"]
    rtypes = {r: r.split("_bar_")[-1] if r.startswith("Sink_") else r.split("_bar_")[0]
              for r in spec.receptacles}
    locations = {r: f"loc_bar_{i}_bar_{rng.randint(-9, 9)}_bar_{rng.randint(0, 3)}_bar_30"
                 for i, r in enumerate(spec.receptacles)}
    start = "loc_bar_99_bar_0_bar_0_bar_30"
    objects = [(_mangle(otype, rng, index=i), otype, recep)
               for i, (otype, recep) in enumerate(spec.objects)]
    otypes, rtype_set = sorted({o for _, o, _ in objects}), sorted(set(rtypes.values()))
    decl = ["agent1 - agent"] + [f"{t}Type - otype" for t in otypes]
    decl += [f"{t}Type - rtype" for t in rtype_set]
    decl += [f"{o} - object" for o, _, _ in objects] + [f"{r} - receptacle" for r in rtypes]
    decl += [f"{loc} - location" for loc in list(locations.values()) + [start]]
    init = [f"(atLocation agent1 {start})"]
    init += [f"(canContain {rt}Type {ot}Type)" for rt in rtype_set for ot in otypes
             if can_contain(rt, ot, room_objects)]
    for recep, rtype in rtypes.items():
        init += [f"(receptacleType {recep} {rtype}Type)",
                 f"(receptacleAtLocation {recep} {locations[recep]})"]
        init += [f"(openable {recep})"] if rtype in OPENABLE else []
    for obj, otype, recep in objects:
        init += [f"(objectType {obj} {otype}Type)", f"(inReceptacle {obj} {recep})",
                 f"(objectAtLocation {obj} {locations[recep]})"]
        flags = [("pickupable", otype not in NOT_PICKUPABLE), ("heatable", otype in HEATABLE),
                 ("coolable", otype in COOLABLE), ("cleanable", otype in CLEANABLE),
                 ("isReceptacleObject", otype in RECEPTACLE_OBJECTS),
                 ("toggleable", otype == "DeskLamp")]
        init += [f"({flag} {obj})" for flag, on in flags if on]
    return (f"(define (problem plan_{name})\n(:domain alfred)\n(:objects\n"
            + "\n".join(f"        {d}" for d in decl) + "\n        )\n(:init\n"
            + "\n".join(f"        {f}" for f in init) + "\n        )\n(:goal\n    "
            + _goal_pddl(spec) + "\n    )\n)\n")


def plan_wins(game: dict) -> bool:
    """Whether Fast Downward's plan for a game, played in the engine, wins it."""
    from agentic_rl.envs.alfworld.engine import make_engine
    from agentic_rl.envs.alfworld.expert import request_plan

    env = make_engine(fast=True)
    env.load(game)
    state = env.reset()
    for command in request_plan(env):
        state, _, done = env.step(command)
        if done:
            break
    return bool(state["won"])


def generate_games(out: str | Path, n: int, task_types: list[str] | None = None,
                   rooms: list[str] | None = None, max_receptacles: int = 12,
                   seed: int = 0) -> list[Path]:
    """Write ``n`` planner-checked games under ``out``, cycling through the task types.

    Args:
        out: output folder (a folder of trials, usable as ``data_path``).
        n: number of games.
        task_types: task types to cover (default: all six; with ``rooms`` given, those the rooms
            allow).
        rooms: room kinds to draw from (default all: kitchen, bathroom, bedroom, livingroom).
        max_receptacles: receptacles per room (small rooms for early curriculum stages).
        seed: generator seed.

    Returns:
        Paths of the written ``game.tw-pddl`` files.
    """
    rooms = list(rooms or ROOMS)
    task_types = _checked_task_types(task_types, rooms)
    rng = random.Random(seed)
    written: list[Path] = []
    attempts = 0
    while len(written) < n:
        attempts += 1
        if attempts > 50 * n + 100:
            raise RuntimeError(f"Could not generate solvable games for {task_types} in {rooms}")
        task_type = task_types[len(written) % len(task_types)]
        spec = sample_spec(task_type, rng.choice(rooms), rng, max_receptacles)
        if spec is None:
            continue
        index = len(written)
        goal = _GOAL_TEXT[task_type].format(o=spec.target.lower(), r=spec.parent.lower(),
                                            t=spec.toggle.lower())
        problem = problem_text(spec, f"gen_{seed}_{index}", rng)
        game = build_game(problem, goal)
        if not plan_wins(game):
            continue
        trial = (Path(out) / f"{task_type}-{spec.target}-None-{spec.parent}-{index}"
                 / f"trial_gen_{seed}_{index:05d}")
        written.append(_write_trial(trial, task_type, spec, goal, problem, game))
    return written


def _checked_task_types(task_types: list[str] | None, rooms: list[str]) -> list[str]:
    """The task types to generate (default: those ``rooms`` allow), with a clear error for an
    unknown task type or room, or a task type none of the rooms can host."""
    if not task_types:
        task_types = [t for t in TASK_TYPES if set(rooms) <= set(ROOMS)
                      and any(_choose_task(t, r, random.Random(0)) for r in rooms)]
    bad = sorted(set(task_types) - set(TASK_TYPES)) + sorted(set(rooms) - set(ROOMS))
    if bad:
        raise ValueError(f"Unknown task types/rooms {bad}; allowed task types {list(TASK_TYPES)}, "
                         f"rooms {list(ROOMS)}")
    feasible = [t for t in task_types if any(_choose_task(t, r, random.Random(0)) for r in rooms)]
    if len(feasible) < len(task_types):
        missing = sorted(set(task_types) - set(feasible))
        raise ValueError(f"Task types {missing} cannot be made in rooms {rooms} (e.g. "
                         "look_at_obj_in_light needs a desk lamp: bedroom or livingroom; "
                         "clean/heat/cool need a kitchen or bathroom appliance)")
    return task_types


def _write_trial(trial: Path, task_type: str, spec: GameSpec, goal: str, problem: str,
                 game: dict) -> Path:
    """Write one trial folder as ALFWorld lays them out (``initial_state.pddl``,
    ``traj_data.json``, ``game.tw-pddl``); returns the game file's path."""
    trial.mkdir(parents=True, exist_ok=True)
    traj = {"task_id": trial.name, "task_type": task_type, "goal": goal,
            "pddl_params": {"object_target": spec.target, "parent_target": spec.parent,
                            "toggle_target": spec.toggle, "mrecep_target": "",
                            "object_sliced": False},
            "turk_annotations": {"anns": [{"task_desc": goal}]}, "room": spec.room}
    (trial / "initial_state.pddl").write_text(problem)
    (trial / "traj_data.json").write_text(json.dumps(traj, indent=1))
    (trial / "game.tw-pddl").write_text(json.dumps(game))
    return trial / "game.tw-pddl"

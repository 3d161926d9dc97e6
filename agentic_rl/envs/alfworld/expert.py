"""ALFWorld experts: the handcoded expert, and the Fast Downward plan for pick_two_obj_and_place.

ALFWorld 0.4.2's handcoded expert, as shipped, fails most ``pick_two_obj_and_place`` games
(0.26 of 100 train games): its bookkeeping misses its own puts. :func:`handcoded_agent_class`
fixes that (0.87). For pick_two, :class:`ExpertTracker` can still ask Fast Downward for a plan
once, at reset (re-planning every step is slow and memory-hungry), and follow it while the agent
follows it; once the agent leaves the plan it falls back to the handcoded expert.
:func:`expert_subgoal` reads the subgoal the handcoded expert pursues (the learned text
Manager's DAgger label).
"""

from __future__ import annotations

import functools
import json
import os
import select
import signal
import time
from typing import Any

PLANNER_TASK_TYPES = frozenset({"pick_two_obj_and_place"})


def pddl_engine(env: Any) -> Any:
    """The innermost TextWorld ``PddlEnv`` of a wrapper stack."""
    while hasattr(env, "_wrapped_env"):
        env = env._wrapped_env
    return env


def request_plan(env: Any, timeout_s: float | None = None) -> list[str] | None:
    """Fast Downward plan (commands) from the current state of a loaded ALFWorld game.

    Fast Downward's search takes under a second on most ALFWorld games but minutes (and
    gigabytes) on a few. With ``timeout_s`` the search runs in a forked child process that is
    killed when the time is up.

    Args:
        env: the TextWorld environment stack (engine innermost).
        timeout_s: seconds allowed; None searches in this process without a limit.

    Returns:
        The plan's commands ([] if Fast Downward finds none), or None on timeout.
    """
    engine = pddl_engine(env)
    if timeout_s is None:
        return list(engine._pddl_state.replan(engine._entity_infos))
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: plan, send it, exit without running the parent's cleanup
        os.close(read_end)
        try:
            plan = list(engine._pddl_state.replan(engine._entity_infos))
            os.write(write_end, json.dumps(plan).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        chunks, deadline = [], time.monotonic() + timeout_s
        while True:
            ready, _, _ = select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                return None
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    return json.loads(b"".join(chunks) or b"[]")


def put_as_tracked(command: str) -> str:
    """``"move X to Y"`` (ALFWorld 0.4's put command) as ``"put X in/on Y"``, the form the
    handcoded expert's state tracking recognises; any other command unchanged."""
    if command.startswith("move ") and " to " in command:
        obj, receptacle = command[len("move "):].split(" to ", 1)
        return f"put {obj} in/on {receptacle}"
    return command


@functools.cache
def handcoded_agent_class() -> type:
    """ALFWorld's ``HandCodedTWAgent`` whose policies see a successful move as the put it is.

    ALFWorld 0.4 renamed "put X in/on Y" to "move X to Y" in the commands its handcoded policies
    issue and in their predicates, but not in ``update_state_tracking``, which still looks for
    "put". After any successful move the expert believes it still carries the object: in a
    pick_two game its second put names the object already placed (not admissible, so it says
    "look" and wanders), and after an agent put an object down (DAgger states) it labels
    "go to" where that object came from. The subclass hands the tracking the old form.
    """
    from alfworld.agents.expert.handcoded_expert_tw import HandCodedTWAgent

    class MoveTrackingAgent(HandCodedTWAgent):
        def get_task_policy(self, task_param: dict) -> type:
            return _move_tracking(super().get_task_policy(task_param))

    return MoveTrackingAgent


@functools.cache
def _move_tracking(policy_class: type) -> type:
    class MoveTrackingPolicy(policy_class):
        def update_state_tracking(self, game_state: Any, last_action: str) -> None:
            super().update_state_tracking(game_state, put_as_tracked(last_action))

    MoveTrackingPolicy.__name__ = policy_class.__name__
    return MoveTrackingPolicy


ACTING_VERBS = frozenset({"take", "put", "heat", "cool", "clean", "use"})


def policy_subgoal(subgoals: list[dict[str, str]], index: int, params: dict[str, str],
                   receptacles: Any = ()) -> tuple[str, str, str] | None:
    """A handcoded policy's subgoal ``index`` as ``(verb, object, place)``: the first acting
    subgoal from ``index`` on (a "find" or "goto" step stands for the one it leads to).

    ``("take", "apple", "")``, ``("put", "apple", "fridge")``, ``("heat", "apple",
    "microwave")`` (the place: the "goto" before it), ``("use", "desklamp", "")``. None past
    the last subgoal. ``params``: the policy's ``task_params``; ``receptacles``: the receptacle
    names it has seen (cleaning happens in a bathtub basin where there is no sink basin, as
    the policy itself decides).
    """
    for i in range(max(index, 0), len(subgoals)):
        verb, param = subgoals[i]["action"], str(subgoals[i]["param"]).lower()
        if verb not in ACTING_VERBS:
            continue
        if verb == "put":
            return verb, str(params["object_target"]).lower(), param
        if verb in ("heat", "cool", "clean"):
            place = str(subgoals[i - 1]["param"]).lower() if i > 0 else ""
            if place == "sinkbasin" and not any("sinkbasin" in r for r in receptacles):
                place = "bathtubbasin"
            return verb, param, place
        return verb, param, ""
    return None


def expert_subgoal(engine: Any) -> tuple[str, str, str] | None:
    """The subgoal the handcoded expert of an engine stack (``make_engine(expert=True)``)
    pursues in the current state (:func:`policy_subgoal`); None without one."""
    policy = getattr(getattr(engine, "_handcoded_expert", None), "policy", None)
    if policy is None:
        return None
    return policy_subgoal(policy.subgoals, policy.subgoal_idx, policy.task_params,
                          list(getattr(policy, "receptacles", {}).values()))


class ExpertTracker:
    """Gives the expert's next command for the current state of one episode.

    Args:
        task_type: the game's task type.
        use_planner: follow a Fast Downward plan for the task types in
            :data:`PLANNER_TASK_TYPES`.
        plan_timeout_s: time allowed for the plan (then the handcoded expert is used).
    """

    def __init__(self, task_type: str, use_planner: bool = True,
                 plan_timeout_s: float | None = 60.0) -> None:
        self.task_type = task_type
        self.use_planner = use_planner and task_type in PLANNER_TASK_TYPES
        self.plan_timeout_s = plan_timeout_s
        self.plan_timed_out = False
        self.plan: list[str] = []
        self.plan_step = 0
        self.on_plan = False

    def reset(self, env: Any) -> None:
        """Request the plan (planner task types only); call right after the env's reset."""
        plan = request_plan(env, self.plan_timeout_s) if self.use_planner else []
        self.plan_timed_out = plan is None
        self.plan = plan or []
        self.plan_step = 0
        self.on_plan = bool(self.plan)

    def observe(self, command: str) -> None:
        """Record the command the agent took."""
        if self.on_plan:
            if self.plan_step < len(self.plan) and command == self.plan[self.plan_step]:
                self.plan_step += 1
            else:
                self.on_plan = False

    def next_command(self, state: Any) -> str | None:
        """The expert's next command (one of ``state["admissible_commands"]``), or None.

        Args:
            state: the TextWorld game state (with ``extra.expert_plan`` when the handcoded
                expert wrapper is present).
        """
        admissible = state["admissible_commands"]
        if self.on_plan and self.plan_step < len(self.plan):
            command = self.plan[self.plan_step]
            if command in admissible:
                return command
            self.on_plan = False
        handcoded = (state.get("extra.expert_plan") or [None])[0]
        return handcoded if handcoded in admissible else None

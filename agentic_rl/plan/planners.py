"""Text-subgoal planners (SPEC A8): the environment's own plan, any OpenAI-compatible chat
endpoint (vLLM, llama.cpp, Ollama, ...), and the learned Manager (``plan.learned``).

A planner sees what the agent sees (task, last feedback, inventory, admissible commands) plus
the env's ``info`` and returns one line of text: the next subgoal. The Manager embeds it with the
same sentence encoder as observations, and the Worker is conditioned on that vector.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any, Protocol, Sequence


class Planner(Protocol):
    """Anything that proposes the next text subgoal."""

    needs_expert: bool  # True if it reads the env's expert (the env must compute it)

    def subgoal(self, task: str, observation: str, inventory: str, commands: list[str],
                info: dict[str, Any], trajectory: Sequence[tuple[str, str]] = ()) -> str:
        """The next subgoal; ``trajectory``: the episode's ``(command, feedback)`` steps."""
        ...

    def reached(self, subgoal: str, command: str, feedback: str) -> bool:
        """Whether the step that issued ``command`` ends the current subgoal's period."""
        ...


class CommandSubgoals:
    """Planners whose subgoal is an admissible command: reached when it was issued."""

    def reached(self, subgoal: str, command: str, feedback: str) -> bool:
        return bool(subgoal) and command == subgoal


class ExpertPlanPlanner(CommandSubgoals):
    """The environment's own plan: the expert's next command (``info["expert_command"]``).

    It reads the solution, so an agent using it is an oracle upper bound, never a test score.
    """

    needs_expert = True

    def subgoal(self, task: str, observation: str, inventory: str, commands: list[str],
                info: dict[str, Any], trajectory: Sequence[tuple[str, str]] = ()) -> str:
        return str(info.get("expert_command") or "look")


class PlannerError(RuntimeError):
    """The chat endpoint could not be reached or answered nonsense."""


class ChatPlanner(CommandSubgoals):
    """Client for an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        base_url: e.g. ``http://localhost:8000/v1``.
        model: the model name the server expects.
        api_key_env: environment variable holding the key (optional for local servers).
        timeout_s: per request.
    """

    needs_expert = False
    SYSTEM = ("You plan for a household robot in a text game. Reply with exactly one line: the "
              "next subgoal, written as one of the admissible commands.")

    def __init__(self, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY",
                 timeout_s: float = 30.0) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.timeout_s = model, timeout_s
        self.api_key = os.environ.get(api_key_env, "")

    def messages(self, task: str, observation: str, inventory: str,
                 commands: list[str]) -> list[dict[str, str]]:
        user = (f"Task: {task}\nLast observation: {observation}\n{inventory}\n"
                "Admissible commands:\n" + "\n".join(commands))
        return [{"role": "system", "content": self.SYSTEM}, {"role": "user", "content": user}]

    def subgoal(self, task: str, observation: str, inventory: str, commands: list[str],
                info: dict[str, Any], trajectory: Sequence[tuple[str, str]] = ()) -> str:
        body = json.dumps({"model": self.model, "temperature": 0.0, "max_tokens": 64,
                           "messages": self.messages(task, observation, inventory, commands)})
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, body.encode(), headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                answer = json.loads(response.read())
            text = answer["choices"][0]["message"]["content"]
        except (urllib.error.URLError, TimeoutError, KeyError, IndexError, ValueError) as error:
            raise PlannerError(f"planner endpoint {self.url} failed: {error}") from None
        lines = [line.strip() for line in str(text).splitlines() if line.strip()]
        return lines[0] if lines else "look"


def build_planner(manager: Any, table: Any = None) -> Planner | None:
    """The planner a ``ManagerConfig`` asks for (None without a Manager). The learned Manager
    needs the text ``table`` its network reads embeddings from."""
    if manager is None:
        return None
    if manager.planner == "expert_plan":
        return ExpertPlanPlanner()
    if manager.planner == "learned":
        from agentic_rl.nets.text_manager import TextManager
        from agentic_rl.plan.learned import LearnedTextManager

        if table is None:
            raise ValueError("the learned Manager needs the text table")
        return LearnedTextManager(TextManager(table.dim, manager.hidden), table)
    if not manager.base_url or not manager.model:
        raise ValueError("algorithm.manager.planner=openai needs manager.base_url and "
                         "manager.model (an OpenAI-compatible endpoint)")
    return ChatPlanner(manager.base_url, manager.model, manager.api_key_env, manager.timeout_s)

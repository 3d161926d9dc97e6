"""``agentic_rl/ALFWorld-v0``: ALFWorld's TextWorld engine behind the Gymnasium API.

Observation (a ``Dict`` space):

* ``task``, ``observation``, ``inventory``: raw text (``Text`` spaces);
* ``action_mask``: ``(max_commands,)`` int8, 1 for the indices of this step's admissible commands;
* with ``encode=True`` also ``task_embedding``, ``observation_embedding``,
  ``inventory_embedding`` (``(384,)``) and ``command_embeddings`` (``(max_commands, 384)``, zero
  rows past the admissible commands), from MiniLM with a cache keyed by text.

Action: an index into this step's admissible commands (sorted as the engine gives them). An index
outside them is not a command of the game: the engine answers "Nothing happens." and
``info["invalid_action"]`` is True.

Reward: 1 on the step the task is won (the PDDL engine's score is exactly this: it has no
intermediate score); optionally ``step_penalty`` per step. The episode terminates when the task
is won and is truncated after ``max_steps``.

Info: ``won``, ``task_type``, ``admissible_commands``, ``expert_command`` (the handcoded expert's
next command; for pick_two_obj_and_place the Fast Downward plan requested at reset),
``expert_action`` (its index, -1 if none), ``expert_subgoal`` (the handcoded expert's current
subgoal as ``(verb, object, place)``, e.g. ``("put", "apple", "fridge")``, or None),
``gamefile``, ``invalid_action``.
"""

from __future__ import annotations

import random
import string
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from agentic_rl.envs.alfworld.data import list_games, task_type_of
from agentic_rl.envs.alfworld.expert import ExpertTracker, expert_subgoal

TEXT_CHARSET = frozenset(string.printable)
MAX_TEXT = 16_384


def _text_space() -> gym.spaces.Text:
    return gym.spaces.Text(max_length=MAX_TEXT, min_length=0, charset=TEXT_CHARSET)


class ALFWorldEnv(gym.Env):
    """ALFWorld household tasks as a Gymnasium environment with admissible-command actions.

    Args:
        split: ``train``, ``valid_seen`` or ``valid_unseen``.
        data_path: data location (split folder, folder of trials, data root, or slim pack).
        games: explicit list of ``game.tw-pddl`` paths (overrides ``split``/``data_path``).
        task_types: keep only these task types.
        max_commands: size of the action space (admissible commands beyond it are dropped).
        max_steps: truncation horizon.
        encode: add MiniLM embeddings to the observation.
        expert: compute the expert's next command every step (``info["expert_command"]``).
        use_planner: use the Fast Downward plan for pick_two_obj_and_place.
        plan_timeout_s: seconds allowed for that plan (searched in a forked process); past it the
            handcoded expert is used (``info["plan_timed_out"]``). None: no limit.
        fast: use the fast engine (same observations as TextWorld's stock engine).
        step_penalty: reward added on every step (e.g. -0.01); 0 keeps the sparse reward.
        domain_randomization: shuffle the numbering of same-named objects per game load.
        device: torch device of the encoder.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, split: str = "train", data_path: str | None = None,
                 games: list[str] | None = None, task_types: list[str] | None = None,
                 max_commands: int = 64, max_steps: int = 50, encode: bool = False,
                 expert: bool = True, use_planner: bool = True,
                 plan_timeout_s: float | None = 60.0, fast: bool = True,
                 step_penalty: float = 0.0, domain_randomization: bool = False,
                 device: str = "cpu", render_mode: str | None = None) -> None:
        from agentic_rl.envs.alfworld.engine import make_engine

        self.games = [Path(g) for g in games] if games else list_games(split, data_path, task_types)
        self.max_commands = int(max_commands)
        self.max_steps = int(max_steps)
        self.expert_enabled = expert
        self.use_planner = use_planner
        self.plan_timeout_s = plan_timeout_s
        self.step_penalty = float(step_penalty)
        self.render_mode = render_mode
        self.engine = make_engine(fast=fast, expert=expert,
                                  domain_randomization=domain_randomization)
        self.encoder = None
        spaces: dict[str, gym.Space] = {
            "task": _text_space(), "observation": _text_space(), "inventory": _text_space(),
            "action_mask": gym.spaces.Box(0, 1, (self.max_commands,), np.int8),
        }
        if encode:
            from agentic_rl.envs.alfworld.text_encoder import shared_encoder

            self.encoder = shared_encoder(device=device)
            dim = self.encoder.dim
            for key in ("task_embedding", "observation_embedding", "inventory_embedding"):
                spaces[key] = gym.spaces.Box(-1.0, 1.0, (dim,), np.float32)
            spaces["command_embeddings"] = gym.spaces.Box(-1.0, 1.0, (self.max_commands, dim),
                                                          np.float32)
        self.observation_space = gym.spaces.Dict(spaces)
        self.action_space = gym.spaces.Discrete(self.max_commands)
        self._state: Any = None
        self._game_index = -1
        self._expert: ExpertTracker | None = None

    @property
    def max_episode_steps(self) -> int:
        """The truncation horizon (``max_steps``), where the training loop looks for it."""
        return self.max_steps

    # ------------------------------------------------------------------ helpers
    def _commands(self) -> list[str]:
        return list(self._state["admissible_commands"])[: self.max_commands]

    def _inventory(self) -> str:
        from agentic_rl.envs.alfworld.engine import inventory_text

        return inventory_text(self.engine)

    def _observation(self, feedback: str) -> dict[str, Any]:
        commands = self._commands()
        mask = np.zeros(self.max_commands, dtype=np.int8)
        mask[: len(commands)] = 1
        obs: dict[str, Any] = {"task": self.task, "observation": _clip(feedback),
                               "inventory": self._inventory(), "action_mask": mask}
        if self.encoder is not None:
            vectors = self.encoder.encode([obs["task"], obs["observation"], obs["inventory"]]
                                          + commands)
            obs["task_embedding"], obs["observation_embedding"] = vectors[0], vectors[1]
            obs["inventory_embedding"] = vectors[2]
            table = np.zeros((self.max_commands, self.encoder.dim), dtype=np.float32)
            table[: len(commands)] = vectors[3:]
            obs["command_embeddings"] = np.clip(table, -1.0, 1.0)
            for key in ("task_embedding", "observation_embedding", "inventory_embedding"):
                obs[key] = np.clip(obs[key], -1.0, 1.0)
        return obs

    def _info(self, invalid: bool = False) -> dict[str, Any]:
        commands = self._commands()
        expert = self._expert.next_command(self._state) if self.expert_enabled else None
        subgoal = expert_subgoal(self.engine) if self.expert_enabled else None
        return {"won": bool(self._state["won"]), "task_type": self.task_type,
                "admissible_commands": commands, "expert_command": expert,
                "expert_action": commands.index(expert) if expert in commands else -1,
                "expert_subgoal": subgoal,
                "gamefile": str(self.games[self._game_index]), "invalid_action": invalid,
                "plan_timed_out": bool(self._expert.plan_timed_out)}

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start an episode on a game drawn with the env's generator.

        Args:
            seed: seeds the game draw and ALFWorld's expert (which uses Python's ``random``).
            options: ``{"game_index": i}`` plays ``self.games[i]``.
        """
        super().reset(seed=seed)
        options = options or {}
        if "game_index" in options:
            self._game_index = int(options["game_index"]) % len(self.games)
        else:
            self._game_index = int(self.np_random.integers(len(self.games)))
        random.seed(int(self.np_random.integers(2**31)))
        game = self.games[self._game_index]
        self.task_type = task_type_of(game)
        self.engine.load(str(game))
        self._state = self.engine.reset()
        intro = self._state.feedback
        self.task = _clip(intro.rsplit("Your task is to: ", 1)[-1].strip())
        self._expert = ExpertTracker(self.task_type, self.use_planner, self.plan_timeout_s)
        if self.expert_enabled:
            self._expert.reset(self.engine)
        self._steps = 0
        return self._observation(intro), self._info()

    def step(self, action: int) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """Take the admissible command at index ``action``."""
        commands = self._commands()
        index = int(action)
        invalid = not 0 <= index < len(commands)
        command = "" if invalid else commands[index]
        if self._expert is not None:
            self._expert.observe(command)
        self._state, _, _ = self.engine.step(command)
        self._steps += 1
        won = bool(self._state["won"])
        reward = float(won) + self.step_penalty
        truncated = self._steps >= self.max_steps and not won
        return (self._observation(self._state.feedback), reward, won, truncated,
                self._info(invalid))

    def render(self) -> str | None:
        """The last feedback text (``render_mode="ansi"``)."""
        if self.render_mode == "ansi" and self._state is not None:
            return str(self._state.feedback)
        return None


def _clip(text: str) -> str:
    text = "".join(ch if ch in TEXT_CHARSET else " " for ch in text)
    return text[:MAX_TEXT]

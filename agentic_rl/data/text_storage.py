"""The storage of text agents: episode groups, demonstrations, DAgger labels, own successes.

The loop writes each step of ``N`` text envs (``collect.text_inputs``: integer row ids) and the
storage assembles finished episodes per env. It owes, in this order:

1. ``bc_steps`` imitation updates at the start of a fresh run (prototypes only);
2. for each DAgger round (the schedule's first ``dagger_rounds`` episodes of every env, which the
   expert labelled): the relabelled episodes join the expert prototypes, then
   ``dagger_steps`` imitation updates;
3. for each later episode number once all ``N`` envs finished it: one group update on those
   ``N`` episodes (``group_size`` per game); successful ones then join the own prototypes.

Prototype episodes (demonstrations, DAgger labels, the newest ``self_capacity`` own successes)
are drawn uniformly by the storage's generator. The text table the row ids index is saved with
the storage, so a resumed run reads its episodes with the same table.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from agentic_rl.data.storage import StepRecord
from agentic_rl.data.text_episode_arrays import pack_episodes, unpack_episodes
from agentic_rl.data.text_episodes import TextEpisode, expert_relabelled
from agentic_rl.data.text_table import TextTable

IMITATE = "imitate"


@dataclass(frozen=True)
class TextStorageSettings:
    bc_steps: int
    dagger_rounds: int
    dagger_steps: int
    distill_batch: int  # prototype episodes per imitation batch
    self_capacity: int  # own successful episodes kept as prototypes
    group_updates: bool  # False for imitation-only learners (``rl: none``)


@dataclass
class TextBatch:
    """``episodes``: the group's rollouts, or the prototypes to imitate (``kind == "imitate"``);
    ``prototypes(n)`` samples prototype episodes for the distillation term of a group update;
    ``labelled``: every DAgger episode so far (the list grows; read, do not change it)."""

    kind: str
    episodes: list[TextEpisode]
    prototypes: Callable[[int], list[TextEpisode]] | None = None
    labelled: list[TextEpisode] = dataclasses.field(default_factory=list)


class TextEpisodeStorage:
    """Args:
        num_envs: envs written per step (the schedule's width).
        table: the text table shared with the envs and the learner.
        demos: expert demonstration episodes.
        settings: phase lengths and prototype sizes.
        seed: seeds prototype sampling.
    """

    warm = True  # demonstrations: no random-action phase

    def __init__(self, num_envs: int, table: TextTable, demos: list[TextEpisode],
                 settings: TextStorageSettings, seed: int) -> None:
        self.num_envs, self.table, self.settings = num_envs, table, settings
        self.demos, self.labelled, self.own = demos, [], []
        self.rng = np.random.default_rng([seed, 7])
        self.steps: list[list[dict[str, Any]]] = [[] for _ in range(num_envs)]
        self.finished: dict[int, list[tuple[int, TextEpisode]]] = {}  # episode number -> done
        self.imitation_owed = settings.bc_steps

    # ------------------------------------------------------------------ writing
    def add(self, step: StepRecord) -> list[TextEpisode]:
        obs, extras = step.obs, step.extras
        rows = {key: obs[key].numpy() for key in (
            "task", "observation", "inventory", "previous_command", "subgoal", "expert_command",
            "expert_subgoal", "game", "episode")}
        rows["log_prob"], rows["value"] = extras["log_prob"].numpy(), extras["value"].numpy()
        rows["reward"] = step.transition["reward"].numpy()
        mask, action = obs["action_mask"].numpy(), extras["unit_action"].numpy()
        commands, match = obs["commands"].numpy(), obs["match"].numpy()
        for env in range(self.num_envs):
            # only the commands the policy chose among (a shield may have removed some): the
            # policy scores each command apart from its slot, so dropping slots changes nothing
            kept = np.flatnonzero(mask[env])
            self.steps[env].append({
                **{key: value[env] for key, value in rows.items()}, "num_commands": len(kept),
                "commands": commands[env, kept], "match": match[env, kept],
                "action": int(np.searchsorted(kept, action[env]))})
        success = {f.env_index: f.success for f in step.finished}
        done = []
        for env in np.flatnonzero(step.episode_end.numpy()):
            terminated = bool(step.transition["terminated"][env])
            episode = self._episode(self.steps[env], terminated, success.get(int(env), False))
            if not terminated:
                episode.final = {key: value[env : env + 1].numpy()
                                 for key, value in step.reached.items()}
            number = int(self.steps[env][0]["episode"])
            self.finished.setdefault(number, []).append((int(env), episode))
            self.steps[env] = []
            done.append(episode)
        return done

    @staticmethod
    def _episode(steps: list[dict[str, Any]], terminated: bool, success: bool) -> TextEpisode:
        field = lambda key, dtype=np.int64: np.asarray([s[key] for s in steps], dtype)  # noqa: E731
        counts = field("num_commands")
        width = max(int(counts.max()), 1)
        pad = lambda row: np.pad(row, (0, width - len(row)))  # noqa: E731
        return TextEpisode(
            task=int(steps[0]["task"]), observation=field("observation"),
            inventory=field("inventory"), previous_command=field("previous_command"),
            commands=np.stack([pad(s["commands"]) for s in steps]), num_commands=counts,
            action=field("action"), reward=field("reward", np.float32),
            log_prob=field("log_prob", np.float32), value=field("value", np.float32),
            subgoal=field("subgoal"), terminated=terminated, game=str(int(steps[0]["game"])),
            success=success, source="rollout", expert_command=field("expert_command"),
            expert_subgoal=field("expert_subgoal"),
            match=np.stack([pad(s["match"]) for s in steps]))

    # ------------------------------------------------------------------ updates
    def owed(self, env_steps: int, new_steps: int) -> list[Any]:
        settings = self.settings
        requests: list[Any] = [IMITATE] * self.imitation_owed
        self.imitation_owed = 0
        for number in sorted(self.finished):
            if len(self.finished[number]) < self.num_envs:
                break  # every env plays its episodes in order: later numbers are not done either
            if number < settings.dagger_rounds:
                episodes = self._take(number)
                self.labelled += [r for e in episodes
                                  if (r := expert_relabelled(e, self.table)) is not None]
                requests += [IMITATE] * settings.dagger_steps
            elif settings.group_updates:
                requests.append(number)
                break  # the next group waits until this one is sampled
            else:
                self._keep_successes(self._take(number))
        return requests

    def _take(self, number: int) -> list[TextEpisode]:
        return [episode for _, episode in sorted(self.finished.pop(number),
                                                 key=lambda pair: pair[0])]

    def sample(self, request: Any, generator: torch.Generator) -> TextBatch:
        if request == IMITATE:
            return TextBatch(IMITATE, self.sample_prototypes(self.settings.distill_batch),
                             labelled=self.labelled)
        episodes = self._take(request)
        pool = self.demos + self.labelled + self.own  # the group's own successes join after it
        batch = TextBatch("group", episodes, lambda n: self._draw(pool, n), self.labelled)
        self._keep_successes(episodes)
        return batch

    def _keep_successes(self, episodes: list[TextEpisode]) -> None:
        capacity = self.settings.self_capacity
        for episode in episodes:
            if episode.success and capacity > 0:
                episode.source = "self"
                self.own = (self.own + [episode])[-capacity:]

    def sample_prototypes(self, count: int) -> list[TextEpisode]:
        return self._draw(self.demos + self.labelled + self.own, count)

    def _draw(self, pool: list[TextEpisode], count: int) -> list[TextEpisode]:
        return [pool[i] for i in self.rng.integers(len(pool), size=count)] if pool else []

    def metrics(self) -> dict[str, float]:
        return {"train/self_prototypes": float(len(self.own)),
                "dagger/labelled_episodes": float(len(self.labelled)),
                "dagger/labelled_steps": float(sum(len(e) for e in self.labelled))}

    def abandon(self, envs: np.ndarray) -> None:
        """The episodes in progress in ``envs`` (``[N]`` bool) will never finish (their rollout
        worker died): their steps are dropped; the restarted worker plays the same episode
        numbers again, so their groups still fill."""
        for env in np.flatnonzero(envs).tolist():
            self.steps[env] = []

    def set_task(self, task_id: str, finished_stage: list) -> None:
        """Curriculum stages change the envs only."""

    # ------------------------------------------------------------------ checkpoints
    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Finished episodes waiting for their group, DAgger labels, own successes and the text
        table (episodes in progress are not kept: a resumed run replays them)."""
        waiting = [(number, env, episode) for number, pairs in self.finished.items()
                   for env, episode in pairs]
        arrays, meta = {}, {"rng": self.rng.bit_generator.state,
                            "imitation_owed": self.imitation_owed,
                            "waiting": [[number, env] for number, env, _ in waiting]}
        for name, episodes in (("waiting", [e for _, _, e in waiting]),
                               ("labelled", self.labelled), ("own", self.own)):
            packed, meta[f"{name}_meta"] = pack_episodes(episodes, name)
            arrays |= packed
        meta["table_texts"], arrays["table_vectors"] = self.table.state()
        return arrays, meta

    def load_state(self, arrays: dict[str, np.ndarray], meta: dict[str, Any],
                   exact: bool) -> None:
        self.table.load_state(meta["table_texts"], arrays["table_vectors"])
        self.rng.bit_generator.state = meta["rng"]
        self.imitation_owed = int(meta["imitation_owed"])
        self.labelled = unpack_episodes(arrays, meta["labelled_meta"], "labelled")
        self.own = unpack_episodes(arrays, meta["own_meta"], "own")
        self.finished = {}
        waiting = unpack_episodes(arrays, meta["waiting_meta"], "waiting")
        for (number, env), episode in zip(meta["waiting"], waiting):
            self.finished.setdefault(int(number), []).append((int(env), episode))
        self.steps = [[] for _ in range(self.num_envs)]

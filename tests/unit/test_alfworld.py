"""ALFWorld: data/conversion, fast engine identical to the stock one, Gym env, generator, demos.

Uses the real valid_seen slim pack at ../shared/alfworld when present, else generated games.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("alfworld")
pytest.importorskip("textworld")

from agentic_rl.envs.alfworld.data import TASK_TYPES, ALFWorldDataError, list_games  # noqa: E402
from agentic_rl.envs.alfworld.games import (  # noqa: E402
    build_game,
    convert_game,
    goal_from_grammar,
    shipped_logic,
)

REPO = Path(__file__).resolve().parents[2]
REAL_PACK = REPO / ".." / "shared" / "alfworld" / "valid_seen_slim.tar.xz"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from agentic_rl.envs.alfworld.generator import generate_games

    out = tmp_path_factory.mktemp("alfworld_gen")
    generate_games(out, 6, seed=3, max_receptacles=6)
    return out


@pytest.fixture(scope="module")
def identity_games(generated: Path) -> list[Path]:
    if REAL_PACK.exists():
        games = list_games("valid_seen", REAL_PACK)
        return [games[0], games[len(games) // 2]]
    return list_games(data_path=generated)[:2]


def test_generator_writes_all_task_types_with_demangled_names(generated: Path) -> None:
    from agentic_rl.envs.alfworld.engine import make_engine

    games = list_games(data_path=generated)
    types = [json.loads((g.parent / "traj_data.json").read_text())["task_type"] for g in games]
    assert sorted(types) == sorted(TASK_TYPES)
    env = make_engine(fast=True)
    env.load(str(games[0]))
    state = env.reset()
    assert "Your task is to: " in state.feedback
    for command in state["admissible_commands"]:
        assert "_bar_" not in command and command == command.lower()
    assert any(c.startswith("go to ") and c[-1].isdigit() for c in state["admissible_commands"])


def test_convert_2_1_1_game_to_shipped_logic(tmp_path: Path) -> None:
    domain, grammar = shipped_logic()
    goal = "put two newspaper in drawer"
    old_domain = domain.replace("(define (domain alfred)", "(define (domain alfred) ;2.1.1")
    old = {"pddl_domain": old_domain,
           "grammar": grammar.replace("UNKNOWN GOAL", goal).replace("move {o} to {r}",
                                                                    "put {o} in/on {r}"),
           "pddl_problem": "(define (problem p) (:domain alfred))", "solvable": True}
    assert goal_from_grammar(old["grammar"]) == goal
    new = convert_game(old)
    assert new["pddl_domain"] == domain and "put {o} in/on {r}" not in new["grammar"]
    assert new == build_game(old["pddl_problem"], goal)
    # In a standard layout the conversion happens when the split is listed.
    trial = tmp_path / "json_2.1.1" / "train" / "pick_two_obj_and_place-X" / "trial_1"
    trial.mkdir(parents=True)
    (trial / "game.tw-pddl").write_text(json.dumps(old))
    (trial / "traj_data.json").write_text(json.dumps({"task_type": "pick_two_obj_and_place"}))
    (game,) = list_games("train", tmp_path, cache_dir=tmp_path / "cache")
    assert json.loads(game.read_text())["grammar"] == new["grammar"]
    assert json.loads((trial / "game.tw-pddl").read_text()) == old  # user data untouched


def test_converted_game_plays_move_commands(generated: Path) -> None:
    from agentic_rl.envs.alfworld.engine import make_engine
    from agentic_rl.envs.alfworld.expert import request_plan

    game_path = next(g for g in list_games(data_path=generated)
                     if "pick_and_place_simple" in str(g))
    game = json.loads(game_path.read_text())
    old = {**game, "grammar": game["grammar"].replace("move {o} to {r}", "put {o} in/on {r}")}
    env = make_engine(fast=True)
    env.load(convert_game(old))
    env.reset()
    plan = request_plan(env)
    assert any(c.startswith("move ") for c in plan)
    for command in plan:
        state, reward, done = env.step(command)
    assert done and reward == 1 and state["won"]


def test_missing_data_error_says_where_data_goes(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ALFWORLD_SLIM", raising=False)
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "empty"))
    with pytest.raises(ALFWorldDataError) as error:
        list_games("valid_seen", cache_dir=tmp_path)
    message = str(error.value)
    for hint in ("ALFWORLD_DATA", "ALFWORLD_SLIM", "environment.data_path", "alfworld-gen"):
        assert hint in message
    with pytest.raises(ALFWorldDataError):
        list_games("train", tmp_path / "nowhere", cache_dir=tmp_path)


def test_fast_engine_identical_to_stock(identity_games: list[Path]) -> None:
    from agentic_rl.envs.alfworld.engine import make_engine

    stock, fast = make_engine(fast=False), make_engine(fast=True)
    for seed, game in enumerate(identity_games):
        traces = []
        for env in (stock, fast):
            rng = random.Random(seed)
            env.load(str(game))
            state = env.reset()
            # Stock orders facts by Python's (per-process) string hashing, so compare them as sets.
            trace = [(state.feedback, state["admissible_commands"], set(state["facts"]))]
            for _ in range(6):
                state, reward, done = env.step(rng.choice(state["admissible_commands"]))
                trace.append((state.feedback, state["admissible_commands"], reward, done,
                              set(state["facts"])))
            traces.append(trace)
        assert traces[0] == traces[1]
        assert len({t[0] for t in traces[1]}) > 1  # the trajectory did change the observation


def test_env_reset_step_and_expert_wins_every_type(generated: Path) -> None:
    from agentic_rl.envs.alfworld.gym_env import ALFWorldEnv

    env = ALFWorldEnv(data_path=str(generated), max_steps=40)
    wins = {}
    for index in range(len(env.games)):
        obs, info = env.reset(seed=index, options={"game_index": index})
        assert obs["action_mask"].sum() == len(info["admissible_commands"])
        assert obs["task"] and obs["inventory"] == "You are not carrying anything."
        while True:
            obs, reward, terminated, truncated, info = env.step(info["expert_action"])
            if terminated or truncated:
                break
        assert reward == (1.0 if terminated else 0.0)
        wins[info["task_type"]] = terminated
    assert wins == {task: True for task in TASK_TYPES}


def test_put_as_tracked_rewrites_only_the_move_command() -> None:
    from agentic_rl.envs.alfworld.expert import put_as_tracked

    assert put_as_tracked("move alarmclock 2 to dresser 1") == "put alarmclock 2 in/on dresser 1"
    assert put_as_tracked("go to dresser 1") == "go to dresser 1"
    assert put_as_tracked("take mug 1 from desk 1") == "take mug 1 from desk 1"


def test_handcoded_expert_alone_puts_the_second_object(generated: Path) -> None:
    """ALFWorld 0.4's expert, which tracks "put" but issues "move", never placed the second
    object of a pick_two game (the generated one: lost in 40 steps without the fix)."""
    from agentic_rl.envs.alfworld.gym_env import ALFWorldEnv

    env = ALFWorldEnv(data_path=str(generated), max_steps=40, use_planner=False,
                      task_types=["pick_two_obj_and_place"])
    for index in range(len(env.games)):
        obs, info = env.reset(seed=index, options={"game_index": index})
        moves = 0
        while True:
            moves += info["expert_command"].startswith("move ")
            obs, reward, terminated, truncated, info = env.step(info["expert_action"])
            if terminated or truncated:
                break
        assert terminated and moves == 2


def test_policy_subgoal_skips_to_the_acting_step_by_hand() -> None:
    from agentic_rl.envs.alfworld.expert import policy_subgoal

    params = {"object_target": "apple", "parent_target": "fridge"}
    heat = [{"action": "find", "param": "apple"}, {"action": "take", "param": "apple"},
            {"action": "goto", "param": "microwave"}, {"action": "heat", "param": "apple"},
            {"action": "find", "param": "fridge"}, {"action": "put", "param": "fridge"}]
    assert policy_subgoal(heat, 0, params) == ("take", "apple", "")
    assert policy_subgoal(heat, 2, params) == ("heat", "apple", "microwave")
    assert policy_subgoal(heat, 4, params) == ("put", "apple", "fridge")
    assert policy_subgoal(heat, 6, params) is None
    clean = [{"action": "goto", "param": "sinkbasin"}, {"action": "clean", "param": "mug"}]
    assert policy_subgoal(clean, 0, params, ["sinkbasin"]) == ("clean", "mug", "sinkbasin")
    assert policy_subgoal(clean, 0, params, ["bathtubbasin"]) == ("clean", "mug", "bathtubbasin")


def test_the_experts_subgoal_is_what_its_next_acting_command_completes(generated: Path) -> None:
    """On every state of the expert's own games, each take/move/heat/cool/clean/use command
    the expert issues completes the subgoal the env reports it pursues."""
    from agentic_rl.envs.alfworld.gym_env import ALFWorldEnv
    from agentic_rl.plan.text_subgoals import abstract_command, subgoal_text

    env = ALFWorldEnv(data_path=str(generated), max_steps=40, use_planner=False)
    for index in range(len(env.games)):
        obs, info = env.reset(seed=index, options={"game_index": index})
        checked = 0
        while True:
            acting = abstract_command(info["expert_command"] or "")
            if acting is not None:
                assert subgoal_text(*info["expert_subgoal"]) == acting, info["task_type"]
                checked += 1
            obs, reward, terminated, truncated, info = env.step(info["expert_action"])
            if terminated or truncated:
                break
        assert terminated and checked >= 2


def test_invalid_index_is_a_no_op(generated: Path) -> None:
    from agentic_rl.envs.alfworld.gym_env import ALFWorldEnv

    env = ALFWorldEnv(data_path=str(generated), expert=False, max_commands=64)
    obs, info = env.reset(seed=0, options={"game_index": 0})
    before = info["admissible_commands"]
    assert len(before) < 64
    obs, reward, terminated, truncated, info = env.step(len(before))
    assert info["invalid_action"] and obs["observation"] == "Nothing happens."
    assert info["admissible_commands"] == before and reward == 0.0 and not terminated


def test_check_env_with_embeddings(generated: Path) -> None:
    from gymnasium.utils.env_checker import check_env

    from agentic_rl.envs.alfworld.gym_env import ALFWorldEnv

    env = ALFWorldEnv(data_path=str(generated), encode=True, expert=False, max_commands=32)
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=1)
    assert env.observation_space.contains(obs)
    norms = np.linalg.norm(obs["command_embeddings"][obs["action_mask"] == 1], axis=1)
    assert np.allclose(norms, 1.0, atol=1e-4)
    assert not obs["command_embeddings"][obs["action_mask"] == 0].any()


def test_text_encoder_cache_by_text() -> None:
    from agentic_rl.envs.alfworld.text_encoder import shared_encoder

    encoder = shared_encoder()
    first = encoder.encode(["go to fridge 1", "open fridge 1", "go to fridge 1"])
    assert first.shape == (3, 384) and np.array_equal(first[0], first[2])
    hits = encoder.hits
    again = encoder.encode(["open fridge 1"])
    assert encoder.hits == hits + 1 and np.array_equal(again[0], first[1])
    similar = float(first[0] @ encoder.encode_one("walk to the fridge"))
    unrelated = float(first[0] @ encoder.encode_one("the cat sleeps on the sofa"))
    assert similar > unrelated


def test_demos_file_and_success_by_type(generated: Path, tmp_path: Path) -> None:
    from agentic_rl.envs.alfworld.demos import run_episodes, save_episodes, success_by_type

    episodes = run_episodes({"data_path": str(generated), "max_steps": 40}, 3, "expert")
    stats = success_by_type(episodes)
    assert stats["all"]["episodes"] == 3 and stats["all"]["success_rate"] == 1.0
    save_episodes(episodes, tmp_path / "demos.npz", "agentic_rl/ALFWorld-v0")
    with np.load(tmp_path / "demos.npz", allow_pickle=False) as data:
        assert data["episode_success"].all() and len(data["gamefile"]) == 3
        assert len(data["action"]) == int(data["episode_length"].sum())
        first = data["episode"] == 0
        commands = [c.split("\n") for c in data["admissible_commands"][first]]
        assert [cs[a] for cs, a in zip(commands, data["action"][first])] == list(
            data["command"][first])


def test_async_vector_env_across_processes(generated: Path) -> None:
    from agentic_rl.envs.alfworld import make_alfworld_vec_env

    venv = make_alfworld_vec_env(2, data_path=str(generated), max_steps=30)
    try:
        obs, info = venv.reset(seed=[0, 1], options={"game_index": 0})
        assert obs["task"][0] == obs["task"][1] and obs["action_mask"].shape == (2, 64)
        won = np.zeros(2, dtype=bool)
        for _ in range(30):
            obs, reward, terminated, truncated, info = venv.step(info["expert_action"])
            won |= terminated
            if won.all():
                break
        assert won.all()
    finally:
        venv.close()


def test_forked_plan_matches_in_process_plan_and_times_out(generated: Path) -> None:
    from agentic_rl.envs.alfworld.engine import make_engine
    from agentic_rl.envs.alfworld.expert import request_plan

    game = next(g for g in list_games(data_path=generated) if "pick_two" in str(g))
    env = make_engine(fast=True)
    env.load(str(game))
    env.reset()
    forked = request_plan(env, timeout_s=30.0)
    assert forked and forked == request_plan(env)
    assert request_plan(env, timeout_s=0.0) is None


class DictPeers:
    """``EmbeddingPeers`` over an in-process ``EmbeddingStore`` (the actor's body)."""

    def __init__(self, store) -> None:
        self.store = store

    def fetch(self, texts):
        found, vectors = self.store.fetch(texts)
        return {} if vectors is None else dict(zip(found, vectors))

    def publish(self, texts, vectors) -> None:
        self.store.publish(texts, vectors)


def test_text_encoder_takes_peer_embeddings_and_publishes_its_own() -> None:
    from agentic_rl.envs.alfworld.text_encoder import shared_encoder
    from agentic_rl.train.embedding_store import EmbeddingStore

    encoder, store = shared_encoder(), EmbeddingStore()
    known, new = "peer text held by the store 17", "peer text nobody holds yet 17"
    held = np.full(384, 1 / np.sqrt(384), np.float32)  # not what MiniLM gives `known`
    store.publish([known], held[None])
    misses, encoder.peers = encoder.misses, DictPeers(store)
    try:
        out = encoder.encode([known, new, known])
    finally:
        encoder.peers = None
    assert np.array_equal(out[0], held) and np.array_equal(out[2], held)
    assert encoder.misses == misses + 1  # only `new` was embedded here
    found, vectors = store.fetch([new])
    assert found == [new] and np.array_equal(vectors[0], out[1])
    assert np.array_equal(out[1], encoder.encode([new])[0])


def test_embedding_store_keeps_first_copy_and_drops_oldest() -> None:
    from agentic_rl.train.embedding_store import EmbeddingStore

    store = EmbeddingStore(capacity=2)
    store.publish(["a", "b"], np.eye(2, dtype=np.float32))
    store.publish(["a"], np.full((1, 2), 5, np.float32))  # a second copy is ignored
    assert store.fetch(["a", "z"])[0] == ["a"] and store.fetch(["a"])[1][0].tolist() == [1, 0]
    store.publish(["c"], np.ones((1, 2), np.float32))
    assert store.size() == 2 and store.fetch(["a", "b", "c"])[0] == ["b", "c"]
    assert store.fetch(["z"]) == ([], None)


def _list_games_in(cache: str) -> list[str]:
    return [str(g) for g in list_games("valid_seen", REAL_PACK, cache_dir=Path(cache))]


@pytest.mark.skipif(not REAL_PACK.exists(), reason="needs ../shared/alfworld")
def test_processes_that_first_use_a_pack_together_get_the_same_games(tmp_path: Path) -> None:
    """An evaluation pool once read another process's half-written game file (JSONDecodeError)
    when both unpacked and built the same slim pack into a fresh cache."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(3) as pool:
        lists = pool.map(_list_games_in, [str(tmp_path)] * 3)
    assert len(lists[0]) == 140 and lists[0] == lists[1] == lists[2]


def test_demonstrated_games_are_known_wherever_the_pack_was_unpacked(generated: Path,
                                                                     tmp_path: Path) -> None:
    """Demonstrations recorded where the pack was unpacked under another folder (another
    machine, cache folder or pack version) must still keep their games out of the held-out
    ones."""
    from agentic_rl.collect.text_envs import demo_games, split_games
    from agentic_rl.envs.alfworld.data import game_key

    games = list_games(data_path=generated)
    elsewhere = [Path("/old/cache/train_slim-0123456789", *g.parts[-4:]) for g in games]
    assert [game_key(g) for g in elsewhere] == [game_key(g) for g in games]
    np.savez(tmp_path / "demos.npz", gamefile=np.asarray([str(g) for g in elsewhere[:-1]]),
             episode_success=np.asarray([True] * (len(games) - 2) + [False]))
    demonstrated = demo_games(str(tmp_path / "demos.npz"))
    assert demonstrated == {game_key(g) for g in games[:-2]}  # the failed episode's game is free
    _, train_ids, held = split_games({"data_path": str(generated)}, 5, 0, demonstrated)
    assert held == [len(games) - 2, len(games) - 1]
    assert train_ids == list(range(len(games) - 2))


def test_a_pack_provisioned_again_keeps_its_unpacked_folder(tmp_path: Path) -> None:
    """``../shared`` is provisioned afresh each session (new path or mtime, same bytes): the
    unpacked games, and the paths recorded with them, must stay where they were."""
    import os
    import tarfile

    from agentic_rl.envs.alfworld.data import _unpack_slim

    (tmp_path / "trial.txt").write_text("a game")
    first = tmp_path / "a" / "train_slim.tar.xz"
    first.parent.mkdir()
    with tarfile.open(first, "w:xz") as archive:
        archive.add(tmp_path / "trial.txt", arcname="json_2.1.1/train/trial.txt")
    again = tmp_path / "b" / "train_slim.tar.xz"
    again.parent.mkdir()
    again.write_bytes(first.read_bytes())
    os.utime(again, (1, 1))
    cache = tmp_path / "cache"
    root = _unpack_slim(first, cache)
    assert _unpack_slim(again, cache) == root
    assert (root / "json_2.1.1" / "train" / "trial.txt").read_text() == "a game"
    with tarfile.open(again, "w:xz") as archive:  # other content: another folder
        archive.add(first, arcname="json_2.1.1/train/pack")
    assert _unpack_slim(again, cache) != root

"""Text policy (acting equals training, masking, command order), the text table, and the
OpenAI-compatible planner client against a local HTTP server."""

from __future__ import annotations

import http.server
import json
import threading

import numpy as np
import pytest
import torch

from agentic_rl.algos.text_opd import ManagerConfig
from agentic_rl.data.text_table import HISTORY_BUCKETS, MATCH_BUCKETS, TextTable
from agentic_rl.nets.text import TextPolicy
from agentic_rl.plan import ChatPlanner, ExpertPlanPlanner, build_planner
from agentic_rl.plan.planners import PlannerError

DIM, B, T, N = 6, 2, 4, 5


def _batch(generator: torch.Generator, subgoal: bool = False) -> dict[str, torch.Tensor]:
    ids = lambda *shape: torch.randint(1, 20, shape, generator=generator)  # noqa: E731
    mask = torch.ones(B, T, N, dtype=torch.bool)
    mask[0, :, 3:] = False
    batch = {"task": ids(B, T), "observation": ids(B, T), "inventory": ids(B, T),
             "previous_command": ids(B, T), "commands": ids(B, T, N),
             "history": torch.randint(0, HISTORY_BUCKETS, (B, T, N), generator=generator),
             "match": torch.randint(0, MATCH_BUCKETS, (B, T, N), generator=generator),
             "command_mask": mask}
    if subgoal:
        batch["subgoal"] = torch.randn(B, T, DIM, generator=generator)
    return batch


@pytest.fixture
def table() -> torch.Tensor:
    return torch.randn(20, DIM, generator=torch.Generator().manual_seed(1))


def test_acting_step_by_step_equals_the_training_pass_over_the_episode(table):
    torch.manual_seed(0)
    policy = TextPolicy(DIM, hidden=16, memory=True, subgoal=True)
    nn_init_history(policy)
    batch = _batch(torch.Generator().manual_seed(2), subgoal=True)
    logits, values, _ = policy(table, batch)
    assert logits.shape == (B, T, N) and values.shape == (B, T)
    assert torch.isinf(logits[0, :, 3:]).all() and torch.isfinite(logits[1]).all()
    memory = policy.initial_state(B)
    for t in range(T):
        step = {k: v[:, t : t + 1] for k, v in batch.items()}
        step_logits, step_values, memory = policy(table, step, memory)
        torch.testing.assert_close(step_logits[:, 0], logits[:, t])
        torch.testing.assert_close(step_values[:, 0], values[:, t])


def test_logits_follow_the_commands_not_their_order(table):
    torch.manual_seed(0)
    policy = TextPolicy(DIM, hidden=16, memory=False)
    nn_init_history(policy)
    batch = _batch(torch.Generator().manual_seed(3))
    batch["command_mask"][:] = True
    order = torch.tensor([4, 2, 0, 1, 3])
    shuffled = {**batch, "commands": batch["commands"][..., order],
                "history": batch["history"][..., order], "match": batch["match"][..., order]}
    logits, _, _ = policy(table, batch)
    torch.testing.assert_close(policy(table, shuffled)[0], logits[..., order])


def test_memory_makes_the_past_matter(table):
    torch.manual_seed(0)
    batch = _batch(torch.Generator().manual_seed(4))
    changed = {**batch, "observation": batch["observation"].clone()}
    changed["observation"][:, 0] = (changed["observation"][:, 0] % 19) + 1
    for memory, differs in ((True, True), (False, False)):
        policy = TextPolicy(DIM, hidden=16, memory=memory)
        last = policy(table, batch)[0][:, -1]
        assert (not torch.allclose(policy(table, changed)[0][:, -1], last)) == differs


def test_the_take_back_bit_counts_only_for_a_policy_that_reads_it(table):
    batch = _batch(torch.Generator().manual_seed(5))
    flagged = {**batch, "history": batch["history"] + HISTORY_BUCKETS}
    for take_back in (False, True):
        torch.manual_seed(0)
        policy = TextPolicy(DIM, hidden=16, memory=False, take_back=take_back)
        nn_init_history(policy)
        assert policy.history_embed.num_embeddings == HISTORY_BUCKETS * (2 if take_back else 1)
        same = torch.equal(policy(table, flagged)[0], policy(table, batch)[0])
        assert same != take_back


def nn_init_history(policy: TextPolicy) -> None:
    """History embeddings start at zero; give them values so the test sees them."""
    with torch.no_grad():
        policy.history_embed.weight.normal_()
        policy.match_embed.weight.normal_()


class _Encoder:
    dim = 3

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls.append(texts)
        return np.array([[len(t), 1.0, 0.0] for t in texts], np.float32)


def test_text_table_encodes_each_new_text_once_in_one_batch():
    encoder = _Encoder()
    table = TextTable(encoder)
    np.testing.assert_array_equal(table.ids(["go", "look", "go", ""]), [1, 2, 1, 0])
    np.testing.assert_array_equal(table.ids(["look", "open it"]), [2, 3])
    assert encoder.calls == [["go", "look"], ["open it"]]
    vectors = table.tensor()
    assert vectors.shape == (4, 3) and vectors[0].abs().sum() == 0 and vectors[3, 0] == 7
    with pytest.raises(KeyError, match="no encoder"):
        TextTable(dim=3).ids(["unseen"])


class _ChatHandler(http.server.BaseHTTPRequestHandler):
    requests: list[dict] = []
    reply = "go to countertop 1\nbecause it is there"
    status = 200

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "body": body,
                                    "auth": self.headers.get("Authorization")})
        answer = json.dumps({"choices": [{"message": {"role": "assistant",
                                                      "content": type(self).reply}}]})
        self.send_response(type(self).status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(answer.encode())

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def chat_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ChatHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _ChatHandler.requests, _ChatHandler.status = [], 200
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_chat_planner_asks_an_openai_compatible_endpoint(chat_server, monkeypatch):
    monkeypatch.setenv("TEST_PLANNER_KEY", "sk-test")
    planner = build_planner(ManagerConfig(planner="openai", base_url=chat_server + "/",
                                          model="tiny-llm", api_key_env="TEST_PLANNER_KEY"))
    assert isinstance(planner, ChatPlanner) and not planner.needs_expert
    subgoal = planner.subgoal("put a mug in the sink", "You see a mug.", "You carry nothing.",
                              ["go to countertop 1", "look"], {"expert_command": "secret"})
    assert subgoal == "go to countertop 1"  # first line of the answer
    (request,) = _ChatHandler.requests
    assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer sk-test"
    assert request["body"]["model"] == "tiny-llm"
    prompt = request["body"]["messages"][-1]["content"]
    assert "put a mug in the sink" in prompt and "go to countertop 1" in prompt
    assert "secret" not in json.dumps(request["body"])  # the planner never sees the solution


def test_chat_planner_errors_are_one_clear_exception(chat_server):
    _ChatHandler.status = 500
    planner = ChatPlanner(chat_server, "tiny-llm", timeout_s=5)
    with pytest.raises(PlannerError, match="chat/completions"):
        planner.subgoal("t", "o", "i", ["look"], {})
    with pytest.raises(PlannerError):
        ChatPlanner("http://127.0.0.1:9/v1", "m", timeout_s=2).subgoal("t", "o", "i", [], {})


def test_planner_configs():
    assert build_planner(None) is None
    assert isinstance(build_planner(ManagerConfig()), ExpertPlanPlanner)
    assert ExpertPlanPlanner().subgoal("", "", "", [], {"expert_command": "open fridge 1"}) \
        == "open fridge 1"
    with pytest.raises(ValueError, match="base_url"):
        ManagerConfig(planner="openai")


def _demo_file(path, task: str = "put a pen on the shelf") -> None:
    """Two episodes in the ``agentic-rl demos`` ALFWorld layout."""
    commands = ["go to desk 1\nlook", "take pen 1 from desk 1\ngo to desk 1\nlook",
                "look\ninventory"]
    np.savez(path, task=np.array([task] * 3),
             observation=np.array(["You are in a room.", "On the desk 1, you see a pen 1.",
                                   "You are in a room."]),
             inventory=np.array(["You are not carrying anything."] * 3),
             admissible_commands=np.array(commands),
             command=np.array(["go to desk 1", "take pen 1 from desk 1", "inventory"]),
             action=np.array([0, 0, 1]), reward=np.array([0.0, 1.0, 0.0], np.float32),
             terminated=np.array([False, True, False]), truncated=np.array([False] * 3),
             episode=np.array([0, 0, 1]), episode_length=np.array([2, 1]),
             gamefile=np.array(["a/game.tw-pddl", "b/game.tw-pddl"]),
             task_type=np.array(["pick_and_place_simple"] * 2),
             episode_success=np.array([True, False]))


def test_demo_episodes_are_parsed_and_their_embeddings_cached(tmp_path):
    from agentic_rl.data.text_episodes import episodes_from_demos

    path = tmp_path / "demos.npz"
    _demo_file(path)
    encoder = _Encoder()
    table = TextTable(encoder)
    first, second = episodes_from_demos(path, table, max_commands=2)
    assert len(encoder.calls) == 1  # every text of the file in one batch
    assert first.success and not second.success and first.terminated
    commands = [[table.texts[i] for i in row if i] for row in first.commands]
    assert commands == [["go to desk 1", "look"], ["take pen 1 from desk 1", "go to desk 1"]]
    assert [commands[t][a] for t, a in enumerate(first.action)] == [
        "go to desk 1", "take pen 1 from desk 1"]
    # the label beyond max_commands is kept: the list is cut and ends with it
    assert [table.texts[i] for i in second.commands[0] if i] == ["look", "inventory"]
    assert (tmp_path / "demos.npz.embeddings.npz").exists()

    again = _Encoder()  # a later run: every embedding comes from the cache
    episodes = episodes_from_demos(path, TextTable(again), max_commands=2)
    assert again.calls == [] and len(episodes) == 2
    _demo_file(path, "put a pen in the drawer")  # the demo file changed: encode again
    changed = _Encoder()
    episodes_from_demos(path, TextTable(changed), max_commands=2)
    assert len(changed.calls) == 1


def test_match_buckets_count_task_words_and_flag_objects_just_seen():
    table = TextTable(dim=2)
    texts = ["put a clean mug in the coffeemachine.", "On the shelf 3, you see a mug 1.",
             "take mug 1 from shelf 3", "go to coffeemachine 1", "clean mug 1 with sinkbasin 1",
             "take cd 2 from shelf 3", "look"]
    table.add(texts, np.zeros((len(texts), 2), np.float32))
    ids = table.ids(texts)
    buckets = table.match_buckets(ids[0], ids[1], np.append(ids[2:], 0))
    # take mug: 1 task word (mug), mug and shelf just seen; go to coffeemachine: 1 task word;
    # clean mug: 2 (clean, mug); take cd: 0 task words but seen? no (cd not seen); look: 0
    np.testing.assert_array_equal(buckets, [1 + 4, 1, 2, 0, 0, 0])
    table.add(["put a hot mug in cabinet.", "heat mug 1 with microwave 1"], np.zeros((2, 2)))
    hot, heat = table.ids(["put a hot mug in cabinet.", "heat mug 1 with microwave 1"])
    assert table.match_buckets(hot, ids[1], np.array([heat]))[0] == 2  # hot -> heat, mug


def test_object_in_task_flags_the_commands_acting_on_a_task_word():
    table = TextTable(_Encoder())
    task = "put some mug on dresser."
    commands = ["take mug 1 from dresser 1", "take cd 1 from dresser 1", "go to dresser 1",
                "open drawer 1", "move cd 1 to dresser 1", "look"]
    ids = table.ids([task, "heat some egg and put it in fridge.", *commands])
    grid = torch.tensor([[*ids[2:], 0], [*ids[2:], 0]])  # [2, N], padding last
    flags = table.object_in_task(torch.tensor([ids[0], ids[1]]), grid)
    assert flags.tolist() == [[1, 0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0]]


def test_the_object_feature_moves_only_the_flagged_commands():
    policy = TextPolicy(DIM, hidden=16, memory=True, object_match=True)
    batch = _batch(torch.Generator().manual_seed(0))
    table = torch.randn(20, DIM, generator=torch.Generator().manual_seed(1))
    batch["object"] = torch.zeros(B, T, N, dtype=torch.int64)
    with torch.no_grad():
        policy.object_embed.weight[1, -1] = 5.0  # flagged commands get a bias
        before, _, _ = policy(table, batch)
        batch["object"][:, :, 1] = 1
        after, _, _ = policy(table, batch)
    changed = (after != before)
    assert changed[:, :, 1].all() and not changed[:, :, [0, 2]].any()

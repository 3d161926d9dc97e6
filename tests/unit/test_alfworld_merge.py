"""benchmarks/alfworld_agents.py --merge: runs of separate processes put back together, and the
share of the no-Manager-to-oracle gap the learned Manager closes, against hand computations."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.conftest import REPO


def _agents():
    spec = importlib.util.spec_from_file_location("alfworld_agents",
                                                  REPO / "benchmarks" / "alfworld_agents.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _payload(name: str, seed: int, success: float, pick_two: float, named: bool = True) -> dict:
    run = {"valid_seen": {"success_rate": success, "mean_steps": 20.0,
                          "per_task_type": {"pick_two": {"success_rate": pick_two}}},
           "env_steps": 72000, "train_wall_seconds": 1400.0, "best_holdout_success": 0.9,
           "oracle": name == "hgpo_oracle"}
    if named:
        run["seed"] = seed
    return {"rl_steps": 72000, "seeds": [seed], "results": {name: {"per_seed": [run]}}}


def test_merge_means_over_seeds_and_gap_share(tmp_path, capsys):
    rows = [("no_manager", 0, 0.80, 0.5), ("no_manager", 1, 0.84, 0.7),
            ("manager", 0, 0.88, 0.75), ("manager", 1, 0.84, 0.65),
            ("hgpo_oracle", 0, 0.92, 0.8), ("hgpo_oracle", 1, 0.92, 0.9)]
    files = []
    for i, row in enumerate(rows):
        files.append(tmp_path / f"{i}.json")
        files[-1].write_text(json.dumps(_payload(*row, named=i % 2 == 0)))
    out = tmp_path / "all.json"
    payload = _agents().main(["--merge", *map(str, files), "--json", str(out)])
    manager = payload["results"]["manager"]
    assert manager["success_mean"] == pytest.approx(0.86)
    assert manager["success_std"] == pytest.approx(0.02)
    assert manager["per_task_type"]["pick_two"] == pytest.approx(0.70)
    gap = payload["gap"]  # no Manager 0.82, oracle 0.92, Manager 0.86: 0.04 of 0.10
    assert gap["gap"] == pytest.approx(0.10) and gap["closed"] == pytest.approx(0.04)
    assert gap["share"] == pytest.approx(0.4)
    assert gap["lead_per_seed"] == pytest.approx({0: 0.08, 1: 0.0})
    assert payload["seeds"] == [0, 1]
    assert json.loads(out.read_text())["gap"]["share"] == pytest.approx(0.4)
    assert "40%" in capsys.readouterr().out


def test_merge_refuses_a_run_twice_and_mixed_budgets(tmp_path):
    agents = _agents()
    twice = [_payload("manager", 0, 0.9, 0.8), _payload("manager", 0, 0.8, 0.8)]
    with pytest.raises(ValueError, match="manager seed 0"):
        agents.merge_payloads(twice)
    other = _payload("manager", 1, 0.9, 0.8) | {"rl_steps": 20000}
    with pytest.raises(ValueError, match="rl-steps"):
        agents.merge_payloads([_payload("manager", 0, 0.9, 0.8), other])
    assert agents.merge_payloads([_payload("manager", 0, 0.9, 0.8)])["gap"] is None


def test_machine_facts_name_the_cpu_and_torch():
    import torch

    facts = _agents().machine_facts()
    assert facts["torch"] == torch.__version__ and facts["cpu"]
    assert isinstance(facts["avx512"], bool)

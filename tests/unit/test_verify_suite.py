"""A slice of the adversarial verification suite (benchmarks/verify_suite.py) in the default
tests: every family, every "proved" checked against dense sampling of the float32 policy (and
``act`` where a learner runs it), every counterexample replayed inside the region."""

from __future__ import annotations

import importlib.util
import sys

from tests.conftest import REPO


def _suite():
    spec = importlib.util.spec_from_file_location("verify_suite",
                                                  REPO / "benchmarks" / "verify_suite.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["verify_suite"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_no_false_proof_and_every_counterexample_replays():
    suite = _suite()
    result = suite.suite(queries=5 * len(suite.FAMILIES), seed=7)
    assert result["false_proofs"] == 0
    assert result["counterexamples_not_replaying"] == 0
    assert result["statuses"]["proved"] > 0 and result["statuses"]["falsified"] > 0
    assert result["over_budget"] == 0

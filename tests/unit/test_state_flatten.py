"""Nested learner state (modules, optimisers, generators) survives safetensors + JSON."""

import json

import torch
from safetensors.torch import load_file, save_file

from agentic_rl.data.checkpoint import flatten_state, unflatten_state


def test_optimizer_and_generator_state_round_trip(tmp_path):
    net = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
    net(torch.randn(4, 3)).sum().backward()
    optimizer.step()
    state = {"net": net.state_dict(), "optimizer": optimizer.state_dict(),
             "generator": torch.Generator().manual_seed(3).get_state(), "updates": 7}
    tensors, skeleton = flatten_state(state)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp_path / "s.safetensors"))
    (tmp_path / "s.json").write_text(json.dumps(skeleton))
    restored = unflatten_state(json.loads((tmp_path / "s.json").read_text()),
                               load_file(str(tmp_path / "s.safetensors")))
    assert restored["updates"] == 7
    fresh = torch.optim.Adam(torch.nn.Linear(3, 2).parameters(), lr=0.5)
    fresh.load_state_dict(restored["optimizer"])
    assert fresh.param_groups[0]["lr"] == 0.01
    assert torch.equal(fresh.state[fresh.param_groups[0]["params"][0]]["exp_avg"],
                       optimizer.state[optimizer.param_groups[0]["params"][0]]["exp_avg"])
    assert torch.equal(restored["generator"], state["generator"])

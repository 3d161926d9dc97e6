"""The fused extension's build folder: one per source version, and a lock file left by a
killed build does not block the next one."""

from __future__ import annotations

import os

from agentic_rl.algos import sac_fused


def test_build_folder_is_keyed_by_the_source_and_a_stale_torch_lock_is_cleared(tmp_path,
                                                                               monkeypatch):
    monkeypatch.setenv("AGENTIC_RL_EXTENSIONS", str(tmp_path))
    first = sac_fused.build_directory()
    assert first.parent == tmp_path and first == sac_fused.build_directory()
    source = tmp_path / "other.cpp"
    source.write_text("// another version of the source\n")
    monkeypatch.setattr(sac_fused, "SOURCE", source)
    assert sac_fused.build_directory() != first
    (first / "lock").write_text("")  # what torch's FileBaton leaves when its builder is killed
    with sac_fused.build_lock(first):
        assert not (first / "lock").exists()


def test_the_lock_is_released_when_its_holder_dies(tmp_path):
    child = os.fork()
    if child == 0:  # takes the lock and dies holding it, as a killed build would
        sac_fused.build_lock(tmp_path).__enter__()
        os._exit(0)
    os.waitpid(child, 0)
    with sac_fused.build_lock(tmp_path):  # would wait forever if the dead holder kept it
        pass

"""scripts/migrate_records.py: buffers and RL checkpoints of an older dreamgym fail to load with one message
naming the script, and load as the older version meant after it ran (idempotent)."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from dreamgym.checkpoint_io import RL_STATE_KEY
from dreamgym.retrieval import HashingEncoder, ReplayBuffer
from dreamgym.retrieval.buffer import META_KEYS, STATE_KEYS
from dreamgym.schema import Transition
from tests.script_loader import load_script

migrate = load_script("migrate_records")


def _buffer() -> ReplayBuffer:
    buf = ReplayBuffer(HashingEncoder(dim=32))
    buf.add([Transition(task_id="t", instruction="buy", step=i, state=f"page {i}", action=f"click[b{i}]",
                        next_state=f"page {i + 1}", reward=0.0, done=False, trajectory_id=f"T{i % 2}")
             for i in range(6)])  # fmt: skip
    return buf


def test_an_old_buffer_folder_names_the_script_and_loads_after_it(tmp_path, capsys):
    buf = _buffer()
    folder = buf.save(tmp_path / "model" / "buffer")
    meta = json.loads((folder / "buffer.json").read_text())
    assert set(META_KEYS) <= set(meta)
    for key in migrate.BUFFER_DEFAULTS:  # what a buffer saved before buckets existed holds
        del meta[key]
    (folder / "buffer.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"lacks bucket_radius, probe.*migrate_records\.py .*buffer"):
        ReplayBuffer.load(folder)
    assert migrate.main([str(tmp_path / "model")]) == [
        f"{folder / 'buffer.json'}: {k}" for k in ("bucket_radius", "probe")
    ]
    loaded = ReplayBuffer.load(folder)
    assert (loaded.bucket_radius, loaded.probe, len(loaded)) == (0.0, 8, 6)
    assert migrate.main([str(folder)]) == [] and "current" in capsys.readouterr().out


def test_an_old_rl_checkpoint_names_the_script_and_restores_after_it(tmp_path):
    buf = _buffer()
    state = buf.state_dict()
    assert set(STATE_KEYS) <= set(state)
    old = copy.deepcopy(state)
    del old["index_adds"], old["meta"]["probe"]  # saved before adds were replayed and probes existed:
    old["index"] = buf.index.to_bytes()  # the whole index, restored as it is
    with pytest.raises(ValueError, match="lacks probe.*migrate_records.py"):
        ReplayBuffer(HashingEncoder(dim=32)).load_state_dict(copy.deepcopy(old))
    ckpt = tmp_path / "last.ckpt"
    torch.save({"state_dict": {}, RL_STATE_KEY: {"replay_buffers": {"env": old}}}, ckpt)
    assert sorted(migrate.main([str(ckpt)])) == [f"{ckpt}: env.index_adds", f"{ckpt}: env.meta.probe"]
    restored = ReplayBuffer(HashingEncoder(dim=32))
    restored.load_state_dict(torch.load(ckpt, weights_only=False)[RL_STATE_KEY]["replay_buffers"]["env"])
    assert len(restored) == 6 and restored.probe == 8
    assert migrate.main([str(ckpt)]) == []
    with pytest.raises(SystemExit, match="no buffer.json"):
        migrate.main([str(tmp_path)])

"""#39: a kill during a checkpoint save must never cost the last good checkpoint."""

from __future__ import annotations

import pytest
import torch

from dreamgym.checkpoint_io import AtomicCheckpointIO, check_checkpoint_file


def test_a_save_cut_midway_leaves_the_previous_checkpoint_whole(tmp_path, monkeypatch):
    io = AtomicCheckpointIO()
    path = tmp_path / "checkpoints" / "last.ckpt"
    io.save_checkpoint({"step": 1, "w": torch.ones(3)}, path)
    assert io.load_checkpoint(path)["step"] == 1
    real_save = torch.save

    def killed(obj, fh, *a, **k):  # writes part of the file, then the process "dies"
        fh.write(b"half a checkpoint")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", killed)
    with pytest.raises(KeyboardInterrupt):
        io.save_checkpoint({"step": 2, "w": torch.zeros(3)}, path)
    monkeypatch.setattr(torch, "save", real_save)
    ckpt = io.load_checkpoint(path)  # the old one, whole
    assert ckpt["step"] == 1 and torch.equal(ckpt["w"], torch.ones(3))
    assert sorted(p.name for p in path.parent.iterdir()) == ["last.ckpt"]  # no partial file left behind
    io.save_checkpoint({"step": 3}, path)
    assert io.load_checkpoint(path)["step"] == 3


def test_an_empty_checkpoint_is_refused_with_the_fix(tmp_path):
    empty = tmp_path / "last.ckpt"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"is empty \(0 bytes\).*delete it"):
        check_checkpoint_file(empty)
    check_checkpoint_file(tmp_path / "missing.ckpt")  # a missing file is Lightning's to report

"""#39: a kill during a checkpoint save must never cost the last good checkpoint."""

from __future__ import annotations

import pytest
import torch

from dreamgym.checkpoint_io import AtomicCheckpointIO, check_checkpoint_file, check_export_dir, export_atomically


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


def test_an_export_cut_midway_leaves_the_previous_export_whole(tmp_path):
    target = tmp_path / "policy"
    export_atomically(target, lambda d: (d / "model.bin").write_text("v1"))
    assert (target / "model.bin").read_text() == "v1"

    def killed(folder):  # half the files of a new export, then the process "dies"
        (folder / "model.bin").write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        export_atomically(target, killed)
    assert (target / "model.bin").read_text() == "v1"  # the old export, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy"]  # no partial folder left behind
    export_atomically(target, lambda d: (d / "config.json").write_text("v2"))
    assert sorted(p.name for p in target.iterdir()) == ["config.json"]  # replaced whole, not merged


def test_an_unwritable_export_dir_is_refused_before_training(tmp_path, monkeypatch):
    check_export_dir(None, "model.init_args.save_dir")  # no export: nothing to check
    check_export_dir(tmp_path / "new" / "deeper", "model.init_args.save_dir")  # made at export time
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(ValueError, match=r"model.init_args.save_dir=.*afile' is a file, not a folder"):
        check_export_dir(afile, "model.init_args.save_dir")
    ro = tmp_path / "ro"
    ro.mkdir()
    # root ignores permission bits, so a read-only filesystem is what os.access reports here
    monkeypatch.setattr("os.access", lambda p, mode: str(p) != str(ro))
    with pytest.raises(ValueError, match=r"save_dir='.*ro/policy'.*is not a writable folder.*nothing was trained"):
        check_export_dir(ro / "policy", "model.init_args.save_dir")

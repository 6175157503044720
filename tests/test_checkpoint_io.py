"""#39: a kill during a checkpoint save must never cost the last good checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from dreamgym.checkpoint_io import (
    AtomicCheckpointIO,
    check_checkpoint_file,
    check_export_dir,
    export_atomically,
)


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
    # root ignores permission bits, so a read-only filesystem is what the check is told here
    monkeypatch.setattr("dreamgym.checkpoint_io._writable", lambda folder: folder != ro)
    with pytest.raises(
        ValueError, match=r"save_dir='.*ro/policy'.*is not a writable folder.*nothing was trained"
    ):
        check_export_dir(ro / "policy", "model.init_args.save_dir")


def test_an_unwritable_logger_dir_is_one_message_before_anything_is_built(tmp_path, monkeypatch, capsys):
    """#39 item 5: a read-only logger folder was a traceback at the first log, after the model was built."""
    from dreamgym.cli import main
    from dreamgym.errors import run_guarded

    ro = tmp_path / "ro"
    ro.mkdir()
    monkeypatch.setattr("dreamgym.checkpoint_io._writable", lambda folder: folder != ro)  # root ignores modes
    config = Path(__file__).resolve().parents[1] / "configs" / "webshop_policy_sft.yaml"
    argv = ["fit", "--config", str(config), f"--trainer.logger.init_args.save_dir={ro}/runs"]
    assert run_guarded(main, argv) == 2
    err = capsys.readouterr().err
    assert "trainer.logger.init_args.save_dir=" in err and "not a writable folder for the logs" in err


def test_an_existing_export_is_replaced_only_when_asked(tmp_path):
    """#39 item 4: `fit` silently replaced an earlier exported model."""
    earlier = tmp_path / "policy"
    earlier.mkdir()
    (earlier / "model.safetensors").write_text("the earlier model")
    with pytest.raises(
        ValueError, match=r"already holds the exported model.*--model.init_args.overwrite=true"
    ):
        check_export_dir(earlier, "model.init_args.save_dir", replace=False)
    check_export_dir(earlier, "model.init_args.save_dir", replace=True)
    check_export_dir(tmp_path / "empty_or_new", "model.init_args.save_dir", replace=False)

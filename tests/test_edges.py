"""Edges of issue #61 items 1-4: a checkpoint that does not fit the config, an unwritable pipeline
``--out_dir``, a full disk during ``collect``, SIGTERM in a non-fit pipeline stage, a misspelt trainer key in
a YAML and the quick benchmark's interrupt message. Each is one ``error:`` (or ``interrupted:``) line, with
exit code 2 (143), before any work where that can be known."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dreamgym.cli import main
from dreamgym.errors import run_guarded

ROOT = Path(__file__).resolve().parents[1]


def _guarded(argv, capsys) -> tuple[int, list[str]]:
    """``python -m dreamgym argv`` behind the error boundary: (exit code, the `error:`/`interrupted:` lines)."""
    try:
        rc = run_guarded(main, argv)
    except SystemExit as e:  # argparse's own checks
        rc = e.code
    err = capsys.readouterr().err.splitlines()
    return rc, [ln for ln in err if ln.startswith(("error:", "interrupted:"))]


# ------------------------------------------------------------------- 1. checkpoints that do not fit
@pytest.fixture(scope="module")
def sft_setup(tmp_path_factory):
    """A tokenizer, a few WebShop episodes and the ``last.ckpt`` of a 1-step ``tiny`` policy warm start."""
    from rl_toy import make_toy_tokenizer

    from dreamgym.collect import collect_trajectories

    root = tmp_path_factory.mktemp("sft")
    tok = make_toy_tokenizer(root / "tok")
    data = root / "train.jsonl"
    collect_trajectories("webshop", "train", 2, 0, out=data, seed=0, batch_size=2)
    setup = {"root": root, "tok": tok, "data": data}
    main(_sft_args(setup, "tiny", root / "first"))
    (ckpt,) = (root / "first" / "runs").glob("*/version_0/checkpoints/last.ckpt")
    return {**setup, "ckpt": ckpt}


def _sft_args(setup, preset: str, run: Path, *extra: str) -> list[str]:
    return [
        "fit", "--config", str(ROOT / "configs" / "webshop_policy_sft.yaml"),
        f"--model.init_args.policy.init_args.tokenizer_path={setup['tok']}",
        f"--model.init_args.policy.init_args.preset={preset}", "--model.init_args.policy.init_args.max_positions=256",
        "--model.init_args.max_length=128", f"--model.init_args.save_dir={run / 'policy'}",
        "--model.init_args.lr_scheduler.init_args.total_steps=2", f"--data.init_args.train_files=[{setup['data']}]",
        "--data.init_args.val_files=[]", "--data.init_args.batch_size=2", "--trainer.max_steps=1",
        "--trainer.limit_val_batches=0", "--trainer.enable_progress_bar=false",
        f"--trainer.logger.init_args.save_dir={run / 'runs'}", "--trainer.precision=32-true", *extra,
    ]  # fmt: skip


def _variant(setup, name: str, change) -> Path:
    ck = torch.load(setup["ckpt"], map_location="cpu", weights_only=False)
    change(ck)
    path = setup["root"] / f"{name}.ckpt"
    torch.save(ck, path)
    return path


def _rl_like(ck: dict) -> None:
    """What an RL fit's checkpoint has that a warm start's has not: its schedule state, no LR scheduler."""
    ck["dreamgym_rl"] = {"schedule": {"iteration": 1}, "replay_buffers": {}}
    ck["lr_schedulers"] = []
    for group in ck["optimizer_states"][0]["param_groups"]:
        for key in ("initial_lr", "max_lr", "min_lr"):
            group.pop(key, None)


def test_a_checkpoint_of_another_model_size_is_refused_before_training(sft_setup, tmp_path, capsys):
    """#61 item 1: a 65-line traceback ending in `size mismatch for model.lm_head.weight` (failed before)."""
    rc, lines = _guarded(_sft_args(sft_setup, "small", tmp_path, f"--ckpt_path={sft_setup['ckpt']}"), capsys)
    assert rc == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"error: --ckpt_path {sft_setup['ckpt']}: its weights do not fit")
    assert (
        "embed_tokens.weight is [300, 64] in the checkpoint and [300, 256] in the configured model"
        in lines[0]
    )
    assert not list(tmp_path.rglob("*.ckpt")) and not (tmp_path / "policy").exists()  # nothing trained


def test_an_rl_checkpoint_given_to_a_warm_start_config_is_refused(sft_setup, tmp_path, capsys):
    """#61 item 1: Lightning restored all states, then `KeyError: 'initial_lr'` (79 lines); this stand-in
    (the warm start's checkpoint with an RL fit's state key and no scheduler) resumed silently (failed before)."""
    rl = _variant(sft_setup, "rl_like", _rl_like)
    rc, lines = _guarded(_sft_args(sft_setup, "tiny", tmp_path, f"--ckpt_path={rl}"), capsys)
    assert rc == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"error: --ckpt_path {rl}: ") and "RL fit" in lines[0]
    assert "PolicySFT" in lines[0] and "--model.init_args.policy.init_args.path" in lines[0]
    assert not list(tmp_path.rglob("*.ckpt"))


def test_a_cut_checkpoint_is_refused_in_one_line(sft_setup, tmp_path, capsys):
    """#61 item 1: the first part of a checkpoint gave a 28-line zip-archive error (failed before)."""
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(sft_setup["ckpt"].read_bytes()[:100_000])
    rc, lines = _guarded(_sft_args(sft_setup, "tiny", tmp_path, f"--ckpt_path={cut}"), capsys)
    assert rc == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"error: checkpoint {cut} is cut") and "resume from another" in lines[0]
    junk = tmp_path / "junk.ckpt"
    junk.write_text("not a checkpoint\n")
    rc, lines = _guarded(_sft_args(sft_setup, "tiny", tmp_path, f"--ckpt_path={junk}"), capsys)
    assert rc == 2 and len(lines) == 1 and "is not a PyTorch checkpoint" in lines[0], lines


def test_a_fitting_checkpoint_still_resumes(sft_setup, tmp_path, capsys):
    """The checks refuse only what does not fit: the warm start's own checkpoint resumes."""
    rc, lines = _guarded(
        _sft_args(sft_setup, "tiny", tmp_path, f"--ckpt_path={sft_setup['ckpt']}", "--trainer.max_steps=2"),
        capsys,
    )
    assert rc == 0 and not lines and (tmp_path / "policy").is_dir()


# --------------------------------------------------------------------- 2. pipeline --out_dir
def test_pipeline_out_dir_that_is_a_file_is_refused_before_any_stage(tmp_path, capsys):
    """#61 item 2: `FileExistsError` in a 23-line traceback (failed before)."""
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    rc, lines = _guarded(["pipeline", "--config", str(ROOT / "configs" / "pipeline_webshop.yaml"),
                          f"--out_dir={afile}"], capsys)  # fmt: skip
    assert rc == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"error: --out_dir={str(afile)!r} is a file, not a folder")
    assert afile.read_text() == "mine\n" and sorted(tmp_path.iterdir()) == [afile]


def test_pipeline_out_dir_on_a_read_only_mount_is_refused_before_any_stage(tmp_path, capsys, monkeypatch):
    """#61 item 2: `OSError: [Errno 30] Read-only file system` in a 23-line traceback (failed before).
    Simulated: root may write through chmod, so access() and mkdir() answer as on a read-only mount."""
    ro = tmp_path / "ro"
    ro.mkdir()
    real_access, real_mkdir = os.access, Path.mkdir

    def access(path, mode, *a, **k):
        if Path(path).resolve() == ro and mode & os.W_OK:
            return False
        return real_access(path, mode, *a, **k)

    def mkdir(self, *a, **k):
        if ro in self.resolve().parents:
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real_mkdir(self, *a, **k)

    monkeypatch.setattr(os, "access", access)
    monkeypatch.setattr(Path, "mkdir", mkdir)
    out = ro / "run"
    rc, lines = _guarded(["pipeline", "--config", str(ROOT / "configs" / "pipeline_webshop.yaml"),
                          f"--out_dir={out}"], capsys)  # fmt: skip
    assert rc == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"error: --out_dir={str(out)!r}: {str(ro)!r} is not a writable folder")


# ------------------------------------------------------------------------ 3. full disk in collect
def _disk_full_after(monkeypatch, folder: Path, lines: int) -> None:
    """Files opened for writing under ``folder`` take ``lines`` more lines, then half of the next and
    raise ``OSError(ENOSPC)`` (as a full disk does)."""
    real_open = Path.open
    left = [lines]

    class Full:
        def __init__(self, fh):
            self._fh = fh

        def write(self, text):
            n = text.count("\n")
            if n > left[0]:
                keep = "".join(text.splitlines(keepends=True)[: left[0]])
                self._fh.write(keep + text[len(keep) : len(keep) + 20])  # a cut line, as a full disk leaves
                self._fh.flush()
                left[0] = 0
                raise OSError(errno.ENOSPC, "No space left on device")
            left[0] -= n
            return self._fh.write(text)

        def __getattr__(self, name):
            return getattr(self._fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._fh.close()

    def open_(self, mode="r", *a, **k):
        fh = real_open(self, mode, *a, **k)
        return Full(fh) if folder in self.resolve().parents and any(c in mode for c in "aw+") else fh

    monkeypatch.setattr(Path, "open", open_)


@pytest.mark.parametrize("mode", ["new", "append", "overwrite"])
def test_a_full_disk_during_collect_keeps_the_file_and_the_episodes_collected(
    tmp_path, capsys, monkeypatch, mode
):
    """#61 item 3: episodes were gathered in memory and written only at the end; a full disk then lost
    them all, in a 24-39-line traceback (failed before)."""
    from dreamgym.schema import read_trajectories, save_trajectories

    out = tmp_path / "data.jsonl"
    if mode != "new":
        from dreamgym.collect import collect_trajectories

        save_trajectories(out, collect_trajectories("webshop", "train", 2, 0, seed=9, batch_size=2))
    before = out.read_bytes() if out.exists() else None
    _disk_full_after(monkeypatch, tmp_path, 3)
    flag = [] if mode == "new" else [f"--{mode}"]
    rc, lines = _guarded(["collect", "--n-expert", "6", "--n-random", "0", "--batch-size", "2",
                          "--out", str(out), *flag], capsys)  # fmt: skip
    assert rc == 2 and len(lines) == 1, lines
    kept = Path(f"{out}.partial")
    assert lines[0].startswith(f"error: --out {out}: no space left on the device after 3 of 6 episodes")
    assert f"kept in {kept}" in lines[0]
    assert (out.read_bytes() if out.exists() else None) == before  # the file is as it was
    assert len(list(read_trajectories(kept))) == 3  # whole lines only: the cut one was taken back
    monkeypatch.undo()
    rc, lines = _guarded(
        ["collect", "--n-expert", "1", "--n-random", "0", "--out", str(out), "--append"], capsys
    )
    assert rc == 2 and f"{kept} holds 3 episodes of an interrupted collect" in lines[0], lines


def test_collect_writes_episodes_as_they_end(tmp_path, capsys):
    """The kept file is the collection's own: a collect that ends normally leaves no ``.partial`` and
    appends to an existing file."""
    from dreamgym.schema import read_trajectories

    out = tmp_path / "data.jsonl"
    for flag in ([], ["--append"]):
        rc, lines = _guarded(["collect", "--n-expert", "2", "--n-random", "0", "--batch-size", "2",
                              "--out", str(out), *flag], capsys)  # fmt: skip
        assert rc == 0 and not lines
    assert len(list(read_trajectories(out))) == 4 and not list(tmp_path.glob("*.partial"))


# -------------------------------------------------------------------------- 4. signals, typos
_SIGTERM_IN_A_STAGE = """
import os, signal, sys, time
from pathlib import Path
from dreamgym.errors import run_guarded
from dreamgym.lab.stages import StageClock
def collect(out):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)
def main(argv):
    StageClock()("collect_train", collect, Path("x"))
sys.exit(run_guarded(main, []))
"""


def test_sigterm_in_a_collect_or_evaluate_stage_prints_interrupted():
    """#61 item 4: SIGTERM killed the process in a non-fit stage with no `interrupted:` line (failed before)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", _SIGTERM_IN_A_STAGE], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("interrupted:")]
    assert proc.returncode == 143 and len(lines) == 1, proc.stderr[-2000:]
    assert "stage collect_train stopped by a signal (SIGTERM)" in lines[0] and "starts again" in lines[0]


def test_a_signal_in_a_fit_that_saves_no_checkpoints_promises_no_resume(sft_setup, tmp_path, request):
    """#61 item 4: `--quick` fits save no checkpoints, yet the stage said it would resume from one (failed
    before)."""
    from dreamgym.errors import Interrupted
    from dreamgym.lab.stages import StageClock, fit_stage

    prev = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, prev))
    args = _sft_args(sft_setup, "tiny", tmp_path)[3:]
    quick = [*args, "--trainer.max_steps=3",
             "--model.init_args.lr_scheduler.init_args.total_steps=3", "--trainer.callbacks=[]", "--trainer.enable_checkpointing=false",
             "--trainer.callbacks+=fault_toy.SignalAt", "--trainer.callbacks.at_step=1"]  # fmt: skip
    config = str(ROOT / "configs" / "webshop_policy_sft.yaml")
    with pytest.raises(Interrupted) as info:
        StageClock()("arm/s0", fit_stage, config, quick, tmp_path / "out", "model.init_args.save_dir")
    message = str(info.value)
    assert info.value.code == 143 and "stage arm/s0 stopped by a signal (SIGTERM)" in message
    assert "checkpoint" in message and "resumes from its last saved checkpoint" not in message
    assert "starts again" in message


def test_a_misspelt_trainer_key_in_a_yaml_gets_did_you_mean(tmp_path, capsys):
    """#61 item 4: `Group 'trainer' does not accept option 'max_step'` had no suggestion (failed before)."""
    config = tmp_path / "typo.yaml"
    config.write_text(f"__base__: [{ROOT / 'configs' / 'webshop_grpo.yaml'}]\ntrainer:\n  max_step: 3\n")
    rc, lines = _guarded(["fit", "--config", str(config), "--print_config"], capsys)
    assert rc == 2 and len(lines) == 1, lines
    assert "'trainer.max_step': did you mean '--trainer.max_steps'" in lines[0]

"""Fault tests: a GRPO fit in the synthetic env killed with SIGKILL and resumed with ``--ckpt_path last``
continues with the same counters and the same (non-empty) written-back replay buffer."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from rl_toy import make_toy_tokenizer

ROOT = Path(__file__).resolve().parents[1]
ITERATIONS = 6


def _config(tmp: Path, tok: str) -> Path:
    cfg = {
        "seed_everything": 0,
        "trainer": {
            "accelerator": "cpu", "devices": 1, "max_steps": -1, "max_epochs": -1, "limit_val_batches": 0,
            "num_sanity_val_steps": 0, "log_every_n_steps": 1, "enable_progress_bar": False,
            "logger": {"class_path": "lightning.pytorch.loggers.TensorBoardLogger",
                       "init_args": {"save_dir": str(tmp / "runs"), "name": "fault"}},
            "callbacks": [{"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                           "init_args": {"save_last": True, "every_n_train_steps": 1}}],
        },
        "model": {
            "class_path": "models.policy_rl.PolicyRL",
            "init_args": {
                "policy": {"class_path": "dreamgym.modeling.LanguageModel",
                           "init_args": {"preset": "tiny", "tokenizer_path": tok, "max_positions": 512}},
                "schedule": {"class_path": "dreamgym.rl.schedules.SyntheticSchedule",
                             "init_args": {"iterations": ITERATIONS,
                                           "env": {"class_path": "fault_toy.ScriptedSyntheticFactory"}}},
                "eval_env": {"class_path": "dreamgym.envs.factory.EnvFactory",
                             "init_args": {"name": "letters", "split": "test", "batch_size": 2, "max_steps": 2}},
                "collector": {"class_path": "dreamgym.rl.collector.RolloutCollector",
                              "init_args": {"max_new_tokens": 16, "max_prompt_tokens": 128, "constrained": True}},
                "curriculum": {"class_path": "dreamgym.curriculum.RewardVarianceCurriculum"},
                "tasks_per_batch": 2, "group_size": 2, "minibatches": 1,
            },
        },
        "data": {"class_path": "datamodules.rollouts.RolloutDataModule", "init_args": {"eval_tasks": 2}},
    }  # fmt: skip
    path = tmp / "grpo_fault.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _fit(config: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    return subprocess.Popen(
        [sys.executable, "-m", "dreamgym", "fit", "--config", str(config), *extra],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _state(ckpt: Path) -> dict:
    ck = torch.load(ckpt, map_location="cpu", weights_only=False)
    rl = ck["dreamgym_rl"]
    (buffer,) = rl["replay_buffers"].values()
    return {"step": ck["global_step"], "schedule": rl["schedule"], "buffer": buffer["transitions"],
            "curriculum": rl.get("curriculum")}  # fmt: skip


@pytest.mark.slow
def test_sigkill_then_ckpt_path_last_resumes_counters_and_written_back_buffer(tmp_path):
    tok = make_toy_tokenizer(tmp_path / "tok")
    config = _config(tmp_path, tok)
    ckpt_dir = tmp_path / "runs" / "fault" / "version_0" / "checkpoints"
    proc = _fit(config)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:  # kill once a mid-run checkpoint exists
        steps = [
            int(m.group(1)) for p in ckpt_dir.glob("epoch=*.ckpt") if (m := re.search(r"step=(\d+)", p.name))
        ]
        if (ckpt_dir / "last.ckpt").exists() and any(2 <= n < ITERATIONS for n in steps):
            break
        time.sleep(0.2)
    assert proc.poll() is None, f"the fit ended before it could be killed:\n{proc.communicate()[0][-3000:]}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _state(ckpt_dir / "last.ckpt")
    assert 1 <= before["step"] < ITERATIONS and before["buffer"], "nothing was written back before the kill"
    assert before["schedule"]["synthetic_transitions"] == len(before["buffer"])  # every synthetic step kept

    resumed = _fit(config, "--ckpt_path", "last")
    out = resumed.communicate(timeout=600)[0]
    assert resumed.returncode == 0, out[-3000:]
    assert "--ckpt_path last: resuming" in out and str(ckpt_dir / "last.ckpt") in out
    assert not (tmp_path / "runs" / "fault" / "version_1").exists()  # logs continue in the same version
    after = _state(ckpt_dir / "last.ckpt")
    assert after["step"] == ITERATIONS and after["schedule"]["iteration"] == ITERATIONS
    # the buffer came back whole: what was there at the kill is its prefix, and it grew by exactly the
    # synthetic transitions of the resumed iterations
    assert after["buffer"][: len(before["buffer"])] == before["buffer"]
    assert len(after["buffer"]) == after["schedule"]["synthetic_transitions"] > len(before["buffer"])
    assert after["schedule"]["real_transitions"] == before["schedule"]["real_transitions"] == 0


@pytest.mark.slow
def test_interrupted_fit_stage_resumes_from_its_checkpoint_and_other_args_start_fresh(tmp_path, capsys):
    from dreamgym.lab.stages import fit_stage, stage_log_dir

    tok = make_toy_tokenizer(tmp_path / "tok")
    config = _config(tmp_path, tok)
    fail = ["--trainer.callbacks+=fault_toy.FailOnce", "--trainer.callbacks.at_step=3",
            f"--trainer.callbacks.flag={tmp_path / 'failed_once'}"]  # fmt: skip
    out = tmp_path / "stage" / "policy"
    with pytest.raises(RuntimeError, match="injected failure after step 3"):
        fit_stage(str(config), fail, out, "model.init_args.save_dir")
    ckpts = stage_log_dir(out) / "version_0" / "checkpoints"
    # nothing looks done; Lightning runs checkpoint callbacks last, so the failure preempted step 3's
    assert not out.exists() and _state(ckpts / "last.ckpt")["step"] == 2

    assert fit_stage(str(config), fail, out, "model.init_args.save_dir") == out  # same arguments: resumed
    assert "resuming the interrupted fit" in capsys.readouterr().out
    assert not (stage_log_dir(out) / "version_1").exists()  # logs continue in the interrupted version
    after = _state(ckpts / "last.ckpt")
    assert after["step"] == ITERATIONS and after["schedule"]["iteration"] == ITERATIONS and out.exists()

    other = tmp_path / "stage" / "other"  # a stage fresh in its own folder; and one with changed args
    stage_log_dir(other).parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(stage_log_dir(out), stage_log_dir(other))
    fit_stage(str(config), [*fail, "--seed_everything=1"], other, "model.init_args.save_dir")
    assert "come from other arguments: starting fresh" in capsys.readouterr().out
    assert (stage_log_dir(other) / "version_1").exists()  # a new version; the old one is left alone
    assert _state(stage_log_dir(other) / "version_0" / "checkpoints" / "last.ckpt")["step"] == ITERATIONS

    # the same settings spelt otherwise than recorded (a piece setting the config's own values, as after an
    # upgrade that changed how a suite writes its arms): the resolved config is the same, so it resumes
    shutil.rmtree(out)  # the stage asked again, of its own folder
    same = [*fail, {"seed_everything": 0, "trainer": {"log_every_n_steps": 1}}]
    assert fit_stage(str(config), same, out, "model.init_args.save_dir") == out and out.exists()
    said = capsys.readouterr().out
    assert "the same settings, spelt otherwise" in said and "resuming the interrupted fit" in said
    assert not (stage_log_dir(out) / "version_1").exists()


@pytest.mark.parametrize(
    "signum, code, name", [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "SIGINT")]
)
def test_a_signal_stops_a_fit_with_a_non_zero_exit_and_how_to_resume(
    tmp_path, capsys, request, signum, code, name
):
    """#39: SIGTERM made Lightning stop gracefully and `make run` exit 0 as if finished."""
    from dreamgym.errors import run_guarded
    from dreamgym.lab.stages import StageClock, fit_stage

    # Lightning ignores SIGINT for the rest of the process after it handled one (an earlier test may have)
    prev = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, prev))
    tok = make_toy_tokenizer(tmp_path / "tok")
    config = _config(tmp_path, tok)
    sig = ["--trainer.callbacks+=fault_toy.SignalAt", "--trainer.callbacks.at_step=2",
           f"--trainer.callbacks.signum={int(signum)}"]  # fmt: skip
    assert (
        run_guarded(
            lambda argv: __import__("dreamgym.cli").cli.main(argv), ["fit", "--config", str(config), *sig]
        )
        == code
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"interrupted: `fit` stopped by {name}") and "--ckpt_path last" in err[-1]
    out = tmp_path / "stage" / "policy"  # through the pipeline's stage runner: the stage is named
    stage = StageClock()
    with pytest.raises(Exception) as info:
        stage("rl", fit_stage, str(config), sig, out, "model.init_args.save_dir")
    assert f"stage rl stopped by a signal ({name.split()[0]}); rerun the same command" in str(info.value)
    assert "resumes from its last saved checkpoint" in str(info.value)  # this config saves checkpoints
    assert getattr(info.value, "code", None) == code and not out.exists()


@pytest.mark.slow
def test_a_resumed_grpo_fit_ends_with_the_weights_of_an_uninterrupted_one(tmp_path):
    """#39: resume must reproduce: the sampling RNG (python, numpy, torch) is in the RL checkpoint, so a
    fit that failed after step 3 and resumed with ``--ckpt_path last`` ends bit for bit where an
    uninterrupted fit ends (two uninterrupted fits agree with each other first)."""
    from dreamgym.cli import main as cli_main

    tok = make_toy_tokenizer(tmp_path / "tok")

    def final(name: str, *extra: str) -> dict:
        run = tmp_path / name
        run.mkdir()
        config = _config(run, tok)
        try:
            cli_main(["fit", "--config", str(config), *extra])
        except RuntimeError as exc:
            assert "injected failure" in str(exc)
            cli_main(["fit", "--config", str(config), *extra, "--ckpt_path", "last"])
        ck = torch.load(
            run / "runs" / "fault" / "version_0" / "checkpoints" / "last.ckpt", weights_only=False
        )
        assert ck["global_step"] == ITERATIONS
        return ck["state_dict"]

    a, b = final("a"), final("b")
    assert all(torch.equal(a[k], b[k]) for k in a)  # the fit itself is deterministic on CPU
    fail = ["--trainer.callbacks+=fault_toy.FailOnce", "--trainer.callbacks.at_step=3",
            f"--trainer.callbacks.flag={tmp_path / 'failed_once'}"]  # fmt: skip
    resumed = final("resumed", *fail)
    assert (tmp_path / "failed_once").exists()  # it did fail and resume
    differ = [k for k in a if not torch.equal(a[k], resumed[k])]
    assert not differ, f"{len(differ)} of {len(a)} tensors differ after the resume, e.g. {differ[:3]}"


@pytest.mark.slow
def test_a_resumed_sft_fit_sees_the_batches_of_an_uninterrupted_one(tmp_path):
    """#39: a policy warm start killed mid-epoch and resumed with ``--ckpt_path last`` used to start its
    data order again (Lightning: "your dataloader is not resumable"); now the interrupted epoch's order is
    made again from (seed, epoch) and the trained batches skipped: the final weights are bit-identical
    to an uninterrupted fit's (which two uninterrupted fits are to each other first)."""
    from dreamgym.cli import main as cli_main
    from dreamgym.collect import collect_trajectories

    data = tmp_path / "train.jsonl"
    collect_trajectories(
        "webshop", "train", 6, 0, out=data, seed=0, batch_size=3
    )  # 2 batches of 8 ... per epoch
    tok = make_toy_tokenizer(tmp_path / "tok")
    steps = 7  # over 2 epochs, so an epoch boundary is crossed after the resume too

    def final(name: str, *extra: str) -> dict:
        run = tmp_path / name
        args = [
            "fit", "--config", str(ROOT / "configs" / "webshop_policy_sft.yaml"),
            f"--model.init_args.policy.init_args.tokenizer_path={tok}", "--model.init_args.policy.init_args.preset=tiny",
            "--model.init_args.policy.init_args.max_positions=512", "--model.init_args.max_length=256",
            f"--model.init_args.save_dir={run / 'policy'}", f"--model.init_args.lr_scheduler.init_args.total_steps={steps}",
            f"--data.init_args.train_files=[{data}]", "--data.init_args.val_files=[]", "--data.init_args.batch_size=4",
            f"--trainer.max_steps={steps}", "--trainer.limit_val_batches=0", "--trainer.enable_progress_bar=false",
            "--trainer.callbacks.every_n_train_steps=1", f"--trainer.logger.init_args.save_dir={run / 'runs'}",
            "--trainer.precision=32-true", "--seed_everything=0", *extra,
        ]  # fmt: skip
        try:
            cli_main(args)
        except RuntimeError as exc:
            assert "injected failure" in str(exc)
            cli_main([*args, "--ckpt_path", "last"])
        (ckpt,) = (run / "runs").glob("*/version_0/checkpoints/last.ckpt")
        ck = torch.load(ckpt, weights_only=False)
        assert ck["global_step"] == steps
        return ck["state_dict"]

    a, b = final("a"), final("b")
    assert all(torch.equal(a[k], b[k]) for k in a)
    fail = ["--trainer.callbacks+=fault_toy.FailOnce", "--trainer.callbacks.at_step=3",
            f"--trainer.callbacks.flag={tmp_path / 'failed_once'}"]  # fmt: skip
    resumed = final("resumed", *fail)
    assert (tmp_path / "failed_once").exists()
    differ = [k for k in a if not torch.equal(a[k], resumed[k])]
    assert not differ, f"{len(differ)} of {len(a)} tensors differ after the resume, e.g. {differ[:3]}"


_KILL_DURING_SAVE = """
import pathlib, runpy, sys, time
import torch
real_save, calls = torch.save, [0]
def save(obj, f, *a, **k):  # the KILL_AT-th save writes part of the checkpoint, then hangs until killed
    calls[0] += 1
    if calls[0] == {kill_at}:
        f.write(b"part of a checkpoint")
        f.flush()
        pathlib.Path({mark!r}).write_text(str(getattr(f, "name", f)))
        time.sleep(600)
    return real_save(obj, f, *a, **k)
torch.save = save
sys.argv = ["dreamgym", "fit", "--config", {config!r}]
runpy.run_module("dreamgym", run_name="__main__")
"""


@pytest.mark.slow
def test_a_kill_during_a_checkpoint_save_keeps_the_last_good_checkpoint(tmp_path):
    """#39 item 3: with the run folder and $TMPDIR on different filesystems, a kill during a save left
    ``last.ckpt`` empty. Here the fourth save (iteration 2's second) is killed half-written, with $TMPDIR
    on another filesystem where there is one (/dev/shm): ``last.ckpt`` stays whole and the run resumes."""
    tok = make_toy_tokenizer(tmp_path / "tok")
    config = _config(tmp_path, tok)
    ckpt_dir = tmp_path / "runs" / "fault" / "version_0" / "checkpoints"
    mark = tmp_path / "saving"
    other = Path("/dev/shm")
    tmpdir = other if other.is_dir() and other.stat().st_dev != tmp_path.stat().st_dev else tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)]),
        "TMPDIR": str(tmpdir),
    }
    script = _KILL_DURING_SAVE.format(kill_at=4, mark=str(mark), config=str(config))
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not mark.exists():
        time.sleep(0.1)
    assert mark.exists(), f"the fit never reached its fourth save:\n{proc.communicate()[0][-3000:]}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    last, cut = ckpt_dir / "last.ckpt", Path(mark.read_text()).name
    assert (
        cut.endswith(".partial") and Path(mark.read_text()).parent == ckpt_dir
    )  # written beside, not in $TMPDIR
    # iteration 2 saves a numbered checkpoint and last.ckpt; whichever was cut, last.ckpt is whole
    assert last.stat().st_size > 0 and _state(last)["step"] == (1 if "last" in cut else 2)
    resumed = _fit(config, "--ckpt_path", "last")
    out = resumed.communicate(timeout=600)[0]
    assert resumed.returncode == 0, out[-3000:]
    assert _state(last)["step"] == ITERATIONS

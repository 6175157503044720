"""The main job's figure: Wilson intervals, TensorBoard scalars read back, a PNG written; without
matplotlib (the plots extra) a figure says how to install it and the rest of the package runs."""

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from dreamgym.lab.plots import (
    MatplotlibMissing,
    interrupted_spans,
    main_job_figure,
    scalar_series,
    wilson_interval,
)

ROOT = Path(__file__).resolve().parents[1]


def test_wilson_interval():
    lo, hi = wilson_interval(66, 400)
    assert lo < 66 / 400 < hi and (round(lo, 3), round(hi, 3)) == (0.132, 0.205)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_scalars_from_tensorboard_and_the_figure(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(tmp_path / "runs" / "webshop_grpo" / "version_0"))
    for step, v in enumerate([0.1, 0.3, 0.2]):
        w.add_scalar("rollout/success_rate", v, step)
    w.add_scalar("sim/audit_success_precision", 0.5, 0)
    w.close()
    series = scalar_series(tmp_path / "runs" / "webshop_grpo")
    assert [v for _, v in series["rollout/success_rate"]] == pytest.approx([0.1, 0.3, 0.2])
    assert scalar_series(tmp_path / "missing") == {}
    evals = {"policy_sft": {"test/success_rate": 0.165}, "policy_rl": {"test/success_rate": 0.18}}
    png = main_job_figure(evals, 400, tmp_path / "runs" / "webshop_grpo", tmp_path / "fig.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main_job_figure(evals, 400, None, tmp_path / "fig2.png").exists()  # no RL logs: still a figure


def test_interrupted_spans_time_each_killed_process_up_to_its_last_checkpoint(tmp_path):
    import os

    from torch.utils.tensorboard import SummaryWriter

    # three processes, the last one alive; the second was killed before it saved a checkpoint
    for version, (start, saved) in enumerate(((1000, 1400), (2000, None), (3000, 3050))):
        run = tmp_path / "tb" / f"version_{version}"
        w = SummaryWriter(str(run / "tmp"))
        w.add_scalar("perf/iteration_s", 1.0, 0, walltime=start + 1)
        w.close()
        (f,) = (run / "tmp").iterdir()
        parts = f.name.split(".")
        parts[3] = str(start)  # the file name's creation time
        f.rename(run / ".".join(parts))
        (run / "tmp").rmdir()
        if saved is not None:
            for name, t in (("epoch=0-step=1.ckpt", saved - 200), ("last.ckpt", saved)):
                (run / "checkpoints").mkdir(exist_ok=True)
                (run / "checkpoints" / name).write_bytes(b"x")
                os.utime(run / "checkpoints" / name, (t, t))
    assert interrupted_spans(tmp_path / "tb") == [400.0, 0.0]
    assert interrupted_spans(tmp_path / "missing") == []


# ------------------------------------------------------------------- without the plots extra (matplotlib)
def test_without_matplotlib_a_figure_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MatplotlibMissing, match=r"pip install 'dreamgym\[plots\]'"):
        main_job_figure({"policy_sft": {"test/success_rate": 0.5}}, 4, None, tmp_path / "fig.png")
    assert isinstance(MatplotlibMissing(), ImportError) and not (tmp_path / "fig.png").exists()


def _venv_without_matplotlib(root: Path) -> Path:
    """A virtual environment holding this one's packages (linked) but matplotlib and the editable
    install of the package: ``pip install .`` without the plots extra, the package read from PYTHONPATH."""
    env = root / "venv"
    venv.create(env, with_pip=False, symlinks=True)
    (site,) = env.glob("lib/python*/site-packages")
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(("matplotlib", "mpl_toolkits", "pylab", "__editable__", "dreamgym")):
            (site / entry.name).symlink_to(entry)
    return env / "bin" / "python"


def test_without_matplotlib_fit_runs(tmp_path):
    """The acceptance check of the plots extra: in an environment without matplotlib (neither the module
    nor its metadata, which torchmetrics reads before importing it), ``python -m dreamgym fit`` trains a
    1-step ``tiny`` policy warm start. That no module imports matplotlib but the lab's figures, and those
    inside a function, is tests/test_structure.py's ``OPTIONAL_IMPORTS``."""
    from rl_toy import make_toy_tokenizer

    from dreamgym.collect import collect_trajectories

    tok = make_toy_tokenizer(tmp_path / "tok")
    data = tmp_path / "train.jsonl"
    collect_trajectories("webshop", "train", 2, 0, out=data, seed=0, batch_size=2)
    python = str(_venv_without_matplotlib(tmp_path))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    missing = "import importlib.util as u; assert u.find_spec('matplotlib') is None, 'matplotlib is here'"
    subprocess.run([python, "-c", missing], env=env, check=True, timeout=300)
    done = subprocess.run(
        [python, "-m", "dreamgym", "fit", "--config", str(ROOT / "configs" / "webshop_policy_sft.yaml"),
         f"--model.init_args.policy.init_args.tokenizer_path={tok}", "--model.init_args.policy.init_args.preset=tiny",
         "--model.init_args.policy.init_args.max_positions=256", "--model.init_args.max_length=128",
         f"--model.init_args.save_dir={tmp_path / 'policy'}", "--model.init_args.lr_scheduler.init_args.total_steps=2",
         f"--data.init_args.train_files=[{data}]", "--data.init_args.val_files=[]", "--data.init_args.batch_size=2",
         "--trainer.max_steps=1", "--trainer.limit_val_batches=0", "--trainer.enable_progress_bar=false",
         f"--trainer.logger.init_args.save_dir={tmp_path / 'runs'}", "--trainer.precision=32-true"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (tmp_path / "policy").is_dir()

"""The main job's figure: Wilson intervals, TensorBoard scalars read back, a PNG written."""

import pytest

from dreamgym.lab.plots import interrupted_spans, main_job_figure, scalar_series, wilson_interval


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

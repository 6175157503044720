"""Progress lines: totals and ETA, bounded by max_time; the RL module reports its planned iterations."""

from dreamgym.progress import eta_line


def test_eta_line_total_rate_and_time_cap():
    line = eta_line("ExperienceSFT", 120, 1800, 1.2, None, {"train/loss": 2.3125})
    assert line == "[ExperienceSFT] step 120/1800 (6.7 %), 1.20 s/step, ETA 33.6 min, train/loss 2.312"
    assert eta_line("PolicyRL", 3, 30, 60.0, 120.0, {}).endswith("ETA 2.0 min")  # max_time ends first
    assert eta_line("PolicyRL", 3, None, 60.0, None, {}) == "[PolicyRL] step 3, 60.00 s/step"
    assert eta_line("X", 0, 10, None, None, {}) == "[X] step 0/10 (0.0 %)"


def test_schedules_plan_iterations():
    from dreamgym.rl.schedules import RealSchedule, Sim2RealSchedule, SyntheticSchedule

    assert SyntheticSchedule(None, iterations=7).planned_iterations() == 7
    assert RealSchedule(None, iterations=5).planned_iterations() == 5
    assert RealSchedule(None, budget=100).planned_iterations() is None
    assert Sim2RealSchedule(None, None, synthetic_iterations=4, real_iterations=2).planned_iterations() == 6


def test_progress_counts_rl_iterations_not_optimizer_steps(capsys):
    """PolicyRL's global step counts optimiser steps (several per iteration); the line counts iterations."""
    from types import SimpleNamespace

    from dreamgym.progress import StepProgress

    module = SimpleNamespace(it=0)
    module.planned_steps, module.progress_step = (lambda: 30), (lambda: module.it)
    trainer = SimpleNamespace(
        max_steps=-1, global_step=0, callbacks=[], callback_metrics={}, is_global_zero=True
    )
    cb = StepProgress(every_s=0)
    cb.on_train_start(trainer, module)
    module.it, trainer.global_step = 3, 12
    cb._print(trainer, module)
    assert "step 3/30 (10.0 %)" in capsys.readouterr().out


def test_count_progress_prints_at_most_every_interval_and_once_at_the_end(capsys, monkeypatch):
    from dreamgym import progress

    clock = iter([0.0, 5.0, 31.0, 40.0, 70.0, 71.0])  # start, then one reading per call
    monkeypatch.setattr(progress.time, "perf_counter", lambda: next(clock))
    shown = progress.CountProgress("policy_sft on webshop/test", total=10, every_s=30.0)
    for done in (1, 3, 4, 10, 10):  # 5 s: quiet; 31 s: a line; 40 s: quiet; 70 s: the end; again: quiet
        shown(done)
    assert capsys.readouterr().out.splitlines() == [
        "[policy_sft on webshop/test] episode 3/10 (30.0 %), 10.33 s/episode, ETA 1.2 min",
        "[policy_sft on webshop/test] episode 10/10 (100.0 %), 7.00 s/episode, ETA 0.0 min",
    ]


def test_planned_progress_bar_total_and_description():
    from types import SimpleNamespace

    from dreamgym.progress import PlannedProgressBar

    class RL:
        def __init__(self, planned):
            self.planned = planned

        def planned_steps(self):
            return self.planned

    bar = PlannedProgressBar()
    bar._trainer = SimpleNamespace(
        lightning_module=RL(30), max_epochs=-1, max_steps=-1, num_training_batches=float("inf")
    )
    assert bar.total_train_batches == 30 and bar._get_train_description(0) == "Epoch 0"
    bar._trainer.lightning_module = RL(None)  # a budget decides: the loader's own total
    assert bar.total_train_batches == float("inf")


def test_every_step_bounded_fit_config_uses_the_planned_bar():
    """No fit config shows Lightning's ``Epoch 0/-2`` bar: each that prints step lines (``StepProgress``)
    also replaces the bar (``PlannedProgressBar``)."""
    from pathlib import Path

    from dreamgym.config_files import load_config

    configs = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))
    checked = 0
    for path in configs:  # as composed from their configs/base/ pieces
        callbacks = (load_config(path).get("trainer") or {}).get("callbacks") or []
        names = {c.get("class_path", "").rsplit(".", 1)[-1] for c in callbacks if isinstance(c, dict)}
        if "StepProgress" in names:
            checked += 1
            assert "PlannedProgressBar" in names, path.name
    assert checked  # not vacuous: the configs do print step lines

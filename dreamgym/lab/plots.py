"""The main job's figure: held-out success of the warm start and the RL policy, and RL's learning curve.

:func:`main_job_figure` writes one PNG with two panels:

- held-out real test tasks: success of each policy with a 95 % Wilson interval (n tasks);
- the RL run, per iteration, read from its TensorBoard events: the rollout success in the env RL
  trained in (``rollout/success_rate``; synthetic for DreamGym) and, where the reward audit ran, the
  audit's success precision (``sim/audit_success_precision``: how often a synthetic success was real).

matplotlib comes with the ``plots`` extra (``pip install 'dreamgym[plots]'``) and is imported only when a
figure is drawn (:func:`pyplot`); without it that raises :class:`MatplotlibMissing`, which the pipeline and
the benchmark report print as one line before going on. Reading TensorBoard scalars needs no extra.
"""

from __future__ import annotations

import math
from pathlib import Path

__all__ = ["wilson_interval", "scalar_series", "main_job_figure", "pyplot", "MatplotlibMissing"]


class MatplotlibMissing(ImportError):
    """No figure can be drawn: matplotlib (the ``plots`` extra) is not installed. Everything else of the
    lab runs without it; the pipeline and the benchmark report print this message and go on."""

    def __init__(self) -> None:
        super().__init__(
            "matplotlib is not installed (figures need the plots extra: pip install 'dreamgym[plots]')"
        )


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend, imported now (:class:`MatplotlibMissing`
    without matplotlib)."""
    try:
        import matplotlib
    except ImportError:
        raise MatplotlibMissing() from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


CURVE_TAGS = ("rollout/success_rate", "sim/audit_success_precision")


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion ``successes / n``."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def scalar_series(log_dir: str | Path | None, tags=CURVE_TAGS) -> dict[str, list[tuple[int, float]]]:
    """``tag -> [(step, value), ...]`` from the TensorBoard event files under ``log_dir`` (newest run
    folder that has any of ``tags``); empty when there are none."""
    return {t: [(e.step, e.value) for e in es] for t, es in scalar_events(log_dir, tags).items()}


def scalar_events(log_dir: str | Path | None, tags=None) -> dict[str, list]:
    """``tag -> [ScalarEvent(wall_time, step, value), ...]`` of the newest run folder under ``log_dir`` that
    logs any of ``tags`` (None: any scalar); empty when there is none."""
    if log_dir is None or not Path(log_dir).exists():
        return {}
    runs = sorted(
        {p.parent for p in Path(log_dir).rglob("events.out.tfevents.*")}, key=lambda p: p.stat().st_mtime
    )
    for run in reversed(runs):
        found = run_events(run, tags)
        if found:
            return found
    return {}


def run_scalars(run: str | Path, tags) -> dict[str, list[tuple[int, float]]]:
    """``tag -> [(step, value), ...]`` of the ``tags`` that ``run`` logs (a run folder, all its event
    files in order, or one event file)."""
    return {t: [(e.step, e.value) for e in es] for t, es in run_events(run, tags).items()}


def run_events(run: str | Path, tags=None) -> dict[str, list]:
    """``tag -> [ScalarEvent, ...]`` of the ``tags`` (None: every scalar) that ``run`` logs."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run), size_guidance={"scalars": 0})
    acc.Reload()
    logged = acc.Tags()["scalars"]
    return {t: acc.Scalars(t) for t in (logged if tags is None else tags) if t in logged}


def interrupted_spans(log_dir: str | Path) -> list[float]:
    """Wall-clock seconds of each earlier process that logged into ``log_dir`` before the newest one
    (a fit killed and resumed from its checkpoint writes one event file per process) whose work a later
    process continued: from the event file's creation (its name carries it) to the newest checkpoint in
    its own ``version_*/checkpoints`` folder; 0 for a process killed before it saved one (the next one
    started again, so its time bought nothing the record measures)."""

    def created(f: Path) -> int:
        return int(f.name.split(".")[3])

    files = sorted(Path(log_dir).rglob("events.out.tfevents.*"), key=created)
    spans = []
    for f in files[:-1]:
        saved = [c.stat().st_mtime for c in (f.parent / "checkpoints").glob("*.ckpt")]
        spans.append(max(0.0, max(saved) - created(f)) if saved else 0.0)
    return spans


def main_job_figure(
    evals: dict[str, dict[str, float]], n_tasks: int, rl_log_dir: str | Path | None, out: str | Path
) -> Path:
    """Write the two-panel PNG (module docstring) to ``out``; returns its path.

    Args:
        evals: ``{"policy_sft": {"test/success_rate": ...}, "policy_rl": {...}}`` (the pipeline's eval).
        n_tasks: held-out tasks each policy played.
        rl_log_dir: the RL run's TensorBoard directory (None or no events: the panel says so).
        out: the PNG path.

    Raises:
        MatplotlibMissing: matplotlib is not installed.
    """
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    names = [n for n in ("policy_sft", "policy_rl") if n in evals]
    labels = {"policy_sft": "warm start (SFT)", "policy_rl": "RL (GRPO)"}
    rates = [evals[n].get("test/success_rate", 0.0) for n in names]
    lows, highs = (
        zip(*(wilson_interval(round(r * n_tasks), n_tasks) for r in rates), strict=True)
        if names
        else ((), ())
    )
    err = [
        [r - lo for r, lo in zip(rates, lows, strict=True)],
        [hi - r for r, hi in zip(rates, highs, strict=True)],
    ]
    left.bar(
        [labels[n] for n in names], rates, yerr=err, capsize=6, color=["#8da0cb", "#fc8d62"][: len(names)]
    )
    for i, r in enumerate(rates):
        left.text(i, r + 0.01, f"{r:.3f}", ha="center", va="bottom")
    left.set_ylabel("success rate")
    left.set_ylim(0, max([0.1, *highs]) * 1.2)
    left.set_title(f"held-out real test tasks (n={n_tasks}, 95 % Wilson)")
    series = scalar_series(rl_log_dir)
    if series:
        for tag, points in series.items():
            steps, values = zip(*points, strict=True)
            right.plot(range(1, len(values) + 1), values, marker="o", label=tag)
        right.set_xlabel("RL iteration")
        right.set_ylim(0, 1.05)
        right.legend(loc="best", fontsize=8)
    else:
        right.text(0.5, 0.5, "no RL TensorBoard scalars found", ha="center", va="center")
        right.set_axis_off()
    right.set_title("RL run: rollout success and audit precision")
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out

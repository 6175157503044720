"""The benchmark report, regenerated from the stored records alone (no model is loaded).

Per arm: held-out success and score (mean +- sample std over seeds), the paired two-sided exact McNemar
test (:func:`dreamgym.stats.mcnemar_exact`) against the warm start, against real-env GRPO and against
DreamGym GRPO (the reference of the paper's ablations; task by task, seed with seed, pooled over seeds; the
warm start is greedy and deterministic, so each seed pairs with its one record), and the two-sided exact
sign test of each task's seed-mean success against the warm start's (:func:`per_task`: one pair per task,
however many seeds),
real transitions split into offline / online / audit, synthetic transitions, fit wall-clock and CPU
seconds. The cost model projects each arm's wall-clock when a real step costs ``L`` seconds (a live
website): ``fit_seconds + online * L`` (local env steps are already inside ``fit_seconds``; sessions are
assumed sequential; the reward audit's real replays are a diagnostic a live deployment would switch off
or budget, so they are listed, not priced), and the crossover latency above which an arm is cheaper
than real-env GRPO. Two figures: held-out success against online real transitions (error bars: std over seeds), and
the validation success curves of the RL arms.
"""

from __future__ import annotations

import math
import os
import statistics
from pathlib import Path

from dreamgym.lab.overrides import flow
from dreamgym.stats import exchangeable_sign_test, mcnemar_exact

__all__ = [
    "arm_summary",
    "paired",
    "per_task",
    "crossover_latency",
    "render_report",
    "summary_table",
    "section_text",
    "comparison_table",
    "audit_table",
    "AUDIT_TAGS",
    "expected_sections",
    "write_report",
    "WARM_ARM",
]

WARM_ARM = "warm_start"
AUDIT_TAGS = (
    "sim/audit_success_precision",
    "sim/audit_success_recall",
    "sim/audit_ended_real",
    "sim/audit_score_synthetic",
    "sim/audit_score_real",
)
"""The audit's closed-loop figures a record keeps per iteration (``dreamgym.rl`` logs them when a synthetic
phase replays some of its episodes in the real env): what :func:`audit_table` summarises."""
MARKER = "<!-- benchmark:{name}:{end} -->"
SUMMARY_MARKER = "<!-- results:{name}:{end} -->"


def _mean_std(xs: list[float]) -> tuple[float, float]:
    if not xs or any(math.isnan(x) for x in xs):  # no records, or a figure one of them lacks
        return math.nan, math.nan
    return statistics.fmean(xs), (
        statistics.stdev(xs) if len(xs) > 1 else math.nan
    )  # no spread from one seed


def arm_summary(records: list[dict]) -> dict:
    """Mean and std over an arm's seed records of the figures the table shows."""
    out = {"seeds": [r["seed"] for r in records], "n_tasks": len(records[0]["successes"]) if records else 0}
    for key, get in (
        ("success", lambda r: r["metrics"]["success_rate"]),
        ("score", lambda r: r["metrics"]["score_mean"]),
        ("online", lambda r: r["real_transitions"]["online"]),
        ("audit", lambda r: r["real_transitions"]["audit"]),
        ("synthetic", lambda r: r["synthetic_transitions"]),
        ("fit_seconds", lambda r: r["fit_seconds"]),
        # a fit resumed after a kill: the killed processes' CPU time is lost with them
        ("fit_cpu_seconds", lambda r: math.nan if r.get("fit_interrupted") else r["fit_cpu_seconds"]),
    ):
        out[key] = _mean_std([float(get(r)) for r in records])
    out["offline"] = records[0]["real_transitions"]["offline"] if records else 0
    return out


def paired(a: list[dict], b: list[dict]) -> dict | None:
    """Two-sided exact McNemar over the pooled task pairs of arms ``a`` and ``b`` (seed with seed; a
    one-record arm pairs with every seed of the other, so a 3-seed arm counts each task three times against
    the warm start). None when they share no seed or their tasks differ."""
    if not a or not b:
        return None
    by_seed = {r["seed"]: r for r in b}
    pairs = [(r, by_seed.get(r["seed"], b[0] if len(b) == 1 else None)) for r in a]
    if len(a) == 1 and len(b) > 1:
        pairs = [(a[0], r) for r in b]
    pairs = [(x, y) for x, y in pairs if y is not None and x["task_ids"] == y["task_ids"]]
    if not pairs:
        return None
    xa = [c == "1" for x, _ in pairs for c in x["successes"]]
    xb = [c == "1" for _, y in pairs for c in y["successes"]]
    return mcnemar_exact(xa, xb)


def per_task(a: list[dict], b: list[dict]) -> dict | None:
    """Two-sided exact sign test of each task's success averaged over ``a``'s seeds against the same
    task's averaged over ``b``'s (the warm start: its one record): ``higher_a`` tasks where ``a``'s
    seed-mean is higher, ``higher_b`` lower, ties dropped, with the null distribution of exchangeable
    records (:func:`dreamgym.stats.exchangeable_sign_test`: a 3-seed mean against one record is "higher"
    on hard tasks more often than "lower" even when the records do not differ). One pair per task however
    many seeds; with one record each it is :func:`paired`'s McNemar. None when an arm has no record or their
    records hold different tasks."""
    if not a or not b or any(r["task_ids"] != a[0]["task_ids"] for r in [*a, *b]):
        return None

    def bits(records: list[dict]) -> list[list[float]]:
        return [[float(c == "1") for c in r["successes"]] for r in records]

    return exchangeable_sign_test(bits(a), bits(b))


def _number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _p(p: float) -> str:
    """A p value: three decimals, or two significant digits below 0.001 (never ``0.000``)."""
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def _vs(test: dict | None, higher: str = "only") -> str:
    """``"gained / lost, p = ..."`` of a two-sided test (empty without one)."""
    if test is None:
        return ""
    a, b = (test["only_a"], test["only_b"]) if higher == "only" else (test["higher_a"], test["higher_b"])
    return f"{int(a)} / {int(b)}, p = {_p(test['p_two_sided'])}"


def crossover_latency(arm: dict, real: dict) -> float | None:
    """Real-step latency ``L`` above which ``arm`` costs less wall-clock than real-env GRPO:
    ``fit_a + n_a L = fit_r + n_r L`` with ``n`` the online real transitions (None: never)."""
    n_a, n_r = arm["online"][0], real["online"][0]
    if n_r <= n_a:
        return None
    return max(0.0, (arm["fit_seconds"][0] - real["fit_seconds"][0]) / (n_r - n_a))


def _fmt(ms: tuple[float, float], digits: int = 3) -> str:
    m, s = ms
    if math.isnan(m):
        return "n/a"
    return f"{m:.{digits}f}" if math.isnan(s) else f"{m:.{digits}f} +- {s:.{digits}f}"


def figure_paths(cfg) -> list[Path]:
    """The report's two PNGs (success against real transitions, learning curves)."""
    # named after the report, so a second results file of the same suite never overwrites the first's figures
    return [cfg.report.with_name(f"{cfg.report.stem}_{kind}.png") for kind in ("success", "curves")]


def written_files(cfg) -> list[Path]:
    """Every file a suite run writes: its results, report, figures, and the sections of ``document`` and
    ``summary`` it regenerates."""
    return [
        p for p in (cfg.results, cfg.report, *figure_paths(cfg), cfg.document, cfg.summary) if p is not None
    ]


def _figures(cfg, by_arm: dict[str, list[dict]], summaries: dict[str, dict]) -> list[Path]:
    from dreamgym.lab.plots import pyplot

    plt = pyplot()
    paths = figure_paths(cfg)
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, s in summaries.items():
        err = None if math.isnan(s["success"][1]) else s["success"][1]
        ax.errorbar(s["online"][0], s["success"][0], yerr=err, fmt="o", capsize=3, label=name)
    ax.set_xscale("symlog", linthresh=100)
    ax.set_xlabel("online real transitions used in RL")
    ax.set_ylabel(f"held-out success ({next(iter(summaries.values()))['n_tasks']} test tasks)")
    ax.legend(fontsize=7)
    ax.set_title(f"{cfg.name}: success against real-environment cost")
    fig.tight_layout()
    fig.savefig(paths[0], dpi=120)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, records in by_arm.items():
        curves = [r.get("curve", {}).get("val/success_rate") or [] for r in records]
        steps = sorted({s for c in curves for s, _ in c})
        if not steps:
            continue
        mean = [statistics.fmean([v for c in curves for s, v in c if s == step]) for step in steps]
        ax.plot(steps, mean, marker=".", label=f"{name} ({len(records)} seeds)")
    ax.set_xlabel("training step of the log (validation every `val_check_interval` iterations)")
    ax.set_ylabel("validation success (real held-out tasks, greedy)")
    ax.legend(fontsize=7)
    ax.set_title(f"{cfg.name}: learning curves (mean over seeds)")
    fig.tight_layout()
    fig.savefig(paths[1], dpi=120)
    plt.close(fig)
    return paths


FOOTNOTE = (
    "p: two-sided exact McNemar test, min(1, 2 P[X >= max(b, c)]) with X ~ Binomial(b + c, 1/2) and b / c "
    "the tasks only this arm / only the other solved, pooled over seed-paired task outcomes (seed with seed; "
    "the warm start's one record pairs with every seed, so an arm's 3 seeds count each task three times "
    "against it). Per task: each task's success averaged over the arm's seeds against the warm start's, "
    "tasks higher / lower (ties dropped), two-sided exact sign test whose null lets the warm start's record be "
    "any of the task's records (all splits equally likely, task by task; a seed-mean against one record is "
    "higher more often than lower on hard tasks even when nothing differs, so the Binomial(n, 1/2) null does "
    "not apply; with one seed it is the McNemar test). "
)


def _by_arm(cfg, results: dict) -> tuple[dict[str, list[dict]], dict[str, dict]]:
    """The records of each arm of ``cfg`` that has any (in the config's order), and their summaries."""
    runs = results.get("runs", {})
    by_arm = {a.name: [r for k, r in sorted(runs.items()) if r["arm"] == a.name] for a in cfg.arms}
    by_arm = {k: v for k, v in by_arm.items() if v}
    return by_arm, {name: arm_summary(recs) for name, recs in by_arm.items()}


def comparison_table(cfg, results: dict) -> str:
    """The report's main table (one row per arm with records, in the config's order) and its footnote."""
    by_arm, summaries = _by_arm(cfg, results)
    real_arm, dream_arm = cfg.real_arm, cfg.dream_arm
    lines = [
        "| arm | seeds | success | score | offline real | online real | audit real | synthetic | fit s | fit CPU s | vs warm start, seed-pooled McNemar (only arm / only warm, p) | vs warm start, per-task sign test (higher / lower, p) | vs real GRPO (only arm / only it, p) | vs DreamGym GRPO (only arm / only it, p) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    warm = by_arm.get(WARM_ARM, [])
    for name, s in summaries.items():
        mine = by_arm[name]
        vs_warm = paired(mine, warm) if name != WARM_ARM else None
        task_warm = per_task(mine, warm) if name != WARM_ARM else None
        vs_real = paired(mine, by_arm.get(real_arm, [])) if name not in (real_arm, WARM_ARM) else None
        vs_dream = paired(mine, by_arm.get(dream_arm, [])) if name not in (dream_arm, WARM_ARM) else None
        lines.append(
            f"| {name} | {len(s['seeds'])} | {_fmt(s['success'])} | {_fmt(s['score'])} | {s['offline']} | {_fmt(s['online'], 0)} | "
            f"{_fmt(s['audit'], 0)} | {_fmt(s['synthetic'], 0)} | {_fmt(s['fit_seconds'], 0)} | "
            f"{_fmt(s['fit_cpu_seconds'], 0)} | {_vs(vs_warm)} | {_vs(task_warm, 'higher')} | {_vs(vs_real)} | {_vs(vs_dream)} |"
        )  # fmt: skip
    lines += [
        "",
        FOOTNOTE
        + "Offline real: transitions of the offline data the arm depends on (the warm start's, plus the "
        "experience model's on-policy and own extra data for arms that simulate).",
    ]
    return "\n".join(lines) + "\n"


def _per_iteration(curve: list) -> list[float]:
    """A record's curve ``[(step, value), ...]`` as one value per step (a resumed fit logs the step it resumed
    at twice: the later value is kept)."""
    return list({int(step): float(value) for step, value in curve}.values())


def audit_table(cfg, results: dict) -> list[str]:
    """Lines of the closed-loop table of the arms that played synthetic steps, from their records' curves:
    each audit figure (:data:`AUDIT_TAGS`) averaged over the fit's iterations, then mean +- std over seeds,
    and the synthetic episodes' success at the first and last iteration. [] when no record has them."""
    by_arm, _ = _by_arm(cfg, results)
    rows = []
    for name, records in by_arm.items():
        curves = [r.get("curve", {}) for r in records if r.get("synthetic_transitions")]
        curves = [c for c in curves if all(c.get(t) for t in AUDIT_TAGS)]
        if not curves:
            continue
        cells = [
            _fmt(_mean_std([statistics.fmean(_per_iteration(c[t])) for c in curves]), 2) for t in AUDIT_TAGS
        ]
        rollout = [_per_iteration(c.get("rollout/success_rate") or []) for c in curves]
        first, last = (_fmt(_mean_std([r[i] for r in rollout if r]), 2) for i in (0, -1))
        rows.append(f"| {name} | {len(curves)} | " + " | ".join(cells) + f" | {first} -> {last} |")
    if not rows:
        return []
    return [
        "",
        "Closed loop during RL: every iteration the audit replays some of the policy's synthetic episodes in the "
        "real env (their action sequences); each figure is averaged over the fit's iterations, then mean +- std "
        "over seeds. Precision / recall: of the synthetic successes, the share the real env also calls a success "
        "/ of the real successes, the share the synthetic env called one; ended real: the share of the replayed "
        "sequences that end the episode in the real env too; pay: the mean score of those episodes in each env.",
        "",
        "| arm | seeds | success precision | success recall | ended real | pay, synthetic | pay, real | synthetic "
        "success, first -> last iteration |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ]


def render_report(cfg, results: dict) -> str:
    """The markdown report of ``results`` (no file is read or written; the figure links name
    :func:`figure_paths`): what :func:`write_report` writes to ``cfg.report``."""
    runs = results.get("runs", {})
    by_arm, summaries = _by_arm(cfg, results)
    real_arm = cfg.real_arm
    lines = [f"## Benchmark suite `{cfg.name}`", ""]
    shared = results.get("shared", {})
    commits = sorted(
        {
            r.get("commit", "unknown")[:7] + ("+dirty" if r.get("dirty") else "")
            for r in runs.values()
            if "commit" in r
        }
    )
    lines += [
        f"Command: `{cfg.command}` (report only: add "
        f"`--report_only true`). Records: `{cfg.results}`; commits of the records: {', '.join(commits) or 'n/a'}.",
        f"Shared stages from `{cfg.pipeline}` (`{shared.get('pipeline_out_dir', '?')}`): offline train transitions "
        f"{shared.get('offline_train_transitions', '?')}"
        + (
            f", the warm start's own train transitions (its extra episodes, DAgger labels) "
            f"{shared['warm_start_train_transitions']}"
            if shared.get("warm_start_train_transitions")
            else ""
        )
        + (
            f", the warm start's on-policy train transitions {shared.get('onpolicy_train_transitions', '?')}"
            # a simulator SHA-256 of None: only the real-env stages were prepared (older records lack the key)
            if (shared.get("weights_sha256") or {}).get("simulator", "") is not None
            else "; the simulator's stages (experience model, on-policy episodes, judge) not built yet"
        )
        + (
            f", the experience model's own extra train transitions {shared['experience_train_transitions']}"
            if shared.get("experience_train_transitions")
            else ""
        )
        + f". Held-out: the first {shared.get('eval_tasks', '?')} real test tasks, greedy."
        + _pipeline_overrides(shared)
        + (f" Built on {_host(shared['host'])}." if shared.get("host") else ""),
        # the numbers of `values` (a path such as the grounded env's record is no budget)
        f"Budget of every RL arm: {', '.join(f'{k} = {v}' for k, v in cfg.values.items() if _number(v))}.",
        "",
    ]
    lines += comparison_table(cfg, results).splitlines()
    lines += audit_table(cfg, results)
    missing = [f"{a.name} (seeds {[s for s in cfg.arm_seeds(a) if f'{a.name}/s{s}' not in runs]})" for a in cfg.arms
               if any(f"{a.name}/s{s}" not in runs for s in cfg.arm_seeds(a))]  # fmt: skip
    resumed = sorted({r["arm"] for r in runs.values() if r.get("fit_interrupted")})
    if resumed:
        lines += [
            "",
            f"Resumed after a kill: {', '.join(resumed)} (fit s adds the killed processes' wall-clock from "
            "their event files to their last checkpoint, stops included; their CPU time is lost, so fit CPU s "
            "is n/a).",
        ]
    if missing:
        lines += ["", f"**Not run yet** (no record): {'; '.join(missing)}."]
    real = summaries.get(real_arm)
    if real:
        lines += ["", "Cost model: projected wall-clock (hours) when one online real step costs L seconds "
                  "(`fit_seconds + online * L`, sequential sessions; the audit's replays, the shared offline "
                  "data and the experience model's training are not priced), and the crossover L above which "
                  "the arm is cheaper than real-env GRPO.", "",
                  "| arm | " + " | ".join(f"L = {L:g} s" for L in cfg.live_step_seconds) + " | crossover L |",
                  "|---|" + "---|" * (len(cfg.live_step_seconds) + 1)]  # fmt: skip
        for name, s in summaries.items():
            if name == WARM_ARM:
                continue
            proj = [(s["fit_seconds"][0] + s["online"][0] * L) / 3600 for L in cfg.live_step_seconds]
            cross = crossover_latency(s, real) if name != real_arm else None
            lines.append(f"| {name} | " + " | ".join(f"{p:.2f}" for p in proj) + " | "
                         + ("" if name == real_arm else ("never" if cross is None else f"{cross:.3f} s")) + " |")  # fmt: skip
    if summaries:
        lines += ["", " ".join(f"![{p.stem}]({p.name})" for p in figure_paths(cfg))]
    return "\n".join(lines) + "\n"


def write_report(cfg, results: dict) -> Path:
    """Write ``cfg.report`` (:func:`render_report`) and the figures from ``results``; replace the suite's
    section of ``cfg.document`` (``BENCHMARKS.md``) and of ``cfg.summary`` (the README's
    :func:`summary_table`) between their markers when the files have them. Returns the report path."""
    cfg.report.parent.mkdir(parents=True, exist_ok=True)
    text = render_report(cfg, results)
    by_arm, summaries = _by_arm(cfg, results)
    if summaries:
        from dreamgym.lab.plots import MatplotlibMissing

        links = " ".join(f"![{p.stem}]({p.name})" for p in figure_paths(cfg))
        try:  # a plotting failure must not lose the tables
            _figures(cfg, by_arm, summaries)
        except MatplotlibMissing as exc:  # figures drawn before stay linked (a report regenerated elsewhere)
            kept = all(p.exists() for p in figure_paths(cfg))
            print(
                f"[benchmark] no figures: {exc}" + ("; the existing ones are kept" if kept else ""),
                flush=True,
            )
            if not kept:
                text = text.replace(links, f"(no figures: {exc})")
        except Exception as exc:  # noqa: BLE001
            text = text.replace(links, f"(no figures: {type(exc).__name__}: {exc})")
    cfg.report.write_text(text)
    if cfg.document is not None:
        _put_between(cfg.document, MARKER, cfg.name, _document_section(cfg.document, text, cfg.report))
    if cfg.summary is not None:
        _put_between(cfg.summary, SUMMARY_MARKER, cfg.name, summary_table(cfg, results))
    print(text, flush=True)
    return cfg.report


def summary_table(cfg, results: dict) -> str:
    """The short table of every arm of ``cfg`` (run or not) next to the paper's figure, for the README."""
    by_arm, summaries = _by_arm(cfg, results)
    n_eval = next((len(r["successes"]) for recs in by_arm.values() for r in recs if "successes" in r), "?")
    lines = [
        "| arm | held-out success %, ours (seeds) | online real transitions | vs warm start, seed-pooled McNemar (gained / lost, p) | vs warm start, per-task sign test (higher / lower, p) | paper (Llama-3.1-8B, success %) |",
        "|---|---|---|---|---|---|",
    ]  # fmt: skip
    warm = by_arm.get(WARM_ARM, [])
    for arm in cfg.arms:
        s = summaries.get(arm.name)
        if s is None:
            lines.append(f"| {arm.name} | not run yet | | | | {arm.paper} |")
            continue
        mine = by_arm[arm.name]
        vs, task = (paired(mine, warm), per_task(mine, warm)) if arm.name != WARM_ARM else (None, None)
        lines.append(
            f"| {arm.name} | {_fmt(tuple(100 * x for x in s['success']), 1)} ({len(s['seeds'])}) | "
            f"{_fmt(s['online'], 0)} | {_vs(vs)} | {_vs(task, 'higher')} | {arm.paper} |"
        )
    lines += ["", f"Generated by `python -m dreamgym benchmark --config configs/benchmark_{cfg.name}.yaml "
              f"--report_only true` from `{cfg.results}` ({n_eval} held-out tasks per record; mean +- std over "
              "seeds; p: two-sided exact tests against the warm start: McNemar on the task outcomes pooled over "
              "seeds, each seed paired with the warm start's one record, and the sign test on each task's "
              "seed-mean success, its null the records' exchangeability). Full table, cost model and plots: BENCHMARKS.md."]  # fmt: skip
    return "\n".join(lines) + "\n"


def section_text(doc_text: str, marker: str, name: str) -> str | None:
    """What lies between ``marker``'s start and end lines in ``doc_text`` as :func:`write_report` writes it
    (``MARKER`` for a document's suite section, ``SUMMARY_MARKER`` for the README's), None without them."""
    start, end = marker.format(name=name, end="start"), marker.format(name=name, end="end")
    if start not in doc_text or end not in doc_text:
        return None
    inner = doc_text.split(start, 1)[1].split(end, 1)[0]
    return inner[1:] if inner.startswith("\n") else inner


def _put_between(doc: Path, marker: str, name: str, text: str) -> None:
    """Replace what lies between ``marker``'s start and end lines in ``doc`` with ``text`` (no markers: no-op)."""
    start, end = marker.format(name=name, end="start"), marker.format(name=name, end="end")
    if not doc.exists():
        return
    body = doc.read_text()
    if start not in body or end not in body:
        return
    head, rest = body.split(start, 1)
    _, tail = rest.split(end, 1)
    doc.write_text(f"{head}{start}\n{text}{end}{tail}")


def _document_section(doc: Path, text: str, report: Path) -> str:
    """The report ``text`` as the suite's section of ``doc``: figure links made relative to ``doc``, the
    title one level down."""
    rel = Path(os.path.relpath(report.parent.resolve(), doc.resolve().parent))
    return text.replace("](suite_", f"]({rel.as_posix()}/suite_").replace(
        "## Benchmark suite", "### Benchmark suite"
    )


def expected_sections(cfg, results: dict) -> dict[tuple[Path, str], str]:
    """Every text a report-only run of ``cfg`` writes, keyed by ``(file, marker)`` (``marker`` "" for the
    whole report file), regenerated in-process from ``results`` without drawing the figures: what the
    committed files must hold (``tests/test_report_drift.py``)."""
    text = render_report(cfg, results)
    out = {(cfg.report, ""): text}
    if cfg.document is not None:
        out[(cfg.document, MARKER)] = _document_section(cfg.document, text, cfg.report)
    if cfg.summary is not None:
        out[(cfg.summary, SUMMARY_MARKER)] = summary_table(cfg, results)
    return out


def _pipeline_overrides(shared: dict) -> str:
    """The report's note of the pipeline values a suite changed (``pipeline_overrides``, in YAML flow style;
    records written before config pieces: their ``pipeline_args`` strings), "" when none."""
    if shared.get("pipeline_overrides"):
        return f" Pipeline overrides: `{flow(shared['pipeline_overrides'])}`."
    if shared.get("pipeline_args"):
        return f" Pipeline overrides: `{' '.join(shared['pipeline_args'])}`."
    return ""


def _host(host: dict) -> str:
    """The machine of :func:`~dreamgym.lab.provenance.host_fingerprint` in words."""
    return (
        f"{host.get('device', '?')} (bf16 matmuls: {host.get('matmul', '?')}, torch {host.get('torch', '?')})"
    )

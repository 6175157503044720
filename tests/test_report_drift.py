"""Every generated benchmark text that is committed equals what its committed results file regenerates.

The suites' sections of BENCHMARKS.md and the README and their reports under ``benchmarks/results/`` are
written by ``python -m dreamgym benchmark --config ... --report_only true``; here each is regenerated
in-process from its results file (no model, no figure drawn) and compared with the committed text, so a
figure edited by hand, or a report generator changed without regenerating, fails. Archived reports whose
header lines were written by hand are compared from their table on.
"""

import difflib
import functools
import shlex
from pathlib import Path

import pytest

from dreamgym.lab.benchmark.report import comparison_table, expected_sections, section_text
from dreamgym.lab.benchmark.suite import Arm, SuiteConfig, load_results, parse_suite_config

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
CONFIGS = sorted((ROOT / "configs").glob("benchmark_*.yaml"))
REPORTS = sorted(RESULTS.rglob("suite_*.md"))


@functools.cache
def _config_reports() -> frozenset[Path]:
    """The reports the bundled suite configs write (checked with their config)."""
    return frozenset(
        ROOT / parse_suite_config(["--config", str(c.relative_to(ROOT))])[0].report for c in CONFIGS
    )


def _same(committed: str | None, expected: str, where: str) -> None:
    assert committed is not None, f"{where}: no generated section (its markers are missing)"
    if committed != expected:
        diff = "\n".join(
            difflib.unified_diff(
                expected.splitlines(), committed.splitlines(), "regenerated", "committed", lineterm=""
            )
        )
        pytest.fail(
            f"{where} differs from what its results file regenerates; rerun the suite with `--report_only true` "
            f"instead of editing it by hand:\n{diff}"
        )


def _check(cfg: SuiteConfig) -> list[Path]:
    """Compare every text ``cfg``'s report-only run writes with the committed one; the files checked."""
    checked = []
    for (path, marker), text in expected_sections(cfg, load_results(cfg.results)).items():
        body = path.read_text()
        _same(body if not marker else section_text(body, marker, cfg.name), text, f"{path.name} ({cfg.name})")
        checked.append(path.resolve())
    return checked


def _command_of(report: Path) -> list[str] | None:
    """The ``python -m dreamgym benchmark`` arguments a report names on its ``Command:`` line, when they
    write that very report (None: a hand-written header, e.g. an archived table's)."""
    line = next((x for x in report.read_text().splitlines() if x.startswith("Command: `")), "")
    argv = shlex.split(line.removeprefix("Command: `").split("`", 1)[0])[4:] if line else []
    if "--report" not in argv or (ROOT / argv[argv.index("--report") + 1]).resolve() != report.resolve():
        return None
    return argv


@pytest.fixture
def in_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # the configs name their files relative to the repository


@pytest.mark.parametrize("config", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_a_suites_generated_sections_are_what_its_results_regenerate(config, in_root):
    cfg, _ = parse_suite_config(["--config", str(config.relative_to(ROOT))])
    if not cfg.results.exists():
        pytest.skip(f"{cfg.results} is not committed")
    checked = _check(cfg)
    assert cfg.report.resolve() in checked and (cfg.document is None or cfg.document.resolve() in checked)


@pytest.mark.parametrize("report", REPORTS, ids=[str(r.relative_to(RESULTS)) for r in REPORTS])
def test_every_suite_report_under_results_is_what_its_results_regenerate(report, in_root):
    """A report its config writes is checked above; one made with overrides (its ``Command:`` line) whole;
    an archived one (hand-written header) from its table on, against the JSON beside it."""
    if report in _config_reports():
        return
    argv = _command_of(report)
    if argv is not None:
        assert report in _check(parse_suite_config(argv)[0])
        return
    results = report.with_suffix(".json")
    assert results.exists(), f"{report}: no results file beside it ({results.name}) to regenerate it from"
    body = report.read_text()
    table = body[body.index("| arm | seeds |") :]
    table = table[: table.index("\n", table.index("\np: ") + 1) + 1]
    arms = [row.split("|")[1].strip() for row in table.splitlines()[2:] if row.startswith("| ")]
    cfg = SuiteConfig(name=report.stem, pipeline="-", out_dir="-", results=str(results), report=str(report),
                      arms=[Arm(a) for a in arms], document=None)  # fmt: skip
    _same(table, comparison_table(cfg, load_results(results)), str(report.relative_to(ROOT)))

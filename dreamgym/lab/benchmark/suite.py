"""The headline benchmark: DreamGym's arms side by side on one warm start and one held-out task set.

``python -m dreamgym benchmark --config configs/benchmark_webshop.yaml`` runs, under ``out_dir``:

1. the shared stages of the suite's pipeline config (:func:`dreamgym.lab.pipeline.prepare`: offline data,
   tokenizer, experience model, warm start, the warm start's held-out episodes), skipped when done;
2. per experience-model variant an arm asks for (e.g. ``no_retrieval``: ``k = 0``), a separately
   *trained* experience model, the same two fits as the shared one with the variant's overrides;
3. per arm and seed: the arm's RL fit from the warm start (``--seed_everything`` = seed), then the
   trained policy's greedy episodes on the held-out real test tasks ``0..eval_tasks-1``.

Each (arm, seed) is a stage whose record lands in ``results`` (a committed JSON) as soon as it ends,
so an interrupted suite resumes where it stopped and its report is regenerated from that file alone
(:mod:`dreamgym.lab.benchmark.report`). A record holds the held-out metrics and per-task outcomes (for the
paired tests), real transitions split into offline / online / audit, synthetic transitions, wall-clock
and CPU seconds of the fit and of the evaluation, the validation curve, the exact overrides (``args``: the
config pieces, :mod:`dreamgym.lab.overrides`; records written before pieces hold ``--key=value`` strings)
and the commit. Arm overrides are templates: ``"{seed}"`` and every key of ``values`` are filled in.
``--quick true`` runs the same plan once per arm on the config's tiny ``quick_preset`` stages, in its own
folder (:meth:`SuiteConfig.quick_config`): a check that every arm runs, not a result.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from dreamgym.lab.benchmark.report import AUDIT_TAGS
from dreamgym.lab.overrides import fill_templates, load_pieces, refuse_legacy_keys, upgrade_argv
from dreamgym.lab.pipeline import (
    EXPERIENCE_EXPORT,
    POLICY_EXPORT,
    experience_fit,
    parse_pipeline_config,
    plays_simulator,
    prepare,
    rl_paths,
    warm_episodes_path,
)
from dreamgym.lab.provenance import host_fingerprint
from dreamgym.lab.stages import StageClock, count_transitions, fit_stage, policy_episodes

__all__ = [
    "Arm",
    "ExperienceVariant",
    "SuiteConfig",
    "check_same_shared_stages",
    "parse_suite_config",
    "suite_pipeline_config",
    "record_curves",
    "uses_judge",
    "run_suite",
    "load_results",
    "main",
]

CURVE_TAGS = (
    "val/success_rate",
    "rollout/success_rate",
    "rollout/score_mean",
    *AUDIT_TAGS,  # the closed loop on the policy's own synthetic episodes, every iteration
)
"""The series a record keeps whole (:func:`record_curves`)."""
RECORD_TAGS = ("data/real_transitions", "data/synthetic_transitions", "data/audit_transitions", *CURVE_TAGS)


@dataclass
class ExperienceVariant:
    """An experience model trained like the shared one but with the config pieces ``overrides`` added to
    both of its fits (e.g. ``[{data: {init_args: {k: 0}}}]``: no retrieval)."""

    name: str
    overrides: list[dict | str] = field(default_factory=list)
    description: str = ""


@dataclass
class Arm:
    """One arm of the suite.

    Attributes:
        name: the arm's name in the results and tables.
        rl_config: the LightningCLI RL config it fits; None: the warm start itself (no RL).
        overrides: config pieces of its fit (:mod:`dreamgym.lab.overrides`), after the suite's
            ``common_overrides`` (templates, see the module docstring).
        experience: the name of an :class:`ExperienceVariant` to simulate with (None: the shared one).
        seeds: the seeds it runs (None: the suite's ``seeds``).
        description: one line for the report.
        paper: the paper's figure for this arm (e.g. ``"63.9 (0 real)"``, Llama-3.1-8B success %), shown
            next to ours in the summary; "" when the paper has none.
        extends: the name of an earlier arm whose ``rl_config`` (unless set here), ``experience`` (unless
            set here) and ``overrides`` this one starts from; its own ``overrides`` come after them (one
            lever changed against a recipe, without copying the recipe).
        retrain: without ``rl_config``: the warm start's recipe trained again, once per seed
            (``seed_everything`` = seed; the shared warm start is the config's own seed, 0), then the same
            held-out evaluation: the recipe's spread beside the one warm start every RL arm starts from
            (``overrides``: config pieces of that fit). False: the shared warm start's own record.
    """

    name: str
    rl_config: str | None = None
    overrides: list[dict | str] = field(default_factory=list)
    experience: str | None = None
    seeds: list[int] | None = None
    description: str = ""
    paper: str = ""
    extends: str | None = None
    retrain: bool = False


def _resolve_extends(arms: list[Arm]) -> list[Arm]:
    """``arms`` with every ``extends`` replaced by the earlier arm's recipe (see :class:`Arm`)."""
    out: list[Arm] = []
    for arm in arms:
        if arm.extends is not None:
            base = next((a for a in out if a.name == arm.extends and a.rl_config), None)
            if base is None:
                raise ValueError(
                    f"SuiteConfig.arms: arm {arm.name!r} extends {arm.extends!r}, which is not an RL arm listed "
                    f"before it (RL arms before it: {[a.name for a in out if a.rl_config]}); move it "
                    "after the arm it extends or fix the name"
                )
            arm = replace(
                arm, rl_config=arm.rl_config or base.rl_config, experience=arm.experience or base.experience,
                overrides=[*base.overrides, *arm.overrides], extends=None,
            )  # fmt: skip
        out.append(arm)
    return out


class SuiteConfig:
    """A benchmark suite.

    Args:
        name: the suite's name (``webshop``, ``alfworld``).
        pipeline: the pipeline config whose shared stages give the warm start, experience model and data.
        pipeline_overrides: values of the pipeline config that this suite changes, in its own spelling
            (e.g. ``{out_dir: artifacts/x, eval_tasks: 200}``).
        out_dir: where the arms' checkpoints, logs and episodes go (not committed).
        results: the JSON file of records (committed; the report is regenerated from it).
        report: the markdown report written from ``results``.
        seeds: the default seeds of every arm.
        values: template values for the overrides (``"{iterations}"``, ``"{real_budget}"``, ...).
        common_overrides: config pieces every RL arm gets first (the same budget and hyper-parameters).
        arms: the arms, in the order they run and are reported.
        experience_variants: separately trained experience models the arms may name.
        live_step_seconds: real-step latencies (seconds) the cost model projects wall-clock at.
        document: the markdown document whose section between the suite's markers
            (``<!-- benchmark:NAME:start -->`` ... ``end``) the report replaces (None: none).
        summary: the document (the README) whose section between ``<!-- results:NAME:start -->`` ...
            ``end`` gets the short table of every arm next to the paper's figure (None: none).
        quick_preset: the ``--quick`` mode's changes (:meth:`quick_config`): ``pipeline_overrides`` (tiny
            shared stages, in place of the suite's; ``{out_dir}`` in them is the quick suite's folder),
            ``values``, ``common_overrides`` (appended) and ``seeds`` (every arm's).
        real_arm: the arm of the "vs real GRPO" column and the cost model's reference.
        dream_arm: the arm of the "vs DreamGym GRPO" column.
    """

    QUICK_KEYS = ("pipeline_overrides", "values", "common_overrides", "seeds")

    def __init__(
        self,
        name: str,
        pipeline: str,
        out_dir: str,
        results: str,
        report: str,
        seeds: list[int] | None = None,
        values: dict[str, str | int | float] | None = None,
        common_overrides: list[dict | str] | None = None,
        arms: list[Arm] | None = None,
        experience_variants: list[ExperienceVariant] | None = None,
        live_step_seconds: list[float] | None = None,
        document: str | None = "BENCHMARKS.md",
        pipeline_overrides: dict | None = None,
        summary: str | None = None,
        quick_preset: dict | None = None,
        real_arm: str = "real_grpo",
        dream_arm: str = "dreamgym_grpo",
    ):
        self.name, self.pipeline, self.pipeline_overrides = name, pipeline, dict(pipeline_overrides or {})
        self.out_dir, self.results, self.report = Path(out_dir), Path(results), Path(report)
        self.seeds = list(seeds if seeds is not None else [0, 1, 2])
        self.values = dict(values or {})
        self.common_overrides = load_pieces(common_overrides, "common_overrides")
        self.arms = [
            replace(a, overrides=load_pieces(a.overrides, f"arms[{a.name}].overrides"))
            for a in _resolve_extends(list(arms or []))
        ]
        self.variants = {
            v.name: replace(v, overrides=load_pieces(v.overrides, f"experience_variants[{v.name}].overrides"))
            for v in experience_variants or []
        }
        self.live_step_seconds = list(live_step_seconds or [0.5, 2.0, 10.0])
        self.document = Path(document) if document else None
        self.summary = Path(summary) if summary else None
        self.quick_preset = dict(quick_preset or {})
        self.real_arm, self.dream_arm = real_arm, dream_arm
        # the command that (re)makes this suite, for the report (set by parse_suite_config)
        self.command = f"python -m dreamgym benchmark --config configs/benchmark_{name}.yaml"
        bad = sorted(set(self.quick_preset) - set(self.QUICK_KEYS))
        if bad:
            raise ValueError(
                f"SuiteConfig.quick_preset: unknown key(s) {bad}; it may set {list(self.QUICK_KEYS)}"
            )
        names = [a.name for a in self.arms]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"SuiteConfig.arms: arm names must be unique; repeated: {dup}")
        for arm in self.arms:
            if arm.retrain and arm.rl_config is not None:
                raise ValueError(
                    f"SuiteConfig.arms: arm {arm.name!r} sets retrain: true and rl_config={arm.rl_config!r}; "
                    "retrain trains the warm start's recipe again (no RL): drop one of the two"
                )
            if arm.experience is not None and arm.experience not in self.variants:
                raise ValueError(
                    f"SuiteConfig.arms: arm {arm.name!r} names experience={arm.experience!r}, which is not in "
                    f"experience_variants {sorted(self.variants)}; add it there or remove the field"
                )

    def quick_config(self) -> SuiteConfig:
        """The ``--quick`` suite: every arm once on the tiny shared stages of ``quick_preset``. Everything
        it writes (shared stages, arms, results, report) goes under ``<out_dir>_quick``, never to the
        committed table, the document or the README."""
        if not self.quick_preset:
            raise ValueError(
                f"--quick: the suite {self.name!r} has no `quick_preset` section; add one (see SuiteConfig)"
            )
        q, root = self.quick_preset, f"{self.out_dir}_quick"
        seeds = list(q.get("seeds", [0]))
        return SuiteConfig(
            name=self.name,
            pipeline=self.pipeline,
            pipeline_overrides=fill_templates(
                q.get("pipeline_overrides", self.pipeline_overrides),
                {"out_dir": root},
                "quick_preset.pipeline_overrides",
            ),
            out_dir=root,
            results=f"{root}/{self.results.name}",
            report=f"{root}/{self.report.name}",
            seeds=seeds,
            values={**self.values, **q.get("values", {})},
            common_overrides=[*self.common_overrides, *q.get("common_overrides", [])],
            arms=[replace(a, seeds=None) for a in self.arms],
            experience_variants=list(self.variants.values()),
            live_step_seconds=self.live_step_seconds,
            document=None,
            summary=None,
            real_arm=self.real_arm,
            dream_arm=self.dream_arm,
        )

    @property
    def warm_arms(self) -> set[str]:
        """The arms without RL (their record is the warm start's held-out episodes)."""
        return {a.name for a in self.arms if a.rl_config is None and not a.retrain}

    def arm_seeds(self, arm: Arm) -> list[int]:
        """The seeds ``arm`` runs (the warm start is deterministic: one record)."""
        if arm.rl_config is None and not arm.retrain:
            return [0]
        return list(arm.seeds) if arm.seeds is not None else self.seeds

    def fill(self, overrides: list, seed: int) -> list:
        """``overrides`` with every ``"{name}"`` (a bare identifier in braces) in their strings replaced by
        ``values[name]`` or the seed (:func:`~dreamgym.lab.overrides.fill_templates`: a string that is only
        the template becomes the value, a number stays a number)."""
        return fill_templates(overrides, {**self.values, "seed": seed}, f"SuiteConfig {self.name!r}")

    def arm_overrides(self, arm: Arm, seed: int) -> list[dict]:
        """What ``arm`` with ``seed`` adds to its RL config (after the paths of its policy and simulator):
        the seed, ``common_overrides``, then its own ``overrides``, templates filled."""
        return [{"seed_everything": seed}, *self.fill([*self.common_overrides, *arm.overrides], seed)]


def parse_suite_config(argv: list[str]) -> tuple[SuiteConfig, dict]:
    """Parse ``--config X.yaml`` (with overrides) and the command's flags: ``(config, flags)``."""
    from jsonargparse import ActionConfigFile, ArgumentParser

    from dreamgym.config_files import expand_config_args

    parser = ArgumentParser(
        prog="python -m dreamgym benchmark", parser_mode="yaml", description=__doc__, exit_on_error=False
    )
    parser.add_argument("--config", action=ActionConfigFile)
    parser.add_class_arguments(SuiteConfig, nested_key=None)
    parser.add_argument("--only", type=list[str] | None, default=None, help="run only these arms")
    parser.add_argument("--report_only", type=bool, default=False, help="rewrite the report from `results`")
    parser.add_argument(
        "--quick",
        type=bool,
        default=False,
        help="every arm once on tiny models, in the `quick_preset` section's files",
    )
    given = upgrade_argv(argv)  # a recorded command's old `--common_args '[...]'` (the report keeps `argv`)
    refuse_legacy_keys(given)
    values = parser.parse_args(expand_config_args(given)).as_dict()  # `__base__`: dreamgym/config_files.py
    flags = {k: values.pop(k) for k in ("only", "report_only", "quick")}
    flags["seeds"] = None
    planned = _without_option(given, "--seeds")
    # `--seeds` on the command line selects what runs; the plan (report) stays the file's
    if planned != given:
        flags["seeds"] = values["seeds"]
        values["seeds"] = parser.parse_args(expand_config_args(planned)).as_dict()["seeds"]
    kwargs = {k: v for k, v in values.items() if k not in ("config", "__path__")}
    kwargs["arms"] = [Arm(**a) for a in kwargs.get("arms") or []]
    kwargs["experience_variants"] = [ExperienceVariant(**v) for v in kwargs.get("experience_variants") or []]
    unknown = sorted(set(flags["only"] or []) - {a.name for a in kwargs["arms"]})
    if unknown:
        raise ValueError(
            f"--only names unknown arm(s) {unknown}; the suite's arms are {[a.name for a in kwargs['arms']]}"
        )
    cfg = SuiteConfig(**kwargs)
    if flags.pop("quick"):
        cfg = cfg.quick_config()
    plan = argv
    for name in ("--only", "--seeds", "--report_only"):  # what runs now, not what the suite is
        plan = _without_option(plan, name)
    cfg.command = shlex.join(["python", "-m", "dreamgym", "benchmark", *plan])
    planned_seeds = {s for a in cfg.arms for s in cfg.arm_seeds(a)}
    if flags["seeds"] is not None and not set(flags["seeds"]) <= planned_seeds:
        raise ValueError(
            f"--seeds {flags['seeds']} names seed(s) {sorted(set(flags['seeds']) - planned_seeds)} that no arm "
            f"plans (planned: {sorted(planned_seeds)}); add them to the config's `seeds` to run them"
        )
    return cfg, flags


def _without_option(argv: list[str], name: str) -> list[str]:
    """``argv`` without ``name=value`` / ``name value``."""
    out, skip = [], False
    for i, a in enumerate(argv):
        if skip:
            skip = False
        elif a == name:
            skip = i + 1 < len(argv)
        elif not a.startswith(f"{name}="):
            out.append(a)
    return out


# ---------------------------------------------------------------------------------------------- results
def load_results(path: str | os.PathLike) -> dict:
    """The suite's stored records (``{"shared": {...}, "runs": {"arm/s0": record}}``; empty when new)."""
    path = Path(path)
    if not path.exists():
        return {"shared": {}, "runs": {}}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{path} is not valid JSON ({exc}); restore it from git or delete it to rerun"
        ) from None
    data.setdefault("shared", {})
    data.setdefault("runs", {})
    return data


def _store(path: Path, key: str | None, record: dict | None, shared: dict) -> dict:
    """Add ``record`` under ``key`` to the results file as it is on disk now (so suites running other
    arms in parallel processes keep each other's records, and a real-env-only process keeps the simulator
    facts a parallel one wrote) and return the merged results."""
    from dreamgym.lab.provenance import write_result

    results = load_results(path)
    results["shared"] = _keep_simulator_record(shared, results)
    if key is not None:
        results["runs"][key] = record
    write_result(path, results)
    return results


def _outcomes(episodes: Path) -> dict:
    """Held-out metrics and the per-task outcome string (``"0110..."``) of an episode file."""
    from dreamgym.envs.episodes import trajectory_metrics
    from dreamgym.schema import read_trajectories

    trajs = list(read_trajectories(episodes))
    metrics = {k: round(v, 6) for k, v in trajectory_metrics(trajs).items() if k != "reward_mean"}
    return {
        "metrics": metrics,
        "task_ids": [t.task_id for t in trajs],
        "successes": "".join("1" if t.success else "0" for t in trajs),
    }


def _last(series: dict, tag: str) -> float:
    points = series.get(tag) or []
    return float(points[-1][1]) if points else 0.0


# ---------------------------------------------------------------------------------------------- stages
def suite_pipeline_config(cfg: SuiteConfig):
    """The suite's pipeline config (:class:`~dreamgym.lab.stages.PipelineConfig`) with its
    ``pipeline_overrides``."""
    import yaml

    overrides = ["--config", yaml.safe_dump(cfg.pipeline_overrides)] if cfg.pipeline_overrides else []
    return parse_pipeline_config(["--config", cfg.pipeline, *overrides])


def _variant_model(cfg: SuiteConfig, pcfg, prep, variant: ExperienceVariant, stage: StageClock) -> Path:
    """The variant's experience model: the shared model's fits, on the same data (its own extra episodes
    too), with ``variant.overrides`` added."""
    d = cfg.out_dir / "experience" / variant.name
    train = [prep.train] + ([prep.experience_episodes] if prep.experience_episodes is not None else [])
    first = stage(
        f"experience_{variant.name}", fit_stage, pcfg.experience_config,
        [*experience_fit(pcfg, prep.tokenizer, train, prep.test), *variant.overrides],
        d / "offline", EXPERIENCE_EXPORT,
    )  # fmt: skip
    if prep.rollouts is None:
        return first
    return stage(
        f"experience_{variant.name}_onpolicy", fit_stage, pcfg.experience_config,
        [*experience_fit(pcfg, prep.tokenizer, [*train, prep.rollouts], prep.test, init=first), *variant.overrides],
        d / "onpolicy", EXPERIENCE_EXPORT,
    )  # fmt: skip


def _run_arm(cfg: SuiteConfig, pcfg, prep, arm: Arm, seed: int, stage: StageClock, shared: dict) -> dict:
    """Fit ``arm`` with ``seed`` (skipped when its policy exists) and evaluate it; its record (``shared``:
    the suite's shared record, whose transition counts and commit it reuses)."""
    from dreamgym.lab.plots import scalar_series

    out = cfg.out_dir / arm.name / f"s{seed}"
    out.mkdir(parents=True, exist_ok=True)
    variant = cfg.variants.get(arm.experience) if arm.experience else None
    simulator = prep.simulator if variant is None else _variant_model(cfg, pcfg, prep, variant, stage)
    paths = rl_paths(arm.rl_config, simulator, prep.policy_sft)
    args = cfg.arm_overrides(arm, seed)
    _, episodes, times = _fit_and_evaluate(
        stage, pcfg, f"{arm.name}/s{seed}", arm.rl_config, [paths, *args], out
    )
    series = scalar_series(out / "tb", tags=RECORD_TAGS)
    uses_simulator = plays_simulator(arm.rl_config)  # `paths` point its synthetic env(s) at the simulator
    offline = warm_start_offline(shared) + (
        shared["onpolicy_train_transitions"] + shared.get("experience_train_transitions", 0)
        if uses_simulator
        else 0
    )
    if uses_simulator and uses_judge(args):  # its rewards come from a judge trained on its own purchases
        offline += shared.get("judge_train_transitions", 0)
    return {
        "arm": arm.name,
        "seed": seed,
        **_outcomes(episodes),
        "real_transitions": {
            "offline": offline,
            "online": int(_last(series, "data/real_transitions")),
            "audit": int(_last(series, "data/audit_transitions")),
        },
        "synthetic_transitions": int(_last(series, "data/synthetic_transitions")),
        **times,
        "curve": record_curves(series),
        "rl_config": arm.rl_config,
        "args": args,
        "experience": arm.experience or "shared",
        "commit": shared["commit"],
        "dirty": shared["dirty"],
    }


def _fit_and_evaluate(
    stage: StageClock, pcfg, name: str, config: str, args: list, out: Path
) -> tuple[Path, Path, dict]:
    """Fit ``config`` with ``args`` as stage ``name`` (exported to ``out/policy``, TensorBoard in ``out/tb``;
    skipped when the policy exists), then play it on the held-out tasks (``out/test_episodes.jsonl``):
    the policy, its episodes and the record's timing fields (``fit_seconds``, ``fit_cpu_seconds``,
    ``fit_interrupted`` where a kill interrupted the fit, ``eval_seconds``, ``eval_cpu_seconds``). The fit's
    timing is kept in ``out/fit_timing.json``, so a policy found on disk keeps its first one."""
    from dreamgym.lab.plots import interrupted_spans

    timing_file = out / "fit_timing.json"
    t0, c0 = time.perf_counter(), time.process_time()
    policy = stage(name, fit_stage, config, args, out / "policy", POLICY_EXPORT, out / "tb")
    if not timing_file.exists():  # a fit that ran now
        # a fit resumed after a kill: the killed processes' wall-clock to their last checkpoint (their CPU
        # time is lost with them; the record says how many there were)
        earlier = interrupted_spans(out / "tb")
        timing_file.write_text(
            json.dumps(
                {
                    "seconds": time.perf_counter() - t0 + sum(earlier),
                    "cpu_seconds": time.process_time() - c0,
                    "interrupted_processes": len(earlier),
                }
            )
        )
    timing = json.loads(timing_file.read_text())
    t1, c1 = time.perf_counter(), time.process_time()
    episodes = policy_episodes(pcfg, policy, "test", pcfg.eval_tasks, out / "test_episodes.jsonl")
    return (
        policy,
        episodes,
        {
            "fit_seconds": round(timing["seconds"], 1),
            "fit_cpu_seconds": round(timing["cpu_seconds"], 1),
            **({"fit_interrupted": n} if (n := timing.get("interrupted_processes")) else {}),
            "eval_seconds": round(time.perf_counter() - t1, 1),
            "eval_cpu_seconds": round(time.process_time() - c1, 1),
        },
    )


def check_retrain_pipeline(cfg: SuiteConfig, pcfg, arms: list[Arm]) -> None:
    """Refuse, before the shared stages, a ``retrain`` arm among ``arms`` whose pipeline shapes the warm
    start beyond its policy_sft fit (DAgger rounds, a time budget): a retrain would not repeat that."""
    retrain = [a.name for a in arms if a.retrain]
    if retrain and (pcfg.dagger_tasks > 0 or pcfg.time_budget_minutes is not None):
        raise ValueError(
            f"arm {retrain[0]!r} (retrain: true) trains the warm start's policy_sft fit again, but the pipeline "
            f"{cfg.pipeline} also shapes it with dagger_tasks={pcfg.dagger_tasks} / time_budget_minutes="
            f"{pcfg.time_budget_minutes}, which a retrain would not repeat; give the suite a pipeline without "
            "them (dagger_tasks: 0, time_budget_minutes: null) or drop the arm"
        )


def _run_retrain(cfg: SuiteConfig, pcfg, prep, arm: Arm, seed: int, stage: StageClock, shared: dict) -> dict:
    """Train the warm start's recipe again with ``seed`` (skipped when its policy exists) and evaluate it on
    the held-out tasks; its record (no RL: no online, audit or synthetic transitions)."""
    from dreamgym.lab.pipeline import policy_sft_fit

    out = cfg.out_dir / arm.name / f"s{seed}"
    out.mkdir(parents=True, exist_ok=True)
    train = [prep.train] + ([prep.policy_episodes] if prep.policy_episodes is not None else [])
    args = [{"seed_everything": seed}, *cfg.fill(arm.overrides, seed)]
    fit_args = [*policy_sft_fit(pcfg, train, prep.test, tokenizer=prep.tokenizer), *args]
    policy, episodes, times = _fit_and_evaluate(
        stage, pcfg, f"{arm.name}/s{seed}", pcfg.policy_sft_config, fit_args, out
    )
    return {
        "arm": arm.name,
        "seed": seed,
        **_outcomes(episodes),
        "real_transitions": {"offline": warm_start_offline(shared), "online": 0, "audit": 0},
        "synthetic_transitions": 0,
        **times,
        "curve": record_curves({}),
        "rl_config": None,
        "policy_sft_config": pcfg.policy_sft_config,
        "args": args,
        "weights_sha256": weights_sha256(policy),
        "commit": shared["commit"],
        "dirty": shared["dirty"],
    }


def record_curves(series: dict) -> dict[str, list[list]]:
    """What a record keeps of its fit's TensorBoard series: ``[[step, value], ...]`` of the validation and
    rollout curves and, for a fit that played synthetic steps, of the audit (:data:`AUDIT_TAGS`)."""
    always = CURVE_TAGS[:2]  # kept even when empty
    return {
        t: [[int(x), float(y)] for x, y in series.get(t, [])]
        for t in CURVE_TAGS
        if t in always or series.get(t)
    }


_JUDGE_REWARD = re.compile(r"""["']?reward["']?\s*[:=]\s*["']?judge\b""")


def uses_judge(args: list[str | dict]) -> bool:
    """Whether an arm's overrides make the synthetic env reward with the reward judge (``reward: judge`` in
    its env kwargs): config pieces, or a record's ``--key=value`` strings written before them."""

    def judged(node) -> bool:
        if isinstance(node, dict):
            return node.get("reward") == "judge" or any(judged(v) for v in node.values())
        if isinstance(node, list):
            return any(judged(v) for v in node)
        return isinstance(node, str) and bool(_JUDGE_REWARD.search(node))

    return judged(list(args))


def weights_sha256(model_dir: Path) -> str | None:
    """SHA-256 over a saved model's weight files (``*.safetensors`` / ``*.bin``, by name), or None when it
    has none: the identity of a warm start or experience model, whatever commit or session rebuilt it."""
    import hashlib

    files = sorted(f for f in Path(model_dir).iterdir() if f.suffix in (".safetensors", ".bin"))
    if not files:
        return None
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode())
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _shared_record(pcfg, prep, meta: dict, pipeline_overrides: dict | None = None) -> dict:
    return {
        "pipeline_out_dir": str(pcfg.out_dir),
        # the pipeline config's values the shared stages ran with where the suite changes them (records
        # written before config pieces hold `pipeline_args`, a list of --key=value strings)
        "pipeline_overrides": dict(pipeline_overrides or {}),
        "eval_tasks": pcfg.eval_tasks,
        "offline_train_transitions": count_transitions(prep.train),
        # the warm start's own train data besides the offline data: extra scripted episodes, DAgger labels
        "warm_start_train_transitions": sum(
            count_transitions(f) for f in [prep.policy_episodes, *prep.dagger_labels] if f is not None
        ),
        "onpolicy_train_transitions": count_transitions(prep.rollouts) if prep.rollouts else 0,
        "experience_train_transitions": count_transitions(prep.experience_episodes)
        if prep.experience_episodes
        else 0,
        "judge_train_transitions": count_transitions(prep.judge_purchases) if prep.judge_purchases else 0,
        # what every record's comparison rests on: the same warm start and simulator (and its reward judge)
        # the machine they were built on: weights rebuilt on other hardware differ (check_same_host)
        "host": host_fingerprint(),
        "weights_sha256": {
            "warm_start": weights_sha256(prep.policy_sft),
            "simulator": weights_sha256(prep.simulator) if prep.simulator is not None else None,
            "judge": weights_sha256(prep.judge) if prep.judge is not None else None,
        },
        **meta,
    }


def warm_start_offline(shared: dict) -> int:
    """The real transitions a warm start depends on: the offline data and its own (extra episodes, DAgger
    labels; a record from before that count has none)."""
    return shared["offline_train_transitions"] + shared.get("warm_start_train_transitions", 0)


def _needs_simulator(arm: Arm) -> bool:
    """Whether ``arm`` needs the experience model: it plays a synthetic env or trains its own variant."""
    return arm.rl_config is not None and (arm.experience is not None or plays_simulator(arm.rl_config))


_SIMULATOR_COUNTS = ("onpolicy_train_transitions", "experience_train_transitions", "judge_train_transitions")


def _keep_simulator_record(shared: dict, stored: dict) -> dict:
    """``shared``, or where this run prepared the real-env stages only (its simulator SHA-256 is None) a copy
    with the stored shared record's simulator and judge facts (weights, transition counts): records measured
    from that simulator keep what they were measured from. ``shared`` itself is not changed."""
    old = stored.get("shared", {})
    old_sha = old.get("weights_sha256") or {}
    if shared["weights_sha256"]["simulator"] is None and old_sha.get("simulator") is not None:
        sha = {**shared["weights_sha256"], "simulator": old_sha["simulator"], "judge": old_sha.get("judge")}
        return {**shared, **{k: old[k] for k in _SIMULATOR_COUNTS if k in old}, "weights_sha256": sha}
    return shared


def check_same_host(cfg: SuiteConfig, stored: dict, host: dict, rebuild: bool) -> None:
    """Refuse, before hours of shared stages, to rebuild them (``rebuild``: their outputs are not on disk) on
    a machine whose :func:`~dreamgym.lab.provenance.host_fingerprint` differs from the one the stored records'
    stages were built on (``stored["shared"]["host"]``, where recorded): the weights would differ and
    :func:`check_same_shared_stages` would refuse every new record after the rebuild."""
    old = stored.get("shared", {}).get("host")
    if not rebuild or not old or not stored.get("runs") or old == host:
        return
    raise ValueError(
        f"{cfg.results} holds records measured from shared stages built on {old}; this machine is {host} and "
        f"{stored['shared'].get('pipeline_out_dir', 'the pipeline out_dir')} has no warm start evaluation, so "
        f"the suite would rebuild them here, and weights trained on other hardware differ (BENCHMARKS.md, "
        f"ALFWorld: a rebuild on another CPU gave another warm start), so every new record would then be "
        f"refused. Restore the shared stages the records were measured from, run on a machine like the first, "
        f"or point the suite's `results` (and `report`) at a new file to start a new table; nothing was built."
    )


def check_same_shared_stages(cfg: SuiteConfig, stored: dict, shared: dict, warm: dict) -> None:
    """Refuse to add records to ``stored`` (the results on disk) when the shared stages just prepared are
    not the ones its records were measured from: another warm start's held-out outcomes, or other weights
    (``shared["weights_sha256"]``, where the stored results have them; the simulator's only while a record
    played synthetic steps, so a retrained experience model keeps the real-env and warm-start records; the
    reward judge's only while such a record was rewarded by it).
    Rebuilt artifacts (a new session, another commit, another precision) would otherwise mix two warm
    starts in one table."""
    problems = []
    for key, rec in stored.get("runs", {}).items():
        if rec["arm"] in cfg.warm_arms and (rec["task_ids"], rec["successes"]) != (
            warm["task_ids"],
            warm["successes"],
        ):
            before = dict(zip(rec["task_ids"], rec["successes"], strict=True))
            differ = sum(before.get(t) != s for t, s in zip(warm["task_ids"], warm["successes"], strict=True))
            problems.append(
                f"its warm start record {key} succeeded on {rec['successes'].count('1')} of "
                f"{len(rec['successes'])} held-out tasks, the warm start now on disk on "
                f"{warm['successes'].count('1')} of {len(warm['successes'])} ({differ} tasks differ)"
            )
            break
    runs = stored.get("runs", {}).values()
    simulated = any(rec.get("synthetic_transitions", 0) > 0 for rec in runs)
    judged = any(rec.get("synthetic_transitions", 0) > 0 and uses_judge(rec.get("args", [])) for rec in runs)
    for name, sha in (stored.get("shared", {}).get("weights_sha256") or {}).items():
        now = shared["weights_sha256"].get(name)
        if (name == "simulator" and not simulated) or (name == "judge" and not judged):
            continue  # no record on file played a synthetic step (with the judge's rewards): none was measured from it
        if sha is not None and now != sha:
            problems.append(f"its {name} weights had SHA-256 {sha[:12]}, the ones on disk {str(now)[:12]}")
    if problems:
        old = stored.get("shared", {})
        raise ValueError(
            f"{cfg.results} holds records measured from other shared stages than those under "
            f"{shared['pipeline_out_dir']}: {'; '.join(problems)}. New records would mix two warm starts in "
            f"one table. Restore the shared stages the records were measured from (last written at commit "
            f"{str(old.get('commit', '?'))[:7]}), or point the suite's `results` (and `report`) at a new file "
            f"to start a new table; no record was added (the shared stages on disk are kept)."
        )


def run_suite(
    cfg: SuiteConfig, only: list[str] | None = None, report_only: bool = False, seeds: list[int] | None = None
) -> dict:
    """Run every missing (arm, seed) stage of ``cfg`` (only the ``only`` arms and the ``seeds`` among each
    arm's seeds when given), then write the report of the whole plan; returns the results."""
    from dreamgym.lab.benchmark.report import write_report, written_files
    from dreamgym.lab.provenance import result_meta

    results = load_results(cfg.results)
    if not report_only:
        pcfg = suite_pipeline_config(cfg)
        check_same_host(cfg, results, host_fingerprint(), rebuild=not warm_episodes_path(pcfg).exists())
        stage = StageClock("benchmark")
        pending = [
            (arm, seed)
            for arm in cfg.arms
            if not only or arm.name in only
            for seed in cfg.arm_seeds(arm)
            if (seeds is None or seed in seeds) and f"{arm.name}/s{seed}" not in results.get("runs", {})
        ]
        check_retrain_pipeline(cfg, pcfg, [arm for arm, _ in pending])
        # real-env arms alone do not wait for the experience model, its on-policy continuation or judge
        prep = prepare(pcfg, stage, simulator=any(_needs_simulator(arm) for arm, _ in pending))
        # at start; the suite's own outputs, rewritten after every stage, do not make the tree dirty
        meta = {
            k: v
            for k, v in result_meta("-m dreamgym benchmark", ignore=written_files(cfg)).items()
            if k != "command"
        }
        shared = _keep_simulator_record(_shared_record(pcfg, prep, meta, cfg.pipeline_overrides), results)
        warm = _outcomes(prep.warm_episodes)
        check_same_shared_stages(cfg, results, shared, warm)
        results["shared"] = shared
        for arm in cfg.arms:
            if only and arm.name not in only:
                continue
            for seed in cfg.arm_seeds(arm):
                if seeds is not None and seed not in seeds:
                    continue
                key = f"{arm.name}/s{seed}"
                if key in load_results(cfg.results)["runs"]:  # on record (maybe by a parallel suite)
                    continue
                if arm.retrain:
                    rec = _run_retrain(cfg, pcfg, prep, arm, seed, stage, results["shared"])
                elif arm.rl_config is None:
                    rec = {"arm": arm.name, "seed": seed, **warm, "real_transitions": {
                        "offline": warm_start_offline(results["shared"]), "online": 0, "audit": 0},
                        "synthetic_transitions": 0, "fit_seconds": 0.0, "fit_cpu_seconds": 0.0,
                        "eval_seconds": stage.seconds.get("evaluate_policy_sft", 0.0),
                        "commit": results["shared"]["commit"], "dirty": results["shared"]["dirty"]}  # fmt: skip
                else:
                    rec = _run_arm(cfg, pcfg, prep, arm, seed, stage, results["shared"])
                results = _store(cfg.results, key, rec, results["shared"])
                m = rec["metrics"]
                print(
                    f"[benchmark] {key}: success {m['success_rate']:.3f} score {m['score_mean']:.3f}",
                    flush=True,
                )
        results = _store(cfg.results, None, None, results["shared"])
    write_report(cfg, results)
    return results


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    cfg, flags = parse_suite_config(argv)
    run_suite(cfg, only=flags["only"], report_only=flags["report_only"], seeds=flags["seeds"])

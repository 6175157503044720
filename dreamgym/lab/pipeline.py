"""The main job: the whole DreamGym chain on one env, idempotent and resumable.

``python -m dreamgym pipeline --config configs/pipeline_webshop.yaml`` (``make run``) runs, under
``out_dir`` (``artifacts/webshop``)::

    1. collect   offline_train.jsonl (scripted agents, train tasks), offline_test.jsonl (test tasks)
    2. tokenizer tokenizer/                      BPE on the train trajectories
    3. experience experience_model/              experience-model SFT      (configs/webshop_experience_sft.yaml)
    4. policy_sft policy_sft/                    behaviour-cloning warm start (configs/webshop_policy_sft.yaml)
    5. onpolicy  policy_rollouts_train.jsonl     the warm start's sampled episodes on onpolicy_tasks TRAIN
                                                 tasks spread over the split (train_task_order; teacher
                 experience_model_onpolicy/      reasoning from the step info), then the experience model
                                                 continued on offline + these episodes (onpolicy_tasks > 0)
    6. evaluate  policy_sft_test_episodes.jsonl  the warm start's greedy episodes on REAL test tasks
                                                 0..eval_tasks-1 (the same collector as validation)
    7. fidelity  fidelity_onpolicy.json          both experience models on those episodes' final steps
                                                 (success precision: does the model call a failed
                                                 purchase a success?); with stage 5 only
    8. rl        policy_rl/                      RL from the warm start (``rl_config``): configs/pipeline_webshop.yaml
                                                 runs DreamGym-S2R GRPO (configs/webshop_sim2real_grpo.yaml)
    9. evaluate  policy_rl_test_episodes.jsonl   the RL policy on the same tasks; eval.json: success,
                                                 score, steps, invalid rate of both, the paired two-sided
                                                 exact tests (dreamgym.stats) of RL vs warm start: McNemar
                                                 on success, the sign test on per-task score; and each
                                                 task's success and score per policy (``per_task``)

With ``dagger_tasks`` (off by default; configs/pipeline_alfworld.yaml), after stage 4, ``dagger_rounds``
times: ``policy_dagger_train.jsonl`` (the warm start's greedy episodes on the next ``dagger_tasks`` train
tasks of :func:`dreamgym.lab.stages.train_task_order`, each state labelled by the scripted agent it clones)
and ``policy_dagger/`` (that warm start trained further on the offline data plus every round's labels;
rounds after the first add ``2``, ``3``, ... to both names); the last is the warm start of every later
stage.

With ``judge_config`` (off by default), between stages 6 and 7 and still shared stages (``prepare``, so a
benchmark suite builds them too): ``judge_purchases_train.jsonl`` (the scripted agents' ``judge_episodes``
on TRAIN tasks) and the reward judge trained on their purchases, the offline data's and the on-policy
rollouts' (``judge_config``, e.g. configs/webshop_reward_judge.yaml), saved as ``<simulator>/judge`` where
the experience model RL uses loads it (``reward: judge``).

Why stage 5: expert data holds almost only successful purchases; the paper grounds the experience
model in fresh interactions, here the warm start's own real episodes on train tasks (never test tasks),
counted in the report. Stage 7 measures whether that grounding fixed the model's purchase judgement
(measured figures: BENCHMARKS.md).

Each stage is skipped when its output exists (files are written under a temporary name and renamed,
so a crash never leaves a half output that looks done). Stages 3, 4, 5 and 8 run through the same LightningCLI
configs as by hand (``python -m dreamgym fit``: :mod:`dreamgym.lightning_cli`), with paths pointed at
``out_dir``. Wall time per stage and the peak resident memory are written to ``pipeline_report.json``
and printed.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from dreamgym.checkpoint_io import check_export_dir
from dreamgym.config_files import flat_settings, nested
from dreamgym.lab.provenance import write_result
from dreamgym.lab.stages import (
    PipelineConfig,
    StageClock,
    TimeBudget,
    collect_stage,
    count_transitions,
    fidelity_stage,
    fit_stage,
    peak_rss_mb,
    policy_episodes,
    recorded_episodes,
    stage_log_dir,
    tokenizer_stage,
)
from dreamgym.lab.summary import held_out_comparison, print_summary
from dreamgym.modeling.judge import JUDGE_DIR

__all__ = [
    "OFFLINE_ONLY_ARG",
    "EXPERIENCE_EXPORT",
    "POLICY_EXPORT",
    "PipelineConfig",
    "Prepared",
    "parse_pipeline_config",
    "prepare",
    "plays_simulator",
    "rl_paths",
    "experience_paths",
    "policy_paths",
    "experience_fit",
    "policy_sft_fit",
    "rl_fit",
    "judge_fit",
    "judge_purchases_stage",
    "run_pipeline",
    "main",
]


OFFLINE_ONLY_ARG = "--trainer.callbacks+=dreamgym.rl.offline.OfflineOnly"
"""The RL-stage override of ``offline_only`` (a second OfflineOnly from the config itself is harmless). A
command-line argument: it appends to the config's callbacks, which a config piece cannot spell."""
EXPERIENCE_EXPORT = "model.init_args.export_dir"
"""Where the experience-model SFT (and the reward judge) export: the key :func:`fit_stage` sets."""
POLICY_EXPORT = "model.init_args.save_dir"
"""Where the policy SFT and RL fits export."""
ROLLOUTS_FILE, JUDGE_PURCHASES_FILE, EXPERIENCE_EPISODES_FILE = (
    "policy_rollouts_train.jsonl",
    "judge_purchases_train.jsonl",
    "experience_train.jsonl",
)
"""The simulator's train episodes under ``out_dir``: the warm start's on-policy ones, the judge's purchases and
the experience model's own scripted ones."""


def parse_pipeline_config(argv: list[str]) -> PipelineConfig:
    """Parse ``--config X.yaml`` (and ``--key value`` overrides) into a :class:`PipelineConfig`."""
    from jsonargparse import ActionConfigFile, ArgumentParser

    from dreamgym.config_files import expand_config_args
    from dreamgym.lab.overrides import refuse_legacy_keys, upgrade_argv

    parser = ArgumentParser(prog="python -m dreamgym pipeline", parser_mode="yaml", description=__doc__)
    parser.add_argument("--config", action=ActionConfigFile)
    parser.add_class_arguments(PipelineConfig, nested_key=None)
    argv = upgrade_argv(argv)  # a recorded command's old `--experience_args '[...]'`
    refuse_legacy_keys(argv)
    values = parser.parse_args(expand_config_args(argv)).as_dict()  # `__base__`: dreamgym/config_files.py
    return PipelineConfig(**{k: v for k, v in values.items() if k not in ("config", "__path__")})


@dataclass(frozen=True)
class Prepared:
    """What the shared stages produce (paths under ``out_dir``).

    ``simulator`` is the experience model RL uses: the on-policy continuation when stage 5 runs, else
    ``experience``; ``rollouts`` (the warm start's train-task episodes) is None without stage 5;
    ``warm_episodes`` are the warm start's held-out test episodes; ``experience_episodes`` the experience
    model's own extra train episodes (None without ``experience_episodes``), ``policy_episodes`` the warm
    start's (None without ``policy_episodes``); ``judge`` the reward judge
    saved as ``<simulator>/judge`` and ``judge_purchases`` its own train episodes (both None without
    ``judge_config``); ``dagger_labels`` every DAgger round's labelled train episodes (empty without
    ``dagger_tasks``). When :func:`prepare` was asked for the real-env stages only (``simulator=False``),
    the simulator's fields (``experience``, ``simulator``, ``rollouts``, ``experience_episodes``, ``judge``,
    ``judge_purchases``) name what an earlier call built, else None: a record's facts (weights, transition
    counts) stay those of the simulator on disk.
    """

    train: Path
    test: Path
    tokenizer: Path
    experience: Path | None
    policy_sft: Path
    rollouts: Path | None
    simulator: Path | None
    warm_episodes: Path
    experience_episodes: Path | None = None
    policy_episodes: Path | None = None
    judge: Path | None = None
    judge_purchases: Path | None = None
    dagger_labels: tuple[Path, ...] = ()


def experience_paths(tokenizer: Path, train: list[Path], test: Path, init: Path | None) -> dict:
    """The config piece that points the experience-model SFT at its tokenizer, data files and starting
    weights (``init``; None: fresh weights)."""
    lm = "model.init_args.lm.init_args"
    return nested({**({f"{lm}.path": init} if init else {}), f"{lm}.tokenizer_path": tokenizer,
                   "data.init_args.train_files": train, "data.init_args.val_files": [test]})  # fmt: skip


def policy_paths(
    train: list[Path], test: Path, tokenizer: Path | None = None, init: Path | None = None
) -> dict:
    """The config piece that points the policy SFT at its data files and its tokenizer (a fresh warm start)
    or the weights it continues from (``init``: DAgger)."""
    policy = "model.init_args.policy.init_args"
    return nested({**({f"{policy}.tokenizer_path": tokenizer} if tokenizer else {}),
                   **({f"{policy}.path": init} if init else {}),
                   "data.init_args.train_files": train, "data.init_args.val_files": [test]})  # fmt: skip


def experience_fit(
    cfg: PipelineConfig, tokenizer: Path, train: list[Path], test: Path, init: Path | None = None
) -> list[dict]:
    """The overrides of an experience-model fit: its paths, then ``experience_overrides`` (the first fit)
    or ``onpolicy_experience_overrides`` (the continuation from ``init``)."""
    own = cfg.onpolicy_experience_overrides if init is not None else cfg.experience_overrides
    return [experience_paths(tokenizer, train, test, init), *own]


def policy_sft_fit(
    cfg: PipelineConfig,
    train: list[Path],
    test: Path,
    tokenizer: Path | None = None,
    init: Path | None = None,
) -> list[dict]:
    """The overrides of a policy SFT fit: its paths, ``policy_sft_overrides``, and ``dagger_overrides``
    for a DAgger round (``init``: the policy it continues)."""
    dagger = cfg.dagger_overrides if init is not None else []
    return [policy_paths(train, test, tokenizer, init), *cfg.policy_sft_overrides, *dagger]


def rl_fit(cfg: PipelineConfig, exp: Path | None, sft: Path) -> list[dict | str]:
    """The overrides of the RL stage: its paths (:func:`rl_paths`), ``rl_overrides``, then
    :data:`OFFLINE_ONLY_ARG` with ``offline_only`` (last, so ``rl_overrides`` cannot drop it)."""
    guard = [OFFLINE_ONLY_ARG] if cfg.offline_only else []
    return [rl_paths(cfg.rl_config, exp, sft), *cfg.rl_overrides, *guard]


def warm_episodes_path(cfg: PipelineConfig) -> Path:
    """Where stage 6 writes the warm start's held-out episodes (the last stage every run of ``prepare`` has)."""
    return cfg.out_dir / "policy_sft_test_episodes.jsonl"


def prepare(
    cfg: PipelineConfig, stage: StageClock, budget: TimeBudget | None = None, simulator: bool = True
) -> Prepared:
    """Stages 1-6: data, tokenizer, experience model (and its on-policy continuation), warm start and its
    held-out evaluation, then the reward judge's purchases and fit where ``judge_config`` asks; each
    skipped when its output exists. With a ``budget``, its fit stages get their ``max_time`` from it.
    ``simulator=False`` runs only what the real env needs (data, tokenizer, warm start and its evaluation):
    no experience model, on-policy continuation or reward judge, so a real-env RL run need not wait hours for
    a simulator it never plays (their fields name them where an earlier call built them, else None; a later
    call with ``simulator=True`` builds them).

    Raises:
        ValueError: before any stage, when ``out_dir`` is a file or cannot be written (a read-only mount).
    """
    check_export_dir(cfg.out_dir, "--out_dir", "the pipeline's outputs")
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    d = cfg.out_dir
    train = stage(
        "collect_train", collect_stage, cfg, "train", cfg.train_expert, cfg.train_random, cfg.train_mix
    )
    test = stage("collect_test", collect_stage, cfg, "test", cfg.test_expert, 0)
    tok = stage("tokenizer", tokenizer_stage, cfg, train)
    extra = None
    if cfg.experience_episodes:  # without ``simulator``: what an earlier call built (_built), as below
        extra = (
            stage("collect_experience", experience_episodes_stage, cfg)
            if simulator
            else _built(d / EXPERIENCE_EPISODES_FILE)
        )
    exp_train = [train] + ([extra] if extra is not None else [])
    # without ``simulator`` its stages are not run; what an earlier call built is still reported (_built)
    exp_dir, onpolicy_dir = d / "experience_model", d / "experience_model_onpolicy"
    exp = _built(exp_dir) if not simulator else stage(
        "experience_sft", fit_stage, cfg.experience_config, experience_fit(cfg, tok, exp_train, test),
        exp_dir, EXPERIENCE_EXPORT, None, budget,
    )  # fmt: skip
    policy_extra = stage("collect_policy", policy_episodes_stage, cfg) if cfg.policy_episodes else None
    policy_train = [train] + ([policy_extra] if policy_extra is not None else [])
    sft = stage(
        "policy_sft", fit_stage, cfg.policy_sft_config, policy_sft_fit(cfg, policy_train, test, tokenizer=tok),
        d / "policy_sft", POLICY_EXPORT, None, budget,
    )  # fmt: skip
    labels: list[Path] = []
    for r in range(cfg.dagger_rounds if cfg.dagger_tasks > 0 else 0):
        suffix = "" if r == 0 else str(r + 1)  # policy_dagger, policy_dagger2, ...
        name = f"policy_dagger{suffix}"
        labels.append(stage(
            f"dagger_rollouts{suffix}", policy_episodes, cfg, sft, "train", cfg.dagger_tasks,
            d / f"{name}_train.jsonl", None, cfg.dagger_agent, r * cfg.dagger_tasks,
        ))  # fmt: skip
        sft = stage(
            name, fit_stage, cfg.policy_sft_config, policy_sft_fit(cfg, [*policy_train, *labels], test, init=sft),
            d / name, POLICY_EXPORT, None, budget,
        )  # fmt: skip
    sim, rollouts = exp, None
    if cfg.onpolicy_tasks > 0 and not simulator:
        sim, rollouts = _built(onpolicy_dir), _built(d / ROLLOUTS_FILE)
    elif cfg.onpolicy_tasks > 0:
        rollouts = stage(
            "onpolicy_rollouts", policy_episodes, cfg, sft, "train", cfg.onpolicy_tasks,
            d / ROLLOUTS_FILE, _episode_minutes(budget, "onpolicy_rollouts"),
        )  # fmt: skip
        sim = stage(
            "experience_onpolicy", fit_stage, cfg.experience_config,
            experience_fit(cfg, tok, [*exp_train, rollouts], test, init=exp),
            onpolicy_dir, EXPERIENCE_EXPORT, None, budget,
        )  # fmt: skip
    warm = stage(
        "evaluate_policy_sft", policy_episodes, cfg, sft, "test", cfg.eval_tasks, warm_episodes_path(cfg),
        _episode_minutes(budget, "evaluate_policy_sft"),
    )  # fmt: skip
    judge = purchases = None
    if cfg.judge_config is not None and not simulator:
        judge = _built(sim / JUDGE_DIR) if sim is not None else None
        purchases = _built(d / JUDGE_PURCHASES_FILE)
    elif cfg.judge_config is not None:
        purchases = stage("collect_judge", judge_purchases_stage, cfg)
        judge = stage(
            "reward_judge", fit_stage, cfg.judge_config, judge_fit(cfg, train, rollouts, test, purchases),
            sim / JUDGE_DIR, EXPERIENCE_EXPORT, d / "runs" / "reward_judge", budget,
        )  # fmt: skip
    return Prepared(train=train, test=test, tokenizer=tok, experience=exp, policy_sft=sft, rollouts=rollouts,
                    simulator=sim, warm_episodes=warm, experience_episodes=extra, policy_episodes=policy_extra, judge=judge,
                    judge_purchases=purchases, dagger_labels=tuple(labels))  # fmt: skip


def _built(out: Path) -> Path | None:
    """``out`` where a stage already wrote it (a stage's output exists only once it is complete), else None:
    a simulator stage not run now is still reported, since its weights identify the records measured from it."""
    return out if out.exists() else None


def _episode_minutes(budget: TimeBudget | None, name: str) -> float | None:
    return None if budget is None else budget.episode_minutes(name)


def _train_episodes(
    cfg: PipelineConfig,
    name: str,
    mix: dict[str, int],
    seed: int,
    teacher: bool,
    env_kwargs: dict | None = None,
) -> Path:
    """``name`` under ``out_dir``: the scripted ``mix`` (no zero counts) on TRAIN tasks, the env built with
    ``env_kwargs`` (written whole or not at all)."""
    out = cfg.out_dir / name
    if out.exists():
        return out
    from dreamgym.collect import collect_trajectories

    tmp = out.with_suffix(".jsonl.tmp")
    tmp.unlink(missing_ok=True)
    collect_trajectories(cfg.env, "train", 0, 0, out=tmp, seed=seed, teacher=teacher, batch_size=32,
                         progress=True, mix=mix, env_kwargs=env_kwargs)  # fmt: skip
    tmp.rename(out)
    return out


def judge_purchases_stage(cfg: PipelineConfig) -> Path:
    """``judge_purchases_train.jsonl`` under ``out_dir``: ``judge_episodes`` on TRAIN tasks (no teacher
    reasoning; seed ``seed + 1``, so not the offline data's episodes again)."""
    return _train_episodes(cfg, JUDGE_PURCHASES_FILE, cfg.judge_episodes, cfg.seed + 1, teacher=False)


def experience_episodes_stage(cfg: PipelineConfig) -> Path:
    """``experience_train.jsonl`` under ``out_dir``: ``experience_episodes`` on TRAIN tasks with teacher
    reasoning (seed ``seed + 2``), for the experience model's fits only."""
    return _train_episodes(cfg, EXPERIENCE_EPISODES_FILE, cfg.experience_episodes, cfg.seed + 2, teacher=True)


def policy_episodes_stage(cfg: PipelineConfig) -> Path:
    """``policy_train.jsonl`` under ``out_dir``: ``policy_episodes`` on TRAIN tasks (no teacher reasoning;
    seed ``seed + 3``; the env built with ``policy_env_kwargs``), for the warm start's fits only."""
    return _train_episodes(
        cfg,
        "policy_train.jsonl",
        cfg.policy_episodes,
        cfg.seed + 3,
        teacher=False,
        env_kwargs=cfg.policy_env_kwargs,
    )


def judge_fit(
    cfg: PipelineConfig, train: Path, rollouts: Path | None, test: Path, purchases: Path
) -> list[dict]:
    """The overrides of the judge's fit: its data (its purchases + the offline data + the on-policy
    rollouts, train tasks; validation on the offline test file), then ``judge_overrides``."""
    files = [purchases, train] + ([rollouts] if rollouts is not None else [])
    return [
        nested({"data.init_args.train_files": files, "data.init_args.val_files": [test]}),
        *cfg.judge_overrides,
    ]


def run_pipeline(cfg: PipelineConfig) -> dict:
    """Run every stage (skipping finished ones); return and save the report."""
    from dreamgym.precision import auto_precision

    stage = StageClock(record=cfg.out_dir / "stage_seconds.json")
    times, d = stage.seconds, cfg.out_dir
    budget = cfg.time_budget()
    print(f"[pipeline] precision {auto_precision()} (chosen for this device; a config's trainer.precision wins); "
          f"time budget: {'none' if budget is None else budget.plan()}", flush=True)  # fmt: skip
    p = prepare(cfg, stage, budget)
    exp, sft, sim = p.experience, p.policy_sft, p.simulator
    episodes = {"policy_sft": p.warm_episodes, "policy_rl": d / "policy_rl_test_episodes.jsonl"}
    if cfg.onpolicy_tasks > 0:
        stage(
            "fidelity_onpolicy", fidelity_stage, {"experience_model": exp, "experience_model_onpolicy": sim},
            episodes["policy_sft"], d / "fidelity_onpolicy.json", _episode_minutes(budget, "fidelity_onpolicy"),
        )  # fmt: skip
    rl = stage(
        "rl", fit_stage, cfg.rl_config, rl_fit(cfg, sim, sft), d / "policy_rl", POLICY_EXPORT, None, budget
    )
    n_eval = recorded_episodes(episodes["policy_sft"])  # eval_tasks, or fewer where the budget cut the stage
    stage("evaluate_policy_rl", policy_episodes, cfg, rl, "test", n_eval, episodes["policy_rl"])
    evals, comparison, per_task = held_out_comparison(episodes, n_eval)
    # the per-task outcomes too, so the comparison can be recomputed from the file (summary.paired_comparison)
    result = {**evals, "policy_rl_vs_policy_sft": comparison, "per_task": per_task}
    write_result(d / "eval.json", result, indent=2)  # atomic
    peak_mb = peak_rss_mb()
    fid, rollouts_file = d / "fidelity_onpolicy.json", d / ROLLOUTS_FILE
    report = {
        "stage_seconds": times,
        "time_budget": None
        if budget is None
        else {"minutes": budget.minutes, "max_time_minutes": budget.given},
        "total_seconds": round(sum(times.values()), 1),
        "skipped_stages": stage.skipped,  # outputs found from an earlier run: their time is that run's
        "peak_rss_mb": peak_mb,
        "eval": evals,
        "policy_rl_vs_policy_sft": comparison,
        "per_task": per_task,
        "fidelity_onpolicy": json.loads(fid.read_text()) if cfg.onpolicy_tasks > 0 and fid.exists() else {},
        "onpolicy_real_transitions": count_transitions(rollouts_file) if cfg.onpolicy_tasks > 0 else 0,
    }
    from dreamgym.lab.plots import MatplotlibMissing, main_job_figure

    try:  # the figure is a convenience: a plotting failure must not lose the run's results
        report["figure"] = str(main_job_figure(evals, n_eval, _rl_log_dir(cfg), d / "main_job.png"))
    except MatplotlibMissing as exc:
        print(f"[pipeline] no figure: {exc}", flush=True)
    except Exception as exc:  # noqa: BLE001
        print(f"[pipeline] no figure: {type(exc).__name__}: {exc}", flush=True)
    write_result(d / "pipeline_report.json", report, indent=2)
    print_summary(n_eval, report)
    return report


def _rl_yaml(rl_config: str | Path) -> dict:
    """An RL config file as plain YAML, its ``__base__`` pieces merged in (the pipeline only reads paths
    out of it)."""
    from dreamgym.config_files import load_config

    return load_config(rl_config)


def _rl_log_dir(cfg: PipelineConfig) -> Path | None:
    """The TensorBoard directory of the RL stage (:func:`~dreamgym.lab.stages.stage_log_dir`), None when
    ``rl_overrides`` switch the logger off."""
    if flat_settings(cfg.rl_overrides).get("trainer.logger") is False:  # no curve
        return None
    return stage_log_dir(cfg.out_dir / "policy_rl")


def _synthetic_env_keys(rl_config: str | Path) -> list[str]:
    sched = _rl_yaml(rl_config)["model"]["init_args"]["schedule"]["init_args"]
    return [
        key
        for key in ("env", "synthetic_env")
        if key in sched and sched[key]["class_path"].endswith("SyntheticEnvFactory")
    ]


def plays_simulator(rl_config: str | Path) -> bool:
    """Whether an RL config's schedule plays a synthetic env (needs the experience model)."""
    return bool(_synthetic_env_keys(rl_config))


def rl_paths(rl_config: str | Path, exp: Path | None, sft: Path) -> dict:
    """The config piece that points an RL config's policy at ``sft`` and its synthetic env(s) at ``exp``.

    Raises:
        ValueError: when the config plays a synthetic env and ``exp`` is None (no experience model built).
    """
    keys = _synthetic_env_keys(rl_config)
    if keys and exp is None:
        raise ValueError(
            f"{rl_config} plays a synthetic env ({', '.join(keys)}) but no experience model was prepared; "
            "prepare the shared stages with simulator=True"
        )
    paths = {"model.init_args.policy.init_args.path": sft}
    paths |= {f"model.init_args.schedule.init_args.{key}.init_args.checkpoint": exp for key in keys}
    return nested(paths)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    run_pipeline(parse_pipeline_config(argv))

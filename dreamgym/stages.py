"""The pipeline's stages: each a function of its inputs that returns its output path.

A stage whose output exists returns it without running (resume); outputs are written under a temporary
name and renamed, so a crash never leaves a half output that looks done. :class:`StageClock` runs named
stages and records their wall time. Used by :mod:`dreamgym.pipeline` and :mod:`dreamgym.benchmark`.
"""

from __future__ import annotations

import json
import resource
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dreamgym.pipeline import PipelineConfig

__all__ = [
    "StageClock",
    "collect_stage",
    "tokenizer_stage",
    "fit_stage",
    "stage_log_dir",
    "policy_episodes",
    "fidelity_stage",
    "count_transitions",
    "peak_rss_mb",
]


def collect_stage(
    cfg: PipelineConfig, split: str, n_expert: int, n_random: int, mix: dict[str, int] | None = None
) -> Path:
    """``offline_{split}.jsonl`` under ``cfg.out_dir``: scripted episodes on ``split`` tasks."""
    out = cfg.out_dir / f"offline_{split}.jsonl"
    if out.exists():
        return out
    from dreamgym.collect import collect_trajectories

    tmp = out.with_suffix(".jsonl.tmp")
    tmp.unlink(missing_ok=True)
    collect_trajectories(
        cfg.env, split=split, n_expert=n_expert, n_random=n_random, out=tmp, seed=cfg.seed, progress=True,
        mix={k: v for k, v in (mix or {}).items() if v},
    )  # fmt: skip
    tmp.rename(out)
    return out


def tokenizer_stage(cfg: PipelineConfig, train: Path) -> Path:
    """``tokenizer/`` under ``cfg.out_dir``: the BPE tokenizer trained on ``train``."""
    out = cfg.out_dir / "tokenizer"
    if out.exists():
        return out
    from dreamgym.modeling.tokenizer import corpus_from_trajectories, train_tokenizer

    tmp = _fresh(out)
    train_tokenizer(corpus_from_trajectories([train]), vocab_size=cfg.vocab_size).save_pretrained(tmp)
    tmp.rename(out)
    return out


def fit_stage(config: str, args: list[str], out: Path, export_key: str, log_dir: Path | None = None) -> Path:
    """``python -m dreamgym fit --config config args`` exporting to ``out`` (via a temporary dir).

    The fit logs (TensorBoard and checkpoints) into ``log_dir`` (default :func:`stage_log_dir`), so an
    interrupted stage resumes: when a ``last.ckpt`` from a fit with the same config and ``args`` is there,
    the fit continues from it (``--ckpt_path last``) instead of starting again; a fit with other
    arguments starts fresh in a new version folder and leaves the old one alone. ``args`` may still switch
    the logger off (then nothing resumes)."""
    if out.exists():
        return out
    from dreamgym.cli import main as cli_main

    log_dir = stage_log_dir(out) if log_dir is None else log_dir
    logs = [
        f"--trainer.logger.init_args.save_dir={log_dir.parent}",
        f"--trainer.logger.init_args.name={log_dir.name}",
    ]
    resume = ["--ckpt_path=last"] if _resumable(log_dir, config, args) else []
    tmp = _fresh(out)
    cli_main(["fit", "--config", config, *logs, *args, *resume, f"--{export_key}={tmp}"])
    if not tmp.exists():
        raise RuntimeError(f"stage with {config} finished without writing {tmp}; check its `{export_key}`")
    tmp.rename(out)
    return out


def stage_log_dir(out: Path) -> Path:
    """Where the fit stage exporting ``out`` logs: ``<out's folder>/runs/<out's name>``."""
    return out.parent / "runs" / out.name


def _resumable(log_dir: Path, config: str, args: list[str]) -> bool:
    """Whether ``log_dir`` holds a checkpoint of a fit with this config and these args (recorded in its
    ``stage.json``); records them for the fit about to start otherwise."""
    marker, want = log_dir / "stage.json", {"config": str(config), "args": [str(a) for a in args]}
    found = any(log_dir.glob("version_*/checkpoints/last.ckpt"))
    if found and marker.exists() and json.loads(marker.read_text()) == want:
        print(f"[stage] resuming the interrupted fit under {log_dir}", flush=True)
        return True
    if found:
        print(f"[stage] checkpoints under {log_dir} come from other arguments: starting fresh", flush=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(want, indent=1) + "\n")
    return False


def policy_episodes(cfg: PipelineConfig, policy: Path, split: str, tasks: int, out: Path) -> Path:
    """``policy``'s real episodes on ``split`` tasks ``0..tasks-1``. Train: sampled as in RL, with teacher
    reasoning (experience-model SFT data); test: greedy, as in validation (the evaluation)."""
    if out.exists():
        return out
    import torch

    from dreamgym.collect import collect_policy_trajectories
    from dreamgym.rl.collector import collector_from_config

    torch.manual_seed(cfg.seed)
    _, metrics = collect_policy_trajectories(
        policy, cfg.env, split, list(range(tasks)), collector_from_config(cfg.rl_config),
        greedy=split != "train", teacher=split == "train", batch_size=cfg.eval_batch_size, out=out,
        max_steps=cfg.max_steps,
    )  # fmt: skip
    print(f"[pipeline] {policy.name} on {tasks} {split} tasks: {metrics}", flush=True)
    return out


def fidelity_stage(experience_models: dict[str, Path], episodes: Path, out: Path) -> Path:
    """Teacher-forced fidelity of each experience model on the final steps of ``episodes``."""
    if out.exists():
        return out
    import torch

    from dreamgym.fidelity import teacher_forced_eval
    from dreamgym.modeling.experience import ExperienceModel
    from dreamgym.schema import read_trajectories

    device = "cuda" if torch.cuda.is_available() else "cpu"  # a GPU when one is present

    trajs = list(read_trajectories(episodes))
    report = {
        name: teacher_forced_eval(ExperienceModel.from_pretrained(path).to(device), trajs, done_only=True)
        for name, path in experience_models.items()
    }
    for name, m in report.items():
        print(
            f"[pipeline] {name} on {int(m['n'])} final steps of {episodes.name}: success precision "
            f"{m['success_precision']:.3f}, recall {m['success_recall']:.3f}",
            flush=True,
        )
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=2))
    tmp.rename(out)
    return out


def _fresh(out: Path) -> Path:
    tmp = out.with_name(out.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    return tmp


class StageClock:
    """Runs named stages, printing their start and end and recording their wall time in :attr:`seconds`."""

    def __init__(self, tag: str = "pipeline"):
        self.tag, self.seconds = tag, {}

    def __call__(self, name: str, fn, *args):
        t0 = time.perf_counter()
        print(f"[{self.tag}] stage {name} ...", flush=True)
        out = fn(*args)
        self.seconds[name] = round(time.perf_counter() - t0, 1)
        print(f"[{self.tag}] stage {name} done in {self.seconds[name]} s -> {out}", flush=True)
        return out


def count_transitions(path: Path) -> int:
    """Transitions in a trajectory file (0 when it does not exist)."""
    from dreamgym.schema import read_trajectories

    return sum(len(t.transitions) for t in read_trajectories(path)) if path.exists() else 0


def peak_rss_mb() -> float:
    """Peak resident memory of this process and its children, in MiB."""
    kb = max(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    )
    return round(kb / 1024, 1)

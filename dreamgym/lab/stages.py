"""The pipeline's stages: each a function of its inputs that returns its output path.

A stage whose output exists returns it without running (resume); outputs are written under a temporary
name and renamed, so a crash never leaves a half output that looks done. :class:`StageClock` runs named
stages and records their wall time. :class:`PipelineConfig` says what they run (it is here, below
:mod:`dreamgym.lab.pipeline`, because the stages read it). Used by :mod:`dreamgym.lab.pipeline` and
:mod:`dreamgym.lab.benchmark`.
"""

from __future__ import annotations

import contextlib
import json
import resource
import shutil
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dreamgym.config_files import flat_settings, nested
from dreamgym.errors import Interrupted
from dreamgym.lab.overrides import load_pieces

__all__ = [
    "PipelineConfig",
    "StageClock",
    "TimeBudget",
    "collect_stage",
    "tokenizer_stage",
    "fit_stage",
    "stage_overrides",
    "overrides_argv",
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


def fit_stage(
    config: str,
    args: list[str | dict],
    out: Path,
    export_key: str,
    log_dir: Path | None = None,
    budget: TimeBudget | None = None,
) -> Path:
    """``python -m dreamgym fit --config config`` with the overrides ``args``, exporting to ``out`` (via a
    temporary dir).

    ``args`` apply in order after ``config``: config pieces (nested mappings in the config's own nesting,
    e.g. ``{"trainer": {"max_steps": 400}}``), each written as a YAML file under ``<log_dir>/overrides/``
    and given as one more ``--config`` (:func:`overrides_argv`), and command-line arguments
    (``--key=value``, as typed by hand). The fit logs (TensorBoard and checkpoints) into ``log_dir``
    (default :func:`stage_log_dir`), so an interrupted stage resumes: when a ``last.ckpt`` from a fit with
    the same config and ``args`` is there, the fit continues from it (``--ckpt_path last``) instead of
    starting again; a fit with other arguments starts fresh in a new version folder and leaves the old one
    alone. ``args`` may still switch the logger off (then nothing resumes). With a ``budget``, the fit gets
    ``--trainer.max_time`` from :meth:`TimeBudget.allot` (after ``args``, so it overrides them; not part
    of what a resume must match)."""
    if out.exists():
        if budget is not None:
            budget.skip(out.name)
        return out
    from dreamgym.lightning_cli import main as cli_main

    log_dir = stage_log_dir(out) if log_dir is None else log_dir
    tmp = _fresh(out)
    resolved = lambda: _resolved(config, stage_overrides(args, log_dir, export_key, tmp))  # noqa: E731
    resume = ["--ckpt_path=last"] if _resumable(log_dir, config, args, resolved) else []
    limit = budget.allot(out.name, cap=_max_time_minutes(args)) if budget is not None else []
    overrides = stage_overrides(args, log_dir, export_key, tmp, [*limit, *resume])
    cli_main(["fit", "--config", config, *overrides_argv(overrides, log_dir / "overrides")])
    if not tmp.exists():
        raise RuntimeError(f"stage with {config} finished without writing {tmp}; check its `{export_key}`")
    tmp.rename(out)
    return out


def stage_overrides(
    args: list[str | dict], log_dir: Path, export_key: str, export: Path, extra: list[str] | None = None
) -> list[str | dict]:
    """What a fit stage gives its config: the logger's folder (``log_dir``), ``args``, ``extra`` (the
    budget's ``max_time``, ``--ckpt_path``), then ``export_key`` set to ``export`` (last: nothing moves it)."""
    logs = nested(
        {"trainer.logger.init_args.save_dir": log_dir.parent, "trainer.logger.init_args.name": log_dir.name}
    )
    return [logs, *args, *(extra or []), nested({export_key: export})]


def overrides_argv(overrides: list[str | dict], folder: Path) -> list[str]:
    """``overrides`` as LightningCLI arguments, in their order: each config piece written to
    ``folder/NN.yaml`` (the files of an earlier call removed) and given as ``--config`` (LightningCLI merges
    each onto what comes before: ``init_args`` without a ``class_path`` fill the class already chosen, a
    mapping-valued argument such as ``kwargs`` is replaced whole, a list too), each string kept."""
    import yaml

    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.yaml"):
        old.unlink()
    argv = []
    for i, item in enumerate(overrides):
        if isinstance(item, dict):
            path = folder / f"{i:02d}.yaml"
            path.write_text(yaml.safe_dump(item, sort_keys=False))
            argv += ["--config", str(path)]
        else:
            argv.append(str(item))
    return argv


def stage_log_dir(out: Path) -> Path:
    """Where the fit stage exporting ``out`` logs: ``<out's folder>/runs/<out's name>``."""
    return out.parent / "runs" / out.name


def _resumable(
    log_dir: Path, config: str, args: list[str | dict], resolved: Callable[[], dict] | None = None
) -> bool:
    """Whether ``log_dir`` holds a checkpoint of a fit with this config and these args (recorded in its
    ``stage.json``); records them for the fit about to start otherwise. A record whose args are all
    ``--key=value`` strings (written before stages took config pieces) matches the pieces that set the same
    values (:func:`~dreamgym.config_files.flat_settings`); any other record matches when ``resolved()`` (the
    config the fit would run with) equals the one the checkpoint's fit ran with (its ``config.yaml``), so
    the same settings spelt otherwise (other pieces, another version's wording) resume too."""
    marker = log_dir / "stage.json"
    want = json.loads(
        json.dumps({"config": str(config), "args": [a if isinstance(a, dict) else str(a) for a in args]})
    )
    found = any(log_dir.glob("version_*/checkpoints/last.ckpt"))
    same = found and marker.exists() and _same_fit(json.loads(marker.read_text()), want)
    if found and not same and resolved is not None and _same_resolved(log_dir, resolved):
        same = True
        print(f"[stage] {log_dir}: the same settings, spelt otherwise than recorded", flush=True)
    if same:
        print(f"[stage] resuming the interrupted fit under {log_dir}", flush=True)
        marker.write_text(json.dumps(want, indent=1) + "\n")
        return True
    if found:
        print(f"[stage] checkpoints under {log_dir} come from other arguments: starting fresh", flush=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(want, indent=1) + "\n")
    return False


def _same_fit(recorded: dict, want: dict) -> bool:
    if recorded == want:
        return True
    old_form = all(isinstance(a, str) for a in recorded.get("args", []))
    return (
        old_form
        and recorded.get("config") == want["config"]
        and flat_settings(recorded["args"]) == flat_settings(want["args"])
    )


RESUME_FREE_KEYS = (
    "config",
    "ckpt_path",
    "weights_only",
    "trainer.max_time",
    "trainer.logger.init_args.version",
)
"""What a resume may change or the saved config adds: the config files' own names, where it resumes from,
the time budget's share, the log version the resumed fit writes back."""


def _resolved(config: str, overrides: list[str | dict]) -> dict:
    import tempfile

    from dreamgym.lightning_cli import resolve_config

    with tempfile.TemporaryDirectory() as pieces:
        return resolve_config(["--config", config, *overrides_argv(overrides, Path(pieces))])


def _same_resolved(log_dir: Path, resolved: Callable[[], dict]) -> bool:
    """Whether the checkpointed fit under ``log_dir`` that a resume continues ran with the config
    ``resolved()`` gives: equal but for :data:`RESUME_FREE_KEYS`, the linked arguments (computed, never
    saved) and what the CLI fills when unset (the precision). A config that no longer parses is not the same."""
    import yaml

    from dreamgym.checkpoint_io import newest_last_checkpoint
    from dreamgym.lightning_cli import LINKS

    last = newest_last_checkpoint(log_dir)  # the one `--ckpt_path last` would resume
    saved = last.parents[1] / "config.yaml" if last is not None else None
    if saved is None or not saved.exists():
        return False
    try:
        now = flat_settings([json.loads(json.dumps(resolved(), default=str))])  # tuples as lists, as saved
    except ValueError:
        return False
    then = flat_settings([yaml.safe_load(saved.read_text()) or {}])
    free = [*RESUME_FREE_KEYS, *(target for _, target in LINKS)]
    free += [k for k in ("trainer.precision",) if now.get(k) is None]

    def kept(flat: dict) -> dict:
        return {k: v for k, v in flat.items() if not any(k == f or k.startswith(f + ".") for f in free)}

    return kept(now) == kept(then)


def _asked_file(out: Path) -> Path:
    """Beside a time-capped episode file: how many tasks were asked of it (so a rerun accepts fewer)."""
    return out.with_name(out.name + ".asked")


def recorded_episodes(out: Path) -> int:
    """How many episodes the JSONL file ``out`` holds."""
    from dreamgym.schema import read_trajectories

    return sum(1 for _ in read_trajectories(out))


def policy_episodes(
    cfg: PipelineConfig,
    policy: Path,
    split: str,
    tasks: int,
    out: Path,
    max_minutes: float | None = None,
    label_with: str | None = None,
    first_task: int = 0,
) -> Path:
    """``policy``'s real episodes on ``tasks`` tasks of ``split``: test tasks ``first_task..first_task+tasks-1``;
    train tasks the same slice of :func:`train_task_order` (spread over the split: ALFWorld's train games
    are stored by task type, so the first 200 are all ``look_at_obj_in_light``). Train: sampled as in RL, with teacher
    reasoning (experience-model SFT data); test: greedy, as in validation (the evaluation); with
    ``label_with`` (DAgger data): greedy, each state labelled by that scripted agent, no reasoning. A file
    of another number of episodes (recorded with another ``eval_tasks``) is played again.

    With ``max_minutes`` (the pipeline's time budget), tasks are played in chunks of two env waves and no
    chunk starts once ``max_minutes`` have passed (one model load; :func:`dreamgym.progress.play_in_chunks`):
    on a slow host (or with a weak policy whose episodes run to the step limit) the file holds the first ``n < tasks`` episodes, said in a line, and
    ``<out>.asked`` records ``tasks`` so that a rerun keeps it."""
    asked = _asked_file(out)
    if out.exists():
        recorded = recorded_episodes(out)
        capped = asked.exists() and asked.read_text().strip() == str(tasks) and recorded > 0
        if recorded == tasks or capped:
            return out
        print(
            f"[pipeline] {out} holds {recorded} episodes, not {tasks}: playing {policy.name} again",
            flush=True,
        )
    import torch

    from dreamgym.collect import collect_policy_trajectories
    from dreamgym.envs.episodes import trajectory_metrics
    from dreamgym.rl.collector import collector_from_config
    from dreamgym.schema import save_trajectories

    torch.manual_seed(cfg.seed)
    indices = list(range(first_task, first_task + tasks))
    if split == "train":
        indices = train_task_order(cfg.env, cfg.seed)[first_task : first_task + tasks]
    trajs, _ = collect_policy_trajectories(
        policy, cfg.env, split, indices,
        collector_from_config(cfg.rl_config),
        greedy=split != "train" or label_with is not None, teacher=split == "train" and label_with is None,
        batch_size=cfg.eval_batch_size, max_steps=cfg.max_steps, max_minutes=max_minutes, label_with=label_with,
    )  # fmt: skip
    asked.unlink(missing_ok=True)
    save_trajectories(out, trajs)
    if len(trajs) < tasks:
        asked.write_text(f"{tasks}\n")
    print(f"[pipeline] {policy.name} on {len(trajs)} {split} tasks: {trajectory_metrics(trajs)}", flush=True)
    return out


def train_task_order(env_name: str, seed: int) -> list[int]:
    """Every train task of ``env_name`` once, in a seeded random order: the pipeline's policy episodes on
    train tasks (on-policy data, DAgger rounds) take consecutive slices of it, so any number of them covers
    the split's task types in proportion, and later slices never repeat earlier ones."""
    import numpy as np

    from dreamgym.envs.registry import make_env

    env = make_env(env_name, split="train", batch_size=1)
    try:
        n = env.num_tasks()
    finally:
        env.close()
    return [int(t) for t in np.random.default_rng(seed).permutation(n)]


def fidelity_stage(
    experience_models: dict[str, Path], episodes: Path, out: Path, max_minutes: float | None = None
) -> Path:
    """Teacher-forced fidelity of each experience model on the final steps of ``episodes``; with
    ``max_minutes`` (the time budget's share, split between the models) each model is asked only the
    steps it reaches in its share (``n`` says how many)."""
    if out.exists():
        return out
    import torch

    from dreamgym.fidelity import teacher_forced_eval
    from dreamgym.modeling.experience import ExperienceModel
    from dreamgym.schema import read_trajectories

    device = "cuda" if torch.cuda.is_available() else "cpu"  # a GPU when one is present

    trajs = list(read_trajectories(episodes))
    report = {
        name: teacher_forced_eval(
            ExperienceModel.from_pretrained(path).to(device),
            trajs,
            done_only=True,
            max_minutes=None if max_minutes is None else max_minutes / len(experience_models),
        )  # fmt: skip
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


class TimeBudget:
    """One wall-clock budget for a run, allotted to its fit stages as they start.

    A fit stage named in ``shares`` gets ``max_time = (left - reserve) * share / open_shares``, where
    ``left`` is the time to the deadline, ``reserve`` the time kept for the stages no ``max_time`` bounds
    (collection, evaluation) and ``open_shares`` the sum of the shares of the fit stages that have not
    started yet (this one included): time an earlier stage did not use goes to the later ones, and a
    stage whose output already exists gives its share away. An SFT fit stops after the step that crosses
    its ``max_time`` (Lightning's ``Timer``); an RL fit stops inside the iteration (its rollout asks the
    timer before every env step, and a cut iteration is not learned from); each exports what it has: on a
    slower host the models train fewer steps, the run still ends in time.

    Args:
        minutes: the whole run's budget, from the moment the budget is made.
        shares: fit-stage name (its output folder's name, e.g. ``policy_sft``) -> relative share.
        reserve_minutes: kept for the stages that ``max_time`` does not bound.
        min_minutes: the least any budgeted fit is given (so a late stage still exports a model).
    """

    def __init__(self, minutes: float, shares: dict[str, float], reserve_minutes: float = 10.0,
                 min_minutes: float = 1.0):  # fmt: skip
        if minutes <= 0 or reserve_minutes < 0 or min_minutes <= 0:
            raise ValueError(
                f"TimeBudget: minutes ({minutes}) and min_minutes ({min_minutes}) must be > 0 and reserve_minutes "
                f"({reserve_minutes}) >= 0"
            )
        bad = {k: v for k, v in shares.items() if v <= 0}
        if not shares or bad:
            raise ValueError(f"TimeBudget.shares must name fit stages with shares > 0, got {shares}")
        self.minutes, self.shares = float(minutes), dict(shares)
        self.reserve, self.min_minutes = float(reserve_minutes), float(min_minutes)
        self.deadline = time.monotonic() + self.minutes * 60
        self.open = set(self.shares)
        self.given: dict[str, float] = {}

    def skip(self, name: str) -> None:
        """``name`` will not run (its output exists): its share goes to the stages still to come."""
        self.open.discard(name)

    def allot(self, name: str, now: float | None = None, cap: float | None = None) -> list[str]:
        """The ``--trainer.max_time`` override of fit stage ``name`` (``[]`` for a stage not in ``shares``);
        ``cap``: the stage's own ``max_time`` in minutes, which the budget only ever lowers."""
        if name not in self.shares:
            return []
        now = time.monotonic() if now is None else now
        left = (self.deadline - now) / 60 - self.reserve
        share = self.shares[name] / sum(self.shares[n] for n in self.open | {name})
        self.open.discard(name)
        minutes = max(self.min_minutes, left * share)
        minutes = minutes if cap is None else min(minutes, cap)
        self.given[name] = round(minutes, 2)
        print(f"[budget] {name}: max_time {minutes:.1f} min ({left:.1f} min left for fits)", flush=True)
        return [f"--trainer.max_time={_dhms(minutes)}"]

    EPISODE_SHARES = {"onpolicy_rollouts": 0.25, "evaluate_policy_sft": 0.3, "fidelity_onpolicy": 0.1}
    """The reserve's share each episode stage may use (the RL policy's evaluation plays the warm start's
    tasks, uncapped, so that the two stay paired; the rest covers it, collection and each capped stage's
    last chunk)."""

    def episode_minutes(self, name: str) -> float | None:
        """The most minutes episode stage ``name`` may start new episodes in (None: not capped)."""
        share = self.EPISODE_SHARES.get(name)
        return None if share is None else max(self.min_minutes, self.reserve * share)

    def plan(self) -> str:
        """One line: the total, the reserve and each fit stage's share."""
        total = sum(self.shares.values())
        parts = ", ".join(f"{k} {v / total:.0%}" for k, v in self.shares.items())
        return f"{self.minutes:g} min in all, {self.reserve:g} min kept for collection and evaluation; fits: {parts}"


def _max_time_minutes(args: list[str | dict]) -> float | None:
    """The last ``trainer.max_time`` (``DD:HH:MM:SS``) that ``args`` set, in minutes (None: none given)."""
    found = None
    for a in args:
        if isinstance(a, dict):
            found = flat_settings([a]).get("trainer.max_time", found)
        elif str(a).startswith("--trainer.max_time="):
            found = str(a).split("=", 1)[1]
    if found is None:
        return None
    parts = [float(x) for x in found.split(":")] if isinstance(found, str) else []
    if len(parts) != 4:
        raise ValueError(f"trainer.max_time={found!r}: give DD:HH:MM:SS, e.g. '00:00:10:00' (quoted in YAML)")
    d, h, m, sec = parts
    return d * 1440 + h * 60 + m + sec / 60


def _dhms(minutes: float) -> str:
    """``DD:HH:MM:SS`` (Lightning's ``max_time`` string) of ``minutes``, rounded down to the second."""
    s = int(minutes * 60)
    return f"{s // 86400:02d}:{s % 86400 // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


class StageClock:
    """Runs named stages, printing their start and end and recording their wall time in :attr:`seconds`.

    With ``record`` (a JSON file), the time of every stage that ran is kept there, and a stage skipped
    because its output already exists (the output, a path, is older than the call) reports the time it
    took when it ran: a resumed run's report keeps every stage's time. :attr:`skipped` names those stages.
    """

    def __init__(self, tag: str = "pipeline", record: Path | None = None):
        self.tag, self.seconds, self.skipped, self.record = tag, {}, [], record
        self._ran = json.loads(record.read_text()) if record is not None and record.exists() else {}

    def __call__(self, name: str, fn, *args):
        t0, wall0 = time.perf_counter(), time.time()
        print(f"[{self.tag}] stage {name} ...", flush=True)
        try:
            with _sigterm_interrupts():  # a fit stage's trainer handles SIGTERM itself while it runs
                out = fn(*args)
        except (Interrupted, KeyboardInterrupt) as exc:
            if isinstance(exc, KeyboardInterrupt):
                exc = Interrupted("stopped by SIGINT", 130, "SIGINT", resumable=False)
            then = (
                "resumes from its last saved checkpoint"
                if exc.resumable
                else "starts again (it saved no checkpoint to resume from)"
            )
            raise Interrupted(
                f"[{self.tag}] stage {name} stopped by a signal ({exc.signal_name}); rerun the same command: "
                f"finished stages are skipped and this one {then}",
                exc.code,
                exc.signal_name,
                exc.resumable,
            ) from None
        took = round(time.perf_counter() - t0, 1)
        old = isinstance(out, Path) and out.exists() and out.stat().st_mtime < wall0
        if old and name in self._ran:
            self.skipped.append(name)
            self.seconds[name] = self._ran[name]
            print(
                f"[{self.tag}] stage {name}: output exists ({self._ran[name]} s when it ran) -> {out}",
                flush=True,
            )
            return out
        self.seconds[name] = took
        if self.record is not None:
            from dreamgym.lab.provenance import write_result

            self._ran[name] = took
            write_result(self.record, self._ran)
        print(f"[{self.tag}] stage {name} done in {took} s -> {out}", flush=True)
        return out


@contextlib.contextmanager
def _sigterm_interrupts():
    """While inside: SIGTERM raises :class:`~dreamgym.errors.Interrupted` (not resumable) instead of
    killing the process with no word (the main thread only; the previous handler comes back after)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        if signal.getsignal(signal.SIGTERM) is not handler:
            return  # called by a trainer's handler (which chains to it): the trainer stops the fit itself
        raise Interrupted("stopped by SIGTERM", 128 + signum, "SIGTERM", resumable=False)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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


DEFAULT_TIME_SHARES = {
    "experience_model": 3.0,
    "policy_sft": 3.0,
    "experience_model_onpolicy": 1.0,
    "policy_rl": 3.0,
}
"""Fit stages' default shares of a pipeline's time budget (relative)."""


class PipelineConfig:
    """What the main job runs.

    Args:
        out_dir: where every output goes.
        env: registered env name.
        train_expert: expert episodes on train tasks (offline data).
        train_random: random-policy episodes on train tasks.
        train_non_oracle: episodes of the env's visible-text agent on train tasks: WebShop's
            :class:`dreamgym.envs.webshop.agents.VisibleTextAgent` (a non-oracle shopper, about half of its
            purchases fail), ALFWorld's :class:`dreamgym.envs.alfworld.searcher.ALFWorldSearcher` (searches
            receptacles for the goal object).
        train_near_miss: episodes of :class:`dreamgym.envs.webshop.agents.NearMissAgent` on train tasks: purchases
            with one deliberate mistake (wrong option, over the cap, too early, a look-alike).
        test_expert: expert episodes on test tasks (validation losses only, never trained on).
        seed: collection seed.
        vocab_size: BPE vocabulary size.
        experience_config: LightningCLI config of the experience-model SFT.
        experience_overrides: config pieces merged onto it in order (:mod:`dreamgym.lab.overrides`: mappings
            in the config's own nesting, e.g. ``[{trainer: {max_steps: 300}}]``, or files holding one).
        experience_episodes: train-task episodes per scripted policy the experience model alone learns
            from besides the offline data (``experience_train.jsonl``, seed ``seed + 2``, teacher reasoning),
            e.g. ``{near_miss: 800}``: the placements and purchases that fail, without changing the offline
            data the tokenizer and the warm start come from. None (default): none.
        policy_episodes: train-task episodes per scripted policy the warm start (and DAgger) alone learns
            from besides the offline data (``policy_train.jsonl``, seed ``seed + 3``, no teacher reasoning),
            e.g. ALFWorld's ``{non_oracle: 600}`` with ``policy_env_kwargs: {task_types: [3, 4, 5]}``: more
            searcher episodes of the clean / heat / cool games. None (default): none.
        policy_env_kwargs: env constructor arguments of that collection (default none).
        policy_sft_config: LightningCLI config of the policy warm start.
        policy_sft_overrides: config pieces for it.
        rl_config: LightningCLI config of the RL stage (the class default: GRPO in the synthetic env).
        rl_overrides: config pieces for it.
        onpolicy_tasks: train tasks ``0..onpolicy_tasks-1`` the warm start plays (sampling) for the
            experience model's continuation; 0 skips stage 5 (RL then uses ``experience_model``).
        onpolicy_experience_overrides: config pieces of the continuation (it reuses ``experience_config``;
            e.g. ``[{trainer: {max_steps: 400}}]``).
        eval_tasks: held-out test-split tasks ``0..eval_tasks-1`` for the final evaluation.
        eval_batch_size: env slots for the final evaluation (and the on-policy collection).
        max_steps: the step limit of the pipeline's policy episodes (on-policy collection and the
            evaluations; keep it equal to the RL config's env ``max_steps``: WebShop 15, ALFWorld 50,
            web 10).
        offline_only: the WebArena-Lite regime (``configs/pipeline_web.yaml``): the real env serves only
            the held-out evaluation. Needs ``onpolicy_tasks: 0`` (no warm-start episodes on train tasks)
            and runs the RL stage with :class:`dreamgym.rl.offline.OfflineOnly`, which refuses a real
            schedule or an audit and makes any other real step during fit an error. The offline data
            is ``out_dir/offline_train.jsonl``: recorded by the collect stage, or put there beforehand
            (``python -m dreamgym import-web``), in which case collection is skipped.
        time_budget_minutes: the whole run's wall-clock budget (None: none). Every fit stage then gets a
            ``--trainer.max_time`` allotted from what is left (:class:`~dreamgym.lab.stages.TimeBudget`): on a
            slower host the models train fewer steps and the run still ends in time. Printed at start
            with the precision chosen.
        time_shares: each fit stage's share of the budget, by output folder (``experience_model``,
            ``policy_sft``, ``experience_model_onpolicy``, ``policy_rl``).
        time_reserve_minutes: kept out of the fits for the stages no ``max_time`` bounds (collection,
            the on-policy episodes, evaluations, fidelity).
        judge_config: LightningCLI config of the reward judge (``configs/webshop_reward_judge.yaml``); None
            (default): no judge stage. The judge is saved as ``<simulator>/judge`` (see dreamgym.lab.pipeline).
        judge_episodes: train-task episodes per scripted policy for the judge's purchases, e.g.
            ``{expert: 3000, random: 6000, non_oracle: 9000, near_miss: 10000}`` (about 25k purchases).
        judge_overrides: config pieces of the judge's fit.
        dagger_tasks: train tasks per DAgger round the warm start plays greedily while ``dagger_agent``
            labels every state it acts in (round ``r``: tasks ``r * dagger_tasks`` on); the warm start
            then trains further (``policy_sft_config`` from its weights, ``dagger_overrides``) on the offline
            data plus every round's labels, and the last round's model is the warm start of every later
            stage (DAgger: the clone learns the decisions in the states its own mistakes lead to; outputs
            ``policy_dagger_train.jsonl``, ``policy_dagger/``, then ``policy_dagger2...``). 0 (default): none.
        dagger_rounds: how many such rounds.
        dagger_agent: the scripted agent that labels (``non_oracle``: the one the warm start clones).
        dagger_overrides: config pieces of the continued fit (after ``policy_sft_overrides``).
    """

    def __init__(
        self,
        out_dir: str = "artifacts/webshop",
        env: str = "webshop",
        train_expert: int = 600,
        train_random: int = 200,
        train_non_oracle: int = 0,
        train_near_miss: int = 0,
        test_expert: int = 60,
        seed: int = 0,
        vocab_size: int = 4096,
        experience_config: str = "configs/webshop_experience_sft.yaml",
        experience_overrides: list[dict | str] | None = None,
        policy_sft_config: str = "configs/webshop_policy_sft.yaml",
        policy_sft_overrides: list[dict | str] | None = None,
        rl_config: str = "configs/webshop_grpo.yaml",
        rl_overrides: list[dict | str] | None = None,
        onpolicy_tasks: int = 300,
        onpolicy_experience_overrides: list[dict | str] | None = None,
        eval_tasks: int = 100,
        eval_batch_size: int = 20,
        max_steps: int = 15,
        offline_only: bool = False,
        time_budget_minutes: float | None = None,
        time_shares: dict[str, float] | None = None,
        time_reserve_minutes: float = 10.0,
        judge_config: str | None = None,
        judge_episodes: dict[str, int] | None = None,
        judge_overrides: list[dict | str] | None = None,
        experience_episodes: dict[str, int] | None = None,
        policy_episodes: dict[str, int] | None = None,
        policy_env_kwargs: dict[str, Any] | None = None,
        dagger_tasks: int = 0,
        dagger_rounds: int = 1,
        dagger_agent: str = "non_oracle",
        dagger_overrides: list[dict | str] | None = None,
    ):
        if judge_config is not None and not any((judge_episodes or {}).values()):
            raise ValueError(
                f"judge_config={judge_config!r} needs judge_episodes, the scripted train episodes its purchases come "
                "from, e.g. judge_episodes: {expert: 3000, random: 6000, non_oracle: 9000, near_miss: 10000}"
            )
        if offline_only and onpolicy_tasks > 0:
            raise ValueError(
                f"offline_only=true with onpolicy_tasks={onpolicy_tasks}: the on-policy stage plays the warm "
                "start in the real env on train tasks, which the offline-only regime forbids; set onpolicy_tasks: 0"
            )
        self.out_dir, self.env, self.seed, self.vocab_size = Path(out_dir), env, seed, vocab_size
        self.train_expert, self.train_random, self.test_expert = train_expert, train_random, test_expert
        self.train_mix = {"non_oracle": train_non_oracle, "near_miss": train_near_miss}
        self.experience_config = experience_config
        self.experience_overrides = load_pieces(experience_overrides, "experience_overrides")
        self.policy_sft_config = policy_sft_config
        self.policy_sft_overrides = load_pieces(policy_sft_overrides, "policy_sft_overrides")
        self.rl_config, self.rl_overrides = rl_config, load_pieces(rl_overrides, "rl_overrides")
        self.onpolicy_tasks = onpolicy_tasks
        self.onpolicy_experience_overrides = load_pieces(
            onpolicy_experience_overrides, "onpolicy_experience_overrides"
        )
        self.eval_tasks, self.eval_batch_size, self.max_steps = eval_tasks, eval_batch_size, max_steps
        self.offline_only = offline_only
        self.time_budget_minutes, self.time_reserve_minutes = time_budget_minutes, time_reserve_minutes
        self.time_shares = dict(time_shares or DEFAULT_TIME_SHARES)
        self.judge_config, self.judge_overrides = (
            judge_config,
            load_pieces(judge_overrides, "judge_overrides"),
        )
        self.judge_episodes = {k: v for k, v in (judge_episodes or {}).items() if v}
        self.experience_episodes = {k: v for k, v in (experience_episodes or {}).items() if v}
        self.policy_episodes = {k: v for k, v in (policy_episodes or {}).items() if v}
        self.policy_env_kwargs = dict(policy_env_kwargs or {})
        if dagger_tasks < 0 or dagger_rounds < 1:
            raise ValueError(
                f"dagger_tasks={dagger_tasks}, dagger_rounds={dagger_rounds}: give the train tasks labelled per "
                "round (>= 0; 0: no DAgger stage) and the rounds (>= 1)"
            )
        self.dagger_tasks, self.dagger_rounds = dagger_tasks, dagger_rounds
        self.dagger_agent = dagger_agent
        self.dagger_overrides = load_pieces(dagger_overrides, "dagger_overrides")

    def time_budget(self) -> TimeBudget | None:
        """A fresh :class:`~dreamgym.lab.stages.TimeBudget` from now (None without ``time_budget_minutes``)."""
        if self.time_budget_minutes is None:
            return None
        return TimeBudget(self.time_budget_minutes, self.time_shares, self.time_reserve_minutes)

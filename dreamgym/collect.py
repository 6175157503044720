"""Collect real trajectories from any registered env: expert, random and other named policies.

Each episode is played by one policy of :func:`dreamgym.agents.make_agent` (``expert``, ``random``,
for WebShop ``non_oracle`` and ``near_miss``, for web ``near_miss``); its name is the trajectory's
``policy``. The env is closed at the end (a web env quits its browsers).

The agents are actors of the one episode loop (:func:`dreamgym.envs.episodes.run_episodes`, the loop
policy evaluation and RL use too); every step becomes a :class:`dreamgym.schema.Transition` with its
available actions, the teacher's rationale (``reasoning``, written right after the step from the env's
step info), score, invalid flag and terminated/truncated, and the episodes are appended to ``out`` as
JSONL lines in plan order as they end (:class:`dreamgym.schema.TrajectoryWriter`).

The command line collects into ``<out>.partial`` (each chunk of ended episodes written whole or not at all)
and moves it into ``--out`` only when the collection is complete: a full disk leaves ``--out`` as it was
and keeps the episodes played so far in ``<out>.partial`` (one ``error:`` line says how to keep them).

CLI::

    python -m dreamgym collect --env webshop --split train --n-expert 200 --n-random 100 \\
        --n-non-oracle 200 --n-near-miss 200 --out data/webshop_train.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from dreamgym.agents import Agent, agent_names, make_agent
from dreamgym.envs.episodes import Episode, run_episodes, trajectory_metrics
from dreamgym.envs.registry import make_env, registered_envs
from dreamgym.progress import play_in_chunks
from dreamgym.schema import (
    Trajectory,
    TrajectoryWriteError,
    TrajectoryWriter,
    check_whole_lines,
    save_trajectories,
)
from dreamgym.teachers.base import Teacher, get_teacher

__all__ = ["collect_trajectories", "collect_policy_trajectories", "main", "import_web_main"]


def _plan(counts: dict[str, int], n_tasks: int, rng: np.random.Generator) -> list[tuple[str, int]]:
    """``(policy, task index)`` per episode: policies shuffled, tasks drawn without replacement, cycling."""
    policies = [p for p, k in counts.items() for _ in range(k)]
    rng.shuffle(policies)
    n = len(policies)
    tasks = np.concatenate([rng.permutation(n_tasks) for _ in range(n // max(n_tasks, 1) + 1)])[:n]
    return list(zip(policies, (int(t) for t in tasks), strict=False))


def _counts(env_name: str, n_expert: int, n_random: int, mix: dict[str, int] | None) -> dict[str, int]:
    """Episodes per policy: ``n_expert`` + ``n_random`` plus ``mix`` (added per name).

    Raises:
        ValueError: on a negative count, a zero total or a policy ``env_name`` does not have.
    """
    counts = {"expert": n_expert, "random": n_random}
    for policy, k in (mix or {}).items():
        counts[policy] = counts.get(policy, 0) + k
    if any(k < 0 for k in counts.values()) or sum(counts.values()) == 0:
        raise ValueError(f"need episode counts >= 0 with a positive sum; got {counts}")
    unknown = [p for p, k in counts.items() if k and p not in agent_names(env_name)]
    if unknown:
        raise ValueError(f"no policies {unknown} for env {env_name!r}; its policies: {agent_names(env_name)}")
    return counts


def _teacher_hook(env, teacher: Teacher | None, env_name: str, split: str, source: str):
    """An ``on_step`` hook writing ``teacher``'s rationale of each step from the env's step info."""
    if teacher is None:
        return None

    def on_step(slot: int, ep: Episode) -> None:
        ep.reasoning.append(
            teacher.explain(ep.transition(len(ep.actions) - 1, env_name, split, source), env.step_info(slot))
        )

    return on_step


def _label_hook(env, env_name: str, agent_name: str):
    """A ``before_act`` hook appending, for every acting slot, what a fresh ``agent_name`` per episode
    would do in its current state to ``episode.labels``."""
    agents: dict[int, Agent] = {}

    def before_act(slots: list[int], episodes: list[Episode]) -> None:
        for i, ep in zip(slots, episodes, strict=True):
            if ep.episode_id not in agents:
                agents[ep.episode_id] = make_agent(agent_name, env_name, env, seed=ep.episode_id)
            ep.labels.append(agents[ep.episode_id].act(env.current(i), env.step_info(i)))

    return before_act


def collect_trajectories(
    env_name: str,
    split: str,
    n_expert: int,
    n_random: int,
    out: str | os.PathLike | None = None,
    seed: int = 0,
    teacher: bool = True,
    max_steps: int | None = None,
    batch_size: int = 8,
    progress: bool = False,
    env_kwargs: dict[str, Any] | None = None,
    teacher_kwargs: dict[str, Any] | None = None,
    mix: dict[str, int] | None = None,
) -> list[Trajectory]:
    """Run ``n_expert`` expert, ``n_random`` random and ``mix`` episodes on ``split``; return (and append) them.

    Args:
        env_name: a registered env (with an expert if ``n_expert`` > 0).
        split: task split ("train", "val", "test").
        n_expert, n_random: number of expert / random episodes (tasks drawn without replacement, cycling).
        out: JSONL path to append trajectories to (``None``: only return them).
        seed: seeds the task order, the policy order and every agent's choices.
        teacher: fill ``reasoning`` with the env's rule-based teacher.
        max_steps: per-episode step limit (``None``: the env's default).
        batch_size: parallel env slots.
        progress: show a progress bar.
        env_kwargs: extra env constructor arguments.
        teacher_kwargs: teacher constructor arguments, e.g. ``{"rationale": "verdict"}`` for WebShop.
        mix: more episodes per policy name of :func:`dreamgym.agents.make_agent`, added to ``n_expert``
            / ``n_random``, e.g. ``{"non_oracle": 800, "near_miss": 800}``.

    Raises:
        ValueError: on a negative count, a zero total or a policy the env does not have.
    """
    counts = _counts(env_name, n_expert, n_random, mix)
    kwargs = dict(env_kwargs or {})
    kwargs.update(batch_size=[batch_size], split=split, seed=seed)
    if max_steps is not None:
        kwargs["max_steps"] = max_steps
    env = make_env(env_name, **kwargs)
    rationale: Teacher | None = get_teacher(env_name, **(teacher_kwargs or {})) if teacher else None
    plan = _plan(counts, env.num_tasks(), np.random.default_rng(seed))
    writer = TrajectoryWriter(out) if out is not None else None
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(plan), desc=f"collect {env_name}/{split}", unit="ep")
    agents: dict[int, Agent] = {}

    def act(slots: list[int], episodes: list[Episode]) -> list[str]:
        out = []
        for i, ep in zip(slots, episodes, strict=True):
            if ep.episode_id not in agents:  # the episode's agent starts with it
                agents[ep.episode_id] = make_agent(
                    plan[ep.episode_id][0], env_name, env, seed=seed * 100003 + ep.episode_id
                )
            out.append(agents[ep.episode_id].act(env.current(i), env.step_info(i)))
        return out

    def trajectory(ep: Episode) -> Trajectory:
        policy = plan[ep.episode_id][0]
        tid = f"{env_name}-{split}-s{seed}-{policy}-{ep.episode_id:05d}"
        return ep.to_trajectory(env_name, split, "real", policy=policy, trajectory_id=tid)

    ended: dict[int, Trajectory] = {}  # episode id -> its trajectory, built once
    written = 0

    def on_end(ep: Episode) -> None:  # write in plan order as soon as every earlier episode has ended
        nonlocal written
        agents.pop(ep.episode_id, None)
        ended[ep.episode_id] = trajectory(ep)
        chunk = []
        while written in ended:
            chunk.append(ended[written])
            written += 1
        if writer is not None and chunk:
            writer.write_many(chunk)  # whole or not at all (a full disk keeps the earlier chunks)
        if bar is not None:
            bar.update(1)

    try:
        run_episodes(
            env, act, [task for _, task in plan], on_step=_teacher_hook(env, rationale, env_name, split, "real"),
            on_end=on_end,
        )  # fmt: skip
    finally:
        env.close()  # a browser-backed env (web) quits its browsers here
        if writer is not None:
            writer.close()
        if bar is not None:
            bar.close()
    return sorted(ended.values(), key=lambda t: t.trajectory_id)


def collect_policy_trajectories(
    policy_dir: str | os.PathLike,
    env_name: str,
    split: str,
    task_indices: list[int],
    collector: Any,
    greedy: bool = True,
    teacher: bool = True,
    batch_size: int = 20,
    max_steps: int = 15,
    out: str | os.PathLike | None = None,
    env_kwargs: dict[str, Any] | None = None,
    teacher_kwargs: dict[str, Any] | None = None,
    dtype: str | None = None,
    max_minutes: float | None = None,
    label_with: str | None = None,
) -> tuple[list[Trajectory], dict[str, float]]:
    """A saved policy's episodes in a REAL env as schema trajectories, and their metrics.

    Args:
        policy_dir: a saved policy (``save_pretrained`` directory).
        env_name, split: the real env and task split.
        task_indices: one episode per task.
        collector: the :class:`dreamgym.rl.collector.RolloutCollector` of the RL config (same prompt
            format and decoding constraint as training and evaluation).
        greedy: greedy decoding (evaluation); ``False`` samples (e.g. data for the experience model).
        teacher: write each transition's ``reasoning`` with the env's rule-based teacher (from the env's
            step info, right after the step).
        batch_size: env slots.
        max_steps: per-episode step limit.
        out: write the trajectories here as JSONL (through a temporary file, so a crash leaves none).
        env_kwargs: extra env constructor arguments (e.g. ``{"item_facts": False}``).
        teacher_kwargs: teacher constructor arguments (e.g. ``{"rationale": "verdict"}``).
        dtype: load the policy in this dtype (``"bfloat16"``: about 6x the prefill speed of fp32 for a
            134 M model on a CPU with AMX; None: as saved).
        max_minutes: a time cap: the tasks are played in chunks of two env waves (one model load, one
            env) and no chunk starts once ``max_minutes`` have passed (:func:`dreamgym.progress.play_in_chunks`), so the
            result may cover only the first tasks. None: all tasks, in one call of the collector.
        label_with: a scripted agent of ``env_name`` (:func:`dreamgym.agents.make_agent`, e.g.
            ``"non_oracle"``) asked what it would do in every state the policy acts in; its answer is the
            transition's ``expert_action`` (DAgger: the policy's own states, the agent's decisions, which
            behaviour cloning then learns). None: no labels.

    Returns:
        The trajectories, in the order of ``task_indices`` (a prefix of it when capped), and the
        collection's metrics (``success_rate``, ``score_mean``, ...).
    """
    from dreamgym.modeling import LanguageModel

    if label_with is not None and label_with not in agent_names(env_name):
        raise ValueError(
            f"label_with={label_with!r} is no scripted agent of env {env_name!r}; its agents: {agent_names(env_name)}"
        )
    if not Path(policy_dir).is_dir():
        raise FileNotFoundError(
            f"policy_dir {str(policy_dir)!r} is not a directory; train one with `python -m dreamgym fit "
            "--config configs/webshop_policy_sft.yaml`"
        )
    import torch

    model, tok = LanguageModel(path=str(policy_dir), dtype=dtype).build()
    model.to("cuda" if torch.cuda.is_available() else "cpu")  # a GPU when one is present
    collector.use_format_of(policy_dir)  # prompt the policy as it was trained
    env = make_env(env_name, split=split, batch_size=batch_size, max_steps=max_steps, **(env_kwargs or {}))
    from dreamgym.progress import CountProgress

    shown = CountProgress(f"{Path(policy_dir).name} on {env_name}/{split}", len(task_indices))
    rationale = get_teacher(env_name, **(teacher_kwargs or {})) if teacher else None
    on_step = _teacher_hook(env, rationale, env_name, split, "real")

    def play(tasks: list[int]) -> list[Episode]:
        label = None if label_with is None else _label_hook(env, env_name, label_with)
        return collector.collect(
            env, model, tok, tasks, greedy=greedy, progress=shown, on_step=on_step, before_act=label
        ).episodes

    try:
        episodes = play_in_chunks(
            list(task_indices), play, chunk=2 * batch_size if max_minutes is not None else None,
            max_minutes=max_minutes, label=f"{Path(policy_dir).name} on {env_name}/{split}",
        )  # fmt: skip
    finally:
        env.close()
    trajs = [e.to_trajectory(env_name, split, "real", policy=Path(policy_dir).name) for e in episodes]
    if out is not None:
        save_trajectories(out, trajs)
    return trajs, trajectory_metrics(trajs)


def main(argv: list[str] | None = None) -> None:
    """``python -m dreamgym collect ...`` (see module docstring)."""
    ap = argparse.ArgumentParser(
        prog="python -m dreamgym collect",
        description="Collect real trajectories of scripted policies.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--env", default="webshop", help="registered env name")
    ap.add_argument("--split", default="train", choices=["train", "val", "test"])
    ap.add_argument("--n-expert", type=int, default=200, help="expert episodes")
    ap.add_argument("--n-random", type=int, default=100, help="random-policy episodes")
    ap.add_argument(
        "--n-non-oracle",
        type=int,
        default=0,
        help="visible-text agent episodes (WebShop shopper, ALFWorld searcher)",
    )
    ap.add_argument("--n-near-miss", type=int, default=0, help="near-miss episodes (WebShop, web)")
    ap.add_argument(
        "--mix",
        default="{}",
        help="JSON dict of more episodes per policy name, e.g. '{\"random_queries\": 1000}' "
        "(added to the --n-* counts)",
    )
    ap.add_argument("--out", required=True, help="JSONL file to write the trajectories to")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--append", action="store_true", help="add to an existing --out file")
    mode.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-teacher", action="store_true", help="leave reasoning empty")
    ap.add_argument(
        "--max-steps", type=int, default=None, help="per-episode step limit (env default if unset)"
    )
    ap.add_argument("--batch-size", type=int, default=8, help="parallel env slots")
    ap.add_argument(
        "--env-kwargs", default="{}", help="JSON dict of extra env arguments, e.g. '{\"human_goals\": false}'"
    )
    args = ap.parse_args(argv)
    try:
        env_kwargs = json.loads(args.env_kwargs)
    except json.JSONDecodeError as e:
        ap.error(f"--env-kwargs must be a JSON object, got {args.env_kwargs!r} ({e.msg})")
    try:
        extra = json.loads(args.mix)
    except json.JSONDecodeError as e:
        ap.error(f"--mix must be a JSON object of policy name -> episodes, got {args.mix!r} ({e.msg})")
    if not isinstance(extra, dict) or not all(isinstance(k, int) and k >= 0 for k in extra.values()):
        ap.error(f"--mix must be a JSON object of policy name -> episodes (int >= 0), got {args.mix!r}")
    if Path(args.out).exists() and not (args.append or args.overwrite):
        ap.error(
            f"--out {args.out!r} exists; pass --append to add to it (trajectory ids of the same seed repeat) "
            "or --overwrite to replace it"
        )
    parent = Path(args.out).resolve().parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        ap.error(  # checked before collecting, so no episodes are played for nothing
            f"--out {args.out!r}: its folder {str(parent)!r} does not exist or is not writable; "
            "create it or choose another path"
        )
    if args.env not in registered_envs():
        ap.error(f"--env {args.env!r} is not a registered env; choose one of {registered_envs()}")
    if args.batch_size < 1:
        ap.error(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.append:
        try:
            check_whole_lines(args.out)
        except ValueError as exc:
            ap.error(f"--append: {exc}")
    # episodes go to <out>.partial as they end (a chunk at a time, whole); only a finished collect moves them
    # into --out, so a mistyped argument, a kill or a full disk never touches the file and keeps what was played
    out, kept = Path(args.out), Path(f"{args.out}.partial")
    _refuse_kept_episodes(out, kept)
    mix = {"non_oracle": args.n_non_oracle, "near_miss": args.n_near_miss}
    for policy, k in extra.items():
        mix[policy] = mix.get(policy, 0) + k
    try:
        trajs = collect_trajectories(
            args.env, args.split, args.n_expert, args.n_random, out=kept, seed=args.seed,
            teacher=not args.no_teacher, max_steps=args.max_steps, batch_size=args.batch_size, progress=True,
            env_kwargs=env_kwargs, mix=mix,
        )  # fmt: skip
    except TrajectoryWriteError as exc:
        total = sum(_counts(args.env, args.n_expert, args.n_random, mix).values())
        raise _write_failed(out, kept, exc, f"after {exc.written} of {total} episodes", args.append) from None
    finally:
        if kept.exists() and kept.stat().st_size == 0:
            kept.unlink()
    for policy in sorted({t.policy for t in trajs}):
        sel = [t for t in trajs if t.policy == policy]
        steps = sum(len(t.transitions) for t in sel)
        print(
            f"{policy}: {len(sel)} episodes, success {np.mean([t.success for t in sel]):.3f}, "
            f"mean score {np.mean([t.score for t in sel]):.3f}, {steps} transitions"
        )
    existed = out.exists()
    _move_into_place(kept, out, args.append, len(trajs))
    done = "appended" if args.append and existed else "replaced the file with" if existed else "wrote"
    print(f"{done} {len(trajs)} trajectories to {args.out}")


def _refuse_kept_episodes(out: Path, kept: Path) -> None:
    """Refuse to start while ``kept`` holds the episodes of an interrupted collect (they would be lost)."""
    if kept.exists() and kept.stat().st_size > 0:
        n = sum(1 for line in kept.open("rb") if line.endswith(b"\n"))
        raise ValueError(
            f"--out {out}: {kept} holds {n} episodes of an interrupted collect; keep them ({_keep_hint(out, kept)}) "
            "or delete that file, then rerun"
        )


def _keep_hint(out: Path, kept: Path) -> str:
    return f"`cat {kept} >> {out}`" if out.exists() else f"`mv {kept} {out}`"


def _write_failed(out: Path, kept: Path, exc: OSError, when: str, append: bool) -> ValueError:
    """The one-line message of a write that failed (a full disk): what is where, and how to keep it."""
    import errno

    what = (
        "no space left on the device"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT)
        else f"writing failed ({exc.strerror})"
    )
    n = sum(1 for line in kept.open("rb") if line.endswith(b"\n")) if kept.exists() else 0
    hint = f"`cat {kept} >> {out}`" if append and out.exists() else f"`mv {kept} {out}`"
    return ValueError(
        f"--out {out}: {what} {when}; {out} was not touched and the {n} episodes collected are kept in {kept}; "
        f"free space, then keep them ({hint}) or delete that file and rerun"
    )


def _move_into_place(kept: Path, out: Path, append: bool, n: int) -> None:
    """``kept`` (the collected episodes, flushed) becomes ``out`` (renamed over it) or, with ``append``, is
    added to its end, which is cut back to where it was if the disk refuses part of it."""
    with kept.open("rb") as fh:
        os.fsync(fh.fileno())
    if not (append and out.exists()):
        os.replace(kept, out)
        return
    start = out.stat().st_size
    try:
        with out.open("ab") as dst, kept.open("rb") as src:
            shutil.copyfileobj(src, dst)
            dst.flush()
            os.fsync(dst.fileno())
    except OSError as exc:
        os.truncate(out, start)
        raise _write_failed(out, kept, exc, f"while appending the {n} episodes collected", True) from None
    kept.unlink()


def import_web_main(argv: list[str] | None = None) -> None:
    """``python -m dreamgym import-web --in X.jsonl --out Y.jsonl``: recorded web episodes as offline
    trajectories (:mod:`dreamgym.envs.web.importer`), missing reasoning written by the web teacher."""
    from dreamgym.envs.web import importer
    from dreamgym.schema import SPLITS

    ap = argparse.ArgumentParser(prog="python -m dreamgym import-web", description=importer.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--in", dest="src", required=True, help="JSONL of recorded web episodes")
    ap.add_argument(
        "--out", required=True, help="schema JSONL to append to (e.g. artifacts/web/offline_train.jsonl)"
    )
    ap.add_argument("--split", default="train", choices=list(SPLITS), help="split of records without one")
    ap.add_argument("--policy", default="imported", help="policy name of records without one")
    ap.add_argument("--no-teacher", action="store_true", help="leave missing reasoning empty")
    args = ap.parse_args(argv)
    teacher = None if args.no_teacher else get_teacher("web")
    trajs = importer.import_web_trajectories(args.src, args.out, args.split, args.policy, teacher=teacher)
    steps = sum(len(t.transitions) for t in trajs)
    wins = sum(t.success for t in trajs)
    print(f"imported {len(trajs)} trajectories ({steps} transitions, {wins} successful) into {args.out}")

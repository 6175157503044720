"""Generate ALFWorld-format games, validate each with the planner, write the compact manifest.

Every candidate game (:func:`dreamgym.envs.alfworld.gen.sample_params`, deterministic by ``--seed``)
is translated to SAS and solved by fast-downward (TextWorld's ``replan`` search) in a forked child
process under ``--timeout`` seconds; the plan, rendered as ALFWorld commands, is the walkthrough.
Unsolved games, and games whose plan skips part of the task (:func:`gen.skipped_steps`: no cooling
in a cooling task, ...), are dropped. Results are appended to
``--progress`` (JSONL, so an interrupted run resumes), and ``--manifest`` (gzipped JSON) receives the
first ``--n-<split>`` solved games of each split in candidate order.

Usage::

    python scripts/make_alfworld_games.py --workers 2 --timeout 30 \
        --progress artifacts/alfworld_progress.jsonl \
        --manifest dreamgym/data/alfworld/games.json.gz
    python scripts/make_alfworld_games.py --manifest-only ...   # rebuild the manifest from progress
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path


def _parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0, help="seed of the candidate draw")
    ap.add_argument("--n-train", type=int, default=2000, help="solved train games to keep")
    ap.add_argument("--n-valid-seen", type=int, default=140, help="solved valid_seen games to keep")
    ap.add_argument("--n-valid-unseen", type=int, default=134, help="solved valid_unseen games to keep")
    ap.add_argument("--oversample", type=float, default=1.25, help="candidates drawn per game kept")
    ap.add_argument("--workers", type=int, default=2, help="parallel child processes (machine is shared)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per game (load + plan + replay)")
    ap.add_argument("--progress", type=Path, default=Path("artifacts/alfworld_progress.jsonl"))
    ap.add_argument("--manifest", type=Path, default=Path("dreamgym/data/alfworld/games.json.gz"))
    ap.add_argument("--manifest-only", action="store_true", help="only rebuild the manifest from progress")
    ap.add_argument("--limit", type=int, default=0, help="validate at most this many new candidates")
    return ap.parse_args(argv)


def candidates(args: argparse.Namespace) -> dict[str, list]:
    """Candidate params per split; valid_seen tasks never repeat a train task."""
    from dreamgym.envs.alfworld import gen

    n = {"train": args.n_train, "valid_seen": args.n_valid_seen, "valid_unseen": args.n_valid_unseen}
    draw = {k: max(v, int(v * args.oversample) + 5) for k, v in n.items()}
    train = gen.sample_params("train", draw["train"], args.seed)
    keys = {(p.task_type, p.scene, p.obj, p.recep) for p in train}
    seen = gen.sample_params("valid_seen", draw["valid_seen"], args.seed, exclude=keys)
    unseen = gen.sample_params("valid_unseen", draw["valid_unseen"], args.seed)
    return {"valid_unseen": unseen, "valid_seen": seen, "train": train}


def validate(params_dict: dict) -> dict:
    """Translate the game's PDDL, solve it with fast-downward, render the plan as commands (child process).

    The plan is rendered with ALFWorld's command templates and display names
    (:func:`dreamgym.envs.alfworld.plan.plan_to_commands`); replaying it in the engine is left to the
    tests and the walkthrough expert (:mod:`dreamgym.envs.alfworld.expert`), which keeps generation to
    ~1 s of CPU a game.
    """
    from dreamgym.envs.alfworld import gen
    from dreamgym.envs.alfworld.plan import solve

    p = gen.GameParams(**params_dict)
    t0 = time.perf_counter()
    problem = gen.build_problem(p)
    plan, times = solve(gen.game_json(p, problem=problem), gen.build_problem(p, relevant_only=True))
    out = {**times, "sha1": gen.problem_sha1(problem), "total_s": round(time.perf_counter() - t0, 3)}
    if not plan:
        return {**out, "ok": False, "reason": "planner found no plan"}
    skipped = gen.skipped_steps(p.task_type, plan)
    if skipped:  # the generator rules this out; a game whose plan skips part of its task is never kept
        return {**out, "ok": False, "reason": f"walkthrough skips {skipped}", "walkthrough": plan}
    return {**out, "ok": True, "walkthrough": plan}


def _child(params_dict: dict, conn) -> None:
    try:
        conn.send(validate(params_dict))
    except Exception as e:  # reported, never silently skipped
        conn.send({"ok": False, "reason": f"{type(e).__name__}: {e}"})
    conn.close()


def run_pool(todo: list, workers: int, timeout: float, sink, enough=lambda p: False) -> None:
    """Validate ``todo`` params with ``workers`` forked children, killing any past ``timeout``.

    Candidates for which ``enough(params)`` holds when their turn comes are skipped.
    """
    ctx = mp.get_context("fork")
    running: list[tuple] = []
    queue = list(todo)
    while queue or running:
        while queue and len(running) < workers:
            p = queue.pop(0)
            if enough(p):
                continue
            parent, child = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(p.to_dict(), child), daemon=True)
            proc.start()
            child.close()
            running.append((p, proc, parent, time.perf_counter()))
        time.sleep(0.05)
        still = []
        for p, proc, conn, t0 in running:
            elapsed = time.perf_counter() - t0
            if conn.poll():
                try:
                    res = conn.recv()
                except EOFError:
                    res = {"ok": False, "reason": "child died"}
                proc.join(5)
                sink(p, res, elapsed)
            elif not proc.is_alive():
                sink(p, {"ok": False, "reason": f"child exited with {proc.exitcode}"}, elapsed)
            elif elapsed > timeout:
                proc.kill()
                proc.join(5)
                sink(p, {"ok": False, "reason": f"timeout after {timeout:.0f}s"}, elapsed)
            else:
                still.append((p, proc, conn, t0))
                continue
            conn.close()
        running = still


def write_manifest(args: argparse.Namespace, cands: dict[str, list]) -> dict:
    """Keep the first solved games per split (candidate order) and write the gzipped manifest."""
    from dreamgym.envs.alfworld.games import save_manifest

    done = _read_progress(args.progress)
    want = {"train": args.n_train, "valid_seen": args.n_valid_seen, "valid_unseen": args.n_valid_unseen}
    games, stats = [], {}
    for split, plist in cands.items():
        kept = tried = 0
        for p in plist:
            r = done.get(p.name + "@" + split)
            if r is None or kept >= want[split]:
                continue
            tried += 1
            if r["ok"]:
                kept += 1
                games.append(
                    {
                        **p.to_dict(),
                        "walkthrough": r["walkthrough"],
                        "sha1": r["sha1"],
                        "validation": {k: r[k] for k in ("translate_s", "plan_s", "total_s") if k in r},
                    }
                )
        stats[split] = {"kept": kept, "validated": tried, "wanted": want[split]}
    save_manifest(args.manifest, games, {"seed": args.seed, "timeout_s": args.timeout, "stats": stats})
    return stats


def _read_progress(path: Path) -> dict[str, dict]:
    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                out[r["key"]] = r
    return out


def _warm_imports() -> None:
    """Import TextWorld, fast-downward and ALFWorld once in the parent so forked children start warm."""
    import sys as _sys

    argv = list(_sys.argv)
    _sys.argv = ["translate.py", "domain", "task"]  # fast_downward's options module parses argv on import
    import alfworld.agents.utils.misc  # noqa: F401
    import fast_downward.translate.normalize  # noqa: F401
    import fast_downward.translate.pddl_parser  # noqa: F401
    import fast_downward.translate.translate  # noqa: F401
    import textworld.envs.pddl  # noqa: F401

    from dreamgym.envs.alfworld import speedups

    speedups.install()
    _sys.argv = argv
    from dreamgym.envs.alfworld import gen
    from dreamgym.envs.alfworld.plan import solve

    solve(gen.game_json(gen.sample_params("valid_unseen", 1, 12345)[0]))  # children start warm


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)  # before textworld: fast_downward.pddl2sas overwrites sys.argv
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    cands = candidates(args)
    if not args.manifest_only:
        _warm_imports()

        done = _read_progress(args.progress)
        todo = [p for plist in cands.values() for p in plist if p.name + "@" + p.split not in done]
        if args.limit:
            todo = todo[: args.limit]
        args.progress.parent.mkdir(parents=True, exist_ok=True)
        t_start, count = time.perf_counter(), [0, 0]
        want = {"train": args.n_train, "valid_seen": args.n_valid_seen, "valid_unseen": args.n_valid_unseen}
        solved = {k: sum(1 for key, r in done.items() if r["ok"] and key.endswith("@" + k)) for k in want}
        with open(args.progress, "a") as f:

            def sink(p, res, elapsed):
                count[0] += 1
                count[1] += bool(res.get("ok"))
                solved[p.split] += bool(res.get("ok"))
                f.write(
                    json.dumps({"key": p.name + "@" + p.split, **res, "wall_s": round(elapsed, 3)}) + "\n"
                )
                f.flush()
                if count[0] % 20 == 0:
                    rate = count[0] / (time.perf_counter() - t_start)
                    print(
                        f"{count[0]}/{len(todo)} validated, {count[1]} solved, {rate:.2f} games/s", flush=True
                    )

            run_pool(
                todo, args.workers, args.timeout, sink, enough=lambda p: solved[p.split] >= want[p.split]
            )
    stats = write_manifest(args, cands)
    print(json.dumps(stats), file=sys.stderr)


if __name__ == "__main__":
    main()

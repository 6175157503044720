"""Closed-loop fidelity of the synthetic env on a policy's own episodes, grounded and not, beside the record check.

    python scripts/closed_loop_fidelity.py --experience artifacts/webshop/experience_model_onpolicy \\
        --policy artifacts/webshop/policy_sft --tasks 32 --group 4 \\
        --modes ungrounded grounded nearest --probe artifacts/webshop/offline_test.jsonl \\
        --out benchmarks/results/closed_loop_webshop.json

For each synthetic env mode (``ungrounded``: the experience model alone; ``grounded``: ``ground=True``;
``nearest``: ``ground=True, unrecorded="nearest"``, the retrieval-only ablation; ``*_judge``: the same
with ``reward="judge"``, the experience model's reward judge paying what the model would) the policy (an exported
policy, sampling as in RL, through the RL config's collector; or a scripted agent with ``--agent``) plays
``group`` episodes of each of the first ``tasks`` train tasks of the synthetic env's pool. Each episode's
actions are then replayed in the real env on the same task (:func:`dreamgym.envs.replay.replay_actions`),
and the synthetic outcome is scored against the real one with the RL audit's own metrics
(:func:`dreamgym.rl.audit.audit_episodes`: success precision and recall, score error, ``ended_real``), plus:

* ``state_exact``: the share of synthetic steps whose next state equals the real env's next state after
  the same actions (up to the first step whose states differ, every later step counts as differing);
* ``purchase_*``: each synthetic episode that ends in a purchase (a done page naming a product) is paid
  by the real env's purchase score of that product with those options on that task, whatever the path
  (:meth:`~dreamgym.envs.webshop.WebShopEnv.purchase_score`): ``purchase_success_precision`` /
  ``purchase_success_recall`` (success: score 1) and ``purchase_score_mae``: how right the simulator's
  payment is, apart from whether its pages were the real ones; ``purchase_real_product``: the share of
  purchases of a product the real catalog has;
* ``steps_per_s``: synthetic env steps per second of the play (policy time included; batch ``--batch``);
* the env's health (``sim_error_rate``, ``record_share``, ``void_endings``, ...).

``--probe FILE`` (real trajectories whose steps the record does not hold, e.g. the offline *test* file)
checks the grounding against the real env: each trajectory's actions are replayed in the real env, and
every step the grounding answers from the record (built from the experience model's buffer) must show the
real next state (and, where it reads them, reward, score and end); the counts by kind and the agreement
are written under ``record_check``.

Every episode's actions, synthetic and real outcome are kept in the output (``episodes``), so the
figures can be recomputed from the file. An existing ``--out`` file keeps its other modes (each mode names
the run, under ``runs``, that measured it).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from dreamgym.envs.episodes import Episode, run_episodes
from dreamgym.envs.replay import replay_actions
from dreamgym.envs.synthetic import SyntheticEnv
from dreamgym.envs.webshop.grounding import SEARCH_PAGE, chosen_options, page_of
from dreamgym.fidelity import success_precision_recall
from dreamgym.lab.provenance import result_meta, write_result
from dreamgym.retrieval.buffer import ReplayBuffer
from dreamgym.rl.audit import audit_episodes
from dreamgym.schema import read_trajectories

MODES = {
    "ungrounded": {},
    "grounded": {"ground": True},
    "nearest": {"ground": True, "unrecorded": "nearest"},
    "search": {"ground": True, "unrecorded": "search"},
    "search_judge": {"ground": True, "unrecorded": "search", "reward": "judge"},
    # the record's search over the real engine's fields only (no attribute line)
    "search_judge_engine_fields": {
        "ground": True,
        "unrecorded": "search",
        "reward": "judge",
        "grounding_options": {"search_attributes": False},
    },
    "grounded_judge": {"ground": True, "reward": "judge"},
    "ungrounded_judge": {"reward": "judge"},
}


def play(env: SyntheticEnv, args, tasks: list[int]) -> list[Episode]:
    """``args.group`` episodes of each task in ``tasks``, by the policy or the scripted agent."""
    if args.agent:
        from dreamgym.agents import make_agent

        agents: dict[int, object] = {}

        def act(slots, episodes):
            out = []
            for slot, ep in zip(slots, episodes, strict=True):
                if ep.episode_id not in agents:
                    agents[ep.episode_id] = make_agent(
                        args.agent, "webshop", env, seed=args.seed * 1000 + ep.episode_id
                    )
                out.append(agents[ep.episode_id].act(env.current(slot), {}))
            return out

        return run_episodes(env, act, tasks, group_size=args.group)[0]
    from dreamgym.modeling import LanguageModel
    from dreamgym.rl.collector import collector_from_config

    collector = collector_from_config(args.rl_config)
    collector.use_format_of(args.policy)
    model, tok = LanguageModel(path=str(args.policy)).build()
    return collector.collect(env, model, tok, tasks, group_size=args.group, greedy=False).episodes


def state_agreement(ep: Episode, real_states: list[str]) -> int:
    """Steps of ``ep`` whose next state equals the real one, counted up to the first that differs."""
    n = 0
    for syn, real in zip(ep.states[1:], real_states, strict=False):
        if syn != real:
            break
        n += 1
    return n


def purchase_of(real, ep: Episode) -> dict | None:
    """The synthetic episode's purchase (product, options, the simulator's score) and what the real env
    pays for it on the same task; None if the episode did not end on a done page naming a product."""
    final = ep.states[-1] if ep.states else ""
    line = next((ln for ln in final.split("\n") if ln.startswith("[purchased] ")), None)
    if not ep.terminated or page_of(final) != ("done",) or line is None:
        return None
    asin = line[len("[purchased] ") :].split(" | ", 1)[0].strip()
    options = chosen_options(ep.states[:-1], ep.actions[:-1])
    paid = real.purchase_score(ep.task_id, asin, options)
    return {"asin": asin, "options": options, "synthetic_score": ep.score, "real_score": paid}


def purchase_metrics(purchases: list[dict]) -> dict:
    """Payment fidelity over the synthetic purchases (module docstring)."""
    real = [p for p in purchases if p["real_score"] is not None]
    tp = sum(p["synthetic_score"] >= 1.0 and p["real_score"] >= 1.0 for p in real)
    fp = sum(p["synthetic_score"] >= 1.0 and p["real_score"] < 1.0 for p in real)
    fn = sum(p["synthetic_score"] < 1.0 and p["real_score"] >= 1.0 for p in real)
    prec, rec = success_precision_recall(tp, fp, fn) if real else (None, None)
    return {
        "purchases": len(purchases),
        "purchase_real_product": len(real) / max(len(purchases), 1),
        "purchase_success_precision": prec,
        "purchase_success_recall": rec,
        "purchase_score_synthetic": float(np.mean([p["synthetic_score"] for p in real])) if real else None,
        "purchase_score_real": float(np.mean([p["real_score"] for p in real])) if real else None,
        "purchase_score_mae": float(np.mean([abs(p["synthetic_score"] - p["real_score"]) for p in real]))
        if real
        else None,
    }


def run_mode(name: str, args) -> dict:
    env = SyntheticEnv.from_checkpoint(
        args.experience, real_env="webshop", batch_size=[args.batch], max_steps=args.max_steps, seed=args.seed,
        **{"reward": args.reward, **MODES[name]}, **({"judge": args.judge} if args.judge else {}),
        **({"record": args.record} if args.record and MODES[name].get("ground") else {}),
    )  # fmt: skip
    real = env.make_real_env()
    tasks = [i for i, t in enumerate(env.tasks) if real.task_index_of(t.task_id) is not None][: args.tasks]
    t0 = time.perf_counter()
    episodes = play(env, args, tasks)
    wall = time.perf_counter() - t0
    steps = sum(len(e.actions) for e in episodes)
    metrics, _ = audit_episodes(real, episodes)
    rows, same = [], 0
    for ep in episodes:
        rep = replay_actions(real, real.task_index_of(ep.task_id), ep.actions)
        agree = state_agreement(ep, rep.states)
        same += agree
        rows.append({
            "task_id": ep.task_id, "actions": ep.actions, "synthetic": {"success": ep.success, "score": ep.score,
            "ended": ep.terminated, "sim_error": ep.sim_error}, "real": {"success": rep.success, "score": rep.score,
            "ended": rep.terminated}, "states_agreeing": agree, "purchase": purchase_of(real, ep),
        })  # fmt: skip
    return {
        "metrics": {k.removeprefix("sim/"): v for k, v in metrics.items()},
        **purchase_metrics([r["purchase"] for r in rows if r["purchase"] is not None]),
        "state_exact": same / max(steps, 1),
        "steps": steps,
        "episodes_n": len(episodes),
        "wall_s": round(wall, 1),
        "steps_per_s": steps / wall if wall > 0 else None,
        "model_calls": env.model_calls,
        "health": env.health(),
        "episodes": rows,
    }


def record_check(args) -> dict:
    """The grounding, built from the experience model's buffer, against the real env on ``--probe``."""
    from dreamgym.envs.webshop import WebShopEnv

    grounding = WebShopEnv.grounding().sync(ReplayBuffer.load(Path(args.experience) / "buffer"))
    real = WebShopEnv(batch_size=[1], split="test", max_steps=args.max_steps)
    kinds: dict[str, int] = {}
    wrong, steps = [], 0
    for traj in list(read_trajectories(args.probe))[: args.probe_episodes]:
        acts = [t.action for t in traj.transitions]
        rep = replay_actions(real, real.task_index_of(traj.task_id), acts)
        states = [traj.transitions[0].state]
        for i, action in enumerate(acts[: len(rep.states)]):
            steps += 1
            ans = grounding.answer(traj.task_id, states, acts[:i], action)
            if ans is not None:
                kinds[ans.kind] = kinds.get(ans.kind, 0) + 1
                shown = (
                    ans.next_state
                    if ans.kind != "reward"
                    else grounding.with_score(ans.next_state, rep.score)
                )
                ok = ans.kind == "void" or shown == rep.states[i]
                if ans.kind == "read" and ans.done:
                    ok = ok and ans.score == rep.score
                if not ok:
                    wrong.append({"task_id": traj.task_id, "step": i, "action": action, "kind": ans.kind})
            states.append(rep.states[i])
    answered = sum(v for k, v in kinds.items() if k != "void")
    return {
        "probe": str(args.probe),
        "steps": steps,
        "answered_by_kind": kinds,
        "answered_share": answered / max(steps, 1),
        "agreeing": answered - len(wrong),
        "disagreeing": wrong[:20],
        "agreement": (answered - len(wrong)) / max(answered, 1),
    }


def _listed(page: str) -> list[str]:
    """The ASINs a results page lists, in order."""
    return [ln.split(" | ")[0][len("[product] ") :] for ln in page.split("\n") if ln.startswith("[product] ")]


def _search_figures(sums: list[float], n: int) -> dict:
    """Per-search means of the record's search against the real page: cover, exact page, first product."""
    keys = ("search_covers_real", "search_page_exact", "search_top1")
    return {k: v / max(n, 1) for k, v in zip(keys, sums, strict=True)}


def query_check(experience: str, out: dict, episode_files: list[str], record: list[str] = ()) -> dict:
    """Why paths leave the record: per mode of ``out``, the share of the policy's searches that repeat a
    recorded query; per real episode file (e.g. the warm start's held-out episodes), that share and the
    share of each real page-1 product that the products the closest recorded queries listed hold
    (:meth:`~dreamgym.envs.webshop.grounding.WebShopGrounding.similar_products`, what a written results
    page is rewritten onto), and how the record's own search (``unrecorded="search"``:
    :meth:`~dreamgym.envs.webshop.grounding.WebShopGrounding.search`) agrees with the real page: the share
    of each real page-1 product it lists on page 1 (``search_covers_real``) and the share of searches whose
    composed page is the real page exactly (``search_page_exact``), and whose first product is the real
    first (``search_top1``). ``record``: more real trajectory files the grounding reads (SyntheticEnv.record).
    The same search figures for the search without the item pages' attribute lines
    (``search_attributes=False``, only the real engine's fields) under ``without_attributes``."""
    from dreamgym.envs.webshop import WebShopEnv

    buffer = ReplayBuffer.load(Path(experience) / "buffer")
    g = WebShopEnv.grounding().sync(buffer).add_files(list(record))
    plain = WebShopEnv.grounding(search_attributes=False).sync(buffer).add_files(list(record))

    def recorded(query: str) -> bool:
        return (" ".join(query.lower().split(" ")), 1) in g.results

    res: dict = {"modes": {}, "files": {}}
    for name, rec in out.get("modes", {}).items():
        qs = [
            a[len("search[") : -1] for e in rec["episodes"] for a in e["actions"] if a.startswith("search[")
        ]
        res["modes"][name] = {"searches": len(qs), "recorded_query": sum(map(recorded, qs)) / max(len(qs), 1)}
    for path in episode_files:
        n = hit = cover = 0
        searches = {"": [0.0, 0.0, 0.0], "without_attributes": [0.0, 0.0, 0.0]}  # covered, exact, top-1
        for traj in read_trajectories(path):
            for t in traj.transitions:
                page = page_of(t.next_state)
                if t.action.startswith("search[") and page[:1] == ("results",):
                    real = _listed(t.next_state)
                    n, hit = n + 1, hit + recorded(page[1])
                    cover += len(set(real) & set(g.similar_products(page[1]))) / max(len(real), 1)
                    for key, grounding in (("", g), ("without_attributes", plain)):
                        composed = grounding.compose([SEARCH_PAGE], t.action)
                        mine = [] if composed is None else _listed(composed.next_state)
                        sums = searches[key]
                        sums[0] += len(set(real) & set(mine)) / max(len(real), 1)
                        sums[1] += composed is not None and composed.next_state == t.next_state
                        sums[2] += bool(real) and mine[:1] == real[:1]

        res["files"][path] = {
            "searches": n,
            "recorded_query": hit / max(n, 1),
            "pool_covers_real": cover / max(n, 1),
            **_search_figures(searches[""], n),
            "without_attributes": _search_figures(searches["without_attributes"], n),
        }
    return res


TABLE = [  # (column, key in a mode's record, format)
    ("episodes", "episodes_n", "{:.0f}"),
    ("steps/s", "steps_per_s", "{:.2f}"),
    ("model calls", "model_calls", "{:.0f}"),
    ("record share", "health.record_share", "{:.2f}"),
    ("void endings", "health.void_endings", "{:.0f}"),
    ("states as real", "state_exact", "{:.3f}"),
    ("ended (syn / real)", "metrics.audit_ended_synthetic|metrics.audit_ended_real", "{:.2f}"),
    ("success precision / recall", "metrics.audit_success_precision|metrics.audit_success_recall", "{:.2f}"),
    ("score (syn / real)", "metrics.audit_score_synthetic|metrics.audit_score_real", "{:.2f}"),
    ("purchases", "purchases", "{:.0f}"),
    ("of real products", "purchase_real_product", "{:.2f}"),
    ("purchase precision / recall", "purchase_success_precision|purchase_success_recall", "{:.2f}"),
    ("purchase score (syn / real)", "purchase_score_synthetic|purchase_score_real", "{:.2f}"),
]


def _get(record: dict, key: str):
    for part in key.split("."):
        record = record.get(part) if isinstance(record, dict) else None
    return record


def report(paths: list[str]) -> str:
    """A markdown table of every mode in the result files ``paths`` (one row per file and mode; the purchase
    figures recomputed from the episodes' rows)."""
    head = "| file: mode | " + " | ".join(c for c, _, _ in TABLE) + " |"
    rows = [head, "|" + "---|" * (len(TABLE) + 1)]
    for path in paths:
        for name, rec in json.loads(Path(path).read_text())["modes"].items():
            rec = {
                **rec,
                **purchase_metrics([e["purchase"] for e in rec["episodes"] if e["purchase"] is not None]),
            }
            cells = []
            for _, key, fmt in TABLE:
                vals = [_get(rec, k) for k in key.split("|")]
                cells.append(" / ".join("n/a" if v is None else fmt.format(v) for v in vals))
            rows.append(f"| {Path(path).stem}: {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experience", help="an exported experience model (with buffer/)")
    ap.add_argument("--policy", help="an exported policy (sampling, as in RL)")
    ap.add_argument("--agent", help="a scripted WebShop agent instead of --policy (e.g. non_oracle)")
    ap.add_argument("--rl-config", default="configs/webshop_grpo.yaml", help="the collector's config")
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    ap.add_argument("--tasks", type=int, default=32)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--max-steps", type=int, default=15)
    ap.add_argument("--reward", default="generated", choices=["generated", "judge"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--judge", help="a reward judge folder for the *_judge modes (default: the experience model's judge/)"
    )
    ap.add_argument(
        "--record",
        nargs="+",
        default=[],
        help="more real trajectory files the grounded modes read beside the buffer (SyntheticEnv.record)",
    )
    ap.add_argument("--probe", help="real trajectories (JSONL) to check the grounding against the real env")
    ap.add_argument("--probe-episodes", type=int, default=60)
    ap.add_argument("--out", help="the result file (JSON)")
    ap.add_argument("--report", nargs="+", help="print the table of these result files and exit")
    ap.add_argument(
        "--query-check",
        nargs="*",
        metavar="EPISODES",
        help="add the query check (query_check) of --out's modes and these real episode files to --out",
    )
    args = ap.parse_args(argv)
    if args.report:
        print(report(args.report))
        return
    if not args.out:
        ap.error("--out is required (or --report FILE ...)")
    if args.query_check is not None:
        path = Path(args.out)
        out = json.loads(path.read_text()) if path.exists() else {}
        out["query_check"] = {**query_check(args.experience, out, args.query_check, args.record),
                              **result_meta("scripts/closed_loop_fidelity.py", argv)}  # fmt: skip
        print(json.dumps({k: v for k, v in out["query_check"].items()}, indent=1))
        write_result(path, out, indent=1)
        return
    if not args.experience or bool(args.policy) == bool(args.agent):
        ap.error("give --experience DIR and exactly one of --policy DIR and --agent NAME")
    path = Path(args.out)
    out: dict = json.loads(path.read_text()) if path.exists() else {"modes": {}}  # a later run adds its modes
    runs = out.setdefault("runs", [])
    runs.append({**result_meta("scripts/closed_loop_fidelity.py", argv), "modes": args.modes})
    for name in args.modes:
        print(f"[closed-loop] {name} ...", flush=True)
        np.random.seed(args.seed)
        out["modes"][name] = {"run": len(runs) - 1, **run_mode(name, args)}
        summary = {k: v for k, v in out["modes"][name].items() if k != "episodes"}
        print(json.dumps(summary, indent=1), flush=True)
        write_result(path, out, indent=1)  # after every mode: a kill keeps the modes done
    if args.probe:
        out["record_check"] = record_check(args)
        print(json.dumps(out["record_check"], indent=1), flush=True)
        write_result(path, out, indent=1)


if __name__ == "__main__":
    main()

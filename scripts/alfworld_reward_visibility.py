"""Is an ALFWorld step's win decided by what the experience model's prompt shows?

The prompt shows the instruction, the last ``history_window`` actions and the action (not the earlier
observations). A rule over exactly those reads the outcome of every step: a ``move`` wins when it puts a
goal object in a goal receptacle after the task's ``heat`` / ``cool`` / ``clean`` of that object (and, in
a pick-two task, after a first goal object was placed there and not taken back); in a look-at task
the step wins after which a goal object is held where the lamp was switched on. Where the rule's verdict differs from the real reward, the deciding
fact lies outside the window: a model trained on such a step learns to call the win without the evidence.

A win must also be reachable: in the synthetic env the policy chooses among the commands
``infer_available_actions`` lists for a model-written state, read with the episode's earlier states or
(before that was passed) without them. ``listed`` counts, on the same real episodes, how often that list
holds the command the agent took and the winning one, and how close it is to the real env's list.

    python scripts/alfworld_reward_visibility.py --windows 8 50 \\
        --data artifacts/alfworld/offline_train.jsonl artifacts/alfworld/experience_train.jsonl \\
               artifacts/alfworld/policy_rollouts_train.jsonl \\
        --out benchmarks/results/alfworld_reward_visibility.json
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from dreamgym.envs.alfworld.env import infer_available_actions
from dreamgym.envs.alfworld.searcher import move_parts, object_kind, take_parts, transformation
from dreamgym.lab.provenance import result_meta
from dreamgym.schema import read_trajectories


def goal_of(task_id: str) -> tuple[str, str, str]:
    """``(task_type, object, receptacle or lamp)`` of an ALFWorld task id (its game folder's name)."""
    task_type, obj, _, recep, *_ = task_id.split("/")[3].split("-")
    return task_type, obj.lower(), recep.lower()


def _lit(obj: str, lamp: str, actions: list[str]) -> bool:
    """After ``actions``: a goal object is held at the place where a goal lamp was switched on."""
    held = here = lamp_at = None
    for a in actions:
        if (took := take_parts(a)) is not None and object_kind(took[0]) == obj:
            held = took[0]
        elif (moved := move_parts(a)) and moved[0] == held:
            held = None
        elif a.startswith("go to "):
            here = a[len("go to ") :]
        elif a.startswith("use ") and object_kind(a[4:]) == lamp:
            lamp_at = here
    return held is not None and lamp_at is not None and here == lamp_at


def visible_win(task_type: str, obj: str, recep: str, shown: list[str], action: str) -> bool:
    """Whether ``action`` wins by the facts in ``shown`` (the prompt's actions, oldest first)."""
    if task_type == "look_at_obj_in_light":  # a goal object held where the lamp was switched on
        return _lit(obj, recep, [*shown, action]) and not _lit(obj, recep, shown)
    moved = move_parts(action)
    if not moved or object_kind(moved[0]) != obj or object_kind(moved[1]) != recep:
        return False
    need = transformation(task_type)
    if need and not any(a.startswith(f"{need} {moved[0]} with ") for a in shown):
        return False
    if task_type == "pick_two_obj_and_place":
        placed: set[str] = set()
        for a in shown:
            if (m := move_parts(a)) and object_kind(m[0]) == obj and object_kind(m[1]) == recep:
                placed.add(m[0])
            elif (took := take_parts(a)) is not None and object_kind(took[1]) == recep:
                placed.discard(took[0])
        return bool(placed - {moved[0]})
    return True


def measure(path: str, window: int) -> dict:
    """Per file and window: the wins, and the steps whose rule verdict differs from the real reward."""
    counts: Counter = Counter()
    for traj in read_trajectories(path):
        task_type, obj, recep = goal_of(traj.task_id)
        actions: list[str] = []
        for t in traj.transitions:
            shown = actions[-window:] if window else []
            rule, real = visible_win(task_type, obj, recep, shown, t.action), t.reward >= 1.0
            verb = t.action.split(" ", 1)[0]
            counts["steps"] += 1
            counts["wins"] += real
            if rule != real:
                counts[
                    f"{verb if verb in ('move', 'use') else 'other'}_{'win_hidden' if real else 'false_win'}"
                ] += 1
            actions.append(t.action)
    out = dict(counts)
    out["differ"] = sum(v for k, v in counts.items() if k not in ("steps", "wins"))
    out["wins_hidden_share"] = round(
        sum(v for k, v in counts.items() if k.endswith("win_hidden")) / max(counts["wins"], 1), 4
    )
    return out


def listed(path: str, history: bool) -> dict:
    """Per file: the share of taken (and of winning) real commands the text-inferred list holds, per verb,
    and the inferred list's mean precision / recall against the real env's, with or without ``history``."""
    taken: Counter = Counter()
    hit: Counter = Counter()
    precision, recall = [], []
    for traj in read_trajectories(path):
        states = [t.state for t in traj.transitions]
        for i, t in enumerate(traj.transitions):
            earlier = states[:i] if history else ()
            guess = set(infer_available_actions(traj.instruction, t.state, states[0], earlier))
            verb = t.action.split(" ", 1)[0]
            for key in (verb, "all", *(["win"] if t.reward >= 1.0 else [])):
                taken[key] += 1
                hit[key] += t.action in guess
            if real := set(t.available_actions):
                precision.append(len(guess & real) / max(len(guess), 1))
                recall.append(len(guess & real) / len(real))
    return {
        "history": history,
        "taken_listed": round(hit["all"] / max(taken["all"], 1), 4),
        "wins": taken["win"],
        "win_listed": round(hit["win"] / max(taken["win"], 1), 4),
        "per_verb_listed": {v: [hit[v], taken[v]] for v in sorted(taken) if v not in ("all", "win")},
        "list_precision": round(sum(precision) / max(len(precision), 1), 4),
        "list_recall": round(sum(recall) / max(len(recall), 1), 4),
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", nargs="+", required=True, help="ALFWorld trajectory JSONL files")
    ap.add_argument("--windows", nargs="+", type=int, default=[8, 50], help="history windows (actions shown)")
    ap.add_argument("--out", default="benchmarks/results/alfworld_reward_visibility.json")
    args = ap.parse_args(argv)
    result = {
        "_meta": {
            **result_meta("scripts/alfworld_reward_visibility.py", argv),
            "what": __doc__.split("\n\n")[1].replace("\n", " "),
        },
        "rows": [
            {"file": Path(f).name, "history_window": w, **measure(f, w)}
            for f in args.data
            for w in args.windows
        ],
        "listed": [{"file": Path(f).name, **listed(f, h)} for f in args.data for h in (False, True)],
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for row in result["rows"] + result["listed"]:
        print(row)
    return result


if __name__ == "__main__":
    main()

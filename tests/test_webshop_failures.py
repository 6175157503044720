"""scripts/webshop_failures.py: every held-out episode gets one failure kind, scored by the real reward's terms."""

from __future__ import annotations

import dataclasses

from dreamgym.collect import collect_trajectories
from dreamgym.envs.webshop import WebShopEnv
from tests.script_loader import load_script

failures = load_script("webshop_failures")


def test_the_expert_solves_a_truncated_episode_buys_nothing_and_a_wrong_option_is_named():
    env = WebShopEnv(split="test")
    expert = collect_trajectories("webshop", "test", 6, 0, seed=1, teacher=False)
    out = failures.breakdown(env, expert)
    assert out["episodes"] == 6 and out["kinds"]["solved"] == 1.0 and out["target_listed"] == 1.0
    cut = dataclasses.replace(expert[0], transitions=expert[0].transitions[:-1])  # never reached buy now
    assert failures.classify(env, cut)[0] == "no_purchase"
    traj = next(t for t in expert if "| options: none" not in t.transitions[-1].next_state)
    last = traj.transitions[-1]
    head, _, _ = last.next_state.partition(" | options: ")
    rest = last.next_state.split("\n", 3)[3]  # the [score] line
    wrong = dataclasses.replace(last, next_state=f"{head} | options: size: zzz\n{rest}")
    kind, missed, listed = failures.classify(
        env, dataclasses.replace(traj, transitions=[*traj.transitions[:-1], wrong])
    )
    assert kind == "options" and missed == ["options"] and listed
    assert out["failed_purchase_score"] is None  # every purchase solved: no failed one to average
    random = collect_trajectories("webshop", "test", 0, 8, seed=1, teacher=False)
    out = failures.breakdown(env, random)
    assert abs(sum(out["kinds"].values()) - 1.0) < 1e-9
    # the mean real score of the failed purchases (the episodes' own scores, no purchase excluded)
    wrong = [
        (t, o)
        for t, o in zip(random, out["episodes_by_task"], strict=True)
        if o["kind"] not in ("solved", "no_purchase")
    ]
    assert [o["score"] for _, o in wrong] == [t.score for t, _ in wrong]
    assert wrong and out["failed_purchase_score"] == sum(t.score for t, _ in wrong) / len(wrong)


def test_vs_first_pairs_each_source_with_the_first_on_shared_tasks():
    def eps(kinds):  # task id -> kind
        return {"episodes_by_task": [{"task_id": t, "kind": k} for t, k in kinds.items()]}

    first = eps({"a": "solved", "b": "options", "c": "solved", "d": "price"})
    later = eps({"a": "solved", "b": "solved", "c": "no_purchase", "d": "solved", "e": "solved"})
    out = failures.vs_first({"warm": first, "dagger": later})
    assert list(out) == ["dagger"]  # the first is the reference, not compared with itself
    row = out["dagger"]
    assert row["against"] == "warm" and row["n"] == 4  # task e: only the later source played it
    assert (row["only_a"], row["only_b"]) == (2, 1)  # b, d gained; c lost
    assert row["p_two_sided"] == 1.0

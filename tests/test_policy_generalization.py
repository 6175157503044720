"""scripts/policy_generalization.py: seeds pooled per arm, the per-task sign test against the base policy."""

import json

from script_loader import load_script

gen = load_script("policy_generalization")


def test_arms_pool_seeds_and_compare_each_tasks_mean_with_the_base(tmp_path):
    runs = {
        "warm_start": {"train_greedy": {"a": [0.0], "b": [1.0], "c": [0.0]}},
        "rl_s0": {"train_greedy": {"a": [1.0], "b": [1.0], "c": [0.0]}},
        "rl_s1": {"train_greedy": {"a": [1.0], "b": [0.0], "c": [0.0]}},
    }
    pooled = gen.arms(runs)
    assert pooled == {
        "rl (seeds pooled)": {"train_greedy": {"a": [1.0, 1.0], "b": [1.0, 0.0], "c": [0.0, 0.0]}}
    }
    rows = {(r["policy"], r["condition"]): r for r in gen.compare(runs, "warm_start")}
    arm = rows[("rl (seeds pooled)", "train_greedy")]
    # task a higher, b lower (0.5 < 1), c tied
    assert (arm["higher"], arm["lower"], arm["episodes"]) == (1, 1, 6)
    assert abs(arm["success"] - 0.5) < 1e-9 and arm["p_two_sided"] == 1.0
    assert (rows[("rl_s0", "train_greedy")]["higher"], rows[("rl_s0", "train_greedy")]["lower"]) == (1, 0)
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"base": "warm_start", "runs": runs}))
    table = gen.report(str(path))
    assert "| rl (seeds pooled) | train_greedy | 3 | 6 | 0.500 | 1 / 1, p = 1 |" in table


def test_the_arm_table_pools_seeds_into_one_row_per_arm(tmp_path):
    runs = {
        "warm_start": {"train_greedy": {"a": [0.0], "b": [1.0]}},
        "rl_s0": {"train_greedy": {"a": [1.0], "b": [1.0]}},
        "rl_s1": {"train_greedy": {"a": [1.0], "b": [1.0]}},
    }
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"base": "warm_start", "runs": runs}))
    assert gen.arm_table(str(path)).splitlines() == [
        "| policy | train_greedy |",
        "|---|---|",
        "| warm_start | 0.500 |",
        "| rl (seeds pooled) | 1.000 (1 / 0, p = 0.67) |",
    ]  # task a: any of its 3 episodes may be the base's; only the failed one (1/3) makes "higher": p = 2/3

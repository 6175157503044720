"""The benchmark suite: its statistics and report from stored records, its config checks, and a tiny suite
end to end (every arm kind runs, records hold what the report needs, a rerun fits nothing)."""

import json
import math
import sys

import pytest
from tiny_pipeline import QUIET, SYNTHETIC_ENV, TINY_RL, TINY_RL_ARGS, TINY_SYNTHETIC_ENV, pipeline_overrides

from dreamgym.lab.benchmark.report import (
    AUDIT_TAGS,
    arm_summary,
    audit_table,
    crossover_latency,
    figure_paths,
    paired,
    per_task,
    write_report,
)
from dreamgym.lab.benchmark.suite import (
    Arm,
    ExperienceVariant,
    SuiteConfig,
    check_same_host,
    check_same_shared_stages,
    load_results,
    parse_suite_config,
    run_suite,
    uses_judge,
)
from dreamgym.lab.pipeline import Prepared
from dreamgym.schema import read_trajectories


def _sched(init_args: dict) -> dict:
    """The config piece of an RL config's schedule arguments."""
    return {"model": {"init_args": {"schedule": {"init_args": init_args}}}}


def _rec(arm, seed, successes, online=0, fit=100.0, tasks=None):
    return {
        "arm": arm, "seed": seed, "successes": successes, "task_ids": tasks or [f"t{i}" for i in range(len(successes))],
        "metrics": {"success_rate": successes.count("1") / len(successes), "score_mean": 0.5},
        "real_transitions": {"offline": 1000, "online": online, "audit": 0}, "synthetic_transitions": 0 if online else 64,
        "fit_seconds": fit, "fit_cpu_seconds": 2 * fit, "commit": "abcdef0123", "dirty": False,
        "curve": {"val/success_rate": [[4, 0.1 + seed], [8, 0.2]]},
    }  # fmt: skip


def test_paired_pools_seed_with_seed_and_the_warm_start_with_every_seed():
    arm = [_rec("a", 0, "1100"), _rec("a", 1, "1000")]
    warm = [_rec("warm_start", 0, "0100")]
    out = paired(arm, warm)  # pairs: 1100|0100 and 1000|0100
    assert (out["n"], out["only_a"], out["only_b"]) == (8.0, 2.0, 1.0)
    real = [_rec("r", 1, "0000"), _rec("r", 0, "1111")]  # seed 0 with seed 0, 1 with 1, whatever the order
    out = paired(arm, real)
    assert (out["only_a"], out["only_b"]) == (1.0, 2.0)
    assert paired(arm, [_rec("r", 5, "1111"), _rec("r", 6, "1111")]) is None  # no common seed
    assert paired(arm, [_rec("warm_start", 0, "0100", tasks=["x", "y", "z", "w"])]) is None  # other tasks


def test_per_task_counts_each_task_once_where_the_pooled_test_counts_it_per_seed():
    warm = [_rec("warm_start", 0, "0001")]
    arm = [_rec("a", 0, "1101"), _rec("a", 1, "1001"), _rec("a", 2, "0100")]
    pooled = paired(arm, warm)  # the warm start's one record against each seed: 2 + 1 + 1 gained, 1 lost
    assert (pooled["only_a"], pooled["only_b"]) == (4.0, 1.0)
    assert pooled["p_two_sided"] == pytest.approx(2 * 6 / 32)
    out = per_task(arm, warm)  # seed means 2/3, 2/3, 0, 2/3 against 0, 0, 0, 1: 2 tasks higher, 1 lower
    assert (out["higher_a"], out["higher_b"], out["n"]) == (2.0, 1.0, 4.0)
    # the null lets any of a task's 4 records be the warm start's: tasks 1 and 2 hold 2 solved and 2 failed
    # records (term +1 or -1, 1/2 each), task 3 none (0), task 4 three solved (-1 when a solved one is the
    # warm start's, 3/4; else +1); S = 2 - 1 = 1: P[S >= 1] = P[S = 3] + P[S = 1] = 1/16 + 5/16
    assert out["null_mean"] == pytest.approx(-0.5)
    assert out["p_two_sided"] == pytest.approx(2 * 6 / 16)
    one = per_task(arm[:1], warm)  # one seed: the McNemar test itself
    assert (one["higher_a"], one["higher_b"], one["p_two_sided"]) == (
        2.0,
        0.0,
        paired(arm[:1], warm)["p_two_sided"],
    )
    assert per_task(arm, [_rec("warm_start", 0, "0100", tasks=["x", "y", "z", "w"])]) is None  # other tasks
    assert per_task([], warm) is None


def test_arm_summary_and_crossover():
    s = arm_summary([_rec("a", 0, "10000", fit=1000.0), _rec("a", 1, "11000", fit=1200.0)])
    assert s["seeds"] == [0, 1] and s["n_tasks"] == 5
    assert s["success"][0] == pytest.approx(0.3) and s["success"][1] == pytest.approx(math.sqrt(0.02))
    assert s["fit_seconds"] == (1100.0, pytest.approx(math.sqrt(20000)))
    real = arm_summary([_rec("r", 0, "10000", online=900, fit=200.0)])
    assert crossover_latency(s, real) == pytest.approx((1100 - 200) / 900)
    assert crossover_latency(real, s) is None  # more real steps than the reference: never cheaper
    resumed = {**_rec("a", 2, "11000", fit=900.0), "fit_interrupted": 1}  # the killed process's CPU is lost
    assert math.isnan(arm_summary([_rec("a", 0, "10000", fit=1000.0), resumed])["fit_cpu_seconds"][0])


def test_an_ablation_variant_trains_on_the_shared_models_data(tmp_path):
    """Only its own overrides differ: the experience model's extra episodes (ALFWorld's near misses) included."""
    from types import SimpleNamespace

    from dreamgym.lab.benchmark.suite import _variant_model

    fits = []

    def stage(name, fn, config, args, out, key):
        fits.append(args)
        return out

    p = {k: tmp_path / k for k in ("train", "test", "tok", "exp", "sft", "roll", "sim", "warm", "near")}
    prep = Prepared(
        p["train"], p["test"], p["tok"], p["exp"], p["sft"], p["roll"], p["sim"], p["warm"], p["near"]
    )
    a, b, k0 = {"a": 1}, {"b": 2}, {"data": {"init_args": {"k": 0}}}
    pcfg = SimpleNamespace(
        experience_config="x.yaml", experience_overrides=[a], onpolicy_experience_overrides=[b]
    )
    _variant_model(_suite(tmp_path), pcfg, prep, ExperienceVariant("no_retrieval", [k0]), stage)
    offline, onpolicy = fits
    assert offline[0]["data"]["init_args"]["train_files"] == [str(p["train"]), str(p["near"])]
    assert offline[1:] == [a, k0] and onpolicy[1:] == [b, k0]
    assert onpolicy[0]["data"]["init_args"]["train_files"] == [str(p[k]) for k in ("train", "near", "roll")]
    first = tmp_path / "out" / "experience" / "no_retrieval" / "offline"  # the variant's own first fit
    assert onpolicy[0]["model"]["init_args"]["lm"]["init_args"]["path"] == str(first)


def _suite(tmp_path, **kw):
    base = dict(name="toy", pipeline="configs/pipeline_webshop.yaml", out_dir=str(tmp_path / "out"),
                results=str(tmp_path / "res.json"), report=str(tmp_path / "rep" / "suite_toy.md"), document=None)  # fmt: skip
    return SuiteConfig(**{**base, **kw})


def test_report_from_records_replaces_only_its_section(tmp_path):
    doc = tmp_path / "BENCH.md"
    doc.write_text("# head\n<!-- benchmark:toy:start -->\nold\n<!-- benchmark:toy:end -->\ntail\n")
    arms = [
        Arm("warm_start"),
        Arm("real_grpo", "x.yaml"),
        Arm("dreamgym_grpo", "y.yaml"),
        Arm("ppo", "z.yaml", seeds=[0]),
    ]
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- results:toy:start -->\nstale\n<!-- results:toy:end -->\nrest\n")
    arms[1].paper = "65.0 (80K real)"
    cfg = _suite(
        tmp_path, arms=arms, seeds=[0, 1], document=str(doc), values={"iterations": 8}, summary=str(readme)
    )
    runs = {"warm_start/s0": _rec("warm_start", 0, "0100"), "real_grpo/s0": _rec("real_grpo", 0, "0110", online=800),
            "real_grpo/s1": _rec("real_grpo", 1, "0100", online=700, fit=50.0),
            "dreamgym_grpo/s0": _rec("dreamgym_grpo", 0, "1100", fit=500.0)}  # fmt: skip
    host = {"device": "AMD EPYC", "matmul": "avx512_bf16", "torch": "2.13.0+cpu"}
    text = write_report(cfg, {"shared": {"eval_tasks": 4, "host": host}, "runs": runs}).read_text()
    assert "Built on AMD EPYC (bf16 matmuls: avx512_bf16, torch 2.13.0+cpu)." in text
    assert "| real_grpo | 2 | 0.375 +- 0.177 | 0.500 +- 0.000 | 1000 | 750 +- 71 |" in text
    # vs the warm start: seed-pooled McNemar and per-task sign test (one seed: the same), then vs real GRPO
    # (1100 against 0110 and 0100: 2 / 1); two-sided p = min(1, 2 P[X >= max(b, c)])
    assert "| dreamgym_grpo | 1 | 0.500 | 0.500 |" in text
    assert "| 1 / 0, p = 1.000 | 1 / 0, p = 1.000 | 2 / 1, p = 1.000 |  |" in text
    # real_grpo: pooled over its two seeds against the warm start 1 / 0; per task (seed means 0, 1, 0.5, 0
    # against 0, 1, 0, 0) 1 / 0; against DreamGym GRPO's one record paired with both seeds 1 / 2
    assert "| 1 / 0, p = 1.000 | 1 / 0, p = 1.000 |  | 1 / 2, p = 1.000 |" in text
    assert "p: two-sided exact McNemar test, min(1, 2 P[X >= max(b, c)])" in text and "one-sided" not in text
    assert "**Not run yet** (no record): dreamgym_grpo (seeds [1]); ppo (seeds [0])." in text
    assert "| dreamgym_grpo | 0.14 | 0.14 | 0.14 | 0.567 s |" in text  # (500 - 75) / 750 real steps saved
    body = doc.read_text()
    assert (
        body.startswith("# head\n<!-- benchmark:toy:start -->\n### Benchmark suite `toy`")
        and "old" not in body
    )
    assert body.endswith("<!-- benchmark:toy:end -->\ntail\n") and "](rep/suite_toy_success.png)" in body
    summary = readme.read_text()  # the README's short table: every arm, ours in %, the paper's figure
    assert summary.startswith("intro\n<!-- results:toy:start -->\n| arm |") and "stale" not in summary
    assert (
        "| real_grpo | 37.5 +- 17.7 (2) | 750 +- 71 | 1 / 0, p = 1.000 | 1 / 0, p = 1.000 | 65.0 (80K real) |"
        in summary
    )
    assert "| ppo | not run yet | | | |  |" in summary and summary.endswith(
        "<!-- results:toy:end -->\nrest\n"
    )
    assert "p: two-sided exact tests against the warm start" in summary and "one-sided" not in summary
    assert (tmp_path / "rep" / "suite_toy_success.png").stat().st_size > 0
    assert (tmp_path / "rep" / "suite_toy_curves.png").stat().st_size > 0


def test_the_report_says_when_the_simulators_stages_are_not_built(tmp_path):
    """A table whose shared stages are the real-env ones only (its simulator SHA-256 None) says the simulator's
    stages are not built, instead of an on-policy transition count of 0 that reads as a measured one."""
    cfg = _suite(tmp_path, arms=[Arm("warm_start")])
    runs = {"warm_start/s0": _rec("warm_start", 0, "0100")}
    built = {"onpolicy_train_transitions": 1466, "weights_sha256": {"warm_start": "a", "simulator": "b"}}
    real_only = {"onpolicy_train_transitions": 0, "weights_sha256": {"warm_start": "a", "simulator": None}}
    text = write_report(cfg, {"shared": built, "runs": runs}).read_text()
    assert "the warm start's on-policy train transitions 1466." in text and "not built" not in text
    text = write_report(cfg, {"shared": real_only, "runs": runs}).read_text()
    assert "on-policy train transitions" not in text
    assert "; the simulator's stages (experience model, on-policy episodes, judge) not built yet." in text


def test_the_audit_table_averages_each_fit_over_its_iterations_then_over_seeds(tmp_path):
    """Arms that played synthetic steps get a closed-loop row from their records' audit curves (a resumed
    fit's repeated step counted once); a real-env arm, or a record written without audit curves, gets none."""
    cfg = _suite(tmp_path, arms=[Arm("warm_start"), Arm("real", "x.yaml"), Arm("dream", "y.yaml")])

    def dream(seed, precision, old=False):
        rec = _rec("dream", seed, "0110")
        if not old:
            rec["curve"] |= {t: [[0, 0.5], [1, 0.5], [1, precision], [2, precision]] for t in AUDIT_TAGS}
            rec["curve"]["rollout/success_rate"] = [[0, 0.1], [1, 0.2], [2, 0.3 + seed / 10]]
        return rec

    runs = {"warm_start/s0": _rec("warm_start", 0, "0100"), "real/s0": _rec("real", 0, "0110", online=800),
            "dream/s0": dream(0, 1.0), "dream/s1": dream(1, 0.5), "dream/s2": dream(2, 0.0, old=True)}  # fmt: skip
    lines = audit_table(cfg, {"runs": runs})
    # seed 0: (0.5 + 1 + 1) / 3; seed 1: 0.5 (the step logged twice: the later value); seed 2 has no curves
    row = "| dream | 2 | 0.67 +- 0.24 | 0.67 +- 0.24 | 0.67 +- 0.24 | 0.67 +- 0.24 | 0.67 +- 0.24 | 0.10 +- 0.00 -> 0.35 +- 0.07 |"
    assert [line for line in lines if line.startswith("| dream")] == [row]
    assert not any(line.startswith("| real") for line in lines)
    assert (
        audit_table(cfg, {"runs": {k: v for k, v in runs.items() if k != "dream/s0" and k != "dream/s1"}})
        == []
    )
    assert row in write_report(cfg, {"shared": {}, "runs": runs}).read_text()


def test_figures_are_named_after_their_report(tmp_path):
    # a second results file of the same suite (a re-run) keeps the first one's figures
    cfg = _suite(tmp_path, arms=[Arm("warm_start")], report=str(tmp_path / "rep" / "suite_toy_rerun.md"))
    text = write_report(
        cfg, {"shared": {"eval_tasks": 4}, "runs": {"warm_start/s0": _rec("warm_start", 0, "0100")}}
    )
    assert "(suite_toy_rerun_success.png)" in text.read_text()
    assert sorted(p.name for p in (tmp_path / "rep").glob("*.png")) == [
        "suite_toy_rerun_curves.png",
        "suite_toy_rerun_success.png",
    ]


def test_without_matplotlib_the_report_says_so_and_keeps_figures_drawn_before(tmp_path, monkeypatch, capsys):
    cfg = _suite(tmp_path, arms=[Arm("warm_start")], report=str(tmp_path / "rep" / "suite_toy.md"))
    results = {"shared": {"eval_tasks": 4}, "runs": {"warm_start/s0": _rec("warm_start", 0, "0100")}}
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as without the plots extra
    text = write_report(cfg, results).read_text()
    assert "(no figures: matplotlib is not installed (figures need the plots extra: pip install " in text
    assert "[benchmark] no figures: matplotlib is not installed" in capsys.readouterr().out
    for path in figure_paths(
        cfg
    ):  # drawn by an earlier run: a report regenerated without matplotlib links them
        path.write_bytes(b"png")
    text = write_report(cfg, results).read_text()
    assert "(suite_toy_success.png)" in text and "no figures" not in text
    assert "the existing ones are kept" in capsys.readouterr().out


def test_suite_config_errors_name_the_field(tmp_path):
    with pytest.raises(ValueError, match="arm names must be unique; repeated: \\['a'\\]"):
        _suite(tmp_path, arms=[Arm("a"), Arm("a", "x.yaml")])
    with pytest.raises(ValueError, match="experience='nope', which is not in experience_variants \\['k0'\\]"):
        _suite(
            tmp_path,
            arms=[Arm("a", "x.yaml", experience="nope")],
            experience_variants=[ExperienceVariant("k0")],
        )
    toy = _suite(tmp_path, values={"iterations": 2})
    with pytest.raises(ValueError, match="template \\{budget\\} is not in `values`"):
        toy.fill([{"x": "{budget}"}], seed=0)
    filled = toy.fill(
        [{"i": "{iterations}", "s": ["{seed}"], "n": "run{seed}", "k": '{"a": 1}', "f": 0.5}], 3
    )
    assert filled == [{"i": 2, "s": [3], "n": "run3", "k": '{"a": 1}', "f": 0.5}]  # a value stays a number
    with pytest.raises(
        ValueError, match='unquoted in YAML is the mapping .*quote the template: "\\{iterations\\}"'
    ):
        toy.fill([{"model": {"iterations": {"iterations": None}}}], 0)  # `iterations: {iterations}` in YAML
    with pytest.raises(ValueError, match="--only names unknown arm\\(s\\) \\['nope'\\]"):
        parse_suite_config(["--config", "configs/benchmark_webshop.yaml", "--only=[nope]"])
    with pytest.raises(ValueError, match="arm 'b' extends 'a', which is not an RL arm listed before it"):
        _suite(tmp_path, arms=[Arm("b", extends="a"), Arm("a", "x.yaml")])
    lr, kl = {"model": {"init_args": {"lr": 1}}}, {"model": {"init_args": {"kl": 2}}}
    arms = [Arm("a", "x.yaml", [lr]), Arm("b", overrides=[kl], extends="a")]
    recipe = _suite(tmp_path, arms=arms, quick_preset={"seeds": [0]})
    assert (recipe.arms[1].rl_config, recipe.arms[1].overrides) == ("x.yaml", [lr, kl])
    assert recipe.quick_config().arms[1].overrides == [lr, kl]  # resolved once, not again
    assert recipe.arm_overrides(recipe.arms[1], 4) == [{"seed_everything": 4}, lr, kl]
    with pytest.raises(
        ValueError,
        match=r"arms\[a\].overrides: '--model.init_args.lr=1' is a command-line argument; "
        r"a piece is written in the config's own nesting: \{model: \{init_args: \{lr: 1\}\}\}",
    ):
        _suite(tmp_path, arms=[Arm("a", "x.yaml", ["--model.init_args.lr=1"])])
    with pytest.raises(FileNotFoundError, match=r"common_overrides: 'nope.yaml' is not a mapping or a file"):
        _suite(tmp_path, common_overrides=["nope.yaml"])
    bad = tmp_path / "res.json"
    bad.write_text("{")
    with pytest.raises(ValueError, match="res.json is not valid JSON"):
        load_results(bad)


def test_a_new_simulator_keeps_records_that_never_simulated(tmp_path):
    cfg = _suite(tmp_path, arms=[Arm("warm_start"), Arm("real", "x.yaml"), Arm("dream", "y.yaml")])
    warm = {**_rec("warm_start", 0, "10"), "synthetic_transitions": 0}
    shared = {"pipeline_out_dir": "out", "weights_sha256": {"warm_start": "w" * 64, "simulator": "n" * 64}}
    stored = {
        "shared": {"commit": "abc", "weights_sha256": {"warm_start": "w" * 64, "simulator": "o" * 64}},
        "runs": {"warm_start/s0": warm, "real/s0": _rec("real", 0, "11", online=50)},
    }
    check_same_shared_stages(cfg, stored, shared, warm)  # no record played a synthetic step
    stored["runs"]["dream/s0"] = _rec("dream", 0, "01")
    with pytest.raises(ValueError, match="its simulator weights had SHA-256 oooooooooooo"):
        check_same_shared_stages(cfg, stored, shared, warm)
    del stored["runs"]["dream/s0"]
    shared["weights_sha256"]["warm_start"] = "x" * 64  # the warm start matters to every record
    with pytest.raises(ValueError, match="its warm_start weights had SHA-256 wwwwwwwwwwww"):
        check_same_shared_stages(cfg, stored, shared, warm)


def test_real_env_arms_alone_prepare_no_simulator_and_keep_the_stored_ones_facts(tmp_path, monkeypatch):
    """The suite asks :func:`prepare` for the experience model only when a pending arm plays it (or trains
    its own variant); a real-only run keeps the stored record's simulator facts, so records measured from
    that simulator stay comparable."""
    from dreamgym.lab.benchmark import suite

    real, dream = Arm("real", "configs/webshop_real_grpo.yaml"), Arm("dream", "configs/webshop_grpo.yaml")
    variant = Arm("real_variant", "configs/webshop_real_grpo.yaml", experience="no_reasoning")
    assert [suite._needs_simulator(a) for a in (Arm("warm_start"), real, dream, variant)] == [
        False, False, True, True,
    ]  # fmt: skip
    asked = []

    class Prepared(Exception):
        pass

    def fake_prepare(pcfg, stage, budget=None, simulator=True):
        asked.append(simulator)
        raise Prepared

    monkeypatch.setattr(suite, "prepare", fake_prepare)
    cfg = _suite(tmp_path, arms=[Arm("warm_start"), real, dream])
    for only, seeds in ((["warm_start", "real"], None), (None, None), (["dream"], [5])):
        with pytest.raises(Prepared):
            run_suite(cfg, only=only, seeds=seeds)
    assert asked == [False, True, False]  # dream has no seed 5: nothing pending plays the simulator
    old = {
        "weights_sha256": {"warm_start": "w", "simulator": "s", "judge": "j"},
        "onpolicy_train_transitions": 7,
    }
    now = {
        "weights_sha256": {"warm_start": "w", "simulator": None, "judge": None},
        "onpolicy_train_transitions": 0,
    }
    kept = suite._keep_simulator_record(now, {"shared": old})
    assert kept["weights_sha256"] == old["weights_sha256"] and kept["onpolicy_train_transitions"] == 7
    built = {
        "weights_sha256": {"warm_start": "w", "simulator": "n", "judge": None},
        "onpolicy_train_transitions": 9,
    }
    assert (
        suite._keep_simulator_record(dict(built), {"shared": old}) == built
    )  # a prepared simulator is the one
    # a real-only process storing its record after a parallel one that built the simulator keeps its facts
    path = tmp_path / "parallel.json"
    real_only = {"weights_sha256": {"warm_start": "w", "simulator": None, "judge": None}}
    suite._store(path, "dream/s0", {"arm": "dream"}, built)
    merged = suite._store(path, "real/s0", {"arm": "real"}, real_only)
    assert merged["shared"]["weights_sha256"]["simulator"] == "n" and set(merged["runs"]) == {
        "dream/s0",
        "real/s0",
    }
    assert real_only["weights_sha256"]["simulator"] is None  # the caller's record is not changed


def test_rebuilding_the_shared_stages_on_other_hardware_is_refused_before_it_starts(tmp_path):
    cfg = _suite(tmp_path, arms=[Arm("warm_start"), Arm("real", "x.yaml")])
    here = {"device": "AMD EPYC", "matmul": "avx512_bf16", "torch": "2.13.0+cpu"}
    there = {**here, "device": "Intel Xeon", "matmul": "amx"}
    stored = {
        "shared": {"pipeline_out_dir": "out", "host": there},
        "runs": {"real/s0": _rec("real", 0, "11")},
    }
    with pytest.raises(
        ValueError, match=r"built on \{'device': 'Intel Xeon'.*this machine is .*AMD EPYC.*nothing was built"
    ):
        check_same_host(cfg, stored, here, rebuild=True)
    check_same_host(cfg, stored, here, rebuild=False)  # the stages are on disk: their weights are compared
    check_same_host(cfg, stored, there, rebuild=True)  # the same kind of machine
    check_same_host(cfg, {**stored, "runs": {}}, here, rebuild=True)  # no record to mix with
    del stored["shared"]["host"]  # stored before hosts were recorded: only the weights are compared
    check_same_host(cfg, stored, here, rebuild=True)


def test_a_new_reward_judge_refuses_only_where_a_record_was_rewarded_by_the_old_one(tmp_path):
    env = {"write_back": True, "reward": "judge"}
    judge_args = [
        {"model": {"init_args": {"schedule": {"init_args": {"env": {"init_args": {"kwargs": env}}}}}}}
    ]
    assert uses_judge(judge_args) and not uses_judge(
        [{"x": {"kwargs": {"reward": "generated"}}}, {"seed_everything": 0}]
    )
    old = '--model.init_args.schedule.init_args.env.init_args.kwargs={"write_back": true, "reward": "judge"}'
    assert uses_judge([old]) and uses_judge(["--x.kwargs={reward: judge}"])  # records written before pieces
    assert not uses_judge(['--x.kwargs={"reward": "generated"}', "--judge_config=j.yaml"])
    cfg = _suite(
        tmp_path, arms=[Arm("warm_start"), Arm("dream", "y.yaml"), Arm("judged", "y.yaml", judge_args)]
    )
    warm = {**_rec("warm_start", 0, "10"), "synthetic_transitions": 0}
    sha = {"warm_start": "w" * 64, "simulator": "s" * 64}
    shared = {"pipeline_out_dir": "out", "weights_sha256": {**sha, "judge": "n" * 64}}
    stored = {
        "shared": {"commit": "abc", "weights_sha256": {**sha, "judge": "o" * 64}},
        "runs": {"warm_start/s0": warm, "dream/s0": {**_rec("dream", 0, "01"), "args": []}},
    }
    check_same_shared_stages(cfg, stored, shared, warm)  # the simulating record used the generated reward
    for args in (judge_args, [old]):  # a record of config pieces, and one written before them
        stored["runs"]["judged/s0"] = {**_rec("judged", 0, "01"), "args": args}
        with pytest.raises(ValueError, match="its judge weights had SHA-256 oooooooooooo"):
            check_same_shared_stages(cfg, stored, shared, warm)
    stored["shared"]["weights_sha256"]["judge"] = None  # stored before judges were hashed: not compared
    check_same_shared_stages(cfg, stored, shared, warm)


def test_bundled_suite_config_parses(tmp_path):
    cfg, flags = parse_suite_config(["--config", "configs/benchmark_webshop.yaml"])
    assert [a.name for a in cfg.arms][:4] == ["warm_start", "real_grpo", "dreamgym_grpo", "dreamgym_s2r_grpo"]
    assert cfg.arm_seeds(cfg.arms[0]) == [0] and cfg.arm_seeds(cfg.arms[1]) == [0, 1, 2]
    assert sorted(cfg.variants) == ["no_reasoning", "no_retrieval"] and flags == {
        "only": None,
        "report_only": False,
        "seeds": None,
    }
    for argv in (["--seeds", "[1]"], ["--seeds=[1]"]):  # a selection of what runs: the plan stays the file's
        picked, flags = parse_suite_config(["--config", "configs/benchmark_webshop.yaml", *argv])
        assert flags["seeds"] == [1] and picked.seeds == [0, 1, 2] == picked.arm_seeds(picked.arms[1])
    with pytest.raises(ValueError, match=r"--seeds \[1, 7\] names seed\(s\) \[7\] that no arm plans"):
        parse_suite_config(["--config", "configs/benchmark_webshop.yaml", "--seeds=[1, 7]"])
    for arm in cfg.arms:  # every template has its value
        cfg.arm_overrides(arm, 0)
    ppo = next(a for a in cfg.arms if a.name == "real_ppo")  # extends real_grpo, then lists a piece file
    assert (
        ppo.rl_config == "configs/webshop_real_grpo.yaml"
        and ppo.overrides[-1]["model"]["init_args"]["critic_lr"] == 1e-4
    )
    assert cfg.command == "python -m dreamgym benchmark --config configs/benchmark_webshop.yaml"
    other, _ = parse_suite_config(
        [
            "--config",
            "configs/benchmark_webshop.yaml",
            "--only=[real_grpo]",
            "--seeds",
            "[0]",
            "--values",
            "{iterations: 32}",
        ]
    )  # the report names what makes the table (overrides), not what ran now (--only, --seeds)
    assert other.command.endswith("benchmark_webshop.yaml --values '{iterations: 32}'")
    quick, _ = parse_suite_config(
        ["--config", "configs/benchmark_webshop.yaml", "--quick=true", "--out_dir=x/b"]
    )
    assert [a.name for a in quick.arms] == [a.name for a in cfg.arms]  # every arm, one seed, its own files
    assert all(quick.arm_seeds(a) == [0] for a in quick.arms) and quick.document is quick.summary is None
    assert (
        str(quick.results) == "x/b_quick/suite_webshop.json"
        and quick.pipeline_overrides["out_dir"] == "x/b_quick/shared"
    )
    assert "{out_dir}" not in json.dumps(quick.pipeline_overrides) and quick.values["iterations"] == 1
    fit = quick.pipeline_overrides["policy_sft_overrides"][0]["trainer"]
    assert (
        fit["default_root_dir"] == "x/b_quick/shared/runs" and fit["max_steps"] == 2
    )  # a YAML alias, filled
    assert (
        quick.arm_overrides(quick.arms[1], 0)[-2]["trainer"]["enable_checkpointing"] is False
    )  # quick common
    aw, _ = parse_suite_config(["--config", "configs/benchmark_alfworld.yaml", "--quick=true"])
    assert str(aw.results) == "artifacts/benchmark_alfworld_quick/suite_alfworld.json"
    assert aw.pipeline_overrides["max_steps"] == 4 and aw.pipeline_overrides["vocab_size"] == 400  # merged
    with pytest.raises(ValueError, match="no `quick_preset` section"):
        _suite(tmp_path, arms=[Arm("warm_start")]).quick_config()
    with pytest.raises(ValueError, match=r"quick_preset: unknown key\(s\) \['results'\]"):
        _suite(tmp_path, quick_preset={"results": "r.json"})


@pytest.mark.slow
def test_quick_suite_runs_every_bundled_arm(tmp_path):
    """`python -m dreamgym benchmark --config configs/benchmark_webshop.yaml --quick true` (about a minute)."""
    from dreamgym.lab.benchmark.suite import main

    main(["--config", "configs/benchmark_webshop.yaml", "--quick", "true", f"--out_dir={tmp_path}/b"])
    runs = json.loads((tmp_path / "b_quick" / "suite_webshop.json").read_text())["runs"]
    cfg, _ = parse_suite_config(["--config", "configs/benchmark_webshop.yaml"])
    assert sorted(runs) == sorted(f"{a.name}/s0" for a in cfg.arms)
    online = {k.split("/")[0]: r["real_transitions"]["online"] for k, r in runs.items()}
    synthetic = {k.split("/")[0]: r["synthetic_transitions"] for k, r in runs.items()}
    for arm in cfg.arms:  # each arm plays in the world its name says
        real, sim = online[arm.name] > 0, synthetic[arm.name] > 0
        assert (real, sim) == ("real" in arm.name or "s2r" in arm.name, arm.name.startswith("dreamgym")), (
            arm.name
        )
    assert runs["dreamgym_grpo_no_reasoning/s0"]["experience"] == "no_reasoning"
    assert (tmp_path / "b_quick" / "suite_webshop.md").exists()


@pytest.mark.slow
def test_tiny_suite_end_to_end_and_resumable(tmp_path):
    out = tmp_path / "ws"
    quiet = {"trainer": {**QUIET, "default_root_dir": f"{out}/runs"}}
    del quiet["trainer"]["logger"]  # a logger: the records read its counters
    real_env = {"env": {"init_args": {"batch_size": 2, "max_steps": 2}}, "budget": "{budget}"}
    arms = [
        Arm("warm_start"),
        Arm("real_grpo", "configs/webshop_real_grpo.yaml", [_sched(real_env)]),
        Arm("dreamgym_grpo", "configs/webshop_grpo.yaml", SYNTHETIC_ENV, seeds=[0, 1]),
        Arm("dreamgym_grpo_k0", "configs/webshop_grpo.yaml", SYNTHETIC_ENV, experience="k0"),
    ]  # fmt: skip
    k0 = ExperienceVariant("k0", [{"data": {"init_args": {"k": 0}}}])
    cfg = _suite(
        tmp_path, pipeline_overrides=pipeline_overrides(out, QUIET), seeds=[0], values={"budget": 8}, arms=arms,
        common_overrides=[quiet, *TINY_RL_ARGS], experience_variants=[k0],
    )  # fmt: skip
    first = run_suite(cfg, seeds=[0])  # a selection: the report still plans dreamgym_grpo's seed 1
    assert "dreamgym_grpo/s1" not in first["runs"] and "dreamgym_grpo/s0" in first["runs"]
    assert "dreamgym_grpo (seeds [1])" in (tmp_path / "rep" / "suite_toy.md").read_text()
    results = run_suite(cfg)  # resumes: only the missing seed runs
    runs = results["runs"]
    assert runs["dreamgym_grpo/s0"] == first["runs"]["dreamgym_grpo/s0"]
    assert sorted(runs) == [
        "dreamgym_grpo/s0",
        "dreamgym_grpo/s1",
        "dreamgym_grpo_k0/s0",
        "real_grpo/s0",
        "warm_start/s0",
    ]
    shared = results["shared"]
    assert shared["offline_train_transitions"] > 0 and shared["onpolicy_train_transitions"] > 0
    real, dream = runs["real_grpo/s0"], runs["dreamgym_grpo/s0"]
    assert 0 < real["real_transitions"]["online"] <= 8 and real["synthetic_transitions"] == 0
    assert dream["real_transitions"]["online"] == 0 and dream["synthetic_transitions"] > 0
    assert real["real_transitions"]["offline"] == shared["offline_train_transitions"]
    assert (
        dream["real_transitions"]["offline"]
        == shared["offline_train_transitions"] + shared["onpolicy_train_transitions"]
    )
    assert runs["warm_start/s0"]["real_transitions"]["online"] == 0
    for r in runs.values():
        assert len(r["successes"]) == 2 and r["task_ids"] == runs["warm_start/s0"]["task_ids"]
    assert runs["dreamgym_grpo/s1"]["args"][0] == {"seed_everything": 1} and dream["fit_seconds"] > 0
    assert real["args"][-1] == _sched({**real_env, "budget": 8})  # the overrides, templates filled
    k0 = json.loads(
        (out.parent / "out" / "experience" / "k0" / "onpolicy" / "experience_format.json").read_text()
    )
    assert k0["k"] == 0 and runs["dreamgym_grpo_k0/s0"]["experience"] == "k0"
    assert json.loads((tmp_path / "res.json").read_text())["runs"] == runs
    assert "| dreamgym_grpo | 2 |" in (tmp_path / "rep" / "suite_toy.md").read_text()
    stamp = (tmp_path / "out" / "real_grpo" / "s0" / "policy").stat().st_mtime
    again = run_suite(cfg)  # everything is on record: nothing is fitted or played again
    assert (
        again["runs"] == runs and (tmp_path / "out" / "real_grpo" / "s0" / "policy").stat().st_mtime == stamp
    )
    shas = again["shared"]["weights_sha256"]
    assert len(shas["warm_start"]) == len(shas["simulator"]) == 64 and shas["judge"] is None  # no judge stage
    # records of another warm start (a rebuild, another session): refused, the results file untouched
    res = tmp_path / "res.json"
    other = json.loads(res.read_text())
    flipped = "".join("0" if c == "1" else "1" for c in runs["warm_start/s0"]["successes"])
    other["runs"]["warm_start/s0"]["successes"] = flipped
    res.write_text(json.dumps(other))
    with pytest.raises(ValueError, match=r"warm start record warm_start/s0 .* \(2 tasks differ\)"):
        run_suite(cfg)
    other["runs"]["warm_start/s0"]["successes"] = runs["warm_start/s0"]["successes"]
    other["shared"]["weights_sha256"]["simulator"] = "0" * 64
    res.write_text(json.dumps(other))
    with pytest.raises(ValueError, match="its simulator weights had SHA-256 000000000000"):
        run_suite(cfg)
    assert json.loads(res.read_text()) == other


@pytest.mark.slow
def test_tiny_alfworld_suite_runs_the_main_arms_on_the_bundled_games(tmp_path):
    out = tmp_path / "aw"
    quiet = {"trainer": {**QUIET, "default_root_dir": f"{out}/runs"}}
    del quiet["trainer"]["logger"]  # a logger: the records read its counters
    real_env = {"env": {"init_args": {"batch_size": 2, "max_steps": 2}}}
    s2r = [TINY_RL, _sched({"synthetic_iterations": 1, "real_budget": 4, "synthetic_env": TINY_SYNTHETIC_ENV,
                            "real_env": real_env["env"]})]  # fmt: skip
    pipeline = {**pipeline_overrides(out, QUIET, "configs/alfworld_grpo.yaml"), "env": "alfworld", "train_non_oracle": 4,
                "train_near_miss": 0, "max_steps": 4, "dagger_tasks": 2, "dagger_overrides": [{"trainer": {"max_steps": 2}}],
                "experience_episodes": {"near_miss": 2}, "policy_episodes": {"non_oracle": 2},
                "experience_config": "configs/alfworld_experience_sft.yaml",
                "policy_sft_config": "configs/alfworld_policy_sft.yaml", "rl_config": "configs/alfworld_grpo.yaml"}  # fmt: skip
    arms = [
        Arm("warm_start"),
        Arm(
            "real_grpo", "configs/alfworld_real_grpo.yaml", [*TINY_RL_ARGS, _sched({**real_env, "budget": 8})]
        ),
        Arm("dreamgym_grpo", "configs/alfworld_grpo.yaml", [*TINY_RL_ARGS, *SYNTHETIC_ENV]),
        Arm("dreamgym_s2r_grpo", "configs/alfworld_sim2real_grpo.yaml", s2r),
    ]
    cfg = _suite(tmp_path, name="aw", pipeline="configs/pipeline_alfworld.yaml", pipeline_overrides=pipeline, seeds=[0],
                 arms=arms, common_overrides=[quiet])  # fmt: skip
    runs = run_suite(cfg)["runs"]
    assert sorted(runs) == ["dreamgym_grpo/s0", "dreamgym_s2r_grpo/s0", "real_grpo/s0", "warm_start/s0"]
    assert all(
        r["task_ids"][0].startswith("alfworld/valid_unseen/") and len(r["successes"]) == 2
        for r in runs.values()
    )
    assert all(r["metrics"]["steps_mean"] <= 4 for r in runs.values())  # the pipeline's step limit
    kinds = {
        t.task_id.split("/")[2] for t in read_trajectories(out / "policy_train.jsonl")
    }  # policy_env_kwargs
    assert kinds and kinds <= {f"pick_{v}_then_place_in_recep" for v in ("clean", "cool", "heat")}
    online = {k: r["real_transitions"]["online"] for k, r in runs.items()}
    assert online["warm_start/s0"] == online["dreamgym_grpo/s0"] == 0 < online["real_grpo/s0"] <= 8
    # the warm start's own data (the extra searcher episodes, the DAgger labels) counts in every arm's offline
    shared = json.loads((tmp_path / "res.json").read_text())["shared"]
    own = shared["warm_start_train_transitions"]
    assert (
        own > 0
        and runs["warm_start/s0"]["real_transitions"]["offline"] == shared["offline_train_transitions"] + own
    )
    assert runs["real_grpo/s0"]["real_transitions"]["offline"] == shared["offline_train_transitions"] + own
    assert (
        0 < online["dreamgym_s2r_grpo/s0"] <= 4 and runs["dreamgym_s2r_grpo/s0"]["synthetic_transitions"] > 0
    )


def test_a_retrain_arm_trains_the_warm_start_again_per_seed_and_is_compared_with_the_shared_one(tmp_path):
    """`retrain: true`: the warm start's recipe with another seed, the recipe's spread beside the one warm
    start RL starts from (issue 62); no simulator is prepared for it."""
    out = tmp_path / "ws"
    pipeline = {**pipeline_overrides(out, QUIET), "time_budget_minutes": None}
    arms = [Arm("warm_start"), Arm("warm_start_seeds", retrain=True, seeds=[1])]
    cfg = _suite(tmp_path, pipeline_overrides=pipeline, arms=arms, seeds=[0])
    assert cfg.warm_arms == {"warm_start"} and cfg.arm_seeds(arms[1]) == [1]
    results = run_suite(cfg)
    runs, shared = results["runs"], results["shared"]
    assert sorted(runs) == ["warm_start/s0", "warm_start_seeds/s1"]
    again = runs["warm_start_seeds/s1"]
    assert again["args"] == [{"seed_everything": 1}] and again["rl_config"] is None
    # its own fit, not the shared one
    assert again["weights_sha256"] != shared["weights_sha256"]["warm_start"]
    assert again["task_ids"] == runs["warm_start/s0"]["task_ids"] and again["real_transitions"]["online"] == 0
    assert shared["weights_sha256"]["simulator"] is None  # no arm needed the experience model
    assert "| warm_start_seeds | 1 |" in (tmp_path / "rep" / "suite_toy.md").read_text()
    with pytest.raises(ValueError, match="retrain: true and rl_config"):
        _suite(tmp_path, arms=[Arm("x", "configs/webshop_real_grpo.yaml", retrain=True)])
    dagger = _suite(tmp_path / "d", pipeline_overrides={**pipeline, "dagger_tasks": 1}, arms=arms)
    with pytest.raises(ValueError, match="dagger_tasks=1 / time_budget_minutes=None, which a retrain"):
        run_suite(dagger, only=["warm_start_seeds"])

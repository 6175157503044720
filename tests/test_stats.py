"""Exact McNemar and sign tests against hand-computed binomial tails."""

import json
import sys

import pytest

from dreamgym.stats import mcnemar_exact, sign_test


def test_mcnemar_by_hand():
    # 3 tasks only A solved, 1 only B, 2 both, 4 neither: P[X >= 3], X ~ Bin(4, 1/2) = (4 + 1) / 16
    a = [1, 1, 1, 0, 1, 1, 0, 0, 0, 0]
    b = [0, 0, 0, 1, 1, 1, 0, 0, 0, 0]
    out = mcnemar_exact(a, b)
    assert out["only_a"] == 3 and out["only_b"] == 1 and out["n"] == 10
    assert out["success_a"] == 0.5 and out["success_b"] == 0.3
    assert out["p_one_sided"] == pytest.approx(5 / 16)
    assert out["p_two_sided"] == pytest.approx(10 / 16)
    # the other direction: P[X >= 1] = 15/16; no discordant task: no evidence either way
    assert mcnemar_exact(b, a)["p_one_sided"] == pytest.approx(15 / 16)
    assert mcnemar_exact([1, 0], [1, 0])["p_one_sided"] == 1.0
    with pytest.raises(ValueError, match="same length"):
        mcnemar_exact([1], [1, 0])


def test_sign_test_on_graded_outcomes_by_hand():
    # higher with A on tasks 0, 1, 2, 4; with B on task 3; ties (5, 6) carry nothing: P[X >= 4], X ~ Bin(5, 1/2)
    a = [0.5, 1.0, 0.2, 0.0, 0.75, 0.3, 0.0]
    b = [0.1, 0.5, 0.1, 0.4, 0.25, 0.3, 0.0]
    out = sign_test(a, b)
    assert (out["higher_a"], out["higher_b"], out["n"]) == (4, 1, 7)
    assert out["mean_a"] == pytest.approx(sum(a) / 7) and out["mean_b"] == pytest.approx(sum(b) / 7)
    assert out["p_one_sided"] == pytest.approx(6 / 32)
    assert out["p_two_sided"] == pytest.approx(12 / 32)
    assert sign_test(b, a)["p_one_sided"] == pytest.approx(31 / 32)
    # on success bits it is McNemar's test
    bits_a, bits_b = [1, 1, 1, 0, 1, 1, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1, 0, 0, 0, 0]
    assert sign_test(bits_a, bits_b)["p_one_sided"] == mcnemar_exact(bits_a, bits_b)["p_one_sided"]
    with pytest.raises(ValueError, match="same length"):
        sign_test([0.5], [0.5, 0.1])


def test_compare_curves_finds_the_first_differing_step():
    from script_loader import load_script

    compare = load_script("compare_curves").compare
    same = compare({9: 1.0, 19: 2.0, 29: 3.0}, {9: 1.0, 19: 2.0})
    assert (same["common_steps"], same["equal_steps"], same["first_differing_step"]) == (2, 2, None)
    apart = compare({9: 1.0, 19: 2.0, 29: 3.0}, {9: 1.0, 19: 2.5, 29: 3.0})
    assert (apart["equal_steps"], apart["max_abs_diff"], apart["first_differing_step"]) == (2, 0.5, 19)


def test_compare_curves_reads_a_run_folder_and_one_event_file(tmp_path):
    from script_loader import load_script
    from torch.utils.tensorboard import SummaryWriter

    scalars = load_script("compare_curves").scalars
    run = tmp_path / "version_0"
    for steps in ([9, 19], [29]):  # a resumed run: two event files in one folder
        w = SummaryWriter(str(run))
        for s in steps:
            w.add_scalar("train/loss", s / 10, s)
        w.close()
    assert scalars(str(run), "train/loss") == pytest.approx({9: 0.9, 19: 1.9, 29: 2.9})
    files = sorted(run.glob("events.out.tfevents.*"))
    assert len(files) == 2 and {frozenset(scalars(str(f), "train/loss")) for f in files} == {
        frozenset({9, 19}),
        frozenset({29}),
    }
    with pytest.raises(SystemExit, match="logs no scalar 'val/loss'"):
        scalars(str(run), "val/loss")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="holds no TensorBoard event file"):
        scalars(str(tmp_path / "empty"), "train/loss")


def test_suite_wallclock_sums_records_and_training_spans(tmp_path):
    from script_loader import load_script
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(tmp_path / "sft" / "version_0"))
    for step, t in ((0, 1000.0), (10, 1100.0), (20, 1250.5)):
        w.add_scalar("train/loss", 1.0, step, walltime=t)
    w.close()
    res = tmp_path / "suite.json"
    res.write_text(json.dumps({"runs": {"a/s0": {"fit_seconds": 10.0, "eval_seconds": 2.0}, "b/s0": {}}}))
    out = load_script("suite_wallclock").main(
        ["--results", str(res), "--training", f"sft={tmp_path / 'sft'}"]
    )
    assert out["training_seconds"] == {"sft": 250.5} and out["total_seconds"] == 262.5 and out["records"] == 2
    timed = load_script("suite_wallclock").main(
        ["--results", str(res), "--run", f"{sys.executable} -c pass"]
    )
    assert "run_seconds" in timed and timed["total_seconds"] == 12.0 and "python" in timed["run"]
    with pytest.raises(SystemExit, match="is not NAME=RUN_DIR"):
        load_script("suite_wallclock").main(["--results", str(res), "--training", "sft"])

"""The main job end to end on tiny settings: every stage runs, outputs exist, a rerun skips them."""

import json

import pytest
from tiny_pipeline import pipeline_argv

from dreamgym.pipeline import parse_pipeline_config, run_pipeline
from dreamgym.summary import held_out_comparison


def _argv(out):
    return ["--config", "configs/pipeline_webshop.yaml", *pipeline_argv(out)]


@pytest.mark.slow
def test_pipeline_tiny_end_to_end_and_idempotent(tmp_path, capsys):
    out = tmp_path / "ws"
    report = run_pipeline(parse_pipeline_config(_argv(out)))
    for name in (
        "offline_train.jsonl",
        "offline_test.jsonl",
        "tokenizer",
        "experience_model",
        "policy_sft",
        "policy_rollouts_train.jsonl",
        "experience_model_onpolicy",
        "policy_sft_test_episodes.jsonl",
        "fidelity_onpolicy.json",
        "policy_rl",
        "policy_rl_test_episodes.jsonl",
        "eval.json",
    ):
        assert (out / name).exists(), name
    assert not list(out.glob("*.partial"))
    assert (out / "main_job.png").exists()  # held-out success (+ the RL curve when it logged)
    for policy in ("policy_sft", "policy_rl"):
        m = report["eval"][policy]
        assert 0.0 <= m["test/success_rate"] <= 1.0 and m["test/steps_mean"] >= 1
    fid = report["fidelity_onpolicy"]
    assert set(fid) == {"experience_model", "experience_model_onpolicy"}
    assert all(0.0 <= m["success_precision"] <= 1.0 for m in fid.values())
    assert report["onpolicy_real_transitions"] >= 2
    cmp = report["policy_rl_vs_policy_sft"]
    assert cmp["n"] == 2 and 0.0 <= cmp["p_one_sided"] <= 1.0
    assert cmp["success_a"] == report["eval"]["policy_rl"]["test/success_rate"]
    # episodes recorded with other settings are refused, not silently reported
    eps = {p: out / f"{p}_test_episodes.jsonl" for p in ("policy_sft", "policy_rl")}
    with pytest.raises(RuntimeError, match="eval_tasks=3"):
        held_out_comparison(eps, 3)
    assert report["peak_rss_mb"] > 0 and json.loads((out / "pipeline_report.json").read_text())["eval"]
    assert "held-out REAL test tasks" in capsys.readouterr().out
    # a rerun skips every stage (outputs exist)
    again = run_pipeline(parse_pipeline_config(_argv(out)))
    assert again["total_seconds"] < 5 and again["eval"] == report["eval"]

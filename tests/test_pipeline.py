"""The main job end to end on tiny settings: every stage runs, outputs exist, a rerun skips them."""

import json

import pytest

from dreamgym.pipeline import _evaluation, parse_pipeline_config, run_pipeline


def _argv(out):
    quiet = [f"--trainer.default_root_dir={out}/runs", "--trainer.logger=false", "--trainer.callbacks=[]",
             "--trainer.enable_progress_bar=false", "--trainer.enable_checkpointing=false"]  # fmt: skip
    tiny_lm = [*quiet, "--trainer.max_steps=2", "--trainer.limit_val_batches=0"]
    return [
        "--config", "configs/pipeline_webshop.yaml", f"--out_dir={out}",
        "--train_expert=6", "--train_random=2", "--test_expert=2", "--vocab_size=400", "--eval_tasks=2", "--eval_batch_size=2",
        "--experience_args=" + json.dumps([*tiny_lm, "--model.init_args.lm.init_args.preset=tiny",
                                           "--model.init_args.max_new_tokens=16", "--model.init_args.decoding=free",
                                           "--data.init_args.encoder=hashing"]),
        "--policy_sft_args=" + json.dumps([*tiny_lm, "--model.init_args.policy.init_args.preset=tiny"]),
        "--onpolicy_tasks=2",
        "--onpolicy_experience_args=" + json.dumps([*tiny_lm, "--model.init_args.max_new_tokens=16",
                                                    "--model.init_args.decoding=free"]),
        "--rl_args=" + json.dumps([
            *quiet, "--trainer.val_check_interval=100",
            "--model.init_args.schedule.init_args.iterations=1",
            "--model.init_args.schedule.init_args.env.init_args.batch_size=2",
            "--model.init_args.schedule.init_args.env.init_args.max_steps=2",
            "--model.init_args.schedule.init_args.env.init_args.kwargs={write_back: true, max_new_tokens: 16, decoding: free}",
            "--model.init_args.eval_env.init_args.max_steps=2",
            "--model.init_args.tasks_per_batch=1", "--model.init_args.group_size=2",
            "--model.init_args.collector.init_args.max_new_tokens=8",
        ]),
    ]  # fmt: skip


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
        _evaluation(eps, 3)
    assert report["peak_rss_mb"] > 0 and json.loads((out / "pipeline_report.json").read_text())["eval"]
    assert "held-out REAL test tasks" in capsys.readouterr().out
    # a rerun skips every stage (outputs exist)
    again = run_pipeline(parse_pipeline_config(_argv(out)))
    assert again["total_seconds"] < 5 and again["eval"] == report["eval"]

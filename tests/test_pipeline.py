"""The main job end to end on tiny settings: every stage runs, outputs exist, a rerun skips them."""

import json
import math

import pytest
from experience_toy import toy_trajectories
from tiny_pipeline import QUIET, pipeline_argv

from dreamgym.lab.pipeline import parse_pipeline_config, run_pipeline
from dreamgym.lab.summary import held_out_comparison, paired_comparison
from dreamgym.modeling.formats import terminated_of
from dreamgym.schema import is_success, read_trajectories


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
    # the bundled config's wall-clock budget bounds every fit stage, RL included
    assert set(report["time_budget"]["max_time_minutes"]) == {
        "experience_model",
        "policy_sft",
        "experience_model_onpolicy",
        "policy_rl",
    }
    assert (out / "main_job.png").exists()  # held-out success (+ the RL curve when it logged)
    solved = {}  # per held-out task, from the episode files themselves
    for policy in ("policy_sft", "policy_rl"):
        trajs = sorted(read_trajectories(out / f"{policy}_test_episodes.jsonl"), key=lambda t: t.task_id)
        solved[policy] = [is_success(t.transitions[-1].reward, t.transitions[-1].done) for t in trajs]
        m = report["eval"][policy]
        assert m["test/success_rate"] == pytest.approx(sum(solved[policy]) / len(trajs))
        assert m["test/steps_mean"] == pytest.approx(sum(len(t.transitions) for t in trajs) / len(trajs))
    fid = report["fidelity_onpolicy"]
    assert set(fid) == {"experience_model", "experience_model_onpolicy"}
    warm = list(read_trajectories(out / "policy_sft_test_episodes.jsonl"))
    purchases = sum(terminated_of(t.transitions[-1].done, t.transitions[-1].truncated) for t in warm)
    assert all(m["n"] == purchases for m in fid.values())  # every terminating final step was asked
    assert report["onpolicy_real_transitions"] == sum(
        len(t.transitions) for t in read_trajectories(out / "policy_rollouts_train.jsonl")
    )
    cmp = report["policy_rl_vs_policy_sft"]
    only_rl = sum(a and not b for a, b in zip(solved["policy_rl"], solved["policy_sft"], strict=True))
    only_sft = sum(b and not a for a, b in zip(solved["policy_rl"], solved["policy_sft"], strict=True))
    discordant = only_rl + only_sft  # exact McNemar, two-sided: min(1, 2 P(Bin(discordant, 1/2) >= max))
    p = min(
        1.0,
        2
        * sum(math.comb(discordant, i) for i in range(max(only_rl, only_sft), discordant + 1))
        / 2**discordant,
    )
    assert (cmp["n"], cmp["only_a"], cmp["only_b"]) == (2, only_rl, only_sft)
    assert cmp["p_two_sided"] == pytest.approx(p)
    assert cmp["success_a"] == report["eval"]["policy_rl"]["test/success_rate"]
    scores = {
        policy: [
            t.score
            for t in sorted(read_trajectories(out / f"{policy}_test_episodes.jsonl"), key=lambda t: t.task_id)
        ]
        for policy in ("policy_sft", "policy_rl")
    }  # the sign test on per-task scores: tasks where RL scored higher / lower, ties dropped
    higher = sum(a > b for a, b in zip(scores["policy_rl"], scores["policy_sft"], strict=True))
    lower = sum(a < b for a, b in zip(scores["policy_rl"], scores["policy_sft"], strict=True))
    assert (cmp["score_higher_a"], cmp["score_higher_b"]) == (higher, lower)
    m = higher + lower
    assert cmp["score_p_two_sided"] == pytest.approx(
        min(1.0, 2 * sum(math.comb(m, i) for i in range(max(higher, lower), m + 1)) / 2**m)
    )
    stored = json.loads((out / "eval.json").read_text())  # the per-task outcomes: the comparison recomputes
    assert stored["per_task"] == report["per_task"] and paired_comparison(stored["per_task"]) == cmp
    # episodes recorded with other settings are refused, not silently reported
    eps = {p: out / f"{p}_test_episodes.jsonl" for p in ("policy_sft", "policy_rl")}
    with pytest.raises(RuntimeError, match="eval_tasks=3"):
        held_out_comparison(eps, 3)
    assert report["peak_rss_mb"] > 0 and json.loads((out / "pipeline_report.json").read_text())["eval"]
    assert "held-out REAL test tasks" in capsys.readouterr().out
    # a rerun skips every stage: no output is written again
    stamps = {p: p.stat().st_mtime_ns for p in out.iterdir() if p.name not in ("eval.json", "main_job.png")}
    stamps.pop(out / "pipeline_report.json")
    again = run_pipeline(parse_pipeline_config(_argv(out)))
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps and again["eval"] == report["eval"]
    # ... and its report keeps the time each stage took when it ran (#39: it showed 0.0 s)
    assert report["skipped_stages"] == [] and set(again["skipped_stages"]) == set(report["stage_seconds"])
    assert again["stage_seconds"] == report["stage_seconds"]


def _fake_policy_episodes(monkeypatch, cap: int | None = None) -> list[list[int]]:
    """Policy episodes without a policy: toy test trajectories (only the first ``cap`` tasks, as a time
    cap would leave them, when ``max_minutes`` is given); returns the task lists asked for."""
    import dreamgym.collect
    import dreamgym.rl.collector

    played = []

    def fake(*a, max_minutes=None, **k):
        played.append(a[3])
        n = len(a[3]) if max_minutes is None or cap is None else min(cap, len(a[3]))
        return toy_trajectories(n, split="test"), {}

    monkeypatch.setattr(dreamgym.rl.collector, "collector_from_config", lambda config: None)
    monkeypatch.setattr(dreamgym.collect, "collect_policy_trajectories", fake)
    return played


def test_the_held_out_comparison_keeps_each_tasks_outcomes_and_recomputes_from_them(tmp_path):
    """``eval.json``'s ``per_task`` (task id -> success, score per policy) is what the paired tests are
    computed from, so a stored file can be recomputed."""
    from dreamgym.schema import write_trajectories

    sft, rl = toy_trajectories(6, split="test", seed=0), toy_trajectories(6, split="test", seed=0)
    for i, t in enumerate(sft):
        t.success, t.score = i == 0, [1.0, 0.2, 0.0, 0.5, 0.0, 0.3][i]
    for i, t in enumerate(rl):  # solves tasks 1-4 (gained 4, lost task 0); scores higher on 4, lower on 1
        t.success, t.score = i in (1, 2, 3, 4), [0.5, 1.0, 1.0, 1.0, 1.0, 0.3][i]
    eps = {"policy_sft": tmp_path / "sft.jsonl", "policy_rl": tmp_path / "rl.jsonl"}
    write_trajectories(eps["policy_sft"], sft)
    write_trajectories(eps["policy_rl"], rl)
    evals, cmp, per_task = held_out_comparison(eps, 6)
    assert evals["policy_rl"]["test/success_rate"] == pytest.approx(4 / 6)
    assert per_task["policy_rl"]["task1"] == {"success": True, "score": 1.0}
    assert (
        per_task["policy_sft"]["task0"] == {"success": True, "score": 1.0}
        and len(per_task["policy_sft"]) == 6
    )
    assert (cmp["only_a"], cmp["only_b"], cmp["score_higher_a"], cmp["score_higher_b"]) == (4, 1, 4, 1)
    assert cmp["p_two_sided"] == cmp["score_p_two_sided"] == pytest.approx(2 * 6 / 32)  # 2 P[Bin(5) >= 4]
    assert paired_comparison(json.loads(json.dumps(per_task))) == cmp  # from the stored file alone
    with pytest.raises(RuntimeError, match="different held-out tasks"):
        paired_comparison(
            {"policy_rl": per_task["policy_rl"], "policy_sft": {"x": {"success": 1, "score": 0}}}
        )


def test_an_evaluation_recorded_with_another_eval_tasks_is_played_again(tmp_path, monkeypatch, capsys):
    """Changing ``eval_tasks`` and rerunning resumes the pipeline but re-plays the held-out episodes (the
    old file would pair other tasks), while a file of the right size is kept."""
    from experience_toy import write_toy

    from dreamgym.lab.stages import policy_episodes

    out = tmp_path / "policy_sft_test_episodes.jsonl"
    write_toy(out, 3, split="test")
    played = _fake_policy_episodes(monkeypatch)
    cfg = parse_pipeline_config(pipeline_argv(tmp_path))
    policy = tmp_path / "policy_sft"
    assert policy_episodes(cfg, policy, "test", 3, out) == out and played == []  # the right size: kept
    policy_episodes(cfg, policy, "test", 5, out)
    assert played == [[0, 1, 2, 3, 4]] and "holds 3 episodes, not 5" in capsys.readouterr().out
    assert len(list(read_trajectories(out))) == 5


def test_play_in_chunks_starts_no_chunk_after_the_cap():
    """On a slow host the episode stages must end in time too: with ``max_minutes`` tasks are played in
    chunks and none starts after the cap (the first always plays); without it, one chunk of all."""
    from dreamgym.progress import play_in_chunks

    clock = iter(range(0, 10_000, 60))  # every clock call: one more minute
    played = []
    out = play_in_chunks(range(20), lambda t: played.append(t) or t, 4, 2.5, clock=lambda: float(next(clock)))
    assert played == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]] and out == list(
        range(12)
    )  # no 4th at 3 min
    assert play_in_chunks(range(5), lambda t: [t], 2) == [[0, 1], [2, 3], [4]]
    assert play_in_chunks(range(5), lambda t: [t]) == [[0, 1, 2, 3, 4]]
    assert play_in_chunks(range(5), lambda t: [t], 1, 0.0) == [[0]]  # the first chunk plays even past the cap


def test_a_time_capped_episode_stage_keeps_its_shorter_file_on_a_rerun(tmp_path, monkeypatch):
    """A capped episode stage (fewer episodes than asked) records what it was asked (``.asked`` beside the
    file), so a rerun keeps it and the RL evaluation then plays exactly those tasks; other settings
    play again."""
    from dreamgym.lab.stages import policy_episodes, recorded_episodes

    played = _fake_policy_episodes(monkeypatch, cap=12)
    cfg = parse_pipeline_config(pipeline_argv(tmp_path))
    out, policy = tmp_path / "policy_sft_test_episodes.jsonl", tmp_path / "policy_sft"
    policy_episodes(cfg, policy, "test", 20, out, max_minutes=2.5)
    assert played == [list(range(20))] and recorded_episodes(out) == 12
    policy_episodes(cfg, policy, "test", 20, out, max_minutes=2.5)
    assert len(played) == 1  # the capped file is kept on a rerun
    policy_episodes(cfg, policy, "test", 21, out, max_minutes=None)  # other settings: played again, uncapped
    assert played[-1] == list(range(21)) and recorded_episodes(out) == 21


def test_the_dagger_stage_labels_the_warm_starts_states_and_becomes_the_warm_start(tmp_path):
    """``dagger_tasks``: the warm start's greedy train episodes, every state labelled by the scripted agent,
    then the warm start trained further on them; that model is what the later stages play."""
    from dreamgym.lab.pipeline import prepare
    from dreamgym.lab.stages import StageClock

    out = tmp_path / "ws"
    argv = [*_argv(out), "--onpolicy_tasks=0", "--dagger_tasks=2", "--dagger_rounds=2",
            "--dagger_overrides=" + json.dumps([{"trainer": {"max_steps": 1}}])]  # fmt: skip
    prep = prepare(parse_pipeline_config(argv), StageClock("test"))
    first, second = (
        list(read_trajectories(out / f"{n}_train.jsonl")) for n in ("policy_dagger", "policy_dagger2")
    )
    assert len(first) == len(second) == 2 and {t.split for t in first + second} == {"train"}
    assert all(tr.expert_action for t in first + second for tr in t.transitions)
    assert {t.policy for t in first} == {"policy_sft"} and {t.policy for t in second} == {"policy_dagger"}
    assert not {t.task_id for t in first} & {t.task_id for t in second}  # each round labels new tasks
    assert (
        prep.policy_sft == out / "policy_dagger2" and (out / "policy_dagger2" / "policy_format.json").exists()
    )
    assert {t.policy for t in read_trajectories(prep.warm_episodes)} == {"policy_dagger2"}


@pytest.mark.slow
def test_the_experience_model_and_the_warm_start_alone_learn_from_their_extra_episodes(tmp_path):
    """``experience_episodes``: scripted train episodes (teacher reasoning) in both experience fits' data,
    not in the warm start's, and the offline data the tokenizer comes from unchanged; ``policy_episodes``
    (built with ``policy_env_kwargs``) in the warm start's data only."""
    from dreamgym.lab.pipeline import prepare
    from dreamgym.lab.stages import StageClock

    out = tmp_path / "ws"
    argv = [*_argv(out), "--onpolicy_tasks=0", '--experience_episodes={"near_miss": 2}',
            '--policy_episodes={"non_oracle": 3}', '--policy_env_kwargs={"item_facts": false}']  # fmt: skip
    prep = prepare(parse_pipeline_config(argv), StageClock("test"))
    extra = list(read_trajectories(out / "experience_train.jsonl"))
    assert prep.experience_episodes == out / "experience_train.jsonl"
    assert len(extra) == 2 and {(t.policy, t.split) for t in extra} == {("near_miss", "train")}
    assert all(tr.reasoning for t in extra for tr in t.transitions if not tr.invalid)
    assert not {t.trajectory_id for t in extra} & {t.trajectory_id for t in read_trajectories(prep.train)}
    fits = {  # the data files of each fit (its stage.json records its overrides)
        n: json.loads((out / "runs" / n / "stage.json").read_text())["args"][0]["data"]["init_args"][
            "train_files"
        ]
        for n in ("experience_model", "policy_sft")
    }
    assert fits["experience_model"] == [str(prep.train), str(prep.experience_episodes)]
    own = list(read_trajectories(out / "policy_train.jsonl"))
    assert prep.policy_episodes == out / "policy_train.jsonl"
    assert len(own) == 3 and {(t.policy, t.split) for t in own} == {("non_oracle", "train")}
    assert not any(tr.reasoning for t in own for tr in t.transitions)
    states = [tr.next_state for t in own for tr in t.transitions]
    assert any("buy now" in s.lower() for s in states)  # item pages were seen,
    assert not any("[category]" in s for s in states)  # without their facts: built with item_facts=false
    assert any("[category]" in tr.next_state for t in read_trajectories(prep.train) for tr in t.transitions)
    assert fits["policy_sft"] == [str(prep.train), str(prep.policy_episodes)]


def test_the_judge_stages_are_shared_stages_saved_beside_the_simulator(tmp_path):
    """``judge_config``: ``prepare`` (the pipeline's and a benchmark suite's shared stages) collects the
    judge's train purchases and fits it into ``<simulator>/judge``; a rerun skips both."""
    from dreamgym.lab.pipeline import prepare
    from dreamgym.lab.stages import StageClock

    out = tmp_path / "ws"
    judge_fit = {"trainer": {"default_root_dir": f"{out}/runs", **QUIET, "max_steps": 1, "limit_val_batches": 0},
                 "data": {"init_args": {"batch_size": 2}}}  # fmt: skip
    argv = [*_argv(out), "--onpolicy_tasks=0", "--judge_config=configs/webshop_reward_judge.yaml",
            '--judge_episodes={"near_miss": 2, "expert": 1}', "--judge_overrides=" + json.dumps([judge_fit])]  # fmt: skip
    prep = prepare(parse_pipeline_config(argv), StageClock("test"))
    assert prep.judge == prep.simulator / "judge" and (prep.judge / "judge.json").exists()
    assert prep.judge_purchases == out / "judge_purchases_train.jsonl"
    assert sorted(t.policy for t in read_trajectories(prep.judge_purchases)) == [
        "expert",
        "near_miss",
        "near_miss",
    ]
    fit = json.loads((out / "runs" / "reward_judge" / "stage.json").read_text())["args"]
    assert fit[0]["data"]["init_args"]["train_files"][:2] == [str(prep.judge_purchases), str(prep.train)]
    assert fit[1] == judge_fit
    stamp = (prep.judge / "judge.json").stat().st_mtime
    again = prepare(parse_pipeline_config(argv), StageClock("test"))
    assert again == prep and (prep.judge / "judge.json").stat().st_mtime == stamp


def test_real_env_stages_alone_skip_the_experience_model_and_judge(tmp_path):
    """``prepare(simulator=False)`` (a suite whose pending arms all play the real env) builds the data,
    tokenizer, warm start and its evaluation only, and an RL config that plays a synthetic env cannot be
    pointed at the missing simulator."""
    from dreamgym.lab.pipeline import prepare, rl_paths
    from dreamgym.lab.stages import StageClock

    out = tmp_path / "ws"
    argv = [
        *_argv(out),
        "--onpolicy_tasks=1",
        "--judge_config=configs/webshop_reward_judge.yaml",
        '--judge_episodes={"expert": 1}',
    ]
    prep = prepare(parse_pipeline_config(argv), StageClock("test"), simulator=False)
    assert prep.experience is prep.simulator is prep.rollouts is prep.judge is None
    assert not (out / "experience_model").exists() and not (out / "policy_rollouts_train.jsonl").exists()
    assert prep.warm_episodes.exists() and (prep.policy_sft / "policy_format.json").exists()
    assert rl_paths("configs/webshop_real_grpo.yaml", None, prep.policy_sft) == {
        "model": {"init_args": {"policy": {"init_args": {"path": str(prep.policy_sft)}}}}
    }
    with pytest.raises(ValueError, match="plays a synthetic env"):
        rl_paths("configs/webshop_grpo.yaml", None, prep.policy_sft)
    # a simulator an earlier call built is reported (its weights identify records), never rebuilt or built
    (out / "experience_model").mkdir()
    again = prepare(parse_pipeline_config(argv), StageClock("test"), simulator=False)
    assert (
        again.experience == out / "experience_model" and again.simulator is again.judge is None
    )  # no on-policy
    (out / "experience_model_onpolicy" / "judge").mkdir(parents=True)
    assert again.rollouts is again.judge_purchases is None
    for name in ("policy_rollouts_train.jsonl", "judge_purchases_train.jsonl"):  # and their train episodes
        (out / name).write_text("")
    again = prepare(parse_pipeline_config(argv), StageClock("test"), simulator=False)
    assert again.simulator == out / "experience_model_onpolicy" and again.judge == again.simulator / "judge"
    assert (again.rollouts, again.judge_purchases) == (
        out / "policy_rollouts_train.jsonl",
        out / "judge_purchases_train.jsonl",
    )  # a record's transition counts come from them (a real-env arm recorded 0 on-policy transitions)


def test_train_policy_episodes_spread_over_alfworlds_task_types():
    """ALFWorld stores its train games by task type: the pipeline's on-policy and DAgger episodes take
    slices of a seeded order of the whole split, so 200 of them see every type (the first 200 games are
    all ``look_at_obj_in_light``), and later slices never repeat a task."""
    from collections import Counter

    from dreamgym.envs.registry import make_env
    from dreamgym.lab.stages import train_task_order

    env = make_env("alfworld", split="train", batch_size=1)
    ids = env.task_ids()
    env.close()
    order = train_task_order("alfworld", 0)
    assert sorted(order) == list(range(len(ids))) and order == train_task_order("alfworld", 0)
    assert order != train_task_order("alfworld", 1)

    def types(indices):
        return Counter(ids[i].split("/")[2] for i in indices)

    assert len(types(range(200))) == 1  # the stored order: one type
    spread = types(order[:200])
    assert len(spread) == 6 and min(spread.values()) >= 15, spread

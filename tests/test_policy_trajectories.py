"""A saved policy's real episodes as schema trajectories (teacher reasoning by replay), the RL config's
collector, and the teacher-forced fidelity of an experience model on a policy's final steps."""

import pytest
import torch

from dreamgym.collect import annotate_with_teacher, collect_policy_trajectories
from dreamgym.envs import make_env
from dreamgym.rl.collector import RolloutCollector, collector_from_config, trajectory_metrics
from dreamgym.teachers.base import get_teacher


@pytest.fixture(scope="module")
def saved_policy(tiny_lm, tmp_path_factory):
    model, tok = tiny_lm.build()
    path = tmp_path_factory.mktemp("policy")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_collector_from_config_reads_the_rl_config():
    col = collector_from_config("configs/webshop_grpo.yaml")
    assert isinstance(col, RolloutCollector)
    assert col.constrained and col.max_arg_tokens == 40 and col.max_prompt_tokens == 704
    assert not col.format_given  # the format comes from the policy (policy_format.json)
    with pytest.raises(KeyError, match="no model.init_args.collector"):
        collector_from_config("configs/webshop_policy_sft.yaml")


def test_policy_trajectories_with_teacher_reasoning(saved_policy, tmp_path):
    col = collector_from_config("configs/webshop_grpo.yaml")
    col.max_new_tokens = 12
    out = tmp_path / "eps.jsonl"
    torch.manual_seed(0)
    trajs, metrics = collect_policy_trajectories(
        saved_policy, "webshop", "train", [3, 5], col, greedy=False, batch_size=2, max_steps=3, out=out
    )
    assert out.exists() and not (tmp_path / "eps.jsonl.tmp").exists()
    assert len(trajs) == 2 and {t.split for t in trajs} == {"train"}
    assert 0.0 <= metrics["success_rate"] <= 1.0 and metrics["steps_mean"] >= 1
    assert trajectory_metrics(trajs) == pytest.approx(metrics)  # the episodes on disk give the same numbers
    for t in trajs:
        assert 1 <= len(t.transitions) <= 3 and t.transitions[-1].done
        assert all(tr.reasoning for tr in t.transitions)  # the teacher explained every step
    # waves smaller than the task list keep the task order
    col.max_new_tokens = 4
    waves, _ = collect_policy_trajectories(
        saved_policy, "webshop", "train", [5, 3], col, teacher=False, batch_size=1, max_steps=1
    )
    assert trajs[0].task_id != trajs[1].task_id
    assert [t.task_id for t in waves] == [t.task_id for t in reversed(trajs)]
    # annotating again reproduces the same reasoning; a tampered state is refused, not mislabelled
    env, teacher = make_env("webshop", split="train", batch_size=1, max_steps=3), get_teacher("webshop")
    first, task = trajs[0], 3  # trajectories come in task order
    before = [tr.reasoning for tr in first.transitions]
    annotate_with_teacher(env, teacher, first, task)
    assert [tr.reasoning for tr in first.transitions] == before
    first.transitions[0].next_state += " (edited)"
    with pytest.raises(RuntimeError, match="another state than the recorded one"):
        annotate_with_teacher(env, teacher, first, task)


def test_missing_policy_dir_names_the_command(tmp_path):
    col = collector_from_config("configs/webshop_grpo.yaml")
    with pytest.raises(FileNotFoundError, match="webshop_policy_sft.yaml"):
        collect_policy_trajectories(tmp_path / "nope", "webshop", "train", [0], col)

"""A saved policy's real episodes as schema trajectories (teacher reasoning written during the episode), the RL config's
collector, and the teacher-forced fidelity of an experience model on a policy's final steps."""

import pytest
import torch

from dreamgym.collect import collect_policy_trajectories
from dreamgym.envs import make_env
from dreamgym.envs.episodes import run_episodes, trajectory_metrics
from dreamgym.envs.replay import replay_actions
from dreamgym.rl.collector import RolloutCollector, collector_from_config
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
        collector_from_config("configs/webshop_experience_sft.yaml")


@pytest.mark.parametrize("env", ["webshop", "alfworld", "web"])
def test_the_warm_start_validates_with_the_rl_collector(env):
    """The warm start's val/success_rate is comparable with RL's: both configs play held-out episodes with
    the same decoding (budget, constraint, prompt cut); only the format comes from elsewhere."""
    sft, rl = (
        collector_from_config(f"configs/{env}_policy_sft.yaml"),
        collector_from_config(f"configs/{env}_grpo.yaml"),
    )
    keys = ("max_new_tokens", "constrained", "max_arg_tokens", "max_prompt_tokens")
    assert {k: getattr(sft, k) for k in keys} == {k: getattr(rl, k) for k in keys}


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
    assert metrics["steps_mean"] == pytest.approx(sum(len(t.transitions) for t in trajs) / 2)
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
    # a time cap already spent: the first chunk (two waves of 1) plays, in the one env, and no more
    capped, _ = collect_policy_trajectories(
        saved_policy,
        "webshop",
        "train",
        [5, 3, 7, 9],
        col,
        teacher=False,
        batch_size=1,
        max_steps=1,
        max_minutes=0.0,
    )
    assert [t.task_id for t in capped] == [t.task_id for t in waves]
    # the rationale written during the episode is the teacher's on that very step: replaying the
    # actions in a fresh env and asking the teacher there gives the same text
    env, teacher = make_env("webshop", split="train", batch_size=1, max_steps=3), get_teacher("webshop")
    for traj, task in zip(trajs, [3, 5], strict=True):  # trajectories come in task order
        again = []
        replay_actions(
            env, task, [tr.action for tr in traj.transitions],
            on_step=lambda i, e, traj=traj, again=again: again.append(teacher.explain(traj.transitions[i], e.step_info(0))),
        )  # fmt: skip
        assert again == [tr.reasoning for tr in traj.transitions]


def test_missing_policy_dir_names_the_command(tmp_path):
    col = collector_from_config("configs/webshop_grpo.yaml")
    with pytest.raises(FileNotFoundError, match="webshop_policy_sft.yaml"):
        collect_policy_trajectories(tmp_path / "nope", "webshop", "train", [0], col)


def test_dagger_labels_are_the_searchers_decisions_in_the_policys_states(saved_policy):
    """``label_with``: every state the policy acted in carries what the scripted agent would do there
    (asked before the policy's action): replaying the policy's actions in a fresh env and asking a fresh
    searcher before each step gives the same labels; the saved record keeps them."""
    from dreamgym.agents import make_agent
    from dreamgym.schema import Transition

    col = collector_from_config("configs/alfworld_grpo.yaml")
    col.max_new_tokens = 8
    torch.manual_seed(0)
    trajs, _ = collect_policy_trajectories(
        saved_policy, "alfworld", "train", [0, 1], col, greedy=False, teacher=False, batch_size=2,
        max_steps=4, label_with="non_oracle",
    )  # fmt: skip
    env = make_env("alfworld", split="train", batch_size=1, max_steps=4)
    for traj, task in zip(trajs, [0, 1], strict=True):
        labels = [tr.expert_action for tr in traj.transitions]
        assert all(isinstance(a, str) and a for a in labels)
        searcher, again = make_agent("non_oracle", "alfworld", env), []
        actions = [tr.action for tr in traj.transitions]

        def act(slots, episodes, actions=actions, again=again, searcher=searcher):
            again.append(searcher.act(env.current(0), env.step_info(0)))
            return [actions[len(episodes[0].actions)]]

        run_episodes(env, act, [task], max_transitions=len(actions))
        assert again == labels
        first = traj.transitions[0]
        assert Transition.from_dict(first.to_dict()).expert_action == first.expert_action
    with pytest.raises(ValueError, match="no scripted agent"):
        collect_policy_trajectories(saved_policy, "alfworld", "train", [0], col, label_with="oracle")

"""The live reward audit: synthetic episodes replayed in the real env catch a wrong reward, a faithful
one scores 1, tasks that are not real are skipped, and a fit logs it without training on it."""

import lightning as L
import pytest
import torch
from rl_toy import audited_fit

from datamodules.rollouts import RolloutDataModule
from dreamgym.envs.episodes import Episode
from dreamgym.envs.factory import EnvFactory
from dreamgym.envs.registry import make_env
from dreamgym.envs.replay import replay_actions
from dreamgym.envs.synthetic import SyntheticEnv, SyntheticTask, tasks_from_trajectories
from dreamgym.modeling.formats import ParsedOutcome
from dreamgym.rl.audit import RewardAudit, audit_episodes
from dreamgym.rl.collector import RolloutCollector
from dreamgym.rl.schedules import SyntheticSchedule
from dreamgym.schema import read_trajectories
from models.policy_rl import PolicyRL

DONE_PAGE = "[page] done\n[text] thank you for shopping with us!\n[score] 1.0000"


class _Buffer:
    """Write-back target: records what the synthetic env adds."""

    def __init__(self):
        self.transitions = []

    def add(self, transitions):
        self.transitions += transitions


class AlwaysSuccess:
    """An experience model whose every answer is a successful purchase (the reward is wrong)."""

    def __init__(self):
        self.buffer = _Buffer()

    def predict(self, queries):
        return [ParsedOutcome(True, DONE_PAGE, reward=1.0, done=True, score=1.0) for _ in queries]

    def to(self, device):  # the device seam SyntheticEnv.place_model calls; nothing to move
        return self


def _episodes(trajs, lie: bool = False) -> list[Episode]:
    """Episodes of recorded real trajectories; ``lie``: the synthetic env called every one a success."""
    out = []
    for i, t in enumerate(trajs):
        rewards = [s.reward for s in t.transitions]
        if lie:
            rewards[-1] = 1.0
        last = t.transitions[-1]
        out.append(
            Episode(i, i, i, t.task_id, t.instruction, actions=[s.action for s in t.transitions],
                    rewards=rewards, success=lie or t.success, score=1.0 if lie else t.score,
                    terminated=last.done and not last.truncated)
        )  # fmt: skip
    return out


@pytest.fixture(scope="module")
def trajs(webshop_offline):
    out = list(read_trajectories(webshop_offline))
    assert any(t.success for t in out) and not all(t.success for t in out)
    return out


@pytest.fixture(scope="module")
def real():
    return make_env("webshop", split="train", batch_size=1, max_steps=15)


def test_replay_reproduces_recorded_episodes(real, trajs):
    for t in trajs[:6]:
        r = replay_actions(real, real.task_index_of(t.task_id), [s.action for s in t.transitions])
        assert r.states == [s.next_state for s in t.transitions]
        assert r.success == t.success and r.steps == len(t.transitions)
        assert r.invalid == [s.invalid for s in t.transitions]
    t = trajs[0]
    refused = replay_actions(
        real, real.task_index_of(t.task_id), ["click[no such button]", t.transitions[0].action]
    )
    assert refused.invalid == [True, False]  # the real env's no-op is reported, step by step


def test_audit_catches_a_wrong_reward_and_passes_a_faithful_one(real, trajs):
    faithful, steps = audit_episodes(real, _episodes(trajs))
    assert faithful["sim/audit_success_precision"] == 1.0 and faithful["sim/audit_reward_acc"] == 1.0
    assert faithful["sim/audit_success_recall"] == 1.0 and faithful["sim/audit_episodes"] == len(trajs)
    assert steps == sum(len(t.transitions) for t in trajs)
    real_score = sum(t.score for t in trajs) / len(trajs)
    assert faithful["sim/audit_score_mae"] == pytest.approx(0.0, abs=1e-6)
    assert faithful["sim/audit_score_real"] == pytest.approx(real_score, abs=1e-6)
    lying, _ = audit_episodes(real, _episodes(trajs, lie=True))
    share = sum(t.success for t in trajs) / len(trajs)
    assert share < 1.0 and lying["sim/audit_success_precision"] == pytest.approx(share)
    assert lying["sim/audit_success_recall"] == 1.0 and lying["sim/audit_reward_acc"] == pytest.approx(share)
    # a synthetic score of 1.0 everywhere: off by what the real env gives, on average
    assert lying["sim/audit_score_synthetic"] == 1.0
    assert lying["sim/audit_score_mae"] == pytest.approx(1.0 - real_score, abs=1e-6)
    ended = sum(t.transitions[-1].done and not t.transitions[-1].truncated for t in trajs) / len(trajs)
    assert ended > 0 and faithful["sim/audit_ended_synthetic"] == faithful["sim/audit_ended_real"] == ended


def test_audit_shows_synthetic_endings_the_real_env_never_reaches(real, trajs):
    # the model ended each episode after its first action (a purchase that does not exist outside it)
    dreamt = [t for t in trajs if len(t.transitions) > 1][:4]
    eps = _episodes(dreamt)
    for e in eps:
        e.actions, e.rewards, e.terminated = e.actions[:1], e.rewards[:1], True
    m, steps = audit_episodes(real, eps)
    assert steps == 4 and m["sim/audit_ended_synthetic"] == 1.0 and m["sim/audit_ended_real"] == 0.0


def test_tasks_that_are_not_real_are_skipped(real, trajs):
    variation = _episodes(trajs[:3], lie=True)
    for e in variation:
        e.task_id += "-var7"  # a curriculum variation: a new instruction, no real task
    assert audit_episodes(real, variation) == ({}, 0)
    syn = SyntheticEnv(
        AlwaysSuccess(), [SyntheticTask(e.task_id, e.instruction, "s0", []) for e in variation]
    )
    audit = RewardAudit(every=1, episodes=2)
    assert audit(syn, variation) == {} and audit.transitions == 0
    assert audit(real, _episodes(trajs)) == {}  # a real env has no real counterpart to replay in
    mixed = audit(syn, variation + _episodes(trajs[:1]))  # the real task is audited, the others not
    assert mixed["sim/audit_episodes"] == 1 and audit.transitions == len(trajs[0].transitions)
    every2 = RewardAudit(every=2, episodes=8)
    assert every2(syn, _episodes(trajs[:2])) and every2(syn, _episodes(trajs[:2])) == {}


def test_real_envs_find_tasks_by_id(real):
    goal = real.goals["train"][5]
    assert real.task_index_of(goal.goal_id) == 5 and real.task_index_of(goal.goal_id + "-var0") is None
    alf = make_env("alfworld", split="train", batch_size=1)
    rec = alf.games.games("train")[3]
    assert alf.task_index_of(rec.task_id) == 3
    assert SyntheticEnv().task_index_of("synthetic-default-0") is None  # no stable ids: never replayed


def test_audit_state_round_trips(real, trajs):
    syn = SyntheticEnv(AlwaysSuccess(), [SyntheticTask("t", "i", "s0", [])])
    audit, eps = RewardAudit(every=2, episodes=2, seed=3), _episodes(trajs)
    audit(syn, eps)
    again = RewardAudit(every=2, episodes=2, seed=0)
    again.load_state_dict(audit.state_dict())
    assert again.iterations == 1 and again.transitions == audit.transitions > 0
    assert again(syn, eps) == audit(syn, eps) == {}  # iteration 2 of every 2: not due
    a, b = again(syn, eps), audit(syn, eps)
    a.pop("perf/audit_s"), b.pop("perf/audit_s")  # wall-clock: present, never equal
    assert a == b and a["sim/audit_episodes"] == 2  # the same sample


class _SyntheticFactory(EnvFactory):
    """A synthetic env with a stub experience model over the real train tasks of the offline data."""

    is_real = False

    def __init__(self, tasks):
        super().__init__("synthetic", batch_size=4, max_steps=3)
        self.tasks = tasks

    def build(self):
        return SyntheticEnv(AlwaysSuccess(), self.tasks, "webshop", [4], max_steps=3, write_back=True)


def test_fit_logs_the_audit_and_never_trains_on_it(tiny_lm, webshop_offline, tmp_path):
    schedule = SyntheticSchedule(_SyntheticFactory(tasks_from_trajectories([webshop_offline])), iterations=2)
    module, m = audited_fit(tiny_lm, schedule, tmp_path)
    # every synthetic episode is a "success" at its first step (a search); none is one in the real env
    assert float(m["sim/audit_success_precision"]) == 0.0 and float(m["sim/audit_reward_acc"]) == 0.0
    assert float(m["sim/audit_success_recall"]) == 1.0 and float(m["sim/audit_episodes"]) == 3
    assert float(m["data/audit_transitions"]) == module.audit.transitions >= 6  # 2 audits x 3 episodes
    assert schedule.real_transitions == 0 and float(m["data/real_transitions"]) == 0
    env = schedule.env("synthetic")
    written = env.experience.buffer.transitions
    assert len(written) == env.model_calls <= schedule.synthetic_transitions  # synthetic steps only
    assert all(t.source == "synthetic" for t in written)


def test_fit_in_a_real_synthetic_env_leaves_the_experience_model_unchanged(
    tiny_lm, webshop_offline, tmp_path
):
    """GRPO in a SyntheticEnv whose experience model is a real (tiny, untrained) causal LM: every step is
    generated by it, the policy's weights move, the experience model's do not (it is not trained by RL)."""
    from dreamgym.modeling.experience import ExperienceModel
    from dreamgym.modeling.formats import ExperienceFormat

    model, tok = tiny_lm.build()
    experience = ExperienceModel(model, tok, ExperienceFormat(k=0), max_new_tokens=96, batch_size=4)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    tasks = tasks_from_trajectories([webshop_offline])

    class Factory(EnvFactory):
        is_real = False

        def build(self):
            return SyntheticEnv(experience, tasks, "webshop", [4], max_steps=2)

    schedule = SyntheticSchedule(Factory("synthetic", batch_size=4, max_steps=2), iterations=1)
    module = PolicyRL(
        policy=tiny_lm, schedule=schedule, optimizer=lambda p: torch.optim.AdamW(p, lr=1e-2), tasks_per_batch=2,
        group_size=2, minibatches=1,
        collector=RolloutCollector(max_new_tokens=12, max_prompt_tokens=256, constrained=True, max_arg_tokens=4),
    )  # fmt: skip
    policy_before = {k: v.clone() for k, v in module.model.state_dict().items()}
    trainer = L.Trainer(
        accelerator="cpu", devices=1, max_steps=-1, default_root_dir=str(tmp_path), logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
    )  # fmt: skip
    trainer.fit(module, RolloutDataModule(eval_tasks=1))
    env = schedule.env("synthetic")
    assert env.model_calls >= 4 and schedule.synthetic_transitions >= 4 and schedule.real_transitions == 0
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items()), (
        "the experience model changed"
    )
    assert any(not torch.equal(policy_before[k], v) for k, v in module.model.state_dict().items())

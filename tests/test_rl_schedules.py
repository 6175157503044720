"""Schedules (phases, counters, budget) and the reward-variance curriculum, without any model."""

from dataclasses import dataclass

import pytest
import torch
from rl_toy import LetterEnv  # noqa: F401  (registers "letters")

from dreamgym.curriculum import RewardVarianceCurriculum, task_variance
from dreamgym.envs.factory import EnvFactory, SyntheticEnvFactory
from dreamgym.rl.schedules import RealSchedule, Sim2RealSchedule, SyntheticSchedule


def _factory(max_steps=3):
    return EnvFactory("letters", batch_size=2, max_steps=max_steps)


def test_real_budget_rule_never_exceeds():
    s = RealSchedule(_factory(max_steps=3), budget=20)
    # 4 episodes x 3 steps = 12 worst case fits in 20
    phase = s.next_phase(4)
    assert phase.is_real and phase.max_transitions == 20
    s.record(phase, 9)
    # 9 used, 11 left < 12 worst case: no further batch
    assert s.next_phase(4) is None
    assert s.real_transitions == 9 and s.synthetic_transitions == 0
    with pytest.raises(RuntimeError, match="budget exceeded"):
        s.record(phase, 12)


def test_sim2real_phases_and_state_round_trip():
    s = Sim2RealSchedule(_factory(), _factory(), synthetic_iterations=2, real_budget=12)
    for _ in range(2):
        p = s.next_phase(2)
        assert p.name == "synthetic" and not p.is_real and p.max_transitions is None
        s.record(p, 5)
    p = s.next_phase(2)
    assert p.name == "real" and p.max_transitions == 12
    s.record(p, 4)
    state = s.state_dict()
    assert state == {"real_transitions": 4, "synthetic_transitions": 10, "iteration": 3}
    s2 = Sim2RealSchedule(_factory(), _factory(), synthetic_iterations=2, real_budget=12)
    s2.load_state_dict(state)
    assert s2.next_phase(2).name == "real" and s2.next_phase(2).max_transitions == 8


def test_synthetic_schedule_counts_no_real():
    s = SyntheticSchedule(_factory(), iterations=1)
    p = s.next_phase(8)
    s.record(p, 30)
    assert s.next_phase(8) is None and s.real_transitions == 0 and s.synthetic_transitions == 30
    with pytest.raises(ValueError, match="budget"):
        RealSchedule(_factory())


def test_missing_experience_model_names_the_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="webshop_experience_sft.yaml"):
        SyntheticEnvFactory(checkpoint=str(tmp_path / "nope")).build()


def test_task_variance():
    assert task_variance([1, 0, 1, 0]) == pytest.approx(0.25)
    assert task_variance([1, 1]) == 0.0 and task_variance([1]) == 0.0
    assert task_variance([1, 0, 0]) == pytest.approx(2 / 9)


@dataclass
class _Task:
    task_id: str
    instruction: str


class _VaryEnv:
    """A VariableTaskPool: every other variation is unusable."""

    def __init__(self):
        self.tasks = [_Task(f"t{i}", f"task {i}") for i in range(10)]

    def num_tasks(self):
        return len(self.tasks)

    def vary_tasks(self, task_indices, n):
        start, texts = len(self.tasks), [self.tasks[i].instruction for i in task_indices for _ in range(n)]
        self.tasks += [_Task(f"v{k}", f"{s} but blue") for k, s in enumerate(texts) if k % 2 == 0]
        return list(range(start, len(self.tasks)))


def test_curriculum_seeds_variations_and_lambda_cap():
    env = _VaryEnv()
    cur = RewardVarianceCurriculum(lam=0.5, variations_per_seed=2, seed=0)
    tasks = cur.next_tasks(env, 4)
    assert len(tasks) == 4 and all(0 <= t < 10 for t in tasks)
    # task 0: V = 0.25 (seed), task 1: V = 0, task 2: V = 2/9 (seed), task 3: V = 0
    m = cur.update(env, [0, 1, 2, 3], [[1, 0], [0, 0], [1, 0, 0], [1, 1]])
    assert m["curriculum/seed_share"] == 0.5
    # 2 seeds x 2 variations requested, every other one usable -> 2 new tasks
    assert m["curriculum/variations_added"] == 2 and len(env.tasks) == 12
    assert env.tasks[10].instruction == "task 0 but blue" and env.tasks[11].instruction == "task 2 but blue"
    assert cur.pool == [10, 11]
    nxt = cur.next_tasks(env, 4)
    # lam = 0.5 caps the pool share at 2 of 4 tasks; the rest come from the 10 original tasks
    assert sum(t >= 10 for t in nxt) == 2 and all(t < 10 for t in nxt[2:])
    state = cur.state_dict()
    cur2 = RewardVarianceCurriculum(lam=0.5)
    cur2.load_state_dict(state)
    assert cur2.pool == cur.pool and cur2.next_tasks(env, 4) == cur.next_tasks(env, 4)


def test_curriculum_without_variations_replays_seeds():
    env = LetterEnv(batch_size=[1])
    cur = RewardVarianceCurriculum(lam=0.25)
    cur.next_tasks(env, 8)
    cur.update(env, [3, 4], [[1, 0], [0, 0]])
    assert cur.pool == [3]
    # lam * 8 = 2 pool slots, but the pool holds one task: it leads the batch
    assert cur.next_tasks(env, 8)[0] == 3


def test_curriculum_and_audit_draws_follow_the_run_seed():
    """Given no seed, the curriculum's task draws and the audit's sample take the run's seed
    (``seed_everything``): a suite's DreamGym seeds must not play the same tasks (they did while the
    default was a fixed 0)."""
    from dreamgym.rl.audit import RewardAudit

    env = LetterEnv(batch_size=[1])

    def draws():
        return RewardVarianceCurriculum(lam=0.25).next_tasks(env, 16), RewardAudit().rng.integers(
            1 << 30, size=4
        ).tolist()

    torch.manual_seed(0)
    seed0 = draws()
    torch.manual_seed(1)
    seed1 = draws()
    assert seed0[0] != seed1[0] and seed0[1] != seed1[1]
    torch.manual_seed(1)
    assert draws() == seed1
    assert RewardVarianceCurriculum(lam=0.25, seed=0).next_tasks(env, 16) == seed0[0]  # a pinned seed wins

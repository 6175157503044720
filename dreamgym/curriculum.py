"""Curriculum task selection by reward variance (DreamGym's curriculum task generator).

After each RL iteration every task's group of rollouts gives its value
``V_tau = 1/n * sum_i (r_i - mean(r))^2`` (for binary rewards ``p(1-p)``, highest at 50% success).
Tasks with ``V > 0`` become *seeds*. If the env offers task variations (the synthetic env's experience
model writing new goals that keep the action types but change constraints), seeds are varied and the
variations join a pool of generated tasks; otherwise the seeds themselves are replayed. Each batch draws
at most a share ``lam`` of its tasks from that pool (``lam`` caps the synthetic-task share); the rest
are drawn uniformly from the env's original tasks.

The curriculum talks to the env through a small task-pool protocol: :class:`TaskPool` (``num_tasks()``,
every env) and, for variations, :class:`VariableTaskPool` (``vary_tasks(task_indices, n)``: add ``n``
variations of each task to the pool, return their indices; the synthetic env
:class:`dreamgym.envs.synthetic.SyntheticEnv` implements it with its experience model).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from dreamgym.rl.advantages import group_moments
from dreamgym.seeding import run_seed

__all__ = ["task_variance", "RewardVarianceCurriculum", "TaskPool", "VariableTaskPool"]


@runtime_checkable
class TaskPool(Protocol):
    """What the curriculum samples from: an env's tasks, by index."""

    def num_tasks(self) -> int: ...


@runtime_checkable
class VariableTaskPool(TaskPool, Protocol):
    """A task pool that can write variations of its tasks (DreamGym's task generator)."""

    def vary_tasks(self, task_indices: list[int], n: int) -> list[int]:
        """Add up to ``n`` variations of each task to the pool; return the new tasks' indices."""
        ...


def task_variance(rewards: list[float]) -> float:
    """``V = mean((r - mean r)^2)`` of one task's group rewards (0 for fewer than two rollouts)."""
    if len(rewards) < 2:
        return 0.0
    r = torch.tensor(rewards, dtype=torch.float64)
    return float(group_moments(r, torch.zeros(len(rewards), dtype=torch.long))[1][0])


class RewardVarianceCurriculum:
    """Draws each batch's tasks; learns which are informative from group rewards.

    Args:
        lam: maximum share of a batch drawn from the seed/variation pool (0 disables the curriculum).
        max_seeds: at most this many seeds (highest variance first) per update.
        variations_per_seed: variations requested per seed when the env offers them.
        pool_size: the pool keeps its most recent this-many tasks.
        seed: seed of the task draws (None: the run's seed, ``seed_everything``, so a suite's seeds draw
            different tasks; :func:`dreamgym.seeding.run_seed`).
    """

    def __init__(
        self,
        lam: float = 0.25,
        max_seeds: int = 8,
        variations_per_seed: int = 1,
        pool_size: int = 64,
        seed: int | None = None,
    ):
        if not 0.0 <= lam <= 1.0:
            raise ValueError(f"RewardVarianceCurriculum.lam must be in [0, 1], got {lam}")
        self.lam, self.max_seeds, self.variations_per_seed, self.pool_size = (
            lam,
            max_seeds,
            variations_per_seed,
            pool_size,
        )
        self.rng = np.random.default_rng(run_seed(seed))
        self.pool: list[int] = []
        self.base_tasks: int | None = None
        self.last_values: dict[int, float] = {}

    def next_tasks(self, env: Any, n_tasks: int) -> list[int]:
        """Task indices for the next batch: ``<= floor(lam * n)`` from the pool, the rest uniform."""
        if self.base_tasks is None:
            self.base_tasks = int(env.num_tasks())
        n_pool = min(len(self.pool), int(np.floor(self.lam * n_tasks)))
        picked = [int(t) for t in self.rng.choice(self.pool, size=n_pool, replace=False)] if n_pool else []
        fresh = self.rng.choice(
            self.base_tasks, size=n_tasks - n_pool, replace=n_tasks - n_pool > self.base_tasks
        )
        return picked + [int(t) for t in fresh]

    def update(self, env: Any, task_indices: list[int], group_rewards: list[list[float]]) -> dict[str, float]:
        """Score each task's group, pick seeds (``V > 0``), vary them if the env can; return metrics."""
        values = [task_variance(r) for r in group_rewards]
        self.last_values = dict(zip(task_indices, values, strict=True))
        order = sorted(range(len(values)), key=lambda i: -values[i])
        seeds = [i for i in order if values[i] > 0][: self.max_seeds]
        added = 0
        if seeds and self.lam > 0:
            new = [task_indices[i] for i in seeds]
            if self.variations_per_seed > 0 and isinstance(env, VariableTaskPool):
                varied = env.vary_tasks(new, self.variations_per_seed)
                if varied:
                    new, added = varied, len(varied)
            self.pool = (self.pool + [t for t in new if t not in self.pool])[-self.pool_size :]
        return {
            "curriculum/task_value_mean": float(np.mean(values)) if values else 0.0,
            "curriculum/seed_share": len([v for v in values if v > 0]) / max(1, len(values)),
            "curriculum/pool_size": float(len(self.pool)),
            "curriculum/variations_added": float(added),
        }

    def state_dict(self) -> dict[str, Any]:
        return {"pool": list(self.pool), "base_tasks": self.base_tasks, "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.pool = [int(t) for t in state["pool"]]
        self.base_tasks = state["base_tasks"]
        self.rng.bit_generator.state = state["rng"]

"""Where each RL iteration collects its rollouts, and when training stops: ``real``, ``synthetic``,
``sim2real``; with counters of real and synthetic transitions and a hard real-transition budget.

Semantics:

- ``RealSchedule``: every iteration in the real env, until ``iterations`` or the ``budget`` is used.
- ``SyntheticSchedule``: every iteration in the synthetic env (DreamGym), for ``iterations``.
- ``Sim2RealSchedule``: ``synthetic_iterations`` in the synthetic env, then real iterations until the
  ``real_budget`` (the paper's DreamGym-S2R) or ``real_iterations``.

Budget rule: a real batch starts only if its worst case (episodes x ``max_steps``) fits in the remaining
budget, so no episode is ever cut and the budget is never exceeded; the collector is also given the
remaining budget as a hard cap. When no batch fits, :meth:`Schedule.next_phase` returns ``None`` and the
trainer ends fit. Counters, the iteration and the phase are saved in checkpoints
(:meth:`Schedule.state_dict`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dreamgym.envs.factory import EnvFactory

__all__ = ["Schedule", "RealSchedule", "SyntheticSchedule", "Sim2RealSchedule", "Phase"]


@dataclass
class Phase:
    """The source of the next batch: env, whether it is real, and the hard cap on its env steps."""

    name: str  # "real" or "synthetic"
    env: Any
    is_real: bool
    max_transitions: int | None


class Schedule:
    """Base class: holds env factories (built lazily), counters and the iteration number."""

    def __init__(self) -> None:
        self.real_transitions = 0
        self.synthetic_transitions = 0
        self.iteration = 0
        self._envs: dict[str, Any] = {}

    # -- subclass API
    def _plan(self, episodes: int) -> tuple[str, EnvFactory] | None:
        raise NotImplementedError

    def env_factories(self) -> dict[str, EnvFactory]:
        """Phase name -> env factory."""
        raise NotImplementedError

    # -- public API
    def planned_iterations(self) -> int | None:
        """How many iterations the schedule plans (``None`` when a real-transition budget decides)."""
        return None

    def check(self) -> None:
        """Check every env factory can build its env (e.g. the experience model exists); raise naming the fix."""
        for factory in self.env_factories().values():
            factory.check()

    def env(self, phase: str):
        """The (cached) env of ``phase``."""
        if phase not in self._envs:
            self._envs[phase] = self.env_factories()[phase].build()
        return self._envs[phase]

    def built_envs(self) -> dict[str, Any]:
        """The envs built so far, by phase name (checkpoints save what they wrote back)."""
        return dict(self._envs)

    def next_phase(self, episodes: int) -> Phase | None:
        """Where the next batch of ``episodes`` episodes is collected; ``None``: training is over."""
        plan = self._plan(episodes)
        if plan is None:
            return None
        name, _ = plan
        is_real = name == "real"
        return Phase(name, self.env(name), is_real, self._remaining_real() if is_real else None)

    def record(self, phase: Phase, transitions: int) -> None:
        """Count ``transitions`` env steps of ``phase`` and advance the iteration."""
        if phase.is_real:
            self.real_transitions += int(transitions)
            budget = self._budget()
            if budget is not None and self.real_transitions > budget:
                raise RuntimeError(
                    f"real-transition budget exceeded: {self.real_transitions} > {budget} (a bug)"
                )
        else:
            self.synthetic_transitions += int(transitions)
        self.iteration += 1

    def state_dict(self) -> dict[str, int]:
        return {
            "real_transitions": self.real_transitions,
            "synthetic_transitions": self.synthetic_transitions,
            "iteration": self.iteration,
        }

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.real_transitions = int(state["real_transitions"])
        self.synthetic_transitions = int(state["synthetic_transitions"])
        self.iteration = int(state["iteration"])

    def _budget(self) -> int | None:
        return None

    def _remaining_real(self) -> int | None:
        budget = self._budget()
        return None if budget is None else budget - self.real_transitions

    def _real_fits(self, factory: EnvFactory, episodes: int) -> bool:
        remaining = self._remaining_real()
        return remaining is None or episodes * factory.max_steps <= remaining


class RealSchedule(Schedule):
    """RL in the real env only.

    Args:
        env: the real env (train split).
        budget: real-transition budget (``None``: unlimited; then ``iterations`` must be set).
        iterations: RL iterations (``None``: until the budget is used).
    """

    def __init__(self, env: EnvFactory, budget: int | None = None, iterations: int | None = None):
        super().__init__()
        if budget is None and iterations is None:
            raise ValueError("RealSchedule needs `budget` (real transitions) or `iterations`; both are None")
        self.env_factory, self.budget, self.iterations = env, budget, iterations

    def env_factories(self) -> dict[str, EnvFactory]:
        return {"real": self.env_factory}

    def _budget(self) -> int | None:
        return self.budget

    def planned_iterations(self) -> int | None:
        return self.iterations if self.budget is None else None

    def _plan(self, episodes: int):
        if self.iterations is not None and self.iteration >= self.iterations:
            return None
        return ("real", self.env_factory) if self._real_fits(self.env_factory, episodes) else None


class SyntheticSchedule(Schedule):
    """RL in the synthetic env only (DreamGym): zero real transitions.

    Args:
        env: the synthetic env (usually a :class:`~dreamgym.envs.factory.SyntheticEnvFactory`).
        iterations: RL iterations.
    """

    def __init__(self, env: EnvFactory, iterations: int = 100):
        super().__init__()
        self.env_factory, self.iterations = env, iterations

    def env_factories(self) -> dict[str, EnvFactory]:
        return {"synthetic": self.env_factory}

    def planned_iterations(self) -> int | None:
        return self.iterations

    def _plan(self, episodes: int):
        return None if self.iteration >= self.iterations else ("synthetic", self.env_factory)


class Sim2RealSchedule(Schedule):
    """DreamGym-S2R: synthetic iterations first, then real ones within a real-transition budget.

    Args:
        synthetic_env: the synthetic env.
        real_env: the real env (train split).
        synthetic_iterations: iterations in the synthetic env before switching.
        real_budget: real transitions allowed in the real phase (paper: 5K vs 80K for real-only RL).
        real_iterations: optional cap on real iterations (``None``: until the budget is used).
    """

    def __init__(
        self,
        synthetic_env: EnvFactory,
        real_env: EnvFactory,
        synthetic_iterations: int = 50,
        real_budget: int = 5000,
        real_iterations: int | None = None,
    ):
        super().__init__()
        self.synthetic_factory, self.real_factory = synthetic_env, real_env
        self.synthetic_iterations, self.real_budget, self.real_iterations = (
            synthetic_iterations,
            real_budget,
            real_iterations,
        )

    def env_factories(self) -> dict[str, EnvFactory]:
        return {"synthetic": self.synthetic_factory, "real": self.real_factory}

    def _budget(self) -> int | None:
        return self.real_budget

    def planned_iterations(self) -> int | None:
        return None if self.real_iterations is None else self.synthetic_iterations + self.real_iterations

    @property
    def phase_name(self) -> str:
        """``"synthetic"`` during the first ``synthetic_iterations``, then ``"real"``."""
        return "synthetic" if self.iteration < self.synthetic_iterations else "real"

    def _plan(self, episodes: int):
        if self.phase_name == "synthetic":
            return "synthetic", self.synthetic_factory
        done_real = self.iteration - self.synthetic_iterations
        if self.real_iterations is not None and done_real >= self.real_iterations:
            return None
        return ("real", self.real_factory) if self._real_fits(self.real_factory, episodes) else None

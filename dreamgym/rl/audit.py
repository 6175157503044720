"""A live reward audit of RL in the synthetic env: an estimate of the experience model's reward error.

DreamGym's guarantee for policies trained in a synthetic env depends on the reward error ``eps_R``
of the experience model on the states the *policy* visits, which the offline fidelity metrics
(:mod:`dreamgym.fidelity`, on held-out expert/random transitions) do not see. The audit measures it
during RL: every ``every``-th synthetic iteration, a sample of that iteration's synthetic episodes
is replayed action by action in the real env the synthetic env imitates (same task; the bundled
real envs are deterministic given task and actions), and the real outcome is compared with the
synthetic one (:func:`audit_episodes`):

* ``sim/audit_success_precision``: of the audited episodes the experience model called successful,
  the share that also succeed in the real env (1.0 when none was called successful and none
  succeeded for real; :func:`dreamgym.fidelity.success_precision_recall`, as ``FidelityMeter``);
* ``sim/audit_success_recall``: of those that succeed in the real env, the share the model called
  successful;
* ``sim/audit_reward_acc``: share whose synthetic episode reward equals the real one;
* ``sim/audit_score_synthetic`` / ``sim/audit_score_real``: mean final score the experience model gave /
  the real env gives the same action sequences, and ``sim/audit_score_mae`` their mean absolute
  difference (what misleads a policy learning from the score, ``learning_reward: score``);
* ``sim/audit_ended_synthetic`` / ``sim/audit_ended_real``: share of the audited episodes the synthetic
  env ended (terminated) / whose actions end the episode in the real env too (WebShop: a real purchase).
  A synthetic score paid where the real replay never ends is reward for episodes that do not exist
  outside the model (e.g. a click on a product the model invented);
* ``data/audit_transitions``: real env steps spent on audits so far (cumulative).

Audit steps are only measured: they are never trained on, never written to a replay buffer, and not
counted in the schedule's real-transition budget. Episodes whose task is not a real task (curriculum
variations, whose instructions are new) are skipped; an iteration with nothing to replay, or an env
without a real counterpart (:meth:`~dreamgym.envs.base.TextEnvBase.make_real_env` gives ``None``, as
for every real env; a real env without task ids finds no task), logs nothing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from dreamgym.envs.episodes import Episode
from dreamgym.envs.replay import replay_actions
from dreamgym.fidelity import same_reward, success_precision_recall
from dreamgym.seeding import run_seed

__all__ = ["RewardAudit", "audit_episodes"]


def audit_episodes(real_env: Any, episodes: Sequence[Episode]) -> tuple[dict[str, float], int]:
    """Replay ``episodes`` in ``real_env`` (batch size 1) and score the synthetic outcomes against it.

    Each episode is replayed on the real task with its ``task_id``
    (:meth:`~dreamgym.envs.base.TextEnvBase.task_index_of`); episodes of other tasks are skipped.

    Returns:
        The metrics (``sim/audit_success_precision``, ``sim/audit_success_recall``,
        ``sim/audit_reward_acc``, ``sim/audit_score_synthetic``, ``sim/audit_score_real``,
        ``sim/audit_score_mae``, ``sim/audit_ended_synthetic``, ``sim/audit_ended_real``,
        ``sim/audit_episodes``: episodes replayed), ``{}`` when none was,
        and the number of real steps taken.
    """
    tp = fp = fn = same = replayed = steps = ended_syn = ended_real = 0
    scores: list[tuple[float, float]] = []  # (synthetic, real) final score per replayed episode
    for ep in episodes:
        task = real_env.task_index_of(ep.task_id)
        if task is None:
            continue
        real = replay_actions(real_env, task, ep.actions)
        steps += real.steps
        replayed += 1
        tp += int(ep.success and real.success)
        fp += int(ep.success and not real.success)
        fn += int(real.success and not ep.success)
        same += int(same_reward(ep.reward, real.reward))
        ended_syn, ended_real = ended_syn + int(ep.terminated), ended_real + int(real.terminated)
        scores.append((ep.score, real.score))
    if not replayed:
        return {}, steps
    prec, rec = success_precision_recall(tp, fp, fn)
    return {
        "sim/audit_success_precision": prec,
        "sim/audit_success_recall": rec,
        "sim/audit_reward_acc": same / replayed,
        "sim/audit_score_synthetic": float(np.mean([a for a, _ in scores])),
        "sim/audit_score_real": float(np.mean([b for _, b in scores])),
        "sim/audit_score_mae": float(np.mean([abs(a - b) for a, b in scores])),
        "sim/audit_ended_synthetic": ended_syn / replayed,
        "sim/audit_ended_real": ended_real / replayed,
        "sim/audit_episodes": float(replayed),
    }, steps


class RewardAudit:
    """Audits every ``every``-th synthetic iteration on ``episodes`` of its episodes (module docstring).

    Give it to :class:`models.policy_rl.PolicyRL` as ``audit`` (``None``: no audit)::

        audit:
          class_path: dreamgym.rl.audit.RewardAudit
          init_args: {every: 1, episodes: 8}

    Under DDP each rank audits its own episodes and logs its own values (``data/audit_transitions``
    counts that rank's audit steps).

    Args:
        every: audit the 1st, ``every+1``-th, ... synthetic iteration (counted by this object).
        episodes: episodes replayed per audit, sampled without replacement among the iteration's
            episodes of real tasks (all of them when fewer).
        seed: seed of the sample (the audit's own generator; training randomness is untouched; None: the
            run's seed, ``seed_everything``).
        env_kwargs: extra constructor arguments of the replay env, which must be the env the
            experience model's tasks come from (e.g. WebShop's ``data_dir`` / ``human_goals``).
    """

    def __init__(
        self, every: int = 1, episodes: int = 8, seed: int | None = None, env_kwargs: dict | None = None
    ):
        if every < 1 or episodes < 1:
            raise ValueError(f"RewardAudit: every ({every}) and episodes ({episodes}) must be >= 1")
        self.every, self.episodes, self.env_kwargs = every, episodes, dict(env_kwargs or {})
        self.rng = np.random.default_rng(run_seed(seed))
        self.iterations = 0  # synthetic iterations seen
        self.transitions = 0  # real steps spent on audits
        self._real: dict[int, Any] = {}  # id(synthetic env) -> its replay env (None: no real counterpart)

    def real_env(self, env: Any):
        """The replay env of synthetic env ``env`` (built once), or ``None`` if it has no real counterpart."""
        if id(env) not in self._real:
            self._real[id(env)] = env.make_real_env(**self.env_kwargs)
        return self._real[id(env)]

    def __call__(self, env: Any, episodes: Sequence[Episode]) -> dict[str, float]:
        """Count one synthetic iteration of ``env`` and audit its ``episodes`` when due.

        Returns:
            The :func:`audit_episodes` metrics plus the cumulative ``data/audit_transitions`` and the
            audit's wall time ``perf/audit_s``; ``{}`` when not due or nothing could be replayed.
        """
        due = self.iterations % self.every == 0
        self.iterations += 1
        real = self.real_env(env) if due else None
        if real is None:
            return {}
        t0 = time.perf_counter()
        pool = [e for e in episodes if real.task_index_of(e.task_id) is not None]
        if len(pool) > self.episodes:
            pool = [pool[i] for i in sorted(self.rng.choice(len(pool), self.episodes, replace=False))]
        metrics, steps = audit_episodes(real, pool)
        if not metrics:
            return {}
        self.transitions += steps
        metrics["data/audit_transitions"] = float(self.transitions)
        metrics["perf/audit_s"] = time.perf_counter() - t0
        return metrics

    def state_dict(self) -> dict[str, Any]:
        return {
            "iterations": self.iterations,
            "transitions": self.transitions,
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.iterations, self.transitions = int(state["iterations"]), int(state["transitions"])
        self.rng.bit_generator.state = state["rng"]

"""The offline-only regime (the paper's WebArena-Lite setting) as a Lightning callback.

WebArena-Lite's sites are not RL-ready (slow steps, unreliable resets and rewards), so DreamGym trains
there from offline trajectories only: the experience model and the warm start learn from files, RL
runs only in the synthetic env, and the real env is used for held-out evaluation alone. Add
:class:`OfflineOnly` to an RL config's ``trainer.callbacks`` (``configs/web_grpo.yaml``) and a fit

- refuses to start if the module's schedule has a real phase (``RealSchedule``, ``Sim2RealSchedule``)
  or a live reward audit is set (it replays episodes in the real env), naming the setting to change;
- turns on the real-step guard (:mod:`dreamgym.envs.guard`) for the whole fit: any reset or step of a
  real env raises :class:`~dreamgym.envs.guard.RealStepForbidden`, except during validation and only
  on a held-out split (val/test).

The SFT stages need no guard: they read JSONL files and build no env.
"""

from __future__ import annotations

from typing import Any

import lightning as L

from dreamgym.envs.guard import enter_evaluation, exit_evaluation, forbid_real_steps, guard_active

__all__ = ["OfflineOnly", "check_offline_module"]


def check_offline_module(module: Any) -> None:
    """Raise ``ValueError`` if ``module`` (a PolicyRL) would touch the real env outside evaluation."""
    problems = []
    schedule = getattr(module, "schedule", None)
    if schedule is not None:
        real = sorted(name for name, factory in schedule.env_factories().items() if factory.is_real)
        if real:
            problems.append(
                f"model.init_args.schedule is a {type(schedule).__name__} with real phase(s) {real}: use "
                "dreamgym.rl.schedules.SyntheticSchedule (RL in the synthetic env only)"
            )
    if getattr(module, "audit", None) is not None:
        problems.append(
            "model.init_args.audit is set: the reward audit replays synthetic episodes in the real env; set it to null"
        )
    eval_env = getattr(module, "eval_env", None)
    if eval_env is not None and getattr(eval_env, "split", None) == "train":
        problems.append("model.init_args.eval_env.init_args.split is 'train': evaluate on 'test' (or 'val')")
    if problems:
        raise ValueError("OfflineOnly: this RL run would use the real env outside held-out evaluation; "
                         + "; ".join(problems))  # fmt: skip


class OfflineOnly(L.Callback):
    """Forbid real env steps during fit except held-out validation (module docstring)."""

    def __init__(self) -> None:
        self._guard = None

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        check_offline_module(pl_module)
        if guard_active():  # a second OfflineOnly in the callback list: the first one owns the guard
            return
        self._guard = forbid_real_steps(f"{type(self).__name__} on {type(pl_module).__name__}")
        self._guard.__enter__()

    def _release(self) -> None:
        if self._guard is not None:
            guard, self._guard = self._guard, None
            guard.__exit__(None, None, None)

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._release()

    def on_exception(
        self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException
    ) -> None:
        self._release()

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._guard is not None:
            enter_evaluation()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._guard is not None:
            exit_evaluation()

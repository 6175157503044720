"""Replaying a recorded action sequence on one task of a deterministic env.

Used by the reward audit of RL in the synthetic env (:mod:`dreamgym.rl.audit`: the synthetic episode's
actions played in the real env) and by tests that check an episode is reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dreamgym.envs.base import TextEnvBase
from dreamgym.envs.episodes import Episode, run_episodes

__all__ = ["Replay", "replay_actions"]


@dataclass
class Replay:
    """What replaying an action sequence on one task gave (see :func:`replay_actions`)."""

    states: list[str]  # the state after each step taken
    rewards: list[float]  # the reward of each step taken
    success: bool  # the last step taken ended the episode in success (False: it did not end it)
    score: float  # the env score of the last step taken
    terminated: bool  # the env ended the episode (not by the step limit)
    invalid: list[bool] = field(default_factory=list)  # per step taken: the env refused the action (a no-op)

    @property
    def reward(self) -> float:
        """The episode reward (sum over the steps taken)."""
        return float(sum(self.rewards))

    @property
    def steps(self) -> int:
        """Env steps taken."""
        return len(self.rewards)


def replay_actions(env: TextEnvBase, task_index: int, actions: list[str], on_step=None) -> Replay:
    """Reset ``env`` (batch size 1) on task ``task_index`` of its split and apply ``actions`` in order.

    The replay stops early when the env ends the episode (terminated, or truncated at ``max_steps``);
    the remaining actions are not applied. ``on_step(i, env)`` is called after the ``i``-th step, while
    ``env.step_info(0)`` still describes it. Only deterministic envs reproduce a recorded episode.
    The episode runs in the one episode loop (:func:`~dreamgym.envs.episodes.run_episodes`) with an
    actor that returns the recorded action of each turn, and a step budget of ``len(actions)``.

    Raises:
        ValueError: if ``env`` has more than one slot.
    """
    if env.batch_size[0] != 1:
        raise ValueError(f"replay_actions needs an env of batch size 1, got {list(env.batch_size)}")

    def act(slots: list[int], episodes: list[Episode]) -> list[str]:
        return [actions[len(episodes[0].actions)]]

    hook = None if on_step is None else (lambda slot, ep: on_step(len(ep.actions) - 1, env))
    played, _ = run_episodes(env, act, [int(task_index)], max_transitions=len(actions), on_step=hook)
    if not played:  # no action to apply: a reset only
        return Replay([], [], success=False, score=0.0, terminated=False)
    ep = played[0]
    return Replay(ep.states[1:], ep.rewards, ep.success, ep.scores[-1], ep.terminated, list(ep.invalid))

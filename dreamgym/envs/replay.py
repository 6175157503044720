"""Replaying a recorded action sequence on one task of a deterministic env.

Used by the reward audit of RL in the synthetic env (:mod:`dreamgym.rl.audit`: the synthetic episode's
actions played in the real env) and by tests that check an episode is reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDict

from dreamgym.envs.base import TextEnvBase, as_text_list, text_stack

__all__ = ["Replay", "replay_actions"]


@dataclass
class Replay:
    """What replaying an action sequence on one task gave (see :func:`replay_actions`)."""

    states: list[str]  # the state after each step taken
    rewards: list[float]  # the reward of each step taken
    success: bool  # the last step taken ended the episode in success
    score: float  # the env score of the last step taken
    terminated: bool  # the env ended the episode (not by the step limit)

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

    Raises:
        ValueError: if ``env`` has more than one slot.
    """
    if env.batch_size[0] != 1:
        raise ValueError(f"replay_actions needs an env of batch size 1, got {list(env.batch_size)}")
    reset = TensorDict(
        {"_reset": torch.ones(1, 1, dtype=torch.bool), "task_index": torch.tensor([[int(task_index)]])},
        batch_size=[1],
    )
    env.reset(reset)
    out = Replay([], [], success=False, score=0.0, terminated=False)
    for i, action in enumerate(actions):
        nxt = env.step(TensorDict({"action": text_stack([action], env.batch_size)}, batch_size=[1]))["next"]
        out.states.append(str(as_text_list(nxt["observation"])[0]))
        out.rewards.append(float(nxt["reward"].item()))
        out.success, out.score = bool(nxt["success"].item()), float(nxt["score"].item())
        out.terminated = bool(nxt["terminated"].item())
        if on_step is not None:
            on_step(i, env)
        if nxt["done"].item():
            break
    return out

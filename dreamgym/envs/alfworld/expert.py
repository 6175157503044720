"""The ALFWorld expert: follows the game's stored planner walkthrough, tracking where it is.

The walkthrough (fast-downward's plan, stored at generation time) is read from the env's privileged
step info. The expert keeps a cursor into it and skips steps that are already done or not needed:
``go to X`` when the agent is already at X is not admissible in ALFWorld (it would be a no-op), and
``open X`` when X is already open likewise. With ``detour_prob`` it sometimes interjects a harmless
information command (``look``, ``inventory``, ``examine`` the current receptacle) so offline data is
not a single fixed path per game. If the walkthrough is missing or runs out before the goal holds, it
falls back to ``look``.
"""

from __future__ import annotations

from typing import Any

from dreamgym.agents import Agent

__all__ = ["ALFWorldExpert", "make_alfworld_expert"]


class ALFWorldExpert(Agent):
    """Walkthrough follower with location tracking (see module docstring).

    Args:
        detour_prob: chance, per step, of a harmless information command before the next plan step.
        seed: seed of the detours.
    """

    def __init__(self, detour_prob: float = 0.0, seed: int | None = None):
        if not 0.0 <= detour_prob < 1.0:
            raise ValueError(f"detour_prob must be in [0, 1), got {detour_prob}")
        self.detour_prob = detour_prob
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.task_id: str | None = None
        self.cursor = 0

    def act(self, obs: Any, info: dict[str, Any]) -> str:
        if info.get("task_id") != self.task_id:  # a new episode
            self.task_id, self.cursor = info.get("task_id"), 0
        plan = info.get("walkthrough") or []
        admissible = set(info.get("admissible_commands") or getattr(obs, "available_actions", []) or [])
        if self.detour_prob and self.rng.random() < self.detour_prob:
            options = ["look", "inventory"] + (
                [f"examine {info['location']}"] if info.get("location") else []
            )
            options = [c for c in options if c in admissible]
            if options:
                return self.rng.choice(options)
        while self.cursor < len(plan):
            cmd = plan[self.cursor]
            self.cursor += 1
            if cmd == f"go to {info.get('location')}" or (
                cmd.startswith("open ") and cmd[5:] in set(info.get("opened") or [])
            ):
                continue  # already there / already open: ALFWorld would answer "Nothing happens."
            return cmd
        return "look"


def make_alfworld_expert(env: Any = None, **kwargs: Any) -> ALFWorldExpert:
    """Registry factory (:func:`dreamgym.agents.make_expert`): ``make_expert("alfworld", env)``."""
    return ALFWorldExpert(**kwargs)

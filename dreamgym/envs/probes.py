"""Learning-check envs: small text tasks whose answer is known, where a policy-gradient core that works
must reach near-perfect success from chance and a broken one cannot.

Both are :class:`~dreamgym.envs.base.TextEnvBase` envs (registered as ``probe_choice`` and
``probe_credit``, so ``check_env_specs`` runs on them with every other env) and share the word pool
:data:`WORDS`. Task ``i`` of a split is drawn from a generator seeded by ``(split, i)``: the same task
always, and the splits are disjoint draws of the same distribution (held-out success is measured on
``val`` / ``test`` task indices the policy never trained on).

``probe_choice`` (one step)::

    instruction:  "Pick the box with the blue label."
    observation:  "A shelf holds 4 boxes: red, blue, green, gold."
    actions:      pick[red]  pick[blue]  pick[green]  pick[gold]      (order shuffled per task)

  Reward 1 for the named box, else 0; the episode ends after the one step. Chance: ``1 / options``.

``probe_credit`` (``corridor + 2`` steps; the only reward comes at the end and depends on the first step)::

    instruction:  "Open the blue door."
    step 0:       "A table holds 4 keys: red, blue, green, gold."  ->  take[red key] ... take[gold key]
    steps 1..c:   "You walk down the corridor carrying a key."    ->  walk
    last step:    "You stand before a door."                        ->  open door
                  reward 1 if the key taken at step 0 is the door's colour, else 0.

  The corridor and door steps have one action each, so every turn but the first is forced: all the
  credit the outcome carries belongs to a choice made ``corridor + 1`` turns before the reward. Chance:
  ``1 / options``.

A bad action (unlisted) is flagged ``invalid`` and is a no-op, as in the real envs.
"""

from __future__ import annotations

import zlib

import numpy as np

from dreamgym.envs.base import TextEnvBase, TextObs, TextStep

__all__ = ["WORDS", "ChoiceProbeEnv", "CreditProbeEnv", "probe_corpus"]

WORDS = ("red", "blue", "green", "gold", "white", "black", "pink", "gray")
"""The colour words both probes draw their options from."""

_TASKS = 1000  # tasks per split; many more than distinct (options, target) draws, so no split is small


def _task_rng(env: str, split: str, index: int) -> np.random.Generator:
    return np.random.default_rng([zlib.crc32(f"{env}/{split}".encode()), int(index)])


def _draw(env: str, split: str, index: int, options: int) -> tuple[list[str], str]:
    """The task's options (a shuffled subset of :data:`WORDS`) and its target among them."""
    rng = _task_rng(env, split, index)
    opts = [WORDS[i] for i in rng.permutation(len(WORDS))[:options]]
    return opts, opts[int(rng.integers(options))]


class _ProbeEnv(TextEnvBase):
    """Shared task drawing of the probes (see module docstring)."""

    def __init__(self, batch_size=(1,), max_steps: int = 8, split: str = "train", seed: int | None = 0,
                 options: int = 4):  # fmt: skip
        if not 2 <= options <= len(WORDS):
            raise ValueError(f"{type(self).__name__}.options={options}: give 2..{len(WORDS)} options")
        if split not in ("train", "val", "test"):
            raise ValueError(f"split={split!r}: the probes have 'train', 'val' and 'test' tasks")
        self.options = options
        super().__init__(batch_size=batch_size, max_steps=max_steps, split=split, seed=seed)
        self._target: dict[int, str] = {}

    def _num_tasks(self, split: str) -> int:
        return _TASKS

    def _task_ids(self, split: str) -> list[str]:
        return [f"{self.env_name}-{split}-{i}" for i in range(_TASKS)]

    instruction = ""  # str.format templates of each probe: the target word
    scene = ""  # ... the number of options and the options, comma-separated
    action = ""  # ... one option word

    def _start(self, slot: int, split: str, task_index: int) -> TextObs:
        opts, target = _draw(self.env_name, split, task_index, self.options)
        self._target[slot] = target
        self._begin(slot)
        return TextObs(
            f"{self.env_name}-{split}-{task_index}",
            self.instruction.format(target),
            self.scene.format(len(opts), ", ".join(opts)),
            [self.action.format(w) for w in opts],
        )

    def _begin(self, slot: int) -> None:
        """Reset the slot's own episode state (the target is set)."""

    def _act(self, slot: int, action: str) -> TextStep:
        obs = self._obs[slot]
        if action.strip() not in obs.available_actions:
            return TextStep(obs.observation, obs.available_actions, invalid=True)
        return self._listed(slot, action.strip())

    def _listed(self, slot: int, action: str) -> TextStep:
        """The step of a listed ``action``."""
        raise NotImplementedError

    def _end(self, won: bool, text: str) -> TextStep:
        return TextStep(text, [], reward=float(won), score=float(won), terminated=True, success=won)


class ChoiceProbeEnv(_ProbeEnv):
    """One-step choice whose answer is written in the instruction (see module docstring).

    Args:
        batch_size, max_steps, split, seed: as :class:`~dreamgym.envs.base.TextEnvBase`.
        options: boxes per task (chance success is ``1 / options``).
    """

    env_name = "probe_choice"
    instruction = "Pick the box with the {} label."
    scene = "A shelf holds {} boxes: {}."
    action = "pick[{}]"

    def _listed(self, slot: int, action: str) -> TextStep:
        return self._end(action == f"pick[{self._target[slot]}]", "The box is open.")


class CreditProbeEnv(_ProbeEnv):
    """A key chosen at the first step opens (or not) the door at the last (see module docstring).

    Args:
        batch_size, max_steps, split, seed: as :class:`~dreamgym.envs.base.TextEnvBase` (``max_steps``
            must leave room for ``corridor + 2`` steps).
        options: keys per task (chance success is ``1 / options``).
        corridor: forced ``walk`` steps between the choice and the door.
    """

    env_name = "probe_credit"
    instruction = "Open the {} door."
    scene = "A table holds {} keys: {}."
    action = "take[{} key]"

    def __init__(self, batch_size=(1,), max_steps: int = 8, split: str = "train", seed: int | None = 0,
                 options: int = 4, corridor: int = 2):  # fmt: skip
        if corridor < 0 or max_steps < corridor + 2:
            raise ValueError(
                f"CreditProbeEnv: corridor={corridor} needs max_steps >= corridor + 2 = {corridor + 2} "
                f"(got {max_steps}) and corridor >= 0"
            )
        self.corridor = corridor
        super().__init__(batch_size=batch_size, max_steps=max_steps, split=split, seed=seed, options=options)
        self._key: dict[int, str | None] = {}
        self._walked: dict[int, int] = {}

    def _begin(self, slot: int) -> None:
        self._key[slot], self._walked[slot] = None, 0

    def _listed(self, slot: int, action: str) -> TextStep:
        if self._key[slot] is None:  # the choice
            self._key[slot] = action[len("take[") : -len(" key]")]
        elif action == "walk":
            self._walked[slot] += 1
        else:  # "open door": the outcome of the first step's choice
            won = self._key[slot] == self._target[slot]
            return self._end(won, "The door opens." if won else "The key does not fit.")
        if self._walked[slot] < self.corridor:
            return TextStep("You walk down the corridor carrying a key.", ["walk"])
        return TextStep("You stand before a door.", ["open door"])


def probe_corpus() -> list[str]:
    """Text for a tokenizer that covers both probes' prompts and actions (every word of the pool)."""
    lines = []
    for w in WORDS:
        lines += [
            f"Pick the box with the {w} label.", f"pick[{w}]", f"Open the {w} door.", f"take[{w} key]",
            f"A shelf holds 4 boxes: {w}, {w}.", f"A table holds 4 keys: {w}, {w}.",
        ]  # fmt: skip
    lines += [
        "You walk down the corridor carrying a key.", "walk", "You stand before a door.", "open door",
        "The door opens.", "The key does not fit.", "The box is open.",
        "Instruction: Previous steps: state: action: Current state: Available actions: Action:",
    ]  # fmt: skip
    return lines * 20

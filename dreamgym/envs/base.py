"""The key layout and spec builder shared by every dreamgym text environment.

Real envs (WebShop, ALFWorld) and the synthetic env (experience model) subclass
:class:`TextEnvBase`, so a policy, a rollout loop or another TorchRL project cannot tell them apart.

Spec tree (``B`` = ``batch_size``)::

    observation_spec:
        instruction        NonTensor (B,)   task instruction (str)
        observation        NonTensor (B,)   abstract textual state s_t (str)
        available_actions  NonTensor (B,)   list[str] of actions valid in s_t
        task_id            NonTensor (B,)   id of the current task (str)
        reasoning          NonTensor (B,)   rationale for the last transition ("" for real envs)
        score              (B, 1) float32   raw env score (WebShop purchase score; 1/0 elsewhere)
        success            (B, 1) bool      the episode ended in success
        invalid            (B, 1) bool      the last action was not valid (a no-op)
        sim_error          (B, 1) bool      the experience model's output did not parse (synthetic only)
        step_count         (B, 1) int64     steps taken in this episode
    action_spec:           NonTensor (B,)   action text, key "action"
    reward_spec:           (B, 1) float32   outcome reward: 1.0 on the final step of a success, else 0
    done_spec:             done / terminated / truncated, each (B, 1) bool

Reset picks tasks reproducibly: put ``task_index`` (B, 1) int64 in the reset tensordict (``-1`` means
sample), or call :meth:`TextEnvBase.queue_tasks` before ``reset``. Subclasses implement the per-slot
hooks ``_num_tasks``, ``_start``, ``_act`` (or the batch hooks ``_start_slots`` / ``_act_slots`` for a
batched backend) and return :class:`TextObs` / :class:`TextStep`; envs whose tasks have stable ids
implement ``_task_ids`` too, so :meth:`TextEnvBase.task_ids` lists them and
:meth:`TextEnvBase.task_index_of` finds a task by id.

:func:`dreamgym.envs.replay.replay_actions` plays a recorded action sequence again on one task.

Optional interface: what a trainer asks of any env, with defaults that are right for a real env, so
callers never switch on the env's class. An env that simulates (the synthetic env) overrides them:

* :meth:`TextEnvBase.place_model` puts a model the env runs on the trainer's device (default: no-op);
* :meth:`TextEnvBase.health` is the simulator's cumulative health, logged as ``sim/...`` (default: ``{}``);
* :attr:`TextEnvBase.written_buffer` is the replay buffer the env writes its steps to, saved with a
  checkpoint (default: ``None``);
* :meth:`TextEnvBase.make_real_env` builds the real env the env imitates, for replaying its episodes
  (default: ``None``, no real counterpart).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict, TensorDictBase
from torchrl.data import Bounded, Composite, NonTensor, Unbounded
from torchrl.envs import EnvBase

from dreamgym.envs.grounding import Grounding, PathFreeGrounding
from dreamgym.envs.guard import check_real_step
from dreamgym.schema import ACTION_TEMPLATE

__all__ = [
    "ACTION_TEMPLATE",
    "TEXT_KEYS",
    "TextObs",
    "TextStep",
    "TextEnvBase",
    "text_stack",
    "as_text_list",
]

TEXT_KEYS = ("instruction", "observation", "available_actions", "task_id", "reasoning")
FLAG_KEYS = ("success", "invalid", "sim_error")


@dataclass
class TextObs:
    """What a slot shows after reset."""

    task_id: str
    instruction: str
    observation: str
    available_actions: list[str]


@dataclass
class TextStep:
    """What a slot shows after one step."""

    observation: str
    available_actions: list[str]
    reward: float = 0.0
    score: float = 0.0
    terminated: bool = False
    success: bool = False
    invalid: bool = False
    sim_error: bool = False
    reasoning: str = ""
    info: dict = field(default_factory=dict)


def text_stack(values: list, batch_size: torch.Size) -> NonTensorStack:
    """Stack per-element python values (str or list[str]) as a NonTensor entry of ``batch_size``."""
    return NonTensorStack(*[NonTensorData(data=v, batch_size=[]) for v in values], batch_size=batch_size)


def as_text_list(value) -> list:
    """Read a NonTensor entry back as a python list (one value per batch element)."""
    if isinstance(value, (NonTensorStack, NonTensorData)):
        out = value.tolist()
        return out if isinstance(out, list) and value.batch_size else [out]
    if isinstance(value, str):
        return [value]
    return list(value)


def printable(text: str) -> str:
    """``text`` without control and invisible format characters (NUL, escape codes, right-to-left
    overrides, zero-width marks: Unicode categories Cc and Cf), so an action never writes them into a
    page; whitespace controls (newline, tab) become spaces."""
    return "".join(
        " " if c in "\t\n\r" else c
        for c in text
        if c in "\t\n\r" or unicodedata.category(c) not in ("Cc", "Cf")
    )


class TextEnvBase(EnvBase):
    """Batched text env with the dreamgym key layout (see module docstring).

    Args:
        batch_size: number of parallel episodes (slots).
        max_steps: step limit per episode; reaching it sets ``truncated``.
        split: task split to draw tasks from ("train", "val" or "test").
        seed: seed for task sampling.
    """

    env_name: str = "text"
    batch_locked = True
    is_real: bool = True
    """A real env (not the experience model): the offline-only guard (:mod:`dreamgym.envs.guard`) checks it."""

    def __init__(self, batch_size=(1,), max_steps: int = 15, split: str = "train", seed: int | None = 0):
        batch_size = torch.Size(batch_size if not isinstance(batch_size, int) else (batch_size,))
        name = type(self).__name__
        if len(batch_size) != 1 or batch_size[0] < 1:
            raise ValueError(
                f"{name}.batch_size={list(batch_size)}: give one positive number of parallel slots, e.g. [4]"
            )
        if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
            raise ValueError(f"{name}.max_steps={max_steps!r}: give an integer >= 1 (steps per episode)")
        super().__init__(batch_size=batch_size, device="cpu")
        self.max_steps = int(max_steps)
        self.split = split
        self._rng = np.random.default_rng(seed)
        self._queued: list[int] = []
        n = batch_size[0]
        self._obs: list[TextObs | None] = [None] * n
        self._steps = np.zeros(n, dtype=np.int64)
        self._step_infos: dict[int, dict] = {}  # slot -> TextStep.info of its last step
        self._task_index: dict[str, dict[str, int]] = {}  # split -> task id -> task index
        self._make_specs()

    # ------------------------------------------------------------------ specs
    def _make_specs(self) -> None:
        bs = self.batch_size
        text = {
            k: NonTensor(shape=bs, example_data="" if k != "available_actions" else [""]) for k in TEXT_KEYS
        }
        self.observation_spec = Composite(
            **text,
            score=Unbounded(shape=(*bs, 1), dtype=torch.float32),
            success=Bounded(low=0, high=1, shape=(*bs, 1), dtype=torch.bool),
            invalid=Bounded(low=0, high=1, shape=(*bs, 1), dtype=torch.bool),
            sim_error=Bounded(low=0, high=1, shape=(*bs, 1), dtype=torch.bool),
            step_count=Unbounded(shape=(*bs, 1), dtype=torch.int64),
            shape=bs,
        )
        self.action_spec = Composite(action=NonTensor(shape=bs, example_data="click[buy now]"), shape=bs)
        self.reward_spec = Composite(reward=Unbounded(shape=(*bs, 1), dtype=torch.float32), shape=bs)
        self.done_spec = Composite(
            done=Bounded(low=0, high=1, shape=(*bs, 1), dtype=torch.bool),
            terminated=Bounded(low=0, high=1, shape=(*bs, 1), dtype=torch.bool),
            truncated=Bounded(low=0, high=1, shape=(*bs, 1), dtype=torch.bool),
            shape=bs,
        )

    # ------------------------------------------------------------ subclass API
    def _num_tasks(self, split: str) -> int:
        raise NotImplementedError

    def _start(self, slot: int, split: str, task_index: int) -> TextObs:
        """Start a new episode of task ``task_index`` of ``split`` in ``slot``."""
        raise NotImplementedError

    def _act(self, slot: int, action: str) -> TextStep:
        """Apply ``action`` in ``slot``. Must not raise on a bad action: flag it invalid instead."""
        raise NotImplementedError

    def _task_ids(self, split: str) -> list[str] | None:
        """The task ids of ``split`` in task-index order; ``None``: this env has no stable task ids."""
        return None

    def _start_slots(self, slots: list[int], task_indices: list[int]) -> list[TextObs]:
        return [self._start(s, self.split, t) for s, t in zip(slots, task_indices, strict=True)]

    def _act_slots(self, slots: list[int], actions: list[str]) -> list[TextStep]:
        return [self._act(s, a) for s, a in zip(slots, actions, strict=True)]

    @classmethod
    def is_valid_action(cls, action: str, available_actions: Sequence[str]) -> bool:
        """Whether this env would accept ``action`` in a state listing ``available_actions``.

        The synthetic env imitating this env asks this (never the model) before a step, so real and
        synthetic envs agree on validity. Default: ``action`` is listed (exact, after stripping), or
        fills a listed template such as ``search[<query>]`` with a non-blank argument. Envs override it
        with their own rule (WebShop: :func:`dreamgym.envs.webshop.pages.check_action`).
        """
        a = action.strip()
        for cand in available_actions:
            c = cand.strip()
            if a == c:
                return True
            m = ACTION_TEMPLATE.match(c)
            if (
                m
                and a.startswith(m.group(1) + "[")
                and a.endswith("]")
                and a[len(m.group(1)) + 1 : -1].strip()
            ):
                return True
        return False

    @classmethod
    def infer_available_actions(
        cls, instruction: str, state: str, initial_state: str = "", earlier_states: Sequence[str] = ()
    ) -> list[str]:
        """The actions available in an abstract ``state``, derived from its text alone.

        The synthetic env uses this to list actions for states the experience model wrote, so its
        ``available_actions`` follow the same rule as the real env's. ``initial_state`` is the
        episode's first state (e.g. ALFWorld's room description) and ``earlier_states`` the episode's states
        before ``state``, oldest first (``initial_state`` included), for envs whose commands depend on
        earlier steps (ALFWorld's: the object picked up three steps ago).
        """
        raise NotImplementedError(f"{cls.__name__} does not infer available actions from state text")

    @classmethod
    def path_free(cls, action: str, earlier_actions: Sequence[str]) -> bool:
        """Whether the real next state of ``action``, taken after ``earlier_actions`` (the episode's, oldest
        first), is a function of the task and ``action`` alone: any real step of the same task that took
        ``action`` after actions for which this also holds saw the same next state. A synthetic env with
        ``ground=True`` then reads that next state from its buffer instead of generating it. Default: never
        (envs override it: ALFWorld's ``go to R`` / ``open R`` before any action touches ``R``)."""
        return False

    @classmethod
    def grounding(cls, **options) -> Grounding:
        """A new, empty :class:`~dreamgym.envs.grounding.Grounding` of this env: what a synthetic env imitating
        it with ``ground=True`` reads from the offline record before calling its model. Default: the
        :meth:`path_free` rule over recorded steps of the same task (WebShop overrides it with its pages);
        ``options``: the env's grounding options (the default grounding has none).

        Raises:
            ValueError: options this env's grounding does not take.
        """
        if options:
            raise ValueError(
                f"{cls.__name__}'s grounding takes no options, got {sorted(options)}; remove grounding_options"
            )
        return PathFreeGrounding(cls)

    # ------------------------------------------------ optional interface (trainers)
    def place_model(self, device: torch.device | str) -> TextEnvBase:
        """Put any model the env runs on ``device``; returns ``self``. Default: no-op (no model)."""
        return self

    def health(self) -> dict[str, float]:
        """Cumulative health numbers of a simulated env (RL logs them as ``sim/<key>``). Default: ``{}``."""
        return {}

    @property
    def written_buffer(self):
        """The replay buffer this env adds its transitions to (checkpointed with RL). Default: ``None``."""
        return None

    def make_real_env(self, **kwargs) -> TextEnvBase | None:
        """A new instance of the real env this env imitates (``kwargs`` go to its constructor), to replay
        its episodes in. Default: ``None``, no real counterpart (a real env is its own)."""
        return None

    # ------------------------------------------------------------- public API
    def num_tasks(self, split: str | None = None) -> int:
        """How many tasks ``split`` (default: this env's split) holds."""
        return self._num_tasks(split or self.split)

    def task_ids(self, split: str | None = None) -> list[str] | None:
        """The task ids of ``split`` (default: this env's split) in task-index order; ``None`` if this env
        has no stable task ids."""
        return self._task_ids(split or self.split)

    def task_index_of(self, task_id: str, split: str | None = None) -> int | None:
        """The index of the task with id ``task_id`` in ``split`` (default: this env's split).

        ``None`` if ``split`` has no such task (e.g. a curriculum variation, whose id is new) or the env
        has no stable task ids.
        """
        split = split or self.split
        if split not in self._task_index:
            ids = self.task_ids(split) or []
            self._task_index[split] = {t: i for i, t in reversed(list(enumerate(ids)))}  # first wins
        return self._task_index[split].get(task_id)

    def queue_tasks(self, task_indices: list[int]) -> None:
        """Use these task indices (in order) for the next slots that reset."""
        n = self.num_tasks()
        bad = [t for t in task_indices if not 0 <= int(t) < n]
        if bad:
            raise IndexError(f"task indices {bad[:5]} out of range for split {self.split!r} with {n} tasks")
        self._queued.extend(int(t) for t in task_indices)

    def _next_task(self, requested: int) -> int:
        if requested < -1:
            raise IndexError(
                f"task_index {requested}: give a task index 0..{self.num_tasks() - 1} of split {self.split!r}, "
                "or -1 to draw one"
            )
        if requested >= 0:
            n = self.num_tasks()
            if requested >= n:
                raise IndexError(
                    f"task_index {requested} out of range for split {self.split!r} with {n} tasks"
                )
            return requested
        if self._queued:
            return self._queued.pop(0)
        return int(self._rng.integers(self.num_tasks()))

    # ------------------------------------------------------------ EnvBase hooks
    def _set_seed(self, seed: int | None):
        self._rng = np.random.default_rng(seed)
        return seed

    def close(self, *, raise_if_closed: bool = True):
        """Release the env; a later ``reset`` or ``step`` is an error (make a new env)."""
        self._closed = True
        super().close(raise_if_closed=raise_if_closed)

    def _check_open(self, call: str) -> None:
        if getattr(self, "_closed", False):
            raise RuntimeError(f"{type(self).__name__}.{call}() after close(): make a new env")

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        self._check_open("reset")
        if self.is_real:
            check_real_step(self, "reset")
        n = self.batch_size[0]
        mask = np.ones(n, dtype=bool)
        requested = np.full(n, -1, dtype=np.int64)
        if tensordict is not None:
            if "_reset" in tensordict.keys():
                mask = tensordict.get("_reset").reshape(n).cpu().numpy().astype(bool)
            if "task_index" in tensordict.keys():
                requested = tensordict.get("task_index").reshape(n).cpu().numpy()
        slots = [i for i in range(n) if mask[i] or self._obs[i] is None]
        started = self._start_slots(slots, [self._next_task(int(requested[i])) for i in slots])
        for s, obs in zip(slots, started, strict=True):
            self._obs[s] = obs
            self._steps[s] = 0
            self._step_infos[s] = {}
        td = self._make_td(
            [self._obs[i].observation for i in range(n)],
            [self._obs[i].available_actions for i in range(n)],
            steps=None,
        )
        del td["reward"]  # TorchRL: reset returns no reward
        return td

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._check_open("step")
        if self.is_real:
            check_real_step(self, "step")
        n = self.batch_size[0]
        actions = [printable(str(a)) for a in as_text_list(tensordict.get("action"))]
        if len(actions) != n:
            raise ValueError(
                f"{type(self).__name__} expects {n} actions under key 'action', got {len(actions)}"
            )
        active = list(range(n))
        if "_step" in tensordict.keys():  # TorchRL partial step: only these slots act
            mask = tensordict.get("_step").reshape(n).cpu().numpy().astype(bool)
            active = [i for i in range(n) if mask[i]]
        if any(self._obs[i] is None for i in active):
            raise RuntimeError(
                f"{type(self).__name__}.step() before reset(): call env.reset() first (slots "
                f"{[i for i in active if self._obs[i] is None]} have no episode)"
            )
        acted = (
            dict(zip(active, self._act_slots(active, [actions[i] for i in active]), strict=True))
            if active
            else {}
        )
        results = [
            acted[i] if i in acted else TextStep(self._obs[i].observation, self._obs[i].available_actions)
            for i in range(n)
        ]
        self._steps[active] += 1
        self._step_infos.update({i: r.info for i, r in acted.items()})
        return self._make_td(
            [r.observation for r in results], [r.available_actions for r in results], steps=results
        )

    def _make_td(self, observations, available, steps: list[TextStep] | None) -> TensorDictBase:
        n = self.batch_size[0]
        bs = self.batch_size
        for i, o in enumerate(observations):  # keep the current state for `state()` and subclasses
            self._obs[i] = TextObs(self._obs[i].task_id, self._obs[i].instruction, o, available[i])
        flt = lambda xs: torch.tensor(xs, dtype=torch.float32).reshape(n, 1)  # noqa: E731
        bl = lambda xs: torch.tensor(xs, dtype=torch.bool).reshape(n, 1)  # noqa: E731
        if steps is None:
            steps = [TextStep(o, a) for o, a in zip(observations, available, strict=True)]
            terminated = [False] * n
        else:
            terminated = [s.terminated for s in steps]
        truncated = [(not t) and self._steps[i] >= self.max_steps for i, t in enumerate(terminated)]
        done = [a or b for a, b in zip(terminated, truncated, strict=True)]
        td = TensorDict(
            {
                "instruction": text_stack([o.instruction for o in self._obs], bs),
                "observation": text_stack(list(observations), bs),
                "available_actions": text_stack([list(a) for a in available], bs),
                "task_id": text_stack([o.task_id for o in self._obs], bs),
                "reasoning": text_stack([s.reasoning for s in steps], bs),
                "score": flt([s.score for s in steps]),
                "success": bl([s.success for s in steps]),
                "invalid": bl([s.invalid for s in steps]),
                "sim_error": bl([s.sim_error for s in steps]),
                "step_count": torch.tensor(self._steps.copy(), dtype=torch.int64).reshape(n, 1),
                "reward": flt([s.reward for s in steps]),
                "done": bl(done),
                "terminated": bl(terminated),
                "truncated": bl(truncated),
            },
            batch_size=bs,
            device=self.device,
        )
        return td

    def step_info(self, slot: int) -> dict:
        """Privileged info (:attr:`TextStep.info`) of ``slot``'s last step; ``{}`` after a reset.

        Teachers and scripted experts read it (see :mod:`dreamgym.collect`); subclasses may return more.
        """
        return self._step_infos.get(slot, {})

    def current(self, slot: int) -> TextObs:
        """The current instruction/state/actions of ``slot`` (after at least one reset)."""
        if self._obs[slot] is None:
            raise RuntimeError(f"{type(self).__name__}: slot {slot} has not been reset yet; call env.reset()")
        return self._obs[slot]

"""WebEnv: MiniWoB++ tasks in headless Chromium as a batched TorchRL env with the dreamgym key layout."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dreamgym.envs.base import TextEnvBase, TextObs, TextStep
from dreamgym.envs.web.browser import Browser, find_binaries, miniwob_html_dir
from dreamgym.envs.web.page import (
    Element,
    available_actions,
    check_action,
    ended_state,
    infer_available_actions,
    render_state,
)
from dreamgym.envs.web.tasks import HELD_OUT_TYPES, WebTask, suite_tasks

__all__ = ["WebEnv"]


class WebEnv(TextEnvBase):
    """MiniWoB++ web tasks in a real browser (one headless Chromium per slot), binary outcome reward.

    States are the visible page elements one per line, ``[ref] role: text``; actions are
    ``click[ref]``, ``type[ref][text]`` and ``select[ref][option]`` (:mod:`.page`); an action the state
    does not admit is an invalid no-op. The instruction is the task's utterance. The episode ends when
    the task's own check runs (e.g. on Submit): reward 1 if MiniWoB's raw reward is > 0, else 0; the
    last state is ``[episode over] the task reports success|failure``. Tasks are (task type, seed)
    pairs (:mod:`.tasks`): splits by seed, plus task types held out for the test split.

    Spec tree (``B`` = ``batch_size[0]``; shared with every dreamgym text env)::

        observation_spec: instruction, observation, available_actions, task_id, reasoning  NonTensor (B,)
                          score (B,1) float32 (1/0), success / invalid / sim_error (B,1) bool,
                          step_count (B,1) int64
        action_spec:      action NonTensor (B,)  e.g. "click[3]", "type[2][vina]", "select[1][Bobine]"
        reward_spec:      reward (B,1) float32   1.0 on the step the task reports success, else 0
        done_spec:        done / terminated (the task ended it) / truncated (step limit), each (B,1) bool

    Example (3 steps of ``rollout``; ``click[2]`` focuses the field, ``click[3]`` is the right button)::

        env = WebEnv(batch_size=[1], split="train", task_types=("click-button",))
        env.queue_tasks([0])
        td = env.reset()           # td["instruction"]: 'Click on the "okay" button.'
        # td["observation"]: '[1] text: pulvinar neque, lacinia:\n[2] textbox: ""\n[3] button: okay\n...'
        acts = iter(["type[2][hi]", "click[2]", "click[3]"])
        ro = env.rollout(3, lambda td: td.set("action", [next(acts)]), auto_reset=False, tensordict=td)
        # ro[0, -1]["next", "reward"] == 1.0; ro[0, -1]["next", "observation"]:
        # '[episode over] the task reports success'
        env.close()

    Browsers start lazily (a slot's first reset) and quit with :meth:`close` (or when the env is
    garbage-collected / the interpreter exits).

    Args:
        batch_size: parallel episodes, one Chromium each, e.g. ``[4]``.
        split: "train", "val" or "test".
        max_steps: step limit per episode (truncation).
        seed: seed for sampling tasks when no task index is given.
        train_seeds, val_seeds, test_seeds: seeds per task type in each split.
        task_types: restrict every split to these types (default: the suite, :mod:`.tasks`).
        held_out: the test split also holds the held-out task types (ignored with ``task_types``).
        threads: slots stepped in parallel threads (each browser is its own process); 1 = sequential.
    """

    env_name = "web"

    def __init__(
        self,
        batch_size=(1,),
        split: str = "train",
        max_steps: int = 10,
        seed: int | None = 0,
        train_seeds: int = 40,
        val_seeds: int = 5,
        test_seeds: int = 10,
        task_types: list[str] | tuple[str, ...] | None = None,
        held_out: bool = True,
        threads: int = 2,
    ):
        if threads < 1:
            raise ValueError(f"WebEnv.threads={threads}: give 1 (sequential) or more parallel slots")
        types = tuple(task_types) if task_types is not None else None
        seeds = {"train": train_seeds, "val": val_seeds, "test": test_seeds}
        if split not in seeds:
            raise ValueError(f"WebEnv.split={split!r} is not a web split; use 'train', 'val' or 'test'")
        self.tasks: dict[str, list[WebTask]] = {
            s: suite_tasks(s, n, types, held_out) for s, n in seeds.items()
        }
        find_binaries()  # fail now, naming the apt packages, rather than at the first reset
        self.html_dir = miniwob_html_dir()
        super().__init__(batch_size=batch_size, max_steps=max_steps, split=split, seed=seed)
        n = self.batch_size[0]
        self.threads = threads
        self._browsers: list[Browser | None] = [None] * n
        self._elements: list[list[Element]] = [[] for _ in range(n)]
        self._task: list[WebTask | None] = [None] * n
        self._ended = [False] * n
        self._infos: list[dict[str, Any]] = [{} for _ in range(n)]
        self._pool: ThreadPoolExecutor | None = None
        self._finalizer = weakref.finalize(self, _quit_all, self._browsers)

    # ------------------------------------------------------------------ hooks
    def _num_tasks(self, split: str) -> int:
        return len(self.tasks[split])

    def _task_ids(self, split: str) -> list[str]:
        return [t.task_id for t in self.tasks[split]]

    def task(self, slot: int) -> WebTask:
        """The current task of ``slot``."""
        if self._task[slot] is None:
            raise RuntimeError(f"WebEnv: slot {slot} has not been reset yet; call env.reset()")
        return self._task[slot]

    def _browser(self, slot: int) -> Browser:
        if self._browsers[slot] is None:
            self._browsers[slot] = Browser(self.html_dir)
        return self._browsers[slot]

    def _parallel(self, fn, slots: list[int], args: list) -> list:
        if self.threads == 1 or len(slots) == 1:
            return [fn(s, a) for s, a in zip(slots, args, strict=True)]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=min(self.threads, self.batch_size[0]))
        return list(self._pool.map(fn, slots, args))

    def _start_slots(self, slots: list[int], task_indices: list[int]) -> list[TextObs]:
        return self._parallel(lambda s, t: self._start(s, self.split, t), slots, task_indices)

    def _act_slots(self, slots: list[int], actions: list[str]) -> list[TextStep]:
        return self._parallel(self._act, slots, actions)

    def _start(self, slot: int, split: str, task_index: int) -> TextObs:
        task = self.tasks[split][task_index]
        browser = self._browser(slot)
        instruction = browser.start(task.task_type, task.seed)
        self._task[slot], self._ended[slot] = task, False
        self._elements[slot] = [Element(**e) for e in browser.elements()]
        self._infos[slot] = self._base_info(slot)
        return TextObs(task.task_id, instruction, render_state(self._elements[slot]),
                       available_actions(self._elements[slot]))  # fmt: skip

    def _act(self, slot: int, action: str) -> TextStep:
        before = self._elements[slot]
        checked = check_action(action, before) if not self._ended[slot] else "the episode is over"
        info = self._base_info(slot)
        info.update(action=action, valid=not isinstance(checked, str))
        if isinstance(checked, str):
            info["reason"] = checked
            self._infos[slot] = info
            obs = self.current(slot).observation
            return TextStep(obs, list(self.current(slot).available_actions), invalid=True, info=info)
        verb, ref, arg = checked
        browser = self._browser(slot)
        try:
            {"click": lambda: browser.click(ref), "type": lambda: browser.type(ref, arg),
             "select": lambda: browser.select(ref, arg)}[verb]()  # fmt: skip
        except Exception as exc:  # noqa: BLE001  (selenium: element not interactable / gone)
            info.update(valid=False, reason=f"the browser refused it ({type(exc).__name__})")
            self._infos[slot] = info
            cur = self.current(slot)
            return TextStep(cur.observation, list(cur.available_actions), invalid=True, info=info)
        done, raw = browser.outcome()
        info.update(verb=verb, ref=ref, argument=arg, done=done, raw_reward=raw)
        self._infos[slot] = info
        if done:
            success = raw > 0
            self._ended[slot], self._elements[slot] = True, []
            return TextStep(ended_state(success), [], reward=float(success), score=float(success),
                            terminated=True, success=success, info=info)  # fmt: skip
        self._elements[slot] = [Element(**e) for e in browser.elements()]
        return TextStep(
            render_state(self._elements[slot]), available_actions(self._elements[slot]), info=info
        )

    def _base_info(self, slot: int) -> dict[str, Any]:
        task = self._task[slot]
        return {"task_type": task.task_type, "seed": task.seed, "held_out": task.task_type in HELD_OUT_TYPES}

    def step_info(self, slot: int) -> dict[str, Any]:
        """Privileged info of ``slot``'s last step: task type and seed, the parsed action, whether it was
        valid (and why not), whether the task ended the episode and MiniWoB's raw reward."""
        return self._infos[slot]

    # ----------------------------------------------------------------- rules
    @classmethod
    def is_valid_action(cls, action: str, available_actions) -> bool:
        """Listed exactly, or ``type[ref][text]`` where ``type[ref][<text>]`` is listed."""
        a = action.strip()
        if a in available_actions:
            return True
        if a.startswith("type[") and "][" in a and a.endswith("]"):
            return a[: a.index("][") + 2] + "<text>]" in available_actions
        return False

    @classmethod
    def infer_available_actions(
        cls, instruction: str, state: str, initial_state: str = "", earlier_states: Sequence[str] = ()
    ) -> list[str]:
        """The actions of a rendered web state (:func:`.page.infer_available_actions`); never raises."""
        return infer_available_actions(state)

    # ----------------------------------------------------------------- close
    def close(self, *, raise_if_closed: bool = True):
        """Quit every browser this env started."""
        _quit_all(self._browsers)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        super().close(raise_if_closed=raise_if_closed)


def _quit_all(browsers: list[Browser | None]) -> None:
    for i, b in enumerate(browsers):
        if b is not None:
            b.close()
            browsers[i] = None

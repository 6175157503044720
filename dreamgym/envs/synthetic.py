"""SyntheticEnv: the trained experience model as a TorchRL environment (DreamGym's synthetic world).

It has exactly the specs of the real env it imitates (both build them with
:meth:`TextEnvBase._make_specs`), so a policy or rollout loop cannot tell them apart::

    observation_spec: instruction, observation, available_actions, task_id, reasoning  NonTensor (B,)
                      score (B,1) float32, success / invalid / sim_error (B,1) bool, step_count (B,1) int64
    action_spec:      action NonTensor (B,)
    reward_spec:      reward (B,1) float32
    done_spec:        done / terminated / truncated (B,1) bool

Reset samples a task from the task pool (real *train* instructions with their known initial states,
plus curriculum tasks added with :meth:`add_tasks`). Step:

* an action not in ``available_actions`` is an invalid no-op (same state, reward 0, ``invalid``), as in
  the real env, and the model is not called (``search[<query>]``-style templates accept any
  non-empty argument);
* otherwise the top-k neighbours are retrieved for every acting slot, one batched generation (KV cache)
  writes reasoning + next state + reward, and the output is parsed. ``available_actions`` of the new
  state come from the imitated env's ``infer_available_actions``; the reasoning goes to ``reasoning``;
* an output that does not parse ends the episode in :data:`FAILURE_STATE` with reward 0 and
  ``sim_error`` set, and counts in :attr:`SyntheticEnv.sim_errors`; it never raises;
* ``reward="judge"``: on every step the model ends (WebShop: a purchase), the reward and score come from
  the experience model's reward judge (:mod:`dreamgym.modeling.judge`, saved in its ``judge/`` folder),
  and the reasoning's verdict sentence and the done page's ``[score]`` line are rewritten to agree with
  it; ``reward="generated"`` (default, the paper's pure-text design): the model's own reward;
* ``ground=True``: the step is first put to the imitated env's grounding (:mod:`dreamgym.envs.grounding`,
  built by its :meth:`~dreamgym.envs.base.TextEnvBase.grounding` over the buffer's *real* transitions):
  a step the record answers is read from it (ALFWorld: a path-free ``go to R`` / ``open R`` of the same
  game; WebShop: the results page of the same query, a recorded product's page, an option click) instead
  of calling the model; a WebShop purchase of a recorded product the record has not paid is paid by the
  model (or judge) on the real item page; an ending on an entity the record lacks pays nothing and is
  marked ``sim_error`` (left out of RL's updates), as is an ending the model writes where the real env
  never ends (WebShop: anything but a purchase). What the model writes is then constrained to recorded
  entities (WebShop: every results line a recorded product). ``unrecorded="nearest"`` answers the steps
  the record lacks from the nearest recorded real step (top-1 retrieval) instead of the model: the
  retrieval-only ablation. ``unrecorded="search"`` composes what the env has a rule for from recorded
  entities (:meth:`~dreamgym.envs.grounding.Grounding.compose`; WebShop: the results page of a new query,
  ranked by BM25 over what the record shows of each product) and calls the model for the rest. With ``write_back`` a grounded step is written back as any other
  (``source="synthetic"``); the grounding never reads those.

The model is frozen (``requires_grad_(False)``, eval mode). With ``write_back=True`` every synthetic
transition is added to the replay buffer (``source="synthetic"``).

Standalone use (any TorchRL project)::

    env = SyntheticEnv.from_checkpoint("artifacts/webshop/experience_model", real_env="webshop",
                                       tasks="artifacts/webshop/offline_train.jsonl", batch_size=[4])
    td = env.reset()
    td["action"] = ["search[red shirt]"] * 4
    td = env.step(td)

``SyntheticEnv()`` with no model builds a tiny *untrained* model over a built-in task: a spec-check
and testing convenience only (``make_env("synthetic")`` in the registry test), not a world model.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from dreamgym._imports import resolve
from dreamgym.envs.base import TextEnvBase, TextObs, TextStep
from dreamgym.envs.grounding import Answer
from dreamgym.envs.registry import env_factory, imitable_envs
from dreamgym.modeling.experience import ExperienceModel, ExperienceQuery
from dreamgym.modeling.formats import FAILURE_STATE, ExperienceFormat, ParsedOutcome
from dreamgym.modeling.judge import check_reward_mode
from dreamgym.schema import Transition, is_success, read_trajectories

__all__ = ["SyntheticEnv", "SyntheticTask", "tasks_from_trajectories", "UNRECORDED_MODES"]

UNRECORDED_MODES = ("model", "nearest", "search")


@dataclass
class SyntheticTask:
    """A task of the synthetic env: an instruction and the real initial state it starts from."""

    task_id: str
    instruction: str
    initial_state: str
    available_actions: list[str]


def tasks_from_trajectories(paths: Sequence[str | os.PathLike], split: str = "train") -> list[SyntheticTask]:
    """One task per distinct task id of the trajectory files (first step's state), ``split`` tasks only."""
    seen: dict[str, SyntheticTask] = {}
    for p in paths:
        for traj in read_trajectories(p):
            if traj.split != split or traj.task_id in seen or not traj.transitions:
                continue
            first = traj.transitions[0]
            seen[traj.task_id] = SyntheticTask(
                traj.task_id, traj.instruction, first.state, list(first.available_actions)
            )
    return list(seen.values())


def _real_env_class(name: str):
    """The imitated env's class: a registered imitable env's (:func:`imitable_envs`), or ``module:Class``."""
    if name in imitable_envs():
        return env_factory(name)
    if ":" not in name:
        raise ValueError(f"real_env={name!r} is unknown; use one of {imitable_envs()} or 'module:Class'")
    return resolve(name)


class SyntheticEnv(TextEnvBase):
    """The experience model as an env (see module docstring).

    Args:
        experience: the experience model (None: a tiny untrained one, for spec checks and tests only).
        tasks: the task pool (default: one built-in WebShop-like task, for spec checks).
        real_env: the imitated env: a registered imitable env ("webshop", "alfworld", "web":
            :func:`~dreamgym.envs.registry.imitable_envs`) or "module:Class"; gives the action rule.
        batch_size: parallel episodes.
        max_steps: step limit per episode (truncation), as in the real env.
        seed: seed for task sampling.
        write_back: add every synthetic transition to the experience model's replay buffer.
        model_device: device of the experience model (e.g. ``"cuda:1"``); None: the trainer's (see
            :meth:`place_model`). The env's own tensors (observations, rewards) stay on the CPU.
        reward: where the reward of a step the model ends comes from: ``"generated"`` (the model's own
            text) or ``"judge"`` (the experience model's reward judge; see the module docstring).
        ground: answer steps from the record first, and constrain what the model writes to recorded
            entities (module docstring; needs the experience model's buffer).
        unrecorded: with ``ground``, what answers a step the record cannot: ``"model"`` (the experience
            model), ``"nearest"`` (the nearest recorded real step: the retrieval-only ablation) or
            ``"search"`` (the env's rule over recorded entities where it has one, WebShop's results pages
            ranked by a search over the record's products; the model for the rest).
        record: with ``ground``, trajectory files of more real episodes the grounding reads beside the
            buffer's (e.g. the reward judge's train purchases: item, description and features pages of
            products the buffer lacks); retrieval still searches the buffer only.
        grounding_options: with ``ground``, the imitated env's grounding options
            (:meth:`~dreamgym.envs.base.TextEnvBase.grounding`; WebShop: ``{search_attributes: false}``).
    """

    env_name = "synthetic"
    is_real = False

    def __init__(
        self,
        experience: ExperienceModel | None = None,
        tasks: Sequence[SyntheticTask] | None = None,
        real_env: str = "webshop",
        batch_size=(1,),
        max_steps: int = 15,
        seed: int | None = 0,
        write_back: bool = False,
        model_device: str | None = None,
        reward: str = "generated",
        ground: bool = False,
        unrecorded: str = "model",
        record: Sequence[str | os.PathLike] = (),
        grounding_options: dict | None = None,
    ):
        if unrecorded not in UNRECORDED_MODES:
            raise ValueError(f"SyntheticEnv.unrecorded={unrecorded!r}; use one of {UNRECORDED_MODES}")
        super().__init__(batch_size=batch_size, max_steps=max_steps, split="train", seed=seed)
        self.reward = check_reward_mode(reward, "SyntheticEnv.reward")
        self.model_device = model_device
        self.real_env = real_env
        self._real_cls = _real_env_class(real_env)
        self.experience = experience if experience is not None else _tiny_untrained_experience()
        if reward == "judge" and getattr(self.experience, "judge", None) is None:
            raise ValueError(
                "SyntheticEnv.reward='judge': the experience model has no reward judge (no `judge/` folder in its "
                "export); train one with `python -m dreamgym fit --config configs/webshop_reward_judge.yaml`, "
                "or set reward='generated'"
            )
        if model_device is not None:
            self.experience.to(model_device)
        self.tasks: list[SyntheticTask] = list(tasks) if tasks else [_DEFAULT_TASK]
        self.write_back = write_back
        self.ground = bool(ground)
        self.unrecorded = unrecorded
        if self.ground and getattr(self.experience, "buffer", None) is None:
            raise ValueError(
                "SyntheticEnv.ground=True reads the record from the experience model's replay buffer, and this "
                "model has none; export it with its buffer/ (ExperienceSFT does) or set ground=False"
            )
        if record and not self.ground:
            raise ValueError(
                f"SyntheticEnv.record={list(map(str, record))}: the record's extra files are read by the grounding; "
                "set ground=True or leave record empty"
            )
        if grounding_options and not self.ground:
            raise ValueError(
                f"SyntheticEnv.grounding_options={grounding_options}: the grounding's options need ground=True"
            )
        self._grounding = self._real_cls.grounding(**(grounding_options or {})) if self.ground else None
        if self._grounding is not None and record:  # the buffer first (indexing it resets), then the files
            self._grounding.sync(self.experience.buffer).add_files(list(record))
        self.grounded = 0  # steps read (or composed) from the record instead of the model
        self.valid_steps = 0  # valid actions simulated (the denominator of ``record_share``)
        self.model_paid = 0  # endings whose next state the record gave and whose reward the model said
        self.void_endings = 0  # endings on an entity the record lacks: paid nothing, marked sim_error
        self.projected = 0  # written entities (WebShop: results lines) replaced or dropped by the grounding
        self.sim_errors = 0
        self.cuts = 0  # outputs whose reasoning/state structured decoding closed at the budget
        self.model_calls = 0
        self.last_error = ""
        n = self.batch_size[0]
        self._task: list[SyntheticTask | None] = [None] * n
        self._history: list[list[str]] = [[] for _ in range(n)]
        self._states: list[list[str]] = [[] for _ in range(n)]  # the episode's states so far, s_0 first
        self._episode_ids = [""] * n
        self._episodes = 0

    # ------------------------------------------------------------ construction
    @classmethod
    def from_checkpoint(
        cls,
        path: str | os.PathLike,
        real_env: str = "webshop",
        tasks: Sequence[SyntheticTask] | str | os.PathLike | Sequence[str] | None = None,
        buffer: str | os.PathLike | None = None,
        batch_size=(1,),
        max_steps: int = 15,
        seed: int | None = 0,
        write_back: bool = False,
        model_device: str | None = None,
        reward: str = "generated",
        ground: bool = False,
        unrecorded: str = "model",
        record: Sequence[str | os.PathLike] = (),
        grounding_options: dict | None = None,
        **experience_kwargs,
    ) -> SyntheticEnv:
        """Build from a saved experience-model directory (HF model + tokenizer + format + ``buffer/``).

        Args:
            path: the exported directory (``ExperienceSFT`` writes it at the end of fit).
            real_env: imitated env name.
            tasks: task list, or trajectory JSONL file(s) whose train tasks form the pool
                (default: the train tasks of the buffer's transitions).
            buffer: replay-buffer directory (default ``<path>/buffer``).
            batch_size, max_steps, seed, write_back, model_device, reward, ground, unrecorded, record,
                grounding_options: as in the constructor
                (``reward="judge"`` needs the export's ``judge/`` folder).
            **experience_kwargs: generation options of :class:`ExperienceModel` (``max_new_tokens``,
                ``batch_size``, ``do_sample``, ``temperature``, ``decoding``, ``think_budget``,
                ``cache_implementation``). The generation ``batch_size`` defaults to the env's slots: one
                batched generation per step.
        """
        check_reward_mode(reward, "SyntheticEnv.from_checkpoint(reward=...)")
        slots = batch_size if isinstance(batch_size, int) else int(torch.Size(batch_size)[0])
        experience_kwargs.setdefault("batch_size", slots)
        em = ExperienceModel.from_pretrained(path, buffer=buffer, **experience_kwargs)
        if tasks is None:
            if em.buffer is None:
                raise ValueError(
                    f"{str(path)!r} has no buffer/ to take tasks from; pass `tasks` (a JSONL file)"
                )
            pool = _tasks_from_transitions(em.buffer.transitions)
        elif isinstance(tasks, (str, os.PathLike)):
            pool = tasks_from_trajectories([tasks])
        elif tasks and isinstance(tasks[0], (str, os.PathLike)):
            pool = tasks_from_trajectories(list(tasks))  # type: ignore[arg-type]
        else:
            pool = list(tasks)  # type: ignore[arg-type]
        if not pool:
            raise ValueError(
                "SyntheticEnv.from_checkpoint: the task pool is empty; give train trajectories as `tasks`"
            )
        return cls(
            em,
            pool,
            real_env,
            batch_size,
            max_steps,
            seed,
            write_back,
            model_device,
            reward,
            ground,
            unrecorded,
            record,
            grounding_options,
        )

    def place_model(self, device: torch.device | str) -> SyntheticEnv:
        """(:class:`TextEnvBase` interface) Put the experience model on ``device`` unless ``model_device``
        is configured (then it stays there); a no-op when it is already in place. Returns ``self``.
        (TorchRL's ``EnvBase.to`` moves the env's specs and outputs instead, which stay on the CPU here.)"""
        if self.model_device is None:
            self.experience.to(device)
        return self

    def make_real_env(self, **kwargs) -> TextEnvBase:
        """(:class:`TextEnvBase` interface) A new instance of the imitated real env on the split of the
        task pool ("train"), with one slot and this env's ``max_steps``; ``kwargs`` go to its constructor
        (e.g. WebShop's ``data_dir``).

        Pool tasks taken from real trajectories keep their real task ids, so
        ``make_real_env().task_index_of(task.task_id)`` finds them; curriculum variations are not found.
        """
        return self._real_cls(batch_size=[1], split="train", max_steps=self.max_steps, **kwargs)

    def add_tasks(self, tasks: Sequence[SyntheticTask]) -> None:
        """Add (curriculum) tasks to the pool; they can be sampled by the next resets."""
        self.tasks.extend(tasks)

    def vary_tasks(self, task_indices: list[int], n: int) -> list[int]:
        """The curriculum's task generator (:class:`dreamgym.curriculum.VariableTaskPool`): ``n``
        variations of each task's instruction written by the experience model
        (:meth:`~dreamgym.modeling.experience.ExperienceModel.vary_task`), each a copy of its seed task
        (same initial state and action types) with the new instruction; unusable ones are dropped.
        Returns the indices of the added tasks."""
        records = [self.tasks[i] for i in task_indices for _ in range(n)]
        texts = self.experience.vary_task([r.instruction for r in records])
        start = len(self.tasks)
        new = [
            dataclasses.replace(r, task_id=f"{r.task_id}-var{start + j}", instruction=t.strip())
            for j, (r, t) in enumerate(zip(records, texts, strict=True))
            if t and t.strip()
        ]
        self.add_tasks(new)
        return list(range(start, start + len(new)))

    # ------------------------------------------------------------ TextEnvBase hooks
    def _num_tasks(self, split: str) -> int:
        return len(self.tasks)

    def _start(self, slot: int, split: str, task_index: int) -> TextObs:
        task = self.tasks[task_index]
        self._task[slot] = task
        self._history[slot] = []
        self._states[slot] = [task.initial_state]
        self._episodes += 1
        self._episode_ids[slot] = f"synthetic-{id(self):x}-{self._episodes}"
        acts = task.available_actions or self._infer(task, task.initial_state, [])
        return TextObs(task.task_id, task.instruction, task.initial_state, list(acts))

    def _infer(self, task: SyntheticTask, state: str, earlier_states: list[str]) -> list[str]:
        """The real env's rule for ``state``'s actions, given the episode's earlier states."""
        try:
            return list(
                self._real_cls.infer_available_actions(
                    task.instruction, state, task.initial_state, earlier_states
                )
            )
        except Exception:  # noqa: BLE001 - a model-written state must never crash the env
            return []

    def _act(self, slot: int, action: str) -> TextStep:
        return self._act_slots([slot], [action])[0]

    def _act_slots(self, slots: list[int], actions: list[str]) -> list[TextStep]:
        out: dict[int, TextStep] = {}
        calls: list[tuple[int, str, Answer | None]] = []  # the steps the model (or nearest step) answers
        for slot, action in zip(slots, actions, strict=True):
            cur = self.current(slot)
            if not self._real_cls.is_valid_action(action, cur.available_actions):
                # invalid action: a no-op, like the real env, without calling the model
                out[slot] = TextStep(cur.observation, list(cur.available_actions), invalid=True)
                continue
            self.valid_steps += 1
            ans = self._answer(slot, action)
            if ans is not None and ans.kind in ("read", "composed"):
                out[slot] = self._replayed(slot, action, ans)
            elif ans is not None and ans.kind == "void":
                out[slot] = self._void(slot, action, ans)
            else:
                calls.append((slot, action, ans))
        if calls and self.ground and self.unrecorded == "nearest":
            for (slot, action, ans), pred in zip(calls, self._nearest(calls), strict=True):
                out[slot] = self._outcome(slot, action, None, pred, ans)
        elif calls:
            queries = [
                ExperienceQuery(
                    self._task[s].instruction,
                    list(self._history[s]),
                    self.current(s).observation,
                    a,
                    exclude_id=self._episode_ids[s],
                    task_id=self._task[s].task_id,
                )
                for s, a, _ in calls
            ]
            self.model_calls += len(queries)
            for (slot, action, ans), q, pred in zip(
                calls, queries, self._predict(queries, calls), strict=True
            ):
                out[slot] = self._outcome(slot, action, q, pred, ans)
        return [out[s] for s in slots]

    def _predict(self, queries: list[ExperienceQuery], calls: list[tuple[int, str, Answer | None]]) -> list:
        """The model's outcomes of ``queries`` (None where generation failed). A step the grounding says
        ends (an ``Answer`` of kind ``"reward"``) is an ending whatever the model wrote, so the judge, if
        it pays, judges it."""
        try:
            if not any(ans is not None for _, _, ans in calls):
                if self.reward == "judge":
                    return self.experience.predict(queries, reward="judge")
                return self.experience.predict(queries)  # any object with `predict(queries)` will do
            preds = [
                dataclasses.replace(p, done=True) if ans is not None and p is not None and p.ok else p
                for p, (_, _, ans) in zip(self.experience.predict(queries), calls, strict=True)
            ]
            return self.experience.judge_outcomes(queries, preds) if self.reward == "judge" else preds
        except Exception as e:  # noqa: BLE001 - generation failure is a sim error, never a crash
            self.last_error = f"{type(e).__name__}: {e}"
            return [None] * len(queries)

    def _answer(self, slot: int, action: str) -> Answer | None:
        """With ``ground``: the record's answer to this slot's ``action`` (:mod:`dreamgym.envs.grounding`),
        else, with ``unrecorded="search"``, the step composed from recorded entities where the env has a rule."""
        if self._grounding is None:
            return None
        self._grounding.sync(self.experience.buffer)
        ans = self._grounding.answer(
            self._task[slot].task_id, self._states[slot], self._history[slot], action
        )
        if ans is None and self.unrecorded == "search":
            ans = self._grounding.compose(self._states[slot], action)
        return ans

    def _replayed(self, slot: int, action: str, ans: Answer) -> TextStep:
        """The record's answer ``ans`` as this slot's step (no model call; written back as any step)."""
        state = self.current(slot).observation
        self._history[slot].append(action)
        self.grounded += 1
        step = TextStep(
            ans.next_state,
            self._infer(self._task[slot], ans.next_state, self._states[slot]),
            reward=float(ans.reward),
            score=float(ans.score),
            terminated=bool(ans.done),
            success=is_success(float(ans.reward), ans.done),
        )
        self._states[slot].append(ans.next_state)
        self._write_back(slot, state, action, step)
        return step

    def _void(self, slot: int, action: str, ans: Answer) -> TextStep:
        """An ending on an entity the record lacks, or one the real env never shows at this step: pays nothing,
        ends, ``sim_error`` (never written back)."""
        self._history[slot].append(action)
        self._states[slot].append(ans.next_state)
        self.void_endings += 1
        return TextStep(
            ans.next_state,
            [],
            terminated=True,
            sim_error=True,
            info={"error": "ending on an unrecorded entity"},
        )

    def _nearest(self, calls: list[tuple[int, str, Answer | None]]) -> list[ParsedOutcome | None]:
        """``unrecorded="nearest"``: each call's outcome read from its nearest recorded real step (top-1
        among real transitions of one batched retrieval); None where none was found."""
        states = [self.current(slot).observation for slot, _, _ in calls]
        hits = self.experience.buffer.search(states, [a for _, a, _ in calls], k=16, exclude="none")
        out: list[ParsedOutcome | None] = []
        for row in hits:
            real = next((t for t in row if t.source != "synthetic"), None)
            out.append(
                None
                if real is None
                else ParsedOutcome(
                    True, real.next_state, float(real.reward), bool(real.done), float(real.score)
                )
            )
        return out

    def _outcome(
        self, slot: int, action: str, q: ExperienceQuery | None, pred, ans: Answer | None = None
    ) -> TextStep:
        states = list(self._states[slot])
        if pred is not None and pred.ok and ans is None and self._grounding is not None and pred.done:
            if self._grounding.can_end(states, action) is False:  # an ending the real env never shows
                return self._void(slot, action, Answer("void", pred.next_state, done=True))
        self._history[slot].append(action)
        if pred is None or not pred.ok:
            self.sim_errors += 1
            return TextStep(
                FAILURE_STATE,
                [],
                reward=0.0,
                terminated=True,
                sim_error=True,
                info={"error": getattr(pred, "error", "generation failed")},
            )
        task = self._task[slot]
        reward, score, done, next_state = (
            float(pred.reward),
            float(pred.score),
            bool(pred.done),
            pred.next_state,
        )
        if ans is not None:  # the record gave the next state and the end; the model said the reward
            self.model_paid += 1
            next_state, done = self._grounding.with_score(ans.next_state, score), True
        elif self._grounding is not None:
            next_state, changed = self._grounding.constrain(states, action, next_state)
            self.projected += changed
        self.cuts += bool(pred.cut)
        step = TextStep(
            next_state,
            self._infer(task, next_state, self._states[slot]),
            reward=reward,
            score=score,
            terminated=done,
            success=is_success(reward, done),
            reasoning=pred.reasoning,
        )
        self._states[slot].append(next_state)
        if not pred.cut:  # cut: not worth keeping
            self._write_back(slot, q.state if q is not None else states[-1], action, step)
        return step

    def _write_back(self, slot: int, state: str, action: str, step: TextStep) -> None:
        """With ``write_back``: add this slot's step (``state`` --``action``--> ``step``) to the buffer as a
        synthetic transition of its episode."""
        if not self.write_back or self.experience.buffer is None:
            return
        task = self._task[slot]
        self.experience.buffer.add(
            [
                Transition(
                    task_id=task.task_id,
                    instruction=task.instruction,
                    step=len(self._history[slot]) - 1,
                    state=state,
                    action=action,
                    next_state=step.observation,
                    reward=step.reward,
                    done=step.terminated,
                    success=step.success,
                    source="synthetic",
                    env=self.real_env,
                    split="train",
                    reasoning=step.reasoning,
                    score=step.score,
                    terminated=step.terminated,
                    trajectory_id=self._episode_ids[slot],
                )
            ]
        )

    @property
    def written_buffer(self):
        """(:class:`TextEnvBase` interface) The replay buffer this env writes its transitions back to
        (None without ``write_back``)."""
        return self.experience.buffer if self.write_back else None

    def health(self) -> dict[str, float]:
        """(:class:`TextEnvBase` interface) Cumulative ``sim_error_rate``, ``cut_rate`` and, with ``ground``:
        ``grounded_steps`` (steps read or composed from the record instead of the model), ``record_share``
        (their share of the valid steps), ``model_paid`` (endings on recorded pages the model paid),
        ``void_endings`` (endings on entities the record lacks, paid nothing) and ``projected_entities``
        (written entities the grounding replaced or dropped); logged as ``sim/...`` during RL."""
        out = {"sim_error_rate": self.sim_error_rate, "cut_rate": self.cut_rate}
        if not self.ground:
            return out
        return {
            **out,
            "grounded_steps": float(self.grounded),
            "record_share": self.grounded / max(self.valid_steps, 1),
            "model_paid": float(self.model_paid),
            "void_endings": float(self.void_endings),
            "projected_entities": float(self.projected),
        }

    @property
    def cut_rate(self) -> float:
        """Share of model calls whose reasoning or state structured decoding closed at the token budget."""
        return self.cuts / max(self.model_calls, 1)

    @property
    def sim_error_rate(self) -> float:
        """Share of model calls whose output did not parse."""
        return self.sim_errors / max(self.model_calls, 1)


def _tasks_from_transitions(transitions: Sequence[Transition]) -> list[SyntheticTask]:
    seen: dict[str, SyntheticTask] = {}
    for t in transitions:
        if t.step == 0 and t.split == "train" and t.source != "synthetic" and t.task_id not in seen:
            seen[t.task_id] = SyntheticTask(t.task_id, t.instruction, t.state, list(t.available_actions))
    return list(seen.values())


_DEFAULT_TASK = SyntheticTask(
    "synthetic-default-0",
    "i need a red cotton t-shirt in size large, and price lower than 30.00 dollars",
    "[page] search\n[search box]",
    ["search[<query>]"],
)


def _tiny_untrained_experience() -> ExperienceModel:
    """A tiny *untrained* experience model (spec checks and tests only; its outputs are noise)."""
    from dreamgym.modeling.factory import build_model
    from dreamgym.modeling.tokenizer import train_tokenizer
    from dreamgym.modeling.tokenizer_cli import FORMAT_SNIPPETS

    corpus = list(FORMAT_SNIPPETS) * 20 + [_DEFAULT_TASK.instruction, _DEFAULT_TASK.initial_state] * 20
    tok = train_tokenizer(corpus, vocab_size=300)
    model = build_model("tiny", tok, max_positions=1024)
    return ExperienceModel(
        model, tok, ExperienceFormat(k=0), buffer=None, max_new_tokens=16, batch_size=8, decoding="free"
    )

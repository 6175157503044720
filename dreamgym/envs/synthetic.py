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
* ``ground=True``: a step whose real next state depends on the task and action alone (the imitated env's
  ``path_free``: ALFWorld's ``go to R`` / ``open R`` before the episode touched ``R``) and for which the
  buffer holds such a real step of the same task reads that step's next state, reward and end instead of
  calling the model (what a place holds is per game; the model wrote objects the game does not have:
  docs/alfworld.md). With ``write_back`` such a step is written back as any other (``source="synthetic"``).

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
from dreamgym.envs.registry import env_factory, imitable_envs
from dreamgym.modeling.experience import ExperienceModel, ExperienceQuery
from dreamgym.modeling.formats import FAILURE_STATE, ExperienceFormat
from dreamgym.modeling.judge import check_reward_mode
from dreamgym.schema import Transition, is_success, read_trajectories

__all__ = ["SyntheticEnv", "SyntheticTask", "tasks_from_trajectories"]


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
        ground: read path-free steps from the buffer's real steps of the same task (module docstring).
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
    ):
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
        self.grounded = 0  # steps read from a recorded real step instead of the model
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
        **experience_kwargs,
    ) -> SyntheticEnv:
        """Build from a saved experience-model directory (HF model + tokenizer + format + ``buffer/``).

        Args:
            path: the exported directory (``ExperienceSFT`` writes it at the end of fit).
            real_env: imitated env name.
            tasks: task list, or trajectory JSONL file(s) whose train tasks form the pool
                (default: the train tasks of the buffer's transitions).
            buffer: replay-buffer directory (default ``<path>/buffer``).
            batch_size, max_steps, seed, write_back, model_device, reward, ground: as in the constructor
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
        return cls(em, pool, real_env, batch_size, max_steps, seed, write_back, model_device, reward, ground)

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
        calls: list[tuple[int, str]] = []
        for slot, action in zip(slots, actions, strict=True):
            cur = self.current(slot)
            if not self._real_cls.is_valid_action(action, cur.available_actions):
                # invalid action: a no-op, like the real env, without calling the model
                out[slot] = TextStep(cur.observation, list(cur.available_actions), invalid=True)
            elif (real := self._recorded(slot, action)) is not None:
                out[slot] = self._replayed(slot, action, real)
            else:
                calls.append((slot, action))
        if calls:
            queries = [
                ExperienceQuery(
                    self._task[s].instruction,
                    list(self._history[s]),
                    self.current(s).observation,
                    a,
                    exclude_id=self._episode_ids[s],
                    task_id=self._task[s].task_id,
                )
                for s, a in calls
            ]
            self.model_calls += len(queries)
            try:
                if self.reward == "judge":
                    preds = self.experience.predict(queries, reward="judge")
                else:  # any object with the plain `predict(queries)` is an experience model
                    preds = self.experience.predict(queries)
            except Exception as e:  # noqa: BLE001 - generation failure is a sim error, never a crash
                preds = [None] * len(queries)
                self.last_error = f"{type(e).__name__}: {e}"
            for (slot, action), q, pred in zip(calls, queries, preds, strict=True):
                out[slot] = self._outcome(slot, action, q, pred)
        return [out[s] for s in slots]

    def _recorded(self, slot: int, action: str) -> Transition | None:
        """With ``ground``: a real step of this slot's task that took ``action`` on a path-free footing, when
        ``action`` is path-free here too (the imitated env's ``path_free``); else None."""
        buf = self.experience.buffer
        if not self.ground or buf is None or not self._real_cls.path_free(action, self._history[slot]):
            return None
        steps = buf.same_steps(self._task[slot].task_id, action)
        return next((t for t in steps if self._real_cls.path_free(action, buf.earlier_actions(t))), None)

    def _replayed(self, slot: int, action: str, real: Transition) -> TextStep:
        """The step ``real`` recorded, as this slot's step (no model call; written back as any step)."""
        state = self.current(slot).observation
        self._history[slot].append(action)
        self.grounded += 1
        step = TextStep(
            real.next_state,
            self._infer(self._task[slot], real.next_state, self._states[slot]),
            reward=float(real.reward),
            score=float(real.score),
            terminated=bool(real.done),
            success=is_success(float(real.reward), real.done),
        )
        self._states[slot].append(real.next_state)
        self._write_back(slot, state, action, step)
        return step

    def _outcome(self, slot: int, action: str, q: ExperienceQuery, pred) -> TextStep:
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
        reward = float(pred.reward)
        self.cuts += bool(pred.cut)
        step = TextStep(
            pred.next_state,
            self._infer(task, pred.next_state, self._states[slot]),
            reward=reward,
            score=float(pred.score),
            terminated=bool(pred.done),
            success=is_success(reward, pred.done),
            reasoning=pred.reasoning,
        )
        self._states[slot].append(pred.next_state)
        if not pred.cut:  # cut: not worth keeping
            self._write_back(slot, q.state, action, step)
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
        """(:class:`TextEnvBase` interface) Cumulative ``sim_error_rate``, ``cut_rate`` and, with ``ground``,
        ``grounded_steps`` (steps read from a recorded real step; logged as ``sim/...`` during RL)."""
        out = {"sim_error_rate": self.sim_error_rate, "cut_rate": self.cut_rate}
        return {**out, "grounded_steps": float(self.grounded)} if self.ground else out

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

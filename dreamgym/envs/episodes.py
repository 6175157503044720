"""THE episode loop: play episodes of any :class:`~dreamgym.envs.base.TextEnvBase` with any actor.

Offline collection (scripted agents, :mod:`dreamgym.collect`), policy evaluation, RL rollouts
(:class:`dreamgym.rl.collector.RolloutCollector`) and replays of recorded actions
(:func:`dreamgym.envs.replay.replay_actions`) all run :func:`run_episodes`; they differ only in the
actor that chooses the actions and in what they keep of each step.

Every env slot holds one episode. More episodes than slots run in waves: the next ``batch_size``
episodes start (TorchRL partial reset, ``_reset``) when the whole wave has ended, so the actions of
one actor call are at similar turns (all searches, then all clicks: a policy's batched generation
decodes about as long as its longest action). Slots with nothing to do are skipped with TorchRL
partial steps (``_step``), so every env step taken is an episode's step.

An actor is ``act(slots, episodes) -> actions``: the active slots and their running episodes (whose
``states[-1]`` / ``available[-1]`` are the current state), one action string each. An actor that keeps
something of each action (the policy: its prompt and reply token ids) records it on the episode with
:meth:`Episode.record_generated`, so it travels with the step it belongs to. ``on_step(slot,
episode)`` runs after each recorded step while ``env.step_info(slot)`` still describes it (a teacher
writes its rationale there, so no episode is replayed for it).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from tensordict import TensorDict

from dreamgym.envs.base import as_text_list, text_stack
from dreamgym.schema import Trajectory, Transition

__all__ = ["Episode", "Actor", "run_episodes", "episode_metrics", "trajectory_metrics"]


@dataclass
class Episode:
    """One episode as the loop records it (finished, or cut by the transition budget)."""

    episode_id: int
    task_index: int
    group_id: int
    task_id: str = ""
    instruction: str = ""
    states: list[str] = field(default_factory=list)  # s_0 .. s_T
    actions: list[str] = field(default_factory=list)
    available: list[list[str]] = field(default_factory=list)  # actions listed in s_0 .. s_T
    rewards: list[float] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    invalid: list[bool] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)  # filled by an ``on_step`` hook, e.g. a teacher
    labels: list[str] = field(default_factory=list)  # an expert's action per state (DAgger), see Transition
    generated: list[Any] = field(default_factory=list)  # per action, what the actor generated for it
    # (the policy: :class:`dreamgym.rl.collector.Generated`), in step order; see record_generated
    success: bool = False
    score: float = 0.0
    terminated: bool = False
    truncated: bool = False
    sim_error: bool = False  # a step failed to simulate (experience-model parse failure, server failure)

    @property
    def reward(self) -> float:
        return float(sum(self.rewards))

    def record_generated(self, item: Any) -> None:
        """Record what the actor generated for the action it is choosing now (turn ``len(actions)``).

        Called by an actor inside ``act``, once per episode per call, so ``generated[t]`` belongs to
        ``actions[t]``.

        Raises:
            RuntimeError: if this turn already has a record (an actor called it twice in one turn).
        """
        if len(self.generated) != len(self.actions):
            raise RuntimeError(
                f"Episode {self.episode_id}: turn {len(self.actions)} already has a generated record "
                f"({len(self.generated)} records for {len(self.actions)} actions); record once per act call"
            )
        self.generated.append(item)

    def transition(
        self, i: int, env: str, split: str, source: str, trajectory_id: str | None = None
    ) -> Transition:
        """Step ``i`` as a schema :class:`~dreamgym.schema.Transition` (the last step carries the
        episode's success, terminated and truncated flags)."""
        last = i == len(self.actions) - 1
        return Transition(
            task_id=self.task_id, instruction=self.instruction, step=i, state=self.states[i],
            action=self.actions[i], next_state=self.states[i + 1], reward=float(self.rewards[i]),
            done=last, success=self.success and last, source=source, env=env, split=split,
            available_actions=list(self.available[i]), score=float(self.scores[i]),
            invalid=bool(self.invalid[i]), terminated=self.terminated and last,
            truncated=self.truncated and last, trajectory_id=trajectory_id,
            reasoning=self.reasoning[i] if i < len(self.reasoning) else None,
            expert_action=self.labels[i] if i < len(self.labels) else None,
        )  # fmt: skip

    def to_trajectory(
        self, env: str, split: str, source: str, policy: str = "policy", trajectory_id: str | None = None
    ) -> Trajectory:
        """This episode as a schema :class:`~dreamgym.schema.Trajectory` (a random id unless given)."""
        import uuid

        tid = trajectory_id or f"{source}-{uuid.uuid4().hex[:12]}"
        steps = [self.transition(i, env, split, source, tid) for i in range(len(self.actions))]
        return Trajectory(
            tid, self.task_id, self.instruction, env, split, source, policy, steps, self.success, self.score
        )


Actor = Callable[[list[int], list[Episode]], list[str]]
"""``act(slots, episodes) -> actions``: one action per active slot (see the module docstring)."""


def run_episodes(
    env,
    act: Actor,
    task_indices: Sequence[int],
    group_size: int = 1,
    max_transitions: int | None = None,
    on_step: Callable[[int, Episode], None] | None = None,
    on_end: Callable[[Episode], None] | None = None,
    progress: Callable[[int], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> tuple[list[Episode], int]:
    """Play ``group_size`` episodes of each task; those of ``task_indices[g]`` form group ``g``.

    Args:
        env: a ``TextEnvBase`` of any batch size (tasks of ``env.split``).
        act: the actor (see the module docstring).
        task_indices: tasks to run; episode ``g * group_size + k`` is the ``k``-th of task ``g``.
        group_size: episodes per task.
        max_transitions: hard cap on env steps; episodes still running when it is reached are cut
            (their ``truncated`` is set), episodes not yet started are dropped. ``None``: no cap.
        on_step: called with ``(slot, episode)`` after each step is recorded.
        on_end: called with each episode when it ends (in the order they end).
        progress: called after every env step with the number of episodes ended so far.
        stop: asked before every env step (e.g. "is the wall-clock budget spent?"); once it answers
            ``True`` the running episodes are cut and the rest dropped, as when ``max_transitions`` is
            reached. ``None``: never.

    Returns:
        The episodes that took at least one step, ordered by ``episode_id``, and the env steps taken.
    """
    todo = deque(
        Episode(episode_id=g * group_size + k, task_index=int(t), group_id=g)
        for g, t in enumerate(task_indices)
        for k in range(group_size)
    )
    n = env.batch_size[0]
    slot_ep: list[Episode | None] = [None] * n
    finished: list[Episode] = []

    def end(ep: Episode) -> None:
        finished.append(ep)
        if on_end is not None:
            on_end(ep)

    _start_wave(env, slot_ep, todo)
    transitions = 0
    while any(e is not None for e in slot_ep):
        active = [i for i, e in enumerate(slot_ep) if e is not None]
        over = max_transitions is not None and transitions + len(active) > max_transitions
        if over or (stop is not None and stop()):
            for i in active:  # budget reached: cut the running episodes
                ep = slot_ep[i]
                if ep.actions:  # one cut before its first step is no episode
                    ep.truncated = True
                    end(ep)
                slot_ep[i] = None
            break
        chosen = act(active, [slot_ep[i] for i in active])
        actions = [""] * n
        for i, a in zip(active, chosen, strict=True):
            actions[i] = a
        mask = torch.zeros(n, 1, dtype=torch.bool, device=env.device)
        mask[active] = True
        td = TensorDict(
            {"action": text_stack(actions, env.batch_size), "_step": mask}, batch_size=env.batch_size
        )
        nxt = env.step(td)["next"]
        transitions += len(active)
        for i in _record(nxt, active, slot_ep, actions, on_step):
            end(slot_ep[i])
            slot_ep[i] = None
        if progress is not None:
            progress(len(finished))
        if todo and all(e is None for e in slot_ep):  # the wave has ended: start the next one
            _start_wave(env, slot_ep, todo, current=nxt)
    finished.sort(key=lambda e: e.episode_id)
    return finished, transitions


def _start_wave(env, slot_ep: list[Episode | None], todo: deque, current=None) -> None:
    """Start the next queued episodes in every slot; slots with none left stay idle."""
    n = env.batch_size[0]
    reset = torch.zeros(n, 1, dtype=torch.bool, device=env.device)
    task_index = torch.zeros(n, 1, dtype=torch.long, device=env.device)
    for i in range(n):
        if not todo:
            break
        slot_ep[i] = todo.popleft()
        reset[i] = True
        task_index[i] = slot_ep[i].task_index
    if not reset.any():
        return
    td = TensorDict({"_reset": reset, "task_index": task_index}, batch_size=env.batch_size)
    if current is not None:  # TorchRL wants the done state of the slots that are not reset
        td.update(current.select("done", "terminated", "truncated"))
    td = env.reset(td)
    ids, instr = as_text_list(td["task_id"]), as_text_list(td["instruction"])
    states, avail = as_text_list(td["observation"]), as_text_list(td["available_actions"])
    for i in range(n):
        if reset[i]:
            ep = slot_ep[i]
            ep.task_id, ep.instruction = str(ids[i]), str(instr[i])
            ep.states.append(str(states[i]))
            ep.available.append(list(avail[i]))


def _record(nxt, active, slot_ep, actions, on_step) -> list[int]:
    """Append each active slot's step to its episode; return the slots whose episode ended."""
    reward, score = nxt["reward"].reshape(-1).tolist(), nxt["score"].reshape(-1).tolist()
    done, term = nxt["done"].reshape(-1).tolist(), nxt["terminated"].reshape(-1).tolist()
    invalid, success = nxt["invalid"].reshape(-1).tolist(), nxt["success"].reshape(-1).tolist()
    states, avail = as_text_list(nxt["observation"]), as_text_list(nxt["available_actions"])
    sim_error = nxt["sim_error"].reshape(-1).tolist() if "sim_error" in nxt.keys() else [False] * len(done)
    ended = []
    for i in active:
        ep = slot_ep[i]
        ep.sim_error = ep.sim_error or bool(sim_error[i])
        ep.actions.append(actions[i])
        ep.rewards.append(float(reward[i]))
        ep.scores.append(float(score[i]))
        ep.invalid.append(bool(invalid[i]))
        ep.states.append(str(states[i]))
        ep.available.append(list(avail[i]))
        if done[i]:
            ep.success, ep.score = bool(success[i]), float(score[i])
            ep.terminated, ep.truncated = bool(term[i]), not bool(term[i])
            ended.append(i)
        if on_step is not None:
            on_step(i, ep)
    return ended


def episode_metrics(episodes) -> dict[str, float]:
    """``reward_mean``, ``success_rate``, ``score_mean``, ``steps_mean`` (per episode) and ``invalid_rate``
    (invalid actions over all actions) of ``(reward, success, score, steps, invalid_steps)`` rows; ``{}``
    for none. Evaluation logs them as ``val/...`` and ``test/...``."""
    rows = list(episodes)
    if not rows:
        return {}
    n = len(rows)
    return {
        "reward_mean": sum(r[0] for r in rows) / n,
        "success_rate": sum(bool(r[1]) for r in rows) / n,
        "score_mean": sum(r[2] for r in rows) / n,
        "steps_mean": sum(r[3] for r in rows) / n,
        "invalid_rate": sum(r[4] for r in rows) / max(1, sum(r[3] for r in rows)),
    }


def trajectory_metrics(trajectories: list[Trajectory]) -> dict[str, float]:
    """:func:`episode_metrics` of recorded real episodes (e.g. a policy's evaluation episodes on disk)."""
    return episode_metrics(
        (sum(t.reward for t in tr.transitions), tr.success, tr.score, len(tr.transitions),
         sum(t.invalid for t in tr.transitions))
        for tr in trajectories
    )  # fmt: skip

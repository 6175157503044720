"""Multi-turn, batched rollout collection through ANY :class:`dreamgym.envs.base.TextEnvBase` env.

The collector only uses the shared key layout (instruction, observation, available_actions, task_id,
reward, done, terminated, invalid, success, score), so a real env and the synthetic env (experience
model) are interchangeable. Episodes run with continuous batching: every env slot holds one episode;
when it ends, the slot is reset (TorchRL partial reset, ``_reset``) with the next queued episode, and
slots with nothing left to do are skipped with TorchRL partial steps (``_step``), so no env step is
ever wasted (each one is counted as a transition).

One policy turn = one sample: the prompt (:class:`dreamgym.modeling.policy_format.PolicyFormat`, laid out
by the tokenizer's chat template, :class:`dreamgym.modeling.chat.ChatCodec`) is the context, the generated
tokens up to the first stop id are the response; the result is a list of :class:`~dreamgym.rl.rollout.Turn`
ordered by episode, plus per-episode records for metrics, logging and replay-buffer write-back.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tensordict import TensorDict

from dreamgym.envs.base import as_text_list, text_stack
from dreamgym.modeling.action_constraint import ActionGrammar, allowed_fn
from dreamgym.modeling.chat import ChatCodec
from dreamgym.modeling.policy_format import PolicyFormat
from dreamgym.modeling.tokenizer import pad_id
from dreamgym.rl.rollout import Turn
from dreamgym.schema import Trajectory, Transition

__all__ = [
    "RolloutCollector",
    "Collection",
    "Episode",
    "collector_from_config",
    "episode_metrics",
    "trajectory_metrics",
]


@dataclass
class Episode:
    """One finished (or budget-cut) episode."""

    episode_id: int
    task_index: int
    group_id: int
    task_id: str = ""
    instruction: str = ""
    states: list[str] = field(default_factory=list)  # s_0 .. s_T
    actions: list[str] = field(default_factory=list)
    available: list[list[str]] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    invalid: list[bool] = field(default_factory=list)
    success: bool = False
    score: float = 0.0
    terminated: bool = False
    truncated: bool = False

    @property
    def reward(self) -> float:
        return float(sum(self.rewards))

    def to_trajectory(self, env: str, split: str, source: str, policy: str = "policy") -> Trajectory:
        """This episode as a schema :class:`~dreamgym.schema.Trajectory`."""
        tid = f"{source}-{uuid.uuid4().hex[:12]}"
        n = len(self.actions)
        steps = [
            Transition(
                task_id=self.task_id, instruction=self.instruction, step=i, state=self.states[i],
                action=self.actions[i], next_state=self.states[i + 1], reward=float(self.rewards[i]),
                done=i == n - 1, success=self.success and i == n - 1, source=source, env=env, split=split,
                available_actions=list(self.available[i]), score=self.score if i == n - 1 else 0.0,
                invalid=bool(self.invalid[i]), terminated=self.terminated and i == n - 1,
                truncated=self.truncated and i == n - 1, trajectory_id=tid,
            )
            for i in range(n)
        ]  # fmt: skip
        return Trajectory(
            tid, self.task_id, self.instruction, env, split, source, policy, steps, self.success, self.score
        )


@dataclass
class Collection:
    """What one :meth:`RolloutCollector.collect` call produced."""

    turns: list[Turn]
    episodes: list[Episode]
    transitions: int  # env steps taken (each one counted once)
    generated_tokens: int
    seconds: float

    def metrics(self) -> dict[str, float]:
        """Episode-level means (see :func:`episode_metrics`)."""
        return episode_metrics(
            (e.reward, e.success, e.score, len(e.actions), sum(e.invalid)) for e in self.episodes
        )


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


class RolloutCollector:
    """Runs the policy in a text env and records its turns.

    Args:
        format: the policy's prompt/parse format.
        max_new_tokens: generation budget per action.
        temperature: sampling temperature (training rollouts; evaluation is greedy).
        max_prompt_tokens: prompts are cut to this many tokens: the chat template's tokens stay, the
            user text keeps its last tokens.
        gen_batch_size: prompts per ``generate`` call.
        constrained: decode only admissible actions (:mod:`dreamgym.modeling.action_constraint`): the
            policy samples from its distribution renormalised over the tokens the state's
            ``available_actions`` allow, and each turn records those sets so the RL update scores the
            same distribution. Needs an env that lists its actions (WebShop, ALFWorld, synthetic).
        max_arg_tokens: with ``constrained``, a template argument (the search query) is closed after
            this many tokens (capped so the whole action fits in ``max_new_tokens``). As in free
            decoding, an action longer than ``max_new_tokens`` is cut, and the env flags it invalid.
    """

    def __init__(
        self,
        format: PolicyFormat | None = None,
        max_new_tokens: int = 32,
        temperature: float = 1.0,
        max_prompt_tokens: int = 1024,
        gen_batch_size: int = 32,
        constrained: bool = False,
        max_arg_tokens: int = 40,
    ):
        self.format = format or PolicyFormat()
        self.format_given = format is not None
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.max_prompt_tokens = max_prompt_tokens
        self.gen_batch_size = gen_batch_size
        self.constrained = constrained
        self.max_arg_tokens = max(1, min(max_arg_tokens, max_new_tokens - 6))

    def use_format_of(self, policy_dir: str | os.PathLike | None) -> RolloutCollector:
        """Prompt with the format the policy in ``policy_dir`` was warm-started with (its
        ``policy_format.json``), so the RL config need not repeat it. A ``format`` given to this collector
        must equal the saved one. No saved format (a model from elsewhere): the collector's own stays.
        Returns ``self``."""
        saved = PolicyFormat.load(policy_dir) if policy_dir and os.path.isdir(policy_dir) else None
        if saved is None:
            return self
        if self.format_given and self.format != saved:
            raise ValueError(
                f"collector.format={self.format} differs from the format the policy was trained with "
                f"({policy_dir}/policy_format.json: {saved}); drop `format` from the collector's init_args "
                "to use the saved one"
            )
        self.format = saved
        return self

    @torch.no_grad()
    def collect(
        self,
        env,
        model,
        tokenizer,
        task_indices: list[int],
        group_size: int = 1,
        greedy: bool = False,
        max_transitions: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> Collection:
        """Run ``group_size`` episodes of each task; episodes of task ``task_indices[g]`` form group ``g``.

        Args:
            env: a ``TextEnvBase`` of any batch size. More episodes than slots run in waves: the next
                ``batch_size`` episodes start when the whole wave has ended, so the episodes of one
                generate call are at similar turns (all searches, then all clicks). Refilling slots as
                episodes end mixed them, and every call decoded as long as its longest search query:
                2x slower, measured (100 WebShop test tasks, 20 slots: 52.6 s vs 26.6 s, same episodes).
            model: causal LM policy.
            tokenizer: its tokenizer.
            task_indices: tasks of ``env.split`` to run.
            group_size: episodes per task.
            greedy: greedy decoding (evaluation) instead of sampling.
            max_transitions: hard cap on env steps; episodes still running when it is reached are cut
                (their last turn is marked done and truncated). ``None``: no cap.
            progress: called after every env step with the number of episodes finished so far (e.g.
                :class:`dreamgym.progress.CountProgress`).
        """
        start = time.perf_counter()
        todo = deque(
            Episode(episode_id=g * group_size + k, task_index=int(t), group_id=g)
            for g, t in enumerate(task_indices)
            for k in range(group_size)
        )
        n_slots = env.batch_size[0]
        slot_ep: list[Episode | None] = [None] * n_slots
        slot_turns: dict[int, list[Turn]] = {}
        finished: list[Episode] = []
        turns_by_ep: dict[int, list[Turn]] = {}
        self._reset(env, slot_ep, list(range(n_slots)), todo)
        codec = ChatCodec(tokenizer, model)
        transitions = gen_tokens = 0
        while any(e is not None for e in slot_ep):
            active = [i for i, e in enumerate(slot_ep) if e is not None]
            if max_transitions is not None and transitions + len(active) > max_transitions:
                for i in active:  # budget reached: cut the running episodes
                    self._finish(slot_ep[i], slot_turns.pop(i, []), turns_by_ep, finished, truncated=True)
                    slot_ep[i] = None
                break
            prompts = [self._prompt_ids(codec, slot_ep[i]) for i in active]
            grammars = [self._grammar(tokenizer, slot_ep[i]) for i in active] if self.constrained else None
            responses = self._generate(model, codec, prompts, greedy, grammars)
            gen_tokens += sum(len(r) for r in responses)
            texts = [tokenizer.decode(r, skip_special_tokens=True) for r in responses]
            actions = [""] * n_slots
            for i, text in zip(active, texts, strict=True):
                actions[i] = self.format.parse(text).action
            mask = torch.zeros(n_slots, 1, dtype=torch.bool, device=env.device)
            mask[active] = True
            td = TensorDict(
                {"action": text_stack(actions, env.batch_size), "_step": mask}, batch_size=env.batch_size
            )
            nxt = env.step(td)["next"]
            transitions += len(active)
            allowed = (
                [g.allowed_per_step(r) for g, r in zip(grammars, responses, strict=True)]
                if grammars
                else None
            )
            ended = self._record(nxt, active, slot_ep, slot_turns, prompts, responses, actions, allowed)
            for i in ended:
                self._finish(slot_ep[i], slot_turns.pop(i, []), turns_by_ep, finished, truncated=False)
                slot_ep[i] = None
            if progress is not None:
                progress(len(finished))
            if todo and all(e is None for e in slot_ep):  # the wave has ended: start the next one
                self._reset(env, slot_ep, list(range(n_slots)), todo, current=nxt)
        finished.sort(key=lambda e: e.episode_id)
        turns = [t for e in finished for t in turns_by_ep.get(e.episode_id, [])]
        return Collection(turns, finished, transitions, gen_tokens, time.perf_counter() - start)

    # ----------------------------------------------------------------- helpers
    def _reset(self, env, slot_ep, slots, todo, current=None) -> None:
        """(Re)start ``slots`` with the next queued episodes; slots with none left stay idle."""
        n = env.batch_size[0]
        reset = torch.zeros(n, 1, dtype=torch.bool, device=env.device)
        task_index = torch.zeros(n, 1, dtype=torch.long, device=env.device)
        for i in slots:
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

    def _prompt_ids(self, codec: ChatCodec, ep: Episode) -> list[int]:
        history = list(zip(ep.states[:-1], ep.actions, strict=True))
        text = self.format.prompt(ep.instruction, ep.states[-1], ep.available[-1], history)
        return codec.prompt_ids(text, self.max_prompt_tokens)

    def _grammar(self, tokenizer, ep: Episode) -> ActionGrammar:
        return ActionGrammar(
            tokenizer, ep.instruction, self.format.listed(ep.available[-1]), self.max_arg_tokens
        )

    def _generate(
        self,
        model,
        codec: ChatCodec,
        prompts: list[list[int]],
        greedy: bool,
        grammars: list[ActionGrammar] | None = None,
    ) -> list[list[int]]:
        was_training = model.training
        model.eval()
        device = next(model.parameters()).device
        tokenizer = codec.tokenizer
        pad = pad_id(tokenizer, codec.stop_ids[0])
        out: list[list[int]] = [[] for _ in prompts]
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        for s in range(0, len(order), self.gen_batch_size):
            rows = order[s : s + self.gen_batch_size]
            width = max(len(prompts[i]) for i in rows)
            ids = torch.full((len(rows), width), pad, dtype=torch.long)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            for r, i in enumerate(rows):
                ids[r, width - len(prompts[i]) :] = torch.tensor(prompts[i])
                mask[r, width - len(prompts[i]) :] = 1
            sampling = (
                dict(do_sample=False)
                if greedy
                else dict(do_sample=True, temperature=self.temperature, top_k=0, top_p=1.0)
            )
            if grammars is not None:
                sampling["prefix_allowed_tokens_fn"] = allowed_fn(
                    [grammars[i] for i in rows], width, model.get_output_embeddings().weight.shape[0]
                )
            gen = model.generate(
                input_ids=ids.to(device), attention_mask=mask.to(device), max_new_tokens=self.max_new_tokens,
                pad_token_id=pad, eos_token_id=codec.stop_ids, use_cache=True, **sampling,
            )  # fmt: skip
            for r, i in enumerate(rows):
                out[i] = codec.cut_reply(gen[r, width:].tolist())
        if was_training:
            model.train()
        return out

    def _record(
        self, nxt, active, slot_ep, slot_turns, prompts, responses, actions, allowed=None
    ) -> list[int]:
        """Append each active slot's step to its episode; return the slots whose episode ended."""
        reward = nxt["reward"].reshape(-1).tolist()
        done, term = nxt["done"].reshape(-1).tolist(), nxt["terminated"].reshape(-1).tolist()
        invalid, success = nxt["invalid"].reshape(-1).tolist(), nxt["success"].reshape(-1).tolist()
        score = nxt["score"].reshape(-1).tolist()
        states, avail = as_text_list(nxt["observation"]), as_text_list(nxt["available_actions"])
        ended = []
        for k, i in enumerate(active):
            ep = slot_ep[i]
            ep.actions.append(actions[i])
            ep.rewards.append(float(reward[i]))
            ep.invalid.append(bool(invalid[i]))
            ep.states.append(str(states[i]))
            ep.available.append(list(avail[i]))
            slot_turns.setdefault(i, []).append(
                Turn(prompts[k], responses[k], float(reward[i]), bool(done[i]), bool(term[i]), bool(invalid[i]),
                     ep.task_index, ep.group_id, ep.episode_id, len(ep.actions) - 1,
                     allowed[k] if allowed is not None else None)
            )  # fmt: skip
            if done[i]:
                ep.success, ep.score = bool(success[i]), float(score[i])
                ep.terminated, ep.truncated = bool(term[i]), not bool(term[i])
                ended.append(i)
        return ended

    @staticmethod
    def _finish(ep: Episode, turns: list[Turn], turns_by_ep, finished, truncated: bool) -> None:
        if not ep.actions:  # cut by the budget before its first step: not an episode
            return
        if truncated:
            ep.truncated = True
            turns[-1].done = True
        turns_by_ep[ep.episode_id] = turns
        finished.append(ep)


def collector_from_config(config: str | os.PathLike) -> RolloutCollector:
    """The :class:`RolloutCollector` of an RL config (``model.init_args.collector``), instantiated.

    Scripts and pipeline stages that play a policy outside ``fit`` use it, so the prompt format and the
    decoding constraint are written once, in the config.

    Raises:
        KeyError: if the config has no ``model.init_args.collector``.
    """
    import yaml
    from jsonargparse import ArgumentParser

    data = yaml.safe_load(Path(config).read_text())
    try:
        spec = data["model"]["init_args"]["collector"]
    except (KeyError, TypeError):
        raise KeyError(
            f"{config} has no model.init_args.collector; give an RL config such as configs/webshop_grpo.yaml"
        ) from None
    parser = ArgumentParser(exit_on_error=False)
    parser.add_argument("--collector", type=RolloutCollector)
    return parser.instantiate(parser.parse_object({"collector": spec})).collector

"""Policy rollouts through ANY :class:`dreamgym.envs.base.TextEnvBase` env: the policy as an actor of
the one episode loop (:func:`dreamgym.envs.episodes.run_episodes`).

The loop only uses the shared key layout (instruction, observation, available_actions, task_id,
reward, done, terminated, invalid, success, score), so a real env and the synthetic env (experience
model) are interchangeable.

One policy turn = one sample: the prompt (:class:`dreamgym.modeling.policy_format.PolicyFormat`, laid out
by the tokenizer's chat template, :class:`dreamgym.modeling.chat.ChatCodec`) is the context, the generated
tokens up to the first stop id are the response (:func:`dreamgym.modeling.generation.generate_ids`); the
result is a list of :class:`~dreamgym.rl.rollout.Turn` ordered by episode, plus the episodes for metrics,
logging and replay-buffer write-back.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from dreamgym.envs.episodes import Episode, episode_metrics, run_episodes
from dreamgym.modeling.action_constraint import ActionGrammar, ActionGrammarProcessor
from dreamgym.modeling.chat import ChatCodec
from dreamgym.modeling.generation import generate_ids
from dreamgym.modeling.policy_format import PolicyFormat
from dreamgym.modeling.tokenizer import pad_id
from dreamgym.rl.rollout import Turn, state_key

__all__ = ["RolloutCollector", "Collection", "Generated", "collector_from_config"]


@dataclass
class Generated:
    """What the policy generated for one action (recorded on its :class:`Episode`, ``generated[t]``)."""

    prompt_ids: list[int]  # (P,) the prompt's tokens
    response_ids: list[int]  # (R,) the reply's tokens up to the first stop id
    allowed: list[list[int]] | None  # (R, *) per reply token, the ids the grammar allowed (None: free)


@dataclass
class Collection:
    """What one :meth:`RolloutCollector.collect` call produced."""

    turns: list[Turn]  # the turns to learn from: none of an episode cut by a simulation failure
    episodes: list[Episode]  # every episode played (metrics count them all)
    transitions: int  # env steps taken (each one counted once)
    generated_tokens: int
    seconds: float
    stopped: bool = False  # ``stop`` answered True: the episodes were cut before all ended

    @property
    def learned_episodes(self) -> list[Episode]:
        """The episodes whose turns are learned from: those no simulation failure (``sim_error``) ended."""
        return [e for e in self.episodes if not e.sim_error]

    def metrics(self) -> dict[str, float]:
        """Episode-level means (see :func:`episode_metrics`)."""
        return episode_metrics(
            (e.reward, e.success, e.score, len(e.actions), sum(e.invalid)) for e in self.episodes
        )

    def held_out_metrics(self) -> dict[str, float]:
        """What held-out evaluation logs (``val/...``, ``test/...``) for the warm start and RL alike: the
        episode metrics but ``reward_mean`` (the same as ``success_rate`` under outcome rewards)."""
        return {k: v for k, v in self.metrics().items() if k != "reward_mean"}


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
        learning_reward: what each turn's ``reward`` (the signal the advantage estimator learns from) is:
            ``"reward"``, the env's reward (WebShop: 1 for a purchase scoring 1.0, else 0), or ``"score"``,
            the env's raw score of the step (WebShop: the purchase's fraction of attributes, options and
            price matched, a dense signal where success is rare; 1/0 where an env has no finer score).
            Episode metrics (success, score, reward) are the env's either way.
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
        learning_reward: str = "reward",
    ):
        if learning_reward not in ("reward", "score"):
            raise ValueError(
                f"RolloutCollector.learning_reward={learning_reward!r}: choose 'reward' (the env's outcome "
                "reward) or 'score' (the env's raw score, e.g. WebShop's purchase score)"
            )
        self.learning_reward = learning_reward
        self.format = format or PolicyFormat()
        self.format_given = format is not None
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.max_prompt_tokens = max_prompt_tokens
        self.gen_batch_size = gen_batch_size
        self.constrained = constrained
        self.max_arg_tokens = max(1, min(max_arg_tokens, max_new_tokens - 6))

    def use_format(self, format: PolicyFormat, source: str) -> RolloutCollector:
        """Prompt with ``format`` (the one the policy was trained with, read from ``source``). A ``format``
        given to this collector must equal it. Returns ``self``."""
        if self.format_given and self.format != format:
            raise ValueError(
                f"collector.format={self.format} differs from the format the policy was trained with "
                f"({source}: {format}); drop `format` from the collector's init_args to use it"
            )
        self.format = format
        return self

    def use_format_of(self, policy_dir: str | os.PathLike | None) -> RolloutCollector:
        """Prompt with the format the policy in ``policy_dir`` was warm-started with (its
        ``policy_format.json``, see :meth:`use_format`), so the RL config need not repeat it. No saved
        format (a model from elsewhere): the collector's own stays. Returns ``self``."""
        saved = PolicyFormat.load(policy_dir) if policy_dir and os.path.isdir(policy_dir) else None
        return self if saved is None else self.use_format(saved, f"{policy_dir}/policy_format.json")

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
        on_step: Callable[[int, Episode], None] | None = None,
        stop: Callable[[], bool] | None = None,
        before_act: Callable[[list[int], list[Episode]], None] | None = None,
    ) -> Collection:
        """Run ``group_size`` episodes of each task; episodes of task ``task_indices[g]`` form group ``g``.

        Args:
            env: a ``TextEnvBase`` of any batch size; more episodes than slots run in waves
                (:func:`dreamgym.envs.episodes.run_episodes`).
            model: causal LM policy.
            tokenizer: its tokenizer.
            task_indices: tasks to run of ``env.split``.
            group_size: episodes per task.
            greedy: greedy decoding (evaluation) instead of sampling.
            max_transitions: hard cap on env steps; episodes still running when it is reached are cut
                (their last turn is marked done and the episode truncated). ``None``: no cap.
            progress: called after every env step with the number of episodes finished so far (e.g.
                :class:`dreamgym.progress.CountProgress`).
            on_step: called with ``(slot, episode)`` after every step, while ``env.step_info(slot)``
                describes it (e.g. a teacher writing each step's rationale).
            stop: asked before every env step; once ``True``, the running episodes are cut, the rest
                dropped and ``Collection.stopped`` set (e.g. a fit's wall-clock budget is spent).
            before_act: called with ``(slots, episodes)`` before the policy acts in them, while
                ``env.current(slot)`` and ``env.step_info(slot)`` describe the state it acts in (e.g. a
                scripted agent labelling the policy's states: DAgger).
        """
        start = time.perf_counter()
        codec = ChatCodec(tokenizer, model)

        def act(slots: list[int], episodes: list[Episode]) -> list[str]:
            if before_act is not None:
                before_act(slots, episodes)
            prompts, responses, grammars = self._respond(model, codec, episodes, greedy)
            for k, ep in enumerate(episodes):
                allowed = grammars[k].allowed_per_step(responses[k]) if grammars else None
                ep.record_generated(Generated(prompts[k], responses[k], allowed))
            return self._actions(tokenizer, responses)

        stopped = False

        def stop_now() -> bool:  # run_episodes cuts at the first True, so it is the last answer
            nonlocal stopped
            stopped = stop()
            return stopped

        episodes, transitions = run_episodes(
            env, act, task_indices, group_size, max_transitions, on_step=on_step, progress=progress,
            stop=None if stop is None else stop_now,
        )  # fmt: skip
        turns = []
        gen_tokens = sum(len(g.response_ids) for ep in episodes for g in ep.generated)
        for ep in episodes:
            if ep.sim_error:  # its end is a simulator's failure, not an outcome of the policy's actions
                continue
            last = len(ep.actions) - 1
            learned = ep.rewards if self.learning_reward == "reward" else ep.scores
            for t in range(last + 1):
                g = ep.generated[t]
                turns.append(
                    Turn(g.prompt_ids, g.response_ids, learned[t], t == last, ep.terminated and t == last,
                         ep.invalid[t], ep.task_index, ep.group_id, ep.episode_id, t, g.allowed,
                         state_key(ep.states[t]))
                )  # fmt: skip
        return Collection(turns, episodes, transitions, gen_tokens, time.perf_counter() - start, stopped)

    @torch.no_grad()
    def choose(self, model, tokenizer, episodes: list[Episode], greedy: bool = True) -> list[str]:
        """The action the policy writes in the last state of each of ``episodes`` (prompt, constraint and
        decoding exactly as :meth:`collect`): e.g. to score imitation on recorded trajectories, where
        ``episodes`` are their prefixes."""
        codec = ChatCodec(tokenizer, model)
        return self._actions(tokenizer, self._respond(model, codec, episodes, greedy)[1])

    # ----------------------------------------------------------------- helpers
    def _respond(self, model, codec: ChatCodec, episodes: list[Episode], greedy: bool):
        """Prompt ids, reply ids and grammars (None unconstrained) of one policy turn per episode."""
        prompts = [self._prompt_ids(codec, ep) for ep in episodes]
        grammars = [self._grammar(codec, ep) for ep in episodes] if self.constrained else None
        return prompts, self._generate(model, codec, prompts, greedy, grammars), grammars

    def _actions(self, tokenizer, responses: list[list[int]]) -> list[str]:
        return [self.format.parse(tokenizer.decode(r, skip_special_tokens=True)).action for r in responses]

    def _prompt_ids(self, codec: ChatCodec, ep: Episode) -> list[int]:
        history = list(zip(ep.states[:-1], ep.actions, strict=True))
        text = self.format.prompt(ep.instruction, ep.states[-1], ep.available[-1], history)
        return codec.prompt_ids(text, self.max_prompt_tokens)

    def _grammar(self, codec: ChatCodec, ep: Episode) -> ActionGrammar:
        """The state's action grammar, written as the chat template lays a reply out (as SFT trained it)."""
        return ActionGrammar(
            codec.tokenizer, ep.instruction, self.format.listed(ep.available[-1]), self.max_arg_tokens,
            head=codec.reply_head, end_ids=codec.reply_end_ids,
        )  # fmt: skip

    def _generate(
        self,
        model,
        codec: ChatCodec,
        prompts: list[list[int]],
        greedy: bool,
        grammars: list[ActionGrammar] | None = None,
    ) -> list[list[int]]:
        """Each prompt's reply tokens up to its first stop id (:func:`generate_ids`)."""
        sampling = (
            dict(do_sample=False)
            if greedy
            else dict(do_sample=True, temperature=self.temperature, top_k=0, top_p=1.0)
        )
        factory = None
        if grammars is not None:

            def factory(width: int, rows: list[int]):
                return ActionGrammarProcessor([grammars[i] for i in rows], width)

        new = generate_ids(
            model, prompts, self.max_new_tokens, pad_id(codec.tokenizer, codec.stop_ids[0]), codec.stop_ids,
            batch_size=self.gen_batch_size, processor_factory=factory, **sampling,
        )  # fmt: skip
        return [codec.cut_reply(ids) for ids in new]


def collector_from_config(config: str | os.PathLike) -> RolloutCollector:
    """The :class:`RolloutCollector` of an RL config (``model.init_args.collector``), instantiated.

    Scripts and pipeline stages that play a policy outside ``fit`` use it, so the prompt format and the
    decoding constraint are written once, in the config.

    Raises:
        KeyError: if the config has no ``model.init_args.collector``.
    """
    from jsonargparse import ArgumentParser

    from dreamgym.config_files import load_config

    data = load_config(config)
    try:
        spec = data["model"]["init_args"]["collector"]
    except (KeyError, TypeError):
        raise KeyError(
            f"{config} has no model.init_args.collector; give an RL or policy-SFT config such as "
            "configs/webshop_grpo.yaml"
        ) from None
    parser = ArgumentParser(exit_on_error=False)
    parser.add_argument("--collector", type=RolloutCollector)
    return parser.instantiate(parser.parse_object({"collector": spec})).collector

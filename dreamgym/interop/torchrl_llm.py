"""Any dreamgym text env as a TorchRL LLM env (the :class:`~torchrl.envs.llm.ChatEnv` history layout).

:func:`make_chat_env` appends one transform, :class:`DreamGymChatTransform`, to a
:class:`~dreamgym.envs.base.TextEnvBase`, so TorchRL's own LLM pieces drive it unchanged:
:class:`~torchrl.modules.llm.TransformersWrapper` (``input_mode="history"``),
:class:`~torchrl.collectors.llm.LLMCollector`, :class:`~torchrl.objectives.llm.MCAdvantage` and
:class:`~torchrl.objectives.llm.GRPOLoss`. One env step is one dialog turn::

    reset:  history.prompt = [system?] + [user: turn(instruction, s_0, A(s_0))]
    policy: history.full   = history.prompt + [assistant: reply]          (TransformersWrapper writes it)
    step:   action         = PolicyFormat.parse(reply).action              (sent to the dreamgym env)
            next.history.prompt = history.prompt + [assistant: reply] + [user: turn(s_1, A(s_1))]

Keys of the adapted env (``B`` = the dreamgym env's ``batch_size``; the other dreamgym keys stay as they
are, see :mod:`dreamgym.envs.base`)::

    observation:  ("history", "prompt")   History (B, n_msgs)  the conversation so far, ending in a user turn
                  instruction, observation, available_actions, task_id, success, invalid, ...  unchanged
    action:       ("history", "full")     History (B, n_msgs)  the prompt plus the assistant's reply
    reward:       "reward"                (B, 1, 1) float32    the dreamgym reward (B, 1), one per reply,
                                                               broadcast over its tokens (TorchRL's LLM layout)
    done:         "done" / "terminated" / "truncated"  (B, 1) bool  unchanged

The user turn is :meth:`PolicyFormat.prompt` of the project's policy format: the first turn shows the
instruction, the current state and the available actions, later turns the new state and actions only
(the earlier turns are already in the conversation). The reply is parsed by :meth:`PolicyFormat.parse`
(an optional ``<think>...</think>`` block and ``Action:`` prefix dropped, first line kept); an empty reply
is sent as is, and the env flags it ``invalid`` (a no-op step).

Cut replies: TorchRL 0.14's ``TransformersWrapper`` drops every token equal to ``tokenizer.pad_token_id``
from the sequence it generates (``_generate_from_tokens``: ``attention_mask_full_padded = tokens_full_padded
!= pad_val``), and it sets ``pad_token = eos_token`` on a tokenizer that has none. When the pad token is
one the chat template writes (SmolLM2 ships ``pad_token = "<|im_end|>"``, its end-of-turn mark), its
``("text", "full")`` loses the prompt's end-of-turn marks, ``History.from_text`` finds no assistant turn in
it and the reply reaches the env as ``''``, on every step. The adapter raises a one-line error naming the
fix (a pad token the template never writes, e.g. ``tokenizer.pad_token = "<|endoftext|>"``) when a reply
is empty and the policy's ``("text", "full")`` does not contain its ``("text", "prompt")``. Other empty
replies from the policy are counted (:attr:`DreamGymChatTransform.replies`,
:attr:`DreamGymChatTransform.empty_replies`) and the first one is warned about.

GRPO groups: with ``group_repeats=G`` every drawn task goes to the next ``G`` slots that reset, so ``G``
trajectories of one task share a ``task_id``; group them with ``MCAdvantage(grpo_size=G,
prompt_key="task_id", trajectory_return="sum")``.

Example::

    >>> env = make_chat_env(make_env("webshop", batch_size=[2], max_steps=3), group_repeats=2)
    >>> td = env.reset()
    >>> td["history", "prompt"].role                       # [['user'], ['user']]
    >>> td = policy(td)                                    # a TransformersWrapper(input_mode="history")
    >>> env.step(td)["next", "history", "prompt"].role     # [['user', 'assistant', 'user'], ...]

This module imports TorchRL's LLM stack; ``import dreamgym`` never imports it (see :mod:`dreamgym.interop`).
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase, lazy_stack
from torchrl.data import Composite, Unbounded
from torchrl.data.llm import History
from torchrl.envs import Transform, TransformedEnv
from torchrl.modules.llm.policies.common import ChatHistory

from dreamgym.envs.base import TextEnvBase, as_text_list
from dreamgym.modeling.policy_format import PolicyFormat

__all__ = ["DreamGymChatTransform", "make_chat_env", "render_turn"]


def render_turn(
    policy_format: PolicyFormat,
    observation: str,
    available_actions: list[str],
    instruction: str | None = None,
) -> str:
    """The user message of one turn.

    Args:
        policy_format: cuts the state to ``max_state_chars`` and lists at most ``max_actions`` actions.
        observation: the current state s_t.
        available_actions: the actions valid in s_t.
        instruction: shown on the first turn only (``None`` on later turns).

    Returns:
        ``PolicyFormat.prompt(instruction, observation, available_actions)`` without history; on a later
        turn the ``Instruction:`` line is left out.
    """
    text = policy_format.prompt(instruction or "", observation, available_actions)
    return text if instruction is not None else text.split("\n", 1)[1]


class DreamGymChatTransform(Transform):
    """Turns a :class:`TextEnvBase` into a ChatEnv-style env in history mode (see module docstring).

    Args:
        policy_format: renders the user turns and parses the replies; default ``PolicyFormat()``.
        system_prompt: a system message put first in every conversation; ``None``: none.
        group_repeats: each drawn task goes to this many consecutive slot resets (GRPO group size).
        seed: seed of the adapter's task draws when ``group_repeats > 1`` (``None``: unseeded); with
            ``group_repeats=1`` the env draws its own tasks (``env.set_seed``).

    Attributes:
        replies: replies of the policy sent to the env so far (steps whose input carries the policy's
            ``("text", "response")``; not the placeholders of ``check_env_specs``).
        empty_replies: how many of them were ``''`` (each an invalid no-op step).
    """

    def __init__(
        self,
        policy_format: PolicyFormat | None = None,
        system_prompt: str | None = None,
        group_repeats: int = 1,
        seed: int | None = 0,
    ):
        super().__init__()
        if isinstance(group_repeats, bool) or not isinstance(group_repeats, int) or group_repeats < 1:
            raise ValueError(
                f"DreamGymChatTransform.group_repeats={group_repeats!r}: give an integer >= 1 "
                "(trajectories per task, the GRPO group size)"
            )
        self.policy_format = policy_format or PolicyFormat()
        self.system_prompt = system_prompt
        self.group_repeats = group_repeats
        self._rng = np.random.default_rng(seed)
        self._pending: list[int] = []  # task indices handed to the next slots that reset
        self._current: dict[int, int] = {}  # slot -> task index of its episode
        self._stepped: set[int] = set()  # slots whose episode has taken a step
        self.replies = 0
        self.empty_replies = 0

    # ---------------------------------------------------------------- specs
    def _base(self) -> TextEnvBase:
        env = self.parent.base_env if self.parent is not None else None
        if not isinstance(env, TextEnvBase):
            raise TypeError(
                f"DreamGymChatTransform wraps a dreamgym TextEnvBase, got {type(env).__name__}; "
                "build the env with dreamgym.envs.make_env(...) and use make_chat_env(env)"
            )
        return env

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        shape = observation_spec.shape
        observation_spec["history"] = _history_spec(shape, "prompt")
        return observation_spec

    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        reward_spec["reward"] = Unbounded(shape=(*reward_spec.shape, 1, 1), dtype=torch.float32)
        return reward_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        action_spec = input_spec["full_action_spec"]
        if "action" not in action_spec.keys():
            raise KeyError(
                f"DreamGymChatTransform expects the env's action under key 'action', got action keys "
                f"{list(action_spec.keys())}"
            )
        del action_spec["action"]
        action_spec["history"] = _history_spec(action_spec.shape, "full")
        return input_spec

    # ---------------------------------------------------------------- reset
    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        """Hands out grouped task indices as ``task_index`` (B, 1) int64.

        A slot whose episode has not taken a step since its reset (e.g. the collector resets once when
        built, then again when it starts) replays its task, so such resets do not eat into a group.
        """
        env = self._base()
        n = env.batch_size[0]
        mask = np.ones(n, dtype=bool)
        if tensordict is not None and "_reset" in tensordict.keys():
            mask = tensordict.get("_reset").reshape(n).cpu().numpy().astype(bool)
        if not mask.all():
            raise RuntimeError(
                f"DreamGymChatTransform: slots {np.flatnonzero(mask).tolist()} of {n} reset while the others "
                "play on; TorchRL merges a partial reset with TensorDict.where, which cannot join conversations "
                "of different lengths. Give the dreamgym env batch_size=[1] (one conversation per env; group "
                "trajectories over time with group_repeats), or use episodes that all end on the same step"
            )
        if self.group_repeats == 1:
            return tensordict
        if tensordict is None:
            tensordict = TensorDict(batch_size=env.batch_size)
        task_index = torch.full((n, 1), -1, dtype=torch.int64)
        for slot in np.flatnonzero(mask):
            slot = int(slot)
            if slot not in self._current or slot in self._stepped:
                if not self._pending:
                    self._pending = [int(self._rng.integers(env.num_tasks()))] * self.group_repeats
                self._current[slot] = self._pending.pop(0)
                self._stepped.discard(slot)
            task_index[slot, 0] = self._current[slot]
        tensordict.set("task_index", task_index)
        return tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        turns = [
            self._messages(render_turn(self.policy_format, obs, acts, instruction=ins), first=True)
            for ins, obs, acts in self._texts(tensordict_reset)
        ]
        tensordict_reset.set(
            "history", ChatHistory(prompt=lazy_stack(turns), batch_size=tensordict_reset.batch_size)
        )
        return tensordict_reset

    # ----------------------------------------------------------------- step
    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Parses the assistant's reply (last message of ``("history", "full")``) into ``"action"``.

        Raises:
            RuntimeError: if a reply is empty and the policy's ``("text", "full")`` does not contain its
                ``("text", "prompt")`` (the wrapper dropped the pad-id tokens and cut the reply; see the
                module docstring).
        """
        replies = self._replies(tensordict)
        self._check_policy_output(tensordict, replies)
        tensordict.set("action", [self.policy_format.parse(r).action for r in replies])
        return tensordict

    def _check_policy_output(self, tensordict: TensorDictBase, replies: list[str]) -> None:
        """Refuses replies that the wrapper cut; counts (and warns once about) empty ones."""
        prompts = _texts_or_none(tensordict, ("text", "prompt"))
        fulls = _texts_or_none(tensordict, ("text", "full"))
        if prompts is not None and fulls is not None:
            for slot, (prompt, full) in enumerate(zip(prompts, fulls, strict=True)):
                if not replies[slot].strip() and prompt not in full:
                    at = len(os.path.commonprefix([prompt, full]))
                    raise RuntimeError(
                        f"DreamGymChatTransform: the policy's ('text', 'full') of slot {slot} lost part of its "
                        f"('text', 'prompt') (from {prompt[at : at + 16]!r} on), so its reply reached the env "
                        f"as {replies[slot]!r}: TorchRL 0.14's TransformersWrapper drops every token equal to "
                        "tokenizer.pad_token_id from what it generates, and the pad token is one the chat template "
                        "writes (e.g. SmolLM2's <|im_end|>); set tokenizer.pad_token to a token the template never "
                        "writes (e.g. tokenizer.pad_token = '<|endoftext|>') before building the wrapper"
                    )
        responses = _texts_or_none(tensordict, ("text", "response"))
        if responses is None:  # not a policy's output (e.g. check_env_specs' random action)
            return
        self.replies += len(replies)
        empty = [slot for slot, r in enumerate(replies) if not r.strip()]
        if empty and not self.empty_replies:
            warnings.warn(
                f"DreamGymChatTransform: the policy's reply in slot {empty[0]} is empty (generated text "
                f"{responses[empty[0]][:40]!r}); an empty reply is an invalid no-op step with no learning "
                "signal (counted in env.transform.empty_replies, of env.transform.replies)",
                RuntimeWarning,
                stacklevel=2,
            )
        self.empty_replies += len(empty)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        """``next.history.prompt`` = ``history.prompt`` + [assistant: reply] + [user: next turn]."""
        self._stepped.update(range(next_tensordict.batch_size[0]))
        prompts = tensordict.get(("history", "prompt")).unbind(0)
        replies = self._replies(tensordict)
        turns = [render_turn(self.policy_format, obs, acts) for _, obs, acts in self._texts(next_tensordict)]
        new = [
            p.extend(_history(["assistant", "user"], [r, t]), inplace=False, dim=-1)
            for p, r, t in zip(prompts, replies, turns, strict=True)
        ]
        next_tensordict.set(
            "history", ChatHistory(prompt=lazy_stack(new), batch_size=next_tensordict.batch_size)
        )
        next_tensordict.set("reward", next_tensordict.get("reward").unsqueeze(-1))  # (B, 1) -> (B, 1, 1)
        return next_tensordict

    def _replies(self, tensordict: TensorDictBase) -> list[str]:
        """The text of the last message of each slot's ``("history", "full")``.

        A message with no role (the placeholder that ``action_spec.rand()`` draws, e.g. in
        ``check_env_specs``) reads as an empty reply.
        """
        full = tensordict.get(("history", "full"), None)
        if full is None:
            raise KeyError(
                "DreamGymChatTransform expects the policy's output under ('history', 'full') (History of the "
                "prompt plus the reply); use TransformersWrapper(..., input_mode='history'), got keys "
                f"{sorted(map(str, tensordict.keys(True, True)))}"
            )
        replies = []
        for slot, h in enumerate(full.unbind(0)):
            role, content = _last(h.role), _last(h.content)
            if role is not None and role != "assistant":
                raise ValueError(
                    f"('history', 'full') of slot {slot} must end with the assistant's reply, got a {role!r} "
                    "message last; the policy must append its reply (TransformersWrapper(generate=True))"
                )
            replies.append("" if content is None else str(content))
        return replies

    # -------------------------------------------------------------- helpers
    @staticmethod
    def _texts(td: TensorDictBase) -> list[tuple[str, str, list[str]]]:
        return list(
            zip(
                as_text_list(td.get("instruction")),
                as_text_list(td.get("observation")),
                [list(a) for a in as_text_list(td.get("available_actions"))],
                strict=True,
            )
        )

    def _messages(self, user_text: str, first: bool) -> History:
        """History (n_msgs,) of one slot: [system?, user] on the first turn, [user] later."""
        roles, contents = ["user"], [user_text]
        if first and self.system_prompt is not None:
            roles, contents = ["system", "user"], [self.system_prompt, user_text]
        return _history(roles, contents)


def make_chat_env(
    env: TextEnvBase,
    policy_format: PolicyFormat | None = None,
    system_prompt: str | None = None,
    group_repeats: int = 1,
    seed: int | None = 0,
) -> TransformedEnv:
    """``env`` with a :class:`DreamGymChatTransform` appended (arguments as there).

    Raises:
        TypeError: if ``env`` is not a dreamgym :class:`TextEnvBase`.
    """
    if not isinstance(env, TextEnvBase):
        raise TypeError(
            f"make_chat_env(env=...) expects a dreamgym TextEnvBase, got {type(env).__name__}; "
            "build one with dreamgym.envs.make_env(name, batch_size=[...])"
        )
    return TransformedEnv(env, DreamGymChatTransform(policy_format, system_prompt, group_repeats, seed))


def _history(roles: list[str], contents: list[str]) -> History:
    """History (n_msgs,) of plain messages (role and content only, as TransformersWrapper writes replies)."""
    return History(role=roles, content=contents, batch_size=(len(roles),))


def _history_spec(shape: torch.Size, key: str) -> Composite:
    """``ChatHistory.default_spec`` with the one ``key`` ("prompt" or "full"), without the tool fields
    (``tool_calls``, ``tool_responses``): dreamgym turns have none, and a History that has them cannot be
    extended with a reply that has not."""
    spec = ChatHistory.default_spec(shape=shape, keys=[key])
    for field in ("tool_calls", "tool_responses"):
        del spec[key][field]
    return spec


def _texts_or_none(td: TensorDictBase, key: tuple[str, str]) -> list[str] | None:
    """One string per slot of the text entry ``key`` (``None`` if missing or not all strings)."""
    value = td.get(key, None)
    if value is None:
        return None
    texts = as_text_list(value)
    return texts if all(isinstance(t, str) for t in texts) else None


def _last(value):
    """The last leaf of a (nested) NonTensor entry (``None`` if empty)."""
    items = value.tolist() if hasattr(value, "tolist") else value
    while isinstance(items, list):
        if not items:
            return None
        items = items[-1]
    return items

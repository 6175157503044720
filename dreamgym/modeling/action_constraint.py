"""Action-constrained decoding: the policy can only write an action its state admits.

A text env lists its admissible actions (``available_actions``): concrete ones (``click[buy now]``,
``go to cabinet 1``) and templates with a free argument (``search[<query>]``). :class:`ActionGrammar`
turns that list into a token-level grammar for one prompt:

* a concrete action is its canonical tokenisation ``encode(head + action)`` followed by the reply's end
  tokens; the concrete actions form a prefix tree, so at each step the allowed tokens are the tree's
  children;
* a template ``name[<...>]`` is ``encode(head + "name[")``, then 1..``max_arg_tokens`` argument tokens
  drawn from the tokens of the instruction (a bag, in any order: the policy chooses which words to use),
  then ``]`` and the end tokens.

``head`` and the end tokens are those of the policy's chat template
(:class:`dreamgym.modeling.chat.ChatCodec`: ``reply_head``, ``reply_end_ids``), so the grammar writes the
tokens SFT trained the reply as: ``" " action [EOS]`` under the plain layout, ``action <|im_end|>`` under
ChatML (SmolLM2, Qwen), where ``" search"`` and ``"search"`` are different tokens.

The policy then samples from its own distribution *renormalised over the allowed set*:
``pi_c(a_j | s, a_<j) = exp(z[a_j]) / sum_{v in A_j} exp(z[v])`` with ``A_j`` the allowed tokens after
the prefix ``a_<j`` and ``z`` the LM's logits. :meth:`ActionGrammar.allowed_per_step` recomputes the
sets ``A_j`` of a generated response, so the RL update scores exactly the distribution that sampled it
(:func:`dreamgym.rl.losses.token_log_probs` with ``allowed``); the ratio and KL stay exact.

This is the admissible-action constraint of text-game agents (GLAM, Carta et al. 2023, score only
admissible actions) in decoding form. Every action is valid, so ``invalid_rate`` is 0 by
construction under it; what the policy still has to learn is *which* action and which query words.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from dreamgym.schema import ACTION_TEMPLATE

__all__ = ["ACTION_TEMPLATE", "ActionGrammar", "ActionGrammarProcessor"]

_ARG = -2  # trie key: a template argument starts here


class ActionGrammar:
    """Token grammar of one state's admissible actions (see module docstring).

    Args:
        tokenizer: the policy's tokenizer (must have an EOS token).
        instruction: the task instruction (template arguments draw their tokens from it).
        available_actions: the state's admissible actions, concrete or ``name[<...>]`` templates.
        max_arg_tokens: a template argument is closed with ``]`` after this many tokens.
        head: the text the reply starts with before the action (the chat template's ``reply_head``:
            ``" "`` in the plain layout, ``""`` in ChatML).
        end_ids: the tokens that end a reply, the last one a stop id (the chat template's
            ``reply_end_ids``); None: the tokenizer's EOS.

    A state that lists no actions (e.g. a synthetic state the env could not read actions from) gets a
    *free* grammar: every token allowed, recorded as empty sets, i.e. scored unconstrained.

    Raises:
        ValueError: if no ``end_ids`` are given and the tokenizer has no EOS token.
    """

    def __init__(
        self,
        tokenizer,
        instruction: str,
        available_actions: Sequence[str],
        max_arg_tokens: int = 40,
        head: str = " ",
        end_ids: Sequence[int] | None = None,
    ):
        if not end_ids and tokenizer.eos_token_id is None:
            raise ValueError(
                "ActionGrammar needs end_ids or a tokenizer with an EOS token (eos_token_id is None)"
            )
        self.end = [int(t) for t in end_ids] if end_ids else [int(tokenizer.eos_token_id)]
        self.eos = self.end[-1]  # the stop id that closes a reply
        self.max_arg_tokens = max_arg_tokens
        close = _encode(tokenizer, "]")
        self.close = close[-1]
        self.root: dict = {}
        self.arg_tokens: list[int] = []
        self.free = not available_actions
        for action in available_actions:
            m = ACTION_TEMPLATE.match(action.strip())
            if m:
                prefix = _encode(tokenizer, f"{head}{m.group(1)}[")
                self._insert(prefix)[_ARG] = {}
                if not self.arg_tokens:
                    self.arg_tokens = self._arg_vocab(tokenizer, instruction)
            else:
                self._insert(_encode(tokenizer, head + action.strip()) + self.end)

    # ------------------------------------------------------------------ build
    def _insert(self, ids: list[int]) -> dict:
        node = self.root
        for t in ids:
            node = node.setdefault(t, {})
        return node

    def _arg_vocab(self, tokenizer, instruction: str) -> list[int]:
        words = set(_encode(tokenizer, " " + instruction)) | set(_encode(tokenizer, instruction))
        words -= {*self.end, self.close}
        if not words:
            raise ValueError(
                f"the instruction {instruction!r} has no tokens to fill a template argument "
                "(e.g. search[<query>]) with; give the task an instruction"
            )
        return sorted(words)

    # ------------------------------------------------------------------ query
    def allowed(self, prefix: Sequence[int]) -> list[int] | None:
        """Token ids allowed after the response ``prefix`` (``None``: a free grammar, any token).

        A prefix the grammar never produces (e.g. after the end tokens) allows only the closing stop id.
        """
        if self.free:
            return None
        node = self.root
        for j, t in enumerate(prefix):
            if _ARG in node:
                return self._arg_allowed(prefix[j:])
            if t not in node:
                return [self.eos]
            node = node[t]
        if _ARG in node:
            return self._arg_allowed([])
        return [t for t in node if t >= 0] or [self.eos]

    def _arg_allowed(self, arg: Sequence[int]) -> list[int]:
        if self.close in arg:  # argument closed: the action is complete, the end tokens follow
            done = len(arg) - arg.index(self.close) - 1
            return [self.end[done]] if done < len(self.end) else [self.eos]
        if len(arg) >= self.max_arg_tokens:
            return [self.close]
        return self.arg_tokens + ([self.close] if arg else [])

    def allowed_per_step(self, response: Sequence[int]) -> list[list[int]]:
        """``A_j`` for every position ``j`` of a generated ``response`` (empty lists: unconstrained)."""
        if self.free:
            return [[] for _ in response]
        return [self.allowed(response[:j]) for j in range(len(response))]


class ActionGrammarProcessor:
    """A ``transformers`` ``LogitsProcessor`` that keeps each row's scores on its grammar's allowed tokens.

    Row ``r`` of the batch is generated under ``grammars[r]``; the new tokens are the columns after
    ``prompt_width`` (left-padded prompts of one width). Scores outside ``A_j`` become ``-inf`` (a free
    grammar leaves its row as it is), the masking ``model.generate``'s ``prefix_allowed_tokens_fn`` does,
    written for the whole batch at once. :meth:`select_rows` follows the rows that stay when ended rows
    leave the batch (:func:`dreamgym.modeling.generation.generate_ids`).
    """

    def __init__(self, grammars: Sequence[ActionGrammar], prompt_width: int):
        self.grammars, self.width = list(grammars), prompt_width

    def select_rows(self, kept: Sequence[int]) -> None:
        self.grammars = [self.grammars[r] for r in kept]

    def __call__(self, input_ids, scores):
        if len(self.grammars) != scores.shape[0]:
            raise ValueError(
                f"ActionGrammarProcessor has {len(self.grammars)} grammars for a batch of {scores.shape[0]} rows"
            )
        new = input_ids[:, self.width :].tolist()  # one device sync per step
        rows, cols, free = [], [], []
        for r, g in enumerate(self.grammars):
            allowed = g.allowed(new[r])
            if allowed is None:
                free.append(r)
            else:
                rows += [r] * len(allowed)
                cols += allowed
        mask = torch.full_like(scores, -torch.inf)
        mask[torch.tensor(rows, dtype=torch.long), torch.tensor(cols, dtype=torch.long)] = 0.0
        if free:
            mask[free] = 0.0
        return scores + mask


def _encode(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])

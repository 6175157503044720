"""The policy's token layout, taken from the tokenizer's chat template.

One policy turn is a two-message conversation: the user message holds the
:class:`~dreamgym.modeling.policy_format.PolicyFormat` prompt, the assistant message the action. The
token layout is read off the tokenizer's chat template (``tokenizer.chat_template``; tokenizers without
one get :data:`PLAIN_TEMPLATE`)::

    prompt  = prefix + encode(user text) + suffix      (suffix: the generation prompt, e.g. "<|im_start|>assistant\\n")
    reply   = encode(reply_head + action) + reply_end   (reply_end: the template's end-of-turn token, kept up to it)

The loss mask of SFT and the action mask of RL lie exactly on ``reply``: the tokens the model writes.
:data:`PLAIN_TEMPLATE` (the bundled tokenizer's, see :func:`dreamgym.modeling.tokenizer.train_tokenizer`)
renders ``[BOS] prompt`` and ``" " action [EOS]``, the layout this project used before chat templates,
token for token, so checkpoints trained on it read the same sequences.

Generation stops at any of :attr:`ChatCodec.stop_ids`: the model's generation-config EOS ids (an int or a
list), the tokenizer's EOS and the template's end-of-turn token.
"""

from __future__ import annotations

__all__ = ["PLAIN_TEMPLATE", "ChatCodec", "stop_token_ids"]

PLAIN_TEMPLATE = (
    "{%- if bos_token %}{{ bos_token }}{% endif -%}"
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'assistant' %}{{ ' ' + m['content'] + eos_token }}{% else %}{{ m['content'] }}{% endif -%}"
    "{%- endfor -%}"
)
"""``[BOS]`` (if the tokenizer has one), the user text, then ``" " + reply + EOS``."""

_SLOT = "DREAMGYMSLOT"


def stop_token_ids(tokenizer, model=None) -> list[int]:
    """EOS ids generation stops at: ``model.generation_config.eos_token_id`` (int or list), then the
    tokenizer's ``eos_token_id``; duplicates and ``None`` dropped, order kept."""
    gen = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = list(gen) if isinstance(gen, (list, tuple)) else [gen]
    ids.append(tokenizer.eos_token_id)
    return list(dict.fromkeys(int(i) for i in ids if i is not None))


class ChatCodec:
    """Prompt and reply token ids of one tokenizer's chat template (see module docstring).

    Args:
        tokenizer: a ``transformers`` tokenizer; its ``chat_template`` (or :data:`PLAIN_TEMPLATE`) is used.
        model: the model that generates (its generation config adds EOS ids); optional.

    Attributes:
        stop_ids: token ids that end a reply (the first one is the tokenizer's or the model's EOS).

    Raises:
        ValueError: if the template does not render the user text and the reply verbatim, one after the
            other (the prompt with a generation prompt is not a prefix of the whole conversation).
    """

    def __init__(self, tokenizer, model=None):
        self.tokenizer = tokenizer
        self.template = tokenizer.chat_template or PLAIN_TEMPLATE
        user = [{"role": "user", "content": _SLOT}]
        prompt = self._render(user, add_generation_prompt=True)
        full = self._render(user + [{"role": "assistant", "content": _SLOT}])
        if not full.startswith(prompt) or prompt.count(_SLOT) != 1 or full.count(_SLOT) != 2:
            raise ValueError(
                "the tokenizer's chat template does not render [user, assistant] as the generation prompt "
                "followed by the reply; set LanguageModel.chat_template=false to use the plain layout"
            )
        head, tail = prompt.split(_SLOT)
        self.reply_head, reply_tail = full[len(prompt) :].split(_SLOT)
        self.prefix_ids, self.suffix_ids = self._encode(head), self._encode(tail)
        self.stop_ids = stop_token_ids(tokenizer, model)
        tail_ids = self._encode(reply_tail)
        special = set(tokenizer.all_special_ids)
        end = next((j for j, t in enumerate(tail_ids) if t in self.stop_ids), None)
        if end is None:  # e.g. a base model's EOS differs from the template's end of turn: stop there too
            end = next((j for j, t in enumerate(tail_ids) if t in special), None)
            if end is not None:
                self.stop_ids.append(tail_ids[end])
        self.reply_end_ids = tail_ids[: end + 1] if end is not None else tail_ids + self.stop_ids[:1]

    def _render(self, messages, add_generation_prompt: bool = False) -> str:
        return self.tokenizer.apply_chat_template(
            messages, chat_template=self.template, add_generation_prompt=add_generation_prompt, tokenize=False
        )

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False) if text else []

    @property
    def overhead(self) -> int:
        """Template tokens around the user text (``len(prefix) + len(suffix)``)."""
        return len(self.prefix_ids) + len(self.suffix_ids)

    def prompt_ids(self, text: str, max_tokens: int | None = None) -> list[int]:
        """``prefix + encode(text) + suffix``; with ``max_tokens``, the user text keeps its last tokens so
        that the whole prompt fits (the template's tokens are never cut).

        Raises:
            ValueError: if ``max_tokens`` leaves no room for a single user token.
        """
        ids = self._encode(text)
        if max_tokens is not None and self.overhead + len(ids) > max_tokens:
            room = max_tokens - self.overhead
            if room < 1:
                raise ValueError(
                    f"max_tokens={max_tokens} leaves no room for the prompt: the chat template alone takes "
                    f"{self.overhead} tokens"
                )
            ids = ids[-room:]
        return self.prefix_ids + ids + self.suffix_ids

    def reply_ids(self, text: str) -> list[int]:
        """The assistant tokens for reply ``text`` (stripped): ``encode(reply_head + text) + reply_end``."""
        return self._encode(self.reply_head + text.strip()) + self.reply_end_ids

    def cut_reply(self, ids: list[int]) -> list[int]:
        """Generated ``ids`` up to and including the first stop id (all of them if none; never empty)."""
        end = next((j for j, t in enumerate(ids) if t in self.stop_ids), None)
        out = ids if end is None else ids[: end + 1]
        return out or self.stop_ids[:1]

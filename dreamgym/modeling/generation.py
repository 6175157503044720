"""Batched generation with left padding and the KV cache, for the experience model (and any causal LM).

Prompts are encoded without special tokens and prefixed with BOS (the same layout the SFT examples
use); batches are left-padded so every row's last prompt token sits at the same position, and
``model.generate`` reuses the KV cache across decoding steps. Generation stops at any EOS id of the
model's generation config or the tokenizer (:func:`~dreamgym.modeling.chat.stop_token_ids`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from transformers import LogitsProcessorList

from dreamgym.modeling.chat import stop_token_ids
from dreamgym.modeling.forward import pad_rows
from dreamgym.modeling.tokenizer import pad_id

__all__ = ["encode_prompt", "generate_ids", "generate_texts"]


def encode_prompt(tokenizer, text: str) -> list[int]:
    """Token ids of a prompt: ``[BOS] + encode(text)`` (no other special tokens)."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    bos = tokenizer.bos_token_id
    return ([bos] if bos is not None else []) + ids


@torch.no_grad()
def generate_ids(
    model,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    pad_token_id: int,
    eos_token_id: int | list[int],
    batch_size: int = 8,
    processor_factory: Callable[[int, list[int]], Any] | None = None,
    **generate_kwargs: Any,
) -> list[list[int]]:
    """THE generation path: the new token ids of each prompt (token ids), in the order of ``prompts``.

    Prompts are sorted by length and run ``batch_size`` at a time, left-padded so every row's last
    prompt token sits at the same position; ``model.generate`` reuses the KV cache across decoding steps.

    Args:
        model: a causal LM (``transformers`` ``PreTrainedModel``); put in eval mode for the call.
        prompts: prompt token ids (special tokens included as the caller wants them).
        max_new_tokens: generation budget per prompt.
        pad_token_id: the left-padding id.
        eos_token_id: id(s) that end a row.
        batch_size: prompts per ``generate`` call.
        processor_factory: ``(prompt_width, rows) -> LogitsProcessor`` built for each batch (``rows``:
            the indices into ``prompts`` of the batch's rows, in order), e.g. a grammar.
        generate_kwargs: passed to ``model.generate`` (``do_sample``, ``temperature``, ``stop_strings``
            with ``tokenizer``, ``cache_implementation``, ...).
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    out: list[list[int]] = [[] for _ in prompts]
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        ids, mask = pad_rows([list(prompts[i]) for i in rows], pad_token_id, left=True)
        width = ids.shape[1]
        kwargs = dict(generate_kwargs)
        if processor_factory is not None:
            kwargs.update(logits_processor=LogitsProcessorList([processor_factory(width, list(rows))]))
        gen = model.generate(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            max_new_tokens=max_new_tokens,
            pad_token_id=pad_token_id,
            eos_token_id=eos_token_id,
            use_cache=True,
            **kwargs,
        )
        for r, i in enumerate(rows):
            out[i] = gen[r, width:].tolist()
    if was_training:
        model.train()
    return out


def generate_texts(
    model,
    tokenizer,
    prompts: Sequence[str],
    max_new_tokens: int = 256,
    batch_size: int = 8,
    do_sample: bool = False,
    temperature: float = 1.0,
    max_prompt_tokens: int | None = None,
    stop_strings: Sequence[str] | None = ("<end>",),
    processor_factory: Callable[[int, list[int]], Any] | None = None,
    cache_implementation: str | None = None,
) -> list[str]:
    """Generate a continuation for each prompt text (:func:`generate_ids` on :func:`encode_prompt`);
    returns the decoded new text only.

    Args:
        model: a causal LM (``transformers`` ``PreTrainedModel``).
        tokenizer: its tokenizer (needs ``pad_token_id`` and ``eos_token_id``).
        prompts: prompt texts.
        max_new_tokens: generation budget per prompt.
        batch_size: prompts per forward batch (sorted by length to waste less padding).
        do_sample: sample (True) or decode greedily (False).
        temperature: sampling temperature (only with ``do_sample``).
        max_prompt_tokens: keep only the last this-many prompt tokens (None: keep all).
        stop_strings: a row stops once its text ends with one of these (besides EOS).
        processor_factory: see :func:`generate_ids`.
        cache_implementation: ``transformers``' KV-cache kind (``"static"``: preallocated, no per-token
            concatenation; None: the library's default dynamic cache).
    """
    encoded = [encode_prompt(tokenizer, p) for p in prompts]
    if max_prompt_tokens:
        encoded = [ids[-max_prompt_tokens:] for ids in encoded]
    kwargs: dict[str, Any] = (
        dict(do_sample=do_sample, temperature=temperature) if do_sample else dict(do_sample=False)
    )
    if stop_strings:
        kwargs.update(stop_strings=list(stop_strings), tokenizer=tokenizer)
    if cache_implementation:
        kwargs.update(cache_implementation=cache_implementation)
    new = generate_ids(
        model, encoded, max_new_tokens, pad_id(tokenizer), stop_token_ids(tokenizer, model),
        batch_size=batch_size, processor_factory=processor_factory, **kwargs,
    )  # fmt: skip
    return [tokenizer.decode(ids, skip_special_tokens=True) for ids in new]

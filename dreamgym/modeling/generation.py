"""Batched generation with left padding and the KV cache, for the experience model (and any causal LM).

Prompts are encoded without special tokens and prefixed with BOS (the same layout the SFT examples
use); batches are left-padded so every row's last prompt token sits at the same position. Generation
stops at any EOS id of the model's generation config or the tokenizer
(:func:`~dreamgym.modeling.chat.stop_token_ids`).

The decoding loop (:func:`_decode`) is ours rather than ``model.generate``'s, for two measured costs of
small models on a CPU (BENCHMARKS.md, "Where the time goes"): a decoding step there is bound by reading
the KV cache, so the cache (:class:`_Slots`) is preallocated and written in place but attention reads
only its filled positions, and a row that has ended leaves the batch instead of being fed padding until
the longest row ends (the experience model's rows end after 58 % of the longest on average). Greedy
outputs are those of ``model.generate``. Generation runs in the model's own dtype even under autocast
(``trainer.precision: bf16-mixed`` in RL): its steps are bound by reading weights and the KV cache, and
autocast re-casts the fp32 weights at every step: measured on the experience model, 0.78x the tokens/s,
11 of 64 greedy outputs changed (BENCHMARKS.md, "Mixed precision"). Models whose cache is not a plain
per-layer KV cache (state-space or hybrid layers) go through ``model.generate``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper
from transformers.cache_utils import Cache, DynamicLayer

from dreamgym.modeling.chat import stop_token_ids
from dreamgym.modeling.forward import pad_rows
from dreamgym.modeling.tokenizer import pad_id

__all__ = ["encode_prompt", "generate_ids", "generate_texts"]


def encode_prompt(tokenizer, text: str) -> list[int]:
    """Token ids of a prompt: ``[BOS] + encode(text)`` (no other special tokens)."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    bos = tokenizer.bos_token_id
    return ([bos] if bos is not None else []) + ids


class _Slots(DynamicLayer):
    """One layer's KV cache, preallocated for ``capacity`` positions and written in place.

    ``keys``/``values`` are views of the filled positions only, so attention reads what is there (a
    static cache reads all ``capacity`` slots every step) and nothing is concatenated per token (a dynamic
    cache copies itself every step). :meth:`batch_select_indices` drops finished rows.
    """

    def __init__(self, capacity: int):
        super().__init__()
        self.capacity, self.filled = capacity, 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        b, h, _, _ = key_states.shape
        self.device = key_states.device
        self._k = key_states.new_empty((b, h, self.capacity, key_states.shape[-1]))
        self._v = value_states.new_empty((b, h, self.capacity, value_states.shape[-1]))
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = key_states.shape[-2]
        if self.filled + n > self.capacity:
            raise RuntimeError(f"KV cache of {self.capacity} positions is full (internal error)")
        self._k[:, :, self.filled : self.filled + n] = key_states
        self._v[:, :, self.filled : self.filled + n] = value_states
        self.filled += n
        self.keys, self.values = self._k[:, :, : self.filled], self._v[:, :, : self.filled]
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if not self.is_initialized:
            return
        k = self._k.new_empty((len(indices), *self._k.shape[1:]))
        v = self._v.new_empty((len(indices), *self._v.shape[1:]))
        k[:, :, : self.filled] = self._k[indices, :, : self.filled]
        v[:, :, : self.filled] = self._v[indices, :, : self.filled]
        self._k, self._v = k, v
        self.keys, self.values = k[:, :, : self.filled], v[:, :, : self.filled]


def _warpers(model, kwargs: dict) -> LogitsProcessorList:
    """Sampling's temperature / top-k / top-p, with the model's generation config filling what is not given
    (as ``model.generate`` does)."""
    cfg = getattr(model, "generation_config", None)
    temperature = kwargs.get("temperature", getattr(cfg, "temperature", None) or 1.0)
    top_k = kwargs.get("top_k", getattr(cfg, "top_k", None))
    top_p = kwargs.get("top_p", getattr(cfg, "top_p", None))
    out = LogitsProcessorList()
    if temperature not in (None, 1.0):
        out.append(TemperatureLogitsWarper(float(temperature)))
    if top_k:
        out.append(TopKLogitsWarper(int(top_k)))
    if top_p is not None and top_p < 1.0:
        out.append(TopPLogitsWarper(float(top_p)))
    return out


@torch.no_grad()
def _decode(
    model,
    ids: torch.Tensor,
    mask: torch.Tensor,
    max_new_tokens: int,
    pad_token_id: int,
    eos_ids: list[int],
    processor=None,
    do_sample: bool = False,
    stop_strings: Sequence[str] | None = None,
    tokenizer=None,
    **kwargs: Any,
) -> list[list[int]]:
    """Decode one left-padded batch; each row's new tokens up to and including the one that ended it.

    A row ends at an EOS id, when its text ends with a stop string, or at ``max_new_tokens``. Finished
    rows leave the batch (their KV cache rows are dropped) when ``processor`` is None or can follow the
    change (it has ``select_rows(kept)``); otherwise they are fed padding until the batch ends, as
    ``model.generate`` does. The processor sees ``input_ids`` (rows still in the batch, prompt columns
    then generated ones) and the next-token scores, as a ``transformers`` ``LogitsProcessor``.
    """
    if stop_strings and tokenizer is None:
        raise ValueError(
            "generate_ids: stop_strings need the tokenizer (pass tokenizer=...) to read the text"
        )
    batch, width = ids.shape
    device = ids.device
    layers = [_Slots(width + max_new_tokens) for _ in range(model.config.get_text_config().num_hidden_layers)]
    cache = Cache(layers=layers)
    seqs = torch.full((batch, width + max_new_tokens), pad_token_id, dtype=torch.long, device=device)
    seqs[:, :width] = ids
    attn = torch.zeros((batch, width + max_new_tokens), dtype=torch.long, device=device)
    attn[:, :width] = mask
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    rows = list(range(batch))  # original index of each row still in the batch
    out: list[list[int]] = [[] for _ in range(batch)]
    done = [False] * batch
    eos, stops = set(eos_ids), tuple(stop_strings or ())
    longest_stop = max(map(len, stops), default=0)
    warpers = _warpers(model, kwargs) if do_sample else None
    compacts = processor is None or callable(getattr(processor, "select_rows", None))
    inputs, positions = ids, pos
    for step in range(max_new_tokens):
        n = width + step
        logits = model(
            input_ids=inputs, attention_mask=attn[:, : n], position_ids=positions,
            cache=cache, use_cache=True, logits_to_keep=1,
        ).logits[:, -1, :].float()  # fmt: skip
        if processor is not None:
            logits = processor(seqs[:, :n], logits)
        if do_sample:
            token = torch.multinomial(torch.softmax(warpers(seqs[:, :n], logits), dim=-1), 1).squeeze(1)
        else:
            token = logits.argmax(-1)
        live = torch.tensor([not d for d in done], device=device)
        token = torch.where(live, token, torch.full_like(token, pad_token_id))
        seqs[:, n], attn[:, n] = token, live.long()
        ended = [False] * len(rows)
        for r, t in enumerate(token.tolist()):  # one device sync per step
            if done[r]:
                continue
            ids_r = out[rows[r]]
            ids_r.append(t)
            ended[r] = t in eos or (
                longest_stop > 0
                and tokenizer.decode(ids_r[-longest_stop:], skip_special_tokens=False).endswith(stops)
            )
        done = [d or e for d, e in zip(done, ended, strict=True)]
        if all(done):
            break
        positions, inputs = positions[:, -1:] + 1, token[:, None]
        if compacts and any(ended):
            kept = [r for r, d in enumerate(done) if not d]
            keep = torch.tensor(kept, device=device)
            for layer in layers:
                layer.batch_select_indices(keep)
            seqs, attn, positions, inputs = (t[keep] for t in (seqs, attn, positions, inputs))
            rows, done = [rows[r] for r in kept], [False] * len(kept)
            if processor is not None:
                processor.select_rows(kept)
    return out


_DECODE_KWARGS = {
    "do_sample",
    "temperature",
    "top_k",
    "top_p",
    "stop_strings",
    "tokenizer",
    "cache_implementation",
}


def _plain_attention(model) -> bool:
    """Whether every layer of ``model`` keeps a plain KV cache (what :class:`_Slots` holds)."""
    cfg = model.config.get_text_config()
    kinds = set(getattr(cfg, "layer_types", None) or ["full_attention"])
    return not cfg.is_encoder_decoder and kinds <= {"full_attention", "sliding_attention"}


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
    prompt token sits at the same position, through :func:`_decode` (``model.generate`` for models whose
    layers are not all attention, or when ``cache_implementation`` names a ``transformers`` cache). A row's ids end with the token that ended it (EOS, the end of a stop
    string) or at ``max_new_tokens``.

    Args:
        model: a causal LM (``transformers`` ``PreTrainedModel``); put in eval mode for the call.
        prompts: prompt token ids (special tokens included as the caller wants them).
        max_new_tokens: generation budget per prompt.
        pad_token_id: the left-padding id.
        eos_token_id: id(s) that end a row.
        batch_size: prompts per decoding batch.
        processor_factory: ``(prompt_width, rows) -> LogitsProcessor`` built for each batch (``rows``:
            the indices into ``prompts`` of the batch's rows, in order), e.g. a grammar. A processor with
            ``select_rows(kept)`` lets ended rows leave the batch (see :func:`_decode`).
        generate_kwargs: ``do_sample``, ``temperature``, ``top_k``, ``top_p`` (unset: the model's
            generation config), ``stop_strings`` with ``tokenizer``, ``cache_implementation`` (``"slots"``
            or None: :func:`_decode`; ``"static"``, ``"dynamic"``, ...: ``model.generate`` with that
            ``transformers`` cache). Anything else is refused.
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    out: list[list[int]] = [[] for _ in prompts]
    eos = [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id)
    unknown = sorted(set(generate_kwargs) - _DECODE_KWARGS)
    if unknown:
        raise TypeError(
            f"generate_ids: unsupported keyword(s) {unknown}; supported: {sorted(_DECODE_KWARGS)}"
        )
    cache = generate_kwargs.pop("cache_implementation", None) or "slots"
    fast = cache == "slots" and _plain_attention(model)
    if cache != "slots":
        generate_kwargs["cache_implementation"] = cache
    with torch.autocast(device.type, enabled=False):  # the model's own dtype: see the module docstring
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            ids, mask = pad_rows([list(prompts[i]) for i in rows], pad_token_id, left=True)
            width = ids.shape[1]
            processor = processor_factory(width, list(rows)) if processor_factory is not None else None
            if fast:
                new = _decode(
                    model, ids.to(device), mask.to(device), max_new_tokens, pad_token_id, eos, processor,
                    **generate_kwargs,
                )  # fmt: skip
            else:
                kwargs = dict(generate_kwargs)
                if processor is not None:
                    kwargs.update(logits_processor=LogitsProcessorList([processor]))
                gen = model.generate(
                    input_ids=ids.to(device), attention_mask=mask.to(device), max_new_tokens=max_new_tokens,
                    pad_token_id=pad_token_id, eos_token_id=eos, use_cache=True, **kwargs,
                )  # fmt: skip
                new = [gen[r, width:].tolist() for r in range(len(rows))]
            for r, i in enumerate(rows):
                out[i] = new[r]
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
        cache_implementation: ``"slots"`` or None (:func:`_decode`'s cache), or a ``transformers`` KV-cache
            kind for ``model.generate`` (``"static"``, ``"dynamic"``); see :func:`generate_ids`.
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

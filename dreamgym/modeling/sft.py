"""The two SFT objectives and their batch encoders (the LightningModules in ``models/`` wire them).

* Experience model (:class:`models.experience_sft.ExperienceSFT`): :func:`encode_examples` lays out
  ``[BOS] prompt | reasoning | outcome [EOS]`` with a part id per token; :func:`experience_sft_loss` is
  the paper's joint objective, a token mean over the reasoning and over the outcome.
* Policy warm start (:class:`models.policy_sft.PolicySFT`): :func:`encode_bc_batch` lays out
  ``prompt | reply`` by the tokenizer's chat template; :func:`bc_loss` is behaviour cloning on the reply.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from dreamgym.modeling.chat import ChatCodec
from dreamgym.modeling.forward import pad_rows
from dreamgym.modeling.generation import encode_prompt
from dreamgym.modeling.tokenizer import pad_id

__all__ = [
    "PROMPT",
    "REASONING",
    "OUTCOME",
    "experience_sft_loss",
    "encode_examples",
    "encode_bc_batch",
    "bc_loss",
]

PROMPT, REASONING, OUTCOME = 0, 1, 2
"""Part ids of each token: prompt/padding (no loss), reasoning trace, outcome (next state, reward, EOS)."""


def _next_token_ce(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """``CE_t = -log softmax(logits[:, t-1])[input_ids[:, t]]`` for t >= 1, shape (B, T-1), in float32."""
    return F.cross_entropy(logits[:, :-1].transpose(1, 2).float(), input_ids[:, 1:], reduction="none")


def _mean_over(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``sum(values * mask) / max(sum(mask), 1)``."""
    m = mask.float()
    return (values * m).sum() / m.sum().clamp(min=1.0)


def experience_sft_loss(
    logits: torch.Tensor,
    input_ids: torch.Tensor,
    parts: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    prompt_weight: float = 0.0,
) -> dict[str, torch.Tensor]:
    """Masked next-token loss, split by target part.

    ``CE_t = -log softmax(logits[:, t-1])[input_ids[:, t]]`` for every position t >= 1;
    ``loss_reasoning = mean_{parts_t = 1} CE_t`` (0 if there is none), ``loss_state = mean_{parts_t = 2} CE_t``,
    ``loss = loss_reasoning + loss_state [+ prompt_weight * loss_prompt]`` with
    ``loss_prompt = mean_{parts_t = 0, attention_mask_t = 1} CE_t`` (a language-modelling term on the prompt,
    only with ``attention_mask`` and ``prompt_weight > 0``; otherwise prompt and padding carry no loss).

    Args:
        logits: (B, T, V) model outputs.
        input_ids: (B, T) token ids.
        parts: (B, T) long, the part of each token (0 prompt/pad, 1 reasoning, 2 outcome).
        attention_mask: (B, T), 1 on real tokens (tells prompt tokens from padding for the prompt term).
        prompt_weight: weight of the prompt term.

    Returns:
        dict with ``loss``, ``loss_reasoning``, ``loss_state`` (scalars) and ``n_reasoning``, ``n_state``
        (token counts); ``loss_prompt`` too when the prompt term is on.
    """
    if logits.dim() != 3 or input_ids.shape != logits.shape[:2] or parts.shape != input_ids.shape:
        raise ValueError(
            f"experience_sft_loss expects logits (B,T,V), input_ids (B,T), parts (B,T); got "
            f"{tuple(logits.shape)}, {tuple(input_ids.shape)}, {tuple(parts.shape)}"
        )
    ce = _next_token_ce(logits, input_ids)  # (B, T-1)
    tgt = parts[:, 1:]
    out: dict[str, torch.Tensor] = {}
    total = ce.new_zeros(())
    for name, part in (("reasoning", REASONING), ("state", OUTCOME)):
        mask = tgt == part
        out[f"loss_{name}"], out[f"n_{name}"] = _mean_over(ce, mask), mask.sum().float()
        total = total + out[f"loss_{name}"]
    if attention_mask is not None and prompt_weight > 0:
        out["loss_prompt"] = _mean_over(ce, (tgt == PROMPT) & attention_mask[:, 1:].bool())
        total = total + prompt_weight * out["loss_prompt"]
    out["loss"] = total
    return out


def _prompt_pieces(tokenizer, prompt: str) -> tuple[list[int], list[int], list[int]]:
    """``[BOS] + head``, ``refs`` and ``tail`` token ids of a prompt (:func:`build_prompt` layout): head is
    the task and history lines, refs the retrieved neighbours, tail the ``<state>`` section onwards."""
    cut_head = prompt.find("\n", prompt.find("<history>")) + 1 if "<history>" in prompt else 0
    cut_tail = prompt.rfind("<state>\n")
    cut_tail = cut_tail if cut_tail >= cut_head else cut_head
    enc = lambda text: tokenizer.encode(text, add_special_tokens=False) if text else []  # noqa: E731
    return encode_prompt(tokenizer, prompt[:cut_head]), enc(prompt[cut_head:cut_tail]), enc(prompt[cut_tail:])


def encode_examples(tokenizer, examples: list[dict[str, Any]], max_length: int) -> dict[str, torch.Tensor]:
    """Tokenize SFT examples into right-padded ``input_ids``, ``attention_mask``, ``parts`` (B, T).

    A sequence longer than ``max_length`` first loses the retrieved neighbours' tokens (from their end),
    then the current state's from its start; the task and history lines are always kept (they carry
    what the reward is checked against), and the target is kept whole unless it alone leaves no room
    (then its end is cut).
    """
    rows = []
    for ex in examples:
        head, refs, tail = _prompt_pieces(tokenizer, ex["prompt"])
        reasoning = tokenizer.encode(ex["reasoning"], add_special_tokens=False) if ex["reasoning"] else []
        outcome = tokenizer.encode(ex["outcome"], add_special_tokens=False) + [tokenizer.eos_token_id]
        target = reasoning + outcome
        parts_t = [REASONING] * len(reasoning) + [OUTCOME] * len(outcome)
        over = len(head) + len(refs) + len(tail) + len(target) - max_length
        if over > 0:
            refs = refs[: max(0, len(refs) - over)]
            over = len(head) + len(refs) + len(tail) + len(target) - max_length
        if over > 0:
            tail = tail[min(over, max(0, len(tail) - 1)) :]
        prompt = head + refs + tail
        if len(prompt) + len(target) > max_length:
            prompt = prompt[: max(1, max_length - len(target))]
            room = max_length - len(prompt)
            target, parts_t = target[:room], parts_t[:room]
        rows.append((prompt + target, [PROMPT] * len(prompt) + parts_t))
    input_ids, mask = pad_rows([ids for ids, _ in rows], pad_id(tokenizer))
    parts, _ = pad_rows([pt for _, pt in rows], PROMPT)
    return {"input_ids": input_ids, "attention_mask": mask, "parts": parts}


def encode_bc_batch(
    codec: ChatCodec, examples: list[dict[str, str]], max_length: int
) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``, ``attention_mask`` and ``target_mask`` (B, T) for ``examples``;
    ``target_mask`` is True exactly on the reply (assistant) tokens.

    Over-long prompts keep the chat template's tokens and the user text's last tokens, so the target
    always fits (a target longer than ``max_length`` minus the template and one prompt token is cut).
    """
    rows, masks = [], []
    for ex in examples:
        target = codec.reply_ids(ex["target"])[: max_length - codec.overhead - 1]
        prompt = codec.prompt_ids(ex["prompt"], max_length - len(target))
        rows.append(prompt + target)
        masks.append([False] * len(prompt) + [True] * len(target))
    ids, attn = pad_rows(rows, pad_id(codec.tokenizer, codec.stop_ids[0]))
    tgt = pad_rows(masks, False, dtype=torch.bool)[0]
    return {"input_ids": ids, "attention_mask": attn, "target_mask": tgt}


def bc_loss(
    logits: torch.Tensor,
    input_ids: torch.Tensor,
    target_mask: torch.Tensor,
    prompt_mask: torch.Tensor | None = None,
    prompt_weight: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked next-token loss and accuracy on target tokens.

    ``CE_t = -log softmax(logits[:, t-1])[input_ids[:, t]]``;
    ``loss = mean_{target_mask_t} CE_t + prompt_weight * mean_{prompt_mask_t} CE_t``
    (the second term only with ``prompt_mask`` and ``prompt_weight > 0``).

    Returns:
        ``(loss, token_acc)`` scalars; ``token_acc`` is over target tokens only.
    """
    if logits.shape[:2] != input_ids.shape or target_mask.shape != input_ids.shape:
        raise ValueError(
            f"bc_loss expects logits (B,T,V), input_ids (B,T), target_mask (B,T); got "
            f"{tuple(logits.shape)}, {tuple(input_ids.shape)}, {tuple(target_mask.shape)}"
        )
    ce = _next_token_ce(logits, input_ids)
    m = target_mask[:, 1:]
    loss = _mean_over(ce, m)
    acc = _mean_over((logits[:, :-1].argmax(-1) == input_ids[:, 1:]).float(), m)
    if prompt_mask is not None and prompt_weight > 0:
        loss = loss + prompt_weight * _mean_over(ce, prompt_mask[:, 1:])
    return loss, acc

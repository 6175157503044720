"""SFT of the experience model M_exp: reasoning trace, then next state and reward (DreamGym eq. SFT).

One sequence per example: ``[BOS] prompt | reasoning | outcome [EOS]``; the loss covers only the
reasoning and outcome tokens (never the prompt):

    L = mean_{t in R} CE_t + mean_{t in S} CE_t

i.e. the paper's joint objective ``-log P(R*|s,a,H,D_k) - log P(s',r|s,a,R*,H,D_k)``, each part as a
token mean (R: reasoning tokens, S: next state/reward/done tokens + EOS). Logged as ``train/loss``,
``train/loss_reasoning``, ``train/loss_state``.

Validation/test: the same losses teacher-forced (``val/loss``...), then generation from the real
prompts of held-out transitions, parsed and scored by :class:`dreamgym.fidelity.FidelityMeter`
(``val/reward_acc``, ``val/success_f1``, ``val/done_acc``, ``val/state_exact``, ``val/state_token_f1``,
``val/parse_fail_rate``, ...). At the end of fit the model is exported as an
:class:`~dreamgym.modeling.experience.ExperienceModel` directory (HF model + tokenizer + format + buffer)
to ``export_dir`` or ``<log_dir>/hf``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable

from dreamgym.fidelity import FidelityMeter
from dreamgym.modeling.experience import DECODINGS, save_experience_model
from dreamgym.modeling.factory import LanguageModel
from dreamgym.modeling.formats import ExperienceFormat, parse_target
from dreamgym.modeling.forward import logits_from_first_target
from dreamgym.modeling.generation import encode_prompt
from dreamgym.modeling.structured import generate_outcomes
from dreamgym.modeling.tokenizer import pad_id
from dreamgym.optim import configure_optimization

__all__ = ["ExperienceSFT", "experience_sft_loss", "encode_examples", "PROMPT", "REASONING", "OUTCOME"]

PROMPT, REASONING, OUTCOME = 0, 1, 2
"""Part ids of each token: prompt/padding (no loss), reasoning trace, outcome (next state, reward, EOS)."""


def experience_sft_loss(
    logits: torch.Tensor, input_ids: torch.Tensor, parts: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Masked next-token loss, split by target part.

    ``CE_t = -log softmax(logits[:, t-1])[input_ids[:, t]]`` for every position t >= 1;
    ``loss_reasoning = mean_{parts_t = 1} CE_t`` (0 if there is none), ``loss_state = mean_{parts_t = 2} CE_t``,
    ``loss = loss_reasoning + loss_state``. Prompt and padding tokens (part 0) carry no loss.

    Args:
        logits: (B, T, V) model outputs.
        input_ids: (B, T) token ids.
        parts: (B, T) long, the part of each token (0 prompt/pad, 1 reasoning, 2 outcome).

    Returns:
        dict with ``loss``, ``loss_reasoning``, ``loss_state`` (scalars) and ``n_reasoning``, ``n_state``
        (token counts).
    """
    if logits.dim() != 3 or input_ids.shape != logits.shape[:2] or parts.shape != input_ids.shape:
        raise ValueError(
            f"experience_sft_loss expects logits (B,T,V), input_ids (B,T), parts (B,T); got "
            f"{tuple(logits.shape)}, {tuple(input_ids.shape)}, {tuple(parts.shape)}"
        )
    ce = F.cross_entropy(
        logits[:, :-1].transpose(1, 2).float(), input_ids[:, 1:], reduction="none"
    )  # (B, T-1)
    tgt = parts[:, 1:]
    out: dict[str, torch.Tensor] = {}
    total = ce.new_zeros(())
    for name, part in (("reasoning", REASONING), ("state", OUTCOME)):
        mask = (tgt == part).float()
        n = mask.sum()
        value = (ce * mask).sum() / n.clamp(min=1.0)
        out[f"loss_{name}"], out[f"n_{name}"] = value, n
        total = total + value
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
    width = max(len(ids) for ids, _ in rows)
    pad = pad_id(tokenizer)
    input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    parts = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (ids, pt) in enumerate(rows):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        mask[i, : len(ids)] = 1
        parts[i, : len(ids)] = torch.tensor(pt)
    return {"input_ids": input_ids, "attention_mask": mask, "parts": parts}


class ExperienceSFT(L.LightningModule):
    """The experience model's SFT (see module docstring).

    The prompt/target switches (``k``, ``history_window``, ``use_reasoning``) are given once, on the
    data module; this module reads them from ``trainer.datamodule.format`` and exports them.

    Args:
        lm: which language model to build (preset + tokenizer, or a saved model path).
        optimizer: optimizer factory (given the parameters).
        lr_scheduler: optional scheduler factory (given the optimizer), stepped every optimizer step,
            e.g. ``torch.optim.lr_scheduler.OneCycleLR`` (warm-up then cosine decay).
        max_length: longest training sequence in tokens (prompt is cut from the left first).
        max_new_tokens: generation budget in validation/test.
        generate_batches: val/test batches that also generate and score fidelity (None = all, 0 = none).
        export_dir: where to save the HF model + tokenizer + format + buffer at the end of fit
            (default ``<log_dir>/hf``).
        decoding: how val/test generate (``"structured"`` or ``"free"``, see :class:`ExperienceModel`).
    """

    def __init__(
        self,
        lm: LanguageModel,
        optimizer: OptimizerCallable = torch.optim.AdamW,
        lr_scheduler: LRSchedulerCallable | None = None,
        max_length: int = 1024,
        max_new_tokens: int = 384,
        generate_batches: int | None = None,
        export_dir: str | None = None,
        decoding: str = "structured",
    ):
        super().__init__()
        self.save_hyperparameters(ignore=["lm", "optimizer"])
        self.model, self.tokenizer = lm.build()
        self.optimizer_factory, self.scheduler_factory = optimizer, lr_scheduler
        self.max_length, self.max_new_tokens = max_length, max_new_tokens
        self.generate_batches, self.export_dir = generate_batches, export_dir
        if decoding not in DECODINGS:
            raise ValueError(f"ExperienceSFT.decoding={decoding!r}; choose one of {DECODINGS}")
        self.decoding = decoding
        self.meters = {"val": FidelityMeter(), "test": FidelityMeter()}
        self.exported_to: Path | None = None

    def configure_optimizers(self):
        return configure_optimization(
            self.model.parameters(), self.optimizer_factory, self.scheduler_factory, self.trainer.max_steps
        )

    @property
    def format(self) -> ExperienceFormat:
        """The data module's prompt/target layout (default layout when there is no trainer/data)."""
        dm = getattr(self._trainer, "datamodule", None) if self._trainer is not None else None
        return getattr(dm, "format", None) or ExperienceFormat()

    def encode(self, batch: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """The batch's tensors (:func:`encode_examples`) on the module's device."""
        return {
            k: v.to(self.device) for k, v in encode_examples(self.tokenizer, batch, self.max_length).items()
        }

    def _losses(self, batch: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        return self.losses_from_encoded(self.encode(batch))

    def losses_from_encoded(self, enc: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """:func:`experience_sft_loss` of an :meth:`encode` batch, plus ``tokens`` (non-padding)."""
        logits, start = logits_from_first_target(
            self.model, enc["input_ids"], enc["attention_mask"], enc["parts"] > PROMPT
        )
        out = experience_sft_loss(logits, enc["input_ids"][:, start:], enc["parts"][:, start:])
        out["tokens"] = enc["attention_mask"].sum()
        return out

    def training_step(self, batch: list[dict[str, Any]], batch_idx: int) -> torch.Tensor:
        t0 = time.perf_counter()
        out = self._losses(batch)
        bs = len(batch)
        self.log("train/loss", out["loss"], prog_bar=True, batch_size=bs)
        self.log("train/loss_state", out["loss_state"], batch_size=bs)
        if out["n_reasoning"] > 0:
            self.log("train/loss_reasoning", out["loss_reasoning"], batch_size=bs)
        self.log(
            "perf/train_tokens_per_s",
            out["tokens"].float() / max(time.perf_counter() - t0, 1e-6),
            batch_size=bs,
        )
        return out["loss"]

    def _eval_step(self, stage: str, batch: list[dict[str, Any]], batch_idx: int) -> None:
        out = self._losses(batch)
        bs = len(batch)
        self.log(f"{stage}/loss", out["loss"], batch_size=bs)
        self.log(f"{stage}/loss_state", out["loss_state"], batch_size=bs)
        if out["n_reasoning"] > 0:
            self.log(f"{stage}/loss_reasoning", out["loss_reasoning"], batch_size=bs)
        if self.generate_batches is not None and batch_idx >= self.generate_batches:
            return
        texts, cut = generate_outcomes(
            self.model,
            self.tokenizer,
            [ex["prompt"] for ex in batch],
            max_new_tokens=self.max_new_tokens,
            use_reasoning=self.format.use_reasoning,
            structured=self.decoding == "structured",
            batch_size=len(batch),
            max_prompt_tokens=self.max_length,
        )
        for ex, text, was_cut in zip(batch, texts, cut, strict=True):
            pred = parse_target(text)
            pred.cut = was_cut
            self.meters[stage].update(pred, ex["state"], ex["next_state"], ex["reward"], ex["done"])

    def validation_step(self, batch, batch_idx):
        self._eval_step("val", batch, batch_idx)

    def test_step(self, batch, batch_idx):
        self._eval_step("test", batch, batch_idx)

    def _log_fidelity(self, stage: str) -> None:
        meter = self.meters[stage]
        if meter.n:
            for name, value in meter.compute().items():
                self.log(f"{stage}/{name}", value)
        meter.reset()

    def on_validation_epoch_end(self) -> None:
        self._log_fidelity("val")

    def on_test_epoch_end(self) -> None:
        self._log_fidelity("test")

    def on_fit_end(self) -> None:
        if self.trainer.is_global_zero:
            self.exported_to = self.export()

    def export(self, path: str | None = None) -> Path:
        """Save the model as an :class:`ExperienceModel` directory (HF model + tokenizer + format + buffer)."""
        log_dir = self.trainer.log_dir if self._trainer is not None else None
        target = Path(path or self.export_dir or Path(log_dir or ".") / "hf")
        dm = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        return save_experience_model(
            target, self.model, self.tokenizer, self.format, getattr(dm, "buffer", None)
        )

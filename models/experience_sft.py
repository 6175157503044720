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
from typing import Any, Protocol, runtime_checkable

import lightning as L
import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable

from dreamgym.checkpoint_io import check_export_dir, export_atomically
from dreamgym.fidelity import FidelityMeter
from dreamgym.modeling.experience import DECODINGS, save_experience_model
from dreamgym.modeling.factory import LanguageModel
from dreamgym.modeling.formats import ExperienceFormat, parse_target
from dreamgym.modeling.forward import logits_from_first_target
from dreamgym.modeling.sft import PROMPT, encode_examples, experience_sft_loss
from dreamgym.modeling.structured import generate_outcomes
from dreamgym.optim import configure_optimization
from dreamgym.retrieval import ReplayBuffer
from models.attached import attached_trainer

__all__ = ["ExperienceSFT", "ExperienceSource"]


@runtime_checkable
class ExperienceSource(Protocol):
    """What :class:`ExperienceSFT` takes from its data module."""

    format: ExperienceFormat  # the prompt/target layout, exported with the model
    buffer: ReplayBuffer | None  # the train transitions the exported model retrieves from


class ExperienceSFT(L.LightningModule):
    """The experience model's SFT (see module docstring).

    What it needs from its data is the :class:`ExperienceSource` protocol: the prompt/target layout
    (``format``: ``k``, ``history_window``, ``use_reasoning``, given once, on the data module) and the
    replay buffer the exported model retrieves from (``buffer``). :meth:`setup` takes both from the
    trainer's data module (:class:`datamodules.trajectories.TrajectoryDataModule` implements it); without
    a trainer, give ``format`` here and the buffer to :meth:`export`.

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
        overwrite: replace an existing export (by default a folder holding files is refused before
            training, so an earlier model is never lost by a repeated command).
        decoding: how val/test generate (``"structured"`` or ``"free"``, see :class:`ExperienceModel`).
        format: the prompt/target layout when there is no data module to take it from (default layout
            when neither gives one); a data module whose format differs is refused.
        prompt_loss_weight: weight of a language-modelling loss on the prompt tokens in training (0: the
            target only, the paper's objective). Prompts repeat what the target must copy (ids, prices,
            the instruction's terms recur across task, history, neighbours and state), which gives a
            small model trained from scratch copying signal, as for the policy warm start.
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
        overwrite: bool = False,
        decoding: str = "structured",
        format: ExperienceFormat | None = None,
        prompt_loss_weight: float = 0.0,
    ):
        super().__init__()
        self.save_hyperparameters(ignore=["lm", "optimizer"])
        self.model, self.tokenizer = lm.build()
        self.optimizer_factory, self.scheduler_factory = optimizer, lr_scheduler
        self.max_length, self.max_new_tokens = max_length, max_new_tokens
        self.generate_batches, self.export_dir = generate_batches, export_dir
        self.overwrite = overwrite
        if decoding not in DECODINGS:
            raise ValueError(f"ExperienceSFT.decoding={decoding!r}; choose one of {DECODINGS}")
        self.decoding = decoding
        self.meters = {"val": FidelityMeter(), "test": FidelityMeter()}
        self.exported_to: Path | None = None
        self._format, self.buffer = format, None
        if prompt_loss_weight < 0:
            raise ValueError(f"ExperienceSFT.prompt_loss_weight must be >= 0, got {prompt_loss_weight}")
        self.prompt_loss_weight = prompt_loss_weight

    def configure_optimizers(self):
        return configure_optimization(
            self.model.parameters(), self.optimizer_factory, self.scheduler_factory, self.trainer.max_steps
        )

    @property
    def format(self) -> ExperienceFormat:
        """The prompt/target layout: given, or the data module's (after :meth:`setup`), else the default."""
        return self._format or ExperienceFormat()

    def setup(self, stage: str) -> None:
        """Take the layout and the replay buffer from the data module (set up before this hook runs)."""
        dm = self.trainer.datamodule
        if dm is None:
            return
        if not isinstance(dm, ExperienceSource):
            raise TypeError(
                f"ExperienceSFT needs a data module with `format` (ExperienceFormat) and `buffer` "
                f"(ReplayBuffer | None), e.g. datamodules.trajectories.TrajectoryDataModule; got {type(dm).__name__}"
            )
        if self._format is not None and self._format != dm.format:
            raise ValueError(
                f"ExperienceSFT.format={self._format} differs from the data module's {dm.format}; "
                "give the layout once, on the data module"
            )
        self._format, self.buffer = dm.format, dm.buffer

    def encode(self, batch: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """The batch's tensors (:func:`encode_examples`) on the module's device."""
        return {
            k: v.to(self.device) for k, v in encode_examples(self.tokenizer, batch, self.max_length).items()
        }

    def _losses(self, batch: list[dict[str, Any]], train: bool = False) -> dict[str, torch.Tensor]:
        return self.losses_from_encoded(self.encode(batch), train)

    def losses_from_encoded(
        self, enc: dict[str, torch.Tensor], train: bool = False
    ) -> dict[str, torch.Tensor]:
        """:func:`experience_sft_loss` of an :meth:`encode` batch, plus ``tokens`` (non-padding); the prompt
        term only in training (validation reports the paper's objective)."""
        if train and self.prompt_loss_weight > 0:  # the prompt term needs logits at every position
            logits = self.model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits
            out = experience_sft_loss(
                logits, enc["input_ids"], enc["parts"], enc["attention_mask"], self.prompt_loss_weight
            )
        else:
            logits, start = logits_from_first_target(
                self.model, enc["input_ids"], enc["attention_mask"], enc["parts"] > PROMPT
            )
            out = experience_sft_loss(logits, enc["input_ids"][:, start:], enc["parts"][:, start:])
        out["tokens"] = enc["attention_mask"].sum()
        return out

    def training_step(self, batch: list[dict[str, Any]], batch_idx: int) -> torch.Tensor:
        t0 = time.perf_counter()
        out = self._losses(batch, train=True)
        bs = len(batch)
        self.log("train/loss", out["loss"], prog_bar=True, batch_size=bs)
        self.log("train/loss_state", out["loss_state"], batch_size=bs)
        if out["n_reasoning"] > 0:
            self.log("train/loss_reasoning", out["loss_reasoning"], batch_size=bs)
        if "loss_prompt" in out:
            self.log("train/loss_prompt", out["loss_prompt"], batch_size=bs)
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

    def on_fit_start(self) -> None:
        check_export_dir(self.export_dir, "model.init_args.export_dir", replace=self.overwrite)

    def on_fit_end(self) -> None:
        if self.trainer.is_global_zero:
            self.exported_to = self.export()

    def export(self, path: str | None = None, buffer: ReplayBuffer | None = None) -> Path:
        """Save the model as an :class:`ExperienceModel` directory (HF model + tokenizer + format + the
        replay buffer: ``buffer``, else the data module's)."""
        trainer = attached_trainer(self)
        log_dir = trainer.log_dir if trainer is not None else None
        target = Path(path or self.export_dir or Path(log_dir or ".") / "hf")
        return export_atomically(
            target,
            lambda d: save_experience_model(
                d, self.model, self.tokenizer, self.format, buffer or self.buffer
            ),
        )

"""Fine-tuning of the reward judge on terminal steps: binary cross-entropy on P(success), and with a score
head on the step's score too.

    L = mean_i BCE(sigmoid(z_i), y_i) + w * mean_i BCE(sigmoid(u_i), s_i),
    (z_i, u_i) = judge(instruction_i, page_i, action_i),  y_i in {0, 1},  s_i in [0, 1] (the real score)

(the second term only with :attr:`JudgeBackbone.score_head`; ``w``: ``score_weight``).

A thin wrapper: the judge (:class:`dreamgym.modeling.judge.RewardJudge`, built from a
:class:`~dreamgym.modeling.judge.JudgeBackbone`) owns its tokenizer and text pairs; the data module
(:class:`datamodules.terminal_steps.TerminalStepDataModule`) gives plain dicts. Logged: ``train/loss``,
``train/acc`` (and ``train/score_loss``); on held-out steps ``val/loss``, ``val/score_mae``, ``val/success_precision``,
``val/success_recall``, ``val/tpr``, ``val/fpr``, ``val/balanced_acc``. At the end of fit the judge is
saved to ``export_dir`` (by default ``<experience model>/judge``, where the experience model loads it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable

import dreamgym.envs  # noqa: F401  (registers the judge's page views)
from dreamgym.checkpoint_io import check_export_dir, export_atomically
from dreamgym.fidelity import binary_metrics
from dreamgym.modeling.judge import JudgeBackbone
from models.attached import attached_trainer

__all__ = ["RewardJudgeFit"]


class RewardJudgeFit(L.LightningModule):
    """Fine-tune the reward judge (module docstring).

    Args:
        judge: which encoder to start from (the bundled pretrained MiniLM by default).
        optimizer: optimizer factory (given the trainable parameters).
        lr_scheduler: optional scheduler factory, stepped every optimizer step.
        freeze_word_embeddings: keep the pretrained word embeddings fixed (a third faster on a CPU: no
            gradient or optimizer state for the 30k x 384 table).
        score_weight: ``w``, the weight of the score term (a judge with a score head; module docstring).
        export_dir: where the trained judge is saved at the end of fit (default ``<log_dir>/judge``).
        overwrite: replace an existing export (refused before training otherwise).
    """

    def __init__(
        self,
        judge: JudgeBackbone | None = None,
        optimizer: OptimizerCallable = torch.optim.AdamW,
        lr_scheduler: LRSchedulerCallable | None = None,
        freeze_word_embeddings: bool = True,
        export_dir: str | None = None,
        overwrite: bool = False,
        score_weight: float = 1.0,
    ):
        super().__init__()
        self.save_hyperparameters(ignore=["judge", "optimizer", "lr_scheduler"])
        self.judge = (judge or JudgeBackbone()).build()
        self.judge.model.train()  # from_pretrained leaves it in eval mode (dropout off)
        self.judge.model.requires_grad_(True)
        if freeze_word_embeddings:
            self.judge.model.get_input_embeddings().weight.requires_grad_(False)
        self.optimizer_factory, self.scheduler_factory = optimizer, lr_scheduler
        self.export_dir, self.overwrite, self.score_weight = export_dir, overwrite, float(score_weight)
        self.exported_to: Path | None = None
        self._counts = torch.zeros(4, dtype=torch.long)  # tp, fp, tn, fn of the current validation

    def configure_optimizers(self):
        from dreamgym.optim import configure_optimization

        params = [p for p in self.judge.parameters() if p.requires_grad]
        return configure_optimization(
            params, self.optimizer_factory, self.scheduler_factory, self.trainer.max_steps
        )

    def _logits_labels(
        self, batch: list[dict[str, Any]]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """Success logits and labels, then the score logits (None without a score head) and targets."""
        enc = self.judge.encode(
            [e["instruction"] for e in batch], [e["state"] for e in batch], [e["action"] for e in batch],
            [e.get("history", ()) for e in batch],
        )  # fmt: skip
        labels = torch.tensor([e["label"] for e in batch], dtype=torch.float32, device=self.device)
        scores = torch.tensor(
            [e.get("score", e["label"]) for e in batch], dtype=torch.float32, device=self.device
        )
        logits = self.judge.logits(**enc).float()
        return logits[:, 0], labels, (logits[:, 1] if self.judge.has_score_head else None), scores

    def training_step(self, batch: list[dict[str, Any]], batch_idx: int) -> torch.Tensor:
        logits, labels, score_logits, scores = self._logits_labels(batch)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)
        if score_logits is not None:
            score_loss = torch.nn.functional.binary_cross_entropy_with_logits(score_logits, scores)
            self.log("train/score_loss", score_loss, batch_size=len(batch))
            loss = loss + self.score_weight * score_loss
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch))
        self.log("train/acc", ((logits > 0).float() == labels).float().mean(), batch_size=len(batch))
        return loss

    def validation_step(self, batch: list[dict[str, Any]], batch_idx: int) -> None:
        logits, labels, score_logits, scores = self._logits_labels(batch)
        self.log(
            "val/loss",
            torch.nn.functional.binary_cross_entropy_with_logits(logits, labels),
            batch_size=len(batch),
        )
        if score_logits is not None:
            mae = (torch.sigmoid(score_logits) - scores).abs().mean()
            self.log("val/score_mae", mae, batch_size=len(batch))
        pred = torch.sigmoid(logits) >= self.judge.threshold
        real = labels > 0.5
        self._counts += torch.tensor(
            [(pred & real).sum(), (pred & ~real).sum(), (~pred & ~real).sum(), (~pred & real).sum()]
        ).cpu()

    def on_validation_epoch_end(self) -> None:
        if self._counts.sum() > 0:
            for name, value in binary_metrics(*self._counts.tolist()).items():
                if name != "n":
                    self.log(f"val/{name}", value)
        self._counts.zero_()

    def on_fit_start(self) -> None:
        check_export_dir(
            self.export_dir, "model.init_args.export_dir", "the reward judge", replace=self.overwrite
        )

    def on_fit_end(self) -> None:
        if self.trainer.is_global_zero:
            self.exported_to = self.export()

    def export(self, path: str | None = None) -> Path:
        """Save the judge (:meth:`RewardJudge.save_pretrained`) to ``path``, ``export_dir`` or ``<log_dir>/judge``."""
        trainer = attached_trainer(self)
        log_dir = trainer.log_dir if trainer is not None else None
        target = Path(path or self.export_dir or Path(log_dir or ".") / "judge")
        return export_atomically(target, self.judge.save_pretrained)

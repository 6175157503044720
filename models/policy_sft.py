"""Behaviour-cloning warm start of the policy (the paper's SFT baseline): next-token loss on the
action tokens, optionally plus a down-weighted language-modelling loss on the prompt.

One sequence per example, laid out by the tokenizer's chat template (:class:`dreamgym.modeling.chat.ChatCodec`):
``prompt ids | reply ids`` (the plain template: ``[BOS] prompt | " " target [EOS]``), the loss on the reply ids;
``loss = mean_{t in target+EOS} CE_t + prompt_loss_weight * mean_{t in prompt} CE_t``.
The prompt term (``train_on_inputs`` in other trainers; off by default) gives a small model trained
from scratch far more copying signal than the few action tokens do: the listed actions repeat the
product ids of the page, the results page repeats the query, history repeats states. That is what a
policy needs to copy ids and instruction words into its actions.

Logged: ``train/loss``, ``val/loss``, ``val/token_acc`` (teacher-forced accuracy on target tokens) and,
with an ``eval_env``, RL's held-out episode metrics (``val/success_rate``, ...). At the end of fit the
policy is exported with :func:`~dreamgym.modeling.factory.export_model` (model + tokenizer, LoRA adapters merged) to ``save_dir``,
the ``path`` the RL configs load.
"""

from __future__ import annotations

import lightning as L
import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable

from dreamgym.checkpoint_io import check_export_dir, export_atomically
from dreamgym.envs.factory import EnvFactory
from dreamgym.modeling.chat import ChatCodec
from dreamgym.modeling.factory import LanguageModel, export_model
from dreamgym.modeling.forward import logits_from_first_target
from dreamgym.modeling.policy_format import PolicyFormat
from dreamgym.modeling.sft import bc_loss, encode_bc_batch
from dreamgym.optim import configure_optimization
from dreamgym.rl.collector import RolloutCollector

__all__ = ["PolicySFT"]


class PolicySFT(L.LightningModule):
    """Behaviour cloning on expert steps.

    Args:
        policy: the policy LM to train (fresh preset + tokenizer, or a saved dir).
        optimizer: optimizer factory (called with the model's parameters).
        lr_scheduler: optional scheduler factory (given the optimizer), stepped every optimizer step,
            e.g. ``torch.optim.lr_scheduler.OneCycleLR`` (warm-up then cosine decay).
        max_length: token budget per example (the prompt's user text cut from the left).
        save_dir: export the trained policy here (``save_pretrained``) at the end of fit.
        overwrite: replace an existing export (by default a folder holding files is refused before
            training, so an earlier model is never lost by a repeated command).
        prompt_loss_weight: weight of the language-modelling loss on prompt tokens (0: action tokens
            only; see module docstring). Validation always reports the action-token loss alone.
        format: the prompt format the data module lays examples out with (the CLI links it from
            ``data.init_args.format``); saved with the export as ``policy_format.json``, which RL's
            collector then uses, so the format is written once.
        eval_env: the real env on the held-out split: at the end of each validation the policy plays
            ``eval_tasks`` greedy episodes there and logs the same ``val/success_rate``, ``val/score_mean``,
            ... as RL, so the warm start and RL compare in TensorBoard (None: losses only).
        eval_tasks: held-out tasks ``0..eval_tasks-1`` of ``eval_env`` (one greedy episode each).
        collector: how those episodes are played (generation budget, constrained decoding, as in the RL
            config); it prompts with ``format``.
    """

    def __init__(
        self,
        policy: LanguageModel,
        optimizer: OptimizerCallable = torch.optim.AdamW,
        lr_scheduler: LRSchedulerCallable | None = None,
        max_length: int = 1024,
        save_dir: str | None = None,
        overwrite: bool = False,
        prompt_loss_weight: float = 0.0,
        format: PolicyFormat | None = None,
        eval_env: EnvFactory | None = None,
        eval_tasks: int = 0,
        collector: RolloutCollector | None = None,
    ):
        super().__init__()
        if prompt_loss_weight < 0:
            raise ValueError(f"PolicySFT.prompt_loss_weight must be >= 0, got {prompt_loss_weight}")
        self.model, self.tokenizer = policy.build()
        self.codec = ChatCodec(self.tokenizer, self.model)
        self.optimizer_factory, self.scheduler_factory = optimizer, lr_scheduler
        self.max_length, self.save_dir = max_length, save_dir
        self.overwrite = overwrite
        self.prompt_loss_weight = prompt_loss_weight
        self.format = format
        if eval_tasks < 0 or (eval_tasks and eval_env is None):
            raise ValueError(
                f"PolicySFT.eval_tasks={eval_tasks!r} needs eval_tasks >= 0 and an eval_env when > 0 "
                "(e.g. dreamgym.envs.factory.EnvFactory with split: test)"
            )
        self.eval_env, self.eval_tasks = eval_env, eval_tasks
        self.collector = collector or RolloutCollector()
        if format is not None:
            self.collector.use_format(format, "the data module's format")
        self._env = None  # built at the first evaluation, kept out of the module tree

    def configure_optimizers(self):
        return configure_optimization(
            [p for p in self.model.parameters() if p.requires_grad],
            self.optimizer_factory,
            self.scheduler_factory,
            self.trainer.max_steps,
        )

    def encode(self, examples: list[dict[str, str]]) -> dict[str, torch.Tensor]:
        """The batch's tensors (:func:`encode_bc_batch`) on the module's device."""
        return {
            k: v.to(self.device) for k, v in encode_bc_batch(self.codec, examples, self.max_length).items()
        }

    def _step(self, examples: list[dict[str, str]], train: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        return self.loss_from_encoded(self.encode(examples), train)

    def loss_from_encoded(
        self, b: dict[str, torch.Tensor], train: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(loss, token accuracy)`` of an :meth:`encode` batch."""
        if train and self.prompt_loss_weight > 0:  # the prompt term needs logits at every position
            logits = self.model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
            prompt = b["attention_mask"].bool() & ~b["target_mask"]
            return bc_loss(logits, b["input_ids"], b["target_mask"], prompt, self.prompt_loss_weight)
        logits, start = logits_from_first_target(
            self.model, b["input_ids"], b["attention_mask"], b["target_mask"]
        )
        return bc_loss(logits, b["input_ids"][:, start:], b["target_mask"][:, start:])

    def training_step(self, batch: list[dict[str, str]], batch_idx: int) -> torch.Tensor:
        loss, acc = self._step(batch, train=True)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch))
        self.log("train/token_acc", acc, batch_size=len(batch))
        return loss

    def validation_step(self, batch: list[dict[str, str]], batch_idx: int) -> None:
        loss, acc = self._step(batch)
        self.log("val/loss", loss, prog_bar=True, batch_size=len(batch), sync_dist=True)
        self.log("val/token_acc", acc, batch_size=len(batch), sync_dist=True)

    def on_validation_epoch_end(self) -> None:
        if self.eval_env is None or not self.eval_tasks or self.trainer.sanity_checking:
            return
        if self._env is None:
            self._env = self.eval_env.build()
        coll = self.collector.collect(
            self._env, self.model, self.tokenizer, list(range(self.eval_tasks)), 1, greedy=True
        )
        for k, v in coll.held_out_metrics().items():
            self.log(f"val/{k}", v, batch_size=len(coll.episodes), sync_dist=True)

    def on_fit_start(self) -> None:
        check_export_dir(self.save_dir, "model.init_args.save_dir", replace=self.overwrite)

    def on_fit_end(self) -> None:
        if self.save_dir and self.trainer.is_global_zero:
            export_atomically(
                self.save_dir, lambda d: export_model(self.model, self.tokenizer, d, self.format)
            )

"""Optimizer + optional LR scheduler from LightningCLI-injected factories, shared by the SFT modules."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

__all__ = ["configure_optimization"]


def configure_optimization(
    params: Iterable[torch.nn.Parameter],
    optimizer: Callable[..., torch.optim.Optimizer],
    lr_scheduler: Callable[[torch.optim.Optimizer], Any] | None = None,
    max_steps: int | None = None,
) -> torch.optim.Optimizer | dict[str, Any]:
    """What ``configure_optimizers`` returns: the optimizer, plus the scheduler stepped every step if given.

    A scheduler with a fixed length (``total_steps``, e.g. ``OneCycleLR``) shorter than the trainer's
    ``max_steps`` would fail at its last step; that is caught here, before training starts.
    """
    opt = optimizer(params)
    if lr_scheduler is None:
        return opt
    sched = lr_scheduler(opt)
    total = getattr(sched, "total_steps", None)
    if total is not None and max_steps is not None and max_steps > 0 and total < max_steps:
        raise ValueError(
            f"lr_scheduler total_steps={total} is below trainer.max_steps={max_steps}; set "
            f"--model.init_args.lr_scheduler.init_args.total_steps={max_steps} (or lower trainer.max_steps)"
        )
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

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
) -> torch.optim.Optimizer | dict[str, Any]:
    """What ``configure_optimizers`` returns: the optimizer, plus the scheduler stepped every step if given."""
    opt = optimizer(params)
    if lr_scheduler is None:
        return opt
    return {"optimizer": opt, "lr_scheduler": {"scheduler": lr_scheduler(opt), "interval": "step"}}

"""Whether a LightningModule runs under a trainer, asked through Lightning's public API.

The modules here are also used outside ``fit`` (tests, scripts, a pipeline stage calling ``export``),
where no trainer is attached; :func:`attached_trainer` tells the two apart without reading Lightning's
private ``_trainer``.
"""

from __future__ import annotations

import lightning as L

__all__ = ["attached_trainer"]


def attached_trainer(module: L.LightningModule) -> L.Trainer | None:
    """The trainer ``module`` is attached to, or ``None`` when it is used on its own.

    ``LightningModule.trainer`` raises ``RuntimeError`` ("... is not attached to a `Trainer`") when none
    is (Lightning 2.x); that is the only error caught.
    """
    try:
        return module.trainer
    except RuntimeError:
        return None

"""Checkpoints that survive a kill: :class:`AtomicCheckpointIO` writes beside the destination and renames.

Lightning's ``TorchCheckpointIO`` writes a local checkpoint through an fsspec transaction: a temporary file
under ``$TMPDIR``, then moved onto ``last.ckpt``. When ``$TMPDIR`` and the run folder are on different
filesystems the move is a copy, and a kill during it leaves ``last.ckpt`` cut or empty (the last good
checkpoint is gone). Here the temporary file sits in the destination's own folder, is flushed to disk
(``fsync``) and renamed over the destination, which is atomic on one filesystem: at any moment the
path holds the old checkpoint or the new one, whole. The CLI installs it on every trainer whose strategy
saves through a checkpoint IO (``dreamgym.cli``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

__all__ = ["AtomicCheckpointIO", "check_checkpoint_file"]


class AtomicCheckpointIO(TorchCheckpointIO):
    """``TorchCheckpointIO`` whose local saves are atomic (temporary file in the same folder + fsync +
    rename); remote URLs (``s3://``, ...) go through Lightning's own path."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any | None = None) -> None:
        if "://" in str(path):
            return super().save_checkpoint(checkpoint, path, storage_options)
        if storage_options is not None:
            raise TypeError(
                f"{type(self).__name__}.save_checkpoint takes no storage_options for a local path, got {storage_options}"
            )
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.partial")
        try:
            with tmp.open("wb") as fh:
                torch.save(checkpoint, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)


def check_checkpoint_file(path: str | os.PathLike) -> None:
    """Refuse a checkpoint file that cannot be a whole one (empty: a save was cut by a kill), with the fix.

    Raises:
        ValueError: naming the file.
    """
    path = Path(path)
    if path.is_file() and path.stat().st_size == 0:
        raise ValueError(
            f"checkpoint {path} is empty (0 bytes): a save was interrupted by a kill (before dreamgym wrote "
            "checkpoints atomically); delete it and resume from another checkpoint (--ckpt_path PATH) or start fresh"
        )

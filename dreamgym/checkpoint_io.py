"""Checkpoints and exports that survive a kill: :class:`AtomicCheckpointIO` writes beside the destination
and renames; :func:`export_atomically` does the same for an exported model folder.

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
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

__all__ = ["AtomicCheckpointIO", "check_checkpoint_file", "check_export_dir", "export_atomically"]


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


def check_export_dir(
    path: str | os.PathLike | None, field: str, what: str = "the exported model", replace: bool | None = None
) -> None:
    """Refuse, before any training, a folder this run must write (``what``: the exported model, the logs)
    that cannot be written: ``path`` (when set) must be a folder or not exist yet, and its nearest
    existing ancestor must be a writable folder. With ``replace=False`` a folder that already holds files
    (an earlier export) is refused too: replacing it must be asked for (``replace=None``: not checked).

    Raises:
        ValueError: naming ``field`` (the config key), the path and the fix.
    """
    if path is None:
        return
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{field}={str(path)!r} is a file, not a folder; choose a folder for {what}")
    if replace is False and path.is_dir() and any(path.iterdir()):
        raise ValueError(
            f"{field}={str(path)!r} already holds {what} of an earlier run; pass "
            f"--{field.rsplit('.', 1)[0]}.overwrite=true to replace it (only once the new one is complete), "
            "or choose another folder (checked before training, nothing was trained)"
        )
    parent = path.resolve()
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not _writable(parent):
        raise ValueError(
            f"{field}={str(path)!r}: {str(parent)!r} is not a writable folder for {what}; choose a writable "
            "folder (checked before training, nothing was trained)"
        )


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def export_atomically(path: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """Export a folder so that a kill never leaves a half-written one at ``path``: ``write(tmp)`` fills a
    new folder beside it (``.<name>.partial``); only when it is complete does it take ``path``'s place
    (an existing export is moved aside first and deleted last). Returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp, old = path.with_name(f".{path.name}.partial"), path.with_name(f".{path.name}.old")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir()
        write(tmp)
        if path.exists():
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    return path

"""Checkpoints and exports that survive a kill: :class:`AtomicCheckpointIO` writes beside the destination
and renames; :func:`export_atomically` does the same for an exported model folder.

Lightning's ``TorchCheckpointIO`` writes a local checkpoint through an fsspec transaction: a temporary file
under ``$TMPDIR``, then moved onto ``last.ckpt``. When ``$TMPDIR`` and the run folder are on different
filesystems the move is a copy, and a kill during it leaves ``last.ckpt`` cut or empty (the last good
checkpoint is gone). Here the temporary file sits in the destination's own folder, is flushed to disk
(``fsync``) and renamed over the destination, which is atomic on one filesystem: at any moment the
path holds the old checkpoint or the new one, whole. The CLI installs it on every trainer whose strategy
saves through a checkpoint IO (``dreamgym.lightning_cli``).
"""

from __future__ import annotations

import os
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

__all__ = [
    "AtomicCheckpointIO",
    "RL_STATE_KEY",
    "check_checkpoint_file",
    "check_checkpoint_fits",
    "check_export_dir",
    "export_atomically",
    "newest_last_checkpoint",
]

RL_STATE_KEY = "dreamgym_rl"
"""Where an RL fit's checkpoint keeps its own state (schedule, replay buffers, RNG); a LightningModule that
writes such a key names it in its class attribute ``checkpoint_state_key``."""


def newest_last_checkpoint(root: str | os.PathLike) -> Path | None:
    """The most recently written ``version_*/checkpoints/last.ckpt`` under a logger's ``save_dir/name``
    (what ``--ckpt_path last`` resumes), ``None`` when there is none."""
    found = sorted(Path(root).glob("version_*/checkpoints/last.ckpt"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


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
    if not path.is_file():
        return
    size = path.stat().st_size
    if size == 0:
        raise ValueError(
            f"checkpoint {path} is empty (0 bytes): a save was interrupted by a kill (before dreamgym wrote "
            "checkpoints atomically); delete it and resume from another checkpoint (--ckpt_path PATH) or start fresh"
        )
    with path.open("rb") as fh:
        head = fh.read(4)
    if head == b"PK\x03\x04" and not zipfile.is_zipfile(path):
        raise ValueError(
            f"checkpoint {path} is cut ({size} bytes; the end of its zip archive is missing: a copy or a save "
            "was interrupted); copy it again whole, or resume from another checkpoint (--ckpt_path PATH) or start fresh"
        )
    if head != b"PK\x03\x04" and head[:1] != b"\x80":  # neither torch.save's zip nor its legacy pickle
        raise ValueError(
            f"checkpoint {path} is not a PyTorch checkpoint (it starts with {head!r}); give a .ckpt file a fit "
            "wrote (under <logger save_dir>/<name>/version_*/checkpoints)"
        )


def check_checkpoint_fits(path: str | os.PathLike, module: torch.nn.Module, resume: bool = True) -> None:
    """Refuse, before any training, a checkpoint whose weights do not fit ``module`` (another model size,
    preset or tokenizer: Lightning fails later with a long ``size mismatch`` traceback) or, when the fit
    resumes from it (``resume``: ``fit``, not ``validate``/``test``), one written by another kind of fit (an RL fit's checkpoint into a warm start or
    back: the optimizer and scheduler states do not fit, ``KeyError: 'initial_lr'``).

    Raises:
        ValueError: naming the checkpoint, the first tensor that differs (both shapes) and the fix.
    """
    path = Path(path)
    if not path.is_file():
        return  # "best", a URL: Lightning resolves those itself
    ck = torch.load(path, map_location="cpu", mmap=True, weights_only=False)
    where = f"--ckpt_path {path}"
    if not isinstance(ck, dict) or not isinstance(ck.get("state_dict"), dict):
        raise ValueError(f"{where}: holds no `state_dict`, so no fit wrote it; give a .ckpt file a fit wrote")
    cls = type(module).__name__
    mine, theirs = (
        getattr(type(module), "checkpoint_state_key", None),
        RL_STATE_KEY if RL_STATE_KEY in ck else None,
    )
    if resume and theirs != mine:
        start = "start this fit from that fit's exported model (--model.init_args.policy.init_args.path=<its save_dir>)"
        kind = (
            "an RL fit's checkpoint (schedule and replay-buffer state)"
            if theirs
            else "no RL fit's checkpoint (it has no schedule or replay-buffer state)"
        )
        raise ValueError(
            f"{where}: it is {kind} and this config fits {cls}, so its optimizer and schedule states do not fit; "
            f"resume it with the config that wrote it, or {start}"
        )
    _check_weights(where, ck["state_dict"], module)


def _check_weights(where: str, saved: dict, module: torch.nn.Module) -> None:
    """Refuse ``saved`` weights whose names or shapes differ from ``module``'s (names only where the module
    loads strictly, as Lightning does)."""
    ours = module.state_dict()
    differ = [(k, tuple(v.shape), tuple(ours[k].shape)) for k, v in saved.items()
              if k in ours and hasattr(v, "shape") and tuple(v.shape) != tuple(ours[k].shape)]  # fmt: skip
    problems = []
    if differ:
        k, a, b = differ[0]
        problems.append(
            f"{k} is {list(a)} in the checkpoint and {list(b)} in the configured model "
            f"({len(differ)} of {len(ours)} tensors differ in shape)"
        )
    if getattr(module, "strict_loading", True):
        missing, extra = [k for k in ours if k not in saved], [k for k in saved if k not in ours]
        if missing:
            problems.append(
                f"{len(missing)} tensors of the configured model are not in it (e.g. {missing[0]})"
            )
        if extra:
            problems.append(f"it has {len(extra)} tensors the configured model has not (e.g. {extra[0]})")
    if problems:
        raise ValueError(
            f"{where}: its weights do not fit the configured model: {'; '.join(problems)}; it was saved by a "
            "fit of another model (size, preset or tokenizer): configure the model as that fit did, or give a "
            "checkpoint of this model"
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

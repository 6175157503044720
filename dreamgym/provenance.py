"""Where a stored result came from: the command that produced it and the commit it ran at."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

__all__ = ["result_meta"]


def result_meta(script: str, argv: Sequence[str] | None = None) -> dict[str, str | bool]:
    """``{"command": "python <script> <args>", "commit": <git HEAD or "unknown">, "dirty": <tracked files
    differ from HEAD>}`` for a result file."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
            ).stdout.strip()
        )
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "unknown", False
    args = sys.argv[1:] if argv is None else list(argv)
    return {"command": " ".join(["python", script, *args]), "commit": commit, "dirty": dirty}

"""Where a stored result came from: the command that produced it, the commit it ran at and the machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["host_fingerprint", "result_meta", "write_result", "report_result"]


def result_meta(
    script: str, argv: Sequence[str] | None = None, ignore: Sequence[str | os.PathLike] = ()
) -> dict[str, str | bool]:
    """``{"command": "python <script> <args>", "commit": <git HEAD or "unknown">, "dirty": <tracked files
    differ from HEAD>}`` for a result file; changes to the ``ignore`` files (the caller's own outputs, e.g.
    a results file a resumable suite rewrites between its stages) do not count as dirty."""
    try:
        commit = _git("rev-parse", "HEAD")
        top = Path(_git("rev-parse", "--show-toplevel"))
        skip = {Path(p).resolve() for p in ignore}
        changed = [
            line[3:].split(" -> ")[-1]
            for line in _git("status", "--porcelain", "--untracked-files=no").splitlines()
        ]
        dirty = any((top / p).resolve() not in skip for p in changed)
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "unknown", False
    args = sys.argv[1:] if argv is None else list(argv)
    return {"command": " ".join(["python", script, *args]), "commit": commit, "dirty": dirty}


def host_fingerprint() -> dict[str, str]:
    """The hardware and torch a trained model's weights depend on: ``{"device": the GPU's name or the CPU's
    model name, "matmul": how bf16 matrix products run ("cuda", "amx", "avx512_bf16" or "none": other
    kernels round differently), "torch": the torch version}``. Two machines with different fingerprints do
    not rebuild the same weights from the same data and seed (measured: BENCHMARKS.md, ALFWorld)."""
    import platform

    import torch

    if torch.cuda.is_available():
        return {"device": torch.cuda.get_device_name(0), "matmul": "cuda", "torch": torch.__version__}
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    probes = (("amx", "_is_amx_tile_supported"), ("avx512_bf16", "_is_avx512_bf16_supported"))
    matmul = next((kind for kind, probe in probes if getattr(torch.cpu, probe, lambda: False)()), "none")
    return {"device": cpu, "matmul": matmul, "torch": torch.__version__}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip("\n")


def write_result(path: str | os.PathLike, data: dict, indent: int = 1, markdown: str | None = None) -> Path:
    """Write a result file as JSON (parent folders made; through a temporary file, so a crash never
    leaves half a file) and, with ``markdown``, that text next to it (``.md``); returns its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=indent) + "\n")
    tmp.replace(path)
    if markdown is not None:
        path.with_suffix(".md").write_text(markdown)
    return path


def report_result(
    result: dict, out: str | os.PathLike | None, script: str, argv: Sequence[str] | None, indent: int = 1
) -> dict:
    """A script's closing step: print ``result`` as JSON and, with ``out``, write it there under its
    ``_meta`` (:func:`result_meta` of ``script`` and ``argv``); returns ``result``."""
    if out:
        write_result(out, {"_meta": result_meta(script, argv), **result}, indent=indent)
    print(json.dumps(result, indent=indent))
    return result

"""Mixed precision where the hardware has it: ``bf16-mixed`` on devices with fast bf16 matmuls, fp32 elsewhere.

``trainer.precision: bf16-mixed`` is the right choice on an Ampere-or-newer GPU or on a CPU with
AVX512-BF16 or AMX, where bf16 matmuls are native (on such a CPU, experience SFT in bf16 ran 1.66x the
tokens/s of the fp32 code before it: BENCHMARKS.md, "Mixed precision and the action grammar"), and not on
a CPU without them, where bf16 has no native matmuls. The shipped configs therefore leave
``trainer.precision`` unset and the CLI fills it in with :func:`auto_precision` for the accelerator the run
will use (a value given in a config or on the command line is kept as it is).

Under ``bf16-mixed`` matmuls and attention run in bf16 (``torch.autocast``); weights, optimizer state and
gradients stay fp32. The LM head, whose logits every loss and log-probability is taken from, stays fp32
under autocast (:class:`dreamgym.modeling.factory.FP32Linear`, on every model the package builds or loads).
"""

from __future__ import annotations

import torch

__all__ = ["auto_precision", "fast_bf16"]


def fast_bf16(device: str) -> bool:
    """Whether ``device`` (``"cpu"`` or ``"cuda"``) runs bf16 matmuls natively, faster than fp32."""
    if device in ("cuda", "gpu"):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    if device == "cpu":
        probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")  # torch's CPU feature checks
        return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in probes)
    return False


def auto_precision(accelerator: str | None = "auto", strategy: str | None = None) -> str:
    """``"bf16-mixed"`` where :func:`fast_bf16` holds for the device ``accelerator`` resolves to
    (``"auto"``: a GPU when one is present), else ``"32-true"``. DeepSpeed on a CPU
    (:mod:`dreamgym.strategies`) is tested in fp32 only, so it gets ``"32-true"``."""
    accelerator = str(accelerator or "auto")
    device = ("cuda" if torch.cuda.is_available() else "cpu") if accelerator == "auto" else accelerator
    if device == "cpu" and "deepspeed" in str(strategy or "").lower():
        return "32-true"
    return "bf16-mixed" if fast_bf16(device) else "32-true"

"""One rule for the seeds of a run's parts: a part given no seed of its own takes the run's seed.

``LightningCLI`` calls ``seed_everything`` (the config's ``seed_everything``) before it builds the model
and the data module, so :func:`run_seed` there is that seed: a fresh model's initialisation, the SFT
batch order and the validation subsets follow ``--seed_everything=1`` unless a config pins them.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

__all__ = ["run_seed", "rng_state", "set_rng_state"]


def run_seed(seed: int | None) -> int:
    """``seed`` itself, or when it is None the seed torch's default generator was last seeded with
    (``torch.initial_seed()``: ``seed_everything``'s value, or a random one in an unseeded process)."""
    return torch.initial_seed() if seed is None else int(seed)


def rng_state() -> dict[str, Any]:
    """The state of every global generator a run draws from (python, numpy, torch CPU and CUDA), for a
    checkpoint: :func:`set_rng_state` after a resume continues the same random stream. Only tensors,
    numbers and strings, so the checkpoint loads with ``torch.load(weights_only=True)``."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    numpy = {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
             "has_gauss": int(has_gauss), "gauss": float(gauss)}  # fmt: skip
    state = {"python": random.getstate(), "numpy": numpy, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` saved (a CUDA state only where CUDA is present)."""
    random.setstate(state["python"])
    n = state["numpy"]
    np.random.set_state(
        (n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"])
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])

"""One rule for the seeds of a run's parts: a part given no seed of its own takes the run's seed.

``LightningCLI`` calls ``seed_everything`` (the config's ``seed_everything``) before it builds the model
and the data module, so :func:`run_seed` there is that seed: a fresh model's initialisation, the SFT
batch order and the validation subsets follow ``--seed_everything=1`` unless a config pins them.
"""

from __future__ import annotations

import torch

__all__ = ["run_seed"]


def run_seed(seed: int | None) -> int:
    """``seed`` itself, or when it is None the seed torch's default generator was last seeded with
    (``torch.initial_seed()``: ``seed_everything``'s value, or a random one in an unseeded process)."""
    return torch.initial_seed() if seed is None else int(seed)

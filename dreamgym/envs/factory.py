"""Lazily built envs for configs: an env is a ``torch.nn.Module`` (TorchRL ``EnvBase``) and the synthetic
env holds the frozen experience model, so trainers receive *factories* and build the env themselves, outside
their own module tree (never as a submodule, never in the optimizer or a DeepSpeed engine).
"""

from __future__ import annotations

import copy
import os
from typing import Any

__all__ = ["EnvFactory", "SyntheticEnvFactory"]


class EnvFactory:
    """A registered env (:func:`dreamgym.envs.registry.make_env`), built on demand.

    Args:
        name: registry name ("webshop", "alfworld", ...).
        split: task split the env draws tasks from ("train", "val", "test").
        batch_size: parallel episode slots.
        max_steps: step limit per episode (verl-agent: 15 for WebShop, 50 for ALFWorld).
        seed: task-sampling seed.
        kwargs: extra keyword arguments for the env's constructor.
    """

    is_real: bool = True

    def __init__(
        self,
        name: str = "webshop",
        split: str = "train",
        batch_size: int = 8,
        max_steps: int = 15,
        seed: int = 0,
        kwargs: dict[str, Any] | None = None,
    ):
        if batch_size < 1:
            raise ValueError(f"EnvFactory.batch_size must be >= 1, got {batch_size}")
        self.name, self.split, self.batch_size = name, split, batch_size
        self.max_steps, self.seed, self.kwargs = max_steps, seed, dict(kwargs or {})

    def with_split(self, split: str) -> EnvFactory:
        """This factory with another task split (``self`` when it is already that split)."""
        if split == self.split:
            return self
        other = copy.copy(self)
        other.split = split
        return other

    def check(self) -> None:
        """Fail early (at config time) if the env cannot be built; real envs need nothing."""

    def build(self):
        """The env instance."""
        from dreamgym.envs.registry import make_env

        return make_env(
            self.name,
            batch_size=[self.batch_size],
            max_steps=self.max_steps,
            split=self.split,
            seed=self.seed,
            **self.kwargs,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, split={self.split!r}, batch_size={self.batch_size})"


class SyntheticEnvFactory(EnvFactory):
    """The DreamGym synthetic env: an exported experience model acting as the env of ``real_env``.

    Args:
        checkpoint: directory of the exported experience model (``export_dir`` of
            ``configs/webshop_experience_sft.yaml``).
        real_env: registry name of the real env whose tasks and action rules it imitates.
        split: kept for symmetry; the synthetic env's task pool is the real env's train tasks.
        batch_size: parallel episode slots (one batched experience-model generation per step).
        max_steps: step limit per episode.
        seed: task-sampling seed.
        kwargs: extra keyword arguments for ``SyntheticEnv.from_checkpoint`` (``tasks``, ``write_back``,
            ``max_new_tokens``, ``do_sample``, ``temperature``, ``decoding``; not ``batch_size``: that is the slots).
    """

    is_real = False

    def __init__(
        self,
        checkpoint: str = "artifacts/webshop/experience_model",
        real_env: str = "webshop",
        split: str = "train",
        batch_size: int = 8,
        max_steps: int = 15,
        seed: int = 0,
        kwargs: dict[str, Any] | None = None,
    ):
        super().__init__(real_env, split, batch_size, max_steps, seed, kwargs)
        self.checkpoint, self.real_env = checkpoint, real_env

    def check(self) -> None:
        if not os.path.isdir(self.checkpoint):
            raise FileNotFoundError(
                f"SyntheticEnvFactory.checkpoint={self.checkpoint!r} does not exist: train and export the "
                "experience model first with `python -m dreamgym fit --config configs/webshop_experience_sft.yaml` "
                "(or run the whole chain: `python -m dreamgym pipeline --config configs/pipeline_webshop.yaml`)"
            )

    def build(self):
        self.check()
        clash = sorted(set(self.kwargs) & {"path", "real_env", "batch_size", "max_steps", "seed"})
        if clash:
            raise ValueError(
                f"SyntheticEnvFactory.kwargs sets {clash}, which the factory sets itself; give them as SyntheticEnvFactory "
                "arguments (`batch_size` there is the number of env slots, which is also the generation batch)"
            )
        from dreamgym.envs.synthetic import SyntheticEnv

        return SyntheticEnv.from_checkpoint(
            self.checkpoint, real_env=self.real_env, batch_size=[self.batch_size], max_steps=self.max_steps,
            seed=self.seed, **self.kwargs,
        )  # fmt: skip

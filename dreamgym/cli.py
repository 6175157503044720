"""Command line: ``python -m dreamgym {fit,validate,test,predict} --config configs/X.yaml`` (LightningCLI),
plus extra subcommands (``collect``, ``tokenizer``, ...) dispatched to their own ``main``.

Models and data modules are injected with ``class_path``/``init_args`` (subclass mode), so one CLI
serves the experience-model SFT, the policy warm start and PPO/GRPO.
"""

from __future__ import annotations

import importlib
import os
import sys

__all__ = ["main", "EXTRA_COMMANDS", "LINKS"]

EXTRA_COMMANDS: dict[str, str] = {
    "collect": "dreamgym.collect:main",
    "tokenizer": "dreamgym.modeling.tokenizer_cli:main",
    "pipeline": "dreamgym.pipeline:main",
    "serve": "dreamgym.serve.server:main",
}
"""Subcommands that are not Lightning stages: name -> ``module:function(argv)``."""

LINKS: list[tuple[str, str]] = [
    # RL: validation/test batches hold as many tasks as the held-out env has slots (one episode per slot)
    ("model.init_args.eval_env.init_args.batch_size", "data.init_args.eval_batch_tasks"),
]
"""``parser.link_arguments(source, target)`` pairs: the target is computed, never given in YAML."""


def _lightning_cli(argv: list[str], run: bool = True):
    """The LightningCLI on ``argv``; ``run=False`` only parses and instantiates (used by tests)."""
    from lightning.pytorch import LightningDataModule, LightningModule
    from lightning.pytorch.cli import LightningCLI

    import dreamgym.strategies  # noqa: F401  (registers the deepspeed_cpu* names for --trainer.strategy)

    class DreamGymCLI(LightningCLI):
        def add_arguments_to_parser(self, parser):
            # Values that must agree are given once. A link whose source does not exist for the chosen
            # model class (e.g. the experience-model SFT) is skipped by jsonargparse.
            for source, target in LINKS:
                parser.link_arguments(source, target, apply_on="parse")

    return DreamGymCLI(
        LightningModule,
        LightningDataModule,
        subclass_mode_model=True,
        subclass_mode_data=True,
        auto_configure_optimizers=False,
        save_config_kwargs={"overwrite": True},
        parser_kwargs={"parser_mode": "yaml"},
        args=argv,
        run=run,
    )


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if argv and argv[0] in EXTRA_COMMANDS:
        module, fn = EXTRA_COMMANDS[argv[0]].split(":")
        getattr(importlib.import_module(module), fn)(argv[1:])
        return
    _lightning_cli(argv)

"""Command line: ``python -m dreamgym <command> [options]``, every command in one table (:data:`COMMANDS`).

The Lightning stages (``fit``, ``validate``, ``test``, ``predict`` with ``--config configs/X.yaml``) run
through :mod:`dreamgym.lightning_cli`; the other commands are the ``main(argv)`` of their module, the
lab's experiments (``pipeline``, ``benchmark``: :mod:`dreamgym.lab`) among them. This module is the only
one of the package that names the lab, and only in :data:`COMMANDS`, which ``tests/test_structure.py``
reads as import edges.
"""

from __future__ import annotations

import importlib
import os
import sys

__all__ = ["main", "run", "COMMANDS", "USAGE"]

COMMANDS: dict[str, tuple[str, str]] = {
    # Lightning stages (configs/*.yaml through LightningCLI)
    "fit": ("dreamgym.lightning_cli:run_fit",
            "train: experience-model SFT, policy warm start, PPO/GRPO (--config configs/X.yaml)"),
    "validate": ("dreamgym.lightning_cli:run_validate",
                 "run a config's validation loop (e.g. greedy held-out real tasks for RL)"),
    "test": ("dreamgym.lightning_cli:run_test", "run a config's test loop"),
    "predict": ("dreamgym.lightning_cli:run_predict", "run a config's predict loop"),
    # the library's commands
    "collect": ("dreamgym.collect:main", "play scripted agents in a real env and write trajectories (JSONL)"),
    "tokenizer": ("dreamgym.modeling.tokenizer_cli:main", "train the BPE tokenizer on trajectory files"),
    # the lab (dreamgym/lab/): experiments on the library
    "pipeline": ("dreamgym.lab.pipeline:main",
                 "the whole DreamGym chain, resumable stage by stage (configs/pipeline_webshop.yaml)"),
    "benchmark": ("dreamgym.lab.benchmark.suite:main",
                  "DreamGym's arms side by side, resumable (configs/benchmark_webshop.yaml)"),
    # the library's commands
    "serve": ("dreamgym.serve.server:main",
              "serve an env (webshop, alfworld, synthetic) over AgentGym's HTTP protocol"),
    "import-web": ("dreamgym.collect:import_web_main",
                   "turn web episodes recorded elsewhere into offline trajectories (docs/web.md)"),
    "import-gguf": ("dreamgym.modeling.gguf_import:main",
                    "write a pretrained GGUF model (e.g. --gguf smollm2) as a Hugging Face folder"),
}  # fmt: skip
"""Every command: name -> (``"module:function"``, one line of help). The function gets the arguments after
the command's name; modules are imported only when their command runs."""

_LIGHTNING = "dreamgym.lightning_cli:"


def _usage() -> str:
    def lines(stages: bool) -> list[str]:
        return [
            f"  {name:<10} {help_}"
            for name, (target, help_) in COMMANDS.items()
            if target.startswith(_LIGHTNING) == stages
        ]

    return "\n".join(
        [
            "usage: python -m dreamgym <command> [options]   "
            "(python -m dreamgym <command> --help for its options)",
            "",
            "Lightning stages (configs/*.yaml through LightningCLI):",
            *lines(True),
            "Other commands:",
            *lines(False),
            "Errors in the input (a config key, a path, a value) print one `error:` line and exit with code 2;",
            "add --debug (or set DREAMGYM_DEBUG=1) for the traceback.",
            "",
        ]
    )


USAGE = _usage()
"""``python -m dreamgym --help``: the commands of :data:`COMMANDS` with their help lines."""


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, end="")
        return
    if argv[0] in COMMANDS:
        module, fn = COMMANDS[argv[0]][0].split(":")
        getattr(importlib.import_module(module), fn)(argv[1:])
        return
    # options before the stage (``--config X fit``) or an unknown command: LightningCLI parses (and refuses) it
    from dreamgym.lightning_cli import main as lightning_main

    lightning_main(argv)


def run() -> None:
    """``python -m dreamgym``: :func:`main` behind the error boundary (:mod:`dreamgym.errors`)."""
    from dreamgym.errors import run_guarded

    sys.exit(run_guarded(main))

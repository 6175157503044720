"""The overrides the lab gives its fits: config pieces in the fit configs' own nesting.

A pipeline stage (``rl_overrides``, ``experience_overrides``, ...) or a benchmark arm (``overrides``, the
suite's ``common_overrides``) changes its LightningCLI config (``configs/webshop_grpo.yaml``) with a list
of *config pieces*, merged onto the config in their order (each is one more ``--config``:
:func:`dreamgym.lab.stages.fit_stage`). A piece is a mapping with the fit config's own nesting, or the path
of a YAML file that holds one (its ``__base__`` composed; relative to the working directory, like the
configs' other paths)::

    rl_overrides:
      - trainer: {limit_val_batches: 0}
        model:
          init_args:
            tasks_per_batch: 16
            schedule:
              init_args: {real_budget: 30720, real_env: {init_args: {batch_size: 128}}}
      - my_pieces/lr_1e-4.yaml

``init_args`` without a ``class_path`` fill the class the config already chose; a mapping-valued argument
(an env's ``kwargs``) and a list are replaced whole, as on the command line. So every option has the one
spelling of the fit configs, and a misspelt or renamed option fails when the pieces are resolved
(tests/test_configs.py resolves every bundled stage and arm). A ``--key=value`` string, the command line's
spelling, is refused in a piece list with the piece to write instead; :func:`upgrade_argv` still reads
the options that held such strings before (``--common_args``, ``--pipeline_args``, the pipeline's
``--*_args``), so a command recorded in a report runs again.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from dreamgym.config_files import load_config, nested

__all__ = [
    "LEGACY_NAMES",
    "arg_piece",
    "flow",
    "fill_templates",
    "load_pieces",
    "refuse_legacy_keys",
    "upgrade_argv",
]

LEGACY_NAMES = {
    "experience_args": "experience_overrides",
    "policy_sft_args": "policy_sft_overrides",
    "onpolicy_experience_args": "onpolicy_experience_overrides",
    "rl_args": "rl_overrides",
    "judge_args": "judge_overrides",
    "dagger_args": "dagger_overrides",
    "common_args": "common_overrides",
    "pipeline_args": "pipeline_overrides",
}
"""Options that held ``--key=value`` strings -> the option of config pieces (a mapping for
``pipeline_overrides``: the pipeline config's own keys) that replaced each."""

_TEMPLATE = re.compile(r"\{(\w+)\}")


def flow(node: Any) -> str:
    """``node`` as one line of YAML flow style (``{a: {b: 1}}``), as a message or report quotes a piece."""
    import yaml

    return yaml.safe_dump(node, default_flow_style=True, width=10**9, sort_keys=False).strip()


def arg_piece(arg: str) -> dict:
    """The config piece of one ``--key=value`` argument (the value read as YAML, as the command line
    reads it): ``--trainer.max_steps=3`` -> ``{"trainer": {"max_steps": 3}}``.

    Raises:
        ValueError: ``arg`` is not ``--key=value``, or appends (``--key+=value``: no piece spells that).
    """
    import yaml

    key, eq, value = arg.partition("=")
    if not key.startswith("--") or not eq or key.endswith("+"):
        raise ValueError(f"{arg!r}: expected --key=value (a config piece cannot append with `+=`)")
    return nested({key.removeprefix("--"): yaml.safe_load(value)})


def load_pieces(items: list[dict | str] | None, field: str) -> list[dict]:
    """``items`` as config pieces: each mapping kept, each file path read (``__base__`` composed).

    Raises:
        ValueError: an item is a ``--key=value`` string (the message names the piece to write), or a file
            holds no mapping.
        FileNotFoundError: a named file does not exist.
    """
    out = []
    for item in items or []:
        if isinstance(item, dict):
            out.append(item)
            continue
        text = str(item)
        if text.startswith("--"):
            hint = flow(arg_piece(text)) if "=" in text and "+=" not in text else "the nested mapping"
            raise ValueError(
                f"{field}: {text!r} is a command-line argument; a piece is written in the config's own nesting: "
                f"{hint}"
            )
        if not os.path.isfile(text):
            raise FileNotFoundError(f"{field}: {text!r} is not a mapping or a file (a config piece)")
        piece = load_config(text)
        if not isinstance(piece, dict):
            raise ValueError(
                f"{field}: {text} must hold a mapping (a config piece), got {type(piece).__name__}"
            )
        out.append(piece)
    return out


def fill_templates(node: Any, values: dict[str, Any], field: str = "overrides") -> Any:
    """``node`` (pieces, a mapping, a string) with every ``{name}`` in its strings filled from ``values``: a
    string that is only ``"{name}"`` becomes the value itself (a number stays a number), one that holds
    it gets its text; other braces (``{"a": 1}`` in a string) are left as they are.

    Raises:
        ValueError: a name that is not in ``values``, or a template left unquoted in YAML (``iterations:
            {iterations}`` reads as the mapping ``{iterations: null}``).
    """
    if isinstance(node, dict):
        if len(node) == 1 and next(iter(node.values())) is None and next(iter(node)) in values:
            name = next(iter(node))
            raise ValueError(
                f"{field}: {{{name}}} unquoted in YAML is the mapping {{{name}: null}}; quote the template: "
                f'"{{{name}}}"'
            )
        return {k: fill_templates(v, values, field) for k, v in node.items()}
    if isinstance(node, list):
        return [fill_templates(v, values, field) for v in node]
    if not isinstance(node, str):
        return node

    def value(name: str) -> Any:
        if name not in values:
            raise ValueError(
                f"{field}: template {{{name}}} is not in `values` {sorted(values)}; add it to `values`"
            )
        return values[name]

    whole = _TEMPLATE.fullmatch(node)
    if whole:
        return value(whole.group(1))
    return _TEMPLATE.sub(lambda m: str(value(m.group(1))), node)


def _upgraded(name: str, value: Any) -> Any:
    """The new option's value of the old option ``name`` given ``value`` (a list of ``--key=value``)."""
    import yaml

    if not isinstance(value, list):
        raise ValueError(f"--{name}: expected a list of --key=value strings, got {value!r}")
    if name != "pipeline_args":
        return [arg_piece(str(a)) for a in value]
    mapping: dict[str, Any] = {}
    for arg in value:
        key, _, text = str(arg).partition("=")
        key, item = key.removeprefix("--"), yaml.safe_load(text)
        if key in LEGACY_NAMES:
            key, item = LEGACY_NAMES[key], _upgraded(key, item)
        mapping[key] = item
    return mapping


def upgrade_argv(argv: list[str]) -> list[str]:
    """``argv`` with every option of :data:`LEGACY_NAMES` (``--common_args '[--model.init_args.x=1]'``)
    given as its new option (``--common_overrides '[{"model": {"init_args": {"x": 1}}}]'``), a line
    printed for each: the commands recorded in reports and docs keep running."""
    import yaml

    out, i = [], 0
    while i < len(argv):
        flag, eq, value = argv[i].partition("=")
        name = flag.removeprefix("--")
        if flag.startswith("--") and name in LEGACY_NAMES and (eq or i + 1 < len(argv)):
            if not eq:
                i += 1
                value = argv[i]
            new = json.dumps(_upgraded(name, yaml.safe_load(value)))
            print(
                f"[dreamgym] --{name} is the old spelling of --{LEGACY_NAMES[name]}: read as {new}",
                flush=True,
            )
            out.append(f"--{LEGACY_NAMES[name]}={new}")
        else:
            out.append(argv[i])
        i += 1
    return out


def refuse_legacy_keys(argv: list[str]) -> None:
    """Refuse a config file of ``argv`` (``--config FILE``) that still uses an option of
    :data:`LEGACY_NAMES` (or an arm's or experience variant's ``args``), naming the option and value to write.

    Raises:
        ValueError: one line per old key found.
    """
    problems = []
    for flag, path in zip(argv, argv[1:], strict=False):
        if flag not in ("--config", "-c") or not os.path.isfile(path):
            continue
        config = load_config(path)
        if not isinstance(config, dict):
            continue
        places = [("", config), ("quick_preset.", config.get("quick_preset") or {})]
        for field in ("arms", "experience_variants"):
            places += [(f"{field}[{i}].", item) for i, item in enumerate(config.get(field) or [])]
        for where, node in places:
            for key, value in node.items() if isinstance(node, dict) else ():
                name = str(key).rstrip("+")
                new = "overrides" if name == "args" and where.endswith("].") else LEGACY_NAMES.get(name)
                if new is None:
                    continue
                try:
                    hint = flow(_upgraded("common_args" if name == "args" else name, value))
                except ValueError:
                    hint = "..."
                problems.append(
                    f"{path}: `{where}{key}` is the old spelling of `{where}{new}`; write {new}: {hint}"
                )
    if problems:
        raise ValueError(
            "config pieces replaced --key=value strings (dreamgym/lab/overrides.py):\n" + "\n".join(problems)
        )

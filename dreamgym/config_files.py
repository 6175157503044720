"""Composed YAML configs: a config names the shared pieces it is made of with ``__base__``.

jsonargparse (under LightningCLI) deep-merges several ``--config`` files given on the command line, but a
config file cannot name the files it builds on (a ``config:`` key inside a file replaces whole top-level
groups, and a file given as the value of an option replaces that option whole). So one entry point
(``python -m dreamgym fit --config configs/webshop_grpo.yaml``) could not share a trainer block with
another config. ``__base__`` does that, before jsonargparse sees the config::

    __base__: [base/rl.yaml, base/webshop.yaml]   # paths relative to this file (or one path)
    trainer:
      logger:
        init_args:
          name: webshop_grpo               # only what differs from the base
    model:
      init_args:
        schedule:
          class_path: dreamgym.rl.schedules.Sim2RealSchedule
          init_args:
            synthetic_env:
              __base__: base/webshop_synthetic_env.yaml   # a piece may also fill one nested mapping

Rules: the bases are merged in their order, then the mapping's own keys on top. Mappings merge key by
key; a mapping whose ``class_path`` differs from the base's replaces it whole (another class takes other
arguments); anything else (a list, a scalar, ``null``) replaces the base's value, except under a key
written with a trailing ``+`` (``pipeline_args+: [...]``), whose list is appended to the base's list.
``--print_config`` prints the composed result; :func:`load_config` returns it to code that reads a
config's values.

Code that fills settings in (the lab's paths, a seed) writes them in the same nesting with :func:`nested`;
:func:`flat_settings` reads what a list of overrides (config pieces and ``--key=value`` arguments) sets.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["BASE_KEY", "load_config", "compose", "merge", "expand_config_args", "nested", "flat_settings"]

BASE_KEY = "__base__"
"""The key naming the files a mapping is built on."""


def load_config(path: str | os.PathLike) -> Any:
    """The YAML file at ``path`` with every ``__base__`` resolved (:func:`compose`).

    Raises:
        FileNotFoundError: a ``__base__`` names a missing file (the message names the file naming it).
        ValueError: a file is not valid YAML, or a ``__base__`` chain includes itself.
    """
    return _appended(_load(Path(path), ()))


def _load(path: Path, chain: tuple[Path, ...]) -> Any:
    import yaml

    path = path.resolve()
    if path in chain:
        loop = " -> ".join(str(p) for p in (*chain, path))
        raise ValueError(f"{BASE_KEY} includes itself: {loop}; remove one of these references")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML ({exc}); fix the file") from None
    return compose(data, path.parent, (*chain, path))


def compose(node: Any, here: Path, chain: tuple[Path, ...] = ()) -> Any:
    """``node`` (parsed YAML) with every mapping's ``__base__`` merged in; paths relative to ``here``."""
    if isinstance(node, list):
        return [compose(item, here, chain) for item in node]
    if not isinstance(node, dict):
        return node
    own = {k: compose(v, here, chain) for k, v in node.items() if k != BASE_KEY}
    bases = node.get(BASE_KEY)
    if bases is None:
        return own  # a `key+` stays until a merge meets its base's list (or load_config ends)
    out: dict = {}
    for ref in [bases] if isinstance(bases, str) else list(bases or []):
        if not isinstance(ref, str):
            raise ValueError(
                f"{chain[-1] if chain else here}: {BASE_KEY} takes a path or a list of paths, got {ref!r}"
            )
        target = here / ref
        if not target.is_file():
            where = chain[-1] if chain else here
            raise FileNotFoundError(f"{where}: {BASE_KEY} names {ref!r}, which is not a file ({target})")
        base = _load(target, chain)
        if not isinstance(base, dict):
            raise ValueError(f"{target}: a {BASE_KEY} file must hold a mapping, got {type(base).__name__}")
        out = merge(out, base)
    return merge(out, own)


def merge(base: dict, over: dict) -> dict:
    """``over`` deep-merged onto ``base`` (the rules in the module docstring); neither is modified."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(key, str) and key.endswith("+"):
            key, old = key[:-1], out.get(key[:-1], [])
            if not isinstance(old, list) or not isinstance(value, list):
                raise ValueError(
                    f"`{key}+` appends a list to a list; got {type(value).__name__} onto {old!r}"
                )
            out[key] = [*old, *value]
            continue
        old = out.get(key)
        same_class = not (isinstance(old, dict) and isinstance(value, dict)) or (
            old.get("class_path", value.get("class_path")) == value.get("class_path", old.get("class_path"))
        )
        if isinstance(old, dict) and isinstance(value, dict) and same_class:
            out[key] = merge(old, value)
        else:
            out[key] = value
    if "class_path" in out:  # written first, as jsonargparse prints it (a base may have given init_args only)
        out = {"class_path": out.pop("class_path"), **out}
    return out


def _appended(node: Any) -> Any:
    """``node`` with every ``key+`` left (nothing to append to) turned into ``key``."""
    if isinstance(node, list):
        return [_appended(v) for v in node]
    if not isinstance(node, dict):
        return node
    return {(k[:-1] if isinstance(k, str) and k.endswith("+") else k): _appended(v) for k, v in node.items()}


def _uses_base(node: Any) -> bool:
    """Whether ``node`` names a ``__base__`` or appends (``key+``) anywhere."""
    if isinstance(node, dict):
        own = any(k == BASE_KEY or (isinstance(k, str) and k.endswith("+")) for k in node)
        return own or any(_uses_base(v) for v in node.values())
    if isinstance(node, list):
        return any(_uses_base(v) for v in node)
    return False


def expand_config_args(argv: list[str], flags: tuple[str, ...] = ("--config", "-c")) -> list[str]:
    """``argv`` with each ``--config FILE`` that uses ``__base__`` replaced by its composed YAML (which
    jsonargparse takes as a config string); other arguments and plain config files are left as they are."""
    import yaml

    out, i = [], 0
    while i < len(argv):
        arg = argv[i]
        flag, eq, value = arg.partition("=")
        if flag in flags and (eq or i + 1 < len(argv)):
            if not eq:
                value = argv[i + 1]
                i += 1
            if os.path.isfile(value):
                raw = yaml.safe_load(Path(value).read_text(encoding="utf-8"))
                if _uses_base(raw):
                    value = yaml.safe_dump(load_config(value), sort_keys=False)
            out += [flag, value]
        else:
            out.append(arg)
        i += 1
    return out


def nested(settings: dict[str, Any]) -> dict:
    """The config piece of dotted-key ``settings``, in the config's own nesting::

        nested({"model.init_args.lm.init_args.path": p, "data.init_args.val_files": [q]})
        == {"model": {"init_args": {"lm": {"init_args": {"path": str(p)}}}},
            "data": {"init_args": {"val_files": [str(q)]}}}

    Keys that share a prefix share its mapping; a path (alone or in a list) becomes its string.

    Raises:
        ValueError: one key sets a value where another nests under it (``a.b`` and ``a.b.c``).
    """
    out: dict = {}
    for key, value in settings.items():
        *parents, leaf = key.split(".")
        node = out
        for i, part in enumerate(parents):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(
                    f"nested: {key!r} nests under {'.'.join(parents[: i + 1])!r}, which is set to a value"
                )
        if isinstance(node.get(leaf), dict):
            raise ValueError(f"nested: {key!r} is set to a value and also nests other keys")
        node[leaf] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def flat_settings(overrides: Iterable[str | dict]) -> dict[str, Any]:
    """Dotted key -> value of what ``overrides`` set, applied in order: config pieces (nested mappings,
    flattened to their leaves) and ``--key=value`` arguments (the value read as YAML, as the command line
    reads it; a mapping there stays one value, set whole). A later setting wins, and one set whole replaces
    what was set under it (``--trainer.logger=false`` after ``trainer.logger.init_args.save_dir``)."""
    import yaml

    out: dict[str, Any] = {}

    def assign(key: str, value: Any) -> None:
        for old in [k for k in out if k == key or k.startswith(key + ".") or key.startswith(k + ".")]:
            del out[old]
        out[key] = value

    def leaves(node: dict, prefix: str) -> None:
        for k, v in node.items():
            if isinstance(v, dict) and v:
                leaves(v, f"{prefix}{k}.")
            else:
                assign(f"{prefix}{k}", v)

    for item in overrides:
        if isinstance(item, dict):
            leaves(item, "")
            continue
        key, eq, value = str(item).partition("=")
        try:
            parsed = yaml.safe_load(value) if eq else None
        except yaml.YAMLError:
            parsed = value
        assign(key.removeprefix("--"), parsed)
    return out

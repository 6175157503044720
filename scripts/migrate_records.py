"""Upgrade replay buffers and RL checkpoints written by an older dreamgym to what the library reads now.

    python scripts/migrate_records.py artifacts/webshop/experience_model runs/webshop_grpo/version_0/checkpoints/last.ckpt

The library reads only the fields the current version writes (:data:`dreamgym.retrieval.buffer.META_KEYS`,
:data:`~dreamgym.retrieval.buffer.STATE_KEYS`) and names this script when one is missing. Each path is a
buffer folder (``buffer.json``), an exported experience model (its ``buffer/``) or a Lightning checkpoint
(``*.ckpt``: the replay buffers an RL fit wrote back). What an older version meant is filled in:

* ``bucket_radius: 0.0`` and ``probe: 8``: buffers saved before buckets existed held one graph;
* ``index_adds: []``: checkpoints saved before the adds were replayed held the whole index, restored as it is.

A file is rewritten atomically (a temporary file, then a rename) and only when something was missing;
running the script again changes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

# what an older dreamgym meant by a missing field
BUFFER_DEFAULTS = {"bucket_radius": 0.0, "probe": 8}
STATE_DEFAULTS = {"index_adds": []}


def upgrade_meta(meta: dict) -> list[str]:
    """Fill the buffer metadata fields an older version did not write; the names filled."""
    added = [k for k in BUFFER_DEFAULTS if k not in meta]
    meta.update({k: BUFFER_DEFAULTS[k] for k in added})
    return added


def upgrade_state(state: dict) -> list[str]:
    """Fill a :meth:`~dreamgym.retrieval.ReplayBuffer.state_dict`'s missing fields; the names filled."""
    added = [f"meta.{k}" for k in upgrade_meta(state["meta"])]
    for key, value in STATE_DEFAULTS.items():
        if key not in state:
            state[key] = list(value)
            added.append(key)
    return added


def _replace(path: Path, write) -> None:
    tmp = path.with_name(path.name + ".migrating")
    write(tmp)
    os.replace(tmp, path)


def migrate(path: str | os.PathLike) -> list[str]:
    """Upgrade one buffer folder, experience model export or checkpoint in place; what was filled."""
    path = Path(path)
    if path.is_dir():
        folder = path / "buffer" if (path / "buffer" / "buffer.json").is_file() else path
        meta_file = folder / "buffer.json"
        if not meta_file.is_file():
            raise SystemExit(f"error: {path} holds no buffer.json (nor buffer/buffer.json); give a buffer folder, "
                             "an exported experience model or a .ckpt file")  # fmt: skip
        meta = json.loads(meta_file.read_text())
        added = upgrade_meta(meta)
        if added:
            _replace(meta_file, lambda tmp: tmp.write_text(json.dumps(meta, indent=2)))
        return [f"{meta_file}: {k}" for k in added]
    if path.suffix == ".ckpt" and path.is_file():
        import torch

        from dreamgym.checkpoint_io import RL_STATE_KEY

        ckpt = torch.load(path, map_location="cpu", weights_only=False)
        buffers = (ckpt.get(RL_STATE_KEY) or {}).get("replay_buffers", {})
        added = [f"{path}: {name}.{k}" for name, state in buffers.items() for k in upgrade_state(state)]
        if added:
            _replace(path, lambda tmp: torch.save(ckpt, tmp))
        return added
    raise SystemExit(f"error: {path} is neither a folder nor a .ckpt file")


def main(argv: list[str] | None = None) -> list[str]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="buffer folders, exported experience models or .ckpt files")
    args = ap.parse_args(argv)
    changed = []
    for p in args.paths:
        filled = migrate(p)
        changed += filled
        print(
            f"{p}: " + (f"filled {', '.join(f.rsplit(': ', 1)[1] for f in filled)}" if filled else "current")
        )
    return changed


if __name__ == "__main__":
    main()

"""``python -m dreamgym tokenizer --data a.jsonl [b.jsonl ...] --out DIR [--vocab-size 4096]``.

Trains the byte-level BPE of :mod:`dreamgym.modeling.tokenizer` on every text of the given
trajectory files (:func:`corpus_from_trajectories`, plus the experience model's format markers) and
saves it with ``save_pretrained`` so ``transformers.AutoTokenizer.from_pretrained(DIR)`` loads it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

__all__ = ["main", "FORMAT_SNIPPETS"]

FORMAT_SNIPPETS = (
    "<task> <history> none <ref> <s> <a> <s'> <r> <state> <action> <predict>\n",
    " <think> </think>\n<next> </next>\n<reward> 0 <done> false <score> 0 <end>",
    "<vary> <variant>",
)
"""Marker text of the experience-model formats, added to the corpus so markers become few tokens."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m dreamgym tokenizer", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--data", nargs="+", required=True, help="trajectory JSONL files (the corpus)")
    parser.add_argument("--out", required=True, help="output directory (save_pretrained)")
    parser.add_argument("--vocab-size", type=int, default=4096, help="BPE vocabulary size")
    parser.add_argument("--min-frequency", type=int, default=2, help="minimum pair frequency for a merge")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing tokenizer in --out")
    args = parser.parse_args(argv)
    from dreamgym.modeling.tokenizer import corpus_from_trajectories, train_tokenizer

    missing = [p for p in args.data if not Path(p).is_file()]
    if missing:
        parser.error(
            f"--data file(s) {missing} do not exist; make them with "
            "`python -m dreamgym collect --env webshop --split train --out <file>`"
        )
    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not args.overwrite:
        parser.error(f"--out {args.out!r} exists and is not empty; pass --overwrite to replace it")
    parent = out.resolve().parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        parser.error(f"--out {args.out!r}: its folder {str(parent)!r} does not exist or is not writable")
    t0 = time.time()
    corpus = corpus_from_trajectories(args.data)
    if not corpus:
        parser.error(f"--data {args.data} hold no trajectories: nothing to train the tokenizer on")
    texts = corpus + list(FORMAT_SNIPPETS) * 100
    tok = train_tokenizer(texts, vocab_size=args.vocab_size, min_frequency=args.min_frequency)
    tmp = out.with_name(out.name + ".partial")  # complete before it replaces anything
    shutil.rmtree(tmp, ignore_errors=True)
    tok.save_pretrained(tmp)
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    print(f"tokenizer: {len(tok)} tokens from {len(texts)} texts in {time.time() - t0:.1f}s -> {args.out}")

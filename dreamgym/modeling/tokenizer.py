"""A byte-level BPE tokenizer trained locally on our own text (no hub download).

Any Hugging Face tokenizer directory can be used instead (:func:`load_tokenizer`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from dreamgym.modeling.chat import PLAIN_TEMPLATE

__all__ = ["SPECIAL_TOKENS", "train_tokenizer", "load_tokenizer", "corpus_from_trajectories", "pad_id"]

SPECIAL_TOKENS = {
    "bos_token": "<|bos|>",
    "eos_token": "<|eos|>",
    "pad_token": "<|pad|>",
    "unk_token": "<|unk|>",
}


def pad_id(tokenizer, fallback: int | None = None) -> int:
    """The id padding is filled with: the tokenizer's pad token, else its EOS, else ``fallback`` (e.g. a
    chat codec's first stop id). Padding is always masked out, so only its being a valid id matters."""
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id, fallback):
        if candidate is not None:
            return int(candidate)
    raise ValueError("the tokenizer has neither a pad nor an EOS token; set tokenizer.pad_token")


def train_tokenizer(
    texts: Iterable[str], vocab_size: int = 4096, min_frequency: int = 2
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on ``texts`` and wrap it as a ``transformers`` fast tokenizer.

    Byte-level means every string round-trips, whatever characters the data holds. Its chat template
    is :data:`~dreamgym.modeling.chat.PLAIN_TEMPLATE` (``[BOS] prompt``, ``" " reply [EOS]``).
    """
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIAL_TOKENS)
    fast.padding_side = "left"  # generation pads on the left
    fast.chat_template = PLAIN_TEMPLATE
    return fast


def load_tokenizer(path: str | os.PathLike):
    """Load a tokenizer saved with ``save_pretrained`` (ours or any Hugging Face one), offline."""
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"tokenizer directory {str(path)!r} does not exist; train one with "
            "`python -m dreamgym tokenizer --data <trajectories.jsonl> --out <dir>` or pass a local HF model dir"
        )
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


def corpus_from_trajectories(paths) -> list[str]:
    """Every text the models read or write in the given trajectory files (one string per field)."""
    from dreamgym.schema import read_trajectories

    texts: list[str] = []
    for p in paths:
        for traj in read_trajectories(p):
            texts.append(traj.instruction)
            for t in traj.transitions:
                texts += [t.state, t.action, t.next_state, " ".join(t.available_actions), t.reasoning or ""]
    return texts

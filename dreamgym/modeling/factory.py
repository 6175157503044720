"""Named model presets built from a ``transformers`` config, or any local Hugging Face causal LM.

Presets (Llama- or Qwen2-style decoders; parameter counts with a 4096-token vocabulary):

========  ======  ======  =====  ======  ==========================================
preset    hidden  layers  heads  params  use
========  ======  ======  =====  ======  ==========================================
tiny      64      2       4      ~0.6 M  unit tests
small     256     4       4      ~4.3 M  default; learns on a 2-core CPU in minutes
base      512     8       8      ~29 M   larger CPU runs / a single GPU
large     1024    16      16     ~210 M  GPU
========  ======  ======  =====  ======  ==========================================

For real use on GPUs pass ``path`` to a local directory of any causal LM (Llama, Qwen, ...).
"""

from __future__ import annotations

import os
from typing import Any

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedModel, Qwen2Config

from dreamgym.modeling.tokenizer import load_tokenizer

__all__ = ["PRESETS", "FAMILIES", "build_model", "load_pretrained", "LanguageModel"]

PRESETS: dict[str, dict[str, int]] = {
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4),
    "small": dict(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=4),
    "base": dict(hidden_size=512, intermediate_size=1376, num_hidden_layers=8, num_attention_heads=8),
    "large": dict(hidden_size=1024, intermediate_size=2752, num_hidden_layers=16, num_attention_heads=16),
}
FAMILIES = {"llama": LlamaConfig, "qwen2": Qwen2Config}


def build_model(
    preset: str, tokenizer, family: str = "llama", max_positions: int = 4096, seed: int = 0
) -> PreTrainedModel:
    """A freshly initialised causal LM of ``preset`` size for ``tokenizer``'s vocabulary."""
    if preset not in PRESETS:
        raise ValueError(
            f"unknown model preset {preset!r}; choose one of {sorted(PRESETS)} or pass a model path"
        )
    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r}; choose one of {sorted(FAMILIES)}")
    cfg = FAMILIES[family](
        vocab_size=len(tokenizer),
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
        **PRESETS[preset],
    )
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(cfg)


def load_pretrained(path: str | os.PathLike) -> tuple[PreTrainedModel, Any]:
    """Load model and tokenizer from a local directory written by ``save_pretrained`` (offline)."""
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"model directory {str(path)!r} does not exist; train one first (see README, `make run`) "
            "or point `path` at a local Hugging Face causal-LM directory"
        )
    tok = load_tokenizer(path)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    return model, tok


class LanguageModel:
    """Which language model to build, given through LightningCLI (``class_path``/``init_args``).

    Args:
        preset: size preset for a fresh model (ignored when ``path`` is set).
        family: architecture of a fresh model: "llama" or "qwen2".
        path: local directory of a saved causal LM (+ tokenizer); when set, it is loaded as is.
        tokenizer_path: directory of a saved tokenizer for a fresh model.
        max_positions: context length of a fresh model.
        seed: initialisation seed of a fresh model.
    """

    def __init__(
        self,
        preset: str = "small",
        family: str = "llama",
        path: str | None = None,
        tokenizer_path: str | None = None,
        max_positions: int = 4096,
        seed: int = 0,
    ):
        if path is None and tokenizer_path is None:
            raise ValueError(
                "LanguageModel needs `path` (a saved model dir) or `tokenizer_path` (for a fresh preset); "
                "`python -m dreamgym tokenizer` trains a tokenizer"
            )
        if path is None and preset not in PRESETS:
            raise ValueError(f"LanguageModel.preset={preset!r} is unknown; choose one of {sorted(PRESETS)}")
        self.preset, self.family, self.path = preset, family, path
        self.tokenizer_path, self.max_positions, self.seed = tokenizer_path, max_positions, seed

    def build(self) -> tuple[PreTrainedModel, Any]:
        """Return ``(model, tokenizer)``, the model in training mode (``from_pretrained`` returns eval mode)."""
        if self.path is not None:
            model, tok = load_pretrained(self.path)
            return model.train(), tok
        tok = load_tokenizer(self.tokenizer_path)
        return build_model(self.preset, tok, self.family, self.max_positions, self.seed), tok

"""Models and tokenizers shared by the experience model and the policy."""

from dreamgym.modeling.factory import PRESETS, LanguageModel, build_model, load_pretrained
from dreamgym.modeling.tokenizer import SPECIAL_TOKENS, load_tokenizer, train_tokenizer

__all__ = [
    "PRESETS",
    "SPECIAL_TOKENS",
    "LanguageModel",
    "build_model",
    "load_pretrained",
    "load_tokenizer",
    "train_tokenizer",
]

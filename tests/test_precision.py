"""Precision chosen for the device (``dreamgym.precision``) and the fp32 LM head under autocast."""

from __future__ import annotations

import copy

import pytest
import torch

from dreamgym import precision
from dreamgym.modeling.factory import FP32Linear


def test_auto_precision_follows_the_cpu_s_bf16_support(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True, raising=False)
    assert precision.auto_precision("auto") == "bf16-mixed"
    assert precision.auto_precision("cpu") == "bf16-mixed"
    # DeepSpeed on a CPU is tested in fp32 only, whatever the strategy is called
    assert precision.auto_precision("cpu", "deepspeed_cpu_stage_2") == "32-true"
    assert precision.auto_precision("cpu", "dreamgym.strategies.CPUDeepSpeedStrategy") == "32-true"
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)
    assert precision.auto_precision("auto") == "32-true"  # emulated bf16 would be slower than fp32


def test_the_lm_head_computes_in_fp32_under_autocast(tiny_lm):
    model, _ = tiny_lm.build()
    model.eval()
    head = model.get_output_embeddings()
    assert isinstance(head, FP32Linear) and head.weight is model.get_input_embeddings().weight  # still tied
    keys = set(model.state_dict())
    ids = torch.randint(0, model.config.vocab_size, (2, 12))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(input_ids=ids, output_hidden_states=True)
        plain = torch.nn.Linear.forward(head, out.hidden_states[-1])  # what autocast alone would give
    assert out.logits.dtype == torch.float32 and plain.dtype == torch.bfloat16
    exact = torch.nn.functional.linear(out.hidden_states[-1].float(), head.weight)
    assert torch.equal(out.logits, exact)
    assert not torch.equal(out.logits, plain.float())  # bf16 logits would be rounded
    assert isinstance(copy.deepcopy(model).get_output_embeddings(), FP32Linear)
    assert set(model.state_dict()) == keys


def test_a_bf16_head_is_not_upcast(tiny_lm):
    model, _ = tiny_lm.build()
    model.to(torch.bfloat16)
    x = torch.randn(2, 3, model.config.hidden_size, dtype=torch.bfloat16)
    assert model.get_output_embeddings()(x).dtype == torch.bfloat16


@pytest.mark.parametrize("device", ["cpu", "cuda", "mps"])
def test_fast_bf16_answers_for_any_device(device):
    assert isinstance(precision.fast_bf16(device), bool)

"""Policy warm start: examples mirror the RL prompt, loss only on action tokens, export reloads."""

import lightning as L
import pytest
import torch

from datamodules.policy_sft import PolicySFTDataModule, bc_examples
from dreamgym.modeling import LanguageModel, load_pretrained
from dreamgym.modeling.policy_format import PolicyFormat
from dreamgym.schema import read_trajectories
from models.policy_sft import PolicySFT, bc_loss, encode_bc_batch


def test_examples_follow_expert_steps_with_history(webshop_offline):
    fmt = PolicyFormat(history_window=1)
    ex = bc_examples([str(webshop_offline)], fmt)
    trajs = [t for t in read_trajectories(webshop_offline) if t.policy == "expert" and t.success]
    assert len(ex) == sum(len(t.transitions) for t in trajs)
    first = trajs[0].transitions
    assert ex[0]["target"] == " " + first[0].action.strip()
    assert ex[1]["prompt"] == fmt.prompt(first[1].instruction, first[1].state, first[1].available_actions,
                                         [(first[0].state, first[0].action)])  # fmt: skip


def test_bc_loss_ignores_prompt_tokens(tiny_tokenizer):
    from dreamgym.modeling import load_tokenizer

    tok = load_tokenizer(tiny_tokenizer)
    b = encode_bc_batch(
        tok, [{"prompt": "Instruction: buy tea\nAction:", "target": " search[tea]"}], max_length=64
    )
    n_target = len(tok.encode(" search[tea]", add_special_tokens=False)) + 1
    assert int(b["target_mask"].sum()) == n_target and b["target_mask"][0, -1]
    logits = torch.randn(1, b["input_ids"].shape[1], len(tok), requires_grad=True)
    loss, _ = bc_loss(logits, b["input_ids"], b["target_mask"])
    loss.backward()
    first_target = int(b["target_mask"][0].float().argmax())
    # logits at position t predict token t+1: only positions first_target-1 .. end-1 get gradient
    assert logits.grad[0, : first_target - 1].abs().sum() == 0
    assert logits.grad[0, first_target - 1 :].abs().sum() > 0


@pytest.mark.slow
def test_policy_sft_fit_exports_hf_model(webshop_offline, tiny_lm, cpu_trainer_kwargs, tmp_path):
    out = tmp_path / "policy"
    module = PolicySFT(
        tiny_lm, optimizer=lambda p: torch.optim.AdamW(p, lr=1e-2), max_length=384, save_dir=str(out)
    )
    before = {k: v.clone() for k, v in module.model.state_dict().items()}
    dm = PolicySFTDataModule([str(webshop_offline)], [str(webshop_offline)], batch_size=4, max_val_examples=4)
    kw = {**cpu_trainer_kwargs, "max_steps": 3, "logger": False, "enable_checkpointing": False}
    L.Trainer(**kw).fit(module, dm)
    assert any(not torch.equal(before[k], v) for k, v in module.model.state_dict().items())
    model, tok = load_pretrained(out)
    assert all(torch.equal(p, module.model.state_dict()[k]) for k, p in model.state_dict().items())
    assert LanguageModel(path=str(out)).build()[1].eos_token_id == tok.eos_token_id

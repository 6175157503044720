"""SFT helpers: the LM head from the first target position only; the LR schedule length check."""

import torch

from dreamgym.modeling.forward import first_target_position, logits_from_first_target, right_padded
from dreamgym.modeling.sft import experience_sft_loss


def test_first_target_position():
    mask = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 0, 0, 1]])
    assert first_target_position(mask) == 2
    assert first_target_position(torch.zeros(2, 5)) == 0
    assert first_target_position(torch.tensor([[1, 1, 0]])) == 0


def test_partial_head_matches_full_forward(tiny_lm):
    model, _ = tiny_lm.build()
    model.eval()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 500, (2, 12), generator=g)
    attn = torch.ones_like(ids)
    attn[1, -2:] = 0  # right padding
    parts = torch.zeros_like(ids)
    parts[0, 7:] = 2
    parts[1, 5:8] = 1
    parts[1, 8:10] = 2
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=attn).logits
        part, start = logits_from_first_target(model, ids, attn, parts > 0)
    assert start == 4 and part.shape == (2, 8, full.shape[-1])
    real = attn[:, start:].bool()  # right padding runs unmasked: padded positions' logits are not used
    torch.testing.assert_close(part[real], full[:, start:][real], rtol=1e-5, atol=1e-5)
    a = experience_sft_loss(full, ids, parts)
    b = experience_sft_loss(part, ids[:, start:], parts[:, start:])
    for key in ("loss", "loss_reasoning", "loss_state", "n_reasoning", "n_state"):
        torch.testing.assert_close(a[key], b[key])


def test_left_padding_keeps_the_mask(tiny_lm):
    model, _ = tiny_lm.build()
    model.eval()
    ids = torch.randint(5, 500, (2, 10), generator=torch.Generator().manual_seed(1))
    attn = torch.ones_like(ids)
    attn[1, :3] = 0  # left padding: the mask is needed
    assert right_padded(torch.tensor([[1, 1, 0], [1, 1, 1]])) and not right_padded(attn)
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=attn).logits
        part, start = logits_from_first_target(model, ids, attn, torch.ones_like(ids))
    real = attn.bool()
    torch.testing.assert_close(part[real], full[real], rtol=1e-5, atol=1e-5)


def test_scheduler_shorter_than_max_steps_is_a_clear_error():
    import pytest

    from dreamgym.optim import configure_optimization

    params = [torch.nn.Parameter(torch.zeros(2))]

    def sched(opt):
        return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10)

    out = configure_optimization(params, lambda p: torch.optim.AdamW(p, lr=0.1), sched, max_steps=10)
    assert out["lr_scheduler"]["interval"] == "step"
    with pytest.raises(ValueError, match="total_steps=10 is below trainer.max_steps=20"):
        configure_optimization(params, lambda p: torch.optim.AdamW(p, lr=0.1), sched, max_steps=20)


def test_run_seed_is_the_given_seed_or_torchs_last_one():
    from dreamgym.seeding import run_seed

    torch.manual_seed(7)
    assert (run_seed(None), run_seed(3)) == (7, 3)

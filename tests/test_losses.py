"""Policy-gradient loss math against hand-computed numbers."""

import math

import pytest
import torch

from dreamgym.rl.losses import (
    approx_kl,
    clip_fraction,
    clipped_surrogate_loss,
    clipped_value_loss,
    entropy_from_logits,
    kl_k3,
    masked_mean,
    token_log_probs,
)


def test_masked_mean():
    x = torch.tensor([[1.0, 2.0, 3.0]])
    assert masked_mean(x, torch.tensor([[True, False, True]])).item() == pytest.approx(2.0)
    assert masked_mean(x, torch.zeros(1, 3, dtype=torch.bool)).item() == 0.0


def test_clipped_surrogate_by_hand():
    # ratios 1.5, 0.5, 1.0, 0.5; advantages 1, 1, -1, -1; eps 0.2
    ratio = torch.tensor([[1.5, 0.5, 1.0, 0.5]])
    logp, old = ratio.log(), torch.zeros(1, 4)
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0]])
    mask = torch.ones(1, 4, dtype=torch.bool)
    # per token -min(rA, clip(r)A): -1.2, -0.5, 1.0, 0.8
    expected = (-1.2 - 0.5 + 1.0 + 0.8) / 4
    assert clipped_surrogate_loss(logp, old, adv, mask, 0.2).item() == pytest.approx(expected, abs=1e-6)
    # clip fraction: |r-1| > 0.2 for tokens 0, 1, 3
    assert clip_fraction(logp, old, mask, 0.2).item() == pytest.approx(0.75)


def test_unmasked_tokens_carry_no_loss_or_gradient():
    logp = torch.tensor([[-1.0, -2.0, -0.5, -0.7]], requires_grad=True)
    old = torch.tensor([[-1.1, -2.0, -0.4, -0.9]])
    adv = torch.full((1, 4), 0.7)
    mask = torch.tensor([[False, False, True, True]])  # prompt, prompt, action, action
    loss = clipped_surrogate_loss(logp, old, adv, mask) + 0.01 * kl_k3(logp, old - 0.3, mask)
    loss.backward()
    assert logp.grad[0, :2].abs().sum().item() == 0.0
    assert logp.grad[0, 2:].abs().sum().item() > 0.0
    perturbed = logp.detach().clone()
    perturbed[0, :2] += 5.0
    again = clipped_surrogate_loss(perturbed, old, adv, mask) + 0.01 * kl_k3(perturbed, old - 0.3, mask)
    assert again.item() == pytest.approx(loss.item())


def test_kl_k3_by_hand():
    logp = torch.tensor([[math.log(0.5), math.log(0.2)]])
    ref = torch.tensor([[math.log(0.25), math.log(0.2)]])
    mask = torch.ones(1, 2, dtype=torch.bool)
    # token 0: d = log(0.5); exp(d) - d - 1 = 0.5 + 0.6931 - 1 = 0.19315; token 1: 0
    assert kl_k3(logp, ref, mask).item() == pytest.approx((0.5 + math.log(2) - 1) / 2, abs=1e-6)
    assert kl_k3(ref, ref, mask).item() == 0.0


def test_approx_kl_by_hand():
    logp = torch.tensor([[math.log(2.0)]])
    # r = 2: (r - 1) - log r = 1 - 0.6931
    assert approx_kl(logp, torch.zeros(1, 1), torch.ones(1, 1, dtype=torch.bool)).item() == pytest.approx(
        1 - math.log(2), abs=1e-6
    )


def test_clipped_value_loss_by_hand():
    values, old, ret = torch.tensor([1.0, 0.1]), torch.tensor([0.0, 0.0]), torch.tensor([2.0, 0.0])
    # turn 0: (1-2)^2 = 1; clipped v = 0.2 -> (0.2-2)^2 = 3.24 -> 3.24
    # turn 1: (0.1-0)^2 = 0.01; clipped v = 0.1 -> 0.01
    assert clipped_value_loss(values, old, ret, 0.2).item() == pytest.approx(
        0.5 * (3.24 + 0.01) / 2, abs=1e-6
    )


def test_entropy_and_token_log_probs():
    logits = torch.zeros(1, 3, 4)  # uniform over 4 tokens
    mask = torch.tensor([[False, True, True]])
    assert entropy_from_logits(logits, mask).item() == pytest.approx(math.log(4), abs=1e-6)
    logits = torch.tensor([[[0.0, math.log(3.0)], [0.0, 0.0]]])  # p(1 | pos 0) = 0.75
    lp = token_log_probs(logits, torch.tensor([[0, 1]]))
    assert lp[0, 0].item() == 0.0 and lp[0, 1].item() == pytest.approx(math.log(0.75), abs=1e-6)


def test_shape_mismatch_is_named():
    with pytest.raises(ValueError, match="old_logp"):
        clipped_surrogate_loss(
            torch.zeros(2, 3), torch.zeros(2, 4), torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool)
        )


def test_clip_ppo_loss_combines_the_terms_with_its_coefficients():
    from dreamgym.rl.objective import ClipPPOLoss

    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5)
    ids = torch.randint(5, (2, 3))
    logp = token_log_probs(logits, ids)
    old, ref = logp.detach() + 0.1, logp.detach() - 0.2
    mask = torch.tensor([[False, True, True], [False, False, True]])
    adv = torch.tensor([1.0, -0.5])
    values, old_values, returns = torch.tensor([0.2, 0.4]), torch.tensor([0.1, 0.5]), torch.tensor([1.0, 0.0])
    obj = ClipPPOLoss(clip_eps=0.1, kl_coef=0.3, entropy_coef=0.05, value_coef=2.0, value_clip_eps=0.1)
    parts = obj(logp, old, adv, mask, logits, ref_logp=ref, values=values, old_values=old_values,
                returns=returns, token_weight=0.25, turn_weight=0.5)  # fmt: skip
    a = adv.unsqueeze(1).expand_as(logp)
    token = clipped_surrogate_loss(logp, old, a, mask, 0.1) + 0.3 * kl_k3(logp, ref, mask)
    token = token - 0.05 * entropy_from_logits(logits, mask)
    value = clipped_value_loss(values, old_values, returns, 0.1)
    torch.testing.assert_close(parts["loss"], 0.25 * token + 0.5 * 2.0 * value)
    torch.testing.assert_close(parts["loss_value"], value)
    assert set(parts) == {"loss", "loss_policy", "kl_ref", "entropy", "loss_value", "approx_kl", "clipfrac"}
    # no critic: no value term; no KL coefficient: no reference needed
    bare = ClipPPOLoss(kl_coef=0.0)(logp, old, adv, mask, logits)
    assert "loss_value" not in bare and "kl_ref" not in bare and not ClipPPOLoss(kl_coef=0.0).needs_reference
    with pytest.raises(ValueError, match="needs ref_logp"):
        ClipPPOLoss(kl_coef=0.1)(logp, old, adv, mask, logits)
    with pytest.raises(ValueError, match="must be >= 0"):
        ClipPPOLoss(entropy_coef=-1.0)

"""Scoring and the PPO/GRPO update run length-ordered micro-batches cut to their own width: the same
numbers as one batch at the full padded width."""

from __future__ import annotations

import torch

from dreamgym.rl.critic import ValueHead
from dreamgym.rl.losses import token_log_probs
from dreamgym.rl.objective import ClipPPOLoss
from dreamgym.rl.rollout import Turn, build_rollout_batch
from dreamgym.rl.scoring import policy_forward, score_rollout
from dreamgym.rl.update import minibatch_updates


def _rollout(vocab: int, n: int = 7):
    g = torch.Generator().manual_seed(0)
    turns = []
    for i in range(n):
        p, r = 3 + 5 * i, 1 + i % 3  # prompts of very different lengths
        ids = torch.randint(3, vocab, (p + r,), generator=g).tolist()
        turns.append(Turn(ids[:p], ids[p:], float(i % 2), True, True, False, i, i // 2, i, 0))
    batch = build_rollout_batch(turns, pad_id=0)
    batch.advantages = torch.linspace(-1, 1, n)
    return batch


def test_trimmed_drops_only_padding_columns(tiny_lm):
    batch = _rollout(50)
    short = batch[:2].trimmed()
    width = int(batch[:2].attention_mask.sum(1).max())
    assert short.input_ids.shape[1] == width < batch.input_ids.shape[1]
    assert torch.equal(short.input_ids, batch[:2].input_ids[:, :width])
    assert torch.equal(short.action_mask, batch[:2].action_mask[:, :width])
    assert batch.trimmed() is batch  # nothing to cut


def test_scoring_matches_one_full_width_forward(tiny_lm):
    model, _ = tiny_lm.build()
    batch = _rollout(model.config.vocab_size)
    score_rollout(batch, model, batch_size=2)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask.long()).logits
    expected = token_log_probs(logits, batch.input_ids) * batch.action_mask
    assert torch.allclose(batch.old_log_probs, expected, atol=1e-5)


def test_scoring_and_the_update_share_one_forward(tiny_lm):
    """``policy_forward`` is the training step's forward; without grad it gives what scoring stored."""
    model, _ = tiny_lm.build()
    critic = ValueHead()
    critic.bind(model)
    batch = _rollout(model.config.vocab_size)
    score_rollout(batch, model, critic=critic, batch_size=3)
    model.eval()
    fwd = policy_forward(model, batch, critic)
    act = batch.action_mask[:, fwd.start :]
    assert fwd.logits.shape[:2] == fwd.log_probs.shape == act.shape
    torch.testing.assert_close(fwd.log_probs.detach() * act, batch.old_log_probs[:, fwd.start :])
    assert batch.old_log_probs[:, : fwd.start].abs().max() == 0
    torch.testing.assert_close(fwd.values.detach(), batch.old_values, rtol=1e-5, atol=1e-6)
    (fwd.log_probs[act].sum() + fwd.values.sum()).backward()  # it is the differentiable training forward
    assert all(p.grad is not None for p in critic.parameters())
    assert policy_forward(model, batch).values is None


def test_micro_batches_accumulate_the_whole_minibatch_gradient(tiny_lm):
    model, _ = tiny_lm.build()
    batch = _rollout(model.config.vocab_size)
    score_rollout(batch, model)
    batch.old_log_probs += 0.05  # a ratio away from 1, so the clip terms take part
    loss = ClipPPOLoss(clip_eps=0.2, kl_coef=0.0)
    model.train()

    def loss_fn(mb, w_tok, w_turn):
        fwd = policy_forward(model, mb)
        start = fwd.start
        return loss(fwd.log_probs, mb.old_log_probs[:, start:], mb.advantages, mb.action_mask[:, start:],
                    fwd.logits, token_weight=w_tok, turn_weight=w_turn)  # fmt: skip

    grads = []

    def run(micro):
        torch.manual_seed(0)
        grads.append(None)

        def keep():
            grads[-1] = [p.grad.clone() for p in model.parameters() if p.grad is not None]

        minibatch_updates(batch, loss_fn, model.zero_grad, lambda x: x.backward(), keep, 1, 1, micro)

    run(2)  # four micro-batches, each at its own width
    run(64)  # one micro-batch at the batch's full width
    assert all(torch.allclose(a, b, atol=1e-6, rtol=1e-4) for a, b in zip(*grads, strict=True))

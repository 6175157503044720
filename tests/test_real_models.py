"""Real models on real hardware, checked on a CPU: chat templates and the loss mask, LoRA and its
reference policy, dtype/device options, device- and dtype-correct RL math, the ZeRO-3 refusal."""

import lightning as L
import pytest
import torch
from rl_toy import make_toy_tokenizer

from datamodules.rollouts import RolloutDataModule
from dreamgym.envs.factory import EnvFactory
from dreamgym.modeling import LanguageModel, load_tokenizer
from dreamgym.modeling.chat import ChatCodec, stop_token_ids
from dreamgym.modeling.factory import LoRA, export_model
from dreamgym.modeling.sft import encode_bc_batch
from dreamgym.rl.advantages import GAEAdvantage, GRPOAdvantage, gae_advantages, grpo_advantages
from dreamgym.rl.collector import RolloutCollector
from dreamgym.rl.losses import (
    approx_kl,
    clipped_surrogate_loss,
    clipped_value_loss,
    entropy_from_logits,
    kl_k3,
    token_log_probs,
)
from dreamgym.rl.objective import ClipPPOLoss
from dreamgym.rl.rollout import Turn, build_rollout_batch
from dreamgym.rl.schedules import RealSchedule
from models.policy_rl import PolicyRL
from models.policy_sft import PolicySFT

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""A Qwen-style (ChatML) template; its end of turn ``<|im_end|>`` is not the tokenizer's EOS."""


@pytest.fixture(scope="module")
def plain_dir(tmp_path_factory):
    return make_toy_tokenizer(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="module")
def chat_dir(plain_dir, tmp_path_factory):
    """The toy tokenizer with ChatML tokens and template and no BOS token (as Qwen's)."""
    tok = load_tokenizer(plain_dir)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.chat_template = CHATML
    tok.bos_token = None
    out = tmp_path_factory.mktemp("chat")
    tok.save_pretrained(out)
    return str(out)


def _lm(path, **kw):
    return LanguageModel(preset="tiny", tokenizer_path=path, max_positions=512, **kw)


# ------------------------------------------------------------------ chat templates


def test_plain_template_keeps_the_legacy_token_sequence(plain_dir):
    """The bundled tokenizer's template renders [BOS] prompt / " " target [EOS], as before templates."""
    tok = load_tokenizer(plain_dir)
    codec = ChatCodec(tok)
    text = "Instruction: write a word\nCurrent state:\nempty page\nAction:"
    body = tok.encode(text, add_special_tokens=False)
    assert codec.prompt_ids(text) == [tok.bos_token_id] + body
    assert codec.prompt_ids(text, 5) == [tok.bos_token_id] + body[-4:]  # old cut: ids[:1] + ids[-(n-1):]
    assert codec.reply_ids(" say[word]") == tok.encode(" say[word]", add_special_tokens=False) + [
        tok.eos_token_id
    ]
    tok.chat_template = None  # a tokenizer saved before templates: the same layout
    assert ChatCodec(tok).prompt_ids(text) == [tok.bos_token_id] + body


def test_chat_template_loss_mask_is_exactly_the_assistant_tokens(chat_dir):
    tok = load_tokenizer(chat_dir)
    codec = ChatCodec(tok)
    ex = {"prompt": "Instruction: write a word with e\nAction:", "target": " say[ee]"}
    b = encode_bc_batch(codec, [ex], max_length=256)
    ids, mask = b["input_ids"][0], b["target_mask"][0]
    msgs = [{"role": "user", "content": ex["prompt"]}]
    prompt = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert ids[~mask].tolist() == tok.encode(prompt, add_special_tokens=False)  # no BOS: Qwen-like
    assert tok.decode(ids[mask]) == "say[ee]<|im_end|>"
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert im_end in codec.stop_ids and tok.eos_token_id in codec.stop_ids
    # truncation keeps the template's tokens around the cut user text
    cut = codec.prompt_ids(ex["prompt"], codec.overhead + 3)
    assert (
        cut[: len(codec.prefix_ids)] == codec.prefix_ids and cut[-len(codec.suffix_ids) :] == codec.suffix_ids
    )
    assert codec.cut_reply([5, im_end, 7]) == [5, im_end]


def test_stop_ids_respect_the_generation_configs_list(plain_dir):
    tok = load_tokenizer(plain_dir)
    model, _ = _lm(plain_dir).build()
    model.generation_config.eos_token_id = [7, tok.eos_token_id]
    assert stop_token_ids(tok, model) == [7, tok.eos_token_id]


@pytest.mark.slow
def test_sft_and_grpo_fit_with_a_chat_template(chat_dir, tmp_path):
    """A few steps of policy SFT, then GRPO, with the ChatML tokenizer: turns are prompt ids from the
    template, then replies cut at a stop id; the action mask covers the replies only."""
    sft = PolicySFT(_lm(chat_dir), optimizer=lambda p: torch.optim.AdamW(p, lr=1e-2), max_length=128)
    ex = [{"prompt": f"write a word containing the letter {c}", "target": f" say[{c}{c}]"} for c in "eaot"]
    kw = dict(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False, default_root_dir=str(tmp_path))  # fmt: skip
    loader = torch.utils.data.DataLoader(ex, batch_size=4, collate_fn=list)
    L.Trainer(max_steps=3, **kw).fit(sft, loader)
    export_model(sft.model, sft.tokenizer, tmp_path / "sft")

    spec = EnvFactory("letters", split="train", batch_size=4, max_steps=2)
    rl = PolicyRL(
        LanguageModel(path=str(tmp_path / "sft")), RealSchedule(spec, iterations=2), GRPOAdvantage(),
        eval_env=EnvFactory("letters", split="test", batch_size=4, max_steps=2), tasks_per_batch=2,
        group_size=2, collector=RolloutCollector(max_new_tokens=6, max_prompt_tokens=96),
        optimizer=lambda p: torch.optim.AdamW(p, lr=1e-3),
    )  # fmt: skip
    codec = ChatCodec(rl.tokenizer, rl.model)
    coll = rl.collector.collect(spec.build(), rl.model, rl.tokenizer, [0, 1], group_size=2)
    for t in coll.turns:
        assert t.prompt_ids[-len(codec.suffix_ids) :] == codec.suffix_ids
        assert codec.cut_reply(t.response_ids) == t.response_ids
    batch = build_rollout_batch(coll.turns, rl._pad_id())
    for row, t in zip(batch.input_ids[batch.action_mask].split([len(t.response_ids) for t in coll.turns]),
                      coll.turns, strict=True):  # fmt: skip
        assert row.tolist() == t.response_ids
    L.Trainer(max_steps=-1, limit_val_batches=0, **kw).fit(
        rl, RolloutDataModule(eval_tasks=2, eval_batch_tasks=2)
    )
    assert rl.schedule.iteration == 2


# --------------------------------------------------------------------------- LoRA


@pytest.mark.slow
def test_lora_trains_only_adapters_and_the_reference_is_the_base_model(plain_dir, tmp_path):
    pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    base, _ = _lm(plain_dir).build()  # same seed: the weights LoRA wraps
    spec = EnvFactory("letters", split="train", batch_size=4, max_steps=2)
    rl = PolicyRL(
        _lm(plain_dir, lora=LoRA(r=4, alpha=8)), RealSchedule(spec, iterations=2), GRPOAdvantage(),
        eval_env=EnvFactory("letters", split="test", batch_size=4, max_steps=2), tasks_per_batch=2, group_size=2,
        collector=RolloutCollector(max_new_tokens=4, max_prompt_tokens=96), loss=ClipPPOLoss(kl_coef=0.1), save_dir=str(tmp_path / "out"),
        optimizer=lambda p: torch.optim.AdamW(p, lr=1e-2),
    )  # fmt: skip
    assert rl.ref_model is None  # no deep copy
    before = {k: v.detach().clone() for k, v in rl.model.state_dict().items()}
    L.Trainer(accelerator="cpu", devices=1, max_steps=-1, logger=False, enable_checkpointing=False,
              enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
              default_root_dir=str(tmp_path)).fit(rl, RolloutDataModule(eval_tasks=2, eval_batch_tasks=2))  # fmt: skip
    after = rl.model.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all("lora_" in k for k in changed), changed
    ids = torch.randint(0, 50, (2, 9))
    with torch.no_grad():
        for n, p in rl.model.named_parameters():  # a clearly trained adapter (B starts at 0)
            if "lora_B" in n:
                p.normal_(0, 0.5)
        ref = rl.ref_logits(ids, torch.ones_like(ids, dtype=torch.bool))
        torch.testing.assert_close(ref, base(input_ids=ids).logits)
        assert not torch.allclose(rl.model(input_ids=ids).logits, ref)  # the adapters move the policy only
        export_model(rl.model, rl.tokenizer, tmp_path / "merged")
        reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")  # plain transformers
        torch.testing.assert_close(reloaded(input_ids=ids).logits, rl.model(input_ids=ids).logits)
    assert (tmp_path / "out" / "config.json").is_file()  # the end-of-fit export
    assert (tmp_path / "merged" / "adapter" / "adapter_config.json").is_file()


def test_a_lora_experience_model_exports_as_a_whole_model(tiny_tokenizer, tmp_path):
    """``save_pretrained`` of a peft model writes only the adapters, with its base model's path inside:
    the experience model's export merges them, so the synthetic env loads a whole model."""
    pytest.importorskip("peft")
    from dreamgym.modeling.experience import ExperienceModel, save_experience_model
    from dreamgym.modeling.formats import ExperienceFormat

    model, tok = _lm(str(tiny_tokenizer), lora=LoRA(r=4, alpha=8)).build()
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    save_experience_model(tmp_path / "exp", model, tok, ExperienceFormat(k=0))
    assert (tmp_path / "exp" / "model.safetensors").is_file()
    loaded = ExperienceModel.from_pretrained(tmp_path / "exp").model
    assert not hasattr(loaded, "peft_config")
    ids = torch.randint(5, 200, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=ids).logits, model.eval()(input_ids=ids).logits)


def test_dtype_attention_and_checkpointing_options(plain_dir):
    model, _ = _lm(
        plain_dir, dtype="bfloat16", attn_implementation="eager", gradient_checkpointing=True
    ).build()
    assert next(model.parameters()).dtype == torch.bfloat16
    assert model.config._attn_implementation == "eager" and model.is_activation_checkpointing
    with pytest.raises(ValueError, match="dtype"):
        _lm(plain_dir, dtype="bf16")


@pytest.mark.slow
def test_compile_speeds_training_forward_only_and_keeps_weights(plain_dir):
    eager, _ = _lm(plain_dir).build()
    model, _ = _lm(plain_dir, compile=True).build()
    assert model.state_dict().keys() == eager.state_dict().keys()  # not wrapped: export is unchanged
    ids = torch.randint(5, 200, (2, 16), generator=torch.Generator().manual_seed(0))
    out = model(input_ids=ids).logits  # training mode: the compiled forward
    torch.testing.assert_close(out, eager(input_ids=ids).logits, rtol=1e-4, atol=1e-4)
    out.float().mean().backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
    model.eval()
    with torch.no_grad():  # eval mode (generation, scoring) stays eager, also with a KV cache
        gen = model.generate(input_ids=ids[:1, :4], max_new_tokens=3, do_sample=False)
    assert gen.shape == (1, 7)


# -------------------------------------------------------------- RL math: dtype and device


def _turns():
    rows = [(0, 0, 0, 1.0, True), (1, 0, 0, 0.0, False), (1, 0, 1, 1.0, True), (2, 1, 0, 0.0, True),
            (3, 1, 0, 1.0, True)]  # fmt: skip
    return [Turn([1, 2, 3], [4, 5], r, d, d, False, g, g, e, k) for e, g, k, r, d in rows]


@pytest.mark.parametrize("default", [torch.bfloat16, torch.float16])
def test_rl_math_under_a_low_precision_default_dtype(default):
    """bf16-true makes bf16 the default dtype: every tensor the RL code makes keeps the batch's dtype."""
    batch = build_rollout_batch(_turns(), pad_id=0)
    ref = build_rollout_batch(_turns(), pad_id=0)
    GRPOAdvantage()(ref)
    old = torch.get_default_dtype()
    torch.set_default_dtype(default)
    try:
        batch = build_rollout_batch(_turns(), pad_id=0)
        assert batch.old_values.dtype == batch.advantages.dtype == torch.float32
        GRPOAdvantage()(batch)
        torch.testing.assert_close(batch.advantages, ref.advantages)
        batch.old_values = torch.rand(5, dtype=torch.bfloat16)
        GAEAdvantage()(batch)
        assert batch.advantages.dtype == torch.float32
        logits = torch.randn(5, batch.input_ids.shape[1], 8, dtype=torch.bfloat16)
        logp = token_log_probs(logits, batch.input_ids.clamp_max(7))
        assert logp.dtype == torch.float32
        loss = clipped_surrogate_loss(logp, batch.old_log_probs, batch.advantages[:, None].expand_as(logp),
                                      batch.action_mask)  # fmt: skip
        assert torch.isfinite(loss)
    finally:
        torch.set_default_dtype(old)


def test_rl_math_makes_no_tensor_on_the_default_device():
    """Tensors on the CPU while the default device is ``meta``: a tensor made without the batch's device
    lands on ``meta`` and the mix raises, as a CPU tensor next to a CUDA batch would on a GPU."""
    batch = build_rollout_batch(_turns(), pad_id=0)
    batch.old_values = torch.rand(5)
    with torch.device("meta"):
        GRPOAdvantage()(batch)
        assert batch.advantages.device.type == "cpu"
        adv, ret = gae_advantages(batch.rewards, batch.old_values, batch.dones)
        assert adv.device.type == ret.device.type == "cpu"
        assert grpo_advantages(batch.rewards, batch.group_id).device.type == "cpu"


def test_losses_run_on_the_meta_device():
    n, length, v = 3, 6, 11
    logits = torch.randn(n, length, v, device="meta")
    ids = torch.zeros(n, length, dtype=torch.long, device="meta")
    mask = torch.ones(n, length, dtype=torch.bool, device="meta")
    allowed = torch.zeros(n, length, 2, dtype=torch.long, device="meta")
    logp = token_log_probs(logits, ids, allowed)
    for out in (
        clipped_surrogate_loss(logp, logp, logp, mask), approx_kl(logp, logp, mask), kl_k3(logp, logp, mask),
        entropy_from_logits(logits, mask, allowed),
        clipped_value_loss(logp[:, 0], logp[:, 0], logp[:, 0]),
    ):  # fmt: skip
        assert out.device.type == "meta" and out.dtype == torch.float32


def test_synthetic_env_places_its_experience_model():
    from dreamgym.envs.synthetic import SyntheticEnv

    env = SyntheticEnv()
    assert env.place_model("meta") is env
    assert next(env.experience.model.parameters()).device.type == "meta"
    pinned = SyntheticEnv(model_device="cpu")
    pinned.place_model("meta")  # a configured device wins over the trainer's
    assert next(pinned.experience.model.parameters()).device.type == "cpu"


# ------------------------------------------------------------------------- ZeRO-3


def test_zero3_is_refused_for_rl_with_the_reason():
    from lightning.pytorch.strategies import DDPStrategy, DeepSpeedStrategy

    from dreamgym.strategies import check_rl_strategy

    with pytest.raises(ValueError, match="ZeRO-3 is not supported for RL.*forward"):
        check_rl_strategy(DeepSpeedStrategy(stage=3))
    check_rl_strategy(DeepSpeedStrategy(stage=2))
    check_rl_strategy(DDPStrategy())

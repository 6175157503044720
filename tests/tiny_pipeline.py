"""Tiny overrides of the WebShop main job (configs/pipeline_webshop.yaml) shared by the pipeline and
benchmark tests: a few episodes, a 400-token BPE, 2-step fits of the `tiny` preset, 1 RL iteration. Fit
overrides are config pieces in the fit configs' own nesting (dreamgym/lab/overrides.py)."""

import json
from pathlib import Path

QUIET = {"logger": False, "callbacks": [], "enable_progress_bar": False, "enable_checkpointing": False}
"""Trainer settings of every tiny fit (plus ``default_root_dir``)."""


def _schedule(**init_args) -> dict:
    return {"model": {"init_args": {"schedule": {"init_args": init_args}}}}


TINY_RL = {
    "trainer": {"val_check_interval": 100},
    "model": {
        "init_args": {
            "eval_env": {"init_args": {"max_steps": 2}},
            "tasks_per_batch": 1,
            "group_size": 2,
            "collector": {"init_args": {"max_new_tokens": 8}},
        }
    },
}
"""RL settings of every schedule: one validation at most, 1 task x 2 episodes, 8 new tokens."""

TINY_SYNTHETIC_ENV = {
    "init_args": {
        "batch_size": 2,
        "max_steps": 2,
        "kwargs": {"write_back": True, "max_new_tokens": 16, "decoding": "free"},
    }
}
"""A tiny synthetic env (a tiny experience model decodes freely)."""

TINY_RL_ARGS = [TINY_RL, _schedule(iterations=1)]
"""RL overrides of SyntheticSchedule and RealSchedule configs (the env overrides depend on the schedule)."""

SYNTHETIC_ENV = [_schedule(env=TINY_SYNTHETIC_ENV)]
"""A tiny synthetic env for ``SyntheticSchedule`` configs."""

TINY_S2R_ARGS = [
    TINY_RL,
    _schedule(
        synthetic_iterations=1,
        real_iterations=1,
        synthetic_env=TINY_SYNTHETIC_ENV,
        real_env={"init_args": {"batch_size": 2, "max_steps": 2}},
    ),
]
"""RL overrides of Sim2RealSchedule configs: one synthetic iteration (tiny synthetic env), one real one."""


def tiny_rl_args(rl_config: str) -> list[dict]:
    """The tiny RL overrides for ``rl_config``'s schedule (synthetic-only or sim-to-real)."""
    from dreamgym.config_files import load_config

    schedule = load_config(rl_config)["model"]["init_args"]["schedule"]["class_path"]
    return TINY_S2R_ARGS if schedule.endswith("Sim2RealSchedule") else [*TINY_RL_ARGS, *SYNTHETIC_ENV]


def pipeline_overrides(out, quiet: dict | None = None, rl_config: str | None = None) -> dict:
    """Values of configs/pipeline_webshop.yaml (a suite's ``pipeline_overrides``) that write under ``out``
    and make every stage tiny; the RL overrides fit ``rl_config`` (default: the one
    configs/pipeline_webshop.yaml names)."""
    import yaml

    root = Path(__file__).resolve().parents[1]
    rl_config = rl_config or yaml.safe_load(open(root / "configs" / "pipeline_webshop.yaml"))["rl_config"]
    rl_config = str(root / rl_config)
    trainer = {"default_root_dir": f"{out}/runs", **(QUIET if quiet is None else quiet)}
    tiny_fit = {"trainer": {**trainer, "max_steps": 2, "limit_val_batches": 0}}
    tiny_decoding = {"max_new_tokens": 16, "decoding": "free"}
    experience = {"init_args": {"lm": {"init_args": {"preset": "tiny"}}, **tiny_decoding}}
    return {
        "out_dir": str(out), "train_expert": 6, "train_random": 2, "train_non_oracle": 2, "train_near_miss": 2,
        "test_expert": 2, "vocab_size": 400, "eval_tasks": 2, "eval_batch_size": 2, "onpolicy_tasks": 2,
        "experience_overrides": [{**tiny_fit, "model": experience, "data": {"init_args": {"encoder": "hashing"}}}],
        "policy_sft_overrides": [{**tiny_fit, "model": {"init_args": {"policy": {"init_args": {"preset": "tiny"}}}}}],
        "onpolicy_experience_overrides": [{**tiny_fit, "model": {"init_args": tiny_decoding}}],
        "rl_overrides": [{"trainer": trainer}, *tiny_rl_args(rl_config)],
    }  # fmt: skip


def pipeline_argv(out, quiet: dict | None = None, rl_config: str | None = None) -> list[str]:
    """:func:`pipeline_overrides` as command-line options of ``python -m dreamgym pipeline`` (without
    ``--config``)."""
    values = pipeline_overrides(out, quiet, rl_config).items()
    return [f"--{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in values]  # a string as typed

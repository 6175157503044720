"""The offline-only regime (WebArena-Lite): the guard refuses real steps during fit except held-out
validation, refuses configurations that would take them, and the regime runs end to end on the web
suite (offline data -> experience model -> synthetic GRPO -> held-out real evaluation).

The guard tests use the WebShop env (no browser needed); the end-to-end test needs Chromium."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from tiny_pipeline import pipeline_argv

from dreamgym.envs import make_env
from dreamgym.envs.factory import EnvFactory, SyntheticEnvFactory
from dreamgym.envs.guard import RealStepForbidden, forbid_real_steps, guard_active, held_out_evaluation
from dreamgym.rl.offline import OfflineOnly, check_offline_module
from dreamgym.rl.schedules import RealSchedule, Sim2RealSchedule, SyntheticSchedule


@pytest.fixture(scope="module")
def envs():
    return {split: make_env("webshop", batch_size=[1], split=split) for split in ("train", "test")}


def test_guard_forbids_real_steps_outside_held_out_evaluation(envs):
    train, test = envs["train"], envs["test"]
    train.reset()
    with forbid_real_steps("a test"):
        with pytest.raises(RealStepForbidden, match="outside held-out evaluation"):
            train.reset()
        with pytest.raises(RealStepForbidden, match="offline-only"):
            test.reset()
        with held_out_evaluation():
            test.reset()  # held-out evaluation may use the real env
            with pytest.raises(RealStepForbidden, match="on split 'train'"):
                train.reset()
        synthetic = make_env("synthetic", batch_size=[1])  # never guarded
        synthetic.reset()
    train.reset()  # the guard is gone after the block
    assert not guard_active()


def _module(schedule, audit=None, eval_split="test"):
    return SimpleNamespace(schedule=schedule, audit=audit, eval_env=EnvFactory("webshop", split=eval_split))


def test_offline_only_refuses_runs_that_would_step_the_real_env():
    synthetic = SyntheticEnvFactory(checkpoint="unused")
    check_offline_module(_module(SyntheticSchedule(synthetic)))
    with pytest.raises(ValueError, match=r"RealSchedule with real phase\(s\) \['real'\]"):
        check_offline_module(_module(RealSchedule(EnvFactory("webshop"), iterations=1)))
    with pytest.raises(ValueError, match="Sim2RealSchedule"):
        check_offline_module(_module(Sim2RealSchedule(synthetic, EnvFactory("webshop"))))
    with pytest.raises(ValueError, match="model.init_args.audit is set"):
        check_offline_module(_module(SyntheticSchedule(synthetic), audit=object()))
    with pytest.raises(ValueError, match="eval_env.init_args.split is 'train'"):
        check_offline_module(_module(SyntheticSchedule(synthetic), eval_split="train"))


def test_offline_only_callback_guards_fit_and_opens_validation(envs):
    module = _module(SyntheticSchedule(SyntheticEnvFactory(checkpoint="unused")))
    cb, second = OfflineOnly(), OfflineOnly()
    cb.on_fit_start(None, module)
    second.on_fit_start(None, module)  # a duplicate in the callback list shares the guard
    try:
        with pytest.raises(RealStepForbidden):
            envs["train"].reset()
        cb.on_validation_start(None, module)
        envs["test"].reset()
        cb.on_validation_end(None, module)
        with pytest.raises(RealStepForbidden):
            envs["test"].reset()
    finally:
        second.on_fit_end(None, module)
        cb.on_exception(None, module, RuntimeError("stop"))
    assert not guard_active()
    envs["train"].reset()


def test_offline_only_pipeline_refuses_the_on_policy_stage():
    from dreamgym.lab.pipeline import parse_pipeline_config

    cfg = parse_pipeline_config(["--config", "configs/pipeline_web.yaml"])
    assert cfg.offline_only and cfg.onpolicy_tasks == 0
    with pytest.raises(ValueError, match="set onpolicy_tasks: 0"):
        parse_pipeline_config(["--config", "configs/pipeline_web.yaml", "--onpolicy_tasks=5"])


# ------------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_web_offline_regime_end_to_end(tmp_path, monkeypatch):
    from test_web_env import MISSING

    if MISSING is not None:
        pytest.skip(f"web env: {MISSING}")
    import dreamgym.rl.offline as offline
    from dreamgym.lab.pipeline import parse_pipeline_config, run_pipeline
    from dreamgym.schema import is_success, read_trajectories

    guarded = []
    real_forbid = offline.forbid_real_steps
    monkeypatch.setattr(
        offline, "forbid_real_steps", lambda reason: guarded.append(reason) or real_forbid(reason)
    )
    out = tmp_path / "web"
    argv = ["--config", "configs/pipeline_web.yaml", *pipeline_argv(out, rl_config="configs/web_grpo.yaml"), "--onpolicy_tasks=0",
            "--train_non_oracle=0", "--eval_batch_size=2", "--max_steps=4"]  # fmt: skip
    report = run_pipeline(parse_pipeline_config(argv))
    assert guarded, "the RL stage ran without the OfflineOnly guard"
    train = list(read_trajectories(out / "offline_train.jsonl"))
    assert {t.env for t in train} == {"web"} and {t.policy for t in train} == {
        "expert",
        "random",
        "near_miss",
    }
    assert all(tr.reasoning for t in train for tr in t.transitions)
    assert not (out / "policy_rollouts_train.jsonl").exists()  # no on-policy real episodes
    for name in ("experience_model", "policy_sft", "policy_rl", "eval.json"):
        assert (out / name).exists(), name
    for policy in ("policy_sft", "policy_rl"):
        episodes = list(read_trajectories(out / f"{policy}_test_episodes.jsonl"))
        assert len(episodes) == 2 and all(t.split == "test" and t.env == "web" for t in episodes)
        solved = sum(is_success(t.transitions[-1].reward, t.transitions[-1].done) for t in episodes)
        assert report["eval"][policy]["test/success_rate"] == pytest.approx(solved / len(episodes))
    assert report["onpolicy_real_transitions"] == 0
    assert json.loads((out / "eval.json").read_text())["policy_rl"]


@pytest.mark.slow
def test_offline_only_in_a_real_fit(tmp_path):
    """A PolicyRL fit under OfflineOnly: RL in a non-real env and held-out validation in the real one run;
    a real step anywhere else during the fit (here a callback's) stops the fit with RealStepForbidden."""
    import lightning as L
    import torch
    from rl_toy import LetterEnv, make_toy_tokenizer

    from datamodules.rollouts import RolloutDataModule
    from dreamgym.envs.registry import register_env
    from dreamgym.modeling import LanguageModel
    from dreamgym.rl.collector import RolloutCollector
    from models.policy_rl import PolicyRL

    class DreamLetters(LetterEnv):  # stands in for the synthetic env (not a real env)
        is_real = False

    class DreamFactory(EnvFactory):
        is_real = False

    register_env("dream_letters", DreamLetters)
    policy = LanguageModel(
        preset="tiny", tokenizer_path=make_toy_tokenizer(tmp_path / "tok"), max_positions=512
    )

    def fit(extra_callbacks):
        module = PolicyRL(
            policy=policy, schedule=SyntheticSchedule(DreamFactory("dream_letters", batch_size=4, max_steps=2), iterations=2),
            eval_env=EnvFactory("letters", split="test", batch_size=2, max_steps=2), tasks_per_batch=2, group_size=2,
            optimizer=lambda p: torch.optim.AdamW(p, lr=1e-3), collector=RolloutCollector(max_new_tokens=4, max_prompt_tokens=128),
        )  # fmt: skip
        trainer = L.Trainer(
            accelerator="cpu", devices=1, default_root_dir=str(tmp_path), logger=False, enable_checkpointing=False,
            enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=1,
            val_check_interval=1, check_val_every_n_epoch=None, max_steps=-1, callbacks=[OfflineOnly(), *extra_callbacks],
        )  # fmt: skip
        trainer.fit(module, RolloutDataModule(eval_tasks=2, eval_batch_tasks=2))
        return module, trainer

    module, trainer = fit([])
    assert module.schedule.iteration == 2 and "val/success_rate" in trainer.callback_metrics
    assert not guard_active()

    class RealPeek(L.Callback):  # e.g. a forgotten audit: a real train-split step during training
        def on_train_batch_end(self, *args):
            make_env("letters", batch_size=[1], split="train").reset()

    with pytest.raises(RealStepForbidden, match="outside held-out evaluation"):
        fit([RealPeek()])
    assert not guard_active()

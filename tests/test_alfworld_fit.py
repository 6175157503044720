"""A few ``fit`` steps of every ALFWorld stage config (``python -m dreamgym fit --config configs/alfworld_*.yaml``)
on the ``tiny`` preset and CPU, chained as the pipeline does: real trajectories on a handful of bundled
games -> tokenizer -> experience-model SFT and policy SFT -> GRPO in the synthetic env and sim2real GRPO.

Only sizes change (steps, iterations, tasks, group, env steps, generation tokens, output paths), plus three
knobs that let a few steps reach every code path: the policy warm start runs 40 steps at a higher learning
rate and RL rollouts sample at temperature 0.3, so that the policy emits admissible commands and the
synthetic env really calls the experience model (at 3 SFT steps every command is invalid, a no-op that
never reaches it); a small entropy bonus keeps the RL gradient non-zero when every GRPO group has equal
rewards (all zero for a tiny policy in 3 steps). Classes, formats and the other settings are the configs'.
Every real env (collection, sim2real real phase, validation) plays a seven-game manifest (3 train,
2 valid_seen, 2 valid_unseen games) with its own game cache, since each ALFWorld game costs ~0.5 s to load.
"""

from pathlib import Path

import pytest
import torch

pytest.importorskip("textworld")

from dreamgym.lightning_cli import _lightning_cli  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
GAMES = {"train": 3, "valid_seen": 2, "valid_unseen": 2}
"""Bundled games per ALFWorld split in the test manifest (the fastest to load, distinct task types)."""
RL_TASKS, RL_GROUP, RL_STEPS = 2, 2, 3
EXPERIENCE_STEPS, POLICY_STEPS = 3, 40
REAL_BUDGET = RL_TASKS * RL_GROUP * RL_STEPS  # worst case of one real batch: the real phase runs once


def _small_manifest(path: Path) -> Path:
    from dreamgym.envs.alfworld.games import MANIFEST, load_manifest, save_manifest

    games = load_manifest(MANIFEST)["games"]
    pick = []
    for split, n in GAMES.items():
        types: set[str] = set()
        for g in sorted((g for g in games if g["split"] == split), key=lambda g: g["validation"]["total_s"]):
            if g["task_type"] not in types and len(types) < n:
                types.add(g["task_type"])
                pick.append(g)
    save_manifest(path, pick, {"test": True})
    return path


@pytest.fixture(scope="session")
def alfworld_inputs(tmp_path_factory):
    """Offline train/val trajectories on the small manifest, the env kwargs to replay it, a tokenizer."""
    from dreamgym.collect import collect_trajectories
    from dreamgym.modeling.tokenizer import corpus_from_trajectories, train_tokenizer

    root = tmp_path_factory.mktemp("alfworld_fit")
    env_kwargs = {
        "manifest": str(_small_manifest(root / "manifest.json.gz")),
        "cache_dir": str(root / "games"),
    }
    train, val = root / "offline_train.jsonl", root / "offline_val.jsonl"
    # the warm start config clones the searcher (non_oracle); the experience model learns from all
    collect_trajectories("alfworld", split="train", n_expert=6, n_random=2, out=train, max_steps=30, batch_size=4,
                         env_kwargs=env_kwargs, mix={"non_oracle": 6})  # fmt: skip
    collect_trajectories("alfworld", split="val", n_expert=1, n_random=1, out=val, max_steps=30, batch_size=2,
                         env_kwargs=env_kwargs, mix={"non_oracle": 1})  # fmt: skip
    tok = train_tokenizer(corpus_from_trajectories([train]), vocab_size=512)
    tok.save_pretrained(root / "tokenizer")
    return {"root": root, "train": train, "val": val, "tok": root / "tokenizer", "env_kwargs": env_kwargs}


def _fit(config: str, out: Path, overrides: list[str]):
    """``python -m dreamgym fit --config configs/<config>`` in-process; returns the finished LightningCLI."""
    argv = [
        "fit", "--config", str(CONFIGS / config), f"--trainer.default_root_dir={out}",
        f"--trainer.logger.init_args.save_dir={out / 'runs'}", "--trainer.log_every_n_steps=1",
        "--trainer.enable_model_summary=false",
        *overrides,
    ]  # fmt: skip
    return _lightning_cli(argv)


def _sft_overrides(inputs: dict, key: str, max_steps: int, ckpt_every: int) -> list[str]:
    return [
        f"--trainer.max_steps={max_steps}", f"--trainer.val_check_interval={max_steps}", "--trainer.limit_val_batches=1",
        f"--trainer.callbacks.init_args.every_n_train_steps={ckpt_every}", "--trainer.callbacks.init_args.save_top_k=-1",
        f"--model.init_args.{key}.init_args.preset=tiny", f"--model.init_args.{key}.init_args.tokenizer_path={inputs['tok']}",
        "--model.init_args.max_length=512",
        f"--data.init_args.train_files=[{inputs['train']}]", f"--data.init_args.val_files=[{inputs['val']}]",
    ]  # fmt: skip


@pytest.fixture(scope="session")
def experience_fit(alfworld_inputs):
    out = alfworld_inputs["root"] / "experience_sft"
    over = [*_sft_overrides(alfworld_inputs, "lm", EXPERIENCE_STEPS, 1), "--model.init_args.max_new_tokens=8",
            "--model.init_args.decoding=free",
            "--data.init_args.batch_size=2",
            f"--model.init_args.export_dir={out / 'experience_model'}", "--data.init_args.eval_batch_size=2",
            "--data.init_args.max_eval_examples=2"]  # fmt: skip
    return _fit("alfworld_experience_sft.yaml", out, over), out


@pytest.fixture(scope="session")
def policy_fit(alfworld_inputs):
    out = alfworld_inputs["root"] / "policy_sft"
    over = [*_sft_overrides(alfworld_inputs, "policy", POLICY_STEPS, POLICY_STEPS // 2), "--data.init_args.batch_size=4",
            "--model.init_args.optimizer.init_args.lr=3e-3", f"--model.init_args.save_dir={out / 'policy_sft'}"]  # fmt: skip
    return _fit("alfworld_policy_sft.yaml", out, over), out


def _flow(kwargs: dict) -> str:
    """A dict as a YAML flow mapping for a command-line override."""
    return "{" + ", ".join(f"{k}: {v}" for k, v in kwargs.items()) + "}"


def _rl_overrides(
    inputs: dict, experience_dir: Path, policy_dir: Path, save_dir: Path, env_key: str
) -> list[str]:
    """Shrink an ALFWorld GRPO config; ``env_key`` is the schedule's synthetic-env argument name."""
    sched = "--model.init_args.schedule.init_args"
    slots = RL_TASKS * RL_GROUP
    return [
        "--trainer.val_check_interval=2", "--trainer.callbacks.init_args.every_n_train_steps=1",
        f"--model.init_args.policy.init_args.path={policy_dir}",
        f"{sched}.{env_key}.init_args.checkpoint={experience_dir}",
        f"{sched}.{env_key}.init_args.batch_size={slots}", f"{sched}.{env_key}.init_args.max_steps={RL_STEPS}",
        f"{sched}.{env_key}.init_args.kwargs={{write_back: true, max_new_tokens: 96}}",
        "--model.init_args.eval_env.init_args.batch_size=2", f"--model.init_args.eval_env.init_args.max_steps={RL_STEPS}",
        f"--model.init_args.eval_env.init_args.kwargs={_flow(inputs['env_kwargs'])}", "--data.init_args.eval_tasks=2",
        "--model.init_args.collector.init_args.max_new_tokens=8", "--model.init_args.collector.init_args.temperature=0.3",
        "--model.init_args.collector.init_args.max_prompt_tokens=512",
        f"--model.init_args.tasks_per_batch={RL_TASKS}", f"--model.init_args.group_size={RL_GROUP}",
        # a tiny untrained policy rarely wins within 3 steps, so GRPO advantages (and the k3 KL gradient at
        # the reference) are often all zero: a small entropy bonus makes the update path always move weights
        "--model.init_args.loss.init_args.entropy_coef=0.01",
        f"--model.init_args.save_dir={save_dir}",
    ]  # fmt: skip


def _state(path: Path) -> dict[str, torch.Tensor]:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, local_files_only=True).state_dict()


def _ckpt_states(out: Path) -> list[dict[str, torch.Tensor]]:
    """Model weights of every step checkpoint, in step order."""
    ckpts = [c for c in (out / "runs").rglob("*.ckpt") if c.name != "last.ckpt"]
    states = [torch.load(c, weights_only=False) for c in ckpts]
    return [s["state_dict"] for s in sorted(states, key=lambda s: s["global_step"])]


def _tb_tags(out: Path) -> set[str]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags: set[str] = set()
    for e in (out / "runs").rglob("events.out.tfevents*"):
        acc = EventAccumulator(str(e))
        acc.Reload()
        tags |= set(acc.Tags()["scalars"])
    return tags


def _differs(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    shared = a.keys() & b.keys()
    assert shared, "no common parameters to compare"
    return any(not torch.equal(a[k], b[k]) for k in shared)


@pytest.mark.slow
def test_alfworld_inputs_are_real_alfworld(alfworld_inputs):
    from dreamgym.schema import read_trajectories

    trajs = list(read_trajectories(alfworld_inputs["train"]))
    assert len(trajs) == 14 and {t.env for t in trajs} == {"alfworld"}
    assert {t.task_id.split("/")[1] for t in trajs} == {"train"}
    assert any(
        t.success and t.policy == "non_oracle" for t in trajs
    )  # policy SFT keeps the searcher's successful episodes
    assert all(
        tr.reasoning for t in trajs for tr in t.transitions
    )  # teacher rationales for the experience SFT


@pytest.mark.slow
def test_experience_sft_config_fits_and_exports(experience_fit):
    cli, out = experience_fit
    assert cli.trainer.global_step == EXPERIENCE_STEPS
    hf = out / "experience_model"
    assert (hf / "config.json").is_file() and (hf / "experience_format.json").is_file()
    assert (hf / "buffer").is_dir() and any((hf / "buffer").iterdir())
    states = _ckpt_states(out)
    assert len(states) == EXPERIENCE_STEPS and _differs(states[0], states[-1]), (
        "experience model weights did not change"
    )
    assert {"train/loss", "train/loss_state", "train/loss_reasoning", "val/loss"} <= _tb_tags(out)
    assert torch.isfinite(cli.trainer.callback_metrics["val/loss"])


@pytest.mark.slow
def test_policy_sft_config_fits_and_exports(policy_fit):
    cli, out = policy_fit
    assert cli.trainer.global_step == POLICY_STEPS
    assert (out / "policy_sft" / "config.json").is_file()
    assert (out / "policy_sft" / "tokenizer.json").is_file()
    states = _ckpt_states(out)
    assert len(states) == 2 and _differs(states[0], states[-1]), "policy weights did not change"
    assert {"train/loss", "val/loss", "val/token_acc"} <= _tb_tags(out)
    _state(out / "policy_sft")  # plain transformers loads the export


def _check_rl(cli, out: Path, policy_dir: Path, iterations: int) -> dict[str, float]:
    start = _state(policy_dir)
    assert cli.model.schedule.iteration == iterations
    assert _differs(start, _state(out / "policy")), "trainable policy parameters did not change"
    assert not _differs(start, cli.model.ref_model.state_dict()), "the frozen reference policy changed"
    assert list((out / "runs").rglob("last.ckpt")), "no checkpoint written"
    metrics = {k: float(v) for k, v in cli.trainer.callback_metrics.items()}
    for k in ("train/loss", "train/loss_policy", "train/approx_kl", "train/entropy", "rollout/reward_mean",
              "data/synthetic_transitions", "data/real_transitions", "val/success_rate", "val/steps_mean"):  # fmt: skip
        assert k in metrics, k
    assert {"train/loss_policy", "data/synthetic_transitions", "val/success_rate"} <= _tb_tags(out)
    assert 0 < metrics["val/steps_mean"] <= RL_STEPS  # held-out real ALFWorld games, capped at max_steps
    synthetic = cli.model.schedule.env("synthetic")
    assert synthetic.model_calls > 0, "no admissible command reached the experience model"
    assert metrics["rollout/invalid_rate"] < 1.0
    return metrics


@pytest.mark.slow
def test_grpo_config_fits_in_the_synthetic_env(alfworld_inputs, experience_fit, policy_fit):
    exp_dir, policy_dir = experience_fit[1] / "experience_model", policy_fit[1] / "policy_sft"
    out = alfworld_inputs["root"] / "grpo"
    over = [*_rl_overrides(alfworld_inputs, exp_dir, policy_dir, out / "policy", "env"),
            "--model.init_args.schedule.init_args.iterations=2"]  # fmt: skip
    cli = _fit("alfworld_grpo.yaml", out, over)
    metrics = _check_rl(cli, out, policy_dir, iterations=2)
    assert metrics["data/real_transitions"] == 0 and cli.model.schedule.real_transitions == 0
    assert metrics["data/is_real"] == 0
    assert 0 < metrics["data/synthetic_transitions"] <= 2 * RL_TASKS * RL_GROUP * RL_STEPS


@pytest.mark.slow
def test_sim2real_grpo_config_fits_within_the_real_budget(alfworld_inputs, experience_fit, policy_fit):
    exp_dir, policy_dir = experience_fit[1] / "experience_model", policy_fit[1] / "policy_sft"
    out = alfworld_inputs["root"] / "sim2real"
    real = "--model.init_args.schedule.init_args.real_env.init_args"
    over = [
        *_rl_overrides(alfworld_inputs, exp_dir, policy_dir, out / "policy", "synthetic_env"),
        "--model.init_args.schedule.init_args.synthetic_iterations=1",
        f"--model.init_args.schedule.init_args.real_budget={REAL_BUDGET}",
        f"{real}.batch_size={RL_TASKS * RL_GROUP}", f"{real}.max_steps={RL_STEPS}", f"{real}.kwargs={_flow(alfworld_inputs['env_kwargs'])}",
    ]  # fmt: skip
    cli = _fit("alfworld_sim2real_grpo.yaml", out, over)
    metrics = _check_rl(
        cli, out, policy_dir, iterations=2
    )  # one synthetic + one real batch (budget = one batch)
    schedule = cli.model.schedule
    assert 0 < schedule.real_transitions <= REAL_BUDGET and schedule.synthetic_transitions > 0
    assert metrics["data/real_transitions"] == schedule.real_transitions
    assert metrics["data/synthetic_transitions"] == schedule.synthetic_transitions
    assert metrics["data/is_real"] == 1  # the last batch came from the real env

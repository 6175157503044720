"""Learning check: does the policy-gradient core make a policy better where the answer is known?

Runs GRPO and PPO (:class:`models.policy_rl.PolicyRL`, the same module and update every config uses)
from a freshly initialised policy (chance success) on the probe envs of :mod:`dreamgym.envs.probes`, and
records the held-out greedy success (``val`` tasks, never trained on) every ``--val_every`` iterations.
A core that learns must bring ``probe_choice`` and ``probe_credit`` to >= 0.9 from chance (1 / options);
a broken one (advantage sign flipped, action mask inverted...) cannot.

    python scripts/learning_check.py --out benchmarks/results/learning_check.json

``--bugs`` runs the same check on a deliberately broken core (``advantage_sign``: advantages negated
after the estimator; ``action_mask``: the loss on the prompt tokens instead of the response), to show
the check fails then. :func:`run_check` is what ``tests/test_learning_check.py`` runs at tiny size.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import lightning as L
import torch

from datamodules.rollouts import RolloutDataModule
from dreamgym.envs.factory import EnvFactory
from dreamgym.envs.probes import probe_corpus
from dreamgym.modeling import LanguageModel
from dreamgym.modeling.tokenizer import train_tokenizer
from dreamgym.precision import auto_precision
from dreamgym.rl.advantages import make_advantage_estimator
from dreamgym.rl.collector import RolloutCollector
from dreamgym.rl.critic import ValueHead
from dreamgym.rl.objective import ClipPPOLoss
from dreamgym.rl.schedules import RealSchedule
from models.policy_rl import PolicyRL

BREAKS = ("none", "advantage_sign", "action_mask")


class _Curve(L.Callback):
    """Greedy success after each validation, keyed by the RL iteration it followed, and the sampled
    success of each iteration's rollouts."""

    def __init__(self):
        self.points: list[tuple[int, float]] = []
        self.sampled: list[float] = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        value = trainer.callback_metrics.get("rollout/success_rate")
        if value is not None and len(self.sampled) < module.schedule.iteration:
            self.sampled.append(round(float(value), 4))

    def on_validation_epoch_end(self, trainer, module):
        value = trainer.callback_metrics.get("val/success_rate")
        if value is not None:
            self.points.append((int(module.schedule.iteration), float(value)))


class _Broken(PolicyRL):
    """The core with one deliberate bug, to show the check catches it."""

    def __init__(self, *args, bug: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.bug = bug

    def _score(self, rollout):
        if self.bug == "action_mask":  # train the prompt tokens, not the policy's response
            rollout.action_mask = rollout.attention_mask & ~rollout.action_mask
            rollout.allowed_ids = rollout.allowed_ids[..., :0]  # a prompt token had no allowed set
        super()._score(rollout)

    def _optimize(self, rollout):
        if self.bug == "advantage_sign":
            rollout.advantages = -rollout.advantages
        return super()._optimize(rollout)


def probe_tokenizer(out_dir: str | os.PathLike) -> str:
    """A BPE tokenizer for the probes' text, saved to ``out_dir``."""
    tok = train_tokenizer(probe_corpus(), vocab_size=400)
    tok.save_pretrained(out_dir)
    return str(out_dir)


def run_check(
    env: str = "probe_choice",
    estimator: str = "grpo",
    tokenizer_dir: str | None = None,
    preset: str = "tiny",
    iterations: int = 40,
    tasks: int = 16,
    group: int = 8,
    lr: float = 1e-3,
    val_every: int = 10,
    val_tasks: int = 64,
    seed: int = 0,
    bug: str = "none",
    env_kwargs: dict | None = None,
    root: str | None = None,
    policy_dir: str | None = None,
    train_tasks: list[int] | None = None,
    max_steps: int = 8,
    kl_coef: float = 0.0,
    max_new_tokens: int = 12,
    max_prompt_tokens: int = 256,
    micro_batch_size: int | None = None,
    learning_reward: str = "reward",
    precision: str = "32-true",
) -> dict:
    """Train ``iterations`` RL iterations of ``tasks`` x ``group`` episodes from a fresh ``preset`` policy
    (or the saved one in ``policy_dir``); return the held-out success curve (``val`` tasks
    ``0..val_tasks-1``, greedy) and its timing. With ``train_tasks`` (the over-fitting check) RL plays
    only those train tasks and the curve is the greedy success on them."""
    if bug not in BREAKS:
        raise ValueError(f"bug={bug!r}: choose one of {BREAKS}")
    L.seed_everything(seed, verbose=False)
    root = root or tempfile.mkdtemp(prefix="learning_check_")
    if policy_dir is None:
        tokenizer_dir = tokenizer_dir or probe_tokenizer(Path(root) / "tokenizer")
        policy = LanguageModel(preset=preset, tokenizer_path=tokenizer_dir, max_positions=512, seed=seed)
    else:
        policy, preset = LanguageModel(path=policy_dir), policy_dir
    kw = dict(env_kwargs or {})
    episodes = tasks * group
    eval_split, eval_tasks = ("val", val_tasks) if train_tasks is None else ("train", list(train_tasks))
    n_eval = eval_tasks if isinstance(eval_tasks, int) else len(eval_tasks)
    train_env = EnvFactory(env, split="train", batch_size=episodes, max_steps=max_steps, seed=seed, kwargs=kw)
    val_env = EnvFactory(
        env, split=eval_split, batch_size=min(n_eval, 64), max_steps=max_steps, seed=seed, kwargs=kw
    )
    ppo = estimator == "ppo"
    cls = PolicyRL if bug == "none" else _Broken
    extra = {} if bug == "none" else {"bug": bug}
    module = cls(
        policy=policy,
        schedule=RealSchedule(train_env, iterations=iterations),
        estimator=make_advantage_estimator("gae" if ppo else estimator),
        critic=ValueHead() if ppo else None,
        eval_env=val_env,
        test_split=eval_split,
        collector=RolloutCollector(max_new_tokens=max_new_tokens, max_prompt_tokens=max_prompt_tokens,
                                   constrained=True, gen_batch_size=episodes, learning_reward=learning_reward),
        loss=ClipPPOLoss(clip_eps=0.2, kl_coef=kl_coef),
        optimizer=lambda p: torch.optim.AdamW(p, lr=lr, weight_decay=0.0),
        critic_lr=lr,
        tasks_per_batch=tasks, group_size=group, ppo_epochs=1, minibatches=2,
        micro_batch_size=micro_batch_size or episodes, score_batch_size=micro_batch_size or episodes,
        log_samples=0, train_tasks=train_tasks,
        **extra,
    )  # fmt: skip
    curve = _Curve()
    trainer = L.Trainer(
        accelerator="cpu", devices=1, max_steps=-1, max_epochs=-1, default_root_dir=root, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=-1, val_check_interval=val_every, check_val_every_n_epoch=None,
        callbacks=[curve], precision=auto_precision("cpu") if precision == "auto" else precision,
    )  # fmt: skip
    data = RolloutDataModule(eval_tasks=eval_tasks, eval_batch_tasks=min(n_eval, 64))
    t0 = time.perf_counter()
    trainer.fit(module, data)
    seconds = time.perf_counter() - t0
    trainer.validate(module, data, verbose=False)  # the final policy (fit validates every val_every only)
    points = sorted(dict(curve.points).items())  # one point per iteration (the final one may repeat it)
    return {
        "env": env, "estimator": estimator, "bug": bug, "seed": seed, "preset": preset,
        "iterations": iterations, "tasks": tasks, "group": group, "lr": lr,
        "episodes": iterations * episodes, "fit_seconds": round(seconds, 1),
        "chance": 1.0 / kw.get("options", 4) if env.startswith("probe_") else None,
        "precision": precision, "train_tasks": train_tasks, "kl_coef": kl_coef, "learning_reward": learning_reward, "eval_split": eval_split,
        "curve": [{"iteration": i, "success": s} for i, s in points], "sampled_success": curve.sampled,
        "first": points[0][1] if points else None, "final": points[-1][1] if points else None,
    }  # fmt: skip


def report(rows: list[dict]) -> str:
    """A markdown table of result rows: per (env, estimator, bug, learning rate, tasks), the held-out greedy
    success before and after (mean +- std over seeds) and the iteration each seed first reached 0.9."""
    import statistics

    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        key = (
            r["env"],
            r["estimator"],
            r["bug"],
            r["lr"],
            r.get("learning_reward", "reward"),
            str(r.get("train_tasks")),
        )
        groups.setdefault(key, []).append(r)

    def ms(xs):
        return f"{statistics.mean(xs):.3f} +- {statistics.pstdev(xs):.3f}" if len(xs) > 1 else f"{xs[0]:.3f}"

    lines = [
        "| env | estimator | core | lr | reward | seeds | chance | start | final | first iteration >= 0.9 | fit s (mean) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (env, est, bug, lr, rew, _), rs in groups.items():
        hit = [next((p["iteration"] for p in r["curve"] if p["success"] >= 0.9), None) for r in rs]
        chance = rs[0]["chance"]
        lines.append(
            f"| {env} | {est} | {'ok' if bug == 'none' else 'broken: ' + bug} | {lr:g} | {rew} | {len(rs)} | "
            f"{'-' if chance is None else f'{chance:.2f}'} | {ms([r['first'] for r in rs])} | "
            f"{ms([r['final'] for r in rs])} | {', '.join('never' if h is None else str(h) for h in hit)} | "
            f"{statistics.mean(r['fit_seconds'] for r in rs):.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", nargs="+", default=["probe_choice", "probe_credit"])
    p.add_argument("--estimators", nargs="+", default=["grpo", "ppo"], choices=["grpo", "gigpo", "ppo"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--bugs", nargs="+", default=["none"], choices=BREAKS)
    p.add_argument("--preset", default="tiny")
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--tasks", type=int, default=16)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--val_every", type=int, default=10)
    p.add_argument("--val_tasks", type=int, default=128)
    p.add_argument("--policy", default=None, help="a saved policy dir instead of a fresh preset")
    p.add_argument("--train_tasks", nargs="+", type=int, default=None, help="over-fitting check: only these")
    p.add_argument("--max_steps", type=int, default=8)
    p.add_argument("--kl_coef", type=float, default=0.0)
    p.add_argument("--max_new_tokens", type=int, default=12)
    p.add_argument("--max_prompt_tokens", type=int, default=256)
    p.add_argument("--micro_batch_size", type=int, default=None)
    p.add_argument("--learning_reward", default="reward", choices=["reward", "score"])
    p.add_argument("--precision", default="32-true", help="Lightning precision; auto: bf16-mixed where fast")
    p.add_argument("--out", default="benchmarks/results/learning_check.json")
    p.add_argument("--report", action="store_true", help="print the table of --out's rows and exit")
    args = p.parse_args(argv)
    if args.report:
        print(report(json.loads(Path(args.out).read_text())["runs"]))
        return 0
    argv = sys.argv[1:] if argv is None else argv
    from dreamgym.lab.provenance import result_meta, write_result

    out = Path(args.out)
    rows = json.loads(out.read_text())["runs"] if out.exists() else []
    root = tempfile.mkdtemp(prefix="learning_check_")
    tok = None if args.policy else probe_tokenizer(Path(root) / "tokenizer")
    fixed = dict(
        policy_dir=args.policy, train_tasks=args.train_tasks, max_steps=args.max_steps, kl_coef=args.kl_coef,
        max_new_tokens=args.max_new_tokens, max_prompt_tokens=args.max_prompt_tokens,
        micro_batch_size=args.micro_batch_size, learning_reward=args.learning_reward,
        precision=args.precision, root=root,
    )  # fmt: skip
    for env in args.envs:
        for est in args.estimators:
            for bug in args.bugs:
                for seed in args.seeds:
                    row = run_check(env, est, tok, args.preset, args.iterations, args.tasks, args.group,
                                    args.lr, args.val_every, args.val_tasks, seed, bug, **fixed)  # fmt: skip
                    print(f"{env} {est} bug={bug} seed={seed}: {row['first']:.3f} -> {row['final']:.3f} "
                          f"({row['fit_seconds']} s)", flush=True)  # fmt: skip
                    key = lambda r: (r["env"], r["estimator"], r["bug"], r["seed"], r["preset"], r["lr"])  # noqa: E731
                    rows = [r for r in rows if key(r) != key(row)]
                    rows.append(row)
                    write_result(
                        out,
                        {"_meta": result_meta("scripts/learning_check.py", argv, ignore=[out]), "runs": rows},
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

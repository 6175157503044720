"""ONE LightningModule for PPO and GRPO over any TorchRL text env (real or synthetic).

Each training step is one RL iteration:

1. the schedule picks the env (real / synthetic) or ends fit (budget used, iterations done);
2. the collector runs ``group_size`` sampled episodes of each of ``tasks_per_batch`` tasks (multi-turn,
   batched) into a :class:`~dreamgym.rl.rollout.RolloutBatch` (one sample per turn);
3. old/reference log-probs and (PPO) critic values are computed; the injected advantage estimator
   fills advantages ("grpo": group-normalised outcome reward; "gae": turn-level GAE on the critic);
4. ``ppo_epochs`` x ``minibatches`` optimizer steps in gradient-accumulated micro-batches
   (:func:`~dreamgym.rl.update.minibatch_updates`) on the injected objective
   (:class:`~dreamgym.rl.objective.ClipPPOLoss`), with manual optimisation and gradient clipping.

PPO and GRPO differ only in the estimator and the critic. The reference policy and any env (the
synthetic env holds the frozen experience model) are kept out of the module tree (``object.__setattr__``
/ plain containers), so they are neither trained, nor in the optimizer, nor wrapped by DDP/DeepSpeed.
The reference is a frozen copy of the initial policy, or, with LoRA (``LanguageModel.lora``), the policy
itself with its adapters disabled (the base weights, which LoRA never changes): no second model in memory.
A synthetic env's experience model is put on the module's device before each of its iterations
(:meth:`~dreamgym.envs.synthetic.SyntheticEnv.place_model`; the env's ``model_device`` overrides it).
The module asks every env the same things (:class:`~dreamgym.envs.base.TextEnvBase`'s optional
interface: ``place_model``, ``health``, ``written_buffer``), never its class.
DeepSpeed ZeRO-3 is refused (:meth:`setup`): see :func:`dreamgym.strategies.check_rl_strategy`.
Validation/test run the policy greedily on a fixed set of held-out real tasks (``val/...``, ``test/...``).
With an ``audit`` (:class:`~dreamgym.rl.audit.RewardAudit`), synthetic iterations replay a sample of
their episodes in the real env after the update and log ``sim/audit_*`` (the experience model's reward
error on the policy's own episodes) and ``data/audit_transitions``; those real steps are neither
trained on nor counted in the schedule's budget.
"""

from __future__ import annotations

import copy
import os
import time
from typing import Any

import lightning as L
import torch
from lightning.pytorch.cli import OptimizerCallable

from dreamgym.checkpoint_io import RL_STATE_KEY, check_export_dir, export_atomically
from dreamgym.curriculum import RewardVarianceCurriculum
from dreamgym.envs.factory import EnvFactory
from dreamgym.modeling.factory import LanguageModel, export_model
from dreamgym.modeling.forward import forward_from_first_target
from dreamgym.modeling.tokenizer import pad_id
from dreamgym.rl.advantages import AdvantageEstimator, GRPOAdvantage
from dreamgym.rl.audit import RewardAudit
from dreamgym.rl.collector import Collection, RolloutCollector
from dreamgym.rl.critic import Critic
from dreamgym.rl.objective import ClipPPOLoss
from dreamgym.rl.rollout import RolloutBatch, build_rollout_batch
from dreamgym.rl.schedules import Schedule
from dreamgym.rl.scoring import policy_forward, score_rollout
from dreamgym.rl.update import minibatch_updates
from dreamgym.seeding import rng_state, run_seed, set_rng_state
from dreamgym.strategies import check_rl_strategy
from models.attached import attached_trainer

__all__ = ["PolicyRL"]


class PolicyRL(L.LightningModule):
    """PPO / GRPO for an LLM policy in text envs.

    Args:
        policy: the policy LM (usually the warm-started ``save_pretrained`` dir via ``path``).
        schedule: where rollouts come from and when to stop (real / synthetic / sim2real).
        estimator: advantage estimator ("grpo": :class:`GRPOAdvantage`, "gigpo": :class:`GiGPOAdvantage`,
            "gae": :class:`GAEAdvantage`).
        critic: PPO critic (value head on the policy or a separate LM); ``None`` for GRPO.
        eval_env: the real env on a held-out split, played by validation (the configs use ``val``, so
            nothing watched during training is read off test tasks).
        test_split: the split Lightning's ``test`` stage plays with ``eval_env``'s other settings
            (``None``: ``eval_env``'s own split).
        collector: rollout collector (prompt format, generation length, temperature).
        curriculum: reward-variance task selection for synthetic-env batches (``None``: uniform tasks).
        audit: live reward audit of synthetic iterations in the real env (``None``: off).
        loss: the PPO/GRPO objective and its coefficients (``None``: :class:`ClipPPOLoss` defaults; with
            ``kl_coef=0`` no reference model is kept; with LoRA the reference is the base model, the
            adapters disabled).
        optimizer: optimizer factory, called once with param groups; its ``lr`` is the policy's.
        critic_lr: critic learning rate (its own param group).
        tasks_per_batch: tasks per RL iteration (per device).
        group_size: episodes per task (GRPO group size G).
        ppo_epochs: passes over each rollout batch.
        minibatches: optimizer steps per pass (turns split into this many equal parts; fixed so that
            every DDP rank steps the same number of times).
        max_grad_norm: gradient-norm clip (0: off).
        score_batch_size: turns per no-grad forward when scoring a rollout batch.
        micro_batch_size: turns per forward/backward inside a minibatch (gradient accumulation; the
            update is the same for any value, memory is not: logits are turns x length x vocab).
        log_samples: episodes written to TensorBoard as text per iteration and validation.
        train_tasks: the task indices (of the schedule's env split) RL draws its uniform batches from,
            each iteration a fresh random order of them, without repeats while ``tasks_per_batch`` allows
            (``None``: all tasks of the split, drawn with replacement). A handful of train tasks makes the
            over-fitting check of ``scripts/learning_check.py``. The curriculum, when set, picks its own.
        task_seed: seed of those draws, which are a function of (``task_seed``, iteration) so a resumed run
            draws what the uninterrupted one did (``None``: the run's seed, ``seed_everything``; runs with
            other seeds play other tasks).
        save_dir: export the trained policy here (:func:`~dreamgym.modeling.factory.export_model`: model +
            tokenizer, LoRA adapters merged) at the end of fit.
        overwrite: replace an existing export (by default a folder holding files is refused before
            training, so an earlier model is never lost by a repeated command).
    """

    checkpoint_state_key = RL_STATE_KEY
    """Its checkpoints keep the schedule, replay buffers and RNG there (another fit's cannot resume it)."""

    def __init__(
        self,
        policy: LanguageModel,
        schedule: Schedule,
        estimator: AdvantageEstimator | None = None,
        critic: Critic | None = None,
        eval_env: EnvFactory | None = None,
        test_split: str | None = "test",
        collector: RolloutCollector | None = None,
        curriculum: RewardVarianceCurriculum | None = None,
        audit: RewardAudit | None = None,
        loss: ClipPPOLoss | None = None,
        optimizer: OptimizerCallable = torch.optim.AdamW,
        critic_lr: float = 1e-4,
        tasks_per_batch: int = 4,
        group_size: int = 8,
        ppo_epochs: int = 1,
        minibatches: int = 2,
        max_grad_norm: float = 1.0,
        score_batch_size: int = 16,
        micro_batch_size: int = 16,
        log_samples: int = 2,
        save_dir: str | None = None,
        overwrite: bool = False,
        train_tasks: list[int] | None = None,
        task_seed: int | None = None,
    ):
        super().__init__()
        self.automatic_optimization = False
        self.estimator = estimator or GRPOAdvantage()
        if self.estimator.needs_critic and critic is None:
            raise ValueError(
                f"estimator {self.estimator.name!r} needs a critic; set `model.init_args.critic` "
                "(dreamgym.rl.critic.ValueHead or LMCritic), or use estimator dreamgym.rl.advantages.GRPOAdvantage"
            )
        if min(minibatches, ppo_epochs, group_size, tasks_per_batch, micro_batch_size, score_batch_size) < 1:
            raise ValueError(
                f"minibatches ({minibatches}), ppo_epochs ({ppo_epochs}), group_size ({group_size}), "
                f"tasks_per_batch ({tasks_per_batch}), micro_batch_size ({micro_batch_size}) and "
                f"score_batch_size ({score_batch_size}) must all be >= 1"
            )
        if policy.path is not None and not os.path.isdir(policy.path):
            raise FileNotFoundError(
                f"policy path {policy.path!r} does not exist: warm-start the policy first with "
                "`python -m dreamgym fit --config configs/webshop_policy_sft.yaml` (or run the whole chain: "
                "`python -m dreamgym pipeline --config configs/pipeline_webshop.yaml`)"
            )
        if train_tasks is not None and (not train_tasks or min(train_tasks) < 0):
            raise ValueError(
                f"PolicyRL.train_tasks={train_tasks!r}: give a non-empty list of task indices (>= 0) of the "
                "schedule's env split, or null for all of its tasks"
            )
        self.train_tasks = None if train_tasks is None else [int(t) for t in train_tasks]
        self._resume_rng: dict[str, Any] | None = None  # set by on_load_checkpoint
        self.task_seed = run_seed(task_seed)
        schedule.check()
        self.model, self.tokenizer = policy.build()
        self.critic = critic
        if critic is not None:
            critic.bind(self.model)
        self.lora = policy.lora is not None
        self.loss = loss or ClipPPOLoss()
        frozen_copy = self.loss.needs_reference and not self.lora
        ref = copy.deepcopy(self.model).eval().requires_grad_(False) if frozen_copy else None
        object.__setattr__(self, "ref_model", ref)  # frozen, outside the module tree and the optimizer
        self.schedule, self.eval_env, self.curriculum, self.audit = schedule, eval_env, curriculum, audit
        self.test_split = test_split
        self.collector = (collector or RolloutCollector()).use_format_of(policy.path)
        self.optimizer_factory = optimizer
        self.critic_lr = critic_lr
        self.tasks_per_batch, self.group_size = tasks_per_batch, group_size
        self.ppo_epochs, self.minibatches = ppo_epochs, minibatches
        self.max_grad_norm, self.score_batch_size = max_grad_norm, score_batch_size
        self.micro_batch_size = micro_batch_size
        self.log_samples, self.save_dir = log_samples, save_dir
        self.overwrite = overwrite
        self._eval_envs: dict[str, Any] = {}  # plain dict: envs stay out of the module tree

    # ------------------------------------------------------------------ setup
    def planned_steps(self) -> int | None:
        """RL iterations the schedule plans (one training step each), for progress lines."""
        return self.schedule.planned_iterations()

    def progress_step(self) -> int:
        """RL iterations done (the unit of :meth:`planned_steps`; ``global_step`` counts optimiser
        steps, ``ppo_epochs * minibatches`` per iteration)."""
        return self.schedule.iteration

    def setup(self, stage: str) -> None:
        """Refuse strategies RL cannot run under (DeepSpeed ZeRO-3, see ``check_rl_strategy``)."""
        check_rl_strategy(self.trainer.strategy)

    def configure_optimizers(self):
        groups = [{"params": [p for p in self.model.parameters() if p.requires_grad]}]
        if self.critic is not None:
            own = [p for n, p in self.critic.named_parameters() if p.requires_grad]
            groups.append({"params": own, "lr": self.critic_lr})
        return self.optimizer_factory(groups)

    def ref_logits(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, action_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Logits of the reference policy: the frozen copy (moved to the module's device on first use), or
        with LoRA the policy with its adapters disabled. With ``action_mask`` only from the first action's
        position (:func:`~dreamgym.modeling.forward.forward_from_first_target`; slice with the same
        ``start``), else at every position."""
        loss_mask = action_mask if action_mask is not None else torch.ones_like(input_ids)
        if self.lora:
            with self.model.disable_adapter():
                return forward_from_first_target(self.model, input_ids, attention_mask, loss_mask)[0].logits
        if next(self.ref_model.parameters()).device != self.device:
            self.ref_model.to(self.device)
        return forward_from_first_target(self.ref_model, input_ids, attention_mask, loss_mask)[0].logits

    def eval_env_instance(self, split: str | None = None):
        """The held-out real env on ``split`` (``None``: ``eval_env``'s own), built once per split."""
        if self.eval_env is None:
            raise ValueError(
                "PolicyRL.eval_env is not set; validation/test need the real env on a held-out split "
                "(model.init_args.eval_env: dreamgym.envs.factory.EnvFactory with split: val)"
            )
        split = split or self.eval_env.split
        if split not in self._eval_envs:
            self._eval_envs[split] = self.eval_env.with_split(split).build()
        return self._eval_envs[split]

    # --------------------------------------------------------------- training
    def training_step(self, batch: Any, batch_idx: int):
        t0 = time.perf_counter()
        if self._resume_rng is not None:  # a resumed fit continues the random stream it saved
            set_rng_state(self._resume_rng)
            self._resume_rng = None
        trainer = attached_trainer(self)
        world = max(1, trainer.world_size if trainer is not None else 1)
        phase = self.schedule.next_phase(self.tasks_per_batch * self.group_size * world)
        if phase is None:
            self.trainer.should_stop = True
            return None
        phase.env.place_model(self.device)  # a synthetic env's experience model; a real env: no-op
        tasks = self._pick_tasks(phase)
        coll = self.collector.collect(
            phase.env, self.model, self.tokenizer, tasks, self.group_size,
            max_transitions=None if phase.max_transitions is None else phase.max_transitions // world,
            stop=self._time_is_up(),
        )  # fmt: skip
        if self._any_rank(coll.stopped):  # the fit's max_time ran out inside this iteration
            self._stop_on_time(phase, coll)
            return None
        self.schedule.record(phase, self._all_ranks_sum(coll.transitions))
        extra = self._after_collect(phase, tasks, coll)
        if not coll.turns:  # nothing to learn from: every episode was cut by a simulation failure
            self.log_dict(
                {
                    "rollout/sim_error_episodes": float(len(coll.episodes)),
                    "data/real_transitions": float(self.schedule.real_transitions),
                    "data/synthetic_transitions": float(self.schedule.synthetic_transitions),
                },
                on_step=True, on_epoch=False, batch_size=max(1, len(coll.episodes)),
            )  # fmt: skip
            return None
        rollout = build_rollout_batch(coll.turns, self._pad_id()).to(self.device)
        self._score(rollout)
        est_stats = self.estimator(rollout) or {}
        stats = self._optimize(rollout)
        n_tok = int(rollout.attention_mask.sum())
        metrics = {f"rollout/{k}": v for k, v in coll.metrics().items()}
        metrics["rollout/sim_error_episodes"] = float(len(coll.episodes) - len(coll.learned_episodes))
        metrics.update(stats)
        metrics.update({f"adv/{k}": float(v) for k, v in est_stats.items()})
        metrics.update(extra)
        # a synthetic env's health, cumulative (a real env has none)
        metrics.update({f"sim/{k}": float(v) for k, v in phase.env.health().items()})
        metrics.update(
            {
                "data/real_transitions": float(self.schedule.real_transitions),
                "data/synthetic_transitions": float(self.schedule.synthetic_transitions),
                "data/is_real": float(phase.is_real),
                "perf/generated_tokens_per_s": coll.generated_tokens / max(coll.seconds, 1e-9),
                "perf/train_tokens_per_s": n_tok
                * self.ppo_epochs
                / max(time.perf_counter() - t0 - coll.seconds, 1e-9),
                "perf/iteration_s": time.perf_counter() - t0,
            }
        )
        if self.audit is not None and not phase.is_real:  # after the update: not in train throughput
            metrics.update(self.audit(phase.env, coll.episodes))
        self.log(
            "train/loss", metrics.pop("train/loss"), prog_bar=True, on_step=True, on_epoch=False, batch_size=1
        )
        self.log_dict(
            metrics, on_step=True, on_epoch=False, prog_bar=False, batch_size=max(1, len(coll.episodes))
        )
        self._log_text(f"samples/{phase.name}", coll)
        return None

    def _pick_tasks(self, phase) -> list[int]:
        env = phase.env
        trainer = attached_trainer(self)
        rank, world = (self.global_rank, trainer.world_size) if trainer is not None else (0, 1)
        if self.curriculum is not None and not phase.is_real:
            tasks = self.curriculum.next_tasks(env, self.tasks_per_batch * world)
        else:
            gen = torch.Generator().manual_seed(
                (int(self.schedule.iteration) * 7919 + 17 + self.task_seed * 1_000_003) % 2**63
            )  # task_seed 0: the draws of the records made before task_seed existed; the modulo keeps an
            # unseeded process's 64-bit initial seed in range (and every smaller seed's draws as they were)
            n, pool = self.tasks_per_batch * world, self.train_tasks
            if pool is None:
                tasks = torch.randint(env.num_tasks(), (n,), generator=gen).tolist()
            elif max(pool) >= env.num_tasks():
                raise IndexError(
                    f"PolicyRL.train_tasks has index {max(pool)}, but split {env.split!r} has {env.num_tasks()} tasks"
                )
            else:
                order = torch.cat(
                    [torch.randperm(len(pool), generator=gen) for _ in range(-(-n // len(pool)))]
                )
                tasks = [pool[i] for i in order[:n].tolist()]
        return tasks[rank * self.tasks_per_batch : (rank + 1) * self.tasks_per_batch]

    def _after_collect(self, phase, tasks: list[int], coll: Collection) -> dict[str, float]:
        """Curriculum update from this batch's group rewards (synthetic batches only)."""
        if phase.is_real or self.curriculum is None:
            return {}
        groups: list[list[float]] = [[] for _ in tasks]
        for e in coll.learned_episodes:
            groups[e.group_id].append(e.reward)
        return self.curriculum.update(phase.env, tasks, groups)

    def _time_is_up(self):
        """A ``stop`` for the collector: whether the fit's ``max_time`` (Lightning's :class:`Timer`) has
        run out (None without one). Lightning asks the timer only between training steps, and one RL
        iteration can outlast a whole budget (a slow host, an experience model that never ends its
        episodes), so the rollout asks it before every env step."""
        from lightning.pytorch.callbacks import Timer

        trainer = attached_trainer(self)
        timer = (
            None if trainer is None else next((c for c in trainer.callbacks if isinstance(c, Timer)), None)
        )
        if timer is None or timer.time_remaining() is None:
            return None
        return lambda: timer.time_remaining() <= 0

    def _any_rank(self, flag: bool) -> bool:
        trainer = attached_trainer(self)
        return flag if trainer is None else bool(trainer.strategy.reduce_boolean_decision(flag, all=False))

    def _stop_on_time(self, phase, coll: Collection) -> None:
        """End the fit without learning from an iteration the time budget cut: its groups are incomplete
        (the episodes still running were cut, the rest never started), so the exported policy is the one
        after the last whole iteration, and the schedule does not count the iteration (nor, in a real
        phase, the env steps it took: ``data/real_transitions`` leaves out at most one cut iteration)."""
        print(
            f"[PolicyRL] max_time ran out in iteration {self.schedule.iteration + 1} ({phase.name}) after "
            f"{coll.transitions} env steps ({coll.seconds:.0f} s); not learned from; stopping with the policy "
            f"of iteration {self.schedule.iteration}",
            flush=True,
        )
        self.log("rollout/stopped_by_time", 1.0, on_step=True, on_epoch=False, batch_size=1)
        self.trainer.should_stop = True

    def _all_ranks_sum(self, value: int) -> int:
        trainer = attached_trainer(self)
        if trainer is None or trainer.world_size == 1:
            return int(value)
        t = torch.tensor(float(value), device=self.device)
        return int(trainer.strategy.reduce(t, reduce_op="sum").item())

    def _pad_id(self) -> int:
        return pad_id(self.tokenizer)

    def _score(self, rollout: RolloutBatch) -> None:
        """Old/reference log-probs and (with a critic) old values (:func:`~dreamgym.rl.scoring.score_rollout`)."""
        ref = self.ref_logits if self.loss.needs_reference else None
        score_rollout(rollout, self.model, ref, self.critic, self.score_batch_size)

    def policy_loss(
        self, mb: RolloutBatch, token_weight: float = 1.0, turn_weight: float = 1.0
    ) -> dict[str, torch.Tensor]:
        """The objective (:attr:`loss`) of a (micro-)batch and its parts: the forward passes here, the
        formula in :class:`~dreamgym.rl.objective.ClipPPOLoss`."""
        # logits only from the first action position on: every token-level term lives there
        fwd = policy_forward(self.model, mb, self.critic)
        start = fwd.start
        return self.loss(
            fwd.log_probs, mb.old_log_probs[:, start:], mb.advantages, mb.action_mask[:, start:], fwd.logits,
            mb.allowed_ids[:, start:],
            ref_logp=mb.ref_log_probs[:, start:] if self.loss.needs_reference else None,
            values=fwd.values, old_values=mb.old_values, returns=mb.returns,
            token_weight=token_weight, turn_weight=turn_weight,
        )  # fmt: skip

    def _optimize(self, rollout: RolloutBatch) -> dict[str, float]:
        """``ppo_epochs`` x ``minibatches`` optimizer steps (:func:`~dreamgym.rl.update.minibatch_updates`)
        through Lightning's strategy-aware backward and gradient clipping."""
        opt = self.optimizers()

        def step() -> None:
            if self.max_grad_norm > 0:
                self.clip_gradients(opt, gradient_clip_val=self.max_grad_norm, gradient_clip_algorithm="norm")
            opt.step()

        parts = minibatch_updates(
            rollout, self.policy_loss, opt.zero_grad, self.manual_backward, step,
            self.ppo_epochs, self.minibatches, self.micro_batch_size,
        )  # fmt: skip
        out = {f"train/{k}": v for k, v in parts.items()}
        out["train/advantage_abs_mean"] = float(rollout.advantages.abs().mean())
        return out

    # ------------------------------------------------------------- evaluation
    def _evaluate(self, tasks: list[int], prefix: str, split: str | None = None) -> None:
        coll = self.collector.collect(
            self.eval_env_instance(split), self.model, self.tokenizer, list(tasks), 1, greedy=True
        )
        for k, v in coll.held_out_metrics().items():
            self.log(
                f"{prefix}/{k}",
                v,
                on_step=False,
                on_epoch=True,
                batch_size=len(coll.episodes),
                sync_dist=True,
            )
        if not getattr(self, "_logged_eval_text", False):
            self._log_text(f"samples/{prefix}", coll)
            self._logged_eval_text = True

    def on_validation_epoch_start(self) -> None:
        self._logged_eval_text = False

    on_test_epoch_start = on_validation_epoch_start

    def validation_step(self, batch: list[int], batch_idx: int) -> None:
        self._evaluate(batch, "val")

    def test_step(self, batch: list[int], batch_idx: int) -> None:
        self._evaluate(batch, "test", self.test_split)

    # ------------------------------------------------------------ checkpoints
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state: dict[str, Any] = {"schedule": self.schedule.state_dict()}
        if self.curriculum is not None:
            state["curriculum"] = self.curriculum.state_dict()
        if self.audit is not None:
            state["audit"] = self.audit.state_dict()
        state["replay_buffers"] = {
            name: buf.state_dict()
            for name, env in self.schedule.built_envs().items()
            if (buf := env.written_buffer) is not None
        }
        state["rng"] = (
            rng_state()
        )  # sampling continues where it was: a resumed run equals an uninterrupted one
        checkpoint[RL_STATE_KEY] = state

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint.get(RL_STATE_KEY)
        if state is None:
            return
        self.schedule.load_state_dict(state["schedule"])
        if self.curriculum is not None and "curriculum" in state:
            self.curriculum.load_state_dict(state["curriculum"])
        if self.audit is not None and "audit" in state:
            self.audit.load_state_dict(state["audit"])
        for name, buf_state in state.get("replay_buffers", {}).items():
            buf = self.schedule.env(name).written_buffer
            if buf is not None:
                buf.load_state_dict(buf_state)
        # restored at the first training step, not here: Lightning draws from the torch generator between
        # this hook and that step (each DataLoader iterator takes a base seed from it)
        self._resume_rng = state.get("rng")

    def on_fit_start(self) -> None:
        check_export_dir(self.save_dir, "model.init_args.save_dir", replace=self.overwrite)

    def on_fit_end(self) -> None:
        if self.save_dir and self.trainer.is_global_zero:
            export_atomically(self.save_dir, self.export)

    def export(self, folder: str | os.PathLike) -> None:
        """Write the policy to ``folder`` as a warm start is written (:func:`~dreamgym.modeling.factory.export_model`):
        model, tokenizer and the prompt format it was trained with."""
        export_model(self.model, self.tokenizer, folder, self.collector.format)

    # ----------------------------------------------------------------- logging
    def _log_text(self, tag: str, coll: Collection) -> None:
        exp = getattr(self.logger, "experiment", None) if attached_trainer(self) is not None else None
        if exp is None or not hasattr(exp, "add_text") or self.log_samples <= 0:
            return
        lines = []
        for e in coll.episodes[: self.log_samples]:
            lines.append(
                f"**task {e.task_index}** {e.instruction}  \nreward {e.reward:g}, success {e.success}"
            )
            for i, a in enumerate(e.actions):
                lines.append(f"- state: `{e.states[i][:300]}`  \n  action: `{a}` (reward {e.rewards[i]:g})")
        exp.add_text(tag, "\n".join(lines), self.global_step)

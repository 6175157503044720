"""Where the time of the DreamGym loop goes: one RL iteration and the two SFT stages, phase by phase.

RL (``--rl CONFIG``): runs ``fit`` for ``--iterations`` GRPO/PPO iterations of a config with every phase
timed by wrapping the method that does it (exclusive time: a phase's time excludes the phases it
calls). Phases:

=========================  ===========================================================================
policy generation          ``RolloutCollector._generate`` (the decoding loop with the action grammar)
experience generation      ``ExperienceModel.generate`` around the forward passes (decoding loop,
                           structured grammar, stop strings, detokenization)
model forward              ``forward`` of both models' classes inside the two generation phases
synthetic env step         ``SyntheticEnv._act_slots`` outside the experience model (queries, validity,
                           parsing the outcome, history)
retrieval                  ``ReplayBuffer.search``
experience prompts         ``ExperienceModel.prompts`` (prompt text, retrieval excluded)
env + collector            the rest of ``RolloutCollector.collect`` (TensorDicts, env bookkeeping,
                           policy prompts and tokenization)
scoring                    ``PolicyRL._score`` (old and reference log-probs, values)
update                     ``PolicyRL._optimize``
audit                      ``RewardAudit.__call__`` (real-env replay; not training)
other                      the rest of ``PolicyRL.training_step``
=========================  ===========================================================================

The synthetic env's overhead is everything inside its steps except the experience model's forward
passes (``sim_overhead_share``: decoding loop, grammar, retrieval, prompts, parsing).

SFT (``--sft CONFIG``): ``--sft-steps`` optimiser steps of a config's model on its data, outside the
trainer: encode (tokenize + pad), forward, backward, optimiser; non-padding tokens/s and padding share.

Run, e.g.::

    python scripts/bench_loop.py --rl configs/webshop_grpo.yaml --iterations 2 \\
        --out benchmarks/results/loop_webshop.json
    python scripts/bench_loop.py --sft configs/webshop_experience_sft.yaml --sft-steps 20
    python scripts/bench_loop.py --rl configs/webshop_grpo.yaml --iterations 1 --buffer-sizes 100000

``--buffer-sizes``: the RL measurement again with the experience model's replay buffer filled up to each
size with jittered copies of its own transitions (time per iteration as the buffer grows).
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from dreamgym.lab.provenance import result_meta, write_result


class PhaseTimer:
    """Exclusive wall-clock time per phase of wrapped callables (nested phases are subtracted), and the
    inclusive time of each phase spent inside each enclosing phase (``within[(outer, inner)]``)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.inclusive: dict[str, float] = defaultdict(float)
        self.within: dict[tuple[str, str], float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list] = []  # [name, start, child_seconds]
        self._patched: list[tuple[object, str, object]] = []

    def wrap(self, owner, attr: str, phase: str, only_under: tuple[str, ...] = ()) -> None:
        """Time ``owner.attr`` as ``phase``; with ``only_under``, only calls made directly inside one of
        those phases (elsewhere the time stays with the caller's phase)."""
        original = owner.__dict__[attr]
        timer = self

        @functools.wraps(original)
        def timed(*args, **kwargs):
            if only_under and not (timer._stack and timer._stack[-1][0] in only_under):
                return original(*args, **kwargs)
            return timer.run(phase, original, *args, **kwargs)

        setattr(owner, attr, timed)
        self._patched.append((owner, attr, original))

    def run(self, phase: str, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` timed as ``phase``."""
        frame = [phase, time.perf_counter(), 0.0]
        self._stack.append(frame)
        try:
            return fn(*args, **kwargs)
        finally:
            self._stack.pop()
            total = time.perf_counter() - frame[1]
            self.seconds[phase] += total - frame[2]
            self.inclusive[phase] += total
            self.calls[phase] += 1
            for outer in {f[0] for f in self._stack} - {phase}:
                self.within[(outer, phase)] += total
            if self._stack:
                self._stack[-1][2] += total

    def observe(self, owner, attr: str, see) -> None:
        """Call ``see(result)`` with every result of ``owner.attr`` (undone by :meth:`restore`)."""
        original = owner.__dict__[attr]

        @functools.wraps(original)
        def observed(*args, **kwargs):
            out = original(*args, **kwargs)
            see(out)
            return out

        setattr(owner, attr, observed)
        self._patched.append((owner, attr, original))

    def restore(self) -> None:
        for owner, attr, original in reversed(self._patched):
            setattr(owner, attr, original)
        self._patched.clear()


def _table(rows: list[tuple[str, float, int]], total: float) -> str:
    lines = ["| phase | seconds | share | calls |", "|---|---|---|---|"]
    for name, sec, calls in sorted(rows, key=lambda r: -r[1]):
        lines.append(f"| {name} | {sec:.2f} | {sec / max(total, 1e-9):.1%} | {calls} |")
    lines.append(f"| **iteration total** | {total:.2f} | 100% | |")
    return "\n".join(lines)


FILL = "buffer fill"  # growing the buffer for --buffer-sizes: timed apart, not part of an iteration


def grow_buffer(buffer, size: int, jitter: float = 0.01, seed: int = 0) -> None:
    """Fill ``buffer`` up to ``size`` transitions with copies of its own (new trajectory ids, vectors
    jittered by :func:`dreamgym.retrieval.index.grow_vectors`), straight into its index (no ``add``:
    nothing is timed)."""
    import dataclasses

    import numpy as np

    from dreamgym.retrieval.index import grow_vectors

    n0 = len(buffer)
    if size <= n0:
        return
    vecs, src = grow_vectors(buffer.index.get(np.arange(n0)), size, jitter, np.random.default_rng(seed))
    buffer.index.add(np.arange(n0, size, dtype=np.int64), vecs[n0:])
    buffer.transitions.extend(
        dataclasses.replace(buffer.transitions[i], trajectory_id=f"{buffer.transitions[i].trajectory_id}#{j}")
        for j, i in enumerate(src[n0:].tolist())
    )


def bench_rl(config: str, iterations: int, overrides: list[str], buffer_size: int | None = None) -> dict:
    """Time ``iterations`` RL iterations of ``config`` by phase (see the module docstring); with
    ``buffer_size``, the experience model's replay buffer is first filled up to that many transitions."""
    from transformers import LlamaForCausalLM, Qwen2ForCausalLM

    from dreamgym.cli import main
    from dreamgym.envs.synthetic import SyntheticEnv
    from dreamgym.modeling.experience import ExperienceModel
    from dreamgym.retrieval.buffer import ReplayBuffer
    from dreamgym.rl.audit import RewardAudit
    from dreamgym.rl.collector import RolloutCollector
    from models.policy_rl import PolicyRL

    timer = PhaseTimer()
    if buffer_size:
        loaded = ExperienceModel.__dict__["from_pretrained"]

        def from_pretrained(cls, *args, **kwargs):
            em = loaded.__func__(cls, *args, **kwargs)
            if em.buffer is not None:  # timed as its own phase, left out of the iteration below
                timer.run(FILL, grow_buffer, em.buffer, buffer_size)
            return em

        ExperienceModel.from_pretrained = classmethod(from_pretrained)
        timer._patched.append((ExperienceModel, "from_pretrained", loaded))
    timer.wrap(PolicyRL, "training_step", "other")
    timer.wrap(RolloutCollector, "collect", "env + collector")
    timer.wrap(SyntheticEnv, "_act_slots", "synthetic env step")
    timer.wrap(RolloutCollector, "_generate", "policy generation")
    timer.wrap(ExperienceModel, "generate", "experience generation")
    timer.wrap(ExperienceModel, "prompts", "experience prompts")
    timer.wrap(ReplayBuffer, "search", "retrieval")
    timer.wrap(PolicyRL, "_score", "scoring")
    timer.wrap(PolicyRL, "_optimize", "update")
    timer.wrap(RewardAudit, "__call__", "audit")
    work: dict[str, int] = defaultdict(int)  # what the iterations did, to compare runs whose rollouts differ

    def tally(collection) -> None:
        work["turns"] += len(collection.turns)
        work["env_steps"] += collection.transitions
        work["policy_tokens"] += collection.generated_tokens
        work["trained_tokens"] += sum(len(t.prompt_ids) + len(t.response_ids) for t in collection.turns)

    def tally_outcomes(texts) -> None:
        work["experience_outputs"] += len(texts)
        work["experience_chars"] += sum(len(t) for t in texts)

    timer.observe(RolloutCollector, "collect", tally)
    timer.observe(ExperienceModel, "generate", tally_outcomes)
    generation = ("policy generation", "experience generation")
    for cls in (LlamaForCausalLM, Qwen2ForCausalLM):  # the preset families (forward passes in generation)
        timer.wrap(cls, "forward", "model forward", only_under=generation)
    with tempfile.TemporaryDirectory() as tmp:
        argv = [
            "fit", "--config", config, f"--model.init_args.schedule.init_args.iterations={iterations}",
            "--trainer.limit_val_batches=0",
            f"--trainer.logger.init_args.save_dir={tmp}", f"--model.init_args.save_dir={tmp}/policy",
            *overrides,
        ]  # fmt: skip
        t0 = time.perf_counter()
        try:
            main(argv)
        finally:
            timer.restore()
        wall = time.perf_counter() - t0
    fill_s = timer.seconds.pop(FILL, 0.0)
    total = sum(timer.seconds.values())
    phases = {k: {"seconds": round(v, 3), "share": round(v / max(total, 1e-9), 4), "calls": timer.calls[k]}
              for k, v in timer.seconds.items()}  # fmt: skip
    steps_s = timer.inclusive.get("synthetic env step", 0.0)
    forward_s = timer.within.get(("synthetic env step", "model forward"), 0.0)
    return {
        "config": config,
        "iterations": iterations,
        "iteration_s": round(total / max(iterations, 1), 2),
        "phases": phases,
        "synthetic_step_s": round(steps_s, 3),
        "synthetic_forward_s": round(forward_s, 3),
        "sim_overhead_share": round(1 - forward_s / steps_s, 4) if steps_s else None,
        "work_per_iteration": {k: round(v / max(iterations, 1), 1) for k, v in work.items()},
        "wall_s": round(wall, 1),
        "buffer_size": buffer_size,
        "buffer_fill_s": round(fill_s, 1),
        "table": _table([(k, v, timer.calls[k]) for k, v in timer.seconds.items()], total),
    }


def bench_sft(config: str, steps: int, overrides: list[str]) -> dict:
    """``steps`` optimiser steps of ``config``'s model on its train data, timed by part."""
    import torch

    from dreamgym.lightning_cli import _lightning_cli

    cli = _lightning_cli(["--config", config, *overrides], run=False)
    module, dm = cli.model, cli.datamodule
    dm.setup("fit")
    batches = iter(dm.train_dataloader())
    opt = torch.optim.AdamW([p for p in module.model.parameters() if p.requires_grad], lr=1e-4)
    module.model.train()
    parts = defaultdict(float)
    real = padded = 0
    encode, loss_of = _sft_hooks(module)
    autocast = cli.trainer.precision_plugin.forward_context  # the trainer's precision (e.g. bf16 autocast)
    for i in range(steps + 1):  # step 0 warms up and is not counted
        batch = next(batches)
        t = time.perf_counter()
        with autocast():
            enc = encode(batch)
            t_enc = time.perf_counter()
            loss = loss_of(enc)
        t_fwd = time.perf_counter()
        loss.backward()
        t_bwd = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t_opt = time.perf_counter()
        if i == 0:
            continue
        parts["encode"] += t_enc - t
        parts["forward"] += t_fwd - t_enc
        parts["backward"] += t_bwd - t_fwd
        parts["optimizer"] += t_opt - t_bwd
        mask = enc["attention_mask"] if "attention_mask" in enc else _mask_of(module, enc["batch"])
        real += int(mask.sum())
        padded += mask.numel()
    total = sum(parts.values())
    return {
        "config": config,
        "precision": str(cli.trainer.precision),
        "steps": steps,
        "step_s": round(total / steps, 3),
        "nonpad_tokens_per_s": round(real / total, 1),
        "padding_share": round(1 - real / max(padded, 1), 4),
        "parts": {k: round(v, 3) for k, v in parts.items()},
        "table": _table([(k, v, steps) for k, v in parts.items()], total).replace("iteration", "step"),
    }


def _mask_of(module, batch):
    """The attention mask of a batch on commits whose modules have no ``encode`` (the encoders lived in
    the model modules then)."""
    from models import experience_sft, policy_sft

    if isinstance(module, experience_sft.ExperienceSFT):
        return experience_sft.encode_examples(module.tokenizer, batch, module.max_length)["attention_mask"]
    return policy_sft.encode_bc_batch(module.codec, batch, module.max_length)["attention_mask"]


def _sft_hooks(module):
    """``(encode(batch) -> tensors, loss(tensors) -> scalar)`` of either SFT module (on commits before
    ``encode`` existed, encoding is timed as part of the forward)."""
    from models.experience_sft import ExperienceSFT

    if not hasattr(module, "encode"):
        old = (lambda b: module._losses(b)["loss"]) if isinstance(module, ExperienceSFT) else (
            lambda b: module._step(b, train=True)[0])  # fmt: skip
        return (lambda batch: {"batch": batch}), (lambda enc: old(enc["batch"]))
    if isinstance(module, ExperienceSFT):
        return module.encode, lambda enc: module.losses_from_encoded(enc, train=True)["loss"]
    return module.encode, lambda enc: module.loss_from_encoded(enc)[0]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rl", help="an RL config (configs/webshop_grpo.yaml)")
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--sft", action="append", default=[], help="an SFT config (repeatable)")
    ap.add_argument("--sft-steps", type=int, default=20)
    ap.add_argument("--override", action="append", default=[], help="extra CLI override for --rl")
    ap.add_argument("--buffer-sizes", type=int, nargs="*", default=[],
                    help="--rl again with the replay buffer filled up to each size (jittered copies)")  # fmt: skip
    ap.add_argument("--sft-override", action="append", default=[], help="extra CLI override for --sft")
    ap.add_argument("--out", help="write the results as JSON here")
    args = ap.parse_args(argv)
    result: dict = {"_meta": result_meta("scripts/bench_loop.py", argv)}
    for config in args.sft:
        result[Path(config).stem] = r = bench_sft(config, args.sft_steps, args.sft_override)
        print(f"## {config}: {r['step_s']} s/step, {r['nonpad_tokens_per_s']} non-pad tokens/s, "
              f"padding {r['padding_share']:.1%}\n{r['table']}\n", flush=True)  # fmt: skip
    for size in [None, *args.buffer_sizes] if args.rl else []:
        key = Path(args.rl).stem + (f"@buffer={size}" if size else "")
        result[key] = r = bench_rl(args.rl, args.iterations, args.override, size)
        print(f"## {key}: {r['iteration_s']} s/iteration, synthetic env overhead "
              f"{r['sim_overhead_share']}\n{r['table']}\n", flush=True)  # fmt: skip
    if args.out:
        write_result(args.out, result, indent=2)
    return result


if __name__ == "__main__":
    main()

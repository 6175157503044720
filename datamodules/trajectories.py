"""SFT examples for the experience model, from JSONL trajectory files + retrieval.

The replay buffer (and its usearch index) is built from the *train* files only. Every example is one
real transition ``(s_t, a_t) -> (s_{t+1}, r_{t+1})`` written with :mod:`dreamgym.modeling.formats`:
a prompt (instruction, last ``history_window`` actions, ``k`` retrieved neighbours, state, action) and
a target (reasoning trace, next state, reward, done, score). Train examples never retrieve from their
own trajectory (``exclude``); val/test examples come from held-out files of test-split tasks and
retrieve from the train buffer only.

Examples are plain dicts of text (tokenizing is the model's job, so the model owns its tokenizer);
the switches ``k``, ``history_window`` and ``use_reasoning`` live here, once, and the model reads them
from :attr:`TrajectoryDataModule.format` (and saves them next to the exported model).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import lightning as L
from torch.utils.data import DataLoader

from datamodules.batching import train_loader
from dreamgym.modeling.formats import (
    ExperienceFormat,
    Neighbour,
    build_prompt,
    build_variation_prompt,
    build_variation_target,
    target_parts,
    terminated_of,
)
from dreamgym.retrieval import ReplayBuffer, make_encoder
from dreamgym.retrieval.buffer import EXCLUDE_MODES
from dreamgym.schema import Trajectory, Transition, read_trajectories
from dreamgym.seeding import run_seed

__all__ = ["TrajectoryDataModule", "make_examples", "variation_examples", "load_trajectory_files"]


def load_trajectory_files(paths: list[str], role: str) -> list[Trajectory]:
    """Read trajectory files; a missing file is an error naming the command that makes it."""
    missing = [p for p in paths if not Path(p).is_file()]
    if missing:
        split = "test" if role in ("val", "test") else "train"
        raise FileNotFoundError(
            f"{role}_files: {missing} do not exist; make them with "
            f"`python -m dreamgym collect --env webshop --split {split} --out {missing[0]}`"
        )
    out = [traj for p in paths for traj in read_trajectories(p)]
    for traj in out:  # retrieval exclusion matches on the transition's own trajectory id
        for t in traj.transitions:
            t.trajectory_id = t.trajectory_id or traj.trajectory_id
    return out


def _example(
    fmt: ExperienceFormat, traj: Trajectory, t: Transition, neighbours: list[Transition]
) -> dict[str, Any]:
    nbs = [Neighbour(n.state, n.action, n.next_state, n.reward) for n in neighbours]
    history = [x.action for x in traj.transitions[: t.step]]
    prompt = build_prompt(fmt, traj.instruction, history, nbs, t.state, t.action)
    done = terminated_of(t.done, t.truncated)
    reasoning = (t.reasoning or "") if fmt.use_reasoning else None
    think, outcome = target_parts(t.next_state, t.reward, done, t.score, reasoning)
    return {
        "prompt": prompt,
        "reasoning": think,
        "outcome": outcome,
        "state": t.state,
        "next_state": t.next_state,
        "reward": float(t.reward),
        "done": done,
        "score": float(t.score),
        "trajectory_id": traj.trajectory_id,
        "step": t.step,
        "neighbour_ids": [n.trajectory_id for n in neighbours],
    }


def make_examples(
    trajectories: list[Trajectory],
    fmt: ExperienceFormat,
    buffer: ReplayBuffer | None,
    exclude: str = "trajectory",
    skip_invalid: bool = True,
) -> list[dict[str, Any]]:
    """SFT examples (dicts of text + ground truth) for every transition of ``trajectories``.

    Args:
        trajectories: the episodes.
        fmt: the prompt/target layout.
        buffer: where neighbours come from (None or ``fmt.k == 0``: no retrieval).
        exclude: what a transition may not retrieve (see :class:`ReplayBuffer`); with ``"trajectory"``
            its own episode, with ``"task"`` its own task.
        skip_invalid: leave out invalid actions (the synthetic env answers them without the model).
    """
    pairs = [(traj, t) for traj in trajectories for t in traj.transitions if not (skip_invalid and t.invalid)]
    if buffer is not None and fmt.k > 0 and len(buffer):
        ids = [t.task_id if exclude == "task" else t.trajectory_id for _, t in pairs]
        neighbours = buffer.search(
            [t.state for _, t in pairs], [t.action for _, t in pairs], fmt.k, exclude=exclude, query_ids=ids,
            prefer_tasks=[t.task_id for _, t in pairs] if fmt.same_task_first else None,
        )  # fmt: skip
    else:
        neighbours = [[] for _ in pairs]
    return [_example(fmt, traj, t, nb) for (traj, t), nb in zip(pairs, neighbours, strict=True)]


def variation_examples(trajectories: list[Trajectory], n_pairs: int, seed: int = 0) -> list[dict[str, Any]]:
    """Task-variation SFT pairs (curriculum): seed instruction -> a similar instruction of another task.

    The "variant" of an instruction is its nearest train instruction of a different task (hashing
    embedding), i.e. a sibling from the same product family with other constraints (options, price),
    which teaches the backbone to keep the action types and change the constraints.
    """
    from dreamgym.retrieval import HashingEncoder

    tasks: dict[str, str] = {}
    for traj in trajectories:
        tasks.setdefault(traj.task_id, traj.instruction)
    ids, texts = list(tasks), list(tasks.values())
    if n_pairs <= 0 or len(texts) < 2:
        return []
    vecs = HashingEncoder(dim=512).encode(texts)
    sims = vecs @ vecs.T
    for i in range(len(texts)):
        sims[i, i] = -1.0
    order = random.Random(seed).sample(range(len(texts)), min(n_pairs, len(texts)))
    out = []
    for i in order:
        j = int(sims[i].argmax())
        out.append(
            {
                "prompt": build_variation_prompt(texts[i]),
                "reasoning": "",
                "outcome": build_variation_target(texts[j]),
                "kind": "variation",
                "task_id": ids[i],
                "variant_task_id": ids[j],
            }
        )
    return out


def _collate(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return batch


class TrajectoryDataModule(L.LightningDataModule):
    """Experience-model SFT data.

    Args:
        train_files: JSONL trajectory files of train-split tasks (SFT examples + the replay buffer).
        val_files: JSONL files of held-out (test-split) tasks for validation.
        test_files: JSONL files of held-out tasks for ``test`` (default: ``val_files``).
        k: retrieved neighbours per prompt (0 = no retrieval).
        history_window: previous actions shown in the prompt.
        use_reasoning: train the model to write a reasoning trace before the outcome.
        ref_state_chars: neighbours' states are cut to this many characters.
        ref_next_chars: neighbours' next states are cut to this many characters.
        encoder: retrieval encoder, "hashing" (fast) or "minilm" (all-MiniLM-L6-v2).
        action_weight: share of the action in retrieval similarity (0..1).
        bucket_radius: the replay buffer's index layout: 0, one usearch graph; > 0, buckets of
            near-duplicates within this cosine distance (``ReplayBuffer.bucket_radius``; for buffers that
            grow towards a million transitions). Saved with the buffer, so the synthetic env searches alike.
        exclude: what a train transition may not retrieve: "trajectory" (its episode), "task", "self", "none".
        same_task_first: the same task's real steps with the same action lead the neighbours (another
            episode's of the task in training; ``ExperienceFormat.same_task_first``, saved with the model).
        skip_invalid: leave out transitions whose action was invalid (no-ops, handled without the model).
        batch_size: train batch size.
        eval_batch_size: val/test batch size.
        max_eval_examples: cap on val/test examples (a fixed random subset; None = all).
        num_workers: dataloader workers.
        seed: seed of the train batch order, the val/test subset and the variation pairs (None: the run's
            seed, ``seed_everything``).
        variation_pairs: add this many task-variation SFT pairs to the train set (0 = none; see
            :func:`variation_examples`; used by ``ExperienceModel.vary_task`` for the curriculum).
        done_repeat: each episode-ending (terminated) train example appears this many times (1 = once).
            Final steps are about one in seven examples but carry the whole outcome reward RL is trained
            on (e.g. WebShop's purchase: does it match the goal?); repeating them weights that judgement.
        group_by_length: train batches hold examples of similar length (:mod:`datamodules.batching`),
            which cuts padding; ``False``: plain shuffled batches.
    """

    def __init__(
        self,
        train_files: list[str],
        val_files: list[str] | None = None,
        test_files: list[str] | None = None,
        k: int = 3,
        history_window: int = 4,
        use_reasoning: bool = True,
        ref_state_chars: int = 160,
        ref_next_chars: int = 240,
        encoder: str = "hashing",
        action_weight: float = 0.5,
        bucket_radius: float = 0.0,
        exclude: str = "trajectory",
        same_task_first: bool = False,
        skip_invalid: bool = True,
        batch_size: int = 8,
        eval_batch_size: int = 16,
        max_eval_examples: int | None = 128,
        num_workers: int = 0,
        seed: int | None = None,
        variation_pairs: int = 0,
        done_repeat: int = 1,
        group_by_length: bool = True,
    ):
        super().__init__()
        if min(batch_size, eval_batch_size) < 1 or num_workers < 0:
            raise ValueError(
                f"TrajectoryDataModule: batch_size ({batch_size}) and eval_batch_size ({eval_batch_size}) must be "
                f">= 1 and num_workers ({num_workers}) >= 0"
            )
        if exclude not in EXCLUDE_MODES:
            raise ValueError(f"TrajectoryDataModule.exclude={exclude!r}; use one of {EXCLUDE_MODES}")
        if not train_files:
            raise ValueError("TrajectoryDataModule.train_files is empty; give at least one JSONL file")
        self.train_files, self.val_files = list(train_files), list(val_files or [])
        self.test_files = list(test_files or self.val_files)
        self.format = ExperienceFormat(
            k=k,
            history_window=history_window,
            use_reasoning=use_reasoning,
            ref_state_chars=ref_state_chars,
            ref_next_chars=ref_next_chars,
            same_task_first=same_task_first,
        )
        self.encoder_name, self.action_weight, self.exclude = encoder, action_weight, exclude
        if not 0 <= bucket_radius < 2:
            raise ValueError(
                f"TrajectoryDataModule.bucket_radius={bucket_radius!r}; use 0 (one graph) or a cosine distance in "
                "(0, 2), e.g. 0.1"
            )
        self.bucket_radius = float(bucket_radius)
        self.skip_invalid = skip_invalid
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        self.group_by_length = group_by_length
        self.max_eval_examples, self.num_workers, self.seed = max_eval_examples, num_workers, run_seed(seed)
        self.variation_pairs = variation_pairs
        if done_repeat < 1:
            raise ValueError(
                f"TrajectoryDataModule.done_repeat={done_repeat!r}; use an integer >= 1 (1 = no repeat)"
            )
        self.done_repeat = done_repeat
        self.buffer: ReplayBuffer | None = None
        self.train_trajectories: list[Trajectory] = []
        self._examples: dict[str, list[dict[str, Any]]] = {}

    def setup(self, stage: str | None = None) -> None:
        if self.buffer is None:
            self.train_trajectories = load_trajectory_files(self.train_files, "train")
            self.buffer = ReplayBuffer(
                make_encoder(self.encoder_name),
                action_weight=self.action_weight,
                bucket_radius=self.bucket_radius,
            )
            self.buffer.add(t for traj in self.train_trajectories for t in traj.transitions)
        if "train" not in self._examples and stage in (None, "fit"):
            train = make_examples(
                self.train_trajectories, self.format, self.buffer, self.exclude, self.skip_invalid
            )
            train += [ex for ex in train if ex["done"]] * (self.done_repeat - 1)
            self._examples["train"] = train + variation_examples(
                self.train_trajectories, self.variation_pairs, self.seed
            )
        for split, files in (("val", self.val_files), ("test", self.test_files)):
            if split not in self._examples and files:
                self._examples[split] = self.eval_examples(load_trajectory_files(files, split))

    def eval_examples(self, trajectories: list[Trajectory]) -> list[dict[str, Any]]:
        """Held-out examples retrieving from the train buffer, capped at ``max_eval_examples``."""
        ex = make_examples(trajectories, self.format, self.buffer, "trajectory", self.skip_invalid)
        if self.max_eval_examples is not None and len(ex) > self.max_eval_examples:
            ex = random.Random(self.seed).sample(ex, self.max_eval_examples)
        return ex

    def examples(self, split: str) -> list[dict[str, Any]]:
        """The examples of ``split`` ("train", "val" or "test") after :meth:`setup`."""
        if split not in self._examples:
            raise RuntimeError(
                f"no {split} examples: call setup() first, and give {split}_files for val/test"
            )
        return self._examples[split]

    def _loader(self, split: str, batch_size: int, shuffle: bool) -> DataLoader:
        return DataLoader(
            self.examples(split),
            batch_size=batch_size,
            shuffle=shuffle,
            num_workers=self.num_workers,
            collate_fn=_collate,
        )

    def train_dataloader(self) -> DataLoader:
        data = self.examples("train")
        lengths = [
            len(ex["prompt"]) + len(ex.get("reasoning", "")) + len(ex.get("outcome", "")) for ex in data
        ]
        return train_loader(
            data,
            self.batch_size,
            lengths,
            _collate,
            self.group_by_length,
            self.seed,
            self.num_workers,
            self.trainer,
        )

    def val_dataloader(self) -> DataLoader | list:
        return self._loader("val", self.eval_batch_size, False) if "val" in self._examples else []

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", self.eval_batch_size, False)

"""Reward-judge data: the terminal steps (WebShop: the purchases) of JSONL trajectory files.

One example per episode-ending step ``(instruction, history, state, action) -> success`` (``terminated``,
not a step-limit truncation; ``history``: the episode's earlier valid actions), and with ``verbs`` one per
step whose command starts with one of them, ended or not (ALFWorld ends only on a win, so its losing
placements, ``move``, are steps that do not end); the judge (:class:`dreamgym.modeling.judge.RewardJudge`)
builds its text pair from it. Identical steps are kept once (the oracle expert buys the same page again
and again). Train files must hold train-split episodes only; val files held-out ones.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L
from torch.utils.data import DataLoader

from datamodules.batching import train_loader
from dreamgym.modeling.formats import terminated_of
from dreamgym.schema import Trajectory, is_success, read_trajectories
from dreamgym.seeding import run_seed

__all__ = ["TerminalStepDataModule", "terminal_examples"]


def terminal_examples(
    trajectories: list[Trajectory], dedupe: bool = True, verbs: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """``{"instruction", "history", "state", "action", "label", "score", "policy", "task_id", "trajectory_id"}`` for every terminal
    step and, with ``verbs``, every valid step whose command's first word is one of them (``label``: 1.0 for
    a success, else 0.0; ``score``: 1.0 for a success, else the step's real score (0.0 where the env gives none); ``history``: the
    episode's earlier valid actions); ``dedupe`` keeps identical
    steps once (same instruction, state and action; with ``verbs`` also the same history)."""
    out, seen = [], set()
    verbs = frozenset(verbs or ())
    for traj in trajectories:
        history: list[str] = []
        for t in traj.transitions:
            if t.invalid:
                continue
            ended = terminated_of(t.done, t.truncated)
            if ended or t.action.split(" ", 1)[0] in verbs:
                # with verbs the history is part of a step's identity (it decides an ALFWorld win)
                key = (traj.instruction, t.state, t.action, tuple(history) if verbs else ())
                if not (dedupe and key in seen):
                    seen.add(key)
                    out.append(
                        {
                            "instruction": traj.instruction,
                            "history": list(history),
                            "state": t.state,
                            "action": t.action,
                            "label": float(is_success(t.reward, ended)),
                            # a failure's score is the env's (WebShop: the partial purchase score); a success's is 1
                            "score": 1.0 if is_success(t.reward, ended) else float(t.score or 0.0),
                            "policy": traj.policy,
                            "task_id": traj.task_id,
                            "trajectory_id": traj.trajectory_id,
                        }
                    )
            history.append(t.action)
    return out


def _read(paths: list[str], field: str, split: str | None) -> list[Trajectory]:
    missing = [p for p in paths if not Path(p).is_file()]
    if missing:
        raise FileNotFoundError(
            f"{field}: {missing} do not exist; collect purchases with `python -m dreamgym collect --env webshop "
            f"--split {split or 'train'} --n-non-oracle 9000 --n-near-miss 10000 --no-teacher --out {missing[0]}`"
        )
    out = []
    for p in paths:
        for traj in read_trajectories(p):
            if split is not None and traj.split != split:
                raise ValueError(
                    f"{field}: {p!r} holds a {traj.split!r}-split episode (task {traj.task_id!r}); the judge trains "
                    f"on {split!r}-split episodes only; collect them with `--split {split}`"
                )
            out.append(traj)
    return out


def _collate(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return batch


class TerminalStepDataModule(L.LightningDataModule):
    """Terminal steps for :class:`models.reward_judge.RewardJudgeFit`.

    Args:
        train_files: JSONL trajectory files of train-split tasks (scripted agents' and the warm start's
            own episodes: ``python -m dreamgym collect --split train ...``).
        val_files: JSONL files of held-out tasks for validation (test split; a fixed random subset).
        batch_size: train batch size.
        eval_batch_size: validation batch size.
        max_val_examples: cap on validation examples (None: all).
        max_train_examples: cap on train examples (a fixed random subset; None: all).
        num_workers: dataloader workers.
        seed: seed of the batch order and the subsets (None: the run's seed).
        verbs: besides the terminal steps, every step whose command starts with one of these words
            (ALFWorld: ``[move, use, take]``, the commands that win or lose a game; None: terminal steps only).
    """

    def __init__(
        self,
        train_files: list[str],
        val_files: list[str] | None = None,
        batch_size: int = 32,
        eval_batch_size: int = 64,
        max_val_examples: int | None = 512,
        max_train_examples: int | None = None,
        num_workers: int = 0,
        seed: int | None = None,
        verbs: list[str] | None = None,
    ):
        super().__init__()
        if batch_size < 1 or eval_batch_size < 1:
            raise ValueError(
                f"TerminalStepDataModule: batch_size={batch_size} and eval_batch_size={eval_batch_size} must be >= 1"
            )
        self.train_files, self.val_files = list(train_files), list(val_files or [])
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        self.max_val_examples, self.max_train_examples = max_val_examples, max_train_examples
        self.num_workers, self.seed, self.verbs = num_workers, seed, list(verbs or [])
        self.train: list[dict[str, Any]] = []
        self.val: list[dict[str, Any]] = []

    def setup(self, stage: str | None = None) -> None:
        seed = run_seed(self.seed)
        if not self.train and stage in (None, "fit"):
            self.train = _subset(terminal_examples(_read(self.train_files, "train_files", "train"), verbs=self.verbs),
                                 self.max_train_examples, seed)  # fmt: skip
            if not self.train:
                raise ValueError(f"train_files={self.train_files} hold no terminal steps to learn from")
        if not self.val and self.val_files:
            self.val = _subset(
                terminal_examples(_read(self.val_files, "val_files", None), verbs=self.verbs),
                self.max_val_examples,
                seed,
            )

    def label_counts(self) -> dict[str, int]:
        """Train examples per ``policy/label`` (a summary to print)."""
        return dict(Counter(f"{e['policy']}/{int(e['label'])}" for e in self.train))

    def train_dataloader(self) -> DataLoader:
        return train_loader(
            self.train, self.batch_size, [0] * len(self.train), _collate, False, run_seed(self.seed),
            self.num_workers, getattr(self, "trainer", None),
        )  # fmt: skip

    def val_dataloader(self) -> DataLoader | list:
        if not self.val:
            return []
        return DataLoader(
            self.val, batch_size=self.eval_batch_size, collate_fn=_collate, num_workers=self.num_workers
        )


def _subset(examples: list[dict[str, Any]], cap: int | None, seed: int) -> list[dict[str, Any]]:
    if cap is None or len(examples) <= cap:
        return examples
    return random.Random(seed).sample(examples, cap)

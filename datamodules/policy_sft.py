"""Behaviour-cloning examples from offline expert trajectories: one ``(prompt, target)`` per step.

The prompt is exactly what the RL collector shows the policy (:class:`PolicyFormat`, same history
window), the target is the expert's action (optionally after the teacher's rationale as a think block).
Examples are raw text; :class:`models.policy_sft.PolicySFT` tokenizes them with its own tokenizer.
Splits are by file (train/test trajectory files are collected on different task splits), so no task
leaks from training into validation.
"""

from __future__ import annotations

from collections import Counter

import lightning as L
from torch.utils.data import DataLoader

from datamodules.batching import train_loader
from dreamgym.modeling.policy_format import PolicyFormat
from dreamgym.schema import read_trajectories
from dreamgym.seeding import run_seed

__all__ = ["PolicySFTDataModule", "bc_examples", "repeat_by_verb"]


def bc_examples(
    paths: list[str], format: PolicyFormat, policies: tuple[str, ...] = ("expert",), success_only: bool = True
) -> list[dict[str, str]]:
    """``{"prompt", "target", "task_id"}`` for every step of the selected trajectories in ``paths``.

    A trajectory whose steps carry ``expert_action`` (DAgger labels: the policy's own episode, a scripted
    agent's decisions) is always used, whoever played it and whatever its outcome: its labelled steps
    teach the labels (the prompt's history keeps the actions taken), its unlabelled steps nothing."""
    out: list[dict[str, str]] = []
    for path in paths:
        for traj in read_trajectories(path):
            labelled = any(t.expert_action is not None for t in traj.transitions)
            if not labelled and (
                (policies and traj.policy not in policies) or (success_only and not traj.success)
            ):
                continue
            history: list[tuple[str, str]] = []
            for t in traj.transitions:
                target = t.expert_action if labelled else t.action
                if target is not None:
                    prompt = format.prompt(t.instruction, t.state, t.available_actions, history)
                    reasoning = None if labelled else t.reasoning  # the teacher explained the action taken
                    out.append(
                        {"prompt": prompt, "target": format.target(target, reasoning), "task_id": t.task_id}
                    )
                history.append((t.state, t.action))
    return out


def repeat_by_verb(examples: list[dict[str, str]], repeats: dict[str, int]) -> list[dict[str, str]]:
    """``examples`` with each one whose target action starts with a verb of ``repeats`` (its first word,
    e.g. ``take`` of "take mug 1 from desk 1") listed that many times: the decisions an episode hinges on
    but the data rarely shows (ALFWorld's ``take`` is one step among many ``go to``) weigh more."""
    out = []
    for ex in examples:
        words = PolicyFormat().parse(ex["target"]).action.split()  # the action after any think block
        out.extend([ex] * int(repeats.get(words[0], 1) if words else 1))
    return out


class PolicySFTDataModule(L.LightningDataModule):
    """Offline expert steps for the policy warm start.

    Args:
        train_files: JSONL trajectory files of train-split tasks.
        val_files: JSONL files of held-out tasks (test split) for ``val/loss``.
        format: the policy prompt format (saved with the policy; RL reads it from there).
        policies: which trajectory ``policy`` values to clone ("expert"; add "human" for human demos).
        success_only: keep only successful trajectories.
            (``policies`` and ``success_only`` do not apply to trajectories with DAgger labels:
            :func:`bc_examples`.)
        batch_size: examples per batch.
        max_val_examples: cap on validation examples (CPU time).
        num_workers: DataLoader workers.
        group_by_length: train batches hold examples of similar length (:mod:`datamodules.batching`).
        seed: seed of the length-grouped batch order (None: the run's seed, ``seed_everything``).
        repeat_verbs: train examples whose action starts with one of these verbs are repeated that many
            times (:func:`repeat_by_verb`; e.g. ``{take: 4}``); validation examples are not.
    """

    def __init__(
        self,
        train_files: list[str],
        val_files: list[str] | None = None,
        format: PolicyFormat | None = None,
        policies: list[str] | None = None,
        success_only: bool = True,
        batch_size: int = 8,
        max_val_examples: int | None = 128,
        num_workers: int = 0,
        group_by_length: bool = True,
        seed: int | None = None,
        repeat_verbs: dict[str, int] | None = None,
    ):
        super().__init__()
        bad = {
            v: n
            for v, n in (repeat_verbs or {}).items()
            if isinstance(n, bool) or not isinstance(n, int) or n < 1
        }
        if bad:
            raise ValueError(
                f"PolicySFTDataModule.repeat_verbs={bad}: give each verb an integer >= 1 (times its examples "
                "are listed), e.g. {take: 4}"
            )
        if batch_size < 1 or num_workers < 0:
            raise ValueError(
                f"PolicySFTDataModule: batch_size ({batch_size}) must be >= 1 and num_workers ({num_workers}) >= 0"
            )
        self.train_files, self.val_files = list(train_files), list(val_files or [])
        self.format = format or PolicyFormat()
        self.policies = tuple(policies or ["expert"])
        self.success_only, self.batch_size = success_only, batch_size
        self.max_val_examples, self.num_workers = max_val_examples, num_workers
        self.group_by_length, self.seed = group_by_length, run_seed(seed)
        self.repeat_verbs = dict(repeat_verbs or {})

    def setup(self, stage: str | None = None) -> None:
        self.train_examples = repeat_by_verb(
            bc_examples(self.train_files, self.format, self.policies, self.success_only), self.repeat_verbs
        )
        if not self.train_examples:
            found = Counter(
                t.policy for path in self.train_files for t in read_trajectories(path) if t.success
            )
            raise ValueError(
                f"no {list(self.policies)} trajectories{' with success' if self.success_only else ''} in "
                f"train_files={self.train_files} (successful trajectories per policy there: {dict(found)}); "
                "set data.init_args.policies to the ones to clone, or collect some with `python -m dreamgym "
                "collect --env <env> --split train --n-expert 200 --n-non-oracle 200 --out <file>`"
            )
        val = (
            bc_examples(self.val_files, self.format, self.policies, self.success_only)
            if self.val_files
            else []
        )
        self.val_examples = val[: self.max_val_examples] if self.max_val_examples else val

    def _loader(self, data, shuffle: bool) -> DataLoader:
        return DataLoader(
            data, batch_size=self.batch_size, shuffle=shuffle, num_workers=self.num_workers, collate_fn=list
        )

    def train_dataloader(self) -> DataLoader:
        data = self.train_examples
        lengths = [len(ex["prompt"]) + len(ex["target"]) for ex in data]
        return train_loader(
            data,
            self.batch_size,
            lengths,
            list,
            self.group_by_length,
            self.seed,
            self.num_workers,
            self.trainer,
        )

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_examples, False) if self.val_examples else []

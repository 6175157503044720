"""A synthetic env whose experience model is scripted (LetterEnv's own rule), for the fault tests: every
step is written back to its replay buffer, so a resumed run must bring the buffer back exactly."""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch.callbacks import Callback
from rl_toy import LETTERS, LetterEnv  # also registers "letters" (jsonargparse imports this in a subprocess)

from dreamgym.envs.factory import EnvFactory
from dreamgym.envs.synthetic import SyntheticEnv, SyntheticTask
from dreamgym.modeling.formats import ExperienceFormat, ParsedOutcome
from dreamgym.retrieval.buffer import ReplayBuffer
from dreamgym.retrieval.encoders import HashingEncoder


class EveryActionLetterEnv(LetterEnv):
    """LetterEnv whose rule accepts every action, so every synthetic step reaches the (scripted) model."""

    @classmethod
    def is_valid_action(cls, action, available_actions) -> bool:
        return True


class ScriptedExperience:
    """Stands in for :class:`~dreamgym.modeling.experience.ExperienceModel`: the letter rule, no model."""

    def __init__(self) -> None:
        self.buffer = ReplayBuffer(HashingEncoder(dim=32))
        self.fmt = ExperienceFormat(k=0)

    def to(self, device):
        return self

    def predict(self, queries):
        out = []
        for q in queries:
            won = q.instruction[-1] in q.action.lower()
            out.append(ParsedOutcome(True, f"you said {q.action[:20]}", float(won), won, float(won)))
        return out

    def vary_task(self, instructions, max_new_tokens: int = 64):
        return [None] * len(instructions)  # writes no variations: the curriculum replays its seeds


class ScriptedSyntheticFactory(EnvFactory):
    """A :class:`SyntheticEnv` over the letter tasks with :class:`ScriptedExperience` and write-back."""

    is_real = False

    def __init__(self, batch_size: int = 4, max_steps: int = 2, seed: int = 0):
        super().__init__("letters", "train", batch_size, max_steps, seed)

    def check(self) -> None:
        pass

    def build(self):
        tasks = [
            SyntheticTask(
                f"letter-{i}", f"write a word containing the letter {c}", "empty page", ["say[word]"]
            )
            for i, c in enumerate(LETTERS)
        ]
        return SyntheticEnv(
            ScriptedExperience(), tasks, "fault_toy:EveryActionLetterEnv", [self.batch_size], self.max_steps, self.seed,
            write_back=True,
        )  # fmt: skip


class FailOnce(Callback):
    """Raises once, after training step ``at_step``, unless ``flag`` exists (it creates it): the same
    arguments give one interrupted fit and then an uninterrupted one."""

    def __init__(self, at_step: int, flag: str):
        self.at_step, self.flag = at_step, Path(flag)

    def on_train_batch_end(self, trainer, *_):
        if trainer.global_step == self.at_step and not self.flag.exists():
            self.flag.touch()
            raise RuntimeError(f"injected failure after step {self.at_step}")


class SignalAt(Callback):
    """Sends this process ``signum`` after training step ``at_step`` (as a scheduler or Ctrl-C would)."""

    def __init__(self, at_step: int, signum: int = 15):
        self.at_step, self.signum = at_step, signum

    def on_train_batch_end(self, trainer, *_):
        if trainer.global_step == self.at_step:
            import os

            os.kill(os.getpid(), self.signum)

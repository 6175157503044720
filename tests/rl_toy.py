"""A toy text env and tokenizer for the RL tests (no WebShop needed).

``LetterEnv`` task i: "write a word containing the letter L_i"; any non-empty action containing the
letter succeeds (reward 1, terminated); an empty action is invalid. A random tiny policy succeeds
sometimes, so GRPO groups have reward variance.
"""

from __future__ import annotations

from dreamgym.envs.base import TextEnvBase, TextObs, TextStep
from dreamgym.envs.registry import register_env

LETTERS = "eaotisnr"


class LetterEnv(TextEnvBase):
    env_name = "letters"

    def _num_tasks(self, split):
        return len(LETTERS)

    def _start(self, slot, split, task_index):
        self._letter = getattr(self, "_letter", {})
        self._letter[slot] = LETTERS[task_index]
        text = f"write a word containing the letter {LETTERS[task_index]}"
        return TextObs(f"letter-{task_index}", text, "empty page", ["say[word]"])

    def _act(self, slot, action):
        if not action.strip():
            return TextStep("empty page", ["say[word]"], invalid=True)
        won = self._letter[slot] in action.lower()
        return TextStep(
            f"you said {action[:20]}",
            ["say[word]"],
            reward=float(won),
            score=float(won),
            terminated=won,
            success=won,
        )


register_env("letters", LetterEnv)


def toy_corpus() -> list[str]:
    words = "search click buy now say word letter write containing the empty page you said red blue shoes"
    return [words] * 20 + [f"write a word containing the letter {c}" for c in LETTERS] * 10


def make_toy_tokenizer(path) -> str:
    from dreamgym.modeling.tokenizer import train_tokenizer

    tok = train_tokenizer(toy_corpus(), vocab_size=300)
    tok.save_pretrained(path)
    return str(path)

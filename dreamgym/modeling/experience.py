"""The trained experience model as a predictor: retrieval + prompt + batched generation + parsing.

:class:`ExperienceModel` bundles a causal LM, its tokenizer, the :class:`ExperienceFormat` it was
trained with and a :class:`ReplayBuffer` to retrieve from. It is what the synthetic env, the fidelity
evaluation and the curriculum (``vary_task``) call. A saved experience model is one directory::

    <dir>/config.json, model.safetensors, tokenizer.json, ...   (plain ``save_pretrained``)
    <dir>/experience_format.json                               (k, history_window, use_reasoning, ...)
    <dir>/buffer/{transitions.jsonl,index.usearch,buffer.json} (the replay buffer, optional)
    <dir>/judge/                                               (the reward judge, optional;
                                                                :mod:`dreamgym.modeling.judge`)

Example:
    >>> em = ExperienceModel.from_pretrained("runs/experience/hf")  # doctest: +SKIP
    >>> em.predict([ExperienceQuery("i need a red shirt", [], state, "search[red shirt]")])  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from dreamgym.modeling.formats import (
    ExperienceFormat,
    Neighbour,
    ParsedOutcome,
    build_prompt,
    build_variation_prompt,
    parse_target,
    parse_variation,
)
from dreamgym.modeling.judge import JUDGE_DIR, JUDGE_FILE, RewardJudge, check_reward_mode, judged_outcome
from dreamgym.modeling.structured import generate_outcomes
from dreamgym.retrieval import ReplayBuffer

__all__ = [
    "ExperienceQuery",
    "ExperienceModel",
    "save_experience_model",
    "FORMAT_FILE",
    "BUFFER_DIR",
    "DECODINGS",
]


FORMAT_FILE = "experience_format.json"
DECODINGS = ("structured", "free")
BUFFER_DIR = "buffer"


def save_experience_model(
    path: str | os.PathLike,
    model,
    tokenizer,
    fmt: ExperienceFormat,
    buffer: ReplayBuffer | None = None,
    judge: RewardJudge | None = None,
) -> Path:
    """Write an experience-model directory (what :meth:`ExperienceModel.from_pretrained` loads): model +
    tokenizer (:func:`~dreamgym.modeling.factory.export_model`: LoRA adapters merged, so the folder is a
    whole model and not an adapter that names its base's path), ``experience_format.json`` and, when
    given, the buffer and the reward judge (``judge/``). The model is only read (training code exports
    without freezing it)."""
    from dreamgym.modeling.factory import export_model

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    export_model(model, tokenizer, path)
    (path / FORMAT_FILE).write_text(json.dumps(fmt.to_dict(), indent=2))
    if buffer is not None:
        buffer.save(path / BUFFER_DIR)
    if judge is not None:
        judge.save_pretrained(path / JUDGE_DIR)
    return path


@dataclass
class ExperienceQuery:
    """One step to predict: what does ``action`` do in ``state``?

    Attributes:
        instruction: the task instruction.
        history: previous actions of the episode, oldest first.
        state: current state s_t.
        action: action a_t.
        exclude_id: trajectory id whose transitions may not be retrieved (its own episode), if any.
        task_id: the task's id, whose real steps retrieval puts first where the model was trained so
            (``ExperienceFormat.same_task_first``), if any.
    """

    instruction: str
    history: list[str]
    state: str
    action: str
    exclude_id: str | None = None
    task_id: str | None = None


class ExperienceModel:
    """A frozen experience model with retrieval.

    Args:
        model: causal LM (put in eval mode and frozen here).
        tokenizer: its tokenizer.
        fmt: the prompt/target layout the model was trained with.
        buffer: replay buffer to retrieve neighbours from (None: no retrieval, whatever ``fmt.k``).
        max_new_tokens: generation budget per step (reasoning + next state + reward).
        batch_size: generation batch size.
        do_sample: sample instead of greedy decoding.
        temperature: sampling temperature.
        max_prompt_tokens: keep only the last this-many prompt tokens.
        decoding: ``"structured"`` (default: the layout is enforced and every output parses, the model
            chooses the text, the reward and done; see :mod:`dreamgym.modeling.structured`) or ``"free"``
            (plain decoding; outputs that do not parse become failure states).
        think_budget: most reasoning tokens under structured decoding.
        no_repeat_ngram: under structured decoding, the reasoning and the state never repeat one of their
            own token n-grams of this length (0: off; see :mod:`dreamgym.modeling.structured`). ALFWorld's
            configs use 8: no real target repeats an 8-gram, a looping small model does.
        cache_implementation: KV cache for generation: ``"slots"`` (default: the package's decoding loop,
            a cache written in place whose filled positions alone are read, ended rows dropped; see
            :mod:`dreamgym.modeling.generation`), or ``"static"`` / ``"dynamic"`` for ``model.generate``
            with that ``transformers`` cache.
        judge: the reward judge of terminal steps (:class:`~dreamgym.modeling.judge.RewardJudge`), used
            by ``predict(..., reward="judge")``; None: none (only generated rewards).
    """

    def __init__(
        self,
        model,
        tokenizer,
        fmt: ExperienceFormat,
        buffer: ReplayBuffer | None = None,
        max_new_tokens: int = 384,
        batch_size: int = 8,
        do_sample: bool = False,
        temperature: float = 1.0,
        max_prompt_tokens: int | None = None,
        decoding: str = "structured",
        think_budget: int = 160,
        cache_implementation: str | None = "slots",
        judge: RewardJudge | None = None,
        no_repeat_ngram: int = 0,
    ):
        if decoding not in DECODINGS:
            raise ValueError(f"ExperienceModel.decoding={decoding!r}; choose one of {DECODINGS}")
        self.decoding, self.think_budget = decoding, think_budget
        self.last_cut: list[bool] = []
        self.model, self.tokenizer, self.fmt, self.buffer = model, tokenizer, fmt, buffer
        self.model.eval()
        self.model.requires_grad_(False)
        if decoding == "structured":  # fail now, not at the first step, if the tokenizer cannot support it
            from dreamgym.modeling.structured import OutcomeGrammar

            OutcomeGrammar(
                tokenizer, 0, max_new_tokens, fmt.use_reasoning, think_budget=think_budget,
                no_repeat_ngram=no_repeat_ngram,
            )  # fmt: skip
        self.no_repeat_ngram = no_repeat_ngram
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size
        self.cache_implementation = cache_implementation
        self.do_sample, self.temperature, self.max_prompt_tokens = do_sample, temperature, max_prompt_tokens
        self.last_raw: list[str] = []
        self.judge = judge
        if judge is not None:
            judge.model.eval()
            judge.model.requires_grad_(False)

    def to(self, device: torch.device | str) -> ExperienceModel:
        """Move the model to ``device`` (a no-op when it is there already); returns ``self``."""
        if next(self.model.parameters()).device != torch.device(device):
            self.model.to(device)
        if self.judge is not None and self.judge.device != torch.device(device):
            self.judge.to(device)
        return self

    # ------------------------------------------------------------ persistence
    @classmethod
    def from_pretrained(
        cls,
        path: str | os.PathLike,
        buffer: ReplayBuffer | str | os.PathLike | None = None,
        judge: RewardJudge | str | os.PathLike | None = None,
        **kwargs,
    ) -> ExperienceModel:
        """Load a directory written by :meth:`save_pretrained` (or by the SFT run's export).

        ``buffer``: a buffer, a buffer directory, or None to use ``<path>/buffer`` when it exists.
        ``judge``: a reward judge, a judge directory, or None to use ``<path>/judge`` when it exists.
        """
        from dreamgym.modeling.factory import load_pretrained

        path = Path(path)
        fmt_file = path / FORMAT_FILE
        if not fmt_file.is_file():
            raise FileNotFoundError(
                f"{str(fmt_file)!r} is missing: {str(path)!r} is not an exported experience model "
                "(train one with `python -m dreamgym fit --config configs/webshop_experience_sft.yaml`)"
            )
        fmt = ExperienceFormat.from_dict(json.loads(fmt_file.read_text()))
        model, tok = load_pretrained(path)
        if buffer is None and (path / BUFFER_DIR / "buffer.json").is_file():
            buffer = path / BUFFER_DIR
        if buffer is not None and not isinstance(buffer, ReplayBuffer):
            buffer = ReplayBuffer.load(buffer)
        if judge is None and (path / JUDGE_DIR / JUDGE_FILE).is_file():
            judge = path / JUDGE_DIR
        if judge is not None and not isinstance(judge, RewardJudge):
            judge = RewardJudge.from_pretrained(judge)
        return cls(model, tok, fmt, buffer, judge=judge, **kwargs)

    def save_pretrained(self, path: str | os.PathLike, save_buffer: bool = True) -> Path:
        """Write model + tokenizer (``save_pretrained``), the format, the buffer and the judge to ``path``."""
        return save_experience_model(
            path, self.model, self.tokenizer, self.fmt, self.buffer if save_buffer else None, self.judge
        )

    # ------------------------------------------------------------ prediction
    def prompts(self, queries: list[ExperienceQuery]) -> list[str]:
        """The prompts of ``queries``, with neighbours retrieved in one batched search."""
        if self.buffer is not None and self.fmt.k > 0:
            hits = self.buffer.search(
                [q.state for q in queries],
                [q.action for q in queries],
                self.fmt.k,
                exclude="trajectory",
                query_ids=[q.exclude_id for q in queries],
                prefer_tasks=[q.task_id for q in queries] if self.fmt.same_task_first else None,
            )
        else:
            hits = [[] for _ in queries]
        return [
            build_prompt(
                self.fmt,
                q.instruction,
                q.history,
                [Neighbour(t.state, t.action, t.next_state, t.reward) for t in nb],
                q.state,
                q.action,
            )
            for q, nb in zip(queries, hits, strict=True)
        ]

    def generate(
        self, prompts: list[str], max_new_tokens: int | None = None, structured: bool = False
    ) -> list[str]:
        """Raw generated text for each prompt (batched, KV cache).

        ``structured``: decode under :class:`~dreamgym.modeling.structured.OutcomeGrammar` (the target
        layout); which rows had their reasoning or state closed by the budget lands in :attr:`last_cut`.
        """
        texts, self.last_cut = generate_outcomes(
            self.model,
            self.tokenizer,
            prompts,
            max_new_tokens=max_new_tokens or self.max_new_tokens,
            use_reasoning=self.fmt.use_reasoning,
            structured=structured,
            think_budget=self.think_budget,
            no_repeat_ngram=self.no_repeat_ngram,
            batch_size=self.batch_size,
            do_sample=self.do_sample,
            temperature=self.temperature,
            max_prompt_tokens=self.max_prompt_tokens,
            cache_implementation=self.cache_implementation,
        )
        return texts

    def predict(self, queries: list[ExperienceQuery], reward: str = "generated") -> list[ParsedOutcome]:
        """Predict next state, reward and done for each query; never raises on bad model output.

        The raw generations are kept in :attr:`last_raw` for debugging; ``ParsedOutcome.cut`` marks
        outputs whose reasoning or state structured decoding closed at the budget.

        ``reward``: ``"generated"`` (the model's own reward) or ``"judge"`` (every step the model ends
        gets the reward judge's verdict, :meth:`judge_outcomes`).
        """
        check_reward_mode(reward, "ExperienceModel.predict(reward=...)")
        if not queries:
            return []
        out = self.parse(self.generate(self.prompts(queries), structured=self.decoding == "structured"))
        return self.judge_outcomes(queries, out) if reward == "judge" else out

    def judge_outcomes(
        self, queries: list[ExperienceQuery], outcomes: list[ParsedOutcome]
    ) -> list[ParsedOutcome]:
        """``outcomes`` with the reward judge's verdict on every parsed step the model ended
        (:func:`~dreamgym.modeling.judge.judged_outcome`: reward, score and verdict text follow the judge);
        other steps unchanged. One batched judge call.

        Raises:
            ValueError: the model has no judge.
        """
        if self.judge is None:
            raise ValueError(
                "reward='judge' needs a reward judge, and this experience model has none (no `judge/` folder in its "
                "export); train one with `python -m dreamgym fit --config configs/webshop_reward_judge.yaml` "
                "(model.init_args.export_dir=<experience model>/judge), or use reward='generated'"
            )
        ended = [i for i, p in enumerate(outcomes) if p.ok and p.done]
        if not ended:
            return outcomes
        probs, scores = self.judge.predict(
            [queries[i].instruction for i in ended],
            [queries[i].state for i in ended],
            [queries[i].action for i in ended],
            histories=[queries[i].history for i in ended],
        )
        out = list(outcomes)
        for j, (i, p) in enumerate(zip(ended, probs, strict=True)):
            score = scores[j] if scores is not None else None
            out[i] = judged_outcome(outcomes[i], p, self.judge.threshold, self.judge.failure_ends, score)
        return out

    def parse(self, texts: list[str]) -> list[ParsedOutcome]:
        """Parse the texts of the last :meth:`generate` call (keeps them in :attr:`last_raw`)."""
        self.last_raw = texts
        out = [parse_target(text) for text in texts]
        for p, cut in zip(out, self.last_cut, strict=False):
            p.cut = cut
        return out

    def vary_task(self, instructions: list[str], max_new_tokens: int = 64) -> list[str | None]:
        """Variations of seed instructions written by the backbone (None where the output is unusable).

        Meaningful only for a model trained with variation pairs (``TrajectoryDataModule.variation_pairs``).
        """
        texts = self.generate([build_variation_prompt(s) for s in instructions], max_new_tokens)
        return [parse_variation(t) for t in texts]

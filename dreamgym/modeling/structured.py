"""Structured decoding of the experience model's target: always parseable, the model still decides.

Free greedy decoding of ``<think> R </think> <next> s' </next> <reward> r <done> d <score> x <end>``
fails to parse whenever a small model derails (a repeated line that never closes ``</next>``, an early
EOS, a stray marker). :class:`OutcomeGrammar` is a ``transformers`` ``LogitsProcessor`` that keeps the
*layout* fixed and leaves every *content* decision to the model:

* the markers are written by the decoder (``<think>``, ``</think>`` only when the reasoning budget is
  spent, ``<next>``, ``</next>`` only when the token budget is about to run out, and the whole tail);
* the reasoning trace and the next state are free text (EOS is masked there, so they cannot end early);
* with ``no_repeat_ngram=n``, a free phase never repeats one of its own ``n``-grams of tokens (the
  prompt's are not counted): a small model's greedy loop ("a mug 1, a mug 1, a mug 1, ...") is turned
  aside instead of running to the budget. Real targets never repeat a long n-gram (ALFWorld: no 8-gram in
  the reasoning or the state of 59,341 training targets, but in the help text), so it changes nothing a
  faithful model writes;
* ``r`` is the model's most likely token among ``reward_values``, ``d`` among ``true``/``false``,
  ``x`` a number in [0, 1] of at most ``score_tokens`` digit tokens: argmax over the allowed set, i.e. the model's
  own prediction restricted to well-formed values.

So every output parses; :attr:`OutcomeGrammar.forced_close` counts the rows whose reasoning or state had
to be closed by the budget (the structured counterpart of the free decoder's parse failures). The
state machine reads each row's decoded text, so it works with any tokenizer that round-trips text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import torch
from transformers import LogitsProcessor

__all__ = ["OutcomeGrammar", "generate_outcomes"]

_NUMBER = re.compile(r"^ ?[0-9.]+$")
_MARKERS = ("<think>", "</think>", "<next>", "</next>", "<reward>", "<done>", "<score>", "<end>")
_ALLOWED_MARKER = {"think": "</think>", "next": "</next>"}  # the one marker a free phase may write


class _Ban(list):
    """Decision: free text, except these token ids (on top of the early-end tokens)."""


_SCORE = re.compile(r"^ (0(\.[0-9]*)?|1(\.0*)?)$")  # a well-formed score in [0, 1] so far


_TABLES: dict[int, tuple[Any, dict[str, Any]]] = {}


def _vocab_tables(tokenizer) -> dict[str, Any]:
    """Vocabulary facts the grammar needs, computed once per tokenizer (a grammar is built per batch)."""
    hit = _TABLES.get(id(tokenizer))
    if hit is not None and hit[0] is tokenizer:
        return hit[1]
    pieces = {i: tokenizer.decode([i]) for i in tokenizer.get_vocab().values()}
    numbers = {i: t for i, t in pieces.items() if t and _NUMBER.match(t)}
    tables = {
        "pieces": pieces,
        "number_lead": [i for i, t in numbers.items() if t.startswith(" ") and _SCORE.match(t)],  # " 0"
        "number_cont": {i: t for i, t in numbers.items() if not t.startswith(" ")},  # ".", "5", ...
        "lt_ids": [i for i, t in pieces.items() if "<" in t],
        "blank_ids": [i for i, t in pieces.items() if not t.strip()],
        "marker_bans": {},  # (phase, partial marker) -> banned ids, filled lazily by _free_bans
    }
    _TABLES[id(tokenizer)] = (tokenizer, tables)
    return tables


class OutcomeGrammar(LogitsProcessor):
    """Constrain a batch of generations to the experience-model target layout (see module docstring).

    Args:
        tokenizer: the model's tokenizer (must round-trip text through ``encode``/``decode``).
        prompt_width: number of (left-padded) prompt columns of ``input_ids``; generated tokens follow.
        max_new_tokens: the generation budget (the state is closed in time to write the tail).
        use_reasoning: the target starts with a ``<think> ... </think>`` block.
        think_budget: most tokens of reasoning before ``</think>`` is forced.
        reward_values: the reward values the model may choose from.
        score_tokens: most tokens of the ``<score>`` number.
        no_repeat_ngram: in the reasoning and the state, never complete a token n-gram of this length that
            the same phase already wrote (0: off).
    """

    def __init__(
        self,
        tokenizer,
        prompt_width: int,
        max_new_tokens: int,
        use_reasoning: bool = True,
        think_budget: int = 160,
        reward_values: Sequence[str] = ("0", "1"),
        score_tokens: int = 4,
        no_repeat_ngram: int = 0,
    ):
        if no_repeat_ngram < 0 or no_repeat_ngram == 1:
            raise ValueError(
                f"OutcomeGrammar.no_repeat_ngram={no_repeat_ngram}: use 0 (off) or a length >= 2 (e.g. 8)"
            )
        self.no_repeat = no_repeat_ngram
        self.tok, self.width, self.budget = tokenizer, prompt_width, max_new_tokens
        self.use_reasoning, self.think_budget, self.score_tokens = use_reasoning, think_budget, score_tokens
        self.eos = tokenizer.eos_token_id
        self.reward_cands = [self._enc(f" {v}") for v in reward_values]
        self.done_cands = [self._enc(" true"), self._enc(" false")]
        tables = _vocab_tables(tokenizer)
        self.pieces, self.marker_bans = tables["pieces"], tables["marker_bans"]
        self.number_lead, self.number_cont = tables["number_lead"], tables["number_cont"]
        self.lt_ids = tables["lt_ids"]
        self.score_space = None if self.number_lead else self._lone_space_before_digits()
        self.score_len = score_tokens + (self.score_space is not None)  # the lone space is one more token
        end_ids = self._enc(" <end>")
        self.end_first, self.end_rest = end_ids[0], end_ids[1:] + [self.eos]
        self.free_banned = [
            i for i in {self.eos, tokenizer.pad_token_id, tokenizer.bos_token_id} if i is not None
        ]
        # the tail is forced as: "\n</next>" (if cut) + "\n<reward>" r " <done>" d " <score>" x " <end>" EOS
        self.reserve = (
            len(self._enc("\n</next>\n<reward>"))
            + max(map(len, self.reward_cands))
            + len(self._enc(" <done>"))
            + max(map(len, self.done_cands))
            + len(self._enc(" <score>"))
            + self.score_len
            + len(end_ids)
            + 2
        )
        self.blank_ids = [i for i in tables["blank_ids"] if i not in self.free_banned]
        self.think_close = len(self._enc(" </think>\n<next>\n")) + 2
        least = self.reserve + 8 + (self.think_close + len(self._enc(" <think>")) if use_reasoning else 4)
        if max_new_tokens < least:
            raise ValueError(
                f"OutcomeGrammar: max_new_tokens={max_new_tokens} cannot hold even an empty target with this "
                f"tokenizer; use at least {least} (a few hundred for real states)"
            )
        self.rows: list[dict] | None = None
        self.forced_close: list[bool] = []

    def _enc(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False)

    def _lone_space_before_digits(self) -> int:
        """The space token a score starts with in a vocabulary that splits digits from the space before
        them (``" 0.5"`` is ``" ", "0", ".", "5"``: Llama 3, Qwen2, SmolLM2), which has no ``" <digit>"``
        token; SFT trained the score that way, so it is forced before the digits."""
        ids = self._enc(" 0")
        if len(ids) == 2 and self.pieces.get(ids[0]) == " " and ids[1] in self.number_cont:
            return ids[0]
        raise ValueError(
            "OutcomeGrammar: the tokenizer has no ' <digit>' token nor a lone ' ' token before a digit to "
            f"start the score with (' 0' encodes as {ids})"
        )

    def _start(self, batch: int) -> None:
        self.rows = [
            {"phase": "start", "queue": [], "think": 0, "score": 0, "cut": False, "slot": None, "row": r}
            for r in range(batch)
        ]
        self.forced_close = [False] * batch

    def select_rows(self, kept: Sequence[int]) -> None:
        """Keep only the rows at positions ``kept`` of the current batch (the decoder dropped the others,
        which have ended); :attr:`forced_close` stays indexed by the batch's original rows."""
        self.rows = [self.rows[i] for i in kept]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.rows is None:
            self._start(input_ids.shape[0])
        used = input_ids.shape[1] - self.width
        out = scores
        for r, row in enumerate(self.rows):
            choice = self._decide(row, input_ids[r, self.width :], used)
            if choice is None or isinstance(choice, _Ban):  # free text: anything but an early end
                out[r, self.free_banned] = -float("inf")
                if choice:
                    out[r, choice] = -float("inf")
            elif isinstance(choice, int):  # forced token
                keep = out[r, choice].clone()
                out[r] = -float("inf")
                out[r, choice] = torch.where(torch.isfinite(keep), keep, torch.zeros_like(keep))
            else:  # the model's argmax among allowed tokens
                allowed = torch.tensor(choice, dtype=torch.long, device=out.device)
                kept = out[r, allowed].clone()
                out[r] = -float("inf")
                out[r, allowed] = torch.nan_to_num(kept, nan=-1e9, neginf=-1e9)
            self.forced_close[row["row"]] = row["cut"]
        return out

    def _force(self, row: dict, text: str, phase: str) -> int:
        row["queue"] = self._enc(text)
        row["phase"] = phase
        row["from"] = None  # the phase's own text starts after the forced tokens (its first free step)
        return row["queue"].pop(0)

    def _repeats(self, row: dict, generated: torch.Tensor) -> list[int]:
        """Tokens that would complete an ``n``-gram this phase already wrote (``no_repeat_ngram``); the
        phase's n-grams are indexed as they are written (``(n-1)``-gram -> the tokens that followed it)."""
        n = self.no_repeat
        if n < 2:
            return []
        if row["from"] is None:
            row["from"], row["grams"], row["indexed"] = len(generated), {}, 0
        own = generated[row["from"] :].tolist()
        grams = row["grams"]
        for end in range(max(n, row["indexed"] + 1), len(own) + 1):  # n-grams ending since last time
            grams.setdefault(tuple(own[end - n : end - 1]), set()).add(own[end - 1])
        row["indexed"] = len(own)
        return sorted(grams.get(tuple(own[len(own) - n + 1 :]), ())) if len(own) >= n - 1 else []

    def _text_bans(self, row: dict, phase: str, text: str, generated: torch.Tensor) -> _Ban:
        """A free phase's bans: other sections' markers, and the phase's own repeated n-grams."""
        bans, repeats = self._free_bans(phase, text), self._repeats(row, generated)
        return _Ban([*bans, *repeats]) if repeats else bans

    def _choose(
        self, row: dict, cands: list[list[int]], then: str, generated: torch.Tensor, used: int
    ) -> list[int] | int | None:
        """Tokens that continue one of ``cands`` (the model picks); then go on with phase ``then``."""
        if row["slot"] is None:
            row["slot"] = used
        chosen = generated[row["slot"] :].tolist()
        n = len(chosen)
        allowed = sorted({c[n] for c in cands if len(c) > n and c[:n] == chosen})
        if allowed:
            return allowed
        row["slot"], row["phase"] = None, then
        return self._decide(row, generated, used)

    def _free_bans(self, phase: str, text: str) -> _Ban:
        """In free text, no token may go on to write a marker other than the phase's own closing one.

        Only checked while the text ends inside a possible marker (after a ``<``), so it costs nothing
        on most steps; the ban list of each (phase, partial marker) is computed once.
        """
        start = text.rfind("<")
        partial = text[start:] if start >= 0 else ""
        if not partial or ">" in partial or len(partial) > max(map(len, _MARKERS)):
            partial = ""
        key = (phase, partial)
        if key not in self.marker_bans:
            allowed = _ALLOWED_MARKER[phase]
            bad = [m for m in _MARKERS if m != allowed]
            ban = []
            for i, piece in self.pieces.items():
                if partial:  # the text so far plus this token
                    cand = partial + piece
                elif "<" in piece:  # this token itself opens a marker
                    cand = piece[piece.rfind("<") :]
                else:
                    continue
                if any(m.startswith(cand) or cand.startswith(m) for m in bad):
                    if not (allowed.startswith(cand) or cand.startswith(allowed)):
                        ban.append(i)
            self.marker_bans[key] = ban
        return _Ban(self.marker_bans[key])

    def _decide(self, row: dict, generated: torch.Tensor, used: int) -> int | list[int] | str | None:
        """This row's next token: ``None`` free, an ``int`` forced, a list of ids the model chooses from."""
        if row["queue"]:
            return row["queue"].pop(0)
        phase = row["phase"]
        if phase == "start":
            if self.use_reasoning:
                return self._force(row, " <think>", "think")
            return self._force(row, " <next>\n", "next")
        if phase in ("think", "next"):
            text = self.tok.decode(generated[-8:].tolist(), skip_special_tokens=True)
            remaining = self.budget - used
            if phase == "think":
                row["think"] += 1
                if text.endswith("</think>"):
                    return self._force(row, "\n<next>\n", "next")
                if row["think"] > self.think_budget or remaining <= self.reserve + self.think_close:
                    row["cut"] = True
                    return self._force(row, " </think>\n<next>\n", "next")
                return self._text_bans(row, phase, text, generated)
            if text.endswith("</next>"):
                return self._force(row, "\n<reward>", "reward")
            if remaining <= self.reserve:
                row["cut"] = True
                return self._force(row, "\n</next>\n<reward>", "reward")
            bans = self._text_bans(row, phase, text, generated)
            if text.endswith("\n"):  # a state line starts: no blank lines (the state is never empty)
                bans = _Ban([*bans, *self.blank_ids])
            if text.endswith("<next>\n"):  # the state's first token: it may not close the state at once
                bans = _Ban([*bans, *self.lt_ids])
            return bans
        if phase == "reward":
            return self._choose(row, self.reward_cands, "pre_done", generated, used)
        if phase == "pre_done":
            return self._force(row, " <done>", "done")
        if phase == "done":
            return self._choose(row, self.done_cands, "pre_score", generated, used)
        if phase == "pre_score":
            return self._force(row, " <score>", "score")
        if phase == "score":
            last = int(generated[-1]) if len(generated) else None
            if last == self.end_first:
                row["queue"] = list(self.end_rest)
                row["phase"] = "finished"
                return row["queue"].pop(0)
            row["score"] += 1
            if row["score"] == 1:
                row["score_start"] = used
                return self.number_lead or self.score_space
            if row["score"] > self.score_len:
                return self.end_first
            so_far = self.tok.decode(generated[row["score_start"] :].tolist(), skip_special_tokens=True)
            ok = [i for i, t in self.number_cont.items() if _SCORE.match(so_far + t)]
            return [*ok, self.end_first] if so_far.strip() else ok  # after a lone space: a digit
        return self.eos  # finished


def generate_outcomes(
    model,
    tokenizer,
    prompts: Sequence[str],
    max_new_tokens: int,
    use_reasoning: bool,
    structured: bool = True,
    think_budget: int = 160,
    no_repeat_ngram: int = 0,
    **generate_kwargs: Any,
) -> tuple[list[str], list[bool]]:
    """Generate experience-model targets for ``prompts``; ``(texts, cut)``.

    ``structured``: decode under :class:`OutcomeGrammar` (``think_budget``, ``no_repeat_ngram``: its
    settings); ``cut[i]`` says whether row ``i``'s reasoning or
    state was closed by the budget (always False with free decoding). ``generate_kwargs`` go to
    :func:`dreamgym.modeling.generation.generate_texts` (``batch_size``, ``do_sample``, ...).
    """
    from dreamgym.modeling.generation import generate_texts

    grammars: list[tuple[OutcomeGrammar, list[int]]] = []

    def factory(width: int, rows: list[int]) -> OutcomeGrammar:
        g = OutcomeGrammar(
            tokenizer,
            width,
            max_new_tokens,
            use_reasoning,
            think_budget=think_budget,
            no_repeat_ngram=no_repeat_ngram,
        )
        grammars.append((g, rows))
        return g

    texts = generate_texts(
        model,
        tokenizer,
        prompts,
        max_new_tokens=max_new_tokens,
        processor_factory=factory if structured else None,
        **generate_kwargs,
    )
    cut = [False] * len(texts)
    for g, rows in grammars:
        for r, i in enumerate(rows):
            cut[i] = r < len(g.forced_close) and g.forced_close[r]
    return texts, cut

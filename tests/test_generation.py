"""The decoding loop of :func:`dreamgym.modeling.generation.generate_ids` against ``model.generate``."""

from __future__ import annotations

import pytest
import torch

from dreamgym.modeling import generation
from dreamgym.modeling.generation import encode_prompt, generate_ids
from dreamgym.modeling.structured import generate_outcomes
from dreamgym.modeling.tokenizer import pad_id


class EndAt:
    """Greedy on the model's scores, but row ``r`` (original batch order) is forced to EOS after
    ``ends[r]`` new tokens: rows of one batch end at different steps."""

    def __init__(self, width: int, ends: list[int], eos: int):
        self.width, self.ends, self.eos, self.rows = width, ends, eos, list(range(len(ends)))

    def select_rows(self, kept):
        self.rows = [self.rows[i] for i in kept]

    def __call__(self, input_ids, scores):
        used = input_ids.shape[1] - self.width
        for r, orig in enumerate(self.rows):
            scores[r, self.eos] = float("inf") if used >= self.ends[orig] else -float("inf")
        return scores


class NoSelect(EndAt):
    select_rows = None  # a processor that cannot follow dropped rows


def _prompts(tok, n):
    texts = [
        f"<task> buy thing {i}\n<history> none\n<state>\n[page] search {'x ' * i}\n<predict>\n"
        for i in range(n)
    ]
    return [encode_prompt(tok, t) for t in texts]


def _until_eos(ids, eos):
    return ids[: ids.index(eos) + 1] if eos in ids else ids


@pytest.fixture
def lm(tiny_lm):
    torch.manual_seed(0)
    return tiny_lm.build()


def test_rows_leave_the_batch_with_the_same_tokens_as_model_generate(lm):
    model, tok = lm
    eos, pad = tok.eos_token_id, pad_id(tok)
    prompts = _prompts(tok, 6)
    ends = [3, 17, 1, 9, 30, 12]
    seen = []

    def factory(width, rows):
        p = EndAt(width, [ends[i] for i in rows], eos)
        seen.append(p)
        return p

    fast = generate_ids(model, prompts, 24, pad, eos, batch_size=6, processor_factory=factory)
    assert len(seen[-1].rows) < 6  # rows did leave the batch
    slow = generate_ids(
        model, prompts, 24, pad, eos, batch_size=6, processor_factory=factory, cache_implementation="static"
    )
    assert fast == [_until_eos(s, eos) for s in slow]
    assert [len(f) for f in fast] == [min(e + 1, 24) for e in ends]


def test_a_processor_without_select_rows_keeps_every_row(lm):
    model, tok = lm
    eos, pad = tok.eos_token_id, pad_id(tok)
    prompts = _prompts(tok, 4)
    ends = [2, 8, 5, 11]

    def run(cls):
        factory = lambda w, rows: cls(w, [ends[i] for i in rows], eos)  # noqa: E731
        return generate_ids(model, prompts, 16, pad, eos, batch_size=4, processor_factory=factory)

    a, b = run(NoSelect), run(EndAt)
    assert a == b


def test_structured_outcomes_match_model_generate(lm, monkeypatch):
    model, tok = lm
    texts = [
        f"<task> buy thing {i}\n<history> none\n<state>\n[page] search\n<action> search[x]\n<predict>\n"
        for i in range(5)
    ]
    fast = generate_outcomes(
        model, tok, texts, max_new_tokens=90, use_reasoning=True, think_budget=20, batch_size=3
    )
    monkeypatch.setattr(generation, "_plain_attention", lambda m: False)  # as for a hybrid model
    slow = generate_outcomes(
        model,
        tok,
        texts,
        max_new_tokens=90,
        use_reasoning=True,
        think_budget=20,
        batch_size=3,
        cache_implementation="static",
    )
    assert fast == slow


def test_sampling_top_k_1_is_greedy_and_a_seed_repeats(lm):
    model, tok = lm
    eos, pad = tok.eos_token_id, pad_id(tok)
    prompts = _prompts(tok, 3)
    greedy = generate_ids(model, prompts, 12, pad, eos, do_sample=False)
    assert generate_ids(model, prompts, 12, pad, eos, do_sample=True, temperature=0.7, top_k=1) == greedy
    torch.manual_seed(1)
    s1 = generate_ids(model, prompts, 12, pad, eos, do_sample=True, top_k=0, top_p=1.0)
    torch.manual_seed(1)
    assert generate_ids(model, prompts, 12, pad, eos, do_sample=True, top_k=0, top_p=1.0) == s1


def test_stop_strings_end_a_row(lm):
    model, tok = lm
    eos, pad = tok.eos_token_id, pad_id(tok)
    prompts = _prompts(tok, 2)
    free = generate_ids(model, prompts, 20, pad, eos)
    stop = tok.decode(free[0][:3])[-2:]  # a string row 0 writes within its first tokens
    cut = generate_ids(model, prompts, 20, pad, eos, stop_strings=[stop], tokenizer=tok)
    assert tok.decode(cut[0]).endswith(stop) and len(cut[0]) <= 3


def test_unknown_keywords_are_refused(lm):
    model, tok = lm
    with pytest.raises(TypeError, match="num_beams"):
        generate_ids(model, _prompts(tok, 1), 4, pad_id(tok), tok.eos_token_id, num_beams=2)


class PassThrough:
    def __call__(self, input_ids, scores):
        return scores


def test_sampling_without_dropped_rows_draws_what_model_generate_draws(lm):
    """With a processor that cannot follow dropped rows (the policy's action grammar), the batch keeps its
    shape, so one seed samples the same tokens as ``model.generate`` (earlier records stay reproducible)."""
    model, tok = lm
    eos, pad = tok.eos_token_id, pad_id(tok)
    prompts = _prompts(tok, 5)
    out = {}
    for cache in ("dynamic", "slots"):
        torch.manual_seed(3)
        out[cache] = generate_ids(
            model, prompts, 20, pad, eos, processor_factory=lambda w, rows: PassThrough(),
            do_sample=True, temperature=1.0, top_k=0, top_p=1.0, cache_implementation=cache,
        )  # fmt: skip
    assert out["slots"] == [_until_eos(ids, eos) for ids in out["dynamic"]]


def test_generation_runs_in_the_model_s_dtype_under_autocast(lm):
    """RL generates inside the trainer's bf16 autocast; decoding ignores it (module docstring): every
    step's scores are bit-for-bit those of a run without autocast."""
    model, tok = lm
    eos, pad = tok.eos_token_id, pad_id(tok)
    prompts = _prompts(tok, 4)

    def run():
        seen = []

        def record(input_ids, scores):
            seen.append(scores.clone())
            return scores

        ids = generate_ids(model, prompts, 8, pad, eos, batch_size=4, processor_factory=lambda w, r: record)
        return ids, seen

    plain_ids, plain = run()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ids, scores = run()
        with torch.no_grad():  # the same forward outside generation does change under autocast
            x = torch.tensor(prompts[:1])
            assert not torch.equal(model(input_ids=x).logits[:, -1], plain[0][:1])
    assert ids == plain_ids and all(torch.equal(a, b) for a, b in zip(scores, plain, strict=True))

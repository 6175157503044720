"""Structured decoding: every output parses, the model's own scores choose reward and done."""

import torch

from dreamgym.modeling.experience import ExperienceModel
from dreamgym.modeling.formats import ExperienceFormat, parse_target
from dreamgym.modeling.structured import OutcomeGrammar


def _decode_with(grammar, tok, scores_fn, steps):
    """Greedy decoding of a fake model whose next-token scores come from ``scores_fn(t)`` or, for a
    two-argument ``scores_fn``, ``scores_fn(t, text_so_far)``."""
    return tok.decode(_decode_ids(grammar, tok, scores_fn, steps), skip_special_tokens=True)


def _decode_ids(grammar, tok, scores_fn, steps) -> list[int]:
    """The generated ids of :func:`_decode_with`."""
    import inspect

    two = len(inspect.signature(scores_fn).parameters) == 2
    ids = torch.zeros((1, 3), dtype=torch.long)  # 3 prompt columns
    for t in range(steps):
        raw = scores_fn(t, tok.decode(ids[0, 3:].tolist())) if two else scores_fn(t)
        scores = grammar(ids, raw.unsqueeze(0).clone())
        nxt = scores.argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=1)
        if int(nxt) == tok.eos_token_id:
            break
    return ids[0, 3:].tolist()


def _decode_script(tok, script_text: str, seed: int) -> str:
    """Structured decoding of a fake model that wants to write ``script_text`` (then random tokens)."""
    script = tok.encode(script_text, add_special_tokens=False)
    g = torch.Generator().manual_seed(seed)

    def scores(t):
        s = torch.randn(len(tok), generator=g)
        if t < len(script):
            s[script[t]] = 20.0
        return s

    grammar = OutcomeGrammar(tok, prompt_width=3, max_new_tokens=120, use_reasoning=True)
    return _decode_with(grammar, tok, scores, 300)


def test_budget_closes_state_and_model_picks_reward(tiny_lm):
    _, tok = tiny_lm.build()
    one = tok.encode(" 1", add_special_tokens=False)
    vocab = len(tok)
    g = torch.Generator().manual_seed(0)

    def scores(t):
        s = torch.randn(vocab, generator=g)
        s[one[0]] = 50.0  # the fake model always wants " 1..." (and never closes its state itself)
        if len(one) > 1:
            s[one[1]] = 40.0
        s[tok.eos_token_id] = 100.0  # and would stop at once if allowed
        return s

    grammar = OutcomeGrammar(tok, prompt_width=3, max_new_tokens=120, use_reasoning=True, think_budget=10)
    text = _decode_with(grammar, tok, scores, 200)
    parsed = parse_target(text)
    assert parsed.ok, (parsed.error, text)
    assert parsed.reward == 1.0 and grammar.forced_close == [True]
    assert parsed.reasoning and parsed.next_state


def test_model_closing_itself_is_not_a_cut(tiny_lm):
    _, tok = tiny_lm.build()
    script = " <think> ok </think>\n<next>\n[page] done\n</next>"
    zero = tok.encode(" 0", add_special_tokens=False)
    false = tok.encode(" false", add_special_tokens=False)
    vocab = len(tok)

    def scores(t, so_far):
        s = torch.zeros(vocab)
        s[zero] = 3.0  # every token of " 0" and " false" (they may be several in a tiny vocabulary)
        s[false] = 5.0
        if script.startswith(so_far) and len(so_far) < len(script):  # the model writes the script on
            s[tok.encode(script[len(so_far) :], add_special_tokens=False)[0]] = 10.0
        return s

    grammar = OutcomeGrammar(tok, prompt_width=3, max_new_tokens=200, use_reasoning=True)
    text = _decode_with(grammar, tok, scores, 300)
    parsed = parse_target(text)
    assert parsed.ok and parsed.reasoning == "ok" and parsed.next_state == "[page] done"
    assert parsed.reward == 0.0 and parsed.done is False and grammar.forced_close == [False]


def test_untrained_model_always_parses_structured(tiny_lm):
    model, tok = tiny_lm.build()
    prompts = [
        f"<task> buy thing {i}\n<history> none\n<state>\n[page] search\n<action> search[x]\n<predict>\n"
        for i in range(5)
    ]
    for use_reasoning in (True, False):
        em = ExperienceModel(
            model, tok, ExperienceFormat(k=0, use_reasoning=use_reasoning), max_new_tokens=90, batch_size=2
        )
        preds = em.parse(em.generate(prompts, structured=True))
        assert all(p.ok for p in preds), [(p.error, t) for p, t in zip(preds, em.last_raw, strict=True)]
        assert all(p.reward in (0.0, 1.0) for p in preds)
        assert len(em.last_cut) == 5 and all(p.cut == c for p, c in zip(preds, em.last_cut, strict=True))
        assert all(bool(p.reasoning) == use_reasoning for p in preds)
    free = ExperienceModel(model, tok, ExperienceFormat(k=0), max_new_tokens=60, decoding="free")
    assert free.decoding == "free" and not any(free.last_cut)


def test_free_text_cannot_write_another_sections_marker(tiny_lm):
    _, tok = tiny_lm.build()
    # a model that skips `</next>` and writes the tail itself (what a half-trained model does)
    text = _decode_script(
        tok, " <think> a </think>\n<next>\n[page] x\n<reward> 1 <done> true <score> 1 <end>", 1
    )
    parsed = parse_target(text)
    assert parsed.ok, (parsed.error, text)
    assert text.count("<reward>") == 1 and text.count("<end>") == 1
    assert not any(m in parsed.next_state for m in ("<reward>", "<done>", "<score>", "<end>", "</think>"))


def test_synthetic_env_with_structured_decoding_never_errors(tiny_lm):
    from torchrl.envs.utils import check_env_specs

    from dreamgym.envs.synthetic import SyntheticEnv, SyntheticTask

    model, tok = tiny_lm.build()
    em = ExperienceModel(model, tok, ExperienceFormat(k=0), max_new_tokens=90, batch_size=3)
    task = SyntheticTask("t0", "i want a red shirt", "[page] search\n[search box]", ["search[<query>]"])
    env = SyntheticEnv(em, [task], batch_size=[3])
    check_env_specs(env)
    td = env.reset()
    td["action"] = ["search[red shirt]"] * 3
    out = env.step(td)["next"]
    assert not out["sim_error"].any() and env.sim_error_rate == 0.0 and env.model_calls >= 3
    assert env.model_calls == 3 and env.cuts == sum(em.last_cut)  # one batched call, three rows


def test_state_cannot_be_closed_empty(tiny_lm):
    _, tok = tiny_lm.build()
    text = _decode_script(tok, " <think> a </think>\n<next>\n</next>\n<reward> 0", 2)
    parsed = parse_target(text)
    assert parsed.ok and parsed.next_state, (parsed.error, text)


def test_a_vocabulary_that_splits_digits_from_the_space_writes_its_score(webshop_offline):
    """Llama 3, Qwen2 and SmolLM2 tokenize ``" 0.5"`` as ``" ", "0", ".", "5"``: no ``" <digit>"`` token
    exists, so the score starts with the lone space (as SFT trained it), then the model's digits."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from dreamgym.modeling.tokenizer import SPECIAL_TOKENS, corpus_from_trajectories

    bpe = Tokenizer(models.BPE(unk_token=None))
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=list(SPECIAL_TOKENS.values()),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)  # fmt: skip
    bpe.train_from_iterator(corpus_from_trajectories([webshop_offline]), trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, **SPECIAL_TOKENS)
    assert [tok.decode([i]) for i in tok.encode(" 0.5", add_special_tokens=False)] == [" ", "0", ".", "5"]
    assert not any(t.strip() != t and t.strip().isdigit() for t in map(tok.decode, tok.get_vocab().values()))
    for target, score in (("0.75", 0.75), ("1", 1.0)):
        script = (
            f" <think> a </think>\n<next>\n[page] x\n</next>\n<reward> 0 <done> true <score> {target} <end>"
        )
        grammar = OutcomeGrammar(tok, prompt_width=3, max_new_tokens=120, use_reasoning=True)
        text = _decode_with(grammar, tok, _wanting(tok, script), 300)
        parsed = parse_target(text)
        assert parsed.ok and parsed.score == score, (parsed.error, text)


def _wanting(tok, script: str):
    """A fake model's scores that go on writing ``script`` from whatever text it has written so far
    (token boundaries may differ from the script's own tokenization), random off it."""
    g = torch.Generator().manual_seed(3)

    def scores(t, so_far):
        s = torch.randn(len(tok), generator=g)
        rest = tok.encode(script[len(so_far) :], add_special_tokens=False)
        if script.startswith(so_far) and rest:
            s[rest[0]] = 20.0
        return s

    return scores


def _ngrams(ids: list[int], n: int) -> list[tuple[int, ...]]:
    return [tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)]


def test_no_repeat_ngram_turns_a_greedy_loop_aside(tiny_lm):
    _, tok = tiny_lm.build()
    loop = tok.encode("a mug 1, ", add_special_tokens=False)  # a state line may not start blank
    lead = " <think> ok </think>\n<next>\n"
    vocab = len(tok)

    def run(no_repeat: int) -> tuple[list[int], OutcomeGrammar]:
        g = torch.Generator().manual_seed(0)
        began: list[int] = []  # the step the state began at

        def scores(t, so_far):
            s = torch.randn(vocab, generator=g)
            if not so_far.endswith("<next>\n") and not began:
                if lead.startswith(so_far) and len(so_far) < len(lead):
                    s[tok.encode(lead[len(so_far) :], add_special_tokens=False)[0]] = 30.0
                return s
            began.append(t) if not began else None
            s[loop[(t - began[0]) % len(loop)]] = 30.0  # "a mug 1, " again and again (a greedy loop)
            return s

        grammar = OutcomeGrammar(tok, prompt_width=3, max_new_tokens=120, use_reasoning=True,
                                 no_repeat_ngram=no_repeat)  # fmt: skip
        return _decode_ids(grammar, tok, scores, 300), grammar

    looped, g0 = run(0)
    assert g0.forced_close == [True] and tok.decode(looped).count("a mug 1,") > 5  # without: to the budget
    ids, g4 = run(4)
    text = tok.decode(ids, skip_special_tokens=True)
    parsed = parse_target(text)
    assert parsed.ok, (parsed.error, text)
    start = len(tok.encode(lead, add_special_tokens=False))
    end = start + next(
        i for i in range(len(ids) - start) if "</next>" in tok.decode(ids[start : start + i + 1])
    )
    grams = _ngrams(ids[start:end], 4)
    assert len(grams) == len(set(grams)), parsed.next_state  # no 4-gram of the state twice
    assert parsed.next_state.startswith(tok.decode(loop + loop[:3]).strip()), (
        parsed.next_state
    )  # until the ban
    assert len(set(_ngrams(looped[start:], 4))) < len(_ngrams(looped[start:], 4))  # the loop repeated them


def test_no_repeat_ngram_is_checked(tiny_lm):
    import pytest

    _, tok = tiny_lm.build()
    with pytest.raises(ValueError, match="no_repeat_ngram=1"):
        OutcomeGrammar(tok, prompt_width=3, max_new_tokens=120, no_repeat_ngram=1)

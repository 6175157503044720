"""Action-constrained decoding: the grammar, valid actions in a real env, and exact log-probs."""

import math

import pytest
import torch
from transformers import LogitsProcessorList

from dreamgym.envs import make_env
from dreamgym.envs.webshop import WebShopEnv
from dreamgym.modeling.action_constraint import ActionGrammar, ActionGrammarProcessor
from dreamgym.modeling.policy_format import PolicyFormat
from dreamgym.rl.collector import RolloutCollector
from dreamgym.rl.losses import entropy_from_logits, token_log_probs
from dreamgym.rl.rollout import build_rollout_batch


def _enc(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


@pytest.fixture(scope="module")
def lm(tiny_lm):
    return tiny_lm.build()


def test_grammar_concrete_actions_and_template(lm):
    _, tok = lm
    eos = tok.eos_token_id
    instruction = "i need a blue speaker"
    g = ActionGrammar(
        tok, instruction, ["click[buy now]", "click[blue]", "search[<query>]"], max_arg_tokens=3
    )
    buy, blue, search = _enc(tok, " click[buy now]"), _enc(tok, " click[blue]"), _enc(tok, " search[")
    assert set(g.allowed([])) == {buy[0], search[0]}
    # walking a concrete action: the tree's children, then EOS; anything off the tree allows only EOS
    assert g.allowed(buy) == [eos]
    assert eos not in g.allowed(buy[:-1])
    assert g.allowed(blue[:-1] + [eos]) == [eos]
    # the template argument: instruction tokens only, no empty argument, "]" closes, then EOS
    first = g.allowed(search)
    words = set(_enc(tok, " " + instruction)) | set(_enc(tok, instruction))
    close = _enc(tok, "]")[-1]
    assert set(first) == words - {close, eos}
    w = first[0]
    assert close in g.allowed(search + [w])
    assert g.allowed(search + [w, close]) == [eos]
    assert g.allowed(search + [w, w, w]) == [close]  # max_arg_tokens reached: must close
    free = ActionGrammar(tok, instruction, [])  # a state without actions: unconstrained, scored free
    assert free.allowed([]) is None and free.allowed_per_step([5, 6]) == [[], []]


def test_grammar_writes_the_reply_sft_trains_under_a_chat_template(tiny_tokenizer):
    """Under ChatML the reply is ``action <|im_end|>`` with no leading space (``" search"`` and ``"search"``
    are different tokens): the collector's grammar follows the codec's reply layout, token for token."""
    from dreamgym.modeling import load_tokenizer
    from dreamgym.modeling.chat import ChatCodec

    tok = load_tokenizer(tiny_tokenizer)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    codec = ChatCodec(tok)
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert codec.reply_head == "" and codec.reply_end_ids == [im_end]
    actions = ["click[buy now]", "click[blue]", "search[<query>]"]
    g = RolloutCollector(constrained=True)._grammar(codec, _Ep("i need a blue speaker", actions))
    for action in ("click[buy now]", "click[blue]"):
        reply = codec.reply_ids(action)
        assert reply != _enc(tok, " " + action) + [tok.eos_token_id]  # the plain layout's reply differs
        assert all(t in g.allowed(reply[:j]) for j, t in enumerate(reply)), action
        assert g.allowed(reply) == [im_end]
    search = _enc(tok, "search[")
    assert set(g.allowed([])) == {_enc(tok, "click[buy now]")[0], search[0]}
    w, close = g.allowed(search)[0], _enc(tok, "]")[-1]
    assert g.allowed(search + [w, close]) == [im_end] and tok.eos_token_id not in g.allowed(search + [w])


class _Ep:
    """The two fields of an episode the grammar reads."""

    def __init__(self, instruction, actions):
        self.instruction, self.available = instruction, [actions]


def test_constrained_rollouts_are_always_valid_in_webshop(lm):
    """A random tiny policy writes garbage; constrained, every action it sends is admissible."""
    model, tok = lm
    env = make_env("webshop", split="test", batch_size=4, max_steps=4)
    fmt = PolicyFormat(history_window=1, max_state_chars=400, max_actions=20)
    free = RolloutCollector(fmt, max_new_tokens=24, max_prompt_tokens=400).collect(env, model, tok, [0, 1], 2)
    assert free.metrics()["invalid_rate"] > 0.5  # the unconstrained baseline really is invalid
    col = RolloutCollector(fmt, max_new_tokens=24, max_prompt_tokens=400, constrained=True, max_arg_tokens=8)
    out = col.collect(env, model, tok, [0, 1], group_size=2)
    assert out.metrics()["invalid_rate"] == 0.0
    for e in out.episodes:
        for a, avail in zip(e.actions, e.available, strict=False):
            assert WebShopEnv.is_valid_action(a, avail), (a, avail)
    assert any(a.startswith("search[") for e in out.episodes for a in e.actions)
    # every turn records its allowed sets, one per response token, and they reach the rollout batch
    batch = build_rollout_batch(out.turns, pad_id=tok.pad_token_id)
    for i, t in enumerate(out.turns):
        assert t.allowed is not None and len(t.allowed) == len(t.response_ids)
        p = len(t.prompt_ids)
        for j, tokid in enumerate(t.response_ids):
            row = batch.allowed_ids[i, p + j]
            assert tokid in row[row >= 0].tolist()  # the sampled token was allowed
        assert (batch.allowed_ids[i, :p] < 0).all()


def test_choose_on_recorded_prefixes_writes_the_actions_collect_took(lm):
    """``choose`` is collect's turn on a given episode: replaying greedy episodes' prefixes gives back
    every action they took (the imitation script scores recorded steps this way)."""
    from dataclasses import replace

    model, tok = lm
    env = make_env("webshop", split="test", batch_size=2, max_steps=3)
    fmt = PolicyFormat(history_window=1, max_state_chars=400, max_actions=20)
    col = RolloutCollector(fmt, max_new_tokens=24, max_prompt_tokens=400, constrained=True, max_arg_tokens=8)
    episodes = col.collect(env, model, tok, [0, 1], greedy=True).episodes
    cut, want = [], []
    for e in episodes:
        for t, action in enumerate(e.actions):
            cut.append(
                replace(e, states=e.states[: t + 1], actions=e.actions[:t], available=e.available[: t + 1])
            )
            want.append(action)
    assert len(cut) >= 4 and col.choose(model, tok, cut) == want


def test_constrained_log_probs_match_the_sampling_distribution(lm):
    """token_log_probs(allowed=...) scores exactly what generate sampled from (processed scores)."""
    model, tok = lm
    model.eval()
    instruction = "find a red mug"
    actions = ["click[red]", "click[buy now]", "search[<query>]"]
    g = ActionGrammar(tok, instruction, actions, max_arg_tokens=4)
    prompt = [tok.bos_token_id] + _enc(tok, "Instruction: find a red mug\nAction:")
    ids = torch.tensor([prompt])
    torch.manual_seed(0)
    out = model.generate(
        input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=10, do_sample=True, top_k=0,
        logits_processor=LogitsProcessorList([ActionGrammarProcessor([g], len(prompt))]), output_scores=True, return_dict_in_generate=True,
        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
    )  # fmt: skip
    resp = out.sequences[0, len(prompt) :].tolist()
    if tok.eos_token_id in resp:
        resp = resp[: resp.index(tok.eos_token_id) + 1]
    expected = [torch.log_softmax(s[0].float(), -1)[t].item() for s, t in zip(out.scores, resp, strict=False)]
    from dreamgym.rl.rollout import Turn

    turn = Turn(prompt, resp, 0.0, True, True, False, 0, 0, 0, 0, g.allowed_per_step(resp))
    batch = build_rollout_batch([turn], pad_id=tok.pad_token_id)
    with torch.no_grad():
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask.long()).logits
    lp = token_log_probs(logits, batch.input_ids, batch.allowed_ids)[0, len(prompt) :]
    assert lp.tolist() == pytest.approx(expected, abs=1e-4)
    free = token_log_probs(logits, batch.input_ids)[0, len(prompt) :]
    assert (lp >= free - 1e-6).all() and (lp > free + 1e-3).any()  # renormalising raises them


def test_constrained_log_prob_and_entropy_by_hand():
    logits = torch.tensor([[[0.0, 1.0, 2.0, 3.0], [0.0, 0.0, 0.0, 0.0]]])  # (1, 2, 4)
    ids = torch.tensor([[0, 3]])
    allowed = torch.tensor([[[-1, -1], [1, 3]]])  # position 1 may be token 1 or 3
    lp = token_log_probs(logits, ids, allowed)
    assert lp[0, 1].item() == pytest.approx(3.0 - math.log(math.e + math.e**3), abs=1e-6)
    assert token_log_probs(logits, ids)[0, 1].item() == pytest.approx(
        3.0 - math.log(sum(math.e**k for k in range(4))), abs=1e-6
    )
    p1, p3 = math.e / (math.e + math.e**3), math.e**3 / (math.e + math.e**3)
    ent = entropy_from_logits(logits, torch.tensor([[False, True]]), allowed)
    assert ent.item() == pytest.approx(-(p1 * math.log(p1) + p3 * math.log(p3)), abs=1e-6)
    # gradients are finite through the -inf padding of the allowed set
    z = logits.clone().requires_grad_(True)
    (
        token_log_probs(z, ids, allowed).sum()
        + entropy_from_logits(z, torch.tensor([[False, True]]), allowed)
    ).backward()
    assert torch.isfinite(z.grad).all()


def test_grammar_rows_leave_the_batch_with_model_generate_s_greedy_tokens(lm):
    """Greedy decoding under the grammar: the decoding loop (ended rows leave the batch, the processor
    follows them) writes what ``model.generate`` with ``prefix_allowed_tokens_fn`` writes."""
    from transformers.generation.logits_process import PrefixConstrainedLogitsProcessor

    from dreamgym.modeling.generation import generate_ids

    model, tok = lm
    model.eval()
    eos, pad = tok.eos_token_id, tok.pad_token_id
    states = [
        ("find a red mug", ["click[red]", "click[buy now]", "search[<query>]"]),
        ("i want blue socks under 10 dollars", ["search[<query>]"]),
        ("a green lamp", ["click[back to search]", "click[b0001]", "click[b0002]"]),
        ("anything", []),  # a free grammar
    ]
    grammars = [ActionGrammar(tok, i, a, max_arg_tokens=6) for i, a in states]
    prompts = [[tok.bos_token_id] + _enc(tok, f"Instruction: {i}\nAction:") for i, _ in states]
    seen = []

    def ours(width, rows):
        seen.append(ActionGrammarProcessor([grammars[i] for i in rows], width))
        return seen[-1]

    def upstream(width, rows):
        gs = [grammars[i] for i in rows]
        vocab = list(range(model.config.vocab_size))

        def fn(b, ids):
            a = gs[b].allowed(ids[width:].tolist())
            return vocab if a is None else a

        return PrefixConstrainedLogitsProcessor(fn, 1)

    fast = generate_ids(model, prompts, 12, pad, eos, batch_size=4, processor_factory=ours)
    slow = generate_ids(
        model, prompts, 12, pad, eos, batch_size=4, processor_factory=upstream, cache_implementation="static"
    )
    assert fast == [s[: s.index(eos) + 1] if eos in s else s for s in slow]
    assert len(seen[0].grammars) < 4  # ended rows did leave the batch
    for g, ids in zip(grammars[:3], fast[:3], strict=True):
        assert all(t in a for t, a in zip(ids, g.allowed_per_step(ids), strict=True))

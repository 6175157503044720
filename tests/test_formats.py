"""Experience-model formats: prompt layout, target round trip, malformed model output."""

import pytest

from dreamgym.modeling.formats import (
    ExperienceFormat,
    Neighbour,
    build_prompt,
    build_target,
    build_variation_prompt,
    build_variation_target,
    parse_target,
    parse_variation,
    target_parts,
)


def test_prompt_sections_window_and_truncation():
    fmt = ExperienceFormat(k=2, history_window=2, ref_state_chars=10, ref_next_chars=12)
    nbs = [
        Neighbour("s" * 50, "click[a]", "n" * 50, 0.0),
        Neighbour("x", "click[b]", "y", 1.0),
        Neighbour("z", "c", "w", 0),
    ]
    p = build_prompt(
        fmt, "buy a\nshirt", ["a1", "a2", "a3"], nbs, "[page] the  current\n\n  [button] x ", "click[x]"
    )
    lines = p.strip().split("\n")
    assert lines[0] == "<task> buy a shirt"
    assert lines[1] == "<history> a2 | a3"  # window of 2, oldest dropped
    assert len([ln for ln in lines if ln.startswith("<ref>")]) == 2  # k caps neighbours
    assert lines[2:7] == [
        "<ref>",
        "<s> " + "s" * 10 + " ...",
        "<a> click[a]",
        "<s'> " + "n" * 12 + " ...",
        "<r> 0",
    ]
    assert lines[11] == "<r> 1"
    # the current state keeps its lines (stripped, blank ones dropped): the env parses states by line
    assert lines[-5:] == ["<state>", "[page] the current", "[button] x", "<action> click[x]", "<predict>"]


def test_prompt_without_history_or_retrieval():
    p = build_prompt(
        ExperienceFormat(k=0, history_window=4), "t", [], [Neighbour("s", "a", "n", 0)], "s0", "a0"
    )
    assert "<history> none" in p and "<ref>" not in p


@pytest.mark.parametrize("reasoning", [None, "Buying ends the episode; the item matches."])
@pytest.mark.parametrize("reward,done,score", [(0.0, False, 0.0), (1.0, True, 1.0), (0.0, True, 0.375)])
def test_target_round_trip(reasoning, reward, done, score):
    text = build_target("Thank you [SEP] Purchased\nitem", reward, done, score, reasoning)
    out = parse_target(text)
    assert out.ok, out.error
    assert out.next_state == "Thank you [SEP] Purchased\nitem"
    assert (out.reward, out.done, out.score) == (reward, done, score)
    assert out.reasoning == (reasoning or "")
    think, outcome = target_parts("s", reward, done, score, reasoning)
    assert (think == "") == (reasoning is None) and outcome.endswith("<end>")


def test_trailing_garbage_after_end_is_ignored():
    out = parse_target(build_target("s1", 1, True, 1) + " <next> junk </next>")
    assert out.ok and out.next_state == "s1"


@pytest.mark.parametrize(
    "text,needle",
    [
        ("", "<end>"),
        ("<next> s </next> <reward> 1 <done> true", "<end>"),
        ("<think> why <next> s </next> <reward> 1 <done> true <end>", "</think>"),
        ("<reward> 1 <done> true <end>", "<next>"),
        ("<next> s </next> <done> true <end>", "<reward>"),
        ("<next> s </next> <reward> yes <done> true <end>", "not a number"),
        ("<next> s </next> <reward> 1 <done> maybe <end>", "true/false"),
        ("<next>  </next> <reward> 1 <done> true <end>", "empty"),
        ("<next> s </next> <reward> 1 <done> true <score> x <end>", "not a number"),
        ("<next> s </next> <reward> 7 <done> true <end>", "not 0 or 1"),
        ("<next> s </next> <reward> 0.5 <done> true <end>", "not 0 or 1"),
        ("<next> s </next> <reward> 1 <done> true <score> nan <end>", "not in [0, 1]"),
        ("<next> s </next> <reward> 1 <done> true <score> 1e999 <end>", "not in [0, 1]"),
        ("<next> s </next> <reward> 0 <done> true <score> -0.5 <end>", "not in [0, 1]"),
        (None, "str"),
    ],
)
def test_malformed_output_is_a_clear_failure(text, needle):
    out = parse_target(text)
    assert not out.ok and needle in out.error


def test_format_validation_and_dict_round_trip():
    fmt = ExperienceFormat(k=5, use_reasoning=False)
    assert ExperienceFormat.from_dict(fmt.to_dict()) == fmt
    with pytest.raises(ValueError, match="`k` must be >= 0"):
        ExperienceFormat(k=-1)
    with pytest.raises(ValueError, match="unknown field"):
        ExperienceFormat.from_dict({"kk": 1})


def test_variation_format():
    assert build_variation_prompt("buy a\nred shirt") == "<vary> buy a red shirt\n<variant>"
    assert parse_variation(build_variation_target("buy a blue shirt")) == "buy a blue shirt"
    assert parse_variation("no end marker") is None and parse_variation(" <end>") is None

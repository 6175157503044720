"""Scripted web agents: an expert that reads only the visible state, a random agent, a near-miss agent.

:class:`WebExpert` never reads the env's privileged ``info``: it recognises the task from the
instruction's wording (one :class:`_Solver` per phrasing, :data:`SOLVERS`) and picks the next action
from the elements of the state (:func:`.page.parse_state`), keeping per-episode notes (tabs already
opened, the range left in guess-number). It covers every type of the suite (:mod:`.tasks`), held-out
types included, since their wording matches a solver of a trained type. Its measured success per task
type is in ``docs/web.md`` (measured by ``scripts/bench_web.py``, removed:
``git show 0d869bb:scripts/bench_web.py``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dreamgym.agents import Agent
from dreamgym.envs.web.page import FIELDS, Element, parse_action, parse_state, quoted

__all__ = ["WebExpert", "WebRandomAgent", "WebNearMissAgent", "SOLVERS", "solver_for"]

Notes = dict[str, Any]
_ORDINAL = re.compile(r"(\d+)(?:st|nd|rd|th)")


def _first(els: list[Element], role: str | tuple[str, ...], text: str | None = None) -> Element | None:
    roles = (role,) if isinstance(role, str) else role
    return next((e for e in els if e.role in roles and (text is None or e.text == text)), None)


def _click(e: Element | None) -> str | None:
    return None if e is None else f"click[{e.ref}]"


def _fill_then(els: list[Element], values: list[tuple[Element, str]], submit: Element | None) -> str | None:
    """Type each (field, value) whose field does not hold it yet, then click ``submit``."""
    for field, value in values:
        if field.text != value:
            return f"type[{field.ref}][{value}]"
    return _click(submit)


def _submit(els: list[Element]) -> Element | None:
    return next((e for e in els if e.role == "button" and e.text.lower() in ("submit", "login")), None)


def _fields(els: list[Element]) -> list[Element]:
    return [e for e in els if e.role in FIELDS]


# ---------------------------------------------------------------------------------------- solvers
def _click_named(role: tuple[str, ...]):
    def solve(m: re.Match, els: list[Element], notes: Notes) -> str | None:
        return _click(_first(els, role, m.group(1)))

    return solve


def _click_sequence(m: re.Match, els: list[Element], notes: Notes) -> str | None:
    names = [m.group(1), m.group(2)]
    step = notes.setdefault("next", 0)
    notes["next"] = step + 1
    return _click(_first(els, "button", names[min(step, 1)]))


def _find_behind(role: str, prefix: str):
    """Open headers/tabs ``prefix N`` one by one until a link with the wanted text is shown."""

    def solve(m: re.Match, els: list[Element], notes: Notes) -> str | None:
        want = m.group(1)
        link = next((e for e in els if e.role == "link" and e.text == want), None)
        if link is not None:
            return _click(link)
        opened = notes.setdefault("opened", set())
        for e in els:
            if e.role == role and e.text.startswith(prefix) and e.mark == "" and e.text not in opened:
                opened.add(e.text)
                return _click(e)
        return None

    return solve


def _expand_then_submit(m: re.Match, els: list[Element], notes: Notes) -> str | None:
    header = _first(els, "heading")
    if header is not None and header.mark != "expanded":
        return _click(header)
    return _click(_submit(els))


def _select_named(m: re.Match, els: list[Element], notes: Notes) -> str | None:
    """click-option (radios) and click-checkboxes share the phrasing ``Select X and click Submit.``"""
    return _radio(m, els, notes) if _first(els, "radio") is not None else _checkboxes(m, els, notes)


def _checkboxes(m: re.Match, els: list[Element], notes: Notes) -> str | None:
    wanted = set() if m.group(1) == "nothing" else {w.strip() for w in m.group(1).split(",")}
    for e in els:
        if e.role == "checkbox" and (e.text in wanted) != bool(e.checked):
            return _click(e)
    return _click(_submit(els))


def _radio(m: re.Match, els: list[Element], notes: Notes) -> str | None:
    e = _first(els, "radio", m.group(1))
    return _click(e) if e is not None and not e.checked else _click(_submit(els))


def _choose(m: re.Match, els: list[Element], notes: Notes) -> str | None:
    sel = _first(els, "select")
    if sel is not None and sel.text != m.group(1):
        return f"select[{sel.ref}][{m.group(1)}]"
    return _click(_submit(els))


def _focus_nth(m: re.Match, els: list[Element], notes: Notes) -> str | None:
    fields = [e for e in els if e.role == "textbox"]
    n = int(_ORDINAL.match(m.group(1)).group(1)) if m.group(1) else 1
    return _click(fields[n - 1]) if len(fields) >= n else None


def _enter(transform: Callable[[str, str], str] = lambda text, how: text):
    def solve(m: re.Match, els: list[Element], notes: Notes) -> str | None:
        fields = _fields(els)
        how = m.group(2) if m.re.groups > 1 else ""
        return _fill_then(els, [(f, transform(m.group(1), how)) for f in fields[:1]], _submit(els))

    return solve


def _password_twice(m: re.Match, els: list[Element], notes: Notes) -> str | None:
    return _fill_then(els, [(f, m.group(1)) for f in _fields(els)[:2]], _submit(els))


def _login(m: re.Match, els: list[Element], notes: Notes) -> str | None:
    user = next((e for e in els if e.role == "textbox"), None)
    pw = next((e for e in els if e.role == "password"), None)
    pairs = [(f, v) for f, v in ((user, m.group(1)), (pw, m.group(2))) if f is not None]
    return _fill_then(els, pairs, _submit(els))


def _guess(m: re.Match, els: list[Element], notes: Notes) -> str | None:
    lo, hi = notes.setdefault("range", [int(m.group(1)), int(m.group(2))])
    for e in els:
        if e.role == "text" and (hint := re.search(r"(lower|higher) than (-?\d+)", e.text)):
            n = int(hint.group(2))
            lo, hi = (lo, min(hi, n - 1)) if hint.group(1) == "lower" else (max(lo, n + 1), hi)
    notes["range"] = [lo, hi]
    field, guess = next((e for e in els if e.role == "textbox"), None), str((lo + hi) // 2)
    if field is None:
        return None
    if notes.get("typed") != guess or field.text != guess:
        notes["typed"] = guess
        return f"type[{field.ref}][{guess}]"
    notes["typed"] = None  # the next guess types again
    return _click(_submit(els))


def _arithmetic(m: re.Match, els: list[Element], notes: Notes) -> str | None:
    for e in els:
        if p := re.fullmatch(r"(-?\d+) ([-+x]) (-?\d+) =", e.text):
            a, op, b = int(p.group(1)), p.group(2), int(p.group(3))
            answer = a + b if op == "+" else a - b if op == "-" else a * b
            return _fill_then(els, [(f, str(answer)) for f in _fields(els)[:1]], _submit(els))
    return None


def _algebra(m: re.Match, els: list[Element], notes: Notes) -> str | None:
    for e in els:
        if p := re.fullmatch(r"x ([-+]) (\d+) = (-?\d+)", e.text):
            d, r = int(p.group(2)), int(p.group(3))
            answer = r - d if p.group(1) == "+" else r + d
        elif p := re.fullmatch(r"(\d+) ([-+]) x = (-?\d+)", e.text):
            d, r = int(p.group(1)), int(p.group(3))
            answer = r - d if p.group(2) == "+" else d - r
        else:
            continue
        return _fill_then(els, [(f, str(answer)) for f in _fields(els)[:1]], _submit(els))
    return None


def _odd_even(m: re.Match, els: list[Element], notes: Notes) -> str | None:
    for i, e in enumerate(els):
        if e.role == "text" and re.fullmatch(r"-?\d+", e.text) and 0 < i < len(els) - 1:
            odd, even = els[i - 1], els[i + 1]
            pick = odd if int(e.text) % 2 else even
            if pick.mark != "selected":
                return _click(pick)
    return _click(_submit(els))


def _nth_word(m: re.Match, els: list[Element], notes: Notes) -> str | None:
    n = int(_ORDINAL.match(m.group(1)).group(1))
    para = next((e for e in els if e.role == "text" and len(e.text.split()) >= n), None)
    if para is None:
        return None
    word = re.sub(r"[^a-zA-Z]", "", para.text.split()[n - 1])
    return _fill_then(els, [(f, word) for f in _fields(els)[:1]], _submit(els))


def _table_value(m: re.Match, els: list[Element], notes: Notes) -> str | None:
    texts = [e for e in els if e.role == "text"]
    for key, value in zip(texts, texts[1:], strict=False):
        if key.text == m.group(1):
            return _fill_then(els, [(f, value.text) for f in _fields(els)[:1]], _submit(els))
    return None


def _copy_paste(m: re.Match, els: list[Element], notes: Notes) -> str | None:
    src, dst = _first(els, "textarea"), _first(els, "textbox")
    return None if src is None or dst is None else _fill_then(els, [(dst, src.text)], _submit(els))


def _widget(m: re.Match, els: list[Element], notes: Notes) -> str | None:
    role = {"text": "textbox"}.get(m.group(1), m.group(1))
    return _click(_first(els, role))


def _case(text: str, how: str) -> str:
    return text.lower() if how == "lower" else text.upper()


@dataclass(frozen=True)
class _Solver:
    """A task phrasing (a regex on the instruction) and the rule that picks the next action."""

    pattern: re.Pattern
    solve: Callable[[re.Match, list[Element], Notes], str | None]


def _s(pattern: str, solve) -> _Solver:
    return _Solver(re.compile(pattern), solve)


SOLVERS: tuple[_Solver, ...] = (
    _s(r'^Click on the "(.+)" button\.$', _click_named(("button",))),
    _s(r'^Click on the link "(.+)"\.$', _click_named(("link",))),
    _s(r'^Close the dialog box by clicking the "x"\.$', lambda m, els, n: _click(_first(els, "button", "Close"))),
    _s(r'^Click the button in the dialog box labeled "(.+)"\.$', _click_named(("button",))),
    _s(r'^Click on a "(\w+)" widget\.$', _widget),
    _s(r"^Click on (Tab #\d+)\.$", _click_named(("link",))),
    _s(r'^Switch between the tabs to find and click on the link "(.+)"\.$', _find_behind("link", "Tab #")),
    _s(r"^Expand the section below and click submit\.$", _expand_then_submit),
    _s(r'^Expand the sections below, to find and click on the link "(.+)"\.$', _find_behind("heading", "Section #")),
    _s(r"^Click button (\w+), then click button (\w+)\.$", _click_sequence),
    _s(r"^Click button (\w+)\.$", _click_named(("button",))),
    _s(r"^Click the button\.$", lambda m, els, n: _click(_first(els, "button"))),
    _s(r"^Select (.+) from the list and click Submit\.$", _choose),
    _s(r"^Select (.+) and click Submit\.$", _select_named),
    _s(r"^Focus into the (?:(\d+(?:st|nd|rd|th)) input )?textbox\.$", _focus_nth),
    _s(r'^Enter "(.*)" into the text field and press Submit\.$', _enter()),
    _s(r'^Type "(.*)" in all (lower|upper) case letters in the text input and press Submit\.$', _enter(_case)),
    _s(r'^Enter the password "(.*)" into both text fields and press submit\.$', _password_twice),
    _s(r'^Enter the username "(.*)" and the password "(.*)" into the text fields and press login\.$', _login),
    _s(r"^Guess the number between (-?\d+)-(-?\d+) and press Submit\.", _guess),
    _s(r"^Solve the math problem and type your answer into the textbox\.", _arithmetic),
    _s(r"^Solve for x and type your answer into the textbox\.", _algebra),
    _s(r"^Mark the numbers below as odd or even and press submit when done\.$", _odd_even),
    _s(r"^Find the (\d+(?:st|nd|rd|th)) word in the paragraph", _nth_word),
    _s(r"^Enter the value of (.+) into the text field and press Submit\.$", _table_value),
    _s(r"^Copy the text in the textarea below, paste it into the textbox and press Submit\.$", _copy_paste),
)  # fmt: skip
"""Instruction phrasings the expert knows, tried in order (first match wins)."""


def solver_for(instruction: str) -> tuple[_Solver, re.Match] | None:
    """The first solver whose phrasing matches ``instruction``."""
    for s in SOLVERS:
        if m := s.pattern.search(instruction.strip()):
            return s, m
    return None


# ----------------------------------------------------------------------------------------- agents
class WebExpert(Agent):
    """Solves suite tasks from the instruction and the visible state alone (module docstring).

    When no solver matches, or its rule finds nothing to do, it clicks the first listed action.

    Args:
        seed: seed of the (rare) fallback choices.
    """

    def __init__(self, seed: int | None = None):
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.notes: Notes = {}

    def act(self, obs: Any, info: Any = None) -> str:
        found = solver_for(str(obs.instruction))
        action = found[0].solve(found[1], parse_state(str(obs.observation)), self.notes) if found else None
        if action is None:
            actions = [a for a in obs.available_actions if a.startswith("click[")] or list(
                obs.available_actions
            )
            action = actions[0] if actions else "click[1]"
        return action


def _fill(template: str, instruction: str, rng: random.Random) -> str:
    """A ``type[ref][<text>]`` template filled with a quoted phrase or a word of the instruction."""
    words = quoted(instruction) + re.findall(r"[\w#.-]+", instruction)
    return template.replace("<text>", rng.choice(words) if words else "text")


class WebRandomAgent(Agent):
    """Uniform over the listed actions; a ``type`` template gets a phrase or word of the instruction."""

    def __init__(self, seed: int | None = None):
        self.reset(seed)

    def act(self, obs: Any, info: Any = None) -> str:
        actions = list(obs.available_actions) or ["click[1]"]
        a = self.rng.choice(actions)
        return _fill(a, str(obs.instruction), self.rng) if a.endswith("[<text>]") else a


class WebNearMissAgent(WebExpert):
    """The expert committing one deliberate mistake per episode, so that most of its episodes fail.

    Before its mistake, each step is the mistake with probability ``miss_prob``: another listed action of
    the same kind (another click or option), or the same field typed with a mangled text. A mangled
    field stays mangled: where the expert would type into it again, the agent submits instead. Some
    episodes still succeed (a wrong tab opened first, a wrong click that the task ignores).

    Args:
        miss_prob: chance per step, until the mistake is made, that this step is the mistake.
        seed: seed of the episode's choices.
    """

    def __init__(self, miss_prob: float = 0.5, seed: int | None = None):
        if not 0.0 < miss_prob <= 1.0:
            raise ValueError(f"WebNearMissAgent.miss_prob={miss_prob}: give a probability in (0, 1]")
        self.miss_prob = miss_prob
        super().__init__(seed)

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.missed, self.mangled = False, set()

    def act(self, obs: Any, info: Any = None) -> str:
        action = super().act(obs, info)
        parsed = parse_action(action)
        if parsed is not None and parsed[0] == "type" and parsed[1] in self.mangled:
            return _click(_submit(parse_state(str(obs.observation)))) or action
        if self.missed or self.rng.random() >= self.miss_prob:
            return action
        self.missed = True
        if parsed is not None and parsed[0] == "type":
            self.mangled.add(parsed[1])
            text = parsed[2] or "x"
            return f"type[{parsed[1]}][{text[:-1] if len(text) > 1 else text + text}]"
        verb = action.split("[", 1)[0]
        others = [
            a for a in obs.available_actions if a.startswith(verb + "[") and a != action and "<" not in a
        ]
        return self.rng.choice(others) if others else action


def _factory(cls: type[Agent]) -> Callable[..., Agent]:
    """The ``(env, **kwargs) -> Agent`` factory the agent registries call (the web agents need no env)."""
    return lambda env=None, **kwargs: cls(**kwargs)


make_web_expert = _factory(WebExpert)
make_web_random = _factory(WebRandomAgent)
make_web_near_miss = _factory(WebNearMissAgent)

"""Rule-based web teacher: a rationale that claims only what the instruction and the two states show.

For each transition it says what the action did to which element (read from the state line of its
ref), checks the element's text or the typed text against the instruction (``named in the instruction:
yes/no``: as whole words, any case), and describes the next state as a difference of the two states (fields that now hold
another value, elements that appeared or disappeared), or that the task ended the episode with the
outcome the final state reports. It never states a hidden verdict (which element is the right one):
the reward follows from what the next state says. Example::

    Typing 'vina' into [2] (textbox). Checks: 'vina' named in the instruction: yes. [2] now holds
    "vina". The episode goes on; the reward is 0.

Privileged ``info`` (:meth:`dreamgym.envs.web.env.WebEnv.step_info`) is used for one thing: why an
invalid action was refused.
"""

from __future__ import annotations

import re
from typing import Any

from dreamgym.envs.web.page import ENDED_PREFIX, Element, parse_action, parse_state
from dreamgym.schema import Transition
from dreamgym.teachers.base import Teacher

__all__ = ["WebTeacher"]


def _named(text: str | None, instruction: str) -> str:
    """``yes`` if ``text`` occurs in ``instruction`` as whole words (any case), else ``no``."""
    found = bool(text) and re.search(rf"(?<!\w){re.escape(text)}(?!\w)", instruction, re.I) is not None
    return "yes" if found else "no"


def _short(text: str, n: int = 40) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


class WebTeacher(Teacher):
    """Explains web transitions (see module docstring)."""

    def explain(self, transition: Transition, info: dict[str, Any]) -> str:
        t, info = transition, info or {}
        if t.invalid or info.get("valid") is False:
            why = info.get("reason") or "the state does not admit it"
            text = f"'{t.action}' is invalid: {why}, so nothing happens and the reward is 0."
        else:
            text = f"{self._what(t)} {self._outcome(t)}"
        if t.truncated and not t.terminated:
            text += " The step limit is reached, so the episode ends unsuccessfully."
        return text

    @staticmethod
    def _what(t: Transition) -> str:
        parsed = parse_action(t.action)
        if parsed is None:
            return f"'{t.action}' is applied."
        verb, ref, arg = parsed
        el = next((e for e in parse_state(t.state) if e.ref == ref), None)
        role = el.role if el else "element"
        if verb == "click":
            label = (
                f" '{_short(el.text)}'"
                if el is not None and el.text and el.role not in ("textbox", "password")
                else ""
            )
            named = (
                f" Checks: its text named in the instruction: {_named(el.text, t.instruction)}."
                if label
                else ""
            )
            return f"Clicking [{ref}] ({role}{label}).{named}"
        what = (
            f"Typing '{_short(arg or '')}' into [{ref}] ({role})"
            if verb == "type"
            else (f"Choosing '{_short(arg or '')}' in [{ref}] (select)")
        )
        return (
            f"{what}. Checks: '{_short(arg or '')}' named in the instruction: {_named(arg, t.instruction)}."
        )

    @staticmethod
    def _outcome(t: Transition) -> str:
        if t.next_state.startswith(ENDED_PREFIX):
            ok = "success" in t.next_state
            return (f"The task then checks the page and ends the episode; it reports "
                    f"{'success, so the reward is 1' if ok else 'failure, so the reward is 0'}.")  # fmt: skip
        return (
            f"{_diff(parse_state(t.state), parse_state(t.next_state))} The episode goes on; the reward is 0."
        )


def _diff(before: list[Element], after: list[Element]) -> str:
    """What changed between two states, in a sentence or two."""
    old, new = {e.ref: e for e in before}, {e.ref: e for e in after}
    changed = [new[r] for r in new if r in old and new[r].line() != old[r].line()]
    appeared = [new[r] for r in new if r not in old]
    gone = [old[r] for r in old if r not in new]
    parts = []
    for e in changed[:3]:
        parts.append(f"[{e.ref}] now reads {_short(e.line().split(': ', 1)[1], 60)}.")
    if appeared:
        shown = ", ".join(f"[{e.ref}] {e.role} '{_short(e.text, 25)}'" for e in appeared[:3])
        more = f" and {len(appeared) - 3} more" if len(appeared) > 3 else ""
        parts.append(f"{len(appeared)} element(s) appear: {shown}{more}.")
    if gone:
        parts.append(
            f"{len(gone)} element(s) are no longer shown ({', '.join(f'[{e.ref}]' for e in gone[:4])})."
        )
    return " ".join(parts) or "The page does not change."

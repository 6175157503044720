"""The policy's text format, defined once: the prompt it reads and the action it writes.

Prompt (``history_window`` most recent steps; states shortened to ``history_state_chars``)::

    Instruction: <instruction>
    Previous steps:
    [1] state: <s_{t-2}>
    [1] action: <a_{t-2}>
    [2] state: <s_{t-1}>
    [2] action: <a_{t-1}>
    Current state:
    <s_t>
    Available actions:
    <a>
    <a>
    Actions naming the instruction's words:         (only with ``match_instruction``)
    <a>
    Not taken yet (go to ...):                       (only with ``untaken="go to "``)
    <a>
    Action:

Response (what the policy is trained to write, then the tokenizer's EOS token)::

    " <think>short reasoning</think> click[buy now]"     (think block optional)
    " click[buy now]"

:meth:`PolicyFormat.parse` inverts it: it drops an optional ``<think>...</think>`` block and an optional
``Action:`` prefix and keeps the first line. An unparseable response (empty after cleaning) is sent to
the env as the raw text; the env then flags it invalid and treats it as a no-op.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PolicyFormat", "ParsedAction", "FORMAT_FILE"]

FORMAT_FILE = "policy_format.json"
"""Written next to a warm-started policy, so RL and evaluation prompt it exactly as it was trained."""

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)
_WORD = re.compile(r"[a-z]+")
_DIGITS = re.compile(r"(\d+)")
_FUNCTION_WORDS = frozenset(
    "a an the in on at to of with from and or for into onto some it its is are be this that then".split()
)


@dataclass
class ParsedAction:
    """A parsed policy response.

    Attributes:
        action: the action text to send to the env.
        ok: a non-empty action was found (False: ``action`` is the raw response, likely invalid).
    """

    action: str
    ok: bool


class PolicyFormat:
    """Prompt builder and action parser of the policy.

    Args:
        history_window: how many previous (state, action) steps the prompt shows.
        max_state_chars: the current state is cut to this many characters (0: no limit).
        history_state_chars: previous states are cut to this many characters.
        max_actions: at most this many available actions are listed (0: no limit).
        think: the response starts with a ``<think>...</think>`` block (SFT targets include one).
        match_instruction: after the listed actions, list again those that share a word with the
            instruction (:meth:`matching`): a small model then sees the decision an episode hinges on
            (ALFWorld's ``take mug 1 from desk 1`` for "put a clean mug in ...") without having to match
            the goal's words against dozens of commands itself. Visible text only.
        untaken: a command prefix (ALFWorld's ``"go to "``): after the listed actions, list again those
            with this prefix that no earlier step of the episode took, in natural order ("cabinet 2"
            before "cabinet 10"; :meth:`not_taken`): the places not visited yet, a memory of the whole
            episode that a short history window does not hold. "" (default): no such list.
        untaken_limit: list at most this many of them, the first in that order (0: all).
        related: words that an instruction word also stands for in ``match_instruction`` (ALFWorld's
            ``{clean: [sinkbasin], heat: [microwave], hot: [microwave], cool: [fridge]}``: the appliance a
            transformation needs, named by no word of the instruction); default none.
        rank_matches: list the ``match_instruction`` actions by how many of those words they name, most
            first (ties in listed order): ALFWorld's ``clean mug 1 with sinkbasin 1`` (clean, mug,
            sinkbasin) before ``move mug 1 to sinkbasin 1`` (mug, sinkbasin).
        done_verbs: a command word that is an instruction word or a ``related`` key (ALFWorld's ``cool``),
            once an earlier command of the episode began with it, no longer counts in ``match_instruction``
            (nor its ``related`` words), and commands beginning with it leave that list: after
            ``cool apple 1 with fridge 1`` the list stops heading with the cooling (:meth:`done_words`); ranked
            ties go to the command naming more words that no earlier command named (:meth:`matching`).
    """

    def __init__(
        self,
        history_window: int = 2,
        max_state_chars: int = 1500,
        history_state_chars: int = 200,
        max_actions: int = 30,
        think: bool = False,
        match_instruction: bool = False,
        untaken: str = "",
        untaken_limit: int = 0,
        related: dict[str, list[str]] | None = None,
        rank_matches: bool = False,
        done_verbs: bool = False,
    ):
        if history_window < 0:
            raise ValueError(f"PolicyFormat.history_window must be >= 0, got {history_window}")
        self.history_window = history_window
        self.max_state_chars = max_state_chars
        self.history_state_chars = history_state_chars
        self.max_actions = max_actions
        self.think = think
        self.match_instruction = match_instruction
        self.untaken = untaken
        self.untaken_limit = untaken_limit
        self.related = {k: list(v) for k, v in (related or {}).items()}
        self.rank_matches = rank_matches
        self.done_verbs = done_verbs

    _FIELDS = (
        "history_window",
        "max_state_chars",
        "history_state_chars",
        "max_actions",
        "think",
        "match_instruction",
        "untaken",
        "untaken_limit",
        "related",
        "rank_matches",
        "done_verbs",
    )

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self._FIELDS}

    def __eq__(self, other) -> bool:
        return isinstance(other, PolicyFormat) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"PolicyFormat({', '.join(f'{k}={v!r}' for k, v in self.to_dict().items())})"

    def save(self, directory: str | os.PathLike) -> Path:
        """Write ``directory/policy_format.json``."""
        path = Path(directory) / FORMAT_FILE
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return path

    @classmethod
    def load(cls, directory: str | os.PathLike) -> PolicyFormat | None:
        """The format saved in ``directory`` (None when there is no ``policy_format.json``)."""
        path = Path(directory) / FORMAT_FILE
        if not path.is_file():
            return None
        fields = json.loads(path.read_text())
        unknown = sorted(set(fields) - set(cls._FIELDS))
        if unknown:
            raise ValueError(
                f"{path}: unknown field(s) {unknown} (written by another version of dreamgym); this version knows "
                f"{list(cls._FIELDS)}: remove the field if its value is the old default, else retrain the policy"
            )
        return cls(**fields)

    def prompt(
        self,
        instruction: str,
        observation: str,
        available_actions: list[str],
        history: list[tuple[str, str]] | None = None,
    ) -> str:
        """The prompt for state ``observation``; ``history`` lists earlier ``(state, action)`` pairs."""
        lines = [f"Instruction: {instruction}"]
        recent = (history or [])[-self.history_window :] if self.history_window else []
        if recent:
            lines.append("Previous steps:")
            for i, (state, action) in enumerate(recent, start=1):
                lines.append(f"[{i}] state: {_cut(state, self.history_state_chars)}")
                lines.append(f"[{i}] action: {action}")
        lines.append("Current state:")
        lines.append(_cut(observation, self.max_state_chars))
        lines.append("Available actions:")
        listed = self.listed(available_actions)
        lines.extend(listed)
        if self.match_instruction:
            lines.append("Actions naming the instruction's words:")
            taken = [a for _, a in history or []] if self.done_verbs else None
            lines.extend(self.matching(instruction, listed, self.related, self.rank_matches, taken))
        if self.untaken:
            lines.append(f"Not taken yet ({self.untaken.strip()} ...):")
            fresh = self.not_taken(self.untaken, listed, history or [])
            lines.extend(fresh[: self.untaken_limit] if self.untaken_limit else fresh)
        lines.append("Action:")
        return "\n".join(lines)

    def listed(self, available_actions: list[str]) -> list[str]:
        """The actions the prompt lists: the first ``max_actions`` (constrained decoding uses the same)."""
        acts = list(available_actions)
        return acts[: self.max_actions] if self.max_actions else acts

    @staticmethod
    def matching(
        instruction: str,
        actions: list[str],
        related: dict[str, list[str]] | None = None,
        rank: bool = False,
        taken: list[str] | None = None,
    ) -> list[str]:
        """The ``actions`` (in order) that share a word with ``instruction``, function words aside
        (``"take mug 1 from desk 1"`` for "put a clean mug in coffeemachine"), or a word ``related`` gives
        one of its words (``{"clean": ["sinkbasin"]}``: ``"go to sinkbasin 1"`` too). ``rank``: ordered by
        how many of those words each names, most first (a stable sort: ties keep their order).

        ``taken`` (the episode's earlier commands): the :meth:`done_words` no longer count, nor an
        instruction word whose ``related`` words are all done, and actions beginning with a done word are
        left out; ranked ties go to the action naming more words no taken command named (after
        ``cool apple 1 with fridge 1``: ``go to countertop 1`` before ``examine apple 1``)."""
        related = related or {}
        done = PolicyFormat.done_words(instruction, taken, related) if taken else set()
        words = _goal_words(instruction)
        words = {w for w in words if w not in done and not (related.get(w) and set(related[w]) <= done)}
        words |= {r for w in words for r in related.get(w, [])} - done
        named = {w for a in taken or [] for w in _WORD.findall(a.lower())}
        matches = []
        for a in actions:
            if done and a.split(" ", 1)[0].lower() in done:
                continue
            shared = words & set(_WORD.findall(a.lower()))
            if shared:
                matches.append((a, len(shared), len(shared - named)))
        if rank:
            matches.sort(key=lambda m: (-m[1], -m[2]))
        return [a for a, _, _ in matches]

    @staticmethod
    def done_words(
        instruction: str, taken: list[str], related: dict[str, list[str]] | None = None
    ) -> set[str]:
        """The first words of the ``taken`` commands that are instruction words or ``related`` keys, with
        the words ``related`` gives them: ``{"cool", "fridge"}`` once ``cool apple 1 with fridge 1`` was
        taken for "put a cool apple in countertop" (``related={"cool": ["fridge"]}``)."""
        related = related or {}
        words = _goal_words(instruction)
        verbs = {a.split(" ", 1)[0].lower() for a in taken if a.strip()}
        verbs = {v for v in verbs if v in words or v in related}
        return verbs | {r for v in verbs for r in related.get(v, [])}

    @staticmethod
    def not_taken(prefix: str, actions: list[str], history: list[tuple[str, str]]) -> list[str]:
        """The ``actions`` starting with ``prefix`` that no step of ``history`` took, in natural order
        (runs of digits compared as numbers)."""
        taken = {a for _, a in history}
        fresh = [a for a in actions if a.startswith(prefix) and a not in taken]
        return sorted(fresh, key=lambda a: [int(p) if p.isdigit() else p for p in _DIGITS.split(a)])

    def target(self, action: str, reasoning: str | None = None) -> str:
        """The response text for ``action`` (without EOS); a think block only if ``self.think``."""
        if self.think and reasoning:
            return f" <think>{reasoning.strip()}</think> {action.strip()}"
        return f" {action.strip()}"

    def parse(self, text: str) -> ParsedAction:
        """Extract the action from a generated response (see module docstring)."""
        cleaned = _THINK.sub("", text).strip()
        if cleaned.lower().startswith("action:"):
            cleaned = cleaned[len("action:") :].strip()
        first = cleaned.split("\n", 1)[0].strip()
        if not first:
            return ParsedAction(action=text.strip(), ok=False)
        return ParsedAction(action=first, ok=True)


def _goal_words(instruction: str) -> set[str]:
    """The instruction's words that can name a goal: lower-cased, function words aside."""
    return set(_WORD.findall(instruction.lower())) - _FUNCTION_WORDS


def _cut(text: str, limit: int) -> str:
    return text if not limit or len(text) <= limit else text[:limit] + " ..."

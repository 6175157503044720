"""The abstract web state and its actions, as pure functions of text (no browser needed).

A page is a list of :class:`Element` (what :data:`EXTRACT_JS` reads from the live DOM), rendered one
element per line in the WebArena style ``[ref] role: text``::

    [1] label: Username
    [2] textbox: "vina"
    [3] label: Password
    [4] password: ""
    [5] button: Login
    [6] checkbox: USa (checked)
    [7] select: Aurora | options: Aurora ; Bobine ; Jyoti

Roles: ``button``, ``link``, ``heading``, ``checkbox``, ``radio``, ``textbox``, ``password``,
``textarea``, ``select`` (the clickable ones) and ``text``, ``label`` (read only). Field values are
quoted (``""`` is an empty field); checkboxes and radios say ``(checked)`` or ``(unchecked)``; a focused
field ends with ``(focused)``; a selected button or active tab with ``(selected)`` and an open section's
header with ``(expanded)``. Refs are numbered in document order when an element first appears in an
episode and keep their number for the rest of the episode.

Actions (anything else is an invalid no-op):

- ``click[ref]``: click a clickable element;
- ``type[ref][text]``: replace the content of a ``textbox`` / ``password`` / ``textarea`` with ``text``
  (real key presses; no Enter);
- ``select[ref][option]``: choose the option with that exact text of a ``select``.

The same rule lists the actions of a state (:func:`available_actions`) for the real env and for states
the experience model writes (:func:`infer_available_actions`), so both agree by construction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "EXTRACT_JS",
    "Element",
    "CLICKABLE",
    "FIELDS",
    "render_state",
    "parse_state",
    "parse_action",
    "check_action",
    "available_actions",
    "infer_available_actions",
    "quoted",
    "ended_state",
    "ENDED_PREFIX",
]

CLICKABLE = frozenset(
    {"button", "link", "heading", "checkbox", "radio", "textbox", "password", "textarea", "select"}
)
"""Roles that ``click[ref]`` accepts."""
FIELDS = frozenset({"textbox", "password", "textarea"})
"""Roles that ``type[ref][text]`` accepts."""
ENDED_PREFIX = "[episode over]"
"""First words of the state after the task has ended the episode (:func:`ended_state`)."""

EXTRACT_JS = r"""
return (function () {
  var SKIP = {'reward-display': 1, 'sync-task-cover': 1, 'click-canvas': 1, 'query': 1};
  if (window.__dgNext === undefined) window.__dgNext = 1;
  var out = [];
  function visible(el) {
    var r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) return false;
    var s = window.getComputedStyle(el);
    return s.visibility !== 'hidden' && s.display !== 'none' && s.opacity !== '0';
  }
  function ref(el) {
    if (el.dataset.dgRef === undefined) el.dataset.dgRef = String(window.__dgNext++);
    return +el.dataset.dgRef;
  }
  function clean(t) { return (t || '').replace(/\s+/g, ' ').trim(); }
  function ownText(el) {
    var parts = [];
    el.childNodes.forEach(function (c) { if (c.nodeType === 3) parts.push(c.data); });
    return clean(parts.join(' '));
  }
  function inputLabel(el) {
    var lab = el.closest('label');
    if (lab) return clean(lab.textContent);
    if (el.nextSibling && el.nextSibling.nodeType === 3) return clean(el.nextSibling.data);
    return '';
  }
  function mark(el) {
    if (el.getAttribute('aria-expanded') === 'true') return 'expanded';
    var li = el.closest('li');
    var cls = ' ' + (el.className || '') + ' ' + ((li && li.className) || '') + ' ';
    if (/ (selected|ui-tabs-active) /.test(cls)) return 'selected';
    return '';
  }
  function plain(el) {  // only inline, unclickable parts inside (e.g. a <span> number in a sentence)
    if (el.querySelector('input, button, a, select, textarea, label')) return false;
    var all = el.querySelectorAll('*');
    for (var i = 0; i < all.length; i++) {
      var st = window.getComputedStyle(all[i]);
      if (st.cursor === 'pointer' || st.display !== 'inline') return false;
    }
    return window.getComputedStyle(el).cursor !== 'pointer' && !/^H[1-6]$/.test(el.tagName);
  }
  function emit(el, role, text, extra) {
    var d = {ref: ref(el), role: role, text: text, checked: null, focused: document.activeElement === el,
             options: null, mark: mark(el)};
    for (var k in extra || {}) d[k] = extra[k];
    out.push(d);
  }
  function walk(el) {
    if (el.nodeType !== 1 || SKIP[el.id] || !visible(el)) return;
    var tag = el.tagName, type = (el.type || '').toLowerCase();
    if (tag === 'INPUT') {
      if (type === 'checkbox' || type === 'radio') emit(el, type, inputLabel(el), {checked: el.checked});
      else if (type === 'button' || type === 'submit' || type === 'reset') emit(el, 'button', clean(el.value));
      else if (type !== 'hidden') emit(el, type === 'password' ? 'password' : 'textbox', el.value);
      return;
    }
    if (tag === 'TEXTAREA') { emit(el, 'textarea', el.value); return; }
    if (tag === 'SELECT') {
      var opts = Array.prototype.map.call(el.options, function (o) { return clean(o.text); });
      emit(el, 'select', el.selectedIndex >= 0 ? opts[el.selectedIndex] : '', {options: opts});
      return;
    }
    if (tag === 'BUTTON') { emit(el, 'button', clean(el.textContent)); return; }
    if (tag === 'A') { emit(el, 'link', clean(el.textContent)); return; }
    if (!(tag === 'LABEL' && el.querySelector('input'))) {
      if (el.children.length && ownText(el) && plain(el)) {
        emit(el, 'text', clean(el.textContent));  // a sentence with inline spans: one line
        return;
      }
      var text = ownText(el);
      if (text) {
        var role = 'text';
        if (/^H[1-6]$/.test(tag)) role = 'heading';
        else if (tag === 'LABEL') role = 'label';
        else if (window.getComputedStyle(el).cursor === 'pointer') role = 'link';
        emit(el, role, text);
      }
    }
    el.childNodes.forEach(function (c) { if (c.nodeType === 1) walk(c); });
  }
  walk(document.body);
  return out;
})();
"""
"""Reads the visible elements of a MiniWoB page (document order) as dicts of :class:`Element` fields."""


@dataclass
class Element:
    """One visible element of the abstract state.

    Attributes:
        ref: the element's number in this episode.
        role: see the module docstring.
        text: the visible text; for fields their value; for a select the chosen option.
        checked: checkbox / radio state (``None`` for other roles).
        focused: the element has the keyboard focus.
        options: a select's option texts (``None`` for other roles).
        mark: ``"selected"`` (a selected button / active tab), ``"expanded"`` (an open section) or ``""``.
    """

    ref: int
    role: str
    text: str
    checked: bool | None = None
    focused: bool = False
    options: list[str] | None = field(default=None)
    mark: str = ""

    def line(self, max_chars: int = 300) -> str:
        """The element's state line ``[ref] role: text``."""
        text = self.text[:max_chars].replace("\n", " ")
        if self.role in FIELDS:
            text = f'"{text}"'
        if self.role in ("checkbox", "radio"):
            text = f"{text} ({'checked' if self.checked else 'unchecked'})"
        if self.role == "select":
            text = f"{text} | options: {' ; '.join(self.options or [])}"
        if self.focused and self.role in FIELDS:
            text += " (focused)"
        if self.mark and self.role not in FIELDS and self.role not in ("checkbox", "radio", "select"):
            text += f" ({self.mark})"
        return f"[{self.ref}] {self.role}: {text}"


def render_state(elements: list[Element]) -> str:
    """The abstract state: one line per element (``(empty page)`` when nothing is visible)."""
    return "\n".join(e.line() for e in elements) or "(empty page)"


def ended_state(success: bool) -> str:
    """The state after the task ended the episode (the page says whether its check passed)."""
    return f"{ENDED_PREFIX} the task reports {'success' if success else 'failure'}"


_LINE = re.compile(r"^\[(\d+)\] (\w+): ?(.*)$")
_MARK = re.compile(r" \((checked|unchecked)\)$")
_STATE_MARK = re.compile(r" \((selected|expanded)\)$")


def parse_state(state: str) -> list[Element]:
    """The elements of a rendered state (lines that do not parse are skipped); never raises."""
    out = []
    for raw in (state or "").splitlines():
        m = _LINE.match(raw.strip())
        if not m:
            continue
        ref, role, text = int(m.group(1)), m.group(2), m.group(3)
        el = Element(ref, role, text)
        if role in FIELDS:
            if text.endswith(" (focused)"):
                el.focused, text = True, text[: -len(" (focused)")]
            el.text = text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text
        elif role in ("checkbox", "radio"):
            mark = _MARK.search(text)
            el.checked = bool(mark) and mark.group(1) == "checked"
            el.text = text[: mark.start()] if mark else text
        elif role == "select":
            chosen, _, opts = text.partition(" | options: ")
            el.text, el.options = chosen, [o.strip() for o in opts.split(" ; ")] if opts else []
        elif mark := _STATE_MARK.search(text):
            el.text, el.mark = text[: mark.start()], mark.group(1)
        out.append(el)
    return out


_ACTION = re.compile(r"^(click|type|select)\[(\d+)\](?:\[(.*)\])?$", re.S)


def parse_action(action: str) -> tuple[str, int, str | None] | None:
    """``(verb, ref, argument)`` of an action string, or ``None`` if it is not ``click``/``type``/``select``."""
    m = _ACTION.match((action or "").strip())
    if not m:
        return None
    verb, ref, arg = m.group(1), int(m.group(2)), m.group(3)
    if (verb == "click") != (arg is None):
        return None
    return verb, ref, arg


def check_action(action: str, elements: list[Element]) -> tuple[str, int, str | None] | str:
    """The parsed action if ``elements`` admit it, else the reason it is invalid (a sentence part)."""
    parsed = parse_action(action)
    if parsed is None:
        return "it is not of the form click[ref], type[ref][text] or select[ref][option]"
    verb, ref, arg = parsed
    el = next((e for e in elements if e.ref == ref), None)
    if el is None:
        return f"no element [{ref}] is shown"
    if verb == "click" and el.role not in CLICKABLE:
        return f"[{ref}] is a {el.role}, which cannot be clicked"
    if verb == "type" and el.role not in FIELDS:
        return f"[{ref}] is a {el.role}, not a text field"
    if verb == "select":
        if el.role != "select":
            return f"[{ref}] is a {el.role}, not a select"
        if arg not in (el.options or []):
            return f"'{arg}' is not an option of [{ref}]"
    return parsed


def available_actions(elements: list[Element]) -> list[str]:
    """The actions of a state: a click per clickable element, a ``type[ref][<text>]`` template per text
    field and one ``select[ref][option]`` per option of each select, in element order."""
    out = []
    for e in elements:
        if e.role in CLICKABLE and e.role != "select":
            out.append(f"click[{e.ref}]")
        if e.role in FIELDS:
            out.append(f"type[{e.ref}][<text>]")
        if e.role == "select":
            out += [f"select[{e.ref}][{o}]" for o in e.options or []]
    return out


def infer_available_actions(state: str) -> list[str]:
    """The actions of a rendered state (none after the episode is over); never raises."""
    if (state or "").startswith(ENDED_PREFIX):
        return []
    return available_actions(parse_state(state))


_QUOTED = re.compile(r'"([^"]*)"')


def quoted(instruction: str) -> list[str]:
    """The double-quoted phrases of an instruction, in order."""
    return _QUOTED.findall(instruction or "")

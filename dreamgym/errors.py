"""The command line's error boundary: the project's own input errors as one message, not a traceback.

Every constructor, loader and ``step`` of the package validates its input and raises a built-in error
(``ValueError``, ``FileNotFoundError``, ...) whose message names the field, the value and the fix. At the
command line such an error is printed as one ``error: ...`` line with exit code 2; a traceback is
shown only for errors raised outside the package (a bug, or a library's own failure), or always with
``--debug`` / ``DREAMGYM_DEBUG=1``. A config key that does not exist gets a "did you mean".
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = [
    "USER_ERRORS",
    "Interrupted",
    "user_message",
    "did_you_mean",
    "constructor_parameters",
    "run_guarded",
]


class Interrupted(Exception):
    """A run stopped by a signal (SIGTERM, SIGINT) before it finished: the command line prints
    ``interrupted: <message>`` (what was stopped and how to resume) and exits with ``code``
    (128 + the signal's number, as a shell reports a process killed by it), never 0."""

    def __init__(self, message: str, code: int = 143, signal_name: str = "SIGTERM", resumable: bool = True):
        super().__init__(message)
        self.code, self.signal_name = code, signal_name
        self.resumable = resumable
        """Whether a rerun continues from a saved checkpoint (False: what was stopped starts again)."""


USER_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    TypeError,
    RuntimeError,
    KeyError,
    FileNotFoundError,
    FileExistsError,
    NotADirectoryError,
    IsADirectoryError,
    PermissionError,
    ConnectionError,
)
"""Error types that count as bad input when the package itself raised them."""

_ROOTS = tuple(
    str(Path(__file__).resolve().parents[1] / name) for name in ("dreamgym", "models", "datamodules")
)
_CLASS_PATH = re.compile(r"class_path '([\w.]+)'")
_NOT_ACCEPTED = re.compile(r"Option '(\w+)' is not accepted")
_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.+)", re.IGNORECASE)
_NO_KEY = re.compile(r'Key "([\w.]+)" is not expected|No action for key "([\w.]+)"')
_GROUP_OPTION = re.compile(r"Group '([\w.]+)' does not accept option '([\w.]+)'")  # a YAML's unknown key


def _raised_by_package(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by this package's own code (the innermost frame is ours)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and str(Path(frames[-1].filename).resolve()).startswith(_ROOTS)


def _chain(exc: BaseException) -> list[BaseException]:
    out, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def user_message(exc: BaseException) -> str | None:
    """The one-line message of an input error raised by the package (anywhere in ``exc``'s chain of
    causes), or None when ``exc`` is something else (then the caller shows the traceback)."""
    for e in _chain(exc):
        if type(e).__name__ == "MisconfigurationException":  # Lightning's: a trainer setting, by definition
            return f"trainer setting: {e}"
        if isinstance(e, USER_ERRORS) and _raised_by_package(e):
            text = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
            return text if type(e) is ValueError else f"{type(e).__name__}: {text}"
    return None


def constructor_parameters(cls: type) -> list[str]:
    """The keyword arguments ``cls(...)`` accepts: its and its bases' ``__init__`` parameters."""
    names = []
    for klass in inspect.getmro(cls):
        if "__init__" in vars(klass):
            names += [p for p in inspect.signature(klass.__init__).parameters if p not in names]
    return [n for n in names if n not in ("self", "args", "kwargs")]


def _parameters(class_path: str) -> list[str]:
    try:
        module, _, name = class_path.rpartition(".")
        return constructor_parameters(getattr(importlib.import_module(module), name))
    except Exception:  # noqa: BLE001  (suggestions are best effort)
        return []


def did_you_mean(message: str, known: Iterable[str] = ()) -> list[str]:
    """Hints for the unknown keys a jsonargparse error ``message`` names: ``"'x' -> did you mean 'y'?"``.

    Options of a ``class_path`` are matched against that class's constructor arguments; top-level keys
    against ``known`` (the parser's option names)."""
    hints = []
    paths = _CLASS_PATH.findall(message)
    for i, bad in enumerate(_NOT_ACCEPTED.findall(message)):
        params = _parameters(paths[min(i, len(paths) - 1)]) if paths else []
        close = difflib.get_close_matches(bad, params, n=2, cutoff=0.6)
        if close:
            hints.append(f"'{bad}': did you mean {' or '.join(repr(c) for c in close)}?")
    known = list(known)
    bad_keys = [a or b for a, b in _NO_KEY.findall(message)]
    bad_keys += [f"{group}.{key}" for group, key in _GROUP_OPTION.findall(message)]
    for m in _UNRECOGNIZED.findall(message):
        bad_keys += [tok.split("=")[0].lstrip("-") for tok in m.split() if tok.startswith("--")]
    for bad in bad_keys:
        close = difflib.get_close_matches(bad, known, n=2, cutoff=0.6)
        if close:
            hints.append(f"'{bad}': did you mean {' or '.join(repr('--' + c) for c in close)}?")
    return hints


def _debug(argv: list[str]) -> bool:
    return "--debug" in argv or os.environ.get("DREAMGYM_DEBUG", "") not in ("", "0", "false")


def run_guarded(main: Callable[[list[str]], object], argv: list[str] | None = None) -> int:
    """Run ``main(argv)``; an input error raised by the package prints ``error: <message>`` to stderr
    and returns 2 (``--debug`` or ``DREAMGYM_DEBUG=1``: the full traceback instead)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = _debug(argv)
    argv = [a for a in argv if a != "--debug"]
    try:
        main(argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Interrupted as exc:
        print(f"interrupted: {exc}", file=sys.stderr)
        return exc.code
    except Exception as exc:  # noqa: BLE001  (the boundary: everything else is re-raised below)
        message = None if debug else user_message(exc)
        if message is None:
            raise
        print(f"error: {message}\n(run with --debug or DREAMGYM_DEBUG=1 for the traceback)", file=sys.stderr)
        return 2
    return 0

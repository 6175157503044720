"""One headless Chromium on MiniWoB++'s HTML tasks, driven directly through selenium.

Why not ``miniwob``'s gymnasium env: it binds one task type per browser, takes a screenshot on every
observation and builds its DOM tree in Python; here one browser per slot plays any task type (it loads
the task's page when the type changes), one ``execute_script`` reads the visible elements
(:data:`.page.EXTRACT_JS`), and episodes are seeded (``Math.seedrandom(seed)`` before MiniWoB's
``genProblem``), so an episode depends only on (task type, seed) and replays exactly. The ``miniwob``
package supplies the task pages and their JavaScript core (``core.startEpisodeReal``, the reward globals).

Per page, ``core.EPISODE_MAX_TIME`` is raised to an hour, so MiniWoB's 10 s time-out never ends an
episode and its time-decayed reward is not used: the outcome is ``WOB_RAW_REWARD_GLOBAL > 0``.

Network rule: Chromium starts with ``--proxy-server=127.0.0.1:9`` (nothing listens there) and
``--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1`` (host names and IP
literals alike resolve to nothing, except loopback), so every request to a non-loopback
address fails; the task pages are ``file://`` URLs and need no network.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["Browser", "BrowserMissing", "NETWORK_RULE", "find_binaries", "miniwob_html_dir"]

NETWORK_RULE = (
    "--proxy-server=127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1",
)
"""Chromium flags that keep the browser on loopback (see module docstring)."""

_FLAGS = ("--headless=new", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage",
          "--disable-extensions", "--no-first-run", "--mute-audio", "--window-size=400,600")  # fmt: skip
_BINARIES = {
    "chrome": (
        "DREAMGYM_CHROME_BINARY",
        "MINIWOB_CHROME_BINARY",
        ("chromium", "chromium-browser", "google-chrome"),
    ),
    "driver": ("DREAMGYM_CHROMEDRIVER", "MINIWOB_CHROMEDRIVER", ("chromedriver",)),
}
"""Binary -> (our variable, miniwob's variable, names looked up on PATH)."""
_INSTALL = (
    "install Chromium and its driver with `apt-get install -y chromium chromium-driver` (Debian; Ubuntu: "
    "chromium-browser chromium-chromedriver), or point DREAMGYM_CHROME_BINARY and DREAMGYM_CHROMEDRIVER "
    "at a Chromium and its matching chromedriver"
)


class BrowserMissing(ImportError, RuntimeError):
    """Chromium, chromedriver or the ``miniwob``/``selenium`` packages are not installed.

    An ``ImportError`` (a missing optional dependency: tests skip the web env) and a ``RuntimeError``
    (the command line prints it as one line).
    """


def find_binaries() -> tuple[str, str]:
    """Paths of Chromium and chromedriver: ``DREAMGYM_CHROME_BINARY`` / ``DREAMGYM_CHROMEDRIVER`` (or
    miniwob's ``MINIWOB_CHROME_BINARY`` / ``MINIWOB_CHROMEDRIVER``), else the first found on ``PATH``.

    Raises:
        BrowserMissing: naming what is missing and the apt packages to install.
    """
    found, missing = {}, []
    for key, (var, miniwob_var, names) in _BINARIES.items():
        var = var if os.environ.get(var) or not os.environ.get(miniwob_var) else miniwob_var
        path = os.environ.get(var) or next((p for n in names if (p := shutil.which(n))), None)
        if path and not os.access(path, os.X_OK):
            raise BrowserMissing(f"{var}={path!r} is not an executable file; fix the variable or {_INSTALL}")
        found[key] = path
        if not path:
            missing.append(names[0])
    if missing:
        raise BrowserMissing(f"the web env needs a headless browser but {' and '.join(missing)} "
                             f"{'is' if len(missing) == 1 else 'are'} not on PATH: {_INSTALL}")  # fmt: skip
    return found["chrome"], found["driver"]


def miniwob_html_dir() -> Path:
    """The folder of MiniWoB++'s task pages inside the installed ``miniwob`` package.

    Raises:
        BrowserMissing: if ``miniwob`` is not installed.
    """
    try:
        import miniwob
    except ImportError:
        raise BrowserMissing(
            "the web env needs the `miniwob` package (MiniWoB++'s task pages): pip install 'dreamgym[web]'"
        ) from None
    return Path(miniwob.__file__).parent / "html" / "miniwob"


class Browser:
    """A headless Chromium showing one MiniWoB task page at a time.

    Args:
        html_dir: MiniWoB's task pages (default: those of the installed ``miniwob`` package).
        extra_flags: more Chromium flags (tests); the :data:`NETWORK_RULE` flags are always set.
    """

    def __init__(self, html_dir: Path | None = None, extra_flags: tuple[str, ...] = ()):
        chrome, driver = find_binaries()
        self.html_dir = Path(html_dir) if html_dir is not None else miniwob_html_dir()
        try:
            from selenium import webdriver
            from selenium.webdriver.chrome.service import Service
        except ImportError:
            raise BrowserMissing("the web env needs `selenium`: pip install 'dreamgym[web]'") from None
        options = webdriver.ChromeOptions()
        for flag in (*_FLAGS, *NETWORK_RULE, *extra_flags):
            options.add_argument(flag)
        options.binary_location = chrome
        self.driver = webdriver.Chrome(service=Service(executable_path=driver), options=options)
        self.driver.set_page_load_timeout(30)
        self.task_type: str | None = None

    def load(self, task_type: str) -> None:
        """Show ``task_type``'s page (a no-op if it is already shown)."""
        if task_type == self.task_type:
            return
        page = self.html_dir / f"{task_type}.html"
        if not page.is_file():
            raise ValueError(f"task type {task_type!r}: MiniWoB has no page {page}")
        self.driver.get(page.as_uri())
        self.driver.execute_script("core.EPISODE_MAX_TIME = 3600 * 1000;")
        self.task_type = task_type

    def start(self, task_type: str, seed: int) -> str:
        """Start a seeded episode of ``task_type``; returns the task's utterance (the instruction)."""
        self.load(task_type)
        return self.driver.execute_script(
            "core.EPISODE_MAX_TIME = 3600 * 1000;"
            "if (core.EP_TIMER !== null) { clearTimeout(core.EP_TIMER); core.EP_TIMER = null; }"
            "document.querySelectorAll('[data-dg-ref]').forEach(function (e) { delete e.dataset.dgRef; });"
            f"window.__dgNext = 1; Math.seedrandom({int(seed)}); core.startEpisodeReal();"
            "var u = core.getUtterance(); return typeof u === 'string' ? u : u.utterance;"
        )

    def elements(self) -> list[dict]:
        """The visible elements (:data:`.page.EXTRACT_JS`)."""
        from dreamgym.envs.web.page import EXTRACT_JS

        return self.driver.execute_script(EXTRACT_JS)

    def outcome(self) -> tuple[bool, float]:
        """``(done, raw reward)`` of the current episode (MiniWoB's globals; no time decay)."""
        done, raw = self.driver.execute_script("return [WOB_DONE_GLOBAL, WOB_RAW_REWARD_GLOBAL];")
        return bool(done), float(raw or 0.0)

    def _find(self, ref: int):
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, f'[data-dg-ref="{int(ref)}"]')

    def click(self, ref: int) -> None:
        """Mouse down, up and click on element ``ref`` (as MiniWoB's own element click), then focus it."""
        self.driver.execute_script(
            "var el = arguments[0];"
            "['mousedown', 'mouseup'].forEach(function (t) {"
            "  el.dispatchEvent(new MouseEvent(t, {bubbles: true, cancelable: true, view: window})); });"
            "if (el instanceof SVGElement) el.dispatchEvent(new MouseEvent('click', {bubbles: true}));"
            "else { el.click(); if (el.focus) el.focus(); }",
            self._find(ref),
        )

    def type(self, ref: int, text: str) -> None:
        """Clear field ``ref`` and type ``text`` into it with real key presses."""
        el = self._find(ref)
        self.driver.execute_script("arguments[0].focus(); arguments[0].value = '';", el)
        if text:
            el.send_keys(text)

    def select(self, ref: int, option: str) -> None:
        """Choose the option with text ``option`` of select ``ref`` and fire its change event."""
        self.driver.execute_script(
            "var el = arguments[0], want = arguments[1];"
            "for (var i = 0; i < el.options.length; i++) {"
            "  if (el.options[i].text.replace(/\\s+/g, ' ').trim() === want) { el.selectedIndex = i; break; } }"
            "el.dispatchEvent(new Event('input', {bubbles: true}));"
            "el.dispatchEvent(new Event('change', {bubbles: true}));",
            self._find(ref),
            option,
        )

    def close(self) -> None:
        """Quit Chromium (safe to call twice)."""
        driver, self.driver = getattr(self, "driver", None), None
        if driver is not None:
            try:
                driver.quit()
            except Exception:  # noqa: BLE001  (a browser that already died is closed)
                pass

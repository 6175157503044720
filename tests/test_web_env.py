"""The web env (MiniWoB++ in headless Chromium): experts win, invalid actions are no-ops, episodes replay,
the browser stays on loopback, and the text rules (state, actions) agree with the live page.

Tests that need the browser are skipped, with one reason, when Chromium, chromedriver or ``miniwob`` are
missing (``.ci/run`` installs them; by hand: ``apt-get install -y chromium chromium-driver`` and
``pip install -e '.[web]'``). The registry test (``tests/test_env_registry.py``) runs ``check_env_specs``.
"""

from __future__ import annotations

import http.server
import socket
import threading

import pytest
import torch
from tensordict import TensorDict

from dreamgym.envs.base import as_text_list
from dreamgym.envs.web.browser import BrowserMissing, find_binaries, miniwob_html_dir
from dreamgym.envs.web.page import (
    Element,
    available_actions,
    check_action,
    infer_available_actions,
    parse_state,
    render_state,
)


def _browser_missing() -> str | None:
    try:
        find_binaries()
        miniwob_html_dir()
        import selenium  # noqa: F401
    except (BrowserMissing, ImportError) as e:
        return str(e)
    return None


MISSING = _browser_missing()
needs_browser = pytest.mark.skipif(MISSING is not None, reason=f"web env: {MISSING}")
TYPES = ("click-button", "login-user", "choose-list", "click-tab-2", "guess-number", "click-test-2")
"""A handful of task types with all three verbs, multi-step search and one held-out type."""


@pytest.fixture(scope="module")
def env():
    from dreamgym.envs.web.env import WebEnv

    e = WebEnv(batch_size=[1], split="test", task_types=TYPES, test_seeds=1, max_steps=10)
    yield e
    e.close()


def _reset(env, task: int):
    return env.reset(TensorDict({"task_index": torch.tensor([[task]])}, batch_size=[1]))


def _step(env, action: str):
    return env.step(TensorDict({"action": [action]}, batch_size=[1]))["next"]


# ------------------------------------------------------------------------------ pure text rules
def test_state_round_trips_and_lists_its_actions():
    els = [
        Element(1, "label", "Username"),
        Element(2, "textbox", "vi na", focused=True),
        Element(3, "checkbox", "USa", checked=True),
        Element(4, "select", "Aurora", options=["Aurora", "Bobine"]),
        Element(5, "button", "Odd", mark="selected"),
        Element(6, "heading", "Section #1", mark="expanded"),
    ]
    state = render_state(els)
    assert state.splitlines()[1] == '[2] textbox: "vi na" (focused)'
    assert parse_state(state) == els
    assert infer_available_actions(state) == available_actions(els) == [
        "click[2]", "type[2][<text>]", "click[3]", "select[4][Aurora]", "select[4][Bobine]", "click[5]", "click[6]",
    ]  # fmt: skip
    assert check_action("click[1]", els) == "[1] is a label, which cannot be clicked"
    assert check_action("select[4][Nope]", els) == "'Nope' is not an option of [4]"
    assert check_action("type[2][bob]", els) == ("type", 2, "bob")
    assert isinstance(check_action("press[2]", els), str)


def test_is_valid_action_follows_the_listed_actions():
    from dreamgym.envs.web.env import WebEnv

    acts = ["click[2]", "type[2][<text>]", "select[4][Aurora]"]
    assert WebEnv.is_valid_action("type[2][anything at all]", acts)
    assert WebEnv.is_valid_action("select[4][Aurora]", acts)
    assert not WebEnv.is_valid_action("type[3][x]", acts)
    assert not WebEnv.is_valid_action("select[4][Bobine]", acts)
    assert not WebEnv.is_valid_action("click[3]", acts)


def test_missing_browser_names_the_apt_packages(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    for var in (
        "DREAMGYM_CHROME_BINARY",
        "DREAMGYM_CHROMEDRIVER",
        "MINIWOB_CHROME_BINARY",
        "MINIWOB_CHROMEDRIVER",
    ):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(BrowserMissing, match=r"apt-get install -y chromium chromium-driver"):
        find_binaries()
    monkeypatch.setenv("DREAMGYM_CHROME_BINARY", str(tmp_path / "nope"))
    with pytest.raises(BrowserMissing, match="DREAMGYM_CHROME_BINARY"):
        find_binaries()


# ------------------------------------------------------------------------------- the live browser
@needs_browser
def test_experts_win_and_random_is_reported():
    from dreamgym.collect import collect_trajectories

    kwargs = {"batch_size": 2, "env_kwargs": {"task_types": TYPES, "test_seeds": 1}}
    experts = collect_trajectories("web", "test", n_expert=len(TYPES), n_random=0, **kwargs)  # each task once
    randoms = collect_trajectories("web", "test", n_expert=0, n_random=2, **kwargs)
    trajs = experts + randoms
    assert {t.task_id.split("/")[2] for t in experts} == set(TYPES)
    assert all(t.success for t in experts), [t.task_id for t in experts if not t.success]
    assert all(tr.reasoning for t in trajs for tr in t.transitions)
    assert all(t.transitions[-1].reward == float(t.success) for t in trajs)


@needs_browser
def test_invalid_actions_are_no_ops(env):
    td = _reset(env, TYPES.index("login-user"))
    state = as_text_list(td["observation"])[0]
    for bad in ("jump", "click[1]", "click[99]", "type[5][x]", "select[2][x]", "type[2]"):
        nxt = _step(env, bad)
        assert nxt["invalid"].item() and not nxt["done"].item() and nxt["reward"].item() == 0.0, bad
        assert as_text_list(nxt["observation"])[0] == state, bad
        assert env.step_info(0)["reason"]
    nxt = _step(env, "type[2][bob]")
    assert not nxt["invalid"].item() and '[2] textbox: "bob"' in as_text_list(nxt["observation"])[0]


@needs_browser
def test_episodes_replay_exactly(env):
    from dreamgym.envs.replay import replay_actions
    from dreamgym.envs.web.env import WebEnv

    task = TYPES.index("click-tab-2")
    first = replay_actions(env, task, ["click[2]", "click[3]", "click[1]"])
    other = WebEnv(batch_size=[1], split="test", task_types=TYPES, test_seeds=1)
    try:
        again = replay_actions(other, task, ["click[2]", "click[3]", "click[1]"])
    finally:
        other.close()
    assert first.states == again.states and len(first.states) >= 1


@needs_browser
def test_browser_reaches_loopback_only():
    """With the network rule a server on this machine's non-loopback address is unreachable, while the
    same server on 127.0.0.1 answers (without the rule Chromium would reach both)."""
    from selenium.common.exceptions import WebDriverException

    from dreamgym.envs.web.browser import Browser

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = b"<html><body><p id='hello'>hello from the test server</p></body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    browser = Browser()
    try:
        browser.driver.get(f"http://127.0.0.1:{port}/")
        assert "hello from the test server" in browser.driver.page_source
        targets = [f"http://{ip}:{port}/" for ip in _non_loopback_ips()] + [
            "http://example.com/",
            "http://1.1.1.1/",
        ]
        for url in targets:
            try:
                browser.driver.get(url)
                reached = "hello from the test server" in browser.driver.page_source
            except WebDriverException:
                reached = False
            assert not reached, url
        fetched = browser.driver.execute_async_script(
            "var done = arguments[arguments.length - 1];"
            "fetch(arguments[0]).then(function () { done('reached'); }, function () { done('blocked'); });",
            targets[0],
        )
        assert fetched == "blocked"
    finally:
        browser.close()
        server.shutdown()


def _non_loopback_ips() -> list[str]:
    """This machine's own non-loopback IPv4 addresses (where the test server also listens)."""
    ips = set()
    try:
        ips |= {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)}
    except OSError:
        pass
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            ips.add(s.getsockname()[0])
    except OSError:
        pass
    return sorted(ip for ip in ips if not ip.startswith("127."))


# ------------------------------------------------------------------------------------ import path
def test_import_recorded_web_episodes(tmp_path):
    import json

    from dreamgym.envs.web.importer import import_web_trajectories
    from dreamgym.schema import TrajectoryFileError, read_trajectories
    from dreamgym.teachers import get_teacher

    rec = {
        "task_id": "webarena/7", "instruction": 'Click on the "Home" link.', "success": True,
        "steps": [{"state": "[3] StaticText 'Welcome'\n[4] link 'Home'", "action": "click[4]"}],
    }  # fmt: skip
    src = tmp_path / "recorded.jsonl"
    src.write_text(json.dumps(rec) + "\n")
    out = tmp_path / "offline.jsonl"
    (traj,) = import_web_trajectories(src, out, split="train", policy="human", teacher=get_teacher("web"))
    tr = traj.transitions[0]
    assert tr.state == "[3] text: Welcome\n[4] link: Home" and tr.available_actions == ["click[4]"]
    assert tr.reward == 1.0 and tr.done and tr.success and not tr.invalid and tr.reasoning
    assert traj.env == "web" and traj.source == "offline" and traj.policy == "human"
    again = tmp_path / "again.jsonl"  # a schema trajectory passes through unchanged
    again.write_text(json.dumps(traj.to_dict()) + "\n")
    import_web_trajectories(again, tmp_path / "copy.jsonl")
    assert list(read_trajectories(tmp_path / "copy.jsonl")) == list(read_trajectories(out))
    src.write_text(json.dumps({**rec, "success": "yes"}) + "\n")
    with pytest.raises(
        TrajectoryFileError, match=r"recorded.jsonl:1: field 'success' must be bool, got str 'yes'"
    ):
        import_web_trajectories(src, tmp_path / "bad.jsonl")

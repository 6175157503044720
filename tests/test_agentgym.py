"""AgentGym HTTP protocol on loopback: our client against our server (WebShop, ALFWorld, synthetic)
gives the in-process episodes exactly; upstream-style clients work; malformed requests get clear
errors and never kill the server; an unreachable server gives one actionable message; a failed step
ends the episode as a counted failure."""

import socket

import httpx
import pytest
from torchrl.envs.utils import check_env_specs

from dreamgym.collect import collect_trajectories
from dreamgym.envs.base import as_text_list
from dreamgym.envs.registry import make_env
from dreamgym.envs.replay import replay_actions
from dreamgym.serve.client import ServerUnreachable, WebShopHTTPEnv
from dreamgym.serve.protocol import alfworld_observation
from dreamgym.serve.server import EnvPool, build_pool, create_app, serve_in_thread


@pytest.fixture(scope="module")
def webshop_url():
    pool, protocol = build_pool("webshop", split="test", max_envs=6)
    with serve_in_thread(create_app(pool, protocol, max_body=4096)) as url:
        yield url


def _assert_same_episodes(trajs, http_env, observe=lambda s, reset: s):
    for traj in trajs:
        idx = http_env.task_index_of(traj.task_id)
        assert idx is not None, traj.task_id
        got = replay_actions(http_env, idx, [t.action for t in traj.transitions])
        assert http_env.current(0).instruction == traj.instruction
        assert got.states == [observe(t.next_state, False) for t in traj.transitions][: got.steps]
        assert got.rewards == [t.reward for t in traj.transitions][: got.steps]
        assert got.steps == len(traj.transitions) and got.success == traj.success


def test_webshop_expert_episodes_match_in_process(webshop_url):
    trajs = collect_trajectories(
        "webshop", "test", n_expert=3, n_random=1, teacher=False, batch_size=2,
        env_kwargs={"observation_mode": "text"},
    )  # fmt: skip
    assert any(t.success for t in trajs)
    env = make_env("agentgym_webshop", url=webshop_url, batch_size=[1])
    _assert_same_episodes(trajs, env)
    assert env.server_errors == 0
    env.close()


def test_webshop_upstream_fallback_matches(webshop_url, monkeypatch):
    """Without the dreamgym ``info`` (an upstream server), flags follow WebShop's own rules: same episode."""
    trajs = collect_trajectories("webshop", "test", n_expert=2, n_random=1, teacher=False,
                                 env_kwargs={"observation_mode": "text"})  # fmt: skip
    env = WebShopHTTPEnv(webshop_url)
    request = env.http.request

    def upstream(method, path, json=None, params=None):
        out = request(method, path, json=json, params=params)
        return {**out, "info": None} if path == "/step" else out

    monkeypatch.setattr(env.http, "request", upstream)
    _assert_same_episodes(trajs, env)
    env.close()


def test_client_passes_check_env_specs(webshop_url):
    env = WebShopHTTPEnv(webshop_url, batch_size=[2])
    check_env_specs(env)
    assert env.observation_spec == make_env("webshop", batch_size=[2]).observation_spec
    env.close()


def test_upstream_client_calls_work(webshop_url):
    """The exact requests of agentenv's WebshopEnvClient (create, reset, observe, step, close)."""
    env_id = httpx.post(f"{webshop_url}/create").json()
    assert isinstance(env_id, str)  # an opaque token; agentenv's client sends it back as it got it
    res = httpx.post(f"{webshop_url}/reset", json={"session_id": 0, "env_idx": env_id}).json()
    assert res[1] is None and res[0].startswith("WebShop [SEP] Instruction:")
    assert httpx.get(f"{webshop_url}/observation?env_idx={env_id}").json() == res[0]
    acts = httpx.get(f"{webshop_url}/available_actions?env_idx={env_id}").json()
    assert acts == {"has_search_bar": True, "clickables": ["search"]}
    out = httpx.post(f"{webshop_url}/step", json={"action": "search[tea]", "env_idx": env_id}).json()
    assert set(out) == {"state", "reward", "done", "info"} and out["reward"] == 0.0 and not out["done"]
    assert httpx.post(f"{webshop_url}/close", json={"env_idx": env_id}).json() == "ok"


def test_malformed_requests_get_clear_errors(webshop_url):
    c = httpx.Client(base_url=webshop_url)
    r = c.post("/step", json={"action": "search[x]"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "env_idx"]
    r = c.post("/step", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422
    r = c.post("/step", json={"env_idx": 999, "action": "search[x]"})
    assert r.status_code == 404 and "never created" in r.json()["detail"]
    r = c.post("/step", json={"env_idx": 0, "action": "x" * 10_000})
    assert r.status_code == 413 and "over the limit" in r.json()["detail"]
    r = c.post("/step", content=iter([b'{"env_idx": 0, "action": "', b"x" * 5000, b'"}']))  # chunked
    assert r.status_code == 413
    idx = c.post("/create").json()
    r = c.post("/reset", json={"env_idx": idx, "session_id": 10**6})
    assert r.status_code == 400 and "out of range" in r.json()["detail"]
    c.post("/close", json={"env_idx": idx})
    r = c.get("/observation", params={"env_idx": idx})
    assert r.status_code == 404 and "was closed" in r.json()["detail"]
    assert c.get("/").json() == "ok"  # still serving


def test_capacity_and_idle_eviction():
    pool = EnvPool(
        lambda: make_env("webshop", batch_size=[1], split="test"), "webshop", max_envs=2, idle_timeout=60
    )
    with serve_in_thread(create_app(pool, "webshop")) as url:
        ids = [httpx.post(f"{url}/create").json() for _ in range(2)]
        r = httpx.post(f"{url}/create")
        assert r.status_code == 503 and "--max-envs" in r.json()["detail"]
        pool.idle_timeout = 0.0  # every id is now idle: the next create makes room
        assert httpx.post(f"{url}/create").status_code == 200 and pool.evicted == 2
        assert pool.serials() == [2] and not set(ids) & set(pool.envs)


def test_an_env_answers_only_to_its_id_and_a_client_holds_at_most_its_share():
    """#39: ids were guessable ints, so any client could read, step or close another's env, and one client
    could hold every slot."""
    pool = EnvPool(
        lambda: make_env("webshop", batch_size=[1], split="test"),
        "webshop",
        max_envs=4,
        max_envs_per_client=2,
    )
    with serve_in_thread(create_app(pool, "webshop")) as url:
        c = httpx.Client(base_url=url)
        mine = c.post("/create").json()
        serial = mine.split("-")[0]
        assert c.get("/list_envs").json() == [int(serial)]  # the serials only: they open nothing
        for guess in (serial, int(serial), f"{serial}-AAAAAAAAAAAAAAAA"):
            r = c.post("/step", json={"env_idx": guess, "action": "search[tea]"})
            assert r.status_code == 404 and "does not exist" in r.json()["detail"]
            assert c.post("/close", json={"env_idx": guess}).status_code == 404
        assert c.get("/observation", params={"env_idx": mine}).status_code == 200  # the owner's id works
        c.post("/create")
        r = c.post("/create")  # a third for the same client (address): over its share, the server has room
        assert r.status_code == 503 and "--max-envs-per-client 2" in r.json()["detail"]
    with pytest.raises(ValueError, match="max_envs_per_client must be >= 1"):
        EnvPool(lambda: make_env("webshop", batch_size=[1]), "webshop", max_envs_per_client=0)


def test_unreachable_server_is_one_actionable_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(
        ServerUnreachable, match=rf"127\.0\.0\.1:{port}.*python -m dreamgym serve --env webshop"
    ):
        WebShopHTTPEnv(f"http://127.0.0.1:{port}", retries=1, timeout=2)


def test_failed_step_ends_episode_as_counted_failure():
    pool, protocol = build_pool("webshop", split="test")
    with serve_in_thread(create_app(pool, protocol)) as url:
        env = WebShopHTTPEnv(url, batch_size=[2], retries=0)
        td = env.reset()
        pool.close(env.env_ids[0])  # the server loses slot 0's env mid-episode
        td["action"] = ["search[tea]", "search[tea]"]
        td = env.step(td)["next"]
        assert td["terminated"].reshape(-1).tolist() == [True, False]
        assert td["sim_error"].reshape(-1).tolist() == [True, False] and td["reward"][0].item() == 0.0
        assert env.server_errors == 1 and "does not exist" in env.step_info(0)["error"]
        assert env.step_info(1) == {}  # slot 1 stepped normally (no server info kept)
        env.reset()  # a new server env for slot 0
        assert env.env_ids[0] in pool.envs
        env.close()


def test_synthetic_env_over_webshop_protocol():
    from dreamgym.envs.synthetic import SyntheticEnv

    local = SyntheticEnv(batch_size=[1])  # the tiny untrained model: a protocol check, not a world model
    pool = EnvPool(
        lambda: SyntheticEnv(local.experience, local.tasks, batch_size=[1], max_steps=10**9), "synthetic"
    )
    actions = ["click[nothing]", "search[red shirt]", "click[buy now]"]
    with serve_in_thread(create_app(pool, "webshop")) as url:
        env = WebShopHTTPEnv(url, max_steps=local.max_steps)
        got = replay_actions(env, 0, actions)
        want = replay_actions(local, 0, actions)
        assert (got.states, got.rewards, got.success, got.terminated) == (
            want.states, want.rewards, want.success, want.terminated)  # fmt: skip
        assert env.current(0).instruction == local.current(0).instruction
        env.close()


def _one_alfworld_game(tmp_path):
    from dreamgym.envs.alfworld.games import MANIFEST, load_manifest, save_manifest

    game = min((g for g in load_manifest(MANIFEST)["games"] if g["split"] == "valid_unseen"),
               key=lambda g: (g["scene"] != 308, g["scene"]))  # fmt: skip
    manifest = tmp_path / "one.json.gz"
    save_manifest(manifest, [game], {"test": True})
    return manifest


def test_alfworld_server_lists_help_and_ends_at_step_50(tmp_path, monkeypatch):
    """As upstream's ALFWorld server: ``help`` among the available actions, ``done`` at step 50 (ALFWorld's
    ``max_nb_steps_per_episode``) and "has finished" after it; our client reads that end as the in-process
    env's truncation."""
    pytest.importorskip("textworld")
    from dreamgym.envs.alfworld import games
    from dreamgym.serve.client import ALFWorldHTTPEnv

    manifest = _one_alfworld_game(tmp_path)
    monkeypatch.setattr(games, "MANIFEST", manifest)  # build_pool's env serves the bundled manifest
    monkeypatch.setenv("HOME", str(tmp_path))  # its generated game files
    local = make_env("alfworld", batch_size=[1], split="test")
    local_actions = as_text_list(local.reset()["available_actions"])[0]
    assert "help" in local_actions and local_actions == sorted(local_actions)
    pool, protocol = build_pool("alfworld", split="test")
    with serve_in_thread(create_app(pool, protocol)) as url:
        c = httpx.Client(base_url=url)
        idx = c.post("/create").json()["id"]
        r = c.post("/reset", json={"id": idx, "game": 0, "world_type": "Text"}).json()
        assert r["available_actions"] == local_actions
        dones = [c.post("/step", json={"id": idx, "action": "look"}).json()["done"] for _ in range(50)]
        assert dones == [False] * 49 + [True]
        assert "has finished" in c.post("/step", json={"id": idx, "action": "look"}).json()["error"]
        env = ALFWorldHTTPEnv(url, max_steps=50)
        got = replay_actions(env, 0, ["look"] * 50)
        want = replay_actions(local, 0, ["look"] * 50)
        assert (got.states, got.rewards, got.terminated) == (want.states, want.rewards, want.terminated)
        assert len(got.states) == 50 and not got.terminated  # truncated at the limit, as in-process
        env.close()


def test_alfworld_expert_episodes_match_in_process(tmp_path):
    pytest.importorskip("textworld")
    from dreamgym.envs.alfworld.games import MANIFEST, load_manifest, save_manifest
    from dreamgym.serve.client import ALFWorldHTTPEnv

    game = min((g for g in load_manifest(MANIFEST)["games"] if g["split"] == "valid_unseen"),
               key=lambda g: (g["scene"] != 308, g["scene"]))  # fmt: skip
    manifest = tmp_path / "one.json.gz"
    save_manifest(manifest, [game], {"test": True})
    kwargs = {"manifest": manifest, "cache_dir": tmp_path / "cache"}
    trajs = collect_trajectories("alfworld", "test", n_expert=1, n_random=1, teacher=False, batch_size=1,
                                 env_kwargs=kwargs)  # fmt: skip
    assert trajs[0].success or trajs[1].success
    pool = EnvPool(
        lambda: make_env("alfworld", batch_size=[1], split="test", max_steps=10**9, **kwargs), "alfworld"
    )
    with serve_in_thread(create_app(pool, "alfworld")) as url:
        env = ALFWorldHTTPEnv(url)
        _assert_same_episodes(trajs, env, alfworld_observation)
        replay_actions(env, 0, [])  # a reset only
        assert env.current(0).observation == alfworld_observation(trajs[-1].transitions[0].state, True)
        assert not env.current(0).observation.startswith("-=") and env.current(0).instruction
        c = httpx.Client(base_url=url)
        r = c.post("/reset", json={"id": env.env_ids[0], "game": 0, "world_type": "Embody"})
        assert r.status_code == 200 and "3D simulator" in r.json()["error"]
        r = c.post("/step", json={"id": 77, "action": "look"})
        assert r.status_code == 200 and "does not exist" in r.json()["error"]
        new = c.post("/create").json()["id"]
        assert new.split("-")[0] == str(int(env.env_ids[0].split("-")[0]) + 1)
        env.close()

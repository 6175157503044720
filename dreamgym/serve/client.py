"""AgentGym env servers as dreamgym envs: :class:`WebShopHTTPEnv` and :class:`ALFWorldHTTPEnv`.

Both are :class:`TextEnvBase` subclasses (same specs and keys as every dreamgym env) over one HTTP
layer (:class:`HTTPSession`, httpx with keep-alive). Each slot owns one server env id, created when the
env is built and closed by :meth:`AgentGymEnv.close`. They work against upstream AgentGym servers and
against ``python -m dreamgym serve`` (whose additions, see :mod:`.protocol`, make an episode over HTTP
identical to the in-process one and cost one request per step):

* tasks: ``task_index`` is the protocol's goal / game index on the server's split. The task count and
  ids come from ``GET /info`` (dreamgym servers) or from ``num_tasks`` (upstream servers, whose task
  ids are then ``"<index>"``, or ALFWorld's ``task_type``);
* flags: a dreamgym server's step ``info`` gives reward, score, success, invalid and sim_error as the
  served env computed them. From an upstream server: WebShop ``score`` is the returned reward, ``reward``
  the binary outcome of it (:func:`dreamgym.envs.webshop.reward.outcome_reward`), ``invalid`` WebShop's
  own validity rule; ALFWorld ``invalid`` is upstream's ``"Nothing happens."``;
* failures: requests time out after ``timeout`` s; 503 answers and connection errors are retried
  ``retries`` times with backoff. A server that cannot be reached when the env is built raises
  :class:`ServerUnreachable` with the URL and the command that starts a server. A step that fails after
  the retries (or an error answer) ends that slot's episode: ``terminated``, reward 0, ``sim_error``
  set, the observation unchanged, the error in ``step_info(slot)["error"]``; it is counted in
  :attr:`AgentGymEnv.server_errors` and never raises, so a rollout keeps every step taken. A reset whose
  server env was evicted creates a new id and retries once.
"""

from __future__ import annotations

import time
from typing import Any

from dreamgym.envs.base import TextEnvBase, TextObs, TextStep
from dreamgym.schema import is_success

__all__ = [
    "AgentGymEnv",
    "WebShopHTTPEnv",
    "ALFWorldHTTPEnv",
    "HTTPSession",
    "ServerUnreachable",
    "ServerError",
]


class ServerUnreachable(ConnectionError):
    """The env server did not answer (connection refused, timeout, 503) after the retries."""


class ServerError(RuntimeError):
    """The env server answered with an error (a non-200 status or an ``{"error": msg}`` body)."""


class HTTPSession:
    """JSON over HTTP to one env server, with timeouts and bounded retries.

    Args:
        url: base URL, e.g. ``http://127.0.0.1:8000``.
        timeout: seconds per request (connect, read and write each).
        retries: extra attempts after a connection error, a timeout or a 503 (backoff 0.1 s, doubling).
        serve_hint: the command that starts a matching server, named in :class:`ServerUnreachable`.
    """

    def __init__(self, url: str, timeout: float = 60.0, retries: int = 5, serve_hint: str = ""):
        import httpx

        self.url = url.rstrip("/")
        self.retries, self.serve_hint = int(retries), serve_hint
        self._httpx = httpx
        self.client = httpx.Client(base_url=self.url, timeout=timeout)

    def request(self, method: str, path: str, json: Any = None, params: dict | None = None) -> Any:
        """The decoded JSON answer of ``method path``.

        Raises:
            ServerUnreachable: no answer (or only 503s) after the retries.
            ServerError: another non-200 status, or an ``{"error": msg}`` body.
        """
        httpx, delay, why = self._httpx, 0.1, ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(delay)
                delay *= 2
            try:
                r = self.client.request(method, path, json=json, params=params)
            except (httpx.TransportError, httpx.TimeoutException) as e:
                why = f"{type(e).__name__}: {e}"
                continue
            if r.status_code == 503:
                why = f"503 {r.text[:300]}"
                continue
            if r.status_code != 200:
                raise ServerError(f"{method} {self.url}{path} -> {r.status_code}: {r.text[:500]}")
            body = r.json()
            if isinstance(body, dict) and "error" in body:
                raise ServerError(f"{method} {self.url}{path} -> error: {body['error']}")
            return body
        raise ServerUnreachable(
            f"the AgentGym env server at {self.url} did not answer {method} {path} after "
            f"{self.retries + 1} tries ({why}). Start one with `{self.serve_hint} --port "
            f"{self.client.base_url.port or 80}` or pass the url of a running one"
        )

    def close(self) -> None:
        self.client.close()


class AgentGymEnv(TextEnvBase):
    """A batch of server envs (one id per slot) behind one AgentGym protocol variant.

    Args:
        url: the server's base URL (required: the env never guesses a server).
        batch_size: slots; each creates one server env.
        max_steps: step limit per episode, counted here (the WebShop server has none; the ALFWorld one
            answers done at step 50, read as the truncation at this limit).
        split: the server's split (a label: the server decides what it serves).
        seed: task sampling seed.
        num_tasks: the server's task count; ``None`` asks ``GET /info`` (dreamgym servers only).
        timeout: seconds per request.
        retries: extra attempts on connection errors, timeouts and 503.
    """

    serve_hint = "python -m dreamgym serve --env webshop"
    id_field = ""

    def __init__(
        self,
        url: str,
        batch_size=(1,),
        max_steps: int = 15,
        split: str = "test",
        seed: int | None = 0,
        num_tasks: int | None = None,
        timeout: float = 60.0,
        retries: int = 5,
    ):
        self.http = HTTPSession(url, timeout, retries, self.serve_hint)
        self.http.request("GET", "/")
        try:
            info = self.http.request("GET", "/info")
        except ServerError:  # an upstream server: no /info
            info = None
        if num_tasks is None and info is None:
            raise ValueError(
                f"the server at {url} does not report its tasks (no GET /info: an upstream AgentGym "
                "server); pass num_tasks (upstream clients' data_len)"
            )
        self._n_tasks = int(num_tasks if num_tasks is not None else info["num_tasks"])
        self._ids = list(info["task_ids"]) if info is not None else None
        self.server_errors = 0
        self.last_error = ""
        super().__init__(batch_size=batch_size, max_steps=max_steps, split=split, seed=seed)
        self.env_ids = [self._create() for _ in range(self.batch_size[0])]

    # ------------------------------------------------------------ protocol hooks
    def _create(self) -> str:
        raise NotImplementedError

    def _reset_remote(self, slot: int, task_index: int) -> TextObs:
        raise NotImplementedError

    def _step_remote(self, slot: int, action: str) -> TextStep:
        raise NotImplementedError

    # ------------------------------------------------------------ TextEnvBase hooks
    def _num_tasks(self, split: str) -> int:
        return self._n_tasks

    def _task_ids(self, split: str) -> list[str] | None:
        return self._ids

    def _task_id(self, task_index: int, fallback: str) -> str:
        return self._ids[task_index] if self._ids is not None else fallback

    def _start(self, slot: int, split: str, task_index: int) -> TextObs:
        try:
            return self._reset_remote(slot, task_index)
        except ServerError:  # the id was closed or evicted: a new one, once
            self.env_ids[slot] = self._create()
            return self._reset_remote(slot, task_index)

    def _act(self, slot: int, action: str) -> TextStep:
        try:
            return self._step_remote(slot, action)
        except (ServerError, ServerUnreachable) as e:
            self.server_errors += 1
            self.last_error = str(e)
            cur = self.current(slot)
            return TextStep(cur.observation, [], terminated=True, sim_error=True, info={"error": str(e)})

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Close the server envs (best effort) and the connection."""
        for idx in getattr(self, "env_ids", []):
            try:
                self.http.request("POST", "/close", json={self.id_field: idx})
            except (ServerError, ServerUnreachable):
                pass  # an upstream server without /close, or one already gone
        self.env_ids = []
        self.http.close()
        super().close(raise_if_closed=raise_if_closed)


def _flags(info: Any) -> dict[str, Any] | None:
    """A dreamgym server's step ``info`` as :class:`TextStep` fields (``None`` from upstream servers)."""
    if not isinstance(info, dict) or "success" not in info:
        return None
    return {k: info[k] for k in ("reward", "score", "success", "invalid", "sim_error", "reasoning")}


class WebShopHTTPEnv(AgentGymEnv):
    """WebShop (or a synthetic WebShop) served over AgentGym's ``agentenv-webshop`` protocol.

    Observations are what the server sends (upstream: the ``[SEP]`` text page); ``available_actions``
    follow dreamgym's WebShop list (``search[<query>]`` + ``click[x]``,
    :func:`dreamgym.envs.webshop.pages.actions_of_clickables`) built from ``GET /available_actions``.
    """

    env_name = "webshop"
    serve_hint = "python -m dreamgym serve --env webshop"
    id_field = "env_idx"

    def _create(self) -> str:
        return str(self.http.request("POST", "/create"))  # an opaque id: keep it as the server gave it

    def _actions(self, slot: int) -> list[str]:
        from dreamgym.envs.webshop.pages import actions_of_clickables

        r = self.http.request("GET", "/available_actions", params={"env_idx": self.env_ids[slot]})
        return actions_of_clickables(bool(r["has_search_bar"]), list(r["clickables"]))

    def _reset_remote(self, slot: int, task_index: int) -> TextObs:
        idx = self.env_ids[slot]
        obs = self.http.request("POST", "/reset", json={"env_idx": idx, "session_id": task_index})[0]
        instruction = self.http.request("GET", "/instruction_text", params={"env_idx": idx})
        instruction = instruction.removeprefix("Instruction:").strip()
        return TextObs(self._task_id(task_index, str(task_index)), instruction, obs, self._actions(slot))

    def _step_remote(self, slot: int, action: str) -> TextStep:
        from dreamgym.envs.webshop.env import WebShopEnv
        from dreamgym.envs.webshop.reward import outcome_reward

        before = self.current(slot).available_actions
        r = self.http.request("POST", "/step", json={"env_idx": self.env_ids[slot], "action": action})
        flags = _flags(r.get("info"))
        if flags is not None:
            acts = list(r["info"]["available_actions"])
        else:  # upstream server: its reward is the raw score
            score = float(r["reward"])
            reward = outcome_reward(score)
            valid = WebShopEnv.is_valid_action(action, before)
            flags = {"reward": reward, "score": score, "success": is_success(reward), "invalid": not valid}
            acts = self._actions(slot)
        return TextStep(r["state"], acts, terminated=bool(r["done"]), **flags)


class ALFWorldHTTPEnv(AgentGymEnv):
    """ALFWorld (or a synthetic ALFWorld) served over AgentGym's ``agentenv-alfworld`` protocol.

    Observations are upstream's (the reset one without TextWorld's banner,
    :func:`dreamgym.serve.protocol.alfworld_observation`); the instruction is read from the reset
    observation (:func:`dreamgym.envs.alfworld.env.task_instruction`); ``world_type`` is ``"Text"``.
    """

    env_name = "alfworld"
    serve_hint = "python -m dreamgym serve --env alfworld"
    id_field = "id"

    def __init__(self, url: str, batch_size=(1,), max_steps: int = 50, **kwargs: Any):
        super().__init__(url, batch_size=batch_size, max_steps=max_steps, **kwargs)

    def _create(self) -> str:
        return str(self.http.request("POST", "/create")["id"])

    def _reset_remote(self, slot: int, task_index: int) -> TextObs:
        from dreamgym.envs.alfworld.env import task_instruction

        body = {"id": self.env_ids[slot], "game": task_index, "world_type": "Text"}
        r = self.http.request("POST", "/reset", json=body)
        obs = r["observation"]
        task_id = self._task_id(task_index, r.get("task_type", str(task_index)))
        return TextObs(task_id, task_instruction(obs), obs, list(r["available_actions"]))

    def _step_remote(self, slot: int, action: str) -> TextStep:
        r = self.http.request("POST", "/step", json={"id": self.env_ids[slot], "action": action})
        flags = _flags(r.get("info"))
        if flags is None:  # upstream server: reward is 1.0 on a win
            won = is_success(r["reward"])
            flags = {
                "reward": float(won),
                "score": float(won),
                "success": won,
                "invalid": r["observation"].strip() == "Nothing happens.",
            }
        # ALFWorld ends an episode on a win (terminated) or at its step limit (upstream's server answers
        # done at step 50): a done without a win at this env's own limit is the truncation the base class
        # marks; before it (a server with a lower limit) it still ends the episode
        ended = bool(r["done"]) and (flags["success"] or self._steps[slot] + 1 < self.max_steps)
        return TextStep(r["observation"], list(r["available_actions"]), terminated=ended, **flags)

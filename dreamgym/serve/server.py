"""Serve a dreamgym env over AgentGym's HTTP protocol (see :mod:`.protocol` for the endpoints).

``python -m dreamgym serve --env webshop|alfworld|synthetic --port 8000`` runs a FastAPI app under
uvicorn on loopback (``--host 0.0.0.0`` exposes it). Every server env id is one dreamgym env with one
slot, built by a factory (WebShop and ALFWorld share their catalog / games between ids; synthetic envs
share one loaded experience model). Behaviour:

* an env id is an unguessable string (``"<serial>-<token>"``) that only its creator learns: no other
  client can read, step or close that env; ``GET /list_envs`` shows only the serials;
* at most ``--max-envs`` live ids, and ``--max-envs-per-client`` per client address; ``POST /create``
  first closes ids idle for ``--idle-timeout`` s, and answers 503 when none is free (upstream clients
  retry 503);
* ``POST /close`` frees an id; a closed, evicted or unknown id gets a clear error naming what to do;
* bodies over ``--max-body`` bytes get 413; validation errors 422; an env exception becomes an error
  response (500 in the WebShop variant, ``{"error"}`` in the ALFWorld one), never a dead server;
* env operations run one at a time (one lock: the envs share catalogs, search indexes and models);
* ``done`` is the env's own end (purchase, win, synthetic episode end); the WebShop and synthetic
  servers have no step limit, as upstream's WebShop server (clients count steps); the ALFWorld one
  answers ``done`` at step 50, as upstream's (ALFWorld's ``max_nb_steps_per_episode``). The WebShop
  variant returns the ``text`` observation (upstream's ``observation_mode="text"``) unless
  ``--observation-mode abstract``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from dreamgym.serve.pool import EnvPool, PoolError, build_pool
from dreamgym.serve.protocol import (
    ALFWORLD_OK,
    PROTOCOLS,
    STEP_INFO_KEYS,
    WEBSHOP_OK,
    alfworld_observation,
    clickables_of_actions,
)

__all__ = ["EnvPool", "PoolError", "create_app", "build_pool", "serve_in_thread", "main"]

log = logging.getLogger(__name__)


def _step_info(out: dict[str, Any]) -> dict[str, Any]:
    return {k: out[k] for k in STEP_INFO_KEYS}


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` gets 413 (declared or streamed)."""

    def __init__(self, app, max_bytes: int):
        self.app, self.max_bytes = app, int(max_bytes)

    async def _reject(self, send, size: str) -> None:
        body = f'{{"detail":"request body of {size} bytes is over the limit of {self.max_bytes} bytes"}}'
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body.encode()})

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None:
            if not declared.isdigit() or int(declared) > self.max_bytes:
                return await self._reject(send, declared.decode(errors="replace"))
            return await self.app(scope, receive, send)
        chunks, size = [], 0  # chunked body: read it up to the limit, then hand it on
        while True:
            msg = await receive()
            if msg["type"] != "http.request":
                return
            chunks.append(msg.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                return await self._reject(send, f"over {size}")
            if not msg.get("more_body"):
                break
        body, replayed = b"".join(chunks), False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.app(scope, replay, send)


# Request bodies, field for field as upstream's pydantic models (agentenv_webshop/model.py,
# agentenv_alfworld/model.py) but for the ids: strings here (see EnvPool), which upstream's clients pass
# back as they got them; the close bodies follow the ids their clients send.
EnvId = str | int


class StepQuery(BaseModel):
    env_idx: EnvId
    action: str


class ResetQuery(BaseModel):
    env_idx: EnvId
    session_id: int | None = None


class CloseQuery(BaseModel):
    env_idx: EnvId


class StepRequestBody(BaseModel):
    id: EnvId
    action: str


class ResetRequestBody(BaseModel):
    id: EnvId
    game: int
    world_type: str


class CloseRequestBody(BaseModel):
    id: EnvId


def client_of(request: Request) -> str:
    """The client an env belongs to for ``--max-envs-per-client``: its address."""
    return request.client.host if request.client is not None else "unknown"


def create_app(pool: EnvPool, protocol: str, max_body: int = 65536) -> FastAPI:
    """The FastAPI app speaking ``protocol`` ("webshop" or "alfworld") for ``pool``'s envs."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol={protocol!r}; use one of {PROTOCOLS}")
    app = FastAPI(title=f"dreamgym {pool.name} env ({protocol} protocol of AgentGym)")
    app.add_middleware(BodyLimit, max_bytes=max_body)
    app.get("/info")(pool.info)
    (_webshop_routes if protocol == "webshop" else _alfworld_routes)(app, pool)
    return app


def _webshop_routes(app, pool: EnvPool) -> None:
    def call(fn, *args):
        try:
            return fn(*args)
        except PoolError as e:
            raise HTTPException(e.status, str(e)) from None
        except Exception as e:  # noqa: BLE001 - an env failure is a 500 answer, never a dead server
            log.exception("env call failed")
            raise HTTPException(500, f"{type(e).__name__}: {e}") from None

    @app.get("/")
    def ok() -> str:
        return WEBSHOP_OK

    @app.get("/list_envs")
    def list_envs() -> list[int]:
        return pool.serials()

    @app.post("/create")
    def create(request: Request) -> str:
        idx = call(pool.create, client_of(request))
        call(pool.reset, idx, None)  # upstream resets a new env on a random goal
        return idx

    @app.post("/step")
    def step(q: StepQuery) -> dict:
        out = call(pool.step, q.env_idx, q.action)
        return {
            "state": out["observation"],
            "reward": out["score"],
            "done": out["terminated"],
            "info": _step_info(out),
        }

    @app.post("/reset")
    def reset(q: ResetQuery) -> list:
        return [call(pool.reset, q.env_idx, q.session_id).observation, None]

    @app.get("/observation")
    def observation(env_idx: str) -> str:
        return call(pool.current, env_idx).observation

    @app.get("/available_actions")
    def available_actions(env_idx: str) -> dict:
        return clickables_of_actions(call(pool.current, env_idx).available_actions)

    @app.get("/instruction_text")
    def instruction_text(env_idx: str) -> str:
        return call(pool.current, env_idx).instruction

    @app.post("/close")
    def close(q: CloseQuery) -> str:
        call(pool.close, q.env_idx)
        return "ok"


def _alfworld_routes(app, pool: EnvPool) -> None:
    def call(fn, *args):
        """``fn(*args)``, or upstream's ``{"error": msg}`` (HTTP 200; 503 when the pool is full)."""
        try:
            return fn(*args)
        except PoolError as e:
            return JSONResponse({"error": str(e)}, status_code=503 if e.status == 503 else 200)
        except Exception as e:  # noqa: BLE001 - an env failure is an error answer, never a dead server
            log.exception("env call failed")
            return {"error": f"{type(e).__name__}: {e}"}

    def finished_check(idx: EnvId) -> None:
        if pool.get(idx).done:
            raise PoolError(f"The task with environment {idx} has finished.")  # upstream's message

    @app.get("/")
    def hello() -> str:
        return ALFWORLD_OK

    @app.post("/create")
    def create(request: Request):
        return call(lambda: {"id": pool.create(client_of(request))})

    def do_reset(q: ResetRequestBody) -> dict:
        if q.world_type not in ("Text", "Embody", "Hybrid"):
            raise PoolError('world_type must be one of "Text", "Embody" and "Hybrid"')  # upstream's message
        if q.world_type != "Text":
            raise PoolError(f'world_type "{q.world_type}" needs the 3D simulator; this server serves "Text"')
        obs = pool.reset(q.id, q.game)
        pool.get(q.id).world_type = q.world_type
        return {
            "id": q.id,
            "observation": alfworld_observation(obs.observation, reset=True),
            "available_actions": list(obs.available_actions),
            "task_type": "/".join(obs.task_id.split("/")[-2:]),  # upstream: "<task dir>/<trial dir>"
        }

    @app.post("/reset")
    def reset(q: ResetRequestBody):
        return call(do_reset, q)

    def do_step(q: StepRequestBody) -> dict:
        finished_check(q.id)
        out = pool.step(q.id, q.action)
        return {
            "observation": alfworld_observation(out["observation"], reset=False),
            "reward": out["reward"],
            "available_actions": out["available_actions"],
            "done": out["terminated"] or out["truncated"],  # upstream: done at ALFWorld's step limit too
            "info": _step_info(out),
        }

    @app.post("/step")
    def step(q: StepRequestBody):
        return call(do_step, q)

    def observed(idx: EnvId) -> str:
        live = pool.get(idx)
        text = pool.current(idx).observation
        return alfworld_observation(text, reset=live.steps == 0)

    @app.get("/observation")
    def observation(id: str):  # noqa: A002 - upstream's parameter name
        return call(observed, id)

    @app.get("/available_actions")
    def available_actions(id: str):  # noqa: A002
        return call(lambda: list(pool.current(id).available_actions))

    def detail(idx: EnvId) -> dict:
        live = pool.get(idx)
        return {
            "world_type": live.world_type,
            "game": live.task_index,
            "observation": observed(idx),
            "available_actions": list(pool.current(idx).available_actions),
            "done": live.done,
            "reward": live.reward,
            "deleted": False,
        }

    @app.get("/detail")
    def get_detailed_info(id: str):  # noqa: A002
        return call(detail, id)

    @app.post("/close")
    def close(q: CloseRequestBody):
        return call(lambda: (pool.close(q.id), {"id": q.id, "closed": True})[1])


@contextlib.contextmanager
def serve_in_thread(app, host: str = "127.0.0.1", port: int | None = None, **uvicorn_kwargs) -> Iterator[str]:
    """Run ``app`` under uvicorn in a daemon thread (tests, benchmarks); yields its base URL and stops
    the server on exit. ``port=None`` picks a free port."""
    import uvicorn

    if port is None:
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", **uvicorn_kwargs))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"uvicorn did not start on {host}:{port}")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def main(argv: list[str] | None = None) -> None:
    """``python -m dreamgym serve``: serve one env over AgentGym's protocol until interrupted."""
    p = argparse.ArgumentParser(
        prog="python -m dreamgym serve",
        description="Serve a dreamgym env over AgentGym's HTTP env protocol (agentenv clients work unchanged).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--env", required=True, choices=["webshop", "alfworld", "synthetic"])
    p.add_argument("--split", default="test", help="task split served (webshop/alfworld)")
    p.add_argument(
        "--observation-mode", default="text", choices=["text", "abstract"], help="WebShop observations"
    )
    p.add_argument(
        "--data-dir", default=None, help="upstream data dir (default: the bundled catalog / games)"
    )
    p.add_argument("--checkpoint", default=None, help="synthetic: exported experience-model directory")
    p.add_argument(
        "--tasks", default=None, help="synthetic: trajectory JSONL whose train tasks form the pool"
    )
    p.add_argument("--real-env", default="webshop", choices=list(PROTOCOLS), help="synthetic: imitated env")
    p.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 exposes the server)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-envs", type=int, default=64, help="most live env ids")
    p.add_argument(
        "--max-envs-per-client",
        type=int,
        default=None,
        help="most live env ids per client address (default: --max-envs)",
    )
    p.add_argument("--idle-timeout", type=float, default=900, help="seconds before an idle id may be closed")
    p.add_argument("--max-body", type=int, default=65536, help="largest request body in bytes")
    p.add_argument("--limit-concurrency", type=int, default=256, help="concurrent connections before 503")
    args = p.parse_args(argv)
    if not 0 <= args.port <= 65535:
        p.error(f"--port must be in 0..65535, got {args.port}")
    import uvicorn

    try:
        pool, protocol = build_pool(
            args.env, args.split, args.observation_mode, args.data_dir, args.checkpoint, args.tasks,
            args.real_env, args.max_envs, args.idle_timeout, args.max_envs_per_client,
        )  # fmt: skip
    except ValueError as e:
        p.error(str(e))
    info = pool.info()
    print(
        f"serving {args.env} ({info['num_tasks']} {info['split']} tasks) over AgentGym's {protocol} protocol "
        f"at http://{args.host}:{args.port}"
    )
    uvicorn.run(
        create_app(pool, protocol, args.max_body),
        host=args.host,
        port=args.port,
        limit_concurrency=args.limit_concurrency,
        log_level="warning",
    )

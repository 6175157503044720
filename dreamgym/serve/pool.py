"""The server's env pool: live env ids (one single-slot dreamgym env each), their idle eviction, and
one lock around every env operation (see :mod:`dreamgym.serve.server` for the HTTP side)."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDict

from dreamgym.envs.base import TextEnvBase, TextObs, as_text_list, text_stack

__all__ = ["EnvPool", "PoolError", "LiveEnv", "build_pool", "SERVER_MAX_STEPS"]

SERVER_MAX_STEPS = 10**9
"""Step limit of the WebShop and synthetic server envs: none in effect (upstream's WebShop server has
none; clients count steps). The ALFWorld server env keeps :class:`ALFWorldEnv`'s own limit (50, ALFWorld's
``max_nb_steps_per_episode``), at which upstream's server answers ``done`` too."""


class PoolError(Exception):
    """A request the pool refuses; ``status`` is its HTTP status in the WebShop variant."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass
class LiveEnv:
    """One server env id: its env, the client that created it and what the protocol's GET endpoints
    report."""

    env: TextEnvBase
    last_used: float
    client: str = "local"
    started: bool = False
    done: bool = False
    task_index: int = -1
    world_type: str = "Text"
    reward: float = 0.0
    steps: int = 0


class EnvPool:
    """Live server envs by id, each a one-slot env from ``factory``.

    An id is ``"<serial>-<random token>"`` (e.g. ``"3-q5Xl0v8aTzK2m1Rb"``): only the client that created
    an env learns its id, so no other client can read, step or close it (the serial alone, which
    ``GET /list_envs`` shows, opens nothing). AgentGym's clients keep the id they get from ``/create``
    as it is, so they work unchanged.

    Args:
        factory: builds a one-slot :class:`TextEnvBase` (called once up front for :meth:`info`).
        name: the served env's name (reported by ``GET /info``).
        max_envs: most live ids at once.
        idle_timeout: seconds after which an unused id may be closed to make room.
        max_envs_per_client: most live ids one client (its address) may hold (None: ``max_envs``), so a
            client cannot hold every slot of a shared server.
    """

    def __init__(
        self, factory: Callable[[], TextEnvBase], name: str, max_envs: int = 64, idle_timeout: float = 900,
        max_envs_per_client: int | None = None,
    ):  # fmt: skip
        if max_envs < 1:
            raise ValueError(f"max_envs must be >= 1, got {max_envs}")
        if max_envs_per_client is not None and max_envs_per_client < 1:
            raise ValueError(f"max_envs_per_client must be >= 1 (or None), got {max_envs_per_client}")
        self.factory, self.name = factory, name
        self.max_envs, self.idle_timeout = int(max_envs), float(idle_timeout)
        self.max_envs_per_client = int(max_envs_per_client or max_envs)
        self.lock = threading.RLock()
        self.envs: dict[str, LiveEnv] = {}
        self.evicted = 0
        self._next_id = 0
        self._proto = factory()

    def info(self) -> dict[str, Any]:
        """The served env: name, split, task count and task ids (task index order)."""
        p = self._proto
        n = p.num_tasks()
        return {
            "env": self.name,
            "env_class": type(p).__name__,
            "split": p.split,
            "num_tasks": n,
            "task_ids": p.task_ids() or [str(i) for i in range(n)],
            "live_envs": len(self.envs),
            "max_envs": self.max_envs,
        }

    def serials(self) -> list[int]:
        """The serial numbers of the live ids (what ``GET /list_envs`` shows: they open nothing)."""
        return sorted(int(idx.split("-", 1)[0]) for idx in self.envs)

    def create(self, client: str = "local") -> str:
        """A new id for ``client``; closes ids idle for ``idle_timeout`` s first. Raises :class:`PoolError`
        (503) if the server or the client's share is full."""
        with self.lock:
            now = time.monotonic()
            for idx in [i for i, e in self.envs.items() if now - e.last_used > self.idle_timeout]:
                self.close(idx)
                self.evicted += 1
            held = sum(e.client == client for e in self.envs.values())
            if held >= self.max_envs_per_client:
                raise PoolError(
                    f"client {client} holds {held} live envs, its maximum (--max-envs-per-client "
                    f"{self.max_envs_per_client}); close unused ones (POST /close) or wait "
                    f"{self.idle_timeout:.0f} s for idle ones to expire",
                    503,
                )
            if len(self.envs) >= self.max_envs:
                raise PoolError(
                    f"the server holds its maximum of {self.max_envs} live envs; close unused ones "
                    f"(POST /close), wait {self.idle_timeout:.0f} s for idle ones to expire, or restart "
                    "the server with a larger --max-envs",
                    503,
                )
            idx = f"{self._next_id}-{secrets.token_urlsafe(12)}"
            self._next_id += 1
            self.envs[idx] = LiveEnv(self.factory(), now, client)
            return idx

    def get(self, idx: str | int) -> LiveEnv:
        """The live env ``idx`` (marked used). Raises :class:`PoolError` (404) naming the fix."""
        live = self.envs.get(str(idx))
        if live is None:
            raise PoolError(
                f"env {idx} does not exist: it was never created, was closed, or was evicted after being idle "
                f"for {self.idle_timeout:.0f} s (ids are the strings POST /create returns); POST /create a new one",
                404,
            )
        live.last_used = time.monotonic()
        return live

    def close(self, idx: str | int) -> None:
        """Free ``idx``. Raises :class:`PoolError` (404) if it is not live."""
        with self.lock:
            live = self.get(idx)
            del self.envs[str(idx)]
            live.env.close()

    def reset(self, idx: str | int, task_index: int | None) -> TextObs:
        """Start task ``task_index`` of the served split in ``idx`` (``None``: the env samples one)."""
        with self.lock:
            live = self.get(idx)
            n = live.env.num_tasks()
            if task_index is not None and not 0 <= task_index < n:
                raise PoolError(
                    f"task {task_index} is out of range: the served split {live.env.split!r} has {n} tasks "
                    f"(0..{n - 1}; GET /info lists their ids)",
                    400,
                )
            td = TensorDict({"task_index": torch.tensor([[-1 if task_index is None else task_index]])}, [1])
            live.env.reset(td)
            live.started, live.done, live.reward, live.steps = True, False, 0.0, 0
            live.task_index = (
                live.env.task_index_of(live.env.current(0).task_id) if task_index is None else task_index
            )
            return live.env.current(0)

    def step(self, idx: str | int, action: str) -> dict[str, Any]:
        """Apply ``action`` in ``idx``: the next observation, ``terminated``, ``truncated`` (the env's step
        limit) and :data:`STEP_INFO_KEYS`; the env is done after either."""
        with self.lock:
            live = self.get(idx)
            if not live.started:
                raise PoolError(f"env {idx} has not been reset yet; POST /reset first", 409)
            env = live.env
            td = TensorDict({"action": text_stack([action], env.batch_size)}, env.batch_size)
            nxt = env.step(td)["next"]
            cur = env.current(0)
            out = {
                "observation": cur.observation,
                "available_actions": list(cur.available_actions),
                "terminated": bool(nxt["terminated"].item()),
                "truncated": bool(nxt["truncated"].item()),
                "reward": float(nxt["reward"].item()),
                "score": float(nxt["score"].item()),
                "success": bool(nxt["success"].item()),
                "invalid": bool(nxt["invalid"].item()),
                "sim_error": bool(nxt["sim_error"].item()),
                "reasoning": str(as_text_list(nxt["reasoning"])[0]),
            }
            live.done = out["terminated"] or out["truncated"]
            live.reward, live.steps = out["reward"], live.steps + 1
            return out

    def current(self, idx: str | int) -> TextObs:
        """The current state of ``idx``. Raises :class:`PoolError` (409) before its first reset."""
        with self.lock:
            live = self.get(idx)
            if not live.started:
                raise PoolError(f"env {idx} has not been reset yet; POST /reset first", 409)
            return live.env.current(0)


def build_pool(
    env: str,
    split: str = "test",
    observation_mode: str = "text",
    data_dir: str | None = None,
    checkpoint: str | None = None,
    tasks: str | None = None,
    real_env: str = "webshop",
    max_envs: int = 64,
    idle_timeout: float = 900,
    max_envs_per_client: int | None = None,
) -> tuple[EnvPool, str]:
    """The env pool for ``env`` and the protocol it speaks (a synthetic env: its ``real_env``'s).

    Raises:
        ValueError: an unknown env, or ``synthetic`` without a ``checkpoint``.
    """
    from dreamgym.envs.registry import make_env

    if env == "webshop":
        kwargs: dict[str, Any] = {"split": split, "observation_mode": observation_mode, "data_dir": data_dir}
        kwargs, protocol = {**kwargs, "max_steps": SERVER_MAX_STEPS}, "webshop"
    elif env == "alfworld":  # the env's own step limit, as upstream's server
        kwargs, protocol = {"split": split, "data_dir": data_dir}, "alfworld"
    elif env == "synthetic":
        if checkpoint is None:
            raise ValueError(
                "--env synthetic needs --checkpoint DIR (an exported experience model, e.g. "
                "artifacts/webshop/experience_model from configs/webshop_experience_sft.yaml)"
            )
        from dreamgym.envs.synthetic import SyntheticEnv

        proto = SyntheticEnv.from_checkpoint(
            checkpoint, real_env=real_env, tasks=tasks, max_steps=SERVER_MAX_STEPS
        )

        def factory() -> TextEnvBase:  # ids share the loaded model and task pool
            return SyntheticEnv(proto.experience, proto.tasks, real_env, [1], SERVER_MAX_STEPS, seed=None)

        return EnvPool(factory, "synthetic", max_envs, idle_timeout, max_envs_per_client), real_env
    else:
        raise ValueError(f"--env {env!r} is not served; use webshop, alfworld or synthetic")
    return EnvPool(
        lambda: make_env(env, batch_size=[1], seed=None, **kwargs),
        env,
        max_envs,
        idle_timeout,
        max_envs_per_client,
    ), protocol

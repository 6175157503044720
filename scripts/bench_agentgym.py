"""Load test of the AgentGym HTTP server on loopback: N concurrent clients x S steps each.

Starts ``python -m dreamgym serve``'s app in-process (uvicorn in a thread) unless ``--url`` names a
running server, then runs ``--clients`` threads; each creates a server env and sends upstream-style
requests (``/reset`` with a goal index, ``/step`` with an action from the listed clickables; a new
episode after ``done`` or every 10 steps). Prints steps/s and step latency percentiles (ms)::

    OMP_NUM_THREADS=1 python scripts/bench_agentgym.py --env webshop --clients 8 --steps 200
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from dreamgym.provenance import result_meta
from dreamgym.serve.server import build_pool, create_app, serve_in_thread


def _client(url: str, steps: int, seed: int, latencies: list[float], errors: list[str]) -> None:
    rng = random.Random(seed)
    with httpx.Client(base_url=url, timeout=60) as c:
        idx = c.post("/create").json()
        for i in range(steps):
            if i % 10 == 0:
                c.post("/reset", json={"env_idx": idx, "session_id": rng.randrange(100)})
            acts = c.get("/available_actions", params={"env_idx": idx}).json()
            clicks = [x for x in acts["clickables"] if x != "search"]
            action = "search[tea]" if acts["has_search_bar"] or not clicks else f"click[{rng.choice(clicks)}]"
            t = time.perf_counter()
            r = c.post("/step", json={"env_idx": idx, "action": action})
            latencies.append(time.perf_counter() - t)
            if r.status_code != 200:
                errors.append(r.text[:200])
            elif r.json()["done"]:
                c.post("/reset", json={"env_idx": idx, "session_id": rng.randrange(100)})
        c.post("/close", json={"env_idx": idx})


def run(url: str, clients: int, steps: int) -> dict:
    """Run the load; returns steps, seconds, steps/s, p50/p99 step latency (ms), errors."""
    latencies: list[float] = []
    errors: list[str] = []
    threads = [
        threading.Thread(target=_client, args=(url, steps, i, latencies, errors)) for i in range(clients)
    ]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    lat = np.array(latencies) * 1000
    return {
        "steps": len(lat),
        "seconds": round(wall, 2),
        "steps_per_s": round(len(lat) / wall, 1),
        "p50_ms": round(float(np.percentile(lat, 50)), 2),
        "p99_ms": round(float(np.percentile(lat, 99)), 2),
        "errors": len(errors),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="webshop", choices=["webshop"], help="served env (WebShop protocol)")
    p.add_argument("--observation-mode", default="text", choices=["text", "abstract"])
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--steps", type=int, default=200, help="steps per client")
    p.add_argument("--url", default=None, help="a running server (default: start one in-process)")
    p.add_argument("--out", default=None, help="also write the figures (with command and commit) as JSON")
    args = p.parse_args()
    if args.url:
        result = run(args.url, args.clients, args.steps)
    else:
        pool, protocol = build_pool(args.env, split="test", observation_mode=args.observation_mode)
        with serve_in_thread(create_app(pool, protocol)) as url:
            result = run(url, args.clients, args.steps)
    print(result)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        meta = result_meta("scripts/bench_agentgym.py")
        Path(args.out).write_text(json.dumps({"_meta": meta, **result}, indent=2) + "\n")


if __name__ == "__main__":
    main()

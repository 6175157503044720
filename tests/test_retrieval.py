"""Replay buffer + usearch retrieval: neighbours, leakage exclusion, incremental add, save/load."""

import numpy as np
import pytest

from dreamgym.retrieval import HashingEncoder, ReplayBuffer, VectorIndex
from dreamgym.schema import Transition


def _t(traj: str, step: int, state: str, action: str, task: str = "t0") -> Transition:
    return Transition(
        task_id=task,
        instruction="buy",
        step=step,
        state=state,
        action=action,
        next_state=state + " next",
        reward=0.0,
        done=False,
        trajectory_id=traj,
    )


@pytest.fixture
def buf():
    b = ReplayBuffer(HashingEncoder(dim=64))
    b.add(
        [
            _t("A", 0, "search page for red shirts", "search[red shirt]", "t0"),
            _t("A", 1, "results red shirt b01 b02", "click[b01]", "t0"),
            _t("B", 0, "search page for red shirts", "search[red shirt cotton]", "t0"),
            _t("C", 0, "item page blue pants size 32", "click[buy now]", "t1"),
            _t("D", 0, "item page blue jeans size 30", "click[buy now]", "t2"),
        ]
    )
    return b


def test_hashing_encoder_is_normalised_and_deterministic():
    e = HashingEncoder(dim=32)
    v = e.encode(["red shirt", "red shirt", ""])
    assert v.shape == (3, 32) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v[:2], axis=1), 1.0) and np.allclose(v[0], v[1]) and not v[2].any()


def test_nearest_neighbour_is_the_similar_transition(buf):
    hits = buf.search(["item page blue pants size 32"], ["click[buy now]"], k=2, exclude="none")[0]
    assert [h.trajectory_id for h in hits] == ["C", "D"]


def test_search_excludes_own_trajectory_and_self(buf):
    q = buf.transitions[1]
    hits = buf.search([q.state], [q.action], k=4, exclude="trajectory", query_ids=["A"])[0]
    assert all(h.trajectory_id != "A" for h in hits) and len(hits) == 3
    hits = buf.search([q.state], [q.action], k=4, exclude="self", query_keys=[1])[0]
    assert q not in hits and any(h.trajectory_id == "A" for h in hits)
    hits = buf.search([q.state], [q.action], k=4, exclude="task", query_ids=["t0"])[0]
    assert {h.task_id for h in hits} == {"t1", "t2"}


def test_batched_search_and_incremental_add(buf):
    res = buf.search(["a", "b", "c"], ["x", "y", "z"], k=2, exclude="none")
    assert len(res) == 3 and all(len(r) == 2 for r in res)
    keys = buf.add([_t("S", 0, "synthetic state about lamps", "click[lamp]")])
    assert keys.tolist() == [5] and len(buf) == 6 and len(buf.index) == 6
    assert (
        buf.search(["synthetic state about lamps"], ["click[lamp]"], k=1, exclude="none")[0][0].trajectory_id
        == "S"
    )


def test_empty_buffer_and_k0():
    b = ReplayBuffer(HashingEncoder(dim=16))
    assert b.search(["s"], ["a"], k=3) == [[]]
    assert VectorIndex(4).search(np.ones((2, 4)), 3)[0].tolist() == [[-1] * 3] * 2


def test_save_load_and_state_dict(buf, tmp_path):
    q = ("results red shirt b01 b02", "click[b01]")
    before = [h.trajectory_id for h in buf.search([q[0]], [q[1]], k=3, exclude="none")[0]]
    buf.save(tmp_path / "buf")
    assert {p.name for p in (tmp_path / "buf").iterdir()} == {
        "transitions.jsonl",
        "index.usearch",
        "buffer.json",
    }
    loaded = ReplayBuffer.load(tmp_path / "buf")
    assert len(loaded) == 5 and loaded.encoder.dim == 64
    assert [h.trajectory_id for h in loaded.search([q[0]], [q[1]], k=3, exclude="none")[0]] == before
    fresh = ReplayBuffer(HashingEncoder(dim=64))
    fresh.load_state_dict(buf.state_dict())
    assert [h.trajectory_id for h in fresh.search([q[0]], [q[1]], k=3, exclude="none")[0]] == before
    with pytest.raises(FileNotFoundError, match="buffer.json"):
        ReplayBuffer.load(tmp_path / "nope")
    with pytest.raises(ValueError, match="encoder"):
        ReplayBuffer(HashingEncoder(dim=32)).load_state_dict(buf.state_dict())


def test_bench_loop_grows_a_buffer_with_retrievable_copies(buf):
    """scripts/bench_loop.py --buffer-sizes: the buffer is filled with jittered copies of its own
    transitions under new trajectory ids, and a query still finds the transition it copies."""
    from script_loader import load_script

    n0 = len(buf)
    load_script("bench_loop").grow_buffer(buf, 5 * n0)
    assert len(buf) == len(buf.index) == 5 * n0
    copies = buf.transitions[n0:]
    assert all("#" in t.trajectory_id for t in copies)
    assert {(t.state, t.action) for t in copies} <= {(t.state, t.action) for t in buf.transitions[:n0]}
    first = buf.transitions[0]
    assert any(t.trajectory_id.startswith("A#") and t.action == first.action for t in copies)
    top = buf.search([first.state], [first.action], k=1, exclude="trajectory", query_ids=["A"])[0][0]
    assert top.trajectory_id.startswith("A#") and (top.state, top.action) == (first.state, first.action)


def test_rerank_keeps_the_exact_top_k_of_the_candidates():
    """``rerank`` asks the graph for r*k candidates and orders them by exact cosine: when the candidates
    are the whole index, the answer is the exact top-k (keys and distances), for one query and a batch."""
    rng = np.random.default_rng(0)
    db = rng.normal(size=(60, 8)).astype(np.float32)
    q = rng.normal(size=(3, 8)).astype(np.float32)
    index = VectorIndex(8, rerank=20)  # 3 * 20 = 60 candidates: every vector
    index.add(np.arange(60), db)
    sims = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (db / np.linalg.norm(db, axis=1, keepdims=True)).T
    want = np.argsort(-sims, axis=1)[:, :3]
    keys, dists = index.search(q, 3)
    assert keys.tolist() == want.tolist()
    np.testing.assert_allclose(dists, 1 - np.take_along_axis(sims, want, 1), atol=1e-5)
    one, _ = index.search(q[:1], 3)
    assert one.tolist() == want[:1].tolist()
    small = VectorIndex(8, rerank=4)
    small.add(np.arange(2), db[:2])  # fewer vectors than asked: padded with -1 / inf, as without rerank
    keys, dists = small.search(q[:1], 3)
    assert keys[0, 2] == -1 and np.isinf(dists[0, 2]) and sorted(keys[0, :2].tolist()) == [0, 1]
    with pytest.raises(ValueError, match="rerank must be >= 1"):
        VectorIndex(8, rerank=0)

"""Replay buffer + usearch retrieval: neighbours, leakage exclusion, incremental add, save/load."""

import numpy as np
import pytest

from dreamgym.retrieval import HashingEncoder, ReplayBuffer, VectorIndex
from dreamgym.retrieval.index import BucketIndex, grow_vectors, index_from_bytes, load_index
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


@pytest.fixture(params=[0.0, 0.1], ids=["graph", "buckets"])
def buf(request):
    b = ReplayBuffer(HashingEncoder(dim=64), bucket_radius=request.param)
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


def test_same_task_steps_lead_the_neighbours_within_the_exclusions(buf):
    """``prefer_tasks``: the task's real steps with the query's action come first (ALFWorld: what a place
    holds is per game), then the most similar; its own episode stays excluded, written-back synthetic
    steps are never preferred, and a step added later is found."""
    q_state, q_action = "item page blue pants size 32", "click[buy now]"
    plain = buf.search([q_state], [q_action], k=2, exclude="none")[0]
    assert [h.trajectory_id for h in plain] == ["C", "D"]
    first = buf.search([q_state], [q_action], k=2, exclude="none", prefer_tasks=["t2"])[0]
    assert [h.trajectory_id for h in first] == ["D", "C"]
    assert (
        buf.search([q_state], [q_action], k=2, exclude="trajectory", query_ids=["D"], prefer_tasks=["t2"])[0][
            0
        ].trajectory_id
        == "C"
    )  # its own episode is still out
    assert (
        buf.search([q_state], ["click[b01]"], k=1, exclude="none", prefer_tasks=["t0"])[0][0].trajectory_id
        == "A"
    )
    assert buf.search([q_state], [q_action], k=2, exclude="none", prefer_tasks=[None]) == [plain]
    synthetic = _t("S", 0, "anything", "click[buy now]", "t9")
    synthetic.source = "synthetic"
    buf.add([synthetic, _t("E", 0, "item page for t9", "click[buy now]", "t9")])
    assert (
        buf.search([q_state], [q_action], k=1, exclude="none", prefer_tasks=["t9"])[0][0].trajectory_id == "E"
    )


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


def _exact(db: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    sims = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (db / np.linalg.norm(db, axis=1, keepdims=True)).T
    return np.argsort(-sims, axis=1, kind="stable")[:, :k]


def test_bucket_index_groups_near_duplicates_and_scores_buckets_exactly(tmp_path):
    """Jittered copies join their source's bucket; probing every bucket is exact search; the layout
    survives bytes and file round trips (``index_from_bytes``/``load_index`` tell the layouts apart)."""
    rng = np.random.default_rng(0)
    base = rng.normal(size=(40, 32)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    db, src = grow_vectors(base, 400, 0.01, rng)
    q = base[:5] + rng.normal(0, 0.05, (5, 32)).astype(np.float32)
    index = BucketIndex(32, radius=0.1, probe=40, chunk=64)
    index.add(np.arange(100, 500), db)  # keys need not be rows
    assert len(index) == 400 and index.buckets == 40
    keys, dists = index.search(q, 10)
    assert (keys - 100).tolist() == _exact(db, q, 10).tolist()
    assert np.all(np.diff(dists, axis=1) >= 0) and np.allclose(
        index.get(keys[0, :1]), db[keys[0, 0] - 100], atol=1e-6
    )
    index.probe = 1  # the nearest bucket only: its members, still ranked exactly
    near, _ = index.search(q[:1], 10)
    assert set(src[near[0] - 100]) == {0}
    for loaded in (index_from_bytes(index.to_bytes(), 32), _saved(index, tmp_path / "i.usearch")):
        assert isinstance(loaded, BucketIndex) and loaded.buckets == 40
        assert loaded.search(q, 10)[0].tolist() == index.search(q, 10)[0].tolist()
    plain = VectorIndex(32)
    plain.add(np.arange(3), db[:3])
    assert isinstance(index_from_bytes(plain.to_bytes(), 32), VectorIndex)
    empty = BucketIndex(32)
    assert empty.search(q, 3)[0].tolist() == [[-1] * 3] * 5
    with pytest.raises(ValueError, match="radius must be in"):
        BucketIndex(32, radius=0)


def _saved(index, path):
    index.save(path)
    return load_index(path, index.ndim)


def test_sft_examples_and_the_saved_format_carry_same_task_first():
    from datamodules.trajectories import make_examples
    from dreamgym.modeling.formats import ExperienceFormat
    from dreamgym.schema import Trajectory

    def traj(tid, task, state):
        return Trajectory(tid, task, "put a mug in shelf", "alfworld", "train", "offline", "expert",
                          [_t(tid, 0, state, "go to shelf 1", task)])  # fmt: skip

    trajs = [traj("A", "g1", "you are in the kitchen"), traj("B", "g1", "a room with a sofa"),
             traj("C", "g2", "you are in the kitchen")]  # fmt: skip
    buf = ReplayBuffer(HashingEncoder(dim=64))
    for t in trajs:
        buf.add(t.transitions)
    plain = make_examples(trajs[:1], ExperienceFormat(k=1), buf)[0]
    assert plain["neighbour_ids"] == ["C"]  # the most similar state, another game
    fmt = ExperienceFormat(k=1, same_task_first=True)
    assert make_examples(trajs[:1], fmt, buf)[0]["neighbour_ids"] == ["B"]  # the same game's other episode
    assert ExperienceFormat.from_dict(fmt.to_dict()) == fmt


@pytest.mark.parametrize("radius", [0.0, 0.3], ids=["graph", "buckets"])
def test_a_restored_buffer_grows_the_index_an_uninterrupted_one_grows(radius, tmp_path):
    """usearch does not keep the generator that draws a new node's graph level in a serialised index, so
    growing an index restored from its bytes gave another graph than growing it without the round trip
    (a resumed DreamGym fit, which writes synthetic steps back, retrieved other neighbours from its sixth
    iteration on). The state keeps the index it grew from and replays the adds."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(300)]

    def batch(tag: str, n: int) -> list[Transition]:
        return [
            _t(f"{tag}{i}", 0, " ".join(rng.choice(words, 8)), f"go to {rng.choice(words)}", f"{tag}{i % 7}")
            for i in range(n)
        ]

    seed, first, second = batch("s", 300), batch("a", 150), batch("b", 150)
    built = ReplayBuffer(HashingEncoder(dim=32), bucket_radius=radius)
    built.add(seed)
    built.save(tmp_path / "buf")
    uninterrupted, resumed = ReplayBuffer.load(tmp_path / "buf"), ReplayBuffer.load(tmp_path / "buf")
    for b in (uninterrupted, resumed):
        b.add(first)
    uninterrupted.add(second)
    state = resumed.state_dict()
    resumed = ReplayBuffer(HashingEncoder(dim=32))
    resumed.load_state_dict(state)
    resumed.add(second)
    assert resumed.index.to_bytes() == uninterrupted.index.to_bytes()
    queries = batch("q", 40)
    hits = [
        [
            [h.trajectory_id for h in row]
            for row in b.search([t.state for t in queries], [t.action for t in queries], k=5)
        ]
        for b in (uninterrupted, resumed)
    ]
    assert hits[0] == hits[1]
    # a second checkpoint after the resume still grows from the loaded index
    again = ReplayBuffer(HashingEncoder(dim=32))
    again.load_state_dict(resumed.state_dict())
    assert again.index.to_bytes() == uninterrupted.index.to_bytes() and len(again) == 600

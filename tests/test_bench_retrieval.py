"""scripts/bench_retrieval.py --distinct: real transitions only, each (state, action) pair once, no filler."""

from __future__ import annotations

import json

import pytest

from dreamgym.collect import collect_trajectories
from tests.script_loader import load_script

bench = load_script("bench_retrieval")


def test_distinct_drops_repeated_pairs_and_refuses_a_size_it_cannot_fill(tmp_path, capsys):
    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    collect_trajectories("webshop", "train", 3, 3, out=train, seed=0, teacher=False)
    collect_trajectories("webshop", "test", 2, 0, out=test, seed=0, teacher=False)
    once = sum(len(json.loads(line)["transitions"]) for line in train.read_text().splitlines())
    db, data = bench.distinct_vectors([str(train), str(train)], limit=10**6, chunk=4)
    assert data["transitions_read"] == 2 * once and data["distinct"] == len(db) <= once
    assert data["duplicates_dropped"] >= once  # the second copy of the file adds nothing
    assert len({row.tobytes() for row in db}) == len(db)
    first, _ = bench.distinct_vectors([str(train)], limit=5)
    assert len(first) == 5 and (first == db[:5]).all()
    out = tmp_path / "r.json"
    argv = ["--distinct", "--train", str(train), "--test", str(test), "--queries", "4", "--batch", "2"]
    result = bench.main([*argv, "--sizes", str(len(db)), "--k", "3", "--out", str(out)])
    assert result["data"]["distinct"] == len(db) and result["rows"][0]["n"] == len(db)
    assert json.loads(out.read_text())["rows"][0]["real_vectors"] == len(db)
    with pytest.raises(SystemExit, match=f"holds {len(db)} distinct"):
        bench.main([*argv, "--sizes", str(len(db) + 1)])

"""dreamgym.memory: freed heap memory goes back to the OS during long fits."""

import os

import pytest

from dreamgym import memory


def test_release_free_heap_returns_memory_a_fragmented_heap_holds():
    if memory._malloc_trim() is None:
        pytest.skip("no malloc_trim in this C library (not glibc)")

    def resident_mb() -> float:
        return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    blocks = [bytearray(100_000) for _ in range(3000)]  # ~300 MB of heap chunks below mmap's threshold
    keep = blocks[-1]  # a live chunk at the heap's top: free() alone cannot shrink the heap
    del blocks
    before = resident_mb()
    assert memory.release_free_heap() is True
    assert before - resident_mb() > 100, (before, resident_mb())
    del keep


def test_callback_releases_at_most_every_interval_and_after_validation(monkeypatch):
    calls, clock = [], iter([0.0, 10.0, 31.0, 40.0, 62.0, 70.0])
    monkeypatch.setattr(memory, "release_free_heap", lambda: calls.append(1) or True)
    monkeypatch.setattr(memory.time, "monotonic", lambda: next(clock))
    cb = memory.ReleaseFreeHeap(every_s=30)  # created at 0 s
    for _ in range(4):  # batches end at 10 s (quiet), 31 s (release), 40 s (quiet), 62 s (release)
        cb.on_train_batch_end(None, None, None, None, 0)
    assert len(calls) == 2
    cb.on_validation_end(None, None)  # always
    assert len(calls) == 3
    with pytest.raises(ValueError, match="ReleaseFreeHeap.every_s=-1"):
        memory.ReleaseFreeHeap(every_s=-1)

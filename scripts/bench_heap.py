"""Resident memory of a CPU fit with variable-length batches under glibc's allocator settings.

    python scripts/bench_heap.py default 120     # glibc's defaults
    python scripts/bench_heap.py trim 120        # malloc_trim(0) every 10 steps
    python scripts/bench_heap.py mmap65536 120   # a fixed M_MMAP_THRESHOLD of 64 KB (MALLOC_MMAP_THRESHOLD_)

The `small` preset's shape (4 layers, 256 wide, vocabulary 4096) trains on random token batches of 8 x
150-1,000 tokens with AdamW; it prints the resident set every 50 steps, and at the end with the process's
user and system CPU seconds and its peak. Linux + glibc only (reads ``/proc``, calls ``libc.so.6``).
docs/history.md ("Memory of long CPU runs") quotes it; `dreamgym.memory.ReleaseFreeHeap` is the outcome.
"""

from __future__ import annotations

import ctypes
import os
import random
import resource
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM

M_MMAP_THRESHOLD = -3


def resident_mb() -> int:
    return int(open(f"/proc/{os.getpid()}/statm").read().split()[1]) * 4096 // 2**20


def main(mode: str, steps: int) -> None:
    libc = ctypes.CDLL("libc.so.6")
    if mode.startswith("mmap"):
        print("mallopt", libc.mallopt(M_MMAP_THRESHOLD, int(mode[len("mmap") :])))
    torch.manual_seed(0)
    random.seed(0)
    config = LlamaConfig(vocab_size=4096, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                         num_attention_heads=4, max_position_embeddings=2048)  # fmt: skip
    model = LlamaForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters(), 1e-3)
    for step in range(steps):
        x = torch.randint(0, 4096, (8, random.randint(150, 1000)))
        model(x, labels=x).loss.backward()
        opt.step()
        opt.zero_grad()
        if mode == "trim" and step % 10 == 9:
            libc.malloc_trim(0)
        if step % 50 == 0:
            print(step, resident_mb(), "MB", flush=True)
    r = resource.getrusage(resource.RUSAGE_SELF)
    print("end", resident_mb(), "MB", "user", round(r.ru_utime, 1), "sys", round(r.ru_stime, 1),
          "maxrss", r.ru_maxrss // 1024)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))

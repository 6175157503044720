#!/usr/bin/env bash
# The data of the 1M distinct-transition retrieval benchmark (issue 61 item 6): scripted agents playing the real
# WebShop env on its train split, in 20,000-episode chunks under artifacts/retrieval/ (resumable: a chunk with its
# .done marker is kept). Distinct (state, action) pairs after each group, as scripts/bench_retrieval.py --distinct
# counts them: parts 0-10 (human goals; expert, random, visible-text, near-miss) 485,579 of 2.06 M transitions;
# parts 11-16 (synthetic goals, random and near-miss) 653,808; parts 20-22 (random_queries: queries of any
# instruction words) 1,064,025. The span-query random agent saturates; random_queries reaches new results pages.
# About 7 minutes per chunk on one core of a 2-core AVX2 host.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
PY=${PYTHON:-.venv/bin/python}
mkdir -p artifacts/retrieval
chunk() {  # chunk <i> <collect arguments...>
  local f=artifacts/retrieval/train_1m_part$1.jsonl
  shift
  [ -f "$f.done" ] && return 0
  echo "chunk $f start $(date +%T)"
  "$PY" -m dreamgym collect --env webshop --split train --no-teacher --batch-size 32 --overwrite --out "$f" "$@"
  touch "$f.done"
}
for i in 0 1; do
  chunk $i --seed $((100 + i)) --n-expert 2500 --n-random 7500 --n-non-oracle 5000 --n-near-miss 5000
done
for i in 2 3 4 5 6 7 8 9 10; do
  chunk $i --seed $((100 + i)) --n-expert 0 --n-random 15000 --n-near-miss 5000
done
for i in 11 12 13 14 15 16; do
  chunk $i --seed $((100 + i)) --env-kwargs '{"human_goals": false}' --max-steps 30 --n-expert 0 --n-random 15000 \
    --n-near-miss 5000
done
for i in 20 21 22; do
  chunk $i --seed $((200 + i)) --max-steps 30 --n-expert 0 --n-random 0 --mix '{"random_queries": 20000}'
done
echo "collected; next: python scripts/bench_retrieval.py --distinct --train \$(ls artifacts/retrieval/train_1m_part*.jsonl | sort -V) ..."

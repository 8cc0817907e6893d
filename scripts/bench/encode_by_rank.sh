#!/bin/bash
# Issue 21's encoding-at-scale check (docs/DISTRIBUTED.md): the 102,868-text corpus of
# scripts/data/search_corpus.py encoded by one process and by 2 processes launched as torchrun
# launches them (each reads its byte share, writes its part); compares the parts, in rank
# order, with the single-process output. float32 (bf16 roundings depend on batch padding).
# PY: a python with numpy for the comparison (default python3). LINES_USED=N: only the
# corpus's first N lines (the whole corpus in float32 takes about 15 min per launch on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
OUT=${OUT:-runs/encode-by-rank}
mkdir -p "$OUT"
[ -f runs/search/corpus.jsonl ] || python3 scripts/data/search_corpus.py
LINES=${LINES_USED:-0}   # 0: the whole corpus; N: its first N lines (runs/encode-by-rank/input.jsonl)
if [ "$LINES" -gt 0 ]; then head -n "$LINES" runs/search/corpus.jsonl > "$OUT/input.jsonl"; IN="$OUT/input.jsonl"; else IN=runs/search/corpus.jsonl; fi
lscpu | grep "Model name"
s=$(date +%s.%N)
OMP_NUM_THREADS=2 $N encode --input "$IN" --output "$OUT/one.npy" --dtype float32 2>&1 | tail -1
echo "1 process x 2 threads: $(echo "$(date +%s.%N) - $s" | bc) s"
s=$(date +%s.%N)
port=$((29000 + RANDOM % 1000))
for r in 0 1; do
  OMP_NUM_THREADS=1 WORLD_SIZE=2 RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    $N encode --input "$IN" --output "$OUT/two.npy" --dtype float32 2>&1 | tail -1 &
done
wait
echo "2 processes x 1 thread: $(echo "$(date +%s.%N) - $s" | bc) s"
${PY:-python3} - "$OUT" <<'PY'
import sys, numpy as np
d = sys.argv[1]
one = np.load(f"{d}/one.npy")
two = np.concatenate([np.load(f"{d}/two.part-{r:05d}-of-00002.npy") for r in range(2)])
print(f"rows {one.shape[0]} vs {two.shape[0]} (parts {[np.load(f'{d}/two.part-{r:05d}-of-00002.npy').shape[0] for r in range(2)]}); "
      f"max |difference| {np.abs(one - two).max():.2e}; identical rows {int((one == two).all(axis=1).sum())}")
PY

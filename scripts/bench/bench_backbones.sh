#!/usr/bin/env bash
# Encode speed of every backbone against sentence-transformers (transformers + PyTorch) on the
# same machine in the same run (issue 22; BENCHMARKS.md "Backbones"): real-size shapes with
# random weights (scripts/data/make_bench_models.py), the first 500 STS-B test pairs (1000 sentences),
# batch 32, float32, the full depth of each cut model, best of REPEATS after a warm-up. Run twice
# (ROUNDS) in alternation to see the noise of a shared 2-core machine.
#
#   PY=/path/to/venv/bin/python scripts/bench/bench_backbones.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:?set PY to a Python with sentence-transformers}
N=${NEST:-target/release/nest}
R=${REPEATS:-3}
ROUNDS=${ROUNDS:-2}
[ -f runs/bench-models/stsb-500.tsv ] || "$PY" scripts/data/make_bench_models.py
lscpu | grep -E "Model name|^CPU\(s\)"
grep -o -w -E "avx512_bf16|avx512_vnni|amx_bf16|amx_int8" /proc/cpuinfo | sort -u | tr '\n' ' '; echo
for round in $(seq "$ROUNDS"); do
  for m in xlmr-base-l6:6 modernbert-base-l6:6 qwen3-0.6b-l4:4 embeddinggemma-l6:6; do
    name=${m%%:*}; l=${m##*:}
    echo "=== round $round: $name"
    "$N" bench encode --model "runs/bench-models/$name" --data runs/bench-models/stsb-500.tsv \
      --layers "$l" --repeats "$R" --dtype float32 --python "$PY" 2>&1 | grep -E "sentences/s|^\| [0-9]"
  done
done

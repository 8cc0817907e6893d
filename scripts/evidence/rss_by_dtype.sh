#!/usr/bin/env bash
# Memory by arithmetic (docs/PRECISION.md, "Memory"): for each model and dtype, the peak RSS of
# `nest encode` over the first 200 STS-B test sentences (the peak comes at load), and VmRSS /
# VmHWM of `nest serve --workers 1` once /health is 200 and one request is answered.
#
#   BIN=target/release/nest scripts/evidence/rss_by_dtype.sh [MODEL_DIR ...]   # default: MiniLM and MPNet
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release/nest}
PORT=${PORT:-18777}
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(models/all-MiniLM-L6-v2 models/all-mpnet-base-v2)
texts=$(mktemp)
pid=
trap 'rm -f "$texts" "$texts.npy"; [ -z "$pid" ] || kill $pid 2>/dev/null || true' EXIT
awk -F'\t' 'NR > 1 && NR <= 201 {print $1}' ../shared/datasets/stsb/test.tsv >"$texts"
for m in "${models[@]}"; do
  for dt in float32 bf16 int8; do
    peak=$(/usr/bin/time -f "%M" "$BIN" --threads 2 encode --model "$m" --dtype $dt \
      --input "$texts" --output "$texts.npy" 2>&1 >/dev/null | tail -1)
    "$BIN" --threads 2 serve --model "$m" --dtype $dt --workers 1 --port "$PORT" >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 120); do curl -sf "localhost:$PORT/health" >/dev/null 2>&1 && break; sleep 1; done
    curl -sf "localhost:$PORT/v1/embeddings" -H 'content-type: application/json' \
      -d "{\"input\":[\"a man is playing a guitar\",\"a dog runs\"],\"model\":\"$(basename "$m")\"}" >/dev/null
    rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
    hwm=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
    kill $pid
    wait $pid 2>/dev/null || true
    pid=
    echo "$m $dt: encode peak $((peak / 1024)) MiB; serving VmRSS $((rss / 1024)) MiB, VmHWM $((hwm / 1024)) MiB"
  done
done

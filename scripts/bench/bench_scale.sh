#!/bin/bash
# Issue 21's speed and memory figures (docs/DISTRIBUTED.md, BENCHMARKS.md "Scale-out"):
#   1. data parallel on one machine: 1 process x 2 threads against 2 processes x 1 thread
#      (c10d Gloo on loopback), the same global batch; step time and bytes sent per rank per step;
#   2. GradCache: peak RSS and step time at global batch 32, 256, 1024 with chunks of 32,
#      against the plain batch.
# MiniLM (models/all-MiniLM-L6-v2), MRL + MNRL on SNLI triplets (dev), 32 tokens, float32,
# dropout 0. Usage: scripts/bench/bench_scale.sh [STEPS]   (default 6 steps per configuration;
# PARTS="dp gc" by default, PARTS=gc for the GradCache part only)
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
STEPS=${1:-6}
OUT=${OUT:-/tmp/nest-bench-scale}
rm -rf "$OUT"; mkdir -p "$OUT"
lscpu | grep -E "Model name|Flags" | sed 's/^/# /' | cut -c1-200
common=(--recipe recipes/mrl-snli.toml --max-steps "$STEPS" --epochs 1 --dropout 0.0 --eval-data ""
        --save-every 0 --max-length 32 --dtype float32)

# step time: median over steps 2.. of the gaps in metrics.jsonl's "seconds"
step_ms() {
  python3 - "$1" <<'PY'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
t = [r["seconds"] for r in rows]
gaps = [b - a for a, b in zip(t, t[1:])]
last = rows[-1]
per_step = last.get("comm_bytes", 0) / last["step"]
print(f"{1000 * statistics.median(gaps):.0f} ms/step, {per_step / 1e6:.1f} MB sent per rank per step, "
      f"comm {1000 * last.get('comm_seconds', 0) / last['step']:.0f} ms/step")
PY
}

PARTS=${PARTS:-dp gc}
if [[ $PARTS == *dp* ]]; then
echo "## data parallel, global batch 32"
OMP_NUM_THREADS=2 $N train "${common[@]}" --batch-size 32 --run-dir "$OUT/dp1" 2>/dev/null
echo "1 process x 2 threads: $(step_ms "$OUT/dp1/metrics.jsonl")"
port=$((29000 + RANDOM % 1000))
for r in 0 1; do
  OMP_NUM_THREADS=1 WORLD_SIZE=2 RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    $N train "${common[@]}" --batch-size 32 --run-dir "$OUT/dp2" 2>/dev/null &
done
wait
echo "2 processes x 1 thread: $(step_ms "$OUT/dp2/metrics.jsonl") (rank 1: $(step_ms "$OUT/dp2/ranks/rank1.jsonl"))"
fi
[[ $PARTS == *gc* ]] || exit 0

echo "## GradCache (chunks of 32) against the plain batch"
for b in 32 256 1024; do
  for mode in plain cached; do
    extra=(); [ $mode = cached ] && extra=(--mini-batch-size 32)
    [ $mode = cached ] && [ $b = 32 ] && continue   # a chunk of 32 in a batch of 32 is the plain batch
    steps=$STEPS; [ $b = 1024 ] && steps=3
    run="$OUT/gc-$b-$mode"
    /usr/bin/time -v $N train "${common[@]}" --max-steps $steps --batch-size $b "${extra[@]}" \
      --run-dir "$run" 2> "$run.time" >/dev/null || { echo "batch $b $mode: failed (see $run.time)"; continue; }
    rss=$(grep "Maximum resident" "$run.time" | awk '{printf "%.2f", $NF / 1048576}')
    echo "batch $b $mode: $(step_ms "$run/metrics.jsonl" | cut -d, -f1), peak RSS $rss GiB"
  done
done

#!/usr/bin/env bash
# Server benchmark of BENCHMARKS.md: 64 concurrent clients for 60 s against loopback, one text
# per request (STS-B test sentences), Nest at layers 6 and 3 in each arithmetic and a peer
# server on the same model and machine in the same run, all with at most 32 inputs per forward
# batch.
#
#   scripts/bench/bench_serve.sh [infinity|st]      (peer; default: infinity if it starts, else st)
#
# NEST_DTYPES: Nest's arithmetics (default "float32 auto int8"; layers 3 is run for the first
# two). INF_CONFIGS: Infinity's configurations, engine-dtype (default "torch-float32
# torch-bfloat16 optimum-int8"; optimum-int8 serves the ONNX Runtime int8 model that
# scripts/bench/peer_onnx.py writes). NEST_WORKERS: Nest's --workers (default 1). PEER_PY: the Python with infinity-emb (default
# /work/venv-inf/bin/python) or with sentence-transformers (default /work/venv/bin/python).
# Prints one JSON line per run.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
M=${MODEL:-models/all-MiniLM-L6-v2}
T=${TEXTS:-runs/search/queries-sts.txt}
S=${SECONDS_PER_RUN:-60}
C=${CLIENTS:-64}
NEST_DTYPES=${NEST_DTYPES:-float32 auto int8}
NEST_WORKERS=${NEST_WORKERS:-1}
INF_CONFIGS=${INF_CONFIGS:-torch-float32 torch-bfloat16 optimum-int8}
[ -f "$T" ] || python3 scripts/data/search_corpus.py >/dev/null
T=$(realpath "$T")
wait_health() { # url pid
  for _ in $(seq 600); do
    curl -sf "$1/health" >/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}

k=0
for dt in $NEST_DTYPES; do
  $N serve --model "$M" --port 8080 --allow-any-point --max-batch-inputs 32 --dtype "$dt" \
    --workers "$NEST_WORKERS" 2>/tmp/nest-serve.log &
  pid=$!
  wait_health http://127.0.0.1:8080 $pid
  layers="6 3"; [ $k -ge 2 ] && layers=6
  for l in $layers; do
    $N bench serve --url http://127.0.0.1:8080 --clients "$C" --seconds "$S" --texts "$T" \
      --layer $l --pid $pid --label "nest-$dt-layers$l-workers$NEST_WORKERS"
  done
  kill -TERM $pid; wait $pid || true
  k=$((k + 1))
done

peer=${1:-infinity}
if [ "$peer" = infinity ]; then
  PY=${PEER_PY:-/work/venv-inf/bin/python}
  onnx=/tmp/peer-$(basename "$M")
  for cfg in $INF_CONFIGS; do
    engine=${cfg%%-*} dtype=${cfg#*-} dir=$(realpath "$M") id=$(realpath "$M")
    if [ "$engine" = optimum ]; then
      HF_HUB_OFFLINE=1 "$PY" scripts/bench/peer_onnx.py "$M" "$onnx" >/dev/null
      dir=$onnx id=. # see scripts/bench/peer_onnx.py for why Infinity starts inside the folder
      extra=()
    else
      extra=(--dtype "$dtype" --no-bettertransformer)
    fi
    (cd "$dir" && HF_HUB_OFFLINE=1 exec "$PY" -m infinity_emb.cli v2 --model-id "$id" \
      --port 8081 --batch-size 32 --url-prefix /v1 --engine "$engine" --device cpu \
      --no-model-warmup "${extra[@]}") >/tmp/peer-$cfg.log 2>&1 &
    ppid=$!
    if ! wait_health http://127.0.0.1:8081 $ppid; then
      echo "infinity $cfg did not start (see /tmp/peer-$cfg.log)" >&2
      kill $ppid 2>/dev/null || true
      continue
    fi
    $N bench serve --url http://127.0.0.1:8081 --clients "$C" --seconds "$S" --texts "$T" \
      --model "$id" --pid $ppid --label "infinity-$cfg"
    kill $ppid; wait $ppid 2>/dev/null || true
  done
  exit 0
fi
PY=${PEER_PY:-/work/venv/bin/python}
"$PY" scripts/bench/peer_st_server.py --model "$M" --port 8081 --max-batch 32 >/tmp/peer.log 2>&1 &
ppid=$!
wait_health http://127.0.0.1:8081 $ppid
$N bench serve --url http://127.0.0.1:8081 --clients "$C" --seconds "$S" --texts "$T" --model "$M" --pid $ppid --label "peer-st"
kill $ppid; wait $ppid 2>/dev/null || true

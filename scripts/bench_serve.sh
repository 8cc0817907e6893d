#!/usr/bin/env bash
# Server benchmark of BENCHMARKS.md: 64 concurrent clients for 60 s against loopback, one text
# per request (STS-B test sentences), Nest at layers 6 and 3 and a peer server on the same model
# and machine in the same run, all with at most 32 inputs per forward batch.
#
#   scripts/bench_serve.sh [infinity|st]      (peer; default: infinity if it starts, else st)
#
# PEER_PY: the Python with infinity-emb (default /work/venv-inf/bin/python) or with
# sentence-transformers (default /work/venv/bin/python). Prints one JSON line per run.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${NEST:-target/release/nest}
M=${MODEL:-models/all-MiniLM-L6-v2}
T=${TEXTS:-runs/search/queries-sts.txt}
S=${SECONDS_PER_RUN:-60}
C=${CLIENTS:-64}
[ -f "$T" ] || python3 scripts/search_corpus.py >/dev/null
wait_health() { # url pid
  for _ in $(seq 600); do
    curl -sf "$1/health" >/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}

$N serve --model "$M" --port 8080 --allow-any-point --max-batch-inputs 32 2>/tmp/nest-serve.log &
pid=$!
wait_health http://127.0.0.1:8080 $pid
for l in 6 3; do
  $N bench serve --url http://127.0.0.1:8080 --clients "$C" --seconds "$S" --texts "$T" --layer $l --pid $pid --label "nest-layers$l"
done
kill -TERM $pid; wait $pid || true

peer=${1:-infinity}
if [ "$peer" = infinity ]; then
  PY=${PEER_PY:-/work/venv-inf/bin/python}
  HF_HUB_OFFLINE=1 "$PY" -m infinity_emb.cli v2 --model-id "$M" --port 8081 --batch-size 32 --url-prefix /v1 \
    --engine torch --device cpu --no-bettertransformer --no-model-warmup >/tmp/peer.log 2>&1 &
  ppid=$!
  if ! wait_health http://127.0.0.1:8081 $ppid; then
    echo "infinity did not start (see /tmp/peer.log); falling back to sentence-transformers" >&2
    kill $ppid 2>/dev/null || true; peer=st
  fi
fi
if [ "$peer" = st ]; then
  PY=${PEER_PY:-/work/venv/bin/python}
  "$PY" scripts/peer_st_server.py --model "$M" --port 8081 --max-batch 32 >/tmp/peer.log 2>&1 &
  ppid=$!
  wait_health http://127.0.0.1:8081 $ppid
fi
$N bench serve --url http://127.0.0.1:8081 --clients "$C" --seconds "$S" --texts "$T" --model "$M" --pid $ppid --label "peer-$peer"
kill $ppid; wait $ppid 2>/dev/null || true

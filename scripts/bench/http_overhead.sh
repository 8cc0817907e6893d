#!/usr/bin/env bash
# Issue 39: what the HTTP layer costs at batch 1, with the client off the server's core. The
# server (`nest serve --index`, 1 libtorch thread; tokio sizes its runtime to the one core it
# is given) is pinned to core 0, the one-client load generator to core 1; in-process search
# (`nest bench search --end-to-end`: embed one query, run the funnel; what POST /v1/search does
# without HTTP) runs pinned to core 0 with 1 thread. ROUNDS (2) interleaved rounds of both, each
# HTTP run SECONDS_PER_RUN (20) long. Needs the index of scripts/bench/bench_serve_retrieval.sh.
#   scripts/bench/http_overhead.sh     then: runs/http-overhead/*.json, the in-process lines in its log
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
S=${SECONDS_PER_RUN:-20}
ROUNDS=${ROUNDS:-2}
R=runs/http-overhead
mkdir -p $R
[ -f runs/serve39/idx/index.json ] || { echo "run scripts/bench/bench_serve_retrieval.sh first (the index)" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "needs 2 cores: one for the server, one for the client" >&2; exit 1; }
lscpu | grep -E 'Model name' | sed 's/^/# /'
wait_health() { for _ in $(seq 600); do curl -sf "$1/health" >/dev/null && return 0; sleep 0.5; done; return 1; }
FUNNELS=("float32:384" "binary:384@100>float32:384")
for round in $(seq "$ROUNDS"); do
  echo "== round $round: in-process, core 0, 1 thread"
  taskset -c 0 $N --threads 1 bench search --index runs/serve39/idx --queries runs/serve39/queries.txt \
    --max-queries 300 --end-to-end --funnels "${FUNNELS[1]}"
  echo "== round $round: HTTP, server on core 0, client on core 1"
  NEST_DTYPE=float32 taskset -c 0 $N --threads 1 serve --model models/all-MiniLM-L6-v2 \
    --index runs/serve39/idx --port 8093 2>/tmp/nest-http-overhead.log &
  pid=$!
  trap 'kill -TERM $pid 2>/dev/null || true' EXIT
  wait_health http://127.0.0.1:8093
  for f in "${FUNNELS[@]}"; do
    taskset -c 1 $N bench serve --url http://127.0.0.1:8093 --clients 1 --seconds "$S" \
      --texts runs/serve39/queries.txt --path /v1/search --field "funnel=$f" --field k=10 \
      --label "http 1 client $f round $round" > "$R/http-$round-${f//[^a-z0-9]/_}.json"
    python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print('%s: %.1f QPS, p50 %.2f ms, errors %d' % (d['label'], d['requests_per_s'], d['p50_ms'], d['errors']))" \
      "$R/http-$round-${f//[^a-z0-9]/_}.json"
  done
  kill -TERM $pid; wait $pid || true
  trap - EXIT
done

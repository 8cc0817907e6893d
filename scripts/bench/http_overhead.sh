#!/usr/bin/env bash
# Issue 39: what the HTTP layer costs at batch 1, with the client off the server's core. The
# server (`nest serve --index`, 1 libtorch thread) is pinned to core 0, the one-client load
# generator to core 1. Each round, per binary:
#   - in-process (`nest bench search --end-to-end`: embed one query, run the funnel; what
#     POST /v1/search does without HTTP), pinned to core 0 with 1 thread, over the same queries
#     the client sends (every line of the file); the server is up but idle;
#   - paired (`--paired-url`): each query in-process, then the same query through the server by
#     a plain keep-alive client thread on core 1, timed a few ms apart, so that the drift of a
#     shared machine's speed (minutes long, often 10-20%) falls on both alike;
#   - HTTP: `nest bench serve`, 1 client, SECONDS_PER_RUN (20) per funnel.
# ROUNDS (2) rounds. With BASELINE=path/to/another/nest, each round also runs its server and
# client (the in-process and paired harness stays NEST's, whose in-process path is the same
# code), interleaved: an A/B in one run. Needs the index of scripts/bench/bench_serve_retrieval.sh.
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
BINS=("$N")
[ -n "${BASELINE:-}" ] && BINS+=("$BASELINE")
for round in $(seq "$ROUNDS"); do
  for bin in "${BINS[@]}"; do
    tag=$(basename "$bin")
    NEST_DTYPE=float32 taskset -c 0 "$bin" --threads 1 serve --model models/all-MiniLM-L6-v2 \
      --index runs/serve39/idx --port 8093 2>/tmp/nest-http-overhead.log &
    pid=$!
    trap 'kill -TERM $pid 2>/dev/null || true' EXIT
    wait_health http://127.0.0.1:8093
    echo "== round $round, server $bin: in-process and paired, core 0, 1 thread ($(uptime | sed 's/.*load/load/'))"
    taskset -c 0 "$N" --threads 1 bench search --index runs/serve39/idx --queries runs/serve39/queries.txt \
      --max-queries 1000000 --end-to-end --funnels "${FUNNELS[1]}" \
      --paired-url http://127.0.0.1:8093 --client-cpu 1 2>/dev/null | grep -E 'end-to-end|paired'
    echo "== round $round, $bin: HTTP, server on core 0, client on core 1 ($(uptime | sed 's/.*load/load/'))"
    for f in "${FUNNELS[@]}"; do
      out="$R/http-$round-$tag-${f//[^a-z0-9]/_}.json"
      taskset -c 1 "$bin" bench serve --url http://127.0.0.1:8093 --clients 1 --seconds "$S" \
        --texts runs/serve39/queries.txt --path /v1/search --field "funnel=$f" --field k=10 \
        --label "http 1 client $f round $round $tag" > "$out"
      python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print('%s: %.1f QPS, p50 %.2f ms, errors %d' % (d['label'], d['requests_per_s'], d['p50_ms'], d['errors']))" "$out"
    done
    kill -TERM $pid; wait $pid || true
    trap - EXIT
  done
done

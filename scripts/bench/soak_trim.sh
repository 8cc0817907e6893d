#!/usr/bin/env bash
# Issue 39: the server's resident memory under a long mixed load (embeddings and /v1/search),
# glibc's default allocator settings, with and without the periodic malloc_trim
# (--trim-interval-ms 1000, the default, against 0). 64 soak clients + 8 search clients for
# SECONDS_PER_RUN (300) each; RSS every 10 s (the soak's samples).
#   scripts/bench/soak_trim.sh      then: runs/soak-trim/*.json
#   TRIMS=1000 SECONDS_PER_RUN=600 R=runs/soak-600 scripts/bench/soak_trim.sh   # the default only, 10 minutes
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
S=${SECONDS_PER_RUN:-300}
R=${R:-runs/soak-trim}
mkdir -p $R
[ -f runs/serve39/idx/index.json ] || { echo "run scripts/bench/bench_serve_retrieval.sh first (the index)"; exit 1; }
wait_health() { for _ in $(seq 600); do curl -sf "$1/health" >/dev/null && return 0; sleep 0.5; done; return 1; }
for trim in ${TRIMS:-1000 0}; do
  $N serve --model models/all-MiniLM-L6-v2 --dtype float32 --index runs/serve39/idx --port 8091 \
    --trim-interval-ms $trim 2>/tmp/nest-soak.log &
  pid=$!
  wait_health http://127.0.0.1:8091
  $N bench serve --url http://127.0.0.1:8091 --clients 8 --seconds "$S" --texts runs/serve39/queries.txt \
    --path /v1/search --field k=10 --field 'funnel=binary:384@100>float32:384' --label "search trim=$trim" > $R/search-trim$trim.json &
  spid=$!
  $N bench soak --url http://127.0.0.1:8091 --clients 64 --seconds "$S" --sample-every 10 --burst 0 \
    --texts runs/serve39/queries.txt --pid $pid > $R/soak-trim$trim.json
  wait $spid
  kill -TERM $pid; wait $pid || true
done
lscpu | grep 'Model name'

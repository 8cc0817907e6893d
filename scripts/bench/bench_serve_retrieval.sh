#!/usr/bin/env bash
# Issue 39's figures (docs/SERVING.md, BENCHMARKS.md): the server as a retrieval service.
#  1. response size and inputs/s per encoding with 64 clients (one SciFact query per request,
#     all-MiniLM-L6-v2, float32 arithmetic, dims 384), float first and last (interleaved);
#  2. POST /v1/search over a SciFact index (dims 128,384 x float32,int8,binary): 64 clients and 1
#     client, next to in-process search at batch 1 (`nest bench search --end-to-end`: embed one
#     query, run the funnel) and the funnel's vector search alone.
#  3. the same funnel through PostgreSQL + pgvector (scripts/setup/pg_local.sh, or PG_DSN; `nopg` skips it).
#   scripts/bench/bench_serve_retrieval.sh [nopg]   (SECONDS_PER_RUN=15 CLIENTS=64 by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
M=models/all-MiniLM-L6-v2
S=${SECONDS_PER_RUN:-15}
C=${CLIENTS:-64}
R=runs/serve39
D=${NEST_DATA:-../shared/datasets}
mkdir -p $R
[ -f $R/queries.txt ] || python3 -c "
import json
for l in open('$D/scifact/queries.jsonl'): print(json.loads(l)['text'])" > $R/queries.txt
[ -f $R/corpus.jsonl ] || python3 -c "
import json
for l in open('$D/scifact/corpus.jsonl'):
    d = json.loads(l); print(json.dumps({'id': d['_id'], 'text': (d['title'] + ' ' + d['text']).strip(), 'kind': 'scifact'}))" > $R/corpus.jsonl
[ -f $R/idx/index.json ] || $N index build --model $M --input $R/corpus.jsonl --dims 128,384 \
  --precision float32,int8,binary --payload --out $R/idx
lscpu | grep -E 'Model name' | sed 's/^/# /'
wait_health() { for _ in $(seq 600); do curl -sf "$1/health" >/dev/null && return 0; sleep 0.5; done; return 1; }
NEST_DTYPE=float32 $N serve --model $M --index $R/idx --port 8090 --max-batch-inputs 32 2>/tmp/nest-serve39.log &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true' EXIT
wait_health http://127.0.0.1:8090
B="$N bench serve --url http://127.0.0.1:8090 --clients $C --seconds $S --texts $R/queries.txt --pid $pid"
echo "== encodings"
$B --label float-json
$B --label float32-base64 --field encoding_format=base64
$B --label int8-base64 --field encoding_format=base64 --field embed_dtype=int8
$B --label ubinary-base64 --field encoding_format=base64 --field embed_dtype=ubinary
$B --label int8-json --field encoding_format=int8
$B --label ubinary-json --field encoding_format=ubinary
$B --label int8-bytes --field encoding_format=bytes --field embed_dtype=int8
$B --label float32-base64-again --field encoding_format=base64
echo "== search"
for f in "float32:384" "binary:384@100>float32:384" "int8:128@100>float32:384"; do
  $B --path /v1/search --label "search $f" --field "funnel=$f" --field k=10
  $N bench serve --url http://127.0.0.1:8090 --clients 1 --seconds $S --texts $R/queries.txt \
    --path /v1/search --label "search 1 client $f" --field "funnel=$f" --field k=10
done
kill -TERM $pid; wait $pid || true
trap - EXIT
echo "== in-process"
$N bench search --index $R/idx --queries $R/queries.txt --max-queries 300 --end-to-end \
  --funnels "binary:384@100>float32:384;int8:128@100>float32:384"
[ "${1:-}" = nopg ] && exit 0
echo "== pgvector"
started=
if [ -z "${PG_DSN:-}" ]; then PG_DSN=$(scripts/setup/pg_local.sh start); started=1; fi
$N export pgvector --index $R/idx --dsn "$PG_DSN" --table nest_serve39 --overwrite --hnsw binary:384
$N bench search --index $R/idx --queries $R/queries.txt --max-queries 300 --dsn "$PG_DSN" \
  --table nest_serve39 --funnels "binary:384@100>float32:384"
[ -n "$started" ] && scripts/setup/pg_local.sh stop

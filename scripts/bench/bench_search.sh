#!/usr/bin/env bash
# Search benchmark of BENCHMARKS.md: every distinct text of ../shared/datasets embedded with
# all-MiniLM-L6-v2 into one index (dims 64,128,384 x float32,int8,binary); SciFact queries and
# STS-B test sentences as queries; Recall@10 relative to exact full-dim search and QPS per funnel;
# kernel timings; the same on 1M Gaussian vectors with the real embeddings' mean and covariance;
# then the funnels through PostgreSQL + pgvector (a local server from scripts/setup/pg_local.sh, or
# PG_DSN). Resumable: built indexes are kept under runs/search.
#
#   scripts/bench/bench_search.sh [nopg]
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
[ -f runs/search/corpus.jsonl ] || python3 scripts/data/search_corpus.py
[ -f runs/search/idx/index.json ] || /usr/bin/time -f "index build: %e s, %M KiB" $N index build \
  --model models/all-MiniLM-L6-v2 --input runs/search/corpus.jsonl --dims 64,128,384 \
  --precision float32,int8,binary --payload --out runs/search/idx --overwrite
Q="--queries runs/search/queries-scifact.txt --queries runs/search/queries-sts.txt"
F="binary:384>float32:384;binary:384@200>float32:384;binary:384@1000>float32:384;binary:384@2000>int8:384@100>float32:384;binary:128@2000>float32:384;float32:64@200>float32:384;float32:128@200>float32:384;int8:384@100>float32:384"
echo "== real"; $N bench search --index runs/search/idx $Q --funnels "$F" --max-queries 2000 --kernels
F1="binary:384@1000>float32:384;binary:384@10000>float32:384;binary:384@20000>int8:384@1000>float32:384;binary:384@50000>int8:384@1000>float32:384;int8:384@1000>float32:384"
echo "== 1m"; $N bench search --index runs/search/idx $Q --funnels "$F1" --max-queries 304 \
  --synthetic 1000000 --synthetic-out runs/search/idx-1m | grep synthetic
[ "${1:-}" = nopg ] && exit 0
echo "== pg"
started=
if [ -z "${PG_DSN:-}" ]; then PG_DSN=$(scripts/setup/pg_local.sh start); started=1; fi
/usr/bin/time -f "export: %e s" $N export pgvector --index runs/search/idx --dsn "$PG_DSN" \
  --table nest_bench --overwrite --hnsw binary:384,float32:64
$N bench search --index runs/search/idx $Q --max-queries 300 --dsn "$PG_DSN" --table nest_bench \
  --funnels "binary:384@200>float32:384;binary:384@1000>float32:384;float32:64@200>float32:384"
[ -n "$started" ] && scripts/setup/pg_local.sh stop

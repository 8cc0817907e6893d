#!/usr/bin/env bash
# Search benchmark of BENCHMARKS.md: every distinct text of ../shared/datasets embedded with
# all-MiniLM-L6-v2 into one index (dims 64,128,384 x float32,int8,binary), SciFact queries and
# STS-B test sentences as queries; Recall@10 relative to exact full-dim search and QPS per
# funnel; the same on 1M Gaussian vectors with the real embeddings' mean and covariance; then
# the same funnels through PostgreSQL + pgvector when PG_DSN is set.
#
#   scripts/bench_search.sh            (resumable: built indexes are kept under runs/search)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${NEST:-target/release/nest}
[ -f runs/search/corpus.jsonl ] || python3 scripts/search_corpus.py
[ -f runs/search/idx/index.json ] || $N index build --model models/all-MiniLM-L6-v2 \
  --input runs/search/corpus.jsonl --dims 64,128,384 --precision float32,int8,binary --payload \
  --out runs/search/idx --overwrite
F=${FUNNELS:-"binary:384>float32:384;binary:384@200>float32:384;binary:384@1000>float32:384;binary:384@1000>float32:64@100>float32:384;float32:64@200>float32:384;int8:384@100>float32:384;binary:384@2000>int8:384@100>float32:384"}
Q="--queries runs/search/queries-scifact.txt --queries runs/search/queries-sts.txt"
$N bench search --index runs/search/idx $Q --funnels "$F" --max-queries ${MAXQ:-2000} --kernels
$N bench search --index runs/search/idx $Q --funnels "$F" --max-queries ${MAXQ1M:-300} \
  --synthetic 1000000 --synthetic-out runs/search/idx-1m | grep '"synthetic"'
if [ -n "${PG_DSN:-}" ]; then
  $N export pgvector --index runs/search/idx --dsn "$PG_DSN" --table nest_bench --overwrite
  $N bench search --index runs/search/idx $Q --funnels "binary:384@200>float32:384;binary:384@1000>float32:64@100>float32:384;float32:64@200>float32:384" \
    --max-queries ${MAXQPG:-300} --dsn "$PG_DSN" --table nest_bench | grep pgvector
fi

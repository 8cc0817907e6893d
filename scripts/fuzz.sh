#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer through cargo-fuzz) of nest-core's readers (issue 23;
# docs/RELIABILITY.md). Seed corpora are cut from the real files in ../shared/datasets at run
# time (never copied into the repository). Stable Rust works with RUSTC_BOOTSTRAP=1.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]        default 60; prints each target's executions
set -euo pipefail
cd "$(dirname "$0")/.."
S=${1:-60}
D=${NEST_DATA:-../shared/datasets}
command -v cargo-fuzz > /dev/null || cargo install cargo-fuzz
C=fuzz/corpus
mkdir -p $C/tsv $C/jsonl $C/beir
head -20 "$D/stsb/test.tsv" > $C/tsv/stsb
head -20 "$D/snli/triplets_dev.tsv" > $C/tsv/snli-triplets
head -20 "$D/banking77/train.tsv" > $C/tsv/banking77
head -20 "$D/mrpc/train.tsv" > $C/tsv/mrpc
head -c 4000 "$D/scifact/corpus.jsonl" > $C/jsonl/scifact-corpus
head -20 "$D/scifact/queries.jsonl" > $C/jsonl/scifact-queries
{ head -c 3000 "$D/scifact/corpus.jsonl"; printf '\377'; head -10 "$D/scifact/queries.jsonl"; printf '\377'; head -10 "$D/scifact/qrels/test.tsv"; } > $C/beir/scifact
for t in tsv jsonl beir; do
  RUSTC_BOOTSTRAP=1 cargo fuzz run -O --fuzz-dir fuzz "$t" "$C/$t" -- -max_total_time="$S" -rss_limit_mb=2048 2>&1 \
    | grep -E "^#[0-9]+.*DONE|Done [0-9]+ runs|ERROR|panicked|SUMMARY" | sed "s/^/$t: /"
done

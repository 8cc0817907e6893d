#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer through cargo-fuzz) of the parsers of user input (issue 23;
# docs/RELIABILITY.md): nest-core's TSV, JSONL and BEIR readers; recipes (train and distill
# TOML); model configs (config.json, config_sentence_transformers.json); embedding matrices
# (.npy, .safetensors). Seed corpora are cut from the real files in ../shared/datasets, the
# recipes and the test fixtures at run time (the datasets are never copied into the
# repository). Stable Rust works with RUSTC_BOOTSTRAP=1.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]        default 60; prints each target's executions
set -euo pipefail
cd "$(dirname "$0")/.."
S=${1:-60}
D=${NEST_DATA:-../shared/datasets}
command -v cargo-fuzz > /dev/null || cargo install cargo-fuzz
# cargo fuzz sets RUSTFLAGS, which replaces .cargo/config.toml's rpath: the targets that link
# libtorch find it here
export LD_LIBRARY_PATH="$PWD/.deps/py/torch/lib:$PWD/.deps/py/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
C=fuzz/corpus
mkdir -p $C/tsv $C/jsonl $C/beir $C/recipe $C/model_config $C/matrix
cp recipes/*.toml $C/recipe/
for f in tests/fixtures/*/model/config.json tests/fixtures/*/model/config_sentence_transformers.json; do
  cp "$f" "$C/model_config/$(echo "$f" | tr / _)"
done
python3 - "$C/matrix/small.npy" <<'PY'
import struct, sys
h = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"
h += " " * (64 - (10 + len(h) + 1) % 64) + "\n"
body = b"".join(struct.pack("<f", i / 7) for i in range(12))
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + body)
PY
find tests/fixtures -name '*.safetensors' -size -64k | while read -r f; do
  cp "$f" "$C/matrix/$(echo "$f" | tr / _)"
done
head -20 "$D/stsb/test.tsv" > $C/tsv/stsb
head -20 "$D/snli/triplets_dev.tsv" > $C/tsv/snli-triplets
head -20 "$D/banking77/train.tsv" > $C/tsv/banking77
head -20 "$D/mrpc/train.tsv" > $C/tsv/mrpc
head -c 4000 "$D/scifact/corpus.jsonl" > $C/jsonl/scifact-corpus
head -20 "$D/scifact/queries.jsonl" > $C/jsonl/scifact-queries
{ head -c 3000 "$D/scifact/corpus.jsonl"; printf '\377'; head -10 "$D/scifact/queries.jsonl"; printf '\377'; head -10 "$D/scifact/qrels/test.tsv"; } > $C/beir/scifact
for t in ${TARGETS:-tsv jsonl beir recipe model_config matrix}; do
  RUSTC_BOOTSTRAP=1 cargo fuzz run -O --fuzz-dir fuzz "$t" "$C/$t" -- -max_total_time="$S" -rss_limit_mb=2048 2>&1 \
    | grep -E "^#[0-9]+.*DONE|Done [0-9]+ runs|ERROR|panicked|SUMMARY" | sed "s/^/$t: /"
done

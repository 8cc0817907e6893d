#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer through cargo-fuzz) of the parsers of user input (issue 23;
# docs/RELIABILITY.md): nest-core's TSV, JSONL and BEIR readers; recipes (train and distill
# TOML); model configs (config.json, config_sentence_transformers.json); embedding matrices
# (.npy, .safetensors); adaptors; checkpoints in a run folder; teacher-cache files; index files;
# the server's request bodies. The bodies and the seeds are in fuzz/src/targets.rs; seeds are cut
# from the real files in ../shared/datasets, the recipes and the test fixtures at run time (the
# datasets are never copied into the repository). CI replays the seeds, fuzz/regressions/ and
# seeded edits through the same bodies (crates/nest-cli/tests/fuzz_corpus.rs). Stable Rust works
# with RUSTC_BOOTSTRAP=1. An input that fails goes to fuzz/artifacts/<target>/; once fixed, copy it
# to fuzz/regressions/<target>/ so CI replays it for good.
#
#   scripts/setup/fuzz.sh [SECONDS_PER_TARGET]        default 60; prints each target's executions
set -euo pipefail
cd "$(dirname "$0")/../.."
S=${1:-60}
D=${NEST_DATA:-../shared/datasets}
command -v cargo-fuzz > /dev/null || cargo install cargo-fuzz
# cargo fuzz sets RUSTFLAGS, which replaces .cargo/config.toml's rpath: the targets that link
# libtorch find it here
export LD_LIBRARY_PATH="$PWD/.deps/py/torch/lib:$PWD/.deps/py/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
C=fuzz/corpus
# the seeds: the replay test writes them (one list in fuzz/src/targets.rs for both)
NEST_DATA="$(realpath -m "$D")" NEST_FUZZ_SEEDS_DIR="$PWD/$C" NEST_FUZZ_EDITS=0 \
  cargo test -q -p nest-cli --test fuzz_corpus > /dev/null
for t in ${TARGETS:-tsv jsonl beir recipe model_config matrix adaptor checkpoint teacher_cache index http_body}; do
  RUSTC_BOOTSTRAP=1 cargo fuzz run -O --fuzz-dir fuzz "$t" "$C/$t" -- -max_total_time="$S" -rss_limit_mb=2048 2>&1 \
    | grep -E "^#[0-9]+.*DONE|Done [0-9]+ runs|ERROR|panicked|SUMMARY" | sed "s/^/$t: /"
done

#!/usr/bin/env bash
# Did a refactor move the spine figures? Times two nest binaries (e.g. built from the commit
# before a change and after it) on the same machine in the same run, interleaved: encode
# throughput (all-MiniLM-L6-v2, STS-B test, layer 6, DTYPES (default float32), best of REPEATS) and a
# training step (MRL, SNLI pairs, batch 32, median of 20 steps), ROUNDS times each. Results
# stay the business of scripts/bench/same_results.sh; this only times.
#
#   scripts/bench/spine_compare.sh /tmp/nest-old target/release/nest
set -euo pipefail
OLD=$(realpath "$1"); NEW=$(realpath "$2")
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-2}
lscpu | grep -E "Model name|^CPU\(s\)"
for r in $(seq "$ROUNDS"); do
  for b in OLD NEW; do
    echo "== round $r $b encode"
    ${!b} --threads 2 bench encode --layers 6 --dtype "${DTYPES:-float32}" --repeats "${REPEATS:-2}" 2>&1 \
      | grep -iE "sent/s|layer" | grep -v "^timing"
  done
done
for r in $(seq "$ROUNDS"); do
  for b in OLD NEW; do
    echo "== round $r $b train"
    ${!b} --threads 2 bench train --objectives mrl --dtype float32 --epoch-pairs 256 2>&1 \
      | grep -iE "median|step|epoch" | head -8
  done
done

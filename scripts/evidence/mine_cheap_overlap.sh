#!/usr/bin/env bash
# Issue 40: how far negatives mined at a cheap (layer, dim) point overlap the full point's, on a
# model trained for its cheap points (2DMSE) against the untrained all-MiniLM-L6-v2.
#   1. the 2DMSE model: recipes/2dmse-stsb.toml for one epoch (180 steps; the recipe says 4);
#   2. bench_mine.py's 10,000-text corpus and 1,000 SNLI query pairs;
#   3. `nest mine` (5 negatives, relative margin 0.05, top, float32 arithmetic) at the full point
#      (6, 384) and at cheap points (3, 128), (3, 384), (6, 128) with each model; each cheap run's
#      overlap with its model's full run (`--overlap-with`: the share of its (anchor, positive,
#      negative) triples that the full run also holds).
#   scripts/evidence/mine_cheap_overlap.sh        then: runs/mine-2dmse/overlap.txt
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
R=runs/mine-2dmse
MODEL=$R/model/final
[ -f "$MODEL/nest.json" ] || "$N" train --recipe recipes/2dmse-stsb.toml --run-dir "$R/model" --epochs 1
[ -f "$R/data/corpus.jsonl" ] || python3 -c "import sys; sys.path.insert(0, 'scripts/bench'); import bench_mine; bench_mine.write_data('$R/data', 10000, 1000)"
# MARGIN: the relative margin 0.05 of the benchmark, then none (the top 5 of every query: the
# ranking's agreement alone, without the filter that strikes most candidates at a compressed
# cheap point)
: > "$R/overlap.txt"
for margin in 0.05 none; do
  flags=(--queries "$R/data/queries.jsonl" --corpus "$R/data/corpus.jsonl" --num-negatives 5
    --dtype float32 --overwrite)
  [ "$margin" = none ] || flags+=(--relative-margin "$margin")
  for m in "$MODEL" models/all-MiniLM-L6-v2; do
    tag=$(basename "$(dirname "$m")")-$(basename "$m")-m$margin
    full="$R/$tag-full.jsonl"
    [ -f "$full" ] || "$N" mine --model "$m" "${flags[@]}" --output "$full" 2>> "$R/$tag.log"
    for point in "3 128" "3 384" "6 128"; do
      set -- $point
      out="$R/$tag-L$1-d$2.jsonl"
      "$N" mine --model "$m" "${flags[@]}" --layer "$1" --dim "$2" --output "$out" \
        --overlap-with "$full" 2>&1 | tee -a "$R/$tag.log" | grep -E "^overlap|^queries|could not find" \
        | sed "s#^#$tag (layer $1, dim $2): #" >> "$R/overlap.txt"
    done
  done
done
cat "$R/overlap.txt"

#!/usr/bin/env bash
# Issue 40: does MRL trained on mined hard negatives beat MRL on in-batch negatives alone?
# all-MiniLM-L6-v2, SciFact's train queries with their relevant abstracts (the BEIR qrels),
# MRL(MultipleNegativesRanking) over dims 16..384, the same budget and hyper-parameters for both
# arms (EPOCHS epochs, batch 32, lr LR, documents cut to 128 tokens), seeds 1 2 3:
#   - inbatch: (query, abstract) pairs; the other abstracts of the batch are the negatives
#   - mined:   the same pairs plus one hard negative each from `nest mine --beir` over the
#              SciFact corpus, with NV-Retriever's margin filter (--relative-margin 0.05: a
#              candidate scoring within 5% of the positive is taken for an unlabeled positive
#              and skipped)
# then SciFact test retrieval (nDCG@10, 300 queries, the whole corpus) at layer 6 over the dims,
# and `nest eval compare`: mined minus in-batch per cell, paired bootstrap over the queries,
# seeds pooled, Holm over the cells. The untrained model is reported beside them.
#
#   scripts/evidence_mined.sh mine          # runs/mined-ev/{pairs,triplets}.jsonl
#   scripts/evidence_mined.sh train "1 2 3" # both arms, each seed (resumable)
#   scripts/evidence_mined.sh eval "1 2 3"  # the reports and the compare (reports/mined/)
# NEST (target/release/nest), THREADS (2), EPOCHS (2), LR (2e-5).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
NEST=${NEST:-target/release/nest}
THREADS=${THREADS:-2}
EPOCHS=${EPOCHS:-2}
LR=${LR:-2e-5}
M=models/all-MiniLM-L6-v2
W=runs/mined-ev
R=reports/mined
DIMS=16,32,64,128,256,384

mine() {
  mkdir -p "$W"
  [ -f "$W/triplets.jsonl" ] || /usr/bin/time -f "mine: %e s wall" nice -n 19 "$NEST" --threads "$THREADS" \
    mine --model "$M" --beir ../shared/datasets/scifact --split train --num-negatives 1 \
    --relative-margin 0.05 --max-length 128 --output "$W/triplets.jsonl"
  # the in-batch arm: the same pairs without the negatives
  [ -f "$W/pairs.jsonl" ] || python3 - "$W" << 'EOF'
import json, sys
w = sys.argv[1]
seen = set()
with open(f"{w}/pairs.jsonl", "w") as out:
    for line in open(f"{w}/triplets.jsonl"):
        r = json.loads(line)
        key = (r["anchor"], r["positive"])
        if key not in seen:
            seen.add(key)
            out.write(json.dumps({"anchor": r["anchor"], "positive": r["positive"]}) + "\n")
EOF
  wc -l "$W/triplets.jsonl" "$W/pairs.jsonl"
}

train() { # arm seed
  local run="$W/$1-seed$2" data
  [ -f "$run/final/nest.json" ] && return 0
  case $1 in
  inbatch) data="$W/pairs.jsonl:pairs" ;;
  mined) data="$W/triplets.jsonl:triplets" ;;
  esac
  local resume=(--overwrite)
  [ -d "$run/checkpoints" ] && resume=(--resume "$run")
  /usr/bin/time -f "train $1 seed $2: %e s wall" nice -n 19 "$NEST" --threads "$THREADS" train \
    --model "$M" --data "$data" --loss mnrl --matryoshka-dims "[16, 32, 64, 128, 256, 384]" \
    --epochs "$EPOCHS" --batch-size 32 --lr "$LR" --warmup-ratio 0.1 --max-length 128 \
    --seed "$2" --save-every 20 --run-dir "$run" "${resume[@]}" > "$run.log" 2>&1 \
    || { echo "train $1 seed $2 failed: see $run.log" >&2; return 1; }
  tail -1 "$run.log"
}

evaluate() { # model out
  [ -f "$2/report.json" ] || nice -n 19 "$NEST" --threads "$THREADS" eval --tasks retrieval \
    --layers 6 --dims $DIMS --dtype float32 --latency-texts 0 --model "$1" --out "$2" > "$2.log" 2>&1
}

case "${1:-}" in
mine) mine ;;
train)
  for s in ${2:-1 2 3}; do
    for arm in inbatch mined; do train $arm "$s"; done
  done
  ;;
eval)
  mkdir -p "$R"
  evaluate "$M" "$R/untrained"
  a="" b=""
  for s in ${2:-1 2 3}; do
    for arm in inbatch mined; do evaluate "$W/$arm-seed$s/final" "$R/$arm-seed$s"; done
    a+="${a:+,}$R/inbatch-seed$s/report.json"
    b+="${b:+,}$R/mined-seed$s/report.json"
  done
  # seeds pooled on each side (comma-separated): mined minus in-batch, then both against untrained
  nice -n 19 "$NEST" eval compare "$a" "$b" --resamples 2000 --out "$R/compare" > "$R/compare.md"
  nice -n 19 "$NEST" eval compare "$R/untrained/report.json" "$a" "$b" --resamples 2000 \
    --out "$R/compare-untrained" > "$R/compare-untrained.md"
  cat "$R/compare.md"
  ;;
*)
  sed -n '2,20p' "$0"
  exit 2
  ;;
esac

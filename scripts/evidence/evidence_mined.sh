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
#   - nomargin: the same pairs plus the hardest negative mined without the filter (the
#              top-ranked abstract that is not a labeled positive), so that mined - nomargin is
#              the false-negative filter's effect alone (same queries, same positives)
# then SciFact test retrieval (nDCG@10, 300 queries, the whole corpus) at layer 6 over the dims,
# and `nest eval compare`: mined minus in-batch per cell, paired bootstrap over the queries,
# seeds pooled, Holm over the cells. The untrained model is reported beside them.
#
#   scripts/evidence/evidence_mined.sh mine          # runs/mined-ev/{pairs,triplets}.jsonl
#   SET=snli scripts/evidence/evidence_mined.sh ...  # the same on SNLI (runs/mined-snli, reports/mined-snli)
#   scripts/evidence/evidence_mined.sh train "1 2 3" # both arms, each seed (resumable)
#   scripts/evidence/evidence_mined.sh eval "1 2 3"  # the reports and the compare (reports/mined/)
#   ARMS=nomargin scripts/evidence/evidence_mined.sh train "1 2 3"; scripts/evidence/evidence_mined.sh margin "1 2 3"
#                                           # the filter on vs off (reports/mined/compare-margin)
# NEST (target/release/nest), THREADS (2), EPOCHS (2), LR (2e-5).
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
NEST=${NEST:-target/release/nest}
THREADS=${THREADS:-2}
EPOCHS=${EPOCHS:-2}
LR=${LR:-2e-5}
M=models/all-MiniLM-L6-v2
# SET: scifact (the default) or snli: SNLI's dev entailment pairs as training queries and
# positives, mined against every dev hypothesis; scored on SNLI test as retrieval (premise ->
# entailed hypotheses among all test hypotheses; scripts/data/snli_beir.py) and on SciFact test
SET=${SET:-scifact}
case $SET in
scifact) BEIR=../shared/datasets/scifact W=runs/mined-ev R=reports/mined EVAL_EXTRA=() ;;
snli) BEIR=runs/snli-ev/dev W=runs/mined-snli R=reports/mined-snli
  EVAL_EXTRA=(--retrieval-extra runs/snli-ev/snli) ;;
*) echo "SET=$SET: expected scifact or snli" >&2; exit 2 ;;
esac
DIMS=16,32,64,128,256,384

mine() {
  mkdir -p "$W"
  [ "$SET" = snli ] && { [ -f runs/snli-ev/snli/qrels/test.tsv ] || python3 scripts/data/snli_beir.py; }
  [ -f "$W/triplets.jsonl" ] || /usr/bin/time -f "mine: %e s wall" nice -n 19 "$NEST" --threads "$THREADS" \
    mine --model "$M" --beir "$BEIR" --split train --num-negatives 1 \
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
  # the filter off: the hardest non-positive of every query, kept for the filtered arm's pairs
  [ -f "$W/triplets-all.jsonl" ] || nice -n 19 "$NEST" --threads "$THREADS" \
    mine --model "$M" --beir "$BEIR" --split train --num-negatives 1 \
    --max-length 128 --output "$W/triplets-all.jsonl"
  [ -f "$W/triplets-nomargin.jsonl" ] || python3 - "$W" << 'EOF'
import json, sys
w = sys.argv[1]
keep = {(r["anchor"], r["positive"]) for r in map(json.loads, open(f"{w}/pairs.jsonl"))}
filtered = {(r["anchor"], r["positive"]): r["negative"] for r in map(json.loads, open(f"{w}/triplets.jsonl"))}
n = same = 0
with open(f"{w}/triplets-nomargin.jsonl", "w") as out:
    for line in open(f"{w}/triplets-all.jsonl"):
        r = json.loads(line)
        key = (r["anchor"], r["positive"])
        if key in keep:
            n += 1
            same += filtered.get(key) == r["negative"]
            out.write(json.dumps({k: r[k] for k in ("anchor", "positive", "negative")}) + "\n")
print(f"nomargin: {n} of {len(keep)} pairs; the same negative as the filtered arm for {same} ({100 * same / max(n, 1):.1f}%)")
EOF
  wc -l "$W/triplets.jsonl" "$W/pairs.jsonl" "$W/triplets-nomargin.jsonl"
}

train() { # arm seed
  local run="$W/$1-seed$2" data
  [ -f "$run/final/nest.json" ] && return 0
  case $1 in
  inbatch) data="$W/pairs.jsonl:pairs" ;;
  mined) data="$W/triplets.jsonl:triplets" ;;
  nomargin) data="$W/triplets-nomargin.jsonl:triplets" ;;
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
    --layers 6 --dims $DIMS --dtype float32 --latency-texts 0 --model "$1" --out "$2" \
    "${EVAL_EXTRA[@]}" > "$2.log" 2>&1
}

case "${1:-}" in
mine) mine ;;
train)
  for s in ${2:-1 2 3}; do
    for arm in ${ARMS:-inbatch mined}; do train $arm "$s"; done
  done
  ;;
margin) # the filter on (mined) against off (nomargin), seeds pooled
  mkdir -p "$R"
  a="" b=""
  for s in ${2:-1 2 3}; do
    evaluate "$W/nomargin-seed$s/final" "$R/nomargin-seed$s"
    a+="${a:+,}$R/nomargin-seed$s/report.json"
    b+="${b:+,}$R/mined-seed$s/report.json"
  done
  nice -n 19 "$NEST" eval compare "$a" "$b" --resamples 2000 --out "$R/compare-margin" > "$R/compare-margin.md"
  cat "$R/compare-margin.md"
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

#!/usr/bin/env bash
# The 2D side-by-side of docs/TRAINING.md: MRL, 2DMSE and ESE (Nest) and sentence-transformers'
# Matryoshka2dLoss, same data, hyper-parameters and seed (batch 32, lr 5e-5, EPOCHS epochs,
# default 4), on STS-B train (CoSENT) and SNLI triplets (MNRL + hard negatives); then the STS
# grid of each result (test sets, and STS-B dev for choices). Resumable: a finished run
# (runs/NAME/final) or report is skipped.
#
# The side-by-side with sentence-transformers is like for like: both sample the shallow layer
# from 1..N-1 (ST's `--skip-embedding-layer 1`, see docs/TRAINING.md) with weight 1 per layer,
# and "2dmse-*-stlike" is Nest with ST's random batches and no prefix KL.
#
#   scripts/evidence/evidence_2d.sh [stsb|snli ...]      PYTHON=/path/to/venv/bin/python for the ST runs
#   EPOCHS=1 scripts/evidence/evidence_2d.sh snli        a smaller budget, the same for every method
#   STLIKE=0 scripts/evidence/evidence_2d.sh snli        without the ST-like Nest run
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
PY=${PYTHON:-python3}
E=${EPOCHS:-4}
sfx=$([ "$E" = 4 ] && echo "" || echo "-${E}ep")
sets=${*:-stsb snli}
mkdir -p runs reports
train() { # name recipe [flags...]
  local name=$1 recipe=$2; shift 2
  if [ ! -f "runs/$name/final/nest.json" ]; then
    local resume=(--overwrite)
    [ -d "runs/$name/checkpoints" ] && resume=(--resume "runs/$name")
    /usr/bin/time -f "$name: %e s wall, %M KiB peak" \
      $N train --recipe "$recipe" --run-dir "runs/$name" --eval-every 0 --save-every 100 --epochs "$E" "${resume[@]}" "$@"
  fi
}
grid() { # name
  [ -f "reports/$1/report.json" ] || $N eval --tasks sts --model "runs/$1/final" --out "reports/$1"
  [ -f "reports/$1-dev/report.json" ] || $N eval sts --data ../shared/datasets/stsb/dev.tsv,../shared/datasets/sick-r/dev.tsv \
    --model "runs/$1/final" --latency-texts 0 --out "reports/$1-dev"
}
[ -f reports/untrained-sts/report.json ] || $N eval --tasks sts --model models/all-MiniLM-L6-v2 --out reports/untrained-sts
for s in $sets; do
  train "mrl-$s-${E}ep" "recipes/mrl-$s.toml" --lr 5e-5
  train "2dmse-$s$sfx" "recipes/2dmse-$s.toml"
  train "ese-$s$sfx" "recipes/ese-$s.toml"
  if [ ! -f "runs/st-2d-$s$sfx/final/config.json" ]; then
    /usr/bin/time -f "st-2d-$s$sfx: %e s wall, %M KiB peak" \
      "$PY" scripts/evidence/st_matryoshka.py "$s" --loss 2d --epochs "$E" --lr 5e-5 --layer-weighting uniform \
      --skip-embedding-layer 1 --name "st-2d-$s$sfx"
  fi
  runs=("mrl-$s-${E}ep" "2dmse-$s$sfx" "ese-$s$sfx" "st-2d-$s$sfx")
  if [ "${STLIKE:-1}" = 1 ]; then
    train "2dmse-$s$sfx-stlike" "recipes/2dmse-$s.toml" --length-batching false --objective \
      '[{kind = "2dmse", layers_per_step = 1, dims_per_step = 0, kl_temperature = 0.3, layer_weighting = "uniform", align_prefix = false}]'
    runs+=("2dmse-$s$sfx-stlike")
  fi
  for r in "${runs[@]}"; do grid "$r"; done
done

#!/usr/bin/env bash
# The 2D side-by-side of docs/TRAINING.md: MRL, 2DMSE and ESE (Nest) and sentence-transformers'
# Matryoshka2dLoss, same data, hyper-parameters and seed (4 epochs, batch 32, lr 5e-5), on STS-B
# train (CoSENT) and SNLI triplets (MNRL + hard negatives); then the STS grid of each result.
# Resumable: a finished run (runs/NAME/final) or report is skipped.
#
#   scripts/evidence_2d.sh [stsb|snli ...]      PYTHON=/path/to/venv/bin/python for the ST runs
set -euo pipefail
cd "$(dirname "$0")/.."
N=${NEST:-target/release/nest}
PY=${PYTHON:-python3}
sets=${*:-stsb snli}
mkdir -p runs reports
train() { # name recipe [flags...]
  local name=$1 recipe=$2; shift 2
  if [ ! -f "runs/$name/final/nest.json" ]; then
    local resume=(--overwrite)
    [ -d "runs/$name/checkpoints" ] && resume=(--resume "runs/$name")
    /usr/bin/time -f "$name: %e s wall, %M KiB peak" \
      $N train --recipe "$recipe" --run-dir "runs/$name" --eval-every 0 --save-every 100 "${resume[@]}" "$@"
  fi
}
grid() { # name
  [ -f "reports/$1/report.json" ] || $N eval --tasks sts --model "runs/$1/final" --out "reports/$1"
}
[ -f reports/untrained-sts/report.json ] || $N eval --tasks sts --model models/all-MiniLM-L6-v2 --out reports/untrained-sts
for s in $sets; do
  train "mrl-$s-4ep" "recipes/mrl-$s.toml" --epochs 4 --lr 5e-5
  train "2dmse-$s" "recipes/2dmse-$s.toml"
  train "ese-$s" "recipes/ese-$s.toml"
  if [ ! -f "runs/st-2d-$s/final/config.json" ]; then
    /usr/bin/time -f "st-2d-$s: %e s wall, %M KiB peak" \
      "$PY" scripts/st_matryoshka.py "$s" --loss 2d --epochs 4 --lr 5e-5 --name "st-2d-$s"
  fi
  for r in "mrl-$s-4ep" "2dmse-$s" "ese-$s" "st-2d-$s"; do grid "$r"; done
done

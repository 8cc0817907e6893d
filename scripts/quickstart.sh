#!/usr/bin/env bash
# Quickstart on a fresh machine: setup (libtorch + models), build, encode, the STS grid of the
# untrained model, a short 2DMSE run, the grid again with the per-cell deltas, and a slim
# 3-layer model cut from the result. 6 min 46 s on a fresh clone on 2 cores, 5 min 26 s of it
# building (download caches warm; BENCHMARKS.md, "The newcomer's first command").
#
#   scripts/quickstart.sh            # data from ../shared/datasets (or NEST_DATA=/path/to/datasets)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release
N=target/release/nest
D=${NEST_DATA:-../shared/datasets}
M=models/all-MiniLM-L6-v2
mkdir -p runs reports

$N info --model $M
printf 'A man is playing a guitar.\nA woman is slicing an onion.\nThe cat sat on the mat.\n' > runs/quickstart-sentences.txt
# layer 3, dim 64: a point all-MiniLM was not trained for, which encode allows and says in a
# warning; the 2DMSE run below trains the shallow exits
$N encode --model $M --layer 3 --dim 64 --input runs/quickstart-sentences.txt --output runs/quickstart-emb.jsonl

if [ ! -f "$D/stsb/train.tsv" ]; then
  echo "quickstart: $D/stsb not found; set NEST_DATA to the datasets folder to train and evaluate" >&2
  exit 1
fi
GRID="--data $D/stsb/test.tsv --layers 1-6 --dims 16,32,64,128,256,384"
$N eval sts --model $M $GRID --out reports/quickstart-untrained
# a short 2DMSE run (60 steps of CoSENT on STS-B train); recipes/2dmse-stsb.toml is the full one
$N train --recipe recipes/2dmse-stsb.toml --max-steps 60 --eval-every 0 --save-every 30 \
  --run-dir runs/quickstart-2dmse --overwrite
$N info --model runs/quickstart-2dmse/final
$N eval sts --model runs/quickstart-2dmse/final $GRID --out reports/quickstart-2dmse
$N eval compare reports/quickstart-untrained/report.json reports/quickstart-2dmse/report.json
cat <<'MSG'

What to read in the comparison above: 2DMSE trains the shallow exits (one sampled layer per step
beside the last). After these 60 steps the shallow layers gain (measured 2026-11-26: layer 3 +4.6 to
+13 points at every dim, layers 1-4 up), while layers 5-6 lose 1.8-7.2 points: the trade-off of a
60-step run. The full recipe (recipes/2dmse-stsb.toml, 4 epochs) keeps layer 6 level with MRL
(86.87 vs 86.69 on STS-B test) and puts layer 3 16 points above MRL's (docs/TRAINING.md, "2D elasticity").
MSG
# keep only the first 3 layers: a smaller model that loads in sentence-transformers
$N slim --model runs/quickstart-2dmse/final --keep-layers 3 --out runs/quickstart-2dmse-l3
$N info --model runs/quickstart-2dmse-l3

#!/usr/bin/env bash
# The precision evidence of docs/PRECISION.md: quality of bf16 / int8 inference on the untrained
# model (STS-B, SICK-R, SciFact) and a 2DMSE run trained in float32 and in bf16 mixed precision
# (same recipe, same budget), each scored over the (layer x dim) grid in float32, bf16 and int8.
#
#   scripts/evidence/evidence_dtype.sh [EPOCHS]     # EPOCHS of recipes/2dmse-stsb.toml (default 1; the recipe says 4)
#
# Writes reports/dtype/ and runs/dtype-2dmse-{float32,bf16}/. Needs target/release/nest.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=target/release/nest
E=${1:-1}
D=../shared/datasets
# 1. the untrained model, every arithmetic
$N eval --model models/all-MiniLM-L6-v2 --tasks sts,retrieval --layers 1-6 \
  --dtype float32,bf16,int8 --out reports/dtype/minilm
# 2. 2DMSE trained in float32 and in bf16 (mixed precision), the same budget
for dt in float32 bf16; do
  $N train --recipe recipes/2dmse-stsb.toml --run-dir runs/dtype-2dmse-$dt --overwrite \
    --epochs "$E" --eval-every 0 --save-every 0 --dtype $dt
done
# 3. each trained model's STS grids (test sets) in every arithmetic
for dt in float32 bf16; do
  $N eval sts --model runs/dtype-2dmse-$dt/final --data $D/stsb/test.tsv,$D/sick-r/test.tsv \
    --layers 1-6 --latency-texts 0 --dtype float32,bf16,int8 --out reports/dtype/2dmse-$dt
done
# 4. training arithmetic: the bf16-trained model vs the float32-trained one, both scored in float32
$N eval compare reports/dtype/2dmse-float32/float32/report.json reports/dtype/2dmse-bf16/float32/report.json \
  --out reports/dtype/2dmse-bf16-vs-float32-training

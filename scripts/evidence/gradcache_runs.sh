#!/bin/bash
# GradCache real runs (issue 21): MRL and 2DMSE on SNLI triplets, batch 32 vs batch 256 (chunks of 32),
# 4 epochs at lr 5e-5, everything else as the recipes. Resumable: each run resumes if its dir exists.
set -x
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
for m in mrl 2dmse; do
  for b in 32 256; do
    run=runs/gc-$m-snli-b$b
    extra=""; [ $b = 256 ] && extra="--mini-batch-size 32"
    if [ ! -f $run/final/model.safetensors ]; then
      if [ -f $run/recipe.toml ]; then $N train --resume $run; else
      $N train --recipe recipes/$m-snli.toml --run-dir $run --epochs 4 --lr 5e-5 --batch-size $b $extra --eval-every 0 --save-every 10 --dtype float32; fi
    fi
    L=""; [ $m = 2dmse ] && L="--layers 1-6"
    [ -f reports/gc-$m-snli-b$b/report.json ] || $N eval --tasks sts --model $run/final --out reports/gc-$m-snli-b$b --dims 16,32,64,128,256,384 $L --latency-texts 0 --dtype float32
  done
done
echo ALLDONE

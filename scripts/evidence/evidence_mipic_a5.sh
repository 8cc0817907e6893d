#!/usr/bin/env bash
# MIPIC's checkpoint layers on a 12-layer model (issue 24; docs/STRUCTURE.md "A.5's checkpoint
# layers"): Nest's rule l_i = ceil(i N / n) gives 2, 4, 6, 7, 9, 11, 12 for 7 dims on 12 layers;
# Appendix A.5 hand-picks 2, 4, 6, 8, 9, 10, 12 for BERT-base. The same run otherwise: the
# STRUCTURE protocol (unsupervised SimCSE on scripts/data/structure_data.py's set, MRL weight 0.4 +
# MIPIC 0.6, AdamW 2e-5, cosine, batch 32) from all-mpnet-base-v2 (12 layers, 768 dims) with the
# 7 dims 16..768, cut to STEPS optimizer steps (default 60: the whole epoch does not fit 2 cores;
# the same budget for both rows). Measured: STS-B dev after the run (the
# trainer's final grid, last layer, every dim), then `nest eval sts` of both final models on
# STS-B dev with per-pair scores and `nest eval compare` (paired bootstrap, Holm). Resumable.
#
#   scripts/evidence/evidence_mipic_a5.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
STEPS=${STEPS:-60}
[ -f runs/structure/train.tsv ] || python3 scripts/data/structure_data.py
DIMS='[16, 32, 64, 128, 256, 512, 768]'
declare -A OBJ=(
  [rule]='[{kind = "mrl", weight = 0.4}, {kind = "mipic", weight = 0.6}]'
  [a5]='[{kind = "mrl", weight = 0.4}, {kind = "mipic", weight = 0.6, checkpoint_layers = [2, 4, 6, 8, 9, 10, 12]}]'
)
for name in rule a5; do
  run="runs/mipic-a5-$name"
  [ -f "$run/final/nest.json" ] && continue
  resume=(--overwrite)
  [ -d "$run/checkpoints" ] && resume=(--resume "$run")
  /usr/bin/time -f "train $name: %e s wall, %M KiB peak" \
    $N train --recipe recipes/mrl-simcse.toml --model models/all-mpnet-base-v2 --run-dir "$run" \
    --matryoshka-dims "$DIMS" --max-steps "$STEPS" --save-every 20 "${resume[@]}" \
    --objective "${OBJ[$name]}"
done
for name in rule a5; do
  echo "$name: $(grep -h '"eval"' "runs/mipic-a5-$name/metrics.jsonl" | tail -1)"
done
mkdir -p reports/mipic-a5
for name in rule a5; do
  [ -f "reports/mipic-a5/$name/report.json" ] && continue
  $N eval sts --model "runs/mipic-a5-$name/final" --data ../shared/datasets/stsb/dev.tsv \
    --layers 12 --dims 16,32,64,128,256,512,768 --out "reports/mipic-a5/$name" > /dev/null
done
$N eval compare reports/mipic-a5/rule/report.json reports/mipic-a5/a5/report.json \
  --out reports/mipic-a5/compare

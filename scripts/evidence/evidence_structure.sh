#!/usr/bin/env bash
# The MIPIC / MIC tables of docs/STRUCTURE.md: every method on the papers' training set (MIPIC
# Appendix A.2, MIC Appendix B.2; scripts/data/structure_data.py) with unsupervised SimCSE, AdamW 2e-5,
# cosine schedule, batch 32, the same budget for every method (EPOCHS, default 1), all from
# all-MiniLM-L6-v2; then `nest eval` at the last layer, dims 16..384, on STS-B and SICK-R
# (Spearman), Banking77 and TweetEval-emotion (logistic-regression F1), MRPC and WiC (best-threshold
# accuracy). Resumable: a finished run (runs/structure-NAME/final) or report is skipped, a cut run
# resumes from its last checkpoint.
#
#   scripts/evidence/evidence_structure.sh [NAME ...]       default: every method below, in this order
#   python3 scripts/evidence/structure_tables.py > docs/structure_tables.md
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
E=${EPOCHS:-1}
[ -f runs/structure/train.tsv ] || python3 scripts/data/structure_data.py
mkdir -p runs reports/structure
declare -A OBJ=(
  [simcse]='[{kind = "mrl", dims = [384]}]'
  [mrl]='[{kind = "mrl"}]'
  [ese]='[{kind = "mrl"}, {kind = "ese"}]'
  [mipic]='[{kind = "mrl", weight = 0.4}, {kind = "mipic", weight = 0.6}]'
  [mipic-attached]='[{kind = "mrl", weight = 0.4}, {kind = "mipic", weight = 0.6, pic_detach_target = false}]'
  [mic]='[{kind = "mrl"}, {kind = "mic", weight = 0.6}]'
  [mipic-mic]='[{kind = "mrl", weight = 0.4}, {kind = "mipic", weight = 0.6}, {kind = "mic", weight = 0.6}]'
  [mipic-no-sia]='[{kind = "mrl", weight = 0.4}, {kind = "mipic", weight = 0.6, sia = false}]'
  [mipic-no-pic]='[{kind = "mrl", weight = 0.4}, {kind = "mipic", weight = 0.6, pic = false}]'
  [mic-scr-only]='[{kind = "mrl"}, {kind = "mic", weight = 0.6, sir = false}]'
  [mic-sir-only]='[{kind = "mrl"}, {kind = "mic", weight = 0.6, scr = false}]'
)
ORDER="mrl mipic-attached mic mipic simcse ese mipic-no-sia mipic-no-pic mic-scr-only mic-sir-only mipic-mic"
evaluate() { # model out
  [ -f "$2/report.json" ] || /usr/bin/time -f "eval $2: %e s wall" \
    $N eval --tasks sts,cls,pair --layers 6 --dims 16,32,64,128,256,384 --latency-texts 0 --model "$1" --out "$2"
}
evaluate models/all-MiniLM-L6-v2 reports/structure/untrained
for name in ${*:-$ORDER}; do
  run="runs/structure-$name"
  if [ ! -f "$run/final/nest.json" ]; then
    resume=(--overwrite)
    [ -d "$run/checkpoints" ] && resume=(--resume "$run")
    /usr/bin/time -f "train $name: %e s wall, %M KiB peak" \
      $N train --recipe recipes/mrl-simcse.toml --run-dir "$run" --epochs "$E" "${resume[@]}" \
      --objective "${OBJ[$name]}"
  fi
  evaluate "$run/final" "reports/structure/$name"
done

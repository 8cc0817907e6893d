#!/usr/bin/env bash
# MIPIC and MIC against MRL over 3 seeds (issue 24; docs/STRUCTURE.md "Seeds and paired tests"):
# the protocol of scripts/evidence/evidence_structure.sh (the papers' training set, unsupervised SimCSE,
# AdamW 2e-5, cosine, batch 32, one epoch = 517 steps, all-MiniLM-L6-v2) with `--seed S` for
# S = 1, 2, 3 (the seed draws dropout masks and the batch order), seed-major so that a cut run
# leaves balanced seeds; then nest eval at the last layer and the paired comparison of each
# method's runs against MRL's (Holm over every cell), and each method's spread.
# Resumable: a finished run or report is skipped, a cut run resumes.
#
#   scripts/evidence/evidence_structure_seeds.sh [SEEDS]        default "1 2 3"
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
[ -f runs/structure/train.tsv ] || python3 scripts/data/structure_data.py
R=reports/structure-seeds
mkdir -p runs "$R"
declare -A OBJ=(
  [mrl]='[{kind = "mrl"}]'
  [mipic]='[{kind = "mrl", weight = 0.4}, {kind = "mipic", weight = 0.6}]'
  [mic]='[{kind = "mrl"}, {kind = "mic", weight = 0.6}]'
)
for s in ${1:-1 2 3}; do
  for name in mrl mipic mic; do
    run="runs/structure-$name-seed$s"
    if [ ! -f "$run/final/nest.json" ]; then
      resume=(--overwrite)
      [ -d "$run/checkpoints" ] && resume=(--resume "$run")
      /usr/bin/time -f "train $name seed $s: %e s wall" \
        $N train --recipe recipes/mrl-simcse.toml --run-dir "$run" --epochs 1 --seed "$s" "${resume[@]}" \
        --objective "${OBJ[$name]}"
    fi
    out="$R/$name-seed$s"
    [ -f "$out/report.json" ] || /usr/bin/time -f "eval $name seed $s: %e s wall" \
      $N eval --tasks sts,cls,pair --layers 6 --dims 16,32,64,128,256,384 --latency-texts 0 \
      --model "$run/final" --out "$out" > /dev/null
  done
done
g() { local v=(); for s in ${1:-1 2 3}; do v+=("$R/$2-seed$s/report.json"); done; (IFS=,; echo "${v[*]}"); }
$N eval compare "$(g "${1:-}" mrl)" "$(g "${1:-}" mipic)" "$(g "${1:-}" mic)" --resamples 2000 \
  --out "$R/compare" > "$R/compare.md"
for name in mrl mipic mic; do
  # shellcheck disable=SC2046
  $N eval seeds $(g "${1:-}" $name | tr , ' ') --out "$R/seeds-$name" > /dev/null
done
echo "wrote $R"

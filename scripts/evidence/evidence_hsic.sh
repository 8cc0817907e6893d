#!/usr/bin/env bash
# Does IBKD's HSIC term change the student? (issue 24; docs/DISTILL.md "HSIC's bandwidth")
# Stage 1 only (InfoNCE(W S, T) + beta1 HSIC(X, S)), the same budget, seed and data for every
# variant; they differ only in the HSIC term:
#   crd          beta1 = 0 (no HSIC; the control every variant is measured against)
#   paper        RBF gamma 0.5 on the raw pooled vectors (Table 1; Nest's default)
#   median       RBF with the median-heuristic bandwidth (per batch, per side)
#   norm         RBF gamma 0.5 on L2-normalised rows
#   norm-median  both
# Budget: a seed-42 sample of 3,200 stage-1 texts (scripts/data/ibkd_data.py --sample 3200), one epoch
# at batch 64 = 50 steps, lr LR (default Table 1's 1e-4). Measured: STS-B dev after the stage
# (the trainer's final grid; the choice is made there), and the relative weight change against
# crd (scripts/evidence/weight_diff.py); then each student on the sts family (STS-B test, SICK-R test;
# last layer, 384 dims) and a paired bootstrap of every variant against crd (nest eval compare,
# 2,000 resamples, Holm over the variants). Resumable: a finished run or report is skipped.
#
# SEEDS (default "42") are training seeds (dropout, batch order; the text sample stays seed 42's);
# with several, each variant's runs form one side of the comparison (per-item scores averaged
# over its runs) and nest eval seeds gives each variant's spread.
#
#   scripts/evidence/evidence_hsic.sh                   one seed (prints the weight changes against crd)
#   SEEDS="42 1 2" scripts/evidence/evidence_hsic.sh    three
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
S1=runs/ibkd/stage1-3200.tsv
LR=${LR:-1e-4}
PY=${PY:-/work/venv/bin/python}
mkdir -p runs/ibkd
[ -f "$S1" ] || python3 scripts/data/ibkd_data.py --sample 3200 --out "$S1"
declare -A OBJ=(
  [crd]='[{kind = "distill", loss = "infonce", temperature = 0.1}]'
  [paper]='[{kind = "distill", loss = "infonce", temperature = 0.1}, {kind = "hsic", weight = 1.0, kernel = "rbf", gamma = 0.5}]'
  [median]='[{kind = "distill", loss = "infonce", temperature = 0.1}, {kind = "hsic", weight = 1.0, kernel = "rbf", bandwidth = "median"}]'
  [norm]='[{kind = "distill", loss = "infonce", temperature = 0.1}, {kind = "hsic", weight = 1.0, kernel = "rbf", gamma = 0.5, normalize = true}]'
  [norm-median]='[{kind = "distill", loss = "infonce", temperature = 0.1}, {kind = "hsic", weight = 1.0, kernel = "rbf", bandwidth = "median", normalize = true}]'
)
SEEDS=${SEEDS:-42}
dir_of() { if [ "$2" = 42 ]; then echo "runs/hsic-lr$LR-$1"; else echo "runs/hsic-lr$LR-seed$2-$1"; fi; }
R=reports/hsic-lr$LR
rep_of() { if [ "$2" = 42 ]; then echo "$R/$1"; else echo "$R/seed$2-$1"; fi; }
for seed in $SEEDS; do
  for name in crd paper median norm norm-median; do
    dir=$(dir_of "$name" "$seed")
    [ -f "$dir/done" ] && continue
    resume=(); [ -d "$dir" ] && resume=(--resume)
    /usr/bin/time -f "$name seed $seed: %e s wall" $N distill --recipe recipes/ibkd.toml --stage 1 \
      --run-dir "$dir" "${resume[@]}" --stage1.data "$S1:single" --stage1.lr "$LR" \
      --stage1.seed "$seed" --stage1.objective "${OBJ[$name]}"
    touch "$dir/done"
  done
  for name in paper median norm norm-median; do
    echo "$name vs crd, seed $seed: $($PY scripts/evidence/weight_diff.py "$(dir_of crd "$seed")/stage1/final" "$(dir_of "$name" "$seed")/stage1/final")"
  done
  for name in crd paper median norm norm-median; do
    out=$(rep_of "$name" "$seed")
    [ -f "$out/report.json" ] || $N eval --model "$(dir_of "$name" "$seed")/stage1/final" --tasks sts \
      --layers 6 --dims 384 --latency-texts 0 --dtype float32 --out "$out" > /dev/null
  done
done
side() { local v=(); for seed in $SEEDS; do v+=("$(rep_of "$1" "$seed")/report.json"); done; (IFS=,; echo "${v[*]}"); }
tag=$(echo "$SEEDS" | tr ' ' '-')
$N eval compare "$(side crd)" "$(side paper)" "$(side median)" "$(side norm)" "$(side norm-median)" \
  --resamples 2000 --out "$R/compare-seeds-$tag"
if [ "$(echo "$SEEDS" | wc -w)" -ge 2 ]; then
  for name in crd paper median norm norm-median; do
    # shellcheck disable=SC2046
    $N eval seeds $(side "$name" | tr , ' ') --out "$R/seeds-$tag-$name" > /dev/null
  done
fi

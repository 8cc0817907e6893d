#!/usr/bin/env bash
# Issue 35: why SMEC falls below MRL at 48 dims (docs/COMPRESSION.md, "Levers"). The setting
# scripts/evidence/evidence_smec_seeds.sh chose on validation for each method (SMEC lr 3e-3 scale 10;
# MRL lr 1e-2 scale 10 with 35 epochs), seeds 1 2 3, SciFact, all-MiniLM-L6-v2, and two levers:
#   smec-budget  every stage runs the baselines' 35 epochs (no early stop; the best validation
#                loss of the stage is kept, as always)
#   smec-soft    ADS passes gradient through the Gumbel-softmax weights (--ads-gradient soft)
#   smec-both    both
# then nest eval compare of every variant against SMEC's and MRL's runs (paired over the 300
# test queries, Holm over every cell). Resumable: a finished adaptor (adaptor.json) is kept.
#
#   scripts/evidence/evidence_smec_levers.sh        then: reports/smec-levers/compare*.md
#   SEEDS=1 VARIANTS="smec-soft smec-budget" scripts/evidence/evidence_smec_levers.sh   # a subset
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
T=${THREADS:-1}
D=${NEST_DATA:-../shared/datasets}
M=models/all-MiniLM-L6-v2
DIMS=384,192,96,48
A=adaptors/smec-levers
R=reports/smec-levers
mkdir -p "$A" "$R"
declare -A FLAGS=(
  [smec]='smec --lr 0.003 --scale 10'
  [smec-budget]='smec --lr 0.003 --scale 10 --epochs 35 --patience 1000'
  [smec-soft]='smec --lr 0.003 --scale 10 --ads-gradient soft'
  [smec-both]='smec --lr 0.003 --scale 10 --epochs 35 --patience 1000 --ads-gradient soft'
  [mrl]='mrl --lr 0.01 --scale 10 --epochs 35'
)
VARIANTS=${VARIANTS:-smec mrl smec-soft smec-budget smec-both}
for s in ${SEEDS:-1 2 3}; do
  for v in $VARIANTS; do
    out="$A/$v-seed$s"
    [ -f "$out/adaptor.json" ] && continue
    read -r method rest <<< "${FLAGS[$v]}"
    # shellcheck disable=SC2086
    /usr/bin/time -f "$out: %e s" $N --threads "$T" compress --method "$method" $rest \
      --dims "$DIMS" --model "$M" --beir "$D/scifact" --seed "$s" --out "$out" > /dev/null
  done
done
[ "${SEEDS:-1 2 3}" = "1 2 3" ] || exit 0   # the paired comparison needs all three seeds
group() { echo "$A/$1-seed1/report.json,$A/$1-seed2/report.json,$A/$1-seed3/report.json"; }
$N eval compare "$(group smec)" "$(group smec-budget)" "$(group smec-soft)" "$(group smec-both)" \
  --resamples 2000 --out "$R/compare-smec" > "$R/compare-smec.md"
$N eval compare "$(group mrl)" "$(group smec)" "$(group smec-budget)" "$(group smec-soft)" "$(group smec-both)" \
  --resamples 2000 --out "$R/compare-mrl" > "$R/compare-mrl.md"
for v in $VARIANTS; do
  python3 -c "import json;a=json.load(open('$A/$v-seed1/adaptor.json'))['info'];print('$v seed 1: epochs', len(a['history']))"
done
echo "wrote $R"

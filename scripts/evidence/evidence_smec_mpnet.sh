#!/usr/bin/env bash
# SMEC against parallel MRL on a second backbone: all-mpnet-base-v2's frozen 768-dim vectors on
# SciFact, at 768, 384, 192, 96 (D/8, as MiniLM's 384 to 48 and the one-seed MPNet table of
# docs/COMPRESSION.md) and 48 dims (MiniLM's smallest), with three seeds and paired tests. The
# settings are the ones chosen on MiniLM's validation split (scripts/evidence/evidence_smec_seeds.sh,
# evidence_smec_levers.sh), not tuned again: SMEC lr 3e-3 scale 10, MRL lr 1e-2 scale 10, both
# 35 epochs (per stage for SMEC, no early stop: the default since the levers run). Seeds 1 2 3,
# then nest eval compare (paired over the 300 test queries, Holm over every cell). Resumable: a
# finished adaptor (adaptor.json) is kept. The first run fills the embedding cache (MPNet over
# the 5,183 abstracts and the queries).
#
#   scripts/evidence/evidence_smec_mpnet.sh        then: reports/smec-mpnet/compare.md
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
T=${THREADS:-2}
D=${NEST_DATA:-../shared/datasets}
M=models/all-mpnet-base-v2
DIMS=48,96,192,384,768
A=adaptors/smec-mpnet
R=reports/smec-mpnet
mkdir -p "$A" "$R"
declare -A FLAGS=(
  [smec]='smec --lr 0.003 --scale 10 --epochs 35'
  [mrl]='mrl --lr 0.01 --scale 10 --epochs 35'
)
for s in ${SEEDS:-1 2 3}; do
  for v in mrl smec; do
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
$N eval compare "$(group mrl)" "$(group smec)" --resamples 2000 --out "$R/compare" > "$R/compare.md"
echo "wrote $R"

#!/usr/bin/env bash
# SMEC against Matryoshka-Adaptor, Search-Adaptor and plain MRL on SciFact (all-MiniLM-L6-v2),
# with the same tuning for every method and 3 seeds (issue 24; docs/COMPRESSION.md):
#  1. tuning, seed 42: every method over the same grid, lr {1e-3, 3e-3, 1e-2} x scale {10, 20};
#     each method keeps the setting with the best mean validation nDCG@10 over its four dims
#     (the held-out 20% of the train qrels' queries; test is never read for a choice);
#  2. seeds 1, 2, 3 with each method's setting (the seed also draws the train / validation split);
#     the parallel methods get the epochs SMEC used at seed 42 with its chosen setting;
#  3. nest eval compare: SMEC's three runs against each baseline's, paired over the 300 test
#     queries, Holm over every cell; nest eval seeds for the spread.
# Resumable: a finished adaptor (adaptor.json) is kept.
#
#   scripts/evidence/evidence_smec_seeds.sh          then: see reports/smec-seeds/*/compare.md
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
T=${THREADS:-2}
D=${NEST_DATA:-../shared/datasets}
M=models/all-MiniLM-L6-v2
DIMS=384,192,96,48
METHODS="smec matryoshka-adaptor search-adaptor mrl"
A=adaptors/smec-seeds
R=reports/smec-seeds
mkdir -p "$A" "$R"
run() { # out method [flags...]
  local out=$1 method=$2; shift 2
  [ -f "$out/adaptor.json" ] && return
  /usr/bin/time -f "$out: %e s" $N --threads "$T" compress --method "$method" --dims "$DIMS" \
    --model "$M" --beir "$D/scifact" --out "$out" "$@" > /dev/null
}
val() { python3 -c "import json,sys;v=json.load(open('$1/adaptor.json'))['info']['val_ndcg_at_10'];print(sum(v.values())/len(v))"; }
epochs() { python3 -c "import json;print(len(json.load(open('$1/adaptor.json'))['info']['history']))"; }

# 1. tuning (seed 42); SMEC first, its epochs are the parallel methods' budget
for lr in 0.001 0.003 0.01; do for sc in 10 20; do
  run "$A/tune/smec-lr$lr-s$sc" smec --lr "$lr" --scale "$sc" --seed 42
done; done
pick() { # method -> "lr scale" with the best validation mean
  for lr in 0.001 0.003 0.01; do for sc in 10 20; do
    echo "$(val "$A/tune/$1-lr$lr-s$sc") $lr $sc"
  done; done | sort -g -r | head -1 | cut -d' ' -f2,3
}
read -r SLR SSC <<< "$(pick smec)"
E=$(epochs "$A/tune/smec-lr$SLR-s$SSC")
echo "smec: lr $SLR scale $SSC, $E epochs; the parallel methods get $E" | tee "$A/choices.txt"
for meth in matryoshka-adaptor search-adaptor mrl; do
  for lr in 0.001 0.003 0.01; do for sc in 10 20; do
    run "$A/tune/$meth-lr$lr-s$sc" "$meth" --lr "$lr" --scale "$sc" --seed 42 --epochs "$E"
  done; done
done
for meth in $METHODS; do
  echo "$meth: $(pick "$meth") (validation means: $(for f in "$A"/tune/"$meth"-lr*; do printf '%s=%.4f ' "${f##*/$meth-}" "$(val "$f")"; done))"
done | tee -a "$A/choices.txt"

# 2. seeds
for meth in $METHODS; do
  read -r lr sc <<< "$(pick "$meth")"
  extra=(); [ "$meth" = smec ] || extra=(--epochs "$E")
  for s in 1 2 3; do
    run "$A/$meth-seed$s" "$meth" --lr "$lr" --scale "$sc" --seed "$s" "${extra[@]}"
  done
done

# 3. paired comparisons and spreads
group() { echo "$A/$1-seed1/report.json,$A/$1-seed2/report.json,$A/$1-seed3/report.json"; }
$N eval compare "$(group smec)" "$(group matryoshka-adaptor)" "$(group search-adaptor)" "$(group mrl)" \
  --resamples 2000 --out "$R/compare" > "$R/compare.md"
for meth in $METHODS; do
  $N eval seeds "$A/$meth-seed1/report.json" "$A/$meth-seed2/report.json" "$A/$meth-seed3/report.json" \
    --out "$R/seeds-$meth" > /dev/null
done
echo "wrote $R"

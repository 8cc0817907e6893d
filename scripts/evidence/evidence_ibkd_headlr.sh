#!/usr/bin/env bash
# Issue 35, IBKD's map W at the heads' rate. At stage 1's lr (1e-5, chosen on STS-B dev) and 50
# steps, W hardly moves from its start (PyTorch's random init for the learned map, [I; 0] for the
# student's head), so the student is fitted to a W that was never fitted. The lever: stage 1 with
# `head_lr = HEAD_LR` (default 1e-3, the value MIPIC's heads took), for both maps:
#   learned   W in the objective (recipes/ibkd.toml), s scored            [evidence_ibkd_seeds.sh]
#   identity  W = the student's Dense head, W s scored                    [evidence_ibkd_ws.sh]
# Each arm's head_lr (its lr, or HEAD_LR) is chosen on STS-B dev with seed 42, against that arm's
# run at its own lr (made by the two scripts above, which run first); a winner is then run over
# SEEDS and compared on test with stage 2 alone (paired bootstrap, 2,000 resamples, Holm; full
# vectors with --full-dim). Same data, budget, stage 2 and evaluation as those scripts.
#   STUDENT=models/minilm-cls-reinit2 TAG=-reinit2 scripts/evidence/evidence_ibkd_headlr.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
S1=runs/ibkd/stage1-3200.tsv
SEEDS=${SEEDS:-42 1 2}
LR=${LR:-1e-5}
HEAD_LR=${HEAD_LR:-1e-3}
STAGE2_STEPS=${STAGE2_STEPS:-24}
TAG=${TAG:--reinit2}
STUDENT=${STUDENT:-models/minilm-cls-reinit2}
R=reports/ibkd-seeds$TAG
W=runs/ibkd-seeds$TAG
HSIC='{kind = "hsic", weight = 1.0, kernel = "rbf", gamma = 0.5, normalize = true}'
declare -A OBJ=(
  [ibkd]="[{kind = \"distill\", loss = \"infonce\", temperature = 0.1}, $HSIC]"
  [ibkdws]="[{kind = \"distill\", loss = \"infonce\", temperature = 0.1, map = \"identity\"}, $HSIC]"
)
declare -A EXTRA=([ibkd]="" [ibkdws]="--stage1.projection 768")
declare -A DIMS=([ibkd]="128,384" [ibkdws]="128,384,768")
# the arm's run at its own lr (the earlier scripts' names)
declare -A BASE=([ibkd]="dev-ibkd2-lr$LR-s42" [ibkdws]="dev-ibkdws-lr$LR-s42")

run() {
  local arm=$1 dir=$2 seed=$3
  [ -f "$dir/done" ] && return
  local resume=(); [ -d "$dir" ] && resume=(--resume)
  # shellcheck disable=SC2086
  /usr/bin/time -f "$dir: %e s wall" "$N" distill --recipe recipes/ibkd.toml --run-dir "$dir" \
    --stage all "${resume[@]}" --student "$STUDENT" --stage1.data "$S1:single" \
    --stage1.objective "${OBJ[$arm]}" ${EXTRA[$arm]} --stage1.lr "$LR" --stage1.head_lr "$HEAD_LR" \
    --stage1.seed "$seed" --stage2.seed "$seed" --stage2.max_steps "$STAGE2_STEPS"
  touch "$dir/done"
}
evaluate() {
  local data=(--tasks sts); [ -n "${4:-}" ] && data=(sts --data "$4")
  [ -f "$R/$1/report.json" ] || "$N" eval "${data[@]}" --model "$2" --layers 6 --dims "$3" \
    --latency-texts 0 --dtype float32 --out "$R/$1" > /dev/null
}
best_dev() {
  python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print(max(c['metrics']['spearman'] for c in d['tasks'][0]['cells'] if c['dim'] == max(d['dims'])))" "$1"
}
side() { local v=(); for seed in $SEEDS; do v+=("$R/$1-s$seed/report.json"); done; (IFS=,; echo "${v[*]}"); }

for arm in ibkd ibkdws; do
  name="$arm-hlr$HEAD_LR-lr$LR"
  run "$arm" "$W/$name-s42" 42
  evaluate "dev-${arm}2-hlr$HEAD_LR-lr$LR-s42" "$W/$name-s42/stage2/final" "${DIMS[$arm]}" \
    ../shared/datasets/stsb/dev.tsv
  with=$(best_dev "$R/dev-${arm}2-hlr$HEAD_LR-lr$LR-s42/report.json")
  without=$(best_dev "$R/${BASE[$arm]}/report.json")
  echo "$arm: STS-B dev at the full vector: head_lr $HEAD_LR $with, head_lr = lr $without"
  if python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)" "$with" "$without"; then
    for seed in $SEEDS; do
      run "$arm" "$W/$name-s$seed" "$seed"
      evaluate "${arm}2-hlr$HEAD_LR-lr$LR-s$seed" "$W/$name-s$seed/stage2/final" "${DIMS[$arm]}"
    done
    "$N" eval compare "$(side sup)" "$(side "${arm}2-hlr$HEAD_LR-lr$LR")" --full-dim --resamples 2000 \
      --out "$R/compare-${arm}-hlr$HEAD_LR-lr$LR" > /dev/null
    echo "$arm: $R/compare-${arm}-hlr$HEAD_LR-lr$LR/compare.md"
  else
    echo "$arm: dev keeps head_lr = lr; not run over seeds"
  fi
done

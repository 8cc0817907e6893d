#!/usr/bin/env bash
# Issue 9 evidence: IBKD against its baselines, every method on the same data and budget.
#
#   scripts/evidence/evidence_ibkd.sh [train|eval|all]      (default all; each run resumes or is skipped when done)
#
# Budget (this 2-core machine): stage 1 on S1 (default: a seed-42 sample of 12,800 of the 46,797
# stage-1 texts, `scripts/data/ibkd_data.py --sample 12800`), one epoch = 200 steps at batch 64; stage 2
# one epoch of SNLI triplets (2,955, batch 64 = 46 steps). Evaluation: STS-B test, SICK-R test
# (Spearman) and SciFact test (nDCG@10) at the last layer, dims 32..384.
# Tables: python3 scripts/evidence/ibkd_tables.py
set -euo pipefail
cd "$(dirname "$0")/../.."
NEST=${NEST:-target/release/nest}
S1=${S1:-runs/ibkd/stage1-12800.tsv}
MODE=${1:-all}
DIMS=32,64,128,256,384
mkdir -p runs/ibkd reports
[ -f "$S1" ] || python3 scripts/data/ibkd_data.py --sample 12800 --out "$S1"

# distill NAME [nest distill args...]: one run in runs/ibkd-NAME, timed, skipped when finished
distill() {
  local name=$1; shift
  local dir=runs/ibkd-$name
  if [ -f "$dir/done" ]; then echo "== $name: done"; return; fi
  local resume=""
  [ -d "$dir" ] && resume="--resume"
  echo "== $name: nest distill $* $resume"
  /usr/bin/time -o "$dir.time" -f "%e s wall, %M KB peak RSS" "$NEST" distill \
    --recipe "${RECIPE:-recipes/ibkd.toml}" --run-dir "$dir" $resume "$@" --stage1.data "$S1:single"
  cat "$dir.time"
  touch "$dir/done"
}

# evaluate NAME MODEL LAYER DIMS [TASKS]: reports/ibkd-NAME/report.json
evaluate() {
  local name=$1 model=$2 layer=$3 dims=$4 tasks=${5:-sts,retrieval}
  local out=reports/ibkd-$name
  if [ -f "$out/report.json" ]; then echo "== eval $name: done"; return; fi
  echo "== eval $name ($model, layer $layer, dims $dims)"
  /usr/bin/time -f "eval $name: %e s, %M KB" "$NEST" eval --model "$model" --tasks "$tasks" \
    --layers "$layer" --dims "$dims" --latency-texts 0 --out "$out"
}

if [ "$MODE" != eval ]; then
  # IBKD: stage 1 (InfoNCE(W S, T) + HSIC) then stage 2 (MNRL + HSIC)
  distill ibkd
  # baselines, stage 1 only as the paper's Table 2 has them: MSE and CRD-style (beta = 0)
  distill mse --stage 1 --stage1.objective '[{kind = "distill", loss = "mse"}]'
  distill crd --stage 1 --stage1.objective '[{kind = "distill", loss = "infonce", temperature = 0.1}]'
  # no teacher: the student fine-tuned on stage-2 data alone
  distill sup --stage 2
  # IBKD-128: stage 2 from IBKD's stage-1 student with the projection head (section 3.4)
  distill ibkd128 --stage 2 --student runs/ibkd-ibkd/stage1/final --stage2.projection 128
  # IBKD + Matryoshka: every prefix matched to the teacher in stage 1, MRL over the dims in stage 2
  RECIPE=recipes/ibkd-matryoshka.toml distill mrl
  # the one setting chosen on STS-B dev (the student is already sentence-trained, unlike the
  # paper's): stage-1 lr 1e-5 instead of Table 1's 1e-4
  distill lr1e5 --stage1.lr 1e-5
fi

if [ "$MODE" != train ]; then
  # the teacher's STS first; its SciFact corpus pass (MPNet, 384 tokens) is the longest step, last
  evaluate teacher models/all-mpnet-base-v2 12 $DIMS,768 sts
  evaluate student models/all-MiniLM-L6-v2 6 $DIMS
  evaluate ibkd-s2 runs/ibkd-ibkd/stage2/final 6 $DIMS
  evaluate sup runs/ibkd-sup/stage2/final 6 $DIMS
  evaluate lr1e5-s2 runs/ibkd-lr1e5/stage2/final 6 $DIMS sts
  evaluate lr1e5-s2-ret runs/ibkd-lr1e5/stage2/final 6 $DIMS retrieval
  evaluate ibkd-s1 runs/ibkd-ibkd/stage1/final 6 $DIMS
  evaluate crd runs/ibkd-crd/stage1/final 6 $DIMS
  evaluate mse runs/ibkd-mse/stage1/final 6 $DIMS
  evaluate ibkd128 runs/ibkd-ibkd128/stage2/final 6 32,64,128
  evaluate mrl-s2 runs/ibkd-mrl/stage2/final 6 $DIMS
  evaluate mrl-s1 runs/ibkd-mrl/stage1/final 6 $DIMS
  evaluate teacher-ret models/all-mpnet-base-v2 12 $DIMS,768 retrieval
fi

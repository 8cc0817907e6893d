#!/usr/bin/env bash
# Issue 40: quantization-aware MRL (`quantization = ["int8", "binary"]`) against plain MRL, the
# same data, budget and hyper-parameters (docs/TRAINING.md, "Quantization-aware training"):
# recipes/mrl-stsb.toml (CoSENT on STS-B train, all-MiniLM-L6-v2, dims 16..384) for STEPS
# optimizer steps at lr LR, seeds 1 2 3, float32 training; then
#   - STS (STS-B test, SICK-R test) and SciFact retrieval over dim x {float32, int8, binary} at
#     layer 6 (`--rescore 0`: binary retrieval ranked by Hamming alone, what QAT trains),
#   - the funnel's Recall@10 (relative to the same model's exact float32:384 search) at fixed
#     shortlists over a SciFact index of each model (`nest bench search`),
#   - `nest eval compare`: QAT minus MRL per cell, paired bootstrap over the test items, seeds
#     pooled, Holm over the cells.
#
#   scripts/evidence/evidence_qat.sh train mrl "1 2 3" & scripts/evidence/evidence_qat.sh train qat "1 2 3" & wait
#   scripts/evidence/evidence_qat.sh tune "2e-5 5e-5"     # dev: the lr grid for both arms, seed 1 (reports/qat-dev)
#   scripts/evidence/evidence_qat.sh evalarm mrl "1 2 3"   # one arm's reports and funnels (optional, to overlap)
#   scripts/evidence/evidence_qat.sh probe qatb5 5e-5      # one arm (e.g. a lever) at one lr, seed 1, on dev
#   scripts/evidence/evidence_qat.sh eval "1 2 3"          # every report and funnel, then the compare
# NEST_MRL / NEST_QAT: the binary each arm trains with (default target/release/nest).
# STEPS (120), LR (5e-5), QWEIGHT (0.5); TAG: a run-name prefix (e.g. LR=2e-5 TAG=lr2e-5-);
# TASKS=sts and FUNNEL=0: evalarm without SciFact or the index (what fit for seeds 2 and 3).
# Resumable: a finished run or report is skipped, a cut run resumes.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
NEST=${NEST:-target/release/nest}
THREADS=${THREADS:-1}
STEPS=${STEPS:-120}
LR=${LR:-5e-5}
QWEIGHT=${QWEIGHT:-0.5}
DIMS=16,32,64,128,256,384
R=reports/qat
declare -A EXTRA=(
  [mrl]=''
  [qat]="--quantization [\"int8\",\"binary\"] --quantization-weight $QWEIGHT"
  # the levers against the bits' collapse (TRAINING.md, "Why binary got worse"), binary only:
  [qatb5]="--quantization [\"binary\"] --quantization-weight 1 --quantization-binary-scale 5"
  [qatspread]="--quantization [\"binary\"] --quantization-weight $QWEIGHT --quantization-spread 1"
  [qatb5spread]="--quantization [\"binary\"] --quantization-weight 1 --quantization-binary-scale 5 --quantization-spread 1"
)

train() { # arm seed
  local bin=${NEST}
  [ "$1" = mrl ] && bin=${NEST_MRL:-$NEST}
  [ "$1" = qat ] && bin=${NEST_QAT:-$NEST}
  [ -n "${EXTRA[$1]+x}" ] || { echo "no arm $1 (${!EXTRA[*]})" >&2; return 1; }
  local run="runs/qat/${TAG:-}$1-seed$2"
  [ -f "$run/final/nest.json" ] && return 0
  local resume=(--overwrite)
  [ -d "$run/checkpoints" ] && resume=(--resume "$run")
  # shellcheck disable=SC2086
  /usr/bin/time -f "train $1 seed $2: %e s wall" \
    nice -n 19 "$bin" --threads "$THREADS" train --recipe recipes/mrl-stsb.toml --run-dir "$run" \
    --max-steps "$STEPS" --lr "$LR" --seed "$2" --dtype float32 --eval-every 0 --save-every 40 \
    "${resume[@]}" ${EXTRA[$1]} > "$run.log" 2>&1 \
    || { echo "train $1 seed $2 failed: see $run.log" >&2; return 1; }
  tail -1 "$run.log"
}

evaluate() { # arm seed; TASKS (default sts,retrieval), FUNNEL=0 skips the index and funnels
  local run="runs/qat/$1-seed$2" out="$R/$1-seed$2"
  [ -f "$out/report.json" ] || nice -n 19 $NEST --threads "$THREADS" eval --tasks "${TASKS:-sts,retrieval}" \
    --layers 6 --dims $DIMS --precision float32,int8,binary --rescore 0 --dtype float32 \
    --latency-texts 0 --model "$run/final" --out "$out" > "$out.log" 2>&1
  [ "${FUNNEL:-1}" = 0 ] && return 0
  local idx="runs/qat/idx-$1-seed$2"
  # the funnel's index: SciFact's corpus cut to 128 tokens (the recall is relative to the same
  # index's exact search, so the cut costs nothing in the comparison; it halves the encoding)
  [ -f "$idx/index.json" ] || nice -n 19 $NEST --threads "$THREADS" index build --model "$run/final" \
    --input ../shared/datasets/scifact/corpus.jsonl --dims 64,128,384 --precision float32,int8,binary \
    --max-length 128 --dtype float32 --out "$idx" --overwrite > "$idx.log" 2>&1
  [ -f "$out/funnels.txt" ] || nice -n 19 $NEST --threads "$THREADS" bench search --index "$idx" \
    --queries ../shared/datasets/scifact/queries.jsonl --max-queries 1109 --funnels \
    "binary:384@100>float32:384;binary:128@100>float32:384;binary:64@100>float32:384;int8:64@100>float32:384;int8:128@30>float32:384" \
    > "$out/funnels.txt" 2>&1
}

case "${1:-}" in
train)
  mkdir -p runs/qat
  for s in ${3:-1 2 3}; do train "$2" "$s"; done
  ;;
tune) # dev: both arms at each lr of the grid (seed 1), STS-B dev over dim x precision at layer 6
  mkdir -p reports/qat-dev
  for lr in ${2:-2e-5 5e-5}; do
    tag=""
    [ "$lr" = "$LR" ] || tag="lr$lr-"
    for a in mrl qat; do
      LR=$lr TAG=$tag train "$a" 1
      out="reports/qat-dev/$a-lr$lr"
      [ -f "$out/report.json" ] || nice -n 19 $NEST --threads "$THREADS" eval sts \
        --data ../shared/datasets/stsb/dev.tsv --layers 6 --dims $DIMS --precision float32,int8,binary \
        --dtype float32 --latency-texts 0 --model "runs/qat/$tag$a-seed1/final" --out "$out" > "$out.log" 2>&1
    done
  done
  ;;
probe) # one arm at one lr on dev, seed 1 (e.g. a lever): probe ARM [LR]
  mkdir -p reports/qat-dev
  lr=${3:-$LR} tag=""
  [ "$lr" = "$LR" ] || tag="lr$lr-"
  LR=$lr TAG=$tag train "$2" 1
  out="reports/qat-dev/$2-lr$lr"
  [ -f "$out/report.json" ] || nice -n 19 $NEST --threads "$THREADS" eval sts \
    --data ../shared/datasets/stsb/dev.tsv --layers 6 --dims $DIMS --precision float32,int8,binary \
    --dtype float32 --latency-texts 0 --model "runs/qat/$tag$2-seed1/final" --out "$out" > "$out.log" 2>&1
  ;;
evalarm) # one arm's reports and funnels, e.g. while the other arm still trains
  mkdir -p "$R"
  for s in ${3:-1 2 3}; do evaluate "$2" "$s"; done
  ;;
eval)
  seeds=${2:-1 2 3}
  mkdir -p "$R"
  for s in $seeds; do for a in mrl qat; do evaluate "$a" "$s"; done; done
  g() { local v=(); for s in $seeds; do v+=("$R/$1-seed$s/report.json"); done; (IFS=,; echo "${v[*]}"); }
  nice -n 19 $NEST eval compare "$(g mrl)" "$(g qat)" --resamples 2000 --out "$R/compare" > "$R/compare.md"
  echo "wrote $R/compare.md"
  ;;
*)
  echo "usage: $0 train mrl|qat [SEEDS] | tune [LRS] | evalarm mrl|qat [SEEDS] | eval [SEEDS]" >&2
  exit 2
  ;;
esac

#!/usr/bin/env bash
# Issue 35 on a lent GPU, in ONE call (with issue 41's sections 8 and 7 first and beside it):
#   1. issue 41 s8: the MPNet-base-shape training step, alone on the GPU (scripts/gpu/gpu_issue41.sh)
#   2. a small BERT pre-trained from scratch with MLM only on the text of ../shared/datasets
#      (scripts/data/mlm_pretrain.py, MLM_STEPS=2600 steps of 32,768 tokens: about 140 s on an H100),
#      while issue 41 s7 (NCCL, one rank) runs beside it
#   3. the fidelity protocol on it (scripts/evidence/evidence_fidelity.sh test mlm): MRL, MIPIC, MIPIC with
#      head_lr, MIC; seeds 1 2 3; STEPS=250 (the CPU evidence's budget); four lanes on one GPU;
#      then the dev stage (STS-B dev, seed 1) and the paired comparison (Holm)
#   4. while time is left: the papers' budget (5 epochs, seed 1) for MRL, MIPIC with head_lr, MIC
# Prepare here:   scripts/gpu/gpu_bundle.sh && scripts/gpu/gpu_issue35.sh --prepare
# Run there:      carry [".gpu"], command `bash scripts/gpu/gpu_issue35.sh` (TOTAL_S=560 by default;
#                 I41="" skips issue 41's sections; the machine keeps models/ and runs/ between
#                 warm calls: remove models/mlm-small runs/fidelity to start over)
# Check here:     DRY=1 bash scripts/gpu/gpu_issue35.sh   (tiny budgets on the CPU, target/release/nest)
# Back in $OUT: mlm-small.tar.xz.00.. (the backbone, float16 storage), results.tar.xz, summary.txt.
# Unpack here:    scripts/gpu/gpu_issue35.sh --unpack DIR   (models/mlm-small, reports/, runs/fidelity/*.log)
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
G=$REPO/.gpu
if [ "${1:-}" = --prepare ]; then
  mkdir -p "$G/stcls"
  (cd ../shared/datasets && tar -cf - ./*/train.tsv ./*/dev.tsv scifact/corpus.jsonl stsb/test.tsv sick-r/test.tsv \
    mrpc/test.tsv wic/test.tsv sick-e/test.tsv | xz -9 -T2 > "$G/ds.tar.xz")
  [ -f models/minilm-cls/modules.json ] || python3 scripts/data/paperlike_models.py
  cp -r models/minilm-cls/{1_Pooling,modules.json,sentence_bert_config.json,config_sentence_transformers.json} "$G/stcls/"
  du -sh "$G"
  exit 0
fi
if [ "${1:-}" = --unpack ]; then
  F=$2
  mkdir -p models/mlm-small
  cat "$F"/mlm-small.tar.xz.* | tar -xJf - -C models/mlm-small
  /work/venv/bin/python - << 'EOF'
from safetensors.torch import load_file, save_file
d = load_file("models/mlm-small/model.fp16.safetensors")
save_file({k: (v.float() if v.is_floating_point() else v).contiguous() for k, v in d.items()}, "models/mlm-small/model.safetensors", metadata={"format": "pt"})
EOF
  rm models/mlm-small/model.fp16.safetensors
  rm -rf /tmp/u35 && mkdir -p /tmp/u35 reports/gpu35 reports/fidelity-test reports/fidelity-dev runs/fidelity
  tar -xJf "$F/results.tar.xz" -C /tmp/u35
  cp -r /tmp/u35/reports/fidelity-test/mlm* reports/fidelity-test/ 2> /dev/null
  cp -r /tmp/u35/reports/fidelity-dev/mlm-* reports/fidelity-dev/ 2> /dev/null
  cp -r /tmp/u35/runs/fidelity/* runs/fidelity/ 2> /dev/null
  cp -r /tmp/u35/tmp/r35/* reports/gpu35/
  ls reports/gpu35 reports/fidelity-test/mlm*
  exit 0
fi

T0=$(date +%s)
DRY=${DRY:-0}
OUT=${OUT:-/tmp/nest-issue35-out}
R=/tmp/r35
rm -rf "$R" && mkdir -p "$OUT" "$R"
export PYTHONUNBUFFERED=1 OMP_WAIT_POLICY=PASSIVE
elapsed() { echo $(($(date +%s) - T0)); }
log() { echo "[$(elapsed)s] $*" | tee -a "$R/steps.log"; }
left() { echo $((TOTAL_S - $(elapsed))); }

if [ "$DRY" = 1 ]; then
  TOTAL_S=${TOTAL_S:-3000} PY=/work/venv/bin/python N=$REPO/target/release/nest
  MLM_ARGS=(--small-data --max-steps 3 --tokens-per-batch 4096) STEPS=2 SEEDS="1" LANES="mrl mic" THREADS=1 PAPER_STEPS=4
  MLM_TOK=models/all-MiniLM-L6-v2 STCLS=models/minilm-cls BASE=mlm-dry
  export METHODS="$LANES" TEST_TASKS=sts
else
  TOTAL_S=${TOTAL_S:-560} PY=python3 N=/tmp/nest
  MLM_ARGS=(--max-steps "${MLM_STEPS:-2600}") STEPS=250 SEEDS="1 2 3" LANES="mrl mipic mipic-heads mic" THREADS=3 PAPER_STEPS=2585
  MLM_TOK=$G/minilm STCLS=$G/stcls BASE=mlm
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$R/gpu.txt"
  TL=$("$PY" -c "import torch, os; print(os.path.dirname(torch.__file__) + '/lib')")
  export LD_LIBRARY_PATH=$TL:${LD_LIBRARY_PATH:-}
  "$PY" -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" "$G/nest.xz" "$N" && chmod +x "$N"
  if [ ! -d ../shared/datasets/stsb ]; then
    mkdir -p ../shared/datasets && tar -xJf "$G/ds.tar.xz" -C ../shared/datasets
  fi
  "$PY" -c "import torch, transformers; print('torch', torch.__version__, '| transformers', transformers.__version__)" | tee -a "$R/gpu.txt"
fi
export NEST=$N THREADS TAG="" MLM_MODEL=models/$BASE-small
B=$BASE

# 1. issue 41, section 8 (alone on the GPU: a timing)
if [ "$DRY" != 1 ] && [[ " ${I41-8 7} " == *" 8 "* ]]; then
  log "issue 41 s8 (MPNet-shape training step)"
  OUT=$R/i41-s8 SECTIONS=8 TOTAL_S=${S8_TOTAL:-110} S8_S=95 bash scripts/gpu/gpu_issue41.sh > "$R/i41-s8.log" 2>&1
  tail -4 "$R/i41-s8.log"
fi

# 2. MLM pre-training, with issue 41's section 7 beside it
S7_PID=""
if [ "$DRY" != 1 ] && [[ " ${I41-8 7} " == *" 7 "* ]]; then
  (sleep 20 && OUT=$R/i41-s7 WORK=/tmp/issue41-s7 SECTIONS=7 TOTAL_S=90 bash scripts/gpu/gpu_issue41.sh > "$R/i41-s7.log" 2>&1) &
  S7_PID=$!
fi
log "MLM pre-training (${MLM_ARGS[*]})"
if [ ! -f "$MLM_MODEL/model.safetensors" ]; then
  "$PY" scripts/data/mlm_pretrain.py --root ../shared/datasets --tokenizer "$MLM_TOK" --st-files "$STCLS" \
    --out "$MLM_MODEL" --round-fp16 "${MLM_ARGS[@]}" > "$R/mlm.log" 2>&1 || { log "MLM failed"; tail -5 "$R/mlm.log"; }
fi
grep -E "corpus:|ms per step|held-out" "$R/mlm.log"
[ -n "$S7_PID" ] && { wait "$S7_PID"; tail -3 "$R/i41-s7.log"; }

# 3. the fidelity protocol on the MLM backbone: one lane per method, seeds in turn
if [ -f "$MLM_MODEL/model.safetensors" ]; then
  log "fidelity, STEPS=$STEPS, seeds $SEEDS, lanes: $LANES"
  # the training set once, before the lanes (four lanes making it at once raced, call 1)
  [ -f runs/structure/train.tsv ] || "$PY" scripts/data/structure_data.py > "$R/structure_data.log" 2>&1
  pids=()
  for m in $LANES; do
    STEPS=$STEPS COMPARE=0 timeout -k 5 $(($(left) - 60)) bash scripts/evidence/evidence_fidelity.sh test $B "$m" "$SEEDS" \
      > "$R/lane-$m.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  log "lanes done"
  grep -h "wall" runs/fidelity/$B-*.log 2> /dev/null | sort | tee "$R/walls.txt"
  STEPS=$STEPS timeout 60 bash scripts/evidence/evidence_fidelity.sh test $B "$LANES" "$SEEDS" > "$R/compare.log" 2>&1
  STEPS=$STEPS timeout 90 bash scripts/evidence/evidence_fidelity.sh dev $B > "$R/dev.log" 2>&1
  tail -22 "$R/dev.log"
  # 4. the papers' budget, while time is left
  if (($(left) > 150)); then
    log "papers' budget: 5 epochs (at most $PAPER_STEPS steps), seed 1, $(left) s left"
    pids=()
    for m in mrl mipic-heads mic; do
      [ "$DRY" = 1 ] && [[ " $LANES " != *" $m "* ]] && continue
      TAG=-5ep EPOCHS=5 STEPS=$PAPER_STEPS COMPARE=0 timeout -k 5 $(($(left) - 25)) \
        bash scripts/evidence/evidence_fidelity.sh test $B "$m" "1" > "$R/lane5-$m.log" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    grep -h "wall" runs/fidelity/$B-5ep-*.log 2> /dev/null | tee -a "$R/walls.txt"
    ls reports/fidelity-test/$B-5ep/ 2> /dev/null
  fi
fi

# pack what comes back (at most 8 files)
log "packing"
tar -cJf "$OUT/results.tar.xz" "$R" reports/fidelity-test/$B* reports/fidelity-dev/$B-* runs/fidelity/$B*.log \
  $(ls runs/fidelity/$B*/metrics.jsonl 2> /dev/null) 2> /dev/null
if [ -f "$MLM_MODEL/model.safetensors" ]; then
  rm -rf /tmp/mlm-pack && cp -r "$MLM_MODEL" /tmp/mlm-pack
  "$PY" - << 'EOF'
from safetensors.torch import load_file, save_file
d = load_file("/tmp/mlm-pack/model.safetensors")
save_file({k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in d.items()}, "/tmp/mlm-pack/model.fp16.safetensors")
EOF
  rm /tmp/mlm-pack/model.safetensors
  (cd /tmp/mlm-pack && tar -cf - . | xz -3 -T8) | split -b 15M -d - "$OUT/mlm-small.tar.xz."
fi
{
  cat "$R/gpu.txt" 2> /dev/null
  cat "$MLM_MODEL/MLM.md" 2> /dev/null
  cat "$R/walls.txt" 2> /dev/null
  cat reports/fidelity-test/$B/compare.md 2> /dev/null | head -60
} > "$OUT/summary.txt"
ls -la "$OUT"
head -c 9000 "$OUT/summary.txt"
echo "total wall: $(elapsed)s"

#!/usr/bin/env bash
# Issue 41 ("A GPU that earns its keep"): every GPU measurement of the issue in ONE call on a lent
# GPU machine, each with its peer in the same run. Run it there with `carry: [".gpu"]` (made by
# scripts/gpu/gpu_bundle.sh: the `--features cuda` nest, MiniLM in float16 storage, the data, wheels):
#
#   bash scripts/gpu/gpu_issue41.sh                    # all sections, TOTAL_S=470 s of wall time at most
#   SECTIONS="1 3" S3_S=200 bash scripts/gpu/gpu_issue41.sh   # some sections, another budget
#   NEST_GPU_DRY=1 bash scripts/gpu/gpu_issue41.sh     # here, on the CPU: tiny budgets and data,
#                                                  # target/release/nest, /work/venv's Python
#
# Sections, run in the order SECTIONS lists them (budget in seconds, env override; a section
# starts only with >= 15 s of TOTAL_S left and gets at most what is left; every command under
# `timeout`, failures logged and skipped). Expected H100 wall time in brackets:
#   1  S1_S=130  training step, MiniLM bf16, batch 32 and 256, `--cuda-graph on|off`, next to
#                PyTorch autocast + the sentence-transformers trainer (scripts/bench/bench_train.py,
#                once per batch size) [~90 s]
#   2  S2_S=250  early exit: bench encode --layers 3,6, batch 32 and 256, auto,bf16 against
#                ST float32 and bf16; peak GPU memory of Nest and the peer; then Nest alone
#                with the tokenizer's words warm (--words warm; and a profiler trace) and
#                without its word cache (NEST_WORD_CACHE=0); every STS-B split (17,256
#                sentences) and a sample of it (an encode's cost a sentence apart from its
#                fixed part); the tokeniser on two threads fewer than the host has
#                (RAYON_NUM_THREADS); shapes padded to 8 and 4 tokens (NEST_GRAPH_BUCKET);
#                nest-model's GPU tests if 4 or 11 has not run them; libtorch on 2 and 4
#                threads (`--threads`, since 2026-11-29); last, without
#                tokenising ahead (NEST_TOKENIZE_AHEAD=0) and without CUDA graphs [~230 s]
#   3  S3_S=150  production shapes with random weights (made at the start, in the background,
#                by transformers: Qwen3-Embedding-0.6B 28 layers, EmbeddingGemma-300m 24):
#                encode at full and half depth, bf16 and float32 against ST torch-bf16 and
#                torch-float32, batch 32 (256 while time is left); tokens per sentence
#                (S3_MODELS=gemma: EmbeddingGemma's alone) [~120 s; ~150 s for Gemma alone, its float32 peer included]
#   4  S4_S=155  nest-model's GPU tests (two threads recording at once among them; also run by
#                2 and 11, whichever runs first), scripts/bench/peer_st_server.py --device cuda, then
#                nest serve: auto at layers 6 and 3; auto at 6 with --workers 2 (two model copies, each worker on a
#                stream of its own: one's host work overlaps the other's passes); auto at 6 as
#                before 2026-11-27 (NEST_LENGTH_RUNS=1: a batch split into length runs;
#                --http-threads 2; a GPU server now runs one pass per batch and more HTTP
#                threads); float32 at 6: 64 clients, SERVE_S=15 s each after WARM_S=5 [~140 s]
#   5  S5_S=70   nest eval sts, STS-B + SICK-R test, float32 against bf16, cell by cell, and
#                Nest's own paired-bootstrap compare (CPU-bound: 40 s on 2 cores) [~25 s]
#   6  S6_S=70   numerics: 200 steps of recipes/gpu-numerics-mrl.toml against the CPU's losses
#                (tests/fixtures/gpu_cpu_losses_200.json); kill -9 after checkpoint 100, resume,
#                against the uninterrupted run [~40 s]
#   7  S7_S=60   torchrun with one rank (and two ranks on the one GPU) of nest train; whether
#                NCCL ran (NCCL_DEBUG=INFO); nest-dist's one-rank NCCL test as is, then while it
#                crashes at its end, with the group leaked, then without the heartbeat monitor [~40 s]
#   8  S8_S=70   MPNet-base shape (12 x 768) training step, bf16, --cuda-graph on|off, + peer
#                [~50 s; runs only if the others left time]
#  10  S10_S=200 GradCache: batch 256 in chunks of 32, bf16, --cuda-graph on|off (the chunk passes
#                recorded), MiniLM then the MPNet-base shape, next to PyTorch's GradCache step
#                and sentence-transformers' CachedMultipleNegativesRankingLoss [~150 s]
#  11  S11_S=120 graph memory pools, NEST_GRAPH_POOL=private against shared (the default since
#                2026-11-28): 200 steps of
#                recipes/gpu-numerics-mrl.toml recorded, plain and GradCache (chunks of 8; and
#                eager GradCache), losses compared step by step (a shared pool that clobbered a
#                live tensor would show here), peak GPU memory per process; bench encode
#                MiniLM batch 32 and 256 under both pools [~60 s]
#  12  S12_S=180 2DMSE (one shallow layer drawn a step), MRL + MIC, MIPIC (eq. 18) and IBKD
#                (MRL + distillation towards a cached teacher, MiniLM itself, + HSIC), MiniLM
#                bf16 batch 32: `bench train --cuda-graph off` with all of them next to
#                PyTorch's 2DMSE and MRL steps (bench_train.py --objective 2dmse), then
#                `--cuda-graph on` for mrl,2dmse,mic and, apart, for mrl,mipic,ibkd (recorded
#                since 2026-11-28; a recording that fails stops only its run); then `nest
#                train` with --grad-accum 2 (micro-batches recorded) against eager [~150 s]
#  13  S13_S=150 out of memory (since 2026-11-29): `nest train` of a batch the card cannot hold
#                (2,048 pairs of 500-word texts, max_length 512, float32, explicit attention)
#                must end with `step 1 failed: CUDA out of memory ...` and what lowers it, not
#                a panic; `nest encode` of 8,192 such texts at --batch-size 8192 must encode
#                the batch in halves (one warning), its vectors against --batch-size 512 [~60 s]
# Results go to $OUT/sN/ as they come (logs, markdown, JSON; peak GPU memory per process in
# mem_*.json from scripts/gpu/gpu_mem_poll.py); $OUT/status.tsv says what ran; the summary of
# scripts/gpu/gpu_issue41_report.py is printed LAST (only the output's tail comes back).
# Knobs: TOTAL_S, SECTIONS, S<n>_S, REPEATS (encode, 5), SERVE_S (15), PY (python3), OUT, PACK
# (a folder: every result packed into PACK/issue41.tgz, since a call brings back 8 files at most).
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
T0=$(date +%s)
DRY=${NEST_GPU_DRY:-${DRY:-0}}
OUT=${OUT:-/tmp/nest-issue41-out}
mkdir -p "$OUT"
WORK=${WORK:-/tmp/issue41-work}
rm -rf "$WORK" && mkdir -p "$WORK"
export PYTHONUNBUFFERED=1
SECTIONS=${SECTIONS:-1 2 6 3 4 5 7 8 10 11}  # run in this order; 0: the smoke check alone
: > "$OUT/status.tsv"
G=${NEST_GPU_DIR:-$REPO/.gpu}
M=models/all-MiniLM-L6-v2
FIXTURE=tests/fixtures/gpu_cpu_losses_200.json
RECIPE=recipes/gpu-numerics-mrl.toml
GEN_PID=""
PIDS=()  # background processes this script started (servers, poller, model maker)

if [ "$DRY" = 1 ]; then
  TOTAL_S=${TOTAL_S:-2400}
  PY=${PY:-/work/venv/bin/python}
  N=${NEST:-target/release/nest}
  # /work/venv lacks accelerate (the ST trainer's): a --target install of it and psutil
  [ -d /tmp/dry-site ] && export PYTHONPATH=/tmp/dry-site${PYTHONPATH:+:$PYTHONPATH}
  D=$WORK/data && mkdir -p "$D"
  head -41 ../shared/datasets/stsb/test.tsv > "$D/stsb_test.tsv"
  head -41 ../shared/datasets/sick-r/test.tsv > "$D/sickr_test.tsv"
  head -97 ../shared/datasets/snli/triplets_dev.tsv > "$D/snli_triplets_dev.tsv"
  ALL=$D/stsb_all.tsv && head -161 ../shared/datasets/stsb/train.tsv > "$ALL"
  head -41 "$ALL" > "$D/stsb_sample.tsv"
  cut -f1,2 ../shared/datasets/snli/triplets_dev.tsv > "$D/snli_pairs_dev.tsv"
  B1="4"; TRAIN_DTYPE=float32; TRAIN_STEPS=1; EPOCH_PAIRS=8; ENC_B="8 16"; REPEATS=${REPEATS:-1}
  GEN_ARGS=(--layers 2); SERVE_S=${SERVE_S:-3}; WARM_S=${WARM_S:-1}; NUM_STEPS=6; NUM_AT=3; MP_B=4
  GC_B=8; GC_M=4
  # the CPU stands in for a small card: 3 GB of address space
  OOM_ROWS=64; OOM_ENC=256; OOM_LIM=(prlimit --as=3000000000)
  for s in 0 1 2 3 4 5 6 7 8 9 10 11 12 13; do eval "S${s}_S=\${S${s}_S:-400}"; done
  RUN_SCALE=4  # 2 shared cores: each command's own limit x 4
else
  TOTAL_S=${TOTAL_S:-470}
  PY=${PY:-python3}
  D=$G/data
  B1="32 256"; TRAIN_DTYPE=bf16; TRAIN_STEPS=20; EPOCH_PAIRS=1024; ENC_B="32 256"; REPEATS=${REPEATS:-5}
  GEN_ARGS=(--full-depth); SERVE_S=${SERVE_S:-15}; WARM_S=${WARM_S:-5}; NUM_STEPS=200; NUM_AT=100; MP_B=32
  S9_S=${S9_S:-30} S0_S=${S0_S:-150} S1_S=${S1_S:-130} S2_S=${S2_S:-250} S3_S=${S3_S:-150} S4_S=${S4_S:-155}
  S5_S=${S5_S:-70} S6_S=${S6_S:-110} S7_S=${S7_S:-60} S8_S=${S8_S:-70} S10_S=${S10_S:-200} S11_S=${S11_S:-120}
  S12_S=${S12_S:-180} S13_S=${S13_S:-150}
  GC_B=256; GC_M=32
  OOM_ROWS=2048; OOM_ENC=8192; OOM_LIM=()
  RUN_SCALE=1
fi

elapsed() { echo $(($(date +%s) - T0)); }
log() { echo "[$(elapsed)s] $*"; }
status() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$OUT/status.tsv"; }

cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null; done
}
trap cleanup EXIT

# ------------------------------------------------------------------ setup
log "setup (dry=$DRY, out=$OUT)"
if [ "$DRY" != 1 ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  TL=$("$PY" -c "import torch, os; print(os.path.dirname(torch.__file__) + '/lib')")
  export LD_LIBRARY_PATH=$TL:${LD_LIBRARY_PATH:-}
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$G"/whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  mkdir -p models && rm -rf "$M" && cp -r "$G/minilm" "$M"
  "$PY" - "$M" << 'EOF'
import sys
from safetensors.torch import load_file, save_file
d = load_file(f"{sys.argv[1]}/model.fp16.safetensors")
save_file({k: (v.float() if v.is_floating_point() else v).contiguous() for k, v in d.items()}, f"{sys.argv[1]}/model.safetensors")
EOF
  rm -f "$M/model.fp16.safetensors"
  N=/tmp/nest
  "$PY" -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" "$G/nest.xz" "$N" \
    && chmod +x "$N"
  # the peers' scripts are found at the path the binary was built in (CARGO_MANIFEST_DIR/../..)
  # (the binary holds that folder and "../../scripts/bench/bench_st.py" as two adjacent literals)
  # (nest-cli's bench encode and nest-bench's bench train: "<crate>../../scripts/bench/<peer>.py";
  # every crate's folder must exist there for the "../.." to resolve)
  BUILT=$(grep -ao '/[[:alnum:]_./+-]*/crates/nest-cli\.\./\.\./scripts/bench/bench_st\.py' "$N" | head -1)
  BUILT=${BUILT%/crates/nest-cli../../scripts/bench/bench_st.py}
  for r in $BUILT ${NEST_BUILT_ROOT:-/work/main/target/gpu-bundle/src}; do
    for c in "$REPO"/crates/*/; do mkdir -p "$r/crates/$(basename "$c")"; done
    [ -e "$r/scripts" ] || ln -s "$REPO/scripts" "$r/scripts"
  done
  R0=${BUILT:-${NEST_BUILT_ROOT:-/work/main/target/gpu-bundle/src}}
  log "peers' scripts through $R0/scripts: bench_st $([ -e "$R0/crates/nest-cli/../../scripts/bench/bench_st.py" ] && echo found || echo NOT FOUND), bench_train $([ -e "$R0/crates/nest-bench/../../scripts/bench/bench_train.py" ] && echo found || echo NOT FOUND)"
  [ -f "$D/sickr_test.tsv" ] || { [ -f "$D/sickr_test.tsv.xz" ] && "$PY" -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" "$D/sickr_test.tsv.xz" "$WORK/sickr_test.tsv"; }
  ALL=$WORK/stsb_all.tsv
  [ -f "$D/stsb_all.tsv.xz" ] && "$PY" -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" "$D/stsb_all.tsv.xz" "$ALL" \
    && head -1380 "$ALL" > "$WORK/stsb_sample.tsv"
  [ -f "$D/snli_pairs_dev.tsv" ] || cut -f1,2 "$D/snli_triplets_dev.tsv" > "$WORK/snli_pairs_dev.tsv"
  # section 6's recipe reads .gpu/data/snli_pairs_dev.tsv
  [ -f "$D/snli_pairs_dev.tsv" ] || cp "$WORK/snli_pairs_dev.tsv" "$D/snli_pairs_dev.tsv"
  [ -f "$D/sickr_test.tsv" ] || cp "$WORK/sickr_test.tsv" "$D/sickr_test.tsv" 2> /dev/null
fi
"$PY" -c "import torch, transformers, sentence_transformers as st; print('torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu', '| transformers', transformers.__version__, '| sentence-transformers', st.__version__)" 2>&1 | tail -1
"$N" info --model "$M" > "$OUT/info.txt" 2>&1
grep -iE "device|dtype|auto" "$OUT/info.txt" | head -4
HAS_GRAPH=0
"$N" bench train --help 2>&1 | grep -q -- "--cuda-graph" && HAS_GRAPH=1
log "nest bench train --cuda-graph: $([ $HAS_GRAPH = 1 ] && echo present || echo ABSENT in this binary)"

# production-shape models: made in the background now (CPU, 4 threads, niced), used by 3 and 8
GEN=$WORK/models
if [[ " $SECTIONS " == *" 3 "* || " $SECTIONS " == *" 8 "* || " $SECTIONS " == *" 10 "* ]]; then
  ONLY=qwen3-0.6b,embeddinggemma,mpnet-base
  [ "${S3_MODELS:-}" = gemma ] && ONLY=embeddinggemma,mpnet-base
  OMP_NUM_THREADS=4 nice -n 10 "$PY" scripts/data/make_bench_models.py "${GEN_ARGS[@]}" --out "$GEN" \
    --only $ONLY --mpnet-tokenizer "$M" > "$OUT/make_models.log" 2>&1 &
  GEN_PID=$!
  PIDS+=("$GEN_PID")
fi
if [ "$DRY" = 1 ]; then QW=qwen3-0.6b-l2 GE=embeddinggemma-l2 MP=mpnet-base-l2; else QW=qwen3-0.6b-l28 GE=embeddinggemma-l24 MP=mpnet-base-l12; fi

# ------------------------------------------------------------------ helpers
# run NAME SECS CMD...: CMD under `timeout` (never past the section's deadline), output in
# $SD/NAME.log; prints one line; returns CMD's status
run() {
  local name=$1 secs=$2
  shift 2
  local left=$((DEADLINE - $(date +%s)))
  ((secs > left)) && secs=$left
  if ((secs < 5)); then
    log "  $name: skipped (section budget spent)"
    echo "skipped: section budget spent" > "$SD/$name.log"
    return 124
  fi
  local s=$(date +%s)
  secs=$((secs * RUN_SCALE))
  ((secs > left)) && secs=$left
  timeout -k 5 "$secs" "$@" > "$SD/$name.log" 2>&1
  local rc=$?
  local msg="rc=$rc"
  ((rc == 124 || rc == 137)) && msg="TIMEOUT after ${secs}s"
  log "  $name: $msg in $(($(date +%s) - s))s"
  if ((rc != 0)); then # the panic's or error's own lines first (the tail is often a backtrace)
    grep -m1 -A3 "panicked at\|^error" "$SD/$name.log" | cut -c1-300 | sed 's/^/    ! /'
    tail -4 "$SD/$name.log" | cut -c1-200 | sed 's/^/    | /'
  fi
  return $rc
}
mem_start() { # TAG: peak GPU memory per process into $SD/mem_TAG.json
  "$PY" scripts/gpu/gpu_mem_poll.py "$SD/mem_$1.json" --interval 0.1 > /dev/null 2>&1 &
  MEM_PID=$!
  PIDS+=("$MEM_PID")
  sleep 0.3
}
mem_stop() {
  kill -TERM "$MEM_PID" 2> /dev/null
  wait "$MEM_PID" 2> /dev/null
}
wait_health() { # URL PID SECS
  local end=$(($(date +%s) + $3))
  while (($(date +%s) < end)); do
    "$PY" -c "import urllib.request, sys; urllib.request.urlopen(sys.argv[1] + '/health', timeout=2)" "$1" 2> /dev/null && return 0
    kill -0 "$2" 2> /dev/null || return 1
    sleep 0.5
  done
  return 1
}
stop_pid() {
  kill -TERM "$1" 2> /dev/null
  sleep 1
  kill -KILL "$1" 2> /dev/null
  wait "$1" 2> /dev/null
  return 0
}
wait_model() { # NAME SECS: until make_bench_models.py wrote it
  local end=$(($(date +%s) + $2))
  while (($(date +%s) < end)); do
    grep -q "^$1 written" "$OUT/make_models.log" 2> /dev/null && return 0
    kill -0 "$GEN_PID" 2> /dev/null || { grep -q "^$1 written" "$OUT/make_models.log" && return 0; return 1; }
    sleep 1
  done
  return 1
}
rows() { echo $(($(wc -l < "$1") - 1)); }

# section ID TITLE FUNCTION: runs FUNCTION in its budget, in a subshell (a failure stops only it)
section() {
  local id=$1 title=$2 fn=$3
  local left=$((TOTAL_S - $(elapsed)))
  local var="S${id}_S"
  local budget=${!var}
  if ((left < 15)); then
    status "$id" skipped 0 "only ${left}s of TOTAL_S=$TOTAL_S left"
    log "== $id $title: skipped, ${left}s left"
    return
  fi
  ((budget > left)) && budget=$left
  SD=$OUT/s$id
  mkdir -p "$SD"
  DEADLINE=$(($(date +%s) + budget))
  log "== $id $title (budget ${budget}s)"
  local s=$(date +%s)
  ("$fn")
  local rc=$? took=$(($(date +%s) - s))
  status "$id" "$([ $rc = 0 ] && echo ok || echo "rc=$rc")" "$took" "$title; budget ${budget}s"
}

# ------------------------------------------------------------------ 1. training step, MiniLM
s0() {
  run smoke_train_graph 40 "$N" bench train --model "$M" --data "$D/snli_triplets_dev.tsv" --objectives mrl \
    --dtype bf16 --steps 10 --epoch-pairs 320 --cuda-graph on
  run smoke_train_eager 40 "$N" bench train --model "$M" --data "$D/snli_triplets_dev.tsv" --objectives mrl \
    --dtype bf16 --steps 10 --epoch-pairs 320 --cuda-graph off
  run smoke_encode_graph 30 "$N" bench encode --model "$M" --data "$D/stsb_test.tsv" --batch-size 32 \
    --layers 3,6 --dtype bf16 --repeats 3
  NEST_CUDA_GRAPHS=0 run smoke_encode_eager 30 "$N" bench encode --model "$M" --data "$D/stsb_test.tsv" \
    --batch-size 32 --layers 3,6 --dtype bf16 --repeats 3
  grep -hiE "warning|error|step, median|one epoch|cuda graphs|^\| [36] " "$SD"/smoke_*.log | cut -c1-240
}

s9() {
  # the host's share of an encode: tokenising STS-B test (2,758 sentences) with the same Rust
  # tokenizers library Nest links, all cores (encode_batch) and one
  run tokenize 30 "$PY" - "$M/tokenizer.json" "$D/stsb_test.tsv" << 'EOF2'
import sys, time, os
from tokenizers import Tokenizer
t = Tokenizer.from_file(sys.argv[1])
texts = [c for l in open(sys.argv[2]).read().split("\n")[1:] for c in l.split("\t")[:2] if l]
best, one = 1e9, 1e9
for _ in range(5):
    s = time.perf_counter(); t.encode_batch(texts); best = min(best, time.perf_counter() - s)
for _ in range(2):
    s = time.perf_counter(); [t.encode(x) for x in texts]; one = min(one, time.perf_counter() - s)
print(f"tokenize {len(texts)} sentences: encode_batch {best*1000:.1f} ms ({os.cpu_count()} cores), one by one {one*1000:.1f} ms")
EOF2
  cat "$SD/tokenize.log"
}

s1() {
  local rows_n b steps ep g extra py
  rows_n=$(rows "$D/snli_triplets_dev.tsv")
  for b in $B1; do
    # bench train reads batch x (steps + 3 warm-up) pairs: fit the dev triplets
    steps=$((rows_n / b - 3))
    ((steps > TRAIN_STEPS)) && steps=$TRAIN_STEPS
    ep=$EPOCH_PAIRS
    ((ep < 8 * b)) && ep=$((8 * b))
    ((ep > rows_n)) && ep=$(((rows_n / b) * b))
    py=(--python "$PY")
    for g in off on; do
      extra=()
      if [ $HAS_GRAPH = 1 ]; then
        extra=(--cuda-graph $g)
      elif [ $g = on ]; then
        log "  train_b${b}_g$g: skipped, this nest has no --cuda-graph"
        echo "skipped: no --cuda-graph in this binary" > "$SD/train_b${b}_g$g.log"
        continue
      fi
      mem_start "train_b${b}_g$g"
      run "train_b${b}_g$g" 90 "$N" bench train --model "$M" --data "$D/snli_triplets_dev.tsv" --objectives mrl \
        --dtype "$TRAIN_DTYPE" --batch-size "$b" --steps "$steps" --epoch-pairs "$ep" "${py[@]}" "${extra[@]}" \
        --markdown "$SD/train_b${b}_g$g.md"
      mem_stop
      py=()
    done
  done
}

# ------------------------------------------------------------------ 2. early exit, MiniLM
s2() {
  local b
  for b in $ENC_B; do
    mem_start "encode_b$b"
    run "encode_b$b" 75 "$N" bench encode --model "$M" --data "$D/stsb_test.tsv" --batch-size "$b" --layers 3,6 \
      --dtype auto,bf16 --repeats "$REPEATS" --python "$PY" --peers torch-float32,torch-bf16 \
      --markdown "$SD/encode.md"
    mem_stop
  done
  # libtorch's intra-op threads cut to 2 (`nest --threads 2`), Nest only: on 2026-11-29 the
  # same encode gave layer 3 / 6 from 0.53x to 2.09x between runs, the host waiting 25-35 ms
  # for tokens that take 1.4 ms warm; whether 16 libtorch threads crowd out the tokeniser's pool
  # and the queueing thread on the host's 16 CPUs (2 then 4 threads, words cold, twice each)
  local t r
  for b in $ENC_B; do
    for t in 2 4; do
      for r in 1 2; do
        run "encode_threads${t}_r${r}_b$b" 30 "$N" --threads "$t" bench encode --model "$M" \
          --data "$D/stsb_test.tsv" --batch-size "$b" --layers 3,6 --dtype auto --repeats "$REPEATS" \
          --markdown "$SD/encode_threads.md"
      done
    done
  done
  # libtorch's OpenMP threads sleeping at once after a parallel region instead of spinning
  # (OMP_WAIT_POLICY=PASSIVE), Nest only: 16 spinning threads would crowd the tokeniser's pool
  # and the queueing thread as fewer threads would not
  for b in $ENC_B; do
    OMP_WAIT_POLICY=PASSIVE run "encode_omppassive_b$b" 30 "$N" bench encode --model "$M" \
      --data "$D/stsb_test.tsv" --batch-size "$b" --layers 3,6 --dtype auto --repeats "$REPEATS" \
      --markdown "$SD/encode_threads.md"
  done
  # the tokenizer's words kept from earlier passes (a server that has seen these words), and
  # no words kept at all (NEST_WORD_CACHE=0: the tokenizers library on every text), Nest only:
  # the host's share that early exit cannot shorten
  # (with one more pass per layer under libtorch's profiler: the device's busy and idle time
  # and its kernels, summed by trace_summary.py into trace_summary_b*.log)
  for b in $ENC_B; do
    run "encode_warmwords_b$b" 50 "$N" bench encode --model "$M" --data "$D/stsb_test.tsv" \
      --batch-size "$b" --layers 3,6 --dtype auto --repeats "$REPEATS" --words warm --markdown "$SD/encode_warm.md" \
      --profile "$SD/traces_b$b"
    ls "$SD/traces_b$b"/*.json >/dev/null 2>&1 && run "trace_summary_b$b" 20 "$PY" scripts/gpu/trace_summary.py \
      "$SD/traces_b$b"/*.json
    NEST_WORD_CACHE=0 run "encode_nowords_b$b" 40 "$N" bench encode --model "$M" --data "$D/stsb_test.tsv" \
      --batch-size "$b" --layers 3,6 --dtype auto --repeats "$REPEATS" --markdown "$SD/encode_nowords.md"
  done
  # every STS-B split, pairs shuffled (17,256 sentences), and its first 2,758 (a sample of the
  # same texts, as many as test's), Nest only: an encode's cost a sentence comes apart from
  # what a small encode pays besides (the first block's wait, the finish, its batches' wider
  # length spans), and layer 3 / 6 of the cost a sentence is early exit's ratio over a corpus
  # (the report's "per sentence and fixed" lines)
  if [ -f "$ALL" ]; then
    for b in $ENC_B; do
      run "encode_sample_b$b" 40 "$N" bench encode --model "$M" --data "${ALL%/*}/stsb_sample.tsv" \
        --batch-size "$b" --layers 3,6 --dtype auto --repeats 3 --markdown "$SD/encode_corpus.md"
      run "encode_corpus_b$b" 50 "$N" bench encode --model "$M" --data "$ALL" --batch-size "$b" --layers 3,6 \
        --dtype auto --repeats 3 --markdown "$SD/encode_corpus.md"
    done
  fi
  # the tokeniser's threads two fewer than the host's logical CPUs (a rayon pool as large as the
  # host leaves no core free for the thread that queues the batches and for the driver's, while
  # a cold word cache keeps the pool busy), Nest only: whether the cold pass's extra time over
  # the warm one is the tokeniser's work or its crowding of the launching thread
  local fewer=$(($(nproc) - 2))
  ((fewer < 1)) && fewer=1
  for b in $ENC_B; do
    RAYON_NUM_THREADS=$fewer run "encode_rayon${fewer}_b$b" 40 "$N" bench encode --model "$M" --data "$D/stsb_test.tsv" \
      --batch-size "$b" --layers 3,6 --dtype auto --repeats "$REPEATS" --markdown "$SD/encode_rayon.md"
  done
  # recorded shapes padded to multiples of 8 and 4 tokens instead of 16 (NEST_GRAPH_BUCKET),
  # words warm, Nest only: a recorded pass computes its padding, 30-37% of STS-B's tokens at 16
  # and 10-22% at 4, for more shapes recorded (the bench prints real and padded tokens)
  local k
  for k in 8 4; do
    for b in $ENC_B; do
      NEST_GRAPH_BUCKET=$k run "encode_bucket${k}_b$b" 40 "$N" bench encode --model "$M" --data "$D/stsb_test.tsv" \
        --batch-size "$b" --layers 3,6 --dtype auto --repeats 3 --words warm --markdown "$SD/encode_bucket.md"
    done
  done
  # an encode's pinned uploads while the device is busy, among nest-model's GPU tests
  model_gpu_tests
  # tokenising up front instead of a block ahead on a worker thread (the GPU default since
  # EncodeOptions::tokenize_ahead), Nest only: what the overlap is worth (1.54x and 1.24x in
  # call 1 of 2026-11-28)
  for b in $ENC_B; do
    NEST_TOKENIZE_AHEAD=0 run "encode_noahead_b$b" 40 "$N" bench encode --model "$M" --data "$D/stsb_test.tsv" \
      --batch-size "$b" --layers 3,6 --dtype auto --repeats "$REPEATS" --markdown "$SD/encode_noahead.md"
  done
  # without CUDA graphs (the no-sync eager path), Nest only; last, as measured in call 1 of
  # 2026-11-28 (1.42x and 1.46x)
  for b in $ENC_B; do
    NEST_CUDA_GRAPHS=0 run "encode_nographs_b$b" 40 "$N" bench encode --model "$M" --data "$D/stsb_test.tsv" \
      --batch-size "$b" --layers 3,6 --dtype auto,bf16 --repeats "$REPEATS" --markdown "$SD/encode_nographs.md"
  done
}

# ------------------------------------------------------------------ 3. production shapes
s3() {
  local name full half b models="$QW $GE"
  [ "${S3_MODELS:-}" = gemma ] && models=$GE  # Qwen3's pair was measured on the H100 (2026-11-26)
  for b in $ENC_B; do
    for name in $models; do
      full=${name##*-l}
      half=$((full / 2))
      if ! wait_model "$name" $((DEADLINE - $(date +%s) - 20)); then
        log "  $name: not made (see $OUT/make_models.log)"
        tail -3 "$OUT/make_models.log" | cut -c1-200
        continue
      fi
      [ -f "$SD/tokens_$name.json" ] || run "tokens_$name" 30 "$PY" scripts/gpu/gpu_issue41_report.py tokens "$GEN/$name" \
        "$D/stsb_test.tsv" "$SD/tokens_$name.json"
      # at batch 256, only while at least 60 s of the budget are left
      if [ "$b" != "${ENC_B%% *}" ] && (($(date +%s) > DEADLINE - 60)); then
        log "  encode_${name}_b$b: skipped, under 60 s of the budget left"
        continue
      fi
      mem_start "encode_${name}_b$b"
      # (2026-11-28: 100 s and 3 repeats cut the float32 peer of EmbeddingGemma's shape; its passes
      # take seconds each, so 2 repeats after the warm-up, within 150 s)
      run "encode_${name}_b$b" 150 "$N" bench encode --model "$GEN/$name" --data "$D/stsb_test.tsv" --batch-size "$b" \
        --layers "$half,$full" --dtype bf16,float32 --repeats 2 --python "$PY" --peers torch-bf16,torch-float32 \
        --markdown "$SD/encode.md"
      mem_stop
    done
  done
}

# ------------------------------------------------------------------ 4. serve
# the peer first (its measured run was cut by the budget in the H100 call), then Nest: auto at
# layers 6 and 3, auto at 6 with two workers (auto-w2), auto at 6 as the server was before
# 2026-11-27 (auto-old: a batch split into length runs, NEST_LENGTH_RUNS=1, several passes each a
# replay and a wait; two HTTP threads, --http-threads 2), and float32 at 6
s4_peer() {
  local dev=$1 texts=$2 pid
  "$PY" scripts/bench/peer_st_server.py --model "$M" --port 18081 --max-batch 32 --device $dev > "$SD/server_peer.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  if wait_health http://127.0.0.1:18081 $pid 90; then
    run serve_peer_warmup $((WARM_S + 20)) "$N" bench serve --url http://127.0.0.1:18081 --clients 64 \
      --seconds "$WARM_S" --texts "$texts" --model "$M" --pid $pid --label "peer-warmup"
    mem_start serve_peer
    run serve_peer_st_float32 $((SERVE_S + 30)) "$N" bench serve --url http://127.0.0.1:18081 --clients 64 \
      --seconds "$SERVE_S" --texts "$texts" --model "$M" --pid $pid --label "peer-st-float32-$dev"
    mem_stop
  else
    log "  peer server did not start"
    tail -3 "$SD/server_peer.log"
  fi
  stop_pid $pid
}

s4() {
  local dev=cpu pid texts=$SD/texts.txt dt l layers
  [ "$DRY" = 1 ] || dev=cuda
  tail -n +2 "$D/stsb_test.tsv" | cut -f1,2 | tr '\t' '\n' > "$texts"
  model_gpu_tests
  s4_peer $dev "$texts"
  # each server: WARM_S seconds of the same load first (first-use costs: CUDA context, handles,
  # each new shape's kernels), not recorded; then the measured runs
  for dt in ${SERVE_DTYPES:-auto auto-w2 auto-old float32}; do
    local env=() extra=() tag=$dt
    layers=${SERVE_LAYERS:-6 3}
    case $tag in
      auto-explicit) env=(NEST_ATTENTION=explicit) dt=auto layers=6 ;;
      auto-old) env=(NEST_LENGTH_RUNS=1) extra=(--http-threads 2) dt=auto layers=6 ;;
      auto-w2) extra=(--workers 2) dt=auto layers=6 ;;
      float32) layers=6 ;;
    esac
    env "${env[@]}" "$N" serve --model "$M" --port 18080 --allow-any-point --max-batch-inputs 32 --dtype $dt \
      "${extra[@]}" > "$SD/server_nest_$tag.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    if ! wait_health http://127.0.0.1:18080 $pid 60; then
      log "  nest serve $tag did not start"
      tail -3 "$SD/server_nest_$tag.log"
      stop_pid $pid
      continue
    fi
    run "serve_nest_${tag}_warmup" $((WARM_S + 20)) "$N" bench serve --url http://127.0.0.1:18080 --clients 64 \
      --seconds "$WARM_S" --texts "$texts" --layer 6 --pid $pid --label "nest-$tag-warmup"
    mem_start "serve_nest_$tag"
    for l in $layers; do
      run "serve_nest_${tag}_l$l" $((SERVE_S + 30)) "$N" bench serve --url http://127.0.0.1:18080 --clients 64 \
        --seconds "$SERVE_S" --texts "$texts" --layer "$l" --pid $pid --label "nest-$tag-layer$l"
    done
    mem_stop
    stop_pid $pid
  done
}

# ------------------------------------------------------------------ 5. eval bf16 vs float32
s5() {
  local data=$D/stsb_test.tsv
  [ -f "$D/sickr_test.tsv" ] && data=$data,$D/sickr_test.tsv
  run eval 60 "$N" eval sts --model "$M" --data "$data" --dtype float32,bf16 --latency-texts 0 --out "$SD/eval"
  [ -f "$SD/eval/bf16/report.json" ] || return 1
  run evaldiff 20 "$PY" scripts/gpu/gpu_issue41_report.py evaldiff "$SD/eval/float32/report.json" \
    "$SD/eval/bf16/report.json" "$SD/evaldiff.json"
  rm -f "$SD"/eval/*/*.svg "$SD"/eval/*/compare-vs-float32/*.svg
}

# ------------------------------------------------------------------ 6. numerics
s6() {
  local a=$WORK/num-200 b=$WORK/num-resume flags=() i pid
  [ "$DRY" = 1 ] && flags=(--max-steps "$NUM_STEPS" --save-every "$NUM_AT" --model "$M" --data "$D/snli_pairs_dev.tsv:pairs")
  run train_200 60 "$N" train --recipe "$RECIPE" --run-dir "$a" "${flags[@]}"
  cp "$a/metrics.jsonl" "$SD/metrics_200.jsonl" 2> /dev/null
  # the same run, killed (-9) once checkpoint NUM_AT exists, then resumed
  "$N" train --recipe "$RECIPE" --run-dir "$b" "${flags[@]}" > "$SD/train_killed.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  local ck=$b/checkpoints/$(printf 'step-%08d' "$NUM_AT")
  for i in $(seq 1200); do
    [ -d "$ck" ] && break
    kill -0 $pid 2> /dev/null || break
    sleep 0.05
  done
  kill -KILL $pid 2> /dev/null
  wait $pid 2> /dev/null
  local done_steps
  done_steps=$(grep -c '"step"' "$b/metrics.jsonl" 2> /dev/null)
  log "  killed after checkpoint $NUM_AT: $done_steps steps logged$([ -d "$b/final" ] && echo ' (the run had FINISHED: no resume to test)')"
  echo "killed with $done_steps steps logged; checkpoints: $(ls "$b/checkpoints" 2> /dev/null | tr '\n' ' ')" >> "$SD/train_killed.log"
  run train_resume 60 "$N" train --recipe "$RECIPE" --resume "$b" "${flags[@]}"
  cp "$b/metrics.jsonl" "$SD/metrics_resumed.jsonl" 2> /dev/null
  run numerics 30 "$PY" scripts/gpu/gpu_issue41_report.py numerics "$FIXTURE" "$a" "$b" "$SD/numerics.json" "$NUM_AT"
  # the same 200 steps with every step recorded as a CUDA graph (recipe key cuda_graph), then in
  # bf16 eager and recorded: wall time of the run and losses against the eager float32 run
  local g=$WORK/num-graph
  run train_200_graph 60 "$N" train --recipe "$RECIPE" --run-dir "$g" --cuda-graph auto "${flags[@]}"
  cp "$g/metrics.jsonl" "$SD/metrics_200_graph.jsonl" 2> /dev/null
  run train_200_bf16 60 "$N" train --recipe "$RECIPE" --run-dir "$WORK/num-bf16" --dtype bf16 "${flags[@]}"
  cp "$WORK/num-bf16/metrics.jsonl" "$SD/metrics_200_bf16.jsonl" 2> /dev/null
  run train_200_bf16_graph 60 "$N" train --recipe "$RECIPE" --run-dir "$WORK/num-bf16-graph" --dtype bf16 --cuda-graph auto "${flags[@]}"
  cp "$WORK/num-bf16-graph/metrics.jsonl" "$SD/metrics_200_bf16_graph.jsonl" 2> /dev/null
  "$PY" - "$SD" << 'EOF2' | tee "$SD/graph_runs.txt"
import json, sys, os
sd = sys.argv[1]
def read(n):
    p = os.path.join(sd, n)
    if not os.path.exists(p):
        return None
    rows = [json.loads(l) for l in open(p) if '"lr"' in l]
    return rows
base = read("metrics_200.jsonl")
for n in ["metrics_200.jsonl", "metrics_200_graph.jsonl", "metrics_200_bf16.jsonl", "metrics_200_bf16_graph.jsonl"]:
    r = read(n)
    if not r:
        print(f"{n}: missing"); continue
    d = max(abs(a["loss"] - b["loss"]) for a, b in zip(r, base)) if base else float("nan")
    t = r[-1]["seconds"] - r[0]["seconds"]
    print(f"{n}: {len(r)} steps, steps 2..{len(r)}: {t:.2f} s ({t / max(len(r) - 1, 1) * 1000:.1f} ms/step), max |loss - float32 eager| {d:.2e}")
EOF2
}

# ------------------------------------------------------------------ 7. NCCL, torchrun
s7() {
  local f=$SD/nccl.txt rc n
  local flags=(--max-steps 5 --save-every 1000)
  [ "$DRY" = 1 ] && flags=(--max-steps 2 --save-every 1000 --model "$M" --data "$D/snli_pairs_dev.tsv:pairs")
  : > "$f"
  for n in ${TORCHRUN_RANKS-1 2}; do
    NCCL_DEBUG=INFO NEST_DIST_TIMEOUT_S=60 run "torchrun_$n" 90 "$PY" -m torch.distributed.run --standalone \
      --nproc-per-node $n --no-python "$N" train --recipe "$RECIPE" --run-dir "$WORK/dist$n" "${flags[@]}"
    rc=$?
    {
      echo "torchrun --nproc-per-node $n nest train: rc=$rc;" \
        "NCCL INFO lines: $(grep -c 'NCCL INFO' "$SD/torchrun_$n.log");" \
        "NCCL version line: $(grep -m1 -o 'NCCL version [^ ]*' "$SD/torchrun_$n.log" || echo none);" \
        "Nest: $(grep -m1 -o 'data parallel: .*' "$SD/torchrun_$n.log" || echo 'one process (no group)');" \
        "steps: $(grep -c '"step"' "$WORK/dist$n/metrics.jsonl" 2> /dev/null || echo 0)"
      grep -m2 -iE "duplicate gpu|ncclInvalidUsage|nccl error|process group|rendezvous|error" "$SD/torchrun_$n.log" | cut -c1-220
    } >> "$f"
  done
  echo "note: WORLD_SIZE=1 is a plain single process in Nest (crates/nest-dist/src/launch.rs): one rank joins no group, so NCCL runs only with 2+ ranks" >> "$f"
  # Nest's own one-rank NCCL test (crates/nest-dist/tests/group.rs), if a cuda build of it was carried
  if [ -f "$G/nest-dist-group.xz" ]; then
    "$PY" -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
      "$G/nest-dist-group.xz" /tmp/nest-dist-group && chmod +x /tmp/nest-dist-group
    # every way of ending the group: as a drop ends it (since 2026-11-29: shut down, left to
    # the process's exit), shut down and freed (crashed, H200, 2026-11-29), shut down only,
    # freed only (crashed), neither; then shut down and freed without ProcessGroupNCCL's
    # heartbeat monitor and flight recorder (crashed)
    local v env_v
    for v in drop plain shutdown free leak no_monitor; do
      env_v=()
      [ "$v" = no_monitor ] && env_v=(NEST_TEST_NCCL_END=plain TORCH_NCCL_ENABLE_MONITORING=0 TORCH_NCCL_TRACE_BUFFER_SIZE=0) \
        || env_v=(NEST_TEST_NCCL_END=$v)
      NCCL_DEBUG=INFO run "nccl_unit_$v" 60 env "${env_v[@]}" /tmp/nest-dist-group --exact nccl_one_rank_on_the_gpu --nocapture
      rc=$?
      echo "nest-dist nccl_one_rank_on_the_gpu ($v${env_v[*]:+: ${env_v[*]}}): rc=$rc $(grep -m1 -o 'NCCL one-rank.*passed' "$SD/nccl_unit_$v.log"); $(grep -m1 -oE "NCCL group ended \([A-Za-z ]*\)" "$SD/nccl_unit_$v.log" || echo 'the group did NOT end (a crash in its end)'); $(grep -m1 -o 'test result:.*' "$SD/nccl_unit_$v.log" || echo 'no test result line (crash before the harness reported)')" >> "$f"
    done
  fi
  echo "(flags: ${flags[*]})" >> "$f"
}

# ------------------------------------------------------------------ 8. MPNet-shape training step
s8() {
  local g extra py=(--python "$PY")
  wait_model "$MP" $((DEADLINE - $(date +%s) - 20)) || { log "  $MP not made"; return 1; }
  for g in off on; do
    extra=()
    if [ $HAS_GRAPH = 1 ]; then extra=(--cuda-graph $g); elif [ $g = on ]; then continue; fi
    mem_start "train_${MP}_g$g"
    run "train_${MP}_g$g" 80 "$N" bench train --model "$GEN/$MP" --data "$D/snli_triplets_dev.tsv" --objectives mrl \
      --dims 64,128,256,512,768 --dtype "$TRAIN_DTYPE" --batch-size "$MP_B" --steps "$TRAIN_STEPS" \
      --epoch-pairs "$EPOCH_PAIRS" "${py[@]}" "${extra[@]}" --markdown "$SD/train_${MP}_g$g.md"
    mem_stop
    py=()
  done
}

# ------------------------------------------------------------------ 10. GradCache, chunk graphs
s10() {
  local model g extra py steps rows_n dims name
  rows_n=$(rows "$D/snli_triplets_dev.tsv")
  steps=$((rows_n / GC_B - 3))
  ((steps > 8)) && steps=8
  for model in "$M" "$GEN/$MP"; do
    name=$(basename "$model")
    dims=16,32,64,128,256,384
    if [ "$model" != "$M" ]; then
      wait_model "$MP" $((DEADLINE - $(date +%s) - 20)) || { log "  $MP not made"; return 1; }
      dims=64,128,256,512,768
    fi
    py=(--python "$PY")
    for g in off on; do
      extra=()
      if [ $HAS_GRAPH = 1 ]; then extra=(--cuda-graph $g); elif [ $g = on ]; then continue; fi
      mem_start "gc_${name}_g$g"
      run "gc_${name}_g$g" 120 "$N" bench train --model "$model" --data "$D/snli_triplets_dev.tsv" --objectives mrl \
        --dims "$dims" --dtype "$TRAIN_DTYPE" --batch-size "$GC_B" --mini-batch-size "$GC_M" --steps "$steps" \
        --epoch-pairs $((GC_B * (rows_n / GC_B < 4 ? rows_n / GC_B : 4))) "${py[@]}" "${extra[@]}" \
        --markdown "$SD/gc_${name}_g$g.md"
      mem_stop
      py=()
    done
  done
}

# nest-model's GPU tests (crates/nest-model/tests/gpu.rs), once per call, by the first of
# sections 2, 4 and 11 to run: two recorded passes draw one seed's dropout, shared pools give what
# private pools give, two threads (a server's two workers) record and replay at once, an
# encode's pinned uploads land intact while the device is busy
model_gpu_tests() {
  [ -f "$G/nest-model-gpu.xz" ] && [ ! -f "$OUT/model_gpu_tests.txt" ] || return 0
  "$PY" -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
    "$G/nest-model-gpu.xz" /tmp/nest-model-gpu && chmod +x /tmp/nest-model-gpu
  run model_gpu_tests 60 /tmp/nest-model-gpu --test-threads 1 --nocapture
  grep -E "^test |difference|replays|pinned uploads|skipped|^machine:|^recording budget" "$SD/model_gpu_tests.log" | tee "$OUT/model_gpu_tests.txt"
}

# ------------------------------------------------------------------ 11. graph memory pools
s11() {
  local flags=() pool gc b
  model_gpu_tests
  [ "$DRY" = 1 ] && flags=(--max-steps "$NUM_STEPS" --save-every 0 --model "$M" --data "$D/snli_pairs_dev.tsv:pairs")
  for gc in 0 8; do
    if [ $gc = 8 ]; then
      run "train_gc8_eager" 60 "$N" train --recipe "$RECIPE" --run-dir "$WORK/pool-gc8-eager" --cuda-graph off \
        --mini-batch-size 8 "${flags[@]}"
      cp "$WORK/pool-gc8-eager/metrics.jsonl" "$SD/metrics_gc8_eager.jsonl" 2> /dev/null
    fi
    for pool in private shared; do
      mem_start "train_gc${gc}_$pool"
      NEST_GRAPH_POOL=$pool run "train_gc${gc}_$pool" 60 "$N" train --recipe "$RECIPE" \
        --run-dir "$WORK/pool-gc$gc-$pool" --cuda-graph auto --mini-batch-size "$gc" "${flags[@]}"
      mem_stop
      cp "$WORK/pool-gc$gc-$pool/metrics.jsonl" "$SD/metrics_gc${gc}_$pool.jsonl" 2> /dev/null
    done
  done
  "$PY" - "$SD" << 'EOF2' | tee "$SD/pools.txt"
import json, os, sys
sd = sys.argv[1]
def read(n):
    p = os.path.join(sd, f"metrics_{n}.jsonl")
    return [json.loads(l) for l in open(p) if '"lr"' in l] if os.path.exists(p) else None
for a, b in [("gc0_private", "gc0_shared"), ("gc8_private", "gc8_shared"), ("gc8_eager", "gc8_private")]:
    ra, rb = read(a), read(b)
    if not ra or not rb:
        print(f"{a} vs {b}: missing"); continue
    d = [abs(x["loss"] - y["loss"]) for x, y in zip(ra, rb)]
    same = sum(x["loss"] == y["loss"] for x, y in zip(ra, rb))
    t = lambda r: (r[-1]["seconds"] - r[0]["seconds"]) / max(len(r) - 1, 1) * 1000
    print(f"{a} vs {b}: {len(d)} steps, identical losses {same}, max |diff| {max(d):.2e}; ms/step {t(ra):.1f} / {t(rb):.1f}")
EOF2
  for b in $ENC_B; do
    for pool in private shared; do
      mem_start "encode_b${b}_$pool"
      NEST_GRAPH_POOL=$pool run "encode_b${b}_$pool" 40 "$N" bench encode --model "$M" --data "$D/stsb_test.tsv" \
        --batch-size "$b" --layers 3,6 --dtype auto --repeats 2
      mem_stop
    done
  done
}

# ------------------------------------------------------------------ 12. 2DMSE, MIC, MIPIC and IBKD recorded
s12() {
  local steps rows_n b=${B1%% *}
  rows_n=$(rows "$D/snli_triplets_dev.tsv")
  steps=$((rows_n / b - 3))
  ((steps > TRAIN_STEPS)) && steps=$TRAIN_STEPS
  # bench12 TAG OBJECTIVES ARGS...: one `bench train` at batch $b, its table into TAG.md
  bench12() {
    local tag=$1 objectives=$2
    shift 2
    mem_start "$tag"
    run "$tag" 100 "$N" bench train --model "$M" --data "$D/snli_triplets_dev.tsv" \
      --objectives "$objectives" --teacher "$M" --dtype "$TRAIN_DTYPE" --batch-size "$b" \
      --steps "$steps" --epoch-pairs "$EPOCH_PAIRS" "$@" --markdown "$SD/$tag.md"
    mem_stop
  }
  # eager first, every objective, with the peers (PyTorch's MRL and 2DMSE steps, the ST epoch)
  local off=()
  [ $HAS_GRAPH = 1 ] && off=(--cuda-graph off)
  bench12 train2d_goff mrl,2dmse,mic,mipic,ibkd --python "$PY" "${off[@]}"
  [ $HAS_GRAPH = 1 ] || return 0
  # then recorded: the objectives recorded before, and apart from them those recorded since
  # 2026-11-28 (a recording that fails stops its run: it must not cost the others' figures)
  bench12 train2d_gon mrl,2dmse,mic --cuda-graph on
  bench12 train2d_gon_new mrl,mipic,ibkd --cuda-graph on
  # accumulated steps (grad_accum 2), recorded per micro-batch since 2026-11-28, against eager:
  # the same losses and gradient norms, step by step, and the time a step
  local g flags=(--max-steps 60 --save-every 0)
  [ "$DRY" = 1 ] && flags=(--max-steps "$NUM_STEPS" --save-every 0 --model "$M" --data "$D/snli_pairs_dev.tsv:pairs")
  for g in off on; do
    run "accum_g$g" 60 "$N" train --recipe "$RECIPE" --run-dir "$WORK/accum-$g" --cuda-graph $g \
      --batch-size 16 --grad-accum 2 "${flags[@]}"
    cp "$WORK/accum-$g/metrics.jsonl" "$SD/metrics_accum_g$g.jsonl" 2> /dev/null
  done
  grep -h "cuda graphs" "$SD/accum_gon.log" > "$SD/accum.txt" 2> /dev/null
  "$PY" - "$SD" << 'EOF2' | tee -a "$SD/accum.txt"
import json, os, sys
sd = sys.argv[1]
def read(n):
    p = os.path.join(sd, f"metrics_accum_{n}.jsonl")
    return [json.loads(l) for l in open(p) if '"lr"' in l] if os.path.exists(p) else None
a, b = read("goff"), read("gon")
if not a or not b:
    print("accum: missing")
else:
    rel = lambda k: max(abs(x[k] - y[k]) / max(abs(x[k]), 1e-12) for x, y in zip(a, b))
    t = lambda r: (r[-1]["seconds"] - r[0]["seconds"]) / max(len(r) - 1, 1) * 1000
    print(f"accum eager vs recorded: {len(a)} steps, max rel diff loss {rel('loss'):.2e}, "
          f"grad norm {rel('grad_norm'):.2e}; ms/step {t(a):.1f} / {t(b):.1f}")
EOF2
}

# ------------------------------------------------------------------ 13. out of memory
s13() {
  unset RUST_BACKTRACE  # the panic report is what must not appear
  local small=$((OOM_ENC / 16))
  "$PY" - "$WORK/oom" "$OOM_ROWS" "$OOM_ENC" << 'EOF2'
import os, random, sys
d, n, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(d, exist_ok=True)
r = random.Random(0)
w = "the a man woman dog cat plays runs on in street park music guitar red blue".split()
t = lambda: " ".join(r.choice(w) for _ in range(500))
open(f"{d}/pairs.tsv", "w").write("anchor\tpositive\n" + "".join(f"{t()}\t{t()}\n" for _ in range(n)))
open(f"{d}/texts.txt", "w").write("".join(t() + "\n" for _ in range(m)))
EOF2
  NEST_ATTENTION=explicit run train_oom 60 "${OOM_LIM[@]}" "$N" train --model "$M" \
    --data "$WORK/oom/pairs.tsv:pairs" --loss mnrl --batch-size "$OOM_ROWS" --max-length 512 \
    --dtype float32 --save-every 0 --max-steps 2 --run-dir "$WORK/oom/run"
  grep -h "^error\|panicked" "$SD/train_oom.log" | cut -c1-700 > "$SD/oom.txt"
  NEST_ATTENTION=explicit run encode_halves 90 "${OOM_LIM[@]}" "$N" encode --model "$M" \
    --input "$WORK/oom/texts.txt" --output "$WORK/oom/halves.npy" --batch-size "$OOM_ENC" \
    --max-length 512 --dtype float32
  NEST_ATTENTION=explicit run encode_small 90 "$N" encode --model "$M" --input "$WORK/oom/texts.txt" \
    --output "$WORK/oom/small.npy" --batch-size "$small" --max-length 512 --dtype float32
  grep -h "warning\|^error\|panicked\|^wrote" "$SD/encode_halves.log" "$SD/encode_small.log" \
    | cut -c1-400 >> "$SD/oom.txt"
  "$PY" -c "import numpy as np, sys; a, b = np.load(sys.argv[1]), np.load(sys.argv[2]); print(f'halves vs batch {sys.argv[3]}: {a.shape}, max |diff| {np.abs(a - b).max():.2e}')" \
    "$WORK/oom/halves.npy" "$WORK/oom/small.npy" "$small" >> "$SD/oom.txt" 2>&1
  cat "$SD/oom.txt"
}

# the sections in the order SECTIONS gives (its default: the order of the first H100 call)
declare -A TITLE=(
  [9]="host tokenisation time (what early exit cannot shorten)"
  [0]="smoke: the CUDA-graph paths, briefly, no peers"
  [1]="training step, MiniLM, bf16, cuda graph on/off"
  [2]="early exit on the GPU, MiniLM encode"
  [6]="numerics: GPU vs CPU losses, kill -9 + resume, nest train with cuda graphs"
  [3]="production shapes encode (Qwen3-0.6B, EmbeddingGemma)"
  [4]="nest serve vs ST server, 64 clients"
  [5]="eval bf16 vs float32, cell by cell"
  [7]="torchrun, NCCL"
  [8]="MPNet-shape training step"
  [10]="GradCache at batch 256: chunk passes recorded, MiniLM and MPNet shape"
  [11]="graph memory pools: private against shared"
  [12]="2DMSE, MIC, MIPIC and IBKD steps recorded, MiniLM, next to PyTorch's 2DMSE"
  [13]="out of memory: a training step's error, an encode batch in halves"
)
for id in $SECTIONS; do
  if [ -z "${TITLE[$id]:-}" ]; then
    log "SECTIONS: no section $id (known: ${!TITLE[*]})"
    continue
  fi
  section "$id" "${TITLE[$id]}" "s$id"
done
[ -n "$GEN_PID" ] && kill "$GEN_PID" 2> /dev/null
[ "$DRY" = 1 ] || nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
log "done"
"$PY" scripts/gpu/gpu_issue41_report.py summary "$OUT" 2>&1 | cut -c1-260
echo "total wall: $(elapsed)s (TOTAL_S=$TOTAL_S)"
# the device tool brings back at most 8 files from its $OUT: PACK=DIR packs every result into
# DIR/issue41.tgz (run with OUT=/tmp/o PACK=$OUT there)
if [ -n "${PACK:-}" ]; then
  # made outside $OUT first (PACK may be $OUT: tar refuses a folder that changes as it reads it)
  tar czf "/tmp/issue41.$$.tgz" --exclude=./issue41.tgz -C "$OUT" . \
    && mv "/tmp/issue41.$$.tgz" "$PACK/issue41.tgz" && echo "packed: $PACK/issue41.tgz"
fi

#!/usr/bin/env bash
# Issue 20's GPU figures, in one call on a lent GPU machine (BENCHMARKS.md, "On a GPU").
#
# That machine has no Rust toolchain and no network, and its torch (2.11.0+cu130 when this was
# written) is not the 2.13.0 Nest pins, so what it runs is carried in `.gpu/` (ignored by git):
#   .gpu/nest.xz `cargo build --release --features cuda --bin nest`, built here against that
#                same torch wheel (LIBTORCH=<torch 2.11.0 wheel>, LIBTORCH_BYPASS_VERSION_CHECK=1,
#                torch-sys' generated wrappers of the 15 ops torch 2.11 lacks made to throw), and
#                an rpath to the machine's torch/lib; stripped, xz-compressed
#   .gpu/minilm  all-MiniLM-L6-v2 with its weights stored in float16 (the 64 MiB carry limit);
#                widened back to float32 below, so Nest and the peers run the same weights
#   .gpu/data    STS-B test and SNLI triplets (dev) from ../shared/datasets
#   .gpu/whl     datasets, dill, multiprocess (sentence-transformers' trainer needs `datasets`)
# and the command is `bash scripts/gpu/gpu_check.sh` with `carry: [".gpu"]`. Results go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/nest-gpu-out}
mkdir -p "$OUT"
G=$PWD/.gpu
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv
lscpu | grep -E "Model name|^CPU\(s\)"
python3 -c "import torch, transformers, sentence_transformers as st; print('torch', torch.__version__, torch.cuda.get_device_name(), '| transformers', transformers.__version__, '| sentence-transformers', st.__version__)"
TL=$(python3 -c "import torch, os; print(os.path.dirname(torch.__file__) + '/lib')")
export LD_LIBRARY_PATH=$TL:${LD_LIBRARY_PATH:-}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$G"/whl/*.whl \
  && export PYTHONPATH=/tmp/site
M=models/all-MiniLM-L6-v2
mkdir -p models && rm -rf "$M" && cp -r "$G/minilm" "$M"
python3 - "$M" <<'EOF'
import sys, torch
from safetensors.torch import load_file, save_file
d = load_file(f"{sys.argv[1]}/model.fp16.safetensors")
save_file({k: (v.float() if v.is_floating_point() else v).contiguous() for k, v in d.items()}, f"{sys.argv[1]}/model.safetensors")
EOF
rm "$M/model.fp16.safetensors"
# the peers' scripts are found through the path the binary was built in
mkdir -p /work && ln -sfn "$PWD" /work/nest-gpu
# NEST_GPU_BINS: the binaries in .gpu/ to time (`name` for `.gpu/name.xz`), interleaved on the
# same machine; the peers run once, after the first
BINS=${NEST_GPU_BINS:-nest}
for n in $BINS; do
  python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" "$G/$n.xz" "/tmp/$n" && chmod +x "/tmp/$n"
done
N=/tmp/${BINS%% *}
ldd "$N" | grep -E "torch_cuda|not found"
"$N" info --model "$M" 2>&1 | tee "$OUT/info.txt"
REPEATS=${REPEATS:-10}
if [ "${ONLY:-}" = attention ]; then
  # the attention kernels against each other (NEST_ATTENTION), bf16, on the first binary; the
  # others' bf16 training step beside them
  for n in $BINS; do
    for k in auto fused explicit; do
      [ "$n" != "${BINS%% *}" ] && [ $k != auto ] && continue
      for b in ${ATT_BATCHES:-32}; do
        echo "== $n NEST_ATTENTION=$k encode batch $b"
        NEST_ATTENTION=$k "/tmp/$n" bench encode --model "$M" --data "$G/data/stsb_test.tsv" --batch-size $b \
          --layers 6 --dtype bf16 --repeats "$REPEATS" 2>&1 | grep -E "^\| 6"
      done
      echo "== $n NEST_ATTENTION=$k train bf16"
      NEST_ATTENTION=$k "/tmp/$n" bench train --model "$M" --data "$G/data/snli_triplets_dev.tsv" \
        --objectives mrl --dtype bf16 2>&1 | grep -E "step, median|one epoch"
    done
  done
  exit 0
fi
for b in 32 256; do
  peers=(--python python3 --peers torch-float32,torch-bf16)
  for n in $BINS; do
    echo "== $n, batch $b"
    "/tmp/$n" bench encode --model "$M" --data "$G/data/stsb_test.tsv" --batch-size $b --layers 3,6 \
      --dtype auto,float32,bf16,int8 --repeats "$REPEATS" "${peers[@]}" \
      --markdown "$OUT/encode.md" 2>&1 | tee "$OUT/encode_${n}_b$b.log" | grep -E "^\|"
    peers=()
  done
done
for d in bf16 float32; do
  py=(--python python3)
  for n in $BINS; do
    echo "== $n, train $d"
    "/tmp/$n" bench train --model "$M" --data "$G/data/snli_triplets_dev.tsv" --objectives mrl --dtype $d \
      "${py[@]}" --markdown "$OUT/train.md" 2>&1 | tee "$OUT/train_${n}_$d.log" | grep -E "^\|"
    py=()
  done
done
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv

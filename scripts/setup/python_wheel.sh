#!/usr/bin/env bash
# Builds the Python package `nest` (python/: PyO3 + maturin, abi3 for Python >= 3.10) into a
# wheel in target/wheels/, and with --install installs it into that Python (the active venv).
#
#   scripts/setup/python_wheel.sh              # build the wheel
#   scripts/setup/python_wheel.sh --install    # build and pip install it (no dependencies fetched
#                                        # when torch and numpy are already there)
#   PYTHON=/path/to/venv/bin/python scripts/setup/python_wheel.sh --install
#   WHEEL_DIR=dir scripts/setup/python_wheel.sh # the wheel into dir (default target/wheels)
#
# The Python needs only torch importable, from a venv or from PYTHONPATH (scripts/setup/python_test.sh
# runs python3 with PYTHONPATH=.deps/py:.deps/pytest, no venv). maturin is that Python's
# (`python -m maturin`) when it has one, else pip-installed into .deps/maturin (--target: no venv
# nor root needed) and run from there.
#
# The extension links the libtorch of the `torch` wheel installed in that Python (it needs
# torch==2.13.*, as the root build's libtorch) and loads it at run time (`import nest` imports
# torch first; the extension's rpath also points at site-packages/torch/lib). When the root
# build's libtorch (.deps/py/torch, scripts/setup.sh) is the same torch version, the build uses
# it and shares the root target/ so that libtorch's bindings, tokenizers and the nest crates
# compiled by `cargo build --release` are reused; else it builds in python/target.
# Builds run under `nice` (NICE=0 to not).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-python3}
install=0
[ "${1:-}" = "--install" ] && install=1

torch_info=$("$py" -c 'import os, torch; print(os.path.dirname(torch.__file__)); print(torch.__version__.split("+")[0])' 2>/dev/null) || {
  echo "error: $py has no torch; install it first: $py -m pip install torch==2.13.0" >&2
  exit 1
}
torch_dir=$(sed -n 1p <<<"$torch_info")
torch_ver=$(sed -n 2p <<<"$torch_info")
if "$py" -m maturin --version >/dev/null 2>&1; then
  maturin=("$py" -m maturin)
else
  maturin=("$root/.deps/maturin/bin/maturin")
  if ! "${maturin[@]}" --version >/dev/null 2>&1; then
    echo "python_wheel: installing maturin into .deps/maturin" >&2
    rm -rf "$root/.deps/maturin"
    env -u PYTHONPATH "$py" -m pip install --quiet --disable-pip-version-check --no-compile \
      --target "$root/.deps/maturin" "maturin>=1.5,<2"
  fi
fi

deps_torch="$root/.deps/py/torch"
deps_ver=$(sed -n "s/^__version__ = '\([^+']*\).*/\1/p" "$deps_torch/version.py" 2>/dev/null || true)
if [ -z "${LIBTORCH:-}" ] && [ "$deps_ver" = "$torch_ver" ]; then
  export LIBTORCH="$deps_torch"
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
else
  export LIBTORCH=${LIBTORCH:-$torch_dir}
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/python/target}
fi
echo "python_wheel: libtorch $LIBTORCH (torch $torch_ver), target $CARGO_TARGET_DIR" >&2

out=${WHEEL_DIR:-$root/target/wheels}
mkdir -p "$out"
cd "$root/python"
nice -n "${NICE:-19}" "${maturin[@]}" build --release --interpreter "$py" --out "$out"
wheel=$(ls -t "$out"/nest-*-abi3-*.whl | head -1)
echo "python_wheel: built $wheel" >&2
if [ "$install" = 1 ]; then
  nice -n "${NICE:-19}" "$py" -m pip install --quiet --force-reinstall --no-deps "$wheel"
  "$py" -m pip install --quiet "numpy>=1.21" "torch==$torch_ver"  # already there: nothing fetched
  echo "python_wheel: installed into $("$py" -c 'import sys; print(sys.prefix)')" >&2
fi

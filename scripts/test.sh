#!/usr/bin/env bash
# The test command: fetch libtorch and the models (idempotent), then run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo test --workspace "$@"

#!/usr/bin/env bash
# The test command: fetch libtorch and the models (idempotent), then run every test: Rust's, then
# the Python package's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# PostgreSQL 15 + pgvector for the pgvector integration test (needs root or sudo and apt; where
# it cannot install, that test skips with a reason, except under CI, where it fails)
scripts/setup/setup_pgvector.sh || echo "warning: PostgreSQL + pgvector not installed; the pgvector test will skip" >&2
# the official OpenAI Python client, for the server's integration test
if ! PYTHONPATH=.deps/pyclient python3 -c "import openai" 2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check --target .deps/pyclient "openai>=1.40,<3"
fi
# schemathesis, for the property-based API test against the server's /openapi.json
if ! PYTHONPATH=.deps/schemathesis python3 -c "import schemathesis" 2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check --target .deps/schemathesis "schemathesis>=4.0,<5"
fi
cargo test --workspace "$@"
# the Python package (pip-installable wheel over the Rust core) and its pytest suite, MTEB's local
# task included; after cargo test, whose target/debug/nest the CLI parity tests compare against
# (NEST_SKIP_PYTHON=1 skips it, for a quick `scripts/test.sh -p nest-model`; .ci/run never sets it)
if [ "${NEST_SKIP_PYTHON:-0}" != 1 ]; then
  scripts/setup/python_test.sh
fi

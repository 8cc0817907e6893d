#!/usr/bin/env bash
# PostgreSQL 15 (Debian) + pgvector 0.8.0 built from Debian's source tarball (bookworm has no
# binary package for it), for `nest export pgvector` and its integration test.
#
#   scripts/setup/setup_pgvector.sh          # install (idempotent; needs root or sudo, and apt)
#
# The test (crates/nest-cli/tests/pgvector.rs) then starts its own server with initdb on a
# loopback port in a temporary folder; nothing here starts a server.
set -euo pipefail
PGV=0.8.0
SHA=867a2c328d4928a5a9d6f052cd3bc78c7d60228a9b914ad32aa3db88e9de27b0
PGBIN=/usr/lib/postgresql/15/bin
sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if [ -x "$PGBIN/initdb" ] && [ -f /usr/share/postgresql/15/extension/vector.control ] \
   && [ -f "/usr/share/postgresql/15/extension/vector--$PGV.sql" ]; then
  echo "pgvector: PostgreSQL 15 with pgvector $PGV already installed"
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "pgvector: no apt-get here; install PostgreSQL 15 and pgvector >= 0.7 by hand" >&2
  exit 1
fi
sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 postgresql-server-dev-15 make gcc curl >/dev/null \
  || { sudo_ apt-get update -qq && sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 postgresql-server-dev-15 make gcc curl >/dev/null; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
curl -sSfL -o "$work/pgv.tar.gz" "http://deb.debian.org/debian/pool/main/p/pgvector/pgvector_${PGV}.orig.tar.gz"
echo "$SHA  $work/pgv.tar.gz" | sha256sum -c --quiet
tar xzf "$work/pgv.tar.gz" -C "$work"
make -s -C "$work/pgvector-$PGV" PG_CONFIG=/usr/bin/pg_config with_llvm=no >/dev/null
sudo_ make -s -C "$work/pgvector-$PGV" PG_CONFIG=/usr/bin/pg_config with_llvm=no install >/dev/null
echo "pgvector: installed PostgreSQL 15 + pgvector $PGV"

#!/usr/bin/env bash
# A throwaway PostgreSQL 15 + pgvector server for benchmarks (scripts/setup/setup_pgvector.sh installs
# both): data in runs/pg, loopback port 55432, trust auth, fsync off.
#
#   scripts/setup/pg_local.sh start     # prints the DSN to use as PG_DSN / --dsn
#   scripts/setup/pg_local.sh stop
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=/usr/lib/postgresql/15/bin
DIR=$PWD/runs/pg
PORT=${PG_PORT:-55432}
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
case ${1:-start} in
  start)
    if [ ! -f "$DIR/data/PG_VERSION" ]; then
      mkdir -p "$DIR/data"; chmod 777 "$DIR"
      [ "$(id -u)" = 0 ] && chown postgres "$DIR/data"
      as_pg $BIN/initdb -D "$DIR/data" -U postgres -A trust >/dev/null
    fi
    as_pg $BIN/pg_ctl -D "$DIR/data" -l "$DIR/log" -w \
      -o "-p $PORT -h 127.0.0.1 -k $DIR -c fsync=off -c maintenance_work_mem=1GB -c shared_buffers=1GB" start >/dev/null
    echo "host=127.0.0.1 port=$PORT user=postgres dbname=postgres" ;;
  stop) as_pg $BIN/pg_ctl -D "$DIR/data" -m fast stop >/dev/null ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac

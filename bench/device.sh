#!/usr/bin/env bash
# Issue 29's core-scaling rows on a machine with many cores (a lent 16-core machine here):
# the service pinned to 2, 4 and 8 cores, the test doubles and Postgres on the others.
#
# It runs prebuilt binaries, since such a machine may have no toolchain: `bench/devpack.sh`
# packs target/release/{synthgate,mock-llm,mock-mcp} into .devpack/bins.tar.xz and a
# relocatable Postgres 15 into .devpack/pgpack.tar.xz (see bench/README.md, "Cores"). With
# $PG set (an admin URL), it uses that server instead. Rows are JSON lines in $OUT/rows.jsonl,
# the log in $OUT/log.txt; each row is one `bench/scale.py` command, printed before it runs.
# `bench/device.sh ROWS_FILE` runs the rows of that file instead of the issue's (one scale.py
# argument list per line; `!command` lines run in between). Rows that would start after
# $BUDGET seconds are skipped, so a lease with a time limit ends with what ran.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/synthgate-device}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
START=$(date +%s)
BUDGET=${BUDGET:-420}   # seconds: rows that would start later are skipped
PGCORES=${PGCORES:-8-15}
export PYTHONUNBUFFERED=1

echo "== machine"
nproc; grep -m1 'model name' /proc/cpuinfo; ldd --version 2>&1 | head -1; uname -r
free -g | head -2

mkdir -p target/release
[ -f .devpack/bins.tar.xz ] && tar -C target/release -xJf .devpack/bins.tar.xz
ls -la target/release/synthgate || exit 1
ls -la target/release/mock-llm target/release/mock-mcp || echo "no test doubles: LLM and tool rows fail"
target/release/synthgate --version || exit 1

PG=${PG:-}
if [ -z "$PG" ] && [ -f .devpack/pgpack.tar.xz ]; then
  echo "== postgres from the pack, on cores $PGCORES"
  tar -C /tmp -xJf .devpack/pgpack.tar.xz
  P=/tmp/pgpack
  [ -e /usr/share/zoneinfo/UTC ] || { mkdir -p /usr/share/zoneinfo && cp -r $P/zoneinfo/* /usr/share/zoneinfo/; }
  # Postgres refuses to run as root: initdb and the server run as nobody (65534), pinned, with
  # the pack's libraries; psql gets a wrapper with the same libraries.
  cat > /tmp/pgrun.py <<PY
import os, sys
cpus = set()
for part in "$PGCORES".split(","):
    lo, _, hi = part.partition("-"); cpus.update(range(int(lo), int(hi or lo) + 1))
os.sched_setaffinity(0, cpus)
if os.getuid() == 0:
    os.setgroups([]); os.setgid(65534); os.setuid(65534)
env = dict(os.environ, LD_LIBRARY_PATH="$P/libs", TZ="UTC")
os.execve(sys.argv[1], sys.argv[1:], env)
PY
  mkdir -p /tmp/pgbin
  for b in psql pg_isready; do
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$P/libs" "$P/lib/postgresql/15/bin/$b" > /tmp/pgbin/$b
    chmod +x /tmp/pgbin/$b
  done
  export PATH=/tmp/pgbin:$PATH
  rm -rf /tmp/pgdata && mkdir -p /tmp/pgdata && chown 65534:65534 /tmp/pgdata 2>/dev/null
  chmod 700 /tmp/pgdata
  python3 /tmp/pgrun.py $P/lib/postgresql/15/bin/initdb -D /tmp/pgdata -U postgres -A trust \
    -E UTF8 --locale=C >/tmp/initdb.log 2>&1 || { cat /tmp/initdb.log; exit 1; }
  python3 /tmp/pgrun.py $P/lib/postgresql/15/bin/postgres -D /tmp/pgdata -p 54329 \
    -c listen_addresses=127.0.0.1 -c unix_socket_directories=/tmp -c max_connections=400 \
    >/tmp/postgres.log 2>&1 &
  PG=postgres://postgres@127.0.0.1:54329/postgres
  for _ in $(seq 100); do pg_isready -q -h 127.0.0.1 -p 54329 && break; sleep 0.1; done
  psql "$PG" -Atc 'select version()' || { cat /tmp/postgres.log; PG=; }
fi

row() {
  local left=$(( BUDGET - ($(date +%s) - START) ))
  if [ "$left" -lt 20 ]; then echo "-- skipped (budget): $*"; return; fi
  echo "-- $(( $(date +%s) - START ))s: scale.py $*"
  timeout "$left" python3 bench/scale.py "$@" | tee -a "$OUT/rows.jsonl"
}

echo "== rows"
if [ $# -gt 0 ]; then
  # A file of rows: each line the arguments of one scale.py run ($PG expanded), or a shell
  # command after '!' (e.g. to swap in another build between rows).
  while IFS= read -r line; do
    case "$line" in
      ''|'#'*) ;;
      '!'*) echo "-- ${line#!}"; eval "${line#!}" ;;
      *) eval "row $line" ;;
    esac
  done < "$1"
else
  # Tool records: 3 LLM + 2 MCP calls each, model at 0 ms, 256 in flight (the issue's first row).
  for c in 2 4 8 2 4 8; do row tools-cpu --cpus "$c" --in-flight 256 -n 20000; done
  # Quickstart (samplers + expressions) on Postgres (the issue's second acceptance row).
  if [ -n "$PG" ]; then
    for c in 2 4 8 2 4 8; do row quickstart --cpus "$c" -n 200000 --pg "$PG"; done
  fi
  # Scale-out: 1, 2 and 4 replicas of 2 cores each on one Postgres.
  if [ -n "$PG" ]; then
    for r in 1 2 4; do row replicas --cpus 2 --replicas "$r" -n 200000 --pg "$PG"; done
  fi
fi
echo "== done in $(( $(date +%s) - START ))s"

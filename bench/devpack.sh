#!/usr/bin/env bash
# Packs what bench/device.sh needs on a machine with no toolchain and no database, into
# .devpack/ (git-ignored): the release binaries, and a relocatable copy of this machine's
# Postgres 15 (server, initdb, psql, their extension libraries and shared files, and every
# shared library they load but the C library's own).
#
#   cargo build --release --workspace && bench/devpack.sh
#
# Postgres finds its share/ and lib/ relative to its binary, so the copy keeps Debian's layout
# (lib/postgresql/15/bin, share/postgresql/15) under one folder. About 45 MB compressed.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .devpack
# Other builds of the service to compare on the same machine, as target/release/synthgate-<name>
# (e.g. synthgate-base, main before a change: see bench/rows/), travel along.
extra=$(cd target/release && ls synthgate-* 2>/dev/null | grep -v '\.d$' || true)
tar -C target/release -cf - synthgate mock-llm mock-mcp $extra | xz -T0 -3 > .devpack/bins.tar.xz

PGBIN=/usr/lib/postgresql/15/bin
[ -x $PGBIN/postgres ] || { echo "no Postgres 15 at $PGBIN: bins only"; exit 0; }
tmp=$(mktemp -d)
P=$tmp/pgpack
mkdir -p $P/lib/postgresql/15/bin $P/lib/postgresql/15/lib $P/share/postgresql $P/libs $P/zoneinfo
cp $PGBIN/{postgres,initdb,pg_ctl,psql,pg_isready} $P/lib/postgresql/15/bin/
# Extension libraries, without the JIT (llvmjit.so would bring LLVM along).
find /usr/lib/postgresql/15/lib -maxdepth 1 -name '*.so' ! -name llvmjit.so -exec cp {} $P/lib/postgresql/15/lib/ \;
cp -r /usr/share/postgresql/15 $P/share/postgresql/
for b in $P/lib/postgresql/15/bin/*; do ldd "$b"; done | awk '{print $3}' | sort -u \
  | grep -v -E '^$|/libc\.so|/libm\.so|/libresolv\.so' | xargs -I{} cp -L {} $P/libs/
cp -r /usr/share/zoneinfo/{UTC,Etc} $P/zoneinfo/
tar -C $tmp -cf - pgpack | xz -T0 -6 > .devpack/pgpack.tar.xz
rm -rf "$tmp"
ls -la .devpack

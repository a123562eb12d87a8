#!/usr/bin/env bash
# bench.sh BENCH N: run the benchmark on SQLite (WAL, synchronous NORMAL, a
# file in the run dir), on a throwaway PostgreSQL (fsync on) and on a
# throwaway MariaDB, as research/perf-facts.md measured the raw statements.
# The servers take db.sh's ports (OBX_PG_PORT, OBX_MY_PORT) and run one at a
# time, so that one does not slow the other down.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=$1 n=${2:-20000}
rundir=${OBX_TEST_RUNDIR:-${TMPDIR:-/tmp}/obx-test-$(id -u)}
export OBX_TEST_RUNDIR=$rundir
mkdir -p "$rundir/sqlite" && rm -f "$rundir/sqlite/"bench.db*
"$bench" sqlite "Driver={SQLite3};Database=$rundir/sqlite/bench.db;JournalMode=WAL;SyncPragma=NORMAL;Timeout=10000;" "$n"
trap '"$here/db.sh" stop pg >/dev/null 2>&1 || true; "$here/db.sh" stop mariadb >/dev/null 2>&1' EXIT
"$here/db.sh" start pg >/dev/null
eval "$("$here/db.sh" env pg)"
"$bench" postgresql "$OBX_TEST_PG" "$n" | tail -n +2
"$here/db.sh" stop pg >/dev/null
"$here/db.sh" start mariadb >/dev/null
eval "$("$here/db.sh" env mariadb)"
"$bench" mariadb "$OBX_TEST_MY" "$n" | tail -n +2

#!/usr/bin/env bash
# bench.sh BENCH [N]: run the benchmark on SQLite (WAL, synchronous NORMAL, a
# file in the run dir), on a throwaway PostgreSQL (fsync on) and on a
# throwaway MariaDB, one server at a time so that one does not slow the
# other down.
#
# Environment:
#   OBX_PG_PORT, OBX_MY_PORT, OBX_TEST_RUNDIR  ports and run dir (tests/db.sh)
#   BENCH_BACKENDS   which to run, default "sqlite pg mariadb"
#   BENCH_REPEATS    interleaved repeats per workload (median printed), default 3
#   BENCH_SWEEP      table sizes of the claim/drain sweep, default 10000,100000
#                    (add 1000000 for the slow one; empty: no sweep)
#   BENCH_STMTS=1    print the library's statements per workload (PostgreSQL)
#   BENCH_ONLY       a subset of the workloads, e.g. drain1,drain2 (bench.c)
#   BENCH_PRIORITY=1 the library's messages carry priorities -5..5 (the drains and the sweep)
#
# The server's pid goes to the bench as BENCH_SERVER_PID: it prints the CPU
# time per message of the server and of the client beside the rates.
#
# PostgreSQL is restarted once with pg_stat_statements preloaded: the bench
# reads statements per message from it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=$1 n=${2:-20000}
rundir=${OBX_TEST_RUNDIR:-${TMPDIR:-/tmp}/obx-test-$(id -u)}
export OBX_TEST_RUNDIR=$rundir
backends=${BENCH_BACKENDS:-sqlite pg mariadb}

trap '"$here/db.sh" stop pg >/dev/null 2>&1 || true; "$here/db.sh" stop mariadb >/dev/null 2>&1 || true' EXIT

# Restart the throwaway PostgreSQL with pg_stat_statements loaded (it can
# only be loaded at start). Its files belong to postgres when we are root.
pg_preload() {
    local bin data=$rundir/pg
    bin=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
    [[ -x $bin/pg_ctl ]] || bin=$(dirname "$(command -v pg_ctl)")
    printf "shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track_utility = on\n" \
        >>"$data/postgresql.conf"
    if [[ $(id -u) -eq 0 ]]; then
        su postgres -s /bin/sh -c "cd '$rundir' && '$bin/pg_ctl' -D '$data' -l '$rundir/pg.log' -w -t 30 restart" >/dev/null
    else
        "$bin/pg_ctl" -D "$data" -l "$rundir/pg.log" -w -t 30 restart >/dev/null
    fi
}

# Whole-process allocation counts (driver manager and driver included),
# where the counter is built beside the bench.
preload=$(dirname "$bench")/malloc_count.so
[[ -f $preload ]] || preload=

for b in $backends; do
    case $b in
        sqlite)
            mkdir -p "$rundir/sqlite" && rm -f "$rundir/sqlite/"bench.db*
            LD_PRELOAD=$preload "$bench" sqlite "Driver={SQLite3};Database=$rundir/sqlite/bench.db;JournalMode=WAL;SyncPragma=NORMAL;Timeout=10000;" "$n"
            ;;
        pg)
            "$here/db.sh" start pg >/dev/null
            pg_preload
            eval "$("$here/db.sh" env pg)"
            # Protocol=7.4-1 as the library sets it, for the raw ODBC rows too.
            BENCH_SERVER_PID=$(head -n 1 "$rundir/pg/postmaster.pid") \
                LD_PRELOAD=$preload "$bench" postgresql "${OBX_TEST_PG}Protocol=7.4-1;" "$n"
            "$here/db.sh" stop pg >/dev/null
            ;;
        mariadb)
            "$here/db.sh" start mariadb >/dev/null
            eval "$("$here/db.sh" env mariadb)"
            BENCH_SERVER_PID=$(cat "$rundir/my.pid") LD_PRELOAD=$preload "$bench" mariadb "$OBX_TEST_MY" "$n"
            "$here/db.sh" stop mariadb >/dev/null
            ;;
        *) echo "bench.sh: unknown backend '$b'" >&2; exit 2 ;;
    esac
done

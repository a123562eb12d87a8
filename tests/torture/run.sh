#!/usr/bin/env bash
# tests/torture/run.sh BINDIR [SCENARIO...] - the torture suite (issue 11).
#
# Scenarios (default: all, in this order):
#   odbc        5: ODBC failure at every call (fake ODBC layer), both headers;
#                  and at every call of run()'s carried ack (the fused
#                  ack-and-claim, its commit, run()'s last acks):
#                  TORTURE_ODBC_CARRY_STRIDE=N faults every N-th call only
#   oom         4: allocation failure at every point (real SQLite), both headers;
#                  again on the sqlite3 build (OBX_SQLITE3_API: SQLite's C API)
#   txh         1 with transactional handlers (obx_dispatcher_on_tx): each
#                  handler's effect row commits with its ack; the books find
#                  every effect exactly once and only on Done messages. Small
#                  by default (TORTURE_TXH_SECONDS, 10; TORTURE_TXH_KILLS, 20)
#   crash       1: SIGKILL of producers and dispatchers (messages of every priority), both headers, on
#                  SQLite, the sqlite3 build, PostgreSQL and MariaDB
#   durability  3: SQLite: kills with synchronous=FULL, integrity_check; disk full;
#                  both on the sqlite3 build too
#   dbfault     2: PostgreSQL and MariaDB: server restart, sessions killed,
#                  server frozen; recovery time
#   providers   6: one dispatcher over a SQLite, a PostgreSQL and a MariaDB
#                  database; each in turn restarted or removed by discovery
#
# Every scenario prints one "torture: ..." line with its figures; the run
# ends with "torture: N passed, N failed" and fails when any figure broke
# its bound. A backend that cannot run prints SKIPPED; under CI=true that is
# a failure.
#
# Environment:
#   TORTURE_SCALE      multiplies the kill-phase time and message counts (default 1)
#   TORTURE_PG_PORT    PostgreSQL port (default 25349), TORTURE_MY_PORT MariaDB (23089):
#                      not make test's ports, so both can run at once
#   TORTURE_RUNDIR     scratch dir (default ${TMPDIR:-/tmp}/obx-torture-<uid>)
#   TORTURE_BACKENDS   subset of "sqlite sqlite3 postgresql mariadb" for crash/dbfault
#                      (sqlite3: the drivers built with OBX_SQLITE3_API, *_sqlite3)
#   TORTURE_CRASH_SECONDS  the crash runs' kill phase on sqlite, postgresql,
#                      mariadb (default 20)
#   TORTURE_KILLS      the crash and durability runs go on until this many kills
#                      at least (default 50)
#   TORTURE_SQLITE3_SECONDS  the sqlite3 build's kill phases (default 8;
#                      each runs until TORTURE_KILLS kills: about 13 s)
#   TORTURE_SQLITE3_OOM_STRIDE  its oom run fails every N-th allocation (default
#                      10: about a minute; 1: every point, about 10 times longer)
#   TORTURE_OOM_STRIDE the ODBC build's oom run (default 1: every point, once and
#                      sticky; 2: every point once or sticky, half the runs)
#   TORTURE_TXH_SECONDS, TORTURE_TXH_KILLS  the txh runs (default 10 s, 20 kills)
#   TORTURE_DURABILITY_SECONDS  the synchronous=FULL kill phase (default 10)
#
# CI (.ci/run) runs the smaller sizes it sets there (the kill phases about
# half, oom at stride 2); `make torture` by hand runs the defaults above.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
db="$here/../db.sh"
bin=${1:?usage: run.sh BINDIR [SCENARIO...]}
shift
scenarios=${*:-odbc oom crash txh durability dbfault providers}
backends=${TORTURE_BACKENDS:-sqlite sqlite3 postgresql mariadb}
s3_seconds=${TORTURE_SQLITE3_SECONDS:-8}
crash_seconds=${TORTURE_CRASH_SECONDS:-${TORTURE_SECONDS:-20}}
rundir=${TORTURE_RUNDIR:-${TMPDIR:-/tmp}/obx-torture-$(id -u)}
export OBX_PG_PORT=${TORTURE_PG_PORT:-25349}
export OBX_MY_PORT=${TORTURE_MY_PORT:-23089}
export OBX_TEST_RUNDIR=$rundir/servers
# LeakSanitizer: psqlODBC's own known leak (tests/lsan.supp).
export LSAN_OPTIONS=suppressions=$here/../lsan.supp
mkdir -p "$rundir"
results=$rundir/results
: > "$results"
pg_up=0 my_up=0
t_start=$(date +%s)

cleanup() {
    [ "$pg_up" = 1 ] && "$db" stop pg >/dev/null 2>&1
    [ "$my_up" = 1 ] && "$db" stop mariadb >/dev/null 2>&1
}
trap cleanup EXIT

# Run one driver; its "torture:" lines go to the results, a crash without
# one becomes a FAILED line of its own.
run() {
    local name=$1; shift
    local out=$rundir/$name.out rc
    echo "== $name: $*" >&2
    "$@" > "$out" 2>"$rundir/$name.err"
    rc=$?
    cat "$out"
    if ! grep -q '^torture: ' "$out"; then
        echo "torture: $name FAILED: no result line (exit status $rc; stderr in $rundir/$name.err)" | tee -a "$results"
        tail -n 5 "$rundir/$name.err" >&2
        return
    fi
    grep '^torture: ' "$out" >> "$results"
    if [ "$rc" -ne 0 ] && ! grep -q 'FAILED' "$out"; then
        echo "torture: $name FAILED: exit status $rc" | tee -a "$results"
    fi
}

skip() { # what reason
    if [ "${CI:-}" = true ]; then
        echo "torture: $1 FAILED: SKIPPED under CI=true: $2" | tee -a "$results"
    else
        echo "torture: $1 SKIPPED: $2" | tee -a "$results"
    fi
}

start_server() { # pg|mariadb
    if [ "$1" = pg ] && [ "$pg_up" = 1 ]; then return 0; fi
    if [ "$1" = mariadb ] && [ "$my_up" = 1 ]; then return 0; fi
    if "$db" start "$1" >&2; then
        [ "$1" = pg ] && pg_up=1
        [ "$1" = mariadb ] && my_up=1
        return 0
    fi
    return 1
}

conn_of() { # backend name -> connection string (sqlite: a fresh file)
    case $1 in
    sqlite | sqlite3) echo "Driver={SQLite3};Database=$rundir/$2.sqlite;JournalMode=WAL;SyncPragma=${3:-NORMAL};Timeout=10000;" ;;
    postgresql) eval "$("$db" env pg)"; echo "$OBX_TEST_PG" ;;
    mariadb) eval "$("$db" env mariadb)"; echo "$OBX_TEST_MY" ;;
    esac
}

ready_backend() { # backend -> 0 when usable
    case $1 in
    sqlite | sqlite3) return 0 ;;
    postgresql) start_server pg ;;
    mariadb) start_server mariadb ;;
    esac
}

# The sqlite3 build's oom and durability runs: when TORTURE_BACKENDS has it.
has_sqlite3() { case " $backends " in *" sqlite3 "*) return 0 ;; esac; return 1; }

crash_run() { # name hdr backend table [sync]
    local name=$1 hdr=$2 backend=$3 table=$4 sync=${5:-NORMAL} dir sfx=
    dir=$rundir/$name
    rm -rf "$dir" && mkdir -p "$dir"
    rm -f "$rundir/$name.sqlite"*
    [ "$backend" = sqlite3 ] && sfx=_sqlite3
    run "$name" "$bin/torture_crash$sfx" run "$hdr" "$backend" "$(conn_of "$backend" "$name" "$sync")" "$table" "$dir"
}

for s in $scenarios; do
    case $s in
    odbc) run odbc "$bin/torture_odbcfault" both ;;
    oom)
        mkdir -p "$rundir/oom"
        run oom "$bin/torture_oom" "$rundir/oom" both
        if has_sqlite3; then
            mkdir -p "$rundir/oom-sqlite3"
            TORTURE_OOM_STRIDE=${TORTURE_SQLITE3_OOM_STRIDE:-10} \
                run oom-sqlite3 "$bin/torture_oom_sqlite3" "$rundir/oom-sqlite3" both
        fi
        ;;
    crash)
        for b in $backends; do
            if ! ready_backend "$b"; then
                skip "crash $b" "the throwaway $b server did not start (see above)"
                continue
            fi
            if [ "$b" = sqlite3 ]; then # short by default: the same engine as sqlite
                TORTURE_SECONDS=$s3_seconds crash_run "crash-obx-$b" obx "$b" TortCrashO
                TORTURE_SECONDS=$s3_seconds crash_run "crash-ibx-$b" ibx "$b" TortCrashI
                continue
            fi
            TORTURE_SECONDS=$crash_seconds crash_run "crash-obx-$b" obx "$b" TortCrashO
            TORTURE_SECONDS=$crash_seconds crash_run "crash-ibx-$b" ibx "$b" TortCrashI
        done
        ;;
    txh)
        for b in $backends; do
            if ! ready_backend "$b"; then
                skip "txh $b" "the throwaway $b server did not start (see above)"
                continue
            fi
            TORTURE_TXH=1 TORTURE_SECONDS=${TORTURE_TXH_SECONDS:-10} TORTURE_KILLS=${TORTURE_TXH_KILLS:-20} \
                TORTURE_MESSAGES=${TORTURE_TXH_MESSAGES:-500} crash_run "txh-obx-$b" obx "$b" TortTxhO
            TORTURE_TXH=1 TORTURE_SECONDS=${TORTURE_TXH_SECONDS:-10} TORTURE_KILLS=${TORTURE_TXH_KILLS:-20} \
                TORTURE_MESSAGES=${TORTURE_TXH_MESSAGES:-500} crash_run "txh-ibx-$b" ibx "$b" TortTxhI
        done
        ;;
    durability)
        # SIGKILLs land in commits at random: synchronous=FULL here (the
        # crash runs above use the recommended WAL + NORMAL).
        TORTURE_SECONDS=${TORTURE_DURABILITY_SECONDS:-10} TORTURE_MESSAGES=600 \
            crash_run durability-full obx sqlite TortDurable FULL
        run diskfull "$bin/torture_diskfull" "$rundir/diskfull.sqlite"
        if has_sqlite3; then
            TORTURE_SECONDS=$s3_seconds TORTURE_MESSAGES=300 \
                crash_run durability-full-sqlite3 obx sqlite3 TortDurable FULL
            run diskfull-sqlite3 "$bin/torture_diskfull_sqlite3" "$rundir/diskfull-sqlite3.sqlite"
        fi
        ;;
    dbfault)
        for b in $backends; do
            case $b in sqlite | sqlite3) continue ;; esac
            if ! ready_backend "$b"; then
                skip "dbfault $b" "the throwaway $b server did not start (see above)"
                continue
            fi
            for hdr in obx ibx; do
                name=dbfault-$hdr-$b
                rm -rf "${rundir:?}/$name" && mkdir -p "$rundir/$name"
                TORTURE_FAULT_SCRIPT=$here/dbfault.sh run "$name" "$bin/torture_crash" faults "$hdr" "$b" \
                    "$(conn_of "$b" "$name")" "TortFault${hdr}" "$rundir/$name"
            done
        done
        ;;
    providers)
        if ! ready_backend postgresql || ! ready_backend mariadb; then
            skip providers "the throwaway servers did not start (see above)"
            continue
        fi
        for hdr in obx ibx; do
            name=providers-$hdr
            rm -rf "${rundir:?}/$name" && mkdir -p "$rundir/$name"
            TORTURE_DB_1="site-sqlite|sqlite|$(conn_of sqlite "$name")" \
            TORTURE_DB_2="site-pg|postgresql|$(conn_of postgresql)" \
            TORTURE_DB_3="site-my|mariadb|$(conn_of mariadb)" \
            TORTURE_FAULT_SCRIPT=$here/dbfault.sh \
                run "$name" "$bin/torture_crash" providers "$hdr" multi - "TortProv${hdr}" "$rundir/$name"
        done
        ;;
    *) echo "torture: unknown scenario $s" | tee -a "$results" ;;
    esac
done

echo "== torture summary ($(( $(date +%s) - t_start )) s)"
cat "$results"
failed=$(grep -c 'FAILED' "$results")
passed=$(grep -v -c -E 'FAILED|SKIPPED' "$results")
echo "torture: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]

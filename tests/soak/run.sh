#!/usr/bin/env bash
# tests/soak/run.sh BINDIR - the soak (issue 26): the whole product at once, under
# kills, checked against a reference model.
#
# For each backend (SQLite, PostgreSQL, MariaDB) and header (obx, ibx): the
# orchestrator (soak run) starts producers and dispatchers that all work on one
# database, kills one of them (SIGKILL) at random moments and starts it again,
# then stops the producers and lets the dispatchers drain; the checker
# (soak_check) reads every process's log and the final tables and fails on any
# broken rule (the list is at the top of check.c), printing the history of the
# message that broke it. Each pair prints "soak: ..." figures; the run ends with
# "soak: N passed, N failed". The checker proves itself first: tests/soak/selftest.sh
# breaks each of its rules in a planted history and expects it to fail.
#
# Environment:
#   SOAK_SEED       the schedule of operations and kills (default: from the
#                   clock, printed); the same seed replays the same schedule
#                   (timing, and so the interleavings, may differ)
#   SOAK_MINUTES    load phase per backend and header, in minutes (a long run by
#                   hand: SOAK_MINUTES=30); else SOAK_SECONDS (default 20; CI,
#                   .ci/run, sets 12)
#   SOAK_SIZE       multiplies the processes (3 producers and 3 dispatchers at 1,
#                   at most 8 each) and the kill rate (default 1)
#   SOAK_TENANTS    0: no provider processes (default 1: two provider processes
#                   dispatch the run's database and two more, obx2 and obx3 on
#                   the servers, files beside it on SQLite, while its tenant list
#                   changes: tenants removed, added back, connection strings
#                   changed); each tenant's database is checked
#   SOAK_BACKENDS   subset of "sqlite postgresql mariadb"; SOAK_HEADERS of "obx ibx"
#   SOAK_KNOWN      rules of known, still unfixed defects whose violations are
#                   printed as WAIVED instead of failing (named in the output)
#   SOAK_PG_PORT, SOAK_MY_PORT   the servers' ports (default 25361, 23101: not
#                   make test's nor torture's, so they can run at once)
#   SOAK_RUNDIR     scratch dir (default ${TMPDIR:-/tmp}/obx-soak-<uid>); logs kept
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
db="$here/../db.sh"
bin=${1:?usage: run.sh BINDIR}
backends=${SOAK_BACKENDS:-sqlite postgresql mariadb}
headers=${SOAK_HEADERS:-obx ibx}
rundir=${SOAK_RUNDIR:-${TMPDIR:-/tmp}/obx-soak-$(id -u)}
export OBX_PG_PORT=${SOAK_PG_PORT:-25361}
export OBX_MY_PORT=${SOAK_MY_PORT:-23101}
export OBX_TEST_RUNDIR=$rundir/servers
size=${SOAK_SIZE:-1}
if [ -n "${SOAK_MINUTES:-}" ]; then
    export SOAK_SECONDS=$((SOAK_MINUTES * 60))
else
    export SOAK_SECONDS=${SOAK_SECONDS:-20}
fi
p=$((3 * size)); [ "$p" -gt 8 ] && p=8
export SOAK_PRODUCERS=${SOAK_PRODUCERS:-$p} SOAK_DISPATCHERS=${SOAK_DISPATCHERS:-$p}
export SOAK_KILL_MS=${SOAK_KILL_MS:-$((1500 / size))}
export SOAK_OBXCTL=${SOAK_OBXCTL:-$(cd "$bin/.." && pwd)/obxctl}
export SOAK_FAULT_SCRIPT=${SOAK_FAULT_SCRIPT-$here/../torture/dbfault.sh}
export SOAK_SEED=${SOAK_SEED:-$(date +%s%N | cut -c1-15)}
mkdir -p "$rundir"
results=$rundir/results
: > "$results"
pg_up=0 my_up=0
t_start=$(date +%s)
echo "soak: seed $SOAK_SEED (SOAK_SEED=$SOAK_SEED replays this schedule), ${SOAK_SECONDS} s per run, $SOAK_PRODUCERS producers, $SOAK_DISPATCHERS dispatchers"
[ -n "${SOAK_KNOWN:-}" ] && echo "soak: WARNING: SOAK_KNOWN=$SOAK_KNOWN: violations of these rules are WAIVED (known, unfixed defects)"

cleanup() {
    [ "$pg_up" = 1 ] && "$db" stop pg >/dev/null 2>&1
    [ "$my_up" = 1 ] && "$db" stop mariadb >/dev/null 2>&1
}
trap cleanup EXIT

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
conn_of() { # backend name [tenant 0|1|2]: the tenants are the servers' databases obx, obx2, obx3
    local t=${3:-0} v
    case $1 in
    sqlite) [ "$t" = 0 ] && t="" || t="-t$t"
            echo "Driver={SQLite3};Database=$rundir/$2$t.sqlite;JournalMode=WAL;SyncPragma=NORMAL;Timeout=10000;" ;;
    postgresql) eval "$("$db" env pg)"; v=OBX_TEST_PG; [ "$t" = 0 ] || v=OBX_TEST_PG$((t + 1)); echo "${!v}" ;;
    mariadb) eval "$("$db" env mariadb)"; v=OBX_TEST_MY; [ "$t" = 0 ] || v=OBX_TEST_MY$((t + 1)); echo "${!v}" ;;
    esac
}

for b in $backends; do
    case $b in
    postgresql) start_server pg ;;
    mariadb) start_server mariadb ;;
    *) true ;;
    esac || {
        if [ "${CI:-}" = true ]; then echo "soak: $b FAILED: the throwaway server did not start" | tee -a "$results"
        else echo "soak: $b SKIPPED: the throwaway server did not start" | tee -a "$results"; fi
        continue
    }
    for h in $headers; do
        name=$h-$b
        dir=$rundir/$name
        table=Soak$h
        rm -rf "$dir" "$rundir/$name.sqlite"* && mkdir -p "$dir"
        conn=$(conn_of "$b" "$name")
        tenants=0
        if [ "${SOAK_TENANTS:-1}" != 0 ]; then
            tenants="0 1 2"
            export SOAK_CONN_1 SOAK_CONN_2
            SOAK_CONN_1=$(conn_of "$b" "$name" 1)
            SOAK_CONN_2=$(conn_of "$b" "$name" 2)
            rm -f "$rundir/$name-t"*.sqlite*
        fi
        echo "== $name (logs in $dir)" >&2
        if ! "$bin/soak" run "$h" "$b" "$conn" "$table" "$dir" > "$dir/run.out" 2> "$dir/run.err"; then
            cat "$dir/run.out"; tail -n 5 "$dir/run.err" >&2
            echo "soak: $name FAILED: the run did not complete (seed $SOAK_SEED)" | tee -a "$results"
            continue
        fi
        cat "$dir/run.out"
        rc=0
        : > "$dir/check.out"
        for t in $tenants; do
            SOAK_TENANT=$t "$bin/soak_check" "$h" "$b" "$(conn_of "$b" "$name" "$t")" "$table" "$dir" > "$dir/check-t$t.out" 2>&1 || rc=1
            cat "$dir/check-t$t.out" >> "$dir/check.out"
        done
        cat "$dir/check.out"
        if [ "$rc" -ne 0 ]; then
            echo "soak: $name FAILED (seed $SOAK_SEED; logs in $dir)" | tee -a "$results"
        else
            echo "soak: $name ok" >> "$results"
        fi
    done
done

echo "== soak summary ($(( $(date +%s) - t_start )) s, seed $SOAK_SEED)"
cat "$results"
failed=$(grep -c 'FAILED' "$results")
passed=$(grep -c ' ok$' "$results")
echo "soak: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]

#!/usr/bin/env bash
# tests/scale/run.sh BINDIR [SCENARIO...] - scale-out and high availability on
# real engines (issue 16), all on 127.0.0.1 from Debian packages.
#
# Scenarios (default: all, in this order):
#   failover   PostgreSQL primary + streaming standby; producers and
#              dispatchers at work; the primary is killed (-9) and the standby
#              promoted; the workers find the new primary through a multi-host
#              connection string. Synchronous (outbox, inbox): lost = 0;
#              asynchronous (outbox): acknowledged commits lost are reported.
#   pgbouncer  the outbox and inbox requirement tests through PgBouncer in
#              transaction pooling mode; throughput with and without it
#   galera     3-node MariaDB Galera: dispatchers on different nodes, one node
#              killed and rejoining; throughput with 1, 2, 3 nodes and the
#              certification-failure rate
#   tenants    50 tenant databases (SQLite files, PostgreSQL databases on two
#              servers) behind a provider, 4 dispatcher processes, tenants
#              added and removed mid-run: delivered once, lag, connections
#
# Each scenario prints "scale: ..." lines with its figures; the run ends with
# "scale: N passed, N failed". A scenario that cannot run prints SKIPPED;
# under CI=true that is a failure.
#
# Environment:
#   SCALE_SIZE     1 (default, about 8 minutes on 2 cores: what CI runs) or
#                  more: longer runs and more messages (the full size is 5)
#   SCALE_RUNDIR   scratch dir (default ${TMPDIR:-/tmp}/obx-scale-<uid>)
#   SCALE_PG_PORT  first of 6 PostgreSQL ports (default 54420)
#   SCALE_MY_PORT  first of 4 MariaDB ports (default 33420); Galera also uses
#                  SCALE_GALERA_PORT.. +2 (45670), +5..+7 (SST), +10..+12 (IST)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?usage: run.sh BINDIR [SCENARIO...]}
bin=$(cd "$bin" && pwd)
shift
scenarios=${*:-failover pgbouncer galera tenants}
export SCALE_RUNDIR=${SCALE_RUNDIR:-${TMPDIR:-/tmp}/obx-scale-$(id -u)}
export SCALE_PG_PORT=${SCALE_PG_PORT:-54420}
export SCALE_MY_PORT=${SCALE_MY_PORT:-33420}
export SCALE_GALERA_PORT=${SCALE_GALERA_PORT:-45670}
export SCALE_SIZE=${SCALE_SIZE:-1}
# The throwaway single servers (tests/db.sh) of the pgbouncer and tenants runs.
export OBX_PG_PORT=$((SCALE_PG_PORT + 2)) OBX_MY_PORT=$SCALE_MY_PORT
export OBX_TEST_RUNDIR=$SCALE_RUNDIR/servers
export LSAN_OPTIONS=suppressions=$here/../lsan.supp
rundir=$SCALE_RUNDIR
mkdir -p "$rundir"
chmod 1777 "$rundir"
results=$rundir/results
: >"$results"
t_start=$(date +%s)

cleanup() {
    "$here/pgha.sh" stop >/dev/null 2>&1
    [ -x "$here/galera.sh" ] && "$here/galera.sh" stop >/dev/null 2>&1
    [ -x "$here/bouncer.sh" ] && "$here/bouncer.sh" stop >/dev/null 2>&1
    "$here/../db.sh" stop pg >/dev/null 2>&1
    "$here/../db.sh" stop mariadb >/dev/null 2>&1
}
trap cleanup EXIT

result() { # line: printed and kept
    echo "scale: $*" | tee -a "$results"
}
skip() { # what reason
    if [ "${CI:-}" = true ]; then result "$1 FAILED: SKIPPED under CI=true: $2"
    else result "$1 SKIPPED: $2"; fi
}

# A torture_crash run whose "torture:" lines become "scale:" lines.
crash() { # name args...
    local name=$1 out rc
    shift
    out=$rundir/$name
    rm -rf "$out" && mkdir -p "$out"
    "$bin/torture_crash" "$@" "$out" >"$out.out" 2>"$out.err"
    rc=$?
    if ! grep -q '^torture: ' "$out.out"; then
        result "$name FAILED: no result (exit status $rc; stderr in $out.err)"
        tail -n 5 "$out.err" >&2
        return
    fi
    sed -n "s/^torture: dbfault /$name: /p" "$out.out" | while read -r l; do result "$l"; done
    [ "$rc" -eq 0 ] || grep -q FAILED "$out.out" || result "$name FAILED: exit status $rc"
}

# ---- 1. PostgreSQL failover ------------------------------------------------------------
scenario_failover() {
    local mode hdr conn
    conn="Driver={PostgreSQL Unicode};Database=obx;Uid=postgres;Pwd=;pqopt={host=127.0.0.1,127.0.0.1 port=$SCALE_PG_PORT,$((SCALE_PG_PORT + 1)) target_session_attrs=read-write};"
    for run in sync/obx sync/ibx async/obx; do
        mode=${run%/*} hdr=${run#*/}
        if ! "$here/pgha.sh" start "$mode" >&2; then
            skip "failover-$mode-$hdr" "the primary and standby did not start"
            continue
        fi
        (
            # Async: acknowledged commits may be lost by the database: counted, not a failure.
            [ "$mode" = async ] && export TORTURE_ASYNC=1
            export TORTURE_FAULT_SCRIPT=$here/pgha.sh TORTURE_FAULTS=failover TORTURE_PRE_MS=$((3000 * SCALE_SIZE))
            crash "failover-$mode-$hdr" faults "$hdr" postgresql "$conn" "ScaleFo$hdr"
        )
        "$here/pgha.sh" stop >/dev/null 2>&1
    done
}

for s in $scenarios; do
    echo "== $s" >&2
    case $s in
    failover) scenario_failover ;;
    *) echo "scale: unknown scenario $s" >&2; exit 2 ;;
    esac
done

passed=$(grep -c -v -e FAILED -e SKIPPED "$results")
failed=$(grep -c FAILED "$results")
echo "scale: $passed passed, $failed failed ($(($(date +%s) - t_start)) s)"
[ "$failed" -eq 0 ]

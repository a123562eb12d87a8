#!/usr/bin/env bash
# tests/tsan.sh BINDIR: the threaded real-database tests under ThreadSanitizer
# (make check-tsan builds BINDIR/test_unit, test_outbox, test_inbox and test_multi with
# -fsanitize=thread). The threads they run: the lease renewer beside a
# dispatcher's handlers (with its faults), the wake listener, two
# dispatchers in one process, a provider's refresh under a renewing
# dispatcher. A race report fails its program (TSan's exit code 66).
#   OBX_TSAN_BACKENDS   default "sqlite postgresql" (mariadb may be added)
# Closes with "N passed, N failed" over every program and backend.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-build/tsan}
backends=${OBX_TSAN_BACKENDS:-sqlite postgresql}
rundir=${OBX_TEST_RUNDIR:-${TMPDIR:-/tmp}/obx-test-$(id -u)}
export OBX_TEST_RUNDIR=$rundir
export TSAN_OPTIONS="exitcode=66 halt_on_error=0 second_deadlock_stack=1 suppressions=$here/tsan.supp ${TSAN_OPTIONS:-}"
passed=0 failed=0 pg_started=0 my_started=0
cleanup() {
    [ "$pg_started" = 1 ] && "$here/db.sh" stop pg >/dev/null 2>&1
    [ "$my_started" = 1 ] && "$here/db.sh" stop mariadb >/dev/null 2>&1
}
trap cleanup EXIT

# The threaded tests of each program (TT_ONLY: any of the words).
only_unit="CORE-RANDOM-THREADS CORE-WAIT-FOREVER"
only_outbox="OBX-059 OBX-060 OBX-WAKE CORE-WAKE-SOCKET OBX-STOP-FINAL CORE-RENEW"
only_inbox="IBX-078"
only_multi="CORE-RENEW OBX-075 IBX-093"

run() { # name backend args...
    local name=$1 backend=$2 out rc; shift 2
    out=$(mktemp)
    "$@" > "$out" 2>&1
    rc=$?
    grep -E '^(PASS|FAIL) ' "$out"
    if [ "$rc" -eq 0 ] && grep -q -E '^[0-9]+ passed, 0 failed$' "$out"; then
        passed=$((passed + 1))
        echo "PASS TSAN-$name $backend no data race, no failed test"
    else
        failed=$((failed + 1))
        grep -E -A 30 'WARNING: ThreadSanitizer' "$out" | head -n 120
        echo "FAIL TSAN-$name $backend exit status $rc"
    fi
    rm -f "$out"
}

TT_ONLY=$only_unit run unit pure "$bin/test_unit"
for backend in $backends; do
    case $backend in
    sqlite)
        mkdir -p "$rundir/tsan" && rm -f "$rundir/tsan/"*.db*
        opts="JournalMode=WAL;SyncPragma=NORMAL;Timeout=5000;"
        c() { echo "Driver={SQLite3};Database=$rundir/tsan/$1.db;$opts"; }
        TT_ONLY=$only_outbox run outbox sqlite "$bin/test_outbox" sqlite "$(c core)"
        TT_ONLY=$only_inbox run inbox sqlite "$bin/test_inbox" sqlite "$(c core)"
        TT_ONLY=$only_multi run multi sqlite "$bin/test_multi" sqlite "$(c t1)" "$(c t2)" "$(c t3)"
        ;;
    postgresql)
        if "$here/db.sh" start pg >/dev/null; then
            pg_started=1
            eval "$("$here/db.sh" env pg)"
            pg_tests="${OBX_TEST_PG}ConnSettings=SET lock_timeout=60000;" # as tests/run.sh
            TT_ONLY=$only_outbox run outbox postgresql "$bin/test_outbox" postgresql "$pg_tests"
            TT_ONLY=$only_inbox run inbox postgresql "$bin/test_inbox" postgresql "$pg_tests"
            TT_ONLY=$only_multi run multi postgresql "$bin/test_multi" postgresql "$OBX_TEST_PG" "$OBX_TEST_PG2" "$OBX_TEST_PG3"
        else
            failed=$((failed + 1))
            echo "FAIL TSAN postgresql the throwaway server did not start"
        fi
        ;;
    mariadb)
        if "$here/db.sh" start mariadb >/dev/null; then
            my_started=1
            eval "$("$here/db.sh" env mariadb)"
            my_tests="${OBX_TEST_MY}INITSTMT={SET SESSION sql_mode=CONCAT(@@sql_mode, ',ANSI_QUOTES'), lock_wait_timeout=60};"
            TT_ONLY=$only_outbox run outbox mariadb "$bin/test_outbox" mariadb "$my_tests"
            TT_ONLY=$only_inbox run inbox mariadb "$bin/test_inbox" mariadb "$my_tests"
            TT_ONLY=$only_multi run multi mariadb "$bin/test_multi" mariadb "$OBX_TEST_MY" "$OBX_TEST_MY2" "$OBX_TEST_MY3"
        else
            failed=$((failed + 1))
            echo "FAIL TSAN mariadb the throwaway server did not start"
        fi
        ;;
    *) echo "tsan.sh: unknown backend $backend" >&2; exit 2 ;;
    esac
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

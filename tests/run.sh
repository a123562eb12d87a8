#!/usr/bin/env bash
# run.sh [BINDIR]: run every test program against every backend and close
# with one line "N passed, N failed" over all of them.
#   BINDIR            where the test programs are (default: build)
#   OBX_TEST_WRAP     command to run each program under (e.g. valgrind ...)
#   OBX_TEST_BACKENDS space-separated subset of "sqlite sqlite3 postgresql mariadb" (default
#                     all; sqlite3 is SQLite through its own C API: OBX_SQLITE3_API)
#   CI=true           a backend that cannot run is a failure, not a skip
# PostgreSQL and MariaDB run on throwaway servers (tests/db.sh), stopped on exit.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-build}
wrap=${OBX_TEST_WRAP:-}
backends=${OBX_TEST_BACKENDS:-sqlite sqlite3 postgresql mariadb}
rundir=${OBX_TEST_RUNDIR:-${TMPDIR:-/tmp}/obx-test-$(id -u)}
export OBX_TEST_RUNDIR=$rundir
log=$(mktemp)
pg_started=0
my_started=0
cleanup() {
    [ "$pg_started" = 1 ] && "$here/db.sh" stop pg >/dev/null 2>&1
    [ "$my_started" = 1 ] && "$here/db.sh" stop mariadb >/dev/null 2>&1
    rm -f "$log"
}
trap cleanup EXIT

# Run one program; a crash (no closing line) becomes a FAIL line of its own.
run() {
    local name=$1 backend=$2; shift 2
    local out; out=$(mktemp)
    # shellcheck disable=SC2086
    $wrap "$@" > "$out" 2>&1
    local rc=$?
    grep -v -E '^[0-9]+ (passed|skipped)' "$out" | tee -a "$log"
    if ! grep -q -E '^[0-9]+ passed, [0-9]+ failed$' "$out" || { [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; }; then
        echo "FAIL $name $backend the test program crashed or exited with status $rc" | tee -a "$log"
    fi
    rm -f "$out"
}

# obxctl against a backend (tests/obxctl.sh), and a DSN of the test's own
# odbc.ini instead of a connection string (tests/dsn.sh), where BINDIR has
# obxctl (make check-asan builds it with ASan too); not under OBX_TEST_WRAP
# (valgrind would run the scripts' shell, not the programs).
run_ctl() { # backend connection
    local sfx=
    [ "$1" = sqlite3 ] && sfx=_sqlite3 # obxctl_sqlite3, obxctl_fill_sqlite3: OBX_SQLITE3_API
    if [ -x "$bin/obxctl$sfx" ] && [ -x "$bin/obxctl_fill$sfx" ] && [ -x "$bin/prom_check" ] && [ -z "$wrap" ]; then
        run obxctl "$1" "$here/obxctl.sh" "$bin" "$1" "$2"
        run dsn "$1" "$here/dsn.sh" "$bin" "$1" "$2"
    fi
}

# The schema files through each database's own client (tests/sqlfiles.sh);
# not under OBX_TEST_WRAP, for the same reason.
run_sqlfiles() { # backend connection
    [ -z "$wrap" ] && run sqlfiles "$1" "$here/sqlfiles.sh" "$1" "$2" "$bin"
}

skip_or_fail() { # backend reason
    if [ "${CI:-}" = true ]; then
        echo "FAIL BACKEND $1 required under CI=true but unavailable: $2" | tee -a "$log"
    else
        echo "SKIPPED BACKEND $1 $2" | tee -a "$log"
    fi
}

# A program with its own checks and closing line, counted as one test.
run_one() {
    local name=$1 backend=$2 what=$3; shift 3
    local out; out=$(mktemp)
    # shellcheck disable=SC2086
    if $wrap "$@" > "$out" 2>&1; then
        echo "PASS $name $backend $what ($(tail -n 1 "$out"))" | tee -a "$log"
    else
        sed 's/^/    /' "$out" | tail -n 20
        echo "FAIL $name $backend $what" | tee -a "$log"
    fi
    rm -f "$out"
}

run_one FAKE-SELFTEST fake "the fake ODBC layer's own checks" "$bin/fake_selftest"
run unit pure,fake "$bin/test_unit"
run examples fake "$bin/example_protocols"
run test_sqlserver sqlserver-fake "$bin/test_sqlserver"
# No SQL Server runs here: every SQL Server batch and statement of both
# headers goes through sqlfluff's T-SQL parser. Two valid constructs its
# 1.4.5 grammar lacks are rewritten first: CREATE OR ALTER TRIGGER, and a
# table hint on a MERGE target.
if command -v sqlfluff >/dev/null 2>&1; then
    tsql=$(mktemp --suffix=.sql) parsed=""
    if "$bin/test_sqlserver" --tsql "$tsql" &&
        sed -i -e 's/CREATE OR ALTER TRIGGER/CREATE TRIGGER/' -e 's/^MERGE \(.*\) WITH (HOLDLOCK) AS t USING/MERGE \1 AS t USING/' "$tsql" &&
        parsed=$(sqlfluff parse --dialect tsql "$tsql" 2>&1); then
        echo "PASS MSSQL-TSQL-PARSE sqlfluff every schema batch and statement of the SQL Server dialect parses as T-SQL ($(grep -c '^GO$' "$tsql") batches)" | tee -a "$log"
    else
        printf '%s\n' "$parsed" | sed -n '/parsing violations/,$p' | head -n 20
        echo "FAIL MSSQL-TSQL-PARSE sqlfluff the SQL Server dialect's T-SQL does not parse" | tee -a "$log"
    fi
    rm -f "$tsql"
else
    skip_or_fail sqlfluff "sqlfluff is not installed (tests/deps.sh tsql)"
fi
run_one FUZZ-REPLAY pure "the fuzz corpus and built-in edge cases (tests/fuzz_core.c)" "$bin/fuzz_replay" "$here/fuzz/corpus"

for backend in $backends; do
    case $backend in
    sqlite)
        mkdir -p "$rundir/sqlite" && rm -f "$rundir/sqlite/"*.db*
        opts="JournalMode=WAL;SyncPragma=NORMAL;Timeout=5000;"
        conn="Driver={SQLite3};Database=$rundir/sqlite/core.db;$opts"
        run test_real sqlite "$bin/test_real" sqlite "$conn"
        run test_outbox sqlite "$bin/test_outbox" sqlite "$conn"
        run test_inbox sqlite "$bin/test_inbox" sqlite "$conn"
        run test_native sqlite "$bin/test_native" sqlite "Driver={SQLite3};Database=$rundir/sqlite/native.db;$opts"
        run test_multi sqlite "$bin/test_multi" sqlite "Driver={SQLite3};Database=$rundir/sqlite/t1.db;$opts" \
            "Driver={SQLite3};Database=$rundir/sqlite/t2.db;$opts" "Driver={SQLite3};Database=$rundir/sqlite/t3.db;$opts"
        run_ctl sqlite "Driver={SQLite3};Database=$rundir/sqlite/ctl.db;$opts"
        run_sqlfiles sqlite "$conn"
        ;;
    sqlite3)
        # The programs built with OBX_SQLITE3_API / IBX_SQLITE3_API: the
        # same connection strings, no driver manager or ODBC driver in the
        # library (the tests' own side connections may still be ODBC).
        mkdir -p "$rundir/sqlite3" && rm -f "$rundir/sqlite3/"*.db*
        opts="JournalMode=WAL;SyncPragma=NORMAL;Timeout=5000;"
        conn="Driver={SQLite3};Database=$rundir/sqlite3/core.db;$opts"
        run test_real sqlite3 "$bin/test_real_sqlite3" sqlite3 "$conn"
        run test_outbox sqlite3 "$bin/test_outbox_sqlite3" sqlite3 "$conn"
        run test_inbox sqlite3 "$bin/test_inbox_sqlite3" sqlite3 "$conn"
        run test_multi sqlite3 "$bin/test_multi_sqlite3" sqlite3 "Driver={SQLite3};Database=$rundir/sqlite3/t1.db;$opts" \
            "Driver={SQLite3};Database=$rundir/sqlite3/t2.db;$opts" "Driver={SQLite3};Database=$rundir/sqlite3/t3.db;$opts"
        run_ctl sqlite3 "Driver={SQLite3};Database=$rundir/sqlite3/ctl.db;$opts"
        run test_native sqlite3 "$bin/test_native_sqlite3" sqlite3 "Driver={SQLite3};Database=$rundir/sqlite3/native.db;$opts"
        [ -x "$bin/obxctl_sqlite3" ] && run_sqlfiles sqlite3 "$conn"
        ;;
    postgresql)
        if "$here/db.sh" start pg; then
            pg_started=1
            eval "$("$here/db.sh" env pg)"
            # As for MariaDB below: a test that fails holding a lock stalls
            # the next deploy for 60 s at most, not for ever.
            pg_tests="${OBX_TEST_PG}ConnSettings=SET lock_timeout=60000;"
            run test_real postgresql "$bin/test_real" postgresql "$pg_tests"
            run test_outbox postgresql "$bin/test_outbox" postgresql "$pg_tests"
            run test_inbox postgresql "$bin/test_inbox" postgresql "$pg_tests"
            run test_native postgresql "$bin/test_native" postgresql "$OBX_TEST_PG"
            run test_multi postgresql "$bin/test_multi" postgresql "$OBX_TEST_PG" "$OBX_TEST_PG2" "$OBX_TEST_PG3"
            run_ctl postgresql "$OBX_TEST_PG2"
            run_sqlfiles postgresql "$OBX_TEST_PG"
        else
            skip_or_fail postgresql "the throwaway server did not start (see above)"
        fi
        ;;
    mariadb)
        if "$here/db.sh" start mariadb; then
            my_started=1
            eval "$("$here/db.sh" env mariadb)"
            # The tests' own SQL quotes names the standard way; the library
            # itself needs no sql_mode. A test that fails while holding a
            # lock makes the next deploy wait for its metadata lock: 60 s,
            # then an error, instead of the server's default of a year.
            my_tests="${OBX_TEST_MY}INITSTMT={SET SESSION sql_mode=CONCAT(@@sql_mode, ',ANSI_QUOTES'), lock_wait_timeout=60};"
            run test_real mariadb "$bin/test_real" mariadb "$my_tests"
            run test_outbox mariadb "$bin/test_outbox" mariadb "$my_tests"
            run test_inbox mariadb "$bin/test_inbox" mariadb "$my_tests"
            run test_native mariadb "$bin/test_native" mariadb "$OBX_TEST_MY"
            run test_multi mariadb "$bin/test_multi" mariadb "$OBX_TEST_MY" "$OBX_TEST_MY2" "$OBX_TEST_MY3"
            run_ctl mariadb "$OBX_TEST_MY2"
            run_sqlfiles mariadb "$OBX_TEST_MY"
        else
            skip_or_fail mariadb "the throwaway server did not start (see above)"
        fi
        ;;
    *) echo "FAIL BACKEND $backend unknown backend name" | tee -a "$log" ;;
    esac
done

# Every requirement a test names is stated in docs/REQUIREMENTS.md.
missing=$(awk '/^(PASS|FAIL|N\/A) [A-Z]/ { print $2 }' "$log" | sort -u |
    while read -r id; do grep -q "^- \`$id\` " "$here/../docs/REQUIREMENTS.md" || printf '%s ' "$id"; done)
if [ -n "$missing" ]; then
    echo "FAIL DOC-REQUIREMENTS all tests name IDs docs/REQUIREMENTS.md does not state: $missing" | tee -a "$log"
else
    echo "PASS DOC-REQUIREMENTS all every ID the tests name is stated in docs/REQUIREMENTS.md" | tee -a "$log"
fi

passed=$(grep -c '^PASS ' "$log")
failed=$(grep -c '^FAIL ' "$log")
skipped=$(grep -c '^SKIPPED ' "$log")
[ "$skipped" -gt 0 ] && echo "$skipped SKIPPED (see the SKIPPED lines above)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]

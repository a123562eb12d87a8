#!/usr/bin/env bash
# dsn.sh BINDIR BACKEND CONNECTION: connect through a DSN instead of a
# connection string. An odbc.ini of the test's own (in a temp dir that
# ODBCINI and ODBCSYSINI point at, beside a copy of the system's
# odbcinst.ini) defines the DSN with the values of CONNECTION, the
# DSN-less string of the same database. Through "DSN=name;" the library
# deploys and fills a queue (obxctl_fill) and obxctl reads it (--dsn);
# without the file the same name is unknown (so the file is what served).
# Prints "PASS|FAIL DSN-<what> <backend> ..." and "N passed, N failed".
set -uo pipefail
bin=${1:?BINDIR}
backend=${2:?BACKEND}
conn=${3:?CONNECTION}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
result() { # ok ID what [log]
    if [ "$1" = 0 ]; then
        echo "PASS $2 $backend $3"
        passed=$((passed + 1))
    else
        [ -n "${4:-}" ] && sed 's/^/    /' "$4" | head -n 20
        echo "FAIL $2 $backend $3"
        failed=$((failed + 1))
    fi
}
key() { # the value of key $1 (any case) in the connection string
    tr ';' '\n' <<<"$conn" | sed -n "s/^$1=//Ip" | head -n 1
}

# Backend sqlite3 (obxctl_sqlite3, OBX_SQLITE3_API) has no driver manager to
# read an odbc.ini: --dsn, and a "DSN=" string, are refused, saying so.
if [ "$backend" = sqlite3 ]; then
    "$bin/obxctl_sqlite3" --dsn obx_test_dsn stats >/dev/null 2>"$work/err"
    rc=$?
    [ "$rc" = 1 ] && [ "$(wc -l <"$work/err")" = 1 ] && grep -q '^obxctl: --dsn: .*OBX_SQLITE3_API.* give -c' "$work/err"
    result $? DSN-SQLITE3-REFUSED "--dsn without a driver manager: exit 1, one line saying to give -c" "$work/err"
    "$bin/obxctl_sqlite3" -c "DSN=obx_test_dsn;" stats >/dev/null 2>"$work/err"
    rc=$?
    [ "$rc" = 2 ] && grep -q 'cannot open the store: .*Database=' "$work/err" && [ ! -e obx_test_dsn ]
    result $? DSN-SQLITE3-NO-FILE "a DSN= string without a driver manager: exit 2 naming Database=, no temporary database" "$work/err"
    echo "$passed passed, $failed failed"
    [ "$failed" = 0 ]
    exit
fi

driver=$(key Driver | tr -d '{}')
case $backend in
sqlite)
    section="Driver=$driver
Database=$(key Database)
Timeout=5000" ;;
postgresql) # psqlODBC's own odbc.ini key names
    section="Driver=$driver
Servername=$(key Server)
Port=$(key Port)
Database=$(key Database)
Username=$(key Uid)
Password=$(key Pwd)" ;;
mariadb)
    section="Driver=$driver
Server=$(key Server)
Port=$(key Port)
Database=$(key Database)
User=$(key Uid)
Password=$(key Pwd)
CHARSET=utf8mb4" ;;
*) echo "FAIL DSN $backend unknown backend"; echo "0 passed, 1 failed"; exit 1 ;;
esac
# ODBCSYSINI: a directory with the drivers (odbcinst.ini) and no DSNs;
# ODBCINI: the user odbc.ini, with the DSN.
sysini=$(odbcinst -j | sed -n 's/^DRIVERS[. ]*: //p')
mkdir -p "$work/sys"
cp "$sysini" "$work/sys/odbcinst.ini"
printf '[obx_test_dsn]\nDescription=obx.h test (%s)\n%s\n' "$backend" "$section" >"$work/odbc.ini"
: >"$work/empty.ini"
export ODBCSYSINI=$work/sys

# Under LeakSanitizer (make check-asan): full stacks, so that the
# suppression of sqliteodbc's DSN reader (tests/lsan.supp) can match.
[ -n "${LSAN_OPTIONS:-}" ] && export LSAN_OPTIONS="$LSAN_OPTIONS:fast_unwind_on_malloc=0"

table=DsnBox$$
ODBCINI=$work/odbc.ini "$bin/obxctl_fill" outbox "DSN=obx_test_dsn;" "$table" ctl "$work/m" \
    >"$work/log" 2>&1 &&
    ODBCINI=$work/odbc.ini "$bin/obxctl" --dsn obx_test_dsn --schema ctl --table "$table" stats --json \
        >"$work/out" 2>>"$work/log" && grep -q '"total":12}' "$work/out" && cat "$work/out" >>"$work/log"
result $? DSN-CONNECT "the library and obxctl connect through a DSN of the test's own odbc.ini" "$work/log"

# The same name without that file: not found, so the file was what served.
ODBCINI=$work/empty.ini "$bin/obxctl" --dsn obx_test_dsn stats >/dev/null 2>"$work/err"
rc=$?
[ "$rc" = 2 ] && grep -q 'IM002' "$work/err"
result $? DSN-UNKNOWN "an unknown DSN is exit 2 with the driver manager's IM002" "$work/err"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]

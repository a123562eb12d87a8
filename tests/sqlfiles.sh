#!/usr/bin/env bash
# tests/sqlfiles.sh BACKEND CONNECTION - the schema files as a DBA runs them:
# sql/<backend>/{outbox,inbox}.sql through the database's own command-line
# client (sqlite3, psql, mariadb) into a fresh database, twice (the second
# run must change nothing and fail nothing), then the objects checked.
# CONNECTION is the ODBC connection string of the test server (host, port,
# user, password are read from it; SQLite: its Database is replaced by a
# file of our own). Prints one PASS/FAIL line and the closing line run.sh
# counts. Backend sqlite3 (BINDIR given): the sqlite files, then the build on
# SQLite's C API (BINDIR/obxctl_sqlite3) takes the tables as they are: its
# deploy changes nothing, a message enqueued there is counted.
set -uo pipefail
cd "$(dirname "$0")/.."
backend=$1 conn=$2 bin=${3:-build}
files=$backend
[ "$backend" = sqlite3 ] && files=sqlite
key() { sed -n "s/.*[;{]$1=\([^;]*\);.*/\1/p; s/^$1=\([^;]*\);.*/\1/p" <<<"$conn" | head -n 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fresh=obx_sqlfiles

# run FILE: the client, stopping at the first error.
case $backend in
sqlite | sqlite3)
    run() { sqlite3 -bail "$work/f.db" <"$1"; }
    objects() { sqlite3 "$work/f.db" "SELECT type || ' ' || name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY 1;"; }
    ;;
postgresql)
    export PGHOST PGPORT PGUSER PGPASSWORD PGOPTIONS="-c client_min_messages=warning"
    PGHOST=$(key Server) PGPORT=$(key Port) PGUSER=$(key Uid) PGPASSWORD=$(key Pwd)
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $fresh" -c "CREATE DATABASE $fresh" >/dev/null || exit 1
    run() { psql -X -q -v ON_ERROR_STOP=1 -d "$fresh" -f "$1" >/dev/null; }
    objects() {
        psql -X -At -d "$fresh" -c "SELECT 'table ' || table_name FROM information_schema.tables WHERE table_schema IN ('dbo', 'infra')
            UNION ALL SELECT 'index ' || indexname FROM pg_indexes WHERE schemaname IN ('dbo', 'infra')
            UNION ALL SELECT 'trigger ' || tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname IN ('dbo', 'infra') AND NOT t.tgisinternal
            UNION ALL SELECT 'function ' || p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname IN ('dbo', 'infra') ORDER BY 1"
    }
    ;;
mariadb)
    my=(mariadb --batch --skip-column-names -h "$(key Server)" -P "$(key Port)" -u "$(key Uid)" "-p$(key Pwd)")
    "${my[@]}" -e "DROP DATABASE IF EXISTS $fresh; CREATE DATABASE $fresh" || exit 1
    run() { "${my[@]}" "$fresh" <"$1"; }
    objects() {
        "${my[@]}" "$fresh" -e "SELECT CONCAT('table ', table_name) FROM information_schema.tables WHERE table_schema = '$fresh'
            UNION ALL SELECT DISTINCT CONCAT('index ', table_name, '.', index_name) FROM information_schema.statistics WHERE table_schema = '$fresh'
            UNION ALL SELECT CONCAT('trigger ', trigger_name) FROM information_schema.triggers WHERE trigger_schema = '$fresh' ORDER BY 1"
    }
    ;;
*)
    echo "usage: ${0##*/} sqlite|sqlite3|postgresql|mariadb CONNECTION [BINDIR]" >&2
    exit 2
    ;;
esac

fail() {
    echo "FAIL CORE-SQL-FILES $backend sql/$files/{outbox,inbox}.sql run in the database's own client: $1"
    echo "0 passed, 1 failed"
    exit 1
}
for f in outbox inbox; do
    run "sql/$files/$f.sql" >"$work/out" 2>&1 || fail "first run of $f.sql: $(head -c 400 "$work/out")"
done
objects >"$work/first" 2>&1 || fail "reading the catalog: $(head -c 400 "$work/first")"
for f in outbox inbox; do
    run "sql/$files/$f.sql" >"$work/out" 2>&1 || fail "second run of $f.sql: $(head -c 400 "$work/out")"
done
objects >"$work/second" 2>&1 || fail "reading the catalog again"
cmp -s "$work/first" "$work/second" || fail "the second run changed the objects: $(diff "$work/first" "$work/second" | head -c 400)"
# What must be there whatever else is: both message tables, and the join
# triggers on the databases that have them (a client that split a trigger's
# body at its inner ';' would have failed above or left it out here).
want="table.*Outbox$ table.*Inbox$"
case $backend in
sqlite | sqlite3 | mariadb) want="$want trigger.*JoinStep trigger.*JoinCount" ;;
postgresql) want="$want trigger.*JoinStep function.*" ;;
esac
for w in $want; do
    grep -q "$w" "$work/first" || fail "no object matching '$w' after the run (have: $(tr '\n' ' ' <"$work/first" | head -c 400))"
done
if [ "$backend" = sqlite3 ]; then
    ctl=("$bin/obxctl_sqlite3" -c "$work/f.db")
    { "${ctl[@]}" deploy && "${ctl[@]}" --inbox deploy; } >"$work/out" 2>&1 || fail "the sqlite3 build's deploy: $(head -c 400 "$work/out")"
    objects >"$work/third" 2>&1 && cmp -s "$work/first" "$work/third" ||
        fail "the sqlite3 build's deploy changed the objects: $(diff "$work/first" "$work/third" | head -c 400)"
    "${ctl[@]}" enqueue --topic t.files --payload '{}' >"$work/out" 2>&1 && "${ctl[@]}" stats --json >>"$work/out" 2>&1 &&
        grep -q '"total":1}' "$work/out" || fail "an enqueue through the sqlite3 build: $(head -c 400 "$work/out")"
    echo "PASS CORE-SQL-FILES-SQLITE3 $backend the tables of sql/sqlite/*.sql are the sqlite3 build's: its deploy changes nothing, an enqueue there is counted"
    echo "1 passed, 0 failed"
    exit 0
fi
echo "PASS CORE-SQL-FILES $backend sql/$files/{outbox,inbox}.sql run twice in the database's own client, the second run a no-op ($(wc -l <"$work/first") objects)"
echo "1 passed, 0 failed"

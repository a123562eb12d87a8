#!/usr/bin/env bash
# tests/layout_probe.sh hot|upgrade [sqlite] [pg] [mariadb] - storage layout 2
# (issue 30 ask 1): today's outbox table beside candidate layouts under the
# library's hot statements, and the in-place upgrade to the chosen one.
# Not a test: prints the tables of docs/design/LAYOUT2.md (see
# tests/layout_probe.py for what is measured and how).
#   LAYOUT_ROWS     finished rows already in the table (default 20000)
#   LAYOUT_MSGS     messages per workload (default 2000)
#   LAYOUT_REPEATS  interleaved rounds, medians shown (default 1)
#   LAYOUT_ONLY     candidate name prefixes, comma-separated (default all)
# Uses the throw-away servers of tests/db.sh (OBX_PG_PORT, OBX_MY_PORT,
# OBX_TEST_RUNDIR; started here, stopped after).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mode=${1:-hot}
shift || true
backends=${*:-sqlite pg mariadb}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
started=()
for b in $backends; do
    case $b in
    pg) "$here/db.sh" start pg >/dev/null; started+=(pg) ;;
    mariadb) "$here/db.sh" start mariadb >/dev/null; started+=(mariadb) ;;
    sqlite) ;;
    *) echo "unknown backend $b" >&2; exit 2 ;;
    esac
done
stop() { for s in "${started[@]}"; do "$here/db.sh" stop "$s" >/dev/null || true; done; rm -rf "$work"; }
trap stop EXIT
PGPORT=${OBX_PG_PORT:-25329} MYPORT=${OBX_MY_PORT:-23069} LAYOUT_SQLITE=$work LAYOUT_RUNDIR=${OBX_TEST_RUNDIR:-${TMPDIR:-/tmp}/obx-test-$(id -u)} \
    python3 "$here/layout_probe.py" "$mode" $backends

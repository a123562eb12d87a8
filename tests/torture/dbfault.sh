#!/usr/bin/env bash
# tests/torture/dbfault.sh BACKEND FAULT - do one database fault to the
# throwaway server of tests/db.sh (same OBX_TEST_RUNDIR and ports) and print
# the time the server accepts connections again, in microseconds since the
# epoch, as the last line of stdout. Called by torture_crash's "faults" mode.
#
#   postgresql restart    pg_ctl restart -m immediate (a crash, then recovery)
#   postgresql terminate  pg_terminate_backend() of every client session
#   postgresql freeze     SIGSTOP of the server's processes for TORTURE_FREEZE_S
#                         (default 6) seconds, then SIGCONT
#   mariadb restart       kill -9 of mariadbd, then start it again on its data dir
#   mariadb terminate     KILL CONNECTION of every session of the test user
#   mariadb freeze        SIGSTOP of mariadbd, then SIGCONT
set -euo pipefail
backend=$1 fault=$2
# Client settings from the caller's environment must not redirect our clients.
for v in "${!PG@}" "${!MYSQL@}" "${!MARIADB@}"; do unset "$v"; done
RUNDIR=${OBX_TEST_RUNDIR:?OBX_TEST_RUNDIR must be set (tests/db.sh run dir)}
PG_PORT=${OBX_PG_PORT:-25329}
MY_PORT=${OBX_MY_PORT:-23069}
freeze_s=${TORTURE_FREEZE_S:-6}

now_us() { date +%s%6N; }
shq() { local a out=""; for a in "$@"; do out+="'${a//\'/\'\\\'\'}' "; done; printf '%s' "$out"; }
as_user() { # user cmd...: the servers run as their service users when we are root
    local u=$1; shift
    if [ "$(id -u)" -eq 0 ]; then
        su "$u" -s /bin/sh -c "cd $(shq "$RUNDIR") && exec $(shq "$@")"
    else
        (cd "$RUNDIR" && "$@")
    fi
}
pgbin() {
    local d="" dirs=(/usr/lib/postgresql/*/bin)
    [ -d "${dirs[0]}" ] && d=$(printf '%s\n' "${dirs[@]}" | sort -V | tail -n 1)
    [ -n "$d" ] && [ -x "$d/pg_ctl" ] || d=$(dirname "$(command -v pg_ctl)")
    echo "$d"
}
# Direct children of a pid (the server's worker processes), by parent pid.
children() { ps -o pid= --ppid "$1" 2>/dev/null | tr -d ' '; }
my_bin() { PATH=$PATH:/usr/sbin:/usr/libexec command -v "$1"; }
my_sql() {
    "$(my_bin mariadb)" --no-defaults --protocol=tcp -h 127.0.0.1 -P "$MY_PORT" -u root \
        --connect-timeout=2 -N -e "$1"
}

case $backend/$fault in
postgresql/restart)
    bin=$(pgbin)
    as_user postgres "$bin/pg_ctl" -D "$RUNDIR/pg" -l "$RUNDIR/pg.log" -m immediate -w -t 60 restart >/dev/null
    until "$bin/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -t 1; do sleep 0.02; done
    now_us
    ;;
postgresql/terminate)
    bin=$(pgbin)
    "$bin/psql" -X -q -t -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -c \
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname LIKE 'obx%' AND pid <> pg_backend_pid()" >&2
    now_us
    ;;
postgresql/freeze)
    pid=$(head -n 1 "$RUNDIR/pg/postmaster.pid")
    pids="$pid $(children "$pid")"
    # shellcheck disable=SC2086
    kill -STOP $pids
    sleep "$freeze_s"
    # shellcheck disable=SC2086
    kill -CONT $pids
    now_us
    ;;
mariadb/restart)
    # A server that is already down (it crashed, or was shut down: no pid
    # file) is started again all the same; the fault is then only the start.
    pid=$(head -n 1 "$RUNDIR/my.pid" 2>/dev/null || true)
    if [ -n "$pid" ]; then
        kill -KILL "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.02; done
    fi
    user_opt=""
    mkdir -p "$RUNDIR/my.tmp"
    [ "$(id -u)" -eq 0 ] && user_opt=--user=mysql && chown mysql: "$RUNDIR/my.tmp"
    # The command line of tests/db.sh's start, on the same data dir and tmpdir.
    (cd "$RUNDIR" && exec nohup "$(my_bin mariadbd)" --no-defaults $user_opt --datadir="$RUNDIR/my" --tmpdir="$RUNDIR/my.tmp" \
        --bind-address=127.0.0.1 --port="$MY_PORT" --socket="$RUNDIR/my.sock" --pid-file="$RUNDIR/my.pid" \
        --log-error="$RUNDIR/my.err" --skip-name-resolve --max-allowed-packet=64M \
        --innodb-lock-wait-timeout=5 --character-set-server=utf8mb4 \
        --collation-server=utf8mb4_unicode_ci) </dev/null >>"$RUNDIR/my.err" 2>&1 &
    end=$(( $(date +%s) + 60 ))
    until my_sql "select 1" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$end" ] || { echo "mariadb did not come back" >&2; exit 1; }
        sleep 0.02
    done
    now_us
    ;;
mariadb/terminate)
    for id in $(my_sql "SELECT id FROM information_schema.processlist WHERE user = 'obx'"); do
        my_sql "KILL CONNECTION $id" 2>/dev/null || true
    done
    now_us
    ;;
mariadb/freeze)
    pid=$(head -n 1 "$RUNDIR/my.pid")
    kill -STOP "$pid"
    sleep "$freeze_s"
    kill -CONT "$pid"
    now_us
    ;;
*) echo "usage: ${0##*/} postgresql|mariadb restart|terminate|freeze" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# tests/scale/pgha.sh - a throwaway PostgreSQL primary with a streaming standby.
#
#   pgha.sh start sync|async   primary on SCALE_PG_PORT (25420), standby on
#                              SCALE_PG_PORT+1; sync: the primary's commits wait
#                              for the standby (synchronous_standby_names)
#   pgha.sh failover           kill -9 the primary, promote the standby; prints
#                              the time the new primary accepts writes (us since
#                              the epoch) as the last line (a fault script of
#                              torture_crash's "faults" mode)
#   pgha.sh conn               the multi-host ODBC connection string of both
#   pgha.sh stop               stop both and remove their data
#
# Everything lives in $SCALE_RUNDIR/pgha (logs a.log and b.log are kept).
# As root the servers run as the user postgres.
set -euo pipefail
for v in "${!PG@}"; do unset "$v"; done
RUNDIR=${SCALE_RUNDIR:-${TMPDIR:-/tmp}/obx-scale-$(id -u)}/pgha
P1=${SCALE_PG_PORT:-25420}
P2=$((P1 + 1))

die() { echo "pgha: $*" >&2; exit 1; }
now_us() { date +%s%6N; }
shq() { local a out=""; for a in "$@"; do out+="'${a//\'/\'\\\'\'}' "; done; printf '%s' "$out"; }
as_pg() {
    if [ "$(id -u)" -eq 0 ]; then su postgres -s /bin/sh -c "cd $(shq "$RUNDIR") && exec $(shq "$@")"
    else (cd "$RUNDIR" && "$@"); fi
}
bin=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
[ -x "$bin/pg_ctl" ] || die "PostgreSQL server binaries not found (tests/deps.sh pg)"
psql_at() { "$bin/psql" -X -q -t -A -h 127.0.0.1 -p "$1" -U postgres -d postgres -c "$2"; }

stop_one() { # dir
    local d=$RUNDIR/$1 pid
    [ -f "$d/postmaster.pid" ] || return 0
    pid=$(head -n 1 "$d/postmaster.pid")
    as_pg "$bin/pg_ctl" -D "$d" -m immediate -w -t 20 stop >/dev/null 2>&1 || kill -9 "$pid" 2>/dev/null || true
}

[ "${1:-}" = postgresql ] && shift # called as a fault script: "postgresql failover"
case ${1:-} in
start)
    mode=${2:-sync}
    "$0" stop >/dev/null 2>&1 || true
    mkdir -p "$RUNDIR" && chmod 1777 "$RUNDIR" "$(dirname "$RUNDIR")"
    as_pg "$bin/initdb" -D "$RUNDIR/a" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 -N \
        >"$RUNDIR/init.log" 2>&1 || die "initdb failed (see $RUNDIR/init.log)"
    cat >>"$RUNDIR/a/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $P1
unix_socket_directories = '$RUNDIR'
max_connections = 100
deadlock_timeout = '200ms'
wal_level = replica
max_wal_senders = 4
wal_keep_size = '256MB'
EOF
    as_pg "$bin/pg_ctl" -D "$RUNDIR/a" -l "$RUNDIR/a.log" -w -t 30 start >/dev/null ||
        die "primary did not start (see $RUNDIR/a.log)"
    psql_at "$P1" "create database obx" >/dev/null
    # The standby: a base backup with primary_conninfo and standby.signal (-R).
    as_pg "$bin/pg_basebackup" -h 127.0.0.1 -p "$P1" -U postgres -D "$RUNDIR/b" -R -X stream -c fast \
        >>"$RUNDIR/init.log" 2>&1 || die "pg_basebackup failed (see $RUNDIR/init.log)"
    sed -i "s/^port = $P1/port = $P2/" "$RUNDIR/b/postgresql.conf"
    as_pg "$bin/pg_ctl" -D "$RUNDIR/b" -l "$RUNDIR/b.log" -w -t 30 start >/dev/null ||
        die "standby did not start (see $RUNDIR/b.log)"
    for _ in $(seq 100); do
        st=$(psql_at "$P1" "select sync_state from pg_stat_replication" || true)
        [ -n "$st" ] && break
        sleep 0.1
    done
    [ -n "$st" ] || die "the standby does not stream"
    # Synchronous only now: with no standby yet, every commit would wait.
    if [ "$mode" = sync ]; then
        psql_at "$P1" "alter system set synchronous_standby_names = '*'" >/dev/null
        psql_at "$P1" "select pg_reload_conf()" >/dev/null
        for _ in $(seq 100); do
            st=$(psql_at "$P1" "select sync_state from pg_stat_replication")
            [ "$st" = sync ] && break
            sleep 0.1
        done
    fi
    echo "pgha: primary 127.0.0.1:$P1, standby 127.0.0.1:$P2 streaming ($st)"
    ;;
failover)
    pid=$(head -n 1 "$RUNDIR/a/postmaster.pid")
    kill -9 "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.02; done
    # The children of a killed postmaster end on their own; wait for them so
    # that no session of the old primary answers once the standby is promoted.
    while pgrep -f -- "-D $RUNDIR/a" >/dev/null 2>&1 || [ -n "$(ps -o pid= --ppid "$pid" 2>/dev/null)" ]; do sleep 0.02; done
    as_pg "$bin/pg_ctl" -D "$RUNDIR/b" -w -t 30 promote >/dev/null
    until [ "$(psql_at "$P2" "select pg_is_in_recovery()" 2>/dev/null)" = f ]; do sleep 0.02; done
    now_us
    ;;
conn)
    echo "Driver={PostgreSQL Unicode};Server=127.0.0.1,127.0.0.1;Port=$P1,$P2;Database=obx;Uid=postgres;Pwd=;pqopt={target_session_attrs=read-write};"
    ;;
stop)
    stop_one a
    stop_one b
    rm -rf "$RUNDIR/a" "$RUNDIR/b"
    ;;
*) echo "usage: ${0##*/} start sync|async | failover | conn | stop" >&2; exit 2 ;;
esac

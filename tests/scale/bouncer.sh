#!/usr/bin/env bash
# tests/scale/bouncer.sh start|stop - PgBouncer in transaction pooling mode on
# 127.0.0.1:$SCALE_PG_PORT+3 in front of tests/db.sh's PostgreSQL
# ($OBX_PG_PORT, databases obx, obx2, obx3). Files in $SCALE_RUNDIR/bouncer.
# As root it runs as the user postgres (PgBouncer refuses to run as root).
set -euo pipefail
RUNDIR=${SCALE_RUNDIR:-${TMPDIR:-/tmp}/obx-scale-$(id -u)}/bouncer
PORT=$((${SCALE_PG_PORT:-25420} + 3))
PG_PORT=${OBX_PG_PORT:-}
POOL=${SCALE_BOUNCER_POOL:-10}
shq() { local a out=""; for a in "$@"; do out+="'${a//\'/\'\\\'\'}' "; done; printf '%s' "$out"; }
as_pg() {
    if [ "$(id -u)" -eq 0 ]; then su postgres -s /bin/sh -c "cd $(shq "$RUNDIR") && exec $(shq "$@")"
    else (cd "$RUNDIR" && "$@"); fi
}
stop() {
    local pid
    [ -f "$RUNDIR/pgbouncer.pid" ] || return 0
    pid=$(cat "$RUNDIR/pgbouncer.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$RUNDIR/pgbouncer.pid"
}
case ${1:-} in
start)
    [ -n "$PG_PORT" ] || { echo "bouncer: set OBX_PG_PORT (the PostgreSQL behind the pooler)" >&2; exit 2; }
    command -v pgbouncer >/dev/null || PATH=$PATH:/usr/sbin
    command -v pgbouncer >/dev/null || { echo "bouncer: pgbouncer not installed (tests/deps.sh scale)" >&2; exit 1; }
    stop
    mkdir -p "$RUNDIR" && chmod 1777 "$RUNDIR"
    echo '"postgres" ""' >"$RUNDIR/users.txt"
    cat >"$RUNDIR/pgbouncer.ini" <<EOF
[databases]
obx = host=127.0.0.1 port=$PG_PORT dbname=obx
obx2 = host=127.0.0.1 port=$PG_PORT dbname=obx2
obx3 = host=127.0.0.1 port=$PG_PORT dbname=obx3
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
unix_socket_dir =
auth_type = trust
auth_file = $RUNDIR/users.txt
pool_mode = transaction
default_pool_size = $POOL
max_client_conn = 500
ignore_startup_parameters = extra_float_digits
logfile = $RUNDIR/pgbouncer.log
pidfile = $RUNDIR/pgbouncer.pid
EOF
    chmod 644 "$RUNDIR"/*.ini "$RUNDIR/users.txt"
    as_pg pgbouncer -d "$RUNDIR/pgbouncer.ini" || { tail -n 20 "$RUNDIR/pgbouncer.log" >&2; exit 1; }
    for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.05; done
    echo "bouncer: pgbouncer (transaction pooling, pool $POOL) on 127.0.0.1:$PORT -> $PG_PORT"
    ;;
stop) stop ;;
conn) # db
    echo "Driver={PostgreSQL Unicode};Server=127.0.0.1;Port=$PORT;Database=${2:-obx};Uid=postgres;Pwd=;CommLog=0;Debug=0;"
    ;;
*) echo "usage: ${0##*/} start|stop|conn [db]" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# tests/scale/galera.sh - a throwaway 3-node MariaDB Galera cluster on 127.0.0.1.
#
#   galera.sh start      nodes 1..3 (node 1 bootstraps, 2 and 3 join by rsync SST)
#   galera.sh kill K     kill -9 node K
#   galera.sh rejoin K   start node K again on its data dir (IST), wait until Synced
#   galera.sh conn K     the ODBC connection string of node K
#   galera.sh stop       stop every node and remove the data
#
# Node K: SQL port SCALE_MY_PORT+K (23421..), group port SCALE_GALERA_PORT+K-1
# (24670..), SST SCALE_GALERA_PORT+4+K (24675..), IST SCALE_GALERA_PORT+9+K
# (24680..). Files in $SCALE_RUNDIR/galera (logs nK.err are kept), temporary
# files too (tmp/: the servers' --tmpdir and TMPDIR of all this starts, the
# SST scripts included), none directly in the system temp dir.
set -euo pipefail
RUNDIR=${SCALE_RUNDIR:-${TMPDIR:-/tmp}/obx-scale-$(id -u)}/galera
export TMPDIR=$RUNDIR/tmp
MY=${SCALE_MY_PORT:-23420}
GP=${SCALE_GALERA_PORT:-24670}
PATH=$PATH:/usr/sbin:/usr/libexec
die() { echo "galera: $*" >&2; exit 1; }
provider=$(ls /usr/lib/galera/libgalera_smm.so /usr/lib/libgalera_smm.so 2>/dev/null | head -n 1 || true)
user_opt=()
[ "$(id -u)" -eq 0 ] && user_opt=(--user=mysql)
cluster="gcomm://127.0.0.1:$GP,127.0.0.1:$((GP + 1)),127.0.0.1:$((GP + 2))"

port() { echo $((MY + $1)); }
sql() { # node sql...
    mariadb --no-defaults --protocol=tcp -h 127.0.0.1 -P "$(port "$1")" -u root --connect-timeout=2 -N -e "$2"
}
state() { sql "$1" "SHOW STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | awk '{print $2}'; }

run_node() { # K [extra args]
    local k=$1 d=$RUNDIR/n$1
    shift
    (cd "$RUNDIR" && exec nohup mariadbd --no-defaults "${user_opt[@]}" --datadir="$d" --tmpdir="$TMPDIR" \
        --bind-address=127.0.0.1 --port="$(port "$k")" --socket="$RUNDIR/n$k.sock" --pid-file="$RUNDIR/n$k.pid" \
        --log-error="$RUNDIR/n$k.err" --skip-name-resolve --character-set-server=utf8mb4 \
        --collation-server=utf8mb4_unicode_ci --innodb-lock-wait-timeout=5 --innodb-buffer-pool-size=64M \
        --binlog-format=ROW --default-storage-engine=InnoDB --innodb-autoinc-lock-mode=2 \
        --innodb-flush-log-at-trx-commit=2 --log-bin-trust-function-creators=1 \
        --wsrep-on=ON --wsrep-provider="$provider" --wsrep-cluster-name=obxscale --wsrep-node-name="n$k" \
        --wsrep-cluster-address="$cluster" --wsrep-node-address="127.0.0.1:$((GP + k - 1))" \
        --wsrep-provider-options="gmcast.listen_addr=tcp://127.0.0.1:$((GP + k - 1));ist.recv_addr=127.0.0.1:$((GP + 9 + k));gcache.size=256M" \
        --wsrep-sst-method=rsync --wsrep-sst-receive-address="127.0.0.1:$((GP + 4 + k))" "$@") \
        </dev/null >>"$RUNDIR/n$k.err" 2>&1 &
}

wait_synced() { # K seconds: 0 when Synced, 1 when the node died or the time is up
    local end=$(($(date +%s) + $2)) pid
    sleep 0.5
    until [ "$(state "$1")" = Synced ]; do
        pid=$(cat "$RUNDIR/n$1.pid" 2>/dev/null || true)
        if [ "$(date +%s)" -ge "$end" ] || { [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; }; then
            tail -n 5 "$RUNDIR/n$1.err" >&2
            return 1
        fi
        sleep 0.2
    done
}

# Start node K until it is Synced, retrying: a node that loses its group's
# first handshake, or a port still held for a moment, fails to come up.
up() { # K [extra args]
    local k=$1 try
    for try in 1 2 3; do
        stop_node "$k"
        run_node "$@"
        wait_synced "$k" 120 && return 0
        echo "galera: node $k did not come up (try $try)" >&2
        sleep 1
    done
    die "node $k not Synced"
}

stop_node() {
    local pid
    [ -f "$RUNDIR/n$1.pid" ] || return 0
    pid=$(cat "$RUNDIR/n$1.pid")
    kill -9 "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    rm -f "$RUNDIR/n$1.pid" "$RUNDIR/n$1.sock"
}

case ${1:-} in
start)
    [ -n "$provider" ] || die "the Galera provider is not installed (tests/deps.sh scale)"
    command -v rsync >/dev/null || die "rsync is not installed (tests/deps.sh scale)"
    "$0" stop >/dev/null 2>&1 || true
    mkdir -p "$TMPDIR" && chmod 1777 "$TMPDIR" "$RUNDIR" "$(dirname "$RUNDIR")"
    for k in 1 2 3; do
        mariadb-install-db --no-defaults "${user_opt[@]}" --datadir="$RUNDIR/n$k" \
            --auth-root-authentication-method=normal --skip-test-db --skip-name-resolve >"$RUNDIR/install-n$k.log" 2>&1 ||
            die "mariadb-install-db failed (see $RUNDIR/install-n$k.log)"
    done
    up 1 --wsrep-new-cluster
    sql 1 "create database obx;
        create user 'obx'@'127.0.0.1' identified by 'obxpw';
        grant all on \`obx%\`.* to 'obx'@'127.0.0.1';
        grant process on *.* to 'obx'@'127.0.0.1';"
    up 2
    up 3
    echo "galera: 3 nodes Synced (cluster size $(sql 1 "SHOW STATUS LIKE 'wsrep_cluster_size'" | awk '{print $2}')) on 127.0.0.1:$(port 1)-$(port 3)"
    ;;
kill) stop_node "$2" ;;
rejoin) up "$2" ;;
conn) echo "Driver={MariaDB Unicode};Server=127.0.0.1;Port=$(port "$2");Database=obx;Uid=obx;Pwd=obxpw;CHARSET=utf8mb4;" ;;
stop)
    for k in 1 2 3; do stop_node "$k"; done
    rm -rf "$RUNDIR"/n[123] "$TMPDIR"
    ;;
*) echo "usage: ${0##*/} start | kill K | rejoin K | conn K | stop" >&2; exit 2 ;;
esac

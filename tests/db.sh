#!/usr/bin/env bash
# tests/db.sh start|stop|env pg|mariadb - throw-away database servers for the tests.
#
#   tests/db.sh start pg        fresh PostgreSQL on 127.0.0.1:${OBX_PG_PORT:-25329}
#   tests/db.sh start mariadb   fresh MariaDB    on 127.0.0.1:${OBX_MY_PORT:-23069}
#   tests/db.sh stop  pg|mariadb
#   eval "$(tests/db.sh env pg)"    exports OBX_TEST_PG, OBX_TEST_PG2, OBX_TEST_PG3
#   eval "$(tests/db.sh env mariadb)"  exports OBX_TEST_MY, OBX_TEST_MY2, OBX_TEST_MY3
#
# Both servers get the databases obx, obx2 and obx3. PostgreSQL: user postgres,
# trust auth, UTF8, locale C.UTF-8. MariaDB: user obx / password obxpw with all
# privileges on `obx%`.* plus PROCESS and CONNECTION ADMIN.
#
# Everything lives in the run dir: $OBX_TEST_RUNDIR, or else
# ${TMPDIR:-/tmp}/obx-test-<uid>. It holds the data dirs (pg/, my/), the
# sockets, and the logs (pg.log, pg-init.log, my.err, my-init.log), which are
# kept after stop. "start" always begins from scratch: a server left over from
# an earlier run in the same run dir is stopped and its data dir is wiped.
# "stop" stops the server and removes its data dir, and succeeds if nothing runs.
#
# As root the servers run as the users postgres and mysql (the Debian packages
# create them; see tests/deps.sh pg mariadb). Otherwise they run as the
# current user. They never use the distro services or ports 5432/3306. Every
# default port of the test scripts lies below 32768, outside Linux's ephemeral
# range: a client socket of this machine once held 54424 and a server failed to bind.
set -euo pipefail

usage() {
    echo "usage: ${0##*/} start|stop|env pg|mariadb" >&2
    exit 2
}

[[ $# -eq 2 ]] || usage
action=$1
case $2 in
    pg|postgres|postgresql) kind=pg ;;
    mariadb|mysql|my)       kind=mariadb ;;
    *) usage ;;
esac
case $action in start|stop|env) ;; *) usage ;; esac

# Client settings from the caller's environment must not redirect our clients.
for v in "${!PG@}" "${!MYSQL@}" "${!MARIADB@}"; do unset "$v"; done

PG_PORT=${OBX_PG_PORT:-25329}
MY_PORT=${OBX_MY_PORT:-23069}
for p in "$PG_PORT" "$MY_PORT"; do
    if ! [[ $p =~ ^[0-9]{1,5}$ ]] || ((10#$p < 1 || 10#$p > 65535)); then
        echo "db: bad port '$p' (OBX_PG_PORT / OBX_MY_PORT)" >&2
        exit 2
    fi
done
PG_PORT=$((10#$PG_PORT))
MY_PORT=$((10#$MY_PORT))

# ---- env: print the connection strings (no server needed) --------------------
if [[ $action == env ]]; then
    if [[ $kind == pg ]]; then
        for i in "" 2 3; do
            printf "export OBX_TEST_PG%s='Driver={PostgreSQL Unicode};Server=127.0.0.1;Port=%s;Database=obx%s;Uid=postgres;Pwd=;CommLog=0;Debug=0;'\n" \
                "$i" "$PG_PORT" "$i"
        done
    else
        for i in "" 2 3; do
            printf "export OBX_TEST_MY%s='Driver={MariaDB Unicode};Server=127.0.0.1;Port=%s;Database=obx%s;Uid=obx;Pwd=obxpw;CHARSET=utf8mb4;'\n" \
                "$i" "$MY_PORT" "$i"
        done
    fi
    exit 0
fi

# ---- common helpers -----------------------------------------------------------
RUNDIR=${OBX_TEST_RUNDIR:-${TMPDIR:-/tmp}/obx-test-$(id -u)}
[[ $RUNDIR == /* ]] || RUNDIR=$PWD/$RUNDIR
RUNDIR=${RUNDIR%/}

is_root() { [[ $(id -u) -eq 0 ]]; }

die() { echo "db: $*" >&2; exit 1; }

# Milliseconds since the epoch.
now_ms() {
    local t=${EPOCHREALTIME:-}
    if [[ -n $t ]]; then
        t=${t/[.,]/}
        echo $((10#$t / 1000))
    else
        date +%s%3N
    fi
}

# "1234" (ms) -> "1.2"
fmt_s() {
    local tenths=$((($1 + 50) / 100))
    printf '%d.%d' $((tenths / 10)) $((tenths % 10))
}

# Quote arguments for /bin/sh -c.
shq() {
    local s out=""
    for s in "$@"; do
        out+="'${s//\'/\'\\\'\'}' "
    done
    printf '%s' "$out"
}

# Run a command as a service user when root, as ourselves otherwise. The
# working dir is the run dir (initdb fails in a cwd that it cannot read).
run_as() {
    local user=$1
    shift
    if is_root; then
        su "$user" -s /bin/sh -c "cd $(shq "$RUNDIR") && exec $(shq "$@")"
    else
        (cd "$RUNDIR" && exec "$@")
    fi
}

# True if something accepts TCP connections on 127.0.0.1:$1.
port_busy() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

port_owner() {
    if command -v ss >/dev/null 2>&1; then
        ss -Hltnp "sport = :$1" 2>/dev/null | sed -n 's/.*users:(\(.*\))$/\1/p' | head -n 1
    fi
}

# True if pid $1 is alive and its command name matches the pattern $2.
pid_is() {
    local comm
    [[ $1 =~ ^[0-9]+$ ]] || return 1
    alive "$1" || return 1
    comm=$(cat "/proc/$1/comm" 2>/dev/null) || return 1
    # shellcheck disable=SC2053  # $2 is a glob pattern on purpose
    [[ $comm == $2 ]]
}

# True if pid $1 runs. A zombie counts as gone: kill -0 succeeds on zombies,
# and a daemon's parent (PID 1 in a container) may reap it only much later.
alive() {
    local stat
    { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != [ZX] ]]
}

# Wait up to $2 seconds for pid $1 to exit.
wait_gone() {
    local pid=$1 end=$(($(now_ms) + $2 * 1000))
    while alive "$pid"; do
        (($(now_ms) < end)) || return 1
        sleep 0.05
    done
}

fail_with_log() {
    local msg=$1 f
    shift
    for f in "$@"; do
        if [[ -s $f ]]; then
            echo "---- tail of $f" >&2
            tail -n 30 "$f" >&2
        fi
    done
    echo "db: $msg" >&2
    exit 1
}

setup_rundir() {
    if [[ ! -d $RUNDIR ]]; then
        mkdir -p "$RUNDIR"
        chmod 1777 "$RUNDIR"
    fi
    [[ -O $RUNDIR ]] || die "run dir $RUNDIR is not owned by $(id -un); set OBX_TEST_RUNDIR"
    # The postgres and mysql users create sockets, logs and data dirs here.
    chmod 1777 "$RUNDIR"
    # Serialise start/stop of the same server.
    if command -v flock >/dev/null 2>&1; then
        exec 9>>"$RUNDIR/.lock-$kind"
        flock -w 120 9 || die "another '${0##*/}' is still busy with $kind in $RUNDIR"
    fi
}

check_user_access() {
    local user=$1
    if is_root; then
        id -u "$user" >/dev/null 2>&1 || die "system user '$user' missing; run tests/deps.sh $kind"
        su "$user" -s /bin/sh -c "test -w $(shq "$RUNDIR") && test -x $(shq "$RUNDIR")" ||
            die "user '$user' cannot write to $RUNDIR (a parent dir is not searchable?); set OBX_TEST_RUNDIR"
    fi
}

# ---- PostgreSQL ------------------------------------------------------------------
PG_DATA=$RUNDIR/pg

find_pgbin() {
    local d="" dirs=(/usr/lib/postgresql/*/bin)
    if [[ -d ${dirs[0]} ]]; then
        d=$(printf '%s\n' "${dirs[@]}" | sort -V | tail -n 1)
    fi
    if [[ -z $d ]] && command -v pg_ctl >/dev/null 2>&1; then
        d=$(dirname "$(command -v pg_ctl)")
    fi
    [[ -n $d && -x $d/initdb && -x $d/pg_ctl ]] ||
        die "PostgreSQL server binaries not found; run tests/deps.sh pg"
    PGBIN=$d
}

pg_stop_server() {
    local pid=""
    [[ -d $PG_DATA ]] || return 0
    if [[ -f $PG_DATA/postmaster.pid ]]; then
        pid=$(head -n 1 "$PG_DATA/postmaster.pid" 2>/dev/null || true)
        if pid_is "$pid" 'postgres*'; then
            run_as postgres "$PGBIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 30 stop >/dev/null 2>&1 || true
            if ! wait_gone "$pid" 5; then
                kill -KILL "$pid" 2>/dev/null || true
                wait_gone "$pid" 5 || true
            fi
            stopped=1
        fi
    fi
    rm -f "$RUNDIR/.s.PGSQL.$PG_PORT" "$RUNDIR/.s.PGSQL.$PG_PORT.lock"
    rm -rf "$PG_DATA"
}

pg_start() {
    local t0 end owner
    find_pgbin
    setup_rundir
    check_user_access postgres
    t0=$(now_ms)
    end=$((t0 + 30000))
    pg_stop_server
    if port_busy "$PG_PORT"; then
        owner=$(port_owner "$PG_PORT")
        die "port 127.0.0.1:$PG_PORT is in use by another process${owner:+ ($owner)}; stop it or set OBX_PG_PORT"
    fi
    rm -f "$RUNDIR/pg.log" "$RUNDIR/pg-init.log"

    # -N: skip initdb's final fsync of the fresh cluster (throw-away data).
    # The server itself runs with fsync on.
    run_as postgres "$PGBIN/initdb" -D "$PG_DATA" -U postgres --auth=trust -E UTF8 \
        --locale=C.UTF-8 -N >"$RUNDIR/pg-init.log" 2>&1 ||
        fail_with_log "initdb failed" "$RUNDIR/pg-init.log"

    local sockdir=${RUNDIR//\'/\'\'}
    cat >>"$PG_DATA/postgresql.conf" <<EOF

# ---- tests/db.sh
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$sockdir'
max_connections = 100
deadlock_timeout = '200ms'
EOF

    # 9>&-: the server must not inherit the lock.
    if ! run_as postgres "$PGBIN/pg_ctl" -D "$PG_DATA" -l "$RUNDIR/pg.log" -w -t 30 start \
        >>"$RUNDIR/pg-init.log" 2>&1 9>&-; then
        pg_stop_server
        fail_with_log "postgresql did not start" "$RUNDIR/pg-init.log" "$RUNDIR/pg.log"
    fi
    until "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -t 2; do
        if (($(now_ms) > end)); then
            pg_stop_server
            fail_with_log "postgresql not ready after 30 s" "$RUNDIR/pg.log"
        fi
        sleep 0.05
    done
    if ! "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres \
        -c "create database obx" -c "create database obx2" -c "create database obx3" \
        >>"$RUNDIR/pg-init.log" 2>&1; then
        pg_stop_server
        fail_with_log "creating the databases failed" "$RUNDIR/pg-init.log" "$RUNDIR/pg.log"
    fi
    echo "db: postgresql ready on 127.0.0.1:$PG_PORT in $(fmt_s $(($(now_ms) - t0))) s"
}

pg_stop() {
    [[ -d $PG_DATA ]] || { echo "db: postgresql not running"; return 0; }
    find_pgbin
    setup_rundir
    stopped=0
    pg_stop_server
    if ((stopped)); then echo "db: postgresql stopped"; else echo "db: postgresql not running"; fi
}

# ---- MariaDB ----------------------------------------------------------------------
MY_DATA=$RUNDIR/my
MY_SOCK=$RUNDIR/my.sock
MY_PID=$RUNDIR/my.pid

# Path of a MariaDB program (mariadbd is in /usr/sbin, not in a user's PATH).
find_my_bin() {
    PATH=$PATH:/usr/sbin:/usr/libexec command -v "$1" ||
        die "$1 not found; run tests/deps.sh mariadb"
}

find_mariadb() {
    BIN_MARIADBD=$(find_my_bin mariadbd)
    BIN_INSTALL_DB=$(find_my_bin mariadb-install-db)
    BIN_MARIADB=$(find_my_bin mariadb)
    BIN_ADMIN=$(find_my_bin mariadb-admin)
}

# A client query as root over TCP (args: extra client options).
my_root() {
    "$BIN_MARIADB" --no-defaults --protocol=tcp -h 127.0.0.1 -P "$MY_PORT" -u root \
        --connect-timeout=2 "$@"
}

my_stop_server() {
    local pid="" alive=0 end
    [[ -f $MY_PID ]] && pid=$(head -n 1 "$MY_PID" 2>/dev/null || true)
    pid_is "$pid" 'mariadbd' && alive=1
    # A socket file can outlive a killed server, so ping first.
    if [[ -S $MY_SOCK ]] &&
        "$BIN_ADMIN" --no-defaults -S "$MY_SOCK" -u root --connect-timeout=5 ping >/dev/null 2>&1; then
        # --shutdown-timeout=0: do not wait here (mariadb-admin polls the pid
        # file only once a second, and then exits 1); we watch the process below.
        "$BIN_ADMIN" --no-defaults -S "$MY_SOCK" -u root --connect-timeout=5 \
            --shutdown-timeout=0 shutdown >/dev/null 2>&1 || true
        if ((!alive)); then
            # No pid to watch: wait for the server to remove its socket.
            end=$(($(now_ms) + 30000))
            while [[ -S $MY_SOCK ]] && (($(now_ms) < end)); do sleep 0.05; done
        fi
    fi
    if ((alive)); then
        stopped=1
        if ! wait_gone "$pid" 30; then
            # SIGTERM is a normal shutdown for mariadbd; SIGKILL as the last resort.
            kill -TERM "$pid" 2>/dev/null || true
            if ! wait_gone "$pid" 10; then
                kill -KILL "$pid" 2>/dev/null || true
                wait_gone "$pid" 5 || true
            fi
        fi
    fi
    rm -f "$MY_SOCK" "$MY_SOCK.lock" "$MY_PID"
    rm -rf "$MY_DATA"
}

my_start() {
    local t0 end owner pid user_opt=()
    find_mariadb
    # mariadb-install-db is a shell script that word-splits the datadir.
    [[ $RUNDIR =~ ^[A-Za-z0-9/._+@%=:,-]+$ ]] ||
        die "mariadb-install-db cannot handle the run dir '$RUNDIR'; set OBX_TEST_RUNDIR to a path without spaces or quotes"
    setup_rundir
    check_user_access mysql
    t0=$(now_ms)
    end=$((t0 + 30000))
    my_stop_server
    if port_busy "$MY_PORT"; then
        owner=$(port_owner "$MY_PORT")
        die "port 127.0.0.1:$MY_PORT is in use by another process${owner:+ ($owner)}; stop it or set OBX_MY_PORT"
    fi
    rm -f "$RUNDIR/my.err" "$RUNDIR/my-init.log"
    is_root && user_opt=(--user=mysql)
    # A temporary directory of its own: at start mariadbd deletes every #sql*
    # file in its tmpdir, so in a shared /tmp it would delete the temporary
    # tables of other servers running their statements (tests/torture/dbfault.sh
    # restarts on the same one).
    mkdir -p "$RUNDIR/my.tmp"
    is_root && chown mysql: "$RUNDIR/my.tmp"

    # --skip-name-resolve: no hostname lookup (fails on odd container hostnames);
    # root@localhost and root@127.0.0.1 are created either way.
    (cd "$RUNDIR" && "$BIN_INSTALL_DB" --no-defaults "${user_opt[@]}" --datadir="$MY_DATA" \
        --auth-root-authentication-method=normal --skip-test-db --skip-name-resolve) \
        >"$RUNDIR/my-init.log" 2>&1 ||
        fail_with_log "mariadb-install-db failed" "$RUNDIR/my-init.log"

    # my.err gets both the console output (opened here, by us) and the server's
    # error log (reopened by mariadbd after it switched to the mysql user).
    exec 8>>"$RUNDIR/my.err"
    is_root && chown mysql: "$RUNDIR/my.err"
    (cd "$RUNDIR" && exec nohup "$BIN_MARIADBD" --no-defaults "${user_opt[@]}" --datadir="$MY_DATA" --tmpdir="$RUNDIR/my.tmp" \
        --bind-address=127.0.0.1 --port="$MY_PORT" --socket="$MY_SOCK" --pid-file="$MY_PID" \
        --log-error="$RUNDIR/my.err" --skip-name-resolve --max-allowed-packet=64M \
        --innodb-lock-wait-timeout=5 --character-set-server=utf8mb4 \
        --collation-server=utf8mb4_unicode_ci) </dev/null >&8 2>&1 8>&- 9>&- &
    pid=$!
    exec 8>&-

    # mariadb-admin ping also succeeds on "Access denied": wait for a real query.
    until my_root -N -e "select 1" >/dev/null 2>&1; do
        if ! alive "$pid"; then
            my_stop_server
            fail_with_log "mariadbd exited during start-up" "$RUNDIR/my.err"
        fi
        if (($(now_ms) > end)); then
            my_stop_server
            fail_with_log "mariadb not ready after 30 s" "$RUNDIR/my.err"
        fi
        sleep 0.05
    done
    if ! my_root -e "create database obx; create database obx2; create database obx3;
            create user 'obx'@'127.0.0.1' identified by 'obxpw';
            grant all on \`obx%\`.* to 'obx'@'127.0.0.1';
            grant process, connection admin on *.* to 'obx'@'127.0.0.1';
            create user 'obx_worker'@'127.0.0.1' identified by 'workerpw';
            grant select, insert, update, delete on obx.* to 'obx_worker'@'127.0.0.1';" >>"$RUNDIR/my-init.log" 2>&1 ||
        ! "$BIN_MARIADB" --no-defaults --protocol=tcp -h 127.0.0.1 -P "$MY_PORT" -u obx --password=obxpw \
            -D obx -N -e "select 1" >>"$RUNDIR/my-init.log" 2>&1; then
        my_stop_server
        fail_with_log "creating the databases / user obx failed" "$RUNDIR/my-init.log" "$RUNDIR/my.err"
    fi
    echo "db: mariadb ready on 127.0.0.1:$MY_PORT in $(fmt_s $(($(now_ms) - t0))) s"
}

my_stop() {
    if [[ ! -d $MY_DATA && ! -e $MY_PID && ! -e $MY_SOCK ]]; then
        echo "db: mariadb not running"
        return 0
    fi
    find_mariadb
    setup_rundir
    stopped=0
    my_stop_server
    if ((stopped)); then echo "db: mariadb stopped"; else echo "db: mariadb not running"; fi
}

# ---- main ----------------------------------------------------------------------------
stopped=0
case $action/$kind in
    start/pg)      pg_start ;;
    stop/pg)       pg_stop ;;
    start/mariadb) my_start ;;
    stop/mariadb)  my_stop ;;
esac

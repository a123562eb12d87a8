#!/usr/bin/env bash
# tests/deps.sh [group...] - install the Debian packages that the tests need.
#
# Groups:
#   build    gcc make libc6-dev unixodbc-dev unixodbc odbcinst libsqliteodbc
#   pg       postgresql-15 odbc-postgresql
#   mariadb  mariadb-server odbc-mariadb
#   clients  sqlite3 (tests/sqlfiles.sh: the schema files through each database's
#            own client; psql and mariadb come with the servers)
#   check    valgrind clang libclang-rt-14-dev llvm-14 g++
#   static   musl-tools dpkg-dev tcl xz-utils (static builds: musl, and the
#            SQLite ODBC driver and SQLite built from Debian's sources)
#   cross    the aarch64 and armhf cross compilers, qemu-user-static
#   consumers  cmake pkgconf (make check-consumers: the CMake and pkg-config
#            consumer builds)
#   bench    libpq-dev libsqlite3-dev (make bench only: the ideal outbox through
#            libpq and the sqlite3 C API, the physical limit the library is
#            measured against)
#   native   libpq-dev libsqlite3-dev libmariadb-dev (the outbox in a transaction
#            of the program's own driver: tests/test_native.c, the examples)
#   scale    galera-4 pgbouncer rsync (make scale only)
#   windows  gcc-mingw-w64-x86-64-win32 wine64 (make check-windows: both
#            headers built for Windows against odbc32 with Win32 threads, the
#            fake-ODBC tests run under 64-bit Wine; no i386 architecture
#            needed; about 157 MB to fetch, 1 GB installed, most of it Wine)
#   all      all of the above
# With no group, "build" is used.
#
# Nothing is done (no apt-get call at all) when every package is already
# installed. Missing packages are installed with one apt-get update and one
# apt-get install --no-install-recommends run. An update that fails only in
# part (one index missing while a mirror syncs: apt keeps the old lists and
# still exits non-zero) does not stop the install; only a failed install is an
# error, because that is the only thing that decides whether the tests can run. The script also checks that
# the ODBC driver entries the tests use ("SQLite3", "PostgreSQL Unicode",
# "MariaDB Unicode") are in odbcinst.ini, and registers any that are missing.
#
# Exit status: 0 ok, 2 something is missing and could not be installed
# (not root, apt-get failed, unknown group).
#
# Notes on --no-install-recommends:
#   - gcc only *recommends* libc6-dev (the C headers), so it is listed here.
#   - clang-14 only *recommends* llvm-14, which holds llvm-symbolizer-14.
#     Without it, clang's ASan/UBSan reports have no file:line, so it is listed.
#   - mariadb-server's recommends are compression provider plugins, pv and a
#     Perl module. tests/db.sh starts mariadbd with --no-defaults, so it never
#     loads those plugins, and the server works without them.
#   - postgresql-15 only recommends sysstat.
set -euo pipefail

readonly GROUPS_ALL="build pg mariadb tsql clients check static cross bench native consumers scale windows"

usage() {
    echo "usage: ${0##*/} [build|pg|mariadb|tsql|clients|check|static|cross|bench|native|consumers|scale|windows|all]...   (default: build)"
}

# The packages in one group.
group_packages() {
    case $1 in
        build)   echo "gcc make libc6-dev unixodbc-dev unixodbc odbcinst libsqliteodbc" ;;
        pg)      echo "postgresql-15 odbc-postgresql" ;;
        mariadb) echo "mariadb-server odbc-mariadb" ;;
        # Not gcc-multilib: it conflicts with the cross compilers, and the
        # 32-bit tests run on armhf under qemu (make check-gateway) instead.
        check)   echo "valgrind clang libclang-rt-14-dev llvm-14 g++" ;;
        tsql)    echo "sqlfluff" ;; # parses the SQL Server dialect's T-SQL (no server here)
        # sql/sqlite/*.sql through SQLite's own client (psql and mariadb come with the servers)
        clients) echo "sqlite3" ;;
        # dpkg-dev runs 'apt-get source'; tcl generates SQLite's amalgamation.
        static)  echo "musl-tools dpkg-dev tcl xz-utils" ;;
        cross)   echo "gcc-aarch64-linux-gnu libc6-dev-arm64-cross gcc-arm-linux-gnueabihf libc6-dev-armhf-cross qemu-user-static" ;;
        bench)   echo "libpq-dev libsqlite3-dev" ;;
        native)  echo "libpq-dev libsqlite3-dev libmariadb-dev" ;;
        consumers) echo "cmake pkgconf" ;;
        scale)   echo "galera-4 pgbouncer rsync" ;; # make scale: a Galera cluster (rsync SST), a pooler
        # The win32 thread model only: the headers use Win32 threads, never
        # winpthreads. wine64 alone runs 64-bit programs (no i386, no wine32).
        windows) echo "gcc-mingw-w64-x86-64-win32 wine64" ;;
        *)       return 1 ;;
    esac
}

# The ODBC driver entry that a group needs: "name|package|library file name".
group_driver() {
    case $1 in
        build)   echo "SQLite3|libsqliteodbc|libsqlite3odbc.so" ;;
        pg)      echo "PostgreSQL Unicode|odbc-postgresql|psqlodbcw.so" ;;
        mariadb) echo "MariaDB Unicode|odbc-mariadb|libmaodbc.so" ;;
        *)       echo "" ;;
    esac
}

# Print those of the given packages that are not fully installed.
missing_packages() {
    local installed pkg
    # A single dpkg-query call. Unknown packages only make it print to stderr
    # and return 1, so neither is an error here.
    installed=$(dpkg-query -W -f='${Package} ${Status}\n' "$@" 2>/dev/null \
        | awk '$2 == "install" && $3 == "ok" && $4 == "installed" { print $1 }' || true)
    for pkg in "$@"; do
        if ! grep -qxF -- "$pkg" <<<"$installed"; then
            echo "$pkg"
        fi
    done
}

# Register an ODBC driver in odbcinst.ini if it is not there yet.
ensure_driver() {
    local name=$1 pkg=$2 lib=$3 group=$4 so tmp
    if odbcinst -q -d -n "$name" >/dev/null 2>&1; then
        return 0
    fi
    if [[ $(id -u) -ne 0 ]]; then
        echo "deps: odbcinst.ini has no [$name] driver entry; run: sudo $0 $group" >&2
        return 2
    fi
    so=$(dpkg -L "$pkg" 2>/dev/null | grep -m1 "/$lib\$" || true)
    if [[ -z $so || ! -e $so ]]; then
        echo "deps: cannot find $lib in package $pkg (dpkg -L $pkg)" >&2
        return 2
    fi
    tmp=$(mktemp)
    printf '[%s]\nDescription=%s ODBC driver\nDriver=%s\n' "$name" "$name" "$so" >"$tmp"
    if ! odbcinst -i -d -f "$tmp" >/dev/null; then
        rm -f "$tmp"
        echo "deps: 'odbcinst -i -d -f' failed to register the [$name] driver ($so)" >&2
        return 2
    fi
    rm -f "$tmp"
    if ! odbcinst -q -d -n "$name" >/dev/null 2>&1; then
        echo "deps: registered [$name] but 'odbcinst -q -d -n \"$name\"' still fails" >&2
        return 2
    fi
    echo "deps: registered ODBC driver [$name] -> $so"
}

# ---- arguments ------------------------------------------------------------
groups=()
for arg in "$@"; do
    case $arg in
        -h|--help) usage; exit 0 ;;
        all) read -r -a more <<<"$GROUPS_ALL"; groups+=("${more[@]}") ;;
        *)
            if ! group_packages "$arg" >/dev/null; then
                echo "deps: unknown group '$arg'" >&2
                usage >&2
                exit 2
            fi
            groups+=("$arg")
            ;;
    esac
done
if [[ ${#groups[@]} -eq 0 ]]; then
    groups=(build)
fi

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    echo "deps: this script needs dpkg-query and apt-get (Debian/Ubuntu)" >&2
    exit 2
fi

# ---- find what is missing -------------------------------------------------
to_install=()
seen=" "
for group in "${groups[@]}"; do
    case $seen in *" $group "*) continue ;; esac
    seen+="$group "
    read -r -a pkgs <<<"$(group_packages "$group")"
    mapfile -t miss < <(missing_packages "${pkgs[@]}")
    if [[ ${#miss[@]} -eq 0 ]]; then
        echo "deps: $group ok"
    else
        echo "deps: installing: ${miss[*]}"
        for pkg in "${miss[@]}"; do
            case " ${to_install[*]} " in *" $pkg "*) ;; *) to_install+=("$pkg") ;; esac
        done
    fi
done

# ---- install --------------------------------------------------------------
if [[ ${#to_install[@]} -gt 0 ]]; then
    if [[ $(id -u) -ne 0 ]]; then
        echo "deps: not root, cannot install. Run:" >&2
        echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${to_install[*]}" >&2
        exit 2
    fi
    export DEBIAN_FRONTEND=noninteractive
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
    # Wait for the dpkg lock instead of failing at once (e.g. unattended-upgrades).
    apt_opts=(-q -y -o DPkg::Lock::Timeout=300)
    # The update's status is only reported: the lists it could not refresh are
    # the old ones, and the install below is what tells whether they serve.
    if ! apt-get "${apt_opts[@]}" update >"$log" 2>&1; then
        grep -E '^(E|W):' "$log" | tail -n 5 >&2 || true
        echo "deps: 'apt-get update' reported errors (above); installing from the package lists apt has" >&2
    fi
    if ! apt-get "${apt_opts[@]}" install --no-install-recommends "${to_install[@]}" >"$log" 2>&1; then
        tail -n 25 "$log" >&2
        echo "deps: FAILED to install ${to_install[*]}: 'apt-get install -y --no-install-recommends' failed (output above)" >&2
        exit 2
    fi
    mapfile -t still < <(missing_packages "${to_install[@]}")
    if [[ ${#still[@]} -gt 0 ]]; then
        echo "deps: apt-get succeeded but these are still not installed: ${still[*]}" >&2
        exit 2
    fi
fi

# ---- ODBC driver entries --------------------------------------------------
seen=" "
for group in "${groups[@]}"; do
    case $seen in *" $group "*) continue ;; esac
    seen+="$group "
    spec=$(group_driver "$group")
    [[ -n $spec ]] || continue
    IFS='|' read -r name pkg lib <<<"$spec"
    ensure_driver "$name" "$pkg" "$lib" "$group" || exit 2
done

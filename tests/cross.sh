#!/usr/bin/env bash
# tests/cross.sh - static and cross builds for gateways: single executables
# with the SQLite ODBC driver compiled in (no driver manager, no .so, no
# odbcinst.ini), run in an empty root directory, under qemu for ARM. Beside
# them the sqlite3-API variant (OBX_SQLITE3_API / IBX_SQLITE3_API): the same
# programs linked with SQLite's amalgamation only, no ODBC driver at all
# (*_sqlite3: webhook_inbox, and native_sqlite for obx.h).
#
#   tests/cross.sh shim                 build/gw/odbc-inc: ODBC headers for any target
#   tests/cross.sh sources              fetch Debian's sqliteodbc and sqlite3
#                                       sources, build SQLite's amalgamation
#   tests/cross.sh objects TARGET...    the driver and SQLite objects only
#                                       (what make size links with)
#   tests/cross.sh build TARGET...      quickstart + webhook_inbox, static
#   tests/cross.sh run TARGET...        both examples in an empty root
#   tests/cross.sh test TARGET...       fake-ODBC tests, then the real-SQLite
#                                       requirement tests, in the ODBC build
#                                       (driver linked in) and the sqlite3-API
#                                       build (backend sqlite3): test_real and
#                                       test_multi (no ODBC at all in the
#                                       sqlite3 build) in both on every target;
#                                       the long ones, test_outbox and test_inbox,
#                                       in the ODBC build on glibc, the sqlite3
#                                       build on musl (ODBC side connections: the
#                                       driver linked in for the test's own use),
#                                       under qemu test_outbox on armhf and
#                                       test_inbox on aarch64 (ODBC build).
#                                       GW_ALL=1: both in both builds on every
#                                       target (minutes more)
#
# TARGET: glibc, musl (both x86_64 host), aarch64, armhf (qemu-user-static;
# binfmt_misc is not assumed, the runner is always named). Our own code is
# built with $WARN -Werror (make passes the Makefile's WARN).
# Everything goes under build/gw/ (third-party sources in build/gw/src). The
# sources come through a private apt state in build/gw/apt whose deb-src
# entries are derived from the machine's own apt sources, so nothing under
# /etc changes and no archive host is named here.
set -euo pipefail
cd "$(dirname "$0")/.."
readonly GW=build/gw
readonly SRC=$GW/src
WARN=${WARN:-}
CSTD="-std=c99 -D_POSIX_C_SOURCE=200809L"
OPT=${GW_OPT:--Os}

die() { echo "cross: $*" >&2; exit 1; }

# ---- sources ---------------------------------------------------------------

# deb-src twins of the machine's deb entries for this release's suites, both
# one-line (sources.list, *.list) and deb822 (*.sources) formats. Other
# repositories (third-party ones) are left out: they may have no sources.
derive_debsrc() {
    local out=$1 codename list parts f
    # shellcheck disable=SC1091
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [[ -n $codename ]] || die "no VERSION_CODENAME in /etc/os-release"
    eval "$(apt-config shell list Dir::Etc::sourcelist/f parts Dir::Etc::sourceparts/d)"
    mkdir -p "$out"
    rm -f "$out"/*
    local suites="$codename $codename-updates $codename-security $codename/updates"
    {
        [[ -f $list ]] && cat "$list"
        for f in "$parts"/*.list; do [[ -f $f ]] && cat "$f"; done
        true
    } | awk -v want="$suites" '
        BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) ok[w[i]] = 1 }
        $1 == "deb" {
            # deb [options] uri suite component...
            i = 2
            if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
            if ($(i + 1) in ok) { sub(/^deb/, "deb-src"); print }
        }' >"$out/debsrc.list"
    for f in "$parts"/*.sources; do
        [[ -f $f ]] || continue
        # One stanza per paragraph; continuation lines start with a blank.
        awk -v want="$suites" '
            BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) ok[w[i]] = 1; RS = ""; FS = "\n" }
            {
                types = ""; suites = ""; enabled = "yes"; body = ""
                for (i = 1; i <= NF; i++) {
                    line = $i
                    if (line ~ /^#/) continue
                    key = tolower(line); sub(/:.*/, "", key)
                    val = line; sub(/^[^:]*:[ \t]*/, "", val)
                    if (line ~ /^[ \t]/) { body = body "\n" line; continue }
                    if (key == "types") { types = val; continue }
                    if (key == "suites") { suites = val; continue }
                    if (key == "enabled") { enabled = tolower(val) }
                    body = body "\n" line
                }
                if (enabled == "no" || (" " types " ") !~ / deb /) next
                kept = ""
                m = split(suites, s, /[ \t]+/)
                for (j = 1; j <= m; j++) if (s[j] in ok) kept = kept " " s[j]
                if (kept == "") next
                printf "Types: deb-src\nSuites:%s%s\n\n", kept, body
            }' "$f"
    done >"$out/debsrc.sources"
    [[ -s $out/debsrc.list || -s $out/debsrc.sources ]] ||
        die "found no deb entries for $codename in the apt sources to derive deb-src entries from"
}

sources() {
    local apt=$PWD/$GW/apt opts
    if [[ -f $SRC/sqlite3.c && -f $SRC/sqlite3odbc.c ]]; then
        echo "cross: sources ready in $SRC"
        return 0
    fi
    mkdir -p "$apt/lists/partial" "$apt/cache" "$SRC"
    derive_debsrc "$apt/sources.list.d"
    opts=(-q -o "Dir::Etc::sourcelist=$apt/none" -o "Dir::Etc::sourceparts=$apt/sources.list.d"
          -o "Dir::State::lists=$apt/lists" -o "Dir::Cache=$apt/cache"
          -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=" -o "Debug::NoLocking=1")
    # A partly failed update is not fatal: the source fetch below decides.
    apt-get "${opts[@]}" update >"$apt/update.log" 2>&1 ||
        { grep -E '^(E|W):' "$apt/update.log" >&2 || true; echo "cross: apt-get update (deb-src) reported errors; trying the fetch" >&2; }
    (cd "$SRC" && rm -rf sqliteodbc-* sqlite3-* sqlite3_* sqliteodbc_* &&
        apt-get "${opts[@]}" source sqliteodbc sqlite3 >"$apt/source.log" 2>&1) ||
        { tail -n 20 "$apt/source.log" >&2; die "FAILED: apt-get source sqliteodbc sqlite3 (log: $apt/source.log)"; }
    local odbcdir sqldir
    odbcdir=$(find "$SRC" -maxdepth 1 -type d -name 'sqliteodbc-*' | head -n 1)
    sqldir=$(find "$SRC" -maxdepth 1 -type d -name 'sqlite3-*' | head -n 1)
    [[ -n $odbcdir && -n $sqldir ]] || die "apt-get source unpacked nothing usable in $SRC"
    # The amalgamation: one sqlite3.c that every target compiles.
    mkdir -p "$SRC/amalg"
    (cd "$SRC/amalg" && "../${sqldir##*/}/configure" --disable-tcl >configure.log 2>&1 &&
        make sqlite3.c >make.log 2>&1) ||
        die "FAILED to generate sqlite3.c (logs in $SRC/amalg)"
    cp "$SRC/amalg/sqlite3.c" "$SRC/amalg/sqlite3.h" "$SRC/"
    cp "$odbcdir/sqlite3odbc.c" "$odbcdir/sqlite3odbc.h" "$SRC/"
    echo "$(basename "$odbcdir") $(basename "$sqldir")" >"$SRC/VERSIONS"
    echo "cross: sources ready in $SRC ($(cat "$SRC/VERSIONS"))"
}

# ---- targets ---------------------------------------------------------------

# Sets CC and RUN (the program that runs a target binary, empty on the host).
target() {
    case $1 in
        glibc)   CC=${HOST_CC:-gcc}; RUN="" ;;
        musl)    CC=musl-gcc; RUN="" ;;
        aarch64) CC=aarch64-linux-gnu-gcc; RUN=qemu-aarch64-static ;;
        armhf)   CC=arm-linux-gnueabihf-gcc; RUN=qemu-arm-static ;;
        *) die "unknown target '$1' (glibc, musl, aarch64, armhf)" ;;
    esac
    command -v "$CC" >/dev/null || die "$CC not found (tests/deps.sh static cross)"
    [[ -z $RUN ]] || command -v "$RUN" >/dev/null || die "$RUN not found (tests/deps.sh cross)"
}

# The ODBC headers are the same on every architecture except unixodbc.h,
# which only says how long a long is: a shim that asks the compiler. musl-gcc
# must not see /usr/include (glibc's headers), so only the ODBC ones are linked.
odbc_shim() {
    local d=$GW/odbc-inc h
    mkdir -p "$d"
    for h in sql.h sqlext.h sqltypes.h sqlucode.h odbcinst.h; do
        [[ -e /usr/include/$h ]] || die "/usr/include/$h missing (tests/deps.sh build)"
        ln -sf "/usr/include/$h" "$d/$h"
    done
    printf '%s\n' '/* unixodbc.h for any target: the sizes come from the compiler. */' \
        '#ifndef HAVE_LONG_LONG' '#define HAVE_LONG_LONG 1' '#endif' \
        '#ifndef SIZEOF_LONG_INT' '#define SIZEOF_LONG_INT __SIZEOF_LONG__' '#endif' >"$d/unixodbc.h"
}

# What sqliteodbc's configure would find on Linux, for a build without it;
# WITHOUT_DRIVERMGR makes the driver's SQL* functions the program's.
DRIVER_DEFS=(-DWITHOUT_DRIVERMGR=1 -DWITHOUT_WINTERFACE=1 -DHAVE_UNIXODBC=1
 -DHAVE_SQLLEN=1 -DHAVE_SQLULEN=1 -DHAVE_SQLSETPOSIROW=1 -DHAVE_SQLWCHAR=1 -DHAVE_LONG_LONG=1
 -DHAVE_USLEEP=1 -DHAVE_NANOSLEEP=1 -DHAVE_LOCALECONV=1 -DHAVE_LOCALTIME_R=1 -DHAVE_GMTIME_R=1
 -DCOLATTRIBUTE_LAST_ARG_TYPE=SQLLEN_PTR -DSETSTMTOPTION_LAST_ARG_TYPE=SQLULEN -DPTRDIFF_T=ptrdiff_t
 -DCANT_PASS_VALIST_AS_CHARPTR=1 -DHAVE_SQLITE3LOADEXTENSION=0
 -DHAVE_SQLITE3COLUMNTABLENAME=1 -DHAVE_SQLITE3COLUMNDATABASENAME=1 -DHAVE_SQLITE3COLUMNORIGINNAME=1
 -DHAVE_SQLITE3OVERLOADFUNCTION=1 -DHAVE_SQLITE3PREPAREV2=1 -DHAVE_SQLITE3CLEARBINDINGS=1
 -DHAVE_SQLITE3CREATEMODULEV2=1 -DHAVE_SQLITE3VFS=1 -DHAVE_SQLITE3PROFILE=1 -DHAVE_SQLITE3STRNICMP=1
 -DHAVE_SQLITE3TABLECOLUMNMETADATA=1 -DHAVE_SQLITE3CLOSEV2=1)
# HAVE_USLEEP: without it SQLite's busy handler (sqlite3_busy_timeout, what the
# sqlite3-API build uses; the ODBC driver has its own) sleeps whole seconds.
readonly SQLITE_DEFS="-DSQLITE_OMIT_LOAD_EXTENSION=1 -DSQLITE_ENABLE_COLUMN_METADATA=1 -DSQLITE_THREADSAFE=1 -DHAVE_USLEEP=1"

# SQLGetInfo(SQL_DRIVER_VER) reports it: the upstream version of the source.
driver_version() {
    local v
    v=$(awk '{ print $1 }' "$SRC/VERSIONS")
    echo "${v#sqliteodbc-}"
}

# $1 newer than every other argument (or missing): rebuild.
stale() {
    local out=$1 f; shift
    [[ -e $out ]] || return 0
    for f in "$@"; do [[ $f -nt $out ]] && return 0; done
    return 1
}

# The driver and SQLite: compiled once per target, warnings off (not ours).
driver_objects() {
    local t=$1 d=$GW/$1
    mkdir -p "$d"
    [[ -f $SRC/sqlite3.c ]] || die "no sources: run tests/cross.sh sources first"
    if stale "$d/sqlite3.o" "$SRC/sqlite3.c" "$0"; then
        echo "cross: $t: compiling SQLite $OPT"
        # shellcheck disable=SC2086
        $CC $OPT -w $SQLITE_DEFS -c "$SRC/sqlite3.c" -o "$d/sqlite3.o" || die "FAILED: $t: compiling sqlite3.c"
    fi
    if stale "$d/sqlite3odbc.o" "$SRC/sqlite3odbc.c" "$0"; then
        # shellcheck disable=SC2086
        $CC $OPT -w -isystem "$GW/odbc-inc" -I"$SRC" "${DRIVER_DEFS[@]}" -DDRIVER_VER_INFO="\"$(driver_version)\"" \
            -c "$SRC/sqlite3odbc.c" -o "$d/sqlite3odbc.o" ||
            die "FAILED: $t: compiling sqlite3odbc.c"
    fi
}

# cc_prog TARGET OUT SOURCE...: our code, strict warnings as errors, static;
# linked through tests/gwlink.sh (no call may go into an IFUNC resolver).
cc_prog() {
    local t=$1 out=$2; shift 2
    # shellcheck disable=SC2086
    tests/gwlink.sh link "$t" $CC $CSTD $WARN -Werror $OPT -pthread -static -isystem "$GW/odbc-inc" "$@" -o "$out" -lm ||
        die "FAILED: $t: building $out"
}

build() {
    local t d
    for t in "$@"; do
        target "$t"
        d=$GW/$t
        driver_objects "$t"
        for ex in quickstart webhook_inbox native_sqlite; do
            if stale "$d/$ex" "examples/$ex.c" obx.h ibx.h "$d/sqlite3.o" "$d/sqlite3odbc.o"; then
                cc_prog "$t" "$d/$ex" -isystem "$SRC" "examples/$ex.c" "$d/sqlite3odbc.o" "$d/sqlite3.o"
            fi
        done
        # The sqlite3-API variant: SQLite's amalgamation and nothing else.
        for ex in webhook_inbox native_sqlite; do
            if stale "$d/${ex}_sqlite3" "examples/$ex.c" obx.h ibx.h "$d/sqlite3.o"; then
                cc_prog "$t" "$d/${ex}_sqlite3" -DOBX_SQLITE3_API -DIBX_SQLITE3_API -isystem "$SRC" \
                    "examples/$ex.c" "$d/sqlite3.o"
            fi
            if nm "$d/${ex}_sqlite3" | grep -q ' T SQLDriverConnect$'; then
                die "FAILED: $t: $d/${ex}_sqlite3 links an ODBC driver"
            fi
        done
        echo "cross: $t: $(for ex in quickstart webhook_inbox native_sqlite webhook_inbox_sqlite3 native_sqlite_sqlite3; do
            printf '%s %s bytes (stripped %s)  ' "$d/$ex" "$(stat -c %s "$d/$ex")" "$(stripped_size "$t" "$d/$ex")"; done)"
    done
}

stripped_size() {
    local strip=strip
    case $1 in aarch64) strip=aarch64-linux-gnu-strip ;; armhf) strip=arm-linux-gnueabihf-strip ;; esac
    "$strip" -s -o "$2.stripped" "$2" && stat -c %s "$2.stripped" && rm -f "$2.stripped"
}

# ---- running in an empty root ---------------------------------------------

# in_root ROOT PROGRAM ARG...: run /PROGRAM with ROOT as "/" (root: chroot;
# otherwise a user namespace), so nothing of the host's /etc, /usr/lib or
# odbcinst.ini is there to find. The qemu runner is static and copied in.
in_root() {
    local root=$1 prog=$2; shift 2
    local cmd=("/$prog" "$@")
    [[ -z $RUN ]] || cmd=("/${RUN##*/}" "${cmd[@]}")
    if [[ $(id -u) -eq 0 ]]; then
        chroot "$root" "${cmd[@]}"
    else
        unshare --map-root-user --root="$root" "${cmd[@]}"
    fi
}

fresh_root() {
    local root=$1; shift
    rm -rf "$root"
    mkdir -p "$root"
    cp "$@" "$root/"
    [[ -z $RUN ]] || cp "$(command -v "$RUN")" "$root/"
}

# A static executable has no program interpreter.
check_static() {
    if readelf -lW "$1" | grep -q INTERP; then
        die "$1 is not static (it names a program interpreter)"
    fi
}

# in_root_ok T ROOT LOG PATTERN PROGRAM [--sample]: PROGRAM in the empty
# ROOT (with --sample: its own sample piped into it), its output in LOG; dies
# printing LOG when it fails or LOG does not match PATTERN.
in_root_ok() {
    local t=$1 root=$2 out=$3 pattern=$4 prog=$5 rc=0
    if [[ ${6:-} == --sample ]]; then
        in_root "$root" "$prog" --sample | in_root "$root" "$prog" >"$out" 2>&1 || rc=$?
    else
        in_root "$root" "$prog" >"$out" 2>&1 || rc=$?
    fi
    if [[ $rc -ne 0 ]] || ! grep -q -- "$pattern" "$out"; then
        cat "$out"
        die "FAILED: $t $prog in an empty root"
    fi
}

run_examples() {
    local t d root
    for t in "$@"; do
        target "$t"
        d=$GW/$t
        root=$d/root
        for ex in quickstart webhook_inbox webhook_inbox_sqlite3 native_sqlite_sqlite3; do
            [[ -x $d/$ex ]] || die "$d/$ex missing: run tests/cross.sh build $t"
            check_static "$d/$ex"
        done
        fresh_root "$root" "$d/quickstart" "$d/webhook_inbox"
        in_root_ok "$t" "$root" "$d/quickstart.log" 'done: 2 delivered, 2 retries, 1 dead' quickstart
        in_root_ok "$t" "$root" "$d/webhook.log" 'each event exactly once' webhook_inbox --sample
        echo "cross: $t: quickstart and webhook_inbox ran in an empty root${RUN:+ under $RUN}: $(tail -n 1 "$d/quickstart.log" | sed 's/^ *[0-9.]*s *//'); $(tail -n 1 "$d/webhook.log")"
        # The sqlite3-API variant, no ODBC driver in it, in a root of its own
        # (a fresh webhook.db: its events are handled here, not duplicates).
        root=$d/root3
        fresh_root "$root" "$d/webhook_inbox_sqlite3" "$d/native_sqlite_sqlite3"
        in_root_ok "$t" "$root" "$d/native3.log" '^done: 1 delivered' native_sqlite_sqlite3
        in_root_ok "$t" "$root" "$d/webhook3.log" ', 2 handled: each event exactly once' webhook_inbox_sqlite3 --sample
        echo "cross: $t: the sqlite3-API builds ran in an empty root${RUN:+ under $RUN}: native_sqlite_sqlite3 $(tail -n 1 "$d/native3.log"); webhook_inbox_sqlite3 $(tail -n 1 "$d/webhook3.log")"
    done
}

# ---- tests ------------------------------------------------------------------

# long_tests TARGET BUILD: which of test_outbox and test_inbox run on TARGET
# in BUILD (odbc, sqlite3): each in each build on a host target, and each
# under qemu on one architecture (test_outbox on 32-bit armhf, test_inbox on
# aarch64). GW_ALL=1: both in both builds on every target.
long_tests() {
    if [[ ${GW_ALL:-0} == 1 ]]; then echo test_outbox test_inbox; return; fi
    case $1/$2 in
        glibc/odbc | musl/sqlite3) echo test_outbox test_inbox ;;
        armhf/odbc) echo test_outbox ;;
        aarch64/odbc) echo test_inbox ;;
    esac
}

# run_test TARGET NAME LOG PROGRAM ARG...: a tt.h program, judged by its exit
# status and its closing line; prints one PASS/FAIL line, returns 1 on FAIL.
run_test() {
    local t=$1 name=$2 log=$3; shift 3
    local rc=0 start=$SECONDS
    $RUN "$@" >"$log" 2>&1 || rc=$?
    if [[ $rc -eq 0 ]] && tail -n 1 "$log" | grep -qE '^[1-9][0-9]* passed, 0 failed$'; then
        echo "PASS $t $name ($(tail -n 1 "$log"); $((SECONDS - start)) s)"
        return 0
    fi
    grep -E '^(FAIL|    )' "$log" | head -n 30
    echo "FAIL $t $name (exit status $rc; $(tail -n 1 "$log"); log: $log)"
    return 1
}

# FUZZ-REPLAY-ALL: a replay that passes has replayed every corpus file;
# an empty corpus directory fails. With 32-bit file offsets readdir can fail
# (EOVERFLOW on ext4 under qemu-arm): that build must then fail, not pass
# with fewer files (whether readdir fails depends on the file system).
replay_checks() {
    local t=$1 d=$2 rundir=$3 want got rc
    want=$(find tests/fuzz/corpus -maxdepth 1 -type f ! -name '.*' | wc -l)
    got=$(sed -n 's/.*built-in, \([0-9]*\) from files.*/\1/p' "$d/fuzz_replay.log")
    if [[ $got != "$want" ]]; then
        echo "FAIL $t FUZZ-REPLAY-ALL replayed ${got:-no} corpus files of $want"
        return 1
    fi
    mkdir -p "$rundir/empty-corpus"
    find "$rundir/empty-corpus" -mindepth 1 -delete
    if $RUN "$d/fuzz_replay" "$rundir/empty-corpus" >"$d/fuzz_replay_empty.log" 2>&1; then
        echo "FAIL $t FUZZ-REPLAY-ALL an empty corpus directory passed"
        return 1
    fi
    if [[ $t == armhf ]]; then
        stale "$d/fuzz_replay32" tests/fuzz_replay.c tests/fuzz_core.c tests/fake_odbc.c obx.h ibx.h &&
            cc_prog "$t" "$d/fuzz_replay32" -D_FILE_OFFSET_BITS=32 tests/fuzz_replay.c tests/fuzz_core.c tests/fake_odbc.c
        rc=0
        $RUN "$d/fuzz_replay32" tests/fuzz/corpus >"$d/fuzz_replay32.log" 2>&1 || rc=$?
        got=$(sed -n 's/.*built-in, \([0-9]*\) from files.*/\1/p' "$d/fuzz_replay32.log")
        if [[ $rc -eq 0 && $got != "$want" ]]; then
            echo "FAIL $t FUZZ-REPLAY-ALL with 32-bit file offsets it passed having replayed $got of $want files"
            return 1
        fi
    fi
    echo "PASS $t FUZZ-REPLAY-ALL all $want corpus files replayed; an empty or unreadable corpus fails"
}

# GW-IFUNC-GUARD (armhf): tests/ifunc_probe.S is the layout GNU ld's
# Cortex-A8 erratum fix gets wrong. Linked plainly, the guard of
# tests/gwlink.sh must flag it exactly when its call goes wrong (with ld
# 2.40 both: the call runs the IFUNC's resolver); linked without the
# erratum fix, it is clean and right.
ifunc_guard() {
    local t=$1 d=$2 got wrong=no flagged=no nofix_ok=yes
    # shellcheck disable=SC2086
    if ! $CC $CSTD $WARN -Werror -static tests/ifunc_probe.c tests/ifunc_probe.S -o "$d/ifunc_probe" ||
        ! $CC $CSTD $WARN -Werror -static -Wl,--no-fix-cortex-a8 tests/ifunc_probe.c tests/ifunc_probe.S \
            -o "$d/ifunc_probe_nofix"; then
        echo "FAIL $t GW-IFUNC-GUARD the probe does not build"
        return 1
    fi
    got=$($RUN "$d/ifunc_probe" || true)
    [[ $got == 42 ]] || wrong=yes
    tests/gwlink.sh check "$t" "$d/ifunc_probe" >/dev/null || flagged=yes
    if ! tests/gwlink.sh check "$t" "$d/ifunc_probe_nofix" >/dev/null ||
        [[ $($RUN "$d/ifunc_probe_nofix" || true) != 42 ]]; then
        nofix_ok=no
    fi
    if [[ $nofix_ok == no || $wrong != "$flagged" ]]; then
        echo "FAIL $t GW-IFUNC-GUARD the probe's call returned $got, flagged: $flagged; without the erratum fix clean and 42: $nofix_ok"
        return 1
    fi
    if [[ $flagged == yes ]]; then
        echo "PASS $t GW-IFUNC-GUARD a branch into an IFUNC resolver is flagged (the linker's veneer; the probe's call returned $got, not 42)"
    else
        echo "PASS $t GW-IFUNC-GUARD this linker calls the IFUNC through its PLT entry: nothing to flag, the probe returned 42"
    fi
}

tests() {
    local t d rundir failed=0 conn
    for t in "$@"; do
        target "$t"
        d=$GW/$t/tests
        mkdir -p "$d"
        driver_objects "$t"
        rundir=${OBX_TEST_RUNDIR:-${TMPDIR:-/tmp}/obx-test-$(id -u)}/gw-$t
        mkdir -p "$rundir"
        # The C files not built below, for this target's warnings (-Wcast-align
        # and format widths differ on 32-bit ARM). Not bench.c: it is for the
        # host only (libpq and sqlite3 headers).
        # shellcheck disable=SC2086
        $CC $CSTD $WARN -Werror -pthread -isystem "$GW/odbc-inc" -fsyntax-only \
            tests/impl_both.c tests/link_main.c examples/multi_tenant.c ||
            { echo "FAIL $t warnings"; failed=1; }
        # The fake-ODBC layer stands in for any driver: pure and engine tests.
        for p in test_unit test_sqlserver fake_selftest; do
            stale "$d/$p" "tests/$p.c" tests/fake_odbc.c tests/fake_odbc.h tests/tt.h obx.h ibx.h &&
                cc_prog "$t" "$d/$p" "tests/$p.c" tests/fake_odbc.c
            run_test "$t" "$p" "$d/$p.log" "$d/$p" || failed=1
        done
        stale "$d/fuzz_replay" tests/fuzz_replay.c tests/fuzz_core.c tests/fake_odbc.c obx.h ibx.h &&
            cc_prog "$t" "$d/fuzz_replay" tests/fuzz_replay.c tests/fuzz_core.c tests/fake_odbc.c
        run_test "$t" fuzz_replay "$d/fuzz_replay.log" "$d/fuzz_replay" tests/fuzz/corpus || failed=1
        replay_checks "$t" "$d" "$rundir" || failed=1
        [[ $t != armhf ]] || ifunc_guard "$t" "$d" || failed=1
        # The requirement tests on real SQLite, the driver linked in.
        local odbc
        read -r -a odbc <<<"test_real $(long_tests "$t" odbc) test_multi"
        for p in "${odbc[@]}"; do
            stale "$d/$p" "tests/$p.c" tests/tt.h obx.h ibx.h "$GW/$t/sqlite3odbc.o" &&
                cc_prog "$t" "$d/$p" -DTT_NO_DRIVER_MANAGER "tests/$p.c" "$GW/$t/sqlite3odbc.o" "$GW/$t/sqlite3.o"
            rm -f "$rundir/"*.db*
            conn="Driver={SQLite3};Database=$rundir/$p.db;JournalMode=WAL;SyncPragma=NORMAL;Timeout=5000;"
            if [[ $p == test_multi ]]; then
                run_test "$t" "$p sqlite" "$d/$p.log" "$d/$p" sqlite "${conn/$p.db/t1.db}" \
                    "${conn/$p.db/t2.db}" "${conn/$p.db/t3.db}" || failed=1
            else
                run_test "$t" "$p sqlite" "$d/$p.log" "$d/$p" sqlite "$conn" || failed=1
            fi
        done
        # The same on the sqlite3-API build (backend sqlite3): test_real and
        # test_multi link SQLite only; test_outbox and test_inbox keep ODBC
        # side connections (the driver linked in, for the test's own use).
        local s3
        read -r -a s3 <<<"test_real test_multi $(long_tests "$t" sqlite3)"
        for p in "${s3[@]}"; do
            local objs=("$GW/$t/sqlite3.o")
            [[ $p == test_outbox || $p == test_inbox ]] && objs=("$GW/$t/sqlite3odbc.o" "$GW/$t/sqlite3.o")
            stale "$d/${p}_sqlite3" "tests/$p.c" tests/tt.h obx.h ibx.h "${objs[@]}" &&
                cc_prog "$t" "$d/${p}_sqlite3" -DTT_NO_DRIVER_MANAGER -DOBX_SQLITE3_API -DIBX_SQLITE3_API \
                    -isystem "$SRC" "tests/$p.c" "${objs[@]}"
            rm -f "$rundir/"*.db*
            conn="Driver={SQLite3};Database=$rundir/$p.db;JournalMode=WAL;SyncPragma=NORMAL;Timeout=5000;"
            if [[ $p == test_multi ]]; then
                run_test "$t" "$p sqlite3" "$d/${p}_sqlite3.log" "$d/${p}_sqlite3" sqlite3 "${conn/$p.db/t1.db}" \
                    "${conn/$p.db/t2.db}" "${conn/$p.db/t3.db}" || failed=1
            else
                run_test "$t" "$p sqlite3" "$d/${p}_sqlite3.log" "$d/${p}_sqlite3" sqlite3 "$conn" || failed=1
            fi
        done
    done
    return $failed
}

# each FUNCTION TARGET...: one job per target, at the same time (the tests
# mostly wait on timers, and qemu runs one core each); the output of each
# comes out whole, in the order given. GW_SERIAL=1 runs them one by one.
each() {
    local fn=$1 t failed=0 start; shift
    local -A pid=()
    odbc_shim
    if [[ ${GW_SERIAL:-0} == 1 || $# -eq 1 ]]; then
        for t in "$@"; do
            start=$SECONDS
            "$fn" "$t" || failed=1
            echo "cross: $t: $fn took $((SECONDS - start)) s"
        done
        return $failed
    fi
    for t in "$@"; do
        mkdir -p "$GW/$t"
        ( start=$SECONDS; rc=0; "$fn" "$t" || rc=$?
          echo "cross: $t: $fn took $((SECONDS - start)) s"; exit $rc ) >"$GW/$t/$fn.out" 2>&1 &
        pid[$t]=$!
    done
    for t in "$@"; do
        wait "${pid[$t]}" || failed=1
        cat "$GW/$t/$fn.out"
    done
    return $failed
}

case ${1:-} in
    shim) odbc_shim ;;
    sources) sources ;;
    objects) shift; odbc_shim
             for t in "$@"; do target "$t"; driver_objects "$t"; done ;;
    build) shift; each build "$@" ;;
    run) shift; each run_examples "$@" ;;
    test) shift; each tests "$@" ;;
    *) die "usage: $0 shim|sources|objects|build|run|test TARGET..." ;;
esac

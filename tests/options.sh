#!/usr/bin/env bash
# tests/options.sh - the compile-time options a gateway build may need,
# which no other target builds:
#   OBX_NO_THREADS / IBX_NO_THREADS          no pthreads
#   OBX_NO_POSIX_CLOCK / IBX_NO_POSIX_CLOCK  no clock_gettime()/nanosleep()
#   OBX_NO_WAKE_SOCKET / IBX_NO_WAKE_SOCKET  no sockets (no cross-process wake-up)
#   OBX_TERSE_MESSAGES / IBX_TERSE_MESSAGES  errors and log lines without their
#                                            explanations (CORE-TERSE-MESSAGES
#                                            in test_unit checks the text)
#   GW_PROFILE (the gateway profile's defines, from the Makefile): below
# For each set (and both together): each header's implementation object
# compiles with -Werror and calls none of what the option leaves out, and the
# fake-ODBC tests build with -Werror and pass, on the host and, when its
# cross compiler and qemu are there (tests/deps.sh cross), static for armhf
# under qemu. WARN: the warning flags. The sets build and run JOBS at a time
# (default: the number of cores; the compiles are what takes the time).
set -euo pipefail
cd "$(dirname "$0")/.."
CC=${CC:-cc}
HOST_CC=$CC
CSTD="-std=c99 -D_POSIX_C_SOURCE=200809L"
WARN=${WARN:-}
out=build/options
mkdir -p "$out"

threads="-DOBX_NO_THREADS -DIBX_NO_THREADS"
clock="-DOBX_NO_POSIX_CLOCK -DIBX_NO_POSIX_CLOCK"
nowake="-DOBX_NO_WAKE_SOCKET -DIBX_NO_WAKE_SOCKET"
terse="-DOBX_TERSE_MESSAGES -DIBX_TERSE_MESSAGES"
failed=0

# check_set NAME DEFINES FORBIDDEN-SYMBOL-REGEX, with CC, XFLAGS (extra
# compiler flags), NM, RUN (the runner, empty on the host) and LINK (empty,
# or tests/gwlink.sh for a static ARM link) set.
check_set() {
    local name=$1 defs=$2 forbidden=$3 h bad t rc
    for h in obx ibx; do
        # shellcheck disable=SC2086
        if ! $CC $CSTD $WARN $XFLAGS -Werror -O2 $defs -c "tests/impl_$h.c" -o "$out/$name-$h.o" 2>"$out/$name-$h.err"; then
            cat "$out/$name-$h.err"
            echo "FAIL options $name: $h.h does not compile with $defs"
            failed=1
            continue
        fi
        bad=$($NM -u "$out/$name-$h.o" | awk '{ print $2 }' | grep -E "$forbidden" | tr '\n' ' ' || true)
        if [[ -n $bad ]]; then
            echo "FAIL options $name: $h.h still calls $bad"
            failed=1
        fi
    done
    for t in test_unit test_sqlserver; do
        # shellcheck disable=SC2086
        if ! $LINK $CC $CSTD $WARN $XFLAGS -Werror -O1 -g -pthread $defs "tests/$t.c" tests/fake_odbc.c -o "$out/$name-$t" 2>"$out/$name-$t.err"; then
            cat "$out/$name-$t.err"
            echo "FAIL options $name: tests/$t.c does not compile with $defs"
            failed=1
            continue
        fi
        rc=0
        $RUN "$out/$name-$t" >"$out/$name-$t.log" 2>&1 || rc=$?
        if [[ $rc -ne 0 ]] || ! tail -n 1 "$out/$name-$t.log" | grep -qE '^[1-9][0-9]* passed, 0 failed$'; then
            grep -E '^(FAIL|    )' "$out/$name-$t.log" | head -n 20
            echo "FAIL options $name: $t (exit status $rc; $(tail -n 1 "$out/$name-$t.log"))"
            failed=1
        else
            echo "PASS options $name: $t ($(tail -n 1 "$out/$name-$t.log"))"
        fi
    done
}

# Each set is a background job (JOBS at once) writing $out/NAME.out and
# NAME.failed; their lines come out whole, in order, once all have ended.
jobs_max=${JOBS:-$(nproc 2>/dev/null || echo 2)}
set_names=()
spawn_set() { # NAME DEFINES FORBIDDEN
    while [[ $(jobs -rp | wc -l) -ge $jobs_max ]]; do wait -n || true; done
    rm -f "$out/$1.failed"
    ( failed=0; check_set "$@"; echo "$failed" >"$out/$1.failed" ) >"$out/$1.out" 2>&1 &
    set_names+=("$1")
}
sets() {
    spawn_set "$1no-threads" "$threads" '^pthread_'
    spawn_set "$1no-posix-clock" "$clock" '^(clock_gettime|nanosleep)$'
    spawn_set "$1neither" "$threads $clock" '^(pthread_|clock_gettime$|nanosleep$)'
    spawn_set "$1no-wake-socket" "$nowake" '^(socket|bind|sendto|recv|poll|connect|unlink)$'
    spawn_set "$1terse" "$terse" '^$'
}
XFLAGS="" NM=nm RUN="" LINK=""
sets ""
if command -v arm-linux-gnueabihf-gcc >/dev/null && command -v qemu-arm-static >/dev/null; then
    tests/cross.sh shim
    CC=arm-linux-gnueabihf-gcc XFLAGS="-static -isystem build/gw/odbc-inc" NM=arm-linux-gnueabihf-nm RUN=qemu-arm-static
    LINK="tests/gwlink.sh link armhf"
    sets "armhf-"
fi
wait
for name in "${set_names[@]}"; do
    cat "$out/$name.out"
    [[ $(cat "$out/$name.failed" 2>/dev/null) == 0 ]] || failed=1
done
# The gateway profile (GW_PROFILE, from the Makefile: SQLite only, no
# joins, providers, metrics text, dead-letter tools or wake socket):
# - each header's implementation compiles with -Werror and defines none of
#   the left-out public functions (host and armhf);
# - a call to each left-out function is a compile error (undeclared), and
#   the same call compiles without the profile (so this check can fail);
# - quickstart and webhook_inbox built with it run on SQLite as they do
#   in the default build (CORE-GATEWAY-PROFILE).
profile_check() {
    local cc=$1 nm=$2 xflags=$3 tag=$4 h bad
    for h in obx ibx; do
        # shellcheck disable=SC2086
        if ! $cc $CSTD $WARN $xflags -Werror -Os $GW_PROFILE -c "tests/impl_$h.c" -o "$out/profile-$tag-$h.o" \
            2>"$out/profile-$tag-$h.err"; then
            cat "$out/profile-$tag-$h.err"
            echo "FAIL options profile-$tag: $h.h does not compile with the gateway profile"
            failed=1
            continue
        fi
        bad=$($nm --defined-only "$out/profile-$tag-$h.o" | awk '{ print $3 }' |
              grep -E '^(obx|ibx)_(provider_|router_|metrics_text|dead_|join_|message_header)' | tr '\n' ' ' || true)
        # The left-out dialects' own SQL (session setup, version query) is gone too.
        bad+=$(strings "$out/profile-$tag-$h.o" | grep -E "SHOW server_version|SERVERPROPERTY|SELECT VERSION\(\)" |
               tr '\n' ' ' || true)
        if [[ -n $bad ]]; then
            echo "FAIL options profile-$tag: $h.h still holds $bad"
            failed=1
        else
            echo "PASS options profile-$tag: $h.h compiles without the left-out functions"
        fi
    done
}
left_out="obx_provider_create obx_provider_destroy obx_provider_refresh obx_provider_count obx_provider_store
obx_provider_store_id obx_provider_last_error obx_router_get obx_router_get_guid obx_metrics_text
obx_dead_list obx_dead_replay obx_dead_purge obx_join_start obx_join_attach obx_join_attach_tx
obx_join_report obx_join_report_tx obx_join_get obx_join_cancel obx_join_enqueue_wait
obx_join_wait_handler obx_message_header obx_message_header_at ibx_provider_create ibx_router_get
ibx_metrics_text ibx_dead_list ibx_dead_replay ibx_dead_purge ibx_message_header ibx_message_header_at"
if [[ -n ${GW_PROFILE:-} ]]; then
    profile_check "$HOST_CC" nm "" host
    if command -v arm-linux-gnueabihf-gcc >/dev/null; then
        profile_check arm-linux-gnueabihf-gcc arm-linux-gnueabihf-nm "-isystem build/gw/odbc-inc" armhf
    fi
    if command -v g++ >/dev/null; then
        # shellcheck disable=SC2086
        if g++ -std=c++11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror $GW_PROFILE -x c++ -c tests/impl_both.c \
            -o "$out/profile-cxx.o" 2>"$out/profile-cxx.err"; then
            echo "PASS options profile: both implementations compile as C++ with the gateway profile"
        else
            cat "$out/profile-cxx.err"
            echo "FAIL options profile: the gateway profile does not compile as C++"
            failed=1
        fi
    fi
    n=0
    for fn in $left_out; do
        printf '#include "../../obx.h"\n#include "../../ibx.h"\nvoid (*probe(void))(void);\nvoid (*probe(void))(void) { return (void (*)(void))%s; }\n' \
            "$fn" >"$out/probe.c"
        # shellcheck disable=SC2086
        if ! $HOST_CC $CSTD -fsyntax-only "$out/probe.c" 2>"$out/probe.err"; then
            cat "$out/probe.err"
            echo "FAIL options profile: $fn does not compile even without the profile"
            failed=1
        elif $HOST_CC $CSTD -fsyntax-only $GW_PROFILE "$out/probe.c" 2>"$out/probe.err" ||
            ! grep -q "undeclared" "$out/probe.err"; then
            echo "FAIL options profile: $fn is still declared with the profile"
            failed=1
        else
            n=$((n + 1))
        fi
    done
    [[ $n -eq $(echo "$left_out" | wc -w) ]] &&
        echo "PASS options profile: $n left-out functions are undeclared (a use does not compile)"
    # shellcheck disable=SC2086
    if ! $HOST_CC $CSTD $WARN -Werror -O1 -pthread $GW_PROFILE tests/profile_refuse.c -o "$out/profile-refuse" -lodbc \
        2>"$out/profile-refuse.err"; then
        cat "$out/profile-refuse.err"
        echo "FAIL options profile: tests/profile_refuse.c does not build with the gateway profile"
        failed=1
    fi
    for ex in quickstart webhook_inbox; do
        # shellcheck disable=SC2086
        if ! $HOST_CC $CSTD $WARN -Werror -O1 -pthread $GW_PROFILE "examples/$ex.c" -o "$out/profile-$ex" -lodbc \
            2>"$out/profile-$ex.err"; then
            cat "$out/profile-$ex.err"
            echo "FAIL options profile: examples/$ex.c does not build with the gateway profile"
            failed=1
        fi
    done
    rm -rf "$out/profile-run"
    mkdir -p "$out/profile-run"
    if [[ $failed -eq 0 ]] &&
        (cd "$out/profile-run" && ../profile-quickstart >quickstart.log 2>&1 &&
             grep -q 'done: 2 delivered, 2 retries, 1 dead' quickstart.log &&
             ../profile-webhook_inbox --sample | ../profile-webhook_inbox >webhook.log 2>&1 &&
             grep -q 'each event exactly once' webhook.log); then
        echo "PASS CORE-GATEWAY-PROFILE sqlite quickstart and webhook_inbox built with the gateway profile run as in the default build"
    else
        cat "$out/profile-run/"*.log 2>/dev/null | tail -n 20
        echo "FAIL CORE-GATEWAY-PROFILE sqlite quickstart/webhook_inbox with the gateway profile"
        failed=1
    fi
    # CORE-NO-ENVELOPE, OBX-NO-ORDERING-KEYS: what the profile refuses, by name;
    # OBX-NO-JOIN-SCHEMA: what it deploys.
    if [[ -x $out/profile-refuse ]] && (cd "$out/profile-run" && ../profile-refuse >refuse.log 2>&1); then
        grep '^PASS' "$out/profile-run/refuse.log"
    else
        tail -n 20 "$out/profile-run/refuse.log" 2>/dev/null
        echo "FAIL CORE-NO-ENVELOPE / OBX-NO-ORDERING-KEYS / OBX-NO-JOIN-SCHEMA sqlite: tests/profile_refuse.c"
        failed=1
    fi
fi
# Terse messages with the profile: warning-free, and an explanation the
# default object holds is gone from the terse one (so this check can fail).
if [[ -n ${GW_PROFILE:-} ]]; then
    for h in obx ibx; do
        for v in default terse; do
            defs=$GW_PROFILE
            [[ $v == terse ]] && defs+=" $terse"
            # shellcheck disable=SC2086
            $HOST_CC $CSTD $WARN -Werror -Os $defs -c "tests/impl_$h.c" -o "$out/profile-$v-$h.o" \
                2>"$out/profile-$v-$h.err" || { cat "$out/profile-$v-$h.err"; failed=1; }
        done
        # grep on the object itself: "strings | grep -q" fails under pipefail
        # whenever grep quits before strings has written everything (SIGPIPE).
        if grep -qa 'none of them control characters' "$out/profile-default-$h.o" &&
            ! grep -qa 'none of them control characters' "$out/profile-terse-$h.o"; then
            echo "PASS options profile-terse: $h.h ($(size -B "$out/profile-terse-$h.o" | awk 'NR == 2 { print $1 }') bytes of text, $(size -B "$out/profile-default-$h.o" | awk 'NR == 2 { print $1 }') without)"
        else
            echo "FAIL options profile-terse: $h.h's explanations are not left out"
            failed=1
        fi
    done
fi
if [[ $failed -ne 0 ]]; then
    echo "check-options: FAILED"
    exit 1
fi
echo "check-options: ok (OBX/IBX_NO_THREADS, OBX/IBX_NO_POSIX_CLOCK, both, OBX/IBX_NO_WAKE_SOCKET, OBX/IBX_TERSE_MESSAGES${GW_PROFILE:+, the gateway profile}; host${RUN:+ and armhf})"

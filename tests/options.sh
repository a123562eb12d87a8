#!/usr/bin/env bash
# tests/options.sh - the compile-time options a gateway build may need,
# which no other target builds:
#   OBX_NO_THREADS / IBX_NO_THREADS          no pthreads
#   OBX_NO_POSIX_CLOCK / IBX_NO_POSIX_CLOCK  no clock_gettime()/nanosleep()
#   OBX_NO_WAKE_SOCKET / IBX_NO_WAKE_SOCKET  no sockets (no cross-process wake-up)
# For each set (and both together): each header's implementation object
# compiles with -Werror and calls none of what the option leaves out, and the
# fake-ODBC tests build with -Werror and pass, on the host and, when its
# cross compiler and qemu are there (tests/deps.sh cross), static for armhf
# under qemu. WARN: the warning flags.
set -euo pipefail
cd "$(dirname "$0")/.."
CC=${CC:-cc}
CSTD="-std=c99 -D_POSIX_C_SOURCE=200809L"
WARN=${WARN:-}
out=build/options
mkdir -p "$out"

threads="-DOBX_NO_THREADS -DIBX_NO_THREADS"
clock="-DOBX_NO_POSIX_CLOCK -DIBX_NO_POSIX_CLOCK"
nowake="-DOBX_NO_WAKE_SOCKET -DIBX_NO_WAKE_SOCKET"
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

sets() {
    check_set "$1no-threads" "$threads" '^pthread_'
    check_set "$1no-posix-clock" "$clock" '^(clock_gettime|nanosleep)$'
    check_set "$1neither" "$threads $clock" '^(pthread_|clock_gettime$|nanosleep$)'
    check_set "$1no-wake-socket" "$nowake" '^(socket|bind|sendto|recv|poll|connect|unlink)$'
}
XFLAGS="" NM=nm RUN="" LINK=""
sets ""
if command -v arm-linux-gnueabihf-gcc >/dev/null && command -v qemu-arm-static >/dev/null; then
    tests/cross.sh shim
    CC=arm-linux-gnueabihf-gcc XFLAGS="-static -isystem build/gw/odbc-inc" NM=arm-linux-gnueabihf-nm RUN=qemu-arm-static
    LINK="tests/gwlink.sh link armhf"
    sets "armhf-"
fi
if [[ $failed -ne 0 ]]; then
    echo "check-options: FAILED"
    exit 1
fi
echo "check-options: ok (OBX/IBX_NO_THREADS, OBX/IBX_NO_POSIX_CLOCK, both, OBX/IBX_NO_WAKE_SOCKET; host${RUN:+ and armhf})"

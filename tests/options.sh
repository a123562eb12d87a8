#!/usr/bin/env bash
# tests/options.sh - the compile-time options a gateway build may need,
# which no other target builds:
#   OBX_NO_THREADS / IBX_NO_THREADS          no pthreads
#   OBX_NO_POSIX_CLOCK / IBX_NO_POSIX_CLOCK  no clock_gettime()/nanosleep()
# For each set (and both together): each header's implementation object
# compiles with -Werror and calls none of what the option leaves out, and the
# fake-ODBC tests build with -Werror and pass. WARN: the warning flags.
set -euo pipefail
cd "$(dirname "$0")/.."
CC=${CC:-cc}
CSTD="-std=c99 -D_POSIX_C_SOURCE=200809L"
WARN=${WARN:-}
out=build/options
mkdir -p "$out"

threads="-DOBX_NO_THREADS -DIBX_NO_THREADS"
clock="-DOBX_NO_POSIX_CLOCK -DIBX_NO_POSIX_CLOCK"
failed=0

# set_name DEFINES FORBIDDEN-SYMBOL-REGEX
check_set() {
    local name=$1 defs=$2 forbidden=$3 h bad t rc
    for h in obx ibx; do
        # shellcheck disable=SC2086
        if ! $CC $CSTD $WARN -Werror -O2 $defs -c "tests/impl_$h.c" -o "$out/$name-$h.o" 2>"$out/$name-$h.err"; then
            cat "$out/$name-$h.err"
            echo "FAIL options $name: $h.h does not compile with $defs"
            failed=1
            continue
        fi
        bad=$(nm -u "$out/$name-$h.o" | awk '{ print $2 }' | grep -E "$forbidden" | tr '\n' ' ' || true)
        if [[ -n $bad ]]; then
            echo "FAIL options $name: $h.h still calls $bad"
            failed=1
        fi
    done
    for t in test_unit test_sqlserver; do
        # shellcheck disable=SC2086
        if ! $CC $CSTD $WARN -Werror -O1 -g -pthread $defs "tests/$t.c" tests/fake_odbc.c -o "$out/$name-$t" 2>"$out/$name-$t.err"; then
            cat "$out/$name-$t.err"
            echo "FAIL options $name: tests/$t.c does not compile with $defs"
            failed=1
            continue
        fi
        rc=0
        "$out/$name-$t" >"$out/$name-$t.log" 2>&1 || rc=$?
        if [[ $rc -ne 0 ]] || ! tail -n 1 "$out/$name-$t.log" | grep -qE '^[1-9][0-9]* passed, 0 failed$'; then
            grep -E '^(FAIL|    )' "$out/$name-$t.log" | head -n 20
            echo "FAIL options $name: $t (exit status $rc; $(tail -n 1 "$out/$name-$t.log"))"
            failed=1
        else
            echo "PASS options $name: $t ($(tail -n 1 "$out/$name-$t.log"))"
        fi
    done
}

check_set no-threads "$threads" '^pthread_'
check_set no-posix-clock "$clock" '^(clock_gettime|nanosleep)$'
check_set neither "$threads $clock" '^(pthread_|clock_gettime$|nanosleep$)'
if [[ $failed -ne 0 ]]; then
    echo "check-options: FAILED"
    exit 1
fi
echo "check-options: ok (OBX/IBX_NO_THREADS, OBX/IBX_NO_POSIX_CLOCK, both)"

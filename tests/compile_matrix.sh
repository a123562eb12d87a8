#!/usr/bin/env bash
# compile_matrix.sh BUILD_DIR: both implementations compiled the way other
# people's builds compile them: gcc and clang; C99, C11, C17 and C2x, strict
# and GNU; with and without -pthread; with no feature-test macro and with each
# common one; -Wall -Wextra -Werror -pedantic. Then as C++11/17/20. Each
# combination must compile; a failure prints the compiler's first error.
# Prints "PASS CORE-COMPILE-MATRIX ..." or "FAIL ..." and exits non-zero on a
# failure. MATRIX_QUICK=1 tries one compiler only. The C combinations compile
# JOBS at a time (default: the number of cores).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(cd "${1:-build}" && pwd)/matrix
mkdir -p "$out"
compilers=(gcc clang)
[ "${MATRIX_QUICK:-}" = 1 ] && compilers=(gcc)
tried=0
failed=0

jobs_max=${JOBS:-$(nproc 2>/dev/null || echo 2)}
rm -f "$out"/try-*.fail "$out"/try-*.log
# try compiler flags...: a background job (JOBS at once); a failure leaves
# its line in $out/try-N.fail, counted once all have ended.
try() {
    local cc=$1 n; shift
    tried=$((tried + 1))
    n=$tried
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
    { "$cc" "$@" -Wall -Wextra -Werror -pedantic -fsyntax-only "$here/impl_both.c" 2>"$out/try-$n.log" ||
        echo "    $cc $*: $(grep -m 1 -E 'error' "$out/try-$n.log")" >"$out/try-$n.fail"; } &
}

for cc in "${compilers[@]}"; do
    command -v "$cc" >/dev/null || { echo "FAIL CORE-COMPILE-MATRIX $cc not installed (tests/deps.sh check)"; exit 1; }
    stds=(c99 c11 c17 gnu99 gnu11)
    "$cc" -std=c2x -x c -c /dev/null -o /dev/null 2>/dev/null && stds+=(c2x)
    for std in "${stds[@]}"; do
        for thread in "" -pthread; do
            for feature in "" -D_POSIX_C_SOURCE=200809L -D_XOPEN_SOURCE=700 -D_GNU_SOURCE; do
                # shellcheck disable=SC2086
                try "$cc" -std=$std $thread $feature
            done
        done
    done
done
wait
for f in "$out"/try-*.fail; do
    [ -e "$f" ] || continue
    failed=$((failed + 1))
    cat "$f"
done
# Two translation units, each implementation in its own, strict C99 with no
# feature-test macro, linked with a program that uses both.
for cc in "${compilers[@]}"; do
    tried=$((tried + 1))
    if ! { "$cc" -std=c99 -pthread -Wall -Wextra -Werror -pedantic -c "$here/impl_obx.c" -o "$out/obx.o" &&
        "$cc" -std=c99 -pthread -Wall -Wextra -Werror -pedantic -c "$here/impl_ibx.c" -o "$out/ibx.o" &&
        "$cc" -std=c99 -pthread -Wall -Wextra -Werror -pedantic -c "$here/link_main.c" -o "$out/main.o" &&
        "$cc" -std=c99 -D_POSIX_C_SOURCE=200809L -pthread -c "$here/fake_odbc.c" -o "$out/fake.o" &&
        "$cc" -pthread "$out/main.o" "$out/obx.o" "$out/ibx.o" "$out/fake.o" -o "$out/link_two" &&
        "$out/link_two" >/dev/null; } 2>"$out/err.log"; then
        failed=$((failed + 1))
        echo "    $cc -std=c99 two translation units: $(grep -m 1 -E 'error' "$out/err.log")"
    fi
done
for cxx in g++ clang++; do
    [ "${MATRIX_QUICK:-}" = 1 ] && [ "$cxx" = clang++ ] && continue
    for std in c++11 c++17 c++20; do
        tried=$((tried + 1))
        if ! "$cxx" -x c++ -std=$std -Wall -Wextra -Werror -pedantic -pthread -fsyntax-only \
            "$here/impl_both.c" 2>"$out/err.log"; then
            failed=$((failed + 1))
            echo "    $cxx -std=$std: $(grep -m 1 -E 'error' "$out/err.log")"
        fi
    done
done
# Where the implementation cannot arrange POSIX itself (strict mode, and a
# system header came first), its #error says exactly what to add.
order_ok=1
for h in obx ibx; do
    H=$(echo "$h" | tr a-z A-Z)
    printf '#include <stdio.h>\n#define %s_IMPLEMENTATION\n#include "%s/%s.h"\n' "$H" "$here/.." "$h" >"$out/order_$h.c"
    for thread in "" -pthread; do
        # shellcheck disable=SC2086
        if gcc -std=c99 $thread -fsyntax-only "$out/order_$h.c" 2>"$out/order.log"; then
            echo "    $h.h after <stdio.h>, -std=c99 $thread: compiled, expected the #error"; order_ok=0
        elif ! grep -q "error: #error \"$h: the implementation needs POSIX 2008.*in the file that defines ${H}_IMPLEMENTATION, include $h.h (with that define) before any other header, or compile that file with -D_POSIX_C_SOURCE=200809L\"" "$out/order.log"; then
            echo "    $h.h after <stdio.h>, -std=c99 $thread: not the #error that says what to add: $(grep -m 1 error "$out/order.log")"; order_ok=0
        fi
    done
done
if [ "$order_ok" = 1 ]; then
    echo "PASS CORE-COMPILE-FEATURES-ORDER build strict C99 with a system header before the implementation stops with an #error naming the fix (include it first, or -D_POSIX_C_SOURCE=200809L)"
else
    echo "FAIL CORE-COMPILE-FEATURES-ORDER build (above)"
fi
if [ "$failed" -eq 0 ]; then
    echo "PASS CORE-COMPILE-MATRIX build both implementations compile warning-free in all $tried combinations of compiler, standard, -pthread and feature-test macro, and linked from two translation units"
else
    echo "FAIL CORE-COMPILE-MATRIX build $failed of $tried combinations do not compile (above)"
    exit 1
fi
[ "$order_ok" = 1 ]

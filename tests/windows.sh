#!/usr/bin/env bash
# tests/windows.sh - the Windows stage of make check (make check-windows).
#
#   1. Both headers built for 64-bit Windows with mingw-w64 (win32 thread
#      model: the headers' own Win32 layer, never winpthreads) with the
#      strict warnings and -Werror: one translation unit and two, C99 and C11,
#      OBX_NO_THREADS / OBX_NO_POSIX_CLOCK, OBX_STATIC.
#   2. Linked against Windows' own ODBC (-lodbc32): both headers in two
#      objects, and examples/webhook_inbox.c.
#   3. CORE-WIN32-IMPORTS: every program imports only KERNEL32, msvcrt and
#      (the odbc32 ones) ODBC32: no winpthreads DLL, nothing else to ship.
#   4. The fake-ODBC tests (fake_selftest, test_unit, test_sqlserver) and the
#      link checks run under 64-bit Wine; each must end "N passed, 0 failed".
#
# Wine's prefix (its C: drive and registry) lives in build/win/prefix; the
# first run creates it (several seconds), later runs reuse it. make passes
# WARN (the Makefile's strict flags). The packages: tests/deps.sh windows.
set -euo pipefail
cd "$(dirname "$0")/.."
readonly OUT=build/win
CC=${WIN_CC:-x86_64-w64-mingw32-gcc}
OBJDUMP=${WIN_OBJDUMP:-x86_64-w64-mingw32-objdump}
WARN=${WARN:-}
t0=$SECONDS

die() { echo "check-windows: FAIL $*" >&2; exit 1; }
command -v "$CC" >/dev/null || die "no $CC (tests/deps.sh windows)"
WINE=
for w in wine64 /usr/lib/wine/wine64 wine; do
    if command -v "$w" >/dev/null 2>&1; then WINE=$(command -v "$w"); break; fi
done
[[ -n $WINE ]] || die "no wine64 (tests/deps.sh windows)"
mkdir -p "$OUT"

# ---- 1, 2: builds ----------------------------------------------------------
# As on Linux: the test programs at -O2 (the warnings that need data-flow
# analysis), the link checks unoptimized; the variants only compiled.
cc() { # shellcheck disable=SC2086
    "$CC" $WARN -Werror "$@" || die "build: $CC $*"
}
cc -std=c11 -fsyntax-only tests/impl_both.c
cc -std=c99 -fsyntax-only -DOBX_NO_THREADS -DIBX_NO_THREADS tests/impl_both.c
cc -std=c99 -fsyntax-only -DOBX_NO_THREADS -DIBX_NO_THREADS -DOBX_NO_POSIX_CLOCK -DIBX_NO_POSIX_CLOCK tests/impl_both.c
cc -std=c99 -c tests/impl_both.c -o "$OUT/impl_both.o"
cc -std=c99 -c tests/impl_obx.c -o "$OUT/impl_obx.o"
cc -std=c99 -c tests/impl_ibx.c -o "$OUT/impl_ibx.o"
cc -std=c99 tests/link_main.c "$OUT/impl_both.o" tests/fake_odbc.c -o "$OUT/link_one.exe"
cc -std=c99 tests/link_main.c "$OUT/impl_obx.o" "$OUT/impl_ibx.o" tests/fake_odbc.c -o "$OUT/link_two.exe"
cc -std=c99 tests/link_main.c "$OUT/impl_obx.o" "$OUT/impl_ibx.o" -o "$OUT/link_odbc32.exe" -lodbc32
cc -std=c99 examples/webhook_inbox.c -o "$OUT/webhook_inbox.exe" -lodbc32
cc -std=c99 -DOBX_STATIC -DIBX_STATIC tests/test_unit.c tests/fake_odbc.c -o "$OUT/test_unit_static.exe"
tests_run="fake_selftest test_unit test_sqlserver test_unit_static"
cc -std=c99 -O2 tests/fake_selftest.c tests/fake_odbc.c -o "$OUT/fake_selftest.exe"
cc -std=c99 -O2 tests/test_unit.c tests/fake_odbc.c -o "$OUT/test_unit.exe"
cc -std=c99 -O2 tests/test_sqlserver.c tests/fake_odbc.c -o "$OUT/test_sqlserver.exe"
echo "check-windows: built with $("$CC" -dumpversion) (C99, C11, one and two TUs, OBX_NO_THREADS, OBX_NO_POSIX_CLOCK, OBX_STATIC; -lodbc32) in $((SECONDS - t0)) s"

# ---- 3: imports --------------------------------------------------------------
for exe in "$OUT"/*.exe; do
    dlls=$("$OBJDUMP" -p "$exe" | awk '/DLL Name:/ { print $3 }' | sort -u | tr '\n' ' ')
    for d in $dlls; do
        case ${d,,} in
            kernel32.dll | msvcrt.dll | odbc32.dll) ;;
            *) echo "FAIL CORE-WIN32-IMPORTS build ${exe##*/} imports $d (only KERNEL32, msvcrt, ODBC32 allowed)"; exit 1 ;;
        esac
    done
    case ${exe##*/} in
        link_odbc32.exe | webhook_inbox.exe)
            [[ ${dlls,,} == *odbc32.dll* ]] || { echo "FAIL CORE-WIN32-IMPORTS build ${exe##*/} does not import ODBC32.dll"; exit 1; } ;;
    esac
done
echo "PASS CORE-WIN32-IMPORTS build every program imports only KERNEL32, msvcrt and ODBC32 (no winpthreads)"

# ---- 4: under Wine -----------------------------------------------------------
export WINEPREFIX=$PWD/$OUT/prefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
t1=$SECONDS
if [[ ! -f $WINEPREFIX/system.reg ]]; then
    "$WINE" wineboot --init >"$OUT/wineboot.log" 2>&1 || { cat "$OUT/wineboot.log" >&2; die "wineboot (log: $OUT/wineboot.log)"; }
    echo "check-windows: Wine prefix created in $((SECONDS - t1)) s ($("$WINE" --version 2>/dev/null || echo wine))"
fi
failed=0
for t in link_one link_two $tests_run; do
    rc=0
    "$WINE" "$OUT/$t.exe" >"$OUT/$t.out" 2>"$OUT/$t.err" || rc=$?
    tr -d '\r' <"$OUT/$t.out" >"$OUT/$t.log" # text mode: Windows ends lines in CR LF
    grep -E '^(PASS|FAIL|SKIP|link:)' "$OUT/$t.log" || true
    case $t in
        link_*) grep -qx 'link: ok' "$OUT/$t.log" && [[ $rc -eq 0 ]] || { echo "FAIL $t wine exited $rc"; failed=1; } ;;
        *) if ! grep -qE '^[0-9]+ passed, 0 failed$' "$OUT/$t.log" || [[ $rc -ne 0 ]]; then
               echo "FAIL $t wine exited $rc (output: $OUT/$t.log, $OUT/$t.err)"; failed=1
           else
               echo "$t.exe: $(tail -n 1 "$OUT/$t.log")"
           fi ;;
    esac
done
# Wine's server for this prefix exits by itself; end it now so that nothing
# of the stage outlives it.
"$(dirname "$WINE")/wineserver" -k 2>/dev/null || wineserver -k 2>/dev/null || true
[[ $failed -eq 0 ]] || die "a program failed under Wine"
echo "check-windows: ok (mingw-w64 builds warning-free, fake-ODBC tests pass under Wine) in $((SECONDS - t0)) s"

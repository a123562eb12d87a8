#!/usr/bin/env bash
# tests/size.sh [LABEL=DEFINES]... - what each header adds to a program: the
# size of an object that implements one header (tests/impl_obx.c,
# tests/impl_ibx.c), per header x define set x architecture x -Os/-O2.
#
#   tests/size.sh "all dialects=" "sqlite only=-DOBX_NO_POSTGRESQL -DIBX_NO_POSTGRESQL ..."
#
# Each argument is one row set: a label, '=', then the -D flags for it
# (defines a header does not know change nothing, and the row says so only by
# its figures). Sizes are KB (1000 bytes), two figures per cell:
#   text   code plus read-only data (size's Berkeley "text": what goes to flash)
#   .text  the code section alone
# An architecture whose compiler is missing prints "-" (tests/deps.sh cross).
#
# A second table: what a program keeps of the header when linked the way a
# gateway would link it, -ffunction-sections -fdata-sections and
# --gc-sections, static with the SQLite driver: examples/quickstart.c (obx.h)
# and examples/webhook_inbox.c (ibx.h) with their implementation compiled
# apart, and the kept input sections of that object summed (code, strings,
# tables, unwind tables; strings before the linker merges their tails). It
# needs the driver objects of `make cross ARCH=...` (build/gw/<arch>);
# without them the cell is "-". SIZE_PROGRAMS=0 skips it.
# A row set whose defines name OBX_SQLITE3_API is the sqlite3-API build: its
# program is examples/native_sqlite.c for obx.h (quickstart writes through
# ODBC), linked with SQLite's amalgamation only. A third table: the whole
# static gateway programs of make static / make cross (build/gw/<target>),
# stripped, the ODBC build (driver + SQLite) beside the sqlite3-API one.
# SIZE_BUDGET: "LABEL:HEADER:ARCH=KB ..." (the Makefile's, docs/GATEWAYS.md
# "The size budget"): each HEADER:ARCH cell of the kept table in the row set
# LABEL is checked against its KB; a line per cell says the margin, or that it
# is exceeded, and then size.sh fails. A cell not measured ("-": a cross
# compiler or the driver objects missing) fails it too; a LABEL no argument
# names is skipped with a note.
# SIZE_XFLAGS: more compiler flags for every cell (e.g.
# "-fno-asynchronous-unwind-tables -fno-unwind-tables": aarch64 objects
# carry about 6 KB of .eh_frame by default, counted in "text").
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/size
mkdir -p "$out"
[[ $# -gt 0 ]] || set -- "all dialects="

# arch|compiler|size program
arches=("x86_64|${HOST_CC:-gcc}|size" "aarch64|aarch64-linux-gnu-gcc|aarch64-linux-gnu-size"
        "armhf|arm-linux-gnueabihf-gcc|arm-linux-gnueabihf-size")
opts=(-Os -O2)
# ODBC headers whose unixodbc.h is sized by the compiler, for any target.
odbc=build/gw/odbc-inc
tests/cross.sh shim
# sqlite3.h for the cross compilers (the amalgamation's; tests/cross.sh sources)
lite=build/gw/src

kb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1000 }'; }

# cell HEADER DEFINES ARCH-SPEC OPT: "text/.text" in KB, or "-".
cell() {
    local h=$1 defs=$2 spec=$3 opt=$4 arch cc sz o text code
    IFS='|' read -r arch cc sz <<<"$spec"
    if ! command -v "$cc" >/dev/null || ! command -v "$sz" >/dev/null; then
        echo "-"
        return
    fi
    o=$out/$h-$arch$opt.o
    # shellcheck disable=SC2086
    $cc -std=c99 -D_POSIX_C_SOURCE=200809L $opt -pthread -isystem "$odbc" -isystem "$lite" $defs ${SIZE_XFLAGS:-} \
        -c "tests/impl_$h.c" -o "$o" || return 1
    text=$("$sz" -B "$o" | awk 'NR == 2 { print $1 }')
    code=$("$sz" -A "$o" | awk '$1 == ".text" { print $2 }')
    echo "$(kb "$text")/$(kb "$code")"
}

# kept MAP OBJECT: KB of OBJECT's input sections kept in the link map.
kept() {
    awk -v obj="$2" '
        function hex(s,   i, n, c) {
            n = 0
            s = tolower(substr(s, 3))
            for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)); n = n * 16 + c - 1 }
            return n
        }
        /^Linker script and memory map/ { on = 1; next }
        !on { next }
        /^ \.[^ ]+$/ { sec = $1; next }
        {
            if ($1 ~ /^\./) { sec = $1; a = $2; z = $3; f = $4 } else { a = $1; z = $2; f = $3 }
            if (sec ~ /^\.(text|rodata|data\.rel\.ro|eh_frame|ARM\.ex)/ && f != "" &&
                substr(f, length(f) - length(obj) + 1) == obj && hex(a) != 0)
                total += hex(z)
            sec = ""
        }
        END { printf "%.1f", total / 1000 }' "$1"
}

# prog_cell HEADER DEFINES ARCH-SPEC: KB the header's example keeps, or "-".
prog_cell() {
    local h=$1 defs=$2 spec=$3 arch cc sz ex d app driver
    IFS='|' read -r arch cc sz <<<"$spec"
    d=build/gw/$arch
    if ! command -v "$cc" >/dev/null || [[ ! -f $d/sqlite3odbc.o || ! -f $d/sqlite3.o ]]; then
        echo "-"
        return
    fi
    ex=quickstart driver=$d/sqlite3odbc.o
    [[ $defs == *SQLITE3_API* ]] && ex=native_sqlite driver=
    [[ $h == ibx ]] && ex=webhook_inbox
    app=$out/prog-$h-$arch
    # The example without its implementation define: that comes apart.
    { printf '#include <sql.h>\n#include <sqlext.h>\n'; grep -v "^#define ${h^^}_IMPLEMENTATION" "examples/$ex.c" |
        sed "s|\"\.\./\([oi]bx\.h\)\"|\"../../\1\"|"; } >"$app.c"
    # shellcheck disable=SC2086
    $cc -std=c99 -D_POSIX_C_SOURCE=200809L -Os -pthread -isystem "$odbc" -isystem "$lite" $defs ${SIZE_XFLAGS:-} \
        -ffunction-sections -fdata-sections -c "$app.c" -o "$app.o" || return 1
    # shellcheck disable=SC2086
    $cc -std=c99 -D_POSIX_C_SOURCE=200809L -Os -pthread -isystem "$odbc" -isystem "$lite" $defs ${SIZE_XFLAGS:-} \
        -ffunction-sections -fdata-sections -c "tests/impl_$h.c" -o "$app-impl.o" || return 1
    # shellcheck disable=SC2086
    $cc -static -pthread -Wl,--gc-sections -Wl,-Map="$app.map" "$app.o" "$app-impl.o" $driver \
        "$d/sqlite3.o" -o "$app" -lm || return 1
    kept "$app.map" "$(basename "$app-impl.o")"
}

# Every cell first, one job per architecture at a time, into files.
pids=()
for spec in "${arches[@]}"; do
    (
        for n in $(seq 1 $#); do
            set_defs=${!n}
            defs=${set_defs#*=}
            [[ $set_defs == *=* ]] || defs=""
            for h in obx ibx; do
                for opt in "${opts[@]}"; do
                    cell "$h" "$defs" "$spec" "$opt" >"$out/cell-$n-$h-${spec%%|*}$opt"
                done
                if [[ ${SIZE_PROGRAMS:-1} != 0 && ${spec%%|*} != x86_64 ]]; then
                    prog_cell "$h" "$defs" "$spec" >"$out/prog-$n-$h-${spec%%|*}"
                fi
            done
        done
    ) &
    pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
[[ $failed -eq 0 ]] || { echo "size: a compile failed (above)" >&2; exit 1; }

header="| header | defines |"
rule="|---|---|"
for spec in "${arches[@]}"; do
    for opt in "${opts[@]}"; do
        header+=" ${spec%%|*} $opt |"
        rule+="---:|"
    done
done
echo "Object size of one header's implementation, KB: text (code + constants) / .text (code)"
echo "$header"
echo "$rule"
for n in $(seq 1 $#); do
    label=${!n}
    label=${label%%=*}
    for h in obx ibx; do
        row="| $h.h | $label |"
        for spec in "${arches[@]}"; do
            for opt in "${opts[@]}"; do
                row+=" $(cat "$out/cell-$n-$h-${spec%%|*}$opt") |"
            done
        done
        echo "$row"
    done
done
[[ ${SIZE_PROGRAMS:-1} != 0 ]] || exit 0
echo
echo "Kept of the header in a static program linked with --gc-sections (-Os), KB: quickstart (obx.h; sqlite3 API: native_sqlite), webhook_inbox (ibx.h)"
echo "| header | defines | aarch64 | armhf |"
echo "|---|---|---:|---:|"
for n in $(seq 1 $#); do
    label=${!n}
    label=${label%%=*}
    for h in obx ibx; do
        echo "| $h.h | $label | $(cat "$out/prog-$n-$h-aarch64") | $(cat "$out/prog-$n-$h-armhf") |"
    done
done

# The whole gateway programs as make static / make cross build them.
binsize() { # FILE STRIP: stripped bytes in KB, or "-"
    [[ -f $1 ]] && command -v "$2" >/dev/null || { echo "-"; return; }
    "$2" -s -o "$out/stripped" "$1" && kb "$(stat -c %s "$out/stripped")" && rm -f "$out/stripped"
}
echo
echo "Static gateway programs (make static, make cross ARCH=...; '-': not built), stripped, KB:"
echo "the ODBC build links sqliteodbc and SQLite, the sqlite3-API build (OBX_SQLITE3_API) SQLite only"
echo "| program | build | x86_64 glibc | x86_64 musl | aarch64 | armhf |"
echo "|---|---|---:|---:|---:|---:|"
for ex in webhook_inbox native_sqlite; do
    for v in "ODBC|" "sqlite3 API|_sqlite3"; do
        row="| $ex | ${v%%|*} |"
        for t in glibc musl aarch64 armhf; do
            strip=strip
            case $t in aarch64) strip=aarch64-linux-gnu-strip ;; armhf) strip=arm-linux-gnueabihf-strip ;; esac
            row+=" $(binsize "build/gw/$t/$ex${v#*|}" "$strip") |"
        done
        echo "$row"
    done
done

# The budget: checked after every table is out, so a failure still shows them.
budget_failed=0
budget() {
    local label=${SIZE_BUDGET%%:*} n m=0 e h arch max got
    for n in $(seq 1 $#); do [[ ${!n%%=*} == "$label" ]] && m=$n; done
    echo
    if [[ $m -eq 0 || ${SIZE_PROGRAMS:-1} == 0 ]]; then
        echo "size budget: not checked (no row set \"$label\" with the programs' table)"
        return
    fi
    for e in ${SIZE_BUDGET#*:}; do
        IFS=':=' read -r h arch max <<<"$e"
        got=$(cat "$out/prog-$m-$h-$arch")
        if [[ $got == - ]]; then
            echo "size budget: $h.h $arch NOT MEASURED (no $arch compiler or driver objects: tests/cross.sh objects $arch)"
            budget_failed=1
        elif awk -v g="$got" -v b="$max" 'BEGIN { exit !(g + 0 > b + 0) }'; then
            echo "size budget: $h.h $arch $got KB, budget $max KB: EXCEEDED by $(awk -v g="$got" -v b="$max" 'BEGIN { printf "%.1f", g - b }') KB (\"$label\", docs/GATEWAYS.md: The size budget)"
            budget_failed=1
        else
            echo "size budget: $h.h $arch $got KB, budget $max KB: met, $(awk -v g="$got" -v b="$max" 'BEGIN { printf "%.1f", b - g }') KB under"
        fi
    done
}
[[ -z ${SIZE_BUDGET:-} ]] || budget "$@"
[[ $budget_failed -eq 0 ]] || { echo "size: over budget (above)" >&2; exit 1; }

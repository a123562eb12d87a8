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
    $cc -std=c99 -D_POSIX_C_SOURCE=200809L $opt -pthread -isystem "$odbc" $defs -c "tests/impl_$h.c" -o "$o" || return 1
    text=$("$sz" -B "$o" | awk 'NR == 2 { print $1 }')
    code=$("$sz" -A "$o" | awk '$1 == ".text" { print $2 }')
    echo "$(kb "$text")/$(kb "$code")"
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

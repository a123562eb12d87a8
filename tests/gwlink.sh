#!/usr/bin/env bash
# tests/gwlink.sh - link a static program for a gateway target and make sure
# no branch in it goes straight into an IFUNC resolver.
#
#   tests/gwlink.sh link TARGET COMPILER ARG... -o OUT ARG...
#       run the compiler; on aarch64/armhf check OUT, and while a branch
#       goes into a resolver link again with the C library moved on by 64,
#       128, then 192 bytes (a padding object after the program's own);
#       fails when none of them is clean
#   tests/gwlink.sh check TARGET BINARY
#       list such branches; exit status 1 when there is one
#
# Why: GNU ld (2.40 here) applies its fix for the Cortex-A8 Thumb-2 branch
# erratum by default when linking ARMv7-A code (armhf). A 32-bit branch
# whose first halfword is at page offset 0xffe and whose target is in the
# same 4 KB page is sent through a veneer. For a branch to an IFUNC (static
# glibc's memcpy and memchr on armhf) ld uses the resolver's address both
# for that page test and as the veneer's target, instead of the IFUNC's PLT
# entry: the call runs the resolver, which copies nothing and returns a
# function's address. Whether a branch lands there depends on the layout of
# the whole program. It did once: glibc's strncpy tail-calls memcpy, so the
# SQLite driver saw an empty connection string in one armhf -Os build of
# test_multi. tests/ifunc_probe.S builds that case on purpose. The erratum
# fix stays on (Cortex-A8 boards are gateways too); the layout changes.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "gwlink: $*" >&2; exit 1; }

tools() {
    case $1 in
        aarch64) PFX=aarch64-linux-gnu- ;;
        armhf) PFX=arm-linux-gnueabihf- ;;
        *) PFX="" ;;
    esac
}

# Branches (b, bl, b.w, beq.w, ...) whose target is an IFUNC symbol's
# address. Nothing branches to a resolver legitimately: the C library calls
# resolvers through a register while it applies its IRELATIVE relocations.
bad_branches() {
    local bin=$1 addrs
    addrs=$("${PFX}nm" "$bin" | awk '$2 == "i" { sub(/^0+/, "", $1); print $1 }' | sort -u | tr '\n' ' ')
    [[ -n $addrs ]] || return 0
    "${PFX}objdump" -d --no-show-raw-insn "$bin" | awk -F'\t' -v list="$addrs" '
        BEGIN { n = split(list, a, " "); for (i = 1; i <= n; i++) ifunc[a[i]] = 1 }
        $2 ~ /^b[a-z]*(\.[a-z]+)?$/ && $2 != "bkpt" {
            split($3, t, " ")
            if (t[1] in ifunc) { sub(/^ +/, "", $1); print $1 " " $2 " " $3 }
        }'
}

check() {
    local t=$1 bin=$2 bad
    tools "$t"
    bad=$(bad_branches "$bin")
    [[ -z $bad ]] && return 0
    echo "$bad"
    return 1
}

link() {
    local t=$1 out="" prev="" a pad bad
    shift
    for a in "$@"; do
        [[ $prev == -o ]] && out=$a
        prev=$a
    done
    [[ -n $out ]] || die "link: no -o OUT in: $*"
    "$@" || return 1
    case $t in aarch64|armhf) ;; *) return 0 ;; esac
    tools "$t"
    bad=$(bad_branches "$out")
    [[ -z $bad ]] && return 0
    for pad in 64 128 192; do
        echo "gwlink: $t: $out: branch into an IFUNC resolver (GNU ld's Cortex-A8 erratum veneer): ${bad%%$'\n'*}; linking again with the C library $pad bytes on"
        mkdir -p "build/gw/$t"
        printf '\t.text\n\t.balign 4\n\t.space %d\n\t.section .note.GNU-stack,"",%%progbits\n' "$pad" |
            "$1" -c -x assembler - -o "build/gw/$t/pad$pad.o"
        "$@" "build/gw/$t/pad$pad.o" || return 1
        bad=$(bad_branches "$out")
        [[ -z $bad ]] && return 0
    done
    die "$t: $out: still a branch into an IFUNC resolver: $bad"
}

case ${1:-} in
    link) shift; [[ $# -ge 2 ]] || die "usage: $0 link TARGET COMPILER ARG..."; link "$@" ;;
    check) [[ $# -eq 3 ]] || die "usage: $0 check TARGET BINARY"; check "$2" "$3" ;;
    *) die "usage: $0 link TARGET COMPILER ARG... | check TARGET BINARY" ;;
esac

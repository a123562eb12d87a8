#!/usr/bin/env bash
# core_measure.sh [MAX_REPEAT] [MAX_FUNCTION]: how much of what the two headers
# do alike still lives outside the checked common core, and how long the
# longest function is. Prints both and fails when one passes its bound.
#
#   repeat   lines of ibx.h, outside the >>common regions, that stand in a run
#            of at least 4 lines found again in obx.h (outside its regions)
#            once the prefix is normalised; blank, comment-only and lone
#            brace lines are not counted and do not break a run
#   longest  the longest function body of either header, in lines
set -euo pipefail
cd "$(dirname "$0")/.."
max_repeat=${1:-60}
max_function=${2:-60}

# Significant lines outside the common regions: "lineno<TAB>normalised text".
outside() {
    awk '/>>common-begin/{on=1} !on{print NR "\t" $0} />>common-end/{on=0}' "$1" |
    sed -e 's/obx/ibx/g; s/OBX/IBX/g' |
    awk -F'\t' '{t=$2; sub(/^[ \t]+/, "", t); sub(/[ \t]+$/, "", t); gsub(/[ \t]+/, " ", t)}
        t == "" || t ~ /^(\/\*.*\*\/|\/\/.*|[{}();,]+|\*.*|\/\*.*)$/ {next}
        {print $1 "\t" t}'
}
a=$(mktemp); b=$(mktemp); trap 'rm -f "$a" "$b"' EXIT
outside obx.h > "$a"
outside ibx.h > "$b"

awk -F'\t' -v min=4 '
    NR == FNR { na++; A[na] = $2; at[$2] = at[$2] " " na; next }
    { nb++; B[nb] = $2 }
    END {
        for (i = 1; i <= nb; i++) {
            if (!(B[i] in at)) continue
            n = split(at[B[i]], js, " ")
            best = 0
            for (k = 1; k <= n; k++) {
                j = js[k] + 0; len = 0
                while (i + len <= nb && j + len <= na && B[i + len] == A[j + len]) len++
                if (len > best) best = len
            }
            if (best >= min) for (l = 0; l < best; l++) mark[i + l] = 1
        }
        lines = 0; runs = 0
        for (i = 1; i <= nb; i++) { if (mark[i]) { lines++; if (!mark[i - 1]) runs++ } }
        printf "%d %d\n", lines, runs
    }' "$a" "$b" > "$a.out"
read -r repeat runs < "$a.out"; rm -f "$a.out"

# Function bodies: a definition starts at column 0 and ends at a "}" in column 0.
longest=$(for h in obx.h ibx.h; do
    awk -v h="$h" '
        # a definition: a column-0 line with "(" whose header ends in "{", not ";"
        !start && /^[A-Za-z_][A-Za-z0-9_ *]*\(/ && !/^(typedef|struct|enum|union)/ { cand = NR; name = $0 }
        cand && !start && /(;|\})[ ]*$/ { cand = 0 }  # a declaration, or a definition on one line
        cand && !start && /\{[ ]*$/ { start = NR }
        start && /^\}/ { print NR - start - 1 "\t" h ":" cand "\t" name; start = 0; cand = 0 }' "$h"
done | sort -rn | awk 'NR == 1')  # not head: under pipefail sort could die of SIGPIPE (141)
lf=${longest%%$'\t'*}
echo "core-measure: ibx.h repeats obx.h outside the common core in $repeat lines ($runs runs; bound $max_repeat)"
echo "core-measure: longest function $lf lines: $(printf '%s' "$longest" | cut -f2- | cut -c1-100) (bound $max_function)"
[ "$repeat" -le "$max_repeat" ] && [ "$lf" -le "$max_function" ]

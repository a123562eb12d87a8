#!/usr/bin/env bash
# doc_blocks.sh [BUILD_DIR]: every C example in the documentation compiles
# warning-free, and the quick starts run and end by themselves.
#   - each header's quick start (the indented program in section 1 of its
#     manual), compiled with the strict flags, run against SQLite in a
#     scratch directory;
#   - every ```c block of README.md, compiled (and run when it has main).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build}/docs
mkdir -p "$bin"
: "${CC:=cc}"
flags=(-std=c99 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion
       -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wcast-qual -Wcast-align -Wwrite-strings
       -Wformat=2 -Wvla -Wnull-dereference -Werror -pthread -I.)
pass=0 fail=0
result() { # status name what
    if [ "$1" = 0 ]; then echo "PASS $2 docs $3"; pass=$((pass + 1)); else echo "FAIL $2 docs $3"; fail=$((fail + 1)); fi
}

# Compile $1 into $2; run it (in a scratch dir) when $3 is "run".
check_program() {
    local src=$1 exe=$2 mode=$3 dir
    if ! "$CC" "${flags[@]}" "$src" -o "$exe" -lodbc 2> "$exe.log"; then
        sed 's/^/    /' "$exe.log" | head -n 20
        return 1
    fi
    [ "$mode" = run ] || return 0
    dir=$(mktemp -d)
    (cd "$dir" && timeout 60 "$OLDPWD/$exe" > run.log 2>&1); local rc=$?
    [ $rc -eq 0 ] || sed 's/^/    /' "$dir/run.log" | tail -n 10
    rm -rf "$dir"
    return $rc
}

for h in obx ibx; do
    src=$bin/${h}_quickstart.c
    # The program is the manual's section 1, indented 5 spaces after " * ".
    awk '/^ \* 1\. QUICK START/{on=1; next} on && /^ \*\//{exit} on && /^ \*     /{print substr($0, 8)} on && /^ \*$/{print ""}' \
        "$h.h" > "$src"
    if ! grep -q 'int main' "$src"; then
        result 1 "DOC-QUICKSTART-${h^^}" "$h.h's quick start is a whole program (none found)"
        continue
    fi
    check_program "$src" "$bin/${h}_quickstart" run
    result $? "DOC-QUICKSTART-${h^^}" "$h.h's quick start compiles with the strict flags, runs and ends by itself"
done

n=0
while IFS= read -r -d '' block; do
    n=$((n + 1))
    src=$bin/readme_$n.c
    printf '%s\n' "$block" > "$src"
    mode=compile
    grep -q 'int main' "$src" && mode=run
    if [ $mode = compile ]; then
        "$CC" "${flags[@]}" -c "$src" -o "$bin/readme_$n.o" 2> "$bin/readme_$n.log"
        rc=$?
        [ $rc -eq 0 ] || sed 's/^/    /' "$bin/readme_$n.log" | head -n 20
    else
        check_program "$src" "$bin/readme_$n" run
        rc=$?
    fi
    result $rc "DOC-README-C-$n" "README.md's C block $n compiles warning-free$([ $mode = run ] && echo ", runs and ends by itself")"
done < <(awk 'BEGIN{ORS=""} /^```c$/{on=1; next} on && /^```$/{on=0; printf "%c", 0; next} on{print $0 "\n"}' README.md)
[ $n -gt 0 ] || result 1 DOC-README-C "README.md has no C block to check"

# One version everywhere: each header's first line and CHANGELOG.md's newest
# release name the version the macros say.
version=$(sed -n 's/^#define OBX_VERSION_STRING "\(.*\)"$/\1/p' obx.h)
ok=0
[ -n "$version" ] && head -n 1 obx.h | grep -q "v$version\$" && head -n 1 ibx.h | grep -q "v$version\$" &&
    grep -q "^#define IBX_VERSION_STRING \"$version\"$" ibx.h &&
    [ "$(grep -m 1 -E '^## \[?[0-9]+\.[0-9]+\.[0-9]+' CHANGELOG.md | grep -oE '[0-9]+\.[0-9]+\.[0-9]+')" = "$version" ] || ok=1
result $ok DOC-VERSION "obx.h and ibx.h (first line and macros) and CHANGELOG.md's newest release say one version ($version)"

# Every requirement ID the README, the docs, the headers and the examples cite
# is stated in docs/REQUIREMENTS.md.
missing=$(grep -ohE '\b(OBX|IBX|CORE|OBXCTL|MSSQL)-[A-Z0-9]+(-[A-Z0-9]+)*\b' README.md docs/*.md obx.h ibx.h \
        examples/*.c tools/*.c | sort -u |
    while read -r id; do grep -q "^- \`$id\` " docs/REQUIREMENTS.md || printf '%s ' "$id"; done)
[ -z "$missing" ] || echo "    not stated: $missing"
result "$([ -z "$missing" ] && echo 0 || echo 1)" DOC-REQUIREMENTS-CITED "every requirement ID the README, docs, headers and examples cite is stated in docs/REQUIREMENTS.md"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]

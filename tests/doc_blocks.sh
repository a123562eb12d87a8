#!/usr/bin/env bash
# doc_blocks.sh [BUILD_DIR]: every C example in the documentation compiles
# warning-free, and the quick starts run and end by themselves.
#   - each header's quick start (the indented program in section 1 of its
#     manual), compiled with the strict flags, run against SQLite in a
#     scratch directory;
#   - every ```c block of README.md and docs/*.md, compiled (and run when it
#     has main);
#   - the README's own `cc` line builds its minimal outbox;
#   - every relative link of README.md and docs/*.md resolves, anchors too
#     (tests/doc_links.sh, itself checked on planted broken links first).
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

# Every ```c block of a Markdown file: DOC-<NAME>-C-<n> (README.md: DOC-README-C-n,
# docs/GATEWAYS.md: DOC-GATEWAYS-C-n).
check_blocks() {
    local md=$1 name n=0 block src mode rc
    name=$(basename "$md" .md)
    name=${name^^}
    while IFS= read -r -d '' block; do
        n=$((n + 1))
        src=$bin/${name,,}_$n.c
        printf '%s\n' "$block" > "$src"
        mode=compile
        grep -q 'int main' "$src" && mode=run
        if [ $mode = compile ]; then
            "$CC" "${flags[@]}" -c "$src" -o "${src%.c}.o" 2> "${src%.c}.log"
            rc=$?
            [ $rc -eq 0 ] || sed 's/^/    /' "${src%.c}.log" | head -n 20
        else
            check_program "$src" "${src%.c}" run
            rc=$?
        fi
        result $rc "DOC-$name-C-$n" "$md's C block $n compiles warning-free$([ $mode = run ] && echo ", runs and ends by itself")"
    done < <(awk 'BEGIN{ORS=""} /^```c$/{on=1; next} on && /^```$/{on=0; printf "%c", 0; next} on{print $0 "\n"}' "$md")
    blocks_seen=$((blocks_seen + n))
}
blocks_seen=0
check_blocks README.md
[ $blocks_seen -gt 0 ] || result 1 DOC-README-C "README.md has no C block to check"
for md in docs/*.md; do check_blocks "$md"; done

# The README's compile line, as a user would type it, builds the README's
# minimal outbox (the first ```c block after "## A minimal outbox").
ccline=$(grep -m 1 -E '^cc -std=[^ ]+ .* app\.c -o app ' README.md | sed 's/[[:space:]]*#.*$//')
awk '/^## A minimal outbox/{on=1} on && /^```c$/{c=1; next} c && /^```$/{exit} c{print}' README.md > "$bin/app.c"
rc=1
if [ -n "$ccline" ] && [ -s "$bin/app.c" ]; then
    read -r -a argv <<< "$ccline"
    argv[0]=$CC
    cp obx.h "$bin/obx.h"   # "obx.h next to app.c"
    (cd "$bin" && "${argv[@]}" 2> app.log) && rc=0
    [ $rc -eq 0 ] || sed 's/^/    /' "$bin/app.log" | head -n 20
else
    echo "    no 'cc -std=... app.c -o app ...' line or no minimal outbox in README.md"
fi
result $rc DOC-README-CC "README.md's cc line ($ccline) builds its minimal outbox"

# Links. First the checker itself, on planted links: one good file link, one
# good anchor (a repeated heading's second slug), one missing file, one missing
# anchor, one anchor into a file that is not Markdown; links in code are not links.
plant=$bin/links
rm -rf "$plant" && mkdir -p "$plant/sub"
printf '# Top: one `two`\n\n## Same\n\n## Same\n\nText.\n' > "$plant/sub/target.md"
printf 'x\n' > "$plant/sub/file.c"
cat > "$plant/doc.md" <<'EOF'
[ok](sub/target.md) [ok](sub/target.md#same-1) [ok](#here) [ok](sub/target.md#top-one-two)
[ok](https://example.com/missing.md) `[code](missing-in-code.md)`
[bad](sub/missing.md)
[bad](sub/target.md#nowhere)
[bad](sub/file.c#x)

## Here

```
[code](missing-in-block.md)
```
EOF
got=$(tests/doc_links.sh "$plant/doc.md" | sed 's/^.*doc\.md://' | tr '\n' ' ')
want="3: sub/missing.md: no such file 4: sub/target.md#nowhere: no heading with that anchor 5: sub/file.c#x: an anchor into a file that is not Markdown "
[ "$got" = "$want" ] || printf '    want: %s\n    got:  %s\n' "$want" "$got"
result "$([ "$got" = "$want" ] && echo 0 || echo 1)" DOC-LINKS-SELFTEST "the link checker finds exactly the planted broken links (a missing file, a missing anchor, an anchor into a C file)"

out=$(tests/doc_links.sh README.md docs/*.md); rc=$?
[ -z "$out" ] || printf '%s\n' "$out" | sed 's/^/    /'
result $rc DOC-LINKS "every relative link in README.md and docs/*.md names an existing file, and its #anchor an existing heading"

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

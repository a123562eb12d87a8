#!/usr/bin/env bash
# tests/deps_test.sh - tests/deps.sh against stand-ins for apt-get, dpkg-query,
# odbcinst and id (first on PATH), so no package is touched and no network or
# root is needed. Closes with "N passed, N failed".
#   DEPS-PARTIAL-UPDATE  an update that fails in part still installs (exit 0)
#   DEPS-INSTALL-FAILS   a failed install exits 2 with one FAILED line
#   DEPS-NOTHING-MISSING nothing missing: apt-get is never run
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0

# The stand-ins; their behaviour is chosen by files in $work.
mkdir -p "$work/bin"
cat >"$work/bin/apt-get" <<'EOF'
#!/bin/sh
echo "apt-get $*" >>"$DEPS_TEST_DIR/calls"
case " $* " in
*" update "*)
    if [ -e "$DEPS_TEST_DIR/update-fails" ]; then
        echo "E: Failed to fetch .../binary-armhf/Packages  File has unexpected size. Mirror sync in progress?"
        echo "E: Some index files failed to download. They have been ignored, or old ones used instead."
        exit 100
    fi ;;
*" install "*)
    if [ -e "$DEPS_TEST_DIR/install-fails" ]; then
        echo "E: Unable to locate package musl-tools"
        exit 100
    fi
    touch "$DEPS_TEST_DIR/installed" ;;
esac
exit 0
EOF
# Everything is missing until the stand-in install has run.
cat >"$work/bin/dpkg-query" <<'EOF'
#!/bin/sh
shift 2
for p in "$@"; do
    if [ -e "$DEPS_TEST_DIR/installed" ] || [ -e "$DEPS_TEST_DIR/all-installed" ]; then
        echo "$p install ok installed"
    fi
done
exit 0
EOF
printf '#!/bin/sh\nexit 0\n' >"$work/bin/odbcinst"
printf '#!/bin/sh\necho 0\n' >"$work/bin/id"
chmod +x "$work/bin/"*

# case NAME WANT-STATUS WANT-REGEX SETUP-FILE...: run deps.sh static, check
# its exit status and that its output matches.
check() {
    local name=$1 want=$2 regex=$3 rc=0; shift 3
    rm -f "$work/calls" "$work/installed" "$work/update-fails" "$work/install-fails" "$work/all-installed"
    for f in "$@"; do touch "$work/$f"; done
    DEPS_TEST_DIR=$work PATH="$work/bin:$PATH" "$here/deps.sh" static >"$work/out" 2>&1 || rc=$?
    if [[ $rc -eq $want ]] && grep -qE "$regex" "$work/out"; then
        echo "PASS $name"
        passed=$((passed + 1))
    else
        sed 's/^/    /' "$work/out"
        echo "FAIL $name (exit status $rc, want $want; output should match /$regex/)"
        failed=$((failed + 1))
    fi
}

check DEPS-PARTIAL-UPDATE 0 "reported errors .*installing" update-fails
if ! grep -q "apt-get .* install " "$work/calls" 2>/dev/null; then
    echo "FAIL DEPS-PARTIAL-UPDATE apt-get install was not run"
    failed=$((failed + 1))
fi
check DEPS-INSTALL-FAILS 2 "^deps: FAILED to install musl-tools" update-fails install-fails
check DEPS-NOTHING-MISSING 0 "deps: static ok" all-installed
if [[ -e $work/calls ]]; then
    echo "FAIL DEPS-NOTHING-MISSING apt-get ran: $(cat "$work/calls")"
    failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]

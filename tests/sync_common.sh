#!/usr/bin/env bash
# sync_common.sh: a developer's tool. Copies every common region of obx.h
# into ibx.h (prefix renamed obx->ibx, OBX->IBX; obxctl, the one tool of both
# headers, keeps its name), so a change to the shared
# core is written once, in obx.h. tests/check_common.sh verifies the result.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
awk '
  FNR == NR {
    if (match($0, />>common-begin [A-Za-z0-9_-]+/)) { name = substr($0, RSTART + 15, RLENGTH - 15); on = 1 }
    if (on) { line = $0; gsub(/obx/, "ibx", line); gsub(/OBX/, "IBX", line); gsub(/ibxctl/, "obxctl", line); body[name] = body[name] line "\n" }
    if ($0 ~ />>common-end/) on = 0
    next
  }
  match($0, />>common-begin [A-Za-z0-9_-]+/) {
    name = substr($0, RSTART + 15, RLENGTH - 15)
    if (!(name in body)) { print "sync-common: region " name " is missing from obx.h" > "/dev/stderr"; exit 1 }
    printf "%s", body[name]; skip = 1; next
  }
  skip && />>common-end/ { skip = 0; next }
  !skip { print }
' obx.h ibx.h > "$tmp"
cat "$tmp" > ibx.h
bash tests/check_common.sh

#!/usr/bin/env bash
# check_common.sh: obx.h and ibx.h carry the same common core. Every region
# between ">>common-begin NAME" and ">>common-end NAME" must be identical in
# both headers once the prefix is normalised (obx->ibx, OBX->IBX; the tool
# obxctl serves both headers and keeps its name).
set -euo pipefail
cd "$(dirname "$0")/.."
regions() { awk '/>>common-begin/{on=1} on{print} />>common-end/{on=0}' "$1"; }
a=$(mktemp); b=$(mktemp); trap 'rm -f "$a" "$b"' EXIT
regions obx.h | sed -e 's/obx/ibx/g; s/OBX/IBX/g; s/ibxctl/obxctl/g' > "$a"
regions ibx.h > "$b"
names_a=$(grep -c '>>common-begin' obx.h); names_b=$(grep -c '>>common-begin' ibx.h)
if [ "$names_a" -ne "$names_b" ] || [ "$names_a" -eq 0 ]; then
  echo "check-common: FAIL obx.h has $names_a common regions, ibx.h has $names_b"; exit 1
fi
if ! diff -u --label obx.h --label ibx.h "$a" "$b"; then
  echo "check-common: FAIL the common core differs between obx.h and ibx.h (diff above)"; exit 1
fi
echo "check-common: ok ($names_a regions, $(wc -l < "$b") lines identical)"

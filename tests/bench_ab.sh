#!/usr/bin/env bash
# bench_ab.sh BENCH_A BENCH_B [N]: two builds of the bench (make -B
# build/bench BENCH_HDR=dir, copied aside: say the previous release's
# headers and today's) on one throwaway MariaDB, interleaved (A B A B ...),
# their tables dropped before each run so that each deploys its own layout.
# Prints each run's library rows; compare the same workload's rates and CPU
# per message between A and B of one round. By hand, not in CI.
#
# Environment: OBX_MY_PORT, OBX_TEST_RUNDIR (tests/db.sh); AB_ROUNDS (default
# 2); BENCH_ONLY (default enq1,enqb,drain1,drain2,ienq,idrain); BENCH_REPEATS
# (default 1).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
a=$1 b=$2 n=${3:-5000}
rounds=${AB_ROUNDS:-2}
export BENCH_ONLY=${BENCH_ONLY:-enq1,enqb,drain1,drain2,ienq,idrain} BENCH_REPEATS=${BENCH_REPEATS:-1}
"$here/db.sh" start mariadb >/dev/null
eval "$("$here/db.sh" env mariadb)"
rundir=${OBX_TEST_RUNDIR:-/tmp/obx-test}
key() { sed -n "s/.*;$1=\([^;]*\);.*/\1/p" <<<";$OBX_TEST_MY"; }
drop() {
    mariadb -h "$(key Server)" -P "$(key Port)" -u "$(key Uid)" -p"$(key Pwd)" "$(key Database)" -e \
        "DROP TABLE IF EXISTS OutboxBenchJoinMember, OutboxBenchJoin, OutboxBench, InboxBench"
}
for r in $(seq 1 "$rounds"); do
    for which in A B; do
        bin=$a
        [ "$which" = B ] && bin=$b
        drop
        echo "== round $r, $which: $bin"
        BENCH_SERVER_PID=$(cat "$rundir/my.pid") "$bin" mariadb "$OBX_TEST_MY" "$n" 2>&1 | grep -E "^(outbox|inbox|  |workload|---)" || true
    done
done

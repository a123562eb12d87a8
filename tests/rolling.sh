#!/usr/bin/env bash
# tests/rolling.sh [REV] - a rolling upgrade to storage layout 2 on MariaDB,
# by hand (not in CI): a small program built against the previous release's
# headers (git show REV:obx.h and :ibx.h, default 36c7606) deploys, enqueues,
# claims, acks, reaps and cleans up an outbox and an inbox
#   1. on the table it created itself (layout 1),
#   2. after this release's deploy upgraded that table in place,
#   3. after `obxctl upgrade --keys` converted its keys to UUID,
#   4. after `obxctl upgrade --drop-old` dropped layout 1's indexes (expected
#      to fail: the previous release forces them),
# with this release's obxctl enqueueing and reading the same table between
# the steps. Prints one line per step; the summary is in docs/UPGRADING.md.
# Needs build/obxctl (make build/obxctl) and git; uses the throwaway MariaDB
# of tests/db.sh (OBX_MY_PORT, OBX_TEST_RUNDIR). ROLLING_DB=pg: the same on
# PostgreSQL (OBX_PG_PORT), where --keys has nothing to do and --drop-old
# drops the outbox's IX_<table>_Ready. ROLLING_DB=sqlite: the same on a
# SQLite file (no server), where neither step has anything to do.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rev=${1:-36c7606}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$here/.." show "$rev:obx.h" >"$work/obx.h" && git -C "$here/.." show "$rev:ibx.h" >"$work/ibx.h" || exit 2
cat >"$work/prev.c" <<'EOF'
/* The previous release's program: every step of the work queue once. */
#define OBX_IMPLEMENTATION
#define IBX_IMPLEMENTATION
#include "obx.h"
#include "ibx.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int deploy = 1;

static int outbox(const char *conn, const char *table) {
    obx_store_desc d;
    obx_store *s = NULL;
    obx_new_message m[3];
    const obx_message *ms;
    const char *ids[10];
    char owner[37];
    int n = 0, i, acked = 0;
    int64_t reaped = 0, cleaned = 0;
    memset(&d, 0, sizeof d);
    d.connection_string = conn;
    d.table = table;
    d.deploy_schema = deploy;
    d.hooks.logger.min_level = OBX_LOG_WARN;
    if (obx_store_open(&d, &s) != OBX_OK) return printf("open/deploy: %s\n", obx_store_last_error(s)->message), 1;
    memset(m, 0, sizeof m);
    for (i = 0; i < 3; i++) {
        m[i].topic = "prev";
        m[i].payload = "from the previous release";
        m[i].payload_len = OBX_NTS;
    }
    m[1].priority = 3;
    m[2].ordering_key = "k";
    if (obx_enqueue_batch(s, NULL, m, 3, NULL) != OBX_OK) return printf("enqueue: %s\n", obx_store_last_error(s)->message), 1;
    obx_owner_token(s, owner);
    if (obx_claim(s, owner, 30, 10, &ms, &n) < 0) return printf("claim: %s\n", obx_store_last_error(s)->message), 1;
    for (i = 0; i < n; i++) ids[i] = ms[i].id;
    if (n && obx_ack(s, owner, ids, n, NULL) != OBX_OK) return printf("ack: %s\n", obx_store_last_error(s)->message), 1;
    acked = n;
    if (obx_reap(s, &reaped) != OBX_OK) return printf("reap: %s\n", obx_store_last_error(s)->message), 1;
    if (obx_cleanup(s, 1, 0, &cleaned) != OBX_OK) return printf("cleanup: %s\n", obx_store_last_error(s)->message), 1;
    printf("ok: %senqueue 3, claim %d, ack %d, reap %lld, cleanup %lld\n", deploy ? "deploy, " : "", n, acked, (long long)reaped,
           (long long)cleaned);
    obx_store_close(s);
    return 0;
}

static int inbox(const char *conn, const char *table, int round) {
    ibx_store_desc d;
    ibx_store *s = NULL;
    ibx_new_message m;
    const ibx_message *ms;
    ibx_key k[10];
    char owner[37], id[32];
    int n = 0, i;
    int64_t reaped = 0, cleaned = 0;
    memset(&d, 0, sizeof d);
    d.connection_string = conn;
    d.table = table;
    d.deploy_schema = deploy;
    d.hooks.logger.min_level = IBX_LOG_WARN;
    if (ibx_store_open(&d, &s) != IBX_OK) return printf("open/deploy: %s\n", ibx_store_last_error(s)->message), 1;
    for (i = 0; i < 3; i++) {
        memset(&m, 0, sizeof m);
        snprintf(id, sizeof id, "prev-%d-%d", round, i);
        m.topic = "prev";
        m.source = "rolling";
        m.message_id = id;
        m.payload = "from the previous release";
        m.payload_len = IBX_NTS;
        if (ibx_enqueue(s, &m, NULL) != IBX_OK) return printf("enqueue: %s\n", ibx_store_last_error(s)->message), 1;
    }
    ibx_owner_token(s, owner);
    if (ibx_claim(s, owner, 30, 10, &ms, &n) < 0) return printf("claim: %s\n", ibx_store_last_error(s)->message), 1;
    for (i = 0; i < n; i++) k[i].source = ms[i].source, k[i].message_id = ms[i].message_id;
    if (n && ibx_ack(s, owner, k, n, NULL) != IBX_OK) return printf("ack: %s\n", ibx_store_last_error(s)->message), 1;
    if (ibx_reap(s, &reaped) != IBX_OK) return printf("reap: %s\n", ibx_store_last_error(s)->message), 1;
    if (ibx_cleanup(s, 1, 0, &cleaned) != IBX_OK) return printf("cleanup: %s\n", ibx_store_last_error(s)->message), 1;
    printf("ok: %senqueue 3, claim %d, ack %d, reap %lld, cleanup %lld\n", deploy ? "deploy, " : "", n, n, (long long)reaped,
           (long long)cleaned);
    ibx_store_close(s);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 6) return 2;
    deploy = atoi(argv[5]);
    return strcmp(argv[2], "inbox") == 0 ? inbox(argv[1], argv[3], argv[4][0] - '0') : outbox(argv[1], argv[3]);
}
EOF
cc -std=c99 -D_POSIX_C_SOURCE=200809L -O1 -pthread -I"$work" "$work/prev.c" -o "$work/prev" -lodbc || exit 2
ctl="$here/../build/obxctl"
if [ "${ROLLING_DB:-mariadb}" = sqlite ]; then
    OBX_TEST_MY="Driver={SQLite3};Database=$work/roll.db;JournalMode=WAL;SyncPragma=NORMAL;Timeout=5000;"
    drop() { rm -f "$work"/roll.db*; }
elif [ "${ROLLING_DB:-mariadb}" = pg ]; then
    "$here/db.sh" start pg >/dev/null || exit 2
    eval "$("$here/db.sh" env pg)"
    OBX_TEST_MY=$OBX_TEST_PG # the connection below, whichever database
    key() { sed -n "s/.*;$1=\([^;]*\);.*/\1/p" <<<";$OBX_TEST_MY"; }
    drop() {
        psql -q -h "$(key Server)" -p "$(key Port)" -U "$(key Uid)" "$(key Database)" -c "DROP TABLE IF EXISTS \
            dbo.\"RollOutboxJoinMember\", dbo.\"RollOutboxJoin\", dbo.\"RollOutbox\", infra.\"RollInbox\" CASCADE" 2>/dev/null
    }
else
    "$here/db.sh" start mariadb >/dev/null || exit 2
    eval "$("$here/db.sh" env mariadb)"
    key() { sed -n "s/.*;$1=\([^;]*\);.*/\1/p" <<<";$OBX_TEST_MY"; }
    M=(mariadb -h "$(key Server)" -P "$(key Port)" -u "$(key Uid)" -p"$(key Pwd)" "$(key Database)")
    drop() { "${M[@]}" -e "DROP TABLE IF EXISTS RollOutboxJoinMember, RollOutboxJoin, RollOutbox, RollInbox"; }
fi
drop
fails=0
for kind in outbox inbox; do
    table=RollOutbox ib=
    [ $kind = inbox ] && table=RollInbox ib=--inbox
    step() { # step NAME ROUND [DEPLOY]: the previous release's program, then this release's obxctl
        printf '%-9s %-38s previous release: ' "$kind" "$1"
        "$work/prev" "$OBX_TEST_MY" $kind $table "$2" "${3:-1}" 2>"$work/log" | tail -n 1
        sed -n 's/.*\(WARN\|ERROR\) *\[[a-z]*\] \(.\{0,150\}\).*/    (its log: \2)/p' "$work/log" | sort -u
        [ "$2" = 1 ] && return # this release needs its own deploy first
        printf '%-9s %-38s this release:     ' "$kind" ""
        if [ $kind = outbox ]; then "$ctl" -c "$OBX_TEST_MY" --table $table enqueue --topic new --payload p >/dev/null
        else "$ctl" -c "$OBX_TEST_MY" --inbox --table $table enqueue --topic new --payload p --source s "new-$2" >/dev/null; fi &&
            "$ctl" -c "$OBX_TEST_MY" $ib --table $table reap >/dev/null &&
            echo "ok: enqueue, reap, stats: $("$ctl" -c "$OBX_TEST_MY" $ib --table $table stats --json | head -c 120)" ||
            { echo "FAILED"; fails=$((fails + 1)); }
    }
    step "1. layout 1 (its own deploy)" 1
    "$ctl" -c "$OBX_TEST_MY" $ib --table $table deploy >/dev/null || fails=$((fails + 1))
    step "2. after this release's deploy" 2
    "$ctl" -c "$OBX_TEST_MY" $ib --table $table upgrade --keys >/dev/null || fails=$((fails + 1))
    step "3. after obxctl upgrade --keys" 3
    "$ctl" -c "$OBX_TEST_MY" $ib --table $table upgrade --drop-old >/dev/null || fails=$((fails + 1))
    step "4. after upgrade --drop-old, no deploy" 4 0
    step "5. the same, its own deploy at start" 5
done
drop
echo "rolling: $fails failure(s) of this release's steps (the previous release after --drop-old: see docs/UPGRADING.md)"
exit $((fails > 0))

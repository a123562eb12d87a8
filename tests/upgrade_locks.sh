#!/usr/bin/env bash
# tests/upgrade_locks.sh [pg|mariadb|mariadb-v1 ...] - what an in-place upgrade of a
# first-release outbox (tests/schema/v0/; mariadb-v1: a layout-1 outbox,
# tests/schema/v1/, to layout 2) costs the writers, per database:
# each upgrade statement of sql/<dialect>/outbox.sql (what obx_store_deploy
# runs) with its time, while one writer inserts rows one by one and records
# its longest wait. Not a test: prints the table of docs/UPGRADING.md.
#   UPGRADE_ROWS  rows in the old table (default 100000)
# Backend pg-rewrite: the same old table, upgraded by deploy, then rewritten
# into this release's column order by obxctl rewrite ($OBXCTL, default
# build/obxctl: make build/obxctl first), the writer's longest wait beside.
# Uses the throw-away servers of tests/db.sh (started here, stopped after).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rows=${UPGRADE_ROWS:-100000}
backends=${*:-pg mariadb}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One statement per line ("NAME<TAB>SQL"), timed in one session.
pg() {
    "$here/db.sh" start pg >/dev/null
    eval "$("$here/db.sh" env pg)"
    local port; port=$(sed -n 's/.*Port=\([0-9]*\).*/\1/p' <<<"$OBX_TEST_PG")
    local P=(psql -h 127.0.0.1 -p "$port" -U postgres -d obx -qAtX -v ON_ERROR_STOP=1)
    "${P[@]}" -c 'DROP SCHEMA IF EXISTS obxup CASCADE'
    sed 's/"dbo"/"obxup"/g' "$here/schema/v0/postgresql/outbox.sql" | "${P[@]}" >/dev/null
    "${P[@]}" -c "INSERT INTO obxup.\"Outbox\" (\"Id\", \"Topic\", \"Payload\", \"MessageId\", \"Status\")
        SELECT gen_random_uuid(), 't', 'payload ' || g, gen_random_uuid(), g % 4 FROM generate_series(1, $rows) g;
        ANALYZE obxup.\"Outbox\""
    echo "INSERT INTO obxup.\"Outbox\" (\"Id\", \"Topic\", \"Payload\", \"MessageId\") VALUES (gen_random_uuid(), 'w', 'w', gen_random_uuid());" >"$work/w.sql"
    (cd "$work" && pgbench -h 127.0.0.1 -p "$port" -U postgres -n -c 1 -T 8 -f w.sql -l --log-prefix=lat obx >/dev/null 2>&1) &
    local bench=$!
    sleep 1
    echo "PostgreSQL, $rows rows: ms, statement (the slow ones; one transaction, as obx_store_deploy)"
    local t0; t0=$(date +%s%N)
    { echo '\timing on'; sed 's/"dbo"/"obxup"/g' "$here/../sql/postgresql/outbox.sql"; } |
        "${P[@]}" -1 -e 2>/dev/null | awk '/^(ALTER|CREATE|DROP|SELECT)/ {st = $0} /^Time: / {if ($2 >= 20) printf "  %8.0f  %.90s\n", $2, st}'
    echo "  the whole upgrade: $((($(date +%s%N) - t0) / 1000000)) ms"
    wait "$bench" || true
    echo "  longest single-row insert meanwhile: $(cat "$work"/lat* | awk '$3 > m {m = $3} END {printf "%d ms", m / 1000}')"
    "${P[@]}" -c 'DROP SCHEMA obxup CASCADE'
    "$here/db.sh" stop pg >/dev/null
}

pg_rewrite() {
    "$here/db.sh" start pg >/dev/null
    eval "$("$here/db.sh" env pg)"
    local port; port=$(sed -n 's/.*Port=\([0-9]*\).*/\1/p' <<<"$OBX_TEST_PG")
    local P=(psql -h 127.0.0.1 -p "$port" -U postgres -d obx -qAtX -v ON_ERROR_STOP=1)
    "${P[@]}" -c 'DROP SCHEMA IF EXISTS obxup CASCADE'
    sed 's/"dbo"/"obxup"/g' "$here/schema/v0/postgresql/outbox.sql" | "${P[@]}" >/dev/null
    sed 's/"dbo"/"obxup"/g' "$here/../sql/postgresql/outbox.sql" | "${P[@]}" >/dev/null 2>&1
    "${P[@]}" -c "INSERT INTO obxup.\"Outbox\" (\"Id\", \"Topic\", \"Payload\", \"MessageId\", \"Status\")
        SELECT gen_random_uuid(), 't', 'payload ' || g, gen_random_uuid(), g % 4 FROM generate_series(1, $rows) g;
        ANALYZE obxup.\"Outbox\""
    echo "INSERT INTO obxup.\"Outbox\" (\"Id\", \"Topic\", \"Payload\", \"MessageId\") VALUES (gen_random_uuid(), 'w', 'w', gen_random_uuid());" >"$work/w.sql"
    echo "SELECT count(*) FROM obxup.\"Outbox\" WHERE \"Id\" = gen_random_uuid();" >"$work/r.sql"
    local secs=$((rows / 20000 + 8))
    (cd "$work" && pgbench -h 127.0.0.1 -p "$port" -U postgres -n -c 1 -T "$secs" -f w.sql -l --log-prefix=lat obx >/dev/null 2>&1) &
    local bench=$!
    (cd "$work" && pgbench -h 127.0.0.1 -p "$port" -U postgres -n -c 1 -T "$secs" -f r.sql -l --log-prefix=rd obx >/dev/null 2>&1) &
    local reader=$!
    sleep 1
    echo "PostgreSQL, $rows rows: obxctl rewrite (one transaction) while one writer inserts and one reader reads by key"
    local t0; t0=$(date +%s%N)
    OBXCTL_CONNECTION=$OBX_TEST_PG "${OBXCTL:-$here/../build/obxctl}" --schema obxup rewrite | sed 's/^/  /'
    echo "  the whole rewrite: $((($(date +%s%N) - t0) / 1000000)) ms"
    wait "$bench" "$reader" || true
    echo "  longest single-row insert meanwhile: $(cat "$work"/lat* | awk '$3 > m {m = $3} END {printf "%d ms", m / 1000}')"
    echo "  longest read by key meanwhile: $(cat "$work"/rd* | awk '$3 > m {m = $3} END {printf "%d ms", m / 1000}')"
    "${P[@]}" -c 'DROP SCHEMA obxup CASCADE'
    "$here/db.sh" stop pg >/dev/null
}

mariadb_() {
    "$here/db.sh" start mariadb >/dev/null
    local M=(mariadb -h 127.0.0.1 -P "${OBX_MY_PORT:-23069}" -u obx -pobxpw obx)
    sed 's/`Outbox/`UpOutbox/g' "$here/schema/v0/mariadb/outbox.sql" | "${M[@]}"
    "${M[@]}" -e "INSERT INTO UpOutbox (Id, Topic, Payload, MessageId, Status)
        SELECT UUID(), 't', CONCAT('payload ', seq), UUID(), seq % 4 FROM seq_1_to_$rows"
    printf 'DELIMITER //\n%s//\n' "CREATE OR REPLACE PROCEDURE up_writer(n INT) BEGIN
        DECLARE i INT DEFAULT 0; DECLARE worst BIGINT DEFAULT 0; DECLARE t0 DATETIME(6);
        WHILE i < n DO SET t0 = SYSDATE(6);
          INSERT INTO UpOutbox (Id, Topic, Payload, MessageId) VALUES (UUID(), 'w', 'w', UUID());
          SET worst = GREATEST(worst, TIMESTAMPDIFF(MICROSECOND, t0, SYSDATE(6))), i = i + 1;
          DO SLEEP(0.002); END WHILE;
        SELECT worst DIV 1000; END" | "${M[@]}"
    "${M[@]}" -N -e "CALL up_writer(5000)" >"$work/worst" &
    local writer=$!
    sleep 1
    echo "MariaDB, $rows rows: ms, statement (the slow ones)"
    sed 's/`Outbox/`UpOutbox/g' "$here/../sql/mariadb/outbox.sql" | "${M[@]}" -vvv 2>/dev/null |
        awk '/^(ALTER|CREATE|DROP)/ {st = $0} /sec\)$/ {t = $0; sub(/.*\(/, "", t); sub(/ sec\)/, "", t); if (t * 1000 >= 20) printf "  %8.0f  %.90s\n", t * 1000, st}'
    wait "$writer" || true
    echo "  longest single-row insert meanwhile: $(cat "$work/worst") ms"
    "${M[@]}" -e "DROP TABLE UpOutboxJoinMember, UpOutboxJoin, UpOutbox; DROP PROCEDURE up_writer"
    "$here/db.sh" stop mariadb >/dev/null
}

# Storage layout 1 (tests/schema/v1) to layout 2 on MariaDB: the automatic
# deploy (online steps only), then obxctl upgrade --keys (the key
# conversion: a table copy) and --drop-old, each while the writer inserts.
# Needs build/obxctl (make build/obxctl). UPGRADE_WRITES: the writer's rows
# per phase (default 3000, 2 ms apart; raise it with UPGRADE_ROWS so that it
# outlasts the copy).
mariadb_v1() {
    "$here/db.sh" start mariadb >/dev/null
    eval "$("$here/db.sh" env mariadb)"
    local M=(mariadb -h 127.0.0.1 -P "${OBX_MY_PORT:-23069}" -u obx -pobxpw obx) writes=${UPGRADE_WRITES:-3000}
    local ren='s/`Outbox/`UpOutbox/g; s/`UpOutboxMessageId/`OutboxMessageId/g; s/IX_Outbox/IX_UpOutbox/g; s/FK_Outbox/FK_UpOutbox/g'
    "${M[@]}" -e "DROP TABLE IF EXISTS UpOutboxJoinMember, UpOutboxJoin, UpOutbox"
    sed "$ren" "$here/schema/v1/mariadb/outbox.sql" | "${M[@]}"
    "${M[@]}" -e "INSERT INTO UpOutbox (Id, Topic, Payload, MessageId, Status, Priority)
        SELECT UUID(), 't', CONCAT('payload ', seq), UUID(), seq % 4, CAST(seq % 11 AS SIGNED) - 5 FROM seq_1_to_$rows"
    printf 'DELIMITER //\n%s//\n' "CREATE OR REPLACE PROCEDURE up_writer(n INT) BEGIN
        DECLARE i INT DEFAULT 0; DECLARE worst BIGINT DEFAULT 0; DECLARE t0 DATETIME(6);
        WHILE i < n DO SET t0 = SYSDATE(6);
          INSERT INTO UpOutbox (Id, Topic, Payload, MessageId) VALUES (UUID(), 'w', 'w', UUID());
          SET worst = GREATEST(worst, TIMESTAMPDIFF(MICROSECOND, t0, SYSDATE(6))), i = i + 1;
          DO SLEEP(0.002); END WHILE;
        SELECT worst DIV 1000; END" | "${M[@]}"
    echo "MariaDB, layout 1 -> 2, $rows rows: ms, statement (the slow ones)"
    local phase t0 writer
    for phase in deploy keys drop-old; do
        "${M[@]}" -N -e "CALL up_writer($writes)" >"$work/worst" &
        writer=$!
        sleep 1
        t0=$(date +%s%N)
        case $phase in
        deploy)
            sed "$ren" "$here/../sql/mariadb/outbox.sql" | "${M[@]}" -vvv 2>/dev/null |
                awk '/^(ALTER|CREATE|DROP)/ {st = $0} /sec\)$/ {t = $0; sub(/.*\(/, "", t); sub(/ sec\)/, "", t); if (t * 1000 >= 20) printf "  %8.0f  %.90s\n", t * 1000, st}' ;;
        *) "$here/../build/obxctl" -c "$OBX_TEST_MY" --table UpOutbox -v upgrade --"$phase" 2>&1 |
               sed -n 's/.*schema change on UpOutbox: \(.\{0,90\}\).*/           \1/p; s/^upgraded/  &/p' ;;
        esac
        echo "  $phase: $((($(date +%s%N) - t0) / 1000000)) ms in all"
        wait "$writer" || true
        echo "  longest single-row insert meanwhile: $(cat "$work/worst") ms"
    done
    "${M[@]}" -e "SELECT COUNT(*) AS rows_kept FROM UpOutbox; DROP TABLE UpOutboxJoinMember, UpOutboxJoin, UpOutbox; DROP PROCEDURE up_writer"
}

for b in $backends; do
    case $b in
    pg) pg ;;
    pg-rewrite) pg_rewrite ;;
    mariadb) mariadb_ ;;
    mariadb-v1) mariadb_v1 ;;
    *) echo "unknown backend $b" >&2; exit 2 ;;
    esac
done

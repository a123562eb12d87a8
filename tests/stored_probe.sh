#!/usr/bin/env bash
# tests/stored_probe.sh [size] [cpu] [convert] - MariaDB: the outbox's state
# columns (ReadyRank, LeasedUntil, DoneAt, DeadAt) VIRTUAL, as deploy adds them
# to an older table, against PERSISTENT, as a new table has them, on two
# copies of sql/mariadb/outbox.sql's table and indexes. By hand, not in CI:
# prints the figures of docs/PERFORMANCE.md ("MariaDB: stored state columns").
#   size     STORED_ROWS rows (default 200000; half Done, half ready, 200-byte
#            payloads) in each: data and index length
#   cpu      STORED_ROUNDS alternated rounds (default 4): the server's CPU
#            (mariadbd, /proc, 10 ms ticks) per message of STORED_N single-row
#            INSERTs in one transaction (default 20000; no commit wait, the
#            row's own work), 100-row INSERTs, and a loop of claims of 100 and
#            their acks in a procedure (faster than purge: the claim walks
#            delete-marked index entries); purge waited out in each phase.
#            STORED_STEPS: a subset of "one batch drain" (the default)
#   convert  STORED_ROWS rows (default 1000000; 90 % Done) VIRTUAL, made
#            PERSISTENT by the ALTER of docs/RELIABILITY.md while a writer
#            inserts a row every 2 ms: the statement's time, the writer's
#            longest wait
# Uses the throwaway MariaDB of tests/db.sh (OBX_MY_PORT, OBX_TEST_RUNDIR),
# started if it is not running; its tables OutV and OutP are dropped after.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
phases=${*:-size cpu convert}
rundir=${OBX_TEST_RUNDIR:-${TMPDIR:-/tmp}/obx-test-$(id -u)}
export OBX_TEST_RUNDIR=$rundir
"$here/db.sh" start mariadb >/dev/null
eval "$("$here/db.sh" env mariadb)"
key() { sed -n "s/.*;$1=\([^;]*\);.*/\1/p" <<<";$OBX_TEST_MY"; }
M=(mariadb -h "$(key Server)" -P "$(key Port)" -u "$(key Uid)" -p"$(key Pwd)" "$(key Database)")
pid=$(cat "$rundir/my.pid")
work=$(mktemp -d)
trap 'rm -rf "$work"; "${M[@]}" -e "DROP TABLE IF EXISTS OutV, OutP" >/dev/null 2>&1 || true' EXIT
state='^ *`(ReadyRank|LeasedUntil|DoneAt|DeadAt)`'

# The table T (OutV or OutP) and its indexes, from the schema file.
ddl() {
    local t=$1
    echo "DROP TABLE IF EXISTS $t;"
    awk '/^CREATE TABLE IF NOT EXISTS `Outbox` \(/ {p = 1} p {print} p && /;$/ {exit}' "$here/../sql/mariadb/outbox.sql" |
        if [ "$t" = OutV ]; then sed -E "/$state/ s/ PERSISTENT,\$/ VIRTUAL,/"; else cat; fi
    grep '^CREATE INDEX IF NOT EXISTS `IX_Outbox_' "$here/../sql/mariadb/outbox.sql"
}
make_table() { ddl "$1" | sed "s/\`Outbox\`/\`$1\`/g; s/IX_Outbox_/IX_$1_/g" | "${M[@]}"; }
fill() { # T ROWS DONE_EVERY: rows, one in DONE_EVERY ready, the rest Done
    "${M[@]}" -e "INSERT INTO $1 (Id, MessageId, Topic, Payload, Status, IsProcessed, ProcessedAt)
        SELECT UUID(), UUID(), 'bench.topic', REPEAT('x', 200), IF(seq % $3 = 0, 0, 2), IF(seq % $3 = 0, 0, 1),
        IF(seq % $3 = 0, NULL, UTC_TIMESTAMP(6)) FROM seq_1_to_$2"
}
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
history() { "${M[@]}" -N -e "SELECT COUNT FROM information_schema.INNODB_METRICS WHERE NAME = 'trx_rseg_history_len'"; }
settle() { local i; for i in $(seq 1 120); do [ "$(history)" -lt 50 ] && return; sleep 0.5; done; }

for phase in $phases; do
    case $phase in
    size)
        rows=${STORED_ROWS:-200000}
        for t in OutV OutP; do make_table $t; fill $t "$rows" 2; "${M[@]}" -e "ANALYZE TABLE $t" >/dev/null; done
        echo "size, $rows rows (half Done, half ready): table, data length, index length, average row"
        "${M[@]}" -N -e "SELECT TABLE_NAME, DATA_LENGTH, INDEX_LENGTH, AVG_ROW_LENGTH FROM information_schema.TABLES
            WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ('OutV', 'OutP') ORDER BY TABLE_NAME DESC" | sed 's/^/  /'
        ;;
    cpu)
        n=${STORED_N:-20000}
        { echo "START TRANSACTION;"
          for i in $(seq 1 "$n"); do echo "INSERT INTO TT (Id, MessageId, Topic, Payload) VALUES (UUID(), UUID(), 't', REPEAT('x', 200));"; done
          echo "COMMIT;"; } >"$work/one.sql"
        for i in $(seq 1 $((n / 100))); do echo "INSERT INTO TT (Id, MessageId, Topic, Payload) SELECT UUID(), UUID(), 't', REPEAT('x', 200) FROM seq_1_to_100;"; done >"$work/batch.sql"
        echo "cpu: server µs per message (round: VIRTUAL, PERSISTENT), $n single-row inserts, $n in 100-row inserts, then all drained"
        for r in $(seq 1 "${STORED_ROUNDS:-4}"); do
            line="  round $r:"
            for t in OutV OutP; do
                make_table $t
                "${M[@]}" <<SQL
DROP PROCEDURE IF EXISTS drain_$t;
DELIMITER //
CREATE PROCEDURE drain_$t()
BEGIN
  DECLARE o UUID; DECLARE k INT DEFAULT 1;
  WHILE k > 0 DO
    SET o = UUID();
    UPDATE $t SET Status = 1, OwnerToken = o, LockedUntil = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, Starts = Starts + 1
     WHERE ReadyRank <= UTC_TIMESTAMP(6) + INTERVAL 10 SECOND ORDER BY ReadyRank LIMIT 100;
    SET k = ROW_COUNT();
    UPDATE $t SET Status = 2, IsProcessed = 1, ProcessedAt = UTC_TIMESTAMP(6), OwnerToken = NULL, LockedUntil = NULL
     WHERE OwnerToken = o AND Status = 1;
  END WHILE;
END//
DELIMITER ;
SQL
                settle
                for step in ${STORED_STEPS:-one batch drain}; do
                    c0=$(cpu)
                    case $step in
                    drain) "${M[@]}" -e "CALL drain_$t()" ;;
                    *) sed "s/TT/$t/" "$work/$step.sql" | "${M[@]}" ;;
                    esac
                    settle
                    k=$n; [ $step = drain ] && k=$("${M[@]}" -N -e "SELECT COUNT(*) FROM $t")
                    line+=" $step $(awk -v c=$(($(cpu) - c0)) -v k="$k" 'BEGIN {printf "%.1f", c * 10000 / k}')"
                done
                line+=" ($t) "
                "${M[@]}" -e "DROP PROCEDURE drain_$t"
            done
            echo "$line"
        done
        ;;
    convert)
        rows=${STORED_ROWS:-1000000}
        make_table OutV
        fill OutV "$rows" 10
        alter="ALTER TABLE OutV $(for c in ReadyRank LeasedUntil DoneAt DeadAt; do printf 'DROP INDEX `IX_OutV_%s`, ' $c; done)"
        alter+=$(ddl OutP | grep -E "$state" | sed -E 's/^ *(`[A-Za-z]+`)(.*),$/DROP COLUMN \1, ADD COLUMN \1\2, /' | tr -d '\n')
        alter+=$(grep '^CREATE INDEX IF NOT EXISTS `IX_Outbox_' "$here/../sql/mariadb/outbox.sql" | grep -E 'ReadyRank|LeasedUntil|DoneAt|DeadAt' |
            sed -E 's/^CREATE INDEX IF NOT EXISTS `IX_Outbox_([A-Za-z]+)` ON `Outbox` (\([^)]*\)).*/ADD INDEX `IX_OutV_\1` \2, /' | tr -d '\n')
        alter+="ALGORITHM=COPY, LOCK=SHARED"
        for i in $(seq 1 100000); do echo "INSERT INTO OutV (Id, MessageId, Topic, Payload) VALUES (UUID(), UUID(), 'w', 'w'); SELECT UNIX_TIMESTAMP(NOW(6)); DO SLEEP(0.002);"; done >"$work/w.sql"
        "${M[@]}" -N <"$work/w.sql" >"$work/w.out" 2>&1 &
        writer=$!
        sleep 2
        t0=$(date +%s%N)
        "${M[@]}" -e "$alter"
        t1=$(date +%s%N)
        sleep 2
        kill "$writer" 2>/dev/null || true
        wait "$writer" 2>/dev/null || true
        echo "convert, $rows rows (90 % Done): the ALTER $(((t1 - t0) / 1000000)) ms; state columns now: $("${M[@]}" -N -e "SELECT GROUP_CONCAT(DISTINCT EXTRA) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'OutV' AND COLUMN_NAME IN ('ReadyRank', 'LeasedUntil', 'DoneAt', 'DeadAt')")"
        awk 'NR > 1 && $1 - p > m {m = $1 - p} {p = $1} END {printf "  writer: %d rows, longest wait %.0f ms\n", NR, m * 1000}' "$work/w.out"
        ;;
    *) echo "stored_probe.sh: unknown phase '$phase' (size, cpu, convert)" >&2; exit 2 ;;
    esac
done

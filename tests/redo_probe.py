#!/usr/bin/env python3
"""Per-statement redo and server time of MariaDB's claim/ack cycle (issue 30;
docs/PERFORMANCE.md, "MariaDB: where the redo and the server's CPU go").

OBX_MY_PORT=... OBX_TEST_RUNDIR=... tests/redo_probe.py VARIANT[,VARIANT...] [DONE_ROWS] [BATCHES]

Needs the throwaway server of tests/db.sh (root over TCP, no password), its
run dir (mariadbd's pid: server CPU) and the bench's tables in `obx` (one
`BENCH_ONLY=enqb` run of build/bench against it creates them); per-statement
times need the server started with --performance-schema=ON (else 0).
Variants, joined by "+": today, notrig (no join trigger), noLD (no Leased and
Done indexes), noReady, noClaim (the pick by Ready), noOrd, l2 (a hand-made
layout 2: UUID keys, state columns VIRTUAL each indexed alone, no
Status-led index), l2p (with l2: PERSISTENT), presized (the columns a claim
and an ack set hold same-size values from the insert on: no NULL <-> value
change, so InnoDB updates the row in place); "ideal" alone runs the bench's
ideal outbox statements on `ideal_outbox`.

Each variant is a copy of the library's outbox table (CREATE TABLE ... LIKE
the bench's `OutboxBench`) changed as its name says; the library's
statements as it sends them (the general log's text, parameters inlined).
Pass 1, purge held back by an open snapshot in another session: redo per
statement from Innodb_lsn_current read between statements, then the purge's
redo once the snapshot closes. Pass 2, purge free, fresh rows: the server's
time per statement from performance_schema (digest sums) and mariadbd's CPU.
"""
import subprocess, sys, time, threading

sys.dont_write_bytecode = True  # no __pycache__ in tests/
from probe_common import client, my, srv_cpu  # noqa: E402

VARIANTS = sys.argv[1].split(",")
DONE = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
K = int(sys.argv[3]) if len(sys.argv) > 3 else 50
PAY = ('{"k":"abcdefghijklmnopqrstuvwxyz0123456789"}' * 5)[:200]
OWNER = "01a21ed0-5b34-7686-bc9b-85da06f4fb00"


def lsn():
    return int(my("SHOW GLOBAL STATUS LIKE 'Innodb_lsn_current'").split()[1])


METRICS = ("index_page_splits", "index_page_reorg_attempts", "index_page_merge_attempts", "index_page_discards",
           "buffer_pages_created")


def metrics():
    out = my("SELECT name, count FROM information_schema.innodb_metrics WHERE name IN (%s)" %
             ",".join("'%s'" % m for m in METRICS))
    return {l.split("\t")[0]: int(l.split("\t")[1]) for l in out.splitlines()}


def uid(run, i):
    return "01a2%04x-%04x-7000-8000-%012x" % (run, i >> 16, i & 0xffff)


# ---- the variants: (table changes, pick index, has trigger, key type)
def variant(name):
    v = dict(drop=[], add=[], trigger=True, pick="IX_P_Claim", key="CHAR(36)", order="`ClaimRank`",
             ready="c.`Status` = 0 AND c.`NextAttemptAt` <= UTC_TIMESTAMP(6) AND c.`IsProcessed` = 0", l2=False, presized=False, inlist=False, fatpick=False, noordcheck=False)
    for part in name.split("+"):
        if part == "today":
            pass
        elif part == "notrig":
            v["trigger"] = False
        elif part == "noLD":  # without the Leased and Done indexes
            v["drop"] += ["IX_P_Leased", "IX_P_Done"]
        elif part == "noReady":
            v["drop"] += ["IX_P_Ready"]
        elif part == "noClaim":  # pick by Ready
            v["drop"] += ["IX_P_Claim"]
            v["pick"], v["order"] = "IX_P_Ready", "`NextAttemptAt`"
        elif part == "noOrd":
            v["drop"] += ["IX_P_Ordering"]
        elif part == "l2":  # hand-made layout 2: UUID keys, state columns (VIRTUAL) alone indexed
            v["l2"] = True
            v["key"] = "UUID"
            v["drop"] += ["IX_P_Ready", "IX_P_Leased", "IX_P_Done", "IX_P_Claim"]
            v["pick"], v["order"] = "IX_P_ReadyRank", "`ReadyRank`"
            v["ready"] = "c.`ReadyRank` <= UTC_TIMESTAMP(6) + INTERVAL 50 SECOND AND c.`NextAttemptAt` <= UTC_TIMESTAMP(6)"
        elif part == "presized":  # no NULL <-> value change in claim and ack: in-place updates
            v["presized"] = True
        elif part == "inlist":  # the claim, read and ack name their rows by a literal IN list
            v["inlist"] = True
        elif part == "fatpick":  # the pick returns the claim's columns; no read-back
            v["fatpick"] = True
        elif part == "noordcheck":  # the pick without its ordering-key condition (measurement only)
            v["noordcheck"] = True
        elif part == "l2p":  # the same, PERSISTENT
            v["l2"] = "PERSISTENT"
        else:
            raise SystemExit("unknown variant part " + part)
    return v


def setup(name, v):
    my("DROP TABLE IF EXISTS `P`; CREATE TABLE `P` LIKE `OutboxBench`;")
    for ix in ("Ready", "Leased", "Done", "Ordering", "Claim"):
        my("ALTER TABLE `P` RENAME INDEX `IX_OutboxBench_%s` TO `IX_P_%s`" % (ix, ix))
    for ix in v["drop"]:
        my("ALTER TABLE `P` DROP INDEX `%s`" % ix)
    if v["l2"]:
        kind = "PERSISTENT" if v["l2"] == "PERSISTENT" else "VIRTUAL"
        my("ALTER TABLE `P` MODIFY `Id` UUID NOT NULL, MODIFY `OwnerToken` UUID NULL, MODIFY `MessageId` UUID NOT NULL, "
           "ADD `ReadyRank` DATETIME(6) AS (IF(`Status` = 0, `ClaimRank`, NULL)) %s, "
           "ADD `LeasedUntil` DATETIME(6) AS (IF(`Status` = 1, `LockedUntil`, NULL)) %s, "
           "ADD `DoneAt` DATETIME(6) AS (IF(`Status` = 2, `ProcessedAt`, NULL)) %s, "
           "ADD KEY `IX_P_ReadyRank` (`ReadyRank`), ADD KEY `IX_P_LeasedUntil` (`LeasedUntil`), "
           "ADD KEY `IX_P_DoneAt` (`DoneAt`)" % (kind, kind, kind))
    if v["trigger"]:
        my("DELIMITER //\nCREATE TRIGGER `P_JoinStep2` AFTER UPDATE ON `P` FOR EACH ROW\n"
           " IF NEW.`Status` IN (2, 3) AND OLD.`Status` <> NEW.`Status` THEN\n"
           "  UPDATE `OutboxBenchJoinMember` SET `Status` = IF(NEW.`Status` = 2, 1, 2)\n"
           "   WHERE `OutboxMessageId` = NEW.`Id` AND `Status` = 0;\n END IF//\nDELIMITER ;\n")
    my("INSERT INTO `P` (`Id`, `MessageId`, `Topic`, `Payload`, `Status`, `IsProcessed`, `ProcessedAt`, `ProcessedBy`, "
       "`OwnerToken`, `Starts`, `NextAttemptAt`) SELECT CONCAT('01a10000-', LPAD(HEX(seq >> 16), 4, '0'), "
       "'-7000-8000-', LPAD(HEX(seq & 65535), 12, '0')), UUID(), 'bench.event', '%s', 2, 1, UTC_TIMESTAMP(6), '%s', "
       "'%s', 1, UTC_TIMESTAMP(6) - INTERVAL 1 DAY FROM seq_1_to_%d; ANALYZE TABLE `P`;" % (PAY, OWNER, OWNER, DONE))


PRESIZED = False
ENQ = (0, 0)


def fill_ready(run, n):
    ids = [uid(run, i) for i in range(n)]
    pre = ", '00000000-0000-0000-0000-000000000000', '1970-01-01', '1970-01-01', '00000000-0000-0000-0000-000000000000'"
    rows = ",".join("('%s', '%s', 'bench.event', '%s', UTC_TIMESTAMP(6) - INTERVAL %d MICROSECOND%s)" %
                    (x, uid(run + 1000, i), PAY, (n - i) * 1000, pre if PRESIZED else "") for i, x in enumerate(ids))
    rows = rows.split("),(")
    head = ("INSERT INTO `P` (`Id`, `MessageId`, `Topic`, `Payload`, `NextAttemptAt`%s) VALUES " %
            (", `OwnerToken`, `LockedUntil`, `ProcessedAt`, `ProcessedBy`" if PRESIZED else ""))
    # batches of 100 rows, each its own transaction (autocommit), as the library's batch enqueue
    stmts = [head + "),(".join(rows[b:b + 100]) for b in range(0, n, 100)]
    stmts = [x if x.endswith(")") else x + ")" for x in stmts]
    stmts = [x if x[len(head)] == "(" else head + "(" + x[len(head):] for x in stmts]
    global ENQ
    l0, c0 = lsn(), srv_cpu()
    my(";\n".join(stmts) + ";")
    ENQ = ((lsn() - l0) / n, (srv_cpu() - c0) / n * 1e6)
    return ids


def statements(v, lst):
    byids = ("JSON_TABLE('%s', '$[*]' COLUMNS (`obx_id` CHAR(36) PATH '$')) AS j STRAIGHT_JOIN `P` FORCE INDEX "
             "(PRIMARY) ON `P`.`Id` = j.`obx_id`") % lst
    if v["inlist"]:
        byids = "`P`"
    pick = ("SELECT t.`Id` FROM (SELECT c.`Id` FROM `P` AS c FORCE INDEX (`%s`) WHERE %s AND (c.`OrderingKey` IS NULL OR "
            "(NOT EXISTS (SELECT 1 FROM `P` AS o WHERE o.`OrderingLive` = c.`OrderingKey` AND o.`OrderingState` = 0 AND "
            "o.`OrderingSeq` <= c.`OrderingSeq` AND (o.`OrderingSeq` < c.`OrderingSeq` OR o.`Id` < c.`Id`)) AND NOT EXISTS "
            "(SELECT 1 FROM `P` AS o WHERE o.`OrderingLive` = c.`OrderingKey` AND o.`OrderingState` = 1))) AND "
            "c.`ClaimRank` <= UTC_TIMESTAMP(6) + INTERVAL 50 SECOND ORDER BY c.%s LIMIT 200) AS c STRAIGHT_JOIN `P` AS t "
            "FORCE INDEX (PRIMARY) ON t.`Id` = c.`Id` WHERE t.`Status` = 0 AND t.`NextAttemptAt` <= UTC_TIMESTAMP(6) AND "
            "t.`IsProcessed` = 0 LIMIT 100 FOR UPDATE SKIP LOCKED") % (v["pick"], v["ready"], v["order"])
    claim = ("UPDATE %s SET `Status` = 1, `OwnerToken` = '%s', `LockedUntil` = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, "
             "`Starts` = `Starts` + 1 WHERE `P`.`Status` = 0") % (byids, OWNER)
    read = ("SELECT `Id`, `MessageId`, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', `CreatedAt`) DIV 1000 AS SIGNED), "
            "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', `DueTimeUtc`) DIV 1000 AS SIGNED), `RetryCount`, "
            "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', `LockedUntil`) DIV 1000 AS SIGNED), "
            "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', `NextAttemptAt`) DIV 1000 AS SIGNED), `Starts`, "
            "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', `ExpiresAt`) DIV 1000 AS SIGNED), "
            "(CASE WHEN `CorrelationId` IS NULL THEN 0 ELSE 1 END) + (CASE WHEN `LastError` IS NULL THEN 0 ELSE 2 END) + "
            "(CASE WHEN `OrderingKey` IS NULL THEN 0 ELSE 4 END) + (CASE WHEN `TenantId` IS NULL THEN 0 ELSE 8 END) + "
            "(CASE WHEN `AggregateType` IS NULL THEN 0 ELSE 16 END) + (CASE WHEN `AggregateId` IS NULL THEN 0 ELSE 32 END) + "
            "(CASE WHEN `Headers` IS NULL THEN 0 ELSE 64 END) + (`Priority` + 8) * 128, `Topic`, `Payload`, `CorrelationId`, "
            "`LastError`, `OrderingKey`, `TenantId`, `AggregateType`, `AggregateId`, `Headers` FROM %s "
            "WHERE `P`.`OwnerToken` = '%s'") % (byids, OWNER)
    ack = ("UPDATE %s SET `IsProcessed` = 1, `ProcessedAt` = UTC_TIMESTAMP(6), `ProcessedBy` = '%s', "
           "`LockedUntil` = %s, `Status` = 2 WHERE `OwnerToken` = '%s' AND `Status` = 1") % (byids, OWNER, "'1970-01-01'" if v["presized"] else "NULL", OWNER)
    if v["noordcheck"]:
        pick = pick.split(" AND (c.`OrderingKey` IS NULL OR ")[0] + " AND " + pick.split("o.`OrderingState` = 1))) AND ", 1)[1]
    if v["inlist"]:
        inl = " WHERE `P`.`Id` IN (%s) AND " % lst[1:-1].replace('"', "'")
        claim, read, ack = (x.replace(" WHERE ", inl, 1) for x in (claim, read, ack))
    if v["fatpick"]:
        cols = read.split(" FROM ", 1)[0][len("SELECT "):]
        cols = cols.replace("`Id`, `MessageId`", "t.`Id`, t.`MessageId`", 1)
        pick = pick.replace("SELECT t.`Id` FROM (", "SELECT " + cols + " FROM (", 1)
        return [("begin", "START TRANSACTION"), ("pick", pick), ("claim", claim), ("commit", "COMMIT"), ("ack", ack)]
    return [("begin", "START TRANSACTION"), ("pick", pick), ("claim", claim), ("read", read), ("commit", "COMMIT"),
            ("ack", ack)]


LSNQ = "SHOW GLOBAL STATUS LIKE 'Innodb_lsn_current'"


def holder(stop):
    """An open snapshot: purge keeps every undo record meanwhile."""
    p = subprocess.Popen(client(), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    p.stdin.write("START TRANSACTION WITH CONSISTENT SNAPSHOT; SELECT COUNT(*) FROM `P`;\n")
    p.stdin.flush()
    stop.wait()
    p.stdin.write("COMMIT;\n")
    p.stdin.close()
    p.wait()


def history():
    return int(my("SELECT count FROM information_schema.innodb_metrics WHERE name = 'trx_rseg_history_len'") or 0)


def run(name):
    global PRESIZED
    v = variant(name)
    PRESIZED = v["presized"]
    setup(name, v)
    out = {}
    # pass 1: redo per statement, purge held
    ids = fill_ready(1, K * 100)
    my("SET GLOBAL innodb_max_purge_lag_wait = 0")  # the fill's purge done before we start
    time.sleep(0.5)
    stop = threading.Event()
    th = threading.Thread(target=holder, args=(stop,))
    th.start()
    time.sleep(1.0)
    script = ["SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;", LSNQ + ";"]
    order = []
    for b in range(K):
        lst = "[" + ",".join('"%s"' % x for x in ids[b * 100:(b + 1) * 100]) + "]"
        for tag, sql in statements(v, lst):
            script += [sql + ";", LSNQ + ";"]
            order.append(tag)
    m0 = metrics()
    res = my("\n".join(script))
    m1 = metrics()
    vals = [int(l.split("\t")[1]) for l in res.splitlines() if l.startswith("Innodb_lsn_current")]
    redo = {}
    for i, tag in enumerate(order):
        redo[tag] = redo.get(tag, 0) + vals[i + 1] - vals[i]
    left = my("SELECT COUNT(*) FROM `P` WHERE `Status` <> 2").strip()
    l0 = lsn()
    c0 = srv_cpu()
    stop.set()
    th.join()
    t0 = time.time()
    while history() > 0 and time.time() - t0 < 60:
        time.sleep(0.2)
    time.sleep(1.0)
    redo["purge"] = lsn() - l0
    out["purge_cpu"] = (srv_cpu() - c0) / (K * 100) * 1e6
    out["redo"] = {t: x / (K * 100) for t, x in redo.items()}
    out["metrics"] = {m: (m1[m] - m0[m]) / K for m in METRICS}
    out["left"] = left
    # pass 2: server time per statement (performance_schema), purge free
    ids = fill_ready(2, K * 100)
    out["enq"] = ENQ
    my("SET GLOBAL innodb_max_purge_lag_wait = 0")
    script = ["SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;"]
    for b in range(K):
        lst = "[" + ",".join('"%s"' % x for x in ids[b * 100:(b + 1) * 100]) + "]"
        script += ["/*%s*/ %s;" % (tag, sql) for tag, sql in statements(v, lst)]
    my("TRUNCATE performance_schema.events_statements_summary_by_digest", db="performance_schema", check=False)
    c0 = srv_cpu()
    l0 = lsn()
    t0 = time.time()
    my("\n".join(script))
    wall = time.time() - t0
    my("SET GLOBAL innodb_max_purge_lag_wait = 0")
    c1 = srv_cpu()
    out["redo2"] = (lsn() - l0) / (K * 100)
    out["cpu"] = (c1 - c0) / (K * 100) * 1e6
    out["wall"] = wall / (K * 100) * 1e6
    dig = my("SELECT DIGEST_TEXT, COUNT_STAR, SUM_TIMER_WAIT, SUM_ROWS_AFFECTED FROM "
             "performance_schema.events_statements_summary_by_digest WHERE SCHEMA_NAME = 'obx'", db="performance_schema",
             check=False)
    st = {}
    for l in dig.splitlines():
        text, cnt, tw, _ = l.split("\t")
        tag = ("trigger" if "OutboxBenchJoinMember" in text else "pick" if "FOR UPDATE SKIP LOCKED" in text or text.startswith("SELECT `t` .") else
               "claim" if "`Starts` = `Starts` + ?" in text else "ack" if "`ProcessedBy` =" in text else
               "read" if text.startswith("SELECT `Id`") else "begin" if text.startswith("START") else
               "commit" if text.startswith("COMMIT") else "other")
        st[tag] = st.get(tag, 0) + int(tw) / 1e6 / (K * 100)  # ps -> us per message
    out["time"] = st
    return out


def ideal():
    my("TRUNCATE ideal_outbox; INSERT INTO ideal_outbox (topic, payload, status, next_attempt_at) SELECT 'bench.event', '%s', 2, UTC_TIMESTAMP(6) - INTERVAL 1 DAY FROM seq_1_to_%d;" % (PAY, DONE))
    my("INSERT INTO ideal_outbox (topic, payload, status, next_attempt_at) SELECT 'bench.event', '%s', 0, UTC_TIMESTAMP(6) - INTERVAL (%d - seq) MICROSECOND FROM seq_1_to_%d; SET GLOBAL innodb_max_purge_lag_wait = 0;" % (PAY, K*100, K*100))
    # batch enqueue: 100 rows per statement, each its own transaction
    stmts = ["INSERT INTO ideal_outbox (topic, payload) VALUES " + ",".join(["('bench.event', '%s')" % PAY] * 100)
             for _ in range(K)]
    l0, c0 = lsn(), srv_cpu()
    my(";\n".join(stmts) + ";")
    print("ideal batch enqueue (100 per statement): redo %.0f B/msg, server cpu %.1f us/msg" %
          ((lsn() - l0) / K / 100, (srv_cpu() - c0) / K / 100 * 1e6))
    my("DELETE FROM ideal_outbox WHERE status = 0 AND topic = 'bench.event' AND created_at > UTC_TIMESTAMP(6) - INTERVAL 1 HOUR "
       "AND id > (SELECT m FROM (SELECT MAX(id) - %d AS m FROM ideal_outbox) AS x)" % (K * 100))
    first = int(my("SELECT MIN(id) FROM ideal_outbox WHERE status = 0"))
    q = "SHOW GLOBAL STATUS LIKE 'Innodb_lsn_current';"
    s = ["SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;", q]
    for b in range(K):
        ids = ",".join(str(first + b*100 + i) for i in range(100))
        s += ["START TRANSACTION;", "SELECT t.id, t.topic, t.payload FROM (SELECT id FROM ideal_outbox FORCE INDEX (ideal_ready) WHERE status = 0 AND next_attempt_at <= UTC_TIMESTAMP(6) ORDER BY next_attempt_at LIMIT 200) AS c STRAIGHT_JOIN ideal_outbox AS t ON t.id = c.id WHERE t.status = 0 LIMIT 100 FOR UPDATE SKIP LOCKED;",
              "UPDATE ideal_outbox SET status = 1, owner = '%s', locked_until = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND WHERE id IN (%s);" % (OWNER, ids), "COMMIT;", q,
              "UPDATE ideal_outbox SET status = 2, locked_until = NULL WHERE id IN (%s) AND owner = '%s' AND status = 1;" % (ids, OWNER), q]
    m = "SELECT name, count FROM information_schema.innodb_metrics WHERE name IN ('index_page_reorg_attempts','index_page_splits');"
    m0 = my(m); out = my("\n".join(s)); m1 = my(m)
    v = [int(l.split("\t")[1]) for l in out.splitlines() if l.startswith("Innodb")]
    l0 = int(my(q).split()[1]); my("SET GLOBAL innodb_max_purge_lag_wait = 0"); 
    time.sleep(1); purge = int(my(q).split()[1]) - l0
    claim = sum(v[2*i+1]-v[2*i] for i in range(K)); ack = sum(v[2*i+2]-v[2*i+1] for i in range(K))
    print("ideal redo B/msg: claim %.0f ack %.0f purge %.0f" % (claim/K/100, ack/K/100, purge/K/100)); 
    # pass 2: server time per statement (performance_schema), purge free
    K2 = K
    my("INSERT INTO ideal_outbox (topic, payload, status, next_attempt_at) SELECT 'bench.event', '%s', 0, UTC_TIMESTAMP(6) - INTERVAL (%d - seq) MICROSECOND FROM seq_1_to_%d; SET GLOBAL innodb_max_purge_lag_wait = 0;" % (PAY, K2*100, K2*100))
    first = int(my("SELECT MIN(id) FROM ideal_outbox WHERE status = 0"))
    s = ["SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;"]
    for b in range(K2):
        ids = ",".join(str(first + b*100 + i) for i in range(100))
        s += ["START TRANSACTION;", "SELECT t.id, t.topic, t.payload FROM (SELECT id FROM ideal_outbox FORCE INDEX (ideal_ready) WHERE status = 0 AND next_attempt_at <= UTC_TIMESTAMP(6) ORDER BY next_attempt_at LIMIT 200) AS c STRAIGHT_JOIN ideal_outbox AS t ON t.id = c.id WHERE t.status = 0 LIMIT 100 FOR UPDATE SKIP LOCKED;",
              "UPDATE ideal_outbox SET status = 1, owner = '%s', locked_until = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND WHERE id IN (%s);" % (OWNER, ids), "COMMIT;",
              "UPDATE ideal_outbox SET status = 2, locked_until = NULL WHERE id IN (%s) AND owner = '%s' AND status = 1;" % (ids, OWNER)]
    my("TRUNCATE performance_schema.events_statements_summary_by_digest", check=False)
    c0 = srv_cpu(); my("\n".join(s)); my("SET GLOBAL innodb_max_purge_lag_wait = 0"); c1 = srv_cpu()
    dig = my("SELECT DIGEST_TEXT, SUM_TIMER_WAIT FROM performance_schema.events_statements_summary_by_digest WHERE SCHEMA_NAME = 'obx'", check=False)
    st = {}
    for l in dig.splitlines():
        t, w = l.split("\t")
        tag = "pick" if "SKIP LOCKED" in t else "claim" if t.startswith("UPDATE") and "INTERVAL" in t.upper() else "ack" if t.startswith("UPDATE") else "commit" if t.startswith("COMMIT") else t[:30]
        st[tag] = st.get(tag, 0) + int(w) / 1e6 / (K2 * 100)
    print("ideal server us/msg:", " ".join("%s %.1f" % kv for kv in st.items()), "cpu %.1f" % ((c1 - c0) / K2 / 100 * 1e6))


def main():
    my("SET GLOBAL innodb_monitor_enable = 'all'")  # the page split and reorganization counters
    for name in VARIANTS:
        if name == "ideal":
            ideal()
            continue
        o = run(name)
        r = o["redo"]
        print("%-22s redo B/msg: " % name + " ".join("%s %.0f" % (t, r.get(t, 0)) for t in
                                                      ("pick", "claim", "read", "commit", "ack", "purge")) +
              "  total %.0f  (pass 2: %.0f)  left %s" % (sum(r.values()), o["redo2"], o["left"]))
        print("%-22s server us/msg: " % "" + " ".join("%s %.1f" % (t, o["time"].get(t, 0)) for t in
                                                       ("pick", "claim", "read", "commit", "ack", "trigger", "begin")) +
              "  cpu %.1f wall %.1f purge-cpu %.1f" % (o["cpu"], o["wall"], o["purge_cpu"]))
        print("%-22s batch enqueue (100 per statement): redo %.0f B/msg, server cpu %.1f us/msg" % ("", o["enq"][0], o["enq"][1]))
        print("%-22s per batch: " % "" + " ".join("%s %.1f" % (m, x) for m, x in o["metrics"].items()))
        sys.stdout.flush()


main()

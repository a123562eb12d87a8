#!/usr/bin/env python3
"""MariaDB: what carrying keyed acks into the claim's transaction costs, per
statement (issue 30; docs/PERFORMANCE.md, "Ordered delivery: a drain over 100
keys").

OBX_MY_PORT=... OBX_TEST_RUNDIR=... tests/keyed_carry_probe.py [BATCHES]
tests/keyed_carry_probe.py --sum SLOW_LOG [MESSAGES]

Needs the throwaway server of tests/db.sh (root over TCP, no password). The
first form turns the slow log on (long_query_time=0, engine verbosity), then
runs, on a table shaped like the outbox's ordering and ready indexes (100 keys
of 200 rows, generated columns as in the DDL), BATCHES batches of 100 in two
orders, alternated, 2 rounds: S acks and wakes in transactions of their own,
then picks (the ready index alone, locking; with the ordered check's two NOT
EXISTS, locking; a plain read) and claims (the order of 859cbba); T does all
of it in one transaction (the carry). Prints per statement the server time, the rows
examined and the pages accessed (median). The second form sums any slow log
(e.g. of one `BENCH_ONLY=draino` run of build/bench) by statement shape:
count, server time per message, rows examined and pages accessed per
statement. performance_schema does not serve: on 10.11 its digests leave out
prepared statements (Connector/ODBC's binary protocol).
"""
import collections, os, re, subprocess, sys

PARKED = "'9999-12-31 23:59:59.999999'"


def my(sql, db="probe"):
    r = subprocess.run(["mariadb", "--no-defaults", "--protocol=tcp", "-h", "127.0.0.1", "-P", os.environ["OBX_MY_PORT"],
                        "-u", "root", "-N", "-B", db], input=sql, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit("mariadb: " + r.stderr[:2000])
    return r.stdout


def batches(mode, t, n):
    ids = "JSON_TABLE(%s, '$[*]' COLUMNS (i INT PATH '$')) AS j STRAIGHT_JOIN %s FORCE INDEX (PRIMARY) ON %s.id = j.i"
    ack = "UPDATE %s SET status = 2 WHERE status = 1;" % (ids % ("@a", t, t))
    wake_read = ("SELECT JSON_ARRAYAGG(x.id) INTO @w FROM (SELECT (SELECT o.id FROM %s AS o WHERE o.live = pk.k AND "
                 "o.st = 0 ORDER BY o.seq, o.id LIMIT 1) AS id FROM (SELECT DISTINCT s.k FROM JSON_TABLE(@a, '$[*]' "
                 "COLUMNS (i INT PATH '$')) AS j STRAIGHT_JOIN %s AS s FORCE INDEX (PRIMARY) ON s.id = j.i) AS pk "
                 "WHERE NOT EXISTS (SELECT 1 FROM %s AS o WHERE o.live = pk.k AND o.st = 1)) AS x;" % (t, t, t))
    wake = "UPDATE %s SET nxt = due WHERE status = 0 AND nxt = %s;" % (ids % ("COALESCE(@w, '[]')", t, t), PARKED)
    pick_locked = "SELECT id FROM %s FORCE INDEX (ix_r) WHERE rr <= UTC_TIMESTAMP(6) ORDER BY rr LIMIT 100 FOR UPDATE SKIP LOCKED;" % t
    pick_ordered = ("SELECT c.id FROM %s AS c FORCE INDEX (ix_r) WHERE c.rr <= UTC_TIMESTAMP(6) AND NOT EXISTS (SELECT 1 "
                    "FROM %s AS o WHERE o.live = c.k AND o.st = 0 AND o.seq < c.seq) AND NOT EXISTS (SELECT 1 FROM %s AS o "
                    "WHERE o.live = c.k AND o.st = 1) ORDER BY c.rr LIMIT 100 FOR UPDATE SKIP LOCKED;" % (t, t, t))
    pick = ("SELECT JSON_ARRAYAGG(c.id) INTO @a FROM (SELECT id FROM %s FORCE INDEX (ix_r) WHERE rr <= UTC_TIMESTAMP(6) "
            "ORDER BY rr LIMIT 100) AS c;" % t)
    claim = "UPDATE %s SET status = 1 WHERE status = 0;" % (ids % ("@a", t, t))
    out = ["DROP TABLE IF EXISTS %s;" % t,
           "CREATE TABLE %s (id INT PRIMARY KEY, status TINYINT NOT NULL, k VARCHAR(64), seq INT, due DATETIME(6), "
           "nxt DATETIME(6), pad VARCHAR(300), live VARCHAR(64) AS (IF(status <> 2, k, NULL)) PERSISTENT, "
           "st TINYINT AS (IF(status <> 2, status, NULL)) PERSISTENT, rr DATETIME(6) AS (IF(status = 0, nxt, NULL)) "
           "PERSISTENT, KEY ix_o (live, st, seq), KEY ix_r (rr, nxt)) ENGINE=InnoDB;" % t,
           "INSERT INTO %s (id, status, k, seq, due, nxt, pad) SELECT s.seq, 0, CONCAT('key-', s.seq %% 100), "
           "(s.seq - 1) DIV 100 + 1, '2000-01-01' + INTERVAL s.seq SECOND, IF(s.seq <= 100, '2000-01-01' + "
           "INTERVAL s.seq SECOND, %s), REPEAT('x', 200) FROM seq_1_to_20000 AS s;" % (t, PARKED),
           "ANALYZE TABLE %s;" % t, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;",
           "START TRANSACTION;", pick_locked, pick_ordered, pick, claim, "COMMIT;"]
    for _ in range(n):
        if mode == "S":
            out += ["START TRANSACTION;", ack, "COMMIT;", wake_read, wake, "START TRANSACTION;", pick_locked, pick_ordered, pick, claim, "COMMIT;"]
        else:
            out += ["START TRANSACTION;", ack, wake_read, wake, pick_locked, pick_ordered, pick, claim, "COMMIT;"]
    return "\n".join(out) + "\n"


def entries(path):
    ent, cur = [], None
    for line in open(path, errors="replace"):
        if line.startswith("# Query_time:"):
            m = re.search(r"Query_time: ([\d.]+)\s+Lock_time: ([\d.]+)\s+Rows_sent: (\d+)\s+Rows_examined: (\d+)", line)
            cur = {"qt": float(m.group(1)), "re": int(m.group(4)), "pa": None, "q": ""}
            ent.append(cur)
        elif line.startswith("#"):
            m = re.search(r"Pages_accessed: (\d+)", line)
            if m and cur:
                cur["pa"] = int(m.group(1))
        elif cur and not line.startswith(("SET timestamp=", "use ")):
            cur["q"] += line
    return ent


def shape(q):
    q = re.sub(r"'(?:[^'\\]|\\.)*'", "?", q)
    return re.sub(r"\s+", " ", re.sub(r"\b\d+(\.\d+)?\b", "N", q)).strip()


def report(groups, per=None):
    for name, es in groups.items():
        pa = sorted(e["pa"] for e in es if e["pa"] is not None)
        qt = sum(e["qt"] for e in es)
        print("%5d  %s  rows examined %7.0f  pages %6s  %s" % (
            len(es), ("%7.1f us/msg" % (qt / per * 1e6)) if per else ("%7.0f us/stmt" % (qt / len(es) * 1e6)),
            sum(e["re"] for e in es) / len(es), pa[len(pa) // 2] if pa else "-", name[:150]))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--sum":
        per = float(sys.argv[3]) if len(sys.argv) > 3 else 20000
        groups = collections.OrderedDict()
        for e in entries(sys.argv[2]):
            groups.setdefault(shape(e["q"]), []).append(e)
        report(collections.OrderedDict(sorted(groups.items(), key=lambda kv: -sum(e["qt"] for e in kv[1]))), per)
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 150
    log = os.path.join(os.environ["OBX_TEST_RUNDIR"], "keyed_carry_slow.log")
    my("CREATE DATABASE IF NOT EXISTS probe", "mysql")
    my("SET GLOBAL slow_query_log_file = '%s'; SET GLOBAL log_slow_verbosity = 'query_plan,engine'; "
       "SET GLOBAL long_query_time = 0; SET GLOBAL slow_query_log = 1;" % log)
    try:
        for rnd in (1, 2):
            for mode in "ST":
                my(batches(mode, "t_%s%d" % (mode, rnd), n))
    finally:
        my("SET GLOBAL slow_query_log = 0; SET GLOBAL long_query_time = 10;")
    names = [("SET status = 2", "ack UPDATE"), ("INTO @w", "wake read"), ("SET nxt = due", "wake UPDATE"),
             ("NOT EXISTS (SELECT 1 FROM t_", "pick with the ordered check, locking"), ("SKIP LOCKED", "pick, locking"), ("INTO @a", "pick, plain read"),
             ("SET status = 1", "claim UPDATE")]
    groups = collections.OrderedDict()
    for e in entries(log):
        m = re.search(r"\bt_([ST])(\d)\b", e["q"])
        name = next((v for k, v in names if k in e["q"]), None)
        if m and name:
            groups.setdefault("%s %s%s" % (name, m.group(1), m.group(2)), []).append(e)
    report(collections.OrderedDict(sorted(groups.items())))


main()

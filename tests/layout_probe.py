#!/usr/bin/env python3
"""tests/layout_probe.py - storage layout 2 (issue 30 ask 1): today's outbox
table beside candidate layouts, the library's hot statements against each.
Not a test: prints the tables of docs/design/LAYOUT2.md. Run it through
tests/layout_probe.sh (starts and stops the throw-away servers).

  layout_probe.py hot [sqlite] [pg] [mariadb]
      per candidate: enqueue 1/tx, batch of 100 in one transaction, claim 100
      (in a transaction, as the dispatcher) + ack 100, over N finished rows
      already in the table; us per message, bytes of WAL/redo per message
      (PostgreSQL pg_current_wal_lsn, MariaDB Innodb_lsn_current, SQLite WAL
      frames x page size), PostgreSQL's HOT share of updates.
  layout_probe.py upgrade [sqlite] [pg] [mariadb]
      the in-place upgrade of today's table (N rows) to the chosen layout:
      time, the longest wait of a writer inserting meanwhile, and whether
      today's statements (text ids) still find their rows afterwards.

  LAYOUT_ROWS     finished rows in the table (default 20000; 1000000 by hand)
  LAYOUT_MSGS     messages per workload (default 2000, a multiple of 100)
  LAYOUT_REPEATS  interleaved rounds, the median is shown (default 1)
  LAYOUT_ONLY     candidates whose names start with one of these (comma-separated)
  LAYOUT_SQLITE   scratch directory for SQLite's files
  PGPORT, MYPORT  the servers (tests/db.sh's ports)

Statements are sent one per round trip through the command-line clients
(psql, mariadb, sqlite3), each phase timed as a whole: the ratios between
candidates of one run are the result, not the absolute figures. One worker:
the claim's pick is deterministic, so the acks carry literal id lists, as
the library sends them (text).
"""
import os, resource, subprocess, tempfile, sys, time, random, statistics, threading

ROWS = int(os.environ.get("LAYOUT_ROWS", "20000"))
MSGS = int(os.environ.get("LAYOUT_MSGS", "2000")) // 100 * 100
REPEATS = int(os.environ.get("LAYOUT_REPEATS", "1"))
PGPORT = os.environ.get("PGPORT", "15408")
MYPORT = os.environ.get("MYPORT", "13408")
SQDIR = os.environ.get("LAYOUT_SQLITE") or tempfile.gettempdir()
rnd = random.Random(30)


def uid(i, run):
    """A UUIDv7-like text id, ascending with i (the library's ids are v7)."""
    return "%08x-%04x-7%03x-8%03x-%012x" % (0x10000000 + run, i >> 12 & 0xffff, i & 0xfff,
                                            rnd.getrandbits(12), rnd.getrandbits(48))


# ---------------------------------------------------------------- clients
def psql(sql, db="obx"):
    r = subprocess.run(["psql", "-h", "127.0.0.1", "-p", PGPORT, "-U", "postgres", "-d", db, "-qAtX",
                        "-v", "ON_ERROR_STOP=1", "-f", "-"], input=sql, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit("psql: " + r.stderr[:2000])
    return r.stdout


def my(sql, check=True):
    r = subprocess.run(["mariadb", "-h", "127.0.0.1", "-P", MYPORT, "-u", "obx", "-pobxpw", "-N", "-B", "obx"],
                       input=sql, capture_output=True, text=True)
    if r.returncode and check:
        raise SystemExit("mariadb: " + r.stderr[:2000])
    return r.stdout + (r.stderr if r.returncode else "")


def sq(path, sql, check=True):
    r = subprocess.run(["sqlite3", "-batch", path], input=sql, capture_output=True, text=True)
    if (r.returncode or "Error" in r.stderr) and check:
        raise SystemExit("sqlite3: " + r.stderr[:2000])
    return r.stdout + r.stderr


def timed(f, *a):
    t0 = time.perf_counter()
    out = f(*a)
    return time.perf_counter() - t0, out


RUNDIR = os.environ.get("LAYOUT_RUNDIR", "")


def ticks(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            v = f.read().rsplit(")", 1)[1].split()
        return int(v[11]) + int(v[12]) + int(v[13]) + int(v[14]), int(v[1])
    except (OSError, ValueError):
        return 0, 0


def server_cpu(kind):
    """Seconds of CPU the server has used (PostgreSQL: the postmaster, its
    reaped children and the live ones; MariaDB: mariadbd), or None."""
    try:
        with open(os.path.join(RUNDIR, "pg/postmaster.pid" if kind == "pg" else "my.pid")) as f:
            root = int(f.readline())
    except (OSError, ValueError):
        return None
    total = ticks(root)[0]
    if kind == "pg":
        for d in os.listdir("/proc"):
            if d.isdigit():
                t, ppid = ticks(int(d))
                if ppid == root:
                    total += t
    return total / os.sysconf("SC_CLK_TCK")


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# ---------------------------------------------------------------- PostgreSQL
# Columns: today's order (sql/postgresql/outbox.sql) or hot first (the
# columns a claim/ack writes or filters, fixed width, then the rest).
PG_COLD = ('"Topic" varchar(255) NOT NULL, "Payload" text NOT NULL, "ProcessedBy" varchar(100) NULL, '
           '"LastError" text NULL, "CorrelationId" varchar(255) NULL, "DueTimeUtc" timestamptz NULL, '
           '"OrderingKey" varchar(255) NULL, "OrderingSeq" bigint NULL, "TenantId" varchar(64) NULL, '
           '"AggregateType" varchar(64) NULL, "AggregateId" varchar(128) NULL, "Headers" json NULL, '
           '"ExpiresAt" timestamptz NULL')
PG_INDEXES = '''CREATE INDEX "IX_{n}_Ready" ON {t} ("NextAttemptAt") WHERE "Status" = 0;
CREATE INDEX "IX_{n}_OrderingId" ON {t} ("OrderingKey", "Status", "OrderingSeq", "Id") WHERE "OrderingKey" IS NOT NULL AND "Status" <> 2;
CREATE INDEX "IX_{n}_Leased" ON {t} ("LockedUntil") WHERE "Status" = 1;
CREATE INDEX "IX_{n}_Done" ON {t} ("ProcessedAt") WHERE "Status" = 2;
'''


def pg_table(name, key, hot_first, fillfactor=None):
    today = ('"Id" {k} NOT NULL PRIMARY KEY, "Topic" varchar(255) NOT NULL, "Payload" text NOT NULL, '
             '"CreatedAt" timestamptz NOT NULL DEFAULT now(), "Status" smallint NOT NULL DEFAULT 0, '
             '"LockedUntil" timestamptz NULL, "OwnerToken" {k} NULL, "IsProcessed" boolean NOT NULL DEFAULT false, '
             '"ProcessedAt" timestamptz NULL, "ProcessedBy" varchar(100) NULL, "RetryCount" integer NOT NULL DEFAULT 0, '
             '"LastError" text NULL, "NextAttemptAt" timestamptz NOT NULL DEFAULT now(), "MessageId" {k} NOT NULL, '
             '"CorrelationId" varchar(255) NULL, "DueTimeUtc" timestamptz NULL, "Starts" integer NOT NULL DEFAULT 0, '
             '"OrderingKey" varchar(255) NULL, "OrderingSeq" bigint NULL, "TenantId" varchar(64) NULL, '
             '"AggregateType" varchar(64) NULL, "AggregateId" varchar(128) NULL, "Headers" json NULL, '
             '"ExpiresAt" timestamptz NULL')
    hot = ('"Id" {k} NOT NULL PRIMARY KEY, "NextAttemptAt" timestamptz NOT NULL DEFAULT now(), '
           '"LockedUntil" timestamptz NULL, "ProcessedAt" timestamptz NULL, "CreatedAt" timestamptz NOT NULL DEFAULT now(), '
           '"OwnerToken" {k} NULL, "MessageId" {k} NOT NULL, "RetryCount" integer NOT NULL DEFAULT 0, '
           '"Starts" integer NOT NULL DEFAULT 0, "Status" smallint NOT NULL DEFAULT 0, '
           '"IsProcessed" boolean NOT NULL DEFAULT false, ' + PG_COLD)
    cols = (hot if hot_first else today).format(k=key)
    ff = " WITH (fillfactor = %d)" % fillfactor if fillfactor else ""
    return "DROP TABLE IF EXISTS {t};\nCREATE TABLE {t} (%s)%s;\n" % (cols, ff) + PG_INDEXES.replace("{n}", name.strip('"'))


PG_CANDS = {  # name: (key type, hot first, fillfactor)
    "pg-today(uuid)": ("uuid", False, None),
    "pg-text-keys": ("text", False, None),
    "pg-uuid-hotfirst": ("uuid", True, None),
    "pg-uuid-hotfirst-ff80": ("uuid", True, 80),
}


def pg_run(cand, tno, run, ids):
    key, hot, ff = PG_CANDS[cand]
    t = '"L%d"' % tno
    cast = "CAST(%s AS uuid)" if key == "uuid" else "%s"
    arr = "uuid[]" if key == "uuid" else "text[]"
    psql(pg_table(t, key, hot, ff).replace("{t}", t))
    psql("""INSERT INTO {t} ("Id", "MessageId", "Topic", "Payload", "Status", "IsProcessed", "ProcessedAt",
        "NextAttemptAt", "CreatedAt", "ProcessedBy")
        SELECT CAST(lpad(to_hex(g), 8, '0') || '-0000-7000-8000-' || lpad(to_hex(g), 12, '0') AS uuid),
               gen_random_uuid(), 'topic', repeat('p', 200), 2, true, now(), now(), now(), 'w'
          FROM generate_series(1, {n}) g; VACUUM ANALYZE {t};""".format(t=t, n=ROWS))
    base = "timestamptz '2020-01-01' + interval '1 ms' * %d"
    ins = ('INSERT INTO {t} ("Id", "MessageId", "Topic", "Payload", "CorrelationId", "DueTimeUtc", "NextAttemptAt") '
           'VALUES ').format(t=t)

    def row(i):
        return "(%s, %s, 'topic', '%s', NULL, NULL, %s)" % (cast % ("'%s'" % ids[i]), cast % ("'%s'" % uid(i, 99)),
                                                            "p" * 200, base % i)
    half = MSGS
    one = "".join(ins + row(i) + ";\n" for i in range(half))
    batch = "".join("BEGIN;\n" + ins + ", ".join(row(i) for i in range(b, b + 100)) + ";\nCOMMIT;\n"
                    for b in range(half, 2 * half, 100))
    owner = "'00000000-0000-4000-8000-0000000000aa'"
    claim_cols = ('CAST("Id" AS text), CAST("MessageId" AS text), "CreatedAt", "DueTimeUtc", "RetryCount", '
                  '"LockedUntil", "NextAttemptAt", "Starts", "ExpiresAt", "Topic", "Payload", "CorrelationId", '
                  '"LastError", "OrderingKey", "TenantId", "AggregateType", "AggregateId", CAST("Headers" AS text)')
    drain = []
    for b in range(0, 2 * half, 100):
        drain.append('BEGIN;\nUPDATE {t} SET "Status" = 1, "OwnerToken" = {o}, "LockedUntil" = now() + '
                     'make_interval(secs => 30), "Starts" = "Starts" + 1 WHERE "Id" = ANY (ARRAY(SELECT c."Id" '
                     'FROM {t} AS c WHERE c."Status" = 0 AND c."NextAttemptAt" <= now() AND NOT c."IsProcessed" '
                     'AND c."OrderingKey" IS NULL ORDER BY c."NextAttemptAt" LIMIT 100 FOR UPDATE OF c SKIP LOCKED)) '
                     'RETURNING {c};\nCOMMIT;\n'.format(t=t, o=cast % owner, c=claim_cols))
        drain.append('UPDATE {t} SET "Status" = 2, "IsProcessed" = true, "ProcessedAt" = now(), '
                     '"ProcessedBy" = \'w\', "LockedUntil" = NULL WHERE "OwnerToken" = {o} AND "Status" = 1 AND '
                     '"Id" = ANY (CAST(\'{{{ids}}}\' AS {a}));\n'.format(t=t, o=cast % owner, a=arr,
                                                                    ids=",".join(ids[b:b + 100])))
    res = {}
    for phase, sql in (("enqueue 1/tx", one), ("batch 100", batch), ("claim+ack 100", "".join(drain))):
        psql("SELECT pg_stat_reset()")
        l0 = psql("SELECT pg_current_wal_lsn()").strip()
        c0 = server_cpu("pg")
        dt, out = timed(psql, sql)
        time.sleep(0.2)
        c1 = server_cpu("pg")
        w = psql("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '%s')" % l0).strip()
        time.sleep(0.6)  # the stats collector
        st = psql("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'L%d'" % tno).strip()
        res[phase] = (dt / MSGS * 1e6, float(w) / MSGS, st, (c1 - c0) / MSGS * 1e6 if c0 is not None else float("nan"))
    left = psql('SELECT count(*) FROM %s WHERE "Status" <> 2' % t).strip()
    if left != "0":
        raise SystemExit("%s: %s rows not acked" % (cand, left))
    res["size"] = psql("SELECT pg_total_relation_size('%s')" % t).strip()
    psql("DROP TABLE %s" % t)
    return res


# ---------------------------------------------------------------- MariaDB
MY_COLD = ("`Topic` VARCHAR(255) NOT NULL, `Payload` LONGTEXT NOT NULL, `ProcessedBy` VARCHAR(100) NULL, "
           "`LastError` LONGTEXT NULL, `CorrelationId` VARCHAR(255) NULL, `DueTimeUtc` DATETIME(6) NULL, "
           "`OrderingKey` VARCHAR(255) NULL, `OrderingSeq` BIGINT NULL, "
           "`OrderingLive` VARCHAR(255) AS (IF(`Status` <> 2, `OrderingKey`, NULL)) PERSISTENT, "
           "`OrderingState` TINYINT AS (IF(`Status` <> 2 AND `OrderingKey` IS NOT NULL, `Status`, NULL)) PERSISTENT, "
           "`TenantId` VARCHAR(64) NULL, `AggregateType` VARCHAR(64) NULL, `AggregateId` VARCHAR(128) NULL, "
           "`Headers` JSON NULL, `ExpiresAt` DATETIME(6) NULL")
MY_IX_TODAY = ("KEY `IX_Ready` (`Status`, `NextAttemptAt`), KEY `IX_Leased` (`Status`, `LockedUntil`), "
               "KEY `IX_Done` (`Status`, `ProcessedAt`), KEY `IX_Ordering` (`OrderingLive`, `OrderingState`, `OrderingSeq`)")
# Partial-like: a column that is NULL unless the row is in the index's
# state. A claim moves ReadyAt (t -> NULL) and LeasedUntil (NULL -> t); an
# ack LeasedUntil (t -> NULL) and DoneAt (NULL -> t): two entries each,
# where Status leading moves all three (plus the first: a read of Ready).
MY_GEN = (", `ReadyAt` DATETIME(6) AS (IF(`Status` = 0, `NextAttemptAt`, NULL)) PERSISTENT, "
          "`LeasedUntil` DATETIME(6) AS (IF(`Status` = 1, `LockedUntil`, NULL)) PERSISTENT, "
          "`DoneAt` DATETIME(6) AS (IF(`Status` = 2, `ProcessedAt`, NULL)) PERSISTENT")
MY_GEN_V = MY_GEN.replace("PERSISTENT", "VIRTUAL")
MY_IX_GEN = ("KEY `IX_Ready` (`ReadyAt`), KEY `IX_Leased` (`LeasedUntil`), KEY `IX_Done` (`DoneAt`), "
             "KEY `IX_Ordering` (`OrderingLive`, `OrderingState`, `OrderingSeq`)")

MY_CANDS = {  # name: (key type, generated-column indexes)
    "my-today(char36)": ("CHAR(36)", False),
    "my-uuid": ("UUID", False),
    "my-binary16": ("BINARY(16)", False),
    "my-uuid-genix": ("UUID", True),
    "my-char36-genix": ("CHAR(36)", True),
    "my-uuid-genix-virtual": ("UUID", "virtual"),
}


def my_run(cand, tno, run, ids):
    key, gen = MY_CANDS[cand]
    t = "`L%d`" % tno
    if key == "BINARY(16)":
        conv, jt, back = "UNHEX(REPLACE(%s, '-', ''))", "BINARY(16)", "LOWER(INSERT(INSERT(INSERT(INSERT(HEX(%s), 9, 0, '-'), 14, 0, '-'), 19, 0, '-'), 24, 0, '-'))"
    else:
        conv, jt, back = "%s", "CHAR(36)", "%s"
    cols = ("`Id` {k} NOT NULL PRIMARY KEY, `CreatedAt` DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)), "
            "`Status` TINYINT NOT NULL DEFAULT 0, `LockedUntil` DATETIME(6) NULL, `OwnerToken` {k} NULL, "
            "`IsProcessed` TINYINT NOT NULL DEFAULT 0, `ProcessedAt` DATETIME(6) NULL, `RetryCount` INT NOT NULL DEFAULT 0, "
            "`NextAttemptAt` DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)), `MessageId` {k} NOT NULL, "
            "`Starts` INT NOT NULL DEFAULT 0, ").format(k=key) + MY_COLD
    ddl = "DROP TABLE IF EXISTS %s; CREATE TABLE %s (%s%s, %s) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;" % (
        t, t, cols, (MY_GEN_V if gen == "virtual" else MY_GEN) if gen else "", MY_IX_GEN if gen else MY_IX_TODAY)
    my(ddl)
    pre = "CONCAT(LPAD(HEX(seq), 8, '0'), '-0000-7000-8000-', LPAD(HEX(seq), 12, '0'))"
    my("SET SESSION sql_log_bin = 0; INSERT INTO %s (`Id`, `MessageId`, `Topic`, `Payload`, `Status`, `IsProcessed`, "
       "`ProcessedAt`, `ProcessedBy`) SELECT %s, %s, 'topic', REPEAT('p', 200), 2, 1, UTC_TIMESTAMP(6), 'w' "
       "FROM seq_1_to_%d; ANALYZE TABLE %s;" % (t, conv % pre, conv % "UUID()", ROWS, t), check=False)
    ins = ("INSERT INTO %s (`Id`, `MessageId`, `Topic`, `Payload`, `CorrelationId`, `DueTimeUtc`, `NextAttemptAt`) VALUES " % t)

    def row(i):
        return "(%s, %s, 'topic', '%s', NULL, NULL, TIMESTAMP'2020-01-01 00:00:00' + INTERVAL %d * 1000 MICROSECOND)" % (
            conv % ("'%s'" % ids[i]), conv % ("'%s'" % uid(i, 99)), "p" * 200, i)
    one = "".join(ins + row(i) + ";\n" for i in range(MSGS))
    batch = "".join("BEGIN;\n" + ins + ", ".join(row(i) for i in range(b, b + 100)) + ";\nCOMMIT;\n"
                    for b in range(MSGS, 2 * MSGS, 100))
    owner = conv % "'00000000-0000-4000-8000-0000000000aa'"
    ready = ("c.`ReadyAt` <= UTC_TIMESTAMP(6)" if gen else "c.`Status` = 0 AND c.`NextAttemptAt` <= UTC_TIMESTAMP(6)")
    order = "c.`ReadyAt`" if gen else "c.`NextAttemptAt`"
    byids = ("JSON_TABLE('%s', '$[*]' COLUMNS (`obx_id` CHAR(36) PATH '$')) AS j STRAIGHT_JOIN " + t +
             " FORCE INDEX (PRIMARY) ON " + t + ".`Id` = " + (conv % "j.`obx_id`"))
    readcols = ("%s, %s, `CreatedAt`, `DueTimeUtc`, `RetryCount`, `LockedUntil`, `NextAttemptAt`, `Starts`, `ExpiresAt`, "
                "`Topic`, `Payload`, `CorrelationId`, `LastError`, `OrderingKey`, `TenantId`, `AggregateType`, "
                "`AggregateId`, `Headers`") % (back % ("%s.`Id`" % t), back % "`MessageId`")
    drain = ["SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;\n"]
    for b in range(0, 2 * MSGS, 100):
        lst = '[' + ",".join('"%s"' % x for x in ids[b:b + 100]) + ']'
        drain.append(
            "BEGIN;\nSELECT %s FROM (SELECT c.`Id` FROM %s AS c FORCE INDEX (`IX_Ready`) WHERE %s AND c.`IsProcessed` = 0 "
            "AND c.`OrderingKey` IS NULL ORDER BY %s LIMIT 100) AS c STRAIGHT_JOIN %s AS t FORCE INDEX (PRIMARY) ON "
            "t.`Id` = c.`Id` WHERE t.`Status` = 0 AND t.`NextAttemptAt` <= UTC_TIMESTAMP(6) AND t.`IsProcessed` = 0 "
            "LIMIT 100 FOR UPDATE SKIP LOCKED;\n" % (back % "t.`Id`", t, ready, order, t) +
            "UPDATE %s SET `Status` = 1, `OwnerToken` = %s, `LockedUntil` = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, "
            "`Starts` = `Starts` + 1 WHERE %s.`Status` = 0;\n" % (byids % lst, owner, t) +
            "SELECT %s FROM %s WHERE %s.`OwnerToken` = %s;\nCOMMIT;\n" % (readcols, byids % lst, t, owner) +
            "UPDATE %s SET `IsProcessed` = 1, `ProcessedAt` = UTC_TIMESTAMP(6), `ProcessedBy` = 'w', "
            "`LockedUntil` = NULL, `Status` = 2 WHERE `OwnerToken` = %s AND `Status` = 1;\n" % (byids % lst, owner))
    res = {}
    for phase, sql in (("enqueue 1/tx", one), ("batch 100", batch), ("claim+ack 100", "".join(drain))):
        l0 = int(my("SHOW GLOBAL STATUS LIKE 'Innodb_lsn_current'").split()[1])
        c0 = server_cpu("mariadb")
        dt, out = timed(my, sql)
        c1 = server_cpu("mariadb")
        l1 = int(my("SHOW GLOBAL STATUS LIKE 'Innodb_lsn_current'").split()[1])
        res[phase] = (dt / MSGS * 1e6, (l1 - l0) / MSGS, "", (c1 - c0) / MSGS * 1e6 if c0 is not None else float("nan"))
    left = my("SELECT COUNT(*) FROM %s WHERE `Status` <> 2" % t).strip()
    if left != "0":
        raise SystemExit("%s: %s rows not acked" % (cand, left))
    my("ANALYZE TABLE %s" % t)
    res["size"] = my("SELECT data_length + index_length FROM information_schema.tables WHERE table_schema = 'obx' "
                     "AND table_name = 'L%d'" % tno).strip()
    my("DROP TABLE %s" % t)
    return res


# ---------------------------------------------------------------- SQLite
SQ_COLD = ("Topic TEXT NOT NULL, Payload TEXT NOT NULL, ProcessedBy TEXT NULL, LastError TEXT NULL, "
           "CorrelationId TEXT NULL, DueTimeUtc INTEGER NULL, OrderingKey TEXT NULL, OrderingSeq INTEGER NULL, "
           "TenantId TEXT NULL, AggregateType TEXT NULL, AggregateId TEXT NULL, Headers TEXT NULL, ExpiresAt INTEGER NULL")
SQ_HOT = ("Status INTEGER NOT NULL DEFAULT 0, NextAttemptAt INTEGER NOT NULL, LockedUntil INTEGER NULL, "
          "OwnerToken {o} NULL, IsProcessed INTEGER NOT NULL DEFAULT 0, ProcessedAt INTEGER NULL, "
          "RetryCount INTEGER NOT NULL DEFAULT 0, Starts INTEGER NOT NULL DEFAULT 0, CreatedAt INTEGER NOT NULL DEFAULT 0, "
          "MessageId {o} NOT NULL, ")
SQ_IX = ('CREATE INDEX "IX_{n}_Ready" ON {t} (NextAttemptAt) WHERE Status = 0;\n'
         'CREATE INDEX "IX_{n}_Ordering" ON {t} (OrderingKey, Status, OrderingSeq) WHERE OrderingKey IS NOT NULL AND Status <> 2;\n'
         'CREATE INDEX "IX_{n}_Leased" ON {t} (LockedUntil) WHERE Status = 1;\n'
         'CREATE INDEX "IX_{n}_Done" ON {t} (ProcessedAt) WHERE Status = 2;\n')
SQ_CANDS = {  # name: (table head, key type, WITHOUT ROWID)
    "sq-today(text pk)": ("Id TEXT NOT NULL PRIMARY KEY, ", "TEXT", False),
    "sq-rowid+blob16-unique": ("Seq INTEGER PRIMARY KEY, Id BLOB NOT NULL UNIQUE, ", "BLOB", False),
    "sq-norowid-text": ("Id TEXT NOT NULL PRIMARY KEY, ", "TEXT", True),
    "sq-norowid-blob16": ("Id BLOB NOT NULL PRIMARY KEY, ", "BLOB", True),
}


def sq_run(cand, tno, run, ids):
    head, key, norowid = SQ_CANDS[cand]
    path = os.path.join(SQDIR, "layout-%d.db" % tno)
    for s in ("", "-wal", "-shm"):
        if os.path.exists(path + s):
            os.remove(path + s)
    t = '"L%d"' % tno
    blob = key == "BLOB"
    lit = (lambda u: "X'%s'" % u.replace("-", "")) if blob else (lambda u: "'%s'" % u)
    ddl = "CREATE TABLE %s (%s%s%s)%s;\n" % (t, head, SQ_HOT.format(o=key), SQ_COLD, " WITHOUT ROWID" if norowid else "")
    pre = ("CAST(printf('%016x', g) AS BLOB)" if blob else "printf('%08x-0000-7000-8000-%012x', g, g)")
    sq(path, "PRAGMA journal_mode=WAL;\n" + ddl + SQ_IX.replace("{n}", t.strip('"')).replace("{t}", t) +
       "WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < %d) INSERT INTO %s (Id, MessageId, "
       "Topic, Payload, Status, IsProcessed, ProcessedAt, NextAttemptAt, ProcessedBy) SELECT %s, randomblob(16), "
       "'topic', printf('%%.200c', 'p'), 2, 1, 1, 1, 'w' FROM s;\nANALYZE;\n" % (ROWS, t, pre))
    ins = "INSERT INTO %s (Id, MessageId, Topic, Payload, CorrelationId, DueTimeUtc, NextAttemptAt) VALUES " % t

    def row(i):
        return "(%s, %s, 'topic', '%s', NULL, NULL, %d)" % (lit(ids[i]), lit(uid(i, 99)), "p" * 200, 1577836800000 + i)
    one = "".join(ins + row(i) + ";\n" for i in range(MSGS))
    batch = "".join("BEGIN;\n" + ins + ", ".join(row(i) for i in range(b, b + 100)) + ";\nCOMMIT;\n"
                    for b in range(MSGS, 2 * MSGS, 100))
    owner = lit("00000000-0000-4000-8000-0000000000aa")
    now = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
    drain = []
    for b in range(0, 2 * MSGS, 100):
        drain.append(
            "BEGIN IMMEDIATE;\nUPDATE %s SET Status = 1, OwnerToken = %s, LockedUntil = %s + 30000, Starts = Starts + 1 "
            "WHERE Id IN (SELECT c.Id FROM %s AS c WHERE c.Status = 0 AND c.NextAttemptAt <= %s AND c.IsProcessed = 0 "
            "AND c.OrderingKey IS NULL ORDER BY c.NextAttemptAt LIMIT 100) RETURNING Id, MessageId, CreatedAt, DueTimeUtc, "
            "RetryCount, LockedUntil, NextAttemptAt, Starts, ExpiresAt, Topic, Payload, CorrelationId, LastError, "
            "OrderingKey, TenantId, AggregateType, AggregateId, Headers;\nCOMMIT;\n" % (t, owner, now, t, now) +
            "UPDATE %s SET Status = 2, IsProcessed = 1, ProcessedAt = %s, ProcessedBy = 'w', LockedUntil = NULL "
            "WHERE OwnerToken = %s AND Status = 1 AND Id IN (%s);\n" % (t, now, owner, ", ".join(lit(x) for x in ids[b:b + 100])))
    res = {}
    psz = int(sq(path, "PRAGMA page_size;").split()[-1])
    for phase, sql in (("enqueue 1/tx", one), ("batch 100", batch), ("claim+ack 100", "".join(drain))):
        sq(path, "PRAGMA wal_checkpoint(TRUNCATE);")
        c0 = child_cpu()
        dt, out = timed(sq, path, "PRAGMA wal_autocheckpoint=0;\n.output /dev/null\n" + sql +
                        ".output stdout\nPRAGMA wal_checkpoint(PASSIVE);\n")
        frames = int(out.strip().split("\n")[-1].split("|")[1])
        res[phase] = (dt / MSGS * 1e6, frames * (psz + 24) / MSGS, "", (child_cpu() - c0) / MSGS * 1e6)
    left = sq(path, "SELECT count(*) FROM %s WHERE Status <> 2;" % t).strip()
    if left != "0":
        raise SystemExit("%s: %s rows not acked" % (cand, left))
    res["size"] = str(os.path.getsize(path))
    for s in ("", "-wal", "-shm"):
        if os.path.exists(path + s):
            os.remove(path + s)
    return res


# ---------------------------------------------------------------- hot
def hot(backends):
    runners = {"sqlite": (SQ_CANDS, sq_run), "pg": (PG_CANDS, pg_run), "mariadb": (MY_CANDS, my_run)}
    for b in backends:
        cands, fn = runners[b]
        only = [x for x in os.environ.get("LAYOUT_ONLY", "").split(",") if x]
        if only:
            cands = {c: v for c, v in cands.items() if any(c.startswith(o) for o in only)}
        got = {c: [] for c in cands}
        for r in range(REPEATS):
            ids = [uid(i, r) for i in range(2 * MSGS)]
            order = list(cands) if r % 2 == 0 else list(reversed(list(cands)))
            for n, c in enumerate(order):
                got[c].append(fn(c, n, r, ids))
        first = list(cands)[0]
        print("%s: %d finished rows, %d messages per workload, %d round(s), medians; ratio = today / candidate "
              "(> 1: faster)" % (b, ROWS, MSGS, REPEATS))
        print("  %-24s %-14s %9s %6s %9s %6s %10s %s" % ("candidate", "workload", "us/msg", "ratio", "cpu us", "ratio",
                                                     "log B/msg", "pg upd/hot"))
        for c in cands:
            for ph in ("enqueue 1/tx", "batch 100", "claim+ack 100"):
                us = statistics.median(x[ph][0] for x in got[c])
                base = statistics.median(x[ph][0] for x in got[first])
                wal = statistics.median(x[ph][1] for x in got[c])
                cpu = statistics.median(x[ph][3] for x in got[c])
                cbase = statistics.median(x[ph][3] for x in got[first])
                print("  %-24s %-14s %9.1f %6.2f %9.1f %6.2f %10.0f %s" % (c, ph, us, base / us, cpu, cbase / cpu if cpu else 0,
                                                                   wal, got[c][-1][ph][2]))
            print("  %-24s %-14s %s bytes" % (c, "size", got[c][-1]["size"]))
        sys.stdout.flush()


# ---------------------------------------------------------------- upgrade
def writer(fn, stop, worst):
    """Inserts one row per statement until stop; records the longest wait."""
    i = 0
    while not stop.is_set():
        t0 = time.perf_counter()
        fn(i)
        worst[0] = max(worst[0], time.perf_counter() - t0)
        i += 1
        time.sleep(0.02)


def upgrade(backends):
    for b in backends:
        if b == "mariadb":
            my("DROP TABLE IF EXISTS `Up`; CREATE TABLE `Up` (`Id` CHAR(36) NOT NULL PRIMARY KEY, `Topic` VARCHAR(255) NOT NULL, "
               "`Payload` LONGTEXT NOT NULL, `CreatedAt` DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)), "
               "`Status` TINYINT NOT NULL DEFAULT 0, `LockedUntil` DATETIME(6) NULL, `OwnerToken` CHAR(36) NULL, "
               "`IsProcessed` TINYINT NOT NULL DEFAULT 0, `ProcessedAt` DATETIME(6) NULL, `NextAttemptAt` DATETIME(6) "
               "NOT NULL DEFAULT (UTC_TIMESTAMP(6)), `MessageId` CHAR(36) NOT NULL, "
               "KEY `IX_Up_Ready` (`Status`, `NextAttemptAt`), KEY `IX_Up_Leased` (`Status`, `LockedUntil`), "
               "KEY `IX_Up_Done` (`Status`, `ProcessedAt`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;"
               "INSERT INTO `Up` (`Id`, `Topic`, `Payload`, `MessageId`, `Status`, `OwnerToken`) SELECT UUID(), 't', "
               "REPEAT('p', 200), UUID(), seq %% 4, IF(seq %% 4 = 1, '00000000-0000-4000-8000-0000000000aa', NULL) "
               "FROM seq_1_to_%d;" % ROWS)
            print("mariadb: %d rows, index redesign on today's table: VIRTUAL state columns + new indexes" % ROWS)
            stop, worst = threading.Event(), [0.0]
            w = threading.Thread(target=writer, args=(lambda i: my("INSERT INTO `Up` (`Id`, `Topic`, `Payload`, `MessageId`) "
                                                                  "VALUES (UUID(), 'w', 'w', UUID())"), stop, worst))
            w.start(); time.sleep(0.5)
            for st in ("ALTER TABLE `Up` ADD COLUMN `ReadyAt` DATETIME(6) AS (IF(`Status` = 0, `NextAttemptAt`, NULL)) VIRTUAL, "
                       "ADD COLUMN `LeasedUntil` DATETIME(6) AS (IF(`Status` = 1, `LockedUntil`, NULL)) VIRTUAL, "
                       "ADD COLUMN `DoneAt` DATETIME(6) AS (IF(`Status` = 2, `ProcessedAt`, NULL)) VIRTUAL, ALGORITHM=INSTANT",
                       "CREATE INDEX `IX_Up_ReadyAt` ON `Up` (`ReadyAt`) ALGORITHM=INPLACE LOCK=NONE",
                       "CREATE INDEX `IX_Up_LeasedUntil` ON `Up` (`LeasedUntil`) ALGORITHM=INPLACE LOCK=NONE",
                       "CREATE INDEX `IX_Up_DoneAt` ON `Up` (`DoneAt`) ALGORITHM=INPLACE LOCK=NONE"):
                dt, out = timed(my, st + ";", False)
                print("  %6.1f s  %s %s" % (dt, st[:60], out.strip()[:100]))
            stop.set(); w.join()
            print("  longest insert meanwhile %.2f s" % worst[0])
            pick = ("SELECT COUNT(*) FROM (SELECT c.`Id` FROM `Up` AS c FORCE INDEX (`IX_Up_Ready`) WHERE c.`Status` = 0 "
                    "AND c.`NextAttemptAt` <= UTC_TIMESTAMP(6) ORDER BY c.`NextAttemptAt` LIMIT 100) AS c")
            print("  today's pick (Status-led index kept) afterwards:", my(pick).strip(), "rows")
            alter = ("ALTER TABLE `Up` MODIFY `Id` UUID NOT NULL, MODIFY `OwnerToken` UUID NULL, MODIFY `MessageId` UUID NOT NULL")
            print("mariadb: %d rows, CHAR(36) -> UUID" % ROWS)
            for alg in (", ALGORITHM=INSTANT", ", ALGORITHM=NOCOPY", ", ALGORITHM=INPLACE, LOCK=NONE"):
                print("  %s: %s" % (alg[2:], my(alter + alg + ";", check=False).strip().split("\n")[-1][:150]))
            stop, worst = threading.Event(), [0.0]
            w = threading.Thread(target=writer, args=(lambda i: my("INSERT INTO `Up` (`Id`, `Topic`, `Payload`, `MessageId`) "
                                                                  "VALUES (UUID(), 'w', 'w', UUID())"), stop, worst))
            w.start(); time.sleep(0.5)
            dt, out = timed(my, alter + ", ALGORITHM=COPY, LOCK=SHARED;")
            stop.set(); w.join()
            print("  ALGORITHM=COPY, LOCK=SHARED: %.1f s; longest insert meanwhile %.1f s" % (dt, worst[0]))
            # Today's statements: text ids bound as CHAR(36) through JSON_TABLE.
            ids = my("SELECT `Id` FROM `Up` WHERE `Status` = 1 LIMIT 100").split()
            lst = '[' + ",".join('"%s"' % x for x in ids) + ']'
            ack = ("UPDATE JSON_TABLE('%s', '$[*]' COLUMNS (`obx_id` CHAR(36) PATH '$')) AS j STRAIGHT_JOIN `Up` FORCE INDEX "
                   "(PRIMARY) ON `Up`.`Id` = j.`obx_id` SET `IsProcessed` = 1, `ProcessedAt` = UTC_TIMESTAMP(6), "
                   "`LockedUntil` = NULL, `Status` = 2 WHERE `OwnerToken` = '00000000-0000-4000-8000-0000000000aa' "
                   "AND `Status` = 1" % lst)
            print("  today's ack (text ids) on the UUID table: plan", " | ".join(
                l.split("\t")[3] + ":" + l.split("\t")[5] for l in my("EXPLAIN " + ack).strip().split("\n")))
            dt, out = timed(my, ack + "; SELECT ROW_COUNT();")
            print("  ... %s of %d rows, %.1f ms; a text id selected back: %s" % (
                out.strip(), len(ids), dt * 1e3, my("SELECT `Id` FROM `Up` LIMIT 1").strip()))
            my("DROP TABLE `Up`")
        elif b == "pg":
            # Keys are uuid already; the candidate is a column order rewrite.
            psql('DROP TABLE IF EXISTS "Up"; ' + pg_table('"Up"', "uuid", False).replace("{t}", '"Up"') +
                 'INSERT INTO "Up" ("Id", "MessageId", "Topic", "Payload", "Status") SELECT gen_random_uuid(), '
                 "gen_random_uuid(), 't', repeat('p', 200), g %% 4 FROM generate_series(1, %d) g; VACUUM ANALYZE \"Up\";" % ROWS)
            stop, worst = threading.Event(), [0.0]
            w = threading.Thread(target=writer, args=(lambda i: psql(
                'INSERT INTO "Up" ("Id", "MessageId", "Topic", "Payload") VALUES (gen_random_uuid(), gen_random_uuid(), \'w\', \'w\')'),
                stop, worst))
            w.start(); time.sleep(0.5)
            rw = pg_table('"Up2"', "uuid", True).replace("{t}", '"Up2"')
            dt, out = timed(psql, "BEGIN; LOCK TABLE \"Up\" IN SHARE MODE;\n" + rw +
                            'INSERT INTO "Up2" SELECT "Id", "NextAttemptAt", "LockedUntil", "ProcessedAt", "CreatedAt", '
                            '"OwnerToken", "MessageId", "RetryCount", "Starts", "Status", "IsProcessed", "Topic", "Payload", '
                            '"ProcessedBy", "LastError", "CorrelationId", "DueTimeUtc", "OrderingKey", "OrderingSeq", '
                            '"TenantId", "AggregateType", "AggregateId", "Headers", "ExpiresAt" FROM "Up";\n'
                            'DROP TABLE "Up"; ALTER TABLE "Up2" RENAME TO "Up"; COMMIT;')
            stop.set(); w.join()
            print("pg: %d rows, rewrite to hot-first column order (copy + swap under SHARE lock): %.1f s; longest insert "
                  "meanwhile %.1f s" % (ROWS, dt, worst[0]))
            psql('DROP TABLE "Up"')
        elif b == "sqlite":
            path = os.path.join(SQDIR, "layout-up.db")
            for s in ("", "-wal", "-shm"):
                if os.path.exists(path + s):
                    os.remove(path + s)
            head, key, nr = SQ_CANDS["sq-today(text pk)"]
            sq(path, "PRAGMA journal_mode=WAL;\nCREATE TABLE \"Up\" (%s%s%s);\n" % (head, SQ_HOT.format(o="TEXT"), SQ_COLD) +
               SQ_IX.replace("{n}", "Up").replace("{t}", '"Up"') +
               "WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < %d) INSERT INTO \"Up\" (Id, MessageId, "
               "Topic, Payload, Status, NextAttemptAt) SELECT lower(hex(randomblob(16))), lower(hex(randomblob(16))), 't', "
               "printf('%%.200c', 'p'), g %% 4, 1 FROM s;\n" % ROWS)
            # A rebuild (copy + swap) is what any key or order change costs
            # SQLite, which has no ALTER COLUMN: here into WITHOUT ROWID.
            dt, out = timed(sq, path, "BEGIN IMMEDIATE;\nCREATE TABLE \"Up2\" (Id TEXT NOT NULL PRIMARY KEY, %s%s) WITHOUT ROWID;\n"
                            % (SQ_HOT.format(o="TEXT"), SQ_COLD) +
                            "INSERT INTO \"Up2\" SELECT Id, Status, NextAttemptAt, LockedUntil, OwnerToken, IsProcessed, "
                            "ProcessedAt, RetryCount, Starts, CreatedAt, MessageId, Topic, Payload, ProcessedBy, LastError, "
                            "CorrelationId, DueTimeUtc, OrderingKey, OrderingSeq, TenantId, AggregateType, AggregateId, "
                            "Headers, ExpiresAt FROM \"Up\";\nDROP TABLE \"Up\";\nALTER TABLE \"Up2\" RENAME TO \"Up\";\n" +
                            SQ_IX.replace("{n}", "Up2").replace("{t}", '"Up"') + "COMMIT;\n")
            print("sqlite: %d rows, table rebuild (copy + swap, one write transaction): %.1f s (writers wait: "
                  "SQLITE_BUSY after busy_timeout)" % (ROWS, dt))


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "hot"
    which = sys.argv[2:] or ["sqlite", "pg", "mariadb"]
    {"hot": hot, "upgrade": upgrade}[mode](which)

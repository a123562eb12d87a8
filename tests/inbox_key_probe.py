#!/usr/bin/env python3
"""The inbox's claim and ack on MariaDB: two JSON_TABLEs joined by ordinality
(sources, ids: the statements ibx.h sends) against one JSON_TABLE of
[source, id] pairs (issue 30; docs/PERFORMANCE.md, "The inbox drain").

OBX_MY_PORT=... OBX_TEST_RUNDIR=... tests/inbox_key_probe.py [ROUNDS]

Needs the throwaway server of tests/db.sh (root over TCP, no password), its
run dir (mariadbd's pid: server CPU from /proc) and the bench's `InboxBench`
filled (one `BENCH_ONLY=idrain` run of build/bench against it leaves 20,000
rows). Per round and variant: a copy of the table (CREATE TABLE ... LIKE), its
rows Processing, then 100 batches of 100 keys, each the library's claim
`UPDATE` then its ack `UPDATE` (autocommit, parameters inlined, one client
session); prints mariadbd's CPU and the wall time per message.
"""
import json, sys, time

sys.dont_write_bytecode = True  # no __pycache__ in tests/
from probe_common import my, srv_cpu  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
OWNER = "01a21fc7-497d-746f-9029-f534948db444"


def lit(v):
    return "'" + json.dumps(v).replace("\\", "\\\\").replace("'", "\\'") + "'"


CLAIM = ("SET `OwnerToken` = '%s', `LockedUntil` = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, `Starts` = `Starts` + 1 "
         "WHERE `ib2`.`Status` = 'Processing' AND (`ib2`.`LockedUntil` IS NULL OR `ib2`.`LockedUntil` < "
         "UTC_TIMESTAMP(6)) AND `ib2`.`Starts` < 3" % OWNER)
ACK = ("SET `Status` = IF(SUBSTRING(`OwnerToken`, 15, 1) = '0', 'Processing', 'Done'), `Starts` = "
       "IF(SUBSTRING(`OwnerToken`, 15, 1) = '0', GREATEST(`Starts` - 1, 0), `Starts`), `OwnerToken` = NULL, "
       "`LockedUntil` = NULL, `LastSeenUtc` = UTC_TIMESTAMP(6) WHERE `OwnerToken` IN ('%s', INSERT('%s', 15, 1, "
       "'0')) AND `Status` = 'Processing'" % (OWNER, OWNER))
COLS = "COLUMNS (`ibx_i` FOR ORDINALITY, `ibx_v` VARCHAR(255) PATH '$')"


def two(b):  # as ibx.h sends it today
    return ("UPDATE JSON_TABLE(%s, '$[*]' %s) AS s JOIN JSON_TABLE(%s, '$[*]' %s) AS m ON s.`ibx_i` = m.`ibx_i` "
            "STRAIGHT_JOIN `ib2` FORCE INDEX (PRIMARY) ON `ib2`.`Source` = s.`ibx_v` AND `ib2`.`MessageId` = "
            "m.`ibx_v` " % (lit([k[0] for k in b]), COLS, lit([k[1] for k in b]), COLS))


def one(b):  # one JSON_TABLE of [source, id] pairs
    return ("UPDATE JSON_TABLE(%s, '$[*]' COLUMNS (`ibx_s` VARCHAR(255) PATH '$[0]', `ibx_m` VARCHAR(255) "
            "PATH '$[1]')) AS p STRAIGHT_JOIN `ib2` FORCE INDEX (PRIMARY) ON `ib2`.`Source` = p.`ibx_s` AND "
            "`ib2`.`MessageId` = p.`ibx_m` " % lit([list(k) for k in b]))


keys = [l.split("\t") for l in my("SELECT `Source`, `MessageId` FROM `InboxBench` ORDER BY `MessageId` "
                                  "LIMIT 10000").splitlines()]
batches = [keys[i:i + 100] for i in range(0, len(keys), 100)]
for rnd in range(ROUNDS):
    for name, f in (("two JSON_TABLEs", two), ("one JSON_TABLE of pairs", one)):
        my("DROP TABLE IF EXISTS ib2; CREATE TABLE ib2 LIKE `InboxBench`; INSERT INTO ib2 (`Source`, `MessageId`, "
           "`Topic`, `Payload`, `Status`) SELECT `Source`, `MessageId`, `Topic`, `Payload`, 'Processing' FROM "
           "`InboxBench`; ANALYZE TABLE ib2;")
        time.sleep(1)
        sql = "".join(f(b) + CLAIM + ";\n" + f(b) + ACK + ";\n" for b in batches)
        c0, t0 = srv_cpu(), time.time()
        my(sql)
        t1, c1 = time.time(), srv_cpu()
        done = int(my("SELECT COUNT(*) FROM ib2 WHERE `Status` = 'Done'"))
        if done != len(keys):
            raise SystemExit("%s: %d of %d acked" % (name, done, len(keys)))
        print("round %d, %-24s server CPU %6.1f us/msg, wall %6.1f us/msg (claim + ack)"
              % (rnd + 1, name, (c1 - c0) * 1e6 / len(keys), (t1 - t0) * 1e6 / len(keys)))
my("DROP TABLE IF EXISTS ib2")

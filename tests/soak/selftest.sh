#!/usr/bin/env bash
# tests/soak/selftest.sh BINDIR - the soak's checker must fail: each rule is
# broken once on purpose in a planted history (a log directory and a SQLite
# table), and the checker must exit 1 naming that rule; a clean history must
# pass. A checker that never fails proves nothing. Prints
# "soak-selftest: N passed, N failed".
set -uo pipefail
unset SOAK_KNOWN SOAK_TENANT # the planted violations must fail, waived or not
bin=${1:?usage: selftest.sh BINDIR}
ctl=$(cd "$bin/.." && pwd)/obxctl
work=${SOAK_RUNDIR:-${TMPDIR:-/tmp}/obx-soak-$(id -u)}/selftest
pass=0 fail=0
U=1000000000000000 # a time in us; lines below add to it

setup() { # hdr
    rm -rf "$work" && mkdir -p "$work/logs"
    db=$work/t.sqlite
    conn="Driver={SQLite3};Database=$db;"
    if [ "$1" = ibx ]; then "$ctl" -c "$conn" --inbox --table Soakibx deploy >/dev/null
    else "$ctl" -c "$conn" --table Soakobx deploy >/dev/null; fi
    sqlite3 "$db" "CREATE TABLE soak_biz (tag VARCHAR(64) NOT NULL PRIMARY KEY);"
    sqlite3 "$db" "CREATE TABLE soak_fx (k VARCHAR(200) NOT NULL, v INT NOT NULL);"
    printf 'SEED 1\nP d0.1 100 %s\nP d1.1 101 %s\n' $U $U > "$work/logs/orch.log"
}
orow() { # tag status retry starts lasterror [key [topic]]
    sqlite3 "$db" "INSERT INTO Soakobx (Id, Topic, Payload, Status, MessageId, RetryCount, Starts, LastError, OrderingKey)
        VALUES (lower(hex(randomblob(16))), '${7:-s}', '$1 0000', $2, lower(hex(randomblob(16))), $3, $4, $5, ${6:-NULL});"
}
irow() { # key ver status attempt lasterror [topic]
    sqlite3 "$db" "INSERT INTO Soakibx (Source, MessageId, Topic, Payload, Status, Attempt, LastError)
        VALUES ('${1%%/*}', '${1#*/}', '${6:-s}', '$1 v$2 0', '$3', $4, $5);"
}
fx() { # key ver: a transactional handler's effect
    sqlite3 "$db" "INSERT INTO soak_fx (k, v) VALUES ('$1', $2);"
}
t() { echo $((U + $1)); }
expect() { # hdr rule|ok description
    local out rc
    out=$(SOAK_OBXCTL=${check_ctl:-$ctl} "$bin/soak_check" "$1" sqlite "$conn" "Soak$1" "$work/logs" 2>&1)
    rc=$?
    if [ "$2" = ok ]; then
        if [ $rc -eq 0 ]; then pass=$((pass + 1)); echo "PASS SOAK-SELFTEST $3: clean history passes"
        else fail=$((fail + 1)); echo "FAIL SOAK-SELFTEST $3: a clean history failed:"; echo "$out"; fi
    elif [ $rc -eq 1 ] && grep -q "VIOLATION $2:" <<<"$out"; then
        pass=$((pass + 1)); echo "PASS SOAK-SELFTEST $3: the checker fails with $2"
    else
        fail=$((fail + 1)); echo "FAIL SOAK-SELFTEST $3: expected a $2 violation (exit $rc):"; echo "$out"
    fi
}

expect_says() { # hdr rule description regex: the violation, and its output says regex
    local out rc
    out=$(SOAK_OBXCTL=${check_ctl:-$ctl} "$bin/soak_check" "$1" sqlite "$conn" "Soak$1" "$work/logs" 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && grep -q "VIOLATION $2:" <<<"$out" && grep -q "$4" <<<"$out"; then
        pass=$((pass + 1)); echo "PASS SOAK-SELFTEST $3: the checker fails with $2 and says why"
    else
        fail=$((fail + 1)); echo "FAIL SOAK-SELFTEST $3: expected a $2 violation saying '$4' (exit $rc):"; echo "$out"
    fi
}

# A clean outbox history: committed, handled once, Done; the producers met
# max_pending once (a refusal that changed nothing).
setup obx
echo "MAX_PENDING 400" >> "$work/logs/orch.log"
printf 'I P0.1.1 k1 s - %s\nC P0.1.1 id1 %s\nI P0.1.2 - s - %s\nF P0.1.2 -9 %s\n' "$(t 1)" "$(t 2)" "$(t 3)" "$(t 4)" > "$work/logs/p0.1.log"
printf 'S P0.1.1 id1 k1 0 1 %s 100\nE P0.1.1 done %s 100\n' "$(t 10)" "$(t 20)" > "$work/logs/d0.1.log"
orow P0.1.1 2 0 1 NULL "'k1'"
expect obx ok clean-outbox

# The same where the load never reached max_pending: the bound went untested.
sed -i '/^F /d' "$work/logs/p0.1.log"
expect obx FULL max-pending-unmet

# The same where a gauge is wrong: a tool (planted: obxctl with its output
# changed) whose stats count one message in flight, or whose per-topic
# metrics miss a done one.
sed -i '/^MAX_PENDING/d' "$work/logs/orch.log"
cat > "$work/ctl-stats" <<EOF
#!/bin/sh
"$ctl" "\$@" | sed 's/"in_flight":0/"in_flight":1/'
EOF
cat > "$work/ctl-metrics" <<EOF
#!/bin/sh
"$ctl" "\$@" | sed 's/topic="s",status="done"} 1/topic="s",status="done"} 0/'
EOF
chmod +x "$work/ctl-stats" "$work/ctl-metrics"
check_ctl=$work/ctl-stats expect obx STATS stats-gauge-in-flight
check_ctl=$work/ctl-metrics expect obx STATS metrics-topic-done

setup obx # committed, never there
printf 'I P0.1.1 - s - %s\nC P0.1.1 id1 %s\nI P0.1.2 - s - %s\nC P0.1.2 id2 %s\n' "$(t 1)" "$(t 2)" "$(t 3)" "$(t 4)" > "$work/logs/p0.1.log"
printf 'S P0.1.2 id2 - 0 1 %s 100\nE P0.1.2 done %s 100\n' "$(t 10)" "$(t 20)" > "$work/logs/d0.1.log"
orow P0.1.2 2 0 1 NULL
expect obx LOST lost

setup obx # rolled back, yet there
printf 'I P0.1.1 - t - %s\nR P0.1.1 %s\n' "$(t 1)" "$(t 2)" > "$work/logs/p0.1.log"
printf 'S P0.1.1 id1 - 0 1 %s 100\nE P0.1.1 done %s 100\n' "$(t 10)" "$(t 20)" > "$work/logs/d0.1.log"
orow P0.1.1 2 0 1 NULL
expect obx ROLLED-BACK rolled-back

setup obx # two handlers in one message (a handler slower than its lease run twice)
printf 'I P0.1.1 - s - %s\nC P0.1.1 id1 %s\n' "$(t 1)" "$(t 2)" > "$work/logs/p0.1.log"
printf 'S P0.1.1 id1 - 0 1 %s 100\nE P0.1.1 done %s 100\n' "$(t 10)" "$(t 5000)" > "$work/logs/d0.1.log"
printf 'S P0.1.1 id1 - 0 2 %s 101\nE P0.1.1 done %s 101\n' "$(t 3000)" "$(t 3100)" > "$work/logs/d1.1.log"
orow P0.1.1 2 0 1 NULL
expect obx CONCURRENT concurrent

setup obx # a slow handler's lease lost to a database restart within it: at-least-once, not counted
printf 'I P0.1.1 - s - %s\nC P0.1.1 id1 %s\n' "$(t 1)" "$(t 2)" > "$work/logs/p0.1.log"
printf 'S P0.1.1 id1 - 0 1 %s 100\nE P0.1.1 done %s 100\n' "$(t 10)" "$(t 4500000)" > "$work/logs/d0.1.log"
printf 'S P0.1.1 id1 - 0 2 %s 101\nE P0.1.1 done %s 101\n' "$(t 3100000)" "$(t 3100100)" > "$work/logs/d1.1.log"
printf 'FAULT restart %s\nFAULTED restart 0 %s\n' "$(t 1000000)" "$(t 3000000)" >> "$work/logs/orch.log"
orow P0.1.1 2 0 1 NULL
expect obx ok concurrent-fault-lease
# the same with the restart after the lease had run out: no excuse
sed -i '/^FAULT/d' "$work/logs/orch.log"
printf 'FAULT restart %s\nFAULTED restart 0 %s\n' "$(t 3050000)" "$(t 3090000)" >> "$work/logs/orch.log"
expect obx CONCURRENT concurrent-fault-late

setup obx # the renewal connection refused (the soak's hook), the lease lost: no excuse
printf 'I P0.1.1 - s - %s\nC P0.1.1 id1 %s\n' "$(t 1)" "$(t 2)" > "$work/logs/p0.1.log"
printf 'S P0.1.1 id1 - 0 1 %s 100\nRRON %s\nRR %s\nRROFF %s\nE P0.1.1 done %s 100\n' "$(t 10)" "$(t 900000)" "$(t 1000000)" "$(t 1700000)" "$(t 4500000)" > "$work/logs/d0.1.log"
printf 'S P0.1.1 id1 - 0 2 %s 101\nE P0.1.1 done %s 101\n' "$(t 3100000)" "$(t 3100100)" > "$work/logs/d1.1.log"
orow P0.1.1 2 0 1 NULL
expect obx CONCURRENT concurrent-renewal-refused
# ... and what that process's renewal said meanwhile is printed with it
printf 'LR 100 %s lease renewal failed: OBX_ERR_DB: refused\nLR 100 %s lease renewal failed: OBX_ERR_DB: refused\n' "$(t 1000000)" "$(t 1300000)" >> "$work/logs/d0.1.log"
expect_says obx CONCURRENT concurrent-renewal-notes "      [0-9]* lease renewal failed: OBX_ERR_DB: refused"

setup obx # two messages of one key at once (overlapping producers of a key)
printf 'I P0.1.1 k1 t - %s\nI P0.1.2 k1 t - %s\nC P0.1.2 id2 %s\nC P0.1.1 id1 %s\n' "$(t 1)" "$(t 2)" "$(t 3)" "$(t 4)" > "$work/logs/p0.1.log"
printf 'S P0.1.1 id1 k1 0 1 %s 100\nE P0.1.1 done %s 100\n' "$(t 10)" "$(t 500)" > "$work/logs/d0.1.log"
printf 'S P0.1.2 id2 k1 0 1 %s 101\nE P0.1.2 done %s 101\n' "$(t 100)" "$(t 200)" > "$work/logs/d1.1.log"
orow P0.1.1 2 0 1 NULL "'k1'"; orow P0.1.2 2 0 1 NULL "'k1'"
sqlite3 "$db" "INSERT INTO soak_biz VALUES ('P0.1.1'), ('P0.1.2');"
expect obx KEY-CONCURRENT key-concurrent

setup obx # a later message of a key handled first (a replay running beside its successor)
printf 'I P0.1.1 k1 s - %s\nC P0.1.1 id1 %s\nI P0.1.2 k1 s - %s\nC P0.1.2 id2 %s\n' "$(t 1)" "$(t 2)" "$(t 3)" "$(t 4)" > "$work/logs/p0.1.log"
printf 'S P0.1.2 id2 k1 0 1 %s 100\nE P0.1.2 done %s 100\nS P0.1.1 id1 k1 0 1 %s 100\nE P0.1.1 done %s 100\n' "$(t 10)" "$(t 20)" "$(t 30)" "$(t 40)" > "$work/logs/d0.1.log"
orow P0.1.1 2 0 1 NULL "'k1'"; orow P0.1.2 2 0 1 NULL "'k1'"
expect obx KEY-ORDER key-order

setup obx # a pause that used an attempt
printf 'I P0.1.1 - s - %s\nC P0.1.1 id1 %s\n' "$(t 1)" "$(t 2)" > "$work/logs/p0.1.log"
printf 'S P0.1.1 id1 - 0 1 %s 100\nE P0.1.1 pause %s 100\nS P0.1.1 id1 - 1 1 %s 100\nE P0.1.1 done %s 100\n' "$(t 10)" "$(t 20)" "$(t 30)" "$(t 40)" > "$work/logs/d0.1.log"
orow P0.1.1 2 1 1 NULL
expect obx ATTEMPT pause-attempt

setup obx # dead for no documented reason
printf 'I P0.1.1 - s - %s\nC P0.1.1 id1 %s\n' "$(t 1)" "$(t 2)" > "$work/logs/p0.1.log"
printf 'S P0.1.1 id1 - 0 1 %s 100\nE P0.1.1 retry %s 100\n' "$(t 10)" "$(t 20)" > "$work/logs/d0.1.log"
orow P0.1.1 3 1 1 "'gave up after 1 attempts: soak: retry'"
expect obx DEAD-REASON dead-reason

setup obx # replayed (the tool said so), never handled again (its start count kept at the limit)
printf 'I P0.1.1 - s - %s\nC P0.1.1 id1 %s\n' "$(t 1)" "$(t 2)" > "$work/logs/p0.1.log"
printf 'S P0.1.1 id1 - 0 1 %s 100\nE P0.1.1 dead %s 100\n' "$(t 10)" "$(t 20)" > "$work/logs/d0.1.log"
printf 'RP P0.1.1 %s tool\nRPD P0.1.1 1 0 %s\n' "$(t 30)" "$(t 40)" > "$work/logs/o0.1.log"
orow P0.1.1 0 0 3 "'soak: dead by handler'"
expect obx REPLAY-UNHANDLED replay-unhandled

setup obx # a dead message purged, the purge's answer lost (a transient error: it may have committed), the row gone
printf 'I P0.1.1 - s - %s\nC P0.1.1 id1 %s\n' "$(t 1)" "$(t 2)" > "$work/logs/p0.1.log"
printf 'S P0.1.1 id1 - 0 1 %s 100\nE P0.1.1 dead %s 100\n' "$(t 10)" "$(t 20)" > "$work/logs/d0.1.log"
printf 'PG P0.1.1 %s api\nPGD P0.1.1 0 -6 %s\n' "$(t 30)" "$(t 40)" > "$work/logs/o0.1.log"
expect obx ok purge-outcome-unknown
# the same purge failing for good (a permanent error): the row gone is lost
sed -i 's/ 0 -6 / 0 -5 /' "$work/logs/o0.1.log"
expect obx LOST purge-failed-row-gone
# by the tool: killed (-1) or a database error (exit 2) is an unknown outcome too
printf 'PG P0.1.1 %s tool\nPGD P0.1.1 0 -1 %s\n' "$(t 30)" "$(t 40)" > "$work/logs/o0.1.log"
expect obx ok purge-tool-outcome-unknown
# the tool found nothing to purge (exit 3): the row gone is lost
sed -i 's/ 0 -1 / 0 3 /' "$work/logs/o0.1.log"
expect obx LOST purge-tool-none-row-gone

setup obx # a purge that deleted a message a handler was inside (purge during replay)
printf 'I P0.1.1 - s - %s\nC P0.1.1 id1 %s\n' "$(t 1)" "$(t 2)" > "$work/logs/p0.1.log"
printf 'S P0.1.1 id1 - 0 1 %s 100\nE P0.1.1 dead %s 100\nS P0.1.1 id1 - 0 1 %s 100\nE P0.1.1 done %s 100\n' "$(t 10)" "$(t 20)" "$(t 50)" "$(t 60)" > "$work/logs/d0.1.log"
printf 'RP P0.1.1 %s api\nRPD P0.1.1 1 0 %s\nPG P0.1.1 %s api\nPGD P0.1.1 1 0 %s\n' "$(t 30)" "$(t 40)" "$(t 45)" "$(t 55)" > "$work/logs/o0.1.log"
expect obx PURGE-LIVE purge-live

setup obx # replayed by the tool from a crash loop, the start count not reset
printf 'I P0.1.1 - s - %s\nC P0.1.1 id1 %s\n' "$(t 1)" "$(t 2)" > "$work/logs/p0.1.log"
printf 'S P0.1.1 id1 - 0 3 %s 100\nS P0.1.1 id1 - 0 4 %s 101\nE P0.1.1 done %s 101\n' "$(t 10)" "$(t 50)" "$(t 60)" > "$work/logs/d0.1.log"
printf 'D d0.1 100 %s kill\n' "$(t 20)" >> "$work/logs/orch.log"
printf 'RP P0.1.1 %s tool\nRPD P0.1.1 1 0 %s\n' "$(t 30)" "$(t 40)" > "$work/logs/o0.1.log"
orow P0.1.1 2 0 4 NULL
expect obx REPLAY-STARTS replay-starts

setup obx # a join whose members are all Done, not cancelled, and no follow-up
{ printf 'J J0.1.1 jid1 2 %s\n' "$(t 1)"
  printf 'I P0.1.2 - s - %s\nC P0.1.2 id2 %s\nJA J0.1.1 P0.1.2 0 %s\n' "$(t 2)" "$(t 3)" "$(t 4)"
  printf 'I P0.1.3 - s - %s\nC P0.1.3 id3 %s\nJA J0.1.1 P0.1.3 0 %s\n' "$(t 5)" "$(t 6)" "$(t 7)"
  printf 'JW J0.1.1 0 %s\n' "$(t 8)"; } > "$work/logs/p0.1.log"
printf 'S P0.1.2 id2 - 0 1 %s 100\nE P0.1.2 done %s 100\nS P0.1.3 id3 - 0 1 %s 100\nE P0.1.3 done %s 100\n' "$(t 10)" "$(t 20)" "$(t 30)" "$(t 40)" > "$work/logs/d0.1.log"
orow P0.1.2 2 0 1 NULL; orow P0.1.3 2 0 1 NULL
expect obx JOIN join-never-continued

setup obx # a process died of a signal nobody sent (a use after free in a provider process)
printf 'I P0.1.1 - s - %s\nC P0.1.1 id1 %s\n' "$(t 1)" "$(t 2)" > "$work/logs/p0.1.log"
printf 'S P0.1.1 id1 - 0 1 %s 100\nE P0.1.1 done %s 100\n' "$(t 10)" "$(t 20)" > "$work/logs/d0.1.log"
printf 'D d0.1 100 %s signal11\n' "$(t 30)" >> "$work/logs/orch.log"
orow P0.1.1 2 0 1 NULL
expect obx CRASH crash

# A clean inbox history: delivered twice with the same content, handled once.
setup ibx
printf 'I s0/P0.1.1 1 %s\nA s0/P0.1.1 1 1 %s\nI s0/P0.1.1 1 %s\nA s0/P0.1.1 1 0 %s\n' "$(t 1)" "$(t 2)" "$(t 30)" "$(t 31)" > "$work/logs/p0.1.log"
printf 'S s0/P0.1.1 1 - 0 1 %s 100\nE s0/P0.1.1 done %s 100\n' "$(t 10)" "$(t 20)" > "$work/logs/d0.1.log"
irow s0/P0.1.1 1 Done 0 NULL
expect ibx ok clean-inbox

setup ibx # a redelivery with new content while in flight, then Done with it unseen
printf 'I s0/P0.1.1 1 %s\nA s0/P0.1.1 1 1 %s\nI s0/P0.1.1 2 %s\nA s0/P0.1.1 2 1 %s\n' "$(t 1)" "$(t 2)" "$(t 15)" "$(t 16)" > "$work/logs/p0.1.log"
printf 'S s0/P0.1.1 1 - 0 1 %s 100\nE s0/P0.1.1 done %s 100\n' "$(t 10)" "$(t 20)" > "$work/logs/d0.1.log"
irow s0/P0.1.1 2 Done 0 NULL
expect ibx INBOX-CONTENT inbox-content

setup ibx # the row gone (Done, cleaned up): the last accepted content v2 never handled
printf 'I s0/P0.1.1 1 %s\nA s0/P0.1.1 1 1 %s\nI s0/P0.1.1 2 %s\nA s0/P0.1.1 2 1 %s\n' "$(t 1)" "$(t 2)" "$(t 15)" "$(t 16)" > "$work/logs/p0.1.log"
printf 'S s0/P0.1.1 1 - 0 1 %s 100\nE s0/P0.1.1 done %s 100\n' "$(t 10)" "$(t 20)" > "$work/logs/d0.1.log"
expect ibx INBOX-CONTENT inbox-content-row-gone

setup ibx # a redelivery of new content whose outcome is unknown (killed) but which a handler saw, row gone
printf 'I s0/P0.1.1 1 %s\nA s0/P0.1.1 1 1 %s\nI s0/P0.1.1 2 %s\n' "$(t 1)" "$(t 2)" "$(t 5)" > "$work/logs/p0.1.log"
printf 'S s0/P0.1.1 2 - 0 1 %s 100\nE s0/P0.1.1 done %s 100\n' "$(t 10)" "$(t 20)" > "$work/logs/d0.1.log"
expect ibx ok inbox-unknown-outcome-handled

setup ibx # handled again after a delivery found it Done
printf 'I s0/P0.1.1 1 %s\nA s0/P0.1.1 1 1 %s\nI s0/P0.1.1 1 %s\nA s0/P0.1.1 1 0 %s\n' "$(t 1)" "$(t 2)" "$(t 30)" "$(t 31)" > "$work/logs/p0.1.log"
printf 'S s0/P0.1.1 1 - 0 1 %s 100\nE s0/P0.1.1 done %s 100\nS s0/P0.1.1 1 - 0 1 %s 100\nE s0/P0.1.1 done %s 100\n' "$(t 10)" "$(t 20)" "$(t 40)" "$(t 50)" > "$work/logs/d0.1.log"
irow s0/P0.1.1 1 Done 0 NULL
expect ibx INBOX-DONE-AGAIN inbox-done-again

# Transactional handlers (topics x, y): the effect exactly once on Done, never otherwise.
fxo() { # the outbox history of one message of topic x, handled with OUTCOME
    setup obx
    printf 'I P0.1.1 - s - %s\nC P0.1.1 id1 %s\n' "$(t 1)" "$(t 2)" > "$work/logs/p0.1.log"
    printf 'S P0.1.1 id1 - 0 1 %s 100\nE P0.1.1 %s %s 100\n' "$(t 10)" "$1" "$(t 20)" > "$work/logs/d0.1.log"
}
fxo done; orow P0.1.1 2 0 1 NULL NULL x; fx P0.1.1 0
expect obx ok clean-effect
fxo done; orow P0.1.1 2 0 1 NULL NULL x; fx P0.1.1 0; fx P0.1.1 0
expect obx EFFECT-TWICE effect-twice
fxo done; orow P0.1.1 2 0 1 NULL NULL x
expect obx EFFECT-MISSING done-without-effect
fxo dead; orow P0.1.1 3 0 1 "'soak: dead by handler'" NULL x; fx P0.1.1 0
expect obx EFFECT-UNDONE effect-of-dead
setup ibx
printf 'I s0/P0.1.1 1 %s\nA s0/P0.1.1 1 1 %s\n' "$(t 1)" "$(t 2)" > "$work/logs/p0.1.log"
printf 'S s0/P0.1.1 1 - 0 1 %s 100\nE s0/P0.1.1 done %s 100\n' "$(t 10)" "$(t 20)" > "$work/logs/d0.1.log"
irow s0/P0.1.1 1 Done 0 NULL y; fx s0/P0.1.1 1
expect ibx ok clean-inbox-effect
sqlite3 "$db" "UPDATE soak_fx SET v = 2"
expect ibx EFFECT-MISSING inbox-effect-of-other-content
setup ibx # content v2 accepted while v1 was being handled: handled again, an effect for each content
printf 'I s0/P0.1.1 1 %s\nA s0/P0.1.1 1 1 %s\nI s0/P0.1.1 2 %s\nA s0/P0.1.1 2 1 %s\n' "$(t 1)" "$(t 2)" "$(t 12)" "$(t 13)" > "$work/logs/p0.1.log"
printf 'S s0/P0.1.1 1 - 0 1 %s 100\nE s0/P0.1.1 done %s 100\nS s0/P0.1.1 2 - 0 1 %s 100\nE s0/P0.1.1 done %s 100\n' "$(t 10)" "$(t 20)" "$(t 30)" "$(t 40)" > "$work/logs/d0.1.log"
irow s0/P0.1.1 2 Done 0 NULL y; fx s0/P0.1.1 1; fx s0/P0.1.1 2
expect ibx ok clean-inbox-effect-per-content
fx s0/P0.1.1 2
expect ibx EFFECT-TWICE inbox-effect-of-one-content-twice
sed -i 's/ done / dead /' "$work/logs/d0.1.log"
sqlite3 "$db" "UPDATE Soakibx SET Status = 'Dead', LastError = 'soak: dead by handler'; UPDATE soak_fx SET v = 1"
expect ibx EFFECT-UNDONE inbox-effect-of-dead

setup ibx # v2 accepted while v1 was in its handler, which said done (its effect committed with the ack that
# made the message ready again); v2 then dead: v1's effect stays, no violation
printf 'I s0/P0.1.1 1 %s\nA s0/P0.1.1 1 1 %s\nI s0/P0.1.1 2 %s\nA s0/P0.1.1 2 1 %s\n' "$(t 1)" "$(t 2)" "$(t 12)" "$(t 13)" > "$work/logs/p0.1.log"
printf 'S s0/P0.1.1 1 - 0 1 %s 100\nE s0/P0.1.1 done %s 100\nS s0/P0.1.1 2 - 0 1 %s 100\nE s0/P0.1.1 dead %s 100\n' "$(t 10)" "$(t 20)" "$(t 30)" "$(t 40)" > "$work/logs/d0.1.log"
irow s0/P0.1.1 2 Dead 0 "'soak: dead by handler'" y; fx s0/P0.1.1 1
expect ibx ok clean-inbox-effect-of-earlier-content
fx s0/P0.1.1 2
expect ibx EFFECT-UNDONE inbox-effect-of-dead-content

echo "soak-selftest: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

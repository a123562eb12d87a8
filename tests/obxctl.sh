#!/usr/bin/env bash
# obxctl.sh BINDIR BACKEND CONNECTION: obxctl against a real database, used
# the way an operator uses it. A queue in a known state is made by
# obxctl_fill (through the library), then each command runs and its output
# is compared with tests/golden/ (times, ids, sizes and the backend's name
# masked: the same golden files serve every backend), the exit codes are
# checked, and every Prometheus text goes through prom_check (a strict
# parser). Prints "PASS|FAIL <ID> <backend> <what>" and "N passed, N failed".
# OBXCTL_UPDATE_GOLDEN=1 rewrites the golden files from this run.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?BINDIR}
backend=${2:?BACKEND}
export OBXCTL_CONNECTION=${3:?CONNECTION}
golden=$here/golden
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
table=CtlBox$$ inbox=CtlIn$$
ctl() { "$bin/obxctl" --schema ctl "$@"; }

result() { # ok ID what [detail file]
    if [ "$1" = 0 ]; then
        echo "PASS $2 $backend $3"
        passed=$((passed + 1))
    else
        [ -n "${4:-}" ] && sed 's/^/    /' "$4" | head -n 30
        echo "FAIL $2 $backend $3"
        failed=$((failed + 1))
    fi
}

# Times, ids, sizes and names that differ between runs and backends.
mask() {
    sed -E -e "s/$table|$inbox/TABLE/g" -e 's/ctl\.TABLE/TABLE/g' \
        -e 's/\((sqlite|postgresql|mariadb)\)$/(DB)/' -e 's/"dialect":"[a-z]+"/"dialect":"DB"/' \
        -e 's/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/<uuid>/g' \
        -e 's/[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}/YYYY-MM-DD hh:mm:ss.mmm/g' \
        -e 's/(^|[ (])-?[0-9]+(\.[0-9]+)?(ms|s|m|h|d)\b/\1<t>/g' -e 's/table size .*/table size <size>/' \
        -e 's/"(now_ms|oldest_ready_age_ms|next_due_in_ms|first_lease_ends_in_ms|size_bytes|created_ms|first_seen_ms|last_seen_ms|next_attempt_ms|locked_until_ms|due_ms)":-?[0-9]+/"\1":0/g'
}

# golden ID what NAME command...: masked stdout equals tests/golden/NAME.
golden() {
    local id=$1 what=$2 name=$3; shift 3
    "$@" >"$work/out" 2>"$work/err"
    local rc=$?
    mask <"$work/out" >"$work/masked"
    if [ "${OBXCTL_UPDATE_GOLDEN:-}" = 1 ]; then cp "$work/masked" "$golden/$name"; fi
    if [ "$rc" = 0 ] && diff -u "$golden/$name" "$work/masked" >"$work/diff" 2>&1; then
        result 0 "$id" "$what"
    else
        cat "$work/err" >>"$work/diff"
        result 1 "$id" "$what (exit $rc)" "$work/diff"
    fi
}

# status ID what EXPECTED command...: the exit status and one stderr line.
status() {
    local id=$1 what=$2 want=$3; shift 3
    "$@" >"$work/out" 2>"$work/err"
    local rc=$?
    if [ "$rc" = "$want" ] && { [ "$want" = 0 ] || [ "$(wc -l <"$work/err")" = 1 ]; }; then
        result 0 "$id" "$what"
    else
        echo "exit $rc, expected $want" >>"$work/err"
        result 1 "$id" "$what" "$work/err"
    fi
}

loop=CtlLoop$$ iloop=CtlILoop$$ two=CtlTwo$$
if ! "$bin/obxctl_fill" outbox "$OBXCTL_CONNECTION" "$table" ctl "$work/lib-metrics" ||
    ! "$bin/obxctl_fill" inbox "$OBXCTL_CONNECTION" "$inbox" ctl "$work/lib-imetrics" ||
    ! "$bin/obxctl_fill" inbox "$OBXCTL_CONNECTION" "$two" ctl /dev/null ||
    ! "$bin/obxctl_fill" crash-outbox "$OBXCTL_CONNECTION" "$loop" ctl - ||
    ! "$bin/obxctl_fill" crash-inbox "$OBXCTL_CONNECTION" "$iloop" ctl -; then
    result 1 OBXCTL-FILL "a queue in a known state through the library"
    echo "$passed passed, $failed failed"
    exit 1
fi
sleep 1.5 # the 1 s lease of sms.send has expired: "1 expired" is part of the golden output
# (and those of the crash-loop messages: claimed once with max_starts 1)

golden OBXCTL-STATS-TABLE "stats: aligned table per status and topic" stats.txt ctl --table "$table" stats
golden OBXCTL-STATS-JSON "stats --json: one JSON object" stats.json ctl --table "$table" stats --json
golden OBXCTL-LIST "list: messages oldest first" list.txt ctl --table "$table" list
golden OBXCTL-LIST-FILTER "list --status ready --topic --limit --json" list-filter.json \
    ctl --table "$table" list --status ready --topic email.send --limit 1 --json
golden OBXCTL-DEAD-LIST "dead list with last errors" dead-list.txt ctl --table "$table" dead list
golden OBXCTL-INBOX-STATS "--inbox stats" inbox-stats.txt ctl --inbox --table "$inbox" stats
golden OBXCTL-INBOX-LIST "--inbox list and dead list --json" inbox-list.txt ctl --inbox --table "$inbox" list
golden OBXCTL-INBOX-DEAD-JSON "--inbox dead list --json" inbox-dead.json ctl --inbox --table "$inbox" dead list --json

dead=$(ctl --table "$table" dead list --json | grep -o '"id":"[^"]*"' | cut -d'"' -f4)
dead1=$(echo "$dead" | sed -n 1p) dead2=$(echo "$dead" | sed -n 2p)
golden OBXCTL-SHOW "show: every field, payload with control characters escaped" show.txt ctl --table "$table" show "$dead1"
ctl --table "$table" show "$dead2" >"$work/cut"
ctl --table "$table" show --full "$dead2" >"$work/full"
grep -q ' \.\.\. \[cut: 976 more bytes; --full shows all\]$' "$work/cut" && grep -q "^  x\{2000\}$" "$work/full" &&
    ! grep -q 'cut:' "$work/full"
result $? OBXCTL-SHOW-CUT "show cuts a long payload at 1024 bytes; --full shows it whole" "$work/cut"
ctl --table "$table" show --json "$dead1" >"$work/json"
grep -q '"payload":"{\\"url\\":\\"https://hooks.example.com/x\\",\\n\\"body\\":\\"\\u001b\[31mred\\u001b\[0m\\"}"' "$work/json" &&
    ! grep -q $'\x1b' "$work/json"
result $? OBXCTL-SHOW-JSON "show --json escapes the payload as JSON" "$work/json"
golden OBXCTL-INBOX-SHOW "--inbox show --source" inbox-show.txt ctl --inbox --table "$inbox" show --source stripe evt_06

# Dead letters: replay one (ready again, attempts 0), a wrong id is exit 3, purge by topic.
status OBXCTL-EXIT-NOT-FOUND "show of a missing id: exit 3, one line" 3 \
    ctl --table "$table" show 01890a5d-ac96-774b-bcce-b302099a8000
status OBXCTL-DEAD-REPLAY-MISSING "dead replay of an id that is not dead: exit 3" 3 \
    ctl --table "$table" dead replay 01890a5d-ac96-774b-bcce-b302099a8000
out=$(ctl --table "$table" dead replay "$dead1") && [ "$out" = "replayed 1 dead message(s)" ] &&
    ctl --table "$table" list --status ready --json | grep -q "\"id\":\"$dead1\",[^}]*\"attempts\":0" &&
    ctl --table "$table" stats --json | grep -q '"dead":1,'
result $? OBXCTL-DEAD-REPLAY "dead replay ID: ready again with attempts reset" "$work/err"
out=$(ctl --table "$table" dead purge --all --topic webhook.deliver) && [ "$out" = "purged 1 dead message(s)" ] &&
    ctl --table "$table" stats --json | grep -q '"dead":0,'
result $? OBXCTL-DEAD-PURGE "dead purge --all --topic deletes the dead ones of that topic"
out=$(ctl --inbox --table "$inbox" dead replay --source stripe evt_06 evt_07) && [ "$out" = "replayed 2 dead message(s)" ] &&
    ctl --inbox --table "$inbox" stats --json | grep -q '"dead":0,'
result $? OBXCTL-INBOX-DEAD-REPLAY "--inbox dead replay --source S ID ID"

# One code path for replay, the library's: a crash-loop message (claimed
# max_starts times, then reaped Dead) replayed by obxctl has its start count
# reset, so a claim under the same max_starts takes it again.
ok=0
"$bin/obxctl_fill" claim-outbox "$OBXCTL_CONNECTION" "$loop" ctl - >"$work/c0" 2>"$work/err" || ok=1 # the reap: Dead
out=$(ctl --table "$loop" dead replay --all 2>>"$work/err") && [ "$out" = "replayed 1 dead message(s)" ] || ok=1
out=$("$bin/obxctl_fill" claim-outbox "$OBXCTL_CONNECTION" "$loop" ctl - 2>>"$work/err") && [ "$out" = "claimed 1" ] ||
    { echo "outbox after replay: ${out:-}" >>"$work/err"; ok=1; }
"$bin/obxctl_fill" claim-inbox "$OBXCTL_CONNECTION" "$iloop" ctl - >"$work/c0" 2>>"$work/err" || ok=1
out=$(ctl --inbox --table "$iloop" dead replay --source loop evt_loop 2>>"$work/err") &&
    [ "$out" = "replayed 1 dead message(s)" ] || ok=1
out=$("$bin/obxctl_fill" claim-inbox "$OBXCTL_CONNECTION" "$iloop" ctl - 2>>"$work/err") && [ "$out" = "claimed 1" ] ||
    { echo "inbox after replay: ${out:-}" >>"$work/err"; ok=1; }
result $ok OBXCTL-DEAD-REPLAY-STARTS "dead replay resets the start count: a replayed crash-loop message is claimed again" "$work/err"

# Each command honours the options it accepts and refuses (exit 1, nothing
# done) those it does not. Dead letters of two sources: stripe (evt_06,
# evt_07) and, after a replay and a claim, none of another.
dead_of() { ctl --inbox --table "$two" stats --json | grep -o '"dead":[0-9]*' | head -n 1; }
ok=0
for args in "stats --limit 1" "stats --source s" "stats --all" "stats --topic t" "list --source s" "list --all" \
    "list --full" "show --limit 1 $dead1" "show --source s $dead1" "dead list --all" "dead list --source s" \
    "dead list --full" "dead replay --all --limit 1" "dead purge --all --limit 1" "dead purge --all --source s" \
    "dead replay --all --full" "dead purge --all --status dead" "reap --json" "reap --limit 1" "cleanup --json" \
    "cleanup --limit 1" "cleanup --all" "deploy --json" "metrics --json" "metrics --limit 1"; do
    # shellcheck disable=SC2086
    ctl --table "$table" $args >"$work/out" 2>"$work/e1"
    rc=$?
    [ "$rc" = 1 ] && [ "$(wc -l <"$work/e1")" = 1 ] || { echo "outbox $args: exit $rc" >>"$work/err"; ok=1; }
done
for args in "list --source stripe" "show --limit 1 --source stripe evt_06" "dead list --all" \
    "dead purge --all --limit 1" "dead replay --all --limit 1" "dead purge --all --watch 1" "reap --source stripe"; do
    # shellcheck disable=SC2086
    ctl --inbox --table "$two" $args >"$work/out" 2>"$work/e1"
    rc=$?
    [ "$rc" = 1 ] && [ "$(wc -l <"$work/e1")" = 1 ] || { echo "inbox $args: exit $rc" >>"$work/err"; ok=1; }
done
[ "$(dead_of)" = '"dead":2' ] || { echo "dead letters changed by a refused command: $(dead_of)" >>"$work/err"; ok=1; }
result $ok OBXCTL-OPTIONS-REFUSED "per command: an option it does not honour is exit 1 and changes nothing" "$work/err"
ok=0
: >"$work/err"
out=$(ctl --inbox --table "$two" dead purge --all --source no-such-source 2>>"$work/err") &&
    [ "$out" = "purged 0 dead message(s)" ] && [ "$(dead_of)" = '"dead":2' ] || { echo "purge --source: $out" >>"$work/err"; ok=1; }
n=$(ctl --inbox --table "$two" dead list --source no-such-source --json 2>>"$work/err") && [ "$n" = "[]" ] &&
    n=$(ctl --inbox --table "$two" dead list --source stripe --limit 1 --json 2>>"$work/err") &&
    [ "$(echo "$n" | grep -o '"source":"stripe"' | wc -l)" = 1 ] || { echo "dead list --source: $n" >>"$work/err"; ok=1; }
out=$(ctl --inbox --table "$two" dead purge --json --source stripe evt_06 2>>"$work/err") &&
    [ "$out" = '{"purged":1}' ] && [ "$(dead_of)" = '"dead":1' ] || { echo "purge --json: $out" >>"$work/err"; ok=1; }
out=$(ctl --inbox --table "$two" dead replay --all --source stripe --topic webhook.deliver --json 2>>"$work/err") &&
    [ "$out" = '{"replayed":1}' ] && [ "$(dead_of)" = '"dead":0' ] || { echo "replay --json: $out" >>"$work/err"; ok=1; }
result $ok OBXCTL-OPTIONS-HONOURED "dead purge|replay --all honour --source (inbox) and --json; dead list --source" "$work/err"

# Housekeeping through the library.
out=$(ctl --table "$table" reap) && [ "$out" = "reaped 1 expired lease(s)" ]
result $? OBXCTL-REAP "reap releases the expired lease (and only it)"
out=$(ctl --table "$table" cleanup --older-than 7d) && [ "$out" = "deleted 0 done message(s) older than 7d" ] &&
    out=$(ctl --table "$table" cleanup) && [ "$out" = "deleted 5 done message(s)" ]
result $? OBXCTL-CLEANUP "cleanup --older-than 7d keeps fresh ones; cleanup deletes every done one"

# Schema and deploy.
ok=0
for d in sqlite postgresql mariadb sqlserver; do
    "$bin/obxctl" schema --dialect $d | cmp -s - "$here/../sql/$d/outbox.sql" || ok=1
    "$bin/obxctl" --inbox schema --dialect $d | cmp -s - "$here/../sql/$d/inbox.sql" || ok=1
done
result $ok OBXCTL-SCHEMA "schema --dialect D prints sql/D/{outbox,inbox}.sql exactly"
out=$(ctl --table "New$table" deploy) && case $out in "deployed outbox table New$table ("*")") ;; *) false ;; esac &&
    ctl --table "New$table" stats --json | grep -q '"total":0}'
result $? OBXCTL-DEPLOY "deploy creates a table that stats can read"

# Metrics: the library's full text (counters, histograms) and obxctl's gauges.
"$bin/prom_check" <"$work/lib-metrics" >"$work/pc" 2>&1 && "$bin/prom_check" <"$work/lib-imetrics" >>"$work/pc" 2>&1 &&
    grep -q '^obx_handler_duration_seconds_count{store="outbox",topic="webhook.deliver"} 2$' "$work/lib-metrics"
result $? OBX-METRICS-PROMCHECK "obx_metrics_text and ibx_metrics_text pass a strict exposition-format parser" "$work/pc"
ctl --table "$table" metrics >"$work/m" && "$bin/prom_check" <"$work/m" >"$work/pc" 2>&1 &&
    grep -q '^obx_queue_topic_messages{store="outbox",topic="email.send",status="ready"} 2$' "$work/m" &&
    ! grep -q '_total' "$work/m" && ctl --inbox --table "$inbox" --store 'site "7"' metrics >"$work/mi" &&
    "$bin/prom_check" <"$work/mi" >>"$work/pc" 2>&1 && grep -q '^ibx_queue_dead_messages{store="site \\"7\\""} 0$' "$work/mi"
result $? OBXCTL-METRICS "metrics: gauges only, per topic and status; passes the strict parser" "$work/pc"

# JSON stays JSON at the limits: 255-character topics and ids of 2-byte
# characters whole (not cut, not merged), a long last error, a payload cut
# at 1024 bytes inside a character; a table's cut cell does not offer --full.
wide=CtlWide$$
a=$(printf '\xc3\xa4%.0s' {1..255}) b=$(printf '\xc3\xa4%.0s' {1..254})b e=$(printf '\xc3\xa9%.0s' {1..255}) o=$(printf '\xc3\xb6%.0s' {1..300})
ok=0
"$bin/obxctl_fill" inbox-wide "$OBXCTL_CONNECTION" "$wide" ctl /dev/null >"$work/err" 2>&1 || ok=1
ctl --inbox --table "$wide" stats --json >"$work/j1" 2>>"$work/err" || ok=1
ctl --inbox --table "$wide" list --json >"$work/j2" 2>>"$work/err" || ok=1
ctl --inbox --table "$wide" dead list --json >"$work/j3" 2>>"$work/err" || ok=1
ctl --inbox --table "$wide" show --json --source wide "$e" >"$work/j4" 2>>"$work/err" || ok=1
for j in j1 j2 j3 j4; do iconv -f UTF-8 -t UTF-8 <"$work/$j" >/dev/null 2>>"$work/err" || { echo "$j: not UTF-8" >>"$work/err"; ok=1; }; done
grep -qF "{\"topic\":\"$a\",\"ready\":1," "$work/j1" && grep -qF "{\"topic\":\"$b\",\"ready\":1," "$work/j1" &&
    grep -qF "\"message_id\":\"$e\",\"status\":\"dead\",\"topic\":\"$a\"" "$work/j2" &&
    grep -qF "\"last_error\":\"$o\"" "$work/j3" && grep -qF '"payload_cut":true' "$work/j4" || ok=1
ctl --inbox --table "$wide" list >"$work/t" 2>>"$work/err" && ! grep -q -- '--full' "$work/t" || ok=1
result $ok OBXCTL-JSON-UTF8 "--json is UTF-8 with 255-character topics and ids whole; cut cells say ..." "$work/err"

# Exit codes and help.
status OBXCTL-EXIT-USAGE "an unknown command: exit 1, one line" 1 ctl frobnicate
status OBXCTL-EXIT-OPTION "an option the command does not take: exit 1" 1 ctl --table "$table" stats --full
status OBXCTL-EXIT-STATUS "list --status seen of an outbox (an inbox status): exit 1" 1 \
    ctl --table "$table" list --status seen
status OBXCTL-EXIT-DB "a missing table: exit 2, one line naming it" 2 ctl --table NoSuchTable stats
status OBXCTL-EXIT-NOCONN "no connection: exit 1" 1 env -u OBXCTL_CONNECTION "$bin/obxctl" stats
ok=0
for c in stats list show dead reap cleanup schema deploy metrics; do
    "$bin/obxctl" "$c" --help | grep -q "^usage: obxctl" || ok=1
done
"$bin/obxctl" --help | grep -q '^Exit status: 0 ok; 1 usage error' || ok=1
result $ok OBXCTL-HELP "--help for every command; the exit codes in obxctl --help"
n=$(ctl --table "$table" stats --watch 1 --count 2 | grep -c '^STATUS ')
[ "$n" = 2 ]
result $? OBXCTL-WATCH "stats --watch 1 --count 2 prints two reports"

# The wrong kind of table (an outbox given --inbox, an inbox without it) is
# refused before anything reads or changes it: exit 1, one line naming the
# kind it is; the rows are as they were (MariaDB compared the inbox's
# 'Dead' with the outbox's integer status: 0, Ready, and purged those).
counts() { ctl "$@" stats --json | grep -o '"messages":{[^}]*}'; }
ok=0
: >"$work/err"
b1=$(counts --table "$table") b2=$(counts --inbox --table "$inbox")
for args in "stats" "list" "dead list" "dead purge --all" "dead replay --all" "reap" "cleanup" "metrics" "deploy" \
    "show --source s x"; do
    # shellcheck disable=SC2086
    ctl --inbox --table "$table" $args >"$work/out" 2>"$work/e1"
    rc=$?
    [ "$rc" = 1 ] && [ "$(wc -l <"$work/e1")" = 1 ] && grep -q 'is an outbox table' "$work/e1" ||
        { echo "--inbox on the outbox, $args: exit $rc: $(cat "$work/e1")" >>"$work/err"; ok=1; }
    # shellcheck disable=SC2086
    ctl --table "$inbox" ${args/show --source s x/show 01890a5d-ac96-774b-bcce-b302099a8000} >"$work/out" 2>"$work/e1"
    rc=$?
    [ "$rc" = 1 ] && [ "$(wc -l <"$work/e1")" = 1 ] && grep -q 'is an inbox table' "$work/e1" ||
        { echo "outbox on the inbox, $args: exit $rc: $(cat "$work/e1")" >>"$work/err"; ok=1; }
done
[ "$(counts --table "$table")" = "$b1" ] && [ "$(counts --inbox --table "$inbox")" = "$b2" ] ||
    { echo "rows changed: $b1 -> $(counts --table "$table"); $b2 -> $(counts --inbox --table "$inbox")" >>"$work/err"; ok=1; }
result $ok OBXCTL-WRONG-KIND "a table of the other kind: exit 1 naming its kind, nothing read or changed" "$work/err"

# Tools go through the library: obxctl's own SQL only reads (counts per
# topic, listings, the table's kind); every change is a library call.
grep -nE '"[^"]*\b(INSERT|UPDATE|DELETE|MERGE|TRUNCATE|DROP|ALTER|CREATE)\b' "$here/../tools/obxctl.c" >"$work/err"
[ ! -s "$work/err" ]
result $? OBXCTL-NO-DML "tools/obxctl.c has no DML or DDL of its own (changes are library calls)" "$work/err"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]

#!/usr/bin/env bash
# obxctl.sh BINDIR BACKEND CONNECTION: obxctl against a real database, used
# the way an operator uses it. A queue in a known state is made by
# obxctl_fill (through the library), then each command runs and its output
# is compared with tests/golden/ (times, ids, sizes and the backend's name
# masked: the same golden files serve every backend), the exit codes are
# checked, and every Prometheus text goes through prom_check (a strict
# parser). Prints "PASS|FAIL <ID> <backend> <what>" and "N passed, N failed".
# OBXCTL_UPDATE_GOLDEN=1 rewrites the golden files from this run.
# Backend sqlite3: obxctl_sqlite3 and obxctl_fill_sqlite3 (built with
# OBX_SQLITE3_API: SQLite through its own C API), the same checks.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?BINDIR}
backend=${2:?BACKEND}
dialect=$backend sfx=
[ "$backend" = sqlite3 ] && dialect=sqlite sfx=_sqlite3
export OBXCTL_CONNECTION=${3:?CONNECTION}
golden=$here/golden
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
table=CtlBox$$ inbox=CtlIn$$
ctl() { "$bin/obxctl$sfx" --schema ctl "$@"; }
fill() { "$bin/obxctl_fill$sfx" "$@"; }

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

loop=CtlLoop$$ iloop=CtlILoop$$ two=CtlTwo$$ ops=CtlOps$$ iops=CtlIOps$$ env=CtlEnv$$
if ! fill outbox "$OBXCTL_CONNECTION" "$table" ctl "$work/lib-metrics" ||
    ! fill outbox "$OBXCTL_CONNECTION" "$ops" ctl /dev/null ||
    ! fill inbox "$OBXCTL_CONNECTION" "$iops" ctl /dev/null ||
    ! env_id=$(fill envelope-outbox "$OBXCTL_CONNECTION" "$env" ctl -) ||
    ! fill inbox "$OBXCTL_CONNECTION" "$inbox" ctl "$work/lib-imetrics" ||
    ! fill inbox "$OBXCTL_CONNECTION" "$two" ctl /dev/null ||
    ! fill crash-outbox "$OBXCTL_CONNECTION" "$loop" ctl - ||
    ! fill crash-inbox "$OBXCTL_CONNECTION" "$iloop" ctl -; then
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
# Priority (obx_new_message.priority): the scheduled message was enqueued with 3.
sched=$(ctl --table "$table" list --status scheduled --json | grep -o '"id":"[^"]*"' | cut -d'"' -f4)
ctl --table "$table" show "$sched" >"$work/prio" && ctl --table "$table" show --json "$sched" >>"$work/prio" &&
    ctl --table "$table" list --status scheduled --json >>"$work/prio"
grep -q '^priority       3  (-5\.\.5; higher first' "$work/prio" && grep -q '"priority":3,"attempts"' "$work/prio" &&
    grep -q '"bytes":2,"priority":3}' "$work/prio"
result $? OBXCTL-PRIORITY "list and show print a message's priority (text and --json)" "$work/prio"
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
out=$(ctl --table "$table" dead purge --all --topic webhook.deliver --yes) && [ "$out" = "purged 1 dead message(s)" ] &&
    ctl --table "$table" stats --json | grep -q '"dead":0,'
result $? OBXCTL-DEAD-PURGE "dead purge --all --topic deletes the dead ones of that topic"
out=$(ctl --inbox --table "$inbox" dead replay --source stripe evt_06 evt_07) && [ "$out" = "replayed 2 dead message(s)" ] &&
    ctl --inbox --table "$inbox" stats --json | grep -q '"dead":0,'
result $? OBXCTL-INBOX-DEAD-REPLAY "--inbox dead replay --source S ID ID"

# One code path for replay, the library's: a crash-loop message (claimed
# max_starts times, then reaped Dead) replayed by obxctl has its start count
# reset, so a claim under the same max_starts takes it again.
ok=0
fill claim-outbox "$OBXCTL_CONNECTION" "$loop" ctl - >"$work/c0" 2>"$work/err" || ok=1 # the reap: Dead
out=$(ctl --table "$loop" dead replay --all 2>>"$work/err") && [ "$out" = "replayed 1 dead message(s)" ] || ok=1
out=$(fill claim-outbox "$OBXCTL_CONNECTION" "$loop" ctl - 2>>"$work/err") && [ "$out" = "claimed 1" ] ||
    { echo "outbox after replay: ${out:-}" >>"$work/err"; ok=1; }
fill claim-inbox "$OBXCTL_CONNECTION" "$iloop" ctl - >"$work/c0" 2>>"$work/err" || ok=1
out=$(ctl --inbox --table "$iloop" dead replay --source loop evt_loop 2>>"$work/err") &&
    [ "$out" = "replayed 1 dead message(s)" ] || ok=1
out=$(fill claim-inbox "$OBXCTL_CONNECTION" "$iloop" ctl - 2>>"$work/err") && [ "$out" = "claimed 1" ] ||
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
out=$(ctl --inbox --table "$two" dead purge --all --yes --source no-such-source 2>>"$work/err") &&
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
out=$(ctl --table "$table" cleanup) && [ "$out" = "deleted 0 done message(s) older than 7d" ] &&
    out=$(ctl --inbox --table "$inbox" cleanup) && [ "$out" = "deleted 0 done message(s) older than 7d" ] &&
    "$bin/obxctl$sfx" cleanup --help | grep -q 'default 7d, outbox and inbox alike' &&
    out=$(ctl --table "$table" cleanup --older-than 1ms) && [ "$out" = "deleted 5 done message(s) older than 1ms" ]
result $? OBXCTL-CLEANUP "cleanup: one default, 7d for outbox and inbox (as its help says); --older-than 1ms deletes the rest"

# Schema and deploy.
ok=0
for d in sqlite postgresql mariadb sqlserver; do
    "$bin/obxctl$sfx" schema --dialect $d | cmp -s - "$here/../sql/$d/outbox.sql" || ok=1
    "$bin/obxctl$sfx" --inbox schema --dialect $d | cmp -s - "$here/../sql/$d/inbox.sql" || ok=1
done
result $ok OBXCTL-SCHEMA "schema --dialect D prints sql/D/{outbox,inbox}.sql exactly"
out=$(ctl --table "New$table" deploy) && case $out in "deployed outbox table New$table ("*")") ;; *) false ;; esac &&
    ctl --table "New$table" stats --json | grep -q '"total":0}'
result $? OBXCTL-DEPLOY "deploy creates a table that stats can read"
status OBXCTL-UPGRADE-ARGS "upgrade without --keys or --drop-old: exit 1" 1 ctl --table "New$table" upgrade
out=$(ctl --table "New$table" upgrade --keys --drop-old) &&
    case $out in "upgraded outbox table New$table ("*"): 0 step(s) run") ;; *) false ;; esac &&
    out=$(ctl --inbox --table "$inbox" upgrade --keys --drop-old) &&
    case $out in "upgraded inbox table $inbox ("*"): 0 step(s) run") ;; *) false ;; esac
result $? OBXCTL-UPGRADE "upgrade --keys --drop-old on a table this release created: nothing to do (CORE-SCHEMA-UPGRADE-V1 runs the steps on an old one)"

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
fill inbox-wide "$OBXCTL_CONNECTION" "$wide" ctl /dev/null >"$work/err" 2>&1 || ok=1
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
ok=0
: >"$work/err"
for args in "stats" "list" "dead purge --all" "cleanup" "show 01890a5d-ac96-774b-bcce-b302099a8000"; do
    # shellcheck disable=SC2086
    ctl --table NoSuchTable $args >/dev/null 2>"$work/e1"
    rc=$?
    [ "$rc" = 2 ] && grep -q "^obxctl: ${args%% [0-9-]*}: no readable outbox table .*NoSuchTable .*; to create it: obxctl --schema ctl --table NoSuchTable deploy\$" "$work/e1" ||
        { echo "$args: exit $rc: $(cat "$work/e1")" >>"$work/err"; ok=1; }
done
ctl --inbox --table NoSuchIn dead list >/dev/null 2>"$work/e1"
grep -q "^obxctl: dead list: no readable inbox table .*NoSuchIn .*; to create it: obxctl --inbox --schema ctl --table NoSuchIn deploy\$" "$work/e1" ||
    { echo "inbox: $(cat "$work/e1")" >>"$work/err"; ok=1; }
"$bin/obxctl$sfx" -c "Driver={No Such Driver};" dead list >/dev/null 2>"$work/e1"
[ $? = 2 ] && grep -q '^obxctl: dead list: cannot open the store: ' "$work/e1" || { echo "no driver: $(cat "$work/e1")" >>"$work/err"; ok=1; }
result $ok OBXCTL-MISSING-TABLE "a missing table: the command run, the table, and the deploy that creates it (--inbox, --schema, --table)" "$work/err"
status OBXCTL-EXIT-NOCONN "no connection: exit 1" 1 env -u OBXCTL_CONNECTION "$bin/obxctl$sfx" stats
ok=0
for c in stats list show cancel run enqueue dead reap cleanup schema deploy metrics; do
    "$bin/obxctl$sfx" "$c" --help | grep -q "^usage: obxctl" || ok=1
done
"$bin/obxctl$sfx" --help | grep -q '^Exit status: 0 ok; 1 usage error' || ok=1
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

# ---- operator actions (on tables of their own: $ops, $iops) ----------------------------------

# show by the database's clock: a message enqueued a moment ago is ready
# (obxctl compared with the host's clock in whole seconds: "scheduled").
ok=0
: >"$work/err"
for i in 1 2 3; do
    id=$(ctl --table "$ops" enqueue --topic clock.now --payload '{}' 2>>"$work/err" | cut -d' ' -f2)
    ctl --table "$ops" show "$id" >"$work/s" 2>>"$work/err" && grep -q '^status         ready$' "$work/s" ||
        { echo "enqueued $id, then:" >>"$work/err"; cat "$work/s" >>"$work/err"; ok=1; }
done
ctl --table "$ops" show --json "$id" | grep -q '"status":"ready",.*"now_ms":[0-9]' || ok=1
result $ok OBXCTL-SHOW-DBCLOCK "show: a message due now is ready, by the database's clock (now_ms in --json)" "$work/err"

# show explains: ordering key, the earlier message a parked one waits for,
# starts, expiry, tenant, aggregate, headers; no year-10000 next attempt.
ok=0
: >"$work/err"
parked=$(ctl --table "$env" enqueue --topic ledger.post --payload '{"amount":5}' --key acct-7 --json 2>>"$work/err" | cut -d'"' -f4)
ctl --table "$env" show "$parked" >"$work/p" 2>>"$work/err" || ok=1
grep -q "^why            parked behind $env_id (in flight), an earlier message of its ordering key$" "$work/p" &&
    grep -q '^ordering key   acct-7$' "$work/p" && grep -q '^next attempt   - (parked: ' "$work/p" &&
    ! grep -q '10000-\|9999-' "$work/p" || { cat "$work/p" >>"$work/err"; ok=1; }
ctl --table "$env" show --json "$parked" | grep -q "\"parked\":true,.*\"ordering_key\":\"acct-7\",\"waits_for\":\"$env_id\"" ||
    { echo "json: $(ctl --table "$env" show --json "$parked")" >>"$work/err"; ok=1; }
ctl --table "$env" show "$env_id" >"$work/e" 2>>"$work/err" || ok=1
grep -q '^status         in-flight$' "$work/e" && grep -q '^why            its lease expired .* ago (a worker died?): the next reap frees it$' "$work/e" &&
    grep -q '^starts         1$' "$work/e" && grep -q '^expires        [0-9]\{4\}-' "$work/e" &&
    grep -q '^tenant         t-42$' "$work/e" && grep -q '^aggregate      order 1001$' "$work/e" &&
    grep -q '^headers        traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01$' "$work/e" &&
    grep -q '^               x-src: billing$' "$work/e" || { cat "$work/e" >>"$work/err"; ok=1; }
ctl --table "$env" show --json "$env_id" | grep -q '"tenant_id":"t-42","aggregate_type":"order","aggregate_id":"1001","headers":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","x-src":"billing"}' ||
    { echo "json: $(ctl --table "$env" show --json "$env_id")" >>"$work/err"; ok=1; }
result $ok OBXCTL-SHOW-WHY "show: ordering key and the message a parked one waits for, starts, expiry, tenant, aggregate, headers" "$work/err"

# enqueue (testing): through the library, every field given is stored.
ok=0
: >"$work/err"
id=$(ctl --table "$ops" enqueue --topic test.ping --payload '{"ping":1}' --correlation corr-9 --tenant t-9 --due-in 1h --json 2>>"$work/err" | cut -d'"' -f4)
ctl --table "$ops" show --json "$id" >"$work/j" 2>>"$work/err" &&
    grep -q '"topic":"test.ping","status":"scheduled",.*"correlation_id":"corr-9","tenant_id":"t-9"' "$work/j" &&
    grep -q '"payload":"{\\"ping\\":1}"' "$work/j" || { cat "$work/j" >>"$work/err"; ok=1; }
out=$(ctl --inbox --table "$iops" enqueue --topic test.ping --payload '{}' --source ops --tenant t-9 evt_ping 2>>"$work/err") &&
    [ "$out" = "enqueued evt_ping from ops" ] && ctl --inbox --table "$iops" show --source ops evt_ping | grep -q '^tenant         t-9$' ||
    { echo "inbox: $out" >>"$work/err"; ok=1; }
status_of() { ctl "$@" 2>/dev/null | sed -n 's/^status *//p'; }
[ "$(status_of --table "$ops" show "$id")" = scheduled ] || ok=1
result $ok OBXCTL-ENQUEUE "enqueue: one message through the library, topic, payload, correlation, tenant, due time (inbox: source and id)" "$work/err"

# run: a scheduled message due now; a parked one keeps waiting (exit 3, said why).
ok=0
: >"$work/err"
out=$(ctl --table "$ops" run "$id" 2>>"$work/err") && [ "$out" = "$id is due now" ] &&
    [ "$(status_of --table "$ops" show "$id")" = ready ] || { echo "run: $out" >>"$work/err"; ok=1; }
out=$(ctl --table "$ops" run "$id" 2>>"$work/err") && [ "$out" = "$id is due already (ready): nothing changed" ] || ok=1
ctl --table "$env" run "$parked" >/dev/null 2>"$work/e1"
[ $? = 3 ] && grep -q "^obxctl: run: $parked is parked behind $env_id (in flight), .*: nothing changed" "$work/e1" ||
    { cat "$work/e1" >>"$work/err"; ok=1; }
[ "$(status_of --table "$env" show "$parked")" = scheduled ] || ok=1
out=$(ctl --inbox --table "$iops" run --source stripe evt_12 2>>"$work/err") && [ "$out" = "evt_12 is due now" ] &&
    [ "$(status_of --inbox --table "$iops" show --source stripe evt_12)" = ready ] || { echo "inbox run: $out" >>"$work/err"; ok=1; }
result $ok OBXCTL-RUN "run: a scheduled message due now; a parked one stays (exit 3, naming what it waits for)" "$work/err"

# cancel: a ready or scheduled message to dead, the reason its last error;
# an in-flight one is refused (exit 3, pointing at dead move).
ok=0
: >"$work/err"
sched=$(ctl --table "$ops" list --status scheduled --topic report.monthly --json | grep -o '"id":"[^"]*"' | cut -d'"' -f4)
status OBXCTL-CANCEL-REASON "cancel without --reason: exit 1" 1 ctl --table "$ops" cancel "$sched"
out=$(ctl --table "$ops" cancel --reason "report withdrawn, ticket 42" "$sched" 2>>"$work/err") &&
    [ "$out" = "cancelled $sched: dead (report withdrawn, ticket 42)" ] &&
    ctl --table "$ops" show --json "$sched" | grep -q '"status":"dead",.*"last_error":"report withdrawn, ticket 42"' ||
    { echo "cancel: $out" >>"$work/err"; ok=1; }
ctl --table "$env" cancel --reason x "$env_id" >/dev/null 2>"$work/e1"
[ $? = 3 ] && grep -q 'is in-flight .*in flight: obxctl dead move)$' "$work/e1" || { cat "$work/e1" >>"$work/err"; ok=1; }
out=$(ctl --inbox --table "$iops" cancel --reason "not ours" --source stripe evt_11 --json 2>>"$work/err") && [ "$out" = '{"cancelled":1}' ] &&
    [ "$(status_of --inbox --table "$iops" show --source stripe evt_11)" = dead ] || { echo "inbox cancel: $out" >>"$work/err"; ok=1; }
result $ok OBXCTL-CANCEL "cancel: a scheduled message dead with the reason as last error; in flight refused (exit 3); inbox too" "$work/err"

# dead move: in flight too; the parked message behind it then moves on.
ok=0
: >"$work/err"
out=$(ctl --table "$env" dead move --reason "stuck on host 7" "$env_id" 2>>"$work/err") &&
    [ "$out" = "moved $env_id: dead (stuck on host 7)" ] && [ "$(status_of --table "$env" show "$env_id")" = dead ] ||
    { echo "move: $out" >>"$work/err"; ok=1; }
[ "$(status_of --table "$env" show "$parked")" = ready ] || { ctl --table "$env" show "$parked" >>"$work/err"; ok=1; }
ctl --table "$env" dead move --reason x "$env_id" >/dev/null 2>"$work/e1"
[ $? = 3 ] || ok=1
out=$(ctl --inbox --table "$iops" dead move --reason "stuck" --source stripe evt_08 2>>"$work/err") &&
    [ "$(status_of --inbox --table "$iops" show --source stripe evt_08)" = dead ] || { echo "inbox move: $out" >>"$work/err"; ok=1; }
result $ok OBXCTL-DEAD-MOVE "dead move: an in-flight message to dead (its parked successor moves on); a dead one: exit 3; inbox too" "$work/err"

# list newest first with an offset; find by correlation id, ordering key, tenant.
ok=0
: >"$work/err"
ctl --table "$ops" list --limit 1000 --json | grep -o '"id":"[^"]*"' >"$work/asc"
ctl --table "$ops" list --newest --limit 3 --offset 1 --json | grep -o '"id":"[^"]*"' >"$work/desc"
tac "$work/asc" | sed -n 2,4p | cmp -s - "$work/desc" || { echo "newest/offset differ" >>"$work/err"; ok=1; }
[ "$(ctl --table "$ops" list --correlation corr-9 --json | grep -o '"id":"[^"]*"' | cut -d'"' -f4)" = "$id" ] || ok=1
[ "$(ctl --table "$env" list --key acct-7 --json | grep -o '"id":"[^"]*"' | cut -d'"' -f4 | tr '\n' ' ')" = "$env_id $parked " ] || ok=1
[ "$(ctl --table "$ops" list --tenant t-9 --json | grep -o '"id":"[^"]*"' | cut -d'"' -f4)" = "$id" ] || ok=1
[ "$(ctl --inbox --table "$iops" list --tenant t-9 --json | grep -o '"message_id":"[^"]*"' | cut -d'"' -f4)" = evt_ping ] || ok=1
ctl --inbox --table "$iops" list --key acct-7 >/dev/null 2>&1
[ $? = 1 ] || ok=1
[ "$(ctl --table "$ops" list --status in_flight --json)" = "$(ctl --table "$ops" list --status in-flight --json)" ] || ok=1
result $ok OBXCTL-LIST-FIND "list --newest --offset; --correlation, --key, --tenant find their messages (inbox: --tenant)" "$work/err"

# Guards: dead purge --all without --yes deletes nothing, says how many it would.
ok=0
: >"$work/err"
n=$(ctl --table "$ops" stats --json | grep -o '"dead":[0-9]*' | head -n 1)
out=$(ctl --table "$ops" dead purge --all 2>>"$work/err") &&
    [ "$out" = "would purge ${n#*:} dead message(s); nothing deleted: add --yes to delete them" ] || { echo "$out" >>"$work/err"; ok=1; }
out=$(ctl --table "$ops" dead purge --all --topic webhook.deliver --json 2>>"$work/err") && [ "$out" = '{"would_purge":2}' ] || ok=1
out=$(ctl --inbox --table "$iops" dead purge --all --source stripe --json 2>>"$work/err") && [ "$out" = '{"would_purge":4}' ] || { echo "inbox: $out" >>"$work/err"; ok=1; }
[ "$(ctl --table "$ops" stats --json | grep -o '"dead":[0-9]*' | head -n 1)" = "$n" ] || ok=1
status OBXCTL-PURGE-YES "--yes without dead purge --all: exit 1" 1 ctl --table "$ops" dead replay --all --yes
out=$(ctl --table "$ops" dead purge --all --yes 2>>"$work/err") && [ "$out" = "purged ${n#*:} dead message(s)" ] || ok=1
result $ok OBXCTL-PURGE-GUARD "dead purge --all without --yes deletes nothing and says how many it would (inbox too); with --yes it purges" "$work/err"

# Guards: deploy --dry-run and schema without --dialect print the connected database's DDL.
ok=0
: >"$work/err"
ctl --table "Dry$table" deploy --dry-run >"$work/dry" 2>>"$work/err" || ok=1
ctl --table "Dry$table" schema --dialect "$dialect" | cmp -s - "$work/dry" || { echo "deploy --dry-run differs" >>"$work/err"; ok=1; }
ctl --table "Dry$table" schema | cmp -s - "$work/dry" || { echo "schema differs" >>"$work/err"; ok=1; }
ctl --inbox --table "Dry$inbox" schema | cmp -s - <(ctl --inbox --table "Dry$inbox" schema --dialect "$dialect") || ok=1
ctl --table "Dry$table" stats >/dev/null 2>&1
[ $? = 2 ] || { echo "deploy --dry-run created the table" >>"$work/err"; ok=1; }
result $ok OBXCTL-DEPLOY-DRY-RUN "deploy --dry-run (and schema without --dialect) print the connected database's DDL and create nothing" "$work/err"

# Metrics: obxctl's per-topic figures add up to the library's gauges, one
# spelling of in_flight; the inbox's ready gauge also counts expired leases.
ok=0
: >"$work/err"
gauge() { grep "^$1{" "$2" | awk '{print $2}'; }
topics() { grep "^$1{.*status=\"$2\"}" "$3" | awk '{s += $2} END {print s + 0}'; }
ctl --table "$table" metrics >"$work/m1" 2>>"$work/err" && ctl --inbox --table "$inbox" metrics >"$work/m2" 2>>"$work/err" || ok=1
grep -q 'in-flight' "$work/m1" "$work/m2" && { echo "in-flight spelled with a hyphen" >>"$work/err"; ok=1; }
for st in ready scheduled in_flight dead; do
    [ "$(gauge "obx_queue_${st}_messages" "$work/m1")" = "$(topics obx_queue_topic_messages "$st" "$work/m1")" ] ||
        { echo "outbox $st: $(gauge "obx_queue_${st}_messages" "$work/m1") vs $(topics obx_queue_topic_messages "$st" "$work/m1")" >>"$work/err"; ok=1; }
done
for st in scheduled in_flight dead; do
    [ "$(gauge "ibx_queue_${st}_messages" "$work/m2")" = "$(topics ibx_queue_topic_messages "$st" "$work/m2")" ] ||
        { echo "inbox $st: $(gauge "ibx_queue_${st}_messages" "$work/m2") vs $(topics ibx_queue_topic_messages "$st" "$work/m2")" >>"$work/err"; ok=1; }
done
exp=$(gauge ibx_queue_expired_leases "$work/m2")
[ "$(gauge ibx_queue_ready_messages "$work/m2")" = "$(($(topics ibx_queue_topic_messages ready "$work/m2") + exp))" ] || ok=1
[ "$(gauge obx_queue_expired_leases "$work/m1")" = "$(ctl --table "$table" stats --json | grep -o '"expired_leases":[0-9]*' | cut -d: -f2)" ] &&
    [ "$exp" = "$(ctl --inbox --table "$inbox" stats --json | grep -o '"expired_leases":[0-9]*' | cut -d: -f2)" ] ||
    { echo "expired leases differ from stats" >>"$work/err"; ok=1; }
result $ok OBXCTL-METRICS-EQUAL "metrics: per-topic figures add up to the library's gauges (status=\"in_flight\"); expired leases as stats" "$work/err"

# Tools go through the library: obxctl's own SQL only reads (counts per
# topic, listings, the table's kind); every change is a library call.
grep -nE '"[^"]*\b(INSERT|UPDATE|DELETE|MERGE|TRUNCATE|DROP|ALTER|CREATE)\b' "$here/../tools/obxctl.c" >"$work/err"
[ ! -s "$work/err" ]
result $? OBXCTL-NO-DML "tools/obxctl.c has no DML or DDL of its own (changes are library calls)" "$work/err"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]

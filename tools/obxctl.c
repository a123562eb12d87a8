/* obxctl: look inside and operate an obx.h outbox or an ibx.h inbox, over any
 * ODBC connection string or DSN. `obxctl --help` lists the commands,
 * `obxctl COMMAND --help` explains one; the exit codes are in usage_text.
 *
 * Rule for maintainers: tools and callbacks go through the library. A tool
 * never re-implements a library operation in its own SQL: every change
 * (enqueue, cancel and dead move, run, dead replay and purge, reap,
 * cleanup, deploy) is a library call, so it
 * has the library's semantics (replay resets the start count, purge works
 * in bounded batches, ...) and its tests. obxctl's own SQL, on a second
 * connection, only reads what the library does not offer: counts per
 * status and topic, listings, table sizes, and the table's kind (checked
 * before any command reads or changes it: the other kind's statements
 * would compare the inbox's text statuses with the outbox's integers).
 * That SQL is written per dialect below for SQLite, PostgreSQL and MariaDB;
 * on SQL Server those reads say so (exit 5). tests/obxctl.sh checks that
 * this file holds no DML or DDL (OBXCTL-NO-DML). */
#define OBX_IMPLEMENTATION
#define IBX_IMPLEMENTATION
#include "../obx.h"
#include "../ibx.h"
#ifndef OBX_SQLITE3_API
#include <sql.h>
#include <sqlext.h>
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

enum { CTL_OK = 0, CTL_USAGE = 1, CTL_DB = 2, CTL_NOT_FOUND = 3, CTL_INTERNAL = 4, CTL_UNSUPPORTED = 5 };

static const char usage_text[] =
    "usage: obxctl [OPTIONS] COMMAND [ARGS]\n"
    "Look inside and operate an obx.h outbox (default) or an ibx.h inbox (--inbox).\n"
    "\n"
    "Commands:\n"
    "  stats                     counts per status and topic, ages, leases, size\n"
    "  list                      messages, oldest first or --newest (filters: --status --topic\n"
    "                            --correlation --key --tenant ...; --limit --offset)\n"
    "  show ID                   one message in full, why it waits (inbox: --source SOURCE ID)\n"
    "  cancel ID --reason TEXT   a ready or scheduled message to dead, the reason its last error\n"
    "  run ID                    a scheduled message (due time, backoff) due now\n"
    "  enqueue --topic T ...     enqueue one message (for testing)\n"
    "  dead list|replay|purge    the dead letters: list them, make them ready again, delete them\n"
    "  dead move ID --reason T   any message not done (in flight too) to dead\n"
    "  reap                      release expired leases\n"
    "  cleanup                   delete done messages older than 7 days (--older-than D)\n"
    "  schema [--dialect D]      print the DDL (default: the connected database's)\n"
    "  deploy [--dry-run]        create missing tables, upgrade old ones in place\n"
    "  upgrade --keys|--drop-old a table's explicit upgrade steps (MariaDB, PostgreSQL; see --help)\n"
    "  rewrite                   PostgreSQL: an older table into this release's column order\n"
    "  metrics                   gauges in the Prometheus text format\n"
    "\n"
    "Options for every command:\n"
    "  -c, --connect STRING      ODBC connection string (else $OBXCTL_CONNECTION)\n"
    "      --dsn NAME            a DSN of odbc.ini: the same as -c \"DSN=NAME;\"\n"
    "      --inbox               the table is an ibx.h inbox\n"
    "      --table NAME          default Outbox (inbox: Inbox)\n"
    "      --schema NAME         default dbo (inbox: infra); ignored by SQLite and MariaDB\n"
    "      --store NAME          the store label of metrics (default outbox / inbox)\n"
    "  -v, --verbose             the library's log lines on stderr\n"
    "  -h, --help                this text; `obxctl COMMAND --help` for one command\n"
    "      --version             print the version\n"
    "\n"
    "Exit status: 0 ok; 1 usage error (bad command, option or argument); 2 database\n"
    "error (connecting, SQL, a missing table); 3 not found (show, dead replay|purge of\n"
    "an id that is not there); 4 internal error (out of memory); 5 the command is\n"
    "not supported on this database. Errors are one line on stderr, naming the cause.\n";

typedef struct cmd_help {
    const char *name, *text;
} cmd_help;

static const cmd_help helps[] = {
    {"stats", "usage: obxctl stats [--json] [--watch SECONDS [--count N]]\n"
              "Messages per status (ready, scheduled: waiting for a due time, a backoff\n"
              "or an earlier message of its ordering key, in flight, done, dead; inbox\n"
              "also seen) and per topic; how long the oldest\n"
              "ready message has waited; when the next scheduled one is due; when the\n"
              "first lease ends and how many leases have expired; rows and approximate\n"
              "table size. --json prints one JSON object; --watch repeats every SECONDS\n"
              "(--count N times, else until interrupted).\n"},
    {"list", "usage: obxctl list [--status S] [--topic T] [--newer-than D] [--older-than D]\n"
             "                   [--correlation C] [--key K] [--tenant T]\n"
             "                   [--newest] [--limit N] [--offset N] [--json]\n"
             "Messages ordered by creation (inbox: first seen), oldest first (--newest:\n"
             "newest first), at most N (default 50) after skipping --offset N.\n"
             "S: ready, scheduled, in-flight, done, dead (inbox also seen). D: a duration\n"
             "such as 90s, 15m, 12h, 7d. Find by correlation id (--correlation), ordering\n"
             "key (--key; both outbox only) or tenant id (--tenant). Rows show their\n"
             "priority (PRIO, -5..5).\n"},
    {"show", "usage: obxctl show [--full] [--json] ID         (outbox: the work item id)\n"
             "       obxctl --inbox show [--full] [--json] --source SOURCE MESSAGE_ID\n"
             "Every field of one message and why it is in its state, by the database's\n"
             "clock: its ordering key and, when parked, the earlier message of the key it\n"
             "waits for; its starts (claims without an outcome: 2 and more after a crash\n"
             "or an expired lease, Dead at the store's max_starts); priority, expiry, tenant,\n"
             "aggregate, headers. The payload is printed with control characters escaped\n"
             "and cut after 1024 bytes unless --full. Exit 3 when there is none.\n"},
    {"cancel", "usage: obxctl cancel --reason TEXT [--json] ID\n"
               "       obxctl --inbox cancel --reason TEXT [--json] --source SOURCE MESSAGE_ID\n"
               "Move a ready or scheduled message (parked ones too) to dead, TEXT its last\n"
               "error: it is never handled unless replayed (dead replay). Later messages of\n"
               "its ordering key move on. Exit 3 when it is not there or not waiting (in\n"
               "flight: dead move). The library's obx_dead_move / ibx_dead_move.\n"},
    {"run", "usage: obxctl run [--json] ID\n"
            "       obxctl --inbox run [--json] --source SOURCE MESSAGE_ID\n"
            "Make a message that waits for its due time or a retry's backoff due now (by\n"
            "the database's clock): the next claim takes it. One parked behind an earlier\n"
            "message of its ordering key keeps waiting for that one (said, exit 3), as do\n"
            "messages in flight, done or dead (exit 3); one due already: exit 0, nothing\n"
            "changed. The library's obx_run_now / ibx_run_now.\n"},
    {"enqueue", "usage: obxctl enqueue --topic T --payload TEXT [--key K] [--correlation C]\n"
                "                      [--tenant T] [--due-in D] [--json]\n"
                "       obxctl --inbox enqueue --topic T --payload TEXT --source S [--tenant T]\n"
                "                      [--due-in D] [--json] MESSAGE_ID\n"
                "Enqueue one message through the library (for testing a handler or a route),\n"
                "due now or in D (by the database's clock). Prints its id (inbox: source and\n"
                "message id; a message id already there is the library's redelivery).\n"},
    {"dead", "usage: obxctl dead list [--topic T] [--limit N] [--json]\n"
             "       obxctl dead replay [--json] (ID... | --all [--topic T])\n"
             "       obxctl dead purge [--json] (ID... | --all [--topic T] [--yes])\n"
             "       obxctl dead move --reason TEXT [--json] ID\n"
             "       (inbox: --source SOURCE MESSAGE_ID..., or --all [--source SOURCE];\n"
             "        dead list --source SOURCE)\n"
             "list: the dead messages with their last error. replay: make them ready now\n"
             "with their attempts and start count reset to 0 (the last error is kept).\n"
             "purge: delete them; purge --all without --yes deletes nothing and says how\n"
             "many it would delete. Both are the library's dead replay and purge. --json\n"
             "prints {\"replayed\":N}, {\"purged\":N} or {\"would_purge\":N}. Exit 3 when an\n"
             "ID is not a dead message (the others are still done).\n"
             "move: any message not done or dead, in flight too (its holder's outcome then\n"
             "changes nothing), to dead with TEXT as its last error (obx_dead_move).\n"},
    {"reap", "usage: obxctl reap\n"
             "Release every expired lease (a worker died holding it): the messages become\n"
             "claimable again. A dispatcher does this itself every reap interval.\n"},
    {"cleanup", "usage: obxctl cleanup [--older-than D]\n"
                "Delete done messages older than D (default 7d, outbox and inbox alike), in\n"
                "batches of 1000 rows. Dead messages are dead purge's.\n"},
    {"schema", "usage: obxctl schema [--dialect sqlite|postgresql|mariadb|sqlserver]\n"
               "Print the DDL that deploy runs, for --table and --schema: for the connected\n"
               "database, or for --dialect D (then no database is needed).\n"},
    {"deploy", "usage: obxctl deploy [--dry-run]\n"
               "Create the tables, indexes and (where the dialect has them) triggers and\n"
               "procedures that are missing, and upgrade a table an older release deployed\n"
               "in place (new columns added, rows kept). Idempotent. --dry-run changes\n"
               "nothing: it prints the DDL for the connected database (each statement\n"
               "creates only what is missing; an older table's new columns are not shown).\n"},
    {"upgrade", "usage: obxctl upgrade [--keys] [--drop-old]\n"
                "The explicit steps of the upgrade to storage layout 2 on a table an older\n"
                "release created (after deploy; MariaDB, and PostgreSQL's --drop-old;\n"
                "elsewhere nothing to do).\n"
                "--keys converts its keys to the UUID type: a copy of the table during\n"
                "which reads go on and writers wait (about 30 s per million rows; run it\n"
                "in a quiet window or after cleanup). --drop-old drops the indexes this\n"
                "release no longer reads (instant): MariaDB layout 1's that lead with\n"
                "Status (the previous release's claims fail after it unless its own\n"
                "deploy puts them back), PostgreSQL's IX_<table>_Ready (the previous\n"
                "release's stats and wake scan without it); run it once every program\n"
                "runs this release. Each step done is skipped:\n"
                "an interrupted run resumes. The library's obx_store_upgrade /\n"
                "ibx_store_upgrade; docs/UPGRADING.md says what each step locks.\n"},
    {"rewrite", "usage: obxctl rewrite\n"
                "PostgreSQL only: rewrite a table an older release created into this\n"
                "release's column order (fixed-width hot columns first: a little less\n"
                "server CPU per message). One transaction: a new table, the rows copied,\n"
                "the old one dropped, the new one renamed; its indexes, constraints,\n"
                "triggers, grants, owner and the functions returning its rows made again.\n"
                "Writers wait for all of it (docs/UPGRADING.md: seconds per 100,000 rows):\n"
                "a quiet window, or after a cleanup. Nothing changes when the table lock\n"
                "is not had within 10 s (exit 2), or a view or another table depends on\n"
                "it (exit 2). A table in this release's order: nothing to do (exit 0);\n"
                "other databases: exit 5. Deploy never rewrites. The library's\n"
                "obx_store_rewrite.\n"},
    {"metrics", "usage: obxctl metrics\n"
                "The queue gauges in the Prometheus text format (for node_exporter's textfile\n"
                "collector): the library's obx_queue_* gauges plus obx_queue_topic_messages\n"
                "per topic and status (ready, scheduled, in_flight, done, dead; inbox also\n"
                "seen), whose sums are the library's gauges (the inbox's ready gauge also\n"
                "counts expired leases: claimable again) (not on SQL Server). Counters and\n"
                "handler durations\n"
                "live in the process that dispatches: serve obx_metrics_text() from there.\n"},
    {NULL, NULL}};

/* A result of either header as an int (their codes are the same numbers). */
static int result_int(int result) { return result; }

/* ---- options ------------------------------------------------------------------ */

typedef struct opts {
    const char *command, *sub, *conn, *dsn, *table, *schema, *store, *dialect, *status, *topic;
    const char *source, *newer, *older, *reason, *correlation, *key, *tenant, *payload;
    const char *args[64];
    int nargs, inbox, json, full, all, verbose, help, version, limit, watch, count, offset, newest, yes, dry_run, keys, drop_old;
    int64_t due_in_ms;
    int64_t newer_ms, older_ms;
    const char *given[32];       /* the options given, to check them against the command */
    int ngiven;
} opts;

static opts o;
static char conn_buf[1024];

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 2, 3)))
#endif
static int fail(int code, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    char *p;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    for (p = line; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' '; /* one line, whatever the driver said */
    fprintf(stderr, "obxctl: %s\n", line);
    return code;
}

/* 90s, 15m, 12h, 7d, 500ms into milliseconds; -1 when malformed. */
static int64_t parse_duration(const char *text) {
    char *end;
    long long n;
    if (!text || !*text || *text < '0' || *text > '9') return -1;
    n = strtoll(text, &end, 10);
    if (n < 0 || n > 36500LL * 86400) return -1;
    if (strcmp(end, "ms") == 0) return n;
    if (strcmp(end, "s") == 0) return n * 1000;
    if (strcmp(end, "m") == 0) return n * 60000;
    if (strcmp(end, "h") == 0) return n * 3600000;
    if (strcmp(end, "d") == 0) return n * 86400000;
    return -1;
}

static int parse_int(const char *text, int lo, int hi, int *out) {
    char *end;
    long n;
    if (!text || !*text) return 0;
    n = strtol(text, &end, 10);
    if (*end || n < lo || n > hi) return 0;
    *out = (int)n;
    return 1;
}

/* Options with a value: the value is the next argument or after '='. */
static const char *const value_opts[] = {"connect", "dsn", "table", "schema", "store", "dialect", "status",
                                         "topic", "source", "newer-than", "older-than", "limit",
                                         "watch", "count", "offset", "reason", "correlation", "key",
                                         "tenant", "payload", "due-in", NULL};

static int set_value(const char *name, const char *v) {
    if (strcmp(name, "connect") == 0) o.conn = v;
    else if (strcmp(name, "dsn") == 0) o.dsn = v;
    else if (strcmp(name, "table") == 0) o.table = v;
    else if (strcmp(name, "schema") == 0) o.schema = v;
    else if (strcmp(name, "store") == 0) o.store = v;
    else if (strcmp(name, "dialect") == 0) o.dialect = v;
    else if (strcmp(name, "status") == 0) o.status = v;
    else if (strcmp(name, "topic") == 0) o.topic = v;
    else if (strcmp(name, "source") == 0) o.source = v;
    else if (strcmp(name, "reason") == 0) o.reason = v;
    else if (strcmp(name, "correlation") == 0) o.correlation = v;
    else if (strcmp(name, "key") == 0) o.key = v;
    else if (strcmp(name, "tenant") == 0) o.tenant = v;
    else if (strcmp(name, "payload") == 0) o.payload = v;
    else if (strcmp(name, "due-in") == 0) {
        if ((o.due_in_ms = parse_duration(v)) < 0)
            return fail(CTL_USAGE, "--due-in: '%s' is not a duration such as 90s, 15m, 12h, 7d", v);
    } else if (strcmp(name, "offset") == 0) {
        if (!parse_int(v, 0, 100000000, &o.offset))
            return fail(CTL_USAGE, "--offset: '%s' is not a number 0..100000000", v);
    }
    else if (strcmp(name, "newer-than") == 0) {
        if ((o.newer_ms = parse_duration(v)) < 0)
            return fail(CTL_USAGE, "--newer-than: '%s' is not a duration such as 90s, 15m, 12h, 7d", v);
    } else if (strcmp(name, "older-than") == 0) {
        o.older = v;
        if ((o.older_ms = parse_duration(v)) < 0)
            return fail(CTL_USAGE, "--older-than: '%s' is not a duration such as 90s, 15m, 12h, 7d", v);
    } else if (strcmp(name, "limit") == 0) {
        if (!parse_int(v, 1, 1000000, &o.limit)) return fail(CTL_USAGE, "--limit: '%s' is not a number 1..1000000", v);
    } else if (strcmp(name, "watch") == 0) {
        if (!parse_int(v, 1, 86400, &o.watch))
            return fail(CTL_USAGE, "--watch: '%s' is not a number of seconds 1..86400", v);
    } else if (strcmp(name, "count") == 0) {
        if (!parse_int(v, 1, 1000000, &o.count)) return fail(CTL_USAGE, "--count: '%s' is not a number 1..1000000", v);
    }
    return CTL_OK;
}

static int parse_args(int argc, char **argv) {
    int i, k;
    o.limit = 50;
    o.newer_ms = o.older_ms = -1;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *eq;
        char name[32];
        size_t len;
        if (a[0] != '-' || !a[1]) {
            if (!o.command) o.command = a;
            else if (strcmp(o.command, "dead") == 0 && !o.sub) o.sub = a;
            else if (o.nargs < 64) o.args[o.nargs++] = a;
            else return fail(CTL_USAGE, "too many arguments (at most 64)");
            continue;
        }
        if (strcmp(a, "-c") == 0) a = "--connect";
        else if (strcmp(a, "-h") == 0) a = "--help";
        else if (strcmp(a, "-v") == 0) a = "--verbose";
        if (a[1] != '-') return fail(CTL_USAGE, "unknown option '%s' (obxctl --help)", argv[i]);
        a += 2;
        eq = strchr(a, '=');
        len = eq ? (size_t)(eq - a) : strlen(a);
        if (len >= sizeof name) return fail(CTL_USAGE, "unknown option '%s' (obxctl --help)", argv[i]);
        memcpy(name, a, len);
        name[len] = '\0';
        if (o.ngiven < 32) o.given[o.ngiven++] = argv[i][1] == '-' ? argv[i] + 2 : a;
        for (k = 0; value_opts[k] && strcmp(value_opts[k], name) != 0; k++) {}
        if (value_opts[k]) {
            const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            int r;
            if (!v) return fail(CTL_USAGE, "option --%s needs a value", name);
            if ((r = set_value(name, v)) != CTL_OK) return r;
        } else if (eq) {
            return fail(CTL_USAGE, "option --%s takes no value", name);
        } else if (strcmp(name, "inbox") == 0) o.inbox = 1;
        else if (strcmp(name, "json") == 0) o.json = 1;
        else if (strcmp(name, "full") == 0) o.full = 1;
        else if (strcmp(name, "all") == 0) o.all = 1;
        else if (strcmp(name, "newest") == 0) o.newest = 1;
        else if (strcmp(name, "yes") == 0) o.yes = 1;
        else if (strcmp(name, "dry-run") == 0) o.dry_run = 1;
        else if (strcmp(name, "keys") == 0) o.keys = 1;
        else if (strcmp(name, "drop-old") == 0) o.drop_old = 1;
        else if (strcmp(name, "verbose") == 0) o.verbose = 1;
        else if (strcmp(name, "help") == 0) o.help = 1;
        else if (strcmp(name, "version") == 0) o.version = 1;
        else return fail(CTL_USAGE, "unknown option '%s' (obxctl --help)", argv[i]);
    }
    return CTL_OK;
}

/* The options each command honours, beside the global ones, and those it
 * honours on an inbox only. Any other is refused (exit 1): an option given
 * and silently ignored (a --source or --limit of a purge) does harm. */
typedef struct command_opt {
    const char *name, *both, *inbox;
} command_opt;

static const command_opt command_opts[] = {
    {"stats", " json watch count ", ""},
    {"list", " status topic newer-than older-than limit offset newest tenant correlation key json ", ""},
    {"show", " full json ", " source "},
    {"cancel", " reason json ", " source "},
    {"run", " json ", " source "},
    {"enqueue", " topic payload tenant due-in json correlation key ", " source "},
    {"dead list", " topic limit json ", " source "},
    {"dead replay", " all topic json ", " source "},
    {"dead purge", " all topic yes json ", " source "},
    {"dead move", " reason json ", " source "},
    {"reap", " ", ""},
    {"cleanup", " older-than ", ""},
    {"schema", " dialect ", ""},
    {"deploy", " dry-run ", ""},
    {"upgrade", " keys drop-old ", ""},
    {"rewrite", " ", ""},
    {"metrics", " ", ""},
    {NULL, NULL, NULL}};

static int check_options(void) {
    static const char global[] = " connect dsn inbox table schema store verbose help version ";
    const command_opt *cmd = NULL;
    char name[40], full[64];
    int i;
    if (strcmp(o.command, "dead") == 0) {
        if (!o.sub) return fail(CTL_USAGE, "dead: say list, replay, purge or move (obxctl dead --help)");
        if (strcmp(o.sub, "list") != 0 && strcmp(o.sub, "replay") != 0 && strcmp(o.sub, "purge") != 0 &&
            strcmp(o.sub, "move") != 0)
            return fail(CTL_USAGE, "dead: '%s' is not list, replay, purge or move", o.sub);
        snprintf(full, sizeof full, "dead %s", o.sub);
    } else snprintf(full, sizeof full, "%s", o.command);
    for (i = 0; command_opts[i].name; i++)
        if (strcmp(command_opts[i].name, full) == 0) cmd = &command_opts[i];
    if (!cmd) return fail(CTL_USAGE, "unknown command '%s' (obxctl --help)", o.command);
    for (i = 0; i < o.ngiven; i++) {
        size_t len = strcspn(o.given[i], "=");
        if (len > 30) len = 30;
        snprintf(name, sizeof name, " %.*s ", (int)len, o.given[i]);
        if (strstr(global, name) || strstr(cmd->both, name) || (o.inbox && strstr(cmd->inbox, name))) continue;
        if (strstr(cmd->inbox, name))
            return fail(CTL_USAGE, "%s: option --%.*s applies to an inbox only (--inbox)", full, (int)len,
                        o.given[i]);
        return fail(CTL_USAGE, "%s: option --%.*s does not apply (obxctl %s --help)", full, (int)len, o.given[i],
                    o.command);
    }
    return CTL_OK;
}

/* ---- output helpers -------------------------------------------------------------- */

/* Length of a valid UTF-8 sequence at p that is not a C1 control, else 0
 * (overlong forms, surrogates and code points past U+10FFFF are not valid). */
static size_t utf8_len(const unsigned char *p, size_t left) {
    size_t n, i;
    if (*p < 0xc2 || *p > 0xf4) return 0;
    n = *p >= 0xf0 ? 4 : *p >= 0xe0 ? 3 : 2;
    if (n > left) return 0;
    for (i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if (p[0] == 0xc2 && p[1] < 0xa0) return 0; /* U+0080..U+009F: terminal controls */
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) || (p[0] == 0xf0 && p[1] < 0x90) ||
        (p[0] == 0xf4 && p[1] >= 0x90))
        return 0;
    return n;
}

/* A string in JSON, or null: always valid UTF-8 (what is not becomes
 * U+FFFD), so a parser takes it whatever the column held. */
static void json_str(FILE *f, const char *s) {
    const unsigned char *p;
    size_t n;
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p == '\r') fputs("\\r", f);
        else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\u%04x", *p);
        else if (*p < 0x80) fputc(*p, f);
        else if ((n = utf8_len(p, 4)) > 0) { /* the NUL ends a sequence before 4 */
            fwrite(p, 1, n, f);
            p += n - 1;
        } else if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0) {
            fprintf(f, "\\u%04x", p[1]); /* a C1 control */
            p++;
        } else fputs("\\ufffd", f); /* not UTF-8: a SQLite text, or a cut column */
    }
    fputc('"', f);
}

/* Text safe for a terminal: control characters, backslashes and invalid
 * UTF-8 escaped (\n, \t, \\, \xNN); at most `max` input bytes unless 0.
 * A cut is said: in a table's cell (`cell`) by "...", else with how much
 * --full would show. */
static void safe_text(FILE *f, const char *s, size_t len, size_t max, int cell) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, n, shown = max && len > max ? max : len;
    while (i < shown) {
        if (p[i] == '\\') fputs("\\\\", f);
        else if (p[i] == '\n') fputs("\\n", f);
        else if (p[i] == '\t') fputs("\\t", f);
        else if (p[i] == '\r') fputs("\\r", f);
        else if (p[i] >= 0x20 && p[i] < 0x7f) fputc(p[i], f);
        else if ((n = utf8_len(p + i, len - i)) > 0) {
            fwrite(p + i, 1, n, f);
            i += n;
            continue;
        } else fprintf(f, "\\x%02x", p[i]);
        i++;
    }
    if (shown < len && cell) fputs("...", f);
    else if (shown < len)
        fprintf(f, " ... [cut: %lu more bytes; --full shows all]", (unsigned long)(len - shown));
}

/* UTC time "2026-11-26 09:00:01.123", or "-" for 0. */
static const char *utc(int64_t ms, char out[32]) {
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (ms <= 0) return strcpy(out, "-");
    if (!gmtime_r(&t, &tm)) return strcpy(out, "?");
    strftime(out, 32, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(out + strlen(out), 12, ".%03d", (int)(ms % 1000));
    return out;
}

/* A duration for people: 850ms, 12.3s, 4.5m, 2.0h, 3.1d. */
static const char *human_ms(int64_t ms, char out[32]) {
    double v = (double)(ms < 0 ? -ms : ms);
    const char *sign = ms < 0 ? "-" : "";
    if (v < 1000) snprintf(out, 32, "%s%.0fms", sign, v);
    else if (v < 60000) snprintf(out, 32, "%s%.1fs", sign, v / 1000);
    else if (v < 3600000) snprintf(out, 32, "%s%.1fm", sign, v / 60000);
    else if (v < 86400000) snprintf(out, 32, "%s%.1fh", sign, v / 3600000);
    else snprintf(out, 32, "%s%.1fd", sign, v / 86400000);
    return out;
}

static const char *human_bytes(int64_t n, char out[32]) {
    if (n < 0) return strcpy(out, "unknown");
    if (n < 10240) snprintf(out, 32, "%lld B", (long long)n);
    else if (n < 10485760) snprintf(out, 32, "%lld KiB", (long long)(n / 1024));
    else snprintf(out, 32, "%lld MiB", (long long)(n / 1048576));
    return out;
}

/* ---- the store (the library's connection) ------------------------------------------ */

typedef struct ctl {
    obx_store *ob;
    ibx_store *ib;
    obx_dialect dialect;
    char table[72], schema[72];
#ifdef OBX_SQLITE3_API
    sqlite3 *dbc;
#else
    SQLHENV env;
    SQLHDBC dbc;
#endif
} ctl;

static int exit_for(int result) {
    switch (result) {
    case OBX_OK: case OBX_EMPTY: return CTL_OK;
    case OBX_ERR_INVALID_ARG: case OBX_ERR_OUT_OF_RANGE: return CTL_USAGE;
    case OBX_ERR_NOT_FOUND: return CTL_NOT_FOUND;
    case OBX_ERR_NO_MEMORY: return CTL_INTERNAL;
    case OBX_ERR_UNSUPPORTED: return CTL_UNSUPPORTED;
    default: return CTL_DB;
    }
}

static const char *store_error(const ctl *c) {
    return c->ib ? ibx_store_last_error(c->ib)->message : obx_store_last_error(c->ob)->message;
}

static int lib_fail(const ctl *c, const char *what, int result) {
    return fail(exit_for(result), "%s: %s (%s)", what, store_error(c),
                c->ib ? ibx_result_str((ibx_result)result) : obx_result_str((obx_result)result));
}

static const char *connection(void) {
    if (o.conn && o.dsn) return NULL;
    if (o.dsn) {
        snprintf(conn_buf, sizeof conn_buf, "DSN=%s;", o.dsn);
        return conn_buf;
    }
    return o.conn ? o.conn : getenv("OBXCTL_CONNECTION");
}

static int open_store(ctl *c, int deploy) {
    const char *conn = connection();
    int r;
    memset(c, 0, sizeof *c);
    if (o.conn && o.dsn) return fail(CTL_USAGE, "give either --connect or --dsn, not both");
#ifdef OBX_SQLITE3_API
    if (o.dsn) /* a DSN is read by a driver manager, and this build has none */
        return fail(CTL_USAGE, "--dsn: this obxctl reaches SQLite through its C API (OBX_SQLITE3_API) and reads no "
                               "odbc.ini: give -c with the database file");
#endif
    if (!conn || !*conn)
        return fail(CTL_USAGE, "no database: give -c CONNECTION_STRING, --dsn NAME or set OBXCTL_CONNECTION");
    if (o.inbox) {
        ibx_store_desc d;
        memset(&d, 0, sizeof d);
        d.connection_string = conn;
        d.table = o.table;
        d.schema = o.schema;
        d.store_id = o.store;
        d.deploy_schema = deploy;
        d.hooks.logger.min_level = o.verbose ? IBX_LOG_INFO : IBX_LOG_OFF;
        r = ibx_store_open(&d, &c->ib);
        if (!c->ib) return fail(CTL_INTERNAL, "out of memory");
    } else {
        obx_store_desc d;
        memset(&d, 0, sizeof d);
        d.connection_string = conn;
        d.table = o.table;
        d.schema = o.schema;
        d.store_id = o.store;
        d.deploy_schema = deploy;
        d.hooks.logger.min_level = o.verbose ? OBX_LOG_INFO : OBX_LOG_OFF;
        r = obx_store_open(&d, &c->ob);
        if (!c->ob) return fail(CTL_INTERNAL, "out of memory");
    }
    if (r != OBX_OK) { /* named by the command run, as every other error */
        char what[96];
        snprintf(what, sizeof what, "%s%s%s: cannot open the store", o.command, o.sub ? " " : "", o.sub ? o.sub : "");
        return lib_fail(c, what, r);
    }
    if (c->ib) {
        ibx_store_info info;
        ibx_store_get_info(c->ib, &info);
        c->dialect = (obx_dialect)info.dialect;
    } else {
        obx_store_info info;
        obx_store_get_info(c->ob, &info);
        c->dialect = info.dialect;
    }
    snprintf(c->table, sizeof c->table, "%s", o.table ? o.table : o.inbox ? "Inbox" : "Outbox");
    snprintf(c->schema, sizeof c->schema, "%s", o.schema ? o.schema : o.inbox ? "infra" : "dbo");
    return CTL_OK;
}

static void sql_disconnect(ctl *c);

static void close_store(ctl *c) {
    sql_disconnect(c);
    ibx_store_close(c->ib);
    obx_store_close(c->ob);
    memset(c, 0, sizeof *c);
}

/* ---- obxctl's own SQL: a second connection ------------------------------------------- */

static char db_err[1024];

#ifdef OBX_SQLITE3_API
/* OBX_SQLITE3_API: the same reads through SQLite's C API on a second
 * sqlite3 handle (no driver manager in this build). The connection string
 * names the file as the library reads it: a file name, a "file:" URI, or
 * Database= among ODBC-style pairs. A statement is prepared and bound by
 * sql_run; sql_next steps it. */
typedef sqlite3_stmt *ctl_stmt;

static void sql_disconnect(ctl *c) {
    if (c->dbc) sqlite3_close_v2(c->dbc);
    c->dbc = NULL;
}

static int sql_connect(ctl *c) {
    const char *conn = connection(), *p = conn;
    char file[1024];
    int rc;
    if (strncmp(conn, "file:", 5) != 0 && strchr(conn, '=')) { /* Database= among the pairs */
        file[0] = '\0';
        while (p && *p) {
            if (strncasecmp(p, "Database=", 9) == 0) {
                snprintf(file, sizeof file, "%.*s", (int)strcspn(p + 9, ";"), p + 9);
                break;
            }
            p = strchr(p, ';');
            if (p) p++;
        }
        conn = file;
    }
    rc = sqlite3_open_v2(conn, &c->dbc, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, NULL);
    if (rc != SQLITE_OK) {
        snprintf(db_err, sizeof db_err, "connect: %s", c->dbc ? sqlite3_errmsg(c->dbc) : sqlite3_errstr(rc));
        sql_disconnect(c);
        return fail(CTL_DB, "%s", db_err);
    }
    sqlite3_busy_timeout(c->dbc, 5000);
    return CTL_OK;
}

static ctl_stmt sql_run(ctl *c, const char *sql, const char *const *params, int n) {
    sqlite3_stmt *st = NULL;
    int i;
    if (sqlite3_prepare_v2(c->dbc, sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(db_err, sizeof db_err, "query: %s", sqlite3_errmsg(c->dbc));
        sqlite3_finalize(st);
        return NULL;
    }
    for (i = 0; i < n && i < 8; i++)
        if (sqlite3_bind_text(st, i + 1, params[i], -1, SQLITE_TRANSIENT) != SQLITE_OK) {
            snprintf(db_err, sizeof db_err, "bind: %s", sqlite3_errmsg(c->dbc));
            sqlite3_finalize(st);
            return NULL;
        }
    return st;
}

static int sql_next(ctl_stmt st) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) return 1;
    if (rc == SQLITE_DONE) return 0;
    snprintf(db_err, sizeof db_err, "fetch: %s", sqlite3_errmsg(sqlite3_db_handle(st)));
    return -1;
}

static int64_t sql_i64(ctl_stmt st, int col, int *is_null) {
    int null = sqlite3_column_type(st, col - 1) == SQLITE_NULL;
    if (is_null) *is_null = null;
    return null ? 0 : (int64_t)sqlite3_column_int64(st, col - 1);
}

static const char *sql_text(ctl_stmt st, int col, char *out, size_t size) {
    const unsigned char *t = sqlite3_column_text(st, col - 1);
    size_t n = t ? (size_t)sqlite3_column_bytes(st, col - 1) : 0;
    if (size == 0) return out;
    if (n >= size) n = size - 1; /* cut as SQLGetData cuts */
    if (n) memcpy(out, t, n);
    out[n] = '\0';
    return out;
}

static void sql_done(ctl_stmt st) { sqlite3_finalize(st); }

#else
static void diag(SQLSMALLINT type, SQLHANDLE h, const char *what) {
    SQLCHAR state[6], msg[512];
    SQLINTEGER native;
    SQLSMALLINT len;
    size_t used;
    SQLSMALLINT i;
    snprintf(db_err, sizeof db_err, "%s", what);
    for (i = 1; i <= 3; i++) {
        if (!SQL_SUCCEEDED(SQLGetDiagRec(type, h, i, state, &native, msg, (SQLSMALLINT)sizeof msg, &len))) break;
        used = strlen(db_err);
        snprintf(db_err + used, sizeof db_err - used, "%s[%s] %s", i == 1 ? ": " : " | ", (char *)state,
                 (char *)msg);
    }
}

typedef SQLHSTMT ctl_stmt;

static void sql_done(ctl_stmt st) { SQLFreeHandle(SQL_HANDLE_STMT, st); }

static void sql_disconnect(ctl *c) {
    if (c->dbc) {
        SQLDisconnect(c->dbc);
        SQLFreeHandle(SQL_HANDLE_DBC, c->dbc);
    }
    if (c->env) SQLFreeHandle(SQL_HANDLE_ENV, c->env);
}

static int sql_connect(ctl *c) {
    SQLRETURN rc;
    const char *conn = connection();
    if (SQLAllocHandle(SQL_HANDLE_ENV, SQL_NULL_HANDLE, &c->env) != SQL_SUCCESS ||
        !SQL_SUCCEEDED(SQLSetEnvAttr(c->env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER)SQL_OV_ODBC3, 0)) ||
        !SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_DBC, c->env, &c->dbc)))
        return fail(CTL_INTERNAL, "cannot allocate ODBC handles");
    rc = SQLDriverConnect(c->dbc, NULL, (SQLCHAR *)(uintptr_t)conn, SQL_NTS, NULL, 0, NULL, SQL_DRIVER_NOPROMPT);
    if (!SQL_SUCCEEDED(rc)) {
        diag(SQL_HANDLE_DBC, c->dbc, "connect");
        SQLFreeHandle(SQL_HANDLE_DBC, c->dbc);
        c->dbc = NULL;
        return fail(CTL_DB, "%s", db_err);
    }
    return CTL_OK;
}

/* Run `sql` with text parameters; the statement to fetch from, or NULL
 * (db_err says why). */
static ctl_stmt sql_run(ctl *c, const char *sql, const char *const *params, int n) {
    SQLHSTMT st = NULL;
    SQLRETURN rc;
    static SQLLEN ind[8];
    int i;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, c->dbc, &st))) {
        diag(SQL_HANDLE_DBC, c->dbc, "SQLAllocHandle");
        return NULL;
    }
    for (i = 0; i < n && i < 8; i++) {
        ind[i] = params[i] ? SQL_NTS : SQL_NULL_DATA;
        rc = SQLBindParameter(st, (SQLUSMALLINT)(i + 1), SQL_PARAM_INPUT, SQL_C_CHAR, SQL_VARCHAR, 255, 0,
                              (SQLPOINTER)(uintptr_t)params[i], 0, &ind[i]);
        if (!SQL_SUCCEEDED(rc)) {
            diag(SQL_HANDLE_STMT, st, "SQLBindParameter");
            sql_done(st);
            return NULL;
        }
    }
    rc = SQLExecDirect(st, (SQLCHAR *)(uintptr_t)sql, SQL_NTS);
    if (!SQL_SUCCEEDED(rc) && rc != SQL_NO_DATA) {
        diag(SQL_HANDLE_STMT, st, "query");
        sql_done(st);
        return NULL;
    }
    return st;
}

/* 1: a row; 0: no more; -1: error (db_err). */
static int sql_next(ctl_stmt st) {
    SQLRETURN rc = SQLFetch(st);
    if (rc == SQL_NO_DATA) return 0;
    if (SQL_SUCCEEDED(rc)) return 1;
    diag(SQL_HANDLE_STMT, st, "fetch");
    return -1;
}

static int64_t sql_i64(ctl_stmt st, int col, int *is_null) {
    SQLBIGINT v = 0;
    SQLLEN ind = 0;
    if (!SQL_SUCCEEDED(SQLGetData(st, (SQLUSMALLINT)col, SQL_C_SBIGINT, &v, sizeof v, &ind)) ||
        ind == SQL_NULL_DATA) {
        if (is_null) *is_null = 1;
        return 0;
    }
    if (is_null) *is_null = 0;
    return (int64_t)v;
}

/* A column as text into out (cut to size); "" for NULL. */
static const char *sql_text(ctl_stmt st, int col, char *out, size_t size) {
    SQLLEN ind = 0;
    out[0] = '\0';
    if (!SQL_SUCCEEDED(SQLGetData(st, (SQLUSMALLINT)col, SQL_C_CHAR, out, (SQLLEN)size, &ind)) ||
        ind == SQL_NULL_DATA)
        out[0] = '\0';
    return out;
}

#endif /* OBX_SQLITE3_API */

/* ---- SQL per dialect -------------------------------------------------------------------- */

typedef struct dia {
    char qo, qc;
    const char *now_ms;          /* the database clock in Unix ms */
    const char *ms;              /* a time column (%s) in Unix ms */
    const char *now;             /* the database clock in the column type */
    const char *bytes;           /* the size of a text column (%s) in bytes */
    const char *id_param;        /* an id parameter */
    const char *size_sql;        /* table size in bytes; parameter: table (or qualified) name */
    const char *id_text;         /* an id column (%s) as lower-case text */
} dia;

static const dia dia_sqlite = {'"', '"', "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)", "%s",
                               "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
                               "length(CAST(%s AS BLOB))", "?",
                               "SELECT SUM(pgsize) FROM dbstat WHERE name = ?", "%s"};
static const dia dia_pg = {'"', '"', "CAST(floor(EXTRACT(EPOCH FROM now()) * 1000) AS bigint)",
                           "CAST(floor(EXTRACT(EPOCH FROM %s) * 1000) AS bigint)", "now()", "octet_length(%s)",
                           "CAST(? AS uuid)", "SELECT pg_total_relation_size(CAST(? AS regclass))",
                           "CAST(%s AS text)"};
static const dia dia_my = {'`', '`',
                           "CAST(FLOOR(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) "
                           "/ 1000) AS SIGNED)",
                           "CAST(FLOOR(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', %s) / 1000) AS SIGNED)",
                           "UTC_TIMESTAMP(6)", "LENGTH(%s)", "?",
                           "SELECT DATA_LENGTH + INDEX_LENGTH FROM information_schema.TABLES "
                           "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", "%s"};

static const dia *dialect_sql(const ctl *c) {
    switch (c->dialect) {
    case OBX_DIALECT_SQLITE: return &dia_sqlite;
    case OBX_DIALECT_POSTGRESQL: return &dia_pg;
    case OBX_DIALECT_MARIADB: return &dia_my;
    default: return NULL;
    }
}

/* A growing SQL text. */
typedef struct sb {
    char text[4096];
    size_t len;
} sb;

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 2, 3)))
#endif
static void sb_add(sb *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (b->len < sizeof b->text) vsnprintf(b->text + b->len, sizeof b->text - b->len, fmt, ap);
    va_end(ap);
    b->len = strlen(b->text);
}

/* pattern with its one "%s" replaced by arg (the dialect's expressions). */
static const char *subst(char *out, size_t size, const char *pattern, const char *arg) {
    const char *at = strstr(pattern, "%s");
    if (!at) snprintf(out, size, "%s", pattern);
    else snprintf(out, size, "%.*s%s%s", (int)(at - pattern), pattern, arg, at + 2);
    return out;
}

/* A quoted column name. */
static const char *col(const dia *d, const char *name, char out[48]) {
    snprintf(out, 48, "%c%s%c", d->qo, name, d->qc);
    return out;
}

/* A time column in Unix ms. */
static const char *col_ms(const dia *d, const char *name, char out[160]) {
    char q[48];
    return subst(out, 160, d->ms, col(d, name, q));
}

static void add_table(const ctl *c, const dia *d, sb *b) {
    if (c->dialect == OBX_DIALECT_POSTGRESQL) sb_add(b, "%c%s%c.", d->qo, c->schema, d->qc);
    sb_add(b, "%c%s%c", d->qo, c->table, d->qc);
}

/* Each row's state word: ready, scheduled, in-flight, done, dead (inbox: seen).
 * In flight: leased, also when the lease has expired (until a reap or
 * another claim), as the library's in-flight gauge counts. */
static void add_state(const ctl *c, const dia *d, sb *b) {
    char na[160], st[48], lk[48];
    col_ms(d, "NextAttemptAt", na);
    col(d, "Status", st);
    col(d, "LockedUntil", lk);
    if (c->ib)
        sb_add(b, "CASE WHEN %s = 'Processing' AND %s IS NOT NULL THEN 'in-flight' "
                  "WHEN %s = 'Processing' AND %s <= %s THEN 'ready' WHEN %s = 'Processing' THEN 'scheduled' "
                  "WHEN %s = 'Done' THEN 'done' WHEN %s = 'Dead' THEN 'dead' ELSE 'seen' END",
               st, lk, st, na, d->now_ms, st, st, st);
    else
        sb_add(b, "CASE WHEN %s = 0 AND %s <= %s THEN 'ready' WHEN %s = 0 THEN 'scheduled' "
                  "WHEN %s = 1 THEN 'in-flight' WHEN %s = 2 THEN 'done' ELSE 'dead' END",
               st, na, d->now_ms, st, st, st);
}

static const dia *need_sql(ctl *c, int *code) {
    const dia *d = dialect_sql(c);
    *code = CTL_OK;
    if (!d) {
        *code = fail(CTL_UNSUPPORTED, "%s: not supported on %s yet (sqlite, postgresql, mariadb)", o.command,
                     obx_dialect_name(c->dialect));
        return NULL;
    }
    if (!c->dbc && (*code = sql_connect(c)) != CTL_OK) return NULL;
    return d;
}

/* ---- the table's kind ------------------------------------------------------------------- */

/* Columns of the first release of each kind that the other kind lacks. */
static const char *const kind_cols[2][3] = {{"Id", "RetryCount", "CreatedAt"}, {"Source", "FirstSeenUtc", "Attempt"}};

/* 1 when the table has the columns of `inbox`'s kind (a read of no rows),
 * else 0 with db_err saying why. */
static int has_kind(ctl *c, int inbox) {
    char qo = '"', qc = '"';
    ctl_stmt st;
    sb b;
    int i;
    /* SQLite reads a "name" that is no column as a string: backquotes there. */
    if (c->dialect == OBX_DIALECT_MARIADB || c->dialect == OBX_DIALECT_SQLITE) qo = qc = '`';
    else if (c->dialect == OBX_DIALECT_SQLSERVER) qo = '[', qc = ']';
    memset(&b, 0, sizeof b);
    sb_add(&b, "SELECT ");
    for (i = 0; i < 3; i++) sb_add(&b, "%s%c%s%c", i ? ", " : "", qo, kind_cols[inbox][i], qc);
    sb_add(&b, " FROM ");
    if (c->dialect == OBX_DIALECT_POSTGRESQL || c->dialect == OBX_DIALECT_SQLSERVER)
        sb_add(&b, "%c%s%c.", qo, c->schema, qc);
    sb_add(&b, "%c%s%c WHERE 1 = 0", qo, c->table, qc);
    if (!(st = sql_run(c, b.text, NULL, 0))) return 0;
    sql_done(st);
    return 1;
}

/* Before a command reads or changes the table: it must be of the kind
 * --inbox says. A table of the other kind is refused (exit 1, naming its
 * kind); one that cannot be read is a database error (exit 2), except for
 * deploy, which creates a missing table (and refuses a wrong one itself
 * only by this check). */
static int check_kind(ctl *c) {
    char own_err[sizeof db_err], what[64];
    int code;
    snprintf(what, sizeof what, "%s%s%s", o.command, o.sub ? " " : "", o.sub ? o.sub : "");
    if (!c->dbc && (code = sql_connect(c)) != CTL_OK) return code;
    if (has_kind(c, c->ib != NULL)) return CTL_OK;
    snprintf(own_err, sizeof own_err, "%s", db_err);
    if (has_kind(c, c->ib == NULL))
        return fail(CTL_USAGE, "%s: %s is an %s table, not an %s (%s)", what, c->table,
                    c->ib ? "outbox" : "inbox", c->ib ? "inbox" : "outbox", c->ib ? "drop --inbox" : "add --inbox");
    if (strcmp(o.command, "deploy") == 0) return CTL_OK;
    return fail(CTL_DB, "%s: no readable %s table %s%s%s (%s); to create it: obxctl%s%s%s%s%s deploy", what,
                c->ib ? "inbox" : "outbox", c->dialect == OBX_DIALECT_POSTGRESQL ? c->schema : "",
                c->dialect == OBX_DIALECT_POSTGRESQL ? "." : "", c->table, own_err, c->ib ? " --inbox" : "",
                o.schema ? " --schema " : "", o.schema ? o.schema : "", o.table ? " --table " : "",
                o.table ? o.table : "");
}

/* The database's clock in Unix ms (a message's state is read against it,
 * as the claim does); the host's where obxctl has no SQL for the dialect. */
static int64_t db_now(ctl *c) {
    const dia *d = dialect_sql(c);
    char q[256];
    ctl_stmt st;
    int64_t now = -1;
    if (d && (c->dbc || sql_connect(c) == CTL_OK)) {
        snprintf(q, sizeof q, "SELECT %s", d->now_ms);
        if ((st = sql_run(c, q, NULL, 0)) != NULL) {
            if (sql_next(st) == 1) now = sql_i64(st, 1, NULL);
            sql_done(st);
        }
    }
    if (now < 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    }
    return now;
}

/* ---- stats ------------------------------------------------------------------------------ */

#define N_STATES 6
static const char *const state_names[N_STATES] = {"ready", "scheduled", "in-flight", "done", "dead", "seen"};

/* Room for a topic, a source or a message id: 255 characters of up to 4 bytes. */
#define TEXT_MAX (4 * OBX_TOPIC_MAX + 1)

typedef struct topic_row {
    char topic[TEXT_MAX];
    int64_t n[N_STATES];
} topic_row;

typedef struct stats {
    int64_t now, n[N_STATES], total, oldest_ready, next_due, lease_end, expired, size;
    topic_row *topics;
    int ntopics;
} stats;

static int state_index(const char *s) {
    int i;
    for (i = 0; i < N_STATES; i++)
        if (strcmp(s, state_names[i]) == 0) return i;
    return -1;
}

static int stats_read(ctl *c, const dia *d, stats *s) {
    char na[160], lu[160], tq[48], lk[48], word[32], topic[TEXT_MAX];
    const char *params[1];
    sb b;
    ctl_stmt st;
    int r, k, isnull;
    memset(s, 0, sizeof *s);
    s->oldest_ready = s->next_due = s->lease_end = -1;
    memset(&b, 0, sizeof b);
    col_ms(d, "NextAttemptAt", na);
    col_ms(d, "LockedUntil", lu);
    /* A message parked behind an earlier one of its ordering key waits for
     * that one, not for a time: its NextAttemptAt (year 10000; MariaDB's
     * last microsecond of 9999, read here as OBX_TIME_MAX_MS) is no due. */
    sb_add(&b, "SELECT st, topic, COUNT(*), MIN(CASE WHEN na < 253402300799999 THEN na END), "
               "MIN(CASE WHEN ex = 0 THEN lu END), SUM(ex), MAX(nw) FROM (SELECT ");
    add_state(c, d, &b);
    sb_add(&b, " AS st, %s AS topic, %s AS na, %s AS lu, CASE WHEN %s IS NOT NULL AND %s < %s THEN 1 ELSE 0 END "
               "AS ex, %s AS nw FROM ", col(d, "Topic", tq), na, lu, col(d, "LockedUntil", lk), lu, d->now_ms,
           d->now_ms);
    add_table(c, d, &b);
    sb_add(&b, ") q GROUP BY st, topic ORDER BY topic, st");
    if (!(st = sql_run(c, b.text, NULL, 0))) return fail(CTL_DB, "stats: %s", db_err);
    while ((r = sql_next(st)) == 1) {
        int64_t n = sql_i64(st, 3, NULL), v;
        int i = state_index(sql_text(st, 1, word, sizeof word));
        sql_text(st, 2, topic, sizeof topic);
        if (i < 0) continue;
        s->now = sql_i64(st, 7, NULL);
        s->n[i] += n;
        s->total += n;
        v = sql_i64(st, 4, &isnull);
        if (i == 0 && !isnull && (s->oldest_ready < 0 || s->now - v > s->oldest_ready)) s->oldest_ready = s->now - v;
        if (i == 1 && !isnull && (s->next_due < 0 || v - s->now < s->next_due)) s->next_due = v - s->now;
        v = sql_i64(st, 5, &isnull);
        if (i == 2 && !isnull && (s->lease_end < 0 || v - s->now < s->lease_end)) s->lease_end = v - s->now;
        s->expired += sql_i64(st, 6, NULL);
        for (k = 0; k < s->ntopics && strcmp(s->topics[k].topic, topic) != 0; k++) {}
        if (k == s->ntopics) {
            topic_row *grown = (topic_row *)realloc(s->topics, (size_t)(k + 1) * sizeof *grown);
            if (!grown) {
                sql_done(st);
                return fail(CTL_INTERNAL, "out of memory");
            }
            s->topics = grown;
            memset(&s->topics[k], 0, sizeof s->topics[k]);
            snprintf(s->topics[k].topic, sizeof s->topics[k].topic, "%s", topic);
            s->ntopics++;
        }
        s->topics[k].n[i] += n;
    }
    sql_done(st);
    if (r < 0) return fail(CTL_DB, "stats: %s", db_err);
    /* Approximate size: not every database tells (SQLite without dbstat). */
    s->size = -1;
    if (c->dialect == OBX_DIALECT_POSTGRESQL) snprintf(topic, sizeof topic, "\"%s\".\"%s\"", c->schema, c->table);
    else snprintf(topic, sizeof topic, "%s", c->table);
    params[0] = topic;
    if ((st = sql_run(c, d->size_sql, params, 1)) != NULL) {
        if (sql_next(st) == 1) {
            s->size = sql_i64(st, 1, &isnull);
            if (isnull) s->size = -1;
        }
        sql_done(st);
    }
    return CTL_OK;
}

static void stats_json(const ctl *c, const stats *s) {
    static const char *const json_names[N_STATES] = {"ready", "scheduled", "in_flight", "done", "dead", "seen"};
    int i, k;
    printf("{\"kind\":\"%s\",\"table\":", c->ib ? "inbox" : "outbox");
    json_str(stdout, c->table);
    printf(",\"dialect\":\"%s\",\"now_ms\":%lld,\"messages\":{", obx_dialect_name(c->dialect), (long long)s->now);
    for (i = 0; i < N_STATES; i++)
        if (c->ib || i < 5) printf("%s\"%s\":%lld", i ? "," : "", json_names[i], (long long)s->n[i]);
    printf(",\"total\":%lld},\"oldest_ready_age_ms\":%lld,\"next_due_in_ms\":%lld,"
           "\"first_lease_ends_in_ms\":%lld,\"expired_leases\":%lld,\"size_bytes\":%lld,\"topics\":[",
           (long long)s->total, (long long)(s->oldest_ready < 0 ? 0 : s->oldest_ready),
           (long long)s->next_due, (long long)s->lease_end, (long long)s->expired, (long long)s->size);
    for (k = 0; k < s->ntopics; k++) {
        printf("%s{\"topic\":", k ? "," : "");
        json_str(stdout, s->topics[k].topic);
        for (i = 0; i < N_STATES; i++)
            if (c->ib || i < 5) printf(",\"%s\":%lld", json_names[i], (long long)s->topics[k].n[i]);
        printf("}");
    }
    printf("]}\n");
}

static void stats_table(const ctl *c, const stats *s) {
    static const char *const labels[N_STATES] = {"ready", "scheduled", "in flight", "done", "dead", "seen"};
    static const char *const heads[N_STATES] = {"READY", "SCHEDULED", "IN FLIGHT", "DONE", "DEAD", "SEEN"};
    char t1[32], t2[32];
    int i, k, states = c->ib ? N_STATES : 5;
    int w = 5;
    printf("%s %s%s%s (%s)\n\n", c->ib ? "inbox" : "outbox", c->dialect == OBX_DIALECT_POSTGRESQL ? c->schema : "",
           c->dialect == OBX_DIALECT_POSTGRESQL ? "." : "", c->table, obx_dialect_name(c->dialect));
    printf("%-10s %10s\n", "STATUS", "MESSAGES");
    for (i = 0; i < states; i++) {
        printf("%-10s %10lld", labels[i], (long long)s->n[i]);
        if (i == 0 && s->n[0] > 0) printf("  oldest waiting %s", human_ms(s->oldest_ready, t1));
        /* -1: none known (all parked behind their keys; no lease time) */
        if (i == 1 && s->n[1] > 0 && s->next_due >= 0) printf("  next due in %s", human_ms(s->next_due, t1));
        if (i == 2 && s->n[2] > 0 && s->lease_end >= 0) printf("  first lease ends in %s", human_ms(s->lease_end, t1));
        if (i == 2 && s->expired > 0) printf("  (%lld expired: obxctl reap)", (long long)s->expired);
        printf("\n");
    }
    printf("%-10s %10lld  table size %s\n", "total", (long long)s->total, human_bytes(s->size, t2));
    if (s->ntopics == 0) return;
    for (k = 0; k < s->ntopics; k++)
        if ((int)strlen(s->topics[k].topic) > w) w = (int)strlen(s->topics[k].topic);
    if (w > 60) w = 60;
    printf("\n%-*s", w, "TOPIC");
    for (i = 0; i < states; i++) printf(" %10s", heads[i]);
    printf("\n");
    for (k = 0; k < s->ntopics; k++) {
        int len = (int)strlen(s->topics[k].topic);
        safe_text(stdout, s->topics[k].topic, strlen(s->topics[k].topic), 60, 1);
        printf("%*s", len < w ? w - len : 0, "");
        for (i = 0; i < states; i++) printf(" %10lld", (long long)s->topics[k].n[i]);
        printf("\n");
    }
}

static int cmd_stats(ctl *c) {
    stats s;
    int code, round;
    const dia *d = need_sql(c, &code);
    if (!d) return code;
    for (round = 1;; round++) {
        if ((code = stats_read(c, d, &s)) != CTL_OK) return code;
        if (o.watch && isatty(STDOUT_FILENO)) printf("\033[H\033[2J");
        if (o.json) stats_json(c, &s);
        else stats_table(c, &s);
        free(s.topics);
        fflush(stdout);
        if (!o.watch || (o.count && round >= o.count)) return CTL_OK;
        if (!isatty(STDOUT_FILENO) && !o.json) printf("\n");
        sleep((unsigned)o.watch);
    }
}

/* ---- list, dead list ----------------------------------------------------------------------- */

static int cmd_list(ctl *c, const char *status, int with_error) {
    const char *params[6];
    char created[160], q1[48], q2[48], q3[48], q4[48], q5[48], sz[160];
    char v[4][TEXT_MAX], when[32], err[4096], k1[80], k2[80];
    int n = 0, r, rows = 0, code;
    ctl_stmt st;
    sb b;
    const dia *d = need_sql(c, &code);
    if (!d) return code;
    if (status && strcmp(status, "in_flight") == 0) status = "in-flight"; /* the metrics' spelling */
    if (status && state_index(status) < 0)
        return fail(CTL_USAGE, "--status: '%s' is not one of ready, scheduled, in-flight, done, dead, seen", status);
    if (status && !c->ib && strcmp(status, "seen") == 0)
        return fail(CTL_USAGE, "--status: 'seen' is an inbox status (--inbox)");
    if (c->ib && (o.correlation || o.key))
        return fail(CTL_USAGE, "list: --%s applies to an outbox only (the inbox has none)",
                    o.key ? "key" : "correlation");
    memset(&b, 0, sizeof b);
    col_ms(d, c->ib ? "FirstSeenUtc" : "CreatedAt", created);
    subst(sz, sizeof sz, d->bytes, col(d, "Payload", q1));
    /* The keys: inbox (source, message id), outbox (id, message id) as text. */
    if (c->ib) {
        col(d, "Source", k1);
        col(d, "MessageId", k2);
    } else {
        subst(k1, sizeof k1, d->id_text, col(d, "Id", q2));
        subst(k2, sizeof k2, d->id_text, col(d, "MessageId", q3));
    }
    sb_add(&b, "SELECT * FROM (SELECT %s AS k1, %s AS k2, ", k1, k2);
    add_state(c, d, &b);
    sb_add(&b, " AS st, %s AS topic, %s AS att, %s AS cr, %s AS sz, %s AS err, %s AS nw", col(d, "Topic", q4),
           col(d, c->ib ? "Attempt" : "RetryCount", q5), created, sz, col(d, "LastError", q1), d->now_ms);
    sb_add(&b, ", %s AS tn, %s AS pr", col(d, "TenantId", q1), col(d, "Priority", q2));
    if (!c->ib) sb_add(&b, ", %s AS cid, %s AS okey", col(d, "CorrelationId", q2), col(d, "OrderingKey", q3));
    sb_add(&b, " FROM ");
    add_table(c, d, &b);
    sb_add(&b, ") q WHERE 1 = 1");
    if (status) {
        sb_add(&b, " AND st = ?");
        params[n++] = status;
    }
    if (o.topic) {
        sb_add(&b, " AND topic = ?");
        params[n++] = o.topic;
    }
    if (o.source && c->ib) { /* dead list --source (check_options) */
        sb_add(&b, " AND k1 = ?");
        params[n++] = o.source;
    }
    if (o.tenant) {
        sb_add(&b, " AND tn = ?");
        params[n++] = o.tenant;
    }
    if (o.correlation) {
        sb_add(&b, " AND cid = ?");
        params[n++] = o.correlation;
    }
    if (o.key) {
        sb_add(&b, " AND okey = ?");
        params[n++] = o.key;
    }
    if (o.newer_ms >= 0) sb_add(&b, " AND cr >= nw - %lld", (long long)o.newer_ms);
    if (o.older_ms >= 0) sb_add(&b, " AND cr < nw - %lld", (long long)o.older_ms);
    if (o.newest) sb_add(&b, " ORDER BY cr DESC, k1 DESC, k2 DESC LIMIT %d OFFSET %d", o.limit, o.offset);
    else sb_add(&b, " ORDER BY cr, k1, k2 LIMIT %d OFFSET %d", o.limit, o.offset);
    if (!(st = sql_run(c, b.text, params, n))) return fail(CTL_DB, "list: %s", db_err);
    if (o.json) printf("[");
    else if (c->ib) printf("%-20s %-24s %-9s %-20s %8s  %-23s %8s %4s%s\n", "SOURCE", "MESSAGE ID", "STATUS", "TOPIC",
                          "ATTEMPTS", "FIRST SEEN (UTC)", "BYTES", "PRIO", with_error ? "  LAST ERROR" : "");
    else printf("%-36s %-9s %-20s %8s  %-23s %8s %4s%s\n", "ID", "STATUS", "TOPIC", "ATTEMPTS", "CREATED (UTC)",
                "BYTES", "PRIO", with_error ? "  LAST ERROR" : "");
    while ((r = sql_next(st)) == 1) {
        int64_t att = sql_i64(st, 5, NULL), cr = sql_i64(st, 6, NULL), bytes = sql_i64(st, 7, NULL);
        int64_t prio = sql_i64(st, 11, NULL); /* obx_new_message.priority (ibx_) */
        sql_text(st, 1, v[0], sizeof v[0]);
        sql_text(st, 2, v[1], sizeof v[1]);
        sql_text(st, 3, v[2], sizeof v[2]);
        sql_text(st, 4, v[3], sizeof v[3]);
        sql_text(st, 8, err, sizeof err);
        if (o.json) {
            printf("%s{\"%s\":", rows ? "," : "", c->ib ? "source" : "id");
            json_str(stdout, v[0]);
            printf(",\"message_id\":");
            json_str(stdout, v[1]);
            printf(",\"status\":\"%s\",\"topic\":", v[2]);
            json_str(stdout, v[3]);
            printf(",\"attempts\":%lld,\"created_ms\":%lld,\"bytes\":%lld", (long long)att, (long long)cr,
                   (long long)bytes);
            printf(",\"priority\":%lld", (long long)prio);
            if (with_error) {
                printf(",\"last_error\":");
                json_str(stdout, err[0] ? err : NULL);
            }
            printf("}");
        } else {
            if (c->ib) {
                safe_text(stdout, v[0], strlen(v[0]), 20, 1);
                printf("%*s ", 20 - (int)(strlen(v[0]) < 20 ? strlen(v[0]) : 20), "");
                safe_text(stdout, v[1], strlen(v[1]), 24, 1);
                printf("%*s ", 24 - (int)(strlen(v[1]) < 24 ? strlen(v[1]) : 24), "");
            } else printf("%-36s ", v[0]);
            printf("%-9s ", v[2]);
            safe_text(stdout, v[3], strlen(v[3]), 20, 1);
            printf("%*s %8lld  %-23s %8lld", 20 - (int)(strlen(v[3]) < 20 ? strlen(v[3]) : 20), "", (long long)att,
                   utc(cr, when), (long long)bytes);
            printf(" %4lld", (long long)prio);
            if (with_error) {
                printf("  ");
                safe_text(stdout, err, strlen(err), 60, 1);
            }
            printf("\n");
        }
        rows++;
    }
    sql_done(st);
    if (o.json) printf("]\n");
    if (r < 0) return fail(CTL_DB, "list: %s", db_err);
    return CTL_OK;
}

/* ---- show ----------------------------------------------------------------------------------- */

static void field(const char *name, const char *value) {
    printf("%-14s ", name);
    if (value) safe_text(stdout, value, strlen(value), 0, 0);
    else printf("-");
    printf("\n");
}

static void field_time(const char *name, int64_t ms) {
    char t[32];
    field(name, utc(ms, t));
}

static void show_payload(const char *payload, size_t len) {
    printf("%-14s %lu bytes\n  ", "payload", (unsigned long)len);
    safe_text(stdout, payload, len, o.full ? 0 : 1024, 0);
    printf("\n");
}

static void show_json_payload(const char *payload, size_t len) {
    char *copy;
    size_t n = o.full || len <= 1024 ? len : 1024;
    printf(",\"payload_bytes\":%lu,\"payload_cut\":%s,\"payload\":", (unsigned long)len, n < len ? "true" : "false");
    if (!(copy = (char *)malloc(n + 1))) {
        printf("null");
        return;
    }
    memcpy(copy, payload, n);
    copy[n] = '\0';
    json_str(stdout, copy);
    free(copy);
}

/* A message parked behind an earlier one of its ordering key: its next
 * attempt is past any time (OBX_TIME_MAX_MS + 1), it waits for no time. */
static int is_parked(const obx_message *m) {
    return m->status == OBX_STATUS_READY && m->next_attempt_ms > OBX_TIME_MAX_MS;
}

static const char *outbox_state(const obx_message *m, int64_t now) {
    static const char *const names[4] = {"ready", "in-flight", "done", "dead"};
    if (m->status == OBX_STATUS_READY && m->next_attempt_ms > now) return "scheduled";
    return (int)m->status >= 0 && (int)m->status < 4 ? names[m->status] : "unknown";
}

static const char *inbox_state(const ibx_message *m, int64_t now) {
    switch (m->status) {
    case IBX_STATUS_PROCESSING:
        if (m->locked_until_ms > 0) return "in-flight";
        return m->next_attempt_ms > now ? "scheduled" : "ready";
    case IBX_STATUS_DONE: return "done";
    case IBX_STATUS_DEAD: return "dead";
    default: return "seen";
    }
}

/* What a message waits for, in words: its due time, a retry's backoff, the
 * earlier message of its key (`waits`: its id and state, or ""), a lease. */
static const char *why_state(const char *state, int parked, const char *waits, int64_t due, int retries,
                             int64_t locked, int64_t now, char out[160]) {
    char t[32];
    out[0] = '\0';
    if (parked && waits[0])
        snprintf(out, 160, "parked behind %s, an earlier message of its ordering key", waits);
    else if (parked)
        snprintf(out, 160, "parked by its ordering key, whose earlier messages are finished: a dispatcher's next "
                           "short claim, or the next reap, wakes it");
    else if (strcmp(state, "scheduled") == 0)
        snprintf(out, 160, "%s", due > now ? "waits for its due time" : retries ? "waits for a retry's backoff"
                                                                               : "waits for its next attempt");
    else if (strcmp(state, "in-flight") == 0 && locked > 0 && locked < now)
        snprintf(out, 160, "its lease expired %s ago (a worker died?): the next reap frees it",
                 human_ms(now - locked, t));
    else if (strcmp(state, "in-flight") == 0) snprintf(out, 160, "a worker holds it");
    return out[0] ? out : NULL;
}

/* The earlier message of m's ordering key that m waits for (Ready or in
 * flight, before it in the key's order): "<id> (<state>)" into out, or "". */
static void waits_for(ctl *c, const obx_message *m, char out[80]) {
    const dia *d = dialect_sql(c);
    char q[6][48], oid[64], idt[96], ip[48];
    const char *params[1];
    ctl_stmt st;
    sb b;
    out[0] = '\0';
    if (!d || !m->ordering_key || (!c->dbc && sql_connect(c) != CTL_OK)) return;
    memset(&b, 0, sizeof b);
    snprintf(oid, sizeof oid, "o.%s", col(d, "Id", q[5]));
    subst(idt, sizeof idt, d->id_text, oid);
    subst(ip, sizeof ip, d->id_param, "?");
    col(d, "OrderingKey", q[1]);
    col(d, "Status", q[2]);
    col(d, "OrderingSeq", q[3]);
    col(d, "Id", q[4]);
    sb_add(&b, "SELECT %s, o.%s FROM ", idt, q[2]);
    add_table(c, d, &b);
    sb_add(&b, " o, ");
    add_table(c, d, &b);
    sb_add(&b, " m WHERE m.%s = %s AND o.%s = m.%s AND o.%s IN (0, 1) AND (o.%s < m.%s OR (o.%s = m.%s AND "
               "o.%s < m.%s)) ORDER BY o.%s, o.%s LIMIT 1",
           q[4], ip, q[1], q[1], q[2], q[3], q[3], q[3], q[3], q[4], q[4], q[3], q[4]);
    params[0] = m->id;
    if ((st = sql_run(c, b.text, params, 1)) == NULL) return;
    if (sql_next(st) == 1) {
        char id[48];
        sql_text(st, 1, id, sizeof id);
        snprintf(out, 80, "%.36s (%s)", id, sql_i64(st, 2, NULL) == 1 ? "in flight" : "ready");
    }
    sql_done(st);
}

static void field_num(const char *name, long long n, const char *note) {
    char text[160];
    snprintf(text, sizeof text, "%lld%s%s", n, note ? "  " : "", note ? note : "");
    field(name, text);
}

typedef struct envelope {
    const char *tenant, *agg_type, *agg_id;
    int header_count;
    obx_message om;  /* for the headers: the outbox's reader, or the inbox's */
    ibx_message im;
    int inbox;
} envelope;

static int header_at(const envelope *e, int i, const char **k, const char **v) {
    if (e->inbox) return ibx_message_header_at(&e->im, i, k, v) == IBX_OK;
    return obx_message_header_at(&e->om, i, k, v) == OBX_OK;
}

static void show_envelope(const envelope *e) {
    char agg[1200];
    const char *k, *v;
    int i;
    if (o.json) {
        printf(",\"tenant_id\":");
        json_str(stdout, e->tenant);
        printf(",\"aggregate_type\":");
        json_str(stdout, e->agg_type);
        printf(",\"aggregate_id\":");
        json_str(stdout, e->agg_id);
        printf(",\"headers\":{");
        for (i = 0; i < e->header_count && header_at(e, i, &k, &v); i++) {
            printf("%s", i ? "," : "");
            json_str(stdout, k);
            printf(":");
            json_str(stdout, v ? v : "");
        }
        printf("}");
        return;
    }
    field("tenant", e->tenant);
    snprintf(agg, sizeof agg, "%s %s", e->agg_type ? e->agg_type : "-", e->agg_id ? e->agg_id : "-");
    field("aggregate", e->agg_type || e->agg_id ? agg : NULL);
    if (e->header_count == 0) field("headers", NULL);
    for (i = 0; i < e->header_count && header_at(e, i, &k, &v); i++) {
        snprintf(agg, sizeof agg, "%s: %s", k, v ? v : "");
        field(i ? "" : "headers", agg);
    }
}

static const char *starts_note(int starts) {
    return starts > 1 ? "(claims without an outcome: a crash or an expired lease; Dead at max_starts)" : NULL;
}

static void show_outbox(ctl *c, const obx_message *m) {
    char n[16], waits[80], why[160], t[32];
    int64_t now = db_now(c);
    const char *state = outbox_state(m, now);
    envelope e;
    memset(&e, 0, sizeof e);
    e.tenant = m->tenant_id;
    e.agg_type = m->aggregate_type;
    e.agg_id = m->aggregate_id;
    e.header_count = m->header_count;
    e.om = *m;
    waits[0] = '\0';
    if (is_parked(m)) waits_for(c, m, waits);
    why_state(state, is_parked(m), waits, m->due_time_ms, m->retry_count, m->locked_until_ms, now, why);
    if (o.json) {
        printf("{\"id\":\"%s\",\"message_id\":\"%s\",\"topic\":", m->id, m->message_id);
        json_str(stdout, m->topic);
        printf(",\"status\":\"%s\",\"parked\":%s,\"why\":", state, is_parked(m) ? "true" : "false");
        json_str(stdout, why[0] ? why : NULL);
        printf(",\"ordering_key\":");
        json_str(stdout, m->ordering_key);
        printf(",\"waits_for\":");
        if (waits[0]) printf("\"%.36s\"", waits);
        else printf("null");
        printf(",\"priority\":%d,\"attempts\":%d,\"starts\":%d,\"now_ms\":%lld,\"created_ms\":%lld,\"due_ms\":%lld,"
               "\"next_attempt_ms\":%lld,\"expires_ms\":%lld,\"locked_until_ms\":%lld,\"owner\":", m->priority,
               m->retry_count, m->starts, (long long)now, (long long)m->created_at_ms, (long long)m->due_time_ms,
               (long long)(is_parked(m) ? 0 : m->next_attempt_ms), (long long)m->expires_ms,
               (long long)m->locked_until_ms);
        json_str(stdout, m->owner_token[0] ? m->owner_token : NULL);
        printf(",\"processed_ms\":%lld,\"processed_by\":", (long long)m->processed_at_ms);
        json_str(stdout, m->processed_by);
        printf(",\"correlation_id\":");
        json_str(stdout, m->correlation_id);
        show_envelope(&e);
        printf(",\"last_error\":");
        json_str(stdout, m->last_error);
        show_json_payload(m->payload, m->payload_len);
        printf("}\n");
        return;
    }
    field("id", m->id);
    field("message id", m->message_id);
    field("topic", m->topic);
    field("status", state);
    if (why[0]) field("why", why);
    field("ordering key", m->ordering_key);
    field_num("priority", m->priority,
              m->priority ? "(-5..5; higher first among due messages, 10 s of waiting per level)" : NULL);
    snprintf(n, sizeof n, "%d", m->retry_count);
    field("attempts", n);
    field_num("starts", m->starts, starts_note(m->starts));
    field_time("created", m->created_at_ms);
    field_time("due", m->due_time_ms);
    if (is_parked(m)) field("next attempt", "- (parked: when the earlier messages of its key are done or dead)");
    else field_time("next attempt", m->next_attempt_ms);
    field("expires", m->expires_ms ? utc(m->expires_ms, t) : "never");
    field_time("locked until", m->locked_until_ms);
    field("owner", m->owner_token[0] ? m->owner_token : NULL);
    field_time("processed at", m->processed_at_ms);
    field("processed by", m->processed_by);
    field("correlation", m->correlation_id);
    show_envelope(&e);
    field("last error", m->last_error);
    show_payload(m->payload, m->payload_len);
}

static void show_inbox(ctl *c, const ibx_message *m) {
    char n[16], why[160], t[32];
    int64_t now = db_now(c);
    const char *state = inbox_state(m, now);
    envelope e;
    memset(&e, 0, sizeof e);
    e.inbox = 1;
    e.tenant = m->tenant_id;
    e.agg_type = m->aggregate_type;
    e.agg_id = m->aggregate_id;
    e.header_count = m->header_count;
    e.im = *m;
    why_state(state, 0, "", m->due_time_ms, m->attempt, m->locked_until_ms, now, why);
    if (o.json) {
        printf("{\"source\":");
        json_str(stdout, m->source);
        printf(",\"message_id\":");
        json_str(stdout, m->message_id);
        printf(",\"topic\":");
        json_str(stdout, m->topic);
        printf(",\"status\":\"%s\",\"why\":", state);
        json_str(stdout, why[0] ? why : NULL);
        printf(",\"priority\":%d", m->priority);
        printf(",\"attempts\":%d,\"starts\":%d,\"now_ms\":%lld,\"first_seen_ms\":%lld,\"last_seen_ms\":%lld,"
               "\"due_ms\":%lld,\"next_attempt_ms\":%lld,\"expires_ms\":%lld,\"locked_until_ms\":%lld,\"owner\":",
               m->attempt, m->starts, (long long)now, (long long)m->first_seen_ms, (long long)m->last_seen_ms,
               (long long)m->due_time_ms, (long long)m->next_attempt_ms, (long long)m->expires_ms,
               (long long)m->locked_until_ms);
        json_str(stdout, m->owner_token[0] ? m->owner_token : NULL);
        printf(",\"hash_bytes\":%lu", (unsigned long)m->hash_len);
        show_envelope(&e);
        printf(",\"last_error\":");
        json_str(stdout, m->last_error);
        show_json_payload(m->payload, m->payload_len);
        printf("}\n");
        return;
    }
    field("source", m->source);
    field("message id", m->message_id);
    field("topic", m->topic);
    field("status", state);
    if (why[0]) field("why", why);
    field_num("priority", m->priority,
              m->priority ? "(-5..5; higher first among due messages, 10 s of waiting per level)" : NULL);
    snprintf(n, sizeof n, "%d", m->attempt);
    field("attempts", n);
    field_num("starts", m->starts, starts_note(m->starts));
    field_time("first seen", m->first_seen_ms);
    field_time("last seen", m->last_seen_ms);
    field_time("due", m->due_time_ms);
    field_time("next attempt", m->next_attempt_ms);
    field("expires", m->expires_ms ? utc(m->expires_ms, t) : "never");
    field_time("locked until", m->locked_until_ms);
    field("owner", m->owner_token[0] ? m->owner_token : NULL);
    snprintf(n, sizeof n, "%lu bytes", (unsigned long)m->hash_len);
    field("hash", m->hash_len ? n : NULL);
    show_envelope(&e);
    field("last error", m->last_error);
    show_payload(m->payload, m->payload_len);
}

/* The message an id (inbox: --source and a message id) names; exit 3 when
 * there is none. */
static int get_one(ctl *c, const char *what, obx_message *om, ibx_message *im) {
    int r;
    if (o.nargs != 1)
        return fail(CTL_USAGE, "%s: give exactly one id%s (obxctl %s --help)", what, c->ib ? " and --source" : "",
                    o.command);
    if (c->ib) {
        if (!o.source) return fail(CTL_USAGE, "%s: an inbox message is --source SOURCE MESSAGE_ID", what);
        r = result_int(ibx_get(c->ib, o.args[0], o.source, im));
        if (r == IBX_ERR_NOT_FOUND) return fail(CTL_NOT_FOUND, "%s: no message %s from %s", what, o.args[0], o.source);
        if (r != IBX_OK) return lib_fail(c, what, r);
    } else {
        if (!obx_uuid_is_valid(o.args[0])) return fail(CTL_USAGE, "%s: '%s' is not a message id (a UUID)", what, o.args[0]);
        r = result_int(obx_get(c->ob, o.args[0], om));
        if (r == OBX_ERR_NOT_FOUND) return fail(CTL_NOT_FOUND, "%s: no message %s", what, o.args[0]);
        if (r != OBX_OK) return lib_fail(c, what, r);
    }
    return CTL_OK;
}

static int cmd_show(ctl *c) {
    obx_message om;
    ibx_message im;
    int code = get_one(c, "show", &om, &im);
    if (code != CTL_OK) return code;
    if (c->ib) show_inbox(c, &im);
    else show_outbox(c, &om);
    return CTL_OK;
}

/* ---- cancel, run, dead move: the library's obx_dead_move / obx_run_now --------------------- */

/* After an action changed nothing: the message's state, and why (exit 3). */
static int not_changed(ctl *c, const char *what, const char *wanted) {
    obx_message om;
    ibx_message im;
    char waits[80], why[160];
    const char *state;
    int64_t now;
    int code = get_one(c, what, &om, &im);
    if (code != CTL_OK) return code;
    now = db_now(c);
    waits[0] = '\0';
    if (c->ib) {
        state = inbox_state(&im, now);
        why_state(state, 0, "", im.due_time_ms, im.attempt, im.locked_until_ms, now, why);
    } else {
        state = outbox_state(&om, now);
        if (is_parked(&om)) waits_for(c, &om, waits);
        why_state(state, is_parked(&om), waits, om.due_time_ms, om.retry_count, om.locked_until_ms, now, why);
    }
    if (strcmp(what, "run") == 0 && strcmp(state, "ready") == 0) {
        if (o.json) printf("{\"run\":0}\n");
        else printf("%s is due already (ready): nothing changed\n", o.args[0]);
        return CTL_OK;
    }
    if (waits[0] || (!c->ib && is_parked(&om)))
        return fail(CTL_NOT_FOUND, "%s: %s is %s: nothing changed (it runs when the key's earlier messages are "
                    "done or dead)", what, o.args[0], why);
    return fail(CTL_NOT_FOUND, "%s: %s is %s%s%s%s: nothing changed (%s takes %s messages%s)", what, o.args[0],
                state, why[0] ? " (" : "", why, why[0] ? ")" : "", what, wanted,
                strcmp(what, "cancel") == 0 && strcmp(state, "in-flight") == 0 ? "; in flight: obxctl dead move" : "");
}

static int cmd_move(ctl *c, int in_flight) {
    const char *what = in_flight ? "dead move" : "cancel";
    int64_t n = 0;
    int r;
    if (o.nargs != 1)
        return fail(CTL_USAGE, "%s: give exactly one id%s (obxctl %s --help)", what, c->ib ? " and --source" : "",
                    o.command);
    if (!o.reason || !o.reason[0]) return fail(CTL_USAGE, "%s: --reason TEXT is required (its last error)", what);
    if (c->ib && !o.source) return fail(CTL_USAGE, "%s: an inbox message is --source SOURCE MESSAGE_ID", what);
    if (!c->ib && !obx_uuid_is_valid(o.args[0]))
        return fail(CTL_USAGE, "%s: '%s' is not a message id (a UUID)", what, o.args[0]);
    r = c->ib ? result_int(ibx_dead_move(c->ib, o.args[0], o.source, o.reason, in_flight, &n))
              : result_int(obx_dead_move(c->ob, o.args[0], o.reason, in_flight, &n));
    if (r != OBX_OK) return lib_fail(c, what, r);
    if (n == 0) return not_changed(c, what, in_flight ? "ready, scheduled or in flight" : "ready or scheduled");
    if (o.json) printf("{\"%s\":%lld}\n", in_flight ? "moved" : "cancelled", (long long)n);
    else printf("%s %s: dead (%s)\n", in_flight ? "moved" : "cancelled", o.args[0], o.reason);
    return CTL_OK;
}

static int cmd_run(ctl *c) {
    int64_t n = 0;
    int r;
    if (o.nargs != 1)
        return fail(CTL_USAGE, "run: give exactly one id%s (obxctl run --help)", c->ib ? " and --source" : "");
    if (c->ib && !o.source) return fail(CTL_USAGE, "run: an inbox message is --source SOURCE MESSAGE_ID");
    if (!c->ib && !obx_uuid_is_valid(o.args[0]))
        return fail(CTL_USAGE, "run: '%s' is not a message id (a UUID)", o.args[0]);
    r = c->ib ? result_int(ibx_run_now(c->ib, o.args[0], o.source, &n)) : result_int(obx_run_now(c->ob, o.args[0], &n));
    if (r != OBX_OK) return lib_fail(c, "run", r);
    if (n == 0) return not_changed(c, "run", "scheduled");
    if (o.json) printf("{\"run\":%lld}\n", (long long)n);
    else printf("%s is due now\n", o.args[0]);
    return CTL_OK;
}

/* ---- enqueue (testing) ----------------------------------------------------------------------- */

static int cmd_enqueue(ctl *c) {
    int64_t due = o.due_in_ms > 0 ? db_now(c) + o.due_in_ms : 0;
    int r;
    if (!o.topic || !o.payload) return fail(CTL_USAGE, "enqueue: --topic and --payload are required");
    if (c->ib) {
        ibx_new_message m;
        if (o.correlation || o.key)
            return fail(CTL_USAGE, "enqueue: --%s applies to an outbox only", o.key ? "key" : "correlation");
        if (!o.source || o.nargs != 1)
            return fail(CTL_USAGE, "enqueue: an inbox message is --source SOURCE MESSAGE_ID");
        memset(&m, 0, sizeof m);
        m.topic = o.topic;
        m.source = o.source;
        m.message_id = o.args[0];
        m.payload = o.payload;
        m.payload_len = IBX_NTS;
        m.tenant_id = o.tenant;
        m.due_utc_ms = due;
        r = result_int(ibx_enqueue(c->ib, &m, NULL));
        if (r != IBX_OK) return lib_fail(c, "enqueue", r);
        if (o.json) {
            printf("{\"source\":");
            json_str(stdout, o.source);
            printf(",\"message_id\":");
            json_str(stdout, o.args[0]);
            printf("}\n");
        } else printf("enqueued %s from %s\n", o.args[0], o.source);
    } else {
        obx_new_message m;
        char id[37];
        if (o.nargs) return fail(CTL_USAGE, "enqueue: unexpected argument '%s'", o.args[0]);
        memset(&m, 0, sizeof m);
        m.topic = o.topic;
        m.payload = o.payload;
        m.payload_len = OBX_NTS;
        m.ordering_key = o.key;
        m.correlation_id = o.correlation;
        m.tenant_id = o.tenant;
        m.due_utc_ms = due;
        r = result_int(obx_enqueue(c->ob, &m, id));
        if (r != OBX_OK) return lib_fail(c, "enqueue", r);
        if (o.json) printf("{\"id\":\"%s\"}\n", id);
        else printf("enqueued %s\n", id);
    }
    return CTL_OK;
}

/* ---- dead replay | purge ---------------------------------------------------------------------- */

/* dead purge --all without --yes: how many it would delete, nothing deleted. */
static int purge_preview(ctl *c) {
    const char *params[2];
    char q[3][48];
    int n = 0, code;
    int64_t count;
    ctl_stmt st;
    sb b;
    const dia *d = need_sql(c, &code);
    if (!d) return code;
    memset(&b, 0, sizeof b);
    sb_add(&b, "SELECT COUNT(*) FROM ");
    add_table(c, d, &b);
    sb_add(&b, " WHERE %s = %s", col(d, "Status", q[0]), c->ib ? "'Dead'" : "3");
    if (o.topic) {
        sb_add(&b, " AND %s = ?", col(d, "Topic", q[1]));
        params[n++] = o.topic;
    }
    if (o.source && c->ib) {
        sb_add(&b, " AND %s = ?", col(d, "Source", q[2]));
        params[n++] = o.source;
    }
    if (!(st = sql_run(c, b.text, params, n))) return fail(CTL_DB, "dead purge: %s", db_err);
    count = sql_next(st) == 1 ? sql_i64(st, 1, NULL) : -1;
    sql_done(st);
    if (count < 0) return fail(CTL_DB, "dead purge: %s", db_err);
    if (o.json) printf("{\"would_purge\":%lld}\n", (long long)count);
    else
        printf("would purge %lld dead message(s)%s%s%s%s; nothing deleted: add --yes to delete them\n",
               (long long)count, o.topic ? " of topic " : "", o.topic ? o.topic : "",
               o.source && c->ib ? " from " : "", o.source && c->ib ? o.source : "");
    return CTL_OK;
}

/* The library's dead replay or purge: one call for --all, one per id
 * (exit 3 for an id that is not a dead message, the others still done). */
static int dead_change(ctl *c, int purge) {
    const char *what = purge ? "dead purge" : "dead replay";
    int i, r, missing = 0;
    int64_t total = 0, n;
    if (o.all == (o.nargs > 0)) return fail(CTL_USAGE, "%s: give the ids or --all (not both)", what);
    if (c->ib && o.nargs > 0 && !o.source) return fail(CTL_USAGE, "%s: inbox ids need --source SOURCE", what);
    if (o.topic && !o.all) return fail(CTL_USAGE, "%s: --topic goes with --all", what);
    if (o.yes && !(purge && o.all)) return fail(CTL_USAGE, "%s: --yes goes with dead purge --all", what);
    for (i = 0; !c->ib && i < o.nargs; i++)
        if (!obx_uuid_is_valid(o.args[i]))
            return fail(CTL_USAGE, "%s: '%s' is not a message id (a UUID)", what, o.args[i]);
    if (purge && o.all && !o.yes) return purge_preview(c);
    for (i = 0; i < (o.all ? 1 : o.nargs); i++) {
        const char *id = o.all ? NULL : o.args[i];
        n = 0;
        if (c->ib) {
            ibx_dead_filter f;
            memset(&f, 0, sizeof f);
            f.topic = o.topic;
            f.source = o.source;
            f.message_id = id;
            r = result_int(purge ? ibx_dead_purge(c->ib, &f, &n) : ibx_dead_replay(c->ib, &f, &n));
        } else {
            obx_dead_filter f;
            memset(&f, 0, sizeof f);
            f.topic = o.topic;
            f.id = id;
            r = result_int(purge ? obx_dead_purge(c->ob, &f, &n) : obx_dead_replay(c->ob, &f, &n));
        }
        if (r != OBX_OK) return lib_fail(c, what, r);
        if (n == 0 && id) {
            fail(CTL_NOT_FOUND, "%s: %s is not a dead message (not there, or not dead)", what, id);
            missing++;
        }
        total += n;
    }
    if (o.json) printf("{\"%s\":%lld}\n", purge ? "purged" : "replayed", (long long)total);
    else printf("%s %lld dead message(s)\n", purge ? "purged" : "replayed", (long long)total);
    return missing ? CTL_NOT_FOUND : CTL_OK;
}

static int cmd_dead(ctl *c) {
    if (strcmp(o.sub, "move") == 0) return cmd_move(c, 1);
    if (strcmp(o.sub, "list") == 0) {
        if (o.nargs) return fail(CTL_USAGE, "dead list: unexpected argument '%s'", o.args[0]);
        return cmd_list(c, "dead", 1);
    }
    return dead_change(c, strcmp(o.sub, "purge") == 0); /* list, replay or purge: check_options */
}

/* ---- reap, cleanup, deploy, schema, metrics --------------------------------------------------- */

static int cmd_reap(ctl *c) {
    int64_t n = 0;
    int r = c->ib ? result_int(ibx_reap(c->ib, &n)) : result_int(obx_reap(c->ob, &n));
    if (r != OBX_OK) return lib_fail(c, "reap", r);
    printf("reaped %lld expired lease(s)\n", (long long)n);
    return CTL_OK;
}

/* One default for both kinds (the libraries' own differ: the outbox keeps
 * no done message, the inbox 30 days for its dedup). */
#define CLEANUP_DEFAULT "7d"

static int cmd_cleanup(ctl *c) {
    int64_t n = 0, keep = o.older_ms > 0 ? o.older_ms : parse_duration(CLEANUP_DEFAULT);
    int r;
    if (o.older_ms == 0) return fail(CTL_USAGE, "cleanup: --older-than must be more than 0 (default " CLEANUP_DEFAULT ")");
    r = c->ib ? result_int(ibx_cleanup(c->ib, keep, 0, &n)) : result_int(obx_cleanup(c->ob, keep, 0, &n));
    if (r != OBX_OK) return lib_fail(c, "cleanup", r);
    printf("deleted %lld done message(s) older than %s\n", (long long)n, o.older ? o.older : CLEANUP_DEFAULT);
    return CTL_OK;
}

static int print_schema(int dialect);

static int cmd_deploy(ctl *c) {
    int r;
    if (o.dry_run) return print_schema((int)c->dialect);
    r = c->ib ? result_int(ibx_store_deploy(c->ib)) : result_int(obx_store_deploy(c->ob));
    if (r != OBX_OK) return lib_fail(c, "deploy", r);
    printf("deployed %s table %s (%s)\n", c->ib ? "inbox" : "outbox", c->table, obx_dialect_name(c->dialect));
    return CTL_OK;
}

static int cmd_upgrade(ctl *c) {
    unsigned flags = (o.keys ? OBX_UPGRADE_KEYS : 0u) | (o.drop_old ? OBX_UPGRADE_DROP_OLD : 0u);
    int r, steps = 0;
    if (!flags) return fail(CTL_USAGE, "upgrade: say --keys, --drop-old or both (obxctl upgrade --help)");
    r = c->ib ? result_int(ibx_store_upgrade(c->ib, flags, &steps)) : result_int(obx_store_upgrade(c->ob, flags, &steps));
    if (r != OBX_OK) return lib_fail(c, "upgrade", r);
    printf("upgraded %s table %s (%s): %d step(s) run\n", c->ib ? "inbox" : "outbox", c->table,
           obx_dialect_name(c->dialect), steps);
    return CTL_OK;
}

/* rewrite: the library's obx_store_rewrite / ibx_store_rewrite. */
static int cmd_rewrite(ctl *c) {
    int64_t rows = 0;
    int r = c->ib ? result_int(ibx_store_rewrite(c->ib, &rows)) : result_int(obx_store_rewrite(c->ob, &rows));
    if (r == OBX_EMPTY) {
        printf("%s is in this release's column order already: nothing to do\n", c->table);
        return CTL_OK;
    }
    if (r != OBX_OK) return lib_fail(c, "rewrite", r);
    printf("rewrote %s table %s into this release's column order (%lld rows)\n", c->ib ? "inbox" : "outbox",
           c->table, (long long)rows);
    return CTL_OK;
}

/* The DDL of dialect `dialect` (obx_dialect's number) for --table and --schema. */
static int print_schema(int dialect) {
    int r;
    size_t need = 0;
    char *text;
    const char *what = o.dry_run ? "deploy --dry-run" : "schema";
    r = o.inbox ? result_int(ibx_schema_sql((ibx_dialect)dialect, o.schema, o.table, NULL, 0, &need))
                : result_int(obx_schema_sql((obx_dialect)dialect, o.schema, o.table, NULL, 0, &need));
    if (r != OBX_ERR_OUT_OF_RANGE)
        return fail(exit_for(r), "%s: bad --schema or --table (%s)", what, obx_result_str((obx_result)r));
    if (!(text = (char *)malloc(need))) return fail(CTL_INTERNAL, "out of memory");
    r = o.inbox ? result_int(ibx_schema_sql((ibx_dialect)dialect, o.schema, o.table, text, need, NULL))
                : result_int(obx_schema_sql((obx_dialect)dialect, o.schema, o.table, text, need, NULL));
    if (r == OBX_OK) fputs(text, stdout);
    free(text);
    return r == OBX_OK ? CTL_OK : fail(exit_for(r), "%s: %s", what, obx_result_str((obx_result)r));
}

/* schema --dialect D needs no database; without it, the connected one's. */
static int cmd_schema(ctl *c) {
    static const char *const names[] = {"sqlite", "postgresql", "mariadb", "sqlserver"};
    int i;
    if (c) return print_schema((int)c->dialect);
    for (i = 0; i < 4 && strcmp(o.dialect, names[i]) != 0; i++) {}
    if (i == 4)
        return fail(CTL_USAGE, "schema: --dialect '%s' is not sqlite, postgresql, mariadb or sqlserver", o.dialect);
    return print_schema(i + 1);
}

/* The library's text, gauge families only: a one-shot process has no
 * counters or handler durations (they would read as resets to 0). */
static void print_gauges(const char *text) {
    const char *line = text, *help = NULL;
    int keep = 0;
    while (*line) {
        const char *end = strchr(line, '\n');
        int len = (int)(end ? end - line : (long)strlen(line));
        if (strncmp(line, "# HELP ", 7) == 0) help = line;
        else if (strncmp(line, "# TYPE ", 7) == 0) {
            keep = len > 6 && strncmp(line + len - 6, " gauge", 6) == 0;
            if (keep && help) printf("%.*s\n", (int)(strchr(help, '\n') - help), help);
            if (keep) printf("%.*s\n", len, line);
        } else if (keep) printf("%.*s\n", len, line);
        line += len + (end ? 1 : 0);
    }
}

/* A Prometheus label value: backslash, double quote and newline escaped. */
static void prom_label(const char *p) {
    for (; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p == '\n') printf("\\n");
        else putchar(*p);
    }
}

static int store_metrics(const ctl *c, char *out, size_t cap, size_t *need) {
    if (c->ib) return result_int(ibx_metrics_text(c->ib, out, cap, need));
    return result_int(obx_metrics_text(c->ob, out, cap, need));
}

/* The status label as the library's gauge names spell it (_in_flight). */
static const char *const metric_states[N_STATES] = {"ready", "scheduled", "in_flight", "done", "dead", "seen"};

static int cmd_metrics(ctl *c) {
    char *text = NULL, store[128];
    size_t need = 0;
    int r, code, k, i;
    stats s;
    const dia *d;
    r = store_metrics(c, NULL, 0, &need);
    if (r == OBX_ERR_OUT_OF_RANGE) {
        need += 4096; /* room for gauges that grew since */
        if (!(text = (char *)malloc(need))) return fail(CTL_INTERNAL, "out of memory");
        r = store_metrics(c, text, need, NULL);
    }
    if (r != OBX_OK) {
        free(text);
        return lib_fail(c, "metrics", r);
    }
    print_gauges(text);
    free(text);
    if (!dialect_sql(c)) return CTL_OK; /* no per-topic SQL for this dialect: the library's gauges only */
    if (!(d = need_sql(c, &code))) return code;
    if ((code = stats_read(c, d, &s)) != CTL_OK) return code;
    snprintf(store, sizeof store, "%s", o.store ? o.store : c->ib ? "inbox" : "outbox");
    printf("# HELP %s_queue_topic_messages Messages per topic and status, read now.\n", c->ib ? "ibx" : "obx");
    printf("# TYPE %s_queue_topic_messages gauge\n", c->ib ? "ibx" : "obx");
    for (k = 0; k < s.ntopics; k++)
        for (i = 0; i < (c->ib ? N_STATES : 5); i++) {
            printf("%s_queue_topic_messages{store=\"", c->ib ? "ibx" : "obx");
            prom_label(store);
            printf("\",topic=\"");
            prom_label(s.topics[k].topic);
            printf("\",status=\"%s\"} %lld\n", metric_states[i], (long long)s.topics[k].n[i]);
        }
    free(s.topics);
    return CTL_OK;
}

/* ---- main ------------------------------------------------------------------------------------ */

static int help_for(const char *command) {
    int i;
    for (i = 0; helps[i].name; i++)
        if (strcmp(helps[i].name, command) == 0) {
            fputs(helps[i].text, stdout);
            return CTL_OK;
        }
    return fail(CTL_USAGE, "unknown command '%s' (obxctl --help)", command);
}

int main(int argc, char **argv) {
    ctl c;
    int code;
    if ((code = parse_args(argc, argv)) != CTL_OK) return code;
    if (o.version) {
        printf("obxctl %s\n", obx_version());
        return CTL_OK;
    }
    if (o.help || (o.command && strcmp(o.command, "help") == 0)) {
        const char *about = o.help ? o.command : o.nargs ? o.args[0] : o.sub;
        if (!about && o.command && strcmp(o.command, "help") != 0) about = o.command;
        if (!about) {
            fputs(usage_text, stdout);
            return CTL_OK;
        }
        return help_for(about);
    }
    if (!o.command) {
        fputs(usage_text, stderr);
        return CTL_USAGE;
    }
    if ((code = check_options()) != CTL_OK) return code;
    if (strcmp(o.command, "schema") == 0 && o.nargs) return fail(CTL_USAGE, "schema: unexpected argument '%s'", o.args[0]);
    if (strcmp(o.command, "schema") == 0 && o.dialect) return cmd_schema(NULL);
    if (strcmp(o.command, "show") != 0 && strcmp(o.command, "dead") != 0 && strcmp(o.command, "cancel") != 0 &&
        strcmp(o.command, "run") != 0 && strcmp(o.command, "enqueue") != 0 && o.nargs)
        return fail(CTL_USAGE, "%s: unexpected argument '%s'", o.command, o.args[0]);
    if (o.count && !o.watch) return fail(CTL_USAGE, "--count goes with --watch");
    if (strcmp(o.command, "schema") == 0) { /* the connected database's: no table needed */
        if ((code = open_store(&c, 0)) == CTL_OK) code = cmd_schema(&c);
        close_store(&c);
        return code;
    }
    if ((code = open_store(&c, 0)) != CTL_OK || (code = check_kind(&c)) != CTL_OK) {
        close_store(&c);
        return code;
    }
    if (strcmp(o.command, "stats") == 0) code = cmd_stats(&c);
    else if (strcmp(o.command, "list") == 0) code = cmd_list(&c, o.status, 0);
    else if (strcmp(o.command, "show") == 0) code = cmd_show(&c);
    else if (strcmp(o.command, "cancel") == 0) code = cmd_move(&c, 0);
    else if (strcmp(o.command, "run") == 0) code = cmd_run(&c);
    else if (strcmp(o.command, "enqueue") == 0) code = cmd_enqueue(&c);
    else if (strcmp(o.command, "dead") == 0) code = cmd_dead(&c);
    else if (strcmp(o.command, "reap") == 0) code = cmd_reap(&c);
    else if (strcmp(o.command, "cleanup") == 0) code = cmd_cleanup(&c);
    else if (strcmp(o.command, "deploy") == 0) code = cmd_deploy(&c);
    else if (strcmp(o.command, "upgrade") == 0) code = cmd_upgrade(&c);
    else if (strcmp(o.command, "rewrite") == 0) code = cmd_rewrite(&c);
    else code = cmd_metrics(&c);
    close_store(&c);
    return code;
}

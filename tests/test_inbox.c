/* Inbox requirement tests (IBX-nnn) against a real database.
 * Usage: test_inbox <backend> '<ODBC connection string>'. */
#define IBX_IMPLEMENTATION
#ifdef IBX_SQLITE3_API /* the library on SQLite's C API; the test's own side connections stay ODBC */
#include <sql.h>
#include <sqlext.h>
#endif
#include "../ibx.h"
#include "tt.h"
#include "plans.h"
#include "schema_v0.h"

#include <pthread.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

static const char *g_backend;
static const char *g_label; /* in the test lines: the backend, or sqlite3 (IBX_SQLITE3_API) */
static const char *g_conn;
static int g_pg;
static int g_my; /* MariaDB / MySQL */

/* ---- helpers ------------------------------------------------------------------ */

static char g_log[1 << 16];
static size_t g_log_len;
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER; /* the renewal thread logs too */
static void keep_log(ibx_log_level level, const char *id, const char *msg, void *user) {
    static const char *const names[] = {"?", "DEBUG", "INFO", "WARN", "ERROR"};
    int n;
    (void)user;
    if (getenv("IBX_TEST_VERBOSE")) fprintf(stderr, "  log %d [%s] %s\n", (int)level, id, msg);
    pthread_mutex_lock(&g_log_mu);
    n = snprintf(g_log + g_log_len, sizeof g_log - g_log_len, "%s [%s] %s\n",
                 names[level >= IBX_LOG_DEBUG && level <= IBX_LOG_ERROR ? level : 0], id, msg);
    if (n > 0 && g_log_len + (size_t)n < sizeof g_log) g_log_len += (size_t)n;
    pthread_mutex_unlock(&g_log_mu);
}
static void log_reset(void) {
    pthread_mutex_lock(&g_log_mu);
    g_log_len = 0;
    g_log[0] = '\0';
    pthread_mutex_unlock(&g_log_mu);
}
/* Nonzero when one logged line holds all given fragments. */
static int logged_locked(const char *a, const char *b, const char *c);
static int logged(const char *a, const char *b, const char *c) {
    int found;
    pthread_mutex_lock(&g_log_mu);
    found = logged_locked(a, b, c);
    pthread_mutex_unlock(&g_log_mu);
    return found;
}
static int logged_locked(const char *a, const char *b, const char *c) {
    const char *line = g_log;
    while (*line) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        char one[1024];
        snprintf(one, sizeof one, "%.*s", (int)(n < sizeof one ? n : sizeof one - 1), line);
        if (strstr(one, a) && (!b || strstr(one, b)) && (!c || strstr(one, c))) return 1;
        line += n + (end ? 1 : 0);
    }
    return 0;
}

/* The per-message log level of the stores the tests open (0: the default). */
static ibx_log_level g_message_log_level;

static ibx_store *open_table(const char *table, int deploy) {
    ibx_store_desc desc;
    ibx_store *s = NULL;
    memset(&desc, 0, sizeof desc);
    desc.connection_string = g_conn;
    desc.table = table;
    desc.deploy_schema = deploy;
    desc.store_id = "ibx-test";
    desc.message_log_level = g_message_log_level;
    desc.hooks.logger.log = keep_log;
    desc.hooks.logger.min_level = IBX_LOG_DEBUG;
    if (ibx_store_open(&desc, &s) != IBX_OK) {
        printf("    open failed: %s (%s)\n", ibx_store_last_error(s)->message, ibx_store_last_error(s)->where);
        ibx_store_close(s);
        return NULL;
    }
    return s;
}

static ibx_result run_sql_unit(ibx__db *db, void *text) {
    return ibx__exec_direct(db, (const char *)text, "test sql");
}

static int sql(ibx_store *s, const char *tmpl) {
    char *text = ibx__expand(&s->hooks, s->db.d, s->q, s->schema, s->table, tmpl);
    ibx_result r = text ? ibx__unit(&s->db, run_sql_unit, text, "test sql") : IBX_ERR_NO_MEMORY;
    if (r != IBX_OK) printf("    sql failed: %s\n      %s\n", s->err.message, text ? text : "-");
    ibx__free(&s->hooks, text);
    return r == IBX_OK;
}

static int64_t scalar(ibx_store *s, const char *tmpl) {
    char *text = ibx__expand(&s->hooks, s->db.d, s->q, s->schema, s->table, tmpl);
    char out[64] = "";
    ibx_result r = text ? ibx__query_text(&s->db, text, out, sizeof out) : IBX_ERR_NO_MEMORY;
    if (!s->db.tx_by_sql) ibx__end_tran(&s->db, SQL_ROLLBACK, "end read");
    if (r != IBX_OK) printf("    scalar failed: %s\n      %s\n", s->err.message, text ? text : "-");
    ibx__free(&s->hooks, text);
    return r == IBX_OK ? atoll(out) : -1;
}

static ibx_store *fresh(void) {
    ibx_store *s = open_table("Inbox", 1);
    if (s && !sql(s, "DELETE FROM {T}")) {
        ibx_store_close(s);
        return NULL;
    }
    return s;
}

/* Keys compare byte for byte: "m1 " is another message than "m1" (MariaDB's
 * utf8mb4_bin would pad them equal; SQL Server refuses the key instead, see
 * test_sqlserver.c). */
static ibx_new_message msg(const char *topic, const char *source, const char *id, const char *payload);
static void test_key_exact(void) {
    ibx_store *s = fresh();
    ibx_new_message m = msg("t", "src", "m1", "{}");
    int processed = -1, enqueued = -1;
    TT_ASSERT(s != NULL);
    TT_EQ_INT(ibx_enqueue(s, &m, &enqueued), IBX_OK);
    TT_EQ_INT(ibx_mark_processed(s, "m1", "src"), IBX_OK);
    TT_EQ_INT(ibx_already_processed(s, "m1", "src", NULL, 0, &processed), IBX_OK);
    TT_EQ_INT(processed, 1);
    TT_EQ_INT(ibx_already_processed(s, "m1 ", "src", NULL, 0, &processed), IBX_OK);
    TT_EQ_INT(processed, 0); /* a new message */
    TT_EQ_INT(ibx_already_processed(s, "m1", "src ", NULL, 0, &processed), IBX_OK);
    TT_EQ_INT(processed, 0);
    m.message_id = "m1 ";
    TT_EQ_INT(ibx_enqueue(s, &m, &enqueued), IBX_OK);
    TT_EQ_INT(enqueued, 1);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), 3);
    ibx_store_close(s);
}

static ibx_new_message msg(const char *topic, const char *source, const char *id, const char *payload) {
    ibx_new_message m;
    memset(&m, 0, sizeof m);
    m.topic = topic;
    m.source = source;
    m.message_id = id;
    m.payload = payload;
    m.payload_len = IBX_NTS;
    return m;
}

static int enqueue(ibx_store *s, const char *topic, const char *source, const char *id) {
    ibx_new_message m = msg(topic, source, id, "{}");
    ibx_result r = ibx_enqueue(s, &m, NULL);
    if (r != IBX_OK) printf("    enqueue failed: %s %s\n", ibx_result_str(r), s->err.message);
    return r == IBX_OK;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

static ibx_status status_of(ibx_store *s, const char *source, const char *id) {
    ibx_message m;
    return ibx_get(s, id, source, &m) == IBX_OK ? m.status : (ibx_status)-1;
}

static int seen(ibx_store *s, const char *id, const char *source) {
    int processed = -1;
    if (ibx_already_processed(s, id, source, NULL, 0, &processed) != IBX_OK) return -1;
    return processed;
}

/* Claim `n` enqueued messages; their keys point into the store's buffers. */
static int claim(ibx_store *s, const char *owner, int batch, const ibx_message **ms) {
    int n = 0;
    ibx_result r = ibx_claim(s, owner, 30, batch, ms, &n);
    return r == IBX_OK || r == IBX_EMPTY ? n : -1;
}

/* CORE-MY-STATE-STORED (see the outbox's): a new MariaDB table's state
 * columns are PERSISTENT; deploy adds them to an older table VIRTUAL
 * (instant) and it keeps them until converted by hand; claim and ack work
 * on each. */
static int64_t my_state_kind(ibx_store *s, const char *kind) {
    char q[400];
    snprintf(q, sizeof q, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND "
             "TABLE_NAME = '{N}' AND COLUMN_NAME IN ('ReadyRank', 'LeasedUntil', 'DoneAt', 'DeadAt') AND "
             "EXTRA = '%s GENERATED'", kind);
    return scalar(s, q);
}
/* The conversion docs/RELIABILITY.md gives an operator for an older table:
 * each VIRTUAL state column dropped with its index and added PERSISTENT,
 * the indexes built again, in one table copy (MariaDB cannot MODIFY a
 * column from VIRTUAL to PERSISTENT: error 1907). Built from the header's
 * column list, so that it follows the expressions. */
static int my_convert_stored(ibx_store *s) {
    static const char *const ix[] = {"ReadyRank` (`ReadyRank`, `NextAttemptAt`)", "LeasedUntil` (`LeasedUntil`)",
                                     "DoneAt` (`DoneAt`)", "DeadAt` (`DeadAt`)"};
    static char q[4096];
    size_t o = 0;
    int i;
    o += (size_t)snprintf(q + o, sizeof q - o, "ALTER TABLE {T} ");
    for (i = 0; i < 4; i++)
        o += (size_t)snprintf(q + o, sizeof q - o, "DROP INDEX `IX_{N}_%.*s`, ", (int)strcspn(ix[i], "`"), ix[i]);
    for (i = 0; s->q->columns[i].name; i++) {
        const char *type = s->q->columns[i].type;
        size_t tl = strlen(type);
        if (tl > 8 && strcmp(type + tl - 8, " VIRTUAL") == 0)
            o += (size_t)snprintf(q + o, sizeof q - o, "DROP COLUMN `%s`, ADD COLUMN `%s` %.*s PERSISTENT, ",
                                  s->q->columns[i].name, s->q->columns[i].name, (int)(tl - 8), type);
    }
    for (i = 0; i < 4; i++) o += (size_t)snprintf(q + o, sizeof q - o, "ADD INDEX `IX_{N}_%s, ", ix[i]);
    snprintf(q + o, sizeof q - o, "ALGORITHM=COPY, LOCK=SHARED");
    return o < sizeof q - 40 && sql(s, q);
}
static void test_my_state_stored(void) {
    ibx_store *s = open_table("StoredInbox", 0);
    const ibx_message *ms;
    ibx_key keys[1];
    char owner[37], id[8];
    int round;
    TT_ASSERT(s != NULL);
    TT_ASSERT(sql(s, "DROP TABLE IF EXISTS {T}"));
    TT_EQ_INT(ibx_store_deploy(s), IBX_OK);
    TT_EQ_INT(my_state_kind(s, "STORED"), 4);
    TT_EQ_INT(my_state_kind(s, "VIRTUAL"), 0);
    for (round = 0; round < 3; round++) {
        if (round == 1) { /* as a release before layout 2 left it */
            TT_ASSERT(sql(s, "ALTER TABLE {T} DROP INDEX `IX_{N}_ReadyRank`, DROP COLUMN `ReadyRank`, "
                             "DROP COLUMN `LeasedUntil`, DROP COLUMN `DoneAt`, DROP COLUMN `DeadAt`"));
            TT_EQ_INT(ibx_store_deploy(s), IBX_OK);
            TT_EQ_INT(my_state_kind(s, "VIRTUAL"), 4);
            TT_EQ_INT(my_state_kind(s, "STORED"), 0);
            TT_EQ_INT(ibx_store_deploy(s), IBX_OK);
            TT_EQ_INT(my_state_kind(s, "VIRTUAL"), 4);
        } else if (round == 2) { /* converted by hand (docs/RELIABILITY.md) */
            TT_ASSERT(my_convert_stored(s));
            TT_EQ_INT(ibx_store_deploy(s), IBX_OK); /* changes nothing */
            TT_EQ_INT(my_state_kind(s, "STORED"), 4);
            TT_EQ_INT(my_state_kind(s, "VIRTUAL"), 0);
        }
        TT_EQ_INT(scalar(s, "SELECT COUNT(DISTINCT INDEX_NAME) FROM information_schema.STATISTICS WHERE "
                            "TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{N}' AND COLUMN_NAME IN ('ReadyRank', "
                            "'LeasedUntil', 'DoneAt', 'DeadAt')"), 4);
        snprintf(id, sizeof id, "m%d", round);
        TT_ASSERT(enqueue(s, "t", "src", id));
        ibx_owner_token(s, owner);
        TT_EQ_INT(claim(s, owner, 1, &ms), 1);
        TT_EQ_STR(ms[0].message_id, id);
        keys[0].source = ms[0].source;
        keys[0].message_id = ms[0].message_id;
        TT_EQ_INT(ibx_ack(s, owner, keys, 1, NULL), IBX_OK);
        TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T} WHERE `DoneAt` IS NOT NULL"), round + 1);
    }
    ibx_store_close(s);
}

/* max_pending caps the messages still to handle: past it ibx_enqueue is
 * IBX_ERR_FULL and changes nothing; handled ones make room
 * (CORE-MAX-PENDING). */
static void test_max_pending(void) {
    ibx_store *s = fresh(), *capped = NULL;
    ibx_store_desc desc;
    ibx_new_message m;
    const ibx_message *ms;
    ibx_key keys[1];
    char owner[37], id[16];
    int i;
    int64_t pending = -1;
    TT_ASSERT(s != NULL);
    memset(&desc, 0, sizeof desc);
    desc.connection_string = g_conn;
    desc.hooks.logger.log = keep_log;
    desc.max_pending = 3;
    TT_EQ_INT(ibx_store_open(&desc, &capped), IBX_OK);
    for (i = 0; i < 3; i++) {
        snprintf(id, sizeof id, "m%d", i);
        m = msg("cap", "src", id, "p");
        TT_EQ_INT(ibx_enqueue(capped, &m, NULL), IBX_OK);
    }
    m = msg("cap", "src", "m3", "p");
    TT_EQ_INT(ibx_enqueue(capped, &m, NULL), IBX_ERR_FULL);
    TT_EQ_STR(ibx_store_last_error(capped)->where, "ibx_enqueue");
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), 3);
    TT_EQ_INT(ibx_pending_count(capped, &pending), IBX_OK);
    TT_EQ_INT(pending, 3);
    ibx_owner_token(s, owner);
    TT_EQ_INT(claim(s, owner, 1, &ms), 1);
    keys[0].source = ms[0].source;
    keys[0].message_id = ms[0].message_id;
    TT_EQ_INT(ibx_ack(s, owner, keys, 1, NULL), IBX_OK);
    TT_EQ_INT(ibx_enqueue(capped, &m, NULL), IBX_OK);
    ibx_store_close(capped);
    ibx_store_close(s);
}

/* At the cap a redelivery adds no message still to handle: one of a
 * message waiting or being handled is taken (the new payload with it), one
 * of a done message is taken and changes nothing (*enqueued 0); a new one,
 * and one that would make a Seen message Processing, are IBX_ERR_FULL
 * (IBX-MAX-PENDING-REDELIVERY). */
static void test_max_pending_redelivery(void) {
    ibx_store *s = fresh(), *capped = NULL;
    ibx_store_desc desc;
    ibx_new_message m;
    ibx_message got;
    const ibx_message *ms;
    ibx_key keys[1];
    char owner[37];
    int enqueued = -1;
    TT_ASSERT(s != NULL);
    memset(&desc, 0, sizeof desc);
    desc.connection_string = g_conn;
    desc.hooks.logger.log = keep_log;
    desc.max_pending = 2;
    TT_EQ_INT(ibx_store_open(&desc, &capped), IBX_OK);
    m = msg("cap", "src", "done", "p");
    TT_EQ_INT(ibx_enqueue(capped, &m, NULL), IBX_OK);
    ibx_owner_token(s, owner);
    TT_EQ_INT(claim(s, owner, 1, &ms), 1);
    keys[0].source = "src";
    keys[0].message_id = "done";
    TT_EQ_INT(ibx_ack(s, owner, keys, 1, NULL), IBX_OK);
    TT_EQ_INT(seen(s, "seen", "src"), 0);
    m = msg("cap", "src", "m1", "p");
    TT_EQ_INT(ibx_enqueue(capped, &m, NULL), IBX_OK);
    m = msg("cap", "src", "m2", "p");
    TT_EQ_INT(ibx_enqueue(capped, &m, NULL), IBX_OK);
    TT_EQ_INT(claim(s, owner, 1, &ms), 1); /* m1 in a handler, m2 waiting: the cap is reached */
    m = msg("cap", "src", "m3", "p");
    TT_EQ_INT(ibx_enqueue(capped, &m, NULL), IBX_ERR_FULL);
    m = msg("cap", "src", "seen", "p");
    TT_EQ_INT(ibx_enqueue(capped, &m, NULL), IBX_ERR_FULL);
    TT_EQ_STR(ibx_store_last_error(capped)->where, "ibx_enqueue");
    m = msg("cap", "src", "m2", "p2");
    TT_EQ_INT(ibx_enqueue(capped, &m, &enqueued), IBX_OK);
    TT_EQ_INT(enqueued, 1);
    m = msg("cap", "src", "m1", "p1");
    TT_EQ_INT(ibx_enqueue(capped, &m, &enqueued), IBX_OK);
    m = msg("cap2", "src", "done", "p");
    TT_EQ_INT(ibx_enqueue(capped, &m, &enqueued), IBX_OK);
    TT_EQ_INT(enqueued, 0);
    TT_EQ_INT(ibx_get(s, "m2", "src", &got), IBX_OK);
    TT_EQ_STR(got.payload, "p2");
    TT_EQ_INT(ibx_get(s, "done", "src", &got), IBX_OK);
    TT_EQ_INT(got.status, IBX_STATUS_DONE);
    TT_EQ_STR(got.topic, "cap");
    TT_EQ_INT(ibx_get(s, "seen", "src", &got), IBX_OK);
    TT_EQ_INT(got.status, IBX_STATUS_SEEN);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), 4);
    ibx_store_close(capped);
    ibx_store_close(s);
}

/* ---- dedup ------------------------------------------------------------------------------- */

static void test_001_natural_key(void) {
    ibx_store *s = fresh();
    TT_ASSERT(s != NULL);
    TT_EQ_INT(seen(s, "evt-1", "stripe"), 0);
    TT_EQ_INT(seen(s, "evt-1", "github"), 0); /* same id, other source: another message */
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), 2);
    TT_EQ_INT(seen(s, "evt-1", "stripe"), 0);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), 2);
    TT_EQ_INT(seen(s, "EVT-1", "stripe"), 0); /* case-sensitive */
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), 3);
    ibx_store_close(s);
}

static void test_002_005_states(void) {
    ibx_store *s = fresh();
    ibx_message m;
    int64_t first;
    TT_ASSERT(s != NULL);
    TT_EQ_INT(seen(s, "e", "src"), 0);                       /* IBX-004: new -> Seen, false */
    TT_EQ_INT(status_of(s, "src", "e"), IBX_STATUS_SEEN);
    TT_EQ_INT(ibx_get(s, "e", "src", &m), IBX_OK);
    first = m.last_seen_ms;
    sleep_ms(30);
    TT_EQ_INT(seen(s, "e", "src"), 0);                       /* IBX-005: not Done -> false ... */
    TT_EQ_INT(ibx_get(s, "e", "src", &m), IBX_OK);
    TT_EXPECT(m.last_seen_ms > first);                        /* ... and LastSeenUtc refreshed */
    TT_EQ_INT(m.status, IBX_STATUS_SEEN);
    TT_EQ_INT(ibx_mark_processed(s, "e", "src"), IBX_OK);
    TT_EQ_INT(seen(s, "e", "src"), 1);                       /* IBX-003: Done -> true */
    TT_EQ_INT(status_of(s, "src", "e"), IBX_STATUS_DONE);
    ibx_store_close(s);
}

static void test_006_concurrent_dedup(void) {
    /* Many processes race on the same keys: every key is recorded once, and
     * no call fails (MERGE/UPSERT semantics). */
    ibx_store *s = fresh();
    pid_t pids[4];
    int w, status;
    TT_ASSERT(s != NULL);
    ibx_store_close(s); /* no connection crosses fork() */
    fflush(stdout);
    for (w = 0; w < 4; w++) {
        pids[w] = fork();
        if (pids[w] == 0) {
            ibx_store *mine = open_table("Inbox", 0);
            int i, rc = 0, processed;
            char id[32];
            if (!mine) _exit(3);
            for (i = 0; i < 100; i++) {
                ibx_result r;
                snprintf(id, sizeof id, "race-%d", i);
                do r = ibx_already_processed(mine, id, "race", NULL, 0, &processed);
                while (r == IBX_ERR_DB_TRANSIENT);
                if (r != IBX_OK || processed) rc = 4;
            }
            ibx_store_close(mine);
            _exit(rc);
        }
    }
    for (w = 0; w < 4; w++) {
        TT_ASSERT(waitpid(pids[w], &status, 0) == pids[w]);
        TT_EQ_INT(WIFEXITED(status) ? WEXITSTATUS(status) : 99, 0);
    }
    s = open_table("Inbox", 0);
    TT_ASSERT(s != NULL);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T} WHERE \"Source\" = 'race'"), 100);
    ibx_store_close(s);
}

static void test_007_008_hash(void) {
    ibx_store *s = fresh();
    unsigned char a[32], b[32];
    ibx_message m;
    int processed = -1;
    TT_ASSERT(s != NULL);
    ibx_sha256("body one", 8, a);
    ibx_sha256("body two", 8, b);
    TT_EQ_INT(ibx_already_processed(s, "h", "src", a, 32, &processed), IBX_OK);
    TT_EQ_INT(ibx_get(s, "h", "src", &m), IBX_OK);
    TT_EQ_INT(m.hash_len, 32);                                  /* IBX-007: stored */
    TT_EXPECT(memcmp(m.hash, a, 32) == 0);
    log_reset();
    TT_EQ_INT(ibx_already_processed(s, "h", "src", a, 32, &processed), IBX_OK);
    TT_EXPECT(!logged("WARN", "different content hash", NULL));
    TT_EQ_INT(ibx_already_processed(s, "h", "src", b, 32, &processed), IBX_OK); /* IBX-008: no failure */
    TT_EQ_INT(processed, 0);
    TT_EXPECT(logged("WARN [ibx-test]", "different content hash", "h from src"));
    TT_EQ_INT(ibx_get(s, "h", "src", &m), IBX_OK);
    TT_EXPECT(memcmp(m.hash, a, 32) == 0); /* the first hash is kept for verification */
    {   /* enqueue warns the same way; a get's strings stay valid across it */
        ibx_new_message nm = msg("t", "src", "h", "body two");
        nm.hash = b;
        nm.hash_len = 32;
        log_reset();
        TT_EQ_INT(ibx_enqueue(s, &nm, NULL), IBX_OK);
        TT_EXPECT(logged("WARN [ibx-test]", "different content hash", "h from src"));
        TT_EXPECT(memcmp(m.hash, a, 32) == 0 && strcmp(m.source, "src") == 0);
        log_reset();
        TT_EQ_INT(ibx_enqueue(s, &nm, NULL), IBX_OK); /* the same hash again: no warning */
        TT_EXPECT(!logged("WARN", "different content hash", NULL));
    }
    ibx_store_close(s);
}

static void expect_bad_arg(ibx_store *s, ibx_result got, const char *where) {
    TT_EQ_INT(got, IBX_ERR_INVALID_ARG);
    TT_EQ_STR(ibx_store_last_error(s)->where, where);
}

static void test_009_012_dedup_args(void) {
    ibx_store *s = fresh();
    char long_id[300];
    int processed;
    TT_ASSERT(s != NULL);
    memset(long_id, 'x', 256);
    long_id[256] = '\0';
    expect_bad_arg(s, ibx_already_processed(s, NULL, "src", NULL, 0, &processed), "ibx_already_processed: message_id");
    expect_bad_arg(s, ibx_already_processed(s, "", "src", NULL, 0, &processed), "ibx_already_processed: message_id");
    expect_bad_arg(s, ibx_already_processed(s, "id", NULL, NULL, 0, &processed), "ibx_already_processed: source");
    expect_bad_arg(s, ibx_already_processed(s, "id", "", NULL, 0, &processed), "ibx_already_processed: source");
    expect_bad_arg(s, ibx_already_processed(s, long_id, "src", NULL, 0, &processed), "ibx_already_processed: message_id");
    expect_bad_arg(s, ibx_already_processed(s, "id", long_id, NULL, 0, &processed), "ibx_already_processed: source");
    long_id[255] = '\0'; /* 255 is allowed */
    TT_EQ_INT(ibx_already_processed(s, long_id, long_id, NULL, 0, &processed), IBX_OK);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), 1);
    ibx_store_close(s);
}

/* ---- enqueue ---------------------------------------------------------------------------------- */

static void test_013_014_enqueue_upsert(void) {
    ibx_store *s = fresh(), *other = open_table("Inbox", 0);
    ibx_new_message m = msg("payment.received", "stripe", "evt_1", "{\"v\":1}");
    ibx_message got;
    int enq = -1;
    TT_ASSERT(s && other);
    TT_EQ_INT(ibx_enqueue(s, &m, &enq), IBX_OK);
    TT_EQ_INT(enq, 1);
    TT_EQ_INT(ibx_get(other, "evt_1", "stripe", &got), IBX_OK); /* IBX-013: durable, committed */
    TT_EQ_INT(ibx_enqueue(s, &m, &enq), IBX_OK);                 /* IBX-014: a duplicate is fine */
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), 1);
    ibx_store_close(other);
    ibx_store_close(s);
}

static void test_015_022_enqueue_args(void) {
    ibx_store *s = fresh();
    ibx_new_message m = msg("t", "src", "id", "p");
    ibx_message got;
    char long_topic[300];
    TT_ASSERT(s != NULL);
    m.topic = NULL;
    expect_bad_arg(s, ibx_enqueue(s, &m, NULL), "ibx_enqueue: topic");         /* IBX-015 */
    m.topic = "";
    expect_bad_arg(s, ibx_enqueue(s, &m, NULL), "ibx_enqueue: topic");
    m.topic = "t";
    m.source = "";
    expect_bad_arg(s, ibx_enqueue(s, &m, NULL), "ibx_enqueue: source");        /* IBX-016 */
    m.source = "src";
    m.message_id = NULL;
    expect_bad_arg(s, ibx_enqueue(s, &m, NULL), "ibx_enqueue: message_id");    /* IBX-017 */
    m.message_id = "id";
    m.payload = NULL;
    expect_bad_arg(s, ibx_enqueue(s, &m, NULL), "ibx_enqueue: payload");       /* IBX-018 */
    m.payload = "a\0b";
    m.payload_len = 3;
    expect_bad_arg(s, ibx_enqueue(s, &m, NULL), "ibx_enqueue: payload");
    memset(long_topic, 't', 256);
    long_topic[256] = '\0';
    m = msg(long_topic, "src", "id", "p");
    expect_bad_arg(s, ibx_enqueue(s, &m, NULL), "ibx_enqueue: topic");         /* IBX-020 */
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), 0);
    m = msg("t", "src", "empty", "");
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);                               /* IBX-019 */
    TT_EQ_INT(ibx_get(s, "empty", "src", &got), IBX_OK);
    TT_EQ_STR(got.payload, "");
    m = msg("Order.Created", "src", "case", "not json {{ \"\\ \xf0\x9f\x98\x80");
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
    TT_EQ_INT(ibx_get(s, "case", "src", &got), IBX_OK);
    TT_EQ_STR(got.topic, "Order.Created");                                      /* IBX-021 */
    TT_EQ_STR(got.payload, "not json {{ \"\\ \xf0\x9f\x98\x80");               /* IBX-022 */
    ibx_store_close(s);
}

static void test_023_024_due(void) {
    ibx_store *s = fresh();
    ibx_new_message later = msg("t", "src", "later", "p"), past = msg("t", "src", "past", "p");
    const ibx_message *ms;
    char owner[37];
    TT_ASSERT(s != NULL);
    ibx_owner_token(s, owner);
    later.due_utc_ms = now_ms() + 1500;
    past.due_utc_ms = now_ms() - 60000;
    TT_EQ_INT(ibx_enqueue(s, &later, NULL), IBX_OK);
    TT_EQ_INT(ibx_enqueue(s, &past, NULL), IBX_OK);
    TT_ASSERT(enqueue(s, "t", "src", "now"));
    TT_EQ_INT(claim(s, owner, 10, &ms), 2); /* past and now, not later */
    sleep_ms(1700);
    TT_EQ_INT(claim(s, owner, 10, &ms), 1);
    TT_EQ_STR(ms[0].message_id, "later");
    TT_EQ_INT(ms[0].due_time_ms, later.due_utc_ms);
    ibx_store_close(s);
}

static int64_t stuck_clock(void *user) { (void)user; return 86400000; }

static void test_025_026_seen_times(void) {
    ibx_store_desc d;
    ibx_store *s = fresh(), *skewed = NULL;
    ibx_message m;
    int64_t before = now_ms(), first;
    TT_ASSERT(s != NULL);
    memset(&d, 0, sizeof d);
    d.connection_string = g_conn;
    d.hooks.clock.now_utc_ms = stuck_clock; /* the client clock does not matter */
    d.hooks.logger.log = keep_log;
    TT_EQ_INT(ibx_store_open(&d, &skewed), IBX_OK);
    TT_ASSERT(enqueue(skewed, "t", "src", "times"));
    TT_EQ_INT(ibx_get(s, "times", "src", &m), IBX_OK);
    TT_EXPECT(m.first_seen_ms >= before - 5000 && m.first_seen_ms <= now_ms() + 5000); /* IBX-025 */
    first = m.first_seen_ms;
    sleep_ms(30);
    TT_ASSERT(enqueue(skewed, "t", "src", "times"));
    TT_EQ_INT(ibx_get(s, "times", "src", &m), IBX_OK);
    TT_EQ_INT(m.first_seen_ms, first);
    TT_EXPECT(m.last_seen_ms > first);                                                 /* IBX-026 */
    ibx_store_close(skewed);
    ibx_store_close(s);
}

static void test_027_initial(void) {
    ibx_store *s = fresh();
    ibx_message m;
    TT_ASSERT(s && enqueue(s, "t", "src", "new"));
    TT_EQ_INT(ibx_get(s, "new", "src", &m), IBX_OK);
    TT_EQ_INT(m.attempt, 0);
    TT_EQ_INT(m.status, IBX_STATUS_PROCESSING);
    TT_EQ_STR(ibx_status_name(m.status), "Processing");
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T} WHERE \"Status\" = 'Processing'"), 1);
    ibx_store_close(s);
}

static void test_028_done_unchanged(void) {
    ibx_store *s = fresh();
    ibx_new_message m = msg("t", "src", "d", "original");
    ibx_message got;
    int enq = -1;
    TT_ASSERT(s != NULL);
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
    TT_EQ_INT(ibx_mark_processed(s, "d", "src"), IBX_OK);
    m = msg("t2", "src", "d", "changed");
    TT_EQ_INT(ibx_enqueue(s, &m, &enq), IBX_OK);
    TT_EQ_INT(enq, 0);
    TT_EQ_INT(ibx_get(s, "d", "src", &got), IBX_OK);
    TT_EQ_INT(got.status, IBX_STATUS_DONE);
    TT_EQ_STR(got.payload, "original");
    TT_EQ_STR(got.topic, "t");
    TT_EQ_INT(ibx_mark_processing(s, "d", "src"), IBX_OK); /* Done stays Done */
    TT_EQ_INT(status_of(s, "src", "d"), IBX_STATUS_DONE);
    ibx_store_close(s);
}

static void test_029_refresh(void) {
    ibx_store *s = fresh();
    static const char *const ids[] = {"seen", "processing", "dead"};
    unsigned char h[32];
    int i;
    TT_ASSERT(s != NULL);
    TT_EQ_INT(seen(s, "seen", "src"), 0);
    TT_ASSERT(enqueue(s, "old", "src", "processing"));
    TT_ASSERT(enqueue(s, "old", "src", "dead"));
    TT_EQ_INT(ibx_mark_dead(s, "dead", "src"), IBX_OK);
    ibx_sha256("new", 3, h);
    for (i = 0; i < 3; i++) {
        ibx_new_message m = msg("new.topic", "src", ids[i], "new payload");
        ibx_message got;
        m.hash = h;
        m.hash_len = 32;
        m.due_utc_ms = now_ms() - 1000;
        TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
        TT_EQ_INT(ibx_get(s, ids[i], "src", &got), IBX_OK);
        TT_EQ_STR(got.topic, "new.topic");
        TT_EQ_STR(got.payload, "new payload");
        TT_EXPECT(got.hash_len == 32 && memcmp(got.hash, h, 32) == 0);
        TT_EQ_INT(got.due_time_ms, m.due_utc_ms);
        TT_EQ_INT(got.status, IBX_STATUS_PROCESSING); /* enqueued means: process it */
    }
    ibx_store_close(s);
}

/* A redelivery with new content while the message is in flight (IBX-029
 * updates the row): the holder's ack does not make it Done, since no
 * handler saw the new content; the row is ready again, the next claim
 * gets the new payload. The holder keeps its lease (renewals work; nobody
 * else claims it meanwhile). A redelivery of the same content in flight
 * changes nothing: the ack makes it Done. A fail by the holder of the old
 * content does not end the new one Dead. */
static void test_redelivery_in_flight(void) {
    ibx_store *s = fresh();
    char owner[37], other[37];
    const ibx_message *ms;
    ibx_message got;
    ibx_key k;
    int64_t changed = -1;
    int enqueued = -1;
    ibx_new_message v1 = msg("t", "src", "m1", "{\"v\":1}"), v2 = msg("t", "src", "m1", "{\"v\":2}");
    TT_ASSERT(s != NULL);
    ibx_owner_token(s, owner);
    ibx_owner_token(s, other);
    k.source = "src";
    k.message_id = "m1";
    /* new content in flight: the ack puts it back, the next claim handles v2 */
    TT_EQ_INT(ibx_enqueue(s, &v1, NULL), IBX_OK);
    TT_EQ_INT(claim(s, owner, 10, &ms), 1);
    TT_EQ_STR(ms[0].payload, "{\"v\":1}");
    TT_EQ_INT(ibx_enqueue(s, &v2, &enqueued), IBX_OK);
    TT_EQ_INT(enqueued, 1);
    TT_EQ_INT(ibx_get(s, "m1", "src", &got), IBX_OK);
    TT_EQ_STR(got.payload, "{\"v\":2}"); /* IBX-029: the row has the new content */
    TT_EQ_INT(claim(s, other, 10, &ms), 0);  /* still leased to the holder */
    TT_EQ_INT(ibx_lease_extend(s, owner, &k, 1, 30, &changed), IBX_OK);
    TT_EQ_INT(changed, 1);
    TT_EQ_INT(ibx_ack(s, owner, &k, 1, &changed), IBX_OK);
    TT_EQ_INT(changed, 1);
    TT_EQ_INT(status_of(s, "src", "m1"), IBX_STATUS_PROCESSING);
    TT_EQ_INT(claim(s, other, 10, &ms), 1);
    TT_EQ_STR(ms[0].payload, "{\"v\":2}");
    TT_EQ_INT(ibx_ack(s, other, &k, 1, &changed), IBX_OK);
    TT_EQ_INT(status_of(s, "src", "m1"), IBX_STATUS_DONE);
    /* the same content in flight: handled once */
    k.message_id = "m2";
    v1.message_id = "m2";
    TT_EQ_INT(ibx_enqueue(s, &v1, NULL), IBX_OK);
    TT_EQ_INT(claim(s, owner, 10, &ms), 1);
    TT_EQ_INT(ibx_enqueue(s, &v1, NULL), IBX_OK);
    TT_EQ_INT(ibx_ack(s, owner, &k, 1, &changed), IBX_OK);
    TT_EQ_INT(changed, 1);
    TT_EQ_INT(status_of(s, "src", "m2"), IBX_STATUS_DONE);
    /* the holder fails the old content: the new one is still to handle */
    k.message_id = "m3";
    v1.message_id = v2.message_id = "m3";
    TT_EQ_INT(ibx_enqueue(s, &v1, NULL), IBX_OK);
    TT_EQ_INT(claim(s, owner, 10, &ms), 1);
    v2.expires_utc_ms = now_ms() + 3600000; /* the envelope's upsert */
    TT_EQ_INT(ibx_enqueue(s, &v2, NULL), IBX_OK);
    TT_EQ_INT(ibx_enqueue(s, &v2, NULL), IBX_OK); /* twice: still one change */
    TT_EQ_INT(ibx_fail(s, owner, &k, 1, "bad v1", &changed), IBX_OK);
    TT_EQ_INT(changed, 1);
    TT_EQ_INT(status_of(s, "src", "m3"), IBX_STATUS_PROCESSING);
    TT_EQ_INT(claim(s, other, 10, &ms), 1);
    TT_EQ_STR(ms[0].payload, "{\"v\":2}");
    /* a token of version 0 would look marked: refused */
    TT_EQ_INT(ibx_claim(s, "01890a5d-ac96-074b-bcce-b302099a8057", 30, 1, &ms, &enqueued), IBX_ERR_INVALID_ARG);
    ibx_store_close(s);
}

/* ---- claim -------------------------------------------------------------------------------------- */

static void test_030_claim_locks(void) {
    ibx_store *s = fresh();
    char a[37], b[37];
    const ibx_message *ms;
    int i;
    TT_ASSERT(s != NULL);
    ibx_owner_token(s, a);
    ibx_owner_token(s, b);
    for (i = 0; i < 4; i++) {
        char id[16];
        snprintf(id, sizeof id, "m%d", i);
        TT_ASSERT(enqueue(s, "t", "src", id));
    }
    TT_EQ_INT(claim(s, a, 3, &ms), 3);
    for (i = 0; i < 3; i++) TT_EQ_STR(ms[i].owner_token, a);
    TT_EQ_INT(claim(s, b, 10, &ms), 1); /* only the one a does not hold */
    ibx_store_close(s);
}

static void test_031_038_only_processing(void) {
    ibx_store *s = fresh();
    char owner[37];
    const ibx_message *ms;
    TT_ASSERT(s != NULL);
    ibx_owner_token(s, owner);
    TT_EQ_INT(seen(s, "seen-only", "src"), 0);           /* Seen: not claimable (IBX-031) */
    TT_ASSERT(enqueue(s, "t", "src", "done") && enqueue(s, "t", "src", "dead") && enqueue(s, "t", "src", "ok"));
    TT_EQ_INT(ibx_mark_processed(s, "done", "src"), IBX_OK); /* IBX-038 */
    TT_EQ_INT(ibx_mark_dead(s, "dead", "src"), IBX_OK);
    TT_EQ_INT(claim(s, owner, 10, &ms), 1);
    TT_EQ_STR(ms[0].message_id, "ok");
    TT_EQ_INT(ibx_mark_processing(s, "seen-only", "src"), IBX_OK); /* now it is */
    TT_EQ_INT(claim(s, owner, 10, &ms), 1);
    TT_EQ_STR(ms[0].message_id, "seen-only");
    TT_EQ_INT(ibx_mark_processed(s, "nope", "src"), IBX_ERR_NOT_FOUND);
    ibx_store_close(s);
}

static void test_033_expired_lease(void) {
    ibx_store *s = fresh();
    char a[37], b[37];
    const ibx_message *ms;
    ibx_key k;
    int64_t changed = -1;
    int n = 0;
    TT_ASSERT(s && enqueue(s, "t", "src", "x"));
    ibx_owner_token(s, a);
    ibx_owner_token(s, b);
    TT_EQ_INT(ibx_claim(s, a, 1, 1, &ms, &n), IBX_OK);
    TT_EQ_INT(claim(s, b, 1, &ms), 0); /* leased */
    sleep_ms(1200);
    TT_EQ_INT(claim(s, b, 1, &ms), 1); /* the lease is in the past: claimable */
    TT_EQ_STR(ms[0].owner_token, b);
    k.source = "src";
    k.message_id = "x";
    TT_EQ_INT(ibx_ack(s, a, &k, 1, &changed), IBX_OK);
    TT_EQ_INT(changed, 0); /* the old holder's ack changes nothing */
    ibx_store_close(s);
}

static void test_034_036_claim_fields(void) {
    ibx_store *s = fresh();
    char owner[37];
    const ibx_message *ms;
    int n = 0;
    int64_t t0 = now_ms();
    TT_ASSERT(s && enqueue(s, "topic.x", "src", "f1"));
    ibx_owner_token(s, owner);
    TT_EQ_INT(ibx_claim(s, owner, 45, 5, &ms, &n), IBX_OK);
    TT_EQ_INT(n, 1);
    TT_EQ_STR(ms[0].source, "src");                          /* IBX-036: ids of what was claimed */
    TT_EQ_STR(ms[0].message_id, "f1");
    TT_EQ_STR(ms[0].topic, "topic.x");
    TT_EQ_STR(ms[0].owner_token, owner);                      /* IBX-035 */
    TT_EXPECT(ms[0].locked_until_ms >= t0 + 45000 - 2000 && ms[0].locked_until_ms <= now_ms() + 47000); /* IBX-034 */
    ibx_store_close(s);
}

static void test_037_039_040_041_claim_args(void) {
    ibx_store *s = fresh();
    char owner[37];
    const ibx_message *ms;
    int n = 7, i;
    TT_ASSERT(s != NULL);
    ibx_owner_token(s, owner);
    TT_EQ_INT(ibx_claim(s, owner, 30, 10, &ms, &n), IBX_EMPTY); /* IBX-037 */
    TT_EQ_INT(n, 0);
    for (i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof id, "b%d", i);
        TT_ASSERT(enqueue(s, "t", "src", id));
    }
    TT_EQ_INT(claim(s, owner, 2, &ms), 2);                    /* IBX-039 */
    TT_EQ_INT(ibx_claim(s, owner, 0, 5, &ms, &n), IBX_ERR_OUT_OF_RANGE); /* IBX-040 */
    TT_EQ_STR(ibx_store_last_error(s)->where, "ibx_claim: lease_seconds");
    TT_EQ_INT(ibx_claim(s, owner, -5, 5, &ms, &n), IBX_ERR_OUT_OF_RANGE);
    TT_EQ_INT(ibx_claim(s, owner, 30, 0, &ms, &n), IBX_ERR_OUT_OF_RANGE); /* IBX-041 */
    TT_EQ_STR(ibx_store_last_error(s)->where, "ibx_claim: batch_size");
    TT_EQ_INT(ibx_claim(s, owner, 30, -1, &ms, &n), IBX_ERR_OUT_OF_RANGE);
    ibx_store_close(s);
}

static void test_042_backoff_respected(void) {
    ibx_store *s = fresh();
    char owner[37];
    const ibx_message *ms;
    ibx_key k;
    int64_t changed = 0, delay = 1500;
    TT_ASSERT(s && enqueue(s, "t", "src", "retry"));
    ibx_owner_token(s, owner);
    TT_EQ_INT(claim(s, owner, 1, &ms), 1);
    k.source = "src";
    k.message_id = "retry";
    TT_EQ_INT(ibx_abandon(s, owner, &k, 1, "later", delay, &changed), IBX_OK);
    TT_EQ_INT(claim(s, owner, 1, &ms), 0); /* next attempt is in the future */
    sleep_ms(1700);
    TT_EQ_INT(claim(s, owner, 1, &ms), 1);
    ibx_store_close(s);
}

static void test_043_130_empty_token(void) {
    ibx_store *s = fresh();
    const ibx_message *ms;
    ibx_key k = {"src", "x"};
    int n;
    int64_t changed;
    const char *zero = "00000000-0000-0000-0000-000000000000";
    TT_ASSERT(s != NULL);
    expect_bad_arg(s, ibx_claim(s, zero, 30, 1, &ms, &n), "ibx_claim: owner_token");
    expect_bad_arg(s, ibx_ack(s, zero, &k, 1, &changed), "ibx_ack: owner_token");
    expect_bad_arg(s, ibx_abandon(s, zero, &k, 1, NULL, IBX_DELAY_BACKOFF, &changed), "ibx_abandon: owner_token");
    expect_bad_arg(s, ibx_fail(s, zero, &k, 1, "e", &changed), "ibx_fail: owner_token");
    expect_bad_arg(s, ibx_claim(s, "nonsense", 30, 1, &ms, &n), "ibx_claim: owner_token");
    ibx_store_close(s);
}

/* ---- ack, abandon, fail --------------------------------------------------------------------------- */

static void test_044_049_ack(void) {
    ibx_store *s = fresh();
    char owner[37];
    const ibx_message *ms;
    ibx_key keys[2];
    ibx_message m;
    int64_t changed = -1;
    TT_ASSERT(s && enqueue(s, "t", "src", "a1") && enqueue(s, "t", "src", "a2"));
    ibx_owner_token(s, owner);
    TT_EQ_INT(claim(s, owner, 2, &ms), 2);
    keys[0].source = ms[0].source;
    keys[0].message_id = ms[0].message_id;
    keys[1].source = ms[1].source;
    keys[1].message_id = ms[1].message_id;
    TT_EQ_INT(ibx_ack(s, owner, keys, 2, &changed), IBX_OK);
    TT_EQ_INT(changed, 2);
    TT_EQ_INT(ibx_get(s, "a1", "src", &m), IBX_OK);
    TT_EQ_INT(m.status, IBX_STATUS_DONE);                       /* IBX-044 */
    TT_EXPECT(m.owner_token[0] == '\0' && m.locked_until_ms == 0); /* IBX-049 */
    TT_EQ_INT(claim(s, owner, 10, &ms), 0);                      /* IBX-047 */
    TT_EQ_INT(seen(s, "a2", "src"), 1);
    ibx_store_close(s);
}

/* op by a wrong owner or on unknown keys changes nothing, without error. */
static void wrong_owner_case(char op) {
    ibx_store *s = fresh();
    char owner[37], thief[37];
    const ibx_message *ms;
    ibx_key keys[3];
    int64_t changed = 99;
    ibx_result r;
    TT_ASSERT(s && enqueue(s, "t", "src", "w1") && enqueue(s, "t", "src", "w2"));
    ibx_owner_token(s, owner);
    ibx_owner_token(s, thief);
    TT_EQ_INT(claim(s, owner, 2, &ms), 2);
    keys[0].source = "src"; keys[0].message_id = "w1";
    keys[1].source = "src"; keys[1].message_id = "w2";
    keys[2].source = "src"; keys[2].message_id = "no-such";
#define OP(tok, k, n) (op == 'a' ? ibx_ack(s, tok, k, n, &changed)                        \
                     : op == 'b' ? ibx_abandon(s, tok, k, n, "x", IBX_DELAY_BACKOFF, &changed)          \
                                 : ibx_fail(s, tok, k, n, "x", &changed))
    r = OP(thief, keys, 2);
    TT_EQ_INT(r, IBX_OK);
    TT_EQ_INT(changed, 0);
    TT_EQ_INT(status_of(s, "src", "w1"), IBX_STATUS_PROCESSING);
    r = OP(owner, keys + 2, 1);
    TT_EQ_INT(r, IBX_OK);
    TT_EQ_INT(changed, 0);
    r = OP(owner, keys, 3);
    TT_EQ_INT(r, IBX_OK);
    TT_EQ_INT(changed, 2);
    /* NULL keys: an argument error; an empty set: a no-op. */
    r = OP(owner, NULL, 1);
    TT_EQ_INT(r, IBX_ERR_INVALID_ARG);
    changed = 5;
    r = OP(owner, NULL, 0);
    TT_EQ_INT(r, IBX_OK);
    TT_EQ_INT(changed, 0);
#undef OP
    ibx_store_close(s);
}

static void test_045_046_048_ack_owner(void) { wrong_owner_case('a'); }
static void test_054_055_059_abandon_owner(void) { wrong_owner_case('b'); }
static void test_062_063_066_fail_owner(void) { wrong_owner_case('f'); }

static void test_050_053_057_abandon(void) {
    ibx_store *s = fresh();
    char owner[37];
    const ibx_message *ms;
    ibx_key k = {"src", "ab"};
    ibx_message m;
    int64_t changed = 0, t0, delay = 7000;
    int round;
    TT_ASSERT(s && enqueue(s, "t", "src", "ab"));
    ibx_owner_token(s, owner);
    for (round = 0; round < 3; round++) { /* default: 1 s, 2 s, 4 s from the attempt count */
        TT_EQ_INT(claim(s, owner, 1, &ms), 1);
        t0 = now_ms();
        TT_EQ_INT(ibx_abandon(s, owner, &k, 1, "boom", IBX_DELAY_BACKOFF, &changed), IBX_OK);
        TT_EQ_INT(ibx_get(s, "ab", "src", &m), IBX_OK);
        TT_EXPECT(m.owner_token[0] == '\0' && m.locked_until_ms == 0); /* IBX-050 */
        TT_EQ_INT(m.attempt, round + 1);                                /* IBX-051 */
        TT_EQ_STR(m.last_error, "boom");                                /* IBX-057 */
        TT_EXPECT(m.next_attempt_ms >= t0 + (1000 << round) - 1500);    /* IBX-052 */
        TT_EXPECT(m.next_attempt_ms <= now_ms() + (1000 << round) + 1500);
        TT_ASSERT(sql(s, g_pg ? "UPDATE {T} SET \"NextAttemptAt\" = now()" : "UPDATE {T} SET \"NextAttemptAt\" = {W}"));
    }
    TT_EQ_INT(claim(s, owner, 1, &ms), 1);
    t0 = now_ms();
    TT_EQ_INT(ibx_abandon(s, owner, &k, 1, NULL, delay, &changed), IBX_OK); /* IBX-053 */
    TT_EQ_INT(ibx_get(s, "ab", "src", &m), IBX_OK);
    TT_EXPECT(m.next_attempt_ms >= t0 + 7000 - 1500 && m.next_attempt_ms <= now_ms() + 8500);
    TT_EQ_STR(m.last_error, "boom"); /* no new error: the old one stays */
    ibx_store_close(s);
}

static void test_056_available_again(void) {
    ibx_store *s = fresh();
    char owner[37];
    const ibx_message *ms;
    ibx_key k = {"src", "again"};
    int64_t changed, delay = 1000;
    TT_ASSERT(s && enqueue(s, "t", "src", "again"));
    ibx_owner_token(s, owner);
    TT_EQ_INT(claim(s, owner, 1, &ms), 1);
    TT_EQ_INT(ibx_abandon(s, owner, &k, 1, NULL, delay, &changed), IBX_OK);
    TT_EQ_INT(claim(s, owner, 1, &ms), 0);
    sleep_ms(1200);
    TT_EQ_INT(claim(s, owner, 1, &ms), 1);
    ibx_store_close(s);
}

static void test_058_bad_delay(void) {
    ibx_store *s = fresh();
    char owner[37];
    ibx_key k = {"src", "x"};
    int64_t zero = 0, negative = -5, changed;
    TT_ASSERT(s != NULL);
    ibx_owner_token(s, owner);
    TT_EQ_INT(ibx_abandon(s, owner, &k, 1, NULL, zero, &changed), IBX_ERR_OUT_OF_RANGE);
    TT_EQ_STR(ibx_store_last_error(s)->where, "ibx_abandon: delay_ms");
    TT_EQ_INT(ibx_abandon(s, owner, &k, 1, NULL, negative, &changed), IBX_ERR_OUT_OF_RANGE);
    ibx_store_close(s);
}

static void test_060_065_fail(void) {
    ibx_store *s = fresh();
    char owner[37];
    const ibx_message *ms;
    ibx_key k = {"src", "poison"};
    ibx_message m;
    int64_t changed = 0, reaped;
    TT_ASSERT(s && enqueue(s, "t", "src", "poison"));
    ibx_owner_token(s, owner);
    TT_EQ_INT(claim(s, owner, 1, &ms), 1);
    TT_EQ_INT(ibx_fail(s, owner, &k, 1, "cannot parse body", &changed), IBX_OK);
    TT_EQ_INT(changed, 1);
    TT_EQ_INT(ibx_get(s, "poison", "src", &m), IBX_OK);
    TT_EQ_INT(m.status, IBX_STATUS_DEAD);                          /* IBX-060 */
    TT_EQ_STR(m.last_error, "cannot parse body");                  /* IBX-061 */
    TT_EXPECT(m.owner_token[0] == '\0' && m.locked_until_ms == 0); /* IBX-065 */
    TT_EQ_INT(claim(s, owner, 10, &ms), 0);                         /* IBX-064 */
    TT_EQ_INT(ibx_reap(s, &reaped), IBX_OK);
    TT_EQ_INT(claim(s, owner, 10, &ms), 0);
    ibx_store_close(s);
}

static void test_067_fail_needs_error(void) {
    ibx_store *s = fresh();
    char owner[37];
    ibx_key k = {"src", "x"};
    int64_t changed;
    TT_ASSERT(s != NULL);
    ibx_owner_token(s, owner);
    expect_bad_arg(s, ibx_fail(s, owner, &k, 1, NULL, &changed), "ibx_fail: error");
    /* Text PostgreSQL and MariaDB could not store is refused before any SQL
     * (CORE-ERROR-UTF8). */
    expect_bad_arg(s, ibx_fail(s, owner, &k, 1, "cut \xc3", &changed), "ibx_fail: error");
    expect_bad_arg(s, ibx_abandon(s, owner, &k, 1, "\xff", 1000, &changed), "ibx_abandon: last_error");
    ibx_store_close(s);
}

static void test_068_071_reap(void) {
    ibx_store *s = fresh();
    char owner[37];
    const ibx_message *ms;
    ibx_key k;
    ibx_message m;
    int64_t reaped = -1, changed;
    int n = 0;
    TT_ASSERT(s && enqueue(s, "t", "src", "r1") && enqueue(s, "t", "src", "r2") && enqueue(s, "t", "src", "r3"));
    ibx_owner_token(s, owner);
    TT_EQ_INT(ibx_claim(s, owner, 1, 3, &ms, &n), IBX_OK);
    k.source = "src";
    k.message_id = "r1";
    TT_EQ_INT(ibx_ack(s, owner, &k, 1, &changed), IBX_OK);
    k.message_id = "r2";
    TT_EQ_INT(ibx_fail(s, owner, &k, 1, "dead", &changed), IBX_OK);
    TT_EQ_INT(ibx_reap(s, &reaped), IBX_OK);
    TT_EQ_INT(reaped, 0);
    sleep_ms(1300);
    TT_EQ_INT(ibx_reap(s, &reaped), IBX_OK);
    TT_EQ_INT(reaped, 1);                                          /* IBX-068 */
    TT_EQ_INT(ibx_get(s, "r3", "src", &m), IBX_OK);
    TT_EXPECT(m.owner_token[0] == '\0' && m.locked_until_ms == 0); /* IBX-069 */
    TT_EQ_INT(status_of(s, "src", "r1"), IBX_STATUS_DONE);         /* IBX-071 */
    TT_EQ_INT(status_of(s, "src", "r2"), IBX_STATUS_DEAD);
    TT_EQ_INT(claim(s, owner, 10, &ms), 1);                         /* IBX-070 */
    TT_EQ_STR(ms[0].message_id, "r3");
    ibx_store_close(s);
}

/* ---- dispatcher ------------------------------------------------------------------------------------ */

typedef struct probe {
    int calls, fail_until;
    ibx_outcome fail_with;
    ibx_message last;
    char source[64], id[64], payload[64];
} probe;

static ibx_outcome probe_handler(const ibx_message *m, char *error, size_t size, void *user) {
    probe *p = (probe *)user;
    p->calls++;
    p->last = *m;
    snprintf(p->source, sizeof p->source, "%s", m->source);
    snprintf(p->id, sizeof p->id, "%s", m->message_id);
    snprintf(p->payload, sizeof p->payload, "%s", m->payload);
    if (p->calls <= p->fail_until) {
        snprintf(error, size, "simulated failure %d", p->calls);
        return p->fail_with;
    }
    return IBX_DONE;
}

static int64_t tiny_backoff(int attempt, void *user) { (void)attempt; (void)user; return 1; }

static ibx_dispatcher *dispatcher(ibx_store *s, int max_attempts, ibx_backoff_fn backoff) {
    ibx_dispatcher_desc d;
    ibx_dispatcher *out = NULL;
    memset(&d, 0, sizeof d);
    d.store = s;
    d.max_attempts = max_attempts;
    d.backoff = backoff;
    if (ibx_dispatcher_create(&d, &out) != IBX_OK) printf("    dispatcher_create failed\n");
    return out;
}

/* A line of ibx_metrics_text's output, whole. */
static int has_line(const char *text, const char *line) {
    size_t n = strlen(line);
    const char *p = text;
    while ((p = strstr(p, line)) != NULL) {
        if ((p == text || p[-1] == '\n') && p[n] == '\n') return 1;
        p += n;
    }
    printf("    missing line: %s\n", line);
    return 0;
}

static void test_metrics_text(void) {
    ibx_store_desc sd;
    ibx_store *clean = fresh(), *s = NULL;
    ibx_dispatcher *d;
    probe ok, poison;
    char *text;
    const ibx_message *ms;
    size_t needed = 0;
    int n;
    ibx_run_stats st;
    TT_ASSERT(clean != NULL);
    ibx_store_close(clean);
    memset(&sd, 0, sizeof sd);
    sd.connection_string = g_conn;
    sd.store_id = "in\"box\\";
    sd.hooks.logger.log = keep_log;
    TT_EQ_INT(ibx_store_open(&sd, &s), IBX_OK);
    TT_ASSERT(enqueue(s, "ok", "src", "1") && enqueue(s, "ok\n2", "src", "2") && enqueue(s, "poison", "src", "3"));
    memset(&ok, 0, sizeof ok);
    memset(&poison, 0, sizeof poison);
    poison.fail_until = 9;
    poison.fail_with = IBX_DEAD;
    d = dispatcher(s, 0, NULL);
    TT_ASSERT(d != NULL);
    ibx_dispatcher_on(d, "ok", probe_handler, &ok);
    ibx_dispatcher_on(d, "ok\n2", probe_handler, &ok);
    ibx_dispatcher_on(d, "poison", probe_handler, &poison);
    TT_EQ_INT(ibx_dispatcher_run_once(d, &st), IBX_OK);
    ibx_dispatcher_destroy(d);
    TT_ASSERT(enqueue(s, "ok", "src", "4") && enqueue(s, "ok", "src", "5"));
    TT_EQ_INT(ibx_claim(s, "01890a5d-ac96-774b-bcce-b302099a8057", 60, 1, &ms, &n), IBX_OK);
    TT_EQ_INT(ibx_claim(s, "01890a5d-ac96-774b-bcce-b302099a8058", 1, 1, &ms, &n), IBX_OK);
    TT_ASSERT(enqueue(s, "ok", "src", "6"));
    {
        ibx_new_message later = msg("ok", "src", "7", "{}");
        later.due_utc_ms = now_ms() + 3600 * 1000;
        TT_EQ_INT(ibx_enqueue(s, &later, NULL), IBX_OK);
    }
    sleep_ms(1100); /* the 1 s lease runs out */
    TT_EQ_INT(ibx_cleanup(s, 1, 0, NULL), IBX_OK); /* the two done ones: expired */
    TT_EQ_INT(ibx_metrics_text(s, NULL, 0, &needed), IBX_ERR_OUT_OF_RANGE);
    text = (char *)malloc(needed);
    TT_ASSERT(text != NULL);
    TT_EQ_INT(ibx_metrics_text(s, text, needed, NULL), IBX_OK);
    TT_EXPECT(has_line(text, "ibx_messages_enqueued_total{store=\"in\\\"box\\\\\"} 7"));
    TT_EXPECT(has_line(text, "ibx_messages_dispatched_total{store=\"in\\\"box\\\\\"} 2"));
    TT_EXPECT(has_line(text, "ibx_messages_expired_total{store=\"in\\\"box\\\\\"} 2"));
    TT_EXPECT(has_line(text, "ibx_messages_cleaned_up_total{store=\"in\\\"box\\\\\"} 2"));
    TT_EXPECT(has_line(text, "# TYPE ibx_duplicates_total counter"));
    TT_EXPECT(has_line(text, "ibx_queue_ready_messages{store=\"in\\\"box\\\\\"} 2")); /* "6" and the run-out lease */
    TT_EXPECT(has_line(text, "ibx_queue_in_flight_messages{store=\"in\\\"box\\\\\"} 2"));
    TT_EXPECT(has_line(text, "ibx_queue_scheduled_messages{store=\"in\\\"box\\\\\"} 1"));
    TT_EXPECT(has_line(text, "ibx_queue_expired_leases{store=\"in\\\"box\\\\\"} 1"));
    TT_EXPECT(has_line(text, "ibx_queue_dead_messages{store=\"in\\\"box\\\\\"} 1"));
    TT_EXPECT(has_line(text, "ibx_handler_duration_seconds_count{store=\"in\\\"box\\\\\",topic=\"ok\\n2\"} 1"));
    TT_EXPECT(has_line(text, "ibx_handler_duration_seconds_bucket{store=\"in\\\"box\\\\\",topic=\"poison\",le=\"+Inf\"} 1"));
    free(text);
    ibx_store_close(s);
}

static void test_072_periodic_reap(void) {
    ibx_store *s = fresh();
    ibx_dispatcher *d;
    char crashed[37];
    const ibx_message *ms;
    ibx_run_stats st;
    probe p;
    int n;
    TT_ASSERT(s && enqueue(s, "job", "src", "crash"));
    ibx_owner_token(s, crashed);
    TT_EQ_INT(ibx_claim(s, crashed, 1, 1, &ms, &n), IBX_OK);
    sleep_ms(1200);
    memset(&p, 0, sizeof p);
    d = dispatcher(s, 0, NULL);
    TT_ASSERT(d != NULL);
    ibx_dispatcher_on(d, "job", probe_handler, &p);
    TT_EQ_INT(ibx_dispatcher_run_once(d, &st), IBX_OK);
    TT_EQ_INT(st.reaped, 1);
    TT_EQ_INT(p.calls, 1);
    ibx_dispatcher_destroy(d);
    ibx_store_close(s);
}

static void test_073_074_route(void) {
    ibx_store *s = fresh();
    ibx_dispatcher *d;
    ibx_run_stats st;
    probe a, b;
    int i;
    TT_ASSERT(s && enqueue(s, "a.created", "src", "ma") && enqueue(s, "b.created", "src", "mb") &&
              enqueue(s, "orphan", "src", "mo"));
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    d = dispatcher(s, 2, tiny_backoff);
    TT_ASSERT(d != NULL);
    ibx_dispatcher_on(d, "a.created", probe_handler, &a);
    ibx_dispatcher_on(d, "b.created", probe_handler, &b);
    log_reset();
    TT_EQ_INT(ibx_dispatcher_run_once(d, &st), IBX_OK);
    TT_EQ_INT(a.calls, 1);
    TT_EQ_STR(a.id, "ma");                                        /* IBX-073 */
    TT_EQ_INT(b.calls, 1);
    TT_EQ_STR(b.id, "mb");
    TT_EQ_INT(st.no_handler, 1);                                   /* IBX-074 */
    TT_EXPECT(logged("WARN [ibx-test]", "no handler for topic orphan", "mo"));
    for (i = 0; i < 4; i++) { /* never killed for lack of a handler */
        sleep_ms(5);
        ibx_dispatcher_run_once(d, &st);
    }
    TT_EQ_INT(status_of(s, "src", "mo"), IBX_STATUS_PROCESSING);
    ibx_dispatcher_destroy(d);
    ibx_store_close(s);
}

static void test_075_083_failures(void) {
    ibx_store *s = fresh();
    ibx_dispatcher *d;
    ibx_run_stats st;
    probe flaky, poison;
    ibx_message m;
    int rounds;
    TT_ASSERT(s && enqueue(s, "flaky", "src", "f") && enqueue(s, "poison", "src", "p"));
    memset(&flaky, 0, sizeof flaky);
    memset(&poison, 0, sizeof poison);
    flaky.fail_until = 99;
    flaky.fail_with = IBX_RETRY;
    poison.fail_until = 99;
    poison.fail_with = IBX_DEAD;
    d = dispatcher(s, 3, tiny_backoff);
    TT_ASSERT(d != NULL);
    ibx_dispatcher_on(d, "flaky", probe_handler, &flaky);
    ibx_dispatcher_on(d, "poison", probe_handler, &poison);
    log_reset();
    for (rounds = 0; rounds < 20; rounds++) {
        sleep_ms(3);
        if (ibx_dispatcher_run_once(d, &st) != IBX_OK) break;
    }
    TT_EQ_INT(poison.calls, 1);                   /* permanent: Dead at once (IBX-075) */
    TT_EQ_INT(status_of(s, "src", "p"), IBX_STATUS_DEAD);
    TT_EQ_INT(flaky.calls, 3);                    /* transient: at most max_attempts runs (IBX-083) */
    TT_EQ_INT(ibx_get(s, "f", "src", &m), IBX_OK);
    TT_EQ_INT(m.status, IBX_STATUS_DEAD);
    TT_EQ_STR(m.last_error, "gave up after 3 attempts: simulated failure 3");
    /* IBX-111: a failure at ERROR with id and error; a dead message one line (CORE-LOG-LEVELS) */
    TT_EXPECT(logged("ERROR [ibx-test]", "handler failed for f from src", "simulated failure 1"));
    TT_EXPECT(logged("ERROR [ibx-test]", "message f from src topic=flaky is dead", "gave up after 3 attempts"));
    TT_EXPECT(logged("ERROR [ibx-test]", "message p from src topic=poison is dead", "simulated failure 1"));
    TT_EXPECT(!logged("ERROR [ibx-test]", "handler failed for p from src", NULL)); /* dead: said once */
    ibx_dispatcher_destroy(d);
    ibx_store_close(s);
}

/* A sender's message id, source and topic reach the log quoted when they
 * need it: the enqueue, dedup and mark lines and the dispatcher's
 * (IBX-LOG-KV). */
static void test_log_kv_fields(void) {
    ibx_store *s;
    ibx_dispatcher *d;
    ibx_run_stats st;
    probe flaky;
    int processed = 0;
    ibx_new_message m = msg("t\"y", "s x", "a b\"c", "{}");
    g_message_log_level = IBX_LOG_INFO;
    s = fresh();
    g_message_log_level = (ibx_log_level)0;
    TT_ASSERT(s != NULL);
    log_reset();
    TT_EQ_INT(ibx_already_processed(s, "a b\"c", "s x", NULL, 0, &processed), IBX_OK);
    TT_EXPECT(logged("DEBUG [ibx-test]", "dedup \"a b\\\"c\" from \"s x\"", "not processed"));
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
    TT_EXPECT(logged("INFO [ibx-test]", "enqueued topic=\"t\\\"y\" source=\"s x\"", "id=\"a b\\\"c\""));
    memset(&flaky, 0, sizeof flaky);
    flaky.fail_until = 99;
    flaky.fail_with = IBX_RETRY;
    d = dispatcher(s, 3, tiny_backoff);
    TT_ASSERT(d != NULL);
    ibx_dispatcher_on(d, "t\"y", probe_handler, &flaky);
    TT_EQ_INT(ibx_dispatcher_run_once(d, &st), IBX_OK);
    TT_EXPECT(logged("ERROR [ibx-test]", "handler failed for \"a b\\\"c\" from \"s x\" topic=\"t\\\"y\"", NULL));
    TT_EXPECT(!logged("a b\"c", NULL, NULL) && !logged("topic=t\"y", NULL, NULL));
    ibx_dispatcher_destroy(d);
    ibx_store_close(s);
}

static void test_076_whole_message(void) {
    ibx_store *s = fresh();
    ibx_dispatcher *d;
    ibx_run_stats st;
    probe p;
    ibx_message stored;
    ibx_new_message m = msg("order.paid", "shop", "o-9", "{\"o\":9}");
    unsigned char h[32];
    TT_ASSERT(s != NULL);
    ibx_sha256("{\"o\":9}", 7, h);
    m.hash = h;
    m.hash_len = 32;
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
    TT_EQ_INT(ibx_get(s, "o-9", "shop", &stored), IBX_OK);
    memset(&p, 0, sizeof p);
    {   /* IBX-110 asks for INFO lines per invocation: the message_log_level option */
        ibx_dispatcher_desc dd;
        memset(&dd, 0, sizeof dd);
        dd.store = s;
        dd.message_log_level = IBX_LOG_INFO;
        d = NULL;
        TT_EQ_INT(ibx_dispatcher_create(&dd, &d), IBX_OK);
    }
    TT_ASSERT(d != NULL);
    ibx_dispatcher_on(d, "order.paid", probe_handler, &p);
    log_reset();
    TT_EQ_INT(ibx_dispatcher_run_once(d, &st), IBX_OK);
    TT_EQ_STR(p.source, "shop");
    TT_EQ_STR(p.id, "o-9");
    TT_EQ_STR(p.payload, "{\"o\":9}");
    TT_EQ_INT(p.last.attempt, 0);
    TT_EQ_INT(p.last.first_seen_ms, stored.first_seen_ms);
    TT_EQ_INT(p.last.last_seen_ms, stored.last_seen_ms);
    TT_EQ_INT(p.last.hash_len, 32);
    TT_EXPECT(logged("INFO [ibx-test]", "handling o-9 from shop", "order.paid")); /* IBX-110 */
    ibx_dispatcher_destroy(d);
    ibx_store_close(s);
}

typedef struct shared {
    pthread_mutex_t mu;
    char in_flight[64][80];
    int in_flight_n, overlaps, total, handled[2];
    int ready;                   /* workers set up: both start together */
} shared;
typedef struct worker_arg {
    shared *sh;
    int index;
} worker_arg;

static ibx_outcome tracking(const ibx_message *m, char *e, size_t n, void *user) {
    worker_arg *w = (worker_arg *)user;
    shared *sh = w->sh;
    char key[80];
    int i;
    (void)e; (void)n;
    snprintf(key, sizeof key, "%s/%s", m->source, m->message_id);
    pthread_mutex_lock(&sh->mu);
    for (i = 0; i < sh->in_flight_n; i++)
        if (strcmp(sh->in_flight[i], key) == 0) sh->overlaps++;
    snprintf(sh->in_flight[sh->in_flight_n++], 80, "%s", key);
    pthread_mutex_unlock(&sh->mu);
    sleep_ms(1);
    pthread_mutex_lock(&sh->mu);
    for (i = 0; i < sh->in_flight_n; i++)
        if (strcmp(sh->in_flight[i], key) == 0) {
            memcpy(sh->in_flight[i], sh->in_flight[--sh->in_flight_n], 80);
            break;
        }
    sh->total++;
    sh->handled[w->index]++;
    pthread_mutex_unlock(&sh->mu);
    return IBX_DONE;
}

/* Both workers connected before either claims: otherwise a fast one may
 * drain everything while the other is still connecting. */
static void start_together(pthread_mutex_t *mu, int *ready) {
    int n;
    pthread_mutex_lock(mu);
    ++*ready;
    pthread_mutex_unlock(mu);
    do {
        pthread_mutex_lock(mu);
        n = *ready;
        pthread_mutex_unlock(mu);
        if (n < 2) sleep_ms(1);
    } while (n < 2);
}

static void *worker(void *arg) {
    worker_arg *w = (worker_arg *)arg;
    ibx_store *s = open_table("Inbox", 0);
    ibx_dispatcher *d;
    ibx_run_stats st;
    ibx_result r;
    d = s ? dispatcher(s, 0, NULL) : NULL;
    start_together(&w->sh->mu, &w->sh->ready); /* also on failure: never leave the other waiting */
    if (d) {
        ibx_dispatcher_on(d, "work", tracking, w);
        while ((r = ibx_dispatcher_run_once(d, &st)) == IBX_OK || r == IBX_ERR_DB_TRANSIENT) {
        }
        ibx_dispatcher_destroy(d);
    }
    ibx_store_close(s);
    return NULL;
}

static void test_078_079_106_two_workers(void) {
    ibx_store *s = fresh();
    shared sh;
    worker_arg args[2];
    pthread_t th[2];
    int i;
    TT_ASSERT(s != NULL);
    for (i = 0; i < 150; i++) {
        char id[16];
        snprintf(id, sizeof id, "w%d", i);
        TT_ASSERT(enqueue(s, "work", i % 2 ? "a" : "b", id));
    }
    memset(&sh, 0, sizeof sh);
    pthread_mutex_init(&sh.mu, NULL);
    for (i = 0; i < 2; i++) {
        args[i].sh = &sh;
        args[i].index = i;
        TT_ASSERT(pthread_create(&th[i], NULL, worker, &args[i]) == 0);
    }
    for (i = 0; i < 2; i++) pthread_join(th[i], NULL);
    TT_EQ_INT(sh.overlaps, 0);
    TT_EQ_INT(sh.total, 150);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T} WHERE \"Status\" = 'Done'"), 150);
    TT_EXPECT(sh.handled[0] > 0 && sh.handled[1] > 0);
    pthread_mutex_destroy(&sh.mu);
    ibx_store_close(s);
}

static void test_080_082_backoff(void) {
    /* Default backoff min(2^attempt s, 60 s) (pure), and a custom one applied. */
    ibx_store *s = fresh();
    ibx_dispatcher *d;
    ibx_run_stats st;
    probe p;
    ibx_message m;
    int64_t t0;
    TT_EQ_INT(ibx_backoff_default_ms(0), 1000);
    TT_EQ_INT(ibx_backoff_default_ms(3), 8000);
    TT_EQ_INT(ibx_backoff_default_ms(6), 60000);
    TT_EQ_INT(ibx_backoff_default_ms(1000), 60000);
    TT_ASSERT(s && enqueue(s, "flaky", "src", "bk"));
    memset(&p, 0, sizeof p);
    p.fail_until = 1;
    p.fail_with = IBX_RETRY;
    d = dispatcher(s, 0, NULL);
    TT_ASSERT(d != NULL);
    ibx_dispatcher_on(d, "flaky", probe_handler, &p);
    t0 = now_ms();
    TT_EQ_INT(ibx_dispatcher_run_once(d, &st), IBX_OK);
    TT_EQ_INT(ibx_get(s, "bk", "src", &m), IBX_OK);
    TT_EXPECT(m.next_attempt_ms >= t0 + 1000 - 1500 && m.next_attempt_ms <= now_ms() + 2500);
    ibx_dispatcher_destroy(d);
    ibx_store_close(s);
}

static void test_084_default_attempts(void) {
    ibx_store *s = fresh();
    ibx_dispatcher *d;
    ibx_run_stats st;
    probe p;
    int rounds;
    TT_ASSERT(s && enqueue(s, "flaky", "src", "ten"));
    memset(&p, 0, sizeof p);
    p.fail_until = 99;
    p.fail_with = IBX_RETRY;
    d = dispatcher(s, 0, tiny_backoff); /* default: 10 */
    TT_ASSERT(d != NULL);
    ibx_dispatcher_on(d, "flaky", probe_handler, &p);
    for (rounds = 0; rounds < 40; rounds++) {
        sleep_ms(3);
        if (ibx_dispatcher_run_once(d, &st) < 0) break;
    }
    TT_EQ_INT(p.calls, 10);
    TT_EQ_INT(status_of(s, "src", "ten"), IBX_STATUS_DEAD);
    ibx_dispatcher_destroy(d);
    ibx_store_close(s);
}

/* ---- cleanup, transactions, schema, logs ----------------------------------------------------------- */

static void test_098_101_cleanup(void) {
    ibx_store *s = fresh();
    int64_t deleted = -1;
    int i;
    TT_ASSERT(s != NULL);
    for (i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof id, "c%d", i);
        TT_ASSERT(enqueue(s, "t", "src", id));
        TT_EQ_INT(ibx_mark_processed(s, id, "src"), IBX_OK);
    }
    TT_EQ_INT(seen(s, "seen", "src"), 0);
    TT_ASSERT(enqueue(s, "t", "src", "processing") && enqueue(s, "t", "src", "dead"));
    TT_EQ_INT(ibx_mark_dead(s, "dead", "src"), IBX_OK);
    TT_EQ_INT(ibx_cleanup(s, 0, 0, &deleted), IBX_OK); /* default retention: 30 days */
    TT_EQ_INT(deleted, 0);
    TT_ASSERT(sql(s, g_pg   ? "UPDATE {T} SET \"LastSeenUtc\" = now() - interval '40 days'"
                     : g_my ? "UPDATE {T} SET \"LastSeenUtc\" = {W} - INTERVAL 40 DAY"
                            : "UPDATE {T} SET \"LastSeenUtc\" = {W} - 3456000000"));
    TT_EQ_INT(ibx_cleanup(s, 0, 2, &deleted), IBX_OK); /* batches of 2 (IBX-101) */
    TT_EQ_INT(deleted, 5);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), 3); /* Seen, Processing, Dead stay (IBX-099) */
    TT_EQ_INT(ibx_cleanup(s, -1, 0, &deleted), IBX_ERR_OUT_OF_RANGE);
    ibx_store_close(s);
}

static void test_102_one_transaction(void) {
    /* A statement the database refuses leaves nothing behind. */
    ibx_store *s = fresh();
    ibx_new_message m = msg("boom", "src", "tx", "p");
    TT_ASSERT(s != NULL);
    if (g_pg) {
        TT_ASSERT(sql(s, "CREATE OR REPLACE FUNCTION ibx_test_boom() RETURNS trigger LANGUAGE plpgsql AS "
                         "$$ BEGIN IF NEW.\"Topic\" = 'boom' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$"));
        TT_ASSERT(sql(s, "DROP TRIGGER IF EXISTS ibx_test_boom ON {T}"));
        TT_ASSERT(sql(s, "CREATE TRIGGER ibx_test_boom BEFORE INSERT OR UPDATE ON {T} FOR EACH ROW "
                         "EXECUTE FUNCTION ibx_test_boom()"));
    } else if (g_my) {
        TT_ASSERT(sql(s, "DROP TRIGGER IF EXISTS ibx_test_boom"));
        TT_ASSERT(sql(s, "CREATE TRIGGER ibx_test_boom BEFORE INSERT ON {T} FOR EACH ROW "
                         "IF NEW.\"Topic\" = 'boom' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'boom'; "
                         "END IF"));
    } else {
        TT_ASSERT(sql(s, "DROP TRIGGER IF EXISTS ibx_test_boom"));
        TT_ASSERT(sql(s, "CREATE TRIGGER ibx_test_boom BEFORE INSERT ON {T} WHEN NEW.\"Topic\" = 'boom' "
                         "BEGIN SELECT RAISE(ABORT, 'boom'); END"));
    }
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_ERR_DB);
    TT_EXPECT(strstr(ibx_store_last_error(s)->message, "boom") != NULL);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), 0);
    TT_ASSERT(sql(s, g_pg ? "DROP TRIGGER ibx_test_boom ON {T}" : "DROP TRIGGER ibx_test_boom"));
    ibx_store_close(s);
}

static void test_105_processes(void) {
    ibx_store *s = fresh();
    pid_t pids[3];
    int w, status, i;
    TT_ASSERT(s != NULL);
    for (i = 0; i < 300; i++) {
        char id[16];
        snprintf(id, sizeof id, "p%d", i);
        TT_ASSERT(enqueue(s, "t", "src", id));
    }
    ibx_store_close(s);
    fflush(stdout);
    for (w = 0; w < 3; w++) {
        pids[w] = fork();
        if (pids[w] == 0) {
            ibx_store *mine = open_table("Inbox", 0);
            char owner[37];
            const ibx_message *ms;
            ibx_key keys[25];
            int n = 0, rc = 0;
            ibx_result r;
            if (!mine) _exit(3);
            ibx_owner_token(mine, owner);
            while ((r = ibx_claim(mine, owner, 60, 25, &ms, &n)) == IBX_OK || r == IBX_ERR_DB_TRANSIENT) {
                if (r != IBX_OK) continue;
                for (i = 0; i < n; i++) {
                    keys[i].source = ms[i].source;
                    keys[i].message_id = ms[i].message_id;
                }
                if (ibx_ack(mine, owner, keys, n, NULL) != IBX_OK) rc = 4;
            }
            ibx_store_close(mine);
            _exit(r == IBX_EMPTY ? rc : 5);
        }
    }
    for (w = 0; w < 3; w++) {
        TT_ASSERT(waitpid(pids[w], &status, 0) == pids[w]);
        TT_EQ_INT(WIFEXITED(status) ? WEXITSTATUS(status) : 99, 0);
    }
    s = open_table("Inbox", 0);
    TT_ASSERT(s != NULL);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T} WHERE \"Status\" = 'Done'"), 300);
    ibx_store_close(s);
}

static int table_exists(ibx_store *s, const char *name) {
    char q[256];
    if (g_pg)
        snprintf(q, sizeof q, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'infra' "
                              "AND table_name = '%s'", name);
    else if (g_my)
        snprintf(q, sizeof q, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() "
                              "AND table_name = '%s'", name);
    else
        snprintf(q, sizeof q, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '%s'", name);
    return scalar(s, q) == 1;
}

static void test_114_117_deploy(void) {
    ibx_store *s = open_table("InboxDeployTest", 0);
    const char *indexes;
    const ibx_message *ms;
    char owner[37];
    int n;
    TT_ASSERT(s != NULL);
    TT_ASSERT(sql(s, "DROP TABLE IF EXISTS {T}"));
    ibx_owner_token(s, owner);
    TT_EQ_INT(ibx_claim(s, owner, 30, 1, &ms, &n), IBX_ERR_DB);  /* IBX-115: nothing created */
    TT_EXPECT(!table_exists(s, "InboxDeployTest"));
    TT_EQ_INT(ibx_store_deploy(s), IBX_OK);                        /* IBX-114 */
    TT_EXPECT(table_exists(s, "InboxDeployTest"));                 /* IBX-117 */
    TT_EQ_INT(ibx_store_deploy(s), IBX_OK);                        /* IBX-116 */
    /* claim (work queue, and the claim's priority order), lease and cleanup
     * indexes (+ the primary key on the servers) */
    indexes = g_pg   ? "SELECT COUNT(*) FROM pg_indexes WHERE tablename = 'InboxDeployTest'"
              : g_my ? "SELECT COUNT(DISTINCT index_name) FROM information_schema.statistics "
                       "WHERE table_schema = DATABASE() AND table_name = 'InboxDeployTest'"
                     : "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' "
                       "AND tbl_name = 'InboxDeployTest' AND sql IS NOT NULL";
    TT_EQ_INT(scalar(s, indexes), g_pg || g_my ? 5 : 4);
    ibx_store_close(s);
    s = open_table("InboxDeployTest", 1);
    TT_ASSERT(s != NULL);
    TT_EQ_INT(ibx_claim(s, owner, 30, 1, &ms, &n), IBX_EMPTY);
    ibx_store_close(s);
}

static void test_107_113_logging(void) {
    ibx_store *s;
    ibx_new_message m = msg("order.paid", "shop", "L1", "card=4111111111111111");
    const ibx_message *ms;
    char owner[37];
    int64_t reaped;
    int processed, n = 0;
    const char *line;
    g_message_log_level = IBX_LOG_INFO; /* the seed asks for enqueues at INFO */
    s = fresh();
    g_message_log_level = (ibx_log_level)0;
    TT_ASSERT(s != NULL);
    log_reset();
    TT_EQ_INT(ibx_already_processed(s, "L1", "shop", NULL, 0, &processed), IBX_OK);
    TT_EXPECT(logged("DEBUG [ibx-test]", "dedup L1 from shop", "not processed"));     /* IBX-107 */
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
    TT_EXPECT(logged("INFO [ibx-test]", "topic=order.paid source=shop", "id=L1"));      /* IBX-108 */
    ibx_owner_token(s, owner);
    TT_EQ_INT(ibx_claim(s, owner, 1, 5, &ms, &n), IBX_OK);
    TT_EXPECT(logged("DEBUG [ibx-test]", "claimed 1 message", NULL));                   /* IBX-109 */
    sleep_ms(1200);
    TT_EQ_INT(ibx_reap(s, &reaped), IBX_OK);
    TT_EXPECT(logged("INFO [ibx-test]", "reaped 1 expired", NULL));                     /* IBX-112 */
    TT_EXPECT(strstr(g_log, "4111111111111111") == NULL);                               /* IBX-127 */
    for (line = g_log; *line; line = strchr(line, '\n') + 1) {                          /* IBX-113 */
        TT_EXPECT(strncmp(strchr(line, '['), "[ibx-test]", 10) == 0);
        if (!strchr(line, '\n')) break;
    }
    ibx_store_close(s);
}

static void test_118_large(void) {
    ibx_store *s = fresh();
    const size_t size = (size_t)16 << 20;
    char *big = (char *)malloc(size + 1);
    ibx_new_message m = msg("big", "src", "big", NULL);
    ibx_message got;
    size_t i;
    TT_ASSERT(s && big);
    for (i = 0; i < size; i++) big[i] = (char)('a' + (i * 13) % 26);
    big[size] = '\0';
    m.payload = big;
    m.payload_len = size;
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
    TT_EQ_INT(ibx_get(s, "big", "src", &got), IBX_OK);
    TT_EQ_INT(got.payload_len, size);
    TT_EXPECT(memcmp(got.payload, big, size) == 0);
    free(big);
    ibx_store_close(s);
}

static void test_122_125_indexes(void) {
    ibx_store *s = fresh();
    TT_ASSERT(s != NULL);
    if (g_pg) {
        TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM pg_indexes WHERE schemaname = 'infra' AND tablename = 'Inbox' "
                            "AND indexname IN ('IX_Inbox_WorkQueue', 'IX_Inbox_Leased', 'IX_Inbox_Cleanup')"), 3);
        TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM pg_indexes WHERE schemaname = 'infra' AND tablename = 'Inbox' "
                            "AND indexdef LIKE '%(\"Source\", \"MessageId\")%'"), 1); /* IBX-125 */
    } else if (g_my) {
        TT_EQ_INT(scalar(s, "SELECT COUNT(DISTINCT index_name) FROM information_schema.statistics "
                            "WHERE table_schema = DATABASE() AND table_name = 'Inbox' "
                            "AND index_name IN ('IX_Inbox_ReadyRank', 'IX_Inbox_LeasedUntil', 'IX_Inbox_DoneAt')"), 3);
        TT_EQ_INT(scalar(s, "SELECT GROUP_CONCAT(column_name ORDER BY seq_in_index) = 'Source,MessageId' "
                            "FROM information_schema.statistics WHERE table_schema = DATABASE() "
                            "AND table_name = 'Inbox' AND index_name = 'PRIMARY'"), 1); /* IBX-125 */
    } else {
        TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'Inbox' "
                            "AND name IN ('IX_Inbox_WorkQueue', 'IX_Inbox_Leased', 'IX_Inbox_Cleanup')"), 3);
        TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'Inbox' "
                            "AND name LIKE 'sqlite_autoindex_Inbox_%'"), 1); /* the (Source, MessageId) key */
    }
    ibx_store_close(s);
}

/* ---- crash-loop quarantine (CORE-CRASH-LOOP) ---------------------------------------- */

static ibx_outcome crash_handler(const ibx_message *m, char *error, size_t size, void *user) {
    (void)m; (void)error; (void)size; (void)user;
    abort(); /* as a segfault or an OOM kill would: no outcome reaches the database */
}

static ibx_outcome done_handler(const ibx_message *m, char *error, size_t size, void *user) {
    (void)m; (void)error; (void)size; (void)user;
    return IBX_DONE;
}

/* A worker process: a dispatcher (1 s lease) runs rounds until none is
 * left or its handler kills it. Returns the wait status. */
static int crash_worker(void) {
    int status = 0;
    pid_t pid;
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        ibx_store *s = open_table("Inbox", 0);
        ibx_dispatcher_desc dd;
        ibx_dispatcher *d = NULL;
        int rounds = 0, empty = 0;
        ibx_result r = IBX_OK;
        if (!s) _exit(3);
        memset(&dd, 0, sizeof dd);
        dd.store = s;
        dd.lease_seconds = 1;
        dd.batch_size = 10;
        if (ibx_dispatcher_create(&dd, &d) != IBX_OK || ibx_dispatcher_on(d, "crash", crash_handler, NULL) != IBX_OK ||
            ibx_dispatcher_on(d, "ok", done_handler, NULL) != IBX_OK)
            _exit(4);
        /* Done when two rounds 50 ms apart find nothing (a released
         * message is due again 1 ms later). */
        while (rounds++ < 100 && ((r = ibx_dispatcher_run_once(d, NULL)) == IBX_OK || empty++ == 0))
            if (r == IBX_EMPTY) sleep_ms(50);
            else empty = 0;
        _exit(r == IBX_EMPTY ? 0 : 5);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
    return status;
}

/* ---- transactional handlers (IBX-TXH-*) ------------------------------------------------ */

/* The inbox's use of them: dedup at the door (ibx_enqueue), then the
 * handler's writes and Done in one transaction: processed exactly once, as
 * far as the database's effects go. */
typedef struct ixh_ctx {
    ibx_outcome outcome;
    int calls;
    int kill_at;                 /* in a crash child: 1 before the write, 2 after it (3, 4: ixh_kill_log) */
    int lose_connection;         /* this many times: the server ends the handler's connection after its write */
} ixh_ctx;

static int ixh_exec(void *hdbc, const char *text) {
#ifdef IBX_SQLITE3_API
    return sqlite3_exec((sqlite3 *)hdbc, text, NULL, NULL, NULL) == SQLITE_OK;
#else
    SQLHSTMT st;
    SQLRETURN rc;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, (SQLHDBC)hdbc, &st))) return 0;
    rc = SQLExecDirect(st, (SQLCHAR *)(uintptr_t)text, SQL_NTS);
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    return SQL_SUCCEEDED(rc) || rc == SQL_NO_DATA;
#endif
}

static int64_t ixh_effects(ibx_store *s, const char *id) {
    char q[320];
    snprintf(q, sizeof q, "SELECT COUNT(*) FROM ibx_txh_effect WHERE msg = '%s'", id);
    return scalar(s, q);
}

static ibx_outcome ixh_handler(const ibx_message *m, void *hdbc, char *error, size_t size, void *user) {
    ixh_ctx *t = (ixh_ctx *)user;
    char q[320];
    t->calls++;
    if (t->kill_at == 1) raise(SIGKILL);
    snprintf(q, sizeof q, "INSERT INTO ibx_txh_effect (msg) VALUES ('%s')", m->message_id);
    if (!ixh_exec(hdbc, q)) {
        snprintf(error, size, "the effect's insert failed");
        return IBX_DEAD;
    }
    if (t->kill_at == 2) raise(SIGKILL);
    if (t->lose_connection > 0) { /* an operator's kill, a failover: this statement fails, and the ack */
        t->lose_connection--;
        ixh_exec(hdbc, g_pg ? "SELECT pg_terminate_backend(pg_backend_pid())" : "KILL CONNECTION_ID()");
    }
    if (t->outcome != IBX_DONE) snprintf(error, size, "ixh says %d", (int)t->outcome);
    return t->outcome;
}

static ibx_result ixh_drain(ibx_store *s, ixh_ctx *t, int lease_seconds, ibx_run_stats *total) {
    ibx_dispatcher_desc dd;
    ibx_dispatcher *d = NULL;
    ibx_run_stats st;
    ibx_result r;
    int rounds = 0;
    memset(&dd, 0, sizeof dd);
    memset(total, 0, sizeof *total);
    dd.store = s;
    dd.lease_seconds = lease_seconds;
    if ((r = ibx_dispatcher_create(&dd, &d)) != IBX_OK) return r;
    r = ibx_dispatcher_on_tx(d, "ixh", ixh_handler, t);
    while (r == IBX_OK && rounds++ < 50) {
        memset(&st, 0, sizeof st);
        r = ibx_dispatcher_run_once(d, &st);
        total->done += st.done, total->retried += st.retried, total->dead += st.dead;
        total->lease_lost += st.lease_lost, total->conflicts += st.conflicts;
    }
    ibx_dispatcher_destroy(d);
    return r;
}

static ibx_store *ixh_fresh(ixh_ctx *t) {
    ibx_store *s = fresh();
    memset(t, 0, sizeof *t);
    t->outcome = IBX_DONE;
    if (s && !(sql(s, "CREATE TABLE IF NOT EXISTS ibx_txh_effect (msg VARCHAR(64) NOT NULL)") &&
               sql(s, "DELETE FROM ibx_txh_effect"))) {
        ibx_store_close(s);
        return NULL;
    }
    return s;
}

/* The server ends the handler's connection after its write: the ack fails
 * on a lost connection, and the message goes back without using an attempt,
 * delivered again and done once (IBX-TXH-LOST-CONNECTION). */
static void test_txh_lost_connection(void) {
    ixh_ctx t;
    ibx_store *s = ixh_fresh(&t);
    ibx_run_stats st;
    TT_ASSERT(s != NULL);
    TT_ASSERT(enqueue(s, "ixh", "src", "m1"));
    t.lose_connection = 1;
    ixh_drain(s, &t, 30, &st);
    TT_EQ_INT(t.lose_connection, 0);
    TT_EQ_INT(ixh_effects(s, "m1"), 0);
    TT_EQ_INT(scalar(s, "SELECT \"Attempt\" FROM {T}"), 0); /* no attempt used */
    TT_ASSERT(sql(s, g_pg ? "UPDATE {T} SET \"NextAttemptAt\" = now()" : "UPDATE {T} SET \"NextAttemptAt\" = {W}"));
    ixh_drain(s, &t, 30, &st);
    TT_EQ_INT(st.done, 1);
    TT_EQ_INT(ixh_effects(s, "m1"), 1);
    TT_ASSERT(status_of(s, "src", "m1") == IBX_STATUS_DONE);
    TT_EQ_INT(scalar(s, "SELECT \"Attempt\" FROM {T}"), 0);
    ibx_store_close(s);
}

static void test_txh_exactly_once(void) {
    ixh_ctx t;
    ibx_store *s = ixh_fresh(&t);
    ibx_run_stats st;
    ibx_new_message m = msg("ixh", "src", "m1", "{}");
    int enqueued = -1;
    TT_ASSERT(s != NULL);
    TT_EQ_INT(ibx_enqueue(s, &m, &enqueued), IBX_OK);
    TT_EQ_INT(enqueued, 1);
    TT_EQ_INT(ibx_enqueue(s, &m, &enqueued), IBX_OK); /* the sender's redelivery: the same row */
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), 1);
    TT_ASSERT(enqueue(s, "ixh", "src", "m2"));
    t.outcome = IBX_RETRY; /* a retry leaves no effect */
    TT_EQ_INT(ixh_drain(s, &t, 30, &st), IBX_EMPTY);
    TT_EQ_INT(st.retried, 2);
    TT_EQ_INT(ixh_effects(s, "m1") + ixh_effects(s, "m2"), 0);
    TT_ASSERT(status_of(s, "src", "m1") == IBX_STATUS_PROCESSING);
    TT_ASSERT(sql(s, g_pg ? "UPDATE {T} SET \"NextAttemptAt\" = now()" : "UPDATE {T} SET NextAttemptAt = {W}"));
    t.outcome = IBX_DONE;
    TT_EQ_INT(ixh_drain(s, &t, 30, &st), IBX_EMPTY);
    TT_EQ_INT(st.done, 2);
    TT_EQ_INT(ixh_effects(s, "m1"), 1);
    TT_EQ_INT(ixh_effects(s, "m2"), 1);
    TT_ASSERT(status_of(s, "src", "m1") == IBX_STATUS_DONE);
    TT_EQ_INT(ibx_enqueue(s, &m, &enqueued), IBX_OK); /* after Done: still deduplicated */
    TT_EQ_INT(enqueued, 0);
    TT_EQ_INT(ixh_drain(s, &t, 30, &st), IBX_EMPTY);
    TT_EQ_INT(ixh_effects(s, "m1"), 1);
    ibx_store_close(s);
}

static int g_ixh_kill_at;
static void ixh_kill_log(ibx_log_level level, const char *id, const char *text, void *user) {
    (void)level, (void)id, (void)user;
    if ((g_ixh_kill_at == 3 && strstr(text, "handler's transaction, committing")) ||
        (g_ixh_kill_at == 4 && strstr(text, "handler's transaction committed")))
        raise(SIGKILL);
}

static void test_txh_kill(void) {
    static const char *const ids[3] = {"k1", "k2", "k3"};
    int point;
    for (point = 1; point <= 4; point++) {
        ixh_ctx t;
        ibx_store *s = ixh_fresh(&t);
        ibx_run_stats st;
        int i, status = 0, rounds, left, effects = 0;
        pid_t pid;
        TT_ASSERT(s != NULL);
        for (i = 0; i < 3; i++) TT_ASSERT(enqueue(s, "ixh", "src", ids[i]));
        ibx_store_close(s); /* no connection crosses fork() */
        fflush(stdout);
        pid = fork();
        if (pid == 0) {
            ibx_store_desc desc;
            ibx_store *c = NULL;
            g_ixh_kill_at = point;
            memset(&desc, 0, sizeof desc);
            desc.connection_string = g_conn;
            desc.table = "Inbox";
            desc.store_id = "ibx-test";
            desc.hooks.logger.log = ixh_kill_log;
            desc.hooks.logger.min_level = IBX_LOG_DEBUG;
            memset(&t, 0, sizeof t);
            t.kill_at = point;
            t.outcome = IBX_DONE;
            if (ibx_store_open(&desc, &c) != IBX_OK) _exit(3);
            ixh_drain(c, &t, 1, &st);
            _exit(0); /* not killed: the parent fails */
        }
        TT_ASSERT(pid > 0 && waitpid(pid, &status, 0) == pid);
        TT_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        s = open_table("Inbox", 0);
        TT_ASSERT(s != NULL);
        for (i = 0; i < 3; i++) { /* Done exactly when the effect exists, never twice */
            int64_t e = ixh_effects(s, ids[i]);
            TT_ASSERT(e == 0 || e == 1);
            TT_EQ_INT(e, status_of(s, "src", ids[i]) == IBX_STATUS_DONE);
            effects += (int)e;
        }
        TT_EQ_INT(effects, point == 4 ? 1 : 0);
        memset(&t, 0, sizeof t); /* another worker, once the dead one's lease (1 s) is over */
        t.outcome = IBX_DONE;
        for (rounds = 0, left = 3; rounds < 100 && left > 0; rounds++) {
            sleep_ms(100);
            TT_EQ_INT(ibx_reap(s, NULL), IBX_OK);
            ixh_drain(s, &t, 30, &st);
            for (i = 0, left = 0; i < 3; i++) left += status_of(s, "src", ids[i]) != IBX_STATUS_DONE;
        }
        TT_EQ_INT(left, 0);
        for (i = 0; i < 3; i++) TT_EQ_INT(ixh_effects(s, ids[i]), 1);
        ibx_store_close(s);
    }
}

static void test_crash_loop(void) {
    ibx_store *s = fresh();
    char id[16];
    ibx_message m;
    int64_t reaped = 0;
    int crashes = 0, workers = 0, oks = 3, status, i;
    TT_ASSERT(s != NULL);
    TT_ASSERT(enqueue(s, "crash", "crashsrc", "c1"));
    for (i = 0; i < oks; i++) {
        snprintf(id, sizeof id, "ok%d", i);
        TT_ASSERT(enqueue(s, "ok", "crashsrc", id));
    }
    ibx_store_close(s); /* no connection may cross fork() */
    for (;;) {
        status = crash_worker();
        workers++;
        TT_ASSERT(status != -1 && workers <= 6);
        if (WIFEXITED(status)) {
            TT_EQ_INT(WEXITSTATUS(status), 0);
            break;
        }
        TT_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
        crashes++;
        sleep_ms(1100); /* the dead worker's lease expires */
        s = open_table("Inbox", 0);
        TT_ASSERT(s != NULL);
        TT_EQ_INT(ibx_reap(s, &reaped), IBX_OK);
        snprintf(id, sizeof id, "ok%d", oks++);
        TT_ASSERT(enqueue(s, "ok", "crashsrc", id));
        ibx_store_close(s);
    }
    s = open_table("Inbox", 0);
    TT_ASSERT(s != NULL);
    TT_EQ_INT(crashes, 3); /* the default max_starts: never a 4th start */
    TT_EQ_INT(ibx_get(s, "c1", "crashsrc", &m), IBX_OK);
    TT_EQ_INT(m.status, IBX_STATUS_DEAD);
    TT_EQ_INT(m.starts, 3);
    TT_ASSERT(m.last_error != NULL);
    TT_EXPECT(strstr(m.last_error, "crash loop: claimed 3 times without an outcome") != NULL);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T} WHERE \"Topic\" = 'ok' AND \"Status\" = 'Done'"), oks);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T} WHERE \"Status\" = 'Processing'"), 0);
    /* A re-enqueue of the dead message starts its count again. */
    TT_ASSERT(enqueue(s, "ok", "crashsrc", "c1"));
    TT_EQ_INT(ibx_get(s, "c1", "crashsrc", &m), IBX_OK);
    TT_EQ_INT(m.status, IBX_STATUS_PROCESSING);
    TT_EQ_INT(m.starts, 0);
    ibx_store_close(s);
}

/* max_starts: 0 is the default, 1..1000, else refused naming the field. */
static void test_max_starts_range(void) {
    ibx_store_desc desc;
    ibx_store *s = NULL;
    memset(&desc, 0, sizeof desc);
    desc.connection_string = g_conn;
    desc.max_starts = 1001;
    TT_EQ_INT(ibx_store_open(&desc, &s), IBX_ERR_OUT_OF_RANGE);
    TT_EQ_STR(ibx_store_last_error(s)->where, "ibx_store_open: max_starts");
    ibx_store_close(s);
    s = NULL;
    desc.max_starts = 2;
    TT_EQ_INT(ibx_store_open(&desc, &s), IBX_OK);
    TT_EXPECT(strstr(s->sql[IBX__Q_CLAIM], "< 2") != NULL); /* the claim takes none at 2 starts */
    ibx_store_close(s);
}

/* ---- the envelope (IBX-ENVELOPE-*) ---------------------------------------------------- */

/* Awkward bytes: quotes, backslashes, a control character, 2- and 4-byte UTF-8. */
#define ENV_ODD "q\"uote 'single' back\\slash \\\\n tab\t caf\xc3\xa9 \xf0\x9f\x98\x80 end"
#define ENV_TENANT "tenant-\xf0\x9f\x98\x80\"'\\"
#define ENV_AID "order/42 \"x\" \\ \xc3\xa9"
static const ibx_header k_env_headers[] = {
    {"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
    {"k\"ey\\\xf0\x9f\x98\x80", ENV_ODD},
    {"empty", ""}};

/* Message `id` with envelope `which`: 0 none, 1 all of it, 2 one header ("" tenant is none). */
static ibx_new_message env_msg(const char *id, int which) {
    ibx_new_message m = msg("env.t", "env-src", id, which == 1 ? "{\"a\":1}" : which == 2 ? "two" : "plain");
    if (which == 1) {
        m.tenant_id = ENV_TENANT;
        m.aggregate_type = "Order";
        m.aggregate_id = ENV_AID;
        m.headers = k_env_headers;
        m.header_count = 3;
    } else if (which == 2) {
        m.headers = k_env_headers + 2;
        m.header_count = 1;
        m.tenant_id = "";
    }
    return m;
}

/* m carries what env_msg(which) gave, byte for byte. */
static int env_matches(const ibx_message *m, int which) {
    const char *k = NULL, *v = NULL;
    int i;
    if (which == 0 || which == 2) {
        if (m->tenant_id || m->aggregate_type || m->aggregate_id) return 0;
        if (which == 0) return m->header_count == 0 && m->headers_packed == NULL &&
                               ibx_message_header(m, "traceparent") == NULL;
        return m->header_count == 1 && ibx_message_header(m, "empty") &&
               strcmp(ibx_message_header(m, "empty"), "") == 0;
    }
    if (!m->tenant_id || strcmp(m->tenant_id, ENV_TENANT) != 0) return 0;
    if (!m->aggregate_type || strcmp(m->aggregate_type, "Order") != 0) return 0;
    if (!m->aggregate_id || strcmp(m->aggregate_id, ENV_AID) != 0) return 0;
    if (m->header_count != 3) return 0;
    for (i = 0; i < 3; i++)
        if (ibx_message_header_at(m, i, &k, &v) != IBX_OK || strcmp(k, k_env_headers[i].key) != 0 ||
            strcmp(v, k_env_headers[i].value) != 0)
            return 0;
    return ibx_message_header_at(m, 3, &k, &v) == IBX_ERR_NOT_FOUND && ibx_message_header(m, "TRACEPARENT") == NULL &&
           strcmp(ibx_message_header(m, "traceparent"), k_env_headers[0].value) == 0;
}

static int env_which(const ibx_message *m) {
    return strcmp(m->payload, "{\"a\":1}") == 0 ? 1 : strcmp(m->payload, "two") == 0 ? 2 : 0;
}

typedef struct env_probe {
    int calls, ok;
} env_probe;

static ibx_outcome env_handler(const ibx_message *m, char *error, size_t size, void *user) {
    env_probe *p = (env_probe *)user;
    (void)error; (void)size;
    p->calls++;
    if (env_matches(m, env_which(m))) p->ok++;
    return IBX_DONE;
}

/* The envelope through enqueue, get, claim and a handler, in its own columns. */
static void test_envelope_roundtrip(void) {
    ibx_store *s = fresh();
    static const char *ids[3] = {"e1", "e0", "e2"};
    static const int which[3] = {1, 0, 2};
    ibx_new_message m;
    ibx_message got;
    ibx_key keys[3];
    const ibx_message *ms = NULL;
    ibx_dispatcher *d;
    char owner[37];
    env_probe p;
    int i, j, n, seen = 0, enqueued = 0;
    TT_ASSERT(s != NULL);
    for (i = 0; i < 3; i++) {
        m = env_msg(ids[i], which[i]);
        TT_EQ_INT(ibx_enqueue(s, &m, &enqueued), IBX_OK);
        TT_EQ_INT(enqueued, 1);
    }
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T} WHERE \"TenantId\" IS NOT NULL AND \"AggregateType\" = 'Order' "
                        "AND \"AggregateId\" IS NOT NULL"), 1);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T} WHERE \"Headers\" IS NULL AND \"TenantId\" IS NULL"), 1);
    for (i = 0; i < 3; i++) {
        TT_EQ_INT(ibx_get(s, ids[i], "env-src", &got), IBX_OK);
        TT_EXPECT(env_matches(&got, which[i]));
    }
    TT_EQ_INT(ibx_owner_token(s, owner), IBX_OK);
    n = claim(s, owner, 10, &ms);
    TT_EQ_INT(n, 3);
    for (i = 0; i < n; i++)
        for (j = 0; j < 3; j++)
            if (strcmp(ms[i].message_id, ids[j]) == 0) {
                seen++;
                TT_EXPECT(env_matches(&ms[i], which[j]));
                keys[j].source = "env-src";
                keys[j].message_id = ids[j];
            }
    TT_EQ_INT(seen, 3);
    { /* dead letters keep it: listed with it, replayed with it */
        int64_t replayed = 0;
        TT_EQ_INT(ibx_fail(s, owner, keys, 3, "env dead", NULL), IBX_OK);
        TT_EQ_INT(ibx_dead_list(s, NULL, 0, 10, &ms, &n), IBX_OK);
        TT_EQ_INT(n, 3);
        for (seen = 0, i = 0; i < n; i++)
            for (j = 0; j < 3; j++)
                if (strcmp(ms[i].message_id, ids[j]) == 0) {
                    seen++;
                    TT_EXPECT(env_matches(&ms[i], which[j]));
                }
        TT_EQ_INT(seen, 3);
        TT_EQ_INT(ibx_dead_replay(s, NULL, &replayed), IBX_OK);
        TT_EQ_INT(replayed, 3);
    }
    memset(&p, 0, sizeof p);
    d = dispatcher(s, 0, NULL);
    TT_ASSERT(d != NULL);
    TT_EQ_INT(ibx_dispatcher_on(d, "env.t", env_handler, &p), IBX_OK);
    TT_EQ_INT(ibx_dispatcher_run_once(d, NULL), IBX_OK);
    TT_EQ_INT(p.calls, 3);
    TT_EQ_INT(p.ok, 3);
    ibx_dispatcher_destroy(d);
    ibx_store_close(s);
}

/* Each envelope argument refused before any SQL, naming it (the checks
 * are the outbox's, shared). */
static void test_envelope_limits(void) {
    ibx_store *s = fresh();
    ibx_new_message m;
    ibx_header h[IBX_HEADERS_MAX + 1];
    static char names[IBX_HEADERS_MAX + 1][8], big[IBX_HEADER_VALUE_MAX + 2], text[IBX_AGGREGATE_ID_MAX + 2];
    int i;
    TT_ASSERT(s != NULL);
    for (i = 0; i <= IBX_HEADERS_MAX; i++) {
        snprintf(names[i], sizeof names[i], "h%d", i);
        h[i].key = names[i];
        h[i].value = "v";
    }
#define BAD(field_setup, want_where)                                                     \
    do {                                                                                 \
        m = msg("env.bad", "env-src", "bad", "p");                                       \
        field_setup;                                                                     \
        TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_ERR_INVALID_ARG);                        \
        TT_EQ_STR(ibx_store_last_error(s)->where, want_where);                           \
    } while (0)
    memset(text, 'x', IBX_TENANT_MAX + 1);
    BAD(m.tenant_id = text, "ibx_enqueue: tenant_id");
    BAD(m.aggregate_type = text, "ibx_enqueue: aggregate_type");
    memset(text, 'y', IBX_AGGREGATE_ID_MAX + 1);
    BAD(m.aggregate_id = text, "ibx_enqueue: aggregate_id");
    BAD(m.tenant_id = "bad \xff utf-8", "ibx_enqueue: tenant_id");
    BAD(m.header_count = -1, "ibx_enqueue: header_count");
    BAD((m.headers = h, m.header_count = IBX_HEADERS_MAX + 1), "ibx_enqueue: header_count");
    BAD(m.header_count = 1, "ibx_enqueue: headers");
    h[1].key = "";
    BAD((m.headers = h, m.header_count = 2), "ibx_enqueue: headers[1].key");
    h[1].key = "h0";
    BAD((m.headers = h, m.header_count = 2), "ibx_enqueue: headers[1].key"); /* a duplicate */
    h[1].key = "h1";
    h[1].value = NULL;
    BAD((m.headers = h, m.header_count = 2), "ibx_enqueue: headers[1].value");
    memset(big, 'v', IBX_HEADER_VALUE_MAX + 1);
    h[1].value = big;
    BAD((m.headers = h, m.header_count = 2), "ibx_enqueue: headers[1].value");
    big[IBX_HEADER_VALUE_MAX] = '\0'; /* at the limit each, five of them pass the total */
    for (i = 0; i < 5; i++) h[i].value = big;
    BAD((m.headers = h, m.header_count = 5), "ibx_enqueue: headers");
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), 0); /* nothing written */
#undef BAD
    /* The limits themselves fit: the most pairs, three at the value limit,
     * each text at its length. */
    h[3].value = h[4].value = "v";
    m = msg("env.bad", "env-src", "fits", "p");
    m.headers = h;
    m.header_count = IBX_HEADERS_MAX;
    text[IBX_AGGREGATE_ID_MAX] = '\0';
    m.aggregate_id = text;
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
    {
        ibx_message got;
        const char *k = NULL, *v = NULL;
        TT_EQ_INT(ibx_get(s, "fits", "env-src", &got), IBX_OK);
        TT_EQ_INT(got.header_count, IBX_HEADERS_MAX);
        TT_EQ_INT((int)strlen(ibx_message_header(&got, "h2")), IBX_HEADER_VALUE_MAX);
        TT_EQ_INT(ibx_message_header_at(&got, IBX_HEADERS_MAX - 1, &k, &v), IBX_OK);
        TT_EQ_STR(k, names[IBX_HEADERS_MAX - 1]);
        TT_EQ_INT((int)strlen(got.aggregate_id), IBX_AGGREGATE_ID_MAX);
    }
    ibx_store_close(s);
}

/* A redelivery is the same message: the envelope stored first stays; a
 * row the dedup check made (no envelope) takes the first enqueue's; a
 * Done message is not changed. */
static void test_envelope_redelivery(void) {
    ibx_store *s = fresh();
    ibx_new_message first = env_msg("r1", 1), again = env_msg("r1", 2), plain = env_msg("r1", 0);
    ibx_message got;
    int processed = -1, enqueued = -1;
    TT_ASSERT(s != NULL);
    TT_EQ_INT(ibx_enqueue(s, &first, &enqueued), IBX_OK);
    again.tenant_id = "other-tenant";
    again.aggregate_type = "Invoice";
    TT_EQ_INT(ibx_enqueue(s, &again, &enqueued), IBX_OK); /* another envelope */
    TT_EQ_INT(enqueued, 1);
    TT_EQ_INT(ibx_enqueue(s, &plain, &enqueued), IBX_OK); /* none: the plain statement */
    TT_EQ_INT(ibx_get(s, "r1", "env-src", &got), IBX_OK);
    TT_EXPECT(strcmp(got.payload, "plain") == 0); /* the payload is the latest, */
    TT_EXPECT(env_matches(&got, 1));              /* the envelope the first */
    /* Seen by the dedup check first: the enqueue brings the envelope. */
    TT_EQ_INT(ibx_already_processed(s, "r2", "env-src", NULL, 0, &processed), IBX_OK);
    TT_EQ_INT(processed, 0);
    first.message_id = "r2";
    TT_EQ_INT(ibx_enqueue(s, &first, &enqueued), IBX_OK);
    TT_EQ_INT(ibx_get(s, "r2", "env-src", &got), IBX_OK);
    TT_EXPECT(env_matches(&got, 1));
    /* Done: a redelivery changes nothing, the envelope included. */
    plain.message_id = "r3";
    TT_EQ_INT(ibx_enqueue(s, &plain, &enqueued), IBX_OK);
    TT_EQ_INT(ibx_mark_processed(s, "r3", "env-src"), IBX_OK);
    first.message_id = "r3";
    TT_EQ_INT(ibx_enqueue(s, &first, &enqueued), IBX_OK);
    TT_EQ_INT(enqueued, 0);
    TT_EQ_INT(ibx_get(s, "r3", "env-src", &got), IBX_OK);
    TT_EXPECT(env_matches(&got, 0));
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T} WHERE \"Headers\" IS NOT NULL"), 2);
    ibx_store_close(s);
}

/* ---- schema upgrades (CORE-SCHEMA-UPGRADE) ---------------------------------------- */

/* A store on the upgrade tests' tables (schema ibxv0 on PostgreSQL). */
static ibx_store *open_v0(const char *table) {
    ibx_store_desc desc;
    ibx_store *s = NULL;
    memset(&desc, 0, sizeof desc);
    desc.connection_string = g_conn;
    desc.schema = g_pg ? "ibxv0" : NULL;
    desc.table = table;
    desc.store_id = "ibx-test";
    desc.hooks.logger.log = keep_log;
    desc.hooks.logger.min_level = IBX_LOG_DEBUG;
    if (ibx_store_open(&desc, &s) != IBX_OK) {
        printf("    open failed: %s (%s)\n", ibx_store_last_error(s)->message, ibx_store_last_error(s)->where);
        ibx_store_close(s);
        return NULL;
    }
    return s;
}

static int v0_columns(ibx_store *s, char *out, size_t cap) {
    char *text = ibx__expand(&s->hooks, s->db.d, s->q, s->schema, s->table, v0_columns_sql(g_backend));
    ibx_result r = text ? ibx__query_text(&s->db, text, out, cap) : IBX_ERR_NO_MEMORY;
    if (!s->db.tx_by_sql) ibx__end_tran(&s->db, SQL_ROLLBACK, "end read");
    ibx__free(&s->hooks, text);
    return r == IBX_OK;
}

/* Its indexes, named relative to the table. */
static int v0_objects(ibx_store *s, char *out, size_t cap) {
    char *text = ibx__expand(&s->hooks, s->db.d, s->q, s->schema, s->table, v0_objects_sql(g_backend));
    ibx_result r = text ? ibx__query_text(&s->db, text, out, cap) : IBX_ERR_NO_MEMORY;
    if (!s->db.tx_by_sql) ibx__end_tran(&s->db, SQL_ROLLBACK, "end read");
    ibx__free(&s->hooks, text);
    return r == IBX_OK;
}

/* One row of an old table in a given state, by plain SQL; `more_*`: NULL,
 * or further columns and their values. */
static int v0_row_more(ibx_store *s, int n, const char *status, const char *next, const char *locked,
                       const char *owner, int attempt, const char *error, const char *more_cols,
                       const char *more_vals) {
    char text[1024];
    snprintf(text, sizeof text,
             "INSERT INTO {T} (\"Source\", \"MessageId\", \"Topic\", \"Payload\", \"Status\", \"NextAttemptAt\", "
             "\"LockedUntil\", \"OwnerToken\", \"Attempt\", \"LastError\"%s) "
             "VALUES ('v0', 'm%d', 'v0.%d', 'payload %d', '%s', %s, %s, %s, %d, %s%s)",
             more_cols ? more_cols : "", n, n, n, status, next, locked, owner, attempt, error,
             more_vals ? more_vals : "");
    return sql(s, text);
}

static int v0_row(ibx_store *s, int n, const char *status, const char *next, const char *locked,
                  const char *owner, int attempt, const char *error) {
    return v0_row_more(s, n, status, next, locked, owner, attempt, error, NULL, NULL);
}

/* Runs the frozen DDL tests/schema/<version>/<backend>/inbox.sql on s, its
 * names prefixed with `prefix` (schema_v0.h). Returns the statements run,
 * or -1 when the file cannot be read or a statement fails. */
static int frozen_ddl(ibx_store *s, const char *version, const char *prefix) {
    char path[128], *ddl, *pos, *one;
    int statements = 0;
    snprintf(path, sizeof path, "tests/schema/%s/%s/inbox.sql", version, g_backend);
    ddl = v0_text(path, "Inbox", prefix, g_pg ? "\"infra\"" : NULL, "\"ibxv0\"");
    if (!ddl) return -1;
    for (pos = ddl; (one = v0_next(&pos)) != NULL; statements++)
        if (!sql(s, one)) break;
    free(ddl);
    return one == NULL ? statements : -1;
}

/* The upgraded table's columns against a new one's: the same; on MariaDB
 * the same names (layout 1's types and order stay: docs/UPGRADING.md). */
static int v0_like_new(const char *cols_old, const char *cols_new) {
    return g_my ? v0_has_all(cols_old, cols_new, 1) : strcmp(cols_old, cols_new) == 0;
}

static void test_schema_upgrade(void) {
    static const ibx_status want[] = {IBX_STATUS_SEEN, IBX_STATUS_PROCESSING, IBX_STATUS_PROCESSING,
                                      IBX_STATUS_PROCESSING, IBX_STATUS_DONE, IBX_STATUS_DEAD};
    char cols_new[2048] = "", cols_old[2048] = "", cols_again[2048] = "", owner[37];
    const char *p = v0_time(g_backend, 'p'), *l = v0_time(g_backend, 'l');
    ibx_store *s, *fresh_store;
    const ibx_message *ms;
    ibx_message m;
    ibx_key key;
    int n = 0, i, statements = 0;
    fresh_store = open_v0("V1Inbox");
    TT_ASSERT(fresh_store != NULL);
    TT_ASSERT(g_pg ? sql(fresh_store, "DROP SCHEMA IF EXISTS ibxv0 CASCADE") : sql(fresh_store, "DROP TABLE IF EXISTS {T}"));
    TT_EQ_INT(ibx_store_deploy(fresh_store), IBX_OK);
    TT_ASSERT(v0_columns(fresh_store, cols_new, sizeof cols_new));
    TT_EXPECT(strstr(cols_new, "Starts") != NULL);
    s = open_v0("V0Inbox");
    TT_ASSERT(s != NULL);
    if (!g_pg) TT_ASSERT(sql(s, "DROP TABLE IF EXISTS {T}"));
    statements = frozen_ddl(s, "v0", "V0");
    TT_ASSERT(statements >= 0);
    TT_EXPECT(statements >= 1);
    TT_ASSERT(v0_columns(s, cols_old, sizeof cols_old));
    TT_EXPECT(strstr(cols_old, "Starts") == NULL);
    /* Seen, ready, due later, leased, done, dead. */
    TT_ASSERT(v0_row(s, 1, "Seen", p, "NULL", "NULL", 0, "NULL"));
    TT_ASSERT(v0_row(s, 2, "Processing", p, "NULL", "NULL", 0, "NULL"));
    TT_ASSERT(v0_row(s, 3, "Processing", l, "NULL", "NULL", 2, "'retried'"));
    TT_ASSERT(v0_row(s, 4, "Processing", p, l, "'00000000-0000-7000-a000-000000000004'", 1, "NULL"));
    TT_ASSERT(v0_row(s, 5, "Done", p, "NULL", "NULL", 0, "NULL"));
    TT_ASSERT(v0_row(s, 6, "Dead", p, "NULL", "NULL", 9, "'boom'"));
    log_reset();
    TT_EQ_INT(ibx_store_deploy(s), IBX_OK);
    TT_EXPECT(logged("schema upgraded: column Starts added to V0Inbox", NULL, NULL));
    TT_ASSERT(v0_columns(s, cols_old, sizeof cols_old));
    TT_EXPECT(v0_like_new(cols_old, cols_new));
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T} WHERE \"Starts\" = 0"), 6);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T} WHERE \"Priority\" = 0"), 6); /* the old rows: the default */
    for (i = 0; i < 6; i++) {
        char id[8], topic[16], payload[16];
        snprintf(id, sizeof id, "m%d", i + 1);
        snprintf(topic, sizeof topic, "v0.%d", i + 1);
        snprintf(payload, sizeof payload, "payload %d", i + 1);
        TT_EQ_INT(ibx_get(s, id, "v0", &m), IBX_OK);
        TT_EQ_STR(m.topic, topic);
        TT_EQ_STR(m.payload, payload);
        TT_EQ_INT(m.status, want[i]);
        TT_EQ_INT(m.priority, 0);
    }
    TT_EQ_INT(ibx_get(s, "m3", "v0", &m), IBX_OK);
    TT_EQ_INT(m.attempt, 2);
    TT_EQ_STR(m.last_error, "retried");
    TT_EQ_INT(ibx_get(s, "m4", "v0", &m), IBX_OK);
    TT_EQ_STR(m.owner_token, "00000000-0000-7000-a000-000000000004");
    TT_EQ_INT(ibx_get(s, "m6", "v0", &m), IBX_OK);
    TT_EQ_INT(m.attempt, 9);
    TT_EQ_STR(m.last_error, "boom");
    TT_ASSERT(sql(s, "UPDATE {T} SET \"Starts\" = 7 WHERE \"MessageId\" = 'm6'"));
    TT_EQ_INT(scalar(s, "SELECT \"Starts\" FROM {T} WHERE \"MessageId\" = 'm6'"), 7);
    /* Again: nothing to add, nothing changes. */
    log_reset();
    TT_EQ_INT(ibx_store_deploy(s), IBX_OK);
    TT_EXPECT(!logged("schema upgraded", NULL, NULL));
    TT_ASSERT(v0_columns(s, cols_again, sizeof cols_again));
    TT_EQ_STR(cols_again, cols_old);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), 6);
    TT_EQ_INT(scalar(s, "SELECT \"Starts\" FROM {T} WHERE \"MessageId\" = 'm6'"), 7);
    /* The work queue runs on it: the one ready message is claimed and acked. */
    ibx_owner_token(s, owner);
    TT_EQ_INT(ibx_claim(s, owner, 30, 10, &ms, &n), IBX_OK);
    TT_EQ_INT(n, 1);
    TT_EQ_STR(ms[0].message_id, "m2");
    TT_EQ_INT(ms[0].priority, 0);
    key.source = "v0";
    key.message_id = "m2";
    TT_EQ_INT(ibx_ack(s, owner, &key, 1, NULL), IBX_OK);
    TT_EQ_INT(ibx_get(s, "m2", "v0", &m), IBX_OK);
    TT_EQ_INT(m.status, IBX_STATUS_DONE);
    TT_EQ_INT(ibx_claim(s, owner, 30, 10, &ms, &n), IBX_EMPTY);
    /* New messages with priorities in the upgraded table: claimed highest first. */
    {
        static const char *const pid[] = {"p-lo", "p-hi", "p-mid"};
        static const int pv[] = {-2, 4, 0};
        char order[64] = "";
        for (i = 0; i < 3; i++) {
            ibx_new_message pm = msg("v1", "v1", pid[i], "p");
            pm.priority = pv[i];
            TT_EQ_INT(ibx_enqueue(s, &pm, NULL), IBX_OK);
        }
        for (i = 0; i < 3 && ibx_claim(s, owner, 30, 1, &ms, &n) == IBX_OK; i++) {
            snprintf(order + strlen(order), sizeof order - strlen(order), "%s%s", i ? "," : "", ms[0].message_id);
            key.source = ms[0].source;
            key.message_id = ms[0].message_id;
            TT_EQ_INT(ibx_ack(s, owner, &key, 1, NULL), IBX_OK);
        }
        TT_EQ_STR(order, "p-hi,p-mid,p-lo");
    }
    ibx_store_close(s);
    ibx_store_close(fresh_store);
}

static int prio_claims(ibx_store *s, char *out, size_t cap);

/* CORE-SCHEMA-UPGRADE-V1: a table of storage layout 1 (with Priority:
 * tests/schema/v1) holding rows in every state (seen, ready by priority,
 * due later, leased live and expired, done long ago and now, dead) is
 * upgraded by deploy; every row keeps its state, and claim (priority
 * order), ack, reap (the expired lease) and cleanup (the old Done row)
 * work on it. On MariaDB the table keeps its layout-1 indexes beside
 * layout 2's (the previous release forces them). */
static void test_schema_upgrade_v1(void) {
    static const ibx_status want[] = {IBX_STATUS_SEEN, IBX_STATUS_PROCESSING, IBX_STATUS_PROCESSING,
                                      IBX_STATUS_PROCESSING, IBX_STATUS_PROCESSING, IBX_STATUS_PROCESSING,
                                      IBX_STATUS_PROCESSING, IBX_STATUS_DONE, IBX_STATUS_DEAD, IBX_STATUS_DONE};
    static const int prio[] = {0, 0, 4, -2, 0, 0, 0, 0, 0, 0};
    static char cols_new[4096], cols_old[4096], objs_new[4096], objs_old[4096];
    const char *p = v0_time(g_backend, 'p'), *l = v0_time(g_backend, 'l'), *d = v0_time(g_backend, 'd');
    char order[128];
    ibx_store *s, *fresh_store;
    ibx_message m;
    ibx_key key;
    int64_t n64 = 0;
    int i, statements = 0;
    fresh_store = open_v0("L2Inbox");
    TT_ASSERT(fresh_store != NULL);
    TT_ASSERT(sql(fresh_store, g_pg ? "DROP TABLE IF EXISTS {T} CASCADE" : "DROP TABLE IF EXISTS {T}"));
    TT_EQ_INT(ibx_store_deploy(fresh_store), IBX_OK);
    TT_ASSERT(v0_columns(fresh_store, cols_new, sizeof cols_new));
    TT_ASSERT(v0_objects(fresh_store, objs_new, sizeof objs_new));
    s = open_v0("L1Inbox");
    TT_ASSERT(s != NULL);
    TT_ASSERT(sql(s, g_pg ? "DROP TABLE IF EXISTS {T} CASCADE" : "DROP TABLE IF EXISTS {T}"));
    statements = frozen_ddl(s, "v1", "L1");
    TT_ASSERT(statements >= 0);
    TT_EXPECT(statements >= 1);
    TT_ASSERT(v0_row_more(s, 1, "Seen", p, "NULL", "NULL", 0, "NULL", NULL, NULL));
    TT_ASSERT(v0_row_more(s, 2, "Processing", p, "NULL", "NULL", 0, "NULL", NULL, NULL));
    TT_ASSERT(v0_row_more(s, 3, "Processing", p, "NULL", "NULL", 0, "NULL", ", \"Priority\"", ", 4"));
    TT_ASSERT(v0_row_more(s, 4, "Processing", p, "NULL", "NULL", 0, "NULL", ", \"Priority\"", ", -2"));
    TT_ASSERT(v0_row_more(s, 5, "Processing", l, "NULL", "NULL", 2, "'retried'", NULL, NULL));
    TT_ASSERT(v0_row_more(s, 6, "Processing", p, l, "'00000000-0000-7000-a000-000000000006'", 0, "NULL",
                          ", \"Starts\"", ", 1"));
    TT_ASSERT(v0_row_more(s, 7, "Processing", d, p, "'00000000-0000-7000-a000-000000000007'", 0, "NULL",
                          ", \"Starts\"", ", 1"));
    TT_ASSERT(v0_row_more(s, 8, "Done", p, "NULL", "NULL", 0, "NULL", ", \"LastSeenUtc\"", g_pg ? ", now() - interval '2 days'" : g_my ? ", UTC_TIMESTAMP(6) - INTERVAL 2 DAY" : ", {W} - 172800000"));
    TT_ASSERT(v0_row_more(s, 9, "Dead", p, "NULL", "NULL", 9, "'boom'", NULL, NULL));
    TT_ASSERT(v0_row_more(s, 10, "Done", p, "NULL", "NULL", 0, "NULL", NULL, NULL));
    TT_EQ_INT(ibx_store_deploy(s), IBX_OK);
    TT_ASSERT(v0_columns(s, cols_old, sizeof cols_old));
    TT_ASSERT(v0_objects(s, objs_old, sizeof objs_old));
    if (getenv("IBX_TEST_VERBOSE")) printf("    old: %s\n    %s\n    new: %s\n    %s\n", cols_old, objs_old, cols_new, objs_new);
    TT_EXPECT(v0_like_new(cols_old, cols_new));
    TT_EXPECT(g_my ? v0_has_all(objs_old, objs_new, 0) : strcmp(objs_old, objs_new) == 0);
    if (g_my) { /* layout 1's indexes stay beside layout 2's (obxctl upgrade-keys drops them) */
        TT_EXPECT(strstr(objs_old, "index IX_*_Claim") != NULL && strstr(objs_old, "index IX_*_WorkQueue") != NULL);
        TT_EXPECT(strstr(objs_new, "index IX_*_ReadyRank") != NULL && strstr(objs_new, "index IX_*_Claim") == NULL);
        TT_EXPECT(strstr(cols_new, "OwnerToken uuid") != NULL);
    }
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), 10);
    for (i = 0; i < 10; i++) {
        char id[8];
        snprintf(id, sizeof id, "m%d", i + 1);
        TT_EQ_INT(ibx_get(s, id, "v0", &m), IBX_OK);
        if (m.status != want[i] || m.priority != prio[i]) printf("    %s: status %d priority %d\n", id, m.status, m.priority);
        TT_EQ_INT(m.status, want[i]);
        TT_EQ_INT(m.priority, prio[i]);
    }
    TT_EQ_INT(ibx_get(s, "m6", "v0", &m), IBX_OK);
    TT_EQ_STR(m.owner_token, "00000000-0000-7000-a000-000000000006");
    /* The reap: the expired lease is released (the live one kept). */
    TT_EQ_INT(ibx_reap(s, &n64), IBX_OK);
    TT_EQ_INT((int)n64, 1);
    TT_EQ_INT(ibx_get(s, "m7", "v0", &m), IBX_OK);
    TT_EXPECT(m.owner_token[0] == '\0' && m.locked_until_ms == 0);
    /* Claims by rank: the released one (due two days ago), then by priority. */
    TT_ASSERT(prio_claims(s, order, sizeof order));
    TT_EQ_STR(order, "m7,m3,m2,m4");
    key.source = "v0";
    key.message_id = "m6";
    TT_EQ_INT(ibx_ack(s, "00000000-0000-7000-a000-000000000006", &key, 1, NULL), IBX_OK);
    TT_EQ_INT(ibx_get(s, "m6", "v0", &m), IBX_OK);
    TT_EQ_INT(m.status, IBX_STATUS_DONE);
    /* Cleanup: the row done two days ago goes, those done now stay. */
    TT_EQ_INT(ibx_cleanup(s, 86400000, 0, &n64), IBX_OK);
    TT_EQ_INT((int)n64, 1);
    TT_EQ_INT(ibx_get(s, "m8", "v0", &m), IBX_ERR_NOT_FOUND);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), 9);
    log_reset();
    TT_EQ_INT(ibx_store_deploy(s), IBX_OK);
    TT_EXPECT(!logged("schema upgraded", NULL, NULL));
    /* The explicit steps (obxctl upgrade): the owner token to UUID, then
     * layout 1's indexes gone; rows kept and served. */
    {
        int steps = -1;
        TT_EQ_INT(ibx_store_upgrade(s, 4, &steps), IBX_ERR_INVALID_ARG);
        TT_EQ_INT(ibx_store_upgrade(s, IBX_UPGRADE_KEYS, &steps), IBX_OK);
        TT_EQ_INT(steps, g_my ? 1 : 0);
        TT_EQ_INT(ibx_store_upgrade(s, IBX_UPGRADE_DROP_OLD, &steps), IBX_OK);
        TT_EQ_INT(steps, g_my ? 4 : 0);
        TT_ASSERT(v0_objects(s, objs_old, sizeof objs_old));
        TT_EQ_STR(objs_old, objs_new);
        TT_EQ_INT(ibx_store_upgrade(s, IBX_UPGRADE_KEYS | IBX_UPGRADE_DROP_OLD, &steps), IBX_OK);
        TT_EQ_INT(steps, 0);
        TT_EQ_INT(ibx_get(s, "m9", "v0", &m), IBX_OK);
        TT_EQ_INT(m.status, IBX_STATUS_DEAD);
        {
            ibx_new_message pm = msg("v2", "v2", "after", "p");
            TT_EQ_INT(ibx_enqueue(s, &pm, NULL), IBX_OK);
            TT_ASSERT(prio_claims(s, order, sizeof order));
            TT_EQ_STR(order, "after");
        }
    }
    ibx_store_close(s);
    ibx_store_close(fresh_store);
}

static void test_schema_file(void) {
    static char want[1 << 15], have[1 << 15];
    char path[128];
    size_t got;
    FILE *f;
    TT_EQ_INT(ibx_schema_sql(g_pg ? IBX_DIALECT_POSTGRESQL : g_my ? IBX_DIALECT_MARIADB : IBX_DIALECT_SQLITE, NULL, NULL, want, sizeof want, NULL), IBX_OK);
    snprintf(path, sizeof path, "sql/%s/inbox.sql", g_backend);
    f = fopen(path, "rb");
    TT_ASSERT(f != NULL);
    got = fread(have, 1, sizeof have - 1, f);
    fclose(f);
    have[got] = '\0';
    TT_EXPECT(strcmp(have, want) == 0);
}

/* ---- isolation, permissions, ranges, idempotency, idle backoff ------------------------------------- */

static void test_103_no_dirty_reads(void) {
    ibx_store *s = fresh(), *writer = open_table("Inbox", 0);
    char owner[37];
    const ibx_message *ms;
    ibx_new_message m = msg("t", "src", "pending", "p");
    TT_ASSERT(s && writer);
    ibx_owner_token(s, owner);
    /* The writer's transaction is held open by hand: its row must not be claimable yet. */
    TT_EQ_INT(ibx__begin(&writer->db, ibx__unit_mode(&writer->db, IBX__UNIT_WRITE)), IBX_OK);
    {
        ibx__param p[7];
        ibx__p_text(&p[0], "src", (size_t)-1);
        ibx__p_text(&p[1], "pending", (size_t)-1);
        ibx__p_text(&p[2], "t", (size_t)-1);
        ibx__p_text(&p[3], "p", (size_t)-1);
        ibx__p_blob(&p[4], NULL, 0);
        ibx__p_i64(&p[5], 0);
        p[5].ind = SQL_NULL_DATA;
        p[6] = p[5];
        TT_EQ_INT(ibx__exec(&writer->db, IBX__Q_ENQUEUE, writer->sql[IBX__Q_ENQUEUE], p, 7, NULL, NULL), IBX_OK);
    }
    if (g_pg || g_my) TT_EXPECT(claim(s, owner, 10, &ms) == 0);
    else { /* SQLite: a claim would wait for the writer's lock; a read shows the isolation */
        ibx_message got;
        TT_EXPECT(ibx_get(s, "pending", "src", &got) == IBX_ERR_NOT_FOUND);
    }
    TT_EQ_INT(ibx__commit(&writer->db), IBX_OK);
    TT_EQ_INT(claim(s, owner, 10, &ms), 1);
    TT_EQ_STR(ms[0].message_id, m.message_id);
    ibx_store_close(writer);
    ibx_store_close(s);
}

static void test_126_permissions(void) {
    ibx_store *admin = fresh(), *s = NULL;
    ibx_store_desc d;
    char conn[512], owner[37];
    const char *port;
    const ibx_message *ms;
    ibx_key k = {"src", "perm"};
    int processed;
    TT_ASSERT(admin != NULL);
    if (g_my) { /* tests/db.sh creates obx_worker: SELECT, INSERT, UPDATE, DELETE on the database */
        const char *host = strstr(g_conn, "Server=");
        TT_ASSERT(host != NULL);
        snprintf(conn, sizeof conn, "Driver={MariaDB Unicode};%.*sDatabase=obx;Uid=obx_worker;Pwd=workerpw;",
                 (int)(strstr(host, "Database=") - host), host);
    } else {
    TT_ASSERT(sql(admin, "DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'ibx_worker') "
                         "THEN EXECUTE 'DROP OWNED BY ibx_worker'; DROP ROLE ibx_worker; END IF; END $$"));
    TT_ASSERT(sql(admin, "CREATE ROLE ibx_worker LOGIN"));
    TT_ASSERT(sql(admin, "GRANT USAGE ON SCHEMA {S} TO ibx_worker"));
    TT_ASSERT(sql(admin, "GRANT SELECT, INSERT, UPDATE, DELETE ON {T} TO ibx_worker"));
    port = strstr(g_conn, "Port=");
    TT_ASSERT(port != NULL);
    snprintf(conn, sizeof conn, "Driver={PostgreSQL Unicode};Server=127.0.0.1;%.*sDatabase=obx;Uid=ibx_worker;Pwd=;",
             (int)(strchr(port, ';') - port + 1), port);
    }
    memset(&d, 0, sizeof d);
    d.connection_string = conn;
    d.hooks.logger.log = keep_log;
    TT_EQ_INT(ibx_store_open(&d, &s), IBX_OK);
    TT_EQ_INT(ibx_already_processed(s, "perm", "src", NULL, 0, &processed), IBX_OK);
    TT_ASSERT(enqueue(s, "t", "src", "perm"));
    ibx_owner_token(s, owner);
    TT_EQ_INT(claim(s, owner, 1, &ms), 1);
    TT_EQ_INT(ibx_ack(s, owner, &k, 1, NULL), IBX_OK);
    TT_EQ_INT(ibx_cleanup(s, 0, 0, NULL), IBX_OK);
    TT_EQ_INT(ibx_store_deploy(s), IBX_ERR_DB); /* deployment needs CREATE: refused, clearly */
    ibx_store_close(s);
    if (g_my) {
        ibx_store_close(admin);
        return;
    }
    TT_ASSERT(sql(admin, "DROP OWNED BY ibx_worker"));
    TT_ASSERT(sql(admin, "DROP ROLE ibx_worker"));
    ibx_store_close(admin);
}

/* A real deadlock (issue 10 item 24), as CORE-DEADLOCK-REAL of the
 * outbox: the test's transaction holds B, the library's ack of {A, B}
 * holds A and waits for B, then the test asks for A. The library is the
 * victim (our deadlock_timeout is long; InnoDB rolls back the lighter
 * transaction, and ours wrote rows first), rolls back, and redoes the ack
 * whole; no attempt is counted. */
typedef struct raw_conn {
    SQLHENV env;
    SQLHDBC dbc;
} raw_conn;
static int raw_exec(raw_conn *c, const char *text, int64_t *value) {
    SQLHSTMT st;
    SQLRETURN rc;
    char out[32] = "";
    SQLLEN ind = 0;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, c->dbc, &st))) return 0;
    rc = SQLExecDirect(st, (SQLCHAR *)(uintptr_t)text, SQL_NTS);
    if (value && SQL_SUCCEEDED(rc) && SQL_SUCCEEDED(SQLFetch(st)) &&
        SQL_SUCCEEDED(SQLGetData(st, 1, SQL_C_CHAR, out, sizeof out, &ind)))
        *value = atoll(out);
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    return SQL_SUCCEEDED(rc) || rc == SQL_NO_DATA;
}
static int raw_open(raw_conn *c) {
    memset(c, 0, sizeof *c);
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_ENV, NULL, &c->env))) return 0;
    SQLSetEnvAttr(c->env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER)SQL_OV_ODBC3, 0);
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_DBC, c->env, &c->dbc))) return 0;
    return SQL_SUCCEEDED(SQLDriverConnect(c->dbc, NULL, (SQLCHAR *)(uintptr_t)g_conn, SQL_NTS, NULL, 0, NULL,
                                          SQL_DRIVER_NOPROMPT)) &&
           SQL_SUCCEEDED(SQLSetConnectAttr(c->dbc, SQL_ATTR_AUTOCOMMIT, (SQLPOINTER)SQL_AUTOCOMMIT_OFF,
                                           SQL_IS_UINTEGER));
}
static void raw_close(raw_conn *c) {
    SQLEndTran(SQL_HANDLE_DBC, c->dbc, SQL_ROLLBACK);
    SQLDisconnect(c->dbc);
    SQLFreeHandle(SQL_HANDLE_DBC, c->dbc);
    SQLFreeHandle(SQL_HANDLE_ENV, c->env);
}
static int raw_lock(raw_conn *c, ibx_store *s, const char *id) {
    char q[320];
    snprintf(q, sizeof q, g_pg ? "SELECT 1 FROM \"%s\".\"%s\" WHERE \"Source\" = 'src' AND \"MessageId\" = '%s' FOR UPDATE"
                               : "SELECT 1 FROM `%.0s%s` WHERE `Source` = 'src' AND `MessageId` = '%s' FOR UPDATE",
             s->schema ? s->schema : "", s->table, id);
    return raw_exec(c, q, NULL);
}
typedef struct iack_job {
    ibx_store *s;
    const char *owner;
    ibx_key keys[2];
    ibx_result r;
    int64_t changed;
} iack_job;
static void *iack_main(void *v) {
    iack_job *j = (iack_job *)v;
    j->r = ibx_ack(j->s, j->owner, j->keys, 2, &j->changed);
    return NULL;
}
/* Until `want` sessions wait for a lock: as soon as they do, or 60 s on a
 * loaded machine (as in test_outbox.c: not INNODB_TRX, which InnoDB
 * refreshes only when it was last read more than 0.1 s ago). */
static int raw_waits_seen(raw_conn *c, int want) {
    int64_t deadline = now_ms() + 60000, waiting = 0;
    for (;;) {
        if (raw_exec(c, g_pg ? "SELECT COUNT(*) FROM pg_locks WHERE NOT granted"
                             : "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS"
                               " WHERE VARIABLE_NAME = 'INNODB_ROW_LOCK_CURRENT_WAITS'",
                     &waiting) &&
            waiting >= want)
            return 1;
        if (now_ms() > deadline) return 0;
        sleep_ms(10);
    }
}
/* One try, as CORE-DEADLOCK-REAL's: on PostgreSQL the library checks for
 * the cycle after lib_ms, we after 10 x lib_ms; crossed: we got A, so the
 * library was the victim. */
static void deadlock_round(ibx_store *s, iack_job *job, int lib_ms, int *held, int *crossed) {
    raw_conn c;
    pthread_t th;
    char q[80];
    int i;
    *held = *crossed = 0;
    if (g_pg) {
        snprintf(q, sizeof q, "SET deadlock_timeout = '%dms'", lib_ms);
        if (!sql(s, q)) return;
    }
    if (!raw_open(&c)) return;
    snprintf(q, sizeof q, "SET deadlock_timeout = '%dms'", 10 * lib_ms);
    *held = !g_pg || raw_exec(&c, q, NULL);
    for (i = 0; i < 50; i++) { /* the heavier transaction */
        snprintf(q, sizeof q, "INSERT INTO ibx_dl_weight (id) VALUES (%d)", i);
        *held = *held && raw_exec(&c, q, NULL);
    }
    *held = *held && raw_lock(&c, s, job->keys[1].message_id);
    if (*held && pthread_create(&th, NULL, iack_main, job) == 0) {
        *crossed = raw_waits_seen(&c, 1) && raw_lock(&c, s, job->keys[0].message_id);
        SQLEndTran(SQL_HANDLE_DBC, c.dbc, SQL_ROLLBACK);
        pthread_join(th, NULL);
    }
    raw_close(&c);
}
static void test_deadlock_real(void) {
    ibx_store *s = fresh();
    char owner[37];
    const ibx_message *ms;
    int held = 0, crossed = 0, round;
    int64_t deadline = now_ms() + 60000;
    iack_job job;
    TT_ASSERT(s != NULL);
    TT_ASSERT(sql(s, "CREATE TABLE IF NOT EXISTS ibx_dl_weight (id INT NOT NULL PRIMARY KEY)"));
    /* MariaDB: the library's wait outlasts any delay of ours (not 5 s). */
    if (g_my) TT_ASSERT(sql(s, "SET SESSION innodb_lock_wait_timeout = 120"));
    for (round = 0;; round++) {
        TT_ASSERT(sql(s, "DELETE FROM ibx_dl_weight") && sql(s, "DELETE FROM {T}"));
        TT_ASSERT(enqueue(s, "t", "src", "dl-a") && enqueue(s, "t", "src", "dl-b"));
        ibx_owner_token(s, owner);
        TT_EQ_INT(claim(s, owner, 2, &ms), 2);
        memset(&job, 0, sizeof job);
        job.s = s;
        job.owner = owner;
        job.keys[0].source = job.keys[1].source = "src";
        job.keys[0].message_id = "dl-a";
        job.keys[1].message_id = "dl-b";
        log_reset();
        /* PostgreSQL: we were too late, so again with its check later. */
        deadlock_round(s, &job, round == 0 ? 200 : 3000, &held, &crossed);
        if (crossed || !g_pg || !held || now_ms() > deadline) break;
    }
    TT_ASSERT(held);
    TT_ASSERT(crossed);
    TT_EQ_INT(job.r, IBX_OK);
    TT_EQ_INT(job.changed, 2);
    TT_EXPECT(logged("ack: transient failure", g_pg ? "[40P01/" : "/1213]", "retrying"));
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T} WHERE \"Status\" = 'Done'"), 2);
    TT_EQ_INT(scalar(s, "SELECT MAX(\"Attempt\") FROM {T}"), 0); /* no attempt counted */
    TT_ASSERT(sql(s, "DROP TABLE ibx_dl_weight"));
    ibx_store_close(s);
}

static void test_119_120_ranges(void) {
    ibx_store *s = fresh();
    char owner[37], id[16];
    const ibx_message *ms;
    int n = 0, i;
    TT_ASSERT(s != NULL);
    ibx_owner_token(s, owner);
    for (i = 0; i < 110; i++) {
        snprintf(id, sizeof id, "r%d", i);
        TT_ASSERT(enqueue(s, "t", "src", id));
    }
    TT_EQ_INT(ibx_claim(s, owner, 10, 100, &ms, &n), IBX_OK);
    TT_EQ_INT(n, 100);
    TT_EQ_INT(ibx_claim(s, owner, 300, 1, &ms, &n), IBX_OK);
    TT_EQ_INT(n, 1);
    TT_EQ_INT(ibx_claim(s, owner, 86401, 1, &ms, &n), IBX_ERR_OUT_OF_RANGE);
    ibx_store_close(s);
}

static void test_077_redelivery(void) {
    ibx_store *s = fresh();
    ibx_dispatcher *d;
    ibx_run_stats st;
    char crashed[37];
    const ibx_message *ms;
    probe p;
    int n;
    TT_ASSERT(s && enqueue(s, "job", "src", "again"));
    ibx_owner_token(s, crashed);
    TT_EQ_INT(ibx_claim(s, crashed, 1, 1, &ms, &n), IBX_OK);
    sleep_ms(1200); /* the first worker died holding it */
    memset(&p, 0, sizeof p);
    d = dispatcher(s, 0, NULL);
    TT_ASSERT(d != NULL);
    ibx_dispatcher_on(d, "job", probe_handler, &p);
    TT_EQ_INT(ibx_dispatcher_run_once(d, &st), IBX_OK);
    TT_EQ_INT(p.calls, 1);           /* delivered again, with the same key to dedupe on */
    TT_EQ_STR(p.id, "again");
    TT_EQ_STR(p.source, "src");
    ibx_dispatcher_destroy(d);
    ibx_store_close(s);
}

static int g_claims_seen;
static int64_t g_fake_slept;
static volatile sig_atomic_t g_stop;
static void count_claims(ibx_log_level level, const char *id, const char *message, void *user) {
    (void)level; (void)id; (void)user;
    if (strstr(message, "claimed 0 message")) g_claims_seen++;
}
static void fake_sleep(int64_t ms, void *user) {
    (void)user;
    g_fake_slept += ms;
    if (g_fake_slept >= 1000) g_stop = 1;
}

static void test_124_idle_backoff(void) {
    ibx_store_desc sd;
    ibx_dispatcher_desc dd;
    ibx_store *s = fresh(), *timed = NULL;
    ibx_dispatcher *d = NULL;
    TT_ASSERT(s != NULL);
    memset(&sd, 0, sizeof sd);
    sd.connection_string = g_conn;
    sd.hooks.clock.sleep_ms = fake_sleep;
    sd.hooks.logger.log = count_claims;
    sd.hooks.logger.min_level = IBX_LOG_DEBUG;
    TT_EQ_INT(ibx_store_open(&sd, &timed), IBX_OK);
    memset(&dd, 0, sizeof dd);
    dd.store = timed;
    dd.poll_interval_ms = 100;
    dd.idle_max_ms = 400;
    dd.stop_flag = &g_stop;
    TT_EQ_INT(ibx_dispatcher_create(&dd, &d), IBX_OK);
    TT_EQ_INT(ibx_dispatcher_run(d), IBX_OK);
    TT_EQ_INT(g_claims_seen, 4); /* 0, 100, 300, 700 ms: waits doubling to 400 */
    ibx_dispatcher_destroy(d);
    ibx_store_close(timed);
    ibx_store_close(s);
}


/* Times are right whatever the session's time zone, on an adopted
 * connection whose zone is set after open (CORE-TIME-ZONE). */
static void test_time_zone(void) {
    static const char *const zones_my[] = {"SET time_zone = '+05:00'", "SET time_zone = '-09:30'"};
    static const char *const zones_pg[] = {"SET TIME ZONE 'Asia/Kathmandu'", "SET TIME ZONE '-09:30'"};
    ibx_store *s = fresh();
    int z;
    TT_ASSERT(s != NULL);
    for (z = 0; z < 2; z++) {
        SQLHENV env = NULL;
        SQLHDBC dbc = NULL;
        SQLHSTMT st = NULL;
        ibx_store_desc desc;
        ibx_store *adopted = NULL;
        ibx_new_message m = msg("tz", "shop", z ? "tz-2" : "tz-1", "{}");
        ibx_message got;
        const ibx_message *ms;
        char owner[37];
        int n = 0;
        int64_t now = (int64_t)time(NULL) * 1000;
        TT_ASSERT(SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_ENV, NULL, &env)));
        SQLSetEnvAttr(env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER)SQL_OV_ODBC3, 0);
        TT_ASSERT(SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_DBC, env, &dbc)));
        TT_ASSERT(SQL_SUCCEEDED(SQLDriverConnect(dbc, NULL, (SQLCHAR *)(uintptr_t)g_conn, SQL_NTS, NULL, 0,
                                                 NULL, SQL_DRIVER_NOPROMPT)));
        SQLSetConnectAttr(dbc, SQL_ATTR_AUTOCOMMIT, (SQLPOINTER)SQL_AUTOCOMMIT_OFF, SQL_IS_UINTEGER);
        memset(&desc, 0, sizeof desc);
        desc.hdbc = dbc;
        desc.store_id = "ibx-test";
        TT_EQ_INT(ibx_store_open(&desc, &adopted), IBX_OK);
        TT_ASSERT(SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, dbc, &st)));
        TT_ASSERT(SQL_SUCCEEDED(SQLExecDirect(st, (SQLCHAR *)(uintptr_t)(g_my ? zones_my[z] : zones_pg[z]), SQL_NTS)));
        SQLFreeHandle(SQL_HANDLE_STMT, st);
        SQLEndTran(SQL_HANDLE_DBC, dbc, SQL_COMMIT);
        m.due_utc_ms = now - 60000; /* a minute ago: claimable now */
        TT_EQ_INT(ibx_enqueue(adopted, &m, NULL), IBX_OK);
        TT_EQ_INT(ibx_get(s, m.message_id, "shop", &got), IBX_OK);
        TT_EXPECT(got.due_time_ms == m.due_utc_ms);
        TT_EXPECT(got.first_seen_ms > now - 120000 && got.first_seen_ms < now + 120000);
        TT_EQ_INT(ibx_get(adopted, m.message_id, "shop", &got), IBX_OK);
        TT_EXPECT(got.due_time_ms == m.due_utc_ms);
        ibx_owner_token(adopted, owner);
        TT_EQ_INT(ibx_claim(adopted, owner, 30, 10, &ms, &n), IBX_OK);
        TT_EQ_INT(n, 1);
        TT_EXPECT(n == 1 && ms[0].locked_until_ms > now && ms[0].locked_until_ms < now + 150000);
        ibx_store_close(adopted);
        SQLDisconnect(dbc);
        SQLFreeHandle(SQL_HANDLE_DBC, dbc);
        SQLFreeHandle(SQL_HANDLE_ENV, env);
        TT_ASSERT(sql(s, "DELETE FROM {T}"));
    }
    ibx_store_close(s);
}


/* ---- lease renewal (IBX-078: never two handlers in one message at once) ---------------- */

typedef struct lease_probe {
    pthread_mutex_t mu;
    int inside, overlaps, calls[2];
    int stop;                    /* atomic */
} lease_probe;

typedef struct lease_worker {
    lease_probe *lp;
    int index;
} lease_worker;

static ibx_outcome slow_handler(const ibx_message *m, char *error, size_t size, void *user) {
    lease_worker *w = (lease_worker *)user;
    lease_probe *p = w->lp;
    (void)m; (void)error; (void)size;
    pthread_mutex_lock(&p->mu);
    if (p->inside) p->overlaps++;
    p->inside++;
    p->calls[w->index]++;
    pthread_mutex_unlock(&p->mu);
    sleep_ms(3300); /* more than three times the 1 s lease */
    pthread_mutex_lock(&p->mu);
    p->inside--;
    pthread_mutex_unlock(&p->mu);
    return IBX_DONE;
}

static void *thief_main(void *arg) {
    lease_worker *w = (lease_worker *)arg;
    ibx_store *s = open_table("Inbox", 0);
    ibx_dispatcher_desc dd;
    ibx_dispatcher *d = NULL;
    ibx_run_stats st;
    memset(&dd, 0, sizeof dd);
    dd.store = s;
    dd.lease_seconds = 1;
    dd.reap_interval_ms = 100;
    if (s && ibx_dispatcher_create(&dd, &d) == IBX_OK) {
        int started = 0;
        ibx_dispatcher_on(d, "slow", slow_handler, w);
        while (!started && !__atomic_load_n(&w->lp->stop, __ATOMIC_SEQ_CST)) { /* the first worker claims first */
            pthread_mutex_lock(&w->lp->mu);
            started = w->lp->calls[0] > 0;
            pthread_mutex_unlock(&w->lp->mu);
            sleep_ms(5);
        }
        while (!__atomic_load_n(&w->lp->stop, __ATOMIC_SEQ_CST)) {
            ibx_dispatcher_run_once(d, &st);
            sleep_ms(20);
        }
    }
    ibx_dispatcher_destroy(d);
    ibx_store_close(s);
    return NULL;
}

/* ---- renewal faults (IBX-078): a lease not extended is not started on ---------------------
 * As OBX-059-RENEW-*: allocations refused on the renewal thread (a fault
 * hook of the test), or a lease taken away under it; the second message
 * of the batch must then not be started by this dispatcher. */
static pthread_t g_main_thread;
static int g_refuse_others; /* set and cleared while no other thread of ours runs */
static int refuse_here(void) { return g_refuse_others && !pthread_equal(pthread_self(), g_main_thread); }
static void *refusing_alloc(size_t n, void *u) { (void)u; return refuse_here() ? NULL : malloc(n); }
static void *refusing_realloc(void *p, size_t n, void *u) { (void)u; return refuse_here() ? NULL : realloc(p, n); }
static void refusing_free(void *p, void *u) { (void)u; free(p); }

typedef struct fault_case {
    int lost;                    /* else: allocations refused */
    ibx_store *other;
    char other_owner[37];
    int started, stolen, waited_ok;
} fault_case;

static ibx_outcome fault_handler(const ibx_message *m, char *error, size_t size, void *user) {
    fault_case *fc = (fault_case *)user;
    int tries;
    (void)error; (void)size;
    if (fc->started++ > 0) return IBX_DONE;
    if (fc->lost) {
        char q[256];
        snprintf(q, sizeof q, "UPDATE {T} SET \"OwnerToken\" = '%s' WHERE \"MessageId\" = '%s'", fc->other_owner,
                 strcmp(m->message_id, "f-0") == 0 ? "f-1" : "f-0");
        fc->stolen = sql(fc->other, q);
        for (tries = 0; tries < 1200 && !fc->waited_ok; tries++) { /* until the renewal has seen it (60 s at most) */
            fc->waited_ok = logged("lease renewal found 1 of 2", NULL, NULL);
            if (!fc->waited_ok) sleep_ms(50);
        }
        return IBX_DONE;
    }
    sleep_ms(2100); /* past the 2 s lease: the second worker reaps and claims both */
    for (tries = 0; tries < 60 && fc->stolen < 2; tries++) {
        const ibx_message *ms;
        int n = 0;
        int64_t reaped = 0;
        ibx_reap(fc->other, &reaped);
        if (ibx_claim(fc->other, fc->other_owner, 60, 10, &ms, &n) == IBX_OK) fc->stolen += n;
        if (fc->stolen < 2) sleep_ms(100);
    }
    return IBX_DONE;
}

static void renewal_fault(int lost) {
    ibx_store *s = fresh(), *s1 = NULL;
    ibx_store_desc desc;
    ibx_dispatcher_desc dd;
    ibx_dispatcher *d = NULL;
    ibx_run_stats st;
    fault_case fc;
    TT_ASSERT(s != NULL);
    memset(&fc, 0, sizeof fc);
    fc.lost = lost;
    TT_ASSERT(enqueue(s, "fault", "shop", "f-0") && enqueue(s, "fault", "shop", "f-1"));
    fc.other = open_table("Inbox", 0);
    TT_ASSERT(fc.other != NULL);
    ibx_owner_token(fc.other, fc.other_owner);
    memset(&desc, 0, sizeof desc);
    desc.connection_string = g_conn;
    desc.table = "Inbox";
    desc.store_id = "ibx-test";
    TT_STORE_HOOKS(desc, refusing_alloc, refusing_realloc, refusing_free, keep_log, IBX_LOG_DEBUG);
    TT_EQ_INT(ibx_store_open(&desc, &s1), IBX_OK);
    memset(&dd, 0, sizeof dd);
    dd.store = s1;
    dd.lease_seconds = 2;
    dd.batch_size = 2;
    TT_EQ_INT(ibx_dispatcher_create(&dd, &d), IBX_OK);
    TT_EQ_INT(ibx_dispatcher_on(d, "fault", fault_handler, &fc), IBX_OK);
    log_reset();
    g_main_thread = pthread_self();
    g_refuse_others = !lost;
    ibx_dispatcher_run_once(d, &st);
    ibx_dispatcher_destroy(d);
    g_refuse_others = 0;
    TT_EQ_INT(st.claimed, 2);
    TT_EQ_INT(fc.started, 1); /* the second is the other worker's now */
    if (lost) {
        TT_ASSERT(fc.stolen && fc.waited_ok);
    } else {
        TT_EQ_INT(fc.stolen, 2);
        TT_ASSERT(logged("lease renewal failed", NULL, NULL));
    }
    ibx_store_close(s1);
    ibx_store_close(fc.other);
    ibx_store_close(s);
}
static void test_renewal_fault_alloc(void) { renewal_fault(0); }
static void test_renewal_lost(void) { renewal_fault(1); }

static void test_lease_renewal(void) {
    ibx_store *s = fresh();
    ibx_dispatcher_desc dd;
    ibx_dispatcher *d = NULL;
    ibx_run_stats st;
    lease_probe lp;
    lease_worker mine, theirs;
    pthread_t thief;
    ibx_message got;
    TT_ASSERT(s != NULL);
    memset(&lp, 0, sizeof lp);
    pthread_mutex_init(&lp.mu, NULL);
    mine.lp = theirs.lp = &lp;
    mine.index = 0;
    theirs.index = 1;
    TT_ASSERT(enqueue(s, "slow", "shop", "slow-1"));
    memset(&dd, 0, sizeof dd);
    dd.store = s;
    dd.lease_seconds = 1;
    TT_EQ_INT(ibx_dispatcher_create(&dd, &d), IBX_OK);
    TT_EQ_INT(ibx_dispatcher_on(d, "slow", slow_handler, &mine), IBX_OK);
    TT_ASSERT(pthread_create(&thief, NULL, thief_main, &theirs) == 0);
    TT_EQ_INT(ibx_dispatcher_run_once(d, &st), IBX_OK);
    sleep_ms(1500);
    __atomic_store_n(&lp.stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(thief, NULL);
    TT_EQ_INT(st.done, 1);
    TT_EQ_INT(lp.overlaps, 0);
    TT_EQ_INT(lp.calls[0], 1);
    TT_EQ_INT(lp.calls[1], 0);
    TT_EQ_INT(ibx_get(s, "slow-1", "shop", &got), IBX_OK);
    TT_EQ_INT(got.status, IBX_STATUS_DONE);
    ibx_dispatcher_destroy(d);
    pthread_mutex_destroy(&lp.mu);
    ibx_store_close(s);
}

static void test_lease_extend(void) {
    ibx_store *s = fresh();
    const ibx_message *ms;
    char owner[37], thief[37];
    ibx_key k;
    int n = 0;
    int64_t changed = -1, reaped = -1;
    TT_ASSERT(s != NULL && enqueue(s, "t", "shop", "ext-1"));
    ibx_owner_token(s, owner);
    ibx_owner_token(s, thief);
    TT_EQ_INT(ibx_claim(s, owner, 1, 10, &ms, &n), IBX_OK);
    k.source = "shop";
    k.message_id = "ext-1";
    TT_EQ_INT(ibx_lease_extend(s, owner, &k, 1, 30, &changed), IBX_OK);
    TT_EQ_INT(changed, 1);
    TT_EQ_INT(ibx_lease_extend(s, thief, &k, 1, 30, &changed), IBX_OK);
    TT_EQ_INT(changed, 0);
    TT_EQ_INT(ibx_lease_extend(s, owner, &k, 1, 0, &changed), IBX_ERR_OUT_OF_RANGE);
    sleep_ms(1300);
    TT_EQ_INT(ibx_reap(s, &reaped), IBX_OK);
    TT_EQ_INT(reaped, 0);
    TT_EQ_INT(ibx_ack(s, owner, &k, 1, &changed), IBX_OK);
    TT_EQ_INT(changed, 1);
    ibx_store_close(s);
}


/* ---- beyond the peers: batch handlers, pause on outage ----------------------------------- */

static int64_t zero_backoff(int attempts, void *user) { (void)attempts; (void)user; return 0; }

static int g_batch_calls, g_batch_wrong;
/* Message id "<n>": n % 3 == 1 retries once, == 2 is dead (reason: its id). */
static void inbox_batch(const ibx_message *const *ms, ibx_batch_result *results, int count, void *user) {
    int i;
    (void)user;
    g_batch_calls++;
    for (i = 0; i < count; i++) {
        int n = atoi(ms[i]->message_id);
        if (strcmp(ms[i]->topic, "b") != 0) g_batch_wrong++;
        if (n % 3 == 1 && ms[i]->attempt == 0) {
            results[i].outcome = IBX_RETRY;
        } else if (n % 3 == 2) {
            results[i].outcome = IBX_DEAD;
            snprintf(results[i].error, sizeof results[i].error, "%s", ms[i]->message_id);
        } else {
            results[i].outcome = IBX_DONE;
        }
    }
}

static int g_inbox_down;
static ibx_outcome inbox_uplink(const ibx_message *m, char *error, size_t size, void *user) {
    (void)m; (void)user;
    if (g_inbox_down > 0 && g_inbox_down--) {
        snprintf(error, size, "down");
        return IBX_PAUSE;
    }
    return IBX_DONE;
}

/* The engine's batch handlers and pauses, through the inbox's face. */
static void test_batch_and_pause(void) {
    ibx_store *s = fresh();
    ibx_dispatcher_desc dd;
    ibx_dispatcher *d = NULL;
    ibx_run_stats st;
    char id[16];
    int i, rounds = 0, paused = 0;
    TT_ASSERT(s != NULL);
    for (i = 0; i < 300; i++) {
        snprintf(id, sizeof id, "%d", i);
        TT_ASSERT(enqueue(s, i % 30 == 0 ? "u" : "b", "src", id));
    }
    memset(&dd, 0, sizeof dd);
    dd.store = s;
    dd.batch_size = 64;
    dd.backoff = zero_backoff;
    dd.pause_ms = 1;
    dd.pause_max_ms = 2;
    TT_EQ_INT(ibx_dispatcher_create(&dd, &d), IBX_OK);
    TT_EQ_INT(ibx_dispatcher_on_batch(d, "b", inbox_batch, NULL), IBX_OK);
    TT_EQ_INT(ibx_dispatcher_on(d, "u", inbox_uplink, NULL), IBX_OK);
    g_batch_calls = g_batch_wrong = 0;
    g_inbox_down = 50;
    while (scalar(s, "SELECT COUNT(*) FROM {T} WHERE \"Status\" = 'Processing'") > 0 && rounds++ < 100000) {
        ibx_result r = ibx_dispatcher_run_once(d, &st);
        TT_ASSERT(r == IBX_OK || r == IBX_EMPTY);
        paused += st.paused;
        if (r == IBX_EMPTY) sleep_ms(1);
    }
    TT_EQ_INT(g_inbox_down, 0);
    TT_EXPECT(paused >= 50);
    TT_EQ_INT(g_batch_wrong, 0);
    TT_EXPECT(g_batch_calls < 100);
    /* 290 of topic b: ids 1, 4, ... retried once, 2, 5, ... dead with their id. */
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T} WHERE \"Status\" = 'Dead' AND \"LastError\" = \"MessageId\""), 100);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T} WHERE \"Status\" = 'Dead'"), 100);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T} WHERE \"Status\" = 'Done' AND \"Attempt\" = 1"), 100);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T} WHERE \"Status\" = 'Done' AND \"Attempt\" = 0"), 100);
    ibx_dispatcher_destroy(d);
    ibx_store_close(s);
}


/* Enqueue one message and fail it with `error`. */
static int dead_one(ibx_store *s, const char *source, const char *id, const char *error) {
    char owner[37];
    const ibx_message *ms;
    ibx_key k;
    if (!enqueue(s, "t", source, id)) return 0;
    ibx_owner_token(s, owner);
    if (claim(s, owner, 1, &ms) != 1) return 0;
    k.source = ms[0].source;
    k.message_id = ms[0].message_id;
    return ibx_fail(s, owner, &k, 1, error, NULL) == IBX_OK;
}

/* The dead-letter tools through the inbox's face: keys are (source, id). */
/* Operator actions: ibx_dead_move (a cancel; with in_flight also one
 * leased) and ibx_run_now (a scheduled one due now). */
static void test_dead_move_run_now(void) {
    ibx_store *s = fresh();
    ibx_new_message later = msg("op.a", "ops", "later", "{}");
    ibx_message m;
    ibx_key k;
    const ibx_message *ms;
    char owner[37];
    int64_t changed = -1;
    TT_ASSERT(s != NULL);
    ibx_owner_token(s, owner);
    TT_ASSERT(enqueue(s, "op.a", "ops", "ready"));
    later.due_utc_ms = now_ms() + 3600000;
    TT_ASSERT(ibx_enqueue(s, &later, NULL) == IBX_OK);
    TT_EQ_INT(ibx_dead_move(s, "ready", "", "r", 0, &changed), IBX_ERR_INVALID_ARG);
    TT_EQ_STR(ibx_store_last_error(s)->where, "ibx_dead_move: source");
    TT_EQ_INT(ibx_dead_move(s, "ready", "ops", NULL, 0, &changed), IBX_ERR_INVALID_ARG);
    TT_EQ_STR(ibx_store_last_error(s)->where, "ibx_dead_move: reason");
    TT_EQ_INT(changed, -1);
    TT_EQ_INT(ibx_run_now(s, "ready", "ops", &changed), IBX_OK);
    TT_EQ_INT(changed, 0); /* due already */
    TT_EQ_INT(ibx_run_now(s, "later", "ops", &changed), IBX_OK);
    TT_EQ_INT(changed, 1);
    TT_EQ_INT(ibx_get(s, "later", "ops", &m), IBX_OK);
    TT_EXPECT(m.next_attempt_ms <= now_ms() + 2000);
    TT_EQ_INT(claim(s, owner, 1, &ms), 1);
    k.source = "ops";
    k.message_id = strcmp(ms[0].message_id, "ready") == 0 ? "ready" : "later";
    /* In flight: moved only with in_flight; the holder's ack then changes nothing. */
    TT_EQ_INT(ibx_dead_move(s, k.message_id, "ops", "stuck", 0, &changed), IBX_OK);
    TT_EQ_INT(changed, 0);
    TT_EQ_INT(ibx_dead_move(s, k.message_id, "ops", "stuck", 1, &changed), IBX_OK);
    TT_EQ_INT(changed, 1);
    TT_EQ_INT(ibx_ack(s, owner, &k, 1, &changed), IBX_OK);
    TT_EQ_INT(changed, 0);
    TT_EQ_INT(ibx_get(s, k.message_id, "ops", &m), IBX_OK);
    TT_EQ_INT(m.status, IBX_STATUS_DEAD);
    TT_EQ_STR(m.last_error, "stuck");
    /* The other one, waiting: a cancel; Dead stays Dead. */
    k.message_id = strcmp(k.message_id, "ready") == 0 ? "later" : "ready";
    TT_EQ_INT(ibx_dead_move(s, k.message_id, "ops", "cancelled", 0, &changed), IBX_OK);
    TT_EQ_INT(changed, 1);
    TT_EQ_INT(status_of(s, "ops", k.message_id), IBX_STATUS_DEAD);
    TT_EQ_INT(ibx_dead_move(s, k.message_id, "ops", "again", 1, &changed), IBX_OK);
    TT_EQ_INT(changed, 0);
    TT_EQ_INT(claim(s, owner, 10, &ms), 0);
    ibx_store_close(s);
}

static void test_dead_letters(void) {
    ibx_store *s = fresh();
    ibx_dead_filter f;
    const ibx_message *ms;
    ibx_message m;
    int n = 0;
    int64_t changed = -1;
    TT_ASSERT(s != NULL);
    TT_ASSERT(dead_one(s, "s1", "m1", "boom 1") && dead_one(s, "s1", "m2", "boom 2") &&
              dead_one(s, "s1", "m3", "boom 3") && dead_one(s, "s1", "m4", "boom 4") &&
              dead_one(s, "s2", "m1", "nope") && dead_one(s, "s2", "m2", "nope"));
    TT_ASSERT(enqueue(s, "t", "s3", "ready"));
    TT_EQ_INT(ibx_dead_list(s, NULL, 0, 100, &ms, &n), IBX_OK);
    TT_EQ_INT(n, 6);
    TT_EQ_INT(ibx_dead_list(s, NULL, 4, 100, &ms, &n), IBX_OK);
    TT_EQ_INT(n, 2);
    memset(&f, 0, sizeof f);
    f.source = "s1";
    f.message_id = "m2";
    TT_EQ_INT(ibx_dead_list(s, &f, 0, 100, &ms, &n), IBX_OK);
    TT_EQ_INT(n, 1);
    TT_EQ_STR(ms[0].last_error, "boom 2");
    f.message_id = "";
    TT_EQ_INT(ibx_dead_list(s, &f, 0, 100, &ms, &n), IBX_ERR_INVALID_ARG);
    TT_EQ_STR(ibx_store_last_error(s)->where, "ibx_dead_list: filter.message_id");
    /* Revive a source's dead messages: Processing again, attempts 0, error kept. */
    memset(&f, 0, sizeof f);
    f.source = "s2";
    TT_EQ_INT(ibx_dead_replay(s, &f, &changed), IBX_OK);
    TT_EQ_INT(changed, 2);
    TT_EQ_INT(ibx_get(s, "m1", "s2", &m), IBX_OK);
    TT_EQ_INT(m.status, IBX_STATUS_PROCESSING);
    TT_EQ_INT(m.attempt, 0);
    TT_EQ_STR(m.last_error, "nope");
    /* Purge by error text. */
    memset(&f, 0, sizeof f);
    f.error_contains = "boom";
    TT_EQ_INT(ibx_dead_purge(s, &f, &changed), IBX_OK);
    TT_EQ_INT(changed, 4);
    TT_EQ_INT(ibx_dead_list(s, NULL, 0, 100, &ms, &n), IBX_EMPTY);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), 3);
    ibx_store_close(s);
}

/* The plan of one library statement (tests/plans.h). */
static int plan_of(ibx_store *s, int slot, const char *const *args, char *out, size_t cap) {
    return plans_of(s->db.dbc, g_pg, !s->db.tx_by_sql, s->sql[slot], args, " s m ", out, cap);
}

#define PLAN_OWNER "'0192abcd-ef01-7000-8000-000000000001'"

/* Every claim, settle, reap, cleanup and get statement finds its rows
 * through an index whatever the statistics say: on an analyzed inbox of
 * 100,000 rows, most of them Done, and on one analyzed while empty
 * (CORE-PLANS). */
static void test_plans(void) {
    const char *srcs = g_pg ? "'{src}'" : "'[\"src\"]'", *ids = g_pg ? "'{m1}'" : "'[\"m1\"]'";
    struct { int slot; const char *args[8]; } stmts[12];
    ibx_store *s = fresh();
    static char plan[16384];
    int state, i, n = 0;
    TT_ASSERT(s != NULL);
#define PLAN(slot_, ...) do { const char *a_[] = {__VA_ARGS__, NULL}; stmts[n].slot = slot_; \
        memcpy(stmts[n].args, a_, sizeof a_); n++; } while (0)
    PLAN(IBX__Q_CLAIM, PLAN_OWNER, "30", g_pg ? "100" : srcs, g_pg ? NULL : ids);
    PLAN(IBX__Q_ACK, PLAN_OWNER, srcs, ids);
    PLAN(IBX__Q_ABANDON, "NULL", "1", "'e'", PLAN_OWNER, srcs, ids);
    PLAN(IBX__Q_FAIL, "'e'", PLAN_OWNER, srcs, ids);
    PLAN(IBX__Q_EXTEND, "30", PLAN_OWNER, srcs, ids);
    PLAN(IBX__Q_REAP, NULL);
    PLAN(IBX__Q_CLEANUP, "1000", "100");
    PLAN(IBX__Q_GET, "'src'", "'m1'");
    if (g_my) {
        PLAN(IBX__Q_CLAIM_PICK, "100", "200");
        PLAN(IBX__Q_CLAIM_READ, PLAN_OWNER, "30", srcs, ids);
    }
#undef PLAN
    for (state = 0; state < 2; state++) {
        if (state == 0 && g_pg) {
            TT_ASSERT(sql(s, "INSERT INTO {T} (\"Source\", \"MessageId\", \"Topic\", \"Status\", \"Priority\") "
                             "SELECT 'src', 'm' || g, 't', CASE WHEN g % 20 = 0 THEN 'Processing' ELSE 'Done' END, "
                             "g % 11 - 5 FROM generate_series(1, 100000) AS g"));
        } else if (state == 0) {
            TT_ASSERT(sql(s, "INSERT INTO {T} (\"Source\", \"MessageId\", \"Topic\", \"Status\", \"Priority\") "
                             "SELECT 'src', CONCAT('m', seq), 't', CASE WHEN seq % 20 = 0 THEN 'Processing' "
                             "ELSE 'Done' END, CAST(seq % 11 AS SIGNED) - 5 FROM seq_1_to_100000"));
        } else {
            TT_ASSERT(sql(s, "DELETE FROM {T}"));
        }
        TT_ASSERT(sql(s, g_pg ? "ANALYZE {T}" : "ANALYZE TABLE {T}"));
        for (i = 0; i < n; i++) {
            TT_ASSERT(plan_of(s, stmts[i].slot, stmts[i].args, plan, sizeof plan));
            if (strstr(plan, "FULL SCAN") != NULL)
                printf("    %s table, statement %d scans the table:\n%s", state ? "empty" : "100k-row", stmts[i].slot, plan);
            TT_EXPECT(strstr(plan, "FULL SCAN") == NULL);
            /* The claim reads the index of its order (priority with aging), and
             * walks it on the filled table. Analyzed empty, PostgreSQL may read
             * its range and sort it: one row is all it expects (the reap's
             * ANALYZE, ibx_reap, renews the statistics as the table fills). */
            if (stmts[i].slot == (g_my ? IBX__Q_CLAIM_PICK : IBX__Q_CLAIM)) {
                int sorts = state == 0 && plans_sorts(plan);
                const char *claim_ix = g_my ? "_ReadyRank" : "_Claim"; /* MariaDB: layout 2's ready index */
                if (!strstr(plan, claim_ix) || sorts) printf("    the claim does not walk IX_*%s:\n%s", claim_ix, plan);
                TT_EXPECT(strstr(plan, claim_ix) != NULL && !sorts);
            }
        }
    }
    ibx_store_close(s);
}

/* ---- message priority (IBX-PRIO-*) ------------------------------------------------- */

/* Claim one message at a time (a claim's rows come back in no particular
 * order), check the claimed row's priority against ibx_get's, ack it; the
 * message ids joined by "," in claim order. */
static int prio_claims(ibx_store *s, char *out, size_t cap) {
    const ibx_message *ms = NULL;
    ibx_message m;
    ibx_key k[1];
    char owner[37];
    int n = 0;
    ibx_result r;
    out[0] = '\0';
    ibx_owner_token(s, owner);
    while ((r = ibx_claim(s, owner, 30, 1, &ms, &n)) == IBX_OK) {
        size_t used = strlen(out);
        snprintf(out + used, cap - used, "%s%s", used ? "," : "", ms[0].message_id);
        if (ibx_get(s, ms[0].message_id, ms[0].source, &m) != IBX_OK || m.priority != ms[0].priority) {
            printf("    %s: claimed priority %d, stored %d\n", ms[0].message_id, ms[0].priority, m.priority);
            return 0;
        }
        k[0].source = ms[0].source;
        k[0].message_id = ms[0].message_id;
        if (ibx_ack(s, owner, k, 1, NULL) != IBX_OK) return 0;
    }
    return r == IBX_EMPTY;
}

/* Out of range refused before any SQL, naming it (ibx_enqueue and the
 * statements of ibx_enqueue_sql); the bounds taken. */
static void test_priority_args(void) {
    ibx_store *s = fresh();
    ibx_new_message m = msg("prio", "src", "bad", "p");
    ibx_sql *q = NULL;
    int enqueued = -1;
    TT_ASSERT(s != NULL);
    m.priority = IBX_PRIORITY_MAX + 1;
    TT_EQ_INT(ibx_enqueue(s, &m, &enqueued), IBX_ERR_OUT_OF_RANGE);
    TT_EQ_STR(ibx_store_last_error(s)->where, "ibx_enqueue: priority");
    TT_EXPECT(strstr(ibx_store_last_error(s)->message, "-5..5") != NULL);
    TT_EQ_INT(enqueued, -1);
    m.priority = IBX_PRIORITY_MIN - 1;
    TT_EQ_INT(ibx_enqueue_sql(s, &m, IBX_SQL_MARKERS_QUESTION, &q), IBX_ERR_OUT_OF_RANGE);
    TT_EQ_STR(ibx_store_last_error(s)->where, "ibx_enqueue: priority");
    TT_ASSERT(q == NULL);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), 0);
    m.priority = IBX_PRIORITY_MIN;
    TT_EQ_INT(ibx_enqueue(s, &m, &enqueued), IBX_OK);
    m = msg("prio", "src", "good", "p");
    m.priority = IBX_PRIORITY_MAX;
    TT_EQ_INT(ibx_enqueue(s, &m, &enqueued), IBX_OK);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), 2);
    ibx_store_close(s);
}

/* Higher priority first among due messages, unset 0; aging: a level is
 * worth 10 s of waiting (due times in the past stand for time waited), and
 * no priority makes a message due early; a redelivery keeps the priority
 * first stored. */
static void test_priority_order(void) {
    ibx_store *s = fresh();
    ibx_new_message m;
    ibx_message got;
    char order[256];
    int64_t t;
    struct timespec ts;
    static const struct { const char *id; int prio; int64_t ago; } rows[] = {
        {"zero", 0, 0}, {"min", -5, 0}, {"max", 5, 0}, {"three", 3, 0}, {"minus1", -1, 0},
        {"lo-101s", -5, 101000}, {"lo-99s", -5, 99000}, {"mid-49.5s", 0, 49500}};
    size_t i;
    TT_ASSERT(s != NULL);
    clock_gettime(CLOCK_REALTIME, &ts);
    t = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 - 2000;
    for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        m = msg("prio", "src", rows[i].id, "p");
        m.priority = rows[i].prio;
        m.due_utc_ms = rows[i].ago ? t - rows[i].ago : 0;
        TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
    }
    TT_EQ_INT(ibx_get(s, "zero", "src", &got), IBX_OK);
    TT_EQ_INT(got.priority, 0);
    TT_EQ_INT(ibx_get(s, "three", "src", &got), IBX_OK);
    TT_EQ_INT(got.priority, 3);
    /* A redelivery with another priority, or none: the first one stays. */
    m = msg("prio", "src", "three", "p");
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
    m.priority = -4;
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
    TT_EQ_INT(ibx_get(s, "three", "src", &got), IBX_OK);
    TT_EQ_INT(got.priority, 3);
    TT_ASSERT(prio_claims(s, order, sizeof order));
    TT_EQ_STR(order, "lo-101s,mid-49.5s,lo-99s,max,three,zero,minus1,min");
    m = msg("prio", "src", "later", "p");
    m.priority = IBX_PRIORITY_MAX;
    m.due_utc_ms = t + 3600000;
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
    TT_ASSERT(prio_claims(s, order, sizeof order));
    TT_EQ_STR(order, "");
    ibx_store_close(s);
}

/* CORE-EXPIRY for the inbox: past expires_utc_ms when claimed, a message is
 * never handed to a handler: Dead with "expired", counted. A redelivery
 * keeps the expiry first stored. */
static int g_expiry_calls;
static ibx_outcome expiry_handler(const ibx_message *m, char *error, size_t size, void *user) {
    (void)m; (void)error; (void)size; (void)user;
    g_expiry_calls++;
    return IBX_DONE;
}

static void test_expiry(void) {
    ibx_store *s = fresh();
    ibx_dispatcher *d;
    ibx_run_stats st;
    ibx_new_message m;
    ibx_message got;
    int64_t counters[IBX_METRIC_COUNT_];
    int64_t past = now_ms() - 60000, later = now_ms() + 3600000;
    TT_ASSERT(s != NULL);
    m = msg("exp", "src", "late", "{}");
    m.expires_utc_ms = past;
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
    m = msg("exp", "src", "fine", "{}");
    m.expires_utc_ms = later;
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
    m.expires_utc_ms = past; /* a redelivery: the first expiry stays */
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
    TT_ASSERT(enqueue(s, "exp", "src", "plain"));
    TT_EQ_INT(ibx_get(s, "late", "src", &got), IBX_OK);
    TT_EQ_INT(got.expires_ms, past);
    TT_EQ_INT(ibx_get(s, "fine", "src", &got), IBX_OK);
    TT_EQ_INT(got.expires_ms, later);
    TT_EQ_INT(ibx_get(s, "plain", "src", &got), IBX_OK);
    TT_EQ_INT(got.expires_ms, 0);
    d = dispatcher(s, 0, NULL);
    TT_ASSERT(d != NULL);
    TT_EQ_INT(ibx_dispatcher_on(d, "exp", expiry_handler, NULL), IBX_OK);
    g_expiry_calls = 0;
    memset(&st, 0, sizeof st);
    TT_EQ_INT(ibx_dispatcher_run_once(d, &st), IBX_OK);
    TT_EQ_INT(st.claimed, 3);
    TT_EQ_INT(g_expiry_calls, 2);
    TT_EQ_INT(st.dead, 1);
    TT_EQ_INT(ibx_get(s, "late", "src", &got), IBX_OK);
    TT_EQ_INT(got.status, IBX_STATUS_DEAD);
    TT_EQ_STR(got.last_error, "expired");
    TT_EQ_INT(ibx_get(s, "fine", "src", &got), IBX_OK);
    TT_EQ_INT(got.status, IBX_STATUS_DONE);
    TT_EQ_INT(ibx_store_counters(s, counters), IBX_OK);
    TT_EQ_INT(counters[IBX_METRIC_EXPIRED_UNHANDLED], 1);
    TT_EQ_INT(counters[IBX_METRIC_DEAD], 1);
    ibx_dispatcher_destroy(d);
    /* Validation, naming the field. */
    m = msg("exp", "src", "bad", "{}");
    m.expires_utc_ms = -1;
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_ERR_OUT_OF_RANGE);
    TT_EQ_STR(ibx_store_last_error(s)->where, "ibx_enqueue: expires_utc_ms");
    m.expires_utc_ms = IBX_TIME_MAX_MS + 1;
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_ERR_OUT_OF_RANGE);
    m.due_utc_ms = later;
    m.expires_utc_ms = later - 1;
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_ERR_OUT_OF_RANGE);
    TT_EQ_STR(ibx_store_last_error(s)->where, "ibx_enqueue: expires_utc_ms");
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T} WHERE \"MessageId\" = 'bad'"), 0);
    ibx_store_close(s);
}

/* ---- issue 25: purges and replays under overlapping transactions ------------------- */

/* Until `want` sessions wait for a lock, asked on a connection of its own. */
static int lock_waits(int want) {
    raw_conn m;
    int seen;
    if (!raw_open(&m)) return 0;
    seen = raw_waits_seen(&m, want);
    raw_close(&m);
    return seen;
}

typedef struct idead_job {
    ibx_store *s;
    ibx_dead_filter f;
    int purge;
    ibx_result r;
    int64_t n;
} idead_job;
static void *idead_main(void *v) {
    idead_job *j = (idead_job *)v;
    j->r = j->purge ? ibx_dead_purge(j->s, &j->f, &j->n) : ibx_dead_replay(j->s, &j->f, &j->n);
    return NULL;
}

/* Issue 25 item 6, the inbox's purge (as OBX-DEAD-PURGE-REPLAYED): the
 * test holds the dead row, a replay queues for it, then a purge whose
 * snapshot sees it Dead; the test lets go. Replayed or purged, not both. */
static void test_dead_purge_replayed(void) {
    ibx_store *s = fresh(), *other = open_table("Inbox", 0);
    raw_conn c;
    idead_job rj, pj;
    pthread_t rt, pt;
    ibx_message m;
    int held = 0, w1 = 0, w2 = 0;
    TT_ASSERT(s && other);
    TT_ASSERT(dead_one(s, "src", "dpr", "boom"));
    TT_ASSERT(raw_open(&c));
    held = raw_lock(&c, s, "dpr");
    memset(&rj, 0, sizeof rj);
    memset(&pj, 0, sizeof pj);
    rj.s = s;
    rj.f.source = "src";
    rj.f.message_id = "dpr";
    pj.s = other;
    pj.purge = 1;
    if (held && pthread_create(&rt, NULL, idead_main, &rj) == 0) {
        w1 = lock_waits(1);
        if (w1 && pthread_create(&pt, NULL, idead_main, &pj) == 0) {
            w2 = lock_waits(2);
            SQLEndTran(SQL_HANDLE_DBC, c.dbc, SQL_ROLLBACK);
            pthread_join(pt, NULL);
        } else {
            SQLEndTran(SQL_HANDLE_DBC, c.dbc, SQL_ROLLBACK);
        }
        pthread_join(rt, NULL);
    }
    raw_close(&c);
    TT_ASSERT(held && w1);
    TT_ASSERT(w2);
    TT_EQ_INT(rj.r, IBX_OK);
    TT_EQ_INT(pj.r, IBX_OK);
    TT_EQ_INT(rj.n + pj.n, 1);
    TT_EQ_INT(rj.n, 1); /* the first waiter goes first */
    TT_EQ_INT(ibx_get(s, "dpr", "src", &m), IBX_OK);
    TT_EQ_INT(m.status, IBX_STATUS_PROCESSING);
    ibx_store_close(other);
    ibx_store_close(s);
}

typedef struct ireplay_each {
    ibx_store *s;
    int n;
    int64_t replayed;
    ibx_result r;
    pthread_mutex_t mu;
    int done;
} ireplay_each;
static void *ireplay_each_main(void *v) {
    ireplay_each *j = (ireplay_each *)v;
    ibx_dead_filter f;
    char id[16];
    int i;
    memset(&f, 0, sizeof f);
    f.source = "race";
    f.message_id = id;
    j->r = IBX_OK;
    for (i = j->n - 1; i >= 0 && j->r == IBX_OK; i -= 2) { /* every other one, from the end */
        int64_t k = 0;
        snprintf(id, sizeof id, "r%d", i);
        j->r = ibx_dead_replay(j->s, &f, &k);
        j->replayed += k;
    }
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

/* Issue 25 item 6 under load, the inbox (as OBX-DEAD-PURGE-RACE): replays
 * by key while purges of everything dead run on another connection:
 * replayed + purged = all, each replayed one still there.
 * OBX_TEST_DEAD_RACE sets the number of dead messages (default 600). */
static void test_dead_purge_race(void) {
    ibx_store *s = fresh(), *other = open_table("Inbox", 0);
    const char *env = getenv("OBX_TEST_DEAD_RACE");
    int total = env && atoi(env) >= 10 ? atoi(env) : 600, i, done = 0;
    ireplay_each job;
    pthread_t th;
    int64_t purged = 0, k = 0;
    ibx_result pr = IBX_OK;
    TT_ASSERT(s && other);
    for (i = 0; i < total; i++) {
        char id[16];
        snprintf(id, sizeof id, "r%d", i);
        TT_ASSERT(enqueue(s, "t", "race", id));
    }
    TT_ASSERT(sql(s, "UPDATE {T} SET \"Status\" = 'Dead', \"LastError\" = 'race'"));
    memset(&job, 0, sizeof job);
    job.s = s;
    job.n = total;
    pthread_mutex_init(&job.mu, NULL);
    TT_ASSERT(pthread_create(&th, NULL, ireplay_each_main, &job) == 0);
    while (!done && pr == IBX_OK) {
        pthread_mutex_lock(&job.mu);
        done = job.done;
        pthread_mutex_unlock(&job.mu);
        pr = ibx_dead_purge(other, NULL, &k); /* one more after the replays end */
        purged += pr == IBX_OK ? k : 0;
    }
    pthread_join(th, NULL);
    pthread_mutex_destroy(&job.mu);
    TT_EQ_INT(job.r, IBX_OK);
    TT_EQ_INT(pr, IBX_OK);
    TT_EQ_INT(job.replayed + purged, total);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T}"), job.replayed);
    TT_EQ_INT(scalar(s, "SELECT COUNT(*) FROM {T} WHERE \"Status\" = 'Processing'"), job.replayed);
    ibx_store_close(other);
    ibx_store_close(s);
}

/* Issue 25 item 8, the inbox: a replay is the decision to run the message:
 * its expiry goes (it would go dead again at once). */
static void test_replay_drops_expiry(void) {
    ibx_store *s = fresh();
    ibx_new_message n = msg("t", "src", "exp1", "{}");
    ibx_dead_filter f;
    ibx_message m;
    const ibx_message *ms;
    char owner[37];
    ibx_key k;
    int64_t changed = 0;
    TT_ASSERT(s != NULL);
    n.expires_utc_ms = now_ms() - 60000;
    TT_EQ_INT(ibx_enqueue(s, &n, NULL), IBX_OK);
    ibx_owner_token(s, owner);
    TT_EQ_INT(claim(s, owner, 1, &ms), 1);
    k.source = ms[0].source;
    k.message_id = ms[0].message_id;
    TT_EQ_INT(ibx_fail(s, owner, &k, 1, "expired", NULL), IBX_OK);
    memset(&f, 0, sizeof f);
    f.source = "src";
    TT_EQ_INT(ibx_dead_replay(s, &f, &changed), IBX_OK);
    TT_EQ_INT(changed, 1);
    TT_EQ_INT(ibx_get(s, "exp1", "src", &m), IBX_OK);
    TT_EQ_INT(m.status, IBX_STATUS_PROCESSING);
    TT_EQ_INT(m.expires_ms, 0);
    ibx_store_close(s);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s sqlite|postgresql|mariadb '<ODBC connection string>'\n", argv[0]);
        return 2;
    }
    g_label = argv[1];
    g_backend = strcmp(g_label, "sqlite3") == 0 ? "sqlite" : g_label;
#ifdef IBX_SQLITE3_API
    if (strcmp(g_label, "sqlite3") != 0) {
#else
    if (strcmp(g_label, "sqlite3") == 0) {
#endif
        fprintf(stderr, "%s: backend sqlite3 is this program built with IBX_SQLITE3_API, and only that\n", argv[0]);
        return 2;
    }
    g_conn = argv[2];
    g_pg = strcmp(g_backend, "postgresql") == 0;
    g_my = strcmp(g_backend, "mariadb") == 0;
#define RUN(id, what, fn) TT_RUN(id, g_label, what, fn)
    RUN("IBX-001", "(source, message id) is the dedup key", test_001_natural_key);
    RUN("IBX-002", "the dedup check is one atomic upsert", test_002_005_states);
    RUN("IBX-003", "Done: already processed", test_002_005_states);
    RUN("IBX-004", "new: recorded as Seen, not processed", test_002_005_states);
    RUN("IBX-005", "not Done: not processed, LastSeenUtc refreshed", test_002_005_states);
    RUN("IBX-006", "concurrent dedup checks from four processes are safe", test_006_concurrent_dedup);
    RUN("IBX-007", "a hash is stored for later verification", test_007_008_hash);
    RUN("IBX-008", "a different hash is a warning, not a failure", test_007_008_hash);
    RUN("CORE-MAX-PENDING", "past max_pending messages to handle ibx_enqueue is IBX_ERR_FULL and changes nothing", test_max_pending);
    RUN("IBX-MAX-PENDING-REDELIVERY", "at max_pending a redelivery of a waiting, leased or done message is taken; a new one is IBX_ERR_FULL", test_max_pending_redelivery);
    RUN("IBX-009", "NULL or empty message id rejected", test_009_012_dedup_args);
    RUN("IBX-010", "NULL or empty source rejected", test_009_012_dedup_args);
    RUN("IBX-011", "message id over 255 characters rejected", test_009_012_dedup_args);
    RUN("IBX-012", "source over 255 characters rejected", test_009_012_dedup_args);
    RUN("IBX-013", "enqueue persists durably", test_013_014_enqueue_upsert);
    RUN("IBX-014", "a duplicate enqueue is an upsert", test_013_014_enqueue_upsert);
    RUN("IBX-015", "NULL or empty topic rejected", test_015_022_enqueue_args);
    RUN("IBX-016", "NULL or empty source rejected", test_015_022_enqueue_args);
    RUN("IBX-017", "NULL or empty message id rejected", test_015_022_enqueue_args);
    RUN("IBX-018", "NULL payload rejected", test_015_022_enqueue_args);
    RUN("IBX-019", "empty payload accepted", test_015_022_enqueue_args);
    RUN("IBX-020", "topic over 255 characters rejected", test_015_022_enqueue_args);
    RUN("IBX-021", "topics are case-sensitive", test_015_022_enqueue_args);
    RUN("IBX-022", "payload stored as given", test_015_022_enqueue_args);
    RUN("IBX-023", "a future due time is not claimable before it passes", test_023_024_due);
    RUN("IBX-024", "no or past due time: claimable at once", test_023_024_due);
    RUN("IBX-025", "FirstSeenUtc from the database clock", test_025_026_seen_times);
    RUN("IBX-026", "LastSeenUtc refreshed by later upserts", test_025_026_seen_times);
    RUN("IBX-027", "new messages: Processing, attempt 0", test_027_initial);
    RUN("IBX-028", "a Done message is never changed", test_028_done_unchanged);
    RUN("IBX-029", "Seen, Processing, Dead get the new topic, payload, hash, due time", test_029_refresh);
    RUN("IBX-029-IN-FLIGHT", "new content redelivered in flight: the holder's ack makes it ready again, not Done", test_redelivery_in_flight);
    RUN("IBX-030", "claim locks atomically", test_030_claim_locks);
    RUN("IBX-031", "only Processing messages are claimed", test_031_038_only_processing);
    RUN("IBX-032", "only due messages are claimed", test_023_024_due);
    RUN("IBX-033", "leased messages are skipped until the lease is past", test_033_expired_lease);
    RUN("IBX-034", "LockedUntil = now + lease", test_034_036_claim_fields);
    RUN("IBX-035", "OwnerToken set", test_034_036_claim_fields);
    RUN("IBX-036", "claim returns the claimed messages", test_034_036_claim_fields);
    RUN("IBX-037", "nothing ready: empty, no error", test_037_039_040_041_claim_args);
    RUN("IBX-038", "Done and Dead are never claimed", test_031_038_only_processing);
    RUN("IBX-039", "claim respects the batch size", test_037_039_040_041_claim_args);
    RUN("IBX-040", "lease <= 0 is out of range", test_037_039_040_041_claim_args);
    RUN("IBX-041", "batch <= 0 is out of range", test_037_039_040_041_claim_args);
    RUN("IBX-042", "claim honours the next attempt time", test_042_backoff_respected);
    RUN("IBX-043", "the empty owner token is rejected by claim", test_043_130_empty_token);
    RUN("IBX-044", "ack moves to Done", test_044_049_ack);
    RUN("IBX-045", "ack only with the owner's token", test_045_046_048_ack_owner);
    RUN("IBX-046", "ack ignores unknown keys", test_045_046_048_ack_owner);
    RUN("IBX-047", "acked messages are not claimed again", test_044_049_ack);
    RUN("IBX-048", "ack: NULL keys rejected, empty set a no-op", test_045_046_048_ack_owner);
    RUN("IBX-049", "ack clears owner and lease", test_044_049_ack);
    RUN("IBX-050", "abandon releases the lease", test_050_053_057_abandon);
    RUN("IBX-051", "abandon increments the attempt", test_050_053_057_abandon);
    RUN("IBX-052", "abandon backs off exponentially from the attempt", test_050_053_057_abandon);
    RUN("IBX-053", "a given delay replaces the backoff", test_050_053_057_abandon);
    RUN("IBX-054", "abandon only with the owner's token", test_054_055_059_abandon_owner);
    RUN("IBX-055", "abandon ignores unknown keys", test_054_055_059_abandon_owner);
    RUN("IBX-056", "abandoned messages are claimable after the delay", test_056_available_again);
    RUN("IBX-057", "abandon records the last error", test_050_053_057_abandon);
    RUN("IBX-058", "a delay <= 0 is out of range", test_058_bad_delay);
    RUN("IBX-059", "abandon: NULL keys rejected, empty set a no-op", test_054_055_059_abandon_owner);
    RUN("IBX-060", "fail moves to Dead", test_060_065_fail);
    RUN("IBX-061", "fail records the error", test_060_065_fail);
    RUN("IBX-062", "fail only with the owner's token", test_062_063_066_fail_owner);
    RUN("IBX-063", "fail ignores unknown keys", test_062_063_066_fail_owner);
    RUN("IBX-064", "failed messages are not claimed again", test_060_065_fail);
    RUN("IBX-065", "fail clears owner and lease", test_060_065_fail);
    RUN("IBX-066", "fail: NULL keys rejected, empty set a no-op", test_062_063_066_fail_owner);
    RUN("IBX-067", "fail requires an error text", test_067_fail_needs_error);
    RUN("IBX-068", "reap finds expired leases", test_068_071_reap);
    RUN("IBX-069", "reap clears owner and lease", test_068_071_reap);
    RUN("IBX-070", "reaped messages are claimable", test_068_071_reap);
    RUN("IBX-071", "reap never touches Done or Dead", test_068_071_reap);
    RUN("IBX-072", "the dispatcher reaps periodically", test_072_periodic_reap);
    RUN("IBX-073", "handlers chosen by topic", test_073_074_route);
    RUN("IBX-074", "no handler: warning and retry later", test_073_074_route);
    RUN("IBX-075", "handler failures: retried or Dead by policy", test_075_083_failures);
    RUN("IBX-076", "the handler gets the whole message", test_076_whole_message);
    RUN("IBX-078", "two dispatchers never run one message at once", test_078_079_106_two_workers);
    RUN("IBX-079", "dispatchers run different messages concurrently", test_078_079_106_two_workers);
    RUN("IBX-080", "retries back off exponentially", test_080_082_backoff);
    RUN("IBX-081", "default backoff min(2^attempt s, 60 s)", test_080_082_backoff);
    RUN("IBX-082", "a custom backoff applies", test_075_083_failures);
    RUN("IBX-083", "out of attempts: Dead", test_075_083_failures);
    RUN("IBX-084", "max attempts default 10", test_084_default_attempts);
    RUN("IBX-098", "cleanup deletes old Done messages", test_098_101_cleanup);
    RUN("IBX-099", "cleanup never deletes Seen, Processing or Dead", test_098_101_cleanup);
    RUN("IBX-100", "cleanup retention, default 30 days", test_098_101_cleanup);
    RUN("IBX-101", "cleanup in bounded batches", test_098_101_cleanup);
    RUN("IBX-102", "one call is one transaction: a refusal leaves nothing", test_102_one_transaction);
    RUN("IBX-077", "redelivery after a crash keeps the key to dedupe on", test_077_redelivery);
    RUN("IBX-103", "claims never see uncommitted messages", test_103_no_dirty_reads);
    RUN("IBX-105", "three worker processes drain one table safely", test_105_processes);
    if (g_pg || g_my)
        RUN("IBX-DEADLOCK-REAL", "a real deadlock (40P01 / 1213) in an ack: the library is the victim, redoes the unit, counts no attempt", test_deadlock_real);
    RUN("IBX-119", "leases 10..300 s work", test_119_120_ranges);
    RUN("IBX-120", "batches 1..100 work", test_119_120_ranges);
    RUN("IBX-124", "the poll interval doubles while idle, up to a cap", test_124_idle_backoff);
    if (g_my)
        RUN("CORE-MY-STATE-STORED", "a new table's state columns are PERSISTENT; an older table gets them VIRTUAL (instant) and keeps them until converted by hand (one table copy); claim and ack work on all three", test_my_state_stored);
    else
        printf("N/A CORE-MY-STATE-STORED %s MariaDB's generated state columns\n", g_label);
    if (g_pg || g_my) RUN("IBX-126", "SELECT, INSERT, UPDATE, DELETE on the table are enough", test_126_permissions);
    else printf("N/A IBX-126 %s SQLite has no users or grants: file permissions apply\n", g_label);
    RUN("IBX-106", "a message is never held by two workers at once", test_078_079_106_two_workers);
    RUN("IBX-107", "dedup checks logged at DEBUG", test_107_113_logging);
    RUN("IBX-108", "enqueues logged at INFO with topic, source, id", test_107_113_logging);
    RUN("IBX-109", "claims logged at DEBUG with the count", test_107_113_logging);
    RUN("IBX-110", "handler invocations logged at INFO", test_076_whole_message);
    RUN("IBX-111", "handler failures logged at ERROR with id and error; a dead message once", test_075_083_failures);
    RUN("IBX-LOG-KV", "a sender's id, source and topic are quoted in log lines when they need it", test_log_kv_fields);
    RUN("IBX-112", "reaps logged at INFO with the count", test_107_113_logging);
    RUN("IBX-113", "every log line names its store", test_107_113_logging);
    RUN("IBX-114", "deployment creates what is missing", test_114_117_deploy);
    RUN("IBX-115", "without deployment nothing is created", test_114_117_deploy);
    RUN("IBX-116", "deployment is idempotent", test_114_117_deploy);
    RUN("IBX-117", "the Inbox table and its indexes", test_114_117_deploy);
    RUN("IBX-118", "a 16 MiB payload round-trips", test_118_large);
    RUN("IBX-122", "indexes for claim, leases, cleanup", test_122_125_indexes);
    RUN("IBX-125", "(Source, MessageId) is indexed", test_122_125_indexes);
    RUN("IBX-127", "payloads never reach the log", test_107_113_logging);
    RUN("IBX-130", "the empty owner token is rejected everywhere", test_043_130_empty_token);
    RUN("IBX-078", "a handler three times slower than its lease never runs twice at once (leases renewed)", test_lease_renewal);
    RUN("IBX-078-RENEW-FAULT", "a renewal that fails (allocations refused on its thread) starts no handler past the lease it holds", test_renewal_fault_alloc);
    RUN("IBX-078-RENEW-LOST", "a renewal that finds a lease taken away starts none of the batch's remaining handlers", test_renewal_lost);
    RUN("IBX-LEASE-EXTEND", "ibx_lease_extend keeps a lease; a thief's extension changes nothing", test_lease_extend);
    if (g_pg || g_my)
        RUN("CORE-TIME-ZONE", "times are right whatever the session's time zone (adopted connection)", test_time_zone);
    RUN("IBX-METRICS-TEXT", "ibx_metrics_text: counters, gauges, per-topic handler histogram, escaped labels, buffer size", test_metrics_text);
    RUN("IBX-KEY-EXACT", "keys differing only in a trailing space are different messages", test_key_exact);
    RUN("IBX-BATCH-PAUSE", "a batch handler (mixed outcomes, each on its message) and OBX_PAUSE through the inbox", test_batch_and_pause);
    RUN("CORE-EXPIRY", "a message past expires_utc_ms when claimed is never handled: Dead, \"expired\", counted; a redelivery keeps the first expiry; validation names the field", test_expiry);
    RUN("IBX-PRIO-ARGS", "a priority outside -5..5 refused before any SQL by ibx_enqueue and ibx_enqueue_sql, naming it; the bounds taken", test_priority_args);
    RUN("IBX-PRIO-ORDER", "higher priority claimed first among due messages; aging: a level is worth 10 s of waiting; none due early; a redelivery keeps the first priority", test_priority_order);
    RUN("IBX-ENVELOPE-ROUNDTRIP", "tenant, aggregate type and id, headers: own columns, byte-exact through enqueue, get, claim, dead-letter list and handler", test_envelope_roundtrip);
    RUN("IBX-ENVELOPE-LIMITS", "each envelope argument refused before any SQL, naming it; values at the limits fit", test_envelope_limits);
    RUN("IBX-ENVELOPE-REDELIVERY", "a redelivery keeps the envelope stored first; a dedup-check row takes the first enqueue's; Done is untouched", test_envelope_redelivery);
    RUN("IBX-DEAD-MOVE", "ibx_dead_move cancels a waiting message (in flight only when asked), ibx_run_now makes a scheduled one due", test_dead_move_run_now);
    RUN("IBX-DEAD-LETTERS", "dead letters by (source, id), topic, error: list, revive (attempts reset, error kept), purge", test_dead_letters);
    if (g_pg)
        RUN("IBX-DEAD-PURGE-REPLAYED", "a purge that waited for a replay's commit leaves the replayed message alone", test_dead_purge_replayed);
    else
        printf("N/A IBX-DEAD-PURGE-REPLAYED %s %s\n", g_label,
               g_my ? "one DELETE whose filter InnoDB checks on each row's latest version"
                    : "one writer: a purge reads what the replay committed");
    RUN("IBX-DEAD-PURGE-RACE", "replays by key during purges of all dead: replayed + purged = all, replayed ones kept", test_dead_purge_race);
    RUN("IBX-REPLAY-EXPIRY", "a replay drops the message's expiry", test_replay_drops_expiry);
    RUN("IBX-TXH-EXACTLY-ONCE", "dedup, then a transactional handler's writes and Done in one transaction: a redelivered message's effect exists once; a retry leaves none", test_txh_exactly_once);
    if (g_pg || g_my)
        RUN("IBX-TXH-LOST-CONNECTION", "the server ends a transactional handler's connection before its ack: rolled back, no attempt used, delivered again and done once", test_txh_lost_connection);
    else
        printf("N/A IBX-TXH-LOST-CONNECTION %s an embedded database has no connection to lose\n", g_label);
    RUN("IBX-TXH-KILL", "kill -9 before an inbox transactional handler's write, after it, before the commit, after it: every message's effect exactly once, Done exactly when it exists", test_txh_kill);
    RUN("CORE-CRASH-LOOP", "a handler that kills its worker: the message ends dead after max_starts starts, others keep flowing", test_crash_loop);
    RUN("CORE-MAX-STARTS-RANGE", "max_starts: 0 is the default (3), 1..1000, else refused naming the field", test_max_starts_range);
    RUN("CORE-SCHEMA-UPGRADE", "deploy upgrades a table made by the first release's DDL in place: rows kept in every state, columns added once (old rows priority 0; new ones claimed by priority)", test_schema_upgrade);
    RUN("CORE-SCHEMA-UPGRADE-V1", "deploy upgrades a storage-layout-1 inbox (with priority) in place: rows kept in every state (seen, ready by priority, leased live and expired, done, dead); then claim, ack, reap, cleanup work", test_schema_upgrade_v1);
    RUN("IBX-SCHEMA-FILE", "sql/<dialect>/inbox.sql is what the header deploys", test_schema_file);
    if (g_pg || g_my)
        RUN("CORE-PLANS", "claim, settle, reap, cleanup, get use an index on a 100k-row and an empty-analyzed inbox", test_plans);
    else
        printf("N/A CORE-PLANS %s one writer and no planner statistics to go stale: plans are SQLite's own rules\n", g_label);
    return tt_done();
}

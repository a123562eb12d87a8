/* bench.c: obx.h and ibx.h against the physical limit of the same database.
 *
 *   bench <sqlite|postgresql|mariadb> '<ODBC connection string>' [N]
 *   (make bench runs every backend through tests/bench.sh)
 *
 * Beside each library row stand the rows of a minimal "ideal outbox" (and
 * inbox) at the same durability: one table, a partial index on ready rows
 * (MariaDB: status leads the index), every step one statement where the
 * database allows (claim UPDATE ... WHERE id = ANY (ARRAY(SELECT ... LIMIT
 * 100 FOR UPDATE SKIP LOCKED)) RETURNING, ack UPDATE ... WHERE id = ANY
 * (...); MariaDB has no UPDATE ... RETURNING: its claim is a locking pick,
 * an UPDATE and COMMIT), in autocommit: a drained batch costs the ideal two
 * round trips and two commits (claim, ack), which it does not fuse. The
 * library drains through its dispatcher's loop (obx_dispatcher_run), which
 * sends a batch's acks with the next claim. It runs
 * through plain ODBC and, where the database has one, through the native
 * client API (libpq, the sqlite3 C API), so a row can show how much is the
 * library's statement design, how much the ODBC driver. The ratios
 * library/ideal are printed beside them.
 *
 * Method (research/perf-facts.md, issue 17): every workload runs REPEATS
 * times (BENCH_REPEATS, default 3), interleaved (library, ODBC, native,
 * library, ...; the order rotates per repeat), and the median is printed.
 * Drains start from a filled table whose statistics were taken filled
 * (VACUUM ANALYZE / ANALYZE TABLE / ANALYZE), autovacuum off on the bench
 * tables so that the statistics are the ones the bench chose; one row
 * repeats the 1-worker drain with statistics taken on the empty table,
 * which shows whether a plan depends on them. Statements per message come
 * from the server (PostgreSQL pg_stat_statements, top-level statements
 * including BEGIN/COMMIT; MariaDB the Questions counter) and are a count
 * of round trips for these clients. The size sweep (BENCH_SWEEP, default
 * 10000,100000; add 1000000 for the slow one) drains BENCH_SWEEP_READY
 * ready messages from a table of that many rows, the rest Done, and prints
 * the cost of a claim and per message: it must not grow with the table.
 * BENCH_SWEEP_SETTLE=S waits S seconds between the fill and the drain (the
 * server's own writes of a big fill then done).
 * BENCH_PRIORITY=1 gives the library's messages priorities, -5..5 round
 * robin (obx_new_message.priority; the ideal rows have none): the claim
 * then walks its priority order, whose cost must not grow either.
 *
 * BENCH_STMTS=1 also prints the library's statements by calls per workload
 * (PostgreSQL), the first thing to read when a ratio is low. BENCH_ONLY
 * (e.g. enq1,drain1) runs a subset of the workloads; "allocs" in it adds
 * the allocation rows, "latency" the two commit-to-handler rows
 * (tests/peers/bench_peers.sh). On SQLite the CPU per message of each side
 * (the database runs in the bench's processes) is printed with its ratio. */
#define _DEFAULT_SOURCE 1 /* MAP_ANONYMOUS: the drain workers' shared counter */
#define OBX_IMPLEMENTATION
#ifdef OBX_SQLITE3_API /* the library on SQLite's C API (make bench BENCH_CFLAGS=...); the rest stays ODBC */
#include <sql.h>
#include <sqlext.h>
#endif
#include <libpq-fe.h> /* before obx.h: obx_enqueue_pq, the native rows (native_enqueue) */
#include "obx.h"
#define IBX_IMPLEMENTATION
#include "ibx.h"
#include "bench_api.c"

#include <dirent.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { K_SQLITE, K_PG, K_MY };
enum { I_LIB, I_ODBC, I_NATIVE, I_COUNT };
enum { W_ENQ1, W_ENQB, W_DRAIN1, W_DRAIN2, W_DRAIN1E, W_IDEDUPN, W_IDEDUPS, W_IENQ, W_IDRAIN, W_DRAINB, W_DRAINO, W_ENQBO, W_COUNT };
enum { Q_ENQ1, Q_ENQB, Q_CLAIM, Q_CLAIM2, Q_ACK, Q_COUNT };

#define MAXREP 9

/* Short names for BENCH_ONLY (W_IDEDUPS runs with "dedup"). */
static const char *w_key[W_COUNT] = {"enq1", "enqb", "drain1", "drain2", "drain1e", "dedup", "dedup", "ienq", "idrain", "drainb", "draino", "enqbo"};

static const char *w_name[W_COUNT] = {
    "outbox enqueue, 1 per transaction",
    "outbox enqueue, 100 per transaction (batch)",
    "outbox drain (claim 100, ack), 1 worker",
    "outbox drain, 2 worker processes",
    "outbox drain, 1 worker, stats of empty table",
    "inbox dedup check, new message id",
    "inbox dedup check, message seen before",
    "inbox enqueue, 1 per transaction",
    "inbox drain (claim 100, ack), 1 worker",
    "outbox drain, 1 worker, batch handler",
    "outbox drain, 1 worker, 100 ordering keys",
    "outbox enqueue, batch of 100, 100 ordering keys",
};

static int g_kind, g_repeats = 3, g_counters, g_show_stmts;
static const char *g_backend, *g_conn;
static char g_payload[201];
static api g_mon; /* ODBC, autocommit: resets, fills, statistics, counters */
static double g_rate[W_COUNT][I_COUNT][MAXREP];
static double g_stmts[W_COUNT][I_COUNT];
/* CPU seconds per message, server and client (BENCH_SERVER_PID): rates on a
 * shared machine move with the load, CPU per message much less. */
static double g_cpu_srv[W_COUNT][I_COUNT][MAXREP], g_cpu_cli[W_COUNT][I_COUNT][MAXREP];
static int g_srv_pid, g_cur_w, g_cur_impl, g_cur_rep;
static double g_srv0, g_cli0;
static long long g_ctr_base;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int has_native(void) { return g_kind != K_MY; }
static const char *native_name(void) { return g_kind == K_PG ? "libpq" : g_kind == K_SQLITE ? "C API" : "-"; }

/* ---- names and SQL ------------------------------------------------------------------------ */

static const char *lib_outbox(void) { return g_kind == K_PG ? "dbo.\"OutboxBench\"" : g_kind == K_MY ? "OutboxBench" : "\"OutboxBench\""; }
static const char *lib_inbox(void) { return g_kind == K_PG ? "infra.\"InboxBench\"" : g_kind == K_MY ? "InboxBench" : "\"InboxBench\""; }

/* SQLite's clock in Unix ms, as the library's SQLite dialect reads it. */
#define LITE_NOW "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"

static const char *const pg_ddl[] = {
    "DROP TABLE IF EXISTS ideal_outbox",
    "DROP TABLE IF EXISTS ideal_inbox",
    "CREATE TABLE ideal_outbox (id bigserial PRIMARY KEY, topic text NOT NULL, payload text NOT NULL, "
    "status smallint NOT NULL DEFAULT 0, owner uuid, locked_until timestamptz, retry_count int NOT NULL DEFAULT 0, "
    "next_attempt_at timestamptz NOT NULL DEFAULT now(), created_at timestamptz NOT NULL DEFAULT now()) "
    "WITH (autovacuum_enabled = off)",
    "CREATE INDEX ideal_ready ON ideal_outbox (next_attempt_at) WHERE status = 0",
    "CREATE TABLE ideal_inbox (source text NOT NULL, message_id text NOT NULL, topic text NOT NULL DEFAULT '', "
    "payload text NOT NULL DEFAULT '', status smallint NOT NULL DEFAULT 0, owner uuid, locked_until timestamptz, "
    "attempt int NOT NULL DEFAULT 0, next_attempt_at timestamptz NOT NULL DEFAULT now(), "
    "seen_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (source, message_id)) WITH (autovacuum_enabled = off)",
    "CREATE INDEX ideal_in_ready ON ideal_inbox (next_attempt_at) WHERE status = 1",
    "ALTER TABLE dbo.\"OutboxBench\" SET (autovacuum_enabled = off)",
    "ALTER TABLE infra.\"InboxBench\" SET (autovacuum_enabled = off)",
    NULL};

static const char *const my_ddl[] = {
    "DROP TABLE IF EXISTS ideal_outbox",
    "DROP TABLE IF EXISTS ideal_inbox",
    "CREATE TABLE ideal_outbox (id BIGINT AUTO_INCREMENT PRIMARY KEY, topic VARCHAR(255) NOT NULL, "
    "payload LONGTEXT NOT NULL, status TINYINT NOT NULL DEFAULT 0, owner CHAR(36) NULL, "
    "locked_until DATETIME(6) NULL, retry_count INT NOT NULL DEFAULT 0, "
    "next_attempt_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)), "
    "created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)), KEY ideal_ready (status, next_attempt_at)) "
    "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
    "CREATE TABLE ideal_inbox (source VARCHAR(255) NOT NULL, message_id VARCHAR(255) NOT NULL, "
    "topic VARCHAR(255) NOT NULL DEFAULT '', payload LONGTEXT NOT NULL DEFAULT '', status TINYINT NOT NULL DEFAULT 0, "
    "owner CHAR(36) NULL, locked_until DATETIME(6) NULL, attempt INT NOT NULL DEFAULT 0, "
    "next_attempt_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)), "
    "seen_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)), PRIMARY KEY (source, message_id), "
    "KEY ideal_in_ready (status, next_attempt_at)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
    NULL};

static const char *const lite_ddl[] = {
    "DROP TABLE IF EXISTS ideal_outbox",
    "DROP TABLE IF EXISTS ideal_inbox",
    "CREATE TABLE ideal_outbox (id INTEGER PRIMARY KEY, topic TEXT NOT NULL, payload TEXT NOT NULL, "
    "status INTEGER NOT NULL DEFAULT 0, owner TEXT, locked_until INTEGER, retry_count INTEGER NOT NULL DEFAULT 0, "
    "next_attempt_at INTEGER NOT NULL DEFAULT (" LITE_NOW "), created_at INTEGER NOT NULL DEFAULT (" LITE_NOW "))",
    "CREATE INDEX ideal_ready ON ideal_outbox (next_attempt_at) WHERE status = 0",
    "CREATE TABLE ideal_inbox (source TEXT NOT NULL, message_id TEXT NOT NULL, topic TEXT NOT NULL DEFAULT '', "
    "payload TEXT NOT NULL DEFAULT '', status INTEGER NOT NULL DEFAULT 0, owner TEXT, locked_until INTEGER, "
    "attempt INTEGER NOT NULL DEFAULT 0, next_attempt_at INTEGER NOT NULL DEFAULT (" LITE_NOW "), "
    "seen_at INTEGER NOT NULL DEFAULT (" LITE_NOW "), PRIMARY KEY (source, message_id))",
    "CREATE INDEX ideal_in_ready ON ideal_inbox (next_attempt_at) WHERE status = 1",
    NULL};

/* The ideal statements, $n markers (each used once, in order). The
 * PostgreSQL claims name their rows by "= ANY (ARRAY(subquery))": written
 * "id IN (SELECT ... LIMIT 100)" the planner turns it into a hash semi
 * join over a sequential scan of the table once the statistics say the
 * table is small (10,000 rows: 2.6 ms instead of 0.3), whatever the LIMIT;
 * an array of keys (the inbox: of row addresses, locked, so they stay put
 * until the statement ends) is always a key or TID lookup. The
 * MariaDB claim is the best known there: a lock-free window of the ready
 * index, then those rows locked by key (a locking read of the index walks
 * every entry moved since the last purge), read in the same statement. */
static const char *outbox_sql(int q) {
    static const char *pg[Q_COUNT] = {
        "INSERT INTO ideal_outbox (topic, payload) VALUES ($1, $2)",
        "INSERT INTO ideal_outbox (topic, payload) SELECT t, p FROM unnest(CAST($1 AS text[]), CAST($2 AS text[])) AS u(t, p)",
        "UPDATE ideal_outbox SET status = 1, owner = CAST($1 AS uuid), locked_until = now() + interval '30 seconds' "
        "WHERE id = ANY (ARRAY(SELECT id FROM ideal_outbox WHERE status = 0 AND next_attempt_at <= now() "
        "ORDER BY next_attempt_at LIMIT 100 FOR UPDATE SKIP LOCKED)) RETURNING id, topic, payload",
        NULL,
        "UPDATE ideal_outbox SET status = 2, locked_until = NULL "
        "WHERE id = ANY (CAST($1 AS bigint[])) AND owner = CAST($2 AS uuid) AND status = 1"};
    static const char *my[Q_COUNT] = {
        "INSERT INTO ideal_outbox (topic, payload) VALUES ($1, $2)",
        NULL, /* built: 100 rows of VALUES */
        "SELECT t.id, t.topic, t.payload FROM (SELECT id FROM ideal_outbox FORCE INDEX (ideal_ready) "
        "WHERE status = 0 AND next_attempt_at <= UTC_TIMESTAMP(6) ORDER BY next_attempt_at LIMIT 200) AS c "
        "STRAIGHT_JOIN ideal_outbox AS t ON t.id = c.id WHERE t.status = 0 LIMIT 100 FOR UPDATE SKIP LOCKED",
        "SELECT t.id, t.topic, t.payload FROM (SELECT id FROM ideal_outbox FORCE INDEX (ideal_ready) "
        "WHERE status = 0 AND next_attempt_at <= UTC_TIMESTAMP(6) ORDER BY next_attempt_at LIMIT 2000) AS c "
        "STRAIGHT_JOIN ideal_outbox AS t ON t.id = c.id WHERE t.status = 0 LIMIT 100 FOR UPDATE SKIP LOCKED",
        NULL}; /* built: an id list */
    static const char *lite[Q_COUNT] = {
        "INSERT INTO ideal_outbox (topic, payload) VALUES ($1, $2)",
        NULL, /* built (ODBC): 100 rows of VALUES; C API: 100 prepared inserts in one transaction */
        /* sqliteodbc shows RETURNING rows only after a leading WITH. */
        "WITH _ AS (SELECT 1) UPDATE ideal_outbox SET status = 1, owner = $1, locked_until = " LITE_NOW " + 30000 "
        "WHERE id IN (SELECT id FROM ideal_outbox WHERE status = 0 AND next_attempt_at <= " LITE_NOW " "
        "ORDER BY next_attempt_at LIMIT 100) RETURNING id, topic, payload",
        NULL,
        "UPDATE ideal_outbox SET status = 2, locked_until = NULL "
        "WHERE id IN (SELECT value FROM json_each($1)) AND owner = $2 AND status = 1"};
    return (g_kind == K_PG ? pg : g_kind == K_MY ? my : lite)[q];
}

static const char *inbox_sql(int q) {
    static const char *pg[Q_COUNT] = {
        "INSERT INTO ideal_inbox AS t (source, message_id) VALUES ($1, $2) "
        "ON CONFLICT (source, message_id) DO UPDATE SET seen_at = now() RETURNING t.status",
        "INSERT INTO ideal_inbox (source, message_id, topic, payload, status) VALUES ($1, $2, $3, $4, 1) "
        "ON CONFLICT (source, message_id) DO NOTHING",
        "UPDATE ideal_inbox SET status = 3, owner = CAST($1 AS uuid), locked_until = now() + interval '30 seconds' "
        "WHERE ctid = ANY (ARRAY(SELECT ctid FROM ideal_inbox WHERE status = 1 AND "
        "next_attempt_at <= now() ORDER BY next_attempt_at LIMIT 100 FOR UPDATE SKIP LOCKED)) "
        "RETURNING source, message_id, topic, payload",
        NULL,
        "UPDATE ideal_inbox SET status = 2, owner = NULL, locked_until = NULL WHERE (source, message_id) IN "
        "(SELECT s, m FROM unnest(CAST($1 AS text[]), CAST($2 AS text[])) AS k(s, m)) "
        "AND owner = CAST($3 AS uuid) AND status = 3"};
    static const char *my[Q_COUNT] = {
        "INSERT INTO ideal_inbox (source, message_id) VALUES ($1, $2) "
        "ON DUPLICATE KEY UPDATE seen_at = UTC_TIMESTAMP(6) RETURNING status",
        "INSERT IGNORE INTO ideal_inbox (source, message_id, topic, payload, status) VALUES ($1, $2, $3, $4, 1)",
        "SELECT t.source, t.message_id, t.topic, t.payload FROM (SELECT source, message_id FROM ideal_inbox "
        "FORCE INDEX (ideal_in_ready) WHERE status = 1 AND next_attempt_at <= UTC_TIMESTAMP(6) "
        "ORDER BY next_attempt_at LIMIT 200) AS c STRAIGHT_JOIN ideal_inbox AS t "
        "ON t.source = c.source AND t.message_id = c.message_id WHERE t.status = 1 LIMIT 100 FOR UPDATE SKIP LOCKED",
        "SELECT t.source, t.message_id, t.topic, t.payload FROM (SELECT source, message_id FROM ideal_inbox "
        "FORCE INDEX (ideal_in_ready) WHERE status = 1 AND next_attempt_at <= UTC_TIMESTAMP(6) "
        "ORDER BY next_attempt_at LIMIT 2000) AS c STRAIGHT_JOIN ideal_inbox AS t "
        "ON t.source = c.source AND t.message_id = c.message_id WHERE t.status = 1 LIMIT 100 FOR UPDATE SKIP LOCKED",
        NULL};
    static const char *lite[Q_COUNT] = {
        "WITH _ AS (SELECT 1) INSERT INTO ideal_inbox (source, message_id) VALUES ($1, $2) "
        "ON CONFLICT (source, message_id) DO UPDATE SET seen_at = " LITE_NOW " RETURNING status",
        "INSERT INTO ideal_inbox (source, message_id, topic, payload, status) VALUES ($1, $2, $3, $4, 1) "
        "ON CONFLICT (source, message_id) DO NOTHING",
        "WITH _ AS (SELECT 1) UPDATE ideal_inbox SET status = 3, owner = $1, locked_until = " LITE_NOW " + 30000 "
        "WHERE rowid IN (SELECT rowid FROM ideal_inbox WHERE status = 1 AND next_attempt_at <= " LITE_NOW " "
        "ORDER BY next_attempt_at LIMIT 100) RETURNING source, message_id, topic, payload",
        NULL,
        "UPDATE ideal_inbox SET status = 2, owner = NULL, locked_until = NULL WHERE (source, message_id) IN "
        "(SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each($1)) "
        "AND owner = $2 AND status = 3"};
    return (g_kind == K_PG ? pg : g_kind == K_MY ? my : lite)[q];
}

/* ---- growable text ------------------------------------------------------------------------ */

typedef struct txt {
    char *p;
    size_t len, cap;
} txt;

static void tx_add(txt *t, const char *s, size_t n) {
    if (t->len + n + 1 > t->cap) {
        t->cap = (t->len + n + 1) * 2;
        t->p = (char *)realloc(t->p, t->cap);
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = 0;
}
static void tx_s(txt *t, const char *s) { tx_add(t, s, strlen(s)); }

/* A PostgreSQL array literal element: quoted, " and \ escaped. */
static void tx_pg_elem(txt *t, const char *s) {
    tx_s(t, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') tx_s(t, "\\");
        tx_add(t, s, 1);
    }
    tx_s(t, "\"");
}

/* ---- a worker's connection: the library, or the ideal through one API ---------------------- */

static long g_allocs;
static void *count_alloc(size_t n, void *u) { (void)u; __atomic_add_fetch(&g_allocs, 1, __ATOMIC_RELAXED); return malloc(n); }
static void *count_realloc(void *p, size_t n, void *u) { (void)u; __atomic_add_fetch(&g_allocs, 1, __ATOMIC_RELAXED); return realloc(p, n); }
static void count_free(void *p, void *u) { (void)u; free(p); }

typedef struct h {
    int impl, inbox;
    obx_store *s;
    obx_dispatcher *d;
    ibx_store *is;
    ibx_dispatcher *id;
    api a;
    stm q[Q_COUNT];
    char owner[37];
    txt list, list2, sql;
    int got;
} h;

static obx_store *lib_open(int deploy) {
    obx_store_desc d;
    obx_store *s = NULL;
    memset(&d, 0, sizeof d);
    d.connection_string = g_conn;
    d.deploy_schema = deploy;
    d.schema = "dbo"; /* named here because table_of() names it too */
    d.table = "OutboxBench";
    d.hooks.logger.min_level = OBX_LOG_WARN; /* per-message INFO lines are not free */
    d.hooks.allocator.alloc = count_alloc;
    d.hooks.allocator.realloc = count_realloc;
    d.hooks.allocator.free = count_free;
    if (obx_store_open(&d, &s) != OBX_OK) die("obx open: %s", obx_store_last_error(s)->message);
    return s;
}

static ibx_store *lib_open_inbox(int deploy) {
    ibx_store_desc d;
    ibx_store *s = NULL;
    memset(&d, 0, sizeof d);
    d.connection_string = g_conn;
    d.deploy_schema = deploy;
    d.schema = "infra";
    d.table = "InboxBench";
    d.hooks.logger.min_level = IBX_LOG_WARN;
    if (ibx_store_open(&d, &s) != IBX_OK) die("ibx open: %s", ibx_store_last_error(s)->message);
    return s;
}

/* A library drain runs the dispatcher's own loop (obx_dispatcher_run), as a
 * service does, so that what run() saves between batches is measured: the
 * workers count what they handle in memory they share, and the last
 * message stops them all (desc.stop_flag). */
typedef struct drain_shared {
    long handled;
    volatile sig_atomic_t stop;
} drain_shared;
static volatile sig_atomic_t *g_stop;
static long *g_handled, g_drain_n;
static void handled(long k) {
    if (g_handled && __atomic_add_fetch(g_handled, k, __ATOMIC_SEQ_CST) >= g_drain_n) *g_stop = 1;
}
static obx_outcome noop(const obx_message *m, char *e, size_t n, void *u) { (void)m; (void)e; (void)n; (void)u; handled(1); return OBX_DONE; }
/* The library's batch handler (W_DRAINB; the ideal drains as in W_DRAIN1): all done. */
static void batch_noop(const obx_message *const *m, obx_batch_result *res, int n, void *u) {
    int i;
    (void)m;
    (void)u;
    for (i = 0; i < n; i++) res[i].outcome = OBX_DONE;
    handled(n);
}
static int g_batch_handler; /* W_DRAINB: the library's workers register batch_noop */
static int g_ordered; /* W_DRAINO, W_ENQBO: the library's messages carry one of 100 ordering keys, round robin */
static int g_priority; /* BENCH_PRIORITY=1: the library's messages carry priorities -5..5, round robin */
static ibx_outcome inoop(const ibx_message *m, char *e, size_t n, void *u) { (void)m; (void)e; (void)n; (void)u; handled(1); return IBX_DONE; }

/* A random v4 UUID as text: the ideal's owner token. */
static void new_owner(char out[37]) {
    static const char hex[] = "0123456789abcdef";
    int i;
    for (i = 0; i < 36; i++) out[i] = (i == 8 || i == 13 || i == 18 || i == 23) ? '-' : hex[rand() & 15];
    out[14] = '4';
    out[36] = 0;
}

static void h_open(h *x, int impl, int inbox) {
    int q;
    memset(x, 0, sizeof *x);
    x->impl = impl;
    x->inbox = inbox;
    if (impl == I_LIB) {
        if (inbox) {
            ibx_dispatcher_desc dd;
            memset(&dd, 0, sizeof dd);
            x->is = lib_open_inbox(0);
            dd.store = x->is;
            dd.batch_size = 100;
            dd.stop_flag = g_stop;
            dd.poll_interval_ms = 1; /* the drain's last empty rounds look at the flag */
            dd.idle_max_ms = 1;
            ibx_dispatcher_create(&dd, &x->id);
            ibx_dispatcher_on(x->id, "bench.event", inoop, NULL);
        } else {
            obx_dispatcher_desc dd;
            memset(&dd, 0, sizeof dd);
            x->s = lib_open(0);
            dd.store = x->s;
            dd.batch_size = 100;
            dd.stop_flag = g_stop;
            dd.poll_interval_ms = 1;
            dd.idle_max_ms = 1;
            obx_dispatcher_create(&dd, &x->d);
            if (g_batch_handler) obx_dispatcher_on_batch(x->d, "bench.event", batch_noop, NULL);
            else obx_dispatcher_on(x->d, "bench.event", noop, NULL);
        }
        return;
    }
    if (impl == I_ODBC) api_open_odbc(&x->a, g_conn, g_kind == K_MY);
    else if (g_kind == K_PG) api_open_pq(&x->a, g_conn);
    else api_open_lite(&x->a, g_conn);
    srand((unsigned)getpid() ^ (unsigned)(now_s() * 1e6));
    new_owner(x->owner);
    for (q = 0; q < Q_COUNT; q++) {
        const char *text = inbox ? inbox_sql(q) : outbox_sql(q);
        if (!inbox && q == Q_ENQB && !text && x->a.kind != A_LITE) {
            /* One INSERT of 100 rows: the ideal batch is one statement. */
            int r;
            char m[32];
            x->sql.len = 0;
            tx_s(&x->sql, "INSERT INTO ideal_outbox (topic, payload) VALUES ");
            for (r = 0; r < 100; r++) {
                snprintf(m, sizeof m, "%s($%d, $%d)", r ? ", " : "", 2 * r + 1, 2 * r + 2);
                tx_s(&x->sql, m);
            }
            text = x->sql.p;
        }
        if (text) api_prepare(&x->a, &x->q[q], text);
    }
}

static void h_close(h *x) {
    int q;
    if (x->impl == I_LIB) {
        if (x->id) ibx_dispatcher_destroy(x->id);
        if (x->is) ibx_store_close(x->is);
        if (x->d) obx_dispatcher_destroy(x->d);
        if (x->s) obx_store_close(x->s);
    } else {
        for (q = 0; q < Q_COUNT; q++) api_unprepare(&x->a, &x->q[q]);
        api_close(&x->a);
    }
    free(x->list.p);
    free(x->list2.p);
    free(x->sql.p);
}

/* ---- the steps -------------------------------------------------------------------------------- */

static void enq1(h *x) {
    if (x->impl == I_LIB) {
        obx_new_message m;
        memset(&m, 0, sizeof m);
        m.topic = "bench.event";
        m.payload = g_payload;
        m.payload_len = OBX_NTS;
        if (obx_enqueue(x->s, &m, NULL) != OBX_OK) die("obx_enqueue: %s", obx_store_last_error(x->s)->message);
    } else {
        const char *p[2];
        p[0] = "bench.event";
        p[1] = g_payload;
        api_run(&x->a, &x->q[Q_ENQ1], p, 2, NULL, NULL);
    }
}

static void enqb(h *x) {
    int i;
    if (x->impl == I_LIB) {
        obx_new_message ms[100];
        memset(ms, 0, sizeof ms);
        static char keys[100][8];
        for (i = 0; i < 100; i++) {
            ms[i].topic = "bench.event";
            ms[i].payload = g_payload;
            ms[i].payload_len = OBX_NTS;
            if (g_ordered) {
                snprintf(keys[i], sizeof keys[i], "k%d", i);
                ms[i].ordering_key = keys[i];
            }
#ifdef OBX_PRIORITY_MAX /* BENCH_HDR may be a release without priorities */
            if (g_priority) ms[i].priority = i % 11 - 5;
#endif
        }
        if (obx_enqueue_batch(x->s, NULL, ms, 100, NULL) != OBX_OK)
            die("obx_enqueue_batch: %s", obx_store_last_error(x->s)->message);
    } else if (g_kind == K_PG) {
        const char *p[2];
        x->list.len = x->list2.len = 0;
        tx_s(&x->list, "{");
        tx_s(&x->list2, "{");
        for (i = 0; i < 100; i++) {
            if (i) {
                tx_s(&x->list, ",");
                tx_s(&x->list2, ",");
            }
            tx_pg_elem(&x->list, "bench.event");
            tx_pg_elem(&x->list2, g_payload);
        }
        tx_s(&x->list, "}");
        tx_s(&x->list2, "}");
        p[0] = x->list.p;
        p[1] = x->list2.p;
        api_run(&x->a, &x->q[Q_ENQB], p, 2, NULL, NULL);
    } else if (x->a.kind == A_LITE) {
        api_direct(&x->a, "BEGIN IMMEDIATE", NULL, NULL);
        for (i = 0; i < 100; i++) enq1(x);
        api_direct(&x->a, "COMMIT", NULL, NULL);
    } else {
        const char *p[200];
        for (i = 0; i < 100; i++) {
            p[2 * i] = "bench.event";
            p[2 * i + 1] = g_payload;
        }
        api_run(&x->a, &x->q[Q_ENQB], p, 200, NULL, NULL);
    }
}

/* Row callbacks: collect the claimed keys into the ack's list. */
static void take_id(void *u, int ncols, char **cols) {
    h *x = (h *)u;
    (void)ncols;
    if (x->got++) tx_s(&x->list, ",");
    tx_s(&x->list, cols[0]);
}

static void take_key(void *u, int ncols, char **cols) {
    h *x = (h *)u;
    (void)ncols;
    if (g_kind == K_PG) {
        if (x->got) {
            tx_s(&x->list, ",");
            tx_s(&x->list2, ",");
        }
        tx_pg_elem(&x->list, cols[0]);
        tx_pg_elem(&x->list2, cols[1]);
    } else if (g_kind == K_SQLITE) { /* keys are [A-Za-z0-9-] here: no JSON escapes needed */
        if (x->got) tx_s(&x->list, ",");
        tx_s(&x->list, "[\"");
        tx_s(&x->list, cols[0]);
        tx_s(&x->list, "\",\"");
        tx_s(&x->list, cols[1]);
        tx_s(&x->list, "\"]");
    } else { /* MariaDB: a key disjunction, which the range optimizer turns into key lookups */
        if (x->got) tx_s(&x->list, " OR ");
        tx_s(&x->list, "(source = '");
        tx_s(&x->list, cols[0]);
        tx_s(&x->list, "' AND message_id = '");
        tx_s(&x->list, cols[1]);
        tx_s(&x->list, "')");
    }
    x->got++;
}

/* One claim of up to 100 and the ack of what it got; returns the count.
 * *claim_s receives the claim's time when not NULL. */
static int drain_round(h *x, double *claim_s) {
    double t0 = now_s();
    int n;
    if (x->impl == I_LIB && !claim_s) {
        obx_run_stats st;
        obx_result r;
        ibx_run_stats ist;
        ibx_result ir;
        if (x->inbox) {
            ir = ibx_dispatcher_run_once(x->id, &ist);
            if (ir != IBX_OK && ir != IBX_EMPTY) die("ibx run_once: %s", ibx_store_last_error(x->is)->message);
            return ir == IBX_OK ? (int)ist.claimed : 0;
        }
        r = obx_dispatcher_run_once(x->d, &st);
        if (r != OBX_OK && r != OBX_EMPTY) die("obx run_once: %s", obx_store_last_error(x->s)->message);
        return r == OBX_OK ? (int)st.claimed : 0;
    }
    if (x->impl == I_LIB) { /* outbox, claim and ack timed apart */
        const obx_message *ms;
        const char *ids[100];
        int i;
        if (!x->owner[0]) obx_owner_token(x->s, x->owner);
        if (obx_claim(x->s, x->owner, 30, 100, &ms, &n) != OBX_OK) n = 0;
        *claim_s += now_s() - t0;
        for (i = 0; i < n; i++) ids[i] = ms[i].id;
        if (n) obx_ack(x->s, x->owner, ids, n, NULL);
        return n;
    }
    x->got = 0;
    x->list.len = x->list2.len = 0;
    if (g_kind == K_MY) {
        const char *p0[1];
        api_direct(&x->a, "START TRANSACTION", NULL, NULL);
        tx_s(&x->list, "");
        n = api_run(&x->a, &x->q[Q_CLAIM], p0, 0, x->inbox ? take_key : take_id, x);
        if (n == 0) n = api_run(&x->a, &x->q[Q_CLAIM2], p0, 0, x->inbox ? take_key : take_id, x);
        if (n > 0) {
            x->sql.len = 0;
            if (x->inbox) {
                tx_s(&x->sql, "UPDATE ideal_inbox SET status = 3, owner = '");
                tx_s(&x->sql, x->owner);
                tx_s(&x->sql, "', locked_until = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND WHERE ");
                tx_s(&x->sql, x->list.p);
            } else {
                tx_s(&x->sql, "UPDATE ideal_outbox SET status = 1, owner = '");
                tx_s(&x->sql, x->owner);
                tx_s(&x->sql, "', locked_until = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND WHERE id IN (");
                tx_s(&x->sql, x->list.p);
                tx_s(&x->sql, ")");
            }
            api_direct(&x->a, x->sql.p, NULL, NULL);
        }
        api_direct(&x->a, "COMMIT", NULL, NULL);
        if (claim_s) *claim_s += now_s() - t0;
        if (n == 0) return 0;
        x->sql.len = 0;
        if (x->inbox) {
            tx_s(&x->sql, "UPDATE ideal_inbox SET status = 2, owner = NULL, locked_until = NULL WHERE (");
            tx_s(&x->sql, x->list.p);
            tx_s(&x->sql, ") AND owner = '");
        } else {
            tx_s(&x->sql, "UPDATE ideal_outbox SET status = 2, locked_until = NULL WHERE id IN (");
            tx_s(&x->sql, x->list.p);
            tx_s(&x->sql, ") AND owner = '");
        }
        tx_s(&x->sql, x->owner);
        tx_s(&x->sql, x->inbox ? "' AND status = 3" : "' AND status = 1");
        api_direct(&x->a, x->sql.p, NULL, NULL);
        return n;
    }
    {
        const char *p[3];
        p[0] = x->owner;
        tx_s(&x->list, g_kind == K_PG ? "{" : "[");
        if (x->inbox) tx_s(&x->list2, "{");
        n = api_run(&x->a, &x->q[Q_CLAIM], p, 1, x->inbox ? take_key : take_id, x);
        if (claim_s) *claim_s += now_s() - t0;
        if (n == 0) return 0;
        tx_s(&x->list, g_kind == K_PG ? "}" : "]");
        if (x->inbox && g_kind == K_PG) {
            tx_s(&x->list2, "}");
            p[0] = x->list.p;
            p[1] = x->list2.p;
            p[2] = x->owner;
            api_run(&x->a, &x->q[Q_ACK], p, 3, NULL, NULL);
        } else {
            p[0] = x->list.p;
            p[1] = x->owner;
            api_run(&x->a, &x->q[Q_ACK], p, 2, NULL, NULL);
        }
    }
    return n;
}

static void dedup(h *x, const char *id) {
    if (x->impl == I_LIB) {
        unsigned char hash[32];
        int processed;
        memset(hash, 7, sizeof hash);
        if (ibx_already_processed(x->is, id, "bench", hash, sizeof hash, &processed) < 0)
            die("ibx_already_processed: %s", ibx_store_last_error(x->is)->message);
    } else {
        const char *p[2];
        p[0] = "bench";
        p[1] = id;
        api_run(&x->a, &x->q[Q_ENQ1], p, 2, NULL, NULL);
    }
}

static void ienq(h *x, const char *id) {
    if (x->impl == I_LIB) {
        ibx_new_message m;
        memset(&m, 0, sizeof m);
        m.topic = "bench.event";
        m.source = "bench";
        m.message_id = id;
        m.payload = g_payload;
        m.payload_len = IBX_NTS;
        if (ibx_enqueue(x->is, &m, NULL) < 0) die("ibx_enqueue: %s", ibx_store_last_error(x->is)->message);
    } else {
        const char *p[4];
        p[0] = "bench";
        p[1] = id;
        p[2] = "bench.event";
        p[3] = g_payload;
        api_run(&x->a, &x->q[Q_ENQB], p, 4, NULL, NULL);
    }
}

/* ---- tables: reset, fill, statistics --------------------------------------------------------- */

static void mon(const char *sql) { api_direct(&g_mon, sql, NULL, NULL); }

/* `verb` then a table name, e.g. "VACUUM ANALYZE" t. */
static void mon_on(const char *verb, const char *table) {
    char sql[300];
    snprintf(sql, sizeof sql, "%s %s", verb, table);
    mon(sql);
}

static const char *table_of(int impl, int inbox) {
    if (impl == I_LIB) return inbox ? lib_inbox() : lib_outbox();
    return inbox ? "ideal_inbox" : "ideal_outbox";
}

static void reset(int impl, int inbox) {
    mon_on(g_kind == K_SQLITE ? "DELETE FROM" : "TRUNCATE TABLE", table_of(impl, inbox));
}

static void analyze(int impl, int inbox) {
    if (g_kind == K_PG) {
        mon_on("VACUUM ANALYZE", table_of(impl, inbox));
        mon("CHECKPOINT");
    } else if (g_kind == K_MY) {
        mon_on("ANALYZE TABLE", table_of(impl, inbox));
    } else {
        mon("ANALYZE");
        mon("PRAGMA wal_checkpoint(TRUNCATE)");
    }
}

/* `n` rows of status `status` (0 ready, 2 done) made by the server: the
 * library's own fill is a workload of its own, not the setup of a drain. */
static void fill_rows(int impl, int inbox, long long n, int status) {
    char sql[4096];
    const char *t = table_of(impl, inbox);
    if (n <= 0) return;
    if (g_kind == K_PG) {
        if (impl != I_LIB && !inbox)
            snprintf(sql, sizeof sql, "INSERT INTO %s (topic, payload, status, next_attempt_at) SELECT 'bench.event', "
                     "'%s', %d, clock_timestamp() FROM generate_series(1, %lld)", t, g_payload, status, n);
        else if (impl != I_LIB)
            snprintf(sql, sizeof sql, "INSERT INTO %s (source, message_id, topic, payload, status, next_attempt_at) "
                     "SELECT 'bench', 'm-' || i, 'bench.event', '%s', 1, clock_timestamp() FROM generate_series(1, %lld) i",
                     t, g_payload, n);
        else if (!inbox)
            snprintf(sql, sizeof sql, "INSERT INTO %s (\"Id\", \"MessageId\", \"Topic\", \"Payload\", \"Status\", "
                     "\"IsProcessed\", \"ProcessedAt\", \"ProcessedBy\", \"NextAttemptAt\") SELECT gen_random_uuid(), "
                     "gen_random_uuid(), 'bench.event', '%s', %d, %s, CASE WHEN %d = 2 THEN now() END, NULL, "
                     "clock_timestamp() FROM generate_series(1, %lld)",
                     t, g_payload, status, status == 2 ? "true" : "false", status, n);
        else
            snprintf(sql, sizeof sql, "INSERT INTO %s (\"Source\", \"MessageId\", \"Topic\", \"Payload\", \"Status\", "
                     "\"NextAttemptAt\") SELECT 'bench', 'm-' || i, 'bench.event', '%s', 'Processing', clock_timestamp() "
                     "FROM generate_series(1, %lld) i", t, g_payload, n);
    } else if (g_kind == K_MY) {
        if (impl != I_LIB && !inbox)
            snprintf(sql, sizeof sql, "INSERT INTO %s (topic, payload, status, next_attempt_at) SELECT 'bench.event', "
                     "'%s', %d, UTC_TIMESTAMP(6) - INTERVAL (%lld - seq) MICROSECOND FROM seq_1_to_%lld",
                     t, g_payload, status, n, n);
        else if (impl != I_LIB)
            snprintf(sql, sizeof sql, "INSERT INTO %s (source, message_id, topic, payload, status, next_attempt_at) "
                     "SELECT 'bench', CONCAT('m-', seq), 'bench.event', '%s', 1, "
                     "UTC_TIMESTAMP(6) - INTERVAL (%lld - seq) MICROSECOND FROM seq_1_to_%lld", t, g_payload, n, n);
        else if (!inbox)
            snprintf(sql, sizeof sql, "INSERT INTO %s (`Id`, `MessageId`, `Topic`, `Payload`, `Status`, `IsProcessed`, "
                     "`ProcessedAt`, `NextAttemptAt`) SELECT UUID(), UUID(), 'bench.event', '%s', %d, %d, "
                     "IF(%d = 2, UTC_TIMESTAMP(6), NULL), UTC_TIMESTAMP(6) - INTERVAL (%lld - seq) MICROSECOND "
                     "FROM seq_1_to_%lld", t, g_payload, status, status == 2, status, n, n);
        else
            snprintf(sql, sizeof sql, "INSERT INTO %s (`Source`, `MessageId`, `Topic`, `Payload`, `Status`, "
                     "`NextAttemptAt`) SELECT 'bench', CONCAT('m-', seq), 'bench.event', '%s', 'Processing', "
                     "UTC_TIMESTAMP(6) - INTERVAL (%lld - seq) MICROSECOND FROM seq_1_to_%lld", t, g_payload, n, n);
    } else {
        char head[160];
        snprintf(head, sizeof head, "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < %lld) ", n);
        if (impl != I_LIB && !inbox)
            snprintf(sql, sizeof sql, "%sINSERT INTO %s (topic, payload, status, next_attempt_at) SELECT 'bench.event', "
                     "'%s', %d, " LITE_NOW " - %lld + i FROM c", head, t, g_payload, status, n);
        else if (impl != I_LIB)
            snprintf(sql, sizeof sql, "%sINSERT INTO %s (source, message_id, topic, payload, status, next_attempt_at) "
                     "SELECT 'bench', 'm-' || i, 'bench.event', '%s', 1, " LITE_NOW " - %lld + i FROM c",
                     head, t, g_payload, n);
        else if (!inbox)
            snprintf(sql, sizeof sql, "%sINSERT INTO %s (\"Id\", \"MessageId\", \"Topic\", \"Payload\", \"Status\", "
                     "\"IsProcessed\", \"ProcessedAt\", \"NextAttemptAt\") SELECT lower(hex(randomblob(16))), "
                     "lower(hex(randomblob(16))), 'bench.event', '%s', %d, %d, CASE WHEN %d = 2 THEN " LITE_NOW
                     " END, " LITE_NOW " - %lld + i FROM c", head, t, g_payload, status, status == 2, status, n);
        else
            snprintf(sql, sizeof sql, "%sINSERT INTO %s (\"Source\", \"MessageId\", \"Topic\", \"Payload\", \"Status\", "
                     "\"NextAttemptAt\") SELECT 'bench', 'm-' || i, 'bench.event', '%s', 'Processing', " LITE_NOW
                     " - %lld + i FROM c", head, t, g_payload, n);
    }
    mon(sql);
}

/* Ready outbox messages for a drain: the library's through its batch call
 * (the rows it makes, UUIDv7 keys), the ideal's by the server. */
static void fill_ready(int impl, int inbox, int n) {
    if (impl == I_LIB && !inbox) {
        h x;
        int i;
        h_open(&x, I_LIB, 0);
        for (i = 0; i < n; i += 100) enqb(&x);
        h_close(&x);
    } else {
        fill_rows(impl, inbox, n, 0);
    }
}

static long long ready_left(int impl, int inbox) {
    char sql[300];
    if (impl == I_LIB)
        snprintf(sql, sizeof sql, inbox ? "SELECT COUNT(*) FROM %s WHERE %sStatus%s = 'Processing'"
                                        : "SELECT COUNT(*) FROM %s WHERE %sStatus%s IN (0, 1)",
                 table_of(impl, inbox), g_kind == K_MY ? "`" : "\"", g_kind == K_MY ? "`" : "\"");
    else
        snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM %s WHERE status IN (%s)", table_of(impl, inbox), inbox ? "1, 3" : "0, 1");
    return api_i64(&g_mon, sql);
}

/* ---- server counters -------------------------------------------------------------------------- */

static const char *pgss_sum =
    "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE dbid = "
    "(SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE '%pg_stat_statements%' "
    "AND query NOT LIKE '%pg_database%'";

/* CPU seconds of the server: the process itself and its reaped children
 * (/proc stat fields 14-17), plus its live children (PostgreSQL's
 * backends; MariaDB has threads, counted in the process). */
static double proc_cpu(int pid, int with_reaped) {
    char path[64], buf[1024], *p;
    unsigned long long v[4] = {0, 0, 0, 0};
    long tick = sysconf(_SC_CLK_TCK);
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (!(f = fopen(path, "r"))) return 0;
    p = fgets(buf, sizeof buf, f) ? strrchr(buf, ')') : NULL;
    fclose(f);
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu",
                     &v[0], &v[1], &v[2], &v[3]) != 4)
        return 0;
    return (double)(v[0] + v[1] + (with_reaped ? v[2] + v[3] : 0)) / (double)tick;
}

static double server_cpu(void) {
    double sum;
    DIR *d;
    struct dirent *e;
    if (g_srv_pid <= 0) return 0;
    sum = proc_cpu(g_srv_pid, 1);
    if (!(d = opendir("/proc"))) return sum;
    while ((e = readdir(d))) {
        char path[300], buf[512], *p;
        int pid = atoi(e->d_name), ppid = 0;
        FILE *f;
        if (pid <= 0) continue;
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        if (!(f = fopen(path, "r"))) continue;
        p = fgets(buf, sizeof buf, f) ? strrchr(buf, ')') : NULL;
        fclose(f);
        if (p && sscanf(p + 2, "%*c %d", &ppid) == 1 && ppid == g_srv_pid) sum += proc_cpu(pid, 0);
    }
    closedir(d);
    return sum;
}

static double client_cpu(void) {
    struct rusage a, b;
    getrusage(RUSAGE_SELF, &a);
    getrusage(RUSAGE_CHILDREN, &b);
    return (double)(a.ru_utime.tv_sec + a.ru_stime.tv_sec + b.ru_utime.tv_sec + b.ru_stime.tv_sec) +
           (double)(a.ru_utime.tv_usec + a.ru_stime.tv_usec + b.ru_utime.tv_usec + b.ru_stime.tv_usec) / 1e6;
}

static void ctr_begin(void) {
    if (g_counters) {
        if (g_kind == K_PG) mon("SELECT pg_stat_statements_reset()");
        else g_ctr_base = api_i64(&g_mon, "SHOW GLOBAL STATUS LIKE 'Questions'");
    }
    g_srv0 = server_cpu();
    g_cli0 = client_cpu();
}

static double ctr_end(long long messages) {
    long long n;
    if (g_srv_pid > 0) {
        struct timespec settle = {0, 100 * 1000000L}; /* exited workers' backends: reaped */
        nanosleep(&settle, NULL);
        g_cpu_srv[g_cur_w][g_cur_impl][g_cur_rep] = (server_cpu() - g_srv0) / (double)messages;
    }
    if (g_srv_pid > 0 || g_kind == K_SQLITE) /* SQLite runs in the bench and its workers */
        g_cpu_cli[g_cur_w][g_cur_impl][g_cur_rep] = (client_cpu() - g_cli0) / (double)messages;
    if (!g_counters) return -1;
    if (g_kind == K_PG) n = api_i64(&g_mon, pgss_sum);
    else n = api_i64(&g_mon, "SHOW GLOBAL STATUS LIKE 'Questions'") - g_ctr_base - 1;
    return (double)n / (double)messages;
}

static void print_stmt(void *u, int ncols, char **cols) {
    (void)u;
    if (ncols >= 3) printf("      %8s %8s  %s\n", cols[0] ? cols[0] : "", cols[1] ? cols[1] : "", cols[2] ? cols[2] : "");
}

static void show_stmts(int w, int impl) {
    if (!g_show_stmts || !g_counters || g_kind != K_PG) return;
    printf("    statements of %s, %s (calls, server ms per call):\n",
           impl == I_LIB ? "the library" : impl == I_ODBC ? "ideal ODBC" : "ideal libpq", w_name[w]);
    api_direct(&g_mon,
               "SELECT calls, round(CAST(mean_exec_time AS numeric), 3), left(regexp_replace(query, '\\s+', ' ', 'g'), 100) "
               "FROM pg_stat_statements WHERE dbid = "
               "(SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE '%pg_stat_statements%' "
               "AND query NOT LIKE '%pg_database%' ORDER BY calls DESC LIMIT 8",
               print_stmt, NULL);
}

/* ---- workloads ---------------------------------------------------------------------------------- */

/* Drain with `workers` processes that connect first, then start together:
 * the clock and the counters cover the drain only. */
static double drain_procs(int impl, int inbox, int workers, int n, double *stmts) {
    int ready[2], go[2], w, status;
    pid_t pids[4];
    char c = 0;
    double t;
    if (pipe(ready) || pipe(go)) die("pipe");
    if (impl == I_LIB) { /* shared by the workers: handled so far, and the stop */
        void *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (shared == MAP_FAILED) die("mmap");
        memset(shared, 0, 4096);
        g_handled = &((drain_shared *)shared)->handled;
        g_stop = &((drain_shared *)shared)->stop;
        g_drain_n = n;
    }
    fflush(stdout);
    for (w = 0; w < workers; w++) {
        pids[w] = fork();
        if (pids[w] == 0) {
            h x;
            h_open(&x, impl, inbox);
            if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) _exit(1);
            if (impl == I_LIB && inbox) ibx_dispatcher_run(x.id);
            else if (impl == I_LIB) obx_dispatcher_run(x.d);
            else
                while (drain_round(&x, NULL) > 0) {
                }
            h_close(&x);
            _exit(0);
        }
    }
    for (w = 0; w < workers; w++)
        if (read(ready[0], &c, 1) != 1) die("worker start");
    ctr_begin();
    t = now_s();
    for (w = 0; w < workers; w++)
        if (write(go[1], &c, 1) != 1) die("worker go");
    for (w = 0; w < workers; w++) waitpid(pids[w], &status, 0);
    t = now_s() - t;
    if (g_handled) {
        munmap(g_handled, 4096);
        g_handled = NULL;
        g_stop = NULL;
    }
    *stmts = ctr_end(n);
    show_stmts(inbox ? W_IDRAIN : workers == 1 ? W_DRAIN1 : W_DRAIN2, impl);
    close(ready[0]);
    close(ready[1]);
    close(go[0]);
    close(go[1]);
    if (ready_left(impl, inbox) != 0)
        fprintf(stderr, "bench: %s drain left %lld messages\n", impl == I_LIB ? "library" : "ideal", ready_left(impl, inbox));
    return n / t;
}

static void run(int w, int impl, int n, int rep) {
    h x;
    double t, st = -1;
    int i, count = n / 4;
    char id[48];
    g_cur_w = w;
    g_cur_impl = impl;
    g_cur_rep = rep;
    switch (w) {
    case W_ENQ1:
    case W_ENQB:
    case W_ENQBO: /* the ideal enqueues as in W_ENQB */
        reset(impl, 0);
        h_open(&x, impl, 0);
        count = w == W_ENQ1 ? n / 4 : n;
        g_ordered = w == W_ENQBO;
        ctr_begin();
        t = now_s();
        for (i = 0; i < count; i += w == W_ENQ1 ? 1 : 100) (w == W_ENQ1 ? enq1 : enqb)(&x);
        t = now_s() - t;
        st = ctr_end(count);
        g_ordered = 0;
        if (rep == 0) show_stmts(w, impl);
        h_close(&x);
        break;
    case W_DRAIN1:
    case W_DRAIN2:
    case W_DRAIN1E:
        if (w == W_DRAIN1E && g_kind == K_SQLITE) return;
        reset(impl, 0);
        if (w == W_DRAIN1E) analyze(impl, 0);
        fill_ready(impl, 0, n);
        if (w != W_DRAIN1E) analyze(impl, 0);
        g_rate[w][impl][rep] = drain_procs(impl, 0, w == W_DRAIN2 ? 2 : 1, n, &g_stmts[w][impl]);
        return;
    case W_IDEDUPN:
        reset(impl, 1);
        h_open(&x, impl, 1);
        for (w = W_IDEDUPN; w <= W_IDEDUPS; w++) {
            g_cur_w = w;
            ctr_begin();
            t = now_s();
            for (i = 0; i < count; i++) {
                snprintf(id, sizeof id, "d-%d", i);
                dedup(&x, id);
            }
            t = now_s() - t;
            g_stmts[w][impl] = ctr_end(count);
            g_rate[w][impl][rep] = count / t;
        }
        h_close(&x);
        return;
    case W_IENQ:
        reset(impl, 1);
        h_open(&x, impl, 1);
        ctr_begin();
        t = now_s();
        for (i = 0; i < count; i++) {
            snprintf(id, sizeof id, "e-%d", i);
            ienq(&x, id);
        }
        t = now_s() - t;
        st = ctr_end(count);
        h_close(&x);
        break;
    case W_DRAINO: /* the ideal drains as in W_DRAIN1 */
        reset(impl, 0);
        g_ordered = 1;
        fill_ready(impl, 0, n);
        g_ordered = 0;
        analyze(impl, 0);
        g_rate[w][impl][rep] = drain_procs(impl, 0, 1, n, &g_stmts[w][impl]);
        return;
    case W_DRAINB:
        reset(impl, 0);
        fill_ready(impl, 0, n);
        analyze(impl, 0);
        g_batch_handler = 1;
        g_rate[w][impl][rep] = drain_procs(impl, 0, 1, n, &g_stmts[w][impl]);
        g_batch_handler = 0;
        return;
    case W_IDRAIN:
        reset(impl, 1);
        fill_ready(impl, 1, n);
        analyze(impl, 1);
        g_rate[w][impl][rep] = drain_procs(impl, 1, 1, n, &g_stmts[w][impl]);
        return;
    default:
        return;
    }
    g_rate[w][impl][rep] = count / t;
    g_stmts[w][impl] = st;
}

/* BENCH_ONLY=enq1,drain1,...: a subset of the workloads (no latency,
 * allocation or sweep rows then), to measure one change quickly. */
static int selected(int w) {
    const char *only = getenv("BENCH_ONLY"), *p;
    size_t n = strlen(w_key[w]);
    if (!only || !*only) return 1;
    for (p = only; *p; p += strcspn(p, ","), p += *p == ',') {
        if (strncmp(p, w_key[w], n) == 0 && (p[n] == ',' || p[n] == 0)) return 1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(int w, int impl);
static double median_of(double (*a)[I_COUNT][MAXREP], int w, int impl) {
    double v[MAXREP];
    memcpy(v, a[w][impl], sizeof v);
    qsort(v, (size_t)g_repeats, sizeof v[0], cmp_double);
    return v[g_repeats / 2];
}

/* CPU microseconds per message, medians: what each side spent, which the
 * load of other programs changes much less than it changes the rates. */
/* SQLite: the whole database runs in the bench's processes, so its CPU
 * per message is the cost of each side, and its ratio moves much less with
 * the load of a shared machine than the rates do. */
static void print_cpu_lite(void) {
    int w, k;
    printf("\n== %s: CPU us per message, medians (the bench and its workers, SQLite included, "
           "connect included); ratio = ideal / obx.h\n", g_backend);
    printf("%-46s %10s %10s %10s %8s %8s\n", "workload", "obx.h", "ideal ODBC", "C API", "/ODBC", "/C API");
    for (w = 0; w < W_COUNT; w++) {
        double c[3];
        if (median(w, I_LIB) == 0) continue;
        for (k = 0; k < 3; k++) c[k] = median_of(g_cpu_cli, w, k) * 1e6;
        printf("%-46s %10.1f %10.1f %10.1f %8.2f %8.2f\n", w_name[w], c[0], c[1], c[2], c[0] > 0 ? c[1] / c[0] : 0.0,
               c[0] > 0 ? c[2] / c[0] : 0.0);
    }
    fflush(stdout);
}

static void print_cpu(void) {
    int w, k;
    if (g_kind == K_SQLITE) {
        print_cpu_lite();
        return;
    }
    if (g_srv_pid <= 0) return;
    printf("\n== %s: CPU us per message, medians (server: pid %d and its children; client: the bench and its "
           "workers, connect included)\n", g_backend, g_srv_pid);
    printf("%-46s %10s %10s %10s | %10s %10s %10s\n", "workload", "srv obx.h", "srv ODBC", has_native() ? "srv native" : "",
           "cli obx.h", "cli ODBC", has_native() ? "cli native" : "");
    for (w = 0; w < W_COUNT; w++) {
        char c[6][16];
        if (median(w, I_LIB) == 0) continue;
        for (k = 0; k < 3; k++) {
            c[k][0] = c[k + 3][0] = 0;
            if (k == I_NATIVE && !has_native()) continue;
            snprintf(c[k], sizeof c[k], "%.1f", median_of(g_cpu_srv, w, k) * 1e6);
            snprintf(c[k + 3], sizeof c[k + 3], "%.1f", median_of(g_cpu_cli, w, k) * 1e6);
        }
        printf("%-46s %10s %10s %10s | %10s %10s %10s\n", w_name[w], c[0], c[1], c[2], c[3], c[4], c[5]);
    }
    fflush(stdout);
}

static double median(int w, int impl) {
    double v[MAXREP];
    memcpy(v, g_rate[w][impl], sizeof v);
    qsort(v, (size_t)g_repeats, sizeof v[0], cmp_double);
    return v[g_repeats / 2];
}

static void print_table(int n) {
    int w;
    printf("\n== %s: N = %d, medians of %d interleaved repeats; msgs/s; ratio = obx.h / ideal\n", g_backend, n, g_repeats);
    printf("%-46s %10s %10s %10s %8s %8s | %s\n", "workload", "obx.h", "ideal ODBC", has_native() ? native_name() : "",
           "/ODBC", has_native() ? (g_kind == K_PG ? "/libpq" : "/C API") : "",
           g_counters ? (g_kind == K_PG ? "stmts/msg (pg_stat_statements) obx ODBC libpq"
                                        : "Questions/msg obx ODBC")
                      : "");
    for (w = 0; w < W_COUNT; w++) {
        double lib = median(w, I_LIB), odbc = median(w, I_ODBC), nat = has_native() ? median(w, I_NATIVE) : 0;
        char natc[16] = "", natr[16] = "", ctr[80] = "";
        if (lib == 0) continue; /* not run (BENCH_ONLY, or no such workload here) */
        if (has_native()) {
            snprintf(natc, sizeof natc, "%.0f", nat);
            snprintf(natr, sizeof natr, "%.2f", lib / nat);
        }
        if (g_counters && has_native())
            snprintf(ctr, sizeof ctr, "%6.3f %6.3f %6.3f", g_stmts[w][I_LIB], g_stmts[w][I_ODBC], g_stmts[w][I_NATIVE]);
        else if (g_counters)
            snprintf(ctr, sizeof ctr, "%6.3f %6.3f", g_stmts[w][I_LIB], g_stmts[w][I_ODBC]);
        printf("%-46s %10.0f %10.0f %10s %8.2f %8s | %s\n", w_name[w], lib, odbc, natc, lib / odbc, natr, ctr);
    }
    fflush(stdout);
}

/* ---- size sweep: claim and drain cost against rows in the table ------------------------------- */

static void sweep(const char *sizes, int ready) {
    const char *p = sizes, *e = getenv("BENCH_SWEEP_SETTLE");
    int impl, settle = e ? atoi(e) : 0;
    printf("\n== %s: size sweep, %d ready messages%s drained (1 worker, claim 100 + ack) from a table of S rows, "
           "the rest Done; statistics of the filled table\n", g_backend, ready,
           g_priority ? " (obx.h: priorities -5..5)" : "");
    printf("%-10s %-12s %12s %14s %14s\n", "S rows", "", "msgs/s", "us per claim", "us per msg");
    while (*p) {
        long long size = atoll(p);
        for (impl = 0; impl < I_COUNT; impl++) {
            h x;
            double claim = 0, t;
            int got = 0, k;
            if (impl == I_NATIVE && !has_native()) continue;
            reset(impl, 0);
            fill_rows(impl, 0, size - ready, 2);
            fill_ready(impl, 0, ready);
            analyze(impl, 0);
            if (settle > 0) sleep((unsigned)settle); /* the server's writes after the fill done first */
            h_open(&x, impl, 0);
            t = now_s();
            while ((k = drain_round(&x, &claim)) > 0) got += k;
            t = now_s() - t;
            h_close(&x);
            printf("%-10lld %-12s %12.0f %14.0f %14.1f\n", size,
                   impl == I_LIB ? "obx.h" : impl == I_ODBC ? "ideal ODBC" : native_name(), got / t,
                   claim * 1e6 / ((got + 99) / 100), t * 1e6 / (got ? got : 1));
            fflush(stdout);
        }
        p += strcspn(p, ",");
        if (*p) p++;
    }
}

/* ---- commit-to-handler latency with the in-process wake-up, allocations -------------------------- */

typedef struct latency {
    double samples[400];
    volatile int seen;
    int ack_fd;                  /* cross-process: tell the producer, or -1 */
} latency;

static obx_outcome measure(const obx_message *m, char *e, size_t n, void *user) {
    latency *l = (latency *)user;
    (void)e; (void)n;
    if (l->seen < 400) l->samples[l->seen] = now_s() - atof(m->payload);
    __atomic_add_fetch(&l->seen, 1, __ATOMIC_SEQ_CST);
    if (l->ack_fd >= 0 && write(l->ack_fd, "k", 1) != 1) die("latency: ack pipe");
    return OBX_DONE;
}

static void *run_loop(void *d) {
    obx_dispatcher_run((obx_dispatcher *)d);
    return NULL;
}

static void latency_run(int count) {
    obx_store *consumer = lib_open(0), *producer = lib_open(0);
    obx_dispatcher_desc dd;
    obx_dispatcher *d = NULL;
    latency l;
    pthread_t th;
    obx_new_message m;
    char stamp[64];
    int i;
    reset(I_LIB, 0);
    memset(&l, 0, sizeof l);
    l.ack_fd = -1;
    memset(&dd, 0, sizeof dd);
    dd.store = consumer;
    dd.poll_interval_ms = 500; /* without the wake-up, ~250 ms on average */
    dd.idle_max_ms = 500;
    obx_dispatcher_create(&dd, &d);
    obx_dispatcher_on(d, "latency", measure, &l);
    pthread_create(&th, NULL, run_loop, d);
    memset(&m, 0, sizeof m);
    m.topic = "latency";
    m.payload = stamp;
    m.payload_len = OBX_NTS;
    for (i = 0; i < count; i++) {
        struct timespec gap = {0, 3 * 1000000L};
        nanosleep(&gap, NULL); /* let the loop go back to waiting */
        snprintf(stamp, sizeof stamp, "%.9f", now_s());
        obx_enqueue(producer, &m, NULL);
        obx_dispatcher_wake(d);
        while (l.seen <= i) {
            struct timespec spin = {0, 50000};
            nanosleep(&spin, NULL);
        }
    }
    obx_dispatcher_stop(d);
    pthread_join(th, NULL);
    obx_dispatcher_destroy(d);
    qsort(l.samples, (size_t)count, sizeof l.samples[0], cmp_double);
    printf("%-46s p50 %.2f ms, p99 %.2f ms (poll 500 ms, same process)\n", "commit-to-handler latency, wake-up",
           l.samples[count / 2] * 1000, l.samples[(count * 99) / 100] * 1000);
    obx_store_close(producer);
    obx_store_close(consumer);
}

/* The same with the producer in another process: its store and the
 * dispatcher share a wake_path, so the commit wakes the dispatcher
 * through the socket, not through obx_dispatcher_wake(). */
static void latency_cross(int count) {
    obx_dispatcher_desc dd;
    obx_dispatcher *d = NULL;
    obx_store *consumer;
    latency l;
    pthread_t th;
    char path[64];
    int ack[2], status;
    pid_t child;
    reset(I_LIB, 0);
    snprintf(path, sizeof path, "/tmp/obx-bench-wake-%d.sock", (int)getpid());
    if (pipe(ack) != 0) die("latency: pipe");
    fflush(stdout);
    child = fork();
    if (child == 0) {
        obx_store_desc sd;
        obx_store *producer = NULL;
        obx_new_message m;
        struct sockaddr_un a;
        char stamp[64], b;
        int i, probe = socket(AF_UNIX, SOCK_DGRAM, 0);
        close(ack[1]);
        memset(&a, 0, sizeof a);
        a.sun_family = AF_UNIX;
        snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
        for (i = 0; i < 2000 && connect(probe, (struct sockaddr *)&a, sizeof a) != 0; i++) {
            struct timespec w = {0, 5 * 1000000L};
            nanosleep(&w, NULL); /* until the dispatcher listens */
        }
        memset(&sd, 0, sizeof sd);
        sd.connection_string = g_conn;
        sd.schema = "dbo";
        sd.table = "OutboxBench";
        sd.wake_path = path;
        sd.hooks.logger.min_level = OBX_LOG_WARN;
        if (obx_store_open(&sd, &producer) != OBX_OK) _exit(1);
        memset(&m, 0, sizeof m);
        m.topic = "latency";
        m.payload = stamp;
        m.payload_len = OBX_NTS;
        for (i = 0; i < count; i++) {
            struct timespec gap = {0, 3 * 1000000L};
            nanosleep(&gap, NULL); /* let the loop go back to waiting */
            snprintf(stamp, sizeof stamp, "%.9f", now_s());
            if (obx_enqueue(producer, &m, NULL) != OBX_OK || read(ack[0], &b, 1) != 1) _exit(1);
        }
        obx_store_close(producer);
        _exit(0);
    }
    close(ack[0]);
    consumer = lib_open(0);
    memset(&l, 0, sizeof l);
    l.ack_fd = ack[1];
    memset(&dd, 0, sizeof dd);
    dd.store = consumer;
    dd.poll_interval_ms = 500;
    dd.idle_max_ms = 500;
    dd.wake_path = path;
    obx_dispatcher_create(&dd, &d);
    obx_dispatcher_on(d, "latency", measure, &l);
    pthread_create(&th, NULL, run_loop, d);
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        die("latency: the producer process failed");
    obx_dispatcher_stop(d);
    pthread_join(th, NULL);
    obx_dispatcher_destroy(d);
    close(ack[1]);
    qsort(l.samples, (size_t)count, sizeof l.samples[0], cmp_double);
    printf("%-46s p50 %.2f ms, p99 %.2f ms (poll 500 ms, producer in another process)\n",
           "commit-to-handler latency, wake socket", l.samples[count / 2] * 1000,
           l.samples[(count * 99) / 100] * 1000);
    obx_store_close(consumer);
}

/* Every heap allocation of the process, when tests/malloc_count.c is
 * preloaded (bench.sh does): the driver manager's and the driver's too. */
extern long obx_bench_malloc_count __attribute__((weak));
static long process_allocs(void) {
    return &obx_bench_malloc_count ? __atomic_load_n(&obx_bench_malloc_count, __ATOMIC_RELAXED) : -1;
}

/* Whole-process heap allocations per message of the library and of the
 * ideal through the native API, each workload from a warm start: the
 * library's figures for issue 29's targets (sqlite3 C API build: <= 5 per
 * enqueue, <= 2 per drained message) beside what the database's own
 * client costs. */
static void allocations_beside(int n) {
    static const char *const what[3] = {"enqueue, 1 per transaction", "enqueue, 100 per transaction",
                                        "drained message (claim 100, ack)"};
    double per[3][2];
    int k, impl, i, got;
    long whole;
    for (k = 0; k < 3; k++)
        for (impl = 0; impl < 2; impl++) {
            h x;
            int im = impl ? I_NATIVE : I_LIB;
            reset(im, 0);
            if (k == 2) fill_ready(im, 0, n + 100);
            h_open(&x, im, 0);
            if (k == 0) enq1(&x); /* warm: statements prepared, buffers sized */
            else if (k == 1) enqb(&x);
            else drain_round(&x, NULL);
            whole = process_allocs();
            got = 0;
            if (k == 0) for (i = 0; i < n; i++) enq1(&x), got++;
            else if (k == 1) for (i = 0; i < n; i += 100) enqb(&x), got += 100;
            else while ((i = drain_round(&x, NULL)) > 0) got += i;
            per[k][impl] = got ? (double)(process_allocs() - whole) / got : 0.0;
            h_close(&x);
        }
    printf("%-46s %10s %10s %8s\n", "heap allocations per message, whole process", "obx.h",
           g_kind == K_PG ? "libpq" : "C API", "ratio");
    for (k = 0; k < 3; k++)
        printf("  %-44s %10.2f %10.2f %8.2f\n", what[k], per[k][0], per[k][1],
               per[k][1] > 0 ? per[k][0] / per[k][1] : 0.0);
}

static void allocations(int n) {
    h x;
    long before, whole;
    int got = 0, k, i;
    obx_store *s;
    obx_new_message m;
    reset(I_LIB, 0);
    fill_ready(I_LIB, 0, n);
    h_open(&x, I_LIB, 0);
    drain_round(&x, NULL); /* warm: the first batch sizes the buffers */
    before = g_allocs;
    whole = process_allocs();
    while ((k = drain_round(&x, NULL)) > 0) got += k;
    printf("%-46s %.3f per message (%ld in %d)\n", "heap allocations while draining (obx.h)",
           got ? (double)(g_allocs - before) / got : 0.0, g_allocs - before, got);
    if (whole >= 0)
        printf("%-46s %.1f per message (claims of 100, acks)\n", "  whole process (driver manager, driver)",
               got ? (double)(process_allocs() - whole) / got : 0.0);
    h_close(&x);
    if (whole < 0) return;
    s = lib_open(0);
    memset(&m, 0, sizeof m);
    m.topic = "bench.event";
    m.payload = "{\"n\":1}";
    m.payload_len = OBX_NTS;
    obx_enqueue(s, &m, NULL); /* warm: statements prepared */
    whole = process_allocs();
    for (i = 0; i < n; i++) obx_enqueue(s, &m, NULL);
    printf("%-46s %.1f per enqueue (one message per transaction)\n", "heap allocations, whole process",
           (double)(process_allocs() - whole) / n);
    obx_store_close(s);
    if (has_native()) allocations_beside(n);
}

#ifdef OBX__PQ_RUN
/* A libpq program's enqueue: the library's obx_enqueue_pq in the program's
 * transaction (BEGIN, the messages, COMMIT: three round trips) beside the
 * libpq ideal in the same transaction shape (its prepared INSERT, one
 * message or 100 through unnest); the main table's libpq column runs the
 * ideal in autocommit (one round trip). Rates and server CPU per message,
 * medians of BENCH_REPEATS interleaved. */
static void native_enqueue(int n) {
    static const char *const what[2] = {"enqueue, 1 per transaction", "enqueue, 100 per transaction"};
    double rate[2][2][MAXREP], cpu[2][2][MAXREP];
    int k, impl, rep, i, j, e, count;
    api a;
    stm st[2];
    obx_store *s = lib_open(0);
    api_open_pq(&a, g_conn);
    api_prepare(&a, &st[0], "INSERT INTO ideal_outbox (topic, payload) VALUES ($1, $2)");
    api_prepare(&a, &st[1], "INSERT INTO ideal_outbox (topic, payload) SELECT t, p FROM "
                            "unnest(CAST($1 AS text[]), CAST($2 AS text[])) AS u(t, p)");
    for (rep = 0; rep < g_repeats; rep++)
        for (k = 0; k < 2; k++)
            for (j = 0; j < 2; j++) {
                double t0, c0;
                obx_new_message ms[100];
                h x;
                impl = (j + rep) % 2; /* 0: obx_enqueue_pq, 1: the ideal */
                count = k == 0 ? n / 4 : n;
                reset(impl ? I_NATIVE : I_LIB, 0);
                memset(ms, 0, sizeof ms);
                for (i = 0; i < 100; i++) {
                    ms[i].topic = "bench.event";
                    ms[i].payload = g_payload;
                    ms[i].payload_len = OBX_NTS;
                }
                memset(&x, 0, sizeof x);
                x.list.len = x.list2.len = 0;
                t0 = now_s();
                c0 = server_cpu();
                for (i = 0; i < count; i += k == 0 ? 1 : 100) {
                    api_direct(&a, "BEGIN", NULL, NULL);
                    if (impl == 0) {
                        if (obx_enqueue_pq(s, a.pg, ms, k == 0 ? 1 : 100, NULL) != OBX_OK)
                            die("obx_enqueue_pq: %s", obx_store_last_error(s)->message);
                    } else if (k == 0) {
                        const char *p[2] = {"bench.event", g_payload};
                        api_run(&a, &st[0], p, 2, NULL, NULL);
                    } else {
                        const char *p[2];
                        x.list.len = x.list2.len = 0;
                        tx_s(&x.list, "{");
                        tx_s(&x.list2, "{");
                        for (e = 0; e < 100; e++) {
                            if (e) tx_s(&x.list, ","), tx_s(&x.list2, ",");
                            tx_pg_elem(&x.list, "bench.event");
                            tx_pg_elem(&x.list2, g_payload);
                        }
                        tx_s(&x.list, "}");
                        tx_s(&x.list2, "}");
                        p[0] = x.list.p;
                        p[1] = x.list2.p;
                        api_run(&a, &st[1], p, 2, NULL, NULL);
                    }
                    api_direct(&a, "COMMIT", NULL, NULL);
                }
                rate[k][impl][rep] = count / (now_s() - t0);
                cpu[k][impl][rep] = (server_cpu() - c0) * 1e6 / count;
                free(x.list.p);
                free(x.list2.p);
            }
    printf("\n== %s: a libpq program's enqueue, BEGIN ... COMMIT around each (medians of %d)\n", g_backend, g_repeats);
    printf("%-46s %14s %14s %8s | %s\n", "workload", "obx_enqueue_pq", "libpq ideal", "ratio",
           "server CPU us per message (library / ideal)");
    for (k = 0; k < 2; k++) {
        double v[2], c[2], tmp[MAXREP];
        for (impl = 0; impl < 2; impl++) {
            memcpy(tmp, rate[k][impl], sizeof tmp);
            qsort(tmp, (size_t)g_repeats, sizeof tmp[0], cmp_double);
            v[impl] = tmp[g_repeats / 2];
            memcpy(tmp, cpu[k][impl], sizeof tmp);
            qsort(tmp, (size_t)g_repeats, sizeof tmp[0], cmp_double);
            c[impl] = tmp[g_repeats / 2];
        }
        printf("%-46s %12.0f/s %12.0f/s %8.2f | %.1f / %.1f\n", what[k], v[0], v[1], v[0] / v[1], c[0], c[1]);
    }
    api_unprepare(&a, &st[0]);
    api_unprepare(&a, &st[1]);
    api_close(&a);
    obx_store_close(s);
}
#endif

/* ---- main ------------------------------------------------------------------------------------------ */

int main(int argc, char **argv) {
    const char *e, *only;
    const char *const *ddl;
    int n, rep, w, k, i;
    if (argc < 3) {
        fprintf(stderr, "usage: %s sqlite|postgresql|mariadb '<connection string>' [N]\n", argv[0]);
        return 2;
    }
    g_backend = argv[1];
    g_conn = argv[2];
    g_kind = strcmp(g_backend, "sqlite") == 0 ? K_SQLITE : strcmp(g_backend, "mariadb") == 0 ? K_MY : K_PG;
    n = argc > 3 ? atoi(argv[3]) : 20000;
    n = (n + 99) / 100 * 100;
    if ((e = getenv("BENCH_REPEATS")) && atoi(e) > 0) g_repeats = atoi(e) > MAXREP ? MAXREP : atoi(e);
    g_show_stmts = (e = getenv("BENCH_STMTS")) && *e == '1';
    g_priority = (e = getenv("BENCH_PRIORITY")) && *e == '1';
    if ((e = getenv("BENCH_SERVER_PID"))) g_srv_pid = atoi(e);
    for (i = 0; i < 200; i++) g_payload[i] = "{\"k\":\"abcdefghijklmnopqrstuvwxyz0123456789\"}"[i % 42];
    memcpy(g_payload, "{\"event\":\"bench\",\"data\":\"", 25);
    memcpy(g_payload + 197, "\"}", 3);

    /* The library's tables, deployed as a user's would be. */
    obx_store_close(lib_open(1));
    ibx_store_close(lib_open_inbox(1));
    api_open_odbc(&g_mon, g_conn, g_kind == K_MY);
    ddl = g_kind == K_PG ? pg_ddl : g_kind == K_MY ? my_ddl : lite_ddl;
    for (i = 0; ddl[i]; i++) mon(ddl[i]);
    if (g_kind == K_PG) {
        api_direct(&g_mon, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements", NULL, NULL);
        g_counters = api_i64(&g_mon, "SELECT count(*) FROM pg_settings WHERE name = 'shared_preload_libraries' "
                                     "AND setting LIKE '%pg_stat_statements%'") > 0;
        if (!g_counters) printf("(pg_stat_statements is not loaded: no statement counts)\n");
    } else if (g_kind == K_MY) {
        g_counters = 1;
    }

    for (rep = 0; rep < g_repeats; rep++) {
        for (w = 0; w < W_COUNT; w++) {
            if (w == W_IDEDUPS) continue; /* measured with W_IDEDUPN */
            if (!selected(w)) continue;
            for (k = 0; k < I_COUNT; k++) {
                int impl = (k + rep) % I_COUNT; /* rotate the order: no side always goes first */
                if (impl == I_NATIVE && !has_native()) continue;
                run(w, impl, n, rep);
            }
        }
        fprintf(stderr, "bench %s: repeat %d of %d done\n", g_backend, rep + 1, g_repeats);
    }
    print_table(n);
    print_cpu();
#ifdef OBX__PQ_RUN
    only = getenv("BENCH_ONLY");
    if (g_kind == K_PG && (!only || !*only || strstr(only, "enq1") || strstr(only, "enqb"))) native_enqueue(n);
#endif
    only = getenv("BENCH_ONLY");
    if (!only || !*only || strstr(only, "allocs")) allocations(n < 5000 ? n : 5000); /* BENCH_ONLY=...,allocs */
    if (!only || !*only || strstr(only, "latency")) { /* BENCH_ONLY=...,latency */
        latency_run(200);
        latency_cross(200);
    }
    e = getenv("BENCH_SWEEP");
    if (e ? *e != 0 : !only || !*only) { /* with BENCH_ONLY, a sweep only when asked for */
        const char *r = getenv("BENCH_SWEEP_READY");
        sweep(e ? e : "10000,100000", r && atoi(r) > 0 ? atoi(r) : 5000);
    }
    api_close(&g_mon);
    return 0;
}

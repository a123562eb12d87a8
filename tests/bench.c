/* bench.c: what the outbox costs over the same SQL issued directly.
 *
 *   bench <backend> '<ODBC connection string>' [N]     (make bench runs every backend)
 *
 * Each workload runs through obx.h and then as the very same statements
 * through plain ODBC with no library logic (prepared once, same
 * parameters, same transactions); the ratio library/raw is printed beside
 * them, measured in one run because this machine is noisy. Also: the
 * commit-to-handler latency with the wake-up call, and heap allocations per
 * message in steady state (a counting allocator). */
#define OBX_IMPLEMENTATION
#include "../obx.h"
#define IBX_IMPLEMENTATION
#include "../ibx.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *g_backend, *g_conn;
static int g_sqlite, g_mariadb;
static char g_payload[201];

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---- counting allocator ------------------------------------------------------- */

static long g_allocs;
static void *count_alloc(size_t n, void *u) { (void)u; __atomic_add_fetch(&g_allocs, 1, __ATOMIC_RELAXED); return malloc(n); }
static void *count_realloc(void *p, size_t n, void *u) { (void)u; __atomic_add_fetch(&g_allocs, 1, __ATOMIC_RELAXED); return realloc(p, n); }
static void count_free(void *p, void *u) { (void)u; free(p); }

static obx_store *open_store(void) {
    obx_store_desc d;
    obx_store *s = NULL;
    memset(&d, 0, sizeof d);
    d.connection_string = g_conn;
    d.deploy_schema = 1;
    d.table = "OutboxBench";
    d.hooks.logger.min_level = OBX_LOG_WARN; /* per-message INFO lines are not free */
    d.hooks.allocator.alloc = count_alloc;
    d.hooks.allocator.realloc = count_realloc;
    d.hooks.allocator.free = count_free;
    if (obx_store_open(&d, &s) != OBX_OK) {
        fprintf(stderr, "open: %s\n", obx_store_last_error(s)->message);
        exit(1);
    }
    return s;
}

static obx_result run_sql(obx__db *db, void *sql) { return obx__exec_direct(db, (const char *)sql, "bench"); }

static void reset_table(obx_store *s) {
    char *sql = obx__expand(&s->hooks, s->db.d, s->q, s->schema, s->table,
                                   g_sqlite ? "DELETE FROM {T}" : "TRUNCATE {T}");
    obx__unit(&s->db, run_sql, sql, "reset");
    obx__free(&s->hooks, sql);
    if (!g_sqlite) {
        sql = obx__expand(&s->hooks, s->db.d, s->q, s->schema, s->table,
                                 g_mariadb ? "ANALYZE TABLE {T}" : "VACUUM ANALYZE {T}");
        /* VACUUM cannot run inside a transaction (ANALYZE TABLE commits anyway). */
        SQLSetConnectAttr(s->db.dbc, SQL_ATTR_AUTOCOMMIT, (SQLPOINTER)SQL_AUTOCOMMIT_ON, SQL_IS_UINTEGER);
        obx__exec_direct(&s->db, sql, "vacuum");
        SQLSetConnectAttr(s->db.dbc, SQL_ATTR_AUTOCOMMIT, (SQLPOINTER)SQL_AUTOCOMMIT_OFF, SQL_IS_UINTEGER);
        obx__free(&s->hooks, sql);
    }
}

static void fill(obx_store *s, int n) {
    obx_new_message *ms = (obx_new_message *)calloc(1000, sizeof *ms);
    int i, k;
    for (i = 0; i < 1000; i++) {
        ms[i].topic = "bench.event";
        ms[i].payload = g_payload;
        ms[i].payload_len = OBX_NTS;
    }
    for (i = 0; i < n; i += k) {
        k = n - i < 1000 ? n - i : 1000;
        if (obx_enqueue_batch(s, NULL, ms, k, NULL) != OBX_OK) {
            fprintf(stderr, "fill: %s\n", obx_store_last_error(s)->message);
            exit(1);
        }
    }
    free(ms);
}

/* ---- raw ODBC: the same statements, no library ------------------------------------------ */

typedef struct raw {
    SQLHENV env;
    SQLHDBC dbc;
    SQLHSTMT st[OBX__Q_COUNT];
} raw;

static void raw_check(SQLRETURN rc, SQLSMALLINT type, SQLHANDLE h, const char *what) {
    SQLCHAR state[6], msg[512];
    SQLINTEGER native;
    SQLSMALLINT len;
    if (SQL_SUCCEEDED(rc) || rc == SQL_NO_DATA) return;
    SQLGetDiagRec(type, h, 1, state, &native, msg, sizeof msg, &len);
    fprintf(stderr, "raw %s: %s %s\n", what, state, msg);
    exit(1);
}

static void raw_direct(raw *r, const char *sql);

static unsigned char g_map[OBX__Q_COUNT][OBX__MAX_MARKERS];

/* A connection set up as the library sets up its own. */
static void raw_connect(raw *r, const char *connstr) {
    memset(r, 0, sizeof *r);
    SQLAllocHandle(SQL_HANDLE_ENV, NULL, &r->env);
    SQLSetEnvAttr(r->env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER)SQL_OV_ODBC3, 0);
    SQLAllocHandle(SQL_HANDLE_DBC, r->env, &r->dbc);
    raw_check(SQLDriverConnect(r->dbc, NULL, (SQLCHAR *)(uintptr_t)connstr, SQL_NTS, NULL, 0, NULL,
                               SQL_DRIVER_NOPROMPT), SQL_HANDLE_DBC, r->dbc, "connect");
    if (!g_sqlite)
        SQLSetConnectAttr(r->dbc, SQL_ATTR_AUTOCOMMIT, (SQLPOINTER)SQL_AUTOCOMMIT_OFF, SQL_IS_UINTEGER);
    if (g_mariadb) {
        /* The session the library sets up: its default REPEATABLE READ takes
         * gap locks that a claim would wait on, so compare like with like. */
        SQLSetConnectAttr(r->dbc, SQL_ATTR_TXN_ISOLATION, (SQLPOINTER)SQL_TXN_READ_COMMITTED, SQL_IS_UINTEGER);
        raw_direct(r, "SET time_zone = '+00:00'");
        raw_check(SQLEndTran(SQL_HANDLE_DBC, r->dbc, SQL_COMMIT), SQL_HANDLE_DBC, r->dbc, "commit");
    }
}

static void raw_open(raw *r, obx_store *s) {
    int i;
    raw_connect(r, s->db.connstr);
    for (i = 0; i < OBX__Q_COUNT; i++) {
        char *plain;
        if (!s->sql[i]) continue;
        /* The same text the library prepares: numbered markers made plain. */
        memset(g_map[i], 0, sizeof g_map[i]);
        plain = obx__plain_markers(&s->hooks, s->sql[i], g_map[i]);
        SQLAllocHandle(SQL_HANDLE_STMT, r->dbc, &r->st[i]);
        raw_check(SQLPrepare(r->st[i], (SQLCHAR *)plain, SQL_NTS), SQL_HANDLE_STMT, r->st[i], "prepare");
        obx__free(&s->hooks, plain);
    }
}

/* The marker position of canonical argument `arg` in statement `slot`. */
static SQLUSMALLINT at(int slot, int arg) {
    int k;
    if (!g_map[slot][0]) return (SQLUSMALLINT)arg;
    for (k = 0; k < OBX__MAX_MARKERS; k++)
        if (g_map[slot][k] == arg) return (SQLUSMALLINT)(k + 1);
    return (SQLUSMALLINT)arg;
}

static void raw_close(raw *r) {
    int i;
    for (i = 0; i < OBX__Q_COUNT; i++)
        if (r->st[i]) SQLFreeHandle(SQL_HANDLE_STMT, r->st[i]);
    SQLDisconnect(r->dbc);
    SQLFreeHandle(SQL_HANDLE_DBC, r->dbc);
    SQLFreeHandle(SQL_HANDLE_ENV, r->env);
}

static void raw_direct(raw *r, const char *sql) {
    SQLHSTMT st;
    SQLAllocHandle(SQL_HANDLE_STMT, r->dbc, &st);
    raw_check(SQLExecDirect(st, (SQLCHAR *)(uintptr_t)sql, SQL_NTS), SQL_HANDLE_STMT, st, sql);
    SQLFreeHandle(SQL_HANDLE_STMT, st);
}

static void raw_begin(raw *r) { if (g_sqlite) raw_direct(r, "BEGIN IMMEDIATE"); }
static void raw_commit(raw *r) {
    if (g_sqlite) raw_direct(r, "COMMIT");
    else raw_check(SQLEndTran(SQL_HANDLE_DBC, r->dbc, SQL_COMMIT), SQL_HANDLE_DBC, r->dbc, "commit");
}

static void bind_text(SQLHSTMT st, int n, const char *text, SQLLEN *ind) {
    *ind = text ? (SQLLEN)strlen(text) : SQL_NULL_DATA;
    SQLBindParameter(st, (SQLUSMALLINT)n, SQL_PARAM_INPUT, SQL_C_CHAR, *ind > 4000 ? SQL_LONGVARCHAR : SQL_VARCHAR,
                     text ? (SQLULEN)(*ind ? *ind : 1) : 1, 0, (SQLPOINTER)(uintptr_t)text, *ind > 0 ? *ind : 0, ind);
}

static void bind_null_i64(SQLHSTMT st, int n, SQLLEN *ind) {
    static SQLBIGINT zero;
    *ind = SQL_NULL_DATA;
    SQLBindParameter(st, (SQLUSMALLINT)n, SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0, 0, &zero, 0, ind);
}

static void raw_insert(raw *r, obx_store *s, obx_uuid_state *u) {
    char id[37], mid[37];
    SQLLEN ind[7];
    SQLHSTMT st = r->st[OBX__Q_INSERT];
    obx_uuid_v7(u, obx__now_ms(&s->hooks), (uint64_t)rand(), (uint64_t)rand(), id);
    obx_uuid_v7(u, obx__now_ms(&s->hooks), (uint64_t)rand(), (uint64_t)rand(), mid);
    bind_text(st, 1, id, &ind[0]);
    bind_text(st, 2, mid, &ind[1]);
    bind_text(st, 3, "bench.event", &ind[2]);
    bind_text(st, 4, g_payload, &ind[3]);
    bind_text(st, 5, NULL, &ind[4]);
    bind_null_i64(st, 6, &ind[5]);
    bind_null_i64(st, 7, &ind[6]);
    raw_check(SQLExecute(st), SQL_HANDLE_STMT, st, "insert");
}

/* One INSERT ... unnest of `n` rows (PostgreSQL), as the library builds it. */
static void raw_insert_many(raw *r, obx_store *s, obx_uuid_state *u, int n, obx__buf col[6]) {
    SQLLEN ind[6];
    SQLHSTMT st = r->st[OBX__Q_INSERT_MANY];
    int i, k;
    for (k = 0; k < 6; k++) col[k].len = 0;
    for (i = 0; i < n; i++) {
        char id[37], mid[37];
        obx_uuid_v7(u, obx__now_ms(&s->hooks), (uint64_t)rand(), (uint64_t)rand(), id);
        obx_uuid_v7(u, obx__now_ms(&s->hooks), (uint64_t)rand(), (uint64_t)rand(), mid);
        obx__list_add(&s->hooks, &col[0], s->db.d, id, 36);
        obx__list_add(&s->hooks, &col[1], s->db.d, mid, 36);
        obx__list_add(&s->hooks, &col[2], s->db.d, "bench.event", 11);
        obx__list_add(&s->hooks, &col[3], s->db.d, g_payload, strlen(g_payload));
        obx__list_add_null(&s->hooks, &col[4], s->db.d);
        obx__list_add_null(&s->hooks, &col[5], s->db.d);
    }
    for (k = 0; k < 6; k++) {
        obx__list_end(&s->hooks, &col[k], s->db.d);
        bind_text(st, k + 1, col[k].data, &ind[k]);
    }
    raw_check(SQLExecute(st), SQL_HANDLE_STMT, st, "insert many");
}

/* MariaDB has no UPDATE ... RETURNING: pick and lock up to `batch` ids,
 * mark them ours by a JSON id list, then run the read-back (left open on
 * the returned statement), as the library does. 0: nothing picked. */
static SQLHSTMT raw_pick_claim(raw *r, obx_store *s, const char *owner, SQLBIGINT *lease, SQLBIGINT *batch,
                               obx__buf *list) {
    SQLHSTMT pick = r->st[OBX__Q_CLAIM_PICK], mark = r->st[OBX__Q_CLAIM], read = r->st[OBX__Q_CLAIM_READ];
    SQLLEN ind[3];
    SQLBIGINT window;
    char id[40];
    int picked = 0, pass;
    SQLRETURN rc;
    for (pass = 0; pass < 2 && picked == 0; pass++) { /* as obx__pick_keys: a window, then a wider one */
        list->len = 0;
        window = *batch * (pass == 0 ? 2 : 20);
        ind[0] = ind[1] = 0;
        SQLBindParameter(pick, at(OBX__Q_CLAIM_PICK, 1), SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0, 0, batch, 0, &ind[0]);
        SQLBindParameter(pick, at(OBX__Q_CLAIM_PICK, 2), SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0, 0, &window, 0, &ind[1]);
        rc = SQLExecute(pick);
        raw_check(rc, SQL_HANDLE_STMT, pick, "claim pick");
        while (rc != SQL_NO_DATA && SQL_SUCCEEDED(SQLFetch(pick))) {
            SQLLEN len;
            SQLGetData(pick, 1, SQL_C_CHAR, id, sizeof id, &len);
            obx__list_add(&s->hooks, list, s->db.d, id, strlen(id));
            picked++;
        }
        SQLFreeStmt(pick, SQL_CLOSE);
    }
    if (picked == 0) return NULL;
    obx__list_end(&s->hooks, list, s->db.d);
    bind_text(mark, at(OBX__Q_CLAIM, 1), owner, &ind[0]);
    ind[1] = 0;
    SQLBindParameter(mark, at(OBX__Q_CLAIM, 2), SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0, 0, lease, 0, &ind[1]);
    bind_text(mark, at(OBX__Q_CLAIM, 3), list->data, &ind[2]);
    raw_check(SQLExecute(mark), SQL_HANDLE_STMT, mark, "claim");
    SQLFreeStmt(mark, SQL_CLOSE);
    bind_text(read, 1, list->data, &ind[0]);
    raw_check(SQLExecute(read), SQL_HANDLE_STMT, read, "claim read");
    return read;
}

/* Claim up to 100 (reading every column, as the library does), ack them. */
static int raw_drain_round(raw *r, obx_store *s, const char *owner, obx__buf *list) {
    SQLHSTMT st = r->st[OBX__Q_CLAIM];
    SQLLEN ind[3];
    SQLBIGINT lease = 30, batch = 100;
    char ids[100][40];
    static char cell[4096];
    int n = 0, col;
    SQLRETURN rc = SQL_SUCCESS;
    raw_begin(r);
    if (r->st[OBX__Q_CLAIM_PICK]) {
        st = raw_pick_claim(r, s, owner, &lease, &batch, list);
        if (!st) rc = SQL_NO_DATA;
    } else {
        bind_text(st, 1, owner, &ind[0]);
        ind[1] = ind[2] = 0;
        SQLBindParameter(st, 2, SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0, 0, &lease, 0, &ind[1]);
        SQLBindParameter(st, 3, SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0, 0, &batch, 0, &ind[2]);
        rc = SQLExecute(st);
        raw_check(rc, SQL_HANDLE_STMT, st, "claim");
    }
    while (rc != SQL_NO_DATA && SQL_SUCCEEDED(SQLFetch(st))) {
        SQLLEN len;
        SQLGetData(st, 1, SQL_C_CHAR, ids[n], sizeof ids[n], &len);
        for (col = 2; col <= 15; col++) SQLGetData(st, (SQLUSMALLINT)col, SQL_C_CHAR, cell, sizeof cell, &len);
        n++;
    }
    if (st) SQLFreeStmt(st, SQL_CLOSE);
    raw_commit(r);
    if (n == 0) return 0;
    {
        SQLHSTMT ack = r->st[OBX__Q_ACK];
        SQLLEN aind[3];
        int i;
        list->len = 0;
        for (i = 0; i < n; i++) {
            int k;
            for (k = 0; ids[i][k]; k++)
                if (ids[i][k] >= 'A' && ids[i][k] <= 'F') ids[i][k] = (char)(ids[i][k] + 32);
            obx__list_add(&s->hooks, list, s->db.d, ids[i], 36);
        }
        obx__list_end(&s->hooks, list, s->db.d);
        raw_begin(r);
        bind_text(ack, at(OBX__Q_ACK, 1), owner, &aind[0]);
        bind_text(ack, at(OBX__Q_ACK, 2), owner, &aind[1]);
        bind_text(ack, at(OBX__Q_ACK, 3), list->data, &aind[2]);
        raw_check(SQLExecute(ack), SQL_HANDLE_STMT, ack, "ack");
        SQLFreeStmt(ack, SQL_CLOSE);
        raw_commit(r);
    }
    return n;
}

/* ---- workloads ------------------------------------------------------------------------------------ */

static obx_outcome noop(const obx_message *m, char *e, size_t n, void *u) { (void)m; (void)e; (void)n; (void)u; return OBX_DONE; }

static double lib_insert1(obx_store *s, int n) {
    obx_new_message m;
    double t;
    int i;
    memset(&m, 0, sizeof m);
    m.topic = "bench.event";
    m.payload = g_payload;
    m.payload_len = OBX_NTS;
    t = now_s();
    for (i = 0; i < n; i++) obx_enqueue(s, &m, NULL);
    return n / (now_s() - t);
}

static double raw_insert1(obx_store *s, int n) {
    raw r;
    obx_uuid_state u = {0, 0};
    double t;
    int i;
    raw_open(&r, s);
    t = now_s();
    for (i = 0; i < n; i++) {
        raw_insert(&r, s, &u);
        if (!g_sqlite) raw_commit(&r); /* SQLite: autocommit, one statement */
    }
    t = n / (now_s() - t);
    raw_close(&r);
    return t;
}

static double lib_insertb(obx_store *s, int n) {
    obx_new_message ms[100];
    double t;
    int i;
    memset(ms, 0, sizeof ms);
    for (i = 0; i < 100; i++) {
        ms[i].topic = "bench.event";
        ms[i].payload = g_payload;
        ms[i].payload_len = OBX_NTS;
    }
    t = now_s();
    for (i = 0; i < n; i += 100) obx_enqueue_batch(s, NULL, ms, 100, NULL);
    return n / (now_s() - t);
}

static double raw_insertb(obx_store *s, int n) {
    raw r;
    obx_uuid_state u = {0, 0};
    obx__buf col[6];
    double t;
    int i, k;
    memset(col, 0, sizeof col);
    raw_open(&r, s);
    t = now_s();
    for (i = 0; i < n; i += 100) {
        raw_begin(&r);
        if (r.st[OBX__Q_INSERT_MANY]) raw_insert_many(&r, s, &u, 100, col);
        else for (k = 0; k < 100; k++) raw_insert(&r, s, &u);
        raw_commit(&r);
    }
    t = n / (now_s() - t);
    for (k = 0; k < 6; k++) obx__buf_free(&s->hooks, &col[k]);
    raw_close(&r);
    return t;
}

static int lib_drain(obx_store *s) {
    obx_dispatcher_desc dd;
    obx_dispatcher *d = NULL;
    obx_run_stats st;
    int total = 0;
    obx_result r;
    memset(&dd, 0, sizeof dd);
    dd.store = s;
    dd.batch_size = 100;
    obx_dispatcher_create(&dd, &d);
    obx_dispatcher_on(d, "bench.event", noop, NULL);
    while ((r = obx_dispatcher_run_once(d, &st)) == OBX_OK || r == OBX_ERR_DB_TRANSIENT) total += st.done;
    obx_dispatcher_destroy(d);
    return total;
}

static int raw_drain(obx_store *s) {
    raw r;
    obx__buf list = {NULL, 0, 0};
    char owner[37];
    int n, total = 0;
    raw_open(&r, s);
    obx_owner_token(s, owner);
    while ((n = raw_drain_round(&r, s, owner, &list)) > 0) total += n;
    obx__buf_free(&s->hooks, &list);
    raw_close(&r);
    return total;
}

/* Drain with `workers` processes; messages per second of wall time. */
static double drain(obx_store *s, int n, int workers, int library) {
    pid_t pids[4];
    double t;
    int w, status;
    reset_table(s);
    fill(s, n);
    fflush(stdout);
    t = now_s();
    if (workers == 1) {
        int got = library ? lib_drain(s) : raw_drain(s);
        t = now_s() - t;
        if (got != n) fprintf(stderr, "drain: %d of %d\n", got, n);
        return n / t;
    }
    for (w = 0; w < workers; w++) {
        pids[w] = fork();
        if (pids[w] == 0) {
            obx_store *mine = open_store();
            if (library) lib_drain(mine);
            else raw_drain(mine);
            obx_store_close(mine);
            _exit(0);
        }
    }
    for (w = 0; w < workers; w++) waitpid(pids[w], &status, 0);
    return n / (now_s() - t);
}

/* ---- latency with the wake-up call ----------------------------------------------------------------- */

typedef struct latency {
    double samples[400];
    volatile int seen;
} latency;

static obx_outcome measure(const obx_message *m, char *e, size_t n, void *user) {
    latency *l = (latency *)user;
    (void)e; (void)n;
    if (l->seen < 400) l->samples[l->seen] = now_s() - atof(m->payload);
    __atomic_add_fetch(&l->seen, 1, __ATOMIC_SEQ_CST);
    return OBX_DONE;
}

static void *run_loop(void *d) {
    obx_dispatcher_run((obx_dispatcher *)d);
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void latency_run(obx_store *consumer, obx_store *producer, int count, double *p50, double *p99) {
    obx_dispatcher_desc dd;
    obx_dispatcher *d = NULL;
    latency l;
    pthread_t th;
    obx_new_message m;
    char stamp[64];
    int i;
    memset(&l, 0, sizeof l);
    memset(&dd, 0, sizeof dd);
    dd.store = consumer;
    dd.poll_interval_ms = 500; /* the seed's default: without the wake-up, ~250 ms on average */
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
        obx_enqueue(producer, &m, NULL); /* committed ... */
        obx_dispatcher_wake(d);           /* ... then the wake-up */
        while (l.seen <= i) {
            struct timespec spin = {0, 50000};
            nanosleep(&spin, NULL);
        }
    }
    obx_dispatcher_stop(d);
    pthread_join(th, NULL);
    obx_dispatcher_destroy(d);
    qsort(l.samples, (size_t)count, sizeof l.samples[0], cmp_double);
    *p50 = l.samples[count / 2] * 1000;
    *p99 = l.samples[(count * 99) / 100] * 1000;
}

static void row(const char *what, double lib, double raw_rate) {
    printf("%-11s %-44s %10.0f/s %10.0f/s   %5.2f\n", g_backend, what, lib, raw_rate, lib / raw_rate);
    fflush(stdout);
}


/* ---- inbox: dedup checks and drain -------------------------------------------------------- */

static ibx_store *open_inbox(void) {
    ibx_store_desc d;
    ibx_store *s = NULL;
    memset(&d, 0, sizeof d);
    d.connection_string = g_conn;
    d.deploy_schema = 1;
    d.table = "InboxBench";
    d.hooks.logger.min_level = IBX_LOG_WARN;
    if (ibx_store_open(&d, &s) != IBX_OK) {
        fprintf(stderr, "inbox open: %s\n", ibx_store_last_error(s)->message);
        exit(1);
    }
    return s;
}

static ibx_result inbox_sql(ibx__db *db, void *text) { return ibx__exec_direct(db, (const char *)text, "bench"); }

static void inbox_reset(ibx_store *s) {
    char *text = ibx__expand(&s->hooks, s->db.d, s->q, s->schema, s->table,
                                   g_sqlite ? "DELETE FROM {T}" : "TRUNCATE {T}");
    ibx__unit(&s->db, inbox_sql, text, "reset");
    ibx__free(&s->hooks, text);
}

/* Fresh statistics before a drain, as for the outbox. */
static void inbox_analyze(ibx_store *s) {
    char *text;
    if (g_sqlite) return;
    text = ibx__expand(&s->hooks, s->db.d, s->q, s->schema, s->table,
                             g_mariadb ? "ANALYZE TABLE {T}" : "VACUUM ANALYZE {T}");
    SQLSetConnectAttr(s->db.dbc, SQL_ATTR_AUTOCOMMIT, (SQLPOINTER)SQL_AUTOCOMMIT_ON, SQL_IS_UINTEGER);
    ibx__exec_direct(&s->db, text, "vacuum");
    SQLSetConnectAttr(s->db.dbc, SQL_ATTR_AUTOCOMMIT, (SQLPOINTER)SQL_AUTOCOMMIT_OFF, SQL_IS_UINTEGER);
    ibx__free(&s->hooks, text);
}

/* The marker position of canonical argument `arg` in inbox statement `slot`. */
static unsigned char g_imap[IBX__Q_COUNT][IBX__MAX_MARKERS];
static SQLUSMALLINT iat(int slot, int arg) {
    int k;
    if (!g_imap[slot][0]) return (SQLUSMALLINT)arg;
    for (k = 0; k < IBX__MAX_MARKERS; k++)
        if (g_imap[slot][k] == arg) return (SQLUSMALLINT)(k + 1);
    return (SQLUSMALLINT)arg;
}

/* The statement the library prepares for `slot`: numbered markers made plain. */
static SQLHSTMT inbox_prepare(raw *r, ibx_store *s, int slot) {
    SQLHSTMT st;
    char *plain;
    memset(g_imap[slot], 0, sizeof g_imap[slot]);
    plain = ibx__plain_markers(&s->hooks, s->sql[slot], g_imap[slot]);
    SQLAllocHandle(SQL_HANDLE_STMT, r->dbc, &st);
    raw_check(SQLPrepare(st, (SQLCHAR *)plain, SQL_NTS), SQL_HANDLE_STMT, st, "prepare");
    ibx__free(&s->hooks, plain);
    return st;
}

static double lib_dedup(ibx_store *s, int n, const char *prefix) {
    char id[48];
    unsigned char hash[32];
    int i, processed;
    double t = now_s();
    memset(hash, 7, sizeof hash);
    for (i = 0; i < n; i++) {
        snprintf(id, sizeof id, "%s-%d", prefix, i);
        ibx_already_processed(s, id, "bench", hash, sizeof hash, &processed);
    }
    return n / (now_s() - t);
}

static double raw_dedup(ibx_store *s, int n, const char *prefix) {
    raw r;
    SQLHSTMT st;
    char id[48], status[24];
    unsigned char hash[32], got[64];
    SQLLEN ind[3], len;
    double t;
    int i;
    raw_connect(&r, s->db.connstr);
    st = inbox_prepare(&r, s, IBX__Q_SEEN);
    memset(hash, 7, sizeof hash);
    t = now_s();
    for (i = 0; i < n; i++) {
        snprintf(id, sizeof id, "%s-%d", prefix, i);
        raw_begin(&r);
        bind_text(st, 1, "bench", &ind[0]);
        bind_text(st, 2, id, &ind[1]);
        ind[2] = 32;
        SQLBindParameter(st, 3, SQL_PARAM_INPUT, SQL_C_BINARY, SQL_VARBINARY, 32, 0, hash, 32, &ind[2]);
        raw_check(SQLExecute(st), SQL_HANDLE_STMT, st, "dedup");
        if (SQL_SUCCEEDED(SQLFetch(st))) {
            SQLGetData(st, 1, SQL_C_CHAR, status, sizeof status, &len);
            SQLGetData(st, 2, SQL_C_BINARY, got, sizeof got, &len);
        }
        SQLFreeStmt(st, SQL_CLOSE);
        raw_commit(&r);
    }
    t = n / (now_s() - t);
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    SQLDisconnect(r.dbc);
    SQLFreeHandle(SQL_HANDLE_DBC, r.dbc);
    SQLFreeHandle(SQL_HANDLE_ENV, r.env);
    return t;
}

static void inbox_fill(ibx_store *s, int n) {
    ibx_new_message m;
    char id[32];
    int i;
    memset(&m, 0, sizeof m);
    m.topic = "bench.event";
    m.source = "bench";
    m.payload = g_payload;
    m.payload_len = IBX_NTS;
    m.message_id = id;
    for (i = 0; i < n; i++) {
        snprintf(id, sizeof id, "m-%d", i);
        ibx_enqueue(s, &m, NULL);
    }
}

static ibx_outcome ibx_noop(const ibx_message *m, char *e, size_t n, void *u) { (void)m; (void)e; (void)n; (void)u; return IBX_DONE; }

static double lib_inbox_drain(ibx_store *s, int n) {
    ibx_dispatcher_desc dd;
    ibx_dispatcher *d = NULL;
    ibx_run_stats st;
    double t;
    memset(&dd, 0, sizeof dd);
    dd.store = s;
    dd.batch_size = 100;
    ibx_dispatcher_create(&dd, &d);
    ibx_dispatcher_on(d, "bench.event", ibx_noop, NULL);
    t = now_s();
    while (ibx_dispatcher_run_once(d, &st) == IBX_OK) {
    }
    t = n / (now_s() - t);
    ibx_dispatcher_destroy(d);
    return t;
}

/* MariaDB: pick up to `batch` keys (locked, SKIP LOCKED), mark them ours by
 * two key lists, and run the read-back (left open), as the library does.
 * NULL: nothing picked. */
static SQLHSTMT raw_inbox_pick_claim(ibx_store *s, SQLHSTMT pick, SQLHSTMT mark, SQLHSTMT read, const char *owner,
                                     SQLBIGINT *lease, SQLBIGINT *batch, ibx__buf *sources, ibx__buf *ids) {
    SQLLEN ind[4], len;
    SQLBIGINT window;
    char source[300], id[300];
    int picked = 0, pass;
    SQLRETURN rc;
    for (pass = 0; pass < 2 && picked == 0; pass++) { /* as ibx__pick_keys */
        sources->len = ids->len = 0;
        window = *batch * (pass == 0 ? 2 : 20);
        ind[0] = ind[1] = 0;
        SQLBindParameter(pick, iat(IBX__Q_CLAIM_PICK, 1), SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0, 0, batch, 0, &ind[0]);
        SQLBindParameter(pick, iat(IBX__Q_CLAIM_PICK, 2), SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0, 0, &window, 0, &ind[1]);
        rc = SQLExecute(pick);
        raw_check(rc, SQL_HANDLE_STMT, pick, "claim pick");
        while (rc != SQL_NO_DATA && SQL_SUCCEEDED(SQLFetch(pick))) {
            SQLGetData(pick, 1, SQL_C_CHAR, source, sizeof source, &len);
            SQLGetData(pick, 2, SQL_C_CHAR, id, sizeof id, &len);
            ibx__list_add(&s->hooks, sources, s->db.d, source, strlen(source));
            ibx__list_add(&s->hooks, ids, s->db.d, id, strlen(id));
            picked++;
        }
        SQLFreeStmt(pick, SQL_CLOSE);
    }
    if (picked == 0) return NULL;
    ibx__list_end(&s->hooks, sources, s->db.d);
    ibx__list_end(&s->hooks, ids, s->db.d);
    bind_text(mark, iat(IBX__Q_CLAIM, 1), owner, &ind[0]);
    ind[1] = 0;
    SQLBindParameter(mark, iat(IBX__Q_CLAIM, 2), SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0, 0, lease, 0, &ind[1]);
    bind_text(mark, iat(IBX__Q_CLAIM, 3), sources->data, &ind[2]);
    bind_text(mark, iat(IBX__Q_CLAIM, 4), ids->data, &ind[3]);
    raw_check(SQLExecute(mark), SQL_HANDLE_STMT, mark, "claim");
    SQLFreeStmt(mark, SQL_CLOSE);
    bind_text(read, 1, sources->data, &ind[0]);
    bind_text(read, 2, ids->data, &ind[1]);
    raw_check(SQLExecute(read), SQL_HANDLE_STMT, read, "claim read");
    return read;
}

/* Claim 100 (reading every column), ack them by key, as the library does. */
static double raw_inbox_drain(ibx_store *s, int n) {
    raw r;
    SQLHSTMT claim, ack, pick = NULL, read = NULL;
    ibx__buf sources = {NULL, 0, 0}, ids = {NULL, 0, 0};
    char owner[37], cell[4096], keys[100][2][300];
    SQLBIGINT lease = 30, batch = 100;
    SQLLEN ind[3], len;
    double t;
    int got, col, i;
    raw_connect(&r, s->db.connstr);
    claim = inbox_prepare(&r, s, IBX__Q_CLAIM);
    ack = inbox_prepare(&r, s, IBX__Q_ACK);
    if (s->sql[IBX__Q_CLAIM_PICK]) {
        pick = inbox_prepare(&r, s, IBX__Q_CLAIM_PICK);
        read = inbox_prepare(&r, s, IBX__Q_CLAIM_READ);
    }
    ibx_owner_token(s, owner);
    t = now_s();
    do {
        SQLRETURN rc = SQL_SUCCESS;
        SQLHSTMT rows = claim;
        got = 0;
        raw_begin(&r);
        if (pick) {
            rows = raw_inbox_pick_claim(s, pick, claim, read, owner, &lease, &batch, &sources, &ids);
            if (!rows) rc = SQL_NO_DATA;
        } else {
            bind_text(claim, 1, owner, &ind[0]);
            ind[1] = ind[2] = 0;
            SQLBindParameter(claim, 2, SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0, 0, &lease, 0, &ind[1]);
            SQLBindParameter(claim, 3, SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0, 0, &batch, 0, &ind[2]);
            rc = SQLExecute(claim);
            raw_check(rc, SQL_HANDLE_STMT, claim, "claim");
        }
        while (rc != SQL_NO_DATA && SQL_SUCCEEDED(SQLFetch(rows))) {
            SQLGetData(rows, 1, SQL_C_CHAR, keys[got][0], 300, &len);
            SQLGetData(rows, 2, SQL_C_CHAR, keys[got][1], 300, &len);
            for (col = 3; col <= 14; col++)
                SQLGetData(rows, (SQLUSMALLINT)col, col == 5 ? SQL_C_BINARY : SQL_C_CHAR, cell, sizeof cell, &len);
            got++;
        }
        if (rows) SQLFreeStmt(rows, SQL_CLOSE);
        raw_commit(&r);
        if (got == 0) break;
        sources.len = ids.len = 0;
        for (i = 0; i < got; i++) {
            ibx__list_add(&s->hooks, &sources, s->db.d, keys[i][0], strlen(keys[i][0]));
            ibx__list_add(&s->hooks, &ids, s->db.d, keys[i][1], strlen(keys[i][1]));
        }
        ibx__list_end(&s->hooks, &sources, s->db.d);
        ibx__list_end(&s->hooks, &ids, s->db.d);
        raw_begin(&r);
        bind_text(ack, iat(IBX__Q_ACK, 1), owner, &ind[0]);
        bind_text(ack, iat(IBX__Q_ACK, 2), sources.data, &ind[1]);
        bind_text(ack, iat(IBX__Q_ACK, 3), ids.data, &ind[2]);
        raw_check(SQLExecute(ack), SQL_HANDLE_STMT, ack, "ack");
        SQLFreeStmt(ack, SQL_CLOSE);
        raw_commit(&r);
    } while (got > 0);
    t = n / (now_s() - t);
    ibx__buf_free(&s->hooks, &sources);
    ibx__buf_free(&s->hooks, &ids);
    SQLFreeHandle(SQL_HANDLE_STMT, claim);
    SQLFreeHandle(SQL_HANDLE_STMT, ack);
    if (pick) SQLFreeHandle(SQL_HANDLE_STMT, pick);
    if (read) SQLFreeHandle(SQL_HANDLE_STMT, read);
    SQLDisconnect(r.dbc);
    SQLFreeHandle(SQL_HANDLE_DBC, r.dbc);
    SQLFreeHandle(SQL_HANDLE_ENV, r.env);
    return t;
}

static void inbox_bench(int n) {
    ibx_store *s;
    double lib, raw_rate;
    s = open_inbox();
    inbox_reset(s);
    lib = lib_dedup(s, n / 4, "lib");
    raw_rate = raw_dedup(s, n / 4, "raw");
    row("inbox: dedup check, new message id", lib, raw_rate);
    lib = lib_dedup(s, n / 4, "lib");
    raw_rate = raw_dedup(s, n / 4, "raw");
    row("inbox: dedup check, message seen before", lib, raw_rate);
    inbox_reset(s);
    inbox_fill(s, n);
    inbox_analyze(s);
    lib = lib_inbox_drain(s, n);
    inbox_reset(s);
    inbox_fill(s, n);
    inbox_analyze(s);
    raw_rate = raw_inbox_drain(s, n);
    row("inbox: drain (claim 100, no-op, ack), 1 worker", lib, raw_rate);
    ibx_store_close(s);
}

int main(int argc, char **argv) {
    obx_store *s, *producer;
    int n, dn, i;
    long before;
    double p50, p99;
    if (argc < 3) {
        fprintf(stderr, "usage: %s sqlite|postgresql|mariadb '<connection string>' [N]\n", argv[0]);
        return 2;
    }
    g_backend = argv[1];
    g_conn = argv[2];
    g_sqlite = strcmp(g_backend, "sqlite") == 0;
    g_mariadb = strcmp(g_backend, "mariadb") == 0;
    n = argc > 3 ? atoi(argv[3]) : 20000;
    dn = n; /* (a smaller drain N is possible where a database needs it) */
    for (i = 0; i < 200; i++) g_payload[i] = "{\"k\":\"abcdefghijklmnopqrstuvwxyz0123456789\"}"[i % 42];
    memcpy(g_payload, "{\"event\":\"bench\",\"data\":\"", 25);
    memcpy(g_payload + 197, "\"}", 3);
    s = open_store();
    printf("%-11s %-44s %12s %12s %7s\n", "backend", "workload (N = messages)", "obx.h", "raw ODBC", "ratio");

    reset_table(s);
    row("enqueue, 1 per transaction", lib_insert1(s, n / 4), raw_insert1(s, n / 4));
    reset_table(s);
    row("enqueue, 100 per transaction (batch call)", lib_insertb(s, n), raw_insertb(s, n));
    if (dn != n)
        printf("%-11s %-44s N = %d: claim and ack scan the whole table\n", g_backend, "drains below", dn);
    {
        double lib = drain(s, dn, 1, 1), raw_rate = drain(s, dn, 1, 0);
        row("drain: claim 100, no-op handler, ack; 1 worker", lib, raw_rate);
    }
    {
        double lib = drain(s, dn, 2, 1), raw_rate = drain(s, dn, 2, 0);
        row("drain, 2 worker processes", lib, raw_rate);
    }

    /* Steady-state allocations: a second drain on a warm store. */
    reset_table(s);
    fill(s, dn);
    before = g_allocs;
    lib_drain(s);
    printf("%-11s %-44s %10.3f per message (%ld in %d)\n", g_backend, "heap allocations while draining",
           (double)(g_allocs - before) / dn, g_allocs - before, dn);

    reset_table(s);
    producer = open_store();
    latency_run(s, producer, 200, &p50, &p99);
    printf("%-11s %-44s p50 %.2f ms, p99 %.2f ms (poll 500 ms)\n", g_backend,
           "commit-to-handler latency with wake-up", p50, p99);
    obx_store_close(producer);
    obx_store_close(s);
    inbox_bench(n);
    return 0;
}

/* The soak's processes (issue 26): an orchestrator and the roles it runs as
 * separate processes of this same program, all against one database, with
 * every process killed (SIGKILL) at random and started again:
 *
 *   producer    enqueues outbox messages one by one, in batches and in its own
 *               transaction with a business row (a quarter rolled back), with
 *               ordering keys shared by every producer (so producers of one key
 *               overlap; on the servers some keyed transactions held open),
 *               expiries in the past and the future, at the store's
 *               max_pending bound (and a tight one), some transactions with
 *               the disk full (SQLite); or (inbox) deliveries of (source, id)
 *               with redeliveries of the same and of changed content, some
 *               while the message is in a handler
 *   dispatcher  per-message and batch handlers that return done / retry /
 *               pause / dead at random, some slower than the lease; the same
 *               as transactional handlers (topics x, y) writing an effect in
 *               the settle's transaction, and OBX_CONFLICT now and then; a poison
 *               topic whose handler calls abort(); the lease renewal's
 *               connects refused now and then (soak_driver_connect)
 *   operator    what operators do during the run (see role_operator), among
 *               them replays and purges of the same messages at one moment
 *
 * Each process appends what it did and saw to its own log (soak.h); the
 * checker (check.c) reads the logs and the final tables. The run is seeded:
 * SOAK_SEED replays the same schedule of operations and kills (the timing,
 * and so the interleaving, may differ).
 *
 * Usage: soak run obx|ibx sqlite|postgresql|mariadb 'CONN' TABLE DIR
 *        (the roles: soak producer|dispatcher|operator ID INCARNATION, with the
 *        run's settings in the environment)
 * Environment: SOAK_SEED (default: from the clock; printed), SOAK_SECONDS (load
 * phase, default 30), SOAK_DRAIN_SECONDS (bound of the drain, 90),
 * SOAK_PRODUCERS (3), SOAK_DISPATCHERS (3), SOAK_KILL_MS (mean ms between
 * kills, 1500), SOAK_FAULT_SCRIPT (tests/torture/dbfault.sh: database faults on
 * PostgreSQL and MariaDB), SOAK_FAULTS (default "restart terminate"; "freeze" too),
 * SOAK_FAULT_MS (mean ms between faults, 6000), SOAK_OOM_RATE (dispatcher 0's
 * allocator fails one call in this many, on every thread; default 300, 0 none), SOAK_OPERATORS (2),
 * SOAK_CONN_1 and SOAK_CONN_2 (more tenant databases: a provider process
 * dispatches all three), SOAK_VERBOSE. */
/* The renewal connection refused is a fault of this test, not a hook of the
 * library: the headers' connects go through soak_driver_connect (below). */
#include <sql.h>
#include <sqlext.h>
static SQLRETURN soak_driver_connect(SQLHDBC dbc, SQLHWND w, SQLCHAR *in, SQLSMALLINT in_len, SQLCHAR *out,
                                     SQLSMALLINT cap, SQLSMALLINT *out_len, SQLUSMALLINT completion);
#define SQLDriverConnect soak_driver_connect
#define OBX_IMPLEMENTATION
#include "../../obx.h"
#define IBX_IMPLEMENTATION
#include "../../ibx.h"
#undef SQLDriverConnect
#include "soak.h"

#include <pthread.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

static const char *g_hdr, *g_backend, *g_conn, *g_table, *g_dir;
static int g_inbox;
static uint64_t g_seed;
static volatile sig_atomic_t g_stop;
static int g_log = -1; /* this process's log */
static int g_orch = -1; /* the orchestrator's */
static soak_rng g_rng;

static void on_term(int sig) {
    (void)sig;
    g_stop = 1;
}

static int is_sqlite(void) { return strcmp(g_backend, "sqlite") == 0; }

/* The renewal connection refused (dispatchers). In a dispatcher process the
 * lease renewal thread is the only one that connects besides the main
 * thread; while g_refuse is set its connects fail (SQL_ERROR) as a refusing
 * server's would. Windows of 0.2-0.8 s every 1-4 s, shorter than a renewal
 * interval (a third of the lease): a renewal fails, no handler may start past
 * the lease it holds (CONCURRENT), the next renewal keeps the lease.
 * Log: RRON T / RROFF T (a window), RR T (a connect refused). */
static pthread_t g_main_thread;
static volatile int g_refuse;

static SQLRETURN soak_driver_connect(SQLHDBC dbc, SQLHWND w, SQLCHAR *in, SQLSMALLINT in_len, SQLCHAR *out,
                                     SQLSMALLINT cap, SQLSMALLINT *out_len, SQLUSMALLINT completion) {
    if (g_refuse && !pthread_equal(pthread_self(), g_main_thread)) {
        soak_log(g_log, "RR %lld", (long long)tort_wall_us());
        return SQL_ERROR;
    }
    return SQLDriverConnect(dbc, w, in, in_len, out, cap, out_len, completion);
}

static void *refuser_main(void *v) {
    soak_rng r = *(soak_rng *)v;
    while (!g_stop) {
        tort_sleep_ms(1000 + soak_below(&r, 3000));
        g_refuse = 1;
        soak_log(g_log, "RRON %lld", (long long)tort_wall_us());
        tort_sleep_ms(200 + soak_below(&r, 600));
        g_refuse = 0;
        soak_log(g_log, "RROFF %lld", (long long)tort_wall_us());
    }
    return NULL;
}

/* The library's errors (L); and its warnings about lease renewal (LR, with
 * the pid: a CONCURRENT names the first handler's pid, and the checker
 * prints what its renewal said meanwhile). */
static void lib_log(obx_log_level level, const char *id, const char *msg, void *user) {
    (void)user;
    if (level >= OBX_LOG_ERROR && g_log >= 0) soak_log(g_log, "L %lld %d [%s] %s", (long long)tort_wall_us(), (int)level, id, msg);
    else if (level >= OBX_LOG_WARN && g_log >= 0 && (strstr(msg, "lease renewal") || strstr(msg, "max_handler_ms")))
        soak_log(g_log, "LR %d %lld %s", (int)getpid(), (long long)tort_wall_us(), msg);
    if (level >= OBX_LOG_WARN && getenv("SOAK_VERBOSE")) fprintf(stderr, "  [%d %s] %s\n", (int)getpid(), id, msg);
}
static void ilib_log(ibx_log_level level, const char *id, const char *msg, void *user) {
    lib_log((obx_log_level)level, id, msg, user);
}

/* Tenants: the run's database (0) and, for the provider process, up to two
 * more (SOAK_CONN_1, SOAK_CONN_2). A message of tenant n > 0 carries "@n" at
 * the end of its tag (outbox) or message id (inbox). */
static const char *g_tconn[3];
static int g_ntenants = 1;

static obx_store *open_obx_on(const char *conn, int deploy, int64_t max_pending);
static obx_store *open_obx(int deploy, int64_t max_pending) { return open_obx_on(g_conn, deploy, max_pending); }
static ibx_store *open_ibx_on(const char *conn, int deploy, int64_t max_pending);
static ibx_store *open_ibx(int deploy, int64_t max_pending) { return open_ibx_on(g_conn, deploy, max_pending); }

static void *oom_alloc(size_t n, void *u);
static void *oom_realloc(void *p, size_t n, void *u);
static void oom_free(void *p, void *u);
static uint64_t g_oom_rate;

static obx_store *open_obx_on(const char *conn, int deploy, int64_t max_pending) {
    obx_store_desc d;
    obx_store *s = NULL;
    memset(&d, 0, sizeof d);
    if (g_oom_rate) {
        d.hooks.allocator.alloc = oom_alloc;
        d.hooks.allocator.realloc = oom_realloc;
        d.hooks.allocator.free = oom_free;
    }
    d.connection_string = conn;
    d.table = g_table;
    d.deploy_schema = deploy;
    d.max_pending = max_pending;
    d.max_starts = SOAK_MAX_STARTS;
    d.hooks.logger.log = lib_log;
    if (obx_store_open(&d, &s) != OBX_OK) {
        if (getenv("SOAK_VERBOSE"))
            fprintf(stderr, "soak: open failed: %s\n", s ? obx_store_last_error(s)->message : "no memory");
        obx_store_close(s);
        return NULL;
    }
    return s;
}
static ibx_store *open_ibx_on(const char *conn, int deploy, int64_t max_pending) {
    ibx_store_desc d;
    ibx_store *s = NULL;
    memset(&d, 0, sizeof d);
    if (g_oom_rate) {
        d.hooks.allocator.alloc = oom_alloc;
        d.hooks.allocator.realloc = oom_realloc;
        d.hooks.allocator.free = oom_free;
    }
    d.connection_string = conn;
    d.table = g_table;
    d.deploy_schema = deploy;
    d.max_pending = max_pending;
    d.max_starts = SOAK_MAX_STARTS;
    d.hooks.logger.log = ilib_log;
    if (ibx_store_open(&d, &s) != IBX_OK) {
        if (getenv("SOAK_VERBOSE"))
            fprintf(stderr, "soak: open failed: %s\n", s ? ibx_store_last_error(s)->message : "no memory");
        ibx_store_close(s);
        return NULL;
    }
    return s;
}

/* ---- dispatcher ------------------------------------------------------------------------
 * Log: S KEY VERSION OKEY ATTEMPT STARTS T PID   a handler starts on a message
 *      E KEY OUTCOME T PID                       ... and ends with OUTCOME
 * KEY is the outbox message's tag (from its payload) or the inbox's
 * "source/id"; VERSION the work item id (outbox) or the content's version
 * (inbox); ATTEMPT the message's abandons so far. */

static const char *outcome_name(int o) {
    switch (o) {
    case OBX_DONE: return "done";
    case OBX_RETRY: return "retry";
    case OBX_DEAD: return "dead";
    case OBX_WAIT: return "wait";
    case OBX_PAUSE: return "pause";
    case OBX_CONFLICT: return "confl";
    default: return "?";
    }
}

/* A handler's fate, drawn from the process's stream: sleeps (3 % of them
 * longer than the lease), then an outcome. */
static int fate(char *error, size_t cap) {
    int r = soak_below(&g_rng, 100);
    if (soak_pct(&g_rng, 3)) tort_sleep_ms(SOAK_LEASE_S * 1000L + 500 + soak_below(&g_rng, 1000));
    else tort_sleep_ms(soak_below(&g_rng, 4));
    if (r < 80) return OBX_DONE;
    if (r < 90) {
        snprintf(error, cap, "%s", SOAK_RETRY_REASON);
        return OBX_RETRY;
    }
    if (r < 94) {
        snprintf(error, cap, "%s", SOAK_PAUSE_REASON);
        return OBX_PAUSE;
    }
    if (r < 97) {
        snprintf(error, cap, "%s", SOAK_DEAD_REASON);
        return OBX_DEAD;
    }
    return OBX_DONE;
}

/* The message's key and version as the logs name them. */
static void okey_of(const obx_message *m, char *key, size_t cap) {
    size_t n = strcspn(m->payload, " ");
    snprintf(key, cap, "%.*s", (int)(n < cap ? n : cap - 1), m->payload);
}
static void ikey_of(const ibx_message *m, char *key, size_t kcap, char *ver, size_t vcap) {
    const char *v = strstr(m->payload, " v");
    snprintf(key, kcap, "%s/%s", m->source, m->message_id);
    snprintf(ver, vcap, "%ld", v ? atol(v + 2) : -1L);
}

static void log_start_o(const obx_message *m) {
    char key[80];
    okey_of(m, key, sizeof key);
    soak_log(g_log, "S %s %s %s %d %d %lld %d", key, m->id, m->ordering_key ? m->ordering_key : "-",
             m->retry_count, m->starts, (long long)tort_wall_us(), (int)getpid());
}
static void log_start_i(const ibx_message *m) {
    char key[600], ver[32];
    ikey_of(m, key, sizeof key, ver, sizeof ver);
    soak_log(g_log, "S %s %s - %d %d %lld %d", key, ver, m->attempt, m->starts, (long long)tort_wall_us(),
             (int)getpid());
}
static void log_end(const char *key, int outcome) {
    soak_log(g_log, "E %s %s %lld %d", key, outcome_name(outcome), (long long)tort_wall_us(), (int)getpid());
}

/* The poison topic: its handler takes the whole process down (abort), every
 * time; the message must end Dead as a crash loop after max_starts claims. */
static obx_outcome opoison(const obx_message *m, char *e, size_t cap, void *u) {
    (void)e; (void)cap; (void)u;
    log_start_o(m);
    abort();
}
static ibx_outcome ipoison(const ibx_message *m, char *e, size_t cap, void *u) {
    (void)e; (void)cap; (void)u;
    log_start_i(m);
    abort();
}

static obx_outcome ohandle(const obx_message *m, char *e, size_t cap, void *u) {
    char key[80];
    int o;
    (void)u;
    log_start_o(m);
    o = fate(e, cap);
    okey_of(m, key, sizeof key);
    log_end(key, o);
    return (obx_outcome)o;
}
static void obatch(const obx_message *const *ms, obx_batch_result *res, int n, void *u) {
    int i;
    (void)u;
    for (i = 0; i < n; i++) log_start_o(ms[i]);
    for (i = 0; i < n; i++) {
        char key[80];
        int o = fate(res[i].error, sizeof res[i].error);
        res[i].outcome = (obx_outcome)o;
        okey_of(ms[i], key, sizeof key);
        log_end(key, (int)res[i].outcome);
    }
}
static ibx_outcome ihandle(const ibx_message *m, char *e, size_t cap, void *u) {
    char key[600], ver[32];
    int o;
    (void)u;
    log_start_i(m);
    o = fate(e, cap);
    ikey_of(m, key, sizeof key, ver, sizeof ver);
    log_end(key, o);
    return (ibx_outcome)o;
}
static void ibatch(const ibx_message *const *ms, ibx_batch_result *res, int n, void *u) {
    int i;
    (void)u;
    for (i = 0; i < n; i++) log_start_i(ms[i]);
    for (i = 0; i < n; i++) {
        char key[600], ver[32];
        int o = fate(res[i].error, sizeof res[i].error);
        res[i].outcome = (ibx_outcome)o;
        ikey_of(ms[i], key, sizeof key, ver, sizeof ver);
        log_end(key, (int)res[i].outcome);
    }
}

/* Transactional handlers (topics "x" per message, "y" batch; issue 31):
 * each writes its effect, a row of soak_fx (K the message's key, V its
 * content version, the inbox's hash of it), on the handler's hdbc in the
 * transaction that settles the message, then takes its fate as the other
 * handlers do (3 % OBX_CONFLICT besides): the checker finds the effect
 * exactly once on Done messages and never on others (a retry, pause, dead,
 * conflict or lost lease rolls it back). */
static int fx_write(void *hdbc, const char *key, int ver, char *state, long *native) {
    char sql[700];
    SQLHSTMT st;
    SQLRETURN rc;
    SQLSMALLINT len = 0;
    SQLINTEGER n = 0;
    snprintf(sql, sizeof sql, "INSERT INTO soak_fx (k, v) VALUES ('%.600s', %d)", key, ver);
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, (SQLHDBC)hdbc, &st))) return 0;
    rc = SQLExecDirect(st, (SQLCHAR *)sql, SQL_NTS);
    if (!SQL_SUCCEEDED(rc)) SQLGetDiagRec(SQL_HANDLE_STMT, st, 1, (SQLCHAR *)state, &n, NULL, 0, &len);
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    *native = (long)n;
    return SQL_SUCCEEDED(rc);
}
/* The fate drawn (and slept) first, then the effect: on SQLite the write
 * takes the database's write lock until the commit, and a handler slower
 * than the lease holding it would starve every renewal. A write that fails
 * answers OBX_CONFLICT (obx_tx_conflict) or OBX_RETRY; 3 % of the others
 * OBX_CONFLICT. */
static int tx_effect(int o, void *hdbc, const char *key, int ver, int inbox, const void *store, char *e, size_t cap) {
    char state[6] = "";
    long native = 0;
    if (!fx_write(hdbc, key, ver, state, &native)) {
        int c = inbox ? ibx_tx_conflict((const ibx_store *)store, state, native)
                      : obx_tx_conflict((const obx_store *)store, state, native);
        snprintf(e, cap, "effect: %s %ld", state, native);
        return c ? OBX_CONFLICT : OBX_RETRY;
    }
    return soak_pct(&g_rng, 3) ? OBX_CONFLICT : o;
}
static obx_outcome otx_handle(const obx_message *m, void *hdbc, char *e, size_t cap, void *u) {
    char key[80];
    int o;
    (void)u;
    log_start_o(m);
    okey_of(m, key, sizeof key);
    o = tx_effect(fate(e, cap), hdbc, key, 0, 0, m->store, e, cap);
    log_end(key, o);
    return (obx_outcome)o;
}
static void obatch_tx(const obx_message *const *ms, obx_batch_result *res, int n, void *hdbc, void *u) {
    int i;
    (void)u;
    for (i = 0; i < n; i++) log_start_o(ms[i]);
    for (i = 0; i < n; i++) {
        int o = fate(res[i].error, sizeof res[i].error);
        res[i].outcome = (obx_outcome)o;
    }
    for (i = 0; i < n; i++) {
        char key[80];
        okey_of(ms[i], key, sizeof key);
        {
            int o = tx_effect((int)res[i].outcome, hdbc, key, 0, 0, ms[i]->store, res[i].error, sizeof res[i].error);
            res[i].outcome = (obx_outcome)o;
        }
        log_end(key, (int)res[i].outcome);
    }
}
static ibx_outcome itx_handle(const ibx_message *m, void *hdbc, char *e, size_t cap, void *u) {
    char key[600], ver[32];
    int o;
    (void)u;
    log_start_i(m);
    ikey_of(m, key, sizeof key, ver, sizeof ver);
    o = tx_effect(fate(e, cap), hdbc, key, atoi(ver), 1, m->store, e, cap);
    log_end(key, o);
    return (ibx_outcome)o;
}
static void ibatch_tx(const ibx_message *const *ms, ibx_batch_result *res, int n, void *hdbc, void *u) {
    int i;
    (void)u;
    for (i = 0; i < n; i++) log_start_i(ms[i]);
    for (i = 0; i < n; i++) {
        int o = fate(res[i].error, sizeof res[i].error);
        res[i].outcome = (ibx_outcome)o;
    }
    for (i = 0; i < n; i++) {
        char key[600], ver[32];
        ikey_of(ms[i], key, sizeof key, ver, sizeof ver);
        {
            int o = tx_effect((int)res[i].outcome, hdbc, key, atoi(ver), 1, ms[i]->store, res[i].error, sizeof res[i].error);
            res[i].outcome = (ibx_outcome)o;
        }
        log_end(key, (int)res[i].outcome);
    }
}
typedef char soak_conflict_same[(int)OBX_CONFLICT == (int)IBX_CONFLICT && (int)OBX_DONE == (int)IBX_DONE ? 1 : -1];

/* Allocation failure in one process (dispatcher 0): one call in
 * SOAK_OOM_RATE (default 300; 0: none) fails, on every thread, the lease
 * renewal's included. Thread-safe: a shared counter, hashed. */
static uint64_t g_oom_calls;
static long g_oom_failed;
static int oom_fail(void) {
    uint64_t n = __atomic_add_fetch(&g_oom_calls, 1, __ATOMIC_RELAXED);
    soak_rng r;
    r.s = n ^ g_seed;
    if (g_oom_rate && soak_next(&r) % g_oom_rate == 0) {
        long f = __atomic_add_fetch(&g_oom_failed, 1, __ATOMIC_RELAXED);
        if (f % 50 == 1) soak_log(g_log, "OOM %ld %lld", f, (long long)tort_wall_us());
        return 1;
    }
    return 0;
}
static void *oom_alloc(size_t n, void *u) {
    (void)u;
    return oom_fail() ? NULL : malloc(n);
}
static void *oom_realloc(void *p, size_t n, void *u) {
    (void)u;
    return oom_fail() ? NULL : realloc(p, n);
}
static void oom_free(void *p, void *u) {
    (void)u;
    free(p);
}

static int64_t soak_backoff(int attempts, void *user) {
    (void)user;
    return 100 + 100 * (int64_t)attempts;
}

static int role_dispatcher(void) {
    static soak_rng rr;
    pthread_t refuser;
    g_main_thread = pthread_self();
    rr.s = soak_next(&g_rng);
    if (pthread_create(&refuser, NULL, refuser_main, &rr) == 0) pthread_detach(refuser);
    while (!g_stop) {
        if (g_inbox) {
            ibx_store *s = open_ibx(0, 0);
            ibx_dispatcher_desc d;
            ibx_dispatcher *disp = NULL;
            if (!s) { tort_sleep_ms(200); continue; }
            memset(&d, 0, sizeof d);
            d.store = s;
            d.stop_flag = &g_stop;
            d.batch_size = 5;
            d.lease_seconds = SOAK_LEASE_S;
            d.max_attempts = SOAK_MAX_ATTEMPTS;
            d.backoff = (ibx_backoff_fn)soak_backoff;
            d.poll_interval_ms = 20;
            d.idle_max_ms = 200;
            d.reap_interval_ms = 500;
            d.error_delay_ms = 200;
            d.pause_ms = 100;
            d.pause_max_ms = 400;
            if (ibx_dispatcher_create(&d, &disp) == IBX_OK && ibx_dispatcher_on(disp, "s", ihandle, NULL) == IBX_OK &&
                ibx_dispatcher_on_batch(disp, "b", ibatch, NULL) == IBX_OK &&
                ibx_dispatcher_on(disp, "poison", ipoison, NULL) == IBX_OK &&
                ibx_dispatcher_on_tx(disp, "x", itx_handle, NULL) == IBX_OK &&
                ibx_dispatcher_on_batch_tx(disp, "y", ibatch_tx, NULL) == IBX_OK)
                ibx_dispatcher_run(disp);
            ibx_dispatcher_destroy(disp);
            ibx_store_close(s);
        } else {
            obx_store *s = open_obx(0, 0);
            obx_dispatcher_desc d;
            obx_dispatcher *disp = NULL;
            if (!s) { tort_sleep_ms(200); continue; }
            memset(&d, 0, sizeof d);
            d.store = s;
            d.stop_flag = &g_stop;
            d.batch_size = 5;
            d.lease_seconds = SOAK_LEASE_S;
            d.max_attempts = SOAK_MAX_ATTEMPTS;
            d.backoff = soak_backoff;
            d.poll_interval_ms = 20;
            d.idle_max_ms = 200;
            d.reap_interval_ms = 500;
            d.error_delay_ms = 200;
            d.pause_ms = 100;
            d.pause_max_ms = 400;
            if (obx_dispatcher_create(&d, &disp) == OBX_OK && obx_dispatcher_on(disp, "s", ohandle, NULL) == OBX_OK &&
                obx_dispatcher_on_batch(disp, "b", obatch, NULL) == OBX_OK &&
                obx_dispatcher_on(disp, "poison", opoison, NULL) == OBX_OK &&
                obx_dispatcher_on_tx(disp, "x", otx_handle, NULL) == OBX_OK &&
                obx_dispatcher_on_batch_tx(disp, "y", obatch_tx, NULL) == OBX_OK &&
                obx_dispatcher_on(disp, "cont", ohandle, NULL) == OBX_OK &&
                obx_dispatcher_on(disp, "join.wait", obx_join_wait_handler, NULL) == OBX_OK)
                obx_dispatcher_run(disp);
            obx_dispatcher_destroy(disp);
            obx_store_close(s);
        }
    }
    return 0;
}

/* ---- producer --------------------------------------------------------------------------
 * Outbox log: I TAG OKEY MODE EXP T   about to enqueue (MODE s single, b batch,
 *                                     t in a transaction; EXP p past, f future, -)
 *             C TAG ID T              committed (enqueue returned OK / COMMIT did)
 *             R TAG T                 about to roll the transaction back
 *             F TAG RC T              refused or failed: not committed
 *             DFON T / DFOFF T        disk full (SQLite) begins / ends for this
 *                                     producer's transactions
 *             DF TAG T                the F before it failed while the disk was full
 *             (an I without C, R or F: unknown, e.g. killed in between)
 * Inbox log:  I KEY VER T             about to deliver content VER of KEY (source/id)
 *             A KEY VER ENQUEUED T    ibx_enqueue returned OK (*enqueued)
 *             F KEY VER RC T          it failed */

static int exec_sql(tort_db *db, const char *sql) {
    char err[600];
    if (tort_db_query(db, sql, NULL, 0, err, sizeof err) != 0) {
        if (getenv("SOAK_VERBOSE")) fprintf(stderr, "soak: %s: %s\n", sql, err);
        return -1;
    }
    return 0;
}
static int end_tx(tort_db *db, int commit) {
    if (is_sqlite()) return exec_sql(db, commit ? "COMMIT" : "ROLLBACK");
    return SQL_SUCCEEDED(SQLEndTran(SQL_HANDLE_DBC, db->dbc, commit ? SQL_COMMIT : SQL_ROLLBACK)) ? 0 : -1;
}
static int connect_tx(tort_db *db) {
    char err[600];
    if (tort_db_open(db, g_conn, err, sizeof err) != 0) return -1;
    if (is_sqlite()) return 0;
    SQLSetConnectAttr(db->dbc, SQL_ATTR_AUTOCOMMIT, (SQLPOINTER)SQL_AUTOCOMMIT_OFF, 0);
    /* as obx_enqueue_tx asks of keyed messages (MariaDB refuses its default REPEATABLE READ) */
    SQLSetConnectAttr(db->dbc, SQL_ATTR_TXN_ISOLATION, (SQLPOINTER)SQL_TXN_READ_COMMITTED, 0);
    return 0;
}
static int conn_dead(tort_db *db) {
    SQLUINTEGER dead = 0;
    return SQL_SUCCEEDED(SQLGetConnectAttr(db->dbc, SQL_ATTR_CONNECTION_DEAD, &dead, 0, NULL)) && dead == SQL_CD_TRUE;
}

#define SOAK_MAX_PENDING 400 /* the producers' stores' bound: the load reaches it */
#define SOAK_MAX_PENDING_TIGHT 20 /* a store of each producer with a tight bound, used for 5 %
                                     of its single enqueues: met on every backend (FULL) */
/* The checker reads refusals as logged numbers (it includes neither header). */
typedef char soak_full_is_obx_full[SOAK_ERR_FULL == (int)OBX_ERR_FULL && SOAK_ERR_FULL == (int)IBX_ERR_FULL ? 1 : -1];
typedef char soak_transient_is_obx_transient[SOAK_RC_TRANSIENT == (int)OBX_ERR_DB_TRANSIENT &&
                                             SOAK_RC_TRANSIENT == (int)IBX_ERR_DB_TRANSIENT ? 1 : -1];

static void fill_new(obx_new_message *m, char *payload, size_t pcap, const char *tag, char *okey, size_t kcap,
                     char *exp) {
    int64_t now = tort_wall_us() / 1000;
    memset(m, 0, sizeof *m);
    okey[0] = 0;
    if (soak_pct(&g_rng, 60)) snprintf(okey, kcap, "k%d", soak_below(&g_rng, SOAK_KEYS));
    snprintf(payload, pcap, "%.40s %08llx", tag, (unsigned long long)(soak_next(&g_rng) & 0xffffffffULL));
    m->topic = soak_pct(&g_rng, 70) ? "s" : "b";
    if (soak_pct(&g_rng, 20)) m->topic = soak_pct(&g_rng, 50) ? "x" : "y"; /* transactional handlers */
    if (soak_below(&g_rng, 1000) < 3) m->topic = "poison";
    m->payload = payload;
    m->payload_len = OBX_NTS;
    m->ordering_key = okey[0] ? okey : NULL;
    *exp = '-';
    if (soak_pct(&g_rng, 3)) {
        m->expires_utc_ms = now - 60000; /* in the past: never handled, Dead "expired" */
        *exp = 'p';
    } else if (soak_pct(&g_rng, 5)) {
        m->expires_utc_ms = now + 3600000; /* in the future */
        *exp = 'f';
    }
    if (soak_pct(&g_rng, 30)) m->priority = soak_below(&g_rng, 11) - 5; /* priority: -5..5 */
    if (soak_pct(&g_rng, 10)) { /* the envelope */
        m->tenant_id = "t1";
        m->aggregate_type = "order";
        m->aggregate_id = tag;
    }
}

/* A join (outbox): 2 or 3 members enqueued and attached (some settled
 * before their attach), a join.wait whose follow-up ("cont" topic, payload
 * "<JTAG>-ok" or "<JTAG>-fail") is enqueued when all steps are in; a quarter
 * cancelled. Log: J JTAG JOINID STEPS T | JA JTAG TAG RC T | JW JTAG RC T |
 * JC JTAG RC T (cancel: RC 0 cancelled, else it had finished). Members are
 * logged as any message (I, C). */
static void join_op(obx_store *s, int id, int inc, long *seq) {
    char jtag[48], jid[37], okp[64], failp[64];
    int steps = 2 + soak_below(&g_rng, 2), i, ok = 1;
    obx_join_wait w;
    obx_result r;
    snprintf(jtag, sizeof jtag, "J%d.%d.%ld", id, inc, ++*seq);
    if (obx_join_start(s, NULL, steps, NULL, jid) != OBX_OK) return;
    soak_log(g_log, "J %s %s %d %lld", jtag, jid, steps, (long long)tort_wall_us());
    for (i = 0; i < steps && ok; i++) {
        obx_new_message m;
        char payload[64], okey[16], tag[48], mid[37], exp;
        snprintf(tag, sizeof tag, "P%d.%d.%ld", id, inc, ++*seq);
        fill_new(&m, payload, sizeof payload, tag, okey, sizeof okey, &exp);
        m.expires_utc_ms = 0;
        exp = '-';
        if (strcmp(m.topic, "poison") == 0) m.topic = "s";
        soak_log(g_log, "I %s %s s %c %lld", tag, okey[0] ? okey : "-", exp, (long long)tort_wall_us());
        r = obx_enqueue(s, &m, mid);
        if (r != OBX_OK) {
            if (r != OBX_ERR_DB_TRANSIENT && r != OBX_ERR_DB) soak_log(g_log, "F %s %d %lld", tag, (int)r, (long long)tort_wall_us());
            ok = 0;
            break;
        }
        soak_log(g_log, "C %s %s %lld", tag, mid, (long long)tort_wall_us());
        if (soak_pct(&g_rng, 30)) tort_sleep_ms(20 + soak_below(&g_rng, 200)); /* settled before its attach, maybe */
        r = obx_join_attach(s, jid, mid);
        soak_log(g_log, "JA %s %s %d %lld", jtag, tag, (int)r, (long long)tort_wall_us());
        ok = r == OBX_OK;
    }
    if (!ok) return;
    memset(&w, 0, sizeof w);
    snprintf(okp, sizeof okp, "%s-ok 0", jtag);
    snprintf(failp, sizeof failp, "%s-fail 0", jtag);
    w.join_id = jid;
    w.fail_if_any_step_failed = 1;
    w.on_complete_topic = "cont";
    w.on_complete_payload = okp;
    w.on_fail_topic = "cont";
    w.on_fail_payload = failp;
    r = obx_join_enqueue_wait(s, NULL, &w, NULL);
    soak_log(g_log, "JW %s %d %lld", jtag, (int)r, (long long)tort_wall_us());
    if (r == OBX_OK && soak_pct(&g_rng, 25)) {
        tort_sleep_ms(soak_below(&g_rng, 300));
        soak_log(g_log, "JC- %s %lld", jtag, (long long)tort_wall_us());
        r = obx_join_cancel(s, jid);
        soak_log(g_log, "JC %s %d %lld", jtag, (int)r, (long long)tort_wall_us());
    }
}

static int role_producer_obx(int id, int inc) {
    tort_db db;
    obx_store *s = open_obx(0, SOAK_MAX_PENDING), *ts[3] = {NULL, NULL, NULL}, *tight = NULL;
    long seq = 0;
    int have_db = connect_tx(&db) == 0, disk_full = 0;
    if (!s || !have_db) return 1;
    while (!g_stop) {
        int mode = soak_below(&g_rng, 100), n = 1, i;
        obx_new_message ms[6];
        char payload[6][64], okey[6][16], tag[6][48], ids[6][37], exp[6];
        char mc = mode < 35 ? 's' : mode < 55 ? 'b' : 't';
        obx_result r;
        if (soak_pct(&g_rng, 4)) {
            join_op(s, id, inc, &seq);
            continue;
        }
        int tenant = mc != 't' && g_ntenants > 1 && soak_pct(&g_rng, 15) ? 1 + soak_below(&g_rng, g_ntenants - 1) : 0;
        obx_store *st = s;
        if (tenant > 0) {
            if (!ts[tenant]) ts[tenant] = open_obx_on(g_tconn[tenant], 0, SOAK_MAX_PENDING);
            if (!ts[tenant]) { tort_sleep_ms(100); continue; }
            st = ts[tenant];
        }
        if (mc == 'b') n = 2 + soak_below(&g_rng, 4);
        if (mc == 's' && tenant == 0 && soak_pct(&g_rng, 5)) {
            if (!tight) tight = open_obx(0, SOAK_MAX_PENDING_TIGHT);
            if (tight) st = tight;
        }
        for (i = 0; i < n; i++) {
            if (tenant > 0) snprintf(tag[i], sizeof tag[i], "P%d.%d.%ld@%d", id, inc, ++seq, tenant);
            else snprintf(tag[i], sizeof tag[i], "P%d.%d.%ld", id, inc, ++seq);
            fill_new(&ms[i], payload[i], sizeof payload[i], tag[i], okey[i], sizeof okey[i], &exp[i]);
            soak_log(g_log, "I %s %s %c %c %lld", tag[i], okey[i][0] ? okey[i] : "-", mc, exp[i], (long long)tort_wall_us());
        }
        if (mc == 's' || mc == 'b') {
            r = mc == 's' ? obx_enqueue(st, &ms[0], ids[0]) : obx_enqueue_batch(st, NULL, ms, n, ids);
            for (i = 0; i < n; i++) {
                if (r == OBX_OK) soak_log(g_log, "C %s %s %lld", tag[i], ids[i], (long long)tort_wall_us());
                else if (r != OBX_ERR_DB_TRANSIENT && r != OBX_ERR_DB) /* a lost commit's outcome is unknown */
                    soak_log(g_log, "F %s %d %lld", tag[i], (int)r, (long long)tort_wall_us());
            }
            if (r == OBX_ERR_FULL) tort_sleep_ms(50);
        } else {
            char sql[256];
            int ok = 1, rollback = soak_pct(&g_rng, 25);
            if (!have_db) {
                have_db = connect_tx(&db) == 0;
                if (!have_db) { tort_sleep_ms(100); continue; }
            }
            /* Disk full (SQLite): for a while this connection may not grow
             * the file (max_page_count at its size, as tests/torture/diskfull.c):
             * its transactions fail, DF TAG T, and must change nothing. */
            if (is_sqlite() && !disk_full && soak_pct(&g_rng, 3)) {
                long long pages = tort_db_scalar(&db, "PRAGMA page_count");
                snprintf(sql, sizeof sql, "PRAGMA max_page_count = %lld", pages > 0 ? pages : 1);
                if (pages > 0 && exec_sql(&db, sql) == 0) {
                    disk_full = 5 + soak_below(&g_rng, 20);
                    soak_log(g_log, "DFON %lld", (long long)tort_wall_us());
                }
            } else if (disk_full > 0 && --disk_full == 0) {
                exec_sql(&db, "PRAGMA max_page_count = 1073741823");
                soak_log(g_log, "DFOFF %lld", (long long)tort_wall_us());
            }
            if (is_sqlite()) ok = exec_sql(&db, "BEGIN IMMEDIATE") == 0;
            snprintf(sql, sizeof sql, "INSERT INTO soak_biz (tag) VALUES ('%s')", tag[0]);
            ok = ok && exec_sql(&db, sql) == 0;
            r = ok ? obx_enqueue_tx(s, db.dbc, &ms[0], ids[0]) : OBX_ERR_DB;
            /* Overlapping producers of one key (issue 25 items 1-2): on the
             * servers, a keyed transaction is held open a while after its
             * enqueue, so that others of its key commit and are claimed before
             * it (its smaller Id sorts first once it commits). SQLite has one
             * writer: a held transaction would only stall the others. */
            if (ok && r == OBX_OK && okey[0][0] && !is_sqlite() && soak_pct(&g_rng, 40))
                tort_sleep_ms(20 + soak_below(&g_rng, 300));
            if (!ok || r != OBX_OK || rollback) {
                if (ok && r == OBX_OK) soak_log(g_log, "R %s %lld", tag[0], (long long)tort_wall_us());
                else soak_log(g_log, "F %s %d %lld", tag[0], (int)r, (long long)tort_wall_us());
                if (disk_full && (!ok || (r != OBX_OK && r != OBX_ERR_FULL))) soak_log(g_log, "DF %s %lld", tag[0], (long long)tort_wall_us());
                end_tx(&db, 0);
            } else if (end_tx(&db, 1) == 0) {
                soak_log(g_log, "C %s %s %lld", tag[0], ids[0], (long long)tort_wall_us());
                obx_notify(s);
            } else {
                end_tx(&db, 0); /* the commit's outcome is unknown: the business row says */
            }
            if (conn_dead(&db)) {
                tort_db_close(&db);
                have_db = 0;
            }
        }
        tort_sleep_ms(5 + soak_below(&g_rng, 20));
    }
    obx_store_close(s);
    obx_store_close(tight);
    obx_store_close(ts[1]);
    obx_store_close(ts[2]);
    if (have_db) tort_db_close(&db);
    return 0;
}

typedef struct idelivery {
    char mid[64];
    int src, ver, tenant;
    long nonce; /* the content of version ver */
} idelivery;

static int role_producer_ibx(int id, int inc) {
    ibx_store *ts[3] = {NULL, NULL, NULL}, *s, *tight = NULL;
    idelivery recent[32];
    int nrecent = 0;
    long seq = 0;
    ts[0] = open_ibx(0, SOAK_MAX_PENDING);
    if (!ts[0]) return 1;
    while (!g_stop) {
        idelivery *d;
        ibx_new_message m;
        char src[16], key[96], payload[160];
        int enq = -1;
        ibx_result r;
        /* Half the deliveries repeat a recent one: half of those with the
         * same content (the sender did not see our 200), half changed. */
        if (nrecent > 0 && soak_pct(&g_rng, 50)) {
            d = &recent[soak_below(&g_rng, nrecent)];
            if (soak_pct(&g_rng, 50)) {
                d->ver++;
                d->nonce = (long)(soak_next(&g_rng) & 0xffffff);
            }
        } else {
            d = nrecent < 32 ? &recent[nrecent++] : &recent[soak_below(&g_rng, 32)];
            d->tenant = g_ntenants > 1 && soak_pct(&g_rng, 15) ? 1 + soak_below(&g_rng, g_ntenants - 1) : 0;
            if (d->tenant) snprintf(d->mid, sizeof d->mid, "P%d.%d.%ld@%d", id, inc, ++seq, d->tenant);
            else snprintf(d->mid, sizeof d->mid, "P%d.%d.%ld", id, inc, ++seq);
            d->src = soak_below(&g_rng, SOAK_SOURCES);
            d->ver = 1;
            d->nonce = (long)(soak_next(&g_rng) & 0xffffff);
        }
        if (!ts[d->tenant]) ts[d->tenant] = open_ibx_on(g_tconn[d->tenant], 0, SOAK_MAX_PENDING);
        if (!(s = ts[d->tenant])) { tort_sleep_ms(100); continue; }
        if (d->tenant == 0 && soak_pct(&g_rng, 5)) { /* the tight bound (FULL) */
            if (!tight) tight = open_ibx(0, SOAK_MAX_PENDING_TIGHT);
            if (tight) s = tight;
        }
        snprintf(src, sizeof src, "s%d", d->src);
        snprintf(key, sizeof key, "%s/%s", src, d->mid);
        snprintf(payload, sizeof payload, "%s v%d %06lx", key, d->ver, d->nonce);
        memset(&m, 0, sizeof m);
        m.topic = d->nonce % 300 == 7 ? "poison" : (d->nonce & 3) == 0 ? "b" : (d->nonce >> 2) % 5 == 0 ? ((d->nonce >> 5) & 1 ? "x" : "y") : "s";
        m.source = src;
        m.message_id = d->mid;
        m.payload = payload;
        m.payload_len = IBX_NTS;
        if (d->nonce % 3 == 0) m.priority = (int)(d->nonce % 11) - 5; /* priority: -5..5 */
        soak_log(g_log, "I %s %d %lld", key, d->ver, (long long)tort_wall_us());
        r = ibx_enqueue(s, &m, &enq);
        if (r == IBX_OK) soak_log(g_log, "A %s %d %d %lld", key, d->ver, enq, (long long)tort_wall_us());
        else if (r != IBX_ERR_DB_TRANSIENT && r != IBX_ERR_DB)
            soak_log(g_log, "F %s %d %d %lld", key, d->ver, (int)r, (long long)tort_wall_us());
        if (r == IBX_ERR_FULL) tort_sleep_ms(50);
        tort_sleep_ms(5 + soak_below(&g_rng, 20));
    }
    ibx_store_close(ts[0]);
    ibx_store_close(tight);
    ibx_store_close(ts[1]);
    ibx_store_close(ts[2]);
    return 0;
}

/* ---- provider ---------------------------------------------------------------------------
 * One dispatcher over a provider whose discovery reads DIR/tenants ("id|conn"
 * lines), which the orchestrator rewrites during the run: tenants removed,
 * added back, their connection string changed, while long handlers run. Its
 * handlings are logged as a dispatcher's. */

static char g_tfile[64][1024];

static int read_tenants(const char **ids, const char **conns, int cap) {
    char path[1200];
    FILE *f;
    int n = 0;
    snprintf(path, sizeof path, "%s/tenants", g_dir);
    f = fopen(path, "r");
    if (!f) return -1;
    while (n < cap && n < 64 && fgets(g_tfile[n], sizeof g_tfile[n], f)) {
        char *bar = strchr(g_tfile[n], '|');
        g_tfile[n][strcspn(g_tfile[n], "\n")] = 0;
        if (!bar) continue;
        *bar = 0;
        ids[n] = g_tfile[n];
        conns[n] = bar + 1;
        n++;
    }
    fclose(f);
    return n;
}
static int odiscover(obx_database *out, int cap, void *user) {
    const char *ids[64], *conns[64];
    int n = read_tenants(ids, conns, cap < 64 ? cap : 64), i;
    (void)user;
    for (i = 0; i < n; i++) {
        out[i].id = ids[i];
        out[i].connection_string = conns[i];
    }
    return n;
}
static int idiscover(ibx_database *out, int cap, void *user) {
    const char *ids[64], *conns[64];
    int n = read_tenants(ids, conns, cap < 64 ? cap : 64), i;
    (void)user;
    for (i = 0; i < n; i++) {
        out[i].id = ids[i];
        out[i].connection_string = conns[i];
    }
    return n;
}

static int role_provider(void) {
    while (!g_stop) {
        if (g_inbox) {
            ibx_provider_desc pd;
            ibx_provider *p = NULL;
            ibx_dispatcher_desc d;
            ibx_dispatcher *disp = NULL;
            memset(&pd, 0, sizeof pd);
            pd.store.table = g_table;
            pd.store.max_starts = SOAK_MAX_STARTS;
            pd.store.hooks.logger.log = ilib_log;
            pd.discover = idiscover;
            pd.refresh_interval_ms = 500;
            if (ibx_provider_create(&pd, &p) != IBX_OK && !p) { tort_sleep_ms(200); continue; }
            memset(&d, 0, sizeof d);
            d.provider = p;
            d.stop_flag = &g_stop;
            d.batch_size = 5;
            d.lease_seconds = SOAK_LEASE_S;
            d.max_attempts = SOAK_MAX_ATTEMPTS;
            d.backoff = soak_backoff;
            d.poll_interval_ms = 20;
            d.idle_max_ms = 200;
            d.reap_interval_ms = 500;
            d.error_delay_ms = 200;
            d.pause_ms = 100;
            d.pause_max_ms = 400;
            if (ibx_dispatcher_create(&d, &disp) == IBX_OK && ibx_dispatcher_on(disp, "s", ihandle, NULL) == IBX_OK &&
                ibx_dispatcher_on_batch(disp, "b", ibatch, NULL) == IBX_OK &&
                ibx_dispatcher_on(disp, "poison", ipoison, NULL) == IBX_OK &&
                ibx_dispatcher_on_tx(disp, "x", itx_handle, NULL) == IBX_OK &&
                ibx_dispatcher_on_batch_tx(disp, "y", ibatch_tx, NULL) == IBX_OK)
                ibx_dispatcher_run(disp);
            ibx_dispatcher_destroy(disp);
            ibx_provider_destroy(p);
        } else {
            obx_provider_desc pd;
            obx_provider *p = NULL;
            obx_dispatcher_desc d;
            obx_dispatcher *disp = NULL;
            memset(&pd, 0, sizeof pd);
            pd.store.table = g_table;
            pd.store.max_starts = SOAK_MAX_STARTS;
            pd.store.hooks.logger.log = lib_log;
            pd.discover = odiscover;
            pd.refresh_interval_ms = 500;
            if (obx_provider_create(&pd, &p) != OBX_OK && !p) { tort_sleep_ms(200); continue; }
            memset(&d, 0, sizeof d);
            d.provider = p;
            d.stop_flag = &g_stop;
            d.batch_size = 5;
            d.lease_seconds = SOAK_LEASE_S;
            d.max_attempts = SOAK_MAX_ATTEMPTS;
            d.backoff = soak_backoff;
            d.poll_interval_ms = 20;
            d.idle_max_ms = 200;
            d.reap_interval_ms = 500;
            d.error_delay_ms = 200;
            d.pause_ms = 100;
            d.pause_max_ms = 400;
            if (obx_dispatcher_create(&d, &disp) == OBX_OK && obx_dispatcher_on(disp, "s", ohandle, NULL) == OBX_OK &&
                obx_dispatcher_on_batch(disp, "b", obatch, NULL) == OBX_OK &&
                obx_dispatcher_on(disp, "poison", opoison, NULL) == OBX_OK &&
                obx_dispatcher_on_tx(disp, "x", otx_handle, NULL) == OBX_OK &&
                obx_dispatcher_on_batch_tx(disp, "y", obatch_tx, NULL) == OBX_OK)
                obx_dispatcher_run(disp);
            obx_dispatcher_destroy(disp);
            obx_provider_destroy(p);
        }
    }
    return 0;
}

/* The orchestrator's side: a new tenant list, written whole and renamed
 * into place. all: every tenant with its own connection string (the drain). */
static void write_tenants(int all) {
    char path[1200], tmp[1200];
    FILE *f;
    int i;
    snprintf(path, sizeof path, "%s/tenants", g_dir);
    snprintf(tmp, sizeof tmp, "%s/tenants.tmp", g_dir);
    f = fopen(tmp, "w");
    if (!f) return;
    for (i = 0; i < g_ntenants; i++) {
        int in = all || soak_pct(&g_rng, 70), changed = !all && soak_pct(&g_rng, 30);
        /* A changed connection string: the same database, a trailing ';'
         * (the provider sees a new string: it closes the store and opens
         * another, while the dispatcher's handlers may run on the old). */
        if (in) fprintf(f, "t%d|%s%s\n", i, g_tconn[i], changed ? ";" : "");
    }
    fclose(f);
    rename(tmp, path);
    soak_log(g_orch, "TENANTS %s %lld", all ? "all" : "changed", (long long)tort_wall_us());
}

/* ---- operator ---------------------------------------------------------------------------
 * What operators do, during the run, through the API and the obxctl tool:
 * dead list, replay and purge of one message (by id) or of a topic, reap,
 * cleanup, deploy, stats and metrics. Log:
 *   RP KEY T0 VIA  / RPD KEY N RC T1    replay of one message (VIA api, tool, race: op_race):
 *                                       N replayed (tool: exit 0 = 1, 3 = 0)
 *   PG KEY T0 VIA  / PGD KEY N RC T1    purge of one message
 *   RA TOPIC T0    / RAD TOPIC N RC T1  replay of every dead message of a topic
 *   O WHAT RC T                         reap, cleanup, deploy, stats, metrics */

static const char *g_obxctl;
static int ri(ibx_result r) { return (int)r; }
static int ro(obx_result r) { return (int)r; }

/* obxctl with the run's connection and table, then `args`; its exit status
 * (-1 when it could not run). */
static int tool(const char *a1, const char *a2, const char *a3, const char *a4, const char *a5) {
    const char *argv[16];
    int n = 0, st;
    pid_t pid;
    if (!g_obxctl) return -1;
    argv[n++] = g_obxctl;
    argv[n++] = "-c";
    argv[n++] = g_conn;
    argv[n++] = "--table";
    argv[n++] = g_table;
    if (g_inbox) argv[n++] = "--inbox";
    if (a1) argv[n++] = a1;
    if (a2) argv[n++] = a2;
    if (a3) argv[n++] = a3;
    if (a4) argv[n++] = a4;
    if (a5) argv[n++] = a5;
    argv[n] = NULL;
    pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(g_obxctl, (char *const *)(uintptr_t)argv);
        _exit(127);
    }
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* One dead message, picked at random from the first page: its key, its
 * id (outbox) or source and id (inbox). Returns 0 when there is one. */
static int pick_dead(obx_store *os, ibx_store *is, char *key, size_t kcap, char *id, size_t icap, char *src,
                     size_t scap) {
    int count = 0, i;
    /* Half the time a crash-loop one: its start count must start again. */
    const char *contains = soak_pct(&g_rng, 50) ? "crash loop" : NULL;
    if (g_inbox) {
        const ibx_message *ms = NULL;
        ibx_dead_filter f;
        memset(&f, 0, sizeof f);
        f.error_contains = contains;
        if (ibx_dead_list(is, &f, 0, 20, &ms, &count) != IBX_OK || count < 1) return -1;
        i = soak_below(&g_rng, count);
        snprintf(key, kcap, "%s/%s", ms[i].source, ms[i].message_id);
        snprintf(id, icap, "%s", ms[i].message_id);
        snprintf(src, scap, "%s", ms[i].source);
    } else {
        const obx_message *ms = NULL;
        obx_dead_filter f;
        memset(&f, 0, sizeof f);
        f.error_contains = contains;
        if (obx_dead_list(os, &f, 0, 20, &ms, &count) != OBX_OK || count < 1) return -1;
        i = soak_below(&g_rng, count);
        okey_of(&ms[i], key, kcap);
        snprintf(id, icap, "%s", ms[i].id);
        src[0] = 0;
    }
    return 0;
}

static void op_one(obx_store *os, ibx_store *is, int purge, int via_tool) {
    char key[600], id[300], src[300];
    int64_t n = 0;
    int rc;
    if (pick_dead(os, is, key, sizeof key, id, sizeof id, src, sizeof src) != 0) return;
    soak_log(g_log, "%s %s %lld %s", purge ? "PG" : "RP", key, (long long)tort_wall_us(), via_tool ? "tool" : "api");
    if (via_tool) {
        rc = g_inbox ? tool("dead", purge ? "purge" : "replay", "--source", src, id)
                     : tool("dead", purge ? "purge" : "replay", id, NULL, NULL);
        n = rc == 0 ? 1 : 0;
    } else if (g_inbox) {
        ibx_dead_filter f;
        memset(&f, 0, sizeof f);
        f.source = src;
        f.message_id = id;
        rc = purge ? ri(ibx_dead_purge(is, &f, &n)) : ri(ibx_dead_replay(is, &f, &n));
    } else {
        obx_dead_filter f;
        memset(&f, 0, sizeof f);
        f.id = id;
        rc = purge ? ro(obx_dead_purge(os, &f, &n)) : ro(obx_dead_replay(os, &f, &n));
    }
    soak_log(g_log, "%s %s %lld %d %lld", purge ? "PGD" : "RPD", key, (long long)n, rc, (long long)tort_wall_us());
}

/* Purges during replays (issue 25 item 6): up to 8 dead messages, each
 * replayed by one thread and purged by another at the same moment (a
 * barrier before each pair), on two stores. One of the two wins per
 * message: a purge that meets the replay's commit must leave the replayed
 * message alone (else it is lost: REPLAY-UNHANDLED, or PURGE-LIVE when a
 * handler had it). Logged as the one-message replays and purges (RP/RPD,
 * PG/PGD, VIA race). */
typedef struct race_side {
    obx_store *os;
    ibx_store *is;
    int purge, n;
    char key[8][600], id[8][300], src[8][300];
    pthread_barrier_t *bar;
} race_side;

static void *race_run(void *v) {
    race_side *rs = (race_side *)v;
    int i;
    for (i = 0; i < rs->n; i++) {
        int64_t n = 0;
        int rc;
        pthread_barrier_wait(rs->bar);
        soak_log(g_log, "%s %s %lld race", rs->purge ? "PG" : "RP", rs->key[i], (long long)tort_wall_us());
        if (g_inbox) {
            ibx_dead_filter f;
            memset(&f, 0, sizeof f);
            f.source = rs->src[i];
            f.message_id = rs->id[i];
            rc = rs->purge ? ri(ibx_dead_purge(rs->is, &f, &n)) : ri(ibx_dead_replay(rs->is, &f, &n));
        } else {
            obx_dead_filter f;
            memset(&f, 0, sizeof f);
            f.id = rs->id[i];
            rc = rs->purge ? ro(obx_dead_purge(rs->os, &f, &n)) : ro(obx_dead_replay(rs->os, &f, &n));
        }
        soak_log(g_log, "%s %s %lld %d %lld", rs->purge ? "PGD" : "RPD", rs->key[i], (long long)n, rc, (long long)tort_wall_us());
    }
    return NULL;
}

static void op_race(obx_store *os, ibx_store *is, obx_store **os2, ibx_store **is2) {
    static race_side rp, pg;
    pthread_barrier_t bar;
    pthread_t th;
    int count = 0, i;
    if (g_inbox ? (!*is2 && !(*is2 = open_ibx(0, 0))) : (!*os2 && !(*os2 = open_obx(0, 0)))) return;
    memset(&rp, 0, sizeof rp);
    if (g_inbox) {
        const ibx_message *ms = NULL;
        ibx_dead_filter f;
        memset(&f, 0, sizeof f);
        if (ibx_dead_list(is, &f, soak_below(&g_rng, 10), 8, &ms, &count) != IBX_OK) return;
        for (i = 0; i < count && i < 8; i++) {
            snprintf(rp.key[i], sizeof rp.key[i], "%s/%s", ms[i].source, ms[i].message_id);
            snprintf(rp.id[i], sizeof rp.id[i], "%s", ms[i].message_id);
            snprintf(rp.src[i], sizeof rp.src[i], "%s", ms[i].source);
        }
    } else {
        const obx_message *ms = NULL;
        obx_dead_filter f;
        memset(&f, 0, sizeof f);
        if (obx_dead_list(os, &f, soak_below(&g_rng, 10), 8, &ms, &count) != OBX_OK) return;
        for (i = 0; i < count && i < 8; i++) {
            okey_of(&ms[i], rp.key[i], sizeof rp.key[i]);
            snprintf(rp.id[i], sizeof rp.id[i], "%s", ms[i].id);
        }
    }
    if (count < 1) return;
    rp.n = count < 8 ? count : 8;
    pg = rp;
    rp.os = os;
    rp.is = is;
    pg.os = *os2;
    pg.is = *is2;
    pg.purge = 1;
    rp.bar = pg.bar = &bar;
    if (pthread_barrier_init(&bar, NULL, 2) != 0) return;
    if (pthread_create(&th, NULL, race_run, &pg) == 0) {
        race_run(&rp);
        pthread_join(th, NULL);
    }
    pthread_barrier_destroy(&bar);
}

static void op_topic(obx_store *os, ibx_store *is) {
    const char *topic = soak_pct(&g_rng, 50) ? "s" : "b";
    int64_t n = 0;
    int rc;
    soak_log(g_log, "RA %s %lld", topic, (long long)tort_wall_us());
    if (g_inbox) {
        ibx_dead_filter f;
        memset(&f, 0, sizeof f);
        f.topic = topic;
        rc = ri(ibx_dead_replay(is, &f, &n));
    } else {
        obx_dead_filter f;
        memset(&f, 0, sizeof f);
        f.topic = topic;
        rc = ro(obx_dead_replay(os, &f, &n));
    }
    soak_log(g_log, "RAD %s %lld %d %lld", topic, (long long)n, rc, (long long)tort_wall_us());
}

static int role_operator(void) {
    obx_store *os = NULL, *os2 = NULL;
    ibx_store *is = NULL, *is2 = NULL;
    static char metrics[65536];
    while (!g_stop) {
        int a = soak_below(&g_rng, 100), rc = 0;
        const char *what = NULL;
        if (!os && !is) {
            if (g_inbox) is = open_ibx(0, 0);
            else os = open_obx(0, 0);
            if (!os && !is) { tort_sleep_ms(200); continue; }
        }
        if (a < 8) op_race(os, is, &os2, &is2);
        else if (a < 22) op_one(os, is, 0, 0);
        else if (a < 34) op_one(os, is, 1, 0);
        else if (a < 42) op_one(os, is, 0, 1);
        else if (a < 46) op_one(os, is, 1, 1);
        else if (a < 52) op_topic(os, is);
        else if (a < 60) {
            what = "reap";
            rc = g_inbox ? ri(ibx_reap(is, NULL)) : ro(obx_reap(os, NULL));
        } else if (a < 64) {
            what = "reap-tool";
            rc = tool("reap", NULL, NULL, NULL, NULL);
        } else if (a < 70) {
            what = "cleanup";
            rc = g_inbox ? ri(ibx_cleanup(is, 3000, 0, NULL)) : ro(obx_cleanup(os, 3000, 0, NULL));
        } else if (a < 72) {
            what = "cleanup-tool";
            rc = tool("cleanup", "--older-than", "3s", NULL, NULL);
        } else if (a < 75) {
            what = "deploy";
            if (g_inbox) {
                ibx_store *d = open_ibx(1, 0);
                rc = d ? 0 : -1;
                ibx_store_close(d);
            } else {
                obx_store *d = open_obx(1, 0);
                rc = d ? 0 : -1;
                obx_store_close(d);
            }
        } else if (a < 77) {
            what = "deploy-tool";
            rc = tool("deploy", NULL, NULL, NULL, NULL);
        } else if (a < 85) {
            int64_t ready = 0, oldest = 0;
            what = "stats";
            rc = g_inbox ? ri(ibx_queue_stats(is, &ready, &oldest)) : ro(obx_queue_stats(os, &ready, &oldest));
        } else if (a < 90) {
            what = "metrics";
            rc = g_inbox ? ri(ibx_metrics_text(is, metrics, sizeof metrics, NULL))
                         : ro(obx_metrics_text(os, metrics, sizeof metrics, NULL));
        } else if (a < 96) {
            what = "stats-tool";
            rc = tool("stats", "--json", NULL, NULL, NULL);
        } else {
            what = "metrics-tool";
            rc = tool("metrics", NULL, NULL, NULL, NULL);
        }
        if (what) soak_log(g_log, "O %s %d %lld", what, rc, (long long)tort_wall_us());
        tort_sleep_ms(100 + soak_below(&g_rng, 400));
    }
    obx_store_close(os);
    obx_store_close(os2);
    ibx_store_close(is);
    ibx_store_close(is2);
    return 0;
}

/* ---- orchestrator ------------------------------------------------------------------------
 * Log (orch.log): SEED N | P NAME PID T (started) | D NAME PID T HOW (died:
 * kill, term or exit<status>, signal<n>) */

typedef struct child {
    pid_t pid;
    char role[16];
    int id, inc;
    char name[32];
} child;

static char g_self[1024];

static void spawn(child *c) {
    pid_t pid;
    c->inc++;
    snprintf(c->name, sizeof c->name, "%c%d.%d", strcmp(c->role, "provider") == 0 ? 'v' : c->role[0], c->id, c->inc);
    pid = fork();
    if (pid == 0) {
        char ids[16], incs[16];
        snprintf(ids, sizeof ids, "%d", c->id);
        snprintf(incs, sizeof incs, "%d", c->inc);
        execl(g_self, g_self, c->role, ids, incs, (char *)NULL);
        _exit(127);
    }
    c->pid = pid;
    soak_log(g_orch, "P %s %d %lld", c->name, (int)pid, (long long)tort_wall_us());
}
static void died(child *c, int status, const char *how) {
    char h[32];
    if (!how) {
        if (WIFEXITED(status)) snprintf(h, sizeof h, "exit%d", WEXITSTATUS(status));
        else snprintf(h, sizeof h, "signal%d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        how = h;
    }
    soak_log(g_orch, "D %s %d %lld %s", c->name, (int)c->pid, (long long)tort_wall_us(), how);
    c->pid = 0;
}
static void kill9(child *c) {
    int st;
    if (c->pid <= 0) return;
    kill(c->pid, SIGKILL);
    waitpid(c->pid, &st, 0);
    died(c, st, "kill");
}
/* Children that ended by themselves: logged, started again when `again`. */
static void reap_children(child *cs, int n, int again) {
    int i, st;
    for (i = 0; i < n; i++) {
        if (cs[i].pid > 0 && waitpid(cs[i].pid, &st, WNOHANG) == cs[i].pid) {
            died(&cs[i], st, NULL);
            if (again) spawn(&cs[i]);
        }
    }
}
static void stop_all(child *cs, int n) {
    int i, st;
    int64_t until = tort_now_ms() + 20000;
    for (i = 0; i < n; i++)
        if (cs[i].pid > 0) kill(cs[i].pid, SIGTERM);
    for (i = 0; i < n; i++) {
        while (cs[i].pid > 0) {
            pid_t p = waitpid(cs[i].pid, &st, WNOHANG);
            if (p == cs[i].pid) {
                died(&cs[i], st, "term");
                break;
            }
            if (tort_now_ms() > until) {
                fprintf(stderr, "soak: %s did not stop within 20 s: killed\n", cs[i].name);
                kill9(&cs[i]);
                break;
            }
            tort_sleep_ms(20);
        }
    }
}

static long long unfinished1(tort_db *db);
/* What is not Done or Dead yet, over every tenant database. */
static long long unfinished(void) {
    long long n = 0;
    int i;
    /* A connection of its own each time: a database fault may have ended the last. */
    for (i = 0; i < g_ntenants && n >= 0; i++) {
        tort_db t;
        char err[600];
        long long k;
        if (tort_db_open(&t, g_tconn[i], err, sizeof err) != 0) return -1;
        k = unfinished1(&t);
        tort_db_close(&t);
        n = k < 0 ? -1 : n + k;
    }
    return n;
}
static long long unfinished1(tort_db *db) {
    char sql[512], t[160], c[64];
    if (g_inbox)
        snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM %s WHERE %s = 'Processing'",
                 soak_qtable(t, sizeof t, g_backend, 1, g_table), soak_qcol(c, sizeof c, g_backend, "Status"));
    else
        snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM %s WHERE %s IN (0, 1)",
                 soak_qtable(t, sizeof t, g_backend, 0, g_table), soak_qcol(c, sizeof c, g_backend, "Status"));
    return tort_db_scalar(db, sql);
}

/* A database fault through SOAK_FAULT_SCRIPT (tests/torture/dbfault.sh
 * BACKEND FAULT), in a child so that the kills go on meanwhile. */
static pid_t fault_start(const char *fault) {
    const char *script = getenv("SOAK_FAULT_SCRIPT");
    pid_t pid;
    if (!script || !*script) return 0;
    soak_log(g_orch, "FAULT %s %lld", fault, (long long)tort_wall_us());
    pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) dup2(fd, 1);
        execlp("bash", "bash", script, g_backend, fault, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static long env_long(const char *name, long def) {
    const char *v = getenv(name);
    return v && *v ? atol(v) : def;
}

static int orchestrate(void) {
    tort_db db;
    char err[600];
    child cs[32];
    int np = (int)env_long("SOAK_PRODUCERS", 3), nd = (int)env_long("SOAK_DISPATCHERS", 3), n = 0, i;
    int no = (int)env_long("SOAK_OPERATORS", 2);
    long seconds = env_long("SOAK_SECONDS", 30), drain_s = env_long("SOAK_DRAIN_SECONDS", 90);
    long kill_ms = env_long("SOAK_KILL_MS", 1500), kills = 0;
    int64_t end, next_kill, next_fault, next_tenants;
    long ntenant_changes = 0;
    long fault_ms = env_long("SOAK_FAULT_MS", 6000), nfaults = 0, fault_failed = 0;
    const char *faults = getenv("SOAK_FAULTS") ? getenv("SOAK_FAULTS") : "restart terminate";
    pid_t fault_pid = 0;
    char fault_name[32] = "";
    long long left = -1;
    if (np < 1 || np > 8 || nd < 1 || nd > 8 || no < 0 || no > 4) {
        fprintf(stderr, "soak: SOAK_PRODUCERS and SOAK_DISPATCHERS: 1..8, SOAK_OPERATORS: 0..4\n");
        return 2;
    }
    g_orch = soak_open_log(g_dir, "orch");
    soak_log(g_orch, "SEED %llu", (unsigned long long)g_seed);
    soak_log(g_orch, "MAX_PENDING %d %d", SOAK_MAX_PENDING, SOAK_MAX_PENDING_TIGHT);
    g_rng = soak_rng_for(g_seed, 'O', 0, 0);
    if (tort_db_open(&db, g_conn, err, sizeof err) != 0) {
        printf("soak: %s %s FAILED: cannot connect: %s\n", g_hdr, g_backend, err);
        return 1;
    }
    /* Fresh tables: the library's (deployed by an open) and the business one. */
    if (g_inbox) {
        ibx_store *s = open_ibx(1, 0);
        if (!s) { printf("soak: %s %s FAILED: cannot deploy\n", g_hdr, g_backend); return 1; }
        ibx_store_close(s);
    } else {
        obx_store *s = open_obx(1, 0);
        if (!s) { printf("soak: %s %s FAILED: cannot deploy\n", g_hdr, g_backend); return 1; }
        obx_store_close(s);
        exec_sql(&db, "DROP TABLE IF EXISTS soak_biz");
        if (exec_sql(&db, "CREATE TABLE soak_biz (tag VARCHAR(64) NOT NULL PRIMARY KEY)") != 0) {
            printf("soak: %s %s FAILED: cannot create the business table\n", g_hdr, g_backend);
            return 1;
        }
    }
    /* The transactional handlers' effects (soak_fx), in every tenant's database. */
    exec_sql(&db, "DROP TABLE IF EXISTS soak_fx");
    if (exec_sql(&db, "CREATE TABLE soak_fx (k VARCHAR(200) NOT NULL, v INT NOT NULL)") != 0) {
        printf("soak: %s %s FAILED: cannot create the effects table\n", g_hdr, g_backend);
        return 1;
    }
    for (i = 1; i < g_ntenants; i++) {
        tort_db tdb;
        if (tort_db_open(&tdb, g_tconn[i], err, sizeof err) == 0) {
            exec_sql(&tdb, "DROP TABLE IF EXISTS soak_fx");
            exec_sql(&tdb, "CREATE TABLE soak_fx (k VARCHAR(200) NOT NULL, v INT NOT NULL)");
            tort_db_close(&tdb);
        }
    }
    {
        char sql[256], t[160];
        snprintf(sql, sizeof sql, "DELETE FROM %s", soak_qtable(t, sizeof t, g_backend, g_inbox, g_table));
        exec_sql(&db, sql);
        for (i = 1; i < g_ntenants; i++) {
            tort_db tdb;
            if (g_inbox) {
                ibx_store *ts = open_ibx_on(g_tconn[i], 1, 0);
                if (!ts) { printf("soak: %s %s FAILED: cannot deploy tenant %d\n", g_hdr, g_backend, i); return 1; }
                ibx_store_close(ts);
            } else {
                obx_store *ts = open_obx_on(g_tconn[i], 1, 0);
                if (!ts) { printf("soak: %s %s FAILED: cannot deploy tenant %d\n", g_hdr, g_backend, i); return 1; }
                obx_store_close(ts);
            }
            if (tort_db_open(&tdb, g_tconn[i], err, sizeof err) == 0) {
                exec_sql(&tdb, sql);
                tort_db_close(&tdb);
            }
        }
    }
    memset(cs, 0, sizeof cs);
    for (i = 0; i < np; i++, n++) { snprintf(cs[n].role, sizeof cs[n].role, "producer"); cs[n].id = i; spawn(&cs[n]); }
    for (i = 0; i < nd; i++, n++) { snprintf(cs[n].role, sizeof cs[n].role, "dispatcher"); cs[n].id = i; spawn(&cs[n]); }
    for (i = 0; i < no; i++, n++) { snprintf(cs[n].role, sizeof cs[n].role, "operator"); cs[n].id = i; spawn(&cs[n]); }
    if (g_ntenants > 1) { /* two provider processes: killed, drained and stopped as dispatchers */
        write_tenants(1);
        for (i = 0; i < 2; i++, n++) {
            snprintf(cs[n].role, sizeof cs[n].role, "provider");
            cs[n].id = i;
            spawn(&cs[n]);
        }
    }
    end = tort_now_ms() + seconds * 1000;
    next_kill = tort_now_ms() + kill_ms / 2 + soak_below(&g_rng, (int)kill_ms);
    if (is_sqlite() || !getenv("SOAK_FAULT_SCRIPT") || fault_ms <= 0) faults = "";
    next_fault = tort_now_ms() + fault_ms / 2 + soak_below(&g_rng, (int)fault_ms);
    next_tenants = tort_now_ms() + 1000 + soak_below(&g_rng, 2000);
    while (tort_now_ms() < end && !g_stop) {
        if (g_ntenants > 1 && tort_now_ms() >= next_tenants) {
            write_tenants(0);
            ntenant_changes++;
            next_tenants = tort_now_ms() + 1000 + soak_below(&g_rng, 2000);
        }
        reap_children(cs, n, 1);
        if (faults[0] && !fault_pid && tort_now_ms() >= next_fault) {
            char list[128], *f[8], *save = NULL, *tok;
            int nf = 0;
            snprintf(list, sizeof list, "%s", faults);
            for (tok = strtok_r(list, " ,", &save); tok && nf < 8; tok = strtok_r(NULL, " ,", &save)) f[nf++] = tok;
            if (nf) {
                snprintf(fault_name, sizeof fault_name, "%s", f[soak_below(&g_rng, nf)]);
                fault_pid = fault_start(fault_name);
                nfaults += fault_pid > 0;
            }
        }
        if (fault_pid > 0) {
            int st;
            if (waitpid(fault_pid, &st, WNOHANG) == fault_pid) {
                soak_log(g_orch, "FAULTED %s %d %lld", fault_name, WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                         (long long)tort_wall_us());
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fault_failed++;
                fault_pid = 0;
                next_fault = tort_now_ms() + fault_ms / 2 + soak_below(&g_rng, (int)fault_ms);
            }
        }
        if (tort_now_ms() >= next_kill) {
            child *c = &cs[soak_below(&g_rng, n)];
            kill9(c);
            kills++;
            tort_sleep_ms(soak_below(&g_rng, 300));
            spawn(c);
            next_kill = tort_now_ms() + kill_ms / 2 + soak_below(&g_rng, (int)kill_ms);
        }
        tort_sleep_ms(20);
    }
    while (fault_pid > 0) { /* the last fault ends: the server is back */
        int st;
        if (waitpid(fault_pid, &st, 0) == fault_pid) {
            soak_log(g_orch, "FAULTED %s %d %lld", fault_name, WIFEXITED(st) ? WEXITSTATUS(st) : -1, (long long)tort_wall_us());
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fault_failed++;
        }
        fault_pid = 0;
    }
    /* Producers stop (their last transaction commits or not); the
     * dispatchers drain what is left, unharmed, within the bound. */
    stop_all(cs, np);
    stop_all(cs + np + nd, no);
    if (g_ntenants > 1) write_tenants(1);
    end = tort_now_ms() + drain_s * 1000;
    while (tort_now_ms() < end && !g_stop) {
        reap_children(cs + np, nd, 1);
        reap_children(cs + np + nd + no, n - np - nd - no, 1);
        left = unfinished();
        if (left == 0) break;
        tort_sleep_ms(500);
    }
    stop_all(cs + np, nd);
    stop_all(cs + np + nd + no, n - np - nd - no);
    soak_log(g_orch, "END kills=%ld faults=%ld unfinished=%lld", kills, nfaults, left);
    printf("soak: %s %s run: seed=%llu seconds=%ld kills=%ld db_faults=%ld (%s) tenants=%d tenant_list_changes=%ld "
           "unfinished_after_drain=%lld\n", g_hdr, g_backend, (unsigned long long)g_seed, seconds, kills, nfaults,
           faults[0] ? faults : "none", g_ntenants, ntenant_changes, left);
    if (fault_failed) {
        printf("soak: %s %s FAILED: %ld database fault(s) could not be done (see run.err)\n", g_hdr, g_backend, fault_failed);
        return 1;
    }
    tort_db_close(&db);
    return 0;
}

int main(int argc, char **argv) {
    struct sigaction sa;
    const char *seed;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (argc == 7 && strcmp(argv[1], "run") == 0) {
        ssize_t k = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
        if (k <= 0) snprintf(g_self, sizeof g_self, "%s", argv[0]);
        else g_self[k] = 0;
        seed = getenv("SOAK_SEED");
        g_seed = seed && *seed ? strtoull(seed, NULL, 10) : (uint64_t)tort_wall_us();
        {
            char s[32];
            snprintf(s, sizeof s, "%llu", (unsigned long long)g_seed);
            setenv("SOAK_SEED", s, 1);
        }
        setenv("SOAK_HDR", argv[2], 1);
        setenv("SOAK_BACKEND", argv[3], 1);
        setenv("SOAK_CONN", argv[4], 1);
        setenv("SOAK_TABLE", argv[5], 1);
        setenv("SOAK_DIR", argv[6], 1);
    } else if (argc != 4) {
        fprintf(stderr, "usage: soak run obx|ibx sqlite|postgresql|mariadb CONN TABLE DIR\n");
        return 2;
    }
    g_hdr = getenv("SOAK_HDR");
    g_backend = getenv("SOAK_BACKEND");
    g_conn = getenv("SOAK_CONN");
    g_table = getenv("SOAK_TABLE");
    g_dir = getenv("SOAK_DIR");
    g_seed = strtoull(getenv("SOAK_SEED") ? getenv("SOAK_SEED") : "1", NULL, 10);
    if (!g_hdr || !g_backend || !g_conn || !g_table || !g_dir) return 2;
    g_inbox = strcmp(g_hdr, "ibx") == 0;
    g_tconn[0] = g_conn;
    if (getenv("SOAK_CONN_1") && *getenv("SOAK_CONN_1")) g_tconn[g_ntenants++] = getenv("SOAK_CONN_1");
    if (g_ntenants == 2 && getenv("SOAK_CONN_2") && *getenv("SOAK_CONN_2")) g_tconn[g_ntenants++] = getenv("SOAK_CONN_2");
    if (strcmp(argv[1], "run") == 0) return orchestrate();
    {
        int id = atoi(argv[2]), inc = atoi(argv[3]);
        char name[32];
        snprintf(name, sizeof name, "%c%d.%d", strcmp(argv[1], "provider") == 0 ? 'v' : argv[1][0], id, inc);
        g_log = soak_open_log(g_dir, name);
        if (g_log < 0) return 3;
        g_rng = soak_rng_for(g_seed, argv[1][0], id, inc);
        if (strcmp(argv[1], "producer") == 0) return g_inbox ? role_producer_ibx(id, inc) : role_producer_obx(id, inc);
        if (strcmp(argv[1], "dispatcher") == 0) {
            if (id == 0) g_oom_rate = (uint64_t)env_long("SOAK_OOM_RATE", 300);
            return role_dispatcher();
        }
        if (strcmp(argv[1], "provider") == 0) return role_provider();
        if (strcmp(argv[1], "operator") == 0) {
            g_obxctl = getenv("SOAK_OBXCTL");
            return role_operator();
        }
    }
    return 2;
}

/* Many databases: providers, strategies, routers, discovery (OBX-066..079,
 * OBX-121, IBX-085..097, IBX-123), on three real databases.
 * Usage: test_multi <backend> '<conn 1>' '<conn 2>' '<conn 3>' */
#define OBX_IMPLEMENTATION
#include "../obx.h"
#define IBX_IMPLEMENTATION
#include "../ibx.h"
#include "tt.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *g_backend;
static const char *g_label; /* in the test lines: the backend, or sqlite3 (OBX_/IBX_SQLITE3_API) */
static const char *g_conn[3];
static const char *const k_ids[3] = {"tenant-a", "tenant-b", "tenant-c"};

static char g_log[1 << 16];
static size_t g_log_len;
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER; /* renewal threads log too */
static void keep_log(obx_log_level level, const char *id, const char *msg, void *user) {
    int n;
    (void)user;
    (void)level;
    pthread_mutex_lock(&g_log_mu);
    n = snprintf(g_log + g_log_len, sizeof g_log - g_log_len, "[%s] %s\n", id, msg);
    if (n > 0 && g_log_len + (size_t)n < sizeof g_log) g_log_len += (size_t)n;
    pthread_mutex_unlock(&g_log_mu);
}
static void log_reset(void) {
    pthread_mutex_lock(&g_log_mu);
    g_log_len = 0;
    g_log[0] = '\0';
    pthread_mutex_unlock(&g_log_mu);
}
static int log_has(const char *text) {
    int found;
    pthread_mutex_lock(&g_log_mu);
    found = strstr(g_log, text) != NULL;
    pthread_mutex_unlock(&g_log_mu);
    return found;
}
static void ikeep_log(ibx_log_level level, const char *id, const char *msg, void *user) {
    keep_log((obx_log_level)level, id, msg, user);
}

static void sleep_ms(int ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

static obx_result clear_unit(obx__db *db, void *sql) { return obx__exec_direct(db, (const char *)sql, "clear"); }
static ibx_result iclear_unit(ibx__db *db, void *sql) { return ibx__exec_direct(db, (const char *)sql, "clear"); }

static obx_provider *provider_fixed(int count) {
    obx_provider_desc d;
    obx_database dbs[3];
    obx_provider *p = NULL;
    int i;
    memset(&d, 0, sizeof d);
    for (i = 0; i < count; i++) {
        dbs[i].id = k_ids[i];
        dbs[i].connection_string = g_conn[i];
    }
    d.databases = dbs;
    d.database_count = count;
    d.store.table = "OutboxMulti";
    d.store.deploy_schema = 1;
    d.store.hooks.logger.log = keep_log;
    d.store.hooks.logger.min_level = OBX_LOG_DEBUG;
    if (obx_provider_create(&d, &p) != OBX_OK) {
        printf("    provider_create failed: %s\n", obx_provider_last_error(p)->message);
        obx_provider_destroy(p);
        return NULL;
    }
    for (i = 0; i < obx_provider_count(p); i++) { /* empty tables */
        obx_store *s = obx_provider_store(p, i);
        char *sql;
        if (!s) continue;
        sql = obx__expand(&s->hooks, s->db.d, s->q, s->schema, s->table, "DELETE FROM {T}");
        obx__unit(&s->db, clear_unit, sql, "clear");
        obx__free(&s->hooks, sql);
    }
    return p;
}

static int enqueue_to(obx_provider *p, const char *key, const char *topic, int n) {
    obx_store *s;
    obx_new_message m;
    int i;
    if (obx_router_get(p, key, &s) != OBX_OK) return 0;
    memset(&m, 0, sizeof m);
    m.topic = topic;
    m.payload = key;
    m.payload_len = OBX_NTS;
    for (i = 0; i < n; i++)
        if (obx_enqueue(s, &m, NULL) != OBX_OK) return 0;
    return 1;
}

/* Handler that records which store each message came from. */
static char g_order[256];
static obx_outcome record_store(const obx_message *m, char *e, size_t n, void *u) {
    (void)e; (void)n; (void)u;
    strcat(g_order, m->store->store_id + 7); /* "tenant-a" -> "a" */
    return OBX_DONE;
}

static obx_dispatcher *dispatcher_over(obx_provider *p, obx_selection sel, int batch) {
    obx_dispatcher_desc d;
    obx_dispatcher *out = NULL;
    memset(&d, 0, sizeof d);
    d.provider = p;
    d.selection = sel;
    d.batch_size = batch;
    if (obx_dispatcher_create(&d, &out) != OBX_OK) return NULL;
    obx_dispatcher_on(out, "*", record_store, NULL);
    return out;
}

/* ---- outbox -------------------------------------------------------------------------------- */

static void test_066_separate_stores(void) {
    obx_provider *p = provider_fixed(3);
    int64_t ready[3];
    int i;
    TT_ASSERT(p != NULL);
    TT_EQ_INT(obx_provider_count(p), 3);
    TT_ASSERT(enqueue_to(p, "tenant-a", "t", 1) && enqueue_to(p, "tenant-b", "t", 2) &&
              enqueue_to(p, "tenant-c", "t", 3));
    for (i = 0; i < 3; i++) TT_EQ_INT(obx_queue_stats(obx_provider_store(p, i), &ready[i], NULL), OBX_OK);
    TT_EQ_INT(ready[0], 1);
    TT_EQ_INT(ready[1], 2);
    TT_EQ_INT(ready[2], 3);
    TT_EXPECT(obx_provider_store(p, 0) != obx_provider_store(p, 1));
    TT_EXPECT(obx_provider_store(p, 3) == NULL);
    obx_provider_destroy(p);
}

static void drain_order(obx_selection sel, const char *want) {
    obx_provider *p = provider_fixed(3);
    obx_dispatcher *d;
    obx_run_stats st;
    int rounds;
    TT_ASSERT(p != NULL);
    TT_ASSERT(enqueue_to(p, "tenant-a", "t", 4) && enqueue_to(p, "tenant-b", "t", 4) &&
              enqueue_to(p, "tenant-c", "t", 4));
    d = dispatcher_over(p, sel, 2);
    TT_ASSERT(d != NULL);
    g_order[0] = '\0';
    for (rounds = 0; rounds < 30 && obx_dispatcher_run_once(d, &st) == OBX_OK; rounds++) {
    }
    TT_EQ_STR(g_order, want);
    TT_EQ_INT(obx_dispatcher_run_once(d, &st), OBX_EMPTY); /* every store answered empty */
    obx_dispatcher_destroy(d);
    obx_provider_destroy(p);
}

static void test_068_round_robin(void) { drain_order(OBX_SELECT_ROUND_ROBIN, "aabbccaabbcc"); }
static void test_069_drain_first(void) { drain_order(OBX_SELECT_DRAIN_FIRST, "aaaabbbbcccc"); }

typedef struct counting_strategy {
    int nexts, reports, last_store, last_claimed;
} counting_strategy;
static int cs_next(void *user, int count) {
    counting_strategy *c = (counting_strategy *)user;
    c->nexts++;
    return count - 1; /* always the last store */
}
static void cs_report(void *user, int store, int claimed) {
    counting_strategy *c = (counting_strategy *)user;
    c->reports++;
    c->last_store = store;
    c->last_claimed = claimed;
}

static void test_067_strategy(void) {
    obx_provider *p = provider_fixed(3);
    obx_dispatcher_desc dd;
    obx_dispatcher *d = NULL;
    counting_strategy cs;
    obx_run_stats st;
    TT_ASSERT(p != NULL);
    TT_ASSERT(enqueue_to(p, "tenant-a", "t", 2) && enqueue_to(p, "tenant-c", "t", 3));
    memset(&cs, 0, sizeof cs);
    memset(&dd, 0, sizeof dd);
    dd.provider = p;
    dd.strategy.next = cs_next;
    dd.strategy.report = cs_report;
    dd.strategy.user = &cs;
    TT_EQ_INT(obx_dispatcher_create(&dd, &d), OBX_OK);
    obx_dispatcher_on(d, "*", record_store, NULL);
    g_order[0] = '\0';
    TT_EQ_INT(obx_dispatcher_run_once(d, &st), OBX_OK);
    TT_EQ_INT(cs.nexts, 1);
    TT_EQ_INT(cs.reports, 1);
    TT_EQ_INT(cs.last_store, 2);
    TT_EQ_INT(cs.last_claimed, 3);
    TT_EQ_STR(g_order, "ccc");
    obx_dispatcher_destroy(d);
    obx_provider_destroy(p);
}

static void test_070_071_identifiers(void) {
    obx_provider *p = provider_fixed(3);
    obx_dispatcher *d;
    obx_run_stats st;
    int i;
    TT_ASSERT(p != NULL);
    for (i = 0; i < 3; i++) TT_EQ_STR(obx_provider_store_id(p, i), k_ids[i]);
    TT_EXPECT(obx_provider_store_id(p, 5) == NULL);
    TT_ASSERT(enqueue_to(p, "tenant-b", "audit", 1));
    d = dispatcher_over(p, OBX_SELECT_DRAIN_FIRST, 10);
    TT_ASSERT(d != NULL);
    g_log_len = 0;
    g_log[0] = '\0';
    while (obx_dispatcher_run_once(d, &st) == OBX_OK) {
    }
    TT_EXPECT(strstr(g_log, "[tenant-b] handling") != NULL); /* OBX-071 */
    TT_EXPECT(strstr(g_log, "[tenant-a] claimed 0") != NULL);
    obx_dispatcher_destroy(d);
    obx_provider_destroy(p);
}

static void test_072_073_router(void) {
    obx_provider *p = provider_fixed(3);
    obx_store *s = NULL, *again = NULL;
    int64_t ready = 0;
    TT_ASSERT(p != NULL);
    TT_EQ_INT(obx_router_get(p, "tenant-b", &s), OBX_OK);
    TT_ASSERT(s == obx_provider_store(p, 1));
    TT_ASSERT(enqueue_to(p, "tenant-b", "t", 2));
    TT_EQ_INT(obx_queue_stats(obx_provider_store(p, 1), &ready, NULL), OBX_OK);
    TT_EQ_INT(ready, 2);
    TT_EQ_INT(obx_router_get(p, "tenant-z", &again), OBX_ERR_NOT_FOUND);     /* OBX-073 */
    TT_EXPECT(strstr(obx_provider_last_error(p)->message, "tenant-z") != NULL);
    TT_EQ_INT(obx_router_get(p, "", &again), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_router_get(p, NULL, &again), OBX_ERR_INVALID_ARG);
    TT_EXPECT(again == NULL);
    obx_provider_destroy(p);
}

static void test_074_guid_key(void) {
    obx_provider_desc d;
    obx_database db;
    obx_provider *p = NULL;
    obx_guid g = {{0x6f, 0x1c, 0x2a, 0x3b, 0x4d, 0x5e, 0x4f, 0x60, 0x81, 0x92, 0xa3, 0xb4, 0xc5, 0xd6, 0xe7, 0xf8}};
    obx_store *s = NULL;
    char text[37];
    obx_guid_text(&g, text);
    TT_EQ_STR(text, "6f1c2a3b-4d5e-4f60-8192-a3b4c5d6e7f8");
    memset(&d, 0, sizeof d);
    db.id = text;
    db.connection_string = g_conn[0];
    d.databases = &db;
    d.database_count = 1;
    d.store.table = "OutboxMulti";
    d.store.hooks.logger.log = keep_log;
    TT_EQ_INT(obx_provider_create(&d, &p), OBX_OK);
    TT_EQ_INT(obx_router_get_guid(p, &g, &s), OBX_OK);
    TT_ASSERT(s == obx_provider_store(p, 0));
    TT_EQ_INT(obx_router_get(p, "6f1c2a3b-4d5e-4f60-8192-a3b4c5d6e7f8", &s), OBX_OK);
    g.bytes[15] = 0;
    TT_EQ_INT(obx_router_get_guid(p, &g, &s), OBX_ERR_NOT_FOUND);
    obx_provider_destroy(p);
}

/* A GUID is one value however it is spelled: a database registered under
 * its upper-case text (SQL Server's NEWID()) or in braces (.NET's "B"
 * format) is found by the GUID key; a string key stays exact. */
static void test_074_guid_spelling(void) {
    obx_provider_desc d;
    obx_database db[3];
    obx_provider *p = NULL;
    obx_guid g = {{0x6f, 0x1c, 0x2a, 0x3b, 0x4d, 0x5e, 0x4f, 0x60, 0x81, 0x92, 0xa3, 0xb4, 0xc5, 0xd6, 0xe7, 0xf8}};
    obx_guid g2 = {{0x0a, 0x1c, 0x2a, 0x3b, 0x4d, 0x5e, 0x4f, 0x60, 0x81, 0x92, 0xa3, 0xb4, 0xc5, 0xd6, 0xe7, 0xf8}};
    obx_guid g3 = {{0x0b, 0x1c, 0x2a, 0x3b, 0x4d, 0x5e, 0x4f, 0x60, 0x81, 0x92, 0xa3, 0xb4, 0xc5, 0xd6, 0xe7, 0xf8}};
    obx_store *s = NULL;
    memset(&d, 0, sizeof d);
    db[0].id = "6F1C2A3B-4D5E-4F60-8192-A3B4C5D6E7F8";
    db[1].id = "{0a1c2a3b-4d5e-4f60-8192-a3b4c5d6e7f8}";
    db[2].id = "{0B1C2A3B-4D5E-4F60-8192-A3B4C5D6E7F8";  /* no closing brace: not a GUID */
    db[0].connection_string = db[1].connection_string = db[2].connection_string = g_conn[0];
    d.databases = db;
    d.database_count = 3;
    d.store.table = "OutboxMulti";
    d.store.hooks.logger.log = keep_log;
    TT_EQ_INT(obx_provider_create(&d, &p), OBX_OK);
    TT_EQ_INT(obx_router_get_guid(p, &g, &s), OBX_OK);
    TT_ASSERT(s == obx_provider_store(p, 0));
    TT_EQ_INT(obx_router_get_guid(p, &g2, &s), OBX_OK);
    TT_ASSERT(s == obx_provider_store(p, 1));
    s = NULL;
    TT_EQ_INT(obx_router_get_guid(p, &g3, &s), OBX_ERR_NOT_FOUND);
    TT_EXPECT(s == NULL);
    TT_EXPECT(strstr(obx_provider_last_error(p)->where, "obx_router_get_guid") != NULL);
    TT_EQ_INT(obx_router_get(p, "6f1c2a3b-4d5e-4f60-8192-a3b4c5d6e7f8", &s), OBX_ERR_NOT_FOUND);
    TT_EQ_INT(obx_router_get(p, "6F1C2A3B-4D5E-4F60-8192-A3B4C5D6E7F8", &s), OBX_OK);
    TT_EQ_INT(obx_router_get(p, "tenant", NULL), OBX_ERR_INVALID_ARG);
    TT_EXPECT(strstr(obx_provider_last_error(p)->message, "out") != NULL);
    TT_EQ_INT(obx_router_get_guid(p, NULL, &s), OBX_ERR_INVALID_ARG);
    obx_provider_destroy(p);
}

/* Discovery that returns whatever the test sets. */
typedef struct discovered {
    obx_database dbs[3];
    int count, calls, fail;
} discovered;
static int discover(obx_database *out, int cap, void *user) {
    discovered *d = (discovered *)user;
    int i;
    d->calls++;
    if (d->fail) return -1;
    for (i = 0; i < d->count && i < cap; i++) out[i] = d->dbs[i];
    return d->count;
}

/* Monotonic time the test moves on by hand: the refresh interval passes
 * without a sleep, and no assertion depends on how fast a round runs (under
 * qemu on a loaded machine one took longer than a 100 ms interval). */
static int64_t g_mono_skew_ms;
static int64_t skewed_monotonic_ms(void *user) {
    struct timespec ts;
    (void)user;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    /* read by renewal threads too: atomic */
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + __atomic_load_n(&g_mono_skew_ms, __ATOMIC_RELAXED);
}

static obx_provider *provider_dynamic(discovered *found, int64_t refresh_ms) {
    obx_provider_desc d;
    obx_provider *p = NULL;
    memset(&d, 0, sizeof d);
    d.discover = discover;
    d.discover_user = found;
    d.refresh_interval_ms = refresh_ms;
    d.store.table = "OutboxMulti";
    d.store.deploy_schema = 1;
    d.store.hooks.logger.log = keep_log;
    d.store.hooks.clock.monotonic_ms = skewed_monotonic_ms;
    if (obx_provider_create(&d, &p) != OBX_OK) {
        obx_provider_destroy(p);
        return NULL;
    }
    return p;
}

/* Dispatcher rounds until the provider has `want` stores open: a database
 * that was down is opened off the dispatching thread, its store taken in at
 * a later round. Bounded (60 s at least, for a loaded machine; at once
 * when idle); 0 when it never happened. */
static int rounds_until_open(obx_dispatcher *d, obx_provider *p, int want) {
    obx_run_stats st;
    int i;
    for (i = 0; i < 12000 && obx_provider_count(p) < want; i++) {
        obx_dispatcher_run_once(d, &st);
        sleep_ms(5);
    }
    return obx_provider_count(p) == want;
}

/* A database of a fixed list that cannot be opened when the provider is
 * created (down, or here: its store's memory refused) is not dropped for
 * good: the dispatcher opens it when its wait is over, as discovery's
 * (OBX-066-RETRY). */
static int g_refuse_stores;
static void *refusing_alloc(size_t n, void *u) {
    (void)u;
    return g_refuse_stores && n == sizeof(struct obx_store) ? NULL : malloc(n);
}
static void *refusing_realloc(void *ptr, size_t n, void *u) { (void)u; return realloc(ptr, n); }
static void refusing_free(void *ptr, void *u) { (void)u; free(ptr); }

static void test_066_fixed_retry(void) {
    obx_provider_desc pd;
    obx_database dbs[2];
    obx_provider *p = NULL;
    obx_dispatcher *d;
    obx_store *s;
    memset(&pd, 0, sizeof pd);
    dbs[0].id = k_ids[0];
    dbs[0].connection_string = g_conn[0];
    dbs[1].id = k_ids[1];
    dbs[1].connection_string = g_conn[1];
    pd.databases = dbs;
    pd.database_count = 2;
    pd.refresh_interval_ms = 60000;
    pd.store.table = "OutboxMulti";
    pd.store.deploy_schema = 1;
    pd.store.hooks.allocator.alloc = refusing_alloc;
    pd.store.hooks.allocator.realloc = refusing_realloc;
    pd.store.hooks.allocator.free = refusing_free;
    pd.store.hooks.logger.log = keep_log;
    pd.store.hooks.clock.monotonic_ms = skewed_monotonic_ms;
    g_refuse_stores = 1;
    TT_EQ_INT(obx_provider_create(&pd, &p), OBX_OK);
    g_refuse_stores = 0;
    TT_ASSERT(p != NULL);
    TT_EQ_INT(obx_provider_count(p), 0);
    TT_EQ_INT(obx_router_get(p, "tenant-b", &s), OBX_ERR_NOT_FOUND);
    TT_EQ_INT(obx_provider_refresh(p), OBX_ERR_STATE); /* a fixed list: nothing to ask */
    d = dispatcher_over(p, OBX_SELECT_ROUND_ROBIN, 10);
    TT_ASSERT(d != NULL);
    __atomic_add_fetch(&g_mono_skew_ms, 60000, __ATOMIC_RELAXED);
    TT_ASSERT(rounds_until_open(d, p, 2));
    TT_EQ_INT(obx_router_get(p, "tenant-b", &s), OBX_OK);
    TT_EQ_STR(obx_provider_store_id(p, 0), "tenant-a");
    obx_dispatcher_destroy(d);
    obx_provider_destroy(p);
}

/* Databases that are down do not stall the others: each is tried again on
 * its own backoff (1 s, 2 s, ...), off the dispatching thread. Tenants b
 * and c point at a port where a listener accepts nothing (a frozen server:
 * a connect waits for the login timeout, 30 s here); a round that starts
 * their attempt must still serve tenant a at once. A watchdog ends the
 * frozen connects after 25 s (below the login timeout; a loaded machine
 * may take seconds for the round), so the unfixed code fails, not hangs. On
 * SQLite the down tenants are files in a directory that does not exist
 * (OBX-066-DOWN). */
static int g_frozen_fd = -1;
static volatile int g_frozen_release, g_frozen_closed;
static void *frozen_watchdog(void *arg) {
    int i;
    (void)arg;
    for (i = 0; i < 1250 && !g_frozen_release; i++) sleep_ms(20);
    g_frozen_closed = 1;
    close(g_frozen_fd); /* the pending connects get a reset */
    return NULL;
}

/* `conn` with its Port=... set to `port`. */
static void with_port(char *out, size_t cap, const char *conn, int port) {
    const char *at = strstr(conn, "Port=");
    size_t head = at ? (size_t)(at - conn) : strlen(conn);
    const char *tail = at ? at + 5 + strspn(at + 5, "0123456789") : "";
    snprintf(out, cap, "%.*sPort=%d%s%s", (int)head, conn, port, at ? "" : ";", tail);
}

static int count_in_log(const char *what) {
    int n = 0;
    const char *at = g_log;
    while ((at = strstr(at, what)) != NULL) {
        n++;
        at += strlen(what);
    }
    return n;
}

static void test_066_down(void) {
    int network = strcmp(g_backend, "sqlite") != 0, port = 0, one = 1;
    char conn[2][512];
    obx_provider_desc pd;
    obx_database dbs[3];
    obx_provider *p = NULL;
    obx_dispatcher *d;
    obx_run_stats st;
    pthread_t watchdog;
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    int i, fd;
    if (network) { /* a port nobody listens on yet: refused at once */
        fd = socket(AF_INET, SOCK_STREAM, 0);
        memset(&sa, 0, sizeof sa);
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        TT_ASSERT(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
        TT_ASSERT(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
        port = ntohs(sa.sin_port);
        close(fd);
        with_port(conn[0], sizeof conn[0], g_conn[1], port);
        with_port(conn[1], sizeof conn[1], g_conn[2], port);
    } else {
        snprintf(conn[0], sizeof conn[0], "Driver={SQLite3};Database=/no-such-dir-obx/b.db;");
        snprintf(conn[1], sizeof conn[1], "Driver={SQLite3};Database=/no-such-dir-obx/c.db;");
    }
    memset(&pd, 0, sizeof pd);
    for (i = 0; i < 3; i++) dbs[i].id = k_ids[i];
    dbs[0].connection_string = g_conn[0];
    dbs[1].connection_string = conn[0];
    dbs[2].connection_string = conn[1];
    pd.databases = dbs;
    pd.database_count = 3;
    pd.refresh_interval_ms = 60000;
    pd.store.table = "OutboxMulti";
    pd.store.deploy_schema = 1;
    pd.store.login_timeout_seconds = 30;
    pd.store.hooks.logger.log = keep_log;
    pd.store.hooks.logger.min_level = OBX_LOG_DEBUG;
    pd.store.hooks.clock.monotonic_ms = skewed_monotonic_ms;
    TT_EQ_INT(obx_provider_create(&pd, &p), OBX_OK);
    TT_EQ_INT(obx_provider_count(p), 1); /* b and c are down */
    {
        obx_store *s = obx_provider_store(p, 0);
        char *sql = obx__expand(&s->hooks, s->db.d, s->q, s->schema, s->table, "DELETE FROM {T}");
        obx__unit(&s->db, clear_unit, sql, "clear");
        obx__free(&s->hooks, sql);
    }
    TT_ASSERT(enqueue_to(p, "tenant-a", "t", 1));
    d = dispatcher_over(p, OBX_SELECT_ROUND_ROBIN, 10);
    TT_ASSERT(d != NULL);
    g_frozen_release = g_frozen_closed = 0;
    if (network) { /* now the port accepts, and answers nothing */
        g_frozen_fd = socket(AF_INET, SOCK_STREAM, 0);
        setsockopt(g_frozen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        TT_ASSERT(bind(g_frozen_fd, (struct sockaddr *)&sa, sizeof sa) == 0);
        TT_ASSERT(listen(g_frozen_fd, 16) == 0);
        TT_ASSERT(pthread_create(&watchdog, NULL, frozen_watchdog, NULL) == 0);
    }
    g_order[0] = '\0';
    g_log_len = 0;
    g_log[0] = '\0';
    __atomic_add_fetch(&g_mono_skew_ms, 60000, __ATOMIC_RELAXED); /* every wait is over (and a fixed list's old refresh was due) */
    obx_dispatcher_run_once(d, &st);
    TT_EXPECT(!g_frozen_closed); /* the round did not wait for a frozen connect */
    TT_EQ_STR(g_order, "a");     /* and tenant a was served in it */
    g_frozen_release = 1;
    if (network) pthread_join(watchdog, NULL);
    /* Each down tenant is tried again on its own backoff: after the next
     * failure, 2 s (then 4 s ...), not at every round or refresh. */
    for (i = 0; i < 2000 && (count_in_log("(2 time(s) in a row); trying again in 2000 ms") < 2); i++) {
        obx_dispatcher_run_once(d, &st);
        sleep_ms(5);
    }
    TT_EQ_INT(count_in_log("(2 time(s) in a row); trying again in 2000 ms"), 2);
    TT_EQ_INT(count_in_log("(3 time(s) in a row)"), 0);
    TT_EQ_INT(obx_provider_count(p), 1);
    obx_dispatcher_destroy(d);
    obx_provider_destroy(p);
}

static void test_075_079_discovery(void) {
    discovered found;
    obx_provider *p;
    obx_store *a, *b, *s;
    obx_dispatcher *d;
    obx_run_stats st;
    int i;
    memset(&found, 0, sizeof found);
    for (i = 0; i < 3; i++) {
        found.dbs[i].id = k_ids[i];
        found.dbs[i].connection_string = g_conn[i];
    }
    found.count = 2;
    p = provider_dynamic(&found, 0);
    TT_ASSERT(p != NULL);
    TT_EQ_INT(p->refresh_ms, 300000);                           /* OBX-076: 5 minutes by default */
    obx_provider_destroy(p);
    found.calls = 0;
    p = provider_dynamic(&found, 60000);
    TT_ASSERT(p != NULL);
    TT_EQ_INT(found.calls, 1);
    TT_EQ_INT(obx_provider_count(p), 2);
    a = obx_provider_store(p, 0);
    b = obx_provider_store(p, 1);
    /* OBX-077: a new database gets a store; OBX-079: the others are kept. */
    found.count = 3;
    TT_EQ_INT(obx_provider_refresh(p), OBX_OK);
    TT_EQ_INT(obx_provider_count(p), 3);
    TT_ASSERT(obx_provider_store(p, 0) == a && obx_provider_store(p, 1) == b);
    TT_EQ_INT(obx_router_get(p, "tenant-c", &s), OBX_OK);
    /* OBX-078: a removed database's store is closed and no longer routed. */
    found.dbs[0] = found.dbs[2];
    found.count = 2;
    TT_EQ_INT(obx_provider_refresh(p), OBX_OK);
    TT_EQ_INT(obx_provider_count(p), 2);
    TT_EQ_INT(obx_router_get(p, "tenant-a", &s), OBX_ERR_NOT_FOUND);
    TT_ASSERT(obx_provider_store(p, 0) == b);
    /* A failing discovery keeps the current set. */
    found.fail = 1;
    TT_EQ_INT(obx_provider_refresh(p), OBX_ERR_DB);
    TT_EQ_INT(obx_provider_count(p), 2);
    found.fail = 0;
    /* OBX-075: a dispatcher refreshes when the interval has passed. */
    d = dispatcher_over(p, OBX_SELECT_ROUND_ROBIN, 10);
    TT_ASSERT(d != NULL);
    found.calls = 0;
    __atomic_add_fetch(&g_mono_skew_ms, 60000, __ATOMIC_RELAXED);
    obx_dispatcher_run_once(d, &st);
    TT_EQ_INT(found.calls, 1);
    obx_dispatcher_run_once(d, &st);
    TT_EQ_INT(found.calls, 1); /* not again before the next interval */
    obx_dispatcher_destroy(d);
    obx_provider_destroy(p);
}

/* ---- lease renewal across a provider's refresh (CORE-RENEW-PROVIDER) -----------------------
 * The renewal thread once kept pointers into the store it renewed for and
 * knew it by address: a refresh that closed that store (its connection
 * string changed, or discovery dropped it) left the next renewal, or the
 * dispatcher's destroy, closing its connection through freed memory; a new
 * store at the old address had its leases "renewed" in the old database.
 * Run under ASan by make check-asan. */
static obx_outcome wait_renewal(const obx_message *m, char *e, size_t n, void *u) {
    int tries;
    (void)m; (void)e; (void)n; (void)u;
    for (tries = 0; tries < 1200 && !log_has("renewed the leases of 1"); tries++) sleep_ms(50); /* 60 s at most */
    return OBX_DONE;
}

static int clear_store(obx_store *s) {
    char *sql = s ? obx__expand(&s->hooks, s->db.d, s->q, s->schema, s->table, "DELETE FROM {T}") : NULL;
    obx_result r = sql ? obx__unit(&s->db, clear_unit, sql, "clear") : OBX_ERR_NO_MEMORY;
    if (s) obx__free(&s->hooks, sql);
    return r == OBX_OK;
}

static void renew_across_refresh(int drop) {
    discovered found;
    obx_provider *p = NULL;
    obx_dispatcher_desc dd;
    obx_dispatcher *d = NULL;
    obx_run_stats st;
    memset(&found, 0, sizeof found);
    found.dbs[0].id = k_ids[0];
    found.dbs[0].connection_string = g_conn[0];
    found.count = 1;
    {
        obx_provider_desc pd;
        memset(&pd, 0, sizeof pd);
        pd.discover = discover;
        pd.discover_user = &found;
        pd.refresh_interval_ms = 3600000;
        pd.store.table = "OutboxMulti";
        pd.store.deploy_schema = 1;
        pd.store.hooks.logger.log = keep_log;
        pd.store.hooks.logger.min_level = OBX_LOG_DEBUG; /* "renewed the leases ..." */
        TT_EQ_INT(obx_provider_create(&pd, &p), OBX_OK);
    }
    TT_ASSERT(clear_store(obx_provider_store(p, 0)) && enqueue_to(p, "tenant-a", "t", 1));
    memset(&dd, 0, sizeof dd);
    dd.provider = p;
    dd.lease_seconds = 1;
    TT_EQ_INT(obx_dispatcher_create(&dd, &d), OBX_OK);
    TT_EQ_INT(obx_dispatcher_on(d, "*", wait_renewal, NULL), OBX_OK);
    log_reset();
    TT_EQ_INT(obx_dispatcher_run_once(d, &st), OBX_OK);
    TT_EQ_INT(st.done, 1);
    TT_ASSERT(log_has("renewed the leases of 1")); /* the renewal connection is open */
    if (drop) { /* discovery drops the tenant; its store is closed; then destroy */
        found.count = 0;
        TT_EQ_INT(obx_provider_refresh(p), OBX_OK);
        TT_EQ_INT(obx_provider_count(p), 0);
        obx_dispatcher_run_once(d, &st);
        TT_EXPECT(!d->renewer->side.connected); /* closed with the store it served */
    } else { /* the tenant moves to another database: a second round renews there */
        found.dbs[0].connection_string = g_conn[1];
        TT_EQ_INT(obx_provider_refresh(p), OBX_OK);
        TT_ASSERT(clear_store(obx_provider_store(p, 0)) && enqueue_to(p, "tenant-a", "t", 1));
        log_reset();
        TT_EQ_INT(obx_dispatcher_run_once(d, &st), OBX_OK);
        TT_EQ_INT(st.done, 1);
        TT_ASSERT(log_has("renewed the leases of 1 of 1")); /* in the new database, where the message is */
    }
    obx_dispatcher_destroy(d);
    obx_provider_destroy(p);
}
static void test_renew_moved(void) { renew_across_refresh(0); }
static void test_renew_dropped(void) { renew_across_refresh(1); }

static void test_reap_every_store(void) {
    obx_provider *p = provider_fixed(3);
    obx_dispatcher *d;
    obx_run_stats st;
    char crashed[37];
    int i, rounds;
    int64_t total = 0;
    TT_ASSERT(p != NULL);
    for (i = 0; i < 3; i++) {
        const obx_message *ms;
        int n = 0;
        TT_ASSERT(enqueue_to(p, k_ids[i], "t", 1));
        obx_owner_token(obx_provider_store(p, i), crashed);
        TT_EQ_INT(obx_claim(obx_provider_store(p, i), crashed, 1, 1, &ms, &n), OBX_OK);
    }
    sleep_ms(1200); /* every lease is now expired: a crashed worker in each database */
    d = dispatcher_over(p, OBX_SELECT_DRAIN_FIRST, 10);
    TT_ASSERT(d != NULL);
    g_order[0] = '\0';
    for (rounds = 0; rounds < 10; rounds++) {
        obx_dispatcher_run_once(d, &st);
        total += st.reaped;
    }
    TT_EQ_INT(total, 3);
    TT_EQ_INT(strlen(g_order), 3); /* and each one was then handled */
    obx_dispatcher_destroy(d);
    obx_provider_destroy(p);
}

static void test_121_cached(void) {
    obx_provider *p = provider_fixed(3);
    obx_store *first = NULL, *s = NULL;
    int i;
    TT_ASSERT(p != NULL);
    TT_EQ_INT(obx_router_get(p, "tenant-c", &first), OBX_OK);
    for (i = 0; i < 10000; i++) { /* no database is opened per lookup */
        TT_EQ_INT(obx_router_get(p, "tenant-c", &s), OBX_OK);
        TT_ASSERT(s == first);
    }
    TT_EQ_INT(first->db.connected, 1);
    obx_provider_destroy(p);
}

/* ---- inbox ---------------------------------------------------------------------------------------- */

static ibx_provider *iprovider(const ibx_database *dbs, int count, ibx_discover_fn fn, void *user) {
    ibx_provider_desc d;
    ibx_provider *p = NULL;
    int i;
    memset(&d, 0, sizeof d);
    d.databases = dbs;
    d.database_count = dbs ? count : 0;
    d.discover = fn;
    d.discover_user = user;
    d.refresh_interval_ms = fn ? 100 : 0;
    d.store.table = "InboxMulti";
    d.store.deploy_schema = 1;
    d.store.hooks.logger.log = ikeep_log;
    d.store.hooks.logger.min_level = IBX_LOG_DEBUG;
    if (ibx_provider_create(&d, &p) != IBX_OK) {
        ibx_provider_destroy(p);
        return NULL;
    }
    for (i = 0; i < ibx_provider_count(p); i++) {
        ibx_store *s = ibx_provider_store(p, i);
        char *sql;
        if (!s) continue;
        sql = ibx__expand(&s->hooks, s->db.d, s->q, s->schema, s->table, "DELETE FROM {T}");
        ibx__unit(&s->db, iclear_unit, sql, "clear");
        ibx__free(&s->hooks, sql);
    }
    return p;
}

static ibx_provider *iprovider_fixed(void) {
    ibx_database dbs[3];
    int i;
    for (i = 0; i < 3; i++) {
        dbs[i].id = k_ids[i];
        dbs[i].connection_string = g_conn[i];
    }
    return iprovider(dbs, 3, NULL, NULL);
}

static int ienqueue_to(ibx_provider *p, const char *key, int n) {
    ibx_store *s;
    ibx_new_message m;
    char id[32];
    int i;
    if (ibx_router_get(p, key, &s) != IBX_OK) return 0;
    memset(&m, 0, sizeof m);
    m.topic = "t";
    m.source = key;
    m.payload = "{}";
    m.payload_len = IBX_NTS;
    m.message_id = id;
    for (i = 0; i < n; i++) {
        snprintf(id, sizeof id, "m%d", i);
        if (ibx_enqueue(s, &m, NULL) != IBX_OK) return 0;
    }
    return 1;
}

static ibx_outcome irecord(const ibx_message *m, char *e, size_t n, void *u) {
    (void)e; (void)n; (void)u;
    strcat(g_order, m->store->store_id + 7);
    return IBX_DONE;
}

static void idrain_order(ibx_selection sel, const char *want) {
    ibx_provider *p = iprovider_fixed();
    ibx_dispatcher_desc dd;
    ibx_dispatcher *d = NULL;
    ibx_run_stats st;
    int rounds;
    TT_ASSERT(p != NULL);
    TT_ASSERT(ienqueue_to(p, "tenant-a", 4) && ienqueue_to(p, "tenant-b", 4) && ienqueue_to(p, "tenant-c", 4));
    memset(&dd, 0, sizeof dd);
    dd.provider = p;
    dd.selection = sel;
    dd.batch_size = 2;
    TT_EQ_INT(ibx_dispatcher_create(&dd, &d), IBX_OK);
    ibx_dispatcher_on(d, "*", irecord, NULL);
    g_order[0] = '\0';
    g_log_len = 0;
    g_log[0] = '\0';
    for (rounds = 0; rounds < 30 && ibx_dispatcher_run_once(d, &st) == IBX_OK; rounds++) {
    }
    TT_EQ_STR(g_order, want);
    TT_EXPECT(strstr(g_log, "[tenant-c] handling") != NULL); /* IBX-090 */
    ibx_dispatcher_destroy(d);
    ibx_provider_destroy(p);
}

/* The same for the inbox's fixed list (IBX-PROVIDER-RETRY). */
static void *irefusing_alloc(size_t n, void *u) {
    (void)u;
    return g_refuse_stores && n == sizeof(struct ibx_store) ? NULL : malloc(n);
}

static void test_ibx_fixed_retry(void) {
    ibx_provider_desc pd;
    ibx_database dbs[2];
    ibx_provider *p = NULL;
    ibx_dispatcher_desc dd;
    ibx_dispatcher *d = NULL;
    ibx_run_stats st;
    ibx_store *s;
    int i;
    memset(&pd, 0, sizeof pd);
    dbs[0].id = k_ids[0];
    dbs[0].connection_string = g_conn[0];
    dbs[1].id = k_ids[1];
    dbs[1].connection_string = g_conn[1];
    pd.databases = dbs;
    pd.database_count = 2;
    pd.refresh_interval_ms = 60000;
    pd.store.table = "InboxMulti";
    pd.store.deploy_schema = 1;
    pd.store.hooks.allocator.alloc = irefusing_alloc;
    pd.store.hooks.allocator.realloc = refusing_realloc;
    pd.store.hooks.allocator.free = refusing_free;
    pd.store.hooks.logger.log = ikeep_log;
    pd.store.hooks.clock.monotonic_ms = skewed_monotonic_ms;
    g_refuse_stores = 1;
    TT_EQ_INT(ibx_provider_create(&pd, &p), IBX_OK);
    g_refuse_stores = 0;
    TT_ASSERT(p != NULL);
    TT_EQ_INT(ibx_provider_count(p), 0);
    TT_EQ_INT(ibx_provider_refresh(p), IBX_ERR_STATE);
    memset(&dd, 0, sizeof dd);
    dd.provider = p;
    TT_EQ_INT(ibx_dispatcher_create(&dd, &d), IBX_OK);
    ibx_dispatcher_on(d, "*", irecord, NULL);
    __atomic_add_fetch(&g_mono_skew_ms, 60000, __ATOMIC_RELAXED);
    for (i = 0; i < 12000 && ibx_provider_count(p) < 2; i++) { /* opened off this thread (60 s at least) */
        ibx_dispatcher_run_once(d, &st);
        sleep_ms(5);
    }
    TT_EQ_INT(ibx_provider_count(p), 2);
    TT_EQ_INT(ibx_router_get(p, "tenant-b", &s), IBX_OK);
    ibx_dispatcher_destroy(d);
    ibx_provider_destroy(p);
}

static void test_ibx_085_086(void) {
    ibx_provider *p = iprovider_fixed();
    int64_t ready = 0;
    TT_ASSERT(p != NULL);
    TT_EQ_INT(ibx_provider_count(p), 3);
    TT_ASSERT(ienqueue_to(p, "tenant-b", 3));
    TT_EQ_INT(ibx_queue_stats(ibx_provider_store(p, 1), &ready, NULL), IBX_OK);
    TT_EQ_INT(ready, 3);
    TT_EQ_INT(ibx_queue_stats(ibx_provider_store(p, 0), &ready, NULL), IBX_OK);
    TT_EQ_INT(ready, 0);
    ibx_provider_destroy(p);
}

static void test_ibx_087(void) { idrain_order(IBX_SELECT_ROUND_ROBIN, "aabbccaabbcc"); }
static void test_ibx_088(void) { idrain_order(IBX_SELECT_DRAIN_FIRST, "aaaabbbbcccc"); }

static void test_ibx_089_092(void) {
    ibx_provider *p = iprovider_fixed();
    ibx_store *s = NULL, *again;
    ibx_guid g = {{0}};
    int i;
    TT_ASSERT(p != NULL);
    for (i = 0; i < 3; i++) TT_EQ_STR(ibx_provider_store_id(p, i), k_ids[i]);   /* IBX-089 */
    TT_EQ_INT(ibx_router_get(p, "tenant-a", &s), IBX_OK);                         /* IBX-091 */
    TT_ASSERT(s == ibx_provider_store(p, 0));
    for (i = 0; i < 1000; i++) {                                                 /* IBX-123 */
        TT_EQ_INT(ibx_router_get(p, "tenant-a", &again), IBX_OK);
        TT_ASSERT(again == s);
    }
    TT_EQ_INT(ibx_router_get(p, "nobody", &again), IBX_ERR_NOT_FOUND);          /* IBX-092 */
    TT_EQ_INT(ibx_router_get(p, "", &again), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_router_get_guid(p, &g, &again), IBX_ERR_NOT_FOUND);
    ibx_provider_destroy(p);
}

typedef struct idiscovered {
    ibx_database dbs[3];
    int count, calls;
} idiscovered;
static int idiscover(ibx_database *out, int cap, void *user) {
    idiscovered *d = (idiscovered *)user;
    int i;
    d->calls++;
    for (i = 0; i < d->count && i < cap; i++) out[i] = d->dbs[i];
    return d->count;
}

static void test_ibx_093_097(void) {
    idiscovered found;
    ibx_provider *p;
    ibx_store *a, *s;
    ibx_dispatcher_desc dd;
    ibx_dispatcher *d = NULL;
    ibx_run_stats st;
    int i;
    memset(&found, 0, sizeof found);
    for (i = 0; i < 3; i++) {
        found.dbs[i].id = k_ids[i];
        found.dbs[i].connection_string = g_conn[i];
    }
    found.count = 1;
    p = iprovider(NULL, 0, idiscover, &found);
    TT_ASSERT(p != NULL);
    TT_EQ_INT(found.calls, 1);
    a = ibx_provider_store(p, 0);
    found.count = 3;                                            /* IBX-095 */
    memset(&dd, 0, sizeof dd);
    dd.provider = p;
    TT_EQ_INT(ibx_dispatcher_create(&dd, &d), IBX_OK);
    ibx_dispatcher_on(d, "*", irecord, NULL);
    sleep_ms(150);
    ibx_dispatcher_run_once(d, &st);                             /* IBX-093: refreshed when due */
    TT_EQ_INT(found.calls, 2);
    TT_EQ_INT(ibx_provider_count(p), 3);
    TT_ASSERT(ibx_provider_store(p, 0) == a);                    /* IBX-097 */
    found.count = 2;                                             /* IBX-096 */
    TT_EQ_INT(ibx_provider_refresh(p), IBX_OK);
    TT_EQ_INT(ibx_provider_count(p), 2);
    TT_EQ_INT(ibx_router_get(p, "tenant-c", &s), IBX_ERR_NOT_FOUND);
    TT_EQ_INT(((ibx_provider *)p)->refresh_ms, 100);
    ibx_dispatcher_destroy(d);
    ibx_provider_destroy(p);
    {
        ibx_provider_desc pd;
        ibx_provider *q = NULL;
        memset(&pd, 0, sizeof pd);
        pd.discover = idiscover;
        pd.discover_user = &found;
        pd.store.table = "InboxMulti";
        pd.store.hooks.logger.log = ikeep_log;
        TT_EQ_INT(ibx_provider_create(&pd, &q), IBX_OK);
        TT_EQ_INT(q->refresh_ms, 300000);                        /* IBX-094 */
        ibx_provider_destroy(q);
    }
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s sqlite|postgresql|mariadb '<conn 1>' '<conn 2>' '<conn 3>'\n", argv[0]);
        return 2;
    }
    g_label = argv[1];
    g_backend = strcmp(g_label, "sqlite3") == 0 ? "sqlite" : g_label;
#ifdef OBX_SQLITE3_API
    if (strcmp(g_label, "sqlite3") != 0) {
#else
    if (strcmp(g_label, "sqlite3") == 0) {
#endif
        fprintf(stderr, "%s: backend sqlite3 is this program built with OBX_SQLITE3_API, and only that\n", argv[0]);
        return 2;
    }
    g_conn[0] = argv[2];
    g_conn[1] = argv[3];
    g_conn[2] = argv[4];
#define RUN(id, what, fn) TT_RUN(id, g_label, what, fn)
    RUN("OBX-066", "a store per database, messages kept apart", test_066_separate_stores);
    RUN("OBX-066-RETRY", "a fixed-list database that could not be opened is opened when its wait is over", test_066_fixed_retry);
    RUN("OBX-066-DOWN", "databases that are down are retried each on its own backoff, never stalling the others", test_066_down);
    RUN("OBX-067", "the dispatcher asks a selection strategy every round", test_067_strategy);
    RUN("OBX-068", "round-robin: one batch from each store in turn", test_068_round_robin);
    RUN("OBX-069", "drain-first: a store until it is empty, then the next", test_069_drain_first);
    RUN("OBX-070", "every store has a stable identifier", test_070_071_identifiers);
    RUN("OBX-071", "log lines name the store being processed", test_070_071_identifiers);
    RUN("OBX-072", "the router returns the store of a key", test_072_073_router);
    RUN("OBX-073", "an unknown key is not found (an empty one invalid)", test_072_073_router);
    RUN("OBX-074", "GUID keys by their canonical text", test_074_guid_key);
    RUN("OBX-074-SPELLING", "a GUID key finds its database in upper case or braces", test_074_guid_spelling);
    RUN("OBX-075", "discovery runs at start and every refresh interval", test_075_079_discovery);
    RUN("OBX-076", "the refresh interval defaults to 5 minutes", test_075_079_discovery);
    RUN("OBX-077", "a new database gets a store", test_075_079_discovery);
    RUN("OBX-078", "a removed database's store is closed", test_075_079_discovery);
    RUN("OBX-079", "unchanged databases keep their stores", test_075_079_discovery);
    RUN("CORE-RENEW-PROVIDER-MOVED", "a refresh that moves a tenant during renewal: the next round renews in the new database, no freed store used", test_renew_moved);
    RUN("CORE-RENEW-PROVIDER-DROPPED", "discovery drops the tenant whose leases were renewed: its renewal connection closes, destroy uses no freed store", test_renew_dropped);
    RUN("OBX-REAP-ALL", "expired leases are reaped in every store, not only the first", test_reap_every_store);
    RUN("OBX-121", "router lookups reuse the open stores", test_121_cached);
    RUN("IBX-PROVIDER-RETRY", "an inbox fixed-list database that could not be opened is opened when its wait is over", test_ibx_fixed_retry);
    RUN("IBX-085", "a store per database", test_ibx_085_086);
    RUN("IBX-086", "the dispatcher selects a store every round", test_ibx_087);
    RUN("IBX-087", "round-robin over inbox stores", test_ibx_087);
    RUN("IBX-088", "drain-first over inbox stores", test_ibx_088);
    RUN("IBX-089", "stable store identifiers", test_ibx_089_092);
    RUN("IBX-090", "log lines name the store", test_ibx_087);
    RUN("IBX-091", "the router returns the inbox of a key", test_ibx_089_092);
    RUN("IBX-092", "an unknown key is not found", test_ibx_089_092);
    RUN("IBX-093", "discovery refreshes periodically", test_ibx_093_097);
    RUN("IBX-094", "the refresh interval defaults to 5 minutes", test_ibx_093_097);
    RUN("IBX-095", "new databases get stores", test_ibx_093_097);
    RUN("IBX-096", "removed databases lose their stores", test_ibx_093_097);
    RUN("IBX-097", "unchanged stores are not recreated", test_ibx_093_097);
    RUN("IBX-123", "router lookups reuse the open stores", test_ibx_089_092);
    return tt_done();
}

/* Torture scenario 4: allocation failure at every point.
 *
 * A representative scenario per header (open, deploy, enqueue, batch
 * enqueue, claim, ack, abandon, fail, reap, get, stats, cleanup, joins,
 * dispatch with handlers, a provider with discovery over two more
 * databases, close) runs on real SQLite files through ODBC, with the
 * allocator hook failing its k-th call, for every k up to the fault-free
 * run's count: once (only call k fails) and sticky (k and every call after
 * it, until the failing step has returned; then memory is "freed").
 * A step that fails must return *_ERR_NO_MEMORY; it is then called again
 * and must succeed. At the end every block is freed (the hook's live count,
 * and LeakSanitizer when built with it) and the tables equal the fault-free
 * run's. Leases and backoff delays are expired by SQL before the final drain
 * so the end state does not depend on time.
 *
 * Usage: oom DIR [obx|ibx|both]      DIR holds the scratch SQLite files.
 * TORTURE_OOM_STRIDE=N (default 1: every point) fails only every N-th call,
 * the sticky pass starting half a stride later: a shorter run (tests/torture/
 * run.sh uses it for the second build of the same engine, OBX_SQLITE3_API). */
#define OBX_IMPLEMENTATION
#include "../../obx.h"
#define IBX_IMPLEMENTATION
#include "../../ibx.h"
#include "tort.h"
#include "../tt.h"

#ifdef OBX_SQLITE3_API /* the backend in the result lines */
#define TORT_BACKEND "sqlite3"
#else
#define TORT_BACKEND "sqlite"
#endif

#include <unistd.h>

static char g_conn[3][1400];
static char g_files[3][400];
static char g_fail[2048];   /* first violation of the current run */
static int g_verbose;
static long g_oom_retries; /* handler retries caused by an injected failure */

static void violation(const char *fmt, ...) TORT_PRINTF(1, 2);
static void violation(const char *fmt, ...) {
    va_list ap;
    if (g_fail[0]) return;
    va_start(ap, fmt);
    vsnprintf(g_fail, sizeof g_fail, fmt, ap);
    va_end(ap);
}

static void quiet_log(obx_log_level level, const char *id, const char *msg, void *user) {
    (void)user;
    if (g_verbose) fprintf(stderr, "  log %d [%s] %s\n", (int)level, id, msg);
}
static void iquiet_log(ibx_log_level level, const char *id, const char *msg, void *user) {
    quiet_log((obx_log_level)level, id, msg, user);
}

static void remove_files(void) {
    int i;
    for (i = 0; i < 3; i++) {
        char p[sizeof g_files + 16];
        snprintf(p, sizeof p, "%s", g_files[i]);
        unlink(p);
        snprintf(p, sizeof p, "%s-wal", g_files[i]);
        unlink(p);
        snprintf(p, sizeof p, "%s-shm", g_files[i]);
        unlink(p);
        snprintf(p, sizeof p, "%s-journal", g_files[i]);
        unlink(p);
    }
}

/* Raw SQL on one of the files (expire leases and delays, dump tables). */
static int raw(int db, const char *sql, char *out, size_t cap) {
    tort_db t;
    char err[600] = "";
    int rc;
    if (tort_db_open(&t, g_conn[db], err, sizeof err) != 0) {
        violation("raw connect failed: %s", err);
        return -1;
    }
    rc = tort_db_query(&t, sql, out, cap, err, sizeof err);
    if (rc != 0) violation("raw SQL failed: %s: %s", sql, err);
    tort_db_close(&t);
    return rc;
}

/* ---- the outbox scenario ---------------------------------------------------------- */

#define NSTORE_MSGS 8
typedef struct octx {
    obx_store *s;
    obx_dispatcher *d, *pd;
    obx_provider *p;
    char owner[37];
    char ids[NSTORE_MSGS][37];   /* work item ids by enqueue order */
    char join[37];
    char claimed[3][16][37];     /* ack / abandon / fail lists from the claim */
    int nclaimed[3];
    int handled;
} octx;

static const char *const k_opay[] = {"a1", "r1", "f1", "d1"};
static const char *const k_obatch[] = {"a2", "r2", "f2", "a3"};

static obx_outcome ohandler(const obx_message *m, char *error, size_t cap, void *user) {
    octx *c = (octx *)user;
    c->handled++;
    if (m->payload[0] == 'd') {
        snprintf(error, cap, "dead by design");
        return OBX_DEAD;
    }
    if (m->payload[0] == 'r' && m->retry_count == 0) {
        snprintf(error, cap, "retry by design");
        return OBX_RETRY;
    }
    return OBX_DONE;
}

static int odiscover(obx_database *out, int cap, void *user) {
    (void)user;
    if (cap < 2) return -1;
    out[0].id = "site-b";
    out[0].connection_string = g_conn[1];
    out[1].id = "site-c";
    out[1].connection_string = g_conn[2];
    return 2;
}

static obx_store_desc odesc(void) {
    obx_store_desc d;
    memset(&d, 0, sizeof d);
    d.deploy_schema = 1;
    d.store_id = "oom";
    /* DEBUG: every line formatted, more allocation points */
    TT_STORE_HOOKS(d, tort_malloc, tort_realloc, tort_free, quiet_log, OBX_LOG_DEBUG);
    return d;
}

static obx_result odrain(obx_dispatcher *d, int rounds_empty_needed) {
    int empty = 0, guard = 0;
    while (empty < rounds_empty_needed && guard++ < 200) {
        obx_run_stats st;
        obx_result r = obx_dispatcher_run_once(d, &st);
        if (r < 0) return r;
        if (r == OBX_EMPTY) empty++;
        else empty = 0;
    }
    return guard >= 200 ? OBX_ERR_STATE : OBX_OK;
}

/* One step; returns its result. `i` selects the step; -1 past the end. */
static obx_result ostep(octx *c, int i, const char **name) {
    obx_result r = OBX_OK;
    int k, round;
    switch (i) {
    case 0: {
        obx_store_desc d = odesc();
        *name = "open";
        d.connection_string = g_conn[0];
        c->s = NULL;
        r = obx_store_open(&d, &c->s);
        if (r != OBX_OK) {
            obx_store_close(c->s);
            c->s = NULL;
        }
        return r;
    }
    case 1: *name = "deploy"; return obx_store_deploy(c->s);
    case 2: *name = "owner_token"; return obx_owner_token(c->s, c->owner);
    case 3: case 4: case 5: case 6: {
        obx_new_message m;
        *name = "enqueue";
        memset(&m, 0, sizeof m);
        m.topic = "t";
        m.payload = k_opay[i - 3];
        m.payload_len = OBX_NTS;
        m.correlation_id = "corr";
        return obx_enqueue(c->s, &m, c->ids[i - 3]);
    }
    case 7: {
        obx_new_message m[4];
        char out[4][37];
        *name = "enqueue_batch";
        memset(m, 0, sizeof m);
        for (k = 0; k < 4; k++) {
            m[k].topic = "t";
            m[k].payload = k_obatch[k];
            m[k].payload_len = OBX_NTS;
        }
        r = obx_enqueue_batch(c->s, NULL, m, 4, out);
        if (r == OBX_OK) memcpy(c->ids[4], out, sizeof out);
        return r;
    }
    case 8: *name = "join_start"; return obx_join_start(c->s, "g1", 2, "meta", c->join);
    case 9: *name = "join_attach"; return obx_join_attach(c->s, c->join, c->ids[0]);
    case 10: *name = "join_attach"; return obx_join_attach(c->s, c->join, c->ids[4]);
    case 11: {
        obx_join_wait w;
        char id[37];
        *name = "join_enqueue_wait";
        memset(&w, 0, sizeof w);
        w.join_id = c->join;
        w.on_complete_topic = "t";
        w.on_complete_payload = "a-joined";
        return obx_join_enqueue_wait(c->s, NULL, &w, id);
    }
    case 12: {
        const obx_message *ms = NULL;
        int n = 0;
        *name = "claim";
        r = obx_claim(c->s, c->owner, 60, 16, &ms, &n);
        if (r != OBX_OK) return r;
        for (k = 0; k < n; k++) {
            int cat = ms[k].payload[0] == 'a' ? 0 : ms[k].payload[0] == 'r' ? 1 :
                      ms[k].payload[0] == 'f' ? 2 : -1;
            if (cat >= 0 && c->nclaimed[cat] < 16)
                memcpy(c->claimed[cat][c->nclaimed[cat]++], ms[k].id, 37);
        }
        /* d1 and the join.wait message stay leased: the final drain frees them. */
        return r;
    }
    case 13: case 14: case 15: {
        const char *ids[16];
        int cat = i - 13;
        int64_t changed = -1;
        for (k = 0; k < c->nclaimed[cat]; k++) ids[k] = c->claimed[cat][k];
        if (cat == 0) { *name = "ack"; r = obx_ack(c->s, c->owner, ids, c->nclaimed[0], &changed); }
        if (cat == 1) { *name = "abandon"; r = obx_abandon(c->s, c->owner, ids, c->nclaimed[1], "later", 0, &changed); }
        if (cat == 2) { *name = "fail"; r = obx_fail(c->s, c->owner, ids, c->nclaimed[2], "boom", &changed); }
        if (r == OBX_OK && changed != c->nclaimed[cat]) violation("%s changed %lld of %d", *name, (long long)changed, c->nclaimed[cat]);
        return r;
    }
    case 16: { int64_t n; *name = "reap"; return obx_reap(c->s, &n); }
    case 17: { obx_message m; *name = "get"; return obx_get(c->s, c->ids[0], &m); }
    case 18: { int64_t a, b; *name = "queue_stats"; return obx_queue_stats(c->s, &a, &b); }
    case 19: { int64_t n; *name = "cleanup"; return obx_cleanup(c->s, 86400000, 2, &n); }
    case 20: { obx_join j; *name = "join_get"; return obx_join_get(c->s, c->join, &j); }
    case 21: {
        obx_dispatcher_desc d;
        *name = "dispatcher_create";
        memset(&d, 0, sizeof d);
        d.store = c->s;
        d.batch_size = 3;
        d.lease_seconds = 60;
        r = obx_dispatcher_create(&d, &c->d);
        if (r == OBX_OK) r = obx_dispatcher_on(c->d, "t", ohandler, c);
        if (r == OBX_OK) r = obx_dispatcher_on(c->d, "join.wait", obx_join_wait_handler, NULL);
        if (r != OBX_OK) {
            obx_dispatcher_destroy(c->d);
            c->d = NULL;
        }
        return r;
    }
    case 22: *name = "dispatch"; return odrain(c->d, 1);
    case 23: {
        obx_provider_desc d;
        *name = "provider_create";
        memset(&d, 0, sizeof d);
        d.store = odesc();
        d.discover = odiscover;
        r = obx_provider_create(&d, &c->p);
        /* A store that could not be opened (no memory) is left out and tried
         * again on its own backoff (the documented behaviour): the step
         * failed, and is called again. */
        if (r == OBX_OK && obx_provider_count(c->p) != 2) r = OBX_ERR_NO_MEMORY;
        if (r != OBX_OK) {
            obx_provider_destroy(c->p);
            c->p = NULL;
        }
        return r;
    }
    case 24: case 25: {
        obx_store *s = NULL;
        obx_new_message m;
        *name = "router_enqueue";
        r = obx_router_get(c->p, i == 24 ? "site-b" : "site-c", &s);
        if (r != OBX_OK) return r;
        memset(&m, 0, sizeof m);
        m.topic = "t";
        m.payload = i == 24 ? "a-b" : "r-c";
        m.payload_len = OBX_NTS;
        return obx_enqueue(s, &m, NULL);
    }
    case 26: *name = "provider_refresh"; return obx_provider_refresh(c->p);
    case 27: {
        obx_dispatcher_desc d;
        *name = "dispatcher_create(provider)";
        memset(&d, 0, sizeof d);
        d.provider = c->p;
        d.selection = OBX_SELECT_DRAIN_FIRST;
        r = obx_dispatcher_create(&d, &c->pd);
        if (r == OBX_OK) r = obx_dispatcher_on(c->pd, "*", ohandler, c);
        if (r != OBX_OK) {
            obx_dispatcher_destroy(c->pd);
            c->pd = NULL;
        }
        return r;
    }
    case 28: *name = "dispatch(provider)"; return odrain(c->pd, 2);
    case 29: {
        /* Time passes: leases and backoff delays expire (by SQL, so that the
         * end state does not depend on timing), then everything drains. */
        *name = "expire+drain";
        /* A fault between a handler and its settle leaves a lease, and a retry
         * after it a delay: rounds until nothing is leased or waiting. */
        for (round = 0; round < 4 && r == OBX_OK; round++) {
            char left[64] = "";
            int64_t n;
            for (k = 0; k < 3; k++)
                if (raw(k, "UPDATE \"Outbox\" SET \"LockedUntil\" = 0 WHERE \"Status\" = 1", NULL, 0) != 0 ||
                    raw(k, "UPDATE \"Outbox\" SET \"NextAttemptAt\" = 0 WHERE \"Status\" = 0", NULL, 0) != 0)
                    return OBX_ERR_DB;
            r = obx_reap(c->s, &n);
            for (k = 0; k < obx_provider_count(c->p) && r == OBX_OK; k++)
                r = obx_reap(obx_provider_store(c->p, k), &n);
            if (r == OBX_OK) r = odrain(c->d, 1);
            if (r == OBX_OK) r = odrain(c->pd, 2);
            for (k = 0; k < 3; k++)
                raw(k, "SELECT COUNT(*) FROM \"Outbox\" WHERE \"Status\" IN (0, 1)", left, sizeof left);
            if (strcmp(left, "0\n0\n0\n") == 0) break;
        }
        return r;
    }
    case 30:
        *name = "close";
        obx_dispatcher_destroy(c->d);
        obx_dispatcher_destroy(c->pd);
        obx_provider_destroy(c->p);
        obx_store_close(c->s);
        c->d = c->pd = NULL;
        c->p = NULL;
        c->s = NULL;
        return OBX_OK;
    default: return (obx_result)99;
    }
}

static void odump(char *out, size_t cap) {
    int k;
    out[0] = 0;
    for (k = 0; k < 3; k++) {
        /* join.wait rows carry the (random) join id: compare their topic only.
         * A retry that obx_join_wait_handler returned for its own failed
         * allocation is counted (g_oom_retries), not compared. */
        raw(k, "SELECT \"Topic\", CASE WHEN \"Topic\" = 'join.wait' THEN '' ELSE \"Payload\" END, "
               "\"Status\", \"IsProcessed\", "
               /* obx_join_wait_handler reports its own out-of-memory as a retry */
               "CASE WHEN \"LastError\" LIKE '%out of memory' THEN '0' ELSE \"RetryCount\" || COALESCE(\"LastError\", '') END, "
               "COALESCE(\"CorrelationId\", '') = 'corr', "
               "\"LockedUntil\" IS NULL, \"OwnerToken\" IS NULL FROM \"Outbox\" ORDER BY 2, 1", out, cap);
        raw(k, "SELECT COUNT(*) FROM \"Outbox\"", out, cap);
        {
            char n[32] = "";
            raw(k, "SELECT COUNT(*) FROM \"Outbox\" WHERE \"LastError\" LIKE '%out of memory'", n, sizeof n);
            g_oom_retries += atol(n);
        }
    }
    raw(0, "SELECT \"GroupingKey\", \"ExpectedSteps\", \"CompletedSteps\", \"FailedSteps\", \"Status\", "
           "\"Metadata\" FROM \"OutboxJoin\" ORDER BY 1", out, cap);
    raw(0, "SELECT \"Status\", COUNT(*) FROM \"OutboxJoinMember\" GROUP BY 1 ORDER BY 1", out, cap);
}

/* ---- the inbox scenario ------------------------------------------------------------ */

typedef struct ictx {
    ibx_store *s;
    ibx_dispatcher *d, *pd;
    ibx_provider *p;
    char owner[37];
    char claimed[3][16][64];
    int nclaimed[3];
} ictx;

static const char *const k_ipay[] = {"a1", "r1", "f1", "d1", "a2", "r2"};

static ibx_outcome ihandler(const ibx_message *m, char *error, size_t cap, void *user) {
    (void)user;
    if (m->payload[0] == 'd') {
        snprintf(error, cap, "dead by design");
        return IBX_DEAD;
    }
    if (m->payload[0] == 'r' && m->attempt == 0) {
        snprintf(error, cap, "retry by design");
        return IBX_RETRY;
    }
    return IBX_DONE;
}

static int idiscover(ibx_database *out, int cap, void *user) {
    (void)user;
    if (cap < 2) return -1;
    out[0].id = "site-b";
    out[0].connection_string = g_conn[1];
    out[1].id = "site-c";
    out[1].connection_string = g_conn[2];
    return 2;
}

static ibx_store_desc idesc(void) {
    ibx_store_desc d;
    memset(&d, 0, sizeof d);
    d.deploy_schema = 1;
    d.store_id = "oom";
    TT_STORE_HOOKS(d, tort_malloc, tort_realloc, tort_free, iquiet_log, IBX_LOG_DEBUG);
    return d;
}

static ibx_result idrain(ibx_dispatcher *d, int rounds_empty_needed) {
    int empty = 0, guard = 0;
    while (empty < rounds_empty_needed && guard++ < 200) {
        ibx_run_stats st;
        ibx_result r = ibx_dispatcher_run_once(d, &st);
        if (r < 0) return r;
        if (r == IBX_EMPTY) empty++;
        else empty = 0;
    }
    return guard >= 200 ? IBX_ERR_STATE : IBX_OK;
}

static ibx_result istep(ictx *c, int i, const char **name) {
    ibx_result r = IBX_OK;
    int k, round;
    switch (i) {
    case 0: {
        ibx_store_desc d = idesc();
        *name = "open";
        d.connection_string = g_conn[0];
        c->s = NULL;
        r = ibx_store_open(&d, &c->s);
        if (r != IBX_OK) {
            ibx_store_close(c->s);
            c->s = NULL;
        }
        return r;
    }
    case 1: *name = "deploy"; return ibx_store_deploy(c->s);
    case 2: *name = "owner_token"; return ibx_owner_token(c->s, c->owner);
    case 3: {
        int done = -1;
        unsigned char h[32];
        *name = "already_processed";
        ibx_sha256("seen-1", 6, h);
        r = ibx_already_processed(c->s, "seen-1", "src", h, 32, &done);
        if (r == IBX_OK && done != 0) violation("already_processed(new) said %d", done);
        return r;
    }
    case 4: *name = "mark_processing"; return ibx_mark_processing(c->s, "seen-1", "src");
    case 5: case 6: case 7: case 8: case 9: case 10: {
        ibx_new_message m;
        unsigned char h[32];
        int enq = -1;
        *name = "enqueue";
        memset(&m, 0, sizeof m);
        m.topic = "t";
        m.source = "src";
        m.message_id = k_ipay[i - 5];
        m.payload = k_ipay[i - 5];
        m.payload_len = IBX_NTS;
        ibx_sha256(m.payload, 2, h);
        m.hash = h;
        m.hash_len = 32;
        r = ibx_enqueue(c->s, &m, &enq);
        if (r == IBX_OK && enq != 1) violation("enqueue of a new message: enqueued=%d", enq);
        return r;
    }
    case 11: {
        const ibx_message *ms = NULL;
        int n = 0;
        *name = "claim";
        r = ibx_claim(c->s, c->owner, 60, 16, &ms, &n);
        if (r != IBX_OK) return r;
        for (k = 0; k < n; k++) {
            int cat = ms[k].payload[0] == 'a' ? 0 : ms[k].payload[0] == 'r' ? 1 :
                      ms[k].payload[0] == 'f' ? 2 : -1;
            if (cat >= 0 && c->nclaimed[cat] < 16)
                snprintf(c->claimed[cat][c->nclaimed[cat]++], 64, "%s", ms[k].message_id);
        }
        return r;
    }
    case 12: case 13: case 14: {
        ibx_key keys[16];
        int cat = i - 12;
        int64_t changed = -1, delay = 1;
        for (k = 0; k < c->nclaimed[cat]; k++) {
            keys[k].source = "src";
            keys[k].message_id = c->claimed[cat][k];
        }
        if (cat == 0) { *name = "ack"; r = ibx_ack(c->s, c->owner, keys, c->nclaimed[0], &changed); }
        if (cat == 1) { *name = "abandon"; r = ibx_abandon(c->s, c->owner, keys, c->nclaimed[1], "later", delay, &changed); }
        if (cat == 2) { *name = "fail"; r = ibx_fail(c->s, c->owner, keys, c->nclaimed[2], "boom", &changed); }
        if (r == IBX_OK && changed != c->nclaimed[cat]) violation("%s changed %lld of %d", *name, (long long)changed, c->nclaimed[cat]);
        return r;
    }
    case 15: *name = "mark_processed"; return ibx_mark_processed(c->s, "seen-1", "src");
    case 16: {
        int done = -1;
        *name = "already_processed(done)";
        r = ibx_already_processed(c->s, "seen-1", "src", NULL, 0, &done);
        if (r == IBX_OK && done != 1) violation("already_processed(done) said %d", done);
        return r;
    }
    case 17: {
        ibx_new_message m;
        int enq = -1;
        *name = "enqueue(done again)";
        memset(&m, 0, sizeof m);
        m.topic = "t";
        m.source = "src";
        m.message_id = "seen-1";
        m.payload = "a-again";
        m.payload_len = IBX_NTS;
        r = ibx_enqueue(c->s, &m, &enq);
        if (r == IBX_OK && enq != 0) violation("a Done message was enqueued again");
        return r;
    }
    case 18: *name = "mark_dead"; return ibx_mark_dead(c->s, "d1", "src");
    case 19: { int64_t n; *name = "reap"; return ibx_reap(c->s, &n); }
    case 20: { ibx_message m; *name = "get"; return ibx_get(c->s, "a1", "src", &m); }
    case 21: { int64_t a, b; *name = "queue_stats"; return ibx_queue_stats(c->s, &a, &b); }
    case 22: { int64_t n; *name = "cleanup"; return ibx_cleanup(c->s, 86400000, 2, &n); }
    case 23: {
        ibx_dispatcher_desc d;
        *name = "dispatcher_create";
        memset(&d, 0, sizeof d);
        d.store = c->s;
        d.batch_size = 3;
        d.lease_seconds = 60;
        r = ibx_dispatcher_create(&d, &c->d);
        if (r == IBX_OK) r = ibx_dispatcher_on(c->d, "t", ihandler, c);
        if (r != IBX_OK) {
            ibx_dispatcher_destroy(c->d);
            c->d = NULL;
        }
        return r;
    }
    case 24: *name = "dispatch"; return idrain(c->d, 1);
    case 25: {
        ibx_provider_desc d;
        *name = "provider_create";
        memset(&d, 0, sizeof d);
        d.store = idesc();
        d.discover = idiscover;
        r = ibx_provider_create(&d, &c->p);
        if (r == IBX_OK && ibx_provider_count(c->p) != 2) r = IBX_ERR_NO_MEMORY; /* as obx's */
        if (r != IBX_OK) {
            ibx_provider_destroy(c->p);
            c->p = NULL;
        }
        return r;
    }
    case 26: case 27: {
        ibx_store *s = NULL;
        ibx_new_message m;
        int enq = 0;
        *name = "router_enqueue";
        r = ibx_router_get(c->p, i == 26 ? "site-b" : "site-c", &s);
        if (r != IBX_OK) return r;
        memset(&m, 0, sizeof m);
        m.topic = "t";
        m.source = "src";
        m.message_id = i == 26 ? "a-b" : "r-c";
        m.payload = m.message_id;
        m.payload_len = IBX_NTS;
        return ibx_enqueue(s, &m, &enq);
    }
    case 28: *name = "provider_refresh"; return ibx_provider_refresh(c->p);
    case 29: {
        ibx_dispatcher_desc d;
        *name = "dispatcher_create(provider)";
        memset(&d, 0, sizeof d);
        d.provider = c->p;
        r = ibx_dispatcher_create(&d, &c->pd);
        if (r == IBX_OK) r = ibx_dispatcher_on(c->pd, "*", ihandler, c);
        if (r != IBX_OK) {
            ibx_dispatcher_destroy(c->pd);
            c->pd = NULL;
        }
        return r;
    }
    case 30: *name = "dispatch(provider)"; return idrain(c->pd, 2);
    case 31: {
        *name = "expire+drain";
        for (round = 0; round < 4 && r == IBX_OK; round++) {
            char left[64] = "";
            int64_t n;
            for (k = 0; k < 3; k++)
                if (raw(k, "UPDATE \"Inbox\" SET \"LockedUntil\" = 0 WHERE \"Status\" = 'Processing' "
                           "AND \"LockedUntil\" IS NOT NULL", NULL, 0) != 0 ||
                    raw(k, "UPDATE \"Inbox\" SET \"NextAttemptAt\" = 0 WHERE \"Status\" = 'Processing'", NULL, 0) != 0)
                    return IBX_ERR_DB;
            r = ibx_reap(c->s, &n);
            for (k = 0; k < ibx_provider_count(c->p) && r == IBX_OK; k++)
                r = ibx_reap(ibx_provider_store(c->p, k), &n);
            if (r == IBX_OK) r = idrain(c->d, 1);
            if (r == IBX_OK) r = idrain(c->pd, 2);
            for (k = 0; k < 3; k++)
                raw(k, "SELECT COUNT(*) FROM \"Inbox\" WHERE \"Status\" = 'Processing'", left, sizeof left);
            if (strcmp(left, "0\n0\n0\n") == 0) break;
        }
        return r;
    }
    case 32:
        *name = "close";
        ibx_dispatcher_destroy(c->d);
        ibx_dispatcher_destroy(c->pd);
        ibx_provider_destroy(c->p);
        ibx_store_close(c->s);
        c->d = c->pd = NULL;
        c->p = NULL;
        c->s = NULL;
        return IBX_OK;
    default: return (ibx_result)99;
    }
}

static void idump(char *out, size_t cap) {
    int k;
    out[0] = 0;
    for (k = 0; k < 3; k++)
        raw(k, "SELECT \"Source\", \"MessageId\", \"Topic\", \"Payload\", hex(\"Hash\"), \"Status\", "
               "\"Attempt\", COALESCE(\"LastError\", ''), \"LockedUntil\" IS NULL, \"OwnerToken\" IS NULL "
               "FROM \"Inbox\" ORDER BY 1, 2", out, cap);
}

/* ---- the runner --------------------------------------------------------------------- */

typedef struct run_result {
    long allocs;      /* allocator calls in the run */
    int nomem;        /* steps that returned NO_MEMORY */
    int ok;           /* no violation */
} run_result;

/* Run the whole scenario with the allocator failing call `fail_at` (0: never). */
static run_result run_once(int inbox, long fail_at, int sticky, char *dump, size_t cap) {
    run_result rr = {0, 0, 1};
    octx oc;
    ictx ic;
    int i;
    memset(&oc, 0, sizeof oc);
    memset(&ic, 0, sizeof ic);
    remove_files();
    g_fail[0] = 0;
    memset(&g_tort_alloc, 0, sizeof g_tort_alloc);
    g_tort_alloc.fail_at = fail_at;
    g_tort_alloc.sticky = sticky;
    for (i = 0;; i++) {
        const char *name = "?";
        int attempt, last = 0, r;
        for (attempt = 0; attempt < 3; attempt++) {
            if (inbox) {
                ibx_result ir = istep(&ic, i, &name);
                r = (int)ir;
            } else {
                obx_result orr = ostep(&oc, i, &name);
                r = (int)orr;
            }
            if (r == 99) { last = 1; break; }
            if (r == 0) break;
            if (r == (inbox ? (int)IBX_ERR_NO_MEMORY : (int)OBX_ERR_NO_MEMORY) && g_tort_alloc.failed > 0) {
                rr.nomem++;
                tort_alloc_heal(); /* memory comes back: the same call must now work */
                continue;
            }
            violation("step %d %s returned %s (%s; last error: %s) after %ld failed allocations",
                      i, name, inbox ? ibx_result_str((ibx_result)r) : obx_result_str((obx_result)r),
                      attempt ? "on the call after a NO_MEMORY" : "first call",
                      inbox ? (ic.s ? ibx_store_last_error(ic.s)->message : "-")
                            : (oc.s ? obx_store_last_error(oc.s)->message : "-"),
                      g_tort_alloc.failed);
            break;
        }
        if (last || g_fail[0]) break;
        if (attempt == 3) {
            violation("step %d %s still fails after memory came back", i, name);
            break;
        }
    }
    if (g_fail[0]) {
        /* Clean up whatever is left so that the next run starts fresh. */
        obx_dispatcher_destroy(oc.d);
        obx_dispatcher_destroy(oc.pd);
        obx_provider_destroy(oc.p);
        obx_store_close(oc.s);
        ibx_dispatcher_destroy(ic.d);
        ibx_dispatcher_destroy(ic.pd);
        ibx_provider_destroy(ic.p);
        ibx_store_close(ic.s);
    }
    rr.allocs = g_tort_alloc.calls;
    if (g_tort_alloc.live != 0) violation("%ld blocks still allocated after close", g_tort_alloc.live);
    if (dump) {
        if (inbox) idump(dump, cap);
        else odump(dump, cap);
    }
    rr.ok = g_fail[0] == 0;
    return rr;
}

static int scenario(int inbox) {
    static char want[1 << 15], got[1 << 15];
    const char *hdr = inbox ? "inbox" : "outbox";
    run_result base = run_once(inbox, 0, 0, want, sizeof want);
    long k, K, runs = 0, nomem_steps = 0, violations = 0, diffs = 0;
    long stride = getenv("TORTURE_OOM_STRIDE") ? atol(getenv("TORTURE_OOM_STRIDE")) : 1;
    int sticky;
    int64_t t0 = tort_now_ms();
    g_oom_retries = 0;
    if (!base.ok || base.nomem) {
        printf("torture: oom %s FAILED: the fault-free run failed: %s\n", hdr, g_fail);
        return 1;
    }
    if (g_verbose) fprintf(stderr, "fault-free %s state:\n%s", hdr, want);
    K = base.allocs;
    for (sticky = 0; sticky <= 1; sticky++) {
        if (stride < 1) stride = 1;
        for (k = 1 + (sticky ? stride / 2 : 0); k <= K; k += stride) {
            run_result rr = run_once(inbox, k, sticky, got, sizeof got);
            runs++;
            nomem_steps += rr.nomem;
            if (!rr.ok) {
                if (violations++ < 5) printf("  oom %s k=%ld %s: %s\n", hdr, k, sticky ? "sticky" : "once", g_fail);
            } else if (strcmp(got, want) != 0) {
                if (diffs++ < 3)
                    printf("  oom %s k=%ld %s: final state differs from the fault-free run\n--- want\n%s--- got\n%s",
                           hdr, k, sticky ? "sticky" : "once", want, got);
            }
        }
    }
    printf("torture: oom %s " TORT_BACKEND " K=%ld stride=%ld runs=%ld nomem_returns=%ld handler_oom_retries=%ld "
           "violations=%ld state_diffs=%ld leaks=%s time=%.1fs%s\n",
           hdr, K, stride, runs, nomem_steps, g_oom_retries, violations, diffs, violations ? "see above" : "0",
           (double)(tort_now_ms() - t0) / 1000.0, violations || diffs || nomem_steps == 0 ? " FAILED" : "");
    return violations || diffs || nomem_steps == 0;
}

int main(int argc, char **argv) {
    const char *which = argc > 2 ? argv[2] : "both";
    int i, fails = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [obx|ibx|both]\n", argv[0]);
        return 2;
    }
    g_verbose = getenv("TORTURE_VERBOSE") != NULL;
    for (i = 0; i < 3; i++) {
        snprintf(g_files[i], sizeof g_files[i], "%s/oom-%d.db", argv[1], i);
        snprintf(g_conn[i], sizeof g_conn[i],
                 "Driver={SQLite3};Database=%s;JournalMode=WAL;SyncPragma=OFF;Timeout=5000;", g_files[i]);
    }
    if (strcmp(which, "ibx") != 0) fails += scenario(0);
    if (strcmp(which, "obx") != 0) fails += scenario(1);
    remove_files();
    return fails ? 1 : 0;
}

/* Torture scenario 3, disk full (SQLite): the database may not grow past
 * PRAGMA max_page_count. Enqueue until the database is full: the failing
 * enqueue must return an error whose message names the cause, every message
 * committed before stays, the file passes integrity_check, and once space is
 * "freed" (the limit raised) enqueue and dispatch work again and everything
 * is handled. Both headers. The store adopts the test's connection
 * (desc.hdbc) because the limit is a setting of one connection.
 *
 * Usage: diskfull FILE */
#define OBX_IMPLEMENTATION
#include "../../obx.h"
#define IBX_IMPLEMENTATION
#include "../../ibx.h"
#include "tort.h"

#ifdef OBX_SQLITE3_API /* the backend in the result lines */
#define TORT_BACKEND "sqlite3"
#else
#define TORT_BACKEND "sqlite"
#endif

#include <unistd.h>

static char g_conn[1200];
static int g_handled;

static obx_outcome ohandle(const obx_message *m, char *e, size_t c, void *u) {
    (void)m; (void)e; (void)c; (void)u;
    g_handled++;
    return OBX_DONE;
}
static ibx_outcome ihandle(const ibx_message *m, char *e, size_t c, void *u) {
    (void)m; (void)e; (void)c; (void)u;
    g_handled++;
    return IBX_DONE;
}

static void remove_db(const char *file) {
    char p[1300];
    unlink(file);
    snprintf(p, sizeof p, "%s-wal", file);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", file);
    unlink(p);
    snprintf(p, sizeof p, "%s-journal", file);
    unlink(p);
}

/* Enqueue message number i; returns the result and copies the error text. */
static int enqueue(int inbox, void *store, long i, char *err, size_t cap) {
    static char payload[2049];
    char id[32];
    memset(payload, 'x', sizeof payload - 1);
    snprintf(id, sizeof id, "m%ld", i);
    if (inbox) {
        ibx_new_message m;
        int enq = 0;
        ibx_result r;
        memset(&m, 0, sizeof m);
        m.topic = "t";
        m.source = "disk";
        m.message_id = id;
        m.payload = payload;
        m.payload_len = IBX_NTS;
        r = ibx_enqueue((ibx_store *)store, &m, &enq);
        if (r != IBX_OK) snprintf(err, cap, "%s: %s", ibx_result_str(r), ibx_store_last_error((ibx_store *)store)->message);
        return (int)r;
    } else {
        obx_new_message m;
        obx_result r;
        memset(&m, 0, sizeof m);
        m.topic = "t";
        m.payload = payload;
        m.payload_len = OBX_NTS;
        m.correlation_id = id;
        r = obx_enqueue((obx_store *)store, &m, NULL);
        if (r != OBX_OK) snprintf(err, cap, "%s: %s", obx_result_str(r), obx_store_last_error((obx_store *)store)->message);
        return (int)r;
    }
}

static int scenario(const char *file, int inbox) {
    const char *hdr = inbox ? "inbox" : "outbox";
    const char *table = inbox ? "\"Inbox\"" : "\"Outbox\"";
    tort_db db;
    obx_store *os = NULL;
    ibx_store *is = NULL;
    void *store;
    char err[600] = "", refused[700] = "", sql[256];
    long i, committed = 0, after = 0;
    long long rows, pages;
    int r, fail = 0, rounds;
    char ic[128] = "";

    remove_db(file);
    if (tort_db_open(&db, g_conn, err, sizeof err) != 0) {
        printf("torture: diskfull %s " TORT_BACKEND " FAILED: connect: %s\n", hdr, err);
        return 1;
    }
    if (inbox) {
        ibx_store_desc d;
        memset(&d, 0, sizeof d);
        d.hdbc = db.dbc;
        d.deploy_schema = 1;
        ibx_result x;
        d.hooks.logger.min_level = IBX_LOG_WARN;
        x = ibx_store_open(&d, &is);
        r = (int)x;
        store = is;
    } else {
        obx_store_desc d;
        memset(&d, 0, sizeof d);
        d.hdbc = db.dbc;
        d.deploy_schema = 1;
        obx_result x;
        d.hooks.logger.min_level = OBX_LOG_WARN;
        x = obx_store_open(&d, &os);
        r = (int)x;
        store = os;
    }
    if (r != 0) {
        printf("torture: diskfull %s " TORT_BACKEND " FAILED: open returned %d\n", hdr, r);
        return 1;
    }
    for (i = 0; i < 50; i++, committed++)
        if (enqueue(inbox, store, i, err, sizeof err) != 0) {
            printf("torture: diskfull %s " TORT_BACKEND " FAILED: enqueue before the limit: %s\n", hdr, err);
            return 1;
        }
    /* Full: a few pages more than now. */
    pages = tort_db_scalar(&db, "PRAGMA page_count");
    snprintf(sql, sizeof sql, "PRAGMA max_page_count = %lld", pages + 8);
    tort_db_query(&db, sql, NULL, 0, err, sizeof err);
    for (i = 50; i < 5000; i++) {
        r = enqueue(inbox, store, i, err, sizeof err);
        if (r != 0) {
            snprintf(refused, sizeof refused, "%s", err);
            break;
        }
        committed++;
    }
    snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM %s", table);
    rows = tort_db_scalar(&db, sql);
    /* Space comes back. */
    tort_db_query(&db, "PRAGMA max_page_count = 1073741823", NULL, 0, err, sizeof err);
    for (i = 5000; i < 5020; i++, after++)
        if (enqueue(inbox, store, i, err, sizeof err) != 0) break;
    g_handled = 0;
    for (rounds = 0; rounds < 1000; rounds++) {
        int rr;
        if (inbox) {
            ibx_dispatcher_desc d;
            ibx_dispatcher *disp = NULL;
            memset(&d, 0, sizeof d);
            d.store = is;
            d.batch_size = 100;
            if (ibx_dispatcher_create(&d, &disp) != IBX_OK) break;
            ibx_dispatcher_on(disp, "t", ihandle, NULL);
            do {
                ibx_result x = ibx_dispatcher_run_once(disp, NULL);
                rr = (int)x;
            } while (rr == 0);
            ibx_dispatcher_destroy(disp);
        } else {
            obx_dispatcher_desc d;
            obx_dispatcher *disp = NULL;
            memset(&d, 0, sizeof d);
            d.store = os;
            d.batch_size = 100;
            if (obx_dispatcher_create(&d, &disp) != OBX_OK) break;
            obx_dispatcher_on(disp, "t", ohandle, NULL);
            do {
                obx_result x = obx_dispatcher_run_once(disp, NULL);
                rr = (int)x;
            } while (rr == 0);
            obx_dispatcher_destroy(disp);
        }
        break;
    }
    tort_db_query(&db, "PRAGMA integrity_check", ic, sizeof ic, err, sizeof err);
    ibx_store_close(is);
    obx_store_close(os);
    tort_db_close(&db);

    fail = !refused[0] || strstr(refused, "full") == NULL || rows != committed || after != 20 ||
           g_handled != committed + after || strcmp(ic, "ok\n") != 0 || committed <= 50;
    printf("torture: diskfull %s " TORT_BACKEND " committed=%ld refused_at=%ld lost=%lld resumed=%ld/20 handled=%d/%ld "
           "integrity=%s error=\"%.160s\"%s\n",
           hdr, committed, committed, (long long)committed - rows, after, g_handled, committed + after,
           strcmp(ic, "ok\n") == 0 ? "ok" : "BAD", refused[0] ? refused : "(never refused)", fail ? " FAILED" : "");
    remove_db(file);
    return fail;
}

int main(int argc, char **argv) {
    int fails = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE\n", argv[0]);
        return 2;
    }
    snprintf(g_conn, sizeof g_conn, "Driver={SQLite3};Database=%s;JournalMode=WAL;SyncPragma=NORMAL;Timeout=5000;", argv[1]);
    fails += scenario(argv[1], 0);
    fails += scenario(argv[1], 1);
    return fails ? 1 : 0;
}

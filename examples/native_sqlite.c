/* native_sqlite.c: the outbox in a transaction of the sqlite3 C API.
 *
 * The application owns a sqlite3 * and writes its data through it; the
 * outbox message commits in the same transaction (obx_enqueue_sqlite3,
 * compiled because <sqlite3.h> comes before obx.h). The store itself still
 * speaks ODBC to the same file, to deliver.
 *
 *   1. An order row and its "order.created" message commit together.
 *   2. A rolled-back order leaves no message behind.
 *   3. The dispatcher delivers what committed.
 *
 *   cc -std=c99 -D_POSIX_C_SOURCE=200809L native_sqlite.c -lsqlite3 -lodbc -pthread
 *   ./a.out [file]      (default: native.db)
 */
#include <sqlite3.h> /* first: obx.h then declares obx_enqueue_sqlite3 */
#define OBX_IMPLEMENTATION
#include "../obx.h"

#include <stdio.h>
#include <string.h>

static obx_outcome on_order_created(const obx_message *m, char *error, size_t size, void *user) {
    (void)error; (void)size; (void)user;
    printf("order.created delivered: %s\n", m->payload);
    return OBX_DONE;
}

/* An order and its message in one transaction of the application's handle;
 * committed, or rolled back when `keep` is 0. */
static int place_order(obx_store *store, sqlite3 *db, int order, int keep) {
    char sql[128], payload[64], id[1][37];
    obx_new_message m = {0};
    obx_result r;
    snprintf(payload, sizeof payload, "{\"order\":%d}", order);
    m.topic = "order.created";
    m.payload = payload;
    m.payload_len = OBX_NTS;
    snprintf(sql, sizeof sql, "INSERT INTO orders (id, item) VALUES (%d, 'gateway-kit')", order);
    if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
        fprintf(stderr, "order: %s\n", sqlite3_errmsg(db));
        return 0;
    }
    r = obx_enqueue_sqlite3(store, db, &m, 1, id);
    if (r != OBX_OK || !keep) { /* on any error: roll back the order with it */
        if (r != OBX_OK) fprintf(stderr, "enqueue: %s\n", obx_store_last_error(store)->message);
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        if (r == OBX_OK) printf("order %d rolled back: no message\n", order);
        return r == OBX_OK;
    }
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) return 0;
    obx_notify(store); /* wakes a dispatcher at once, as after any _tx call */
    printf("order %d and its message committed together (message %s)\n", order, id[0]);
    return 1;
}

int main(int argc, char **argv) {
    const char *file = argc > 1 ? argv[1] : "native.db";
    char conn[512];
    obx_store_desc desc = {0};
    obx_dispatcher_desc ddesc = {0};
    obx_store *store = NULL;
    obx_dispatcher *dispatcher = NULL;
    obx_run_stats st;
    sqlite3 *db = NULL;
    int ok;

    /* The store (ODBC) and the application's handle (sqlite3) on one file. */
    snprintf(conn, sizeof conn, "Driver={SQLite3};Database=%s;JournalMode=WAL;Timeout=5000;", file);
    desc.connection_string = conn;
    desc.deploy_schema = 1;
    desc.store_id = "native";
    desc.hooks.logger.min_level = OBX_LOG_WARN;
    if (obx_store_open(&desc, &store) != OBX_OK) {
        fprintf(stderr, "open: %s\n", obx_store_last_error(store)->message);
        obx_store_close(store);
        return 1;
    }
    if (sqlite3_open(file, &db) != SQLITE_OK) {
        fprintf(stderr, "sqlite3_open: %s\n", sqlite3_errmsg(db));
        return 1;
    }
    sqlite3_busy_timeout(db, 5000);
    sqlite3_exec(db, "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT)", NULL, NULL, NULL);
    sqlite3_exec(db, "DELETE FROM orders", NULL, NULL, NULL);

    ok = place_order(store, db, 1001, 1) && place_order(store, db, 1002, 0);

    ddesc.store = store;
    obx_dispatcher_create(&ddesc, &dispatcher);
    obx_dispatcher_on(dispatcher, "order.created", on_order_created, NULL);
    ok = ok && obx_dispatcher_run_once(dispatcher, &st) == OBX_OK && st.done == 1;
    printf("%s\n", ok ? "done: 1 delivered, the rolled-back order left none" : "FAILED");

    obx_dispatcher_destroy(dispatcher);
    obx_store_close(store);
    sqlite3_close(db);
    return ok ? 0 : 1;
}

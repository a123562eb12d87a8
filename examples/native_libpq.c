/* native_libpq.c: the outbox in a transaction of libpq.
 *
 * The application writes its orders through its own PGconn; the message
 * commits in the same transaction (obx_enqueue_pq, compiled because
 * <libpq-fe.h> comes before obx.h). The store speaks ODBC to the same
 * database, to deliver.
 *
 *   1. An order row and its "order.created" message commit together.
 *   2. A rolled-back order leaves no message behind.
 *   3. The dispatcher delivers what committed.
 *
 *   cc -std=c99 -D_POSIX_C_SOURCE=200809L -I$(pg_config --includedir) native_libpq.c -lpq -lodbc -pthread
 *   ./a.out '<libpq conninfo>' '<ODBC connection string>'   (the same database)
 */
#include <libpq-fe.h> /* first: obx.h then declares obx_enqueue_pq */
#define OBX_IMPLEMENTATION
#include "../obx.h"

#include <stdio.h>
#include <string.h>

static int app_sql(PGconn *pg, const char *sql) {
    PGresult *res = PQexec(pg, sql);
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK;
    if (!ok) fprintf(stderr, "%s: %s", sql, PQerrorMessage(pg));
    PQclear(res);
    return ok;
}

static obx_outcome on_order_created(const obx_message *m, char *error, size_t size, void *user) {
    (void)error; (void)size; (void)user;
    printf("order.created delivered: %s\n", m->payload);
    return OBX_DONE;
}

/* An order and its message in one libpq transaction; committed, or rolled
 * back when `keep` is 0. */
static int place_order(obx_store *store, PGconn *pg, int order, int keep) {
    char sql[128], payload[64], id[1][37];
    obx_new_message m = {0};
    obx_result r;
    snprintf(payload, sizeof payload, "{\"order\":%d}", order);
    m.topic = "order.created";
    m.payload = payload;
    m.payload_len = OBX_NTS;
    snprintf(sql, sizeof sql, "INSERT INTO orders (id, item) VALUES (%d, 'gateway-kit')", order);
    if (!app_sql(pg, "BEGIN") || !app_sql(pg, sql)) return 0;
    r = obx_enqueue_pq(store, pg, &m, 1, id);
    if (r != OBX_OK || !keep) { /* on any error: roll back the order with it */
        if (r != OBX_OK) fprintf(stderr, "enqueue: %s\n", obx_store_last_error(store)->message);
        app_sql(pg, "ROLLBACK");
        if (r == OBX_OK) printf("order %d rolled back: no message\n", order);
        return r == OBX_OK;
    }
    if (!app_sql(pg, "COMMIT")) return 0;
    obx_notify(store); /* wakes a dispatcher at once, as after any _tx call */
    printf("order %d and its message committed together (message %s)\n", order, id[0]);
    return 1;
}

int main(int argc, char **argv) {
    obx_store_desc desc = {0};
    obx_dispatcher_desc ddesc = {0};
    obx_store *store = NULL;
    obx_dispatcher *dispatcher = NULL;
    obx_run_stats st;
    PGconn *pg;
    int ok;

    if (argc != 3) {
        fprintf(stderr, "usage: %s '<libpq conninfo>' '<ODBC connection string>'\n", argv[0]);
        return 2;
    }
    desc.connection_string = argv[2];
    desc.deploy_schema = 1;
    desc.store_id = "native";
    desc.hooks.logger.min_level = OBX_LOG_WARN;
    if (obx_store_open(&desc, &store) != OBX_OK) {
        fprintf(stderr, "open: %s\n", obx_store_last_error(store)->message);
        obx_store_close(store);
        return 1;
    }
    pg = PQconnectdb(argv[1]);
    if (PQstatus(pg) != CONNECTION_OK) {
        fprintf(stderr, "connect: %s", PQerrorMessage(pg));
        return 1;
    }
    app_sql(pg, "SET client_min_messages = warning");
    app_sql(pg, "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT)");
    app_sql(pg, "DELETE FROM orders");

    ok = place_order(store, pg, 1001, 1) && place_order(store, pg, 1002, 0);

    ddesc.store = store;
    obx_dispatcher_create(&ddesc, &dispatcher);
    obx_dispatcher_on(dispatcher, "order.created", on_order_created, NULL);
    ok = ok && obx_dispatcher_run_once(dispatcher, &st) == OBX_OK && st.done == 1;
    printf("%s\n", ok ? "done: 1 delivered, the rolled-back order left none" : "FAILED");

    obx_dispatcher_destroy(dispatcher);
    obx_store_close(store);
    PQfinish(pg);
    return ok ? 0 : 1;
}

/* quickstart.c: the outbox in one file, on the embedded SQLite default.
 *
 *   1. An order row and its "order.created" message commit together.
 *   2. A rolled-back order leaves no message behind.
 *   3. The dispatcher hands each message to its handler.
 *   4. A flaky handler fails twice and succeeds on its third try (backoff 1 s, 2 s).
 *   5. A poison message is failed permanently (dead), never retried.
 *
 *   cc -std=c99 -D_POSIX_C_SOURCE=200809L quickstart.c -lodbc -pthread
 *   ./a.out ['<ODBC connection string>']      (default: SQLite file quickstart.db)
 */
#define OBX_IMPLEMENTATION
#include "../obx.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static struct timespec t0;

/* Seconds since the start, for the trace. */
static double elapsed(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
}

/* The application's own SQL on its own connection (plain ODBC). */
static int app_sql(SQLHDBC dbc, const char *sql) {
    SQLHSTMT st;
    SQLRETURN rc;
    SQLAllocHandle(SQL_HANDLE_STMT, dbc, &st);
    rc = SQLExecDirect(st, (SQLCHAR *)(uintptr_t)sql, SQL_NTS);
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    return SQL_SUCCEEDED(rc) || rc == SQL_NO_DATA;
}

/* ---- handlers ---------------------------------------------------------------- */

static obx_outcome on_order_created(const obx_message *m, char *error, size_t size, void *user) {
    (void)error; (void)size; (void)user;
    printf("%5.2fs  order.created   delivered: %s\n", elapsed(), m->payload);
    return OBX_DONE;
}

static obx_outcome on_payment(const obx_message *m, char *error, size_t size, void *user) {
    (void)user;
    if (m->retry_count < 2) { /* the payment gateway is down for the first two tries */
        snprintf(error, size, "gateway timeout");
        printf("%5.2fs  payment.capture try %d failed: gateway timeout\n", elapsed(), m->retry_count + 1);
        return OBX_RETRY;
    }
    printf("%5.2fs  payment.capture try %d succeeded\n", elapsed(), m->retry_count + 1);
    return OBX_DONE;
}

static obx_outcome on_report(const obx_message *m, char *error, size_t size, void *user) {
    (void)m; (void)user;
    snprintf(error, size, "malformed report: no 'period' field");
    printf("%5.2fs  report.build    permanent failure: malformed report\n", elapsed());
    return OBX_DEAD;
}

/* Keep the library's own log to warnings and errors, so the trace reads well. */
static void quiet_logger(obx_log_level level, const char *store, const char *message, void *user) {
    (void)user;
    if (level >= OBX_LOG_WARN && !strstr(message, "handler failed") && !strstr(message, "is dead"))
        fprintf(stderr, "        [%s] %s\n", store, message);
}

int main(int argc, char **argv) {
    const char *conn = argc > 1 ? argv[1]
                                : "Driver={SQLite3};Database=quickstart.db;JournalMode=WAL;Timeout=5000;";
    obx_store_desc desc = {0};
    obx_dispatcher_desc ddesc = {0};
    obx_store *store = NULL;
    obx_dispatcher *dispatcher = NULL;
    obx_new_message order = {0}, payment = {0}, report = {0};
    SQLHENV env;
    SQLHDBC app;
    char id[37];
    int64_t counters[OBX_METRIC_COUNT_], ready;
    int settled = 0;

    clock_gettime(CLOCK_MONOTONIC, &t0);

    /* The store: its own connection, schema created if missing. */
    desc.connection_string = conn;
    desc.deploy_schema = 1;
    desc.store_id = "quickstart";
    desc.hooks.logger.log = quiet_logger;
    if (obx_store_open(&desc, &store) != OBX_OK) {
        fprintf(stderr, "open: %s (%s)\n", obx_store_last_error(store)->message,
                obx_store_last_error(store)->where);
        obx_store_close(store);
        return 1;
    }

    /* The application's connection, where business data is written. */
    SQLAllocHandle(SQL_HANDLE_ENV, NULL, &env);
    SQLSetEnvAttr(env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER)SQL_OV_ODBC3, 0);
    SQLAllocHandle(SQL_HANDLE_DBC, env, &app);
    if (!SQL_SUCCEEDED(SQLDriverConnect(app, NULL, (SQLCHAR *)(uintptr_t)conn, SQL_NTS, NULL, 0, NULL,
                                        SQL_DRIVER_NOPROMPT))) {
        fprintf(stderr, "application connect failed\n");
        return 1;
    }
    app_sql(app, "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT)");
    app_sql(app, "DELETE FROM orders");
    app_sql(app, "DELETE FROM \"Outbox\"");

    /* 1. The order and its message in one transaction (SQLite: BEGIN IMMEDIATE). */
    order.topic = "order.created";
    order.payload = "{\"order\":1001,\"item\":\"gateway-kit\"}";
    order.payload_len = OBX_NTS;
    order.correlation_id = "order-1001";
    app_sql(app, "BEGIN IMMEDIATE");
    app_sql(app, "INSERT INTO orders (id, item) VALUES (1001, 'gateway-kit')");
    obx_enqueue_tx(store, app, &order, id);
    app_sql(app, "COMMIT");
    printf("%5.2fs  order 1001 and its message committed together (message %s)\n", elapsed(), id);

    /* 2. Same again, but the application rolls back: no order, no message. */
    order.payload = "{\"order\":1002,\"item\":\"sensor\"}";
    app_sql(app, "BEGIN IMMEDIATE");
    app_sql(app, "INSERT INTO orders (id, item) VALUES (1002, 'sensor')");
    obx_enqueue_tx(store, app, &order, id);
    app_sql(app, "ROLLBACK");
    obx_queue_stats(store, &ready, NULL);
    printf("%5.2fs  order 1002 rolled back: %lld message(s) waiting, not 2\n", elapsed(), (long long)ready);

    /* Two more messages, each in its own transaction. */
    payment.topic = "payment.capture";
    payment.payload = "{\"order\":1001,\"amount\":129.00}";
    payment.payload_len = OBX_NTS;
    report.topic = "report.build";
    report.payload = "{\"oops\":true}";
    report.payload_len = OBX_NTS;
    obx_enqueue(store, &payment, NULL);
    obx_enqueue(store, &report, NULL);

    /* 3-5. The dispatcher: handlers by topic, default backoff min(2^n s, 60 s). */
    ddesc.store = store;
    obx_dispatcher_create(&ddesc, &dispatcher);
    obx_dispatcher_on(dispatcher, "order.created", on_order_created, NULL);
    obx_dispatcher_on(dispatcher, "payment.capture", on_payment, NULL);
    obx_dispatcher_on(dispatcher, "report.build", on_report, NULL);
    while (settled < 3) { /* a service would call obx_dispatcher_run() in a thread */
        obx_run_stats st;
        obx_result r = obx_dispatcher_run_once(dispatcher, &st);
        if (r < 0) {
            fprintf(stderr, "dispatch: %s\n", obx_store_last_error(store)->message);
            break;
        }
        settled += st.done + st.dead;
        if (r == OBX_EMPTY) {
            struct timespec pause = {0, 100 * 1000000L};
            nanosleep(&pause, NULL);
        }
    }

    obx_store_counters(store, counters);
    printf("%5.2fs  done: %lld delivered, %lld retries, %lld dead\n", elapsed(),
           (long long)counters[OBX_METRIC_DISPATCHED], (long long)counters[OBX_METRIC_FAILED],
           (long long)counters[OBX_METRIC_DEAD]);

    obx_dispatcher_destroy(dispatcher);
    obx_store_close(store);
    SQLDisconnect(app);
    SQLFreeHandle(SQL_HANDLE_DBC, app);
    SQLFreeHandle(SQL_HANDLE_ENV, env);
    return settled == 3 ? 0 : 1;
}

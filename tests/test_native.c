/* The outbox in a transaction of the program's own driver (obx_enqueue_sql
 * and the conveniences obx_enqueue_sqlite3, obx_enqueue_pq,
 * obx_enqueue_mysql), against a real database through its native driver.
 * Usage: test_native <backend> '<ODBC connection string>', backend =
 * sqlite | postgresql | mariadb: the store speaks ODBC to the database the
 * string names, the "application" reaches the same database through the
 * sqlite3 C API, libpq or MariaDB Connector/C. Each message written so is
 * compared with one obx_enqueue_tx wrote; the inbox's (ibx_enqueue_sql and
 * its conveniences) with ibx_enqueue's.
 * Built with OBX_SQLITE3_API / IBX_SQLITE3_API (test_native_sqlite3,
 * backend sqlite3), the store reaches the same file through SQLite's C API,
 * obx_enqueue_tx takes a sqlite3 * in a transaction, and one more test has
 * the store adopt the application's own handle. */
#include <sqlite3.h>
#include <libpq-fe.h>
#include <mysql.h>
#define OBX_IMPLEMENTATION
#include "../obx.h"
#define IBX_IMPLEMENTATION
#include "../ibx.h"
#include "tt.h"

#include <strings.h>

static const char *g_backend;
static const char *g_conn;
static int g_pg, g_my;

/* ---- the application's connection, through its own driver -------------------------- */

typedef struct app {
    sqlite3 *lite;
    PGconn *pg;
    MYSQL *my;
} app;

/* The value of key `key` in the ODBC connection string, or "". */
static void conn_value(const char *key, char *out, size_t cap) {
    const char *p = g_conn;
    size_t n = strlen(key);
    out[0] = '\0';
    while (p && *p) {
        if (strncasecmp(p, key, n) == 0 && p[n] == '=') {
            size_t len = strcspn(p + n + 1, ";");
            snprintf(out, cap, "%.*s", (int)len, p + n + 1);
            return;
        }
        p = strchr(p, ';');
        if (p) p++;
    }
}

static int app_exec(app *a, const char *text) {
    if (a->lite) return sqlite3_exec(a->lite, text, NULL, NULL, NULL) == SQLITE_OK;
    if (a->pg) {
        PGresult *r = PQexec(a->pg, text);
        int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
        if (!ok) printf("    app: %s", PQerrorMessage(a->pg));
        PQclear(r);
        return ok;
    }
    if (mysql_query(a->my, text) != 0) {
        printf("    app: %s\n", mysql_error(a->my));
        return 0;
    }
    mysql_free_result(mysql_store_result(a->my)); /* a SELECT's rows, read and dropped */
    return 1;
}

/* Connected, READ COMMITTED (as a keyed enqueue needs on MariaDB), no transaction. */
static int app_open(app *a) {
    char host[64], port[16], db[128], uid[64], pwd[64];
    memset(a, 0, sizeof *a);
    conn_value("Database", db, sizeof db);
    if (!g_pg && !g_my) {
        if (sqlite3_open_v2(db, &a->lite, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) return 0;
        sqlite3_busy_timeout(a->lite, 5000);
        return 1;
    }
    conn_value("Server", host, sizeof host);
    conn_value("Port", port, sizeof port);
    conn_value("Uid", uid, sizeof uid);
    conn_value("Pwd", pwd, sizeof pwd);
    if (g_pg) {
        char info[512];
        snprintf(info, sizeof info, "host=%s port=%s dbname=%s user=%s%s%s", host, port, db, uid,
                 pwd[0] ? " password=" : "", pwd);
        a->pg = PQconnectdb(info);
        if (PQstatus(a->pg) != CONNECTION_OK) {
            printf("    app: %s", PQerrorMessage(a->pg));
            return 0;
        }
        return app_exec(a, "SET client_min_messages = warning");
    }
    a->my = mysql_init(NULL);
    mysql_options(a->my, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    if (!mysql_real_connect(a->my, host, uid, pwd, db, (unsigned)atoi(port), NULL, 0)) {
        printf("    app: %s\n", mysql_error(a->my));
        return 0;
    }
    return app_exec(a, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
}

static int app_begin(app *a) {
    return app_exec(a, a->lite ? "BEGIN IMMEDIATE" : g_my ? "START TRANSACTION" : "BEGIN");
}
static int app_end(app *a, int commit) { return app_exec(a, commit ? "COMMIT" : "ROLLBACK"); }

static void app_close(app *a) {
    if (a->lite) sqlite3_close(a->lite);
    if (a->pg) PQfinish(a->pg);
    if (a->my) mysql_close(a->my);
}

/* The convenience of this backend's driver. */
static obx_result app_enqueue(app *a, obx_store *s, const obx_new_message *m, int n, char (*ids)[37]) {
    if (g_pg) return obx_enqueue_pq(s, a->pg, m, n, ids);
    if (g_my) return obx_enqueue_mysql(s, a->my, m, n, ids);
    return obx_enqueue_sqlite3(s, a->lite, m, n, ids);
}
static const char *app_fn(void) {
    return g_pg ? "obx_enqueue_pq" : g_my ? "obx_enqueue_mysql" : "obx_enqueue_sqlite3";
}

/* ---- the ODBC side: the store, and obx_enqueue_tx's rows to compare with ------------- */

static obx_store *fresh(void) {
    obx_store_desc desc;
    obx_store *s = NULL;
    memset(&desc, 0, sizeof desc);
    desc.connection_string = g_conn;
    desc.table = "NativeOutbox";
    desc.deploy_schema = 1;
    desc.store_id = "obx-native";
    desc.hooks.logger.min_level = OBX_LOG_WARN;
    if (obx_store_open(&desc, &s) != OBX_OK) {
        printf("    open failed: %s (%s)\n", obx_store_last_error(s)->message, obx_store_last_error(s)->where);
        obx_store_close(s);
        return NULL;
    }
    if (obx_dead_purge(s, NULL, NULL) != OBX_OK) printf("    purge: %s\n", obx_store_last_error(s)->message);
    return s;
}

/* Everything in the table, settled out of the way: tests start empty. */
static int drain(obx_store *s, app *a) {
    const char *t = g_my ? "DELETE FROM `NativeOutbox`" : g_pg ? "DELETE FROM \"dbo\".\"NativeOutbox\""
                                                              : "DELETE FROM \"NativeOutbox\"";
    (void)s;
    return app_exec(a, t);
}

static int64_t rows(app *a) {
    const char *q = g_my ? "SELECT COUNT(*) FROM `NativeOutbox`" : g_pg ? "SELECT COUNT(*) FROM \"dbo\".\"NativeOutbox\""
                                                                        : "SELECT COUNT(*) FROM \"NativeOutbox\"";
    int64_t n = -1;
    if (a->lite) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(a->lite, q, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
            n = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    } else if (a->pg) {
        PGresult *r = PQexec(a->pg, q);
        if (PQresultStatus(r) == PGRES_TUPLES_OK) n = atoll(PQgetvalue(r, 0, 0));
        PQclear(r);
    } else if (mysql_query(a->my, q) == 0) {
        MYSQL_RES *r = mysql_store_result(a->my);
        MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
        if (row) n = atoll(row[0]);
        mysql_free_result(r);
    }
    return n;
}

#ifdef OBX_SQLITE3_API
/* The library on SQLite's C API: obx_enqueue_tx's transaction is a second
 * sqlite3 handle's, opened on the same file as the application's. */
typedef struct odbc_conn {
    sqlite3 *dbc;
} odbc_conn;

static int odbc_begin(odbc_conn *c) {
    char db[1024];
    conn_value("Database", db, sizeof db);
    memset(c, 0, sizeof *c);
    if (sqlite3_open_v2(db, &c->dbc, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) return 0;
    sqlite3_busy_timeout(c->dbc, 5000);
    return sqlite3_exec(c->dbc, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK;
}

static void odbc_commit(odbc_conn *c) {
    sqlite3_exec(c->dbc, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(c->dbc);
}
#else
typedef struct odbc_conn {
    SQLHENV env;
    SQLHDBC dbc;
} odbc_conn;

/* A caller's ODBC connection in a transaction, as obx_enqueue_tx wants it. */
static int odbc_begin(odbc_conn *c) {
    SQLHSTMT st;
    memset(c, 0, sizeof *c);
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_ENV, NULL, &c->env))) return 0;
    SQLSetEnvAttr(c->env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER)SQL_OV_ODBC3, 0);
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_DBC, c->env, &c->dbc))) return 0;
    if (!SQL_SUCCEEDED(SQLDriverConnect(c->dbc, NULL, (SQLCHAR *)(uintptr_t)g_conn, SQL_NTS, NULL, 0, NULL,
                                        SQL_DRIVER_NOPROMPT)))
        return 0;
    if (g_pg || g_my) {
        if (g_my && !SQL_SUCCEEDED(SQLSetConnectAttr(c->dbc, SQL_ATTR_TXN_ISOLATION,
                                                     (SQLPOINTER)SQL_TXN_READ_COMMITTED, SQL_IS_UINTEGER)))
            return 0;
        return SQL_SUCCEEDED(SQLSetConnectAttr(c->dbc, SQL_ATTR_AUTOCOMMIT, (SQLPOINTER)SQL_AUTOCOMMIT_OFF,
                                               SQL_IS_UINTEGER));
    }
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, c->dbc, &st))) return 0;
    if (!SQL_SUCCEEDED(SQLExecDirect(st, (SQLCHAR *)(uintptr_t)"BEGIN IMMEDIATE", SQL_NTS))) return 0;
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    return 1;
}

static void odbc_commit(odbc_conn *c) {
    if (g_pg || g_my) {
        SQLEndTran(SQL_HANDLE_DBC, c->dbc, SQL_COMMIT);
    } else {
        SQLHSTMT st;
        SQLAllocHandle(SQL_HANDLE_STMT, c->dbc, &st);
        SQLExecDirect(st, (SQLCHAR *)(uintptr_t)"COMMIT", SQL_NTS);
        SQLFreeHandle(SQL_HANDLE_STMT, st);
    }
    SQLDisconnect(c->dbc);
    SQLFreeHandle(SQL_HANDLE_DBC, c->dbc);
    SQLFreeHandle(SQL_HANDLE_ENV, c->env);
}
#endif /* OBX_SQLITE3_API */

/* The same messages through obx_enqueue_tx (one) or obx_enqueue_batch. */
static int odbc_enqueue(obx_store *s, const obx_new_message *m, int n, char (*ids)[37]) {
    odbc_conn c;
    obx_result r;
    if (!odbc_begin(&c)) return 0;
    r = n == 1 ? obx_enqueue_tx(s, c.dbc, m, ids[0]) : obx_enqueue_batch(s, c.dbc, m, n, ids);
    if (r != OBX_OK) printf("    odbc enqueue: %s\n", obx_store_last_error(s)->message);
    odbc_commit(&c);
    return r == OBX_OK;
}

/* Message `id`'s row but for its ids and times, as text; "" if none. */
static void row_text(obx_store *s, const char *id, char *out, size_t cap) {
    obx_message a;
    size_t k;
    out[0] = '\0';
    if (obx_get(s, id, &a) != OBX_OK) return;
    snprintf(out, cap, "%s|%.*s|%s|%lld|%d|%d|%d|%s|%s|%s|%s|%d|%lld|%d|%d|%s", a.topic, (int)a.payload_len,
             a.payload, a.correlation_id ? a.correlation_id : "-", (long long)a.due_time_ms, a.retry_count,
             (int)a.status, a.is_processed, a.ordering_key ? a.ordering_key : "-", a.tenant_id ? a.tenant_id : "-",
             a.aggregate_type ? a.aggregate_type : "-", a.aggregate_id ? a.aggregate_id : "-", a.header_count,
             (long long)a.expires_ms, a.next_attempt_ms > OBX_TIME_MAX_MS, a.starts,
             a.last_error ? a.last_error : "-");
    snprintf(out + strlen(out), cap - strlen(out), "|p%d", a.priority);
    if (a.header_count > 0 && a.headers_packed) { /* the pairs, NULs as '=' and ';' */
        const char *p = a.headers_packed;
        for (k = 0; k < 2 * (size_t)a.header_count; k++) {
            size_t used = strlen(out);
            snprintf(out + used, cap - used, "%c%s", k % 2 ? '=' : ';', p);
            p += strlen(p) + 1;
        }
    }
}

/* Messages m[0..n) through the app's driver (committed), then, in an empty
 * table again, through obx_enqueue_tx / obx_enqueue_batch: the same rows
 * but for ids and times. */
static int same_rows(obx_store *s, app *a, const obx_new_message *m, int n) {
    char ids[8][37], ref[8][37], text[8][2048], other[2048];
    int i, same = 1;
    if (!drain(s, a) || !app_begin(a)) return 0;
    if (app_enqueue(a, s, m, n, ids) != OBX_OK) return printf("    %s\n", obx_store_last_error(s)->message), 0;
    if (!app_end(a, 1)) return 0;
    for (i = 0; i < n; i++) row_text(s, ids[i], text[i], sizeof text[i]);
    if (!drain(s, a) || !odbc_enqueue(s, m, n, ref)) return 0;
    for (i = 0; i < n; i++) {
        row_text(s, ref[i], other, sizeof other);
        if (!text[i][0] || strcmp(text[i], other) != 0) {
            printf("    rows differ:\n      native %s\n      odbc   %s\n", text[i], other);
            same = 0;
        }
        if (strcmp(ids[i], ref[i]) == 0) same = 0;
    }
    return same;
}

static obx_new_message msg(const char *topic, const char *payload) {
    obx_new_message m;
    memset(&m, 0, sizeof m);
    m.topic = topic;
    m.payload = payload;
    m.payload_len = OBX_NTS;
    return m;
}

/* Claim what is claimable; the payloads joined by "," in claim order. */
static int claim_list(obx_store *s, const char *owner, char *out, size_t cap, int ack) {
    const obx_message *got = NULL;
    int n = 0, i;
    obx_result r = obx_claim(s, owner, 60, 32, &got, &n);
    out[0] = '\0';
    if (r == OBX_EMPTY) return 1;
    if (r != OBX_OK) return 0;
    for (i = 0; i < n; i++) {
        size_t used = strlen(out);
        snprintf(out + used, cap - used, "%s%.*s", i ? "," : "", (int)got[i].payload_len, got[i].payload);
        if (ack && obx_ack(s, owner, (const char *const[]){got[i].id}, 1, NULL) != OBX_OK) return 0;
    }
    return 1;
}

/* ---- tests -------------------------------------------------------------------------- */

/* Committed with the application's own row: the message is there, the same
 * row obx_enqueue_tx writes, and a dispatcher's claim delivers it. */
static void test_commit(void) {
    obx_store *s = fresh();
    app a;
    char id[1][37], owner[37], got[256];
    obx_new_message m = msg("order.created", "{\"order\":1}");
    TT_ASSERT(s && app_open(&a));
    TT_ASSERT(drain(s, &a));
    TT_ASSERT(app_exec(&a, "CREATE TABLE IF NOT EXISTS obx_native_orders (id INTEGER PRIMARY KEY)"));
    TT_ASSERT(app_exec(&a, "DELETE FROM obx_native_orders"));
    m.correlation_id = "corr-1";
    TT_ASSERT(app_begin(&a));
    TT_ASSERT(app_exec(&a, "INSERT INTO obx_native_orders (id) VALUES (1)"));
    TT_EQ_INT(app_enqueue(&a, s, &m, 1, id), OBX_OK);
    TT_ASSERT(app_end(&a, 1));
    TT_EQ_INT(obx_notify(s), OBX_OK);
    TT_EQ_INT(rows(&a), 1);
    obx_owner_token(s, owner);
    TT_ASSERT(claim_list(s, owner, got, sizeof got, 1));
    TT_EQ_STR(got, "{\"order\":1}");
    TT_ASSERT(same_rows(s, &a, &m, 1));
    app_close(&a);
    obx_store_close(s);
}

/* Rolled back by the application: neither its row nor the message. */
static void test_rollback(void) {
    obx_store *s = fresh();
    app a;
    char id[1][37], owner[37], got[256];
    obx_message row;
    obx_new_message m = msg("order.created", "{\"order\":2}");
    TT_ASSERT(s && app_open(&a));
    TT_ASSERT(drain(s, &a));
    TT_ASSERT(app_exec(&a, "CREATE TABLE IF NOT EXISTS obx_native_orders (id INTEGER PRIMARY KEY)"));
    TT_ASSERT(app_exec(&a, "DELETE FROM obx_native_orders"));
    TT_ASSERT(app_begin(&a));
    TT_ASSERT(app_exec(&a, "INSERT INTO obx_native_orders (id) VALUES (2)"));
    TT_EQ_INT(app_enqueue(&a, s, &m, 1, id), OBX_OK);
    TT_EQ_INT(rows(&a), 1); /* written, in the application's transaction */
    TT_ASSERT(app_end(&a, 0));
    TT_EQ_INT(rows(&a), 0);
    TT_EQ_INT(obx_get(s, id[0], &row), OBX_ERR_NOT_FOUND);
    obx_owner_token(s, owner);
    TT_ASSERT(claim_list(s, owner, got, sizeof got, 0));
    TT_EQ_STR(got, "");
    app_close(&a);
    obx_store_close(s);
}

/* A keyed message behind a busy key is parked, as obx_enqueue_tx parks it,
 * and woken when the key's message before it is done. */
static void test_keyed(void) {
    obx_store *s = fresh();
    app a;
    char first[37], id[1][37], ref[1][37], owner[37], got[256];
    obx_new_message m = msg("ord", "k1");
    obx_message row;
    TT_ASSERT(s && app_open(&a));
    TT_ASSERT(drain(s, &a));
    m.ordering_key = "K";
    TT_EQ_INT(obx_enqueue(s, &m, first), OBX_OK);
    obx_owner_token(s, owner);
    TT_ASSERT(claim_list(s, owner, got, sizeof got, 0)); /* k1 in flight: K is busy */
    TT_EQ_STR(got, "k1");
    m.payload = "k2";
    TT_ASSERT(app_begin(&a));
    TT_EQ_INT(app_enqueue(&a, s, &m, 1, id), OBX_OK);
    TT_ASSERT(app_end(&a, 1));
    m.payload = "k3";
    TT_ASSERT(odbc_enqueue(s, &m, 1, ref));
    TT_EQ_INT(obx_get(s, id[0], &row), OBX_OK);
    TT_EQ_INT(row.next_attempt_ms, OBX_TIME_MAX_MS + 1); /* parked */
    m.payload = "k2";
    TT_ASSERT(claim_list(s, owner, got, sizeof got, 0));
    TT_EQ_STR(got, ""); /* both wait behind k1 */
    TT_EQ_INT(obx_ack(s, owner, (const char *const[]){first}, 1, NULL), OBX_OK);
    TT_ASSERT(claim_list(s, owner, got, sizeof got, 1));
    TT_EQ_STR(got, "k2"); /* woken, in order */
    TT_ASSERT(claim_list(s, owner, got, sizeof got, 1));
    TT_EQ_STR(got, "k3");
    app_close(&a);
    obx_store_close(s);
}

/* A batch in one call, keyed and plain, with the envelope and an expiry:
 * every row as obx_enqueue_batch writes it. */
static void test_batch(void) {
    obx_store *s = fresh();
    app a;
    char ids[6][37], owner[37], got[256];
    obx_new_message m[6];
    obx_header h[2] = {{"trace", "t-1"}, {"kind", "x\"y"}};
    TT_ASSERT(s && app_open(&a));
    TT_ASSERT(drain(s, &a));
    m[0] = msg("b", "b1");
    m[1] = msg("b", "b2");
    m[1].ordering_key = "B";
    m[2] = msg("b", "b3");
    m[2].ordering_key = "B"; /* behind b2 of the same statement */
    m[3] = msg("b", "b4");
    m[3].tenant_id = "tenant-9";
    m[3].aggregate_type = "order";
    m[3].aggregate_id = "o-9";
    m[3].headers = h;
    m[3].header_count = 2;
    m[3].expires_utc_ms = OBX_TIME_MAX_MS - 1000;
    m[4] = msg("b", "b5");
    m[4].ordering_key = "C";
    m[5] = msg("b", "b6");
    m[5].ordering_key = "c"; /* not C: keys compare byte for byte */
    TT_ASSERT(same_rows(s, &a, m, 6));
    TT_ASSERT(drain(s, &a));
    TT_ASSERT(app_begin(&a));
    TT_EQ_INT(app_enqueue(&a, s, m, 6, ids), OBX_OK);
    TT_ASSERT(app_end(&a, 1));
    obx_owner_token(s, owner);
    TT_ASSERT(claim_list(s, owner, got, sizeof got, 1));
    TT_EQ_INT((int)strlen(got), (int)strlen("b1,b2,b4,b5,b6")); /* b3 waits behind b2 */
    TT_ASSERT(strstr(got, "b3") == NULL);
    TT_ASSERT(claim_list(s, owner, got, sizeof got, 1));
    TT_EQ_STR(got, "b3");
    app_close(&a);
    obx_store_close(s);
}

/* One message with the whole envelope and a due time, alone (the single
 * keyed statement, not the batch one). */
static void test_envelope(void) {
    obx_store *s = fresh();
    app a;
    obx_new_message m = msg("env", "{\"e\":1}");
    obx_header h[1] = {{"k", "v"}};
    TT_ASSERT(s && app_open(&a));
    TT_ASSERT(drain(s, &a));
    m.tenant_id = "t";
    m.aggregate_type = "agg";
    m.aggregate_id = "a-1";
    m.headers = h;
    m.header_count = 1;
    m.correlation_id = "c";
    m.due_utc_ms = 4102444800000LL; /* 2100 */
    m.expires_utc_ms = 4102444900000LL;
    TT_ASSERT(same_rows(s, &a, &m, 1));
    app_close(&a);
    obx_store_close(s);
}

/* Claim one message at a time (a claim's rows come back in no particular
 * order) and ack it; the payloads joined by "," in claim order. */
static int claim_each(obx_store *s, const char *owner, char *out, size_t cap) {
    const obx_message *got = NULL;
    int n = 0;
    obx_result r;
    out[0] = '\0';
    while ((r = obx_claim(s, owner, 60, 1, &got, &n)) == OBX_OK) {
        size_t used = strlen(out);
        snprintf(out + used, cap - used, "%s%.*s", used ? "," : "", (int)got[0].payload_len, got[0].payload);
        if (obx_ack(s, owner, (const char *const[]){got[0].id}, 1, NULL) != OBX_OK) return 0;
    }
    return r == OBX_EMPTY;
}

/* Priorities through the app's driver: the rows obx_enqueue_tx and
 * obx_enqueue_batch write (single, and a batch of three), claimed highest
 * first; one out of range refused naming it (OBX-PRIO-NATIVE). */
static void test_priority(void) {
    obx_store *s = fresh();
    app a;
    char id[1][37] = {"untouched"}, owner[37], got[256];
    obx_new_message m = msg("prio", "p5"), three[3];
    TT_ASSERT(s && app_open(&a));
    m.priority = OBX_PRIORITY_MAX;
    TT_ASSERT(same_rows(s, &a, &m, 1));
    three[0] = msg("prio", "lo");
    three[0].priority = OBX_PRIORITY_MIN;
    three[1] = msg("prio", "mid");
    three[2] = msg("prio", "hi");
    three[2].priority = 3;
    TT_ASSERT(same_rows(s, &a, three, 3));
    /* The rows of the last enqueue (obx_enqueue_batch's) in priority order. */
    obx_owner_token(s, owner);
    TT_ASSERT(claim_each(s, owner, got, sizeof got));
    TT_EQ_STR(got, "hi,mid,lo");
    TT_ASSERT(drain(s, &a) && app_begin(&a));
    TT_ASSERT(app_enqueue(&a, s, three, 3, NULL) == OBX_OK && app_end(&a, 1));
    TT_ASSERT(claim_each(s, owner, got, sizeof got));
    TT_EQ_STR(got, "hi,mid,lo");
    m.priority = OBX_PRIORITY_MAX + 1;
    TT_ASSERT(app_begin(&a));
    TT_EQ_INT(app_enqueue(&a, s, &m, 1, id), OBX_ERR_OUT_OF_RANGE);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_enqueue_sql: priority");
    three[1].priority = OBX_PRIORITY_MIN - 1;
    TT_EQ_INT(app_enqueue(&a, s, three, 3, id), OBX_ERR_OUT_OF_RANGE);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_enqueue_sql: messages[1].priority");
    TT_EQ_STR(id[0], "untouched");
    TT_ASSERT(app_end(&a, 0));
    app_close(&a);
    obx_store_close(s);
}

/* Bad input is refused before anything is sent, naming the argument; the
 * application's transaction goes on unharmed. */
static void test_refused(void) {
    obx_store *s = fresh();
    app a;
    char id[1][37] = {"untouched"}, where[96];
    obx_new_message m = msg("", "p"), two[2];
    obx_sql *sql = NULL;
    TT_ASSERT(s && app_open(&a));
    TT_ASSERT(drain(s, &a));
    TT_ASSERT(app_begin(&a));
    TT_EQ_INT(app_enqueue(&a, s, &m, 1, id), OBX_ERR_INVALID_ARG);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_enqueue_sql: topic");
    two[0] = msg("t", "p");
    two[1] = msg("t", "p");
    two[1].expires_utc_ms = -1;
    TT_EQ_INT(app_enqueue(&a, s, two, 2, id), OBX_ERR_OUT_OF_RANGE);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_enqueue_sql: messages[1].expires_utc_ms");
    TT_EQ_STR(id[0], "untouched");
    TT_EQ_INT(g_pg ? obx_enqueue_pq(s, NULL, two, 1, id) : g_my ? obx_enqueue_mysql(s, NULL, two, 1, id)
                                                                 : obx_enqueue_sqlite3(s, NULL, two, 1, id),
              OBX_ERR_INVALID_ARG);
    snprintf(where, sizeof where, "%s: %s", app_fn(), g_pg ? "conn" : g_my ? "mysql" : "db");
    TT_EQ_STR(obx_store_last_error(s)->where, where);
    TT_EQ_INT(obx_enqueue_sql(s, two, 1, 7, &sql, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_enqueue_sql: markers");
    TT_EQ_INT(obx_enqueue_sql(s, two, 1, OBX_SQL_MARKERS_QUESTION, NULL, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_enqueue_sql: out_sql");
    TT_ASSERT(sql == NULL); /* left as it was */
    TT_EQ_INT(rows(&a), 0);
    TT_ASSERT(app_exec(&a, "SELECT 1")); /* the transaction is not spoiled */
    TT_ASSERT(app_end(&a, 1));
    /* Outside a transaction: refused, nothing written. */
    TT_EQ_INT(app_enqueue(&a, s, two, 1, id), OBX_ERR_STATE);
    TT_EXPECT(strstr(obx_store_last_error(s)->where, app_fn()) != NULL);
    TT_EQ_INT(rows(&a), 0);
    TT_EQ_STR(id[0], "untouched");
    app_close(&a);
    obx_store_close(s);
}

/* MariaDB: a keyed message in a REPEATABLE READ transaction is refused as
 * obx_enqueue_tx refuses it (the key read's row, obx_sql_check); rolled
 * back, nothing stays. */
static void test_isolation(void) {
    obx_store *s = fresh();
    app a;
    char id[1][37];
    obx_new_message m = msg("ord", "iso");
    TT_ASSERT(s && app_open(&a));
    TT_ASSERT(drain(s, &a));
    m.ordering_key = "I";
    TT_ASSERT(app_exec(&a, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"));
    TT_ASSERT(app_begin(&a));
    TT_EQ_INT(app_enqueue(&a, s, &m, 1, id), OBX_ERR_STATE);
    TT_EQ_STR(obx_store_last_error(s)->where, "hdbc: isolation");
    TT_ASSERT(app_end(&a, 0));
    TT_EQ_INT(rows(&a), 0);
    app_close(&a);
    obx_store_close(s);
}

/* The primitive alone: the statements in the dialect, values in marker
 * order, integers typed, the ids minted and the same as out_ids. */
static void test_primitive(void) {
    obx_store *s = fresh();
    obx_sql *sql = NULL;
    char ids[2][37];
    obx_new_message m[2];
    const obx_sql_stmt *st;
    int i, k, texts = 0;
    TT_ASSERT(s != NULL);
    m[0] = msg("p", "one");
    m[0].due_utc_ms = 4102444800000LL;
    m[1] = msg("p", "two");
    TT_EQ_INT(obx_enqueue_sql(s, m, 1, g_pg ? OBX_SQL_MARKERS_DOLLAR : OBX_SQL_MARKERS_QUESTION, &sql, ids), OBX_OK);
    TT_EQ_INT(obx_sql_count(sql), 1);
    st = obx_sql_at(sql, 0);
    TT_ASSERT(st && strstr(st->sql, "INSERT INTO") != NULL);
    TT_ASSERT(strstr(st->sql, g_pg ? "$1" : "?") != NULL);
    TT_ASSERT(!g_pg || strchr(st->sql, '?') == NULL);
    TT_EQ_INT(st->check_column, 0);
    TT_EQ_STR(st->params[0].value, ids[0]);
    TT_EQ_STR(obx_sql_id(sql, 0), ids[0]);
    TT_ASSERT(obx_sql_id(sql, 1) == NULL && obx_sql_at(sql, 1) == NULL);
    for (i = 0; i < st->param_count; i++) {
        if (st->params[i].is_int && st->params[i].value) {
            TT_EQ_INT(st->params[i].i64, 4102444800000LL);
            TT_EQ_STR(st->params[i].value, "4102444800000");
        }
        if (!st->params[i].is_int && st->params[i].value) texts++;
        TT_ASSERT(!st->params[i].value || strlen(st->params[i].value) == st->params[i].length);
    }
    TT_ASSERT(texts >= 4); /* id, message id, topic, payload */
    obx_sql_free(sql);
    sql = NULL;
    TT_EQ_INT(obx_enqueue_sql(s, m, 2, OBX_SQL_MARKERS_QUESTION, &sql, ids), OBX_OK);
    for (k = 0, i = 0; (st = obx_sql_at(sql, i)) != NULL; i++) k += st->param_count;
    TT_ASSERT(obx_sql_count(sql) >= 1 && k > 0);
    TT_ASSERT(strcmp(obx_sql_id(sql, 1), ids[1]) == 0 && strcmp(ids[0], ids[1]) != 0);
    obx_sql_free(sql);
    sql = NULL;
    TT_EQ_INT(obx_enqueue_sql(s, NULL, 0, OBX_SQL_MARKERS_QUESTION, &sql, NULL), OBX_OK);
    TT_EQ_INT(obx_sql_count(sql), 0);
    obx_sql_free(sql);
    obx_sql_free(NULL);
    TT_EQ_INT(obx_sql_count(NULL), 0);
    /* A driver's failure, classified as the library's own. */
    TT_EQ_INT(obx_sql_error(s, OBX_ERR_DB, "app", "40001", 0, "could not serialize"), OBX_ERR_DB_TRANSIENT);
    TT_EQ_STR(obx_store_last_error(s)->sqlstate, "40001");
    TT_EQ_INT(obx_sql_error(s, OBX_ERR_DB, "app", "23505", 0, "duplicate"), OBX_ERR_DB);
    TT_EQ_INT(obx_sql_error(NULL, OBX_ERR_DB, "app", NULL, 0, NULL), OBX_ERR_INVALID_ARG);
    obx_store_close(s);
}

#ifdef OBX_SQLITE3_API
/* The store adopts the application's sqlite3 * (OBX_SQLITE3_API): an
 * obx_enqueue_tx on that handle runs in the application's own transaction
 * with its row (gone with its rollback, kept with its commit), the store's
 * own units (claim, ack) use the same handle between the application's
 * transactions, and closing the store leaves the handle open in autocommit. */
static void test_adopt(void) {
    app a;
    obx_store_desc desc;
    obx_store *s = NULL;
    obx_message row;
    char id[37], id2[37], owner[37], got[256];
    obx_new_message m = msg("order.created", "{\"order\":3}"), m2 = msg("order.created", "{\"order\":4}");
    sqlite3_stmt *st = NULL;
    int orders = -1;
    TT_ASSERT(app_open(&a));
    memset(&desc, 0, sizeof desc);
    desc.hdbc = a.lite;
    desc.table = "NativeOutbox";
    desc.deploy_schema = 1;
    desc.store_id = "obx-adopt";
    desc.hooks.logger.min_level = OBX_LOG_WARN;
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_OK);
    TT_ASSERT(drain(s, &a));
    TT_ASSERT(app_exec(&a, "CREATE TABLE IF NOT EXISTS obx_native_orders (id INTEGER PRIMARY KEY)"));
    TT_ASSERT(app_exec(&a, "DELETE FROM obx_native_orders"));
    TT_ASSERT(app_begin(&a));
    TT_ASSERT(app_exec(&a, "INSERT INTO obx_native_orders (id) VALUES (3)"));
    TT_EQ_INT(obx_enqueue_tx(s, a.lite, &m, id), OBX_OK);
    TT_EXPECT(sqlite3_get_autocommit(a.lite) == 0); /* still the application's transaction */
    TT_EQ_INT(rows(&a), 1);
    TT_ASSERT(app_end(&a, 0));
    TT_EQ_INT(rows(&a), 0);
    TT_EQ_INT(obx_get(s, id, &row), OBX_ERR_NOT_FOUND);
    TT_ASSERT(app_begin(&a));
    TT_ASSERT(app_exec(&a, "INSERT INTO obx_native_orders (id) VALUES (4)"));
    TT_EQ_INT(obx_enqueue_tx(s, a.lite, &m2, id2), OBX_OK);
    TT_ASSERT(app_end(&a, 1));
    TT_EQ_INT(obx_notify(s), OBX_OK);
    TT_EQ_INT(rows(&a), 1);
    if (sqlite3_prepare_v2(a.lite, "SELECT COUNT(*) FROM obx_native_orders WHERE id = 4", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        orders = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    TT_EQ_INT(orders, 1);
    obx_owner_token(s, owner);
    TT_ASSERT(claim_list(s, owner, got, sizeof got, 1));
    TT_EQ_STR(got, "{\"order\":4}");
    TT_EQ_INT(obx_get(s, id2, &row), OBX_OK);
    TT_EQ_INT(row.is_processed, 1);
    obx_store_close(s);
    TT_EXPECT(sqlite3_get_autocommit(a.lite) != 0);
    TT_ASSERT(app_exec(&a, "DELETE FROM obx_native_orders"));
    app_close(&a);
}
#endif

/* ---- the inbox ------------------------------------------------------------------------ */

static ibx_result app_ibx(app *a, ibx_store *s, const ibx_new_message *m, int *enqueued) {
    if (g_pg) return ibx_enqueue_pq(s, a->pg, m, enqueued);
    if (g_my) return ibx_enqueue_mysql(s, a->my, m, enqueued);
    return ibx_enqueue_sqlite3(s, a->lite, m, enqueued);
}

static ibx_store *inbox_fresh(app *a) {
    ibx_store_desc desc;
    ibx_store *s = NULL;
    memset(&desc, 0, sizeof desc);
    desc.connection_string = g_conn;
    desc.table = "NativeInbox";
    desc.deploy_schema = 1;
    desc.store_id = "ibx-native";
    desc.hooks.logger.min_level = IBX_LOG_WARN;
    if (ibx_store_open(&desc, &s) != IBX_OK) {
        printf("    open failed: %s (%s)\n", ibx_store_last_error(s)->message, ibx_store_last_error(s)->where);
        ibx_store_close(s);
        return NULL;
    }
    if (!app_exec(a, g_my ? "DELETE FROM `NativeInbox`" : g_pg ? "DELETE FROM \"infra\".\"NativeInbox\""
                                                             : "DELETE FROM \"NativeInbox\"")) {
        ibx_store_close(s);
        return NULL;
    }
    return s;
}

/* The app open, a fresh inbox on it, and m a message of topic "in" from
 * "src" with this id and payload; NULL, said so, when either fails. */
static ibx_store *inbox_begin(app *a, ibx_new_message *m, const char *message_id, const char *payload) {
    ibx_store *s;
    if (!app_open(a) || (s = inbox_fresh(a)) == NULL) {
        tt_fail_at(__FILE__, __LINE__, "expected the app open and a fresh inbox");
        return NULL;
    }
    memset(m, 0, sizeof *m);
    m->topic = "in";
    m->source = "src";
    m->message_id = message_id;
    m->payload = payload;
    m->payload_len = IBX_NTS;
    return s;
}

/* Message id's row but for its id and times, as text; "" if none. */
static void inbox_row(ibx_store *s, const char *id, char *out, size_t cap) {
    ibx_message m;
    size_t k, used;
    out[0] = '\0';
    if (ibx_get(s, id, "src", &m) != IBX_OK) return;
    snprintf(out, cap, "%s|%.*s|%d|%d|%lld|%lld|%s|%d|p%d|", m.topic, (int)m.payload_len, m.payload, (int)m.status,
             m.attempt, (long long)m.due_time_ms, (long long)m.expires_ms, m.tenant_id ? m.tenant_id : "-",
             m.header_count, m.priority);
    for (k = 0; m.hash && k < m.hash_len; k++) {
        used = strlen(out);
        snprintf(out + used, cap - used, "%02x", m.hash[k]);
    }
}

/* The inbox's dedup and enqueue in the app's transaction: a new message is
 * taken (and gone with a rollback), its row the one ibx_enqueue writes,
 * hash bytes included; a redelivery of one done is a duplicate, as
 * ibx_enqueue says. */
static void test_inbox(void) {
    app a;
    ibx_store *s;
    ibx_new_message m;
    ibx_message got;
    const ibx_message *claimed = NULL;
    ibx_key keys[2];
    char native[512], ref[512], owner[37];
    static const unsigned char hash[4] = {0x00, 0x01, 0xff, 0x7f}; /* bytes, a NUL among them */
    int enq = -1, ref_enq = -1, n = 0, i;
    s = inbox_begin(&a, &m, "m-1", "{\"n\":1}");
    TT_ASSERT(s != NULL);
    m.hash = hash;
    m.hash_len = sizeof hash;
    m.tenant_id = "t-1";
    m.expires_utc_ms = 4102444800000LL;
    /* Rolled back: nothing. */
    TT_ASSERT(app_begin(&a));
    TT_EQ_INT(app_ibx(&a, s, &m, &enq), IBX_OK);
    TT_EQ_INT(enq, 1);
    TT_ASSERT(app_end(&a, 0));
    TT_EQ_INT(ibx_get(s, "m-1", "src", &got), IBX_ERR_NOT_FOUND);
    /* Committed: the row ibx_enqueue writes. */
    enq = -1;
    TT_ASSERT(app_begin(&a));
    TT_EQ_INT(app_ibx(&a, s, &m, &enq), IBX_OK);
    TT_ASSERT(app_end(&a, 1));
    TT_EQ_INT(enq, 1);
    TT_EQ_INT(ibx_notify(s), IBX_OK);
    m.message_id = "m-2";
    TT_EQ_INT(ibx_enqueue(s, &m, &ref_enq), IBX_OK);
    TT_EQ_INT(ref_enq, 1);
    inbox_row(s, "m-1", native, sizeof native);
    inbox_row(s, "m-2", ref, sizeof ref);
    TT_ASSERT(native[0] != '\0');
    TT_EQ_STR(native, ref);
    TT_ASSERT(strstr(native, "0001ff7f") != NULL);
    /* Done, then delivered again: a duplicate through either path. */
    ibx_owner_token(s, owner);
    TT_EQ_INT(ibx_claim(s, owner, 60, 10, &claimed, &n), IBX_OK);
    TT_EQ_INT(n, 2);
    for (i = 0; i < n; i++) {
        keys[i].source = claimed[i].source;
        keys[i].message_id = claimed[i].message_id;
    }
    TT_EQ_INT(ibx_ack(s, owner, keys, n, NULL), IBX_OK);
    m.message_id = "m-1";
    enq = -1;
    TT_ASSERT(app_begin(&a));
    TT_EQ_INT(app_ibx(&a, s, &m, &enq), IBX_OK);
    TT_ASSERT(app_end(&a, 1));
    m.message_id = "m-2";
    TT_EQ_INT(ibx_enqueue(s, &m, &ref_enq), IBX_OK);
    TT_EQ_INT(ref_enq, 0);
    TT_EQ_INT(enq, 0);
    inbox_row(s, "m-1", native, sizeof native);
    inbox_row(s, "m-2", ref, sizeof ref);
    TT_EQ_STR(native, ref);
    TT_EQ_INT(ibx_get(s, "m-1", "src", &got), IBX_OK);
    TT_EQ_INT(got.status, IBX_STATUS_DONE);
    /* Bad input: refused, named, nothing sent; outside a transaction: refused. */
    m.message_id = NULL;
    enq = -1;
    TT_ASSERT(app_begin(&a));
    TT_EQ_INT(app_ibx(&a, s, &m, &enq), IBX_ERR_INVALID_ARG);
    TT_EQ_STR(ibx_store_last_error(s)->where, "ibx_enqueue: message_id");
    TT_ASSERT(app_end(&a, 1));
    m.message_id = "m-3";
    TT_EQ_INT(app_ibx(&a, s, &m, &enq), IBX_ERR_STATE);
    TT_EQ_INT(enq, -1);
    TT_EQ_INT(ibx_get(s, "m-3", "src", &got), IBX_ERR_NOT_FOUND);
    ibx_store_close(s);
    app_close(&a);
}

/* A priority through the app's driver (ibx_enqueue_sql): the row
 * ibx_enqueue writes, claimed before an unprioritised one enqueued first;
 * out of range refused naming it, nothing sent (IBX-PRIO-NATIVE). */
static void test_inbox_priority(void) {
    app a;
    ibx_store *s;
    ibx_new_message m;
    const ibx_message *claimed = NULL;
    char native[512], ref[512], owner[37];
    int enq = -1, n = 0;
    s = inbox_begin(&a, &m, "plain", "{}");
    TT_ASSERT(s != NULL);
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
    m.message_id = "p-native";
    m.priority = 4;
    TT_ASSERT(app_begin(&a));
    TT_EQ_INT(app_ibx(&a, s, &m, &enq), IBX_OK);
    TT_ASSERT(app_end(&a, 1));
    TT_EQ_INT(enq, 1);
    m.message_id = "p-ref";
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_OK);
    inbox_row(s, "p-native", native, sizeof native);
    inbox_row(s, "p-ref", ref, sizeof ref);
    TT_ASSERT(strstr(native, "|p4|") != NULL);
    TT_EQ_STR(native, ref);
    ibx_owner_token(s, owner);
    TT_EQ_INT(ibx_claim(s, owner, 60, 1, &claimed, &n), IBX_OK);
    TT_ASSERT(n == 1 && strcmp(claimed[0].message_id, "plain") != 0);
    TT_EQ_INT(claimed[0].priority, 4);
    m.message_id = "p-bad";
    m.priority = IBX_PRIORITY_MAX + 1;
    enq = -1;
    TT_ASSERT(app_begin(&a));
    TT_EQ_INT(app_ibx(&a, s, &m, &enq), IBX_ERR_OUT_OF_RANGE);
    TT_EQ_STR(ibx_store_last_error(s)->where, "ibx_enqueue: priority");
    TT_ASSERT(app_end(&a, 0));
    TT_EQ_INT(enq, -1);
    ibx_store_close(s);
    app_close(&a);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s sqlite|sqlite3|postgresql|mariadb '<ODBC connection string>'\n", argv[0]);
        return 2;
    }
    g_backend = argv[1];
    g_conn = argv[2];
#ifdef OBX_SQLITE3_API
    if (strcmp(g_backend, "sqlite3") != 0) {
        fprintf(stderr, "%s: backend sqlite3 is this program built with OBX_SQLITE3_API, and only that\n", argv[0]);
        return 2;
    }
#endif
    g_pg = strcmp(g_backend, "postgresql") == 0;
    g_my = strcmp(g_backend, "mariadb") == 0;
#define RUN(id, what, fn) TT_RUN(id, g_backend, what, fn)
    RUN("CORE-NATIVE-TX-SQL", "obx_enqueue_sql: the dialect's statements, values in marker order, ids minted", test_primitive);
    RUN("CORE-NATIVE-TX-COMMIT", "the app's driver commits its row and the message: the row obx_enqueue_tx writes, delivered", test_commit);
    RUN("CORE-NATIVE-TX-ROLLBACK", "the app's driver rolls back: no message", test_rollback);
    RUN("CORE-NATIVE-TX-KEYED", "a keyed message through the app's driver parks behind a busy key and is woken in order", test_keyed);
    RUN("CORE-NATIVE-TX-BATCH", "a batch through the app's driver: every row as obx_enqueue_batch writes it", test_batch);
    RUN("CORE-NATIVE-TX-ENVELOPE", "the envelope, due time and expiry through the app's driver as obx_enqueue_tx", test_envelope);
    RUN("OBX-PRIO-NATIVE", "priorities through the app's driver (obx_enqueue_sql): the rows the _tx and batch calls write, claimed highest first, out of range refused naming it", test_priority);
    RUN("CORE-NATIVE-TX-REFUSED", "bad input refused before anything is sent, naming the argument; outside a transaction refused", test_refused);
    RUN("IBX-PRIO-NATIVE", "a priority through the app's driver (ibx_enqueue_sql): the row ibx_enqueue writes, claimed by priority, out of range refused naming it", test_inbox_priority);
    RUN("CORE-NATIVE-TX-INBOX", "the inbox's dedup and enqueue in the app's transaction: taken, rolled back, a duplicate, the row ibx_enqueue writes", test_inbox);
#ifdef OBX_SQLITE3_API
    RUN("CORE-NATIVE-SQLITE3-ADOPT", "the store adopts the app's sqlite3 *: obx_enqueue_tx in the app's transaction, rolled back and committed with its row", test_adopt);
#endif
    if (g_my)
        RUN("CORE-NATIVE-TX-ISOLATION", "MariaDB: a keyed message at REPEATABLE READ refused through the app's driver", test_isolation);
    return tt_done();
}

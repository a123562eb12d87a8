/* tests/profile_refuse.c - what the gateway profile refuses, on a real
 * SQLite file in the current directory (tests/options.sh builds it with
 * GW_PROFILE and runs it in build/options/profile-run):
 *   CORE-NO-ENVELOPE      a message that sets an envelope field is refused
 *                         with OBX_ERR_UNSUPPORTED / IBX_ERR_UNSUPPORTED
 *                         naming it, nothing is stored; "" is no value; a
 *                         row another build wrote with an envelope is read
 *                         without it
 *   OBX-NO-ORDERING-KEYS  a message with an ordering key is refused the
 *                         same way; the claim still holds back a key's
 *                         later row that another build enqueued
 *   OBX-NO-JOIN-SCHEMA    the deploy creates no join tables or triggers,
 *                         and the ordering keys' wake trigger still
 * Prints "PASS <ID>" / "FAIL <ID> ..." lines and "N passed, M failed". */
#ifndef OBX_NO_ENVELOPE
#error "build with the gateway profile (OBX_NO_ENVELOPE, OBX_NO_ORDERING_KEYS, IBX_NO_ENVELOPE)"
#endif
#define OBX_IMPLEMENTATION
#include "../obx.h"
#define IBX_IMPLEMENTATION
#include "../ibx.h"
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int passed, failed;

static void check(int ok, const char *id, const char *what) {
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL %s %s\n", id, what);
    }
}

static void app_sql(SQLHDBC dbc, const char *sql) {
    SQLHSTMT st;
    SQLAllocHandle(SQL_HANDLE_STMT, dbc, &st);
    if (!SQL_SUCCEEDED(SQLExecDirect(st, (SQLCHAR *)(uintptr_t)sql, SQL_NTS))) {
        printf("FAIL setup: %s\n", sql);
        failed++;
    }
    SQLFreeHandle(SQL_HANDLE_STMT, st);
}

/* The count the app's query returns, or -1. */
static long app_count(SQLHDBC dbc, const char *sql) {
    SQLHSTMT st;
    SQLINTEGER n = -1;
    SQLLEN ind = 0;
    SQLAllocHandle(SQL_HANDLE_STMT, dbc, &st);
    if (!SQL_SUCCEEDED(SQLExecDirect(st, (SQLCHAR *)(uintptr_t)sql, SQL_NTS)) || !SQL_SUCCEEDED(SQLFetch(st)) ||
        !SQL_SUCCEEDED(SQLGetData(st, 1, SQL_C_SLONG, &n, 0, &ind)))
        n = -1;
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    return (long)n;
}

/* One refused enqueue: the result, the argument named, nothing pending. */
static void refused_obx(obx_store *s, const obx_new_message *m, int count, const char *where, const char *id) {
    int64_t pending = -1;
    char what[200];
    obx_result r = count == 1 ? obx_enqueue(s, m, NULL) : obx_enqueue_batch(s, NULL, m, count, NULL);
    snprintf(what, sizeof what, "%s: result %d, where \"%s\"", where, (int)r, obx_store_last_error(s)->where);
    check(r == OBX_ERR_UNSUPPORTED && strcmp(obx_store_last_error(s)->where, where) == 0, id, what);
    check(obx_pending_count(s, &pending) == OBX_OK && pending == 0, id, "a refused enqueue stored nothing");
}

static void outbox(SQLHDBC app) {
    static const char *db = "Driver={SQLite3};Database=refuse.db;JournalMode=WAL;Timeout=5000;";
    obx_store_desc desc;
    obx_store *s = NULL;
    obx_new_message m, batch[2];
    obx_header hdr = {"k", "v"};
    const obx_message *got = NULL;
    int count = 0, i;
    int64_t pending;
    char id[37], sql[256];
    const char *owner = "0190a0b0-0000-7000-8000-000000000001";
    memset(&desc, 0, sizeof desc);
    desc.connection_string = db;
    desc.deploy_schema = 1;
    desc.store_id = "refuse";
    if (obx_store_open(&desc, &s) != OBX_OK) {
        printf("FAIL setup: obx_store_open: %s\n", obx_store_last_error(s)->message);
        failed++;
        obx_store_close(s);
        return;
    }
    /* OBX_NO_JOIN: a join table is created by a build with joins when it
     * deploys; the other objects are all there. */
    check(app_count(app, "SELECT count(*) FROM sqlite_master WHERE name LIKE '%Join%'") == 0,
          "OBX-NO-JOIN-SCHEMA", "no join table, index or trigger deployed");
    check(app_count(app, "SELECT count(*) FROM sqlite_master WHERE name IN ('Outbox', 'IX_Outbox_Ready', "
                         "'IX_Outbox_Ordering', 'IX_Outbox_Leased', 'IX_Outbox_Done', 'Outbox_OrderingWake2')") == 6,
          "OBX-NO-JOIN-SCHEMA", "the message table, its indexes and the ordering wake trigger deployed");
    memset(&m, 0, sizeof m);
    m.topic = "t";
    m.payload = "p";
    m.payload_len = OBX_NTS;
    m.tenant_id = "acme";
    refused_obx(s, &m, 1, "obx_enqueue: tenant_id", "CORE-NO-ENVELOPE");
    m.tenant_id = "";
    m.aggregate_type = "order";
    refused_obx(s, &m, 1, "obx_enqueue: aggregate_type", "CORE-NO-ENVELOPE");
    m.aggregate_type = NULL;
    m.headers = &hdr;
    m.header_count = 1;
    refused_obx(s, &m, 1, "obx_enqueue: headers", "CORE-NO-ENVELOPE");
    m.headers = NULL;
    m.header_count = 0;
    batch[0] = m;
    batch[1] = m;
    batch[1].aggregate_id = "1001";
    refused_obx(s, batch, 2, "obx_enqueue_batch: messages[1].aggregate_id", "CORE-NO-ENVELOPE");
    m.ordering_key = "device-7";
    refused_obx(s, &m, 1, "obx_enqueue: ordering_key", "OBX-NO-ORDERING-KEYS");
    batch[1] = m;
    refused_obx(s, batch, 2, "obx_enqueue_batch: messages[1].ordering_key", "OBX-NO-ORDERING-KEYS");

    /* "" is no value: enqueued; an expiry still works without the envelope. */
    m.ordering_key = "";
    m.expires_utc_ms = 4102444800000LL; /* 2100 */
    check(obx_enqueue(s, &m, id) == OBX_OK, "CORE-NO-ENVELOPE", "a message with \"\" fields enqueues");
    /* Another build's envelope and a key of two rows on the same file: the
     * first row gets the key's earlier place, the second a later one. */
    snprintf(sql, sizeof sql,
             "UPDATE \"Outbox\" SET \"TenantId\" = 'acme', \"Headers\" = '{\"k\":\"v\"}', "
             "\"OrderingKey\" = 'device-7', \"OrderingSeq\" = 1 WHERE \"Id\" = '%s'", id);
    app_sql(app, sql);
    m.expires_utc_ms = 0;
    check(obx_enqueue(s, &m, id) == OBX_OK, "OBX-NO-ORDERING-KEYS", "a plain message enqueues");
    snprintf(sql, sizeof sql,
             "UPDATE \"Outbox\" SET \"OrderingKey\" = 'device-7', \"OrderingSeq\" = 2 WHERE \"Id\" = '%s'", id);
    app_sql(app, sql);
    /* A batch: the profile's one batch statement (the plain one is left out). */
    batch[0] = m;
    batch[1] = m;
    batch[1].expires_utc_ms = 4102444800000LL;
    pending = 0;
    check(obx_enqueue_batch(s, NULL, batch, 2, NULL) == OBX_OK && obx_pending_count(s, &pending) == OBX_OK &&
              pending == 4,
          "CORE-NO-ENVELOPE", "a batch enqueues (4 messages pending)");
    check(obx_claim(s, owner, 30, 10, &got, &count) == OBX_OK && count == 3, "OBX-NO-ORDERING-KEYS",
          "the claim takes one row of the key, not both (and the two without a key)");
    for (i = 0; i < count; i++)
        if (got[i].ordering_key) break;
    check(i < count, "OBX-NO-ORDERING-KEYS", "the key's first row is among the claimed");
    if (i < count) {
        got += i;
        check(got[0].tenant_id == NULL && got[0].header_count == 0 && got[0].headers_packed == NULL,
              "CORE-NO-ENVELOPE", "a row with an envelope is read without it");
        check(got[0].expires_ms == 4102444800000LL, "CORE-NO-ENVELOPE", "the expiry was stored");
        check(strcmp(got[0].ordering_key ? got[0].ordering_key : "", "device-7") == 0, "OBX-NO-ORDERING-KEYS",
              "the claimed row is the key's first");
    }
    obx_store_close(s);
}

static void inbox(void) {
    ibx_store_desc desc;
    ibx_store *s = NULL;
    ibx_new_message m;
    ibx_header hdr = {"k", "v"};
    ibx_message got;
    ibx_result r;
    char what[200];
    memset(&desc, 0, sizeof desc);
    desc.connection_string = "Driver={SQLite3};Database=refuse_inbox.db;JournalMode=WAL;Timeout=5000;";
    desc.deploy_schema = 1;
    desc.store_id = "refuse";
    if (ibx_store_open(&desc, &s) != IBX_OK) {
        printf("FAIL setup: ibx_store_open: %s\n", ibx_store_last_error(s)->message);
        failed++;
        ibx_store_close(s);
        return;
    }
    memset(&m, 0, sizeof m);
    m.topic = "t";
    m.source = "src";
    m.message_id = "m1";
    m.payload = "p";
    m.payload_len = IBX_NTS;
    m.headers = &hdr;
    m.header_count = 1;
    r = ibx_enqueue(s, &m, NULL);
    snprintf(what, sizeof what, "headers: result %d, where \"%s\"", (int)r, ibx_store_last_error(s)->where);
    check(r == IBX_ERR_UNSUPPORTED && strcmp(ibx_store_last_error(s)->where, "ibx_enqueue: headers") == 0,
          "CORE-NO-ENVELOPE", what);
    m.headers = NULL;
    m.header_count = 0;
    m.tenant_id = "acme";
    r = ibx_enqueue(s, &m, NULL);
    snprintf(what, sizeof what, "tenant_id: result %d, where \"%s\"", (int)r, ibx_store_last_error(s)->where);
    check(r == IBX_ERR_UNSUPPORTED && strcmp(ibx_store_last_error(s)->where, "ibx_enqueue: tenant_id") == 0,
          "CORE-NO-ENVELOPE", what);
    check(ibx_get(s, "m1", "src", &got) == IBX_ERR_NOT_FOUND, "CORE-NO-ENVELOPE", "a refused message is not stored");
    m.tenant_id = "";
    m.expires_utc_ms = 4102444800000LL; /* 2100: the statement for an expiry, without envelope columns */
    check(ibx_enqueue(s, &m, NULL) == IBX_OK, "CORE-NO-ENVELOPE", "\"\" is no value: the message enqueues");
    check(ibx_get(s, "m1", "src", &got) == IBX_OK && got.expires_ms == 4102444800000LL && got.tenant_id == NULL,
          "CORE-NO-ENVELOPE", "the expiry was stored, no envelope read");
    ibx_store_close(s);
}

int main(void) {
    SQLHENV env;
    SQLHDBC app;
    const char *const files[] = {"refuse.db", "refuse.db-wal", "refuse.db-shm", "refuse_inbox.db",
                                 "refuse_inbox.db-wal", "refuse_inbox.db-shm"};
    size_t i;
    for (i = 0; i < sizeof files / sizeof files[0]; i++) remove(files[i]); /* a fresh start */
    SQLAllocHandle(SQL_HANDLE_ENV, NULL, &env);
    SQLSetEnvAttr(env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER)SQL_OV_ODBC3, 0);
    SQLAllocHandle(SQL_HANDLE_DBC, env, &app);
    if (!SQL_SUCCEEDED(SQLDriverConnect(app, NULL, (SQLCHAR *)(uintptr_t) "Driver={SQLite3};Database=refuse.db;Timeout=5000;",
                                        SQL_NTS, NULL, 0, NULL, SQL_DRIVER_NOPROMPT))) {
        printf("FAIL setup: connect\n");
        return 1;
    }
    outbox(app);
    inbox();
    SQLDisconnect(app);
    SQLFreeHandle(SQL_HANDLE_DBC, app);
    SQLFreeHandle(SQL_HANDLE_ENV, env);
    if (failed == 0) {
        printf("PASS CORE-NO-ENVELOPE sqlite\n");
        printf("PASS OBX-NO-ORDERING-KEYS sqlite\n");
        printf("PASS OBX-NO-JOIN-SCHEMA sqlite\n");
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

/* Core tests against a real database through the real driver manager.
 * Usage: test_real <backend> <connection string>, backend = sqlite |
 * postgresql | mariadb. Prints one PASS/FAIL line per test and "N passed, N failed". */
#define OBX_IMPLEMENTATION
#include "../obx.h"
#include "tt.h"


/* One column of the current row, read the way the library reads message
 * columns (obx__get_append), into memory of its own (obx__free it). */
static obx_result read_column(obx__db *db, SQLHSTMT st, int col, SQLSMALLINT type, char **out,
                              size_t *len) {
    obx__buf b = {NULL, 0, 0};
    size_t off = 0;
    obx_result r = obx__get_append(db, st, col, type, &b, &off, len);
    if (r != OBX_OK || off == (size_t)-1) {
        obx__buf_free(db->hooks, &b);
        if (r == OBX_OK) *out = NULL;
        return r;
    }
    *out = b.data;
    return OBX_OK;
}

static const char *g_backend;
static const char *g_connstr;

/* A quiet logger: tests provoke errors on purpose. */
static void quiet_log(obx_log_level level, const char *id, const char *msg, void *user) {
    (void)user;
    if (getenv("OBX_TEST_VERBOSE")) fprintf(stderr, "  log %d [%s] %s\n", (int)level, id, msg);
}

static obx_store *open_with(const char *connstr) {
    obx_store_desc desc;
    obx_store *s = NULL;
    memset(&desc, 0, sizeof desc);
    desc.connection_string = connstr;
    desc.store_id = "core-test";
    desc.hooks.logger.log = quiet_log;
    desc.hooks.logger.min_level = OBX_LOG_DEBUG;
    if (obx_store_open(&desc, &s) != OBX_OK) {
        printf("    open failed: %s (%s)\n", obx_store_last_error(s)->message,
               obx_store_last_error(s)->where);
        obx_store_close(s);
        return NULL;
    }
    return s;
}

static obx_store *open_store(void) { return open_with(g_connstr); }

/* Runs directly in a unit: table setup, outside any test's logic. */
static obx_result run_sql(obx__db *db, void *sql) {
    return obx__exec_direct(db, (const char *)sql, "test sql");
}

static int64_t count_rows(obx_store *s, const char *where) {
    char sql[256], out[32];
    snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM obx_core_test %s", where);
    if (obx__query_text(&s->db, sql, out, sizeof out) != OBX_OK) return -1;
    if (!s->db.tx_by_sql) obx__end_tran(&s->db, SQL_ROLLBACK, "end read");
    return atoll(out);
}

static int make_table(obx_store *s) {
    static char drop[] = "DROP TABLE IF EXISTS obx_core_test";
    static char create[] = "CREATE TABLE obx_core_test (id INTEGER PRIMARY KEY, v TEXT)";
    static char create_my[] = "CREATE TABLE obx_core_test (id INTEGER PRIMARY KEY, v LONGTEXT)"; /* TEXT: 64 KiB */
    return obx__unit(&s->db, run_sql, drop, "drop") == OBX_OK &&
           obx__unit(&s->db, run_sql, strcmp(g_backend, "mariadb") == 0 ? create_my : create, "create") == OBX_OK;
}

static void test_connect_detect(void) {
    obx_store *s = open_store();
    obx_store_info info;
    TT_ASSERT(s != NULL);
    TT_EQ_INT(obx_store_get_info(s, &info), OBX_OK);
    TT_EQ_STR(obx_dialect_name(info.dialect), g_backend);
    TT_EXPECT(info.dbms_version[0] != '\0');
    TT_EXPECT(info.driver_name[0] != '\0');
    TT_EQ_STR(info.store_id, "core-test");
    TT_EQ_INT(obx_store_last_error(s)->result, OBX_OK);
    /* psqlODBC gets Protocol=7.4-1 appended: no per-statement savepoints. */
    if (info.dialect == OBX_DIALECT_POSTGRESQL) TT_EXPECT(strstr(s->db.connstr, "Protocol=7.4-1") != NULL);
    obx_store_close(s);
}

static void test_connect_failure(void) {
    obx_store *s = NULL;
    obx_store_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.hooks.logger.log = quiet_log;
    /* Fails with a driver manager (no such driver) and without one, where
     * Driver= is ignored and SQLite is linked in (no such directory). */
    desc.connection_string = "Driver={No Such Driver obx};Database=/nonexistent-obx-dir/x.db;";
    TT_ASSERT(obx_store_open(&desc, &s) < 0);
    TT_ASSERT(s != NULL);
    TT_EXPECT(obx_store_last_error(s)->sqlstate[0] != '\0');
    TT_EXPECT(strstr(obx_store_last_error(s)->where, "SQLDriverConnect") != NULL);
    TT_EXPECT(obx_store_last_error(s)->message[0] != '\0');
    obx_store_close(s);
}

/* g_connstr with `key`'s value replaced (or the pair added) into out. */
static const char *conn_with(char *out, size_t cap, const char *key, const char *value) {
    const char *p = g_connstr, *hit = NULL;
    size_t klen = strlen(key);
    for (; *p; p++)
        if ((p == g_connstr || p[-1] == ';') && obx__starts_with_nocase(p, key) && p[klen] == '=') hit = p;
    if (!hit) {
        snprintf(out, cap, "%s%s%s=%s;", g_connstr, g_connstr[0] && g_connstr[strlen(g_connstr) - 1] != ';' ? ";" : "",
                 key, value);
    } else {
        const char *end = strchr(hit, ';');
        snprintf(out, cap, "%.*s%s=%s%s", (int)(hit - g_connstr), g_connstr, key, value, end ? end : "");
    }
    return out;
}

/* What the real driver manager and drivers say when a connection cannot
 * be made, explained, and classified: a missing DSN or driver, a database
 * that does not exist, a refused login, a SQLite file in a missing
 * directory are OBX_ERR_DB, never retried as transient (CORE-CONNECT-PERMANENT). */
static obx_result open_fails(const char *connstr, const char *says, const char *also) {
    obx_store_desc desc;
    obx_store *s = NULL;
    obx_result r;
    memset(&desc, 0, sizeof desc);
    desc.connection_string = connstr;
    desc.hooks.logger.log = quiet_log;
    desc.login_timeout_seconds = 5;
    r = obx_store_open(&desc, &s);
    if (r == OBX_OK || !strstr(obx_store_last_error(s)->message, says) ||
        (also && !strstr(obx_store_last_error(s)->message, also)))
        printf("    %s: %s\n", obx_result_str(r), obx_store_last_error(s)->message);
    if (r != OBX_OK && (!strstr(obx_store_last_error(s)->message, says) ||
                        (also && !strstr(obx_store_last_error(s)->message, also))))
        r = OBX_ERR_NOT_FOUND; /* the text does not say it: never what a connect returns */
    obx_store_close(s);
    return r;
}

static void test_connect_permanent(void) {
    char conn[1024];
    int sqlite = strcmp(g_backend, "sqlite") == 0, pg = strcmp(g_backend, "postgresql") == 0;
    obx_result r;
#ifdef TT_NO_DRIVER_MANAGER
    /* The SQLite driver linked in (the gateway builds): no DSN is read, no
     * driver loaded; a string that names no file must not open a temporary one. */
    r = open_fails("DSN=obx_no_such_dsn;", "would be a temporary file", "no DSN is read");
    TT_EQ_INT(r, OBX_ERR_DB);
#else
    r = open_fails("DSN=obx_no_such_dsn;", "DSN 'obx_no_such_dsn' is not defined", "odbcinst -q -s");
    TT_EQ_INT(r, OBX_ERR_DB);
    r = open_fails("Server=localhost;Database=x;", "names neither DSN= nor Driver=", NULL);
    TT_EQ_INT(r, OBX_ERR_DB);
    conn_with(conn, sizeof conn, "Driver", "{obx no such driver}");
    r = open_fails(conn, "driver 'obx no such driver' could not be loaded", "odbcinst -q -d");
    TT_EQ_INT(r, OBX_ERR_DB);
#endif
    if (sqlite) {
        /* No Database=: the driver would open a file named after the string. */
        conn_with(conn, sizeof conn, "Database", "");
        r = open_fails(conn, "names the SQLite driver and no Database=", "Database=:memory:");
        TT_EQ_INT(r, OBX_ERR_DB);
        conn_with(conn, sizeof conn, "Database", "/nonexistent-obx-dir/x.db");
        r = open_fails(conn, "cannot open the SQLite file '/nonexistent-obx-dir/x.db'", "directory");
        TT_EQ_INT(r, OBX_ERR_DB);
        return;
    }
    conn_with(conn, sizeof conn, "Database", "obx_no_such_db");
    r = open_fails(conn, "the server refused the database or the login", "obx_no_such_db");
    TT_EQ_INT(r, OBX_ERR_DB);
    /* The test's PostgreSQL trusts every password: a role it does not know. */
    if (pg) conn_with(conn, sizeof conn, "Uid", "obx_no_such_role");
    else conn_with(conn, sizeof conn, "Pwd", "obx-wrong-password");
    r = open_fails(conn, "the server refused the database or the login", pg ? "obx_no_such_role" : "Access denied");
    TT_EQ_INT(r, OBX_ERR_DB);
}

static void test_sqlite_memory(void) {
    char conn[1024];
    obx_store *s = open_with(conn_with(conn, sizeof conn, "Database", ":memory:"));
    TT_ASSERT(s != NULL);
    TT_ASSERT(make_table(s));
    TT_EQ_INT(count_rows(s, ""), 0);
    obx_store_close(s);
}

static void test_rollback_leaves_nothing(void) {
    obx_store *s = open_store();
    obx__param p[2];
    TT_ASSERT(s != NULL);
    TT_ASSERT(make_table(s));
    TT_EQ_INT(obx__begin(&s->db, obx__unit_mode(&s->db, OBX__UNIT_WRITE)), OBX_OK);
    obx__p_i64(&p[0], 1);
    obx__p_text(&p[1], "rolled back", (size_t)-1);
    TT_EQ_INT(obx__exec(&s->db, 0, "INSERT INTO obx_core_test (id, v) VALUES (?, ?)", p, 2, NULL, NULL), OBX_OK);
    obx__rollback(&s->db);
    TT_EQ_INT(count_rows(s, ""), 0);
    obx_store_close(s);
}

typedef struct partial_ctx { int failed_statement; } partial_ctx;

/* Insert 1, then 1 again (duplicate key), then 2: the unit must fail and
 * leave nothing, whatever the driver did about the failed statement. */
static obx_result insert_with_duplicate(obx__db *db, void *ctx) {
    static const char *sql = "INSERT INTO obx_core_test (id, v) VALUES (?, 'x')";
    obx__param p[1];
    obx_result r;
    int64_t ids[3] = {1, 1, 2};
    int i;
    for (i = 0; i < 3; i++) {
        obx__p_i64(&p[0], ids[i]);
        r = obx__exec(db, 1, sql, p, 1, NULL, NULL);
        if (r != OBX_OK) {
            ((partial_ctx *)ctx)->failed_statement = i + 1;
            return r;
        }
    }
    return OBX_OK;
}

static void partial_work_case(const char *connstr) {
    obx_store *s = open_with(connstr);
    partial_ctx ctx = {0};
    TT_ASSERT(s != NULL);
    TT_ASSERT(make_table(s));
    TT_EQ_INT(obx__unit(&s->db, insert_with_duplicate, &ctx, "partial"), OBX_ERR_DB);
    TT_EQ_INT(ctx.failed_statement, 2);
    TT_EXPECT(obx_store_last_error(s)->sqlstate[0] != '\0');
    TT_EQ_INT(count_rows(s, ""), 0);
    obx_store_close(s);
}

static void test_failed_statement_never_partial(void) {
    partial_work_case(g_connstr);
    if (strcmp(g_backend, "postgresql") == 0) {
        /* The caller may force psqlODBC's other error modes; the unit must
         * still leave nothing: statement-level savepoints (7.4-2) and no
         * driver rollback (7.4-0). */
        char buf[1024];
        snprintf(buf, sizeof buf, "%s;Protocol=7.4-2", g_connstr);
        partial_work_case(buf);
        snprintf(buf, sizeof buf, "%s;Protocol=7.4-0", g_connstr);
        partial_work_case(buf);
    }
}

static obx_result insert_two(obx__db *db, void *ctx) {
    obx__param p[2];
    obx_result r;
    (void)ctx;
    obx__p_i64(&p[0], 10);
    obx__p_text(&p[1], "Z\xc3\xbcrich \xe2\x9c\x93 \xf0\x9f\x98\x80", (size_t)-1);
    r = obx__exec(db, 2, "INSERT INTO obx_core_test (id, v) VALUES (?, ?)", p, 2, NULL, NULL);
    obx__p_i64(&p[0], 11);
    if (r == OBX_OK) r = obx__exec(db, 2, "INSERT INTO obx_core_test (id, v) VALUES (?, ?)", p, 2, NULL, NULL);
    return r;
}

static void test_commit_visible_elsewhere(void) {
    obx_store *s = open_store(), *other = open_store();
    obx__param p[1];
    SQLHSTMT cur = NULL;
    char *text = NULL;
    size_t len = 0;
    TT_ASSERT(s != NULL && other != NULL);
    TT_ASSERT(make_table(s));
    TT_EQ_INT(obx__unit(&s->db, insert_two, NULL, "insert"), OBX_OK);
    TT_EQ_INT(count_rows(other, ""), 2);
    /* UTF-8 text comes back byte-exact. */
    obx__p_i64(&p[0], 11);
    TT_EQ_INT(obx__exec(&other->db, 3, "SELECT v FROM obx_core_test WHERE id = ?", p, 1, NULL, &cur), OBX_OK);
    TT_EQ_INT(obx__fetch(&other->db, cur), OBX_OK);
    TT_EQ_INT(read_column(&other->db, cur, 1, SQL_C_CHAR, &text, &len), OBX_OK);
    obx__close(cur);
    TT_EQ_STR(text, "Z\xc3\xbcrich \xe2\x9c\x93 \xf0\x9f\x98\x80");
    TT_EQ_INT(len, 16);
    obx__free(&other->hooks, text);
    if (!other->db.tx_by_sql) obx__end_tran(&other->db, SQL_ROLLBACK, "end read");
    obx_store_close(s);
    obx_store_close(other);
}

static obx_result update_nothing(obx__db *db, void *rows) {
    obx__param p[1];
    obx__p_i64(&p[0], 424242);
    return obx__exec(db, 4, "UPDATE obx_core_test SET v = 'y' WHERE id = ?", p, 1, (int64_t *)rows, NULL);
}

static void test_zero_row_update(void) {
    obx_store *s = open_store();
    int64_t rows = -1;
    TT_ASSERT(s != NULL);
    TT_ASSERT(make_table(s));
    /* PostgreSQL and SQLite answer SQL_NO_DATA: that is zero rows, not an error. */
    TT_EQ_INT(obx__unit(&s->db, update_nothing, &rows, "update"), OBX_OK);
    TT_EQ_INT(rows, 0);
    obx_store_close(s);
}

typedef struct big_ctx { const char *data; size_t len; } big_ctx;

static obx_result insert_big(obx__db *db, void *ctx) {
    big_ctx *b = (big_ctx *)ctx;
    obx__param p[2];
    obx__p_i64(&p[0], 7);
    obx__p_text(&p[1], b->data, b->len);
    return obx__exec(db, 5, "INSERT INTO obx_core_test (id, v) VALUES (?, ?)", p, 2, NULL, NULL);
}

static void test_large_text_roundtrip(void) {
    obx_store *s = open_store();
    const size_t n = (size_t)4 << 20; /* 4 MiB, multi-byte characters across chunk edges */
    char *big = (char *)malloc(n + 1), *back = NULL;
    size_t i, len = 0;
    big_ctx ctx;
    obx__param p[1];
    SQLHSTMT cur = NULL;
    TT_ASSERT(s != NULL && big != NULL);
    for (i = 0; i + 3 <= n; i += 3) memcpy(big + i, i % 2 ? "\xe2\x9c\x93" : "abc", 3);
    for (; i < n; i++) big[i] = 'z';
    big[n] = '\0';
    ctx.data = big;
    ctx.len = n;
    TT_ASSERT(make_table(s));
    TT_EQ_INT(obx__unit(&s->db, insert_big, &ctx, "insert big"), OBX_OK);
    obx__p_i64(&p[0], 7);
    TT_EQ_INT(obx__exec(&s->db, 6, "SELECT v FROM obx_core_test WHERE id = ?", p, 1, NULL, &cur), OBX_OK);
    TT_EQ_INT(obx__fetch(&s->db, cur), OBX_OK);
    TT_EQ_INT(read_column(&s->db, cur, 1, SQL_C_CHAR, &back, &len), OBX_OK);
    obx__close(cur);
    if (!s->db.tx_by_sql) obx__end_tran(&s->db, SQL_ROLLBACK, "end read");
    TT_EQ_INT(len, n);
    TT_EXPECT(memcmp(back, big, n) == 0);
    obx__free(&s->hooks, back);
    free(big);
    obx_store_close(s);
}

static void test_adopt_caller_connection(void) {
    SQLHENV env = NULL;
    SQLHDBC dbc = NULL;
    SQLUINTEGER autocommit = 99, want;
    obx_store_desc desc;
    obx_store *s = NULL;
    obx_store_info info;
    TT_ASSERT(SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_ENV, NULL, &env)));
    SQLSetEnvAttr(env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER)SQL_OV_ODBC3, 0);
    TT_ASSERT(SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_DBC, env, &dbc)));
    TT_ASSERT(SQL_SUCCEEDED(SQLDriverConnect(dbc, NULL, (SQLCHAR *)(uintptr_t)g_connstr, SQL_NTS, NULL, 0, NULL, SQL_DRIVER_NOPROMPT)));
    /* Autocommit as the dialect's units want it (documented at hdbc):
     * off where they commit by hand, on for SQLite (BEGIN IMMEDIATE). */
    want = strcmp(g_backend, "sqlite") == 0 ? SQL_AUTOCOMMIT_ON : SQL_AUTOCOMMIT_OFF;
    TT_ASSERT(SQL_SUCCEEDED(SQLSetConnectAttr(dbc, SQL_ATTR_AUTOCOMMIT, (SQLPOINTER)(uintptr_t)want, SQL_IS_UINTEGER)));
    memset(&desc, 0, sizeof desc);
    desc.hdbc = dbc;
    desc.hooks.logger.log = quiet_log;
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_OK);
    TT_EQ_INT(obx_store_get_info(s, &info), OBX_OK);
    TT_EQ_STR(obx_dialect_name(info.dialect), g_backend);
    obx_store_close(s);
    /* The caller's connection is still open and untouched. */
    TT_ASSERT(SQL_SUCCEEDED(SQLGetConnectAttr(dbc, SQL_ATTR_AUTOCOMMIT, &autocommit, 0, NULL)));
    TT_EQ_INT(autocommit, want);
    SQLDisconnect(dbc);
    SQLFreeHandle(SQL_HANDLE_DBC, dbc);
    SQLFreeHandle(SQL_HANDLE_ENV, env);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s sqlite|postgresql|mariadb '<ODBC connection string>'\n", argv[0]);
        return 2;
    }
    g_backend = argv[1];
    g_connstr = argv[2];
    TT_RUN("CORE-CONNECT", g_backend, "connect and detect the dialect", test_connect_detect);
    TT_RUN("CORE-CONNECT-FAIL", g_backend, "a bad connection string reports SQLSTATE and call", test_connect_failure);
    TT_RUN("CORE-CONNECT-PERMANENT", g_backend, "a missing DSN, driver or database, a refused login, a SQLite file's missing directory or none (a temporary file): named, OBX_ERR_DB", test_connect_permanent);
    if (strcmp(g_backend, "sqlite") == 0)
        TT_RUN("CORE-SQLITE-MEMORY", g_backend, "Database=:memory: is a database in memory, asked for: opened", test_sqlite_memory);
    TT_RUN("CORE-ADOPT", g_backend, "a caller's connection is used and left as it was", test_adopt_caller_connection);
    TT_RUN("CORE-TX-ROLLBACK", g_backend, "a rolled-back transaction leaves nothing", test_rollback_leaves_nothing);
    TT_RUN("CORE-TX-PARTIAL", g_backend, "a failed statement is never committed as partial work", test_failed_statement_never_partial);
    TT_RUN("CORE-TX-COMMIT", g_backend, "a committed unit is visible to another connection, UTF-8 exact", test_commit_visible_elsewhere);
    TT_RUN("CORE-NO-DATA", g_backend, "a zero-row UPDATE is success with 0 rows", test_zero_row_update);
    TT_RUN("CORE-LARGE-TEXT", g_backend, "4 MiB of UTF-8 text round-trips byte-exact", test_large_text_roundtrip);
    return tt_done();
}

/* fake_selftest.c - exercises fake_odbc directly through the SQL* API, so a
 * bug in the fake is not mistaken for a bug in obx.h/ibx.h. */
#include "fake_odbc.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int passed, failed;

#define CHECK(cond) do { \
        if (cond) passed++; \
        else { failed++; printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); } \
    } while (0)

/* SQLCHAR * from a string literal without tripping -Wcast-qual. */
#define S(x) ((SQLCHAR *)(uintptr_t)(x))

static int streq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

/* Reads diagnostic record rec of a handle into state/msg; returns its rc. */
static SQLRETURN diag(SQLSMALLINT type, SQLHANDLE h, SQLSMALLINT rec,
                      char state[6], SQLINTEGER *native, char *msg,
                      SQLSMALLINT cap)
{
    SQLSMALLINT len = 0;
    memset(state, 0, 6);
    return SQLGetDiagRec(type, h, rec, (SQLCHAR *)state, native,
                         (SQLCHAR *)msg, cap, &len);
}

static int has_state(SQLSMALLINT type, SQLHANDLE h, const char *want)
{
    char st[6], msg[256];
    SQLINTEGER nat = 0;
    return SQL_SUCCEEDED(diag(type, h, 1, st, &nat, msg, sizeof msg))
        && strcmp(st, want) == 0;
}

static SQLUINTEGER conn_attr(SQLHDBC dbc, SQLINTEGER attr)
{
    SQLULEN v = 0;      /* zeroed: the fake writes only 32 bits */
    SQLGetConnectAttr(dbc, attr, &v, 0, NULL);
    return (SQLUINTEGER)v;
}

static void test_connect(SQLHENV *env, SQLHDBC *dbc)
{
    SQLCHAR out[64], small[8], info[64];
    SQLSMALLINT outlen = 0;
    char st[6], msg[64];
    SQLINTEGER nat = 0;

    CHECK(SQLAllocHandle(SQL_HANDLE_ENV, SQL_NULL_HANDLE, env) == SQL_SUCCESS);
    CHECK(SQLSetEnvAttr(*env, SQL_ATTR_ODBC_VERSION,
                        (SQLPOINTER)SQL_OV_ODBC3, 0) == SQL_SUCCESS);
    CHECK(SQLAllocHandle(SQL_HANDLE_DBC, *env, dbc) == SQL_SUCCESS);
    CHECK(fake_open_handles() == 2);

    /* Invalid handles: NULL, wrong type. */
    CHECK(SQLExecute(SQL_NULL_HSTMT) == SQL_INVALID_HANDLE);
    CHECK(SQLExecute(*dbc) == SQL_INVALID_HANDLE);
    CHECK(SQLDisconnect(*env) == SQL_INVALID_HANDLE);

    /* Not connected yet. */
    CHECK(SQLGetInfo(*dbc, SQL_DBMS_NAME, info, sizeof info, NULL) == SQL_ERROR);
    CHECK(has_state(SQL_HANDLE_DBC, *dbc, "08003"));

    /* Scripted connect failure, then success. */
    fake_set_connect_error("28P01", 101, "password authentication failed");
    CHECK(SQLDriverConnect(*dbc, NULL, S("DSN=x;PWD=bad"), SQL_NTS, NULL, 0,
                           NULL, SQL_DRIVER_NOPROMPT) == SQL_ERROR);
    CHECK(diag(SQL_HANDLE_DBC, *dbc, 1, st, &nat, msg, sizeof msg) == SQL_SUCCESS);
    CHECK(streq(st, "28P01") && nat == 101);
    CHECK(streq(msg, "password authentication failed"));
    CHECK(streq(fake_last_connstr(), "DSN=x;PWD=bad"));
    fake_set_connect_error(NULL, 0, NULL);

    CHECK(SQLDriverConnect(*dbc, NULL, S("DSN=fake;UID=u"), 8, out, sizeof out,
                           &outlen, SQL_DRIVER_NOPROMPT) == SQL_SUCCESS);
    CHECK(streq(fake_last_connstr(), "DSN=fake"));
    CHECK(streq((char *)out, "DSN=fake") && outlen == 8);
    CHECK(SQLDriverConnect(*dbc, NULL, S("DSN=y"), SQL_NTS, NULL, 0, NULL,
                           SQL_DRIVER_NOPROMPT) == SQL_ERROR);
    CHECK(has_state(SQL_HANDLE_DBC, *dbc, "08002"));
    /* A failing call cleared the old record; a successful one clears it. */
    CHECK(SQLGetInfo(*dbc, SQL_DBMS_NAME, info, sizeof info, &outlen) == SQL_SUCCESS);
    CHECK(diag(SQL_HANDLE_DBC, *dbc, 1, st, &nat, msg, sizeof msg) == SQL_NO_DATA);
    CHECK(streq((char *)info, "SQLite") && outlen == 6);

    fake_set_dbms_name("PostgreSQL");
    CHECK(SQLGetInfo(*dbc, SQL_DBMS_NAME, small, sizeof small, &outlen)
          == SQL_SUCCESS_WITH_INFO);
    CHECK(streq((char *)small, "Postgre") && outlen == 10);
    CHECK(has_state(SQL_HANDLE_DBC, *dbc, "01004"));
    CHECK(SQLGetInfo(*dbc, SQL_DBMS_VER, info, sizeof info, NULL) == SQL_SUCCESS);
    CHECK(streq((char *)info, "0.0-fake"));
    CHECK(SQLGetInfo(*dbc, SQL_DRIVER_NAME, info, sizeof info, NULL) == SQL_SUCCESS);
    CHECK(streq((char *)info, "fake_odbc"));
    CHECK(SQLGetInfo(*dbc, SQL_MAX_COLUMN_NAME_LEN, info, sizeof info, NULL)
          == SQL_ERROR);
    CHECK(has_state(SQL_HANDLE_DBC, *dbc, "HY096"));

    /* Connection attributes. */
    CHECK(conn_attr(*dbc, SQL_ATTR_AUTOCOMMIT) == SQL_AUTOCOMMIT_ON);
    CHECK(SQLSetConnectAttr(*dbc, SQL_ATTR_AUTOCOMMIT,
                            (SQLPOINTER)SQL_AUTOCOMMIT_OFF, 0) == SQL_SUCCESS);
    CHECK(conn_attr(*dbc, SQL_ATTR_AUTOCOMMIT) == SQL_AUTOCOMMIT_OFF);
    CHECK(SQLSetConnectAttr(*dbc, SQL_ATTR_TXN_ISOLATION,
                            (SQLPOINTER)SQL_TXN_SERIALIZABLE, 0) == SQL_SUCCESS);
    CHECK(conn_attr(*dbc, SQL_ATTR_TXN_ISOLATION) == SQL_TXN_SERIALIZABLE);
    CHECK(conn_attr(*dbc, SQL_ATTR_CONNECTION_DEAD) == SQL_CD_FALSE);
    CHECK(SQLSetConnectAttr(*dbc, SQL_ATTR_CONNECTION_DEAD,
                            (SQLPOINTER)SQL_CD_TRUE, 0) == SQL_ERROR);
}

static void test_params(SQLHSTMT st)
{
    char name[16] = "alice";
    SQLBIGINT id = 42;
    unsigned char blob[4] = { 'a', 0, 'b', 0xff };
    SQLLEN name_ind = SQL_NTS, blob_ind = 4, null_ind = SQL_NULL_DATA;
    SQLINTEGER dummy = 0;
    double ratio = 0.1;
    SQLLEN rc_count = -5;
    fake_param p;
    int i;

    CHECK(SQLPrepare(st, S("INSERT INTO t VALUES (?, ?, ?, ?, ?) -- junk"), 36)
          == SQL_SUCCESS);
    CHECK(SQLBindParameter(st, 1, SQL_PARAM_INPUT, SQL_C_CHAR, SQL_VARCHAR, 16,
                           0, name, sizeof name, &name_ind) == SQL_SUCCESS);
    CHECK(SQLBindParameter(st, 2, SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0,
                           0, &id, 0, NULL) == SQL_SUCCESS);
    CHECK(SQLBindParameter(st, 3, SQL_PARAM_INPUT, SQL_C_BINARY, SQL_VARBINARY,
                           4, 0, blob, sizeof blob, &blob_ind) == SQL_SUCCESS);
    CHECK(SQLBindParameter(st, 4, SQL_PARAM_INPUT, SQL_C_SLONG, SQL_INTEGER, 0,
                           0, &dummy, 0, &null_ind) == SQL_SUCCESS);
    CHECK(SQLBindParameter(st, 5, SQL_PARAM_INPUT, SQL_C_DOUBLE, SQL_DOUBLE, 0,
                           0, &ratio, 0, NULL) == SQL_SUCCESS);
    CHECK(SQLBindParameter(st, 0, SQL_PARAM_INPUT, SQL_C_CHAR, SQL_VARCHAR, 0,
                           0, name, 0, NULL) == SQL_ERROR);
    CHECK(has_state(SQL_HANDLE_STMT, st, "07009"));
    CHECK(SQLBindParameter(st, 6, SQL_PARAM_OUTPUT, SQL_C_CHAR, SQL_VARCHAR, 0,
                           0, name, 0, NULL) == SQL_ERROR);
    CHECK(SQLBindParameter(st, 6, SQL_PARAM_INPUT, SQL_C_WCHAR, SQL_VARCHAR, 0,
                           0, name, 0, NULL) == SQL_ERROR);
    CHECK(has_state(SQL_HANDLE_STMT, st, "HY003"));

    /* Values are read at execute time, not at bind time. */
    strcpy(name, "bob");
    id = -7;
    fake_push_ok(1);
    CHECK(SQLExecute(st) == SQL_SUCCESS);
    CHECK(SQLRowCount(st, &rc_count) == SQL_SUCCESS && rc_count == 1);
    CHECK(fake_log_count() == 1);
    CHECK(streq(fake_log_sql(0), "INSERT INTO t VALUES (?, ?, ?, ?, ?)"));
    CHECK(fake_log_paramset(0) == 1 && fake_log_param_count(0) == 5);
    CHECK(fake_log_rc(0) == SQL_SUCCESS);
    CHECK(streq(fake_log_param_text(0, 0, 1), "bob"));
    CHECK(streq(fake_log_param_text(0, 0, 2), "-7"));
    p = fake_log_param(0, 0, 3);
    CHECK(p.c_type == SQL_C_BINARY && p.sql_type == SQL_VARBINARY && !p.is_null);
    CHECK(p.len == 4 && p.data && memcmp(p.data, blob, 4) == 0);
    p = fake_log_param(0, 0, 4);
    CHECK(p.is_null && p.data == NULL && streq(fake_log_param_text(0, 0, 4), "NULL"));
    CHECK(streq(fake_log_param_text(0, 0, 5), "0.1"));
    p = fake_log_param(0, 0, 1);
    CHECK(p.c_type == SQL_C_CHAR && p.sql_type == SQL_VARCHAR && p.len == 3);
    CHECK(fake_log_param_text(0, 0, 6) == NULL && fake_log_param_text(0, 1, 1) == NULL);
    CHECK(fake_log_sql(1) == NULL && fake_log_paramset(9) == -1);
    CHECK(fake_log_param(0, 0, 9).c_type == 0);

    /* Explicit length on a CHAR; re-execute of the prepared statement. */
    name_ind = 2;
    CHECK(SQLExecute(st) == SQL_SUCCESS);       /* empty queue: success */
    CHECK(SQLRowCount(st, &rc_count) == SQL_SUCCESS && rc_count == 0);
    CHECK(streq(fake_log_param_text(1, 0, 1), "bo"));

    /* SQL_NO_DATA, as PG/SQLite report for a 0-row UPDATE. */
    fake_push_nodata();
    CHECK(SQLExecute(st) == SQL_NO_DATA);
    CHECK(SQLRowCount(st, &rc_count) == SQL_SUCCESS && rc_count == 0);
    CHECK(fake_log_rc(2) == SQL_NO_DATA);
    CHECK(SQLCloseCursor(st) == SQL_ERROR);      /* no cursor after NO_DATA */
    CHECK(has_state(SQL_HANDLE_STMT, st, "24000"));

    /* Array binding: three rows, column-wise. */
    {
        char names[3][8] = { "x", "yy", "" };
        SQLLEN ninds[3] = { SQL_NTS, SQL_NTS, SQL_NULL_DATA };
        SQLINTEGER nums[3] = { 1, -2, 2147483647 };
        SQLULEN processed = 0, ps = 0;
        SQLUSMALLINT status[3] = { 99, 99, 99 };
        int e;

        CHECK(SQLFreeStmt(st, SQL_RESET_PARAMS) == SQL_SUCCESS);
        CHECK(SQLSetStmtAttr(st, SQL_ATTR_PARAMSET_SIZE, (SQLPOINTER)(uintptr_t)3, 0)
              == SQL_SUCCESS);
        CHECK(SQLSetStmtAttr(st, SQL_ATTR_PARAMSET_SIZE, (SQLPOINTER)(uintptr_t)0, 0)
              == SQL_ERROR);
        CHECK(SQLGetStmtAttr(st, SQL_ATTR_PARAMSET_SIZE, &ps, 0, NULL)
              == SQL_SUCCESS && ps == 3);
        CHECK(SQLSetStmtAttr(st, SQL_ATTR_PARAMS_PROCESSED_PTR, &processed, 0)
              == SQL_SUCCESS);
        CHECK(SQLSetStmtAttr(st, SQL_ATTR_PARAM_STATUS_PTR, status, 0)
              == SQL_SUCCESS);
        CHECK(SQLBindParameter(st, 1, SQL_PARAM_INPUT, SQL_C_CHAR, SQL_VARCHAR,
                               8, 0, names, 8, ninds) == SQL_SUCCESS);
        CHECK(SQLBindParameter(st, 2, SQL_PARAM_INPUT, SQL_C_SLONG, SQL_INTEGER,
                               0, 0, nums, 0, NULL) == SQL_SUCCESS);
        fake_push_ok(3);
        CHECK(SQLExecDirect(st, S("INSERT INTO arr VALUES (?, ?)"), SQL_NTS)
              == SQL_SUCCESS);
        e = fake_log_find("INTO arr", 0);
        CHECK(e == 3 && fake_log_paramset(e) == 3 && fake_log_param_count(e) == 2);
        CHECK(streq(fake_log_param_text(e, 0, 1), "x"));
        CHECK(streq(fake_log_param_text(e, 1, 1), "yy"));
        CHECK(fake_log_param(e, 2, 1).is_null);
        CHECK(streq(fake_log_param_text(e, 0, 2), "1"));
        CHECK(streq(fake_log_param_text(e, 1, 2), "-2"));
        CHECK(streq(fake_log_param_text(e, 2, 2), "2147483647"));
        CHECK(processed == 3);
        for (i = 0; i < 3; i++)
            CHECK(status[i] == SQL_PARAM_SUCCESS);
        /* SQLExecute is refused after SQLExecDirect (nothing prepared). */
        CHECK(SQLExecute(st) == SQL_ERROR);
        CHECK(has_state(SQL_HANDLE_STMT, st, "HY010"));
        CHECK(SQLSetStmtAttr(st, SQL_ATTR_PARAMSET_SIZE, (SQLPOINTER)(uintptr_t)1, 0)
              == SQL_SUCCESS);
        CHECK(SQLSetStmtAttr(st, SQL_ATTR_PARAMS_PROCESSED_PTR, NULL, 0)
              == SQL_SUCCESS);
        CHECK(SQLSetStmtAttr(st, SQL_ATTR_PARAM_STATUS_PTR, NULL, 0)
              == SQL_SUCCESS);
        CHECK(SQLFreeStmt(st, SQL_RESET_PARAMS) == SQL_SUCCESS);
    }
}

static void test_dae(SQLHSTMT st)
{
    char key[] = "k1";
    char tok_a[1], tok_b[1];
    SQLLEN key_ind = SQL_NTS, a_ind = SQL_LEN_DATA_AT_EXEC(0);
    SQLLEN b_ind = SQL_DATA_AT_EXEC;
    SQLPOINTER token = NULL;
    SQLBIGINT big = 1234567890123LL;
    int before = fake_log_count(), e;

    CHECK(SQLPrepare(st, S("UPDATE blobs SET a = ?, b = ? WHERE k = ?"), SQL_NTS)
          == SQL_SUCCESS);
    CHECK(SQLBindParameter(st, 1, SQL_PARAM_INPUT, SQL_C_BINARY,
                           SQL_LONGVARBINARY, 0, 0, tok_a, 0, &a_ind) == SQL_SUCCESS);
    CHECK(SQLBindParameter(st, 2, SQL_PARAM_INPUT, SQL_C_SBIGINT, SQL_BIGINT, 0,
                           0, tok_b, 0, &b_ind) == SQL_SUCCESS);
    CHECK(SQLBindParameter(st, 3, SQL_PARAM_INPUT, SQL_C_CHAR, SQL_VARCHAR, 0,
                           0, key, 0, &key_ind) == SQL_SUCCESS);
    fake_push_ok(1);
    CHECK(SQLExecute(st) == SQL_NEED_DATA);
    CHECK(fake_log_count() == before);          /* not executed yet */
    CHECK(SQLExecute(st) == SQL_ERROR);          /* sequence error */
    CHECK(has_state(SQL_HANDLE_STMT, st, "HY010"));
    CHECK(SQLParamData(st, &token) == SQL_NEED_DATA && token == tok_a);
    CHECK(SQLPutData(st, S("hello "), SQL_NTS) == SQL_SUCCESS);
    CHECK(SQLPutData(st, S("world\0!"), 7) == SQL_SUCCESS);
    CHECK(SQLParamData(st, &token) == SQL_NEED_DATA && token == tok_b);
    CHECK(SQLPutData(st, &big, 0) == SQL_SUCCESS);
    CHECK(SQLParamData(st, &token) == SQL_SUCCESS);
    e = fake_log_count() - 1;
    CHECK(e == before);
    CHECK(streq(fake_log_sql(e), "UPDATE blobs SET a = ?, b = ? WHERE k = ?"));
    CHECK(fake_log_param(e, 0, 1).len == 13);
    CHECK(memcmp(fake_log_param(e, 0, 1).data, "hello world\0!", 13) == 0);
    CHECK(streq(fake_log_param_text(e, 0, 2), "1234567890123"));
    CHECK(streq(fake_log_param_text(e, 0, 3), "k1"));
    CHECK(SQLParamData(st, &token) == SQL_ERROR);   /* nothing pending */

    /* A NULL sent through SQLPutData; SQLCancel abandons need-data. */
    fake_push_error(SQL_ERROR, "22001", 0, "value too long");
    CHECK(SQLExecute(st) == SQL_NEED_DATA);
    CHECK(SQLParamData(st, &token) == SQL_NEED_DATA);
    CHECK(SQLPutData(st, NULL, SQL_NULL_DATA) == SQL_SUCCESS);
    CHECK(SQLParamData(st, &token) == SQL_NEED_DATA);
    CHECK(SQLPutData(st, &big, 0) == SQL_SUCCESS);
    CHECK(SQLParamData(st, &token) == SQL_ERROR);   /* the scripted error */
    CHECK(has_state(SQL_HANDLE_STMT, st, "22001"));
    e = fake_log_count() - 1;
    CHECK(fake_log_param(e, 0, 1).is_null && fake_log_rc(e) == SQL_ERROR);
    CHECK(SQLExecute(st) == SQL_NEED_DATA);
    CHECK(SQLCancel(st) == SQL_SUCCESS);
    CHECK(SQLPutData(st, S("x"), 1) == SQL_ERROR);
    CHECK(SQLFreeStmt(st, SQL_RESET_PARAMS) == SQL_SUCCESS);

    /* Data-at-exec with array binding: one token per row. */
    {
        char rows[2][4];
        SQLLEN inds[2] = { SQL_DATA_AT_EXEC, SQL_DATA_AT_EXEC };
        CHECK(SQLSetStmtAttr(st, SQL_ATTR_PARAMSET_SIZE, (SQLPOINTER)(uintptr_t)2, 0)
              == SQL_SUCCESS);
        CHECK(SQLBindParameter(st, 1, SQL_PARAM_INPUT, SQL_C_CHAR, SQL_VARCHAR, 0,
                               0, rows, 4, inds) == SQL_SUCCESS);
        CHECK(SQLExecDirect(st, S("INSERT INTO two VALUES (?)"), SQL_NTS)
              == SQL_NEED_DATA);
        CHECK(SQLParamData(st, &token) == SQL_NEED_DATA && token == rows[0]);
        CHECK(SQLPutData(st, S("r0"), 2) == SQL_SUCCESS);
        CHECK(SQLParamData(st, &token) == SQL_NEED_DATA && token == rows[1]);
        CHECK(SQLPutData(st, S("r1"), SQL_NTS) == SQL_SUCCESS);
        CHECK(SQLParamData(st, &token) == SQL_SUCCESS);
        e = fake_log_count() - 1;
        CHECK(fake_log_paramset(e) == 2);
        CHECK(streq(fake_log_param_text(e, 0, 1), "r0"));
        CHECK(streq(fake_log_param_text(e, 1, 1), "r1"));
        CHECK(SQLSetStmtAttr(st, SQL_ATTR_PARAMSET_SIZE, (SQLPOINTER)(uintptr_t)1, 0)
              == SQL_SUCCESS);
        CHECK(SQLFreeStmt(st, SQL_RESET_PARAMS) == SQL_SUCCESS);
    }
}

static void test_rows(SQLHSTMT st)
{
    const char *cells[] = { "1", "abcdefghij", NULL, "2.5",
                            "-40000", "", "x", "nan?" };
    const char *bin[] = { "a\0b\0c", "plain" };
    const long lens[] = { 5, -1 };
    char buf[4], big[64];
    unsigned char bbuf[2];
    SQLLEN ind = 0, rows = 0;
    SQLSMALLINT ncols = 0;
    SQLBIGINT i64 = 0;
    SQLINTEGER i32 = 0;
    SQLSMALLINT i16 = 0;
    double dbl = 0;

    fake_push_rows(4, 2, cells);
    CHECK(SQLExecDirect(st, S("SELECT a, b, c, d FROM t"), SQL_NTS) == SQL_SUCCESS);
    CHECK(SQLNumResultCols(st, &ncols) == SQL_SUCCESS && ncols == 4);
    CHECK(SQLRowCount(st, &rows) == SQL_SUCCESS && rows == 2);
    CHECK(SQLGetData(st, 1, SQL_C_CHAR, buf, sizeof buf, &ind) == SQL_ERROR);
    CHECK(has_state(SQL_HANDLE_STMT, st, "24000"));   /* before SQLFetch */
    CHECK(SQLFetch(st) == SQL_SUCCESS);
    CHECK(SQLGetData(st, 1, SQL_C_SBIGINT, &i64, 0, &ind) == SQL_SUCCESS);
    CHECK(i64 == 1 && ind == (SQLLEN)sizeof i64);
    CHECK(SQLGetData(st, 1, SQL_C_SBIGINT, &i64, 0, &ind) == SQL_NO_DATA);
    /* Chunked CHAR: indicator = bytes left before each call. */
    CHECK(SQLGetData(st, 2, SQL_C_CHAR, buf, sizeof buf, &ind)
          == SQL_SUCCESS_WITH_INFO && ind == 10 && streq(buf, "abc"));
    CHECK(has_state(SQL_HANDLE_STMT, st, "01004"));
    CHECK(SQLGetData(st, 2, SQL_C_CHAR, buf, sizeof buf, &ind)
          == SQL_SUCCESS_WITH_INFO && ind == 7 && streq(buf, "def"));
    CHECK(SQLGetData(st, 2, SQL_C_CHAR, buf, sizeof buf, &ind)
          == SQL_SUCCESS_WITH_INFO && ind == 4 && streq(buf, "ghi"));
    CHECK(SQLGetData(st, 2, SQL_C_CHAR, buf, sizeof buf, &ind) == SQL_SUCCESS
          && ind == 1 && streq(buf, "j"));
    CHECK(SQLGetData(st, 2, SQL_C_CHAR, buf, sizeof buf, &ind) == SQL_NO_DATA);
    CHECK(SQLGetData(st, 3, SQL_C_CHAR, buf, sizeof buf, &ind) == SQL_SUCCESS
          && ind == SQL_NULL_DATA);
    CHECK(SQLGetData(st, 3, SQL_C_CHAR, buf, sizeof buf, &ind) == SQL_NO_DATA);
    CHECK(SQLGetData(st, 4, SQL_C_DOUBLE, &dbl, 0, &ind) == SQL_SUCCESS
          && dbl > 2.49 && dbl < 2.51);
    CHECK(SQLGetData(st, 5, SQL_C_CHAR, buf, sizeof buf, &ind) == SQL_ERROR);
    CHECK(has_state(SQL_HANDLE_STMT, st, "07009"));
    CHECK(SQLGetData(st, 1, SQL_C_WCHAR, buf, sizeof buf, &ind) == SQL_ERROR);

    CHECK(SQLFetch(st) == SQL_SUCCESS);
    CHECK(SQLGetData(st, 1, SQL_C_SSHORT, &i16, 0, &ind) == SQL_ERROR);
    CHECK(has_state(SQL_HANDLE_STMT, st, "22003"));
    CHECK(SQLGetData(st, 1, SQL_C_SLONG, &i32, 0, &ind) == SQL_SUCCESS
          && i32 == -40000);
    CHECK(SQLGetData(st, 2, SQL_C_CHAR, buf, sizeof buf, &ind) == SQL_SUCCESS
          && ind == 0 && streq(buf, ""));
    CHECK(SQLGetData(st, 3, SQL_C_LONG, &i32, 0, &ind) == SQL_ERROR);
    CHECK(has_state(SQL_HANDLE_STMT, st, "22018"));
    CHECK(SQLGetData(st, 4, SQL_C_CHAR, big, sizeof big, NULL) == SQL_SUCCESS
          && streq(big, "nan?"));
    CHECK(SQLFetch(st) == SQL_NO_DATA);
    CHECK(SQLFetch(st) == SQL_NO_DATA);
    CHECK(SQLCloseCursor(st) == SQL_SUCCESS);
    CHECK(SQLFetch(st) == SQL_ERROR);
    CHECK(SQLNumResultCols(st, &ncols) == SQL_SUCCESS && ncols == 0);

    /* Binary cell with embedded NULs, chunked; bound columns. */
    fake_push_rows_len(2, 1, bin, lens);
    CHECK(SQLBindCol(st, 2, SQL_C_CHAR, big, sizeof big, &ind) == SQL_SUCCESS);
    CHECK(SQLBindCol(st, 0, SQL_C_CHAR, big, sizeof big, &ind) == SQL_ERROR);
    CHECK(SQLExecDirect(st, S("SELECT blob, txt FROM b"), SQL_NTS) == SQL_SUCCESS);
    CHECK(SQLFetch(st) == SQL_SUCCESS && streq(big, "plain") && ind == 5);
    CHECK(SQLGetData(st, 1, SQL_C_BINARY, bbuf, sizeof bbuf, &ind)
          == SQL_SUCCESS_WITH_INFO && ind == 5 && bbuf[0] == 'a' && bbuf[1] == 0);
    CHECK(SQLGetData(st, 1, SQL_C_BINARY, bbuf, sizeof bbuf, &ind)
          == SQL_SUCCESS_WITH_INFO && ind == 3 && bbuf[0] == 'b' && bbuf[1] == 0);
    CHECK(SQLGetData(st, 1, SQL_C_BINARY, bbuf, sizeof bbuf, &ind)
          == SQL_SUCCESS && ind == 1 && bbuf[0] == 'c');
    CHECK(SQLGetData(st, 1, SQL_C_BINARY, bbuf, sizeof bbuf, &ind) == SQL_NO_DATA);
    CHECK(SQLFreeStmt(st, SQL_UNBIND) == SQL_SUCCESS);
    CHECK(SQLMoreResults(st) == SQL_NO_DATA);

    /* Re-executing with a half-read result set is refused (unixODBC DM). */
    fake_push_rows(1, 2, cells);
    CHECK(SQLExecDirect(st, S("SELECT a FROM t"), SQL_NTS) == SQL_SUCCESS);
    CHECK(SQLFetch(st) == SQL_SUCCESS);
    CHECK(SQLExecDirect(st, S("SELECT 1"), SQL_NTS) == SQL_ERROR);
    CHECK(has_state(SQL_HANDLE_STMT, st, "24000"));
    CHECK(SQLFreeStmt(st, SQL_CLOSE) == SQL_SUCCESS);
    CHECK(SQLExecDirect(st, S("SELECT 1"), SQL_NTS) == SQL_SUCCESS);
    CHECK(SQLCloseCursor(st) == SQL_SUCCESS);
}

static void test_errors(SQLHDBC dbc, SQLHSTMT st)
{
    char state[6], msg[64], tiny[5];
    SQLINTEGER nat = 0;
    SQLSMALLINT len = 0;
    SQLHSTMT st2 = SQL_NULL_HSTMT;
    int n0, e;

    fake_push_error(SQL_ERROR, "23505", 7, "duplicate key value");
    fake_push_info("HY000", 99, "DETAIL: Key (id)=(1) already exists.");
    CHECK(SQLExecDirect(st, S("INSERT INTO dup VALUES (1)"), SQL_NTS) == SQL_ERROR);
    CHECK(diag(SQL_HANDLE_STMT, st, 1, state, &nat, msg, sizeof msg) == SQL_SUCCESS);
    CHECK(streq(state, "23505") && nat == 7 && streq(msg, "duplicate key value"));
    CHECK(diag(SQL_HANDLE_STMT, st, 2, state, &nat, msg, sizeof msg) == SQL_SUCCESS);
    CHECK(streq(state, "HY000") && nat == 99);
    CHECK(diag(SQL_HANDLE_STMT, st, 3, state, &nat, msg, sizeof msg) == SQL_NO_DATA);
    CHECK(SQLGetDiagRec(SQL_HANDLE_STMT, st, 1, NULL, NULL, (SQLCHAR *)tiny,
                        sizeof tiny, &len) == SQL_SUCCESS_WITH_INFO);
    CHECK(streq(tiny, "dupl") && len == 19);
    CHECK(SQLGetDiagRec(SQL_HANDLE_STMT, st, 0, NULL, NULL, NULL, 0, NULL)
          == SQL_ERROR);
    CHECK(SQLGetDiagRec(SQL_HANDLE_DBC, st, 1, NULL, NULL, NULL, 0, NULL)
          == SQL_INVALID_HANDLE);
    e = fake_log_find("dup", 0);
    CHECK(e >= 0 && fake_log_rc(e) == SQL_ERROR);

    /* An info record turns success into SQL_SUCCESS_WITH_INFO. */
    fake_push_ok(2);
    fake_push_info("01000", 0, "NOTICE: something");
    CHECK(SQLExecDirect(st, S("DELETE FROM t"), SQL_NTS) == SQL_SUCCESS_WITH_INFO);
    CHECK(has_state(SQL_HANDLE_STMT, st, "01000"));
    /* Any later call clears the handle's records. */
    CHECK(SQLCloseCursor(st) == SQL_SUCCESS);
    CHECK(diag(SQL_HANDLE_STMT, st, 1, state, &nat, msg, sizeof msg) == SQL_NO_DATA);

    /* fail_call: second SQLExecute fails without consuming the queue. */
    CHECK(SQLPrepare(st, S("UPDATE q SET x = 1"), SQL_NTS) == SQL_SUCCESS);
    n0 = fake_log_count();
    fake_fail_call("SQLExecute", 2, SQL_ERROR, "40001", 1213, "deadlock");
    fake_push_ok(5);
    fake_push_ok(6);
    CHECK(SQLExecute(st) == SQL_SUCCESS);
    CHECK(SQLExecute(st) == SQL_ERROR);
    CHECK(diag(SQL_HANDLE_STMT, st, 1, state, &nat, msg, sizeof msg) == SQL_SUCCESS);
    CHECK(streq(state, "40001") && nat == 1213 && streq(msg, "deadlock"));
    CHECK(SQLExecute(st) == SQL_SUCCESS);
    {
        SQLLEN rc_count = 0;
        CHECK(SQLRowCount(st, &rc_count) == SQL_SUCCESS && rc_count == 6);
    }
    CHECK(fake_log_count() == n0 + 2);

    /* Faults on SQLAllocHandle and SQLEndTran report on the DBC. */
    fake_fail_call("SQLAllocHandle", 1, SQL_ERROR, "HY001", 0, "no memory");
    CHECK(SQLAllocHandle(SQL_HANDLE_STMT, dbc, &st2) == SQL_ERROR);
    CHECK(st2 == SQL_NULL_HSTMT && has_state(SQL_HANDLE_DBC, dbc, "HY001"));
    fake_fail_call("SQLEndTran", 1, SQL_ERROR, "40P01", 0, "deadlock detected");
    CHECK(SQLEndTran(SQL_HANDLE_DBC, dbc, SQL_COMMIT) == SQL_ERROR);
    CHECK(has_state(SQL_HANDLE_DBC, dbc, "40P01"));
    CHECK(fake_commits() == 0);

    /* Commits and rollbacks are counted and logged in order. */
    CHECK(SQLEndTran(SQL_HANDLE_DBC, dbc, SQL_COMMIT) == SQL_SUCCESS);
    CHECK(SQLEndTran(SQL_HANDLE_DBC, dbc, SQL_ROLLBACK) == SQL_SUCCESS);
    CHECK(SQLEndTran(SQL_HANDLE_DBC, dbc, 42) == SQL_ERROR);
    CHECK(fake_commits() == 1 && fake_rollbacks() == 1);
    e = fake_log_find("<COMMIT>", 0);
    CHECK(e == n0 + 2 && fake_log_find("<ROLLBACK>", e) == e + 1);
    CHECK(fake_log_paramset(e) == 0);
    CHECK(fake_log_find("UPDATE q", 0) < e && fake_log_find("nope", 0) == -1);
    CHECK(fake_log_find("UPDATE q", e) == -1);
}

static void test_counters(SQLHSTMT st)
{
    int total = fake_call_count(), ex = fake_calls("SQLExecDirect");
    CHECK(SQLExecDirect(st, S("SELECT 1"), SQL_NTS) == SQL_SUCCESS);
    CHECK(SQLCloseCursor(st) == SQL_SUCCESS);
    CHECK(fake_call_count() == total + 2);
    CHECK(fake_calls("SQLExecDirect") == ex + 1);
    CHECK(fake_calls("SQLCancel") >= 1);
}

static void test_kill(SQLHDBC dbc, SQLHSTMT *st)
{
    char state[6], msg[64];
    SQLINTEGER nat = 0;
    int commits = fake_commits(), handles = fake_open_handles();
    SQLHSTMT st2 = SQL_NULL_HSTMT;
    SQLLEN rows = 0;

    CHECK(SQLSetConnectAttr(dbc, SQL_ATTR_AUTOCOMMIT,
                            (SQLPOINTER)SQL_AUTOCOMMIT_OFF, 0) == SQL_SUCCESS);
    fake_kill_connection_after(1);
    CHECK(SQLExecDirect(*st, S("INSERT INTO k VALUES (1)"), SQL_NTS) == SQL_SUCCESS);
    CHECK(conn_attr(dbc, SQL_ATTR_CONNECTION_DEAD) == SQL_CD_TRUE);
    CHECK(SQLExecDirect(*st, S("INSERT INTO k VALUES (2)"), SQL_NTS) == SQL_ERROR);
    CHECK(diag(SQL_HANDLE_STMT, *st, 1, state, &nat, msg, sizeof msg) == SQL_SUCCESS);
    CHECK(streq(state, "57P01"));
    CHECK(SQLExecDirect(*st, S("INSERT INTO k VALUES (3)"), SQL_NTS) == SQL_ERROR);
    CHECK(diag(SQL_HANDLE_STMT, *st, 1, state, &nat, msg, sizeof msg) == SQL_SUCCESS);
    CHECK(streq(state, "08S01") && nat == 35 && streq(msg, "connection lost (fake)"));
    CHECK(fake_log_find("VALUES (2)", 0) == -1);
    CHECK(SQLRowCount(*st, &rows) == SQL_SUCCESS);          /* client-side */
    CHECK(SQLAllocHandle(SQL_HANDLE_STMT, dbc, &st2) == SQL_ERROR);
    CHECK(has_state(SQL_HANDLE_DBC, dbc, "08S01"));

    /* The commit lie, then the truth. */
    CHECK(SQLEndTran(SQL_HANDLE_DBC, dbc, SQL_COMMIT) == SQL_SUCCESS);
    CHECK(fake_commits() == commits);
    CHECK(fake_log_find("<COMMIT LOST>", 0) == fake_log_count() - 1);
    fake_set_dead_commit_lies(0);
    CHECK(SQLEndTran(SQL_HANDLE_DBC, dbc, SQL_COMMIT) == SQL_ERROR);
    CHECK(has_state(SQL_HANDLE_DBC, dbc, "08S01"));
    CHECK(SQLEndTran(SQL_HANDLE_DBC, dbc, SQL_ROLLBACK) == SQL_ERROR);
    CHECK(fake_rollbacks() == 1);

    /* Disconnect frees the statement; reconnect revives, resets attrs. */
    CHECK(SQLFreeHandle(SQL_HANDLE_DBC, dbc) == SQL_ERROR);    /* connected */
    CHECK(SQLDisconnect(dbc) == SQL_SUCCESS);
    CHECK(fake_open_handles() == handles - 1);
    CHECK(SQLExecute(*st) == SQL_INVALID_HANDLE);
    CHECK(SQLDriverConnect(dbc, NULL, S("DSN=again"), SQL_NTS, NULL, 0, NULL,
                           SQL_DRIVER_NOPROMPT) == SQL_SUCCESS);
    CHECK(conn_attr(dbc, SQL_ATTR_CONNECTION_DEAD) == SQL_CD_FALSE);
    CHECK(conn_attr(dbc, SQL_ATTR_AUTOCOMMIT) == SQL_AUTOCOMMIT_ON);
    CHECK(SQLAllocHandle(SQL_HANDLE_STMT, dbc, st) == SQL_SUCCESS);
    CHECK(SQLExecDirect(*st, S("SELECT 1"), SQL_NTS) == SQL_SUCCESS);
    CHECK(SQLEndTran(SQL_HANDLE_DBC, dbc, SQL_COMMIT) == SQL_SUCCESS);
    CHECK(fake_commits() == commits + 1);
    fake_set_dead_commit_lies(1);

    /* kill after 0: the very next server call fails. */
    fake_kill_connection_after(0);
    CHECK(SQLPrepare(*st, S("SELECT 2"), SQL_NTS) == SQL_ERROR);
    CHECK(has_state(SQL_HANDLE_STMT, *st, "57P01"));
    CHECK(SQLDisconnect(dbc) == SQL_SUCCESS);
    CHECK(SQLDriverConnect(dbc, NULL, S("DSN=again"), SQL_NTS, NULL, 0, NULL,
                           SQL_DRIVER_NOPROMPT) == SQL_SUCCESS);
    CHECK(SQLAllocHandle(SQL_HANDLE_STMT, dbc, st) == SQL_SUCCESS);
}

static void test_reset(SQLHSTMT st)
{
    fake_push_ok(1);
    fake_fail_call("SQLExecDirect", 1, SQL_ERROR, "HY000", 0, "armed");
    fake_set_dbms_name("Other");
    fake_reset();
    CHECK(fake_log_count() == 0 && fake_call_count() == 0);
    CHECK(fake_commits() == 0 && fake_calls("SQLExecDirect") == 0);
    CHECK(fake_last_connstr() == NULL);
    /* Handles survive; fault and response were dropped. */
    CHECK(SQLExecDirect(st, S("SELECT 3"), SQL_NTS) == SQL_SUCCESS);
    CHECK(fake_log_count() == 1 && fake_log_rc(0) == SQL_SUCCESS);
    CHECK(fake_open_handles() == 3);
}

int main(void)
{
    SQLHENV env = SQL_NULL_HENV;
    SQLHDBC dbc = SQL_NULL_HDBC;
    SQLHSTMT st = SQL_NULL_HSTMT;
    SQLCHAR info[32];

    test_connect(&env, &dbc);
    CHECK(SQLAllocHandle(SQL_HANDLE_STMT, dbc, &st) == SQL_SUCCESS);
    CHECK(fake_open_handles() == 3);
    test_params(st);
    test_dae(st);
    test_rows(st);
    test_errors(dbc, st);
    test_counters(st);
    test_kill(dbc, &st);
    test_reset(st);

    CHECK(SQLGetInfo(dbc, SQL_DBMS_NAME, info, sizeof info, NULL) == SQL_SUCCESS);
    CHECK(strcmp((char *)info, "SQLite") == 0);         /* reset restored it */
    CHECK(SQLFreeHandle(SQL_HANDLE_ENV, env) == SQL_ERROR);   /* has a DBC */
    CHECK(SQLFreeHandle(SQL_HANDLE_STMT, st) == SQL_SUCCESS);
    CHECK(SQLFreeHandle(SQL_HANDLE_STMT, st) == SQL_INVALID_HANDLE);
    CHECK(SQLDisconnect(dbc) == SQL_SUCCESS);
    CHECK(SQLFreeHandle(SQL_HANDLE_DBC, dbc) == SQL_SUCCESS);
    CHECK(SQLFreeHandle(SQL_HANDLE_ENV, env) == SQL_SUCCESS);
    CHECK(fake_open_handles() == 0);
    fake_reset();

    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

/* bench_api.c: one small calling surface over three client APIs (ODBC,
 * libpq, the sqlite3 C API), so that the bench's "ideal outbox" runs the
 * same statements through each and the difference between rows is the
 * client API, not the SQL. Every parameter is text (or NULL) and every
 * column is read as text, as a plain application would. Included by
 * bench.c (one translation unit); errors end the process, since a bench
 * that lost a statement would print a wrong number. */
#include <libpq-fe.h>
#include <sqlite3.h>
#include <sql.h>
#include <sqlext.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { A_ODBC, A_PQ, A_LITE };

typedef struct api {
    int kind;
    SQLHENV env;
    SQLHDBC dbc;
    PGconn *pg;
    sqlite3 *lite;
} api;

typedef struct stm {
    SQLHSTMT st;         /* ODBC */
    char name[16];       /* libpq prepared statement name */
    sqlite3_stmt *ls;    /* sqlite3 */
} stm;

/* Called once per returned row with its columns as text (NULL for NULL). */
typedef void (*row_fn)(void *user, int ncols, char **cols);

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "bench: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(1);
}

static void odbc_check(SQLRETURN rc, SQLSMALLINT type, SQLHANDLE h, const char *what) {
    SQLCHAR state[6], msg[600];
    SQLINTEGER native;
    SQLSMALLINT len;
    if (SQL_SUCCEEDED(rc) || rc == SQL_NO_DATA) return;
    state[0] = msg[0] = 0;
    SQLGetDiagRec(type, h, 1, state, &native, msg, sizeof msg, &len);
    fprintf(stderr, "bench: ODBC %s: %s %s\n", what, (char *)state, (char *)msg);
    exit(1);
}

/* The value of `key=` in an ODBC connection string (case-insensitive key). */
static void conn_value(const char *conn, const char *key, char *out, size_t cap) {
    size_t kl = strlen(key);
    const char *p = conn;
    out[0] = 0;
    while (*p) {
        if (strncasecmp(p, key, kl) == 0 && p[kl] == '=') {
            size_t n = strcspn(p + kl + 1, ";");
            if (n >= cap) n = cap - 1;
            memcpy(out, p + kl + 1, n);
            out[n] = 0;
            return;
        }
        p += strcspn(p, ";");
        if (*p) p++;
    }
}

/* ODBC: autocommit on (one statement, one transaction, one round trip):
 * the ideal outbox runs every step as a single statement. */
static void api_open_odbc(api *a, const char *conn, int mariadb) {
    memset(a, 0, sizeof *a);
    a->kind = A_ODBC;
    SQLAllocHandle(SQL_HANDLE_ENV, NULL, &a->env);
    SQLSetEnvAttr(a->env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER)SQL_OV_ODBC3, 0);
    SQLAllocHandle(SQL_HANDLE_DBC, a->env, &a->dbc);
    odbc_check(SQLDriverConnect(a->dbc, NULL, (SQLCHAR *)(uintptr_t)conn, SQL_NTS, NULL, 0, NULL,
                                SQL_DRIVER_NOPROMPT), SQL_HANDLE_DBC, a->dbc, "connect");
    /* MariaDB's default REPEATABLE READ takes gap locks a claim would wait
     * on; the library runs READ COMMITTED, and so does the ideal. */
    if (mariadb)
        SQLSetConnectAttr(a->dbc, SQL_ATTR_TXN_ISOLATION, (SQLPOINTER)SQL_TXN_READ_COMMITTED, SQL_IS_UINTEGER);
}

/* libpq from the same connection string's server, port, database, user. */
static void api_open_pq(api *a, const char *conn) {
    char host[128], port[16], db[64], user[64], info[400];
    memset(a, 0, sizeof *a);
    a->kind = A_PQ;
    conn_value(conn, "Server", host, sizeof host);
    conn_value(conn, "Port", port, sizeof port);
    conn_value(conn, "Database", db, sizeof db);
    conn_value(conn, "Uid", user, sizeof user);
    snprintf(info, sizeof info, "host=%s port=%s dbname=%s user=%s", host, port, db, user);
    a->pg = PQconnectdb(info);
    if (PQstatus(a->pg) != CONNECTION_OK) die("libpq connect: %s", PQerrorMessage(a->pg));
}

/* sqlite3 on the file the ODBC string names, with the pragmas bench.sh
 * gives sqliteodbc (WAL, synchronous NORMAL, 10 s busy wait). */
static void api_open_lite(api *a, const char *conn) {
    char path[512];
    char *err = NULL;
    memset(a, 0, sizeof *a);
    a->kind = A_LITE;
    conn_value(conn, "Database", path, sizeof path);
    if (sqlite3_open(path, &a->lite) != SQLITE_OK) die("sqlite3_open %s: %s", path, sqlite3_errmsg(a->lite));
    sqlite3_busy_timeout(a->lite, 10000);
    if (sqlite3_exec(a->lite, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", NULL, NULL, &err) != SQLITE_OK)
        die("sqlite3 pragmas: %s", err);
}

static void api_close(api *a) {
    if (a->kind == A_ODBC) {
        SQLDisconnect(a->dbc);
        SQLFreeHandle(SQL_HANDLE_DBC, a->dbc);
        SQLFreeHandle(SQL_HANDLE_ENV, a->env);
    } else if (a->kind == A_PQ) {
        PQfinish(a->pg);
    } else {
        sqlite3_close(a->lite);
    }
}

/* "$1 ... $2" (libpq's markers) as "? ... ?" for ODBC and sqlite3: every
 * statement here uses each parameter once, in order. */
static char *plain_markers(const char *sql) {
    char *out = (char *)malloc(strlen(sql) + 1), *o = out;
    const char *p = sql;
    while (*p) {
        if (*p == '$' && p[1] >= '0' && p[1] <= '9') {
            *o++ = '?';
            p++;
            while (*p >= '0' && *p <= '9') p++;
        } else {
            *o++ = *p++;
        }
    }
    *o = 0;
    return out;
}

static void api_prepare(api *a, stm *s, const char *sql) {
    static int seq;
    memset(s, 0, sizeof *s);
    if (a->kind == A_PQ) {
        PGresult *r;
        snprintf(s->name, sizeof s->name, "s%d", ++seq);
        r = PQprepare(a->pg, s->name, sql, 0, NULL);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) die("prepare %s: %s", sql, PQerrorMessage(a->pg));
        PQclear(r);
    } else {
        char *plain = plain_markers(sql);
        if (a->kind == A_ODBC) {
            SQLAllocHandle(SQL_HANDLE_STMT, a->dbc, &s->st);
            odbc_check(SQLPrepare(s->st, (SQLCHAR *)plain, SQL_NTS), SQL_HANDLE_STMT, s->st, plain);
        } else if (sqlite3_prepare_v2(a->lite, plain, -1, &s->ls, NULL) != SQLITE_OK) {
            die("prepare %s: %s", plain, sqlite3_errmsg(a->lite));
        }
        free(plain);
    }
}

static void api_unprepare(api *a, stm *s) {
    if (a->kind == A_ODBC && s->st) SQLFreeHandle(SQL_HANDLE_STMT, s->st);
    if (a->kind == A_LITE && s->ls) sqlite3_finalize(s->ls);
    (void)a;
}

/* ODBC: fetch every row of the open result, each column as text. */
static int odbc_rows(SQLHSTMT st, row_fn fn, void *user) {
    static char cell[8][4096];
    char *cols[8];
    SQLSMALLINT ncols = 0;
    SQLLEN len;
    int rows = 0, c;
    SQLNumResultCols(st, &ncols);
    if (ncols > 8) ncols = 8;
    while (ncols > 0 && SQL_SUCCEEDED(SQLFetch(st))) {
        for (c = 0; c < ncols; c++) {
            SQLGetData(st, (SQLUSMALLINT)(c + 1), SQL_C_CHAR, cell[c], sizeof cell[c], &len);
            cols[c] = len == SQL_NULL_DATA ? NULL : cell[c];
        }
        if (fn) fn(user, ncols, cols);
        rows++;
    }
    return rows;
}

/* Run a prepared statement; returns the rows it returned, or (for a
 * statement without a result) the rows it changed. */
static int api_run(api *a, stm *s, const char *const *params, int np, row_fn fn, void *user) {
    int i, rows = 0;
    if (a->kind == A_ODBC) {
        SQLLEN ind[256]; /* the ideal batch binds 200 */
        SQLRETURN rc;
        for (i = 0; i < np; i++) {
            ind[i] = params[i] ? (SQLLEN)strlen(params[i]) : SQL_NULL_DATA;
            SQLBindParameter(s->st, (SQLUSMALLINT)(i + 1), SQL_PARAM_INPUT, SQL_C_CHAR,
                             ind[i] > 4000 ? SQL_LONGVARCHAR : SQL_VARCHAR,
                             params[i] ? (SQLULEN)(ind[i] ? ind[i] : 1) : 1, 0,
                             (SQLPOINTER)(uintptr_t)params[i], ind[i] > 0 ? ind[i] : 0, &ind[i]);
        }
        rc = SQLExecute(s->st);
        odbc_check(rc, SQL_HANDLE_STMT, s->st, "execute");
        if (rc != SQL_NO_DATA) {
            SQLSMALLINT ncols = 0;
            SQLNumResultCols(s->st, &ncols);
            if (ncols > 0) rows = odbc_rows(s->st, fn, user);
            else {
                SQLLEN n = 0;
                SQLRowCount(s->st, &n);
                rows = (int)n;
            }
        }
        SQLFreeStmt(s->st, SQL_CLOSE);
    } else if (a->kind == A_PQ) {
        PGresult *r = PQexecPrepared(a->pg, s->name, np, params, NULL, NULL, 0);
        ExecStatusType es = PQresultStatus(r);
        if (es == PGRES_TUPLES_OK) {
            int n = PQntuples(r), nc = PQnfields(r), c;
            char *cols[8];
            for (i = 0; i < n; i++) {
                for (c = 0; c < nc && c < 8; c++) cols[c] = PQgetisnull(r, i, c) ? NULL : PQgetvalue(r, i, c);
                if (fn) fn(user, nc < 8 ? nc : 8, cols);
            }
            rows = n;
        } else if (es == PGRES_COMMAND_OK) {
            rows = atoi(PQcmdTuples(r));
        } else {
            die("libpq execute %s: %s", s->name, PQerrorMessage(a->pg));
        }
        PQclear(r);
    } else {
        int rc;
        for (i = 0; i < np; i++) sqlite3_bind_text(s->ls, i + 1, params[i], -1, SQLITE_STATIC);
        while ((rc = sqlite3_step(s->ls)) == SQLITE_ROW) {
            int nc = sqlite3_column_count(s->ls), c;
            char *cols[8];
            for (c = 0; c < nc && c < 8; c++) {
                const unsigned char *v = sqlite3_column_text(s->ls, c);
                cols[c] = (char *)(uintptr_t)v;
            }
            if (fn) fn(user, nc < 8 ? nc : 8, cols);
            rows++;
        }
        if (rc != SQLITE_DONE) die("sqlite3 step: %s", sqlite3_errmsg(a->lite));
        if (rows == 0) rows = sqlite3_changes(a->lite);
        sqlite3_reset(s->ls);
    }
    return rows;
}

/* Run a statement text once (not prepared); same result as api_run. */
static int api_direct(api *a, const char *sql, row_fn fn, void *user) {
    int rows = 0;
    if (a->kind == A_ODBC) {
        SQLHSTMT st;
        SQLRETURN rc;
        SQLAllocHandle(SQL_HANDLE_STMT, a->dbc, &st);
        rc = SQLExecDirect(st, (SQLCHAR *)(uintptr_t)sql, SQL_NTS);
        odbc_check(rc, SQL_HANDLE_STMT, st, sql);
        if (rc != SQL_NO_DATA) {
            SQLSMALLINT ncols = 0;
            SQLNumResultCols(st, &ncols);
            if (ncols > 0) rows = odbc_rows(st, fn, user);
            else {
                SQLLEN n = 0;
                SQLRowCount(st, &n);
                rows = (int)n;
            }
        }
        SQLFreeHandle(SQL_HANDLE_STMT, st);
    } else if (a->kind == A_PQ) {
        PGresult *r = PQexec(a->pg, sql);
        ExecStatusType es = PQresultStatus(r);
        if (es == PGRES_TUPLES_OK) {
            int n = PQntuples(r), nc = PQnfields(r), c, i;
            char *cols[8];
            for (i = 0; i < n; i++) {
                for (c = 0; c < nc && c < 8; c++) cols[c] = PQgetisnull(r, i, c) ? NULL : PQgetvalue(r, i, c);
                if (fn) fn(user, nc < 8 ? nc : 8, cols);
            }
            rows = n;
        } else if (es == PGRES_COMMAND_OK) {
            rows = atoi(PQcmdTuples(r));
        } else {
            die("libpq %s: %s", sql, PQerrorMessage(a->pg));
        }
        PQclear(r);
    } else {
        stm s;
        api_prepare(a, &s, sql);
        rows = api_run(a, &s, NULL, 0, fn, user);
        api_unprepare(a, &s);
    }
    return rows;
}

/* The first column of the first row as a number (0 when there is none). */
static void first_i64(void *user, int ncols, char **cols) {
    long long *out = (long long *)user;
    if (ncols > 0 && cols[ncols > 1 ? 1 : 0] && *out == -1) *out = atoll(cols[ncols > 1 ? 1 : 0]);
}

static long long api_i64(api *a, const char *sql) {
    long long v = -1;
    api_direct(a, sql, first_i64, &v);
    return v < 0 ? 0 : v;
}

/* tort.h: small helpers shared by the torture drivers in tests/torture/.
 * Each driver prints one "torture: ..." result line per scenario and exits
 * nonzero when a figure breaks its bound. */
#ifndef TORT_H
#define TORT_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef OBX_SQLITE3_API
#include <sql.h>
#include <sqlext.h>
#endif

#if defined(__GNUC__) || defined(__clang__)
#define TORT_UNUSED __attribute__((unused))
#define TORT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TORT_UNUSED
#define TORT_PRINTF(f, a)
#endif

/* ---- a fault-injecting allocator: counts blocks, fails the k-th call ----- */

typedef struct tort_alloc {
    long calls;      /* alloc + realloc calls so far */
    long live;       /* blocks handed out and not freed */
    long fail_at;    /* 0: never fail; else the call number that fails ... */
    int sticky;      /* ... and, when set, every call after it too */
    long failed;     /* how many calls were failed */
} tort_alloc;

static tort_alloc g_tort_alloc;

TORT_UNUSED static int tort_alloc_should_fail(void) {
    tort_alloc *a = &g_tort_alloc;
    a->calls++;
    if (a->fail_at > 0 && (a->calls == a->fail_at || (a->sticky && a->calls > a->fail_at))) {
        a->failed++;
        return 1;
    }
    return 0;
}
TORT_UNUSED static void *tort_malloc(size_t n, void *u) {
    void *p;
    (void)u;
    if (tort_alloc_should_fail()) return NULL;
    p = malloc(n);
    if (p) g_tort_alloc.live++;
    return p;
}
TORT_UNUSED static void *tort_realloc(void *p, size_t n, void *u) {
    void *q;
    (void)u;
    if (tort_alloc_should_fail()) return NULL;
    q = realloc(p, n);
    if (q && !p) g_tort_alloc.live++;
    return q;
}
TORT_UNUSED static void tort_free(void *p, void *u) {
    (void)u;
    if (p) g_tort_alloc.live--;
    free(p);
}
/* Stop failing: "memory was freed". */
TORT_UNUSED static void tort_alloc_heal(void) { g_tort_alloc.fail_at = 0; }

/* ---- time ------------------------------------------------------------------ */

TORT_UNUSED static int64_t tort_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
TORT_UNUSED static int64_t tort_wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
TORT_UNUSED static void tort_sleep_ms(long ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

/* TORTURE_SCALE multiplies the default sizes (1 when unset or bad). */
TORT_UNUSED static int tort_scale(void) {
    const char *s = getenv("TORTURE_SCALE");
    int v = s ? atoi(s) : 1;
    return v >= 1 && v <= 1000 ? v : 1;
}

#ifdef OBX_SQLITE3_API
/* ---- the same on SQLite's C API (the drivers built with OBX_SQLITE3_API:
 * the headers and the test share no driver manager). dbc is a sqlite3 *, so
 * a producer's obx_enqueue_tx(store, db.dbc, ...) runs in its transaction.
 * The connection string's Database=, Timeout=, JournalMode= and SyncPragma=
 * are applied as sqliteodbc applies them. ---- */

typedef struct tort_db {
    sqlite3 *dbc;
} tort_db;

TORT_UNUSED static void tort_db_key(const char *conn, const char *key, char *out, size_t cap) {
    size_t n = strlen(key);
    const char *p = conn;
    out[0] = 0;
    while (p && *p) {
        if (strncmp(p, key, n) == 0 && p[n] == '=') {
            snprintf(out, cap, "%.*s", (int)strcspn(p + n + 1, ";"), p + n + 1);
            return;
        }
        p = strchr(p, ';');
        if (p) p++;
    }
}

TORT_UNUSED static int tort_db_open(tort_db *db, const char *conn, char *err, size_t cap) {
    char file[1024], v[32], sql[80];
    memset(db, 0, sizeof *db);
    tort_db_key(conn, "Database", file, sizeof file);
    if (sqlite3_open_v2(file, &db->dbc, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        if (err) snprintf(err, cap, "%s", db->dbc ? sqlite3_errmsg(db->dbc) : "out of memory");
        sqlite3_close(db->dbc);
        memset(db, 0, sizeof *db);
        return -1;
    }
    tort_db_key(conn, "Timeout", v, sizeof v);
    sqlite3_busy_timeout(db->dbc, v[0] ? atoi(v) : 100000);
    tort_db_key(conn, "JournalMode", v, sizeof v);
    if (v[0]) {
        snprintf(sql, sizeof sql, "PRAGMA journal_mode = %s", v);
        sqlite3_exec(db->dbc, sql, NULL, NULL, NULL);
    }
    tort_db_key(conn, "SyncPragma", v, sizeof v);
    snprintf(sql, sizeof sql, "PRAGMA synchronous = %s", v[0] ? v : "NORMAL");
    sqlite3_exec(db->dbc, sql, NULL, NULL, NULL);
    return 0;
}
TORT_UNUSED static void tort_db_close(tort_db *db) {
    if (db->dbc) sqlite3_close_v2(db->dbc);
    memset(db, 0, sizeof *db);
}

TORT_UNUSED static int tort_db_query(tort_db *db, const char *sql, char *out, size_t cap, char *err,
                                     size_t errcap) {
    sqlite3_stmt *st = NULL;
    size_t used = out ? strlen(out) : 0;
    int rc, c, ncols;
    if (sqlite3_prepare_v2(db->dbc, sql, -1, &st, NULL) != SQLITE_OK) {
        if (err) snprintf(err, errcap, "%s", sqlite3_errmsg(db->dbc));
        return -1;
    }
    ncols = sqlite3_column_count(st);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        for (c = 0; c < ncols; c++) {
            const unsigned char *t = sqlite3_column_text(st, c);
            char cell[1024];
            snprintf(cell, sizeof cell, "%s", t ? (const char *)t : "NULL");
            if (out && used + strlen(cell) + 2 < cap) used += (size_t)sprintf(out + used, "%s%s", c ? "|" : "", cell);
        }
        if (out && used + 2 < cap) used += (size_t)sprintf(out + used, "\n");
    }
    if (rc != SQLITE_DONE) {
        if (err) snprintf(err, errcap, "%s", sqlite3_errmsg(db->dbc));
        sqlite3_finalize(st);
        return -1;
    }
    sqlite3_finalize(st);
    return 0;
}
#else
/* ---- raw ODBC: the test's own view of the tables, independent of the headers ---- */

typedef struct tort_db {
    SQLHENV env;
    SQLHDBC dbc;
} tort_db;

TORT_UNUSED static void tort_db_diag(SQLSMALLINT type, SQLHANDLE h, char *out, size_t cap) {
    SQLCHAR state[6], msg[512];
    SQLINTEGER native = 0;
    SQLSMALLINT len = 0;
    out[0] = 0;
    if (SQLGetDiagRec(type, h, 1, state, &native, msg, (SQLSMALLINT)sizeof msg, &len) == SQL_SUCCESS ||
        len > 0)
        snprintf(out, cap, "[%s/%ld] %s", (const char *)state, (long)native, (const char *)msg);
}

/* Connect with autocommit on. Returns 0 on success. */
TORT_UNUSED static int tort_db_open(tort_db *db, const char *conn, char *err, size_t cap) {
    SQLRETURN rc;
    memset(db, 0, sizeof *db);
    if (SQLAllocHandle(SQL_HANDLE_ENV, SQL_NULL_HANDLE, &db->env) != SQL_SUCCESS) return -1;
    SQLSetEnvAttr(db->env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER)(uintptr_t)SQL_OV_ODBC3, 0);
    if (SQLAllocHandle(SQL_HANDLE_DBC, db->env, &db->dbc) != SQL_SUCCESS) return -1;
    rc = SQLDriverConnect(db->dbc, NULL, (SQLCHAR *)(uintptr_t)conn, SQL_NTS, NULL, 0, NULL,
                          SQL_DRIVER_NOPROMPT);
    if (!SQL_SUCCEEDED(rc)) {
        if (err) tort_db_diag(SQL_HANDLE_DBC, db->dbc, err, cap);
        SQLFreeHandle(SQL_HANDLE_DBC, db->dbc);
        SQLFreeHandle(SQL_HANDLE_ENV, db->env);
        memset(db, 0, sizeof *db);
        return -1;
    }
    return 0;
}
TORT_UNUSED static void tort_db_close(tort_db *db) {
    if (db->dbc) {
        SQLDisconnect(db->dbc);
        SQLFreeHandle(SQL_HANDLE_DBC, db->dbc);
    }
    if (db->env) SQLFreeHandle(SQL_HANDLE_ENV, db->env);
    memset(db, 0, sizeof *db);
}

/* Run `sql`; every row is appended to out (cells joined by '|', rows by '\n')
 * when out is not NULL. Returns 0 on success, -1 with err filled. */
TORT_UNUSED static int tort_db_query(tort_db *db, const char *sql, char *out, size_t cap, char *err,
                                     size_t errcap) {
    SQLHSTMT st = SQL_NULL_HSTMT;
    SQLRETURN rc;
    SQLSMALLINT ncols = 0, c;
    size_t used = out ? strlen(out) : 0;
    if (SQLAllocHandle(SQL_HANDLE_STMT, db->dbc, &st) != SQL_SUCCESS) {
        if (err) tort_db_diag(SQL_HANDLE_DBC, db->dbc, err, errcap);
        return -1;
    }
    rc = SQLExecDirect(st, (SQLCHAR *)(uintptr_t)sql, SQL_NTS);
    if (!SQL_SUCCEEDED(rc) && rc != SQL_NO_DATA) {
        if (err) tort_db_diag(SQL_HANDLE_STMT, st, err, errcap);
        SQLFreeHandle(SQL_HANDLE_STMT, st);
        return -1;
    }
    SQLNumResultCols(st, &ncols);
    while (ncols > 0 && SQL_SUCCEEDED(rc = SQLFetch(st))) {
        for (c = 1; c <= ncols; c++) {
            char cell[1024];
            SQLLEN ind = 0;
            if (!SQL_SUCCEEDED(SQLGetData(st, (SQLUSMALLINT)c, SQL_C_CHAR, cell, sizeof cell, &ind)) ||
                ind == SQL_NULL_DATA)
                strcpy(cell, "NULL");
            if (out && used + strlen(cell) + 2 < cap) {
                used += (size_t)sprintf(out + used, "%s%s", c > 1 ? "|" : "", cell);
            }
        }
        if (out && used + 2 < cap) used += (size_t)sprintf(out + used, "\n");
    }
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    return 0;
}

#endif /* OBX_SQLITE3_API */

/* One integer from a query; LLONG_MIN on failure. */
TORT_UNUSED static long long tort_db_scalar(tort_db *db, const char *sql) {
    char buf[64] = "", err[600];
    if (tort_db_query(db, sql, buf, sizeof buf, err, sizeof err) != 0 || !buf[0]) {
        fprintf(stderr, "torture: query failed: %s: %s\n", sql, err);
        return -9223372036854775807LL - 1;
    }
    return atoll(buf);
}

#endif /* TORT_H */

/* plans.h: the plan of a statement as the database would run it, for the
 * CORE-PLANS tests of both headers (raw ODBC only, so one copy serves
 * obx.h and ibx.h). */
#ifndef OBX_TESTS_PLANS_H
#define OBX_TESTS_PLANS_H

#include <stdint.h>
#ifdef _WIN32
#define WIN32_LEAN_AND_MEAN
#include <windows.h> /* Windows' ODBC headers need it first */
#endif
#include <sql.h>
#include <sqlext.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int plans_exec(SQLHDBC dbc, const char *sql) {
    SQLHSTMT st = NULL;
    int ok = SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, dbc, &st)) &&
             SQL_SUCCEEDED(SQLExecDirect(st, (SQLCHAR *)(uintptr_t)sql, SQL_NTS));
    if (st) SQLFreeHandle(SQL_HANDLE_STMT, st);
    return ok;
}

/* PostgreSQL: an index scan with no Index Cond walks the whole index, a
 * scan all the same (a claim's key check once did that per candidate).
 * The index of leased rows is exempt: it holds only what workers have in
 * flight, and the in-flight check reads it once, hashed. */
static void plans_mark_index_walks(char *out, size_t cap) {
    char *line = out;
    while (*line) {
        char *end = strchr(line, '\n'), *q;
        size_t indent = strspn(line, " "), used;
        int walk, cond = 0;
        if (!end) break;
        *end = '\0'; /* the checks below read this line only */
        walk = (strstr(line, "Index Scan using") || strstr(line, "Index Only Scan using")) &&
               !strstr(line, "Bitmap") && !strstr(line, "_Leased\"") && !strstr(line, "FULL SCAN");
        *end = '\n';
        for (q = end + 1; walk && *q;) {
            char *e = strchr(q, '\n');
            if (!e) break;
            *e = '\0';
            if (strspn(q, " ") <= indent || strstr(q, "->")) {
                *e = '\n';
                break;
            }
            if (strstr(q, "Index Cond")) cond = 1;
            *e = '\n';
            q = e + 1;
        }
        used = strlen(out);
        if (walk && !cond && used + 11 < cap) {
            memmove(end + 10, end, used - (size_t)(end - out) + 1);
            memcpy(end, " FULL SCAN", 10);
            end += 10;
        }
        line = end + 1;
    }
}

/* PostgreSQL: sort nodes (marked SORTS) that read rows: a sort over a
 * branch the planner proved empty ("One-Time Filter: false") reads none. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((unused))
#endif
static int plans_sorts(const char *plan) {
    int n = 0;
    const char *p = plan;
    while ((p = strstr(p, " SORTS")) != NULL) {
        const char *next = p, *q;
        int lines = 0, empty = 0;
        for (q = p; *q && lines < 4; q++)
            if (*q == '\n') lines++;
        while ((next = strstr(next + 1, "One-Time Filter: false")) != NULL && next < q) empty = 1;
        if (!empty) n++;
        p += 6;
    }
    return n;
}

/* One line per row of EXPLAIN for `stmt` into `out`; a full scan of a
 * table is marked "FULL SCAN". PostgreSQL (pg): the plan as prepared (the
 * generic plan, which knows no batch size); MariaDB: EXPLAIN with args[]
 * written in for the markers (?N or ?). `ours`: MariaDB table aliases that
 * may be scanned (JSON_TABLE key lists), space-separated. end_tran: end
 * the connection's transaction after (it is in manual commit). */
static int plans_of(SQLHDBC dbc, int pg, int end_tran, const char *stmt, const char *const *args,
                    const char *ours, char *out, size_t cap) {
    char *q = (char *)malloc(16384), *run = (char *)malloc(1024);
    const char *p;
    size_t o, used = 0;
    int n = 0, ok = 1, i;
    SQLHSTMT st = NULL;
    if (!q || !run) {
        free(q);
        free(run);
        return 0;
    }
    o = (size_t)snprintf(q, 16384, pg ? "PREPARE plans_stmt AS " : "EXPLAIN ");
    for (p = stmt; *p && o + 512 < 16384; p++) {
        int k;
        if (*p != '?') {
            q[o++] = *p;
            continue;
        }
        for (k = 0; p[1] >= '0' && p[1] <= '9'; p++) k = k * 10 + (p[1] - '0');
        k = k ? k : ++n;
        o += (size_t)(pg ? snprintf(q + o, 16384 - o, "$%d", k) : snprintf(q + o, 16384 - o, "%s", args[k - 1]));
    }
    q[o] = '\0';
    out[0] = '\0';
    if (pg) {
        size_t r = (size_t)snprintf(run, 1024, "EXPLAIN EXECUTE plans_stmt");
        for (i = 0; args[i]; i++) r += (size_t)snprintf(run + r, 1024 - r, "%s%s", i ? ", " : "(", args[i]);
        if (i) snprintf(run + r, 1024 - r, ")");
        ok = plans_exec(dbc, "SET plan_cache_mode = force_generic_plan") && plans_exec(dbc, q);
    }
    if (ok && SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, dbc, &st))) {
        ok = SQL_SUCCEEDED(SQLExecDirect(st, (SQLCHAR *)(pg ? run : q), SQL_NTS));
        while (ok && SQL_SUCCEEDED(SQLFetch(st))) {
            char line[512] = "", table[128] = "", type[32] = "", key[128] = "", alias[132], select[32] = "";
            SQLLEN ind = 0;
            if (pg) {
                SQLGetData(st, 1, SQL_C_CHAR, line, sizeof line, &ind);
                if (strstr(line, "Seq Scan")) strcat(line, " FULL SCAN");
                /* a sort node reads every row it sorts (a key check once
                 * sorted every Ready row of its key per candidate) */
                if (strstr(line, "Sort") && !strstr(line, "Sort Key") && !strstr(line, "Sort Method") &&
                    strlen(line) + 6 < sizeof line)
                    strcat(line, " SORTS");
            } else {
                SQLGetData(st, 2, SQL_C_CHAR, select, sizeof select, &ind);
                if (ind == SQL_NULL_DATA) select[0] = '\0';
                SQLGetData(st, 3, SQL_C_CHAR, table, sizeof table, &ind);
                if (ind == SQL_NULL_DATA) table[0] = '\0';
                SQLGetData(st, 4, SQL_C_CHAR, type, sizeof type, &ind);
                if (ind == SQL_NULL_DATA) type[0] = '\0';
                SQLGetData(st, 6, SQL_C_CHAR, key, sizeof key, &ind);
                if (ind == SQL_NULL_DATA) key[0] = '\0';
                /* derived tables (<derived2>) and our own key lists are small;
                 * an INSERT's own row ("INSERT ... ALL") is no read */
                snprintf(alias, sizeof alias, " %s ", table);
                snprintf(line, sizeof line, "%s %s key=%s%s", table, type, key,
                         strcmp(type, "ALL") == 0 && table[0] != '<' && !strstr(ours, alias) &&
                                 strcmp(select, "INSERT") != 0 ? " FULL SCAN" : "");
            }
            if (used + strlen(line) + 2 < cap) used += (size_t)snprintf(out + used, cap - used, "%s\n", line);
        }
        SQLFreeHandle(SQL_HANDLE_STMT, st);
        if (pg) plans_mark_index_walks(out, cap);
    }
    if (pg) {
        plans_exec(dbc, "DEALLOCATE plans_stmt");
        plans_exec(dbc, "RESET plan_cache_mode");
    }
    if (end_tran) SQLEndTran(SQL_HANDLE_DBC, dbc, SQL_ROLLBACK);
    if (!ok) printf("    plan failed:\n      %s\n", q);
    free(q);
    free(run);
    return ok;
}

#endif

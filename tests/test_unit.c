/* Unit tests of the common core: pure functions (backend "pure") and the
 * ODBC plumbing against the fake ODBC layer (backend "fake"). Both headers'
 * implementations live in this one translation unit on purpose: it proves
 * they do not collide. */
#define OBX_IMPLEMENTATION
#include "../obx.h"
#define IBX_IMPLEMENTATION
#include "../ibx.h"
#include "fake_odbc.h"
#include "tt.h"

/* The few system calls the tests make themselves, on POSIX and Windows. */
#ifdef _WIN32
#include <io.h>
static int sys_dup(int fd) { return _dup(fd); }
static int sys_dup2(int fd, int to) { return _dup2(fd, to); }
static int sys_close(int fd) { return _close(fd); }
static long sys_getpid(void) { return (long)_getpid(); }
static void sys_setenv(const char *name, const char *value) { _putenv_s(name, value); }
static void sys_unsetenv(const char *name) { _putenv_s(name, ""); } /* "" removes it */
static double mono_seconds(void) {
    LARGE_INTEGER f, c;
    QueryPerformanceFrequency(&f);
    QueryPerformanceCounter(&c);
    return (double)c.QuadPart / (double)f.QuadPart;
}
#else
static int sys_dup(int fd) { return dup(fd); }
static int sys_dup2(int fd, int to) { return dup2(fd, to); }
static int sys_close(int fd) { return close(fd); }
static long sys_getpid(void) { return (long)getpid(); }
static void sys_setenv(const char *name, const char *value) { setenv(name, value, 1); }
static void sys_unsetenv(const char *name) { unsetenv(name); }
static double mono_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
#endif

/* ---- backoff ------------------------------------------------------------------ */


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

static void test_backoff_default(void) {
    static const struct { int attempt; int64_t ms; } cases[] = {
        {INT_MIN, 1000}, {-1, 1000}, {0, 1000}, {1, 2000}, {2, 4000}, {3, 8000},
        {4, 16000}, {5, 32000}, {6, 60000}, {7, 60000}, {31, 60000}, {63, 60000},
        {64, 60000}, {INT_MAX, 60000}};
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TT_EQ_INT(obx_backoff_default_ms(cases[i].attempt), cases[i].ms);
        TT_EQ_INT(ibx_backoff_default_ms(cases[i].attempt), cases[i].ms);
    }
}

static void test_backoff_jitter(void) {
    const uint64_t half = (uint64_t)1 << 63; /* u = 0.5: jitter factor exactly 1.0 */
    static const struct { int attempt; int64_t ms; } defaults[] = {
        {INT_MIN, 200}, {-1, 200}, {0, 200}, {1, 200}, {2, 400}, {3, 800}, {4, 1600},
        {9, 51200}, {10, 60000}, {11, 60000}, {100, 60000}, {INT_MAX, 60000}};
    obx_backoff_policy fixed = {1000, 5000, 1.0, 1.0};
    obx_backoff_policy huge = {INT64_MAX / 2, INT64_MAX, 1.0, 1.0};
    size_t i;
    for (i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
        TT_EQ_INT(obx_backoff_jitter_ms(NULL, defaults[i].attempt, half), defaults[i].ms);
    }
    /* The jitter range ends: u = 0 gives 0.5x, the largest u 1.5x (rounded). */
    TT_EQ_INT(obx_backoff_jitter_ms(NULL, 1, 0), 100);
    TT_EQ_INT(obx_backoff_jitter_ms(NULL, 10, 0), 30000);
    TT_EXPECT(obx_backoff_jitter_ms(NULL, 10, UINT64_MAX) >= 89999);
    TT_EXPECT(obx_backoff_jitter_ms(NULL, 10, UINT64_MAX) <= 90000);
    /* A policy with no jitter is exact, and the cap holds. */
    TT_EQ_INT(obx_backoff_jitter_ms(&fixed, 1, 12345), 1000);
    TT_EQ_INT(obx_backoff_jitter_ms(&fixed, 2, 12345), 2000);
    TT_EQ_INT(obx_backoff_jitter_ms(&fixed, 3, 12345), 4000);
    TT_EQ_INT(obx_backoff_jitter_ms(&fixed, 4, 12345), 5000);
    TT_EQ_INT(obx_backoff_jitter_ms(&fixed, INT_MAX, 12345), 5000);
    /* Doubling near INT64_MAX must saturate, not overflow. */
    TT_EQ_INT(obx_backoff_jitter_ms(&huge, 3, half), INT64_MAX);
    TT_EQ_INT(obx_backoff_jitter_ms(&huge, INT_MAX, half), INT64_MAX);
    /* Every value stays inside [0.5, 1.5) x the capped delay. */
    for (i = 0; i < 1000; i++) {
        uint64_t bits = (uint64_t)i * 0x9E3779B97F4A7C15ULL;
        int64_t ms = obx_backoff_jitter_ms(NULL, 4, bits);
        TT_ASSERT(ms >= 800 && ms <= 2400);
    }
}

/* ---- selection strategies ---------------------------------------------------------- */

static void test_selection_round_robin(void) {
    obx_selector s;
    obx_selector_init(&s, OBX_SELECT_ROUND_ROBIN, 3);
    TT_EQ_INT(obx_selector_next(&s), 0);
    obx_selector_report(&s, 0, 5); /* messages: still moves on */
    TT_EQ_INT(obx_selector_next(&s), 1);
    TT_EXPECT(!obx_selector_all_idle(&s));
    obx_selector_report(&s, 1, 0);
    TT_EQ_INT(obx_selector_next(&s), 2);
    obx_selector_report(&s, 2, 0);
    TT_EQ_INT(obx_selector_next(&s), 0); /* wraps */
    TT_EXPECT(!obx_selector_all_idle(&s)); /* store 0 had messages last time */
    obx_selector_report(&s, 0, 0);
    TT_EXPECT(obx_selector_all_idle(&s)); /* three empty answers in a row */
    obx_selector_report(&s, 2, 4);       /* not the current store: no move */
    TT_EQ_INT(obx_selector_next(&s), 1);
    TT_EXPECT(!obx_selector_all_idle(&s));
}

static void test_selection_drain_first(void) {
    obx_selector s;
    obx_selector_init(&s, OBX_SELECT_DRAIN_FIRST, 3);
    TT_EQ_INT(obx_selector_next(&s), 0);
    obx_selector_report(&s, 0, 50);
    TT_EQ_INT(obx_selector_next(&s), 0); /* stays while it has messages */
    obx_selector_report(&s, 0, 1);
    TT_EQ_INT(obx_selector_next(&s), 0);
    obx_selector_report(&s, 0, 0);
    TT_EQ_INT(obx_selector_next(&s), 1); /* empty: next store */
    obx_selector_report(&s, 1, 7);
    TT_EQ_INT(obx_selector_next(&s), 1);
    obx_selector_report(&s, 1, 0);
    TT_EQ_INT(obx_selector_next(&s), 2);
    TT_EXPECT(!obx_selector_all_idle(&s));
    obx_selector_report(&s, 2, 0);
    TT_EQ_INT(obx_selector_next(&s), 0);
    obx_selector_report(&s, 0, 0);
    TT_EXPECT(obx_selector_all_idle(&s)); /* stores 1, 2, 0 answered empty in a row */
    TT_EQ_INT(obx_selector_next(&s), 1);
}

static void test_selection_edges(void) {
    obx_selector s;
    obx_selector_init(&s, OBX_SELECT_ROUND_ROBIN, 0);
    TT_EQ_INT(obx_selector_next(&s), -1);
    TT_EXPECT(obx_selector_all_idle(&s));
    obx_selector_report(&s, 0, 3); /* no stores: ignored */
    TT_EQ_INT(obx_selector_next(&s), -1);
    obx_selector_init(&s, OBX_SELECT_DRAIN_FIRST, -4);
    TT_EQ_INT(s.store_count, 0);
    obx_selector_resize(&s, 3);
    TT_EQ_INT(obx_selector_next(&s), 0);
    obx_selector_report(&s, 0, 0);
    obx_selector_report(&s, 1, 0);
    TT_EQ_INT(obx_selector_next(&s), 2);
    obx_selector_resize(&s, 2); /* store 2 went away: wrap to 0 */
    TT_EQ_INT(obx_selector_next(&s), 0);
    TT_EQ_INT(s.empty_streak, 0);
    obx_selector_report(&s, 0, 0);
    obx_selector_resize(&s, 5); /* still valid: kept */
    TT_EQ_INT(obx_selector_next(&s), 1);
    obx_selector_init(&s, OBX_SELECT_ROUND_ROBIN, 1);
    obx_selector_report(&s, 0, 9);
    TT_EQ_INT(obx_selector_next(&s), 0);
    TT_EQ_INT(obx_selector_next(NULL), -1);
    TT_EXPECT(obx_selector_all_idle(NULL));
}

/* ---- UUIDs -------------------------------------------------------------------------------- */

static void test_uuid_format(void) {
    obx_uuid_state st = {0, 0};
    char u[37], hex[13];
    int64_t ms = 0x0192ABCDEF01LL;
    obx_uuid_v7(&st, ms, 0x123456789ULL, 0xDEADBEEFCAFEF00DULL, u);
    TT_EQ_INT(strlen(u), 36);
    TT_EXPECT(obx_uuid_is_valid(u));
    TT_EXPECT(u[14] == '7');                                          /* version */
    TT_EXPECT(u[19] == '8' || u[19] == '9' || u[19] == 'a' || u[19] == 'b'); /* variant */
    snprintf(hex, sizeof hex, "%.8s%.4s", u, u + 9);
    TT_EQ_STR(hex, "0192abcdef01"); /* the first 48 bits are the millisecond time */
    TT_EQ_STR(u + 28, "cafef00d");  /* low 32 bits of random_b */
    {
        static const char *const bad[] = {"", "0192abcd-ef01-7000-8000-00000000000",
                                          "0192abcd-ef01-7000-8000-0000000000000",
                                          "0192abcdef01-7000-8000-0000-00000000",
                                          "0192abcd-ef01-7000-8000-00000000000g",
                                          "0192abcd_ef01-7000-8000-000000000000"};
        size_t i;
        TT_EXPECT(!obx_uuid_is_valid(NULL));
        for (i = 0; i < sizeof bad / sizeof bad[0]; i++) TT_EXPECT(!obx_uuid_is_valid(bad[i]));
        TT_EXPECT(obx_uuid_is_valid("0192ABCD-EF01-7000-8000-00000000000F"));
    }
}

static void test_uuid_ordering(void) {
    obx_uuid_state st = {0, 0};
    char prev[37], cur[37];
    uint64_t r = 1;
    int i;
    obx_uuid_v7(&st, 1000, ~0ULL, 0, prev);
    for (i = 0; i < 20000; i++) {
        /* same millisecond, then later, then a clock that jumps backwards */
        int64_t ms = i < 10000 ? 1000 : (i < 15000 ? 1000 + i : 500);
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        obx_uuid_v7(&st, ms, r, r >> 7, cur);
        TT_ASSERT(obx_uuid_is_valid(cur));
        TT_ASSERT(strcmp(prev, cur) < 0);
        memcpy(prev, cur, sizeof cur);
    }
    /* Counter exhausted within one millisecond: borrow the next one. */
    st.counter = ((uint64_t)1 << 42) - 1;
    obx_uuid_v7(&st, st.last_ms, 0, 0, cur);
    TT_ASSERT(strcmp(prev, cur) < 0);
    TT_EQ_INT(st.counter, 0);
}

/* ---- identifiers, results, dialects ------------------------------------------------------- */

static void test_identifier_check(void) {
    static const char *const good[] = {
        "Outbox", "dbo", "infra", "_x", "a1", "A_b_9", "x",
        "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk" /* 63 */};
    static const char *const bad[] = {
        "", "1abc", "a-b", "a b", "x;DROP TABLE t", "\"x\"", "a.b", "`t`", "[t]", "t'",
        "\xc3\xa9t", "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijkl" /* 64 */};
    size_t i;
    for (i = 0; i < sizeof good / sizeof good[0]; i++) TT_EQ_INT(obx_identifier_check(good[i]), OBX_OK);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
        TT_EQ_INT(obx_identifier_check(bad[i]), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_identifier_check(NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_identifier_check("x;y"), IBX_ERR_INVALID_ARG);
}

static void test_result_strings(void) {
    static const struct { obx_result r; const char *s; } cases[] = {
        {OBX_OK, "OBX_OK"}, {OBX_EMPTY, "OBX_EMPTY"},
        {OBX_ERR_INVALID_ARG, "OBX_ERR_INVALID_ARG"}, {OBX_ERR_OUT_OF_RANGE, "OBX_ERR_OUT_OF_RANGE"},
        {OBX_ERR_NOT_FOUND, "OBX_ERR_NOT_FOUND"}, {OBX_ERR_NO_MEMORY, "OBX_ERR_NO_MEMORY"},
        {OBX_ERR_DB, "OBX_ERR_DB"}, {OBX_ERR_DB_TRANSIENT, "OBX_ERR_DB_TRANSIENT"},
        {OBX_ERR_STATE, "OBX_ERR_STATE"}, {OBX_ERR_UNSUPPORTED, "OBX_ERR_UNSUPPORTED"},
        {OBX_ERR_FULL, "OBX_ERR_FULL"}};
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) TT_EQ_STR(obx_result_str(cases[i].r), cases[i].s);
    TT_EQ_STR(obx_result_str((obx_result)42), "OBX_(unknown)");
    TT_EQ_STR(ibx_result_str(IBX_ERR_DB_TRANSIENT), "IBX_ERR_DB_TRANSIENT");
    TT_EQ_STR(obx_version(), OBX_VERSION_STRING);
    { /* the string, the parts and the number for #if say one version, in both headers */
        char parts[32];
        snprintf(parts, sizeof parts, "%d.%d.%d", OBX_VERSION_MAJOR, OBX_VERSION_MINOR, OBX_VERSION_PATCH);
        TT_EQ_STR(parts, OBX_VERSION_STRING);
        TT_EQ_STR(ibx_version(), obx_version());
        TT_EQ_INT(OBX_VERSION_NUMBER, OBX_VERSION_MAJOR * 1000000 + OBX_VERSION_MINOR * 1000 + OBX_VERSION_PATCH);
        TT_EQ_INT(IBX_VERSION_NUMBER, OBX_VERSION_NUMBER);
    }
}

static void test_dialect_detection(void) {
    static const struct { const char *dbms; obx_dialect want; } cases[] = {
        {"SQLite", OBX_DIALECT_SQLITE}, {"PostgreSQL", OBX_DIALECT_POSTGRESQL},
        {"MariaDB", OBX_DIALECT_MARIADB}, {"MySQL", OBX_DIALECT_MARIADB},
        {"mysql", OBX_DIALECT_MARIADB}, {"Microsoft SQL Server", OBX_DIALECT_SQLSERVER},
        {"Oracle", OBX_DIALECT_AUTO}, {"", OBX_DIALECT_AUTO}};
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TT_EQ_INT(obx__dialect_detect(cases[i].dbms), cases[i].want);
    }
    TT_EQ_STR(obx_dialect_name(OBX_DIALECT_POSTGRESQL), "postgresql");
    TT_EQ_STR(obx_dialect_name(OBX_DIALECT_SQLITE), "sqlite");
    TT_EQ_STR(obx_dialect_name((obx_dialect)99), "unknown");
    /* The table is indexed by the enum: a reordering would break lookups. */
    for (i = 1; i < (size_t)OBX__DIALECT_COUNT; i++) TT_EQ_INT(obx__dialects[i]->id, (int)i);
}

/* Every code in odbc-facts §8 (and SQL Server's from its docs). */
static void test_classification(void) {
    static const struct { obx_dialect d; const char *state; long native; int want; } cases[] = {
        {OBX_DIALECT_POSTGRESQL, "23505", 1, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_POSTGRESQL, "23502", 1, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_POSTGRESQL, "42601", 1, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_POSTGRESQL, "40P01", 1, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_POSTGRESQL, "40001", 1, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_POSTGRESQL, "55P03", 1, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_POSTGRESQL, "57014", 1, OBX__FAULT_TIMEOUT},
        {OBX_DIALECT_POSTGRESQL, "57P01", 35, OBX__FAULT_LOST},
        {OBX_DIALECT_POSTGRESQL, "57P01", 108, OBX__FAULT_LOST},
        {OBX_DIALECT_POSTGRESQL, "08S01", 35, OBX__FAULT_LOST},
        {OBX_DIALECT_POSTGRESQL, "08001", 101, OBX__FAULT_LOST},
        {OBX_DIALECT_POSTGRESQL, "HY000", 5, OBX__FAULT_PERMANENT}, /* natives are per dialect */
        {OBX_DIALECT_POSTGRESQL, "25006", 1, OBX__FAULT_READ_ONLY}, /* a standby */
        {OBX_DIALECT_MARIADB, "HY000", 1290, OBX__FAULT_READ_ONLY},  /* --read-only */
        {OBX_DIALECT_MARIADB, "25006", 1792, OBX__FAULT_READ_ONLY},
        {OBX_DIALECT_MARIADB, "23000", 1062, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_MARIADB, "23000", 1048, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_MARIADB, "42000", 1064, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_MARIADB, "28000", 1045, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_MARIADB, "40001", 1213, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_MARIADB, "HY000", 1205, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_MARIADB, "HY000", 1020, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_MARIADB, "HY018", 1969, OBX__FAULT_TIMEOUT_RESET},
        {OBX_DIALECT_MARIADB, "HY000", 2027, OBX__FAULT_LOST}, /* malformed packet */
        {OBX_DIALECT_MARIADB, "HY000", 2002, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_MARIADB, "HY000", 5014, OBX__FAULT_LOST},
        {OBX_DIALECT_MARIADB, "08S01", 2013, OBX__FAULT_LOST},
        {OBX_DIALECT_MARIADB, "08S01", 2006, OBX__FAULT_LOST},
        {OBX_DIALECT_MARIADB, "08S01", 1153, OBX__FAULT_LOST_PERMANENT}, /* over max_allowed_packet */
        {OBX_DIALECT_MARIADB, "08003", 0, OBX__FAULT_LOST},
        {OBX_DIALECT_SQLITE, "HY000", 19, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_SQLITE, "HY000", 1, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_SQLITE, "HY000", 5, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_SQLITE, "HY000", 6, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_SQLITE, "HY000", 1205, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_SQLSERVER, "40001", 1205, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_SQLSERVER, "42000", 1205, OBX__FAULT_TRANSIENT}, /* FreeTDS */
        {OBX_DIALECT_SQLSERVER, "HY000", 1222, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_SQLSERVER, "HYT00", 1222, OBX__FAULT_TRANSIENT}, /* lock wait, not a timeout */
        {OBX_DIALECT_SQLSERVER, "HYT00", 0, OBX__FAULT_TIMEOUT},
        {OBX_DIALECT_SQLSERVER, "08S01", 20009, OBX__FAULT_LOST},
        {OBX_DIALECT_SQLSERVER, "42S02", 208, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_SQLSERVER, "23000", 2627, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_SQLSERVER, "23000", 2601, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_SQLSERVER, "08S01", 10054, OBX__FAULT_LOST}};
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = obx__classify(obx__dialect_get(cases[i].d), cases[i].state, cases[i].native);
        if (got != cases[i].want) {
            char m[128];
            snprintf(m, sizeof m, "%s %s/%ld: got %d, want %d", obx_dialect_name(cases[i].d),
                     cases[i].state, cases[i].native, got, cases[i].want);
            tt_fail_at(__FILE__, __LINE__, m);
        }
    }
}

/* A changed trigger gets a new name that starts with the old one (JoinStep
 * -> JoinStep2), and the DROP of the old name comes after the CREATE of the
 * new, in every dialect of both headers: MariaDB commits each DDL statement,
 * and a settle between a DROP and its CREATE would run with neither
 * (CORE-TRIGGER-ORDER). */
static int trigger_name(const char *ddl, const char *prefix, char *out, size_t cap) {
    const char *p;
    size_t n = 0;
    if (strncmp(ddl, prefix, strlen(prefix)) != 0) return 0;
    p = ddl + strlen(prefix);
    if (strncmp(p, "IF NOT EXISTS ", 14) == 0) p += 14;
    if (strncmp(p, "IF EXISTS ", 10) == 0) p += 10;
    if (*p == '`' || *p == '"' || *p == '[') p++;
    while (*p && *p != '`' && *p != '"' && *p != ']' && *p != ' ' && n + 1 < cap) out[n++] = *p++;
    out[n] = '\0';
    return 1;
}

static void check_trigger_order(const char *const *ddl, const char *what, int *drops) {
    int i, k, found;
    char dropped[128], created[128];
    for (i = 0; ddl[i]; i++) {
        if (!trigger_name(ddl[i], "DROP TRIGGER ", dropped, sizeof dropped)) continue;
        (*drops)++;
        for (found = 0, k = 0; k < i && !found; k++)
            found = (trigger_name(ddl[k], "CREATE TRIGGER ", created, sizeof created) ||
                     trigger_name(ddl[k], "CREATE OR REPLACE TRIGGER ", created, sizeof created) ||
                     trigger_name(ddl[k], "CREATE OR ALTER TRIGGER ", created, sizeof created)) &&
                    strncmp(created, dropped, strlen(dropped)) == 0 && strcmp(created, dropped) != 0;
        if (!found) printf("    %s: DROP TRIGGER %s comes before its successor's CREATE\n", what, dropped);
        TT_EXPECT(found);
    }
}

static void test_trigger_order(void) {
    int d, drops = 0;
    for (d = 0; d < (int)(sizeof obx__sqlsets / sizeof obx__sqlsets[0]); d++)
        if (obx__sqlsets[d]) check_trigger_order(obx__sqlsets[d]->ddl, obx_dialect_name((obx_dialect)d), &drops);
    for (d = 0; d < (int)(sizeof ibx__sqlsets / sizeof ibx__sqlsets[0]); d++)
        if (ibx__sqlsets[d]) check_trigger_order(ibx__sqlsets[d]->ddl, ibx_dialect_name((ibx_dialect)d), &drops);
    TT_EXPECT(drops >= 1); /* MariaDB's JoinStep: the rule has a case to check */
}

static void test_sql_expand(void) {
    obx__hooks h;
    const char *names[26] = {0};
    char *s, *q;
    obx__hooks_resolve(&h, NULL);
    names['T' - 'A'] = "\"dbo\".\"Outbox\"";
    names['S' - 'A'] = "\"dbo\"";
    s = obx__sql_expand(&h, "SELECT 1 FROM {T} WHERE {S} {Q} {t} {T", names);
    TT_ASSERT(s != NULL);
    TT_EQ_STR(s, "SELECT 1 FROM \"dbo\".\"Outbox\" WHERE \"dbo\" {Q} {t} {T");
    obx__free(&h, s);
    q = obx__quote_name(&h, obx__dialect_get(OBX_DIALECT_MARIADB), "infra", "Inbox");
    TT_EQ_STR(q, "`infra`.`Inbox`");
    obx__free(&h, q);
    q = obx__quote_name(&h, obx__dialect_get(OBX_DIALECT_SQLSERVER), NULL, "Outbox");
    TT_EQ_STR(q, "[Outbox]");
    obx__free(&h, q);
}


/* Statements declare their parameters: every statement of every dialect
 * (SQL Server included), expanded as a store expands it ({O} and the other
 * names), takes exactly the arguments its header declares, and a store
 * opens with it (in debug builds the open checks it too). Both claim
 * variants (ordering_dead_holds). A failure names header, dialect, id. */
#define STMT_PARAMS_CHECK(P, p, head)                                                              \
    do {                                                                                           \
        int d_, hold_, i_;                                                                         \
        for (d_ = 1; d_ <= 4; d_++)                                                                \
            for (hold_ = 0; hold_ < 2 && p##__sqlsets[d_]; hold_++) {                              \
                static p##_store st_;                                                              \
                static char schema_[] = "dbo", table_[] = "Box";                                   \
                p##_result r_;                                                                     \
                memset(&st_, 0, sizeof st_);                                                       \
                p##__hooks_resolve(&st_.hooks, NULL);                                              \
                st_.db.hooks = &st_.hooks;                                                         \
                st_.db.err = &st_.err;                                                             \
                st_.db.d = p##__dialect_get((p##_dialect)d_);                                      \
                st_.schema = schema_;                                                              \
                st_.table = table_;                                                                \
                st_.max_starts = 3;                                                                \
                STMT_PARAMS_HOLD(st_, hold_);                                                      \
                r_ = p##__store_prepare_sql(&st_);                                                 \
                for (i_ = 0; i_ < P##__Q_COUNT; i_++) {                                            \
                    char why_[80], msg_[200];                                                      \
                    const char *bad_;                                                              \
                    if (!st_.sql[i_]) continue;                                                    \
                    bad_ = p##__args_check(st_.sql[i_], p##__stmt_args(st_.db.d, i_), why_, sizeof why_); \
                    if (bad_) {                                                                    \
                        snprintf(msg_, sizeof msg_, head " %s statement %d: %s",                   \
                                 p##__dialect_name((p##_dialect)d_), i_, bad_);                    \
                        tt_fail_at(__FILE__, __LINE__, msg_);                                      \
                    }                                                                              \
                    p##__free(&st_.hooks, st_.sql[i_]);                                            \
                }                                                                                  \
                TT_EQ_INT(r_, 0);                                                                  \
            }                                                                                      \
    } while (0)

static void test_stmt_params(void) {
    char why[80];
    /* The checker itself: counts, numbering, unused arguments, mixing. */
    TT_EXPECT(obx__args_check("UPDATE t SET a = ? WHERE b = ?", "it", why, sizeof why) == NULL);
    TT_EXPECT(obx__args_check("UPDATE t SET a = ? WHERE b = ?", "itt", why, sizeof why) != NULL);
    TT_EQ_STR(why, "2 marker(s), 3 argument(s) declared");
    TT_EXPECT(obx__args_check("{CALL p(?, ?)}", "i", why, sizeof why) != NULL);
    TT_EXPECT(obx__args_check("SELECT ?2, ?1, ?1", "it", why, sizeof why) == NULL);
    TT_EXPECT(obx__args_check("SELECT ?3", "itt", why, sizeof why) != NULL);
    TT_EQ_STR(why, "argument 1 (i) has no marker");
    TT_EXPECT(obx__args_check("SELECT ?3", "ITt", why, sizeof why) == NULL);
    TT_EXPECT(obx__args_check("SELECT ?4", "itt", why, sizeof why) != NULL);
    TT_EXPECT(obx__args_check("SELECT ?1, ?", "it", why, sizeof why) != NULL);
    TT_EXPECT(obx__args_check("SELECT 1", NULL, why, sizeof why) != NULL);
#define STMT_PARAMS_HOLD(st, hold) ((st).own.dead_holds = (hold))
    STMT_PARAMS_CHECK(OBX, obx, "obx.h");
#undef STMT_PARAMS_HOLD
#define STMT_PARAMS_HOLD(st, hold) ((void)(hold))
    STMT_PARAMS_CHECK(IBX, ibx, "ibx.h");
#undef STMT_PARAMS_HOLD
}

/* A size that would wrap size_t (a 32-bit gateway) is refused before any
 * allocation; before the guard the doubling loop never ended. */
static int g_allocs;
static void *counting_alloc(size_t n, void *user) { (void)user; g_allocs++; return malloc(n); }
static void test_size_guards(void) {
    obx__hooks h;
    obx_hooks hooks;
    obx__buf b = {NULL, 0, 0};
    memset(&hooks, 0, sizeof hooks);
    hooks.allocator.alloc = counting_alloc;
    obx__hooks_resolve(&h, &hooks);
    g_allocs = 0;
    TT_EQ_INT(obx__buf_reserve(&h, &b, SIZE_MAX - 10), 0);
    TT_EQ_INT(obx__buf_reserve(&h, &b, SIZE_MAX / 2), 0);
    TT_EQ_INT(obx__list_add(&h, &b, obx__dialect_get(OBX_DIALECT_MARIADB), "x", SIZE_MAX / 6 + 1), 0);
    TT_EQ_INT(g_allocs, 0);
    TT_EQ_INT(obx__buf_add(&h, &b, "abc", 3), 1);
    TT_EQ_STR(b.data, "abc");
    TT_EQ_INT(obx__buf_reserve(&h, &b, SIZE_MAX / 2 - 3), 0); /* counts what is already there */
    TT_EQ_INT(b.len, 3);
    obx__buf_free(&h, &b);
}

/* ---- the ODBC plumbing against the fake ODBC layer ---------------------------------------- */

static int64_t g_sleeps, g_slept_ms;
static void fake_sleep(int64_t ms, void *user) { (void)user; g_sleeps++; g_slept_ms += ms; }
static int g_log_lines;
static char g_last_log[768], g_last_log_store[64];
static void capture_log(obx_log_level level, const char *store_id, const char *msg, void *user) {
    (void)level; (void)user;
    g_log_lines++;
    snprintf(g_last_log, sizeof g_last_log, "%s", msg);
    snprintf(g_last_log_store, sizeof g_last_log_store, "%s", store_id);
}

static void *fake_alloc_for_refusal(size_t size, void *user) { (void)size; (void)user; return NULL; }

/* obx_provider_create leaves *out NULL when it refuses its description, so
 * it logs the refusal through the template's logger, naming the field;
 * a negative refresh interval is a number out of range. No database is
 * touched (CORE-PROVIDER-REFUSAL). */
static void test_provider_refusal(void) {
    obx_provider_desc pd;
    obx_provider *p = NULL;
    obx_database db = {"a", "Driver={none};"};
    memset(&pd, 0, sizeof pd);
    pd.store.hooks.logger.log = capture_log;
    g_log_lines = 0;
    TT_EQ_INT(obx_provider_create(&pd, &p), OBX_ERR_INVALID_ARG); /* neither list nor discovery */
    TT_ASSERT(p == NULL);
    TT_EQ_INT(g_log_lines, 1);
    TT_EXPECT(strstr(g_last_log, "obx_provider_create: databases") != NULL);
    pd.databases = &db;
    pd.database_count = 1;
    pd.refresh_interval_ms = -1;
    TT_EQ_INT(obx_provider_create(&pd, &p), OBX_ERR_OUT_OF_RANGE);
    TT_EXPECT(strstr(g_last_log, "refresh_interval_ms") != NULL);
    pd.refresh_interval_ms = 0;
    pd.database_count = -1;
    TT_EQ_INT(obx_provider_create(&pd, &p), OBX_ERR_INVALID_ARG);
    TT_EXPECT(strstr(g_last_log, "database_count") != NULL);
    pd.database_count = 1;
    pd.store.hdbc = &db;
    TT_EQ_INT(obx_provider_create(&pd, &p), OBX_ERR_INVALID_ARG);
    TT_EXPECT(strstr(g_last_log, "store.hdbc") != NULL);
    pd.store.hdbc = NULL;
    db.id = "";
    TT_EQ_INT(obx_provider_create(&pd, &p), OBX_ERR_INVALID_ARG);
    TT_EXPECT(strstr(g_last_log, "obx_provider_create: databases") != NULL);
    pd.store.hooks.allocator.alloc = fake_alloc_for_refusal;
    TT_EQ_INT(obx_provider_create(&pd, &p), OBX_ERR_INVALID_ARG);
    TT_EXPECT(strstr(g_last_log, "allocator") != NULL);
    TT_ASSERT(p == NULL);
    g_log_lines = 0;
    pd.store.hooks.logger.min_level = OBX_LOG_OFF; /* the logger's level holds */
    TT_EQ_INT(obx_provider_create(&pd, &p), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(g_log_lines, 0);
}

/* A store on the fake driver, answering as `dbms`; no real sleeping. */
static obx_store *fake_store(const char *dbms, const char *connstr) {
    obx_store_desc desc;
    obx_store *s = NULL;
    fake_reset();
    fake_set_dbms_name(dbms);
    g_sleeps = g_slept_ms = 0;
    memset(&desc, 0, sizeof desc);
    desc.connection_string = connstr ? connstr : "Driver=fake;";
    desc.store_id = "fake-store";
    desc.hooks.clock.sleep_ms = fake_sleep;
    desc.hooks.logger.log = capture_log;
    desc.hooks.logger.min_level = OBX_LOG_DEBUG;
    if (obx_store_open(&desc, &s) != OBX_OK) {
        printf("    fake open failed: %s\n", obx_store_last_error(s)->message);
        obx_store_close(s);
        return NULL;
    }
    fake_reset(); /* forget the set-up traffic; handles stay valid */
    fake_set_dbms_name(dbms);
    return s;
}

/* obx_dispatcher_create names the field it refuses, on the store: each
 * number out of range, and a store given with a provider
 * (CORE-DISPATCHER-ARGS). */
static void test_dispatcher_args(void) {
    obx_store *s = fake_store("SQLite", NULL);
    obx_dispatcher_desc dd;
    obx_dispatcher *d = NULL;
    TT_ASSERT(s != NULL);
    memset(&dd, 0, sizeof dd);
    dd.store = s;
    dd.lease_seconds = -1;
    TT_EQ_INT(obx_dispatcher_create(&dd, &d), OBX_ERR_OUT_OF_RANGE);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_dispatcher_create: lease_seconds");
    TT_EXPECT(strstr(obx_store_last_error(s)->message, "got -1") != NULL);
    dd.lease_seconds = 0;
    dd.batch_size = OBX_BATCH_MAX + 1;
    TT_EQ_INT(obx_dispatcher_create(&dd, &d), OBX_ERR_OUT_OF_RANGE);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_dispatcher_create: batch_size");
    dd.batch_size = 0;
    dd.reap_interval_ms = -5;
    TT_EQ_INT(obx_dispatcher_create(&dd, &d), OBX_ERR_OUT_OF_RANGE);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_dispatcher_create: reap_interval_ms");
    dd.reap_interval_ms = 0;
    dd.pause_max_ms = OBX_DELAY_MAX_MS + 1;
    TT_EQ_INT(obx_dispatcher_create(&dd, &d), OBX_ERR_OUT_OF_RANGE);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_dispatcher_create: pause_max_ms");
    dd.pause_max_ms = 0;
    dd.selection = (obx_selection)7;
    TT_EQ_INT(obx_dispatcher_create(&dd, &d), OBX_ERR_OUT_OF_RANGE);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_dispatcher_create: selection");
    dd.selection = OBX_SELECT_ROUND_ROBIN;
    dd.provider = (obx_provider *)(void *)s; /* never used: refused first */
    TT_EQ_INT(obx_dispatcher_create(&dd, &d), OBX_ERR_INVALID_ARG);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_dispatcher_create: provider");
    TT_ASSERT(d == NULL);
    dd.provider = NULL;
    TT_EQ_INT(obx_dispatcher_create(&dd, &d), OBX_OK);
    obx_dispatcher_destroy(d);
    obx_store_close(s);
}

/* CORE-TERSE-MESSAGES: built with OBX_TERSE_MESSAGES, an error keeps the
 * call and argument (`where`), the result and the cause, and loses only the
 * explanation; the default build keeps the whole sentence. tests/options.sh
 * builds this file both ways. */
static void test_terse_messages(void) {
    obx_store_desc od;
    ibx_store_desc id;
    obx_store *os = NULL;
    ibx_store *is = NULL;
    fake_reset();
    memset(&od, 0, sizeof od);
    od.connection_string = "Driver=fake;";
    od.store_id = "bad\nid";
    TT_EQ_INT(obx_store_open(&od, &os), OBX_ERR_INVALID_ARG);
    TT_ASSERT(os != NULL);
    TT_EQ_INT(obx_store_last_error(os)->result, OBX_ERR_INVALID_ARG);
    TT_EQ_STR(obx_store_last_error(os)->where, "obx_store_open: store_id");
#ifdef OBX_TERSE_MESSAGES
    TT_EQ_STR(obx_store_last_error(os)->message, "store_id must be 1-63 bytes of UTF-8");
#else
    TT_EQ_STR(obx_store_last_error(os)->message, "store_id must be 1-63 bytes of UTF-8, none of them control characters");
#endif
    obx_store_close(os);
    memset(&id, 0, sizeof id);
    id.connection_string = "Driver=fake;";
    id.store_id = "";
    TT_EQ_INT(ibx_store_open(&id, &is), IBX_ERR_INVALID_ARG);
    TT_ASSERT(is != NULL);
    TT_EQ_STR(ibx_store_last_error(is)->where, "ibx_store_open: store_id");
#ifdef IBX_TERSE_MESSAGES
    TT_EQ_STR(ibx_store_last_error(is)->message, "store_id must be 1-63 bytes of UTF-8");
#else
    TT_EQ_STR(ibx_store_last_error(is)->message, "store_id must be 1-63 bytes of UTF-8, none of them control characters");
#endif
    ibx_store_close(is);
    TT_EQ_INT(fake_open_handles(), 0);
}

static obx_result one_statement(obx__db *db, void *ctx) {
    (void)ctx;
    return obx__exec(db, 0, "UPDATE t SET v = 1", NULL, 0, NULL, NULL);
}

static void test_fake_diagnostics(void) {
    obx_store *s = fake_store("PostgreSQL", NULL);
    const obx_error *e;
    TT_ASSERT(s != NULL);
    e = obx_store_last_error(s);
    /* A warning first, then the error, then one more record: the error is
     * the cause, and every record reaches the message. */
    fake_push_error(SQL_ERROR, "01004", 0, "string data, right truncated");
    fake_push_info("23505", 1, "duplicate key value violates unique constraint");
    fake_push_info("HY000", 7, "second record");
    TT_EQ_INT(obx__exec(&s->db, 0, "INSERT INTO t VALUES (1)", NULL, 0, NULL, NULL), OBX_ERR_DB);
    TT_EQ_STR(e->sqlstate, "23505");
    TT_EQ_INT(e->native, 1);
    TT_EQ_INT(e->connection_lost, 0);
    TT_EQ_STR(e->where, "SQLExecute");
    TT_EXPECT(strstr(e->message, "duplicate key value") != NULL);
    TT_EXPECT(strstr(e->message, " | [HY000/7] second record") != NULL);
    TT_EXPECT(strstr(e->message, "[01004/0] string data") != NULL);
    obx_store_close(s);
    TT_EQ_INT(fake_open_handles(), 0);
}

static void test_fake_classification(void) {
    static const struct { const char *dbms, *state; long native; obx_result want; int lost; } cases[] = {
        {"PostgreSQL", "40P01", 1, OBX_ERR_DB_TRANSIENT, 0},
        {"PostgreSQL", "40001", 1, OBX_ERR_DB_TRANSIENT, 0},
        {"PostgreSQL", "55P03", 1, OBX_ERR_DB_TRANSIENT, 0},
        {"PostgreSQL", "57014", 1, OBX_ERR_DB_TRANSIENT, 0},
        {"PostgreSQL", "57P01", 35, OBX_ERR_DB_TRANSIENT, 1},
        {"PostgreSQL", "08S01", 35, OBX_ERR_DB_TRANSIENT, 1},
        {"PostgreSQL", "42601", 1, OBX_ERR_DB, 0},
        {"PostgreSQL", "23505", 1, OBX_ERR_DB, 0},
        {"SQLite", "HY000", 5, OBX_ERR_DB_TRANSIENT, 0},
        {"SQLite", "HY000", 6, OBX_ERR_DB_TRANSIENT, 0},
        {"SQLite", "HY000", 19, OBX_ERR_DB, 0},
        {"SQLite", "HY000", 1, OBX_ERR_DB, 0}};
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        obx_store *s = fake_store(cases[i].dbms, NULL);
        TT_ASSERT(s != NULL);
        fake_push_error(SQL_ERROR, cases[i].state, cases[i].native, "scripted");
        TT_EQ_INT(obx__exec(&s->db, 0, "UPDATE t SET v = 1", NULL, 0, NULL, NULL), cases[i].want);
        TT_EQ_INT(obx_store_last_error(s)->connection_lost, cases[i].lost);
        obx_store_close(s);
    }
}

static void test_fake_retry_transient(void) {
    obx_store *s = fake_store("PostgreSQL", NULL);
    int first;
    TT_ASSERT(s != NULL);
    fake_push_error(SQL_ERROR, "40P01", 1, "deadlock detected");
    fake_push_ok(1);
    TT_EQ_INT(obx__unit(&s->db, one_statement, NULL, "unit"), OBX_OK);
    TT_EQ_INT(obx_store_last_error(s)->result, OBX_OK); /* the retry succeeded: no stale error */
    /* executed, rolled back, paused, executed again, committed */
    first = fake_log_find("UPDATE t", 0);
    TT_ASSERT(first >= 0);
    TT_EQ_STR(fake_log_sql(first + 1), "<ROLLBACK>");
    TT_EQ_STR(fake_log_sql(first + 2), "UPDATE t SET v = 1");
    TT_EQ_STR(fake_log_sql(first + 3), "<COMMIT>");
    TT_EQ_INT(fake_commits(), 1);
    TT_EQ_INT(g_sleeps, 1);
    TT_EXPECT(g_slept_ms >= 10 && g_slept_ms <= 60);
    obx_store_close(s);
}

static void test_fake_retry_bounded(void) {
    obx_store *s = fake_store("PostgreSQL", NULL);
    int i;
    TT_ASSERT(s != NULL);
    for (i = 0; i < 10; i++) fake_push_error(SQL_ERROR, "40001", 1, "could not serialize access");
    TT_EQ_INT(obx__unit(&s->db, one_statement, NULL, "unit"), OBX_ERR_DB_TRANSIENT);
    TT_EQ_INT(fake_calls("SQLExecute"), 1 + OBX__UNIT_RETRIES);
    TT_EQ_INT(fake_rollbacks(), 1 + OBX__UNIT_RETRIES);
    TT_EQ_INT(fake_commits(), 0);
    TT_EQ_INT(g_sleeps, OBX__UNIT_RETRIES);
    TT_EQ_STR(obx_store_last_error(s)->sqlstate, "40001");
    /* A permanent error is not retried at all. */
    fake_reset();
    fake_push_error(SQL_ERROR, "42601", 1, "syntax error");
    TT_EQ_INT(obx__unit(&s->db, one_statement, NULL, "unit"), OBX_ERR_DB);
    TT_EQ_INT(fake_calls("SQLExecute"), 1);
    TT_EQ_INT(fake_rollbacks(), 1);
    obx_store_close(s);
}

static void test_fake_retry_on_commit(void) {
    obx_store *s = fake_store("PostgreSQL", NULL);
    TT_ASSERT(s != NULL);
    /* A serialization failure reported by COMMIT redoes the whole unit. */
    fake_fail_call("SQLEndTran", 1, SQL_ERROR, "40001", 1, "could not serialize access");
    TT_EQ_INT(obx__unit(&s->db, one_statement, NULL, "unit"), OBX_OK);
    TT_EQ_INT(fake_calls("SQLExecute"), 2);
    TT_EQ_INT(fake_commits(), 1);
    obx_store_close(s);
}

static void test_fake_lost_connection(void) {
    obx_store *s = fake_store("PostgreSQL", NULL);
    const obx_error *e;
    TT_ASSERT(s != NULL);
    e = obx_store_last_error(s);
    fake_kill_connection_after(0);
    TT_EQ_INT(obx__unit(&s->db, one_statement, NULL, "unit"), OBX_ERR_DB_TRANSIENT);
    TT_EQ_INT(e->connection_lost, 1);
    TT_EQ_INT(g_sleeps, 0);      /* surfaced at once, never retried */
    TT_EQ_INT(fake_commits(), 0);
    TT_EQ_INT(fake_calls("SQLDriverConnect"), 0);
    /* The next unit reconnects first (and sets the session up again), then
     * runs and commits. */
    TT_EQ_INT(obx__unit(&s->db, one_statement, NULL, "unit"), OBX_OK);
    TT_EQ_INT(fake_calls("SQLDriverConnect"), 1);
    TT_EQ_STR(fake_log_sql(fake_log_count() - 2), "UPDATE t SET v = 1");
    TT_EQ_STR(fake_log_sql(fake_log_count() - 1), "<COMMIT>");
    TT_EXPECT(fake_log_find("SET TIME ZONE", 0) >= 0);
    obx_store_close(s);
    TT_EQ_INT(fake_open_handles(), 0);
}

/* An outage logs one WARN "reconnecting", not one per attempt: the
 * attempts that fail again are DEBUG, and the reconnect says how many
 * failed (a dispatcher retries every second: an hour down was 3,600 WARN
 * lines, where the loop's own lines are one a minute) (CORE-RECONNECT-LOG). */
static int g_reconnect_warns, g_reconnect_debugs, g_reconnected;
static void count_reconnect_log(obx_log_level level, const char *store_id, const char *msg, void *user) {
    (void)store_id; (void)user;
    if (strstr(msg, "reconnecting")) {
        if (level == OBX_LOG_WARN) g_reconnect_warns++;
        if (level == OBX_LOG_DEBUG) g_reconnect_debugs++;
    }
    if (strstr(msg, "reconnected after 3 failed")) g_reconnected++;
}

static void test_fake_reconnect_log(void) {
    obx_store *s = fake_store("PostgreSQL", NULL);
    int i;
    TT_ASSERT(s != NULL);
    s->hooks.log.log = count_reconnect_log;
    g_reconnect_warns = g_reconnect_debugs = g_reconnected = 0;
    fake_kill_connection_after(0);
    TT_EQ_INT(obx__unit(&s->db, one_statement, NULL, "unit"), OBX_ERR_DB_TRANSIENT);
    fake_set_connect_error("08001", 101, "could not connect to server: Connection refused");
    for (i = 0; i < 3; i++) TT_EQ_INT(obx__unit(&s->db, one_statement, NULL, "unit"), OBX_ERR_DB_TRANSIENT);
    TT_EQ_INT(g_reconnect_warns, 1);
    TT_EQ_INT(g_reconnect_debugs, 2);
    fake_set_connect_error(NULL, 0, NULL);
    TT_EQ_INT(obx__unit(&s->db, one_statement, NULL, "unit"), OBX_OK);
    TT_EQ_INT(g_reconnected, 1);
    TT_EQ_INT(g_reconnect_warns, 1);
    /* The next outage is new: WARN again. */
    fake_kill_connection_after(0);
    TT_EQ_INT(obx__unit(&s->db, one_statement, NULL, "unit"), OBX_ERR_DB_TRANSIENT);
    fake_set_connect_error(NULL, 0, NULL);
    TT_EQ_INT(obx__unit(&s->db, one_statement, NULL, "unit"), OBX_OK);
    TT_EQ_INT(g_reconnect_warns, 2);
    obx_store_close(s);
    TT_EQ_INT(fake_open_handles(), 0);
}

/* A standby (or a read-only node) answered: nothing was written, so the
 * caller is not told "lost", the unit is not redone on the same server,
 * and the next unit connects again (where a multi-host connection string
 * finds the writable server). */
static void test_fake_read_only(void) {
    obx_store *s = fake_store("PostgreSQL", NULL);
    int commits;
    TT_ASSERT(s != NULL);
    commits = fake_commits();
    fake_push_error(SQL_ERROR, "25006", 1, "cannot execute UPDATE in a read-only transaction");
    TT_EQ_INT(obx__unit(&s->db, one_statement, NULL, "unit"), OBX_ERR_DB_TRANSIENT);
    TT_EQ_INT(obx_store_last_error(s)->connection_lost, 0);
    TT_EQ_STR(obx_store_last_error(s)->sqlstate, "25006");
    TT_EQ_INT(g_sleeps, 0);
    TT_EQ_INT(fake_calls("SQLExecute"), 1);
    TT_EQ_INT(fake_calls("SQLDriverConnect"), 0);
    TT_EQ_INT(obx__unit(&s->db, one_statement, NULL, "unit"), OBX_OK);
    TT_EQ_INT(fake_calls("SQLDriverConnect"), 1);
    TT_EQ_STR(fake_log_sql(fake_log_count() - 2), "UPDATE t SET v = 1");
    TT_EQ_STR(fake_log_sql(fake_log_count() - 1), "<COMMIT>");
    TT_EXPECT(fake_commits() > commits);
    obx_store_close(s);
    TT_EQ_INT(fake_open_handles(), 0);
}

/* An index InnoDB marked corrupted (1712) refuses every statement on the
 * table until it is rebuilt: the error says how (CORE-MY-INDEX-REPAIR has
 * deploy build a dropped one again on a real server). */
static void test_fake_corrupt_index_hint(void) {
    obx_store *s = fake_store("MariaDB", NULL);
    TT_ASSERT(s != NULL);
    fake_push_error(SQL_ERROR, "HY000", 1712, "Index Outbox is corrupted");
    TT_EQ_INT(obx__exec(&s->db, 0, "UPDATE t SET v = 1", NULL, 0, NULL, NULL), OBX_ERR_DB);
    TT_EXPECT(strstr(obx_store_last_error(s)->message, "Outbox is corrupted -- InnoDB marked an index corrupted") != NULL);
    TT_EXPECT(strstr(obx_store_last_error(s)->message, "obxctl deploy") != NULL);
    fake_push_error(SQL_ERROR, "HY000", 1205, "Lock wait timeout exceeded");
    TT_ASSERT(obx__exec(&s->db, 0, "UPDATE t SET v = 1", NULL, 0, NULL, NULL) != OBX_OK);
    TT_EXPECT(strstr(obx_store_last_error(s)->message, "InnoDB marked") == NULL);
    obx_store_close(s);
}

/* Behind PgBouncer in transaction mode psqlODBC's named statements vanish
 * (or collide): the error says what to change. */
static void test_fake_pooler_hint(void) {
    obx_store *s = fake_store("PostgreSQL", NULL);
    TT_ASSERT(s != NULL);
    fake_push_error(SQL_ERROR, "26000", 1, "ERROR: prepared statement \"_PLAN0x5\" does not exist");
    TT_EQ_INT(obx__exec(&s->db, 0, "UPDATE t SET v = 1", NULL, 0, NULL, NULL), OBX_ERR_DB);
    TT_EXPECT(strstr(obx_store_last_error(s)->message, "add UseServerSidePrepare=0;") != NULL);
    fake_push_error(SQL_ERROR, "26000", 1, "ERROR: prepared statement \"mine\" does not exist");
    TT_EQ_INT(obx__exec(&s->db, 0, "UPDATE t SET v = 1", NULL, 0, NULL, NULL), OBX_ERR_DB);
    TT_EXPECT(strstr(obx_store_last_error(s)->message, "UseServerSidePrepare") == NULL);
    obx_store_close(s);
}

static void test_fake_dead_commit(void) {
    obx_store *s = fake_store("PostgreSQL", NULL);
    TT_ASSERT(s != NULL);
    /* The statement runs, then the connection dies; psqlODBC would report
     * the COMMIT as successful. The dead flag must win. */
    fake_push_ok(1);
    fake_kill_connection_after(2); /* SQLFreeStmt, SQLBindParameter-free path: after execute */
    TT_EQ_INT(obx__unit(&s->db, one_statement, NULL, "unit"), OBX_ERR_DB_TRANSIENT);
    TT_EQ_INT(obx_store_last_error(s)->connection_lost, 1);
    TT_EQ_INT(fake_commits(), 0);
    TT_EQ_INT(fake_log_find("<COMMIT", 0), -1); /* commit was not even attempted */
    obx_store_close(s);
}

/* The same lie in the caller's transaction: psqlODBC (at its default
 * statement-level rollback, an internal savepoint around each statement)
 * may lose the connection after the enqueue's INSERT ran, report that
 * statement as successful, and then report the caller's COMMIT as
 * successful too, committing nothing. Seen in the 30-minute soak as a LOST
 * message (and its business row gone): obx_enqueue_tx must not say OK on
 * a connection the driver knows is dead (CORE-DEAD-COMMIT-CALLER). */
static void test_fake_dead_caller(void) {
    obx_store *s = fake_store("PostgreSQL", NULL);
    SQLHENV env = NULL;
    SQLHDBC dbc = NULL;
    obx_new_message m;
    char id[37] = "untouched";
    SQLCHAR cs[] = "Driver=fake;";
    int calls;
    TT_ASSERT(s != NULL);
    TT_ASSERT(SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_ENV, SQL_NULL_HANDLE, &env)));
    SQLSetEnvAttr(env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER)SQL_OV_ODBC3, 0);
    TT_ASSERT(SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_DBC, env, &dbc)));
    TT_ASSERT(SQL_SUCCEEDED(SQLDriverConnect(dbc, NULL, cs, SQL_NTS, NULL, 0, NULL,
                                             SQL_DRIVER_NOPROMPT)));
    SQLSetConnectAttr(dbc, SQL_ATTR_AUTOCOMMIT, (SQLPOINTER)SQL_AUTOCOMMIT_OFF, 0);
    memset(&m, 0, sizeof m);
    m.topic = "t";
    m.payload = "{}";
    /* Once as it should go, to count its calls; then the connection dies
     * as the last of them begins: after the INSERT. */
    calls = fake_call_count();
    TT_EQ_INT(obx_enqueue_tx(s, dbc, &m, id), OBX_OK);
    calls = fake_call_count() - calls;
    TT_ASSERT(calls > 2);
    strcpy(id, "untouched");
    fake_kill_connection_after(calls - 1);
    TT_EQ_INT(obx_enqueue_tx(s, dbc, &m, id), OBX_ERR_DB_TRANSIENT);
    TT_EQ_INT(obx_store_last_error(s)->connection_lost, 1);
    TT_EQ_STR(id, "untouched");
    SQLDisconnect(dbc);
    SQLFreeHandle(SQL_HANDLE_DBC, dbc);
    SQLFreeHandle(SQL_HANDLE_ENV, env);
    obx_store_close(s);
}

static void test_fake_no_data(void) {
    obx_store *s = fake_store("SQLite", NULL);
    int64_t rows = -1;
    TT_ASSERT(s != NULL);
    fake_push_nodata();
    TT_EQ_INT(obx__exec(&s->db, 0, "UPDATE t SET v = 1", NULL, 0, &rows, NULL), OBX_OK);
    TT_EQ_INT(rows, 0);
    fake_push_ok(3);
    TT_EQ_INT(obx__exec(&s->db, 0, "UPDATE t SET v = 1", NULL, 0, &rows, NULL), OBX_OK);
    TT_EQ_INT(rows, 3);
    obx_store_close(s);
}

static void test_fake_sqlite_transactions(void) {
    obx_store *s = fake_store("SQLite", NULL);
    TT_ASSERT(s != NULL);
    /* Writers take the lock up front with BEGIN IMMEDIATE issued as SQL. */
    TT_EQ_INT(obx__unit(&s->db, one_statement, NULL, "unit"), OBX_OK);
    TT_EQ_STR(fake_log_sql(0), "BEGIN IMMEDIATE");
    TT_EQ_STR(fake_log_sql(1), "UPDATE t SET v = 1");
    TT_EQ_STR(fake_log_sql(2), "COMMIT");
    TT_EQ_INT(fake_calls("SQLEndTran"), 0);
    fake_reset();
    fake_set_dbms_name("SQLite");
    fake_push_ok(0);
    fake_push_error(SQL_ERROR, "HY000", 19, "UNIQUE constraint failed");
    TT_EQ_INT(obx__unit(&s->db, one_statement, NULL, "unit"), OBX_ERR_DB);
    TT_EQ_STR(fake_log_sql(2), "ROLLBACK");
    /* A busy database at BEGIN is transient and retried. */
    fake_reset();
    fake_set_dbms_name("SQLite");
    fake_push_error(SQL_ERROR, "HY000", 5, "database is locked");
    TT_EQ_INT(obx__unit(&s->db, one_statement, NULL, "unit"), OBX_OK);
    TT_EQ_STR(fake_log_sql(1), "BEGIN IMMEDIATE");
    TT_EQ_INT(g_sleeps, 1);
    obx_store_close(s);
}

/* One place decides how a unit runs (obx__unit_mode): per dialect and
 * connection, a unit of one statement, one of several that writes, one that
 * reads; the unit runs in the mode decided (db->unit) and issues only that
 * mode's transaction calls. CORE-UNIT-MODE. */
static void test_fake_unit_mode(void) {
    enum { W1 = OBX__UNIT_WRITE | OBX__UNIT_ONE_STATEMENT, W = OBX__UNIT_WRITE, R1 = OBX__UNIT_ONE_STATEMENT };
    static const struct {
        const char *dbms;
        int timeout; /* a statement timeout: MariaDB's units are ODBC transactions then */
        int flags, want;
    } cases[] = {
        {"SQLite", 0, W1, OBX__RUN_AUTOCOMMIT}, {"SQLite", 0, R1, OBX__RUN_AUTOCOMMIT},
        {"SQLite", 0, W, OBX__RUN_SQL}, {"SQLite", 0, 0, OBX__RUN_SQL_READ},
        {"PostgreSQL", 0, W1, OBX__RUN_AUTOCOMMIT}, {"PostgreSQL", 0, R1, OBX__RUN_AUTOCOMMIT},
        {"PostgreSQL", 0, W, OBX__RUN_ODBC}, {"PostgreSQL", 0, 0, OBX__RUN_ODBC},
        {"MariaDB", 0, W1, OBX__RUN_AUTOCOMMIT}, {"MariaDB", 0, W, OBX__RUN_SQL},
        {"MariaDB", 0, 0, OBX__RUN_SQL_READ},
        {"MariaDB", 1, W1, OBX__RUN_ODBC}, {"MariaDB", 1, W, OBX__RUN_ODBC},
        {"Microsoft SQL Server", 0, W1, OBX__RUN_ODBC}, {"Microsoft SQL Server", 0, W, OBX__RUN_ODBC}};
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        obx_store *s = fake_store(cases[i].dbms, NULL);
        int mode, sql_tx, odbc_tx;
        char what[96];
        snprintf(what, sizeof what, "case %u: %s flags %d", (unsigned)i, cases[i].dbms, cases[i].flags);
        TT_ASSERT(s != NULL);
        if (cases[i].timeout) { /* as a statement timeout leaves it (obx__db_setup) */
            s->db.statement_timeout_s = 5;
            s->db.tx_by_sql = 0;
        }
        mode = cases[i].want;
        sql_tx = mode == OBX__RUN_SQL;
        odbc_tx = mode == OBX__RUN_ODBC;
        TT_EQ_INT(obx__unit_run(&s->db, one_statement, NULL, what, cases[i].flags), OBX_OK);
        if (s->db.unit != mode) printf("    %s\n", what);
        TT_EQ_INT(s->db.unit, mode);
        TT_EQ_STR(fake_log_sql(0), sql_tx ? s->db.d->begin_sql : "UPDATE t SET v = 1");
        TT_EQ_INT(fake_calls("SQLEndTran"), odbc_tx);
        TT_EQ_INT(s->db.in_tx, 0);
        obx_store_close(s);
    }
    { /* the caller's transaction: nothing begun, committed or rolled back */
        obx__db caller;
        memset(&caller, 0, sizeof caller);
        caller.callers_tx = 1;
        TT_EQ_INT(obx__unit_mode(&caller, W), OBX__RUN_CALLER);
    }
}

static void test_fake_open_dialects(void) {
    obx_store_desc desc;
    obx_store *s = NULL;
    static const char *const unsupported[] = {"Oracle", "DB2/LINUXX8664"};
    size_t i;
    for (i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++) {
        fake_reset();
        fake_set_dbms_name(unsupported[i]);
        memset(&desc, 0, sizeof desc);
        desc.connection_string = "Driver=fake;";
        desc.hooks.logger.log = capture_log;
        TT_EQ_INT(obx_store_open(&desc, &s), OBX_ERR_UNSUPPORTED);
        TT_EXPECT(strstr(obx_store_last_error(s)->message, unsupported[i]) != NULL);
        obx_store_close(s);
        s = NULL;
    }
    TT_EQ_INT(fake_open_handles(), 0);
    /* Forcing a dialect overrides detection. */
    fake_reset();
    fake_set_dbms_name("Oracle");
    desc.dialect = OBX_DIALECT_SQLITE;
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_OK);
    TT_EQ_INT(s->db.d->id, OBX_DIALECT_SQLITE);
    obx_store_close(s);
    /* psqlODBC: Protocol=7.4-1 is appended, once; a caller's choice stays. */
    fake_reset();
    fake_set_dbms_name("PostgreSQL");
    desc.dialect = OBX_DIALECT_AUTO;
    desc.connection_string = "Driver=fake";
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_OK);
    TT_EQ_STR(fake_last_connstr(), "Driver=fake;Protocol=7.4-1;");
    TT_EQ_INT(fake_calls("SQLDriverConnect"), 2);
    obx_store_close(s);
    fake_reset();
    fake_set_dbms_name("PostgreSQL");
    desc.connection_string = "Driver=fake;protocol=7.4-2";
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_OK);
    TT_EQ_STR(fake_last_connstr(), "Driver=fake;protocol=7.4-2");
    TT_EQ_INT(fake_calls("SQLDriverConnect"), 1);
    /* Session: manual commit, READ COMMITTED, UTC. */
    TT_ASSERT(fake_log_find("SET TIME ZONE 'UTC'", 0) >= 0);
    obx_store_close(s);
    TT_EQ_INT(fake_open_handles(), 0);
}

static void test_fake_open_arguments(void) {
    obx_store_desc desc;
    obx_store *s;
    void *not_null = &desc;
    /* Any non-NULL value, to see open clear it; copied, not cast: the desc's
     * alignment is less than a store's on 32-bit ARM (-Wcast-align). */
    memcpy(&s, &not_null, sizeof s);
    fake_reset();
    TT_EQ_INT(obx_store_open(NULL, &s), OBX_ERR_INVALID_ARG);
    TT_EXPECT(s == NULL);
    memset(&desc, 0, sizeof desc);
    desc.hooks.logger.log = capture_log;
    TT_EQ_INT(obx_store_open(&desc, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_ERR_INVALID_ARG); /* neither string nor hdbc */
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_store_open: connection_string");
    obx_store_close(s);
    desc.connection_string = "";
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_ERR_INVALID_ARG);
    obx_store_close(s);
    desc.connection_string = "Driver=fake;";
    desc.hdbc = &desc;
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_ERR_INVALID_ARG); /* both */
    obx_store_close(s);
    desc.hdbc = NULL;
    desc.table = "Outbox; DROP TABLE x";
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_ERR_INVALID_ARG);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_store_open: table");
    obx_store_close(s);
    desc.table = NULL;
    desc.schema = "1st";
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_ERR_INVALID_ARG);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_store_open: schema");
    obx_store_close(s);
    desc.schema = NULL;
    desc.dialect = (obx_dialect)17;
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_ERR_INVALID_ARG);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_store_open: dialect");
    obx_store_close(s);
    desc.dialect = OBX_DIALECT_AUTO;
    /* Numbers out of their range, named (CORE-STORE-OPEN-RANGES). */
    desc.statement_timeout_seconds = -1;
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_ERR_OUT_OF_RANGE);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_store_open: statement_timeout_seconds");
    obx_store_close(s);
    desc.statement_timeout_seconds = 0;
    desc.login_timeout_seconds = -2; /* -1 is the driver's own */
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_ERR_OUT_OF_RANGE);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_store_open: login_timeout_seconds");
    obx_store_close(s);
    desc.login_timeout_seconds = 0;
    desc.message_log_level = (obx_log_level)(OBX_LOG_OFF + 1);
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_ERR_OUT_OF_RANGE);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_store_open: message_log_level");
    obx_store_close(s);
    desc.message_log_level = (obx_log_level)0;
    /* Names that reach a column, log lines or metrics labels are UTF-8: a
     * worker_name that is not made every ack fail on PostgreSQL and MariaDB. */
    desc.worker_name = "worker-\xff";
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_ERR_INVALID_ARG);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_store_open: worker_name");
    obx_store_close(s);
    desc.worker_name = NULL;
    desc.store_id = "node-\xe2\x82";
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_ERR_INVALID_ARG);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_store_open: store_id");
    obx_store_close(s);
    desc.store_id = NULL;
    /* Bad input is rejected before any ODBC call. */
    TT_EQ_INT(fake_calls("SQLDriverConnect"), 0);
    TT_EQ_INT(fake_calls("SQLAllocHandle"), 0);
    TT_EQ_STR(obx_store_last_error(NULL)->message, "store is NULL");
    obx_store_close(NULL);
}

static void test_fake_connect_error(void) {
    obx_store_desc desc;
    obx_store *s = NULL;
    fake_reset();
    fake_set_connect_error("08001", 101, "could not connect to server: Connection refused");
    memset(&desc, 0, sizeof desc);
    desc.connection_string = "Driver=fake;";
    desc.hooks.logger.log = capture_log;
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_ERR_DB_TRANSIENT);
    TT_EQ_STR(obx_store_last_error(s)->sqlstate, "08001");
    TT_EQ_INT(obx_store_last_error(s)->native, 101);
    TT_EQ_STR(obx_store_last_error(s)->where, "SQLDriverConnect");
    TT_EXPECT(strstr(g_last_log, "Connection refused") != NULL); /* logged as it failed */
    obx_store_close(s);
    TT_EQ_INT(fake_open_handles(), 0);
}

/* A connection that cannot be made says what was asked for and where the
 * driver manager looked; what no retry can mend (a missing DSN, driver or
 * database, refused credentials, a SQLite file's missing directory) is
 * OBX_ERR_DB, not transient (CORE-CONNECT-EXPLAIN). The texts are the ones
 * unixODBC 2.3, psqlODBC 13, MariaDB Connector/ODBC 3.1 and sqliteodbc
 * return. */
static void test_fake_connect_explain(void) {
    static const struct {
        const char *connstr, *sqlstate;
        long native;
        const char *text;
        obx_result want;
        const char *says, *also;
    } cases[] = {
        {"DSN=nosuch;", "IM002", 0, "[unixODBC][Driver Manager]Data source name not found and no default driver specified",
         OBX_ERR_DB, "DSN 'nosuch' is not defined", "odbcinst -q -s"},
        {"dsn = {my dsn};UID=u;PWD=secret;", "IM002", 0, "[unixODBC][Driver Manager]Data source name not found and no default driver specified",
         OBX_ERR_DB, "DSN 'my dsn' is not defined", "odbcinst -j"},
        {"garbage", "IM002", 0, "[unixODBC][Driver Manager]Data source name not found and no default driver specified",
         OBX_ERR_DB, "names neither DSN= nor Driver=", "KEY=value;"},
        {"Driver={NoSuch};Database=x;", "01000", 0, "[unixODBC][Driver Manager]Can't open lib 'NoSuch' : file not found",
         OBX_ERR_DB, "driver 'NoSuch' could not be loaded", "odbcinst -q -d"},
        {"DSN=old;", "01000", 0, "[unixODBC][Driver Manager]Can't open lib '/gone/libx.so' : file not found",
         OBX_ERR_DB, "the driver of DSN 'old' could not be loaded", "odbcinst -q -d"},
        {"Driver={PostgreSQL Unicode};Database=nosuchdb;", "08001", 101,
         "connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  database \"nosuchdb\" does not exist",
         OBX_ERR_DB, "the server refused the database or the login", "does not exist"},
        {"Driver={PostgreSQL Unicode};Uid=x;", "08001", 101,
         "connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  password authentication failed for user \"x\"",
         OBX_ERR_DB, "the server refused the database or the login", "password authentication failed"},
        {"Driver={PostgreSQL Unicode};Uid=x;", "08001", 101,
         "connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  role \"x\" does not exist",
         OBX_ERR_DB, "the server refused the database or the login", "role"},
        {"Driver={PostgreSQL Unicode};", "08001", 101,
         "connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  the database system is starting up",
         OBX_ERR_DB_TRANSIENT, "starting up", NULL},
        {"Driver={PostgreSQL Unicode};", "08001", 101,
         "connection to server at \"127.0.0.1\", port 5432 failed: Connection refused",
         OBX_ERR_DB_TRANSIENT, "Connection refused", NULL},
        {"Driver={MariaDB Unicode};Database=nosuchdb;", "42000", 1049, "[ma-3.1.15]Unknown database 'nosuchdb'",
         OBX_ERR_DB, "the server refused the database or the login", "Unknown database"},
        {"Driver={MariaDB Unicode};Pwd=wrong;", "28000", 1045, "[ma-3.1.15]Access denied for user 'obx'@'127.0.0.1' (using password: YES)",
         OBX_ERR_DB, "the server refused the database or the login", "Access denied"},
        {"Driver={SQLite3};Database=/no-such-dir/x.db;", "HY000", 14, "[SQLite]connect failed",
         OBX_ERR_DB, "cannot open the SQLite file '/no-such-dir/x.db'", "directory"},
    };
    size_t i;
#ifdef OBX_TERSE_MESSAGES
    const int terse = 1; /* the sentences that say where to look are left out */
#else
    const int terse = 0;
#endif
#if defined(OBX_NO_POSTGRESQL) && defined(OBX_NO_MARIADB) && defined(OBX_NO_SQLSERVER)
    const int servers = 0; /* SQLite only: a server's refusals are not explained (obx.h, the size budget) */
#else
    const int servers = 1;
#endif
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        obx_store_desc desc;
        obx_store *s = NULL;
        const obx_error *e;
        const char *also = cases[i].also;
        if (!servers && strstr(cases[i].says, "the server refused")) continue;
        if (terse && also && (strstr(also, "odbcinst") || strstr(also, "KEY=") || strcmp(also, "directory") == 0))
            also = NULL;
        fake_reset();
        fake_set_connect_error(cases[i].sqlstate, cases[i].native, cases[i].text);
        memset(&desc, 0, sizeof desc);
        desc.connection_string = cases[i].connstr;
        desc.hooks.logger.log = capture_log;
        TT_EQ_INT(obx_store_open(&desc, &s), cases[i].want);
        e = obx_store_last_error(s);
        if (!strstr(e->message, cases[i].says) || (also && !strstr(e->message, also)))
            printf("    case %lu: %s\n", (unsigned long)i, e->message);
        TT_EXPECT(strstr(e->message, cases[i].says) != NULL);
        TT_EXPECT(!also || strstr(e->message, also) != NULL);
        TT_EXPECT(strstr(e->message, cases[i].text) != NULL || strlen(cases[i].text) > 200); /* the driver's own words */
        TT_EXPECT(strstr(e->message, "secret") == NULL);  /* no password in the text */
        TT_EQ_STR(e->sqlstate, cases[i].sqlstate);
        TT_EXPECT(cases[i].want != OBX_ERR_DB || !e->connection_lost);
        obx_store_close(s);
    }
    TT_EQ_INT(fake_open_handles(), 0);
}

static void test_fake_get_bytes(void) {
    obx_store *s = fake_store("SQLite", NULL);
    static char big[3000];
    const char *cells[3];
    static const char bin[] = {'a', '\0', 'b', '\0', '\xff'};
    const long lens[3] = {-1, 5, -1};
    SQLHSTMT cur = NULL;
    char *out = NULL;
    size_t len = 0;
    int64_t v = 0;
    int is_null = 0;
    TT_ASSERT(s != NULL);
    memset(big, 'x', sizeof big - 1);
    big[1000] = 'M';
    cells[0] = big;
    cells[1] = bin;
    cells[2] = NULL;
    fake_push_rows_len(3, 1, cells, lens);
    TT_EQ_INT(obx__exec(&s->db, 0, "SELECT a, b, c FROM t", NULL, 0, NULL, &cur), OBX_OK);
    TT_EQ_INT(obx__fetch(&s->db, cur), OBX_OK);
    TT_EQ_INT(read_column(&s->db, cur, 1, SQL_C_CHAR, &out, &len), OBX_OK);
    TT_EQ_INT(len, sizeof big - 1);
    TT_EXPECT(memcmp(out, big, len) == 0 && out[len] == '\0');
    obx__free(&s->hooks, out);
    TT_EQ_INT(read_column(&s->db, cur, 2, SQL_C_BINARY, &out, &len), OBX_OK);
    TT_EQ_INT(len, 5);
    TT_EXPECT(memcmp(out, bin, 5) == 0);
    obx__free(&s->hooks, out);
    out = (char *)&len;
    TT_EQ_INT(read_column(&s->db, cur, 3, SQL_C_CHAR, &out, &len), OBX_OK);
    TT_EXPECT(out == NULL);
    TT_EQ_INT(obx__fetch(&s->db, cur), OBX_EMPTY);
    obx__close(cur);
    cells[0] = "-9007199254740993";
    cells[1] = NULL;
    fake_push_rows(2, 1, cells);
    TT_EQ_INT(obx__exec(&s->db, 0, "SELECT a, b FROM t", NULL, 0, NULL, &cur), OBX_OK);
    TT_EQ_INT(obx__fetch(&s->db, cur), OBX_OK);
    TT_EQ_INT(obx__get_i64(&s->db, cur, 1, &v, &is_null), OBX_OK);
    TT_EXPECT(v == -9007199254740993LL && !is_null);
    TT_EQ_INT(obx__get_i64(&s->db, cur, 2, &v, &is_null), OBX_OK);
    TT_EXPECT(is_null);
    obx__close(cur);
    obx_store_close(s);
}

static void test_fake_bind_log(void) {
    obx_store *s = fake_store("SQLite", NULL);
    obx__param p[4];
    fake_param fp;
    static const unsigned char blob[3] = {0, 1, 255};
    TT_ASSERT(s != NULL);
    obx__p_text(&p[0], "topic.a", (size_t)-1);
    obx__p_i64(&p[1], INT64_MIN);
    obx__p_blob(&p[2], blob, 3);
    obx__p_text(&p[3], NULL, 0);
    TT_EQ_INT(obx__exec(&s->db, 0, "INSERT INTO t VALUES (?, ?, ?, ?)", p, 4, NULL, NULL), OBX_OK);
    TT_EQ_STR(fake_log_param_text(0, 0, 1), "topic.a");
    TT_EQ_STR(fake_log_param_text(0, 0, 2), "-9223372036854775808");
    fp = fake_log_param(0, 0, 3);
    TT_EQ_INT(fp.len, 3);
    TT_EXPECT(fp.c_type == SQL_C_BINARY && memcmp(fp.data, blob, 3) == 0);
    TT_EXPECT(fake_log_param(0, 0, 4).is_null);
    /* Prepared once, executed many times. */
    TT_EQ_INT(obx__exec(&s->db, 0, "INSERT INTO t VALUES (?, ?, ?, ?)", p, 4, NULL, NULL), OBX_OK);
    TT_EQ_INT(fake_calls("SQLPrepare"), 1);
    obx_store_close(s);
}

/* An allocator that fails after a budget of allocations. */
static int g_alloc_budget, g_alloc_live;
static void *budget_alloc(size_t n, void *u) { (void)u; if (g_alloc_budget-- <= 0) return NULL; g_alloc_live++; return malloc(n); }
static void *budget_realloc(void *p, size_t n, void *u) { (void)u; return realloc(p, n); }
static void budget_free(void *p, void *u) { (void)u; g_alloc_live--; free(p); }

static void test_fake_out_of_memory(void) {
    int budget, saw_oom = 0, saw_ok = 0;
    for (budget = 0; budget < 200 && !saw_ok; budget++) {
        obx_store_desc desc;
        obx_store *s = NULL;
        obx_result r;
        fake_reset();
        memset(&desc, 0, sizeof desc);
        desc.connection_string = "Driver=fake;";
        desc.hooks.allocator.alloc = budget_alloc;
        desc.hooks.allocator.realloc = budget_realloc;
        desc.hooks.allocator.free = budget_free;
        desc.hooks.logger.log = capture_log;
        g_alloc_budget = budget;
        g_alloc_live = 0;
        r = obx_store_open(&desc, &s);
        TT_ASSERT(r == OBX_OK || r == OBX_ERR_NO_MEMORY);
        if (r == OBX_ERR_NO_MEMORY) saw_oom = 1; else saw_ok = 1;
        obx_store_close(s);
        TT_EQ_INT(g_alloc_live, 0); /* nothing leaked on any path */
        TT_EQ_INT(fake_open_handles(), 0);
    }
    TT_EXPECT(saw_oom && saw_ok);
}

static void test_fake_logger(void) {
    obx_store *s;
    g_log_lines = 0;
    s = fake_store("SQLite", NULL);
    TT_ASSERT(s != NULL);
    TT_EXPECT(g_log_lines > 0);
    TT_EQ_STR(g_last_log_store, "fake-store"); /* every line names its store */
    s->hooks.log.min_level = OBX_LOG_ERROR;
    g_log_lines = 0;
    obx__log(&s->hooks, OBX_LOG_WARN, "x", "%s", "filtered");
    TT_EQ_INT(g_log_lines, 0);
    obx__log(&s->hooks, OBX_LOG_ERROR, "x", "kept %d", 1);
    TT_EQ_INT(g_log_lines, 1);
    TT_EQ_STR(g_last_log, "kept 1");
    obx_store_close(s);
}

/* key=value fields: plain values as they are, others quoted and escaped so a
 * parser finds the end of each field. */
static void test_log_kv(void) {
    static const struct { const char *in, *out; } cases[] = {
        {"orders.created", "orders.created"}, {"a/b:c@d+e-f_g", "a/b:c@d+e-f_g"},
        {"caf\xc3\xa9", "caf\xc3\xa9"}, {"", "\"\""}, {"bad\"topic\\x", "\"bad\\\"topic\\\\x\""},
        {"two words", "\"two words\""}, {"k=v", "\"k=v\""}, {"line\nbreak\t\x01", "\"line\\nbreak\\t\\x01\""}};
    char out[OBX__KV_CAP], big[400];
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) TT_EQ_STR(obx__kv(out, cases[i].in), cases[i].out);
    TT_EQ_STR(obx__kv(out, NULL), "\"\"");
    memset(big, '"', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    obx__kv(out, big);
    TT_EXPECT(strlen(out) < OBX__KV_CAP && out[0] == '"');
    TT_EXPECT(strcmp(out + strlen(out) - 3, "..\"") == 0);
}

/* The default logger's line: UTC time with milliseconds, process id, level,
 * store, text; the level OBX_LOG_LEVEL / IBX_LOG_LEVEL names when the program
 * sets none. stderr is sent to a file for the test. */
static void test_default_log_format(void) {
    static const struct { int64_t ms; const char *text; } dates[] = {
        {0, "1970-01-01T00:00:00.000Z"}, {951782400000LL, "2000-02-29T00:00:00.000Z"},
        {1798761599999LL, "2026-12-31T23:59:59.999Z"}, {-1, "1969-12-31T23:59:59.999Z"},
        {253402300799999LL, "9999-12-31T23:59:59.999Z"}, {1709251199000LL, "2024-02-29T23:59:59.000Z"}};
    char when[32], line[512], want[64];
    obx__hooks h;
    obx_hooks given;
    FILE *f;
    int saved, i;
    for (i = 0; i < (int)(sizeof dates / sizeof dates[0]); i++) {
        obx__utc_text(dates[i].ms, when);
        TT_EQ_STR(when, dates[i].text);
    }
    fflush(stderr);
    saved = sys_dup(2);
    TT_ASSERT(saved >= 0 && (f = tmpfile()) != NULL);
    sys_dup2(fileno(f), 2);
    sys_unsetenv("OBX_LOG_LEVEL");
    memset(&h, 0, sizeof h);
    TT_EQ_INT(obx__hooks_resolve(&h, NULL), OBX_OK);
    TT_EQ_INT(h.log.min_level, OBX_LOG_INFO);
    obx__log(&h, OBX_LOG_WARN, "st\"ore", "lease of %d message(s) lost", 2);
    obx__log(&h, OBX_LOG_DEBUG, "st", "not shown at INFO");
    sys_setenv("OBX_LOG_LEVEL", "Debug");
    TT_EQ_INT(obx__hooks_resolve(&h, NULL), OBX_OK);
    TT_EQ_INT(h.log.min_level, OBX_LOG_DEBUG);
    obx__log(&h, OBX_LOG_DEBUG, "st", "shown at DEBUG");
    memset(&given, 0, sizeof given);
    given.logger.min_level = OBX_LOG_ERROR; /* the program's own choice stands */
    TT_EQ_INT(obx__hooks_resolve(&h, &given), OBX_OK);
    TT_EQ_INT(h.log.min_level, OBX_LOG_ERROR);
    sys_setenv("OBX_LOG_LEVEL", "loud");
    TT_EQ_INT(obx__hooks_resolve(&h, NULL), OBX_OK);
    TT_EQ_INT(h.log.min_level, OBX_LOG_INFO);
    TT_EQ_INT(h.env_level_bad, 1);
    {   /* a store open names the bad value once */
        obx_store_desc desc;
        obx_store *st = NULL;
        memset(&desc, 0, sizeof desc);
        desc.connection_string = "Driver=fake;";
        desc.store_id = "envtest";
        fake_reset();
        fake_set_dbms_name("SQLite");
        if (obx_store_open(&desc, &st) == OBX_OK) obx_store_close(st);
    }
    sys_setenv("IBX_LOG_LEVEL", "off");
    {
        ibx__hooks ih;
        memset(&ih, 0, sizeof ih);
        TT_EQ_INT(ibx__hooks_resolve(&ih, NULL), IBX_OK);
        TT_EQ_INT(ih.log.min_level, IBX_LOG_OFF);
    }
    sys_unsetenv("OBX_LOG_LEVEL");
    sys_unsetenv("IBX_LOG_LEVEL");
    fflush(stderr);
    sys_dup2(saved, 2);
    sys_close(saved);
    rewind(f);
    snprintf(want, sizeof want, " obx[%ld] WARN  [st\"ore] lease of 2 message(s) lost\n", sys_getpid());
    TT_ASSERT(fgets(line, sizeof line, f) != NULL);
    /* 2026-11-27T10:47:19.123Z, then the rest */
    TT_EXPECT(strlen(line) > 24 && line[4] == '-' && line[10] == 'T' && line[19] == '.' && line[23] == 'Z');
    TT_EQ_STR(line + 24, want);
    TT_ASSERT(fgets(line, sizeof line, f) != NULL);
    TT_EXPECT(strstr(line, "] DEBUG [st] shown at DEBUG\n") != NULL);
    TT_ASSERT(fgets(line, sizeof line, f) != NULL); /* the unknown level is named, once */
    TT_EXPECT(strstr(line, "WARN  [envtest] OBX_LOG_LEVEL is not one of debug, info, warn, error, off") != NULL);
    while (fgets(line, sizeof line, f)) TT_EXPECT(strstr(line, "OBX_LOG_LEVEL") == NULL);
    fclose(f);
}

/* ---- outbox operations against the fake: error paths ------------------------------------- */

static const char *const k_owner = "0192abcd-ef01-7000-8000-000000000001";
static const char *const k_id = "0192abcd-ef01-7000-8000-0000000000aa";

static void test_fake_ack_deadlock_retried(void) {
    obx_store *s = fake_store("PostgreSQL", NULL);
    const char *ids[1];
    const char *two[1] = {"2"};
    int64_t changed = 0;
    int first;
    TT_ASSERT(s != NULL);
    ids[0] = k_id;
    fake_push_error(SQL_ERROR, "40P01", 1, "deadlock detected");
    fake_push_rows(1, 1, two);
    TT_EQ_INT(obx_ack(s, k_owner, ids, 1, &changed), OBX_OK);
    TT_EQ_INT(changed, 2);
    first = fake_log_find("SET \"Status\" = 2", 0);
    TT_ASSERT(first >= 0);
    TT_EQ_STR(fake_log_sql(first + 1), "<ROLLBACK>");
    TT_EQ_STR(fake_log_sql(first + 2), fake_log_sql(first));
    /* One statement, one round trip: it ran in autocommit, no COMMIT after. */
    TT_EQ_INT(fake_log_autocommit(first), 1);
    TT_EQ_INT(fake_log_autocommit(first + 2), 1);
    TT_EQ_INT(fake_log_count(), first + 3);
    TT_EQ_INT(fake_commits(), 0);
    /* The id list travels as one array parameter: one statement per batch. */
    TT_EQ_STR(fake_log_param_text(first, 0, 3), "{\"0192abcd-ef01-7000-8000-0000000000aa\"}");
    obx_store_close(s);
}

static void test_fake_claim_lost_connection(void) {
    obx_store *s = fake_store("PostgreSQL", NULL);
    const obx_message *ms = NULL;
    int n = 77;
    /* A claim's short row: ids, times and counts, the mask of optional texts, topic, payload. */
    const char *row[19] = {"0192ABCD-EF01-7000-8000-0000000000AA", "0192abcd-ef01-7000-8000-0000000000bb",
                           "1", NULL, "0", "2", "3", "1", NULL, "0", "t", "p", NULL,
                           NULL, NULL, NULL, NULL, NULL, NULL};
    const char *rows2[38];
    const char *version[1] = {"15.18"};
    int i;
    TT_ASSERT(s != NULL);
    /* The connection dies while the claim executes. */
    fake_kill_connection_after(3);
    TT_EQ_INT(obx_claim(s, k_owner, 30, 10, &ms, &n), OBX_ERR_DB_TRANSIENT);
    TT_EQ_INT(obx_store_last_error(s)->connection_lost, 1);
    TT_EXPECT(ms == NULL && n == 77); /* outputs untouched on error */
    TT_EQ_INT(fake_calls("SQLExecute") <= 1, 1); /* not retried */
    TT_EQ_INT(fake_commits(), 0);
    /* The next call reconnects, sets the session up again, then claims. */
    fake_reset();
    fake_set_dbms_name("PostgreSQL");
    for (i = 0; i < 38; i++) rows2[i] = row[i % 19];
    fake_push_ok(0);                /* SET TIME ZONE */
    fake_push_rows(1, 1, version);  /* SHOW server_version */
    fake_push_rows(19, 2, rows2);
    TT_EQ_INT(obx_claim(s, k_owner, 30, 10, &ms, &n), OBX_OK);
    TT_EQ_INT(n, 2);
    TT_EQ_STR(ms[0].id, "0192abcd-ef01-7000-8000-0000000000aa"); /* psqlODBC's upper case folded */
    TT_EQ_INT(fake_calls("SQLDriverConnect"), 1);
    obx_store_close(s);
}

static void test_fake_claim_timeout(void) {
    obx_store *s = fake_store("PostgreSQL", NULL);
    const obx_message *ms = NULL;
    int n = 0;
    TT_ASSERT(s != NULL);
    fake_push_error(SQL_ERROR, "57014", 1, "canceling statement due to statement timeout");
    TT_EQ_INT(obx_claim(s, k_owner, 30, 10, &ms, &n), OBX_ERR_DB_TRANSIENT);
    TT_EQ_STR(obx_store_last_error(s)->sqlstate, "57014");
    TT_EQ_INT(obx_store_last_error(s)->connection_lost, 0);
    TT_EQ_INT(fake_calls("SQLExecute"), 1); /* a timeout is reported, not redone at once */
    TT_EQ_INT(fake_rollbacks(), 1);
    TT_EQ_INT(g_sleeps, 0);
    obx_store_close(s);
}

static void test_fake_one_round_trip(void) {
    obx_store *s = fake_store("PostgreSQL", NULL);
    const obx_message *ms;
    int n;
    TT_ASSERT(s != NULL);
    /* A claim is one statement, prepared once, in a transaction of its own
     * (reading its rows may fail, and then it must not have happened). */
    TT_EQ_INT(obx_claim(s, k_owner, 30, 10, &ms, &n), OBX_EMPTY);
    TT_EQ_INT(obx_claim(s, k_owner, 30, 10, &ms, &n), OBX_EMPTY);
    TT_EQ_INT(fake_calls("SQLExecute"), 2);
    TT_EQ_INT(fake_calls("SQLPrepare"), 1);
    TT_EQ_INT(fake_commits(), 2);
    TT_EQ_INT(fake_log_autocommit(0), 0);
    TT_ASSERT(strstr(fake_log_sql(0), "= ANY (ARRAY(SELECT c.\"Id\"") != NULL);
    /* and takes the advisory lock of each keyed row's key (see OBX__PG_KEY_LOCK) */
    TT_ASSERT(strstr(fake_log_sql(0), "FOR UPDATE OF c SKIP LOCKED)) AND (\"OrderingKey\" IS NULL OR "
                                      "pg_try_advisory_xact_lock(") != NULL);
    {
        SQLUINTEGER mode = 99;
        TT_ASSERT(SQL_SUCCEEDED(SQLGetConnectAttr(s->db.dbc, SQL_ATTR_AUTOCOMMIT, &mode, 0, NULL)));
        TT_EQ_INT((int)mode, SQL_AUTOCOMMIT_OFF);
    }
    /* A unit of several statements (a batch enqueue past one chunk of
     * 1,000 rows) is one transaction in manual commit. */
    {
        static obx_new_message batch[1001];
        int i, first;
        for (i = 0; i < 1001; i++) {
            batch[i].topic = "t";
            batch[i].payload = "p";
            batch[i].payload_len = OBX_NTS;
        }
        fake_reset();
        fake_set_dbms_name("PostgreSQL");
        TT_EQ_INT(obx_enqueue_batch(s, NULL, batch, 1001, NULL), OBX_OK);
        first = fake_log_find("INSERT INTO", 0);
        TT_ASSERT(first >= 0);
        TT_EQ_INT(fake_log_autocommit(first), 0);
        TT_EQ_INT(fake_log_autocommit(first + 1), 0);
        TT_EQ_STR(fake_log_sql(first + 2), "<COMMIT>");
        TT_EQ_INT(fake_commits(), 1);
        /* One message: one statement, autocommit. */
        TT_EQ_INT(obx_enqueue(s, &batch[0], NULL), OBX_OK);
        first = fake_log_find("INSERT INTO", first + 3);
        TT_ASSERT(first >= 0);
        TT_EQ_INT(fake_log_autocommit(first), 1);
        TT_EQ_INT(fake_commits(), 1);
    }
    obx_store_close(s);
}

/* MariaDB: our own connections rest in autocommit (switching costs the
 * driver a round trip), so a one-statement step is one round trip and a
 * claim is START TRANSACTION, its three statements and COMMIT; with a
 * statement timeout every step is a transaction again (CORE-ROUND-TRIPS). */
static void test_fake_mariadb_round_trips(void) {
    obx_store *s = fake_store("MariaDB", NULL);
    obx_new_message m;
    const obx_message *ms;
    int n, i, first;
    TT_ASSERT(s != NULL);
    memset(&m, 0, sizeof m);
    m.topic = "t";
    m.payload = "p";
    m.payload_len = OBX_NTS;
    TT_EQ_INT(obx_enqueue(s, &m, NULL), OBX_OK);
    TT_EQ_INT(fake_log_count(), 1);
    TT_ASSERT(strstr(fake_log_sql(0), "INSERT INTO") != NULL);
    TT_EQ_INT(fake_log_autocommit(0), 1);
    TT_EQ_INT(obx_claim(s, k_owner, 30, 10, &ms, &n), OBX_EMPTY);
    TT_EQ_STR(fake_log_sql(1), "START TRANSACTION");
    TT_EQ_STR(fake_log_sql(fake_log_count() - 1), "COMMIT");
    for (i = 1; i < fake_log_count(); i++) TT_EQ_INT(fake_log_autocommit(i), 1);
    TT_EQ_INT(fake_commits(), 0); /* no SQLEndTran: the unit ends in SQL */
    obx_store_close(s);
    s = fake_store("MariaDB", "Driver=fake;");
    TT_ASSERT(s != NULL);
    s->db.statement_timeout_s = 1; /* as set by the desc; takes effect at the next connect */
    s->db.lost = 1;
    fake_reset();
    fake_set_dbms_name("MariaDB");
    TT_EQ_INT(obx_enqueue(s, &m, NULL), OBX_OK);
    first = fake_log_find("INSERT INTO", 0);
    TT_ASSERT(first >= 0);
    TT_EQ_INT(fake_log_autocommit(first), 0);
    TT_EQ_STR(fake_log_sql(first + 1), "<COMMIT>");
    obx_store_close(s);
}

/* MariaDB: a batch without ordering keys is one multi-row VALUES, 7
 * parameters a row (12 with the envelope), prepared once per row count;
 * a batch with a key reads its keys' maxima, then is a multi-row VALUES
 * with each row's OrderingSeq and park; a batch past 1 MiB of values is
 * split, in one transaction (OBX-MY-BATCH-VALUES). */
static void test_fake_mariadb_batch_values(void) {
    obx_store *s = fake_store("MariaDB", NULL);
    static char big[300 * 1024];
    obx_new_message m[4];
    obx_header h = {"trace", "t-1"};
    int i, at;
    TT_ASSERT(s != NULL);
    for (i = 0; i < 4; i++) {
        memset(&m[i], 0, sizeof m[i]);
        m[i].topic = i == 1 ? "second" : "t";
        m[i].payload = "p";
        m[i].payload_len = OBX_NTS;
    }
    m[2].due_utc_ms = 1700000000000;
    TT_EQ_INT(obx_enqueue_batch(s, NULL, m, 3, NULL), OBX_OK);
    TT_EQ_INT(fake_log_count(), 1);
    TT_EXPECT(strstr(fake_log_sql(0), "JSON_TABLE") == NULL);
    TT_EXPECT(strstr(fake_log_sql(0), ") VALUES (?, ?, ?, ?, ?, ") != NULL);
    TT_EXPECT(strstr(fake_log_sql(0), ")), (?, ?, ?, ?, ?, ") != NULL);
    TT_EQ_INT(fake_log_param_count(0), 21);
    TT_EQ_STR(fake_log_param_text(0, 0, 10), "second"); /* row 2's topic (markers count from 1) */
    TT_EQ_STR(fake_log_param_text(0, 0, 20), "1700000000000"); /* row 3's due */
    TT_EQ_INT(fake_log_autocommit(0), 1); /* one statement: autocommit */
    /* Run once (SQLExecDirect: prepare and execute in one round trip);
     * the same row count again is prepared and kept; another runs once. */
    TT_EQ_INT(fake_calls("SQLExecDirect"), 1);
    TT_EQ_INT(fake_calls("SQLPrepare"), 0);
    TT_EQ_INT(obx_enqueue_batch(s, NULL, m, 3, NULL), OBX_OK);
    TT_EQ_INT(obx_enqueue_batch(s, NULL, m, 3, NULL), OBX_OK);
    TT_EQ_INT(fake_calls("SQLPrepare"), 1);
    TT_EQ_INT(fake_calls("SQLExecute"), 2);
    TT_EQ_INT(obx_enqueue_batch(s, NULL, m, 2, NULL), OBX_OK);
    TT_EQ_INT(fake_calls("SQLPrepare"), 1);
    TT_EQ_INT(fake_log_param_count(3), 14);
    TT_EQ_INT(obx_enqueue_batch(s, NULL, m, 3, NULL), OBX_OK); /* the kept one */
    TT_EQ_INT(fake_calls("SQLExecute"), 3);
    /* The envelope, the expiry and the priority: 13 a row. */
    m[1].tenant_id = "acme";
    m[1].headers = &h;
    m[1].header_count = 1;
    m[2].expires_utc_ms = 1800000000000;
    m[2].priority = -3;
    fake_reset();
    TT_EQ_INT(obx_enqueue_batch(s, NULL, m, 3, NULL), OBX_OK);
    TT_EXPECT(strstr(fake_log_sql(0), "JSON_TABLE") == NULL);
    TT_EXPECT(strstr(fake_log_sql(0), "`TenantId`") != NULL);
    TT_EQ_INT(fake_log_param_count(0), 39);
    TT_EQ_STR(fake_log_param_text(0, 0, 21), "acme");
    TT_EQ_STR(fake_log_param_text(0, 0, 24), "{\"trace\":\"t-1\"}");
    TT_EQ_STR(fake_log_param_text(0, 0, 38), "1800000000000");
    TT_EQ_STR(fake_log_param_text(0, 0, 39), "-3");
    TT_EQ_STR(fake_log_param_text(0, 0, 26), "0");
    m[2].priority = 0;
    TT_EQ_INT(fake_log_param(0, 0, 11).is_null, 1); /* row 1 has no headers */
    /* Ordering keys: the keys' maxima (Ready 4, in flight none, Dead 7),
     * then the rows with their seq (7 + place) and park (parked: Ready). */
    m[0].ordering_key = "k";
    m[2].ordering_key = "k";
    fake_reset();
    {
        static const char *const maxima[4] = {"4", "0", "7", "READ-COMMITTED"};
        fake_push_rows(4, 1, maxima);
    }
    TT_EQ_INT(obx_enqueue_batch(s, NULL, m, 3, NULL), OBX_OK);
    TT_EQ_INT(fake_log_count(), 2);
    TT_EXPECT(strstr(fake_log_sql(0), "DESC LIMIT 1") != NULL);
    TT_EQ_STR(fake_log_param_text(0, 0, 1), "[\"k\"]"); /* each key once */
    TT_EXPECT(strstr(fake_log_sql(1), "JSON_TABLE") == NULL);
    TT_EQ_INT(fake_log_param_count(1), 45); /* 15 a row: the envelope */
    TT_EQ_STR(fake_log_param_text(1, 0, 7), "253402300799999999"); /* parked, in us */
    TT_EQ_STR(fake_log_param_text(1, 0, 8), "k");
    TT_EQ_STR(fake_log_param_text(1, 0, 9), "8");
    TT_EQ_INT(fake_log_param(1, 0, 22).is_null, 1); /* row 2: now, no key, no seq */
    TT_EQ_INT(fake_log_param(1, 0, 23).is_null, 1);
    TT_EQ_INT(fake_log_param(1, 0, 24).is_null, 1);
    TT_EQ_STR(fake_log_param_text(1, 0, 37), "253402300799999999");
    TT_EQ_STR(fake_log_param_text(1, 0, 39), "10");
    m[2].ordering_key = NULL;
    /* Four payloads of 300 KiB: two statements of at most 1 MiB, one transaction. */
    memset(big, 'x', sizeof big - 1);
    for (i = 0; i < 4; i++) {
        memset(&m[i], 0, sizeof m[i]);
        m[i].topic = "t";
        m[i].payload = big;
        m[i].payload_len = OBX_NTS;
    }
    fake_reset();
    TT_EQ_INT(obx_enqueue_batch(s, NULL, m, 4, NULL), OBX_OK);
    TT_EQ_STR(fake_log_sql(0), "START TRANSACTION");
    at = fake_log_find("INSERT INTO", 0);
    TT_EQ_INT(fake_log_param_count(at), 21);
    at = fake_log_find("INSERT INTO", at + 1);
    TT_EQ_INT(fake_log_param_count(at), 7);
    TT_EQ_STR(fake_log_sql(fake_log_count() - 1), "COMMIT");
    obx_store_close(s);
}

static void test_fake_connection_string_kept(void) {
    obx_store_desc desc;
    obx_store *t = NULL;
    fake_reset();
    fake_set_dbms_name("PostgreSQL");
    memset(&desc, 0, sizeof desc);
    desc.connection_string = "Driver=fake;SSLmode=require;sslrootcert=/etc/ca.pem;";
    desc.hooks.logger.log = capture_log;
    TT_EQ_INT(obx_store_open(&desc, &t), OBX_OK);
    /* Encryption settings reach the driver untouched (only Protocol is added). */
    TT_EQ_STR(fake_last_connstr(), "Driver=fake;SSLmode=require;sslrootcert=/etc/ca.pem;Protocol=7.4-1;");
    obx_store_close(t);
}

static void test_fake_enqueue_batch_one_tx(void) {
    obx_store *s = fake_store("PostgreSQL", NULL);
    obx_new_message m[3];
    char ids[3][37];
    int i;
    TT_ASSERT(s != NULL);
    for (i = 0; i < 3; i++) {
        memset(&m[i], 0, sizeof m[i]);
        m[i].topic = "t";
        m[i].payload = "p";
        m[i].payload_len = OBX_NTS;
    }
    /* PostgreSQL: the whole batch is one INSERT ... unnest(arrays). */
    fake_push_error(SQL_ERROR, "23505", 1, "duplicate key");
    TT_EQ_INT(obx_enqueue_batch(s, NULL, m, 3, ids), OBX_ERR_DB);
    TT_EQ_INT(fake_calls("SQLExecute"), 1);
    TT_EQ_INT(fake_commits(), 0);
    TT_EQ_INT(fake_rollbacks(), 1);
    TT_ASSERT(strstr(fake_log_sql(0), "unnest(") != NULL);
    TT_EQ_STR(fake_log_param_text(0, 0, 3), "{\"t\",\"t\",\"t\"}");
    TT_EQ_STR(fake_log_param_text(0, 0, 5), "{NULL,NULL,NULL}");
    /* Bad input anywhere in the batch: rejected before any SQL. */
    fake_reset();
    m[1].topic = "";
    TT_EQ_INT(obx_enqueue_batch(s, NULL, m, 3, ids), OBX_ERR_INVALID_ARG);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_enqueue_batch: messages[1].topic");
    TT_EQ_INT(fake_call_count(), 0);
    obx_store_close(s);
}

/* Out-parameters are written only on success: a batch (or a single
 * enqueue) that fails leaves the caller's id buffers as they were
 * (OBX-ENQUEUE-OUT-IDS). */
static void test_fake_enqueue_out_ids(void) {
    obx_store *s = fake_store("PostgreSQL", NULL);
    obx_new_message m[3];
    char ids[3][37], one[37];
    int i;
    TT_ASSERT(s != NULL);
    for (i = 0; i < 3; i++) {
        memset(&m[i], 0, sizeof m[i]);
        m[i].topic = "t";
        m[i].payload = "p";
        m[i].payload_len = OBX_NTS;
    }
    memset(ids, 'x', sizeof ids);
    ids[0][36] = ids[1][36] = ids[2][36] = '\0';
    fake_push_error(SQL_ERROR, "23505", 1, "duplicate key");
    TT_EQ_INT(obx_enqueue_batch(s, NULL, m, 3, ids), OBX_ERR_DB);
    for (i = 0; i < 3; i++) TT_EQ_INT(strspn(ids[i], "x"), 36);
    snprintf(one, sizeof one, "untouched");
    fake_push_error(SQL_ERROR, "23505", 1, "duplicate key");
    TT_EQ_INT(obx_enqueue(s, &m[0], one), OBX_ERR_DB);
    TT_EQ_STR(one, "untouched");
    /* And on success every id is written. */
    fake_push_ok(3);
    TT_EQ_INT(obx_enqueue_batch(s, NULL, m, 3, ids), OBX_OK);
    for (i = 0; i < 3; i++) TT_EQ_INT(obx_uuid_is_valid(ids[i]), 1);
    obx_store_close(s);
}

/* A picked key that is NULL (the pick of a three-statement claim, MariaDB)
 * travels as an element that matches no row: never the bytes of an earlier
 * row or of an uninitialised buffer (CORE-PICK-NULL-KEY). */
static void test_fake_pick_null_key(void) {
    obx_store *s = fake_store("MariaDB", NULL);
    const obx_message *ms;
    static const char *const picked[2 * 19] = {
        "0192abcd-ef01-7000-8000-0000000000aa", "0192abcd-ef01-7000-8000-0000000000bb", "1000", NULL, "0", "5000",
        "900", "0", NULL, "1024", "t", "p", NULL, NULL, NULL, NULL, NULL, NULL, NULL,
        NULL, "0192abcd-ef01-7000-8000-0000000000cc", "1000", NULL, "0", "5000",
        "900", "0", NULL, "1024", "t", "p", NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    char owner[37];
    int n = -1, at;
    TT_ASSERT(s != NULL);
    obx_owner_token(s, owner);
    fake_push_ok(0); /* START TRANSACTION */
    fake_push_rows(19, 2, picked);
    fake_push_ok(1);
    fake_push_rows(19, 0, NULL);
    (void)obx_claim(s, owner, 30, 10, &ms, &n);
    at = fake_log_find("`Status` = 1, `OwnerToken` =", 0);
    TT_ASSERT(at > 0);
    /* The short row's id is cleared before it is read: a NULL leaves NULs, which match no row. */
    TT_EXPECT(strncmp(fake_log_param_text(at, 0, 1), "[\"0192abcd-ef01-7000-8000-0000000000aa\",\"\\u0000", 47) == 0);
    TT_EXPECT(strstr(fake_log_param_text(at, 0, 1) + 40, "0192") == NULL); /* past the first */
    obx_store_close(s);
}

/* psqlODBC takes a VARCHAR(5) parameter for a boolean (BoolsAsChar) and
 * describes the statement in a round trip of its own, which PgBouncer's
 * transaction pooling sends to another server: no text is bound as one. */
static void test_fake_no_bool_sized_text(void) {
    obx_store *s = fake_store("PostgreSQL", NULL);
    obx_new_message m;
    const char *id = "0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b";
    char out[37];
    int i, k, seen = 0;
    TT_ASSERT(s != NULL);
    memset(&m, 0, sizeof m);
    m.topic = "abcde";
    m.payload = "12345";
    m.payload_len = OBX_NTS;
    fake_push_ok(1);
    TT_EQ_INT(obx_enqueue(s, &m, out), OBX_OK);
    fake_push_ok(1);
    TT_EQ_INT(obx_abandon(s, id, &id, 1, "flaky", 0, NULL), OBX_OK);
    for (i = 0; i < fake_log_count(); i++)
        for (k = 1; k <= fake_log_param_count(i); k++) {
            fake_param p = fake_log_param(i, 0, k);
            if (p.c_type == SQL_C_CHAR && p.len == 5) seen++;
            TT_ASSERT(!(p.sql_type == SQL_VARCHAR && p.column_size == 5));
        }
    TT_ASSERT(seen >= 2); /* the topic and the error were bound */
    obx_store_close(s);
}

/* ---- SHA-256 and HMAC (ibx.h) ------------------------------------------------------------- */

static void hex32(const unsigned char *d, char out[65]) {
    static const char hx[] = "0123456789abcdef";
    int i;
    for (i = 0; i < 32; i++) {
        out[2 * i] = hx[d[i] >> 4];
        out[2 * i + 1] = hx[d[i] & 15];
    }
    out[64] = '\0';
}

/* The join.wait payload reader: what other serializers write, and text
 * that ends anywhere (the fuzzer found reads past the end here). */
static void test_join_payload_reader(void) {
    static const struct { const char *json; int want; const char *value; } cases[] = {
        {"{\"k\":\"plain\"}", 1, "plain"},
        {"{\"k\": \"spaced\"}", 1, "spaced"},
        {"{\"k\":\"q\\\"b\\\\s\\/n\\nt\\tr\\rb\\bf\\f\"}", 1, "q\"b\\s/n\nt\tr\rb\bf\f"},
        {"{\"k\":\"\\u0001\\u00e9\\u20AC\"}", 1, "\x01\xc3\xa9\xe2\x82\xac"},
        {"{\"k\":\"\\ud83d\\ude00\"}", 1, "\xf0\x9f\x98\x80"},
        {"{\"k\":\"\\u003C\"}", 1, "<"},
        {"{\"k\":true}", 1, "true"},
        {"{\"k\":null}", 0, ""},
        {"{\"other\":\"x\"}", 0, ""},
        {"{\"k\":\"\\", -1, ""},          /* a backslash, then the end */
        {"{\"k\":\"\\u0", -1, ""},        /* a short \u escape */
        {"{\"k\":\"\\u00", -1, ""},
        {"{\"k\":\"\\uzzzz\"}", -1, ""},
        {"{\"k\":\"\\ud83d\"}", -1, ""},  /* a high surrogate alone */
        {"{\"k\":\"\\ude00\"}", -1, ""},  /* a low surrogate alone */
        {"{\"k\":\"\\x\"}", -1, ""},      /* not a JSON escape */
        {"{\"k\":\"open", -1, ""},
        {"{\"k\":5}", -1, ""}};
    size_t i;
    char out[64], tiny[3];
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* A copy of exactly the text's size: ASan sees any read past it. */
        size_t n = strlen(cases[i].json) + 1;
        char *copy = (char *)malloc(n);
        int got;
        TT_ASSERT(copy != NULL);
        memcpy(copy, cases[i].json, n);
        got = obx__json_get(copy, "k", out, sizeof out);
        free(copy);
        if (got != cases[i].want) printf("    case %d: %s\n", (int)i, cases[i].json);
        TT_EQ_INT(got, cases[i].want);
        if (got == 1) TT_EQ_STR(out, cases[i].value);
    }
    TT_EQ_INT(obx__json_get("{\"k\":\"abc\"}", "k", tiny, sizeof tiny), -1); /* too long for out */
    TT_EQ_INT(obx__json_get("{\"k\":\"\\u20ac\"}", "k", tiny, sizeof tiny), -1);
    TT_EQ_INT(obx__json_get("{\"k\":\"ab\"}", "k", tiny, sizeof tiny), 1);
}

static void test_sha256_vectors(void) {
    unsigned char d[32];
    char h[65];
    char *million = (char *)malloc(1000000);
    ibx_sha256(NULL, 0, d);
    hex32(d, h);
    TT_EQ_STR(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    ibx_sha256("abc", 3, d);
    hex32(d, h);
    TT_EQ_STR(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    ibx_sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, d);
    hex32(d, h);
    TT_EQ_STR(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    TT_ASSERT(million != NULL);
    memset(million, 'a', 1000000);
    ibx_sha256(million, 1000000, d);
    free(million);
    hex32(d, h);
    TT_EQ_STR(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_hmac_vectors(void) {
    unsigned char key[131], d[32];
    char h[65];
    static const char *const long_data = "Test Using Larger Than Block-Size Key - Hash Key First";
    memset(key, 0x0b, 20);
    ibx_hmac_sha256(key, 20, "Hi There", 8, d);
    hex32(d, h);
    TT_EQ_STR(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    ibx_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, d);
    hex32(d, h);
    TT_EQ_STR(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    memset(key, 0xaa, 131);
    ibx_hmac_sha256(key, 131, long_data, strlen(long_data), d);
    hex32(d, h);
    TT_EQ_STR(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

/* ---- inbox against the fake ------------------------------------------------------------------------ */

static void ibx_quiet(ibx_log_level level, const char *store_id, const char *msg, void *user) {
    (void)level; (void)store_id; (void)msg; (void)user;
}

/* An inbox on the fake ODBC layer that says it is `dbms`, set-up traffic
 * forgotten, as fake_store opens an outbox; NULL when it cannot open. */
static ibx_store *fake_ibx_store(const char *dbms) {
    ibx_store_desc d;
    ibx_store *s = NULL;
    fake_reset();
    fake_set_dbms_name(dbms);
    memset(&d, 0, sizeof d);
    d.connection_string = "Driver=fake;";
    d.hooks.clock.sleep_ms = fake_sleep;
    d.hooks.logger.log = ibx_quiet;
    if (ibx_store_open(&d, &s) != IBX_OK) {
        ibx_store_close(s);
        return NULL;
    }
    fake_reset();
    fake_set_dbms_name(dbms);
    return s;
}

static void test_ibx_fake_deadlock(void) {
    ibx_store_desc d;
    ibx_store *s = NULL;
    ibx_key k = {"src", "m1"};
    int64_t changed = 0;
    int first;
    fake_reset();
    fake_set_dbms_name("PostgreSQL");
    memset(&d, 0, sizeof d);
    d.connection_string = "Driver=fake;SSLmode=verify-full;";
    d.hooks.clock.sleep_ms = fake_sleep;
    d.hooks.logger.log = ibx_quiet;
    TT_EQ_INT(ibx_store_open(&d, &s), IBX_OK);
    /* IBX-128: encryption settings reach the driver as given. */
    TT_EQ_STR(fake_last_connstr(), "Driver=fake;SSLmode=verify-full;Protocol=7.4-1;");
    fake_reset();
    fake_set_dbms_name("PostgreSQL");
    /* IBX-104: a deadlock on ack is rolled back and the unit redone. */
    fake_push_error(SQL_ERROR, "40P01", 1, "deadlock detected");
    fake_push_ok(1);
    TT_EQ_INT(ibx_ack(s, k_owner, &k, 1, &changed), IBX_OK);
    TT_EQ_INT(changed, 1);
    first = fake_log_find("UPDATE", 0);
    TT_ASSERT(first >= 0);
    TT_EQ_STR(fake_log_sql(first + 1), "<ROLLBACK>");
    TT_EQ_STR(fake_log_sql(first + 2), fake_log_sql(first));
    TT_EQ_INT(fake_log_autocommit(first + 2), 1); /* one statement: autocommit */
    TT_EQ_INT(fake_log_count(), first + 3);
    /* The key lists travel as two array parameters: one statement per batch. */
    TT_EQ_STR(fake_log_param_text(first, 0, 2), "{\"src\"}");
    TT_EQ_STR(fake_log_param_text(first, 0, 3), "{\"m1\"}");
    ibx_store_close(s);
    TT_EQ_INT(fake_open_handles(), 0);
}


/* CORE-CLAIM-PICKED: a claim in three statements (MariaDB) is two when the
 * UPDATE marks every row the pick locked: the pick's short rows are the
 * claim's, Starts + 1 and the lease (the pick's time + lease_seconds)
 * filled in, no read-back. When it marks fewer (row locks per node:
 * Galera), the rows that carry the owner's token are read back and only
 * they are claimed (CORE-CLAIM-PICKED-READBACK). Both headers. */
static const char *const k_picked[2 * 19] = {
    "0192abcd-ef01-7000-8000-0000000000aa", "0192abcd-ef01-7000-8000-0000000000bb", "1000", NULL, "0", "5000",
    "900", "0", NULL, "1024", "t.one", "p1", NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    "0192abcd-ef01-7000-8000-0000000000cc", "0192abcd-ef01-7000-8000-0000000000dd", "2000", NULL, "1", "5000",
    "1900", "2", NULL, "1025", "t.two", "p2", "corr", NULL, NULL, NULL, NULL, NULL, NULL};

static void test_fake_claim_picked(void) {
    obx_store *s = fake_store("MariaDB", NULL);
    const obx_message *ms = NULL;
    int n = -1, at;
    TT_ASSERT(s != NULL);
    fake_push_ok(0); /* START TRANSACTION */
    fake_push_rows(19, 2, k_picked);
    fake_push_ok(2); /* the UPDATE matched both */
    TT_EQ_INT(obx_claim(s, k_owner, 30, 10, &ms, &n), OBX_OK);
    TT_EQ_INT(n, 2);
    at = fake_log_find("`Status` = 1, `OwnerToken` =", 0);
    TT_ASSERT(at > 0);
    TT_EXPECT(strstr(fake_log_sql(at - 1), "AS `obx_pick`") != NULL); /* the pick, just before */
    TT_EQ_STR(fake_log_param_text(at, 0, 1), /* numbered markers: the list binds first */
              "[\"0192abcd-ef01-7000-8000-0000000000aa\",\"0192abcd-ef01-7000-8000-0000000000cc\"]");
    TT_EQ_INT(fake_log_find("FROM JSON_TABLE(", 0), -1); /* no read-back */
    TT_EQ_STR(ms[0].id, "0192abcd-ef01-7000-8000-0000000000aa");
    TT_EQ_STR(ms[0].owner_token, k_owner);
    TT_EQ_INT(ms[0].status, OBX_STATUS_IN_PROGRESS);
    TT_EQ_INT(ms[0].starts, 1);
    TT_EQ_INT(ms[0].locked_until_ms, 5000 + 30000);
    TT_EQ_STR(ms[0].topic, "t.one");
    TT_EQ_INT(ms[1].starts, 3);
    TT_EQ_INT(ms[1].retry_count, 1);
    TT_EQ_INT(ms[1].priority, 0);
    TT_EQ_INT(ms[1].locked_until_ms, 35000);
    TT_EQ_STR(ms[1].correlation_id, "corr");
    TT_EQ_STR(ms[1].payload, "p2");
    obx_store_close(s);
}

static void test_fake_claim_picked_readback(void) {
    obx_store *s = fake_store("MariaDB", NULL);
    ibx_store *is = NULL;
    const obx_message *ms = NULL;
    const ibx_message *ims = NULL;
    static const char *const back[19] = {
        "0192abcd-ef01-7000-8000-0000000000cc", "0192abcd-ef01-7000-8000-0000000000dd", "2000", NULL, "1", "35007",
        "1900", "3", NULL, "1024", "t.two", "p2", NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    /* The inbox's short row: eight times and counts, the mask, then the texts. */
    static const char *const ipicked[2 * 19] = {
        "1000", "1100", "5000", "1", "1200", NULL, "0", NULL, "512", "stripe", "m-1", "t", "{}",
        NULL, NULL, NULL, NULL, NULL, NULL,
        "1000", "1100", "5000", "1", "1200", NULL, "1", NULL, "512", "stripe", "m-2", "t", "{}",
        NULL, NULL, NULL, NULL, NULL, NULL};
    static const char *const iback[19] = {
        "1000", "1100", "35009", "1", "1200", NULL, "2", NULL, "512", "stripe", "m-2", "t", "{}",
        NULL, NULL, NULL, NULL, NULL, NULL};
    int n = -1, at;
    TT_ASSERT(s != NULL);
    fake_push_ok(0); /* START TRANSACTION */
    fake_push_rows(19, 2, k_picked);
    fake_push_ok(1); /* another node marked the first row in between */
    fake_push_rows(19, 1, back);
    TT_EQ_INT(obx_claim(s, k_owner, 30, 10, &ms, &n), OBX_OK);
    TT_EQ_INT(n, 1);
    at = fake_log_find("FROM JSON_TABLE(", 0);
    TT_ASSERT(at > 0);
    TT_EQ_STR(fake_log_param_text(at, 0, 2), k_owner);
    TT_EQ_STR(ms[0].id, "0192abcd-ef01-7000-8000-0000000000cc");
    TT_EQ_INT(ms[0].locked_until_ms, 35007); /* the stored lease, read */
    TT_EQ_INT(ms[0].starts, 3);
    TT_EQ_STR(ms[0].topic, "t.two");
    TT_EXPECT(ms[0].correlation_id == NULL);
    obx_store_close(s);
    /* The inbox: the same two paths, its two-column key in two lists. */
    is = fake_ibx_store("MariaDB");
    TT_ASSERT(is != NULL);
    fake_push_ok(0);
    fake_push_rows(19, 2, ipicked);
    fake_push_ok(2);
    TT_EQ_INT(ibx_claim(is, k_owner, 30, 10, &ims, &n), IBX_OK);
    TT_EQ_INT(n, 2);
    at = fake_log_find("`LockedUntil` = UTC_TIMESTAMP(6) + INTERVAL ? SECOND", 0);
    TT_ASSERT(at > 0);
    TT_EQ_STR(fake_log_param_text(at, 0, 1), "[\"stripe\",\"stripe\"]");
    TT_EQ_STR(fake_log_param_text(at, 0, 2), "[\"m-1\",\"m-2\"]");
    TT_EQ_INT(fake_log_find("FROM JSON_TABLE(", 0), -1);
    TT_EQ_STR(ims[1].message_id, "m-2");
    TT_EQ_INT(ims[1].starts, 2);
    TT_EQ_INT(ims[1].locked_until_ms, 35000);
    fake_reset();
    fake_set_dbms_name("MariaDB");
    fake_push_ok(0);
    fake_push_rows(19, 2, ipicked);
    fake_push_ok(1);
    fake_push_rows(19, 1, iback);
    TT_EQ_INT(ibx_claim(is, k_owner, 30, 10, &ims, &n), IBX_OK);
    TT_EQ_INT(n, 1);
    TT_ASSERT(fake_log_find("FROM JSON_TABLE(", 0) > 0);
    TT_EQ_STR(ims[0].message_id, "m-2");
    TT_EQ_INT(ims[0].locked_until_ms, 35009);
    TT_EQ_INT(ims[0].starts, 2);
    ibx_store_close(is);
}

/* The two-pass pick of a three-statement claim (MariaDB): when the second
 * pass fails, the statement the first pass used is not touched again after
 * the failure freed it (CORE-STALE-HANDLE). */
static void test_fake_pick_stale_handle(void) {
    obx_store *s = fake_store("MariaDB", NULL);
    const obx_message *ms;
    char owner[37];
    int n = -1;
    TT_ASSERT(s != NULL);
    obx_owner_token(s, owner);
    fake_push_rows(1, 0, NULL);                                  /* first window: nothing */
    fake_push_error(SQL_ERROR, "42000", 1064, "scripted failure"); /* the wider window fails */
    TT_EQ_INT(obx_claim(s, owner, 30, 10, &ms, &n), OBX_ERR_DB);
    TT_EQ_INT(n, -1);
    TT_EQ_INT(fake_invalid_handle_calls(), 0);
    fake_push_rows(1, 0, NULL);
    fake_push_rows(1, 0, NULL);
    TT_EQ_INT(obx_claim(s, owner, 30, 10, &ms, &n), OBX_EMPTY); /* the store goes on */
    TT_EQ_INT(fake_invalid_handle_calls(), 0);
    obx_store_close(s);
}


/* CORE-CLAIM-ROW: a claim reads its short row: the fixed-size head bound
 * (one SQLFetch fills it), then topic and payload and only the optional
 * texts the mask names, each one SQLGetData; what the claim set (status,
 * owner, no ProcessedAt/By) is filled in, not read. A non-NULL cell whose
 * bit is off is never asked for, so the mask alone decides. */
static void test_fake_claim_short_row(void) {
    obx_store *s = fake_store("PostgreSQL", NULL);
    ibx_store *is = NULL;
    const obx_message *ms = NULL;
    const ibx_message *ims = NULL;
    int n = 0, e;
    static const char *const rows[2 * 19] = {
        "0192ABCD-EF01-7000-8000-0000000000AA", "0192abcd-ef01-7000-8000-0000000000bb", "1000", NULL, "0", "31000",
        "900", "1", NULL, "0", "t.plain", "p1", NULL, "never read", NULL, NULL, NULL, NULL, NULL,
        "0192abcd-ef01-7000-8000-0000000000cc", "0192abcd-ef01-7000-8000-0000000000dd", "2000", "1500", "2", "31000",
        "1900", "3", "99000", "79", "t.keyed", "p2", "corr-9", "boom", "key-1", "acme", "never read", NULL,
        "{\"k\":\"v\"}"};
    static const char *const irows[19] = {
        "1000", "1100", "31000", "1", "1200", NULL, "2", "88000", "48", "stripe", "m-1", "paid", "{}",
        "never read", NULL, NULL, NULL, "o-1", "{\"a\":\"b\"}"};
    TT_ASSERT(s != NULL);
    fake_push_rows(19, 2, rows);
    TT_EQ_INT(obx_claim(s, k_owner, 30, 10, &ms, &n), OBX_OK);
    TT_EQ_INT(n, 2);
    e = fake_log_find("UPDATE", 0);
    TT_ASSERT(e >= 0);
    TT_EXPECT(strstr(fake_log_sql(e), "\"ProcessedBy\"") == NULL);
    TT_EXPECT(strstr(fake_log_sql(e), "(CASE WHEN \"CorrelationId\" IS NULL THEN 0 ELSE 1 END)") != NULL);
    TT_EQ_INT(fake_calls("SQLBindCol"), 10);
    TT_EQ_INT(fake_calls("SQLGetData"), 2 + 7); /* topic, payload; then the second row's five */
    TT_EQ_STR(ms[0].id, "0192abcd-ef01-7000-8000-0000000000aa");
    TT_EQ_STR(ms[0].message_id, "0192abcd-ef01-7000-8000-0000000000bb");
    TT_EQ_INT(ms[0].status, OBX_STATUS_IN_PROGRESS);
    TT_EQ_INT(ms[0].is_processed, 0);
    TT_EXPECT(ms[0].processed_by == NULL && ms[0].processed_at_ms == 0);
    TT_EQ_STR(ms[0].owner_token, k_owner);
    TT_EQ_INT(ms[0].created_at_ms, 1000);
    TT_EQ_INT(ms[0].due_time_ms, 0);
    TT_EQ_INT(ms[0].locked_until_ms, 31000);
    TT_EQ_INT(ms[0].next_attempt_ms, 900);
    TT_EQ_INT(ms[0].starts, 1);
    TT_EQ_INT(ms[0].expires_ms, 0);
    TT_EQ_STR(ms[0].topic, "t.plain");
    TT_EQ_STR(ms[0].payload, "p1");
    TT_EQ_INT(ms[0].payload_len, 2);
    TT_EXPECT(ms[0].last_error == NULL && ms[0].correlation_id == NULL && ms[0].ordering_key == NULL);
    TT_EXPECT(ms[0].tenant_id == NULL && ms[0].header_count == 0);
    TT_EQ_INT(ms[1].due_time_ms, 1500);
    TT_EQ_INT(ms[1].retry_count, 2);
    TT_EQ_INT(ms[1].starts, 3);
    TT_EQ_INT(ms[1].expires_ms, 99000);
    TT_EQ_STR(ms[1].topic, "t.keyed");
    TT_EQ_STR(ms[1].correlation_id, "corr-9");
    TT_EQ_STR(ms[1].last_error, "boom");
    TT_EQ_STR(ms[1].ordering_key, "key-1");
    TT_EQ_STR(ms[1].tenant_id, "acme");
    TT_EXPECT(ms[1].aggregate_type == NULL && ms[1].aggregate_id == NULL);
    TT_EQ_STR(obx_message_header(&ms[1], "k"), "v");
    TT_EQ_STR(ms[1].owner_token, k_owner);
    obx_store_close(s);
    /* The inbox's: no texts in the head; hash and the envelope by the mask. */
    is = fake_ibx_store("SQLite");
    TT_ASSERT(is != NULL);
    fake_push_ok(0); /* BEGIN IMMEDIATE */
    fake_push_rows(19, 1, irows);
    TT_EQ_INT(ibx_claim(is, k_owner, 30, 10, &ims, &n), IBX_OK);
    TT_EQ_INT(n, 1);
    TT_EQ_INT(fake_calls("SQLBindCol"), 9);
    TT_EQ_INT(fake_calls("SQLGetData"), 4 + 2); /* source, id, topic, payload; aggregate id, headers */
    TT_EQ_INT(ims[0].status, IBX_STATUS_PROCESSING);
    TT_EQ_STR(ims[0].owner_token, k_owner);
    TT_EQ_INT(ims[0].first_seen_ms, 1000);
    TT_EQ_INT(ims[0].last_seen_ms, 1100);
    TT_EQ_INT(ims[0].locked_until_ms, 31000);
    TT_EQ_INT(ims[0].attempt, 1);
    TT_EQ_INT(ims[0].next_attempt_ms, 1200);
    TT_EQ_INT(ims[0].due_time_ms, 0);
    TT_EQ_INT(ims[0].starts, 2);
    TT_EQ_INT(ims[0].expires_ms, 88000);
    TT_EQ_STR(ims[0].source, "stripe");
    TT_EQ_STR(ims[0].message_id, "m-1");
    TT_EQ_STR(ims[0].topic, "paid");
    TT_EXPECT(ims[0].hash == NULL && ims[0].hash_len == 0 && ims[0].last_error == NULL);
    TT_EXPECT(ims[0].tenant_id == NULL && ims[0].aggregate_type == NULL);
    TT_EQ_STR(ims[0].aggregate_id, "o-1");
    TT_EQ_STR(ibx_message_header(&ims[0], "a"), "b");
    ibx_store_close(is);
    TT_EQ_INT(fake_open_handles(), 0);
}

/* After a lost connection the loop retries fast and backs off to 1 s; other
 * failures wait the error delay (CORE-RECONNECT-FAST). */
static void test_error_wait(void) {
    static const struct { obx_result r; int n; int64_t error_ms, want; } cases[] = {
        {OBX_ERR_DB_TRANSIENT, 1, 30000, 100},  {OBX_ERR_DB_TRANSIENT, 2, 30000, 200},
        {OBX_ERR_DB_TRANSIENT, 4, 30000, 800},  {OBX_ERR_DB_TRANSIENT, 5, 30000, 1000},
        {OBX_ERR_DB_TRANSIENT, 60, 30000, 1000}, {OBX_ERR_DB_TRANSIENT, 3, 300, 300},
        {OBX_ERR_DB_TRANSIENT, 1, 50, 50},      {OBX_ERR_DB, 1, 30000, 30000},
        {OBX_ERR_NO_MEMORY, 7, 2000, 2000},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
        TT_EQ_INT(obx__error_wait_ms(cases[i].r, cases[i].n, cases[i].error_ms), cases[i].want);
}


/* Every public function with NULL (and odd) arguments: a result code that
 * names the problem, never a crash or a write through NULL (CORE-NULL-WALK). */
static obx_outcome null_walk_handler(const obx_message *m, char *e, size_t n, void *u) {
    (void)m; (void)e; (void)n; (void)u;
    return OBX_DONE;
}
static ibx_outcome null_walk_ihandler(const ibx_message *m, char *e, size_t n, void *u) {
    (void)m; (void)e; (void)n; (void)u;
    return IBX_DONE;
}

static void test_null_walk_obx(void) {
    obx_store *s = fake_store("SQLite", NULL);
    obx_store *out;
    void *not_null = &s;
    obx_store_desc desc;
    obx_store_info info;
    obx_dispatcher *d = NULL;
    obx_dispatcher_desc dd;
    obx_provider_desc pd;
    obx_provider *p;
    obx_new_message m;
    obx_message msg;
    obx_join j;
    obx_join_wait w;
    const obx_message *ms = NULL;
    const char *ids[1] = {NULL};
    char id[37], token[37];
    int n = -7;
    int64_t c[OBX_METRIC_COUNT_];
    size_t needed = 0;
    /* Non-NULL sentinels, copied, not cast: -Wcast-align on 32-bit ARM. */
    memcpy(&out, &not_null, sizeof out);
    memcpy(&p, &not_null, sizeof p);
    TT_ASSERT(s != NULL);
    obx_owner_token(s, token);
    memset(&desc, 0, sizeof desc);
    memset(&m, 0, sizeof m);
    TT_EQ_INT(obx_store_open(NULL, &out), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_store_open(&desc, NULL), OBX_ERR_INVALID_ARG);
    obx_store_close(NULL);
    TT_EQ_INT(obx_store_get_info(NULL, &info), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_store_get_info(s, NULL), OBX_ERR_INVALID_ARG);
    TT_ASSERT(obx_store_last_error(NULL) != NULL);
    TT_EQ_INT(obx_schema_sql(OBX_DIALECT_AUTO, NULL, NULL, NULL, 0, &needed), OBX_ERR_UNSUPPORTED);
    TT_EQ_INT(obx_schema_sql(OBX_DIALECT_SQLITE, NULL, NULL, NULL, 10, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_schema_sql(OBX_DIALECT_SQLITE, NULL, NULL, NULL, 0, &needed), OBX_ERR_OUT_OF_RANGE);
    TT_EXPECT(needed > 100);
    TT_EQ_INT(obx_schema_sql((obx_dialect)99, NULL, NULL, NULL, 0, NULL), OBX_ERR_UNSUPPORTED);
    TT_EQ_INT(obx_store_deploy(NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_store_rewrite(NULL, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_owner_token(NULL, id), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_owner_token(s, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_enqueue(NULL, &m, id), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_enqueue(s, NULL, id), OBX_ERR_INVALID_ARG);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_enqueue: message");
    TT_EQ_INT(obx_enqueue_tx(s, NULL, &m, id), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_enqueue_batch(NULL, NULL, &m, 1, NULL), OBX_ERR_INVALID_ARG);
    { /* the statements for the caller's own driver */
        obx_sql *sql = NULL;
        TT_EQ_INT(obx_enqueue_sql(NULL, &m, 1, OBX_SQL_MARKERS_QUESTION, &sql, NULL), OBX_ERR_INVALID_ARG);
        TT_EQ_INT(obx_enqueue_sql(s, &m, 1, OBX_SQL_MARKERS_QUESTION, NULL, NULL), OBX_ERR_INVALID_ARG);
        TT_EQ_STR(obx_store_last_error(s)->where, "obx_enqueue_sql: out_sql");
        TT_EQ_INT(obx_enqueue_sql(s, &m, 1, -1, &sql, NULL), OBX_ERR_INVALID_ARG);
        TT_EQ_STR(obx_store_last_error(s)->where, "obx_enqueue_sql: markers");
        TT_EQ_INT(obx_enqueue_sql(s, NULL, 1, OBX_SQL_MARKERS_QUESTION, &sql, NULL), OBX_ERR_INVALID_ARG);
        TT_EQ_INT(obx_enqueue_sql(s, &m, -1, OBX_SQL_MARKERS_QUESTION, &sql, NULL), OBX_ERR_INVALID_ARG);
        TT_ASSERT(sql == NULL);
        TT_EQ_INT(obx_sql_count(NULL), 0);
        TT_ASSERT(obx_sql_at(NULL, 0) == NULL && obx_sql_id(NULL, 0) == NULL);
        TT_EQ_INT(obx_sql_check(NULL, NULL, NULL), OBX_ERR_INVALID_ARG);
        TT_EQ_INT(obx_sql_check(s, NULL, "READ-COMMITTED"), OBX_ERR_INVALID_ARG);
        TT_EQ_INT(obx_sql_error(NULL, OBX_ERR_DB, NULL, NULL, 0, NULL), OBX_ERR_INVALID_ARG);
        TT_EQ_INT(obx_sql_error(s, OBX_ERR_STATE, NULL, NULL, 0, NULL), OBX_ERR_STATE);
        obx_sql_free(NULL);
    }
    TT_EQ_INT(obx_enqueue_batch(s, NULL, NULL, 0, NULL), OBX_OK); /* nothing to do */
    TT_EQ_INT(obx_enqueue_batch(s, NULL, NULL, 1, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_enqueue_batch(s, NULL, &m, -1, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_claim(NULL, token, 30, 10, &ms, &n), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_claim(s, NULL, 30, 10, &ms, &n), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_claim(s, token, 30, 10, NULL, &n), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_claim(s, token, 30, 10, &ms, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(n, -7);
    TT_EQ_INT(obx_ack(NULL, token, ids, 1, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_ack(s, NULL, ids, 1, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_ack(s, token, NULL, 1, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_ack: ids");
    TT_EQ_INT(obx_ack(s, token, ids, 1, NULL), OBX_ERR_INVALID_ARG); /* ids[0] NULL */
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_ack: ids[0]");
    TT_EQ_INT(obx_ack(s, token, NULL, 0, NULL), OBX_OK);
    TT_EQ_INT(obx_abandon(s, token, NULL, 1, NULL, OBX_DELAY_BACKOFF, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_fail(s, token, NULL, 1, NULL, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_reap(NULL, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_get(NULL, token, &msg), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_get(s, NULL, &msg), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_get(s, token, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_cleanup(NULL, 0, 0, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_store_counters(NULL, c), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_store_counters(s, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_queue_stats(NULL, NULL, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_provider_create(NULL, &p), OBX_ERR_INVALID_ARG);
    memset(&pd, 0, sizeof pd);
    TT_EQ_INT(obx_provider_create(&pd, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_provider_create(&pd, &p), OBX_ERR_INVALID_ARG); /* neither list nor discovery */
    TT_ASSERT(p == NULL);
    pd.database_count = 2; /* a count without a list */
    pd.discover = NULL;
    TT_EQ_INT(obx_provider_create(&pd, &p), OBX_ERR_INVALID_ARG);
    obx_provider_destroy(NULL);
    TT_EQ_INT(obx_provider_refresh(NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_provider_count(NULL), 0);
    TT_ASSERT(obx_provider_store(NULL, 0) == NULL);
    TT_ASSERT(obx_provider_store_id(NULL, 0) == NULL);
    TT_ASSERT(obx_provider_last_error(NULL) != NULL);
    TT_EQ_INT(obx_router_get(NULL, "k", &out), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_router_get_guid(NULL, NULL, &out), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_dispatcher_create(NULL, &d), OBX_ERR_INVALID_ARG);
    memset(&dd, 0, sizeof dd);
    TT_EQ_INT(obx_dispatcher_create(&dd, &d), OBX_ERR_INVALID_ARG); /* no store, no provider */
    dd.store = s;
    TT_EQ_INT(obx_dispatcher_create(&dd, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_dispatcher_create(&dd, &d), OBX_OK);
    TT_EQ_INT(obx_dispatcher_on(d, NULL, null_walk_handler, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_STR(obx_dispatcher_last_error(d)->where, "obx_dispatcher_on: topic");
    TT_EQ_INT(obx_dispatcher_on(d, "t", NULL, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_dispatcher_on(NULL, "t", null_walk_handler, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_dispatcher_run_once(NULL, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_dispatcher_run(NULL), OBX_ERR_INVALID_ARG);
    obx_dispatcher_stop(NULL);
    obx_dispatcher_wake(NULL);
    obx_dispatcher_destroy(NULL);
    TT_ASSERT(obx_dispatcher_last_error(NULL) != NULL);
    obx_dispatcher_destroy(d);
    TT_EQ_INT(obx_join_start(NULL, NULL, 1, NULL, id), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_join_start(s, NULL, 1, NULL, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_join_start: out_join_id");
    TT_EQ_INT(obx_join_attach(NULL, token, token), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_join_attach(s, NULL, token), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_join_attach(s, token, NULL), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_join_attach_tx(s, NULL, token, token), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_join_report(s, NULL, token, 0), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_join_report_tx(NULL, NULL, token, token, 0), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_join_get(NULL, token, &j), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_join_get(s, NULL, &j), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_join_get(s, token, NULL), OBX_ERR_INVALID_ARG);
    memset(&w, 0, sizeof w);
    TT_EQ_INT(obx_join_enqueue_wait(NULL, NULL, &w, id), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_join_enqueue_wait(s, NULL, NULL, id), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_join_enqueue_wait(s, NULL, &w, id), OBX_ERR_INVALID_ARG); /* no join id */
    TT_EQ_INT(obx_join_wait_handler(NULL, NULL, 0, NULL), OBX_DEAD);
    TT_EQ_INT(fake_invalid_handle_calls(), 0);
    obx_store_close(s);
}

static void test_null_walk_ibx(void) {
    ibx_store_desc desc;
    ibx_store *s = NULL, *out = NULL;
    ibx_store_info info;
    ibx_dispatcher *d = NULL;
    ibx_dispatcher_desc dd;
    ibx_provider_desc pd;
    ibx_provider *p = NULL;
    ibx_new_message m;
    ibx_message msg;
    ibx_key k[1];
    const ibx_message *ms = NULL;
    char token[37];
    int n = -7, processed = -7;
    int64_t c[IBX_METRIC_COUNT_];
    fake_reset();
    fake_set_dbms_name("SQLite");
    memset(&desc, 0, sizeof desc);
    desc.connection_string = "Driver=fake;";
    desc.hooks.logger.min_level = IBX_LOG_OFF;
    desc.hooks.clock.sleep_ms = fake_sleep;
    TT_EQ_INT(ibx_store_open(&desc, &s), IBX_OK);
    fake_reset();
    TT_ASSERT(s != NULL);
    ibx_owner_token(s, token);
    memset(&m, 0, sizeof m);
    k[0].source = NULL;
    k[0].message_id = "x";
    TT_EQ_INT(ibx_store_open(NULL, &out), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_store_get_info(NULL, &info), IBX_ERR_INVALID_ARG);
    TT_ASSERT(ibx_store_last_error(NULL) != NULL);
    TT_EQ_INT(ibx_already_processed(NULL, "i", "s", NULL, 0, &processed), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_already_processed(s, NULL, "s", NULL, 0, &processed), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_already_processed(s, "i", NULL, NULL, 0, &processed), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_already_processed(s, "i", "s", NULL, 0, NULL), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_already_processed(s, "i", "s", NULL, 5, &processed), IBX_ERR_INVALID_ARG);
    TT_EQ_STR(ibx_store_last_error(s)->where, "ibx_already_processed: hash");
    TT_EQ_INT(processed, -7);
    TT_EQ_INT(ibx_mark_processing(NULL, "i", "s"), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_mark_processed(s, NULL, "s"), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_mark_dead(s, "i", NULL), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_enqueue(NULL, &m, NULL), IBX_ERR_INVALID_ARG);
    { /* the statements for the caller's own driver */
        ibx_sql *sql = NULL;
        TT_EQ_INT(ibx_enqueue_sql(NULL, &m, IBX_SQL_MARKERS_QUESTION, &sql), IBX_ERR_INVALID_ARG);
        TT_ASSERT(sql == NULL);
        TT_EQ_INT(ibx_sql_count(NULL), 0);
        TT_ASSERT(ibx_sql_at(NULL, 0) == NULL && ibx_sql_id(NULL, 0) == NULL);
        TT_EQ_INT(ibx_sql_check(NULL, NULL, NULL), IBX_ERR_INVALID_ARG);
        TT_EQ_INT(ibx_sql_error(NULL, IBX_ERR_DB, NULL, NULL, 0, NULL), IBX_ERR_INVALID_ARG);
        ibx_sql_free(NULL);
    }
    TT_EQ_INT(ibx_enqueue(s, NULL, NULL), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_ERR_INVALID_ARG);
    m.topic = "t";
    m.source = "s";
    m.message_id = "i";
    m.payload = "";
    m.hash_len = 3; /* a length without a hash */
    TT_EQ_INT(ibx_enqueue(s, &m, NULL), IBX_ERR_INVALID_ARG);
    TT_EQ_STR(ibx_store_last_error(s)->where, "ibx_enqueue: hash");
    TT_EQ_INT(ibx_claim(s, NULL, 30, 10, &ms, &n), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_claim(s, token, 30, 10, NULL, &n), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(n, -7);
    TT_EQ_INT(ibx_ack(s, token, NULL, 1, NULL), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_ack(s, token, k, 1, NULL), IBX_ERR_INVALID_ARG);
    TT_EQ_STR(ibx_store_last_error(s)->where, "ibx_ack: keys[0]");
    TT_EQ_INT(ibx_abandon(NULL, token, k, 1, NULL, IBX_DELAY_BACKOFF, NULL), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_fail(s, token, k, 1, NULL, NULL), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_reap(NULL, NULL), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_get(s, NULL, "s", &msg), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_get(s, "i", "s", NULL), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_cleanup(NULL, 0, 0, NULL), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_store_counters(s, NULL), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_store_counters(NULL, c), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_queue_stats(NULL, NULL, NULL), IBX_ERR_INVALID_ARG);
    memset(&pd, 0, sizeof pd);
    TT_EQ_INT(ibx_provider_create(&pd, &p), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_router_get(p, "k", &out), IBX_ERR_INVALID_ARG);
    memset(&dd, 0, sizeof dd);
    dd.store = s;
    TT_EQ_INT(ibx_dispatcher_create(&dd, &d), IBX_OK);
    TT_EQ_INT(ibx_dispatcher_on(d, "", null_walk_ihandler, NULL), IBX_ERR_INVALID_ARG);
    TT_EQ_INT(ibx_dispatcher_on(d, "t", NULL, NULL), IBX_ERR_INVALID_ARG);
    ibx_dispatcher_destroy(d);
    TT_EQ_INT(fake_invalid_handle_calls(), 0);
    ibx_store_close(s);
}


/* Built with OBX_NO_POSIX_CLOCK, a dispatcher without a clock hook that
 * sleeps is refused (it would poll without pause); otherwise it is fine
 * (CORE-NO-POSIX-CLOCK). */
static int64_t hook_now(void *user) { (void)user; return 1767225600000LL; }
static void hook_sleep(int64_t ms, void *user) { (void)ms; (void)user; }
static void test_no_posix_clock(void) {
    obx_store *s = NULL;
    obx_store_desc desc;
    obx_store *hooked = NULL;
    obx_dispatcher_desc dd;
    obx_dispatcher *d = NULL;
    fake_reset();
    memset(&desc, 0, sizeof desc);
    desc.connection_string = "Driver=fake;";
    desc.hooks.logger.min_level = OBX_LOG_OFF;
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_OK); /* the default clock */
    memset(&dd, 0, sizeof dd);
    dd.store = s;
#ifdef OBX_NO_POSIX_CLOCK
    TT_EQ_INT(obx_dispatcher_create(&dd, &d), OBX_ERR_INVALID_ARG);
    TT_EQ_STR(obx_store_last_error(s)->where, "obx_dispatcher_create: hooks.clock");
#else
    TT_EQ_INT(obx_dispatcher_create(&dd, &d), OBX_OK);
    obx_dispatcher_destroy(d);
    d = NULL;
#endif
    memset(&desc, 0, sizeof desc);
    desc.connection_string = "Driver=fake;";
    desc.hooks.clock.now_utc_ms = hook_now;
    desc.hooks.clock.monotonic_ms = hook_now;
    desc.hooks.clock.sleep_ms = hook_sleep;
    TT_EQ_INT(obx_store_open(&desc, &hooked), OBX_OK);
    dd.store = hooked;
    TT_EQ_INT(obx_dispatcher_create(&dd, &d), OBX_OK);
    obx_dispatcher_destroy(d);
    obx_store_close(hooked);
    obx_store_close(s);
}


/* The defaults in one place, as the documentation states them (CORE-DESC-DEFAULTS). */
static void test_desc_defaults(void) {
    obx_dispatcher_desc given, r;
    ibx_dispatcher_desc ig, ir;
    r = obx_dispatcher_desc_defaults(NULL);
    TT_EQ_INT(r.batch_size, 50);
    TT_EQ_INT(r.lease_seconds, 30);
    TT_EQ_INT(r.max_attempts, 10);
    TT_EQ_INT(r.poll_interval_ms, 500);
    TT_EQ_INT(r.idle_max_ms, 2000);
    TT_EQ_INT(r.error_delay_ms, 30000);
    TT_EQ_INT(r.reap_interval_ms, 30000);
    TT_EQ_INT(r.max_handler_ms, 300000);
    TT_EQ_INT(r.cleanup_interval_ms, 0);
    TT_EQ_INT(r.message_log_level, OBX_LOG_DEBUG);
    TT_ASSERT(r.backoff != NULL && r.backoff(3, NULL) == 8000);
    memset(&given, 0, sizeof given);
    given.batch_size = 7;
    given.poll_interval_ms = 5000; /* idle_max follows a longer poll */
    r = obx_dispatcher_desc_defaults(&given);
    TT_EQ_INT(r.batch_size, 7);
    TT_EQ_INT(r.idle_max_ms, 5000);
    memset(&ig, 0, sizeof ig);
    ir = ibx_dispatcher_desc_defaults(&ig);
    TT_EQ_INT(ir.batch_size, 50);
    TT_EQ_INT(ir.cleanup_retention_ms, IBX_DEFAULT_RETENTION_MS);
}

/* OBX-ENVELOPE-DECODE: the Headers column read back (obx__headers_unpack):
 * any JSON object of strings, whitespace and every escape, decoded in place;
 * anything else (another writer's numbers, a NUL, a lone surrogate, a cut
 * text) reads as no headers rather than a wrong one. */
static void test_envelope_decode(void) {
    static const struct {
        const char *json;
        int count;
        const char *packed; /* the pairs, '|' for each NUL */
    } cases[] = {
        {"{}", 0, ""},
        {" { } ", 0, ""},
        {"{\"traceparent\":\"00-ab-01\"}", 1, "traceparent|00-ab-01|"},
        {"{ \"a\" : \"1\" ,\n\t\"b\":\"\" }", 2, "a|1|b||"},
        {"{\"q\\\"k\":\"\\\\ \\/ \\b\\f\\n\\r\\t\"}", 1, "q\"k|\\ / \b\f\n\r\t|"},
        {"{\"e\":\"\\u00e9\\u20ac\\ud83d\\ude00\"}", 1, "e|\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|"},
        {"{\"raw\":\"\xf0\x9f\x98\x80\"}", 1, "raw|\xf0\x9f\x98\x80|"},
        {"{\"n\":1}", -1, NULL},
        {"{\"nul\":\"a\\u0000b\"}", -1, NULL},
        {"{\"lone\":\"\\ud83d\"}", -1, NULL},
        {"{\"low\":\"\\ude00\"}", -1, NULL},
        {"{\"cut\":\"abc", -1, NULL},
        {"{\"a\":\"1\",}", -1, NULL},
        {"[\"a\",\"b\"]", -1, NULL},
        {"{\"ctl\":\"a\tb\"}", -1, NULL},
        {"", -1, NULL}};
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[128], want[128];
        size_t k, n;
        int got;
        snprintf(text, sizeof text, "%s", cases[i].json);
        got = obx__headers_unpack(text);
        TT_EQ_INT(got, cases[i].count);
        if (got < 0) continue;
        n = strlen(cases[i].packed);
        snprintf(want, sizeof want, "%s", cases[i].packed);
        for (k = 0; k < n; k++)
            if (want[k] == '|') want[k] = '\0';
        TT_EXPECT(memcmp(text, want, n) == 0);
    }
    {   /* The lookups over what the decoder wrote; NULL and range checks. */
        obx_message m;
        const char *k = NULL, *v = NULL;
        char text[] = "{\"a\":\"1\",\"bb\":\"\",\"c\":\"3\"}";
        memset(&m, 0, sizeof m);
        TT_EXPECT(obx_message_header(&m, "a") == NULL); /* none */
        m.header_count = obx__headers_unpack(text);
        m.headers_packed = text;
        TT_EQ_INT(m.header_count, 3);
        TT_EQ_STR(obx_message_header(&m, "c"), "3");
        TT_EQ_STR(obx_message_header(&m, "bb"), "");
        TT_EXPECT(obx_message_header(&m, "b") == NULL && obx_message_header(&m, NULL) == NULL);
        TT_EXPECT(obx_message_header(NULL, "a") == NULL);
        TT_EQ_INT(obx_message_header_at(&m, 2, &k, &v), OBX_OK);
        TT_EQ_STR(k, "c");
        TT_EQ_STR(v, "3");
        TT_EQ_INT(obx_message_header_at(&m, 3, &k, &v), OBX_ERR_NOT_FOUND);
        TT_EQ_INT(obx_message_header_at(&m, -1, &k, &v), OBX_ERR_NOT_FOUND);
        TT_EQ_INT(obx_message_header_at(NULL, 0, &k, &v), OBX_ERR_INVALID_ARG);
        TT_EQ_INT(obx_message_header_at(&m, 0, NULL, NULL), OBX_OK);
    }
}

/* ---- providers: the discovery protocol, its failures, scale (fake ODBC) ------------------ */

/* A discovery of `count` databases "db-0" ... on the fake driver. `total`
 * says which protocol it follows: 1 returns how many there are (the
 * documented protocol), 0 returns how many it wrote (stops at cap). */
typedef struct fake_tenants {
    int count, total, calls, fail, dup, max_cap;
    char (*ids)[16];
} fake_tenants;
static int fake_discover(obx_database *out, int cap, void *user) {
    fake_tenants *t = (fake_tenants *)user;
    int i;
    t->calls++;
    if (cap > t->max_cap) t->max_cap = cap;
    if (t->fail) return -1;
    for (i = 0; i < t->count && i < cap; i++) {
        out[i].id = t->ids[t->dup && i == t->count - 1 ? 0 : i];
        out[i].connection_string = "Driver=fake;";
    }
    return t->total ? t->count : i;
}
static int ifake_discover(ibx_database *out, int cap, void *user) {
    fake_tenants *t = (fake_tenants *)user;
    int i;
    t->calls++;
    for (i = 0; i < t->count && i < cap; i++) {
        out[i].id = t->ids[i];
        out[i].connection_string = "Driver=fake;";
    }
    return t->total ? t->count : i;
}

static int64_t g_fake_now_ms;
static int64_t fake_now(void *user) { (void)user; return g_fake_now_ms; }

static int g_warn_lines;
static char g_warn_last[768];
static void count_warn_log(obx_log_level level, const char *store_id, const char *msg, void *user) {
    (void)store_id; (void)user;
    if (level >= OBX_LOG_WARN) {
        g_warn_lines++;
        snprintf(g_warn_last, sizeof g_warn_last, "%s", msg);
    }
}

static int fake_tenants_init(fake_tenants *t, int count, int total) {
    int i;
    memset(t, 0, sizeof *t);
    t->ids = (char (*)[16])malloc(sizeof *t->ids * (size_t)count);
    if (!t->ids) return 0;
    for (i = 0; i < count; i++) snprintf(t->ids[i], sizeof t->ids[i], "db-%d", i);
    t->count = count;
    t->total = total;
    return 1;
}

static obx_provider *fake_provider(fake_tenants *t) {
    obx_provider_desc pd;
    obx_provider *p = NULL;
    fake_reset();
    memset(&pd, 0, sizeof pd);
    pd.discover = fake_discover;
    pd.discover_user = t;
    pd.refresh_interval_ms = 1000;
    pd.store.hooks.clock.monotonic_ms = fake_now;
    pd.store.hooks.clock.sleep_ms = fake_sleep;
    pd.store.hooks.logger.log = count_warn_log;
    if (obx_provider_create(&pd, &p) != OBX_OK) {
        obx_provider_destroy(p);
        return NULL;
    }
    return p;
}

/* Discovery serves every database, past the 256 it is first given room
 * for, whichever way the callback counts: the documented protocol (return
 * the total) and a callback that stops at cap and returns what it wrote
 * (as the example did) both get all 300 served (CORE-DISCOVER-ALL). */
static void test_discover_all(void) {
    fake_tenants t;
    obx_provider *p;
    obx_store *s = NULL;
    int total;
    for (total = 1; total >= 0; total--) {
        TT_ASSERT(fake_tenants_init(&t, 300, total));
        g_warn_lines = 0;
        p = fake_provider(&t);
        TT_ASSERT(p != NULL);
        TT_EQ_INT(obx_provider_count(p), 300);
        TT_EQ_INT(obx_router_get(p, "db-299", &s), OBX_OK);
        TT_EQ_INT(g_warn_lines, 0);
        obx_provider_destroy(p);
        free(t.ids);
    }
    { /* the inbox's copy of the same core */
        ibx_provider_desc pd;
        ibx_provider *q = NULL;
        ibx_store *is = NULL;
        TT_ASSERT(fake_tenants_init(&t, 300, 0));
        fake_reset();
        memset(&pd, 0, sizeof pd);
        pd.discover = ifake_discover;
        pd.discover_user = &t;
        pd.store.hooks.logger.min_level = IBX_LOG_OFF;
        TT_EQ_INT(ibx_provider_create(&pd, &q), IBX_OK);
        TT_EQ_INT(ibx_provider_count(q), 300);
        TT_EQ_INT(ibx_router_get(q, "db-299", &is), IBX_OK);
        ibx_provider_destroy(q);
        free(t.ids);
    }
}

/* A discovery that fails (returns -1) or answers a duplicate id inside a
 * running dispatcher is logged at WARN once per change of state (not at
 * every refresh), is the dispatcher's last error, and its recovery is
 * logged (CORE-DISCOVER-FAIL-LOG). */
static void test_discover_fail_log(void) {
    fake_tenants t;
    obx_provider *p;
    obx_dispatcher_desc dd;
    obx_dispatcher *d = NULL;
    obx_run_stats st;
    TT_ASSERT(fake_tenants_init(&t, 3, 1));
    g_fake_now_ms = 1000000;
    p = fake_provider(&t);
    TT_ASSERT(p != NULL);
    memset(&dd, 0, sizeof dd);
    dd.provider = p;
    TT_EQ_INT(obx_dispatcher_create(&dd, &d), OBX_OK);
    obx_dispatcher_on(d, "*", null_walk_handler, NULL);
    g_warn_lines = 0;
    t.fail = 1;
    g_fake_now_ms += 2000; /* the refresh is due */
    obx_dispatcher_run_once(d, &st);
    TT_EQ_INT(t.calls, 2);
    TT_EQ_INT(g_warn_lines, 1);
    TT_EXPECT(strstr(g_warn_last, "discovery") != NULL);
    TT_EQ_INT(obx_dispatcher_last_error(d)->result, OBX_ERR_DB);
    TT_EXPECT(strstr(obx_dispatcher_last_error(d)->where, "discover") != NULL);
    g_fake_now_ms += 2000; /* fails again: the same state, not logged again */
    obx_dispatcher_run_once(d, &st);
    TT_EQ_INT(t.calls, 3);
    TT_EQ_INT(g_warn_lines, 1);
    t.fail = 0; /* now an invalid answer: a new state, logged */
    t.dup = 1;
    g_fake_now_ms += 2000;
    obx_dispatcher_run_once(d, &st);
    TT_EQ_INT(g_warn_lines, 2);
    TT_EXPECT(strstr(g_warn_last, "duplicate") != NULL);
    TT_EQ_INT(obx_dispatcher_last_error(d)->result, OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_provider_count(p), 3); /* the current set is kept */
    t.dup = 0;
    g_fake_now_ms += 2000;
    obx_dispatcher_run_once(d, &st);
    TT_EQ_INT(g_warn_lines, 2);
    obx_dispatcher_destroy(d);
    obx_provider_destroy(p);
    free(t.ids);
}

/* A refresh at scale: validation and lookups sort, not compare pairwise
 * (CORE-REGISTRY-SCALE). Through a provider on the fake ODBC layer (3,000
 * databases): an unchanged refresh keeps every store, the last id is found,
 * a duplicate far apart is still refused. Then the registry alone, whose
 * stores cost nothing, so that its own work is what is measured (the fake
 * layer finds handles by a list walk, which 100,000 stores would measure
 * instead): not a timed assertion, a "scale:" figure. The default size is
 * small; OBX_REGISTRY_SCALE=100000 gives the figure the docs quote. */
static char g_dummy_store;
static void *dummy_open(void *ctx, const char *id, const char *connstr) {
    (void)ctx; (void)id; (void)connstr;
    return &g_dummy_store;
}
static void dummy_close(void *ctx, void *store) { (void)ctx; (void)store; }
static void test_registry_scale(void) {
    const char *env = getenv("OBX_REGISTRY_SCALE");
    int n = env && atoi(env) > 0 ? atoi(env) : 3000, i, added = 0, removed = 0;
    fake_tenants t;
    obx_provider *p;
    obx_store *s = NULL;
    obx__hooks hooks;
    obx__registry reg;
    obx_database *dbs;
    double t0, t1, t2;
    TT_ASSERT(fake_tenants_init(&t, 3000, 1));
    p = fake_provider(&t);
    TT_ASSERT(p != NULL);
    TT_EQ_INT(obx_provider_count(p), 3000);
    s = obx_provider_store(p, 2999);
    TT_EQ_INT(obx_provider_refresh(p), OBX_OK); /* nothing changed */
    TT_EQ_INT(obx_provider_count(p), 3000);
    TT_ASSERT(obx_provider_store(p, 2999) == s); /* kept, not reopened */
    TT_EQ_INT(obx_router_get(p, t.ids[2999], &s), OBX_OK);
    TT_ASSERT(s == obx_provider_store(p, 2999));
    TT_EQ_INT(obx_router_get(p, "db-x", &s), OBX_ERR_NOT_FOUND);
    t.dup = 1; /* the last id repeats the first */
    TT_EQ_INT(obx_provider_refresh(p), OBX_ERR_INVALID_ARG);
    TT_EQ_INT(obx_provider_count(p), 3000);
    obx_provider_destroy(p);
    free(t.ids);
    /* The registry alone, at n databases. */
    TT_ASSERT(fake_tenants_init(&t, n, 1));
    dbs = (obx_database *)malloc(sizeof *dbs * (size_t)n);
    TT_ASSERT(dbs != NULL);
    for (i = 0; i < n; i++) {
        dbs[i].id = t.ids[i];
        dbs[i].connection_string = "Driver=fake;";
    }
    memset(&reg, 0, sizeof reg);
    obx__hooks_resolve(&hooks, NULL);
    reg.hooks = &hooks;
    reg.open = dummy_open;
    reg.close = dummy_close;
    reg.name = "scale";
    reg.retry_max_ms = 1000;
    obx__registry_init(&reg);
    t0 = mono_seconds();
    TT_EQ_INT(obx__registry_apply(&reg, dbs, n, &added, &removed), OBX_OK);
    t1 = mono_seconds();
    TT_EQ_INT(added, n);
    TT_EQ_INT(obx__registry_apply(&reg, dbs, n, &added, &removed), OBX_OK);
    t2 = mono_seconds();
    TT_EQ_INT(added, 0);
    TT_EQ_INT(removed, 0);
    TT_EQ_INT(reg.count, n);
    TT_EQ_INT(obx__registry_find(&reg, t.ids[n / 2]), n / 2);
    printf("    scale: a registry of %d databases: first refresh %.1f ms, unchanged refresh %.1f ms\n", n,
           (t1 - t0) * 1e3, (t2 - t1) * 1e3);
    obx__registry_free(&reg);
    free(dbs);
    free(t.ids);
}

/* CORE-WAIT-FOREVER: a wait near INT64_MAX ms ("never again": an
 * idle_max_ms, error_delay_ms or poll_interval_ms of INT64_MAX) waits until
 * a stop. With a 32-bit time_t (armhf) its deadline once wrapped into the
 * past: the wait returned at once and the dispatcher polled in a tight loop. */
#if !defined(OBX_NO_THREADS) && !defined(OBX_NO_POSIX_CLOCK)
static int g_wait_returned;
static void *wait_forever(void *arg) {
    obx__loop_wait((obx__loop *)arg, INT64_MAX);
    __atomic_store_n(&g_wait_returned, 1, __ATOMIC_SEQ_CST);
    return NULL;
}
static void test_wait_forever(void) {
    obx__hooks h;
    obx__loop l;
    obx__thread_t t;
    obx__hooks_resolve(&h, NULL);
    obx__loop_init(&l, &h, NULL);
    g_wait_returned = 0;
    TT_ASSERT(obx__thread_create(&t, wait_forever, &l) == 0);
    obx__sleep_ms(&h, 300);
    TT_EXPECT(!__atomic_load_n(&g_wait_returned, __ATOMIC_SEQ_CST)); /* still waiting */
    obx__loop_stop(&l);
    obx__thread_join(&t);
    TT_EXPECT(__atomic_load_n(&g_wait_returned, __ATOMIC_SEQ_CST)); /* a stop ends it */
    obx__loop_destroy(&l);
}
#endif

/* CORE-RANDOM-THREADS: the default random source, drawn from two threads
 * at once (the renewal thread's retry jitter, a handler's new ids), never
 * races nor hands out one value twice (make check-tsan runs this too). */
#if !defined(OBX_NO_THREADS)
#define RANDOM_DRAWS 20000
static obx__hooks g_random_hooks;
static uint64_t g_draws[2 * RANDOM_DRAWS];
static void *draw_random(void *arg) {
    uint64_t *out = (uint64_t *)arg;
    int i;
    for (i = 0; i < RANDOM_DRAWS; i++) out[i] = obx__random(&g_random_hooks);
    return NULL;
}
static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}
static void test_random_threads(void) {
    obx__thread_t t[2];
    int i, repeats = 0;
    obx__hooks_resolve(&g_random_hooks, NULL);
    for (i = 0; i < 2; i++) TT_ASSERT(obx__thread_create(&t[i], draw_random, g_draws + i * RANDOM_DRAWS) == 0);
    for (i = 0; i < 2; i++) obx__thread_join(&t[i]);
    qsort(g_draws, 2 * RANDOM_DRAWS, sizeof g_draws[0], cmp_u64);
    for (i = 1; i < 2 * RANDOM_DRAWS; i++) repeats += g_draws[i] == g_draws[i - 1];
    TT_EQ_INT(repeats, 0);
}
#endif

/* CORE-CLOCK-DEFAULT: the default clock (POSIX clocks, or on Windows the
 * system time and the performance counter): the wall clock is Unix time in
 * ms, as time() says; the monotonic clock moves forward across a sleep by at
 * least most of it; microseconds agree with milliseconds. Bounds are wide:
 * nothing here depends on a quiet machine. */
#if !defined(OBX_NO_POSIX_CLOCK)
static void test_clock_default(void) {
    obx__hooks h;
    int64_t t0 = (int64_t)time(NULL) * 1000, now, m0, m1, us;
    obx__hooks_resolve(&h, NULL);
    now = obx__now_ms(&h);
    TT_EXPECT(now >= t0 - 2000 && now <= (int64_t)time(NULL) * 1000 + 2000);
    m0 = obx__mono_ms(&h);
    obx__sleep_ms(&h, 60);
    m1 = obx__mono_ms(&h);
    us = obx__mono_us(&h);
    TT_EXPECT(m1 - m0 >= 40 && m1 - m0 < 60000);
    TT_EXPECT(us / 1000 >= m1 && us / 1000 < m1 + 60000);
}
#endif

/* CORE-WAKE-UNSUPPORTED: where there is no wake socket (Windows; built with
 * OBX_NO_WAKE_SOCKET) a wake_path is OBX_ERR_UNSUPPORTED naming wake_path,
 * at store open and at dispatcher create, in both headers. */
#if !OBX__WAKE_SOCKET && !IBX__WAKE_SOCKET
static void test_wake_unsupported(void) {
    obx_store_desc od;
    ibx_store_desc id;
    obx_dispatcher_desc dd;
    obx_store *o = NULL;
    ibx_store *i = NULL;
    obx_dispatcher *d = NULL;
    fake_reset();
    fake_set_dbms_name("SQLite");
    memset(&od, 0, sizeof od);
    od.connection_string = "Driver=fake;";
    od.wake_path = "obx.wake";
    TT_EQ_INT(obx_store_open(&od, &o), OBX_ERR_UNSUPPORTED);
    TT_EXPECT(strstr(obx_store_last_error(o)->where, "wake_path") != NULL);
    obx_store_close(o);
    o = NULL;
    memset(&id, 0, sizeof id);
    id.connection_string = "Driver=fake;";
    id.wake_path = "ibx.wake";
    TT_EQ_INT(ibx_store_open(&id, &i), IBX_ERR_UNSUPPORTED);
    TT_EXPECT(strstr(ibx_store_last_error(i)->where, "wake_path") != NULL);
    ibx_store_close(i);
    od.wake_path = NULL;
    TT_ASSERT(obx_store_open(&od, &o) == OBX_OK);
    memset(&dd, 0, sizeof dd);
    dd.store = o;
    dd.wake_path = "obx.wake";
    TT_EQ_INT(obx_dispatcher_create(&dd, &d), OBX_ERR_UNSUPPORTED);
    TT_EXPECT(d == NULL);
    TT_EXPECT(strstr(obx_store_last_error(o)->where, "obx_dispatcher_create: wake_path") != NULL);
#ifdef _WIN32
    TT_EXPECT(strstr(obx_store_last_error(o)->message, "Windows") != NULL);
#endif
    obx_store_close(o);
}
#endif

int main(void) {
    TT_RUN("CORE-BACKOFF-DEFAULT", "pure", "min(2^attempt s, 60 s), edges and no overflow", test_backoff_default);
    TT_RUN("OBX-ENVELOPE-DECODE", "pure", "the Headers column decoded in place: escapes, surrogates, whitespace; malformed reads as none", test_envelope_decode);
    TT_RUN("CORE-BACKOFF-JITTER", "pure", "backoff policy: base, maximum and jitter", test_backoff_jitter);
    TT_RUN("OBX-068", "pure", "round-robin selection cycles through every store", test_selection_round_robin);
    TT_RUN("OBX-069", "pure", "drain-first selection stays until a store is empty", test_selection_drain_first);
    TT_RUN("CORE-SELECT-EDGES", "pure", "selection with no stores, resize, NULL", test_selection_edges);
    TT_RUN("CORE-UUID-FORMAT", "pure", "UUIDv7 text form, version, variant, validation", test_uuid_format);
    TT_RUN("CORE-UUID-ORDER", "pure", "UUIDv7 strictly ascending within a ms and across clock jumps", test_uuid_ordering);
    TT_RUN("CORE-IDENTIFIER", "pure", "schema/table names: accept and reject tables", test_identifier_check);
    TT_RUN("CORE-RESULT-STR", "pure", "every result code has a name", test_result_strings);
    TT_RUN("CORE-DIALECT-DETECT", "pure", "dialect from SQL_DBMS_NAME", test_dialect_detection);
    TT_RUN("CORE-CLASSIFY", "pure", "every driver code classified transient, lost or permanent", test_classification);
    TT_RUN("CORE-SQL-EXPAND", "pure", "statement templates and quoted names", test_sql_expand);
    TT_RUN("CORE-STMT-PARAMS", "pure", "every dialect's statement text takes the arguments its header declares", test_stmt_params);
    TT_RUN("CORE-TRIGGER-ORDER", "pure", "a changed trigger's DROP of the old name follows the CREATE of the new, in every dialect", test_trigger_order);
    TT_RUN("CORE-SIZE-GUARDS", "pure", "buffer sizes that would wrap size_t (32 bits) are refused", test_size_guards);
    TT_RUN("CORE-DIAG", "fake", "every diagnostic record read; the error, not the warning, is the cause", test_fake_diagnostics);
    TT_RUN("CORE-CLASSIFY-DIAG", "fake", "driver errors become DB or DB_TRANSIENT with lost flag", test_fake_classification);
    TT_RUN("CORE-RETRY", "fake", "a deadlocked unit is rolled back and redone", test_fake_retry_transient);
    TT_RUN("CORE-RETRY-BOUNDED", "fake", "transient retries are bounded; permanent ones not retried", test_fake_retry_bounded);
    TT_RUN("CORE-RETRY-COMMIT", "fake", "a serialization failure at COMMIT redoes the unit", test_fake_retry_on_commit);
    TT_RUN("CORE-CORRUPT-INDEX-HINT", "fake", "MariaDB's 1712 (an index InnoDB marked corrupted) says to drop the index and deploy again", test_fake_corrupt_index_hint);
    TT_RUN("CORE-POOLER-HINT", "fake", "psqlODBC's lost named statements (26000/42P05) name UseServerSidePrepare=0", test_fake_pooler_hint);
    TT_RUN("CORE-READ-ONLY", "fake", "a read-only server (25006) reconnects, not permanent, not lost", test_fake_read_only);
    TT_RUN("CORE-RECONNECT-LOG", "fake", "an outage logs one WARN reconnecting, then DEBUG per failed attempt; the reconnect counts them", test_fake_reconnect_log);
    TT_RUN("CORE-LOST", "fake", "a lost connection is surfaced, not retried; next call reconnects", test_fake_lost_connection);
    TT_RUN("CORE-DEAD-COMMIT", "fake", "a dead connection's lying COMMIT is not trusted", test_fake_dead_commit);
    TT_RUN("CORE-DEAD-COMMIT-CALLER", "fake", "an enqueue in the caller's transaction on a connection lost after its INSERT is not OK", test_fake_dead_caller);
    TT_RUN("CORE-NO-DATA", "fake", "SQL_NO_DATA from an UPDATE is zero rows", test_fake_no_data);
    TT_RUN("CORE-UNIT-MODE", "fake", "one function decides how a unit runs; the unit runs so, with only that mode's transaction calls", test_fake_unit_mode);
    TT_RUN("CORE-SQLITE-TX", "fake", "SQLite writers use BEGIN IMMEDIATE/COMMIT/ROLLBACK as SQL", test_fake_sqlite_transactions);
    TT_RUN("CORE-OPEN-DIALECTS", "fake", "unsupported dialects say so; forcing; psqlODBC Protocol", test_fake_open_dialects);
    TT_RUN("CORE-OPEN-ARGS", "fake", "bad open arguments are named and rejected before any SQL", test_fake_open_arguments);
    TT_RUN("CORE-CONNECT-ERROR", "fake", "a refused connection reports SQLSTATE, native, call", test_fake_connect_error);
    TT_RUN("CORE-CONNECT-EXPLAIN", "fake", "a failed connect names the DSN or driver asked for and where to look; a missing database or refused login is OBX_ERR_DB", test_fake_connect_explain);
    TT_RUN("CORE-GET-DATA", "fake", "chunked text, binary with NULs, NULL, 64-bit integers", test_fake_get_bytes);
    TT_RUN("CORE-BIND", "fake", "text, int64, blob and NULL parameters; prepared once", test_fake_bind_log);
    TT_RUN("CORE-NO-MEMORY", "fake", "allocation failure at every point of open: clean, no leak", test_fake_out_of_memory);
    TT_RUN("CORE-LOGGER", "fake", "logger hook gets the store id; levels filter", test_fake_logger);
    TT_RUN("CORE-LOG-KV", "pure", "key=value log fields: plain values as they are, others quoted and escaped", test_log_kv);
    TT_RUN("CORE-LOG-FORMAT", "pure", "default log line: UTC time with ms, pid, level, store; OBX_LOG_LEVEL when the program sets none", test_default_log_format);
    TT_RUN("OBX-JOIN-PAYLOAD", "pure", "join.wait payloads: every JSON escape, \\u to UTF-8, no read past the end", test_join_payload_reader);
    TT_RUN("IBX-129", "pure", "SHA-256 matches the FIPS 180-2 vectors (content hashes)", test_sha256_vectors);
    TT_RUN("IBX-HMAC", "pure", "HMAC-SHA256 matches RFC 4231 (webhook signatures)", test_hmac_vectors);
    TT_RUN("IBX-087", "pure", "round-robin selection (shared core) cycles through every store", test_selection_round_robin);
    TT_RUN("IBX-088", "pure", "drain-first selection (shared core) stays until a store is empty", test_selection_drain_first);
    TT_RUN("IBX-104", "fake", "a deadlock on ack is rolled back and redone", test_ibx_fake_deadlock);
    TT_RUN("IBX-128", "fake", "encryption settings in the connection string reach the driver", test_ibx_fake_deadlock);
    TT_RUN("OBX-099", "fake", "a deadlock on ack is rolled back and retried", test_fake_ack_deadlock_retried);
    TT_RUN("OBX-CLAIM-LOST", "fake", "a lost connection mid-claim is surfaced; next call reconnects", test_fake_claim_lost_connection);
    TT_RUN("CORE-CLAIM-ROW", "fake", "a claim's short row: head bound, optional texts read by the mask, status and owner filled in", test_fake_claim_short_row);
    TT_RUN("OBX-CLAIM-TIMEOUT", "fake", "a statement timeout is transient, reported, not redone", test_fake_claim_timeout);
    TT_RUN("CORE-RECONNECT-FAST", "pure", "after a transient failure the loop retries in 100 ms, backing off to 1 s", test_error_wait);
    TT_RUN("CORE-NULL-WALK", "fake", "obx.h: every public function with NULL and odd arguments", test_null_walk_obx);
    TT_RUN("CORE-DISPATCHER-ARGS", "fake", "obx_dispatcher_create names the field it refuses", test_dispatcher_args);
    TT_RUN("CORE-PROVIDER-REFUSAL", "pure", "obx_provider_create logs each refusal naming the field; a negative refresh interval is out of range", test_provider_refusal);
    TT_RUN("CORE-NULL-WALK", "fake", "ibx.h: every public function with NULL and odd arguments", test_null_walk_ibx);
    TT_RUN("CORE-NO-POSIX-CLOCK", "fake", "without POSIX clocks a dispatcher needs a clock hook that sleeps", test_no_posix_clock);
    TT_RUN("CORE-DESC-DEFAULTS", "pure", "dispatcher defaults in one place, as documented", test_desc_defaults);
    TT_RUN("CORE-TERSE-MESSAGES", "fake", "a terse build names the call, argument and cause of an error", test_terse_messages);
    TT_RUN("CORE-STALE-HANDLE", "fake", "a failed second pick pass never reuses the freed statement", test_fake_pick_stale_handle);
    TT_RUN("CORE-BIND-NO-BOOL-SIZE", "fake", "no text parameter is bound as VARCHAR(5), which psqlODBC describes first", test_fake_no_bool_sized_text);
    TT_RUN("OBX-MY-BATCH-VALUES", "fake", "MariaDB: a batch without keys is one multi-row VALUES, prepared once per size, split past 1 MiB", test_fake_mariadb_batch_values);
    TT_RUN("CORE-ROUND-TRIPS", "fake", "MariaDB: one round trip per one-statement step; a claim is one transaction", test_fake_mariadb_round_trips);
    TT_RUN("OBX-120", "fake", "claim is one prepared statement per call, one transaction", test_fake_one_round_trip);
    TT_RUN("OBX-126", "fake", "encryption settings in the connection string reach the driver", test_fake_connection_string_kept);
    TT_RUN("CORE-DISCOVER-ALL", "fake", "discovery serves past 256 databases, whether the callback returns the total or stops at cap", test_discover_all);
    TT_RUN("CORE-DISCOVER-FAIL-LOG", "fake", "a failed or invalid discovery in a dispatcher: one WARN per change of state, the dispatcher's last error", test_discover_fail_log);
    TT_RUN("CORE-REGISTRY-SCALE", "fake", "a refresh sorts, not compares pairwise (prints a scale figure; OBX_REGISTRY_SCALE=100000)", test_registry_scale);
#if !defined(OBX_NO_THREADS) && !defined(OBX_NO_POSIX_CLOCK)
    TT_RUN("CORE-WAIT-FOREVER", "pure", "a wait of INT64_MAX ms waits until stopped, also with a 32-bit time_t", test_wait_forever);
#endif
#if !defined(OBX_NO_POSIX_CLOCK)
    TT_RUN("CORE-CLOCK-DEFAULT", "pure", "the default clock: Unix ms as time() says, monotonic across a sleep, us agree with ms", test_clock_default);
#endif
#if !OBX__WAKE_SOCKET && !IBX__WAKE_SOCKET
    TT_RUN("CORE-WAKE-UNSUPPORTED", "fake", "no wake socket here (Windows, OBX_NO_WAKE_SOCKET): a wake_path is OBX_ERR_UNSUPPORTED naming wake_path", test_wake_unsupported);
#endif
#if !defined(OBX_NO_THREADS)
    TT_RUN("CORE-RANDOM-THREADS", "pure", "the default random source drawn from two threads: no race, no value twice", test_random_threads);
#endif
    TT_RUN("OBX-097", "fake", "a batch enqueue is one transaction; bad input stops it before SQL", test_fake_enqueue_batch_one_tx);
    TT_RUN("OBX-ENQUEUE-OUT-IDS", "fake", "a failed enqueue or batch leaves the caller's id buffers untouched", test_fake_enqueue_out_ids);
    TT_RUN("CORE-CLAIM-PICKED", "fake", "a MariaDB claim whose UPDATE marks every picked row is the pick's rows, no read-back", test_fake_claim_picked);
    TT_RUN("CORE-CLAIM-PICKED-READBACK", "fake", "a MariaDB claim whose UPDATE marks fewer rows reads back what it holds (both headers)", test_fake_claim_picked_readback);
    TT_RUN("CORE-PICK-NULL-KEY", "fake", "a NULL picked key is bound as an element that matches no row, never an earlier row's bytes", test_fake_pick_null_key);
    return tt_done();
}

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

/* ---- backoff ------------------------------------------------------------------ */

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
        {OBX_ERR_STATE, "OBX_ERR_STATE"}, {OBX_ERR_UNSUPPORTED, "OBX_ERR_UNSUPPORTED"}};
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) TT_EQ_STR(obx_result_str(cases[i].r), cases[i].s);
    TT_EQ_STR(obx_result_str((obx_result)42), "OBX_(unknown)");
    TT_EQ_STR(ibx_result_str(IBX_ERR_DB_TRANSIENT), "IBX_ERR_DB_TRANSIENT");
    TT_EQ_STR(obx_version(), OBX_VERSION_STRING);
}

static void test_dialect_detection(void) {
    static const struct { const char *dbms; obx_dialect want; } cases[] = {
        {"SQLite", OBX_DIALECT_SQLITE}, {"PostgreSQL", OBX_DIALECT_POSTGRESQL},
        {"MariaDB", OBX_DIALECT_MARIADB}, {"MySQL", OBX_DIALECT_MARIADB},
        {"mysql", OBX_DIALECT_MARIADB}, {"Microsoft SQL Server", OBX_DIALECT_SQLSERVER},
        {"Oracle", OBX_DIALECT_AUTO}, {"", OBX_DIALECT_AUTO}};
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const obx__dialect *d = obx__dialect_detect(cases[i].dbms);
        TT_EQ_INT(d ? d->id : OBX_DIALECT_AUTO, cases[i].want);
    }
    TT_EQ_STR(obx_dialect_name(OBX_DIALECT_POSTGRESQL), "postgresql");
    TT_EQ_STR(obx_dialect_name(OBX_DIALECT_SQLITE), "sqlite");
    TT_EQ_STR(obx_dialect_name((obx_dialect)99), "unknown");
    /* The table is indexed by the enum: a reordering would break lookups. */
    for (i = 1; i < (size_t)OBX__DIALECT_COUNT; i++) TT_EQ_INT(obx__dialects[i].id, (int)i);
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
        {OBX_DIALECT_POSTGRESQL, "57014", 1, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_POSTGRESQL, "57P01", 35, OBX__FAULT_LOST},
        {OBX_DIALECT_POSTGRESQL, "57P01", 108, OBX__FAULT_LOST},
        {OBX_DIALECT_POSTGRESQL, "08S01", 35, OBX__FAULT_LOST},
        {OBX_DIALECT_POSTGRESQL, "08001", 101, OBX__FAULT_LOST},
        {OBX_DIALECT_POSTGRESQL, "HY000", 5, OBX__FAULT_PERMANENT}, /* natives are per dialect */
        {OBX_DIALECT_MARIADB, "23000", 1062, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_MARIADB, "23000", 1048, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_MARIADB, "42000", 1064, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_MARIADB, "28000", 1045, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_MARIADB, "40001", 1213, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_MARIADB, "HY000", 1205, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_MARIADB, "HY000", 1020, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_MARIADB, "HY018", 1969, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_MARIADB, "HY000", 2002, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_MARIADB, "HY000", 5014, OBX__FAULT_LOST},
        {OBX_DIALECT_MARIADB, "08S01", 2013, OBX__FAULT_LOST},
        {OBX_DIALECT_MARIADB, "08S01", 2006, OBX__FAULT_LOST},
        {OBX_DIALECT_MARIADB, "08S01", 1153, OBX__FAULT_LOST},
        {OBX_DIALECT_MARIADB, "08003", 0, OBX__FAULT_LOST},
        {OBX_DIALECT_SQLITE, "HY000", 19, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_SQLITE, "HY000", 1, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_SQLITE, "HY000", 5, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_SQLITE, "HY000", 6, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_SQLITE, "HY000", 1205, OBX__FAULT_PERMANENT},
        {OBX_DIALECT_SQLSERVER, "40001", 1205, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_SQLSERVER, "HY000", 1222, OBX__FAULT_TRANSIENT},
        {OBX_DIALECT_SQLSERVER, "HYT00", 0, OBX__FAULT_TRANSIENT},
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

int main(void) {
    TT_RUN("CORE-BACKOFF-DEFAULT", "pure", "min(2^attempt s, 60 s), edges and no overflow", test_backoff_default);
    TT_RUN("CORE-BACKOFF-JITTER", "pure", "base/max/jitter policy of seed 002 section 13", test_backoff_jitter);
    TT_RUN("OBX-068", "pure", "round-robin selection cycles through every store", test_selection_round_robin);
    TT_RUN("OBX-069", "pure", "drain-first selection stays until a store is empty", test_selection_drain_first);
    TT_RUN("CORE-SELECT-EDGES", "pure", "selection with no stores, resize, NULL", test_selection_edges);
    TT_RUN("CORE-UUID-FORMAT", "pure", "UUIDv7 text form, version, variant, validation", test_uuid_format);
    TT_RUN("CORE-UUID-ORDER", "pure", "UUIDv7 strictly ascending within a ms and across clock jumps", test_uuid_ordering);
    TT_RUN("CORE-IDENTIFIER", "pure", "schema/table names: accept and reject tables", test_identifier_check);
    TT_RUN("CORE-RESULT-STR", "pure", "every result code has a name", test_result_strings);
    TT_RUN("CORE-DIALECT-DETECT", "pure", "dialect from SQL_DBMS_NAME", test_dialect_detection);
    TT_RUN("CORE-CLASSIFY", "pure", "transient/lost/permanent for every code in odbc-facts 8", test_classification);
    TT_RUN("CORE-SQL-EXPAND", "pure", "statement templates and quoted names", test_sql_expand);
    return tt_done();
}

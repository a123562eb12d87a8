/* ibx.h — an idempotent inbox for C, over ODBC.                   v0.1.0
 *
 * Messages from outside (webhooks, brokers, other services) are recorded by
 * (source, message id) and an optional content hash, so a redelivery is
 * recognised and not processed twice; new ones are queued and handed to a
 * handler by topic, with leases, retries, backoff and dead-lettering.
 * One file holds the whole library, STB style:
 *
 *     #define IBX_IMPLEMENTATION      // in exactly one .c file
 *     #include "ibx.h"
 *
 * Every other file includes "ibx.h" without the define. Link with -lodbc
 * (unixODBC). Requires C99; compiles as C++ too. ibx.h and obx.h share
 * their core (the same text with the prefix changed, all static), so one
 * program can implement both, in one translation unit or two.
 *
 * CONTENTS
 *   1. Quick start           5. Errors
 *   2. Compile-time options  6. Databases and ODBC notes
 *   3. Runtime options       7. Testing with the fake ODBC layer
 *   4. Threads               8. License (end of file)
 *
 * 1. QUICK START ------------------------------------------------------------
 *
 *     ibx_store_desc desc = {0};
 *     desc.connection_string = "Driver={SQLite3};Database=app.db;";
 *     ibx_store *store;
 *     if (ibx_store_open(&desc, &store) != IBX_OK) {
 *         fprintf(stderr, "%s\n", ibx_store_last_error(store)->message);
 *     }
 *     ibx_store_close(store);
 *
 *   (The dedup / enqueue / claim / dispatch API lands with the inbox issue;
 *   this version carries the common core.)
 *
 * 2. COMPILE-TIME OPTIONS --------------------------------------------------
 *   global (must be the same wherever ibx.h is included):
 *     IBX_API            linkage of public functions (default: extern)
 *     IBX_STATIC         make every public function static (one-TU use)
 *   implementation-only:
 *     IBX_ASSERT(c)      assertion used for internal invariants (assert)
 *     IBX_NO_POSIX_CLOCK build without clock_gettime()/nanosleep(); pass a
 *                        clock hook then
 *   The implementation needs POSIX: compile that file with
 *   -D_POSIX_C_SOURCE=200809L or -std=gnu99.
 *
 * 3. RUNTIME OPTIONS --------------------------------------------------------
 *   As in obx.h: all-zero descriptions mean the defaults; hooks (allocator,
 *   clock, logger, random) have the same layout in both headers.
 *
 * 4. THREADS ----------------------------------------------------------------
 *   A store owns one ODBC connection and is used by one thread at a time.
 *
 * 5. ERRORS -----------------------------------------------------------------
 *   Every function returns an ibx_result (IBX_OK, IBX_EMPTY, or a negative
 *   error); ibx_store_last_error() has SQLSTATE, native code, message and
 *   the call or argument at fault. IBX_ERR_DB_TRANSIENT: retry later.
 *
 * 6. DATABASES AND ODBC NOTES ----------------------------------------------
 *   The same drivers and connection strings as obx.h (see its section 6).
 *   The default schema is "infra" where the dialect has schemas.
 *
 * 7. TESTING WITH THE FAKE ODBC LAYER --------------------------------------
 *   Link tests/fake_odbc.c instead of -lodbc.
 */
#ifndef IBX_H_INCLUDED
#define IBX_H_INCLUDED

#define IBX_VERSION_MAJOR 0
#define IBX_VERSION_MINOR 1
#define IBX_VERSION_PATCH 0
#define IBX_VERSION_STRING "0.1.0"

#include <stddef.h>
#include <stdint.h>

#ifndef IBX_API
#if defined(IBX_STATIC) && (defined(__GNUC__) || defined(__clang__))
#define IBX_API static __attribute__((unused)) /* a program need not call them all */
#elif defined(IBX_STATIC)
#define IBX_API static
#else
#define IBX_API extern
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* >>common-begin api */

/* Result of every call. Zero is success, positive values are non-error
 * outcomes, negative values are errors. */
typedef enum ibx_result {
    IBX_OK = 0,
    IBX_EMPTY = 1,               /* success, nothing there (no row, no message) */
    IBX_ERR_INVALID_ARG = -1,    /* NULL, empty or malformed argument (named in the error) */
    IBX_ERR_OUT_OF_RANGE = -2,   /* a number outside its allowed range */
    IBX_ERR_NOT_FOUND = -3,      /* the thing asked for does not exist */
    IBX_ERR_NO_MEMORY = -4,      /* the allocator returned NULL */
    IBX_ERR_DB = -5,             /* permanent database error: syntax, constraint, permission */
    IBX_ERR_DB_TRANSIENT = -6,   /* deadlock, serialization, lock/query timeout, busy, lost connection */
    IBX_ERR_STATE = -7,          /* call not valid now (e.g. store without a connection) */
    IBX_ERR_UNSUPPORTED = -8     /* dialect or feature not supported (yet) */
} ibx_result;

/* Details of the last error on a handle. Strings are always NUL-terminated. */
typedef struct ibx_error {
    ibx_result result;           /* the code that was returned */
    char sqlstate[6];            /* ODBC SQLSTATE of the first error record, "" if none */
    long native;                 /* driver's native error code, 0 if none */
    int connection_lost;         /* nonzero: the connection is gone (reconnect on next call) */
    char where[96];              /* the ODBC call or argument, e.g. "ibx_store_open: connection_string" */
    char message[512];           /* human-readable; all diagnostic records joined by " | " */
} ibx_error;

/* Log levels. Zero in ibx_logger.min_level means the default, INFO. */
typedef enum ibx_log_level {
    IBX_LOG_DEBUG = 1,
    IBX_LOG_INFO = 2,
    IBX_LOG_WARN = 3,
    IBX_LOG_ERROR = 4,
    IBX_LOG_OFF = 5
} ibx_log_level;

/* Memory. Give all three functions or none (then malloc/realloc/free). */
typedef struct ibx_allocator {
    void *(*alloc)(size_t size, void *user);
    void *(*realloc)(void *ptr, size_t size, void *user);
    void (*free)(void *ptr, void *user);
    void *user;
} ibx_allocator;

/* Time. Each NULL member falls back to its default. Wall time is UTC
 * milliseconds since the Unix epoch; monotonic time only measures intervals. */
typedef struct ibx_clock {
    int64_t (*now_utc_ms)(void *user);
    int64_t (*monotonic_ms)(void *user);
    void (*sleep_ms)(int64_t ms, void *user);
    void *user;
} ibx_clock;

/* Logging. `store_id` names the store the line is about (never NULL);
 * `message` is one line without a newline and never contains payloads. */
typedef struct ibx_logger {
    void (*log)(ibx_log_level level, const char *store_id, const char *message, void *user);
    void *user;
    ibx_log_level min_level;     /* lines below this level are not formatted at all */
} ibx_logger;

/* Randomness for UUIDs, owner tokens and backoff jitter. */
typedef struct ibx_random {
    uint64_t (*next_u64)(void *user);
    void *user;
} ibx_random;

/* All hooks together; all-zero means every default. */
typedef struct ibx_hooks {
    ibx_allocator allocator;
    ibx_clock clock;
    ibx_logger logger;
    ibx_random random;
} ibx_hooks;

/* SQL dialects. AUTO (zero) detects from SQLGetInfo(SQL_DBMS_NAME). */
typedef enum ibx_dialect {
    IBX_DIALECT_AUTO = 0,
    IBX_DIALECT_SQLITE = 1,
    IBX_DIALECT_POSTGRESQL = 2,
    IBX_DIALECT_MARIADB = 3,
    IBX_DIALECT_SQLSERVER = 4
} ibx_dialect;

/* Jittered exponential backoff (base/max/jitter, seed 002 §13). All-zero
 * means the defaults: base 200 ms, max 60 s, jitter factor 0.5 to 1.5. */
typedef struct ibx_backoff_policy {
    int64_t base_ms;
    int64_t max_ms;
    double jitter_min;
    double jitter_max;
} ibx_backoff_policy;

/* Which store a multi-store dispatcher polls next. */
typedef enum ibx_selection {
    IBX_SELECT_ROUND_ROBIN = 0,  /* one batch from each store in turn */
    IBX_SELECT_DRAIN_FIRST = 1   /* stay on a store until it returns nothing */
} ibx_selection;

/* Selection state machine; initialise with ibx_selector_init(). */
typedef struct ibx_selector {
    ibx_selection kind;
    int store_count;
    int current;                 /* the store ibx_selector_next() returns */
    int empty_streak;            /* consecutive reports of zero messages */
} ibx_selector;

/* Monotonic UUIDv7 generator state; all-zero is a valid start. */
typedef struct ibx_uuid_state {
    int64_t last_ms;
    uint64_t counter;
} ibx_uuid_state;

/* ---- Common functions (pure unless said otherwise) ----------------------- */

/* Version of the implementation, e.g. "0.1.0". */
IBX_API const char *ibx_version(void);

/* Name of a result code, e.g. "IBX_ERR_INVALID_ARG"; "IBX_(unknown)" for a
 * value that is not a result code. Never NULL. */
IBX_API const char *ibx_result_str(ibx_result result);

/* Lower-case dialect name: "sqlite", "postgresql", "mariadb", "sqlserver",
 * "auto"; "unknown" otherwise. Never NULL. */
IBX_API const char *ibx_dialect_name(ibx_dialect dialect);

/* The default retry delay: min(2^attempt seconds, 60 seconds), in ms.
 * attempt < 0 counts as 0 (1 s). Never overflows. */
IBX_API int64_t ibx_backoff_default_ms(int attempt);

/* Jittered delay: min(max, base * 2^(attempt-1)) * jitter, where jitter is
 * jitter_min + (jitter_max - jitter_min) * u and u in [0,1) is taken from
 * the top 53 bits of `random_bits`. attempt < 1 counts as 1 (base delay).
 * policy NULL or all-zero means the defaults. As the seed defines it, the
 * jitter applies after the cap, so a result may reach 1.5 x max. */
IBX_API int64_t ibx_backoff_jitter_ms(const ibx_backoff_policy *policy, int attempt,
                                      uint64_t random_bits);

/* Start a selector over `store_count` stores at store 0. A count below 0
 * counts as 0 (then ibx_selector_next() returns -1). */
IBX_API void ibx_selector_init(ibx_selector *selector, ibx_selection kind, int store_count);

/* The store to poll now, 0 .. store_count-1, or -1 when there is none. */
IBX_API int ibx_selector_next(const ibx_selector *selector);

/* Tell the selector that `store` returned `claimed` messages. Round-robin
 * moves to the next store whatever the count; drain-first stays while
 * claimed > 0 and moves on at 0. A report for a store other than the
 * current one only updates the empty streak. */
IBX_API void ibx_selector_report(ibx_selector *selector, int store, int claimed);

/* Nonzero when every store answered empty since the last message: time for
 * the idle backoff. */
IBX_API int ibx_selector_all_idle(const ibx_selector *selector);

/* Change the number of stores (discovery added or removed some); the
 * current position is kept when still valid, else wraps to 0. */
IBX_API void ibx_selector_resize(ibx_selector *selector, int store_count);

/* Format a time-ordered UUIDv7 (RFC 9562) as 36 lower-case characters plus
 * NUL into `out`. UUIDs made from one `state` sort strictly ascending, as
 * text and as bytes, even within one millisecond or when `unix_ms` goes
 * backwards. `random_a` and `random_b` supply the random bits. */
IBX_API void ibx_uuid_v7(ibx_uuid_state *state, int64_t unix_ms, uint64_t random_a,
                         uint64_t random_b, char out[37]);

/* Nonzero when `text` is a UUID in 8-4-4-4-12 hex form (either case). */
IBX_API int ibx_uuid_is_valid(const char *text);

/* Check a schema or table name: 1 to 63 characters of [A-Za-z0-9_], not
 * starting with a digit. Returns IBX_OK or IBX_ERR_INVALID_ARG. Names are
 * also quoted when used, but nothing else ever reaches SQL text. */
IBX_API ibx_result ibx_identifier_check(const char *name);

/* >>common-end api */

/* ---- Store ---------------------------------------------------------------- */

typedef struct ibx_store ibx_store;

/* How to open a store. All-zero fields take the defaults shown. */
typedef struct ibx_store_desc {
    const char *connection_string; /* ODBC connection string; or: */
    void *hdbc;                  /* a connected SQLHDBC the caller owns (not closed by us) */
    ibx_dialect dialect;         /* AUTO: detect from the driver */
    const char *schema;          /* default "infra" where the dialect has schemas; ignored by SQLite */
    const char *table;           /* default "Inbox" */
    const char *store_id;        /* name on every log line; default "inbox" */
    ibx_hooks hooks;             /* allocator, clock, logger, random (all-zero: defaults) */
} ibx_store_desc;

/* What a store is connected to. */
typedef struct ibx_store_info {
    ibx_dialect dialect;
    char dbms_name[64];          /* SQL_DBMS_NAME, e.g. "PostgreSQL" */
    char dbms_version[64];       /* the server's own version (asked by SQL) */
    char driver_name[64];        /* SQL_DRIVER_NAME, e.g. "psqlodbcw.so" */
    char store_id[64];
} ibx_store_info;

/* Open a store: connect (or adopt desc->hdbc), detect or force the dialect,
 * and prepare the session (isolation, autocommit, time zone). Touches the
 * database. On success *out is the store; on failure *out is still a store
 * handle when one could be allocated (so ibx_store_last_error() explains
 * the failure; close it) and NULL only on IBX_ERR_NO_MEMORY or a NULL desc.
 * Returns IBX_OK; IBX_ERR_INVALID_ARG (desc/out NULL, neither or both of
 * connection_string and hdbc, bad schema/table/store_id); IBX_ERR_DB or
 * IBX_ERR_DB_TRANSIENT (connect failed); IBX_ERR_UNSUPPORTED (a dialect that
 * is not implemented yet); IBX_ERR_NO_MEMORY. */
IBX_API ibx_result ibx_store_open(const ibx_store_desc *desc, ibx_store **out);

/* Close a store and its connection (a caller's hdbc is left open). A store
 * with an open unit of work is rolled back first. NULL is a no-op. */
IBX_API void ibx_store_close(ibx_store *store);

/* Fill *info. Returns IBX_OK or IBX_ERR_INVALID_ARG (NULL argument).
 * Does not touch the database. */
IBX_API ibx_result ibx_store_get_info(const ibx_store *store, ibx_store_info *info);

/* The store's last error (result IBX_OK when the last call succeeded).
 * Valid until the next call on the store. NULL store gives a static
 * "store is NULL" error. */
IBX_API const ibx_error *ibx_store_last_error(const ibx_store *store);

#ifdef __cplusplus
}
#endif
#endif /* IBX_H_INCLUDED */

/* ========================================================================== */
/*                              IMPLEMENTATION                                */
/* ========================================================================== */
#if defined(IBX_IMPLEMENTATION) && !defined(IBX__IMPLEMENTED)
#define IBX__IMPLEMENTED

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sql.h>
#include <sqlext.h>
#ifndef IBX_NO_THREADS
#include <pthread.h>
#endif

/* >>common-begin core */

#if !defined(IBX_NO_POSIX_CLOCK) && !defined(CLOCK_MONOTONIC)
#error "ibx: the default clock needs POSIX clock_gettime(): compile the implementation file with -D_POSIX_C_SOURCE=200809L (or -std=gnu99), or define IBX_NO_POSIX_CLOCK and pass a clock hook"
#endif

#ifndef IBX_ASSERT
#include <assert.h>
#define IBX_ASSERT(c) assert(c)
#endif

/* Core functions are static; some are used by only one of the two headers,
 * so tell the compiler that an unused one is not a mistake. */
#if defined(__GNUC__) || defined(__clang__)
#define IBX__PRIVATE static __attribute__((unused))
#define IBX__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define IBX__PRIVATE static
#define IBX__PRINTF(f, a)
#endif

/* A wrong unixodbc.h (copied from another architecture) or
 * BUILD_LEGACY_64_BIT_MODE silently breaks the driver ABI: stop the build. */
typedef char ibx__check_sqlbigint[(sizeof(SQLBIGINT) == 8) ? 1 : -1];
typedef char ibx__check_sqllen[(sizeof(SQLLEN) == sizeof(void *)) ? 1 : -1];

/* ODBC takes non-const SQLCHAR* even for input strings. */
#define IBX__SQLTEXT(s) ((SQLCHAR *)(uintptr_t)(const void *)(s))

/* >> hooks ------------------------------------------------------------------ */

/* The resolved hooks of one store: every member set. */
typedef struct ibx__hooks {
    ibx_allocator alloc;
    ibx_clock clock;
    ibx_logger log;
    ibx_random rng;
    uint64_t rng_state; /* state of the default random source */
} ibx__hooks;

static void *ibx__default_alloc(size_t size, void *user) { (void)user; return malloc(size); }
static void *ibx__default_realloc(void *ptr, size_t size, void *user) { (void)user; return realloc(ptr, size); }
static void ibx__default_free(void *ptr, void *user) { (void)user; free(ptr); }

#ifndef IBX_NO_POSIX_CLOCK
static int64_t ibx__clock_ms(clockid_t id) {
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) return 0;
    return (int64_t)ts.tv_sec * 1000 + (int64_t)(ts.tv_nsec / 1000000);
}
static int64_t ibx__default_now_utc_ms(void *user) { (void)user; return ibx__clock_ms(CLOCK_REALTIME); }
static int64_t ibx__default_monotonic_ms(void *user) { (void)user; return ibx__clock_ms(CLOCK_MONOTONIC); }
static void ibx__default_sleep_ms(int64_t ms, void *user) {
    struct timespec ts;
    (void)user;
    if (ms <= 0) return;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0) { /* interrupted by a signal: sleep the rest */ }
}
#else
static int64_t ibx__default_now_utc_ms(void *user) { (void)user; return (int64_t)time(NULL) * 1000; }
static int64_t ibx__default_monotonic_ms(void *user) { (void)user; return (int64_t)time(NULL) * 1000; }
static void ibx__default_sleep_ms(int64_t ms, void *user) { (void)ms; (void)user; }
#endif

static const char *ibx__level_name(ibx_log_level level) {
    switch (level) {
    case IBX_LOG_DEBUG: return "DEBUG";
    case IBX_LOG_INFO: return "INFO";
    case IBX_LOG_WARN: return "WARN";
    case IBX_LOG_ERROR: return "ERROR";
    case IBX_LOG_OFF: break;
    }
    return "?";
}

static void ibx__default_log(ibx_log_level level, const char *store_id, const char *message,
                             void *user) {
    (void)user;
    fprintf(stderr, "ibx %-5s [%s] %s\n", ibx__level_name(level), store_id, message);
}

/* splitmix64: tiny, fast, and good enough for jitter and UUID randomness. */
static uint64_t ibx__splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static uint64_t ibx__default_random(void *user) { return ibx__splitmix64((uint64_t *)user); }

static uint64_t ibx__random_seed(const void *salt) {
    uint64_t seed = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        if (fread(&seed, sizeof seed, 1, f) != 1) seed = 0;
        fclose(f);
    }
    /* No /dev/urandom (chroot, firmware): mix time and an address, so two
     * processes started in the same second still differ. */
    if (seed == 0) seed = (uint64_t)time(NULL) ^ ((uint64_t)(uintptr_t)salt << 16) ^ (uint64_t)clock();
    return seed;
}

/* Fill `h` from the caller's hooks (may be NULL), defaulting what is unset.
 * `h` must not move afterwards: the default random source points into it. */
IBX__PRIVATE void ibx__hooks_resolve(ibx__hooks *h, const ibx_hooks *given) {
    ibx_hooks none;
    memset(&none, 0, sizeof none);
    if (!given) given = &none;
    if (given->allocator.alloc && given->allocator.realloc && given->allocator.free) {
        h->alloc = given->allocator;
    } else {
        h->alloc.alloc = ibx__default_alloc;
        h->alloc.realloc = ibx__default_realloc;
        h->alloc.free = ibx__default_free;
        h->alloc.user = NULL;
    }
    h->clock = given->clock;
    if (!h->clock.now_utc_ms) h->clock.now_utc_ms = ibx__default_now_utc_ms;
    if (!h->clock.monotonic_ms) h->clock.monotonic_ms = ibx__default_monotonic_ms;
    if (!h->clock.sleep_ms) h->clock.sleep_ms = ibx__default_sleep_ms;
    h->log = given->logger;
    if (!h->log.log) { h->log.log = ibx__default_log; h->log.user = NULL; }
    if (h->log.min_level == 0) h->log.min_level = IBX_LOG_INFO;
    h->rng = given->random;
    if (!h->rng.next_u64) {
        h->rng_state = ibx__random_seed(h);
        h->rng.next_u64 = ibx__default_random;
        h->rng.user = &h->rng_state;
    }
}

IBX__PRIVATE void *ibx__alloc(const ibx__hooks *h, size_t size) {
    return h->alloc.alloc(size ? size : 1, h->alloc.user);
}
IBX__PRIVATE void *ibx__realloc(const ibx__hooks *h, void *ptr, size_t size) {
    return h->alloc.realloc(ptr, size ? size : 1, h->alloc.user);
}
IBX__PRIVATE void ibx__free(const ibx__hooks *h, void *ptr) {
    if (ptr) h->alloc.free(ptr, h->alloc.user);
}
IBX__PRIVATE char *ibx__strdup(const ibx__hooks *h, const char *s) {
    size_t n = strlen(s) + 1;
    char *copy = (char *)ibx__alloc(h, n);
    if (copy) memcpy(copy, s, n);
    return copy;
}
IBX__PRIVATE int64_t ibx__now_ms(const ibx__hooks *h) { return h->clock.now_utc_ms(h->clock.user); }
IBX__PRIVATE int64_t ibx__mono_ms(const ibx__hooks *h) { return h->clock.monotonic_ms(h->clock.user); }
IBX__PRIVATE void ibx__sleep_ms(const ibx__hooks *h, int64_t ms) { h->clock.sleep_ms(ms, h->clock.user); }
IBX__PRIVATE uint64_t ibx__random(const ibx__hooks *h) { return h->rng.next_u64(h->rng.user); }

IBX__PRIVATE int ibx__log_enabled(const ibx__hooks *h, ibx_log_level level) {
    return level >= h->log.min_level && h->log.min_level != IBX_LOG_OFF;
}

IBX__PRINTF(4, 5)
IBX__PRIVATE void ibx__log(const ibx__hooks *h, ibx_log_level level, const char *store_id,
                           const char *fmt, ...) {
    char line[768];
    va_list ap;
    if (!ibx__log_enabled(h, level)) return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    h->log.log(level, store_id ? store_id : "-", line, h->log.user);
}

/* Copy with truncation; always NUL-terminates a non-empty destination. */
IBX__PRIVATE void ibx__copy(char *dst, size_t cap, const char *src) {
    size_t n;
    if (cap == 0) return;
    n = src ? strlen(src) : 0;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, src, n);
    dst[n] = '\0';
}

/* >> results and errors ------------------------------------------------------ */

IBX__PRIVATE const char *ibx__result_str(ibx_result r) {
    switch (r) {
    case IBX_OK: return "IBX_OK";
    case IBX_EMPTY: return "IBX_EMPTY";
    case IBX_ERR_INVALID_ARG: return "IBX_ERR_INVALID_ARG";
    case IBX_ERR_OUT_OF_RANGE: return "IBX_ERR_OUT_OF_RANGE";
    case IBX_ERR_NOT_FOUND: return "IBX_ERR_NOT_FOUND";
    case IBX_ERR_NO_MEMORY: return "IBX_ERR_NO_MEMORY";
    case IBX_ERR_DB: return "IBX_ERR_DB";
    case IBX_ERR_DB_TRANSIENT: return "IBX_ERR_DB_TRANSIENT";
    case IBX_ERR_STATE: return "IBX_ERR_STATE";
    case IBX_ERR_UNSUPPORTED: return "IBX_ERR_UNSUPPORTED";
    }
    return "IBX_(unknown)";
}

IBX__PRIVATE void ibx__error_clear(ibx_error *e) {
    memset(e, 0, sizeof *e);
}

/* Record an error that did not come from the driver; returns `r`. */
IBX__PRINTF(4, 5)
IBX__PRIVATE ibx_result ibx__fail(ibx_error *e, ibx_result r, const char *where, const char *fmt,
                                  ...) {
    va_list ap;
    ibx__error_clear(e);
    e->result = r;
    ibx__copy(e->where, sizeof e->where, where);
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return r;
}

/* >> pure functions: backoff -------------------------------------------------- */

IBX__PRIVATE int64_t ibx__backoff_default_ms(int attempt) {
    if (attempt < 0) attempt = 0;
    if (attempt >= 6) return 60000; /* 2^6 s already exceeds the 60 s cap */
    return ((int64_t)1 << attempt) * 1000;
}

IBX__PRIVATE int64_t ibx__backoff_jitter_ms(const ibx_backoff_policy *policy, int attempt,
                                            uint64_t random_bits) {
    int64_t base = 200, max = 60000, delay;
    double jmin = 0.5, jmax = 1.5, u, result;
    int i;
    if (policy) {
        if (policy->base_ms > 0) base = policy->base_ms;
        if (policy->max_ms > 0) max = policy->max_ms;
        if (policy->jitter_min != 0.0 || policy->jitter_max != 0.0) {
            jmin = policy->jitter_min;
            jmax = policy->jitter_max;
        }
    }
    if (attempt < 1) attempt = 1;
    delay = base < max ? base : max;
    for (i = 1; i < attempt && delay < max; i++) delay = delay > max / 2 ? max : delay * 2;
    u = (double)(random_bits >> 11) * (1.0 / 9007199254740992.0); /* 2^-53: u in [0,1) */
    result = (double)delay * (jmin + (jmax - jmin) * u);
    if (result < 0.0) return 0;
    if (result > 9.0e18) return INT64_MAX;
    return (int64_t)result;
}

/* >> pure functions: selection ------------------------------------------------ */

IBX__PRIVATE void ibx__selector_init(ibx_selector *s, ibx_selection kind, int store_count) {
    s->kind = kind;
    s->store_count = store_count > 0 ? store_count : 0;
    s->current = 0;
    s->empty_streak = 0;
}

IBX__PRIVATE int ibx__selector_next(const ibx_selector *s) {
    return s->store_count > 0 ? s->current : -1;
}

IBX__PRIVATE void ibx__selector_report(ibx_selector *s, int store, int claimed) {
    if (s->store_count <= 0) return;
    if (claimed > 0) s->empty_streak = 0;
    else if (s->empty_streak < INT_MAX) s->empty_streak++;
    if (store != s->current) return;
    if (s->kind == IBX_SELECT_DRAIN_FIRST && claimed > 0) return;
    s->current = (s->current + 1) % s->store_count;
}

IBX__PRIVATE int ibx__selector_all_idle(const ibx_selector *s) {
    return s->store_count <= 0 || s->empty_streak >= s->store_count;
}

IBX__PRIVATE void ibx__selector_resize(ibx_selector *s, int store_count) {
    s->store_count = store_count > 0 ? store_count : 0;
    if (s->current >= s->store_count) s->current = 0;
    s->empty_streak = 0;
}

/* >> pure functions: UUIDs and identifiers ------------------------------------ */

/* UUIDv7 layout used here (RFC 9562 §6.2 method 1): 48-bit Unix ms, version
 * 7, a 42-bit counter split over rand_a (12 bits) and the top of rand_b
 * (30 bits), then 32 random bits. The counter starts at a random value with
 * its top bit clear (room to count) each new millisecond. */
IBX__PRIVATE void ibx__uuid_v7(ibx_uuid_state *st, int64_t unix_ms, uint64_t random_a,
                               uint64_t random_b, char out[37]) {
    static const char hex[] = "0123456789abcdef";
    const uint64_t counter_limit = (uint64_t)1 << 42;
    unsigned char b[16];
    uint64_t ms, c;
    int i, o = 0;
    if (unix_ms < 0) unix_ms = 0;
    if (unix_ms > st->last_ms) {
        st->last_ms = unix_ms;
        st->counter = random_a & ((counter_limit >> 1) - 1);
    } else if (++st->counter >= counter_limit) {
        st->last_ms++; /* counter exhausted: borrow the next millisecond */
        st->counter = 0;
    }
    ms = (uint64_t)st->last_ms & 0xFFFFFFFFFFFFULL;
    c = st->counter;
    for (i = 0; i < 6; i++) b[i] = (unsigned char)(ms >> (40 - 8 * i));
    b[6] = (unsigned char)(0x70 | ((c >> 38) & 0x0F));
    b[7] = (unsigned char)(c >> 30);
    b[8] = (unsigned char)(0x80 | ((c >> 24) & 0x3F));
    b[9] = (unsigned char)(c >> 16);
    b[10] = (unsigned char)(c >> 8);
    b[11] = (unsigned char)c;
    for (i = 0; i < 4; i++) b[12 + i] = (unsigned char)(random_b >> (24 - 8 * i));
    for (i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = '\0';
}

IBX__PRIVATE int ibx__is_hex(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

IBX__PRIVATE int ibx__uuid_is_valid(const char *s) {
    int i;
    if (!s) return 0;
    for (i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-') return 0;
        } else if (!ibx__is_hex(s[i])) {
            return 0;
        }
    }
    return s[36] == '\0';
}

#define IBX__IDENTIFIER_MAX 63

IBX__PRIVATE ibx_result ibx__identifier_check(const char *name) {
    size_t i;
    if (!name || !name[0]) return IBX_ERR_INVALID_ARG;
    for (i = 0; name[i]; i++) {
        char c = name[i];
        int letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
        int digit = c >= '0' && c <= '9';
        if (i >= IBX__IDENTIFIER_MAX || !(letter || (digit && i > 0))) return IBX_ERR_INVALID_ARG;
    }
    return IBX_OK;
}

/* >> dialects ------------------------------------------------------------------ */

/* How a failure is classified. All but PERMANENT give IBX_ERR_DB_TRANSIENT;
 * only TRANSIENT (deadlock, serialization, busy, lock wait) is redone at
 * once: a timed-out statement would likely time out again, and after a
 * lost connection the commit's outcome is unknown. */
enum { IBX__FAULT_PERMANENT = 0, IBX__FAULT_TRANSIENT = 1, IBX__FAULT_TIMEOUT = 2, IBX__FAULT_LOST = 3 };

typedef struct ibx__native_fault {
    long native;
    int fault;
} ibx__native_fault;

/* Everything that differs between databases outside the statements
 * themselves. The headers' statement tables are indexed by the same id. */
typedef struct ibx__dialect {
    ibx_dialect id;
    const char *name;           /* printed in logs and test lines */
    const char *dbms_match;     /* SQL_DBMS_NAME starts with this (case-insensitive) */
    const char *dbms_match2;    /* a second accepted name, or NULL */
    int implemented;            /* 0: detected, but statements are not written yet */
    int tx_by_sql;              /* autocommit stays on; BEGIN/COMMIT/ROLLBACK issued as SQL */
    const char *begin_sql;      /* opens a write transaction when tx_by_sql */
    SQLULEN isolation;          /* set on our own connections; 0 = leave the driver's */
    int has_schemas;            /* tables are qualified by a schema */
    char quote_open, quote_close;
    const char *connect_key;    /* connection-string key the dialect wants set ... */
    const char *connect_extra;  /* ... and what to append when the caller did not set it */
    const char *session_sql;    /* run once after connecting (our own connections), or NULL */
    const char *version_sql;    /* returns the server version as one text column */
    const ibx__native_fault *natives; /* native codes that are not permanent; {0,0} ends */
} ibx__dialect;

static const ibx__native_fault ibx__sqlite_natives[] = {
    {5, IBX__FAULT_TRANSIENT}, /* SQLITE_BUSY: another writer holds the lock */
    {6, IBX__FAULT_TRANSIENT}, /* SQLITE_LOCKED */
    {0, 0}};
static const ibx__native_fault ibx__mariadb_natives[] = {
    {1205, IBX__FAULT_TRANSIENT}, /* lock wait timeout (SQLSTATE HY000) */
    {1213, IBX__FAULT_TRANSIENT}, /* deadlock: the whole transaction was rolled back */
    {1020, IBX__FAULT_TRANSIENT}, /* record changed since last read (snapshot isolation) */
    {1969, IBX__FAULT_TIMEOUT},   /* max_statement_time exceeded */
    {2002, IBX__FAULT_TRANSIENT}, /* cannot connect: server not (yet) there */
    {1927, IBX__FAULT_LOST},      /* connection killed */
    {2006, IBX__FAULT_LOST},      /* server has gone away */
    {2013, IBX__FAULT_LOST},      /* lost connection during query */
    {4031, IBX__FAULT_LOST},      /* disconnected by the server (idle timeout) */
    {5014, IBX__FAULT_LOST},      /* write error: broken pipe (HY000) */
    {0, 0}};
static const ibx__native_fault ibx__sqlserver_natives[] = {
    {1205, IBX__FAULT_TRANSIENT},  /* chosen as deadlock victim */
    {1222, IBX__FAULT_TRANSIENT},  /* lock request time out */
    {-2, IBX__FAULT_TIMEOUT},      /* client-side query timeout */
    {233, IBX__FAULT_LOST},        /* no process on the other end of the pipe */
    {10053, IBX__FAULT_LOST},      /* connection aborted */
    {10054, IBX__FAULT_LOST},      /* connection reset by peer */
    {20009, IBX__FAULT_TRANSIENT}, /* FreeTDS: server unavailable */
    {0, 0}};
static const ibx__native_fault ibx__no_natives[] = {{0, 0}};

/* Indexed by ibx_dialect. */
static const ibx__dialect ibx__dialects[] = {
    {IBX_DIALECT_AUTO, "auto", "", NULL, 0, 0, NULL, 0, 0, '"', '"', NULL, NULL, NULL, NULL,
     ibx__no_natives},
    {IBX_DIALECT_SQLITE, "sqlite", "SQLite", NULL, 1, 1, "BEGIN IMMEDIATE", 0, 0, '"', '"', NULL,
     NULL, NULL, "SELECT sqlite_version()", ibx__sqlite_natives},
    /* psqlODBC's default Protocol wraps each statement in a savepoint: twice
     * the round trips, and a failed statement would not abort the unit.
     * 7.4-1 rolls the whole transaction back on error, which is what we do
     * anyway. */
    {IBX_DIALECT_POSTGRESQL, "postgresql", "PostgreSQL", NULL, 1, 0, NULL,
     SQL_TXN_READ_COMMITTED, 1, '"', '"', "Protocol=", "Protocol=7.4-1;",
     "SET TIME ZONE 'UTC'", "SHOW server_version", ibx__no_natives},
    /* READ COMMITTED: at REPEATABLE READ a claim's gap locks block producers. */
    {IBX_DIALECT_MARIADB, "mariadb", "MariaDB", "MySQL", 0, 0, NULL, SQL_TXN_READ_COMMITTED, 1,
     '`', '`', NULL, NULL, "SET time_zone = '+00:00'", "SELECT VERSION()", ibx__mariadb_natives},
    {IBX_DIALECT_SQLSERVER, "sqlserver", "Microsoft SQL Server", NULL, 0, 0, NULL,
     SQL_TXN_READ_COMMITTED, 1, '[', ']', NULL, NULL, NULL,
     "SELECT CAST(SERVERPROPERTY('ProductVersion') AS NVARCHAR(64))", ibx__sqlserver_natives},
};
#define IBX__DIALECT_COUNT ((int)(sizeof ibx__dialects / sizeof ibx__dialects[0]))

IBX__PRIVATE const ibx__dialect *ibx__dialect_get(ibx_dialect id) {
    int i = (int)id;
    return (i > 0 && i < IBX__DIALECT_COUNT) ? &ibx__dialects[i] : NULL;
}

IBX__PRIVATE const char *ibx__dialect_name(ibx_dialect id) {
    int i = (int)id;
    return (i >= 0 && i < IBX__DIALECT_COUNT) ? ibx__dialects[i].name : "unknown";
}

IBX__PRIVATE int ibx__starts_with_nocase(const char *s, const char *prefix) {
    for (; *prefix; s++, prefix++) {
        char a = *s, b = *prefix;
        if (a >= 'A' && a <= 'Z') a = (char)(a - 'A' + 'a');
        if (b >= 'A' && b <= 'Z') b = (char)(b - 'A' + 'a');
        if (a != b) return 0;
    }
    return 1;
}

IBX__PRIVATE int ibx__contains_nocase(const char *s, const char *needle) {
    for (; *s; s++)
        if (ibx__starts_with_nocase(s, needle)) return 1;
    return 0;
}

/* The dialect for an SQL_DBMS_NAME, or NULL when none matches. */
IBX__PRIVATE const ibx__dialect *ibx__dialect_detect(const char *dbms_name) {
    int i;
    for (i = 1; i < IBX__DIALECT_COUNT; i++) {
        const ibx__dialect *d = &ibx__dialects[i];
        if (ibx__starts_with_nocase(dbms_name, d->dbms_match) ||
            (d->dbms_match2 && ibx__starts_with_nocase(dbms_name, d->dbms_match2)))
            return d;
    }
    return NULL;
}

/* Classify a failure. SQLSTATE classes first (portable), then the dialect's
 * native codes, which matter where drivers report everything as HY000
 * (SQLite, MariaDB's lock wait timeout and broken pipe). */
IBX__PRIVATE int ibx__classify(const ibx__dialect *d, const char *sqlstate, long native) {
    const ibx__native_fault *n;
    if (strncmp(sqlstate, "08", 2) == 0) return IBX__FAULT_LOST;         /* connection exception */
    if (strcmp(sqlstate, "57P01") == 0 || strcmp(sqlstate, "57P02") == 0) /* admin shutdown, crash */
        return IBX__FAULT_LOST;
    if (strncmp(sqlstate, "40", 2) == 0) return IBX__FAULT_TRANSIENT;    /* 40001, 40P01, 40003 */
    if (strcmp(sqlstate, "57014") == 0 || strcmp(sqlstate, "HYT00") == 0 ||
        strcmp(sqlstate, "HYT01") == 0)
        return IBX__FAULT_TIMEOUT; /* statement cancelled by a timeout */
    if (strcmp(sqlstate, "55P03") == 0 || strcmp(sqlstate, "57P03") == 0 ||
        strncmp(sqlstate, "53", 2) == 0)
        return IBX__FAULT_TRANSIENT; /* lock not available, cannot connect now, resources */
    if (d && native != 0)
        for (n = d->natives; n->native != 0; n++)
            if (n->native == native) return n->fault;
    return IBX__FAULT_PERMANENT;
}

/* Expand a statement template: "{X}" with X in A..Z is replaced by
 * names[X - 'A'] (already validated and quoted by the caller); any other
 * text is copied. Returns a new string from the allocator, or NULL. */
IBX__PRIVATE char *ibx__sql_expand(const ibx__hooks *h, const char *tmpl,
                                   const char *const names[26]) {
    size_t len = 0, o = 0;
    const char *p;
    char *out;
    for (p = tmpl; *p; p++) {
        if (p[0] == '{' && p[1] >= 'A' && p[1] <= 'Z' && p[2] == '}' && names[p[1] - 'A']) {
            len += strlen(names[p[1] - 'A']);
            p += 2;
        } else {
            len++;
        }
    }
    out = (char *)ibx__alloc(h, len + 1);
    if (!out) return NULL;
    for (p = tmpl; *p; p++) {
        if (p[0] == '{' && p[1] >= 'A' && p[1] <= 'Z' && p[2] == '}' && names[p[1] - 'A']) {
            size_t n = strlen(names[p[1] - 'A']);
            memcpy(out + o, names[p[1] - 'A'], n);
            o += n;
            p += 2;
        } else {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
    return out;
}

/* Quote a validated identifier, optionally qualified: "schema"."table". */
IBX__PRIVATE char *ibx__quote_name(const ibx__hooks *h, const ibx__dialect *d, const char *schema,
                                   const char *name) {
    size_t n = strlen(name) + (schema ? strlen(schema) + 3 : 0) + 3;
    char *out = (char *)ibx__alloc(h, n);
    if (!out) return NULL;
    if (schema)
        snprintf(out, n, "%c%s%c.%c%s%c", d->quote_open, schema, d->quote_close, d->quote_open,
                 name, d->quote_close);
    else
        snprintf(out, n, "%c%s%c", d->quote_open, name, d->quote_close);
    return out;
}

/* >> growable buffers and list literals -------------------------------------------- */

/* A byte buffer that only grows; reused across calls so that steady-state
 * work allocates nothing. */
typedef struct ibx__buf {
    char *data;
    size_t len;
    size_t cap;
} ibx__buf;

IBX__PRIVATE int ibx__buf_reserve(const ibx__hooks *h, ibx__buf *b, size_t extra) {
    size_t want = b->len + extra + 1, cap = b->cap ? b->cap : 256;
    char *grown;
    if (want <= b->cap) return 1;
    while (cap < want) cap *= 2;
    grown = (char *)ibx__realloc(h, b->data, cap);
    if (!grown) return 0;
    b->data = grown;
    b->cap = cap;
    return 1;
}

IBX__PRIVATE int ibx__buf_add(const ibx__hooks *h, ibx__buf *b, const void *bytes, size_t n) {
    if (!ibx__buf_reserve(h, b, n)) return 0;
    if (n) memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 1;
}

IBX__PRIVATE void ibx__buf_free(const ibx__hooks *h, ibx__buf *b) {
    ibx__free(h, b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* A list of values passed as one text parameter, so that a whole batch is
 * one statement: PostgreSQL array literal {"a","b"} (CAST(? AS uuid[])),
 * elsewhere a JSON array ["a","b"] (json_each, JSON_TABLE, OPENJSON). */
IBX__PRIVATE int ibx__list_add(const ibx__hooks *h, ibx__buf *b, const ibx__dialect *d,
                               const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    size_t i;
    int pg = d->id == IBX_DIALECT_POSTGRESQL;
    if (b->len == 0 && !ibx__buf_add(h, b, pg ? "{" : "[", 1)) return 0;
    if (b->len > 1 && !ibx__buf_add(h, b, ",", 1)) return 0;
    if (!ibx__buf_reserve(h, b, n * 6 + 2)) return 0; /* worst case: all \u00XX */
    b->data[b->len++] = '"';
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            b->data[b->len++] = '\\';
            b->data[b->len++] = (char)c;
        } else if (c < 0x20 && !pg) {
            memcpy(b->data + b->len, "\\u00", 4);
            b->data[b->len + 4] = hex[c >> 4];
            b->data[b->len + 5] = hex[c & 15];
            b->len += 6;
        } else {
            b->data[b->len++] = (char)c;
        }
    }
    b->data[b->len++] = '"';
    b->data[b->len] = '\0';
    return 1;
}

/* A NULL element. */
IBX__PRIVATE int ibx__list_add_null(const ibx__hooks *h, ibx__buf *b, const ibx__dialect *d) {
    int pg = d->id == IBX_DIALECT_POSTGRESQL;
    if (b->len == 0 && !ibx__buf_add(h, b, pg ? "{" : "[", 1)) return 0;
    if (b->len > 1 && !ibx__buf_add(h, b, ",", 1)) return 0;
    return ibx__buf_add(h, b, pg ? "NULL" : "null", 4);
}

IBX__PRIVATE int ibx__list_end(const ibx__hooks *h, ibx__buf *b, const ibx__dialect *d) {
    int pg = d->id == IBX_DIALECT_POSTGRESQL;
    if (b->len == 0) return ibx__buf_add(h, b, pg ? "{}" : "[]", 2);
    return ibx__buf_add(h, b, pg ? "}" : "]", 1);
}

/* >> odbc: connection state ----------------------------------------------------- */

#define IBX__MAX_STMTS 48
#define IBX__UNIT_RETRIES 3

/* One ODBC connection with its dialect, prepared statements and the place
 * its errors go. Owned by a store. */
typedef struct ibx__db {
    const ibx__hooks *hooks;
    const char *store_id;        /* for log lines */
    ibx_error *err;              /* the owning handle's last error */
    const ibx__dialect *d;
    SQLHENV env;
    SQLHDBC dbc;
    int own_connection;          /* opened from a string: ours to close and reopen */
    char *connstr;               /* the string actually used, kept for reconnects */
    ibx_dialect forced;          /* dialect the caller forced, or AUTO */
    int connected;
    int lost;                    /* the connection died: reopen before the next use */
    int in_tx;                   /* a unit of work is open */
    int fault;                   /* IBX__FAULT_* of the last diagnosed failure */
    char dbms_name[64];
    char dbms_version[64];
    char driver_name[64];
    SQLHSTMT stmt[IBX__MAX_STMTS]; /* prepared once, reused; freed on close or loss */
} ibx__db;

/* >> odbc: diagnostics ------------------------------------------------------------ */

/* Read every diagnostic record of `handle` into db->err and classify the
 * failure. SQLGetDiagRec returns SQL_SUCCESS_WITH_INFO for a truncated
 * message: that is still a record, not the end. Returns the result code. */
IBX__PRIVATE ibx_result ibx__diag(ibx__db *db, SQLSMALLINT type, SQLHANDLE handle,
                                  const char *where) {
    ibx_error *e = db->err;
    SQLSMALLINT rec;
    size_t used = 0;
    int fault = IBX__FAULT_PERMANENT, have_primary = 0;
    ibx__error_clear(e);
    ibx__copy(e->where, sizeof e->where, where);
    for (rec = 1; rec < 64; rec++) {
        SQLCHAR state[6], text[SQL_MAX_MESSAGE_LENGTH];
        SQLINTEGER native = 0;
        SQLSMALLINT text_len = 0;
        SQLRETURN rc = SQLGetDiagRec(type, handle, rec, state, &native, text,
                                     (SQLSMALLINT)sizeof text, &text_len);
        int f;
        if (rc != SQL_SUCCESS && rc != SQL_SUCCESS_WITH_INFO) break;
        state[5] = '\0';
        f = ibx__classify(db->d, (const char *)state, (long)native);
        if (f > fault) fault = f;
        /* The first record that is not a warning (class 01) is the cause. */
        if (!have_primary && strncmp((const char *)state, "01", 2) != 0) {
            ibx__copy(e->sqlstate, sizeof e->sqlstate, (const char *)state);
            e->native = (long)native;
            have_primary = 1;
        }
        if (used + 4 < sizeof e->message) {
            int n = snprintf(e->message + used, sizeof e->message - used, "%s[%s/%ld] %s",
                             used ? " | " : "", (const char *)state, (long)native,
                             (const char *)text);
            used = n < 0 ? used : used + (size_t)n;
            if (used >= sizeof e->message) used = sizeof e->message - 1;
        }
    }
    if (!have_primary && rec > 1) {
        /* Only warnings: keep the first one's codes. */
        SQLCHAR state[6];
        SQLINTEGER native = 0;
        SQLSMALLINT len = 0;
        if (SQL_SUCCEEDED(SQLGetDiagRec(type, handle, 1, state, &native, NULL, 0, &len))) {
            state[5] = '\0';
            ibx__copy(e->sqlstate, sizeof e->sqlstate, (const char *)state);
            e->native = (long)native;
        }
    }
    if (rec == 1) ibx__copy(e->message, sizeof e->message, "no diagnostic record from the driver");
    {
        /* One log line per event: drivers put newlines into messages. */
        char *c;
        for (c = e->message; *c; c++)
            if (*c == '\n' || *c == '\r' || *c == '\t') *c = ' ';
    }
    /* A driver may report a dead connection with an ordinary code; ask. */
    if (db->dbc && db->connected) {
        SQLUINTEGER dead = 0;
        if (SQL_SUCCEEDED(SQLGetConnectAttr(db->dbc, SQL_ATTR_CONNECTION_DEAD, &dead, 0, NULL)) &&
            dead == SQL_CD_TRUE)
            fault = IBX__FAULT_LOST;
    }
    if (fault == IBX__FAULT_LOST) {
        e->connection_lost = 1;
        db->lost = 1;
    }
    e->result = fault == IBX__FAULT_PERMANENT ? IBX_ERR_DB : IBX_ERR_DB_TRANSIENT;
    db->fault = fault;
    ibx__log(db->hooks, IBX_LOG_DEBUG, db->store_id, "%s failed: %s", where, e->message);
    return e->result;
}

/* IBX_OK for a successful return code, else the diagnosed error. */
IBX__PRIVATE ibx_result ibx__check(ibx__db *db, SQLRETURN rc, SQLSMALLINT type, SQLHANDLE h,
                                   const char *where) {
    if (rc == SQL_SUCCESS || rc == SQL_SUCCESS_WITH_INFO) return IBX_OK;
    if (rc == SQL_INVALID_HANDLE)
        return ibx__fail(db->err, IBX_ERR_STATE, where, "invalid ODBC handle");
    return ibx__diag(db, type, h, where);
}

/* >> odbc: connect ---------------------------------------------------------------- */

IBX__PRIVATE void ibx__db_free_statements(ibx__db *db) {
    int i;
    for (i = 0; i < IBX__MAX_STMTS; i++) {
        if (db->stmt[i]) SQLFreeHandle(SQL_HANDLE_STMT, db->stmt[i]);
        db->stmt[i] = NULL;
    }
}

/* One text value from SQLGetInfo into a fixed buffer ("" when unknown). */
IBX__PRIVATE void ibx__get_info(ibx__db *db, SQLUSMALLINT what, char *out, size_t cap) {
    SQLCHAR buf[128];
    SQLSMALLINT len = 0;
    out[0] = '\0';
    if (SQL_SUCCEEDED(SQLGetInfo(db->dbc, what, buf, (SQLSMALLINT)sizeof buf, &len))) {
        buf[sizeof buf - 1] = '\0';
        ibx__copy(out, cap, (const char *)buf);
    }
}

IBX__PRIVATE ibx_result ibx__exec_direct(ibx__db *db, const char *sql, const char *where);
IBX__PRIVATE ibx_result ibx__end_tran(ibx__db *db, SQLSMALLINT completion, const char *where);
IBX__PRIVATE ibx_result ibx__query_text(ibx__db *db, const char *sql, char *out, size_t cap);

/* After connecting: detect the dialect, then (own connections only) set the
 * session up. Leaves no transaction open. */
IBX__PRIVATE ibx_result ibx__db_setup(ibx__db *db) {
    const ibx__dialect *d;
    ibx_result r;
    ibx__get_info(db, SQL_DBMS_NAME, db->dbms_name, sizeof db->dbms_name);
    ibx__get_info(db, SQL_DRIVER_NAME, db->driver_name, sizeof db->driver_name);
    ibx__get_info(db, SQL_DBMS_VER, db->dbms_version, sizeof db->dbms_version);
    d = db->forced != IBX_DIALECT_AUTO ? ibx__dialect_get(db->forced)
                                       : ibx__dialect_detect(db->dbms_name);
    if (!d)
        return ibx__fail(db->err, IBX_ERR_UNSUPPORTED, "SQLGetInfo(SQL_DBMS_NAME)",
                         "unknown database '%s' (driver %s); force a dialect if it speaks one "
                         "of sqlite, postgresql, mariadb, sqlserver",
                         db->dbms_name, db->driver_name);
    db->d = d;
    if (!d->implemented)
        return ibx__fail(db->err, IBX_ERR_UNSUPPORTED, "dialect",
                         "%s (%s) is detected, but the %s dialect is not implemented yet in "
                         "version " IBX_VERSION_STRING,
                         db->dbms_name, db->driver_name, d->name);
    if (!db->own_connection) return IBX_OK; /* the caller's session is the caller's */
    r = ibx__check(db,
                   SQLSetConnectAttr(db->dbc, SQL_ATTR_AUTOCOMMIT,
                                     (SQLPOINTER)(uintptr_t)(d->tx_by_sql ? SQL_AUTOCOMMIT_ON
                                                                          : SQL_AUTOCOMMIT_OFF),
                                     SQL_IS_UINTEGER),
                   SQL_HANDLE_DBC, db->dbc, "SQLSetConnectAttr(AUTOCOMMIT)");
    if (r == IBX_OK && d->isolation)
        r = ibx__check(db,
                       SQLSetConnectAttr(db->dbc, SQL_ATTR_TXN_ISOLATION,
                                         (SQLPOINTER)(uintptr_t)d->isolation, SQL_IS_UINTEGER),
                       SQL_HANDLE_DBC, db->dbc, "SQLSetConnectAttr(TXN_ISOLATION)");
    if (r == IBX_OK && d->session_sql) r = ibx__exec_direct(db, d->session_sql, "session setup");
    if (r == IBX_OK && !d->tx_by_sql) r = ibx__end_tran(db, SQL_COMMIT, "session setup commit");
    if (r == IBX_OK && d->version_sql) {
        /* Best effort: SQL_DBMS_VER stays when the server will not say. */
        char version[64];
        if (ibx__query_text(db, d->version_sql, version, sizeof version) == IBX_OK)
            ibx__copy(db->dbms_version, sizeof db->dbms_version, version);
        else
            ibx__error_clear(db->err);
        if (!d->tx_by_sql) ibx__end_tran(db, SQL_ROLLBACK, "version query end");
    }
    return r;
}

IBX__PRIVATE ibx_result ibx__driver_connect(ibx__db *db, const char *connstr) {
    SQLCHAR out[1024];
    SQLSMALLINT out_len = 0;
    SQLRETURN rc = SQLDriverConnect(db->dbc, NULL, IBX__SQLTEXT(connstr), SQL_NTS, out,
                                    (SQLSMALLINT)sizeof out, &out_len, SQL_DRIVER_NOPROMPT);
    if (!SQL_SUCCEEDED(rc)) return ibx__diag(db, SQL_HANDLE_DBC, db->dbc, "SQLDriverConnect");
    db->connected = 1;
    db->lost = 0;
    return IBX_OK;
}

IBX__PRIVATE void ibx__db_disconnect(ibx__db *db) {
    ibx__db_free_statements(db);
    if (db->connected) {
        /* SQLite refuses to disconnect with an open transaction. */
        if (db->in_tx) SQLEndTran(SQL_HANDLE_DBC, db->dbc, SQL_ROLLBACK);
        SQLDisconnect(db->dbc);
    }
    db->connected = 0;
    db->in_tx = 0;
}

/* Connect with a connection string. When the detected dialect wants a key
 * the caller did not set (psqlODBC's Protocol), reconnect once with it. */
IBX__PRIVATE ibx_result ibx__db_connect(ibx__db *db, const char *connstr) {
    ibx_result r;
    const char *extra;
    size_t n;
    db->own_connection = 1;
    if (!db->env) {
        if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_ENV, NULL, &db->env))) {
            db->env = NULL;
            return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "SQLAllocHandle(ENV)",
                             "cannot allocate an ODBC environment (is a driver manager installed?)");
        }
        r = ibx__check(db,
                       SQLSetEnvAttr(db->env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER)SQL_OV_ODBC3, 0),
                       SQL_HANDLE_ENV, db->env, "SQLSetEnvAttr(ODBC_VERSION)");
        if (r != IBX_OK) return r;
    }
    if (!db->dbc && !SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_DBC, db->env, &db->dbc))) {
        db->dbc = NULL;
        return ibx__diag(db, SQL_HANDLE_ENV, db->env, "SQLAllocHandle(DBC)");
    }
    if (!db->connstr) {
        db->connstr = ibx__strdup(db->hooks, connstr);
        if (!db->connstr) return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "connection_string", "out of memory");
    }
    r = ibx__driver_connect(db, db->connstr);
    if (r != IBX_OK) return r;
    r = ibx__db_setup(db);
    if (r != IBX_OK) return r;
    extra = db->d->connect_extra;
    if (!extra || ibx__contains_nocase(db->connstr, db->d->connect_key)) return IBX_OK;
    n = strlen(db->connstr);
    {
        char *longer = (char *)ibx__alloc(db->hooks, n + strlen(extra) + 2);
        if (!longer) return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "connection_string", "out of memory");
        memcpy(longer, db->connstr, n);
        longer[n] = '\0';
        if (n > 0 && longer[n - 1] != ';') strcat(longer, ";");
        strcat(longer, extra);
        ibx__free(db->hooks, db->connstr);
        db->connstr = longer;
    }
    ibx__db_disconnect(db);
    r = ibx__driver_connect(db, db->connstr);
    return r == IBX_OK ? ibx__db_setup(db) : r;
}

/* Use a connection the caller opened; it stays theirs. */
IBX__PRIVATE ibx_result ibx__db_adopt(ibx__db *db, void *hdbc) {
    db->own_connection = 0;
    db->dbc = (SQLHDBC)hdbc;
    db->connected = 1;
    return ibx__db_setup(db);
}

/* Reopen a lost connection of our own before the next unit of work. */
IBX__PRIVATE ibx_result ibx__db_ensure(ibx__db *db) {
    ibx_result r;
    if (!db->lost && db->connected) return IBX_OK;
    if (!db->own_connection)
        return ibx__fail(db->err, IBX_ERR_DB_TRANSIENT, "connection",
                         "the caller's connection was lost; reconnect it and open the store again");
    ibx__log(db->hooks, IBX_LOG_WARN, db->store_id, "connection lost earlier: reconnecting");
    ibx__db_disconnect(db);
    r = ibx__driver_connect(db, db->connstr);
    if (r == IBX_OK) r = ibx__db_setup(db);
    if (r == IBX_OK) ibx__log(db->hooks, IBX_LOG_INFO, db->store_id, "reconnected");
    return r;
}

IBX__PRIVATE void ibx__db_close(ibx__db *db) {
    if (db->own_connection) {
        ibx__db_disconnect(db);
        if (db->dbc) SQLFreeHandle(SQL_HANDLE_DBC, db->dbc);
        if (db->env) SQLFreeHandle(SQL_HANDLE_ENV, db->env);
    } else {
        ibx__db_free_statements(db);
    }
    ibx__free(db->hooks, db->connstr);
    db->connstr = NULL;
    db->dbc = NULL;
    db->env = NULL;
    db->connected = 0;
}

/* >> odbc: statements and parameters ------------------------------------------------- */

/* A parameter value; bound by ibx__exec. Text and blobs point at the
 * caller's memory, which must stay valid until the statement has run. */
typedef struct ibx__param {
    SQLSMALLINT c_type;
    SQLSMALLINT sql_type;
    SQLULEN size;
    SQLPOINTER ptr;
    SQLLEN ind;
    SQLBIGINT i64;
} ibx__param;

/* Text of `len` bytes (len (size_t)-1: up to the NUL); NULL text binds SQL NULL. */
IBX__PRIVATE void ibx__p_text(ibx__param *p, const char *text, size_t len) {
    if (text && len == (size_t)-1) len = strlen(text);
    p->c_type = SQL_C_CHAR;
    p->sql_type = len > 4000 ? SQL_LONGVARCHAR : SQL_VARCHAR;
    p->size = text ? (len ? (SQLULEN)len : 1) : 1;
    p->ptr = (SQLPOINTER)(uintptr_t)(const void *)text;
    p->ind = text ? (SQLLEN)len : SQL_NULL_DATA;
    p->i64 = 0;
}

IBX__PRIVATE void ibx__p_i64(ibx__param *p, int64_t v) {
    p->c_type = SQL_C_SBIGINT;
    p->sql_type = SQL_BIGINT;
    p->size = 0;
    p->i64 = (SQLBIGINT)v;
    p->ptr = NULL; /* pointed at p->i64 when bound: the struct may be copied before */
    p->ind = 0;
}

IBX__PRIVATE void ibx__p_blob(ibx__param *p, const void *data, size_t len) {
    p->c_type = SQL_C_BINARY;
    p->sql_type = len > 8000 ? SQL_LONGVARBINARY : SQL_VARBINARY;
    p->size = len ? (SQLULEN)len : 1;
    p->ptr = (SQLPOINTER)(uintptr_t)data;
    p->ind = data ? (SQLLEN)len : SQL_NULL_DATA;
    p->i64 = 0;
}

/* The cached statement for `slot`, prepared from `sql` on first use. */
IBX__PRIVATE ibx_result ibx__stmt(ibx__db *db, int slot, const char *sql, SQLHSTMT *out) {
    SQLHSTMT st;
    ibx_result r;
    IBX_ASSERT(slot >= 0 && slot < IBX__MAX_STMTS);
    if (db->stmt[slot]) {
        *out = db->stmt[slot];
        return IBX_OK;
    }
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, db->dbc, &st)))
        return ibx__diag(db, SQL_HANDLE_DBC, db->dbc, "SQLAllocHandle(STMT)");
    r = ibx__check(db, SQLPrepare(st, IBX__SQLTEXT(sql), SQL_NTS), SQL_HANDLE_STMT, st,
                   "SQLPrepare");
    if (r != IBX_OK) {
        SQLFreeHandle(SQL_HANDLE_STMT, st);
        return r;
    }
    db->stmt[slot] = st;
    *out = st;
    return IBX_OK;
}

IBX__PRIVATE ibx_result ibx__bind(ibx__db *db, SQLHSTMT st, ibx__param *ps, int n) {
    int i;
    for (i = 0; i < n; i++) {
        ibx__param *p = &ps[i];
        SQLPOINTER ptr = p->c_type == SQL_C_SBIGINT ? (SQLPOINTER)&p->i64 : p->ptr;
        SQLLEN buflen = p->c_type == SQL_C_SBIGINT ? 0 : (p->ind > 0 ? p->ind : 0);
        SQLRETURN rc = SQLBindParameter(st, (SQLUSMALLINT)(i + 1), SQL_PARAM_INPUT, p->c_type,
                                        p->sql_type, p->size, 0, ptr, buflen, &p->ind);
        ibx_result r = ibx__check(db, rc, SQL_HANDLE_STMT, st, "SQLBindParameter");
        if (r != IBX_OK) return r;
    }
    return IBX_OK;
}

/* Run the statement in `slot` with `n` parameters. With `cursor` NULL the
 * statement must not return rows; *rows (if given) receives the affected
 * count, and SQL_NO_DATA (a zero-row UPDATE/DELETE on PostgreSQL and
 * SQLite) is success with 0 rows. With `cursor` set, the result set is left
 * open for ibx__fetch; close it with ibx__close. */
IBX__PRIVATE ibx_result ibx__exec(ibx__db *db, int slot, const char *sql, ibx__param *ps, int n,
                                  int64_t *rows, SQLHSTMT *cursor) {
    SQLHSTMT st = NULL;
    SQLRETURN rc;
    ibx_result r = ibx__stmt(db, slot, sql, &st);
    if (r != IBX_OK) return r;
    SQLFreeStmt(st, SQL_CLOSE); /* a cursor left open by an earlier failure */
    r = ibx__bind(db, st, ps, n);
    if (r != IBX_OK) return r;
    rc = SQLExecute(st);
    if (rc == SQL_NO_DATA) {
        if (rows) *rows = 0;
        if (cursor) *cursor = st; /* fetch will report the end at once */
        return IBX_OK;
    }
    r = ibx__check(db, rc, SQL_HANDLE_STMT, st, "SQLExecute");
    if (r != IBX_OK) {
        /* Prepare afresh next time: after a failure (a schema change, a
         * dropped function) the server-side plan may be stale, and
         * psqlODBC keeps memory of a failed execution until the handle
         * is freed. */
        SQLFreeHandle(SQL_HANDLE_STMT, st);
        db->stmt[slot] = NULL;
        return r;
    }
    if (cursor) {
        *cursor = st;
        return IBX_OK;
    }
    if (rows) {
        SQLLEN count = 0;
        if (!SQL_SUCCEEDED(SQLRowCount(st, &count))) count = 0;
        *rows = count < 0 ? 0 : (int64_t)count;
    }
    SQLFreeStmt(st, SQL_CLOSE);
    return IBX_OK;
}

/* IBX_OK with a row, IBX_EMPTY at the end of the result set, or an error. */
IBX__PRIVATE ibx_result ibx__fetch(ibx__db *db, SQLHSTMT st) {
    SQLRETURN rc = SQLFetch(st);
    if (rc == SQL_NO_DATA) return IBX_EMPTY;
    /* 24000: an UPDATE … RETURNING that matched nothing left no cursor. */
    if (rc == SQL_ERROR) {
        SQLCHAR state[6];
        SQLINTEGER native = 0;
        SQLSMALLINT len = 0;
        if (SQL_SUCCEEDED(SQLGetDiagRec(SQL_HANDLE_STMT, st, 1, state, &native, NULL, 0, &len)) &&
            memcmp(state, "24000", 5) == 0)
            return IBX_EMPTY;
    }
    return ibx__check(db, rc, SQL_HANDLE_STMT, st, "SQLFetch");
}

IBX__PRIVATE void ibx__close(SQLHSTMT st) {
    if (st) SQLFreeStmt(st, SQL_CLOSE);
}

/* Column `col` (1-based) as a 64-bit integer; *is_null set when given. */
IBX__PRIVATE ibx_result ibx__get_i64(ibx__db *db, SQLHSTMT st, int col, int64_t *out,
                                     int *is_null) {
    SQLBIGINT v = 0;
    SQLLEN ind = 0;
    ibx_result r = ibx__check(db, SQLGetData(st, (SQLUSMALLINT)col, SQL_C_SBIGINT, &v, 0, &ind),
                              SQL_HANDLE_STMT, st, "SQLGetData");
    if (r != IBX_OK) return r;
    if (is_null) *is_null = ind == SQL_NULL_DATA;
    *out = ind == SQL_NULL_DATA ? 0 : (int64_t)v;
    return IBX_OK;
}

/* Column `col` as bytes (c_type SQL_C_CHAR or SQL_C_BINARY) in a new buffer
 * from the allocator, NUL-terminated for convenience; *out NULL for SQL
 * NULL. Reads in chunks, so any length works; the first chunk's indicator
 * usually gives the total size, which saves reallocations. */
IBX__PRIVATE ibx_result ibx__get_bytes(ibx__db *db, SQLHSTMT st, int col, SQLSMALLINT c_type,
                                       char **out, size_t *out_len) {
    /* SQL_C_CHAR chunks end with a NUL the driver adds; binary ones do not. */
    const size_t term = c_type == SQL_C_CHAR ? 1 : 0;
    char first[512];
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        SQLLEN ind = 0;
        char *dst = buf ? buf + len : first;
        size_t room = buf ? cap - len : sizeof first;
        size_t got;
        SQLRETURN rc = SQLGetData(st, (SQLUSMALLINT)col, c_type, dst, (SQLLEN)room, &ind);
        if (rc == SQL_NO_DATA) break; /* the previous chunk was the last */
        if (!SQL_SUCCEEDED(rc)) {
            ibx__free(db->hooks, buf);
            return ibx__diag(db, SQL_HANDLE_STMT, st, "SQLGetData");
        }
        if (ind == SQL_NULL_DATA) {
            ibx__free(db->hooks, buf);
            *out = NULL;
            if (out_len) *out_len = 0;
            return IBX_OK;
        }
        /* Bytes in this chunk: a truncated one is full (less the NUL of a
         * text chunk); a final text chunk is measured up to the NUL the
         * driver wrote, which does not depend on how it counts length. */
        if (rc == SQL_SUCCESS_WITH_INFO) got = room - term;
        else if (term) got = strnlen(dst, room);
        else got = (ind != SQL_NO_TOTAL && (size_t)ind <= room) ? (size_t)ind : room;
        if (!buf) {
            size_t want = (ind != SQL_NO_TOTAL ? (size_t)ind : got * 2) + 1;
            buf = (char *)ibx__alloc(db->hooks, want);
            if (!buf) return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "SQLGetData", "out of memory");
            cap = want;
            memcpy(buf, first, got);
        }
        len += got;
        if (rc == SQL_SUCCESS) break; /* not truncated: that was all */
        if (cap - len < 256) {
            size_t grow = ind != SQL_NO_TOTAL && (size_t)ind > got ? len + ((size_t)ind - got) + 1
                                                                    : cap * 2;
            char *bigger = (char *)ibx__realloc(db->hooks, buf, grow);
            if (!bigger) {
                ibx__free(db->hooks, buf);
                return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "SQLGetData", "out of memory");
            }
            buf = bigger;
            cap = grow;
        }
    }
    if (!buf) { /* empty value that ended at once */
        buf = (char *)ibx__alloc(db->hooks, 1);
        if (!buf) return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "SQLGetData", "out of memory");
    }
    buf[len] = '\0';
    *out = buf;
    if (out_len) *out_len = len;
    return IBX_OK;
}

/* Column `col` appended to `buf` (NUL-terminated there); *offset is where
 * it starts, or (size_t)-1 for SQL NULL. Offsets, not pointers: the buffer
 * may move while later columns are read. */
IBX__PRIVATE ibx_result ibx__get_append(ibx__db *db, SQLHSTMT st, int col, SQLSMALLINT c_type,
                                        ibx__buf *buf, size_t *offset, size_t *out_len) {
    const size_t term = c_type == SQL_C_CHAR ? 1 : 0;
    size_t start = buf->len;
    int first = 1;
    for (;;) {
        SQLLEN ind = 0;
        size_t room, got;
        SQLRETURN rc;
        if (!ibx__buf_reserve(db->hooks, buf, 1024))
            return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "SQLGetData", "out of memory");
        room = buf->cap - buf->len;
        rc = SQLGetData(st, (SQLUSMALLINT)col, c_type, buf->data + buf->len, (SQLLEN)room, &ind);
        if (rc == SQL_NO_DATA) break;
        if (!SQL_SUCCEEDED(rc)) {
            buf->len = start;
            return ibx__diag(db, SQL_HANDLE_STMT, st, "SQLGetData");
        }
        if (ind == SQL_NULL_DATA) {
            buf->len = start;
            *offset = (size_t)-1;
            if (out_len) *out_len = 0;
            return IBX_OK;
        }
        if (rc == SQL_SUCCESS_WITH_INFO) got = room - term;
        else if (term) got = strnlen(buf->data + buf->len, room);
        else got = (ind != SQL_NO_TOTAL && (size_t)ind <= room) ? (size_t)ind : room;
        buf->len += got;
        if (rc == SQL_SUCCESS) break;
        /* Truncated: the first indicator usually tells the whole size. */
        if (first && ind != SQL_NO_TOTAL && (size_t)ind > got &&
            !ibx__buf_reserve(db->hooks, buf, (size_t)ind - got + 1))
            return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "SQLGetData", "out of memory");
        first = 0;
    }
    if (!ibx__buf_reserve(db->hooks, buf, 1))
        return ibx__fail(db->err, IBX_ERR_NO_MEMORY, "SQLGetData", "out of memory");
    buf->data[buf->len++] = '\0';
    *offset = start;
    if (out_len) *out_len = buf->len - start - 1;
    return IBX_OK;
}

/* Run one statement that returns nothing, outside the cache (DDL,
 * transaction control, session settings). */
IBX__PRIVATE ibx_result ibx__exec_direct(ibx__db *db, const char *sql, const char *where) {
    SQLHSTMT st;
    SQLRETURN rc;
    ibx_result r;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, db->dbc, &st)))
        return ibx__diag(db, SQL_HANDLE_DBC, db->dbc, "SQLAllocHandle(STMT)");
    rc = SQLExecDirect(st, IBX__SQLTEXT(sql), SQL_NTS);
    r = rc == SQL_NO_DATA ? IBX_OK : ibx__check(db, rc, SQL_HANDLE_STMT, st, where);
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    return r;
}

/* First column of the first row of `sql` as text into a fixed buffer. */
IBX__PRIVATE ibx_result ibx__query_text(ibx__db *db, const char *sql, char *out, size_t cap) {
    SQLHSTMT st;
    SQLLEN ind = 0;
    ibx_result r;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, db->dbc, &st)))
        return ibx__diag(db, SQL_HANDLE_DBC, db->dbc, "SQLAllocHandle(STMT)");
    r = ibx__check(db, SQLExecDirect(st, IBX__SQLTEXT(sql), SQL_NTS), SQL_HANDLE_STMT, st,
                   "SQLExecDirect");
    if (r == IBX_OK) r = ibx__fetch(db, st);
    if (r == IBX_OK)
        r = ibx__check(db, SQLGetData(st, 1, SQL_C_CHAR, out, (SQLLEN)cap, &ind), SQL_HANDLE_STMT,
                       st, "SQLGetData");
    if (r == IBX_OK && ind == SQL_NULL_DATA) out[0] = '\0';
    if (r == IBX_EMPTY) r = ibx__fail(db->err, IBX_ERR_NOT_FOUND, sql, "query returned no row");
    SQLFreeHandle(SQL_HANDLE_STMT, st);
    return r;
}

/* >> odbc: transactions and units of work ------------------------------------------- */

IBX__PRIVATE ibx_result ibx__end_tran(ibx__db *db, SQLSMALLINT completion, const char *where) {
    return ibx__check(db, SQLEndTran(SQL_HANDLE_DBC, db->dbc, completion), SQL_HANDLE_DBC, db->dbc,
                      where);
}

IBX__PRIVATE ibx_result ibx__begin(ibx__db *db) {
    ibx_result r = IBX_OK;
    /* SQLite: a deferred transaction that later writes can deadlock and burn
     * the whole busy timeout, so writers take the lock up front. */
    if (db->d->tx_by_sql) r = ibx__exec_direct(db, db->d->begin_sql, "BEGIN");
    if (r == IBX_OK) db->in_tx = 1;
    return r;
}

IBX__PRIVATE ibx_result ibx__commit(ibx__db *db) {
    SQLUINTEGER dead = 0;
    ibx_result r;
    /* psqlODBC reports a successful COMMIT on a connection it already knows
     * is dead; believe the dead flag, not the commit. */
    if (SQL_SUCCEEDED(SQLGetConnectAttr(db->dbc, SQL_ATTR_CONNECTION_DEAD, &dead, 0, NULL)) &&
        dead == SQL_CD_TRUE) {
        db->lost = 1;
        db->in_tx = 0;
        r = ibx__fail(db->err, IBX_ERR_DB_TRANSIENT, "commit",
                      "connection lost before commit; the transaction was not committed");
        db->err->connection_lost = 1;
        return r;
    }
    if (db->d->tx_by_sql && !db->in_tx) return IBX_OK; /* a read unit: nothing to commit */
    r = db->d->tx_by_sql ? ibx__exec_direct(db, "COMMIT", "COMMIT")
                         : ibx__end_tran(db, SQL_COMMIT, "SQLEndTran(COMMIT)");
    db->in_tx = 0;
    if (r != IBX_OK && db->err->connection_lost)
        ibx__copy(db->err->message + strlen(db->err->message),
                  sizeof db->err->message - strlen(db->err->message),
                  " (connection lost during commit: outcome unknown)");
    return r;
}

/* Roll back, keeping the error that caused it. */
IBX__PRIVATE void ibx__rollback(ibx__db *db) {
    ibx_error saved = *db->err;
    if (db->connected && !db->lost) {
        if (db->d->tx_by_sql) {
            if (db->in_tx) ibx__exec_direct(db, "ROLLBACK", "ROLLBACK");
        } else {
            ibx__end_tran(db, SQL_ROLLBACK, "SQLEndTran(ROLLBACK)");
        }
    }
    db->in_tx = 0;
    *db->err = saved;
}

typedef ibx_result (*ibx__unit_fn)(ibx__db *db, void *ctx);

/* Run `fn` as one transaction on our own connection: begin, fn, commit.
 * Any error rolls the whole unit back (never commit after a failed
 * statement: psqlODBC would commit the statements before it). A deadlock,
 * serialization failure or busy/lock timeout redoes the unit up to
 * IBX__UNIT_RETRIES times with a short jittered pause; a lost connection is
 * reported at once (the next call reconnects). Returns fn's result. */
IBX__PRIVATE ibx_result ibx__unit_run(ibx__db *db, ibx__unit_fn fn, void *ctx, const char *what,
                                      int write) {
    ibx_result r;
    int attempt;
    for (attempt = 0;; attempt++) {
        r = ibx__db_ensure(db);
        if (r != IBX_OK) return r;
        db->fault = IBX__FAULT_PERMANENT;
        /* SQLite readers need no write lock: without BEGIN each statement
         * is its own snapshot, and a writer elsewhere does not block them. */
        r = write || !db->d->tx_by_sql ? ibx__begin(db) : IBX_OK;
        if (r == IBX_OK) r = fn(db, ctx);
        if (r >= 0) {
            ibx_result c = ibx__commit(db);
            if (c == IBX_OK) {
                if (db->err->result != IBX_OK) ibx__error_clear(db->err);
                return r;
            }
            r = c;
        }
        ibx__rollback(db);
        if (r != IBX_ERR_DB_TRANSIENT || db->fault != IBX__FAULT_TRANSIENT || db->lost ||
            attempt >= IBX__UNIT_RETRIES)
            break;
        {
            ibx_backoff_policy pause = {20, 500, 0.5, 1.5};
            int64_t ms = ibx__backoff_jitter_ms(&pause, attempt + 1, ibx__random(db->hooks));
            ibx__log(db->hooks, IBX_LOG_WARN, db->store_id,
                     "%s: transient failure [%s/%ld], retrying in %lld ms (retry %d of %d)", what,
                     db->err->sqlstate, db->err->native, (long long)ms, attempt + 1,
                     IBX__UNIT_RETRIES);
            ibx__sleep_ms(db->hooks, ms);
        }
    }
    if (r < 0)
        ibx__log(db->hooks, IBX_LOG_ERROR, db->store_id, "%s failed: %s: %s (%s)", what,
                 ibx__result_str(r), db->err->message, db->err->where);
    return r;
}

IBX__PRIVATE ibx_result ibx__unit(ibx__db *db, ibx__unit_fn fn, void *ctx, const char *what) {
    return ibx__unit_run(db, fn, ctx, what, 1);
}

/* A unit that only reads: the same, without taking SQLite's write lock. */
IBX__PRIVATE ibx_result ibx__unit_read(ibx__db *db, ibx__unit_fn fn, void *ctx, const char *what) {
    return ibx__unit_run(db, fn, ctx, what, 0);
}


/* >> dispatch loop: routes, waiting, waking ---------------------------------------- */

/* Handlers by topic. Stored as a generic function pointer; each header
 * casts back to its own handler type. */
typedef void (*ibx__any_fn)(void);
typedef struct ibx__route {
    char *topic;                 /* "*" matches every topic */
    ibx__any_fn fn;
    void *user;
} ibx__route;

typedef struct ibx__routes {
    ibx__route *items;
    int count, cap;
} ibx__routes;

IBX__PRIVATE ibx_result ibx__routes_add(const ibx__hooks *h, ibx__routes *r, const char *topic,
                                        ibx__any_fn fn, void *user) {
    if (r->count == r->cap) {
        int cap = r->cap ? r->cap * 2 : 8;
        ibx__route *grown = (ibx__route *)ibx__realloc(h, r->items, sizeof *grown * (size_t)cap);
        if (!grown) return IBX_ERR_NO_MEMORY;
        r->items = grown;
        r->cap = cap;
    }
    r->items[r->count].topic = ibx__strdup(h, topic);
    if (!r->items[r->count].topic) return IBX_ERR_NO_MEMORY;
    r->items[r->count].fn = fn;
    r->items[r->count].user = user;
    r->count++;
    return IBX_OK;
}

IBX__PRIVATE void ibx__routes_free(const ibx__hooks *h, ibx__routes *r) {
    int i;
    for (i = 0; i < r->count; i++) ibx__free(h, r->items[i].topic);
    ibx__free(h, r->items);
    r->items = NULL;
    r->count = r->cap = 0;
}

/* The next route for `topic`: exact matches in registration order, then
 * the "*" ones. Start with *cursor = 0; NULL at the end. */
IBX__PRIVATE const ibx__route *ibx__routes_next(const ibx__routes *r, const char *topic,
                                                int *cursor) {
    while (*cursor < 2 * r->count) {
        int pass = *cursor / r->count, i = *cursor % r->count;
        const ibx__route *route = &r->items[i];
        int wildcard = route->topic[0] == '*' && route->topic[1] == '\0';
        (*cursor)++;
        if (pass == 0 ? (!wildcard && strcmp(route->topic, topic) == 0) : wildcard) return route;
    }
    return NULL;
}

/* Waiting between rounds, interruptible by wake and stop. */
typedef struct ibx__loop {
    const ibx__hooks *hooks;
    volatile int stopping;
    volatile int *stop_flag;     /* the caller's, e.g. set by a signal handler */
    int use_hook_sleep;          /* a custom clock: sleep through it, not a condition variable */
#ifndef IBX_NO_THREADS
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int woken;
#endif
} ibx__loop;

IBX__PRIVATE void ibx__loop_init(ibx__loop *l, const ibx__hooks *h, volatile int *stop_flag) {
    l->hooks = h;
    l->stopping = 0;
    l->stop_flag = stop_flag;
    l->use_hook_sleep = h->clock.sleep_ms != ibx__default_sleep_ms;
#ifndef IBX_NO_THREADS
    {
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* immune to wall-clock jumps */
        pthread_mutex_init(&l->mutex, NULL);
        pthread_cond_init(&l->cond, &attr);
        pthread_condattr_destroy(&attr);
        l->woken = 0;
    }
#endif
}

IBX__PRIVATE void ibx__loop_destroy(ibx__loop *l) {
#ifndef IBX_NO_THREADS
    pthread_mutex_destroy(&l->mutex);
    pthread_cond_destroy(&l->cond);
#else
    (void)l;
#endif
}

IBX__PRIVATE int ibx__loop_stopped(const ibx__loop *l) {
    return l->stopping || (l->stop_flag && *l->stop_flag);
}

/* Wait up to `ms`, returning early on wake or stop; nonzero when woken. */
IBX__PRIVATE int ibx__loop_wait(ibx__loop *l, int64_t ms) {
#ifndef IBX_NO_THREADS
    if (!l->use_hook_sleep) {
        struct timespec deadline;
        int woken;
        /* A signal handler's stop_flag does not signal the condition:
         * look at it at least four times a second. */
        if (l->stop_flag && ms > 250) ms = 250;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += (time_t)(ms / 1000);
        deadline.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&l->mutex);
        while (!l->woken && !ibx__loop_stopped(l))
            if (pthread_cond_timedwait(&l->cond, &l->mutex, &deadline) != 0) break;
        woken = l->woken;
        l->woken = 0;
        pthread_mutex_unlock(&l->mutex);
        return woken;
    }
#endif
    while (ms > 0 && !ibx__loop_stopped(l)) {
        int64_t slice = ms < 50 ? ms : 50;
        ibx__sleep_ms(l->hooks, slice);
        ms -= slice;
    }
    return 0;
}

IBX__PRIVATE void ibx__loop_wake(ibx__loop *l) {
#ifndef IBX_NO_THREADS
    pthread_mutex_lock(&l->mutex);
    l->woken = 1;
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->mutex);
#else
    (void)l;
#endif
}

IBX__PRIVATE void ibx__loop_stop(ibx__loop *l) {
#ifndef IBX_NO_THREADS
    pthread_mutex_lock(&l->mutex);
    l->stopping = 1;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->mutex);
#else
    l->stopping = 1;
#endif
}

typedef struct ibx__loop_timing {
    int64_t poll_ms, idle_max_ms, error_ms, startup_ms;
} ibx__loop_timing;

/* Call `round` until stopped: at once after work (IBX_OK), after an empty
 * round wait poll_ms doubling up to idle_max_ms (back to poll_ms on a
 * wake-up), after an error wait error_ms. */
IBX__PRIVATE void ibx__loop_run(ibx__loop *l, const ibx__loop_timing *t,
                                ibx_result (*round)(void *ctx), void *ctx, const char *store_id,
                                const ibx_error *err) {
    int64_t idle = t->poll_ms;
    l->stopping = 0;
    if (t->startup_ms > 0) ibx__loop_wait(l, t->startup_ms);
    while (!ibx__loop_stopped(l)) {
        ibx_result r = round(ctx);
        if (r == IBX_OK) {
            idle = t->poll_ms;
        } else if (r == IBX_EMPTY) {
            if (ibx__loop_wait(l, idle)) idle = t->poll_ms; /* a producer spoke */
            else idle = idle * 2 > t->idle_max_ms ? t->idle_max_ms : idle * 2;
        } else {
            ibx__log(l->hooks, IBX_LOG_ERROR, store_id,
                     "dispatch round failed: %s: %s (%s); next try in %lld ms", ibx__result_str(r),
                     err->message, err->where, (long long)t->error_ms);
            ibx__loop_wait(l, t->error_ms);
        }
    }
}

/* >>common-end core */

/* >>common-begin public */

/* Public faces of the core's pure functions: thin, so the core stays
 * static and both headers can live in one program. */
IBX_API const char *ibx_version(void) { return IBX_VERSION_STRING; }
IBX_API const char *ibx_result_str(ibx_result result) { return ibx__result_str(result); }
IBX_API const char *ibx_dialect_name(ibx_dialect dialect) { return ibx__dialect_name(dialect); }
IBX_API int64_t ibx_backoff_default_ms(int attempt) { return ibx__backoff_default_ms(attempt); }
IBX_API int64_t ibx_backoff_jitter_ms(const ibx_backoff_policy *policy, int attempt,
                                      uint64_t random_bits) {
    return ibx__backoff_jitter_ms(policy, attempt, random_bits);
}
IBX_API void ibx_selector_init(ibx_selector *selector, ibx_selection kind, int store_count) {
    if (selector) ibx__selector_init(selector, kind, store_count);
}
IBX_API int ibx_selector_next(const ibx_selector *selector) {
    return selector ? ibx__selector_next(selector) : -1;
}
IBX_API void ibx_selector_report(ibx_selector *selector, int store, int claimed) {
    if (selector) ibx__selector_report(selector, store, claimed);
}
IBX_API int ibx_selector_all_idle(const ibx_selector *selector) {
    return selector ? ibx__selector_all_idle(selector) : 1;
}
IBX_API void ibx_selector_resize(ibx_selector *selector, int store_count) {
    if (selector) ibx__selector_resize(selector, store_count);
}
IBX_API void ibx_uuid_v7(ibx_uuid_state *state, int64_t unix_ms, uint64_t random_a,
                         uint64_t random_b, char out[37]) {
    if (state && out) ibx__uuid_v7(state, unix_ms, random_a, random_b, out);
}
IBX_API int ibx_uuid_is_valid(const char *text) { return ibx__uuid_is_valid(text); }
IBX_API ibx_result ibx_identifier_check(const char *name) { return ibx__identifier_check(name); }

/* >>common-end public */

/* >> store ---------------------------------------------------------------------- */

struct ibx_store {
    ibx__hooks hooks;
    ibx__db db;
    ibx_error err;
    char *schema;
    char *table;
    char *store_id;
};

static const ibx_error ibx__null_store_error = {IBX_ERR_INVALID_ARG, "", 0, 0, "store",
                                                "store is NULL"};

static ibx_result ibx__store_names(ibx_store *s, const ibx_store_desc *desc) {
    const char *schema = desc->schema ? desc->schema : "infra";
    const char *table = desc->table ? desc->table : "Inbox";
    const char *id = desc->store_id ? desc->store_id : "inbox";
    if (ibx__identifier_check(schema) != IBX_OK)
        return ibx__fail(&s->err, IBX_ERR_INVALID_ARG, "ibx_store_open: schema",
                         "schema must be 1-63 characters of A-Z, a-z, 0-9, _ and not start with "
                         "a digit");
    if (ibx__identifier_check(table) != IBX_OK)
        return ibx__fail(&s->err, IBX_ERR_INVALID_ARG, "ibx_store_open: table",
                         "table must be 1-63 characters of A-Z, a-z, 0-9, _ and not start with "
                         "a digit");
    if (!id[0] || strlen(id) > 63)
        return ibx__fail(&s->err, IBX_ERR_INVALID_ARG, "ibx_store_open: store_id",
                         "store_id must be 1-63 characters");
    s->schema = ibx__strdup(&s->hooks, schema);
    s->table = ibx__strdup(&s->hooks, table);
    s->store_id = ibx__strdup(&s->hooks, id);
    if (!s->schema || !s->table || !s->store_id)
        return ibx__fail(&s->err, IBX_ERR_NO_MEMORY, "ibx_store_open", "out of memory");
    return IBX_OK;
}

IBX_API ibx_result ibx_store_open(const ibx_store_desc *desc, ibx_store **out) {
    ibx__hooks hooks;
    ibx_store *s;
    ibx_result r;
    if (!out) return IBX_ERR_INVALID_ARG;
    *out = NULL;
    if (!desc) return IBX_ERR_INVALID_ARG;
    ibx__hooks_resolve(&hooks, &desc->hooks);
    s = (ibx_store *)ibx__alloc(&hooks, sizeof *s);
    if (!s) return IBX_ERR_NO_MEMORY;
    memset(s, 0, sizeof *s);
    ibx__hooks_resolve(&s->hooks, &desc->hooks); /* again, in place: it must not move */
    s->db.hooks = &s->hooks;
    s->db.err = &s->err;
    s->db.store_id = "inbox";
    s->db.forced = desc->dialect;
    *out = s;
    if ((desc->connection_string != NULL) == (desc->hdbc != NULL))
        return ibx__fail(&s->err, IBX_ERR_INVALID_ARG, "ibx_store_open: connection_string",
                         "give exactly one of connection_string and hdbc");
    if (desc->connection_string && !desc->connection_string[0])
        return ibx__fail(&s->err, IBX_ERR_INVALID_ARG, "ibx_store_open: connection_string",
                         "connection_string is empty");
    if ((int)desc->dialect < 0 || (int)desc->dialect > (int)IBX_DIALECT_SQLSERVER)
        return ibx__fail(&s->err, IBX_ERR_INVALID_ARG, "ibx_store_open: dialect",
                         "dialect %d is not an ibx_dialect value", (int)desc->dialect);
    r = ibx__store_names(s, desc);
    if (r != IBX_OK) return r;
    s->db.store_id = s->store_id;
    r = desc->connection_string ? ibx__db_connect(&s->db, desc->connection_string)
                                : ibx__db_adopt(&s->db, desc->hdbc);
    if (r != IBX_OK) {
        ibx__log(&s->hooks, IBX_LOG_ERROR, s->store_id, "open failed: %s: %s (%s)",
                 ibx__result_str(r), s->err.message, s->err.where);
        return r;
    }
    ibx__error_clear(&s->err);
    ibx__log(&s->hooks, IBX_LOG_INFO, s->store_id, "opened: %s %s via %s", s->db.dbms_name,
             s->db.dbms_version, s->db.driver_name);
    return IBX_OK;
}

IBX_API void ibx_store_close(ibx_store *store) {
    ibx__hooks hooks;
    if (!store) return;
    ibx__db_close(&store->db);
    hooks = store->hooks;
    ibx__free(&hooks, store->schema);
    ibx__free(&hooks, store->table);
    ibx__free(&hooks, store->store_id);
    ibx__free(&hooks, store);
}

IBX_API ibx_result ibx_store_get_info(const ibx_store *store, ibx_store_info *info) {
    if (!store || !info) return IBX_ERR_INVALID_ARG;
    memset(info, 0, sizeof *info);
    info->dialect = store->db.d ? store->db.d->id : IBX_DIALECT_AUTO;
    ibx__copy(info->dbms_name, sizeof info->dbms_name, store->db.dbms_name);
    ibx__copy(info->dbms_version, sizeof info->dbms_version, store->db.dbms_version);
    ibx__copy(info->driver_name, sizeof info->driver_name, store->db.driver_name);
    ibx__copy(info->store_id, sizeof info->store_id, store->store_id ? store->store_id : "inbox");
    return IBX_OK;
}

IBX_API const ibx_error *ibx_store_last_error(const ibx_store *store) {
    return store ? &store->err : &ibx__null_store_error;
}

#endif /* IBX_IMPLEMENTATION */

/*
 * LICENSE -----------------------------------------------------------------------
 * MIT License. Copyright (c) 2026 the ibx.h / ibx.h authors.
 * Permission is hereby granted, free of charge, to any person obtaining a copy
 * of this software and associated documentation files (the "Software"), to deal
 * in the Software without restriction, including without limitation the rights
 * to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
 * copies of the Software, and to permit persons to whom the Software is
 * furnished to do so, subject to the following conditions: the above copyright
 * notice and this permission notice shall be included in all copies or
 * substantial portions of the Software. THE SOFTWARE IS PROVIDED "AS IS",
 * WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO
 * THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
 * NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE
 * FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT,
 * TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR
 * THE USE OR OTHER DEALINGS IN THE SOFTWARE.
 */

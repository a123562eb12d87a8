/* tt.h: the project's test runner, small enough to read in a minute.
 *
 * A test is a void function. TT_RUN(name, backend, description, fn) runs it
 * and prints one line:  PASS OBX-017 postgresql claim skips locked rows
 * (or FAIL …, followed by indented lines saying which check failed, where).
 * tt_done() prints the closing line "N passed, N failed" and returns the
 * process exit code. tt_skip() prints a loud SKIPPED line; under CI=true a
 * skip of a required backend is counted as a failure instead. */
#ifndef TT_H
#define TT_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define TT_UNUSED __attribute__((unused))
#else
#define TT_UNUSED
#endif

static int tt_passed, tt_failed, tt_skipped;
static int tt_current_failures;

TT_UNUSED static void tt_fail_at(const char *file, int line, const char *what) {
    if (tt_current_failures++ < 5) printf("    %s:%d: %s\n", file, line, what);
}

/* Fatal check: the test stops at the first false condition. */
#define TT_ASSERT(c)                                                          \
    do {                                                                      \
        if (!(c)) { tt_fail_at(__FILE__, __LINE__, "expected " #c); return; } \
    } while (0)

/* Non-fatal check: the test goes on. */
#define TT_EXPECT(c)                                                        \
    do {                                                                    \
        if (!(c)) tt_fail_at(__FILE__, __LINE__, "expected " #c);           \
    } while (0)

/* TT_EQ_INT's check (the texts of a and b in sa, sb); on a mismatch it
 * returns `fail` from the function it is in. */
#define TT_EQ_INT_RETURN_(a, b, sa, sb, fail)                                              \
    do {                                                                                   \
        long long tt_a_ = (long long)((a) + 0), tt_b_ = (long long)((b) + 0);              \
        if (tt_a_ != tt_b_) {                                                              \
            char tt_m_[256];                                                               \
            snprintf(tt_m_, sizeof tt_m_, "%s == %s: got %lld, want %lld", sa, sb, tt_a_,  \
                     tt_b_);                                                               \
            tt_fail_at(__FILE__, __LINE__, tt_m_);                                         \
            return fail;                                                                   \
        }                                                                                  \
    } while (0)

#define TT_EQ_INT(a, b) TT_EQ_INT_RETURN_(a, b, #a, #b, )

/* In a helper of a test that returns 1 when all its checks hold: a failed
 * check says where and returns 0, and the test asserts the helper
 * (TT_ASSERT(helper(...))), so it stops as at a check of its own. */
#define TT_CHECK_INT(a, b) TT_EQ_INT_RETURN_(a, b, #a, #b, 0)
#define TT_CHECK(c)                                                           \
    do {                                                                      \
        if (!(c)) { tt_fail_at(__FILE__, __LINE__, "expected " #c); return 0; } \
    } while (0)

#define TT_EQ_STR(a, b)                                                                    \
    do {                                                                                   \
        const char *tt_a_ = (a), *tt_b_ = (b);                                             \
        if (!tt_a_ || !tt_b_ || strcmp(tt_a_, tt_b_) != 0) {                               \
            char tt_m_[512];                                                               \
            snprintf(tt_m_, sizeof tt_m_, "%s == %s: got \"%.160s\", want \"%.160s\"", #a, #b, \
                     tt_a_ ? tt_a_ : "(null)", tt_b_ ? tt_b_ : "(null)");                  \
            tt_fail_at(__FILE__, __LINE__, tt_m_);                                         \
            return;                                                                        \
        }                                                                                  \
    } while (0)

/* A store description's allocator and logger hooks, for obx_store_desc and
 * ibx_store_desc alike (the hook types have one layout in both headers). */
#define TT_STORE_HOOKS(desc, alloc_, realloc_, free_, log_, min_level_) \
    do {                                                               \
        (desc).hooks.allocator.alloc = (alloc_);                       \
        (desc).hooks.allocator.realloc = (realloc_);                   \
        (desc).hooks.allocator.free = (free_);                         \
        (desc).hooks.logger.log = (log_);                              \
        (desc).hooks.logger.min_level = (min_level_);                  \
    } while (0)

/* A test that proves several requirements runs once; its other lines
 * report the same outcome. */
static struct { void (*fn)(void); int failures; } tt_done_tests[256];
static int tt_done_count;

TT_UNUSED static void tt_run(const char *name, const char *backend, const char *description,
                   void (*fn)(void)) {
    int i, seen = 0;
    const char *only = getenv("TT_ONLY"); /* run a subset: TT_ONLY=OBX-09, or "OBX-059 OBX-WAKE" */
    const char *except = getenv("TT_EXCEPT"); /* leave out: TT_EXCEPT="OBX-123 OBX-124" */
    if (only) { /* any of its space-separated words within the name */
        const char *w = only;
        int hit = 0;
        while (*w && !hit) {
            size_t len = strcspn(w, " ");
            const char *at;
            for (at = name; len > 0 && *at && !hit; at++) hit = strncmp(at, w, len) == 0;
            w += len + (w[len] == ' ');
        }
        if (!hit) return;
    }
    if (except) {
        const char *p = strstr(except, name);
        size_t len = strlen(name);
        if (p && (p == except || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0')) {
            printf("N/A %s %s %s (left out by TT_EXCEPT)\n", name, backend, description);
            return;
        }
    }
    tt_current_failures = 0;
    fflush(stdout);
    for (i = 0; i < tt_done_count; i++)
        if (tt_done_tests[i].fn == fn) {
            tt_current_failures = tt_done_tests[i].failures;
            seen = 1;
        }
    if (!seen) {
        fn();
        if (tt_done_count < 256) {
            tt_done_tests[tt_done_count].fn = fn;
            tt_done_tests[tt_done_count++].failures = tt_current_failures;
        }
    }
    if (tt_current_failures) {
        tt_failed++;
        printf("FAIL %s %s %s\n", name, backend, description);
    } else {
        tt_passed++;
        printf("PASS %s %s %s\n", name, backend, description);
    }
    fflush(stdout);
}
#define TT_RUN(name, backend, description, fn) tt_run(name, backend, description, fn)

TT_UNUSED static int tt_ci(void) {
    const char *ci = getenv("CI");
    return ci && strcmp(ci, "true") == 0;
}

/* A test that cannot run here. Loud always; a failure under CI=true. */
TT_UNUSED static void tt_skip(const char *name, const char *backend, const char *reason) {
    if (tt_ci()) {
        tt_failed++;
        printf("FAIL %s %s SKIPPED under CI=true: %s\n", name, backend, reason);
    } else {
        tt_skipped++;
        printf("SKIPPED %s %s %s\n", name, backend, reason);
    }
}

TT_UNUSED static int tt_done(void) {
    if (tt_skipped) printf("%d skipped\n", tt_skipped);
    printf("%d passed, %d failed\n", tt_passed, tt_failed);
    return tt_failed ? 1 : 0;
}
#endif

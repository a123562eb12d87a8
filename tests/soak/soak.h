/* soak.h: what the soak's processes (soak.c) and its checker (check.c) share:
 * the run's settings, the seeded random source, the line-oriented logs and
 * the backend's quoting.
 *
 * Logs: every process appends to DIR/<name>.log, one write() per line with
 * O_APPEND, written BEFORE the effect it announces (a handler's start before
 * its work, an enqueue's intent before the call) and after the effect it
 * reports (a commit after COMMIT returned). A kill -9 therefore leaves whole
 * lines only, and the data written survive the process (the page cache is the
 * kernel's); the machine is not crashed, so no fsync is needed. Lines are
 * "<kind> <field> ..." with times in wall-clock microseconds (one machine: the
 * same clock for every process). The kinds are listed in check.c. */
#ifndef SOAK_H
#define SOAK_H

#include "../torture/tort.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

/* ---- settings that the orchestrator, the workers and the checker agree on -- */

#define SOAK_LEASE_S 3          /* dispatchers' lease; slow handlers take longer */
#define SOAK_MAX_ATTEMPTS 4     /* dispatchers' max_attempts */
#define SOAK_MAX_STARTS 3       /* stores' max_starts (the library's default) */
#define SOAK_KEYS 6             /* ordering keys k0..k5, shared by every producer */
#define SOAK_SOURCES 3          /* inbox sources s0..s2, shared by every producer */
#define SOAK_DEAD_REASON "soak: dead by handler"
#define SOAK_RETRY_REASON "soak: retry"
#define SOAK_PAUSE_REASON "soak: pause"
#define SOAK_ERR_FULL (-9)      /* OBX_ERR_FULL, IBX_ERR_FULL as producers log it (soak.c checks) */
#define SOAK_RC_TRANSIENT (-6)  /* OBX_ERR_DB_TRANSIENT, IBX_ERR_DB_TRANSIENT as operators log it (soak.c checks) */

/* ---- seeded random source (splitmix64): one stream per process ------------- */

typedef struct soak_rng {
    uint64_t s;
} soak_rng;

TORT_UNUSED static uint64_t soak_next(soak_rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
/* 0..n-1 */
TORT_UNUSED static int soak_below(soak_rng *r, int n) { return n > 0 ? (int)(soak_next(r) % (uint64_t)n) : 0; }
/* percent chance */
TORT_UNUSED static int soak_pct(soak_rng *r, int pct) { return soak_below(r, 100) < pct; }
TORT_UNUSED static soak_rng soak_rng_for(uint64_t seed, int role, int id, int inc) {
    soak_rng r;
    r.s = seed ^ ((uint64_t)(unsigned)role << 48) ^ ((uint64_t)(unsigned)id << 32) ^ (uint64_t)(unsigned)inc;
    (void)soak_next(&r);
    return r;
}

/* ---- logs -------------------------------------------------------------------- */

TORT_UNUSED static int soak_open_log(const char *dir, const char *name) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.log", dir, name);
    return open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
}
TORT_PRINTF(2, 3) TORT_UNUSED static void soak_log(int fd, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    /* One write per line with O_APPEND: a kill leaves whole lines only. */
    if (write(fd, line, (size_t)n) != (ssize_t)n) {
        perror("soak: log write");
        _exit(3);
    }
}

/* ---- names as each backend wants them ------------------------------------------ */

TORT_UNUSED static const char *soak_qtable(char *out, size_t cap, const char *backend, int inbox,
                                           const char *name) {
    if (strcmp(backend, "mariadb") == 0) snprintf(out, cap, "`%s`", name);
    else if (strcmp(backend, "postgresql") == 0) snprintf(out, cap, "\"%s\".\"%s\"", inbox ? "infra" : "dbo", name);
    else snprintf(out, cap, "\"%s\"", name);
    return out;
}
TORT_UNUSED static const char *soak_qcol(char *out, size_t cap, const char *backend, const char *name) {
    snprintf(out, cap, strcmp(backend, "mariadb") == 0 ? "`%s`" : "\"%s\"", name);
    return out;
}

#endif /* SOAK_H */

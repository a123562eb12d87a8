/* The soak's checker (issue 26): the reference model. Reads every process's
 * log in DIR (soak.h, soak.c) and the final tables, and fails (exit 1) on any
 * broken rule, printing each broken rule with the history of the message
 * that broke it (every log line about it from every process, in time order,
 * and its row).
 *
 * Rules (each has a name, used in the report and by SOAK_KNOWN):
 *   LOST             a committed message (enqueue returned OK, or its
 *                    transaction's business row exists) has no row and was
 *                    never handled to done
 *   ROLLED-BACK      a message whose transaction was rolled back, or whose
 *                    enqueue was refused, exists or was handled
 *   BIZ              a business row without its message, or a transactional
 *                    message without its business row
 *   PHANTOM          a row or a handling that no producer enqueued
 *   STUCK            not Done or Dead after the drain
 *   DONE-UNHANDLED   Done, but no handler returned done for it
 *   DEAD-REASON      Dead without a documented reason that applies (handler
 *                    said dead; attempts used up; crash loop; expired)
 *   EXPIRED-HANDLED  a message enqueued already expired reached a handler
 *                    with no replay (which drops the expiry) before
 *   CONCURRENT       two handlers inside one message at the same time
 *                    (across processes; a killed handler ends at its death).
 *                    Not counted (but figured as lease_lost_to_fault=N): the
 *                    first handler ran past its lease and a database fault
 *                    (restart, freeze) covered at least a renewal interval of
 *                    the lease that ran out before the second began, so that
 *                    no renewal could reach the database: a lease cannot
 *                    outlive an outage of about its length
 *   KEY-CONCURRENT   two handlers inside one ordering key at the same time
 *                    (but where the first lost its lease to a fault, as above)
 *   KEY-ORDER        per ordering key, first handlings not in enqueue order
 *                    (for messages whose commit returned before the other's
 *                    enqueue began)
 *   ATTEMPT          a handling's attempt count moved by other than a retry
 *                    (a pause, done or dead must not use an attempt)
 *   INBOX-CONTENT    inbox: the last content accepted for (source, id) while
 *                    it was not Done never reached a handler
 *   INBOX-DONE-AGAIN inbox: handled again after a delivery found it Done
 *   REPLAY-UNHANDLED a message a replay returned as replayed never handled again
 *   REPLAY-STARTS    the first handling after a replay (by id) does not see the
 *                    start count begun again (allowing for claims of processes
 *                    that died before their handler began), or any handling
 *                    with Starts past max_starts
 *   JOIN             a join's follow-up not exactly when every member is settled
 *                    and the join was not cancelled (or two, or one after its
 *                    cancel won)
 *   PURGE-LIVE       a handler inside a message after a purge deleted it
 *   STATS            at rest, a gauge of obxctl stats --json, of the library's
 *                    metrics or of obxctl's per-topic metrics differs from the
 *                    table's counts (per state, and per topic and state)
 *   FULL             the producers' stores have max_pending (orch.log: MAX_PENDING
 *                    N) and no enqueue of the run's database met OBX_ERR_FULL:
 *                    the bound went untested (a refused message that exists is
 *                    ROLLED-BACK, a committed one missing LOST)
 *   CONNECTIONS      at rest, a connection left open on the server
 *   CRASH            a process died of a signal nobody sent (SIGSEGV, ...), or
 *                    a dispatcher, provider or operator exited with an error
 *   EFFECT-TWICE     transactional handlers (topics x, y; soak_fx): a
 *                    message's effect written twice (inbox: but where the
 *                    Done row was cleaned up and the message accepted anew)
 *   EFFECT-MISSING   a transactional topic's message Done without its effect
 *                    (inbox: or with the effect of other content)
 *   EFFECT-UNDONE    an effect of a message not Done (its run retried, dead,
 *                    paused or rolled back; a row gone: no handler said done)
 *
 * Usage: check obx|ibx sqlite|postgresql|mariadb 'CONN' TABLE DIR
 * Environment: SOAK_TENANT=n checks tenant n's messages (keys ending "@n")
 * against CONN, that tenant's database (default 0: the run's database).
 * SOAK_KNOWN="RULE,RULE": known, still unfixed defects; their
 * violations are printed loudly as WAIVED and do not fail the run.
 * Prints "soak: <hdr> <backend> ..." figures and "violations=N". */
#include "soak.h"

#include <dirent.h>

static const char *g_hdr, *g_backend, *g_conn, *g_table, *g_dir;
static int g_inbox, g_tenant, g_oom;

/* ---- growable arrays, strings -------------------------------------------------------- */

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "soak-check: out of memory\n");
        exit(2);
    }
    return q;
}
static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = (char *)xrealloc(NULL, n);
    memcpy(d, s, n);
    return d;
}
#define PUSH(arr, n, cap, val)                                                     \
    do {                                                                           \
        if ((n) == (cap)) {                                                        \
            (cap) = (cap) ? (cap) * 2 : 8;                                         \
            (arr) = xrealloc((arr), (size_t)(cap) * sizeof *(arr));                \
        }                                                                          \
        (arr)[(n)++] = (val);                                                      \
    } while (0)

/* ---- the model: one record per message ------------------------------------------------- */

typedef struct handling {
    int64_t start, end; /* end: the E line, else the death of its process, else INT64_MAX */
    int attempt, starts, pid, ver;
    char outcome[8];    /* "" when it never ended (killed) */
    char okey[16];
} handling;

typedef struct delivery { /* inbox */
    int ver, enq;         /* enq: 1 accepted, 0 found Done, -1 unknown, -2 failed */
    int64_t t_intent, t_done;
} delivery;

typedef struct opr { /* an operator's replay or purge of this message */
    char kind;           /* 'R' replay, 'P' purge */
    int64_t t0, t1;      /* t1 0: never returned (killed) */
    long n;
    int rc;              /* its result: -6 (DB_TRANSIENT) may be a commit whose answer was lost */
    int tool;            /* by obxctl: rc is its exit status, -1 when it did not exit (killed) */
} opr;

typedef struct hline {
    int64_t t;
    char *text;
} hline;

typedef struct rec {
    char *key;
    char okey[16];
    char mode, exp;
    int intent, committed, rolled, failed, biz;
    int64_t t_intent, t_commit;
    handling *h;
    int nh, caph;
    delivery *d;
    int nd, capd;
    hline *lines;
    int nl, capl;
    opr *ops;
    int nops, capops;
    /* a join (key "J..."): its steps, members (tags), join.wait and cancel results */
    int is_join, steps, jw_rc, jc_rc, has_jw, has_jc;
    char jid[40];
    char **members;
    int nmem, capmem;
    int has_row, status, attempt, starts, row_ver;
    char status_text[16];
    char *last_error;
    int violated;
    int txh, fx, fx_ver; /* a transactional handler's topic; its effects (soak_fx), the last one's version */
    int fx_again;        /* effects of a content version already seen (each content is one handling) */
    unsigned fx_seen;    /* the versions seen, a bit each (modulo 32) */
} rec;

static rec **g_tab;
static size_t g_cap, g_count;

static uint64_t fnv(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}
static rec *find(const char *key, int create) {
    size_t i;
    if (g_count * 2 >= g_cap) {
        size_t oc = g_cap, j;
        rec **old = g_tab;
        g_cap = g_cap ? g_cap * 2 : 4096;
        g_tab = (rec **)xrealloc(NULL, g_cap * sizeof *g_tab);
        memset(g_tab, 0, g_cap * sizeof *g_tab);
        for (j = 0; j < oc; j++)
            if (old[j]) {
                for (i = (size_t)fnv(old[j]->key) & (g_cap - 1); g_tab[i]; i = (i + 1) & (g_cap - 1)) {}
                g_tab[i] = old[j];
            }
        free(old);
    }
    for (i = (size_t)fnv(key) & (g_cap - 1); g_tab[i]; i = (i + 1) & (g_cap - 1))
        if (strcmp(g_tab[i]->key, key) == 0) return g_tab[i];
    if (!create) return NULL;
    g_tab[i] = (rec *)xrealloc(NULL, sizeof(rec));
    memset(g_tab[i], 0, sizeof(rec));
    g_tab[i]->key = xstrdup(key);
    g_tab[i]->row_ver = -1;
    g_count++;
    return g_tab[i];
}
static void add_line(rec *r, int64_t t, const char *file, const char *line) {
    char buf[1200];
    hline l;
    snprintf(buf, sizeof buf, "%-14s %s", file, line);
    l.t = t;
    l.text = xstrdup(buf);
    PUSH(r->lines, r->nl, r->capl, l);
}

/* ---- process deaths (orch.log) ---------------------------------------------------------- */

typedef struct life {
    int pid, worker; /* worker: a dispatcher or provider process */
    int64_t born, died;
} life;
static life *g_lives;
static int g_nlives, g_caplives;
static long g_kills;
typedef struct crash {
    char name[64], how[32];
    int pid;
    long long t;
} crash;
static crash *g_crashes;
static int g_ncrashes, g_capcrashes;

/* Dispatcher and provider processes that died between a and b: each may
 * have claimed a message and died before its handler started. */
static int worker_deaths(int64_t a, int64_t b) {
    int i, n = 0;
    for (i = 0; i < g_nlives; i++) n += g_lives[i].worker && g_lives[i].died > a && g_lives[i].died < b;
    return n;
}

static int64_t death_of(int pid, int64_t at) {
    int i;
    for (i = 0; i < g_nlives; i++)
        if (g_lives[i].pid == pid && g_lives[i].born <= at && at <= g_lives[i].died) return g_lives[i].died;
    return INT64_MAX;
}

static long g_max_pending, g_full; /* the producers' bound (0: none), refusals at it */
typedef struct fault_window {
    int64_t t0, t1; /* t1: FAULTED, else INT64_MAX */
} fault_window;
static fault_window *g_faults;
static int g_nfaults, g_capfaults;
static long g_lease_lost, g_disk_full, g_renew_refused;
/* What dispatchers' lease renewals said (LR lines): printed with a
 * CONCURRENT, for the first handler's process while it ran. */
typedef struct renew_note {
    int pid;
    int64_t t;
    char *text;
} renew_note;
static renew_note *g_notes;
static long g_nnotes, g_capnotes;
/* The tenant of a key: "...@n", else 0 (the run's database). */
static int tenant_of(const char *key) {
    const char *at = strrchr(key, '@');
    return at ? atoi(at + 1) : 0;
}

static void read_orch(void) {
    char path[1200], line[1200];
    FILE *f;
    snprintf(path, sizeof path, "%s/orch.log", g_dir);
    f = fopen(path, "r");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        char name[64], how[32];
        int pid;
        long long t;
        if (sscanf(line, "MAX_PENDING %lld", &t) == 1) {
            g_max_pending = (long)t;
        } else if (sscanf(line, "FAULT %63s %lld", name, &t) == 2) {
            fault_window w;
            w.t0 = t;
            w.t1 = INT64_MAX;
            PUSH(g_faults, g_nfaults, g_capfaults, w);
        } else if (sscanf(line, "FAULTED %63s %d %lld", name, &pid, &t) == 3) {
            int i;
            for (i = g_nfaults - 1; i >= 0; i--)
                if (g_faults[i].t1 == INT64_MAX) {
                    g_faults[i].t1 = t;
                    break;
                }
        } else if (sscanf(line, "P %63s %d %lld", name, &pid, &t) == 3) {
            life l;
            l.pid = pid;
            l.worker = name[0] == 'd' || name[0] == 'v';
            l.born = t;
            l.died = INT64_MAX;
            PUSH(g_lives, g_nlives, g_caplives, l);
        } else if (sscanf(line, "D %63s %d %lld %31s", name, &pid, &t, how) == 4) {
            int i;
            for (i = g_nlives - 1; i >= 0; i--)
                if (g_lives[i].pid == pid && g_lives[i].died == INT64_MAX) {
                    g_lives[i].died = t;
                    break;
                }
            if (strcmp(how, "kill") == 0) g_kills++;
            /* Died of a signal nobody sent: 6 is the poison topic's abort(). */
            /* Dispatchers, providers and operators never exit with an error
             * (a sanitizer's report does: exit 1). */
            if ((strncmp(how, "signal", 6) == 0 && strcmp(how, "signal6") != 0) ||
                (strncmp(how, "exit", 4) == 0 && strcmp(how, "exit0") != 0 && strchr("dvo", name[0]))) {
                crash c;
                snprintf(c.name, sizeof c.name, "%s", name);
                snprintf(c.how, sizeof c.how, "%s", how);
                c.pid = pid;
                c.t = t;
                PUSH(g_crashes, g_ncrashes, g_capcrashes, c);
            }
        }
    }
    fclose(f);
}

/* ---- the processes' logs ------------------------------------------------------------------ */

static long g_nlines;
/* Joins whose join.wait message is Dead (its attempts used up, a crash loop)
 * or was purged: no follow-up can come, by design. By join id. */
static char **g_wait_gone;
static int g_nwait_gone, g_capwait_gone;
static void wait_gone(const char *text) {
    const char *p = strstr(text, "\"joinId\":\"");
    char *id;
    if (!p) return;
    id = xstrdup(p + 10);
    id[strcspn(id, "\"")] = 0;
    PUSH(g_wait_gone, g_nwait_gone, g_capwait_gone, id);
}
static int is_wait_gone(const char *jid) {
    int i;
    for (i = 0; i < g_nwait_gone; i++)
        if (strcmp(g_wait_gone[i], jid) == 0) return 1;
    return 0;
}
static opr *g_topic_replays; /* RA: every dead message of a topic made ready */
static int g_ntr, g_captr;
static long g_ops_done;

static void read_operator(const char *file, const char *line, rec **out) {
    char key[600], via[16];
    long long t = 0, n = 0;
    int rc = 0;
    rec *r = NULL;
    if ((sscanf(line, "RP %599s %lld %15s", key, &t, via) == 3 && line[1] == 'P') ||
        (sscanf(line, "PG %599s %lld %15s", key, &t, via) == 3 && line[1] == 'G')) {
        opr o;
        memset(&o, 0, sizeof o);
        o.kind = line[0] == 'R' ? 'R' : 'P';
        o.t0 = t;
        o.tool = strcmp(via, "tool") == 0;
        r = find(key, 1);
        PUSH(r->ops, r->nops, r->capops, o);
    } else if ((sscanf(line, "RPD %599s %lld %d %lld", key, &n, &rc, &t) == 4) ||
               (sscanf(line, "PGD %599s %lld %d %lld", key, &n, &rc, &t) == 4)) {
        int i;
        char kind = line[0] == 'R' ? 'R' : 'P';
        r = find(key, 1);
        for (i = r->nops - 1; i >= 0; i--)
            if (r->ops[i].kind == kind && !r->ops[i].t1) {
                r->ops[i].t1 = t;
                r->ops[i].n = (long)n;
                r->ops[i].rc = rc;
                break;
            }
        g_ops_done++;
        if (kind == 'P' && n > 0 && key[0] == '{') wait_gone(key);
    } else if (sscanf(line, "RA %599s %lld", key, &t) == 2 && line[1] == 'A') {
        opr o;
        memset(&o, 0, sizeof o);
        o.kind = 'R';
        o.t0 = t;
        o.t1 = INT64_MAX; /* until it returns */
        PUSH(g_topic_replays, g_ntr, g_captr, o);
    } else if (sscanf(line, "RAD %599s %lld %d %lld", key, &n, &rc, &t) == 4) {
        int i;
        for (i = g_ntr - 1; i >= 0; i--)
            if (g_topic_replays[i].t1 == INT64_MAX) {
                g_topic_replays[i].t1 = t;
                g_topic_replays[i].n = (long)n;
                break;
            }
        g_ops_done++;
    } else if (line[0] == 'O') {
        g_ops_done++;
    }
    (void)file;
    *out = r;
}

static void read_worker(const char *file) {
    char path[1200], line[1200];
    FILE *f;
    int producer = file[0] == 'p';
    snprintf(path, sizeof path, "%s/%s", g_dir, file);
    f = fopen(path, "r");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        char kind, key[600], a[64], b[64], c[64];
        long long t = 0;
        int pid = 0, x = 0, y = 0;
        rec *r = NULL;
        line[strcspn(line, "\n")] = 0;
        g_nlines++;
        kind = line[0];
        if (file[0] == 'o') {
            long long tt = 0;
            read_operator(file, line, &r);
            if (r) {
                const char *sp = strrchr(line, ' ');
                /* the time: the last field of RPD/PGD, the third of RP/PG */
                if (line[2] == 'D' && sp) tt = atoll(sp + 1);
                else sscanf(line, "%*s %*s %lld", &tt);
                t = tt;
            }
        } else if (producer && !g_inbox) {
            if (kind == 'I' && sscanf(line, "I %599s %63s %63s %63s %lld", key, a, b, c, &t) == 5) {
                r = find(key, 1);
                r->intent = 1;
                r->t_intent = t;
                snprintf(r->okey, sizeof r->okey, "%.15s", strcmp(a, "-") ? a : "");
                r->mode = b[0];
                r->exp = c[0];
            } else if (kind == 'C' && sscanf(line, "C %599s %63s %lld", key, a, &t) == 3) {
                r = find(key, 1);
                r->committed = 1;
                r->t_commit = t;
            } else if (strncmp(line, "DF ", 3) == 0) {
                g_disk_full++; /* its F says it changed nothing: ROLLED-BACK, BIZ */
            } else if (kind == 'R' && sscanf(line, "R %599s %lld", key, &t) == 2) {
                r = find(key, 1);
                r->rolled = 1;
            } else if (kind == 'F' && sscanf(line, "F %599s %63s %lld", key, a, &t) == 3) {
                r = find(key, 1);
                r->failed = 1;
                g_full += atoi(a) == SOAK_ERR_FULL && tenant_of(key) == g_tenant;
            } else if (strncmp(line, "J ", 2) == 0 && sscanf(line, "J %599s %63s %d %lld", key, a, &x, &t) == 4) {
                r = find(key, 1);
                r->is_join = 1;
                r->steps = x;
                snprintf(r->jid, sizeof r->jid, "%.39s", a);
            } else if (strncmp(line, "JA ", 3) == 0 && sscanf(line, "JA %599s %63s %d %lld", key, a, &x, &t) == 4) {
                r = find(key, 1);
                if (x == 0) {
                    char *m = xstrdup(a);
                    PUSH(r->members, r->nmem, r->capmem, m);
                }
            } else if (strncmp(line, "JW ", 3) == 0 && sscanf(line, "JW %599s %d %lld", key, &x, &t) == 3) {
                r = find(key, 1);
                r->has_jw = 1;
                r->jw_rc = x;
            } else if (strncmp(line, "JC ", 3) == 0 && sscanf(line, "JC %599s %d %lld", key, &x, &t) == 3) {
                r = find(key, 1);
                r->has_jc = 1;
                r->jc_rc = x;
            } else if (strncmp(line, "JC- ", 4) == 0 && sscanf(line, "JC- %599s %lld", key, &t) == 2) {
                r = find(key, 1);
                r->has_jc = r->has_jc ? r->has_jc : 2; /* a cancel that never returned: unknown */
            }
        } else if (producer) {
            delivery d;
            if (kind == 'I' && sscanf(line, "I %599s %d %lld", key, &x, &t) == 3) {
                r = find(key, 1);
                d.ver = x;
                d.enq = -1;
                d.t_intent = t;
                d.t_done = 0;
                PUSH(r->d, r->nd, r->capd, d);
            } else if ((kind == 'A' || kind == 'F') && sscanf(line + 2, "%599s %d %d %lld", key, &x, &y, &t) == 4) {
                int i;
                r = find(key, 1);
                g_full += kind == 'F' && y == SOAK_ERR_FULL && tenant_of(key) == g_tenant;
                for (i = r->nd - 1; i >= 0; i--)
                    if (r->d[i].ver == x && r->d[i].enq == -1) {
                        r->d[i].enq = kind == 'A' ? y : -2;
                        r->d[i].t_done = t;
                        break;
                    }
            }
        } else if (strncmp(line, "RR ", 3) == 0) {
            g_renew_refused++; /* a renewal connection refused (soak.c): CONCURRENT judges it */
        } else if (strncmp(line, "LR ", 3) == 0 && sscanf(line, "LR %d %lld %n", &pid, &t, &x) == 2 && x > 0) {
            renew_note n;
            n.pid = pid;
            n.t = t;
            n.text = xstrdup(line + x);
            PUSH(g_notes, g_nnotes, g_capnotes, n);
        } else if (kind == 'S' && sscanf(line, "S %599s %63s %63s %d %d %lld %d", key, a, b, &x, &y, &t, &pid) == 7) {
            handling h;
            memset(&h, 0, sizeof h);
            h.start = t;
            h.end = INT64_MAX;
            h.attempt = x;
            h.starts = y;
            h.pid = pid;
            h.ver = g_inbox ? atoi(a) : 0;
            snprintf(h.okey, sizeof h.okey, "%.15s", strcmp(b, "-") ? b : "");
            r = find(key, 1);
            PUSH(r->h, r->nh, r->caph, h);
        } else if (kind == 'E' && sscanf(line, "E %599s %63s %lld %d", key, a, &t, &pid) == 4) {
            int i;
            r = find(key, 1);
            for (i = r->nh - 1; i >= 0; i--)
                if (r->h[i].pid == pid && !r->h[i].outcome[0]) {
                    r->h[i].end = t;
                    snprintf(r->h[i].outcome, sizeof r->h[i].outcome, "%.7s", a);
                    break;
                }
        }
        if (r) add_line(r, t, file, line);
    }
    fclose(f);
}

static void read_logs(void) {
    DIR *d = opendir(g_dir);
    struct dirent *e;
    if (!d) return;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".log") != 0) continue;
        if (strchr("pdov", e->d_name[0])) read_worker(e->d_name);
    }
    closedir(d);
}

/* Handlings without an E line end at their process's death. */
static void close_handlings(void) {
    size_t i;
    int j;
    for (i = 0; i < g_cap; i++) {
        rec *r = g_tab[i];
        if (!r) continue;
        for (j = 0; j < r->nh; j++)
            if (!r->h[j].outcome[0]) r->h[j].end = death_of(r->h[j].pid, r->h[j].start);
    }
}

/* ---- the tables ------------------------------------------------------------------------------ */

static char *g_buf;
static long g_other_rows, g_other_done, g_other_dead; /* join.wait rows */
#define BUF_CAP ((size_t)256 << 20)

/* The table's counts per topic and state, as the gauges define the states:
 * waiting (ready or scheduled: Ready / Processing without a lease), in flight
 * (Leased / Processing under a lease), done, dead, seen (inbox). */
enum { ST_WAITING, ST_IN_FLIGHT, ST_DONE, ST_DEAD, ST_SEEN, ST_N };
typedef struct tcount {
    char topic[64];
    long n[ST_N];
} tcount;
static tcount g_tc[32];
static int g_ntc;
static long g_tn[ST_N];

static int read_counts(tort_db *db) {
    char sql[1024], t[160], c[3][64], err[600];
    char *buf = (char *)xrealloc(NULL, 1 << 16), *p;
    snprintf(sql, sizeof sql, "SELECT %s, %s, CASE WHEN %s IS NULL THEN 0 ELSE 1 END, COUNT(*) FROM %s GROUP BY %s, %s, "
             "CASE WHEN %s IS NULL THEN 0 ELSE 1 END",
             soak_qcol(c[0], 64, g_backend, "Topic"), soak_qcol(c[1], 64, g_backend, "Status"),
             soak_qcol(c[2], 64, g_backend, "LockedUntil"), soak_qtable(t, sizeof t, g_backend, g_inbox, g_table), c[0], c[1],
             c[2]);
    buf[0] = 0;
    if (tort_db_query(db, sql, buf, 1 << 16, err, sizeof err) != 0) {
        printf("soak: %s %s FAILED: checker cannot count the table: %s\n", g_hdr, g_backend, err);
        free(buf);
        return -1;
    }
    for (p = buf; *p;) {
        char *nl = strchr(p, '\n'), topic[64], status[32];
        int leased = 0, st, k;
        long n = 0;
        if (nl) *nl = 0;
        if (sscanf(p, "%63[^|]|%31[^|]|%d|%ld", topic, status, &leased, &n) == 4) {
            if (g_inbox)
                st = strcmp(status, "Processing") == 0 ? (leased ? ST_IN_FLIGHT : ST_WAITING)
                     : strcmp(status, "Done") == 0     ? ST_DONE
                     : strcmp(status, "Dead") == 0     ? ST_DEAD
                                                       : ST_SEEN;
            else
                st = atoi(status) == 0 ? ST_WAITING : atoi(status) == 1 ? ST_IN_FLIGHT : atoi(status) == 2 ? ST_DONE : ST_DEAD;
            for (k = 0; k < g_ntc && strcmp(g_tc[k].topic, topic) != 0; k++) {}
            if (k == g_ntc && g_ntc < 32) snprintf(g_tc[g_ntc++].topic, sizeof g_tc[k].topic, "%s", topic);
            if (k < g_ntc) g_tc[k].n[st] += n;
            g_tn[st] += n;
        }
        if (!nl) break;
        p = nl + 1;
    }
    free(buf);
    return 0;
}

static int read_tables(void) {
    tort_db db;
    char err[600], sql[1024], t[160], c[8][64];
    char *p;
    if (tort_db_open(&db, g_conn, err, sizeof err) != 0) {
        printf("soak: %s %s FAILED: checker cannot connect: %s\n", g_hdr, g_backend, err);
        return -1;
    }
    g_buf = (char *)xrealloc(NULL, BUF_CAP);
    g_buf[0] = 0;
    if (g_inbox)
        snprintf(sql, sizeof sql, "SELECT %s, %s, %s, %s, %s, %s FROM %s",
                 soak_qcol(c[0], 64, g_backend, "Payload"), soak_qcol(c[1], 64, g_backend, "Status"),
                 soak_qcol(c[2], 64, g_backend, "Attempt"), soak_qcol(c[3], 64, g_backend, "Starts"),
                 soak_qcol(c[4], 64, g_backend, "Source"), soak_qcol(c[5], 64, g_backend, "LastError"),
                 soak_qtable(t, sizeof t, g_backend, 1, g_table));
    else
        snprintf(sql, sizeof sql, "SELECT %s, %s, %s, %s, %s, %s FROM %s",
                 soak_qcol(c[0], 64, g_backend, "Payload"), soak_qcol(c[1], 64, g_backend, "Status"),
                 soak_qcol(c[2], 64, g_backend, "RetryCount"), soak_qcol(c[3], 64, g_backend, "Starts"),
                 soak_qcol(c[4], 64, g_backend, "Id"), soak_qcol(c[5], 64, g_backend, "LastError"),
                 soak_qtable(t, sizeof t, g_backend, 0, g_table));
    if (tort_db_query(&db, sql, g_buf, BUF_CAP, err, sizeof err) != 0) {
        printf("soak: %s %s FAILED: checker cannot read the table: %s\n", g_hdr, g_backend, err);
        return -1;
    }
    for (p = g_buf; *p;) {
        char *nl = strchr(p, '\n'), *f[6];
        int k;
        rec *r;
        char key[600];
        if (nl) *nl = 0;
        f[0] = p;
        for (k = 1; k < 6; k++) {
            char *bar = f[k - 1] ? strchr(f[k - 1], '|') : NULL;
            if (bar && k < 5) *bar = 0;
            else if (bar) *bar = 0;
            f[k] = bar ? bar + 1 : NULL;
        }
        if (f[5] && f[0][0] == '{') { /* a join.wait message (the library's JSON) */
            g_other_rows++;
            if (atoi(f[1]) == 2) g_other_done++;
            if (atoi(f[1]) == 3) {
                g_other_dead++;
                wait_gone(f[0]);
            }
        } else if (f[5]) {
            /* The payload starts with the key: "TAG hex" or "source/id vN hex". */
            snprintf(key, sizeof key, "%.*s", (int)strcspn(f[0], " "), f[0]);
            r = find(key, 1);
            r->has_row = 1;
            snprintf(r->status_text, sizeof r->status_text, "%s", f[1]);
            r->status = atoi(f[1]);
            r->attempt = atoi(f[2]);
            r->starts = atoi(f[3]);
            r->last_error = xstrdup(f[5]);
            if (g_inbox) {
                const char *v = strstr(f[0], " v");
                r->row_ver = v ? atoi(v + 2) : -1;
            }
            {
                char line[1200];
                snprintf(line, sizeof line, "row: status=%s attempt=%s starts=%s id=%s last_error=%s payload=%s",
                         f[1], f[2], f[3], f[4], f[5], f[0]);
                add_line(r, INT64_MAX, "(table)", line);
            }
        }
        if (!nl) break;
        p = nl + 1;
    }
    if (read_counts(&db) != 0) return -1;
    if (!g_inbox && g_tenant == 0) { /* the business rows: the run's database only */
        g_buf[0] = 0;
        if (tort_db_query(&db, "SELECT tag FROM soak_biz", g_buf, BUF_CAP, err, sizeof err) != 0) {
            printf("soak: %s %s FAILED: checker cannot read the business table: %s\n", g_hdr, g_backend, err);
            return -1;
        }
        for (p = g_buf; *p;) {
            char *nl = strchr(p, '\n');
            rec *r;
            if (nl) *nl = 0;
            r = find(p, 1);
            r->biz = 1;
            add_line(r, INT64_MAX, "(table)", "business row exists");
            if (!nl) break;
            p = nl + 1;
        }
    }
    tort_db_close(&db);
    return 0;
}

/* ---- rules ------------------------------------------------------------------------------------ */

static const char *RULES[] = {"LOST", "ROLLED-BACK", "BIZ", "PHANTOM", "STUCK", "DONE-UNHANDLED", "DEAD-REASON",
                              "EXPIRED-HANDLED", "CONCURRENT", "KEY-CONCURRENT", "KEY-ORDER", "ATTEMPT",
                              "INBOX-CONTENT", "INBOX-DONE-AGAIN", "REPLAY-UNHANDLED", "PURGE-LIVE",
                              "STATS", "CONNECTIONS", "CRASH", "REPLAY-STARTS", "JOIN", "FULL",
                              "EFFECT-TWICE", "EFFECT-MISSING", "EFFECT-UNDONE"};
#define NRULES ((int)(sizeof RULES / sizeof RULES[0]))
static long g_viol[NRULES];
static int g_printed, g_stats_checked, g_conns_checked;

static int rule_index(const char *rule) {
    int i;
    for (i = 0; i < NRULES; i++)
        if (strcmp(RULES[i], rule) == 0) return i;
    return -1;
}
static int known(const char *rule) {
    const char *k = getenv("SOAK_KNOWN");
    size_t n = strlen(rule);
    while (k && *k) {
        size_t m = strcspn(k, ", ");
        if (m == n && strncmp(k, rule, n) == 0) return 1;
        k += m;
        k += strspn(k, ", ");
    }
    return 0;
}

static int cmp_hline(const void *a, const void *b) {
    const hline *x = (const hline *)a, *y = (const hline *)b;
    return x->t < y->t ? -1 : x->t > y->t;
}
static void history(rec *r) {
    int i;
    qsort(r->lines, (size_t)r->nl, sizeof *r->lines, cmp_hline);
    printf("    history of %s (%d line(s)):\n", r->key, r->nl);
    for (i = 0; i < r->nl && i < 60; i++) printf("      %s\n", r->lines[i].text);
    if (r->nl > 60) printf("      ... %d more\n", r->nl - 60);
}

TORT_PRINTF(3, 4) static void violation(const char *rule, rec *r, const char *fmt, ...) {
    va_list ap;
    int i = rule_index(rule);
    g_viol[i]++;
    if (g_viol[i] > 3) return; /* the first few of each rule, with their history */
    printf("  %s %s: %s: ", known(rule) ? "WAIVED (SOAK_KNOWN)" : "VIOLATION", rule, r ? r->key : "-");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (r && g_printed++ < 30) history(r);
}

static int has_outcome(const rec *r, const char *o) {
    int i;
    for (i = 0; i < r->nh; i++)
        if (strcmp(r->h[i].outcome, o) == 0) return 1;
    return 0;
}
static int cmp_handling(const void *a, const void *b) {
    const handling *x = (const handling *)a, *y = (const handling *)b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* A purge deleted it, or may have: killed before it returned, or failed
 * with a transient error (the connection lost during its commit: the
 * delete may have committed). */
static int purged(const rec *r) {
    int i;
    for (i = 0; i < r->nops; i++) {
        const opr *o = &r->ops[i];
        /* An unknown outcome may have committed: killed, a transient error,
         * the tool killed (-1) or failing on the database (exit 2). */
        int unknown = o->t1 == 0 || o->rc == SOAK_RC_TRANSIENT || (o->tool && (o->rc == -1 || o->rc == 2));
        if (o->kind == 'P' && (o->n > 0 || unknown)) return 1;
    }
    return 0;
}

/* Operators: a replayed message is handled again; a purged one never after. */
static void check_ops(rec *r) {
    int i, k;
    for (i = 0; i < r->nops; i++) {
        opr *o = &r->ops[i];
        if (o->kind == 'R' && o->n > 0 && r->exp != 'p') {
            int again = 0, purged_after = 0;
            for (k = 0; k < r->nh; k++) again |= r->h[k].start > o->t0;
            for (k = 0; k < r->nops; k++)
                purged_after |= r->ops[k].kind == 'P' && r->ops[k].n > 0 && r->ops[k].t0 > o->t0;
            /* The first handling after the replay is the replayed message's
             * first start, but for claims whose process died before their
             * handler began (and one for dispatcher 0's failing allocator). */
            for (k = 0; k < r->nh; k++)
                if (r->h[k].start > o->t0) {
                    int allowed = 1 + worker_deaths(o->t0, r->h[k].start) + (g_oom ? 1 : 0);
                    if (r->h[k].starts > allowed)
                        violation("REPLAY-STARTS", r, "first handled after the replay at %lld with Starts %d (at most %d): the replay did not start the count again",
                                  (long long)o->t0, r->h[k].starts, allowed);
                    break;
                }
            if (!again)
                violation("REPLAY-UNHANDLED", r, "replayed at %lld (returned %ld), never handled again%s",
                          (long long)o->t0, o->n, purged_after ? ": a purge deleted it after the replay" : "");
        }
        if (o->kind == 'P' && o->n > 0) {
            for (k = 0; k < r->nh; k++) {
                int j, redelivered = 0; /* inbox: a delivery after the purge is a new message */
                for (j = 0; j < r->nd; j++)
                    redelivered |= r->d[j].t_intent > o->t0 && r->d[j].t_intent < r->h[k].start && r->d[j].enq != -2;
                if (!redelivered && (r->h[k].start > o->t0 || r->h[k].end > o->t0)) {
                    violation("PURGE-LIVE", r, "purged at %lld (returned %ld), yet a handler was inside it at %lld",
                              (long long)o->t0, o->n, (long long)r->h[k].start);
                    break;
                }
            }
        }
    }
}

/* The tenant a key belongs to: "...@n", else 0 (the run's database). */
static int mine(const rec *r) { return tenant_of(r->key) == g_tenant; }

static int row_done(const rec *r) { return g_inbox ? strcmp(r->status_text, "Done") == 0 : r->status == 2; }
static int row_dead(const rec *r) { return g_inbox ? strcmp(r->status_text, "Dead") == 0 : r->status == 3; }

static void check_dead_reason(rec *r) {
    const char *e = r->last_error ? r->last_error : "";
    char want[128];
    snprintf(want, sizeof want, "gave up after %d attempts: %s", SOAK_MAX_ATTEMPTS, SOAK_RETRY_REASON);
    if (strcmp(e, SOAK_DEAD_REASON) == 0) {
        if (!has_outcome(r, "dead")) violation("DEAD-REASON", r, "dead 'by handler', but no handler said dead");
    } else if (strcmp(e, want) == 0) {
        int i, ok = 0;
        for (i = 0; i < r->nh; i++)
            if (strcmp(r->h[i].outcome, "retry") == 0 && r->h[i].attempt == SOAK_MAX_ATTEMPTS - 1) ok = 1;
        if (!ok) violation("DEAD-REASON", r, "'%s', but no handling of the last attempt said retry", e);
    } else if (strncmp(e, "crash loop", 10) == 0) {
        if (r->starts < SOAK_MAX_STARTS) violation("DEAD-REASON", r, "crash loop with Starts %d < %d", r->starts, SOAK_MAX_STARTS);
    } else if (strcmp(e, "expired") == 0) {
        if (r->exp != 'p') violation("DEAD-REASON", r, "'expired' but it was not enqueued expired");
    } else {
        violation("DEAD-REASON", r, "dead for an undocumented reason: '%s'", e);
    }
}

/* The handlings of one message: never two at once; attempts move by retries
 * only; never claimed more than max_starts times without an outcome (a
 * message at the limit ends Dead; only a replay that does not start the
 * count again lets it past). */
/* See CONCURRENT: a (started first) lost its lease to a database fault. */
static int lease_lost_to_fault(const handling *a, const handling *b) {
    const int64_t lease = (int64_t)SOAK_LEASE_S * 1000000;
    int i;
    if (a->end != INT64_MAX && a->end - a->start <= lease) return 0; /* no renewal was needed */
    /* The lease that ran out before b's claim began at most a lease before
     * it; the fault covered at least a renewal interval (a third of the
     * lease) of that time, after a began. */
    for (i = 0; i < g_nfaults; i++) {
        int64_t from = g_faults[i].t0 > b->start - lease ? g_faults[i].t0 : b->start - lease;
        int64_t to = g_faults[i].t1 < b->start ? g_faults[i].t1 : b->start;
        if (from < a->start) from = a->start;
        if (to - from >= lease / 3) return 1;
    }
    return 0;
}

/* What pid a's lease renewal said from a's start to b's (soak.c: LR). */
static void renew_notes(const handling *a, const handling *b) {
    long i, n = 0;
    for (i = 0; i < g_nnotes; i++)
        if (g_notes[i].pid == a->pid && g_notes[i].t >= a->start && g_notes[i].t <= b->start) {
            if (n++ == 0) printf("    lease renewal in pid %d meanwhile:\n", a->pid);
            if (n <= 12) printf("      %lld %s\n", (long long)g_notes[i].t, g_notes[i].text);
        }
    if (n == 0) printf("    lease renewal in pid %d meanwhile: no failure logged\n", a->pid);
}

static void check_handlings(rec *r) {
    int i;
    qsort(r->h, (size_t)r->nh, sizeof *r->h, cmp_handling);
    for (i = 0; i < r->nh; i++)
        if (r->h[i].starts > SOAK_MAX_STARTS) {
            violation("REPLAY-STARTS", r, "handled at %lld with Starts %d > max_starts %d: a replay did not start the count again",
                      (long long)r->h[i].start, r->h[i].starts, SOAK_MAX_STARTS);
            break;
        }
    for (i = 0; i + 1 < r->nh; i++) {
        handling *a = &r->h[i], *b = &r->h[i + 1];
        int redelivered = 0, k;
        if (b->start < a->end && lease_lost_to_fault(a, b))
            g_lease_lost++;
        else if (b->start < a->end) {
            violation("CONCURRENT", r, "handler in pid %d started at %lld while pid %d's (started %lld) had not ended",
                      b->pid, (long long)b->start, a->pid, (long long)a->start);
            renew_notes(a, b);
        }
        /* inbox: a redelivery between the two may redrive a Dead one (attempt 0) */
        for (k = 0; k < r->nd; k++)
            if (r->d[k].t_intent < b->start && r->d[k].t_done > a->start) redelivered = 1;
        for (k = 0; k < r->nops; k++)
            if (r->ops[k].kind == 'R' && r->ops[k].n != 0 && r->ops[k].t0 < b->start &&
                (r->ops[k].t1 == 0 || r->ops[k].t1 > a->start))
                redelivered = 1;
        for (k = 0; k < g_ntr; k++)
            if (g_topic_replays[k].t0 < b->start && g_topic_replays[k].t1 > a->start) redelivered = 1;
        if (redelivered) continue; /* a replay or redelivery may start the attempts again */
        if (strcmp(a->outcome, "retry") == 0) {
            if (b->attempt != a->attempt && b->attempt != a->attempt + 1)
                violation("ATTEMPT", r, "attempt %d after a retry at attempt %d", b->attempt, a->attempt);
        } else if (b->attempt != a->attempt) {
            violation("ATTEMPT", r, "attempt %d after a handling at attempt %d that ended '%s'", b->attempt,
                      a->attempt, a->outcome[0] ? a->outcome : "(killed)");
        }
    }
}

static void check_join(rec *j);
static void check_outbox(rec *r) {
    int committed = r->committed || (r->mode == 't' && r->biz);
    if (r->is_join) {
        check_join(r);
        return;
    }
    if (r->key[0] == 'J') { /* a join's follow-up: enqueued by the library, checked by check_join */
        if (r->has_row && (r->status == 0 || r->status == 1)) violation("STUCK", r, "status %d after the drain", r->status);
        if (r->has_row && row_done(r) && !has_outcome(r, "done")) violation("DONE-UNHANDLED", r, "Done, but no handler said done");
        if (r->has_row && row_dead(r)) check_dead_reason(r);
        return;
    }
    if (!r->intent) {
        if (r->has_row || r->nh) violation("PHANTOM", r, "a row or a handling that no producer enqueued");
        else if (r->biz) violation("BIZ", r, "a business row that no producer wrote");
        return;
    }
    if (r->rolled || r->failed) {
        if (r->has_row || r->nh || r->biz)
            violation("ROLLED-BACK", r, "%s, yet %s", r->rolled ? "rolled back" : "refused",
                      r->has_row ? "its row exists" : r->nh ? "it was handled" : "its business row exists");
        return;
    }
    if (r->mode == 't' && r->has_row && !r->biz) violation("BIZ", r, "a transactional message without its business row");
    check_ops(r);
    if (committed && !r->has_row && !has_outcome(r, "done") && !purged(r)) violation("LOST", r, "committed, no row, never handled to done");
    if (!r->has_row) return;
    if (r->status == 0 || r->status == 1) violation("STUCK", r, "status %d after the drain", r->status);
    if (row_done(r) && !has_outcome(r, "done")) violation("DONE-UNHANDLED", r, "Done, but no handler said done");
    if (row_dead(r)) check_dead_reason(r);
    if (r->exp == 'p' && r->nh) { /* a replay drops the expiry: handled after one is right */
        int k, replayed = 0;
        int64_t first = r->h[0].start;
        for (k = 0; k < r->nh; k++)
            if (r->h[k].start < first) first = r->h[k].start;
        for (k = 0; k < r->nops; k++) replayed |= r->ops[k].kind == 'R' && r->ops[k].t0 < first;
        for (k = 0; k < g_ntr; k++) replayed |= g_topic_replays[k].t0 < first;
        if (!replayed) violation("EXPIRED-HANDLED", r, "enqueued expired, yet handled (and never replayed)");
    }
}

/* A join's follow-up: exactly once when every member is settled and the
 * join was not cancelled; never when the cancel won; "-ok" only when no
 * member failed (unless a replay ran, which cannot undo a counted failure). */
static void check_join(rec *j) {
    char key[700];
    rec *ok, *fail;
    int i, settled = 1, dead_now = 0, replayed = g_ntr > 0;
    int has_ok, has_fail;
    if (!j->has_jw || j->jw_rc != 0 || j->nmem < j->steps) return; /* never complete: nothing to expect */
    if (is_wait_gone(j->jid)) return; /* its join.wait is Dead or purged: nothing follows, by design */
    snprintf(key, sizeof key, "%s-ok", j->key);
    ok = find(key, 0);
    snprintf(key, sizeof key, "%s-fail", j->key);
    fail = find(key, 0);
    has_ok = ok && (ok->has_row || ok->nh);
    has_fail = fail && (fail->has_row || fail->nh);
    for (i = 0; i < j->nmem; i++) {
        rec *m = find(j->members[i], 0);
        int k;
        if (!m) { settled = 0; continue; }
        if (m->has_row) {
            if (row_dead(m)) dead_now = 1;
            else if (!row_done(m)) settled = 0;
        } else if (!has_outcome(m, "done") && !purged(m)) {
            settled = 0;
        }
        for (k = 0; k < m->nops; k++) replayed |= m->ops[k].kind == 'R';
    }
    if (has_ok && has_fail) violation("JOIN", j, "both follow-ups, -ok and -fail");
    if (j->has_jc == 1 && j->jc_rc == 0 && (has_ok || has_fail))
        violation("JOIN", j, "its cancel returned OK, yet a follow-up was enqueued");
    if (j->has_jc == 1 && j->jc_rc != 0 && !has_ok && !has_fail)
        violation("JOIN", j, "its cancel said it had finished (%d), yet there is no follow-up", j->jc_rc);
    if (!j->has_jc && settled && !has_ok && !has_fail)
        violation("JOIN", j, "every member settled, not cancelled, and no follow-up");
    if (has_ok && dead_now && !replayed) violation("JOIN", j, "completed (-ok) though a member is Dead");
}

static int cmp_delivery_done(const void *a, const void *b) {
    const delivery *x = (const delivery *)a, *y = (const delivery *)b;
    return x->t_intent < y->t_intent ? -1 : x->t_intent > y->t_intent;
}

static void check_inbox(rec *r) {
    int i, last = -1;
    if (r->nd == 0) {
        if (r->has_row || r->nh) violation("PHANTOM", r, "a row or a handling that no producer delivered");
        return;
    }
    qsort(r->d, (size_t)r->nd, sizeof *r->d, cmp_delivery_done);
    /* The last content accepted (versions only grow): a delivery that
     * returned enqueued, or one of unknown outcome (killed, or its commit
     * lost) that the row shows or a handler saw (the row may be gone:
     * Done, then cleaned up). */
    for (i = 0; i < r->nd; i++) {
        int k, handled = 0;
        for (k = 0; k < r->nh && r->d[i].enq == -1; k++) handled |= r->h[k].ver == r->d[i].ver;
        if (r->d[i].enq == 1 && r->d[i].ver > last) last = r->d[i].ver;
        if (r->d[i].enq == -1 && (r->row_ver == r->d[i].ver || handled) && r->d[i].ver > last) last = r->d[i].ver;
    }
    /* Found Done: never handled again after that. */
    for (i = 0; i < r->nd; i++)
        if (r->d[i].enq == 0) {
            int k;
            for (k = 0; k < r->nh; k++) {
                int j, anew = 0; /* accepted anew later: cleanup had deleted the Done row (retention) */
                for (j = 0; j < r->nd; j++)
                    anew |= r->d[j].enq != 0 && r->d[j].enq != -2 && r->d[j].t_intent > r->d[i].t_done &&
                            r->d[j].t_intent < r->h[k].start;
                if (!anew && r->h[k].start > r->d[i].t_done) {
                    violation("INBOX-DONE-AGAIN", r, "handled at %lld after the delivery at %lld found it Done",
                              (long long)r->h[k].start, (long long)r->d[i].t_done);
                    break;
                }
            }
        }
    if (last < 0) {
        if (r->has_row && r->row_ver >= 0) {
            int known_ver = 0;
            for (i = 0; i < r->nd; i++) known_ver |= r->d[i].ver == r->row_ver && r->d[i].enq != -2;
            if (!known_ver) violation("PHANTOM", r, "row content v%d was never delivered", r->row_ver);
        }
        return;
    }
    check_ops(r);
    if (!r->has_row) { /* cleanup deleted it once Done, or a purge once Dead */
        int seen = 0, done_any = 0;
        for (i = 0; i < r->nh; i++) {
            seen |= r->h[i].ver == last;
            done_any |= strcmp(r->h[i].outcome, "done") == 0;
        }
        if (purged(r)) return;
        if (!done_any) violation("LOST", r, "content v%d accepted, no row, never handled to done", last);
        else if (!seen)
            violation("INBOX-CONTENT", r, "its last accepted content v%d never reached a handler (row gone: Done, cleaned up)", last);
        return;
    }
    if (strcmp(r->status_text, "Processing") == 0 || strcmp(r->status_text, "Seen") == 0)
        violation("STUCK", r, "status %s after the drain", r->status_text);
    if (row_dead(r)) {
        check_dead_reason(r);
        return;
    }
    if (row_done(r)) {
        int seen = 0;
        for (i = 0; i < r->nh; i++) seen |= r->h[i].ver == last;
        if (!seen) violation("INBOX-CONTENT", r, "Done, but its last accepted content v%d never reached a handler", last);
        if (!has_outcome(r, "done")) violation("DONE-UNHANDLED", r, "Done, but no handler said done");
    }
}

/* Ordering keys (outbox): never two handlers of one key at once; first
 * handlings in enqueue order. */
typedef struct keyed {
    rec *r;
    int64_t first;  /* first handling's start, INT64_MAX when none */
} keyed;
static int cmp_keyed_commit(const void *a, const void *b) {
    const keyed *x = (const keyed *)a, *y = (const keyed *)b;
    return x->r->t_commit < y->r->t_commit ? -1 : x->r->t_commit > y->r->t_commit;
}
typedef struct kh {
    handling *h;
    rec *r;
} kh;
static int cmp_kh(const void *a, const void *b) {
    const kh *x = (const kh *)a, *y = (const kh *)b;
    return x->h->start < y->h->start ? -1 : x->h->start > y->h->start;
}

static void check_keys(void) {
    int k;
    for (k = 0; k < SOAK_KEYS; k++) {
        char key[16];
        keyed *ms = NULL;
        kh *hs = NULL;
        int nm = 0, cm = 0, nhs = 0, chs = 0, i, j;
        size_t s;
        snprintf(key, sizeof key, "k%d", k);
        for (s = 0; s < g_cap; s++) {
            rec *r = g_tab[s];
            if (!r || strcmp(r->okey, key) != 0 || !mine(r)) continue;
            for (i = 0; i < r->nh; i++) {
                kh x;
                x.h = &r->h[i];
                x.r = r;
                PUSH(hs, nhs, chs, x);
            }
            if (r->committed) {
                keyed m;
                m.r = r;
                m.first = r->nh ? r->h[0].start : INT64_MAX; /* sorted by check_handlings */
                /* First handled only after a replay (dead unhandled, e.g. a crash
                 * loop): a replayed message may run after later ones. */
                for (j = 0; j < r->nops; j++)
                    if (r->ops[j].kind == 'R' && r->ops[j].n != 0 && r->ops[j].t0 < m.first) m.first = INT64_MAX;
                /* One first handled late may have been dead; one enqueued already
                 * expired was (Dead "expired" at its claim) until a replay. */
                for (j = 0; j < g_ntr && m.first != INT64_MAX; j++)
                    if (g_topic_replays[j].t0 < m.first &&
                        (m.first - r->t_commit > 5000000 || (r->exp == 'p' && g_topic_replays[j].t0 > r->t_commit)))
                        m.first = INT64_MAX;
                PUSH(ms, nm, cm, m);
            }
        }
        if (nhs) qsort(hs, (size_t)nhs, sizeof *hs, cmp_kh);
        for (i = 0; i + 1 < nhs; i++) {
            int64_t end = hs[i].h->end;
            for (j = i + 1; j < nhs && hs[j].h->start < end; j++)
                if (hs[j].r != hs[i].r && lease_lost_to_fault(hs[i].h, hs[j].h))
                    g_lease_lost++; /* its message was settled by another meanwhile: the key moved on */
                else if (hs[j].r != hs[i].r)
                    violation("KEY-CONCURRENT", hs[j].r, "key %s: started at %lld while %s (started %lld in pid %d) had not ended",
                              key, (long long)hs[j].h->start, hs[i].r->key, (long long)hs[i].h->start, hs[i].h->pid);
        }
        if (nm) qsort(ms, (size_t)nm, sizeof *ms, cmp_keyed_commit);
        /* For each message b: every message a whose commit returned before
         * b's enqueue began and that was handled was first handled before b. */
        {
            int64_t best = INT64_MIN;
            rec *best_r = NULL;
            int p = 0;
            keyed *by_intent = (keyed *)xrealloc(NULL, (size_t)(nm ? nm : 1) * sizeof *by_intent);
            memcpy(by_intent, ms, (size_t)nm * sizeof *ms);
            /* sort b's by intent */
            for (i = 1; i < nm; i++) {
                keyed x = by_intent[i];
                for (j = i; j > 0 && by_intent[j - 1].r->t_intent > x.r->t_intent; j--) by_intent[j] = by_intent[j - 1];
                by_intent[j] = x;
            }
            for (i = 0; i < nm; i++) {
                keyed *b = &by_intent[i];
                while (p < nm && ms[p].r->t_commit < b->r->t_intent) {
                    if (ms[p].first != INT64_MAX && ms[p].first > best) {
                        best = ms[p].first;
                        best_r = ms[p].r;
                    }
                    p++;
                }
                if (b->first != INT64_MAX && best_r && b->first < best)
                    violation("KEY-ORDER", b->r, "key %s: first handled at %lld, before %s (committed earlier) was first handled at %lld",
                              key, (long long)b->first, best_r->key, (long long)best);
            }
            free(by_intent);
        }
        free(ms);
        free(hs);
    }
}

/* ---- at rest ----------------------------------------------------------------------------------- */

/* "name":N inside `text`, -1 when absent. */
static long json_num(const char *text, const char *name) {
    char pat[64];
    const char *p;
    snprintf(pat, sizeof pat, "\"%s\":", name);
    p = strstr(text, pat);
    return p ? atol(p + strlen(pat)) : -1;
}

/* Run obxctl with the run's connection and table; its stdout into out. */
static int run_tool(const char *args, char *out, size_t cap) {
    const char *ctl = getenv("SOAK_OBXCTL");
    char cmd[2048];
    FILE *f;
    size_t n;
    if (!ctl || !*ctl) return -1;
    snprintf(cmd, sizeof cmd, "'%s' -c '%s' --table '%s' %s %s 2>&1", ctl, g_conn, g_table, g_inbox ? "--inbox" : "", args);
    f = popen(cmd, "r");
    if (!f) return -1;
    n = fread(out, 1, cap - 1, f);
    out[n] = 0;
    return pclose(f);
}

/* A gauge's value in a metrics text: the line that starts with `name{`
 * and, when given, contains `labels`; -1 when absent. */
static double metric(const char *text, const char *name, const char *labels) {
    const char *line;
    size_t n = strlen(name);
    for (line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *end = strchr(line, '\n'), *sp;
        if (strncmp(line, name, n) != 0 || line[n] != '{') continue;
        sp = strstr(line, "} ");
        if (!sp || (end && sp > end)) continue;
        if (labels) {
            const char *l = strstr(line, labels);
            if (!l || l > sp) continue;
        }
        return atof(sp + 2);
    }
    return -1;
}

/* At rest, every gauge obxctl prints equals the table's counts (read_counts):
 * stats --json per state and per topic and state; metrics: the library's
 * gauges and obxctl's per-topic lines. Ready and scheduled are compared as
 * their sum (the split is a matter of the clock). The model's counts (rows,
 * done, dead: the messages the logs know) equal them too. */
static void check_stats(long rows, long done, long dead) {
    static char out[1 << 16];
    static const char *const json_states[ST_N] = {NULL, "in_flight", "done", "dead", "seen"};
    const char *m, *pfx = g_inbox ? "ibx" : "obx";
    long total = 0;
    int k, st, bad = 0;
    char name[96], labels[160];
    for (st = 0; st < ST_N; st++) total += g_tn[st];
    if (total != rows || g_tn[ST_DONE] != done || g_tn[ST_DEAD] != dead)
        violation("STATS", NULL, "the table's counts (rows=%ld done=%ld dead=%ld) differ from its rows as read (rows=%ld done=%ld dead=%ld)",
                  total, g_tn[ST_DONE], g_tn[ST_DEAD], rows, done, dead);
    if (run_tool("stats --json", out, sizeof out) != 0) {
        violation("STATS", NULL, "obxctl stats --json failed: %.300s", out);
        return;
    }
    m = strstr(out, "\"messages\":");
    if (!m) {
        violation("STATS", NULL, "obxctl stats --json: no messages object: %.300s", out);
        return;
    }
    {
        long waiting = json_num(m, "ready") + json_num(m, "scheduled");
        if (waiting != g_tn[ST_WAITING])
            violation("STATS", NULL, "obxctl stats: ready+scheduled=%ld; the table %ld", waiting, g_tn[ST_WAITING]);
        for (st = ST_IN_FLIGHT; st < ST_N; st++) {
            long v = st == ST_SEEN && !g_inbox ? 0 : json_num(m, json_states[st]);
            if (v != g_tn[st]) violation("STATS", NULL, "obxctl stats: %s=%ld; the table %ld", json_states[st], v, g_tn[st]);
        }
        if (json_num(m, "total") != total)
            violation("STATS", NULL, "obxctl stats: total=%ld; the table %ld", json_num(m, "total"), total);
        if (g_tn[ST_WAITING] == 0 && json_num(out, "oldest_ready_age_ms") != 0)
            violation("STATS", NULL, "obxctl stats: oldest_ready_age_ms=%ld with nothing ready", json_num(out, "oldest_ready_age_ms"));
        if (g_tn[ST_IN_FLIGHT] == 0 && json_num(out, "expired_leases") != 0)
            violation("STATS", NULL, "obxctl stats: expired_leases=%ld with nothing in flight", json_num(out, "expired_leases"));
    }
    for (k = 0; k < g_ntc; k++) { /* per topic: "topics":[{"topic":"s","ready":..},..] */
        char pat[96];
        const char *tp;
        snprintf(pat, sizeof pat, "{\"topic\":\"%.63s\",", g_tc[k].topic);
        tp = strstr(out, pat);
        if (!tp) {
            violation("STATS", NULL, "obxctl stats: no topic %s (the table has it)", g_tc[k].topic);
            continue;
        }
        if (json_num(tp, "ready") + json_num(tp, "scheduled") != g_tc[k].n[ST_WAITING])
            violation("STATS", NULL, "obxctl stats: topic %s ready+scheduled=%ld; the table %ld", g_tc[k].topic,
                      json_num(tp, "ready") + json_num(tp, "scheduled"), g_tc[k].n[ST_WAITING]);
        for (st = ST_IN_FLIGHT; st < ST_N; st++) {
            long v = st == ST_SEEN && !g_inbox ? 0 : json_num(tp, json_states[st]);
            if (v != g_tc[k].n[st])
                violation("STATS", NULL, "obxctl stats: topic %s %s=%ld; the table %ld", g_tc[k].topic, json_states[st], v, g_tc[k].n[st]);
        }
    }
    if (run_tool("metrics", out, sizeof out) != 0) {
        violation("STATS", NULL, "obxctl metrics failed: %.300s", out);
        return;
    }
    {
        double v[6];
        static const char *const g[6] = {"ready", "scheduled", "in_flight", "dead", "expired_leases", "oldest_ready_age_seconds"};
        for (k = 0; k < 6; k++) {
            snprintf(name, sizeof name, "%s_queue_%s%s", pfx, g[k], k < 4 ? "_messages" : "");
            v[k] = metric(out, name, NULL);
            if (v[k] < 0) {
                violation("STATS", NULL, "obxctl metrics: no %s", name);
                bad = 1;
            }
        }
        if (!bad) {
            if ((long)(v[0] + v[1]) != g_tn[ST_WAITING])
                violation("STATS", NULL, "metrics: %s_queue_ready+scheduled_messages=%.0f; the table %ld", pfx, v[0] + v[1], g_tn[ST_WAITING]);
            if ((long)v[2] != g_tn[ST_IN_FLIGHT])
                violation("STATS", NULL, "metrics: %s_queue_in_flight_messages=%.0f; the table %ld", pfx, v[2], g_tn[ST_IN_FLIGHT]);
            if ((long)v[3] != g_tn[ST_DEAD])
                violation("STATS", NULL, "metrics: %s_queue_dead_messages=%.0f; the table %ld", pfx, v[3], g_tn[ST_DEAD]);
            if (g_tn[ST_IN_FLIGHT] == 0 && v[4] != 0)
                violation("STATS", NULL, "metrics: %s_queue_expired_leases=%.0f with nothing in flight", pfx, v[4]);
            if (g_tn[ST_WAITING] == 0 && v[5] != 0)
                violation("STATS", NULL, "metrics: %s_queue_oldest_ready_age_seconds=%g with nothing ready", pfx, v[5]);
        }
    }
    snprintf(name, sizeof name, "%s_queue_topic_messages", pfx);
    for (k = 0; k < g_ntc; k++) {
        double w = 0, x;
        snprintf(labels, sizeof labels, "topic=\"%.63s\",status=\"ready\"", g_tc[k].topic);
        x = metric(out, name, labels);
        snprintf(labels, sizeof labels, "topic=\"%.63s\",status=\"scheduled\"", g_tc[k].topic);
        w = x + metric(out, name, labels);
        if (x < 0 || (long)w != g_tc[k].n[ST_WAITING])
            violation("STATS", NULL, "metrics: topic %s ready+scheduled=%.0f; the table %ld", g_tc[k].topic, w, g_tc[k].n[ST_WAITING]);
        for (st = ST_IN_FLIGHT; st < ST_N; st++) {
            if (st == ST_SEEN && !g_inbox) continue;
            snprintf(labels, sizeof labels, "topic=\"%.63s\",status=\"%s\"", g_tc[k].topic, json_states[st]);
            x = metric(out, name, labels);
            if ((long)x != g_tc[k].n[st])
                violation("STATS", NULL, "metrics: topic %s %s=%.0f; the table %ld", g_tc[k].topic, json_states[st], x, g_tc[k].n[st]);
        }
    }
    g_stats_checked = 1;
}

/* No connection left open on the server once every process stopped. */
static void check_connections(void) {
    tort_db db;
    char err[600];
    const char *sql;
    long long n = -1;
    int tries;
    if (strcmp(g_backend, "postgresql") == 0)
        sql = "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'";
    else if (strcmp(g_backend, "mariadb") == 0)
        sql = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND DB = DATABASE()";
    else
        return;
    if (tort_db_open(&db, g_conn, err, sizeof err) != 0) return;
    for (tries = 0; tries < 50; tries++) { /* a killed process's session may take a moment to go */
        n = tort_db_scalar(&db, sql);
        if (n == 0) break;
        tort_sleep_ms(200);
    }
    tort_db_close(&db);
    if (n != 0) violation("CONNECTIONS", NULL, "%lld connection(s) still open on the server after every process stopped", n);
    g_conns_checked = 1;
}

/* ---- transactional handlers' effects (soak_fx) ------------------------------------------ */

static long g_fx_rows, g_txh_msgs;

/* Reads soak_fx (K|V) and which rows are of the transactional topics. */
static int read_effects(void) {
    tort_db db;
    char err[600], sql[512], t[160], c[2][64];
    char *p;
    if (tort_db_open(&db, g_conn, err, sizeof err) != 0) {
        printf("soak: %s %s FAILED: checker cannot connect: %s\n", g_hdr, g_backend, err);
        return -1;
    }
    g_buf[0] = 0;
    if (tort_db_query(&db, "SELECT k, v FROM soak_fx", g_buf, BUF_CAP, err, sizeof err) != 0) {
        printf("soak: %s %s FAILED: checker cannot read the effects table: %s\n", g_hdr, g_backend, err);
        return -1;
    }
    for (p = g_buf; *p;) {
        char *nl = strchr(p, '\n'), *bar = strchr(p, '|'), line[700];
        rec *r;
        if (nl) *nl = 0;
        if (bar) *bar = 0;
        r = find(p, 1);
        r->fx++;
        r->fx_ver = bar ? atoi(bar + 1) : -1;
        if (r->fx_seen & (1u << ((unsigned)r->fx_ver & 31u))) r->fx_again++;
        r->fx_seen |= 1u << ((unsigned)r->fx_ver & 31u);
        g_fx_rows++;
        snprintf(line, sizeof line, "effect: v%d", r->fx_ver);
        add_line(r, INT64_MAX, "(soak_fx)", line);
        if (!nl) break;
        p = nl + 1;
    }
    g_buf[0] = 0;
    snprintf(sql, sizeof sql, "SELECT %s FROM %s WHERE %s IN ('x', 'y')", soak_qcol(c[0], 64, g_backend, "Payload"),
             soak_qtable(t, sizeof t, g_backend, g_inbox, g_table), soak_qcol(c[1], 64, g_backend, "Topic"));
    if (tort_db_query(&db, sql, g_buf, BUF_CAP, err, sizeof err) != 0) {
        printf("soak: %s %s FAILED: checker cannot read the topics: %s\n", g_hdr, g_backend, err);
        return -1;
    }
    for (p = g_buf; *p;) {
        char *nl = strchr(p, '\n'), key[600];
        if (nl) *nl = 0;
        snprintf(key, sizeof key, "%.*s", (int)strcspn(p, " "), p);
        find(key, 1)->txh = 1;
        g_txh_msgs++;
        if (!nl) break;
        p = nl + 1;
    }
    tort_db_close(&db);
    return 0;
}

/* Inbox: whether every effect is of a content the row no longer has, and a
 * handling of that content said done. Its ack, with newer content accepted
 * meanwhile, made the message ready again (ibx_enqueue: a redelivery in
 * flight) and committed the effect; the newer content may then end Dead. */
static int earlier_content_done(const rec *r) {
    int v, i, ok;
    for (v = 0; v < 32; v++) {
        if (!(r->fx_seen & (1u << (unsigned)v))) continue;
        if (v == (r->row_ver & 31)) return 0;
        for (ok = 0, i = 0; i < r->nh && !ok; i++) ok = r->h[i].ver == v && strcmp(r->h[i].outcome, "done") == 0;
        if (!ok) return 0;
    }
    return 1;
}

/* Exactly once on Done, never otherwise: once per content version on the
 * inbox (a content accepted while the message was in flight is handled, so
 * has its effect, again). */
static void check_effects(rec *r) {
    int allowed = 1, i, k;
    if (g_inbox) /* a Done row cleaned up, the message accepted anew: handled (and done) again */
        for (i = 0; i < r->nh; i++)
            if (strcmp(r->h[i].outcome, "done") == 0)
                for (k = 0; k < r->nd; k++)
                    if (r->d[k].enq == 1 && r->d[k].t_intent > r->h[i].end) {
                        allowed++;
                        break;
                    }
    if (r->fx_again + 1 > allowed) violation("EFFECT-TWICE", r, "its effect written %d times (%d of a content already seen)", r->fx, r->fx_again);
    if (r->has_row && row_done(r) && r->txh) {
        if (r->fx == 0) violation("EFFECT-MISSING", r, "Done, but its handler's effect is not there");
        else if (g_inbox && r->fx_ver != r->row_ver)
            violation("EFFECT-MISSING", r, "Done with content v%d, but the effect is of v%d", r->row_ver, r->fx_ver);
    }
    if (r->fx > 0 && r->has_row && !row_done(r) && !(g_inbox && earlier_content_done(r)))
        violation("EFFECT-UNDONE", r, "an effect, but the message is %s", g_inbox ? r->status_text : row_dead(r) ? "Dead" : "not Done");
    else if (r->fx > 0 && !r->has_row && !has_outcome(r, "done"))
        violation("EFFECT-UNDONE", r, "an effect, no row, and no handler said done");
}

int main(int argc, char **argv) {
    size_t i;
    long messages = 0, handlings = 0, committed = 0, rolled = 0, done = 0, dead = 0, total = 0, waived = 0;
    int r;
    if (argc != 6) {
        fprintf(stderr, "usage: check obx|ibx sqlite|postgresql|mariadb CONN TABLE DIR\n");
        return 2;
    }
    g_hdr = argv[1];
    g_backend = argv[2];
    g_conn = argv[3];
    g_table = argv[4];
    g_dir = argv[5];
    g_inbox = strcmp(g_hdr, "ibx") == 0;
    g_tenant = getenv("SOAK_TENANT") ? atoi(getenv("SOAK_TENANT")) : 0;
    g_oom = !getenv("SOAK_OOM_RATE") || atoi(getenv("SOAK_OOM_RATE")) != 0;
    read_orch();
    read_logs();
    check_connections();
    close_handlings();
    if (read_tables() != 0) return 1;
    if (read_effects() != 0) return 1;
    for (i = 0; i < g_cap; i++) {
        rec *x = g_tab[i];
        if (!x || !mine(x)) continue;
        check_handlings(x);
    }
    for (i = 0; i < g_cap; i++) {
        rec *x = g_tab[i];
        if (!x || !mine(x)) continue;
        messages++;
        handlings += x->nh;
        committed += x->committed || (x->mode == 't' && x->biz) || (g_inbox && x->has_row);
        rolled += x->rolled;
        if (x->has_row && row_done(x)) done++;
        if (x->has_row && row_dead(x)) dead++;
        if (g_inbox) check_inbox(x);
        else check_outbox(x);
    }
    for (i = 0; i < g_cap; i++)
        if (g_tab[i] && mine(g_tab[i])) check_effects(g_tab[i]);
    if (!g_inbox) check_keys();
    if (g_tenant == 0) /* once per run */
        for (r = 0; r < g_ncrashes; r++) {
            char path[1200], line[1200];
            FILE *f;
            long nl = 0, k = 0;
            violation("CRASH", NULL, "%s (pid %d) died of %s at %lld (not a kill, not the poison's abort; a sanitizer's report is in run.err)",
                      g_crashes[r].name, g_crashes[r].pid, g_crashes[r].how, g_crashes[r].t);
            snprintf(path, sizeof path, "%s/%s.log", g_dir, g_crashes[r].name);
            if (r < 3 && (f = fopen(path, "r")) != NULL) { /* its last lines */
                while (fgets(line, sizeof line, f)) nl++;
                rewind(f);
                printf("    last lines of %s:\n", path);
                while (fgets(line, sizeof line, f))
                    if (++k > nl - 5) printf("      %s", line);
                fclose(f);
            }
        }
    {
        long rows = 0;
        for (i = 0; i < g_cap; i++) rows += g_tab[i] && g_tab[i]->has_row;
        check_stats(rows + g_other_rows, done + g_other_done, dead + g_other_dead);
    }
    if (g_max_pending > 0 && g_tenant == 0 && g_full == 0)
        violation("FULL", NULL, "no enqueue met max_pending %ld (OBX_ERR_FULL): the bound went untested", g_max_pending);
    printf("soak: %s %s t%d check: messages=%ld committed=%ld rolled_back=%ld full_refusals=%ld handlings=%ld done=%ld dead=%ld kills=%ld db_faults=%d disk_full_failures=%ld renewal_connects_refused=%ld renewal_warnings=%ld lease_lost_to_fault=%ld operator_actions=%ld lines=%ld%s%s",
           g_hdr, g_backend, g_tenant, messages, committed, rolled, g_full, handlings, done, dead, g_kills, g_nfaults, g_disk_full, g_renew_refused, g_nnotes, g_lease_lost, g_ops_done, g_nlines,
           g_stats_checked ? " stats=checked" : "", g_conns_checked ? " connections=checked" : "");
    for (r = 0; r < NRULES; r++) {
        if (!g_viol[r]) continue;
        printf(" %s=%ld%s", RULES[r], g_viol[r], known(RULES[r]) ? "(waived)" : "");
        if (known(RULES[r])) waived += g_viol[r];
        else total += g_viol[r];
    }
    printf(" violations=%ld\n", total);
    printf("soak: %s %s t%d effects: transactional_messages=%ld effects=%ld\n", g_hdr, g_backend, g_tenant, g_txh_msgs, g_fx_rows);
    if (waived)
        printf("soak: WARNING: %ld violation(s) of known, still unfixed defects WAIVED by SOAK_KNOWN=%s\n", waived,
               getenv("SOAK_KNOWN"));
    if (messages == 0 || handlings == 0) {
        printf("soak: %s %s FAILED: nothing was enqueued or handled\n", g_hdr, g_backend);
        return 1;
    }
    return total ? 1 : 0;
}

/* Torture scenario 1 (crash) and scenario 3 (SQLite durability under kills).
 *
 * One orchestrator runs 3+ producer and 4+ dispatcher processes (this same
 * program in another role) against one database, SIGKILLs a random one of
 * them at random moments and starts it again, then stops them all, drains
 * what is left and checks the books:
 *   outbox: each producer writes a business row and its message in one
 *           transaction (obx_enqueue_tx); the business table is the truth of
 *           what was committed.
 *   inbox:  each producer records deliveries as a webhook receiver would,
 *           with repeats (also of messages already Done), and logs each one
 *           ibx_enqueue accepted; that log is the truth.
 * Handlers append "H key start_us end_us pid" to a log of their own process.
 * Figures: messages, kills, lost (committed/accepted, never handled), stuck
 * (not Done after the drain), orphans (outbox: a business row without its
 * message or a message without its row), done_unhandled (Done, no handler
 * ran), rehandled (inbox: handled again after a redelivery found it Done),
 * concurrent (two handlings of one message overlapping in time), duplicates
 * (extra handlings, at least once), and on SQLite PRAGMA integrity_check.
 *
 * The "faults" mode is scenario 2 (database faults): one producer and two
 * dispatchers with the library's default timings work while
 * TORTURE_FAULT_SCRIPT (tests/torture/dbfault.sh) restarts the server, kills
 * its sessions and freezes it; each fault's recovery time (server accepting
 * again -> first message enqueued since then is handled, and -> first
 * message enqueued) is printed and bounded by TORTURE_RECOVERY_BOUND_MS
 * (2000); a freeze must produce a log line naming a timeout. The same books
 * are kept at the end.
 *
 * The "providers" mode is scenario 6: one producer and one dispatcher over a
 * provider of the databases in TORTURE_DB_1..3 ("id|backend|conn"); each
 * database in turn is restarted (servers, through the fault script) or
 * removed by discovery and re-added (SQLite); the others' longest stall and
 * the time until the faulted one flows again are printed, lost and stuck
 * counted over all.
 *
 * Usage: crash run|faults|providers obx|ibx sqlite|postgresql|mariadb 'CONN' TABLE DIR
 * Environment: TORTURE_SECONDS (kill phase, default 20), TORTURE_KILLS
 * (at least this many kills, default 50), TORTURE_PRODUCERS (3),
 * TORTURE_DISPATCHERS (4), TORTURE_MESSAGES (per producer, 1000),
 * TORTURE_SCALE (multiplies seconds and messages), TORTURE_FAULTS
 * ("restart terminate freeze"), TORTURE_RECOVERY_WINDOW_MS (12000: how long
 * a recovery is waited for before the workers are restarted by force). */
#define OBX_IMPLEMENTATION
#include "../../obx.h"
#define IBX_IMPLEMENTATION
#include "../../ibx.h"
#include "tort.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *g_self, *g_hdr, *g_backend, *g_conn, *g_table, *g_dir;
static int g_inbox;
static int g_txh; /* TORTURE_TXH: transactional handlers, each writing its effect in the ack's transaction */
static volatile sig_atomic_t g_stop;
static long g_pace_ms; /* producers: pause after each message */

static void on_term(int sig) {
    (void)sig;
    g_stop = 1;
}

static int g_logfd = -1; /* workers: WARN and ERROR lines, with the time, for the fault runs */
static void quiet_log(obx_log_level level, const char *id, const char *msg, void *user) {
    (void)user;
    if (g_logfd >= 0 && level >= OBX_LOG_WARN) {
        char line[900];
        int n = snprintf(line, sizeof line, "%lld %d [%s] %s\n", (long long)tort_wall_us(), (int)level, id, msg);
        if (n > 0 && write(g_logfd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0) g_logfd = -1;
    }
    if (level >= OBX_LOG_WARN && getenv("TORTURE_VERBOSE")) fprintf(stderr, "  [%d %s] %s\n", (int)getpid(), id, msg);
}
static void iquiet_log(ibx_log_level level, const char *id, const char *msg, void *user) {
    quiet_log((obx_log_level)level, id, msg, user);
}

/* Names quoted the way the backend wants them (MariaDB without ANSI_QUOTES). */
static const char *qname(char *out, size_t cap, const char *name) {
    if (strcmp(g_backend, "mariadb") == 0) snprintf(out, cap, "`%s`", name);
    else if (strcmp(g_backend, "postgresql") == 0)
        snprintf(out, cap, "\"%s\".\"%s\"", g_inbox ? "infra" : "dbo", name);
    else snprintf(out, cap, "\"%s\"", name);
    return out;
}
static const char *col(char *out, size_t cap, const char *name) {
    snprintf(out, cap, strcmp(g_backend, "mariadb") == 0 ? "`%s`" : "\"%s\"", name);
    return out;
}

/* Backend sqlite3: SQLite, through its C API (built with OBX_SQLITE3_API). */
static int is_sqlite(void) { return strcmp(g_backend, "sqlite") == 0 || strcmp(g_backend, "sqlite3") == 0; }

/* ---- logs ---------------------------------------------------------------------------- */

static int open_log(const char *kind, int id) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s-%d.log", g_dir, kind, id);
    return open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
}
static void log_line(int fd, const char *line) {
    size_t n = strlen(line);
    /* One write per line with O_APPEND: a kill leaves whole lines only. */
    if (write(fd, line, n) != (ssize_t)n) {
        perror("torture: log write");
        _exit(3);
    }
}

/* ---- dispatcher role --------------------------------------------------------------------- */

static int g_hlog = -1;

static void handled(const char *key, int64_t start) {
    char line[256];
    snprintf(line, sizeof line, "H %s %lld %lld %d\n", key, (long long)start, (long long)tort_wall_us(),
             (int)getpid());
    log_line(g_hlog, line);
}
static obx_outcome ohandle(const obx_message *m, char *e, size_t cap, void *u) {
    int64_t t = tort_wall_us();
    (void)e; (void)cap; (void)u;
    tort_sleep_ms(1); /* some work: a kill can land inside a handler */
    handled(m->payload, t);
    return OBX_DONE;
}
static ibx_outcome ihandle(const ibx_message *m, char *e, size_t cap, void *u) {
    int64_t t = tort_wall_us();
    (void)e; (void)cap; (void)u;
    tort_sleep_ms(1);
    handled(m->payload, t);
    return IBX_DONE;
}

/* TORTURE_TXH: the handler's effect, a row of fx_<table> keyed by the
 * message, written on the store's connection in the transaction that acks
 * it (obx_dispatcher_on_tx): the books then find each message's effect
 * exactly once, and only on Done messages. */
static int fx_write(void *hdbc, const char *key, char *state, long *native) {
    char sql[256];
    snprintf(sql, sizeof sql, "INSERT INTO fx_%s (k) VALUES ('%s')", g_table, key);
#ifdef OBX_SQLITE3_API /* hdbc is the sqlite3 *; the native code is SQLite's */
    *native = sqlite3_exec((sqlite3 *)hdbc, sql, NULL, NULL, NULL);
    (void)state;
    return *native == SQLITE_OK;
#else
    {
        SQLHSTMT st;
        SQLRETURN rc;
        SQLSMALLINT len = 0;
        SQLINTEGER n = 0;
        if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, (SQLHDBC)hdbc, &st))) return 0;
        rc = SQLExecDirect(st, (SQLCHAR *)sql, SQL_NTS);
        if (!SQL_SUCCEEDED(rc)) SQLGetDiagRec(SQL_HANDLE_STMT, st, 1, (SQLCHAR *)state, &n, NULL, 0, &len);
        SQLFreeHandle(SQL_HANDLE_STMT, st);
        *native = (long)n;
        return SQL_SUCCEEDED(rc);
    }
#endif
}
static obx_outcome otx_handle(const obx_message *m, void *hdbc, char *e, size_t cap, void *u) {
    int64_t t = tort_wall_us();
    char state[6] = "";
    long native = 0;
    (void)u;
    tort_sleep_ms(1); /* some work: a kill can land inside a handler */
    if (!fx_write(hdbc, m->payload, state, &native)) {
        snprintf(e, cap, "effect: %s %ld", state, native);
        return obx_tx_conflict(m->store, state, native) ? OBX_CONFLICT : OBX_RETRY;
    }
    handled(m->payload, t);
    return OBX_DONE;
}
static ibx_outcome itx_handle(const ibx_message *m, void *hdbc, char *e, size_t cap, void *u) {
    int64_t t = tort_wall_us();
    char state[6] = "";
    long native = 0;
    (void)u;
    tort_sleep_ms(1);
    if (!fx_write(hdbc, m->payload, state, &native)) {
        snprintf(e, cap, "effect: %s %ld", state, native);
        return ibx_tx_conflict(m->store, state, native) ? IBX_CONFLICT : IBX_RETRY;
    }
    handled(m->payload, t);
    return IBX_DONE;
}
static int ion(ibx_dispatcher *d) {
    return (g_txh ? ibx_dispatcher_on_tx(d, "t", itx_handle, NULL) : ibx_dispatcher_on(d, "t", ihandle, NULL)) == IBX_OK;
}
static int oon(obx_dispatcher *d) {
    return (g_txh ? obx_dispatcher_on_tx(d, "t", otx_handle, NULL) : obx_dispatcher_on(d, "t", ohandle, NULL)) == OBX_OK;
}

static obx_store *open_obx(int deploy) {
    obx_store_desc d;
    obx_store *s = NULL;
    memset(&d, 0, sizeof d);
    d.connection_string = g_conn;
    d.table = g_table;
    d.deploy_schema = deploy;
    d.hooks.logger.log = quiet_log;
    if (obx_store_open(&d, &s) != OBX_OK) {
        fprintf(stderr, "torture: open failed: %s\n", s ? obx_store_last_error(s)->message : "no memory");
        obx_store_close(s);
        return NULL;
    }
    return s;
}
static ibx_store *open_ibx(int deploy) {
    ibx_store_desc d;
    ibx_store *s = NULL;
    memset(&d, 0, sizeof d);
    d.connection_string = g_conn;
    d.table = g_table;
    d.deploy_schema = deploy;
    d.hooks.logger.log = iquiet_log;
    if (ibx_store_open(&d, &s) != IBX_OK) {
        fprintf(stderr, "torture: open failed: %s\n", s ? ibx_store_last_error(s)->message : "no memory");
        ibx_store_close(s);
        return NULL;
    }
    return s;
}

/* Dispatcher settings of the crash runs: short leases so that the work of a
 * killed dispatcher comes back within the run, quick polls. */
#define LEASE_S 2

static int role_dispatcher(int id) {
    g_hlog = open_log("handled", id);
    g_logfd = open_log("log", id);
    while (!g_stop) {
        if (g_inbox) {
            ibx_store *s = open_ibx(0);
            ibx_dispatcher_desc d;
            ibx_dispatcher *disp = NULL;
            if (!s) { tort_sleep_ms(200); continue; }
            memset(&d, 0, sizeof d);
            d.store = s;
            d.stop_flag = &g_stop;
            if (getenv("TORTURE_DEFAULTS")) {
                d.lease_seconds = 5; /* the rest: the library's defaults */
            } else {
                d.batch_size = 10;
                d.lease_seconds = LEASE_S;
                d.poll_interval_ms = 20;
                d.idle_max_ms = 200;
                d.reap_interval_ms = 500;
                d.error_delay_ms = 200;
            }
            if (ibx_dispatcher_create(&d, &disp) == IBX_OK && ion(disp)) ibx_dispatcher_run(disp);
            ibx_dispatcher_destroy(disp);
            ibx_store_close(s);
        } else {
            obx_store *s = open_obx(0);
            obx_dispatcher_desc d;
            obx_dispatcher *disp = NULL;
            if (!s) { tort_sleep_ms(200); continue; }
            memset(&d, 0, sizeof d);
            d.store = s;
            d.stop_flag = &g_stop;
            if (getenv("TORTURE_DEFAULTS")) {
                d.lease_seconds = 5; /* the rest: the library's defaults */
            } else {
                d.batch_size = 10;
                d.lease_seconds = LEASE_S;
                d.poll_interval_ms = 20;
                d.idle_max_ms = 200;
                d.reap_interval_ms = 500;
                d.error_delay_ms = 200;
            }
            if (obx_dispatcher_create(&d, &disp) == OBX_OK && oon(disp)) obx_dispatcher_run(disp);
            obx_dispatcher_destroy(disp);
            obx_store_close(s);
        }
    }
    return 0;
}

/* ---- producer role ------------------------------------------------------------------------- */

static int exec_sql(tort_db *db, const char *sql) {
    char err[600];
    if (tort_db_query(db, sql, NULL, 0, err, sizeof err) != 0) {
        if (getenv("TORTURE_VERBOSE")) fprintf(stderr, "torture: %s: %s\n", sql, err);
        return -1;
    }
    return 0;
}
static int end_tx(tort_db *db, int commit) {
    if (is_sqlite()) return exec_sql(db, commit ? "COMMIT" : "ROLLBACK");
#ifdef OBX_SQLITE3_API
    return -1; /* SQLite only */
#else
    return SQL_SUCCEEDED(SQLEndTran(SQL_HANDLE_DBC, db->dbc, commit ? SQL_COMMIT : SQL_ROLLBACK)) ? 0 : -1;
#endif
}

static int connect_tx(tort_db *db) {
    char err[600];
    if (tort_db_open(db, g_conn, err, sizeof err) != 0) {
        fprintf(stderr, "torture: producer connect: %s\n", err);
        return -1;
    }
    /* The caller's transaction: autocommit off, except SQLite, where the
     * writer takes the lock up front with BEGIN IMMEDIATE. */
#ifndef OBX_SQLITE3_API
    if (!is_sqlite()) SQLSetConnectAttr(db->dbc, SQL_ATTR_AUTOCOMMIT, (SQLPOINTER)SQL_AUTOCOMMIT_OFF, 0);
#endif
    return 0;
}

static int role_producer_obx(int id, long max) {
    int fd = open_log("accepted", id);
    tort_db db;
    obx_store *s;
    char sql[512], key[64];
    long seq;
    long long last;
    g_logfd = open_log("log", id);
    if (connect_tx(&db) != 0) return 1;
    s = open_obx(0);
    if (!s) return 1;
    snprintf(sql, sizeof sql, "SELECT COALESCE(MAX(seq), 0) FROM biz_%s WHERE producer = %d", g_table, id);
    last = tort_db_scalar(&db, sql);
    if (last < 0) return 1;
    if (!is_sqlite()) end_tx(&db, 0);
    for (seq = (long)last + 1; seq <= max && !g_stop;) {
        obx_new_message m;
        int ok;
        snprintf(key, sizeof key, "p%d-%ld", id, seq);
        ok = !is_sqlite() || exec_sql(&db, "BEGIN IMMEDIATE") == 0;
        snprintf(sql, sizeof sql, "INSERT INTO biz_%s (id, producer, seq) VALUES ('%s', %d, %ld)", g_table, key, id, seq);
        ok = ok && exec_sql(&db, sql) == 0;
        memset(&m, 0, sizeof m);
        m.topic = "t";
        m.payload = key;
        m.payload_len = OBX_NTS;
        m.priority = (int)(seq % 11) - 5; /* every priority: the books hold whatever the claim order */
        ok = ok && obx_enqueue_tx(s, db.dbc, &m, NULL) == OBX_OK;
        ok = ok && end_tx(&db, 1) == 0;
        if (ok) {
            char line[160];
            snprintf(line, sizeof line, "A %s %lld\n", key, (long long)tort_wall_us());
            log_line(fd, line);
            seq++;
            tort_sleep_ms(g_pace_ms);
            continue;
        }
        end_tx(&db, 0);
#ifndef OBX_SQLITE3_API
        {
            /* Our own connection died (the server went away): connect again. */
            SQLUINTEGER dead = 0;
            if (SQL_SUCCEEDED(SQLGetConnectAttr(db.dbc, SQL_ATTR_CONNECTION_DEAD, &dead, 0, NULL)) &&
                dead == SQL_CD_TRUE) {
                tort_db_close(&db);
                while (connect_tx(&db) != 0 && !g_stop) tort_sleep_ms(100);
                if (g_stop) break;
            }
        }
#endif
        /* A commit whose outcome is unknown: the business row says. */
        snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM biz_%s WHERE id = '%s'", g_table, key);
        if (tort_db_scalar(&db, sql) == 1) seq++;
        if (!is_sqlite()) end_tx(&db, 0);
        tort_sleep_ms(20);
    }
    obx_store_close(s);
    tort_db_close(&db);
    return 0;
}

static long max_accepted_seq(int id) {
    char path[1200], line[256];
    long best = 0;
    FILE *f;
    snprintf(path, sizeof path, "%s/accepted-%d.log", g_dir, id);
    f = fopen(path, "r");
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) {
        char kind;
        int p;
        long sq;
        if (sscanf(line, "%c p%d-%ld", &kind, &p, &sq) == 3 && kind == 'A' && sq > best) best = sq;
    }
    fclose(f);
    return best;
}

static int role_producer_ibx(int id, long max) {
    ibx_store *s;
    g_logfd = open_log("log", id);
    s = open_ibx(0);
    int fd = open_log("accepted", id);
    long seq = max_accepted_seq(id) + 1;
    unsigned int rnd = (unsigned int)getpid();
    char src[16], mid[32], key[64], line[160];
    if (!s || fd < 0) return 1;
    snprintf(src, sizeof src, "p%d", id);
    while (seq <= max && !g_stop) {
        ibx_new_message m;
        int enq = -1, redeliver;
        long which;
        ibx_result r;
        rnd = rnd * 1103515245u + 12345u;
        /* A quarter of the deliveries repeat an earlier one (the sender did not
         * see our 200), half of those the latest, the rest any earlier one. */
        redeliver = seq > 1 && (rnd >> 16) % 4 == 0;
        which = !redeliver ? seq : ((rnd >> 8) % 2 ? seq - 1 : 1 + (long)((rnd >> 4) % (unsigned long)(seq - 1)));
        snprintf(mid, sizeof mid, "%ld", which);
        snprintf(key, sizeof key, "p%d-%ld", id, which);
        memset(&m, 0, sizeof m);
        m.topic = "t";
        m.source = src;
        m.message_id = mid;
        m.priority = (int)(which % 11) - 5; /* a redelivery gives the same priority */
        m.payload = key;
        m.payload_len = IBX_NTS;
        r = ibx_enqueue(s, &m, &enq);
        if (r != IBX_OK) {
            tort_sleep_ms(20);
            continue;
        }
        snprintf(line, sizeof line, "%c %s %lld\n", enq ? 'A' : 'R', key, (long long)tort_wall_us());
        log_line(fd, line);
        if (!redeliver) seq++;
        tort_sleep_ms(g_pace_ms * 3 / 4); /* a quarter of the deliveries are repeats */
    }
    ibx_store_close(s);
    close(fd);
    return 0;
}

/* ---- orchestrator ---------------------------------------------------------------------------- */

typedef struct child {
    pid_t pid;
    int producer; /* else dispatcher */
    int id;
} child;

static pid_t spawn_role(const char *role, int id, long max) {
    pid_t pid = fork();
    if (pid == 0) {
        char ids[16], maxs[32];
        snprintf(ids, sizeof ids, "%d", id);
        snprintf(maxs, sizeof maxs, "%ld", max);
        execl(g_self, g_self, role, g_hdr, g_backend, g_conn, g_table, g_dir, ids, maxs, (char *)NULL);
        _exit(127);
    }
    return pid;
}
static pid_t spawn(int producer, int id, long max) {
    return spawn_role(producer ? "producer" : "dispatcher", id, max);
}

typedef struct hrec {
    char key[40];
    int64_t start, end;
} hrec;

static int cmp_hrec(const void *a, const void *b) {
    const hrec *x = (const hrec *)a, *y = (const hrec *)b;
    int c = strcmp(x->key, y->key);
    if (c) return c;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Every "<prefix>-*.log" line starting with `kind` into a growing array. */
static hrec *read_logs(const char *prefix, char kind, long *n) {
    DIR *d = opendir(g_dir);
    struct dirent *e;
    hrec *v = NULL;
    long cap = 0;
    *n = 0;
    if (!d) return NULL;
    while ((e = readdir(d)) != NULL) {
        char path[1200], line[256];
        FILE *f;
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        snprintf(path, sizeof path, "%s/%s", g_dir, e->d_name);
        f = fopen(path, "r");
        if (!f) continue;
        while (fgets(line, sizeof line, f)) {
            hrec h;
            long long a = 0, b = 0;
            char k;
            int got = sscanf(line, "%c %39s %lld %lld", &k, h.key, &a, &b);
            if (got < 3 || k != kind) continue;
            h.start = a;
            h.end = got == 4 ? b : a;
            if (*n == cap) {
                cap = cap ? cap * 2 : 4096;
                v = (hrec *)realloc(v, (size_t)cap * sizeof *v);
                if (!v) abort();
            }
            v[(*n)++] = h;
        }
        fclose(f);
    }
    closedir(d);
    if (*n) qsort(v, (size_t)*n, sizeof *v, cmp_hrec);
    return v;
}
static int handled_key(const hrec *h, long n, const char *key) {
    long lo = 0, hi = n;
    while (lo < hi) {
        long mid = (lo + hi) / 2;
        if (strcmp(h[mid].key, key) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && strcmp(h[lo].key, key) == 0;
}
/* The handlings of `key` that started after `t`. */
static long handled_after(const hrec *h, long n, const char *key, int64_t t) {
    long lo = 0, hi = n, c = 0;
    while (lo < hi) {
        long mid = (lo + hi) / 2;
        if (strcmp(h[mid].key, key) < 0) lo = mid + 1;
        else hi = mid;
    }
    for (; lo < n && strcmp(h[lo].key, key) == 0; lo++)
        if (h[lo].start > t) c++;
    return c;
}

/* What is not Done yet, by SQL. */
static long long pending(tort_db *db) {
    char sql[512], t[160], c[64];
    if (g_inbox)
        snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM %s WHERE %s <> 'Done'", qname(t, sizeof t, g_table),
                 col(c, sizeof c, "Status"));
    else
        snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM %s WHERE %s <> 2", qname(t, sizeof t, g_table),
                 col(c, sizeof c, "Status"));
    return tort_db_scalar(db, sql);
}

/* After the kills: one dispatcher in this process until nothing is left,
 * leases of killed dispatchers expiring meanwhile. Bounded. */
static void drain(tort_db *db, int64_t bound_ms) {
    int64_t until = tort_now_ms() + bound_ms;
    obx_store *os = NULL;
    ibx_store *is = NULL;
    obx_dispatcher *od = NULL;
    ibx_dispatcher *id = NULL;
    g_hlog = open_log("handled", 999);
    if (g_inbox) {
        ibx_dispatcher_desc d;
        is = open_ibx(0);
        memset(&d, 0, sizeof d);
        d.store = is;
        d.lease_seconds = LEASE_S;
        d.reap_interval_ms = 200;
        if (!is || ibx_dispatcher_create(&d, &id) != IBX_OK || !ion(id)) goto out;
    } else {
        obx_dispatcher_desc d;
        os = open_obx(0);
        memset(&d, 0, sizeof d);
        d.store = os;
        d.lease_seconds = LEASE_S;
        d.reap_interval_ms = 200;
        if (!os || obx_dispatcher_create(&d, &od) != OBX_OK || !oon(od)) goto out;
    }
    while (tort_now_ms() < until) {
        int r;
        if (g_inbox) {
            ibx_result ir = ibx_dispatcher_run_once(id, NULL);
            r = (int)ir;
        } else {
            obx_result orr = obx_dispatcher_run_once(od, NULL);
            r = (int)orr;
        }
        if (r == 1 /* EMPTY */) {
            if (pending(db) == 0) break;
            tort_sleep_ms(100);
        } else if (r < 0) {
            tort_sleep_ms(100);
        }
    }
out:
    ibx_dispatcher_destroy(id);
    obx_dispatcher_destroy(od);
    ibx_store_close(is);
    obx_store_close(os);
    close(g_hlog);
}

/* Fresh tables: the library's (deployed by an open, then emptied) and the
 * business one. Returns 0 on success. */
static int setup(tort_db *db) {
    char err[600], sql[512], t[160];
    if (tort_db_open(db, g_conn, err, sizeof err) != 0) {
        printf("torture: %s %s FAILED: cannot connect: %s\n", g_inbox ? "inbox" : "outbox", g_backend, err);
        return -1;
    }
    if (g_inbox) {
        ibx_store *s = open_ibx(1);
        if (!s) return -1;
        ibx_store_close(s);
    } else {
        obx_store *s = open_obx(1);
        if (!s) return -1;
        obx_store_close(s);
        snprintf(sql, sizeof sql, "DROP TABLE IF EXISTS biz_%s", g_table);
        exec_sql(db, sql);
        snprintf(sql, sizeof sql,
                 "CREATE TABLE biz_%s (id VARCHAR(64) NOT NULL PRIMARY KEY, producer INT NOT NULL, seq INT NOT NULL)",
                 g_table);
        if (exec_sql(db, sql) != 0) {
            printf("torture: outbox %s FAILED: cannot create the business table\n", g_backend);
            return -1;
        }
    }
    snprintf(sql, sizeof sql, "DELETE FROM %s", qname(t, sizeof t, g_table));
    exec_sql(db, sql);
    if (g_txh) {
        snprintf(sql, sizeof sql, "DROP TABLE IF EXISTS fx_%s", g_table);
        exec_sql(db, sql);
        snprintf(sql, sizeof sql, "CREATE TABLE fx_%s (k VARCHAR(64) NOT NULL)", g_table);
        if (exec_sql(db, sql) != 0) {
            printf("torture: txh %s FAILED: cannot create the effects table\n", g_backend);
            return -1;
        }
    }
    return 0;
}

/* SIGTERM everything (producers first: their last transaction commits or
 * not), wait; what does not stop within 10 s is killed and counted. */
static int stop_all(child *kids, int nk) {
    int i, slow = 0;
    for (i = 0; i < nk; i++)
        if (kids[i].producer) kill(kids[i].pid, SIGTERM);
    for (i = 0; i < nk; i++)
        if (!kids[i].producer) kill(kids[i].pid, SIGTERM);
    for (i = 0; i < nk; i++) {
        int64_t until = tort_now_ms() + 10000;
        while (waitpid(kids[i].pid, NULL, WNOHANG) == 0) {
            if (tort_now_ms() > until) {
                if (getenv("TORTURE_STUCK_CMD")) { /* e.g. a debugger printing where it hangs */
                    char cmd[512];
                    snprintf(cmd, sizeof cmd, "%s %d", getenv("TORTURE_STUCK_CMD"), (int)kids[i].pid);
                    if (system(cmd) != 0) fprintf(stderr, "torture: %s failed\n", cmd);
                }
                kill(kids[i].pid, SIGKILL);
                waitpid(kids[i].pid, NULL, 0);
                fprintf(stderr, "torture: %s %d (pid %d) did not stop within 10 s of SIGTERM\n",
                        kids[i].producer ? "producer" : "dispatcher", kids[i].id, (int)kids[i].pid);
                slow++;
                break;
            }
            tort_sleep_ms(20);
        }
    }
    return slow;
}

typedef struct books {
    long long committed, stuck, orphans, integrity_bad;
    long lost, dupl, conc, rehandled, done_unhandled, distinct;
    long acked_lost; /* outbox: commits a producer saw succeed that the database no longer has */
    long long fx_dup, fx_missing, fx_undone; /* TORTURE_TXH: effects twice, Done without, without Done */
} books;

/* Drain, then compare what was committed with what was handled. */
static int keep_books(tort_db *db, books *b) {
    char err[600], sql[1024], t[160], c1[64], c2[64];
    long nh = 0, nacc = 0, nred = 0, j;
    hrec *h, *acc = NULL, *red = NULL;
    memset(b, 0, sizeof *b);
    drain(db, 60000);
    h = read_logs("handled-", 'H', &nh);
    for (j = 0; j < nh; j++) {
        if (j == 0 || strcmp(h[j].key, h[j - 1].key) != 0) b->distinct++;
        else if (h[j].start < h[j - 1].end) b->conc++; /* sorted by start: overlaps the previous */
    }
    b->dupl = nh - b->distinct;
    b->stuck = pending(db);
    if (g_inbox) {
        static char rows[1 << 22];
        char *p, *nl;
        acc = read_logs("accepted-", 'A', &nacc);
        red = read_logs("accepted-", 'R', &nred);
        for (j = 0; j < nacc; j++) {
            if (j > 0 && strcmp(acc[j].key, acc[j - 1].key) == 0) continue;
            b->committed++;
            if (!handled_key(h, nh, acc[j].key)) b->lost++;
        }
        for (j = 0; j < nred; j++) b->rehandled += handled_after(h, nh, red[j].key, red[j].start);
        /* Done rows that no handler ran for. */
        rows[0] = 0;
        snprintf(sql, sizeof sql, "SELECT %s FROM %s WHERE %s = 'Done'", col(c1, sizeof c1, "Payload"),
                 qname(t, sizeof t, g_table), col(c2, sizeof c2, "Status"));
        tort_db_query(db, sql, rows, sizeof rows, err, sizeof err);
        for (p = rows; (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
            *nl = 0;
            if (!handled_key(h, nh, p)) b->done_unhandled++;
        }
    } else {
        static char rows[1 << 22];
        char *p, *nl;
        rows[0] = 0;
        snprintf(sql, sizeof sql, "SELECT id FROM biz_%s", g_table);
        if (tort_db_query(db, sql, rows, sizeof rows, err, sizeof err) != 0) {
            printf("torture: outbox %s FAILED: %s\n", g_backend, err);
            free(h);
            return -1;
        }
        long nbiz = 0;
        hrec *biz = NULL;
        for (p = rows; (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
            *nl = 0;
            b->committed++;
            if (!handled_key(h, nh, p)) b->lost++;
        }
        /* Acknowledged commits missing from the database: none may be,
         * unless a failover to an asynchronous standby lost them. */
        biz = (hrec *)calloc((size_t)b->committed + 1, sizeof *biz);
        if (!biz) abort();
        for (p = rows; nbiz < b->committed; p += strlen(p) + 1)
            snprintf(biz[nbiz++].key, sizeof biz[0].key, "%s", p);
        if (nbiz) qsort(biz, (size_t)nbiz, sizeof *biz, cmp_hrec);
        acc = read_logs("accepted-", 'A', &nacc);
        for (j = 0; j < nacc; j++)
            if ((j == 0 || strcmp(acc[j].key, acc[j - 1].key) != 0) && !handled_key(biz, nbiz, acc[j].key))
                b->acked_lost++;
        free(biz);
        /* Orphans both ways, by SQL. */
        snprintf(sql, sizeof sql,
                 "SELECT (SELECT COUNT(*) FROM biz_%s b WHERE NOT EXISTS (SELECT 1 FROM %s o WHERE o.%s = b.id)) + "
                 "(SELECT COUNT(*) FROM %s o WHERE NOT EXISTS (SELECT 1 FROM biz_%s b WHERE b.id = o.%s))",
                 g_table, qname(t, sizeof t, g_table), col(c1, sizeof c1, "Payload"), t, g_table, c1);
        b->orphans = tort_db_scalar(db, sql);
        /* Done rows that no handler ran for. */
        rows[0] = 0;
        snprintf(sql, sizeof sql, "SELECT %s FROM %s WHERE %s = 2", c1, t, col(c2, sizeof c2, "Status"));
        tort_db_query(db, sql, rows, sizeof rows, err, sizeof err);
        for (p = rows; (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
            *nl = 0;
            if (!handled_key(h, nh, p)) b->done_unhandled++;
        }
    }
    if (g_txh) {
        const char *done = g_inbox ? "'Done'" : "2";
        snprintf(sql, sizeof sql, "SELECT COUNT(*) - COUNT(DISTINCT k) FROM fx_%s", g_table);
        b->fx_dup = tort_db_scalar(db, sql);
        snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM %s o WHERE o.%s = %s AND NOT EXISTS (SELECT 1 FROM fx_%s f "
                 "WHERE f.k = o.%s)", qname(t, sizeof t, g_table), col(c2, sizeof c2, "Status"), done, g_table,
                 col(c1, sizeof c1, "Payload"));
        b->fx_missing = tort_db_scalar(db, sql);
        snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM fx_%s f WHERE NOT EXISTS (SELECT 1 FROM %s o WHERE o.%s = f.k "
                 "AND o.%s = %s)", g_table, t, c1, c2, done);
        b->fx_undone = tort_db_scalar(db, sql);
    }
    if (is_sqlite()) {
        char ic[256] = "";
        tort_db_query(db, "PRAGMA integrity_check", ic, sizeof ic, err, sizeof err);
        b->integrity_bad = strcmp(ic, "ok\n") != 0;
        if (b->integrity_bad) printf("  integrity_check: %s\n", ic);
    }
    free(h);
    free(acc);
    free(red);
    return 0;
}

static int books_fail(const books *b, long long min_committed) {
    return b->lost || b->stuck || b->orphans || b->done_unhandled || b->rehandled || b->conc || b->fx_dup ||
           b->fx_missing || b->fx_undone ||
           b->integrity_bad || b->committed < min_committed || (b->acked_lost && !getenv("TORTURE_ASYNC"));
}
static void books_text(const books *b, char *out, size_t cap) {
    char fx[128] = "";
    if (g_txh)
        snprintf(fx, sizeof fx, " effects_twice=%lld done_without_effect=%lld effect_without_done=%lld", b->fx_dup,
                 b->fx_missing, b->fx_undone);
    snprintf(out, cap,
             "messages=%lld lost=%ld stuck=%lld orphans=%lld done_unhandled=%ld rehandled=%ld concurrent=%ld "
             "acked_lost=%ld duplicates=%.2f%%%s%s",
             b->committed, b->lost, b->stuck, b->orphans, b->done_unhandled, b->rehandled, b->conc, b->acked_lost,
             b->distinct ? 100.0 * (double)b->dupl / (double)b->distinct : 0.0, fx,
             is_sqlite() ? (b->integrity_bad ? " integrity=BAD" : " integrity=ok") : "");
}

static void set_pace(int seconds, long max_per_producer) {
    char pace[32];
    snprintf(pace, sizeof pace, "%ld", (long)seconds * 1000 / (max_per_producer > 0 ? max_per_producer : 1));
    setenv("TORTURE_PACE_MS", pace, 1);
}

static int role_run(void) {
    int producers = getenv("TORTURE_PRODUCERS") ? atoi(getenv("TORTURE_PRODUCERS")) : 3;
    int dispatchers = getenv("TORTURE_DISPATCHERS") ? atoi(getenv("TORTURE_DISPATCHERS")) : 4;
    int seconds = (getenv("TORTURE_SECONDS") ? atoi(getenv("TORTURE_SECONDS")) : 20) * tort_scale();
    int min_kills = getenv("TORTURE_KILLS") ? atoi(getenv("TORTURE_KILLS")) : 50;
    /* Producers are paced to spread their messages over the kill phase. */
    long max_per_producer = (getenv("TORTURE_MESSAGES") ? atol(getenv("TORTURE_MESSAGES")) : 1000) * tort_scale();
    child kids[64];
    int nk = 0, i, kills = 0, kills_p = 0, kills_d = 0, slow_stops, fail;
    unsigned int rnd = (unsigned int)getpid() ^ (unsigned int)tort_now_ms();
    int64_t t0 = tort_now_ms(), hard_end;
    tort_db db;
    books b;
    char figures[600];

    if (producers < 1 || producers > 16 || dispatchers < 1 || dispatchers > 32 || seconds < 1) {
        fprintf(stderr, "torture: bad sizes\n");
        return 2;
    }
    if (setup(&db) != 0) return 1;
    signal(SIGPIPE, SIG_IGN);
    set_pace(seconds, max_per_producer);
    for (i = 0; i < producers; i++, nk++) {
        kids[nk].producer = 1;
        kids[nk].id = i + 1;
        kids[nk].pid = spawn(1, i + 1, max_per_producer);
    }
    for (i = 0; i < dispatchers; i++, nk++) {
        kids[nk].producer = 0;
        kids[nk].id = 100 + i;
        kids[nk].pid = spawn(0, 100 + i, 0);
    }
    /* The kill phase: a random victim every 50..450 ms, until the time is up
     * and enough kills happened (bounded at three times the time). */
    hard_end = t0 + (int64_t)seconds * 3000;
    while ((tort_now_ms() - t0 < (int64_t)seconds * 1000 || kills < min_kills) && tort_now_ms() < hard_end) {
        int v;
        rnd = rnd * 1103515245u + 12345u;
        tort_sleep_ms(50 + (long)((rnd >> 16) % 400));
        rnd = rnd * 1103515245u + 12345u;
        v = (int)((rnd >> 16) % (unsigned int)nk);
        if (kill(kids[v].pid, SIGKILL) == 0) {
            waitpid(kids[v].pid, NULL, 0);
            kills++;
            if (kids[v].producer) kills_p++;
            else kills_d++;
        }
        kids[v].pid = spawn(kids[v].producer, kids[v].id, kids[v].producer ? max_per_producer : 0);
    }
    slow_stops = stop_all(kids, nk);
    if (keep_books(&db, &b) != 0) return 1;
    tort_db_close(&db);
    books_text(&b, figures, sizeof figures);
    if (slow_stops) printf("  %d processes did not stop within 10 s of SIGTERM\n", slow_stops);
    fail = books_fail(&b, 100) || slow_stops || kills < min_kills || kills_p == 0 || kills_d == 0;
    printf("torture: %s %s %s%s kills=%d (producers=%d dispatchers=%d) %s time=%.0fs%s\n",
           g_txh ? "txh" : "crash", g_inbox ? "inbox" : "outbox", g_backend,
           !is_sqlite() ? "" : strstr(g_conn, "SyncPragma=FULL") ? " synchronous=FULL" : " synchronous=NORMAL", kills, kills_p, kills_d, figures,
           (double)(tort_now_ms() - t0) / 1000.0, fail ? " FAILED" : "");
    if (b.committed < 100) printf("  too few messages were committed for the run to mean anything\n");
    return fail;
}

/* The first handling ("H") or acceptance ("A") logged at or after t_us; 0 if none. */
static int64_t first_after(const char *prefix, char kind, int64_t t_us) {
    long n = 0, j;
    int64_t best = 0;
    hrec *v = read_logs(prefix, kind, &n);
    for (j = 0; j < n; j++)
        if (v[j].start >= t_us && (best == 0 || v[j].start < best)) best = v[j].start;
    free(v);
    return best;
}
/* The first handling of a message enqueued at or after t_us: a handler
 * that was already running on a message claimed before the fault says
 * nothing about recovery. 0 if none. */
static int64_t first_fresh_handled(int64_t t_us) {
    long nh = 0, na = 0, j;
    int64_t best = 0;
    hrec *h = read_logs("handled-", 'H', &nh), *a = read_logs("accepted-", 'A', &na);
    for (j = 0; j < nh; j++) {
        long lo = 0, hi = na;
        if (h[j].start < t_us || (best && h[j].start >= best)) continue;
        while (lo < hi) { /* a is sorted by key, then time */
            long mid = (lo + hi) / 2;
            if (strcmp(a[mid].key, h[j].key) < 0) lo = mid + 1;
            else hi = mid;
        }
        if (lo < na && strcmp(a[lo].key, h[j].key) == 0 && a[lo].start >= t_us) best = h[j].start;
    }
    free(h);
    free(a);
    return best;
}

/* Log lines of the workers between two times that mention a timeout. */
static long timeouts_logged(int64_t from_us, int64_t to_us) {
    DIR *d = opendir(g_dir);
    struct dirent *e;
    long n = 0;
    if (!d) return 0;
    while ((e = readdir(d)) != NULL) {
        char path[1200], line[1024];
        FILE *f;
        if (strncmp(e->d_name, "log-", 4) != 0) continue;
        snprintf(path, sizeof path, "%s/%s", g_dir, e->d_name);
        if (!(f = fopen(path, "r"))) continue;
        while (fgets(line, sizeof line, f)) {
            long long t = atoll(line);
            char *c;
            for (c = line; *c; c++)
                if (*c >= 'A' && *c <= 'Z') *c = (char)(*c + 32);
            if (t >= from_us && t <= to_us && strstr(line, "timeout")) n++;
        }
        fclose(f);
    }
    closedir(d);
    return n;
}

/* Scenario 2: database faults while one producer and two dispatchers with
 * the library's default timings work; each fault's recovery time (server
 * accepting again -> first message handled, and -> first message enqueued)
 * is measured and bounded. */
static int role_faults(void) {
    const char *faults = getenv("TORTURE_FAULTS") ? getenv("TORTURE_FAULTS") : "restart terminate freeze";
    const char *script = getenv("TORTURE_FAULT_SCRIPT");
    int64_t bound_ms = getenv("TORTURE_RECOVERY_BOUND_MS") ? atoll(getenv("TORTURE_RECOVERY_BOUND_MS")) : 2000;
    int64_t window_ms = getenv("TORTURE_RECOVERY_WINDOW_MS") ? atoll(getenv("TORTURE_RECOVERY_WINDOW_MS")) : 12000;
    child kids[3];
    int nk = 3, i, nfaults = 0, fail = 0, slow;
    int64_t t0 = tort_now_ms(), worst = 0;
    tort_db db;
    books b;
    char figures[600], list[256], *tok, *save = NULL;
    if (!script) {
        fprintf(stderr, "torture: TORTURE_FAULT_SCRIPT is not set\n");
        return 2;
    }
    if (setup(&db) != 0) return 1;
    signal(SIGPIPE, SIG_IGN);
    setenv("TORTURE_DEFAULTS", "1", 1); /* dispatchers with the library's default timings */
    setenv("TORTURE_PACE_MS", "20", 1);
    for (i = 0; i < nk; i++) {
        kids[i].producer = i == 0;
        kids[i].id = i == 0 ? 1 : 100 + i;
        kids[i].pid = spawn(kids[i].producer, kids[i].id, 1000000);
    }
    tort_sleep_ms(getenv("TORTURE_PRE_MS") ? atol(getenv("TORTURE_PRE_MS")) : 3000); /* all at work */
    snprintf(list, sizeof list, "%s", faults);
    for (tok = strtok_r(list, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char cmd[1400], out[128] = "";
        FILE *p;
        int64_t t_fault = tort_wall_us(), t_up = 0, disp = 0, prod = 0, until;
        long tmo;
        int ok;
        nfaults++;
        snprintf(cmd, sizeof cmd, "%s %s %s", script, g_backend, tok);
        p = popen(cmd, "r");
        if (p) {
            while (fgets(out, sizeof out, p)) t_up = atoll(out);
            pclose(p);
        }
        if (t_up <= 0) {
            printf("torture: dbfault %s %s %s FAILED: the fault script failed (%s)\n", g_inbox ? "inbox" : "outbox",
                   g_backend, tok, cmd);
            fail = 1;
            continue;
        }
        until = tort_now_ms() + window_ms;
        while (tort_now_ms() < until && (!disp || !prod)) {
            if (!disp) disp = first_fresh_handled(t_up);
            if (!prod) prod = first_after("accepted-", 'A', t_up);
            tort_sleep_ms(50);
        }
        tmo = timeouts_logged(t_fault, t_up + 2000000);
        ok = disp && prod && (disp - t_up) / 1000 <= bound_ms && (prod - t_up) / 1000 <= bound_ms &&
             (strcmp(tok, "freeze") != 0 || tmo > 0);
        if (disp && (disp - t_up) / 1000 > worst) worst = (disp - t_up) / 1000;
        if (!disp || !prod) worst = window_ms;
        {
            char dtxt[32], ptxt[32];
            if (disp) snprintf(dtxt, sizeof dtxt, "%lldms", (long long)((disp - t_up) / 1000));
            else snprintf(dtxt, sizeof dtxt, ">%lldms", (long long)window_ms);
            if (prod) snprintf(ptxt, sizeof ptxt, "%lldms", (long long)((prod - t_up) / 1000));
            else snprintf(ptxt, sizeof ptxt, ">%lldms", (long long)window_ms);
            printf("torture: dbfault %s %s %s recovery_dispatch=%s recovery_enqueue=%s (bound %lldms)%s%s\n",
                   g_inbox ? "inbox" : "outbox", g_backend, tok, dtxt, ptxt, (long long)bound_ms,
                   strcmp(tok, "freeze") == 0 ? (tmo ? " timeout_logged=yes" : " timeout_logged=NO") : "",
                   ok ? "" : " FAILED");
        }
        fflush(stdout);
        if (!ok) fail = 1;
        if (!disp || !prod) {
            /* Not recovered by itself within the window: start the workers
             * again so that the next fault starts from a working state. */
            for (i = 0; i < nk; i++) {
                kill(kids[i].pid, SIGKILL);
                waitpid(kids[i].pid, NULL, 0);
                kids[i].pid = spawn(kids[i].producer, kids[i].id, 1000000);
            }
            tort_sleep_ms(2000);
        }
    }
    slow = stop_all(kids, nk);
    /* Our own connection went down with the server: a new one for the books. */
    tort_db_close(&db);
    {
        char err[600];
        if (tort_db_open(&db, g_conn, err, sizeof err) != 0) {
            printf("torture: dbfault %s %s FAILED: cannot connect after the faults: %s\n",
                   g_inbox ? "inbox" : "outbox", g_backend, err);
            return 1;
        }
    }
    if (keep_books(&db, &b) != 0) return 1;
    tort_db_close(&db);
    books_text(&b, figures, sizeof figures);
    fail = fail || books_fail(&b, 1) || slow;
    printf("torture: dbfault %s %s faults=%d worst_recovery=%lldms %s time=%.0fs%s\n", g_inbox ? "inbox" : "outbox",
           g_backend, nfaults, (long long)worst, figures, (double)(tort_now_ms() - t0) / 1000.0, fail ? " FAILED" : "");
    return fail;
}

/* ---- scenario 6: providers under faults ----------------------------------------------------- */

/* The databases of the provider run: "id|backend|connection string" in
 * TORTURE_DB_1..3; the dispatcher's discovery reads DIR/dbs (one "id|conn"
 * a line), which the orchestrator rewrites to remove and re-add one. */
typedef struct pdb {
    char id[32], backend[16], conn[1024];
} pdb;
static pdb g_pdbs[3];
static int g_npdbs;

static void load_pdbs(void) {
    int i;
    g_npdbs = 0;
    for (i = 1; i <= 3; i++) {
        char name[32];
        const char *v, *a, *b;
        snprintf(name, sizeof name, "TORTURE_DB_%d", i);
        v = getenv(name);
        if (!v || !(a = strchr(v, '|')) || !(b = strchr(a + 1, '|'))) continue;
        snprintf(g_pdbs[g_npdbs].id, sizeof g_pdbs[g_npdbs].id, "%.*s", (int)(a - v), v);
        snprintf(g_pdbs[g_npdbs].backend, sizeof g_pdbs[g_npdbs].backend, "%.*s", (int)(b - a - 1), a + 1);
        snprintf(g_pdbs[g_npdbs].conn, sizeof g_pdbs[g_npdbs].conn, "%s", b + 1);
        g_npdbs++;
    }
}
static void use_pdb(int i) { /* the per-database helpers read these */
    g_backend = g_pdbs[i].backend;
    g_conn = g_pdbs[i].conn;
}
static void write_dbs_file(int skip) {
    char path[1200], tmp[1300];
    FILE *f;
    int i;
    snprintf(path, sizeof path, "%s/dbs", g_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    f = fopen(tmp, "w");
    if (!f) return;
    for (i = 0; i < g_npdbs; i++)
        if (i != skip) fprintf(f, "%s|%s\n", g_pdbs[i].id, g_pdbs[i].conn);
    fclose(f);
    rename(tmp, path); /* atomic: discovery never reads half a file */
}

static char g_found[3][2][1200];
static int discover_file(void *out, int cap, int inbox) {
    char path[1200], line[1200];
    FILE *f;
    int n = 0;
    snprintf(path, sizeof path, "%s/dbs", g_dir);
    if (!(f = fopen(path, "r"))) return -1;
    while (n < 3 && n < cap && fgets(line, sizeof line, f)) {
        char *bar = strchr(line, '|'), *nl = strchr(line, '\n');
        if (!bar) continue;
        if (nl) *nl = 0;
        *bar = 0;
        snprintf(g_found[n][0], sizeof g_found[n][0], "%s", line);
        snprintf(g_found[n][1], sizeof g_found[n][1], "%s", bar + 1);
        if (inbox) {
            ((ibx_database *)out)[n].id = g_found[n][0];
            ((ibx_database *)out)[n].connection_string = g_found[n][1];
        } else {
            ((obx_database *)out)[n].id = g_found[n][0];
            ((obx_database *)out)[n].connection_string = g_found[n][1];
        }
        n++;
    }
    fclose(f);
    return n;
}
static int odiscover_file(obx_database *out, int cap, void *u) { (void)u; return discover_file(out, cap, 0); }
static int idiscover_file(ibx_database *out, int cap, void *u) { (void)u; return discover_file(out, cap, 1); }

/* One dispatcher over a provider of every database, default timings. */
static int role_pdispatcher(int id) {
    g_hlog = open_log("handled", id);
    g_logfd = open_log("log", id);
    while (!g_stop) {
        if (g_inbox) {
            ibx_provider_desc pd;
            ibx_provider *p = NULL;
            ibx_dispatcher_desc d;
            ibx_dispatcher *disp = NULL;
            memset(&pd, 0, sizeof pd);
            pd.store.table = g_table;
            pd.store.hooks.logger.log = iquiet_log;
            pd.discover = idiscover_file;
            pd.refresh_interval_ms = 300;
            memset(&d, 0, sizeof d);
            d.stop_flag = &g_stop;
            d.lease_seconds = 5;
            if (ibx_provider_create(&pd, &p) == IBX_OK) {
                d.provider = p;
                if (ibx_dispatcher_create(&d, &disp) == IBX_OK && ibx_dispatcher_on(disp, "t", ihandle, NULL) == IBX_OK)
                    ibx_dispatcher_run(disp);
            }
            ibx_dispatcher_destroy(disp);
            ibx_provider_destroy(p);
        } else {
            obx_provider_desc pd;
            obx_provider *p = NULL;
            obx_dispatcher_desc d;
            obx_dispatcher *disp = NULL;
            memset(&pd, 0, sizeof pd);
            pd.store.table = g_table;
            pd.store.hooks.logger.log = quiet_log;
            pd.discover = odiscover_file;
            pd.refresh_interval_ms = 300;
            memset(&d, 0, sizeof d);
            d.stop_flag = &g_stop;
            d.lease_seconds = 5;
            if (obx_provider_create(&pd, &p) == OBX_OK) {
                d.provider = p;
                if (obx_dispatcher_create(&d, &disp) == OBX_OK && obx_dispatcher_on(disp, "t", ohandle, NULL) == OBX_OK)
                    obx_dispatcher_run(disp);
            }
            obx_dispatcher_destroy(disp);
            obx_provider_destroy(p);
        }
        if (!g_stop) tort_sleep_ms(200);
    }
    return 0;
}

/* One producer writing to every database in turn; a database that fails is
 * skipped for this message (the others must keep taking work). */
static int role_pproducer(int id) {
    obx_store *os[3] = {NULL, NULL, NULL};
    ibx_store *is[3] = {NULL, NULL, NULL};
    int fd = open_log("accepted", id), i;
    long seq = 1;
    g_logfd = open_log("log", id);
    while (!g_stop) {
        for (i = 0; i < g_npdbs && !g_stop; i++) {
            char key[64], line[160];
            int ok;
            use_pdb(i);
            snprintf(key, sizeof key, "%.31s-%d-%ld", g_pdbs[i].id, (int)getpid(), seq);
            if (g_inbox) {
                ibx_new_message m;
                int enq;
                if (!is[i]) is[i] = open_ibx(0);
                if (!is[i]) continue;
                memset(&m, 0, sizeof m);
                m.topic = "t";
                m.source = "prov";
                m.message_id = key;
                m.payload = key;
                m.payload_len = IBX_NTS;
                ok = ibx_enqueue(is[i], &m, &enq) == IBX_OK;
            } else {
                obx_new_message m;
                if (!os[i]) os[i] = open_obx(0);
                if (!os[i]) continue;
                memset(&m, 0, sizeof m);
                m.topic = "t";
                m.payload = key;
                m.payload_len = OBX_NTS;
                ok = obx_enqueue(os[i], &m, NULL) == OBX_OK;
            }
            if (ok) {
                snprintf(line, sizeof line, "A %s %lld\n", key, (long long)tort_wall_us());
                log_line(fd, line);
            }
            tort_sleep_ms(10);
        }
        seq++;
    }
    for (i = 0; i < 3; i++) {
        obx_store_close(os[i]);
        ibx_store_close(is[i]);
    }
    return 0;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}
/* The longest time in [from, to] in which no message of a database other
 * than `skip` was handled (the window's ends count as edges), in ms. */
static int64_t others_stall_ms(int skip, int64_t from_us, int64_t to_us) {
    long n = 0, j, m = 0;
    hrec *v = read_logs("handled-", 'H', &n);
    int64_t *t = (int64_t *)malloc((size_t)(n + 2) * sizeof *t), worst = 0;
    size_t len = strlen(g_pdbs[skip].id);
    if (!t) abort();
    t[m++] = from_us;
    for (j = 0; j < n; j++)
        if (v[j].start >= from_us && v[j].start <= to_us &&
            !(strncmp(v[j].key, g_pdbs[skip].id, len) == 0 && v[j].key[len] == '-'))
            t[m++] = v[j].start;
    t[m++] = to_us;
    qsort(t, (size_t)m, sizeof *t, cmp_i64);
    for (j = 1; j < m; j++)
        if (t[j] - t[j - 1] > worst) worst = t[j] - t[j - 1];
    free(t);
    free(v);
    return worst / 1000;
}
/* The first handling of a key of database `which` at or after t. */
static int64_t first_of_db(int which, int64_t t_us) {
    long n = 0, j;
    int64_t best = 0;
    hrec *v = read_logs("handled-", 'H', &n);
    size_t len = strlen(g_pdbs[which].id);
    for (j = 0; j < n; j++)
        if (v[j].start >= t_us && strncmp(v[j].key, g_pdbs[which].id, len) == 0 && v[j].key[len] == '-' &&
            (best == 0 || v[j].start < best))
            best = v[j].start;
    free(v);
    return best;
}

static int role_providers(void) {
    const char *script = getenv("TORTURE_FAULT_SCRIPT");
    int64_t bound_ms = getenv("TORTURE_RECOVERY_BOUND_MS") ? atoll(getenv("TORTURE_RECOVERY_BOUND_MS")) : 2000;
    child kids[2];
    int nk = 2, i, fail = 0, slow, nfaults = 0;
    int64_t t0 = tort_now_ms();
    long long committed = 0, stuck = 0, lost = 0;
    long nh = 0, nacc = 0, j, distinct = 0;
    hrec *h, *acc;
    char flows[512] = "";
    load_pdbs();
    if (g_npdbs < 2 || !script) {
        fprintf(stderr, "torture: providers needs TORTURE_DB_1..3 and TORTURE_FAULT_SCRIPT\n");
        return 2;
    }
    for (i = 0; i < g_npdbs; i++) {
        tort_db db;
        use_pdb(i);
        if (setup(&db) != 0) return 1;
        tort_db_close(&db);
    }
    write_dbs_file(-1);
    signal(SIGPIPE, SIG_IGN);
    kids[0].producer = 1;
    kids[0].id = 1;
    kids[0].pid = spawn_role("pproducer", 1, 0);
    kids[1].producer = 0;
    kids[1].id = 100;
    kids[1].pid = spawn_role("pdispatcher", 100, 0);
    tort_sleep_ms(3000);
    /* Each database in turn has its fault; the others must keep flowing. */
    for (i = 0; i < g_npdbs; i++) {
        int64_t t_fault = tort_wall_us(), t_back = 0, back = 0, until, stall;
        char what[64];
        nfaults++;
        if (strcmp(g_pdbs[i].backend, "sqlite") == 0) {
            /* Removed by discovery for 3 s, then discovered again. */
            snprintf(what, sizeof what, "removed-by-discovery");
            write_dbs_file(i);
            tort_sleep_ms(3000);
            write_dbs_file(-1);
            t_back = tort_wall_us();
        } else {
            char cmd[1400], out[128] = "";
            FILE *p;
            snprintf(what, sizeof what, "server-restart");
            snprintf(cmd, sizeof cmd, "%s %s restart", script, g_pdbs[i].backend);
            if ((p = popen(cmd, "r")) != NULL) {
                while (fgets(out, sizeof out, p)) t_back = atoll(out);
                pclose(p);
            }
            if (t_back <= 0) {
                printf("  providers: the fault script failed: %s\n", cmd);
                fail = 1;
                continue;
            }
        }
        until = tort_now_ms() + 40000;
        while (!back && tort_now_ms() < until) {
            back = first_of_db(i, t_back);
            if (!back) tort_sleep_ms(100);
        }
        /* The others keep flowing: no stall longer than the bound from the
         * fault until 3 s after the database is back. */
        {
            int64_t end = t_back + 3000000;
            while (tort_wall_us() < end) tort_sleep_ms(100);
            stall = others_stall_ms(i, t_fault, end);
        }
        if (stall > bound_ms || !back) fail = 1;
        snprintf(flows + strlen(flows), sizeof flows - strlen(flows), " %s:%s(others_stall=%lldms back_after=%s%lldms)",
                 g_pdbs[i].id, what, (long long)stall, back ? "" : ">",
                 back ? (long long)((back - t_back) / 1000) : 40000LL);
    }
    slow = stop_all(kids, nk);
    for (i = 0; i < g_npdbs; i++) {
        tort_db db;
        char err[600];
        use_pdb(i);
        if (tort_db_open(&db, g_conn, err, sizeof err) != 0) {
            printf("torture: providers FAILED: cannot connect to %s: %s\n", g_pdbs[i].id, err);
            return 1;
        }
        drain(&db, 30000);
        stuck += pending(&db);
        tort_db_close(&db);
    }
    h = read_logs("handled-", 'H', &nh);
    acc = read_logs("accepted-", 'A', &nacc);
    for (j = 0; j < nh; j++)
        if (j == 0 || strcmp(h[j].key, h[j - 1].key) != 0) distinct++;
    for (j = 0; j < nacc; j++) {
        committed++;
        if (!handled_key(h, nh, acc[j].key)) lost++;
    }
    free(h);
    free(acc);
    fail = fail || slow || lost || stuck || committed < 100;
    printf("torture: providers %s", g_inbox ? "inbox" : "outbox");
    for (i = 0; i < g_npdbs; i++) printf("%s%s", i ? "+" : " ", g_pdbs[i].backend);
    printf(" messages=%lld faults=%d lost=%lld stuck=%lld duplicates=%.2f%%%s time=%.0fs%s\n", committed, nfaults,
           lost, stuck, distinct ? 100.0 * (double)(nh - distinct) / (double)distinct : 0.0, flows,
           (double)(tort_now_ms() - t0) / 1000.0, fail ? " FAILED" : "");
    return fail;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: %s run obx|ibx sqlite|postgresql|mariadb CONN TABLE DIR\n", argv[0]);
        return 2;
    }
    g_self = argv[0];
    g_hdr = argv[2];
    g_inbox = strcmp(g_hdr, "ibx") == 0;
    g_txh = getenv("TORTURE_TXH") != NULL;
    g_backend = argv[3];
    g_conn = argv[4];
    g_table = argv[5];
    g_dir = argv[6];
    {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_term;
        sigaction(SIGTERM, &sa, NULL);
    }
    g_pace_ms = getenv("TORTURE_PACE_MS") ? atol(getenv("TORTURE_PACE_MS")) : 0;
    {
        /* The orchestrator keeps SIGTERM blocked, so a child it forks inherits
         * the mask and a SIGTERM sent before the child's exec stays pending
         * (instead of landing in the orchestrator's handler copy and being
         * forgotten by exec); the child unblocks it once its handler is in. */
        sigset_t term;
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        sigprocmask(strcmp(argv[1], "run") == 0 || strcmp(argv[1], "faults") == 0 ||
                            strcmp(argv[1], "providers") == 0 ? SIG_BLOCK : SIG_UNBLOCK,
                    &term, NULL);
    }
    if (strcmp(argv[1], "run") == 0) return role_run();
    if (strcmp(argv[1], "faults") == 0) return role_faults();
    if (strcmp(argv[1], "providers") == 0) return role_providers();
    if (argc < 9) return 2;
    if (strcmp(argv[1], "dispatcher") == 0) return role_dispatcher(atoi(argv[7]));
    if (strcmp(argv[1], "pdispatcher") == 0) return role_pdispatcher(atoi(argv[7]));
    if (strcmp(argv[1], "pproducer") == 0) {
        load_pdbs();
        return role_pproducer(atoi(argv[7]));
    }
    if (strcmp(argv[1], "producer") == 0)
        return g_inbox ? role_producer_ibx(atoi(argv[7]), atol(argv[8])) : role_producer_obx(atoi(argv[7]), atol(argv[8]));
    return 2;
}

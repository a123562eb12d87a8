/* Load drivers of make scale (tests/scale/run.sh), outbox side.
 *
 *   scale rate 'CONN[|CONN...]' TABLE MESSAGES PRODUCERS DISPATCHERS
 *     Producer processes enqueue MESSAGES messages in all (payload: a
 *     sequence number), dispatcher processes handle them; worker i connects
 *     with CONN[i % count] (Galera: a node each). SCALE_FAULT_CMD runs when
 *     a third of the messages are handled and SCALE_HEAL_CMD when two
 *     thirds are, or 5 s later (a node killed, then rejoining). Prints one line:
 *     "rate: messages= seconds= per_s= lost= duplicates= concurrent=
 *     redone= failed_rounds=": lost = enqueued, never handled; concurrent =
 *     a handler started for a message another handler was still running;
 *     redone = units the library rolled back and redid (deadlock,
 *     certification failure); failed_rounds = dispatcher rounds that failed.
 *
 *   scale tenants DIR SECONDS DISPATCHERS
 *     DIR/tenants holds "id|connection string" lines; discovery reads
 *     DIR/dbs, which this program rewrites: the last 5 tenants are left out
 *     for the middle third of the run (removed, then added again). Two
 *     producer processes write to random tenants of the current set; the
 *     dispatcher processes use a provider over all (round-robin). Prints
 *     "tenants: databases= messages= lost= duplicates= max_lag_ms=
 *     slowest_tenant= connections_per_process=" (lag: enqueue to handler, of
 *     tenants never removed; connections: the most sockets and database
 *     files one dispatcher process held open).
 *
 * The exit status is nonzero when anything was lost or handled twice at once. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#define OBX_IMPLEMENTATION
#include "../../obx.h"
#include "../torture/tort.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_MSG 200000
#define MAX_TENANTS 64

typedef struct shared {
    int handled[MAX_MSG];
    int inflight[MAX_MSG];
    long long enqueued, concurrent, redone, failed_rounds;
    long long lag_ms[MAX_TENANTS]; /* the largest per tenant */
    char first_id[MAX_MSG][37];    /* the message id of the first handling, to tell a
                                      claim handed out twice from a message enqueued twice */
    long long same_id, other_id;   /* duplicates of each kind */
} shared;

static shared *g_sh;
static volatile sig_atomic_t g_stop;
static char g_conns[8][1024];
static int g_nconn;
static const char *g_table = "Outbox";

static void on_term(int sig) {
    (void)sig;
    g_stop = 1;
}

static void count_log(obx_log_level level, const char *id, const char *msg, void *user) {
    (void)id;
    (void)user;
    if (level == OBX_LOG_WARN && strstr(msg, "transient failure")) __sync_fetch_and_add(&g_sh->redone, 1);
    if (level >= OBX_LOG_ERROR && strstr(msg, "round failed")) __sync_fetch_and_add(&g_sh->failed_rounds, 1);
    if (getenv("SCALE_VERBOSE") && level >= OBX_LOG_WARN) fprintf(stderr, "  [%d] %s\n", (int)getpid(), msg);
}

/* Payload "seq tenant t_us". */
static obx_outcome handle(const obx_message *m, char *e, size_t cap, void *u) {
    long seq = 0, tenant = -1;
    long long t = 0;
    (void)e;
    (void)cap;
    (void)u;
    if (sscanf((const char *)m->payload, "%ld %ld %lld", &seq, &tenant, &t) < 1 || seq < 0 || seq >= MAX_MSG)
        return OBX_DONE;
    if (__sync_fetch_and_add(&g_sh->inflight[seq], 1) > 0) __sync_fetch_and_add(&g_sh->concurrent, 1);
    if (__sync_fetch_and_add(&g_sh->handled[seq], 1) == 0) {
        memcpy(g_sh->first_id[seq], m->id, 37);
    } else {
        int same = strcmp(g_sh->first_id[seq], m->id) == 0;
        __sync_fetch_and_add(same ? &g_sh->same_id : &g_sh->other_id, 1);
        if (getenv("SCALE_VERBOSE"))
            fprintf(stderr, "  duplicate seq %ld id %s (%s) retries %d at %lld\n", seq, m->id,
                    same ? "the same message again" : "another message", m->retry_count, (long long)tort_wall_us());
    }
    if (tenant >= 0 && tenant < MAX_TENANTS && t > 0) {
        long long lag = (tort_wall_us() - t) / 1000;
        long long old = g_sh->lag_ms[tenant];
        while (lag > old && !__sync_bool_compare_and_swap(&g_sh->lag_ms[tenant], old, lag)) old = g_sh->lag_ms[tenant];
    }
    __sync_fetch_and_sub(&g_sh->inflight[seq], 1);
    return OBX_DONE;
}

static obx_store *open_store(const char *conn, int deploy) {
    obx_store_desc d;
    obx_store *s = NULL;
    memset(&d, 0, sizeof d);
    d.connection_string = conn;
    d.table = g_table;
    d.deploy_schema = deploy;
    d.hooks.logger.log = count_log;
    if (obx_store_open(&d, &s) != OBX_OK) {
        if (deploy) fprintf(stderr, "scale: open failed: %s\n", s ? obx_store_last_error(s)->message : "no memory");
        obx_store_close(s);
        return NULL;
    }
    return s;
}

static void dispatcher_desc(obx_dispatcher_desc *d) {
    memset(d, 0, sizeof *d);
    d->batch_size = 20;
    d->lease_seconds = 10;
    d->poll_interval_ms = 20;
    d->idle_max_ms = 200;
    d->error_delay_ms = 500;
    d->reap_interval_ms = 2000;
    d->stop_flag = &g_stop;
}

/* ---- rate -------------------------------------------------------------------------- */

static void rate_dispatcher(const char *conn) {
    while (!g_stop) {
        obx_store *s = open_store(conn, 0);
        obx_dispatcher_desc d;
        obx_dispatcher *disp = NULL;
        if (!s) {
            tort_sleep_ms(200);
            continue;
        }
        dispatcher_desc(&d);
        d.store = s;
        if (obx_dispatcher_create(&d, &disp) == OBX_OK && obx_dispatcher_on(disp, "t", handle, NULL) == OBX_OK)
            obx_dispatcher_run(disp);
        obx_dispatcher_destroy(disp);
        obx_store_close(s);
    }
}

/* Enqueue seq = first, first + step, ... below n; every one until it is in. */
static void rate_producer(const char *conn, long first, long step, long n) {
    obx_store *s = NULL;
    long seq;
    for (seq = first; seq < n && !g_stop;) {
        char payload[64];
        obx_new_message m;
        if (!s && !(s = open_store(conn, 0))) {
            tort_sleep_ms(200);
            continue;
        }
        snprintf(payload, sizeof payload, "%ld -1 0", seq);
        memset(&m, 0, sizeof m);
        m.topic = "t";
        m.payload = payload;
        m.payload_len = OBX_NTS;
        if (obx_enqueue(s, &m, NULL) == OBX_OK) {
            __sync_fetch_and_add(&g_sh->enqueued, 1);
            seq += step;
        } else {
            tort_sleep_ms(50); /* a lost commit may have gone in: a duplicate, counted */
        }
    }
    obx_store_close(s);
}

static long distinct_handled(long n) {
    long i, c = 0;
    for (i = 0; i < n; i++) c += g_sh->handled[i] > 0;
    return c;
}

static void run_cmd(const char *name) {
    const char *cmd = getenv(name);
    if (cmd && *cmd && system(cmd) != 0) fprintf(stderr, "scale: %s failed: %s\n", name, cmd);
}

static int stop_children(pid_t *kids, int n) {
    int i, slow = 0;
    for (i = 0; i < n; i++) kill(kids[i], SIGTERM);
    for (i = 0; i < n; i++) {
        int64_t until = tort_now_ms() + 15000;
        while (waitpid(kids[i], NULL, WNOHANG) == 0) {
            if (tort_now_ms() > until) {
                kill(kids[i], SIGKILL);
                waitpid(kids[i], NULL, 0);
                slow++;
                break;
            }
            tort_sleep_ms(20);
        }
    }
    return slow;
}

static int mode_rate(long n, int producers, int dispatchers) {
    pid_t kids[64];
    int nk = 0, i, faulted = 0, healed = 0;
    long lost = 0, dups = 0, done;
    int64_t t0, t_end, bound, t_fault = 0;
    obx_store *s = open_store(g_conns[0], 1);
    if (!s) return 2;
    {
        tort_db db;
        char err[600], sql[256];
        if (tort_db_open(&db, g_conns[0], err, sizeof err) == 0) {
            snprintf(sql, sizeof sql, strstr(g_conns[0], "MariaDB") ? "DELETE FROM `%s`" : "DELETE FROM \"dbo\".\"%s\"",
                     g_table);
            tort_db_query(&db, sql, NULL, 0, err, sizeof err);
            tort_db_close(&db);
        }
    }
    obx_store_close(s);
    t0 = tort_now_ms();
    for (i = 0; i < dispatchers + producers && nk < 64; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            const char *conn = g_conns[i % g_nconn];
            if (i < dispatchers) rate_dispatcher(conn);
            else rate_producer(conn, i - dispatchers, producers, n);
            _exit(0);
        }
        kids[nk++] = pid;
    }
    bound = t0 + 60000 + n * 20; /* everything handled by then, or it counts as lost */
    while ((done = distinct_handled(n)) < n && tort_now_ms() < bound) {
        if (!faulted && done >= n / 3 && getenv("SCALE_FAULT_CMD")) {
            faulted = 1;
            run_cmd("SCALE_FAULT_CMD");
            t_fault = tort_now_ms();
        }
        /* Producers on the faulted node wait for it: heal after 5 s at most. */
        if (faulted && !healed && (done >= 2 * n / 3 || tort_now_ms() - t_fault > 5000)) {
            healed = 1;
            run_cmd("SCALE_HEAL_CMD");
        }
        tort_sleep_ms(20);
    }
    if (faulted && !healed) run_cmd("SCALE_HEAL_CMD");
    t_end = tort_now_ms();
    stop_children(kids, nk);
    for (i = 0; i < n; i++) {
        if (g_sh->handled[i] == 0) lost++;
        else dups += g_sh->handled[i] - 1;
    }
    printf("rate: messages=%ld seconds=%.1f per_s=%.0f lost=%ld duplicates=%ld (redelivered %lld, enqueued twice "
           "%lld) concurrent=%lld redone=%lld failed_rounds=%lld%s\n",
           n, (double)(t_end - t0) / 1000.0, (double)n * 1000.0 / (double)(t_end - t0 > 0 ? t_end - t0 : 1), lost,
           dups, g_sh->same_id, g_sh->other_id, g_sh->concurrent, g_sh->redone, g_sh->failed_rounds, lost || g_sh->concurrent ? " FAILED" : "");
    return lost || g_sh->concurrent ? 1 : 0;
}

/* ---- tenants ------------------------------------------------------------------------ */

static char g_dir[900];
static char g_tid[MAX_TENANTS][32], g_tconn[MAX_TENANTS][1024];
static int g_ntenants;

static int load_tenants(void) {
    char path[1000], line[1100];
    FILE *f;
    snprintf(path, sizeof path, "%s/tenants", g_dir);
    if (!(f = fopen(path, "r"))) return -1;
    g_ntenants = 0;
    while (g_ntenants < MAX_TENANTS && fgets(line, sizeof line, f)) {
        char *bar = strchr(line, '|'), *nl = strchr(line, '\n');
        if (!bar) continue;
        if (nl) *nl = 0;
        *bar = 0;
        snprintf(g_tid[g_ntenants], sizeof g_tid[0], "%.31s", line);
        snprintf(g_tconn[g_ntenants], sizeof g_tconn[0], "%s", bar + 1);
        g_ntenants++;
    }
    fclose(f);
    return g_ntenants;
}

static void write_dbs(int leave_out) { /* the last `leave_out` tenants are not discovered */
    char path[1000], tmp[1100];
    FILE *f;
    int i;
    snprintf(path, sizeof path, "%s/dbs", g_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "w"))) return;
    for (i = 0; i < g_ntenants - leave_out; i++) fprintf(f, "%d\n", i);
    fclose(f);
    rename(tmp, path); /* atomic: discovery never reads half a file */
}

static int discover(obx_database *out, int cap, void *u) {
    char path[1000], line[64];
    FILE *f;
    int n = 0;
    (void)u;
    snprintf(path, sizeof path, "%s/dbs", g_dir);
    if (!(f = fopen(path, "r"))) return -1;
    while (n < cap && fgets(line, sizeof line, f)) {
        int i = atoi(line);
        if (i < 0 || i >= g_ntenants) continue;
        out[n].id = g_tid[i];
        out[n].connection_string = g_tconn[i];
        n++;
    }
    fclose(f);
    return n;
}

static void tenants_dispatcher(void) {
    while (!g_stop) {
        obx_provider_desc pd;
        obx_provider *p = NULL;
        obx_dispatcher_desc d;
        obx_dispatcher *disp = NULL;
        memset(&pd, 0, sizeof pd);
        pd.store.table = g_table;
        pd.store.hooks.logger.log = count_log;
        pd.discover = discover;
        pd.refresh_interval_ms = 500;
        if (obx_provider_create(&pd, &p) != OBX_OK && !p) {
            tort_sleep_ms(200);
            continue;
        }
        dispatcher_desc(&d);
        d.provider = p;
        if (obx_dispatcher_create(&d, &disp) == OBX_OK && obx_dispatcher_on(disp, "t", handle, NULL) == OBX_OK)
            obx_dispatcher_run(disp);
        obx_dispatcher_destroy(disp);
        obx_provider_destroy(p);
    }
}

/* Writes to a random tenant of the current set until stopped; seq = first + k * step. */
static void tenants_producer(long first, long step) {
    obx_store *stores[MAX_TENANTS];
    unsigned int rnd = (unsigned int)getpid();
    long seq = first;
    memset(stores, 0, sizeof stores);
    while (!g_stop && seq < MAX_MSG) {
        obx_database cur[MAX_TENANTS];
        int n = discover(cur, MAX_TENANTS, NULL), t, i;
        char payload[96];
        obx_new_message m;
        if (n <= 0) {
            tort_sleep_ms(50);
            continue;
        }
        rnd = rnd * 1103515245u + 12345u;
        for (t = 0, i = (int)((rnd >> 16) % (unsigned int)n); t < g_ntenants; t++)
            if (strcmp(g_tid[t], cur[i].id) == 0) break;
        if (!stores[t] && !(stores[t] = open_store(g_tconn[t], 0))) {
            tort_sleep_ms(50);
            continue;
        }
        snprintf(payload, sizeof payload, "%ld %d %lld", seq, t, (long long)tort_wall_us());
        memset(&m, 0, sizeof m);
        m.topic = "t";
        m.payload = payload;
        m.payload_len = OBX_NTS;
        if (obx_enqueue(stores[t], &m, NULL) == OBX_OK) {
            __sync_fetch_and_add(&g_sh->enqueued, 1);
            seq += step;
        } else {
            tort_sleep_ms(50);
        }
        tort_sleep_ms(5);
    }
    for (seq = 0; seq < MAX_TENANTS; seq++) obx_store_close(stores[seq]);
}

/* Sockets and tenant database files a process holds open. */
static int open_connections(pid_t pid) {
    char path[64], target[1200], link[1300];
    DIR *d;
    struct dirent *e;
    int n = 0;
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    if (!(d = opendir(path))) return 0;
    while ((e = readdir(d)) != NULL) {
        ssize_t len;
        snprintf(link, sizeof link, "%s/%s", path, e->d_name);
        len = readlink(link, target, sizeof target - 1);
        if (len <= 0) continue;
        target[len] = 0;
        if (strncmp(target, "socket:", 7) == 0 || (strstr(target, ".sqlite") && !strstr(target, "-wal") && !strstr(target, "-shm")))
            n++;
    }
    closedir(d);
    return n;
}

static int mode_tenants(int seconds, int dispatchers) {
    pid_t kids[40];
    int nk = 0, i, removed = 0, readded = 0, maxconn = 0, slowest = -1, bad;
    long lost = 0, dups = 0, n;
    long long maxlag = 0, lag_bound;
    int64_t t0 = tort_now_ms(), bound;
    if (load_tenants() < 10) {
        fprintf(stderr, "scale: %s/tenants: fewer than 10 tenants\n", g_dir);
        return 2;
    }
    for (i = 0; i < g_ntenants; i++) { /* deploy and empty every tenant */
        obx_store *s = open_store(g_tconn[i], 1);
        tort_db db;
        char err[600];
        if (!s) return 2;
        obx_store_close(s);
        if (tort_db_open(&db, g_tconn[i], err, sizeof err) == 0) {
            tort_db_query(&db, strstr(g_tconn[i], "SQLite") ? "DELETE FROM \"Outbox\"" : "DELETE FROM \"dbo\".\"Outbox\"",
                          NULL, 0, err, sizeof err);
            if (!strstr(g_tconn[i], "SQLite")) SQLEndTran(SQL_HANDLE_DBC, db.dbc, SQL_COMMIT);
            tort_db_close(&db);
        }
    }
    write_dbs(0);
    t0 = tort_now_ms();
    for (i = 0; i < dispatchers + 2; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            if (i < dispatchers) tenants_dispatcher();
            else tenants_producer(i - dispatchers, 2);
            _exit(0);
        }
        kids[nk++] = pid;
    }
    while (tort_now_ms() - t0 < (int64_t)seconds * 1000) {
        int64_t el = tort_now_ms() - t0;
        if (!removed && el > seconds * 1000 / 3) {
            removed = 1;
            write_dbs(5);
        }
        if (removed && !readded && el > seconds * 2000 / 3) {
            readded = 1;
            write_dbs(0);
        }
        for (i = 0; i < dispatchers; i++) {
            int c = open_connections(kids[i]);
            if (c > maxconn) maxconn = c;
        }
        tort_sleep_ms(200);
    }
    /* Producers stop; dispatchers drain what is left. */
    for (i = dispatchers; i < nk; i++) kill(kids[i], SIGTERM);
    for (i = dispatchers; i < nk; i++) waitpid(kids[i], NULL, 0);
    n = MAX_MSG;
    bound = tort_now_ms() + 60000;
    while (tort_now_ms() < bound) {
        long have = 0, want = g_sh->enqueued;
        for (i = 0; i < MAX_MSG; i++) have += g_sh->handled[i] > 0;
        if (have >= want) break;
        tort_sleep_ms(100);
    }
    stop_children(kids, dispatchers);
    /* What producers enqueued is seq 0..: the producers interleave, so the
     * set of sequence numbers used is known from each producer's count. */
    {
        long enq = g_sh->enqueued, seen = 0;
        for (i = 0; i < MAX_MSG && seen < enq; i++) {
            if (g_sh->handled[i] > 0) {
                seen++;
                dups += g_sh->handled[i] - 1;
            }
        }
        lost = enq - seen;
    }
    for (i = 0; i < g_ntenants - 5; i++)
        if (g_sh->lag_ms[i] > maxlag) {
            maxlag = g_sh->lag_ms[i];
            slowest = i;
        }
    (void)n;
    /* Bounds: no tenant waits for long (round-robin starves none), and a
     * process holds about one connection per database, not more. */
    lag_bound = getenv("SCALE_LAG_BOUND_MS") ? atoll(getenv("SCALE_LAG_BOUND_MS")) : 10000;
    bad = lost != 0 || g_sh->concurrent != 0 || maxlag > lag_bound || maxconn > 2 * g_ntenants + 8;
    printf("tenants: databases=%d dispatchers=%d messages=%lld lost=%ld duplicates=%ld concurrent=%lld max_lag_ms=%lld "
           "(bound %lld) slowest_tenant=%s connections_per_process=%d time=%.0fs%s\n",
           g_ntenants, dispatchers, g_sh->enqueued, lost, dups, g_sh->concurrent, maxlag, lag_bound,
           slowest >= 0 ? g_tid[slowest] : "-", maxconn, (double)(tort_now_ms() - t0) / 1000.0, bad ? " FAILED" : "");
    return bad;
}

int main(int argc, char **argv) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    g_sh = (shared *)mmap(NULL, sizeof *g_sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_sh == MAP_FAILED) return 2;
    memset(g_sh, 0, sizeof *g_sh);
    if (argc == 7 && strcmp(argv[1], "rate") == 0) {
        char list[8192], *tok, *save = NULL;
        long n = atol(argv[4]);
        snprintf(list, sizeof list, "%s", argv[2]);
        for (tok = strtok_r(list, "|", &save); tok && g_nconn < 8; tok = strtok_r(NULL, "|", &save))
            snprintf(g_conns[g_nconn++], sizeof g_conns[0], "%s", tok);
        g_table = argv[3];
        if (g_nconn < 1 || n < 1 || n > MAX_MSG) return 2;
        return mode_rate(n, atoi(argv[5]), atoi(argv[6]));
    }
    if (argc == 5 && strcmp(argv[1], "tenants") == 0) {
        snprintf(g_dir, sizeof g_dir, "%s", argv[2]);
        return mode_tenants(atoi(argv[3]), atoi(argv[4]));
    }
    fprintf(stderr, "usage: scale rate 'CONN[|CONN..]' TABLE MESSAGES PRODUCERS DISPATCHERS\n"
                    "       scale tenants DIR SECONDS DISPATCHERS\n");
    return 2;
}

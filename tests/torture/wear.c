/* wear.c: flash wear and table growth on a gateway (SQLite). Steady
 * traffic through one outbox file: enqueue a batch, dispatch it (claim,
 * handler, ack), and every `cleanup_every` messages delete the done ones
 * (obx_cleanup). Prints, at 20 points and at the end, the file sizes
 * (database and WAL), the database's pages (in use, free) and the bytes
 * written so far per message, from /proc/self/io: write_bytes (what the
 * process sent to the block device) and wchar (what it passed to write()).
 *
 * Half way, an optional outage: `backlog` messages enqueued and not
 * dispatched (an uplink down), then drained and cleaned up like the rest,
 * to show what a backlog leaves behind in the file.
 *
 * Usage: wear FILE [messages [batch [backlog [vacuum [sync]]]]]
 *   messages  total through the steady loop (default 30000: seconds)
 *   batch     messages per enqueue and per claim (default 100; 1: a
 *             producer that commits each message alone)
 *   backlog   messages of the outage (default 0)
 *   vacuum    "none" (default: SQLite's own free-page reuse) or
 *             "incremental" (auto_vacuum=INCREMENTAL set on the new file,
 *             PRAGMA incremental_vacuum after each cleanup)
 *   sync      the driver's SyncPragma (default NORMAL; FULL: a sync per commit)
 * Exits nonzero when a message is lost or handled twice, or when the
 * database's largest size in steady state (after the second cleanup,
 * before the outage) is over 1.5 times its largest before the second
 * cleanup: a file that is not bounded. */
#define OBX_IMPLEMENTATION
#include "../../obx.h"
#include "tort.h"

#include <sys/stat.h>
#include <unistd.h>

#define CLEANUP_EVERY 10000
#define PAYLOAD_BYTES 200

static long long g_handled;
static int g_batch = 100;

static obx_outcome handle(const obx_message *m, char *e, size_t c, void *u) {
    (void)m; (void)e; (void)c; (void)u;
    g_handled++;
    return OBX_DONE;
}

static long long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

/* A counter of /proc/self/io ("write_bytes", "wchar"); -1 where unreadable. */
static long long proc_io(const char *name) {
    char line[128];
    long long v = -1;
    size_t n = strlen(name);
    FILE *f = fopen("/proc/self/io", "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, name, n) == 0 && line[n] == ':') v = atoll(line + n + 1);
    fclose(f);
    return v;
}

typedef struct wear {
    const char *file;
    char wal[1100];
    tort_db raw;                 /* the test's own view: pragmas */
    obx_store *store;
    obx_dispatcher *d;
    long long enqueued, io0, wchar0;
    int incremental;
} wear;

static void sample(wear *w, const char *phase) {
    long long pages = tort_db_scalar(&w->raw, "PRAGMA page_count");
    long long free_pages = tort_db_scalar(&w->raw, "PRAGMA freelist_count");
    long long rows = tort_db_scalar(&w->raw, "SELECT COUNT(*) FROM \"Outbox\"");
    long long io = proc_io("write_bytes"), wc = proc_io("wchar");
    long long n = w->enqueued > 0 ? w->enqueued : 1, db = file_size(w->file), wal = file_size(w->wal);
    printf("wear: %-8s %9lld msgs  db %8.2f MB  wal %6.2f MB  pages %7lld (free %7lld)  rows %7lld  "
           "written %7.0f B/msg (write() %7.0f B/msg)\n",
           phase, w->enqueued, (double)db / 1e6, (double)wal / 1e6, pages,
           free_pages, rows, io < 0 ? -1.0 : (double)(io - w->io0) / (double)n,
           (double)(wc - w->wchar0) / (double)n);
    fflush(stdout);
}

static int enqueue(wear *w, int count) {
    static obx_new_message msgs[OBX_BATCH_MAX];
    static char payload[PAYLOAD_BYTES + 1];
    int i;
    if (!payload[0]) {
        memset(payload, 'x', PAYLOAD_BYTES);
        memcpy(payload, "{\"reading\":\"", 12);
        payload[PAYLOAD_BYTES - 2] = '"';
        payload[PAYLOAD_BYTES - 1] = '}';
    }
    for (i = 0; i < count; i++) {
        msgs[i].topic = "telemetry";
        msgs[i].payload = payload;
        msgs[i].payload_len = PAYLOAD_BYTES;
    }
    if (obx_enqueue_batch(w->store, NULL, msgs, count, NULL) != OBX_OK) {
        printf("wear: enqueue FAILED: %s\n", obx_store_last_error(w->store)->message);
        return -1;
    }
    w->enqueued += count;
    return 0;
}

/* Dispatch until nothing is ready. */
static int drain(wear *w) {
    obx_result r;
    while ((r = obx_dispatcher_run_once(w->d, NULL)) == OBX_OK) {
    }
    if (r != OBX_EMPTY) {
        printf("wear: dispatch FAILED: %s\n", obx_dispatcher_last_error(w->d)->message);
        return -1;
    }
    return 0;
}

static int cleanup(wear *w) {
    char err[600];
    if (obx_cleanup(w->store, 1, 1000, NULL) != OBX_OK) {
        printf("wear: cleanup FAILED: %s\n", obx_store_last_error(w->store)->message);
        return -1;
    }
    if (w->incremental && tort_db_query(&w->raw, "PRAGMA incremental_vacuum", NULL, 0, err, sizeof err) != 0) {
        printf("wear: incremental_vacuum FAILED: %s\n", err);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    char conn[1200], err[600], path[1100];
    const char *sync;
    obx_store_desc desc;
    obx_dispatcher_desc dd;
    wear w;
    long long total, backlog, steady = 0, steady_size = 0, max_steady = 0, since_cleanup = 0;
    int next_sample = 1, failed = 0, outage_done = 0, cleanups = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: wear FILE [messages [batch [backlog [none|incremental [NORMAL|FULL]]]]]\n");
        return 2;
    }
    memset(&w, 0, sizeof w);
    w.file = argv[1];
    total = argc > 2 ? atoll(argv[2]) : 30000;
    g_batch = argc > 3 ? atoi(argv[3]) : 100;
    backlog = argc > 4 ? atoll(argv[4]) : 0;
    w.incremental = argc > 5 && strcmp(argv[5], "incremental") == 0;
    sync = argc > 6 ? argv[6] : "NORMAL";
    if (g_batch < 1 || g_batch > OBX_BATCH_MAX || total < 1 || backlog < 0) {
        fprintf(stderr, "wear: batch 1..%d, messages >= 1, backlog >= 0\n", OBX_BATCH_MAX);
        return 2;
    }
    snprintf(w.wal, sizeof w.wal, "%s-wal", w.file);
    unlink(w.file);
    unlink(w.wal);
    snprintf(path, sizeof path, "%s-shm", w.file);
    unlink(path);
    snprintf(conn, sizeof conn, "Driver={SQLite3};Database=%s;JournalMode=WAL;SyncPragma=%.8s;Timeout=5000;",
             w.file, sync);
    if (tort_db_open(&w.raw, conn, err, sizeof err) != 0) {
        printf("wear: connect FAILED: %s\n", err);
        return 1;
    }
    /* auto_vacuum takes effect on an empty file only, and the driver's
     * JournalMode=WAL has already written the file's first page: VACUUM
     * rebuilds it with the new setting. */
    if (w.incremental && (tort_db_query(&w.raw, "PRAGMA auto_vacuum = INCREMENTAL", NULL, 0, err, sizeof err) != 0 ||
                          tort_db_query(&w.raw, "VACUUM", NULL, 0, err, sizeof err) != 0 ||
                          tort_db_scalar(&w.raw, "PRAGMA auto_vacuum") != 2)) {
        printf("wear: auto_vacuum FAILED: %s\n", err);
        return 1;
    }
    memset(&desc, 0, sizeof desc);
    desc.connection_string = conn;
    desc.deploy_schema = 1;
    desc.hooks.logger.min_level = OBX_LOG_WARN;
    if (obx_store_open(&desc, &w.store) != OBX_OK) {
        printf("wear: open FAILED: %s\n", obx_store_last_error(w.store)->message);
        return 1;
    }
    memset(&dd, 0, sizeof dd);
    dd.store = w.store;
    dd.batch_size = g_batch;
    dd.no_lease_renewal = 1;
    if (obx_dispatcher_create(&dd, &w.d) != OBX_OK || obx_dispatcher_on(w.d, "telemetry", handle, NULL) != OBX_OK) {
        printf("wear: dispatcher FAILED\n");
        return 1;
    }
    printf("wear: %lld messages of %d bytes, batches of %d, cleanup every %d, backlog %lld, vacuum %s "
           "(WAL, synchronous=%s)\n",
           total, PAYLOAD_BYTES, g_batch, CLEANUP_EVERY, backlog, w.incremental ? "incremental" : "none", sync);
    w.io0 = proc_io("write_bytes");
    w.wchar0 = proc_io("wchar");
    while (!failed && steady < total) {
        if (backlog > 0 && !outage_done && steady >= total / 2) { /* the uplink is down */
            long long left = backlog;
            while (!failed && left > 0) {
                failed |= enqueue(&w, left < g_batch ? (int)left : g_batch) != 0;
                left -= g_batch;
            }
            sample(&w, "backlog");
            failed |= drain(&w) != 0 || cleanup(&w) != 0;
            sample(&w, "drained");
            since_cleanup = 0;
            outage_done = 1;
            continue;
        }
        failed |= enqueue(&w, g_batch) != 0 || drain(&w) != 0;
        steady += g_batch;
        since_cleanup += g_batch;
        if (since_cleanup >= CLEANUP_EVERY) {
            failed |= cleanup(&w) != 0;
            since_cleanup = 0;
            cleanups++;
        }
        if (steady >= total * next_sample / 20) {
            long long size = file_size(w.file);
            sample(&w, "steady");
            /* The peak of the first cleanup period against the peaks of
             * the later ones, before an outage. */
            if (cleanups <= 1 && size > steady_size) steady_size = size;
            else if (cleanups > 1 && !outage_done && size > max_steady) max_steady = size;
            next_sample++;
        }
    }
    if (!failed) failed |= drain(&w) != 0 || cleanup(&w) != 0;
    sample(&w, "end");
    if (g_handled != w.enqueued) {
        printf("wear: FAILED: %lld enqueued, %lld handled\n", w.enqueued, g_handled);
        failed = 1;
    }
    if (steady_size > 0 && max_steady > steady_size + steady_size / 2) {
        printf("wear: FAILED: the file grew in steady state from %lld to %lld bytes\n", steady_size, max_steady);
        failed = 1;
    }
    obx_dispatcher_destroy(w.d);
    obx_store_close(w.store);
    tort_db_close(&w.raw);
    printf("wear: %s\n", failed ? "FAILED" : "ok");
    return failed;
}

/* forwarder.c: a gateway forwards sensor readings from its SQLite outbox to
 * a flaky uplink, in batches.
 *
 *   - readings are enqueued by the hundred; a batch handler sends all of a
 *     claim's "telemetry" messages in one (simulated) uplink request and
 *     answers per reading: delivered, retry later, or dead (malformed);
 *   - each sensor's readings carry its ordering key, so the uplink gets them
 *     in order per sensor even when one is retried (its successors wait);
 *   - the uplink goes down for a while: the handler says OBX_PAUSE, the
 *     topic pauses (growing pauses, no attempts used, nothing dies) while
 *     "alarm" messages, on a handler of their own, keep flowing;
 *   - afterwards an operator lists the dead readings, fixes the cause and
 *     replays them (the dead-letter tools).
 *
 *   cc -std=c99 -D_POSIX_C_SOURCE=200809L forwarder.c -lodbc -pthread
 */
#define OBX_IMPLEMENTATION
#include "../obx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SENSORS 4

typedef struct uplink {
    int requests;                /* batch requests sent */
    int down_for;                /* the next this many requests fail: uplink unavailable */
    int delivered, refused;
    int accept_malformed;        /* the operator's fix, applied before the replay */
    int last_seq[SENSORS];       /* the newest reading delivered per sensor */
    int out_of_order;            /* a reading delivered after a newer one of its sensor */
} uplink;

/* One uplink request for the whole batch; the uplink answers per reading. */
static void send_telemetry(const obx_message *const *ms, obx_batch_result *res, int n, void *user) {
    uplink *u = (uplink *)user;
    int i;
    u->requests++;
    if (u->down_for > 0) {
        u->down_for--;
        for (i = 0; i < n; i++) {
            res[i].outcome = OBX_PAUSE;
            snprintf(res[i].error, sizeof res[i].error, "uplink unreachable");
        }
        return;
    }
    for (i = 0; i < n; i++) {
        if (strstr(ms[i]->payload, "\"celsius\":null") && !u->accept_malformed) {
            res[i].outcome = OBX_DEAD; /* retrying will not help: a dead letter */
            snprintf(res[i].error, sizeof res[i].error, "malformed reading (no value)");
            u->refused++;
        } else if (ms[i]->retry_count == 0 && atoi(ms[i]->payload + 7) % 17 == 0) {
            res[i].outcome = OBX_RETRY; /* e.g. a 429 for this one: later */
            snprintf(res[i].error, sizeof res[i].error, "throttled");
        } else {
            int seq = atoi(ms[i]->payload + 7), sensor = seq % SENSORS;
            /* A replayed dead reading is late by design: its key moved on. */
            if (seq < u->last_seq[sensor] && !u->accept_malformed) u->out_of_order++;
            if (seq > u->last_seq[sensor]) u->last_seq[sensor] = seq;
            res[i].outcome = OBX_DONE;
            u->delivered++;
        }
    }
}

static int alarms;
static obx_outcome send_alarm(const obx_message *m, char *error, size_t size, void *user) {
    (void)m; (void)error; (void)size; (void)user;
    alarms++; /* another route (SMS, say): up while the uplink is down */
    return OBX_DONE;
}

static int64_t no_backoff(int attempts, void *user) {
    (void)attempts; (void)user;
    return 0; /* the demo retries at once; keep the default in production */
}

/* Rounds until nothing is claimable; counts what was paused. */
static int drain(obx_dispatcher *d, int *paused) {
    obx_run_stats st;
    obx_result r;
    int rounds = 0, idle = 0;
    while (idle < 10 && rounds < 10000) { /* idle for longer than the longest pause */
        r = obx_dispatcher_run_once(d, &st);
        if (r < 0) return -1;
        rounds++;
        *paused += st.paused;
        idle = r == OBX_EMPTY ? idle + 1 : 0;
        if (r == OBX_EMPTY) {
            struct timespec ts = {0, 20 * 1000000L}; /* a paused topic comes due soon */
            nanosleep(&ts, NULL);
        }
    }
    return rounds;
}

int main(void) {
    obx_store_desc sd;
    obx_dispatcher_desc dd;
    obx_store *store = NULL;
    obx_dispatcher *d = NULL;
    obx_new_message batch[100];
    char payloads[100][64], keys[SENSORS][16];
    uplink u;
    obx_dead_filter f;
    const obx_message *dead;
    int i, k, n = 0, paused = 0;
    int64_t replayed = 0, left = 0, oldest = 0;

    memset(&sd, 0, sizeof sd);
    sd.connection_string = "Driver={SQLite3};Database=gateway.db;JournalMode=WAL;SyncPragma=NORMAL;Timeout=5000;";
    sd.deploy_schema = 1;
    sd.store_id = "gateway";
    sd.hooks.logger.min_level = OBX_LOG_OFF; /* the demo prints a summary; a service keeps WARN */
    if (obx_store_open(&sd, &store) != OBX_OK) {
        fprintf(stderr, "open: %s\n", obx_store_last_error(store)->message);
        obx_store_close(store);
        return 1;
    }
    /* 300 readings of 4 sensors (every 50th without a value) and 3 alarms. */
    for (i = 0; i < SENSORS; i++) snprintf(keys[i], sizeof keys[i], "sensor-%d", i);
    for (k = 0; k < 3; k++) {
        for (i = 0; i < 100; i++) {
            int seq = k * 100 + i;
            memset(&batch[i], 0, sizeof batch[i]);
            if (seq % 50 == 49) snprintf(payloads[i], sizeof payloads[i], "{\"seq\":%d,\"celsius\":null}", seq);
            else snprintf(payloads[i], sizeof payloads[i], "{\"seq\":%d,\"celsius\":%d.5}", seq, 18 + seq % 7);
            batch[i].topic = "telemetry";
            batch[i].payload = payloads[i];
            batch[i].payload_len = OBX_NTS;
            batch[i].ordering_key = keys[seq % SENSORS];
        }
        if (obx_enqueue_batch(store, NULL, batch, 100, NULL) != OBX_OK) goto fail;
        memset(&batch[0], 0, sizeof batch[0]);
        batch[0].topic = "alarm";
        batch[0].payload = "{\"door\":\"open\"}";
        batch[0].payload_len = OBX_NTS;
        if (obx_enqueue(store, &batch[0], NULL) != OBX_OK) goto fail;
    }

    memset(&u, 0, sizeof u);
    for (i = 0; i < SENSORS; i++) u.last_seq[i] = -1;
    u.down_for = 6; /* the uplink is down for the first six requests */
    memset(&dd, 0, sizeof dd);
    dd.store = store;
    dd.batch_size = 64;
    dd.backoff = no_backoff;
    dd.pause_ms = 10;     /* short for the demo; default 1 s, doubling ... */
    dd.pause_max_ms = 80; /* ... up to 60 s */
    if (obx_dispatcher_create(&dd, &d) != OBX_OK ||
        obx_dispatcher_on_batch(d, "telemetry", send_telemetry, &u) != OBX_OK ||
        obx_dispatcher_on(d, "alarm", send_alarm, NULL) != OBX_OK)
        goto fail;
    if (drain(d, &paused) < 0) goto fail;
    printf("uplink: %d requests for 300 readings, %d delivered, %d refused as malformed\n",
           u.requests, u.delivered, u.refused);
    printf("order: %d readings delivered out of order per sensor (one claim takes one per sensor)\n",
           u.out_of_order);
    printf("outage: readings put back %d times while paused (no attempt used), %d alarms sent meanwhile\n",
           paused, alarms);

    /* The operator's view: what is dead, and why. */
    memset(&f, 0, sizeof f);
    f.topic = "telemetry";
    f.error_contains = "malformed";
    if (obx_dead_list(store, &f, 0, 10, &dead, &n) < 0) goto fail;
    for (i = 0; i < n && i < 3; i++) printf("dead: %s (%s)\n", dead[i].payload, dead[i].last_error);
    if (n > 3) printf("dead: ... %d more\n", n - 3);
    /* The uplink learns to accept readings without a value: replay them. */
    u.accept_malformed = 1;
    if (obx_dead_replay(store, &f, &replayed) != OBX_OK || drain(d, &paused) < 0) goto fail;
    if (obx_queue_stats(store, &left, &oldest) != OBX_OK) goto fail;
    printf("replayed %lld dead readings; delivered in all: %d of 300; left in the queue: %lld\n",
           (long long)replayed, u.delivered, (long long)left);
    obx_dispatcher_destroy(d);
    obx_store_close(store);
    return u.delivered == 300 && left == 0 && u.out_of_order == 0 ? 0 : 1;
fail:
    fprintf(stderr, "error: %s\n", obx_store_last_error(store)->message);
    obx_dispatcher_destroy(d);
    obx_store_close(store);
    return 1;
}

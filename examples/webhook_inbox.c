/* webhook_inbox.c: receive webhooks exactly once, with ibx.h on SQLite.
 *
 * Each delivery is one line: the signature header, a tab, the JSON body.
 *     t=1764115200,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>\t{"id":"evt_1",...}
 * For each delivery it
 *   1. verifies the HMAC-SHA256 signature and that the timestamp is within
 *      five minutes (a forged or replayed-late delivery is rejected),
 *   2. asks the inbox whether (source, event id) was already processed,
 *      passing the SHA-256 of the body,
 *   3. enqueues new events, and lets the dispatcher handle them.
 * A redelivered webhook is recognised and not processed twice.
 *
 *   ./webhook_inbox --sample | ./webhook_inbox          (what make demo runs)
 *   ./webhook_inbox deliveries.txt [more files]
 */
#define IBX_IMPLEMENTATION
#include "../ibx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char secret[] = "whsec_demo_secret";
static const char source[] = "StripeWebhook";
static int handled_count;

static void to_hex(const unsigned char *d, size_t n, char *out) {
    static const char hx[] = "0123456789abcdef";
    size_t i;
    for (i = 0; i < n; i++) {
        out[2 * i] = hx[d[i] >> 4];
        out[2 * i + 1] = hx[d[i] & 15];
    }
    out[2 * n] = '\0';
}

/* The Stripe scheme: v1 = hex(HMAC-SHA256(secret, "<t>.<body>")). */
static void sign(long t, const char *body, char out[65]) {
    size_t cap = strlen(body) + 32;
    char *signed_text = (char *)malloc(cap);
    unsigned char mac[32];
    memset(out, 0, 65);
    if (!signed_text) return; /* out of memory: no signature matches */
    snprintf(signed_text, cap, "%ld.%s", t, body);
    ibx_hmac_sha256(secret, strlen(secret), signed_text, strlen(signed_text), mac);
    to_hex(mac, 32, out);
    free(signed_text);
}

/* Compare a received signature with the expected one (64 hex characters)
 * in constant time: every byte is looked at, whatever differs first, so
 * the time taken tells an attacker nothing about how much was right. */
static int same(const char *expected, const char *received) {
    size_t i, n = strlen(received);
    unsigned diff = n != 64u;
    for (i = 0; i < 64; i++)
        diff |= (unsigned)(unsigned char)expected[i] ^ (unsigned)(unsigned char)(i < n ? received[i] : 0);
    return diff == 0;
}

/* The string value of "key" in a flat JSON object (enough for the demo;
 * a real service uses a JSON parser). */
static int json_field(const char *json, const char *key, char *out, size_t cap) {
    char pattern[64];
    const char *p, *end;
    snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
    p = strstr(json, pattern);
    if (!p) return 0;
    p += strlen(pattern);
    end = strchr(p, '"');
    if (!end || (size_t)(end - p) >= cap) return 0;
    memcpy(out, p, (size_t)(end - p));
    out[end - p] = '\0';
    return 1;
}

static ibx_outcome on_payment(const ibx_message *m, char *error, size_t size, void *user) {
    (void)error; (void)size; (void)user;
    handled_count++;
    printf("    handler: %s %s (attempt %d) -> fulfilled\n", m->topic, m->message_id, m->attempt + 1);
    return IBX_DONE;
}

/* One delivery: verify, dedup, enqueue. Returns the HTTP status a web
 * handler would answer. */
static int receive(ibx_store *inbox, ibx_dispatcher *dispatcher, char *line) {
    char *tab = strchr(line, '\t'), *body, expected[65], given[65] = "", id[128], type[128], topic[160];
    unsigned char hash[32];
    long t = 0;
    int processed = 0;
    ibx_new_message m = {0};
    if (!tab) return 400;
    *tab = '\0';
    body = tab + 1;
    if (sscanf(line, "t=%ld,v1=%64s", &t, given) != 2) {
        printf("  rejected: malformed signature header\n");
        return 400;
    }
    sign(t, body, expected);
    if (!same(expected, given)) {
        printf("  rejected: signature does not match (forged or altered)\n");
        return 401;
    }
    if (labs((long)time(NULL) - t) > 300) {
        printf("  rejected: timestamp %ld s old, outside the 5-minute window (replay?)\n",
               (long)time(NULL) - t);
        return 401;
    }
    if (!json_field(body, "id", id, sizeof id) || !json_field(body, "type", type, sizeof type)) {
        printf("  rejected: no id or type in the body\n");
        return 400;
    }
    ibx_sha256(body, strlen(body), hash);
    if (ibx_already_processed(inbox, id, source, hash, sizeof hash, &processed) != IBX_OK) {
        printf("  error: %s\n", ibx_store_last_error(inbox)->message);
        return 500; /* the sender retries later: nothing is lost */
    }
    if (processed) {
        printf("  duplicate: %s already processed, answering 200 without doing it again\n", id);
        return 200;
    }
    snprintf(topic, sizeof topic, "stripe.%s", type);
    m.topic = topic;
    m.source = source;
    m.message_id = id;
    m.payload = body;
    m.payload_len = IBX_NTS;
    m.hash = hash;
    m.hash_len = sizeof hash;
    if (ibx_enqueue(inbox, &m, NULL) != IBX_OK) {
        printf("  error: %s\n", ibx_store_last_error(inbox)->message);
        return 500;
    }
    printf("  accepted: %s enqueued as %s\n", id, topic);
    ibx_dispatcher_run_once(dispatcher, NULL); /* a service runs ibx_dispatcher_run() in a thread */
    return 200;
}

/* Sample deliveries: two events, a redelivery, a forgery, a stale replay. */
static void print_sample(void) {
    static const char *const bodies[] = {
        "{\"id\":\"evt_1001\",\"type\":\"payment_intent.succeeded\",\"amount\":4200}",
        "{\"id\":\"evt_1002\",\"type\":\"payment_intent.succeeded\",\"amount\":1999}"};
    long now = (long)time(NULL);
    char sig[65];
    sign(now, bodies[0], sig);
    printf("t=%ld,v1=%s\t%s\n", now, sig, bodies[0]);
    sign(now, bodies[1], sig);
    printf("t=%ld,v1=%s\t%s\n", now, sig, bodies[1]);
    sign(now + 1, bodies[0], sig); /* the sender retries evt_1001: same event, new signature */
    printf("t=%ld,v1=%s\t%s\n", now + 1, sig, bodies[0]);
    printf("t=%ld,v1=%s\t%s\n", now, sig, /* forged: an altered amount with an old signature */
           "{\"id\":\"evt_1003\",\"type\":\"payment_intent.succeeded\",\"amount\":999999}");
    sign(now - 3600, bodies[1], sig); /* captured an hour ago and replayed */
    printf("t=%ld,v1=%s\t%s\n", now - 3600, sig, bodies[1]);
}

static void quiet(ibx_log_level level, const char *store, const char *message, void *user) {
    (void)user;
    if (level >= IBX_LOG_WARN) fprintf(stderr, "    [%s] %s\n", store, message);
}

int main(int argc, char **argv) {
    ibx_store_desc desc = {0};
    ibx_dispatcher_desc dd = {0};
    ibx_store *inbox = NULL;
    ibx_dispatcher *dispatcher = NULL;
    char line[8192];
    int i, n = 0;
    if (argc > 1 && strcmp(argv[1], "--sample") == 0) {
        print_sample();
        return 0;
    }
    desc.connection_string = "Driver={SQLite3};Database=webhook.db;JournalMode=WAL;Timeout=5000;";
    desc.deploy_schema = 1;
    desc.store_id = "webhooks";
    desc.hooks.logger.log = quiet;
    if (ibx_store_open(&desc, &inbox) != IBX_OK) {
        fprintf(stderr, "open: %s\n", ibx_store_last_error(inbox)->message);
        ibx_store_close(inbox);
        return 1;
    }
    dd.store = inbox;
    ibx_dispatcher_create(&dd, &dispatcher);
    ibx_dispatcher_on(dispatcher, "stripe.payment_intent.succeeded", on_payment, NULL);
    for (i = 1; i < argc || (argc == 1 && i == 1); i++) {
        FILE *f = argc == 1 ? stdin : fopen(argv[i], "r");
        if (!f) {
            perror(argv[i]);
            continue;
        }
        while (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\r\n")] = '\0';
            if (!line[0]) continue;
            printf("delivery %d:\n", ++n);
            printf("  -> HTTP %d\n", receive(inbox, dispatcher, line));
        }
        if (f != stdin) fclose(f);
    }
    printf("%d deliveries, %d handled: each event exactly once\n", n, handled_count);
    ibx_dispatcher_destroy(dispatcher);
    ibx_store_close(inbox);
    return 0;
}

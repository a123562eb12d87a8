/* obxctl_fill: a queue in a known state for tests/obxctl.sh, through the
 * library. Usage: obxctl_fill outbox|inbox CONNECTION TABLE SCHEMA METRICS_FILE
 * Creates the table (give a new one each time), then leaves in it:
 *   done   email.send x3, invoice.created x2       (handled by a dispatcher)
 *   dead   webhook.deliver x2                      (handler says DEAD; one payload
 *                                                   has control characters, one is
 *                                                   2000 bytes)
 *   in flight  invoice.created (lease 300 s), sms.send (lease 1 s: soon expired)
 *   ready  email.send x2
 *   scheduled  report.monthly (due in an hour)
 * and writes the library's *_metrics_text() after the dispatch (counters and
 * handler histograms included) to METRICS_FILE. Exit 0, or 1 with a line.
 * Mode inbox-wide (METRICS_FILE unused): texts at their limits for JSON
 * output. Dead: source "wide", message id 255 x "e-acute", topic 255 x
 * "a-umlaut", last error 300 x "o-umlaut", a payload whose 1024th byte
 * starts an "a-umlaut". Ready: one of that topic and one of 254 x
 * "a-umlaut" + "b" (source "stripe").
 * Modes crash-outbox|crash-inbox (METRICS_FILE unused): a store with
 * max_starts 1 and one message (inbox: source "loop", id "evt_loop"),
 * claimed with a 1 s lease and never settled: a reap after 1 s ends it
 * Dead (crash loop). Modes claim-outbox|claim-inbox: the same store reaps,
 * then claims with a 60 s lease and prints how many messages it got.
 * Mode envelope-outbox (METRICS_FILE unused): one message with ordering key
 * "acct-7", tenant "t-42", aggregate "order" "1001", headers traceparent
 * and x-src, expiring in a day, claimed with a 1 s lease (soon expired);
 * prints its id. A message enqueued after it with key acct-7 is parked. */
#define OBX_IMPLEMENTATION
#define IBX_IMPLEMENTATION
#include "../obx.h"
#include "../ibx.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const TOKEN = "01890a5d-ac96-774b-bcce-b302099a8057";
static char big[2001];

static const char *payload_of(int i) {
    if (i == 5) return "{\"url\":\"https://hooks.example.com/x\",\n\"body\":\"\x1b[31mred\x1b[0m\"}";
    if (i == 6) return big;
    return "{\"n\":1}";
}

static const char *const first_topics[7] = {"email.send", "email.send", "email.send", "invoice.created",
                                            "invoice.created", "webhook.deliver", "webhook.deliver"};

static obx_outcome ob_handler(const obx_message *m, char *error, size_t size, void *user) {
    (void)user;
    if (strcmp(m->topic, "webhook.deliver") != 0) return OBX_DONE;
    snprintf(error, size, "HTTP 503 from hooks.example.com");
    return OBX_DEAD;
}

static ibx_outcome ib_handler(const ibx_message *m, char *error, size_t size, void *user) {
    (void)user;
    if (strcmp(m->topic, "webhook.deliver") != 0) return IBX_DONE;
    snprintf(error, size, "HTTP 503 from hooks.example.com");
    return IBX_DEAD;
}

static int write_metrics(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "obxctl_fill: cannot write %s\n", path);
        return 0;
    }
    return 1;
}

static int outbox(const char *conn, const char *table, const char *schema, const char *metrics) {
    obx_store_desc sd;
    obx_dispatcher_desc dd;
    obx_store *s = NULL;
    obx_dispatcher *d = NULL;
    obx_new_message m;
    const obx_message *ms;
    static char text[65536];
    int i, n, ok = 1;
    memset(&sd, 0, sizeof sd);
    memset(&dd, 0, sizeof dd);
    memset(&m, 0, sizeof m);
    sd.connection_string = conn;
    sd.table = table;
    sd.schema = schema;
    sd.deploy_schema = 1;
    sd.hooks.logger.min_level = OBX_LOG_OFF;
    if (obx_store_open(&sd, &s) != OBX_OK) goto failed;
    m.payload_len = OBX_NTS;
    for (i = 0; i < 7; i++) {
        m.topic = first_topics[i];
        m.payload = payload_of(i);
        ok = ok && obx_enqueue(s, &m, NULL) == OBX_OK;
    }
    dd.store = s;
    ok = ok && obx_dispatcher_create(&dd, &d) == OBX_OK && obx_dispatcher_on(d, "*", ob_handler, NULL) == OBX_OK &&
         obx_dispatcher_run_once(d, NULL) == OBX_OK;
    obx_dispatcher_destroy(d);
    ok = ok && obx_metrics_text(s, text, sizeof text, NULL) == OBX_OK && write_metrics(metrics, text);
    m.payload = "{}";
    m.topic = "invoice.created";
    ok = ok && obx_enqueue(s, &m, NULL) == OBX_OK && obx_claim(s, TOKEN, 300, 1, &ms, &n) == OBX_OK;
    m.topic = "sms.send";
    ok = ok && obx_enqueue(s, &m, NULL) == OBX_OK && obx_claim(s, TOKEN, 1, 1, &ms, &n) == OBX_OK;
    m.topic = "email.send";
    ok = ok && obx_enqueue(s, &m, NULL) == OBX_OK && obx_enqueue(s, &m, NULL) == OBX_OK;
    m.topic = "report.monthly";
    m.due_utc_ms = (int64_t)time(NULL) * 1000 + 3600000; /* in an hour */
    m.priority = 3;                                       /* list and show print it */
    ok = ok && obx_enqueue(s, &m, NULL) == OBX_OK;
    if (!ok) goto failed;
    obx_store_close(s);
    return 0;
failed:
    fprintf(stderr, "obxctl_fill: %s\n", obx_store_last_error(s)->message);
    obx_store_close(s);
    return 1;
}

static int enq(ibx_store *s, const char *topic, const char *id, const char *payload, int64_t due) {
    ibx_new_message m;
    memset(&m, 0, sizeof m);
    m.topic = topic;
    m.source = "stripe";
    m.message_id = id;
    m.payload = payload;
    m.payload_len = IBX_NTS;
    m.due_utc_ms = due;
    return ibx_enqueue(s, &m, NULL) == IBX_OK;
}

static int inbox(const char *conn, const char *table, const char *schema, const char *metrics) {
    ibx_store_desc sd;
    ibx_dispatcher_desc dd;
    ibx_store *s = NULL;
    ibx_dispatcher *d = NULL;
    const ibx_message *ms;
    static char text[65536];
    char id[16];
    int i, n, ok = 1;
    memset(&sd, 0, sizeof sd);
    memset(&dd, 0, sizeof dd);
    sd.connection_string = conn;
    sd.table = table;
    sd.schema = schema;
    sd.deploy_schema = 1;
    sd.hooks.logger.min_level = IBX_LOG_OFF;
    if (ibx_store_open(&sd, &s) != IBX_OK) goto failed;
    for (i = 0; i < 7; i++) {
        snprintf(id, sizeof id, "evt_%02d", i + 1);
        ok = ok && enq(s, first_topics[i], id, payload_of(i), 0);
    }
    dd.store = s;
    ok = ok && ibx_dispatcher_create(&dd, &d) == IBX_OK && ibx_dispatcher_on(d, "*", ib_handler, NULL) == IBX_OK &&
         ibx_dispatcher_run_once(d, NULL) == IBX_OK;
    ibx_dispatcher_destroy(d);
    ok = ok && ibx_metrics_text(s, text, sizeof text, NULL) == IBX_OK && write_metrics(metrics, text);
    ok = ok && enq(s, "invoice.created", "evt_08", "{}", 0) && ibx_claim(s, TOKEN, 300, 1, &ms, &n) == IBX_OK;
    ok = ok && enq(s, "sms.send", "evt_09", "{}", 0) && ibx_claim(s, TOKEN, 1, 1, &ms, &n) == IBX_OK;
    ok = ok && enq(s, "email.send", "evt_10", "{}", 0) && enq(s, "email.send", "evt_11", "{}", 0);
    ok = ok && enq(s, "report.monthly", "evt_12", "{}", (int64_t)time(NULL) * 1000 + 3600000);
    if (!ok) goto failed;
    ibx_store_close(s);
    return 0;
failed:
    fprintf(stderr, "obxctl_fill: %s\n", ibx_store_last_error(s)->message);
    ibx_store_close(s);
    return 1;
}

/* A text of `n` copies of the 2-byte character `c` (then `tail`). */
static char *repeat2(char *out, const char *c, int n, const char *tail) {
    int i;
    out[0] = '\0';
    for (i = 0; i < n; i++) strcat(out, c);
    return strcat(out, tail);
}

static int inbox_wide(const char *conn, const char *table, const char *schema) {
    static char id[1024], topic[1024], topic2[1024], error[1024], payload[2048];
    ibx_store_desc sd;
    ibx_store *s = NULL;
    ibx_new_message m;
    ibx_key k;
    const ibx_message *ms;
    int n = 0, ok;
    int64_t changed = 0;
    memset(&sd, 0, sizeof sd);
    sd.connection_string = conn;
    sd.table = table;
    sd.schema = schema;
    sd.deploy_schema = 1;
    sd.hooks.logger.min_level = IBX_LOG_OFF;
    repeat2(id, "\xc3\xa9", 255, "");
    repeat2(topic, "\xc3\xa4", 255, "");
    repeat2(topic2, "\xc3\xa4", 254, "b");
    repeat2(error, "\xc3\xb6", 300, "");
    memset(payload, 'x', 1023);
    strcpy(payload + 1023, "\xc3\xa4 and more");
    memset(&m, 0, sizeof m);
    m.topic = topic;
    m.source = "wide";
    m.message_id = id;
    m.payload = payload;
    m.payload_len = IBX_NTS;
    k.source = "wide";
    k.message_id = id;
    ok = ibx_store_open(&sd, &s) == IBX_OK && ibx_enqueue(s, &m, NULL) == IBX_OK &&
         ibx_claim(s, TOKEN, 300, 1, &ms, &n) == IBX_OK && ibx_fail(s, TOKEN, &k, 1, error, &changed) == IBX_OK &&
         changed == 1 && enq(s, topic, "r1", "{}", 0) && enq(s, topic2, "r2", "{}", 0);
    if (!ok) fprintf(stderr, "obxctl_fill: %s\n", ibx_store_last_error(s)->message);
    ibx_store_close(s);
    return ok ? 0 : 1;
}

static int envelope_outbox(const char *conn, const char *table, const char *schema) {
    obx_store_desc sd;
    obx_store *s = NULL;
    obx_new_message m;
    obx_header h[2];
    const obx_message *ms;
    char id[37];
    int n = 0, ok;
    memset(&sd, 0, sizeof sd);
    memset(&m, 0, sizeof m);
    sd.connection_string = conn;
    sd.table = table;
    sd.schema = schema;
    sd.deploy_schema = 1;
    sd.hooks.logger.min_level = OBX_LOG_OFF;
    h[0].key = "traceparent";
    h[0].value = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    h[1].key = "x-src";
    h[1].value = "billing";
    m.topic = "ledger.post";
    m.payload = "{\"amount\":12}";
    m.payload_len = OBX_NTS;
    m.ordering_key = "acct-7";
    m.tenant_id = "t-42";
    m.aggregate_type = "order";
    m.aggregate_id = "1001";
    m.headers = h;
    m.header_count = 2;
    m.expires_utc_ms = (int64_t)time(NULL) * 1000 + 86400000;
    ok = obx_store_open(&sd, &s) == OBX_OK && obx_enqueue(s, &m, id) == OBX_OK &&
         obx_claim(s, TOKEN, 1, 1, &ms, &n) == OBX_OK && n == 1;
    if (!ok) fprintf(stderr, "obxctl_fill: %s\n", obx_store_last_error(s)->message);
    else printf("%s\n", id);
    obx_store_close(s);
    return ok ? 0 : 1;
}

/* A crash loop with max_starts 1 (crash-*), or a claim under it (claim-*). */
static int crash(const char *mode, const char *conn, const char *table, const char *schema) {
    int inbox = strstr(mode, "inbox") != NULL, claim = strncmp(mode, "claim", 5) == 0, n = 0, ok;
    if (inbox) {
        ibx_store_desc sd;
        ibx_store *s = NULL;
        ibx_new_message m;
        const ibx_message *ms;
        memset(&sd, 0, sizeof sd);
        memset(&m, 0, sizeof m);
        sd.connection_string = conn;
        sd.table = table;
        sd.schema = schema;
        sd.deploy_schema = 1;
        sd.max_starts = 1;
        sd.hooks.logger.min_level = IBX_LOG_OFF;
        m.topic = "loop";
        m.source = "loop";
        m.message_id = "evt_loop";
        m.payload = "{}";
        m.payload_len = IBX_NTS;
        ok = ibx_store_open(&sd, &s) == IBX_OK && (claim || ibx_enqueue(s, &m, NULL) == IBX_OK);
        ok = ok && (!claim || ibx_reap(s, NULL) == IBX_OK) && ibx_claim(s, TOKEN, claim ? 60 : 1, 10, &ms, &n) >= IBX_OK;
        if (!ok) fprintf(stderr, "obxctl_fill: %s\n", ibx_store_last_error(s)->message);
        ibx_store_close(s);
    } else {
        obx_store_desc sd;
        obx_store *s = NULL;
        obx_new_message m;
        const obx_message *ms;
        memset(&sd, 0, sizeof sd);
        memset(&m, 0, sizeof m);
        sd.connection_string = conn;
        sd.table = table;
        sd.schema = schema;
        sd.deploy_schema = 1;
        sd.max_starts = 1;
        sd.hooks.logger.min_level = OBX_LOG_OFF;
        m.topic = "loop";
        m.payload = "{}";
        m.payload_len = OBX_NTS;
        ok = obx_store_open(&sd, &s) == OBX_OK && (claim || obx_enqueue(s, &m, NULL) == OBX_OK);
        ok = ok && (!claim || obx_reap(s, NULL) == OBX_OK) && obx_claim(s, TOKEN, claim ? 60 : 1, 10, &ms, &n) >= OBX_OK;
        if (!ok) fprintf(stderr, "obxctl_fill: %s\n", obx_store_last_error(s)->message);
        obx_store_close(s);
    }
    if (ok && claim) printf("claimed %d\n", n);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    memset(big, 'x', sizeof big - 1);
    if (argc != 6) {
        fprintf(stderr, "usage: obxctl_fill outbox|inbox|inbox-wide|envelope-outbox|crash-*|claim-* CONNECTION TABLE SCHEMA METRICS_FILE\n");
        return 1;
    }
    if (strncmp(argv[1], "crash-", 6) == 0 || strncmp(argv[1], "claim-", 6) == 0)
        return crash(argv[1], argv[2], argv[3], argv[4]);
    if (strcmp(argv[1], "inbox-wide") == 0) return inbox_wide(argv[2], argv[3], argv[4]);
    if (strcmp(argv[1], "envelope-outbox") == 0) return envelope_outbox(argv[2], argv[3], argv[4]);
    if (strcmp(argv[1], "inbox") == 0) return inbox(argv[2], argv[3], argv[4], argv[5]);
    return outbox(argv[2], argv[3], argv[4], argv[5]);
}

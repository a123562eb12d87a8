/* multi_tenant.c: one outbox per tenant database, found by discovery.
 *
 *   - three tenant databases (SQLite files here) come from a discovery
 *     callback; a dispatcher thread serves all of them, round-robin
 *     (`multi_tenant 300` serves 300: the callback follows the protocol of
 *     obx_discover_fn, so past the 256 it is first given room for too);
 *   - like a store, a provider is used by one thread at a time: the
 *     dispatcher thread and the producing thread each have their own;
 *   - messages are routed by tenant key;
 *   - while it runs, tenant "west" is added and "east" removed;
 *   - an ETL fan-in: three extract steps, and "etl.transform" once all
 *     three are done (a join and its join.wait message).
 *
 *   cc -std=c99 -D_POSIX_C_SOURCE=200809L multi_tenant.c -lodbc -pthread
 */
#define OBX_IMPLEMENTATION
#include "../obx.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- discovery: a tenant list that changes while the program runs ---------------------------- */

static pthread_mutex_t tenants_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *tenant_names[4] = {"north", "south", "east", NULL};
static int slots = 4;               /* the four above, then tenant-4 ... (argv[1]) */
static char (*names)[24], (*conn)[128];
static volatile int transformed, west_done, last_done;

/* The protocol (obx_discover_fn): return how many tenants there are and
 * write as many as fit in `cap`; when they do not fit, the provider calls
 * again at once with room for all. */
static int discover_tenants(obx_database *out, int cap, void *user) {
    int i, n = 0;
    (void)user;
    pthread_mutex_lock(&tenants_lock);
    for (i = 0; i < slots; i++) {
        const char *name = i < 4 ? tenant_names[i] : names[i];
        if (!name) continue;
        if (n < cap) {
            snprintf(conn[i], sizeof conn[i], "Driver={SQLite3};Database=tenant-%s.db;JournalMode=WAL;Timeout=5000;",
                     name);
            out[n].id = name;
            out[n].connection_string = conn[i];
        }
        n++;
    }
    pthread_mutex_unlock(&tenants_lock);
    return n;
}

/* Room for `count` tenants: north, south, east, then tenant-4 ...; and a
 * slot for west, who joins later. 0: out of memory. */
static int tenants_init(int count) {
    int i;
    slots = count + 1;
    names = calloc((size_t)slots, sizeof *names);
    conn = calloc((size_t)slots, sizeof *conn);
    for (i = 4; names && i < slots; i++) snprintf(names[i], sizeof names[i], "tenant-%d", i);
    return names && conn;
}

static void set_tenant(int slot, const char *name) {
    pthread_mutex_lock(&tenants_lock);
    tenant_names[slot] = name;
    pthread_mutex_unlock(&tenants_lock);
}

/* ---- handlers ------------------------------------------------------------------------------------ */

static obx_outcome on_order(const obx_message *m, char *error, size_t size, void *user) {
    (void)error; (void)size; (void)user;
    printf("  [%s] order.created: %s\n", m->store->store_id, m->payload);
    if (strcmp(m->store->store_id, "west") == 0) west_done = 1;
    if (slots > 4 && strcmp(m->store->store_id, names[slots - 1]) == 0) last_done = 1;
    return OBX_DONE;
}

static obx_outcome on_extract(const obx_message *m, char *error, size_t size, void *user) {
    (void)error; (void)size; (void)user;
    printf("  [%s] %s finished\n", m->store->store_id, m->topic);
    return OBX_DONE;
}

static obx_outcome on_transform(const obx_message *m, char *error, size_t size, void *user) {
    (void)error; (void)size; (void)user;
    printf("  [%s] etl.transform: all three extracts are in -> transforming %s\n", m->store->store_id,
           m->payload);
    transformed = 1;
    return OBX_DONE;
}

static void *dispatch(void *d) {
    obx_dispatcher_run((obx_dispatcher *)d);
    return NULL;
}

/* Both providers log discovery; `user` says whose line it is. */
static char producer[] = "producer", dispatcher_name[] = "dispatcher";
static void quiet(obx_log_level level, const char *store, const char *message, void *user) {
    if (level >= OBX_LOG_WARN || strstr(message, "discovery:") || strstr(message, "closing"))
        printf("  (log, %s) [%s] %s\n", (const char *)user, store, message);
}

static void route_order(obx_provider *p, const char *tenant, const char *order) {
    obx_store *store;
    obx_new_message m = {0};
    obx_result r = obx_router_get(p, tenant, &store);
    if (r != OBX_OK) {
        printf("route %s -> %s: %s\n", order, tenant, obx_provider_last_error(p)->message);
        return;
    }
    m.topic = "order.created";
    m.payload = order;
    m.payload_len = OBX_NTS;
    obx_enqueue(store, &m, NULL);
    printf("route %s -> %s\n", order, tenant);
}

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int main(int argc, char **argv) {
    obx_provider_desc pd = {0};
    obx_dispatcher_desc dd = {0};
    obx_provider *tenants = NULL, *workers = NULL;
    obx_dispatcher *dispatcher = NULL;
    obx_store *north = NULL;
    obx_join_wait wait = {0};
    pthread_t thread;
    char join_id[37], step[37];
    static const char *const extracts[3] = {"extract.customers", "extract.orders", "extract.products"};
    int i, waited, count = argc > 1 ? atoi(argv[1]) : 3;
    obx_result created;

    if (count < 3 || count > OBX_DISCOVER_MAX) {
        fprintf(stderr, "usage: %s [tenants: 3 (default) .. %d]\n", argv[0], OBX_DISCOVER_MAX);
        return 2;
    }
    if (!tenants_init(count)) return 1;

    pd.discover = discover_tenants;
    pd.refresh_interval_ms = 200; /* minutes in production (default 5); short for the demo */
    pd.store.deploy_schema = 1;
    pd.store.hooks.logger.log = quiet;
    pd.store.hooks.logger.user = producer;
    created = obx_provider_create(&pd, &tenants);
    pd.store.hooks.logger.user = dispatcher_name;
    if (created != OBX_OK || obx_provider_create(&pd, &workers) != OBX_OK) {
        fprintf(stderr, "provider: %s\n", obx_provider_last_error(tenants)->message);
        return 1;
    }
    printf("%d tenant databases discovered\n", obx_provider_count(tenants));
    if (obx_provider_count(tenants) != slots - 1 || obx_provider_count(workers) != slots - 1) {
        fprintf(stderr, "discovery served %d of %d tenants\n", obx_provider_count(workers), slots - 1);
        return 1;
    }

    dd.provider = workers; /* the dispatcher's own connections, refreshed by it */
    dd.selection = OBX_SELECT_ROUND_ROBIN;
    dd.poll_interval_ms = 50;
    dd.idle_max_ms = 200;
    obx_dispatcher_create(&dd, &dispatcher);
    obx_dispatcher_on(dispatcher, "order.created", on_order, NULL);
    for (i = 0; i < 3; i++) obx_dispatcher_on(dispatcher, extracts[i], on_extract, NULL);
    obx_dispatcher_on(dispatcher, "join.wait", obx_join_wait_handler, NULL);
    obx_dispatcher_on(dispatcher, "etl.transform", on_transform, NULL);
    pthread_create(&thread, NULL, dispatch, dispatcher);

    route_order(tenants, "north", "{\"order\":\"N-1\"}");
    route_order(tenants, "south", "{\"order\":\"S-1\"}");
    route_order(tenants, "east", "{\"order\":\"E-1\"}");
    if (slots > 4) route_order(tenants, names[slots - 1], "{\"order\":\"L-1\"}"); /* the last tenant */

    /* The fan-in, in tenant north: three steps, then etl.transform. Steps
     * are enqueued first and attached, then the join.wait message. */
    obx_router_get(tenants, "north", &north);
    obx_join_start(north, "customer-7", 3, "{\"type\":\"etl\"}", join_id);
    printf("join %s: waiting for 3 extracts\n", join_id);
    for (i = 0; i < 3; i++) {
        obx_new_message m = {0};
        m.topic = extracts[i];
        m.payload = "{\"customer\":7}";
        m.payload_len = OBX_NTS;
        obx_enqueue(north, &m, step);
        obx_join_attach(north, join_id, step);
    }
    wait.join_id = join_id;
    wait.fail_if_any_step_failed = 1;
    wait.on_complete_topic = "etl.transform";
    wait.on_complete_payload = "{\"customer\":7}";
    obx_join_enqueue_wait(north, NULL, &wait, NULL);
    obx_dispatcher_wake(dispatcher);

    /* The tenant list changes while the dispatcher runs. */
    sleep_ms(300);
    printf("tenants change: west joins, east leaves\n");
    set_tenant(3, "west");
    set_tenant(2, NULL);
    obx_provider_refresh(tenants); /* the dispatcher's provider refreshes itself when due */
    route_order(tenants, "west", "{\"order\":\"W-1\"}");
    route_order(tenants, "east", "{\"order\":\"E-2\"}"); /* east is gone: not found */
    obx_dispatcher_wake(dispatcher);

    for (waited = 0; waited < 10000 && !(transformed && west_done && (slots == 4 || last_done)); waited += 50)
        sleep_ms(50);
    if (slots > 4) printf("the last tenant, %s: %s\n", names[slots - 1], last_done ? "served" : "NOT SERVED");
    obx_dispatcher_stop(dispatcher);
    pthread_join(thread, NULL);
    waited = transformed && west_done && (slots == 4 || last_done);
    printf("%s: %d tenants now, fan-in %s\n", waited ? "done" : "TIMED OUT", obx_provider_count(tenants),
           transformed ? "completed" : "incomplete");
    obx_dispatcher_destroy(dispatcher);
    obx_provider_destroy(workers);
    obx_provider_destroy(tenants);
    free(names);
    free(conn);
    return waited ? 0 : 1;
}

/* multi_tenant.c: one outbox per tenant database, found by discovery.
 *
 *   - three tenant databases (SQLite files here) come from a discovery
 *     callback; a dispatcher thread serves all of them, round-robin;
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
#include <string.h>
#include <time.h>

/* ---- discovery: a tenant list that changes while the program runs ---------------------------- */

static pthread_mutex_t tenants_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *tenant_names[4] = {"north", "south", "east", NULL};
static char conn[4][128];
static volatile int transformed, west_done;

static int discover_tenants(obx_database *out, int cap, void *user) {
    int i, n = 0;
    (void)user;
    pthread_mutex_lock(&tenants_lock);
    for (i = 0; i < 4 && n < cap; i++) {
        if (!tenant_names[i]) continue;
        snprintf(conn[i], sizeof conn[i], "Driver={SQLite3};Database=tenant-%s.db;JournalMode=WAL;Timeout=5000;",
                 tenant_names[i]);
        out[n].id = tenant_names[i];
        out[n].connection_string = conn[i];
        n++;
    }
    pthread_mutex_unlock(&tenants_lock);
    return n;
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

int main(void) {
    obx_provider_desc pd = {0};
    obx_dispatcher_desc dd = {0};
    obx_provider *tenants = NULL, *workers = NULL;
    obx_dispatcher *dispatcher = NULL;
    obx_store *north = NULL;
    obx_join_wait wait = {0};
    pthread_t thread;
    char join_id[37], step[37];
    static const char *const extracts[3] = {"extract.customers", "extract.orders", "extract.products"};
    int i, waited;
    obx_result created;

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

    for (waited = 0; waited < 10000 && !(transformed && west_done); waited += 50) sleep_ms(50);
    obx_dispatcher_stop(dispatcher);
    pthread_join(thread, NULL);
    printf("%s: %d tenants now, fan-in %s\n", transformed && west_done ? "done" : "TIMED OUT",
           obx_provider_count(tenants), transformed ? "completed" : "incomplete");
    obx_dispatcher_destroy(dispatcher);
    obx_provider_destroy(workers);
    obx_provider_destroy(tenants);
    return transformed && west_done ? 0 : 1;
}

/* The examples follow the callback protocols they are copied for: each
 * example's callbacks run here against the fake ODBC layer, through the
 * library's own providers (EXAMPLE-DISCOVERY). The example is included
 * whole, its main renamed. */
int multi_tenant_main(int argc, char **argv);
#define main multi_tenant_main
#include "../examples/multi_tenant.c"
#undef main
#include "fake_odbc.h"
#include "tt.h"

/* examples/multi_tenant.c's discovery, as obx_discover_fn says: it returns
 * how many tenants there are, whatever the room, and the provider then
 * serves every one, past the 256 it first gives room for. */
static void test_multi_tenant_discovery(void) {
    obx_database room[256];
    obx_provider_desc pd;
    obx_provider *p = NULL;
    obx_store *s = NULL;
    int i;
    TT_ASSERT(tenants_init(300));
    TT_EQ_INT(discover_tenants(room, 256, NULL), 300); /* the total, not what fitted */
    for (i = 0; i < 256; i++) TT_ASSERT(room[i].id != NULL && room[i].connection_string != NULL);
    memset(&pd, 0, sizeof pd);
    pd.discover = discover_tenants;
    pd.store.hooks.logger.min_level = OBX_LOG_OFF;
    TT_EQ_INT(obx_provider_create(&pd, &p), OBX_OK);
    TT_EQ_INT(obx_provider_count(p), 300);
    TT_EQ_INT(obx_router_get(p, "tenant-300", &s), OBX_OK);
    TT_EQ_INT(obx_router_get(p, "north", &s), OBX_OK);
    obx_provider_destroy(p);
    free(names);
    free(conn);
}

int main(void) {
    TT_RUN("EXAMPLE-DISCOVERY", "fake", "examples/multi_tenant.c's discovery follows obx_discover_fn: 300 tenants served",
           test_multi_tenant_discovery);
    return tt_done();
}

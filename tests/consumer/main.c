/* A program that uses obx.h and ibx.h the way a consumer project does:
 * found through CMake (add_subdirectory or find_package) or pkg-config.
 * It enqueues one message into each header's SQLite store and reads the
 * queue depth back. Usage: consumer DATABASE_FILE */
#define OBX_IMPLEMENTATION
#define IBX_IMPLEMENTATION
#include <obx.h>
#include <ibx.h>
#include <stdio.h>

int main(int argc, char **argv) {
    char conn[512];
    obx_store_desc od = {0};
    ibx_store_desc id = {0};
    obx_new_message om = {0};
    ibx_new_message im = {0};
    obx_store *os = NULL;
    ibx_store *is = NULL;
    int64_t oready = -1, iready = -1;
    int enqueued = 0, ok;
    if (argc != 2) {
        fprintf(stderr, "usage: consumer DATABASE_FILE\n");
        return 2;
    }
    snprintf(conn, sizeof conn, "Driver={SQLite3};Database=%s;", argv[1]);
    od.connection_string = id.connection_string = conn;
    od.deploy_schema = id.deploy_schema = 1;
    om.topic = im.topic = "consumer.check";
    om.payload = im.payload = "{}";
    om.payload_len = OBX_NTS;
    im.payload_len = IBX_NTS;
    im.source = "consumer";
    im.message_id = "1";
    ok = obx_store_open(&od, &os) == OBX_OK && obx_enqueue(os, &om, NULL) == OBX_OK &&
         obx_queue_stats(os, &oready, NULL) == OBX_OK && ibx_store_open(&id, &is) == IBX_OK &&
         ibx_enqueue(is, &im, &enqueued) == IBX_OK && ibx_queue_stats(is, &iready, NULL) == IBX_OK;
    if (!ok)
        fprintf(stderr, "consumer: %s | %s\n", obx_store_last_error(os)->message,
                ibx_store_last_error(is)->message);
    else
        printf("consumer ok: obx %s, ibx %s, ready %lld + %lld\n", obx_version(), ibx_version(),
               (long long)oready, (long long)iready);
    ibx_store_close(is);
    obx_store_close(os);
    return ok ? 0 : 1;
}

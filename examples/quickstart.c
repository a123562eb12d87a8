/* quickstart.c: open an outbox store on the embedded SQLite default and say
 * what it found. (It grows into the full outbox tour with the enqueue and
 * dispatch API.)
 *
 *   cc -std=c99 -D_POSIX_C_SOURCE=200809L quickstart.c -lodbc
 *   ./a.out ['<ODBC connection string>']
 */
#define OBX_IMPLEMENTATION
#include "../obx.h"

#include <stdio.h>

int main(int argc, char **argv) {
    obx_store_desc desc = {0};
    obx_store *store = NULL;
    obx_store_info info;
    obx_result r;

    desc.connection_string =
        argc > 1 ? argv[1] : "Driver={SQLite3};Database=build/quickstart.db;JournalMode=WAL;";
    desc.store_id = "quickstart";

    r = obx_store_open(&desc, &store);
    if (r != OBX_OK) {
        const obx_error *e = obx_store_last_error(store);
        fprintf(stderr, "cannot open the store: %s\n  %s\n  at %s (SQLSTATE %s, native %ld)\n",
                obx_result_str(r), e->message, e->where, e->sqlstate, e->native);
        obx_store_close(store);
        return 1;
    }
    obx_store_get_info(store, &info);
    printf("obx %s connected to %s %s via %s: dialect \"%s\"\n", obx_version(),
           info.dbms_name, info.dbms_version, info.driver_name, obx_dialect_name(info.dialect));
    obx_store_close(store);
    return 0;
}

/* schema_dump: write sql/<dialect>/outbox.sql and inbox.sql from the headers
 * (obx_schema_sql / ibx_schema_sql), so the files are always what the
 * headers deploy. Run by `make sql` from the top of the repository; the
 * requirement tests compare the files with the headers. */
#define OBX_IMPLEMENTATION
#define IBX_IMPLEMENTATION
#include "../obx.h"
#include "../ibx.h"

#include <stdio.h>
#include <stdlib.h>

static int write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f || fputs(text, f) == EOF || fclose(f) != 0) {
        fprintf(stderr, "schema_dump: cannot write %s\n", path);
        return 0;
    }
    return 1;
}

int main(void) {
    static const char *const names[] = {"sqlite", "postgresql", "mariadb", "sqlserver"};
    static char text[1 << 17];
    char path[64];
    int i, ok = 1;
    for (i = 0; i < 4; i++) {
        size_t needed = 0;
        snprintf(path, sizeof path, "sql/%s/outbox.sql", names[i]);
        if (obx_schema_sql((obx_dialect)(i + 1), NULL, NULL, text, sizeof text, &needed) != OBX_OK) {
            fprintf(stderr, "schema_dump: obx_schema_sql(%s) failed (needs %lu bytes)\n", names[i],
                    (unsigned long)needed);
            return 1;
        }
        ok &= write_file(path, text);
        snprintf(path, sizeof path, "sql/%s/inbox.sql", names[i]);
        if (ibx_schema_sql((ibx_dialect)(i + 1), NULL, NULL, text, sizeof text, &needed) != IBX_OK) {
            fprintf(stderr, "schema_dump: ibx_schema_sql(%s) failed\n", names[i]);
            return 1;
        }
        ok &= write_file(path, text);
    }
    return ok ? 0 : 1;
}

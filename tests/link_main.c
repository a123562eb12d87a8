/* Links against both implementations (one or two objects) and calls into
 * each, proving that nothing collides and both work. */
#include "../obx.h"
#include "../ibx.h"
#include <stdio.h>
#include <string.h>

int main(void) {
    obx_store_desc od;
    ibx_store_desc id;
    obx_store *o = NULL;
    ibx_store *i = NULL;
    int ok;
    memset(&od, 0, sizeof od);
    memset(&id, 0, sizeof id);
    od.connection_string = "Driver=fake;";
    id.connection_string = "Driver=fake;";
    /* The fake ODBC layer answers SQL_DBMS_NAME = "SQLite". */
    ok = obx_store_open(&od, &o) == OBX_OK && ibx_store_open(&id, &i) == IBX_OK &&
         obx_backoff_default_ms(3) == 8000 && ibx_backoff_default_ms(3) == 8000 &&
         strcmp(obx_result_str(OBX_EMPTY), "OBX_EMPTY") == 0 &&
         strcmp(ibx_result_str(IBX_EMPTY), "IBX_EMPTY") == 0;
    obx_store_close(o);
    ibx_store_close(i);
    printf("link: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}

/* dialects_out: built with every dialect but SQLite left out
 * (OBX_NO_POSTGRESQL, _MARIADB, _SQLSERVER and the IBX_ twins), a store on
 * a left-out dialect is refused with a clear error and SQLite still works
 * (CORE-DIALECTS-OUT). Through the fake ODBC layer. */
#define OBX_NO_POSTGRESQL
#define OBX_NO_MARIADB
#define OBX_NO_SQLSERVER
#define IBX_NO_POSTGRESQL
#define IBX_NO_MARIADB
#define IBX_NO_SQLSERVER
#define OBX_IMPLEMENTATION
#define IBX_IMPLEMENTATION
#include "../obx.h"
#include "../ibx.h"
#include "fake_odbc.h"
#include "tt.h"

static void test_left_out(void) {
    obx_store_desc desc;
    ibx_store_desc idesc;
    obx_store *s = NULL;
    ibx_store *is = NULL;
    size_t needed = 0;
    memset(&desc, 0, sizeof desc);
    desc.connection_string = "Driver=fake;";
    desc.hooks.logger.min_level = OBX_LOG_OFF;
    fake_reset();
    fake_set_dbms_name("PostgreSQL");
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_ERR_UNSUPPORTED);
    TT_EXPECT(strstr(obx_store_last_error(s)->message, "OBX_NO_POSTGRESQL") != NULL);
    obx_store_close(s);
    s = NULL;
    TT_EQ_INT(obx_schema_sql(OBX_DIALECT_MARIADB, NULL, NULL, NULL, 0, &needed), OBX_ERR_UNSUPPORTED);
    TT_EQ_INT(obx_schema_sql(OBX_DIALECT_SQLITE, NULL, NULL, NULL, 0, &needed), OBX_ERR_OUT_OF_RANGE);
    fake_reset();
    fake_set_dbms_name("SQLite");
    TT_EQ_INT(obx_store_open(&desc, &s), OBX_OK);
    obx_store_close(s);
    memset(&idesc, 0, sizeof idesc);
    idesc.connection_string = "Driver=fake;";
    idesc.hooks.logger.min_level = IBX_LOG_OFF;
    fake_reset();
    fake_set_dbms_name("Microsoft SQL Server");
    TT_EQ_INT(ibx_store_open(&idesc, &is), IBX_ERR_UNSUPPORTED);
    TT_EXPECT(strstr(ibx_store_last_error(is)->message, "IBX_NO_SQLSERVER") != NULL);
    ibx_store_close(is);
}

int main(void) {
    TT_RUN("CORE-DIALECTS-OUT", "fake", "a build without a dialect refuses it clearly; SQLite still works", test_left_out);
    return tt_done();
}

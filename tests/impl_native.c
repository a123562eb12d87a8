/* obx.h after the three native drivers' headers: the conveniences
 * (obx_enqueue_sqlite3, obx_enqueue_pq, obx_enqueue_mysql and the
 * inbox's ibx_ ones) compiled, as C
 * and as C++ (make check-cxx, check-warnings). */
#include <sqlite3.h>
#include <libpq-fe.h>
#include <mysql.h>
#define OBX_IMPLEMENTATION
#include "../obx.h"
#define IBX_IMPLEMENTATION
#include "../ibx.h"

#ifdef __cplusplus
extern "C" {
#endif
int impl_native_probe(void);
#ifdef __cplusplus
}
#endif

/* Each convenience taken by address: declared, with the driver's types. */
int impl_native_probe(void) {
    obx_result (*lite)(obx_store *, sqlite3 *, const obx_new_message *, int, char (*)[37]) = obx_enqueue_sqlite3;
    obx_result (*pq)(obx_store *, PGconn *, const obx_new_message *, int, char (*)[37]) = obx_enqueue_pq;
    obx_result (*my)(obx_store *, MYSQL *, const obx_new_message *, int, char (*)[37]) = obx_enqueue_mysql;
    ibx_result (*ilite)(ibx_store *, sqlite3 *, const ibx_new_message *, int *) = ibx_enqueue_sqlite3;
    ibx_result (*ipq)(ibx_store *, PGconn *, const ibx_new_message *, int *) = ibx_enqueue_pq;
    ibx_result (*imy)(ibx_store *, MYSQL *, const ibx_new_message *, int *) = ibx_enqueue_mysql;
    return lite != NULL && pq != NULL && my != NULL && ilite != NULL && ipq != NULL && imy != NULL;
}

/* fake_odbc.h - a scripted stand-in for ODBC, linked into tests instead of
 * -lodbc so that every error path of obx.h/ibx.h can be driven on demand.
 *
 * It does not parse or run SQL. Each execute (SQLExecute, SQLExecDirect or
 * the final SQLParamData) pops the next scripted response, and appends what
 * it was sent (SQL text plus a snapshot of every bound parameter) to a log
 * that tests read back. The SQL* functions come with their real prototypes
 * from <sql.h>/<sqlext.h>; this header only adds the fake_* control API.
 *
 * Behaviour worth knowing (details in fake_odbc.c):
 *  - Response queue empty: an execute returns SQL_SUCCESS, rowcount 0.
 *  - fake_push_info() with nothing queued first queues fake_push_ok(0).
 *  - SQLGetConnectAttr writes a 32-bit SQLUINTEGER (as psqlODBC does):
 *    zero-initialise an SQLULEN target. SQLGetStmtAttr writes a full SQLULEN.
 *  - SQLGetData returns StrLen_or_Ind = bytes remaining before this call
 *    (the full length on the first call), then SQL_NO_DATA once consumed.
 *  - Cursor rules follow the unixODBC driver manager: re-executing (or
 *    preparing) while a result set is partly fetched gives 24000; a result
 *    set that was not fetched or was fetched to the end is closed silently;
 *    SQLCloseCursor gives 24000 unless the last execute succeeded.
 *  - SQLDisconnect frees the connection's statements (as real ODBC does);
 *    SQLFreeHandle of a connected DBC, or of a parent with children, is HY010.
 *  - A dead connection fails only calls that would talk to the server:
 *    SQLAllocHandle(STMT), SQLPrepare, SQLExecute, SQLExecDirect, SQLFetch,
 *    SQLParamData, SQLPutData, SQLGetInfo, SQLSetConnectAttr, SQLEndTran.
 *    Client-side calls (binding, attributes, SQLGetData on a fetched row,
 *    SQLRowCount, ...) and cleanup calls keep working. The first failing
 *    call reports 57P01, later ones 08S01 / native 35.
 *  - A lied commit on a dead connection is logged as "<COMMIT LOST>" and is
 *    not counted by fake_commits().
 *  - Calls failed by fake_fail_call() or by a dead connection consume no
 *    response and add no log entry; scripted errors are logged.
 *  - SQLEndTran supports SQL_HANDLE_DBC only.
 */
#ifndef FAKE_ODBC_H
#define FAKE_ODBC_H

#include <stddef.h>
#ifdef _WIN32
#define WIN32_LEAN_AND_MEAN
#include <windows.h> /* Windows' ODBC headers need it first */
#endif
#include <sql.h>
#include <sqlext.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One logged parameter value. data is NUL-terminated (not counted in len)
 * and NULL only when is_null. Integers and floats are logged as decimal text,
 * SQL_C_CHAR/SQL_C_BINARY as the raw bytes sent. */
typedef struct fake_param {
    SQLSMALLINT c_type, sql_type;
    SQLULEN column_size;              /* as bound (ColumnSize) */
    int is_null;
    const unsigned char *data;
    size_t len;
} fake_param;

/* Frees all scripted responses, the log and faults; zeroes counters;
 * revives killed connections; restores defaults. Open handles stay valid. */
void fake_reset(void);

/* Scripted responses, consumed in FIFO order by executes. */
void fake_push_ok(SQLLEN rowcount);
void fake_push_nodata(void);
/* cells: ncols*nrows strings, row-major; NULL = SQL NULL. Copied. */
void fake_push_rows(int ncols, int nrows, const char *const *cells);
/* Same, with explicit byte lengths (may be NULL); -1 means strlen. */
void fake_push_rows_len(int ncols, int nrows, const char *const *cells,
                        const long *lens);
void fake_push_error(SQLRETURN rc, const char *sqlstate, long native,
                     const char *msg);
/* Adds a diagnostic record to the last pushed response; a success response
 * then returns SQL_SUCCESS_WITH_INFO. */
void fake_push_info(const char *sqlstate, long native, const char *msg);

/* Connection behaviour. */
void fake_set_connect_error(const char *sqlstate, long native,
                            const char *msg); /* sqlstate NULL clears */
void fake_set_dbms_name(const char *name);    /* NULL: back to "SQLite" */
const char *fake_last_connstr(void);          /* NULL before any connect */

/* Faults. fn_name is an SQL* name such as "SQLEndTran"; nth = 1 is the next
 * call to it. The call returns rc with that record instead of working. */
void fake_fail_call(const char *fn_name, int nth, SQLRETURN rc,
                    const char *sqlstate, long native, const char *msg);
/* n_calls more SQL* calls of any kind work; then connected DBCs die. */
void fake_kill_connection_after(int n_calls);
void fake_set_dead_commit_lies(int on); /* default on */

/* Counters. */
int fake_open_handles(void);
int fake_call_count(void);             /* all SQL* calls */
int fake_invalid_handle_calls(void);   /* calls with a freed or wrong handle: always a bug */
int fake_calls(const char *fn_name);   /* calls to one SQL* function */
int fake_commits(void);
int fake_rollbacks(void);

/* Execution log: executes plus "<COMMIT>", "<ROLLBACK>", "<COMMIT LOST>".
 * Out-of-range indexes give NULL / -1 / a zeroed fake_param. */
int fake_log_count(void);
const char *fake_log_sql(int i);
SQLRETURN fake_log_rc(int i);          /* what the execute returned */
int fake_log_paramset(int i);          /* rows; 0 for pseudo entries */
int fake_log_autocommit(int i);        /* 1: the statement ran in autocommit */
int fake_log_param_count(int i);       /* highest bound number; gaps log NULL */
fake_param fake_log_param(int i, int row, int param /* 1-based */);
const char *fake_log_param_text(int i, int row, int param); /* "NULL" */
int fake_log_find(const char *substring, int from);

#ifdef __cplusplus
}
#endif

#endif /* FAKE_ODBC_H */

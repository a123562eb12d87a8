/* fake_odbc.c - scripted ODBC for tests; see fake_odbc.h for the contract.
 *
 * Top to bottom: utilities, diagnostics, state, responses and log, handles,
 * the common call prologue, parameter snapshots, execute, result conversion,
 * the SQL* entry points, then the fake_* control and log API.
 * Out of memory aborts: this is a test double, not a library.
 */
#include "fake_odbc.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- utilities ---------------------------------------------------------- */

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fputs("fake_odbc: out of memory\n", stderr);
        abort();
    }
    return q;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = xrealloc(NULL, n * size);
    memset(p, 0, n * size);
    return p;
}

/* Copy with a NUL appended, so byte data can also be read as text. */
static unsigned char *memdup0(const void *p, size_t n)
{
    unsigned char *d = (unsigned char *)xrealloc(NULL, n + 1);
    if (n) memcpy(d, p, n);
    d[n] = 0;
    return d;
}

static char *strdup0(const char *s)
{
    return s ? (char *)memdup0(s, strlen(s)) : NULL;
}

/* Writes a NUL-terminated prefix of src into dst[cap]; returns how many
 * source bytes fit. All ODBC string outputs truncate this way. */
static size_t put_str(const void *src, size_t len, void *dst, SQLLEN cap)
{
    size_t n;
    if (!dst || cap <= 0) return 0;
    n = len < (size_t)cap - 1 ? len : (size_t)cap - 1;
    if (n) memcpy(dst, src, n);
    ((char *)dst)[n] = 0;
    return n;
}

/* ---- diagnostics -------------------------------------------------------- */

typedef struct diag { char state[6]; SQLINTEGER native; char *msg; } diag;
typedef struct diags { diag *r; int n; } diags;

static void diag_add(diags *d, const char *state, long native, const char *msg)
{
    diag *x;
    d->r = (diag *)xrealloc(d->r, (size_t)(d->n + 1) * sizeof *d->r);
    x = &d->r[d->n++];
    snprintf(x->state, sizeof x->state, "%.5s", state ? state : "HY000");
    x->native = (SQLINTEGER)native;
    x->msg = strdup0(msg ? msg : "");
}

static void diag_clear(diags *d)
{
    int i;
    for (i = 0; i < d->n; i++) free(d->r[i].msg);
    free(d->r);
    d->r = NULL;
    d->n = 0;
}

static void diag_copy(diags *dst, const diags *src)
{
    int i;
    for (i = 0; i < src->n; i++)
        diag_add(dst, src->r[i].state, src->r[i].native, src->r[i].msg);
}

/* ---- state -------------------------------------------------------------- */

/* Function ids, in the order of fn_names; they index the call counters. */
enum {
    F_ALLOC, F_FREE, F_SETENV, F_SETCONN, F_GETCONN, F_CONNECT, F_DISCONNECT,
    F_GETINFO, F_PREPARE, F_EXECDIRECT, F_EXECUTE, F_BINDPARAM, F_BINDCOL,
    F_FETCH, F_GETDATA, F_NUMCOLS, F_ROWCOUNT, F_CLOSECURSOR, F_FREESTMT,
    F_ENDTRAN, F_GETDIAG, F_SETSTMT, F_GETSTMT, F_MORERESULTS, F_PARAMDATA,
    F_PUTDATA, F_CANCEL, F_COUNT
};

static const char *const fn_names[F_COUNT] = {
    "SQLAllocHandle", "SQLFreeHandle", "SQLSetEnvAttr", "SQLSetConnectAttr",
    "SQLGetConnectAttr", "SQLDriverConnect", "SQLDisconnect", "SQLGetInfo",
    "SQLPrepare", "SQLExecDirect", "SQLExecute", "SQLBindParameter",
    "SQLBindCol", "SQLFetch", "SQLGetData", "SQLNumResultCols", "SQLRowCount",
    "SQLCloseCursor", "SQLFreeStmt", "SQLEndTran", "SQLGetDiagRec",
    "SQLSetStmtAttr", "SQLGetStmtAttr", "SQLMoreResults", "SQLParamData",
    "SQLPutData", "SQLCancel"
};

enum { R_OK, R_NODATA, R_ROWS, R_ERROR };

typedef struct resp {               /* one scripted execute outcome */
    struct resp *next;
    int kind;
    SQLRETURN rc;                   /* R_ERROR only */
    SQLLEN rowcount;
    int ncols, nrows;
    unsigned char **cells;          /* row-major, NULL = SQL NULL */
    size_t *lens;
    diags d;
} resp;

typedef struct snap {               /* a logged parameter value */
    SQLSMALLINT c_type, sql_type;
    SQLULEN col_size;
    int is_null;
    unsigned char *data;
    size_t len;
} snap;

typedef struct logent {
    char *sql;
    int paramset, nparams;
    int autocommit;                 /* the connection's mode when it ran: 1 on */
    SQLRETURN rc;
    snap *p;                        /* paramset * nparams, row-major */
} logent;

typedef struct fault { int fn, at; SQLRETURN rc; diags d; } fault;

typedef struct binding {            /* SQLBindParameter arguments */
    int set;
    SQLSMALLINT c_type, sql_type;
    SQLULEN col_size;
    SQLPOINTER value;
    SQLLEN buflen, *ind;
} binding;

typedef struct colbind {            /* SQLBindCol arguments; c_type 0 = unbound */
    SQLSMALLINT c_type;
    SQLPOINTER value;
    SQLLEN buflen, *ind;
} colbind;

typedef struct dae {                /* one data-at-execution (row, param) slot */
    SQLULEN row;
    int param;                      /* 0-based */
    SQLPOINTER token;
    unsigned char *buf;
    size_t len;
    int is_null;
} dae;

#define MAX_ATTRS 16

typedef struct hnd {
    SQLSMALLINT type;
    struct hnd *next, *parent;      /* next: registry of live handles */
    diags d;
    int nattr;                      /* integer (or pointer) attributes */
    SQLINTEGER attr_id[MAX_ATTRS];
    SQLULEN attr_val[MAX_ATTRS];
    int connected, dead, dead_seen; /* DBC */
    char *sql;                      /* STMT from here on */
    int prepared, executed;         /* executed: last execute succeeded */
    binding *params;
    int nparams;
    colbind *cols;
    int ncols;
    resp *res;                      /* open result set */
    int cur_row;
    size_t *gd_off;                 /* SQLGetData progress per column */
    unsigned char *gd_done;
    SQLLEN rowcount;
    dae *daes;
    int ndae, dae_cur, dae_active;
} hnd;

/* All zero by default, so fake_reset() can memset it. */
static struct {
    hnd *handles;
    int nhandles;
    resp *q_head, *q_tail;
    logent *log;
    int nlog;
    fault *faults;
    int nfaults;
    int calls[F_COUNT], total;
    int invalid_handles;          /* calls with a handle not (or no longer) allocated */
    int kill_armed, kill_left, dead_commit_truth;
    int commits, rollbacks;
    char *connstr, *dbms_name;
    diags connect_err;
} G;

static int fn_lookup(const char *name)
{
    int i;
    for (i = 0; name && i < F_COUNT; i++)
        if (strcmp(fn_names[i], name) == 0) return i;
    /* A typo in a test would otherwise silently never match. */
    fprintf(stderr, "fake_odbc: unknown function '%s'\n", name ? name : "(null)");
    abort();
}

/* ---- responses and log -------------------------------------------------- */

static resp *push(int kind)
{
    resp *q = (resp *)xcalloc(1, sizeof *q);
    q->kind = kind;
    if (G.q_tail)
        G.q_tail->next = q;
    else
        G.q_head = q;
    return G.q_tail = q;
}

static resp *pop(void)
{
    resp *q = G.q_head;
    if (q && !(G.q_head = q->next)) G.q_tail = NULL;
    return q;
}

static void resp_free(resp *q)
{
    size_t i;
    if (!q) return;
    for (i = 0; i < (size_t)q->ncols * (size_t)q->nrows; i++) free(q->cells[i]);
    free(q->cells);
    free(q->lens);
    diag_clear(&q->d);
    free(q);
}

static logent *log_add(const char *sql, int paramset, int nparams)
{
    logent *e;
    G.log = (logent *)xrealloc(G.log, (size_t)(G.nlog + 1) * sizeof *G.log);
    e = &G.log[G.nlog++];
    e->sql = strdup0(sql ? sql : "");
    e->paramset = paramset;
    e->nparams = nparams;
    e->rc = SQL_SUCCESS;
    e->p = (snap *)xcalloc((size_t)paramset * (size_t)nparams, sizeof *e->p);
    return e;
}

/* ---- handles ------------------------------------------------------------ */

static SQLULEN attr_get(const hnd *h, SQLINTEGER id)
{
    int i;
    for (i = 0; i < h->nattr; i++)
        if (h->attr_id[i] == id) return h->attr_val[i];
    return 0;
}

static int attr_set(hnd *h, SQLINTEGER id, SQLULEN v)
{
    int i;
    for (i = 0; i < h->nattr && h->attr_id[i] != id; i++)
        ;
    if (i == MAX_ATTRS) return 0;
    if (i == h->nattr) h->nattr++;
    h->attr_id[i] = id;
    h->attr_val[i] = v;
    return 1;
}

/* Session attributes of a fresh connection. */
static void dbc_defaults(hnd *h)
{
    attr_set(h, SQL_ATTR_AUTOCOMMIT, SQL_AUTOCOMMIT_ON);
    attr_set(h, SQL_ATTR_TXN_ISOLATION, SQL_TXN_READ_COMMITTED);
}

static hnd *handle_new(SQLSMALLINT type, hnd *parent)
{
    hnd *h = (hnd *)xcalloc(1, sizeof *h);
    h->type = type;
    h->parent = parent;
    h->next = G.handles;
    G.handles = h;
    G.nhandles++;
    if (type == SQL_HANDLE_DBC) dbc_defaults(h);
    if (type == SQL_HANDLE_STMT) {
        attr_set(h, SQL_ATTR_PARAMSET_SIZE, 1);
        h->rowcount = -1;
        h->cur_row = -1;
    }
    return h;
}

/* Looking handles up in the registry (rather than trusting the pointer)
 * turns stale or wrong-type handles into SQL_INVALID_HANDLE, not a crash. */
static hnd *handle_find(SQLHANDLE p, SQLSMALLINT type)
{
    hnd *h;
    for (h = G.handles; h; h = h->next)
        if ((SQLHANDLE)h == p) return h->type == type ? h : NULL;
    return NULL;
}

static hnd *first_child(const hnd *parent)
{
    hnd *h;
    for (h = G.handles; h && h->parent != parent; h = h->next)
        ;
    return h;
}

static void close_cursor(hnd *s)
{
    resp_free(s->res);
    free(s->gd_off);
    free(s->gd_done);
    s->res = NULL;
    s->gd_off = NULL;
    s->gd_done = NULL;
    s->cur_row = -1;
    s->executed = 0;
}

static void dae_clear(hnd *s)
{
    int i;
    for (i = 0; i < s->ndae; i++) free(s->daes[i].buf);
    free(s->daes);
    s->daes = NULL;
    s->ndae = s->dae_active = 0;
}

static void handle_free(hnd *h)
{
    hnd **pp;
    for (pp = &G.handles; *pp != h; pp = &(*pp)->next)
        ;
    *pp = h->next;
    G.nhandles--;
    close_cursor(h);
    dae_clear(h);
    free(h->sql);
    free(h->params);
    free(h->cols);
    diag_clear(&h->d);
    free(h);
}

static SQLRETURN fail(hnd *h, const char *state, const char *msg)
{
    diag_add(&h->d, state, 0, msg);
    return SQL_ERROR;
}

/* ---- common prologue ---------------------------------------------------- */

/* Every SQL* function starts here: count the call, run the kill timer,
 * validate the handle (type 0: none), clear its diagnostics (except for
 * SQLGetDiagRec, which reads them) and fire an armed fault. Returns 1 when
 * the caller should do its work, else 0 with *rc to return. */
static int enter(int fn, SQLSMALLINT type, SQLHANDLE p, hnd **out, SQLRETURN *rc)
{
    hnd *h;
    int i;
    G.calls[fn]++;
    G.total++;
    if (G.kill_armed && G.kill_left-- == 0) {
        G.kill_armed = 0;
        for (h = G.handles; h; h = h->next)
            if (h->type == SQL_HANDLE_DBC && h->connected && !h->dead)
                h->dead = 1, h->dead_seen = 0;
    }
    *out = h = NULL;
    *rc = SQL_SUCCESS;
    if (type) {
        if (!(h = handle_find(p, type))) {
            G.invalid_handles++; /* a freed or wrong handle: a real driver may crash here */
            *rc = SQL_INVALID_HANDLE;
            return 0;
        }
        if (fn != F_GETDIAG) diag_clear(&h->d);
        *out = h;
    }
    for (i = 0; i < G.nfaults; i++) {
        fault *f = &G.faults[i];
        if (f->fn == fn && f->at == G.calls[fn]) {
            *rc = f->rc;
            if (h) diag_copy(&h->d, &f->d);
            diag_clear(&f->d);
            G.faults[i] = G.faults[--G.nfaults];
            return 0;
        }
    }
    return 1;
}

/* Declares h and rc, runs the prologue and returns early if told to. */
#define ENTER(fn, type, handle, h) \
    hnd *h; SQLRETURN rc; \
    if (!enter(fn, type, handle, &h, &rc)) return rc

/* For calls that would reach the server: fail once the connection died.
 * psqlODBC reports the server's 57P01 first, then 08S01. */
static int conn_lost(hnd *h)
{
    hnd *c = h->type == SQL_HANDLE_STMT ? h->parent : h;
    if (!c->dead) return 0;
    if (c->dead_seen)
        diag_add(&h->d, "08S01", 35, "connection lost (fake)");
    else
        diag_add(&h->d, "57P01", 7,
                 "terminating connection due to administrator command (fake)");
    c->dead_seen = 1;
    return 1;
}

/* The unixODBC driver manager refuses to re-execute or re-prepare while a
 * result set is partly fetched; otherwise it is closed implicitly. */
static int cursor_busy(const hnd *s)
{
    return s->res && s->cur_row >= 0 && s->cur_row < s->res->nrows;
}

/* ---- parameter snapshots ------------------------------------------------ */

/* Byte size of a fixed-size C type; 0 for CHAR/BINARY; -1 if unsupported. */
static size_t ctype_size(SQLSMALLINT ct)
{
    switch (ct) {
    case SQL_C_CHAR: case SQL_C_BINARY: return 0;
    case SQL_C_SBIGINT: case SQL_C_UBIGINT: return sizeof(SQLBIGINT);
    case SQL_C_SLONG: case SQL_C_LONG: case SQL_C_ULONG: return sizeof(SQLINTEGER);
    case SQL_C_SSHORT: case SQL_C_SHORT: case SQL_C_USHORT: return sizeof(SQLSMALLINT);
    case SQL_C_STINYINT: case SQL_C_TINYINT: case SQL_C_UTINYINT: case SQL_C_BIT:
        return 1;
    case SQL_C_DOUBLE: return sizeof(double);
    case SQL_C_FLOAT: return sizeof(float);
    default: return (size_t)-1;
    }
}

/* Renders a fixed-size C value as decimal text. memcpy: bound buffers need
 * not be aligned. */
static void fmt_fixed(SQLSMALLINT ct, const void *v, char *buf, size_t n)
{
    SQLBIGINT i64; SQLUBIGINT u64; SQLINTEGER i32; SQLUINTEGER u32;
    SQLSMALLINT i16; SQLUSMALLINT u16; signed char i8; unsigned char u8;
    double d; float f;
    switch (ct) {
    case SQL_C_SBIGINT: memcpy(&i64, v, 8);
        snprintf(buf, n, "%lld", (long long)i64); break;
    case SQL_C_UBIGINT: memcpy(&u64, v, 8);
        snprintf(buf, n, "%llu", (unsigned long long)u64); break;
    case SQL_C_SLONG: case SQL_C_LONG: memcpy(&i32, v, 4);
        snprintf(buf, n, "%ld", (long)i32); break;
    case SQL_C_ULONG: memcpy(&u32, v, 4);
        snprintf(buf, n, "%lu", (unsigned long)u32); break;
    case SQL_C_SSHORT: case SQL_C_SHORT: memcpy(&i16, v, 2);
        snprintf(buf, n, "%d", (int)i16); break;
    case SQL_C_USHORT: memcpy(&u16, v, 2);
        snprintf(buf, n, "%u", (unsigned)u16); break;
    case SQL_C_STINYINT: case SQL_C_TINYINT: memcpy(&i8, v, 1);
        snprintf(buf, n, "%d", (int)i8); break;
    case SQL_C_UTINYINT: case SQL_C_BIT: memcpy(&u8, v, 1);
        snprintf(buf, n, "%u", (unsigned)u8); break;
    default: /* SQL_C_DOUBLE, SQL_C_FLOAT */
        if (ct == SQL_C_FLOAT) {
            memcpy(&f, v, sizeof f);
            d = (double)f;
        } else
            memcpy(&d, v, sizeof d);
        /* Shortest of %.15g/%.17g that round-trips: "0.1", not noise. */
        snprintf(buf, n, "%.15g", d);
        if (strtod(buf, NULL) != d) snprintf(buf, n, "%.17g", d);
    }
}

static int is_dae(const binding *b, SQLULEN row)
{
    return b->ind && (b->ind[row] == SQL_DATA_AT_EXEC
                      || b->ind[row] <= SQL_LEN_DATA_AT_EXEC_OFFSET);
}

/* Address of row `row` of a column-wise bound parameter array. */
static const unsigned char *param_ptr(const binding *b, SQLULEN row)
{
    size_t fixed = ctype_size(b->c_type);
    size_t stride = fixed ? fixed : b->buflen > 0 ? (size_t)b->buflen : 0;
    return b->value ? (const unsigned char *)b->value + row * stride : NULL;
}

/* Snapshot of one bound value, read at execute time as real ODBC does. */
static void snap_param(const binding *b, SQLULEN row, snap *x)
{
    SQLLEN li = b->ind ? b->ind[row] : SQL_NTS;
    const unsigned char *v = param_ptr(b, row);
    char t[64];
    size_t n;
    if (li == SQL_NULL_DATA || !v) {
        x->is_null = 1;
        return;
    }
    if (b->c_type == SQL_C_CHAR)
        n = li >= 0 ? (size_t)li : strlen((const char *)v);
    else if (b->c_type == SQL_C_BINARY)
        n = li >= 0 ? (size_t)li : b->buflen > 0 ? (size_t)b->buflen : 0;
    else {
        fmt_fixed(b->c_type, v, t, sizeof t);
        v = (const unsigned char *)t;
        n = strlen(t);
    }
    x->data = memdup0(v, n);
    x->len = n;
}

/* ---- execute ------------------------------------------------------------ */

static dae *find_dae(hnd *s, SQLULEN row, int param)
{
    int i;
    for (i = 0; i < s->ndae; i++)
        if (s->daes[i].row == row && s->daes[i].param == param) return &s->daes[i];
    return NULL;
}

/* The execute proper: log what was sent, then play the next response. */
static SQLRETURN finish_execute(hnd *s)
{
    SQLULEN ps = attr_get(s, SQL_ATTR_PARAMSET_SIZE), r;
    SQLULEN *processed =
        (SQLULEN *)(uintptr_t)attr_get(s, SQL_ATTR_PARAMS_PROCESSED_PTR);
    SQLUSMALLINT *status =
        (SQLUSMALLINT *)(uintptr_t)attr_get(s, SQL_ATTR_PARAM_STATUS_PTR);
    logent *e = log_add(s->sql, (int)ps, s->nparams);
    SQLRETURN rc = SQL_SUCCESS;
    e->autocommit = s->parent && attr_get(s->parent, SQL_ATTR_AUTOCOMMIT) == SQL_AUTOCOMMIT_ON;
    resp *q;
    int p;

    for (r = 0; r < ps; r++)
        for (p = 0; p < s->nparams; p++) {
            const binding *b = &s->params[p];
            snap *x = &e->p[r * (SQLULEN)s->nparams + (SQLULEN)p];
            dae *d = find_dae(s, r, p);
            x->c_type = b->c_type;
            x->sql_type = b->sql_type;
            x->col_size = b->col_size;
            if (!b->set || (d && d->is_null))
                x->is_null = 1;
            else if (!d)
                snap_param(b, r, x);
            else {                      /* the log takes over the buffer */
                x->data = d->buf ? d->buf : memdup0("", 0);
                x->len = d->len;
                d->buf = NULL;
            }
        }
    dae_clear(s);

    s->rowcount = 0;
    if ((q = pop()) != NULL) {
        diag_copy(&s->d, &q->d);
        switch (q->kind) {
        case R_OK: s->rowcount = q->rowcount; break;
        case R_NODATA: rc = SQL_NO_DATA; break;
        case R_ROWS: s->rowcount = q->nrows; break;
        default: rc = q->rc; s->rowcount = -1; break;
        }
        if (rc == SQL_SUCCESS && q->d.n) rc = SQL_SUCCESS_WITH_INFO;
    }
    if (q && q->kind == R_ROWS) {
        s->res = q;
        s->gd_off = (size_t *)xcalloc((size_t)q->ncols, sizeof *s->gd_off);
        s->gd_done = (unsigned char *)xcalloc((size_t)q->ncols, 1);
    } else
        resp_free(q);
    s->executed = SQL_SUCCEEDED(rc);
    e->rc = rc;

    if (processed) *processed = ps;
    for (r = 0; status && r < ps; r++)
        status[r] = rc == SQL_SUCCESS_WITH_INFO ? SQL_PARAM_SUCCESS_WITH_INFO
                  : rc == SQL_SUCCESS || rc == SQL_NO_DATA ? SQL_PARAM_SUCCESS
                  : SQL_PARAM_ERROR;
    return rc;
}

/* Starts an execute: pauses with SQL_NEED_DATA while any (row, param) is
 * data-at-execution, else executes at once. */
static SQLRETURN start_execute(hnd *s)
{
    SQLULEN ps = attr_get(s, SQL_ATTR_PARAMSET_SIZE), r;
    int p;
    close_cursor(s);
    dae_clear(s);
    for (r = 0; r < ps; r++)
        for (p = 0; p < s->nparams; p++)
            if (s->params[p].set && is_dae(&s->params[p], r)) {
                const unsigned char *v = param_ptr(&s->params[p], r);
                dae *d;
                s->daes = (dae *)xrealloc(s->daes, (size_t)(s->ndae + 1) * sizeof *d);
                d = &s->daes[s->ndae++];
                memset(d, 0, sizeof *d);
                d->row = r;
                d->param = p;
                d->token = (SQLPOINTER)(uintptr_t)v;   /* the bound pointer */
            }
    if (!s->ndae) return finish_execute(s);
    s->dae_active = 1;
    s->dae_cur = -1;
    return SQL_NEED_DATA;
}

/* Checks shared by SQLPrepare, SQLExecDirect and SQLExecute. */
static int exec_ok(hnd *s, SQLRETURN *rc)
{
    if (s->dae_active)
        *rc = fail(s, "HY010", "function sequence error (need data)");
    else if (cursor_busy(s))
        *rc = fail(s, "24000", "invalid cursor state");
    else if (conn_lost(s))
        *rc = SQL_ERROR;
    else
        return 1;
    return 0;
}

static int set_sql(hnd *s, SQLCHAR *text, SQLINTEGER len, SQLRETURN *rc)
{
    if (!text)
        *rc = fail(s, "HY009", "invalid use of null pointer");
    else if (len < 0 && len != SQL_NTS)
        *rc = fail(s, "HY090", "invalid string or buffer length");
    else {
        close_cursor(s);
        free(s->sql);
        s->sql = (char *)memdup0(text, len == SQL_NTS ? strlen((char *)text)
                                                      : (size_t)len);
        return 1;
    }
    return 0;
}

/* ---- result conversion -------------------------------------------------- */

static int getdata_type_ok(SQLSMALLINT ct)
{
    return ct == SQL_C_CHAR || ct == SQL_C_BINARY || ct == SQL_C_SBIGINT
        || ct == SQL_C_SLONG || ct == SQL_C_LONG || ct == SQL_C_SSHORT
        || ct == SQL_C_SHORT || ct == SQL_C_DOUBLE;
}

static SQLRETURN get_number(hnd *s, const char *cell, size_t len, SQLSMALLINT ct,
                            SQLPOINTER tv, SQLLEN *ind)
{
    int is32 = ct == SQL_C_SLONG || ct == SQL_C_LONG;
    int is16 = ct == SQL_C_SSHORT || ct == SQL_C_SHORT;
    SQLBIGINT i64;
    SQLINTEGER i32;
    SQLSMALLINT i16;
    long long v = 0;
    double d = 0;
    char *end;
    errno = 0;
    if (ct == SQL_C_DOUBLE)
        d = strtod(cell, &end);
    else
        v = strtoll(cell, &end, 10);
    if (end == cell || end != cell + len)
        return fail(s, "22018", "invalid character value for cast");
    if (errno == ERANGE || (is32 && (v < INT_MIN || v > INT_MAX))
        || (is16 && (v < SHRT_MIN || v > SHRT_MAX)))
        return fail(s, "22003", "numeric value out of range");
    if (!tv) return fail(s, "HY009", "invalid use of null pointer");
    i64 = (SQLBIGINT)v;
    i32 = (SQLINTEGER)v;
    i16 = (SQLSMALLINT)v;
    memcpy(tv, ct == SQL_C_DOUBLE ? (void *)&d : is32 ? (void *)&i32
               : is16 ? (void *)&i16 : (void *)&i64, ctype_size(ct));
    if (ind) *ind = (SQLLEN)ctype_size(ct);
    return SQL_SUCCESS;
}

/* Converts column c (0-based) of the current row, continuing from *off for
 * CHAR/BINARY so that repeated SQLGetData calls return successive chunks. */
static SQLRETURN get_cell(hnd *s, int c, SQLSMALLINT ct, SQLPOINTER tv, SQLLEN bl,
                          SQLLEN *ind, size_t *off)
{
    size_t i = (size_t)s->cur_row * (size_t)s->res->ncols + (size_t)c;
    const unsigned char *cell = s->res->cells[i];
    size_t rem, n;
    if (!cell) {
        if (!ind) return fail(s, "22002", "indicator variable required");
        *ind = SQL_NULL_DATA;
        return SQL_SUCCESS;
    }
    if (ct != SQL_C_CHAR && ct != SQL_C_BINARY)
        return get_number(s, (const char *)cell, s->res->lens[i], ct, tv, ind);
    rem = s->res->lens[i] - *off;
    if (ct == SQL_C_CHAR)
        n = put_str(cell + *off, rem, tv, bl);
    else if ((n = tv && bl > 0 ? (rem < (size_t)bl ? rem : (size_t)bl) : 0) != 0)
        memcpy(tv, cell + *off, n);
    if (ind) *ind = (SQLLEN)rem;
    *off += n;
    if (n == rem) return SQL_SUCCESS;
    diag_add(&s->d, "01004", 0, "string data, right truncated");
    return SQL_SUCCESS_WITH_INFO;
}

/* ---- SQL* entry points: handles and connections ------------------------- */

SQLRETURN SQL_API SQLAllocHandle(SQLSMALLINT HandleType, SQLHANDLE InputHandle,
                                 SQLHANDLE *OutputHandle)
{
    SQLSMALLINT in_type = HandleType == SQL_HANDLE_DBC ? SQL_HANDLE_ENV
                        : HandleType == SQL_HANDLE_STMT ? SQL_HANDLE_DBC : 0;
    if (OutputHandle) *OutputHandle = SQL_NULL_HANDLE;
    ENTER(F_ALLOC, in_type, InputHandle, in);
    if (HandleType != SQL_HANDLE_ENV && !in)
        return SQL_ERROR;               /* descriptors are not supported */
    if (!OutputHandle)
        return in ? fail(in, "HY009", "invalid use of null pointer") : SQL_ERROR;
    if (HandleType == SQL_HANDLE_STMT && !in->connected)
        return fail(in, "08003", "connection not open");
    if (HandleType == SQL_HANDLE_STMT && conn_lost(in)) return SQL_ERROR;
    *OutputHandle = (SQLHANDLE)handle_new(HandleType, in);
    return SQL_SUCCESS;
}

SQLRETURN SQL_API SQLFreeHandle(SQLSMALLINT HandleType, SQLHANDLE Handle)
{
    ENTER(F_FREE, HandleType, Handle, h);
    /* As the driver manager: children first, disconnect before freeing. */
    if (first_child(h) || (HandleType == SQL_HANDLE_DBC && h->connected))
        return fail(h, "HY010", "function sequence error");
    handle_free(h);
    return SQL_SUCCESS;
}

SQLRETURN SQL_API SQLSetEnvAttr(SQLHENV EnvironmentHandle, SQLINTEGER Attribute,
                                SQLPOINTER Value, SQLINTEGER StringLength)
{
    ENTER(F_SETENV, SQL_HANDLE_ENV, EnvironmentHandle, h);
    (void)StringLength;
    if (!attr_set(h, Attribute, (SQLULEN)(uintptr_t)Value))
        return fail(h, "HY000", "fake: too many attributes");
    return SQL_SUCCESS;
}

SQLRETURN SQL_API SQLSetConnectAttr(SQLHDBC ConnectionHandle, SQLINTEGER Attribute,
                                    SQLPOINTER Value, SQLINTEGER StringLength)
{
    ENTER(F_SETCONN, SQL_HANDLE_DBC, ConnectionHandle, h);
    (void)StringLength;
    if (Attribute == SQL_ATTR_CONNECTION_DEAD)
        return fail(h, "HY092", "attribute is read-only");
    if (conn_lost(h)) return SQL_ERROR;
    if (!attr_set(h, Attribute, (SQLULEN)(uintptr_t)Value))
        return fail(h, "HY000", "fake: too many attributes");
    return SQL_SUCCESS;
}

SQLRETURN SQL_API SQLGetConnectAttr(SQLHDBC ConnectionHandle, SQLINTEGER Attribute,
                                    SQLPOINTER Value, SQLINTEGER BufferLength,
                                    SQLINTEGER *StringLength)
{
    ENTER(F_GETCONN, SQL_HANDLE_DBC, ConnectionHandle, h);
    (void)BufferLength;
    if (!Value) return fail(h, "HY009", "invalid use of null pointer");
    /* A 32-bit write, as psqlODBC does: callers zero an SQLULEN target. */
    *(SQLUINTEGER *)Value = Attribute == SQL_ATTR_CONNECTION_DEAD
        ? (SQLUINTEGER)(h->dead ? SQL_CD_TRUE : SQL_CD_FALSE)
        : (SQLUINTEGER)attr_get(h, Attribute);
    if (StringLength) *StringLength = (SQLINTEGER)sizeof(SQLUINTEGER);
    return SQL_SUCCESS;
}

SQLRETURN SQL_API SQLDriverConnect(SQLHDBC hdbc, SQLHWND hwnd, SQLCHAR *szConnStrIn,
                                   SQLSMALLINT cbConnStrIn, SQLCHAR *szConnStrOut,
                                   SQLSMALLINT cbConnStrOutMax,
                                   SQLSMALLINT *pcbConnStrOut,
                                   SQLUSMALLINT fDriverCompletion)
{
    size_t len;
    ENTER(F_CONNECT, SQL_HANDLE_DBC, hdbc, h);
    (void)hwnd;
    (void)fDriverCompletion;
    if (h->connected) return fail(h, "08002", "connection name in use");
    if (!szConnStrIn) return fail(h, "HY009", "invalid use of null pointer");
    if (cbConnStrIn < 0 && cbConnStrIn != SQL_NTS)
        return fail(h, "HY090", "invalid string or buffer length");
    len = cbConnStrIn == SQL_NTS ? strlen((char *)szConnStrIn) : (size_t)cbConnStrIn;
    free(G.connstr);
    G.connstr = (char *)memdup0(szConnStrIn, len);
    if (G.connect_err.n) {
        diag_copy(&h->d, &G.connect_err);
        return SQL_ERROR;
    }
    h->connected = 1;                   /* a fresh session: alive, defaults */
    h->dead = h->dead_seen = 0;
    dbc_defaults(h);
    if (pcbConnStrOut) *pcbConnStrOut = (SQLSMALLINT)len;
    if (!szConnStrOut
        || put_str(szConnStrIn, len, szConnStrOut, cbConnStrOutMax) == len)
        return SQL_SUCCESS;
    diag_add(&h->d, "01004", 0, "string data, right truncated");
    return SQL_SUCCESS_WITH_INFO;
}

SQLRETURN SQL_API SQLDisconnect(SQLHDBC ConnectionHandle)
{
    hnd *c;
    ENTER(F_DISCONNECT, SQL_HANDLE_DBC, ConnectionHandle, h);
    if (!h->connected) return fail(h, "08003", "connection not open");
    while ((c = first_child(h)) != NULL)    /* ODBC frees the statements */
        handle_free(c);
    h->connected = h->dead = h->dead_seen = 0;
    return SQL_SUCCESS;
}

SQLRETURN SQL_API SQLGetInfo(SQLHDBC ConnectionHandle, SQLUSMALLINT InfoType,
                             SQLPOINTER InfoValue, SQLSMALLINT BufferLength,
                             SQLSMALLINT *StringLength)
{
    const char *s;
    ENTER(F_GETINFO, SQL_HANDLE_DBC, ConnectionHandle, h);
    if (!h->connected) return fail(h, "08003", "connection not open");
    if (conn_lost(h)) return SQL_ERROR;
    switch (InfoType) {
    case SQL_DBMS_NAME: s = G.dbms_name ? G.dbms_name : "SQLite"; break;
    case SQL_DBMS_VER: s = "0.0-fake"; break;
    case SQL_DRIVER_NAME: s = "fake_odbc"; break;
    default: return fail(h, "HY096", "information type out of range");
    }
    if (StringLength) *StringLength = (SQLSMALLINT)strlen(s);
    if (!InfoValue || put_str(s, strlen(s), InfoValue, BufferLength) == strlen(s))
        return SQL_SUCCESS;
    diag_add(&h->d, "01004", 0, "string data, right truncated");
    return SQL_SUCCESS_WITH_INFO;
}

SQLRETURN SQL_API SQLEndTran(SQLSMALLINT HandleType, SQLHANDLE Handle,
                             SQLSMALLINT CompletionType)
{
    ENTER(F_ENDTRAN, HandleType, Handle, h);
    if (HandleType != SQL_HANDLE_DBC)
        return fail(h, "HY000", "fake: SQLEndTran supports SQL_HANDLE_DBC only");
    if (CompletionType != SQL_COMMIT && CompletionType != SQL_ROLLBACK)
        return fail(h, "HY012", "invalid transaction operation code");
    if (!h->connected) return fail(h, "08003", "connection not open");
    if (h->dead && CompletionType == SQL_COMMIT && !G.dead_commit_truth) {
        log_add("<COMMIT LOST>", 0, 0); /* psqlODBC can report this as success */
        return SQL_SUCCESS;
    }
    if (conn_lost(h)) return SQL_ERROR;
    if (CompletionType == SQL_COMMIT)
        G.commits++;
    else
        G.rollbacks++;
    log_add(CompletionType == SQL_COMMIT ? "<COMMIT>" : "<ROLLBACK>", 0, 0);
    return SQL_SUCCESS;
}

SQLRETURN SQL_API SQLGetDiagRec(SQLSMALLINT HandleType, SQLHANDLE Handle,
                                SQLSMALLINT RecNumber, SQLCHAR *Sqlstate,
                                SQLINTEGER *NativeError, SQLCHAR *MessageText,
                                SQLSMALLINT BufferLength, SQLSMALLINT *TextLength)
{
    const diag *d;
    ENTER(F_GETDIAG, HandleType, Handle, h);
    if (RecNumber < 1 || BufferLength < 0) return SQL_ERROR;
    if (RecNumber > h->d.n) return SQL_NO_DATA;
    d = &h->d.r[RecNumber - 1];
    if (Sqlstate) memcpy(Sqlstate, d->state, sizeof d->state);
    if (NativeError) *NativeError = d->native;
    if (TextLength) *TextLength = (SQLSMALLINT)strlen(d->msg);
    if (MessageText && put_str(d->msg, strlen(d->msg), MessageText, BufferLength)
                       < strlen(d->msg))
        return SQL_SUCCESS_WITH_INFO;
    return SQL_SUCCESS;
}

/* ---- SQL* entry points: statements -------------------------------------- */

SQLRETURN SQL_API SQLSetStmtAttr(SQLHSTMT StatementHandle, SQLINTEGER Attribute,
                                 SQLPOINTER Value, SQLINTEGER StringLength)
{
    SQLULEN v = (SQLULEN)(uintptr_t)Value;
    ENTER(F_SETSTMT, SQL_HANDLE_STMT, StatementHandle, s);
    (void)StringLength;
    if (Attribute == SQL_ATTR_PARAMSET_SIZE && v == 0)
        return fail(s, "HY024", "invalid attribute value");
    if (!attr_set(s, Attribute, v))
        return fail(s, "HY000", "fake: too many attributes");
    return SQL_SUCCESS;
}

SQLRETURN SQL_API SQLGetStmtAttr(SQLHSTMT StatementHandle, SQLINTEGER Attribute,
                                 SQLPOINTER Value, SQLINTEGER BufferLength,
                                 SQLINTEGER *StringLength)
{
    SQLULEN v;
    ENTER(F_GETSTMT, SQL_HANDLE_STMT, StatementHandle, s);
    (void)BufferLength;
    if (!Value) return fail(s, "HY009", "invalid use of null pointer");
    v = attr_get(s, Attribute);
    memcpy(Value, &v, sizeof v);
    if (StringLength) *StringLength = (SQLINTEGER)sizeof v;
    return SQL_SUCCESS;
}

SQLRETURN SQL_API SQLPrepare(SQLHSTMT StatementHandle, SQLCHAR *StatementText,
                             SQLINTEGER TextLength)
{
    ENTER(F_PREPARE, SQL_HANDLE_STMT, StatementHandle, s);
    if (!exec_ok(s, &rc) || !set_sql(s, StatementText, TextLength, &rc)) return rc;
    s->prepared = 1;
    return SQL_SUCCESS;
}

SQLRETURN SQL_API SQLExecDirect(SQLHSTMT StatementHandle, SQLCHAR *StatementText,
                                SQLINTEGER TextLength)
{
    ENTER(F_EXECDIRECT, SQL_HANDLE_STMT, StatementHandle, s);
    if (!exec_ok(s, &rc) || !set_sql(s, StatementText, TextLength, &rc)) return rc;
    s->prepared = 0;
    return start_execute(s);
}

SQLRETURN SQL_API SQLExecute(SQLHSTMT StatementHandle)
{
    ENTER(F_EXECUTE, SQL_HANDLE_STMT, StatementHandle, s);
    if (!s->prepared)
        return fail(s, "HY010", "function sequence error (not prepared)");
    return exec_ok(s, &rc) ? start_execute(s) : rc;
}

SQLRETURN SQL_API SQLBindParameter(SQLHSTMT hstmt, SQLUSMALLINT ipar,
                                   SQLSMALLINT fParamType, SQLSMALLINT fCType,
                                   SQLSMALLINT fSqlType, SQLULEN cbColDef,
                                   SQLSMALLINT ibScale, SQLPOINTER rgbValue,
                                   SQLLEN cbValueMax, SQLLEN *pcbValue)
{
    binding *b;
    ENTER(F_BINDPARAM, SQL_HANDLE_STMT, hstmt, s);
    (void)ibScale;
    if (ipar == 0) return fail(s, "07009", "invalid descriptor index");
    if (fParamType != SQL_PARAM_INPUT)
        return fail(s, "HY105", "fake: only SQL_PARAM_INPUT is supported");
    if (ctype_size(fCType) == (size_t)-1)
        return fail(s, "HY003", "invalid application buffer type");
    if (ipar > s->nparams) {
        s->params = (binding *)xrealloc(s->params, (size_t)ipar * sizeof *b);
        memset(s->params + s->nparams, 0, (size_t)(ipar - s->nparams) * sizeof *b);
        s->nparams = ipar;
    }
    b = &s->params[ipar - 1];
    b->set = 1;
    b->c_type = fCType;
    b->sql_type = fSqlType;
    b->col_size = cbColDef;
    b->value = rgbValue;
    b->buflen = cbValueMax;
    b->ind = pcbValue;
    return SQL_SUCCESS;
}

SQLRETURN SQL_API SQLParamData(SQLHSTMT StatementHandle, SQLPOINTER *Value)
{
    ENTER(F_PARAMDATA, SQL_HANDLE_STMT, StatementHandle, s);
    if (!s->dae_active) return fail(s, "HY010", "function sequence error");
    if (conn_lost(s)) {
        dae_clear(s);
        return SQL_ERROR;
    }
    if (++s->dae_cur == s->ndae) return finish_execute(s);
    if (Value) *Value = s->daes[s->dae_cur].token;
    return SQL_NEED_DATA;
}

SQLRETURN SQL_API SQLPutData(SQLHSTMT StatementHandle, SQLPOINTER Data,
                             SQLLEN StrLen_or_Ind)
{
    dae *d;
    char t[64];
    size_t n;
    ENTER(F_PUTDATA, SQL_HANDLE_STMT, StatementHandle, s);
    if (!s->dae_active || s->dae_cur < 0)
        return fail(s, "HY010", "function sequence error");
    if (conn_lost(s)) {
        dae_clear(s);
        return SQL_ERROR;
    }
    d = &s->daes[s->dae_cur];
    if (StrLen_or_Ind == SQL_NULL_DATA) {
        d->is_null = 1;
        return SQL_SUCCESS;
    }
    if (!Data) return fail(s, "HY009", "invalid use of null pointer");
    if (ctype_size(s->params[d->param].c_type) != 0) {  /* fixed size: whole */
        fmt_fixed(s->params[d->param].c_type, Data, t, sizeof t);
        free(d->buf);
        d->len = strlen(t);
        d->buf = memdup0(t, d->len);
        return SQL_SUCCESS;
    }
    if (StrLen_or_Ind < 0 && StrLen_or_Ind != SQL_NTS)
        return fail(s, "HY090", "invalid string or buffer length");
    n = StrLen_or_Ind == SQL_NTS ? strlen((const char *)Data) : (size_t)StrLen_or_Ind;
    d->buf = (unsigned char *)xrealloc(d->buf, d->len + n + 1);
    if (n) memcpy(d->buf + d->len, Data, n);
    d->len += n;
    d->buf[d->len] = 0;
    return SQL_SUCCESS;
}

SQLRETURN SQL_API SQLCancel(SQLHSTMT StatementHandle)
{
    ENTER(F_CANCEL, SQL_HANDLE_STMT, StatementHandle, s);
    dae_clear(s);                       /* abandons a pending need-data */
    return SQL_SUCCESS;
}

SQLRETURN SQL_API SQLNumResultCols(SQLHSTMT StatementHandle, SQLSMALLINT *ColumnCount)
{
    ENTER(F_NUMCOLS, SQL_HANDLE_STMT, StatementHandle, s);
    if (!ColumnCount) return fail(s, "HY009", "invalid use of null pointer");
    *ColumnCount = (SQLSMALLINT)(s->res ? s->res->ncols : 0);
    return SQL_SUCCESS;
}

SQLRETURN SQL_API SQLRowCount(SQLHSTMT StatementHandle, SQLLEN *RowCount)
{
    ENTER(F_ROWCOUNT, SQL_HANDLE_STMT, StatementHandle, s);
    if (!RowCount) return fail(s, "HY009", "invalid use of null pointer");
    *RowCount = s->rowcount;
    return SQL_SUCCESS;
}

SQLRETURN SQL_API SQLBindCol(SQLHSTMT StatementHandle, SQLUSMALLINT ColumnNumber,
                             SQLSMALLINT TargetType, SQLPOINTER TargetValue,
                             SQLLEN BufferLength, SQLLEN *StrLen_or_Ind)
{
    colbind *cb;
    ENTER(F_BINDCOL, SQL_HANDLE_STMT, StatementHandle, s);
    if (ColumnNumber == 0)
        return fail(s, "07009", "invalid descriptor index (no bookmarks)");
    if (TargetValue && !getdata_type_ok(TargetType))
        return fail(s, "HY003", "invalid application buffer type");
    if (ColumnNumber > s->ncols) {
        s->cols = (colbind *)xrealloc(s->cols, (size_t)ColumnNumber * sizeof *cb);
        memset(s->cols + s->ncols, 0, (size_t)(ColumnNumber - s->ncols) * sizeof *cb);
        s->ncols = ColumnNumber;
    }
    cb = &s->cols[ColumnNumber - 1];
    cb->c_type = TargetValue ? TargetType : 0;      /* a NULL pointer unbinds */
    cb->value = TargetValue;
    cb->buflen = BufferLength;
    cb->ind = StrLen_or_Ind;
    return SQL_SUCCESS;
}

SQLRETURN SQL_API SQLFetch(SQLHSTMT StatementHandle)
{
    SQLRETURN r1;
    int c;
    ENTER(F_FETCH, SQL_HANDLE_STMT, StatementHandle, s);
    if (s->dae_active) return fail(s, "HY010", "function sequence error");
    if (!s->res) return fail(s, "24000", "invalid cursor state (no result set)");
    if (conn_lost(s)) return SQL_ERROR;
    if (s->cur_row < s->res->nrows) s->cur_row++;
    if (s->cur_row == s->res->nrows) return SQL_NO_DATA;
    memset(s->gd_off, 0, (size_t)s->res->ncols * sizeof *s->gd_off);
    memset(s->gd_done, 0, (size_t)s->res->ncols);
    for (c = 0; c < s->ncols && c < s->res->ncols; c++) {
        colbind *cb = &s->cols[c];
        size_t off = 0;
        if (!cb->c_type) continue;
        r1 = get_cell(s, c, cb->c_type, cb->value, cb->buflen, cb->ind, &off);
        if (r1 == SQL_ERROR || (r1 == SQL_SUCCESS_WITH_INFO && rc == SQL_SUCCESS))
            rc = r1;
    }
    return rc;
}

SQLRETURN SQL_API SQLGetData(SQLHSTMT StatementHandle, SQLUSMALLINT ColumnNumber,
                             SQLSMALLINT TargetType, SQLPOINTER TargetValue,
                             SQLLEN BufferLength, SQLLEN *StrLen_or_Ind)
{
    int c = ColumnNumber - 1;
    ENTER(F_GETDATA, SQL_HANDLE_STMT, StatementHandle, s);
    if (!s->res || s->cur_row < 0 || s->cur_row >= s->res->nrows)
        return fail(s, "24000", "invalid cursor state (no current row)");
    if (c < 0 || c >= s->res->ncols)
        return fail(s, "07009", "invalid descriptor index");
    if (!getdata_type_ok(TargetType))
        return fail(s, "HY003", "invalid application buffer type");
    if (s->gd_done[c])                  /* already returned in full */
        return SQL_NO_DATA;
    rc = get_cell(s, c, TargetType, TargetValue, BufferLength, StrLen_or_Ind,
                  &s->gd_off[c]);
    s->gd_done[c] = rc == SQL_SUCCESS;
    return rc;
}

SQLRETURN SQL_API SQLCloseCursor(SQLHSTMT StatementHandle)
{
    ENTER(F_CLOSECURSOR, SQL_HANDLE_STMT, StatementHandle, s);
    if (!s->executed)
        return fail(s, "24000", "invalid cursor state (no cursor open)");
    close_cursor(s);
    return SQL_SUCCESS;
}

SQLRETURN SQL_API SQLMoreResults(SQLHSTMT hstmt)
{
    ENTER(F_MORERESULTS, SQL_HANDLE_STMT, hstmt, s);
    if (s->dae_active) return fail(s, "HY010", "function sequence error");
    close_cursor(s);                    /* scripts have one result each */
    return SQL_NO_DATA;
}

SQLRETURN SQL_API SQLFreeStmt(SQLHSTMT StatementHandle, SQLUSMALLINT Option)
{
    ENTER(F_FREESTMT, SQL_HANDLE_STMT, StatementHandle, s);
    switch (Option) {
    case SQL_CLOSE: close_cursor(s); break;
    case SQL_DROP: handle_free(s); break;
    case SQL_UNBIND: free(s->cols); s->cols = NULL; s->ncols = 0; break;
    case SQL_RESET_PARAMS:              /* a pending need-data refers to them */
        dae_clear(s);
        free(s->params); s->params = NULL; s->nparams = 0; break;
    default: return fail(s, "HY092", "invalid option");
    }
    return SQL_SUCCESS;
}

/* ---- fake_* control API ------------------------------------------------- */

void fake_reset(void)
{
    hnd *handles = G.handles, *h;
    int nhandles = G.nhandles, i, j;
    resp *q;
    while ((q = pop()) != NULL) resp_free(q);
    for (i = 0; i < G.nlog; i++) {
        for (j = 0; j < G.log[i].paramset * G.log[i].nparams; j++)
            free(G.log[i].p[j].data);
        free(G.log[i].p);
        free(G.log[i].sql);
    }
    free(G.log);
    for (i = 0; i < G.nfaults; i++) diag_clear(&G.faults[i].d);
    free(G.faults);
    free(G.connstr);
    free(G.dbms_name);
    diag_clear(&G.connect_err);
    memset(&G, 0, sizeof G);
    G.handles = handles;                /* handles belong to the caller */
    G.nhandles = nhandles;
    for (h = handles; h; h = h->next) h->dead = h->dead_seen = 0;
}

void fake_push_ok(SQLLEN rowcount) { push(R_OK)->rowcount = rowcount; }
void fake_push_nodata(void) { push(R_NODATA); }

void fake_push_rows_len(int ncols, int nrows, const char *const *cells,
                        const long *lens)
{
    resp *q = push(R_ROWS);
    size_t i, n;
    q->ncols = ncols > 0 ? ncols : 0;
    q->nrows = nrows > 0 ? nrows : 0;
    n = (size_t)q->ncols * (size_t)q->nrows;
    q->cells = (unsigned char **)xcalloc(n, sizeof *q->cells);
    q->lens = (size_t *)xcalloc(n, sizeof *q->lens);
    for (i = 0; cells && i < n; i++)
        if (cells[i]) {
            q->lens[i] = lens && lens[i] >= 0 ? (size_t)lens[i] : strlen(cells[i]);
            q->cells[i] = memdup0(cells[i], q->lens[i]);
        }
}

void fake_push_rows(int ncols, int nrows, const char *const *cells)
{
    fake_push_rows_len(ncols, nrows, cells, NULL);
}

void fake_push_error(SQLRETURN rc, const char *sqlstate, long native, const char *msg)
{
    resp *q = push(R_ERROR);
    q->rc = rc;
    diag_add(&q->d, sqlstate, native, msg);
}

void fake_push_info(const char *sqlstate, long native, const char *msg)
{
    if (!G.q_tail) fake_push_ok(0);
    diag_add(&G.q_tail->d, sqlstate, native, msg);
}

void fake_set_connect_error(const char *sqlstate, long native, const char *msg)
{
    diag_clear(&G.connect_err);
    if (sqlstate) diag_add(&G.connect_err, sqlstate, native, msg);
}

void fake_set_dbms_name(const char *name)
{
    free(G.dbms_name);
    G.dbms_name = strdup0(name);
}

const char *fake_last_connstr(void) { return G.connstr; }

void fake_fail_call(const char *fn_name, int nth, SQLRETURN rc, const char *sqlstate,
                    long native, const char *msg)
{
    int fn = fn_lookup(fn_name);
    fault *f;
    if (nth < 1) {
        fputs("fake_odbc: fake_fail_call needs nth >= 1\n", stderr);
        abort();
    }
    G.faults = (fault *)xrealloc(G.faults, (size_t)(G.nfaults + 1) * sizeof *f);
    f = &G.faults[G.nfaults++];
    memset(f, 0, sizeof *f);
    f->fn = fn;
    f->at = G.calls[fn] + nth;
    f->rc = rc;
    diag_add(&f->d, sqlstate, native, msg);
}

void fake_kill_connection_after(int n_calls)
{
    G.kill_armed = 1;
    G.kill_left = n_calls > 0 ? n_calls : 0;
}

void fake_set_dead_commit_lies(int on) { G.dead_commit_truth = !on; }
int fake_open_handles(void) { return G.nhandles; }
int fake_call_count(void) { return G.total; }
int fake_invalid_handle_calls(void) { return G.invalid_handles; }
int fake_calls(const char *fn_name) { return G.calls[fn_lookup(fn_name)]; }
int fake_commits(void) { return G.commits; }
int fake_rollbacks(void) { return G.rollbacks; }

/* ---- log readers -------------------------------------------------------- */

static const logent *log_at(int i)
{
    return i >= 0 && i < G.nlog ? &G.log[i] : NULL;
}

static const snap *snap_at(int i, int row, int param)
{
    const logent *e = log_at(i);
    if (!e || row < 0 || row >= e->paramset || param < 1 || param > e->nparams)
        return NULL;
    return &e->p[row * e->nparams + param - 1];
}

int fake_log_count(void) { return G.nlog; }
const char *fake_log_sql(int i) { return log_at(i) ? log_at(i)->sql : NULL; }
SQLRETURN fake_log_rc(int i) { return log_at(i) ? log_at(i)->rc : SQL_ERROR; }
int fake_log_paramset(int i) { return log_at(i) ? log_at(i)->paramset : -1; }
int fake_log_autocommit(int i) { return log_at(i) ? log_at(i)->autocommit : -1; }
int fake_log_param_count(int i) { return log_at(i) ? log_at(i)->nparams : -1; }

fake_param fake_log_param(int i, int row, int param)
{
    const snap *x = snap_at(i, row, param);
    fake_param r;
    memset(&r, 0, sizeof r);
    if (x) {
        r.c_type = x->c_type;
        r.sql_type = x->sql_type;
        r.column_size = x->col_size;
        r.is_null = x->is_null;
        r.data = x->data;
        r.len = x->len;
    }
    return r;
}

const char *fake_log_param_text(int i, int row, int param)
{
    const snap *x = snap_at(i, row, param);
    return !x ? NULL : x->is_null ? "NULL" : (const char *)x->data;
}

int fake_log_find(const char *substring, int from)
{
    int i;
    for (i = from > 0 ? from : 0; substring && i < G.nlog; i++)
        if (strstr(G.log[i].sql, substring)) return i;
    return -1;
}

/* fuzz_core.c - libFuzzer target for the pure and input-validation code of
 * obx.h and ibx.h. Every input drives every check below; each one reads the
 * bytes its own way (split on NUL into strings, or as a stream of numbers).
 * A broken invariant prints what broke and aborts.
 *
 *   identifiers   obx/ibx_identifier_check against a reference of the rule
 *                 (1..63 chars of [A-Za-z0-9_], not starting with a digit)
 *   uuids         obx/ibx_uuid_is_valid against a reference, on 36- and
 *                 37-byte texts; obx_uuid_v7 against a model of its state
 *                 (format, version 7, variant 10xx, strictly ascending even
 *                 when the clock goes back, the counter and the random bits
 *                 where RFC 9562 method 1 puts them); ibx gives the same text
 *   backoff       default: exactly min(2^attempt s, 60 s), never negative;
 *                 jitter: never negative for any finite policy; for a sane
 *                 policy (0 <= jitter_min <= jitter_max) within
 *                 [min(base,max) * jitter_min - 1, max * jitter_max + 1]
 *                 (with a 1e-9 relative allowance for double rounding; the
 *                 header's saturation to INT64_MAX above 9e18 ms may exceed
 *                 the upper bound and is accepted there), and
 *                 exactly min(max, base * 2^(attempt-1)) when the jitter is
 *                 1.0 (delays below 2^53). Jitter factors are any double,
 *                 NaN and infinities included: "never negative" must hold.
 *   selector      obx/ibx_selector_* against a model under random operations;
 *                 next() is in [-1, count-1], and -1 iff count <= 0
 *   list literals obx__list_add/_add_null/_end (and the ibx copies) parse back
 *                 to exactly the input strings: JSON arrays (SQLite) and
 *                 PostgreSQL array literals
 *   join payload  obx__json_string writes an object, obx__json_get reads each
 *                 value back exactly; a buffer one byte short gives -1; on
 *                 arbitrary text (the handler reads whatever a "join.wait"
 *                 message carries) it never reads past the end (guard page)
 *                 and decodes a string exactly as an RFC 8259 reference does
 *   sha-256       ibx_sha256 one-shot vs chunked (the static ibx__sha256_*),
 *                 known answers, HMAC: long key == sha256(key), short key ==
 *                 key zero-padded to 64 bytes, and a reference HMAC built from
 *                 ibx_sha256 alone
 *   utf-8         obx__utf8_length / ibx__utf8_length against table 3-7 of Unicode
 *
 * Bugs found here are kept as corpus/crash-<what>, fixed or not:
 *   crash-json-get-*           obx__json_get read past the end of a payload
 *                              ending in "\" or a short "\u" (fixed, 3841618)
 *   crash-backoff-nan-jitter   obx/ibx_backoff_jitter_ms with a NaN or an
 *                              infinite jitter factor converted NaN to int64_t:
 *                              undefined, INT64_MIN on x86-64 (fixed: 0)
 *
 * Build (see the Makefile's fuzz target):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c99 -D_POSIX_C_SOURCE=200809L \
 *         -pthread tests/fuzz_core.c tests/fake_odbc.c -o fuzz_core
 * tests/fuzz_replay.c replays a corpus through the same entry point with gcc.
 */
#define OBX_IMPLEMENTATION
#include "../obx.h"
#define IBX_IMPLEMENTATION
#include "../ibx.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- failure reporting ---------------------------------------------------------- */

static void fz_fail(int line, const char *what) {
    fprintf(stderr, "fuzz_core.c:%d: invariant broken: %s\n", line, what);
    fflush(stderr);
    abort();
}
#define FZ_CHECK(cond)                            \
    do {                                          \
        if (!(cond)) fz_fail(__LINE__, #cond);    \
    } while (0)

static void *fz_malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fputs("fuzz_core.c: out of memory\n", stderr);
        abort();
    }
    return p;
}

/* ---- guarded buffers ----------------------------------------------------------- */

/* n bytes that end right before an inaccessible page, so that reading past
 * them faults even without AddressSanitizer (the gcc replay build). When the
 * page cannot be protected, the buffer is still usable, just unguarded. */
typedef struct fz_guarded {
    unsigned char *base, *guard;
    size_t page;
    int armed;
} fz_guarded;

static char *fz_guarded_alloc(fz_guarded *g, size_t n) {
    long ps = sysconf(_SC_PAGESIZE);
    size_t pages;
    void *base = NULL;
    g->page = ps > 0 ? (size_t)ps : 4096u;
    pages = (n + g->page - 1) / g->page;
    if (posix_memalign(&base, g->page, (pages + 1) * g->page) != 0 || !base) {
        fputs("fuzz_core.c: out of memory\n", stderr);
        abort();
    }
    g->base = (unsigned char *)base;
    g->guard = g->base + pages * g->page;
    g->armed = mprotect(g->guard, g->page, PROT_NONE) == 0;
    return (char *)(g->guard - n);
}

static void fz_guarded_free(fz_guarded *g) {
    if (g->armed && mprotect(g->guard, g->page, PROT_READ | PROT_WRITE) != 0) abort();
    free(g->base);
}

/* ---- byte stream ------------------------------------------------------------------ */

/* Reads numbers from the input; past the end it yields zeros. */
typedef struct fz_reader {
    const uint8_t *p;
    size_t n, i;
} fz_reader;

static void fz_reader_init(fz_reader *r, const uint8_t *data, size_t size, size_t start) {
    r->p = data;
    r->n = size;
    r->i = start < size ? start : size;
}

static unsigned fz_u8(fz_reader *r) {
    return r->i < r->n ? (unsigned)r->p[r->i++] : 0u;
}

static uint64_t fz_u64(fz_reader *r) {
    uint64_t v = 0;
    int k;
    for (k = 0; k < 8; k++) v |= (uint64_t)fz_u8(r) << (8 * k);
    return v;
}

static uint32_t fz_u32(fz_reader *r) {
    uint32_t v = 0;
    int k;
    for (k = 0; k < 4; k++) v |= (uint32_t)fz_u8(r) << (8 * k);
    return v;
}

/* Two's-complement reinterpretations without implementation-defined casts. */
static int64_t fz_i64_of(uint64_t u) {
    if (u <= (uint64_t)INT64_MAX) return (int64_t)u;
    return -(int64_t)(~u) - 1;
}
static int fz_int_of(uint32_t u) {
    if (u <= (uint32_t)INT_MAX) return (int)u;
    return -(int)(~u) - 1;
}
static int fz_i8_of(unsigned u) {
    u &= 0xFFu;
    return u < 128u ? (int)u : (int)u - 256;
}

/* An int that is often at an edge: small, negative, or a limit. */
static int fz_int(fz_reader *r) {
    unsigned mode = fz_u8(r);
    uint32_t raw;
    switch (mode & 7u) {
    case 0: return 0;
    case 1: return INT_MAX;
    case 2: return INT_MIN;
    case 3:
        raw = fz_u32(r);
        return fz_int_of(raw);
    default: return fz_i8_of(mode >> 3);
    }
}

/* ---- the input as strings -------------------------------------------------------- */

#define FZ_MAX_ITEMS 512

/* The input split on NUL, in a NUL-terminated copy; the last piece is the
 * text after the last NUL (so "" gives one empty item). */
typedef struct fz_items {
    fz_guarded mem;
    char *copy;
    size_t count;
    const char *s[FZ_MAX_ITEMS];
    size_t len[FZ_MAX_ITEMS];
} fz_items;

static void fz_items_split(fz_items *it, const uint8_t *data, size_t size) {
    size_t i, start = 0;
    it->copy = fz_guarded_alloc(&it->mem, size + 1);
    if (size) memcpy(it->copy, data, size);
    it->copy[size] = '\0';
    it->count = 0;
    for (i = 0; i <= size && it->count < FZ_MAX_ITEMS; i++) {
        if (i == size || it->copy[i] == '\0') {
            it->s[it->count] = it->copy + start;
            it->len[it->count] = i - start;
            it->count++;
            start = i + 1;
        }
    }
}

/* The item "\x01" stands for NULL where a check wants NULLs. */
static int fz_is_null_marker(const fz_items *it, size_t i) {
    return it->len[i] == 1 && it->s[i][0] == '\x01';
}

/* ---- shared allocator state ------------------------------------------------------ */

/* obx__hooks_resolve reads /dev/urandom; do it once. The hooks must not move. */
static obx__hooks fz_oh;
static ibx__hooks fz_ih;
static int fz_hooks_ready;

static void fz_hooks(void) {
    if (fz_hooks_ready) return;
    obx__hooks_resolve(&fz_oh, NULL);
    ibx__hooks_resolve(&fz_ih, NULL);
    fz_hooks_ready = 1;
}

/* ---- identifiers ------------------------------------------------------------------- */

static int ref_identifier_ok(const char *s) {
    size_t i;
    for (i = 0; s[i]; i++) {
        char c = s[i];
        int letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
        int digit = c >= '0' && c <= '9';
        if (!(letter || (digit && i > 0))) return 0;
    }
    return i >= 1 && i <= 63;
}

static void check_identifier_one(const char *s) {
    int want = ref_identifier_ok(s);
    obx_result o = obx_identifier_check(s);
    ibx_result b = ibx_identifier_check(s);
    FZ_CHECK(o == OBX_OK || o == OBX_ERR_INVALID_ARG);
    FZ_CHECK((o == OBX_OK) == want);
    FZ_CHECK((b == IBX_OK) == want);
    if (want) { /* accepted: the rule, checked directly */
        size_t n = strlen(s), i;
        FZ_CHECK(n >= 1 && n <= 63);
        FZ_CHECK(!(s[0] >= '0' && s[0] <= '9'));
        for (i = 0; i < n; i++)
            FZ_CHECK((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
                     (s[i] >= '0' && s[i] <= '9') || s[i] == '_');
    }
}

static void check_identifiers(const fz_items *it) {
    size_t i;
    char trimmed[80];
    for (i = 0; i < it->count; i++) {
        check_identifier_one(it->s[i]);
        /* the same text cut to around the 63-character limit */
        if (it->len[i] > 60) {
            size_t cut;
            for (cut = 61; cut <= 66 && cut <= it->len[i]; cut++) {
                memcpy(trimmed, it->s[i], cut);
                trimmed[cut] = '\0';
                check_identifier_one(trimmed);
            }
        }
    }
    FZ_CHECK(obx_identifier_check(NULL) == OBX_ERR_INVALID_ARG);
}

/* ---- uuid text -------------------------------------------------------------------- */

static int ref_is_hex(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* s holds at least 37 readable bytes. */
static int ref_uuid_valid(const char *s) {
    int i;
    for (i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-') return 0;
        } else if (!ref_is_hex(s[i])) {
            return 0;
        }
    }
    return s[36] == '\0';
}

static void check_uuid_text(const char text[37]) {
    int want = ref_uuid_valid(text);
    FZ_CHECK((obx_uuid_is_valid(text) != 0) == want);
    FZ_CHECK((ibx_uuid_is_valid(text) != 0) == want);
}

static void check_uuid_valid(const uint8_t *data, size_t size) {
    static const char good[] = "0190a3b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b";
    char text[40];
    size_t off, i;
    int windows = 0;
    /* 36/37-byte windows of the input; past the end, the valid text */
    for (off = 0; windows < 8 && (off < size || off == 0); off += 36, windows++) {
        for (i = 0; i < 37; i++) {
            if (off + i < size)
                text[i] = (char)data[off + i];
            else
                text[i] = i < 36 ? good[i] : '\0';
        }
        text[37] = '\0';
        check_uuid_text(text); /* the 37th byte may be non-NUL: invalid then */
        text[36] = '\0';
        check_uuid_text(text);
    }
    /* a valid text with up to four bytes replaced */
    {
        fz_reader r;
        int k;
        fz_reader_init(&r, data, size, 0);
        memcpy(text, good, 37);
        for (k = 0; k < 4; k++) {
            unsigned pos = fz_u8(&r) % 37u, c = fz_u8(&r);
            text[pos] = (char)c;
            check_uuid_text(text);
        }
    }
    FZ_CHECK(!obx_uuid_is_valid(NULL));
}

/* ---- uuid v7 ------------------------------------------------------------------------ */

#define FZ_MS_LIMIT ((int64_t)1 << 47) /* keep the 48-bit field from wrapping */

static uint64_t fz_hexval(const char *s, int n) {
    uint64_t v = 0;
    int i;
    for (i = 0; i < n; i++) {
        char c = s[i];
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : (unsigned)(c - 'a' + 10);
        v = v * 16u + d;
    }
    return v;
}

/* Decode the fields of our own v7 text (already checked to be lower-case hex). */
static void fz_uuid_fields(const char *u, uint64_t *ms, uint64_t *counter, uint32_t *rnd) {
    unsigned char b[16];
    int i, o = 0;
    for (i = 0; i < 16; i++) {
        if (o == 8 || o == 13 || o == 18 || o == 23) o++;
        b[i] = (unsigned char)fz_hexval(u + o, 2);
        o += 2;
    }
    *ms = 0;
    for (i = 0; i < 6; i++) *ms = (*ms << 8) | b[i];
    *counter = ((uint64_t)(b[6] & 0x0F) << 38) | ((uint64_t)b[7] << 30) |
               ((uint64_t)(b[8] & 0x3F) << 24) | ((uint64_t)b[9] << 16) | ((uint64_t)b[10] << 8) |
               (uint64_t)b[11];
    *rnd = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | (uint32_t)b[15];
}

static void check_v7_format(const char *u) {
    int i;
    FZ_CHECK(strlen(u) == 36);
    FZ_CHECK(ref_uuid_valid(u));
    FZ_CHECK(obx_uuid_is_valid(u));
    for (i = 0; i < 36; i++) FZ_CHECK(!(u[i] >= 'A' && u[i] <= 'F')); /* lower case */
    FZ_CHECK(u[14] == '7');                                             /* version */
    FZ_CHECK(u[19] == '8' || u[19] == '9' || u[19] == 'a' || u[19] == 'b'); /* variant 10xx */
}

static void check_uuid_v7(const uint8_t *data, size_t size) {
    const uint64_t limit = (uint64_t)1 << 42;
    obx_uuid_state st;
    ibx_uuid_state ist;
    int64_t model_ms, prev_in = 0;
    uint64_t model_counter;
    char prev[37], out[37], iout[37];
    int k, steps, have_prev = 0;
    fz_reader r;
    unsigned flags;

    fz_reader_init(&r, data, size, 0);
    flags = fz_u8(&r);
    memset(&st, 0, sizeof st);
    /* a reachable start state: any time below the limit, any counter below 2^42,
     * often right at the end of the counter so that it borrows a millisecond */
    if (flags & 1u) st.last_ms = fz_i64_of(fz_u64(&r) % (uint64_t)FZ_MS_LIMIT);
    if (flags & 2u) st.counter = limit - 1u - (fz_u8(&r) & 7u);
    else if (flags & 4u) st.counter = fz_u64(&r) % limit;
    ist.last_ms = st.last_ms;
    ist.counter = st.counter;
    model_ms = st.last_ms;
    model_counter = st.counter;
    prev_in = model_ms;
    steps = 1 + (int)(fz_u8(&r) % 48u);
    for (k = 0; k < steps; k++) {
        unsigned mode = fz_u8(&r);
        int64_t ms;
        uint64_t ra = fz_u64(&r), rb = fz_u64(&r), f_ms, f_counter;
        uint32_t f_rnd;
        switch (mode % 6u) {
        case 0: ms = prev_in; break;                                      /* same ms */
        case 1: ms = prev_in + (int64_t)(mode >> 3); break;               /* forwards */
        case 2: ms = prev_in - (int64_t)(mode >> 3); break;               /* backwards */
        case 3: ms = fz_i64_of(ra % (uint64_t)FZ_MS_LIMIT); break;        /* anywhere */
        case 4: ms = -1 - (int64_t)(mode >> 3); break;                    /* before 1970 */
        default: ms = fz_i64_of(rb % (uint64_t)FZ_MS_LIMIT); break;
        }
        if (ms >= FZ_MS_LIMIT) ms = FZ_MS_LIMIT - 1;
        prev_in = ms;

        /* the model (header comment of obx__uuid_v7, RFC 9562 6.2 method 1) */
        if ((ms < 0 ? 0 : ms) > model_ms) {
            model_ms = ms;
            model_counter = ra & ((limit >> 1) - 1);
        } else if (++model_counter >= limit) {
            model_ms++;
            model_counter = 0;
        }

        obx_uuid_v7(&st, ms, ra, rb, out);
        ibx_uuid_v7(&ist, ms, ra, rb, iout);
        check_v7_format(out);
        FZ_CHECK(strcmp(out, iout) == 0);
        FZ_CHECK(st.last_ms == model_ms && st.counter == model_counter);
        fz_uuid_fields(out, &f_ms, &f_counter, &f_rnd);
        FZ_CHECK(f_ms == (uint64_t)model_ms);
        FZ_CHECK(f_counter == model_counter);
        FZ_CHECK(f_rnd == (uint32_t)(rb & 0xFFFFFFFFu));
        FZ_CHECK(f_ms >= (uint64_t)(ms < 0 ? 0 : ms)); /* never before the clock */
        if (have_prev) FZ_CHECK(strcmp(prev, out) < 0); /* strictly ascending */
        memcpy(prev, out, sizeof prev);
        have_prev = 1;
    }

    /* any int64 time: the text stays well-formed */
    {
        obx_uuid_state fresh;
        int64_t raw = fz_i64_of(fz_u64(&r));
        memset(&fresh, 0, sizeof fresh);
        obx_uuid_v7(&fresh, raw, fz_u64(&r), fz_u64(&r), out);
        check_v7_format(out);
        obx_uuid_v7(&fresh, raw, 0, 0, prev);
        check_v7_format(prev);
        FZ_CHECK(strcmp(out, prev) < 0 || raw >= ((int64_t)1 << 48)); /* the field wraps there */
    }
}

/* ---- backoff -------------------------------------------------------------------------- */

static int64_t ref_default_ms(int attempt) {
    if (attempt < 0) attempt = 0;
    if (attempt > 5) return 60000;
    return ((int64_t)1000) << attempt;
}

/* min(max, base * 2^(attempt-1)) without overflow; base, max > 0. */
static int64_t ref_delay(int64_t base, int64_t max, int attempt) {
    int shift;
    if (attempt < 1) attempt = 1;
    if (base >= max) return max;
    shift = attempt - 1;
    if (shift >= 63 || base > (max >> shift)) return max;
    return base << shift; /* base <= max >> shift: no overflow */
}

/* A double: mostly small (-4 .. 4 in steps of 1/1000), sometimes any bits. */
static double fz_double(fz_reader *r) {
    unsigned mode = fz_u8(r);
    uint64_t bits = fz_u64(r);
    double d;
    if ((mode & 3u) != 0) {
        int thousandths = (int)(bits % 8001u) - 4000;
        return (double)thousandths / 1000.0;
    }
    memcpy(&d, &bits, sizeof d);
    return d; /* any double: NaN and infinities too */
}

static int64_t fz_ms(fz_reader *r) {
    unsigned mode = fz_u8(r);
    uint64_t raw = fz_u64(r);
    switch (mode & 3u) {
    case 0: return fz_i64_of(raw);                   /* anything */
    case 1: return (int64_t)(raw % 100000u);         /* ordinary */
    case 2: return INT64_MAX - (int64_t)(raw % 4u);  /* at the limit */
    default: return -(int64_t)(raw % 1000u);         /* zero or negative: the default */
    }
}

static void check_backoff(const uint8_t *data, size_t size) {
    fz_reader r;
    int round;
    fz_reader_init(&r, data, size, 0);
    for (round = 0; round < 4; round++) {
        int attempt = fz_int(&r);
        int64_t d = obx_backoff_default_ms(attempt);
        obx_backoff_policy p;
        ibx_backoff_policy ip;
        const obx_backoff_policy *pp = &p;
        uint64_t bits;
        int64_t base, max, j, ij;
        double jmin, jmax;
        unsigned shape;

        FZ_CHECK(d >= 0 && d <= 60000 && d >= 1000);
        FZ_CHECK(d == ref_default_ms(attempt));
        FZ_CHECK(ibx_backoff_default_ms(attempt) == d);

        shape = fz_u8(&r);
        p.base_ms = fz_ms(&r);
        p.max_ms = fz_ms(&r);
        p.jitter_min = fz_double(&r);
        p.jitter_max = fz_double(&r);
        if (shape & 1u) { p.jitter_min = 1.0; p.jitter_max = 1.0; }
        if (shape & 2u) { p.jitter_min = 0.0; p.jitter_max = 0.0; } /* the defaults */
        if ((shape & 12u) == 12u) pp = NULL;
        bits = fz_u64(&r);
        ip.base_ms = p.base_ms;
        ip.max_ms = p.max_ms;
        ip.jitter_min = p.jitter_min;
        ip.jitter_max = p.jitter_max;

        j = obx_backoff_jitter_ms(pp, attempt, bits);
        ij = ibx_backoff_jitter_ms(pp ? &ip : NULL, attempt, bits);
        FZ_CHECK(j == ij);
        FZ_CHECK(j >= 0);

        /* the policy as the header documents it */
        base = (pp && p.base_ms > 0) ? p.base_ms : 200;
        max = (pp && p.max_ms > 0) ? p.max_ms : 60000;
        jmin = 0.5;
        jmax = 1.5;
        if (pp && (p.jitter_min != 0.0 || p.jitter_max != 0.0)) {
            jmin = p.jitter_min;
            jmax = p.jitter_max;
        }
        if (jmin >= 0.0 && jmin <= jmax) { /* sane */
            int64_t delay = ref_delay(base, max, attempt);
            int64_t least = base < max ? base : max;
            double hi = (double)max * jmax, lo = (double)least * jmin;
            /* Above 9e18 ms the header saturates to INT64_MAX, which can be a
             * little more than max * jitter_max: accepted, those delays are
             * hundreds of millions of years. */
            FZ_CHECK((double)j <= hi + hi * 1e-9 + 1.0 || (hi >= 8.99e18 && j == INT64_MAX));
            FZ_CHECK((double)j >= lo - lo * 1e-9 - 1.0 || lo > 9.0e18);
            if (jmin == 1.0 && jmax == 1.0 && delay < ((int64_t)1 << 53)) FZ_CHECK(j == delay);
        }
    }
}

/* ---- selector ------------------------------------------------------------------------- */

typedef struct fz_sel_model {
    int kind, count, current, streak;
} fz_sel_model;

static void check_selector(const uint8_t *data, size_t size) {
    obx_selector s;
    ibx_selector is;
    fz_sel_model m;
    fz_reader r;
    int k, ops;
    fz_reader_init(&r, data, size, 0);
    memset(&s, 0, sizeof s);
    memset(&is, 0, sizeof is);
    memset(&m, 0, sizeof m);
    ops = 1 + (int)(fz_u8(&r) % 96u);
    for (k = 0; k < ops; k++) {
        unsigned op = fz_u8(&r);
        int n, store, claimed;
        switch (op % 5u) {
        case 0: /* init */
            n = fz_int(&r);
            m.kind = (op >> 3) & 1u ? 1 : 0;
            obx_selector_init(&s, m.kind ? OBX_SELECT_DRAIN_FIRST : OBX_SELECT_ROUND_ROBIN, n);
            ibx_selector_init(&is, m.kind ? IBX_SELECT_DRAIN_FIRST : IBX_SELECT_ROUND_ROBIN, n);
            m.count = n > 0 ? n : 0;
            m.current = 0;
            m.streak = 0;
            break;
        case 1: /* report, usually for the current store */
        case 2:
            store = ((op >> 3) & 3u) != 0 ? obx_selector_next(&s) : fz_int(&r);
            claimed = fz_int(&r);
            obx_selector_report(&s, store, claimed);
            ibx_selector_report(&is, store, claimed);
            if (m.count > 0) {
                if (claimed > 0) m.streak = 0;
                else if (m.streak < INT_MAX) m.streak++;
                if (store == m.current && !(m.kind == 1 && claimed > 0))
                    m.current = (m.current + 1) % m.count;
            }
            break;
        case 3: /* resize */
            n = fz_int(&r);
            obx_selector_resize(&s, n);
            ibx_selector_resize(&is, n);
            m.count = n > 0 ? n : 0;
            if (m.current >= m.count) m.current = 0;
            m.streak = 0;
            break;
        default: break; /* only look */
        }
        n = obx_selector_next(&s);
        FZ_CHECK(n >= -1 && n <= (m.count > 0 ? m.count - 1 : -1));
        FZ_CHECK((n == -1) == (m.count <= 0));
        FZ_CHECK(n == (m.count > 0 ? m.current : -1));
        FZ_CHECK(ibx_selector_next(&is) == n);
        FZ_CHECK((obx_selector_all_idle(&s) != 0) == (m.count <= 0 || m.streak >= m.count));
        FZ_CHECK((ibx_selector_all_idle(&is) != 0) == (obx_selector_all_idle(&s) != 0));
    }
}

/* ---- list literals ----------------------------------------------------------------------- */

typedef struct fz_elem {
    size_t off, len;
    int null;
} fz_elem;

static int fz_hexdigit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A strict parser of a JSON array of strings and nulls, as obx__list_add
 * writes it. Decoded bytes go to out (capacity >= len); elements to el.
 * Returns the element count, or -1 when the text is not such an array. */
static long parse_json_list(const char *s, size_t len, char *out, fz_elem *el, size_t max_el) {
    size_t i = 0, o = 0, n = 0;
    if (len < 2 || s[0] != '[') return -1;
    i = 1;
    if (s[i] == ']') return i + 1 == len ? 0 : -1;
    for (;;) {
        if (n == max_el) return -1;
        if (len - i >= 4 && memcmp(s + i, "null", 4) == 0) {
            el[n].off = o;
            el[n].len = 0;
            el[n].null = 1;
            i += 4;
        } else if (i < len && s[i] == '"') {
            el[n].off = o;
            el[n].null = 0;
            for (i++;; i++) {
                unsigned char c;
                if (i >= len) return -1;
                c = (unsigned char)s[i];
                if (c == '"') break;
                if (c < 0x20) return -1; /* raw control characters are not JSON */
                if (c != '\\') {
                    out[o++] = (char)c;
                    continue;
                }
                if (++i >= len) return -1;
                switch (s[i]) {
                case '"': out[o++] = '"'; break;
                case '\\': out[o++] = '\\'; break;
                case '/': out[o++] = '/'; break;
                case 'b': out[o++] = '\b'; break;
                case 'f': out[o++] = '\f'; break;
                case 'n': out[o++] = '\n'; break;
                case 'r': out[o++] = '\r'; break;
                case 't': out[o++] = '\t'; break;
                case 'u': {
                    int k, v = 0;
                    if (len - i < 5) return -1;
                    for (k = 1; k <= 4; k++) {
                        int d = fz_hexdigit(s[i + (size_t)k]);
                        if (d < 0) return -1;
                        v = v * 16 + d;
                    }
                    if (v >= 0x80) return -1; /* would be UTF-8 text: never written */
                    out[o++] = (char)v;
                    i += 4;
                    break;
                }
                default: return -1;
                }
            }
            el[n].len = o - el[n].off;
            i++; /* the closing quote */
        } else {
            return -1;
        }
        n++;
        if (i >= len) return -1;
        if (s[i] == ']') return i + 1 == len ? (long)n : -1;
        if (s[i] != ',') return -1;
        i++;
    }
}

/* A strict parser of a PostgreSQL array literal of quoted strings and NULLs:
 * {"a","b\"c",NULL}; inside quotes a backslash takes the next byte as is. */
static long parse_pg_list(const char *s, size_t len, char *out, fz_elem *el, size_t max_el) {
    size_t i, o = 0, n = 0;
    if (len < 2 || s[0] != '{') return -1;
    i = 1;
    if (s[i] == '}') return i + 1 == len ? 0 : -1;
    for (;;) {
        if (n == max_el) return -1;
        if (len - i >= 4 && memcmp(s + i, "NULL", 4) == 0) {
            el[n].off = o;
            el[n].len = 0;
            el[n].null = 1;
            i += 4;
        } else if (i < len && s[i] == '"') {
            el[n].off = o;
            el[n].null = 0;
            for (i++;; i++) {
                if (i >= len) return -1;
                if (s[i] == '"') break;
                if (s[i] == '\\' && ++i >= len) return -1;
                out[o++] = s[i];
            }
            el[n].len = o - el[n].off;
            i++;
        } else {
            return -1;
        }
        n++;
        if (i >= len) return -1;
        if (s[i] == '}') return i + 1 == len ? (long)n : -1;
        if (s[i] != ',') return -1;
        i++;
    }
}

/* One list: the expected elements are it's items (NULL markers as NULL when
 * `nulls`), plus, for JSON, one more holding the raw input with its NULs. */
typedef struct fz_list_case {
    const fz_items *it;
    int nulls, pg;
    const uint8_t *raw;
    size_t raw_len;
} fz_list_case;

static void check_list_text(const fz_list_case *c, const char *text, size_t len) {
    size_t want = c->it->count + (c->raw ? 1u : 0u), i;
    char *out = (char *)fz_malloc(len);
    fz_elem *el = (fz_elem *)fz_malloc((want + 1) * sizeof *el);
    long got;
    FZ_CHECK(strlen(text) == len); /* no NUL inside: it is bound as a C string */
    got = c->pg ? parse_pg_list(text, len, out, el, want + 1)
                : parse_json_list(text, len, out, el, want + 1);
    FZ_CHECK(got >= 0);
    FZ_CHECK((size_t)got == want);
    for (i = 0; i < c->it->count; i++) {
        int null = c->nulls && fz_is_null_marker(c->it, i);
        FZ_CHECK(el[i].null == null);
        if (!null) {
            FZ_CHECK(el[i].len == c->it->len[i]);
            FZ_CHECK(el[i].len == 0 || memcmp(out + el[i].off, c->it->s[i], el[i].len) == 0);
        }
    }
    if (c->raw) {
        FZ_CHECK(!el[i].null);
        FZ_CHECK(el[i].len == c->raw_len);
        FZ_CHECK(el[i].len == 0 || memcmp(out + el[i].off, c->raw, el[i].len) == 0);
    }
    free(el);
    free(out);
}

static void check_list_obx(const fz_list_case *c) {
    obx__buf b = {NULL, 0, 0};
    const obx__dialect *d = obx__dialect_get(c->pg ? OBX_DIALECT_POSTGRESQL : OBX_DIALECT_SQLITE);
    size_t i;
    FZ_CHECK(d != NULL);
    for (i = 0; i < c->it->count; i++) {
        if (c->nulls && fz_is_null_marker(c->it, i))
            FZ_CHECK(obx__list_add_null(&fz_oh, &b, d));
        else
            FZ_CHECK(obx__list_add(&fz_oh, &b, d, c->it->s[i], c->it->len[i]));
    }
    if (c->raw) FZ_CHECK(obx__list_add(&fz_oh, &b, d, (const char *)c->raw, c->raw_len));
    FZ_CHECK(obx__list_end(&fz_oh, &b, d));
    FZ_CHECK(b.data != NULL && b.len < b.cap && b.data[b.len] == '\0');
    check_list_text(c, b.data, b.len);
    obx__buf_free(&fz_oh, &b);
}

static void check_list_ibx(const fz_list_case *c) {
    ibx__buf b = {NULL, 0, 0};
    const ibx__dialect *d = ibx__dialect_get(c->pg ? IBX_DIALECT_POSTGRESQL : IBX_DIALECT_SQLITE);
    size_t i;
    FZ_CHECK(d != NULL);
    for (i = 0; i < c->it->count; i++) {
        if (c->nulls && fz_is_null_marker(c->it, i))
            FZ_CHECK(ibx__list_add_null(&fz_ih, &b, d));
        else
            FZ_CHECK(ibx__list_add(&fz_ih, &b, d, c->it->s[i], c->it->len[i]));
    }
    if (c->raw) FZ_CHECK(ibx__list_add(&fz_ih, &b, d, (const char *)c->raw, c->raw_len));
    FZ_CHECK(ibx__list_end(&fz_ih, &b, d));
    FZ_CHECK(b.data != NULL && b.len < b.cap && b.data[b.len] == '\0');
    check_list_text(c, b.data, b.len);
    ibx__buf_free(&fz_ih, &b);
}

static void check_lists(const fz_items *it, const uint8_t *data, size_t size) {
    fz_list_case c;
    int pg, nulls;
    c.it = it;
    for (pg = 0; pg <= 1; pg++) {
        for (nulls = 0; nulls <= 1; nulls++) {
            c.pg = pg;
            c.nulls = nulls;
            /* JSON escapes every byte, NUL included (\u0000); a PostgreSQL
             * literal cannot hold a NUL, so the raw element is JSON only. */
            c.raw = (!pg && nulls) ? data : NULL;
            c.raw_len = c.raw ? size : 0;
            check_list_obx(&c);
            check_list_ibx(&c);
        }
    }
    /* an empty list */
    {
        fz_items none;
        memset(&none, 0, sizeof none);
        none.count = 0;
        c.it = &none;
        c.raw = NULL;
        c.raw_len = 0;
        for (pg = 0; pg <= 1; pg++) {
            c.pg = pg;
            c.nulls = 0;
            check_list_obx(&c);
            check_list_ibx(&c);
        }
    }
}

/* ---- the join.wait payload ---------------------------------------------------------------- */

static void check_json_payload(const fz_items *it, const uint8_t *data, size_t size) {
    static const char *const keys[5] = {"joinId", "onCompleteTopic", "onCompletePayload",
                                        "onFailTopic", "onFailPayload"};
    const char *values[5];
    obx__buf b = {NULL, 0, 0};
    int fail = size > 0 && (data[0] & 1u), k, ok;
    char flag[8];
    for (k = 0; k < 5; k++) {
        size_t i = (size_t)k;
        values[k] = i < it->count && !fz_is_null_marker(it, i) ? it->s[i] : NULL;
    }
    /* as obx_join_enqueue_wait writes it */
    ok = 1;
    for (k = 0; k < 5 && ok; k++) ok = obx__json_string(&b, &fz_oh, keys[k], values[k], k == 0);
    FZ_CHECK(ok);
    FZ_CHECK(obx__buf_add(&fz_oh, &b,
                          fail ? ",\"failIfAnyStepFailed\":true}" : ",\"failIfAnyStepFailed\":false}",
                          fail ? 28 : 29));
    FZ_CHECK(strlen(b.data) == b.len);
    for (k = 0; k < 5; k++) {
        const char *v = values[k];
        if (!v) {
            char small[4];
            FZ_CHECK(obx__json_get(b.data, keys[k], small, sizeof small) == 0);
        } else {
            size_t n = strlen(v);
            char *out = (char *)fz_malloc(n + 1); /* exact: ASan sees one byte too many */
            FZ_CHECK(obx__json_get(b.data, keys[k], out, n + 1) == 1);
            FZ_CHECK(memcmp(out, v, n + 1) == 0);
            if (n >= 1) FZ_CHECK(obx__json_get(b.data, keys[k], out, n) == -1); /* one short */
            free(out);
        }
    }
    FZ_CHECK(obx__json_get(b.data, "failIfAnyStepFailed", flag, sizeof flag) == 1);
    FZ_CHECK(strcmp(flag, fail ? "true" : "false") == 0);
    FZ_CHECK(obx__json_get(b.data, "absent", flag, sizeof flag) == 0);
    obx__buf_free(&fz_oh, &b);
}

/* obx_join_wait_handler runs obx__json_get on whatever payload a "join.wait"
 * message carries, so it must also be safe on text it did not write: the
 * input itself (up to its first NUL), and the same after a plausible
 * prefix. Both sit right before a guard page. A result of 1 must be
 * NUL-terminated within `cap`. (Before 3841618 a value ending in a lone
 * backslash or a short \u escape was read past its NUL: crash-json-get-*.) */

static void check_json_get_one(const char *text) {
    static const char *const keys[4] = {"joinId", "onCompleteTopic", "failIfAnyStepFailed", "x"};
    static const size_t caps[3] = {1, 8, 64};
    int k, c;
    for (k = 0; k < 4; k++) {
        for (c = 0; c < 3; c++) {
            char *out = (char *)fz_malloc(caps[c]);
            int got = obx__json_get(text, keys[k], out, caps[c]);
            FZ_CHECK(got >= -1 && got <= 1);
            if (got == 1) FZ_CHECK(memchr(out, 0, caps[c]) != NULL);
            free(out);
        }
    }
}

/* A JSON string body (after the opening quote) decoded as RFC 8259 says:
 * the eight short escapes, \uXXXX to UTF-8 with surrogate pairs joined (a
 * lone surrogate is malformed); other bytes, raw control characters
 * included, are taken as they are. Returns the decoded length, or -1 when
 * the body is malformed or has no closing quote. out has room for strlen(s). */
static long ref_json_body(const char *s, char *out) {
    size_t i = 0, o = 0;
    for (;;) {
        unsigned long cp;
        int k, d;
        char c = s[i];
        if (c == '\0') return -1;
        if (c == '"') return (long)o;
        if (c != '\\') {
            out[o++] = c;
            i++;
            continue;
        }
        c = s[++i];
        i++;
        switch (c) {
        case '"': case '\\': case '/': out[o++] = c; continue;
        case 'b': out[o++] = '\b'; continue;
        case 'f': out[o++] = '\f'; continue;
        case 'n': out[o++] = '\n'; continue;
        case 'r': out[o++] = '\r'; continue;
        case 't': out[o++] = '\t'; continue;
        case 'u': break;
        default: return -1;
        }
        for (cp = 0, k = 0; k < 4; k++) {
            if ((d = fz_hexdigit(s[i + (size_t)k])) < 0) return -1;
            cp = cp * 16u + (unsigned long)d;
        }
        i += 4;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return -1;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned long low = 0;
            if (s[i] != '\\' || s[i + 1] != 'u') return -1;
            for (k = 0; k < 4; k++) {
                if ((d = fz_hexdigit(s[i + 2 + (size_t)k])) < 0) return -1;
                low = low * 16u + (unsigned long)d;
            }
            if (low < 0xDC00 || low > 0xDFFF) return -1;
            i += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        if (cp < 0x80) {
            out[o++] = (char)cp;
        } else if (cp < 0x800) {
            out[o++] = (char)(0xC0 | (cp >> 6));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out[o++] = (char)(0xE0 | (cp >> 12));
            out[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        } else {
            out[o++] = (char)(0xF0 | (cp >> 18));
            out[o++] = (char)(0x80 | ((cp >> 12) & 0x3F));
            out[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        }
    }
}

/* `text` is {"joinId":" followed by the input: obx__json_get must decode the
 * input as a JSON string body exactly as the reference does (the header's
 * contract: "every JSON escape decoded, \u to UTF-8"), need exactly
 * decoded length + 1 bytes of room, and say -1 for a malformed body. */
static void check_json_get_decode(const char *text, const char *body) {
    size_t n = strlen(body);
    char *want = (char *)fz_malloc(n + 1), *out = (char *)fz_malloc(n + 1);
    long len = ref_json_body(body, want);
    int got = obx__json_get(text, "joinId", out, n + 1);
    if (len < 0) {
        FZ_CHECK(got == -1);
    } else {
        FZ_CHECK(got == 1);
        FZ_CHECK(memcmp(out, want, (size_t)len) == 0 && out[len] == '\0');
        if (len > 0) FZ_CHECK(obx__json_get(text, "joinId", out, (size_t)len) == -1);
    }
    free(want);
    free(out);
}

static void check_json_get_raw(const fz_items *it) {
    static const char prefix[] = "{\"joinId\":\"";
    size_t n = strlen(it->copy);
    fz_guarded g;
    char *text = fz_guarded_alloc(&g, sizeof prefix + n);
    memcpy(text, prefix, sizeof prefix - 1);
    memcpy(text + sizeof prefix - 1, it->copy, n + 1);
    check_json_get_one(it->copy);
    check_json_get_one(text);
    check_json_get_decode(text, it->copy);
    fz_guarded_free(&g);
}

/* ---- sha-256 and hmac ---------------------------------------------------------------------- */

static int fz_hex_eq(const unsigned char h[32], const char *hex) {
    static const char digits[] = "0123456789abcdef";
    int i;
    for (i = 0; i < 32; i++)
        if (hex[2 * i] != digits[h[i] >> 4] || hex[2 * i + 1] != digits[h[i] & 15]) return 0;
    return 1;
}

static void check_sha_known(void) {
    static int done;
    unsigned char h[32];
    unsigned char key[20];
    if (done) return;
    done = 1;
    ibx_sha256("", 0, h);
    FZ_CHECK(fz_hex_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    ibx_sha256("abc", 3, h);
    FZ_CHECK(fz_hex_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    ibx_sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, h);
    FZ_CHECK(fz_hex_eq(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
    memset(key, 0x0b, sizeof key); /* RFC 4231 test case 1 */
    ibx_hmac_sha256(key, sizeof key, "Hi There", 8, h);
    FZ_CHECK(fz_hex_eq(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"));
}

/* HMAC from its definition, with the one-shot hash only. */
static void ref_hmac(const uint8_t *key, size_t key_len, const uint8_t *msg, size_t len,
                     unsigned char out[32]) {
    unsigned char k[64], inner[32];
    unsigned char *buf = (unsigned char *)fz_malloc(64 + (len > 32 ? len : 32));
    size_t i;
    memset(k, 0, sizeof k);
    if (key_len > 64) ibx_sha256(key, key_len, k);
    else if (key_len) memcpy(k, key, key_len);
    for (i = 0; i < 64; i++) buf[i] = (unsigned char)(k[i] ^ 0x36);
    if (len) memcpy(buf + 64, msg, len);
    ibx_sha256(buf, 64 + len, inner);
    for (i = 0; i < 64; i++) buf[i] = (unsigned char)(k[i] ^ 0x5c);
    memcpy(buf + 64, inner, 32);
    ibx_sha256(buf, 64 + 32, out);
    free(buf);
}

static void check_sha(const uint8_t *data, size_t size) {
    unsigned char h1[32], h2[32], h3[32];
    ibx__sha256 c;
    size_t off, key_len;
    unsigned step;
    check_sha_known();
    /* the hash only sees blocks: 1 KiB (16 blocks) covers every path, and
     * hashing is most of the time per input */
    if (size > 1024) size = 1024;

    ibx_sha256(data, size, h1);
    ibx_sha256(data, size, h2);
    FZ_CHECK(memcmp(h1, h2, 32) == 0);

    /* chunked: chunk sizes come from the input itself */
    ibx__sha256_init(&c);
    for (off = 0, step = 0; off < size; step++) {
        size_t n = (size_t)(data[(off + step) % size] % 131u);
        if (n > size - off) n = size - off;
        ibx__sha256_add(&c, data + off, n); /* n may be 0 */
        off += n;
        if (step > 4 * size + 8) { /* only zero-size chunks: finish in one go */
            ibx__sha256_add(&c, data + off, size - off);
            off = size;
        }
    }
    ibx__sha256_end(&c, h3);
    FZ_CHECK(memcmp(h1, h3, 32) == 0);

    /* hmac: key = first bytes, message = the rest */
    key_len = size ? (size_t)data[0] % (size + 1) : 0;
    if (size > 1 && (data[size - 1] & 1u)) key_len = size; /* also long keys on short inputs */
    {
        const uint8_t *msg = data + key_len;
        size_t len = size - key_len;
        unsigned char a[32], b[32], kh[32], padded[64];
        ibx_hmac_sha256(data, key_len, msg, len, a);
        ibx_hmac_sha256(data, key_len, msg, len, b);
        FZ_CHECK(memcmp(a, b, 32) == 0);
        ref_hmac(data, key_len, msg, len, b);
        FZ_CHECK(memcmp(a, b, 32) == 0);
        if (key_len > 64) { /* a long key is its hash */
            ibx_sha256(data, key_len, kh);
            ibx_hmac_sha256(kh, 32, msg, len, b);
            FZ_CHECK(memcmp(a, b, 32) == 0);
        } else { /* a short key is zero-padded to the block */
            memset(padded, 0, sizeof padded);
            if (key_len) memcpy(padded, data, key_len);
            ibx_hmac_sha256(padded, 64, msg, len, b);
            FZ_CHECK(memcmp(a, b, 32) == 0);
        }
    }
}

/* ---- utf-8 validation and length ------------------------------------------------------------ */

/* Reference: the well-formed byte sequences of Unicode's table 3-7, read
 * as ranges per position; -1 for anything else. */
static long ref_utf8_length(const uint8_t *s, size_t n) {
    static const uint8_t ranges[9][8] = {
        /* lead lo, hi, then lo/hi of each continuation byte (0 0: none) */
        {0x00, 0x7F, 0, 0, 0, 0, 0, 0},       {0xC2, 0xDF, 0x80, 0xBF, 0, 0, 0, 0},
        {0xE0, 0xE0, 0xA0, 0xBF, 0x80, 0xBF, 0, 0}, {0xE1, 0xEC, 0x80, 0xBF, 0x80, 0xBF, 0, 0},
        {0xED, 0xED, 0x80, 0x9F, 0x80, 0xBF, 0, 0}, {0xEE, 0xEF, 0x80, 0xBF, 0x80, 0xBF, 0, 0},
        {0xF0, 0xF0, 0x90, 0xBF, 0x80, 0xBF, 0x80, 0xBF},
        {0xF1, 0xF3, 0x80, 0xBF, 0x80, 0xBF, 0x80, 0xBF},
        {0xF4, 0xF4, 0x80, 0x8F, 0x80, 0xBF, 0x80, 0xBF}};
    size_t i = 0, r, k;
    long chars = 0;
    while (i < n) {
        for (r = 0; r < 9 && !(s[i] >= ranges[r][0] && s[i] <= ranges[r][1]); r++) {}
        if (r == 9) return -1;
        for (k = 1; k < 4 && ranges[r][2 * k]; k++)
            if (i + k >= n || s[i + k] < ranges[r][2 * k] || s[i + k] > ranges[r][2 * k + 1]) return -1;
        i += k;
        chars++;
    }
    return chars;
}

static void check_utf8(const uint8_t *data, size_t size) {
    long want = ref_utf8_length(data, size);
    FZ_CHECK(obx__utf8_length((const char *)data, size) == want);
    FZ_CHECK(ibx__utf8_length((const char *)data, size) == want);
}

/* ---- entry point ---------------------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_items *it;
    static const uint8_t empty[1] = {0};
    if (!data) data = empty; /* size is 0 then */
    if (size > 1u << 20) return 0; /* big inputs add nothing but time */
    fz_hooks();
    it = (fz_items *)fz_malloc(sizeof *it);
    fz_items_split(it, data, size);

    check_identifiers(it);
    check_uuid_valid(data, size);
    check_uuid_v7(data, size);
    check_backoff(data, size);
    check_selector(data, size);
    check_lists(it, data, size);
    check_json_payload(it, data, size);
    check_json_get_raw(it);
    check_sha(data, size);
    check_utf8(data, size);

    fz_guarded_free(&it->mem);
    free(it);
    return 0;
}

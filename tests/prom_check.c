/* prom_check: a strict checker of the Prometheus text exposition format
 * (0.0.4), standing in for `promtool check metrics` (Debian's prometheus
 * package is about 100 MB). Reads stdin; prints each problem with its line
 * number and exits 1 if there is any, else prints "ok: N families, N
 * samples" and exits 0. Checked:
 *   - every line is a comment, "# HELP name text", "# TYPE name type" or a
 *     sample "name{label="value",...} value [timestamp]"; no blank lines
 *   - metric and label names are valid; label names do not start with "__";
 *     label values and HELP text use only the escapes \\, \" (labels) and \n
 *   - HELP and TYPE at most once per family, before its samples; every
 *     family has both; a family's samples are contiguous (never resumed)
 *   - values are floats (or +Inf, -Inf, NaN); timestamps are integers
 *   - no two samples with the same name and label set; no label twice
 *   - counters: name ends in _total, value >= 0 (promtool's lint rule)
 *   - histograms: only _bucket (with le), _sum and _count samples; per label
 *     set the buckets rise with le, are cumulative (never decrease), end in
 *     le="+Inf" equal to _count, and _sum and _count are there
 */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FAMILIES 256
#define MAX_SERIES 4096

typedef struct family {
    char name[128], type[16];
    int help, typed, samples, closed;
} family;

typedef struct series {
    char key[560];               /* name and labels, as written after canonical escaping */
    char group[560];             /* histogram: family + labels without le */
    double le, value;
    int kind;                    /* 0 other, 1 bucket, 2 sum, 3 count */
} series;

static family fams[MAX_FAMILIES];
static int nfams;
static series ser[MAX_SERIES];
static int nser, errors, lineno;

static void bad(const char *what, const char *line) {
    printf("line %d: %s: %s\n", lineno, what, line);
    errors++;
}

static int name_ok(const char *s, size_t n, int colon) {
    size_t i;
    if (n == 0) return 0;
    for (i = 0; i < n; i++) {
        char c = s[i];
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
        if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return 0;
    }
    return 1;
}

static family *find(const char *name, int create) {
    int i;
    for (i = 0; i < nfams; i++)
        if (strcmp(fams[i].name, name) == 0) return &fams[i];
    if (!create || nfams == MAX_FAMILIES) return NULL;
    snprintf(fams[nfams].name, sizeof fams[nfams].name, "%s", name);
    return &fams[nfams++];
}

static int parse_float(const char *s, double *out) {
    char *end;
    if (strcmp(s, "+Inf") == 0) *out = HUGE_VAL;
    else if (strcmp(s, "-Inf") == 0) *out = -HUGE_VAL;
    else if (strcmp(s, "NaN") == 0) *out = nan("");
    else {
        if (!*s) return 0;
        *out = strtod(s, &end);
        if (*end) return 0;
    }
    return 1;
}

static family *current;

static void close_others(family *f) {
    if (current && current != f) current->closed = 1;
    current = f;
}

static void meta(char *line) {
    char *name = line + 7, *rest = strchr(name, ' ');
    family *f;
    const char *p;
    if (!rest) {
        bad("HELP/TYPE without text", line);
        return;
    }
    *rest++ = '\0';
    if (!name_ok(name, strlen(name), 1)) {
        bad("bad metric name", name);
        return;
    }
    f = find(name, 1);
    if (!f) {
        bad("too many families", name);
        return;
    }
    if (f->closed || f->samples) bad("HELP/TYPE after the family's samples", name);
    close_others(f);
    if (line[2] == 'H') {
        if (f->help++) bad("second HELP", name);
        for (p = rest; *p; p++)
            if (*p == '\\' && p[1] != '\\' && p[1] != 'n') bad("bad escape in HELP", rest);
            else if (*p == '\\') p++;
    } else {
        if (f->typed++) bad("second TYPE", name);
        if (strcmp(rest, "counter") && strcmp(rest, "gauge") && strcmp(rest, "histogram") && strcmp(rest, "summary") &&
            strcmp(rest, "untyped"))
            bad("unknown type", rest);
        snprintf(f->type, sizeof f->type, "%s", rest);
    }
}

/* Parse {a="b",...} at *pp into canonical text; le returned separately. */
static int labels(const char **pp, char *out, size_t size, char *nole, size_t nsize, char *le, size_t lesize) {
    const char *p = *pp + 1;
    char names[16][64];
    int n = 0, i;
    out[0] = nole[0] = le[0] = '\0';
    while (*p != '}') {
        const char *start = p;
        char value[256];
        size_t k = 0;
        while (*p && *p != '=') p++;
        if (*p != '=' || p[1] != '"') return 0;
        if (!name_ok(start, (size_t)(p - start), 0) || (p - start >= 2 && start[0] == '_' && start[1] == '_')) return 0;
        if (n == 16 || p - start >= 64) return 0;
        snprintf(names[n], 64, "%.*s", (int)(p - start), start);
        for (i = 0; i < n; i++)
            if (strcmp(names[i], names[n]) == 0) return 0;
        p += 2;
        while (*p && *p != '"') {
            if (*p == '\\') {
                if (p[1] != '\\' && p[1] != '"' && p[1] != 'n') return 0;
                if (k < sizeof value - 2) value[k++] = *p++;
            } else if (*p == '\n') return 0;
            if (k < sizeof value - 1) value[k++] = *p;
            p++;
        }
        if (*p != '"') return 0;
        value[k] = '\0';
        p++;
        if (strcmp(names[n], "le") == 0) {
            if (snprintf(le, lesize, "%s", value) >= (int)lesize) return 0;
        } else if (snprintf(nole + strlen(nole), nsize - strlen(nole), "%s=\"%s\",", names[n], value) >=
                   (int)(nsize - strlen(nole))) {
            return 0; /* longer than this checker keeps */
        }
        if (snprintf(out + strlen(out), size - strlen(out), "%s=\"%s\",", names[n], value) >= (int)(size - strlen(out)))
            return 0;
        n++;
        if (*p == ',') p++;
        else if (*p != '}') return 0;
    }
    *pp = p + 1;
    return 1;
}

static void sample(char *line) {
    const char *p = line, *start = line;
    char name[128], lab[400] = "", nole[400] = "", le[64] = "", base[128];
    double value;
    family *f;
    int kind = 0, i;
    size_t n;
    series *s;
    while (*p && *p != '{' && *p != ' ') p++;
    n = (size_t)(p - start);
    if (!name_ok(start, n, 1) || n >= sizeof name) {
        bad("bad sample name", line);
        return;
    }
    snprintf(name, sizeof name, "%.*s", (int)n, start);
    if (*p == '{' && !labels(&p, lab, sizeof lab, nole, sizeof nole, le, sizeof le)) {
        bad("bad labels (names, quoting or escapes)", line);
        return;
    }
    if (*p != ' ') {
        bad("no value", line);
        return;
    }
    p++;
    {
        char v[64], *sp = strchr(p, ' ');
        snprintf(v, sizeof v, "%.*s", sp ? (int)(sp - p) : (int)strlen(p), p);
        if (!parse_float(v, &value)) bad("bad value", line);
        if (sp) {
            char *end;
            strtoll(sp + 1, &end, 10);
            if (!sp[1] || *end) bad("bad timestamp", line);
        }
    }
    snprintf(base, sizeof base, "%s", name);
    f = find(name, 0);
    if (!f) {
        static const char *const suffixes[3] = {"_bucket", "_sum", "_count"};
        for (i = 0; i < 3 && !f; i++) {
            size_t len = strlen(name), sl = strlen(suffixes[i]);
            if (len > sl && strcmp(name + len - sl, suffixes[i]) == 0) {
                snprintf(base, sizeof base, "%.*s", (int)(len - sl), name);
                f = find(base, 0);
                if (f && strcmp(f->type, "histogram") != 0) f = NULL;
                else kind = i + 1;
            }
        }
    }
    if (!f) {
        bad("sample without HELP and TYPE for its family", line);
        return;
    }
    if (f->closed) bad("the family's samples are not contiguous", line);
    close_others(f);
    f->samples++;
    if (strcmp(f->type, "histogram") == 0 && kind == 0) bad("a histogram sample must be _bucket, _sum or _count", line);
    if (kind == 1 && !le[0]) bad("bucket without le", line);
    if (kind != 1 && le[0] && strcmp(f->type, "histogram") == 0) bad("le on a non-bucket sample", line);
    if (strcmp(f->type, "counter") == 0) {
        size_t len = strlen(name);
        if (len < 6 || strcmp(name + len - 6, "_total") != 0) bad("counter name does not end in _total", line);
        if (!(value >= 0)) bad("negative counter", line);
    }
    if (nser == MAX_SERIES) {
        bad("too many samples", line);
        return;
    }
    s = &ser[nser];
    if (snprintf(s->key, sizeof s->key, "%s{%s}", name, lab) >= (int)sizeof s->key) bad("series too long", line);
    for (i = 0; i < nser; i++)
        if (strcmp(ser[i].key, s->key) == 0) bad("duplicate series", line);
    if (snprintf(s->group, sizeof s->group, "%s{%s}", base, nole) >= (int)sizeof s->group) bad("series too long", line);
    s->kind = kind;
    s->value = value;
    s->le = nan("");
    if (kind == 1 && !parse_float(le, &s->le)) bad("le is not a number", line);
    nser++;
}

/* Histograms, per label set: rising le, cumulative counts, +Inf == _count. */
static void histograms(void) {
    int i, j;
    for (i = 0; i < nser; i++) {
        double last_le = -HUGE_VAL, last = 0, inf = -1, count = -1;
        int has_sum = 0, seen = 0;
        if (ser[i].kind == 0) continue;
        for (j = 0; j < i; j++)
            if (ser[j].kind && strcmp(ser[j].group, ser[i].group) == 0) seen = 1;
        if (seen) continue;
        for (j = i; j < nser; j++) {
            if (!ser[j].kind || strcmp(ser[j].group, ser[i].group) != 0) continue;
            if (ser[j].kind == 1) {
                if (!(ser[j].le > last_le)) printf("histogram %s: le not rising\n", ser[i].group), errors++;
                if (ser[j].value < last) printf("histogram %s: buckets not cumulative\n", ser[i].group), errors++;
                last_le = ser[j].le;
                last = ser[j].value;
                if ((ser[j].le > DBL_MAX)) inf = ser[j].value;
            } else if (ser[j].kind == 2) has_sum = 1;
            else count = ser[j].value;
        }
        if (inf < 0) printf("histogram %s: no le=\"+Inf\" bucket\n", ser[i].group), errors++;
        if (!has_sum || count < 0) printf("histogram %s: _sum or _count missing\n", ser[i].group), errors++;
        if (inf >= 0 && count >= 0 && inf != count) printf("histogram %s: +Inf bucket != _count\n", ser[i].group), errors++;
    }
}

int main(void) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int i;
    while ((len = getline(&line, &cap, stdin)) > 0) {
        lineno++;
        if (line[len - 1] != '\n') bad("last line without a newline", line);
        else line[len - 1] = '\0';
        if (!line[0]) bad("empty line", "");
        else if (strncmp(line, "# HELP ", 7) == 0 || strncmp(line, "# TYPE ", 7) == 0) meta(line);
        else if (line[0] == '#') continue;
        else sample(line);
    }
    free(line);
    for (i = 0; i < nfams; i++)
        if (!fams[i].help || !fams[i].typed) printf("family %s: HELP or TYPE missing\n", fams[i].name), errors++;
    histograms();
    if (lineno == 0) printf("no input\n"), errors++;
    if (errors) return 1;
    printf("ok: %d families, %d samples\n", nfams, nser);
    return 0;
}

/* fuzz_replay.c - replay fuzz inputs through LLVMFuzzerTestOneInput without
 * libFuzzer, so that a seed corpus (and every crash ever saved into it) runs
 * as a regression test with any C99 compiler.
 *
 *   fuzz_replay [FILE|DIR]...
 *
 * Runs a built-in set of hand-made edge cases, then every regular file named,
 * and every regular file directly inside each directory named (sorted, names
 * starting with '.' skipped). Each input runs in a child process, so one
 * input that aborts or crashes is one failure and the rest still run
 * (FUZZ_REPLAY_NOFORK=1 runs them in this process instead, for a debugger).
 * Closes with "N passed, N failed"; exit status 0 when none failed, else 1.
 *
 * A directory that cannot be read to the end, an entry that cannot be
 * examined, or a directory with no inputs is a failure, not a skip: a corpus
 * that silently replays nothing would pass.
 *
 *   gcc -std=c99 -D_POSIX_C_SOURCE=200809L -pthread tests/fuzz_replay.c \
 *       tests/fuzz_core.c tests/fake_odbc.c -o fuzz_replay
 */
/* 64-bit directory offsets and inode numbers on 32-bit glibc: without it,
 * readdir fails with EOVERFLOW on ext4 (hashed 64-bit offsets), e.g. armhf. */
#ifndef _FILE_OFFSET_BITS
#define _FILE_OFFSET_BITS 64
#endif
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_passed, replay_failed, replay_nofork;

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fputs("fuzz-replay: out of memory\n", stderr);
        exit(2);
    }
    return p;
}

/* Run one input; count it and report a failure by name. */
static void replay_one(const char *name, const uint8_t *data, size_t size) {
    pid_t pid;
    int status = 0;
    if (replay_nofork) {
        (void)LLVMFuzzerTestOneInput(data, size); /* a failure aborts the process */
        replay_passed++;
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "fuzz-replay: fork: %s; running in-process\n", strerror(errno));
        replay_nofork = 1;
        replay_one(name, data, size);
        return;
    }
    if (pid == 0) {
        (void)LLVMFuzzerTestOneInput(data, size);
        fflush(stdout);
        fflush(stderr);
        _exit(0);
    }
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "fuzz-replay: waitpid: %s\n", strerror(errno));
            status = -1;
            break;
        }
    }
    if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        replay_passed++;
    } else {
        replay_failed++;
        if (status != -1 && WIFSIGNALED(status))
            printf("FAIL fuzz-replay %s (%zu bytes): killed by signal %d\n", name, size,
                   WTERMSIG(status));
        else
            printf("FAIL fuzz-replay %s (%zu bytes): exit status %d\n", name, size,
                   status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
}

/* ---- built-in edge cases ------------------------------------------------------- */

/* A literal with its embedded NULs: sizeof - 1 drops only the final one. */
#define SEED(name, lit) {name, lit, sizeof(lit) - 1}

typedef struct seed {
    const char *name;
    const char *bytes;
    size_t len;
} seed;

static const seed fixed_seeds[] = {
    SEED("empty", ""),
    SEED("one NUL", "\0"),
    SEED("NULs", "\0\0\0\0\0\0\0\0"),
    SEED("abc", "abc"),
    SEED("identifiers", "_\0a\0A9_z\0" "9abc\0a-b\0a b\0outbox_messages\0__\0_9"),
    SEED("uuid lower", "0190a3b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b"),
    SEED("uuid upper", "0190A3B4-5C6D-7E8F-9A0B-1C2D3E4F5A6B"),
    SEED("uuid + byte", "0190a3b4-5c6d-7e8f-9a0b-1c2d3e4f5a6bx"),
    SEED("uuid bad dash", "0190a3b4-5c6d-7e8f_9a0b-1c2d3e4f5a6b"),
    SEED("uuid bad hex", "0190a3b4-5c6d-7e8f-9a0b-1c2d3e4f5a6g"),
    SEED("quotes and backslashes", "\"\0\\\0\\\"\0\"\\\0\\\\\0\"\"\0\\\0"),
    SEED("braces and brackets", "{\"a\",\"b\",NULL}\0[\"x\",null]\0{}\0[]\0{\0]\0,\0NULL\0null"),
    SEED("null markers", "\x01\0a\0\x01\0\x01\0b"),
    SEED("control bytes", "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10"
                          "\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x7f"),
    SEED("json escapes as text", "\\u0041\0\\u00\0\\\0\\n\\t\0\\/\0\\u00ff"),
    SEED("json unicode escapes", "\\ud83d\\ude00 \\u00e9\\u20ac\\uDBFF\\uDFFF\\b\\f\\r\"x"),
    SEED("json bad surrogates", "\\ud83d\0\\ude00\0\\ud83d\\u0041\0\\ud83d\\"),
    SEED("join payload text", "{\"joinId\":\"x\",\"onCompleteTopic\":null,\"onCompletePayload\":\"a\\\"b\","
                              "\"onFailTopic\":\"t\",\"onFailPayload\":\"\\u0001\","
                              "\"failIfAnyStepFailed\":true}"),
    SEED("keys as values", "\"onCompleteTopic\":\0\"joinId\":\"\0\"onFailPayload\":null\0"
                           "\"failIfAnyStepFailed\":true\0x"),
    SEED("true false null", "true\0false\0null\0NULL\0\"true\""),
    SEED("utf-8", "h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93 \xf0\x9f\x98\x80"),
    SEED("bad utf-8", "\x80\xbf\xc0\xc1\xf5\xff\xfe\xed\xa0\x80"),
    SEED("int64 limits", "\xff\xff\xff\xff\xff\xff\xff\x7f\x00\x00\x00\x00\x00\x00\x00\x80"
                         "\xff\xff\xff\xff\xff\xff\xff\x7f\x00\x00\x00\x00\x00\x00\x00\x80"),
    SEED("selector ops", "\x60\x00\x13\x01\x00\x09\x02\x81\x0b\x03\x04\x00\x05\x01\x02\x03\x04"
                         "\x08\x10\x18\x20\x28\x30\x38\x40\x48\x50\x58\x60\x68\x70\x78\x80"),
    SEED("uuid counter end", "\x07\x10\x00\x00\x00\x00\x00\x00\x00\x00\x30\x00\x00\x00\x00\x00"
                             "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
};

/* Generated ones: a byte pattern of a given length. */
typedef enum { GEN_FILL, GEN_UP, GEN_DOWN, GEN_ALT, GEN_EVERY_NTH_NUL } gen_kind;

typedef struct gen_seed {
    const char *name;
    gen_kind kind;
    unsigned char a, b;
    size_t len;
} gen_seed;

static const gen_seed gen_seeds[] = {
    {"all 0xff, 64", GEN_FILL, 0xff, 0, 64},
    {"all 0xff, 4096", GEN_FILL, 0xff, 0, 4096},
    {"all 0x00, 256", GEN_FILL, 0x00, 0, 256},
    {"63 letters", GEN_FILL, 'a', 0, 63},
    {"64 letters", GEN_FILL, 'a', 0, 64},
    {"5000 quotes", GEN_FILL, '"', 0, 5000},
    {"5000 backslashes", GEN_FILL, '\\', 0, 5000},
    {"quote-backslash run", GEN_ALT, '"', '\\', 3001},
    {"brace run", GEN_ALT, '{', '}', 2000},
    {"bytes 0..255", GEN_UP, 0, 0, 256},
    {"bytes 255..0", GEN_DOWN, 0, 0, 256},
    {"600 one-byte items", GEN_EVERY_NTH_NUL, 'x', 2, 1200},
    {"control run", GEN_ALT, 0x01, 0x1f, 777},
    {"high bytes", GEN_ALT, 0x80, 0xc3, 999},
};

static uint8_t *gen_bytes(const gen_seed *g) {
    uint8_t *p = (uint8_t *)xmalloc(g->len);
    size_t i;
    for (i = 0; i < g->len; i++) {
        switch (g->kind) {
        case GEN_FILL: p[i] = g->a; break;
        case GEN_UP: p[i] = (uint8_t)(i & 0xffu); break;
        case GEN_DOWN: p[i] = (uint8_t)(0xffu - (i & 0xffu)); break;
        case GEN_ALT: p[i] = (i & 1u) ? g->b : g->a; break;
        case GEN_EVERY_NTH_NUL: p[i] = (i % g->b == g->b - 1u) ? 0 : g->a; break;
        }
    }
    return p;
}

/* ---- files ---------------------------------------------------------------------- */

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, got;
    if (!f) {
        printf("FAIL fuzz-replay %s: cannot open: %s\n", path, strerror(errno));
        replay_failed++;
        return -1;
    }
    do {
        if (cap - len < 4096) {
            cap = cap ? cap * 2 : 65536;
            buf = (uint8_t *)realloc(buf, cap);
            if (!buf) {
                fputs("fuzz-replay: out of memory\n", stderr);
                exit(2);
            }
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    if (ferror(f)) {
        printf("FAIL fuzz-replay %s: read error\n", path);
        replay_failed++;
    } else {
        replay_one(path, buf, len);
    }
    fclose(f);
    free(buf);
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void replay_path(const char *path) {
    struct stat st;
    DIR *dir;
    struct dirent *e;
    char **names = NULL;
    size_t count = 0, cap = 0, i;
    if (stat(path, &st) != 0) {
        printf("FAIL fuzz-replay %s: %s\n", path, strerror(errno));
        replay_failed++;
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        replay_file(path);
        return;
    }
    dir = opendir(path);
    if (!dir) {
        printf("FAIL fuzz-replay %s: cannot open directory: %s\n", path, strerror(errno));
        replay_failed++;
        return;
    }
    for (;;) {
        size_t n;
        char *full;
        errno = 0; /* readdir returns NULL both at the end and on error */
        e = readdir(dir);
        if (!e) {
            if (errno != 0) {
                printf("FAIL fuzz-replay %s: cannot read directory: %s\n", path, strerror(errno));
                replay_failed++;
            }
            break;
        }
        if (e->d_name[0] == '.') continue;
        n = strlen(path) + strlen(e->d_name) + 2;
        full = (char *)xmalloc(n);
        snprintf(full, n, "%s/%s", path, e->d_name);
        if (stat(full, &st) != 0) {
            printf("FAIL fuzz-replay %s: %s\n", full, strerror(errno));
            replay_failed++;
            free(full);
            continue;
        }
        if (!S_ISREG(st.st_mode)) {
            free(full);
            continue;
        }
        if (count == cap) {
            char **grown;
            cap = cap ? cap * 2 : 64;
            grown = (char **)realloc(names, cap * sizeof *names);
            if (!grown) {
                fputs("fuzz-replay: out of memory\n", stderr);
                exit(2);
            }
            names = grown;
        }
        names[count++] = full;
    }
    closedir(dir);
    if (count == 0) {
        printf("FAIL fuzz-replay %s: no inputs in this directory\n", path);
        replay_failed++;
    }
    if (count) qsort(names, count, sizeof *names, by_name);
    for (i = 0; i < count; i++) {
        replay_file(names[i]);
        free(names[i]);
    }
    free(names);
}

int main(int argc, char **argv) {
    size_t i;
    int a, builtin, files;
    const char *nofork = getenv("FUZZ_REPLAY_NOFORK");
    replay_nofork = nofork && nofork[0] && strcmp(nofork, "0") != 0;

    for (i = 0; i < sizeof fixed_seeds / sizeof fixed_seeds[0]; i++)
        replay_one(fixed_seeds[i].name, (const uint8_t *)fixed_seeds[i].bytes, fixed_seeds[i].len);
    for (i = 0; i < sizeof gen_seeds / sizeof gen_seeds[0]; i++) {
        uint8_t *p = gen_bytes(&gen_seeds[i]);
        replay_one(gen_seeds[i].name, p, gen_seeds[i].len);
        free(p);
    }
    builtin = replay_passed + replay_failed;
    for (a = 1; a < argc; a++) replay_path(argv[a]);
    files = replay_passed + replay_failed - builtin;

    printf("fuzz-replay: %d inputs (%d built-in, %d from files), %d failed\n",
           replay_passed + replay_failed, builtin, files, replay_failed);
    printf("%d passed, %d failed\n", replay_passed, replay_failed);
    return replay_failed ? 1 : 0;
}

/* malloc_count.c: counts every heap allocation of a process (LD_PRELOAD),
 * for the bench's whole-process figures: the library's own allocations go
 * through its hooks, but the driver manager's and the driver's do not.
 * Forwards to glibc's own entry points, so it needs no dlsym. */
#include <stddef.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);

long obx_bench_malloc_count = 0;

void *malloc(size_t n) {
    __atomic_add_fetch(&obx_bench_malloc_count, 1, __ATOMIC_RELAXED);
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t size) {
    __atomic_add_fetch(&obx_bench_malloc_count, 1, __ATOMIC_RELAXED);
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n) {
    __atomic_add_fetch(&obx_bench_malloc_count, 1, __ATOMIC_RELAXED);
    return __libc_realloc(p, n);
}

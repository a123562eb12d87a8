/* tests/ifunc_probe.c - runs tests/ifunc_probe.S's call; prints what it
 * returned and exits 0 only when that is 42 (armhf only). */
#include <stdio.h>

int ifunc_probe_call(void);

int main(void) {
    int got = ifunc_probe_call();
    printf("%d\n", got);
    return got == 42 ? 0 : 1;
}

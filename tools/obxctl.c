/* obxctl: look inside and operate an obx.h outbox or ibx.h inbox. */
#define OBX_IMPLEMENTATION
#define IBX_IMPLEMENTATION
#include "../obx.h"
#include "../ibx.h"
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("obxctl %s\n", obx_version());
        return 0;
    }
    fprintf(stderr, "obxctl: usage: obxctl --version\n");
    return 1;
}

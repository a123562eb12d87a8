/* obx.h's implementation alone, to link beside impl_ibx.c. */
#define OBX_IMPLEMENTATION
#include "../obx.h"

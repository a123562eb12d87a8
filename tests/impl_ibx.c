/* ibx.h's implementation alone, to link beside impl_obx.c. */
#define IBX_IMPLEMENTATION
#include "../ibx.h"

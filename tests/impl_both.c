/* Both implementations in one translation unit (also compiled as C++). */
#define OBX_IMPLEMENTATION
#include "../obx.h"
#define IBX_IMPLEMENTATION
#include "../ibx.h"

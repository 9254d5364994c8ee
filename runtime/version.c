/* Version string of the library. */
#include "../include/tensorjit.h"

const char *tj_version(void) { return TJ_VERSION_STRING; }

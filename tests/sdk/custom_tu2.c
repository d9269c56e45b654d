/* custom_tu2.c - logs an event defined in another translation unit. */
#include "custom_tu.h"

void custom_tu2_log(void) {
  ETCH_LOG(Tu, Shared, ChanA, ETCH_SET(from, 2), ETCH_SET(where, "tu2"));
}

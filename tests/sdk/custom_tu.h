/* custom_tu.h - a custom event declared in a header, defined in
 * custom_test.c and logged from custom_tu2.c too. */
#ifndef ETCH_TESTS_CUSTOM_TU_H
#define ETCH_TESTS_CUSTOM_TU_H

#include <etch/etch.h>

#define SHARED_FIELDS(F) F(int32, from) F(str, where)
ETCH_EVENT_DECLARE(Tu, Shared, SHARED_FIELDS);
ETCH_CHANNEL_DECLARE(ChanA);

/* Logs Tu.Shared {from: 2, where: "tu2"} (custom_tu2.c). */
void custom_tu2_log(void);

#endif

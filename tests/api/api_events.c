/*
 * api_events.c - every custom-event macro (etch/event.h) in a file that
 * only instruments: compiled as C and C++20, and with ETCH_COMPILE_OUT,
 * where the object must reference no etch symbol at all.
 */
#include <etch/etch.h>

#define API_EV_FIELDS(F) \
  F(int8, a)             \
  F(uint64, b)           \
  F(double, c)           \
  F(bool, d)             \
  F(str, e)              \
  F(wstr, f)             \
  F(u16str, g)           \
  F(float_array, h)
ETCH_EVENT_DECLARE(Api, Ev, API_EV_FIELDS);
ETCH_EVENT_DEFINE(Api, Ev, API_EV_FIELDS, ETCH_EVENT_IMPORTANT | ETCH_EVENT_SERIAL);
ETCH_CHANNEL_DECLARE(ApiChan);
ETCH_CHANNEL_DEFINE(ApiChan, "Api");
ETCH_CHANNEL_DEFINE(ApiChan2, "Api2");

int api_events_use(int n, const char *s, const float *fs);
int api_events_use(int n, const char *s, const float *fs) {
  static const uint16_t u16[] = {0x41, 0};
  ETCH_LOG(Api, Ev, ApiChan);
  ETCH_LOG(Api, Ev, ApiChan, ETCH_SET(a, (int8_t)n));
  ETCH_LOG(Api, Ev, (ApiChan, ApiChan2), ETCH_SET(a, (int8_t)n),
           ETCH_SET(b, (uint64_t)n), ETCH_SET(c, 1.5), ETCH_SET(d, true),
           ETCH_SET_STR(e, s, 2), ETCH_SET(f, L"w"), ETCH_SET(g, u16),
           ETCH_SET_ARRAY(h, fs, 2));
  {
    ETCH_LOG_SCOPE(Api, Ev, ApiChan, ETCH_SET(b, (uint64_t)n));
    n++;
  }
  {
    ETCH_LOG_SCOPE(Api, Ev, (ApiChan, ApiChan2));
    n++;
  }
  return n;
}

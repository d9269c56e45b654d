/*
 * api_macros.c - every instrumentation macro of <etch/etch.h>, in code that
 * is both C and C++ (api_macros_cxx.cpp includes this file). Compiled as
 * gnu11, C++11 and C++17 with -Wall -Wextra -Werror, and again with
 * -DETCH_COMPILE_OUT, where it must reference no etch__ symbol.
 *
 * api_use_all_macros() is also run (api_cxx_run) to check that the C++
 * build records what it should.
 */
#include <etch/common.h>
#include <etch/etch.h>
#include <etch/reader.h>

ETCH_CATEGORY_DEFINE(api_render, "api_render", "API test: rendering", "");
ETCH_CATEGORY_DEFINE(api_debug, "api_debug", "API test: verbose", "debug,slow");
ETCH_CATEGORY_DECLARE(api_render);
ETCH_COUNTER_DEFINE_INT(api_hits, "api hits");
ETCH_COUNTER_DEFINE_FLOAT(api_load, "api load");
ETCH_COUNTER_DEFINE_MEMORY(api_mem, "api memory");
ETCH_COUNTER_DEFINE_UNIT(api_reqs, "api requests", "requests");
ETCH_COUNTER_DECLARE(api_hits);

#ifdef __cplusplus
extern "C" {
#endif
int api_use_all_macros(int n, const char *label);
#ifdef __cplusplus
}
#endif

static int api_depth(int n) {
  ETCH_SCOPE(api_render, "recurse", ETCH_ARG_INT("n", n));
  return n > 0 ? 1 + api_depth(n - 1) : 0;
}

int api_use_all_macros(int n, const char *label) {
  const etch_track *track = etch_track_new("api async", 7, NULL);
  const etch_track *bytes = etch_counter_track_new(
      "api bytes", ETCH_UNIT_SIZE_BYTES, "bytes", etch_process_track());
  etch_category *dyn = etch_category_get("api_dynamic");
  uint64_t ts = etch_now();
  double ratio = 0.25 * n;
  int local = 42;

  etch_thread_set_name("api thread");
  etch_process_set_name("api process");
  {
    ETCH_SCOPE(api_render, "scope");
    ETCH_SCOPE(api_render, "scope with args", ETCH_ARG_INT("n", n),
               ETCH_ARG_BOOL("flag", true));
    ETCH_SCOPE(api_debug, "debug scope");
    ETCH_SCOPE_STR(api_render, label);
    ETCH_SCOPE_STR(api_render, label, ETCH_ARG_INT("n", n));
  }
  ETCH_SLICE_BEGIN(api_render, "slice");
  ETCH_SLICE_END(api_render);
  ETCH_SLICE_BEGIN(api_render, "slice with everything", ETCH_ARG_BOOL("b", false),
                   ETCH_ARG_INT("i", -n), ETCH_ARG_UINT("u", 7u),
                   ETCH_ARG_DOUBLE("d", ratio), ETCH_ARG_STRING("s", label),
                   ETCH_ARG_POINTER("p", &local), ETCH_TS(ts), ETCH_FLOW(1));
  ETCH_SLICE_END(api_render, ETCH_ARG_INT("result", n), ETCH_TS(ts + 10));
  ETCH_SLICE_BEGIN(api_render, "on a track", ETCH_TRACK(track));
  ETCH_SLICE_END(api_render, ETCH_TRACK(track));
  ETCH_INSTANT(api_render, "instant");
  ETCH_INSTANT(api_render, "renamed", ETCH_NAME(label), ETCH_FLOW_END(1));
  ETCH_INSTANT(api_debug, "debug instant", ETCH_ARG_STRING("why", "test"));
  ETCH_COUNTER(api_render, "count", n);
  ETCH_COUNTER(api_render, "bytes", 4096, ETCH_TRACK(bytes));
  ETCH_COUNTER_DOUBLE(api_render, "ratio", ratio);
  ETCH_COUNTER_DOUBLE(api_render, "ratio at", 0.5, ETCH_TS(ts + 20));
  ETCH_SLICE_BEGIN_C(dyn, label);
  ETCH_SLICE_END_C(dyn);
  ETCH_SLICE_BEGIN_C(dyn, "dynamic with args", ETCH_ARG_INT("n", n));
  ETCH_SLICE_END_C(dyn, ETCH_ARG_INT("n", n));
  ETCH_INSTANT_C(dyn, "dynamic instant");
  ETCH_INSTANT_C(dyn, "dynamic instant with args", ETCH_ARG_DOUBLE("d", 1.5));
  ETCH_COUNTER_C(dyn, "dynamic counter", n);
  ETCH_COUNTER_C(dyn, "dynamic counter on track", n, ETCH_TRACK(bytes));
  ETCH_COUNTER_SET(api_hits, n);
  ETCH_COUNTER_ADD(api_hits, 2);
  ETCH_COUNTER_SUB(api_hits, 1);
  ETCH_COUNTER_INC(api_hits);
  ETCH_COUNTER_DEC(api_hits);
  ETCH_COUNTER_SET_FLOAT(api_load, ratio);
  ETCH_COUNTER_ADD_FLOAT(api_load, 0.5);
  ETCH_COUNTER_ADD(api_mem, 4096);
  ETCH_COUNTER_INC(api_reqs);
  ETCH_BOOKMARK("api bookmark");
  ETCH_BOOKMARKF("api bookmark %d %s", n, label);
  ETCH_FRAME_MARK();
  ETCH_FRAME_BEGIN();
  ETCH_FRAME_END();
  if (n > 0)
    ETCH_INSTANT(api_render, "in an if without braces");
  else
    ETCH_INSTANT(api_render, "in the else");
  return api_depth(3) + (etch_category_enabled(&ETCH_CAT(api_render)) ? 1 : 0);
}

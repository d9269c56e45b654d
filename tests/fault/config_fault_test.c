/*
 * config_fault_test.c - libetch's config parser under allocation failure:
 * etch_config_new, etch_config_parse and etch_config_set, each allocation
 * failing in turn. A failed call leaves the config usable: the same call
 * made again on it, with no fault, gives the config it should.
 */
#include <etch/etch.h>
#include <string.h>

#include "base/base.h"
#include "fault.h"
#include "sdk/core/sdk.h"
#include "test.h"

static const char config_text[] =
    "categories=render*,io,-debug # the patterns\n"
    "buffer_kb=512; fill=discard; duration_ms=250\n"
    "output=trace-%p.pftrace; compression=none\n"
    "interceptor=console; interceptor.color=off\n"
    "interceptor.out=stderr; interceptor.color=on\n";

/* The config config_text makes, then "categories=gpu" and a third
 * interceptor option set on it. */
static void check_config(const etch_config *c, bool set_too) {
  ASSERT_EQ_STR(c->categories, set_too ? "gpu" : "render*,io,-debug");
  ASSERT_EQ_U64(c->buffer_kb, 512);
  ASSERT_EQ_INT(c->fill, ETCH_FILL_DISCARD);
  ASSERT_EQ_U64(c->duration_ms, 250);
  ASSERT_EQ_U64(c->reset_interval_ms, 1000);
  ASSERT_EQ_STR(c->output, "trace-%p.pftrace");
  ASSERT_EQ_INT(c->compression, 0);
  ASSERT_EQ_STR(c->interceptor, "console");
  ASSERT_EQ_U64(c->n_iopts, set_too ? 3 : 2);
  ASSERT_EQ_STR(c->iopt_keys[0], "color");
  ASSERT_EQ_STR(c->iopt_values[0], "on");
  ASSERT_EQ_STR(c->iopt_keys[1], "out");
  ASSERT_EQ_STR(c->iopt_values[1], "stderr");
  if (set_too) {
    ASSERT_EQ_STR(c->iopt_keys[2], "width");
    ASSERT_EQ_STR(c->iopt_values[2], "80");
  }
}

/* The same call again with the faults held (lifted): it must work on the
 * object the failed call left. */
#define AGAIN(rc, call)                         \
  do {                                          \
    fault_check_enomem(#call, rc);              \
    etch__fault_hold(true);                     \
    int rc2_ = (call);                          \
    etch__fault_hold(false);                    \
    if (rc2_) FAIL("%s again: %s", #call, etch_last_error()); \
  } while (0)

static int config_op(void *ctx) {
  (void)ctx;
  etch_config *c;
  int rc = etch_config_new(&c);
  if (rc) return rc;
  int first = ETCH_OK;
  rc = etch_config_parse(c, config_text);
  if (rc) {
    AGAIN(rc, etch_config_parse(c, config_text));
    first = rc;
  }
  check_config(c, false);
  rc = etch_config_set(c, "categories", "gpu");
  if (rc) {
    AGAIN(rc, etch_config_set(c, "categories", "gpu"));
    first = first ? first : rc;
  }
  rc = etch_config_set(c, "interceptor.width", "80");
  if (rc) {
    AGAIN(rc, etch_config_set(c, "interceptor.width", "80"));
    first = first ? first : rc;
  }
  check_config(c, true);
  etch_config_free(c);
  return first;
}

TEST(fault_config_parse_and_set) {
  fault_result r = fault_sweep("etch_config_parse/set", config_op, NULL);
  printf("  %llu allocations, %llu runs failed of %llu\n",
         (unsigned long long)r.allocs, (unsigned long long)r.failed,
         (unsigned long long)r.runs);
}

/*
 * svc_buffers_test.c - etchd end to end: the buffers' memory is capped:
 * terabytes refused, max_buffer_mb over all sessions together.
 */
#define _GNU_SOURCE
#include "svc_test.h"

/* By default the buffers of all sessions may take a quarter of physical
 * memory: 16 buffers of 4 TiB are refused with the reason. */
TEST(terabytes_of_buffers_are_refused) {
  svc s;
  svc_start(&s);
  raw r;
  raw_open(&r, s.cons, "ConsumerPort");
  char err[400], want[400];
  raw_enable(&r, sixteen_huge, err, sizeof err);
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  snprintf(want, sizeof want,
           "buffers of 68719476720 KiB in all are more than etchd allows: "
           "%llu KiB for all sessions' buffers, 0 KiB of it in use (etchd "
           "--max-buffer-mb)",
           (unsigned long long)pages * (unsigned long long)psz / 4 / 1024);
  ASSERT_STR_EQ(err, want);
  /* And a sane one is taken. */
  raw_enable(&r, "buffers { size_kb: 1024 }", err, sizeof err);
  ASSERT_STR_EQ(err, "");
  raw_close(&r);
  svc_stop(&s);
}

/* With --max-buffer-mb 64: 40 MiB for one session, then 30 MiB for
 * another is refused (70 in all), and taken once the first is freed. */
TEST(max_buffer_mb_caps_all_sessions_together) {
  svc s;
  svc_start_with(&s, "--max-buffer-mb", "64");
  raw a, b;
  raw_open(&a, s.cons, "ConsumerPort");
  raw_open(&b, s.cons, "ConsumerPort");
  char err[400];
  raw_enable(&a, "buffers { size_kb: 20480 } buffers { size_kb: 20480 }", err,
             sizeof err);
  ASSERT_STR_EQ(err, "");
  raw_enable(&b, "buffers { size_kb: 30720 }", err, sizeof err);
  ASSERT_STR_EQ(err, "buffers of 30720 KiB in all are more than etchd "
                     "allows: 65536 KiB for all sessions' buffers, 40960 KiB "
                     "of it in use (etchd --max-buffer-mb)");
  ASSERT_EQ_INT(log_lines(&s, "session refused: buffers of 30720 KiB"), 1);
  raw_enable(&b, "buffers { size_kb: 24576 }", err, sizeof err);
  ASSERT_STR_EQ(err, ""); /* 64 in all: at the limit is allowed */
  raw_invoke(&b, "FreeBuffers", NULL);
  etch_ipc_frame g;
  raw_last_reply(&b, &g);
  ASSERT_TRUE(g.success);
  raw_invoke(&a, "FreeBuffers", NULL);
  raw_last_reply(&a, &g);
  ASSERT_TRUE(g.success);
  raw_enable(&b, "buffers { size_kb: 65536 }", err, sizeof err);
  ASSERT_STR_EQ(err, "");
  raw_close(&a);
  raw_close(&b);
  svc_stop(&s);
}

/*
 * custom_events.c - self-describing custom events on channels, in one file.
 *
 *   ETCH_OUT=custom.pftrace ./custom_events
 *   ./custom_analyzer custom.pftrace      # reads them back by name and type
 *   etch query custom.pftrace "select name, key, display_value from slice
 *                              join args using (arg_set_id)"
 *
 * In a bigger program the field list and ETCH_EVENT_DECLARE go in a header,
 * ETCH_EVENT_DEFINE in one .c file.
 */
#include <etch/etch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

/* One field of every type. */
#define SAMPLE_FIELDS(F) \
  F(int8, i8)            \
  F(int16, i16)          \
  F(int32, i32)          \
  F(int64, i64)          \
  F(uint8, u8)           \
  F(uint16, u16)         \
  F(uint32, u32)         \
  F(uint64, u64)         \
  F(float, f32)          \
  F(double, f64)         \
  F(bool, flag)          \
  F(str, text)           \
  F(wstr, wide)          \
  F(u16str, utf16)       \
  F(uint8_array, bytes)  \
  F(int32_array, ints)   \
  F(double_array, reals)
ETCH_EVENT_DECLARE(Demo, Sample, SAMPLE_FIELDS);
ETCH_EVENT_DEFINE(Demo, Sample, SAMPLE_FIELDS, 0);

/* A setting every session should have, however late it starts. */
#define SETTING_FIELDS(F) \
  F(str, key)             \
  F(int64, value)
ETCH_EVENT_DECLARE(Demo, Setting, SETTING_FIELDS);
ETCH_EVENT_DEFINE(Demo, Setting, SETTING_FIELDS, ETCH_EVENT_IMPORTANT);

/* Work items from several threads, in the order they were numbered. */
#define JOB_FIELDS(F) F(uint32, id)
ETCH_EVENT_DECLARE(Demo, Job, JOB_FIELDS);
ETCH_EVENT_DEFINE(Demo, Job, JOB_FIELDS, ETCH_EVENT_SERIAL);

ETCH_CHANNEL_DEFINE(DemoChannel, "Demo");
ETCH_CHANNEL_DEFINE(VerboseChannel, "Verbose");

int main(void) {
  /* Channels are off until asked for: here for the whole process (a
   * session may also name them in its categories). */
  etch_channel_set("Demo", true);
  etch_init();

  ETCH_LOG(Demo, Setting, DemoChannel, ETCH_SET(key, "quality"),
           ETCH_SET(value, 3));

  static const uint8_t bytes[] = {1, 2, 3, 250};
  static const int32_t ints[] = {-1, 0, 1 << 30};
  static const double reals[] = {0.5, -2.25};
  static const uint16_t utf16[] = {0x48, 0x69, 0xD83D, 0xDE00}; /* "Hi" + emoji */
  ETCH_LOG(Demo, Sample, DemoChannel, ETCH_SET(i8, -8), ETCH_SET(i16, -1600),
           ETCH_SET(i32, -320000), ETCH_SET(i64, -6400000000ll),
           ETCH_SET(u8, 200), ETCH_SET(u16, 60000), ETCH_SET(u32, 4000000000u),
           ETCH_SET(u64, 18000000000000000000ull), ETCH_SET(f32, 1.5f),
           ETCH_SET(f64, 3.25), ETCH_SET(flag, true), ETCH_SET(text, "hello"),
           ETCH_SET(wide, L"w\u00e9de"), ETCH_SET_STR(utf16, utf16, 4),
           ETCH_SET_ARRAY(bytes, bytes, 4), ETCH_SET_ARRAY(ints, ints, 3),
           ETCH_SET_ARRAY(reals, reals, 2));

  /* Some fields only: the others are absent, not zero. */
  ETCH_LOG(Demo, Sample, DemoChannel, ETCH_SET(u32, 7),
           ETCH_SET_STR(text, "partial-and-more", 7));

  for (uint32_t id = 0; id < 3; id++) {
    /* A slice "Demo.Job" to the end of the block. */
    ETCH_LOG_SCOPE(Demo, Job, DemoChannel, ETCH_SET(id, id));
  }

  /* Needs both channels: Verbose is off, so this is not recorded. */
  ETCH_LOG(Demo, Sample, (DemoChannel, VerboseChannel), ETCH_SET(u8, 1));

  printf("logged custom events%s\n",
         getenv("ETCH_OUT") ? "" : " (set ETCH_OUT=file.pftrace to record)");
  return 0;
}

/*
 * encode.c - encoders of the messages etch writes in more than one place
 * (see encode.h).
 */
#include "proto/encode.h"

#include <string.h>

void etch__proto_thread_track(etch__pb_stream *s, uint64_t uuid, int32_t pid,
                              int32_t tid, const char *name, size_t name_len) {
  etch__pb_nested td, thd;
  etch__pb_nested_begin(s, ETCH_PKT_TRACK_DESCRIPTOR, &td);
  etch__pb_write_varint_field(s, ETCH_TD_UUID, uuid);
  etch__pb_nested_begin(s, ETCH_TD_THREAD, &thd);
  etch__pb_write_varint_field(s, ETCH_THD_PID, (uint64_t)pid);
  etch__pb_write_varint_field(s, ETCH_THD_TID, (uint64_t)tid);
  if (name_len) etch__pb_write_bytes_field(s, ETCH_THD_THREAD_NAME, name, name_len);
  etch__pb_nested_end(s, &thd);
  etch__pb_nested_end(s, &td);
}

void etch__proto_process_track(etch__pb_stream *s, uint64_t uuid, int32_t pid,
                               const char *cmdline, size_t cmdline_len,
                               const char *name) {
  etch__pb_nested td, pd;
  etch__pb_nested_begin(s, ETCH_PKT_TRACK_DESCRIPTOR, &td);
  etch__pb_write_varint_field(s, ETCH_TD_UUID, uuid);
  etch__pb_nested_begin(s, ETCH_TD_PROCESS, &pd);
  etch__pb_write_varint_field(s, ETCH_PD_PID, (uint64_t)pid);
  for (size_t i = 0; cmdline && i < cmdline_len;) {
    size_t n = strnlen(cmdline + i, cmdline_len - i);
    etch__pb_write_bytes_field(s, ETCH_PD_CMDLINE, cmdline + i, n);
    i += n + 1;
  }
  if (name) etch__pb_write_string_field(s, ETCH_PD_PROCESS_NAME, name);
  etch__pb_nested_end(s, &pd);
  etch__pb_nested_end(s, &td);
}

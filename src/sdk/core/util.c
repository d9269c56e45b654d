/*
 * util.c - the instants etch writes about itself, and the SDK's short
 * spin lock (its containers are base's, base/containers.h).
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/core/sdk.h"

void etch__put_etch_instant(etch__pb_stream *s, const char *name,
                            uint64_t track_uuid, const etch_note_arg *args,
                            uint32_t nargs) {
  etch__pb_nested te, da;
  etch__pb_nested_begin(s, ETCH_PKT_TRACK_EVENT, &te);
  etch__pb_write_varint_field(s, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  etch__pb_write_string_field(s, ETCH_TE_CATEGORIES, "etch");
  etch__pb_write_string_field(s, ETCH_TE_NAME, name);
  if (track_uuid) etch__pb_write_varint_field(s, ETCH_TE_TRACK_UUID, track_uuid);
  for (uint32_t i = 0; i < nargs; i++) {
    const etch_note_arg *a = &args[i];
    etch__pb_nested_begin(s, ETCH_TE_DEBUG_ANNOTATIONS, &da);
    etch__pb_write_string_field(s, ETCH_DA_NAME, a->name);
    if (a->str)
      etch__pb_write_string_field(s, ETCH_DA_STRING_VALUE, a->str);
    else
      etch__pb_write_varint_field(
          s, a->is_uint ? ETCH_DA_UINT_VALUE : ETCH_DA_INT_VALUE, a->value);
    etch__pb_nested_end(s, &da);
  }
  etch__pb_nested_end(s, &te);
}

void etch__spin_wait(uint32_t *l) {
  for (unsigned k = 0; __atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE);) {
    while (__atomic_load_n(l, __ATOMIC_RELAXED)) {
      if (++k > 100) {
        sched_yield();
        k = 0;
      } else {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
    }
  }
}

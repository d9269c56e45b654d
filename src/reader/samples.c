/*
 * samples.c - CPU samples: TracePacket.perf_sample (profile_packet.proto's
 * PerfSample) as libetch's sampler and Perfetto's traced_perf write it,
 * read into an etch_sample and handed to etch_reader_on_sample's callback.
 *
 * The sample's time is its packet's timestamp; its stack is an interned
 * callstack of its sequence, resolved through stacks.c into the reader-wide
 * stack_profile rows (so a sample and an allocation with the same stack
 * name the same callsite). Every byte may be hostile: a known field of
 * the wrong wire type is a malformed packet (the service's packet check,
 * src/proto/check.c, refuses the same), an iid the sequence does not
 * define is a sample without a stack (interned_data_missing counted).
 */
#include "reader/samples.h"

#include <string.h>

#include "proto/perfetto.h"
#include "reader/errors.h"
#include "reader/stacks.h"

int etch__rd_perf_sample_read(etch_reader *r, const rd_src *src,
                              const uint8_t *msg, size_t len,
                              rd_perf_sample *out) {
  memset(out, 0, sizeof *out);
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    switch (f.id) {
      case ETCH_PERF_SAMPLE_CPU:
        RD_EXPECT(f, ETCH_PB_VARINT, "PerfSample.cpu");
        out->cpu = (uint32_t)f.u;
        out->has_cpu = true;
        break;
      case ETCH_PERF_SAMPLE_PID:
        RD_EXPECT(f, ETCH_PB_VARINT, "PerfSample.pid");
        out->pid = (int32_t)(uint32_t)f.u;
        break;
      case ETCH_PERF_SAMPLE_TID:
        RD_EXPECT(f, ETCH_PB_VARINT, "PerfSample.tid");
        out->tid = (int32_t)(uint32_t)f.u;
        break;
      case ETCH_PERF_SAMPLE_CALLSTACK_IID:
        RD_EXPECT(f, ETCH_PB_VARINT, "PerfSample.callstack_iid");
        out->callstack_iid = f.u;
        out->has_stack = f.u != 0;
        break;
      case ETCH_PERF_SAMPLE_CPU_MODE:
        RD_EXPECT(f, ETCH_PB_VARINT, "PerfSample.cpu_mode");
        out->cpu_mode = (uint32_t)f.u;
        break;
      default:
        break;
    }
  }
  if (d.err) RD_DEC_FAIL(d);
  return 0;
}

int etch__rd_perf_sample_deliver(etch_reader *r, rd_seq *seq,
                                 const rd_perf_sample *ps, bool ts_ok,
                                 int64_t ts, uint64_t rec_off) {
  if (!ts_ok) {
    r->stats.clock_conversion_failed++;
    return 0;
  }
  int rc = 0;
  int64_t cs = ps->has_stack
                   ? etch__rd_stack_callsite(r, seq, ps->callstack_iid, &rc)
                   : -1;
  if (rc) return rc;
  if (!r->sample_cb) return 0;
  etch_sample s = {
      .ts = ts,
      .sequence_id = seq->id,
      .pid = ps->pid > 0 ? ps->pid : 0,
      .tid = ps->tid > 0 ? ps->tid : 0,
      .cpu = ps->cpu,
      .has_cpu = ps->has_cpu,
      .cpu_mode = ps->cpu_mode,
      .callsite_id = cs,
      .packet_offset = rec_off,
  };
  r->sample_cb(&s, r->sample_user);
  return 0;
}

ETCH_API int etch_reader_on_sample(etch_reader *r, etch_sample_cb cb, void *user) {
  if (!r) return etch__error(ETCH_EINVAL, "reader: NULL");
  if (r->ran) return etch__error(ETCH_ESTATE, "reader: already run");
  r->sample_cb = cb;
  r->sample_user = user;
  return 0;
}

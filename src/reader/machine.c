/*
 * machine.c - the machines of a multi-machine trace.
 *
 * Perfetto traces several machines into one file: a relay (traced_relay,
 * etchd --relay) forwards a machine's producers to the host's service,
 * which stamps TracePacket.machine_id (a number the relay chose, the "raw"
 * id) on every packet of theirs and writes for each machine what it knows
 * of it: a SystemInfo packet, and RemoteClockSync packets holding the
 * rounds of clock snapshots the relay and the host exchanged. The reader
 * gives each raw id a machine of its own, numbered from 1 as they first
 * appear (0 is the host, the packets without a machine_id), as
 * trace_processor's `machine` table numbers them.
 *
 * A machine's clocks are its own (clock.c keys them by machine), and so are
 * its tracks (a uuid of one machine never names a track of another), so
 * its processes and threads never merge with the host's even when their
 * pids are equal. Its timestamps are put on the host's timeline the way
 * trace_processor v58 puts them there (checked against it, tests/interop):
 *
 *   a timestamp whose packet names the trace clock (BOOTTIME) by id, in
 *   timestamp_clock_id or its sequence's defaults, becomes ts - offset,
 *   the offset estimated from RemoteClockSync below; a timestamp with no
 *   clock named is taken as it is, and one of another clock converts
 *   through the machine's own snapshots to its trace clock and is taken
 *   as that (trace_processor v58 applies no offset to either; Perfetto's
 *   SDK writes sequence-scoped clocks, so its relayed events keep the
 *   relayed machine's BOOTTIME).
 *
 * The offset: each SyncedClocks entry is a pair of snapshots, client (the
 * relayed machine) and host, taken in that order; two adjacent entries
 * i-1, i whose client BOOTTIME values are less than 30 s apart (unsigned:
 * an earlier one is not) make one round, t1c t1h t2c t2h, which gives two
 * estimates of the offset of a clock: (t1c + t2c) / 2 - t1h and
 * t2c - (t1h + t2h) / 2 (none when any of the four is 0 or missing); the
 * offset is the mean of every estimate of the packet (integer division,
 * truncated). A later packet's offset replaces an earlier one's;
 * timestamps decoded before the first are not moved (both tools convert as
 * they read, in file order). The client snapshots also join the machine's
 * clocks, so its other clocks convert through them.
 *
 * Every byte is the file's: a raw id is any 64-bit value, at most
 * RD_MAX_MACHINES machines are kept (then a packet of a new one is left
 * out), the clock arithmetic wraps.
 */
#include <stdlib.h>
#include <string.h>

#include "proto/perfetto.h"
#include "reader/clock.h"
#include "reader/errors.h"
#include "reader/machine.h"
#include "reader/reader_int.h"

int etch__rd_machines_init(etch_reader *r) {
  /* machines[0], the host */
  if (ETCH_VEC_PUSH(&r->machinev, rd_machine, {0})) return ETCH_ENOMEM;
  r->machines = ETCH_VEC_AT(&r->machinev, rd_machine);
  r->nmachines = 1;
  r->cur_machine = 0;
  r->last_machine = 0;
  return 0;
}

void etch__rd_machines_free(etch_reader *r) {
  for (uint32_t i = 1; i < r->nmachines; i++)
    etch__ptrmap_free(&r->machines[i].tracks);
  etch__vec_free(&r->machinev);
  r->machines = NULL;
  r->nmachines = 0;
}

int etch__rd_machine_of(etch_reader *r, uint64_t raw, uint32_t *out) {
  if (raw == 0) {
    *out = 0;
    return 0;
  }
  uint32_t last = r->last_machine;
  if (last && (uint64_t)r->machines[last].info.raw_id == raw) {
    *out = last;
    return 0;
  }
  for (uint32_t i = 1; i < r->nmachines; i++) {
    if ((uint64_t)r->machines[i].info.raw_id == raw) {
      r->last_machine = *out = i;
      return 0;
    }
  }
  if (r->nmachines >= RD_MAX_MACHINES)
    return etch__error(ETCH_ELIMIT, "more than %u machines", RD_MAX_MACHINES);
  if (ETCH_VEC_PUSH(&r->machinev, rd_machine, {0})) return ETCH_ENOMEM;
  r->machines = ETCH_VEC_AT(&r->machinev, rd_machine);
  uint32_t i = r->nmachines++;
  ETCH_DCHECK(i + 1 == ETCH_VEC_COUNT(&r->machinev, rd_machine));
  r->machines[i].info.id = i;
  r->machines[i].info.raw_id = (int64_t)raw;
  r->last_machine = *out = i;
  return 0;
}

/* ---- SystemInfo ------------------------------------------------------------------ */

int etch__rd_system_info(etch_reader *r, const rd_src *src, const uint8_t *msg,
                         size_t len) {
  ETCH_DCHECK(r->cur_machine < r->nmachines); /* an index it was given */
  etch_machine_info *mi = &r->machines[r->cur_machine].info;
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next(&d, &f)) {
    if (f.wt == ETCH_PB_VARINT) {
      if (f.id == ETCH_SYSINFO_NUM_CPUS) mi->num_cpus = (int64_t)(uint32_t)f.u;
      if (f.id == ETCH_SYSINFO_SYSTEM_RAM_BYTES)
        mi->system_ram_bytes = (int64_t)f.u;
      if (f.id == ETCH_SYSINFO_ANDROID_SDK_VERSION)
        mi->android_sdk_version = (int64_t)f.u;
      continue;
    }
    if (f.wt != ETCH_PB_LEN) continue;
    if (f.id == ETCH_SYSINFO_ANDROID_BUILD_FINGERPRINT) {
      if (!(mi->android_build_fingerprint = rd_pool_field(r, &f)))
        return ETCH_ELIMIT;
      continue;
    }
    if (f.id != ETCH_SYSINFO_UTSNAME) continue;
    etch__pb_dec ud;
    etch__pb_field uf;
    etch__pb_dec_init(&ud, f.data, f.len);
    while (etch__pb_next(&ud, &uf)) {
      const char **to = NULL;
      if (uf.wt != ETCH_PB_LEN) continue;
      switch (uf.id) {
        case ETCH_UTSNAME_SYSNAME: to = &mi->sysname; break;
        case ETCH_UTSNAME_VERSION: to = &mi->version; break;
        case ETCH_UTSNAME_RELEASE: to = &mi->release; break;
        case ETCH_UTSNAME_MACHINE: to = &mi->arch; break;
        default: continue;
      }
      if (!(*to = rd_pool_field(r, &uf))) return ETCH_ELIMIT;
    }
    if (ud.err) return etch__rd_fail_dec(r, src, &ud);
  }
  if (d.err) return etch__rd_fail_dec(r, src, &d);
  return 0;
}

/* ---- RemoteClockSync ------------------------------------------------------------- */

/* What one SyncedClocks entry says of the clocks the offset needs. */
typedef struct rcs_entry {
  uint64_t boot_client;          /* client BOOTTIME (0: none) */
  uint64_t tc_host, tc_client;   /* the trace clock on each side */
} rcs_entry;

/* The values of clocks BOOTTIME and `tc` in one ClockSnapshot (the last
 * one listed wins, as in trace_processor's map). */
static int snap_values(etch_reader *r, const rd_src *src, const uint8_t *msg,
                       size_t len, uint32_t tc, uint64_t *boot, uint64_t *tcv) {
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next(&d, &f)) {
    if (f.id != ETCH_CLOCKSNAP_CLOCKS || f.wt != ETCH_PB_LEN) continue;
    etch__pb_dec cd;
    etch__pb_field cf;
    uint64_t id = 0, ts = 0;
    etch__pb_dec_init(&cd, f.data, f.len);
    while (etch__pb_next(&cd, &cf)) {
      if (cf.wt != ETCH_PB_VARINT) continue;
      if (cf.id == ETCH_SNAPCLOCK_CLOCK_ID) id = cf.u;
      if (cf.id == ETCH_SNAPCLOCK_TIMESTAMP) ts = cf.u;
    }
    if (cd.err) return etch__rd_fail_dec(r, src, &cd);
    if (boot && id == ETCH_CLOCK_BOOTTIME) *boot = ts;
    if (id == tc) *tcv = ts;
  }
  if (d.err) return etch__rd_fail_dec(r, src, &d);
  return 0;
}

int etch__rd_remote_clock_sync(etch_reader *r, const rd_src *src, rd_seq *seq,
                               const uint8_t *msg, size_t len) {
  uint32_t tc = r->clocks.trace_clock;
  const uint64_t round_ns = 30ull * 1000000000ull;
  etch__pb_dec d;
  etch__pb_field f;
  rcs_entry prev = {0, 0, 0};
  bool have_prev = false;
  uint64_t sum = 0, n = 0;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next(&d, &f)) {
    if (f.id != ETCH_RCS_SYNCED_CLOCKS || f.wt != ETCH_PB_LEN) continue;
    rcs_entry e = {0, 0, 0};
    etch__pb_dec sd;
    etch__pb_field sf;
    etch__pb_dec_init(&sd, f.data, f.len);
    while (etch__pb_next(&sd, &sf)) {
      if (sf.wt != ETCH_PB_LEN) continue;
      int rc = 0;
      if (sf.id == ETCH_RCS_HOST_CLOCKS) {
        rc = snap_values(r, src, sf.data, sf.len, tc, NULL, &e.tc_host);
      } else if (sf.id == ETCH_RCS_CLIENT_CLOCKS) {
        rc = snap_values(r, src, sf.data, sf.len, tc, &e.boot_client,
                         &e.tc_client);
        /* The machine's own snapshot, as its service would take one. */
        if (!rc) rc = etch__rd_clock_snapshot(r, src, seq, sf.data, sf.len);
      }
      if (rc) return rc;
    }
    if (sd.err) return etch__rd_fail_dec(r, src, &sd);
    if (have_prev && e.boot_client - prev.boot_client < round_ns) {
      uint64_t t1h = prev.tc_host, t1c = prev.tc_client;
      uint64_t t2h = e.tc_host, t2c = e.tc_client;
      if (t1h && t1c && t2h && t2c) {
        /* Signed halves of the (wrapping) sums, differences wrapping. */
        uint64_t o1 = (uint64_t)((int64_t)(t1c + t2c) / 2) - t1h;
        uint64_t o2 = t2c - (uint64_t)((int64_t)(t1h + t2h) / 2);
        sum += o1 + o2;
        n += 2;
      }
    }
    prev = e;
    have_prev = true;
  }
  if (d.err) return etch__rd_fail_dec(r, src, &d);
  if (n && r->cur_machine) {
    ETCH_DCHECK(r->cur_machine < r->nmachines);
    etch_machine_info *mi = &r->machines[r->cur_machine].info;
    mi->has_clock_offset = true;
    mi->clock_offset = (int64_t)sum / (int64_t)n;
  }
  return 0;
}

/* ---- the public API ---------------------------------------------------------------- */

uint32_t etch_reader_machine_count(const etch_reader *r) {
  return r ? r->nmachines : 0;
}

int etch_reader_machine(const etch_reader *r, uint32_t id,
                        etch_machine_info *out) {
  if (!r || !out) return etch__error(ETCH_EINVAL, "reader: no machine info");
  if (id >= r->nmachines) {
    memset(out, 0, sizeof *out);
    return ETCH_ENOTFOUND;
  }
  *out = r->machines[id].info;
  return 0;
}

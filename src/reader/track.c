/*
 * track.c - the track table: tracks by machine and uuid (each machine's map)
 * and in creation order, and the resolution of the pid and tid their events
 * carry through their parents.
 */
#include <string.h>

#include "reader/machine.h"
#include "reader/track.h"

rd_track *etch__rd_track_in(etch_reader *r, uint32_t machine, uint64_t uuid,
                            bool create) {
  if (uuid == 0) return &r->global_track;
  etch_ptrmap *map = rd_machine_tracks(r, machine);
  rd_track *t = (rd_track *)etch__ptrmap_get(map, uuid);
  if (t || !create) return t;
  if (r->ntracks >= RD_MAX_TRACKS) {
    etch__error(ETCH_ELIMIT, "more than %u tracks", RD_MAX_TRACKS);
    return NULL;
  }
  t = (rd_track *)etch__arena_alloc(&r->track_arena, sizeof *t);
  if (!t) return NULL;
  memset(t, 0, sizeof *t);
  t->info.uuid = uuid;
  t->info.kind = ETCH_TRACK_NAMED;
  t->info.name = r->empty;
  t->info.counter_unit_name = r->empty;
  t->info.cmdline = r->empty;
  t->info.machine_id = machine;
  if (etch__ptrmap_put(map, uuid, t)) return NULL;
  if (ETCH_VEC_PUSH(&r->track_listv, rd_track *, t)) return NULL;
  r->track_list = ETCH_VEC_AT(&r->track_listv, rd_track *);
  r->ntracks++;
  ETCH_DCHECK(r->ntracks == ETCH_VEC_COUNT(&r->track_listv, rd_track *) &&
              r->ntracks <= RD_MAX_TRACKS);
  return t;
}

void etch__rd_track_resolve(etch_reader *r, rd_track *t) {
  if (t->res_gen == r->track_gen) return; /* track_gen starts at 1 */
  int32_t pid = 0, tid = 0;
  const rd_track *cur = t;
  for (int i = 0; cur && i < RD_MAX_NESTING; i++) {
    if (cur->info.kind == ETCH_TRACK_THREAD) {
      if (!tid) tid = cur->info.tid;
      if (cur->info.pid) {
        pid = cur->info.pid;
        break;
      }
    } else if (cur->info.kind == ETCH_TRACK_PROCESS) {
      pid = cur->info.pid;
      break;
    }
    if (!cur->info.parent_uuid || cur->info.parent_uuid == cur->info.uuid) break;
    cur = (const rd_track *)etch__ptrmap_get(
        rd_machine_tracks(r, cur->info.machine_id), cur->info.parent_uuid);
  }
  t->ev_pid = pid;
  t->ev_tid = tid;
  if (t->info.kind != ETCH_TRACK_PROCESS && t->info.kind != ETCH_TRACK_THREAD)
    t->info.pid = pid;
  else if (t->info.kind == ETCH_TRACK_THREAD && !t->info.pid)
    t->info.pid = pid;
  t->res_gen = r->track_gen;
}

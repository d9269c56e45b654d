/*
 * rdtwice.c - see rdtwice.h.
 */
#define _GNU_SOURCE
#include "rdtwice.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader/reader_priv.h"

__attribute__((format(printf, 3, 4))) static int fail(char *why,
                                                     size_t why_len,
                                                     const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, why_len, fmt, ap);
  va_end(ap);
  return 1;
}

typedef struct sink {
  FILE *f;
  etch_reader *r;
  uint64_t n, stop_after; /* 0: never stop */
} sink;

static void put_event(const etch_event *ev, void *user) {
  sink *s = (sink *)user;
  FILE *f = s->f;
  uint64_t dbits;
  memcpy(&dbits, &ev->counter_double, sizeof dbits);
  fprintf(f, "%d ts=%lld seq=%u track=%llu/%s pid=%d tid=%d cat=[%s] name=[%s]",
          (int)ev->type, (long long)ev->ts, ev->sequence_id,
          (unsigned long long)ev->track->uuid, ev->track->name, ev->pid,
          ev->tid, ev->category, ev->name);
  fprintf(f, " c=%d/%lld/%016llx off=%llu", ev->counter_is_double,
          (long long)ev->counter_int, (unsigned long long)dbits,
          (unsigned long long)ev->packet_offset);
  for (size_t i = 0; i < ev->flow_ids_count; i++)
    fprintf(f, " f%llu", (unsigned long long)ev->flow_ids[i]);
  for (size_t i = 0; i < ev->terminating_flow_ids_count; i++)
    fprintf(f, " t%llu", (unsigned long long)ev->terminating_flow_ids[i]);
  for (size_t i = 0; i < ev->args_count; i++) {
    const etch_arg *a = &ev->args[i];
    fprintf(f, " [%s|%s|%d|", a->flat_key, a->key, (int)a->type);
    switch (a->type) {
      case ETCH_VALUE_BOOL: fprintf(f, "%d", a->v.b); break;
      case ETCH_VALUE_INT: fprintf(f, "%lld", (long long)a->v.i); break;
      case ETCH_VALUE_UINT:
      case ETCH_VALUE_POINTER:
        fprintf(f, "%llu", (unsigned long long)a->v.u);
        break;
      case ETCH_VALUE_DOUBLE: {
        uint64_t b;
        memcpy(&b, &a->v.d, sizeof b);
        fprintf(f, "%016llx", (unsigned long long)b);
        break;
      }
      case ETCH_VALUE_STRING:
      case ETCH_VALUE_JSON: fprintf(f, "%s", a->v.s); break;
      default: break;
    }
    fputc(']', f);
  }
  fputc('\n', f);
  if (s->stop_after && ++s->n == s->stop_after) etch__reader_stop(s->r);
}

static void put_track(const etch_track_info *t, void *user) {
  fprintf((FILE *)user,
          "%llu kind=%d name=[%s] pid=%d tid=%d parent=%llu unit=%d/%s/%lld "
          "incr=%d\n",
          (unsigned long long)t->uuid, (int)t->kind, t->name, t->pid, t->tid,
          (unsigned long long)t->parent_uuid, t->counter_unit,
          t->counter_unit_name, (long long)t->unit_multiplier,
          t->is_incremental);
}

int rd_read(const uint8_t *data, size_t len, etch_reader_order order,
            bool fast, uint64_t stop_after, res *o) {
  memset(o, 0, sizeof *o);
  /* An exact-size copy, so that ASan sees any read past the end. */
  uint8_t *copy = malloc(len ? len : 1);
  if (len) memcpy(copy, data, len);
  FILE *ev = open_memstream(&o->events, &o->events_len);
  FILE *tr = open_memstream(&o->tracks, &o->tracks_len);
  etch_reader *r;
  if (etch_reader_open_memory(&r, copy, len)) {
    fclose(ev);
    fclose(tr);
    free(copy);
    return -1;
  }
  sink s = {.f = ev, .r = r, .stop_after = stop_after};
  etch_reader_set_order(r, order);
  etch__reader_set_fast(r, fast);
  etch_reader_on(r, NULL, NULL, put_event, &s);
  etch_reader_on_track(r, put_track, tr);
  o->rc = etch_reader_run(r);
  if (o->rc) snprintf(o->error, sizeof o->error, "%s", etch_last_error());
  etch_reader_get_stats(r, &o->stats);
  o->bounds_rc = etch_reader_time_bounds(r, &o->first, &o->last);
  o->fast_packets = etch__reader_fast_packets(r);
  etch_reader_close(r);
  fclose(ev);
  fclose(tr);
  free(copy);
  return 0;
}

void rd_free(res *o) {
  free(o->events);
  free(o->tracks);
}

int rd_compare(const res *a, const res *b, char *why, size_t why_len) {
  if (a->rc != b->rc || strcmp(a->error, b->error) != 0)
    return fail(why, why_len, "status %d \"%s\" (fast) vs %d \"%s\" (generic)",
                a->rc, a->error, b->rc, b->error);
  if (strcmp(a->events, b->events) != 0)
    return fail(why, why_len, "events differ:\n-- fast\n%s-- generic\n%s",
                a->events, b->events);
  if (strcmp(a->tracks, b->tracks) != 0)
    return fail(why, why_len, "tracks differ:\n-- fast\n%s-- generic\n%s",
                a->tracks, b->tracks);
  if (memcmp(&a->stats, &b->stats, sizeof a->stats) != 0)
    return fail(why, why_len,
                "stats differ (packets %llu/%llu, track_events %llu/%llu, "
                "interned_data_missing %llu/%llu, skipped %llu/%llu)",
                (unsigned long long)a->stats.packets,
                (unsigned long long)b->stats.packets,
                (unsigned long long)a->stats.track_events,
                (unsigned long long)b->stats.track_events,
                (unsigned long long)a->stats.interned_data_missing,
                (unsigned long long)b->stats.interned_data_missing,
                (unsigned long long)
                    a->stats.packet_skipped_seq_needs_incremental_state_invalid,
                (unsigned long long)b->stats
                    .packet_skipped_seq_needs_incremental_state_invalid);
  if (a->bounds_rc != b->bounds_rc || a->first != b->first ||
      a->last != b->last)
    return fail(why, why_len, "time bounds differ");
  return 0;
}

/*
 * fault_read.c - a trace read through the public reader into text: every
 * track, event, custom event and stat, so that two readings compare
 * exactly. Every reader call's status is returned to the caller.
 */
#include "fault_read.h"

#include <inttypes.h>
#include <string.h>

static void on_track(const etch_track_info *t, void *user) {
  fault_read_ctx *c = (fault_read_ctx *)user;
  if (c->stable)
    fault_printf(&c->out, "track %d \"%s\"\n", t->kind, t->name);
  else
    fault_printf(&c->out,
                 "track %" PRIu64 " %d \"%s\" pid=%d tid=%d parent=%" PRIu64
                 "\n",
                 t->uuid, t->kind, t->name, t->pid, t->tid, t->parent_uuid);
}

static void put_arg(fault_str *b, const etch_arg *a) {
  fault_printf(b, " %s|%s=", a->flat_key, a->key);
  switch (a->type) {
    case ETCH_VALUE_BOOL: fault_printf(b, "b:%d", a->v.b); break;
    case ETCH_VALUE_INT: fault_printf(b, "i:%" PRId64, a->v.i); break;
    case ETCH_VALUE_UINT: fault_printf(b, "u:%" PRIu64, a->v.u); break;
    case ETCH_VALUE_DOUBLE: fault_printf(b, "d:%g", a->v.d); break;
    case ETCH_VALUE_STRING: fault_printf(b, "s:%s", a->v.s); break;
    case ETCH_VALUE_POINTER: fault_printf(b, "p:%" PRIx64, a->v.u); break;
    case ETCH_VALUE_JSON: fault_printf(b, "j:%s", a->v.s); break;
    default: fault_printf(b, "null"); break;
  }
}

static void on_event(const etch_event *ev, void *user) {
  fault_read_ctx *c = (fault_read_ctx *)user;
  fault_str *b = &c->out;
  if (c->stable)
    fault_printf(b, "ev %d track=\"%s\"", ev->type, ev->track->name);
  else
    fault_printf(b,
                 "ev %d %" PRId64 " seq=%u track=%" PRIu64 " pid=%d tid=%d",
                 ev->type, ev->ts, ev->sequence_id, ev->track->uuid, ev->pid,
                 ev->tid);
  fault_printf(b, " cat=%s name=%s", ev->category, ev->name);
  if (ev->type == ETCH_EVENT_COUNTER) {
    if (ev->counter_is_double)
      fault_printf(b, " value=%g", ev->counter_double);
    else
      fault_printf(b, " value=%" PRId64, ev->counter_int);
  }
  for (size_t i = 0; i < ev->flow_ids_count; i++)
    fault_printf(b, " flow=%" PRIu64, ev->flow_ids[i]);
  for (size_t i = 0; i < ev->terminating_flow_ids_count; i++)
    fault_printf(b, " term=%" PRIu64, ev->terminating_flow_ids[i]);
  for (size_t i = 0; i < ev->args_count; i++)
    if (!c->stable || strcmp(ev->args[i].key, "debug.etch.serial"))
      put_arg(b, &ev->args[i]);
  if (ev->after_loss) fault_printf(b, " after_loss");
  fault_printf(b, "\n");
}

static void on_custom(const etch_custom_event *ev, void *user) {
  fault_read_ctx *c = (fault_read_ctx *)user;
  fault_str *b = &c->out;
  fault_printf(b, "custom %s cat=%s type=%d", ev->name, ev->category,
               ev->type);
  if (ev->has_serial)
    fault_printf(b, " serial=%" PRIu64, c->stable ? 0 : ev->serial);
  if (ev->important_id) fault_printf(b, " important");
  for (size_t i = 0; i < ev->nfields; i++) {
    const etch_custom_field *f = &ev->fields[i];
    fault_printf(b, " %s:%u", f->name, f->type);
    if (!f->set) {
      fault_printf(b, "=unset");
    } else if (f->str) {
      fault_printf(b, "=\"%s\"", f->str);
    } else if (f->array) {
      fault_printf(b, "=[%zu]", f->count);
      const uint8_t *p = (const uint8_t *)f->array;
      for (size_t k = 0; k < f->count && k < 4; k++)
        fault_printf(b, "%02x", p[k]);
    } else {
      fault_printf(b, "=%" PRIx64, f->v.u);
    }
  }
  fault_printf(b, "\n");
}

int fault_read(fault_read_ctx *c) {
  fault_str_free(&c->out);
  fault_printf(&c->out, "%s", "");
  etch_reader *r = NULL;
  int rc = c->path ? etch_reader_open_file(&r, c->path)
                   : etch_reader_open_memory(&r, c->data, c->len);
  if (rc) return rc;
  if (!rc) rc = etch_reader_set_order(r, c->order);
  if (!rc) rc = etch_reader_on(r, NULL, NULL, on_event, c);
  if (!rc && c->named) rc = etch_reader_on(r, c->named, NULL, on_event, c);
  if (!rc) rc = etch_reader_on_track(r, on_track, c);
  if (!rc) rc = etch_reader_route(r, 7, NULL, NULL, on_custom, c);
  if (!rc) rc = etch_reader_run(r);
  if (!rc) {
    etch_reader_stats st;
    etch_reader_get_stats(r, &st);
    int64_t first = 0, last = 0;
    int brc = etch_reader_time_bounds(r, &first, &last);
    if (c->stable) {
      /* A writer that could not note a track descriptor as written (out
       * of memory) writes it again with its next event: one packet more,
       * the same trace. */
      st.bytes = 0;
      st.packets = 0;
      first = last = 0;
    }
    fault_printf(&c->out, "stats");
    const uint64_t *v = (const uint64_t *)&st;
    for (size_t i = 0; i < sizeof st / sizeof *v; i++)
      fault_printf(&c->out, " %" PRIu64, v[i]);
    fault_printf(&c->out, "\nbounds %d %" PRId64 " %" PRId64 "\n", brc, first,
                 last);
  }
  etch_reader_close(r);
  return rc;
}

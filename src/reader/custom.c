/*
 * custom.c - custom events (etch/event.h) for analyzers: the schemas the
 * trace carries, routes by logger and event name, fields by name and type,
 * serial order and important events delivered once.
 *
 * Schemas arrive in InternedData (ETCH_ID_EVENT_SCHEMAS) and are kept for
 * the whole read by event name (a later, different schema of the same name
 * replaces it). A routed event is built from the delivered event's args:
 * "debug.<field>" for scalars and strings, "debug.<field>[i]" for array
 * elements, a NULL arg for an empty array.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/map.h"
#include "proto/perfetto.h"
#include "reader/custom.h"
#include "reader/deliver.h"
#include "reader/errors.h"
#include "reader/track.h"
#include "reader/reader_int.h"

#define MAX_FIELDS 256
/* Serial events held for ordering: released once this much later (trace
 * time) than the newest delivered event, or when too many are held. */
#define SERIAL_WINDOW_NS 100000000ll
#define SERIAL_MAX_HELD 65536

typedef struct rd_schema {
  const char *name, *logger, *event; /* pooled */
  uint32_t flags;
  uint32_t nfields;
  const char **fname; /* pooled */
  uint32_t *ftype;
} rd_schema;

typedef struct rd_route {
  uint32_t id;
  const char *logger, *event; /* NULL: any */
  etch_custom_cb cb;
  void *user;
} rd_route;

/* A routed event, self-contained (held ones outlive the callback). */
typedef struct cev {
  etch_custom_event pub;
  etch_custom_field *fields;
  const rd_schema *schema;
  size_t size;
} cev;

typedef struct rd_custom {
  etch_vec schemav;   /* of rd_schema */
  rd_schema *schemas; /* its array (set as it moves) */
  size_t n;
  etch_u64map by_name; /* pooled name -> index */
  etch_vec routev;  /* of rd_route */
  rd_route *routes; /* its array (set as it moves) */
  size_t nroutes;
  etch_u64map seen_important; /* pid:id -> 1 */
  /* Serial events waiting for their turn: a min-heap by (pid, serial). */
  etch_vec heldv; /* held's bytes; its len follows nheld at each push */
  cev **held;
  size_t nheld;
  etch_u64map next_serial; /* pid -> the next serial expected */
} rd_custom;

static rd_custom *custom_get(etch_reader *r) {
  if (!r->custom) r->custom = (rd_custom *)etch__calloc(1, sizeof(rd_custom));
  return r->custom;
}

/* ---- schemas --------------------------------------------------------------------------- */

int etch__rd_schema(etch_reader *r, const rd_src *src, const uint8_t *msg,
                    size_t len) {
  rd_custom *c = custom_get(r);
  if (!c) return ETCH_ENOMEM;
  etch__pb_dec d;
  etch__pb_field f;
  rd_schema s;
  memset(&s, 0, sizeof s);
  const char *names[MAX_FIELDS];
  uint32_t types[MAX_FIELDS];
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    if (f.wt == ETCH_PB_LEN && f.id == ETCH_SCHEMA_NAME) {
      if (!(s.name = rd_pool_field(r, &f))) return ETCH_ENOMEM;
    } else if (f.wt == ETCH_PB_LEN && f.id == ETCH_SCHEMA_LOGGER) {
      if (!(s.logger = rd_pool_field(r, &f))) return ETCH_ENOMEM;
    } else if (f.wt == ETCH_PB_LEN && f.id == ETCH_SCHEMA_EVENT) {
      if (!(s.event = rd_pool_field(r, &f))) return ETCH_ENOMEM;
    } else if (f.wt == ETCH_PB_VARINT && f.id == ETCH_SCHEMA_FLAGS) {
      s.flags = (uint32_t)f.u;
    } else if (f.id == ETCH_SCHEMA_FIELD) {
      RD_EXPECT(f, ETCH_PB_LEN, "EventSchema.field");
      if (s.nfields == MAX_FIELDS)
        return etch__rd_fail(r, src, f.data, ETCH_ELIMIT,
                             "custom event schema with more than %d fields",
                             MAX_FIELDS);
      const char *fname = NULL;
      uint32_t ftype = 0;
      etch__pb_dec fd;
      etch__pb_field ff;
      etch__pb_dec_init(&fd, f.data, f.len);
      while (etch__pb_next(&fd, &ff)) {
        if (ff.wt == ETCH_PB_LEN && ff.id == ETCH_SFIELD_NAME) {
          if (!(fname = rd_pool_field(r, &ff))) return ETCH_ENOMEM;
        } else if (ff.wt == ETCH_PB_VARINT && ff.id == ETCH_SFIELD_TYPE) {
          ftype = (uint32_t)ff.u;
        }
      }
      if (fd.err) return etch__rd_fail_dec(r, src, &fd);
      names[s.nfields] = fname ? fname : r->empty;
      types[s.nfields] = ftype;
      s.nfields++;
    }
  }
  if (d.err) return etch__rd_fail_dec(r, src, &d);
  if (!s.name) return 0; /* nothing to key it by */
  if (!s.logger) s.logger = r->empty;
  if (!s.event) s.event = r->empty;

  int64_t at;
  if (etch__u64map_get(&c->by_name, (uint64_t)(uintptr_t)s.name, &at)) {
    rd_schema *o = &c->schemas[at];
    bool same = o->flags == s.flags && o->nfields == s.nfields &&
                o->logger == s.logger && o->event == s.event;
    for (uint32_t i = 0; same && i < s.nfields; i++)
      same = o->fname[i] == names[i] && o->ftype[i] == types[i];
    if (same) return 0; /* re-emitted after a reset, or another thread's */
  } else {
    at = -1;
  }
  s.fname = (const char **)etch__arena_alloc(&r->track_arena,
                                    (s.nfields + 1) * sizeof *s.fname);
  s.ftype = (uint32_t *)etch__arena_alloc(&r->track_arena,
                                 (s.nfields + 1) * sizeof *s.ftype);
  if (!s.fname || !s.ftype) return ETCH_ENOMEM;
  memcpy(s.fname, names, s.nfields * sizeof *names);
  memcpy(s.ftype, types, s.nfields * sizeof *types);
  if (at >= 0) {
    c->schemas[at] = s;
    return 0;
  }
  if (ETCH_VEC_RESERVE(&c->schemav, rd_schema, 1)) return ETCH_ENOMEM;
  c->schemas = ETCH_VEC_AT(&c->schemav, rd_schema); /* it may have moved */
  if (!etch__u64map_put(&c->by_name, (uint64_t)(uintptr_t)s.name,
                        (int64_t)c->n))
    return ETCH_ENOMEM;
  (void)ETCH_VEC_PUSH(&c->schemav, rd_schema, s); /* room made above */
  c->schemas = ETCH_VEC_AT(&c->schemav, rd_schema);
  c->n++;
  return 0;
}

/* ---- building a routed event -------------------------------------------------------------- */

static bool is_array(uint32_t t) {
  uint32_t e = t & ~(uint32_t)ETCH_FIELD_ARRAY;
  return (t & ETCH_FIELD_ARRAY) && e >= ETCH_FIELD_INT8 &&
         e <= ETCH_FIELD_DOUBLE;
}

static bool is_string(uint32_t t) {
  return t == ETCH_FIELD_STR || t == ETCH_FIELD_WSTR || t == ETCH_FIELD_U16STR;
}

/* An arg's value as int64, uint64 and double. */
static void arg_nums(const etch_arg *a, int64_t *i, uint64_t *u, double *d) {
  switch (a->type) {
    case ETCH_VALUE_BOOL: *i = a->v.b; *u = a->v.b; *d = a->v.b; return;
    case ETCH_VALUE_INT: *i = a->v.i; *u = (uint64_t)a->v.i; *d = (double)a->v.i; return;
    case ETCH_VALUE_UINT: case ETCH_VALUE_POINTER:
      *i = (int64_t)a->v.u; *u = a->v.u; *d = (double)a->v.u; return;
    case ETCH_VALUE_DOUBLE:
      *d = a->v.d;
      *i = a->v.d >= -9.2e18 && a->v.d <= 9.2e18 ? (int64_t)a->v.d : 0;
      *u = a->v.d >= 0 && a->v.d <= 1.8e19 ? (uint64_t)a->v.d : 0;
      return;
    default: *i = 0; *u = 0; *d = 0; return;
  }
}

/* A double as a float without undefined behaviour: out of range is
 * infinite. */
static float to_float(double d) {
  if (d > 3.4028234663852886e38) return HUGE_VALF;
  if (d < -3.4028234663852886e38) return -HUGE_VALF;
  return (float)d;
}

static void store_elem(uint8_t *p, uint32_t e, const etch_arg *a) {
  int64_t i;
  uint64_t u;
  double d;
  arg_nums(a, &i, &u, &d);
  switch (e) {
    case ETCH_FIELD_INT8: { int8_t v = (int8_t)i; memcpy(p, &v, 1); break; }
    case ETCH_FIELD_INT16: { int16_t v = (int16_t)i; memcpy(p, &v, 2); break; }
    case ETCH_FIELD_INT32: { int32_t v = (int32_t)i; memcpy(p, &v, 4); break; }
    case ETCH_FIELD_INT64: memcpy(p, &i, 8); break;
    case ETCH_FIELD_UINT8: { uint8_t v = (uint8_t)u; memcpy(p, &v, 1); break; }
    case ETCH_FIELD_UINT16: { uint16_t v = (uint16_t)u; memcpy(p, &v, 2); break; }
    case ETCH_FIELD_UINT32: { uint32_t v = (uint32_t)u; memcpy(p, &v, 4); break; }
    case ETCH_FIELD_UINT64: memcpy(p, &u, 8); break;
    case ETCH_FIELD_FLOAT: { float v = to_float(d); memcpy(p, &v, 4); break; }
    default: memcpy(p, &d, 8); break;
  }
}

/* The field an arg belongs to: its index, or -1. *elem: an array element. */
static int arg_field(const rd_schema *s, const etch_arg *a, bool *elem) {
  const char *fk = a->flat_key;
  if (strncmp(fk, "debug.", 6) != 0) return -1;
  fk += 6;
  *elem = strcmp(a->key, a->flat_key) != 0;
  for (uint32_t i = 0; i < s->nfields; i++)
    if (strcmp(s->fname[i], fk) == 0) return (int)i;
  return -1;
}

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

/* Builds the routed form of `ev` (schema `s`) in one allocation. */
static cev *cev_build(etch_reader *r, const etch_event *ev, const rd_schema *s,
                      const rd_track *t) {
  size_t counts[MAX_FIELDS] = {0};
  size_t size = align8(sizeof(cev)) + align8(s->nfields * sizeof(etch_custom_field));
  for (size_t k = 0; k < ev->args_count; k++) {
    const etch_arg *a = &ev->args[k];
    bool elem;
    int fi = arg_field(s, a, &elem);
    if (fi < 0) continue;
    if (elem) counts[fi]++;
    if (a->type == ETCH_VALUE_STRING || a->type == ETCH_VALUE_JSON)
      size += strlen(a->v.s) + 1;
  }
  for (uint32_t i = 0; i < s->nfields; i++)
    if (is_array(s->ftype[i]))
      size += align8(counts[i] * etch__field_elem_size(s->ftype[i] & ~(uint32_t)ETCH_FIELD_ARRAY));
  size_t catlen = strlen(ev->category) + 1;
  size += catlen;
  uint8_t *blob = (uint8_t *)etch__calloc(1, size);
  if (!blob) return NULL;
  cev *c = (cev *)(void *)blob;
  c->size = size;
  c->schema = s;
  uint8_t *p = blob + align8(sizeof(cev));
  c->fields = (etch_custom_field *)(void *)p;
  p += align8(s->nfields * sizeof(etch_custom_field));
  for (uint32_t i = 0; i < s->nfields; i++) {
    c->fields[i].name = s->fname[i];
    c->fields[i].type = s->ftype[i];
    if (is_array(s->ftype[i])) {
      c->fields[i].array = p;
      p += align8(counts[i] * etch__field_elem_size(s->ftype[i] & ~(uint32_t)ETCH_FIELD_ARRAY));
    }
  }
  etch_custom_event *e = &c->pub;
  for (size_t k = 0; k < ev->args_count; k++) {
    const etch_arg *a = &ev->args[k];
    if (strcmp(a->flat_key, "debug.etch.serial") == 0) {
      e->has_serial = a->type == ETCH_VALUE_UINT || a->type == ETCH_VALUE_INT;
      e->serial = a->v.u;
      continue;
    }
    if (strcmp(a->flat_key, "debug.etch.important") == 0) {
      if (a->type == ETCH_VALUE_UINT || a->type == ETCH_VALUE_INT)
        e->important_id = a->v.u;
      continue;
    }
    bool elem;
    int fi = arg_field(s, a, &elem);
    if (fi < 0) continue;
    etch_custom_field *f = &c->fields[fi];
    uint32_t t_ = f->type;
    if (is_array(t_)) {
      f->set = true;
      if (!elem || a->type == ETCH_VALUE_NULL) continue;
      uint32_t et = t_ & ~(uint32_t)ETCH_FIELD_ARRAY;
      store_elem((uint8_t *)(uintptr_t)f->array + f->count * etch__field_elem_size(et), et, a);
      f->count++;
    } else if (is_string(t_)) {
      if (elem || (a->type != ETCH_VALUE_STRING && a->type != ETCH_VALUE_JSON))
        continue;
      size_t n = strlen(a->v.s);
      memcpy(p, a->v.s, n + 1);
      f->str = (const char *)p;
      f->len = n;
      f->set = true;
      p += n + 1;
    } else if (!elem && a->type != ETCH_VALUE_NULL &&
               a->type != ETCH_VALUE_STRING && a->type != ETCH_VALUE_JSON) {
      int64_t i;
      uint64_t u;
      double d;
      arg_nums(a, &i, &u, &d);
      if (t_ >= ETCH_FIELD_INT8 && t_ <= ETCH_FIELD_INT64)
        f->v.i = i;
      else if (t_ >= ETCH_FIELD_UINT8 && t_ <= ETCH_FIELD_UINT64)
        f->v.u = u;
      else if (t_ == ETCH_FIELD_BOOL)
        f->v.b = u != 0;
      else
        f->v.d = d;
      f->set = true;
    }
  }
  char *cat = (char *)p;
  memcpy(cat, ev->category, catlen);
  e->reader = r;
  e->logger = s->logger;
  e->event = s->event;
  e->name = s->name;
  e->category = cat;
  e->type = ev->type;
  e->ts = ev->ts;
  e->pid = ev->pid;
  e->tid = ev->tid;
  e->track_uuid = ev->track ? ev->track->uuid : 0;
  e->thread_id = 0;
  /* The nearest thread track among the track and its parents. */
  for (const rd_track *x = t; x; ) {
    if (x->info.kind == ETCH_TRACK_THREAD) {
      e->thread_id = x->info.uuid;
      break;
    }
    if (!x->info.parent_uuid || x->info.parent_uuid == x->info.uuid) break;
    x = etch__rd_track_in(r, x->info.machine_id, x->info.parent_uuid, false);
  }
  e->nfields = s->nfields;
  e->fields = c->fields;
  return c;
}

/* ---- delivery --------------------------------------------------------------------------- */

static void dispatch(etch_reader *r, rd_custom *c, cev *e) {
  for (size_t i = 0; i < c->nroutes && !r->stop; i++) {
    const rd_route *ro = &c->routes[i];
    if (ro->logger && ro->logger != e->schema->logger) continue;
    if (ro->event && ro->event != e->schema->event) continue;
    e->pub.route = ro->id;
    ro->cb(&e->pub, ro->user);
  }
}

static bool held_less(const cev *a, const cev *b) {
  if (a->pub.pid != b->pub.pid) return a->pub.pid < b->pub.pid;
  return a->pub.serial < b->pub.serial;
}

static void heap_up(cev **h, size_t i) {
  while (i) {
    size_t p = (i - 1) / 2;
    if (!held_less(h[i], h[p])) break;
    cev *t = h[i];
    h[i] = h[p];
    h[p] = t;
    i = p;
  }
}

static void heap_down(cev **h, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, m = i;
    if (l < n && held_less(h[l], h[m])) m = l;
    if (l + 1 < n && held_less(h[l + 1], h[m])) m = l + 1;
    if (m == i) return;
    cev *t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

static cev *heap_pop(rd_custom *c) {
  cev *top = c->held[0];
  c->held[0] = c->held[--c->nheld];
  heap_down(c->held, c->nheld, 0);
  return top;
}

/* Releases held serial events whose turn has come: the next serial of
 * their process, or any once they are old enough (a serial that never
 * comes: another session's, or lost) or `all`. */
static void release(etch_reader *r, rd_custom *c, int64_t now, bool all) {
  while (c->nheld && !r->stop) {
    cev *e = c->held[0];
    int64_t next = 0;
    bool known = etch__u64map_get(&c->next_serial, (uint64_t)(uint32_t)e->pub.pid,
                                  &next);
    bool turn = known && (uint64_t)next == e->pub.serial;
    int64_t age;
    if (__builtin_sub_overflow(now, e->pub.ts, &age)) age = now < 0 ? 0 : INT64_MAX;
    if (!turn && !all && c->nheld < SERIAL_MAX_HELD && age < SERIAL_WINDOW_NS)
      return;
    heap_pop(c);
    etch__u64map_put(&c->next_serial, (uint64_t)(uint32_t)e->pub.pid,
                     (int64_t)(e->pub.serial + 1));
    dispatch(r, c, e);
    free(e);
  }
}

static void on_event(const etch_event *ev, void *user) {
  etch_reader *r = (etch_reader *)user;
  rd_custom *c = r->custom;
  if (!c || !c->n || r->stop) return;
  int64_t at;
  if (!etch__u64map_get(&c->by_name, (uint64_t)(uintptr_t)ev->name, &at))
    return;
  const rd_schema *s = &c->schemas[at];
  bool any = false;
  for (size_t i = 0; i < c->nroutes && !any; i++)
    any = (!c->routes[i].logger || c->routes[i].logger == s->logger) &&
          (!c->routes[i].event || c->routes[i].event == s->event);
  if (!any) return;
  rd_track *t = ev->track ? etch__rd_track_in(r, ev->track->machine_id,
                                               ev->track->uuid, false)
                          : NULL;
  cev *e = cev_build(r, ev, s, t);
  if (!e) {
    r->stop = true; /* out of memory: etch_reader_run reports it */
    r->custom_oom = true;
    return;
  }
  if (e->pub.important_id) {
    uint64_t key = ((uint64_t)(uint32_t)e->pub.pid << 32) ^ e->pub.important_id;
    bool had = false;
    etch__u64map_swap(&c->seen_important, key, 1, NULL, &had);
    if (had) {
      free(e);
      return;
    }
  }
  if (!e->pub.has_serial) {
    dispatch(r, c, e);
    free(e);
    release(r, c, ev->ts, false);
    return;
  }
  c->heldv.len = c->nheld * sizeof *c->held; /* the heap pops in place */
  if (ETCH_VEC_RESERVE(&c->heldv, cev *, 1)) {
    free(e);
    r->stop = true;
    r->custom_oom = true;
    return;
  }
  c->held = ETCH_VEC_AT(&c->heldv, cev *);
  /* A process's first serials wait out the window (the smallest may come
   * later); one behind those already released (its window passed) goes
   * next. */
  int64_t next;
  if (etch__u64map_get(&c->next_serial, (uint64_t)(uint32_t)e->pub.pid,
                       &next) &&
      (uint64_t)next > e->pub.serial)
    etch__u64map_put(&c->next_serial, (uint64_t)(uint32_t)e->pub.pid,
                     (int64_t)e->pub.serial);
  c->held[c->nheld++] = e;
  heap_up(c->held, c->nheld - 1);
  release(r, c, ev->ts, false);
}

int etch__rd_custom_finish(etch_reader *r) {
  rd_custom *c = r->custom;
  if (!c) return 0;
  release(r, c, INT64_MAX, true);
  if (r->custom_oom)
    return etch__error(ETCH_ENOMEM, "out of memory building custom events");
  return 0;
}

void etch__rd_custom_free(etch_reader *r) {
  rd_custom *c = r->custom;
  if (!c) return;
  for (size_t i = 0; i < c->nheld; i++) free(c->held[i]);
  etch__vec_free(&c->heldv);
  etch__vec_free(&c->schemav);
  etch__vec_free(&c->routev);
  etch__u64map_free(&c->by_name);
  etch__u64map_free(&c->seen_important);
  etch__u64map_free(&c->next_serial);
  free(c);
  r->custom = NULL;
}

/* ---- public API --------------------------------------------------------------------------- */

int etch_reader_route(etch_reader *r, uint32_t route_id, const char *logger,
                      const char *event, etch_custom_cb cb, void *user) {
  if (!r || !cb) return etch__error(ETCH_EINVAL, "reader: NULL callback");
  if (r->ran) return etch__error(ETCH_ESTATE, "reader: already run");
  rd_custom *c = custom_get(r);
  if (!c) return ETCH_ENOMEM;
  if (ETCH_VEC_RESERVE(&c->routev, rd_route, 1)) return ETCH_ENOMEM;
  c->routes = ETCH_VEC_AT(&c->routev, rd_route);
  rd_route *ro = &c->routes[c->nroutes]; /* counted once it is whole */
  ro->id = route_id;
  ro->logger = logger ? etch__strpool_get(&r->pool, logger, strlen(logger)) : NULL;
  ro->event = event ? etch__strpool_get(&r->pool, event, strlen(event)) : NULL;
  if ((logger && !ro->logger) || (event && !ro->event)) return ETCH_ENOMEM;
  ro->cb = cb;
  ro->user = user;
  c->routev.len += sizeof *ro;
  /* One subscription feeds every route. */
  if (c->nroutes++ == 0) return etch__rd_subscribe(r, NULL, NULL, on_event, r);
  return 0;
}

void etch_reader_stop(etch_reader *r) {
  if (r) r->stop = true;
}

const etch_custom_field *etch_event_get_field(const etch_custom_event *ev,
                                          const char *name) {
  if (!ev || !name) return NULL;
  for (size_t i = 0; i < ev->nfields; i++)
    if (strcmp(ev->fields[i].name, name) == 0) return &ev->fields[i];
  return NULL;
}

bool etch_event_has(const etch_custom_event *ev, const char *name) {
  const etch_custom_field *f = etch_event_get_field(ev, name);
  return f && f->set;
}

/* A set numeric field's value as int64, uint64 and double. */
static bool field_nums(const etch_custom_event *ev, const char *name,
                       int64_t *i, uint64_t *u, double *d) {
  *i = 0;
  *u = 0;
  *d = 0;
  const etch_custom_field *f = etch_event_get_field(ev, name);
  if (!f || !f->set || is_array(f->type) || is_string(f->type)) return false;
  if (f->type >= ETCH_FIELD_INT8 && f->type <= ETCH_FIELD_INT64) {
    *i = f->v.i;
    *u = (uint64_t)f->v.i;
    *d = (double)f->v.i;
  } else if (f->type >= ETCH_FIELD_UINT8 && f->type <= ETCH_FIELD_UINT64) {
    *i = (int64_t)f->v.u;
    *u = f->v.u;
    *d = (double)f->v.u;
  } else if (f->type == ETCH_FIELD_BOOL) {
    *i = f->v.b;
    *u = f->v.b;
    *d = f->v.b;
  } else {
    *d = f->v.d;
    *i = f->v.d >= -9.2e18 && f->v.d <= 9.2e18 ? (int64_t)f->v.d : 0;
    *u = f->v.d >= 0 && f->v.d <= 1.8e19 ? (uint64_t)f->v.d : 0;
  }
  return true;
}

int64_t etch_event_get_i64(const etch_custom_event *ev, const char *name) {
  int64_t i; uint64_t u; double d;
  field_nums(ev, name, &i, &u, &d);
  return i;
}
uint64_t etch_event_get_u64(const etch_custom_event *ev, const char *name) {
  int64_t i; uint64_t u; double d;
  field_nums(ev, name, &i, &u, &d);
  return u;
}
int32_t etch_event_get_i32(const etch_custom_event *ev, const char *name) {
  return (int32_t)etch_event_get_i64(ev, name);
}
uint32_t etch_event_get_u32(const etch_custom_event *ev, const char *name) {
  return (uint32_t)etch_event_get_u64(ev, name);
}
int16_t etch_event_get_i16(const etch_custom_event *ev, const char *name) {
  return (int16_t)etch_event_get_i64(ev, name);
}
uint16_t etch_event_get_u16(const etch_custom_event *ev, const char *name) {
  return (uint16_t)etch_event_get_u64(ev, name);
}
int8_t etch_event_get_i8(const etch_custom_event *ev, const char *name) {
  return (int8_t)etch_event_get_i64(ev, name);
}
uint8_t etch_event_get_u8(const etch_custom_event *ev, const char *name) {
  return (uint8_t)etch_event_get_u64(ev, name);
}
double etch_event_get_f64(const etch_custom_event *ev, const char *name) {
  int64_t i; uint64_t u; double d;
  field_nums(ev, name, &i, &u, &d);
  return d;
}
float etch_event_get_f32(const etch_custom_event *ev, const char *name) {
  return to_float(etch_event_get_f64(ev, name));
}
bool etch_event_get_bool(const etch_custom_event *ev, const char *name) {
  return etch_event_get_u64(ev, name) != 0;
}

const char *etch_event_get_str(const etch_custom_event *ev, const char *name,
                               size_t *len) {
  const etch_custom_field *f = etch_event_get_field(ev, name);
  if (len) *len = 0;
  if (!f || !f->set || !is_string(f->type)) return NULL;
  if (len) *len = f->len;
  return f->str;
}

const void *etch_event_get_array(const etch_custom_event *ev, const char *name,
                                 size_t *count) {
  const etch_custom_field *f = etch_event_get_field(ev, name);
  if (count) *count = 0;
  if (!f || !f->set || !is_array(f->type)) return NULL;
  if (count) *count = f->count;
  return f->array;
}

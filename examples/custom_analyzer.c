/*
 * custom_analyzer.c - reads custom events back by logger and event name,
 * with no compiled knowledge of them: every field by its name and type from
 * the schema the trace carries.
 *
 *   ./custom_analyzer custom.pftrace
 */
#include <etch/reader.h>
#include <inttypes.h>
#include <stdio.h>

enum { ROUTE_SETTING = 1, ROUTE_ANY = 2 };

static void print_field(const etch_custom_field *f) {
  printf("  %s = ", f->name);
  if (!f->set) {
    printf("(unset)\n");
    return;
  }
  uint32_t t = f->type;
  if (t & ETCH_FIELD_ARRAY) {
    uint32_t e = t & ~(uint32_t)ETCH_FIELD_ARRAY;
    printf("[");
    for (size_t i = 0; i < f->count; i++) {
      const void *a = f->array;
      if (i) printf(", ");
      switch (e) {
        case ETCH_FIELD_UINT8: printf("%u", ((const uint8_t *)a)[i]); break;
        case ETCH_FIELD_INT32: printf("%d", ((const int32_t *)a)[i]); break;
        case ETCH_FIELD_DOUBLE: printf("%g", ((const double *)a)[i]); break;
        default: printf("?"); break;
      }
    }
    printf("]\n");
  } else if (t == ETCH_FIELD_STR || t == ETCH_FIELD_WSTR ||
             t == ETCH_FIELD_U16STR) {
    printf("\"%s\"\n", f->str);
  } else if (t == ETCH_FIELD_FLOAT || t == ETCH_FIELD_DOUBLE) {
    printf("%g\n", f->v.d);
  } else if (t == ETCH_FIELD_BOOL) {
    printf("%s\n", f->v.b ? "true" : "false");
  } else if (t >= ETCH_FIELD_UINT8 && t <= ETCH_FIELD_UINT64) {
    printf("%" PRIu64 "\n", f->v.u);
  } else {
    printf("%" PRId64 "\n", f->v.i);
  }
}

static void on_event(const etch_custom_event *ev, void *user) {
  (void)user;
  if (ev->route == ROUTE_SETTING) {
    printf("setting %s = %" PRId64 "\n", etch_event_get_str(ev, "key", NULL),
           etch_event_get_i64(ev, "value"));
    return;
  }
  printf("%s on %s, thread %d%s", ev->name, ev->category, (int)ev->tid,
         ev->type == ETCH_EVENT_SLICE_BEGIN ? " (scope)" : "");
  if (ev->has_serial) printf(", serial %" PRIu64, ev->serial);
  printf("\n");
  for (size_t i = 0; i < ev->nfields; i++) print_field(&ev->fields[i]);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s TRACE\n", argv[0]);
    return 2;
  }
  etch_reader *r;
  if (etch_reader_open_file(&r, argv[1]) != ETCH_OK) {
    fprintf(stderr, "%s\n", etch_last_error());
    return 1;
  }
  etch_reader_route(r, ROUTE_SETTING, "Demo", "Setting", on_event, NULL);
  etch_reader_route(r, ROUTE_ANY, "Demo", "Sample", on_event, NULL);
  etch_reader_route(r, ROUTE_ANY, "Demo", "Job", on_event, NULL);
  int rc = etch_reader_run(r);
  if (rc != ETCH_OK) fprintf(stderr, "%s\n", etch_last_error());
  etch_reader_close(r);
  return rc == ETCH_OK ? 0 : 1;
}

/*
 * fuzz_custom.c - libFuzzer target: custom events (etch/event.h) read from
 * hostile traces. Runs the reader with routes to every custom event, in both
 * delivery orders, and reads every field through every getter, so that
 * schemas, routed events, serial ordering and important-event dedup all see
 * the input. The reader must answer bad input with an error, never a crash.
 *
 *   build-fuzz/fuzz/fuzz_custom -max_len=65536 corpus-copy/ fuzz/corpus/custom/
 */
#include <etch/reader.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t sink;

static void on_custom(const etch_custom_event *ev, void *user) {
  (void)user;
  sink += strlen(ev->logger) + strlen(ev->event) + strlen(ev->name) +
          strlen(ev->category);
  sink += (size_t)(ev->ts ^ ev->pid ^ ev->tid ^ (int64_t)ev->thread_id ^
                   (int64_t)ev->serial ^ (int64_t)ev->important_id);
  for (size_t i = 0; i < ev->nfields; i++) {
    const etch_custom_field *f = &ev->fields[i];
    sink += strlen(f->name) + f->type + f->set;
    sink += (size_t)etch_event_get_i64(ev, f->name);
    sink += (size_t)etch_event_get_u8(ev, f->name);
    sink += etch_event_get_f32(ev, f->name) > 0;
    sink += etch_event_get_f64(ev, f->name) < 0;
    sink += etch_event_get_bool(ev, f->name);
    size_t len = 0;
    const char *s = etch_event_get_str(ev, f->name, &len);
    if (s) sink += strlen(s) + len;
    size_t n = 0;
    const uint8_t *a = (const uint8_t *)etch_event_get_array(ev, f->name, &n);
    if (a && n) {
      uint32_t e = f->type & ~(uint32_t)ETCH_FIELD_ARRAY;
      size_t es = e == ETCH_FIELD_INT8 || e == ETCH_FIELD_UINT8     ? 1
                  : e == ETCH_FIELD_INT16 || e == ETCH_FIELD_UINT16 ? 2
                  : e == ETCH_FIELD_INT32 || e == ETCH_FIELD_UINT32 ||
                          e == ETCH_FIELD_FLOAT
                      ? 4
                      : 8;
      sink += a[0] + a[n * es - 1];
    }
  }
  if (etch_event_get_field(ev, "stop") && etch_event_has(ev, "stop"))
    etch_reader_stop(ev->reader);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  for (int order = 0; order < 2; order++) {
    etch_reader *r;
    if (etch_reader_open_memory(&r, data, size)) return 0;
    etch_reader_set_order(r, (etch_reader_order)order);
    etch_reader_route(r, 1, NULL, NULL, on_custom, NULL);
    etch_reader_route(r, 2, "L", NULL, on_custom, NULL);
    etch_reader_route(r, 3, NULL, "E", on_custom, NULL);
    etch_reader_run(r);
    etch_reader_close(r);
  }
  return 0;
}

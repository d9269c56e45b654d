/*
 * basic.c - a small program instrumented with etch.
 *
 *   ETCH_OUT=basic.pftrace ./basic      # or: etch record -o basic.pftrace ./basic
 *
 * Two worker threads render "frames" (nested slices with args), an I/O
 * thread hands work over with flows, and counters track the queue.
 */
#include <etch/etch.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

ETCH_CATEGORY_DEFINE(render, "render", "Frame rendering", "");
ETCH_CATEGORY_DEFINE(io, "io", "File and network I/O", "");
ETCH_CATEGORY_DEFINE(debug, "debug", "Verbose internals", "debug");

static void spin_us(long us) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 <
           us);
}

static void draw(int frame, int items) {
  ETCH_SCOPE(render, "draw", ETCH_ARG_INT("frame", frame),
             ETCH_ARG_INT("items", items));
  for (int i = 0; i < items; i++) {
    ETCH_SCOPE(render, "draw_item");
    ETCH_INSTANT(debug, "item_detail", ETCH_ARG_INT("i", i));
    spin_us(20);
  }
}

static void *worker(void *arg) {
  long id = (long)arg;
  char name[32];
  snprintf(name, sizeof name, "render-%ld", id);
  etch_thread_set_name(name);
  for (int frame = 0; frame < 5; frame++) {
    ETCH_SLICE_BEGIN(render, "frame", ETCH_ARG_STRING("worker", name),
                     ETCH_FLOW(1000 * id + frame));
    draw(frame, 3 + (int)id);
    ETCH_SLICE_END(render);
    ETCH_COUNTER(render, "frames_done", frame + 1);
  }
  return NULL;
}

static void *io_thread(void *arg) {
  (void)arg;
  etch_thread_set_name("io");
  for (int frame = 0; frame < 5; frame++) {
    for (long id = 1; id <= 2; id++) {
      ETCH_SCOPE(io, "load", ETCH_ARG_INT("frame", frame),
                 ETCH_FLOW(1000 * id + frame));
      spin_us(50);
    }
    ETCH_COUNTER_DOUBLE(io, "queue_fill", 0.25 * (frame % 4));
  }
  return NULL;
}

int main(void) {
  etch_init();
  etch_process_set_name("etch-basic-example");
  ETCH_INSTANT(render, "startup", ETCH_ARG_BOOL("cold", true));
  pthread_t io, w1, w2;
  pthread_create(&io, NULL, io_thread, NULL);
  pthread_join(io, NULL);
  pthread_create(&w1, NULL, worker, (void *)1L);
  pthread_create(&w2, NULL, worker, (void *)2L);
  pthread_join(w1, NULL);
  pthread_join(w2, NULL);
  printf("basic: done\n");
  return 0;
}

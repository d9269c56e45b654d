/*
 * ui_trace.c - the ui tests' trace (ui_trace.h says what is in it).
 */
#include "ui_trace.h"

#include <stdio.h>

void ui_test_trace(tb *t) {
  const int B = ETCH_TE_TYPE_SLICE_BEGIN, E = ETCH_TE_TYPE_SLICE_END,
            I = ETCH_TE_TYPE_INSTANT;
  tb_process(t, 1, UI_PROC, 10, "app");
  tb_thread(t, 1, UI_MAIN, 10, 10, "main");
  tb_thread(t, 2, UI_WORKER, 10, 11, "worker");
  tb_counter_track(t, 1, UI_HEAP, UI_PROC, "heap", ETCH_CD_UNIT_SIZE_BYTES);

  tb_event_open(t, 1, 1000, UI_MAIN, B, "render", "frame");
  tb_f64(t, ETCH_TE_FLOW_IDS, 9);
  tb_open(t, ETCH_TE_DEBUG_ANNOTATIONS);
  tb_s(t, ETCH_DA_NAME, "n");
  tb_u(t, ETCH_DA_INT_VALUE, 3);
  tb_close(t);
  tb_event_close(t);
  tb_counter(t, 1, 1000, UI_HEAP, 100);
  tb_event(t, 1, 2000, UI_MAIN, B, "render", "draw");
  tb_event_open(t, 2, 5000, UI_WORKER, B, "work", "job");
  tb_f64(t, ETCH_TE_TERMINATING_FLOW_IDS, 9);
  tb_event_close(t);
  tb_event(t, 1, 42000, UI_MAIN, E, NULL, NULL);
  tb_event(t, 1, 45000, UI_MAIN, I, "render", "vsync");
  tb_event(t, 1, 50000, UI_MAIN, B, "render", "draw");
  tb_counter(t, 1, 50000, UI_HEAP, 300);
  tb_event(t, 2, 60000, UI_WORKER, E, NULL, NULL);
  /* What the SDK writes after it dropped events: 5 lost here. */
  tb_event_open(t, 2, 65000, UI_WORKER, I, "etch", "etch.dropped_events");
  tb_open(t, ETCH_TE_DEBUG_ANNOTATIONS);
  tb_s(t, ETCH_DA_NAME, "count");
  tb_u(t, ETCH_DA_INT_VALUE, 5);
  tb_close(t);
  tb_event_close(t);
  tb_event(t, 2, 70000, UI_WORKER, B, "work", "job");
  tb_event(t, 2, 80000, UI_WORKER, B, "work", "io");
  tb_event(t, 1, 90000, UI_MAIN, E, NULL, NULL);
  tb_event(t, 1, 95000, UI_MAIN, B, "render", "tiny_a");
  tb_event(t, 1, 95100, UI_MAIN, E, NULL, NULL);
  tb_event(t, 1, 95150, UI_MAIN, B, "render", "tiny_b");
  tb_event(t, 1, 95450, UI_MAIN, E, NULL, NULL);
  tb_event(t, 1, 95500, UI_MAIN, B, "render", "tiny_c");
  tb_event(t, 1, 95600, UI_MAIN, E, NULL, NULL);
  tb_event(t, 2, 100000, UI_WORKER, E, NULL, NULL);
  tb_event(t, 1, 101000, UI_MAIN, E, NULL, NULL);
  tb_event(t, 1, 110000, UI_MAIN, B, "render", "frame");
  tb_event(t, 1, 120000, UI_MAIN, B, "render", "draw");
  tb_event(t, 2, 150000, UI_WORKER, E, NULL, NULL);
  tb_counter(t, 1, 150000, UI_HEAP, 200);
  tb_event(t, 1, 180000, UI_MAIN, E, NULL, NULL);
  tb_event(t, 1, 200000, UI_MAIN, E, NULL, NULL);
}

void ui_zone_trace(tb *t) {
  const int B = ETCH_TE_TYPE_SLICE_BEGIN, E = ETCH_TE_TYPE_SLICE_END;
  tb_process(t, 1, UI_ZONE_PROC, 20, "zone");
  tb_thread(t, 1, UI_ZONE_LOOP, 20, 20, "loop");
  tb_counter_track(t, 1, UI_ZONE_LOAD, UI_ZONE_PROC, "load",
                   ETCH_CD_UNIT_COUNT);
  int64_t ts = 1000;
  tb_event(t, 1, ts, UI_ZONE_LOOP, B, "zone", "run");
  for (int k = 0; k < 100; k++) {
    tb_event(t, 1, ts, UI_ZONE_LOOP, B, "zone", "step");
    tb_counter(t, 1, ts, UI_ZONE_LOAD, k + 1);
    ts += UI_ZONE_DUR(k);
    tb_event(t, 1, ts, UI_ZONE_LOOP, E, NULL, NULL);
  }
  tb_event(t, 1, ts, UI_ZONE_LOOP, E, NULL, NULL);
  tb_counter(t, 1, ts, UI_ZONE_LOAD, 0);
}

void ui_flame_trace(tb *t) {
  const int B = ETCH_TE_TYPE_SLICE_BEGIN, E = ETCH_TE_TYPE_SLICE_END;
  tb_process(t, 1, UI_FLAME_PROC, 30, "big");
  tb_thread(t, 1, UI_FLAME_WORK, 30, 30, "work");
  int64_t ts = 1000;
  char name[16];
  for (int k = 0; k < UI_FLAME_FRAMES; k++) {
    tb_event(t, 1, ts, UI_FLAME_WORK, B, "big", "frame");
    ts += 10;
    for (int j = 0; j < 150; j++) {
      int idx = (j * 37 + k * 11) % 300;
      int64_t dur = 100 + (idx * 7919) % 900;
      snprintf(name, sizeof name, "fn_%03d", idx);
      tb_event(t, 1, ts, UI_FLAME_WORK, B, "big", name);
      if (idx % 3 == 0) {
        snprintf(name, sizeof name, "leaf_%d", (idx / 3 + k) % 5);
        tb_event(t, 1, ts + 1, UI_FLAME_WORK, B, "big", name);
        tb_event(t, 1, ts + 1 + dur / 2, UI_FLAME_WORK, E, NULL, NULL);
      }
      ts += dur;
      tb_event(t, 1, ts, UI_FLAME_WORK, E, NULL, NULL);
    }
    ts += 10;
    tb_event(t, 1, ts, UI_FLAME_WORK, E, NULL, NULL);
  }
}

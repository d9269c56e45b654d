/*
 * ui_trace.h - the small trace the ui's tests look at (the C tests and the
 * browser tests, through ui_trace_gen), written byte by byte with
 * tests/trace_build.h:
 *
 *   process app (pid 10): threads main (10) and worker (11), a counter
 *   track heap (bytes) of the process;
 *   main:   frame [1000, 101000) {arg n = 3, flow 9 out}
 *             > draw [2000, 42000), vsync instant 45000,
 *               draw [50000, 90000), tiny_a [95000, 95100),
 *               tiny_b [95150, 95450), tiny_c [95500, 95600)
 *           frame [110000, 200000) > draw [120000, 180000)
 *   worker: job [5000, 60000) {flow 9 in}, etch.dropped_events instant
 *           65000 {count 5}, job [70000, 150000) > io [80000, 100000)
 *   heap:   100 @1000, 300 @50000, 200 @150000
 *
 * And a second trace, for the Find zone, the time axis zoomed in and
 * back-to-back slices (ui_zone_trace):
 *
 *   process zone (pid 20): thread loop (20), a counter track load of the
 *   process;
 *   loop:   run [1000, 1000 + the steps' total) > 100 back-to-back steps,
 *           the k-th (k = 0..99) UI_ZONE_DUR(k) long: a permutation of
 *           1, 2, ..., 100 us;
 *   load:   k + 1 at the k-th step's start, 0 at the run's end.
 */
#ifndef ETCH_TESTS_UI_TRACE_H
#define ETCH_TESTS_UI_TRACE_H

#include "trace_build.h"

enum { UI_PROC = 1, UI_MAIN = 2, UI_WORKER = 3, UI_HEAP = 4 };

void ui_test_trace(tb *t);

enum { UI_ZONE_PROC = 11, UI_ZONE_LOOP = 12, UI_ZONE_LOAD = 13 };
#define UI_ZONE_DUR(k) ((int64_t)((((k) * 37) % 100) + 1) * 1000)
void ui_zone_trace(tb *t);

/*
 * A trace whose flame graph has more names under one node than a screen
 * has room to label (ui_flame_trace): process big (pid 30), thread work
 * (30): UI_FLAME_FRAMES frames back to back, each holding 150 calls of
 * names fn_000 .. fn_299 (about 300 times each in all), every third name's
 * calls holding one of 5 leaves (leaf_0 .. leaf_4) half their length.
 */
enum { UI_FLAME_PROC = 21, UI_FLAME_WORK = 22, UI_FLAME_FRAMES = 600 };
void ui_flame_trace(tb *t);

#endif

/*
 * fleet_fault_test.c - the fleet part's work that needs no ClickHouse
 * server, with each of etch's own allocations failing in turn: a server's
 * answer printed as `etch query --clickhouse` prints it (an aligned table,
 * or CSV), and etch load's ordering of a batch's rows by their table's key
 * (the dictionary of the key's strings, its ranks, the sort). Each run
 * prints or orders exactly what it does without a fault, or fails with
 * ETCH_ENOMEM; a table that fails is not printed at all (never a table
 * with cells missing as if whole).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "fault.h"
#include "fleet/fleet.h"
#include "fleet/order.h"
#include "test.h"

/* ---- an answer printed ---------------------------------------------------- */

/* A stream into a fault_str (the tests' own memory, not counted). */
static ssize_t str_write(void *cookie, const char *p, size_t n) {
  fault_printf(cookie, "%.*s", (int)n, p);
  return (ssize_t)n;
}

static FILE *str_stream(fault_str *b) {
  cookie_io_functions_t io = {.write = str_write};
  FILE *f = fopencookie(b, "w", io);
  ASSERT_TRUE(f != NULL);
  return f;
}

/* Names, types, then rows: a NULL, escapes, a control character, a wide
 * row and a number column. */
static const char kAnswer[] =
    "name\tcount()\tavg(dur)\tnote\n"
    "String\tUInt64\tNullable(Float64)\tNullable(String)\n"
    "main\t3\t1.5\t\\N\n"
    "tab\\there\t12\t\\N\tline\\nbreak\n"
    "\\\\back\t1000000\t2.25\tbell\\a\n"
    "a much longer name than the others\t0\t0\t\n";

typedef struct answer_case {
  etch__out_mode mode;
  bool recording;
  fault_str want, got;
} answer_case;

static int answer_op(void *ctx) {
  answer_case *c = ctx;
  /* Unescaped in place: a copy each run (malloc'd here: the C library's
   * strdup is not counted by heap.c, only its free). */
  char *data = malloc(sizeof kAnswer);
  ASSERT_TRUE(data != NULL);
  memcpy(data, kAnswer, sizeof kAnswer);
  /* Emptied, its room kept: the heap holds the same before and after. */
  c->got.len = 0;
  if (c->got.s) c->got.s[0] = '\0';
  FILE *f = str_stream(&c->got);
  bool printed = false;
  int rc = etch__fleet_print_answer(data, strlen(kAnswer), f, c->mode,
                                    &printed);
  fclose(f);
  free(data);
  if (c->recording) {
    ASSERT_OK(rc);
    fault_printf(&c->want, "%s", c->got.s);
    return rc;
  }
  if (rc == ETCH_OK) {
    if (!printed || !c->got.s || strcmp(c->got.s, c->want.s) != 0)
      FAIL("%s: printed\n%s\nnot\n%s", fault_now, c->got.s, c->want.s);
  } else if (c->mode == ETCH__OUT_TABLE && c->got.len) {
    FAIL("%s: failed (%s) after printing\n%s", fault_now, etch_last_error(),
         c->got.s);
  }
  return rc;
}

static void sweep_answer(const char *what, etch__out_mode mode) {
  answer_case c = {.mode = mode, .recording = true};
  answer_op(&c);
  c.recording = false;
  ASSERT_TRUE(strstr(c.want.s, "tab") != NULL);
  fault_result r = fault_sweep(what, answer_op, &c);
  printf("  %s: %llu allocations, %llu runs failed of %llu\n", what,
         (unsigned long long)r.allocs, (unsigned long long)r.failed,
         (unsigned long long)r.runs);
  ASSERT_TRUE(r.allocs > 0);
  fault_str_free(&c.want);
  fault_str_free(&c.got);
}

TEST(fault_fleet_answer_as_table) { sweep_answer("answer, table", ETCH__OUT_TABLE); }

TEST(fault_fleet_answer_as_csv) { sweep_answer("answer, csv", ETCH__OUT_CSV); }

/* ---- a batch's rows ordered --------------------------------------------- */

enum { kRows = 300 };

typedef struct order_case {
  const etch__ch_table *table; /* slice: its key a String and an Int64 */
  size_t name_col;
  uint64_t want[kRows]; /* the rows' places, in the order they go out */
  bool recording;
} order_case;

/* Rows of two traces, names from a few, out of order; their order by
 * slice's key. */
static int order_op(void *ctx) {
  order_case *c = ctx;
  keys k = {0};
  sdict d = {0};
  etch__fl_sorter room = {0};
  static const char *const names[] = {"main", "draw", "io", "alloc", "wait",
                                      "parse", "main2", ""};
  int rc = ETCH_OK;
  if (!etch__fl_keys_reserve(&k, kRows)) rc = ETCH_ENOMEM;
  for (size_t i = 0; !rc && i < kRows; i++) {
    keyrec *r = &k.rec[i];
    k.off[i] = i * 10;
    r->tid = i < kRows / 2 ? 7 : 3;
    r->idx = i;
    for (size_t j = 0; j < c->table->nkey; j++) {
      int col = c->table->key[j];
      if (c->table->col[col].kind == ETCH__COL_I64) {
        r->k[j] = ((i * 7919) % 1000) ^ (1ULL << 63);
      } else {
        const char *s = names[(i * 13) % 8];
        if (!etch__fl_sdict_id(&d, s, strlen(s), &r->k[j])) rc = ETCH_ENOMEM;
      }
    }
  }
  if (!rc && !etch__fl_sdict_rank(&d)) rc = ETCH_ENOMEM;
  const keyrec *out = NULL;
  if (!rc) rc = etch__fl_sort_rows(&room, c->table, &k, kRows, &d, &out);
  if (!rc) {
    ASSERT_TRUE(out != NULL); /* they were not in order */
    for (size_t i = 0; i < kRows; i++) {
      if (c->recording) {
        c->want[i] = out[i].idx;
      } else if (out[i].idx != c->want[i]) {
        FAIL("%s: row %zu is %llu, not %llu", fault_now, i,
             (unsigned long long)out[i].idx, (unsigned long long)c->want[i]);
      }
    }
  }
  etch__fl_keys_free(&k);
  etch__fl_sdict_free(&d);
  etch__fl_sorter_free(&room);
  return rc;
}

TEST(fault_fleet_rows_in_key_order) {
  order_case c = {.table = etch__ch_table_find("slice"), .recording = true};
  ASSERT_TRUE(c.table != NULL);
  ASSERT_TRUE(c.table->key_ok);
  ASSERT_OK(order_op(&c));
  /* By trace id first: the second trace's rows (id 3) lead. */
  ASSERT_TRUE(c.want[0] >= kRows / 2);
  c.recording = false;
  fault_result r = fault_sweep("rows in key order", order_op, &c);
  printf("  %llu allocations, %llu runs failed of %llu\n",
         (unsigned long long)r.allocs, (unsigned long long)r.failed,
         (unsigned long long)r.runs);
  ASSERT_TRUE(r.allocs > 0);
}

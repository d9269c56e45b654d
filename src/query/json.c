/*
 * json.c - export to the Chrome JSON trace event format, read by
 * chrome://tracing, the Perfetto UI and speedscope.
 *
 *   {"traceEvents":[...],"displayTimeUnit":"ns"}
 *
 * Mapping (docs/analysis.md has the full table):
 *  - processes and threads: "M" events process_name / thread_name;
 *  - slices on a thread track: "X" with dur when closed, a lone "B" when
 *    still open at the end; instants: "i" with "s":"t";
 *  - slices on any other track (process, named, global): the JSON format has
 *    no such tracks, so each gets a pseudo-thread of its process (tid =
 *    kPseudoTidBase + track id) named after the track;
 *  - counters: "C" named after the counter track, args {"value": v};
 *  - flows: "s" at the outgoing slice and "f" with "bp":"e" at the incoming
 *    one, sharing the flow row's id;
 *  - args: the args table rebuilt into nested objects and arrays
 *    ("debug.a.b[1]" -> {"a":{"b":[null, v]}}), without the "debug." prefix.
 * Timestamps are in microseconds with three decimals (ns precision).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "query/query.h"

enum { kPseudoTidBase = 0x40000000 };

/* ---- strings ------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t avail) {
  unsigned c = s[0];
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (avail < n) return 0;
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
      (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return n;
}

void etch__json_string(FILE *out, const char *str, size_t len) {
  const unsigned char *s = (const unsigned char *)str;
  fputc('"', out);
  for (size_t i = 0; i < len;) {
    unsigned char c = s[i];
    if (c == '"' || c == '\\') {
      fputc('\\', out);
      fputc(c, out);
      i++;
    } else if (c < 0x20) {
      switch (c) {
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        case '\b': fputs("\\b", out); break;
        case '\f': fputs("\\f", out); break;
        default: fprintf(out, "\\u%04x", c); break;
      }
      i++;
    } else if (c < 0x80) {
      fputc(c, out);
      i++;
    } else {
      size_t n = utf8_len(s + i, len - i);
      if (n) {
        fwrite(s + i, 1, n, out);
        i += n;
      } else {
        fputs("\\ufffd", out);
        i++;
      }
    }
  }
  fputc('"', out);
}

static void json_cstr(FILE *out, const char *s) {
  if (s)
    etch__json_string(out, s, strlen(s));
  else
    fputs("null", out);
}

static void json_double(FILE *out, double v) {
  if (!isfinite(v)) {
    fputs("null", out);
    return;
  }
  char buf[40];
  /* The shortest of %.15g / %.17g that reads back exactly. */
  snprintf(buf, sizeof buf, "%.15g", v);
  if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
  fputs(buf, out);
}

/* ns -> "us.nnn" */
static void json_ts(FILE *out, int64_t ns) {
  uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
  fprintf(out, "%s%" PRIu64 ".%03u", ns < 0 ? "-" : "", a / 1000,
          (unsigned)(a % 1000));
}

/* ---- args into nested JSON ----------------------------------------------------- */

typedef struct jnode {
  char *key;          /* object member name; NULL for array elements */
  long index;         /* array index, -1 for object members */
  struct jnode *kids; /* first child */
  struct jnode *next; /* next sibling */
  bool has_value;
  int type; /* SQLITE_INTEGER / FLOAT / TEXT / NULL */
  int64_t i;
  double d;
  char *s;
  const char *value_type;
  bool is_array;
} jnode;

static void jnode_free(jnode *n) {
  while (n) {
    jnode *next = n->next;
    jnode_free(n->kids);
    free(n->key);
    free(n->s);
    free(n);
    n = next;
  }
}

static jnode *child(jnode *parent, const char *key, size_t keylen,
                    long index) {
  jnode **link = &parent->kids;
  for (jnode *k = parent->kids; k; k = k->next) {
    if (index >= 0 ? k->index == index
                   : (k->key && strlen(k->key) == keylen &&
                      !memcmp(k->key, key, keylen)))
      return k;
    link = &k->next;
  }
  jnode *n = etch__calloc(1, sizeof *n);
  if (!n) return NULL;
  n->index = index;
  if (index < 0) n->key = strndup(key ? key : "", key ? keylen : 0);
  *link = n;
  if (index >= 0) parent->is_array = true;
  return n;
}

/* Finds or creates the node for a key like "a.b[2].c". */
static jnode *path_node(jnode *root, const char *key) {
  jnode *n = root;
  const char *p = key;
  while (n && *p) {
    if (*p == '[') {
      char *end;
      long idx = strtol(p + 1, &end, 10);
      if (*end != ']' || idx < 0) return child(n, p, strlen(p), -1);
      n = child(n, NULL, 0, idx);
      p = end + 1;
      if (*p == '.') p++;
      continue;
    }
    size_t len = strcspn(p, ".[");
    n = child(n, p, len, -1);
    p += len;
    if (*p == '.') p++;
  }
  return n;
}

static void write_node(FILE *out, const jnode *n);

static void write_value(FILE *out, const jnode *n) {
  if (n->kids) {
    write_node(out, n);
    return;
  }
  if (!n->has_value) {
    fputs("null", out);
    return;
  }
  const char *vt = n->value_type ? n->value_type : "";
  if (!strcmp(vt, "bool")) {
    fputs(n->i ? "true" : "false", out);
  } else if (!strcmp(vt, "uint")) {
    fprintf(out, "%" PRIu64, (uint64_t)n->i);
  } else if (!strcmp(vt, "pointer")) {
    fprintf(out, "\"0x%" PRIx64 "\"", (uint64_t)n->i);
  } else if (n->type == SQLITE_INTEGER) {
    fprintf(out, "%" PRId64, n->i);
  } else if (n->type == SQLITE_FLOAT) {
    json_double(out, n->d);
  } else if (n->type == SQLITE_TEXT) {
    json_cstr(out, n->s);
  } else {
    fputs("null", out);
  }
}

static void write_node(FILE *out, const jnode *n) {
  if (n->is_array) {
    long max = -1;
    for (const jnode *k = n->kids; k; k = k->next)
      if (k->index > max) max = k->index;
    fputc('[', out);
    for (long i = 0; i <= max; i++) {
      const jnode *k = n->kids;
      while (k && k->index != i) k = k->next;
      if (i) fputc(',', out);
      if (k)
        write_value(out, k);
      else
        fputs("null", out);
    }
    fputc(']', out);
    return;
  }
  fputc('{', out);
  bool first = true;
  for (const jnode *k = n->kids; k; k = k->next) {
    if (!k->key) continue; /* mixed array/object keys: keep the members */
    if (!first) fputc(',', out);
    first = false;
    json_cstr(out, k->key);
    fputc(':', out);
    write_value(out, k);
  }
  fputc('}', out);
}

/* Writes ,"args":{...} for an arg set, if it has any args. */
static int write_args(FILE *out, sqlite3_stmt *q, int64_t arg_set_id) {
  sqlite3_reset(q);
  sqlite3_bind_int64(q, 1, arg_set_id);
  jnode root = {.index = -1};
  int rc;
  bool any = false;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    const char *key = (const char *)sqlite3_column_text(q, 0);
    if (!key) continue;
    if (!strncmp(key, "debug.", 6)) key += 6;
    jnode *n = path_node(&root, key);
    if (!n) continue;
    any = true;
    n->has_value = true;
    const char *vt = (const char *)sqlite3_column_text(q, 4);
    n->value_type = !vt                       ? ""
                    : !strcmp(vt, "bool")    ? "bool"
                    : !strcmp(vt, "uint")    ? "uint"
                    : !strcmp(vt, "pointer") ? "pointer"
                                             : "";
    free(n->s);
    n->s = NULL;
    if (sqlite3_column_type(q, 1) != SQLITE_NULL) {
      n->type = SQLITE_INTEGER;
      n->i = sqlite3_column_int64(q, 1);
    } else if (sqlite3_column_type(q, 2) != SQLITE_NULL) {
      n->type = SQLITE_TEXT;
      n->s = etch__strdup((const char *)sqlite3_column_text(q, 2));
    } else if (sqlite3_column_type(q, 3) != SQLITE_NULL) {
      n->type = SQLITE_FLOAT;
      n->d = sqlite3_column_double(q, 3);
    } else {
      n->type = SQLITE_NULL;
    }
  }
  if (any) {
    fputs(",\"args\":", out);
    write_node(out, &root);
  }
  jnode_free(root.kids);
  return rc == SQLITE_DONE ? ETCH_OK
                           : etch__error(ETCH_ESQL, "convert: %s",
                                         sqlite3_errmsg(sqlite3_db_handle(q)));
}

/* ---- export -------------------------------------------------------------------- */

typedef struct jtrack {
  int64_t pid, tid;
} jtrack;

typedef struct exporter {
  sqlite3 *db;
  FILE *out;
  int rc;
  bool first; /* no event written yet */
  jtrack *tracks; /* by track id */
  size_t ntracks;
  sqlite3_stmt *args;
} exporter;

static sqlite3_stmt *prep(exporter *x, const char *sql) {
  sqlite3_stmt *st = NULL;
  if (x->rc) return NULL;
  if (sqlite3_prepare_v2(x->db, sql, -1, &st, NULL) != SQLITE_OK)
    x->rc = etch__error(ETCH_ESQL, "convert: %s", sqlite3_errmsg(x->db));
  return st;
}

static void done(exporter *x, sqlite3_stmt *st, int rc) {
  if (rc != SQLITE_DONE && !x->rc)
    x->rc = etch__error(ETCH_ESQL, "convert: %s", sqlite3_errmsg(x->db));
  sqlite3_finalize(st);
}

static void begin_event(exporter *x) {
  fputs(x->first ? "\n" : ",\n", x->out);
  x->first = false;
}

static void meta(exporter *x, const char *what, int64_t pid, int64_t tid,
                 const char *name) {
  begin_event(x);
  fprintf(x->out, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%" PRId64
                  ",\"tid\":%" PRId64 ",\"args\":{\"name\":",
          what, pid, tid);
  json_cstr(x->out, name);
  fputs("}}", x->out);
}

static const jtrack *track_of(const exporter *x, int64_t id) {
  static const jtrack none = {0, 0};
  if (id < 1 || (size_t)id > x->ntracks) return &none;
  return &x->tracks[id - 1];
}

static void load_tracks(exporter *x) {
  int64_t n = 0;
  sqlite3_stmt *st = prep(x, "SELECT max(id) FROM track");
  if (!st) return;
  if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  x->tracks = etch__calloc(n > 0 ? (size_t)n : 1, sizeof *x->tracks);
  if (!x->tracks) {
    x->rc = etch__error(ETCH_ENOMEM, "convert: out of memory");
    return;
  }
  x->ntracks = (size_t)(n > 0 ? n : 0);
  st = prep(x,
            "SELECT tr.id, tr.type, tr.name, coalesce(p.pid, tp.pid, 0), "
            /* One pass over slice, not one per track (slice has no
             * track_id index, see schema.c). */
            "th.tid, tr.id IN (SELECT track_id FROM slice) "
            "FROM track tr LEFT JOIN thread th ON tr.utid = th.utid "
            "LEFT JOIN process tp ON th.upid = tp.upid "
            "LEFT JOIN process p ON tr.upid = p.upid ORDER BY tr.id");
  if (!st) return;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(st, 0);
    if (id < 1 || id > n) continue;
    const char *type = (const char *)sqlite3_column_text(st, 1);
    jtrack *t = &x->tracks[id - 1];
    t->pid = sqlite3_column_int64(st, 3);
    if (type && !strcmp(type, "thread")) {
      t->tid = sqlite3_column_int64(st, 4);
    } else {
      t->tid = kPseudoTidBase + id;
      /* Name the pseudo-thread only if something is drawn on it. */
      if (sqlite3_column_int(st, 5)) {
        const char *name = (const char *)sqlite3_column_text(st, 2);
        meta(x, "thread_name", t->pid, t->tid, name ? name : type);
      }
    }
  }
  done(x, st, rc);
}

static void metadata(exporter *x) {
  sqlite3_stmt *st = prep(x, "SELECT pid, name FROM process "
                             "WHERE name IS NOT NULL ORDER BY upid");
  if (!st) return;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW)
    meta(x, "process_name", sqlite3_column_int64(st, 0), 0,
         (const char *)sqlite3_column_text(st, 1));
  done(x, st, rc);
  st = prep(x,
            "SELECT coalesce(p.pid, 0), th.tid, th.name FROM thread th "
            "LEFT JOIN process p USING(upid) WHERE th.name IS NOT NULL "
            "ORDER BY th.utid");
  if (!st) return;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW)
    meta(x, "thread_name", sqlite3_column_int64(st, 0),
         sqlite3_column_int64(st, 1), (const char *)sqlite3_column_text(st, 2));
  done(x, st, rc);
}

static void slices(exporter *x) {
  sqlite3_stmt *st = prep(x,
                          "SELECT ts, dur, track_id, category, name, "
                          "arg_set_id FROM slice ORDER BY ts, depth, id");
  if (!st) return;
  int rc;
  while (!x->rc && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t ts = sqlite3_column_int64(st, 0);
    int64_t dur = sqlite3_column_int64(st, 1);
    const jtrack *t = track_of(x, sqlite3_column_int64(st, 2));
    const char *cat = (const char *)sqlite3_column_text(st, 3);
    const char *name = (const char *)sqlite3_column_text(st, 4);
    begin_event(x);
    fputs("{\"ph\":", x->out);
    fputs(dur == 0 ? "\"i\",\"s\":\"t\"" : dur < 0 ? "\"B\"" : "\"X\"",
          x->out);
    fputs(",\"name\":", x->out);
    json_cstr(x->out, name ? name : "");
    if (cat) {
      fputs(",\"cat\":", x->out);
      json_cstr(x->out, cat);
    }
    fprintf(x->out, ",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":",
            t->pid, t->tid);
    json_ts(x->out, ts);
    if (dur > 0) {
      fputs(",\"dur\":", x->out);
      json_ts(x->out, dur);
    }
    if (sqlite3_column_type(st, 5) != SQLITE_NULL) {
      int arc = write_args(x->out, x->args, sqlite3_column_int64(st, 5));
      if (arc) x->rc = arc;
    }
    fputc('}', x->out);
  }
  done(x, st, x->rc ? SQLITE_DONE : rc);
}

static void counters(exporter *x) {
  sqlite3_stmt *st = prep(x,
                          "SELECT c.ts, c.track_id, c.value, tr.name "
                          "FROM counter c JOIN track tr ON tr.id = c.track_id "
                          "ORDER BY c.ts, c.id");
  if (!st) return;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const jtrack *t = track_of(x, sqlite3_column_int64(st, 1));
    const char *name = (const char *)sqlite3_column_text(st, 3);
    begin_event(x);
    fputs("{\"ph\":\"C\",\"name\":", x->out);
    json_cstr(x->out, name ? name : "counter");
    fprintf(x->out, ",\"pid\":%" PRId64 ",\"ts\":", t->pid);
    json_ts(x->out, sqlite3_column_int64(st, 0));
    fputs(",\"args\":{\"value\":", x->out);
    if (sqlite3_column_type(st, 2) == SQLITE_NULL) /* NaN is stored as NULL */
      fputs("null", x->out);
    else
      json_double(x->out, sqlite3_column_double(st, 2));
    fputs("}}", x->out);
  }
  done(x, st, rc);
}

static void flows(exporter *x) {
  sqlite3_stmt *st = prep(x,
                          "SELECT f.id, o.ts, o.track_id, i.ts, i.track_id "
                          "FROM flow f JOIN slice o ON o.id = f.slice_out "
                          "JOIN slice i ON i.id = f.slice_in ORDER BY f.id");
  if (!st) return;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(st, 0);
    for (int end = 0; end < 2; end++) {
      const jtrack *t = track_of(x, sqlite3_column_int64(st, 2 + 2 * end));
      begin_event(x);
      fprintf(x->out,
              "{\"ph\":\"%s\",\"name\":\"flow\",\"cat\":\"flow\",\"id\":%" PRId64
              ",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":",
              end ? "f" : "s", id, t->pid, t->tid);
      json_ts(x->out, sqlite3_column_int64(st, 1 + 2 * end));
      fputs(end ? ",\"bp\":\"e\"}" : "}", x->out);
    }
  }
  done(x, st, rc);
}

int etch__query_export_json(sqlite3 *db, FILE *out) {
  exporter x = {.db = db, .out = out, .first = true};
  x.args = prep(&x,
                "SELECT key, int_value, string_value, real_value, value_type "
                "FROM args WHERE arg_set_id = ? ORDER BY id");
  fputs("{\"traceEvents\":[", out);
  metadata(&x);
  load_tracks(&x);
  slices(&x);
  counters(&x);
  flows(&x);
  fputs("\n],\"displayTimeUnit\":\"ns\"}\n", out);
  sqlite3_finalize(x.args);
  free(x.tracks);
  if (!x.rc && ferror(out))
    x.rc = etch__error(ETCH_EIO, "convert: write error");
  return x.rc;
}

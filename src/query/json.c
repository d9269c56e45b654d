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
      size_t n = etch__utf8_seq(s + i, len - i);
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

enum { V_NULL, V_INT, V_REAL, V_TEXT };

typedef struct jnode {
  char *key;          /* object member name; NULL for array elements */
  long index;         /* array index, -1 for object members */
  struct jnode *kids; /* first child */
  struct jnode *next; /* next sibling */
  bool has_value;
  int type; /* V_INT / V_REAL / V_TEXT / V_NULL */
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
  if (index < 0) n->key = etch__strndup(key ? key : "", key ? keylen : 0);
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
  } else if (n->type == V_INT) {
    fprintf(out, "%" PRId64, n->i);
  } else if (n->type == V_REAL) {
    json_double(out, n->d);
  } else if (n->type == V_TEXT) {
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

/*
 * Adds the arg in columns `c`.. of the current row (key, int_value,
 * string_value, real_value, value_type) to the tree under `root`; false
 * when the row has no arg (a slice without args).
 */
static bool add_arg(jnode *root, const etch__res *q, idx_t c) {
  ETCH_DCHECK(c + 4 < q->ncols); /* the arg's five columns are there */
  char *key = etch__res_strdup(q, c);
  if (!key) return false;
  const char *k = strncmp(key, "debug.", 6) ? key : key + 6;
  jnode *n = path_node(root, k);
  free(key);
  if (!n) return true;
  n->has_value = true;
  size_t vl = 0;
  const char *vt = etch__res_str(q, c + 4, &vl);
#define VT_IS(s) (vt && vl == sizeof(s) - 1 && !memcmp(vt, s, vl))
  n->value_type = VT_IS("bool")      ? "bool"
                  : VT_IS("uint")    ? "uint"
                  : VT_IS("pointer") ? "pointer"
                                     : "";
#undef VT_IS
  free(n->s);
  n->s = NULL;
  if (!etch__res_null(q, c + 1)) {
    n->type = V_INT;
    n->i = etch__res_i64(q, c + 1);
  } else if (!etch__res_null(q, c + 2)) {
    n->type = V_TEXT;
    n->s = etch__res_strdup(q, c + 2);
  } else if (!etch__res_null(q, c + 3)) {
    n->type = V_REAL;
    n->d = etch__res_f64(q, c + 3);
  } else {
    n->type = V_NULL;
  }
  return true;
}

/* Writes ,"args":{...} for the args gathered under `root`, if any. */
static void write_args(FILE *out, jnode *root) {
  if (root->kids) {
    fputs(",\"args\":", out);
    write_node(out, root);
  }
  jnode_free(root->kids);
  root->kids = NULL;
}

/* ---- export -------------------------------------------------------------------- */

typedef struct jtrack {
  int64_t pid, tid;
} jtrack;

typedef struct exporter {
  etch__db *db;
  FILE *out;
  int rc;
  bool first; /* no event written yet */
  jtrack *tracks; /* by track id */
  size_t ntracks;
} exporter;

static bool q(exporter *x, etch__res *res, const char *sql) {
  if (x->rc) return false;
  x->rc = etch__res_query(x->db, sql, "convert", res);
  return !x->rc;
}

static void done(exporter *x, etch__res *res) {
  int rc = etch__res_close(res);
  if (!x->rc) x->rc = rc;
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
  etch__res res;
  if (!q(x, &res, "SELECT max(id) FROM track")) return;
  if (etch__res_next(&res)) n = etch__res_i64(&res, 0);
  done(x, &res);
  if (x->rc) return;
  x->tracks = etch__calloc(n > 0 ? (size_t)n : 1, sizeof *x->tracks);
  if (!x->tracks) {
    x->rc = etch__error(ETCH_ENOMEM, "convert: out of memory");
    return;
  }
  x->ntracks = (size_t)(n > 0 ? n : 0);
  if (!q(x, &res,
         "SELECT tr.id, tr.type, tr.name, coalesce(p.pid, tp.pid, 0), "
         "th.tid, tr.id IN (SELECT track_id FROM slice) "
         "FROM track tr LEFT JOIN thread th ON tr.utid = th.utid "
         "LEFT JOIN process tp ON th.upid = tp.upid "
         "LEFT JOIN process p ON tr.upid = p.upid ORDER BY tr.id"))
    return;
  while (etch__res_next(&res)) {
    int64_t id = etch__res_i64(&res, 0);
    if (id < 1 || id > n) continue;
    char *type = etch__res_strdup(&res, 1);
    jtrack *t = &x->tracks[id - 1];
    t->pid = etch__res_i64(&res, 3);
    if (type && !strcmp(type, "thread")) {
      t->tid = etch__res_i64(&res, 4);
    } else {
      t->tid = kPseudoTidBase + id;
      /* Name the pseudo-thread only if something is drawn on it. */
      if (etch__res_i64(&res, 5)) {
        char *name = etch__res_strdup(&res, 2);
        meta(x, "thread_name", t->pid, t->tid,
             name ? name : type ? type : "");
        free(name);
      }
    }
    free(type);
  }
  done(x, &res);
}

static void metadata(exporter *x) {
  etch__res res;
  if (!q(x, &res, "SELECT pid, name FROM process "
                  "WHERE name IS NOT NULL ORDER BY upid"))
    return;
  while (etch__res_next(&res)) {
    char *name = etch__res_strdup(&res, 1);
    meta(x, "process_name", etch__res_i64(&res, 0), 0, name);
    free(name);
  }
  done(x, &res);
  if (!q(x, &res,
         "SELECT coalesce(p.pid, 0), th.tid, th.name FROM thread th "
         "LEFT JOIN process p USING(upid) WHERE th.name IS NOT NULL "
         "ORDER BY th.utid"))
    return;
  while (etch__res_next(&res)) {
    char *name = etch__res_strdup(&res, 2);
    meta(x, "thread_name", etch__res_i64(&res, 0), etch__res_i64(&res, 1),
         name);
    free(name);
  }
  done(x, &res);
}

/*
 * Slices with their args in one pass: a slice with N args comes as N rows
 * of the join (one with NULL arg columns when it has none), consecutive in
 * the order by slice.
 */
static void slices(exporter *x) {
  etch__res res;
  if (!q(x, &res,
         "SELECT s.id, s.ts, s.dur, s.track_id, s.category, s.name, "
         "a.key, a.int_value, a.string_value, a.real_value, a.value_type "
         "FROM slice s LEFT JOIN args a ON a.arg_set_id = s.arg_set_id "
         "ORDER BY s.ts, s.depth, s.id, a.id"))
    return;
  jnode root = {.index = -1};
  bool more = etch__res_next(&res);
  while (more && !x->rc) {
    int64_t id = etch__res_i64(&res, 0);
    int64_t ts = etch__res_i64(&res, 1);
    int64_t dur = etch__res_i64(&res, 2);
    const jtrack *t = track_of(x, etch__res_i64(&res, 3));
    char *cat = etch__res_strdup(&res, 4);
    char *name = etch__res_strdup(&res, 5);
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
    free(cat);
    free(name);
    fprintf(x->out, ",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":",
            t->pid, t->tid);
    json_ts(x->out, ts);
    if (dur > 0) {
      fputs(",\"dur\":", x->out);
      json_ts(x->out, dur);
    }
    do {
      add_arg(&root, &res, 6);
    } while ((more = etch__res_next(&res)) && etch__res_i64(&res, 0) == id);
    write_args(x->out, &root);
    fputc('}', x->out);
  }
  jnode_free(root.kids);
  done(x, &res);
}

static void counters(exporter *x) {
  etch__res res;
  if (!q(x, &res,
         "SELECT c.ts, c.track_id, c.value, tr.name "
         "FROM counter c JOIN track tr ON tr.id = c.track_id "
         "ORDER BY c.ts, c.id"))
    return;
  while (etch__res_next(&res)) {
    const jtrack *t = track_of(x, etch__res_i64(&res, 1));
    char *name = etch__res_strdup(&res, 3);
    begin_event(x);
    fputs("{\"ph\":\"C\",\"name\":", x->out);
    json_cstr(x->out, name ? name : "counter");
    free(name);
    fprintf(x->out, ",\"pid\":%" PRId64 ",\"ts\":", t->pid);
    json_ts(x->out, etch__res_i64(&res, 0));
    fputs(",\"args\":{\"value\":", x->out);
    if (etch__res_null(&res, 2)) /* NaN is stored as NULL */
      fputs("null", x->out);
    else
      json_double(x->out, etch__res_f64(&res, 2));
    fputs("}}", x->out);
  }
  done(x, &res);
}

static void flows(exporter *x) {
  etch__res res;
  if (!q(x, &res,
         "SELECT f.id, o.ts, o.track_id, i.ts, i.track_id "
         "FROM flow f JOIN slice o ON o.id = f.slice_out "
         "JOIN slice i ON i.id = f.slice_in ORDER BY f.id"))
    return;
  while (etch__res_next(&res)) {
    int64_t id = etch__res_i64(&res, 0);
    for (idx_t end = 0; end < 2; end++) {
      const jtrack *t = track_of(x, etch__res_i64(&res, 2 + 2 * end));
      begin_event(x);
      fprintf(x->out,
              "{\"ph\":\"%s\",\"name\":\"flow\",\"cat\":\"flow\",\"id\":%" PRId64
              ",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":",
              end ? "f" : "s", id, t->pid, t->tid);
      json_ts(x->out, etch__res_i64(&res, 1 + 2 * end));
      fputs(end ? ",\"bp\":\"e\"}" : "}", x->out);
    }
  }
  done(x, &res);
}

int etch__query_export_json(etch__db *db, FILE *out) {
  exporter x = {.db = db, .out = out, .first = true};
  fputs("{\"traceEvents\":[", out);
  metadata(&x);
  load_tracks(&x);
  slices(&x);
  counters(&x);
  flows(&x);
  fputs("\n],\"displayTimeUnit\":\"ns\"}\n", out);
  free(x.tracks);
  if (!x.rc && ferror(out))
    x.rc = etch__error(ETCH_EIO, "convert: write error");
  return x.rc;
}

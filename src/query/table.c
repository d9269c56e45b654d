/*
 * table.c - printing rows: aligned text tables and CSV.
 *
 * Table mode: a header, a line of dashes, then the rows; numbers are
 * right-aligned, text left-aligned, NULL shown as NULL, columns two spaces
 * apart, no trailing blanks. Widths come from the first kBufferedRows rows;
 * later rows are streamed with those widths (a wider cell just pushes the
 * rest of its line right), so a huge result does not sit in memory.
 *
 * CSV mode: RFC 4180 quoting (a field with a comma, quote, CR or LF is
 * quoted and its quotes doubled), a header row, rows ending with "\n",
 * NULL as an empty field.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "query/query.h"

enum { kBufferedRows = 1000 };

/* ---- text tables --------------------------------------------------------------- */

struct etch__tt {
  size_t ncols;
  char **head;
  bool *right;
  char **cells; /* row-major */
  size_t ncells, cap;
};

etch__tt *etch__tt_new(size_t ncols) {
  etch__tt *t = etch__calloc(1, sizeof *t);
  if (!t) return NULL;
  t->ncols = ncols;
  t->head = etch__calloc(ncols, sizeof *t->head);
  t->right = etch__calloc(ncols, sizeof *t->right);
  if (!t->head || !t->right) {
    etch__tt_free(t);
    return NULL;
  }
  return t;
}

void etch__tt_header(etch__tt *t, size_t col, const char *name, bool right) {
  if (!t || col >= t->ncols) return;
  free(t->head[col]);
  t->head[col] = strdup(name ? name : "");
  t->right[col] = right;
}

/* A copy of `s` fit for one line of a table: control characters (a
 * newline in a string arg, a tab) written as \n, \r, \t or \xNN, so rows
 * stay rows and columns line up. CSV and JSON keep the bytes as they are. */
static char *escape_controls(const char *s) {
  size_t n = 0, extra = 0;
  for (; s[n]; n++)
    if ((unsigned char)s[n] < 0x20 || s[n] == 0x7f) extra += 3;
  char *out = malloc(n + extra + 1);
  if (!out) return NULL;
  char *q = out;
  for (const char *p = s; *p; p++) {
    unsigned char c = (unsigned char)*p;
    if (c >= 0x20 && c != 0x7f) {
      *q++ = (char)c;
    } else if (c == '\n' || c == '\r' || c == '\t') {
      *q++ = '\\';
      *q++ = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
    } else {
      static const char hex[] = "0123456789abcdef";
      *q++ = '\\';
      *q++ = 'x';
      *q++ = hex[c >> 4];
      *q++ = hex[c & 15];
    }
  }
  *q = '\0';
  return out;
}

void etch__tt_cell(etch__tt *t, const char *text) {
  if (!t) return;
  if (t->ncells == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    char **c = realloc(t->cells, cap * sizeof *c);
    if (!c) return;
    t->cells = c;
    t->cap = cap;
  }
  t->cells[t->ncells++] = escape_controls(text ? text : "");
}

void etch__tt_cellf(etch__tt *t, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  etch__tt_cell(t, buf);
}

size_t etch__tt_rows(const etch__tt *t) {
  return t ? t->ncells / t->ncols : 0;
}

static void pad(FILE *out, size_t n) {
  while (n--) fputc(' ', out);
}

/* Prints one line of cells; `widths` are the column widths. */
static void print_line(FILE *out, const char *indent, char *const *cells,
                       const bool *right, const size_t *widths, size_t ncols) {
  fputs(indent, out);
  for (size_t c = 0; c < ncols; c++) {
    const char *s = cells[c] ? cells[c] : "";
    size_t len = strlen(s);
    size_t fill = widths[c] > len ? widths[c] - len : 0;
    if (c) fputs("  ", out);
    if (right[c]) pad(out, fill);
    fputs(s, out);
    if (!right[c] && c + 1 < ncols) pad(out, fill);
  }
  fputc('\n', out);
}

static void print_dashes(FILE *out, const char *indent, const size_t *widths,
                         size_t ncols) {
  fputs(indent, out);
  for (size_t c = 0; c < ncols; c++) {
    if (c) fputs("  ", out);
    for (size_t i = 0; i < widths[c]; i++) fputc('-', out);
  }
  fputc('\n', out);
}

void etch__tt_print(const etch__tt *t, FILE *out, const char *indent,
                    bool dashes) {
  if (!t) return;
  size_t *w = calloc(t->ncols, sizeof *w);
  if (!w) return;
  for (size_t c = 0; c < t->ncols; c++) w[c] = t->head[c] ? strlen(t->head[c]) : 0;
  for (size_t i = 0; i < t->ncells; i++) {
    size_t len = strlen(t->cells[i]);
    if (len > w[i % t->ncols]) w[i % t->ncols] = len;
  }
  bool header = false;
  for (size_t c = 0; c < t->ncols; c++) header |= t->head[c] != NULL;
  if (header) print_line(out, indent, t->head, t->right, w, t->ncols);
  if (header && dashes) print_dashes(out, indent, w, t->ncols);
  for (size_t i = 0; i + t->ncols <= t->ncells; i += t->ncols)
    print_line(out, indent, t->cells + i, t->right, w, t->ncols);
  free(w);
}

void etch__tt_free(etch__tt *t) {
  if (!t) return;
  for (size_t c = 0; c < t->ncols && t->head; c++) free(t->head[c]);
  for (size_t i = 0; i < t->ncells; i++) free(t->cells[i]);
  free(t->head);
  free(t->right);
  free(t->cells);
  free(t);
}

/* ---- statement results ---------------------------------------------------------- */

/* The text of column `c` of the current row (malloc'd). */
static char *cell_text(sqlite3_stmt *st, int c) {
  switch (sqlite3_column_type(st, c)) {
    case SQLITE_NULL:
      return strdup("NULL");
    case SQLITE_BLOB: {
      const uint8_t *b = sqlite3_column_blob(st, c);
      size_t n = (size_t)sqlite3_column_bytes(st, c);
      char *s = malloc(n * 2 + 4);
      if (!s) return NULL;
      char *p = s;
      *p++ = 'X';
      *p++ = '\'';
      for (size_t i = 0; i < n; i++) p += sprintf(p, "%02x", b[i]);
      *p++ = '\'';
      *p = '\0';
      return s;
    }
    default: {
      const char *s = (const char *)sqlite3_column_text(st, c);
      return escape_controls(s ? s : "");
    }
  }
}

enum { kCellText = 0, kCellNumber = 1, kCellNull = 2 };

static uint8_t cell_kind(sqlite3_stmt *st, int c) {
  switch (sqlite3_column_type(st, c)) {
    case SQLITE_INTEGER:
    case SQLITE_FLOAT:
      return kCellNumber;
    case SQLITE_NULL:
      return kCellNull;
    default:
      return kCellText;
  }
}

static void csv_field(FILE *out, const char *s, size_t len) {
  bool quote = false;
  for (size_t i = 0; i < len && !quote; i++)
    quote = s[i] == ',' || s[i] == '"' || s[i] == '\n' || s[i] == '\r';
  if (!quote) {
    fwrite(s, 1, len, out);
    return;
  }
  fputc('"', out);
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '"') fputc('"', out);
    fputc(s[i], out);
  }
  fputc('"', out);
}

static int print_csv(sqlite3_stmt *st, FILE *out) {
  int ncols = sqlite3_column_count(st);
  for (int c = 0; c < ncols; c++) {
    const char *name = sqlite3_column_name(st, c);
    if (c) fputc(',', out);
    csv_field(out, name ? name : "", name ? strlen(name) : 0);
  }
  fputc('\n', out);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    for (int c = 0; c < ncols; c++) {
      if (c) fputc(',', out);
      int type = sqlite3_column_type(st, c);
      if (type == SQLITE_NULL) continue;
      if (type == SQLITE_BLOB) {
        char *s = cell_text(st, c);
        if (s) fputs(s, out);
        free(s);
        continue;
      }
      const char *s = (const char *)sqlite3_column_text(st, c);
      csv_field(out, s ? s : "", (size_t)sqlite3_column_bytes(st, c));
    }
    fputc('\n', out);
  }
  return rc;
}

static int print_table(sqlite3_stmt *st, FILE *out) {
  size_t ncols = (size_t)sqlite3_column_count(st);
  char **cells = NULL;
  uint8_t *kind = NULL; /* per buffered cell */
  size_t nrows = 0, cap = 0;
  int rc = SQLITE_DONE;
  while (nrows < kBufferedRows && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (nrows == cap) {
      cap = cap ? cap * 2 : 16;
      char **c2 = realloc(cells, cap * ncols * sizeof *c2);
      uint8_t *n2 = realloc(kind, cap * ncols * sizeof *n2);
      if (c2) cells = c2;
      if (n2) kind = n2;
      if (!c2 || !n2) {
        rc = SQLITE_NOMEM;
        break;
      }
    }
    for (size_t c = 0; c < ncols; c++) {
      cells[nrows * ncols + c] = cell_text(st, (int)c);
      kind[nrows * ncols + c] = cell_kind(st, (int)c);
    }
    nrows++;
  }
  if (nrows < kBufferedRows && rc == SQLITE_ROW) rc = SQLITE_NOMEM;
  size_t *w = calloc(ncols ? ncols : 1, sizeof *w);
  bool *right = calloc(ncols ? ncols : 1, sizeof *right);
  char **head = calloc(ncols ? ncols : 1, sizeof *head);
  if (!w || !right || !head) rc = SQLITE_NOMEM;
  if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
    for (size_t c = 0; c < ncols; c++) {
      const char *name = sqlite3_column_name(st, (int)c);
      head[c] = (char *)(name ? name : "");
      w[c] = strlen(head[c]);
      bool any_num = false, any_text = false;
      for (size_t r = 0; r < nrows; r++) {
        const char *s = cells[r * ncols + c];
        size_t len = s ? strlen(s) : 0;
        if (len > w[c]) w[c] = len;
        if (kind[r * ncols + c] == kCellNumber) any_num = true;
        if (kind[r * ncols + c] == kCellText) any_text = true;
      }
      right[c] = any_num && !any_text;
    }
    print_line(out, "", head, right, w, ncols);
    print_dashes(out, "", w, ncols);
    for (size_t r = 0; r < nrows; r++)
      print_line(out, "", cells + r * ncols, right, w, ncols);
    /* The rest streams with the widths of the first rows. */
    char **row = calloc(ncols ? ncols : 1, sizeof *row);
    while (row && rc == SQLITE_ROW && (rc = sqlite3_step(st)) == SQLITE_ROW) {
      for (size_t c = 0; c < ncols; c++) row[c] = cell_text(st, (int)c);
      print_line(out, "", row, right, w, ncols);
      for (size_t c = 0; c < ncols; c++) free(row[c]);
    }
    free(row);
  }
  for (size_t i = 0; i < nrows * ncols; i++) free(cells[i]);
  free(cells);
  free(kind);
  free(w);
  free(right);
  free(head);
  return rc;
}

int etch__query_print_stmt(sqlite3_stmt *st, FILE *out, etch__out_mode mode) {
  int rc;
  if (sqlite3_column_count(st) == 0) {
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    }
  } else if (mode == ETCH__OUT_CSV) {
    rc = print_csv(st, out);
  } else {
    rc = print_table(st, out);
  }
  if (rc != SQLITE_DONE) {
    sqlite3 *db = sqlite3_db_handle(st);
    return etch__error(ETCH_ESQL, "SQL error: %s",
                       rc == SQLITE_NOMEM ? "out of memory"
                                          : sqlite3_errmsg(db));
  }
  return ETCH_OK;
}

/*
 * table.c - printing rows: aligned text tables and CSV.
 *
 * Table mode: a header, a line of dashes, then the rows; numeric columns
 * are right-aligned, text left-aligned, NULL shown as NULL, columns two
 * spaces apart, no trailing blanks; widths are the columns UTF-8 text takes
 * on a terminal (text_width), not bytes. Widths come from the first
 * kBufferedRows rows; later rows are printed with those widths (a wider
 * cell just pushes the rest of its line right). Values are DuckDB's text
 * for them.
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
#include "base/containers.h"
#include "query/query.h"

enum { kBufferedRows = 1000 };

/* ---- text tables --------------------------------------------------------------- */

struct etch__tt {
  size_t ncols;
  char **head;
  bool *right;
  etch_vec cells; /* of char *, row-major */
  bool failed;    /* a header or cell is missing: out of memory */
};

etch__tt *etch__tt_new(size_t ncols) {
  ETCH_DCHECK(ncols > 0); /* etch__tt_rows divides by it */
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
  t->head[col] = etch__strdup(name ? name : "");
  if (!t->head[col]) t->failed = true;
  t->right[col] = right;
}

/* A copy of `s` fit for one line of a table: control characters (a
 * newline in a string arg, a tab) written as \n, \r, \t or \xNN, so rows
 * stay rows and columns line up. CSV and JSON keep the bytes as they are. */
static char *escape_controls(const char *s) {
  size_t n = 0, extra = 0;
  for (; s[n]; n++)
    if ((unsigned char)s[n] < 0x20 || s[n] == 0x7f) extra += 3;
  char *out = etch__malloc(n + extra + 1);
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
  char *cell = NULL;
  if (ETCH_VEC_RESERVE(&t->cells, char *, 1) ||
      !(cell = escape_controls(text ? text : ""))) {
    t->failed = true; /* the rows would be out of step: none is printed */
    return;
  }
  (void)ETCH_VEC_PUSH(&t->cells, char *, cell);
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
  return t ? ETCH_VEC_COUNT(&t->cells, char *) / t->ncols : 0;
}

/* ---- display width ----------------------------------------------------------- */

/* The columns a code point takes on a terminal: 0 for combining marks and
 * zero-width characters, 2 for East Asian wide and fullwidth characters and
 * emoji, else 1 (a small table, independent of the locale). */
static unsigned cp_width(uint32_t c) {
  static const uint32_t zero[][2] = {
      {0x0300, 0x036F}, {0x0483, 0x0489}, {0x0591, 0x05BD}, {0x0610, 0x061A},
      {0x064B, 0x065F}, {0x0E31, 0x0E31}, {0x0E34, 0x0E3A}, {0x1AB0, 0x1AFF},
      {0x1DC0, 0x1DFF}, {0x200B, 0x200F}, {0x2028, 0x202E}, {0x2060, 0x2064},
      {0x20D0, 0x20FF}, {0xFE00, 0xFE0F}, {0xFE20, 0xFE2F}, {0xFEFF, 0xFEFF},
      {0xE0100, 0xE01EF}};
  static const uint32_t wide[][2] = {
      {0x1100, 0x115F},   {0x231A, 0x231B},   {0x2329, 0x232A},
      {0x23E9, 0x23EC},   {0x23F0, 0x23F0},   {0x23F3, 0x23F3},
      {0x25FD, 0x25FE},   {0x2614, 0x2615},   {0x2648, 0x2653},
      {0x267F, 0x267F},   {0x2693, 0x2693},   {0x26A1, 0x26A1},
      {0x26AA, 0x26AB},   {0x26BD, 0x26BE},   {0x26C4, 0x26C5},
      {0x26CE, 0x26CE},   {0x26D4, 0x26D4},   {0x26EA, 0x26EA},
      {0x26F2, 0x26F3},   {0x26F5, 0x26F5},   {0x26FA, 0x26FA},
      {0x26FD, 0x26FD},   {0x2705, 0x2705},   {0x270A, 0x270B},
      {0x2728, 0x2728},   {0x274C, 0x274C},   {0x274E, 0x274E},
      {0x2753, 0x2755},   {0x2757, 0x2757},   {0x2795, 0x2797},
      {0x27B0, 0x27B0},   {0x27BF, 0x27BF},   {0x2B1B, 0x2B1C},
      {0x2B50, 0x2B50},   {0x2B55, 0x2B55},   {0x2E80, 0x303E},
      {0x3041, 0x33FF},   {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},
      {0xA000, 0xA4CF},   {0xA960, 0xA97F},   {0xAC00, 0xD7A3},
      {0xF900, 0xFAFF},   {0xFE10, 0xFE19},   {0xFE30, 0xFE6F},
      {0xFF00, 0xFF60},   {0xFFE0, 0xFFE6},   {0x16FE0, 0x18AFF},
      {0x1B000, 0x1B2FF}, {0x1F004, 0x1F004}, {0x1F0CF, 0x1F0CF},
      {0x1F18E, 0x1F18E}, {0x1F191, 0x1F19A}, {0x1F200, 0x1F2FF},
      {0x1F300, 0x1F320}, {0x1F32D, 0x1F335}, {0x1F337, 0x1F37C},
      {0x1F37E, 0x1F393}, {0x1F3A0, 0x1F3CA}, {0x1F3CF, 0x1F3D3},
      {0x1F3E0, 0x1F3F0}, {0x1F3F4, 0x1F3F4}, {0x1F3F8, 0x1F43E},
      {0x1F440, 0x1F440}, {0x1F442, 0x1F4FC}, {0x1F4FF, 0x1F53D},
      {0x1F54B, 0x1F54E}, {0x1F550, 0x1F567}, {0x1F57A, 0x1F57A},
      {0x1F595, 0x1F596}, {0x1F5A4, 0x1F5A4}, {0x1F5FB, 0x1F64F},
      {0x1F680, 0x1F6C5}, {0x1F6CC, 0x1F6CC}, {0x1F6D0, 0x1F6D2},
      {0x1F6D5, 0x1F6D7}, {0x1F6DC, 0x1F6DF}, {0x1F6EB, 0x1F6EC},
      {0x1F6F4, 0x1F6FC}, {0x1F7E0, 0x1F7EB}, {0x1F7F0, 0x1F7F0},
      {0x1F90C, 0x1F93A}, {0x1F93C, 0x1F945}, {0x1F947, 0x1F9FF},
      {0x1FA70, 0x1FAFF}, {0x20000, 0x2FFFD}, {0x30000, 0x3FFFD}};
  if (c < 0x300) return 1;
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(zero); i++)
    if (c >= zero[i][0] && c <= zero[i][1]) return 0;
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(wide); i++)
    if (c >= wide[i][0] && c <= wide[i][1]) return 2;
  return 1;
}

/* The columns `s` takes on a terminal: UTF-8 decoded, a byte that is not
 * part of a valid sequence counting one column, as a terminal shows a
 * replacement character for it. */
static size_t text_width(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  size_t w = 0;
  while (*p) {
    unsigned char b = *p;
    uint32_t c;
    size_t n;
    if (b < 0x80) {
      w++;
      p++;
      continue;
    } else if (b >= 0xC2 && b <= 0xDF) {
      c = b & 0x1F;
      n = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      c = b & 0x0F;
      n = 2;
    } else if (b >= 0xF0 && b <= 0xF4) {
      c = b & 0x07;
      n = 3;
    } else {
      w++;
      p++;
      continue;
    }
    size_t k = 1;
    for (; k <= n && (p[k] & 0xC0) == 0x80; k++) c = c << 6 | (p[k] & 0x3F);
    bool ok = k == n + 1 && !(n == 2 && c < 0x800) && !(n == 3 && c < 0x10000) &&
              c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF);
    if (!ok) {
      w++;
      p++;
      continue;
    }
    w += cp_width(c);
    p += n + 1;
  }
  return w;
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
    size_t len = text_width(s);
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

int etch__tt_print(const etch__tt *t, FILE *out, const char *indent,
                   bool dashes) {
  if (!t || t->failed) return etch__error(ETCH_ENOMEM, "out of memory");
  size_t *w = etch__calloc(t->ncols, sizeof *w);
  if (!w) return ETCH_ENOMEM;
  for (size_t c = 0; c < t->ncols; c++)
    w[c] = t->head[c] ? text_width(t->head[c]) : 0;
  char **cells = ETCH_VEC_AT(&t->cells, char *);
  size_t ncells = ETCH_VEC_COUNT(&t->cells, char *);
  for (size_t i = 0; i < ncells; i++) {
    size_t len = text_width(cells[i]);
    if (len > w[i % t->ncols]) w[i % t->ncols] = len;
  }
  bool header = false;
  for (size_t c = 0; c < t->ncols; c++) header |= t->head[c] != NULL;
  if (header) print_line(out, indent, t->head, t->right, w, t->ncols);
  if (header && dashes) print_dashes(out, indent, w, t->ncols);
  for (size_t i = 0; i + t->ncols <= ncells; i += t->ncols)
    print_line(out, indent, cells + i, t->right, w, t->ncols);
  free(w);
  return ETCH_OK;
}

void etch__tt_free(etch__tt *t) {
  if (!t) return;
  for (size_t c = 0; c < t->ncols && t->head; c++) free(t->head[c]);
  char **cells = ETCH_VEC_AT(&t->cells, char *);
  for (size_t i = 0; i < ETCH_VEC_COUNT(&t->cells, char *); i++) free(cells[i]);
  free(t->head);
  free(t->right);
  etch__vec_free(&t->cells);
  free(t);
}

/* ---- results ------------------------------------------------------------------- */

/* DuckDB's text for a value; a boolean is 1 or 0, as SQLite and
 * trace_processor answer comparisons (duckdb_free it). */
static char *value_text(duckdb_result *res, idx_t c, idx_t r) {
  char *v = duckdb_value_varchar(res, c, r);
  if (v && duckdb_column_type(res, c) == DUCKDB_TYPE_BOOLEAN)
    strcpy(v, strcmp(v, "true") ? "0" : "1");
  return v;
}

/* The text of a cell (malloc'd; NULL when out of memory); `escape` for a
 * table's line. */
static char *cell_text(duckdb_result *res, idx_t c, idx_t r, bool escape) {
  if (duckdb_value_is_null(res, c, r)) return etch__strdup("NULL");
  char *v = value_text(res, c, r);
  if (!v) return etch__strdup("");
  char *s = escape ? escape_controls(v) : etch__strdup(v);
  duckdb_free(v);
  return s;
}

static bool numeric_type(duckdb_type t) {
  switch (t) {
    case DUCKDB_TYPE_BOOLEAN:
    case DUCKDB_TYPE_TINYINT:
    case DUCKDB_TYPE_SMALLINT:
    case DUCKDB_TYPE_INTEGER:
    case DUCKDB_TYPE_BIGINT:
    case DUCKDB_TYPE_UTINYINT:
    case DUCKDB_TYPE_USMALLINT:
    case DUCKDB_TYPE_UINTEGER:
    case DUCKDB_TYPE_UBIGINT:
    case DUCKDB_TYPE_FLOAT:
    case DUCKDB_TYPE_DOUBLE:
    case DUCKDB_TYPE_HUGEINT:
    case DUCKDB_TYPE_UHUGEINT:
    case DUCKDB_TYPE_DECIMAL:
      return true;
    default:
      return false;
  }
}

static void print_csv(duckdb_result *res, FILE *out) {
  idx_t ncols = duckdb_column_count(res), nrows = duckdb_row_count(res);
  for (idx_t c = 0; c < ncols; c++) {
    const char *name = duckdb_column_name(res, c);
    if (c) fputc(',', out);
    etch__csv_field(out, name ? name : "", name ? strlen(name) : 0);
  }
  fputc('\n', out);
  for (idx_t r = 0; r < nrows; r++) {
    for (idx_t c = 0; c < ncols; c++) {
      if (c) fputc(',', out);
      if (duckdb_value_is_null(res, c, r)) continue;
      char *v = value_text(res, c, r);
      if (v) etch__csv_field(out, v, strlen(v));
      duckdb_free(v);
    }
    fputc('\n', out);
  }
}

/*
 * A column is right-aligned when it holds numbers. The widths come from
 * the header and the first kBufferedRows rows; later rows are printed with
 * those widths.
 */
static void print_table(duckdb_result *res, FILE *out) {
  size_t ncols = (size_t)duckdb_column_count(res);
  idx_t nrows = duckdb_row_count(res);
  size_t nbuf = nrows < kBufferedRows ? (size_t)nrows : kBufferedRows;
  ETCH_DCHECK(ncols > 0); /* etch__query_print_result prints none else */
  char **cells = etch__calloc(nbuf * ncols + 1, sizeof *cells);
  size_t *w = etch__calloc(ncols + 1, sizeof *w);
  bool *right = etch__calloc(ncols + 1, sizeof *right);
  char **head = etch__calloc(ncols + 1, sizeof *head);
  char **row = etch__calloc(ncols + 1, sizeof *row);
  if (cells && w && right && head && row) {
    for (size_t r = 0; r < nbuf; r++)
      for (size_t c = 0; c < ncols; c++)
        cells[r * ncols + c] = cell_text(res, c, r, true);
    for (size_t c = 0; c < ncols; c++) {
      const char *name = duckdb_column_name(res, c);
      head[c] = (char *)(name ? name : "");
      w[c] = text_width(head[c]);
      right[c] = numeric_type(duckdb_column_type(res, c));
      for (size_t r = 0; r < nbuf; r++) {
        const char *s = cells[r * ncols + c];
        size_t len = s ? text_width(s) : 0;
        if (len > w[c]) w[c] = len;
      }
    }
    print_line(out, "", head, right, w, ncols);
    print_dashes(out, "", w, ncols);
    for (size_t r = 0; r < nbuf; r++)
      print_line(out, "", cells + r * ncols, right, w, ncols);
    for (idx_t r = nbuf; r < nrows; r++) {
      for (size_t c = 0; c < ncols; c++) row[c] = cell_text(res, c, r, true);
      print_line(out, "", row, right, w, ncols);
      for (size_t c = 0; c < ncols; c++) free(row[c]);
    }
  }
  for (size_t i = 0; cells && i < nbuf * ncols; i++) free(cells[i]);
  free(cells);
  free(w);
  free(right);
  free(head);
  free(row);
}

void etch__query_print_result(duckdb_result *res, FILE *out,
                              etch__out_mode mode) {
  if (duckdb_column_count(res) == 0) return;
  if (mode == ETCH__OUT_CSV)
    print_csv(res, out);
  else
    print_table(res, out);
}

/* The one warning every verb gives for a trace cut short (here, beside the
 * other output helpers, so that every user of the query part has it). */
void etch__query_warn_cut_short(const char *path, uint64_t bytes,
                                uint64_t offset) {
  fprintf(stderr,
          "etch: warning: %s is cut short: the %llu bytes from offset %llu "
          "are an incomplete packet; what precedes them is read\n",
          path ? path : "the trace", (unsigned long long)bytes,
          (unsigned long long)offset);
}

void etch__query_warn_malformed(const char *path, uint64_t n,
                                const char *first) {
  /* The reader's message names the file already. */
  size_t pl = path ? strlen(path) : 0;
  if (first && pl && !strncmp(first, path, pl) && !strncmp(first + pl, ": ", 2))
    first += pl + 2;
  fprintf(stderr,
          "etch: warning: %s: %llu malformed packet%s left out%s%s%s; the "
          "rest is read\n",
          path ? path : "the trace", (unsigned long long)n, n == 1 ? "" : "s",
          first ? " (the first: " : "", first ? first : "", first ? ")" : "");
}

/*
 * result.c - etch query --clickhouse: statements run on the server, results
 * printed as `etch query` prints DuckDB's (an aligned table with numbers
 * on the right and NULL as NULL, or CSV with NULL as an empty field).
 *
 * The answer is asked for as TabSeparatedWithNamesAndTypes: a line of
 * names, a line of types, then rows, fields escaped with backslashes and
 * \N for NULL. It is parsed strictly: every row ends with a newline and
 * has as many fields as there are names, or the answer is an error (a
 * response cut short, or not what was asked for).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "fleet/fleet.h"

enum { kMaxAnswer = 1 << 30, kMaxFields = 4096 };

/* A field unescaped in place; false for a malformed escape. */
static bool unescape(char *s, size_t *len, bool *null) {
  *null = *len == 2 && s[0] == '\\' && s[1] == 'N';
  if (*null) return true;
  size_t k = 0;
  for (size_t i = 0; i < *len; i++) {
    char c = s[i];
    if (c == '\\') {
      if (++i == *len) return false;
      switch (s[i]) {
        case 'b': c = '\b'; break;
        case 'f': c = '\f'; break;
        case 'r': c = '\r'; break;
        case 'n': c = '\n'; break;
        case 't': c = '\t'; break;
        case '0': c = '\0'; break;
        case 'a': c = '\a'; break;
        case 'v': c = '\v'; break;
        default: c = s[i]; break; /* \\ \' \" and others: the character */
      }
    }
    s[k++] = c;
  }
  *len = k;
  return true;
}

/* The fields of the line at *p (up to '\n'), NUL-terminated in place;
 * false if the line does not end or has another number of fields. */
static bool split_line(char **p, char *end, char **fields, size_t *lens,
                       size_t want, size_t *got) {
  char *nl = memchr(*p, '\n', (size_t)(end - *p));
  if (!nl) return false;
  size_t n = 0;
  char *s = *p;
  for (;;) {
    char *tab = memchr(s, '\t', (size_t)(nl - s));
    char *fe = tab ? tab : nl;
    if ((want && n == want) || n == kMaxFields) return false;
    fields[n] = s;
    lens[n] = (size_t)(fe - s);
    n++;
    *fe = '\0';
    if (!tab) break;
    s = tab + 1;
  }
  *p = nl + 1;
  *got = n;
  return !want || n == want;
}

static bool numeric(const char *type) {
  if (!strncmp(type, "Nullable(", 9)) type += 9;
  return !strncmp(type, "Int", 3) || !strncmp(type, "UInt", 4) ||
         !strncmp(type, "Float", 5) || !strncmp(type, "Decimal", 7);
}

/* A cell for the table: control characters shown as '?' (one line a row). */
static void tt_text(etch__tt *t, char *s, size_t len) {
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) s[i] = '?';
  s[len] = '\0';
  etch__tt_cell(t, s);
}

int etch__fleet_print_answer(char *data, size_t len, FILE *out,
                             etch__out_mode mode, bool *printed) {
  *printed = false;
  if (!len) return ETCH_OK; /* a statement without a result */
  char *p = data, *end = data + len;
  size_t ncols = 0, ntypes = 0;
  enum { kMax = kMaxFields };
  char **names = etch__calloc(kMax, sizeof *names);
  char **types = etch__calloc(kMax, sizeof *types);
  char **cells = etch__calloc(kMax, sizeof *cells);
  size_t *lens = etch__calloc(kMax, sizeof *lens);
  size_t *tlens = etch__calloc(kMax, sizeof *tlens);
  int rc = ETCH_OK;
  etch__tt *tt = NULL;
  if (!names || !types || !cells || !lens || !tlens) {
    rc = etch__error(ETCH_ENOMEM, "out of memory");
    goto out;
  }
  if (!split_line(&p, end, names, lens, 0, &ncols) ||
      !split_line(&p, end, types, tlens, ncols, &ntypes)) {
    rc = etch__error(ETCH_EFORMAT,
                     "ClickHouse: the answer is not the table asked for "
                     "(TabSeparatedWithNamesAndTypes)");
    goto out;
  }
  for (size_t c = 0; c < ncols; c++) {
    bool null;
    unescape(names[c], &lens[c], &null);
    names[c][lens[c]] = '\0';
  }
  if (mode == ETCH__OUT_CSV) {
    for (size_t c = 0; c < ncols; c++) {
      if (c) fputc(',', out);
      etch__csv_field(out, names[c], lens[c]);
    }
    fputc('\n', out);
  } else {
    tt = etch__tt_new(ncols);
    if (!tt) {
      rc = etch__error(ETCH_ENOMEM, "out of memory");
      goto out;
    }
    for (size_t c = 0; c < ncols; c++)
      etch__tt_header(tt, c, names[c], numeric(types[c]));
  }
  while (p < end) {
    size_t got;
    if (!split_line(&p, end, cells, lens, ncols, &got)) {
      rc = etch__error(ETCH_EFORMAT,
                       "ClickHouse: the answer is cut short or malformed "
                       "(a row without its end or with %zu fields)", got);
      goto out;
    }
    for (size_t c = 0; c < ncols; c++) {
      bool null;
      if (!unescape(cells[c], &lens[c], &null)) {
        rc = etch__error(ETCH_EFORMAT, "ClickHouse: a malformed field");
        goto out;
      }
      if (mode == ETCH__OUT_CSV) {
        if (c) fputc(',', out);
        if (!null) etch__csv_field(out, cells[c], lens[c]);
      } else if (null) {
        etch__tt_cell(tt, "NULL");
      } else {
        tt_text(tt, cells[c], lens[c]);
      }
    }
    if (mode == ETCH__OUT_CSV) fputc('\n', out);
  }
  if (tt && (rc = etch__tt_print(tt, out, "", true))) goto out;
  *printed = true;
out:
  etch__tt_free(tt);
  free(names);
  free(types);
  free(cells);
  free(lens);
  free(tlens);
  return rc;
}

/* The end of the statement at `s`: its ';' outside quotes and comments,
 * or its NUL. */
static const char *statement_end(const char *s) {
  for (; *s; s++) {
    char c = *s;
    if (c == ';') return s;
    if (c == '\'' || c == '"' || c == '`') {
      for (s++; *s && *s != c; s++)
        if (*s == '\\' && s[1]) s++;
      if (!*s) return s;
    } else if (c == '-' && s[1] == '-') {
      while (*s && *s != '\n') s++;
      if (!*s) return s;
    } else if (c == '/' && s[1] == '*') {
      const char *e = strstr(s + 2, "*/");
      if (!e) return s + strlen(s);
      s = e + 1;
    }
  }
  return s;
}

/* Whether the text holds nothing but blanks and comments. */
static bool blank(const char *s, const char *e) {
  while (s < e) {
    if (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') {
      s++;
    } else if (s[0] == '-' && s + 1 < e && s[1] == '-') {
      while (s < e && *s != '\n') s++;
    } else if (s[0] == '/' && s + 1 < e && s[1] == '*') {
      const char *x = strstr(s + 2, "*/");
      if (!x || x >= e) return true;
      s = x + 2;
    } else {
      return false;
    }
  }
  return true;
}

int etch__fleet_query(etch__ch *ch, const char *sql, FILE *out,
                      etch__out_mode mode) {
  bool any = false;
  etch__ch_buf b = {0};
  int rc = ETCH_OK;
  for (const char *s = sql; !rc && *s;) {
    const char *e = statement_end(s);
    if (!blank(s, e)) {
      char *stmt = etch__malloc((size_t)(e - s) + 1);
      if (stmt) {
        memcpy(stmt, s, (size_t)(e - s));
        stmt[e - s] = '\0';
      }
      if (!stmt) {
        rc = etch__error(ETCH_ENOMEM, "out of memory");
        break;
      }
      rc = etch__ch_exec(ch, stmt, NULL, 0, &b, kMaxAnswer);
      free(stmt);
      if (!rc && b.len && any && mode == ETCH__OUT_TABLE) fputc('\n', out);
      bool printed = false;
      if (!rc)
        rc = etch__fleet_print_answer(etch__ch_text(&b), b.len, out, mode,
                                      &printed);
      any |= printed;
    }
    s = *e ? e + 1 : e;
  }
  etch__ch_buf_free(&b);
  return rc;
}

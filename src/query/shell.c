/*
 * shell.c - running SQL text: scripts of several statements, and the
 * interactive prompt of `etch query` (a plain line reader: no readline).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "query/query.h"

int etch__query_run_sql(sqlite3 *db, const char *sql, FILE *out,
                        etch__out_mode mode) {
  const char *p = sql;
  bool printed = false;
  while (p && *p) {
    sqlite3_stmt *st = NULL;
    const char *tail = NULL;
    if (sqlite3_prepare_v2(db, p, -1, &st, &tail) != SQLITE_OK)
      return etch__error(ETCH_ESQL, "SQL error: %s", sqlite3_errmsg(db));
    if (!st) break; /* only blanks or comments left */
    if (sqlite3_column_count(st) && printed && mode == ETCH__OUT_TABLE)
      fputc('\n', out);
    int rc = etch__query_print_stmt(st, out, mode);
    if (sqlite3_column_count(st)) printed = true;
    sqlite3_finalize(st);
    if (rc) return rc;
    p = tail;
  }
  return ETCH_OK;
}

static const char kShellHelp[] =
    "Enter SQL ending with ';' (a statement may span lines). Commands:\n"
    "  .tables           list tables and views\n"
    "  .schema [NAME]    show CREATE statements\n"
    "  .mode table|csv   output format\n"
    "  .help             this text\n"
    "  .quit             leave (also Ctrl-D)\n";

/* Handles a dot command; returns false to leave the shell. */
static bool dot_command(sqlite3 *db, char *line, FILE *out,
                        etch__out_mode *mode) {
  char *cmd = strtok(line, " \t\r\n");
  char *arg = strtok(NULL, " \t\r\n");
  if (!cmd) return true;
  int rc = ETCH_OK;
  if (!strcmp(cmd, ".quit") || !strcmp(cmd, ".exit") || !strcmp(cmd, ".q")) {
    return false;
  } else if (!strcmp(cmd, ".help")) {
    fputs(kShellHelp, out);
  } else if (!strcmp(cmd, ".tables")) {
    rc = etch__query_run_sql(
        db,
        "SELECT name, type FROM sqlite_schema WHERE type IN ('table','view') "
        "AND name NOT LIKE 'sqlite_%' ORDER BY name;",
        out, ETCH__OUT_TABLE);
  } else if (!strcmp(cmd, ".schema")) {
    sqlite3_stmt *st;
    const char *sql =
        arg ? "SELECT sql FROM sqlite_schema WHERE name = ?1 AND sql NOT NULL"
            : "SELECT sql FROM sqlite_schema WHERE sql NOT NULL AND name NOT "
              "LIKE 'sqlite_%' ORDER BY type DESC, name";
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
      rc = etch__error(ETCH_ESQL, "SQL error: %s", sqlite3_errmsg(db));
    } else {
      if (arg) sqlite3_bind_text(st, 1, arg, -1, SQLITE_STATIC);
      while (sqlite3_step(st) == SQLITE_ROW)
        fprintf(out, "%s;\n", (const char *)sqlite3_column_text(st, 0));
      sqlite3_finalize(st);
    }
  } else if (!strcmp(cmd, ".mode")) {
    if (arg && !strcmp(arg, "csv"))
      *mode = ETCH__OUT_CSV;
    else if (arg && !strcmp(arg, "table"))
      *mode = ETCH__OUT_TABLE;
    else
      fprintf(out, "usage: .mode table|csv\n");
  } else {
    fprintf(out, "unknown command %s (try .help)\n", cmd);
  }
  if (rc) fprintf(out, "%s\n", etch_last_error());
  return true;
}

static bool blank(const char *s) {
  while (*s && isspace((unsigned char)*s)) s++;
  return *s == '\0';
}

int etch__query_shell(sqlite3 *db, FILE *in, FILE *out,
                      etch__out_mode mode) {
  char *stmt = NULL;
  size_t stmt_len = 0;
  char *line = NULL;
  size_t line_cap = 0;
  fputs("etch query: SQL ending with ';', .help for commands, .quit to "
        "leave\n",
        out);
  for (;;) {
    fputs(stmt_len ? "   ...> " : "etch> ", out);
    fflush(out);
    ssize_t n = getline(&line, &line_cap, in);
    if (n < 0) {
      fputc('\n', out);
      break;
    }
    if (!stmt_len) {
      const char *s = line;
      while (*s == ' ' || *s == '\t') s++;
      if (*s == '.') {
        if (!dot_command(db, line, out, &mode)) break;
        continue;
      }
      if (blank(line)) continue;
    }
    char *grown = etch__realloc(stmt, stmt_len + (size_t)n + 1);
    if (!grown) break;
    stmt = grown;
    memcpy(stmt + stmt_len, line, (size_t)n + 1);
    stmt_len += (size_t)n;
    if (!sqlite3_complete(stmt)) continue;
    if (etch__query_run_sql(db, stmt, out, mode) != ETCH_OK)
      fprintf(out, "%s\n", etch_last_error());
    stmt_len = 0;
    stmt[0] = '\0';
  }
  free(stmt);
  free(line);
  return ETCH_OK;
}

/*
 * json_parse.h - a small strict JSON parser for the tests: the whole text
 * must be one JSON value (RFC 8259: no trailing commas, no comments, no
 * bare words, strings with valid escapes and no raw control characters),
 * or jp_parse fails. Numbers are kept as text and as a double.
 */
#ifndef ETCH_TESTS_JSON_PARSE_H
#define ETCH_TESTS_JSON_PARSE_H

#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef enum jp_kind { JP_NULL, JP_BOOL, JP_NUM, JP_STR, JP_ARR, JP_OBJ } jp_kind;

typedef struct jp {
  jp_kind kind;
  bool b;
  double num;
  char *str;         /* JP_STR: the decoded string; JP_NUM: the text */
  char **keys;       /* JP_OBJ */
  struct jp **items; /* JP_ARR, JP_OBJ */
  size_t n;
} jp;

static inline void jp_free(jp *v) {
  if (!v) return;
  for (size_t i = 0; i < v->n; i++) {
    if (v->keys) free(v->keys[i]);
    jp_free(v->items[i]);
  }
  free(v->keys);
  free(v->items);
  free(v->str);
  free(v);
}

typedef struct jp_in {
  const char *p;
  int depth;
} jp_in;

static inline void jp_ws(jp_in *in) {
  while (*in->p == ' ' || *in->p == '\n' || *in->p == '\r' || *in->p == '\t')
    in->p++;
}

static jp *jp_value(jp_in *in);

/* A string at in->p (after its quote is checked); NULL if malformed. */
static inline char *jp_string(jp_in *in) {
  if (*in->p != '"') return NULL;
  in->p++;
  size_t cap = 16, n = 0;
  char *s = (char *)malloc(cap);
  for (;;) {
    unsigned char c = (unsigned char)*in->p++;
    if (n + 8 > cap) s = (char *)realloc(s, cap *= 2);
    if (c == '"') break;
    if (c < 0x20) goto bad; /* NUL (the end) or a raw control character */
    if (c != '\\') {
      s[n++] = (char)c;
      continue;
    }
    c = (unsigned char)*in->p++;
    switch (c) {
      case '"': case '\\': case '/': s[n++] = (char)c; break;
      case 'b': s[n++] = '\b'; break;
      case 'f': s[n++] = '\f'; break;
      case 'n': s[n++] = '\n'; break;
      case 'r': s[n++] = '\r'; break;
      case 't': s[n++] = '\t'; break;
      case 'u': {
        unsigned cp = 0;
        for (int i = 0; i < 4; i++) {
          char h = *in->p++;
          if (!isxdigit((unsigned char)h)) goto bad;
          cp = cp * 16 + (unsigned)(isdigit((unsigned char)h)
                                        ? h - '0'
                                        : (tolower((unsigned char)h) - 'a' + 10));
        }
        /* UTF-8 of the code unit (surrogates kept as they are). */
        if (cp < 0x80) {
          s[n++] = (char)cp;
        } else if (cp < 0x800) {
          s[n++] = (char)(0xc0 | (cp >> 6));
          s[n++] = (char)(0x80 | (cp & 0x3f));
        } else {
          s[n++] = (char)(0xe0 | (cp >> 12));
          s[n++] = (char)(0x80 | ((cp >> 6) & 0x3f));
          s[n++] = (char)(0x80 | (cp & 0x3f));
        }
        break;
      }
      default: goto bad;
    }
  }
  s[n] = '\0';
  return s;
bad:
  free(s);
  return NULL;
}

static inline jp *jp_new(jp_kind k) {
  jp *v = (jp *)calloc(1, sizeof *v);
  v->kind = k;
  return v;
}

static inline void jp_push(jp *v, char *key, jp *item) {
  v->items = (jp **)realloc(v->items, (v->n + 1) * sizeof *v->items);
  if (v->kind == JP_OBJ) {
    v->keys = (char **)realloc(v->keys, (v->n + 1) * sizeof *v->keys);
    v->keys[v->n] = key;
  }
  v->items[v->n++] = item;
}

static jp *jp_value(jp_in *in) {
  jp_ws(in);
  if (++in->depth > 64) return NULL;
  jp *v = NULL;
  const char *p = in->p;
  if (*p == '{' || *p == '[') {
    bool obj = *p == '{';
    v = jp_new(obj ? JP_OBJ : JP_ARR);
    in->p++;
    jp_ws(in);
    if (*in->p == (obj ? '}' : ']')) {
      in->p++;
    } else {
      for (;;) {
        char *key = NULL;
        if (obj) {
          jp_ws(in);
          key = jp_string(in);
          jp_ws(in);
          if (!key || *in->p != ':') {
            free(key);
            goto bad;
          }
          in->p++;
        }
        jp *item = jp_value(in);
        if (!item) {
          free(key);
          goto bad;
        }
        jp_push(v, key, item);
        jp_ws(in);
        if (*in->p == ',') {
          in->p++;
          continue;
        }
        if (*in->p != (obj ? '}' : ']')) goto bad;
        in->p++;
        break;
      }
    }
  } else if (*p == '"') {
    v = jp_new(JP_STR);
    if (!(v->str = jp_string(in))) goto bad;
  } else if (!strncmp(p, "null", 4)) {
    v = jp_new(JP_NULL);
    in->p += 4;
  } else if (!strncmp(p, "true", 4) || !strncmp(p, "false", 5)) {
    v = jp_new(JP_BOOL);
    v->b = *p == 't';
    in->p += v->b ? 4 : 5;
  } else if (*p == '-' || isdigit((unsigned char)*p)) {
    /* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
    const char *q = p;
    if (*q == '-') q++;
    if (*q == '0') q++;
    else if (isdigit((unsigned char)*q)) while (isdigit((unsigned char)*q)) q++;
    else return NULL;
    if (*q == '.') {
      if (!isdigit((unsigned char)*++q)) return NULL;
      while (isdigit((unsigned char)*q)) q++;
    }
    if (*q == 'e' || *q == 'E') {
      q++;
      if (*q == '+' || *q == '-') q++;
      if (!isdigit((unsigned char)*q)) return NULL;
      while (isdigit((unsigned char)*q)) q++;
    }
    v = jp_new(JP_NUM);
    v->str = strndup(p, (size_t)(q - p));
    v->num = strtod(v->str, NULL);
    in->p = q;
  } else {
    return NULL;
  }
  in->depth--;
  return v;
bad:
  jp_free(v);
  return NULL;
}

/* The value of the whole text, or NULL when it is not (only) JSON. */
static inline jp *jp_parse(const char *text) {
  jp_in in = {text, 0};
  jp *v = jp_value(&in);
  if (!v) return NULL;
  jp_ws(&in);
  if (*in.p) {
    jp_free(v);
    return NULL;
  }
  return v;
}

/* The member `key` of an object, or NULL. */
static inline const jp *jp_get(const jp *v, const char *key) {
  if (!v || v->kind != JP_OBJ) return NULL;
  for (size_t i = 0; i < v->n; i++)
    if (!strcmp(v->keys[i], key)) return v->items[i];
  return NULL;
}

/* The integer member `key` (INT64_MIN when missing or not an integer). */
static inline int64_t jp_int(const jp *v, const char *key) {
  const jp *m = jp_get(v, key);
  if (!m || m->kind != JP_NUM || strpbrk(m->str, ".eE")) return INT64_MIN;
  return strtoll(m->str, NULL, 10);
}

#endif

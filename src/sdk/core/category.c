/*
 * category.c - the category registry and per-session category filters.
 *
 * A category's `enabled` word has one bit per session slot. Sessions set and
 * clear their bit under the global lock when they start and stop; a category
 * registered later (a dynamic one, or one in a library loaded later) gets the
 * bits of the running sessions whose filter matches it.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/core/sdk.h"

static bool has_tag(const etch_category *cat, const char *tag) {
  const char *t = cat->tags;
  size_t n = strlen(tag);
  while (t && *t) {
    while (*t == ',' || *t == ' ') t++;
    const char *e = t;
    while (*e && *e != ',') e++;
    size_t len = (size_t)(e - t);
    while (len && t[len - 1] == ' ') len--;
    if (len == n && strncmp(t, tag, n) == 0) return true;
    t = e;
  }
  return false;
}

/* 0 no match, 1 by pattern, 2 by exact name or a non-bare pattern. */
static int pattern_match(const char *pat, const char *name) {
  size_t n = strlen(pat);
  if (n && pat[n - 1] == '*') {
    if (strncmp(pat, name, n - 1) != 0) return 0;
    return n == 1 ? 1 : 2;
  }
  return strcmp(pat, name) == 0 ? 2 : 0;
}

/* The process-wide switch of a category (etch_channel_set): two bits of
 * its flags. */
#define SWITCH_MASK 3u
static uint32_t cat_switch(const etch_category *cat) {
  return __atomic_load_n(&cat->flags, __ATOMIC_RELAXED) & SWITCH_MASK;
}

bool etch__filter_match(const etch_cat_filter *f, const etch_category *cat) {
  uint32_t sw = cat_switch(cat);
  if (sw == ETCH_CAT_SWITCH_OFF) return false;
  for (uint32_t i = 0; i < f->nexcl; i++)
    if (pattern_match(f->excl[i], cat->name)) return false;
  /* Off until asked for: debug and slow categories, and channels not
   * switched on, are recorded when named (not by the bare "*"). */
  bool special = has_tag(cat, "debug") || has_tag(cat, "slow") ||
                 (sw != ETCH_CAT_SWITCH_ON && has_tag(cat, "channel"));
  for (uint32_t i = 0; i < f->nincl; i++) {
    int m = pattern_match(f->incl[i], cat->name);
    if (m == 2 || (m == 1 && !special)) return true;
  }
  return false;
}

void etch__filter_free(etch_cat_filter *f) {
  for (uint32_t i = 0; i < f->nincl; i++) free(f->incl[i]);
  for (uint32_t i = 0; i < f->nexcl; i++) free(f->excl[i]);
  free(f->incl);
  free(f->excl);
  memset(f, 0, sizeof *f);
}

static int valid_pattern(const char *p, size_t n) {
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)p[i];
    if (c == '*') {
      if (i != n - 1) return 0;
      continue;
    }
    if (!(isalnum(c) || c == '_' || c == '.' || c == ':' || c == '/' ||
          c == '-' || c == '$'))
      return 0;
  }
  return 1;
}

int etch__filter_parse(etch_cat_filter *f, const char *spec) {
  memset(f, 0, sizeof *f);
  if (!spec) spec = "*";
  const char *p = spec;
  size_t cap = strlen(spec) + 1;
  f->incl = (char **)etch__calloc(cap, sizeof(char *));
  f->excl = (char **)etch__calloc(cap, sizeof(char *));
  if (!f->incl || !f->excl) {
    etch__filter_free(f);
    return ETCH_ENOMEM;
  }
  while (*p) {
    while (*p == ',' || isspace((unsigned char)*p)) p++;
    if (!*p) break;
    const char *e = p;
    while (*e && *e != ',') e++;
    const char *te = e;
    while (te > p && isspace((unsigned char)te[-1])) te--;
    bool excl = *p == '-';
    const char *ps = excl ? p + 1 : p;
    size_t n = (size_t)(te - ps);
    if (!valid_pattern(ps, n)) {
      int len = (int)(te - p);
      etch__filter_free(f);
      return etch__error(ETCH_ECONFIG,
                         "categories: bad pattern '%.*s' (expected a name, a "
                         "prefix ending in '*', or '-' before either)",
                         len, p);
    }
    char *s = (char *)etch__malloc(n + 1);
    if (!s) {
      etch__filter_free(f);
      return ETCH_ENOMEM;
    }
    memcpy(s, ps, n);
    s[n] = '\0';
    if (excl)
      f->excl[f->nexcl++] = s;
    else
      f->incl[f->nincl++] = s;
    p = e;
  }
  if (f->nincl == 0 && f->nexcl == 0) {
    etch__filter_free(f);
    return etch__error(ETCH_ECONFIG,
                       "categories: an empty list records nothing ('*' "
                       "records every category)");
  }
  if (f->nincl == 0 && f->nexcl > 0) {
    /* Only exclusions: everything else is in. */
    f->incl[f->nincl++] = etch__strdup("*");
  }
  return ETCH_OK;
}

/* Global lock held. */
static uint32_t mask_for(const etch_category *cat) {
  uint32_t mask = 0;
  for (uint32_t i = 0; i < ETCH_MAX_SESSIONS; i++) {
    etch_session *s = etch__g.slots[i];
    if (s && __atomic_load_n(&s->state, __ATOMIC_RELAXED) == ETCH_SESS_RUNNING &&
        etch__filter_match(&s->filter, cat))
      mask |= 1u << i;
  }
  return mask;
}

void etch__categories_apply(etch_session *s, bool enable) {
  uint32_t bit = 1u << s->slot;
  for (etch_category *c = etch__g.cats; c; c = c->next) {
    if (enable && etch__filter_match(&s->filter, c))
      __atomic_fetch_or(&c->enabled, bit, __ATOMIC_RELAXED);
    else
      __atomic_fetch_and(&c->enabled, ~bit, __ATOMIC_RELAXED);
  }
}

/* Switch rules in the order given (global lock): categories registered
 * later get the last rule that matches them. */
static struct {
  char **pat;
  bool *on;
  uint32_t n, cap;
} g_rules;

static void switch_set(etch_category *cat, uint32_t sw) {
  uint32_t f = __atomic_load_n(&cat->flags, __ATOMIC_RELAXED);
  __atomic_store_n(&cat->flags, (f & ~SWITCH_MASK) | sw, __ATOMIC_RELAXED);
}

static void register_locked(etch_category *cat) {
  for (etch_category *c = etch__g.cats; c; c = c->next)
    if (c == cat) return;
  for (uint32_t i = 0; i < g_rules.n; i++)
    if (pattern_match(g_rules.pat[i], cat->name))
      switch_set(cat, g_rules.on[i] ? ETCH_CAT_SWITCH_ON : ETCH_CAT_SWITCH_OFF);
  cat->id = ++etch__g.next_cat_id;
  cat->next = etch__g.cats;
  etch__g.cats = cat;
  __atomic_store_n(&cat->enabled, mask_for(cat), __ATOMIC_RELAXED);
}

void etch_category_register(etch_category *cat) {
  if (!cat || !cat->name) return;
  pthread_mutex_lock(&etch__g.lock);
  register_locked(cat);
  pthread_mutex_unlock(&etch__g.lock);
  etch__join_maybe_init();
}

etch_category *etch_category_get(const char *name) {
  if (!name) {
    etch__error(ETCH_EINVAL, "etch_category_get: name is NULL");
    return NULL;
  }
  pthread_mutex_lock(&etch__g.lock);
  etch_category *found = NULL;
  for (etch_category *c = etch__g.cats; c; c = c->next)
    if (strcmp(c->name, name) == 0) found = c;
  if (!found) {
    found = (etch_category *)etch__calloc(1, sizeof *found);
    char *copy = etch__strdup(name);
    if (found && copy) {
      found->name = copy;
      found->description = "";
      found->tags = "";
      register_locked(found);
    } else {
      free(found);
      free(copy);
      found = NULL;
    }
  }
  pthread_mutex_unlock(&etch__g.lock);
  return found;
}

void etch_category_foreach(void (*fn)(const etch_category *, void *),
                           void *user) {
  pthread_mutex_lock(&etch__g.lock);
  for (etch_category *c = etch__g.cats; c; c = c->next) fn(c, user);
  pthread_mutex_unlock(&etch__g.lock);
}

void etch__channel_names(char *buf, size_t cap) {
  size_t len = 0;
  if (!cap) return;
  buf[0] = '\0';
  pthread_mutex_lock(&etch__g.lock);
  for (etch_category *c = etch__g.cats; c; c = c->next) {
    if (!has_tag(c, "channel")) continue;
    int n = snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", c->name);
    if (n < 0 || (size_t)n >= cap - len) break;
    len += (size_t)n;
  }
  pthread_mutex_unlock(&etch__g.lock);
}

int etch__category_count(const char *pattern) {
  etch_cat_filter f;
  int rc = etch__filter_parse(&f, pattern);
  if (rc) return rc;
  int n = 0;
  pthread_mutex_lock(&etch__g.lock);
  for (etch_category *c = etch__g.cats; c; c = c->next)
    for (uint32_t i = 0; i < f.nincl; i++)
      if (pattern_match(f.incl[i], c->name)) {
        n++;
        break;
      }
  pthread_mutex_unlock(&etch__g.lock);
  etch__filter_free(&f);
  return n;
}

int etch_channel_set(const char *pattern, bool on) {
  if (!pattern)
    return etch__error(ETCH_EINVAL, "etch_channel_set: pattern is NULL");
  /* The same syntax as a session's categories, without exclusions. */
  etch_cat_filter f;
  int rc = etch__filter_parse(&f, pattern);
  if (rc) return rc;
  if (f.nexcl) {
    etch__filter_free(&f);
    return etch__error(ETCH_ECONFIG,
                       "etch_channel_set: '%s': '-' has no meaning here (use "
                       "on = false)", pattern);
  }
  int matched = 0;
  pthread_mutex_lock(&etch__g.lock);
  for (uint32_t i = 0; i < f.nincl; i++) {
    if (g_rules.n == g_rules.cap) {
      uint32_t cap = g_rules.cap ? 2 * g_rules.cap : 8;
      char **np = (char **)etch__realloc(g_rules.pat, cap * sizeof *np);
      if (np) g_rules.pat = np;
      bool *no = np ? (bool *)etch__realloc(g_rules.on, cap * sizeof *no) : NULL;
      if (no) g_rules.on = no;
      if (!np || !no) {
        pthread_mutex_unlock(&etch__g.lock);
        etch__filter_free(&f);
        return ETCH_ENOMEM;
      }
      g_rules.cap = cap;
    }
    g_rules.pat[g_rules.n] = f.incl[i];
    g_rules.on[g_rules.n++] = on;
    f.incl[i] = NULL;
  }
  for (etch_category *c = etch__g.cats; c; c = c->next) {
    bool hit = false;
    for (uint32_t i = g_rules.n - f.nincl; i < g_rules.n; i++)
      hit |= pattern_match(g_rules.pat[i], c->name) != 0;
    if (!hit) continue;
    matched++;
    switch_set(c, on ? ETCH_CAT_SWITCH_ON : ETCH_CAT_SWITCH_OFF);
    __atomic_store_n(&c->enabled, mask_for(c), __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&etch__g.lock);
  etch__filter_free(&f);
  return matched;
}

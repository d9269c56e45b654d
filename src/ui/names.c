/*
 * names.c - slice names by key: slice_data's rows name their (category,
 * name) pair by a key_id of slice_name (query/schema.c). The ui's hot
 * queries read slice_data and group by the integer key; the names are
 * read once from slice_name, each distinct text kept once, so that two
 * pointers to names are equal exactly when the texts are.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/containers.h"
#include "ui/str.h"
#include "ui/ui.h"

/* Keys up to this many times the number of rows (plus some) are looked
 * up in an array; sparser ones in a map. */
enum { kDenseFactor = 4, kDenseSlack = 4096 };

static uint64_t text_hash(const char *s, size_t len) {
  return s ? etch__hash_bytes(s, len, 0x6e616d65u) : 0x9e3779b97f4a7c15ull;
}

/* The index of the text (NULL: the NULL name), added if new; -1 out of
 * memory. */
static int64_t intern(etch__ui_names *nm, const char *s, size_t len) {
  uint64_t h = text_hash(s, len);
  int64_t k;
  for (;;) { /* a clash of hashes takes the next key */
    if (!etch__u64map_get(&nm->by_text, h, &k)) break;
    const char *o = nm->text[k];
    if (!s ? !o : (o && strlen(o) == len && !memcmp(o, s, len))) return k;
    h++;
  }
  if (ETCH_VEC_RESERVE(&nm->texts, char *, 1)) return -1;
  char *c = NULL;
  if (s) {
    c = etch__malloc(len + 1);
    if (!c) return -1;
    memcpy(c, s, len);
    c[len] = '\0';
  }
  k = (int64_t)nm->n;
  if (!etch__u64map_put(&nm->by_text, h, k)) {
    free(c);
    return -1;
  }
  (void)ETCH_VEC_PUSH(&nm->texts, char *, c); /* room made above */
  nm->text = ETCH_VEC_AT(&nm->texts, char *);
  nm->n++;
  return k;
}

int64_t etch__ui_names_find(const etch__ui_names *nm, const char *s,
                            size_t len) {
  uint64_t h = text_hash(s, len);
  int64_t k;
  for (; etch__u64map_get(&nm->by_text, h, &k); h++) {
    const char *o = nm->text[k];
    if (!s ? !o : (o && strlen(o) == len && !memcmp(o, s, len))) return k;
  }
  return -1;
}

int etch__ui_names_load(etch__db *db, bool null_as_empty,
                        etch__ui_names **out) {
  *out = NULL;
  etch__ui_names *nm = etch__calloc(1, sizeof *nm);
  if (!nm) return etch__error(ETCH_ENOMEM, "out of memory");
  nm->refs = 1;
  /* Each row's key and its text's index. */
  typedef struct key_idx {
    int64_t key, idx;
  } key_idx;
  etch_vec rows = {0};
  int64_t maxkey = -1;
  etch__res r;
  int rc = etch__query_run(db,
                          null_as_empty
                              ? "SELECT id, coalesce(name, '') FROM slice_name"
                              : "SELECT id, name FROM slice_name",
                          NULL, 0, &r);
  if (rc) {
    etch__ui_names_unref(nm);
    return rc;
  }
  while (etch__res_next(&r)) {
    size_t len = 0;
    const char *s = etch__res_str(&r, 1, &len);
    int64_t k = intern(nm, s, len);
    if (k < 0) {
      r.err = etch__error(ETCH_ENOMEM, "out of memory");
      break;
    }
    key_idx *x = ETCH_VEC_NEW(&rows, key_idx);
    if (!x) {
      r.err = ETCH_ENOMEM;
      break;
    }
    *x = (key_idx){etch__res_i64(&r, 0), k};
    if (x->key > maxkey) maxkey = x->key;
  }
  rc = etch__res_close(&r);
  const key_idx *ki = (const key_idx *)rows.data;
  size_t nk = ETCH_VEC_COUNT(&rows, key_idx);
  /* Keys are the importer's, 1 up: an array unless they are sparse. */
  bool dense = maxkey >= 0 &&
               (uint64_t)maxkey < (uint64_t)nk * kDenseFactor + kDenseSlack;
  if (!rc && dense) {
    nm->of_key = etch__malloc(((size_t)maxkey + 1) * sizeof *nm->of_key);
    if (!nm->of_key) rc = etch__error(ETCH_ENOMEM, "out of memory");
    if (!rc) {
      nm->nkeys = (size_t)maxkey + 1;
      for (size_t i = 0; i < nm->nkeys; i++) nm->of_key[i] = -1;
    }
  }
  for (size_t i = 0; !rc && i < nk; i++) {
    if (ki[i].key < 0) continue;
    ETCH_DCHECK(ki[i].idx >= 0 && (size_t)ki[i].idx < nm->n);
    if (dense)
      nm->of_key[ki[i].key] = (int32_t)ki[i].idx;
    else if (!etch__u64map_put(&nm->key_map, (uint64_t)ki[i].key, ki[i].idx))
      rc = etch__error(ETCH_ENOMEM, "out of memory");
  }
  if (!rc && nm->n > INT32_MAX) rc = etch__error(ETCH_ELIMIT, "too many names");
  free(rows.data);
  if (rc) {
    etch__ui_names_unref(nm);
    return rc;
  }
  *out = nm;
  return ETCH_OK;
}

int64_t etch__ui_names_slow(const etch__ui_names *nm, int64_t key) {
  int64_t v;
  if (key >= 0 && (size_t)key < nm->nkeys) return nm->of_key[key];
  if (!nm->of_key && etch__u64map_get(&nm->key_map, (uint64_t)key, &v))
    return v;
  return -1;
}

etch__ui_names *etch__ui_names_ref(etch__ui_names *nm) {
  if (nm) nm->refs++;
  return nm;
}

void etch__ui_names_unref(etch__ui_names *nm) {
  if (!nm || --nm->refs > 0) return;
  for (size_t i = 0; i < nm->n; i++) free(nm->text[i]);
  etch__vec_free(&nm->texts);
  free(nm->of_key);
  etch__u64map_free(&nm->by_text);
  etch__u64map_free(&nm->key_map);
  free(nm);
}

/* Kept 0/1 patterns of sparse masks (a BFS step's visited set read as a
 * dense pattern, located per coordinate).
 *
 * Building a pattern costs a dense array of the mask's full extent (and
 * its page faults) plus a walk of its entries; a kernel run again on an
 * unchanged mask needs none of it. Whether the mask changed is decided by
 * its structure itself, copied and compared byte for byte (dims, level
 * lengths, pos and crd arrays: O(stored entries), no allocation): no
 * version counter could see a caller's in-place change to arrays it
 * wrapped. A changed mask reuses the dense array: the positions set last
 * time are cleared and the new ones set, O(old + new entries).
 */
#include <stdlib.h>
#include <string.h>

#include "tensor.h"

/* Appends n bytes at q to the buffer (growing it), or, when cmp, compares
 * them with the buffer at *at; false on a difference or out of memory. */
typedef struct Shape {
  RtPattern *p;
  bool cmp;
  size_t at;
} Shape;

static bool shape_bytes(Shape *sh, const void *q, size_t n) {
  RtPattern *p = sh->p;
  if (sh->cmp) {
    if (sh->at + n > p->shape_len || (n && memcmp(p->shape + sh->at, q, n))) return false;
    sh->at += n;
    return true;
  }
  if (sh->at + n > p->shape_cap) {
    size_t cap = (sh->at + n) * 2;
    unsigned char *b = realloc(p->shape, cap);
    if (!b) return false;
    p->shape = b, p->shape_cap = cap;
  }
  if (n) memcpy(p->shape + sh->at, q, n);
  sh->at += n;
  p->shape_len = sh->at;
  return true;
}

/* src's structure and the pattern's format, recorded (cmp false) or
 * compared with the record (cmp true). */
static bool shape_walk(RtPattern *p, const tj_tensor *src, const tj_format *fmt, bool cmp) {
  Shape sh = {p, cmp, 0};
  const tj_storage *s = &src->st;
  int64_t head[4] = {s->order, s->dtype, s->vals_len, s->vals != NULL};
  bool ok = shape_bytes(&sh, head, sizeof head) && shape_bytes(&sh, s->dims, sizeof s->dims) &&
            shape_bytes(&sh, fmt, sizeof *fmt) && shape_bytes(&sh, &src->fmt, sizeof src->fmt);
  for (int l = 0; ok && l < s->order; l++) {
    const tj_level_storage *lv = &s->levels[l];
    int64_t lens[3] = {lv->kind, lv->pos ? lv->pos_len : -1, lv->crd ? lv->crd_len : -1};
    ok = shape_bytes(&sh, lens, sizeof lens) &&
         (!lv->pos || shape_bytes(&sh, lv->pos, (size_t)(lv->pos_len * s->pos_width))) &&
         (!lv->crd || shape_bytes(&sh, lv->crd, (size_t)(lv->crd_len * s->crd_width)));
  }
  return ok && (!cmp || sh.at == p->shape_len);
}

typedef struct Fill {
  RtPattern *p;
  const tj_storage *pat;
  RtVal one;
  bool nomem;
} Fill;

/* Sets the pattern's entry at coord (its linear position in the pattern's
 * level order) and records it. */
static void set_one(void *ctx, const int64_t *coord, int64_t pos) {
  (void)pos;
  Fill *f = ctx;
  RtPattern *p = f->p;
  const tj_storage *t = f->pat;
  int64_t lin = 0;
  for (int l = 0; l < t->order; l++) lin = lin * t->levels[l].size + coord[t->map[l].dim];
  if (p->nset == p->set_cap) {
    int64_t cap = p->set_cap ? 2 * p->set_cap : 256;
    int64_t *b = realloc(p->set, (size_t)cap * sizeof *b);
    if (!b) {
      f->nomem = true;
      return;
    }
    p->set = b, p->set_cap = cap;
  }
  p->set[p->nset++] = lin;
  rt_storage_put((tj_storage *)t, lin, f->one);
}

/* A zeroed all-dense pattern tensor for src in fmt. */
static tj_status new_pattern(const tj_tensor *src, const tj_format *fmt, tj_tensor **out) {
  tj_status st = tj_tensor_new(src->name, tj_tensor_dtype(src), fmt->order, src->st.dims, fmt, out);
  if (st != TJ_OK) return st;
  tj_storage *s = &(*out)->st;
  int64_t n = 1;
  for (int l = 0; l < s->order; l++) n *= s->levels[l].size;
  s->vals = rt_array_new(n ? n : 1, (size_t)rt_dtype_size(s->dtype), true);
  if (!s->vals) {
    tj_tensor_free(*out);
    *out = NULL;
    return rt_set_error(TJ_ERR_NOMEM, "out of memory for the pattern of mask %s", src->name);
  }
  s->vals_len = s->vals_cap = n;
  return TJ_OK;
}

tj_status rt_pattern_refresh(RtPattern *p, const tj_tensor *src, const tj_format *fmt,
                             tj_tensor **out, bool *rebuilt) {
  *rebuilt = false;
  if (src->base) {   /* a view's structure is its base's and its slice: built each time */
    tj_tensor *own;
    tj_format f = src->ufmt;
    rt_format_unslice(&f);
    tj_status st = tj_tensor_convert(src, &f, &own);
    if (st != TJ_OK) return st;
    tj_tensor *pat = NULL;
    st = rt_tensor_pattern(own, fmt, &pat);
    tj_tensor_free(own);
    if (st != TJ_OK) return st;
    tj_tensor_free(p->pat);   /* p keeps the new one; no record: rebuilt next time */
    p->pat = *out = pat;
    p->nset = p->shape_len = 0;
    *rebuilt = true;
    return TJ_OK;
  }
  if (p->pat && shape_walk(p, src, fmt, true)) {
    *out = p->pat;
    return TJ_OK;
  }
  *rebuilt = true;
  tj_storage *s = p->pat ? &p->pat->st : NULL;
  bool same_frame = s && s->dtype == src->st.dtype && s->order == fmt->order &&
                    !memcmp(s->dims, src->st.dims, sizeof s->dims) &&
                    !memcmp(&p->pat->fmt, fmt, sizeof *fmt);
  if (same_frame) {   /* clear what was set: zero bits are 0 in every dtype */
    for (int64_t k = 0; k < p->nset; k++) rt_storage_put(s, p->set[k], (RtVal){.i = 0});
  } else {
    tj_tensor_free(p->pat);
    p->pat = NULL;
    tj_status st = new_pattern(src, fmt, &p->pat);
    if (st != TJ_OK) return st;
  }
  p->nset = 0;
  p->shape_len = 0;
  Fill f = {p, &p->pat->st, rt_val_from_double(tj_tensor_dtype(src), 1), false};
  rt_storage_walk(&src->st, set_one, &f);
  if (f.nomem || !shape_walk(p, src, fmt, false)) {
    rt_pattern_free(p);   /* half built: start over next time */
    return rt_set_error(TJ_ERR_NOMEM, "out of memory for the pattern of mask %s", src->name);
  }
  *out = p->pat;
  return TJ_OK;
}

void rt_pattern_free(RtPattern *p) {
  tj_tensor_free(p->pat);
  free(p->set);
  free(p->shape);
  memset(p, 0, sizeof *p);
}

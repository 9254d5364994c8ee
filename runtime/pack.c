/* Pack: COO entries -> per-level storage arrays.
 *
 * The entries (current contents plus the insertion buffer) are sorted in
 * level order by a stable LSD radix sort: on one linear level-order key
 * when the level extents multiply into 63 bits, else on each level's
 * coordinate, last level first. Duplicates are then summed unless a level
 * is nonunique.
 * Levels are built top-down from each entry's parent position: a dense
 * level multiplies positions (p*size + i), a compressed level opens a new
 * position per distinct (parent, coordinate) and counts segments into pos,
 * a singleton level copies one coordinate per parent position. Nothing is
 * allocated per entry, and dense space exists only below stored positions.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "tensor.h"

/* Sorted entries, one coordinate array per level. */
typedef struct Sorted {
  int64_t n;
  int64_t *lc[TJ_MAX_ORDER];  /* lc[l][e]: level-l coordinate of entry e */
  RtVal *vals;                /* in the tensor's dtype */
} Sorted;

static void sorted_free(Sorted *s) {
  for (int l = 0; l < TJ_MAX_ORDER; l++) free(s->lc[l]);
  free(s->vals);
}

static tj_status nomem(const tj_tensor *t) {
  return rt_set_error(TJ_ERR_NOMEM, "out of memory packing tensor %s",
                      t->name);
}

enum { DIGIT_BITS = 11, BUCKETS = 1 << DIGIT_BITS };

/* One stable counting pass on the digit at `shift` of key, carrying perm;
 * false (and nothing moved) when every key has the same digit. */
static bool radix_pass(int64_t n, int shift, const uint64_t *key,
                       const int64_t *perm, uint64_t *key2, int64_t *perm2,
                       int64_t *count) {
  memset(count, 0, (BUCKETS + 1) * sizeof *count);
  for (int64_t i = 0; i < n; i++)
    count[((key[i] >> shift) & (BUCKETS - 1)) + 1]++;
  for (int b = 0; b < BUCKETS; b++) {
    if (count[b + 1] == n) return false;
    count[b + 1] += count[b];
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t at = count[(key[i] >> shift) & (BUCKETS - 1)]++;
    key2[at] = key[i];
    perm2[at] = perm[i];
  }
  return true;
}

static bool is_level_sorted(const int64_t *coords, int order, int64_t n,
                            const tj_format *f) {
  for (int64_t e = 1; e < n; e++) {
    const int64_t *a = coords + (e - 1) * order, *b = coords + e * order;
    for (int l = 0; l < order; l++) {
      int m = f->mode_order[l];
      if (a[m] < b[m]) break;
      if (a[m] > b[m]) return false;
    }
  }
  return true;
}

/* Sorts entries in level order into *perm (malloc'd). */
static tj_status sort_perm(const tj_tensor *t, const int64_t *coords,
                           int64_t n, int64_t **perm_out) {
  int order = t->fmt.order;
  int64_t *perm = malloc((size_t)(n ? n : 1) * sizeof *perm);
  if (!perm) return nomem(t);
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  *perm_out = perm;
  if (is_level_sorted(coords, order, n, &t->fmt)) return TJ_OK;
  int64_t *perm2 = malloc((size_t)n * sizeof *perm2);
  uint64_t *key = malloc((size_t)n * sizeof *key);
  uint64_t *key2 = malloc((size_t)n * sizeof *key2);
  if (!perm2 || !key || !key2) {
    free(perm2), free(key), free(key2);
    return nomem(t);
  }
  int64_t count[BUCKETS + 1];
  for (int l = order - 1; l >= 0; l--) {
    int m = t->fmt.mode_order[l];
    uint64_t hi = 0;
    for (int64_t i = 0; i < n; i++) {
      key[i] = (uint64_t)coords[perm[i] * order + m];
      hi |= key[i];
    }
    for (int shift = 0; shift < 64 && (hi >> shift); shift += DIGIT_BITS) {
      if (!radix_pass(n, shift, key, perm, key2, perm2, count)) continue;
      uint64_t *tk = key; key = key2; key2 = tk;
      int64_t *tp = perm; perm = perm2; perm2 = tp;
    }
  }
  free(perm2), free(key), free(key2);
  *perm_out = perm;
  return TJ_OK;
}

/* The last level of the run of singletons below level l (l itself when
 * level l + 1 is not a singleton). */
static int singleton_chain_end(const tj_storage *s, int l) {
  while (l + 1 < s->order && s->levels[l + 1].kind == TJ_LVL_SINGLETON) l++;
  return l;
}

/* The first nonunique level, or -1. */
static int nonunique_head(const tj_storage *s) {
  for (int l = 0; l < s->order; l++)
    if (s->levels[l].flags & TJ_LVL_NONUNIQUE) return l;
  return -1;
}

/* The last level of a COO run whose tuple pack stores once, or -1: the run
 * is the first nonunique (compressed) level and the singletons under it,
 * and levels follow it that are all dense or unique compressed (`uqd`,
 * blocked COO `uqdd`, `uqs`, `ucs`). Each such tuple then owns one fiber
 * (block) of the levels below, which is what kernels read: entries that
 * share the tuple share the fiber, and pack sums duplicates. */
static int grouped_run_end(const tj_storage *s) {
  int nu = nonunique_head(s);
  if (nu < 0 || s->levels[nu].kind == TJ_LVL_SINGLETON) return -1;
  int end = singleton_chain_end(s, nu);
  if (end == nu || end == s->order - 1) return -1;
  for (int l = end + 1; l < s->order; l++) {
    const tj_level_storage *lv = &s->levels[l];
    bool plain = lv->kind == TJ_LVL_DENSE || lv->kind == TJ_LVL_COMPRESSED ||
                 lv->kind == TJ_LVL_LOOSE_COMPRESSED;
    if (!plain || (lv->flags & TJ_LVL_NONUNIQUE)) return -1;
  }
  return end;
}

/* Whether the format may hold one coordinate tuple twice: it has a
 * nonunique level and the levels below the deepest one are not all unique
 * singletons, and it is not a COO run over fibers (grouped_run_end). COO's
 * `uq` may not (its singleton is unique within each run of equal rows, so
 * (i, j) is unique and pack sums duplicates, as wrap's validation demands
 * of arrays it adopts); `uc` may, and pack keeps its duplicates. */
static bool keeps_duplicates(const tj_storage *s) {
  if (grouped_run_end(s) >= 0) return false;
  int deepest = -1;
  for (int l = 0; l < s->order; l++)
    if (s->levels[l].flags & TJ_LVL_NONUNIQUE) deepest = l;
  if (deepest < 0) return false;
  for (int l = deepest + 1; l < s->order; l++)
    if (s->levels[l].kind != TJ_LVL_SINGLETON) return true;
  return deepest == s->order - 1;
}

/* Level-order strides when the product of the level extents fits in
 * 63 bits (then an entry's level-order key is one integer); else false. */
static bool linear_strides(const tj_storage *s, int64_t *stride) {
  int64_t total = 1;
  for (int l = s->order - 1; l >= 0; l--) {
    stride[l] = total;
    int64_t size = s->levels[l].size > 0 ? s->levels[l].size : 1;
    if (total > INT64_MAX / size) return false;
    total *= size;
  }
  return true;
}

/* Fast path: sorts (linear key, value) pairs with no random access and
 * decodes the level coordinates from the sorted keys. */
static tj_status sort_linear(const tj_tensor *t, const int64_t *coords,
                             const RtVal *vals, int64_t n,
                             const int64_t *stride, Sorted *out) {
  const tj_storage *s = &t->st;
  int order = s->order;
  bool sum = !keeps_duplicates(s);
  size_t bytes = (size_t)(n ? n : 1) * sizeof(uint64_t);
  uint64_t *key = malloc(bytes), *key2 = malloc(bytes);
  int64_t *val = malloc(bytes), *val2 = malloc(bytes);
  tj_status st = TJ_OK;
  if (!key || !key2 || !val || !val2) st = nomem(t);
  uint64_t hi = 0;
  for (int64_t i = 0; st == TJ_OK && i < n; i++) {
    uint64_t k = 0;
    for (int l = 0; l < order; l++)
      k += (uint64_t)coords[i * order + s->map[l].dim] * (uint64_t)stride[l];
    key[i] = k, hi |= k;
    memcpy(&val[i], &vals[i], sizeof(RtVal));
  }
  int64_t count[BUCKETS + 1];
  for (int shift = 0; st == TJ_OK && shift < 64 && (hi >> shift);
       shift += DIGIT_BITS) {
    if (!radix_pass(n, shift, key, val, key2, val2, count)) continue;
    uint64_t *tk = key; key = key2; key2 = tk;
    int64_t *tv = val; val = val2; val2 = tv;
  }
  free(key2), free(val2);
  for (int l = 0; st == TJ_OK && l < order; l++)
    if (!(out->lc[l] = malloc(bytes))) st = nomem(t);
  if (st == TJ_OK && !(out->vals = malloc(bytes))) st = nomem(t);
  int64_t k = 0;
  for (int64_t i = 0; st == TJ_OK && i < n; i++) {
    RtVal v;
    memcpy(&v, &val[i], sizeof v);
    if (sum && i > 0 && key[i] == key[i - 1]) {
      out->vals[k - 1] = rt_val_add(s->dtype, out->vals[k - 1], v);
      continue;
    }
    for (int l = 0; l < order; l++) {
      int64_t size = s->levels[l].size > 0 ? s->levels[l].size : 1;
      out->lc[l][k] = (int64_t)(key[i] / (uint64_t)stride[l]) % size;
    }
    out->vals[k++] = v;
  }
  out->n = k;
  free(key), free(val);
  return st;
}


/* Gathers coords/vals into level arrays in perm order, summing duplicate
 * coordinates unless the format keeps them (keeps_duplicates). */
static tj_status gather(const tj_tensor *t, const int64_t *coords,
                        const RtVal *vals, int64_t n, const int64_t *perm,
                        Sorted *out) {
  int order = t->fmt.order;
  bool sum = !keeps_duplicates(&t->st);
  size_t bytes = (size_t)(n ? n : 1) * sizeof(int64_t);
  for (int l = 0; l < order; l++)
    if (!(out->lc[l] = malloc(bytes))) return nomem(t);
  if (!(out->vals = malloc(bytes))) return nomem(t);
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++) {
    const int64_t *c = coords + perm[i] * order;
    bool dup = sum && k > 0;
    for (int l = 0; dup && l < order; l++)
      dup = out->lc[l][k - 1] == c[t->fmt.mode_order[l]];
    if (dup) {
      out->vals[k - 1] = rt_val_add(t->st.dtype, out->vals[k - 1], vals[perm[i]]);
      continue;
    }
    for (int l = 0; l < order; l++) out->lc[l][k] = c[t->fmt.mode_order[l]];
    out->vals[k++] = vals[perm[i]];
  }
  out->n = k;
  return TJ_OK;
}

static int first_nonunique(const tj_storage *s) {
  int l = 0;
  while (l < s->order && !(s->levels[l].flags & TJ_LVL_NONUNIQUE) &&
         s->levels[l].kind != TJ_LVL_SINGLETON)
    l++;
  return l;
}

static void *alloc_idx(int64_t n, int w) { return rt_array_new(n, (size_t)w, true); }

/* Whether sorted entry e starts a new position of a compressed level:
 * every entry does when group < 0, else one whose parent or coordinates
 * at levels l..group differ from entry e - 1's. */
static bool starts_position(const Sorted *so, const int64_t *par, int l,
                            int group, int64_t e, int64_t prev_par) {
  if (group < 0 || e == 0 || par[e] != prev_par) return true;
  for (int k = l; k <= group; k++)
    if (so->lc[k][e] != so->lc[k][e - 1]) return true;
  return false;
}

/* Builds compressed level l: fills pos (P+1) and crd, updates par and P.
 * Entries that agree on their parent and on the coordinates of levels
 * l..group share a position (group = l: a unique level; group past l: a
 * nonunique level over a run of unique singletons, one position per
 * tuple); group < 0 gives every entry its own position. */
static tj_status build_compressed(const tj_tensor *t, tj_storage *s, int l,
                                  const Sorted *so, int64_t *par, int64_t *P,
                                  int group) {
  tj_level_storage *lv = &s->levels[l];
  int pw = s->pos_width, cw = s->crd_width;
  const int64_t *c = so->lc[l];
  if (*P > INT64_MAX - 1) return nomem(t);
  lv->pos = alloc_idx(*P + 1, pw);
  int64_t q = -1, prev_par = -1;
  for (int64_t e = 0; e < so->n; e++)
    if (starts_position(so, par, l, group, e, prev_par)) q++, prev_par = par[e];
  int64_t nq = q + 1;
  lv->crd = alloc_idx(nq, cw);
  if (!lv->pos || !lv->crd) return nomem(t);
  tj_status fits = rt_check_positions(t->name, l, nq, pw);
  if (fits != TJ_OK) return fits;
  int64_t *count = calloc((size_t)(*P + 1), sizeof *count);
  if (!count) return nomem(t);
  q = -1, prev_par = -1;
  for (int64_t e = 0; e < so->n; e++) {
    if (starts_position(so, par, l, group, e, prev_par)) {
      q++, prev_par = par[e];
      count[par[e] + 1]++;
      rt_idx_set(lv->crd, cw, q, c[e]);
    }
    par[e] = q;
  }
  for (int64_t p = 0; p < *P; p++) count[p + 1] += count[p];
  for (int64_t p = 0; p <= *P; p++) rt_idx_set(lv->pos, pw, p, count[p]);
  free(count);
  lv->pos_len = lv->pos_cap = *P + 1;
  lv->crd_len = lv->crd_cap = nq;
  *P = nq;
  return TJ_OK;
}

/* Where the block of entry e of an n_out_of_m level l sits, for messages:
 * "(3, 8..11)" in dims (the level's own coordinate spanning the block). */
static void block_name(const tj_tensor *t, const Sorted *so, int l, int64_t e, char *buf,
                       size_t n) {
  int64_t lc[TJ_MAX_ORDER] = {0}, c[TJ_MAX_ORDER];
  for (int k = 0; k < l; k++) lc[k] = so->lc[k][e];
  if (t->blocked) rt_block_to_dims(t, lc, c);
  else memcpy(c, lc, sizeof c);
  int dim = t->blocked ? t->ufmt.mode_order[l] : l, m = (int)t->st.levels[l].size;
  size_t k = (size_t)snprintf(buf, n, "(");
  for (int d = 0; d < t->order && k < n; d++)
    k += (size_t)snprintf(buf + k, n - k, d == dim ? "%s%" PRId64 "..%" PRId64 : "%s%" PRId64,
                          d ? ", " : "", c[d], c[d] + m - 1);
  if (k < n) snprintf(buf + k, n - k, ")");
}

/* Fills the n slots of one block from its k <= n stored coordinates
 * c[0..k) (ascending): the missing slots take the smallest coordinates not
 * stored, so the block stays ascending and unique; writes the slot of each
 * stored coordinate into slot[]. */
static void fill_block(void *crd, int cw, int64_t base, int n, const int64_t *c, int k,
                       int64_t *slot) {
  int64_t x = 0;   /* the next candidate padding coordinate (x <= c[h]) */
  int h = 0, pad = n - k;
  for (int s = 0; s < n; s++) {
    if (h < k && (pad == 0 || c[h] == x)) {
      slot[h] = s;
      rt_idx_set(crd, cw, base + s, c[h]);
      x = c[h++] + 1;
    } else {
      rt_idx_set(crd, cw, base + s, x++);
      pad--;
    }
  }
}

/* Builds n_out_of_m level l (the last): n slots per parent position; a
 * block with more than n nonzero entries is refused, naming it. Sets
 * par[e] to the entry's slot position, or -1 for a zero dropped from a
 * full block. */
static tj_status build_structured(const tj_tensor *t, tj_storage *s, int l, const Sorted *so,
                                  int64_t *par, int64_t *P) {
  tj_level_storage *lv = &s->levels[l];
  int n = (int)lv->n, cw = s->crd_width;
  if (*P > INT64_MAX / n) return nomem(t);
  if (!(lv->crd = alloc_idx(*P * n, cw))) return nomem(t);
  lv->crd_len = lv->crd_cap = *P * n;
  int64_t *cs = malloc((size_t)(n + 1) * 2 * sizeof *cs);
  if (!cs) return nomem(t);
  int64_t *slot = cs + n + 1;
  for (int64_t p = 0; p < *P; p++)   /* empty blocks: coordinates 0..n-1 */
    for (int k = 0; k < n; k++) rt_idx_set(lv->crd, cw, p * n + k, k);
  tj_status st = TJ_OK;
  for (int64_t e = 0, next; e < so->n && st == TJ_OK; e = next) {
    int k = 0, nz = 0;
    for (next = e; next < so->n && par[next] == par[e]; next++)
      nz += !rt_val_is_zero(s->dtype, so->vals[next]);
    bool keep_zeros = next - e <= n;
    if (nz > n) {
      char where[160];
      block_name(t, so, l, e, where, sizeof where);
      st = rt_set_error(TJ_ERR_FORMAT, "tensor %s: the block at %s holds %d nonzeros; "
                        "n_out_of_m %d:%" PRId64 " stores at most %d per block", t->name,
                        where, nz, n, lv->size, n);
      break;
    }
    for (int64_t q = e; q < next; q++)
      if (keep_zeros || !rt_val_is_zero(s->dtype, so->vals[q])) cs[k++] = so->lc[l][q];
    int64_t base = par[e] * n;
    fill_block(lv->crd, cw, base, n, cs, k, slot);
    k = 0;
    for (int64_t q = e; q < next; q++) {
      bool kept = keep_zeros || !rt_val_is_zero(s->dtype, so->vals[q]);
      par[q] = kept ? base + slot[k++] : -1;
    }
  }
  free(cs);
  *P *= n;
  return st;
}

/* A compressed level's pos (n + 1 entries) as loose_compressed's lo, hi
 * pairs (2n entries): the segments packed back to back. */
static tj_status loosen(const tj_tensor *t, const tj_storage *s, tj_level_storage *lv) {
  int64_t n = lv->pos_len - 1;
  void *pairs = alloc_idx(2 * n, s->pos_width);
  if (!pairs) return nomem(t);
  for (int64_t p = 0; p < n; p++) {
    rt_idx_set(pairs, s->pos_width, 2 * p, rt_idx(lv->pos, s->pos_width, p));
    rt_idx_set(pairs, s->pos_width, 2 * p + 1, rt_idx(lv->pos, s->pos_width, p + 1));
  }
  free(lv->pos);
  lv->pos = pairs;
  lv->pos_len = lv->pos_cap = 2 * n;
  return TJ_OK;
}

/* build_compressed's group for level l (nu: the first nonunique level,
 * run_end: grouped_run_end): unique above nu and below a grouped run, the
 * run's tuple at nu, else one position per entry. */
static int compressed_group(int l, int nu, int run_end) {
  if (l < nu || (run_end >= 0 && l > run_end)) return l;
  return l == nu ? run_end : -1;
}

/* Builds every level of s (arrays NULL on entry) from sorted entries. */
static tj_status build_levels(const tj_tensor *t, tj_storage *s,
                              const Sorted *so) {
  int64_t *par = calloc((size_t)(so->n ? so->n : 1), sizeof *par);
  if (!par) return nomem(t);
  int64_t P = 1;
  int nu = first_nonunique(s);
  /* Below the first nonunique level: one position per entry, or, over a
   * grouped COO run, one per run tuple and unique levels below it. */
  int run_end = grouped_run_end(s);
  tj_status st = TJ_OK;
  for (int l = 0; l < s->order && st == TJ_OK; l++) {
    tj_level_storage *lv = &s->levels[l];
    if (lv->kind == TJ_LVL_DENSE) {
      if (lv->size > 0 && P > INT64_MAX / lv->size) {
        st = rt_set_error(TJ_ERR_NOMEM, "tensor %s: dense level %d would "
                          "hold more than 2^63 positions", t->name, l);
        break;
      }
      for (int64_t e = 0; e < so->n; e++) par[e] = par[e] * lv->size + so->lc[l][e];
      P *= lv->size;
    } else if (lv->kind == TJ_LVL_COMPRESSED) {
      st = build_compressed(t, s, l, so, par, &P, compressed_group(l, nu, run_end));
    } else if (lv->kind == TJ_LVL_LOOSE_COMPRESSED) {
      st = build_compressed(t, s, l, so, par, &P, compressed_group(l, nu, run_end));
      if (st == TJ_OK) st = loosen(t, s, lv);
    } else if (lv->kind == TJ_LVL_N_OUT_OF_M) {
      st = build_structured(t, s, l, so, par, &P);
    } else {
      lv->crd = alloc_idx(P, s->crd_width);
      if (!lv->crd) st = nomem(t);
      for (int64_t e = 0; st == TJ_OK && e < so->n; e++)
        rt_idx_set(lv->crd, s->crd_width, par[e], so->lc[l][e]);
      lv->crd_len = lv->crd_cap = P;
    }
  }
  if (st == TJ_OK) {
    int dsz = rt_dtype_size(s->dtype);
    if (!(s->vals = rt_array_new(P, (size_t)dsz, true)))
      st = rt_set_error(TJ_ERR_NOMEM, "tensor %s: out of memory for %" PRId64
                        " values", t->name, P);
    for (int64_t e = 0; st == TJ_OK && e < so->n; e++)
      if (par[e] >= 0) rt_storage_put(s, par[e], so->vals[e]);
    s->vals_len = s->vals_cap = P;
  }
  free(par);
  return st;
}

/* Adds the COO buffer into an all-dense tensor, allocating its values. */
static tj_status pack_dense(tj_tensor *t) {
  tj_storage *s = &t->st;
  if (!s->vals) {
    int64_t P = 1;
    for (int l = 0; l < s->order; l++) {
      if (s->levels[l].size > 0 && P > INT64_MAX / 8 / s->levels[l].size)
        return rt_set_error(TJ_ERR_NOMEM, "tensor %s is too large to store "
                            "densely", t->name);
      P *= s->levels[l].size;
    }
    s->vals = rt_array_new(P, (size_t)rt_dtype_size(s->dtype), true);
    if (!s->vals) return nomem(t);
    s->vals_len = s->vals_cap = P;
  }
  for (int64_t e = 0; e < t->coo.n; e++) {
    const int64_t *c = t->coo.coords + e * s->order;
    int64_t p = 0;
    for (int l = 0; l < s->order; l++)
      p = p * s->levels[l].size + c[s->map[l].dim];
    rt_storage_put(s, p, rt_val_add(s->dtype, rt_storage_get(s, p), t->coo.vals[e]));
  }
  return TJ_OK;
}

/* Current contents plus the buffer, as one COO list (malloc'd). */
static tj_status combine(tj_tensor *t, int64_t **coords, RtVal **vals,
                         int64_t *n) {
  if (t->st.vals_len == 0) {   /* take the buffer as it is */
    *coords = t->coo.coords, *vals = t->coo.vals, *n = t->coo.n;
    memset(&t->coo, 0, sizeof t->coo);
    return TJ_OK;
  }
  int64_t *c0 = NULL, n0 = 0;
  RtVal *v0 = NULL;
  tj_status st = rt_tensor_level_entries_val(t, RT_DROP_NONE, &c0, &v0, &n0);
  if (st != TJ_OK) return st;
  int order = t->fmt.order;
  int64_t nt = n0 + t->coo.n;
  int64_t *c = realloc(c0, (size_t)(nt * order + 1) * sizeof *c);
  RtVal *v = c ? realloc(v0, (size_t)(nt + 1) * sizeof *v) : NULL;
  if (!v) {
    free(c ? c : c0), free(v0);
    return nomem(t);
  }
  if (t->coo.n > 0) {
    memcpy(c + n0 * order, t->coo.coords,
           (size_t)(t->coo.n * order) * sizeof *c);
    memcpy(v + n0, t->coo.vals, (size_t)t->coo.n * sizeof *v);
  }
  *coords = c, *vals = v, *n = nt;
  return TJ_OK;
}

static void coo_reset(RtCoo *c) {
  free(c->coords);
  free(c->vals);
  memset(c, 0, sizeof *c);
}

tj_status tj_tensor_pack(tj_tensor *t) {
  if (!t) return rt_set_error(TJ_ERR_INVALID, "tj_tensor_pack: NULL tensor");
  if (t->base) return rt_check_writable(t, "packed");
  rt_tensor_touch(t);
  if (rt_format_all_dense(&t->fmt)) {
    tj_status st = pack_dense(t);
    if (st == TJ_OK) coo_reset(&t->coo);
    return st;
  }
  if (t->coo.n == 0 && t->st.vals) return TJ_OK;   /* nothing new */
  int64_t *coords = NULL, n = 0, *perm = NULL;
  RtVal *vals = NULL;
  Sorted so = {0};
  tj_storage fresh = t->st;
  rt_storage_detach(&fresh);
  RtCoo saved = t->coo;   /* combine may take the buffer itself */
  tj_status st = combine(t, &coords, &vals, &n);
  int64_t stride[TJ_MAX_ORDER];
  if (st == TJ_OK && linear_strides(&t->st, stride))
    st = sort_linear(t, coords, vals, n, stride, &so);
  else if (st == TJ_OK && (st = sort_perm(t, coords, n, &perm)) == TJ_OK)
    st = gather(t, coords, vals, n, perm, &so);
  free(perm);
  if (st == TJ_OK) st = build_levels(t, &fresh, &so);
  sorted_free(&so);
  if (st != TJ_OK) {
    rt_storage_clear(&fresh);
    if (coords == saved.coords) t->coo = saved;
    else free(coords), free(vals);
    return st;
  }
  free(coords), free(vals);   /* the buffer itself when combine took it */
  rt_storage_clear(&t->st);
  t->st = fresh;
  coo_reset(&t->coo);   /* empty already when combine took it */
  return TJ_OK;
}

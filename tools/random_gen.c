/* Random input tensors for -g and the REPL's random(): dense, uniform
 * sparse and power-law rows, from a xorshift64* generator.
 *
 * The stream for a tensor is seeded from (seed, tensor name), so a tensor's
 * data does not depend on the order of the flags. Float values are uniform
 * in (0, 1], integer values uniform in 1..9 (never an explicit zero).
 * Uniform sparse: each coordinate is present with probability `density`
 * (exactly so up to 2^24 coordinates; above, density*size coordinates are
 * drawn and duplicates summed). Power-law: row r's share of the
 * density*size entries is proportional to 1/rank, with ranks shuffled.
 */
#include "tool.h"

#include <math.h>
#include <stdlib.h>

#define EXACT_LIMIT (1LL << 24)
#define GEN_LIMIT (1LL << 31)

typedef struct Rng {
  uint64_t s;
} Rng;

static uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

static uint64_t next(Rng *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 0x2545f4914f6cdd1dULL;
}

/* Uniform in [0, 1). */
static double unit(Rng *r) { return (double)(next(r) >> 11) * 0x1p-53; }

/* Uniform in [0, n), n > 0. */
static int64_t below(Rng *r, int64_t n) { return (int64_t)(next(r) % (uint64_t)n); }

static Rng rng_for(uint64_t seed, const char *name) {
  uint64_t h = 1469598103934665603ULL;
  for (const char *c = name; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ULL;
  Rng r = {splitmix(seed ^ splitmix(h))};
  if (!r.s) r.s = 1;
  return r;
}

static double value(Rng *r, tj_dtype dt) {
  if (dt == TJ_BOOL) return below(r, 4) != 0;   /* some stored entries false */
  if (dt != TJ_F64 && dt != TJ_F32) return (double)(1 + below(r, 9));
  return 1.0 - unit(r);
}

/* Writes the coordinates of linear index lin (row-major over dims). */
static void unlinear(int64_t lin, int order, const int64_t *dims, int64_t *c) {
  for (int m = order - 1; m >= 0; m--) {
    c[m] = lin % dims[m];
    lin /= dims[m];
  }
}

static bool insert(tj_tensor *t, const int64_t *c, double v) {
  return tj_tensor_insert(t, c, v) == TJ_OK || tool_fail_lib(tj_tensor_name(t));
}

/* Random coordinates, drawn mode by mode (no linear index to overflow). */
static void draw(Rng *r, int order, const int64_t *dims, int64_t *c) {
  for (int m = 0; m < order; m++) c[m] = below(r, dims[m]);
}

/* The n of an n_out_of_m format whose last level is the n level (its dim
 * in *d, its m in *m), else 0: the uniform fill then keeps at most n
 * entries per block (what pruning to 2:4 keeps), so the tensor packs. */
static int structured_last(const tj_tensor *t, int *d, int *m) {
  const tj_format *f = tj_tensor_format(t);
  int l = f->order - 1;
  if (l < 0 || f->levels[l] != 'n') return 0;
  *d = f->mode_order[l];
  *m = f->lvl_k[l];
  return f->lvl_n[l];
}

/* The linear number of the block of coordinate c: c with c[d] replaced by
 * c[d] / m, over dims with dims[d] rounded up to whole blocks. */
static int64_t block_of(const int64_t *c, int order, const int64_t *dims, int d, int m) {
  int64_t lin = 0;
  for (int k = 0; k < order; k++)
    lin = lin * (k == d ? (dims[k] + m - 1) / m : dims[k]) + (k == d ? c[k] / m : c[k]);
  return lin;
}

static bool fill_uniform(tj_tensor *t, Rng *r, double total, double p, bool all) {
  int order = tj_tensor_order(t);
  int64_t dims[TJ_MAX_ORDER_PUBLIC], c[TJ_MAX_ORDER_PUBLIC + 1] = {0};
  for (int m = 0; m < order; m++) dims[m] = tj_tensor_dim(t, m);
  tj_dtype dt = tj_tensor_dtype(t);
  int bd = 0, bm = 1, bn = structured_last(t, &bd, &bm);
  if (all || total <= EXACT_LIMIT || bn) {   /* in row-major order */
    unsigned char *kept = NULL;               /* entries kept per block */
    double blocks = dims[bd] ? total / (double)dims[bd] * (double)((dims[bd] + bm - 1) / bm) : 0;
    if (bn && !(kept = calloc((size_t)blocks + 1, 1)))
      return tool_fail("out of memory generating %s", tj_tensor_name(t));
    bool ok = true;
    for (int64_t e = 0; ok && e < (int64_t)total; e++) {
      if (!all && unit(r) >= p) continue;
      unlinear(e, order, dims, c);
      if (bn) {
        unsigned char *n = &kept[block_of(c, order, dims, bd, bm)];
        if (*n >= bn) continue;
        (*n)++;
      }
      ok = insert(t, c, value(r, dt));
    }
    free(kept);
    return ok;
  }
  int64_t count = (int64_t)llround(p * total);
  for (int64_t e = 0; e < count; e++) {
    draw(r, order, dims, c);
    if (!insert(t, c, value(r, dt))) return false;
  }
  return true;
}

static bool fill_powerlaw(tj_tensor *t, Rng *r, double total, double p) {
  int order = tj_tensor_order(t);
  int64_t rows = tj_tensor_dim(t, 0);
  double rest = rows ? total / (double)rows : 0;
  if (rows == 0 || rest < 1) return true;
  int64_t dims[TJ_MAX_ORDER_PUBLIC], c[TJ_MAX_ORDER_PUBLIC] = {0};
  for (int m = 1; m < order; m++) dims[m - 1] = tj_tensor_dim(t, m);
  int64_t *rank = malloc((size_t)rows * sizeof *rank);
  if (!rank) return tool_fail("out of memory generating %s", tj_tensor_name(t));
  for (int64_t i = 0; i < rows; i++) rank[i] = i;
  for (int64_t i = rows - 1; i > 0; i--) {
    int64_t j = below(r, i + 1), x = rank[i];
    rank[i] = rank[j], rank[j] = x;
  }
  double harmonic = 0;
  for (int64_t i = 0; i < rows; i++) harmonic += 1.0 / (double)(i + 1);
  double target = p * total;
  bool ok = true;
  for (int64_t i = 0; ok && i < rows; i++) {
    double share = target / ((double)(rank[i] + 1) * harmonic);
    double kd = share < rest ? share : rest;
    int64_t k = (int64_t)llround(kd);
    c[0] = i;
    for (int64_t e = 0; ok && e < k; e++) {
      draw(r, order - 1, dims, c + 1);
      ok = insert(t, c, value(r, tj_tensor_dtype(t)));
    }
  }
  free(rank);
  return ok;
}

bool gen_fill(tj_tensor *t, GenKind k, double density, uint64_t seed) {
  const char *name = tj_tensor_name(t);
  if (k != GEN_DENSE && !(density > 0 && density <= 1))
    return tool_fail("%s: density %g is not in (0, 1]", name, density);
  int order = tj_tensor_order(t);
  double total = 1;
  for (int m = 0; m < order; m++) total *= (double)tj_tensor_dim(t, m);
  double entries = k == GEN_DENSE || order == 0 ? total : density * total;
  if (entries > (double)GEN_LIMIT)
    return tool_fail("%s: too large to generate (%.3g entries; at most 2^31)", name, entries);
  Rng r = rng_for(seed, name);
  bool ok;
  if (k == GEN_POWERLAW && order >= 1) ok = fill_powerlaw(t, &r, total, density);
  else ok = fill_uniform(t, &r, total, density, k == GEN_DENSE || order == 0);
  if (ok && tj_tensor_pack(t) != TJ_OK) return tool_fail_lib(name);
  return ok;
}

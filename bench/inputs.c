/* Benchmark inputs: deterministic synthetic matrices and tensors, built
 * straight into tensorjit storage (sorted, unique CSR / CSF filled through
 * tj_rt_reserve, so no pack of tens of millions of COO entries), plus the
 * real files of ../shared/data read through tj_tensor_read.
 *
 * Values are U[-1,1) from a 64-bit LCG; every generator takes a seed.
 */
#include <errno.h> /* program_invocation_short_name */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static uint64_t lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 11;
}
static double urand(uint64_t *s) { return (double)lcg(s) / 9007199254740992.0 * 2.0 - 1.0; }

/* The allocators of the programs that link this file (tjbench, tjlatency):
 * out of memory ends the program, named by its own name. */
void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) { fprintf(stderr, "%s: out of memory\n", program_invocation_short_name); exit(2); }
  return p;
}

void *xcalloc(size_t n, size_t m) {
  void *p = calloc(n ? n : 1, m ? m : 1);
  if (!p) { fprintf(stderr, "%s: out of memory\n", program_invocation_short_name); exit(2); }
  return p;
}

static void die_tj(const char *what) {
  fprintf(stderr, "tjbench: %s: %s\n", what, tj_last_error());
  exit(2);
}

tj_tensor *in_empty(const char *name, tj_dtype dt, int order, const int64_t *dims,
                    const char *fmt) {
  tj_format f;
  tj_tensor *t;
  if (fmt && tj_format_parse(fmt, &f) != TJ_OK) die_tj(fmt);
  if (tj_tensor_new(name, dt, order, dims, fmt ? &f : NULL, &t) != TJ_OK) die_tj(name);
  if (tj_tensor_pack(t) != TJ_OK) die_tj(name);
  return t;
}

tj_tensor *in_dense(const char *name, tj_dtype dt, int order, const int64_t *dims,
                    uint64_t seed) {
  tj_tensor *t = in_empty(name, dt, order, dims, NULL);
  int64_t n = 1;
  for (int m = 0; m < order; m++) n *= dims[m];
  if (t->st.vals_len < n) {
    if (tj_rt_reserve(&t->st, TJ_ARR_VALS, 0, n) != 0) die_tj("reserve");
    t->st.vals_len = n;
  }
  for (int64_t i = 0; i < n; i++) {
    double v = urand(&seed);
    if (dt == TJ_F32) ((float *)t->st.vals)[i] = (float)v;
    else ((double *)t->st.vals)[i] = v;
  }
  return t;
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

/* Fills a CSR tensor from per-row column lists (cols sorted+deduped here). */
typedef struct RowGen {
  int64_t nrows, ncols;
  int (*row)(void *ctx, int64_t i, int32_t *cols, int max);  /* count */
  void *ctx;
  int max_per_row;
  uint64_t seed;
  int64_t total;    /* bound on all entries */
} RowGen;

static tj_tensor *build_csr(const char *name, RowGen *g) {
  int64_t dims[2] = {g->nrows, g->ncols};
  tj_tensor *t = in_empty(name, TJ_F64, 2, dims, "ds");
  tj_storage *s = &t->st;
  if (s->pos_width != 4 || s->crd_width != 4) { fprintf(stderr, "tjbench: widths\n"); exit(2); }
  int64_t cap = g->total;
  if (tj_rt_reserve(s, TJ_ARR_POS, 1, g->nrows + 1) || tj_rt_reserve(s, TJ_ARR_CRD, 1, cap) ||
      tj_rt_reserve(s, TJ_ARR_VALS, 0, cap))
    die_tj("reserve");
  int32_t *pos = s->levels[1].pos, *crd = s->levels[1].crd;
  double *v = s->vals;
  int32_t *tmp = xmalloc(sizeof(int32_t) * (size_t)g->max_per_row);
  int64_t nnz = 0;
  uint64_t vs = g->seed ^ 0x9e3779b97f4a7c15ULL;
  pos[0] = 0;
  for (int64_t i = 0; i < g->nrows; i++) {
    int k = g->row(g->ctx, i, tmp, g->max_per_row);
    qsort(tmp, (size_t)k, sizeof *tmp, cmp_i32);
    for (int q = 0; q < k; q++) {
      if (q > 0 && tmp[q] == tmp[q - 1]) continue;
      crd[nnz] = tmp[q];
      v[nnz++] = urand(&vs);
    }
    pos[i + 1] = (int32_t)nnz;
  }
  free(tmp);
  s->levels[1].pos_len = g->nrows + 1;
  s->levels[1].crd_len = nnz;
  s->vals_len = nnz;
  return t;
}

typedef struct { int64_t n; int per; uint64_t s; } UniCtx;
static int uni_row(void *ctx, int64_t i, int32_t *cols, int max) {
  UniCtx *u = ctx;
  (void)i; (void)max;
  for (int q = 0; q < u->per; q++) cols[q] = (int32_t)(lcg(&u->s) % (uint64_t)u->n);
  return u->per;
}

tj_tensor *in_csr_uniform(const char *name, int64_t n, int per_row, uint64_t seed) {
  UniCtx u = {n, per_row, seed};
  RowGen g = {n, n, uni_row, &u, per_row, seed, n * per_row};
  return build_csr(name, &g);
}

/* R-MAT (a,b,c,d) = (0.57,0.19,0.19,0.05): edges generated, bucketed by
 * row, then rows filled; duplicates merged. */
typedef struct { int64_t *start; int32_t *col; } RmatCtx;
static int rmat_row(void *ctx, int64_t i, int32_t *cols, int max) {
  RmatCtx *r = ctx;
  int k = (int)(r->start[i + 1] - r->start[i]);
  if (k > max) k = max;
  memcpy(cols, r->col + r->start[i], sizeof(int32_t) * (size_t)k);
  return k;
}

tj_tensor *in_csr_rmat(const char *name, int scale, int avg, uint64_t seed) {
  int64_t n = (int64_t)1 << scale, m = n * avg;
  int32_t *er = xmalloc(sizeof(int32_t) * (size_t)m), *ec = xmalloc(sizeof(int32_t) * (size_t)m);
  uint64_t s = seed;
  for (int64_t e = 0; e < m; e++) {
    int64_t r = 0, c = 0;
    for (int b = 0; b < scale; b++) {
      double p = (double)lcg(&s) / 9007199254740992.0;
      int qr = p >= 0.76, qc = (p >= 0.57 && p < 0.76) || p >= 0.95;
      r = r * 2 + qr; c = c * 2 + qc;
    }
    er[e] = (int32_t)r; ec[e] = (int32_t)c;
  }
  int64_t *start = xcalloc((size_t)n + 1, sizeof(int64_t));
  for (int64_t e = 0; e < m; e++) start[er[e] + 1]++;
  int64_t maxrow = 0;
  for (int64_t i = 0; i < n; i++) {
    if (start[i + 1] > maxrow) maxrow = start[i + 1];
    start[i + 1] += start[i];
  }
  int32_t *col = xmalloc(sizeof(int32_t) * (size_t)m);
  int64_t *fill = xmalloc(sizeof(int64_t) * (size_t)n);
  memcpy(fill, start, sizeof(int64_t) * (size_t)n);
  for (int64_t e = 0; e < m; e++) col[fill[er[e]]++] = ec[e];
  RmatCtx rc = {start, col};
  RowGen g = {n, n, rmat_row, &rc, (int)maxrow > 0 ? (int)maxrow : 1, seed, m};
  tj_tensor *t = build_csr(name, &g);
  free(er); free(ec); free(start); free(col); free(fill);
  return t;
}

/* The same rows as a with columns permuted by j -> (j*7919 + 13) mod n:
 * a second operand of the same shape that overlaps a only partly. */
typedef struct { const tj_storage *a; int64_t n; } PermCtx;
static int perm_row(void *ctx, int64_t i, int32_t *cols, int max) {
  PermCtx *p = ctx;
  const int32_t *pos = p->a->levels[1].pos, *crd = p->a->levels[1].crd;
  int k = 0;
  for (int32_t q = pos[i]; q < pos[i + 1] && k < max; q++)
    cols[k++] = (int32_t)(((int64_t)crd[q] * 7919 + 13) % p->n);
  return k;
}

tj_tensor *in_csr_colperm(const char *name, const tj_tensor *a) {
  const tj_storage *s = &a->st;
  const int32_t *pos = s->levels[1].pos;
  int maxrow = 1;
  for (int64_t i = 0; i < s->dims[0]; i++)
    if (pos[i + 1] - pos[i] > maxrow) maxrow = pos[i + 1] - pos[i];
  PermCtx p = {s, s->dims[1]};
  RowGen g = {s->dims[0], s->dims[1], perm_row, &p, maxrow, 77, s->vals_len};
  return build_csr(name, &g);
}

tj_tensor *in_read(const char *path, const char *name, const char *fmt) {
  tj_format f;
  tj_tensor *t;
  if (fmt && tj_format_parse(fmt, &f) != TJ_OK) die_tj(fmt);
  if (tj_tensor_read(path, name, fmt ? &f : NULL, &t) != TJ_OK) return NULL;
  return t;
}

tj_tensor *in_convert(const tj_tensor *t, const char *name, const char *fmt) {
  tj_format f;
  tj_tensor *u;
  if (tj_format_parse(fmt, &f) != TJ_OK) die_tj(fmt);
  if (tj_tensor_convert(t, &f, &u) != TJ_OK) die_tj("convert");
  if (tj_tensor_rename(u, name) != TJ_OK) die_tj("rename");
  return u;
}

/* A random d x d x d tensor with about nnz entries in CSF ("sss"). */
tj_tensor *in_tensor3_random(const char *name, int64_t d, int64_t nnz, uint64_t seed) {
  int64_t dims[3] = {d, d, d};
  tj_format f;
  tj_tensor *t;
  tj_format_parse("sss", &f);
  if (tj_tensor_new(name, TJ_F64, 3, dims, &f, &t) != TJ_OK) die_tj(name);
  uint64_t s = seed;
  for (int64_t e = 0; e < nnz; e++) {
    int64_t c[3] = {(int64_t)(lcg(&s) % (uint64_t)d), (int64_t)(lcg(&s) % (uint64_t)d),
                    (int64_t)(lcg(&s) % (uint64_t)d)};
    if (tj_tensor_insert(t, c, urand(&s)) != TJ_OK) die_tj("insert");
  }
  if (tj_tensor_pack(t) != TJ_OK) die_tj("pack");
  return t;
}

void in_compile_operands(tj_tensor *sp[3], tj_tensor *mt[4]) {
  int64_t n = 1000, dA[2] = {100, 16};
  sp[0] = in_empty("y", TJ_F64, 1, &n, NULL);
  sp[1] = in_csr_uniform("A", n, 8, 5);
  sp[2] = in_dense("x", TJ_F64, 1, &n, 6);
  mt[0] = in_empty("A", TJ_F64, 2, dA, NULL);
  mt[1] = in_tensor3_random("B", 100, 5000, 7);
  mt[2] = in_dense("C", TJ_F64, 2, dA, 8);
  mt[3] = in_dense("D", TJ_F64, 2, dA, 9);
}

void in_compile_operands_free(tj_tensor *sp[3], tj_tensor *mt[4]) {
  for (int i = 0; i < 3; i++) tj_tensor_free(sp[i]);
  for (int i = 0; i < 4; i++) tj_tensor_free(mt[i]);
}

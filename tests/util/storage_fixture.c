/* Hand-filled tj_storage for the kernel suites (see storage_fixture.h).
 * Uses only libc and the ABI structs, so it links below every layer.
 */
#include "storage_fixture.h"

#include <stdbool.h>
#include <stdlib.h>

int fx_dsize(int dtype) { return dtype == TJ_F64 || dtype == TJ_I64 ? 8 : 4; }

tj_storage *fx_st_new(int order, int dtype, int pw, int cw) {
  tj_storage *s = calloc(1, sizeof *s);
  s->order = order;
  s->dtype = dtype;
  s->pos_width = pw;
  s->crd_width = cw;
  for (int l = 0; l < order; l++) s->map[l].dim = l;
  return s;
}

void fx_st_free(tj_storage *s) {
  for (int l = 0; l < TJ_MAX_ORDER; l++) {
    free(s->levels[l].pos);
    free(s->levels[l].crd);
  }
  free(s->vals);
  free(s);
}

tj_storage *fx_st_vec(int dtype, int64_t n) {
  tj_storage *s = fx_st_new(1, dtype, 8, 8);
  s->dims[0] = s->levels[0].size = n;
  s->vals = calloc((size_t)(n ? n : 1), (size_t)fx_dsize(dtype));
  s->vals_len = s->vals_cap = n;
  return s;
}

/* The CSR constructors' common body; is_row0_full stores all of row 0. */
static tj_storage *csr(int dtype, int w, int64_t m, int64_t n, double dens,
                       bool is_row0_full) {
  tj_storage *s = fx_st_new(2, dtype, w, w);
  s->dims[0] = s->levels[0].size = m;
  s->dims[1] = s->levels[1].size = n;
  s->levels[1].kind = TJ_LVL_COMPRESSED;
  s->levels[1].pos = calloc((size_t)m + 1, (size_t)w);
  s->levels[1].crd = calloc((size_t)(m * n), (size_t)w);
  s->vals = calloc((size_t)(m * n), (size_t)fx_dsize(dtype));
  int64_t nz = 0;
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n && i % 7 != 3; j++)
      if ((is_row0_full && i == 0) || fx_rnd() < dens) {
        fx_idx_set(s->levels[1].crd, w, nz, j);
        fx_val_set(s, nz++, fx_rnd() * 2 - 1);
      }
    fx_idx_set(s->levels[1].pos, w, i + 1, nz);
  }
  s->levels[1].pos_len = m + 1;
  s->levels[1].crd_len = s->vals_len = nz;
  return s;
}

tj_storage *fx_st_csr(int dtype, int w, int64_t m, int64_t n, double dens) {
  return csr(dtype, w, m, n, dens, false);
}

tj_storage *fx_st_csr_skewed(int w, int64_t m, int64_t n, double dens) {
  return csr(TJ_F64, w, m, n, dens, true);
}

tj_storage *fx_st_spvec(int64_t n, const int64_t *crd, const double *v,
                        int64_t nz, int w) {
  tj_storage *s = fx_st_new(1, TJ_F64, w, w);
  s->dims[0] = s->levels[0].size = n;
  s->levels[0].kind = TJ_LVL_COMPRESSED;
  s->levels[0].pos = calloc(2, (size_t)w);
  s->levels[0].crd = calloc((size_t)nz + 1, (size_t)w);
  s->vals = calloc((size_t)nz + 1, 8);
  fx_idx_set(s->levels[0].pos, w, 1, nz);
  for (int64_t q = 0; q < nz; q++) {
    fx_idx_set(s->levels[0].crd, w, q, crd[q]);
    ((double *)s->vals)[q] = v[q];
  }
  s->levels[0].pos_len = 2;
  s->levels[0].crd_len = s->vals_len = nz;
  return s;
}

int64_t fx_idx_get(const void *a, int w, int64_t i) {
  return w == 4 ? ((const int32_t *)a)[i] : ((const int64_t *)a)[i];
}

void fx_idx_set(void *a, int w, int64_t i, int64_t v) {
  if (w == 4) ((int32_t *)a)[i] = (int32_t)v;
  else ((int64_t *)a)[i] = v;
}

double fx_val_get(const tj_storage *s, int64_t i) {
  switch (s->dtype) {
  case TJ_F64: return ((double *)s->vals)[i];
  case TJ_F32: return ((float *)s->vals)[i];
  case TJ_I64: return (double)((int64_t *)s->vals)[i];
  default: return ((int32_t *)s->vals)[i];
  }
}

void fx_val_set(tj_storage *s, int64_t i, double v) {
  switch (s->dtype) {
  case TJ_F64: ((double *)s->vals)[i] = v; break;
  case TJ_F32: ((float *)s->vals)[i] = (float)v; break;
  case TJ_I64: ((int64_t *)s->vals)[i] = (int64_t)v; break;
  default: ((int32_t *)s->vals)[i] = (int32_t)v; break;
  }
}

/* Per thread: tests build fixtures from several threads at once (a race
 * ThreadSanitizer found in check_jit's thread test). */
static _Thread_local uint64_t rng = 88172645463325252ull;

double fx_rnd(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

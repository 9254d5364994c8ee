/* Hand-written C peers: the classic CSR / CSC / COO / CSF loops a user
 * would write, compiled -O3 -march=native. Row-parallel kernels use an
 * OpenMP parallel for over rows (static, like a first attempt would);
 * merge-based kernels (CSC/COO SpMV, add, SpGEMM, inner product) are serial.
 * They read tensorjit's storage arrays directly (32-bit pos/crd).
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct H {
  Case *c;
  int nth;
  double *d;        /* dense / values output */
  float *f;
  int64_t n;
  int64_t *pos;     /* CSR output */
  int32_t *crd;
  int64_t cap, nrows, ncols;
  double *ws;       /* workspace */
  int32_t *mark;
} H;

#define ST(k) (&h->c->ops[k]->st)
#define POS(s, l) ((const int32_t *)(s)->levels[l].pos)
#define CRD(s, l) ((const int32_t *)(s)->levels[l].crd)
#define VAL(s) ((const double *)(s)->vals)

static H *h_new(Case *c, int nth, int64_t n) {
  H *h = xcalloc(1, sizeof *h);
  h->c = c; h->nth = nth; h->n = n;
  if (n > 0) {
    if (c->is_f32) h->f = xcalloc((size_t)n, sizeof(float));
    else h->d = xcalloc((size_t)n, sizeof(double));
  }
  return h;
}
static void h_done(void *p) {
  H *h = p;
  free(h->d); free(h->f); free(h->pos); free(h->crd); free(h->ws); free(h->mark);
  free(h);
}
static void h_out_dense(void *p, Out *o) {
  H *h = p;
  o->kind = OUT_DENSE; o->is_f32 = h->c->is_f32;
  o->vals = h->c->is_f32 ? (void *)h->f : (void *)h->d; o->n = h->n;
}
static void h_out_vals(void *p, Out *o) { h_out_dense(p, o); o->kind = OUT_VALS; }
static void h_out_csr(void *p, Out *o) {
  H *h = p;
  o->kind = OUT_CSR; o->is_f32 = 0; o->vals = h->d; o->n = h->nrows;
  o->pos = h->pos; o->crd = h->crd; o->pw = 8; o->cw = 4; o->ncols = h->ncols;
}
static int64_t prod_dims(const tj_tensor *t) {
  int64_t n = 1;
  for (int m = 0; m < t->st.order; m++) n *= t->st.dims[m];
  return n;
}
static void *setup_dense(Case *c, int nth) { return h_new(c, nth, prod_dims(c->ops[0])); }

/* ---- SpMV ---- */
static void spmv_csr(void *p) {
  H *h = p;
  const tj_storage *A = ST(1);
  const int32_t *pos = POS(A, 1), *crd = CRD(A, 1);
  const double *v = VAL(A), *x = VAL(ST(2));
  double *y = h->d;
  int64_t n = A->dims[0];
#pragma omp parallel for num_threads(h->nth) schedule(static) if (h->nth > 1)
  for (int64_t i = 0; i < n; i++) {
    double t = 0;
    for (int32_t q = pos[i]; q < pos[i + 1]; q++) t += v[q] * x[crd[q]];
    y[i] = t;
  }
}
static void spmv_csc(void *p) {
  H *h = p;
  const tj_storage *A = ST(1);
  const int32_t *pos = POS(A, 1), *crd = CRD(A, 1);
  const double *v = VAL(A), *x = VAL(ST(2));
  double *y = h->d;
  memset(y, 0, sizeof(double) * (size_t)h->n);
  for (int64_t j = 0; j < A->dims[1]; j++) {
    double xj = x[j];
    for (int32_t q = pos[j]; q < pos[j + 1]; q++) y[crd[q]] += v[q] * xj;
  }
}
static void spmv_coo(void *p) {
  H *h = p;
  const tj_storage *A = ST(1);
  const int32_t *r = CRD(A, 0), *cc = CRD(A, 1);
  const double *v = VAL(A), *x = VAL(ST(2));
  double *y = h->d;
  int64_t nnz = A->vals_len;
  memset(y, 0, sizeof(double) * (size_t)h->n);
  for (int64_t q = 0; q < nnz; q++) y[r[q]] += v[q] * x[cc[q]];
}

/* ---- SpMM C(i,j) = A(i,k) * B(k,j), B dense n x R ---- */
static void spmm(void *p) {
  H *h = p;
  const tj_storage *A = ST(1);
  const int32_t *pos = POS(A, 1), *crd = CRD(A, 1);
  const double *v = VAL(A), *B = VAL(ST(2));
  double *C = h->d;
  const int64_t R = h->c->R, n = A->dims[0];
#pragma omp parallel for num_threads(h->nth) schedule(static) if (h->nth > 1)
  for (int64_t i = 0; i < n; i++) {
    double *ci = C + i * R;
    for (int64_t j = 0; j < R; j++) ci[j] = 0;
    for (int32_t q = pos[i]; q < pos[i + 1]; q++) {
      const double a = v[q], *bk = B + (int64_t)crd[q] * R;
      for (int64_t j = 0; j < R; j++) ci[j] += a * bk[j];
    }
  }
}

/* ---- SDDMM A(i,j) = B(i,j) * C(i,k) * D(j,k): values on B's pattern ---- */
static void *setup_sddmm(Case *c, int nth) {
  H *h = h_new(c, nth, c->ops[1]->st.vals_len);
  const tj_storage *B = &c->ops[1]->st;
  h->nrows = B->dims[0]; h->ncols = B->dims[1];
  h->pos = xmalloc(sizeof(int64_t) * (size_t)(h->nrows + 1));
  h->crd = xmalloc(sizeof(int32_t) * (size_t)(h->n + 1));
  for (int64_t i = 0; i <= h->nrows; i++) h->pos[i] = POS(B, 1)[i];
  memcpy(h->crd, CRD(B, 1), sizeof(int32_t) * (size_t)h->n);
  return h;
}
static void sddmm(void *p) {
  H *h = p;
  const tj_storage *B = ST(1);
  const int32_t *pos = POS(B, 1), *crd = CRD(B, 1);
  const double *bv = VAL(B), *C = VAL(ST(2)), *D = VAL(ST(3));
  const int64_t K = h->c->R, n = B->dims[0];
  double *out = h->d;
#pragma omp parallel for num_threads(h->nth) schedule(static) if (h->nth > 1)
  for (int64_t i = 0; i < n; i++) {
    const double *ci = C + i * K;
    for (int32_t q = pos[i]; q < pos[i + 1]; q++) {
      const double *dj = D + (int64_t)crd[q] * K;
      double t = 0;
      for (int64_t k = 0; k < K; k++) t += ci[k] * dj[k];
      out[q] = bv[q] * t;
    }
  }
}

/* ---- sparse add A = B + C (CSR, two-pointer merge) ---- */
static void *setup_add(Case *c, int nth) {
  H *h = h_new(c, nth, c->ops[1]->st.vals_len + c->ops[2]->st.vals_len);
  h->nrows = c->ops[1]->st.dims[0]; h->ncols = c->ops[1]->st.dims[1];
  h->pos = xmalloc(sizeof(int64_t) * (size_t)(h->nrows + 1));
  h->crd = xmalloc(sizeof(int32_t) * (size_t)(h->n + 1));
  return h;
}
static void add(void *p) {
  H *h = p;
  const tj_storage *B = ST(1), *C = ST(2);
  const int32_t *bp = POS(B, 1), *bc = CRD(B, 1), *cp = POS(C, 1), *cc = CRD(C, 1);
  const double *bv = VAL(B), *cv = VAL(C);
  int64_t nz = 0;
  h->pos[0] = 0;
  for (int64_t i = 0; i < h->nrows; i++) {
    int32_t pb = bp[i], pbe = bp[i + 1], pc = cp[i], pce = cp[i + 1];
    while (pb < pbe && pc < pce) {
      int32_t jb = bc[pb], jc = cc[pc];
      if (jb == jc) { h->crd[nz] = jb; h->d[nz++] = bv[pb++] + cv[pc++]; }
      else if (jb < jc) { h->crd[nz] = jb; h->d[nz++] = bv[pb++]; }
      else { h->crd[nz] = jc; h->d[nz++] = cv[pc++]; }
    }
    while (pb < pbe) { h->crd[nz] = bc[pb]; h->d[nz++] = bv[pb++]; }
    while (pc < pce) { h->crd[nz] = cc[pc]; h->d[nz++] = cv[pc++]; }
    h->pos[i + 1] = nz;
  }
}

/* ---- SpGEMM A = B * C (Gustavson: dense workspace, sorted rows) ---- */
static void *setup_spgemm(Case *c, int nth) {
  const tj_storage *B = &c->ops[1]->st, *C = &c->ops[2]->st;
  int64_t bound = 0;
  for (int64_t q = 0; q < B->vals_len; q++) {
    int32_t k = CRD(B, 1)[q];
    bound += POS(C, 1)[k + 1] - POS(C, 1)[k];
  }
  H *h = h_new(c, nth, bound);
  h->nrows = B->dims[0]; h->ncols = C->dims[1];
  h->pos = xmalloc(sizeof(int64_t) * (size_t)(h->nrows + 1));
  h->crd = xmalloc(sizeof(int32_t) * (size_t)(bound + 1));
  h->ws = xcalloc((size_t)h->ncols, sizeof(double));
  h->mark = xmalloc(sizeof(int32_t) * (size_t)h->ncols);
  return h;
}
static int cmp32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}
static void isort(int32_t *a, int64_t n) {
  if (n > 32) { qsort(a, (size_t)n, sizeof *a, cmp32); return; }
  for (int64_t i = 1; i < n; i++) {
    int32_t x = a[i];
    int64_t j = i - 1;
    while (j >= 0 && a[j] > x) { a[j + 1] = a[j]; j--; }
    a[j + 1] = x;
  }
}
static void spgemm(void *p) {
  H *h = p;
  const tj_storage *B = ST(1), *C = ST(2);
  const int32_t *bp = POS(B, 1), *bc = CRD(B, 1), *cp = POS(C, 1), *cc = CRD(C, 1);
  const double *bv = VAL(B), *cv = VAL(C);
  for (int64_t j = 0; j < h->ncols; j++) h->mark[j] = -1;
  int64_t nz = 0;
  h->pos[0] = 0;
  for (int64_t i = 0; i < h->nrows; i++) {
    int64_t start = nz;
    for (int32_t q = bp[i]; q < bp[i + 1]; q++) {
      int32_t k = bc[q];
      double b = bv[q];
      for (int32_t r = cp[k]; r < cp[k + 1]; r++) {
        int32_t j = cc[r];
        if (h->mark[j] != (int32_t)i) { h->mark[j] = (int32_t)i; h->crd[nz++] = j; h->ws[j] = 0; }
        h->ws[j] += b * cv[r];
      }
    }
    isort(h->crd + start, nz - start);
    for (int64_t q = start; q < nz; q++) h->d[q] = h->ws[h->crd[q]];
    h->pos[i + 1] = nz;
  }
}

/* ---- CSF ("sss") kernels over B(i,j,k) ---- */
static void *setup_ttv(Case *c, int nth) { return h_new(c, nth, c->ops[1]->st.levels[1].crd_len); }
static void ttv(void *p) {
  H *h = p;
  const tj_storage *B = ST(1);
  const int32_t *p0 = POS(B, 0), *p1 = POS(B, 1), *p2 = POS(B, 2), *c2 = CRD(B, 2);
  const double *v = VAL(B), *x = VAL(ST(2));
  int64_t ni = p0[1];
#pragma omp parallel for num_threads(h->nth) schedule(dynamic, 16) if (h->nth > 1)
  for (int64_t a = 0; a < ni; a++)
    for (int32_t b = p1[a]; b < p1[a + 1]; b++) {
      double t = 0;
      for (int32_t q = p2[b]; q < p2[b + 1]; q++) t += v[q] * x[c2[q]];
      h->d[b] = t;
    }
}
static void *setup_ttm(Case *c, int nth) {
  return h_new(c, nth, c->ops[1]->st.levels[1].crd_len * c->R);
}
static void ttm(void *p) {   /* A(i,j,k) = B(i,j,l) * C(k,l), C is K x L */
  H *h = p;
  const tj_storage *B = ST(1);
  const int32_t *p0 = POS(B, 0), *p1 = POS(B, 1), *p2 = POS(B, 2), *c2 = CRD(B, 2);
  const double *v = VAL(B), *C = VAL(ST(2));
  const int64_t K = h->c->R, L = ST(2)->dims[1];
  int64_t ni = p0[1];
#pragma omp parallel for num_threads(h->nth) schedule(dynamic, 16) if (h->nth > 1)
  for (int64_t a = 0; a < ni; a++)
    for (int32_t b = p1[a]; b < p1[a + 1]; b++) {
      double *o = h->d + (int64_t)b * K;
      for (int64_t k = 0; k < K; k++) o[k] = 0;
      for (int32_t q = p2[b]; q < p2[b + 1]; q++) {
        double bv = v[q];
        int64_t l = c2[q];
        for (int64_t k = 0; k < K; k++) o[k] += bv * C[k * L + l];
      }
    }
}
static void mttkrp(void *p) {   /* A(i,j) = B(i,k,l) * C(k,j) * D(l,j) */
  H *h = p;
  const tj_storage *B = ST(1);
  const int32_t *p0 = POS(B, 0), *c0 = CRD(B, 0), *p1 = POS(B, 1), *c1 = CRD(B, 1),
                *p2 = POS(B, 2), *c2 = CRD(B, 2);
  const double *v = VAL(B), *C = VAL(ST(2)), *D = VAL(ST(3));
  const int64_t R = h->c->R;
  int64_t ni = p0[1];
  memset(h->d, 0, sizeof(double) * (size_t)h->n);
#pragma omp parallel num_threads(h->nth) if (h->nth > 1)
  {
    double *t = xmalloc(sizeof(double) * (size_t)R);
#pragma omp for schedule(dynamic, 16)
    for (int64_t a = 0; a < ni; a++) {
      double *ai = h->d + (int64_t)c0[a] * R;
      for (int32_t b = p1[a]; b < p1[a + 1]; b++) {
        for (int64_t j = 0; j < R; j++) t[j] = 0;
        for (int32_t q = p2[b]; q < p2[b + 1]; q++) {
          const double bv = v[q], *dl = D + (int64_t)c2[q] * R;
          for (int64_t j = 0; j < R; j++) t[j] += bv * dl[j];
        }
        const double *ck = C + (int64_t)c1[b] * R;
        for (int64_t j = 0; j < R; j++) ai[j] += t[j] * ck[j];
      }
    }
    free(t);
  }
}
/* Inner product: co-iterates the two CSF trees level by level. */
static double inner_level(const tj_storage *B, const tj_storage *C, int l, int32_t pb,
                          int32_t pc) {
  const int32_t *bp = POS(B, l), *bc = CRD(B, l), *cp = POS(C, l), *cc = CRD(C, l);
  int32_t qb = bp[pb], qbe = bp[pb + 1], qc = cp[pc], qce = cp[pc + 1];
  double s = 0;
  while (qb < qbe && qc < qce) {
    int32_t x = bc[qb], y = cc[qc];
    if (x == y) {
      s += l == 2 ? VAL(B)[qb] * VAL(C)[qc] : inner_level(B, C, l + 1, qb, qc);
      qb++; qc++;
    } else if (x < y) qb++;
    else qc++;
  }
  return s;
}
static void inner(void *p) {
  H *h = p;
  h->d[0] = inner_level(ST(1), ST(2), 0, 0, 0);
}

/* ---- dense GEMM A(i,j) = B(i,k) * C(k,j), i-k-j order ---- */
static void gemm(void *p) {
  H *h = p;
  const int64_t n = ST(1)->dims[0], K = ST(1)->dims[1], m = ST(2)->dims[1];
  if (h->c->is_f32) {
    const float *B = ST(1)->vals, *C = ST(2)->vals;
    float *A = h->f;
#pragma omp parallel for num_threads(h->nth) schedule(static) if (h->nth > 1)
    for (int64_t i = 0; i < n; i++) {
      float *ai = A + i * m;
      for (int64_t j = 0; j < m; j++) ai[j] = 0;
      for (int64_t k = 0; k < K; k++) {
        const float b = B[i * K + k], *ck = C + k * m;
        for (int64_t j = 0; j < m; j++) ai[j] += b * ck[j];
      }
    }
  } else {
    const double *B = ST(1)->vals, *C = ST(2)->vals;
    double *A = h->d;
#pragma omp parallel for num_threads(h->nth) schedule(static) if (h->nth > 1)
    for (int64_t i = 0; i < n; i++) {
      double *ai = A + i * m;
      for (int64_t j = 0; j < m; j++) ai[j] = 0;
      for (int64_t k = 0; k < K; k++) {
        const double b = B[i * K + k], *ck = C + k * m;
        for (int64_t j = 0; j < m; j++) ai[j] += b * ck[j];
      }
    }
  }
}

/* ---- TCCG: generic loop nest over all indices, innermost = the output's
 * stride-1 index, strides precomputed (aux). ---- */
static void tccg_rec(const Tccg *t, int d, const double *A, const double *B, double *C) {
  if (d == t->nidx - 1) {
    const int64_t e = t->ext[d], sa = t->sa[d], sb = t->sb[d], sc = t->sc[d];
    if (sc == 0) {
      double s = 0;
      for (int64_t x = 0; x < e; x++) s += A[x * sa] * B[x * sb];
      C[0] += s;
    } else {
      for (int64_t x = 0; x < e; x++) C[x * sc] += A[x * sa] * B[x * sb];
    }
    return;
  }
  for (int64_t x = 0; x < t->ext[d]; x++)
    tccg_rec(t, d + 1, A + x * t->sa[d], B + x * t->sb[d], C + x * t->sc[d]);
}
static void tccg(void *p) {
  H *h = p;
  const Tccg *t = h->c->aux;
  memset(h->d, 0, sizeof(double) * (size_t)h->n);
  if (h->nth > 1 && t->sc[0] != 0) {
#pragma omp parallel for num_threads(h->nth) schedule(static)
    for (int64_t x = 0; x < t->ext[0]; x++) {
      Tccg u = *t;
      u.ext[0] = 1;
      tccg_rec(&u, 0, (const double *)ST(1)->vals + x * t->sa[0],
               (const double *)ST(2)->vals + x * t->sb[0], h->d + x * t->sc[0]);
    }
  } else {
    tccg_rec(t, 0, ST(1)->vals, ST(2)->vals, h->d);
  }
}

#define PEER(NAME, STR, SETUP, RUN, OUT, MAXT) \
  const Peer NAME = {.name = STR, .setup = SETUP, .run = RUN, .out = OUT, \
                     .done = h_done, .max_threads = MAXT};
PEER(P_HAND_SPMV_CSR, "hand-C", setup_dense, spmv_csr, h_out_dense, 2)
PEER(P_HAND_SPMV_CSC, "hand-C", setup_dense, spmv_csc, h_out_dense, 1)
PEER(P_HAND_SPMV_COO, "hand-C", setup_dense, spmv_coo, h_out_dense, 1)
PEER(P_HAND_SPMM, "hand-C", setup_dense, spmm, h_out_dense, 2)
PEER(P_HAND_SDDMM, "hand-C", setup_sddmm, sddmm, h_out_csr, 2)
PEER(P_HAND_ADD, "hand-C", setup_add, add, h_out_csr, 1)
PEER(P_HAND_SPGEMM, "hand-C", setup_spgemm, spgemm, h_out_csr, 1)
PEER(P_HAND_TTV, "hand-C", setup_ttv, ttv, h_out_vals, 2)
PEER(P_HAND_TTM, "hand-C", setup_ttm, ttm, h_out_vals, 2)
PEER(P_HAND_MTTKRP, "hand-C", setup_dense, mttkrp, h_out_dense, 2)
PEER(P_HAND_INNER, "hand-C", setup_dense, inner, h_out_dense, 1)
PEER(P_HAND_GEMM, "hand-C", setup_dense, gemm, h_out_dense, 2)
PEER(P_HAND_TCCG, "hand-C", setup_dense, tccg, h_out_dense, 2)

/* Library peers: CBLAS dgemm/sgemm (OpenBLAS; MKL is peers_mkl.c) and
 * SuiteSparse:GraphBLAS (GrB_mxv, GrB_mxm sparse x dense and sparse x
 * sparse, GrB_eWiseAdd). GraphBLAS objects are built from the same arrays
 * outside the timed region; each timed run ends with GrB_wait so lazy
 * evaluation cannot hide work.
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#include <cblas.h>
#ifdef TJ_HAVE_GRAPHBLAS
#include <GraphBLAS.h>
#endif

const char *blas_name(void) { return "OpenBLAS"; }

void openblas_set_num_threads(int);

void lib_set_threads(int nth) {
  openblas_set_num_threads(nth);
#ifdef TJ_HAVE_GRAPHBLAS
  GxB_Global_Option_set(GxB_GLOBAL_NTHREADS, nth);
#endif
}

/* ---- BLAS ---- */
typedef struct BG { Case *c; void *out; int64_t n; } BG;
static void *bg_setup(Case *c, int nth) {
  BG *b = xcalloc(1, sizeof *b);
  b->c = c;
  b->n = c->ops[0]->st.dims[0] * c->ops[0]->st.dims[1];
  b->out = xcalloc((size_t)b->n, c->is_f32 ? 4 : 8);
  lib_set_threads(nth);
  return b;
}
static void bg_run(void *p) {
  BG *b = p;
  const tj_storage *B = &b->c->ops[1]->st, *C = &b->c->ops[2]->st;
  int n = (int)B->dims[0], k = (int)B->dims[1], m = (int)C->dims[1];
  if (b->c->is_f32)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, m, k, 1.0f, B->vals, k,
                C->vals, m, 0.0f, b->out, m);
  else
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, m, k, 1.0, B->vals, k,
                C->vals, m, 0.0, b->out, m);
}
static void bg_out(void *p, Out *o) {
  BG *b = p;
  o->kind = OUT_DENSE; o->is_f32 = b->c->is_f32; o->vals = b->out; o->n = b->n;
}
static void bg_done(void *p) { BG *b = p; free(b->out); free(b); }
const Peer P_BLAS_GEMM = {.name = "BLAS", .setup = bg_setup, .run = bg_run, .out = bg_out,
                          .done = bg_done, .max_threads = 2};

#ifdef TJ_HAVE_GRAPHBLAS
static int grb_ready;
int have_graphblas(void) {
  if (!grb_ready) grb_ready = GrB_init(GrB_NONBLOCKING) == GrB_SUCCESS ? 1 : -1;
  return grb_ready == 1;
}

/* A GraphBLAS matrix from a CSR/CSC/COO tensorjit matrix (by tuples). */
static GrB_Matrix grb_from(const tj_storage *s, int by_col) {
  int64_t nnz = s->vals_len;
  GrB_Index *I = xmalloc(sizeof(GrB_Index) * (size_t)(nnz + 1));
  GrB_Index *J = xmalloc(sizeof(GrB_Index) * (size_t)(nnz + 1));
  const int32_t *pos = s->levels[1].pos, *crd = s->levels[1].crd;
  int64_t q = 0;
  for (int64_t a = 0; a < s->dims[s->map[0].dim]; a++)
    for (; q < pos[a + 1]; q++) {
      I[q] = (GrB_Index)a; J[q] = (GrB_Index)crd[q];
    }
  GrB_Matrix A;
  GrB_Index nr = (GrB_Index)s->dims[0], nc = (GrB_Index)s->dims[1];
  if (s->map[0].dim == 1) { GrB_Index *t = I; I = J; J = t; }
  GrB_Matrix_new(&A, GrB_FP64, nr, nc);
  GxB_Matrix_Option_set(A, GxB_FORMAT, by_col ? GxB_BY_COL : GxB_BY_ROW);
  GrB_Matrix_build_FP64(A, I, J, s->vals, (GrB_Index)nnz, GrB_PLUS_FP64);
  GrB_Matrix_wait(A, GrB_MATERIALIZE);
  free(I); free(J);
  return A;
}
static GrB_Matrix grb_dense(const tj_storage *s) {
  GrB_Matrix A;
  size_t bytes = sizeof(double) * (size_t)(s->dims[0] * s->dims[1]);
  void *x = xmalloc(bytes);
  memcpy(x, s->vals, bytes);
  GxB_Matrix_import_FullR(&A, GrB_FP64, (GrB_Index)s->dims[0], (GrB_Index)s->dims[1], &x,
                          bytes, false, NULL);
  return A;
}

typedef struct G {
  Case *c;
  GrB_Matrix A, B, C;
  GrB_Vector x, y;
  double *dense;             /* extracted result */
  int64_t n;
  int64_t *pos; int32_t *crd; double *vals;
} G;

static void *g_new(Case *c, int nth) {
  if (!have_graphblas()) { snprintf(c->note, sizeof c->note, "GraphBLAS init failed"); return NULL; }
  lib_set_threads(nth);
  G *g = xcalloc(1, sizeof *g);
  g->c = c;
  return g;
}
static void g_done(void *p) {
  G *g = p;
  if (g->A) GrB_Matrix_free(&g->A);
  if (g->B) GrB_Matrix_free(&g->B);
  if (g->C) GrB_Matrix_free(&g->C);
  if (g->x) GrB_Vector_free(&g->x);
  if (g->y) GrB_Vector_free(&g->y);
  free(g->dense); free(g->pos); free(g->crd); free(g->vals);
  free(g);
}

/* SpMV: y = A x over PLUS_TIMES (A in its CSR or CSC orientation). */
static void *mxv_setup(Case *c, int nth) {
  G *g = g_new(c, nth);
  if (!g) return NULL;
  const tj_storage *A = &c->ops[1]->st;
  g->A = grb_from(A, A->map[0].dim == 1);
  int64_t nc = A->dims[1];
  size_t bytes = sizeof(double) * (size_t)nc;
  void *x = xmalloc(bytes);
  memcpy(x, c->ops[2]->st.vals, bytes);
  GxB_Vector_import_Full(&g->x, GrB_FP64, (GrB_Index)nc, &x, bytes, false, NULL);
  GrB_Vector_new(&g->y, GrB_FP64, (GrB_Index)A->dims[0]);
  g->n = A->dims[0];
  return g;
}
static void mxv_run(void *p) {
  G *g = p;
  GrB_mxv(g->y, NULL, NULL, GrB_PLUS_TIMES_SEMIRING_FP64, g->A, g->x, NULL);
  GrB_Vector_wait(g->y, GrB_MATERIALIZE);
}
static void mxv_out(void *p, Out *o) {
  G *g = p;
  free(g->dense);
  g->dense = xcalloc((size_t)g->n, sizeof(double));
  GrB_Index nv = 0;
  GrB_Vector_nvals(&nv, g->y);
  GrB_Index *I = xmalloc(sizeof(GrB_Index) * (nv + 1));
  double *X = xmalloc(sizeof(double) * (nv + 1));
  GrB_Vector_extractTuples_FP64(I, X, &nv, g->y);
  for (GrB_Index q = 0; q < nv; q++) g->dense[I[q]] = X[q];
  free(I); free(X);
  o->kind = OUT_DENSE; o->is_f32 = 0; o->vals = g->dense; o->n = g->n;
}

/* SpMM: C = A * B with B full (dense) n x R. */
static void *spmm_setup(Case *c, int nth) {
  G *g = g_new(c, nth);
  if (!g) return NULL;
  g->A = grb_from(&c->ops[1]->st, 0);
  g->B = grb_dense(&c->ops[2]->st);
  GrB_Matrix_new(&g->C, GrB_FP64, (GrB_Index)c->ops[0]->st.dims[0],
                 (GrB_Index)c->ops[0]->st.dims[1]);
  g->n = c->ops[0]->st.dims[0] * c->ops[0]->st.dims[1];
  return g;
}
static void mxm_run(void *p) {
  G *g = p;
  GrB_mxm(g->C, NULL, NULL, GrB_PLUS_TIMES_SEMIRING_FP64, g->A, g->B, NULL);
  GrB_Matrix_wait(g->C, GrB_MATERIALIZE);
}
static void extract(G *g, GrB_Index *nv, GrB_Index **I, GrB_Index **J, double **X) {
  GrB_Matrix_nvals(nv, g->C);
  *I = xmalloc(sizeof(GrB_Index) * (*nv + 1));
  *J = xmalloc(sizeof(GrB_Index) * (*nv + 1));
  *X = xmalloc(sizeof(double) * (*nv + 1));
  GrB_Matrix_extractTuples_FP64(*I, *J, *X, nv, g->C);
}
static void dense_out(void *p, Out *o) {
  G *g = p;
  GrB_Index nv, *I, *J;
  double *X;
  int64_t nc = g->c->ops[0]->st.dims[1];
  extract(g, &nv, &I, &J, &X);
  free(g->dense);
  g->dense = xcalloc((size_t)g->n, sizeof(double));
  for (GrB_Index q = 0; q < nv; q++) g->dense[(int64_t)I[q] * nc + (int64_t)J[q]] = X[q];
  free(I); free(J); free(X);
  o->kind = OUT_DENSE; o->is_f32 = 0; o->vals = g->dense; o->n = g->n;
}
/* Sparse result: tuples -> CSR (row-sorted by counting). */
static void csr_out(void *p, Out *o) {
  G *g = p;
  GrB_Index nv, *I, *J;
  double *X;
  int64_t nr = g->c->ops[0]->st.dims[0];
  extract(g, &nv, &I, &J, &X);
  free(g->pos); free(g->crd); free(g->vals);
  g->pos = xcalloc((size_t)nr + 1, sizeof(int64_t));
  g->crd = xmalloc(sizeof(int32_t) * (nv + 1));
  g->vals = xmalloc(sizeof(double) * (nv + 1));
  for (GrB_Index q = 0; q < nv; q++) g->pos[I[q] + 1]++;
  for (int64_t i = 0; i < nr; i++) g->pos[i + 1] += g->pos[i];
  int64_t *fill = xmalloc(sizeof(int64_t) * (size_t)(nr + 1));
  memcpy(fill, g->pos, sizeof(int64_t) * (size_t)(nr + 1));
  for (GrB_Index q = 0; q < nv; q++) {
    int64_t d = fill[I[q]]++;
    g->crd[d] = (int32_t)J[q]; g->vals[d] = X[q];
  }
  free(fill); free(I); free(J); free(X);
  o->kind = OUT_CSR; o->is_f32 = 0; o->vals = g->vals; o->n = nr;
  o->pos = g->pos; o->crd = g->crd; o->pw = 8; o->cw = 4;
  o->ncols = g->c->ops[0]->st.dims[1];
}
static void *sp2_setup(Case *c, int nth) {
  G *g = g_new(c, nth);
  if (!g) return NULL;
  g->A = grb_from(&c->ops[1]->st, 0);
  g->B = grb_from(&c->ops[2]->st, 0);
  GrB_Matrix_new(&g->C, GrB_FP64, (GrB_Index)c->ops[0]->st.dims[0],
                 (GrB_Index)c->ops[0]->st.dims[1]);
  return g;
}
static void add_run(void *p) {
  G *g = p;
  GrB_Matrix_eWiseAdd_BinaryOp(g->C, NULL, NULL, GrB_PLUS_FP64, g->A, g->B, NULL);
  GrB_Matrix_wait(g->C, GrB_MATERIALIZE);
}

const Peer P_GRB_MXV = {.name = "GraphBLAS", .setup = mxv_setup, .run = mxv_run, .out = mxv_out,
                        .done = g_done, .max_threads = 2};
const Peer P_GRB_SPMM = {.name = "GraphBLAS", .setup = spmm_setup, .run = mxm_run, .out = dense_out,
                         .done = g_done, .max_threads = 2};
const Peer P_GRB_ADD = {.name = "GraphBLAS", .setup = sp2_setup, .run = add_run, .out = csr_out,
                        .done = g_done, .max_threads = 2};
const Peer P_GRB_SPGEMM = {.name = "GraphBLAS", .setup = sp2_setup, .run = mxm_run, .out = csr_out,
                           .done = g_done, .max_threads = 2};
#else
int have_graphblas(void) { return 0; }
static void *none_setup(Case *c, int nth) {
  (void)nth;
  snprintf(c->note, sizeof c->note, "GraphBLAS not found at configure time");
  return NULL;
}
const Peer P_GRB_MXV = {.name = "GraphBLAS", .setup = none_setup, .max_threads = 2};
const Peer P_GRB_SPMM = {.name = "GraphBLAS", .setup = none_setup, .max_threads = 2};
const Peer P_GRB_ADD = {.name = "GraphBLAS", .setup = none_setup, .max_threads = 2};
const Peer P_GRB_SPGEMM = {.name = "GraphBLAS", .setup = none_setup, .max_threads = 2};
#endif

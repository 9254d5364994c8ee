/* MKL peers: Intel MKL 2020 (Debian's libmkl-rt, `scripts/deps.sh
 * --with-mkl`): cblas_dgemm / cblas_sgemm and the inspector-executor
 * sparse BLAS on tensorjit's own arrays (MKL_INT is 32-bit, as are the
 * suite's positions and coordinates, so MKL's handles wrap them without a
 * copy): mkl_sparse_d_mv (CSR, CSC, COO), mkl_sparse_d_mm (row-major dense
 * operand), mkl_sparse_d_add, mkl_sparse_sp2m (rows unsorted) and sp2m +
 * mkl_sparse_order (sorted, as tensorjit's output is).
 *
 * MKL is loaded at run time (bench/mkl_rt.c says how, and why it is
 * dlopen'ed and its CPU check overridden). Inspection (handles, mv/mm
 * hints, mkl_sparse_optimize) is untimed setup. A sparse output is a new
 * MKL handle per call: the timed run destroys the previous run's result
 * first.
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#include "mkl_rt.h"

int mkl_available(void) { return mkl_rt_load(); }
const char *mkl_status(void) { return mkl_rt_status(); }

#ifdef TJ_HAVE_MKL
/* The calls each handle is hinted for: the suite's runs, with room. */
enum { EXPECTED_CALLS = 1000 };

/* ---- GEMM ---- */
typedef struct MG { Case *c; void *out; int64_t n; } MG;

static void *gemm_setup(Case *c, int nth) {
  MG *g = xcalloc(1, sizeof *g);
  g->c = c;
  g->n = c->ops[0]->st.dims[0] * c->ops[0]->st.dims[1];
  g->out = xcalloc((size_t)g->n, c->is_f32 ? sizeof(float) : sizeof(double));
  mkl.MKL_Set_Num_Threads(nth);
  return g;
}
static void gemm_run(void *p) {
  MG *g = p;
  const tj_storage *B = &g->c->ops[1]->st, *C = &g->c->ops[2]->st;
  MKL_INT n = (MKL_INT)B->dims[0], k = (MKL_INT)B->dims[1], m = (MKL_INT)C->dims[1];
  if (g->c->is_f32)
    mkl.cblas_sgemm(TJ_CBLAS_ROW_MAJOR, TJ_CBLAS_NO_TRANS, TJ_CBLAS_NO_TRANS, n, m, k, 1.0f, B->vals, k, C->vals,
                    m, 0.0f, g->out, m);
  else
    mkl.cblas_dgemm(TJ_CBLAS_ROW_MAJOR, TJ_CBLAS_NO_TRANS, TJ_CBLAS_NO_TRANS, n, m, k, 1.0, B->vals, k, C->vals,
                    m, 0.0, g->out, m);
}
static void gemm_out(void *p, Out *o) {
  MG *g = p;
  o->kind = OUT_DENSE; o->is_f32 = g->c->is_f32; o->vals = g->out; o->n = g->n;
}
static void gemm_done(void *p) {
  MG *g = p;
  free(g->out);
  free(g);
}

/* ---- sparse ---- */
typedef struct M {
  Case *c;
  sparse_matrix_t A, B, C;      /* inputs (wrapping tensorjit's arrays); C: add/sp2m result */
  struct matrix_descr descr;
  int sort;                     /* sp2m: mkl_sparse_order the result */
  sparse_status_t st;           /* of the last run */
  double *dense;                /* mv / mm result */
  int64_t n;
  int64_t *pos; int32_t *crd; double *vals;   /* sparse result, copied for the check */
} M;

static const char *status_name(sparse_status_t s) {
  switch (s) {
  case SPARSE_STATUS_SUCCESS: return "success";
  case SPARSE_STATUS_NOT_INITIALIZED: return "not initialized";
  case SPARSE_STATUS_ALLOC_FAILED: return "allocation failed";
  case SPARSE_STATUS_INVALID_VALUE: return "invalid value";
  case SPARSE_STATUS_EXECUTION_FAILED: return "execution failed";
  case SPARSE_STATUS_INTERNAL_ERROR: return "internal error";
  case SPARSE_STATUS_NOT_SUPPORTED: return "not supported";
  }
  return "unknown status";
}

/* An MKL handle over s (CSR, CSC or COO, 32-bit indices), or NULL with
 * the reason in why. The handle reads s's arrays; it does not copy them. */
static sparse_matrix_t mkl_matrix(const tj_storage *s, char *why, size_t n) {
  if (s->pos_width != (int)sizeof(MKL_INT) || s->crd_width != (int)sizeof(MKL_INT)) {
    snprintf(why, n, "MKL (LP64) needs %d-byte positions and coordinates", (int)sizeof(MKL_INT));
    return NULL;
  }
  MKL_INT nr = (MKL_INT)s->dims[0], nc = (MKL_INT)s->dims[1];
  MKL_INT *pos = s->levels[1].pos, *crd = s->levels[1].crd;
  sparse_matrix_t A = NULL;
  sparse_status_t st;
  if (s->levels[1].kind == TJ_LVL_SINGLETON)   /* COO: rows in level 0's crd */
    st = mkl.mkl_sparse_d_create_coo(&A, SPARSE_INDEX_BASE_ZERO, nr, nc, (MKL_INT)s->vals_len,
                                     s->levels[0].crd, crd, s->vals);
  else if (s->map[0].dim == 1)
    st = mkl.mkl_sparse_d_create_csc(&A, SPARSE_INDEX_BASE_ZERO, nr, nc, pos, pos + 1, crd, s->vals);
  else
    st = mkl.mkl_sparse_d_create_csr(&A, SPARSE_INDEX_BASE_ZERO, nr, nc, pos, pos + 1, crd, s->vals);
  if (st != SPARSE_STATUS_SUCCESS) {
    snprintf(why, n, "mkl_sparse_d_create: %s", status_name(st));
    return NULL;
  }
  return A;
}

/* A state with handles over operands 1 (and 2 when two_sparse). */
static M *m_new(Case *c, int nth, int two_sparse) {
  mkl.MKL_Set_Num_Threads(nth);
  M *m = xcalloc(1, sizeof *m);
  m->c = c;
  m->descr.type = SPARSE_MATRIX_TYPE_GENERAL;
  m->A = mkl_matrix(&c->ops[1]->st, c->note, sizeof c->note);
  if (m->A && two_sparse) m->B = mkl_matrix(&c->ops[2]->st, c->note, sizeof c->note);
  if (!m->A || (two_sparse && !m->B)) {
    if (m->A) mkl.mkl_sparse_destroy(m->A);
    free(m);
    return NULL;
  }
  return m;
}
static void m_done(void *p) {
  M *m = p;
  mkl.mkl_sparse_destroy(m->A);
  if (m->B) mkl.mkl_sparse_destroy(m->B);
  if (m->C) mkl.mkl_sparse_destroy(m->C);
  free(m->dense); free(m->pos); free(m->crd); free(m->vals);
  free(m);
}

/* Runs mkl_sparse_optimize after a hint; a format MKL has no hint for
 * (CSC, COO) runs unoptimized, as the row's note says. NULL (note set) on
 * failure. */
static M *m_optimize(M *m, sparse_status_t hint) {
  if (hint == SPARSE_STATUS_NOT_SUPPORTED) {
    snprintf(m->c->note, sizeof m->c->note, "MKL has no hint for this format: not optimized");
    return m;
  }
  sparse_status_t st = hint == SPARSE_STATUS_SUCCESS ? mkl.mkl_sparse_optimize(m->A) : hint;
  if (st == SPARSE_STATUS_SUCCESS) {
    snprintf(m->c->note, sizeof m->c->note, "hint + mkl_sparse_optimize");
    return m;
  }
  snprintf(m->c->note, sizeof m->c->note, "mkl_sparse_set_*_hint / optimize: %s", status_name(st));
  m_done(m);
  return NULL;
}

static void *mv_setup(Case *c, int nth) {
  M *m = m_new(c, nth, 0);
  if (!m) return NULL;
  m->n = c->ops[0]->st.dims[0];
  m->dense = xcalloc((size_t)m->n, sizeof(double));
  return m_optimize(m, mkl.mkl_sparse_set_mv_hint(m->A, SPARSE_OPERATION_NON_TRANSPOSE, m->descr,
                                                  EXPECTED_CALLS));
}
static void mv_run(void *p) {
  M *m = p;
  m->st = mkl.mkl_sparse_d_mv(SPARSE_OPERATION_NON_TRANSPOSE, 1.0, m->A, m->descr,
                              m->c->ops[2]->st.vals, 0.0, m->dense);
}

static void *mm_setup(Case *c, int nth) {
  M *m = m_new(c, nth, 0);
  if (!m) return NULL;
  m->n = c->ops[0]->st.dims[0] * c->R;
  m->dense = xcalloc((size_t)m->n, sizeof(double));
  return m_optimize(m, mkl.mkl_sparse_set_mm_hint(m->A, SPARSE_OPERATION_NON_TRANSPOSE, m->descr,
                                                  SPARSE_LAYOUT_ROW_MAJOR, (MKL_INT)c->R,
                                                  EXPECTED_CALLS));
}
static void mm_run(void *p) {
  M *m = p;
  MKL_INT R = (MKL_INT)m->c->R;
  m->st = mkl.mkl_sparse_d_mm(SPARSE_OPERATION_NON_TRANSPOSE, 1.0, m->A, m->descr,
                              SPARSE_LAYOUT_ROW_MAJOR, m->c->ops[2]->st.vals, R, R, 0.0, m->dense, R);
}
static void dense_out(void *p, Out *o) {
  M *m = p;
  o->kind = OUT_DENSE; o->is_f32 = 0; o->vals = m->dense;
  o->n = m->st == SPARSE_STATUS_SUCCESS ? m->n : -1;
}

static void *two_setup(Case *c, int nth) { return m_new(c, nth, 1); }
static void *sorted_setup(Case *c, int nth) {
  M *m = m_new(c, nth, 1);
  if (m) m->sort = 1;
  return m;
}
static void drop_result(M *m) {
  if (m->C) mkl.mkl_sparse_destroy(m->C);
  m->C = NULL;
}
static void add_run(void *p) {
  M *m = p;
  drop_result(m);
  m->st = mkl.mkl_sparse_d_add(SPARSE_OPERATION_NON_TRANSPOSE, m->A, 1.0, m->B, &m->C);
}
static void sp2m_run(void *p) {
  M *m = p;
  drop_result(m);
  m->st = mkl.mkl_sparse_sp2m(SPARSE_OPERATION_NON_TRANSPOSE, m->descr, m->A,
                              SPARSE_OPERATION_NON_TRANSPOSE, m->descr, m->B,
                              SPARSE_STAGE_FULL_MULT, &m->C);
  if (m->st == SPARSE_STATUS_SUCCESS && m->sort) m->st = mkl.mkl_sparse_order(m->C);
}
/* The result handle's CSR arrays, copied with rows made contiguous (an
 * exported row may end before the next one starts). */
static void csr_out(void *p, Out *o) {
  M *m = p;
  sparse_index_base_t base;
  MKL_INT nr, nc, *rs, *re, *ci;
  double *v;
  o->n = -1;
  if (m->st != SPARSE_STATUS_SUCCESS ||
      mkl.mkl_sparse_d_export_csr(m->C, &base, &nr, &nc, &rs, &re, &ci, &v) != SPARSE_STATUS_SUCCESS ||
      base != SPARSE_INDEX_BASE_ZERO)
    return;
  free(m->pos); free(m->crd); free(m->vals);
  int64_t nnz = 0;
  for (MKL_INT i = 0; i < nr; i++) nnz += re[i] - rs[i];
  m->pos = xmalloc(sizeof(int64_t) * ((size_t)nr + 1));
  m->crd = xmalloc(sizeof(int32_t) * ((size_t)nnz + 1));
  m->vals = xmalloc(sizeof(double) * ((size_t)nnz + 1));
  m->pos[0] = 0;
  for (MKL_INT i = 0; i < nr; i++) {
    int64_t d = m->pos[i], len = re[i] - rs[i];
    memcpy(m->crd + d, ci + rs[i], sizeof(int32_t) * (size_t)len);
    memcpy(m->vals + d, v + rs[i], sizeof(double) * (size_t)len);
    m->pos[i + 1] = d + len;
  }
  o->kind = OUT_CSR; o->is_f32 = 0; o->vals = m->vals; o->n = nr;
  o->pos = m->pos; o->crd = m->crd; o->pw = 8; o->cw = 4; o->ncols = nc;
}

#define MKL_PEER(NAME, STR, SETUP, RUN, OUT, DONE, UNRANKED)                          \
  const Peer NAME = {.name = STR, .setup = SETUP, .run = RUN, .out = OUT, .done = DONE, \
                     .max_threads = 2, .available = mkl_available, .unranked = UNRANKED};
MKL_PEER(P_MKL_GEMM, "MKL", gemm_setup, gemm_run, gemm_out, gemm_done, 0)
MKL_PEER(P_MKL_MV, "MKL", mv_setup, mv_run, dense_out, m_done, 0)
MKL_PEER(P_MKL_MM, "MKL", mm_setup, mm_run, dense_out, m_done, 0)
MKL_PEER(P_MKL_ADD, "MKL", two_setup, add_run, csr_out, m_done, 0)
MKL_PEER(P_MKL_SP2M, "MKL-unsorted", two_setup, sp2m_run, csr_out, m_done, 1)
MKL_PEER(P_MKL_SP2M_SORTED, "MKL-sorted", sorted_setup, sp2m_run, csr_out, m_done, 0)
#else
/* Never added to a case (mkl_available() is 0); defined for the link. */
#define MKL_PEER(NAME, STR) const Peer NAME = {.name = STR, .available = mkl_available};
MKL_PEER(P_MKL_GEMM, "MKL")
MKL_PEER(P_MKL_MV, "MKL")
MKL_PEER(P_MKL_MM, "MKL")
MKL_PEER(P_MKL_ADD, "MKL")
MKL_PEER(P_MKL_SP2M, "MKL-unsorted")
MKL_PEER(P_MKL_SP2M_SORTED, "MKL-sorted")
#endif

/* precompute(e, {j}, w) of a subexpression: a dense row workspace w(j)
 * that a producer loop fills and a consumer loop reads in e's place
 * (lower/precompute.c); over {i, j} (and three indices) a dense matrix
 * (tensor) workspace, and one that takes a sum's loop (GEMM plus a
 * matrix). Kernels against plain loops over the dense arrays
 * the operands were built from (CSR and dense operands, empty rows, 1 and
 * 2 threads, both backends), one case by hand, the where() -print-cin
 * shows, the lattices of both sides, and the refusals. The reference
 * interpreter and the loop-IR interpreter check the same schedules in
 * check_schedule_loops (rewrites_against_the_reference). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"
#include "util/tensors.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

enum { I = 23, J = 19, K = 6, L = 5 };

/* n small integer values (every order of summation gives the same
 * double), a third nonzero when sparse; rows 0, 3 and the last of an
 * n / cols x cols matrix empty when cols > 0. */
static double *values_of(int64_t n, int64_t cols, unsigned seed, bool sparse) {
  double *v = calloc((size_t)n, sizeof *v);
  for (int64_t q = 0; q < n; q++) {
    seed = seed * 1664525u + 1013904223u;
    int64_t row = cols > 0 ? q / cols : -1;
    bool empty = cols > 0 && (row == 0 || row == 3 || row == n / cols - 1);
    if (!empty && (!sparse || (seed >> 20) % 3 == 0)) v[q] = (double)((seed >> 8) % 9) - 4;
  }
  return v;
}

typedef enum { SPMV_SUM, ROW_SCALE, MTTKRP_TACO, MTTKRP_INNER, COL_SUM, SAMPLED, GEMM_PLUS,
               GEMM_SCALE } Kind;

typedef struct Run {
  Kind kind;
  const char *expr, *fb, *fx, *sched;
} Run;

static const Run runs[] = {
    {SPMV_SUM, "y(i) = (B(i,j) + C(i,j)) * x(j)", "ds", "d", "precompute(B(i,j) + C(i,j), {j}, w)"},
    {SPMV_SUM, "y(i) = (B(i,j) + C(i,j)) * x(j)", "ds", "s", "precompute(B(i,j) + C(i,j), {j}, w)"},
    {SPMV_SUM, "y(i) = (B(i,j) + C(i,j)) * x(j)", "dd", "d", "precompute(B(i,j) + C(i,j), j, w)"},
    {SPMV_SUM, "y(i) = (B(i,j) + C(i,j)) * x(j)", "ss", "s", "precompute(B(i,j) + C(i,j), {j}, w)"},
    {ROW_SCALE, "A(i,j) = (B(i,j) + C(i,j)) * x(j)", "ds", "d", "precompute(B(i,j) + C(i,j), {j}, w)"},
    {ROW_SCALE, "A(i,j) = (B(i,j) + C(i,j)) * x(j)", "ds", "s", "precompute(B(i,j) + C(i,j), {j}, w)"},
    {ROW_SCALE, "A(i,j) = (B(i,j) + C(i,j)) * x(j)", "ds", "d",
     "precompute((B(i,j) + C(i,j)) * x(j), {j}, w)"},   /* the whole rhs, dense output */
    {COL_SUM, "y(j) = (B(i,j) + C(i,j)) * x(i)", "ds", "d", "precompute(B(i,j) + C(i,j), {j}, w)"},
    /* into a CSR output shaped like the sampling operand x (here a matrix) */
    {SAMPLED, "A(i,j) = (B(i,j) + C(i,j)) * x(i,j)", "ds", "ds",
     "precompute(B(i,j) + C(i,j), {j}, w)"},
    {SAMPLED, "A(i,j) = (B(i,j) - C(i,j)) * x(i,j)", "dd", "ds",
     "precompute(B(i,j) - C(i,j), {j}, w)"},
    {MTTKRP_TACO, "A(i,j) = B(i,k,l) * D(l,j) * C(k,j)", "sss", "d",
     "precompute(B(i,k,l) * D(l,j), {j}, w)"},
    {MTTKRP_TACO, "A(i,j) = B(i,k,l) * D(l,j) * C(k,j)", "dss", "d",
     "reorder(i, k, l, j) precompute(B(i,k,l) * D(l,j), {j}, w)"},
    {MTTKRP_INNER, "A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", "sss", "d",
     "precompute(B(i,k,l) * C(k,j), {j}, w)"},
    /* the loop around the where in parallel: one workspace row per thread */
    {SPMV_SUM, "y(i) = (B(i,j) + C(i,j)) * x(j)", "ds", "s",
     "precompute(B(i,j) + C(i,j), {j}, w) parallelize(i, dynamic)"},
    {ROW_SCALE, "A(i,j) = (B(i,j) + C(i,j)) * x(j)", "ds", "d",
     "precompute(B(i,j) + C(i,j), {j}, w) parallelize(i, static)"},
    {MTTKRP_TACO, "A(i,j) = B(i,k,l) * D(l,j) * C(k,j)", "sss", "d",
     "precompute(B(i,k,l) * D(l,j), {j}, w) parallelize(i, dynamic)"},
    /* matrix workspaces: over the whole nest (the where outside every
       loop), one per row (k's loop skipped by the consumer), per thread */
    {ROW_SCALE, "A(i,j) = (B(i,j) + C(i,j)) * x(j)", "ds", "d",
     "precompute(B(i,j) + C(i,j), {i, j}, w)"},
    {ROW_SCALE, "A(i,j) = (B(i,j) + C(i,j)) * x(j)", "ss", "s",
     "precompute(B(i,j) + C(i,j), {j, i}, w)"},
    {MTTKRP_TACO, "A(i,j) = B(i,k,l) * D(l,j) * C(k,j)", "sss", "d",
     "precompute(B(i,k,l) * D(l,j), {k, j}, w) parallelize(i, dynamic)"},
    {MTTKRP_TACO, "A(i,j) = B(i,k,l) * D(l,j) * C(k,j)", "dss", "d",
     "precompute(B(i,k,l) * D(l,j), {i, k, j}, w)"},
    {GEMM_SCALE, "A(i,j) = (E(i,k) * C(k,j)) * B(i,j)", "ds", "d",
     "precompute(E(i,k) * C(k,j), {i, j}, w)"},
    /* the workspace's loops split, bound, unrolled, vectorized (both sides'
       copies), pos-split in the producer alone */
    {ROW_SCALE, "A(i,j) = (B(i,j) + C(i,j)) * x(j)", "dd", "d",
     "precompute(B(i,j) + C(i,j), {j}, w) split(j, j0, j1, 4) vectorize(j1, 4)"},
    {ROW_SCALE, "A(i,j) = (B(i,j) + C(i,j)) * x(j)", "dd", "s",
     "precompute(B(i,j) + C(i,j), {i, j}, w) divide(i, i0, i1, 3) unroll(j, 2)"},
    {SPMV_SUM, "y(i) = (B(i,j) + C(i,j)) * x(j)", "dd", "d",
     "precompute(B(i,j) + C(i,j), {j}, w) bound(j, jb, 19, max_exact) parallelize(i, dynamic)"},
    {MTTKRP_TACO, "A(i,j) = B(i,k,l) * D(l,j) * C(k,j)", "sss", "d",
     "precompute(B(i,k,l) * D(l,j), {j}, w) pos(l, lp, B(i,k,l)) split(lp, l0, l1, 2) "
     "split(j, j0, j1, 8) parallelize(i, dynamic)"},
    {GEMM_PLUS, "A(i,j) = E(i,k) * C(k,j) + B(i,j)", "dd", "d",
     "precompute(E(i,k) * C(k,j), {i, j}, w) split(i, i0, i1, 4) split(j, j0, j1, 8) "
     "vectorize(j1, 4)"},
    /* GEMM plus a matrix: the workspace takes the sum over k */
    {GEMM_PLUS, "A(i,j) = E(i,k) * C(k,j) + B(i,j)", "ds", "d",
     "precompute(E(i,k) * C(k,j), {i, j}, w)"},
    {GEMM_PLUS, "A(i,j) = E(i,k) * C(k,j) + B(i,j)", "dd", "d",
     "precompute(E(i,k) * C(k,j), {j}, w) parallelize(i, dynamic)"},
};
enum { NRUNS = sizeof runs / sizeof runs[0] };

/* The expected output by plain loops (y: I or J values, A: I x J). */
static void expected(Kind kind, const char *kind_expr, const double *B, const double *C, const double *x,
                     const double *B3, const double *C3, const double *D3, const double *E,
                     double *want) {
  for (int64_t i = 0; i < I; i++)
    for (int64_t j = 0; j < J; j++) {
      if (kind == GEMM_PLUS || kind == GEMM_SCALE) {   /* E (I x K) times C3 (K x J) */
        double ec = 0;
        for (int64_t k = 0; k < K; k++) ec += E[i * K + k] * C3[k * J + j];
        want[i * J + j] = kind == GEMM_PLUS ? ec + B[i * J + j] : ec * B[i * J + j];
        continue;
      }
      double bc = B[i * J + j] + (strstr(kind_expr, "-") ? -1 : 1) * C[i * J + j];
      if (kind == SPMV_SUM) want[i] += bc * x[j];
      if (kind == ROW_SCALE) want[i * J + j] = bc * x[j];
      if (kind == COL_SUM) want[j] += bc * x[i];
      if (kind == SAMPLED) want[i * J + j] = bc * x[i * J + j];
      if (kind == MTTKRP_TACO || kind == MTTKRP_INNER)
        for (int64_t k = 0; k < K; k++)
          for (int64_t l = 0; l < L; l++)
            want[i * J + j] += B3[(i * K + k) * L + l] * C3[k * J + j] * D3[l * J + j];
    }
}

START_TEST(subexpr_workspace_by_plain_loops) {
  const Run *r = &runs[_i % NRUNS];
  int nthreads = _i / NRUNS % 2 + 1;
  bool c_backend = _i >= 2 * NRUNS;
  double *B = values_of(I * J, J, 1, true), *C = values_of(I * J, J, 2, true);
  double *B3 = values_of(I * K * L, K * L, 3, true), *C3 = values_of(K * J, 0, 4, false);
  double *D3 = values_of(L * J, 0, 5, false);
  int64_t nx = r->kind == COL_SUM ? I : r->kind == SAMPLED ? I * J : J;
  double *x = values_of(nx, r->kind == SAMPLED ? J : 0, 6, r->fx[0] == 's');
  double *E = values_of(I * K, K, 9, true);
  double *want = calloc(I * J, sizeof *want), *zero = calloc(I * J, sizeof *zero);
  expected(r->kind, r->expr, B, C, x, B3, C3, D3, E, want);
  bool vec = r->kind == SPMV_SUM || r->kind == COL_SUM;
  int64_t dIJ[2] = {I, J}, dKJ[2] = {K, J}, dLJ[2] = {L, J}, d3[3] = {I, K, L}, dIK[2] = {I, K};
  int64_t ny = r->kind == SPMV_SUM ? I : J;
  tj_tensor *ops[4];
  bool sampled = r->kind == SAMPLED;
  ops[0] = vec ? tu_tensor("y", "d", 1, &ny, zero)
               : tu_tensor("A", sampled ? "ds" : "dd", 2, dIJ, zero);
  if (r->kind == MTTKRP_TACO || r->kind == MTTKRP_INNER) {
    ops[1] = tu_tensor("B", r->fb, 3, d3, B3);
    ops[2] = tu_tensor("C", "dd", 2, dKJ, C3);
    ops[3] = tu_tensor("D", "dd", 2, dLJ, D3);
  } else if (r->kind == GEMM_PLUS || r->kind == GEMM_SCALE) {
    ops[1] = tu_tensor("E", r->fb, 2, dIK, E);
    ops[2] = tu_tensor("C", "dd", 2, dKJ, C3);
    ops[3] = tu_tensor("B", "dd", 2, dIJ, B);
  } else {
    ops[1] = tu_tensor("B", r->fb, 2, dIJ, B);
    ops[2] = tu_tensor("C", r->fb, 2, dIJ, C);
    ops[3] = sampled ? tu_tensor("x", r->fx, 2, dIJ, x) : tu_tensor("x", r->fx, 1, &nx, x);
  }
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.nthreads = nthreads;
  if (c_backend) o.backend = TJ_BACKEND_C;
  tj_kernel *k;
  OK(tj_compile(cx, r->expr, ops, 4, r->sched, &o, &k));
  for (int rep = 0; rep < 2; rep++) {   /* the workspace is clean for a second run */
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    for (int64_t q = 0; q < (vec ? ny : I * J); q++) {
      double v;
      int64_t at[2] = {vec ? q : q / J, q % J};
      OK(tj_tensor_get(ops[0], at, &v));
      ck_assert_msg(v == want[q], "[%s %s B:%s x:%s, %d threads%s] entry %lld = %g, want %g",
                    r->expr, r->sched, r->fb, r->fx, nthreads, c_backend ? ", C backend" : "",
                    (long long)q, v, want[q]);
    }
    if (sampled) /* the entries the consumer's loop walks: x's */
      ck_assert_int_eq(tj_tensor_nnz(ops[0]), tj_tensor_nnz(ops[3]));
  }
  for (int t = 0; t < 4; t++) tj_tensor_free(ops[t]);
  tj_context_free(cx);
  double *all[] = {B, C, B3, C3, D3, x, want, zero, E};
  for (int q = 0; q < 9; q++) free(all[q]);
}
END_TEST

/* By hand: B = [1 0 2; 0 0 0; 0 3 0], C = [0 4 0; 0 0 0; 5 0 6], x = (1, 2, 3):
 *   B + C = [1 4 2; 0 0 0; 5 3 6], y = (1+8+6, 0, 5+6+18) = (15, 0, 29). */
START_TEST(subexpr_workspace_by_hand) {
  static const double b[9] = {1, 0, 2, 0, 0, 0, 0, 3, 0}, c[9] = {0, 4, 0, 0, 0, 0, 5, 0, 6};
  static const double xv[3] = {1, 2, 3}, zero[3] = {0}, want[3] = {15, 0, 29};
  int64_t d2[2] = {3, 3}, d1 = 3;
  tj_tensor *ops[4] = {tu_tensor("y", "d", 1, &d1, zero), tu_tensor("B", "ds", 2, d2, b),
                       tu_tensor("C", "ds", 2, d2, c), tu_tensor("x", "d", 1, &d1, xv)};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = (B(i,j) + C(i,j)) * x(j)", ops, 4,
                "precompute(B(i,j) + C(i,j), {j}, w)", NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int64_t i = 0; i < 3; i++) {
    double v;
    OK(tj_tensor_get(ops[0], &i, &v));
    ck_assert_msg(v == want[i], "y(%lld) = %g, want %g", (long long)i, v, want[i]);
  }
  for (int t = 0; t < 4; t++) tj_tensor_free(ops[t]);
  tj_context_free(cx);
}
END_TEST

/* TACO's residual with the workspace inside the sum's loop, by hand (B, C
 * and x as above, b = (10, 20, 30)): y = b - (B + C) x = (10 - 15, 20 - 0,
 * 30 - 29) = (-5, 20, 1); on 1 and 2 threads (a row of w each), both
 * backends, run twice. */
START_TEST(residual_workspace_by_hand) {
  static const double b[9] = {1, 0, 2, 0, 0, 0, 0, 3, 0}, c[9] = {0, 4, 0, 0, 0, 0, 5, 0, 6};
  static const double xv[3] = {1, 2, 3}, bv[3] = {10, 20, 30}, zero[3] = {0};
  static const double want[3] = {-5, 20, 1};
  for (int run = 0; run < 4; run++) {
    int64_t d2[2] = {3, 3}, d1 = 3;
    tj_tensor *ops[5] = {tu_tensor("y", "d", 1, &d1, zero), tu_tensor("b", "d", 1, &d1, bv),
                         tu_tensor("B", "ds", 2, d2, b), tu_tensor("C", "ds", 2, d2, c),
                         tu_tensor("x", "d", 1, &d1, xv)};
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_options o = tj_options_default();
    o.nthreads = run % 2 + 1;
    if (run >= 2) o.backend = TJ_BACKEND_C;
    tj_kernel *k;
    OK(tj_compile(cx, "y(i) = b(i) - (B(i,j) + C(i,j)) * x(j)", ops, 5,
                  "precompute(B(i,j) + C(i,j), {j}, w) parallelize(i, dynamic)", &o, &k));
    for (int rep = 0; rep < 2; rep++) {
      OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
      for (int64_t i = 0; i < 3; i++) {
        double v;
        OK(tj_tensor_get(ops[0], &i, &v));
        ck_assert_msg(v == want[i], "[run %d] y(%lld) = %g, want %g", run, (long long)i, v,
                      want[i]);
      }
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    OK(tj_kernel_print(k, TJ_STAGE_CIN, f));
    fclose(f);
    ck_assert_str_eq(buf, "forall(i:parallel(dynamic), where(y(i) = b(i) - t_j, "
                          "where(forall(j, t_j += w(j) * x(j)), "
                          "forall(j, w(j) = B(i,j) + C(i,j)))))\n");
    free(buf);
    for (int t = 0; t < 5; t++) tj_tensor_free(ops[t]);
    tj_context_free(cx);
  }
}
END_TEST

/* Matrix workspaces by hand: E = [1 2; 3 4], C = [5 6; 7 8], so E C =
 * [1*5+2*7 1*6+2*8; 3*5+4*7 3*6+4*8] = [19 22; 43 50];
 *   GEMM plus D = [1 1; 1 1]:     A = [20 23; 44 51]
 *   GEMM times D = [1 2; 3 4]:    A = [19 44; 129 200]
 * on 1 and 2 threads, both backends, run twice; with the where -print-cin
 * shows. */
START_TEST(matrix_workspace_by_hand) {
  static const double e[4] = {1, 2, 3, 4}, c[4] = {5, 6, 7, 8}, zero[4] = {0};
  static const double ones[4] = {1, 1, 1, 1}, d[4] = {1, 2, 3, 4};
  static const double plus[4] = {20, 23, 44, 51}, times[4] = {19, 44, 129, 200};
  static const struct {
    const char *expr, *sched, *cin;
    const double *d, *want;
  } cases[] = {
      {"A(i,j) = E(i,k) * C(k,j) + D(i,j)", "precompute(E(i,k) * C(k,j), {i, j}, w)",
       "where(forall(i, forall(j, A(i,j) = w(i,j) + D(i,j))), "
       "forall(i, forall(j, forall(k, w(i,j) += E(i,k) * C(k,j)))))\n", ones, plus},
      {"A(i,j) = (E(i,k) * C(k,j)) * D(i,j)", "precompute(E(i,k) * C(k,j), {i, j}, w)",
       "where(forall(i, forall(j, A(i,j) += w(i,j) * D(i,j))), "
       "forall(i, forall(k, forall(j, w(i,j) += E(i,k) * C(k,j)))))\n", d, times},
      {"A(i,j) = E(i,k) * C(k,j) + D(i,j)",
       "precompute(E(i,k) * C(k,j), {j}, w) parallelize(i, dynamic)",
       "forall(i:parallel(dynamic), where(forall(j, A(i,j) = w(j) + D(i,j)), "
       "forall(j, forall(k, w(j) += E(i,k) * C(k,j)))))\n", ones, plus},
      /* the workspace's loops split and unrolled (both sides' copies) */
      {"A(i,j) = E(i,k) * C(k,j) + D(i,j)",
       "precompute(E(i,k) * C(k,j), {i, j}, w) split(j, j0, j1, 1) unroll(i, 2)",
       "suchthat(where(forall(i:unroll(2), forall(j0, forall(j1, A(i,j) = w(i,j) + D(i,j)))), "
       "forall(i:unroll(2), forall(j0, forall(j1, forall(k, w(i,j) += E(i,k) * C(k,j)))))), "
       "split(j, j0, j1, 1))\n", ones, plus},
  };
  for (int run = 0; run < 16; run++) {
    int q = run % 4;
    int64_t d2[2] = {2, 2};
    tj_tensor *ops[4] = {tu_tensor("A", "dd", 2, d2, zero), tu_tensor("E", "ds", 2, d2, e),
                         tu_tensor("C", "dd", 2, d2, c), tu_tensor("D", "dd", 2, d2, cases[q].d)};
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_options o = tj_options_default();
    o.nthreads = run / 4 % 2 + 1;
    if (run >= 8) o.backend = TJ_BACKEND_C;
    tj_kernel *k;
    OK(tj_compile(cx, cases[q].expr, ops, 4, cases[q].sched, &o, &k));
    for (int rep = 0; rep < 2; rep++) {
      OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
      for (int64_t x = 0; x < 4; x++) {
        double v;
        int64_t at[2] = {x / 2, x % 2};
        OK(tj_tensor_get(ops[0], at, &v));
        ck_assert_msg(v == cases[q].want[x], "[%s %s run %d] A(%lld,%lld) = %g, want %g",
                      cases[q].expr, cases[q].sched, run, (long long)at[0], (long long)at[1], v,
                      cases[q].want[x]);
      }
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    OK(tj_kernel_print(k, TJ_STAGE_CIN, f));
    fclose(f);
    ck_assert_str_eq(buf, cases[q].cin);
    free(buf);
    for (int t = 0; t < 4; t++) tj_tensor_free(ops[t]);
    tj_context_free(cx);
  }
}
END_TEST

/* A stage of y(i) = (B + C) * x or TACO's MTTKRP under a schedule. */
static char *stage_of(bool mttkrp, const char *sched, tj_stage st) {
  double *v = values_of(I * J * K, 0, 7, true);
  int64_t dIJ[2] = {I, J}, dKJ[2] = {K, J}, dLJ[2] = {L, J}, d3[3] = {I, K, L}, dJ = J, dI = I;
  tj_tensor *ops[4];
  if (mttkrp) {
    ops[0] = tu_tensor("A", "dd", 2, dIJ, v), ops[1] = tu_tensor("B", "sss", 3, d3, v);
    ops[2] = tu_tensor("C", "dd", 2, dKJ, v), ops[3] = tu_tensor("D", "dd", 2, dLJ, v);
  } else {
    ops[0] = tu_tensor("y", "d", 1, &dI, v), ops[1] = tu_tensor("B", "ds", 2, dIJ, v);
    ops[2] = tu_tensor("C", "ds", 2, dIJ, v), ops[3] = tu_tensor("x", "s", 1, &dJ, v);
  }
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, mttkrp ? "A(i,j) = B(i,k,l) * D(l,j) * C(k,j)"
                           : "y(i) = (B(i,j) + C(i,j)) * x(j)", ops, 4, sched, NULL, &k));
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  OK(tj_kernel_print(k, st, f));
  fclose(f);
  for (int t = 0; t < 4; t++) tj_tensor_free(ops[t]);
  tj_context_free(cx);
  free(v);
  return buf;
}

/* -print-cin shows the where(consumer, producer), -print-lattice both
 * sides' loops over j, and the kernel the producer, the consumer and the
 * reset (by the producer's loops again when the consumer walks x's
 * nonzeros only; on read when it walks every j). */
START_TEST(subexpr_workspace_stages) {
  char *s = stage_of(false, "precompute(B(i,j) + C(i,j), {j}, w)", TJ_STAGE_CIN);
  ck_assert_str_eq(s, "forall(i, where(forall(j, y(i) += w(j) * x(j)), "
                      "forall(j, w(j) = B(i,j) + C(i,j))))\n");
  free(s);
  s = stage_of(true, "precompute(B(i,k,l) * D(l,j), {j}, w)", TJ_STAGE_CIN);
  ck_assert_str_eq(s, "forall(i, forall(k, where(forall(j, A(i,j) += w(j) * C(k,j)), "
                      "forall(l, forall(j, w(j) += B(i,k,l) * D(l,j))))))\n");
  free(s);
  s = stage_of(false, "precompute(B(i,j) + C(i,j), {j}, w)", TJ_STAGE_LATTICE);
  ck_assert_msg(strstr(s, "j (produces w): [B C] [B] [C]\nj (reads w): [x]\n"), "%s", s);
  free(s);
  s = stage_of(false, "precompute(B(i,j) + C(i,j), {j}, w)", TJ_STAGE_C);
  /* the producer's union stores one add of selects (lower/case_select.c),
     into this thread's row of w (the row loop is parallel) */
  ck_assert_msg(strstr(s, "w_vals[w_row * w_dim0 + j] = (B1 == j ? B_val_1 : -0.0) + "
                          "(B1 == j ? (C1 == j ? C_val_1 : -0.0) : C_val_1);") &&
                    strstr(s, "the workspace's entries back to 0") &&
                    strstr(s, "tj_rt_free(w_vals)"),
                "%.3000s", s);
  free(s);
  s = stage_of(true, "precompute(B(i,k,l) * D(l,j), {j}, w)", TJ_STAGE_C);
  ck_assert_msg(strstr(s, "its reads reset the workspace") && strstr(s, "w_vals[pw] = 0.0;") &&
                !strstr(s, "back to 0"), "%.3000s", s);
  free(s);
  /* under the parallel row loop: a row of w per thread, each where on its
     thread's (no access to w outside it) */
  s = stage_of(true, "precompute(B(i,k,l) * D(l,j), {j}, w) parallelize(i, dynamic)",
               TJ_STAGE_C);
  ck_assert_msg(strstr(s, "w_rows = tj_rt_threads();") &&
                    strstr(s, "tj_rt_alloc(w_dim0 * w_rows * 8") &&
                    strstr(s, "w_row = tj_rt_thread_slot(w_rows);") &&
                    strstr(s, "w_vals[w_row * w_dim0 + j] += B_val * D_val;") &&
                    !strstr(s, "w_vals[j]") &&
                    strstr(s, "parallel(dynamic)"),
                "%.4000s", s);
  free(s);
  /* a matrix workspace w(k,j) per thread, l's loop the producer's alone */
  s = stage_of(true, "precompute(B(i,k,l) * D(l,j), {k, j}, w) parallelize(i, dynamic)",
               TJ_STAGE_CIN);
  ck_assert_str_eq(s, "forall(i:parallel(dynamic), where(forall(k, forall(j, A(i,j) += "
                      "w(k,j) * C(k,j))), forall(k, forall(l, forall(j, w(k,j) += "
                      "B(i,k,l) * D(l,j))))))\n");
  free(s);
  s = stage_of(true, "precompute(B(i,k,l) * D(l,j), {k, j}, w) parallelize(i, dynamic)",
               TJ_STAGE_C);
  ck_assert_msg(strstr(s, "tj_rt_alloc(w_dim0 * w_dim1 * w_rows * 8") &&
                    strstr(s, "w_row = tj_rt_thread_slot(w_rows);") &&
                    strstr(s, "w_vals[(w_row * w_dim0 + k) * w_dim1 + j] += B_val * D_val;") &&
                    strstr(s, "its reads reset the workspace"),
                "%.4000s", s);
  free(s);
}
END_TEST

typedef struct Refusal {
  const char *expr, *fout, *sched, *msg;
} Refusal;

static const Refusal refusals[] = {
    {"A(i,j) = (B(i,j) + C(i,j)) * x(j)", "ds", "precompute(B(i,j) + C(i,j), {j}, w)",
     "walks every j (nothing else it reads is sparse there), so it would store every entry "
     "of a sparse output's row"},
    {"A(i,j) = (B(i,j) + C(i,j)) * x(j)", "dd",
     "precompute(B(i,j) + C(i,j), {j}, w) parallelize(j, static)",
     "the loop of j reads or writes the workspace w: its loops take no fuse or parallelize"},
    {"A(i,j) = (B(i,j) + C(i,j)) * x(j)", "dd", "precompute(B(i,j) + C(i,j), {j}, w) "
     "fuse(i, j, f)", "the loop of j reads or writes the workspace w: its loops take no fuse"},
    {"A(i,j) = (B(i,j) + C(i,j)) * x(j)", "dd", "precompute(B(i,j) + C(i,j), {j}, w) "
     "pos(j, jp, B(i,j))", "pos(j, jp, ...): j is an index of the workspace w, whose producer "
     "and consumer walk different accesses"},
    /* a split the loop cannot take: the producer co-iterates B and C */
    {"A(i,j) = (B(i,j) + C(i,j)) * x(j)", "dd",
     "precompute(B(i,j) + C(i,j), {j}, w) split(j, j0, j1, 4)",
     "split(j, j0, j1, 4): the loop over j co-iterates sparse operands"},
    /* a workspace over an output index beside a sum (not inside it) */
    {"A(i,j) = (B(i,j) + C(i,j)) * x(j) - B(i,k) * x(k)", "dd",
     "precompute(B(i,j) + C(i,j), {j}, w)",
     "the right-hand side sums over a subexpression, sum(k, B(i,k) * x(k)) (a where() of its "
     "own, which the workspace would sit in); a vector workspace is lowered where every "
     "reduction is over the whole right-hand side or inside the sum over its index"},
    {"A(i,j) = B(i,k) * C(k,j) * x(j)", "dd",
     "reorder(i, k, j) precompute(B(i,k) * C(k,j), {k}, w)",
     "the subexpression uses j, whose loop runs inside the loop of the workspace's innermost "
     "index"},
    /* a matrix workspace: k between its loops is used outside e */
    {"A(i,j) = B(i,k) * C(k,j) * x(k)", "dd",
     "reorder(i, k, j) precompute(B(i,k) * C(k,j), {i, j}, w)",
     "the loop of k runs between the loops of the workspace's indices, and k is not an index "
     "summed only inside the subexpression"},
    {"A(i,j) = (B(i,j) + C(i,j)) * x(j)", "dd",
     "precompute(B(i,j) + C(i,j), {i, j}, w) parallelize(i, static)",
     "the loop of i reads or writes the workspace w: its loops take no fuse or parallelize"},
    {"A(i,j) = (B(i,j) + C(i,j)) * x(j) - B(i,k) * x(k)", "dd",
     "precompute(B(i,j) + C(i,j), {i, j}, w)",
     "the right-hand side sums over a subexpression, sum(k, B(i,k) * x(k))"},
    /* the whole right-hand side of a sparse output: a row workspace only */
    {"A(i,j) = (B(i,j) + C(i,j)) * x(j)", "ds", "precompute((B(i,j) + C(i,j)) * x(j), {i, j}, w)",
     "the whole right-hand side of a sparse output goes through a row workspace over its last "
     "index (here: j)"},
    /* the row workspace drains into a segment of a compressed last level:
       a dense tail (sd) or a COO singleton gave wrong values (random_schedules
       seed 1787: A(i,j) = B(i,j) + C(i,j) into sd kept 2 of 5 rows) */
    {"A(i,j) = (B(i,j) + C(i,j)) * x(j)", "sd", "precompute((B(i,j) + C(i,j)) * x(j), {j}, w)",
     "A's last level (over j) is dense; precompute into a compressed last level"},
    {"A(i,j) = (B(i,j) + C(i,j)) * x(j)", "uq", "precompute((B(i,j) + C(i,j)) * x(j), {j}, w)",
     "A's last level (over j) is singleton; precompute into a compressed last level"},
    {"A(i,j) = (B(i,j) + C(i,j)) * x(j)", "dd",
     "precompute(B(i,j) + C(i,j), {j}, w) precompute((B(i,j) + C(i,j)) * x(j), {j}, v)",
     "the kernel has a workspace already"},
};
enum { NREFUSALS = sizeof refusals / sizeof refusals[0] };

START_TEST(subexpr_workspace_refusals) {
  const Refusal *r = &refusals[_i];
  double *v = values_of(I * J, J, 8, true);
  int64_t d2[2] = {I, J}, dJ = J, dsq[2] = {J, J};
  bool square = strstr(r->expr, "C(k,j)") != NULL;
  tj_tensor *ops[4] = {tu_tensor("A", r->fout, 2, square ? dsq : d2, v),
                       tu_tensor("B", "ds", 2, square ? dsq : d2, v),
                       tu_tensor("C", "ds", 2, square ? dsq : d2, v),
                       tu_tensor("x", "d", 1, &dJ, v)};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = NULL;
  ck_assert_int_ne(tj_compile(cx, r->expr, ops, 4, r->sched, NULL, &k), TJ_OK);
  ck_assert_msg(strstr(tj_last_error(), r->msg), "[%s] got: %s", r->sched, tj_last_error());
  for (int t = 0; t < 4; t++) tj_tensor_free(ops[t]);
  tj_context_free(cx);
  free(v);
}
END_TEST

int main(void) {
  Suite *s = suite_create("schedule_workspace");
  TCase *t = tcase_create("schedule_workspace");
  tcase_set_timeout(t, 120);
  tcase_add_loop_test(t, subexpr_workspace_by_plain_loops, 0, 3 * NRUNS);
  tcase_add_test(t, subexpr_workspace_by_hand);
  tcase_add_test(t, residual_workspace_by_hand);
  tcase_add_test(t, subexpr_workspace_stages);
  tcase_add_test(t, matrix_workspace_by_hand);
  tcase_add_loop_test(t, subexpr_workspace_refusals, 0, NREFUSALS);
  suite_add_tcase(s, t);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

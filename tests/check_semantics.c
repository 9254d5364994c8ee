/* The meaning of index notation, pinned by values computed here by hand or
 * by plain C loops, never by tensorjit's reference interpreter (a mistake
 * shared by the kernels and the interpreter would pass every differential
 * test). Summation follows TACO's einsum rule: an index that appears only
 * on the right is summed over the smallest subexpression holding every use
 * of it, so y(i) = b(i) - A(i,j) * x(j) is the residual b - Ax.
 */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"
#include "util/tensors.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

static tj_tensor *tensor(const char *name, const char *fmt, int order, const int64_t *dims,
                         const double *vals) {
  return tu_tensor(name, fmt, order, dims, vals);
}

static tj_tensor *vector(const char *name, const char *fmt, int64_t n, const double *v) {
  return tensor(name, fmt, 1, &n, v);
}

static tj_tensor *matrix(const char *name, const char *fmt, int64_t r, int64_t c, const double *v) {
  return tensor(name, fmt, 2, (int64_t[]){r, c}, v);
}

/* Runs expr under opts with the given threads, as one evaluate call or as
 * assemble then compute, and compares the output with want (row-major, n
 * values; +-inf allowed) and, when nnz >= 0, its count of stored entries. */
static void expect_opts(const char *expr, tj_tensor **ops, int nops, const tj_options *opts,
                        bool two_phases, const double *want, int64_t n, int64_t nnz) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  const tj_options o = *opts;
  const char *semiring = o.semiring;
  int threads = o.nthreads;
  tj_kernel *k;
  OK(tj_compile(cx, expr, ops, nops, NULL, &o, &k));
  tu_run(k, two_phases);
  int order = tj_tensor_order(ops[0]);
  for (int64_t e = 0; e < n; e++) {
    int64_t c[4], r = e;
    for (int m = order - 1; m >= 0; m--) {
      c[m] = r % tj_tensor_dim(ops[0], m);
      r /= tj_tensor_dim(ops[0], m);
    }
    double got;
    OK(tj_tensor_get(ops[0], c, &got));
    ck_assert_msg(got == want[e] || (!isinf(want[e]) && fabs(got - want[e]) <= 1e-9 * (1 + fabs(want[e]))),
                  "%s [%s, %d threads%s]: element %lld is %.17g, want %.17g", expr,
                  semiring ? semiring : "", threads, two_phases ? ", two phases" : "",
                  (long long)e, got, want[e]);
  }
  if (nnz >= 0) {
    int64_t *coords, got_nnz;
    double *vals;
    OK(tj_tensor_unpack(ops[0], &coords, &vals, &got_nnz));
    ck_assert_msg(got_nnz == nnz, "%s [%s]: %lld stored entries, want %lld", expr,
                  semiring ? semiring : "", (long long)got_nnz, (long long)nnz);
    free(coords);
    free(vals);
  }
  tj_context_free(cx);
}

/* expect_opts with a semiring (NULL: plus.times) and a thread count (0: all). */
static void expect_run(const char *expr, tj_tensor **ops, int nops, const char *semiring,
                       int threads, bool two_phases, const double *want, int64_t n, int64_t nnz) {
  tj_options o = tj_options_default();
  o.semiring = semiring;
  o.nthreads = threads;
  expect_opts(expr, ops, nops, &o, two_phases, want, n, nnz);
}

/* Compiles and evaluates expr over ops (ops[0] the output) with the
 * default options, then compares the output with want (row-major, n
 * values). */
static void expect(const char *expr, tj_tensor **ops, int nops, const double *want, int64_t n) {
  expect_run(expr, ops, nops, NULL, 0, false, want, n, -1);
}

static void free_all(tj_tensor **ops, int n) {
  for (int i = 0; i < n; i++) tj_tensor_free(ops[i]);
}

/* TACO's residual example, by hand: A = I, x = (1, 2), b = (10, 20). */
START_TEST(test_residual_by_hand) {
  static const char *const fmts[] = {"ds", "ss", "ds:1,0", "dd", "uq"};
  for (int f = 0; f < 5; f++) {
    tj_tensor *ops[] = {vector("y", "d", 2, NULL), vector("b", "d", 2, (double[]){10, 20}),
                        matrix("A", fmts[f], 2, 2, (double[]){1, 0, 0, 1}),
                        vector("x", "d", 2, (double[]){1, 2})};
    expect("y(i) = b(i) - A(i,j) * x(j)", ops, 4, (double[]){9, 18}, 2);
    expect("y(i) = b(i) - sum(j, A(i,j) * x(j))", ops, 4, (double[]){9, 18}, 2);
    /* += adds the residual to what y holds: 9 + 9, 18 + 18 */
    expect("y(i) += b(i) - A(i,j) * x(j)", ops, 4, (double[]){18, 36}, 2);
    /* the sum over the whole rhs, written out: sum_j (b(i) - A(i,j) x(j)) */
    expect("y(i) = sum(j, b(i) - A(i,j) * x(j))", ops, 4, (double[]){19, 38}, 2);
    free_all(ops, 4);
  }
}
END_TEST

/* A sparse output whose indices the lhs lists against its levels' order,
 * with a sum nested under them (the notation's order is kept for the sum):
 * A(j,i) = B(i,k) * x(k) + C(i,j) into CSC-like A (levels i, j) and COO.
 * By hand: B = [1 2; 3 4], x = (1, 10), t(i) = (21, 43); C(0,1) = 5, so
 * A(0,0) = 21, A(0,1) = 43, A(1,0) = 21 + 5 = 26, A(1,1) = 43. It was
 * refused ("its levels would be visited out of order"). */
START_TEST(test_transposed_sparse_output_with_a_sum) {
  static const char *const fmts[] = {"ds:1,0", "ss:1,0", "uq", "ds"};
  for (int f = 0; f < 4; f++)
    for (int threads = 1; threads <= 2; threads++) {
      tj_tensor *ops[] = {matrix("A", fmts[f], 2, 2, NULL),
                          matrix("B", "dd", 2, 2, (double[]){1, 2, 3, 4}),
                          vector("x", "d", 2, (double[]){1, 10}),
                          matrix("C", "ds", 2, 2, (double[]){0, 5, 0, 0})};
      expect_run("A(j,i) = B(i,k) * x(k) + C(i,j)", ops, 4, NULL, threads, false,
                 (double[]){21, 43, 26, 43}, 4, 4);
      free_all(ops, 4);
    }
}
END_TEST

/* COO by hand: a 5x4 matrix inserted with duplicates (A(0,1) = 1 + 2,
 * A(4,2) = -1 + 3), empty rows 1 and 3, x = (1, 2, 3, 4). `uq` sums the
 * duplicates when packed and walks each row's run once (the column loop
 * finds the run's end); `uc` keeps them and its kernels sum them before
 * use, so a square or a min sees 3, not 1 and 2. */
START_TEST(test_coo_by_hand) {
  static const char *const fmts[] = {"uq", "uc"};
  static const int64_t ent[][2] = {{0, 1}, {0, 3}, {2, 0}, {4, 2}, {0, 1}, {4, 3}, {4, 2}};
  static const double val[] = {1, 4, 5, -1, 2, 7, 3};
  const double inf = INFINITY;
  for (int f = 0; f < 2; f++) {
    tj_format fmt;
    OK(tj_format_parse(fmts[f], &fmt));
    tj_tensor *A;
    OK(tj_tensor_new("A", TJ_F64, 2, (int64_t[]){5, 4}, &fmt, &A));
    for (int e = 0; e < 7; e++) OK(tj_tensor_insert(A, ent[e], val[e]));
    OK(tj_tensor_pack(A));
    ck_assert_int_eq(tj_tensor_nnz(A), f == 0 ? 5 : 7);
    tj_tensor *ops[] = {vector("y", "d", 5, NULL), A, vector("x", "d", 4, (double[]){1, 2, 3, 4})};
    for (int threads = 1; threads <= 2; threads++) {
      /* row 0: 3*2 + 4*4; row 2: 5*1; row 4: 2*3 + 7*4 */
      expect_run("y(i) = A(i,j) * x(j)", ops, 3, NULL, threads, false,
                 (double[]){22, 0, 5, 0, 34}, 5, -1);
      /* 9*2 + 16*4, 25, 4*3 + 49*4 (1*2 + 4*2 + ... if duplicates were squared apart) */
      expect_run("y(i) = A(i,j) * A(i,j) * x(j)", ops, 3, NULL, threads, true,
                 (double[]){82, 0, 25, 0, 208}, 5, -1);
      /* min over stored j of A + x: min(3+2, 4+4), none, 5+1, none, min(2+3, 7+4) */
      expect_run("y(i) = A(i,j) * x(j)", ops, 3, "min.plus", threads, false,
                 (double[]){5, inf, 6, inf, 5}, 5, -1);
    }
    tj_tensor *sq[] = {matrix("B", "ds", 5, 4, NULL), A};
    expect("B(i,j) = A(i,j) * A(i,j)", sq, 2,
           (double[]){0, 9, 0, 16, 0, 0, 0, 0, 25, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 49}, 20);
    tj_tensor_free(sq[0]);
    free_all(ops, 3);
  }
}
END_TEST

static bool stage_has(const tj_kernel *k, tj_stage st, const char *pass, const char *text);

/* COO SpMV over runs of every kind, by hand: a 7x20 `uq` matrix whose row
 * 0 is a run of 1, row 2 a run of 19 (past two vectors of 8; A(2,5) = 1
 * inserted again with 3, summed to 4 by pack), row 4 a run of exactly 8,
 * row 5 the last run (3 entries, inserted out of order), rows 1, 3 and 6
 * empty (6 after the last run). x(j) = j + 1. y = Ax walks each run once
 * (the column loop finds the run's end: `while (go)`); y = Ax + b merges
 * the rows with b's and scans for each run's end first (`more`), then
 * sums the run in a for loop; both are pinned here. */
START_TEST(test_coo_runs_by_hand) {
  tj_format fmt;
  OK(tj_format_parse("uq", &fmt));
  tj_tensor *A;
  OK(tj_tensor_new("A", TJ_F64, 2, (int64_t[]){7, 20}, &fmt, &A));
  OK(tj_tensor_insert(A, (int64_t[]){5, 19}, 2));
  OK(tj_tensor_insert(A, (int64_t[]){0, 7}, 2));
  for (int64_t j = 18; j >= 0; j--) OK(tj_tensor_insert(A, (int64_t[]){2, j}, 1));
  OK(tj_tensor_insert(A, (int64_t[]){2, 5}, 3));
  for (int64_t j = 10; j < 18; j++) OK(tj_tensor_insert(A, (int64_t[]){4, j}, -1));
  OK(tj_tensor_insert(A, (int64_t[]){5, 0}, 0.5));
  OK(tj_tensor_insert(A, (int64_t[]){5, 3}, 1));
  OK(tj_tensor_pack(A));
  ck_assert_int_eq(tj_tensor_nnz(A), 1 + 19 + 8 + 3);
  double x[20], b[7] = {1, 2, 3, 4, 5, 6, 7};
  for (int j = 0; j < 20; j++) x[j] = j + 1;
  tj_tensor *ops[] = {vector("y", "d", 7, NULL), A, vector("x", "d", 20, x),
                      vector("b", "d", 7, b)};
  /* row 0: 2*8; row 2: (1 + ... + 19) + 3*6; row 4: -(11 + ... + 18);
   * row 5: 0.5*1 + 1*4 + 2*20 */
  const double ax[] = {16, 0, 208, 0, -116, 44.5, 0};
  const double axb[] = {17, 2, 211, 4, -111, 50.5, 7};
  const double inf = INFINITY;
  /* min over stored j of A(i,j) + x(j): 2+8; 1+1; -1+11; min(1.5, 5, 22) */
  const double mp[] = {10, inf, 2, inf, 10, 1.5, inf};
  for (int threads = 1; threads <= 2; threads++)
    for (int phases = 0; phases < 2; phases++) {
      expect_run("y(i) = A(i,j) * x(j)", ops, 3, NULL, threads, phases, ax, 7, -1);
      expect_run("y(i) = A(i,j) * x(j)", ops, 3, "min.plus", threads, phases, mp, 7, -1);
      expect_run("y(i) = A(i,j) * x(j) + b(i)", ops, 4, NULL, threads, phases, axb, 7, -1);
    }
  /* += onto the last result, y = Ax + b: Ax + b + Ax */
  double acc[7];
  for (int i = 0; i < 7; i++) acc[i] = axb[i] + ax[i];
  expect("y(i) += A(i,j) * x(j)", ops, 3, acc, 7);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = A(i,j) * x(j)", ops, 3, NULL, NULL, &k));
  ck_assert(stage_has(k, TJ_STAGE_COMPUTE, NULL, "while (go)"));
  ck_assert(!stage_has(k, TJ_STAGE_COMPUTE, NULL, "more ="));
  OK(tj_compile(cx, "y(i) = A(i,j) * x(j) + b(i)", ops, 4, NULL, NULL, &k));
  ck_assert(stage_has(k, TJ_STAGE_COMPUTE, NULL, "more ="));
  ck_assert(!stage_has(k, TJ_STAGE_COMPUTE, NULL, "while (go)"));
  tj_context_free(cx);
  free_all(ops, 4);
}
END_TEST

/* A union of three or more sparse terms into a dense output is scattered
 * term by term into a row workspace, drained into the row's entries (the
 * rest stay 0), by hand: B1 - B2 + 2 * B3 and a product of sums. */
START_TEST(test_scattered_union_dense_out_by_hand) {
  const double b1[] = {1, 0, 0, 2, 0, 0, 0, 0, 3, 0, 0, 4};
  const double b2[] = {0, 5, 0, 2, 0, 0, 0, 0, 0, 0, 6, 0};
  const double b3[] = {7, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1};
  const double c[] = {2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 3};
  tj_tensor *ops[] = {matrix("A", "dd", 3, 4, NULL), matrix("B1", "ds", 3, 4, b1),
                      matrix("B2", "ds", 3, 4, b2), matrix("B3", "ds", 3, 4, b3),
                      matrix("C", "ds", 3, 4, c)};
  for (int threads = 1; threads <= 2; threads++)
    for (int phases = 0; phases < 2; phases++) {
      /* 1+14, -5, 0, 2-2; row 1 empty; 3+2, 0, -6, 4+2 */
      expect_run("A(i,j) = B1(i,j) - B2(i,j) + 2 * B3(i,j)", ops, 4, NULL, threads, phases,
                 (double[]){15, -5, 0, 0, 0, 0, 0, 0, 5, 0, -6, 6}, 12, -1);
      /* (B1 + B2 + B3) * C: (1+7)*2, 5*2, 0, 4*2; 0; (3+1)*1, 0, 6*0, (4+1)*3 */
      tj_tensor *prod[] = {ops[0], ops[1], ops[2], ops[3], ops[4]};
      expect_run("A(i,j) = (B1(i,j) + B2(i,j) + B3(i,j)) * C(i,j)", prod, 5, NULL, threads,
                 phases, (double[]){16, 10, 0, 8, 0, 0, 0, 0, 4, 0, 0, 15}, 12, -1);
    }
  free_all(ops, 5);
}
END_TEST

/* A root sum over a union adds the union's terms into its temp one loop
 * nest each (sum_j (B1 + B2) = sum_j B1 + sum_j B2), += into a dense
 * output drains the workspace by adding, a mask splits over the terms
 * under it, and a semiring's add adds the terms (min.plus), by hand on
 * the matrices above. */
START_TEST(test_summed_union_by_hand) {
  const double b1[] = {1, 0, 0, 2, 0, 0, 0, 0, 3, 0, 0, 4};
  const double b2[] = {0, 5, 0, 2, 0, 0, 0, 0, 0, 0, 6, 0};
  const double b3[] = {7, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1};
  const double c[] = {2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 3};
  const double x[] = {1, 2, 3, 4};
  const double ones[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  tj_tensor *ops[] = {vector("y", "d", 3, NULL), matrix("B1", "ds", 3, 4, b1),
                      matrix("B2", "ds", 3, 4, b2), matrix("B3", "ds", 3, 4, b3),
                      matrix("C", "ds", 3, 4, c), vector("x", "d", 4, x),
                      vector("ys", "s", 3, NULL), tensor("a", "", 0, NULL, NULL)};
  for (int threads = 1; threads <= 2; threads++)
    for (int phases = 0; phases < 2; phases++) {
      /* rows of B1 - B2 + 2 B3: 15 - 5 + 0 + 0; 0; 5 + 0 - 6 + 6 */
      expect_run("y(i) = B1(i,j) - B2(i,j) + 2 * B3(i,j)", ops, 4, NULL, threads, phases,
                 (double[]){10, 0, 5}, 3, -1);
      /* (B1 + B2 + B3) x: 8*1 + 5*2 + 0*3 + 4*4; 0; 4*1 + 0*2 + 6*3 + 5*4 */
      tj_tensor *mv[] = {ops[0], ops[1], ops[2], ops[3], ops[5]};
      expect_run("y(i) = (B1(i,j) + B2(i,j) + B3(i,j)) * x(j)", mv, 5, NULL, threads, phases,
                 (double[]){34, 0, 42}, 3, -1);
      /* into a sparse vector: the row loop is dense, so row 1 is stored (0) */
      tj_tensor *sv[] = {ops[6], ops[1], ops[2], ops[3], ops[5]};
      expect_run("ys(i) = (B1(i,j) + B2(i,j) + B3(i,j)) * x(j)", sv, 5, NULL, threads, phases,
                 (double[]){34, 0, 42}, 3, 3);
      /* every entry of (B1 + B2 + B3) * C: 16 + 10 + 0 + 8, 0, 4 + 0 + 0 + 15 */
      tj_tensor *sc[] = {ops[7], ops[1], ops[2], ops[3], ops[4]};
      expect_run("a = (B1(i,j) + B2(i,j) + B3(i,j)) * C(i,j)", sc, 5, NULL, threads, phases,
                 (double[]){53}, 1, -1);
      /* += over ones: 1 + (15, -5, 0, 0; 0 0 0 0; 5, 0, -6, 6) */
      tj_tensor *acc[] = {matrix("A", "dd", 3, 4, ones), ops[1], ops[2], ops[3]};
      expect_run("A(i,j) += B1(i,j) - B2(i,j) + 2 * B3(i,j)", acc, 4, NULL, threads, phases,
                 (double[]){16, -4, 1, 1, 1, 1, 1, 1, 6, 1, -5, 7}, 12, -1);
      tj_tensor_free(acc[0]);
      /* min.plus: absent is +inf; the union's entries are their minimum */
      const double inf = INFINITY;
      tj_tensor *dn[] = {matrix("A", "dd", 3, 4, NULL), ops[1], ops[2], ops[3], ops[4]};
      expect_run("A(i,j) = B1(i,j) + B2(i,j) + B3(i,j)", dn, 4, "min.plus", threads, phases,
                 (double[]){1, 5, inf, 2, inf, inf, inf, inf, 1, inf, 6, 1}, 12, -1);
      /* (B1 + B2 + B3) + C where both hold entries: 1+2, 5+2, -, 2+2; -; 1+1, -, -, 1+3 */
      expect_run("A(i,j) = (B1(i,j) + B2(i,j) + B3(i,j)) * C(i,j)", dn, 5, "min.plus", threads,
                 phases, (double[]){3, 7, inf, 4, inf, inf, inf, inf, 2, inf, inf, 4}, 12, -1);
      tj_tensor_free(dn[0]);
      /* mask(C, .) keeps B1 - B2 + 2 B3 (15, -5, -, 0; -; 5, -, -6, 6) where C has an
       * entry (row 0, and row 2 but column 2): 5 entries, (0,3) a stored 0;
       * except(C, .) keeps the rest: -6 at (2,2) */
      tj_tensor *mk[] = {matrix("A", "ds", 3, 4, NULL), ops[4], ops[1], ops[2], ops[3]};
      expect_run("A(i,j) = mask(C(i,j), B1(i,j) - B2(i,j) + 2 * B3(i,j))", mk, 5, NULL, threads,
                 phases, (double[]){15, -5, 0, 0, 0, 0, 0, 0, 5, 0, 0, 6}, 12, 5);
      tj_tensor_free(mk[0]);
      mk[0] = matrix("A", "dd", 3, 4, NULL);
      expect_run("A(i,j) = except(C(i,j), B1(i,j) - B2(i,j) + 2 * B3(i,j))", mk, 5, NULL,
                 threads, phases, (double[]){0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -6, 0}, 12, -1);
      tj_tensor_free(mk[0]);
      /* min over j of the union's entry + x(j): min(1+1, 5+2, 2+4); -; min(1+1, 6+3, 1+4) */
      expect_run("y(i) = (B1(i,j) + B2(i,j) + B3(i,j)) * x(j)", mv, 5, "min.plus", threads,
                 phases, (double[]){2, inf, 2}, 3, -1);
    }
  free_all(ops, 8);
}
END_TEST

/* k = 3, 8 and 16 terms: B_q (5 x 7) holds q at the entries where
 * (7i + 3j + q) % 4 == 0; A = B_1 + ... + B_k (dense output, scattered),
 * y = (B_1 + ... + B_k) x (summed term by term), y += the same, and the
 * first two under min.plus, against plain loops. */
START_TEST(test_wide_unions_by_loops) {
  enum { M = 5, N = 7, KMAX = 16 };
  static double b[KMAX][M * N];
  double x[N], y0[M];
  for (int j = 0; j < N; j++) x[j] = j - 2.5;
  for (int i = 0; i < M; i++) y0[i] = 10 * i;
  for (int q = 0; q < KMAX; q++)
    for (int e = 0; e < M * N; e++) b[q][e] = (7 * (e / N) + 3 * (e % N) + q + 1) % 4 ? 0 : q + 1;
  static const int ks[] = {3, 8, 16};
  for (size_t t = 0; t < sizeof ks / sizeof *ks; t++) {
    int k = ks[t];
    tj_tensor *ops[KMAX + 2] = {NULL};
    char names[KMAX][8], sum[512] = "", e1[600], e2[600], e3[600];
    double want_a[M * N] = {0}, want_y[M], want_acc[M];
    for (int q = 0; q < k; q++) {
      snprintf(names[q], sizeof names[q], "B%d", q + 1);
      ops[q + 1] = matrix(names[q], "ds", M, N, b[q]);
      size_t used = strlen(sum);
      snprintf(sum + used, sizeof sum - used, "%sB%d(i,j)", q ? " + " : "", q + 1);
      for (int e = 0; e < M * N; e++) want_a[e] += b[q][e];
    }
    for (int i = 0; i < M; i++) {
      double s = 0;
      for (int j = 0; j < N; j++) s += want_a[i * N + j] * x[j];
      want_y[i] = s;
      want_acc[i] = y0[i] + s;
    }
    /* min.plus: the least stored entry of the B_q, +inf where none is;
     * min over j of that + x(j) */
    double min_a[M * N], min_y[M];
    for (int e = 0; e < M * N; e++) {
      min_a[e] = INFINITY;
      for (int q = 0; q < k; q++)
        if (b[q][e] != 0 && b[q][e] < min_a[e]) min_a[e] = b[q][e];
    }
    for (int i = 0; i < M; i++) {
      min_y[i] = INFINITY;
      for (int j = 0; j < N; j++)
        if (min_a[i * N + j] + x[j] < min_y[i]) min_y[i] = min_a[i * N + j] + x[j];
    }
    snprintf(e1, sizeof e1, "A(i,j) = %s", sum);
    snprintf(e2, sizeof e2, "y(i) = (%s) * x(j)", sum);
    snprintf(e3, sizeof e3, "y(i) += (%s) * x(j)", sum);
    ops[k + 1] = vector("x", "d", N, x);
    for (int threads = 1; threads <= 2; threads++)
      for (int phases = 0; phases < 2; phases++) {
        ops[0] = matrix("A", "dd", M, N, NULL);
        expect_run(e1, ops, k + 1, NULL, threads, phases, want_a, M * N, -1);
        tj_tensor_free(ops[0]);
        ops[0] = vector("y", "d", M, NULL);
        expect_run(e2, ops, k + 2, NULL, threads, phases, want_y, M, -1);
        tj_tensor_free(ops[0]);
        ops[0] = vector("y", "d", M, y0);
        expect_run(e3, ops, k + 2, NULL, threads, phases, want_acc, M, -1);
        tj_tensor_free(ops[0]);
        ops[0] = matrix("A", "dd", M, N, NULL);
        expect_run(e1, ops, k + 1, "min.plus", threads, phases, min_a, M * N, -1);
        tj_tensor_free(ops[0]);
        ops[0] = vector("y", "d", M, NULL);
        expect_run(e2, ops, k + 2, "min.plus", threads, phases, min_y, M, -1);
        tj_tensor_free(ops[0]);
      }
    for (int q = 1; q <= k + 1; q++) tj_tensor_free(ops[q]);
  }
}
END_TEST

/* TTV and TTM into CSF outputs that share B's level-0 positions: their
 * compute phase splits those positions across threads (LowerPlan.pos_rows;
 * TJ_PAR_MIN_WORK=0 so that this small B is split). B is 12 x 5 x 7 with
 * row 3 empty and row 5 stored only at j = 1; want by plain loops over
 * the dense B. D(j,k) stores rows 0, 2 and 4 only, so B * D has no row 5:
 * the output's rows are then not B's, and compute runs on one thread. An
 * output of dense rows under compressed ones ("sd") runs on one thread. */
START_TEST(test_shared_rows_by_hand) {
  enum { I = 12, J = 5, K = 7, R = 4 };
  static double B[I * J * K], c[K], D[J * K], C[R * K], ttv[I * J], ttv2[I * J], bd[I * J],
      ttm[I * J * R];
  for (int q = 0; q < I * J * K; q++) {
    int i = q / (J * K), j = q / K % J;
    bool stored = (q * 7 + 3) % 4 != 0 && i != 3 && (i != 5 || j == 1);
    B[q] = stored ? (double)((q * 13) % 9) - 4.5 : 0;
  }
  for (int k = 0; k < K; k++) c[k] = k + 1;
  for (int q = 0; q < J * K; q++) D[q] = q / K % 2 == 0 ? q % K - 2.5 : 0;
  for (int q = 0; q < R * K; q++) C[q] = (double)(q % 5) - 2;
  int64_t fibers = 0, nnz_bd = 0;
  for (int i = 0; i < I; i++)
    for (int j = 0; j < J; j++) {
      double t = 0, u = 0;
      bool fiber = false;
      for (int k = 0; k < K; k++) {
        double b = B[(i * J + j) * K + k];
        t += b * c[k], u += b * D[j * K + k];
        fiber |= b != 0;
      }
      ttv[i * J + j] = t, ttv2[i * J + j] = -2 * t, bd[i * J + j] = u;
      fibers += fiber;
      nnz_bd += fiber && j % 2 == 0;
      for (int r = 0; r < R; r++) {
        double w = 0;
        for (int k = 0; k < K; k++) w += B[(i * J + j) * K + k] * C[r * K + k];
        ttm[(i * J + j) * R + r] = w;
      }
    }
  char *saved = getenv("TJ_PAR_MIN_WORK") ? strdup(getenv("TJ_PAR_MIN_WORK")) : NULL;
  setenv("TJ_PAR_MIN_WORK", "0", 1);
  tj_tensor *Bt = tensor("B", "sss", 3, (int64_t[]){I, J, K}, B);
  tj_tensor *v[] = {matrix("A", "ss", I, J, NULL), Bt, vector("c", "d", K, c)};
  tj_tensor *vd[] = {v[0], Bt, matrix("D", "ss", J, K, D)};
  tj_tensor *m[] = {tensor("A", "sss", 3, (int64_t[]){I, J, R}, NULL), Bt,
                    matrix("C", "dd", R, K, C)};
  /* dense rows under compressed ones: no pos array to start a chunk from */
  tj_tensor *vsd[] = {matrix("A", "sd", I, J, NULL), Bt, v[2]};
  for (int threads = 1; threads <= 2; threads++)
    for (int phases = 0; phases < 2; phases++) {
      expect_run("A(i,j) = B(i,j,k) * c(k)", v, 3, NULL, threads, phases, ttv, I * J, fibers);
      expect_run("A(i,j) = -2 * B(i,j,k) * c(k)", v, 3, NULL, threads, phases, ttv2, I * J, -1);
      expect_run("A(i,j) = B(i,j,k) * D(j,k)", vd, 3, NULL, threads, phases, bd, I * J, nnz_bd);
      expect_run("A(i,j) = B(i,j,k) * c(k)", vsd, 3, NULL, threads, phases, ttv, I * J, -1);
      expect_run("A(i,j,k) = B(i,j,l) * C(k,l)", m, 3, NULL, threads, phases, ttm, I * J * R,
                 fibers * R);
    }
  if (saved) setenv("TJ_PAR_MIN_WORK", saved, 1);
  else unsetenv("TJ_PAR_MIN_WORK");
  free(saved);
  free_all(v, 3);
  tj_tensor_free(vd[2]);
  tj_tensor_free(vsd[0]);
  tj_tensor_free(m[0]);
  tj_tensor_free(m[2]);
}
END_TEST

/* TTM A(i,j,k) = B(i,j,l) * C(k,l) with k's extent past a vector: the
 * k loop is an outer vector loop around each fiber of B, C is read
 * through a transposed copy (converted to dd:1,0: tj_kernel_operand_format
 * says so) and a sparse output's leaf over k is appended at consecutive
 * positions (pOut_base); C stored dd:1,0 is read as stored, in the same
 * loop order. R = 8, 19 and 37 take the 8-lane tier, twice plus
 * a remainder, and the 32-lane tier plus a remainder. Outputs sss, ssd
 * and ddd, C stored dd or already dd:1,0, 1 and 2 threads, both phases,
 * with and without the copy; want by plain loops over the dense B. */
START_TEST(test_ttm_vector_layout_by_hand) {
  enum { I = 7, J = 5, L = 11, RMAX = 37 };
  static double B[I * J * L], C[RMAX * L], Ct[L * RMAX], want[I * J * RMAX];
  static const int Rs[] = {8, 19, 37};
  static const char *const outs[] = {"sss", "ssd", "ddd"};
  int64_t fibers = 0;
  for (int q = 0; q < I * J * L; q++) {
    int i = q / (J * L), j = q / L % J;
    B[q] = (q * 5 + 1) % 3 != 0 && i != 2 && (i != 4 || j == 3) ? (double)((q * 13) % 9) - 4.5 : 0;
  }
  for (int f = 0; f < I * J; f++) {
    bool any = false;
    for (int l = 0; l < L; l++) any |= B[f * L + l] != 0;
    fibers += any;
  }
  char *saved = getenv("TJ_PAR_MIN_WORK") ? strdup(getenv("TJ_PAR_MIN_WORK")) : NULL;
  setenv("TJ_PAR_MIN_WORK", "0", 1);
  tj_tensor *Bt = tensor("B", "sss", 3, (int64_t[]){I, J, L}, B);
  for (int r = 0; r < 3; r++) {
    int R = Rs[r];
    for (int q = 0; q < R * L; q++) C[q] = (double)((q * 7) % 11) - 5;
    for (int k = 0; k < R; k++)
      for (int l = 0; l < L; l++) Ct[l * R + k] = C[k * L + l];
    for (int i = 0; i < I; i++)
      for (int j = 0; j < J; j++)
        for (int k = 0; k < R; k++) {
          double w = 0;
          for (int l = 0; l < L; l++) w += B[(i * J + j) * L + l] * C[k * L + l];
          want[(i * J + j) * R + k] = w;
        }
    /* C(k,l) stored column by column: the values of Ct, read as C */
    tj_tensor *Cs[] = {matrix("C", "dd", R, L, C), NULL};
    tj_format cm;
    OK(tj_format_parse("dd:1,0", &cm));
    OK(tj_tensor_new("C", TJ_F64, 2, (int64_t[]){R, L}, &cm, &Cs[1]));
    for (int k = 0; k < R; k++)
      for (int l = 0; l < L; l++) OK(tj_tensor_insert(Cs[1], (int64_t[]){k, l}, Ct[l * R + k]));
    OK(tj_tensor_pack(Cs[1]));
    for (int o = 0; o < 3; o++)
      for (int c = 0; c < 2; c++) {
        tj_tensor *m[] = {tensor("A", outs[o], 3, (int64_t[]){I, J, R}, NULL), Bt, Cs[c]};
        /* with the copy, and without (the plain variant, reading C as
         * stored: TJ_LAYOUT_COPY_RATIO=0 deems every copy too large) */
        for (int plain = 0; plain < 2; plain++) {
          setenv("TJ_LAYOUT_COPY_RATIO", plain ? "0" : "1e9", 1);
          for (int threads = 1; threads <= 2; threads++)
            for (int phases = 0; phases < 2; phases++)
              expect_run("A(i,j,k) = B(i,j,l) * C(k,l)", m, 3, NULL, threads, phases, want,
                         I * J * R, o < 2 ? fibers * R : -1);
        }
        unsetenv("TJ_LAYOUT_COPY_RATIO");
        tj_context *cx;
        tj_kernel *k;
        tj_format f;
        int converted;
        char text[32];
        OK(tj_context_new(&cx));
        OK(tj_compile(cx, "A(i,j,k) = B(i,j,l) * C(k,l)", m, 3, NULL, NULL, &k));
        OK(tj_kernel_operand_format(k, "C", &f, &converted));
        tj_format_print(&f, text, sizeof text);
        ck_assert_msg(converted == (c == 0) && strcmp(text, "dd:1,0") == 0,
                      "C %s: read as %s, converted %d", c ? "dd:1,0" : "dd", text, converted);
        OK(tj_kernel_operand_format(k, "B", &f, &converted));
        ck_assert_int_eq(converted, 0);
        /* k outside l, no workspace, whichever way C is stored */
        char *cin = NULL;
        size_t len = 0;
        FILE *mf = open_memstream(&cin, &len);
        OK(tj_kernel_print(k, TJ_STAGE_CIN, mf));
        fclose(mf);
        ck_assert_msg(strstr(cin, "forall(k, forall(l,") && !strstr(cin, "where"),
                      "C %s, A %s: %s", c ? "dd:1,0" : "dd", outs[o], cin);
        free(cin);
        ck_assert_int_eq(tj_kernel_operand_format(k, "D", &f, &converted), TJ_ERR_INVALID);
        ck_assert_str_eq(tj_last_error(), "tj_kernel_operand_format: the kernel has no tensor D");
        tj_context_free(cx);
        tj_tensor_free(m[0]);
      }
    free_all(Cs, 2);
  }
  if (saved) setenv("TJ_PAR_MIN_WORK", saved, 1);
  else unsetenv("TJ_PAR_MIN_WORK");
  free(saved);
  tj_tensor_free(Bt);
}
END_TEST

/* A sparse vector's one level appended by a dense loop: y(k) = B(k,l) *
 * x(l) into y "s", B dense 21 x 6 with rows 3 and 9 zero: every k is
 * stored (the plain sum keeps explicit zeros), at consecutive positions
 * from the loop's start, values by plain loops. */
START_TEST(test_dense_leaf_vector_by_hand) {
  enum { K = 21, L = 6 };
  double B[K * L], x[L], want[K];
  for (int q = 0; q < K * L; q++) B[q] = q / L == 3 || q / L == 9 ? 0 : (double)(q % 7) - 3;
  for (int l = 0; l < L; l++) x[l] = l - 2.5;
  for (int k = 0; k < K; k++) {
    want[k] = 0;
    for (int l = 0; l < L; l++) want[k] += B[k * L + l] * x[l];
  }
  tj_tensor *ops[] = {vector("y", "s", K, NULL), matrix("B", "dd", K, L, B), vector("x", "d", L, x)};
  for (int threads = 1; threads <= 2; threads++)
    for (int phases = 0; phases < 2; phases++)
      expect_run("y(k) = B(k,l) * x(l)", ops, 3, NULL, threads, phases, want, K, K);
  free_all(ops, 3);
}
END_TEST

/* Deterministic values with zeros in a pattern (every third entry). */
static void fill(double *v, int64_t n, int seed) {
  for (int64_t k = 0; k < n; k++)
    v[k] = (k * 7 + seed) % 3 == 0 ? 0 : (double)((k * 13 + seed * 5) % 11) - 5;
}

/* a(i) = B(i,j) * c(j) + d(i) on 60 x 50: B c + d by plain loops. */
START_TEST(test_spmv_plus_vector) {
  enum { M = 60, N = 50 };
  static double B[M * N], c[N], d[M], want[M];
  fill(B, M * N, 1);
  fill(c, N, 2);
  fill(d, M, 3);
  for (int i = 0; i < M; i++) {
    double s = 0;
    for (int j = 0; j < N; j++) s += B[i * N + j] * c[j];
    want[i] = s + d[i];
  }
  static const char *const fmts[] = {"ds", "ss", "ds:1,0", "dd"};
  for (int f = 0; f < 4; f++) {
    tj_tensor *ops[] = {vector("a", "d", M, NULL), matrix("B", fmts[f], M, N, B),
                        vector("c", f % 2 ? "s" : "d", N, c), vector("d", "d", M, d)};
    expect("a(i) = B(i,j) * c(j) + d(i)", ops, 4, want, M);
    free_all(ops, 4);
  }
}
END_TEST

/* A(i,j) = B(i,k) * C(k,j) + D(i,j): B C + D, dense past the cache
 * blocking (300 x 280 x 270) and sparse into CSR. */
START_TEST(test_gemm_plus_matrix) {
  static const struct { int m, n, k; const char *b, *c, *d, *a; } cases[] = {
      {300, 270, 280, "dd", "dd", "dd", "dd"}, {37, 29, 41, "ds", "ds", "ds", "ds"},
      {37, 29, 41, "ds", "dd", "dd", "dd"},    {23, 19, 17, "ss", "ds", "ds", "ds"}};
  for (size_t q = 0; q < sizeof cases / sizeof *cases; q++) {
    int M = cases[q].m, N = cases[q].n, K = cases[q].k;
    double *B = malloc(sizeof *B * (size_t)(M * K)), *C = malloc(sizeof *C * (size_t)(K * N));
    double *D = malloc(sizeof *D * (size_t)(M * N)), *want = malloc(sizeof *want * (size_t)(M * N));
    fill(B, M * K, 4);
    fill(C, K * N, 5);
    fill(D, M * N, 6);
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        double s = 0;
        for (int k = 0; k < K; k++) s += B[i * K + k] * C[k * N + j];
        want[i * N + j] = s + D[i * N + j];
      }
    tj_tensor *ops[] = {matrix("A", cases[q].a, M, N, NULL), matrix("B", cases[q].b, M, K, B),
                        matrix("C", cases[q].c, K, N, C), matrix("D", cases[q].d, M, N, D)};
    expect("A(i,j) = B(i,k) * C(k,j) + D(i,j)", ops, 4, want, (int64_t)M * N);
    free_all(ops, 4);
    free(B);
    free(C);
    free(D);
    free(want);
  }
}
END_TEST

/* Where each sum goes, by hand on small vectors. */
START_TEST(test_scopes_by_hand) {
  /* A = [[1 2] [3 4]], x = (1, 1), c = (10, 100), b = (1, 2) */
  double A[] = {1, 2, 3, 4}, x[] = {1, 1}, c[] = {10, 100}, b[] = {1, 2};
  tj_tensor *ops[] = {vector("y", "d", 2, NULL), matrix("A", "ds", 2, 2, A),
                      matrix("B", "ds", 2, 2, A), vector("x", "d", 2, x),
                      vector("c", "s", 2, c), vector("b", "d", 2, b)};
  /* j used in both terms: one sum over the whole rhs: A x + B x = (6, 14) */
  expect("y(i) = A(i,j) * x(j) + B(i,j) * x(j)", ops, 6, (double[]){6, 14}, 2);
  /* a product of sums keeps one sum: (A + B) c = (420, 860) */
  expect("y(i) = (A(i,j) + B(i,j)) * c(j)", ops, 6, (double[]){420, 860}, 2);
  /* b(i) scales the sum: b .* (A x) = (3, 14) */
  expect("y(i) = b(i) * A(i,j) * x(j)", ops, 6, (double[]){3, 14}, 2);
  /* nested: A (B x + c) = A (13, 107) = (227, 467) */
  expect("y(i) = A(i,j) * (B(j,k) * x(k) + c(j))", ops, 6, (double[]){227, 467}, 2);
  /* 2 A x - b = (5, 12) */
  expect("y(i) = 2 * A(i,j) * x(j) - b(i)", ops, 6, (double[]){5, 12}, 2);
  /* an index used once is summed over its access: b + row sums = (4, 9) */
  expect("y(i) = b(i) + A(i,j)", ops, 6, (double[]){4, 9}, 2);
  /* two sums side by side: A x - 2 B c = (3 - 420, 7 - 860) */
  expect("y(i) = sum(j, A(i,j) * x(j)) - 2 * sum(k, B(i,k) * c(k))", ops, 6,
         (double[]){-417, -853}, 2);
  /* sum(j, k, e) is sum(j, sum(k, e)): sum_jk A(j,k) c(k) b(i) = 1280 b(i) */
  expect("y(i) = b(i) * sum(j, k, A(j,k) * c(k))", ops, 6, (double[]){640, 1280}, 2);
  free_all(ops, 6);
  /* scalars: a = b . c * 2 + 1 = (10 + 200) * 2 + 1 */
  tj_tensor *s[] = {tensor("a", "", 0, NULL, NULL), vector("b", "d", 2, b),
                    vector("c", "s", 2, c)};
  expect("a = b(i) * c(i) * 2 + 1", s, 3, (double[]){421}, 1);
  expect("a = sum(i, b(i)) * sum(j, c(j))", s, 3, (double[]){330}, 1);
  free_all(s, 3);
}
END_TEST

/* Empty y, b (3), A (3 x 3 CSR), x (3) in ops, and a new context. */
static tj_context *residual_shapes(tj_tensor *ops[4]) {
  ops[0] = vector("y", "d", 3, NULL);
  ops[1] = vector("b", "d", 3, NULL);
  ops[2] = matrix("A", "ds", 3, 3, NULL);
  ops[3] = vector("x", "d", 3, NULL);
  tj_context *cx;
  OK(tj_context_new(&cx));
  return cx;
}

/* Every way of running one kernel: evaluate or assemble + compute, on one
 * and on two threads. */
static void expect_all(const char *expr, tj_tensor **ops, int nops, const char *semiring,
                       const double *want, int64_t n, int64_t nnz) {
  for (int t = 1; t <= 2; t++)
    for (int ph = 0; ph < 2; ph++) expect_run(expr, ops, nops, semiring, t, ph, want, n, nnz);
}

/* A = [[5 0 2 0] [0 0 0 0] [0 -1 0 0] [0 0 0 0]] (CSR, two empty rows),
 * x = (1, 10, 3, -2): reductions over the stored entries, by hand. */
START_TEST(test_reductions_by_hand) {
  double A[] = {5, 0, 2, 0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0, 0}, x[] = {1, 10, 3, -2};
  const double inf = INFINITY;
  static const char *const fmts[] = {"ds", "ss", "ds:1,0", "uq"};
  for (int f = 0; f < 4; f++) {
    for (int sparse = 0; sparse < 2; sparse++) {
      tj_tensor *ops[] = {vector("y", sparse ? "s" : "d", 4, NULL),
                          matrix("A", fmts[f], 4, 4, A), vector("x", "d", 4, x)};
      /* a dense output holds the identity where a row has nothing; a
       * sparse one no entry (which reads 0) */
      double e = sparse ? 0 : inf, ne = sparse ? 0 : -inf, one = sparse ? 0 : 1;
      int64_t nnz = sparse ? 2 : -1;
      expect_all("y(i) = reduce(min, j, A(i,j) * x(j))", ops, 3, NULL,
                 (double[]){5, e, -10, e}, 4, nnz);
      expect_all("y(i) = reduce(max, j, A(i,j))", ops, 3, NULL, (double[]){5, ne, -1, ne}, 4, nnz);
      expect_all("y(i) = reduce(*, j, A(i,j))", ops, 3, NULL, (double[]){10, one, -1, one}, 4, nnz);
      /* min.plus: min_j A(i,j) + x(j) over the stored A(i,j) */
      expect_all("y(i) = A(i,j) * x(j)", ops, 3, "min.plus", (double[]){5, e, 9, e}, 4, nnz);
      expect_all("y(i) = A(i,j) * x(j)", ops, 3, "max.times", (double[]){6, ne, -10, ne}, 4, nnz);
      expect_all("y(i) = A(i,j) * x(j)", ops, 3, "plus.pair", (double[]){2, 0, 1, 0}, 4, nnz);
      expect_all("y(i) = A(i,j) * x(j)", ops, 3, "or.and", (double[]){1, 0, 1, 0}, 4, nnz);
      free_all(ops, 3);
    }
    /* a reduction nested in an expression is its identity over nothing:
     * 1 + max_j A(i,j) x(j) = (1 + 6, -inf, 1 - 10, -inf) */
    tj_tensor *ops[] = {vector("y", "d", 4, NULL), matrix("A", fmts[f], 4, 4, A),
                        vector("x", "d", 4, x)};
    expect_all("y(i) = 1 + reduce(max, j, A(i,j) * x(j))", ops, 3, NULL,
               (double[]){7, -inf, -9, -inf}, 4, -1);
    free_all(ops, 3);
  }
}
END_TEST

/* A sum over one factor of a product covers the whole product only where
 * the semiring's mul distributes over its add. y(i) = A(i,j) * x(k) sums j
 * over A and k over x; by hand with A(0,0) = -1, A(0,1) = 5, A(1,1) = 2
 * (CSR) and x = (3, -4):
 *   plus.min  min(sum_j A, sum_k x):  (min(4, -1), min(2, -1)) = (-1, -1)
 *             (sum_j,k min(A, x) would be -1 - 4 + 3 - 4 = -6 and 2 - 4 = -2)
 *   min.times min_j A * min_k x: (-1 * -4, 2 * -4) = (4, -8)
 *             (min_j,k A x would be -20 and -8)
 *   max.times max_j A * max_k x: (5 * 3, 2 * 3) = (15, 6)
 *   plus.pair pair(sum_j A, sum_k x): (1, 1) (counting pairs: 4, 2)
 *   min.plus  min_j A + min_k x: (-1 - 4, 2 - 4) = (-5, -2) (distributes:
 *             one loop nest, the same values)
 * The first four are taken with A dense (sum_j A always has a term); over
 * a sparse A they are refused (below). */
START_TEST(test_semiring_sums_by_distributivity) {
  static const char *const fmts[] = {"ds", "ss", "uq", "dd"};
  for (int f = 0; f < 4; f++) {
    double A[] = {-1, 5, 0, 2};
    tj_tensor *ops[] = {vector("y", "d", 2, NULL), matrix("A", fmts[f], 2, 2, A),
                        vector("x", "d", 2, (double[]){3, -4})};
    bool dense = f == 3;   /* A(1,0) = 0 is then an entry */
    if (dense) {
      expect_all("y(i) = A(i,j) * x(k)", ops, 3, "plus.min", (double[]){-1, -1}, 2, -1);
      expect_all("y(i) = A(i,j) * x(k)", ops, 3, "min.times", (double[]){4, 0}, 2, -1);
      expect_all("y(i) = A(i,j) * x(k)", ops, 3, "max.times", (double[]){15, 6}, 2, -1);
      expect_all("y(i) = A(i,j) * x(k)", ops, 3, "plus.pair", (double[]){1, 1}, 2, -1);
    } else {
      /* sum_j A(i,j) over a sparse row may have no term, and the kernels
       * read its temporary as present (add's identity): with an empty
       * row 1, plus.min would give min(0, -1) = -1 where the product has
       * no entry (0). Refused with a message, on every such semiring. */
      static const char *const nondistributive[] = {"plus.min", "min.times", "max.times",
                                                    "plus.pair"};
      for (int q = 0; q < 4; q++) {
        tj_context *cx;
        OK(tj_context_new(&cx));
        tj_options o = tj_options_default();
        o.semiring = nondistributive[q];
        tj_kernel *k;
        ck_assert(tj_compile(cx, "y(i) = A(i,j) * x(k)", ops, 3, NULL, &o, &k) != TJ_OK);
        ck_assert_msg(strstr(tj_last_error(), "a product over a sum (over j)"), "%s: %s",
                      nondistributive[q], tj_last_error());
        tj_context_free(cx);
      }
    }
    expect_all("y(i) = A(i,j) * x(k)", ops, 3, "min.plus", (double[]){-5, dense ? -4 : -2}, 2, -1);
    free_all(ops, 3);
  }
}
END_TEST

/* An operand the loops read in another format keeps every stored entry,
 * the zeros of a dense level below a compressed one included: T is 4 x 3
 * `sd` with rows 1 = (0, 0, 2) and 3 = (0, 2, 0) stored, so
 * y(l) = reduce(min, j, T(j,l)) = (0, 0, 0) by hand, in T's order and in
 * the order l, j that reads a converted copy (it dropped the stored zeros:
 * (inf, 2, 2)); under min.plus, y(l) = T(j,l) * x(j) with x = (5, 1, 7, 3)
 * is min over the stored rows: (min(1, 3), min(1, 5), min(3, 3)) = (1, 1, 3),
 * and under max.plus (max(1, 3), max(1, 5), max(3, 3)) = (3, 5, 3): the copy
 * for l, j was sd:1,0, whose stored columns hold every row, so the unstored
 * row 2 (x = 7) gave (7, 7, 7) (random_schedules seed 511); it is ss:1,0. */
START_TEST(test_converted_operand_keeps_stored_zeros) {
  static const char *const scheds[] = {NULL, "reorder(l, j)"};
  for (int s = 0; s < 2; s++) {
    tj_tensor *ops[] = {vector("y", "d", 3, NULL),
                        matrix("T", "sd", 4, 3, (double[]){0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 2, 0}),
                        vector("x", "d", 4, (double[]){5, 1, 7, 3})};
    ck_assert_int_eq(tj_tensor_nnz(ops[1]), 6);
    static const struct { const char *expr, *semiring; double want[3]; } cs[] = {
        {"y(l) = reduce(min, j, T(j,l))", NULL, {0, 0, 0}},
        {"y(l) = T(j,l) * x(j)", "min.plus", {1, 1, 3}},
        {"y(l) = T(j,l) * x(j)", "max.plus", {3, 5, 3}}};
    for (int c = 0; c < 3; c++) {
      tj_context *cx;
      OK(tj_context_new(&cx));
      tj_options o = tj_options_default();
      o.semiring = cs[c].semiring;
      tj_kernel *k;
      OK(tj_compile(cx, cs[c].expr, ops, 3, scheds[s], &o, &k));
      OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
      for (int64_t l = 0; l < 3; l++) {
        double got;
        OK(tj_tensor_get(ops[0], &l, &got));
        ck_assert_msg(got == cs[c].want[l], "%s [%s]: y(%lld) = %g, want %g", cs[c].expr,
                      scheds[s] ? scheds[s] : "", (long long)l, got, cs[c].want[l]);
      }
      tj_context_free(cx);
    }
    free_all(ops, 3);
  }
}
END_TEST

/* min.plus and max reductions on 300 x 200 with empty rows, against plain
 * loops, through the parallel row paths. */
START_TEST(test_reductions_larger) {
  enum { M = 300, N = 200 };
  static double A[M * N], x[N], minplus[M], maxrow[M], sp_minplus[M], sp_maxrow[M];
  fill(A, M * N, 7);
  fill(x, N, 8);
  for (int i = 0; i < M; i += 7)
    for (int j = 0; j < N; j++) A[i * N + j] = 0; /* empty rows */
  int64_t reached = 0;
  for (int i = 0; i < M; i++) {
    double mp = INFINITY, mx = -INFINITY;
    for (int j = 0; j < N; j++) {
      if (A[i * N + j] == 0) continue;
      if (A[i * N + j] + x[j] < mp) mp = A[i * N + j] + x[j];
      if (A[i * N + j] > mx) mx = A[i * N + j];
    }
    minplus[i] = mp, maxrow[i] = mx;
    sp_minplus[i] = isinf(mp) ? 0 : mp, sp_maxrow[i] = isinf(mx) ? 0 : mx;
    reached += !isinf(mp);
  }
  for (int sparse = 0; sparse < 2; sparse++) {
    tj_tensor *ops[] = {vector("y", sparse ? "s" : "d", M, NULL), matrix("A", "ds", M, N, A),
                        vector("x", "d", N, x)};
    expect_all("y(i) = A(i,j) * x(j)", ops, 3, "min.plus", sparse ? sp_minplus : minplus, M,
               sparse ? reached : -1);
    expect_all("y(i) = reduce(max, j, A(i,j))", ops, 3, NULL, sparse ? sp_maxrow : maxrow, M,
               sparse ? reached : -1);
    free_all(ops, 3);
  }
  /* CSC: the outer loop is the reduction, chunked over two threads into
   * partial outputs that combine by max */
  tj_tensor *csc[] = {vector("y", "d", M, NULL), matrix("A", "ds:1,0", M, N, A)};
  expect_all("y(i) = reduce(max, j, A(i,j))", csc, 2, NULL, maxrow, M, -1);
  free_all(csc, 2);
  /* and by or / and (partials combined by or / and): x has zeros, so a
   * row is 0 under `and` where it stores an entry in a zero column */
  double *anyrow = malloc(sizeof(double) * M), *allrow = malloc(sizeof(double) * M);
  for (int j = 0; j < N; j += 5) x[j] = 0;
  for (int i = 0; i < M; i++) {
    anyrow[i] = 0, allrow[i] = 1;
    for (int j = 0; j < N; j++)
      if (A[i * N + j] != 0) anyrow[i] = anyrow[i] || x[j] != 0, allrow[i] = allrow[i] && x[j] != 0;
  }
  tj_tensor *cscx[] = {vector("y", "d", M, NULL), matrix("A", "ds:1,0", M, N, A),
                       vector("x", "d", N, x)};
  expect_all("y(i) = reduce(or, j, A(i,j) * x(j))", cscx, 3, NULL, anyrow, M, -1);
  expect_all("y(i) = reduce(and, j, A(i,j) * x(j))", cscx, 3, NULL, allrow, M, -1);
  free_all(cscx, 3);
  free(anyrow), free(allrow);
}
END_TEST

/* Compiling expr (schedule sched, options o) over the residual shapes
 * fails with a message containing msg. */
static void expect_refused(const char *expr, const char *sched, const tj_options *o,
                           const char *msg) {
  tj_tensor *ops[4];
  tj_context *cx = residual_shapes(ops);
  tj_kernel *k;
  ck_assert(tj_compile(cx, expr, ops, 4, sched, o, &k) != TJ_OK);
  ck_assert_msg(strstr(tj_last_error(), msg), "%s: got \"%s\"", expr, tj_last_error());
  tj_context_free(cx);
  free_all(ops, 4);
}

/* Reductions and semirings that have no meaning are refused. */
START_TEST(test_reduction_errors) {
  static const struct { const char *expr, *semiring, *msg; } cases[] = {
      {"y(i) = reduce(-, j, A(i,j))", NULL, "expected a reduction operator"},
      {"y(i) = reduce(sqrt, j, A(i,j))", NULL, "expected a reduction operator"},
      {"y(i) = reduce(min, i, A(i,j))", NULL, "reduce(min, i, ...): i indexes the output"},
      {"y(i) = b(i) - A(i,j) * x(j)", "min.plus", "'-' has no meaning under the semiring min.plus"},
      {"y(i) = A(i,j) * x(j)", "min.foo", "unknown semiring 'min.foo'"},
  };
  for (size_t q = 0; q < sizeof cases / sizeof *cases; q++) {
    tj_options o = tj_options_default();
    o.semiring = cases[q].semiring;
    expect_refused(cases[q].expr, NULL, &o, cases[q].msg);
  }
}
END_TEST

/* Compiles and evaluates expr under the definitions defs, comparing with
 * want (n values). */
static void expect_defs(const char *expr, const char *defs, tj_tensor **ops, int nops,
                        const double *want, int64_t n) {
  tj_options o = tj_options_default();
  o.defs = defs;
  expect_opts(expr, ops, nops, &o, false, want, n, -1);
}

/* User-defined operators, inlined: values by hand, sparsity from the body. */
START_TEST(test_defs_by_hand) {
  /* A = [[5 0 2 0] [0 -1 0 7] [0 0 0.5 0]], x = (1, 10, 3, -2) */
  double A[] = {5, 0, 2, 0, 0, -1, 0, 7, 0, 0, 0.5, 0}, x[] = {1, 10, 3, -2};
  static const char *const fmts[] = {"ds", "ss", "ds:1,0", "uq", "dd"};
  const char *defs = "relu(x) = max(x, 0); sq(x) = x * x; hyp(a, b) = sqrt(sq(a) + sq(b))";
  for (int f = 0; f < 5; f++) {
    tj_tensor *ops[] = {vector("y", "d", 3, NULL), matrix("A", fmts[f], 3, 4, A),
                        vector("x", "d", 4, x)};
    /* relu(A) x = (5 + 6, 7 (-2), 1.5) */
    expect_defs("y(i) = relu(A(i,j)) * x(j)", defs, ops, 3, (double[]){11, -14, 1.5}, 3);
    /* relu(A) sq(x) = (5 + 18, 28, 4.5) */
    expect_defs("y(i) = relu(A(i,j)) * sq(x(j))", defs, ops, 3, (double[]){23, 28, 4.5}, 3);
    free_all(ops, 3);
  }
  tj_tensor *v[] = {vector("y", "d", 3, NULL), vector("b", "s", 3, (double[]){3, 0, -5}),
                    vector("c", "d", 3, (double[]){4, 2, 12})};
  /* hyp(b, c) = sqrt(b^2 + c^2): (5, 2, 13) */
  expect_defs("y(i) = hyp(b(i), c(i))", defs, v, 3, (double[]){5, 2, 13}, 3);
  /* an argument used twice is copied: sq(b + c) = (49, 4, 49) */
  expect_defs("y(i) = sq(b(i) + c(i))", defs, v, 3, (double[]){49, 4, 49}, 3);
  free_all(v, 3);
  /* cases: b = (3, _, -5), c = (_, 2, 12) stored; f = x * y where both,
   * x where only b, 10 y where only c: (3, 20, -60); g has no right case:
   * (3, absent, -60), 0 in a dense output */
  const char *cdefs = "f(x, y) = x * y left x right 10 * y; g(x, y) = x * y left x";
  tj_tensor *w[] = {vector("y", "d", 3, NULL), vector("b", "s", 3, (double[]){3, 0, -5}),
                    vector("c", "s", 3, (double[]){0, 2, 12})};
  expect_defs("y(i) = f(b(i), c(i))", cdefs, w, 3, (double[]){3, 20, -60}, 3);
  expect_defs("y(i) = g(b(i), c(i))", cdefs, w, 3, (double[]){3, 0, -60}, 3);
  free_all(w, 3);
  /* reduction operators by definition, over the stored A(i,j) x(j), from
   * the declared identity: amax = (6, 14, 1.5) over rows (5 6 | -10 -14 |
   * 1.5); a sum of squares ss = (61, 296, 2.25); in every format */
  const char *rdefs = "amax(x, y) = max(abs(x), abs(y)) identity 0;"
                      "ss(x, y) = x + y * y identity 0";
  for (int f = 0; f < 5; f++) {
    tj_tensor *ops[] = {vector("y", "d", 3, NULL), matrix("A", fmts[f], 3, 4, A),
                        vector("x", "d", 4, x)};
    expect_defs("y(i) = reduce(amax, j, A(i,j) * x(j))", rdefs, ops, 3,
                (double[]){6, 14, 1.5}, 3);
    expect_defs("y(i) = reduce(ss, j, A(i,j) * x(j))", rdefs, ops, 3,
                (double[]){61, 296, 2.25}, 3);
    free_all(ops, 3);
  }
}
END_TEST

/* A two-way intersection whose fibers differ 32x or more in length
 * searches the longer one (gallop) instead of merging: values by hand.
 * Row 0: A has 70 entries (even j), B j = 3 (a miss before a hit) and 4;
 * row 1: B has 70 (odd j), A j = 51 (hit) and 149 (past B's last); row 2:
 * A as row 0, B j = 137 and 138 (A's last); row 3: one entry each (a
 * merge). A(i,j) = j + 1, B = 10. */
START_TEST(test_gallop_intersection_by_hand) {
  enum { R = 4, C = 150 };
  static double a[R * C], b[R * C];
  memset(a, 0, sizeof a), memset(b, 0, sizeof b);
  for (int j = 0; j < 140; j += 2) a[j] = a[2 * C + j] = j + 1, b[C + j + 1] = 10;
  b[3] = b[4] = b[2 * C + 137] = b[2 * C + 138] = 10;
  a[C + 51] = 52, a[C + 149] = 150;
  a[3 * C + 3] = 4, b[3 * C + 3] = 10;
  static const char *const fmts[] = {"ds", "ss", "uq"};
  for (int f = 0; f < 3; f++)
    for (int threads = 1; threads <= 2; threads++) {
      tj_tensor *ops[] = {vector("y", "d", R, NULL), matrix("A", fmts[f], R, C, a),
                          matrix("B", fmts[f], R, C, b)};
      expect_run("y(i) = A(i,j) * B(i,j)", ops, 3, NULL, threads, false,
                 (double[]){50, 520, 1390, 40}, R, -1);
      expect_run("y(i) = A(i,j) * B(i,j)", ops, 3, "plus.pair", threads, false,
                 (double[]){1, 1, 1, 1}, R, -1);
      free_all(ops, 3);
      static double want[R * C];
      memset(want, 0, sizeof want);
      want[4] = 50, want[C + 51] = 520, want[2 * C + 138] = 1390, want[3 * C + 3] = 40;
      tj_tensor *m[] = {matrix("Z", "ds", R, C, NULL), matrix("A", fmts[f], R, C, a),
                        matrix("B", fmts[f], R, C, b)};
      for (int two = 0; two < 2; two++)
        expect_run("Z(i,j) = A(i,j) * B(i,j)", m, 3, NULL, threads, two, want, R * C, 4);
      free_all(m, 3);
    }
}
END_TEST

/* pow, the operator added as one row of ir/ops.def (plus its loop-IR
 * operation): values by hand. Its table algebra is dense (pow(0, 0) = 1),
 * so an absent b reads 0 and pow(0, 0) is stored; at a literal exponent
 * its values say pow(b, 2) is absent where b is, pow(2, b) nowhere. */
START_TEST(test_pow_by_hand) {
  const double b[] = {2, 0, 3, 0}, c[] = {3, 0, 2, 0.5};
  for (int two = 0; two < 2; two++)
    for (int threads = 1; threads <= 2; threads++) {
      tj_tensor *ops[] = {vector("y", "s", 4, NULL), vector("b", "s", 4, b),
                          vector("c", "d", 4, c)};
      /* (2^3, 0^0, 3^2, 0^0.5) */
      expect_run("y(i) = pow(b(i), c(i))", ops, 3, NULL, threads, two, (double[]){8, 1, 9, 0},
                 4, 4);
      expect_run("y(i) = pow(b(i), 2.0)", ops, 3, NULL, threads, two, (double[]){4, 0, 9, 0},
                 4, 2);
      expect_run("y(i) = pow(2.0, b(i)) - 1", ops, 3, NULL, threads, two,
                 (double[]){3, 0, 7, 0}, 4, 4);
      /* under min.plus absent entries are +inf and pow(inf, inf) = inf: a
       * union (nt_op_algebra), +inf where b is absent */
      expect_run("y(i) = pow(b(i), 2.0)", ops, 3, "min.plus", threads, two,
                 (double[]){4, INFINITY, 9, INFINITY}, 4, -1);
      free_all(ops, 3);
    }
  /* a dense f64 vector long enough to be vectorized, against libm */
  enum { N = 37 };
  double x[N], e[N], want[N];
  for (int i = 0; i < N; i++) {
    x[i] = 0.25 + i * 0.5, e[i] = -1.5 + i * 0.125;
    want[i] = pow(x[i], e[i]);
  }
  tj_tensor *d[] = {vector("y", "d", N, NULL), vector("x", "d", N, x), vector("e", "d", N, e)};
  expect("y(i) = pow(x(i), e(i))", d, 3, want, N);
  free_all(d, 3);
}
END_TEST

/* Whether kernel k's stage printout contains text. */
static bool stage_has(const tj_kernel *k, tj_stage st, const char *pass, const char *text) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ck_assert(f);
  OK(pass ? tj_kernel_print_after(k, pass, f) : tj_kernel_print(k, st, f));
  fclose(f);
  bool has = strstr(buf, text) != NULL;
  free(buf);
  return has;
}

/* A reduction by a definition that declares itself commutative and
 * associative is the root reduction: vectorized (a fold in the loop IR),
 * and split across threads with partials combined by the definition.
 * Values: log-sum-exp computed here in long double, in index order. */
START_TEST(test_def_reduction_reorders) {
  const char *defs = "lse(x, y) = log(exp(x) + exp(y)) identity -inf commutative associative";
  enum { N = 1003, M = 400, C = 7 };
  double *x = malloc(sizeof(double) * N), *A = calloc(M * C, sizeof(double));
  long double sum = 0, col[C] = {0};
  for (int i = 0; i < N; i++) x[i] = 3 * sin(i), sum += expl(x[i]);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < C; j++)
      if ((i * 3 + j) % 4 != 0) {
        A[i * C + j] = ((i * 7 + j * 3) % 11) / 4.0 - 1;
        if (A[i * C + j] == 0) A[i * C + j] = 0.125;
        col[j] += expl(A[i * C + j]);
      }
  double want_s = (double)logl(sum), want_y[C];
  for (int j = 0; j < C; j++) want_y[j] = (double)logl(col[j]);
  for (int threads = 1; threads <= 2; threads++) {
    tj_options o = tj_options_default();
    o.defs = defs;
    o.nthreads = threads;
    tj_tensor *v[] = {tensor("s", "", 0, NULL, NULL), vector("x", "d", N, x)};
    expect_opts("s = reduce(lse, i, x(i))", v, 2, &o, false, &want_s, 1, -1);
    free_all(v, 2);
    /* CSR walked by rows: the outer loop is the reduction (partials) */
    tj_tensor *m[] = {vector("y", "d", C, NULL), matrix("A", "ds", M, C, A)};
    expect_opts("y(j) = reduce(lse, i, A(i,j))", m, 2, &o, false, want_y, C, -1);
    free_all(m, 2);
  }
  /* an inner reduction loop split across 2 threads into per-thread
     partial outputs (each at the identity, -inf), folded by lse: every
     entry of a dense A, its zeros too */
  tj_context *cx;
  OK(tj_context_new(&cx));
  {
    double want_r[M];
    for (int i = 0; i < M; i++) {
      long double r = 0;
      for (int j = 0; j < C; j++) r += expl(A[i * C + j]);
      want_r[i] = (double)logl(r);
    }
    tj_options o = tj_options_default();
    o.defs = defs;
    o.nthreads = 2;
    tj_tensor *m[] = {vector("z", "d", M, NULL), matrix("A", "dd", M, C, A)};
    tj_kernel *k;
    OK(tj_compile(cx, "z(i) = reduce(lse, j, A(i,j))", m, 2, "parallelize(j, partials)", &o, &k));
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    for (int64_t i = 0; i < M; i++) {
      double v;
      OK(tj_tensor_get(m[0], &i, &v));
      ck_assert_msg(fabs(v - want_r[i]) <= 1e-12 * fabs(want_r[i]) + 1e-12,
                    "z(%lld) = %.17g, want %.17g", (long long)i, v, want_r[i]);
    }
    free_all(m, 2);
  }
  /* the root reduction, and its loop vectorized: a fold, in vector form */
  tj_options o = tj_options_default();
  o.defs = defs;
  tj_tensor *v[] = {tensor("s", "", 0, NULL, NULL), vector("x", "d", N, x)};
  tj_kernel *k;
  OK(tj_compile(cx, "s = reduce(lse, i, x(i))", v, 2, NULL, &o, &k));
  ck_assert(stage_has(k, TJ_STAGE_CIN, NULL, "s lse= x(i)"));
  ck_assert(stage_has(k, 0, "vectorize", "/* fold of w: commutative, associative"));
  ck_assert(stage_has(k, 0, "vectorize", "i_vend"));
  tj_context_free(cx);
  free_all(v, 2);
  free(x), free(A);
}
END_TEST

/* Definitions that cannot be called are refused with a message. */
START_TEST(test_def_errors) {
  static const struct { const char *defs, *expr, *msg; } cases[] = {
      {"max(x) = x", "y(i) = b(i)", "'max' is already a function"},
      {"f(x) = x + z", "y(i) = f(b(i))", "f: 'z' is not a parameter"},
      {"f(x) = x(i)", "y(i) = f(b(i))", "f: 'x' is not a parameter"},
      {"f(x, x) = x", "y(i) = b(i)", "f: parameter x twice"},
      {"f(x) = x * 2", "y(i) = f(b(i), b(i))", "f takes 1 argument"},
      {"g(x, y) = x - y", "y(i) = g(b(i))", "g takes 2 arguments"},
      {"f() = 1", "y(i) = b(i)", "f: a definition takes one or two parameters"},
      {"f(x, y) = x + y", "y(i) = reduce(f, j, A(i,j))", "reduce: f has no identity"},
      {"f(x) = x identity 0", "y(i) = b(i)", "f: only a definition of two parameters"},
      {"f(x, y) = x identity z", "y(i) = b(i)", "f: expected the identity (a number"},
      {"f(x, y) = x left y", "y(i) = b(i)", "f: the left case reads only x (y does not exist"},
      {"f(x) = x right x", "y(i) = b(i)", "f: only a definition of two parameters has a right"},
      {"f(x, y) = x left x; g(x, y) = f(x, y)", "y(i) = b(i)", "f: a definition with cases is "
       "called only in expressions"},
      /* declared laws are checked on sample values */
      {"ss(x, y) = x + y * y identity 0 commutative", "y(i) = b(i)",
       "ss is declared commutative, but ss(-2.5, -1) = -1.5 and ss(-1, -2.5) = 5.25"},
      {"ss(x, y) = x + y * y identity 0 associative", "y(i) = b(i)",
       "ss is declared associative, but ss(ss(-2.5, -2.5), -2.5) = 10"},
      {"f(x, y) = max(abs(x), abs(y)) identity 0 commutative associative", "y(i) = b(i)",
       "f's identity is 0, but f(-2.5, 0) = 2.5"},
      {"f(x, y) = x + y identity 0 commutative commutative", "y(i) = b(i)",
       "f: commutative twice"},
  };
  for (size_t q = 0; q < sizeof cases / sizeof *cases; q++) {
    tj_options o = tj_options_default();
    o.defs = cases[q].defs;
    expect_refused(cases[q].expr, NULL, &o, cases[q].msg);
  }
}
END_TEST

/* A sparse mask is structural: an entry it stores counts even when its
 * value is 0, whether the mask is co-iterated (y(i) = except(v(i), x(i)))
 * or, nested inside another loop, read as a 0/1 pattern (n(j) = except(v(j),
 * q(i) * A(i,j))). v stores (1, 0.0) and (3, 2.0). */
START_TEST(test_sparse_mask_is_structural) {
  tj_format s;
  OK(tj_format_parse("s", &s));
  int64_t four = 4;
  tj_tensor *v;
  OK(tj_tensor_new("v", TJ_F64, 1, &four, &s, &v));
  OK(tj_tensor_insert(v, (int64_t[]){1}, 0.0));
  OK(tj_tensor_insert(v, (int64_t[]){3}, 2.0));
  OK(tj_tensor_pack(v));
  tj_tensor *ops[] = {vector("y", "d", 4, NULL), v, vector("x", "d", 4, (double[]){1, 2, 3, 4})};
  /* x where v stores nothing: (1, 0, 3, 0) */
  expect("y(i) = except(v(i), x(i))", ops, 3, (double[]){1, 0, 3, 0}, 4);
  expect("y(i) = mask(v(i), x(i))", ops, 3, (double[]){0, 2, 0, 4}, 4);
  /* q = (1, 1, 0, 0), A = all ones: every j reached; v keeps 1 and 3 out */
  double ones[16];
  for (int k = 0; k < 16; k++) ones[k] = 1;
  tj_tensor *bfs[] = {vector("n", "s", 4, NULL), vector("q", "s", 4, (double[]){1, 1, 0, 0}),
                      matrix("A", "ds", 4, 4, ones), v};
  expect("n(j) = except(v(j), q(i) * A(i,j))", bfs, 4, (double[]){2, 0, 2, 0}, 4);
  /* a sparse operand nested in a loop but used as a value keeps its values:
   * y(i) = sum_j w(j) = 12 (not the count of w's entries) */
  tj_tensor *sum[] = {vector("y", "d", 4, NULL), vector("w", "s", 4, (double[]){0, 5, 0, 7})};
  expect("y(i) = w(j)", sum, 2, (double[]){12, 12, 12, 12}, 4);
  free_all(sum, 2);
  free_all(ops, 3);
  free_all(bfs, 3);
}
END_TEST

/* A vector of dtype dt in format fmt storing vals[i] where stored[i]
 * (explicit zeros too), through the double API. */
static tj_tensor *vector_of(const char *name, const char *fmt, tj_dtype dt, int64_t n,
                            const double *vals, const bool *stored) {
  tj_format f;
  OK(tj_format_parse(fmt, &f));
  tj_tensor *t;
  OK(tj_tensor_new(name, dt, 1, &n, &f, &t));
  for (int64_t i = 0; i < n && vals; i++)
    if (stored ? stored[i] : vals[i] != 0) OK(tj_tensor_insert(t, &i, vals[i]));
  OK(tj_tensor_pack(t));
  return t;
}

/* A mask may have another dtype than the expression (nonzero keeps, as
 * GraphBLAS casts a mask to bool): bool m stores true at 0 and 2 and an
 * explicit false at 3. Sparse, it is structural (0, 2, 3 kept); dense, it
 * is valued (0 and 2 kept). x = (1, 2, 3, 4); A all ones, so A x = 10. */
START_TEST(test_masks_of_other_dtypes) {
  const double mv[] = {1, 0, 1, 0}, x[] = {1, 2, 3, 4};
  const bool ms[] = {true, false, true, true};
  double ones[16];
  for (int k = 0; k < 16; k++) ones[k] = 1;
  for (int dense = 0; dense < 2; dense++) {
    tj_tensor *ops[] = {vector("y", "d", 4, NULL),
                        vector_of("m", dense ? "d" : "s", TJ_BOOL, 4, mv, dense ? NULL : ms),
                        vector("x", "d", 4, x), matrix("A", "ds", 4, 4, ones)};
    expect_all("y(i) = mask(m(i), x(i))", ops, 3, NULL,
               dense ? (double[]){1, 0, 3, 0} : (double[]){1, 0, 3, 4}, 4, -1);
    expect_all("y(i) = except(m(i), x(i))", ops, 3, NULL,
               dense ? (double[]){0, 2, 0, 4} : (double[]){0, 2, 0, 0}, 4, -1);
    tj_tensor *spmv[] = {ops[0], ops[1], ops[3], ops[2]};
    expect_all("y(i) = mask(m(i), A(i,j) * x(j))", spmv, 4, NULL,
               dense ? (double[]){10, 0, 10, 0} : (double[]){10, 0, 10, 10}, 4, -1);
    free_all(ops, 4);
  }
  /* an f64 valued mask over an i32 expression: 0.5 keeps (not 0 in i32) */
  tj_tensor *iops[] = {vector_of("y", "d", TJ_I32, 4, NULL, NULL),
                       vector_of("w", "d", TJ_F64, 4, (double[]){0.5, 0, 0, 2}, NULL),
                       vector_of("b", "d", TJ_I32, 4, x, NULL)};
  expect_all("y(i) = mask(w(i), b(i))", iops, 3, NULL, (double[]){1, 0, 0, 4}, 4, -1);
  free_all(iops, 3);
  /* a BFS step over f64 under min.plus with a sparse bool visited set,
   * nested in the loop over i (read as a 0/1 pattern): q = (1, 1, _, _),
   * v stores 1 (true) and 3 (false): n = (2, _, 2, _) */
  tj_tensor *bfs[] = {vector("n", "s", 4, NULL), vector("q", "s", 4, (double[]){1, 1, 0, 0}),
                      matrix("A", "ds", 4, 4, ones),
                      vector_of("v", "s", TJ_BOOL, 4, (double[]){0, 1, 0, 0},
                                (bool[]){false, true, false, true})};
  expect_all("n(j) = except(v(j), q(i) * A(i,j))", bfs, 4, "min.plus", (double[]){2, 0, 2, 0},
             4, 2);
  /* the same with an f64 visited set: its pattern's 0 is absent, not
   * the semiring's zero (+inf) */
  tj_tensor_free(bfs[3]);
  bfs[3] = vector_of("v", "s", TJ_F64, 4, (double[]){0, 0, 0, 2}, (bool[]){false, true, false, true});
  expect_all("n(j) = except(v(j), q(i) * A(i,j))", bfs, 4, "min.plus", (double[]){2, 0, 2, 0},
             4, 2);
  free_all(bfs, 4);
  /* any other operand of another dtype is still refused */
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *bad[] = {vector("y", "d", 4, NULL), vector_of("m", "d", TJ_BOOL, 4, mv, NULL),
                      vector("x", "d", 4, x)};
  tj_kernel *k;
  ck_assert_int_eq(tj_compile(cx, "y(i) = mask(m(i), x(i) * m(i))", bad, 3, NULL, NULL, &k),
                   TJ_ERR_DTYPE);
  ck_assert_msg(strstr(tj_last_error(), "dtype mix f64 (x) and bool (m)"), "%s", tj_last_error());
  tj_context_free(cx);
  free_all(bad, 3);
}
END_TEST

/* A sparse mask read as a 0/1 pattern is kept between runs of a kernel
 * and rebuilt when its structure changes, also in place in arrays the
 * caller wrapped: the BFS step n(j) = except(v(j), q(i) * A(i,j)) with A
 * all ones and q = (1, 1, _, _) reaches every j (2 each) but v's. */
START_TEST(test_kept_mask_pattern) {
  double ones[16];
  for (int k = 0; k < 16; k++) ones[k] = 1;
  int32_t pos[2] = {0, 2}, crd[2] = {1, 3};
  double vals[2] = {1, 1};
  tj_format fs;
  OK(tj_format_parse("s", &fs));
  int64_t four = 4;
  tj_arrays arr = {.dtype = TJ_F64, .order = 1, .dims = &four, .fmt = &fs,
                   .pos = {pos}, .pos_len = {2}, .crd = {crd}, .crd_len = {2},
                   .vals = vals, .vals_len = 2};
  tj_tensor *v;
  OK(tj_tensor_wrap("v", &arr, 0, &v));
  tj_tensor *ops[] = {vector("n", "d", 4, NULL), vector("q", "s", 4, (double[]){1, 1, 0, 0}),
                      matrix("A", "ds", 4, 4, ones), v};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.nthreads = 1;
  tj_kernel *k;
  OK(tj_compile(cx, "n(j) = except(v(j), q(i) * A(i,j))", ops, 4, NULL, &o, &k));
  ck_assert(stage_has(k, TJ_STAGE_COMPUTE, NULL, "pattern"));
  static const double want[3][4] = {{2, 0, 2, 0}, {2, 0, 2, 0}, {0, 2, 2, 0}};
  for (int run = 0; run < 3; run++) {
    if (run == 2) crd[0] = 0;   /* v now stores 0 and 3: changed in place */
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    for (int64_t j = 0; j < 4; j++) {
      double got;
      OK(tj_tensor_get(ops[0], &j, &got));
      ck_assert_msg(got == want[run][j], "run %d: n(%lld) = %g, want %g", run, (long long)j,
                    got, want[run][j]);
    }
  }
  /* another mask tensor bound to the same kernel: its own pattern */
  tj_tensor *w = vector("v", "s", 4, (double[]){0, 0, 5, 0});
  tj_tensor *other[] = {ops[0], ops[1], ops[2], w};
  OK(tj_kernel_run(k, TJ_EVALUATE, other, 4));
  for (int64_t j = 0; j < 4; j++) {
    double got;
    OK(tj_tensor_get(ops[0], &j, &got));
    ck_assert(got == (j == 2 ? 0 : 2));
  }
  tj_context_free(cx);
  tj_tensor_free(w);
  free_all(ops, 4);
}
END_TEST

/* The concrete notation shows where each sum's loop runs. */
START_TEST(test_cin_where) {
  static const struct { const char *expr, *cin; } cases[] = {
      {"y(i) = b(i) - A(i,j) * x(j)",
       "forall(i, where(y(i) = b(i) - t_j, forall(j, t_j += A(i,j) * x(j))))"},
      {"y(i) = A(i,j) * x(j)", "forall(i, forall(j, y(i) += A(i,j) * x(j)))"},
      {"y(i) = (A(i,j) + A(i,j)) * x(j)", "forall(i, forall(j, y(i) += (A(i,j) + A(i,j)) * x(j)))"},
  };
  for (size_t q = 0; q < sizeof cases / sizeof *cases; q++) {
    tj_tensor *ops[4];
    tj_context *cx = residual_shapes(ops);
    tj_kernel *k;
    OK(tj_compile(cx, cases[q].expr, ops, 4, NULL, NULL, &k));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    OK(tj_kernel_print(k, TJ_STAGE_CIN, f));
    fclose(f);
    ck_assert_msg(strncmp(buf, cases[q].cin, strlen(cases[q].cin)) == 0, "%s: got %s",
                  cases[q].expr, buf);
    free(buf);
    tj_context_free(cx);
    free_all(ops, 4);
  }
}
END_TEST

/* Explicit sums that have no meaning, and schedules that would move a
 * sum's loop out of its scope, are refused with a message. */
START_TEST(test_sum_errors) {
  static const struct { const char *expr, *sched, *msg; } cases[] = {
      {"y(i) = sum(i, A(i,j) * x(j))", NULL, "sum(i, ...): i indexes the output"},
      {"y(i) = b(i) + sum(j, b(i))", NULL, "sum(j, ...): j does not occur"},
      {"y(i) = sum(j, A(i,j)) * x(j)", NULL, "index j is also used outside this reduction"},
      {"y(i) = sum(j, A(i,j)) + sum(j, A(i,j))", NULL, "reduced twice"},
      {"y(i) = b(i) - A(i,j) * x(j)", "reorder(j,i)", "its loop must stay inside"},
      {"y(i) = sum(j A(i,j))", NULL, "expected ',' and the expression to sum"},
  };
  for (size_t q = 0; q < sizeof cases / sizeof *cases; q++)
    expect_refused(cases[q].expr, cases[q].sched, NULL, cases[q].msg);
}
END_TEST

/* The builder spells the explicit sum too, and prints it back. */
START_TEST(test_builder_sum) {
  tj_builder *b;
  OK(tj_builder_new(&b));
  const char *i[] = {"i"}, *ij[] = {"i", "j"}, *j[] = {"j"};
  tj_expr *ax = tj_build_binary(b, '*', tj_build_access(b, "A", 2, ij), tj_build_access(b, "x", 1, j));
  tj_expr *rhs = tj_build_binary(b, '-', tj_build_access(b, "b", 1, i), tj_build_sum(b, "j", ax));
  OK(tj_builder_assign(b, tj_build_access(b, "y", 1, i), rhs, 0));
  char text[128];
  OK(tj_builder_print(b, text, sizeof text));
  ck_assert_str_eq(text, "y(i) = b(i) - sum(j, A(i,j) * x(j))");
  tj_tensor *ops[] = {vector("y", "d", 2, NULL), vector("b", "d", 2, (double[]){10, 20}),
                      matrix("A", "ds", 2, 2, (double[]){1, 0, 0, 1}),
                      vector("x", "d", 2, (double[]){1, 2})};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile_built(cx, b, ops, 4, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  double y1;
  OK(tj_tensor_get(ops[0], (int64_t[]){1}, &y1));
  ck_assert_double_eq(y1, 18);
  tj_context_free(cx);
  free_all(ops, 4);
  tj_builder_free(b);
}
END_TEST

/* Unions whose cases differ only in the value stored run as one store of
 * selects (lower/case_select.c), by hand: B alone, C alone and both in one
 * row, an empty row of B, into CSR, nonordered CSR and dense outputs, one
 * and two threads, evaluate and assemble + compute. Then SpGEMM into a
 * nonordered `do` output (columns in any order within a row): B(0,:) =
 * (1, 0, 2), B(2,:) = (0, 3, 0); C(0,:) = (0, 4, 0, 5), C(2,:) = (6, 0, 0,
 * 7), C(1,:) = (0, 0, 8, 0). */
START_TEST(test_union_selects_and_nonordered_by_hand) {
  double b[15] = {1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 4, 5};
  double c[15] = {0, 6, 7, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 9, 0};
  double sum[15] = {1, 6, 9, 0, 0, 8, 0, 0, 0, 0, 0, 3, 0, 13, 5};
  double diff[15] = {1, -6, -5, 0, 0, -8, 0, 0, 0, 0, 0, 3, 0, -5, 5};
  double twice[15] = {2, 6, 11, 0, 0, 8, 0, 0, 0, 0, 0, 6, 0, 17, 10};
  double pb[9] = {1, 0, 2, 0, 0, 0, 0, 3, 0};
  double pc[12] = {0, 4, 0, 5, 0, 0, 8, 0, 6, 0, 0, 7};
  double prod[12] = {12, 4, 0, 19, 0, 0, 0, 0, 0, 0, 24, 0};
  static const char *const outs[] = {"ds", "do", "dd"};
  for (int run = 0; run < 4; run++) {
    int threads = run % 2 ? 2 : 1;
    bool two = run >= 2;
    for (int f = 0; f < 3; f++) {
      int64_t nnz = f == 2 ? 15 : 7;
      tj_tensor *ops[3] = {matrix("A", outs[f], 3, 5, NULL), matrix("B", "ds", 3, 5, b),
                           matrix("C", "ds", 3, 5, c)};
      expect_run("A(i,j) = B(i,j) + C(i,j)", ops, 3, NULL, threads, two, sum, 15, nnz);
      expect_run("A(i,j) = B(i,j) - C(i,j)", ops, 3, NULL, threads, two, diff, 15, nnz);
      expect_run("A(i,j) = 2 * B(i,j) + C(i,j)", ops, 3, NULL, threads, two, twice, 15, nnz);
      free_all(ops, 3);
    }
    tj_tensor *mm[3] = {matrix("A", "do", 3, 4, NULL), matrix("B", "ds", 3, 3, pb),
                        matrix("C", "ds", 3, 4, pc)};
    expect_run("A(i,j) = B(i,k) * C(k,j)", mm, 3, NULL, threads, two, prod, 12, 4);
    free_all(mm, 3);
  }
}
END_TEST

/* A sparse add's one store of an add of selects (lower/case_select.c)
 * keeps every stored value exactly, by hand: an entry of one side alone
 * keeps a stored -0.0 (not +0.0 from adding 0) and a NaN; where both
 * store, the sum; in f64, f32 and i64, evaluate and assemble + compute.
 * Row 0: B = [-0, NaN, 1, .], C = [., 2, -0, -0]; row 1: B empty,
 * C = [., 5, ., .]; row 2: B = [7, ., ., 3], C empty. (Wrapped arrays:
 * pack would sum -0.0 into +0.0.) */
static tj_tensor *wrapped_csr(const char *name, tj_dtype dt, int32_t *pos, int32_t *crd,
                              const double *v, int n, void *vals) {
  for (int q = 0; q < n; q++) {
    if (dt == TJ_F64) ((double *)vals)[q] = v[q];
    else if (dt == TJ_F32) ((float *)vals)[q] = (float)v[q];
    else ((int64_t *)vals)[q] = isnan(v[q]) ? 11 : (int64_t)v[q];
  }
  static tj_format f;
  ck_assert_int_eq(tj_format_parse("ds", &f), TJ_OK);
  static const int64_t dims[2] = {3, 4};
  tj_arrays a = {.dtype = dt, .order = 2, .dims = dims, .fmt = &f, .vals = vals, .vals_len = n};
  a.pos[1] = pos, a.pos_len[1] = 4, a.crd[1] = crd, a.crd_len[1] = n;
  tj_tensor *t;
  ck_assert_msg(tj_tensor_wrap(name, &a, 0, &t) == TJ_OK, "%s", tj_last_error());
  return t;
}

/* The value stored at (i, j) of CSR t, read from its arrays (tj_tensor_get
 * would not tell -0.0 from an absent entry), as a double; NaN if absent. */
static double stored_at(tj_tensor *t, int64_t i, int64_t j) {
  tj_arrays a;
  ck_assert_int_eq(tj_tensor_arrays(t, &a), TJ_OK);
  const int32_t *pos = a.pos[1], *crd = a.crd[1];
  for (int32_t q = pos[i]; q < pos[i + 1]; q++) {
    if (crd[q] != j) continue;
    if (a.dtype == TJ_F64) return ((const double *)a.vals)[q];
    if (a.dtype == TJ_F32) return ((const float *)a.vals)[q];
    return (double)((const int64_t *)a.vals)[q];
  }
  ck_abort_msg("A(%lld,%lld) is not stored", (long long)i, (long long)j);
  return NAN;
}

START_TEST(test_sparse_add_keeps_signed_zeros_and_nans) {
  int32_t bp[] = {0, 3, 3, 5}, bc[] = {0, 1, 2, 0, 3}, cp[] = {0, 3, 4, 4}, cc[] = {1, 2, 3, 1};
  const double bv[] = {-0.0, NAN, 1, 7, 3}, cv[] = {2, -0.0, -0.0, 5};
  static const int64_t wi[][2] = {{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 1}, {2, 0}, {2, 3}};
  const double want[] = {-0.0, NAN, 1, -0.0, 5, 7, 3};
  const double want_int[] = {0, 13, 1, 0, 5, 7, 3};   /* NaN stored as 11 */
  static const tj_dtype dts[] = {TJ_F64, TJ_F32, TJ_I64};
  for (int d = 0; d < 3; d++)
    for (int two = 0; two < 2; two++) {
      int64_t bvals[5], cvals[4];   /* 8 bytes a value: room for every dtype */
      tj_format f;
      OK(tj_format_parse("ds", &f));
      int64_t dims[2] = {3, 4};
      tj_tensor *ops[3];
      OK(tj_tensor_new("A", dts[d], 2, dims, &f, &ops[0]));
      ops[1] = wrapped_csr("B", dts[d], bp, bc, bv, 5, bvals);
      ops[2] = wrapped_csr("C", dts[d], cp, cc, cv, 4, cvals);
      tj_context *cx;
      OK(tj_context_new(&cx));
      tj_kernel *k;
      OK(tj_compile(cx, "A(i,j) = B(i,j) + C(i,j)", ops, 3, NULL, NULL, &k));
      tu_run(k, two);
      ck_assert_int_eq(tj_tensor_nnz(ops[0]), 7);
      for (int q = 0; q < 7; q++) {
        double got, w = dts[d] == TJ_I64 ? want_int[q] : want[q];
        got = stored_at(ops[0], wi[q][0], wi[q][1]);
        ck_assert_msg(isnan(w) ? isnan(got) : got == w && signbit(got) == signbit(w),
                      "%s A(%lld,%lld) = %g, want %g", tj_dtype_name(dts[d]),
                      (long long)wi[q][0], (long long)wi[q][1], got, w);
      }
      tj_context_free(cx);
      free_all(ops, 3);
    }
}
END_TEST

/* Sparse outputs with dense levels below their last compressed one (a
 * block of values per stored fiber), by hand: TTM into `ssd`, SpMM into
 * `sd` (rows compressed, each stored row dense), one and two threads, one
 * evaluate and assemble + compute; a min reduction leaves its identity in
 * the stored block where nothing reached it. */
START_TEST(test_dense_tail_outputs_by_hand) {
  for (int run = 0; run < 4; run++) {
    int threads = run % 2 ? 2 : 1;
    bool two = run >= 2;
    /* B(0,1,0) = 1, B(0,1,1) = 2, B(1,2,1) = 3; C(k,l) = [[1,2],[3,4]]. */
    double b[12] = {0}, c[4] = {1, 2, 3, 4};
    b[0 * 6 + 1 * 2 + 0] = 1, b[0 * 6 + 1 * 2 + 1] = 2, b[1 * 6 + 2 * 2 + 1] = 3;
    tj_tensor *ops[3] = {tensor("A", "ssd", 3, (int64_t[]){2, 3, 2}, NULL),
                         tensor("B", "sss", 3, (int64_t[]){2, 3, 2}, b),
                         matrix("C", "dd", 2, 2, c)};
    double want[12] = {0};
    want[0 * 6 + 1 * 2 + 0] = 7, want[0 * 6 + 1 * 2 + 1] = 10; /* 1*(1,2) + 2*(3,4) */
    want[1 * 6 + 2 * 2 + 0] = 9, want[1 * 6 + 2 * 2 + 1] = 12; /* 3*(3,4) */
    expect_run("A(i,j,l) = B(i,j,k) * C(k,l)", ops, 3, NULL, threads, two, want, 12, 4);
    free_all(ops, 3);

    /* B(0,0) = 1, B(2,1) = 2: row 1 is empty. Stored as DCSR, row 1 is
     * absent from A; as CSR, a plain sum keeps it as explicit zeros (the
     * dense row loop reaches it, as TACO keeps them), a min reduction
     * stores only rows it reached. */
    double bm[6] = {1, 0, 0, 0, 0, 2}, cm[6] = {1, 2, 3, 4, 5, 6};
    double wmm[9] = {1, 2, 3, 0, 0, 0, 8, 10, 12};
    for (int f = 0; f < 2; f++) {
      tj_tensor *mm[3] = {matrix("A", "sd", 3, 3, NULL), matrix("B", f ? "ds" : "ss", 3, 2, bm),
                          matrix("C", "dd", 2, 3, cm)};
      expect_run("A(i,j) = B(i,k) * C(k,j)", mm, 3, NULL, threads, two, wmm, 9, f ? 9 : 6);
      expect_run("A(i,j) = reduce(min, k, B(i,k) * C(k,j))", mm, 3, NULL, threads, two, wmm, 9, 6);
      free_all(mm, 3);
    }
    /* COO outputs: B(0,1) = 1, B(2,0) = 2; C(0,1) = 3, C(1,2) = 4. */
    double bs[9] = {0, 1, 0, 0, 0, 0, 2, 0, 0}, cs[9] = {0, 3, 0, 0, 0, 4, 0, 0, 0};
    tj_tensor *coo[3] = {matrix("A", "uq", 3, 3, NULL), matrix("B", "ss", 3, 3, bs),
                         matrix("C", "uq", 3, 3, cs)};
    double wsum[9] = {0, 4, 0, 0, 0, 4, 2, 0, 0};
    expect_run("A(i,j) = B(i,j) + C(i,j)", coo, 3, NULL, threads, two, wsum, 9, 3);
    free_all(coo, 3);
  }
}
END_TEST

/* A vector of n values of dtype dt in format fmt from bits v (0: no entry). */
static tj_tensor *uvec(const char *name, const char *fmt, tj_dtype dt, int64_t n,
                       const uint64_t *v) {
  tj_format f;
  OK(tj_format_parse(fmt, &f));
  tj_tensor *t;
  OK(tj_tensor_new(name, dt, 1, &n, &f, &t));
  for (int64_t i = 0; v && i < n; i++) {
    if (!v[i]) continue;
    tj_status st = dt == TJ_U64 ? tj_tensor_insert_u64(t, &i, v[i])
                   : dt == TJ_U32 ? tj_tensor_insert_u32(t, &i, (uint32_t)v[i])
                   : dt == TJ_U16 ? tj_tensor_insert_u16(t, &i, (uint16_t)v[i])
                                  : tj_tensor_insert_u8(t, &i, (uint8_t)v[i]);
    OK(st);
  }
  OK(tj_tensor_pack(t));
  return t;
}

/* Runs expr over ops (ops[0] the output vector of n values) on both
 * backends, 1 and 2 threads, and compares every output value's bits with
 * want. */
static void expect_unsigned(const char *expr, tj_tensor **ops, int nops, const uint64_t *want,
                            int64_t n) {
  for (int run = 0; run < 4; run++) {
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_options o = tj_options_default();
    o.backend = run < 2 ? TJ_BACKEND_LLVM : TJ_BACKEND_C;
    o.nthreads = 1 + run % 2;
    tj_kernel *k;
    OK(tj_compile(cx, expr, ops, nops, NULL, &o, &k));
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    tj_dtype dt = tj_tensor_dtype(ops[0]);
    for (int64_t i = 0; i < n; i++) {
      uint64_t got = 0;
      if (dt == TJ_U64) OK(tj_tensor_get_u64(ops[0], &i, &got));
      if (dt == TJ_U32) { uint32_t g; OK(tj_tensor_get_u32(ops[0], &i, &g)); got = g; }
      if (dt == TJ_U16) { uint16_t g; OK(tj_tensor_get_u16(ops[0], &i, &g)); got = g; }
      if (dt == TJ_U8) { uint8_t g; OK(tj_tensor_get_u8(ops[0], &i, &g)); got = g; }
      ck_assert_msg(got == want[i], "%s [%s, %d threads]: element %lld is %llu, want %llu",
                    expr, run < 2 ? "llvm" : "c", o.nthreads, (long long)i,
                    (unsigned long long)got, (unsigned long long)want[i]);
    }
    tj_context_free(cx);
  }
}

/* Kernels in unsigned dtypes, values by hand: wrap-around of products and
 * sums, division, min and max as unsigned (a signed view of these bits
 * gives other answers), u64 above 2^63, reductions over nothing, and a
 * vectorized max reduction. */
START_TEST(unsigned_kernels) {
  /* u8: A = [200 100 | 255 0], x = (2, 1): 500 mod 256 = 244, 510 mod 256 = 254 */
  for (int f = 0; f < 2; f++) {
    tj_format fm;
    OK(tj_format_parse(f ? "ds" : "dd", &fm));
    tj_tensor *A;
    OK(tj_tensor_new("A", TJ_U8, 2, (int64_t[]){2, 2}, &fm, &A));
    OK(tj_tensor_insert_u8(A, (int64_t[]){0, 0}, 200));
    OK(tj_tensor_insert_u8(A, (int64_t[]){0, 1}, 100));
    OK(tj_tensor_insert_u8(A, (int64_t[]){1, 0}, 255));
    OK(tj_tensor_pack(A));
    tj_tensor *ops[] = {uvec("y", "d", TJ_U8, 2, NULL), A,
                        uvec("x", "d", TJ_U8, 2, (uint64_t[]){2, 1})};
    expect_unsigned("y(i) = A(i,j) * x(j)", ops, 3, (uint64_t[]){244, 254}, 2);
    /* min over row 1's stored entries is 255; max is unsigned */
    expect_unsigned("y(i) = reduce(max, j, A(i,j))", ops, 2, (uint64_t[]){200, 255}, 2);
    for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
  }
  /* u32: 4e9 / 3 = 1333333333, max(4e9, 3) = 4e9, min = 3; 4e9 + 4e9 wraps
   * to 8e9 - 2^32 = 3705032704 */
  const uint64_t b32[] = {4000000000u, 7}, c32[] = {3, 4000000000u};
  tj_tensor *v32[] = {uvec("y", "d", TJ_U32, 2, NULL), uvec("b", "d", TJ_U32, 2, b32),
                      uvec("c", "d", TJ_U32, 2, c32)};
  expect_unsigned("y(i) = b(i) / c(i)", v32, 3, (uint64_t[]){1333333333, 0}, 2);
  expect_unsigned("y(i) = max(b(i), c(i))", v32, 3, (uint64_t[]){4000000000u, 4000000000u}, 2);
  expect_unsigned("y(i) = min(b(i), c(i))", v32, 3, (uint64_t[]){3, 7}, 2);
  expect_unsigned("y(i) = b(i) + c(i)", v32, 3, (uint64_t[]){4000000003u, 4000000007u}, 2);
  expect_unsigned("y(i) = b(i) + b(i)", v32, 3, (uint64_t[]){3705032704u, 14}, 2);
  for (int t = 0; t < 3; t++) tj_tensor_free(v32[t]);
  /* u64 above 2^63: b = 2^63 + 10, c = 2^63 - 1 */
  const uint64_t hi = (UINT64_C(1) << 63) + 10, lo = (UINT64_C(1) << 63) - 1;
  tj_tensor *v64[] = {uvec("y", "d", TJ_U64, 2, NULL), uvec("b", "d", TJ_U64, 2, (uint64_t[]){hi, lo}),
                      uvec("c", "s", TJ_U64, 2, (uint64_t[]){lo, 0})};
  expect_unsigned("y(i) = b(i) / 2", v64, 2, (uint64_t[]){(UINT64_C(1) << 62) + 5, (UINT64_C(1) << 62) - 1}, 2);
  expect_unsigned("y(i) = b(i) + b(i)", v64, 2, (uint64_t[]){20, UINT64_MAX - 1}, 2);
  /* c(1) is absent: max(b, c) there is b (a union) */
  expect_unsigned("y(i) = max(b(i), c(i))", v64, 3, (uint64_t[]){hi, lo}, 2);
  expect_unsigned("y(i) = b(i) * c(i)", v64, 3, (uint64_t[]){
      (uint64_t)(hi * lo), 0}, 2);
  for (int t = 0; t < 3; t++) tj_tensor_free(v64[t]);
  /* a u16 sparse matrix's row reductions: row 1 is empty, so min over
   * nothing is 65535 and max over nothing 0 in a dense output */
  tj_format fm;
  OK(tj_format_parse("ds", &fm));
  tj_tensor *A;
  OK(tj_tensor_new("A", TJ_U16, 2, (int64_t[]){3, 3}, &fm, &A));
  OK(tj_tensor_insert_u16(A, (int64_t[]){0, 0}, 40000));
  OK(tj_tensor_insert_u16(A, (int64_t[]){0, 2}, 5));
  OK(tj_tensor_insert_u16(A, (int64_t[]){2, 1}, 65535));
  OK(tj_tensor_pack(A));
  tj_tensor *m[] = {uvec("y", "d", TJ_U16, 3, NULL), A};
  expect_unsigned("y(i) = reduce(min, j, A(i,j))", m, 2, (uint64_t[]){5, 65535, 65535}, 3);
  expect_unsigned("y(i) = reduce(max, j, A(i,j))", m, 2, (uint64_t[]){40000, 0, 65535}, 3);
  for (int t = 0; t < 2; t++) tj_tensor_free(m[t]);
  /* a dense u32 vector of 37 (vector loop and remainder): max is the one
   * value above 2^31; the sum wraps */
  uint64_t x[37], sum = 0;
  for (int i = 0; i < 37; i++) x[i] = 100000000u + (uint64_t)i, sum += x[i];
  x[20] = 3000000000u;
  sum = sum - (100000000u + 20) + 3000000000u;
  tj_tensor *s[] = {uvec("s", "d", TJ_U32, 1, NULL), uvec("x", "d", TJ_U32, 37, x)};
  expect_unsigned("s(k) = reduce(max, i, x(i))", s, 2, (uint64_t[]){3000000000u}, 1);
  expect_unsigned("s(k) = sum(i, x(i))", s, 2, (uint64_t[]){sum % (UINT64_C(1) << 32)}, 1);
  for (int t = 0; t < 2; t++) tj_tensor_free(s[t]);
}
END_TEST

/* Literals outside an unsigned dtype's range are refused. */
START_TEST(unsigned_literals_refused) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *v[] = {uvec("y", "d", TJ_U8, 2, NULL), uvec("b", "d", TJ_U8, 2, (uint64_t[]){1, 2})};
  tj_kernel *k;
  ck_assert_int_eq(tj_compile(cx, "y(i) = b(i) + 256", v, 2, NULL, NULL, &k), TJ_ERR_DTYPE);
  ck_assert_msg(strstr(tj_last_error(), "literal 256 is out of range for u8"), "%s", tj_last_error());
  ck_assert_int_eq(tj_compile(cx, "y(i) = b(i) * -1", v, 2, NULL, NULL, &k), TJ_ERR_DTYPE);
  OK(tj_compile(cx, "y(i) = b(i) + 255", v, 2, NULL, NULL, &k));
  tj_context_free(cx);
  tj_tensor_free(v[0]), tj_tensor_free(v[1]);
}
END_TEST

static Suite *semantics_suite(void) {
  Suite *s = suite_create("semantics");
  TCase *tc = tcase_create("sums");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_residual_by_hand);
  tcase_add_test(tc, test_transposed_sparse_output_with_a_sum);
  tcase_add_test(tc, test_pow_by_hand);
  tcase_add_test(tc, test_gallop_intersection_by_hand);
  tcase_add_test(tc, test_coo_by_hand);
  tcase_add_test(tc, test_coo_runs_by_hand);
  tcase_add_test(tc, test_scattered_union_dense_out_by_hand);
  tcase_add_test(tc, test_summed_union_by_hand);
  tcase_add_test(tc, test_wide_unions_by_loops);

  tcase_add_test(tc, test_shared_rows_by_hand);
  tcase_add_test(tc, test_ttm_vector_layout_by_hand);
  tcase_add_test(tc, test_dense_leaf_vector_by_hand);
  tcase_add_test(tc, test_spmv_plus_vector);
  tcase_add_test(tc, test_gemm_plus_matrix);
  tcase_add_test(tc, test_scopes_by_hand);
  tcase_add_test(tc, test_cin_where);
  tcase_add_test(tc, test_sum_errors);
  tcase_add_test(tc, test_builder_sum);
  tcase_add_test(tc, test_reductions_by_hand);
  tcase_add_test(tc, test_semiring_sums_by_distributivity);
  tcase_add_test(tc, test_converted_operand_keeps_stored_zeros);
  tcase_add_test(tc, test_reductions_larger);
  tcase_add_test(tc, test_reduction_errors);
  tcase_add_test(tc, test_defs_by_hand);
  tcase_add_test(tc, test_def_errors);
  tcase_add_test(tc, test_def_reduction_reorders);
  tcase_add_test(tc, unsigned_kernels);
  tcase_add_test(tc, unsigned_literals_refused);
  tcase_add_test(tc, test_sparse_mask_is_structural);
  tcase_add_test(tc, test_masks_of_other_dtypes);
  tcase_add_test(tc, test_kept_mask_pattern);
  tcase_add_test(tc, test_dense_tail_outputs_by_hand);
  tcase_add_test(tc, test_union_selects_and_nonordered_by_hand);
  tcase_add_test(tc, test_sparse_add_keeps_signed_zeros_and_nans);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(semantics_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  tj_shutdown();
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

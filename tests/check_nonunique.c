/* Trailing nonunique compressed levels (issue 15): a CSR whose rows may
 * hold a column twice (`du`), also unsorted (`dw`), and their order-3
 * forms (`ddu`, `dsu`). Duplicates stand for the sum of their values, as
 * in scipy and MLIR's COO, in every kernel: SpMV, SpMM, sparse add, A .* A
 * and max(A, 0) (summed before the operator), a min.plus sum, `=` and
 * `+=` into dense, CSR and `du` outputs, on 1 and 2 threads (ctest sets
 * TJ_PAR_MIN_WORK=0, so the parallel paths run on these small inputs).
 * Linear `+` uses visit the duplicates one by one (lower/dup_walk.c),
 * the others by runs: loop_form pins which loop each gets. Every value is
 * worked out by hand below; a `du` output holds each coordinate once.
 * A nonunique level over a compressed or dense level (`us`, `ws`, `ud`,
 * 3-level `uss`, `sus`): a row repeated at level 0 owns one fiber per
 * position, and the matrix is the sum of them all. Kernels read such an
 * operand in place where each position's fiber may add into its row on
 * its own (SpMV, SpMM, TTV into dense, `+=`: fibers_split_row cuts a
 * repeated row between two threads' chunks), elsewhere through a copy
 * that merges the fibers (`ss`, `sd`); -print-cin says which. A `dw` is
 * read in place under the same rule, else through a sorted `du` copy.
 * Such an output is written with each coordinate once. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"
#include "util/tensors.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

static tj_format parse(const char *spec) {
  tj_format f;
  OK(tj_format_parse(spec, &f));
  return f;
}

/* A (4 x 5) with duplicates, as summed:
 *   row 0: (0,1)=3 (0,1)=-2 (0,3)=4           -> [0  1 0 4 0]
 *   row 1: (1,0)=2 (1,0)=2 (1,0)=1            -> [5  0 0 0 0]
 *   row 2: empty                              -> [0  0 0 0 0]
 *   row 3: (3,2)=-1 (3,4)=6 (3,4)=-6 (3,4)=2  -> [0  0 -1 0 2]
 * `du` stores the columns of a row ascending; `dw` in the order below
 * (row 0: 3, 1, 1; row 3: 4, 2, 4, 4). */
static const double A_SUM[20] = {0, 1, 0, 4, 0, 5, 0, 0, 0, 0,
                                 0, 0, 0, 0, 0, 0, 0, -1, 0, 2};

static tj_tensor *wrap_a(const char *name, const char *spec) {
  static int32_t pos[] = {0, 3, 6, 6, 10};
  static int32_t crd_u[] = {1, 1, 3, 0, 0, 0, 2, 4, 4, 4};
  static double vals_u[] = {3, -2, 4, 2, 2, 1, -1, 6, -6, 2};
  static int32_t crd_w[] = {3, 1, 1, 0, 0, 0, 4, 2, 4, 4};
  static double vals_w[] = {4, 3, -2, 2, 2, 1, 6, -1, -6, 2};
  tj_format f = parse(spec);
  bool w = f.levels[1] == 'w';
  tj_arrays a = {.dtype = TJ_F64, .order = 2, .dims = (int64_t[]){4, 5}, .fmt = &f};
  a.pos[1] = pos, a.pos_len[1] = 5;
  a.crd[1] = w ? crd_w : crd_u, a.crd_len[1] = 10;
  a.vals = w ? vals_w : vals_u, a.vals_len = 10;
  tj_tensor *t;
  OK(tj_tensor_wrap(name, &a, 0, &t));
  return t;
}

/* Compiles expr with schedule sched (NULL: none) on nthreads threads
 * under semiring (NULL: plus.times) and evaluates it once. */
static void run_with(const char *expr, tj_tensor **ops, int n, int nthreads, const char *sched,
                     const char *semiring) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.nthreads = nthreads;
  o.semiring = semiring;
  tj_kernel *k;
  OK(tj_compile(cx, expr, ops, n, sched, &o, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  tj_context_free(cx);
}

static void run(const char *expr, tj_tensor **ops, int n, int nthreads) {
  run_with(expr, ops, n, nthreads, NULL, NULL);
}

/* Every value of t (order <= 3) against want, row-major. */
static void expect(const tj_tensor *t, const double *want, const char *what) {
  int order = tj_tensor_order(t);
  int64_t n = 1, dims[3] = {1, 1, 1};
  for (int m = 0; m < order; m++) n *= dims[m] = tj_tensor_dim(t, m);
  for (int64_t e = 0; e < n; e++) {
    int64_t c[3], r = e;
    for (int m = order - 1; m >= 0; m--) c[m] = r % dims[m], r /= dims[m];
    double x;
    OK(tj_tensor_get(t, c, &x));
    ck_assert_msg(x == want[e], "%s: %s entry %lld = %g, want %g", what, tj_tensor_name(t),
                  (long long)e, x, want[e]);
  }
}

/* Whether t stores each coordinate at most once (what a kernel writes). */
static void expect_unique(const tj_tensor *t, const char *what) {
  int64_t *crd, n;
  double *vals;
  int order = tj_tensor_order(t);
  OK(tj_tensor_unpack(t, &crd, &vals, &n));
  for (int64_t e = 1; e < n; e++)
    ck_assert_msg(memcmp(crd + (e - 1) * order, crd + e * order, order * sizeof *crd) != 0,
                  "%s: %s stores entry %lld twice", what, tj_tensor_name(t), (long long)e);
  free(crd), free(vals);
}

static const char *A_SPECS[] = {"du", "dw"};

/* y = A x, x = [1 2 3 4 5]: row 0 = 1*2 + 4*4 = 18, row 1 = 5*1 = 5,
 * row 3 = -1*3 + 2*5 = 7. */
START_TEST(spmv) {
  for (int th = 1; th <= 2; th++) {
    tj_tensor *a = wrap_a("A", A_SPECS[_i]);
    tj_tensor *x = tu_tensor("x", "d", 1, (int64_t[]){5}, (double[]){1, 2, 3, 4, 5});
    tj_tensor *y = tu_tensor("y", "d", 1, (int64_t[]){4}, NULL);
    run("y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3, th);
    expect(y, (double[]){18, 5, 0, 7}, A_SPECS[_i]);
    tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y);
  }
}
END_TEST

/* C = A B, B's rows b0 = [1 0], b1 = [0 1], b2 = [1 1], b3 = [2 0],
 * b4 = [0 3]: row 0 = b1 + 4 b3 = [8 1]; row 1 = 5 b0 = [5 0]; row 3 =
 * -b2 + 2 b4 = [-1 5]. Into a dense and into a CSR output. */
START_TEST(spmm) {
  const double want[] = {8, 1, 5, 0, 0, 0, -1, 5};
  const double b_vals[] = {1, 0, 0, 1, 1, 1, 2, 0, 0, 3};
  const char *outs[] = {"dd", "ds"};
  for (int th = 1; th <= 2; th++)
    for (int o = 0; o < 2; o++) {
      tj_tensor *a = wrap_a("A", A_SPECS[_i]);
      tj_tensor *b = tu_tensor("B", o ? "ds" : "dd", 2, (int64_t[]){5, 2}, b_vals);
      tj_tensor *c = tu_tensor("C", outs[o], 2, (int64_t[]){4, 2}, NULL);
      run("C(i,k) = A(i,j) * B(j,k)", (tj_tensor *[]){c, a, b}, 3, th);
      expect(c, want, A_SPECS[_i]);
      tj_tensor_free(a), tj_tensor_free(b), tj_tensor_free(c);
    }
}
END_TEST

/* E = A + F, F(0,1) = 10, F(1,2) = 7, F(3,4) = -2 (CSR): the union sees
 * each of A's coordinates once, its duplicates summed: E(0,1) = 11,
 * E(3,4) = 0 (stored: both have an entry there). Into dense, CSR and du. */
START_TEST(add_csr) {
  double fv[20] = {0};
  fv[1] = 10, fv[7] = 7, fv[19] = -2;
  const double want[] = {0, 11, 0, 4, 0, 5, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0};
  const char *outs[] = {"dd", "ds", "du"};
  for (int th = 1; th <= 2; th++)
    for (int o = 0; o < 3; o++) {
      tj_tensor *a = wrap_a("A", A_SPECS[_i]);
      tj_tensor *f = tu_tensor("F", "ds", 2, (int64_t[]){4, 5}, fv);
      tj_tensor *e = tu_tensor("E", outs[o], 2, (int64_t[]){4, 5}, NULL);
      run("E(i,j) = A(i,j) + F(i,j)", (tj_tensor *[]){e, a, f}, 3, th);
      expect(e, want, A_SPECS[_i]);
      if (o) {
        expect_unique(e, A_SPECS[_i]);
        ck_assert_int_eq(tj_tensor_nnz(e), 6);   /* (0,1) (0,3) (1,0) (1,2) (3,2) (3,4) */
      }
      tj_tensor_free(a), tj_tensor_free(f), tj_tensor_free(e);
    }
}
END_TEST

/* E = A + A' with A' = A stored `du` and `dw` again: 2 A. */
START_TEST(add_nonunique) {
  double want[20];
  for (int e = 0; e < 20; e++) want[e] = 2 * A_SUM[e];
  const char *outs[] = {"dd", "ds", "du"};
  for (int th = 1; th <= 2; th++)
    for (int o = 0; o < 3; o++) {
      tj_tensor *a = wrap_a("A", A_SPECS[_i]);
      tj_tensor *b = wrap_a("B", A_SPECS[1 - _i]);
      tj_tensor *e = tu_tensor("E", outs[o], 2, (int64_t[]){4, 5}, NULL);
      run("E(i,j) = A(i,j) + B(i,j)", (tj_tensor *[]){e, a, b}, 3, th);
      expect(e, want, A_SPECS[_i]);
      if (o) expect_unique(e, A_SPECS[_i]);
      tj_tensor_free(a), tj_tensor_free(b), tj_tensor_free(e);
    }
}
END_TEST

/* Nonlinear operators see the sum, never a duplicate: A .* A squares the
 * sums (E(0,1) = 1, not 9 + 4; E(3,4) = 4, not 36 + 36 + 4) and
 * max(A, 0) takes the max of the sum (E(0,1) = 1, not 3; E(3,2) = 0). */
START_TEST(nonlinear) {
  double sq[20], relu[20];
  for (int e = 0; e < 20; e++) sq[e] = A_SUM[e] * A_SUM[e], relu[e] = A_SUM[e] > 0 ? A_SUM[e] : 0;
  const char *outs[] = {"dd", "ds", "du"};
  for (int th = 1; th <= 2; th++)
    for (int o = 0; o < 3; o++) {
      tj_tensor *a = wrap_a("A", A_SPECS[_i]);
      tj_tensor *e = tu_tensor("E", outs[o], 2, (int64_t[]){4, 5}, NULL);
      run("E(i,j) = A(i,j) * A(i,j)", (tj_tensor *[]){e, a}, 2, th);
      expect(e, sq, A_SPECS[_i]);
      run("E(i,j) = max(A(i,j), 0)", (tj_tensor *[]){e, a}, 2, th);
      expect(e, relu, A_SPECS[_i]);
      if (o) expect_unique(e, A_SPECS[_i]);
      tj_tensor_free(a), tj_tensor_free(e);
    }
  /* a sum of a nonlinear term: sum over j of A(i,j)^2 = [1+16, 25, 0, 1+4] */
  tj_tensor *a = wrap_a("A", A_SPECS[_i]);
  tj_tensor *y = tu_tensor("y", "d", 1, (int64_t[]){4}, NULL);
  run("y(i) = A(i,j) * A(i,j)", (tj_tensor *[]){y, a}, 2, 1);
  expect(y, (double[]){17, 25, 0, 5}, A_SPECS[_i]);
  tj_tensor_free(a), tj_tensor_free(y);
}
END_TEST

/* `=` copies the sums: into dense, into CSR (one entry per coordinate,
 * (3,4) stored with 2) and into du. */
START_TEST(copy) {
  const char *outs[] = {"dd", "ds", "du"};
  for (int th = 1; th <= 2; th++)
    for (int o = 0; o < 3; o++) {
      tj_tensor *a = wrap_a("A", A_SPECS[_i]);
      tj_tensor *e = tu_tensor("E", outs[o], 2, (int64_t[]){4, 5}, NULL);
      run("E(i,j) = A(i,j)", (tj_tensor *[]){e, a}, 2, th);
      expect(e, A_SUM, A_SPECS[_i]);
      if (o) {
        expect_unique(e, A_SPECS[_i]);
        ck_assert_int_eq(tj_tensor_nnz(e), 5);
      }
      tj_tensor_free(a), tj_tensor_free(e);
    }
}
END_TEST

/* TTV y(i,j) = T(i,j,k) v(k) over 2 x 2 x 3 tensors whose last level has
 * duplicates, v = [1 10 100]: T(0,0,:) = {k=1: 1, 1}, T(0,1,:) = {k=0: 5,
 * k=2: 1, -1}, T(1,1,:) = {k=2: 3, 4}: y = [[20 5] [0 700]]. As `ddu`
 * and as `dsu` (row 1 has only j = 1). */
START_TEST(ttv) {
  static int32_t ddu_pos[] = {0, 2, 5, 5, 7}, ddu_crd[] = {1, 1, 0, 2, 2, 2, 2};
  static int32_t dsu_p1[] = {0, 2, 3}, dsu_c1[] = {0, 1, 1};
  static int32_t dsu_p2[] = {0, 2, 5, 7};
  static double tv[] = {1, 1, 5, 1, -1, 3, 4};
  for (int s = 0; s < 2; s++) {
    tj_format f = parse(s ? "dsu" : "ddu");
    tj_arrays ar = {.dtype = TJ_F64, .order = 3, .dims = (int64_t[]){2, 2, 3}, .fmt = &f};
    if (s) {
      ar.pos[1] = dsu_p1, ar.pos_len[1] = 3, ar.crd[1] = dsu_c1, ar.crd_len[1] = 3;
      ar.pos[2] = dsu_p2, ar.pos_len[2] = 4;
    } else {
      ar.pos[2] = ddu_pos, ar.pos_len[2] = 5;
    }
    ar.crd[2] = ddu_crd, ar.crd_len[2] = 7;
    ar.vals = tv, ar.vals_len = 7;
    tj_tensor *t;
    OK(tj_tensor_wrap("T", &ar, 0, &t));
    tj_tensor *v = tu_tensor("v", "d", 1, (int64_t[]){3}, (double[]){1, 10, 100});
    for (int th = 1; th <= 2; th++) {
      tj_tensor *y = tu_tensor("y", s ? "ds" : "dd", 2, (int64_t[]){2, 2}, NULL);
      run("y(i,j) = T(i,j,k) * v(k)", (tj_tensor *[]){y, t, v}, 3, th);
      expect(y, (double[]){20, 5, 0, 700}, s ? "dsu" : "ddu");
      tj_tensor_free(y);
    }
    tj_tensor_free(t), tj_tensor_free(v);
  }
}
END_TEST

/* Linear uses into a `+` update, where the duplicates are visited one
 * by one (x = [1 2 3 4 5], A y = [18 5 0 7] as in spmv):
 *   y += A x from y = 1                        -> [19 6 1 8]
 *   y = A x unrolled by 2 (the loop is a for)  -> [18 5 0 7]
 *   y = A x + z, z = [10 20 30 40]             -> [28 25 30 47]
 *   y = A x / 2                                -> [9 2.5 0 3.5]
 *   y(j) = A(i,j) w(i), w = [1 2 3 4]: the columns' sums weighted,
 *     col 0 = 5*2, col 1 = 1*1, col 2 = -1*4, col 3 = 4*1, col 4 = 2*4
 *                                              -> [10 1 -4 4 8]
 *   C += 2 A from C = 1: each duplicate adds into C(i,j) -> 1 + 2 A_SUM
 *   C = 2 A: a plain store (runs): its sum once          -> 2 A_SUM */
START_TEST(linear_uses) {
  const double x_vals[] = {1, 2, 3, 4, 5};
  double acc[20], twice[20];
  for (int e = 0; e < 20; e++) twice[e] = 2 * A_SUM[e], acc[e] = 1 + twice[e];
  for (int th = 1; th <= 2; th++) {
    tj_tensor *a = wrap_a("A", A_SPECS[_i]);
    tj_tensor *x = tu_tensor("x", "d", 1, (int64_t[]){5}, x_vals);
    tj_tensor *y = tu_tensor("y", "d", 1, (int64_t[]){4}, (double[]){1, 1, 1, 1});
    run("y(i) += A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3, th);
    expect(y, (double[]){19, 6, 1, 8}, A_SPECS[_i]);
    run_with("y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3, th, "unroll(j, 2)", NULL);
    expect(y, (double[]){18, 5, 0, 7}, A_SPECS[_i]);   /* a for loop now: it unrolls */
    tj_tensor *z = tu_tensor("z", "d", 1, (int64_t[]){4}, (double[]){10, 20, 30, 40});
    run("y(i) = A(i,j) * x(j) + z(i)", (tj_tensor *[]){y, a, x, z}, 4, th);
    expect(y, (double[]){28, 25, 30, 47}, A_SPECS[_i]);
    run("y(i) = A(i,j) * x(j) / 2", (tj_tensor *[]){y, a, x}, 3, th);
    expect(y, (double[]){9, 2.5, 0, 3.5}, A_SPECS[_i]);
    tj_tensor *w = tu_tensor("w", "d", 1, (int64_t[]){4}, (double[]){1, 2, 3, 4});
    tj_tensor *yt = tu_tensor("y", "d", 1, (int64_t[]){5}, NULL);
    run("y(j) = A(i,j) * w(i)", (tj_tensor *[]){yt, a, w}, 3, th);
    expect(yt, (double[]){10, 1, -4, 4, 8}, A_SPECS[_i]);
    double ones[20];
    for (int e = 0; e < 20; e++) ones[e] = 1;
    tj_tensor *c = tu_tensor("C", "dd", 2, (int64_t[]){4, 5}, ones);
    run("C(i,j) += A(i,j) * 2", (tj_tensor *[]){c, a}, 2, th);
    expect(c, acc, A_SPECS[_i]);
    run("C(i,j) = A(i,j) * 2", (tj_tensor *[]){c, a}, 2, th);
    expect(c, twice, A_SPECS[_i]);
    tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y), tj_tensor_free(z);
    tj_tensor_free(w), tj_tensor_free(yt), tj_tensor_free(c);
  }
}
END_TEST

/* Under min.plus a sum is a min and A(i,j) * x(j) is A + x: the min sees
 * each coordinate's sum, never a duplicate (row 0: min(1 + 2, 4 + 4) = 3,
 * not -2 + 2; row 1: 5 + 1, not 1 + 1; row 3: min(-1 + 3, 2 + 5) = 2, not
 * -6 + 5; row 2 has no entry: the semiring's zero, +inf). */
START_TEST(min_plus) {
  for (int th = 1; th <= 2; th++) {
    tj_tensor *a = wrap_a("A", A_SPECS[_i]);
    tj_tensor *x = tu_tensor("x", "d", 1, (int64_t[]){5}, (double[]){1, 2, 3, 4, 5});
    tj_tensor *y = tu_tensor("y", "d", 1, (int64_t[]){4}, NULL);
    run_with("y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3, th, NULL, "min.plus");
    expect(y, (double[]){3, 6, INFINITY, 2}, A_SPECS[_i]);
    tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y);
  }
}
END_TEST

/* A COO `uc` whose duplicates (0,2) = 5 and (0,2) = -10 stand for -5 sit
 * at positions 1 and 2, where 2 threads' chunks of level-0 positions meet
 * (every run cut into chunks: TJ_PARTIAL_RATIO=0): a chunk boundary keeps
 * the run whole. A = [[1 0 -5] [0 2 0]], x = [1 2 3]: under min.plus
 * y = [min(1 + 1, -5 + 3), 2 + 2] = [-2 4] (split, the min saw 5 + 3 and
 * -10 + 3: -7); plus.times y = [1 - 15, 4] = [-14 4]. */
START_TEST(coo_run_whole_in_chunk) {
  static int32_t p0[] = {0, 4}, rows[] = {0, 0, 0, 1}, cols[] = {0, 2, 2, 1};
  static double v[] = {1, 5, -10, 2};
  const char *was = getenv("TJ_PAR_MIN_WORK");
  char *old = was ? strdup(was) : NULL;
  setenv("TJ_PARTIAL_RATIO", "0", 1);
  setenv("TJ_PAR_MIN_WORK", "0", 1);
  tj_format f = parse("uc");
  tj_arrays ar = {.dtype = TJ_F64, .order = 2, .dims = (int64_t[]){2, 3}, .fmt = &f};
  ar.pos[0] = p0, ar.pos_len[0] = 2, ar.crd[0] = rows, ar.crd_len[0] = 4;
  ar.crd[1] = cols, ar.crd_len[1] = 4;
  ar.vals = v, ar.vals_len = 4;
  tj_tensor *a;
  OK(tj_tensor_wrap("A", &ar, 0, &a));
  for (int th = 1; th <= 2; th++) {
    tj_tensor *x = tu_tensor("x", "d", 1, (int64_t[]){3}, (double[]){1, 2, 3});
    tj_tensor *y = tu_tensor("y", "d", 1, (int64_t[]){2}, NULL);
    run_with("y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3, th, NULL, "min.plus");
    expect(y, (double[]){-2, 4}, "uc min.plus");
    run("y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3, th);
    expect(y, (double[]){-14, 4}, "uc");
    tj_tensor_free(x), tj_tensor_free(y);
  }
  tj_tensor_free(a);
  unsetenv("TJ_PARTIAL_RATIO");
  if (old) setenv("TJ_PAR_MIN_WORK", old, 1);
  else unsetenv("TJ_PAR_MIN_WORK");
  free(old);
}
END_TEST

/* Whether the compute loops of expr over A (`du`) scan for runs of equal
 * coordinates (the run's end, pA1_seg). */
static bool scans_runs(const char *expr, const char *semiring) {
  tj_tensor *a = wrap_a("A", "du");
  tj_tensor *x = tu_tensor("x", "d", 1, (int64_t[]){5}, NULL);
  tj_tensor *y = tu_tensor("y", "d", 1, (int64_t[]){4}, NULL);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.semiring = semiring;
  tj_kernel *k;
  OK(tj_compile(cx, expr, (tj_tensor *[]){y, a, x}, 3, NULL, &o, &k));
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  OK(tj_kernel_print(k, TJ_STAGE_COMPUTE, f));
  fclose(f);
  bool runs = strstr(text, "pA1_seg") != NULL;
  free(text);
  tj_context_free(cx);
  tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y);
  return runs;
}

/* SpMV and its `+=` walk A's entries as CSR's loop does; a nonlinear use
 * and a min.plus sum keep the runs. */
START_TEST(loop_form) {
  ck_assert(!scans_runs("y(i) = A(i,j) * x(j)", NULL));
  ck_assert(!scans_runs("y(i) += A(i,j) * x(j)", NULL));
  ck_assert(scans_runs("y(i) = max(A(i,j), 0) * x(j)", NULL));
  ck_assert(scans_runs("y(i) = A(i,j) * x(j)", "min.plus"));
}
END_TEST

/* Pack keeps a trailing nonunique level's duplicates, and the value API
 * reads their sum: the same meaning the kernels give them. */
START_TEST(pack_keeps_duplicates) {
  tj_format f = parse("du");
  tj_tensor *t;
  OK(tj_tensor_new("A", TJ_F64, 2, (int64_t[]){2, 3}, &f, &t));
  OK(tj_tensor_insert(t, (int64_t[]){0, 2}, 3));
  OK(tj_tensor_insert(t, (int64_t[]){0, 2}, -2));
  OK(tj_tensor_insert(t, (int64_t[]){1, 0}, 4));
  OK(tj_tensor_pack(t));
  ck_assert_int_eq(tj_tensor_nnz(t), 3);
  expect(t, (double[]){0, 0, 1, 4, 0, 0}, "packed du");
  tj_tensor *y = tu_tensor("y", "d", 1, (int64_t[]){2}, NULL);
  tj_tensor *x = tu_tensor("x", "d", 1, (int64_t[]){3}, (double[]){1, 1, 10});
  run("y(i) = max(A(i,j), 0) * x(j)", (tj_tensor *[]){y, t, x}, 3, 1);
  expect(y, (double[]){10, 4}, "packed du");
  tj_tensor_free(t), tj_tensor_free(x), tj_tensor_free(y);
}
END_TEST

/* R (4 x 5), rows repeated at level 0, each position owning a fiber:
 *   position 0, row 0: (0,1)=3  (0,3)=4
 *   position 1, row 0: (0,1)=-2 (0,4)=1     row 0 = [0 1 0 4 1]
 *   position 2, row 1: (1,0)=5              row 1 = [5 0 0 0 0]
 *   position 3, row 3: (3,2)=-1 (3,4)=6     row 2 = 0
 *   position 4, row 3: (3,4)=-4             row 3 = [0 0 -1 0 2]
 * `us` stores the positions in that order; `ws` in the order 4, 0, 2, 1, 3
 * (rows 3, 0, 1, 0, 3); `ud` each position's row densely. */
static const double R_SUM[20] = {0, 1, 0, 4, 1, 5, 0, 0, 0, 0,
                                 0, 0, 0, 0, 0, 0, 0, -1, 0, 2};

static tj_tensor *wrap_r(const char *name, const char *spec) {
  static int32_t pos0[] = {0, 5};
  static int32_t crd0_u[] = {0, 0, 1, 3, 3}, crd0_w[] = {3, 0, 1, 0, 3};
  static int32_t pos1_u[] = {0, 2, 4, 5, 7, 8}, crd1_u[] = {1, 3, 1, 4, 0, 2, 4, 4};
  static double vals_u[] = {3, 4, -2, 1, 5, -1, 6, -4};
  static int32_t pos1_w[] = {0, 1, 3, 4, 6, 8}, crd1_w[] = {4, 1, 3, 0, 1, 4, 2, 4};
  static double vals_w[] = {-4, 3, 4, 5, -2, 1, -1, 6};
  static double vals_d[] = {0, 3, 0, 4, 0, 0, -2, 0, 0, 1, 5, 0, 0, 0, 0,
                            0, 0, -1, 0, 6, 0, 0, 0, 0, -4};
  tj_format f = parse(spec);
  bool w = !strcmp(spec, "ws"), d = !strcmp(spec, "ud");
  tj_arrays a = {.dtype = TJ_F64, .order = 2, .dims = (int64_t[]){4, 5}, .fmt = &f};
  a.pos[0] = pos0, a.pos_len[0] = 2;
  a.crd[0] = w ? crd0_w : crd0_u, a.crd_len[0] = 5;
  if (d) {
    a.vals = vals_d, a.vals_len = 25;
  } else {
    a.pos[1] = w ? pos1_w : pos1_u, a.pos_len[1] = 6;
    a.crd[1] = w ? crd1_w : crd1_u, a.crd_len[1] = 8;
    a.vals = w ? vals_w : vals_u, a.vals_len = 8;
  }
  tj_tensor *t;
  OK(tj_tensor_wrap(name, &a, 0, &t));
  return t;
}

static const char *R_SPECS[] = {"us", "ws", "ud"};
static const char *R_COPIES[] = {"ss", "ss", "sd"};

/* -print-cin of expr over ops (owned by the caller: free()). */
static char *cin_text(const char *expr, tj_tensor **ops, int n) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, expr, ops, n, NULL, NULL, &k));
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  OK(tj_kernel_print(k, TJ_STAGE_CIN, out));
  fclose(out);
  tj_context_free(cx);
  return text;
}

/* Whether -print-cin of expr over ops says operand R is read through a
 * copy in format copy, merging its repeated rows. */
static void expect_copy_note(const char *expr, tj_tensor **ops, int n, const char *spec,
                             const char *copy) {
  char *text = cin_text(expr, ops, n);
  char want[160];
  snprintf(want, sizeof want, "// R is read through a copy in format %s (stored %s): its "
           "nonunique level 0 over i is above a dense or compressed level", copy, spec);
  ck_assert_msg(strstr(text, want), "%s: want '%s' in\n%s", spec, want, text);
  free(text);
}

/* Whether -print-cin of expr over ops says operand name (stored spec) is
 * read in place, its nonunique level `level` over index v walked entry by
 * entry, and claims no copy of it. */
static void expect_in_place(const char *expr, tj_tensor **ops, int n, const char *name,
                            const char *spec, int level, const char *v) {
  char *text = cin_text(expr, ops, n);
  char want[200], copy[64];
  snprintf(want, sizeof want, "// %s is read in place (stored %s): its nonunique level %d "
           "over %s is walked entry by entry", name, spec, level, v);
  snprintf(copy, sizeof copy, "// %s is read through a copy", name);
  ck_assert_msg(strstr(text, want), "%s: want '%s' in\n%s", expr, want, text);
  ck_assert_msg(!strstr(text, copy), "%s: no copy of %s wanted in\n%s", expr, name, text);
  free(text);
}

/* y = R x, x = [1 2 3 4 5]: row 0 = 1*2 + 4*4 + 1*5 = 23, row 1 = 5,
 * row 3 = -1*3 + 2*5 = 7 (every fiber of a row counted once). */
START_TEST(fibers_spmv) {
  for (int th = 1; th <= 2; th++) {
    tj_tensor *r = wrap_r("R", R_SPECS[_i]);
    tj_tensor *x = tu_tensor("x", "d", 1, (int64_t[]){5}, (double[]){1, 2, 3, 4, 5});
    tj_tensor *y = tu_tensor("y", "d", 1, (int64_t[]){4}, NULL);
    run("y(i) = R(i,j) * x(j)", (tj_tensor *[]){y, r, x}, 3, th);
    expect(y, (double[]){23, 5, 0, 7}, R_SPECS[_i]);
    /* y += R x from y = 1: each position's fiber adds into its row */
    tj_tensor *y1 = tu_tensor("y", "d", 1, (int64_t[]){4}, (double[]){1, 1, 1, 1});
    run("y(i) += R(i,j) * x(j)", (tj_tensor *[]){y1, r, x}, 3, th);
    expect(y1, (double[]){24, 6, 1, 8}, R_SPECS[_i]);
    /* a nonlinear use sees each row's sum: max(R, 0) x, row 0 = 1*2 +
     * 4*4 + 1*5 = 23, row 3 = 2*5 (not 6*5) */
    run("y(i) = max(R(i,j), 0) * x(j)", (tj_tensor *[]){y, r, x}, 3, th);
    expect(y, (double[]){23, 5, 0, 10}, R_SPECS[_i]);
    if (th == 1) {
      expect_in_place("y(i) = R(i,j) * x(j)", (tj_tensor *[]){y, r, x}, 3, "R", R_SPECS[_i],
                      0, "i");
      expect_copy_note("y(i) = max(R(i,j), 0) * x(j)", (tj_tensor *[]){y, r, x}, 3,
                       R_SPECS[_i], R_COPIES[_i]);
    }
    tj_tensor_free(r), tj_tensor_free(x), tj_tensor_free(y), tj_tensor_free(y1);
  }
}
END_TEST

/* C = R B, B's rows b0 = [1 0], b1 = [0 1], b2 = [1 1], b3 = [2 0],
 * b4 = [0 3]: row 0 = b1 + 4 b3 + b4 = [8 4]; row 1 = 5 b0 = [5 0];
 * row 3 = -b2 + 2 b4 = [-1 5]. Into dense, CSR and `us`. */
START_TEST(fibers_spmm) {
  const double want[] = {8, 4, 5, 0, 0, 0, -1, 5};
  const double b_vals[] = {1, 0, 0, 1, 1, 1, 2, 0, 0, 3};
  const char *outs[] = {"dd", "ds", "us"};
  for (int th = 1; th <= 2; th++)
    for (int o = 0; o < 3; o++) {
      tj_tensor *r = wrap_r("R", R_SPECS[_i]);
      tj_tensor *b = tu_tensor("B", o ? "ds" : "dd", 2, (int64_t[]){5, 2}, b_vals);
      tj_tensor *c = tu_tensor("C", outs[o], 2, (int64_t[]){4, 2}, NULL);
      run("C(i,k) = R(i,j) * B(j,k)", (tj_tensor *[]){c, r, b}, 3, th);
      expect(c, want, R_SPECS[_i]);
      if (o) expect_unique(c, R_SPECS[_i]);
      tj_tensor_free(r), tj_tensor_free(b), tj_tensor_free(c);
    }
}
END_TEST

/* E = R + F, F(0,1) = 10, F(1,2) = 7, F(3,4) = -2 (CSR): row 0 =
 * [0 11 0 4 1], row 1 = [5 0 7 0 0], row 3 = [0 0 -1 0 0], (3,4) stored
 * (6 - 4 - 2 = 0). Into dense, CSR, `us` and `ud` outputs; a sparse one
 * holds each of (0,1) (0,3) (0,4) (1,0) (1,2) (3,2) (3,4) once; from `ud`,
 * whose rows 0, 1 and 3 are stored whole (zeros too, as in `sd`), each of
 * those 15 coordinates once. */
START_TEST(fibers_add) {
  double fv[20] = {0};
  fv[1] = 10, fv[7] = 7, fv[19] = -2;
  const double want[] = {0, 11, 0, 4, 1, 5, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0};
  const char *outs[] = {"dd", "ds", "us", "ud"};
  for (int th = 1; th <= 2; th++)
    for (int o = 0; o < 4; o++) {
      tj_tensor *r = wrap_r("R", R_SPECS[_i]);
      tj_tensor *f = tu_tensor("F", "ds", 2, (int64_t[]){4, 5}, fv);
      tj_tensor *e = tu_tensor("E", outs[o], 2, (int64_t[]){4, 5}, NULL);
      run("E(i,j) = R(i,j) + F(i,j)", (tj_tensor *[]){e, r, f}, 3, th);
      expect(e, want, R_SPECS[_i]);
      if (o) expect_unique(e, R_SPECS[_i]);
      if (o == 1 || o == 2) ck_assert_int_eq(tj_tensor_nnz(e), _i == 2 ? 15 : 7);
      tj_tensor_free(r), tj_tensor_free(f), tj_tensor_free(e);
    }
}
END_TEST

/* Nonlinear operators see the sum of a row's fibers: R .* R squares
 * (0,1) = 3 - 2 = 1 (not 9 + 4) and (3,4) = 6 - 4 = 2 (not 36 + 16);
 * max(R, 0) of (0,1) is 1 (not 3) and of (3,2) = -1 is 0. `=` copies
 * the sums. Into dense, CSR and `us`: (0,1) (0,3) (0,4) (1,0) (3,2) (3,4)
 * once each, or the 15 coordinates of rows 0, 1, 3 from `ud`. */
START_TEST(fibers_nonlinear) {
  const double sq[20] = {0, 1, 0, 16, 1, 25, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 4};
  const double relu[20] = {0, 1, 0, 4, 1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  const char *outs[] = {"dd", "ds", "us"};
  for (int th = 1; th <= 2; th++)
    for (int o = 0; o < 3; o++) {
      tj_tensor *r = wrap_r("R", R_SPECS[_i]);
      tj_tensor *e = tu_tensor("E", outs[o], 2, (int64_t[]){4, 5}, NULL);
      run("E(i,j) = R(i,j) * R(i,j)", (tj_tensor *[]){e, r}, 2, th);
      expect(e, sq, R_SPECS[_i]);
      run("E(i,j) = max(R(i,j), 0)", (tj_tensor *[]){e, r}, 2, th);
      expect(e, relu, R_SPECS[_i]);
      run("E(i,j) = R(i,j)", (tj_tensor *[]){e, r}, 2, th);
      expect(e, R_SUM, R_SPECS[_i]);
      if (o) {
        expect_unique(e, R_SPECS[_i]);
        ck_assert_int_eq(tj_tensor_nnz(e), _i == 2 ? 15 : 6);
      }
      tj_tensor_free(r), tj_tensor_free(e);
    }
}
END_TEST

/* Converting R to CSR, DCSR or dense merges its fibers: the sums, each
 * coordinate once (6 entries in CSR and DCSR). */
START_TEST(fibers_convert) {
  const char *tos[] = {"ds", "ss", "dd", "us"};
  for (int k = 0; k < 4; k++) {
    tj_tensor *r = wrap_r("R", R_SPECS[_i]), *c;
    tj_format f = parse(tos[k]);
    OK(tj_tensor_convert(r, &f, &c));
    expect(c, R_SUM, tos[k]);
    if (k < 2) {
      ck_assert_int_eq(tj_tensor_nnz(c), 6);
      expect_unique(c, tos[k]);
    }
    tj_tensor_free(r), tj_tensor_free(c);
  }
}
END_TEST

/* TTV y(i,j) = T(i,j,k) v(k), T 2 x 2 x 3 with v = [1 10 100]:
 *   fiber (0,0) a: k=1: 1;  fiber (0,0) b: k=1: 1, k=2: 2;
 *   fiber (0,1): k=0: 5;    fiber (1,1): k=2: 3
 * y = [[1*10 + 1*10 + 2*100 = 220, 5], [0, 300]]. As `uss` (row 0
 * repeated at level 0: positions (0: j=0), (0: j=0, 1), (1: j=1)) and as
 * `sus` (j = 0 repeated under i = 0). */
START_TEST(fibers_ttv) {
  static int32_t uss_p0[] = {0, 3}, uss_c0[] = {0, 0, 1};
  static int32_t uss_p1[] = {0, 1, 3, 4}, uss_c1[] = {0, 0, 1, 1};
  static int32_t sus_p0[] = {0, 2}, sus_c0[] = {0, 1};
  static int32_t sus_p1[] = {0, 3, 4}, sus_c1[] = {0, 0, 1, 1};
  static int32_t p2[] = {0, 1, 3, 4, 5}, c2[] = {1, 1, 2, 0, 2};
  static double tv[] = {1, 1, 2, 5, 3};
  for (int s = 0; s < 2; s++) {
    tj_format f = parse(s ? "sus" : "uss");
    tj_arrays ar = {.dtype = TJ_F64, .order = 3, .dims = (int64_t[]){2, 2, 3}, .fmt = &f};
    ar.pos[0] = s ? sus_p0 : uss_p0, ar.pos_len[0] = 2;
    ar.crd[0] = s ? sus_c0 : uss_c0, ar.crd_len[0] = s ? 2 : 3;
    ar.pos[1] = s ? sus_p1 : uss_p1, ar.pos_len[1] = s ? 3 : 4;
    ar.crd[1] = s ? sus_c1 : uss_c1, ar.crd_len[1] = 4;
    ar.pos[2] = p2, ar.pos_len[2] = 5, ar.crd[2] = c2, ar.crd_len[2] = 5;
    ar.vals = tv, ar.vals_len = 5;
    tj_tensor *t;
    OK(tj_tensor_wrap("T", &ar, 0, &t));
    tj_tensor *v = tu_tensor("v", "d", 1, (int64_t[]){3}, (double[]){1, 10, 100});
    for (int th = 1; th <= 2; th++)
      for (int o = 0; o < 2; o++) {
        tj_tensor *y = tu_tensor("y", o ? "ss" : "dd", 2, (int64_t[]){2, 2}, NULL);
        run("y(i,j) = T(i,j,k) * v(k)", (tj_tensor *[]){y, t, v}, 3, th);
        expect(y, (double[]){220, 5, 0, 300}, s ? "sus" : "uss");
        tj_tensor_free(y);
      }
    tj_tensor_free(t), tj_tensor_free(v);
  }
}
END_TEST

/* S (4 x 3) with row 1 repeated at positions 1 and 2 (overlapping at
 * column 1), so two chunks of its level-0 positions ([0, 2), [2, 4), on
 * 2 threads) split the row between them:
 *   position 0, row 0: (0,0)=1 (0,2)=2     row 0 = [1 0 2]
 *   position 1, row 1: (1,0)=3 (1,1)=4     row 1 = [3 9 6]
 *   position 2, row 1: (1,1)=5 (1,2)=6     row 2 = [0 0 7]
 *   position 3, row 2: (2,2)=7             row 3 = 0
 * `us`, or `ud` (each position's row stored whole). */
static tj_tensor *wrap_s(const char *spec) {
  static int32_t pos0[] = {0, 4}, crd0[] = {0, 1, 1, 2};
  static int32_t pos1[] = {0, 2, 4, 6, 7}, crd1[] = {0, 2, 0, 1, 1, 2, 2};
  static double vals[] = {1, 2, 3, 4, 5, 6, 7};
  static double vals_d[] = {1, 0, 2, 3, 4, 0, 0, 5, 6, 0, 0, 7};
  tj_format f = parse(spec);
  bool d = !strcmp(spec, "ud");
  tj_arrays a = {.dtype = TJ_F64, .order = 2, .dims = (int64_t[]){4, 3}, .fmt = &f};
  a.pos[0] = pos0, a.pos_len[0] = 2, a.crd[0] = crd0, a.crd_len[0] = 4;
  if (!d) a.pos[1] = pos1, a.pos_len[1] = 5, a.crd[1] = crd1, a.crd_len[1] = 7;
  a.vals = d ? vals_d : vals, a.vals_len = d ? 12 : 7;
  tj_tensor *t;
  OK(tj_tensor_wrap("S", &a, 0, &t));
  return t;
}

/* S read in place, on 1 and 2 threads (every run of 2 threads cut into
 * chunks: TJ_PARTIAL_RATIO=0), x = [1 10 100]:
 *   y = S x = [201 693 700 0]; y += S x from 1 -> [202 694 701 1];
 *   C = S B, B's rows [1 0] [0 1] [1 1] -> [[3 2] [9 15] [7 7] [0 0]]. */
START_TEST(fibers_split_row) {
  static const char *specs[] = {"us", "ud"};
  setenv("TJ_PARTIAL_RATIO", "0", 1);
  for (int th = 1; th <= 2; th++) {
    tj_tensor *a = wrap_s(specs[_i]);
    tj_tensor *x = tu_tensor("x", "d", 1, (int64_t[]){3}, (double[]){1, 10, 100});
    tj_tensor *y = tu_tensor("y", "d", 1, (int64_t[]){4}, NULL);
    run("y(i) = S(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3, th);
    expect(y, (double[]){201, 693, 700, 0}, specs[_i]);
    tj_tensor *y1 = tu_tensor("y", "d", 1, (int64_t[]){4}, (double[]){1, 1, 1, 1});
    run("y(i) += S(i,j) * x(j)", (tj_tensor *[]){y1, a, x}, 3, th);
    expect(y1, (double[]){202, 694, 701, 1}, specs[_i]);
    tj_tensor *b = tu_tensor("B", "dd", 2, (int64_t[]){3, 2}, (double[]){1, 0, 0, 1, 1, 1});
    tj_tensor *c = tu_tensor("C", "dd", 2, (int64_t[]){4, 2}, NULL);
    run("C(i,k) = S(i,j) * B(j,k)", (tj_tensor *[]){c, a, b}, 3, th);
    expect(c, (double[]){3, 2, 9, 15, 7, 7, 0, 0}, specs[_i]);
    if (th == 1) {
      expect_in_place("y(i) = S(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3, "S", specs[_i], 0,
                      "i");
      expect_in_place("C(i,k) = S(i,j) * B(j,k)", (tj_tensor *[]){c, a, b}, 3, "S", specs[_i],
                      0, "i");
    }
    tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y), tj_tensor_free(y1);
    tj_tensor_free(b), tj_tensor_free(c);
  }
  unsetenv("TJ_PARTIAL_RATIO");
}
END_TEST

/* Under sequence() each term is a statement of its own, and one kernel
 * holds one copy of each operand: where the linear term would read S or
 * A in place and the nonlinear one through a copy, both read the copy.
 * x = [1 10 100], z = [1 1 1]: S x = [201 693 700 0]; the square of S's
 * sums, S.*S z = [1+4, 9+81+36, 49, 0] (squaring row 1's entries one by
 * one would give 9+16+25+36 there): y = [206 819 749 0]. Over `dw` A
 * with x = [1 2 3 4 5], z = [1 1 1 1 1]: A x = [18 5 0 7], max(A, 0) z
 * = [5 5 0 2]: y = [23 10 0 9]. */
START_TEST(sequence_shares_copy) {
  static const char *specs[] = {"us", "ud"};
  for (int th = 1; th <= 2; th++) {
    for (int q = 0; q < 2; q++) {
      tj_tensor *a = wrap_s(specs[q]);
      tj_tensor *x = tu_tensor("x", "d", 1, (int64_t[]){3}, (double[]){1, 10, 100});
      tj_tensor *z = tu_tensor("z", "d", 1, (int64_t[]){3}, (double[]){1, 1, 1});
      tj_tensor *y = tu_tensor("y", "d", 1, (int64_t[]){4}, NULL);
      run_with("y(i) = S(i,j) * x(j) + S(i,k) * S(i,k) * z(k)", (tj_tensor *[]){y, a, x, z}, 4,
               th, "sequence()", NULL);
      expect(y, (double[]){206, 819, 749, 0}, specs[q]);
      tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(z), tj_tensor_free(y);
    }
    tj_tensor *a = wrap_a("A", "dw");
    tj_tensor *x = tu_tensor("x", "d", 1, (int64_t[]){5}, (double[]){1, 2, 3, 4, 5});
    tj_tensor *z = tu_tensor("z", "d", 1, (int64_t[]){5}, (double[]){1, 1, 1, 1, 1});
    tj_tensor *y = tu_tensor("y", "d", 1, (int64_t[]){4}, NULL);
    run_with("y(i) = A(i,j) * x(j) + max(A(i,k), 0) * z(k)", (tj_tensor *[]){y, a, x, z}, 4, th,
             "sequence()", NULL);
    expect(y, (double[]){23, 10, 0, 9}, "dw");
    tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(z), tj_tensor_free(y);
  }
}
END_TEST

/* A `dw` SpMV reads A in place (its duplicates, out of order, each add
 * their share: spmv's values); max(A, 0) x sorts a copy, whose runs
 * then sum before the max. */
START_TEST(dw_in_place) {
  tj_tensor *a = wrap_a("A", "dw");
  tj_tensor *x = tu_tensor("x", "d", 1, (int64_t[]){5}, (double[]){1, 2, 3, 4, 5});
  tj_tensor *y = tu_tensor("y", "d", 1, (int64_t[]){4}, NULL);
  expect_in_place("y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3, "A", "dw", 1, "j");
  char *text = cin_text("y(i) = max(A(i,j), 0) * x(j)", (tj_tensor *[]){y, a, x}, 3);
  ck_assert_msg(strstr(text, "// A is read through a copy in format du (stored dw): its "
                             "nonordered level 1 over j is walked by runs"), "%s", text);
  free(text);
  /* max(A, 0) x = row 0: 1*2 + 4*4, row 1: 5*1, row 3: 2*5 */
  for (int th = 1; th <= 2; th++) {
    run("y(i) = max(A(i,j), 0) * x(j)", (tj_tensor *[]){y, a, x}, 3, th);
    expect(y, (double[]){18, 5, 0, 10}, "dw");
  }
  tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y);
}
END_TEST

/* TTV over `uss` and `sus` into a dense output reads T in place (fibers_ttv
 * pins the values; a CSR output there keeps the copy). */
START_TEST(ttv_in_place) {
  static int32_t p0[] = {0, 3}, c0[] = {0, 0, 1}, p1[] = {0, 1, 3, 4}, c1[] = {0, 0, 1, 1};
  static int32_t p2[] = {0, 1, 3, 4, 5}, c2[] = {1, 1, 2, 0, 2};
  static double tv[] = {1, 1, 2, 5, 3};
  tj_format f = parse("uss");
  tj_arrays ar = {.dtype = TJ_F64, .order = 3, .dims = (int64_t[]){2, 2, 3}, .fmt = &f};
  ar.pos[0] = p0, ar.pos_len[0] = 2, ar.crd[0] = c0, ar.crd_len[0] = 3;
  ar.pos[1] = p1, ar.pos_len[1] = 4, ar.crd[1] = c1, ar.crd_len[1] = 4;
  ar.pos[2] = p2, ar.pos_len[2] = 5, ar.crd[2] = c2, ar.crd_len[2] = 5;
  ar.vals = tv, ar.vals_len = 5;
  tj_tensor *t;
  OK(tj_tensor_wrap("T", &ar, 0, &t));
  tj_tensor *v = tu_tensor("v", "d", 1, (int64_t[]){3}, (double[]){1, 10, 100});
  tj_tensor *y = tu_tensor("y", "dd", 2, (int64_t[]){2, 2}, NULL);
  expect_in_place("y(i,j) = T(i,j,k) * v(k)", (tj_tensor *[]){y, t, v}, 3, "T", "uss", 0, "i");
  tj_tensor_free(t), tj_tensor_free(v), tj_tensor_free(y);
}
END_TEST

/* What stays refused, by name: an output whose nonunique level starts a
 * run of singletons that stops short of the last level (`ucs`). */
START_TEST(refused_short_run) {
  tj_tensor *a = tu_tensor("A", "sss", 3, (int64_t[]){2, 2, 2}, NULL);
  tj_tensor *e = tu_tensor("E", "ucs", 3, (int64_t[]){2, 2, 2}, NULL);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  ck_assert_int_eq(tj_compile(cx, "E(i,j,k) = A(i,j,k)", (tj_tensor *[]){e, a}, 2, NULL, NULL,
                              &k), TJ_ERR_UNSUPPORTED);
  ck_assert_msg(strstr(tj_last_error(), "output E: level 0 is 'u'; outputs support dense"),
                "%s", tj_last_error());
  tj_context_free(cx);
  tj_tensor_free(a), tj_tensor_free(e);
}
END_TEST

int main(void) {
  Suite *s = suite_create("nonunique");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 600);
  tcase_add_loop_test(tc, spmv, 0, 2);
  tcase_add_loop_test(tc, spmm, 0, 2);
  tcase_add_loop_test(tc, add_csr, 0, 2);
  tcase_add_loop_test(tc, add_nonunique, 0, 2);
  tcase_add_loop_test(tc, nonlinear, 0, 2);
  tcase_add_loop_test(tc, copy, 0, 2);
  tcase_add_loop_test(tc, linear_uses, 0, 2);
  tcase_add_loop_test(tc, min_plus, 0, 2);
  tcase_add_test(tc, coo_run_whole_in_chunk);
  tcase_add_test(tc, loop_form);
  tcase_add_test(tc, ttv);
  tcase_add_test(tc, pack_keeps_duplicates);
  tcase_add_loop_test(tc, fibers_spmv, 0, 3);
  tcase_add_loop_test(tc, fibers_spmm, 0, 3);
  tcase_add_loop_test(tc, fibers_add, 0, 3);
  tcase_add_loop_test(tc, fibers_nonlinear, 0, 3);
  tcase_add_loop_test(tc, fibers_convert, 0, 3);
  tcase_add_test(tc, fibers_ttv);
  tcase_add_loop_test(tc, fibers_split_row, 0, 2);
  tcase_add_test(tc, dw_in_place);
  tcase_add_test(tc, sequence_shares_copy);
  tcase_add_test(tc, ttv_in_place);
  tcase_add_test(tc, refused_short_run);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}

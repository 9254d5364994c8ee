/* parallelize(v, partials) into a sparse output (lower/schedule.c:
 * apply_sparse_partials; jit/driver_run.c: run_rows, rt_storage_merge):
 * each thread's chunk of the outermost loop runs the kernel into a sparse
 * partial of the output's format, and the partials are merged, their
 * patterns united and overlapping values combined by the root operator.
 *
 *   y(i) = A(j,i) * x(j), A CSR (ds), y sparse (s), over j: the transposed
 *   SpMV, under plus.times, max (reduce) and min.plus, f64 and i64;
 *   A(i,j) = B(i,j) + C(i,j) into DCSR (ss) over i: disjoint rows.
 *
 * Each against plain loops over dense arrays in the test (values and the
 * exact pattern), at 1 thread and 2 (evaluate in partials; assemble and
 * compute at 2 threads, on one: no partials kept); the path is pinned by the chunk
 * outputs the kernel keeps (one per thread: none is the output itself).
 * The refusals that remain are checked by message.
 *
 * A is N x N with D (12) entries per row j at columns (7j + 131e + e^2) % N,
 * e < D, none in columns c % 10 == 3 (y has no entry there), valued
 * (c + j) % 5 + 1 (times 0.1 for f64); x(j) = j % 7 + 1.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jit/driver.h"

enum { N = 3000, D = 12, M = 40 };

typedef enum { RED_PLUS, RED_MAX, RED_MINPLUS } Red;

typedef struct Case {
  tj_dtype dt;
  Red red;
} Case;

static const Case CASES[] = {
    {TJ_F64, RED_PLUS}, {TJ_F64, RED_MAX}, {TJ_F64, RED_MINPLUS}, {TJ_I64, RED_PLUS},
    {TJ_I64, RED_MAX},
};
enum { NCASES = sizeof CASES / sizeof CASES[0] };

static int64_t col_of(int64_t j, int64_t e) { return (7 * j + 131 * e + e * e) % N; }

static double value_of(tj_dtype dt, int64_t c, int64_t j) {
  double v = (double)((c + j) % 5 + 1);
  return dt == TJ_F64 ? v * 0.1 : v;
}

static tj_tensor *tensor(const char *name, tj_dtype dt, const char *fmt, int order,
                         const int64_t *dims) {
  tj_format f;
  ck_assert_int_eq(tj_format_parse(fmt, &f), TJ_OK);
  tj_tensor *t;
  ck_assert_int_eq(tj_tensor_new(name, dt, order, dims, &f, &t), TJ_OK);
  return t;
}

static tj_tensor *matrix_a(tj_dtype dt, const char *fmt, int d) {
  tj_tensor *A = tensor("A", dt, fmt, 2, (int64_t[]){N, N});
  for (int64_t j = 0; j < N; j++)
    for (int64_t e = 0; e < d; e++) {
      int64_t c = col_of(j, e);
      if (c % 10 != 3)
        ck_assert_int_eq(tj_tensor_insert(A, (int64_t[]){j, c}, value_of(dt, c, j)), TJ_OK);
    }
  ck_assert_int_eq(tj_tensor_pack(A), TJ_OK);
  return A;
}

static tj_tensor *vector_x(tj_dtype dt) {
  tj_tensor *x = tensor("x", dt, "d", 1, (int64_t[]){N});
  for (int64_t j = 0; j < N; j++)
    ck_assert_int_eq(tj_tensor_insert(x, &j, (double)(j % 7 + 1)), TJ_OK);
  ck_assert_int_eq(tj_tensor_pack(x), TJ_OK);
  return x;
}

/* The plain loops: want[i] and stored[i] over A's entries, j ascending
 * (a row's D columns are distinct: 131e + e^2 < N for e < D). */
static void by_hand(const Case *c, double *want, bool *stored) {
  double id = c->red == RED_PLUS ? 0 : c->red == RED_MAX ? -INFINITY : INFINITY;
  for (int64_t i = 0; i < N; i++) want[i] = id, stored[i] = false;
  for (int64_t j = 0; j < N; j++)
    for (int64_t e = 0; e < D; e++) {
      int64_t i = col_of(j, e);
      if (i % 10 == 3) continue;
      double a = value_of(c->dt, i, j), x = (double)(j % 7 + 1);
      want[i] = c->red == RED_PLUS ? want[i] + a * x
                : c->red == RED_MAX ? fmax(want[i], a * x) : fmin(want[i], a + x);
      stored[i] = true;
    }
}

static const char *expr_of(const Case *c) {
  return c->red == RED_MAX ? "y(i) = reduce(max, j, A(j,i) * x(j))" : "y(i) = A(j,i) * x(j)";
}

/* The entries of t (order 1 or 2) into got/stored, dense n-wide rows;
 * returns how many. */
static int64_t entries(const tj_tensor *t, int order, int64_t n, double *got, bool *stored) {
  int64_t *crd, nnz;
  double *vals;
  ck_assert_int_eq(tj_tensor_unpack(t, &crd, &vals, &nnz), TJ_OK);
  for (int64_t q = 0; q < nnz; q++) {
    int64_t at = order == 1 ? crd[q] : crd[2 * q] * n + crd[2 * q + 1];
    ck_assert_msg(!stored[at], "entry %lld stored twice", (long long)at);
    stored[at] = true;
    got[at] = vals[q];
  }
  free(crd);
  free(vals);
  return nnz;
}

/* Runs c on the given threads into got/stored (evaluate, or assemble then
 * compute when split); the chunk outputs kept. */
static int run_on(tj_context *cx, const Case *c, tj_tensor *A, double *got, bool *stored,
                  int threads, bool split) {
  tj_tensor *x = vector_x(c->dt), *y = tensor("y", c->dt, "s", 1, (int64_t[]){N});
  tj_options o = tj_options_default();
  o.nthreads = threads;
  o.semiring = c->red == RED_MINPLUS ? "min.plus" : NULL;
  tj_kernel *k;
  ck_assert_msg(tj_compile(cx, expr_of(c), (tj_tensor *[]){y, A, x}, 3,
                           "parallelize(j, partials)", &o, &k) == TJ_OK,
                "%s", tj_last_error());
  if (split) {
    ck_assert_msg(tj_kernel_run(k, TJ_ASSEMBLE, NULL, 0) == TJ_OK, "%s", tj_last_error());
    ck_assert_msg(tj_kernel_run(k, TJ_COMPUTE, NULL, 0) == TJ_OK, "%s", tj_last_error());
  } else {
    ck_assert_msg(tj_kernel_run(k, TJ_EVALUATE, NULL, 0) == TJ_OK, "%s", tj_last_error());
  }
  memset(stored, 0, N * sizeof *stored);
  entries(y, 1, N, got, stored);
  int kept = k->nchunks;
  tj_kernel_free(k);
  tj_tensor_free(x), tj_tensor_free(y);
  return kept;
}

START_TEST(vector_by_hand) {
  const Case *c = &CASES[_i];
  setenv("TJ_PAR_MIN_WORK", "0", 1);
  tj_context *cx;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  tj_tensor *A = matrix_a(c->dt, "ds", D);
  double *want = malloc(N * sizeof *want), *got = malloc(N * sizeof *got);
  double *again = malloc(N * sizeof *again);
  bool *stored = malloc(N * sizeof *stored), *has = malloc(N * sizeof *has);
  by_hand(c, want, stored);
  for (int run = 0; run < 3; run++) {   /* 1 thread, 2 by assemble and compute, 2 */
    int threads = run ? 2 : 1;
    int kept = run_on(cx, c, A, got, has, threads, run == 1);
    ck_assert_msg(kept == (run == 2 ? 2 : 0), "case %d, run %d: %d chunk outputs kept", _i, run,
                  kept);
    for (int64_t i = 0; i < N; i++) {
      ck_assert_msg(has[i] == stored[i], "case %d, %d threads: y(%lld) stored %d, want %d", _i,
                    threads, (long long)i, has[i], stored[i]);
      if (!stored[i]) continue;
      double tol = c->dt == TJ_F64 && c->red == RED_PLUS ? 1e-12 * (1 + fabs(want[i])) : 0;
      ck_assert_msg(fabs(got[i] - want[i]) <= tol, "case %d, %d threads: y(%lld) = %.17g, "
                    "want %.17g", _i, threads, (long long)i, got[i], want[i]);
    }
  }
  run_on(cx, c, A, again, has, 2, false);   /* the same bits on every 2-thread run */
  for (int64_t i = 0; i < N; i++)
    ck_assert_msg(!stored[i] || again[i] == got[i], "case %d: two runs differ at %lld", _i,
                  (long long)i);
  free(want), free(got), free(again), free(stored), free(has);
  tj_tensor_free(A);
  tj_context_free(cx);
}
END_TEST

/* A vector's partials cost its extent per thread (a workspace, the merge):
 * with 2 entries a row, 4 x 2 x N is more than the work, and the kernel
 * runs on one thread, with the same values. */
START_TEST(small_work_stays_serial) {
  setenv("TJ_PAR_MIN_WORK", "0", 1);
  tj_context *cx;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  tj_tensor *A = matrix_a(TJ_F64, "ds", 2);
  double *got = malloc(N * sizeof *got);
  bool *has = malloc(N * sizeof *has);
  ck_assert_int_eq(run_on(cx, &CASES[0], A, got, has, 2, false), 0);
  for (int64_t j = 0; j < N; j++)   /* y(i) = sum over the two rows j reaching i */
    for (int64_t e = 0; e < 2; e++) {
      int64_t i = col_of(j, e);
      if (i % 10 != 3) ck_assert(has[i]);
    }
  free(got), free(has);
  tj_tensor_free(A);
  tj_context_free(cx);
}
END_TEST

/* B and C: N x M CSR, B in rows r % 4 < 2 at columns (3r + e) % M, C in
 * rows r % 4 in {1, 2} at (5r + 2e) % M, e < 3; rows r % 4 == 3 empty in
 * both (no row of the DCSR output). Values r + col + 1 and 2r + 1. */
static tj_tensor *rows_operand(const char *name, bool is_c, double *dense, bool *has) {
  tj_tensor *t = tensor(name, TJ_F64, "ds", 2, (int64_t[]){N, M});
  for (int64_t r = 0; r < N; r++) {
    if (is_c ? r % 4 == 0 || r % 4 == 3 : r % 4 >= 2) continue;
    for (int64_t e = 0; e < 3; e++) {
      int64_t col = is_c ? (5 * r + 2 * e) % M : (3 * r + e) % M;
      double v = is_c ? (double)(2 * r + 1) : (double)(r + col + 1);
      ck_assert_int_eq(tj_tensor_insert(t, (int64_t[]){r, col}, v), TJ_OK);
      dense[r * M + col] += v;
      has[r * M + col] = true;
    }
  }
  ck_assert_int_eq(tj_tensor_pack(t), TJ_OK);
  return t;
}

START_TEST(dcsr_rows_by_hand) {
  setenv("TJ_PAR_MIN_WORK", "0", 1);
  tj_context *cx;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  size_t n = (size_t)N * M;
  double *want = calloc(n, sizeof *want), *got = calloc(n, sizeof *got);
  bool *stored = calloc(n, sizeof *stored), *has = calloc(n, sizeof *has);
  tj_tensor *B = rows_operand("B", false, want, stored);
  tj_tensor *C = rows_operand("C", true, want, stored);
  int64_t nnz = 0;
  for (size_t q = 0; q < n; q++) nnz += stored[q];
  for (int threads = 1; threads <= 2; threads++) {
    tj_tensor *A = tensor("A", TJ_F64, "ss", 2, (int64_t[]){N, M});
    tj_options o = tj_options_default();
    o.nthreads = threads;
    tj_kernel *k;
    ck_assert_msg(tj_compile(cx, "A(i,j) = B(i,j) + C(i,j)", (tj_tensor *[]){A, B, C}, 3,
                             "parallelize(i, partials)", &o, &k) == TJ_OK,
                  "%s", tj_last_error());
    ck_assert_msg(tj_kernel_run(k, TJ_EVALUATE, NULL, 0) == TJ_OK, "%s", tj_last_error());
    ck_assert_int_eq(k->nchunks, threads == 1 ? 0 : 2);
    memset(has, 0, n * sizeof *has);
    ck_assert_int_eq(entries(A, 2, M, got, has), nnz);
    for (size_t q = 0; q < n; q++) {
      ck_assert_msg(has[q] == stored[q], "%d threads: A(%zu,%zu) stored %d, want %d", threads,
                    q / M, q % M, has[q], stored[q]);
      ck_assert_msg(!stored[q] || got[q] == want[q], "%d threads: A(%zu,%zu) = %g, want %g",
                    threads, q / M, q % M, got[q], want[q]);
    }
    tj_kernel_free(k);
    tj_tensor_free(A);
  }
  free(want), free(got), free(stored), free(has);
  tj_tensor_free(B), tj_tensor_free(C);
  tj_context_free(cx);
}
END_TEST

/* What still runs on one thread says why. */
static const struct {
  const char *expr, *fa, *fy, *sched, *msg;
} REFUSALS[] = {
    {"y(i) = A(j,i) * x(j)", "ss", "s", "parallelize(j, partials)",
     "parallelize(j, partials): the loop walks a sparse level; partial sparse outputs bound a "
     "dense outer loop"},
    {"y(i) = A(j,i) * x(j)", "ds", "o", "parallelize(j, partials)",
     "merged level by level for dense and compressed levels; y's level 0 is "},
    {"y(i) = reduce(g, j, A(j,i) * x(j))", "ds", "s", "parallelize(j, partials)",
     "a definition's reduction combines dense partial outputs only"},
    {"y(i,j) = A(i,j) * x(j)", "ds", "ds", "parallelize(i, partials)",
     "are concatenated already; use parallelize(i)"},
    {"y(i) = A(j,i) * x(j)", "ds", "s", "parallelize(j)",
     "writes a shared output (a reduction"},
};
enum { NREFUSALS = sizeof REFUSALS / sizeof REFUSALS[0] };

START_TEST(refusals) {
  for (int r = 0; r < NREFUSALS; r++) {
    tj_context *cx;   /* a context each: a refused plan is no cached kernel */
    ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
    tj_tensor *A = matrix_a(TJ_F64, REFUSALS[r].fa, D), *x = vector_x(TJ_F64);
    tj_tensor *y = tensor("y", TJ_F64, REFUSALS[r].fy, (int)strlen(REFUSALS[r].fy),
                          (int64_t[]){N, N});
    tj_options o = tj_options_default();
    o.defs = "g(a, b) = a + b + 1 identity -1 commutative associative";
    tj_kernel *k = NULL;
    tj_status st = tj_compile(cx, REFUSALS[r].expr, (tj_tensor *[]){y, A, x}, 3,
                              REFUSALS[r].sched, &o, &k);
    ck_assert_msg(st == TJ_ERR_UNSUPPORTED && strstr(tj_last_error(), REFUSALS[r].msg),
                  "refusal %d: status %d, '%s'", r, st, tj_last_error());
    tj_tensor_free(A), tj_tensor_free(x), tj_tensor_free(y);
    tj_context_free(cx);
  }
}
END_TEST

static Suite *par_sparse_suite(void) {
  Suite *s = suite_create("par_sparse");
  TCase *tc = tcase_create("sparse partials");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, vector_by_hand, 0, NCASES);
  tcase_add_test(tc, small_work_stays_serial);
  tcase_add_test(tc, dcsr_rows_by_hand);
  tcase_add_test(tc, refusals);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(par_sparse_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

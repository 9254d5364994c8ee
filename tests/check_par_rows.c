/* Reductions into a dense output run on two threads with one partial
 * output per thread (jit/driver_run.c: partial_chunks, run_rows for CSC's
 * outer reduction loop, run_segments for COO's and DCSR's row positions):
 * y(i) = A(i,j) * x(j) on 2 threads against a serial loop in the test, for
 * plus.times, min.plus, max and a user's operator, f64 / f32 / i64, = and
 * +=, both backends;
 * the path is pinned by the chunk outputs a kernel keeps (one fewer than
 * the threads where the output itself is the first thread's partial: under
 * =, and by positions under += too), and the cost model's refusals by none
 * kept.
 *
 * A is N x N with D entries per column j at rows (7j + 131e + e^2) % N,
 * e < D, none in rows r % 10 == 3 (empty rows: the reduction's identity),
 * valued (r + j) % 5 + 1 (scaled by 0.1 in the f64 cases, so sums round
 * and two runs must agree to the bit); x(j) = j % 7 + 1.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jit/driver.h"

enum { N = 3000, D = 12 };

/* plus.times, min.plus, max, and g(a, b) = a + b + 1 (identity -1): a
 * user's operator, combined by the entry's combine kernel */
typedef enum { RED_PLUS, RED_MINPLUS, RED_MAX, RED_DEF } Red;

typedef struct Case {
  const char *fmt;          /* A's format */
  tj_dtype dt;
  Red red;
  bool acc;                 /* y(i) += ... over y(i) = i % 3 */
  int backend;
} Case;

static const Case CASES[] = {
    {"ds:1,0", TJ_F64, RED_PLUS, false, TJ_BACKEND_LLVM},
    {"uq", TJ_F64, RED_PLUS, false, TJ_BACKEND_LLVM},
    {"ss", TJ_F64, RED_PLUS, false, TJ_BACKEND_LLVM},
    {"ds:1,0", TJ_F64, RED_MINPLUS, false, TJ_BACKEND_LLVM},
    {"uq", TJ_F64, RED_MINPLUS, false, TJ_BACKEND_LLVM},
    {"ds:1,0", TJ_F64, RED_PLUS, true, TJ_BACKEND_LLVM},
    {"uq", TJ_F64, RED_PLUS, true, TJ_BACKEND_LLVM},
    {"uq", TJ_F64, RED_MINPLUS, true, TJ_BACKEND_LLVM},
    {"ds:1,0", TJ_F32, RED_PLUS, false, TJ_BACKEND_LLVM},
    {"uq", TJ_I64, RED_PLUS, false, TJ_BACKEND_LLVM},
    {"ds:1,0", TJ_I64, RED_MAX, false, TJ_BACKEND_LLVM},
    {"uq", TJ_F64, RED_MAX, false, TJ_BACKEND_LLVM},
    {"ds:1,0", TJ_I64, RED_DEF, false, TJ_BACKEND_LLVM},
    {"uq", TJ_I64, RED_DEF, false, TJ_BACKEND_LLVM},
    {"ds:1,0", TJ_F64, RED_MINPLUS, false, TJ_BACKEND_C},
    {"uq", TJ_F64, RED_PLUS, true, TJ_BACKEND_C},
};
enum { NCASES = sizeof CASES / sizeof CASES[0] };

static int64_t row_of(int64_t j, int64_t e) { return (7 * j + 131 * e + e * e) % N; }

static double value_of(const Case *c, int64_t r, int64_t j) {
  double v = (double)((r + j) % 5 + 1);
  return c->dt == TJ_F64 ? v * 0.1 : v;
}

/* A with d entries per column (as above) in format fmt. */
static tj_tensor *matrix(const Case *c, int d) {
  tj_format f;
  ck_assert_int_eq(tj_format_parse(c->fmt, &f), TJ_OK);
  int64_t dims[2] = {N, N};
  tj_tensor *A;
  ck_assert_int_eq(tj_tensor_new("A", c->dt, 2, dims, &f, &A), TJ_OK);
  for (int64_t j = 0; j < N; j++)
    for (int64_t e = 0; e < d; e++) {
      int64_t r = row_of(j, e);
      if (r % 10 != 3)
        ck_assert_int_eq(tj_tensor_insert(A, (int64_t[]){r, j}, value_of(c, r, j)), TJ_OK);
    }
  ck_assert_int_eq(tj_tensor_pack(A), TJ_OK);
  return A;
}

static tj_tensor *vector(const char *name, tj_dtype dt, int kind) {
  tj_format f = tj_format_dense(1);
  int64_t n = N;
  tj_tensor *v;
  ck_assert_int_eq(tj_tensor_new(name, dt, 1, &n, &f, &v), TJ_OK);
  for (int64_t i = 0; kind && i < N; i++)
    ck_assert_int_eq(tj_tensor_insert(v, &i, kind == 1 ? (double)(i % 7 + 1) : (double)(i % 3)),
                     TJ_OK);
  ck_assert_int_eq(tj_tensor_pack(v), TJ_OK);
  return v;
}

/* The serial loop: want[r] = y0[r] (+= only) combined with every term. */
static void by_hand(const Case *c, double *want) {
  double id = c->red == RED_PLUS ? 0 : c->red == RED_MINPLUS ? INFINITY
              : c->red == RED_MAX ? -INFINITY : -1;
  for (int64_t r = 0; r < N; r++) want[r] = c->acc ? (double)(r % 3) : id;
  double *part = malloc(N * sizeof *part);
  for (int64_t r = 0; r < N; r++) part[r] = id;
  for (int64_t j = 0; j < N; j++)
    for (int64_t e = 0; e < D; e++) {
      int64_t r = row_of(j, e);
      if (r % 10 == 3) continue;
      double a = value_of(c, r, j), x = (double)(j % 7 + 1);
      part[r] = c->red == RED_PLUS ? part[r] + a * x
                : c->red == RED_MINPLUS ? fmin(part[r], a + x)
                : c->red == RED_MAX ? fmax(part[r], a * x) : part[r] + a * x + 1;
    }
  for (int64_t r = 0; r < N; r++)
    want[r] = !c->acc ? part[r]
              : c->red == RED_PLUS ? want[r] + part[r]
              : c->red == RED_MINPLUS ? fmin(want[r], part[r]) : fmax(want[r], part[r]);
  free(part);
}

static const char *expr_of(const Case *c) {
  if (c->red == RED_MAX) return "y(i) = reduce(max, j, A(i,j) * x(j))";
  if (c->red == RED_DEF) return "y(i) = reduce(g, j, A(i,j) * x(j))";
  return c->acc ? "y(i) += A(i,j) * x(j)" : "y(i) = A(i,j) * x(j)";
}

/* Runs c on the given threads; y's values into got, the kept chunk
 * outputs' count. */
static int run_on(tj_context *cx, const Case *c, tj_tensor *A, double *got, int threads) {
  tj_tensor *x = vector("x", c->dt, 1), *y = vector("y", c->dt, c->acc ? 2 : 0);
  tj_options o = tj_options_default();
  o.nthreads = threads;
  o.backend = c->backend;
  o.semiring = c->red == RED_MINPLUS ? "min.plus" : NULL;
  o.defs = "g(a, b) = a + b + 1 identity -1 commutative associative";
  tj_kernel *k;
  ck_assert_msg(tj_compile(cx, expr_of(c), (tj_tensor *[]){y, A, x}, 3, NULL, &o, &k) == TJ_OK,
                "%s", tj_last_error());
  ck_assert_msg(tj_kernel_run(k, TJ_EVALUATE, NULL, 0) == TJ_OK, "%s", tj_last_error());
  for (int64_t i = 0; i < N; i++) ck_assert_int_eq(tj_tensor_get(y, &i, &got[i]), TJ_OK);
  int kept = k->nchunks;
  tj_kernel_free(k);
  tj_tensor_free(x), tj_tensor_free(y);
  return kept;
}

START_TEST(two_threads_by_hand) {
  const Case *c = &CASES[_i];
  setenv("TJ_PAR_MIN_WORK", "0", 1);
  tj_context *cx;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  tj_tensor *A = matrix(c, D);
  double *want = malloc(N * sizeof *want), *got = malloc(N * sizeof *got);
  double *again = malloc(N * sizeof *again), *one = malloc(N * sizeof *one);
  by_hand(c, want);
  int kept = run_on(cx, c, A, got, 2);
  /* under = the first chunk writes y itself; under += every chunk has a
   * partial of its own, so a failed run leaves y as it was */
  int want_kept = c->acc ? 2 : 1;
  ck_assert_msg(kept == want_kept, "case %d (%s): %d chunk outputs kept, want %d", _i, c->fmt,
                kept, want_kept);
  run_on(cx, c, A, one, 1);
  for (int64_t r = 0; r < N; r++) {
    if (r % 10 == 3 && c->dt != TJ_F64 && c->dt != TJ_F32) {   /* an integer's identity */
      ck_assert_msg(got[r] == one[r], "case %d: empty row %lld: %g, one thread %g", _i,
                    (long long)r, got[r], one[r]);
      continue;
    }
    double tol = c->dt == TJ_F64 && c->red == RED_PLUS ? 1e-9 * (1 + fabs(want[r])) : 0;
    ck_assert_msg(fabs(got[r] - want[r]) <= tol || got[r] == want[r],
                  "case %d (%s, %s): y(%lld) = %.17g, want %.17g", _i, c->fmt, expr_of(c),
                  (long long)r, got[r], want[r]);
  }
  run_on(cx, c, A, again, 2);   /* the same bits on every run */
  ck_assert_msg(memcmp(got, again, N * sizeof *got) == 0, "case %d: two runs differ", _i);
  free(want), free(got), free(again), free(one);
  tj_tensor_free(A);
  tj_context_free(cx);
}
END_TEST

/* The cost model keeps small work on one thread: D = 4 entries a column
 * (work under 4 x 2 x N), and D = 12 under the default TJ_PAR_MIN_WORK
 * (work under 2^20). No chunk outputs then; the same values. */
START_TEST(small_work_stays_serial) {
  static const struct { int d; const char *min_work; } small[] = {{4, "0"}, {D, NULL}};
  tj_context *cx;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  for (int s = 0; s < 2; s++)
    for (int f = 0; f < 2; f++) {
      const Case *c = &CASES[f];
      if (small[s].min_work) setenv("TJ_PAR_MIN_WORK", small[s].min_work, 1);
      else unsetenv("TJ_PAR_MIN_WORK");
      tj_tensor *A = matrix(c, small[s].d);
      double *got = malloc(N * sizeof *got);
      int kept = run_on(cx, c, A, got, 2);
      ck_assert_msg(kept == 0, "%s, D = %d: %d chunk outputs kept, want none", c->fmt,
                    small[s].d, kept);
      free(got);
      tj_tensor_free(A);
    }
  setenv("TJ_PAR_MIN_WORK", "0", 1);
  tj_context_free(cx);
}
END_TEST

static Suite *par_rows_suite(void) {
  Suite *s = suite_create("par_rows");
  TCase *tc = tcase_create("partials");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, two_threads_by_hand, 0, NCASES);
  tcase_add_test(tc, small_work_stays_serial);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(par_rows_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

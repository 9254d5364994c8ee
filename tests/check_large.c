/* Large inputs, behind TJ_LARGE=1 (a visible skip otherwise): a 10^7 x 10^7
 * CSR matrix with 10^8 entries is inserted, packed, converted to CSC, and
 * runs SpMV in both formats; y is checked entry by entry against plain C
 * loops over the same generator, and the peak resident memory is printed
 * and must stay under 16 GiB (the machine has 24). TJ_LARGE_ROWS and
 * TJ_LARGE_PER_ROW shrink it (defaults 10^7 and 10). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "tensorjit.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

static int64_t rows = 10000000, per_row = 10;

/* Entry k of row i: a column (distinct for k < 10 in a row) and a value. */
static int64_t col_of(int64_t i, int64_t k) { return (i * 7919 + k * 1000003) % rows; }
static double val_of(int64_t i, int64_t k) { return (double)((i + 3 * k) % 13) - 6; }
static double x_of(int64_t j) { return 1 + 0.25 * (double)(j % 17); }

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long peak_rss_mib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024;
}

/* Runs y(i) = A(i,j) * x(j) and checks every y(i) against the generator. */
static void spmv_checked(tj_context *cx, tj_tensor *A, tj_tensor *x, tj_tensor *y,
                         const char *what) {
  tj_tensor *ops[3] = {y, A, x};
  tj_kernel *k;
  double t0 = seconds();
  OK(tj_compile(cx, "y(i) = A(i,j) * x(j)", ops, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  double t1 = seconds();
  for (int64_t i = 0; i < rows; i++) {
    double want = 0, got;
    for (int64_t e = 0; e < per_row; e++) want += val_of(i, e) * x_of(col_of(i, e));
    OK(tj_tensor_get(y, &i, &got));
    if (fabs(got - want) > 1e-9 * (1 + fabs(want)))
      ck_abort_msg("%s: y(%lld) = %.17g, want %.17g", what, (long long)i, got, want);
  }
  printf("check_large: SpMV %s: %.2f s (compile and run), y checked; peak RSS %ld MiB\n", what,
         t1 - t0, peak_rss_mib());
  tj_kernel_free(k);
}

START_TEST(csr_1e7_by_1e7_with_1e8_entries) {
  if (!getenv("TJ_LARGE")) {
    printf("SKIP check_large: set TJ_LARGE=1 (needs about 10 GB of memory and minutes)\n");
    return;
  }
  if (getenv("TJ_LARGE_ROWS")) rows = strtoll(getenv("TJ_LARGE_ROWS"), NULL, 10);
  if (getenv("TJ_LARGE_PER_ROW")) per_row = strtoll(getenv("TJ_LARGE_PER_ROW"), NULL, 10);
  ck_assert(rows > 0 && per_row > 0 && per_row <= 10);
  int64_t dims[2] = {rows, rows};
  tj_format csr, csc;
  OK(tj_format_parse("ds", &csr));
  OK(tj_format_parse("ds:1,0", &csc));
  tj_tensor *A, *x, *y, *B;
  double t0 = seconds();
  OK(tj_tensor_new("A", TJ_F64, 2, dims, &csr, &A));
  for (int64_t i = 0; i < rows; i++)
    for (int64_t e = 0; e < per_row; e++) {
      int64_t c[2] = {i, col_of(i, e)};
      OK(tj_tensor_insert(A, c, val_of(i, e)));
    }
  double t1 = seconds();
  OK(tj_tensor_pack(A));
  double t2 = seconds();
  ck_assert_int_eq(tj_tensor_nnz(A), rows * per_row);
  printf("check_large: %lld x %lld, %lld entries: insert %.1f s, pack %.1f s, %.2f GB packed; "
         "peak RSS %ld MiB\n", (long long)rows, (long long)rows, (long long)(rows * per_row),
         t1 - t0, t2 - t1, (double)tj_tensor_bytes(A) / 1e9, peak_rss_mib());
  tj_format dense = tj_format_dense(1);
  OK(tj_tensor_new("x", TJ_F64, 1, &rows, &dense, &x));
  for (int64_t j = 0; j < rows; j++) OK(tj_tensor_insert(x, &j, x_of(j)));
  OK(tj_tensor_pack(x));
  OK(tj_tensor_new("y", TJ_F64, 1, &rows, &dense, &y));
  tj_context *cx;
  OK(tj_context_new(&cx));
  spmv_checked(cx, A, x, y, "CSR");
  double t3 = seconds();
  OK(tj_tensor_convert(A, &csc, &B));
  printf("check_large: convert to CSC %.1f s; peak RSS %ld MiB\n", seconds() - t3, peak_rss_mib());
  tj_tensor_free(A);
  spmv_checked(cx, B, x, y, "CSC");
  long peak = peak_rss_mib();
  ck_assert_msg(peak < 16 * 1024, "peak RSS %ld MiB", peak);
  tj_context_free(cx);
  tj_tensor_free(B);
  tj_tensor_free(x);
  tj_tensor_free(y);
}
END_TEST

int main(void) {
  Suite *s = suite_create("large");
  TCase *c = tcase_create("large");
  tcase_add_test(c, csr_1e7_by_1e7_with_1e8_entries);
  tcase_set_timeout(c, 0);
  suite_add_tcase(s, c);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}

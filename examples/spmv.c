/* A complete tensorjit program: read a sparse matrix (or make one), compile
 * y(i) = A(i,j) * x(j) for CSR A, run it, check it against a plain loop over
 * A's entries (and, when A is small enough to densify, against the
 * reference interpreter too) and show the generated loop IR as C.
 *   example_spmv [matrix.mtx]
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "tensorjit.h"

#define CHECK(call)                                                    \
  do {                                                                 \
    if ((call) != TJ_OK) {                                             \
      fprintf(stderr, "example_spmv: %s\n", tj_last_error());         \
      return 1;                                                        \
    }                                                                  \
  } while (0)

static int make_random(tj_tensor **A) {
  int64_t dims[2] = {1000, 1000};
  tj_format csr;
  CHECK(tj_format_parse("ds", &csr));
  CHECK(tj_tensor_new("A", TJ_F64, 2, dims, &csr, A));
  srand(42);
  for (int64_t i = 0; i < dims[0]; i++)
    for (int k = 0; k < 8; k++) {
      int64_t c[2] = {i, rand() % dims[1]};
      CHECK(tj_tensor_insert(*A, c, (double)rand() / RAND_MAX));
    }
  return tj_tensor_pack(*A) == TJ_OK ? 0 : 1;
}

int main(int argc, char **argv) {
  tj_tensor *A = NULL, *x = NULL, *y = NULL, *yref = NULL;
  if (argc > 1) {
    tj_format csr;
    CHECK(tj_format_parse("ds", &csr));
    CHECK(tj_tensor_read(argv[1], "A", &csr, &A));
  } else if (make_random(&A) != 0) {
    return 1;
  }
  int64_t n = tj_tensor_dim(A, 0), m = tj_tensor_dim(A, 1);
  tj_format vec = tj_format_dense(1);
  CHECK(tj_tensor_new("x", TJ_F64, 1, &m, &vec, &x));
  CHECK(tj_tensor_new("y", TJ_F64, 1, &n, &vec, &y));
  CHECK(tj_tensor_new("y", TJ_F64, 1, &n, &vec, &yref));
  for (int64_t j = 0; j < m; j++) CHECK(tj_tensor_insert(x, &j, 1.0 + (double)(j % 7)));
  CHECK(tj_tensor_pack(x));

  tj_context *cx;
  CHECK(tj_context_new(&cx));
  tj_tensor *ops[] = {y, A, x};
  tj_kernel *k;
  CHECK(tj_compile(cx, "y(i) = A(i,j) * x(j)", ops, 3, NULL, NULL, &k));
  CHECK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));

  /* An independent check: y = A x summed over A's entries in plain C. */
  int64_t *coords = NULL, nnz = 0;
  double *vals = NULL, *want = calloc((size_t)(n ? n : 1), sizeof(double));
  if (!want) return 1;
  CHECK(tj_tensor_unpack(A, &coords, &vals, &nnz));
  for (int64_t e = 0; e < nnz; e++)
    want[coords[2 * e]] += vals[e] * (1.0 + (double)(coords[2 * e + 1] % 7));
  free(coords), free(vals);
  /* The reference interpreter evaluates on dense arrays (n * m cells), so
   * only a small A goes through it. */
  bool small = (double)n * (double)m <= 4e6;
  if (small) {
    tj_tensor *refops[] = {yref, A, x};
    CHECK(tj_reference("y(i) = A(i,j) * x(j)", refops, 3));
  }
  double err = 0, ref_err = 0;
  for (int64_t i = 0; i < n; i++) {
    double a, b = 0;
    CHECK(tj_tensor_get(y, &i, &a));
    if (small) CHECK(tj_tensor_get(yref, &i, &b));
    if (fabs(a - want[i]) > err) err = fabs(a - want[i]);
    if (small && fabs(a - b) > ref_err) ref_err = fabs(a - b);
  }
  free(want);
  err = fmax(err, ref_err);
  tj_compile_times t = tj_kernel_times(k);
  printf("A: %lld x %lld, %lld stored entries (CSR)\n", (long long)n, (long long)m,
         (long long)tj_tensor_nnz(A));
  printf("compiled y(i) = A(i,j) * x(j) in %.1f ms (LLVM IR %.1f, optimize %.1f, "
         "machine code %.1f)\n", t.total_ms, t.llvm_ir_ms, t.optimize_ms, t.codegen_ms);
  printf("max |y - plain loop| = %g%s\n", err,
         small ? " (and against the reference interpreter)" : "");
  printf("\nthe kernel, as C:\n");
  CHECK(tj_kernel_print(k, TJ_STAGE_COMPUTE, stdout));
  tj_context_free(cx);
  tj_tensor_free(A);
  tj_tensor_free(x);
  tj_tensor_free(y);
  tj_tensor_free(yref);
  tj_shutdown();
  return err < 1e-9 ? 0 : 1;
}

/* Tensors over caller arrays (tj_tensor_wrap / tj_tensor_adopt) and
 * reading a tensor's arrays in place (tj_tensor_arrays): kernels read
 * wrapped inputs in place, so a value changed by the caller shows in the
 * next run; dense outputs are written into the caller's array; every
 * malformed array is refused with a message naming its first bad entry.
 * Expected values are worked out by hand in the comments. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"
#include "util/tensors.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

/* The 3 x 4 matrix used throughout:
 *   [0 2 0 1]
 *   [0 0 0 0]
 *   [3 0 4 0]
 * CSR: pos {0,2,2,4}, crd {1,3,0,2}, vals {2,1,3,4}. */
static const int64_t dims34[2] = {3, 4};

static tj_arrays csr_arrays(const tj_format *f, int32_t *pos, int32_t *crd, double *vals) {
  tj_arrays a = {.dtype = TJ_F64, .order = 2, .dims = dims34, .fmt = f};
  a.pos[1] = pos, a.pos_len[1] = 4;
  a.crd[1] = crd, a.crd_len[1] = pos[3];
  a.vals = vals, a.vals_len = pos[3];
  return a;
}

static tj_arrays dense_arrays(tj_dtype dt, int order, const int64_t *dims, void *vals,
                              int64_t n) {
  tj_arrays a = {.dtype = dt, .order = order, .dims = dims};
  a.vals = vals, a.vals_len = n;
  return a;
}

static tj_kernel *compile(tj_context *cx, const char *expr, tj_tensor **ops, int n) {
  tj_kernel *k;
  OK(tj_compile(cx, expr, ops, n, NULL, NULL, &k));
  return k;
}

/* y = A x with A = the matrix above, x = (1, 2, 3, 4): y = (2*2 + 1*4, 0,
 * 3*1 + 4*3) = (8, 0, 15). Then A(0,1) = 10 and x(2) = -1 in place:
 * y = (10*2 + 4, 0, 3 - 4) = (24, 0, -1). */
START_TEST(spmv_reads_wrapped_arrays_in_place) {
  tj_format csr;
  OK(tj_format_parse("ds", &csr));
  int32_t pos[] = {0, 2, 2, 4}, crd[] = {1, 3, 0, 2};
  double vals[] = {2, 1, 3, 4}, x[] = {1, 2, 3, 4}, y[] = {99, 99, 99};
  int64_t n3 = 3, n4 = 4;
  tj_arrays aa = csr_arrays(&csr, pos, crd, vals);
  tj_arrays xa = dense_arrays(TJ_F64, 1, &n4, x, 4), ya = dense_arrays(TJ_F64, 1, &n3, y, 3);
  tj_tensor *ops[3];
  OK(tj_tensor_wrap("y", &ya, 0, &ops[0]));
  OK(tj_tensor_wrap("A", &aa, 0, &ops[1]));
  OK(tj_tensor_wrap("x", &xa, 0, &ops[2]));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = compile(cx, "y(i) = A(i,j) * x(j)", ops, 3);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  ck_assert(y[0] == 8 && y[1] == 0 && y[2] == 15);
  vals[0] = 10, x[2] = -1;
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  ck_assert_msg(y[0] == 24 && y[1] == 0 && y[2] == -1, "y = %g %g %g", y[0], y[1], y[2]);
  tj_arrays got;
  OK(tj_tensor_arrays(ops[0], &got));
  ck_assert_ptr_eq(got.vals, y);   /* the dense output was written in place */
  ck_assert_int_eq(got.vals_len, 3);
  tj_context_free(cx);
  for (int i = 0; i < 3; i++) tj_tensor_free(ops[i]);
  ck_assert(pos[3] == 4 && crd[3] == 2 && vals[3] == 4);   /* the caller's, untouched */
}
END_TEST

/* The same product from CSC arrays (mode order 1,0), which the kernel may
 * walk as stored or convert on each run: either way a value changed in
 * place is seen. CSC: pos {0,1,2,3,4}, crd {2,0,2,0}, vals {3,2,4,1};
 * y = (8, 0, 15), then A(0,1) = 10: y = (24, 0, 15). */
START_TEST(csc_input_changes_are_seen) {
  tj_format csc;
  OK(tj_format_parse("ds:1,0", &csc));
  int32_t pos[] = {0, 1, 2, 3, 4}, crd[] = {2, 0, 2, 0};
  double vals[] = {3, 2, 4, 1}, x[] = {1, 2, 3, 4}, y[3] = {0};
  int64_t n3 = 3, n4 = 4;
  tj_arrays aa = {.dtype = TJ_F64, .order = 2, .dims = dims34, .fmt = &csc};
  aa.pos[1] = pos, aa.pos_len[1] = 5, aa.crd[1] = crd, aa.crd_len[1] = 4;
  aa.vals = vals, aa.vals_len = 4;
  tj_arrays xa = dense_arrays(TJ_F64, 1, &n4, x, 4), ya = dense_arrays(TJ_F64, 1, &n3, y, 3);
  tj_tensor *ops[3];
  OK(tj_tensor_wrap("y", &ya, 0, &ops[0]));
  OK(tj_tensor_wrap("A", &aa, 0, &ops[1]));
  OK(tj_tensor_wrap("x", &xa, 0, &ops[2]));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = compile(cx, "y(i) = A(i,j) * x(j)", ops, 3);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  ck_assert_msg(y[0] == 8 && y[1] == 0 && y[2] == 15, "y = %g %g %g", y[0], y[1], y[2]);
  vals[1] = 10;
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  ck_assert_msg(y[0] == 24 && y[1] == 0 && y[2] == 15, "y = %g %g %g", y[0], y[1], y[2]);
  tj_context_free(cx);
  for (int i = 0; i < 3; i++) tj_tensor_free(ops[i]);
}
END_TEST

/* The operands A = [0 2 0 1; 0 0 0 0; 3 0 4 0] and B = [0 5 7 0; 0 0 0 0;
 * 0 0 2 0] as caller arrays (CSR), wrapped under their names. */
typedef struct TwoCsr {
  int32_t apos[4], acrd[4], bpos[4], bcrd[3];
  double avals[4], bvals[3];
} TwoCsr;

static void wrap_two(TwoCsr *m, const tj_format *csr, tj_tensor **a, tj_tensor **b) {
  *m = (TwoCsr){{0, 2, 2, 4}, {1, 3, 0, 2}, {0, 2, 2, 3}, {1, 2, 2}, {2, 1, 3, 4}, {5, 7, 2}};
  tj_arrays aa = csr_arrays(csr, m->apos, m->acrd, m->avals);
  tj_arrays ba = csr_arrays(csr, m->bpos, m->bcrd, m->bvals);
  OK(tj_tensor_wrap("A", &aa, 0, a));
  OK(tj_tensor_wrap("B", &ba, 0, b));
}

/* A wrapped CSR output C over the caller's arrays (cpos, ccrd, cvals:
 * pos[3] entries), the operands A and B of wrap_two, and a context: ops is
 * {C, A, B}. wrapped_out_free releases all but the caller's arrays. */
typedef struct WrappedOut {
  TwoCsr m;
  tj_tensor *ops[3];
  tj_context *cx;
} WrappedOut;

static void wrapped_out(WrappedOut *w, int32_t *cpos, int32_t *ccrd, double *cvals) {
  tj_format csr;
  OK(tj_format_parse("ds", &csr));
  tj_arrays ca = csr_arrays(&csr, cpos, ccrd, cvals);
  OK(tj_tensor_wrap("C", &ca, 0, &w->ops[0]));
  wrap_two(&w->m, &csr, &w->ops[1], &w->ops[2]);
  OK(tj_context_new(&w->cx));
}

static void wrapped_out_free(WrappedOut *w) {
  tj_context_free(w->cx);
  for (int i = 0; i < 3; i++) tj_tensor_free(w->ops[i]);
}

/* Checks that 3 x 4 CSR tensor t holds n entries: pos, crd and vals (its
 * arrays as tj_tensor_arrays hands them out). */
static void expect_csr(tj_tensor *t, int64_t n, const int32_t *pos, const int32_t *crd,
                       const double *vals) {
  tj_arrays c;
  OK(tj_tensor_arrays(t, &c));
  ck_assert_int_eq(c.vals_len, n);
  ck_assert(memcmp(c.pos[1], pos, 4 * sizeof *pos) == 0);
  ck_assert(memcmp(c.crd[1], crd, (size_t)n * sizeof *crd) == 0);
  ck_assert(memcmp(c.vals, vals, (size_t)n * sizeof *vals) == 0);
}

/* C = A .* B, B = [0 5 7 0; 0 0 0 0; 0 0 2 0] (CSR pos {0,2,2,3}, crd
 * {1,2,2}, vals {5,7,2}): C holds (0,1) = 10 and (2,2) = 8, so pos
 * {0,1,1,2}, crd {1,2}, vals {10,8}. After A(2,2) = 0.5 in place, a compute
 * run alone (no assemble, no recompile) gives vals {10, 1}. */
START_TEST(compute_rerun_after_values_change) {
  tj_format csr;
  OK(tj_format_parse("ds", &csr));
  TwoCsr m;
  tj_tensor *ops[3];
  OK(tj_tensor_new("C", TJ_F64, 2, dims34, &csr, &ops[0]));
  wrap_two(&m, &csr, &ops[1], &ops[2]);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = compile(cx, "C(i,j) = A(i,j) * B(i,j)", ops, 3);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  tj_arrays c;
  OK(tj_tensor_arrays(ops[0], &c));
  ck_assert_int_eq(c.pos_len[1], 4);
  ck_assert_int_eq(c.crd_len[1], 2);
  ck_assert_int_eq(c.vals_len, 2);
  const int32_t *cp = c.pos[1], *cc = c.crd[1];
  const double *cv = c.vals;
  ck_assert(cp[0] == 0 && cp[1] == 1 && cp[2] == 1 && cp[3] == 2);
  ck_assert(cc[0] == 1 && cc[1] == 2);
  ck_assert(cv[0] == 10 && cv[1] == 8);
  m.avals[3] = 0.5;
  OK(tj_kernel_run(k, TJ_COMPUTE, NULL, 0));
  OK(tj_tensor_arrays(ops[0], &c));
  cv = c.vals;
  ck_assert_msg(cv[0] == 10 && cv[1] == 1, "C vals %g %g", cv[0], cv[1]);
  tj_context_free(cx);
  for (int i = 0; i < 3; i++) tj_tensor_free(ops[i]);
}
END_TEST

/* A wrapped sparse output too small for the result: the result goes into
 * arrays of the tensor's own, all of them, and the caller's (stack) arrays
 * keep the old, empty matrix: its pos is not half new (pos {0,3,3,5} over a
 * 1-entry crd would send a caller reading it past the end). A + B =
 * [0 7 7 1; 0 0 0 0; 3 0 6 0]: pos {0,3,3,5}, crd {1,2,3,0,2}, vals
 * {7,7,1,3,6}. */
START_TEST(wrapped_sparse_output_grows_into_its_own_arrays) {
  int32_t cpos[] = {0, 0, 0, 0}, ccrd[1] = {-7};
  double cvals[1] = {-7};
  WrappedOut w;
  wrapped_out(&w, cpos, ccrd, cvals);   /* empty: 0 entries */
  tj_tensor **ops = w.ops;
  tj_kernel *k = compile(w.cx, "C(i,j) = A(i,j) + B(i,j)", ops, 3);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  tj_arrays c;
  OK(tj_tensor_arrays(ops[0], &c));
  ck_assert_ptr_ne(c.pos[1], cpos);
  ck_assert_ptr_ne(c.crd[1], ccrd);
  ck_assert_ptr_ne(c.vals, cvals);
  expect_csr(ops[0], 5, (int32_t[]){0, 3, 3, 5}, (int32_t[]){1, 2, 3, 0, 2},
             (double[]){7, 7, 1, 3, 6});
  double v;
  int64_t at[2] = {2, 2};
  OK(tj_tensor_get(ops[0], at, &v));
  ck_assert(v == 6);
  wrapped_out_free(&w);
  ck_assert(ccrd[0] == -7 && cvals[0] == -7);
  ck_assert(cpos[0] == 0 && cpos[1] == 0 && cpos[2] == 0 && cpos[3] == 0);
}
END_TEST

/* C = [1 0 0 0; 0 0 0 2; 0 0 0 0] wrapped (pos {0,1,2,2}, crd {0,3}, vals
 * {1,2}), then C += A .* B' where the product adds (0,1) and (2,2), as
 * the reviewer's scipy program did (SpGEMM += into a wrapped CSR): A .* B
 * = [0 10 0 0; 0 0 0 0; 0 0 8 0], so C = [1 10 0 0; 0 0 0 2; 0 0 8 0]: pos
 * {0,2,3,4}, crd {0,1,3,2}, vals {1,10,2,8}. Four entries do not fit the
 * caller's two: the tensor holds the result, and the caller's arrays the
 * old C whole. By evaluate, and by assemble then compute. */
START_TEST(accumulate_into_wrapped_output_never_half_written) {
  for (int phases = 0; phases < 2; phases++) {
    int32_t cpos[] = {0, 1, 2, 2}, ccrd[] = {0, 3};
    double cvals[] = {1, 2};
    WrappedOut w;
    wrapped_out(&w, cpos, ccrd, cvals);
    tj_kernel *k = compile(w.cx, "C(i,j) += A(i,j) * B(i,j)", w.ops, 3);
    tu_run(k, phases);
    expect_csr(w.ops[0], 4, (int32_t[]){0, 2, 3, 4}, (int32_t[]){0, 1, 3, 2},
               (double[]){1, 10, 2, 8});
    /* the caller's arrays: the old C, whole */
    ck_assert(cpos[0] == 0 && cpos[1] == 1 && cpos[2] == 2 && cpos[3] == 2);
    ck_assert(ccrd[0] == 0 && ccrd[1] == 3 && cvals[0] == 1 && cvals[1] == 2);
    tj_kernel_free(k);
    wrapped_out_free(&w);
  }
}
END_TEST

/* A result that fits every wrapped array is written into the caller's,
 * all of them: C wrapped over A's pattern with zeros (pos {0,2,2,4}, crd
 * {1,3,0,2}), C = A .* A = [0 4 0 1; 0 0 0 0; 9 0 16 0] (4 entries) lands
 * in the caller's pos, crd and vals; then C = A .* B (2 entries: pos
 * {0,1,1,2}, crd {1,2}, vals {10,8}) too, its first two crd and vals. */
START_TEST(result_that_fits_goes_into_the_callers_arrays) {
  int32_t cpos[] = {0, 2, 2, 4}, ccrd[] = {1, 3, 0, 2};
  double cvals[] = {0, 0, 0, 0};
  WrappedOut w;
  wrapped_out(&w, cpos, ccrd, cvals);
  tj_tensor **ops = w.ops;
  tj_context *cx = w.cx;
  tj_tensor *sq[2] = {ops[0], ops[1]};
  tj_kernel *k = compile(cx, "C(i,j) = A(i,j) * A(i,j)", sq, 2);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  tj_arrays c;
  OK(tj_tensor_arrays(ops[0], &c));
  ck_assert_ptr_eq(c.pos[1], cpos);
  ck_assert_ptr_eq(c.crd[1], ccrd);
  ck_assert_ptr_eq(c.vals, cvals);
  ck_assert(cvals[0] == 4 && cvals[1] == 1 && cvals[2] == 9 && cvals[3] == 16);
  tj_kernel *k2 = compile(cx, "C(i,j) = A(i,j) * B(i,j)", ops, 3);
  OK(tj_kernel_run(k2, TJ_EVALUATE, NULL, 0));
  OK(tj_tensor_arrays(ops[0], &c));
  ck_assert_ptr_eq(c.pos[1], cpos);
  ck_assert_ptr_eq(c.vals, cvals);
  ck_assert_int_eq(c.vals_len, 2);
  ck_assert(cpos[0] == 0 && cpos[1] == 1 && cpos[2] == 1 && cpos[3] == 2);
  ck_assert(ccrd[0] == 1 && ccrd[1] == 2 && cvals[0] == 10 && cvals[1] == 8);
  tj_kernel_free(k), tj_kernel_free(k2);
  wrapped_out_free(&w);
}
END_TEST

/* i64 values past 2^53 go through a kernel exactly: y = A x with
 * A = [2^53+1  1] and x = (1, 2^60): y = 2^53 + 1 + 2^60. */
START_TEST(i64_wrapped_values_are_exact) {
  tj_format csr;
  OK(tj_format_parse("ds", &csr));
  int64_t d12[2] = {1, 2}, n1 = 1, n2 = 2;
  int32_t pos[] = {0, 2}, crd[] = {0, 1};
  int64_t vals[] = {(INT64_C(1) << 53) + 1, 1}, x[] = {1, INT64_C(1) << 60}, y[1] = {0};
  tj_arrays aa = {.dtype = TJ_I64, .order = 2, .dims = d12, .fmt = &csr};
  aa.pos[1] = pos, aa.pos_len[1] = 2, aa.crd[1] = crd, aa.crd_len[1] = 2;
  aa.vals = vals, aa.vals_len = 2;
  tj_arrays xa = dense_arrays(TJ_I64, 1, &n2, x, 2), ya = dense_arrays(TJ_I64, 1, &n1, y, 1);
  tj_tensor *ops[3];
  OK(tj_tensor_wrap("y", &ya, 0, &ops[0]));
  OK(tj_tensor_wrap("A", &aa, 0, &ops[1]));
  OK(tj_tensor_wrap("x", &xa, 0, &ops[2]));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = compile(cx, "y(i) = A(i,j) * x(j)", ops, 3);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  ck_assert(y[0] == (INT64_C(1) << 53) + 1 + (INT64_C(1) << 60));
  tj_context_free(cx);
  for (int i = 0; i < 3; i++) tj_tensor_free(ops[i]);
}
END_TEST

/* CSF ("sss") with 64-bit positions and coordinates. B is 2 x 3 x 4 with
 * (0,0,1) = 1, (0,0,3) = 2, (0,2,0) = 3, (1,1,2) = 4, c = (1, 10, 100, 1000):
 * A = B c has A(0,0) = 1*10 + 2*1000 = 2010, A(0,2) = 3, A(1,1) = 400.
 * Then B(1,1,2) = 5 in place: A(1,1) = 500. */
START_TEST(csf_with_64_bit_indices) {
  tj_format f;
  OK(tj_format_parse("sss", &f));
  f.pos_width = f.crd_width = 64;
  int64_t dims[3] = {2, 3, 4}, d23[2] = {2, 3}, n4 = 4;
  int64_t pos0[] = {0, 2}, crd0[] = {0, 1}, pos1[] = {0, 2, 3}, crd1[] = {0, 2, 1};
  int64_t pos2[] = {0, 2, 3, 4}, crd2[] = {1, 3, 0, 2};
  double vals[] = {1, 2, 3, 4}, c[] = {1, 10, 100, 1000}, a[6];
  tj_arrays ba = {.dtype = TJ_F64, .order = 3, .dims = dims, .fmt = &f,
                  .pos = {pos0, pos1, pos2}, .pos_len = {2, 3, 4},
                  .crd = {crd0, crd1, crd2}, .crd_len = {2, 3, 4}, .vals = vals, .vals_len = 4};
  tj_arrays ca = dense_arrays(TJ_F64, 1, &n4, c, 4), aa = dense_arrays(TJ_F64, 2, d23, a, 6);
  tj_tensor *ops[3];
  OK(tj_tensor_wrap("A", &aa, 0, &ops[0]));
  OK(tj_tensor_wrap("B", &ba, 0, &ops[1]));
  OK(tj_tensor_wrap("c", &ca, 0, &ops[2]));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = compile(cx, "A(i,j) = B(i,j,k) * c(k)", ops, 3);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  double want[6] = {2010, 0, 3, 0, 400, 0};
  ck_assert(memcmp(a, want, sizeof a) == 0);
  vals[3] = 5;
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  ck_assert_msg(a[4] == 500 && a[0] == 2010, "A(1,1) = %g", a[4]);
  tj_context_free(cx);
  for (int i = 0; i < 3; i++) tj_tensor_free(ops[i]);
  /* the same arrays with crd2[1] = 1: not increasing in the segment of
   * level-1 position 0 */
  crd2[1] = 1;
  tj_tensor *t;
  ck_assert_int_eq(tj_tensor_wrap("B", &ba, 0, &t), TJ_ERR_FORMAT);
  ck_assert_str_eq(tj_last_error(), "tensor B: level 2 (compressed): crd[1] = 1 does not "
                   "increase over crd[0] = 1 in the segment of parent position 0 (the level "
                   "is ordered and unique)");
}
END_TEST

/* Dense layouts: row-major, column-major (strides {1, 2}), a 3-D
 * transposition, and a unit dim with any stride. */
START_TEST(dense_strides_become_mode_orders) {
  int64_t d23[2] = {2, 3}, at[3];
  double row[] = {1, 2, 3, 4, 5, 6}, col[] = {1, 4, 2, 5, 3, 6}, v;
  tj_tensor *r, *c;
  tj_arrays a = dense_arrays(TJ_F64, 2, d23, row, 6);
  OK(tj_tensor_wrap("R", &a, 0, &r));
  a.vals = col;
  int64_t cs[2] = {1, 2};
  a.strides = cs;
  OK(tj_tensor_wrap("C", &a, 0, &c));
  ck_assert_int_eq(tj_tensor_format(c)->mode_order[0], 1);
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 3; j++) {
      at[0] = i, at[1] = j;
      OK(tj_tensor_get(r, at, &v));
      ck_assert(v == (double)(3 * i + j + 1));
      OK(tj_tensor_get(c, at, &v));
      ck_assert(v == (double)(3 * i + j + 1));
    }
  tj_tensor_free(r);
  tj_tensor_free(c);
  /* dims (2,3,4), strides (1,8,2): dim 0 innermost, then dim 2, then dim 1 */
  int64_t d234[3] = {2, 3, 4}, s3[3] = {1, 8, 2};
  double t3[24];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 4; k++) t3[i + 8 * j + 2 * k] = 100 * i + 10 * j + k;
  tj_arrays b = dense_arrays(TJ_F64, 3, d234, t3, 24);
  b.strides = s3;
  tj_tensor *t;
  OK(tj_tensor_wrap("T", &b, 0, &t));
  const tj_format *f = tj_tensor_format(t);
  ck_assert(f->mode_order[0] == 1 && f->mode_order[1] == 2 && f->mode_order[2] == 0);
  at[0] = 1, at[1] = 2, at[2] = 3;
  OK(tj_tensor_get(t, at, &v));
  ck_assert(v == 123);
  tj_tensor_free(t);
  int64_t d13[2] = {1, 3}, s13[2] = {999, 1};
  tj_arrays u = dense_arrays(TJ_F64, 2, d13, row, 3);
  u.strides = s13;
  OK(tj_tensor_wrap("U", &u, 0, &t));
  at[0] = 0, at[1] = 2;
  OK(tj_tensor_get(t, at, &v));
  ck_assert(v == 3);
  tj_tensor_free(t);
}
END_TEST

/* y = M x with M = [1 2 3; 4 5 6] stored column-major, x = (1, 1, 2):
 * y = (1 + 2 + 6, 4 + 5 + 12) = (9, 21). */
START_TEST(column_major_operand_in_a_kernel) {
  int64_t d23[2] = {2, 3}, s[2] = {1, 2}, n2 = 2, n3 = 3;
  double m[] = {1, 4, 2, 5, 3, 6}, x[] = {1, 1, 2}, y[2] = {0};
  tj_arrays ma = dense_arrays(TJ_F64, 2, d23, m, 6);
  ma.strides = s;
  tj_arrays xa = dense_arrays(TJ_F64, 1, &n3, x, 3), ya = dense_arrays(TJ_F64, 1, &n2, y, 2);
  tj_tensor *ops[3];
  OK(tj_tensor_wrap("y", &ya, 0, &ops[0]));
  OK(tj_tensor_wrap("M", &ma, 0, &ops[1]));
  OK(tj_tensor_wrap("x", &xa, 0, &ops[2]));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = compile(cx, "y(i) = M(i,j) * x(j)", ops, 3);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  ck_assert_msg(y[0] == 9 && y[1] == 21, "y = %g %g", y[0], y[1]);
  m[5] = 0;   /* M(1,2) = 0: y(1) = 9 */
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  ck_assert_msg(y[0] == 9 && y[1] == 9, "y = %g %g", y[0], y[1]);
  tj_context_free(cx);
  for (int i = 0; i < 3; i++) tj_tensor_free(ops[i]);
}
END_TEST

typedef struct BadStrides {
  int64_t strides[2];
  const char *fmt;
  tj_status status;
  const char *message;
} BadStrides;

static const BadStrides bad_strides[] = {
  {{4, 1}, NULL, TJ_ERR_UNSUPPORTED, "tensor S: dim 0 has stride 4 but a contiguous layout needs 3"},
  {{3, -1}, NULL, TJ_ERR_UNSUPPORTED, "tensor S: dim 1 has a negative stride (-1)"},
  {{3, 3}, NULL, TJ_ERR_UNSUPPORTED, "dim 1 has stride 3 but a contiguous layout needs 1"},
  {{3, 1}, "ds", TJ_ERR_INVALID, "tensor S: strides describe dense data, but the format has sparse levels"},
};

START_TEST(bad_strides_are_refused) {
  const BadStrides *c = &bad_strides[_i];
  int64_t d23[2] = {2, 3};
  double data[12] = {0};
  tj_format f;
  if (c->fmt) OK(tj_format_parse(c->fmt, &f));
  tj_arrays a = dense_arrays(TJ_F64, 2, d23, data, 6);
  a.strides = c->strides;
  a.fmt = c->fmt ? &f : NULL;
  tj_tensor *t = (tj_tensor *)&a;
  ck_assert_int_eq(tj_tensor_wrap("S", &a, 0, &t), c->status);
  ck_assert_ptr_null(t);
  ck_assert_msg(strstr(tj_last_error(), c->message), "%s", tj_last_error());
}
END_TEST

/* Malformed level arrays. Base cases: CSR "ds" of the matrix above
 * (pos {0,2,2,4}, crd {1,3,0,2}) and COO "uq" (level 0 pos {0,4}, rows
 * {0,0,2,2}, level 1 cols {1,3,0,2}). */
typedef struct BadArrays {
  const char *fmt;
  int32_t pos0[5], crd0[5], pos1[5], crd1[5];
  int64_t npos0, ncrd0, npos1, ncrd1, nvals;
  tj_status status;
  const char *message;
} BadArrays;

static const BadArrays bad_arrays[] = {
  {.fmt = "ds", .npos1 = 4, .ncrd1 = 4, .nvals = 4, .pos1 = {1, 2, 2, 4}, .crd1 = {1, 3, 0, 2}, .status = TJ_ERR_FORMAT, .message =
   "tensor A: level 1 (compressed): pos[0] = 1, must be 0"},
  {.fmt = "ds", .npos1 = 4, .ncrd1 = 4, .nvals = 4, .pos1 = {0, 3, 2, 4}, .crd1 = {1, 3, 0, 2}, .status = TJ_ERR_FORMAT, .message =
   "tensor A: level 1 (compressed): pos[2] = 2 is less than pos[1] = 3 (positions must not decrease)"},
  {.fmt = "ds", .npos1 = 4, .ncrd1 = 4, .nvals = 4, .pos1 = {0, 2, 2, 3}, .crd1 = {1, 3, 0, 2}, .status = TJ_ERR_SHAPE, .message =
   "tensor A: level 1 (compressed): pos[3] = 3 but the crd array has 4 entries"},
  {.fmt = "ds", .ncrd1 = 4, .nvals = 4, .pos1 = {0, 2, 4}, .crd1 = {1, 3, 0, 2}, .npos1 = 3, .status = TJ_ERR_SHAPE, .message =
   "tensor A: level 1 (compressed) needs a pos array of 4 entries (parent positions + 1), got 3"},
  {.fmt = "ds", .npos1 = 4, .ncrd1 = 4, .nvals = 4, .pos1 = {0, 2, 2, 4}, .crd1 = {1, 4, 0, 2}, .status = TJ_ERR_FORMAT, .message =
   "tensor A: level 1 (compressed): crd[1] = 4 is out of range 0..3"},
  {.fmt = "ds", .npos1 = 4, .ncrd1 = 4, .nvals = 4, .pos1 = {0, 2, 2, 4}, .crd1 = {1, 3, -1, 2}, .status = TJ_ERR_FORMAT, .message =
   "tensor A: level 1 (compressed): crd[2] = -1 is out of range 0..3"},
  {.fmt = "ds", .npos1 = 4, .ncrd1 = 4, .nvals = 4, .pos1 = {0, 2, 2, 4}, .crd1 = {3, 1, 0, 2}, .status = TJ_ERR_FORMAT, .message =
   "tensor A: level 1 (compressed): crd[1] = 1 does not increase over crd[0] = 3 in the "
   "segment of parent position 0 (the level is ordered and unique)"},
  {.fmt = "ds", .npos1 = 4, .ncrd1 = 4, .nvals = 4, .pos1 = {0, 2, 2, 4}, .crd1 = {1, 3, 2, 2}, .status = TJ_ERR_FORMAT, .message =
   "crd[3] = 2 does not increase over crd[2] = 2 in the segment of parent position 2"},
  {.fmt = "ds", .npos1 = 4, .ncrd1 = 4, .pos1 = {0, 2, 2, 4}, .crd1 = {1, 3, 0, 2}, .nvals = 3, .status = TJ_ERR_SHAPE, .message =
   "tensor A: needs 4 values (one per position of the last level), got 3"},
  {.npos1 = 4, .ncrd1 = 4, .nvals = 4, .fmt = "du", .pos1 = {0, 2, 2, 4}, .crd1 = {1, 3, 2, 0}, .status = TJ_ERR_FORMAT, .message =
   "tensor A: level 1 (compressed): crd[3] = 0 is less than crd[2] = 2 in the segment of "
   "parent position 2 (the level is ordered)"},
  {.fmt = "ds", .npos1 = 4, .ncrd1 = 4, .nvals = 4, .pos0 = {0, 1}, .npos0 = 2, .pos1 = {0, 2, 2, 4}, .crd1 = {1, 3, 0, 2}, .status = TJ_ERR_INVALID, .message =
   "tensor A: level 0 is dense and takes no pos or crd array"},
  {.fmt = "uq", .pos0 = {0, 4}, .npos0 = 2, .ncrd0 = 4, .ncrd1 = 4, .nvals = 4, .crd0 = {0, 0, 2, 2}, .crd1 = {1, 1, 0, 2}, .status = TJ_ERR_FORMAT, .message =
   "tensor A: level 1 (singleton): crd[1] = 1 does not increase over crd[0] = 1 under "
   "equal coordinates at parent position 1 (the level is ordered and unique)"},
  {.fmt = "uq", .pos0 = {0, 4}, .npos0 = 2, .ncrd0 = 4, .ncrd1 = 4, .nvals = 4, .crd0 = {0, 2, 0, 2}, .crd1 = {1, 0, 3, 2}, .status = TJ_ERR_FORMAT, .message =
   "tensor A: level 0 (compressed): crd[2] = 0 is less than crd[1] = 2"},
  {.fmt = "uq", .pos0 = {0, 4}, .npos0 = 2, .ncrd0 = 4, .ncrd1 = 4, .nvals = 4, .crd0 = {0, 0, 2, 2}, .crd1 = {3, 1, 0, 2}, .status = TJ_ERR_FORMAT, .message =
   "tensor A: level 1 (singleton): crd[1] = 1 does not increase over crd[0] = 3"},
  {.fmt = "uq", .pos0 = {0, 4}, .npos0 = 2, .ncrd0 = 4, .nvals = 4, .crd0 = {0, 0, 2, 2}, .crd1 = {1, 3, 0}, .ncrd1 = 3, .status = TJ_ERR_SHAPE, .message =
   "tensor A: level 1 (singleton) needs a crd array of 4 entries (one per parent position), got 3"},
  {.fmt = "uq", .pos0 = {0, 4}, .npos0 = 2, .ncrd0 = 4, .ncrd1 = 4, .nvals = 4, .crd0 = {0, 0, 2, 3}, .crd1 = {1, 3, 0, 2}, .status = TJ_ERR_FORMAT, .message =
   "tensor A: level 0 (compressed): crd[3] = 3 is out of range 0..2"},
};

static tj_arrays bad_case_arrays(BadArrays *c, tj_format *f, double *vals) {
  OK(tj_format_parse(c->fmt, f));
  tj_arrays a = {.dtype = TJ_F64, .order = 2, .dims = dims34, .fmt = f};
  a.pos[0] = c->npos0 ? c->pos0 : NULL, a.pos_len[0] = c->npos0;
  a.crd[0] = c->ncrd0 ? c->crd0 : NULL, a.crd_len[0] = c->ncrd0;
  a.pos[1] = c->npos1 ? c->pos1 : NULL, a.pos_len[1] = c->npos1;
  a.crd[1] = c->ncrd1 ? c->crd1 : NULL, a.crd_len[1] = c->ncrd1;
  a.vals = vals, a.vals_len = c->nvals;
  return a;
}

START_TEST(malformed_arrays_are_refused) {
  BadArrays c = bad_arrays[_i];
  tj_format f;
  double vals[5] = {1, 1, 1, 1, 1};
  tj_arrays a = bad_case_arrays(&c, &f, vals);
  tj_tensor *t = (tj_tensor *)&a;
  ck_assert_int_eq(tj_tensor_wrap("A", &a, 0, &t), c.status);
  ck_assert_ptr_null(t);
  ck_assert_msg(strstr(tj_last_error(), c.message), "case %d: %s", _i, tj_last_error());
}
END_TEST

static int frees;
static void count_free(void *p, void *user) {
  ck_assert_ptr_eq(user, &frees);
  frees++;
  free(p);
}

/* Content errors pass with TJ_WRAP_TRUSTED (the caller vouches), length
 * errors never do. */
START_TEST(trusted_skips_only_the_content_checks) {
  BadArrays unsorted = bad_arrays[6], short_vals = bad_arrays[8];
  tj_format f;
  double vals[5] = {1, 1, 1, 1, 1};
  tj_arrays a = bad_case_arrays(&unsorted, &f, vals);
  tj_tensor *t;
  OK(tj_tensor_wrap("A", &a, TJ_WRAP_TRUSTED, &t));
  tj_tensor_free(t);
  a = bad_case_arrays(&short_vals, &f, vals);
  ck_assert_int_eq(tj_tensor_wrap("A", &a, TJ_WRAP_TRUSTED, &t), TJ_ERR_SHAPE);
}
END_TEST

/* Valid arrays the checks must accept: duplicates in a nonunique level,
 * COO with equal columns in different rows, an all-empty CSR. */
START_TEST(valid_arrays_are_accepted) {
  tj_format f;
  double vals[5] = {1, 1, 1, 1, 1};
  BadArrays ok[] = {
    {.npos1 = 4, .ncrd1 = 4, .nvals = 4, .fmt = "du", .pos1 = {0, 2, 2, 4}, .crd1 = {1, 3, 2, 2}},
    {.fmt = "uq", .pos0 = {0, 4}, .npos0 = 2, .ncrd0 = 4, .ncrd1 = 4, .nvals = 4, .crd0 = {0, 0, 2, 2}, .crd1 = {1, 3, 1, 3}},
    {.fmt = "uq", .pos0 = {0, 4}, .npos0 = 2, .ncrd0 = 4, .ncrd1 = 4, .nvals = 4, .crd0 = {0, 1, 1, 2}, .crd1 = {3, 0, 2, 0}},
    {.fmt = "ds", .npos1 = 4, .pos1 = {0, 0, 0, 0}, .crd1 = {0}, .ncrd1 = 0, .nvals = 0},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    tj_arrays a = bad_case_arrays(&ok[i], &f, vals);
    tj_tensor *t;
    ck_assert_msg(tj_tensor_wrap("A", &a, 0, &t) == TJ_OK, "case %zu: %s", i, tj_last_error());
    tj_tensor_free(t);
  }
}
END_TEST

/* An adopted tensor frees its three distinct arrays once each, with the
 * caller's function; a refused adoption frees nothing. */
START_TEST(adopt_frees_with_the_callers_function) {
  tj_format csr;
  OK(tj_format_parse("ds", &csr));
  int32_t *pos = malloc(4 * sizeof *pos), *crd = malloc(4 * sizeof *crd);
  double *vals = malloc(4 * sizeof *vals);
  memcpy(pos, (int32_t[]){0, 2, 2, 4}, 4 * sizeof *pos);
  memcpy(crd, (int32_t[]){1, 3, 0, 2}, 4 * sizeof *crd);
  memcpy(vals, (double[]){2, 1, 3, 4}, 4 * sizeof *vals);
  tj_arrays a = csr_arrays(&csr, pos, crd, vals);
  tj_tensor *t;
  crd[1] = 9;   /* out of range: refused, nothing freed */
  frees = 0;
  ck_assert_int_eq(tj_tensor_adopt("A", &a, 0, count_free, &frees, &t), TJ_ERR_FORMAT);
  ck_assert_int_eq(frees, 0);
  crd[1] = 3;
  OK(tj_tensor_adopt("A", &a, 0, count_free, &frees, &t));
  double v;
  OK(tj_tensor_get(t, (int64_t[]){2, 2}, &v));
  ck_assert(v == 4);
  tj_tensor_free(t);
  ck_assert_int_eq(frees, 3);
}
END_TEST

/* Inserting into a wrapped sparse tensor and packing moves it to arrays
 * of its own (the caller's are left as they were). */
START_TEST(pack_replaces_wrapped_arrays) {
  tj_format csr;
  OK(tj_format_parse("ds", &csr));
  int32_t pos[] = {0, 2, 2, 4}, crd[] = {1, 3, 0, 2};
  double vals[] = {2, 1, 3, 4}, v;
  tj_arrays a = csr_arrays(&csr, pos, crd, vals);
  tj_tensor *t;
  OK(tj_tensor_wrap("A", &a, 0, &t));
  OK(tj_tensor_insert(t, (int64_t[]){1, 1}, 5));
  OK(tj_tensor_pack(t));
  tj_arrays got;
  OK(tj_tensor_arrays(t, &got));
  ck_assert_ptr_ne(got.pos[1], pos);
  ck_assert_int_eq(got.vals_len, 5);
  OK(tj_tensor_get(t, (int64_t[]){1, 1}, &v));
  ck_assert(v == 5);
  OK(tj_tensor_get(t, (int64_t[]){0, 3}, &v));
  ck_assert(v == 1);
  tj_tensor_free(t);
  ck_assert(pos[1] == 2 && pos[3] == 4 && vals[3] == 4);
}
END_TEST

static Suite *wrap_suite(void) {
  Suite *s = suite_create("wrap");
  TCase *k = tcase_create("kernels");
  tcase_set_timeout(k, 120);
  tcase_add_test(k, spmv_reads_wrapped_arrays_in_place);
  tcase_add_test(k, csc_input_changes_are_seen);
  tcase_add_test(k, compute_rerun_after_values_change);
  tcase_add_test(k, wrapped_sparse_output_grows_into_its_own_arrays);
  tcase_add_test(k, accumulate_into_wrapped_output_never_half_written);
  tcase_add_test(k, result_that_fits_goes_into_the_callers_arrays);
  tcase_add_test(k, i64_wrapped_values_are_exact);
  tcase_add_test(k, column_major_operand_in_a_kernel);
  tcase_add_test(k, csf_with_64_bit_indices);
  suite_add_tcase(s, k);
  TCase *d = tcase_create("dense");
  tcase_add_test(d, dense_strides_become_mode_orders);
  tcase_add_loop_test(d, bad_strides_are_refused, 0, sizeof bad_strides / sizeof bad_strides[0]);
  suite_add_tcase(s, d);
  TCase *v = tcase_create("validation");
  tcase_add_loop_test(v, malformed_arrays_are_refused, 0, sizeof bad_arrays / sizeof bad_arrays[0]);
  tcase_add_test(v, trusted_skips_only_the_content_checks);
  tcase_add_test(v, valid_arrays_are_accepted);
  tcase_add_test(v, adopt_frees_with_the_callers_function);
  tcase_add_test(v, pack_replaces_wrapped_arrays);
  suite_add_tcase(s, v);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(wrap_suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  tj_shutdown();
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

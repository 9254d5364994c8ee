/* loose_compressed levels (issue 15): lo and hi positions per segment
 * (pos[2p], pos[2p+1]), so segments may sit in any order, with gaps.
 * Parsing and printing, pack / get / unpack / convert, kernels reading a
 * loose level (SpMV, SpMM, a sparse add with a CSR operand) on storage
 * whose segments were reordered in place, against values worked out by
 * hand; outputs (through a compressed stand-in repacked after each run)
 * against the lo/hi arrays worked out by hand; wrapping is refused. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

/* The 3 x 4 matrix
 *   [0 2 0 1]
 *   [0 0 0 0]
 *   [3 0 4 0]
 * loose: pos {0,2, 2,2, 2,4}, crd {1,3,0,2}, vals {2,1,3,4}. */
static const int64_t dims34[2] = {3, 4};

static tj_tensor *matrix(const char *spec, const char *name) {
  tj_format f;
  OK(tj_format_parse(spec, &f));
  tj_tensor *t;
  OK(tj_tensor_new(name, TJ_F64, 2, dims34, &f, &t));
  OK(tj_tensor_insert(t, (int64_t[]){0, 1}, 2));
  OK(tj_tensor_insert(t, (int64_t[]){2, 2}, 4));
  OK(tj_tensor_insert(t, (int64_t[]){0, 3}, 1));
  OK(tj_tensor_insert(t, (int64_t[]){2, 0}, 3));
  OK(tj_tensor_pack(t));
  return t;
}

START_TEST(parses_packs_and_reads) {
  tj_format f;
  OK(tj_format_parse("(i, j) -> (i : dense, j : loose_compressed)", &f));
  ck_assert_str_eq(f.levels, "dl");
  char buf[128];
  tj_format_print_mlir(&f, buf, sizeof buf);
  ck_assert_str_eq(buf, "(d0, d1) -> (d0 : dense, d1 : loose_compressed)");
  tj_tensor *a = matrix("dl", "A");
  tj_arrays ar;
  OK(tj_tensor_arrays(a, &ar));
  ck_assert_int_eq(ar.pos_len[1], 6);
  int32_t want_pos[6] = {0, 2, 2, 2, 2, 4}, want_crd[4] = {1, 3, 0, 2};
  for (int k = 0; k < 6; k++) ck_assert_int_eq(((int32_t *)ar.pos[1])[k], want_pos[k]);
  for (int k = 0; k < 4; k++) ck_assert_int_eq(((int32_t *)ar.crd[1])[k], want_crd[k]);
  double v;
  OK(tj_tensor_get(a, (int64_t[]){2, 2}, &v));
  ck_assert_double_eq(v, 4);
  OK(tj_tensor_get(a, (int64_t[]){1, 2}, &v));
  ck_assert_double_eq(v, 0);
  tj_format csr;
  OK(tj_format_parse("ds", &csr));
  tj_tensor *c;
  OK(tj_tensor_convert(a, &csr, &c));
  ck_assert_int_eq(tj_tensor_nnz(c), 4);
  OK(tj_tensor_get(c, (int64_t[]){0, 3}, &v));
  ck_assert_double_eq(v, 1);
  tj_tensor_free(c);
  tj_tensor_free(a);
}
END_TEST

/* Moves row 0's segment behind row 2's in place: crd {0,2,1,3}, vals
 * {3,4,2,1}, pos {2,4, 0,0, 0,2}: the same matrix, segments out of order,
 * row 1's an empty segment elsewhere. */
static void reorder_segments(tj_tensor *a) {
  tj_arrays ar;
  OK(tj_tensor_arrays(a, &ar));
  int32_t *pos = ar.pos[1], *crd = ar.crd[1];
  double *vals = ar.vals;
  int32_t p[6] = {2, 4, 0, 0, 0, 2}, c[4] = {0, 2, 1, 3};
  double v[4] = {3, 4, 2, 1};
  memcpy(pos, p, sizeof p), memcpy(crd, c, sizeof c), memcpy(vals, v, sizeof v);
}

START_TEST(kernels_read_lo_and_hi) {
  tj_tensor *a = matrix("dl", "A");
  reorder_segments(a);
  double v;
  OK(tj_tensor_get(a, (int64_t[]){0, 3}, &v));
  ck_assert_double_eq(v, 1);
  int64_t n3 = 3, n4 = 4, bd[2] = {4, 2}, cd[2] = {3, 2};
  tj_tensor *x, *y, *b, *c, *s, *sum;
  OK(tj_tensor_new("x", TJ_F64, 1, &n4, NULL, &x));
  for (int64_t j = 0; j < 4; j++) OK(tj_tensor_insert(x, &j, (double)(j + 1)));
  OK(tj_tensor_pack(x));
  OK(tj_tensor_new("y", TJ_F64, 1, &n3, NULL, &y));
  OK(tj_tensor_new("B", TJ_F64, 2, bd, NULL, &b));
  for (int64_t j = 0; j < 4; j++)
    for (int64_t k = 0; k < 2; k++) OK(tj_tensor_insert(b, (int64_t[]){j, k}, (double)(j + 10 * k)));
  OK(tj_tensor_pack(b));
  OK(tj_tensor_new("C", TJ_F64, 2, cd, NULL, &c));
  s = matrix("ds", "S");
  OK(tj_tensor_new("D", TJ_F64, 2, dims34, NULL, &sum));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  /* y = A x, x = (1,2,3,4): (2*2 + 1*4, 0, 3*1 + 4*3) = (8, 0, 15). */
  OK(tj_compile(cx, "y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  double want_y[3] = {8, 0, 15};
  for (int64_t i = 0; i < 3; i++) {
    OK(tj_tensor_get(y, &i, &v));
    ck_assert_double_eq(v, want_y[i]);
  }
  /* C = A B, B(j,k) = j + 10k: row 0 = 2*B(1,:) + 1*B(3,:) = (2+3, 22+13) =
   * (5, 35); row 2 = 3*B(0,:) + 4*B(2,:) = (8, 30+48) = (8, 78). */
  OK(tj_compile(cx, "C(i,k) = A(i,j) * B(j,k)", (tj_tensor *[]){c, a, b}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  double want_c[3][2] = {{5, 35}, {0, 0}, {8, 78}};
  for (int64_t i = 0; i < 3; i++)
    for (int64_t kk = 0; kk < 2; kk++) {
      OK(tj_tensor_get(c, (int64_t[]){i, kk}, &v));
      ck_assert_double_eq(v, want_c[i][kk]);
    }
  /* D = A + S (S the same matrix in CSR): twice A. */
  OK(tj_compile(cx, "D(i,j) = A(i,j) + S(i,j)", (tj_tensor *[]){sum, a, s}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  double want_d[3][4] = {{0, 4, 0, 2}, {0, 0, 0, 0}, {6, 0, 8, 0}};
  for (int64_t i = 0; i < 3; i++)
    for (int64_t j = 0; j < 4; j++) {
      OK(tj_tensor_get(sum, (int64_t[]){i, j}, &v));
      ck_assert_double_eq(v, want_d[i][j]);
    }
  tj_context_free(cx);
  tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y), tj_tensor_free(b);
  tj_tensor_free(c), tj_tensor_free(s), tj_tensor_free(sum);
}
END_TEST

/* O's pos and crd of level 1 and its values are want_* (int32 arrays). */
static void expect_loose(tj_tensor *o, int npos, const int32_t *want_pos, int ncrd,
                         const int32_t *want_crd, const double *want_vals) {
  tj_arrays ar;
  OK(tj_tensor_arrays(o, &ar));
  ck_assert_int_eq(ar.pos_len[1], npos);
  ck_assert_int_eq(ar.crd_len[1], ncrd);
  ck_assert_int_eq(ar.vals_len, ncrd);
  for (int k = 0; k < npos; k++) ck_assert_int_eq(((int32_t *)ar.pos[1])[k], want_pos[k]);
  for (int k = 0; k < ncrd; k++) {
    ck_assert_int_eq(((int32_t *)ar.crd[1])[k], want_crd[k]);
    ck_assert_double_eq(((double *)ar.vals)[k], want_vals[k]);
  }
}

/* Loose outputs run on a compressed stand-in repacked after each run
 * (jit/driver_standin.c): the exact pattern, lo/hi pairs, every phase,
 * += keeping the output's entries, a mode-ordered (column) loose output,
 * two threads, and a rebind to other tensors. */
START_TEST(outputs_through_a_standin) {
  tj_tensor *a = matrix("dl", "A"), *s = matrix("ds", "S"), *o = matrix("dl", "O");
  reorder_segments(a);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  /* O = A + S = 2A: pos {0,2, 2,2, 2,4}, crd {1,3,0,2}, vals {4,2,6,8}. */
  OK(tj_compile(cx, "O(i,j) = A(i,j) + S(i,j)", (tj_tensor *[]){o, a, s}, 3, NULL, NULL, &k));
  const int32_t pos2[6] = {0, 2, 2, 2, 2, 4}, crd2[4] = {1, 3, 0, 2};
  const double twice[4] = {4, 2, 6, 8};
  for (int phase = TJ_ASSEMBLE; phase <= TJ_EVALUATE; phase++) {
    OK(tj_kernel_run(k, (tj_phase)phase, NULL, 0));
    expect_loose(o, 6, pos2, 4, crd2, twice);
  }
  /* O += A: 3A on the same pattern; an entry O had and A lacks (1,1) stays. */
  OK(tj_tensor_insert(o, (int64_t[]){1, 1}, 5));
  OK(tj_tensor_pack(o));
  OK(tj_compile(cx, "O(i,j) += A(i,j)", (tj_tensor *[]){o, a}, 2, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  const int32_t pos3[6] = {0, 2, 2, 3, 3, 5}, crd3[5] = {1, 3, 1, 0, 2};
  const double v3[5] = {6, 3, 5, 9, 12};
  expect_loose(o, 6, pos3, 5, crd3, v3);
  /* A column-major loose output (levels j, i): O^T's segments per column
   * j = 0..3 hold rows {2}, {0}, {2}, {0}: pos {0,1, 1,2, 2,3, 3,4}. */
  tj_format fc;
  OK(tj_format_parse("dl:1,0", &fc));
  tj_tensor *oc;
  OK(tj_tensor_new("P", TJ_F64, 2, dims34, &fc, &oc));
  tj_options opt = tj_options_default();
  opt.nthreads = 2;
  OK(tj_compile(cx, "P(i,j) = A(i,j) * S(i,j)", (tj_tensor *[]){oc, a, s}, 3, NULL, &opt, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  const int32_t posc[8] = {0, 1, 1, 2, 2, 3, 3, 4}, crdc[4] = {2, 0, 2, 0};
  const double squares[4] = {9, 4, 16, 1};
  expect_loose(oc, 8, posc, 4, crdc, squares);
  /* Rebound to another output of the same format and dims. */
  tj_tensor *oc2;
  OK(tj_tensor_new("P", TJ_F64, 2, dims34, &fc, &oc2));
  OK(tj_kernel_run(k, TJ_EVALUATE, (tj_tensor *[]){a, s, oc2}, 3));
  expect_loose(oc2, 8, posc, 4, crdc, squares);
  /* An output of another format is refused at run time. */
  tj_tensor *csr = matrix("ds", "P");
  ck_assert_int_ne(tj_kernel_run(k, TJ_EVALUATE, (tj_tensor *[]){a, s, csr}, 3), TJ_OK);
  ck_assert_msg(strstr(tj_last_error(), "P"), "%s", tj_last_error());
  tj_context_free(cx);
  tj_tensor_free(a), tj_tensor_free(s), tj_tensor_free(o), tj_tensor_free(oc);
  tj_tensor_free(oc2), tj_tensor_free(csr);
}
END_TEST

START_TEST(refuses_wrapping) {
  tj_format f;
  OK(tj_format_parse("dl", &f));
  int32_t pos[6] = {0, 2, 2, 2, 2, 4}, crd[4] = {1, 3, 0, 2};
  double vals[4] = {2, 1, 3, 4};
  tj_arrays ar = {.dtype = TJ_F64, .order = 2, .dims = dims34, .fmt = &f};
  ar.pos[1] = pos, ar.pos_len[1] = 6, ar.crd[1] = crd, ar.crd_len[1] = 4;
  ar.vals = vals, ar.vals_len = 4;
  tj_tensor *w;
  ck_assert_int_eq(tj_tensor_wrap("W", &ar, 0, &w), TJ_ERR_UNSUPPORTED);
  ck_assert_msg(strstr(tj_last_error(), "loose_compressed"), "%s", tj_last_error());
}
END_TEST

int main(void) {
  Suite *s = suite_create("loose");
  TCase *tc = tcase_create("loose");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, parses_packs_and_reads);
  tcase_add_test(tc, kernels_read_lo_and_hi);
  tcase_add_test(tc, outputs_through_a_standin);
  tcase_add_test(tc, refuses_wrapping);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}

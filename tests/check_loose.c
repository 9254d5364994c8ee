/* loose_compressed levels (issue 15): lo and hi positions per segment
 * (pos[2p], pos[2p+1]), so segments may sit in any order, with gaps.
 * Parsing and printing, pack / get / unpack / convert, kernels reading a
 * loose level (SpMV, SpMM, a sparse add with a CSR operand) on storage
 * whose segments were reordered in place, against values worked out by
 * hand; outputs (through a compressed stand-in repacked after each run)
 * against the lo/hi arrays worked out by hand. Wrapped loose arrays as
 * MLIR hands them out (gaps holding NaN and bad coordinates, segments out
 * of order, empty ones) read by every consumer, and one malformed array
 * per check of tj_tensor_wrap. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* ---- wrapped loose_compressed arrays: gaps, segments out of order ------
 *
 * The 4 x 5 matrix G
 *   [0 2 0 0 1]
 *   [0 0 0 0 0]
 *   [3 0 4 5 0]
 *   [0 0 0 0 6]
 * as MLIR may hand out a loose level: crd/vals of 10 positions, of which
 * 0, 4, 7 and 9 are gaps holding NaN values and coordinates out of range
 * (99, -7, 5) or misleading (0): a consumer reading a gap fails the test.
 *   position  0    1 2 3   4    5 6   7    8   9
 *   crd       99   0 2 3   -7   1 4   5    4   0
 *   vals      NaN  3 4 5   NaN  2 1   NaN  6   NaN
 * dl: pos {5,7, 9,9, 1,4, 8,9} (row 1 an empty segment at the end). */
#define GAP NAN
static const int64_t gd[2] = {4, 5};
static int32_t g_pos[8] = {5, 7, 9, 9, 1, 4, 8, 9};
static int32_t g_crd[10] = {99, 0, 2, 3, -7, 1, 4, 5, 4, 0};
static double g_vals[10] = {GAP, 3, 4, 5, GAP, 2, 1, GAP, 6, GAP};
static const double g_dense[4][5] = {{0, 2, 0, 0, 1}, {0, 0, 0, 0, 0}, {3, 0, 4, 5, 0},
                                     {0, 0, 0, 0, 6}};

/* G as "ll": level 0 holds rows 0, 2, 3 at positions 1..3 of 5 (0 and 4
 * gaps); level 1's segments for the gap parents point at other rows'
 * entries (reading them would count entries twice). */
static int32_t gll_pos0[2] = {1, 4}, gll_crd0[5] = {7, 0, 2, 3, 1};
static int32_t gll_pos1[10] = {5, 7, 5, 7, 1, 4, 8, 9, 1, 4};

/* G as "ld": rows 0, 2, 3 at positions 1..3 of 5, each 5 dense values;
 * the gap rows' values are NaN. */
static int32_t gld_pos0[2] = {1, 4}, gld_crd0[5] = {3, 0, 2, 3, 2};
static double gld_vals[25];

static tj_tensor *wrap_g(const char *spec, const char *name) {
  tj_format f;
  OK(tj_format_parse(spec, &f));
  tj_arrays ar = {.dtype = TJ_F64, .order = 2, .dims = gd, .fmt = &f};
  if (!strcmp(spec, "dl")) {
    ar.pos[1] = g_pos, ar.pos_len[1] = 8, ar.crd[1] = g_crd, ar.crd_len[1] = 10;
    ar.vals = g_vals, ar.vals_len = 10;
  } else if (!strcmp(spec, "ll")) {
    ar.pos[0] = gll_pos0, ar.pos_len[0] = 2, ar.crd[0] = gll_crd0, ar.crd_len[0] = 5;
    ar.pos[1] = gll_pos1, ar.pos_len[1] = 10, ar.crd[1] = g_crd, ar.crd_len[1] = 10;
    ar.vals = g_vals, ar.vals_len = 10;
  } else {
    for (int k = 0; k < 25; k++) gld_vals[k] = GAP;
    for (int p = 1; p <= 3; p++)
      for (int j = 0; j < 5; j++) gld_vals[p * 5 + j] = g_dense[gld_crd0[p]][j];
    ar.pos[0] = gld_pos0, ar.pos_len[0] = 2, ar.crd[0] = gld_crd0, ar.crd_len[0] = 5;
    ar.vals = gld_vals, ar.vals_len = 25;
  }
  tj_tensor *t;
  OK(tj_tensor_wrap(name, &ar, 0, &t));
  return t;
}

static void expect_g(tj_tensor *t, double scale) {
  double v;
  for (int64_t i = 0; i < 4; i++)
    for (int64_t j = 0; j < 5; j++) {
      OK(tj_tensor_get(t, (int64_t[]){i, j}, &v));
      ck_assert_msg(v == scale * g_dense[i][j], "%s(%d,%d) = %g, want %g", tj_tensor_name(t),
                    (int)i, (int)j, v, scale * g_dense[i][j]);
    }
}

static const char *const g_specs[3] = {"dl", "ll", "ld"};

/* Reading the wrapped tensor: get, nnz (stored entries: 6 for dl and ll,
 * 15 for ld, rows 0, 2, 3 of 5), unpack, convert, cast, print, the arrays
 * handed back in place, a slice. */
START_TEST(wrapped_gaps_read) {
  const char *spec = g_specs[_i];
  tj_tensor *a = wrap_g(spec, "G");
  expect_g(a, 1);
  bool ld = !strcmp(spec, "ld");
  ck_assert_int_eq(tj_tensor_nnz(a), ld ? 15 : 6);
  int64_t *coords, n;
  double *vals;
  OK(tj_tensor_unpack(a, &coords, &vals, &n));
  ck_assert_int_eq(n, ld ? 15 : 6);
  double sum = 0;
  for (int64_t e = 0; e < n; e++) {
    int64_t i = coords[2 * e], j = coords[2 * e + 1];
    ck_assert(i >= 0 && i < 4 && j >= 0 && j < 5);
    ck_assert_double_eq(vals[e], g_dense[i][j]);
    sum += vals[e];
  }
  ck_assert_double_eq(sum, 21);
  free(coords), free(vals);
  tj_format csr;
  OK(tj_format_parse("ds", &csr));
  tj_tensor *c;
  OK(tj_tensor_convert(a, &csr, &c));   /* ld's dense zeros are fill: dropped */
  ck_assert_int_eq(tj_tensor_nnz(c), 6);
  expect_g(c, 1);
  tj_tensor_free(c);
  OK(tj_tensor_cast(a, TJ_F32, &c));
  float fv;
  OK(tj_tensor_get_f32(c, (int64_t[]){3, 4}, &fv));
  ck_assert_float_eq(fv, 6);
  ck_assert_int_eq(tj_tensor_nnz(c), ld ? 15 : 6);
  tj_tensor_free(c);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  tj_tensor_print(a, mem, 0);
  fclose(mem);
  ck_assert_msg(!strstr(text, "nan") && !strstr(text, "99"), "%s", text);
  free(text);
  /* written to .mtx and read back: G's 6 entries (ld's zeros are fill) */
  char dir[] = "/tmp/tj_loose_XXXXXX", path[64];
  ck_assert(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/g.mtx", dir);
  OK(tj_tensor_write(a, path));
  OK(tj_tensor_read(path, "R", NULL, &c));
  ck_assert_int_eq(tj_tensor_nnz(c), 6);
  expect_g(c, 1);
  tj_tensor_free(c);
  remove(path), rmdir(dir);
  tj_arrays ar;
  OK(tj_tensor_arrays(a, &ar));
  ck_assert_ptr_eq(ar.vals, ld ? (void *)gld_vals : (void *)g_vals);
  ck_assert_int_eq(ar.vals_len, ld ? 25 : 10);
  if (!ld) ck_assert_ptr_eq(ar.pos[1], spec[0] == 'd' ? (void *)g_pos : (void *)gll_pos1);
  /* rows 1..3, columns 2..4: [0 0 0; 4 5 0; 0 0 6] */
  tj_tensor *v;
  OK(tj_tensor_slice(a, "V", (int64_t[]){1, 2}, (int64_t[]){3, 3}, NULL, &v));
  ck_assert_int_eq(tj_tensor_nnz(v), ld ? 6 : 3);   /* ld: rows 2, 3 whole */
  double got;
  OK(tj_tensor_get(v, (int64_t[]){1, 1}, &got));
  ck_assert_double_eq(got, 5);
  OK(tj_tensor_get(v, (int64_t[]){2, 2}, &got));
  ck_assert_double_eq(got, 6);
  OK(tj_tensor_convert(v, &csr, &c));
  ck_assert_int_eq(tj_tensor_nnz(c), 3);
  tj_tensor_free(c);
  /* a kernel over the view: y = V x, x = (1, 2, 3): (0, 4 + 10, 18) */
  int64_t n3 = 3;
  tj_tensor *x, *y;
  OK(tj_tensor_new("x", TJ_F64, 1, &n3, NULL, &x));
  OK(tj_tensor_new("y", TJ_F64, 1, &n3, NULL, &y));
  for (int64_t j = 0; j < 3; j++) OK(tj_tensor_insert(x, &j, (double)(j + 1)));
  OK(tj_tensor_pack(x));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = V(i,j) * x(j)", (tj_tensor *[]){y, v, x}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  const double want[3] = {0, 14, 18};
  for (int64_t i = 0; i < 3; i++) {
    OK(tj_tensor_get(y, &i, &got));
    ck_assert_double_eq(got, want[i]);
  }
  tj_context_free(cx);
  tj_tensor_free(x), tj_tensor_free(y), tj_tensor_free(v), tj_tensor_free(a);
}
END_TEST

static void expect_dense(tj_tensor *t, int64_t m, int64_t n, const double *want) {
  double v;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      if (n == 1) OK(tj_tensor_get(t, &i, &v));
      else OK(tj_tensor_get(t, (int64_t[]){i, j}, &v));
      ck_assert_msg(v == want[i * n + j], "%s at (%d,%d) = %g, want %g", tj_tensor_name(t),
                    (int)i, (int)j, v, want[i * n + j]);
    }
}

/* Kernels over the wrapped G in dl, ll, ld, on 1 and 2 threads (parallel
 * paths forced: TJ_PAR_MIN_WORK=0): SpMV, SpMM, a sparse add into dense
 * and CSR outputs, SpGEMM into CSR, TTV over a 3-tensor with G's rows. */
START_TEST(wrapped_gaps_kernels) {
  setenv("TJ_PAR_MIN_WORK", "0", 1);
  for (int sp = 0; sp < 3; sp++)
    for (int nt = 1; nt <= 2; nt++) {
      tj_tensor *a = wrap_g(g_specs[sp], "A");
      tj_options opt = tj_options_default();
      opt.nthreads = nt;
      tj_context *cx;
      OK(tj_context_new(&cx));
      tj_kernel *k;
      int64_t n4 = 4, n5 = 5, bd[2] = {5, 2}, cd[2] = {4, 2}, b3[2] = {5, 3}, c3[2] = {4, 3};
      tj_tensor *x, *y, *b, *c, *s, *d, *dc, *bs, *cs;
      OK(tj_tensor_new("x", TJ_F64, 1, &n5, NULL, &x));
      for (int64_t j = 0; j < 5; j++) OK(tj_tensor_insert(x, &j, (double)(j + 1)));
      OK(tj_tensor_pack(x));
      OK(tj_tensor_new("y", TJ_F64, 1, &n4, NULL, &y));
      /* y = A x, x = (1..5): (2*2 + 5, 0, 3 + 12 + 20, 30) */
      OK(tj_compile(cx, "y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3, NULL, &opt, &k));
      OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
      expect_dense(y, 4, 1, (double[]){9, 0, 35, 30});
      /* C = A B, B(j,k) = j + 10k: rows 2*B1 + B4 = (6, 36), 0,
       * 3*B0 + 4*B2 + 5*B3 = (23, 143), 6*B4 = (24, 84) */
      OK(tj_tensor_new("B", TJ_F64, 2, bd, NULL, &b));
      for (int64_t j = 0; j < 5; j++)
        for (int64_t kk = 0; kk < 2; kk++)
          OK(tj_tensor_insert(b, (int64_t[]){j, kk}, (double)(j + 10 * kk)));
      OK(tj_tensor_pack(b));
      OK(tj_tensor_new("C", TJ_F64, 2, cd, NULL, &c));
      OK(tj_compile(cx, "C(i,k) = A(i,j) * B(j,k)", (tj_tensor *[]){c, a, b}, 3, NULL, &opt, &k));
      OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
      expect_dense(c, 4, 2, (double[]){6, 36, 0, 0, 23, 143, 24, 84});
      /* D = A + S, S = 4 x 5 identity in CSR: dense and CSR outputs */
      tj_format csr;
      OK(tj_format_parse("ds", &csr));
      OK(tj_tensor_new("S", TJ_F64, 2, gd, &csr, &s));
      for (int64_t i = 0; i < 4; i++) OK(tj_tensor_insert(s, (int64_t[]){i, i}, 1));
      OK(tj_tensor_pack(s));
      const double want_d[20] = {1, 2, 0, 0, 1, 0, 1, 0, 0, 0, 3, 0, 5, 5, 0, 0, 0, 0, 1, 6};
      OK(tj_tensor_new("D", TJ_F64, 2, gd, NULL, &d));
      OK(tj_compile(cx, "D(i,j) = A(i,j) + S(i,j)", (tj_tensor *[]){d, a, s}, 3, NULL, &opt, &k));
      OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
      expect_dense(d, 4, 5, want_d);
      OK(tj_tensor_new("E", TJ_F64, 2, gd, &csr, &dc));
      OK(tj_compile(cx, "E(i,j) = A(i,j) + S(i,j)", (tj_tensor *[]){dc, a, s}, 3, NULL, &opt, &k));
      OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
      expect_dense(dc, 4, 5, want_d);
      /* 10 for dl/ll (6 + 4, (2,2) shared); ld stores rows 0, 2, 3 whole */
      ck_assert_int_eq(tj_tensor_nnz(dc), sp == 2 ? 16 : 9);
      /* SpGEMM: F = A Bs, Bs (5 x 3) {(0,0)=1, (1,2)=2, (2,1)=3, (3,0)=4,
       * (4,2)=5}: rows (0,0,4+5), 0, (3+20, 12, 0), (0, 0, 30) */
      OK(tj_tensor_new("Bs", TJ_F64, 2, b3, &csr, &bs));
      const int64_t be[5][2] = {{0, 0}, {1, 2}, {2, 1}, {3, 0}, {4, 2}};
      for (int e = 0; e < 5; e++) OK(tj_tensor_insert(bs, be[e], (double)(e + 1)));
      OK(tj_tensor_pack(bs));
      OK(tj_tensor_new("F", TJ_F64, 2, c3, &csr, &cs));
      OK(tj_compile(cx, "F(i,k) = A(i,j) * Bs(j,k)", (tj_tensor *[]){cs, a, bs}, 3, NULL, &opt, &k));
      OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
      expect_dense(cs, 4, 3, (double[]){0, 0, 9, 0, 0, 0, 23, 12, 0, 0, 0, 30});
      tj_context_free(cx);
      tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y), tj_tensor_free(b);
      tj_tensor_free(c), tj_tensor_free(s), tj_tensor_free(d), tj_tensor_free(dc);
      tj_tensor_free(bs), tj_tensor_free(cs);
    }
  unsetenv("TJ_PAR_MIN_WORK");
}
END_TEST

/* TTV over a 3 x 4 x 2 tensor T in "dls" and "lld" with gaps at levels 0
 * and 1: T(0,1,:) = (1,2), T(0,3,1) = 3, T(2,0,0) = 4, T(2,2,:) = (5,6).
 * y(i,j) = T(i,j,k) v(k), v = (1, 10): y(0,1) = 21, y(0,3) = 30,
 * y(2,0) = 4, y(2,2) = 65. */
START_TEST(wrapped_gaps_ttv) {
  setenv("TJ_PAR_MIN_WORK", "0", 1);
  static const int64_t td[3] = {3, 4, 2};
  /* dls: level 1 positions 0..5, 2 a gap: row 0 {1,3} at 3..4, row 2
   * {0,2} at 0..1, row 1 empty; level 2 pos over the 6 positions, the
   * gap 5's segment holding a bad coordinate and NaN. */
  int32_t dls_pos1[6] = {3, 5, 5, 5, 0, 2}, dls_crd1[6] = {0, 2, 77, 1, 3, 0};
  int32_t dls_pos2[7] = {0, 1, 3, 3, 5, 6, 7}, dls_crd2[7] = {0, 0, 1, 0, 1, 1, 99};
  double dls_vals[7] = {4, 5, 6, 1, 2, 3, GAP};
  /* lld: level 0 rows {0, 2} at positions 1..2 of 4; level 1's segments
   * of the gap parents 0 and 3 overlap real ones; level 2 dense. */
  int32_t lld_pos0[2] = {1, 3}, lld_crd0[4] = {9, 0, 2, 1};
  int32_t lld_pos1[8] = {0, 4, 4, 6, 0, 2, 0, 6}, lld_crd1[6] = {0, 2, 1, 3, 1, 3};
  double lld_vals[12] = {4, 0, 5, 6, GAP, GAP, GAP, GAP, 1, 2, 0, 3};
  for (int which = 0; which < 2; which++)
    for (int nt = 1; nt <= 2; nt++) {
      tj_format f;
      OK(tj_format_parse(which ? "lld" : "dls", &f));
      tj_arrays ar = {.dtype = TJ_F64, .order = 3, .dims = td, .fmt = &f};
      if (!which) {
        ar.pos[1] = dls_pos1, ar.pos_len[1] = 6, ar.crd[1] = dls_crd1, ar.crd_len[1] = 6;
        ar.pos[2] = dls_pos2, ar.pos_len[2] = 7, ar.crd[2] = dls_crd2, ar.crd_len[2] = 7;
        ar.vals = dls_vals, ar.vals_len = 7;
      } else {
        ar.pos[0] = lld_pos0, ar.pos_len[0] = 2, ar.crd[0] = lld_crd0, ar.crd_len[0] = 4;
        ar.pos[1] = lld_pos1, ar.pos_len[1] = 8, ar.crd[1] = lld_crd1, ar.crd_len[1] = 6;
        ar.vals = lld_vals, ar.vals_len = 12;
      }
      tj_tensor *t, *v, *y;
      OK(tj_tensor_wrap("T", &ar, 0, &t));
      ck_assert_int_eq(tj_tensor_nnz(t), which ? 8 : 6);
      int64_t n2 = 2, yd[2] = {3, 4};
      OK(tj_tensor_new("v", TJ_F64, 1, &n2, NULL, &v));
      OK(tj_tensor_insert(v, (int64_t[]){0}, 1));
      OK(tj_tensor_insert(v, (int64_t[]){1}, 10));
      OK(tj_tensor_pack(v));
      OK(tj_tensor_new("y", TJ_F64, 2, yd, NULL, &y));
      tj_options opt = tj_options_default();
      opt.nthreads = nt;
      tj_context *cx;
      OK(tj_context_new(&cx));
      tj_kernel *k;
      OK(tj_compile(cx, "y(i,j) = T(i,j,k) * v(k)", (tj_tensor *[]){y, t, v}, 3, NULL, &opt, &k));
      OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
      expect_dense(y, 3, 4, (double[]){0, 21, 0, 30, 0, 0, 0, 0, 4, 0, 65, 0});
      tj_context_free(cx);
      tj_tensor_free(t), tj_tensor_free(v), tj_tensor_free(y);
    }
  unsetenv("TJ_PAR_MIN_WORK");
}
END_TEST

/* Schedules over G's gapped dl: a position split walks each segment's lo
 * .. hi; a fused position loop (one range pos[base] .. pos[base + n] over
 * all rows) cannot walk lo/hi pairs and is refused (it read pos as a
 * compressed level's and gave y = 0). */
START_TEST(wrapped_gaps_schedules) {
  setenv("TJ_PAR_MIN_WORK", "0", 1);
  tj_tensor *a = wrap_g("dl", "A"), *x, *y;
  int64_t n4 = 4, n5 = 5;
  OK(tj_tensor_new("x", TJ_F64, 1, &n5, NULL, &x));
  for (int64_t j = 0; j < 5; j++) OK(tj_tensor_insert(x, &j, (double)(j + 1)));
  OK(tj_tensor_pack(x));
  OK(tj_tensor_new("y", TJ_F64, 1, &n4, NULL, &y));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options opt = tj_options_default();
  opt.nthreads = 2;
  static const char *const ok[] = {"pos(j, jp, A(i,j)) split(jp, j0, j1, 2)",
                                   "parallelize(i, dynamic)", "split(i, i0, i1, 2) parallelize(i0)"};
  tj_kernel *k;
  for (int s = 0; s < 3; s++) {
    OK(tj_compile(cx, "y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3, ok[s], &opt, &k));
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    expect_dense(y, 4, 1, (double[]){9, 0, 35, 30});
  }
  ck_assert_int_ne(tj_compile(cx, "y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3,
                              "fuse(i, j, f) pos(f, fp, A(i,j))", NULL, &k), TJ_OK);
  ck_assert_msg(strstr(tj_last_error(), "fuse"), "%s", tj_last_error());
  /* G as "ls", rows 0, 2, 3 at level-0 positions 1..3 of 5; the gap
   * parents 0 and 4 own level-1 segments of garbage. A fused loop over
   * the rows' positions runs pos1[1] .. pos1[4]: no gap in it. */
  tj_format ls;
  OK(tj_format_parse("ls", &ls));
  int32_t p0[2] = {1, 4}, c0[5] = {9, 0, 2, 3, 1}, p1[6] = {0, 2, 4, 7, 8, 10};
  int32_t c1[10] = {99, 7, 1, 4, 0, 2, 3, 4, -1, 5};
  double v1[10] = {GAP, GAP, 2, 1, 3, 4, 5, 6, GAP, GAP};
  tj_arrays ar = {.dtype = TJ_F64, .order = 2, .dims = gd, .fmt = &ls};
  ar.pos[0] = p0, ar.pos_len[0] = 2, ar.crd[0] = c0, ar.crd_len[0] = 5;
  ar.pos[1] = p1, ar.pos_len[1] = 6, ar.crd[1] = c1, ar.crd_len[1] = 10;
  ar.vals = v1, ar.vals_len = 10;
  tj_tensor *b;
  OK(tj_tensor_wrap("A", &ar, 0, &b));
  ck_assert_int_eq(tj_tensor_nnz(b), 6);
  static const char *const fused[] = {"fuse(i, j, f) pos(f, fp, A(i,j))",
                                      "fuse(i, j, f) pos(f, fp, A(i,j)) split(fp, f0, f1, 2)",
                                      "pos(i, ip, A(i,j)) split(ip, i0, i1, 2) parallelize(i0)",
                                      NULL};
  for (int s = 0; s < 4; s++) {
    OK(tj_compile(cx, "y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, b, x}, 3, fused[s], &opt, &k));
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    expect_dense(y, 4, 1, (double[]){9, 0, 35, 30});
  }
  tj_tensor_free(b);
  tj_context_free(cx);
  tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y);
  unsetenv("TJ_PAR_MIN_WORK");
}
END_TEST

/* A wrapped loose output with gaps: O = A + S (S the identity in CSR) is
 * assembled gap-free and copied back into O's arrays (it fits: 9 of 10
 * positions), pos {0,3, 3,4, 4,7, 7,9}; O += A then doubles A's part. */
START_TEST(wrapped_gaps_output) {
  tj_tensor *a = wrap_g("dl", "A");
  tj_format dl, csr;
  OK(tj_format_parse("dl", &dl));
  OK(tj_format_parse("ds", &csr));
  int32_t opos[8] = {5, 7, 9, 9, 1, 4, 8, 9};
  int32_t ocrd[10] = {99, 0, 2, 3, -7, 1, 4, 5, 4, 0};
  double ovals[10] = {GAP, 3, 4, 5, GAP, 2, 1, GAP, 6, GAP};
  tj_arrays ar = {.dtype = TJ_F64, .order = 2, .dims = gd, .fmt = &dl};
  ar.pos[1] = opos, ar.pos_len[1] = 8, ar.crd[1] = ocrd, ar.crd_len[1] = 10;
  ar.vals = ovals, ar.vals_len = 10;
  tj_tensor *o, *s;
  OK(tj_tensor_wrap("O", &ar, 0, &o));
  OK(tj_tensor_new("S", TJ_F64, 2, gd, &csr, &s));
  for (int64_t i = 0; i < 4; i++) OK(tj_tensor_insert(s, (int64_t[]){i, i}, 1));
  OK(tj_tensor_pack(s));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "O(i,j) = A(i,j) + S(i,j)", (tj_tensor *[]){o, a, s}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  const double want_d[20] = {1, 2, 0, 0, 1, 0, 1, 0, 0, 0, 3, 0, 5, 5, 0, 0, 0, 0, 1, 6};
  expect_dense(o, 4, 5, want_d);
  ck_assert_int_eq(tj_tensor_nnz(o), 9);
  tj_arrays got;
  OK(tj_tensor_arrays(o, &got));
  ck_assert_ptr_eq(got.pos[1], opos);
  ck_assert_ptr_eq(got.vals, ovals);
  const int32_t want_pos[8] = {0, 3, 3, 4, 4, 7, 7, 9};
  for (int q = 0; q < 8; q++) ck_assert_int_eq(opos[q], want_pos[q]);
  /* O += A on a fresh gapped O (A's entries doubled, S's kept) */
  int32_t p2[8] = {5, 7, 9, 9, 1, 4, 8, 9};
  int32_t c2[10] = {99, 0, 2, 3, -7, 1, 4, 5, 4, 0};
  double v2[10] = {GAP, 3, 4, 5, GAP, 2, 1, GAP, 6, GAP};
  ar.pos[1] = p2, ar.crd[1] = c2, ar.vals = v2;
  tj_tensor *o2;
  OK(tj_tensor_wrap("O", &ar, 0, &o2));
  OK(tj_compile(cx, "O(i,j) += A(i,j)", (tj_tensor *[]){o2, a}, 2, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  expect_g(o2, 2);
  ck_assert_int_eq(tj_tensor_nnz(o2), 6);
  tj_context_free(cx);
  tj_tensor_free(a), tj_tensor_free(o), tj_tensor_free(o2), tj_tensor_free(s);
}
END_TEST

static void count_free(void *array, void *user) {
  free(array);
  ++*(int *)user;
}

/* tj_tensor_adopt over malloc'd gapped arrays, then an insert and pack:
 * the merge reads the entries only (G plus (1,1) = 7, 7 entries), pack's
 * arrays replace the adopted ones, each freed once at tj_tensor_free. */
START_TEST(adopted_gaps_insert_pack) {
  tj_format dl;
  OK(tj_format_parse("dl", &dl));
  int32_t *pos = malloc(sizeof g_pos), *crd = malloc(sizeof g_crd);
  double *vals = malloc(sizeof g_vals);
  memcpy(pos, g_pos, sizeof g_pos), memcpy(crd, g_crd, sizeof g_crd);
  memcpy(vals, g_vals, sizeof g_vals);
  tj_arrays ar = {.dtype = TJ_F64, .order = 2, .dims = gd, .fmt = &dl};
  ar.pos[1] = pos, ar.pos_len[1] = 8, ar.crd[1] = crd, ar.crd_len[1] = 10;
  ar.vals = vals, ar.vals_len = 10;
  int freed = 0;
  tj_tensor *t;
  OK(tj_tensor_adopt("T", &ar, 0, count_free, &freed, &t));
  ck_assert_int_eq(tj_tensor_nnz(t), 6);
  OK(tj_tensor_insert(t, (int64_t[]){1, 1}, 7));
  OK(tj_tensor_pack(t));
  ck_assert_int_eq(tj_tensor_nnz(t), 7);
  double v;
  OK(tj_tensor_get(t, (int64_t[]){1, 1}, &v));
  ck_assert_double_eq(v, 7);
  OK(tj_tensor_get(t, (int64_t[]){2, 3}, &v));
  ck_assert_double_eq(v, 5);
  tj_arrays got;
  OK(tj_tensor_arrays(t, &got));   /* packed: no gaps */
  ck_assert_int_eq(got.crd_len[1], 7);
  const int32_t want_pos[8] = {0, 2, 2, 3, 3, 6, 6, 7};
  for (int q = 0; q < 8; q++) ck_assert_int_eq(((int32_t *)got.pos[1])[q], want_pos[q]);
  tj_tensor_free(t);
  ck_assert_int_eq(freed, 3);
}
END_TEST

/* One malformed array per check, each message naming the first bad entry. */
static void refused(tj_arrays *ar, tj_status want, const char *needle) {
  tj_tensor *w = (tj_tensor *)1;
  ck_assert_int_eq(tj_tensor_wrap("W", ar, 0, &w), want);
  ck_assert_ptr_null(w);
  ck_assert_msg(strstr(tj_last_error(), needle), "want \"%s\" in: %s", needle, tj_last_error());
}

START_TEST(wrapped_loose_malformed) {
  tj_format dl;
  OK(tj_format_parse("dl", &dl));
  int32_t pos[8], crd[10];
  double vals[10];
  tj_arrays ar = {.dtype = TJ_F64, .order = 2, .dims = gd, .fmt = &dl};
  ar.pos[1] = pos, ar.pos_len[1] = 8, ar.crd[1] = crd, ar.crd_len[1] = 10;
  ar.vals = vals, ar.vals_len = 10;
#define RESET() memcpy(pos, g_pos, sizeof pos), memcpy(crd, g_crd, sizeof crd), \
                memcpy(vals, g_vals, sizeof vals)
  RESET();
  tj_tensor *w;
  OK(tj_tensor_wrap("W", &ar, 0, &w));   /* the good arrays */
  tj_tensor_free(w);
  ar.pos_len[1] = 5;   /* parents + 1, as compressed */
  refused(&ar, TJ_ERR_SHAPE, "needs a pos array of 8 entries");
  ar.pos_len[1] = 8, ar.vals_len = 9;
  refused(&ar, TJ_ERR_SHAPE, "needs 10 values");
  ar.vals_len = 10;
  RESET(), pos[4] = 4, pos[5] = 1;   /* row 2: lo > hi */
  refused(&ar, TJ_ERR_FORMAT, "parent position 2, pos[4] = 4 .. pos[5] = 1, ends before");
  RESET(), pos[7] = 11;   /* row 3: past crd */
  refused(&ar, TJ_ERR_FORMAT, "pos[7] = 11, lies outside the crd array");
  RESET(), pos[0] = -1;
  refused(&ar, TJ_ERR_FORMAT, "pos[0] = -1");
  RESET(), pos[6] = 6, pos[7] = 7;   /* row 3 over row 0's position 6 */
  refused(&ar, TJ_ERR_FORMAT, "position 6 lies in the segments of parent positions 0 and 3");
  RESET(), crd[6] = 5;   /* in row 0's segment: out of range */
  refused(&ar, TJ_ERR_FORMAT, "crd[6] = 5 is out of range 0..4");
  RESET(), crd[3] = 2;   /* row 2: 0, 2, 2 */
  refused(&ar, TJ_ERR_FORMAT, "crd[3] = 2 does not increase over crd[2] = 2 in the segment of "
                              "parent position 2");
  /* level 0 loose: its pos has 2 entries, and a gap parent's segment at
   * level 1 is not checked (gll_pos1 points them at other rows) */
  tj_format ll;
  OK(tj_format_parse("ll", &ll));
  tj_arrays al = {.dtype = TJ_F64, .order = 2, .dims = gd, .fmt = &ll};
  int32_t p0[2] = {1, 4}, c0[5] = {7, 0, 2, 3, 1};
  al.pos[0] = p0, al.pos_len[0] = 2, al.crd[0] = c0, al.crd_len[0] = 5;
  al.pos[1] = gll_pos1, al.pos_len[1] = 10, al.crd[1] = g_crd, al.crd_len[1] = 10;
  al.vals = g_vals, al.vals_len = 10;
  OK(tj_tensor_wrap("W", &al, 0, &w));
  tj_tensor_free(w);
  c0[2] = 0;   /* rows 0, 0, 3 */
  refused(&al, TJ_ERR_FORMAT, "level 0 (loose_compressed): crd[2] = 0 does not increase");
  c0[2] = 2, p0[1] = 5;   /* the gap at position 4 now a row: row 1 after row 3 */
  refused(&al, TJ_ERR_FORMAT, "crd[4] = 1 does not increase over crd[3] = 3");
  al.pos_len[0] = 1;
  refused(&al, TJ_ERR_SHAPE, "needs a pos array of 2 entries");
  /* no rows: no parents, so no pos (NULL is fine) and nothing stored */
  const int64_t none[2] = {0, 5};
  tj_arrays a0 = {.dtype = TJ_F64, .order = 2, .dims = none, .fmt = &dl};
  OK(tj_tensor_wrap("W", &a0, 0, &w));
  ck_assert_int_eq(tj_tensor_nnz(w), 0);
  tj_tensor_free(w);
#undef RESET
}
END_TEST

int main(void) {
  Suite *s = suite_create("loose");
  TCase *tc = tcase_create("loose");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, parses_packs_and_reads);
  tcase_add_test(tc, kernels_read_lo_and_hi);
  tcase_add_test(tc, outputs_through_a_standin);
  tcase_add_test(tc, wrapped_loose_malformed);
  tcase_add_loop_test(tc, wrapped_gaps_read, 0, 3);
  tcase_add_test(tc, wrapped_gaps_kernels);
  tcase_add_test(tc, wrapped_gaps_ttv);
  tcase_add_test(tc, wrapped_gaps_output);
  tcase_add_test(tc, wrapped_gaps_schedules);
  tcase_add_test(tc, adopted_gaps_insert_pack);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}

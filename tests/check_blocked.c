/* Blocked formats (floordiv / mod level maps, issue 15): parsing and
 * printing BSR in both spellings, its storage (the arrays of MLIR's own
 * example, worked out by hand), unpack / get / conversion / .mtx reading
 * in dimension coordinates with padding past extents that are not block
 * multiples, and SpMV / SpMM kernels over BSR operands checked against a
 * plain C loop over a dense copy (and the reference interpreter), plus the
 * refusals. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensorjit.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

static const char *BSR2 =
    "(i, j) -> (i floordiv 2 : dense, j floordiv 2 : compressed, i mod 2 : dense, "
    "j mod 2 : dense)";

START_TEST(parses_and_prints_bsr) {
  tj_format f;
  OK(tj_format_parse(BSR2, &f));
  ck_assert_int_eq(f.order, 4);
  ck_assert_int_eq(f.ndims, 2);
  ck_assert_str_eq(f.levels, "dsdd");
  int mo[4] = {0, 1, 0, 1}, op[4] = {TJ_LVL_FLOORDIV, TJ_LVL_FLOORDIV, TJ_LVL_MOD, TJ_LVL_MOD};
  for (int l = 0; l < 4; l++) {
    ck_assert_int_eq(f.mode_order[l], mo[l]);
    ck_assert_int_eq(f.lvl_op[l], op[l]);
    ck_assert_int_eq(f.lvl_k[l], 2);
  }
  char buf[256];
  tj_format_print(&f, buf, sizeof buf);
  ck_assert_str_eq(buf, "dsdd:0/2,1/2,0%2,1%2");
  tj_format g;
  OK(tj_format_parse(buf, &g));
  ck_assert(memcmp(&f, &g, sizeof f) == 0);
  tj_format_print_mlir(&f, buf, sizeof buf);
  ck_assert_str_eq(buf, "(d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 2 : compressed, "
                        "d0 mod 2 : dense, d1 mod 2 : dense)");
  OK(tj_format_parse(buf, &g));
  ck_assert(memcmp(&f, &g, sizeof f) == 0);
  /* Unblocked formats are unchanged: ndims 0. */
  OK(tj_format_parse("(i,j) -> (j : dense, i : compressed)", &g));
  ck_assert_int_eq(g.ndims, 0);
  tj_format_print(&g, buf, sizeof buf);
  ck_assert_str_eq(buf, "ds:1,0");
}
END_TEST

static void refused(const char *spec, const char *needle) {
  tj_format f;
  ck_assert_int_eq(tj_format_parse(spec, &f), TJ_ERR_PARSE);
  ck_assert_msg(strstr(tj_last_error(), needle), "%s: %s", spec, tj_last_error());
}

START_TEST(refuses_bad_maps) {
  refused("(i,j) -> (i floordiv 2 : dense, j : compressed)", "one 'floordiv k' and one 'mod k'");
  refused("(i,j) -> (i floordiv 2 : dense, j : compressed, i mod 3 : dense)",
          "same block size");
  refused("(i,j) -> (i mod 2 : dense, j : compressed, i floordiv 2 : dense)",
          "must come before");
  refused("(i,j) -> (i floordiv : dense, j : compressed, i mod 2 : dense)", "block size");
  refused("dsdd:0/2,1/2,0%2,1%0", "block size 0");
  refused("(i,j) -> (i floordiv 2 : dense, i floordiv 2 : dense, j : compressed, i mod 2 : "
          "dense)", "two floordiv levels");
}
END_TEST

/* MLIR's example (2x2 blocks):
 *   | 1 2 | . . | 4 . |
 *   | . 3 | . . | . 5 |
 *   | . . | 6 7 | . . |
 *   | . . | 8 . | . . |
 * positions[1] 0 2 3, coordinates[1] 0 2 1,
 * values 1 2 0 3  4 0 0 5  6 7 8 0. */
static const int64_t ex_coord[8][2] = {{0, 0}, {0, 1}, {1, 1}, {0, 4},
                                       {1, 5}, {2, 2}, {2, 3}, {3, 2}};
static const double ex_val[8] = {1, 2, 3, 4, 5, 6, 7, 8};

static tj_tensor *example(const tj_format *f) {
  int64_t dims[2] = {4, 6};
  tj_tensor *t;
  OK(tj_tensor_new("A", TJ_F64, 2, dims, f, &t));
  for (int e = 0; e < 8; e++) OK(tj_tensor_insert(t, ex_coord[e], ex_val[e]));
  OK(tj_tensor_pack(t));
  return t;
}

static void check_example_arrays(tj_tensor *t) {
  tj_arrays a;
  OK(tj_tensor_arrays(t, &a));
  ck_assert_int_eq(a.order, 2);
  ck_assert_int_eq(a.dims[0], 4);
  ck_assert_int_eq(a.dims[1], 6);
  ck_assert_int_eq(a.pos_len[1], 3);
  ck_assert_int_eq(a.crd_len[1], 3);
  ck_assert_int_eq(a.vals_len, 12);
  const int32_t *pos = a.pos[1], *crd = a.crd[1];
  const double *v = a.vals;
  int32_t ep[3] = {0, 2, 3}, ec[3] = {0, 2, 1};
  double ev[12] = {1, 2, 0, 3, 4, 0, 0, 5, 6, 7, 8, 0};
  for (int k = 0; k < 3; k++) {
    ck_assert_int_eq(pos[k], ep[k]);
    ck_assert_int_eq(crd[k], ec[k]);
  }
  for (int k = 0; k < 12; k++) ck_assert_double_eq(v[k], ev[k]);
}

START_TEST(packs_mlir_example) {
  tj_format f;
  OK(tj_format_parse(BSR2, &f));
  tj_tensor *t = example(&f);
  ck_assert_int_eq(tj_tensor_order(t), 2);
  ck_assert_int_eq(tj_tensor_dim(t, 1), 6);
  ck_assert_str_eq(tj_tensor_format(t)->levels, "dsdd");
  check_example_arrays(t);
  double v;
  OK(tj_tensor_get(t, (int64_t[]){1, 5}, &v));
  ck_assert_double_eq(v, 5);
  OK(tj_tensor_get(t, (int64_t[]){3, 3}, &v));   /* fill inside a stored block */
  ck_assert_double_eq(v, 0);
  OK(tj_tensor_get(t, (int64_t[]){3, 0}, &v));   /* no block */
  ck_assert_double_eq(v, 0);
  ck_assert_int_eq(tj_tensor_get(t, (int64_t[]){4, 0}, &v), TJ_ERR_SHAPE);
  /* Unpack: every stored value (fill zeros too) in dimension coordinates. */
  int64_t *c, n;
  double *vals;
  OK(tj_tensor_unpack(t, &c, &vals, &n));
  ck_assert_int_eq(n, 12);
  double sum = 0;
  for (int64_t e = 0; e < n; e++) sum += vals[e] * (double)(c[2 * e] * 10 + c[2 * e + 1]);
  /* 1*0 + 2*1 + 3*11 + 4*4 + 5*15 + 6*22 + 7*23 + 8*32 = 675 */
  ck_assert_double_eq(sum, 675);
  free(c), free(vals);
  /* To CSR: the eight entries (block fill is dropped), and back. */
  tj_format csr;
  OK(tj_format_parse("ds", &csr));
  tj_tensor *s, *b;
  OK(tj_tensor_convert(t, &csr, &s));
  ck_assert_int_eq(tj_tensor_nnz(s), 8);
  for (int e = 0; e < 8; e++) {
    OK(tj_tensor_get(s, ex_coord[e], &v));
    ck_assert_double_eq(v, ex_val[e]);
  }
  OK(tj_tensor_convert(s, &f, &b));
  check_example_arrays(b);
  /* The taco spelling builds the same tensor. */
  tj_format g;
  OK(tj_format_parse("dsdd:0/2,1/2,0%2,1%2", &g));
  tj_tensor *u = example(&g);
  check_example_arrays(u);
  tj_tensor_free(u);
  tj_tensor_free(b);
  tj_tensor_free(s);
  tj_tensor_free(t);
}
END_TEST

/* A 5 x 7 matrix in 2x3 blocks (MLIR's second example's blocks): block
 * grid 3 x 3, the last block row and column padded. Entries (4,6) = 9,
 * (0,0) = 1, (4,0) = 2: blocks (0,0), (2,0), (2,2); the values array holds
 * 3 blocks of 6. Unpack drops the padding: 3 rows of block row 2 are
 * only row 4, so block (2,0) gives 3 values and (2,2) 1 (column 6). */
START_TEST(pads_extents_that_are_not_block_multiples) {
  tj_format f;
  OK(tj_format_parse("(i,j) -> (i floordiv 2 : dense, j floordiv 3 : compressed, i mod 2 : "
                     "dense, j mod 3 : dense)", &f));
  int64_t dims[2] = {5, 7};
  tj_tensor *t;
  OK(tj_tensor_new("A", TJ_F64, 2, dims, &f, &t));
  OK(tj_tensor_insert(t, (int64_t[]){4, 6}, 9));
  OK(tj_tensor_insert(t, (int64_t[]){0, 0}, 1));
  OK(tj_tensor_insert(t, (int64_t[]){4, 0}, 2));
  ck_assert_int_eq(tj_tensor_insert(t, (int64_t[]){5, 0}, 1), TJ_ERR_SHAPE);
  OK(tj_tensor_pack(t));
  ck_assert_int_eq(tj_tensor_nnz(t), 18);
  tj_arrays a;
  OK(tj_tensor_arrays(t, &a));
  ck_assert_int_eq(a.pos_len[1], 4);
  ck_assert_int_eq(((int32_t *)a.pos[1])[3], 3);
  ck_assert_int_eq(((int32_t *)a.crd[1])[2], 2);
  ck_assert_double_eq(((double *)a.vals)[12], 9);   /* block (2,2): ii 0, jj 0 is (4,6) */
  double v;
  OK(tj_tensor_get(t, (int64_t[]){4, 6}, &v));
  ck_assert_double_eq(v, 9);
  int64_t *c, n;
  double *vals;
  OK(tj_tensor_unpack(t, &c, &vals, &n));
  ck_assert_int_eq(n, 6 + 3 + 1);
  for (int64_t e = 0; e < n; e++) ck_assert(c[2 * e] < 5 && c[2 * e + 1] < 7);
  free(c), free(vals);
  tj_tensor_free(t);
}
END_TEST

START_TEST(reads_mtx_into_bsr) {
  char path[] = "/tmp/tj_blocked_XXXXXX.mtx";
  int fd = mkstemps(path, 4);
  ck_assert(fd >= 0);
  FILE *fp = fdopen(fd, "w");
  fprintf(fp, "%%%%MatrixMarket matrix coordinate real general\n4 6 8\n");
  for (int e = 0; e < 8; e++)
    fprintf(fp, "%lld %lld %g\n", (long long)ex_coord[e][0] + 1, (long long)ex_coord[e][1] + 1,
            ex_val[e]);
  fclose(fp);
  tj_format f;
  OK(tj_format_parse(BSR2, &f));
  tj_tensor *t;
  OK(tj_tensor_read(path, "A", &f, &t));
  unlink(path);
  check_example_arrays(t);
  tj_tensor_free(t);
}
END_TEST

/* A random m x n matrix with about half of its b_r x b_c blocks stored
 * (each stored block 3/4 full), as a dense copy and a tensor of format f. */
static tj_tensor *blocked_matrix(const char *spec, int64_t m, int64_t n, int br, int bc,
                                 unsigned seed, double **dense) {
  tj_format f;
  OK(tj_format_parse(spec, &f));
  int64_t dims[2] = {m, n};
  tj_tensor *t;
  OK(tj_tensor_new("A", TJ_F64, 2, dims, &f, &t));
  *dense = calloc((size_t)(m * n), sizeof **dense);
  srand(seed);
  for (int64_t ib = 0; ib < (m + br - 1) / br; ib++)
    for (int64_t jb = 0; jb < (n + bc - 1) / bc; jb++) {
      if (rand() % 2) continue;
      for (int ii = 0; ii < br; ii++)
        for (int jj = 0; jj < bc; jj++) {
          int64_t c[2] = {ib * br + ii, jb * bc + jj};
          if (rand() % 4 == 0 || c[0] >= m || c[1] >= n) continue;
          double v = (double)(rand() % 19 - 9);
          (*dense)[c[0] * n + c[1]] = v;
          OK(tj_tensor_insert(t, c, v));
        }
    }
  OK(tj_tensor_pack(t));
  return t;
}

static tj_tensor *dense_tensor(const char *name, int order, const int64_t *dims,
                               const double *vals) {
  tj_tensor *t;
  OK(tj_tensor_new(name, TJ_F64, order, dims, NULL, &t));
  if (!vals) return t;
  int64_t c[2] = {0, 0};
  for (c[0] = 0; c[0] < dims[0]; c[0]++)
    for (c[1] = 0; c[1] < (order == 2 ? dims[1] : 1); c[1]++)
      OK(tj_tensor_insert(t, c, vals[order == 2 ? c[0] * dims[1] + c[1] : c[0]]));
  OK(tj_tensor_pack(t));
  return t;
}

static void check_values(tj_tensor *t, const double *want, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      double v;
      int64_t c[2] = {i, j};
      OK(tj_tensor_get(t, c, &v));
      ck_assert_msg(v == want[i * cols + j], "(%lld,%lld): %g, want %g", (long long)i,
                    (long long)j, v, want[i * cols + j]);
    }
}

/* The caller's BSR arrays of MLIR's example, wrapped without a copy: the
 * same arrays come back, get and SpMV read them (y by hand), and a block
 * column out of range is refused naming its level and position. */
START_TEST(wraps_bsr_arrays) {
  int32_t pos[3] = {0, 2, 3}, crd[3] = {0, 2, 1};
  double vals[12] = {1, 2, 0, 3, 4, 0, 0, 5, 6, 7, 8, 0};
  tj_format f;
  OK(tj_format_parse(BSR2, &f));
  int64_t dims[2] = {4, 6};
  tj_arrays a = {.dtype = TJ_F64, .order = 2, .dims = dims, .fmt = &f, .vals = vals,
                 .vals_len = 12};
  a.pos[1] = pos, a.pos_len[1] = 3, a.crd[1] = crd, a.crd_len[1] = 3;
  tj_tensor *t;
  OK(tj_tensor_wrap("A", &a, 0, &t));
  check_example_arrays(t);
  tj_arrays back;
  OK(tj_tensor_arrays(t, &back));
  ck_assert_ptr_eq(back.vals, vals);
  ck_assert_ptr_eq(back.crd[1], crd);
  double v;
  OK(tj_tensor_get(t, (int64_t[]){2, 3}, &v));
  ck_assert_double_eq(v, 7);
  /* y = A x with x = (1, 2, 3, 4, 5, 6): rows 1*1+2*2+4*5 = 25, 3*2+5*6 = 36,
   * 6*3+7*4 = 46, 8*3 = 24. */
  int64_t n = 6, m = 4;
  double xv[6] = {1, 2, 3, 4, 5, 6}, want[4] = {25, 36, 46, 24};
  tj_tensor *x = dense_tensor("x", 1, &n, xv), *y = dense_tensor("y", 1, &m, NULL);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, t, x}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  check_values(y, want, m, 1);
  tj_context_free(cx);
  tj_tensor_free(x), tj_tensor_free(y), tj_tensor_free(t);
  ck_assert_double_eq(vals[9], 7);   /* the caller's arrays outlive the tensor */
  crd[2] = 3;   /* 6 columns: block columns 0..2 */
  ck_assert_int_eq(tj_tensor_wrap("A", &a, 0, &t), TJ_ERR_FORMAT);
  ck_assert_msg(strstr(tj_last_error(), "level 1"), "%s", tj_last_error());
  crd[2] = 1;
  a.vals_len = 11;
  ck_assert_int_eq(tj_tensor_wrap("A", &a, 0, &t), TJ_ERR_SHAPE);
  ck_assert_msg(strstr(tj_last_error(), "needs 12 values"), "%s", tj_last_error());
  /* The same arrays as a 3 x 5 matrix: row 3 and column 5 are padding,
   * where vals[7] = 5 (block (0,2)'s (1,5)) and vals[10] = 8 (block
   * (1,1)'s (3,2)) lie. They were accepted, get read 0 there, and a sum
   * over the blocks added them in (row sums 7, 8, 13 instead of 7, 3, 13). */
  a.vals_len = 12;
  dims[0] = 3, dims[1] = 5;
  ck_assert_int_eq(tj_tensor_wrap("A", &a, 0, &t), TJ_ERR_FORMAT);
  ck_assert_msg(strstr(tj_last_error(), "tensor A: vals[7] = 5 lies in a block's padding"), "%s",
                tj_last_error());
  vals[7] = 0;
  ck_assert_int_eq(tj_tensor_wrap("A", &a, 0, &t), TJ_ERR_FORMAT);
  ck_assert_msg(strstr(tj_last_error(), "vals[10] = 8"), "%s", tj_last_error());
  vals[10] = 0;
  OK(tj_tensor_wrap("A", &a, 0, &t));
  double sums[3] = {7, 3, 13};
  int64_t three = 3;
  y = dense_tensor("y", 1, &three, NULL);
  OK(tj_context_new(&cx));
  OK(tj_compile(cx, "y(i) = A(i,j)", (tj_tensor *[]){y, t}, 2, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  check_values(y, sums, 3, 1);
  tj_context_free(cx);
  tj_tensor_free(y), tj_tensor_free(t);
}
END_TEST

/* y = A x over BSR A, against a plain loop over A's dense copy. */
static void spmv_case(const char *spec, int64_t m, int64_t n, int br, int bc) {
  double *ad;
  tj_tensor *a = blocked_matrix(spec, m, n, br, bc, 11, &ad);
  double *x = malloc(sizeof *x * (size_t)n), *want = calloc((size_t)m, sizeof *want);
  for (int64_t j = 0; j < n; j++) x[j] = (double)(j % 7) - 3;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) want[i] += ad[i * n + j] * x[j];
  tj_tensor *xt = dense_tensor("x", 1, &n, x), *y = dense_tensor("y", 1, &m, NULL);
  tj_tensor *ops[3] = {y, a, xt};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = A(i,j) * x(j)", ops, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  check_values(y, want, m, 1);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));   /* again: overwritten, not added */
  check_values(y, want, m, 1);
  tj_tensor *yr = dense_tensor("y", 1, &m, NULL);
  tj_tensor *rops[3] = {yr, a, xt};
  OK(tj_reference("y(i) = A(i,j) * x(j)", rops, 3));
  check_values(yr, want, m, 1);
  tj_context_free(cx);
  tj_tensor_free(yr), tj_tensor_free(y), tj_tensor_free(xt), tj_tensor_free(a);
  free(ad), free(x), free(want);
}

START_TEST(spmv_bsr) {
  spmv_case("(i,j) -> (i floordiv 4 : dense, j floordiv 4 : compressed, i mod 4 : dense, "
            "j mod 4 : dense)", 32, 48, 4, 4);
  spmv_case("dsdd:0/8,1/8,0%8,1%8", 64, 40, 8, 8);
  spmv_case("dsdd:0/2,1/3,0%2,1%3", 20, 30, 2, 3);
  /* Blocks stored column-major inside (j mod before i mod). */
  spmv_case("dsdd:0/4,1/4,1%4,0%4", 16, 16, 4, 4);
  /* Extents that are not multiples of the block: padded copies of x, y. */
  spmv_case("dsdd:0/4,1/4,0%4,1%4", 18, 23, 4, 4);
  spmv_case("dsdd:0/2,1/3,0%2,1%3", 7, 5, 2, 3);
  /* ELL-like slices of 8 rows: each slice's columns compressed, the 8 rows'
   * values of a column side by side (SELL's layout without the padding
   * count); 37 rows, the last slice cut. */
  spmv_case("(i,j) -> (i floordiv 8 : dense, j : compressed, i mod 8 : dense)", 37, 29, 8, 1);
  /* Rows of 1x4 blocks (a row's columns in runs of 4). */
  spmv_case("(i,j) -> (i : dense, j floordiv 4 : compressed, j mod 4 : dense)", 21, 30, 1, 4);
}
END_TEST

/* C = A B over BSR A (B dense, p columns: 45 runs the 32-lane tier of
 * AVX-512's register-blocked kernel, the 8-lane one and the remainder). */
static void spmm_case(const char *spec, int64_t m, int64_t n, int b, int64_t p) {
  double *ad;
  tj_tensor *a = blocked_matrix(spec, m, n, b, b, 5, &ad);
  int64_t bd[2] = {n, p}, cd[2] = {m, p};
  double *bv = malloc(sizeof *bv * (size_t)(n * p)), *want = calloc((size_t)(m * p), sizeof *want);
  for (int64_t e = 0; e < n * p; e++) bv[e] = (double)(e % 11) - 5;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++)
      for (int64_t k = 0; k < p; k++) want[i * p + k] += ad[i * n + j] * bv[j * p + k];
  tj_tensor *bt = dense_tensor("B", 2, bd, bv), *c = dense_tensor("C", 2, cd, NULL);
  tj_tensor *ops[3] = {c, a, bt};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "C(i,k) = A(i,j) * B(j,k)", ops, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  check_values(c, want, m, p);
  tj_tensor *cr = dense_tensor("C", 2, cd, NULL);
  tj_tensor *rops[3] = {cr, a, bt};
  OK(tj_reference("C(i,k) = A(i,j) * B(j,k)", rops, 3));
  check_values(cr, want, m, p);
  tj_context_free(cx);
  tj_tensor_free(cr), tj_tensor_free(c), tj_tensor_free(bt), tj_tensor_free(a);
  free(ad), free(bv), free(want);
}

START_TEST(spmm_bsr) {
  spmm_case("dsdd:0/4,1/4,0%4,1%4", 24, 32, 4, 5);
  spmm_case("(i,j) -> (i floordiv 8 : dense, j : compressed, i mod 8 : dense)", 37, 29, 8, 45);
  spmm_case("dsdd:0/8,1/8,0%8,1%8", 32, 16, 8, 5);
  spmm_case("dsdd:0/4,1/4,0%4,1%4", 10, 14, 4, 5);
  spmm_case("dsdd:0/4,1/4,0%4,1%4", 24, 32, 4, 45);
  spmm_case("dsdd:0/8,1/8,0%8,1%8", 32, 16, 8, 45);
  spmm_case("dsdd:0/4,1/4,0%4,1%4", 18, 23, 4, 45);
  spmm_case("dsdd:0/8,1/8,0%8,1%8", 21, 13, 8, 29);
  spmm_case("dsdd:0/2,1/2,0%2,1%2", 9, 7, 2, 45);
}
END_TEST

/* The stored blocks of BSR tensor t (block row, block column), as the
 * string "ib.jb ib.jb ...". */
static void block_list(tj_tensor *t, char *out, size_t cap) {
  tj_arrays a;
  OK(tj_tensor_arrays(t, &a));
  const int32_t *pos = a.pos[1], *crd = a.crd[1];
  size_t len = 0;
  out[0] = 0;
  for (int64_t ib = 0; ib + 1 < a.pos_len[1]; ib++)
    for (int32_t p = pos[ib]; p < pos[ib + 1]; p++)
      len += (size_t)snprintf(out + len, cap - len, "%s%lld.%d", len ? " " : "", (long long)ib,
                              crd[p]);
}

/* Runs expr (output first in ops) and, again, its reference into a fresh
 * output of the same format; the kernel's output must equal want (m x n,
 * by hand) entry by entry and hold exactly the blocks `blocks`, each
 * block whole: the stored values past the extents (padding) are zero. */
static void bsr_output_case(const char *expr, tj_tensor **ops, int nops, const double *want,
                            const char *blocks) {
  tj_tensor *a = ops[0];
  int64_t m = tj_tensor_dim(a, 0), n = tj_tensor_dim(a, 1);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, expr, ops, nops, NULL, NULL, &k));
  for (int rep = 0; rep < 2; rep++) {   /* a rerun rebuilds, never adds */
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    check_values(a, want, m, n);
    char got[4096];
    block_list(a, got, sizeof got);
    ck_assert_msg(!strcmp(got, blocks), "%s: blocks %s, want %s", expr, got, blocks);
  }
  tj_arrays ar;
  OK(tj_tensor_arrays(a, &ar));
  const tj_format *f = tj_tensor_format(a);
  int br = f->lvl_k[0], bc = f->lvl_k[1];
  ck_assert_int_eq(ar.vals_len, ar.crd_len[1] * br * bc);
  const int32_t *pos = ar.pos[1], *crd = ar.crd[1];
  const double *v = ar.vals;
  for (int64_t ib = 0; ib + 1 < ar.pos_len[1]; ib++)
    for (int32_t p = pos[ib]; p < pos[ib + 1]; p++)
      for (int ii = 0; ii < br; ii++)
        for (int jj = 0; jj < bc; jj++) {
          int64_t i = ib * br + ii, j = (int64_t)crd[p] * bc + jj;
          double want_v = i < m && j < n ? want[i * n + j] : 0;
          ck_assert_msg(v[(p * br + ii) * bc + jj] == want_v, "%s: (%lld,%lld) stores %g",
                        expr, (long long)i, (long long)j, v[(p * br + ii) * bc + jj]);
        }
  /* The reference interpreter agrees. */
  tj_tensor *r;
  int64_t dims[2] = {m, n};
  OK(tj_tensor_new(tj_tensor_name(a), TJ_F64, 2, dims, f, &r));
  tj_tensor *rops[8];
  rops[0] = r;
  for (int e = 1; e < nops; e++) rops[e] = ops[e];
  OK(tj_reference(expr, rops, nops));
  check_values(r, want, m, n);
  tj_tensor_free(r);
  tj_context_free(cx);
}

static tj_tensor *named(tj_tensor *t, const char *name) {
  tj_tensor *c;
  OK(tj_tensor_convert(t, tj_tensor_format(t), &c));
  OK(tj_tensor_rename(c, name));
  tj_tensor_free(t);
  return c;
}

/* BSR outputs, pinned by hand on MLIR's 4 x 6 example (2x2 blocks 0.0,
 * 0.2, 1.1) and a second matrix C with entries (0,2) = 10, (2,3) = 20,
 * (3,5) = 30 (blocks 0.1, 1.1, 1.2):
 *   A = B + C: the union, blocks 0.0 0.1 0.2 1.1 1.2, each whole;
 *   A = B * s: B's blocks;  A = B .* C: both's, 1.1 (7 * 20 = 140);
 *   A = B .* (x y^T) (sampled dense product): B's blocks. */
START_TEST(bsr_outputs_by_hand) {
  tj_format f;
  OK(tj_format_parse(BSR2, &f));
  int64_t dims[2] = {4, 6};
  tj_tensor *b = example(&f), *c, *a;
  b = named(b, "B");
  OK(tj_tensor_new("C", TJ_F64, 2, dims, &f, &c));
  OK(tj_tensor_insert(c, (int64_t[]){0, 2}, 10));
  OK(tj_tensor_insert(c, (int64_t[]){2, 3}, 20));
  OK(tj_tensor_insert(c, (int64_t[]){3, 5}, 30));
  OK(tj_tensor_pack(c));
  OK(tj_tensor_new("A", TJ_F64, 2, dims, &f, &a));
  double bd[24] = {0}, sum[24], scaled[24], prod[24] = {0}, sampled[24];
  for (int e = 0; e < 8; e++) bd[ex_coord[e][0] * 6 + ex_coord[e][1]] = ex_val[e];
  memcpy(sum, bd, sizeof sum);
  sum[2] += 10, sum[15] += 20, sum[23] += 30;
  for (int e = 0; e < 24; e++) scaled[e] = bd[e] * 2.5;
  prod[15] = 7 * 20;
  double xv[4] = {1, -2, 3, 0.5}, yv[6] = {2, 1, -1, 4, 0.25, 3};
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++) sampled[i * 6 + j] = bd[i * 6 + j] * xv[i] * yv[j];
  int64_t four = 4, six = 6;
  double sv = 2.5;
  tj_tensor *s;
  OK(tj_tensor_new("s", TJ_F64, 0, NULL, NULL, &s));
  OK(tj_tensor_insert(s, NULL, sv));
  OK(tj_tensor_pack(s));
  tj_tensor *x = dense_tensor("x", 1, &four, xv),
            *y = dense_tensor("y", 1, &six, yv);
  bsr_output_case("A(i,j) = B(i,j) + C(i,j)", (tj_tensor *[]){a, b, c}, 3, sum,
                  "0.0 0.1 0.2 1.1 1.2");
  bsr_output_case("A(i,j) = B(i,j) * s", (tj_tensor *[]){a, b, s}, 3, scaled, "0.0 0.2 1.1");
  bsr_output_case("A(i,j) = B(i,j) * C(i,j)", (tj_tensor *[]){a, b, c}, 3, prod, "1.1");
  bsr_output_case("A(i,j) = B(i,j) * x(i) * y(j)", (tj_tensor *[]){a, b, x, y}, 4, sampled,
                  "0.0 0.2 1.1");
  tj_tensor_free(a), tj_tensor_free(b), tj_tensor_free(c);
  tj_tensor_free(s), tj_tensor_free(x), tj_tensor_free(y);
}
END_TEST

/* BSR outputs at sizes that are and are not block multiples, against
 * plain loops over dense copies: the union B + C, a scaled copy, the
 * sampled product B .* (U V) (SDDMM, a sum over k inside each stored
 * block), B + 1 (every block stored; its padding must stay 0) and
 * A += B (A's blocks and B's). */
static void bsr_output_sizes(const char *spec, int64_t m, int64_t n, int br, int bc) {
  double *bd, *cd, *ad0;
  tj_tensor *b = named(blocked_matrix(spec, m, n, br, bc, 3, &bd), "B");
  tj_tensor *c = named(blocked_matrix(spec, m, n, br, bc, 4, &cd), "C");
  int64_t mn = m * n, p = 3, ud[2] = {m, p}, vd[2] = {p, n};
  double *want = malloc(sizeof *want * (size_t)mn), *uv = malloc(sizeof *uv * (size_t)(m * p)),
         *vv = malloc(sizeof *vv * (size_t)(p * n));
  for (int64_t e = 0; e < m * p; e++) uv[e] = (double)(e % 5) - 2;
  for (int64_t e = 0; e < p * n; e++) vv[e] = (double)(e % 3) + 1;
  tj_tensor *u = dense_tensor("U", 2, ud, uv), *v = dense_tensor("V", 2, vd, vv), *a;
  tj_format f;
  OK(tj_format_parse(spec, &f));
  int64_t dims[2] = {m, n};
  OK(tj_tensor_new("A", TJ_F64, 2, dims, &f, &a));
  /* The stored blocks of the union, by the dense copies' block grids. */
  char blocks[8192], bblocks[8192], all[8192];
  size_t len = 0, blen = 0, alen = 0;
  for (int64_t ib = 0; ib < (m + br - 1) / br; ib++)
    for (int64_t jb = 0; jb < (n + bc - 1) / bc; jb++) {
      bool inb = false, inc = false;
      for (int64_t i = ib * br; i < (ib + 1) * br && i < m; i++)
        for (int64_t j = jb * bc; j < (jb + 1) * bc && j < n; j++)
          inb |= bd[i * n + j] != 0, inc |= cd[i * n + j] != 0;
      char one[32];
      snprintf(one, sizeof one, "%lld.%lld", (long long)ib, (long long)jb);
      if (inb || inc) len += (size_t)snprintf(blocks + len, sizeof blocks - len, "%s%s", len ? " " : "", one);
      if (inb) blen += (size_t)snprintf(bblocks + blen, sizeof bblocks - blen, "%s%s", blen ? " " : "", one);
      alen += (size_t)snprintf(all + alen, sizeof all - alen, "%s%s", alen ? " " : "", one);
    }
  for (int64_t e = 0; e < mn; e++) want[e] = bd[e] + cd[e];
  bsr_output_case("A(i,j) = B(i,j) + C(i,j)", (tj_tensor *[]){a, b, c}, 3, want, blocks);
  for (int64_t e = 0; e < mn; e++) want[e] = -bd[e];
  bsr_output_case("A(i,j) = -B(i,j)", (tj_tensor *[]){a, b}, 2, want, bblocks);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double t = 0;
      for (int64_t k = 0; k < p; k++) t += uv[i * p + k] * vv[k * n + j];
      want[i * n + j] = bd[i * n + j] * t;
    }
  bsr_output_case("A(i,j) = B(i,j) * U(i,k) * V(k,j)", (tj_tensor *[]){a, b, u, v}, 4, want,
                  bblocks);
  for (int64_t e = 0; e < mn; e++) want[e] = bd[e] + 1;
  bsr_output_case("A(i,j) = B(i,j) + 1", (tj_tensor *[]){a, b}, 2, want, all);
  /* A += B: A starts as C. */
  tj_tensor_free(a);
  a = named(blocked_matrix(spec, m, n, br, bc, 4, &ad0), "A");
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "A(i,j) += B(i,j)", (tj_tensor *[]){a, b}, 2, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int64_t e = 0; e < mn; e++) want[e] = bd[e] + cd[e];
  check_values(a, want, m, n);
  char got[8192];
  block_list(a, got, sizeof got);
  ck_assert_str_eq(got, blocks);
  tj_context_free(cx);
  tj_tensor_free(a), tj_tensor_free(b), tj_tensor_free(c), tj_tensor_free(u), tj_tensor_free(v);
  free(bd), free(cd), free(ad0), free(want), free(uv), free(vv);
}

START_TEST(bsr_outputs) {
  bsr_output_sizes("dsdd:0/4,1/4,0%4,1%4", 16, 24, 4, 4);
  bsr_output_sizes("dsdd:0/4,1/4,0%4,1%4", 18, 23, 4, 4);
  bsr_output_sizes("dsdd:0/2,1/3,0%2,1%3", 7, 5, 2, 3);
  bsr_output_sizes("dsdd:0/8,1/8,0%8,1%8", 21, 13, 8, 8);
}
END_TEST

/* How often needle occurs in text. */
static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

/* The loop IR of C = A B over BSR A after pass `pass` (malloc'd). */
static char *ir_after(const char *spec, int b, const char *pass) {
  double *ad;
  tj_tensor *a = blocked_matrix(spec, 16, 16, b, b, 5, &ad);
  int64_t bd[2] = {16, 40}, cd[2] = {16, 40};
  tj_tensor *bt = dense_tensor("B", 2, bd, NULL), *c = dense_tensor("C", 2, cd, NULL);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "C(i,k) = A(i,j) * B(j,k)", (tj_tensor *[]){c, a, bt}, 3, NULL, NULL, &k));
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  OK(tj_kernel_print_after(k, pass, f));
  fclose(f);
  tj_context_free(cx);
  tj_tensor_free(c), tj_tensor_free(bt), tj_tensor_free(a);
  free(ad);
  return text;
}

/* The register-blocked micro-kernel (lower/promote.c): over a block row,
 * the b rows of C's k-panel are accumulators, added to C once after the
 * row's blocks, and the block's rows are jammed (one copy of the j_i
 * loop; B's vector loaded once for all rows). 8x8 runs as two groups of
 * 4 rows, each its own walk of the block row, when the block row holds
 * at most 8 blocks (64 rows of B, chosen at run time), else whole; 4x4
 * as two groups of 2 rows up to 16 blocks. Both versions are in the
 * kernel: 8x8 16 accumulators and 3 walks in all, 4x4 8 and 3. */
START_TEST(spmm_bsr_is_register_blocked) {
  for (int b = 4; b <= 8; b += 4) {
    char spec[64];
    snprintf(spec, sizeof spec, "dsdd:0/%d,1/%d,0%%%d,1%%%d", b, b, b, b);
    char *lowered = ir_after(spec, b, "lower"), *text = ir_after(spec, b, "promote");
    ck_assert_int_eq(count(lowered, "double acc_"), 0);
    ck_assert_int_eq(count(lowered, "C_vals[(i_b * "), 1);   /* one update, in the i_i loop */
    /* 8x8 and, below AVX-512, 4x4 run short block rows in groups (of 4
     * and of 2 rows) and long ones whole, chosen at run time: three walks
     * of the row; with AVX-512 a 4x4 row is always whole: one walk. */
    bool whole = b == 4 && __builtin_cpu_supports("avx512f");
    int accs = whole ? 4 : b == 4 ? 8 : 16, walks = whole ? 1 : 3;
    ck_assert_int_eq(count(text, "double acc_"), accs);
    ck_assert_int_eq(count(text, "] += acc_"), accs);
    ck_assert_int_eq(count(text, "for (int64_t i_i"), 0);      /* jammed */
    ck_assert_int_eq(count(text, "for (int64_t pA1_1"), walks);
    ck_assert_int_eq(count(text, "for (int64_t j_i"), walks);
    ck_assert_int_eq(count(text, "= B_vals["), walks);         /* shared by a group's rows */
    char cond[96];
    snprintf(cond, sizeof cond, "(int64_t)A1_pos[pA0 + 1] - (int64_t)A1_pos[pA0]) * %d <= 64)", b);
    ck_assert_int_eq(count(text, cond), whole ? 0 : 1);
    ck_assert_int_eq(count(text, "double t"), 0);               /* fused into acc */
    /* The accumulators sit outside the loop over the row's blocks: the
     * update of C comes after that loop's end. */
    const char *row = strstr(text, "for (int64_t pA1_1"), *upd = strstr(text, "] += acc_");
    ck_assert(row && upd && row < upd && strstr(text, "double acc_") < row);
    free(lowered), free(text);
    /* The vector loop over k has as many lanes as the accumulators leave
     * registers for (16 of AVX-512's 32): 4 rows of 32 lanes, 8 of 16. */
    text = ir_after(spec, b, "vectorize");
    if (__builtin_cpu_supports("avx512f")) {
      ck_assert_msg(strstr(text, "vector(32)"), "%s", text);
      ck_assert_msg(!strstr(text, "vector(64)"), "%s", text);
      ck_assert_msg((b == 8) == (strstr(text, "vector(16)") != NULL), "%s", text);
    }
    free(text);
  }
}
END_TEST

/* Block rows of at most 64 / b blocks run in groups of rows, longer ones
 * whole (lower/promote.c): matrices with both, against a plain loop over
 * their dense copies. */
static void spmm_both_lengths(const char *spec, int64_t m, int64_t n, int b) {
  double *ad;
  tj_tensor *a = blocked_matrix(spec, m, n, b, b, 5, &ad);
  tj_arrays arr;
  OK(tj_tensor_arrays(a, &arr));
  const int *pos = arr.pos[1];
  int shorter = 0, longer = 0;
  for (int64_t ib = 0; ib < m / b; ib++) {
    if ((pos[ib + 1] - pos[ib]) * b <= 64) shorter++;
    else longer++;
  }
  ck_assert_msg(shorter > 0 && longer > 0, "%s: %d short, %d long block rows", spec, shorter,
                longer);
  tj_tensor_free(a);
  free(ad);
  spmm_case(spec, m, n, b, 45);   /* the same matrix (seed 5) */
  spmm_case(spec, m, n, b, 7);
}

/* SpMM and SpMV over BSR A into outputs that start as NaN, so a value
 * the kernel neither zeroes nor stores shows (a guard for a kernel that
 * stores C's rows once instead of zeroing and adding: bench/README.md);
 * A has an empty block row and block rows both shorter and longer than
 * the row groups' limit; `+=` adds to what C held. 1 and 2 threads,
 * extents that are and are not block multiples, against plain loops. */
static void stored_once_case(const char *spec, int64_t m, int64_t n, int b, int64_t p,
                             bool accumulate, int nthreads) {
  double *ad;
  tj_tensor *a = blocked_matrix(spec, m, n, b, b, 9, &ad);
  for (int64_t i = b; i < 2 * b && i < m; i++)   /* block row 1 empty: its rows of A zero */
    for (int64_t j = 0; j < n; j++) ad[i * n + j] = 0;
  tj_tensor *ae;
  OK(tj_tensor_new("A", TJ_F64, 2, (int64_t[]){m, n}, tj_tensor_format(a), &ae));
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++)
      if (ad[i * n + j] != 0) OK(tj_tensor_insert(ae, (int64_t[]){i, j}, ad[i * n + j]));
  OK(tj_tensor_pack(ae));
  tj_tensor_free(a);
  int64_t bd[2] = {n, p}, cd[2] = {m, p};
  double *bv = malloc(sizeof *bv * (size_t)(n * p)), *old = malloc(sizeof *old * (size_t)(m * p));
  double *want = malloc(sizeof *want * (size_t)(m * p)), *nan = malloc(sizeof *nan * (size_t)(m * p));
  for (int64_t e = 0; e < n * p; e++) bv[e] = (double)(e % 13) - 6;
  for (int64_t e = 0; e < m * p; e++) old[e] = (double)(e % 5) + 1, nan[e] = NAN;
  for (int64_t i = 0; i < m; i++)
    for (int64_t k = 0; k < p; k++) {
      double sum = accumulate ? old[i * p + k] : 0;
      for (int64_t j = 0; j < n; j++) sum += ad[i * n + j] * bv[j * p + k];
      want[i * p + k] = sum;
    }
  const char *expr = p == 1 ? (accumulate ? "y(i) += A(i,j) * x(j)" : "y(i) = A(i,j) * x(j)")
                            : (accumulate ? "C(i,k) += A(i,j) * B(j,k)" : "C(i,k) = A(i,j) * B(j,k)");
  tj_tensor *bt = p == 1 ? dense_tensor("x", 1, &n, bv) : dense_tensor("B", 2, bd, bv);
  tj_tensor *c = p == 1 ? dense_tensor("y", 1, &m, accumulate ? old : nan)
                        : dense_tensor("C", 2, cd, accumulate ? old : nan);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = {0};
  o.opt_level = 3, o.nthreads = nthreads;
  tj_kernel *k;
  OK(tj_compile(cx, expr, (tj_tensor *[]){c, ae, bt}, 3, NULL, &o, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  check_values(c, want, m, p);
  if (!accumulate) {   /* again over NaN: every value stored again */
    tj_tensor_free(c);
    c = p == 1 ? dense_tensor("y", 1, &m, nan) : dense_tensor("C", 2, cd, nan);
    OK(tj_compile(cx, expr, (tj_tensor *[]){c, ae, bt}, 3, NULL, &o, &k));
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    check_values(c, want, m, p);
  }
  tj_context_free(cx);
  tj_tensor_free(c), tj_tensor_free(bt), tj_tensor_free(ae);
  free(ad), free(bv), free(old), free(want), free(nan);
}

START_TEST(bsr_outputs_over_nan) {
  const char *b4 = "dsdd:0/4,1/4,0%4,1%4", *b8 = "dsdd:0/8,1/8,0%8,1%8";
  for (int th = 1; th <= 2; th++)
    for (int acc = 0; acc <= 1; acc++) {
      stored_once_case(b4, 32, 128, 4, 64, acc, th);   /* short and long block rows */
      stored_once_case(b4, 18, 23, 4, 45, acc, th);    /* not block multiples */
      stored_once_case(b8, 64, 160, 8, 45, acc, th);
      stored_once_case(b8, 21, 13, 8, 7, acc, th);
      stored_once_case("dsdd:0/2,1/3,0%2,1%3", 9, 7, 3, 5, acc, th);
      stored_once_case(b4, 32, 128, 4, 1, acc, th);    /* SpMV */
      stored_once_case(b8, 21, 13, 8, 1, acc, th);
    }
}
END_TEST

START_TEST(spmm_bsr_groups_by_row_length) {
  spmm_both_lengths("dsdd:0/8,1/8,0%8,1%8", 64, 160, 8);
  spmm_both_lengths("dsdd:0/4,1/4,0%4,1%4", 32, 128, 4);
}
END_TEST

static void compile_refused(const char *expr, tj_tensor **ops, int n, const char *sched,
                            const char *needle) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  ck_assert_int_ne(tj_compile(cx, expr, ops, n, sched, NULL, &k), TJ_OK);
  ck_assert_msg(strstr(tj_last_error(), needle), "%s: %s", expr, tj_last_error());
  tj_context_free(cx);
}

START_TEST(refuses_unsupported_kernels) {
  double *ad;
  tj_tensor *a = blocked_matrix("dsdd:0/4,1/4,0%4,1%4", 16, 16, 4, 4, 3, &ad);
  int64_t n = 16, d2[2] = {16, 16};
  tj_tensor *x = dense_tensor("x", 1, &n, NULL), *y = dense_tensor("y", 1, &n, NULL);
  tj_format sv;
  OK(tj_format_parse("s", &sv));
  tj_tensor *xs, *b;
  OK(tj_tensor_new("x", TJ_F64, 1, &n, &sv, &xs));
  OK(tj_tensor_pack(xs));
  OK(tj_tensor_new("B", TJ_F64, 2, d2, tj_tensor_format(a), &b));
  OK(tj_tensor_pack(b));
  /* A blocked output from a sparse operand indexed by a blocked index, and
   * from a product the rewritten kernel cannot scatter into blocks. */
  compile_refused("B(i,j) = A(i,j) * x(j)", (tj_tensor *[]){b, a, xs}, 3, NULL,
                  "needs a dense tensor");
  compile_refused("B(i,j) = A(i,k) * A(k,j)", (tj_tensor *[]){b, a}, 2, NULL,
                  "cannot be computed into blocked output B");
  compile_refused("y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, xs}, 3, NULL,
                  "needs a dense tensor");
  compile_refused("y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3, "parallelize(i)",
                  "schedules over blocked operands");
  compile_refused("y(i) = sum(j, A(i,j) * x(j))", (tj_tensor *[]){y, a, x}, 3, NULL,
                  "appears outside an access");
  /* Blocks stored column-major (1%4,0%4) beside row-major ones: no loop
   * order over a block suits both, refused naming them (the message was
   * about a bound(i_i, ...) the plan had added, or a sum inside a
   * function the expression does not have). */
  tj_format cm;
  OK(tj_format_parse("dsdd:0/4,1/4,1%4,0%4", &cm));
  tj_tensor *c;
  OK(tj_tensor_convert(a, &cm, &c));
  OK(tj_tensor_rename(c, "C"));
  const char *orders = "A and C store their blocks in different orders (A's i mod 4 above its "
                       "j mod 4, C's below)";
  compile_refused("B(i,j) = A(i,j) + C(i,j)", (tj_tensor *[]){b, a, c}, 3, NULL,
                  "B and C store their blocks in different orders");
  tj_tensor *dn = dense_tensor("D", 2, d2, NULL);
  compile_refused("D(i,j) = A(i,j) + C(i,j)", (tj_tensor *[]){dn, a, c}, 3, NULL, orders);
  compile_refused("B(i,j) = C(i,j) * 2", (tj_tensor *[]){b, c}, 2, NULL,
                  "B and C store their blocks in different orders");
  tj_tensor_free(c), tj_tensor_free(dn);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.semiring = "min.plus";
  tj_kernel *k;
  ck_assert_int_eq(tj_compile(cx, "y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3, NULL,
                              &o, &k), TJ_ERR_UNSUPPORTED);
  ck_assert_msg(strstr(tj_last_error(), "semiring min.plus over blocked"), "%s", tj_last_error());
  /* An operand bound at run time must match what was compiled. */
  tj_format csr;
  OK(tj_format_parse("ds", &csr));
  tj_tensor *acsr;
  OK(tj_tensor_convert(a, &csr, &acsr));
  OK(tj_compile(cx, "y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3, NULL, NULL, &k));
  ck_assert_int_eq(tj_kernel_run(k, TJ_EVALUATE, (tj_tensor *[]){y, acsr, x}, 3), TJ_ERR_INVALID);
  ck_assert_msg(strstr(tj_last_error(), "compiled blocked but is not"), "%s", tj_last_error());
  tj_context_free(cx);
  tj_tensor_free(acsr);
  tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y), tj_tensor_free(xs);
  tj_tensor_free(b);
  free(ad);
}
END_TEST

int main(void) {
  Suite *s = suite_create("blocked");
  TCase *tc = tcase_create("blocked");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, parses_and_prints_bsr);
  tcase_add_test(tc, refuses_bad_maps);
  tcase_add_test(tc, packs_mlir_example);
  tcase_add_test(tc, pads_extents_that_are_not_block_multiples);
  tcase_add_test(tc, reads_mtx_into_bsr);
  tcase_add_test(tc, spmv_bsr);
  tcase_add_test(tc, spmm_bsr);
  tcase_add_test(tc, wraps_bsr_arrays);
  tcase_add_test(tc, spmm_bsr_is_register_blocked);
  tcase_add_test(tc, bsr_outputs_by_hand);
  tcase_add_test(tc, bsr_outputs);
  tcase_add_test(tc, spmm_bsr_groups_by_row_length);
  tcase_add_test(tc, bsr_outputs_over_nan);
  tcase_add_test(tc, refuses_unsupported_kernels);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}

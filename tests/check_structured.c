/* n_out_of_m levels (issue 15): MLIR's structured[n, m], 2:4 sparsity.
 * Every block of m coordinates stores exactly n (crd[p*n .. p*n+n) under
 * parent position p, ascending; zero values where a block holds fewer).
 * Parsing and printing in both spellings, the stored arrays worked out by
 * hand, get / unpack / convert, the refusal of a block that does not fit
 * (naming the block), kernels (SpMV, SpMM, blocks under a compressed level)
 * against plain loops over the same data at sizes that are and are not
 * multiples of m, n_out_of_m outputs (by hand, against plain loops, and
 * the run error when a block does not fit), and wrapping the caller's
 * arrays (checked as pack checks). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

static tj_format parse(const char *spec) {
  tj_format f;
  OK(tj_format_parse(spec, &f));
  return f;
}

static void refused(const char *spec, const char *part) {
  tj_format f;
  ck_assert_msg(tj_format_parse(spec, &f) != TJ_OK, "\"%s\" parsed", spec);
  ck_assert_msg(strstr(tj_last_error(), part), "\"%s\": %s", spec, tj_last_error());
}

START_TEST(parses_and_prints) {
  const char *mlir = "(d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4])";
  const char *spellings[] = {
    "ddn2:0,1/4,1%4", mlir,
    "(i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : n_out_of_m(2, 4))",
    "(i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : block2_4)",
    "#sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j floordiv 4 : dense, "
    "j mod 4 : structured[2, 4]) }>"};
  char buf[256];
  for (int k = 0; k < 5; k++) {
    tj_format f = parse(spellings[k]);
    ck_assert_str_eq(f.levels, "ddn");
    ck_assert_int_eq(f.lvl_n[2], 2);
    ck_assert_int_eq(f.lvl_k[2], 4);
    tj_format_print(&f, buf, sizeof buf);
    ck_assert_str_eq(buf, "ddn2:0,1/4,1%4");
    tj_format_print_mlir(&f, buf, sizeof buf);
    ck_assert_str_eq(buf, mlir);
  }
  tj_format f = parse("dsn3:0,1/8,1%8");   /* blocks of a row compressed, 3:8 */
  tj_format_print_mlir(&f, buf, sizeof buf);
  ck_assert_str_eq(buf, "(d0, d1) -> (d0 : dense, d1 floordiv 8 : compressed, "
                        "d1 mod 8 : structured[3, 8])");
  refused("dn2", "must store a dim mod m");
  refused("ddn:0,1/4,1%4", "needs its n");
  refused("ddn5:0,1/4,1%4", "n must be 1..m");
  refused("ddn0:0,1/4,1%4", "n must be 1..m");
  refused("dnd2:0,1/4,1%4", "needs its n");
  refused("dn2d:0,1%4,1/4", "floordiv");
  refused("(i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 8])",
          "must store 'j mod 8'");
  refused("(i, j) -> (i : dense, j : structured[2, 4])", "must store 'j mod 4'");
  refused("(i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2 4])",
          "unknown level type");
  /* MLIR's dimSlices with a dynamic value: TJ_SLICE_DYNAMIC, not misread */
  tj_format dyn = parse("(i : #sparse_tensor<slice(0, ?, 1)>, j) -> (i : dense, j : compressed)");
  ck_assert_int_eq(dyn.slice[0][0], 0);
  ck_assert_int_eq(dyn.slice[0][1], TJ_SLICE_DYNAMIC);
  ck_assert_int_eq(dyn.slice[0][2], 1);
}
END_TEST

/* The 2 x 10 matrix (blocks of 4 along j: 0..3, 4..7, 8..9 + padding)
 *   [1 0 2 0 | 0 0 0 3 | 0 4]
 *   [0 0 0 0 | 5 6 0 0 | 0 0]
 * under 2:4 stores per block two coordinates, the missing ones the
 * smallest free: crd {0,2, 0,3, 0,1 | 0,1, 0,1, 0,1}, vals {1,2, 0,3, 0,4
 * | 0,0, 5,6, 0,0}. */
static const int64_t dims2x10[2] = {2, 10};

static tj_tensor *small(const char *spec, const char *name) {
  tj_format f = parse(spec);
  tj_tensor *t;
  OK(tj_tensor_new(name, TJ_F64, 2, dims2x10, &f, &t));
  int64_t at[6][2] = {{0, 0}, {0, 2}, {0, 7}, {0, 9}, {1, 4}, {1, 5}};
  double v[6] = {1, 2, 3, 4, 5, 6};
  for (int e = 5; e >= 0; e--) OK(tj_tensor_insert(t, at[e], v[e]));
  OK(tj_tensor_pack(t));
  return t;
}

START_TEST(packs_reads_and_converts) {
  tj_tensor *a = small("ddn2:0,1/4,1%4", "A");
  tj_arrays ar;
  OK(tj_tensor_arrays(a, &ar));
  ck_assert_int_eq(ar.crd_len[2], 12);
  ck_assert_int_eq(ar.vals_len, 12);
  int32_t want_crd[12] = {0, 2, 0, 3, 0, 1, 0, 1, 0, 1, 0, 1};
  double want_vals[12] = {1, 2, 0, 3, 0, 4, 0, 0, 5, 6, 0, 0};
  for (int k = 0; k < 12; k++) {
    ck_assert_int_eq(((int32_t *)ar.crd[2])[k], want_crd[k]);
    ck_assert_double_eq(((double *)ar.vals)[k], want_vals[k]);
  }
  double dense[2][10] = {{1, 0, 2, 0, 0, 0, 0, 3, 0, 4}, {0, 0, 0, 0, 5, 6, 0, 0, 0, 0}};
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 10; j++) {
      double v;
      OK(tj_tensor_get(a, (int64_t[]){i, j}, &v));
      ck_assert_double_eq(v, dense[i][j]);
    }
  /* unpack lists the stored slots (padding too, as zeros, like a dense
   * level's fill), never the padding past column 9 */
  int64_t *coords, n;
  double *vals;
  OK(tj_tensor_unpack(a, &coords, &vals, &n));
  ck_assert_int_eq(n, 12);
  for (int64_t e = 0; e < n; e++) {
    ck_assert(coords[2 * e + 1] < 10);
    ck_assert_double_eq(vals[e], dense[coords[2 * e]][coords[2 * e + 1]]);
  }
  free(coords), free(vals);
  tj_format csr = parse("ds");
  tj_tensor *c, *back;
  OK(tj_tensor_convert(a, &csr, &c));
  ck_assert_int_eq(tj_tensor_nnz(c), 6);
  tj_format nm = parse("ddn2:0,1/4,1%4");
  OK(tj_tensor_convert(c, &nm, &back));
  OK(tj_tensor_arrays(back, &ar));
  for (int k = 0; k < 12; k++) ck_assert_int_eq(((int32_t *)ar.crd[2])[k], want_crd[k]);
  /* pack again: an entry in a block whose second slot is padding takes
   * the padding's place; a third nonzero in a full block is refused */
  OK(tj_tensor_insert(back, (int64_t[]){0, 8}, 7));
  OK(tj_tensor_pack(back));
  double v;
  OK(tj_tensor_get(back, (int64_t[]){0, 8}, &v));
  ck_assert_double_eq(v, 7);
  OK(tj_tensor_get(back, (int64_t[]){0, 9}, &v));
  ck_assert_double_eq(v, 4);
  OK(tj_tensor_insert(back, (int64_t[]){0, 1}, 8));
  ck_assert_int_eq(tj_tensor_pack(back), TJ_ERR_FORMAT);
  ck_assert_msg(strstr(tj_last_error(), "block at (0, 0..3) holds 3 nonzeros"), "%s",
                tj_last_error());
  tj_tensor_free(a), tj_tensor_free(c), tj_tensor_free(back);
}
END_TEST

START_TEST(refuses_blocks_that_do_not_fit) {
  tj_format f = parse("ddn2:0,1/4,1%4");
  tj_tensor *t;
  OK(tj_tensor_new("W", TJ_F64, 2, dims2x10, &f, &t));
  OK(tj_tensor_insert(t, (int64_t[]){1, 4}, 1));
  OK(tj_tensor_insert(t, (int64_t[]){1, 6}, 2));
  OK(tj_tensor_insert(t, (int64_t[]){1, 7}, 3));
  ck_assert_int_eq(tj_tensor_pack(t), TJ_ERR_FORMAT);
  ck_assert_msg(strstr(tj_last_error(), "tensor W: the block at (1, 4..7) holds 3 nonzeros; "
                                        "n_out_of_m 2:4 stores at most 2 per block"),
                "%s", tj_last_error());
  tj_tensor_free(t);
  /* three entries of which one is zero fit: the zero is no nonzero */
  OK(tj_tensor_new("W", TJ_F64, 2, dims2x10, &f, &t));
  OK(tj_tensor_insert(t, (int64_t[]){1, 4}, 1));
  OK(tj_tensor_insert(t, (int64_t[]){1, 6}, 0));
  OK(tj_tensor_insert(t, (int64_t[]){1, 7}, 3));
  OK(tj_tensor_pack(t));
  double v;
  OK(tj_tensor_get(t, (int64_t[]){1, 7}, &v));
  ck_assert_double_eq(v, 3);
  tj_tensor_free(t);
  /* through convert as well: a CSR with 3 in a block does not become 2:4 */
  tj_format csr = parse("ds");
  tj_tensor *c, *o;
  OK(tj_tensor_new("C", TJ_F64, 2, dims2x10, &csr, &c));
  for (int64_t j = 0; j < 3; j++) OK(tj_tensor_insert(c, (int64_t[]){0, j}, 1));
  OK(tj_tensor_pack(c));
  ck_assert_int_eq(tj_tensor_convert(c, &f, &o), TJ_ERR_FORMAT);
  ck_assert_msg(strstr(tj_last_error(), "block at (0, 0..3)"), "%s", tj_last_error());
  tj_tensor_free(c);
}
END_TEST

/* A rows x cols matrix with at most n nonzeros (small integers) in every
 * block of m along a row, some blocks empty; dense copy in d. */
static tj_tensor *random_nm(const char *spec, int64_t rows, int64_t cols, int n, int m,
                            unsigned seed, double *d) {
  tj_format f = parse(spec);
  tj_tensor *t;
  OK(tj_tensor_new("A", TJ_F64, 2, (int64_t[]){rows, cols}, &f, &t));
  memset(d, 0, (size_t)(rows * cols) * sizeof *d);
  srand(seed);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t b = 0; b * m < cols; b++) {
      int keep = rand() % (n + 2);   /* 0..n+1: n+1 means n, more full blocks */
      if (keep > n) keep = n;
      for (int k = 0; k < keep; k++) {
        int64_t j = b * m + rand() % m;
        if (j >= cols || d[i * cols + j] != 0) continue;
        d[i * cols + j] = 1 + rand() % 9;
        OK(tj_tensor_insert(t, (int64_t[]){i, j}, d[i * cols + j]));
      }
    }
  OK(tj_tensor_pack(t));
  return t;
}

typedef struct Case {
  const char *spec;
  int n, m;
  int64_t rows, cols;
} Case;

static const Case cases[] = {
  {"ddn2:0,1/4,1%4", 2, 4, 16, 32},
  {"ddn2:0,1/4,1%4", 2, 4, 37, 70},     /* not multiples of 4 */
  {"ddn1:0,1/4,1%4", 1, 4, 9, 13},
  {"ddn3:0,1/8,1%8", 3, 8, 21, 45},
  {"dsn2:0,1/4,1%4", 2, 4, 33, 50},     /* blocks of a row compressed */
  {"ddn4:0,1/4,1%4", 4, 4, 5, 12},      /* n = m: every coordinate */
};

START_TEST(kernels_match_plain_loops) {
  const Case *c = &cases[_i];
  int64_t R = c->rows, C = c->cols, K = 5;
  double *d = malloc((size_t)(R * C) * sizeof *d);
  tj_tensor *a = random_nm(c->spec, R, C, c->n, c->m, 7u + (unsigned)_i, d);
  tj_tensor *x, *y, *b, *out;
  OK(tj_tensor_new("x", TJ_F64, 1, &C, NULL, &x));
  OK(tj_tensor_new("y", TJ_F64, 1, &R, NULL, &y));
  OK(tj_tensor_new("B", TJ_F64, 2, (int64_t[]){C, K}, NULL, &b));
  OK(tj_tensor_new("Y", TJ_F64, 2, (int64_t[]){R, K}, NULL, &out));
  for (int64_t j = 0; j < C; j++) {
    OK(tj_tensor_insert(x, &j, (double)(j % 7 - 3)));
    for (int64_t k = 0; k < K; k++) OK(tj_tensor_insert(b, (int64_t[]){j, k}, (double)((j + 3 * k) % 5)));
  }
  OK(tj_tensor_pack(x)), OK(tj_tensor_pack(b));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int64_t i = 0; i < R; i++) {
    double want = 0, v;
    for (int64_t j = 0; j < C; j++) want += d[i * C + j] * (double)(j % 7 - 3);
    OK(tj_tensor_get(y, &i, &v));
    ck_assert_msg(v == want, "%s %lldx%lld: y(%lld) = %g, want %g", c->spec, (long long)R,
                  (long long)C, (long long)i, v, want);
  }
  OK(tj_compile(cx, "Y(i,k) = A(i,j) * B(j,k)", (tj_tensor *[]){out, a, b}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int64_t i = 0; i < R; i++)
    for (int64_t kk = 0; kk < K; kk++) {
      double want = 0, v;
      for (int64_t j = 0; j < C; j++) want += d[i * C + j] * (double)((j + 3 * kk) % 5);
      OK(tj_tensor_get(out, (int64_t[]){i, kk}, &v));
      ck_assert_msg(v == want, "%s: Y(%lld,%lld) = %g, want %g", c->spec, (long long)i,
                    (long long)kk, v, want);
    }
  tj_context_free(cx);
  free(d);
  tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y), tj_tensor_free(b);
  tj_tensor_free(out);
}
END_TEST

/* The crd and vals arrays of n_out_of_m tensor t against want (by hand). */
static void check_nm_arrays(tj_tensor *t, const int32_t *crd, const double *vals, int64_t len) {
  tj_arrays ar;
  OK(tj_tensor_arrays(t, &ar));
  ck_assert_int_eq(ar.crd_len[2], len);
  ck_assert_int_eq(ar.vals_len, len);
  for (int64_t k = 0; k < len; k++) {
    ck_assert_msg(((int32_t *)ar.crd[2])[k] == crd[k], "crd[%lld] = %d, want %d", (long long)k,
                  ((int32_t *)ar.crd[2])[k], crd[k]);
    ck_assert_msg(((double *)ar.vals)[k] == vals[k], "vals[%lld] = %g, want %g", (long long)k,
                  ((double *)ar.vals)[k], vals[k]);
  }
}

/* n_out_of_m outputs, on the 2 x 10 example B (blocks 0..3, 4..7, 8..9 +
 * padding), by hand:
 *   O = B * 2: B's slots, values doubled (crd {0,2, 0,3, 0,1 | 0,1 x3});
 *   O = B .* M (M dense, 1 at even columns, 3 at odd ones): B's slots,
 *     values 1*1, 2*1 | 0, 3*3 | 0, 4*3 | 0, 0 | 5*1, 6*3 | 0, 0;
 *   O += B (O = B before): 2B; ASSEMBLE then COMPUTE give O = B * 2 too;
 *   O = B + C with C(0,1) = 7 puts 3 nonzeros in block (0, 0..3): the run
 *     fails naming it and O is left empty, never a wrong 2:4 tensor. */
START_TEST(structured_outputs_by_hand) {
  tj_tensor *b = small("ddn2:0,1/4,1%4", "B"), *o = small("ddn2:0,1/4,1%4", "O");
  int32_t crd[12] = {0, 2, 0, 3, 0, 1, 0, 1, 0, 1, 0, 1};
  double twice[12] = {2, 4, 0, 6, 0, 8, 0, 0, 10, 12, 0, 0};
  double masked[12] = {1, 2, 0, 9, 0, 12, 0, 0, 5, 18, 0, 0};
  tj_format dn = parse("dd");
  tj_tensor *mask;
  OK(tj_tensor_new("M", TJ_F64, 2, dims2x10, &dn, &mask));
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 10; j++) OK(tj_tensor_insert(mask, (int64_t[]){i, j}, j % 2 ? 3 : 1));
  OK(tj_tensor_pack(mask));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "O(i,j) += B(i,j)", (tj_tensor *[]){o, b}, 2, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  check_nm_arrays(o, crd, twice, 12);
  OK(tj_compile(cx, "O(i,j) = B(i,j) * 2", (tj_tensor *[]){o, b}, 2, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_ASSEMBLE, NULL, 0));
  OK(tj_kernel_run(k, TJ_COMPUTE, NULL, 0));
  check_nm_arrays(o, crd, twice, 12);
  OK(tj_compile(cx, "O(i,j) = B(i,j) * M(i,j)", (tj_tensor *[]){o, b, mask}, 3, NULL, NULL, &k));
  for (int rep = 0; rep < 2; rep++) {
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    check_nm_arrays(o, crd, masked, 12);
  }
  /* The reference interpreter agrees. */
  tj_tensor *r = small("ddn2:0,1/4,1%4", "O");
  OK(tj_reference("O(i,j) = B(i,j) * M(i,j)", (tj_tensor *[]){r, b, mask}, 3));
  check_nm_arrays(r, crd, masked, 12);
  tj_tensor_free(r);
  tj_format nm = parse("ddn2:0,1/4,1%4");
  tj_tensor *c;
  OK(tj_tensor_new("C", TJ_F64, 2, dims2x10, &nm, &c));
  OK(tj_tensor_insert(c, (int64_t[]){0, 1}, 7));
  OK(tj_tensor_pack(c));
  OK(tj_compile(cx, "O(i,j) = B(i,j) + C(i,j)", (tj_tensor *[]){o, b, c}, 3, NULL, NULL, &k));
  ck_assert_int_eq(tj_kernel_run(k, TJ_EVALUATE, NULL, 0), TJ_ERR_FORMAT);
  ck_assert_msg(strstr(tj_last_error(), "tensor O: the block at (0, 0..3) holds 3 nonzeros; "
                                        "n_out_of_m 2:4 stores at most 2 per block"),
                "%s", tj_last_error());
  ck_assert_int_eq(tj_tensor_nnz(o), 0);
  /* C(0,1) = -1 would cancel nothing: with C(0,2) = -2 the block holds
   * 1 at 0, 7 at 1 and 0 at 2, which fits (a zero is no nonzero). */
  OK(tj_tensor_insert(c, (int64_t[]){0, 2}, -2));
  OK(tj_tensor_pack(c));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  double v;
  OK(tj_tensor_get(o, (int64_t[]){0, 1}, &v));
  ck_assert_double_eq(v, 7);
  OK(tj_tensor_get(o, (int64_t[]){0, 2}, &v));
  ck_assert_double_eq(v, 0);
  tj_context_free(cx);
  tj_tensor_free(b), tj_tensor_free(o), tj_tensor_free(c), tj_tensor_free(mask);
}
END_TEST

/* 2:4 SpMM into a sparse output: its block loop was tiled above the
 * output's rows (a split the plan adds for dense outputs), and the kernel
 * was refused with a message about directives the user never wrote
 * ("split(j_b, j_bo, j_bn, 32): the loop over j_b has loops between its
 * halves ..."). B as in small(); D(j,0) = 1, D(j,1) = j: C = B D is
 * row 0: 1 + 2 + 3 + 4 = 10, 2*2 + 3*7 + 4*9 = 61; row 1: 11, 5*4 + 6*5 = 50. */
START_TEST(spmm_into_sparse_outputs) {
  tj_tensor *b = small("ddn2:0,1/4,1%4", "B"), *dm;
  tj_format dd = parse("dd");
  OK(tj_tensor_new("D", TJ_F64, 2, (int64_t[]){10, 2}, &dd, &dm));
  for (int64_t j = 0; j < 10; j++) {
    OK(tj_tensor_insert(dm, (int64_t[]){j, 0}, 1));
    OK(tj_tensor_insert(dm, (int64_t[]){j, 1}, (double)j));
  }
  OK(tj_tensor_pack(dm));
  const double want[2][2] = {{10, 61}, {11, 50}};
  const char *outs[] = {"ds", "ss", "uq"};
  tj_context *cx;
  OK(tj_context_new(&cx));
  for (int o = 0; o < 3; o++) {
    tj_format f = parse(outs[o]);
    tj_tensor *c;
    tj_kernel *k;
    OK(tj_tensor_new("C", TJ_F64, 2, (int64_t[]){2, 2}, &f, &c));
    OK(tj_compile(cx, "C(i,k) = B(i,j) * D(j,k)", (tj_tensor *[]){c, b, dm}, 3, NULL, NULL, &k));
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    ck_assert_int_eq(tj_tensor_nnz(c), 4);
    for (int64_t i = 0; i < 2; i++)
      for (int64_t kk = 0; kk < 2; kk++) {
        double v;
        OK(tj_tensor_get(c, (int64_t[]){i, kk}, &v));
        ck_assert_msg(v == want[i][kk], "%s: C(%lld,%lld) = %g, want %g", outs[o], (long long)i,
                      (long long)kk, v, want[i][kk]);
      }
    tj_kernel_free(k);
    tj_tensor_free(c);
  }
  tj_context_free(cx);
  tj_tensor_free(b), tj_tensor_free(dm);
}
END_TEST

/* TTV over a 3-tensor 2:4 along k into a sparse output: the planner put
 * the workspace's loop over j below k's blocks, reading T through a
 * transposed copy no n_out_of_m format holds, and the run failed
 * ("evaluate: format "dddn": n_out_of_m level 3 must store a dim mod m").
 * T (2 x 2 x 4): (0,0,1) = 1, (0,0,3) = 2, (0,1,2) = 5, (1,1,0) = 3,
 * (1,1,2) = 4; x = (1, 10, 100, 1000): Y = [[2010, 500], [0, 403]]. */
START_TEST(ttv_into_sparse_outputs) {
  tj_format tf = parse("dddn2:0,1,2/4,2%4"), xf = parse("d");
  tj_tensor *t, *x;
  OK(tj_tensor_new("T", TJ_F64, 3, (int64_t[]){2, 2, 4}, &tf, &t));
  int64_t at[5][3] = {{0, 0, 1}, {0, 0, 3}, {0, 1, 2}, {1, 1, 0}, {1, 1, 2}};
  double tv[5] = {1, 2, 5, 3, 4};
  for (int e = 0; e < 5; e++) OK(tj_tensor_insert(t, at[e], tv[e]));
  OK(tj_tensor_pack(t));
  OK(tj_tensor_new("x", TJ_F64, 1, (int64_t[]){4}, &xf, &x));
  for (int64_t k = 0, v = 1; k < 4; k++, v *= 10) OK(tj_tensor_insert(x, &k, (double)v));
  OK(tj_tensor_pack(x));
  const double want[2][2] = {{2010, 500}, {0, 403}};
  const char *outs[] = {"ds", "ss", "uq", "do"};
  tj_context *cx;
  OK(tj_context_new(&cx));
  for (int o = 0; o < 4; o++) {
    tj_format f = parse(outs[o]);
    tj_tensor *y;
    tj_kernel *k;
    OK(tj_tensor_new("Y", TJ_F64, 2, (int64_t[]){2, 2}, &f, &y));
    OK(tj_compile(cx, "Y(i,j) = T(i,j,k) * x(k)", (tj_tensor *[]){y, t, x}, 3, NULL, NULL, &k));
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    for (int64_t i = 0; i < 2; i++)
      for (int64_t j = 0; j < 2; j++) {
        double v;
        OK(tj_tensor_get(y, (int64_t[]){i, j}, &v));
        ck_assert_msg(v == want[i][j], "%s: Y(%lld,%lld) = %g, want %g", outs[o], (long long)i,
                      (long long)j, v, want[i][j]);
      }
    tj_kernel_free(k);
    tj_tensor_free(y);
  }
  tj_context_free(cx);
  tj_tensor_free(t), tj_tensor_free(x);
}
END_TEST

/* n_out_of_m outputs against plain loops at sizes that are and are not
 * multiples of m: O = A * 3 and the sampled product O = A .* (U V). */
START_TEST(structured_outputs_match_plain_loops) {
  const char *specs[] = {"ddn2:0,1/4,1%4", "dsn2:0,1/4,1%4", "ddn1:0,1/2,1%2", "dsn3:0,1/8,1%8"};
  int ns[] = {2, 2, 1, 3}, ms[] = {4, 4, 2, 8};
  int64_t sizes[][2] = {{8, 16}, {7, 13}};
  for (int sp = 0; sp < 4; sp++)
    for (int sz = 0; sz < 2; sz++) {
      int64_t R = sizes[sz][0], C = sizes[sz][1], P = 3;
      double *d = malloc(sizeof *d * (size_t)(R * C));
      tj_tensor *a = random_nm(specs[sp], R, C, ns[sp], ms[sp], (unsigned)(sp * 7 + sz), d);
      tj_format f = parse(specs[sp]), dn = parse("dd");
      tj_tensor *o, *u, *w;
      OK(tj_tensor_new("O", TJ_F64, 2, (int64_t[]){R, C}, &f, &o));
      OK(tj_tensor_new("U", TJ_F64, 2, (int64_t[]){R, P}, &dn, &u));
      OK(tj_tensor_new("V", TJ_F64, 2, (int64_t[]){P, C}, &dn, &w));
      for (int64_t i = 0; i < R; i++)
        for (int64_t kk = 0; kk < P; kk++) OK(tj_tensor_insert(u, (int64_t[]){i, kk}, (double)((i + kk) % 4) - 1));
      for (int64_t kk = 0; kk < P; kk++)
        for (int64_t j = 0; j < C; j++) OK(tj_tensor_insert(w, (int64_t[]){kk, j}, (double)((2 * j + kk) % 5)));
      OK(tj_tensor_pack(u));
      OK(tj_tensor_pack(w));
      tj_context *cx;
      OK(tj_context_new(&cx));
      tj_kernel *k;
      for (int e = 0; e < 2; e++) {
        const char *expr = e ? "O(i,j) = A(i,j) * U(i,k) * V(k,j)" : "O(i,j) = A(i,j) * 3";
        OK(tj_compile(cx, expr, (tj_tensor *[]){o, a, u, w}, e ? 4 : 2, NULL, NULL, &k));
        OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
        for (int64_t i = 0; i < R; i++)
          for (int64_t j = 0; j < C; j++) {
            double want = d[i * C + j], v;
            if (e) {
              double t = 0;
              for (int64_t kk = 0; kk < P; kk++)
                t += (double)((i + kk) % 4 - 1) * (double)((2 * j + kk) % 5);
              want *= t;
            } else {
              want *= 3;
            }
            OK(tj_tensor_get(o, (int64_t[]){i, j}, &v));
            ck_assert_msg(v == want, "%s %s: O(%lld,%lld) = %g, want %g", specs[sp], expr,
                          (long long)i, (long long)j, v, want);
          }
      }
      tj_context_free(cx);
      free(d);
      tj_tensor_free(a), tj_tensor_free(o), tj_tensor_free(u), tj_tensor_free(w);
    }
}
END_TEST

/* A failed run of += into a 2:4 output leaves the output as it was: A
 * holds A(0,0) = 1, A(0,1) = 2, A(3,5) = 7; B(0,2) = 5 would put a third
 * nonzero in A's block (0, 0..3), so the run fails naming the block, and
 * A still reads 1, 2, 7 there (it was emptied). */
/* `+=` into a 2:4 output from a dense operand: the output's old entries
 * are a union's operand, so its mod loop is no constant range; it was
 * refused naming a bound(j_i, j_i_k, 4, max_exact) the plan had added.
 * O as in small(); A (dense) (0,0) = 4, (0,2) = 1, (0,6) = 7:
 * O += 2 A is (0,0) 9, (0,2) 4, (0,6) 14, (0,7) 3, (0,9) 4, (1,4) 5,
 * (1,5) 6. With A(0,1) = 1 too, block (0, 0..3) holds 3: refused, O kept. */
START_TEST(accumulates_a_dense_operand) {
  tj_tensor *o = small("ddn2:0,1/4,1%4", "O"), *a;
  tj_format dd = parse("dd");
  OK(tj_tensor_new("A", TJ_F64, 2, dims2x10, &dd, &a));
  OK(tj_tensor_insert(a, (int64_t[]){0, 0}, 4));
  OK(tj_tensor_insert(a, (int64_t[]){0, 2}, 1));
  OK(tj_tensor_insert(a, (int64_t[]){0, 6}, 7));
  OK(tj_tensor_pack(a));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "O(i,j) += A(i,j) * 2", (tj_tensor *[]){o, a}, 2, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  double want[2][10] = {{9, 0, 4, 0, 0, 0, 14, 3, 0, 4}, {0, 0, 0, 0, 5, 6, 0, 0, 0, 0}};
  for (int pass = 0; pass < 2; pass++) {
    for (int64_t i = 0; i < 2; i++)
      for (int64_t j = 0; j < 10; j++) {
        double v;
        OK(tj_tensor_get(o, (int64_t[]){i, j}, &v));
        ck_assert_msg(v == want[i][j], "pass %d: O(%lld,%lld) = %g, want %g", pass,
                      (long long)i, (long long)j, v, want[i][j]);
      }
    if (pass) break;
    OK(tj_tensor_insert(a, (int64_t[]){0, 1}, 1));   /* block (0, 0..3) would hold 3 */
    OK(tj_tensor_pack(a));
    ck_assert_int_eq(tj_kernel_run(k, TJ_EVALUATE, NULL, 0), TJ_ERR_FORMAT);
    ck_assert_msg(strstr(tj_last_error(), "the block at (0, 0..3) holds 3 nonzeros"), "%s",
                  tj_last_error());
  }
  tj_kernel_free(k);
  tj_context_free(cx);
  tj_tensor_free(o), tj_tensor_free(a);
}
END_TEST

START_TEST(failed_accumulate_keeps_the_output) {
  tj_format f;
  ck_assert_int_eq(tj_format_parse("ddn2:0,1/4,1%4", &f), TJ_OK);
  int64_t d[2] = {4, 8};
  tj_tensor *A, *B;
  ck_assert_int_eq(tj_tensor_new("A", TJ_F64, 2, d, &f, &A), TJ_OK);
  ck_assert_int_eq(tj_tensor_new("B", TJ_F64, 2, d, &f, &B), TJ_OK);
  static const int64_t at[3][2] = {{0, 0}, {0, 1}, {3, 5}};
  static const double av[3] = {1, 2, 7};
  for (int e = 0; e < 3; e++) ck_assert_int_eq(tj_tensor_insert(A, at[e], av[e]), TJ_OK);
  ck_assert_int_eq(tj_tensor_insert(B, (int64_t[]){0, 2}, 5), TJ_OK);
  ck_assert_int_eq(tj_tensor_pack(A), TJ_OK);
  ck_assert_int_eq(tj_tensor_pack(B), TJ_OK);
  tj_context *cx;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  tj_kernel *k;
  ck_assert_int_eq(tj_compile(cx, "A(i,j) += B(i,j)", (tj_tensor *[]){A, B}, 2, NULL, NULL, &k),
                   TJ_OK);
  ck_assert_int_ne(tj_kernel_run(k, TJ_EVALUATE, NULL, 0), TJ_OK);
  ck_assert_msg(strstr(tj_last_error(), "nonzeros"), "%s", tj_last_error());
  ck_assert_int_eq(tj_tensor_nnz(A) >= 3, 1);
  for (int e = 0; e < 3; e++) {
    double got;
    ck_assert_int_eq(tj_tensor_get(A, at[e], &got), TJ_OK);
    ck_assert_msg(got == av[e], "A(%lld,%lld) = %g after the failed run, want %g",
                  (long long)at[e][0], (long long)at[e][1], got, av[e]);
  }
  tj_context_free(cx);
  tj_tensor_free(A), tj_tensor_free(B);
}
END_TEST

/* The 2 x 10 example's arrays wrapped without a copy: the same arrays come
 * back, get reads them, SpMV over them gives y by hand, a kernel writing a
 * wrapped 2:4 output leaves the caller's arrays alone; a block's
 * coordinates out of range or not ascending, a wrong length and a pos
 * array are refused, naming them. */
START_TEST(wraps_structured_arrays) {
  tj_format f = parse("ddn2:0,1/4,1%4");
  int32_t crd[12] = {0, 2, 0, 3, 0, 1, 0, 1, 0, 1, 0, 1};
  double vals[12] = {1, 2, 0, 3, 0, 4, 0, 0, 5, 6, 0, 0};
  tj_arrays ar = {.dtype = TJ_F64, .order = 2, .dims = dims2x10, .fmt = &f};
  ar.crd[2] = crd, ar.crd_len[2] = 12, ar.vals = vals, ar.vals_len = 12;
  tj_tensor *w;
  OK(tj_tensor_wrap("W", &ar, 0, &w));
  tj_arrays back;
  OK(tj_tensor_arrays(w, &back));
  ck_assert_ptr_eq(back.crd[2], crd);
  ck_assert_ptr_eq(back.vals, vals);
  double v;
  OK(tj_tensor_get(w, (int64_t[]){0, 9}, &v));
  ck_assert_double_eq(v, 4);
  OK(tj_tensor_get(w, (int64_t[]){1, 5}, &v));
  ck_assert_double_eq(v, 6);
  /* y = W x, x = 1..10: 1*1 + 2*3 + 3*8 + 4*10 = 71, 5*5 + 6*6 = 61 */
  int64_t ten = 10, two = 2;
  tj_tensor *x, *y;
  OK(tj_tensor_new("x", TJ_F64, 1, &ten, NULL, &x));
  for (int64_t j = 0; j < 10; j++) OK(tj_tensor_insert(x, &j, (double)(j + 1)));
  OK(tj_tensor_pack(x));
  OK(tj_tensor_new("y", TJ_F64, 1, &two, NULL, &y));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = W(i,j) * x(j)", (tj_tensor *[]){y, w, x}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  OK(tj_tensor_get(y, (int64_t[]){0}, &v));
  ck_assert_double_eq(v, 71);
  OK(tj_tensor_get(y, (int64_t[]){1}, &v));
  ck_assert_double_eq(v, 61);
  /* A wrapped output is written in place (its arrays fit the result). */
  int32_t ocrd[12] = {0};
  double ovals[12] = {0};
  for (int q = 0; q < 12; q++) ocrd[q] = q % 2;
  tj_arrays oa = ar;
  oa.crd[2] = ocrd, oa.vals = ovals;
  tj_tensor *o;
  OK(tj_tensor_wrap("O", &oa, 0, &o));
  OK(tj_compile(cx, "O(i,j) = W(i,j) * 2", (tj_tensor *[]){o, w}, 2, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  OK(tj_tensor_get(o, (int64_t[]){0, 7}, &v));
  ck_assert_double_eq(v, 6);
  ck_assert_double_eq(ovals[3], 6);   /* written in place: the caller's arrays */
  ck_assert_int_eq(ocrd[3], 3);
  OK(tj_tensor_arrays(o, &back));
  ck_assert_ptr_eq(back.vals, ovals);
  ck_assert_ptr_eq(back.crd[2], ocrd);
  tj_context_free(cx);
  tj_tensor_free(o), tj_tensor_free(x), tj_tensor_free(y), tj_tensor_free(w);
  ck_assert_double_eq(vals[5], 4);   /* the caller's arrays outlive the tensor */
  /* dsn2: the blocks of a row compressed (row 0: blocks 0 and 1; row 1:
   * block 1), pos and crd on level 1, crd only on level 2 */
  tj_format g = parse("dsn2:0,1/4,1%4");
  int32_t pos1[3] = {0, 2, 3}, crd1[3] = {0, 1, 1}, crd2[6] = {0, 2, 0, 3, 0, 1};
  double v2[6] = {1, 2, 0, 3, 5, 6};
  tj_arrays ga = {.dtype = TJ_F64, .order = 2, .dims = dims2x10, .fmt = &g, .vals = v2,
                  .vals_len = 6};
  ga.pos[1] = pos1, ga.pos_len[1] = 3, ga.crd[1] = crd1, ga.crd_len[1] = 3;
  ga.crd[2] = crd2, ga.crd_len[2] = 6;
  OK(tj_tensor_wrap("G", &ga, 0, &w));
  OK(tj_tensor_get(w, (int64_t[]){1, 4}, &v));
  ck_assert_double_eq(v, 5);
  OK(tj_tensor_get(w, (int64_t[]){0, 7}, &v));
  ck_assert_double_eq(v, 3);
  tj_tensor_free(w);
  /* refusals */
  crd[3] = 4;
  ck_assert_int_eq(tj_tensor_wrap("W", &ar, 0, &w), TJ_ERR_FORMAT);
  ck_assert_msg(strstr(tj_last_error(), "level 2 (n_out_of_m): crd[3] = 4 is out of range 0..3"),
                "%s", tj_last_error());
  crd[3] = 0;
  ck_assert_int_eq(tj_tensor_wrap("W", &ar, 0, &w), TJ_ERR_FORMAT);
  ck_assert_msg(strstr(tj_last_error(), "crd[3] = 0 does not increase over crd[2] = 0 in the "
                                        "block of parent position 1"), "%s", tj_last_error());
  crd[3] = 3;
  ar.crd_len[2] = 10;
  ck_assert_int_eq(tj_tensor_wrap("W", &ar, 0, &w), TJ_ERR_SHAPE);
  ck_assert_msg(strstr(tj_last_error(), "needs a crd array of 12 entries (2 per parent "
                                        "position), got 10"), "%s", tj_last_error());
  ar.crd_len[2] = 12;
  int32_t junk[7] = {0};
  ar.pos[2] = junk, ar.pos_len[2] = 7;
  ck_assert_int_eq(tj_tensor_wrap("W", &ar, 0, &w), TJ_ERR_INVALID);
  ck_assert_msg(strstr(tj_last_error(), "takes no pos array"), "%s", tj_last_error());
  ar.pos[2] = NULL, ar.pos_len[2] = 0;
  OK(tj_tensor_wrap("W", &ar, 0, &w));   /* mended: wraps again */
  tj_tensor_free(w);
  /* row 0's last block (columns 8..11 of 10) with its 4 at column 11, in
   * the padding: it was accepted, read 0 by get and summed by kernels */
  crd[5] = 3;
  ck_assert_int_eq(tj_tensor_wrap("W", &ar, 0, &w), TJ_ERR_FORMAT);
  ck_assert_msg(strstr(tj_last_error(), "tensor W: vals[5] = 4 lies in a block's padding"), "%s",
                tj_last_error());
  vals[5] = 0;   /* a zero there is the fill of a block with fewer than n entries */
  OK(tj_tensor_wrap("W", &ar, 0, &w));
  tj_tensor_free(w);
}
END_TEST

int main(void) {
  Suite *s = suite_create("structured");
  TCase *tc = tcase_create("structured");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, parses_and_prints);
  tcase_add_test(tc, packs_reads_and_converts);
  tcase_add_test(tc, refuses_blocks_that_do_not_fit);
  tcase_add_loop_test(tc, kernels_match_plain_loops, 0, (int)(sizeof cases / sizeof cases[0]));
  tcase_add_test(tc, structured_outputs_by_hand);
  tcase_add_test(tc, spmm_into_sparse_outputs);
  tcase_add_test(tc, ttv_into_sparse_outputs);
  tcase_add_test(tc, structured_outputs_match_plain_loops);
  tcase_add_test(tc, wraps_structured_arrays);
  tcase_add_test(tc, failed_accumulate_keeps_the_output);
  tcase_add_test(tc, accumulates_a_dense_operand);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}

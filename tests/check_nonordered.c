/* Levels stored without order (issue 15): compressed(nonordered) `o`,
 * compressed(nonunique, nonordered) `w` and singleton(nonordered) `z`.
 * Their spellings parse and print back; operands wrapped from unsorted
 * arrays are read in place where the level's loop walks it alone (SpMV,
 * SpMM, TTV, SpGEMM's B through the workspace, a scale into a nonordered
 * output) and through an ordered copy where the loops need order (a union,
 * an ordered output level, runs of a nonunique level), which
 * tj_kernel_operand_format and -print-cin report. Every value is worked
 * out by hand below. */
#include <check.h>
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

START_TEST(spellings) {
  const struct { const char *mlir, *letters, *back; } c[] = {
      {"(i,j) -> (i : compressed(nonunique, nonordered), j : singleton(nonordered))", "wz",
       "(d0, d1) -> (d0 : compressed(nonunique, nonordered), d1 : singleton(nonordered))"},
      {"(i,j) -> (i : compressed(nonordered, nonunique), j : singleton)", "wq",
       "(d0, d1) -> (d0 : compressed(nonunique, nonordered), d1 : singleton)"},
      {"(i,j) -> (i : compressed(nonunique), j : singleton(nonordered))", "uz",
       "(d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(nonordered))"},
  };
  char buf[256];
  for (int k = 0; k < 3; k++) {
    tj_format f = parse(c[k].mlir);
    ck_assert_str_eq(f.levels, c[k].letters);
    tj_format_print_mlir(&f, buf, sizeof buf);
    ck_assert_str_eq(buf, c[k].back);
    tj_format g = parse(buf);
    ck_assert_str_eq(g.levels, c[k].letters);
    tj_format_print(&f, buf, sizeof buf);
    ck_assert_str_eq(buf, c[k].letters);
  }
  tj_format f;
  const char *bad[] = {"(i,j) -> (i : compressed(nonunique, nonunique), j : singleton)",
                       "(i,j) -> (i : compressed(ordered), j : dense)",
                       "(i,j) -> (i : dense, j : singleton(nonordered))"};
  const char *why[] = {"unsupported level type at column 15", "unsupported level type",
                       "singleton level 1 needs a nonunique level (u, w, q, c or z)"};
  for (int k = 0; k < 3; k++) {
    ck_assert_msg(tj_format_parse(bad[k], &f) != TJ_OK, "%s parsed", bad[k]);
    ck_assert_msg(strstr(tj_last_error(), why[k]), "%s: %s", bad[k], tj_last_error());
  }
}
END_TEST

/* The 4 x 5 matrix
 *   row 0: [2 0 0 1 3]      stored in the column order 3, 0, 4
 *   row 1: [0 0 0 0 0]
 *   row 2: [0 5 4 0 0]      2, 1
 *   row 3: [7 0 8 0 6]      4, 0, 2 */
static int32_t a_pos[] = {0, 3, 3, 5, 8};
static int32_t a_crd[] = {3, 0, 4, 2, 1, 4, 0, 2};
static int32_t a_rows[] = {0, 0, 0, 2, 2, 3, 3, 3};
static double a_vals[] = {1, 2, 3, 4, 5, 6, 7, 8};

/* A 4 x 5 tensor over those arrays in format spec: "do" (CSR, columns
 * unsorted), "uz" (COO, columns unsorted in a row) or "wz" (COO in the
 * order row 3's, row 0's, row 2's: rows unsorted too). */
static tj_tensor *wrap_a(const char *spec) {
  static int32_t w_rows[] = {3, 3, 3, 0, 0, 0, 2, 2};
  static int32_t w_cols[] = {4, 0, 2, 3, 0, 4, 2, 1};
  static double w_vals[] = {6, 7, 8, 1, 2, 3, 4, 5};
  static int32_t coo_pos[] = {0, 8};
  tj_format f = parse(spec);
  tj_arrays a = {.dtype = TJ_F64, .order = 2, .dims = (int64_t[]){4, 5}, .fmt = &f};
  bool csr = f.levels[0] == 'd', w = f.levels[0] == 'w';
  a.pos[1] = a_pos, a.pos_len[1] = 5, a.crd[1] = a_crd, a.crd_len[1] = 8;
  if (!csr) {
    a.pos[1] = NULL, a.pos_len[1] = 0;
    a.pos[0] = coo_pos, a.pos_len[0] = 2;
    a.crd[0] = w ? w_rows : a_rows, a.crd_len[0] = 8;
    if (w) a.crd[1] = w_cols;
  }
  a.vals = w ? w_vals : a_vals, a.vals_len = 8;
  tj_tensor *t;
  OK(tj_tensor_wrap("A", &a, 0, &t));
  return t;
}

static tj_tensor *sparse(const char *name, const char *spec, int64_t rows, int64_t cols,
                         const double *v) {
  tj_format f = parse(spec);
  tj_tensor *t;
  OK(tj_tensor_new(name, TJ_F64, 2, (int64_t[]){rows, cols}, &f, &t));
  for (int64_t i = 0; v && i < rows; i++)
    for (int64_t j = 0; j < cols; j++)
      if (v[i * cols + j] != 0) OK(tj_tensor_insert(t, (int64_t[]){i, j}, v[i * cols + j]));
  OK(tj_tensor_pack(t));
  return t;
}

/* Compiles and runs expr; checks that A is read as `conv` says (0 in place,
 * 1 through a copy) and that -print-cin's conversion note says `note`
 * (NULL: no note). */
static void run(const char *expr, tj_tensor **ops, int n, int conv, const char *note) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, expr, ops, n, NULL, NULL, &k));
  tj_format f;
  int converted = -1;
  OK(tj_kernel_operand_format(k, "A", &f, &converted));
  ck_assert_msg(converted == conv, "%s: A converted %d", expr, converted);
  char *text = NULL;
  size_t len = 0;
  FILE *mf = open_memstream(&text, &len);
  OK(tj_kernel_print(k, TJ_STAGE_CIN, mf));
  fclose(mf);
  if (note) ck_assert_msg(strstr(text, note), "%s: -print-cin says\n%s", expr, text);
  else ck_assert_msg(!strstr(text, "// "), "%s: -print-cin says\n%s", expr, text);
  free(text);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  tj_context_free(cx);
}

static void expect(const tj_tensor *t, const double *want) {
  int64_t rows = tj_tensor_dim(t, 0), cols = tj_tensor_order(t) > 1 ? tj_tensor_dim(t, 1) : 1;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      double x;
      OK(tj_tensor_get(t, (int64_t[]){i, j}, &x));
      ck_assert_msg(x == want[i * cols + j], "%s(%lld,%lld) = %g, want %g", tj_tensor_name(t),
                    (long long)i, (long long)j, x, want[i * cols + j]);
    }
}

/* y = A x with x = [1 2 3 4 5]: row 0 = 2*1 + 1*4 + 3*5 = 21; row 2 =
 * 5*2 + 4*3 = 22; row 3 = 7*1 + 8*3 + 6*5 = 61. */
START_TEST(spmv_in_place) {
  const char *specs[] = {"do", "uz", "wz"};
  for (int s = 0; s < 3; s++) {
    tj_tensor *a = wrap_a(specs[s]);
    tj_tensor *x = tu_tensor("x", "d", 1, (int64_t[]){5}, (double[]){1, 2, 3, 4, 5});
    tj_tensor *y = tu_tensor("y", "d", 1, (int64_t[]){4}, NULL);
    /* wz's rows are runs of equal coordinates: read through a copy in uq */
    run("y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3, s == 2,
        s == 2 ? "// A is read through a copy in format uq (stored wz): its nonordered "
                 "level 0 over i is walked by runs of equal coordinates" : NULL);
    expect(y, (double[]){21, 0, 22, 61});
    tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y);
  }
}
END_TEST

/* C = A B with B's rows b0 = [1 0], b1 = [0 1], b2 = [1 1], b3 = [2 0],
 * b4 = [0 3]: row 0 = 2 b0 + 1 b3 + 3 b4 = [4 9]; row 2 = 5 b1 + 4 b2 =
 * [4 9]; row 3 = 7 b0 + 8 b2 + 6 b4 = [15 26]. */
START_TEST(spmm_in_place) {
  tj_tensor *a = wrap_a("do");
  tj_tensor *b = tu_tensor("B", "dd", 2, (int64_t[]){5, 2}, (double[]){1, 0, 0, 1, 1, 1, 2, 0, 0, 3});
  tj_tensor *c = tu_tensor("C", "dd", 2, (int64_t[]){4, 2}, NULL);
  run("C(i,j) = A(i,k) * B(k,j)", (tj_tensor *[]){c, a, b}, 3, 0, NULL);
  expect(c, (double[]){4, 9, 0, 0, 4, 9, 15, 26});
  tj_tensor_free(a), tj_tensor_free(b), tj_tensor_free(c);
}
END_TEST

/* SpGEMM C = D A with A nonordered: A's row is scattered into the
 * workspace, which sorts, so A is read in place. D = [[1 0 1 0],
 * [0 2 0 1]]: row 0 = a0 + a2 = [2 5 4 1 3]; row 1 = 2 a1 + a3 = [7 0 8 0 6]. */
START_TEST(spgemm_in_place) {
  tj_tensor *a = wrap_a("do");
  tj_tensor *d = sparse("D", "ds", 2, 4, (double[]){1, 0, 1, 0, 0, 2, 0, 1});
  const char *outs[] = {"ds", "do"};
  for (int o = 0; o < 2; o++) {
    tj_tensor *c = sparse("C", outs[o], 2, 5, NULL);
    run("C(i,j) = D(i,k) * A(k,j)", (tj_tensor *[]){c, d, a}, 3, 0, NULL);
    expect(c, (double[]){2, 5, 4, 1, 3, 7, 0, 8, 0, 6});
    int64_t *crd, n;
    double *vals;
    OK(tj_tensor_unpack(c, &crd, &vals, &n));
    ck_assert_int_eq(n, 8);
    free(crd), free(vals);
    tj_tensor_free(c);
  }
  tj_tensor_free(a), tj_tensor_free(d);
}
END_TEST

/* 2 A into a nonordered output is read in place (the output takes the
 * order as it comes); into an ordered output, or added to another sparse
 * matrix (a union merges both rows), A is read through a sorted copy. */
START_TEST(order_where_needed) {
  const double twice[] = {4, 0, 0, 2, 6, 0, 0, 0, 0, 0, 0, 10, 8, 0, 0, 14, 0, 16, 0, 12};
  const char *outs[] = {"do", "ds"};
  for (int o = 0; o < 2; o++) {
    tj_tensor *a = wrap_a("do");
    tj_tensor *g = sparse("G", outs[o], 4, 5, NULL);
    run("G(i,j) = A(i,j) * 2", (tj_tensor *[]){g, a}, 2, o,
        o ? "// A is read through a copy in format ds (stored do): its nonordered level 1 "
            "over j is appended in order to an ordered output level" : NULL);
    expect(g, twice);
    tj_tensor_free(a), tj_tensor_free(g);
  }
  /* E = A + F, F(0,0) = 10, F(2,1) = 10, F(1,3) = 1 */
  tj_tensor *a = wrap_a("do");
  double fv[20] = {0};
  fv[0] = 10, fv[2 * 5 + 1] = 10, fv[1 * 5 + 3] = 1;
  tj_tensor *f = sparse("F", "ds", 4, 5, fv);
  tj_tensor *e = sparse("E", "ds", 4, 5, NULL);
  run("E(i,j) = A(i,j) + F(i,j)", (tj_tensor *[]){e, a, f}, 3, 1,
      "its nonordered level 1 over j is co-iterated with another sparse level");
  expect(e, (double[]){12, 0, 0, 1, 3, 0, 0, 0, 1, 0, 0, 15, 4, 0, 0, 7, 0, 8, 0, 6});
  tj_tensor_free(a), tj_tensor_free(f), tj_tensor_free(e);
}
END_TEST

/* Where the rhs is nonzero without A (A + F with F dense, A + 1), j's
 * loop walks every column and merges A's row with it (crd == j), so A is
 * read through a sorted copy, into a dense or a nonordered output alike
 * (read in place, row 0's stored order 3, 0, 4 lost A(0,0) and A(0,4):
 * [10 10 10 11 10]). */
START_TEST(order_where_dense_walk) {
  double tens[20];
  for (int q = 0; q < 20; q++) tens[q] = 10;
  const char *outs[] = {"dd", "do"};
  for (int o = 0; o < 2; o++) {
    tj_tensor *a = wrap_a("do");
    tj_tensor *f = tu_tensor("F", "dd", 2, (int64_t[]){4, 5}, tens);
    tj_tensor *e = o ? sparse("E", outs[o], 4, 5, NULL)
                     : tu_tensor("E", "dd", 2, (int64_t[]){4, 5}, NULL);
    run("E(i,j) = A(i,j) + F(i,j)", (tj_tensor *[]){e, a, f}, 3, 1,
        "// A is read through a copy in format ds (stored do): its nonordered level 1 over j "
        "is merged with a walk of every coordinate");
    expect(e, (double[]){12, 10, 10, 11, 13, 10, 10, 10, 10, 10,
                         10, 15, 14, 10, 10, 17, 10, 18, 10, 16});
    run("E(i,j) = A(i,j) + 1", (tj_tensor *[]){e, a}, 2, 1, "is merged with a walk");
    expect(e, (double[]){3, 1, 1, 2, 4, 1, 1, 1, 1, 1, 1, 6, 5, 1, 1, 8, 1, 9, 1, 7});
    tj_tensor_free(a), tj_tensor_free(f), tj_tensor_free(e);
  }
}
END_TEST

/* A CSR output's rows are appended in the loop's order (row i's
 * positions follow row i-1's), so an `os` A whose rows are stored in the
 * order 2, 0 is read through a sorted copy: A = [[0 2] [0 0] [1 0]], G = 2 A
 * (read in place, both rows landed in row 0: indptr [0 2 2 2]); into a
 * dense output it is read in place. */
START_TEST(order_where_rows_appended) {
  static int32_t p0[] = {0, 2}, c0[] = {2, 0}, p1[] = {0, 1, 2}, c1[] = {0, 1};
  static double v[] = {1, 2};
  tj_format f = parse("os");
  tj_arrays ar = {.dtype = TJ_F64, .order = 2, .dims = (int64_t[]){3, 2}, .fmt = &f};
  ar.pos[0] = p0, ar.pos_len[0] = 2, ar.crd[0] = c0, ar.crd_len[0] = 2;
  ar.pos[1] = p1, ar.pos_len[1] = 3, ar.crd[1] = c1, ar.crd_len[1] = 2;
  ar.vals = v, ar.vals_len = 2;
  const char *outs[] = {"ds", "do", "dd"};
  for (int o = 0; o < 3; o++) {
    tj_tensor *a;
    OK(tj_tensor_wrap("A", &ar, 0, &a));
    tj_tensor *g = o < 2 ? sparse("G", outs[o], 3, 2, NULL)
                         : tu_tensor("G", "dd", 2, (int64_t[]){3, 2}, NULL);
    run("G(i,j) = A(i,j) * 2", (tj_tensor *[]){g, a}, 2, o < 2,
        o < 2 ? "// A is read through a copy in format ss (stored os): its nonordered level 0 "
                "over i is the loop of a dense output level whose sparse levels below are "
                "appended in its order" : NULL);
    expect(g, (double[]){0, 4, 0, 0, 2, 0});
    if (o < 2) {
      int64_t *crd, n;
      double *vals;
      OK(tj_tensor_unpack(g, &crd, &vals, &n));
      ck_assert_int_eq(n, 2);
      ck_assert(crd[0] == 0 && crd[1] == 1 && crd[2] == 2 && crd[3] == 0);
      free(crd), free(vals);
    }
    tj_tensor_free(a), tj_tensor_free(g);
  }
}
END_TEST

/* Under sequence() the statement that would read A in place (A x) reads
 * the sorted copy that A .* A z (a co-iteration) needs, instead of the
 * sequence being refused. x = [1 2 3 4 5], z = 1: row 0 = (2 + 4 + 15) +
 * (4 + 1 + 9) = 35; row 2 = (10 + 12) + (25 + 16) = 63; row 3 = (7 + 24 +
 * 30) + (49 + 64 + 36) = 210; on 1 and 2 threads. */
START_TEST(sequence_shares_sorted_copy) {
  for (int th = 1; th <= 2; th++) {
    tj_tensor *a = wrap_a("do");
    tj_tensor *x = tu_tensor("x", "d", 1, (int64_t[]){5}, (double[]){1, 2, 3, 4, 5});
    tj_tensor *z = tu_tensor("z", "d", 1, (int64_t[]){5}, (double[]){1, 1, 1, 1, 1});
    tj_tensor *y = tu_tensor("y", "d", 1, (int64_t[]){4}, NULL);
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_options o = tj_options_default();
    o.nthreads = th;
    tj_kernel *k;
    OK(tj_compile(cx, "y(i) = A(i,j) * x(j) + A(i,k) * A(i,k) * z(k)",
                  (tj_tensor *[]){y, a, x, z}, 4, "sequence()", &o, &k));
    tj_format f;
    int converted = -1;
    OK(tj_kernel_operand_format(k, "A", &f, &converted));
    ck_assert_int_eq(converted, 1);
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    tj_context_free(cx);
    expect(y, (double[]){35, 0, 63, 210});
    tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(z), tj_tensor_free(y);
  }
}
END_TEST

/* TTV y(i,j) = T(i,j,k) v(k) over a 2 x 2 x 4 `doo` tensor whose j and k
 * levels are unsorted: T(0,1,3) = 1, T(0,1,1) = 2, T(0,0,0) = 3,
 * T(1,1,2) = 4, T(1,1,0) = 5; v = [1 10 100 1000]: y(0,0) = 3, y(0,1) =
 * 1000 + 20 = 1020, y(1,1) = 400 + 5 = 405. */
START_TEST(ttv_in_place) {
  static int32_t p1[] = {0, 2, 3}, c1[] = {1, 0, 1}, p2[] = {0, 2, 3, 5}, c2[] = {3, 1, 0, 2, 0};
  static double tv[] = {1, 2, 3, 4, 5};
  tj_format f = parse("doo");
  tj_arrays ar = {.dtype = TJ_F64, .order = 3, .dims = (int64_t[]){2, 2, 4}, .fmt = &f};
  ar.pos[1] = p1, ar.pos_len[1] = 3, ar.crd[1] = c1, ar.crd_len[1] = 3;
  ar.pos[2] = p2, ar.pos_len[2] = 4, ar.crd[2] = c2, ar.crd_len[2] = 5;
  ar.vals = tv, ar.vals_len = 5;
  tj_tensor *t;
  OK(tj_tensor_wrap("A", &ar, 0, &t));
  tj_tensor *v = tu_tensor("v", "d", 1, (int64_t[]){4}, (double[]){1, 10, 100, 1000});
  tj_tensor *y = tu_tensor("y", "dd", 2, (int64_t[]){2, 2}, NULL);
  run("y(i,j) = A(i,j,k) * v(k)", (tj_tensor *[]){y, t, v}, 3, 0, NULL);
  expect(y, (double[]){3, 1020, 0, 405});
  tj_tensor_free(t), tj_tensor_free(v), tj_tensor_free(y);
}
END_TEST

int main(void) {
  Suite *s = suite_create("nonordered");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, spellings);
  tcase_add_test(tc, spmv_in_place);
  tcase_add_test(tc, spmm_in_place);
  tcase_add_test(tc, spgemm_in_place);
  tcase_add_test(tc, order_where_needed);
  tcase_add_test(tc, order_where_dense_walk);
  tcase_add_test(tc, order_where_rows_appended);
  tcase_add_test(tc, sequence_shares_sorted_copy);
  tcase_add_test(tc, ttv_in_place);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}

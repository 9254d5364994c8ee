/* Slices (MLIR's dimSlices, issue 15): views over a stored tensor without
 * copying. The spellings parse and print back; a view's entries are its
 * base's inside the slice, renumbered (worked out by hand for a small
 * matrix); kernels read views in place in every format (SpMV, SpMM, sparse
 * add, SpGEMM, a sum over a view of a 3-tensor), with strides 1 and > 1,
 * empty slices and slices at the edge, checked against plain loops over a
 * dense copy of the base sliced by index arithmetic; and the refusals
 * (past the extent, a view as output, writing into a view) name the
 * culprit. */
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

static void refused(const char *spec, const char *part) {
  tj_format f;
  ck_assert_msg(tj_format_parse(spec, &f) != TJ_OK, "\"%s\" parsed", spec);
  ck_assert_msg(strstr(tj_last_error(), part), "\"%s\": %s", spec, tj_last_error());
}

START_TEST(parses_and_prints) {
  const char *mlir = "(d0 : #sparse_tensor<slice(1, 3, 2)>, d1) -> (d0 : dense, d1 : compressed)";
  const char *spellings[] = {
      "ds[1:3:2,:]", "ds [1:3:2, :]", mlir,
      "(i : #sparse_tensor<slice(1, 3, 2)>, j) -> (i : dense, j : compressed)",
      "#sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed), "
      "dimSlices = [(1, 3, 2), (0, 0, 0)] }>"};
  char buf[256];
  for (int k = 0; k < 4; k++) {
    tj_format f = parse(spellings[k]);
    ck_assert_str_eq(f.levels, "ds");
    ck_assert_int_eq(f.slice[0][0], 1);
    ck_assert_int_eq(f.slice[0][1], 3);
    ck_assert_int_eq(f.slice[0][2], 2);
    ck_assert_int_eq(f.slice[1][2], 0);
    tj_format_print(&f, buf, sizeof buf);
    ck_assert_str_eq(buf, "ds[1:3:2,:]");
    tj_format_print_mlir(&f, buf, sizeof buf);
    ck_assert_str_eq(buf, mlir);
  }
  /* dimSlices = [...] with every dim sliced; CSC with slices; stride 1 implied */
  tj_format f = parse("#sparse_tensor.encoding<{ map = (i, j) -> (j : dense, i : compressed), "
                      "dimSlices = [(0, 4, 1), (2, 8, 3)] }>");
  tj_format_print(&f, buf, sizeof buf);
  ck_assert_str_eq(buf, "ds:1,0[0:4:1,2:8:3]");
  f = parse("ss[5:2,:]");
  tj_format_print(&f, buf, sizeof buf);
  ck_assert_str_eq(buf, "ss[5:2:1,:]");
  /* dynamic ('?') values print back as '?' in both spellings */
  const char *dyn = "(d0 : #sparse_tensor<slice(?, ?, 1)>, d1 : #sparse_tensor<slice(?, ?, ?)>) "
                    "-> (d0 : dense, d1 : compressed)";
  const char *dyns[] = {"ds[?:?:1,?:?:?]", dyn,
                        "#sparse_tensor.encoding<{ lvlTypes = [ \"dense\", \"compressed\" ], "
                        "dimSlices = [ (?, ?, 1), (?, ?, ?) ] }>"};
  for (int k = 0; k < 3; k++) {
    f = parse(dyns[k]);
    ck_assert_int_eq(f.slice[0][0], TJ_SLICE_DYNAMIC);
    ck_assert_int_eq(f.slice[0][2], 1);
    ck_assert_int_eq(f.slice[1][2], TJ_SLICE_DYNAMIC);
    tj_format_print(&f, buf, sizeof buf);
    ck_assert_str_eq(buf, "ds[?:?:1,?:?:?]");
    tj_format_print_mlir(&f, buf, sizeof buf);
    ck_assert_str_eq(buf, dyn);
  }
  refused("ds[?:?:-2,:]", "expected a slice 'offset:size:stride' or ':' at column 4");
  refused("ds[1:3:0,:]", "stride must be >= 1");
  refused("ds[1:3:1]", "1 slices at column 3 for 2 dims");
  refused("ds[1:3:1,:,:]", "more slices than the 2 dims");
  refused("ds[1,:]", "expected a slice 'offset:size:stride' or ':' at column 4");
  refused("(i : #sparse_tensor<slice(0, 4)>, j) -> (i : dense, j : compressed)",
          "expected ',' at column");
  refused("(i : dense, j) -> (i : dense, j : compressed)", "expected '#sparse_tensor<slice");
  refused("(i, j) -> (i : dense, j : compressed), dimSlices = [(0, 4, 1)]",
          "dimSlices has 1 slices for 2 dims");
  /* slices of blocked formats: tests/check_blocked_slices.c */
}
END_TEST

/* The 5 x 6 base
 *   row 0: [1 0 2 0 0 3]
 *   row 1: [0 4 0 0 5 0]
 *   row 2: [0 0 0 0 0 0]
 *   row 3: [6 0 7 8 0 0]
 *   row 4: [0 0 0 0 0 9] */
static const double base5x6[5][6] = {{1, 0, 2, 0, 0, 3}, {0, 4, 0, 0, 5, 0}, {0, 0, 0, 0, 0, 0},
                                     {6, 0, 7, 8, 0, 0}, {0, 0, 0, 0, 0, 9}};

static tj_tensor *matrix(const char *name, const char *spec, int64_t rows, int64_t cols,
                         const double *d) {
  return tu_tensor(name, spec, 2, (int64_t[]){rows, cols}, d);
}

START_TEST(view_entries_by_hand) {
  const char *specs[] = {"ds", "dd", "ds:1,0", "ss", "uq", "do", "ls"};
  for (int k = 0; k < 7; k++) {
    tj_tensor *a = matrix("A", specs[k], 5, 6, &base5x6[0][0]), *v;
    /* rows 1, 3 (offset 1, stride 2, size 2); columns 0, 2, 4 (stride 2) */
    OK(tj_tensor_slice(a, "V", (int64_t[]){1, 0}, (int64_t[]){2, 3}, (int64_t[]){2, 2}, &v));
    ck_assert(tj_tensor_is_view(v));
    ck_assert_int_eq(tj_tensor_dim(v, 0), 2);
    ck_assert_int_eq(tj_tensor_dim(v, 1), 3);
    /* by hand: row 1 cols 0,2,4 = [0 0 5]; row 3 = [6 7 0] */
    const double want[2][3] = {{0, 0, 5}, {6, 7, 0}};
    for (int64_t i = 0; i < 2; i++)
      for (int64_t j = 0; j < 3; j++) {
        double x;
        OK(tj_tensor_get(v, (int64_t[]){i, j}, &x));
        ck_assert_msg(x == want[i][j], "%s V(%lld,%lld) = %g", specs[k], (long long)i,
                      (long long)j, x);
      }
    int64_t *coords, n;
    double *vals;
    OK(tj_tensor_unpack(v, &coords, &vals, &n));
    int nz = 0;
    for (int64_t e = 0; e < n; e++) {
      ck_assert_double_eq(vals[e], want[coords[2 * e]][coords[2 * e + 1]]);
      nz += vals[e] != 0;
    }
    ck_assert_int_eq(nz, 3);
    free(coords), free(vals);
    /* converted: a tensor of its own with the slice's entries */
    tj_format csr = parse("ds");
    tj_tensor *c;
    OK(tj_tensor_convert(v, &csr, &c));
    ck_assert(!tj_tensor_is_view(c));
    ck_assert_int_eq(tj_tensor_nnz(c), 3);
    double x;
    OK(tj_tensor_get(c, (int64_t[]){1, 1}, &x));
    ck_assert_double_eq(x, 7);
    char buf[128];
    tj_format_print(tj_tensor_format(v), buf, sizeof buf);
    ck_assert_msg(strstr(buf, "[1:2:2,0:3:2]"), "%s", buf);
    tj_tensor_free(c), tj_tensor_free(v), tj_tensor_free(a);
  }
}
END_TEST

/* A view sees its base as it is at each use: repacking the base after
 * the view was made shows the new entries. */
START_TEST(view_follows_its_base) {
  tj_tensor *a = matrix("A", "ds", 5, 6, &base5x6[0][0]), *v;
  OK(tj_tensor_slice(a, "V", (int64_t[]){2, 1}, (int64_t[]){2, 3}, NULL, &v));
  double x;
  OK(tj_tensor_get(v, (int64_t[]){0, 0}, &x));
  ck_assert_double_eq(x, 0);
  OK(tj_tensor_insert(a, (int64_t[]){2, 1}, 42));
  OK(tj_tensor_pack(a));
  OK(tj_tensor_get(v, (int64_t[]){0, 0}, &x));
  ck_assert_double_eq(x, 42);
  OK(tj_tensor_get(v, (int64_t[]){1, 1}, &x));   /* base (3, 2) */
  ck_assert_double_eq(x, 7);
  tj_tensor_free(v), tj_tensor_free(a);
}
END_TEST

START_TEST(refusals) {
  tj_tensor *a = matrix("A", "ds", 5, 6, &base5x6[0][0]), *v = NULL;
  /* past the extent: 1 + (3-1)*2 = 5 is not < 5 */
  ck_assert_int_eq(tj_tensor_slice(a, "V", (int64_t[]){1, 0}, (int64_t[]){3, 6}, (int64_t[]){2, 1}, &v),
                   TJ_ERR_SHAPE);
  ck_assert_msg(strstr(tj_last_error(), "slice (1, 3, 2) of tensor A's dim 0 reaches past its "
                                        "extent 5"), "%s", tj_last_error());
  ck_assert_int_eq(tj_tensor_slice(a, "V", (int64_t[]){0, 7}, (int64_t[]){5, 0}, NULL, &v),
                   TJ_ERR_SHAPE);
  ck_assert_int_eq(tj_tensor_slice(a, "V", (int64_t[]){0, 0}, (int64_t[]){5, 6}, (int64_t[]){1, 0}, &v),
                   TJ_ERR_FORMAT);
  ck_assert_msg(strstr(tj_last_error(), "stride 0"), "%s", tj_last_error());
  /* an empty slice at the very end is fine */
  OK(tj_tensor_slice(a, "V", (int64_t[]){5, 6}, (int64_t[]){0, 0}, NULL, &v));
  ck_assert_int_eq(tj_tensor_nnz(v), 0);
  tj_tensor_free(v);
  OK(tj_tensor_slice(a, "V", (int64_t[]){1, 1}, (int64_t[]){3, 4}, NULL, &v));
  ck_assert_int_eq(tj_tensor_insert(v, (int64_t[]){0, 0}, 1), TJ_ERR_INVALID);
  ck_assert_msg(strstr(tj_last_error(), "tensor V is a view (a slice of A) and cannot be "
                                        "inserted into"), "%s", tj_last_error());
  ck_assert_int_eq(tj_tensor_pack(v), TJ_ERR_INVALID);
  tj_tensor *vv;
  ck_assert_int_eq(tj_tensor_slice(v, "W", (int64_t[]){0, 0}, (int64_t[]){1, 1}, NULL, &vv),
                   TJ_ERR_UNSUPPORTED);
  ck_assert_msg(strstr(tj_last_error(), "is a view already"), "%s", tj_last_error());
  /* a format with slices makes no tensor of its own */
  tj_format f = parse("ds[0:2:1,:]");
  tj_tensor *t;
  ck_assert_int_eq(tj_tensor_new("T", TJ_F64, 2, (int64_t[]){2, 6}, &f, &t), TJ_ERR_FORMAT);
  ck_assert_msg(strstr(tj_last_error(), "describe a view"), "%s", tj_last_error());
  /* a view as a kernel's output */
  tj_tensor *x;
  OK(tj_tensor_new("x", TJ_F64, 1, (int64_t[]){4}, NULL, &x));
  OK(tj_tensor_pack(x));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  ck_assert_int_ne(tj_compile(cx, "V(i,j) = V(i,j) * 2", (tj_tensor *[]){v}, 1, NULL, NULL, &k),
                   TJ_OK);
  tj_format dd = parse("dd");
  tj_tensor *vd, *o;
  OK(tj_tensor_new("O", TJ_F64, 2, (int64_t[]){5, 6}, &dd, &o));
  OK(tj_tensor_slice(o, "P", (int64_t[]){0, 0}, (int64_t[]){3, 4}, NULL, &vd));
  ck_assert_int_ne(tj_compile(cx, "P(i,j) = V(i,j)", (tj_tensor *[]){vd, v}, 2, NULL, NULL, &k),
                   TJ_OK);
  ck_assert_msg(strstr(tj_last_error(), "output P is a view"), "%s", tj_last_error());
  /* a view of the output as an input: the run would overwrite what it reads */
  tj_tensor *o4, *q;
  OK(tj_tensor_new("O", TJ_F64, 2, (int64_t[]){4, 4}, &dd, &o4));
  OK(tj_tensor_pack(o4));
  OK(tj_tensor_slice(o4, "Q", (int64_t[]){0, 0}, (int64_t[]){4, 4}, NULL, &q));
  ck_assert_int_eq(tj_compile(cx, "O(i,j) = Q(i,j) * 2", (tj_tensor *[]){o4, q}, 2, NULL, NULL, &k),
                   TJ_ERR_INVALID);
  ck_assert_msg(strstr(tj_last_error(), "operand Q is a view of the output O"), "%s",
                tj_last_error());
  tj_tensor_free(q), tj_tensor_free(o4);
  tj_context_free(cx);
  tj_tensor_free(vd), tj_tensor_free(o), tj_tensor_free(x);
  tj_tensor_free(v), tj_tensor_free(a);
}
END_TEST

/* ---- kernels over views against plain loops ---- */

typedef struct Slice {
  int64_t off, size, stride;
} Slice;

/* Element (i, j) of the dense rows x cols base d seen through slices r, c. */
static double at(const double *d, int64_t cols, Slice r, Slice c, int64_t i, int64_t j) {
  return d[(r.off + i * r.stride) * cols + c.off + j * c.stride];
}

static double *random_dense(int64_t rows, int64_t cols, unsigned seed, int density) {
  double *d = calloc((size_t)(rows * cols), sizeof *d);
  srand(seed);
  for (int64_t e = 0; e < rows * cols; e++)
    if (rand() % 100 < density) d[e] = 1 + rand() % 9;
  return d;
}

typedef struct KCase {
  const char *spec;       /* the base's format */
  Slice r, c;             /* the view of A */
} KCase;

/* A is 23 x 31 */
static const KCase kcases[] = {
    {"ds", {2, 10, 1}, {3, 20, 1}},     {"ds", {1, 7, 3}, {0, 10, 3}},
    {"ds", {0, 23, 1}, {30, 1, 1}},     /* the last column */
    {"ds", {22, 1, 1}, {0, 31, 1}},     /* the last row */
    {"ds", {5, 0, 1}, {0, 31, 1}},      /* empty */
    {"ds", {0, 23, 1}, {4, 0, 2}},      /* empty columns */
    {"dd", {1, 11, 2}, {2, 9, 3}},      {"ds:1,0", {3, 6, 2}, {1, 15, 2}},
    {"ss", {0, 12, 2}, {5, 13, 1}},     {"uq", {2, 7, 3}, {1, 10, 3}},
    {"uq", {4, 15, 1}, {6, 20, 1}},     {"do", {0, 23, 1}, {2, 14, 2}},
    {"ls", {3, 10, 2}, {0, 16, 2}},     {"sd", {2, 8, 2}, {3, 9, 1}},
};

/* y = V * x, Y = V * B, and C = V + V2 (V2 the same view of another
 * matrix, the output CSR), C = V * W (SpGEMM, W a view of a 3rd matrix). */
START_TEST(kernels_over_views) {
  const KCase *kc = &kcases[_i];
  const int64_t R = 23, Cc = 31, K = 4;
  Slice r = kc->r, c = kc->c;
  double *d = random_dense(R, Cc, 11u + (unsigned)_i, 25);
  double *d2 = random_dense(R, Cc, 101u + (unsigned)_i, 20);
  double *d3 = random_dense(Cc, R, 202u + (unsigned)_i, 20);   /* 31 x 23, W's base */
  tj_tensor *a = matrix("A", kc->spec, R, Cc, d), *a2 = matrix("A2", kc->spec, R, Cc, d2);
  tj_tensor *a3 = matrix("A3", kc->spec, Cc, R, d3);
  tj_tensor *v, *v2, *w;
  OK(tj_tensor_slice(a, "V", (int64_t[]){r.off, c.off}, (int64_t[]){r.size, c.size},
                     (int64_t[]){r.stride, c.stride}, &v));
  OK(tj_tensor_slice(a2, "V2", (int64_t[]){r.off, c.off}, (int64_t[]){r.size, c.size},
                     (int64_t[]){r.stride, c.stride}, &v2));
  /* W: rows of A3 by c's numbers of columns ... a c.size x 5 view of the 31 x 23 A3 */
  Slice wr = c, wc = {1, 5, 4};
  OK(tj_tensor_slice(a3, "W", (int64_t[]){wr.off, wc.off}, (int64_t[]){wr.size, wc.size},
                     (int64_t[]){wr.stride, wc.stride}, &w));
  /* x is itself a strided view of a dense vector of 70 */
  tj_tensor *xb, *x, *b, *y, *out, *sum, *prod;
  OK(tj_tensor_new("xb", TJ_F64, 1, (int64_t[]){70}, NULL, &xb));
  for (int64_t j = 0; j < 70; j++) OK(tj_tensor_insert(xb, &j, (double)(j % 7 - 3)));
  OK(tj_tensor_pack(xb));
  OK(tj_tensor_slice(xb, "x", (int64_t[]){5}, (int64_t[]){c.size}, (int64_t[]){2}, &x));
  OK(tj_tensor_new("B", TJ_F64, 2, (int64_t[]){c.size, K}, NULL, &b));
  for (int64_t j = 0; j < c.size; j++)
    for (int64_t k = 0; k < K; k++) OK(tj_tensor_insert(b, (int64_t[]){j, k}, (double)((j + 3 * k) % 5)));
  OK(tj_tensor_pack(b));
  OK(tj_tensor_new("y", TJ_F64, 1, &r.size, NULL, &y));
  OK(tj_tensor_new("Y", TJ_F64, 2, (int64_t[]){r.size, K}, NULL, &out));
  tj_format csr = parse("ds");
  OK(tj_tensor_new("C", TJ_F64, 2, (int64_t[]){r.size, c.size}, &csr, &sum));
  OK(tj_tensor_new("P", TJ_F64, 2, (int64_t[]){r.size, wc.size}, &csr, &prod));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = V(i,j) * x(j)", (tj_tensor *[]){y, v, x}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int64_t i = 0; i < r.size; i++) {
    double want = 0, got;
    for (int64_t j = 0; j < c.size; j++) want += at(d, Cc, r, c, i, j) * (double)((5 + 2 * j) % 7 - 3);
    OK(tj_tensor_get(y, &i, &got));
    ck_assert_msg(got == want, "%s SpMV: y(%lld) = %g, want %g", kc->spec, (long long)i, got, want);
  }
  OK(tj_compile(cx, "Y(i,k) = V(i,j) * B(j,k)", (tj_tensor *[]){out, v, b}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int64_t i = 0; i < r.size; i++)
    for (int64_t kk = 0; kk < K; kk++) {
      double want = 0, got;
      for (int64_t j = 0; j < c.size; j++) want += at(d, Cc, r, c, i, j) * (double)((j + 3 * kk) % 5);
      OK(tj_tensor_get(out, (int64_t[]){i, kk}, &got));
      ck_assert_msg(got == want, "%s SpMM: Y(%lld,%lld) = %g, want %g", kc->spec, (long long)i,
                    (long long)kk, got, want);
    }
  OK(tj_compile(cx, "C(i,j) = V(i,j) + V2(i,j)", (tj_tensor *[]){sum, v, v2}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int64_t i = 0; i < r.size; i++)
    for (int64_t j = 0; j < c.size; j++) {
      double got, want = at(d, Cc, r, c, i, j) + at(d2, Cc, r, c, i, j);
      OK(tj_tensor_get(sum, (int64_t[]){i, j}, &got));
      ck_assert_msg(got == want, "%s add: C(%lld,%lld) = %g, want %g", kc->spec, (long long)i,
                    (long long)j, got, want);
    }
  OK(tj_compile(cx, "P(i,k) = V(i,j) * W(j,k)", (tj_tensor *[]){prod, v, w}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int64_t i = 0; i < r.size; i++)
    for (int64_t kk = 0; kk < wc.size; kk++) {
      double got, want = 0;
      for (int64_t j = 0; j < c.size; j++) want += at(d, Cc, r, c, i, j) * at(d3, R, wr, wc, j, kk);
      OK(tj_tensor_get(prod, (int64_t[]){i, kk}, &got));
      ck_assert_msg(got == want, "%s SpGEMM: P(%lld,%lld) = %g, want %g", kc->spec,
                    (long long)i, (long long)kk, got, want);
    }
  tj_context_free(cx);
  tj_tensor *all[] = {x, xb, b, y, out, sum, prod, v, v2, w, a, a2, a3};
  for (int t = 0; t < 13; t++) tj_tensor_free(all[t]);
  free(d), free(d2), free(d3);
}
END_TEST

/* A kernel compiled for one slice refuses a view with another: the
 * offsets are compiled in. */
START_TEST(kernel_keeps_its_slice) {
  tj_tensor *a = matrix("A", "ds", 5, 6, &base5x6[0][0]), *v, *v2, *x, *y;
  OK(tj_tensor_slice(a, "V", (int64_t[]){1, 0}, (int64_t[]){3, 6}, NULL, &v));
  OK(tj_tensor_slice(a, "V", (int64_t[]){2, 0}, (int64_t[]){3, 6}, NULL, &v2));
  OK(tj_tensor_new("x", TJ_F64, 1, (int64_t[]){6}, NULL, &x));
  for (int64_t j = 0; j < 6; j++) OK(tj_tensor_insert(x, &j, 1));
  OK(tj_tensor_pack(x));
  OK(tj_tensor_new("y", TJ_F64, 1, (int64_t[]){3}, NULL, &y));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = V(i,j) * x(j)", (tj_tensor *[]){y, v, x}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  double got;
  OK(tj_tensor_get(y, (int64_t[]){0}, &got));   /* row 1: 4 + 5 */
  ck_assert_double_eq(got, 9);
  OK(tj_tensor_get(y, (int64_t[]){2}, &got));   /* row 3: 6 + 7 + 8 */
  ck_assert_double_eq(got, 21);
  ck_assert_int_eq(tj_kernel_run(k, TJ_EVALUATE, (tj_tensor *[]){y, v2, x}, 3), TJ_ERR_FORMAT);
  tj_context_free(cx);
  tj_tensor_free(x), tj_tensor_free(y), tj_tensor_free(v), tj_tensor_free(v2), tj_tensor_free(a);
}
END_TEST

/* A dense view beside a blocked operand (BSR, 2:4): the blocked kernel
 * reads it as split dims, through a copy in the split's order. */
START_TEST(views_beside_blocked_operands) {
  const char *specs[] = {"dsdd:0/2,1/2,0%2,1%2", "ddn2:0,1/4,1%4"};
  for (int s = 0; s < 2; s++) {
    double d[9 * 12] = {0};
    for (int e = 0; e < 9 * 12; e++)
      if (e % 5 == 0 || e % 7 == 0) d[e] = 1 + e % 4;
    if (s == 1)   /* at most 2 of every 4 along a row */
      for (int e = 0; e < 9 * 12; e++) d[e] = e % 4 < 2 ? d[e] : 0;
    tj_tensor *a = matrix("A", specs[s], 9, 12, d), *xb, *x, *y;
    OK(tj_tensor_new("xb", TJ_F64, 1, (int64_t[]){40}, NULL, &xb));
    for (int64_t j = 0; j < 40; j++) OK(tj_tensor_insert(xb, &j, (double)(j % 9 - 4)));
    OK(tj_tensor_pack(xb));
    OK(tj_tensor_slice(xb, "x", (int64_t[]){3}, (int64_t[]){12}, (int64_t[]){3}, &x));
    OK(tj_tensor_new("y", TJ_F64, 1, (int64_t[]){9}, NULL, &y));
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_kernel *k;
    OK(tj_compile(cx, "y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3, NULL, NULL, &k));
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    for (int64_t i = 0; i < 9; i++) {
      double want = 0, got;
      for (int64_t j = 0; j < 12; j++) want += d[i * 12 + j] * (double)((3 + 3 * j) % 9 - 4);
      OK(tj_tensor_get(y, &i, &got));
      ck_assert_msg(got == want, "%s: y(%lld) = %g, want %g", specs[s], (long long)i, got, want);
    }
    tj_context_free(cx);
    tj_tensor_free(x), tj_tensor_free(xb), tj_tensor_free(y), tj_tensor_free(a);
  }
}
END_TEST

/* SpMV over strided column slices of rows long enough for the vector loop
 * (300 x 400, 40% full: about 50 entries of a row in the slice): the sum
 * skips off-stride positions without a branch (guard_slice), vectorized
 * with a masked remainder; against plain loops over the dense base. */
START_TEST(strided_rows_vectorized) {
  const int64_t R = 300, Cc = 400;
  double *d = random_dense(R, Cc, 7u, 40);
  const Slice cols[] = {{3, 130, 3}, {0, 200, 2}, {1, 57, 7}};
  for (int c = 0; c < 3; c++) {
    tj_tensor *a = matrix("A", "ds", R, Cc, d), *v, *x, *y;
    Slice r = {0, R, 1};
    OK(tj_tensor_slice(a, "V", (int64_t[]){0, cols[c].off}, (int64_t[]){R, cols[c].size},
                       (int64_t[]){1, cols[c].stride}, &v));
    OK(tj_tensor_new("x", TJ_F64, 1, &cols[c].size, NULL, &x));
    for (int64_t j = 0; j < cols[c].size; j++) OK(tj_tensor_insert(x, &j, (double)(j % 5 + 1)));
    OK(tj_tensor_pack(x));
    OK(tj_tensor_new("y", TJ_F64, 1, &R, NULL, &y));
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_kernel *k;
    OK(tj_compile(cx, "y(i) = V(i,j) * x(j)", (tj_tensor *[]){y, v, x}, 3, NULL, NULL, &k));
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    for (int64_t i = 0; i < R; i++) {
      double want = 0, got;
      for (int64_t j = 0; j < cols[c].size; j++) want += at(d, Cc, r, cols[c], i, j) * (double)(j % 5 + 1);
      OK(tj_tensor_get(y, &i, &got));
      ck_assert_msg(got == want, "stride %lld: y(%lld) = %g, want %g", (long long)cols[c].stride,
                    (long long)i, got, want);
    }
    tj_context_free(cx);
    tj_tensor_free(x), tj_tensor_free(y), tj_tensor_free(v), tj_tensor_free(a);
  }
  free(d);
}
END_TEST

/* A strided view over a compressed level in an integer division: the
 * branch-free `t += valid ? e : 0` would divide at off-stride positions
 * too, so it must keep the branch. V = A(:, 0:4:2) of a 3x8 i32 A with
 * A(0,1) = 5 (off-stride: 1/2 = 0 reads x(0) = 0), A(1,2) = 6, A(2,5) = 7
 * (off-stride), A(2,6) = 8; x = (0, 3, 1, 2): y = (0, 6/x(1), 8/x(3)) = (0, 2, 4)
 * by hand, and no division by x(0). */
START_TEST(strided_division_keeps_its_branch) {
  tj_format f = parse("ds");
  int64_t dims[2] = {3, 8}, four = 4, three = 3;
  tj_tensor *a, *v, *x, *y;
  OK(tj_tensor_new("A", TJ_I32, 2, dims, &f, &a));
  const int64_t at[4][2] = {{0, 1}, {1, 2}, {2, 5}, {2, 6}};
  const double av[4] = {5, 6, 7, 8};
  for (int e = 0; e < 4; e++) OK(tj_tensor_insert(a, at[e], av[e]));
  OK(tj_tensor_pack(a));
  OK(tj_tensor_slice(a, "V", (int64_t[]){0, 0}, (int64_t[]){3, 4}, (int64_t[]){1, 2}, &v));
  OK(tj_tensor_new("x", TJ_I32, 1, &four, NULL, &x));
  const double xv[4] = {0, 3, 1, 2};
  for (int64_t j = 0; j < 4; j++) OK(tj_tensor_insert(x, &j, xv[j]));
  OK(tj_tensor_pack(x));
  OK(tj_tensor_new("y", TJ_I32, 1, &three, NULL, &y));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = V(i,j) / x(j)", (tj_tensor *[]){y, v, x}, 3, NULL, NULL, &k));
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  OK(tj_kernel_print(k, TJ_STAGE_COMPUTE, out));
  fclose(out);
  /* the division sits under the stride's `if`, not in a select's arm */
  const char *div = strstr(text, "V_val / x_val");
  ck_assert_msg(div, "%s", text);
  const char *line = div;
  while (line > text && line[-1] != '\n') line--;
  ck_assert_msg(!memchr(line, '?', (size_t)(div - line)), "division in a select:\n%s", text);
  free(text);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  const double want[3] = {0, 2, 4};
  for (int64_t i = 0; i < 3; i++) {
    double got;
    OK(tj_tensor_get(y, &i, &got));
    ck_assert_msg(got == want[i], "y(%lld) = %g, want %g", (long long)i, got, want[i]);
  }
  tj_context_free(cx);
  tj_tensor_free(x), tj_tensor_free(y), tj_tensor_free(v), tj_tensor_free(a);
}
END_TEST

/* One kernel over a view with dynamic ('?') slices, run for several slice
 * values set by tj_tensor_slice_set, in every base format; y = V x with
 * x(j) = j + 1, worked out by hand from base5x6:
 *   rows 1..3, columns 0, 2, 4:  V = [0 0 5; 0 0 0; 6 7 0]  y = [15 0 20]
 *   rows 0..1, columns 1..5:     V = [0 2 0 0 3; 4 0 0 5 0]  y = [19 24]
 *   rows 3..4, column 5:         V = [0; 9]                  y = [0 9]
 *   row 2, columns 0..5:         V = [0 0 0 0 0 0]           y = [0]
 *   rows 2..4, columns 0..2:     V = [0 0 0; 6 0 7; 0 0 0]   y = [0 27 0]
 * A second tj_compile at the last values finds the first kernel in the
 * cache (the '?' are in the key, the values are not; the extents, as
 * always, only through their vector tiers: 3 x 3 like the first run). */
START_TEST(dynamic_slices) {
  const char *specs[] = {"ds", "dd", "ss", "do", "uq", "ds:1,0"};
  const struct { int64_t off[2], size[2], stride[2]; double y[3]; } runs[] = {
      {{1, 0}, {3, 3}, {1, 2}, {15, 0, 20}},
      {{0, 1}, {2, 5}, {1, 1}, {19, 24}},
      {{3, 5}, {2, 1}, {1, 1}, {0, 9}},
      {{2, 0}, {1, 6}, {1, 1}, {0}},
      {{2, 0}, {3, 3}, {1, 1}, {0, 27, 0}},
  };
  for (int s = 0; s < 6; s++) {
    tj_tensor *a = matrix("A", specs[s], 5, 6, &base5x6[0][0]), *v;
    char spec[64];
    snprintf(spec, sizeof spec, "%s[?:?:1,?:?:?]", specs[s]);
    tj_format vf = parse(spec);
    OK(tj_tensor_view(a, "V", &vf, &v));
    /* until set: offset 0, stride 1, the whole extent */
    ck_assert_int_eq(tj_tensor_dim(v, 0), 5);
    ck_assert_int_eq(tj_tensor_dim(v, 1), 6);
    char back[64];
    tj_format_print(tj_tensor_format(v), back, sizeof back);
    ck_assert_str_eq(back, spec);
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_kernel *k = NULL, *kadd = NULL;
    for (int r = 0; r < 5; r++) {
      OK(tj_tensor_slice_set(v, runs[r].off, runs[r].size, runs[r].stride));
      ck_assert_int_eq(tj_tensor_dim(v, 0), runs[r].size[0]);
      tj_tensor *x, *y;
      OK(tj_tensor_new("x", TJ_F64, 1, &runs[r].size[1], NULL, &x));
      for (int64_t j = 0; j < runs[r].size[1]; j++) OK(tj_tensor_insert(x, &j, (double)(j + 1)));
      OK(tj_tensor_pack(x));
      OK(tj_tensor_new("y", TJ_F64, 1, &runs[r].size[0], NULL, &y));
      tj_tensor *ops[] = {y, v, x};
      if (!k) OK(tj_compile(cx, "y(i) = V(i,j) * x(j)", ops, 3, NULL, NULL, &k));
      OK(tj_kernel_run(k, TJ_EVALUATE, ops, 3));
      for (int64_t i = 0; i < runs[r].size[0]; i++) {
        double got;
        OK(tj_tensor_get(y, &i, &got));
        ck_assert_msg(got == runs[r].y[i], "%s run %d: y(%lld) = %g, want %g", specs[s], r,
                      (long long)i, got, runs[r].y[i]);
      }
      /* C = V + V into CSR (a merge of V's rows with themselves): 2 V */
      tj_format csr = parse("ds");
      tj_tensor *c;
      OK(tj_tensor_new("C", TJ_F64, 2, runs[r].size, &csr, &c));
      if (!kadd) OK(tj_compile(cx, "C(i,j) = V(i,j) + V(i,j)", (tj_tensor *[]){c, v}, 2, NULL, NULL, &kadd));
      OK(tj_kernel_run(kadd, TJ_EVALUATE, (tj_tensor *[]){c, v}, 2));
      for (int64_t i = 0; i < runs[r].size[0]; i++)
        for (int64_t j = 0; j < runs[r].size[1]; j++) {
          double got, want = 2 * base5x6[runs[r].off[0] + i][runs[r].off[1] + j * runs[r].stride[1]];
          OK(tj_tensor_get(c, (int64_t[]){i, j}, &got));
          ck_assert_msg(got == want, "%s run %d: C(%lld,%lld) = %g, want %g", specs[s], r,
                        (long long)i, (long long)j, got, want);
        }
      tj_tensor_free(c);
      if (r == 4) {   /* compiled again with other values: the same kernel */
        tj_kernel *k2;
        OK(tj_compile(cx, "y(i) = V(i,j) * x(j)", ops, 3, NULL, NULL, &k2));
        tj_cache_stats cs;
        OK(tj_context_cache_stats(cx, &cs));
        ck_assert_int_eq(cs.misses, 2);   /* y = V x and C = V + V */
        ck_assert_int_eq(cs.hits, 1);
      }
      tj_tensor_free(x), tj_tensor_free(y);
    }
    tj_context_free(cx);
    tj_tensor_free(v), tj_tensor_free(a);
  }
}
END_TEST

START_TEST(dynamic_slice_refusals) {
  tj_tensor *a = matrix("A", "ds", 5, 6, &base5x6[0][0]), *v, *w;
  tj_format vf = parse("ds[?:?:1,:]");
  OK(tj_tensor_view(a, "V", &vf, &v));
  /* the row stride is fixed at 1 by the format */
  ck_assert_int_eq(tj_tensor_slice_set(v, (int64_t[]){0, 0}, (int64_t[]){2, 6},
                                       (int64_t[]){2, 1}), TJ_ERR_INVALID);
  ck_assert_msg(strstr(tj_last_error(), "view V's dim 0 has its stride fixed at 1 by its "
                                        "format; got 2"), "%s", tj_last_error());
  /* dim 1 is not sliced */
  ck_assert_int_eq(tj_tensor_slice_set(v, (int64_t[]){0, 1}, (int64_t[]){2, 5}, NULL),
                   TJ_ERR_INVALID);
  ck_assert_msg(strstr(tj_last_error(), "view V's dim 1 is not sliced; give it (0, 6, 1)"),
                "%s", tj_last_error());
  /* past the extent: the view keeps its values */
  OK(tj_tensor_slice_set(v, (int64_t[]){1, 0}, (int64_t[]){2, 6}, NULL));
  ck_assert_int_eq(tj_tensor_slice_set(v, (int64_t[]){3, 0}, (int64_t[]){3, 6}, NULL),
                   TJ_ERR_SHAPE);
  ck_assert_msg(strstr(tj_last_error(), "slice (3, 3, 1) of tensor A's dim 0 reaches past"),
                "%s", tj_last_error());
  ck_assert_int_eq(tj_tensor_dim(v, 0), 2);
  double x;
  OK(tj_tensor_get(v, (int64_t[]){0, 1}, &x));   /* base row 1 */
  ck_assert_double_eq(x, 4);
  /* a view with fixed values has none to set */
  OK(tj_tensor_slice(a, "W", (int64_t[]){0, 0}, (int64_t[]){2, 2}, NULL, &w));
  ck_assert_int_eq(tj_tensor_slice_set(w, (int64_t[]){0, 0}, (int64_t[]){1, 1}, NULL),
                   TJ_ERR_INVALID);
  ck_assert_msg(strstr(tj_last_error(), "tensor W has no dynamic ('?') slice values"), "%s",
                tj_last_error());
  /* a kernel compiled for '?' refuses a view with fixed values, and back */
  tj_tensor *y2, *x6;
  OK(tj_tensor_new("y", TJ_F64, 1, (int64_t[]){2}, NULL, &y2));
  OK(tj_tensor_new("x", TJ_F64, 1, (int64_t[]){6}, NULL, &x6));
  OK(tj_tensor_pack(x6));
  tj_tensor *w2;
  OK(tj_tensor_slice(a, "V", (int64_t[]){1, 0}, (int64_t[]){2, 6}, NULL, &w2));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = V(i,j) * x(j)", (tj_tensor *[]){y2, v, x6}, 3, NULL, NULL, &k));
  ck_assert_int_eq(tj_kernel_run(k, TJ_EVALUATE, (tj_tensor *[]){y2, w2, x6}, 3), TJ_ERR_FORMAT);
  tj_context_free(cx);
  tj_tensor_free(w2), tj_tensor_free(y2), tj_tensor_free(x6);
  tj_tensor_free(w), tj_tensor_free(v), tj_tensor_free(a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("slices");
  TCase *tc = tcase_create("slices");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, parses_and_prints);
  tcase_add_test(tc, view_entries_by_hand);
  tcase_add_test(tc, view_follows_its_base);
  tcase_add_test(tc, refusals);
  tcase_add_loop_test(tc, kernels_over_views, 0, (int)(sizeof kcases / sizeof kcases[0]));
  tcase_add_test(tc, kernel_keeps_its_slice);
  tcase_add_test(tc, dynamic_slices);
  tcase_add_test(tc, strided_rows_vectorized);
  tcase_add_test(tc, strided_division_keeps_its_branch);
  tcase_add_test(tc, dynamic_slice_refusals);
  tcase_add_test(tc, views_beside_blocked_operands);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}

/* Slices of blocked tensors (issue 15): a view of a BSR tensor is an
 * operand read through its base's blocks. The spellings parse and print
 * back; a view's entries are worked out by hand; SpMV, SpMM, `+=` SpMV
 * and sparse adds (into a dense and into a BSR output) over views with
 * blocks of 2, 3 and 4, extents that are and are not block multiples,
 * offsets at and off block boundaries and strides 1 and > 1 are checked
 * against plain loops over the dense matrix the base was built from, with
 * transposed SpMV and a total (windows over the summed rows) and views
 * inside one block, of one block and striding past blocks; a view that
 * cuts its blocks is read in place through block windows (no masks);
 * dynamic ('?') slices run through a converted copy, one kernel for every
 * value; sums over views beside dense vectors, literals and scalars
 * (sequences), and two views in two terms (their own j, windows, no
 * masks, 2:4 too), `=` and `+=`, 1 and 2 threads; the refusals name the
 * culprit. */
#include <check.h>
#include <ctype.h>
#include <math.h>
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

static char *bsr_spec(int b, char *buf, size_t n) {
  snprintf(buf, n, "dsdd:0/%d,1/%d,0%%%d,1%%%d", b, b, b, b);
  return buf;
}

static tj_tensor *matrix(const char *name, const char *spec, int64_t rows, int64_t cols,
                         const double *d) {
  return tu_tensor(name, spec, 2, (int64_t[]){rows, cols}, d);
}

START_TEST(parses_and_prints) {
  const char *mlir = "(d0 : #sparse_tensor<slice(1, 5, 1)>, d1 : #sparse_tensor<slice(2, 3, 2)>) "
                     "-> (d0 floordiv 4 : dense, d1 floordiv 4 : compressed, d0 mod 4 : dense, "
                     "d1 mod 4 : dense)";
  const char *spellings[] = {
      "dsdd:0/4,1/4,0%4,1%4[1:5:1,2:3:2]", mlir,
      "#sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 4 : dense, j floordiv 4 : "
      "compressed, i mod 4 : dense, j mod 4 : dense), dimSlices = [(1, 5, 1), (2, 3, 2)] }>"};
  char buf[512];
  for (int k = 0; k < 3; k++) {
    tj_format f = parse(spellings[k]);
    ck_assert_int_eq(f.ndims, 2);
    ck_assert_int_eq(f.slice[0][0], 1);
    ck_assert_int_eq(f.slice[0][1], 5);
    ck_assert_int_eq(f.slice[1][2], 2);
    tj_format_print(&f, buf, sizeof buf);
    ck_assert_str_eq(buf, "dsdd:0/4,1/4,0%4,1%4[1:5:1,2:3:2]");
    tj_format_print_mlir(&f, buf, sizeof buf);
    ck_assert_str_eq(buf, mlir);
    tj_format g = parse(buf);   /* the printed spelling reads back the same */
    ck_assert(!memcmp(&f, &g, sizeof f));
  }
  tj_format f = parse("dsdd:0/2,1/2,0%2,1%2[:,?:?:1]");
  ck_assert_int_eq(f.slice[0][2], 0);
  ck_assert_int_eq(f.slice[1][0], TJ_SLICE_DYNAMIC);
  tj_format_print_mlir(&f, buf, sizeof buf);
  ck_assert_str_eq(buf, "(d0, d1 : #sparse_tensor<slice(?, ?, 1)>) -> (d0 floordiv 2 : dense, "
                        "d1 floordiv 2 : compressed, d0 mod 2 : dense, d1 mod 2 : dense)");
  ck_assert_int_eq(tj_format_print_mlir_legacy(&f, buf, sizeof buf), TJ_ERR_UNSUPPORTED);
  ck_assert_msg(strstr(tj_last_error(), "no blocked (floordiv / mod) levels"), "%s",
                tj_last_error());
  ck_assert_int_ne(tj_format_parse("dsdd:0/2,1/2,0%2,1%2[0:2:1,:,:]", &f), TJ_OK);
  ck_assert_msg(strstr(tj_last_error(), "more slices than the 2 dims"), "%s", tj_last_error());
}
END_TEST

/* The 5 x 6 base in 2 x 2 blocks; the view rows 1..3, columns 1, 3, 5. */
START_TEST(view_entries_by_hand) {
  const double d[5][6] = {{1, 0, 2, 0, 0, 3}, {0, 4, 0, 0, 5, 0}, {0, 0, 0, 0, 0, 0},
                          {6, 0, 7, 8, 0, 0}, {0, 0, 0, 0, 0, 9}};
  tj_tensor *a = matrix("A", "dsdd:0/2,1/2,0%2,1%2", 5, 6, &d[0][0]), *v;
  OK(tj_tensor_slice(a, "V", (int64_t[]){1, 1}, (int64_t[]){3, 3}, (int64_t[]){1, 2}, &v));
  ck_assert(tj_tensor_is_view(v));
  const double want[3][3] = {{4, 0, 0}, {0, 0, 0}, {0, 8, 0}};
  for (int64_t i = 0; i < 3; i++)
    for (int64_t j = 0; j < 3; j++) {
      double x;
      OK(tj_tensor_get(v, (int64_t[]){i, j}, &x));
      ck_assert_msg(x == want[i][j], "V(%lld,%lld) = %g", (long long)i, (long long)j, x);
    }
  int64_t *coords, n;
  double *vals;
  OK(tj_tensor_unpack(v, &coords, &vals, &n));   /* the blocks' zero fill is listed too */
  int nz = 0;
  for (int64_t e = 0; e < n; e++) {
    ck_assert(coords[2 * e] < 3 && coords[2 * e + 1] < 3);
    ck_assert_double_eq(vals[e], want[coords[2 * e]][coords[2 * e + 1]]);
    nz += vals[e] != 0;
  }
  ck_assert_int_eq(nz, 2);
  free(coords), free(vals);
  tj_format csr = parse("ds");
  tj_tensor *c;
  OK(tj_tensor_convert(v, &csr, &c));
  ck_assert_int_eq(tj_tensor_nnz(c), 2);
  tj_tensor_free(c);
  tj_tensor_free(v), tj_tensor_free(a);
}
END_TEST

/* ---- kernels over views against plain loops ---- */

typedef struct Slice {
  int64_t off, size, stride;
} Slice;

typedef struct BCase {
  int b;                  /* block size */
  int64_t rows, cols;     /* the base */
  Slice r, c;             /* the view */
} BCase;

static const BCase bcases[] = {
    {2, 11, 13, {2, 4, 1}, {2, 6, 1}},    /* at block boundaries, block multiples */
    {2, 12, 14, {1, 5, 1}, {3, 7, 1}},    /* off boundaries, partial edge blocks */
    {2, 11, 13, {0, 6, 2}, {1, 6, 2}},    /* stride 2 */
    {3, 11, 13, {0, 7, 1}, {3, 8, 1}},    /* at a boundary, partial last block */
    {3, 12, 15, {1, 4, 2}, {0, 5, 3}},    /* strides 2 and 3 */
    {3, 11, 13, {6, 5, 1}, {9, 4, 1}},    /* up to the extent: the rest is padding */
    {4, 16, 16, {4, 8, 1}, {4, 12, 1}},   /* whole blocks */
    {4, 13, 18, {3, 8, 1}, {5, 9, 1}},    /* off boundaries */
    {4, 13, 18, {1, 4, 3}, {2, 5, 3}},    /* stride 3 */
    {4, 13, 18, {12, 1, 1}, {17, 1, 1}},  /* one entry, in the padded block */
    {4, 13, 18, {5, 2, 1}, {6, 1, 1}},    /* inside one block, cut on both sides */
    {4, 16, 16, {4, 4, 1}, {8, 4, 1}},    /* exactly one block */
    {4, 13, 18, {2, 6, 1}, {1, 6, 1}},    /* two blocks, both cut */
    {3, 13, 18, {1, 3, 5}, {2, 3, 7}},    /* strides past the block: blocks skipped */
    {2, 11, 13, {1, 4, 3}, {0, 4, 4}},    /* strides 3 and 4 over blocks of 2 */
};

/* Whether dim [off, off + size) by stride of a dim of extent ext cuts its
 * blocks of b (rt_block_frame's `masked`): read through a block window. */
static bool cut(int b, int64_t ext, Slice s) {
  return s.size && !(s.off % b == 0 && s.stride == 1 && (s.size % b == 0 || s.off + s.size == ext));
}

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

static tj_tensor *dense(const char *name, int order, const int64_t *dims, double (*f)(int64_t, int64_t)) {
  tj_tensor *t;
  OK(tj_tensor_new(name, TJ_F64, order, dims, NULL, &t));
  for (int64_t i = 0; i < dims[0]; i++)
    for (int64_t j = 0; j < (order > 1 ? dims[1] : 1); j++)
      OK(tj_tensor_insert(t, (int64_t[]){i, j}, f(i, j)));
  OK(tj_tensor_pack(t));
  return t;
}

static double xval(int64_t j, int64_t k) { return (double)((j * 5 + 3 * k) % 7) - 3; }
static double yval(int64_t i, int64_t k) { return (double)(i % 4) + 0.5 + (double)k; }

/* Whether kernel k's stage (notation, compute loops) holds `what`. */
static bool stage_has(tj_kernel *k, tj_stage stage, const char *what) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  OK(tj_kernel_print(k, stage, f));
  fclose(f);
  bool has = strstr(text, what) != NULL;
  free(text);
  return has;
}

static bool notation_has(tj_kernel *k, const char *what) {
  return stage_has(k, TJ_STAGE_NOTATION, what);
}

static void expect(double got, double want, const char *what, const BCase *bc, int64_t i,
                   int64_t j) {
  ck_assert_msg(got == want, "b=%d %s at (%lld,%lld): %g, want %g", bc->b, what, (long long)i,
                (long long)j, got, want);
}

/* y = V * x, y2 += V * x, Y = V * B, D = V + V2 (dense output), O = V + W
 * (BSR output, W a BSR tensor of the view's extents). */
START_TEST(kernels_over_blocked_views) {
  const BCase *bc = &bcases[_i];
  const int64_t R = bc->rows, C = bc->cols, K = 5;
  Slice r = bc->r, c = bc->c;
  char spec[64];
  bsr_spec(bc->b, spec, sizeof spec);
  double *d = random_dense(R, C, 31u + (unsigned)_i, 35);
  double *d2 = random_dense(R, C, 77u + (unsigned)_i, 30);
  double *dw = random_dense(r.size, c.size, 5u + (unsigned)_i, 30);
  tj_tensor *a = matrix("A", spec, R, C, d), *a2 = matrix("A2", spec, R, C, d2);
  tj_tensor *w = matrix("W", spec, r.size, c.size, dw), *v, *v2;
  OK(tj_tensor_slice(a, "V", (int64_t[]){r.off, c.off}, (int64_t[]){r.size, c.size},
                     (int64_t[]){r.stride, c.stride}, &v));
  OK(tj_tensor_slice(a2, "V2", (int64_t[]){r.off, c.off}, (int64_t[]){r.size, c.size},
                     (int64_t[]){r.stride, c.stride}, &v2));
  tj_tensor *x = dense("x", 1, &c.size, xval), *b = dense("B", 2, (int64_t[]){c.size, K}, xval);
  tj_tensor *y, *y2 = dense("y2", 1, &r.size, yval), *yy, *dd, *o;
  OK(tj_tensor_new("y", TJ_F64, 1, &r.size, NULL, &y));
  OK(tj_tensor_new("Y", TJ_F64, 2, (int64_t[]){r.size, K}, NULL, &yy));
  OK(tj_tensor_new("D", TJ_F64, 2, (int64_t[]){r.size, c.size}, NULL, &dd));
  tj_format bsr = parse(spec);
  OK(tj_tensor_new("O", TJ_F64, 2, (int64_t[]){r.size, c.size}, &bsr, &o));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = V(i,j) * x(j)", (tj_tensor *[]){y, v, x}, 3, NULL, NULL, &k));
  /* no masks: a cut column range is read through block windows (the loop
   * over j_i runs from j_i_lo); rows are the output's, read whole */
  ck_assert_msg(!notation_has(k, "mask("), "b=%d: masks", bc->b);
  ck_assert_msg(stage_has(k, TJ_STAGE_COMPUTE, "j_i_lo") == cut(bc->b, C, c),
                "b=%d: column window %s", bc->b, cut(bc->b, C, c) ? "missing" : "not needed");
  ck_assert(!stage_has(k, TJ_STAGE_COMPUTE, "i_i_lo"));
  /* by stride 1, the row's loop over blocks peels the cut edge blocks */
  ck_assert_msg(stage_has(k, TJ_STAGE_COMPUTE, "pV1_mid_end") == (cut(bc->b, C, c) && c.stride == 1),
                "b=%d: peeled loop", bc->b);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  OK(tj_compile(cx, "y2(i) += V(i,j) * x(j)", (tj_tensor *[]){y2, v, x}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int64_t i = 0; i < r.size; i++) {
    double want = 0, got;
    for (int64_t j = 0; j < c.size; j++) want += at(d, C, r, c, i, j) * xval(j, 0);
    OK(tj_tensor_get(y, &i, &got));
    expect(got, want, "SpMV", bc, i, 0);
    OK(tj_tensor_get(y2, &i, &got));
    expect(got, yval(i, 0) + want, "SpMV +=", bc, i, 0);
  }
  OK(tj_compile(cx, "Y(i,k) = V(i,j) * B(j,k)", (tj_tensor *[]){yy, v, b}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int64_t i = 0; i < r.size; i++)
    for (int64_t kk = 0; kk < K; kk++) {
      double want = 0, got;
      for (int64_t j = 0; j < c.size; j++) want += at(d, C, r, c, i, j) * xval(j, kk);
      OK(tj_tensor_get(yy, (int64_t[]){i, kk}, &got));
      expect(got, want, "SpMM", bc, i, kk);
    }
  /* z = V^T * u: the rows are summed, read through windows over i_i */
  tj_tensor *u = dense("u", 1, &r.size, yval), *z, *sc;
  OK(tj_tensor_new("z", TJ_F64, 1, &c.size, NULL, &z));
  OK(tj_tensor_new("s", TJ_F64, 0, NULL, NULL, &sc));
  OK(tj_compile(cx, "z(j) = V(i,j) * u(i)", (tj_tensor *[]){z, v, u}, 3, NULL, NULL, &k));
  ck_assert(stage_has(k, TJ_STAGE_COMPUTE, "i_i_lo") == cut(bc->b, R, r));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  OK(tj_compile(cx, "s = V(i,j) * x(j)", (tj_tensor *[]){sc, v, x}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  double total = 0, got;
  for (int64_t j = 0; j < c.size; j++) {
    double want = 0;
    for (int64_t i = 0; i < r.size; i++) want += at(d, C, r, c, i, j) * yval(i, 0);
    for (int64_t i = 0; i < r.size; i++) total += at(d, C, r, c, i, j) * xval(j, 0);
    OK(tj_tensor_get(z, &j, &got));
    expect(got, want, "V^T u", bc, 0, j);
  }
  OK(tj_tensor_get(sc, NULL, &got));
  expect(got, total, "sum V x", bc, 0, 0);
  tj_tensor_free(u), tj_tensor_free(z), tj_tensor_free(sc);
  OK(tj_compile(cx, "D(i,j) = V(i,j) + V2(i,j)", (tj_tensor *[]){dd, v, v2}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  OK(tj_compile(cx, "O(i,j) = V(i,j) + W(i,j)", (tj_tensor *[]){o, v, w}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int64_t i = 0; i < r.size; i++)
    for (int64_t j = 0; j < c.size; j++) {
      double got;
      OK(tj_tensor_get(dd, (int64_t[]){i, j}, &got));
      expect(got, at(d, C, r, c, i, j) + at(d2, C, r, c, i, j), "V + V2", bc, i, j);
      OK(tj_tensor_get(o, (int64_t[]){i, j}, &got));
      expect(got, at(d, C, r, c, i, j) + dw[i * c.size + j], "V + W (BSR)", bc, i, j);
    }
  /* the output holds only the view's coordinates: none past its extents */
  int64_t *coords, n;
  double *vals;
  OK(tj_tensor_unpack(o, &coords, &vals, &n));
  for (int64_t e = 0; e < n; e++)
    ck_assert(coords[2 * e] < r.size && coords[2 * e + 1] < c.size);
  free(coords), free(vals);
  tj_context_free(cx);
  tj_tensor *all[] = {y, y2, yy, dd, o, x, b, v, v2, w, a, a2};
  for (int t = 0; t < 12; t++) tj_tensor_free(all[t]);
  free(d), free(d2), free(dw);
}
END_TEST

/* A dense tensor over the caller's array buf + guard, NaN around it: a
 * kernel reading past either end of the tensor's values gets NaN. */
static tj_tensor *guarded(const char *name, int order, const int64_t *dims,
                          const int64_t *strides, double **buf, int64_t guard,
                          double (*f)(int64_t, int64_t)) {
  int64_t n = dims[0] * (order > 1 ? dims[1] : 1);
  *buf = malloc(sizeof **buf * (size_t)(n + 2 * guard));
  for (int64_t e = 0; e < n + 2 * guard; e++) (*buf)[e] = NAN;
  for (int64_t i = 0; i < dims[0]; i++)
    for (int64_t j = 0; j < (order > 1 ? dims[1] : 1); j++)
      (*buf)[guard + (strides ? i * strides[0] + j * strides[1] : i * (order > 1 ? dims[1] : 1) + j)] = f(i, j);
  tj_arrays a = {.dtype = TJ_F64, .order = order, .dims = dims, .strides = strides,
                 .vals = *buf + guard, .vals_len = n};
  tj_tensor *t;
  OK(tj_tensor_wrap(name, &a, 0, &t));
  return t;
}

static double stale(int64_t i, int64_t k) { return 99 + (double)(i + k); }

/* The dense inputs of SpMV, SpMM and V^T u over a view read in place (the
 * view's offset folded into their array's address: the loops over their
 * blocked index run through block windows) read nothing outside their
 * arrays: each is the caller's array between NaN guards, so one read
 * past an end would make the result NaN. SpMM's B also column-major
 * (its framed dim not the first level: read through a padded copy). The
 * outputs start at 99 and up: `=` overwrites them (SpMM also run as ASSEMBLE
 * then COMPUTE), `+=` adds to them. */
START_TEST(dense_inputs_read_in_place) {
  const BCase *bc = &bcases[_i];
  const int64_t R = bc->rows, C = bc->cols, K = 5, G = 64;
  Slice r = bc->r, c = bc->c;
  char spec[64];
  bsr_spec(bc->b, spec, sizeof spec);
  double *d = random_dense(R, C, 41u + (unsigned)_i, 40);
  tj_tensor *a = matrix("A", spec, R, C, d), *v;
  OK(tj_tensor_slice(a, "V", (int64_t[]){r.off, c.off}, (int64_t[]){r.size, c.size},
                     (int64_t[]){r.stride, c.stride}, &v));
  double *xb, *bb, *cb, *ub;
  tj_tensor *x = guarded("x", 1, &c.size, NULL, &xb, G, xval);
  tj_tensor *b = guarded("B", 2, (int64_t[]){c.size, K}, NULL, &bb, G, xval);
  tj_tensor *bc_ = guarded("B", 2, (int64_t[]){c.size, K}, (int64_t[]){1, c.size}, &cb, G, xval);
  tj_tensor *u = guarded("u", 1, &r.size, NULL, &ub, G, yval);
  tj_tensor *y = dense("y", 1, &r.size, stale), *y2 = dense("y2", 1, &r.size, yval);
  tj_tensor *z = dense("z", 1, &c.size, stale), *yy = NULL;
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = V(i,j) * x(j)", (tj_tensor *[]){y, v, x}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  OK(tj_compile(cx, "y2(i) += V(i,j) * x(j)", (tj_tensor *[]){y2, v, x}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  OK(tj_compile(cx, "z(j) = V(i,j) * u(i)", (tj_tensor *[]){z, v, u}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int64_t i = 0; i < r.size; i++) {
    double want = 0, got;
    for (int64_t j = 0; j < c.size; j++) want += at(d, C, r, c, i, j) * xval(j, 0);
    OK(tj_tensor_get(y, &i, &got));
    expect(got, want, "SpMV, x in place", bc, i, 0);
    OK(tj_tensor_get(y2, &i, &got));
    expect(got, yval(i, 0) + want, "SpMV +=, x in place", bc, i, 0);
  }
  for (int64_t j = 0; j < c.size; j++) {
    double want = 0, got;
    for (int64_t i = 0; i < r.size; i++) want += at(d, C, r, c, i, j) * yval(i, 0);
    OK(tj_tensor_get(z, &j, &got));
    expect(got, want, "V^T u, u in place", bc, 0, j);
  }
  for (int layout = 0; layout < 2; layout++) {
    tj_tensor_free(yy);
    yy = dense("Y", 2, (int64_t[]){r.size, K}, stale);
    OK(tj_compile(cx, "Y(i,k) = V(i,j) * B(j,k)", (tj_tensor *[]){yy, v, layout ? bc_ : b}, 3,
                  NULL, NULL, &k));
    OK(tj_kernel_run(k, TJ_ASSEMBLE, NULL, 0));
    OK(tj_kernel_run(k, TJ_COMPUTE, NULL, 0));
    for (int64_t i = 0; i < r.size; i++)
      for (int64_t kk = 0; kk < K; kk++) {
        double want = 0, got;
        for (int64_t j = 0; j < c.size; j++) want += at(d, C, r, c, i, j) * xval(j, kk);
        OK(tj_tensor_get(yy, (int64_t[]){i, kk}, &got));
        expect(got, want, layout ? "SpMM, B column-major" : "SpMM, B in place", bc, i, kk);
      }
  }
  tj_context_free(cx);
  tj_tensor *all[] = {y, y2, yy, z, x, b, bc_, u, v, a};
  for (int t = 0; t < 10; t++) tj_tensor_free(all[t]);
  free(d), free(xb), free(bb), free(cb), free(ub);
}
END_TEST

/* ---- views of n_out_of_m (2:4) tensors ---- */

typedef struct NCase {
  int64_t rows, cols;     /* the base, 2:4 along its rows */
  Slice r, c;             /* the view */
} NCase;

static const NCase ncases[] = {
    {6, 16, {1, 4, 1}, {5, 2, 1}},     /* inside one block, cut on both sides */
    {7, 18, {2, 5, 1}, {3, 9, 1}},     /* cut edge blocks; 18: a padded last block */
    {7, 18, {0, 4, 2}, {1, 6, 3}},     /* strides 2 and 3 */
    {6, 16, {0, 6, 1}, {4, 8, 1}},     /* whole blocks */
    {7, 18, {1, 6, 1}, {2, 16, 1}},    /* up to the extent */
    {7, 21, {1, 3, 1}, {2, 4, 5}},     /* a stride past the block: blocks skipped */
};

/* rows x cols with at most 2 nonzeros in each 4 along a row. */
static double *random_24(int64_t rows, int64_t cols, unsigned seed) {
  double *d = calloc((size_t)(rows * cols), sizeof *d);
  srand(seed);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j0 = 0; j0 < cols; j0 += 4)
      for (int e = 0; e < 2; e++) {
        int64_t j = j0 + rand() % 4;
        if (j < cols && rand() % 4) d[i * cols + j] = 1 + rand() % 9;
      }
  return d;
}

/* A cut view of 2:4 reads its cut dim through a block window over the n
 * level's positions (no mask): SpMV, `+=` SpMV, SpMM, row sums and a
 * total, with
 * x and B the caller's arrays between NaN guards (read in place), and a
 * sum of two views (co-iterated: masks), against plain loops. */
START_TEST(structured_views_through_windows) {
  const NCase *nc = &ncases[_i];
  const BCase bc = {4, nc->rows, nc->cols, nc->r, nc->c};
  const int64_t R = nc->rows, C = nc->cols, K = 3, G = 16;
  Slice r = nc->r, c = nc->c;
  double *d = random_24(R, C, 3u + (unsigned)_i), *d2 = random_24(R, C, 99u + (unsigned)_i);
  tj_tensor *a = matrix("A", "ddn2:0,1/4,1%4", R, C, d), *a2 = matrix("A2", "ddn2:0,1/4,1%4", R, C, d2);
  tj_tensor *v, *v2;
  OK(tj_tensor_slice(a, "V", (int64_t[]){r.off, c.off}, (int64_t[]){r.size, c.size},
                     (int64_t[]){r.stride, c.stride}, &v));
  OK(tj_tensor_slice(a2, "V2", (int64_t[]){r.off, c.off}, (int64_t[]){r.size, c.size},
                     (int64_t[]){r.stride, c.stride}, &v2));
  double *xb, *bb;
  tj_tensor *x = guarded("x", 1, &c.size, NULL, &xb, G, xval);
  tj_tensor *b = guarded("B", 2, (int64_t[]){c.size, K}, NULL, &bb, G, xval);
  tj_tensor *y = dense("y", 1, &r.size, stale), *y2 = dense("y2", 1, &r.size, yval);
  tj_tensor *yy = dense("Y", 2, (int64_t[]){r.size, K}, stale), *sc, *dd;
  OK(tj_tensor_new("s", TJ_F64, 0, NULL, NULL, &sc));
  OK(tj_tensor_new("D", TJ_F64, 2, (int64_t[]){r.size, c.size}, NULL, &dd));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = V(i,j) * x(j)", (tj_tensor *[]){y, v, x}, 3, NULL, NULL, &k));
  ck_assert_msg(!notation_has(k, "mask("), "case %d: masks", _i);
  ck_assert_msg(stage_has(k, TJ_STAGE_COMPUTE, "j_i_lo") == cut(4, C, c),
                "case %d: column window %s", _i, cut(4, C, c) ? "missing" : "not needed");
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  OK(tj_compile(cx, "y2(i) += V(i,j) * x(j)", (tj_tensor *[]){y2, v, x}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  OK(tj_compile(cx, "Y(i,k) = V(i,j) * B(j,k)", (tj_tensor *[]){yy, v, b}, 3, NULL, NULL, &k));
  ck_assert(!notation_has(k, "mask("));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  OK(tj_compile(cx, "s = V(i,j) * x(j)", (tj_tensor *[]){sc, v, x}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  OK(tj_compile(cx, "D(i,j) = V(i,j) + V2(i,j)", (tj_tensor *[]){dd, v, v2}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  tj_tensor *rs = dense("w", 1, &r.size, stale);   /* row sums: no dense factor hides an entry */
  OK(tj_compile(cx, "w(i) = V(i,j)", (tj_tensor *[]){rs, v}, 2, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  double total = 0, got;
  for (int64_t i = 0; i < r.size; i++) {
    double want = 0;
    for (int64_t j = 0; j < c.size; j++) want += at(d, C, r, c, i, j);
    OK(tj_tensor_get(rs, &i, &got));
    expect(got, want, "2:4 row sums", &bc, i, 0);
    want = 0;
    for (int64_t j = 0; j < c.size; j++) want += at(d, C, r, c, i, j) * xval(j, 0);
    total += want;
    OK(tj_tensor_get(y, &i, &got));
    expect(got, want, "2:4 SpMV", &bc, i, 0);
    OK(tj_tensor_get(y2, &i, &got));
    expect(got, yval(i, 0) + want, "2:4 SpMV +=", &bc, i, 0);
    for (int64_t kk = 0; kk < K; kk++) {
      want = 0;
      for (int64_t j = 0; j < c.size; j++) want += at(d, C, r, c, i, j) * xval(j, kk);
      OK(tj_tensor_get(yy, (int64_t[]){i, kk}, &got));
      expect(got, want, "2:4 SpMM", &bc, i, kk);
    }
    for (int64_t j = 0; j < c.size; j++) {
      OK(tj_tensor_get(dd, (int64_t[]){i, j}, &got));
      expect(got, at(d, C, r, c, i, j) + at(d2, C, r, c, i, j), "2:4 V + V2", &bc, i, j);
    }
  }
  OK(tj_tensor_get(sc, NULL, &got));
  expect(got, total, "2:4 sum V x", &bc, 0, 0);
  tj_context_free(cx);
  tj_tensor *all[] = {y, y2, yy, sc, dd, rs, x, b, v, v2, a, a2};
  for (int t = 0; t < 12; t++) tj_tensor_free(all[t]);
  free(d), free(d2), free(xb), free(bb);
}
END_TEST

/* ---- sums with operands that are not blocked (issue 15, defect 1) ---- */

/* The plain-loop products over view (r, c) of the dense matrix d (cols
 * columns) that the sum shapes below are made of. */
typedef struct Products {
  double *vx, *v2x, *vrow, *vtu, *vb;   /* V x, V2 x, V's row sums, V^T u, V B (r.size x K) */
} Products;

static Products products(const double *d, const double *d2, int64_t cols, Slice r, Slice c,
                         int64_t K) {
  Products p = {calloc((size_t)r.size, sizeof(double)), calloc((size_t)r.size, sizeof(double)),
                calloc((size_t)r.size, sizeof(double)), calloc((size_t)c.size, sizeof(double)),
                calloc((size_t)(r.size * K), sizeof(double))};
  for (int64_t i = 0; i < r.size; i++)
    for (int64_t j = 0; j < c.size; j++) {
      double v = at(d, cols, r, c, i, j);
      p.vx[i] += v * xval(j, 0);
      p.v2x[i] += at(d2, cols, r, c, i, j) * xval(j, 0);
      p.vrow[i] += v;
      p.vtu[j] += v * yval(i, 0);
      for (int64_t k = 0; k < K; k++) p.vb[i * K + k] += v * xval(j, k);
    }
  return p;
}

static void products_free(Products *p) {
  free(p->vx), free(p->v2x), free(p->vrow), free(p->vtu), free(p->vb);
}

/* The sum shapes: a sum over view V beside terms that read no blocked
 * operand (a dense vector, a literal, a scalar), `=` and `+=`, transposed,
 * two views, SpMM plus a matrix. out: 'y' (r.size, starts stale or, for
 * `+=`, at yval), 'z' (c.size, stale), 'Y' (r.size x K, stale). */
typedef struct SumShape {
  const char *expr;
  char out;
} SumShape;

static const SumShape sum_shapes[] = {
    {"y(i) = V(i,j) * x(j) + u(i)", 'y'},
    {"y(i) = u(i) - V(i,j) * x(j)", 'y'},
    {"y(i) += V(i,j) * x(j) + u(i)", 'y'},
    {"y(i) = 2 * V(i,j) * x(j) + 3", 'y'},
    {"y(i) = V(i,j) * x(j) * s - 2.5e-1 + u(i)", 'y'},
    {"y(i) = V(i,j) + u(i)", 'y'},
    {"y(i) = V(i,j) * x(j) + V2(i,j) * x(j) + u(i)", 'y'},
    {"z(j) = V(i,j) * u(i) + x(j)", 'z'},
    {"z(j) += V(i,j) * u(i) - x(j)", 'z'},
    {"Y(i,k) = V(i,j) * B(j,k) + F(i,k)", 'Y'},
    {"y(i) = V(i,j) * x(j) - V2(i,j) * x(j)", 'y'},
    {"y(i) += V2(i,j) * x(j) + V(i,j) * x(j)", 'y'},
};

/* The value shape q should leave at (i, k) of its output (k: Y's column;
 * start: the output's value before the run). */
static double sum_want(int q, const Products *p, int64_t i, int64_t k, int64_t K, double start) {
  const double s = 2.5;
  switch (q) {
  case 0: return p->vx[i] + yval(i, 0);
  case 1: return yval(i, 0) - p->vx[i];
  case 2: return start + p->vx[i] + yval(i, 0);
  case 3: return 2 * p->vx[i] + 3;
  case 4: return p->vx[i] * s - 2.5e-1 + yval(i, 0);
  case 5: return p->vrow[i] + yval(i, 0);
  case 6: return p->vx[i] + p->v2x[i] + yval(i, 0);
  case 7: return p->vtu[i] + xval(i, 0);
  case 8: return start + p->vtu[i] - xval(i, 0);
  case 9: return p->vb[i * K + k] + yval(i, k);
  case 10: return p->vx[i] - p->v2x[i];
  default: return start + p->v2x[i] + p->vx[i];
  }
}

/* Whether expr names tensor name (a whole identifier). */
static bool names(const char *expr, const char *name) {
  size_t n = strlen(name);
  for (const char *p = strstr(expr, name); p; p = strstr(p + 1, name)) {
    bool starts = p == expr || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
    if (starts && !(isalnum((unsigned char)p[n]) || p[n] == '_')) return true;
  }
  return false;
}

/* Runs every sum shape over views V, V2 (of a and a2 by r, c) on 1 and 2
 * threads, its dense inputs the caller's arrays between NaN guards (read
 * in place or copied: either way nothing outside them reaches the result),
 * and checks each output against plain loops over d and d2; a sum nested
 * in max() beside u is refused naming the construct (refuses_nested: BSR)
 * or computed (2:4). */
static void check_sum_shapes(tj_tensor *a, tj_tensor *a2, const double *d, const double *d2,
                             int b_size, int64_t cols, Slice r, Slice c, bool refuses_nested,
                             const char *what) {
  const int64_t K = 3, G = 16;
  tj_tensor *v, *v2, *sc;
  OK(tj_tensor_slice(a, "V", (int64_t[]){r.off, c.off}, (int64_t[]){r.size, c.size},
                     (int64_t[]){r.stride, c.stride}, &v));
  OK(tj_tensor_slice(a2, "V2", (int64_t[]){r.off, c.off}, (int64_t[]){r.size, c.size},
                     (int64_t[]){r.stride, c.stride}, &v2));
  OK(tj_tensor_new("s", TJ_F64, 0, NULL, NULL, &sc));
  OK(tj_tensor_insert(sc, NULL, 2.5));
  OK(tj_tensor_pack(sc));
  double *xb, *ub, *bb, *fb;
  tj_tensor *x = guarded("x", 1, &c.size, NULL, &xb, G, xval);
  tj_tensor *u = guarded("u", 1, &r.size, NULL, &ub, G, yval);
  tj_tensor *b = guarded("B", 2, (int64_t[]){c.size, K}, NULL, &bb, G, xval);
  tj_tensor *f = guarded("F", 2, (int64_t[]){r.size, K}, NULL, &fb, G, yval);
  Products p = products(d, d2, cols, r, c, K);
  tj_context *cx;
  OK(tj_context_new(&cx));
  for (int q = 0; q < (int)(sizeof sum_shapes / sizeof sum_shapes[0]); q++)
    for (int threads = 1; threads <= 2; threads++) {
      const SumShape *sh = &sum_shapes[q];
      bool accum = strstr(sh->expr, "+=") != NULL;
      tj_tensor *out = sh->out == 'y' ? dense("y", 1, &r.size, accum ? yval : stale)
                       : sh->out == 'z' ? dense("z", 1, &c.size, stale)
                                        : dense("Y", 2, (int64_t[]){r.size, K}, stale);
      tj_tensor *all[] = {out, v, v2, x, u, b, f, sc}, *ops[8];
      int nops = 0;
      for (int t = 0; t < 8; t++)
        if (names(sh->expr, tj_tensor_name(all[t]))) ops[nops++] = all[t];
      tj_options o = tj_options_default();
      o.nthreads = threads;
      tj_kernel *k;
      ck_assert_msg(tj_compile(cx, sh->expr, ops, nops, NULL, &o, &k) == TJ_OK, "%s %s: %s",
                    what, sh->expr, tj_last_error());
      /* two views in two terms: each sum its own index, each view through
       * its block window alone (no masks, also for 2:4) */
      ck_assert_msg(!notation_has(k, "mask("), "%s %s: masks", what, sh->expr);
      OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
      int64_t n = sh->out == 'z' ? c.size : r.size, ncols = sh->out == 'Y' ? K : 1;
      for (int64_t i = 0; i < n; i++)
        for (int64_t kk = 0; kk < ncols; kk++) {
          double got, start = sh->out == 'z' ? stale(i, 0) : yval(i, 0);
          OK(tj_tensor_get(out, sh->out == 'Y' ? (int64_t[]){i, kk} : &i, &got));
          double want = sum_want(q, &p, i, kk, K, start);
          ck_assert_msg(got == want, "%s %s (%d threads) at (%lld,%lld): %g, want %g", what,
                        sh->expr, threads, (long long)i, (long long)kk, got, want);
        }
      tj_tensor_free(out);
    }
  /* a sum nested beside an unblocked operand: BSR's constant block loops
   * cannot run inside it (refused in the user's terms); 2:4 walks its
   * blocks' positions and computes it */
  tj_tensor *y = dense("y", 1, &r.size, stale);
  tj_kernel *k;
  tj_status st = tj_compile(cx, "y(i) = max(V(i,j) * x(j), u(i))", (tj_tensor *[]){y, v, x, u},
                            4, NULL, NULL, &k);
  if (!refuses_nested) {
    OK(st);
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    for (int64_t i = 0; i < r.size; i++) {
      double got;
      OK(tj_tensor_get(y, &i, &got));
      double want = p.vx[i] > yval(i, 0) ? p.vx[i] : yval(i, 0);
      ck_assert_msg(got == want, "%s max(V x, u) at %lld: %g, want %g", what, (long long)i,
                    got, want);
    }
  } else {
    ck_assert_int_eq(st, TJ_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(tj_last_error(), "a sum over the blocks of V sits inside a function"),
                  "%s", tj_last_error());
    ck_assert_msg(strstr(tj_last_error(), "(the planner, on a directive tensorjit added for the "
                                          "blocks: bound("),
                  "%s", tj_last_error());
  }
  /* u(i) inside the sum over j (the smallest subexpression holding every
   * use of j is the whole rhs: u is added once per column of the view).
   * Block windows (BSR, a cut j) visit only the view's columns: computed;
   * the last block's padding or 2:4's masks (V and V2 share j) would add u
   * at other positions too: refused, naming the fix */
  st = tj_compile(cx, "y(i) = u(i) + V(i,j) * x(j) + V2(i,j) * x(j)",
                  (tj_tensor *[]){y, v, v2, x, u}, 5, NULL, NULL, &k);
  bool cuts = cut(b_size, cols, c), padded = !cuts && c.size % b_size != 0;
  if (padded || (cuts && !refuses_nested)) {
    ck_assert_int_eq(st, TJ_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(tj_last_error(), "index j is summed over a sum of terms one of which "
                                          "does not read it"),
                  "%s: %s", what, tj_last_error());
  } else {
    ck_assert_msg(st == TJ_OK, "%s: %s", what, tj_last_error());
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    for (int64_t i = 0; i < r.size; i++) {
      double got, want = (double)c.size * yval(i, 0) + p.vx[i] + p.v2x[i];
      OK(tj_tensor_get(y, &i, &got));
      ck_assert_msg(got == want, "%s u + V x + V2 x at %lld: %g, want %g", what, (long long)i,
                    got, want);
    }
  }
  tj_context_free(cx);
  products_free(&p);
  tj_tensor *all[] = {y, x, u, b, f, sc, v, v2};
  for (int t = 0; t < 8; t++) tj_tensor_free(all[t]);
  free(xb), free(ub), free(bb), free(fb);
}

START_TEST(sums_beside_bsr_views) {
  const BCase *bc = &bcases[_i];
  char spec[64], what[64];
  bsr_spec(bc->b, spec, sizeof spec);
  snprintf(what, sizeof what, "BSR %dx%d case %d", bc->b, bc->b, _i);
  double *d = random_dense(bc->rows, bc->cols, 61u + (unsigned)_i, 35);
  double *d2 = random_dense(bc->rows, bc->cols, 17u + (unsigned)_i, 30);
  tj_tensor *a = matrix("A", spec, bc->rows, bc->cols, d);
  tj_tensor *a2 = matrix("A2", spec, bc->rows, bc->cols, d2);
  check_sum_shapes(a, a2, d, d2, bc->b, bc->cols, bc->r, bc->c, true, what);
  tj_tensor_free(a), tj_tensor_free(a2);
  free(d), free(d2);
}
END_TEST

START_TEST(sums_beside_structured_views) {
  const NCase *nc = &ncases[_i];
  char what[64];
  snprintf(what, sizeof what, "2:4 case %d", _i);
  double *d = random_24(nc->rows, nc->cols, 7u + (unsigned)_i);
  double *d2 = random_24(nc->rows, nc->cols, 71u + (unsigned)_i);
  tj_tensor *a = matrix("A", "ddn2:0,1/4,1%4", nc->rows, nc->cols, d);
  tj_tensor *a2 = matrix("A2", "ddn2:0,1/4,1%4", nc->rows, nc->cols, d2);
  check_sum_shapes(a, a2, d, d2, 4, nc->cols, nc->r, nc->c, false, what);
  tj_tensor_free(a), tj_tensor_free(a2);
  free(d), free(d2);
}
END_TEST

/* A view with '?' slice values runs through a converted copy of the
 * slice made at each run: one kernel serves every value. */
START_TEST(dynamic_slices_through_a_copy) {
  const int64_t R = 13, C = 18;
  double *d = random_dense(R, C, 9u, 40);
  tj_tensor *a = matrix("A", "dsdd:0/4,1/4,0%4,1%4", R, C, d), *v;
  tj_format f = parse("dsdd:0/4,1/4,0%4,1%4[?:?:?,?:?:1]");
  OK(tj_tensor_view(a, "V", &f, &v));
  const Slice rs[] = {{1, 6, 2}, {4, 9, 1}, {0, 13, 1}}, cs[] = {{3, 7, 1}, {0, 18, 1}, {5, 11, 1}};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = NULL;
  for (int s = 0; s < 3; s++) {
    Slice r = rs[s], c = cs[s];
    OK(tj_tensor_slice_set(v, (int64_t[]){r.off, c.off}, (int64_t[]){r.size, c.size},
                           (int64_t[]){r.stride, 1}));
    tj_tensor *x = dense("x", 1, &c.size, xval), *y;
    OK(tj_tensor_new("y", TJ_F64, 1, &r.size, NULL, &y));
    if (!k) OK(tj_compile(cx, "y(i) = V(i,j) * x(j)", (tj_tensor *[]){y, v, x}, 3, NULL, NULL, &k));
    OK(tj_kernel_run(k, TJ_EVALUATE, (tj_tensor *[]){y, v, x}, 3));
    for (int64_t i = 0; i < r.size; i++) {
      double want = 0, got;
      for (int64_t j = 0; j < c.size; j++) want += at(d, C, r, c, i, j) * xval(j, 0);
      OK(tj_tensor_get(y, &i, &got));
      ck_assert_msg(got == want, "slice %d: y(%lld) = %g, want %g", s, (long long)i, got, want);
    }
    tj_tensor_free(x), tj_tensor_free(y);
  }
  tj_context_free(cx);
  tj_tensor_free(v), tj_tensor_free(a);
  free(d);
}
END_TEST

/* A copy of an n_out_of_m view (a '?' slice, or a fixed one whose frame
 * differs from another operand's) has blocks from the view's start, not
 * the base's, so one may hold more than n entries: 1:4 over columns 3 and
 * 4 (one per block) viewed from column 2 puts both in the view's block 0.
 * The copy was made in the view's n_out_of_m format and refused ("tensor V:
 * the block at (0, 0..3) holds 2 nonzeros"); it is compressed there now.
 * Values by hand. */
START_TEST(structured_copies_cut_inside_blocks) {
  /* A (2 x 8, 1:4): (0,3) = 1, (0,4) = 2, (1,1) = 4, (1,5) = 8 */
  double d[2 * 8] = {0};
  d[3] = 1, d[4] = 2, d[8 + 1] = 4, d[8 + 5] = 8;
  tj_tensor *a = matrix("A", "ddn1:0,1/4,1%4", 2, 8, d), *v;
  tj_format f = parse("ddn1:0,1/4,1%4[:,?:?:1]");
  OK(tj_tensor_view(a, "V", &f, &v));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = NULL;
  /* columns 2..5: y = (1*10 + 2*100, 8*1000); columns 1..6: y = (1*100 + 2*1000, 4*1 + 8*10^4) */
  const int64_t off[2] = {2, 1}, size[2] = {4, 6};
  const double want[2][2] = {{210, 8000}, {2100, 80004}};
  double xs[6] = {1, 10, 100, 1000, 10000, 100000};
  for (int s = 0; s < 2; s++) {
    OK(tj_tensor_slice_set(v, (int64_t[]){0, off[s]}, (int64_t[]){2, size[s]}, NULL));
    tj_tensor *x = tu_tensor("x", "d", 1, &size[s], xs), *y;
    OK(tj_tensor_new("y", TJ_F64, 1, (int64_t[]){2}, NULL, &y));
    if (!k) OK(tj_compile(cx, "y(i) = V(i,j) * x(j)", (tj_tensor *[]){y, v, x}, 3, NULL, NULL, &k));
    OK(tj_kernel_run(k, TJ_EVALUATE, (tj_tensor *[]){y, v, x}, 3));
    for (int64_t i = 0; i < 2; i++) {
      double got;
      OK(tj_tensor_get(y, &i, &got));
      ck_assert_msg(got == want[s][i], "slice %d: y(%lld) = %g, want %g", s, (long long)i, got,
                    want[s][i]);
    }
    tj_tensor_free(x), tj_tensor_free(y);
  }
  tj_kernel_free(k);
  /* a fixed view cut inside its blocks beside an unsliced 1:4 operand: W
   * (2 x 4) (0,0) = 5, (1,2) = 7; C = A[:, 2:6] + W = [[5 1 2 0], [0 0 7 8]] */
  tj_tensor *u, *c;
  double w[2 * 4] = {5, 0, 0, 0, 0, 0, 7, 0};
  tj_tensor *wt = matrix("W", "ddn1:0,1/4,1%4", 2, 4, w);
  OK(tj_tensor_slice(a, "U", (int64_t[]){0, 2}, (int64_t[]){2, 4}, NULL, &u));
  OK(tj_tensor_new("C", TJ_F64, 2, (int64_t[]){2, 4}, NULL, &c));
  OK(tj_compile(cx, "C(i,j) = U(i,j) + W(i,j)", (tj_tensor *[]){c, u, wt}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, (tj_tensor *[]){c, u, wt}, 3));
  const double cw[2 * 4] = {5, 1, 2, 0, 0, 0, 7, 8};
  for (int64_t e = 0; e < 8; e++) {
    double got;
    OK(tj_tensor_get(c, (int64_t[]){e / 4, e % 4}, &got));
    ck_assert_msg(got == cw[e], "C(%lld,%lld) = %g, want %g", (long long)(e / 4),
                  (long long)(e % 4), got, cw[e]);
  }
  tj_kernel_free(k);
  tj_context_free(cx);
  tj_tensor_free(c), tj_tensor_free(u), tj_tensor_free(wt), tj_tensor_free(v), tj_tensor_free(a);
}
END_TEST

/* The kernel reads only the entries inside the slice: an inf and a NaN in
 * the cut edge blocks, outside the view, never reach y. */
START_TEST(entries_outside_the_slice_stay_out) {
  double d[6 * 6];
  for (int e = 0; e < 36; e++) d[e] = 1 + e % 5;
  d[0] = INFINITY, d[1] = NAN, d[5 * 6 + 5] = -INFINITY;   /* (0,0), (0,1), (5,5) */
  tj_tensor *a = matrix("A", "dsdd:0/2,1/2,0%2,1%2", 6, 6, d), *v, *y;
  OK(tj_tensor_slice(a, "V", (int64_t[]){1, 1}, (int64_t[]){4, 4}, NULL, &v));
  int64_t four = 4;
  tj_tensor *x = dense("x", 1, &four, xval);
  OK(tj_tensor_new("y", TJ_F64, 1, &four, NULL, &y));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = V(i,j) * x(j)", (tj_tensor *[]){y, v, x}, 3, NULL, NULL, &k));
  ck_assert(!notation_has(k, "mask(") && stage_has(k, TJ_STAGE_COMPUTE, "j_i_lo"));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int64_t i = 0; i < 4; i++) {
    double want = 0, got;
    for (int64_t j = 0; j < 4; j++) want += d[(1 + i) * 6 + 1 + j] * xval(j, 0);
    OK(tj_tensor_get(y, &i, &got));
    ck_assert_msg(got == want, "y(%lld) = %g, want %g", (long long)i, got, want);
  }
  /* sums with no dense operand to hide an entry: a row sum and a total */
  tj_tensor *sc;
  OK(tj_tensor_new("s", TJ_F64, 0, NULL, NULL, &sc));
  OK(tj_compile(cx, "y(i) = V(i,j)", (tj_tensor *[]){y, v}, 2, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  OK(tj_compile(cx, "s = V(i,j)", (tj_tensor *[]){sc, v}, 2, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  double total = 0, got;
  for (int64_t i = 0; i < 4; i++) {
    double want = 0;
    for (int64_t j = 0; j < 4; j++) want += d[(1 + i) * 6 + 1 + j];
    total += want;
    OK(tj_tensor_get(y, &i, &got));
    ck_assert_msg(got == want, "row sum y(%lld) = %g, want %g", (long long)i, got, want);
  }
  OK(tj_tensor_get(sc, NULL, &got));
  ck_assert_msg(got == total, "s = %g, want %g", got, total);
  tj_tensor_free(sc);
  tj_context_free(cx);
  tj_tensor_free(x), tj_tensor_free(y), tj_tensor_free(v), tj_tensor_free(a);
}
END_TEST

START_TEST(refusals) {
  double d[6 * 6] = {0};
  for (int e = 0; e < 36; e += 5) d[e] = 1 + e % 3;
  tj_tensor *a = matrix("A", "dsdd:0/2,1/2,0%2,1%2", 6, 6, d), *v, *x, *y;
  OK(tj_tensor_slice(a, "V", (int64_t[]){1, 0}, (int64_t[]){4, 6}, NULL, &v));
  tj_tensor *w = matrix("W", "dsdd:0/2,1/2,0%2,1%2", 4, 6, d);
  OK(tj_tensor_new("x", TJ_F64, 1, (int64_t[]){5}, NULL, &x));
  OK(tj_tensor_pack(x));
  OK(tj_tensor_new("y", TJ_F64, 1, (int64_t[]){4}, NULL, &y));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  /* a view as output */
  ck_assert_int_eq(tj_compile(cx, "V(i,j) = W(i,j) * 2", (tj_tensor *[]){v, w}, 2, NULL, NULL, &k),
                   TJ_ERR_UNSUPPORTED);
  ck_assert_msg(strstr(tj_last_error(), "output V is a view (a slice of blocked tensor A)"),
                "%s", tj_last_error());
  /* extents that disagree: named in the user's indices */
  ck_assert_int_eq(tj_compile(cx, "y(i) = V(i,j) * x(j)", (tj_tensor *[]){y, v, x}, 3, NULL, NULL, &k),
                   TJ_ERR_SHAPE);
  ck_assert_msg(strstr(tj_last_error(), "index j has extent 6 in V (mode 1) but 5 in x (mode 0)"),
                "%s", tj_last_error());
  /* one dense operand read through two indices the view cuts differently
   * (i from row 1, inside a block; j from column 2, on a block's edge):
   * one blocked copy of x cannot serve both (it read x(i) in j's frame) */
  tj_tensor *q, *x4;
  OK(tj_tensor_slice(a, "Q", (int64_t[]){1, 2}, (int64_t[]){4, 4}, NULL, &q));
  OK(tj_tensor_new("x", TJ_F64, 1, (int64_t[]){4}, NULL, &x4));
  OK(tj_tensor_pack(x4));
  ck_assert_int_eq(tj_compile(cx, "y(i) = Q(i,j) * x(j) * x(i)", (tj_tensor *[]){y, q, x4}, 3,
                              NULL, NULL, &k),
                   TJ_ERR_UNSUPPORTED);
  ck_assert_msg(strstr(tj_last_error(), "x is accessed through blocked indices that the views "
                                        "cut at different offsets or strides within a block"),
                "%s", tj_last_error());
  tj_tensor_free(x4), tj_tensor_free(q);
  /* a view of a view */
  tj_tensor *vv;
  ck_assert_int_eq(tj_tensor_slice(v, "VV", (int64_t[]){0, 0}, (int64_t[]){1, 1}, NULL, &vv),
                   TJ_ERR_UNSUPPORTED);
  ck_assert_msg(strstr(tj_last_error(), "is a view already"), "%s", tj_last_error());
  /* past the extent */
  ck_assert_int_eq(tj_tensor_slice(a, "P", (int64_t[]){5, 0}, (int64_t[]){2, 6}, NULL, &vv),
                   TJ_ERR_SHAPE);
  ck_assert_msg(strstr(tj_last_error(), "reaches past its extent 6"), "%s", tj_last_error());
  tj_context_free(cx);
  tj_tensor_free(x), tj_tensor_free(y), tj_tensor_free(w), tj_tensor_free(v), tj_tensor_free(a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("blocked_slices");
  TCase *tc = tcase_create("blocked_slices");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, parses_and_prints);
  tcase_add_test(tc, view_entries_by_hand);
  tcase_add_loop_test(tc, kernels_over_blocked_views, 0, (int)(sizeof bcases / sizeof bcases[0]));
  tcase_add_loop_test(tc, dense_inputs_read_in_place, 0, (int)(sizeof bcases / sizeof bcases[0]));
  tcase_add_loop_test(tc, structured_views_through_windows, 0, (int)(sizeof ncases / sizeof ncases[0]));
  tcase_add_loop_test(tc, sums_beside_bsr_views, 0, (int)(sizeof bcases / sizeof bcases[0]));
  tcase_add_loop_test(tc, sums_beside_structured_views, 0, (int)(sizeof ncases / sizeof ncases[0]));
  tcase_add_test(tc, entries_outside_the_slice_stay_out);
  tcase_add_test(tc, dynamic_slices_through_a_copy);
  tcase_add_test(tc, structured_copies_cut_inside_blocks);
  tcase_add_test(tc, refusals);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}

/* Narrow index widths (issue 15): posWidth / crdWidth of 8 and 16 bits,
 * stored unsigned (MLIR's spelling `posWidth = 8, crdWidth = 16`).
 * Parsing and printing back; every position and coordinate checked to fit
 * (a tensor whose extent outgrows crdWidth, a pack or wrap whose positions
 * outgrow posWidth: errors, never a wrap-around) at the limits 255 / 256
 * and 65535 / 65536; kernels (SpMV, SpMM, sparse add, COO) over narrow
 * indices above 127 and 32767, where a sign-extending load would go wrong,
 * on both backends, against plain loops; sparse outputs of 8 and 16 bits
 * (their positions checked after the run, SpGEMM's sort in their width). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

static tj_format csr(int pw, int cw) {
  tj_format f;
  OK(tj_format_parse("ds", &f));
  f.pos_width = pw, f.crd_width = cw;
  return f;
}

START_TEST(parses_and_prints) {
  const char *spec = "(i, j) -> (i : dense, j : compressed), posWidth = 8, crdWidth = 16";
  tj_format f;
  OK(tj_format_parse(spec, &f));
  ck_assert_int_eq(f.pos_width, 8);
  ck_assert_int_eq(f.crd_width, 16);
  char buf[256];
  tj_format_print_mlir(&f, buf, sizeof buf);
  ck_assert_str_eq(buf, "(d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 8, crdWidth = 16");
  OK(tj_format_parse("#sparse_tensor.encoding<{ map = (i, j) -> (j : compressed, i : "
                     "compressed), posWidth = 32, crdWidth = 8 }>", &f));
  ck_assert_str_eq(f.levels, "ss");
  ck_assert_int_eq(f.mode_order[0], 1);
  ck_assert_int_eq(f.crd_width, 8);
  ck_assert_int_eq(tj_format_parse("(i) -> (i : compressed), posWidth = 12", &f), TJ_ERR_PARSE);
  ck_assert_msg(strstr(tj_last_error(), "8, 16, 32 or 64"), "%s", tj_last_error());
  ck_assert_int_eq(tj_format_parse("(i) -> (i : compressed), width = 8", &f), TJ_ERR_PARSE);
  ck_assert_msg(strstr(tj_last_error(), "expected 'posWidth = N'"), "%s", tj_last_error());
  ck_assert_int_eq(tj_format_parse("#sparse_tensor.encoding<{ map = (i) -> (i : dense)", &f),
                   TJ_ERR_PARSE);
  ck_assert_msg(strstr(tj_last_error(), "expected '}>'"), "%s", tj_last_error());
}
END_TEST

/* crdWidth w holds coordinates up to 2^w - 1: extent 2^w fits, 2^w + 1
 * does not (refused when the tensor is made, so no insert can wrap). */
START_TEST(coordinates_at_the_limit) {
  static const int widths[2] = {8, 16};
  for (int k = 0; k < 2; k++) {
    int w = widths[k];
    int64_t top = ((int64_t)1 << w) - 1;
    tj_format f = csr(32, w);
    tj_tensor *t;
    ck_assert_int_eq(tj_tensor_new("A", TJ_F64, 2, (int64_t[]){2, top + 2}, &f, &t),
                     TJ_ERR_FORMAT);
    ck_assert_msg(strstr(tj_last_error(), w == 8 ? "coordinates up to 256 do not fit "
                                                   "crdWidth 8 (at most 255)"
                                                 : "coordinates up to 65536 do not fit "
                                                   "crdWidth 16 (at most 65535)"),
                  "%s", tj_last_error());
    OK(tj_tensor_new("A", TJ_F64, 2, (int64_t[]){2, top + 1}, &f, &t));
    OK(tj_tensor_insert(t, (int64_t[]){1, top}, 5));
    OK(tj_tensor_insert(t, (int64_t[]){1, top / 2 + 1}, 6));   /* 128 / 32768: sign bit */
    OK(tj_tensor_pack(t));
    tj_arrays ar;
    OK(tj_tensor_arrays(t, &ar));
    ck_assert_int_eq(tj_tensor_format(t)->crd_width, w);
    if (w == 8) {
      ck_assert_uint_eq(((uint8_t *)ar.crd[1])[0], 128);
      ck_assert_uint_eq(((uint8_t *)ar.crd[1])[1], 255);
    } else {
      ck_assert_uint_eq(((uint16_t *)ar.crd[1])[0], 32768);
      ck_assert_uint_eq(((uint16_t *)ar.crd[1])[1], 65535);
    }
    double v;
    OK(tj_tensor_get(t, (int64_t[]){1, top}, &v));
    ck_assert_double_eq(v, 5);
    int64_t *c, n;
    double *vals;
    OK(tj_tensor_unpack(t, &c, &vals, &n));
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(c[3], top);
    free(c), free(vals);
    tj_tensor_free(t);
  }
}
END_TEST

/* posWidth w holds positions up to 2^w - 1: 2^w - 1 entries fit, 2^w do
 * not (pack and convert refuse, naming the width). */
START_TEST(positions_at_the_limit) {
  static const int widths[2] = {8, 16};
  for (int k = 0; k < 2; k++) {
    int w = widths[k];
    int64_t top = ((int64_t)1 << w) - 1, rows = 512, cols = 256;
    tj_format f = csr(w, 16);
    tj_tensor *t, *wide, *c;
    OK(tj_tensor_new("A", TJ_F64, 2, (int64_t[]){rows, cols}, &f, &t));
    for (int64_t e = 0; e < top; e++) OK(tj_tensor_insert(t, (int64_t[]){e / cols, e % cols}, 1));
    OK(tj_tensor_pack(t));
    tj_arrays ar;
    OK(tj_tensor_arrays(t, &ar));
    int64_t last = w == 8 ? ((uint8_t *)ar.pos[1])[rows] : ((uint16_t *)ar.pos[1])[rows];
    ck_assert_int_eq(last, top);
    OK(tj_tensor_insert(t, (int64_t[]){rows - 1, cols - 1}, 1));
    ck_assert_int_eq(tj_tensor_pack(t), TJ_ERR_FORMAT);
    ck_assert_msg(strstr(tj_last_error(), w == 8 ? "256 positions, more than posWidth 8 "
                                                   "holds (at most 255)"
                                                 : "65536 positions, more than posWidth 16 "
                                                   "holds (at most 65535)"),
                  "%s", tj_last_error());
    tj_tensor_free(t);
    tj_format f32 = csr(32, 32);
    OK(tj_tensor_new("W", TJ_F64, 2, (int64_t[]){rows, cols}, &f32, &wide));
    for (int64_t e = 0; e <= top; e++) OK(tj_tensor_insert(wide, (int64_t[]){e / cols, e % cols}, 1));
    OK(tj_tensor_pack(wide));
    ck_assert_int_eq(tj_tensor_convert(wide, &f, &c), TJ_ERR_FORMAT);
    ck_assert_msg(strstr(tj_last_error(), "more than posWidth"), "%s", tj_last_error());
    tj_tensor_free(wide);
  }
}
END_TEST

START_TEST(wrap_checks_positions) {
  tj_format f = csr(8, 8);
  uint8_t pos[3] = {0, 1, 2}, crd[2] = {200, 255};
  double vals[2] = {3, 4};
  tj_arrays ar = {.dtype = TJ_F64, .order = 2, .dims = (int64_t[]){2, 256}, .fmt = &f};
  ar.pos[1] = pos, ar.pos_len[1] = 3, ar.crd[1] = crd, ar.crd_len[1] = 2;
  ar.vals = vals, ar.vals_len = 2;
  tj_tensor *t;
  OK(tj_tensor_wrap("W", &ar, 0, &t));
  double v;
  OK(tj_tensor_get(t, (int64_t[]){1, 255}, &v));
  ck_assert_double_eq(v, 4);
  tj_tensor_free(t);
  /* 256 entries cannot be counted by 8-bit positions */
  double *many = calloc(256, sizeof *many);
  uint8_t *mc = calloc(256, 1);
  ar.crd[1] = mc, ar.crd_len[1] = 256, ar.vals = many, ar.vals_len = 256;
  ck_assert_int_eq(tj_tensor_wrap("W", &ar, 0, &t), TJ_ERR_FORMAT);
  ck_assert_msg(strstr(tj_last_error(), "256 positions, more than posWidth 8 holds"), "%s",
                tj_last_error());
  free(many), free(mc);
}
END_TEST

/* A rows x cols matrix in format f with entries in the top columns (above
 * the sign bit of the narrow width); dense copy in d. */
static tj_tensor *matrix(const char *name, const tj_format *f, int64_t rows, int64_t cols,
                         unsigned seed, double *d) {
  tj_tensor *t;
  OK(tj_tensor_new(name, TJ_F64, 2, (int64_t[]){rows, cols}, f, &t));
  memset(d, 0, (size_t)(rows * cols) * sizeof *d);
  srand(seed);
  for (int64_t i = 0; i < rows; i++)
    for (int e = 0; e < 3; e++) {
      int64_t j = e == 0 ? cols - 1 : rand() % cols;
      if (d[i * cols + j] != 0) continue;
      d[i * cols + j] = 1 + rand() % 9;
      OK(tj_tensor_insert(t, (int64_t[]){i, j}, d[i * cols + j]));
    }
  OK(tj_tensor_pack(t));
  return t;
}

typedef struct Case {
  const char *spec;
  int pw, cw, backend;
  int64_t rows, cols;
} Case;

static const Case cases[] = {
  {"ds", 8, 8, TJ_BACKEND_LLVM, 60, 256},
  {"ds", 16, 16, TJ_BACKEND_LLVM, 40, 40000},
  {"ds", 16, 8, TJ_BACKEND_C, 50, 256},
  {"ss", 8, 16, TJ_BACKEND_LLVM, 70, 33000},
  {"uq", 16, 16, TJ_BACKEND_LLVM, 30, 65536},
  {"ds:1,0", 16, 8, TJ_BACKEND_LLVM, 256, 60},
};

START_TEST(kernels_read_narrow_indices) {
  const Case *c = &cases[_i];
  int64_t R = c->rows, C = c->cols, K = 3;
  tj_format f;
  OK(tj_format_parse(c->spec, &f));
  f.pos_width = c->pw, f.crd_width = c->cw;
  double *d = malloc((size_t)(R * C) * sizeof *d), *e = malloc((size_t)(R * C) * sizeof *e);
  tj_tensor *a = matrix("A", &f, R, C, 3u + (unsigned)_i, d);
  tj_tensor *b = matrix("S", &f, R, C, 11u + (unsigned)_i, e);
  tj_tensor *x, *y, *bm, *out, *sum;
  OK(tj_tensor_new("x", TJ_F64, 1, &C, NULL, &x));
  OK(tj_tensor_new("y", TJ_F64, 1, &R, NULL, &y));
  OK(tj_tensor_new("B", TJ_F64, 2, (int64_t[]){C, K}, NULL, &bm));
  OK(tj_tensor_new("Y", TJ_F64, 2, (int64_t[]){R, K}, NULL, &out));
  OK(tj_tensor_new("D", TJ_F64, 2, (int64_t[]){R, C}, NULL, &sum));
  for (int64_t j = 0; j < C; j++) {
    OK(tj_tensor_insert(x, &j, (double)(j % 7 + 1)));
    for (int64_t k = 0; k < K; k++) OK(tj_tensor_insert(bm, (int64_t[]){j, k}, (double)((j + k) % 5)));
  }
  OK(tj_tensor_pack(x)), OK(tj_tensor_pack(bm));
  tj_options o = tj_options_default();
  o.backend = c->backend;
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, 3, NULL, &o, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int64_t i = 0; i < R; i++) {
    double want = 0, v;
    for (int64_t j = 0; j < C; j++) want += d[i * C + j] * (double)(j % 7 + 1);
    OK(tj_tensor_get(y, &i, &v));
    ck_assert_msg(v == want, "%s %d/%d: y(%lld) = %g, want %g", c->spec, c->pw, c->cw,
                  (long long)i, v, want);
  }
  OK(tj_compile(cx, "Y(i,k) = A(i,j) * B(j,k)", (tj_tensor *[]){out, a, bm}, 3, NULL, &o, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int64_t i = 0; i < R; i++)
    for (int64_t kk = 0; kk < K; kk++) {
      double want = 0, v;
      for (int64_t j = 0; j < C; j++) want += d[i * C + j] * (double)((j + kk) % 5);
      OK(tj_tensor_get(out, (int64_t[]){i, kk}, &v));
      ck_assert_msg(v == want, "%s: Y(%lld,%lld) = %g, want %g", c->spec, (long long)i,
                    (long long)kk, v, want);
    }
  OK(tj_compile(cx, "D(i,j) = A(i,j) + S(i,j)", (tj_tensor *[]){sum, a, b}, 3, NULL, &o, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  tj_arrays ar;
  OK(tj_tensor_arrays(sum, &ar));
  for (int64_t p = 0; p < R * C; p++)
    ck_assert_msg(((double *)ar.vals)[p] == d[p] + e[p], "%s: D at %lld = %g, want %g",
                  c->spec, (long long)p, ((double *)ar.vals)[p], d[p] + e[p]);
  tj_context_free(cx);
  free(d), free(e);
  tj_tensor *all[] = {a, b, x, y, bm, out, sum};
  for (int t = 0; t < 7; t++) tj_tensor_free(all[t]);
}
END_TEST

/* A 2 x n matrix in format f (widths pw / cw) holding row 0's columns
 * 0 .. m-1, value c + 1 at column c. */
static tj_tensor *row_matrix(const char *name, int pw, int cw, int64_t n, int64_t m) {
  tj_format f = csr(pw, cw);
  tj_tensor *t;
  OK(tj_tensor_new(name, TJ_F64, 2, (int64_t[]){2, n}, &f, &t));
  for (int64_t c = 0; c < m; c++) OK(tj_tensor_insert(t, (int64_t[]){0, c}, (double)(c + 1)));
  OK(tj_tensor_pack(t));
  return t;
}

/* Sparse outputs with 8- and 16-bit indices: 2^w - 1 entries fit (their
 * positions, and coordinates above 127 / 32767, read back unsigned); 2^w
 * entries fail the run with the count, the output emptied. */
START_TEST(narrow_sparse_outputs) {
  static const int widths[2] = {8, 16};
  for (int k = 0; k < 2; k++) {
    int w = widths[k];
    int64_t top = ((int64_t)1 << w) - 1, n = top + 1;
    for (int over = 0; over < 2; over++) {
      tj_tensor *o = row_matrix("O", w, w, n, 0), *a = row_matrix("A", 32, 32, n, top + over);
      tj_context *cx;
      OK(tj_context_new(&cx));
      tj_kernel *kn;
      OK(tj_compile(cx, "O(i,j) = 2 * A(i,j)", (tj_tensor *[]){o, a}, 2, NULL, NULL, &kn));
      tj_status st = tj_kernel_run(kn, TJ_EVALUATE, NULL, 0);
      if (over) {
        ck_assert_int_eq(st, TJ_ERR_FORMAT);
        char want[128];
        snprintf(want, sizeof want, "tensor O: level 1 has %lld positions, more than posWidth "
                 "%d holds (at most %lld)", (long long)n, w, (long long)top);
        ck_assert_msg(strstr(tj_last_error(), want), "%s", tj_last_error());
        ck_assert_int_eq(tj_tensor_nnz(o), 0);
      } else {
        OK(st);
        tj_arrays ar;
        OK(tj_tensor_arrays(o, &ar));
        int64_t p1 = w == 8 ? ((uint8_t *)ar.pos[1])[1] : ((uint16_t *)ar.pos[1])[1];
        int64_t last = w == 8 ? ((uint8_t *)ar.crd[1])[top - 1] : ((uint16_t *)ar.crd[1])[top - 1];
        ck_assert_int_eq(p1, top);
        ck_assert_int_eq(last, top - 1);
        double v;
        OK(tj_tensor_get(o, (int64_t[]){0, top - 1}, &v));
        ck_assert_double_eq(v, 2.0 * (double)top);
        OK(tj_tensor_get(o, (int64_t[]){0, 200}, &v));
        ck_assert_double_eq(v, 402);
      }
      tj_context_free(cx);
      tj_tensor_free(o), tj_tensor_free(a);
    }
  }
}
END_TEST

/* += into an 8-bit output that outgrows posWidth keeps what it held. */
START_TEST(narrow_accumulate_keeps_old) {
  tj_tensor *o = row_matrix("O", 8, 8, 256, 200), *a = row_matrix("A", 32, 32, 256, 0);
  for (int64_t c = 0; c < 100; c++) OK(tj_tensor_insert(a, (int64_t[]){1, c}, 1));
  OK(tj_tensor_pack(a));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *kn;
  OK(tj_compile(cx, "O(i,j) += A(i,j)", (tj_tensor *[]){o, a}, 2, NULL, NULL, &kn));
  ck_assert_int_eq(tj_kernel_run(kn, TJ_EVALUATE, NULL, 0), TJ_ERR_FORMAT);
  ck_assert_msg(strstr(tj_last_error(), "level 1 has 300 positions"), "%s", tj_last_error());
  ck_assert_int_eq(tj_tensor_nnz(o), 200);
  double v;
  OK(tj_tensor_get(o, (int64_t[]){0, 199}, &v));
  ck_assert_double_eq(v, 200);
  tj_context_free(cx);
  tj_tensor_free(o), tj_tensor_free(a);
}
END_TEST

/* A and B packed, and the kernel O(i,j) = A(i,k) * B(k,j) in a new
 * context (*cx, the caller frees it). */
static tj_kernel *spgemm(tj_tensor *o, tj_tensor *a, tj_tensor *b, tj_context **cx) {
  OK(tj_tensor_pack(a));
  OK(tj_tensor_pack(b));
  OK(tj_context_new(cx));
  tj_kernel *kn;
  OK(tj_compile(*cx, "O(i,j) = A(i,k) * B(k,j)", (tj_tensor *[]){o, a, b}, 3, NULL, NULL, &kn));
  return kn;
}

/* SpGEMM into an 8-bit COO output runs through a temporary (COO's
 * singleton level takes no workspace): 255 products fit; 256 fail the
 * run naming O, not the temporary (the temporary has default widths, so
 * the count is refused where O is written), and O is emptied. */
START_TEST(narrow_spgemm_through_temporary) {
  for (int over = 0; over < 2; over++) {
    int64_t n = 255 + over;
    tj_format f32 = csr(32, 32), fo;
    OK(tj_format_parse("uq", &fo));
    fo.pos_width = 8, fo.crd_width = 16;
    tj_tensor *a, *b, *o;
    OK(tj_tensor_new("A", TJ_F64, 2, (int64_t[]){1, n}, &f32, &a));
    OK(tj_tensor_new("B", TJ_F64, 2, (int64_t[]){n, n}, &f32, &b));
    OK(tj_tensor_new("O", TJ_F64, 2, (int64_t[]){1, n}, &fo, &o));
    for (int64_t c = 0; c < n; c++) {   /* A a row of ones, B the identity times 3 */
      OK(tj_tensor_insert(a, (int64_t[]){0, c}, 1));
      OK(tj_tensor_insert(b, (int64_t[]){c, c}, 3));
    }
    tj_context *cx;
    tj_kernel *kn = spgemm(o, a, b, &cx);
    tj_status st = tj_kernel_run(kn, TJ_EVALUATE, NULL, 0);
    if (over) {
      ck_assert_int_eq(st, TJ_ERR_FORMAT);
      ck_assert_msg(strstr(tj_last_error(), "tensor O: level 0 has 256 positions, more than "
                                            "posWidth 8 holds (at most 255)"),
                    "%s", tj_last_error());
      ck_assert_int_eq(tj_tensor_nnz(o), 0);
    } else {
      OK(st);
      ck_assert_int_eq(tj_tensor_nnz(o), 255);
      double v;
      OK(tj_tensor_get(o, (int64_t[]){0, 254}, &v));
      ck_assert_double_eq(v, 3);
    }
    tj_context_free(cx);
    tj_tensor_free(o), tj_tensor_free(a), tj_tensor_free(b);
  }
}
END_TEST

/* SpGEMM into 8- and 16-bit CSR (a workspace, sorted rows), columns above
 * 127 / 32767 and at the extent's end, against plain loops. */
START_TEST(narrow_spgemm) {
  static const int widths[2] = {8, 16};
  for (int k = 0; k < 2; k++) {
    int w = widths[k];
    int64_t n = (int64_t)1 << w;
    tj_format f32 = csr(32, 32), fo = csr(w, w);
    tj_tensor *a, *b, *o;
    OK(tj_tensor_new("A", TJ_F64, 2, (int64_t[]){3, 4}, &f32, &a));
    OK(tj_tensor_new("B", TJ_F64, 2, (int64_t[]){4, n}, &f32, &b));
    OK(tj_tensor_new("O", TJ_F64, 2, (int64_t[]){3, n}, &fo, &o));
    int64_t cols[4][3] = {{n - 1, 5, n / 2 + 3}, {n / 2, n - 2, 0}, {7, n - 1, 130}, {1, 2, 3}};
    double bd[4][3];
    for (int r = 0; r < 4; r++)
      for (int c = 0; c < 3; c++) {
        bd[r][c] = r * 10 + c + 1;
        OK(tj_tensor_insert(b, (int64_t[]){r, cols[r][c]}, bd[r][c]));
      }
    double ad[3][4] = {{1, 0, 2, 0}, {0, 3, 0, 0}, {1, 1, 1, 1}};
    for (int r = 0; r < 3; r++)
      for (int c = 0; c < 4; c++)
        if (ad[r][c] != 0) OK(tj_tensor_insert(a, (int64_t[]){r, c}, ad[r][c]));
    tj_context *cx;
    tj_kernel *kn = spgemm(o, a, b, &cx);
    OK(tj_kernel_run(kn, TJ_EVALUATE, NULL, 0));
    int64_t *co, nnz;
    double *vo;
    OK(tj_tensor_unpack(o, &co, &vo, &nnz));
    int64_t expect_nnz = 0;
    for (int r = 0; r < 3; r++) {
      double row[12] = {0};   /* up to 4 x 3 columns a row */
      int64_t rc[12];
      int nr = 0;
      for (int q = 0; q < 4; q++)
        for (int c = 0; c < 3 && ad[r][q] != 0; c++) {
          int s = 0;
          while (s < nr && rc[s] != cols[q][c]) s++;
          if (s == nr) rc[nr++] = cols[q][c];
          row[s] += ad[r][q] * bd[q][c];
        }
      expect_nnz += nr;
      for (int s = 0; s < nr; s++) {
        double v;
        OK(tj_tensor_get(o, (int64_t[]){r, rc[s]}, &v));
        ck_assert_msg(v == row[s], "w %d: O(%d,%lld) = %g, want %g", w, r, (long long)rc[s], v,
                      row[s]);
      }
    }
    ck_assert_int_eq(nnz, expect_nnz);
    for (int64_t e = 1; e < nnz; e++)   /* rows in order, columns ascending */
      ck_assert(co[2 * (e - 1)] < co[2 * e] ||
                (co[2 * (e - 1)] == co[2 * e] && co[2 * e - 1] < co[2 * e + 1]));
    free(co), free(vo);
    tj_context_free(cx);
    tj_tensor_free(o), tj_tensor_free(a), tj_tensor_free(b);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("widths");
  TCase *tc = tcase_create("widths");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, parses_and_prints);
  tcase_add_test(tc, coordinates_at_the_limit);
  tcase_add_test(tc, positions_at_the_limit);
  tcase_add_test(tc, wrap_checks_positions);
  tcase_add_loop_test(tc, kernels_read_narrow_indices, 0, (int)(sizeof cases / sizeof cases[0]));
  tcase_add_test(tc, narrow_sparse_outputs);
  tcase_add_test(tc, narrow_accumulate_keeps_old);
  tcase_add_test(tc, narrow_spgemm);
  tcase_add_test(tc, narrow_spgemm_through_temporary);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}

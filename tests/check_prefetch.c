/* Software prefetch of rows at sparse coordinates (lower/prefetch.c): the
 * pass fires on SpMM's loop over a row's entries inside the vector loop
 * over j, in a copy taken when B holds 16 MB or more; TJ_PREFETCH turns it
 * off or sets the distance, and keys the cache; kernels with it (the JIT
 * and the C backend, B big and small) give the values of a hand loop.
 * SpGEMM's loop over B's row prefetches the rows of C it reaches; BSR
 * SpMM's loop over a block row's blocks the rows of B each block reads.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"
#include "util/golden.h"

#define OK(x) ck_assert_msg((x) == TJ_OK, "%s", tj_last_error())

enum { COLS = 64, ROWS = 300, PER_ROW = 16 };

typedef struct Spmm {
  int64_t n;                    /* B's rows (A's columns) */
  int32_t pos[ROWS + 1], *crd;
  double *av, *b, *c, *want;
  tj_tensor *ops[3];            /* C, A, B over the arrays above */
} Spmm;

static uint64_t rnd(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 17;
}

static int cmp_i32(const void *x, const void *y) {
  int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
  return (a > b) - (a < b);
}

/* A: ROWS x n CSR with PER_ROW distinct columns a row (the last row's
 * columns near n, so prefetches clamp at the array's end); B: n x COLS;
 * want = A B by a plain loop. */
static void spmm_new(Spmm *m, int64_t n) {
  uint64_t s = 7;
  m->n = n;
  m->crd = malloc(sizeof *m->crd * ROWS * PER_ROW);
  m->av = malloc(sizeof *m->av * ROWS * PER_ROW);
  m->b = malloc(sizeof *m->b * (size_t)(n * COLS));
  m->c = calloc(ROWS * COLS, sizeof *m->c);
  m->want = calloc(ROWS * COLS, sizeof *m->want);
  ck_assert(m->crd && m->av && m->b && m->c && m->want);
  for (int64_t q = 0; q < n * COLS; q++) m->b[q] = (double)(rnd(&s) % 2001) / 1000 - 1;
  int32_t nnz = 0;
  m->pos[0] = 0;
  for (int i = 0; i < ROWS; i++) {
    int32_t *row = m->crd + nnz;
    int k = 0;
    while (k < PER_ROW) {
      int32_t c = (int32_t)(i == ROWS - 1 ? n - 1 - (int64_t)(rnd(&s) % 40) : (int64_t)(rnd(&s) % (uint64_t)n));
      bool seen = false;
      for (int q = 0; q < k; q++) seen |= row[q] == c;
      if (!seen) row[k++] = c;
    }
    qsort(row, PER_ROW, sizeof *row, cmp_i32);
    for (int q = 0; q < PER_ROW; q++) m->av[nnz + q] = (double)(rnd(&s) % 1001) / 500 - 1;
    nnz += PER_ROW;
    m->pos[i + 1] = nnz;
  }
  for (int i = 0; i < ROWS; i++)
    for (int32_t p = m->pos[i]; p < m->pos[i + 1]; p++)
      for (int j = 0; j < COLS; j++)
        m->want[i * COLS + j] += m->av[p] * m->b[(int64_t)m->crd[p] * COLS + j];
  static const int64_t dc[2] = {ROWS, COLS};
  int64_t da[2] = {ROWS, n}, db[2] = {n, COLS};
  tj_format csr;
  OK(tj_format_parse("ds", &csr));
  tj_arrays a = {.dtype = TJ_F64, .order = 2, .dims = da, .fmt = &csr};
  a.pos[1] = m->pos, a.pos_len[1] = ROWS + 1;
  a.crd[1] = m->crd, a.crd_len[1] = nnz;
  a.vals = m->av, a.vals_len = nnz;
  tj_arrays b = {.dtype = TJ_F64, .order = 2, .dims = db, .vals = m->b, .vals_len = n * COLS};
  tj_arrays c = {.dtype = TJ_F64, .order = 2, .dims = dc, .vals = m->c, .vals_len = ROWS * COLS};
  OK(tj_tensor_wrap("C", &c, 0, &m->ops[0]));
  OK(tj_tensor_wrap("A", &a, 0, &m->ops[1]));
  OK(tj_tensor_wrap("B", &b, 0, &m->ops[2]));
}

static void spmm_free(Spmm *m) {
  for (int t = 0; t < 3; t++) tj_tensor_free(m->ops[t]);
  free(m->crd), free(m->av), free(m->b), free(m->c), free(m->want);
}

static tj_kernel *compile(tj_context *cx, Spmm *m, int backend) {
  tj_options o = tj_options_default();
  o.backend = backend;
  tj_kernel *k;
  OK(tj_compile(cx, "C(i,j) = A(i,k) * B(k,j)", m->ops, 3, NULL, &o, &k));
  return k;
}

/* The evaluate kernel's loop IR after pass `pass` (malloc'd). */
static char *after(tj_kernel *k, const char *pass) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  OK(tj_kernel_print_after(k, pass, f));
  fclose(f);
  return text;
}

static void check_values(tj_kernel *k, Spmm *m, const char *what) {
  memset(m->c, 0xff, sizeof *m->c * ROWS * COLS);   /* NaNs: every value written */
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int q = 0; q < ROWS * COLS; q++)
    ck_assert_msg(fabs(m->c[q] - m->want[q]) <= 1e-12 * (1 + fabs(m->want[q])),
                  "%s: C[%d][%d] = %.17g, want %.17g", what, q / COLS, q % COLS, m->c[q],
                  m->want[q]);
}

/* B of 32768 x 64 doubles is 16 MB: the prefetching copy of each vector
 * loop runs (the 32- and 8-lane tiers; the scalar remainder has none). */
START_TEST(spmm_prefetches_rows_of_a_big_b) {
  unsetenv("TJ_PREFETCH");
  Spmm m;
  spmm_new(&m, 32768);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = compile(cx, &m, TJ_BACKEND_LLVM);
  char *before = after(k, "peel"), *text = after(k, "prefetch");
  ck_assert_int_eq(count(before, "__builtin_prefetch"), 0);
  ck_assert_msg(count(text, "if (B->vals_len >= 2097152) {") == 2, "%s", text);
  ck_assert_msg(count(text, "__builtin_prefetch(&B_vals[pf_pB_") == 2, "%s", text);
  ck_assert_msg(count(text, "pA1_1 + 8 < A->levels[1].crd_len - 1") == 2, "%s", text);
  free(before), free(text);
  check_values(k, &m, "prefetch 8");
  /* TJ_PREFETCH is in the cache key: 0 compiles a kernel without it, 3
   * one with the distance 3. */
  setenv("TJ_PREFETCH", "0", 1);
  tj_kernel *off = compile(cx, &m, TJ_BACKEND_LLVM);
  text = after(off, "prefetch");
  ck_assert_int_eq(count(text, "__builtin_prefetch"), 0);
  free(text);
  check_values(off, &m, "prefetch 0");
  setenv("TJ_PREFETCH", "3", 1);
  tj_kernel *three = compile(cx, &m, TJ_BACKEND_LLVM);
  text = after(three, "prefetch");
  ck_assert_msg(count(text, "pA1_1 + 3 < A->levels[1].crd_len - 1") == 2, "%s", text);
  free(text);
  check_values(three, &m, "prefetch 3");
  unsetenv("TJ_PREFETCH");
  tj_context_free(cx);
  spmm_free(&m);
}
END_TEST

/* A small B takes the loops without prefetches; the C backend compiles
 * the hint (__builtin_prefetch) and gives the same values. */
START_TEST(spmm_small_b_and_c_backend) {
  unsetenv("TJ_PREFETCH");
  for (int big = 0; big < 2; big++) {
    Spmm m;
    spmm_new(&m, big ? 32768 : 500);
    tj_context *cx;
    OK(tj_context_new(&cx));
    check_values(compile(cx, &m, TJ_BACKEND_LLVM), &m, big ? "jit, big B" : "jit, small B");
    if (system("cc --version >/dev/null 2>&1") == 0)
      check_values(compile(cx, &m, TJ_BACKEND_C), &m, big ? "cc, big B" : "cc, small B");
    tj_context_free(cx);
    spmm_free(&m);
  }
}
END_TEST

/* SpMV has no loop inside a vector loop that reads rows: nothing fires. */
START_TEST(spmv_is_left_alone) {
  Spmm m;
  spmm_new(&m, 32768);
  int64_t dx = m.n, dy = ROWS;
  tj_tensor *x, *y;
  OK(tj_tensor_new("x", TJ_F64, 1, &dx, NULL, &x));
  OK(tj_tensor_new("y", TJ_F64, 1, &dy, NULL, &y));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, m.ops[1], x}, 3, NULL, NULL, &k));
  char *text = after(k, "prefetch");
  ck_assert_int_eq(count(text, "__builtin_prefetch"), 0);
  free(text);
  tj_context_free(cx);
  tj_tensor_free(x), tj_tensor_free(y);
  spmm_free(&m);
}
END_TEST

/* BSR 4x4 SpMM, C(i,j) = A(i,k) * B(k,j), B 2048 x 64 doubles (1 MB):
 * block rows run their 4 rows whole (4 accumulators of 32 lanes) and
 * prefetch the 4 rows of B two blocks ahead (the block loop's j_i replaced
 * by 0..3); below AVX-512, short block rows (3 blocks here, 20 in the
 * others) run as two passes of 2 rows (each B row feeding 2 products) and
 * take no hints: the same count either way. Values against a
 * plain loop, JIT and C backend, with and without the hints, and with a
 * B of 500 rows (256 KB), whose run takes the copy without them. */
START_TEST(bsr_spmm_prefetches_block_rows) {
  unsetenv("TJ_PREFETCH");
  enum { NB = 512, LONG = 20, SHORT = 3 };
  for (int big = 0; big < 2; big++) {
    int64_t nbc = big ? NB : 125, n = NB * 4, m = nbc * 4;
    uint64_t s = 11;
    int32_t *pos = malloc(sizeof *pos * (n + 1));
    int32_t *crd = malloc(sizeof *crd * n * LONG * 4);
    double *av = malloc(sizeof *av * n * LONG * 4);
    double *b = malloc(sizeof *b * (size_t)(m * COLS));
    double *c = malloc(sizeof *c * (size_t)(n * COLS));
    double *want = calloc((size_t)(n * COLS), sizeof *want);
    ck_assert(pos && crd && av && b && c && want);
    for (int64_t q = 0; q < m * COLS; q++) b[q] = (double)(rnd(&s) % 2001) / 1000 - 1;
    int32_t nnz = 0, cols[LONG];
    pos[0] = 0;
    for (int ib = 0; ib < NB; ib++) {
      int per = ib % 2 ? SHORT : LONG, k = 0;
      while (k < per) {   /* distinct block columns, the last block row's at the end */
        int32_t cb = (int32_t)(ib == NB - 2 ? nbc - 1 - k : (int64_t)(rnd(&s) % (uint64_t)nbc));
        bool seen = false;
        for (int q = 0; q < k; q++) seen |= cols[q] == cb;
        if (!seen) cols[k++] = cb;
      }
      qsort(cols, (size_t)per, sizeof *cols, cmp_i32);
      for (int ii = 0; ii < 4; ii++) {
        for (int q = 0; q < per; q++)
          for (int jj = 0; jj < 4; jj++, nnz++)
            crd[nnz] = cols[q] * 4 + jj, av[nnz] = (double)(rnd(&s) % 1001) / 500 - 1;
        pos[ib * 4 + ii + 1] = nnz;
      }
    }
    for (int64_t i = 0; i < n; i++)
      for (int32_t p = pos[i]; p < pos[i + 1]; p++)
        for (int j = 0; j < COLS; j++) want[i * COLS + j] += av[p] * b[(int64_t)crd[p] * COLS + j];
    tj_format csr, bsr;
    OK(tj_format_parse("ds", &csr));
    OK(tj_format_parse("dsdd:0/4,1/4,0%4,1%4", &bsr));
    int64_t da[2] = {n, m}, db[2] = {m, COLS}, dc[2] = {n, COLS};
    tj_arrays a = {.dtype = TJ_F64, .order = 2, .dims = da, .fmt = &csr};
    a.pos[1] = pos, a.pos_len[1] = n + 1;
    a.crd[1] = crd, a.crd_len[1] = nnz;
    a.vals = av, a.vals_len = nnz;
    tj_arrays ba = {.dtype = TJ_F64, .order = 2, .dims = db, .vals = b, .vals_len = m * COLS};
    tj_arrays ca = {.dtype = TJ_F64, .order = 2, .dims = dc, .vals = c, .vals_len = n * COLS};
    tj_tensor *A, *Ab, *B, *C;
    OK(tj_tensor_wrap("A", &a, 0, &A));
    OK(tj_tensor_convert(A, &bsr, &Ab));
    OK(tj_tensor_wrap("B", &ba, 0, &B));
    OK(tj_tensor_wrap("C", &ca, 0, &C));
    tj_context *cx;
    OK(tj_context_new(&cx));
    for (int off = 0; off < 2; off++) {
      if (off) setenv("TJ_PREFETCH", "0", 1);
      for (int backend = 0; backend < 2; backend++) {
        if (backend && system("cc --version >/dev/null 2>&1") != 0) continue;
        tj_options o = tj_options_default();
        o.backend = backend ? TJ_BACKEND_C : TJ_BACKEND_LLVM;
        tj_kernel *k;
        OK(tj_compile(cx, "C(i,j) = A(i,k) * B(k,j)", (tj_tensor *[]){C, Ab, B}, 3, NULL, &o, &k));
        char *text = after(k, "prefetch");
        int hints = off ? 0 : 4;   /* the 32- and 8-lane tiers of the long form */
        ck_assert_msg(count(text, "__builtin_prefetch(&B_vals[pf_pB_") == 2 * hints, "%s", text);
        if (hints) {
          ck_assert_msg(count(text, "if (B->vals_len >= 131072) {") == 2, "%s", text);
          ck_assert_msg(count(text, "pA1_1 + 2 < A->levels[1].crd_len - 1") == 2, "%s", text);
          for (int r = 0; r < 4; r++) {
            char row[32];
            snprintf(row, sizeof row, " * 4 + %d) * B_dim2 + j", r);
            ck_assert_msg(count(text, row) >= 2, "%s: %s", row, text);
          }
        }
        free(text);
        memset(c, 0xff, sizeof *c * (size_t)(n * COLS));
        OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
        for (int64_t q = 0; q < n * COLS; q++)
          ck_assert_msg(fabs(c[q] - want[q]) <= 1e-12 * (1 + fabs(want[q])),
                        "big %d off %d backend %d: C[%lld][%lld] = %.17g, want %.17g", big, off,
                        backend, (long long)(q / COLS), (long long)(q % COLS), c[q], want[q]);
      }
      unsetenv("TJ_PREFETCH");
    }
    tj_context_free(cx);
    tj_tensor_free(A), tj_tensor_free(Ab), tj_tensor_free(B), tj_tensor_free(C);
    free(pos), free(crd), free(av), free(b), free(c), free(want);
  }
}
END_TEST

/* SpGEMM A = B * C (CSR): the loop over B's row prefetches the first
 * lines of C's row at B's coordinate 4 entries ahead (its crd and values,
 * through C's pos), running on into B's next rows and clamped at B's last
 * entry; TJ_PREFETCH=0 leaves it out. The row's scatter comes twice (with
 * the list for rows of few products, without it for long ones), each with
 * its hints; the loop counting the products has none. Values and pattern
 * against a dense triple loop, JIT and C backend, with and without the
 * hints. */
START_TEST(spgemm_prefetches_rows_of_c) {
  enum { R = 40, K = 50, N = 60 };
  static double b[R * K], c[K * N], want[R * N];
  uint64_t s = 3;
  memset(b, 0, sizeof b), memset(c, 0, sizeof c), memset(want, 0, sizeof want);
  for (int q = 0; q < R * K; q++) b[q] = rnd(&s) % 7 == 0 ? (double)(rnd(&s) % 9) - 4 : 0;
  for (int q = 0; q < K * N; q++) c[q] = rnd(&s) % 5 == 0 ? (double)(rnd(&s) % 9) - 4 : 0;
  for (int k = K - 3; k < K; k++) b[(R - 1) * K + k] = 1;   /* the last entries of B */
  for (int i = 0; i < R; i++)
    for (int k = 0; k < K; k++)
      for (int j = 0; j < N; j++) want[i * N + j] += b[i * K + k] * c[k * N + j];
  int64_t da[2] = {R, N}, db[2] = {R, K}, dc[2] = {K, N};
  tj_format csr;
  OK(tj_format_parse("ds", &csr));
  tj_tensor *ops[3];
  OK(tj_tensor_new("A", TJ_F64, 2, da, &csr, &ops[0]));
  OK(tj_tensor_new("B", TJ_F64, 2, db, &csr, &ops[1]));
  OK(tj_tensor_new("C", TJ_F64, 2, dc, &csr, &ops[2]));
  for (int q = 0; q < R * K; q++)
    if (b[q] != 0) OK(tj_tensor_insert(ops[1], (int64_t[]){q / K, q % K}, b[q]));
  for (int q = 0; q < K * N; q++)
    if (c[q] != 0) OK(tj_tensor_insert(ops[2], (int64_t[]){q / N, q % N}, c[q]));
  for (int t = 0; t < 3; t++) OK(tj_tensor_pack(ops[t]));
  for (int v = 0; v < 3; v++) {   /* hints (JIT), hints (C backend), TJ_PREFETCH=0 */
    if (v == 2) setenv("TJ_PREFETCH", "0", 1);
    else unsetenv("TJ_PREFETCH");
    if (v == 1 && system("cc --version >/dev/null 2>&1") != 0) continue;
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_options o = tj_options_default();
    o.backend = v == 1 ? TJ_BACKEND_C : TJ_BACKEND_LLVM;
    o.nthreads = 1;
    tj_kernel *k;
    OK(tj_compile(cx, "A(i,j) = B(i,k) * C(k,j)", ops, 3, NULL, &o, &k));
    char *text = after(k, "prefetch");
    int hints = v == 2 ? 0 : 2;
    ck_assert_msg(count(text, "__builtin_prefetch(&C1_crd[pf_pC1_") == hints, "%s", text);
    ck_assert_msg(count(text, "__builtin_prefetch(&C_vals[pf_pC1_") == hints, "%s", text);
    ck_assert_msg(count(text, "_1 + 4 < B->levels[1].crd_len - 1") == hints, "%s", text);
    ck_assert_int_eq(count(text, "__builtin_prefetch"), 2 * hints);
    free(text);
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    for (int i = 0; i < R; i++)
      for (int j = 0; j < N; j++) {
        double got = 0;
        OK(tj_tensor_get(ops[0], (int64_t[]){i, j}, &got));
        ck_assert_msg(fabs(got - want[i * N + j]) <= 1e-12 * (1 + fabs(want[i * N + j])),
                      "variant %d: A(%d,%d) = %g, want %g", v, i, j, got, want[i * N + j]);
      }
    tj_context_free(cx);
  }
  unsetenv("TJ_PREFETCH");
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

int main(void) {
  Suite *s = suite_create("prefetch");
  TCase *tc = tcase_create("spmm");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, spmm_prefetches_rows_of_a_big_b);
  tcase_add_test(tc, spmm_small_b_and_c_backend);
  tcase_add_test(tc, spmv_is_left_alone);
  tcase_add_test(tc, spgemm_prefetches_rows_of_c);
  tcase_add_test(tc, bsr_spmm_prefetches_block_rows);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* tjsequence: sequence() against the one-nest form (nosequence()), one
 * process, interleaved, medians of thread CPU time, one thread (issue 14).
 *
 *   gemm+D   A(i,j) = B(i,k) * C(k,j) + D(i,j), all dense, n x n x n:
 *            A = D, then A += B C by GETT (the default) against one nest
 *            with a temp per (i,j)
 *   residual y(i) = b(i) - A(i,j) * x(j), A CSR n x n at 16 nonzeros per
 *            row: y = b, then y += -(A x) against one nest (the default)
 *
 * Each rep runs both kernels (order alternating) on the same operands;
 * results are compared. Prints n, medians (ms) and nosequence / sequence
 * (above 1: the sequence faster).
 * Usage: tjsequence [--reps N] [n ...]   (default n: 64 128 256 512 768 1024)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensorjit.h"

static double cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void die(const char *what) {
  fprintf(stderr, "tjsequence: %s: %s\n", what, tj_last_error());
  exit(1);
}

/* A named n1 x n2 (n2 0: a vector) tensor of format fmt; every entry when
 * per_row is 0, else per_row entries per row at pseudo-random columns. */
static tj_tensor *make(const char *name, const char *fmt, int64_t n1, int64_t n2, int per_row,
                       unsigned seed) {
  tj_format f;
  if (tj_format_parse(fmt, &f) != TJ_OK) die("format");
  int64_t dims[2] = {n1, n2};
  tj_tensor *t;
  if (tj_tensor_new(name, TJ_F64, n2 ? 2 : 1, dims, &f, &t) != TJ_OK) die("tensor");
  for (int64_t i = 0; i < n1; i++)
    for (int64_t q = 0; q < (n2 ? (per_row ? per_row : n2) : 1); q++) {
      seed = seed * 1664525u + 1013904223u;
      int64_t j = per_row ? (int64_t)(seed >> 8) % n2 : q;
      int64_t c[2] = {i, j};
      if (tj_tensor_insert(t, c, (double)((seed >> 12) % 17) / 8 - 1) != TJ_OK) die("insert");
    }
  if (tj_tensor_pack(t) != TJ_OK) die("pack");
  return t;
}

static double max_diff(tj_tensor *x, tj_tensor *y, int64_t n1, int64_t n2) {
  double m = 0;
  for (int64_t i = 0; i < n1; i++)
    for (int64_t j = 0; j < (n2 ? n2 : 1); j++) {
      int64_t c[2] = {i, j};
      double a, b;
      tj_tensor_get(x, c, &a), tj_tensor_get(y, c, &b);
      m = fmax(m, fabs(a - b));
    }
  return m;
}

/* Times expr under "sequence()" and "nosequence()" (each added to sched). */
static void row(tj_context *cx, const char *label, const char *expr, tj_tensor **ops, int nops,
                tj_tensor *out2, int64_t n1, int64_t n2, int reps) {
  tj_options o = tj_options_default();
  o.nthreads = 1;
  tj_kernel *k[2];
  const char *sch[2] = {"nosequence()", "sequence()"};
  tj_tensor *ops2[8];
  memcpy(ops2, ops, sizeof *ops * (size_t)nops);
  ops2[0] = out2;
  for (int v = 0; v < 2; v++)
    if (tj_compile(cx, expr, v ? ops2 : ops, nops, sch[v], &o, &k[v]) != TJ_OK) die(expr);
  double *ms[2] = {malloc(sizeof(double) * (size_t)reps), malloc(sizeof(double) * (size_t)reps)};
  for (int v = 0; v < 2; v++)   /* warm: GETT times its candidates at the first run */
    if (tj_kernel_run(k[v], TJ_EVALUATE, NULL, 0) != TJ_OK) die("run");
  for (int r = 0; r < reps; r++)
    for (int q = 0; q < 2; q++) {
      int v = (r + q) % 2;
      double t0 = cpu_ms();
      if (tj_kernel_run(k[v], TJ_EVALUATE, NULL, 0) != TJ_OK) die("run");
      ms[v][r] = cpu_ms() - t0;
    }
  qsort(ms[0], (size_t)reps, sizeof(double), cmp);
  qsort(ms[1], (size_t)reps, sizeof(double), cmp);
  double a = ms[0][reps / 2], b = ms[1][reps / 2];
  printf("%-9s n=%-5lld nosequence %9.3f ms  sequence %9.3f ms  ratio %5.2fx  (max diff %.1e)\n",
         label, (long long)n1, a, b, a / b, max_diff(ops[0], out2, n1, n2));
  fflush(stdout);
  free(ms[0]), free(ms[1]);
  tj_kernel_free(k[0]), tj_kernel_free(k[1]);
}

int main(int argc, char **argv) {
  int reps = 7;
  int64_t ns[16] = {64, 128, 256, 512, 768, 1024};
  int nn = 6, given = 0;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--reps") && a + 1 < argc) reps = atoi(argv[++a]);
    else if (given < 16) ns[given++] = atoll(argv[a]);
  }
  if (given) nn = given;
  tj_context *cx;
  if (tj_context_new(&cx) != TJ_OK) die("context");
  for (int q = 0; q < nn; q++) {
    int64_t n = ns[q];
    tj_tensor *ops[4] = {make("A", "dd", n, n, 0, 1), make("B", "dd", n, n, 0, 2),
                         make("C", "dd", n, n, 0, 3), make("D", "dd", n, n, 0, 4)};
    tj_tensor *A2 = make("A", "dd", n, n, 0, 1);
    row(cx, "gemm+D", "A(i,j) = B(i,k) * C(k,j) + D(i,j)", ops, 4, A2, n, n, reps);
    for (int t = 0; t < 4; t++) tj_tensor_free(ops[t]);
    tj_tensor_free(A2);
    int64_t m = n * 64;   /* the residual over more rows: 16 per row */
    tj_tensor *r[4] = {make("y", "d", m, 0, 0, 5), make("b", "d", m, 0, 0, 6),
                       make("A", "ds", m, m, 16, 7), make("x", "d", m, 0, 0, 8)};
    tj_tensor *y2 = make("y", "d", m, 0, 0, 5);
    row(cx, "residual", "y(i) = b(i) - A(i,j) * x(j)", r, 4, y2, m, 0, reps);
    for (int t = 0; t < 4; t++) tj_tensor_free(r[t]);
    tj_tensor_free(y2);
  }
  tj_context_free(cx);
  return 0;
}

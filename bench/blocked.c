/* tjblocked: blocked storage against CSR on the same matrix, one process,
 * interleaved, medians (issue 15's bench rows, first step).
 *
 * tensorjit has no BSR format yet (no floordiv/mod level maps); a block
 * sparse matrix is written by hand as the order-4 tensor
 * A4(ib, jb, ii, jj) = A(ib*b + ii, jb*b + jj) in format `dsdd` (dense
 * block rows, compressed block columns, dense b x b blocks: BSR's arrays
 * exactly), with the dense operands reshaped to match (x4(jb, jj), B4(kb, kk, j)),
 * zero-padded when n is not a multiple of b. This measures what the
 * lowering of blocked levels gives (dense inner loops over a block) before
 * the format exists:
 *   spmv   y(i) = A(i,j) * x(j)          vs  y4(ib,ii) = A4(ib,jb,ii,jj) * x4(jb,jj)
 *   spmm   C(i,j) = A(i,k) * B(k,j), 64 columns
 *                                        vs  C4(ib,ii,j) = A4(ib,kb,ii,kk) * B4(kb,kk,j)
 * on bcsstk13 and bcsstk33 (../shared/data) and a synthetic block-structured
 * matrix (32768 rows, 6 dense 8x8 blocks per block row), with b = 4 and 8.
 * Every blocked result is checked against CSR's. Prints medians (ms), the
 * stored values over the nonzeros (fill), and CSR / blocked (above 1:
 * blocked faster). One thread.
 * Usage: tjblocked [--data DIR] [--reps N] [--quick]
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

#define NCOLS 64


/* A square matrix as COO (0-based). */
typedef struct Mat {
  char name[64];
  int64_t n, nnz;
  int64_t *coords; /* coords[2e], coords[2e+1] */
  double *vals;
} Mat;

static uint64_t rng_next(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

static double rng_val(uint64_t *s) { return (double)(rng_next(s) >> 11) / 9007199254740992.0 + 0.5; }

static bool read_mat(Mat *m, const char *path, const char *name) {
  tj_tensor *t;
  if (tj_tensor_read(path, "A", NULL, &t) != TJ_OK) return false;
  snprintf(m->name, sizeof m->name, "%s", name);
  m->n = tj_tensor_dim(t, 0);
  TJ(tj_tensor_unpack(t, &m->coords, &m->vals, &m->nnz));
  tj_tensor_free(t);
  return true;
}

/* nb block rows of 8, per block row `per` distinct block columns, dense. */
static void block_mat(Mat *m, int64_t nb, int per) {
  snprintf(m->name, sizeof m->name, "blocks8-%lld", (long long)nb * 8);
  m->n = nb * 8;
  m->nnz = nb * per * 64;
  m->coords = malloc(sizeof *m->coords * 2 * (size_t)m->nnz);
  m->vals = malloc(sizeof *m->vals * (size_t)m->nnz);
  uint64_t s = 7;
  int64_t e = 0;
  for (int64_t ib = 0; ib < nb; ib++) {
    int64_t cols[64];
    for (int k = 0; k < per; k++) {
      bool fresh;
      do {
        cols[k] = (int64_t)(rng_next(&s) % (uint64_t)nb);
        fresh = true;
        for (int q = 0; q < k; q++) fresh = fresh && cols[q] != cols[k];
      } while (!fresh);
      for (int ii = 0; ii < 8; ii++)
        for (int jj = 0; jj < 8; jj++, e++) {
          m->coords[2 * e] = ib * 8 + ii;
          m->coords[2 * e + 1] = cols[k] * 8 + jj;
          m->vals[e] = rng_val(&s);
        }
    }
  }
}

static tj_tensor *make(const char *name, const char *fmt, int order, const int64_t *dims) {
  tj_format f;
  TJ(tj_format_parse(fmt, &f));
  tj_tensor *t;
  TJ(tj_tensor_new(name, TJ_F64, order, dims, &f, &t));
  return t;
}

/* A dense tensor of the given dims whose row-major values are v. */
static tj_tensor *dense(const char *name, int order, const int64_t *dims, const double *v) {
  char fmt[16] = "";
  for (int m = 0; m < order; m++) strcat(fmt, "d");
  tj_tensor *t = make(name, fmt, order, dims);
  int64_t n = 1, c[4];
  for (int m = 0; m < order; m++) n *= dims[m];
  for (int64_t k = 0; k < n; k++) {
    int64_t r = k;
    for (int m = order - 1; m >= 0; m--) c[m] = r % dims[m], r /= dims[m];
    TJ(tj_tensor_insert(t, c, v[k]));
  }
  TJ(tj_tensor_pack(t));
  return t;
}

static tj_kernel *compile(tj_context *cx, const char *expr, tj_tensor **ops, int n) {
  tj_options o = tj_options_default();
  o.nthreads = 1;
  tj_kernel *k;
  TJ(tj_compile(cx, expr, ops, n, NULL, &o, &k));
  return k;
}

/* The largest relative difference between CSR's output `want` (n rows of
 * w values; w == 1: a vector) and the blocked one's (rows ib, ii of b). */
static double compare(tj_tensor *want, tj_tensor *got, int64_t n, int64_t w, int b) {
  double worst = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < w; j++) {
      double x, y;
      TJ(tj_tensor_get(want, (int64_t[]){i, j}, &x));
      TJ(tj_tensor_get(got, (int64_t[]){i / b, i % b, j}, &y));
      double d = fabs(x - y) / (1 + fabs(x));
      if (d > worst) worst = d;
    }
  return worst;
}

static void run(const Mat *m, int b, int reps) {
  int64_t n = m->n, nb = (n + b - 1) / b, np = nb * b;
  tj_tensor *A = make("A", "ds", 2, (int64_t[]){n, n});
  tj_tensor *A4 = make("A4", "dsdd", 4, (int64_t[]){nb, nb, b, b});
  for (int64_t e = 0; e < m->nnz; e++) {
    int64_t i = m->coords[2 * e], j = m->coords[2 * e + 1];
    TJ(tj_tensor_insert(A, (int64_t[]){i, j}, m->vals[e]));
    TJ(tj_tensor_insert(A4, (int64_t[]){i / b, j / b, i % b, j % b}, m->vals[e]));
  }
  TJ(tj_tensor_pack(A));
  TJ(tj_tensor_pack(A4));
  double fill = (double)tj_tensor_nnz(A4) / (double)tj_tensor_nnz(A);
  double *xv = calloc((size_t)np * NCOLS, sizeof *xv); /* rows past n stay 0 */
  uint64_t s = 3;
  for (int64_t k = 0; k < n; k++) xv[k] = rng_val(&s);
  tj_tensor *x = dense("x", 1, (int64_t[]){n}, xv);
  tj_tensor *x4 = dense("x4", 2, (int64_t[]){nb, b}, xv);
  for (int64_t k = 0; k < n * NCOLS; k++) xv[k] = rng_val(&s);
  tj_tensor *B = dense("B", 2, (int64_t[]){n, NCOLS}, xv);
  tj_tensor *B4 = dense("B4", 3, (int64_t[]){nb, b, NCOLS}, xv);
  tj_tensor *y = make("y", "d", 1, (int64_t[]){n});
  tj_tensor *y4 = make("y4", "dd", 2, (int64_t[]){nb, b});
  tj_tensor *C = make("C", "dd", 2, (int64_t[]){n, NCOLS});
  tj_tensor *C4 = make("C4", "ddd", 3, (int64_t[]){nb, b, NCOLS});
  tj_context *cx;
  TJ(tj_context_new(&cx));
  struct {
    const char *what;
    tj_kernel *csr, *blk;
    tj_tensor *out_csr, *out_blk;
    int64_t w;
  } rows[2] = {
    {"spmv", compile(cx, "y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, A, x}, 3),
     compile(cx, "y4(ib,ii) = A4(ib,jb,ii,jj) * x4(jb,jj)", (tj_tensor *[]){y4, A4, x4}, 3), y, y4, 1},
    {"spmm64", compile(cx, "C(i,j) = A(i,k) * B(k,j)", (tj_tensor *[]){C, A, B}, 3),
     compile(cx, "C4(ib,ii,j) = A4(ib,kb,ii,kk) * B4(kb,kk,j)", (tj_tensor *[]){C4, A4, B4}, 3),
     C, C4, NCOLS},
  };
  for (int r = 0; r < 2; r++) {
    TJ(tj_kernel_run(rows[r].csr, TJ_EVALUATE, NULL, 0));
    TJ(tj_kernel_run(rows[r].blk, TJ_EVALUATE, NULL, 0));
    double err = compare(rows[r].out_csr, rows[r].out_blk, n, rows[r].w, b);
    if (err > 1e-9) {
      fprintf(stderr, "tjblocked: %s %s b=%d: blocked differs from CSR by %g\n", m->name,
              rows[r].what, b, err);
      exit(1);
    }
    double tc[64], tb[64];
    for (int k = 0; k < reps; k++) {
      double t0 = bench_now_ms();
      TJ(tj_kernel_run(rows[r].csr, TJ_EVALUATE, NULL, 0));
      double t1 = bench_now_ms();
      TJ(tj_kernel_run(rows[r].blk, TJ_EVALUATE, NULL, 0));
      double t2 = bench_now_ms();
      tc[k] = t1 - t0, tb[k] = t2 - t1;
    }
    double mc = bench_median(tc, reps), mb = bench_median(tb, reps);
    printf("%-8s %-16s b=%d  nnz %9lld  fill %5.2f   csr %8.3f ms   blocked %8.3f ms   csr/blocked %5.2fx\n",
           rows[r].what, m->name, b, (long long)m->nnz, fill, mc, mb, mc / mb);
    fflush(stdout);
  }
  tj_context_free(cx);
  tj_tensor *all[] = {A, A4, x, x4, B, B4, y, y4, C, C4};
  for (size_t k = 0; k < sizeof all / sizeof *all; k++) tj_tensor_free(all[k]);
  free(xv);
}

int main(int argc, char **argv) {
  const char *data = TJ_BENCH_DATA;
  int reps = 15;
  bool quick = false;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--data") && a + 1 < argc) data = argv[++a];
    else if (!strcmp(argv[a], "--reps") && a + 1 < argc) reps = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--quick")) quick = true;
  }
  if (quick) reps = 3;
  if (reps < 1) reps = 1;
  if (reps > 64) reps = 64;
  Mat mats[3];
  int nm = 0;
  const char *files[] = {"bcsstk13", "bcsstk33"};
  for (int f = 0; f < 2; f++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/matrices/%s.mtx", data, files[f]);
    if (read_mat(&mats[nm], path, files[f])) nm++;
    else printf("SKIP %s (%s)\n", files[f], tj_last_error());
  }
  block_mat(&mats[nm++], quick ? 512 : 4096, 6);
  for (int k = 0; k < nm; k++) {
    run(&mats[k], 4, reps);
    run(&mats[k], 8, reps);
    free(mats[k].coords);
    free(mats[k].vals);
  }
  tj_shutdown();
  return 0;
}

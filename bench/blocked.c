/* tjblocked: BSR against CSR on the same matrix, one process,
 * interleaved, medians (issue 15's bench rows).
 *
 * The matrix is read (or made) as CSR, converted to BSR with
 * tj_tensor_convert into the format "(i,j) -> (i floordiv b : dense,
 * j floordiv b : compressed, i mod b : dense, j mod b : dense)", and the
 * same expressions run over both:
 *   spmv    y(i) = A(i,j) * x(j)
 *   spmm64  C(i,k) = A(i,j) * B(j,k), 64 columns
 * on bcsstk13 and bcsstk33 (../shared/data) and synthetic block-structured
 * matrices (4096 and 32768 rows, 6 dense 8x8 blocks per block row), with
 * b = 4 and 8.
 * Kernels over BSR need block-aligned extents, so every matrix is padded
 * with empty rows and columns to a multiple of b (for CSR too: the same
 * problem). With MKL (libmkl_rt, dlopen'ed) a third row times
 * mkl_sparse_d_create_bsr's handle over tensorjit's own BSR arrays
 * (mv / mm hints and mkl_sparse_optimize untimed). Every result is checked
 * against CSR's. Prints medians (ms), the stored values over the nonzeros
 * (fill), CSR / BSR and MKL-BSR / BSR (above 1: tensorjit's BSR faster).
 * One thread.
 * A last row times 2:4 sparsity (n_out_of_m, "ddn2:0,1/4,1%4": MLIR's
 * `j mod 4 : structured[2, 4]`): an n x n weight matrix pruned to 2 of
 * every 4 along its rows, SpMM with 64 columns over the 2:4 storage against
 * the dense GEMM over the same values (dense / 2:4 above 1: 2:4 faster)
 * and against CSR of the same nonzeros.
 * The views rows (issue 15) time SpMV and SpMM over views of one BSR 4x4
 * tensor (20000 rows in dense 8x8 blocks, 960,000 entries): one cut inside
 * its edge blocks on both dims, read through block windows, against an
 * aligned one of about the same size, a stride-2 one and the whole tensor
 * (no view), interleaved.
 * --only NAME runs only the matrices whose name contains NAME (the 2:4
 * row is named "2:4", the views rows "views").
 * Usage: tjblocked [--data DIR] [--reps N] [--quick] [--only NAME]
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

/* nb block rows of bs (4 or 8), per block row `per` distinct block
 * columns, each block dense: blocks8-N (6 a block row) and blocks4-N (27 a
 * block row, as a 27-point stencil over nodes of 4 unknowns gives). */
static void block_mat(Mat *m, int64_t nb, int per, int bs) {
  snprintf(m->name, sizeof m->name, "blocks%d-%lld", bs, (long long)nb * bs);
  m->n = nb * bs;
  m->nnz = nb * per * bs * bs;
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
      for (int ii = 0; ii < bs; ii++)
        for (int jj = 0; jj < bs; jj++, e++) {
          m->coords[2 * e] = ib * bs + ii;
          m->coords[2 * e + 1] = cols[k] * bs + jj;
          m->vals[e] = rng_val(&s);
        }
    }
  }
}

/* Milliseconds of this thread's CPU time: every timed run is on this
 * thread (tensorjit and MKL with one thread), and the machine is shared. */
static double cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
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

/* The largest relative difference between two arrays of n values. */
static double compare(const double *want, const double *got, int64_t n) {
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs(want[i] - got[i]) / (1 + fabs(want[i]));
    if (d > worst) worst = d;
  }
  return worst;
}

static const double *values(tj_tensor *t) {
  tj_arrays a;
  TJ(tj_tensor_arrays(t, &a));
  return a.vals;
}

#include "mkl_rt.h"

#ifdef TJ_HAVE_MKL
/* MKL (bench/mkl_rt.c) on one thread; prints why when it is absent. */
static bool mkl_load(void) {
  static int loaded;
  if (!loaded) {
    loaded = mkl_rt_load() ? 1 : -1;
    if (loaded > 0) mkl.MKL_Set_Num_Threads(1);
    else printf("%s\n", mkl_rt_status());
  }
  return loaded > 0;
}

/* MKL's BSR handle over Ab's arrays (block rows, row-major blocks); NULL
 * when MKL refuses. */
static sparse_matrix_t mkl_bsr(tj_tensor *Ab, int b, int64_t nb, bool mm) {
  tj_arrays a;
  TJ(tj_tensor_arrays(Ab, &a));
  sparse_matrix_t A = NULL;
  int *pos = a.pos[1];
  if (mkl.mkl_sparse_d_create_bsr(&A, SPARSE_INDEX_BASE_ZERO, SPARSE_LAYOUT_ROW_MAJOR, (int)nb,
                                  (int)nb, b, pos, pos + 1, a.crd[1], a.vals) !=
      SPARSE_STATUS_SUCCESS)
    return NULL;
  struct matrix_descr d = {.type = SPARSE_MATRIX_TYPE_GENERAL};
  if (mm) mkl.mkl_sparse_set_mm_hint(A, SPARSE_OPERATION_NON_TRANSPOSE, d, SPARSE_LAYOUT_ROW_MAJOR,
                                     NCOLS, 1000);
  else mkl.mkl_sparse_set_mv_hint(A, SPARSE_OPERATION_NON_TRANSPOSE, d, 1000);
  mkl.mkl_sparse_optimize(A);
  return A;
}

static bool mkl_run(sparse_matrix_t A, bool mm, const double *in, double *out, int64_t n) {
  struct matrix_descr d = {.type = SPARSE_MATRIX_TYPE_GENERAL};
  if (mm)
    return mkl.mkl_sparse_d_mm(SPARSE_OPERATION_NON_TRANSPOSE, 1.0, A, d, SPARSE_LAYOUT_ROW_MAJOR,
                               in, NCOLS, NCOLS, 0.0, out, NCOLS) == SPARSE_STATUS_SUCCESS;
  (void)n;
  return mkl.mkl_sparse_d_mv(SPARSE_OPERATION_NON_TRANSPOSE, 1.0, A, d, in, 0.0, out) ==
         SPARSE_STATUS_SUCCESS;
}
#endif

static void run(const Mat *m, int b, int reps) {
  int64_t nb = (m->n + b - 1) / b, n = nb * b;   /* padded to a multiple of b */
  tj_tensor *A = make("A", "ds", 2, (int64_t[]){n, n});
  for (int64_t e = 0; e < m->nnz; e++)
    TJ(tj_tensor_insert(A, (int64_t[]){m->coords[2 * e], m->coords[2 * e + 1]}, m->vals[e]));
  TJ(tj_tensor_pack(A));
  char spec[160];
  snprintf(spec, sizeof spec, "(i,j) -> (i floordiv %d : dense, j floordiv %d : compressed, "
           "i mod %d : dense, j mod %d : dense)", b, b, b, b);
  tj_format bsr;
  TJ(tj_format_parse(spec, &bsr));
  tj_tensor *Ab;
  TJ(tj_tensor_convert(A, &bsr, &Ab));
  double fill = (double)tj_tensor_nnz(Ab) / (double)tj_tensor_nnz(A);
  double *xv = calloc((size_t)n * NCOLS, sizeof *xv);
  uint64_t s = 3;
  for (int64_t k = 0; k < n; k++) xv[k] = rng_val(&s);
  tj_tensor *x = dense("x", 1, (int64_t[]){n}, xv);
  for (int64_t k = 0; k < n * NCOLS; k++) xv[k] = rng_val(&s);
  tj_tensor *B = dense("B", 2, (int64_t[]){n, NCOLS}, xv);
  tj_tensor *y = make("y", "d", 1, (int64_t[]){n}), *yb = make("y", "d", 1, (int64_t[]){n});
  tj_tensor *C = make("C", "dd", 2, (int64_t[]){n, NCOLS});
  tj_tensor *Cb = make("C", "dd", 2, (int64_t[]){n, NCOLS});
  double *mo = calloc((size_t)n * NCOLS, sizeof *mo);
  tj_context *cx;
  TJ(tj_context_new(&cx));
  struct {
    const char *what;
    tj_kernel *csr, *blk;
    tj_tensor *out_csr, *out_blk, *in;
    int64_t w;
  } rows[2] = {
    {"spmv", compile(cx, "y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, A, x}, 3),
     compile(cx, "y(i) = A(i,j) * x(j)", (tj_tensor *[]){yb, Ab, x}, 3), y, yb, x, 1},
    {"spmm64", compile(cx, "C(i,k) = A(i,j) * B(j,k)", (tj_tensor *[]){C, A, B}, 3),
     compile(cx, "C(i,k) = A(i,j) * B(j,k)", (tj_tensor *[]){Cb, Ab, B}, 3), C, Cb, B, NCOLS},
  };
  for (int r = 0; r < 2; r++) {
    int64_t len = n * rows[r].w;
    TJ(tj_kernel_run(rows[r].csr, TJ_EVALUATE, NULL, 0));
    TJ(tj_kernel_run(rows[r].blk, TJ_EVALUATE, NULL, 0));
    double err = compare(values(rows[r].out_csr), values(rows[r].out_blk), len);
    if (err > 1e-9) {
      fprintf(stderr, "tjblocked: %s %s b=%d: BSR differs from CSR by %g\n", m->name,
              rows[r].what, b, err);
      exit(1);
    }
    bool with_mkl = false;
#ifdef TJ_HAVE_MKL
    sparse_matrix_t H = mkl_load() ? mkl_bsr(Ab, b, nb, r == 1) : NULL;
    const double *in = values(rows[r].in);
    with_mkl = H && mkl_run(H, r == 1, in, mo, n);
    if (with_mkl && compare(values(rows[r].out_csr), mo, len) > 1e-9) {
      fprintf(stderr, "tjblocked: %s %s b=%d: MKL's BSR differs from CSR\n", m->name,
              rows[r].what, b);
      exit(1);
    }
#endif
    double tc[64], tb[64], tm[64];
    for (int k = 0; k < reps; k++) {
      double t0 = cpu_ms();
      TJ(tj_kernel_run(rows[r].csr, TJ_EVALUATE, NULL, 0));
      double t1 = cpu_ms();
      TJ(tj_kernel_run(rows[r].blk, TJ_EVALUATE, NULL, 0));
      double t2 = cpu_ms();
#ifdef TJ_HAVE_MKL
      if (with_mkl) mkl_run(H, r == 1, in, mo, n);
#endif
      double t3 = cpu_ms();
      tc[k] = t1 - t0, tb[k] = t2 - t1, tm[k] = t3 - t2;
    }
#ifdef TJ_HAVE_MKL
    if (H) mkl.mkl_sparse_destroy(H);
#endif
    double mc = bench_median(tc, reps), mb = bench_median(tb, reps), mm = bench_median(tm, reps);
    printf("%-7s %-14s b=%d nnz %8lld fill %4.2f  csr %8.3f  bsr %8.3f", rows[r].what, m->name, b,
           (long long)m->nnz, fill, mc, mb);
    if (with_mkl) printf("  mkl-bsr %8.3f ms  csr/bsr %5.2fx  mkl/bsr %5.2fx\n", mm, mc / mb, mm / mb);
    else printf(" ms  csr/bsr %5.2fx\n", mc / mb);
    fflush(stdout);
  }
  tj_context_free(cx);
  tj_tensor *all[] = {A, Ab, x, B, y, yb, C, Cb};
  for (size_t k = 0; k < sizeof all / sizeof *all; k++) tj_tensor_free(all[k]);
  free(xv), free(mo);
}

/* 2:4 SpMM against dense GEMM and CSR SpMM on one n x n matrix pruned to
 * 2 of every 4 along its rows (random values, every block full). */
static void run_24(int64_t n, int reps) {
  const char *fmts[3] = {"ddn2:0,1/4,1%4", "dd", "ds"}, *names[3] = {"2:4", "dense", "csr"};
  tj_tensor *A[3], *C[3];
  tj_kernel *k[3];
  for (int f = 0; f < 3; f++) A[f] = make("A", fmts[f], 2, (int64_t[]){n, n});
  uint64_t s = 5;
  for (int64_t i = 0; i < n; i++)
    for (int64_t b = 0; b < n / 4; b++) {
      int64_t j0 = (int64_t)(rng_next(&s) % 4), j1 = (j0 + 1 + (int64_t)(rng_next(&s) % 3)) % 4;
      double v0 = rng_val(&s), v1 = rng_val(&s);
      for (int f = 0; f < 3; f++) {
        TJ(tj_tensor_insert(A[f], (int64_t[]){i, 4 * b + j0}, v0));
        TJ(tj_tensor_insert(A[f], (int64_t[]){i, 4 * b + j1}, v1));
      }
    }
  double *bv = malloc((size_t)(n * NCOLS) * sizeof *bv);
  for (int64_t e = 0; e < n * NCOLS; e++) bv[e] = rng_val(&s);
  tj_tensor *B = dense("B", 2, (int64_t[]){n, NCOLS}, bv);
  tj_context *cx;
  TJ(tj_context_new(&cx));
  for (int f = 0; f < 3; f++) {
    TJ(tj_tensor_pack(A[f]));
    C[f] = make("C", "dd", 2, (int64_t[]){n, NCOLS});
    k[f] = compile(cx, "C(i,k) = A(i,j) * B(j,k)", (tj_tensor *[]){C[f], A[f], B}, 3);
    TJ(tj_kernel_run(k[f], TJ_EVALUATE, NULL, 0));
  }
  for (int f = 1; f < 3; f++) {
    double err = compare(values(C[f]), values(C[0]), n * NCOLS);
    if (err > 1e-9) {
      fprintf(stderr, "tjblocked: 2:4 SpMM differs from %s by %g\n", names[f], err);
      exit(1);
    }
  }
  double t[3][64];
  for (int r = 0; r < reps; r++)
    for (int f = 0; f < 3; f++) {
      double t0 = cpu_ms();
      TJ(tj_kernel_run(k[f], TJ_EVALUATE, NULL, 0));
      t[f][r] = cpu_ms() - t0;
    }
  double m[3];
  for (int f = 0; f < 3; f++) m[f] = bench_median(t[f], reps);
  printf("spmm64  2:4 %lldx%lld     nnz %8lld  2:4 %8.3f  dense %8.3f  csr %8.3f ms  "
         "dense/2:4 %5.2fx  csr/2:4 %5.2fx\n", (long long)n, (long long)n,
         (long long)tj_tensor_nnz(A[2]), m[0], m[1], m[2], m[1] / m[0], m[2] / m[0]);
  fflush(stdout);
  tj_context_free(cx);
  for (int f = 0; f < 3; f++) tj_tensor_free(A[f]), tj_tensor_free(C[f]);
  tj_tensor_free(B);
  free(bv);
}

/* y(i) = V(i,j) * x(j) and C(i,k) = V(i,j) * B(j,k) over views of one BSR
 * tensor A (b = 4) of matrix m, all in one process, interleaved: a view
 * that starts inside a block and ends inside one on each dim (its edge
 * blocks cut: read through block windows) against an aligned view of
 * about the same size (every block whole) and a stride-2 view; results
 * checked against plain loops over m's entries. */
static void run_views(const Mat *m, int reps) {
  const int b = 4;
  int64_t n = (m->n + b - 1) / b * b;
  tj_format bsr;
  TJ(tj_format_parse("dsdd:0/4,1/4,0%4,1%4", &bsr));
  tj_tensor *A;
  TJ(tj_tensor_new("A", TJ_F64, 2, (int64_t[]){n, n}, &bsr, &A));
  for (int64_t e = 0; e < m->nnz; e++)
    TJ(tj_tensor_insert(A, (int64_t[]){m->coords[2 * e], m->coords[2 * e + 1]}, m->vals[e]));
  TJ(tj_tensor_pack(A));
  struct {
    const char *what;
    int64_t off[2], size[2], stride[2];
  } vs[4] = {{"aligned", {0, 0}, {n - 4, n - 4}, {1, 1}},
             {"cut", {1, 3}, {n - 10, n - 5}, {1, 1}},
             {"stride2", {1, 3}, {n / 2 - 2, n / 2 - 2}, {2, 2}},
             {"whole", {0, 0}, {n, n}, {1, 1}}};   /* A itself, no view */
  tj_context *cx;
  TJ(tj_context_new(&cx));
  tj_kernel *k[4][2];
  tj_tensor *own[4][5];
  double *want = malloc(sizeof *want * (size_t)n * NCOLS), *in = malloc(sizeof *in * (size_t)n * NCOLS);
  uint64_t s = 11;
  for (int64_t e = 0; e < n * NCOLS; e++) in[e] = rng_val(&s);
  for (int v = 0; v < 4; v++) {
    tj_tensor *V = NULL, *x, *B, *y, *C;
    if (v < 3) TJ(tj_tensor_slice(A, "V", vs[v].off, vs[v].size, vs[v].stride, &V));
    if (v == 3) {   /* no view */
      TJ(tj_tensor_convert(A, &bsr, &V));
      TJ(tj_tensor_rename(V, "V"));
    }
    int64_t R = vs[v].size[0], K = vs[v].size[1];
    x = dense("x", 1, &K, in);
    B = dense("B", 2, (int64_t[]){K, NCOLS}, in);
    y = make("y", "d", 1, &R);
    C = make("C", "dd", 2, (int64_t[]){R, NCOLS});
    k[v][0] = compile(cx, "y(i) = V(i,j) * x(j)", (tj_tensor *[]){y, V, x}, 3);
    k[v][1] = compile(cx, "C(i,k) = V(i,j) * B(j,k)", (tj_tensor *[]){C, V, B}, 3);
    TJ(tj_kernel_run(k[v][0], TJ_EVALUATE, NULL, 0));
    TJ(tj_kernel_run(k[v][1], TJ_EVALUATE, NULL, 0));
    memset(want, 0, sizeof *want * (size_t)R * NCOLS);
    for (int64_t e = 0; e < m->nnz; e++) {   /* entries inside the view, by hand */
      int64_t i = m->coords[2 * e] - vs[v].off[0], j = m->coords[2 * e + 1] - vs[v].off[1];
      if (i < 0 || j < 0 || i % vs[v].stride[0] || j % vs[v].stride[1]) continue;
      i /= vs[v].stride[0], j /= vs[v].stride[1];
      if (i >= R || j >= K) continue;
      for (int c = 0; c < NCOLS; c++) want[i * NCOLS + c] += m->vals[e] * in[j * NCOLS + c];
    }
    double err = compare(want, values(C), R * NCOLS);
    for (int64_t e = 0; e < R; e++) want[e] = 0;
    for (int64_t e = 0; e < m->nnz; e++) {   /* x(j) is in[j] */
      int64_t i = m->coords[2 * e] - vs[v].off[0], j = m->coords[2 * e + 1] - vs[v].off[1];
      if (i >= 0 && j >= 0 && !(i % vs[v].stride[0]) && !(j % vs[v].stride[1]) &&
          i / vs[v].stride[0] < R && j / vs[v].stride[1] < K)
        want[i / vs[v].stride[0]] += m->vals[e] * in[j / vs[v].stride[1]];
    }
    double err_v = compare(want, values(y), R);
    if (err_v > err) err = err_v;
    if (err > 1e-9) {
      fprintf(stderr, "tjblocked: %s view: SpMV or SpMM differs from plain loops by %g\n", vs[v].what, err);
      exit(1);
    }
    own[v][0] = V, own[v][1] = x, own[v][2] = B, own[v][3] = y, own[v][4] = C;
  }
  for (int r = 0; r < 2; r++) {
    double t[4][64];
    for (int q = 0; q < reps; q++)
      for (int v = 0; v < 4; v++) {
        double t0 = cpu_ms();
        TJ(tj_kernel_run(k[v][r], TJ_EVALUATE, NULL, 0));
        t[v][q] = cpu_ms() - t0;
      }
    double med[4];
    for (int v = 0; v < 4; v++) med[v] = bench_median(t[v], reps);
    printf("%-7s views of %-14s b=4  whole %8.3f  aligned %8.3f  cut %8.3f  stride2 %8.3f ms  "
           "cut/aligned %5.2fx\n", r ? "spmm64" : "spmv", m->name, med[3], med[0], med[1],
           med[2], med[1] / med[0]);
    fflush(stdout);
  }
  tj_context_free(cx);
  for (int v = 0; v < 4; v++)
    for (int q = 0; q < 5; q++) tj_tensor_free(own[v][q]);
  tj_tensor_free(A);
  free(want), free(in);
}

int main(int argc, char **argv) {
  const char *data = TJ_BENCH_DATA;
  int reps = 15;
  bool quick = false;
  const char *only = "";
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--data") && a + 1 < argc) data = argv[++a];
    else if (!strcmp(argv[a], "--reps") && a + 1 < argc) reps = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--quick")) quick = true;
    else if (!strcmp(argv[a], "--only") && a + 1 < argc) only = argv[++a];
  }
  if (quick) reps = 3;
  if (reps < 1) reps = 1;
  if (reps > 64) reps = 64;
  Mat mats[6];
  int nm = 0;
  const char *files[] = {"bcsstk13", "bcsstk33"};
  for (int f = 0; f < 2; f++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/matrices/%s.mtx", data, files[f]);
    if (read_mat(&mats[nm], path, files[f])) nm++;
    else printf("SKIP %s (%s)\n", files[f], tj_last_error());
  }
  if (strstr("2:4", only)) run_24(quick ? 512 : 2048, reps);
  if (strstr("views", only)) {   /* 20000 rows, 960,000 entries */
    Mat vm;
    block_mat(&vm, quick ? 256 : 2500, 6, 8);
    run_views(&vm, reps);
    free(vm.coords), free(vm.vals);
  }
  /* Two sizes: 4096 rows, whose B (2 MB with 64 columns) and A stay in
   * cache, and 32768 rows (B 16 MB, A 12 MB), where both BSR and CSR wait
   * on memory (each reads the same B rows once per block row of 8). */
  block_mat(&mats[nm++], quick ? 64 : 512, 6, 8);
  block_mat(&mats[nm++], quick ? 512 : 4096, 6, 8);
  /* 4x4 blocks, 27 a block row (108 entries a row: a block row's B rows,
   * 54 KB, outgrow L1, so CSR rereads them row by row from L2), 4096 rows
   * (B 2 MB) and 16384 (B 8 MB, A 21 MB). Their b = 8 rows pad 2x. */
  block_mat(&mats[nm++], quick ? 128 : 1024, 27, 4);
  block_mat(&mats[nm++], quick ? 512 : 4096, 27, 4);
  for (int k = 0; k < nm; k++) {
    if (strstr(mats[k].name, only)) {
      run(&mats[k], 4, reps);
      run(&mats[k], 8, reps);
    }
    free(mats[k].coords);
    free(mats[k].vals);
  }
  tj_shutdown();
  return 0;
}

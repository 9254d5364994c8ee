/* tjgett: dense contractions through tensorjit's GETT path against
 * OpenBLAS, interleaved in one process (medians).
 *
 *   tjgett gemm [n ...]    dgemm/sgemm C(i,j) = A(i,k) * B(k,j): GETT at 1
 *                          and 2 threads vs cblas_?gemm (default sizes
 *                          512 1024 2048 3000 4096)
 *   tjgett tccg [gflop]    the 48 TCCG contractions (f64; -f32), each scaled to
 *                          about `gflop` GFLOP (default 1): the model's
 *                          choice, GETT, TTGT with OpenBLAS as its GEMM, LoG,
 *                          and an OpenBLAS GEMM of the same M, N, K
 *                          (and, with MKL, TTGT with MKL's GEMM)
 *   options: -f32, -reps=<n> (default 7), -threads=<1|2|12>
 *
 * On one thread the TCCG rates are per CPU-second of the process (the
 * machine is shared: wall time there measures the other users' load as
 * much as the kernels); on two threads and for GEMM both are printed.
 *
 * OpenBLAS is run with its SkylakeX kernels: unless OPENBLAS_CORETYPE is
 * SkylakeX (or TJGETT_KEEP_CORETYPE is set), tjgett sets it and executes
 * itself again (OpenBLAS reads it once,
 * at load). Each round times every implementation once, in turn, so
 * load from the machine's other users falls on all of them alike; the
 * load average is printed with the results. Results are checked against
 * each other (max relative difference) before timing.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include "mkl_rt.h"
#include "util.h"

void openblas_set_num_threads(int);

static int g_reps = 7, g_f32, g_threads = 12;   /* bit 1: one thread, bit 2: two */
static int g_fails;   /* results that disagree: the exit status */

/* Counts and flags a disagreement beyond the dtype's tolerance. */
static const char *agree(double diff, int f32) {
  if (diff <= (f32 ? 1e-3 : 1e-10)) return "";
  g_fails++;
  return "  FAIL: results disagree";
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}


static void load_avg(void) {
  double l[3] = {0};
  FILE *f = fopen("/proc/loadavg", "r");
  if (f && fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) == 3)
    printf("# load average %.2f %.2f %.2f\n", l[0], l[1], l[2]);
  if (f) fclose(f);
}

static void free_array(void *p, void *user) {
  (void)user;
  free(p);
}

/* A row-major dense tensor of random values in [-0.5, 0.5). */
static tj_tensor *dense(const char *name, tj_dtype dt, int order, const int64_t *dims,
                        unsigned seed) {
  int64_t n = 1;
  for (int m = 0; m < order; m++) n *= dims[m];
  void *vals = malloc((size_t)n * (dt == TJ_F32 ? 4 : 8));
  tj_arrays a = {.dtype = dt, .order = order, .dims = dims, .vals = vals, .vals_len = n};
  tj_tensor *t;
  if (!vals || tj_tensor_adopt(name, &a, TJ_WRAP_TRUSTED, free_array, NULL, &t) != TJ_OK)
    bench_die("tensor");
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    double x = (double)(seed >> 8 & 0xffff) / 65536.0 - 0.5;
    if (dt == TJ_F32) ((float *)vals)[i] = (float)x;
    else ((double *)vals)[i] = x;
  }
  return t;
}

static void *dense_vals(tj_tensor *t) {
  tj_arrays a;
  if (tj_tensor_arrays(t, &a) != TJ_OK) bench_die("arrays");
  return a.vals;
}

/* One implementation under test: run() once per round. */
typedef struct Impl {
  const char *name;
  void (*run)(void *ctx);
  void *ctx;
  double t[64], cpu[64];
} Impl;

static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Rounds of every implementation in turn; medians in seconds into med
 * (wall clock) and, when cpu is not NULL, of the process's CPU time (what
 * the machine's other users do not inflate, for one thread). One that
 * takes over 20 times the fastest in the warm-up (LoG on tiny slices) is
 * timed by its warm-up alone. */
/* Microseconds to wait before each timed run: 2 threads, see main(). */
enum { SETTLE_US = 30000 };
static int g_settle_us;

static void interleave_cpu(Impl *im, int n, double *med, double *cpu) {
  double warm[8], best = INFINITY;
  for (int i = 0; i < n; i++) {
    if (g_settle_us) usleep(g_settle_us);
    double t0 = now_s();
    im[i].run(im[i].ctx);
    warm[i] = now_s() - t0;
    best = fmin(best, warm[i]);
  }
  for (int i = 0; i < n; i++)
    if (warm[i] > 20 * best)
      for (int r = 0; r < g_reps; r++) im[i].t[r] = im[i].cpu[r] = warm[i];
  for (int r = 0; r < g_reps; r++)
    for (int i = 0; i < n; i++) {
      if (warm[i] > 20 * best) continue;
      if (g_settle_us) usleep(g_settle_us);
      double t0 = now_s(), c0 = cpu_s();
      im[i].run(im[i].ctx);
      im[i].t[r] = now_s() - t0;
      im[i].cpu[r] = cpu_s() - c0;
    }
  for (int i = 0; i < n; i++) {
    med[i] = bench_median(im[i].t, g_reps);
    if (cpu) cpu[i] = bench_median(im[i].cpu, g_reps);
  }
}


/* ---- tensorjit kernels ---- */

typedef struct Tj {
  tj_kernel *k;
  int threads;
  tj_gemm_fn ttgt_gemm;   /* registered around the run (TTGT + BLAS) */
} Tj;

static void tj_run(void *p) {
  Tj *t = p;
  tj_set_ttgt_gemm(t->ttgt_gemm);
  if (tj_kernel_run(t->k, TJ_COMPUTE, NULL, 0) != TJ_OK) bench_die("run");
  tj_set_ttgt_gemm(NULL);
}

static tj_kernel *compile(tj_context *cx, const char *expr, tj_tensor **ops, int n,
                          const char *sched, int threads, double *ms) {
  tj_options o = tj_options_default();
  o.nthreads = threads;
  tj_kernel *k;
  double t0 = now_s();
  if (tj_compile(cx, expr, ops, n, sched, &o, &k) != TJ_OK) bench_die(expr);
  if (ms) *ms = (now_s() - t0) * 1e3;
  if (tj_kernel_run(k, TJ_ASSEMBLE, NULL, 0) != TJ_OK) bench_die("assemble");
  return k;
}

/* The GEMM TTGT calls when OpenBLAS is its backend (column-major C = A B^T). */
static void blas_ttgt(int f32, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                      const void *b, int64_t ldb, void *c, int64_t ldc) {
  if (f32)
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)k, 1.0f, a,
                (int)lda, b, (int)ldb, 0.0f, c, (int)ldc);
  else
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)k, 1.0, a,
                (int)lda, b, (int)ldb, 0.0, c, (int)ldc);
}

#ifdef TJ_HAVE_MKL
/* The same with MKL's GEMM (mkl_rt.h). */
static void mkl_ttgt(int f32, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                     const void *b, int64_t ldb, void *c, int64_t ldc) {
  if (f32)
    mkl.cblas_sgemm(TJ_CBLAS_COL_MAJOR, TJ_CBLAS_NO_TRANS, TJ_CBLAS_TRANS, (MKL_INT)m, (MKL_INT)n, (MKL_INT)k,
                    1.0f, a, (MKL_INT)lda, b, (MKL_INT)ldb, 0.0f, c, (MKL_INT)ldc);
  else
    mkl.cblas_dgemm(TJ_CBLAS_COL_MAJOR, TJ_CBLAS_NO_TRANS, TJ_CBLAS_TRANS, (MKL_INT)m, (MKL_INT)n, (MKL_INT)k,
                    1.0, a, (MKL_INT)lda, b, (MKL_INT)ldb, 0.0, c, (MKL_INT)ldc);
}
#endif

/* TTGT's GEMM through MKL when it is loaded, else NULL. */
static tj_gemm_fn mkl_ttgt_gemm(void) {
#ifdef TJ_HAVE_MKL
  if (mkl_rt_load()) return mkl_ttgt;
#endif
  return NULL;
}

/* ---- BLAS GEMM of given sizes (row-major C = A * B) ---- */

typedef struct Blas {
  int64_t m, n, k;
  int f32;
  void *a, *b, *c;
  int mkl;   /* MKL's cblas_?gemm instead of OpenBLAS's */
} Blas;

/* Both libraries on th threads. */
static void blas_threads(int th) {
  g_settle_us = th > 1 ? SETTLE_US : 0;
  openblas_set_num_threads(th);
#ifdef TJ_HAVE_MKL
  if (mkl_rt_load()) mkl.MKL_Set_Num_Threads(th);
#endif
}

static void blas_run(void *p) {
  Blas *b = p;
#ifdef TJ_HAVE_MKL
  if (b->mkl) {
    if (b->f32)
      mkl.cblas_sgemm(TJ_CBLAS_ROW_MAJOR, TJ_CBLAS_NO_TRANS, TJ_CBLAS_NO_TRANS, (MKL_INT)b->m, (MKL_INT)b->n,
                      (MKL_INT)b->k, 1.0f, b->a, (MKL_INT)b->k, b->b, (MKL_INT)b->n, 0.0f, b->c,
                      (MKL_INT)b->n);
    else
      mkl.cblas_dgemm(TJ_CBLAS_ROW_MAJOR, TJ_CBLAS_NO_TRANS, TJ_CBLAS_NO_TRANS, (MKL_INT)b->m, (MKL_INT)b->n,
                      (MKL_INT)b->k, 1.0, b->a, (MKL_INT)b->k, b->b, (MKL_INT)b->n, 0.0, b->c,
                      (MKL_INT)b->n);
    return;
  }
#endif
  if (b->f32)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)b->m, (int)b->n, (int)b->k,
                1.0f, b->a, (int)b->k, b->b, (int)b->n, 0.0f, b->c, (int)b->n);
  else
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)b->m, (int)b->n, (int)b->k,
                1.0, b->a, (int)b->k, b->b, (int)b->n, 0.0, b->c, (int)b->n);
}

static double max_rel_diff(const void *x, const void *y, int64_t n, int f32) {
  double err = 0, scale = 0;
  for (int64_t i = 0; i < n; i++) {
    double a = f32 ? ((const float *)x)[i] : ((const double *)x)[i];
    double b = f32 ? ((const float *)y)[i] : ((const double *)y)[i];
    scale = fmax(scale, fabs(a));
    err = fmax(err, fabs(a - b));
  }
  return err / (scale > 0 ? scale : 1);
}

static void gemm_size(tj_context *cx, int64_t n) {
  tj_dtype dt = g_f32 ? TJ_F32 : TJ_F64;
  int64_t d[2] = {n, n};
  tj_tensor *ops[3] = {dense("C", dt, 2, d, 1), dense("A", dt, 2, d, 31), dense("B", dt, 2, d, 32)};
  Blas bl = {n, n, n, g_f32, dense_vals(ops[1]), dense_vals(ops[2]),
             calloc((size_t)(n * n), g_f32 ? 4 : 8), 0};
  Blas mk = bl;
  mk.mkl = 1;
  mk.c = calloc((size_t)(n * n), g_f32 ? 4 : 8);
  int with_mkl = mkl_rt_load();
  for (int th = 1; th <= 2; th++) {
    if (!(g_threads & (th == 1 ? 1 : 2))) continue;
    double cms;
    Tj tj = {compile(cx, "C(i,j) = A(i,k) * B(k,j)", ops, 3, "method(gett)", th, &cms), th, NULL};
    blas_threads(th);
    Impl im[3] = {{"tensorjit-GETT", tj_run, &tj, {0}, {0}}, {"OpenBLAS", blas_run, &bl, {0}, {0}},
                  {"MKL", blas_run, &mk, {0}, {0}}};
    double med[3], cpu[3];
    tj_run(&tj);
    blas_run(&bl);
    double diff = max_rel_diff(dense_vals(ops[0]), bl.c, n * n, g_f32);
    if (with_mkl) {
      blas_run(&mk);
      diff = fmax(diff, max_rel_diff(dense_vals(ops[0]), mk.c, n * n, g_f32));
    }
    interleave_cpu(im, with_mkl ? 3 : 2, med, cpu);
    double gf = 2.0 * (double)n * (double)n * (double)n * 1e-9;
    char mcol[96] = "";
    if (with_mkl)
      snprintf(mcol, sizeof mcol, "  MKL %7.1f GFLOP/s (%8.2f ms) ratio %.3f", gf / med[2],
               med[2] * 1e3, med[2] / med[0]);
    printf("%sgemm n=%-5lld threads=%d  GETT %7.1f GFLOP/s (%8.2f ms)  OpenBLAS %7.1f GFLOP/s "
           "(%8.2f ms)  ratio %.3f%s  | per CPU-second: GETT %6.1f OpenBLAS %6.1f ratio %.3f  "
           "diff %.1e  compile %.1f ms%s\n",
           g_f32 ? "s" : "d", (long long)n, th, gf / med[0], med[0] * 1e3, gf / med[1],
           med[1] * 1e3, med[1] / med[0], mcol, gf / cpu[0], gf / cpu[1], cpu[1] / cpu[0], diff,
           cms, agree(diff, g_f32));
    fflush(stdout);
  }
  free(bl.c);
  free(mk.c);
  for (int i = 0; i < 3; i++) tj_tensor_free(ops[i]);
}

/* ---- TCCG ---- */

/* Index letters of the access in s ("C(b,a)" -> "ba"). */
static int letters(const char *s, char *out) {
  int n = 0;
  for (const char *p = strchr(s, '(') + 1; *p && *p != ')'; p++)
    if (*p >= 'a' && *p <= 'z') out[n++] = *p;
  out[n] = 0;
  return n;
}

/* The method -print-gett names for kernel k (the model's, untimed). */
static void method_of(tj_kernel *k, char out[32]) {
  snprintf(out, 32, "?");
  FILE *pf = tmpfile();
  if (!pf) return;
  tj_kernel_print(k, TJ_STAGE_GETT, pf);
  rewind(pf);
  char line[256];
  while (fgets(line, sizeof line, pf))
    if (sscanf(line, "  method: %31s", out) == 1) break;
  fclose(pf);
}

static void tccg_line(tj_context *cx, char *fld[5], double target) {
  int64_t ext[26] = {0};
  char *save = NULL, sizes[256];
  snprintf(sizes, sizeof sizes, "%s", fld[2]);
  for (char *t = strtok_r(sizes, ";", &save); t; t = strtok_r(NULL, ";", &save))
    ext[t[0] - 'a'] = atoll(t + 2);
  const char *expr = fld[4], *rhs = strchr(expr, '=');
  char ci[16], ai[16], bi[16];
  int nc = letters(expr, ci), na = letters(rhs, ai), nb = letters(strchr(rhs, '*'), bi);
  int nidx = 0;
  for (int l = 0; l < 26; l++) nidx += ext[l] > 0;
  double scale = pow(target / atof(fld[3]), 1.0 / nidx);
  for (int l = 0; l < 26; l++)
    if (ext[l]) ext[l] = llround(fmax(2.0, (double)ext[l] * scale));
  double M = 1, N = 1, K = 1;
  for (int q = 0; q < na; q++)
    if (strchr(ci, ai[q])) M *= (double)ext[ai[q] - 'a'];
    else K *= (double)ext[ai[q] - 'a'];
  for (int q = 0; q < nb; q++)
    if (strchr(ci, bi[q])) N *= (double)ext[bi[q] - 'a'];
  int64_t dc[8], da[8], db[8];
  for (int q = 0; q < nc; q++) dc[q] = ext[ci[q] - 'a'];
  for (int q = 0; q < na; q++) da[q] = ext[ai[q] - 'a'];
  for (int q = 0; q < nb; q++) db[q] = ext[bi[q] - 'a'];
  tj_dtype dt = g_f32 ? TJ_F32 : TJ_F64;
  size_t esz = g_f32 ? 4 : 8;
  tj_tensor *ops[3] = {dense("C", dt, nc, dc, 1), dense("A", dt, na, da, 51),
                       dense("B", dt, nb, db, 52)};
  Blas bl = {(int64_t)M, (int64_t)N, (int64_t)K, g_f32, malloc((size_t)(M * K) * esz),
             malloc((size_t)(K * N) * esz), calloc((size_t)(M * N), esz), 0};
  memcpy(bl.a, dense_vals(ops[1]), (size_t)(M * K) * esz);
  memcpy(bl.b, dense_vals(ops[2]), (size_t)(K * N) * esz);
  double flops = 2 * M * N * K * 1e-9;
  for (int th = 1; th <= 2; th++) {
    if (!(g_threads & (th == 1 ? 1 : 2))) continue;
    blas_threads(th);
    double cms;
    Tj model = {compile(cx, expr, ops, 3, NULL, th, &cms), th, NULL};
    Tj gett = {compile(cx, expr, ops, 3, "method(gett)", th, NULL), th, NULL};
    Tj ttgt = {compile(cx, expr, ops, 3, "method(ttgt)", th, NULL), th, blas_ttgt};
    Tj lg = {compile(cx, expr, ops, 3, "method(log)", th, NULL), th, NULL};
    Tj ttgt_mkl = {ttgt.k, th, mkl_ttgt_gemm()};   /* the same kernel, MKL's GEMM */
    Tj ttgt_own = {ttgt.k, th, NULL};              /* and the GETT core as its GEMM */
    Tj untimed = {compile(cx, expr, ops, 3, "method(model)", th, NULL), th, NULL};
    bool with_mkl = ttgt_mkl.ttgt_gemm != NULL;
    /* the methods agree */
    size_t bytes = (size_t)(M * N) * esz;
    void *ref = malloc(bytes);
    tj_run(&gett);
    memcpy(ref, dense_vals(ops[0]), bytes);
    double diff = 0;
    Tj *all[6] = {&model, &ttgt, &lg, &untimed, &ttgt_own, &ttgt_mkl};
    double first_s = 0;   /* the model's first run: its candidates timed */
    for (int i = 0; i < 5 + with_mkl; i++) {
      double t0 = now_s();
      tj_run(all[i]);
      if (i == 0) first_s = now_s() - t0;
      diff = fmax(diff, max_rel_diff(ref, dense_vals(ops[0]), (int64_t)(M * N), g_f32));
    }
    free(ref);
    Impl im[8] = {{"model", tj_run, &model, {0}, {0}}, {"gett", tj_run, &gett, {0}, {0}},
                  {"ttgt+blas", tj_run, &ttgt, {0}, {0}}, {"log", tj_run, &lg, {0}, {0}},
                  {"blas-gemm", blas_run, &bl, {0}, {0}}, {"untimed", tj_run, &untimed, {0}, {0}},
                  {"ttgt", tj_run, &ttgt_own, {0}, {0}}, {"ttgt+mkl", tj_run, &ttgt_mkl, {0}, {0}}};
    double med[8], cpu[8];
    interleave_cpu(im, 7 + with_mkl, med, cpu);
    if (th == 1) memcpy(med, cpu, sizeof med);   /* one thread: CPU time (see top) */
    char method[32], umethod[32];
    method_of(model.k, method);
    method_of(untimed.k, umethod);
    char mcol[64] = "", mratio[64] = "";
    if (with_mkl) {
      snprintf(mcol, sizeof mcol, "  ttgt+mkl %6.1f", flops / med[7]);
      snprintf(mratio, sizeof mratio, "  model/ttgt+mkl %.2f", med[7] / med[0]);
    }
    /* the model's choice untimed (method(model)) against the best of the
     * tuned choice, GETT and LoG */
    double best = fmin(med[0], fmin(med[1], med[3]));
    /* flops per byte of the three tensors read or written once */
    double ai = 2 * M * N * K / ((double)esz * (M * K + K * N + M * N));
    printf("%-22s th=%d ai %6.1f model(%-4s) %6.1f  gett %6.1f  ttgt+blas %6.1f  log %6.1f  "
           "blas-gemm %6.1f  untimed(%-4s) %6.1f  ttgt %6.1f%s GFLOP/s  model/ttgt %.2f  "
           "model/gemm %.2f%s  untimed/best %.2f  diff %.0e  compile %.1f ms  first run %.1f ms%s\n",
           fld[1], th, ai, method, flops / med[0], flops / med[1], flops / med[2], flops / med[3],
           flops / med[4], umethod, flops / med[5], flops / med[6], mcol, med[2] / med[0], med[4] / med[0], mratio,
           best / med[5], diff, cms, first_s * 1e3, agree(diff, g_f32));
    fflush(stdout);
  }
  free(bl.a);
  free(bl.b);
  free(bl.c);
  for (int i = 0; i < 3; i++) tj_tensor_free(ops[i]);
}

static void tccg(tj_context *cx, double target, const char *only) {
  char path[512];
  snprintf(path, sizeof path, "%s/tccg/contractions-%s.tsv", TJ_BENCH_DATA,
           g_f32 ? "f32" : "f64");
  FILE *f = fopen(path, "r");
  if (!f) {
    printf("tccg: %s missing, skipped\n", path);
    return;
  }
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    char *fld[5], *save = NULL;
    int nf = 0;
    for (char *t = strtok_r(line, "\t\n", &save); t && nf < 5; t = strtok_r(NULL, "\t\n", &save))
      fld[nf++] = t;
    if (nf == 5 && (!only || strstr(fld[1], only))) tccg_line(cx, fld, target);
  }
  fclose(f);
}

int main(int argc, char **argv) {
  /* On two cores one implementation's idle threads, spinning after its
   * run, slow the next one in the interleave (libomp's 200 ms blocktime
   * halved OpenBLAS's 2-thread dgemm after a GETT run; GETT after OpenBLAS
   * ran 10% slower than after GETT). Idle workers of libomp (ours and
   * MKL's) and of OpenBLAS sleep after about 20 ms here, and 2-thread runs
   * start 30 ms after the one before (SETTLE_US). Spinning for less (0)
   * would cost our own barriers: GETT n = 1024 on 2 threads halved. Set
   * before the re-exec; values given in the environment are kept. */
  setenv("KMP_BLOCKTIME", "20", 0);
  setenv("OPENBLAS_THREAD_TIMEOUT", "26", 0);
  const char *core = getenv("OPENBLAS_CORETYPE");
  if (!getenv("TJGETT_KEEP_CORETYPE") && (!core || strcmp(core, "SkylakeX") != 0)) {
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
    execv("/proc/self/exe", argv);
  }
  const char *mode = argc > 1 ? argv[1] : "gemm";
  int64_t sizes[16];
  int ns = 0;
  double target = 1;
  const char *only = NULL;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "-f32")) g_f32 = 1;
    else if (!strncmp(argv[i], "-reps=", 6)) g_reps = atoi(argv[i] + 6);
    else if (!strncmp(argv[i], "-threads=", 9)) g_threads = atoi(argv[i] + 9) == 1 ? 1 : atoi(argv[i] + 9) == 2 ? 2 : 3;
    else if (!strncmp(argv[i], "-only=", 6)) only = argv[i] + 6;
    else if (ns < 16) sizes[ns++] = atoll(argv[i]), target = atof(argv[i]);
  }
  if (g_reps < 1 || g_reps > 64) g_reps = 7;
  if (g_threads == 12) g_threads = 3;
  tj_context *cx;
  if (tj_context_new(&cx) != TJ_OK) bench_die("context");
  printf("# tjgett %s %s, OPENBLAS_CORETYPE=%s, %d interleaved rounds, medians\n", mode,
         g_f32 ? "f32" : "f64",
         getenv("OPENBLAS_CORETYPE"), g_reps);
  load_avg();
  if (!strcmp(mode, "tccg")) {
    tccg(cx, target, only);
  } else {
    static const int64_t def[] = {512, 1024, 2048, 3000, 4096};
    if (!ns) ns = 5, memcpy(sizes, def, sizeof def);
    for (int i = 0; i < ns; i++) gemm_size(cx, sizes[i]);
  }
  load_avg();
  tj_context_free(cx);
  return g_fails ? 1 : 0;
}

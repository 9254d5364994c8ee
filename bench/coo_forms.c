/* tjcooforms: loop forms of COO SpMV y = A x (A sorted by row, `uq`) side
 * by side on one synthetic matrix, interleaved, thread CPU time:
 *   hand       y[r[q]] += v[q] * x[c[q]] over all entries (tjbench's peer)
 *   tensorjit  the kernel tensorjit compiles for A:uq (a lazily walked run)
 *   lazy       a C model of it: one loop per run, stopping where r changes
 *   scan       each run's end scanned for first, then a scalar loop over it
 *   gather     the scan, then 8-lane AVX-512 gathers with a masked tail (the
 *              sparsifier's vl=8 form; only when built with AVX-512)
 *   segsum     one branch-free loop: t = (r[q] == r[q-1] ? t : 0) + v x;
 *              y[r[q]] = t (no branch at run ends, no reload of y)
 * It exists to choose between them (bench/README.md, "COO SpMV: loop
 * forms"): `tjcooforms ROWS PER_ROW [REPS]`, PER_ROW > 0 that many random
 * columns per row, < 0 a random count in 0..2|PER_ROW| per row.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include "tensorjit.h"

typedef struct Coo {
  int64_t n, nnz;
  int32_t *r, *c;
  double *v, *x, *y;
} Coo;

typedef void (*Form)(const Coo *m);

static double cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static uint64_t g_seed = 12345;
static uint64_t lcg(void) {
  g_seed = g_seed * 6364136223846793005ULL + 1442695040888963407ULL;
  return g_seed >> 17;
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

static int cmp_f64(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Rows of `per` random columns (per < 0: 0..-2*per of them), sorted,
 * duplicates dropped; values and x in [0, 1). */
static Coo make_coo(int64_t n, int per) {
  int most = per < 0 ? -2 * per : per;
  Coo m = {.n = n};
  m.r = malloc(sizeof(int32_t) * (size_t)(n * most + 1));
  m.c = malloc(sizeof(int32_t) * (size_t)(n * most + 1));
  m.v = malloc(sizeof(double) * (size_t)(n * most + 1));
  m.x = malloc(sizeof(double) * (size_t)n);
  m.y = malloc(sizeof(double) * (size_t)n);
  int32_t *row = malloc(sizeof(int32_t) * (size_t)(most + 1));
  for (int64_t i = 0; i < n; i++) {
    int k = per < 0 ? (int)(lcg() % (uint64_t)(most + 1)) : per;
    for (int q = 0; q < k; q++) row[q] = (int32_t)(lcg() % (uint64_t)n);
    qsort(row, (size_t)k, sizeof *row, cmp_i32);
    for (int q = 0; q < k; q++) {
      if (q > 0 && row[q] == row[q - 1]) continue;
      m.r[m.nnz] = (int32_t)i, m.c[m.nnz] = row[q];
      m.v[m.nnz++] = (double)(lcg() % 1000) / 1000;
    }
  }
  for (int64_t i = 0; i < n; i++) m.x[i] = (double)(lcg() % 1000) / 1000;
  free(row);
  return m;
}

static void form_hand(const Coo *m) {
  memset(m->y, 0, sizeof(double) * (size_t)m->n);
  for (int64_t q = 0; q < m->nnz; q++) m->y[m->r[q]] += m->v[q] * m->x[m->c[q]];
}

static void form_lazy(const Coo *m) {
  memset(m->y, 0, sizeof(double) * (size_t)m->n);
  int64_t p = 0, last = m->nnz - 1;
  while (p < m->nnz) {
    int32_t i = m->r[p];
    double t = 0;
    bool go = true;
    while (go) {
      t += m->v[p] * m->x[m->c[p]];
      p++;
      go = p < m->nnz && m->r[p < last ? p : last] == i;
    }
    m->y[i] += t;
  }
}

static int64_t run_end(const Coo *m, int64_t p) {
  int64_t e = p + 1;
  while (e < m->nnz && m->r[e] == m->r[p]) e++;
  return e;
}

static void form_scan(const Coo *m) {
  memset(m->y, 0, sizeof(double) * (size_t)m->n);
  for (int64_t p = 0, e; p < m->nnz; p = e) {
    e = run_end(m, p);
    double t = 0;
    for (int64_t q = p; q < e; q++) t += m->v[q] * m->x[m->c[q]];
    m->y[m->r[p]] += t;
  }
}

#ifdef __AVX512F__
static void form_gather(const Coo *m) {
  memset(m->y, 0, sizeof(double) * (size_t)m->n);
  for (int64_t p = 0, e; p < m->nnz; p = e) {
    e = run_end(m, p);
    __m512d acc = _mm512_setzero_pd();
    int64_t q = p;
    for (; q + 8 <= e; q += 8) {
      __m256i j = _mm256_loadu_si256((const __m256i *)(m->c + q));
      acc = _mm512_fmadd_pd(_mm512_loadu_pd(m->v + q), _mm512_i32gather_pd(j, m->x, 8), acc);
    }
    if (q < e) {
      __mmask8 k = (__mmask8)((1u << (e - q)) - 1);
      __m256i j = _mm256_maskz_loadu_epi32(k, m->c + q);
      __m512d xv = _mm512_mask_i32gather_pd(_mm512_setzero_pd(), k, j, m->x, 8);
      acc = _mm512_fmadd_pd(_mm512_maskz_loadu_pd(k, m->v + q), xv, acc);
    }
    m->y[m->r[p]] += _mm512_reduce_add_pd(acc);
  }
}
#endif

static void form_segsum(const Coo *m) {
  memset(m->y, 0, sizeof(double) * (size_t)m->n);
  double t = 0;
  int32_t prev = -1;
  for (int64_t q = 0; q < m->nnz; q++) {
    int32_t i = m->r[q];
    t = (i == prev ? t : 0.0) + m->v[q] * m->x[m->c[q]];
    m->y[i] = t;
    prev = i;
  }
}

/* tensorjit's kernel for A:uq, over m's arrays in place. */
static tj_kernel *g_kernel;
static void form_tensorjit(const Coo *m) {
  (void)m;
  if (tj_kernel_run(g_kernel, TJ_COMPUTE, NULL, 0) != TJ_OK) {
    fprintf(stderr, "tjcooforms: %s\n", tj_last_error());
    exit(1);
  }
}

static tj_kernel *compile_uq(Coo *m, tj_context *cx) {
  tj_format f;
  tj_tensor *A, *x, *y;
  int32_t pos[2] = {0, (int32_t)m->nnz};
  int64_t dims[2] = {m->n, m->n};
  if (tj_format_parse("uq", &f) != TJ_OK) return NULL;
  tj_arrays a = {.dtype = TJ_F64, .order = 2, .dims = dims, .fmt = &f, .pos = {pos},
                 .pos_len = {2}, .crd = {m->r, m->c}, .crd_len = {m->nnz, m->nnz},
                 .vals = m->v, .vals_len = m->nnz};
  tj_arrays ax = {.dtype = TJ_F64, .order = 1, .dims = &m->n, .vals = m->x, .vals_len = m->n};
  tj_arrays ay = {.dtype = TJ_F64, .order = 1, .dims = &m->n, .vals = m->y, .vals_len = m->n};
  tj_options o = tj_options_default();
  o.nthreads = 1;
  tj_kernel *k = NULL;
  if (tj_tensor_wrap("A", &a, 0, &A) || tj_tensor_wrap("x", &ax, 0, &x) ||
      tj_tensor_wrap("y", &ay, 0, &y))
    return NULL;
  tj_tensor *ops[3] = {y, A, x};
  if (tj_compile(cx, "y(i) = A(i,j) * x(j)", ops, 3, NULL, &o, &k) ||
      tj_kernel_run(k, TJ_EVALUATE, NULL, 0))
    return NULL;
  return k;   /* the tensors stay alive with the process */
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: tjcooforms ROWS PER_ROW [REPS]\n");
    return 2;
  }
  int64_t n = atoll(argv[1]);
  int per = atoi(argv[2]), reps = argc > 3 ? atoi(argv[3]) : 21;
  if (n < 1 || per == 0 || reps < 1 || reps > 1000) return fprintf(stderr, "bad arguments\n"), 2;
  Coo m = make_coo(n, per);
  tj_context *cx;
  if (tj_context_new(&cx) || !(g_kernel = compile_uq(&m, cx)))
    return fprintf(stderr, "tjcooforms: %s\n", tj_last_error()), 1;
  static const char *names[] = {"hand", "tensorjit", "lazy", "scan", "segsum", "gather"};
  Form forms[] = {form_hand, form_tensorjit, form_lazy, form_scan, form_segsum,
#ifdef __AVX512F__
                  form_gather
#else
                  NULL
#endif
  };
  enum { NF = 6 };
  double *want = malloc(sizeof(double) * (size_t)n);
  form_hand(&m);
  memcpy(want, m.y, sizeof(double) * (size_t)n);
  for (int f = 1; f < NF && forms[f]; f++) {   /* every form agrees with the hand loop */
    forms[f](&m);
    for (int64_t i = 0; i < n; i++)
      if (fabs(m.y[i] - want[i]) > 1e-9 * (1 + fabs(want[i])))
        return fprintf(stderr, "tjcooforms: %s: y(%lld) = %.17g, want %.17g\n", names[f],
                       (long long)i, m.y[i], want[i]), 1;
  }
  double *t = malloc(sizeof(double) * NF * (size_t)reps);
  for (int r = 0; r < reps; r++)
    for (int f = 0; f < NF && forms[f]; f++) {
      double t0 = cpu_ms();
      forms[f](&m);
      t[f * reps + r] = cpu_ms() - t0;
    }
  printf("%lld rows, %lld entries; median / min ms of %d (thread CPU)\n", (long long)n,
         (long long)m.nnz, reps);
  for (int f = 0; f < NF && forms[f]; f++) {
    qsort(t + f * reps, (size_t)reps, sizeof *t, cmp_f64);
    printf("  %-10s %8.3f %8.3f\n", names[f], t[f * reps + reps / 2], t[f * reps]);
  }
  tj_context_free(cx);
  free(t), free(want);
  return 0;
}

/* Machine-limit probes: a STREAM-style triad (bandwidth) and chains of
 * independent FMAs (peak flops), each on 1..n threads.
 *
 * The triad arrays are far larger than the last-level cache; the best of a
 * few passes is reported, counting 3 arrays x 8 bytes per element (no
 * write-allocate credit, as STREAM does). The FMA probe runs 16 independent
 * 64-byte vector accumulators per thread, which -march=native turns into
 * AVX-512 (or pairs of AVX2) FMAs; 2 flops per lane per FMA.
 */
#include <omp.h>
#include <stdlib.h>

#include "bench.h"

double probe_triad_gbs(int nth, int quick) {
  size_t n = quick ? (size_t)16 << 20 : (size_t)40 << 20; /* doubles/array */
  double *a = xmalloc(n * 8), *b = xmalloc(n * 8), *c = xmalloc(n * 8);
#pragma omp parallel for num_threads(nth) schedule(static)
  for (size_t i = 0; i < n; i++) { a[i] = 0; b[i] = 1.0 + (double)(i & 7); c[i] = 2.0; }
  double best = 1e30;
  for (int rep = 0; rep < (quick ? 4 : 8); rep++) {
    double t0 = now_s();
#pragma omp parallel for num_threads(nth) schedule(static)
    for (size_t i = 0; i < n; i++) a[i] = b[i] + 3.0 * c[i];
    double t = now_s() - t0;
    if (t < best) best = t;
  }
  volatile double sink = a[n / 2];
  (void)sink;
  free(a); free(b); free(c);
  return 3.0 * 8.0 * (double)n / best / 1e9;
}

/* The widest vector register the build targets: 512-bit where AVX-512 is
 * on, 256-bit otherwise (an AVX2-only host cannot hold a 64-byte vector in
 * one "x" register, and the probe must measure one register's FMA rate). */
#if defined(__AVX512F__)
#define PROBE_VBYTES 64
#else
#define PROBE_VBYTES 32
#endif
#define PROBE_DLANES (PROBE_VBYTES / 8)
#define PROBE_FLANES (PROBE_VBYTES / 4)
typedef double vd8 __attribute__((vector_size(PROBE_VBYTES)));
typedef float vf16 __attribute__((vector_size(PROBE_VBYTES)));

#define FMA_CHAINS 16
static double fma_run_d(long iters) {
  vd8 acc[FMA_CHAINS], m, s;
  for (int c = 0; c < FMA_CHAINS; c++) acc[c] = (vd8){0} + (double)c * 1e-3;
  m = (vd8){0} + 0.999999; s = (vd8){0} + 1e-7;
  for (long it = 0; it < iters; it++) {
#pragma clang loop unroll(full)
    for (int c = 0; c < FMA_CHAINS; c++) acc[c] = acc[c] * m + s;
    __asm__ volatile("" : "+x"(m));
  }
  double r = 0;
  for (int c = 0; c < FMA_CHAINS; c++) for (int l = 0; l < PROBE_DLANES; l++) r += acc[c][l];
  return r;
}
static double fma_run_f(long iters) {
  vf16 acc[FMA_CHAINS], m, s;
  for (int c = 0; c < FMA_CHAINS; c++) acc[c] = (vf16){0} + (float)c * 1e-3f;
  m = (vf16){0} + 0.9999f; s = (vf16){0} + 1e-7f;
  for (long it = 0; it < iters; it++) {
#pragma clang loop unroll(full)
    for (int c = 0; c < FMA_CHAINS; c++) acc[c] = acc[c] * m + s;
    __asm__ volatile("" : "+x"(m));
  }
  double r = 0;
  for (int c = 0; c < FMA_CHAINS; c++) for (int l = 0; l < PROBE_FLANES; l++) r += acc[c][l];
  return r;
}

double probe_fma_gflops(int nth, int f32) {
  long iters = 20L << 20;
  double best = 1e30, sink = 0;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = now_s();
#pragma omp parallel num_threads(nth) reduction(+ : sink)
    sink += f32 ? fma_run_f(iters) : fma_run_d(iters);
    double t = now_s() - t0;
    if (t < best) best = t;
  }
  volatile double v = sink;
  (void)v;
  double lanes = f32 ? PROBE_FLANES : PROBE_DLANES;
  return 2.0 * lanes * FMA_CHAINS * (double)iters * nth / best / 1e9;
}

/* Small helpers the benchmark programs share: a monotonic clock, the
 * median of a sample, and dying with the library's message. Header-only
 * (static inline), so each program links nothing more. */
#ifndef TJ_BENCH_UTIL_H
#define TJ_BENCH_UTIL_H

#include <errno.h> /* program_invocation_short_name (_GNU_SOURCE) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tensorjit.h"

/* Milliseconds on the monotonic clock. */
static inline double bench_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v in place); the mean of the middle two for
 * an even n. */
static inline double bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Prints "<program>: <what>: <tensorjit's last error>" and exits 1. */
static inline void bench_die(const char *what) {
  fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, tj_last_error());
  exit(1);
}

#define TJ(call) do { if ((call) != TJ_OK) bench_die(#call); } while (0)

#endif

/* Parallel loops for JIT-compiled kernels on the OpenMP runtime (libomp).
 * The JIT outlines a parallel loop's body into a function over an iteration
 * range and calls tj_rt_parallel_for, a small function built here with
 * OpenMP: this keeps the generated code free of the runtime's internal
 * entry points (__kmpc_fork_call and friends), whose ABI is private to the
 * compilers, while still running on libomp's thread pool. Chunks are sized
 * by work (rows + nonzeros) when a pos array is given, so power-law rows
 * do not leave a core idle, and handed out dynamically.
 */
#include <omp.h>
#include <stdlib.h>

#include "abi.h"

static _Thread_local int threads_requested;

void tj_rt_set_threads(int n) { threads_requested = n; }

int tj_rt_threads(void) {
  if (threads_requested > 0) return threads_requested;
  const char *env = getenv("TJ_NUM_THREADS");
  int n = env ? atoi(env) : 0;
  return n > 0 ? n : omp_get_max_threads();
}

static int64_t pos_at(const void *pos, int32_t w, int64_t i) {
  return w == 4 ? ((const int32_t *)pos)[i] : ((const int64_t *)pos)[i];
}

/* Work up to row r: rows plus nonzeros, monotonic in r. */
static int64_t work_at(const void *pos, int32_t w, int64_t r) {
  return pos_at(pos, w, r) + r;
}

/* First row r in [lo, hi] with work_at(r) >= target. */
static int64_t split_row(const void *pos, int32_t w, int64_t lo, int64_t hi,
                         int64_t target) {
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (work_at(pos, w, mid) < target) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

void rt_split_rows(int64_t lo, int64_t hi, const void *pos, int32_t pos_width,
                   int n, int64_t *bounds) {
  int64_t base = pos ? work_at(pos, pos_width, lo) : 0;
  int64_t total = pos ? work_at(pos, pos_width, hi) - base : hi - lo;
  bounds[0] = lo;
  bounds[n] = hi;
  for (int c = 1; c < n; c++)
    bounds[c] = pos ? split_row(pos, pos_width, lo, hi, base + total * c / n)
                    : lo + (hi - lo) * c / n;
}

void tj_rt_parallel_for(int64_t lo, int64_t hi, const void *pos,
                        int32_t pos_width, tj_par_body body, void *ctx) {
  int nt = tj_rt_threads();
  if (hi <= lo) return;
  if (nt <= 1 || hi - lo < 2) {
    body(ctx, lo, hi);
    return;
  }
  int64_t nchunks = (int64_t)nt * 8;
  if (nchunks > hi - lo) nchunks = hi - lo;
  int64_t base = pos ? work_at(pos, pos_width, lo) : 0;
  int64_t total = pos ? work_at(pos, pos_width, hi) - base : hi - lo;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (int64_t c = 0; c < nchunks; c++) {
    int64_t a, b;
    if (pos) {
      a = split_row(pos, pos_width, lo, hi, base + total * c / nchunks);
      b = c == nchunks - 1 ? hi : split_row(pos, pos_width, lo, hi, base + total * (c + 1) / nchunks);
    } else {
      a = lo + (hi - lo) * c / nchunks;
      b = lo + (hi - lo) * (c + 1) / nchunks;
    }
    if (a < b) body(ctx, a, b);
  }
}

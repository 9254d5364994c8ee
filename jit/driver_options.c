/* A kernel's code-generation switches (LowerOptions) from the backend's
 * target and the environment, and the environment's test and benchmark
 * thresholds of the planner. The schedule's directives are rewrites of
 * the notation applied with the plan (lower/schedule.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

int drv_lattice_max(void) {
  const char *s = getenv("TJ_WIDE_UNION_THRESHOLD");
  long v = s ? strtol(s, NULL, 10) : 0;
  return v > 0 && v < 1 << 20 ? (int)v : 0;
}

int drv_prefetch_ahead(void) {
  const char *s = getenv("TJ_PREFETCH");
  if (!s || !*s) return LOWER_PREFETCH_AHEAD;
  long v = strtol(s, NULL, 10);
  return v > 0 && v <= 256 ? (int)v : 0;
}

int drv_peel_width(void) {
  const char *s = getenv("TJ_PEEL");
  if (!s || !*s) return LOWER_PEEL_WIDTH;
  long v = strtol(s, NULL, 10);
  return v > 1 && v <= LOWER_PEEL_MAX ? (int)v : 0;
}

int drv_scatter_min(void) {
  const char *s = getenv("TJ_SCATTER_UNION_MIN");
  long v = s ? strtol(s, NULL, 10) : 0;
  return v > 0 && v < 1 << 20 ? (int)v : 0;
}

int drv_split_sum_min(void) {
  int v = drv_scatter_min();
  return v ? v : LOWER_SPLIT_SUM_MIN;
}

/* The code-generation switches of e's options from the backend's target
 * (AVX-512: 512 bits, AVX2: 256) and the environment; the schedule's
 * directives were applied with the plan (lower_plan_schedule). */
void drv_set_options(CacheEntry *e, const Assignment *as) {
  LowerOptions *o = &e->opt;
  o->vector_bits = e->no_vectorize ? 0 : e->be->vector_bits(e->bstate);
  o->parallel = true;
  o->unroll_jam = e->no_unroll_jam ? 0 : 4;
  /* Gathers: on by default (measured wins on long rows, guarded for short
   * ones in the pass); TJ_VECTOR_GATHER=0 turns them off. */
  const char *g = getenv("TJ_VECTOR_GATHER");
  o->vector_gather = !(g && *g == '0');
  o->peel = drv_peel_width();
  o->prefetch = drv_prefetch_ahead();
  /* A gather loop's remainder as one masked step: on by default;
   * TJ_MASKED_TAIL=0 turns it off (the scalar remainder loop runs). */
  const char *mt = getenv("TJ_MASKED_TAIL");
  o->masked_tail = !(mt && *mt == '0');
  /* Register promotion of fixed updates into dense outputs: on by
   * default; TJ_PROMOTE=0 turns it off. */
  const char *pr = getenv("TJ_PROMOTE");
  o->promote = !(pr && *pr == '0') && !e->plan.out_sparse;
  o->lattice_max = drv_lattice_max();
  o->extents = as;
}

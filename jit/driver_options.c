/* A kernel's code-generation switches (LowerOptions) from the backend's
 * target and the environment, and the environment's test and benchmark
 * thresholds of the planner. The schedule's directives are rewrites of
 * the notation applied with the plan (lower/schedule.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

/* The environment variable `name` as a number: `unset` when it is unset or
 * empty, the number when it lies in [lo, hi], else 0 (the switch's off). */
static int env_number(const char *name, int unset, long lo, long hi) {
  const char *s = getenv(name);
  if (!s || !*s) return unset;
  long v = strtol(s, NULL, 10);
  return v >= lo && v <= hi ? (int)v : 0;
}

bool drv_env_on(const char *name) {
  const char *s = getenv(name);
  return !(s && *s == '0');
}

int drv_lattice_max(void) { return env_number("TJ_WIDE_UNION_THRESHOLD", 0, 1, (1 << 20) - 1); }

int drv_prefetch_ahead(void) { return env_number("TJ_PREFETCH", LOWER_PREFETCH_AHEAD, 1, 256); }

int drv_peel_width(void) { return env_number("TJ_PEEL", LOWER_PEEL_WIDTH, 2, LOWER_PEEL_MAX); }

int drv_scatter_min(void) { return env_number("TJ_SCATTER_UNION_MIN", 0, 1, (1 << 20) - 1); }

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
  o->vector_gather = drv_env_on("TJ_VECTOR_GATHER");
  o->peel = drv_peel_width();
  o->prefetch = drv_prefetch_ahead();
  /* A gather loop's remainder as one masked step: on by default;
   * TJ_MASKED_TAIL=0 turns it off (the scalar remainder loop runs). */
  o->masked_tail = drv_env_on("TJ_MASKED_TAIL");
  /* Register promotion of fixed updates into dense outputs: on by
   * default; TJ_PROMOTE=0 turns it off. */
  o->promote = drv_env_on("TJ_PROMOTE") && !e->plan.out_sparse;
  o->lattice_max = drv_lattice_max();
  o->extents = as;
}

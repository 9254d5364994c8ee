/* libFuzzer target for schedules (ir/ parse of the directives, and
 * lower/schedule.c / the planner applying them): the first byte picks
 * one of a few small kernels, the rest is the schedule text given to
 * tj_compile. A schedule is either refused with a message or gives a
 * kernel whose result equals the reference interpreter's: scheduling never
 * changes values (the data are small integers, so sums are exact in any
 * order). One context serves many inputs (kernels are cached by schedule)
 * and is replaced every 256 inputs to bound its memory.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"

typedef struct Problem {
  const char *expr;
  int n;
  const char *names[4];
  const char *formats[4];
  int order[4];
} Problem;

static const Problem PROBLEMS[] = {
    {"y(i) = A(i,j) * x(j)", 3, {"y", "A", "x"}, {"d", "ds", "d"}, {1, 2, 1}},
    {"C(i,j) = A(i,k) * B(k,j)", 3, {"C", "A", "B"}, {"ds", "ds", "ds"}, {2, 2, 2}},
    {"D(i,j) = E(i,k) * F(k,j)", 3, {"D", "E", "F"}, {"dd", "dd", "dd"}, {2, 2, 2}},
    {"y(i) = A(i,j) * x(j) + b(i)", 4, {"y", "A", "x", "b"}, {"d", "ss", "d", "s"}, {1, 2, 1, 1}},
};
enum { NPROBLEMS = sizeof PROBLEMS / sizeof PROBLEMS[0], DIM = 5 };

static tj_context *cx;
static int uses;

static void must(bool cond, const char *what, const char *sched) {
  if (cond) return;
  fprintf(stderr, "fuzz_schedule: %s for schedule \"%s\": %s\n", what, sched, tj_last_error());
  abort();
}

static tj_tensor *make(const Problem *p, int t, bool fill) {
  tj_format f;
  tj_format_parse(p->formats[t], &f);
  int64_t dims[2] = {DIM, DIM};
  tj_tensor *x;
  if (tj_tensor_new(p->names[t], TJ_F64, p->order[t], dims, &f, &x) != TJ_OK) abort();
  for (int e = 0; fill && e < 12; e++) {
    int64_t c[2] = {(e * 3 + t) % DIM, (e * 7 + 1) % DIM};
    tj_tensor_insert(x, c, (e % 4) + 1);
  }
  if (tj_tensor_pack(x) != TJ_OK) abort();
  return x;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 512) return 0;
  const Problem *p = &PROBLEMS[data[0] % NPROBLEMS];
  char *sched = malloc(size);
  memcpy(sched, data + 1, size - 1);
  sched[size - 1] = 0;
  if (!cx || ++uses % 256 == 0) {
    tj_context_free(cx);
    if (tj_context_new(&cx) != TJ_OK) abort();
  }
  tj_tensor *ops[4], *ref[4];
  for (int t = 0; t < p->n; t++) ops[t] = make(p, t, t > 0);
  tj_options o = tj_options_default();
  o.opt_level = 1;
  o.nthreads = 1 + (data[0] / NPROBLEMS) % 2;
  tj_kernel *k = NULL;
  tj_status st = tj_compile(cx, p->expr, ops, p->n, sched, &o, &k);
  if (st == TJ_OK) {
    must(tj_kernel_run(k, TJ_EVALUATE, NULL, 0) == TJ_OK, "run failed", sched);
    ref[0] = make(p, 0, false);
    for (int t = 1; t < p->n; t++) ref[t] = ops[t];
    must(tj_reference(p->expr, ref, p->n) == TJ_OK, "reference failed", sched);
    for (int64_t i = 0; i < DIM; i++)
      for (int64_t j = 0; j < (p->order[0] == 2 ? DIM : 1); j++) {
        int64_t c[2] = {i, j};
        double a = 0, b = 0;
        must(tj_tensor_get(ops[0], c, &a) == TJ_OK && tj_tensor_get(ref[0], c, &b) == TJ_OK,
             "get failed", sched);
        must(a == b, "the scheduled kernel's result differs from the reference", sched);
      }
    tj_tensor_free(ref[0]);
  } else {
    must(tj_last_error()[0] != 0, "refused without a message", sched);
    must(k == NULL, "a refused compile set *out", sched);
  }
  for (int t = 0; t < p->n; t++) tj_tensor_free(ops[t]);
  free(sched);
  return 0;
}

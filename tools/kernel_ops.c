/* What the command line and the REPL both do with a compiled kernel:
 * time it, check it against the reference interpreter, describe tensors,
 * and name the printable stages.
 *
 * Timing follows -time's contract: compile time is the library's own
 * total; one warm-up ASSEMBLE + COMPUTE (which also JITs those phases),
 * one timed ASSEMBLE, then `reps` timed COMPUTE runs reported as median,
 * min and max. A check compares entry by entry in both directions, so a
 * missing or an extra nonzero is caught as well as a wrong value.
 */
#include "tool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct {
  const char *name;
  tj_stage stage;
} stages[] = {
    {"notation", TJ_STAGE_NOTATION}, {"cin", TJ_STAGE_CIN},
    {"lattice", TJ_STAGE_LATTICE},   {"assembly", TJ_STAGE_ASSEMBLY},
    {"compute", TJ_STAGE_COMPUTE},   {"c", TJ_STAGE_C},
    {"ir", TJ_STAGE_C},              {"llvm", TJ_STAGE_LLVM},
    {"llvm-opt", TJ_STAGE_LLVM_OPT}, {"asm", TJ_STAGE_ASM},
    {"gett", TJ_STAGE_GETT}};

bool kop_stage(const char *name, tj_stage *st) {
  for (size_t i = 0; i < sizeof stages / sizeof *stages; i++)
    if (!strcmp(name, stages[i].name)) {
      *st = stages[i].stage;
      return true;
    }
  return false;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static bool run(tj_kernel *k, tj_phase ph, tj_tensor *const *ops, int n) {
  static const char *names[] = {"assemble", "compute", "evaluate"};
  return tj_kernel_run(k, ph, ops, ops ? n : 0) == TJ_OK || tool_fail_lib(names[ph]);
}

bool kop_time(tj_kernel *k, tj_tensor *const *ops, int n, int reps,
              TimeStats *ts) {
  memset(ts, 0, sizeof *ts);
  ts->compile = tj_kernel_times(k);
  ts->reps = reps;
  if (!run(k, TJ_ASSEMBLE, ops, n) || !run(k, TJ_COMPUTE, ops, n)) return false;
  double t0 = tool_now_ms();
  if (!run(k, TJ_ASSEMBLE, ops, n)) return false;
  ts->assemble_ms = tool_now_ms() - t0;
  double *ms = malloc((size_t)reps * sizeof *ms);
  if (!ms) return tool_fail("out of memory");
  for (int r = 0; r < reps; r++) {
    t0 = tool_now_ms();
    if (!run(k, TJ_COMPUTE, ops, n)) {
      free(ms);
      return false;
    }
    ms[r] = tool_now_ms() - t0;
  }
  qsort(ms, (size_t)reps, sizeof *ms, cmp_double);
  ts->min_ms = ms[0];
  ts->max_ms = ms[reps - 1];
  ts->median_ms = reps % 2 ? ms[reps / 2] : (ms[reps / 2 - 1] + ms[reps / 2]) / 2;
  free(ms);
  return true;
}

/* The compile line: total, then the stages (a cache hit says which). */
static void print_compile(const tj_compile_times *t, FILE *out) {
  fprintf(out, "compile: %.3f ms ", t->total_ms);
  if (t->cache_hit)
    fprintf(out, "(%s cache hit)\n", t->cache_hit == 2 ? "disk" : "memory");
  else
    fprintf(out, "(parse %.3f, setup %.3f, lower %.3f, llvm-ir %.3f, optimize %.3f, "
            "codegen %.3f; thread cpu %.3f: lower %.3f, llvm-ir %.3f, optimize %.3f, "
            "codegen %.3f)\n", t->parse_ms, t->setup_ms, t->lower_ms, t->llvm_ir_ms,
            t->optimize_ms, t->codegen_ms, t->total_cpu_ms, t->lower_cpu_ms,
            t->llvm_ir_cpu_ms, t->optimize_cpu_ms, t->codegen_cpu_ms);
}

void kop_print_time(const TimeStats *ts, FILE *out) {
  print_compile(&ts->compile, out);
  fprintf(out, "assemble: %.3f ms\n", ts->assemble_ms);
  fprintf(out, "compute: %.3f ms (median of %d; min %.3f ms, max %.3f ms)\n",
          ts->median_ms, ts->reps, ts->min_ms, ts->max_ms);
}

tj_tensor *kop_reference(const char *expr, tj_tensor *const *ops, int n, int out,
                         const tj_options *opts) {
  tj_tensor *ref = NULL;
  if (tj_tensor_convert(ops[out], tj_tensor_format(ops[out]), &ref) != TJ_OK) {
    tool_fail_lib("check: copying the output");
    return NULL;
  }
  tj_tensor *sub[TOOL_MAX_TENSORS];
  for (int i = 0; i < n; i++) sub[i] = i == out ? ref : ops[i];
  if (tj_reference_opts(expr, sub, n, opts) != TJ_OK) {
    tool_fail_lib("check: reference interpreter");
    tj_tensor_free(ref);
    return NULL;
  }
  return ref;
}

static double tolerance(tj_dtype dt) {
  return dt == TJ_F64 ? 1e-9 : dt == TJ_F32 ? 1e-4 : 0;
}

static void coord_text(const int64_t *c, int order, char *buf, size_t n) {
  size_t used = 0;
  buf[0] = 0;
  for (int m = 0; m < order && used < n; m++)
    used += (size_t)snprintf(buf + used, n - used, "%s%lld", m ? "," : "", (long long)c[m]);
}

/* Compares a's entries with b's values at the same coordinates, updating
 * *max_err; false (tool_fail) at the first one past tolerance. a_is_got
 * says which side a is, for the message. */
static bool compare_side(const tj_tensor *a, const tj_tensor *b, bool a_is_got,
                         double *max_err) {
  int64_t *coords = NULL, nnz = 0;
  double *vals = NULL;
  if (tj_tensor_unpack(a, &coords, &vals, &nnz) != TJ_OK)
    return tool_fail_lib("check: reading the result");
  int order = tj_tensor_order(a);
  double tol = tolerance(tj_tensor_dtype(a));
  bool ok = true;
  for (int64_t e = 0; ok && e < nnz; e++) {
    double mine, other;
    const int64_t *c = coords + e * order;
    if (tj_tensor_get(a, c, &mine) != TJ_OK || tj_tensor_get(b, c, &other) != TJ_OK) {
      ok = tool_fail_lib("check");
      break;
    }
    double got = a_is_got ? mine : other, want = a_is_got ? other : mine;
    double err = got == want ? 0 : fabs(got - want); /* inf == inf */
    if (err > *max_err || isnan(err)) *max_err = isnan(err) ? INFINITY : err;
    /* relative to a finite want only: against an infinite one (a min.plus
       entry nothing reached) tol * (1 + inf) would pass any finite value */
    if (!(err <= (isinf(want) ? 0 : tol * (1 + fabs(want))))) {
      char at[256];
      coord_text(c, order, at, sizeof at);
      ok = tool_fail("check failed: %s(%s) is %.17g but the reference gives %.17g",
                     tj_tensor_name(a), at, got, want);
    }
  }
  free(coords);
  free(vals);
  return ok;
}

bool kop_compare(const tj_tensor *got, const tj_tensor *ref, FILE *out) {
  double max_err = 0;
  if (!compare_side(got, ref, true, &max_err) || !compare_side(ref, got, false, &max_err))
    return false;
  fprintf(out, "check: ok (max abs error %.3g)\n", max_err);
  return true;
}

void kop_info(const tj_tensor *t, FILE *out) {
  char fs[256];
  tj_format_print(tj_tensor_format(t), fs, sizeof fs);
  fprintf(out, "%s: order %d, dims ", tj_tensor_name(t), tj_tensor_order(t));
  if (tj_tensor_order(t) == 0) fputs("(scalar)", out);
  for (int m = 0; m < tj_tensor_order(t); m++)
    fprintf(out, "%s%lld", m ? "x" : "", (long long)tj_tensor_dim(t, m));
  fprintf(out, ", format %s, %s, nnz %lld, %lld bytes\n", fs[0] ? fs : "(scalar)",
          tj_dtype_name(tj_tensor_dtype(t)), (long long)tj_tensor_nnz(t),
          (long long)tj_tensor_bytes(t));
}

/* tjlatency: compile latency of SpMV and MTTKRP (issue 21's targets), and
 * an interleaved A/B of any environment switch read at compile time.
 *
 *   tjlatency [--reps N] [--kernel spmv|mttkrp] [--ab VAR=a,b | VAR='a;b'] [--first]
 *
 * Every compile is a distinct kernel (a fresh context, so no cache hit);
 * "warm" compiles are all but the process's first. The first compile of
 * the process (SpMV, LLJIT start included) is printed separately; run the
 * tool in several processes for its median (bench/latency.sh). With
 * --ab, each round compiles SpMV and MTTKRP under VAR=a, then VAR=b
 * (order swapped every other round), so drift and load hit both sides;
 * medians per side: wall time, the calling thread's CPU time (robust
 * against a loaded machine; LLJIT's start on its own thread is not in
 * it) and the stages of tj_kernel_times (wall; the cpu-* ones in thread
 * CPU time). --kernel times the warm compiles of one kernel only (for
 * perf record). --first prints
 * the first compile only and exits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "util.h"

typedef struct Kern {
  const char *name, *expr;
  tj_tensor **ops;
  int nops;
} Kern;

enum { STAGES = 12, MAX_REPS = 1000 };
static const char *const STAGE_NAMES[STAGES] = {
    "total", "cpu", "lower", "llvm-ir", "optimize", "codegen", "setup", "parse", "rest",
    "cpu-llvm-ir", "cpu-optimize", "cpu-codegen"};

static double clock_ms(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}


/* Compiles k in a fresh context; stages into st (total: wall time). */
static bool compile_fresh(const Kern *k, double st[STAGES]) {
  tj_context *cx = NULL;
  if (tj_context_new(&cx) != TJ_OK) return false;
  tj_options o = tj_options_default();
  o.nthreads = 1;
  tj_kernel *kn = NULL;
  double t0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
  bool ok = tj_compile(cx, k->expr, k->ops, k->nops, NULL, &o, &kn) == TJ_OK;
  double t1 = clock_ms(CLOCK_MONOTONIC), c1 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
  if (!ok) fprintf(stderr, "tjlatency: %s: %s\n", k->expr, tj_last_error());
  if (ok) {
    tj_compile_times t = tj_kernel_times(kn);
    double rest = t1 - t0 - t.parse_ms - t.setup_ms - t.lower_ms - t.llvm_ir_ms -
                  t.optimize_ms - t.codegen_ms;
    double v[STAGES] = {t1 - t0,         c1 - c0,           t.lower_ms,     t.llvm_ir_ms,
                        t.optimize_ms,   t.codegen_ms,      t.setup_ms,     t.parse_ms,
                        rest,            t.llvm_ir_cpu_ms,  t.optimize_cpu_ms, t.codegen_cpu_ms};
    memcpy(st, v, sizeof v);
  }
  tj_context_free(cx);
  return ok;
}

static void set_side(const char *var, const char *val) {
  if (var) setenv(var, val, 1);
}

int main(int argc, char **argv) {
  int reps = 21;
  bool first_only = false;
  int only = -1; /* --kernel spmv|mttkrp: warm compiles of that one only */
  char *var = NULL, *val[2] = {NULL, NULL};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--first")) first_only = true;
    else if (!strcmp(argv[i], "--kernel") && i + 1 < argc) {
      i++;
      only = !strcmp(argv[i], "spmv") ? 0 : !strcmp(argv[i], "mttkrp") ? 1 : -2;
      if (only == -2) {
        fprintf(stderr, "tjlatency: --kernel spmv or mttkrp\n");
        return 2;
      }
    }
    else if (!strcmp(argv[i], "--ab") && i + 1 < argc) {
      var = argv[++i];
      /* a and b are split at ';' when there is one (pipeline texts have commas) */
      char *eq = strchr(var, '='), *comma = eq ? strchr(eq, ';') : NULL;
      if (eq && !comma) comma = strchr(eq, ',');
      if (!comma) {
        fprintf(stderr, "tjlatency: --ab VAR=a,b\n");
        return 2;
      }
      *eq = *comma = 0;
      val[0] = eq + 1;
      val[1] = comma + 1;
    } else {
      fprintf(stderr, "usage: tjlatency [--reps N] [--kernel spmv|mttkrp] [--ab VAR=a,b] [--first]\n");
      return 2;
    }
  }
  if (reps < 1 || reps > MAX_REPS) reps = 21;
  unsetenv("TJ_CACHE_DIR");
  /* The inputs of tjbench's compile section. */
  tj_tensor *sp[3], *mt[4];
  in_compile_operands(sp, mt);
  const Kern ks[2] = {{"SpMV", "y(i) = A(i,j) * x(j)", sp, 3},
                      {"MTTKRP", "A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", mt, 4}};
  int sides = var ? 2 : 1;
  set_side(var, val[0]);
  double first[STAGES];
  if (!compile_fresh(&ks[0], first)) return 1;
  printf("first compile in process (SpMV%s%s%s%s): %.2f ms (", var ? ", " : "",
         var ? var : "", var ? "=" : "", var ? val[0] : "", first[0]);
  for (int g = 1; g < STAGES; g++) printf("%s%s %.2f", g > 1 ? ", " : "", STAGE_NAMES[g], first[g]);
  printf(")\n");
  if (first_only) return 0;
  static double t[2][2][STAGES][MAX_REPS];
  for (int r = 0; r < reps; r++)
    for (int q = 0; q < sides; q++) {
      int s = r % 2 ? sides - 1 - q : q;
      set_side(var, val[s]);
      for (int k = 0; k < 2; k++) {
        if (only >= 0 && k != only) continue;
        double st[STAGES];
        if (!compile_fresh(&ks[k], st)) return 1;
        for (int g = 0; g < STAGES; g++) t[s][k][g][r] = st[g];
      }
    }
  for (int k = 0; k < 2; k++)
    for (int s = 0; s < sides && (only < 0 || k == only); s++) {
      printf("%-6s warm%s%s%s%s, median of %d:", ks[k].name, var ? " " : "", var ? var : "",
             var ? "=" : "", var ? val[s] : "", reps);
      for (int g = 0; g < STAGES; g++)
        printf(" %s %.2f", STAGE_NAMES[g], bench_median(t[s][k][g], reps));
      printf(" ms\n");
    }
  in_compile_operands_free(sp, mt);
  return 0;
}

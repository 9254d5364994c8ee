/* tjbench's "vectorization and thread scaling" section: tensorjit against
 * itself. Each pair compiles one kernel two ways in fresh contexts — scalar
 * vs vectorized (1 thread, LLVM's own vectorizers off on both sides), or
 * 1 vs 2 threads — with an output tensor per variant, checks that the two
 * results agree (max relative error <= 1e-9, else a FAIL counted as a
 * disagreement), times both (medians of runs in alternating rounds, see
 * pair_run) and prints a / b next to the target the issue set.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

/* libomp's blocktime calls (omp.h declares them only for libomp): weak, so
 * a build against another OpenMP runtime (gcc's libgomp) links, and the
 * pairs then run with that runtime's own wait policy. */
extern int kmp_get_blocktime(void) __attribute__((weak));
extern void kmp_set_blocktime(int ms) __attribute__((weak));
static int blocktime_get(void) { return kmp_get_blocktime ? kmp_get_blocktime() : 0; }
static void blocktime_set(int ms) {
  if (kmp_set_blocktime) kmp_set_blocktime(ms);
}

typedef struct Pair {
  const char *kind;         /* "vectorize" or "threads" */
  const char *names[2];     /* the variants, slow side first */
  tj_options opt[2];
  double target;            /* wanted a / b; 0: none set */
  Row row[2];
  double err;               /* max relative error of b against a */
  int ok, is_error;         /* is_error: a compile or run error, not a disagreement */
} Pair;

static int g_nratios;

static Pair pair_vectorize(double target) {
  Pair p = {.kind = "vectorize", .names = {"scalar", "vector"}, .target = target};
  for (int v = 0; v < 2; v++) {
    p.opt[v] = tj_options_default();
    p.opt[v].nthreads = 1;
    p.opt[v].no_llvm_vectorize = 1;
  }
  p.opt[0].no_vectorize = 1;
  return p;
}

static Pair pair_threads(double target) {
  Pair p = {.kind = "threads", .names = {"1 thread", "2 threads"}, .target = target};
  p.opt[0] = p.opt[1] = tj_options_default();
  p.opt[0].nthreads = 1;
  p.opt[1].nthreads = 2;
  return p;
}

/* libomp's default blocktime: after a parallel region its workers spin this
 * long before they sleep, as in any OpenMP program run with the runtime's
 * defaults. scripts/bench.sh sets KMP_BLOCKTIME=0 (two OpenMP runtimes share
 * two cores in the peer tables); waking a sleeping worker then costs
 * 50-100 us on this VM, a tax on every sub-millisecond parallel kernel that
 * is the host's, not the kernel's. The thread-scaling pairs run with the
 * default; the suite's setting is restored after them. */
enum { DEFAULT_BLOCKTIME_MS = 200 };

/* Waits until the thread pool's workers have gone to sleep. */
static void pool_idle(void) { usleep((DEFAULT_BLOCKTIME_MS + 50) * 1000); }

/* Times both variants of p on c; variant 0 writes c->ops[0], variant 1
 * out_b (same shape and format). Both are compiled first, each in its own
 * context, then timed in ROUNDS rounds of a's runs then b's, so drift in
 * the machine's speed (frequency, a neighbour's load) falls on both sides
 * of the ratio alike. Between rounds the thread pool is left idle past
 * its blocktime, so a 2-thread variant's spinning workers never share the
 * machine with the next 1-thread runs. Short kernels get more runs (about
 * 0.3 s a side, at most 400). Checks variant 1 against variant 0. */
enum { ROUNDS = 5 };
static void pair_run(Pair *p, Case *c, tj_tensor *out_b) {
  tj_tensor *outs[2] = {c->ops[0], out_b};
  tj_context *cx[2] = {NULL, NULL};
  TjRun tr[2] = {{NULL, TJ_OK, TJ_EVALUATE}, {NULL, TJ_OK, TJ_EVALUATE}};
  double warm = 0;
  p->ok = 1;
  for (int v = 0; v < 2 && p->ok; v++) {
    c->ops[0] = outs[v];
    if (tj_context_new(&cx[v]) != TJ_OK) {
      snprintf(p->row[v].note, sizeof p->row[v].note, "%.200s", tj_last_error());
      p->ok = 0;
      break;
    }
    tr[v].k = tj_build(cx[v], c, &p->opt[v], &p->row[v]);
    if (!tr[v].k) { p->ok = 0; break; }
    double t0 = now_s();
    tj_run(&tr[v]);
    warm = fmax(warm, now_s() - t0);
    if (tr[v].st != TJ_OK) {
      snprintf(p->row[v].note, sizeof p->row[v].note, "run error: %.200s", tj_last_error());
      p->ok = 0;
    }
  }
  c->ops[0] = outs[0];
  if (p->ok) {
    int reps = g_set.min_reps;
    if (warm > 0 && reps * warm < 0.3) reps = (int)(0.3 / warm);
    if (reps > 400) reps = 400;
    int rounds = reps < ROUNDS ? 1 : ROUNDS;
    reps = (reps + rounds - 1) / rounds * rounds;
    double *t[2] = {xmalloc(sizeof(double) * (size_t)reps), xmalloc(sizeof(double) * (size_t)reps)};
    for (int r = 0; r < rounds && p->ok; r++) {
      for (int v = 0; v < 2; v++) {
        /* before a's runs: b's 2-thread workers may still be spinning */
        if (v == 0 && p->opt[0].nthreads != p->opt[1].nthreads) pool_idle();
        for (int i = r * reps / rounds; i < (r + 1) * reps / rounds; i++) {
          double t0 = now_s();
          tj_run(&tr[v]);
          t[v][i] = now_s() - t0;
          if (tr[v].st != TJ_OK) p->ok = 0;
        }
      }
    }
    for (int v = 0; v < 2; v++) {
      Row *r = &p->row[v];
      r->med = median_sorted_ms(t[v], reps);
      r->min = t[v][0] * 1e3;
      r->reps = reps;
      r->timed = 1;
      free(t[v]);
    }
    if (!p->ok) snprintf(p->row[1].note, sizeof p->row[1].note, "run error: %.200s", tj_last_error());
  }
  for (int v = 0; v < 2; v++) tj_context_free(cx[v]);
  c->bytes = 0;
  for (int i = 0; i < c->nops; i++) c->bytes += used_bytes(c->ops[i]);
  if (!p->ok) { p->is_error = 1; g_tj_errors++; return; }
  Out o[2];
  for (int v = 0; v < 2; v++) out_from_tensor(c, outs[v], &o[v]);
  char why[128] = "";
  p->err = compare(&o[0], &o[1], why, sizeof why);
  if (p->err < 0 || !(p->err <= 1e-9)) {
    if (p->err >= 0) snprintf(why, sizeof why, "max relative error %.3g > 1e-9", p->err);
    snprintf(p->row[1].note, sizeof p->row[1].note, "%s disagrees with %s: %s", p->names[1],
             p->names[0], why);
    p->ok = 0;
    g_fails++;
  }
}

/* Prints p's line and writes its JSON entry; extra (may be "") ends the line. */
static void pair_emit(const Pair *p, const Case *c, const char *extra) {
  double ratio = p->ok ? p->row[0].med / p->row[1].med : NAN;
  const char *note = p->row[1].note[0] ? p->row[1].note : p->row[0].note;
  char goal[16] = "-";
  if (p->target > 0) snprintf(goal, sizeof goal, ">= %.1fx", p->target);
  if (p->ok)
    printf("%-9s %-8s %-14s %10.3f %10.3f %6.2fx  %-7s %-5s %s%s\n", p->kind, c->kernel,
           c->input, p->row[0].med, p->row[1].med, ratio, goal,
           p->target <= 0 ? "" : ratio >= p->target ? "met" : "below", extra, note);
  else
    printf("%-9s %-8s %-14s %s: %s\n", p->kind, c->kernel, c->input,
           p->is_error ? "error" : "FAIL", note);
  fprintf(g_json, "%s\n  {\"kind\": \"%s\", \"kernel\": ", g_nratios++ ? "," : "", p->kind);
  json_str(g_json, c->kernel);
  fprintf(g_json, ", \"input\": ");
  json_str(g_json, c->input);
  fprintf(g_json, ", \"expr\": ");
  json_str(g_json, c->expr);
  fprintf(g_json, ", \"variants\": [\"%s\", \"%s\"], \"ok\": %s", p->names[0], p->names[1],
          p->ok ? "true" : "false");
  if (p->target > 0) fprintf(g_json, ", \"target\": %.3g", p->target);
  if (p->ok)
    fprintf(g_json, ", \"median_ms\": [%.6g, %.6g], \"reps\": [%d, %d], \"ratio\": %.4g, "
            "\"max_rel_err\": %.3g", p->row[0].med, p->row[1].med, p->row[0].reps,
            p->row[1].reps, ratio, p->err);
  if (p->ok && extra[0])
    fprintf(g_json, ", \"gbs\": [%.4g, %.4g], \"triad_gbs\": [%.4g, %.4g]",
            c->bytes / (p->row[0].med * 1e-3) / 1e9, c->bytes / (p->row[1].med * 1e-3) / 1e9,
            g_bw[1], g_bw[2]);
  fprintf(g_json, ", \"note\": ");
  json_str(g_json, note);
  fprintf(g_json, "}");
  fflush(stdout);
  fflush(g_json);
}

static void pair_do(Pair p, Case *c, tj_tensor *out_b) {
  pair_run(&p, c, out_b);
  pair_emit(&p, c, "");
}

static Case case_of(const char *kernel, const char *input, const char *expr, OutKind ok) {
  Case c = {.kernel = kernel, .expr = expr, .okind = ok};
  snprintf(c.input, sizeof c.input, "%s", input);
  return c;
}

/* C(i,j) = A(i,k) * B(k,j), 64 dense columns; *out_b a second C. */
static Case spmm_case(const char *input, tj_tensor *A, tj_tensor **out_b) {
  int64_t dC[2] = {A->st.dims[0], 64}, dB[2] = {A->st.dims[1], 64};
  Case c = case_of("spmm", input, "C(i,j) = A(i,k) * B(k,j)", OUT_DENSE);
  c.ops[0] = in_empty("C", TJ_F64, 2, dC, NULL); c.ops[1] = A;
  c.ops[2] = in_dense("B", TJ_F64, 2, dB, 12); c.nops = 3;
  *out_b = in_empty("C", TJ_F64, 2, dC, NULL);
  return c;
}

/* Frees the tensors of c except operand keep, and out_b. */
static void case_drop(Case *c, int keep, tj_tensor *out_b) {
  for (int i = 0; i < c->nops; i++)
    if (i != keep) tj_tensor_free(c->ops[i]);
  tj_tensor_free(out_b);
}

static void vec_spmm(const char *input, tj_tensor *A) {
  tj_tensor *out_b;
  Case c = spmm_case(input, A, &out_b);
  pair_do(pair_vectorize(2.5), &c, out_b);
  case_drop(&c, 1, out_b);
}

/* A(i,j) = B(i,j) * C(i,k) * D(j,k), k = 64, B and A CSR. */
static void vec_sddmm(const char *input, tj_tensor *B) {
  int64_t dC[2] = {B->st.dims[0], 64}, dD[2] = {B->st.dims[1], 64};
  tj_tensor_rename(B, "B");
  Case c = case_of("sddmm", input, "A(i,j) = B(i,j) * C(i,k) * D(j,k)", OUT_CSR);
  c.ops[0] = in_empty("A", TJ_F64, 2, B->st.dims, "ds"); c.ops[1] = B;
  c.ops[2] = in_dense("C", TJ_F64, 2, dC, 13); c.ops[3] = in_dense("D", TJ_F64, 2, dD, 14);
  c.nops = 4;
  tj_tensor *out_b = in_empty("A", TJ_F64, 2, B->st.dims, "ds");
  pair_do(pair_vectorize(2.0), &c, out_b);
  case_drop(&c, 1, out_b);
  tj_tensor_rename(B, "A");
}

static void vec_gemm(int n) {
  int64_t d[2] = {n, n};
  char input[32];
  snprintf(input, sizeof input, "n=%d", n);
  Case c = case_of("dgemm", input, "A(i,j) = B(i,k) * C(k,j)", OUT_DENSE);
  c.ops[0] = in_empty("A", TJ_F64, 2, d, NULL);
  c.ops[1] = in_dense("B", TJ_F64, 2, d, 31); c.ops[2] = in_dense("C", TJ_F64, 2, d, 32);
  c.nops = 3;
  tj_tensor *out_b = in_empty("A", TJ_F64, 2, d, NULL);
  pair_do(pair_vectorize(4.0), &c, out_b);
  case_drop(&c, -1, out_b);
}

static void thr_spmm(const char *input, tj_tensor *A) {
  tj_tensor *out_b;
  Case c = spmm_case(input, A, &out_b);
  pair_do(pair_threads(1.8), &c, out_b);
  case_drop(&c, 1, out_b);
}

/* cage11 x cage11, CSR x CSR -> CSR. */
static void thr_spgemm(const char *data) {
  tj_tensor *B = real_matrix(data, "cage11.mtx");
  if (!B) { printf("threads   spgemm   cage11         skipped: cage11.mtx missing\n"); return; }
  tj_tensor_rename(B, "B");
  Case c = case_of("spgemm", "cage11", "A(i,j) = B(i,k) * C(k,j)", OUT_CSR);
  c.ops[0] = in_empty("A", TJ_F64, 2, B->st.dims, "ds"); c.ops[1] = B;
  c.ops[2] = in_convert(B, "C", "ds"); c.nops = 3;
  tj_tensor *out_b = in_empty("A", TJ_F64, 2, B->st.dims, "ds");
  pair_do(pair_threads(1.6), &c, out_b);
  case_drop(&c, -1, out_b);
}

/* MTTKRP, J = 64, on openflight_sym in CSF. */
static void thr_mttkrp(const char *data) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tensors/openflight_sym.tns", data);
  tj_tensor *B = access(path, R_OK) == 0 ? in_read(path, "B", "sss") : NULL;
  if (!B) { printf("threads   mttkrp64 openflight_sym skipped: %s missing\n", path); return; }
  int64_t dA[2] = {B->st.dims[0], 64}, dC[2] = {B->st.dims[1], 64}, dD[2] = {B->st.dims[2], 64};
  Case c = case_of("mttkrp64", "openflight_sym", "A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", OUT_DENSE);
  c.ops[0] = in_empty("A", TJ_F64, 2, dA, NULL); c.ops[1] = B;
  c.ops[2] = in_dense("C", TJ_F64, 2, dC, 23); c.ops[3] = in_dense("D", TJ_F64, 2, dD, 24);
  c.nops = 4;
  tj_tensor *out_b = in_empty("A", TJ_F64, 2, dA, NULL);
  pair_do(pair_threads(1.8), &c, out_b);
  case_drop(&c, -1, out_b);
}

/* SpMV CSR, with its effective bandwidth next to the triad probe's. */
static void thr_spmv(const char *input, int64_t n, uint64_t seed) {
  tj_tensor *A = in_csr_uniform("A", n, 16, seed);
  Case c = case_of("spmv-csr", input, "y(i) = A(i,j) * x(j)", OUT_DENSE);
  c.ops[0] = in_empty("y", TJ_F64, 1, &n, NULL); c.ops[1] = A;
  c.ops[2] = in_dense("x", TJ_F64, 1, &n, 11); c.nops = 3;
  tj_tensor *out_b = in_empty("y", TJ_F64, 1, &n, NULL);
  Pair p = pair_threads(0);
  pair_run(&p, &c, out_b);
  char extra[160] = "";
  if (p.ok)
    snprintf(extra, sizeof extra, "GB/s %.1f / %.1f (triad %.1f / %.1f)  ",
             c.bytes / (p.row[0].med * 1e-3) / 1e9, c.bytes / (p.row[1].med * 1e-3) / 1e9,
             g_bw[1], g_bw[2]);
  pair_emit(&p, &c, extra);
  case_drop(&c, -1, out_b);
}

void ratios_run(const char *data) {
  int q = g_set.quick;
  Settings saved = g_set;
  g_set.min_reps = q ? 5 : 7;      /* at least; short kernels get more rounds */
  g_set.budget_s = INFINITY;
  double t0 = now_s();
  const char *uname = q ? "u50k" : "u200k";
  tj_tensor *U = in_csr_uniform("A", q ? 50000 : 200000, 16, 1);
  printf("\nvectorization and thread scaling (tensorjit against itself; median of >= %d runs, in 5 rounds of a then b)\n"
         "%-9s %-8s %-14s %10s %10s %7s  %-7s %-5s %s\n", g_set.min_reps, "pair", "kernel",
         "input", "a_ms", "b_ms", "a/b", "target", "", "note");
  printf("-- a = scalar, b = vectorized: 1 thread, LLVM's vectorizers off on both sides\n");
  vec_spmm(uname, U);
  vec_sddmm(uname, U);
  vec_gemm(256);
  vec_gemm(512);
  int blocktime = blocktime_get();
  blocktime_set(DEFAULT_BLOCKTIME_MS);
  printf("-- a = 1 thread, b = 2 threads: default vectorization, OpenMP blocktime %d ms\n",
         DEFAULT_BLOCKTIME_MS);
  thr_spmm(uname, U);
  tj_tensor_free(U);
  thr_spgemm(data);
  thr_mttkrp(data);
  if (q) thr_spmv("u200k", 200000, 1);
  else thr_spmv("u1M", 1000000, 2);
  blocktime_set(blocktime);
  printf("(section: %.0f s)\n", now_s() - t0);
  g_set = saved;
}

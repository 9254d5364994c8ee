/* tjbench: tensorjit's kernels side by side with BLAS, GraphBLAS,
 * hand-written C and tensorjit's own C rendering compiled by cc.
 *
 * For every kernel x input x threads (1, 2): compile with tensorjit, run
 * once (warm-up) and keep that result as the reference; set up each peer,
 * run it once, check it against the reference (max relative error; a FAIL
 * row and a nonzero exit on disagreement), then time everything (median,
 * min). Rates are set against limits the suite measures itself (triad
 * bandwidth, FMA peak) as a roofline fraction. Output: a table on stdout
 * and <out>/bench.json; bench/plot.py draws the figures.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <dlfcn.h>

#include "bench.h"

Settings g_set;
FILE *g_json;
int g_fails, g_tj_errors;
double g_bw[3];
static int g_nrows_json;
static double g_peak_d[3], g_peak_f[3];

double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- results ---------------------------------------------------------- */

void out_from_tensor(const Case *c, const tj_tensor *t, Out *o) {
  const tj_storage *s = &t->st;
  memset(o, 0, sizeof *o);
  o->kind = c->okind;
  o->is_f32 = s->dtype == TJ_F32;
  o->vals = s->vals;
  o->n = s->vals_len;
  if (c->okind == OUT_CSR) {
    o->n = s->dims[0];
    o->pos = s->levels[1].pos; o->crd = s->levels[1].crd;
    o->pw = s->pos_width; o->cw = s->crd_width; o->ncols = s->dims[1];
  }
}

static double val_at(const Out *o, int64_t i) {
  return o->is_f32 ? (double)((const float *)o->vals)[i] : ((const double *)o->vals)[i];
}

/* Max |ref - got| / max |ref|; < 0 when the shapes disagree (why says). */
double compare(const Out *ref, const Out *got, char *why, size_t n) {
  if (got->n < 0) { snprintf(why, n, "kernel returned an error"); return -1; }
  if (ref->kind != OUT_CSR) {
    if (ref->n != got->n) {
      snprintf(why, n, "result has %lld values, reference %lld", (long long)got->n, (long long)ref->n);
      return -1;
    }
    double scale = 0, err = 0;
    for (int64_t i = 0; i < ref->n; i++) {
      double r = val_at(ref, i), g = val_at(got, i);
      scale = fmax(scale, fabs(r));
      if (!(fabs(r - g) <= err)) err = isnan(g) ? INFINITY : fabs(r - g);
    }
    return err / (scale > 0 ? scale : 1);
  }
  double *ws = xcalloc((size_t)ref->ncols, sizeof(double));
  double scale = 0, err = 0;
  for (int64_t i = 0; i < ref->n; i++) {
    int64_t a0 = rt_idx(ref->pos, ref->pw, i), a1 = rt_idx(ref->pos, ref->pw, i + 1);
    int64_t b0 = rt_idx(got->pos, got->pw, i), b1 = rt_idx(got->pos, got->pw, i + 1);
    for (int64_t q = a0; q < a1; q++) {
      double r = val_at(ref, q);
      ws[rt_idx(ref->crd, ref->cw, q)] += r;
      scale = fmax(scale, fabs(r));
    }
    for (int64_t q = b0; q < b1; q++) ws[rt_idx(got->crd, got->cw, q)] -= val_at(got, q);
    for (int64_t q = a0; q < a1; q++) {
      int64_t j = rt_idx(ref->crd, ref->cw, q);
      err = fmax(err, fabs(ws[j])); ws[j] = 0;
    }
    for (int64_t q = b0; q < b1; q++) {
      int64_t j = rt_idx(got->crd, got->cw, q);
      err = fmax(err, fabs(ws[j])); ws[j] = 0;
    }
  }
  free(ws);
  return err / (scale > 0 ? scale : 1);
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double median_sorted_ms(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp_dbl);
  return (n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2])) * 1e3;
}

/* Repetitions of a row whose warm-up took warm_s: min_reps, fewer past
 * the budget, never under 3. */
static int reps_for(double warm_s) {
  int reps = g_set.min_reps;
  if (warm_s * reps > g_set.budget_s) {
    reps = (int)(g_set.budget_s / (warm_s > 0 ? warm_s : 1e-9));
    if (reps < 3) reps = 3;
  }
  return reps;
}

/* The calling thread's CPU time (--cpu, 1-thread rows) or the wall clock. */
static double clock_s(int cpu) {
  if (!cpu) return now_s();
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Times fn(arg) after the caller's warm-up (whose time was warm_s). */
void time_it(void (*fn)(void *), void *arg, double warm_s, Row *r) {
  Timed one = {fn, arg, reps_for(warm_s), r};
  time_rounds(&one, 1, 0);
}

/* Times the n rows in rounds, one run of each row a round, until each has
 * had its repetitions: every row then sees the same load over the same
 * stretch of time, and their ratios are fair on a busy machine. */
void time_rounds(Timed *t, int n, int cpu) {
  int most = 0;
  double *all = xmalloc(sizeof(double) * (size_t)n * (size_t)(g_set.min_reps + 1));
  for (int i = 0; i < n; i++) {
    if (t[i].reps > g_set.min_reps) t[i].reps = g_set.min_reps;
    if (t[i].reps > most) most = t[i].reps;
  }
  for (int k = 0; k < most; k++)
    for (int i = 0; i < n; i++) {
      if (k >= t[i].reps) continue;
      double t0 = clock_s(cpu);
      t[i].fn(t[i].arg);
      all[i * (g_set.min_reps + 1) + k] = clock_s(cpu) - t0;
    }
  for (int i = 0; i < n; i++) {
    double *ti = all + i * (g_set.min_reps + 1);
    t[i].row->med = median_sorted_ms(ti, t[i].reps);   /* sorts ti */
    t[i].row->min = ti[0] * 1e3;
    t[i].row->reps = t[i].reps;
    t[i].row->timed = 1;
  }
  free(all);
}

/* Bytes of t's arrays in use (lengths, not capacities). */
double used_bytes(const tj_tensor *t) {
  const tj_storage *s = &t->st;
  double b = (double)s->vals_len * rt_dtype_size((tj_dtype)s->dtype);
  for (int l = 0; l < s->order; l++)
    b += (double)s->levels[l].pos_len * s->pos_width + (double)s->levels[l].crd_len * s->crd_width;
  return b;
}

/* Rows measured elsewhere (the OpenBLAS SkylakeX child) that join a case's
 * table at threads 1 and 2, so they count as peers. */
static Row g_extra[3];

void tj_run(void *p) {
  TjRun *r = p;
  r->st = tj_kernel_run(r->k, r->phase, NULL, 0);
}

void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if ((unsigned char)*s < 32) fputc(' ', f);
    else fputc(*s, f);
  }
  fputc('"', f);
}

/* The compile's stages as "compile_stages_ms": {...} (after a comma). */
static void json_stages(FILE *f, const tj_compile_times *t) {
  fprintf(f, ", \"compile_stages_ms\": {\"parse\": %.4g, \"setup\": %.4g, \"lower\": %.4g, "
          "\"llvm_ir\": %.4g, \"optimize\": %.4g, \"codegen\": %.4g, \"cache_hit\": %d}",
          t->parse_ms, t->setup_ms, t->lower_ms, t->llvm_ir_ms, t->optimize_ms, t->codegen_ms,
          t->cache_hit);
  fprintf(f, ", \"compile_stages_cpu_ms\": {\"lower\": %.4g, \"llvm_ir\": %.4g, "
          "\"optimize\": %.4g, \"codegen\": %.4g, \"total\": %.4g}",
          t->lower_cpu_ms, t->llvm_ir_cpu_ms, t->optimize_cpu_ms, t->codegen_cpu_ms,
          t->total_cpu_ms);
}

static void emit_rows(Case *c, int nth, Row *rows, int n) {
  double best_peer = INFINITY, tj = rows[0].timed ? rows[0].med : NAN;
  for (int i = 1; i < n; i++)
    if (rows[i].timed && !rows[i].unranked && rows[i].med < best_peer) best_peer = rows[i].med;
  double peak = (c->is_f32 ? g_peak_f : g_peak_d)[nth], bw = g_bw[nth];
  for (int i = 0; i < n; i++) {
    Row *r = &rows[i];
    char buf[64] = "";
    if (!r->timed) {
      printf("%-8s %-16s %d  %-14s %s %s\n", c->kernel, c->input, nth, r->impl,
             r->ok ? "skipped:" : "FAIL:", r->note);
    } else {
      double gf = c->flops / (r->med * 1e-3) / 1e9, gb = c->bytes / (r->med * 1e-3) / 1e9;
      double ai = c->flops / c->bytes, att = fmin(peak, ai * bw);
      double vs = best_peer / r->med;
      if (r->compile_ms > 0) snprintf(buf, sizeof buf, "%.1f", r->compile_ms);
      printf("%-8s %-16s %d  %-14s %10.3f %10.3f %8.2f %7.2f %6.1f %7s %9s  %s\n", c->kernel,
             c->input, nth, r->impl, r->med, r->min, gf, gb, 100 * gf / att,
             isfinite(vs) ? (snprintf(buf + 32, 32, "%.2fx", vs), buf + 32) : "-", buf,
             r->note);
    }
    fprintf(g_json, "%s\n  {\"kernel\": ", g_nrows_json++ ? "," : "");
    json_str(g_json, c->kernel);
    fprintf(g_json, ", \"input\": ");
    json_str(g_json, c->input);
    fprintf(g_json, ", \"expr\": ");
    json_str(g_json, c->expr);
    fprintf(g_json, ", \"threads\": %d, \"impl\": ", nth);
    json_str(g_json, r->impl);
    fprintf(g_json, ", \"ok\": %s, \"timed\": %s, \"dtype\": \"%s\"", r->ok ? "true" : "false",
            r->timed ? "true" : "false", c->is_f32 ? "f32" : "f64");
    if (r->timed)
      fprintf(g_json,
              ", \"median_ms\": %.6g, \"min_ms\": %.6g, \"reps\": %d, \"flops\": %.6g, "
              "\"bytes\": %.6g, \"gflops\": %.6g, \"gbs\": %.6g, \"max_rel_err\": %.3g, "
              "\"tensorjit_ms\": %.6g, \"best_peer_ms\": %.6g",
              r->med, r->min, r->reps, c->flops, c->bytes, c->flops / (r->med * 1e-3) / 1e9,
              c->bytes / (r->med * 1e-3) / 1e9, r->err, isfinite(tj) ? tj : -1,
              isfinite(best_peer) ? best_peer : -1);
    if (r->unranked) fprintf(g_json, ", \"unranked\": true");
    if (r->compile_ms > 0) fprintf(g_json, ", \"compile_ms\": %.6g", r->compile_ms);
    if (r->stages.total_ms > 0) json_stages(g_json, &r->stages);
    fprintf(g_json, ", \"note\": ");
    json_str(g_json, r->note);
    fprintf(g_json, "}");
  }
  fflush(stdout);
  fflush(g_json);
}

tj_kernel *tj_build(tj_context *cx, Case *c, const tj_options *opts, Row *r) {
  tj_options o = *opts;
  int nth = o.nthreads;
  char s[256];
  const char *tries[3];
  int nt = 0;
  char outer[8] = "i";
  const char *lp = strchr(c->expr, '(');
  if (lp && lp < strchr(c->expr, '=')) { outer[0] = lp[1]; outer[1] = 0; }
  if (nth > 1 && lp && lp < strchr(c->expr, '=')) {
    snprintf(s, sizeof s, "%s%sparallelize(%s)", c->sched ? c->sched : "", c->sched ? " " : "", outer);
    tries[nt++] = s;
  }
  if (c->sched) tries[nt++] = c->sched;
  tries[nt++] = NULL;
  char first_err[200] = "";
  for (int i = 0; i < nt; i++) {
    tj_kernel *k = NULL;
    double t0 = now_s();
    if (tj_compile(cx, c->expr, c->ops, c->nops, tries[i], &o, &k) == TJ_OK) {
      r->compile_ms = (now_s() - t0) * 1e3;
      tj_compile_times tm = tj_kernel_times(k);
      if (tm.total_ms > 0 && !tm.cache_hit) r->compile_ms = tm.total_ms;
      r->stages = tm;
      if (i > 0 && tries[0])
        snprintf(r->note, sizeof r->note, "schedule '%s' refused (%.120s); used %s", tries[0],
                 first_err, tries[i] ? tries[i] : "none");
      else if (tries[i])
        snprintf(r->note, sizeof r->note, "schedule: %s", tries[i]);
      return k;
    }
    if (i == 0) snprintf(first_err, sizeof first_err, "%s", tj_last_error());
  }
  snprintf(r->note, sizeof r->note, "tensorjit compile error: %.200s", first_err);
  return NULL;
}

/* Runs c at 1 and 2 threads. Each thread count compiles in a fresh
 * context so the compile column is a real (warm, uncached) compile. */
static void run_case(tj_context *unused, Case *c) {
  (void)unused;
  if (g_set.only && !strstr(c->kernel, g_set.only)) return;
  tj_context *cx1 = NULL;
  c->kernel_1t = NULL;
  for (int nth = 1; nth <= 2; nth++) {
    if (g_set.threads && nth != g_set.threads) continue;
    tj_context *cx;
    if (tj_context_new(&cx) != TJ_OK) { fprintf(stderr, "tjbench: %s\n", tj_last_error()); exit(2); }
    Row rows[MAX_PEERS + 3];
    Timed timed[MAX_PEERS + 2];
    int ntimed = 0;
    const Peer *peers[MAX_PEERS + 1];
    int npeers = c->npeers;
    memcpy(peers, c->peers, sizeof c->peers);
    if (nth == 2) peers[npeers++] = &P_TJ_1T;   /* 2 threads against 1, interleaved */
    void *states[MAX_PEERS + 1];
    memset(rows, 0, sizeof rows);
    memset(states, 0, sizeof states);
    Out ref;
    int have_ref = 0;
    rows[0].impl = "tensorjit";
    tj_options o = tj_options_default();
    o.nthreads = nth;
    TjRun tr = {tj_build(cx, c, &o, &rows[0]), TJ_OK, TJ_EVALUATE};
    if (tr.k) {
      double t0 = now_s();
      tj_run(&tr);
      double warm = now_s() - t0;
      if (c->okind == OUT_VALS) tr.phase = TJ_COMPUTE;
      if (tr.st != TJ_OK) {
        snprintf(rows[0].note, sizeof rows[0].note, "tensorjit run error: %.200s", tj_last_error());
        g_tj_errors++;
      } else {
        if (nth == 1) c->kernel_1t = tr.k;
        c->bytes = 0;
        for (int i = 0; i < c->nops; i++) c->bytes += used_bytes(c->ops[i]);
        out_from_tensor(c, c->ops[0], &ref);
        have_ref = 1;
        rows[0].ok = 1;
        if (c->sched && strstr(c->sched, "method(sell)"))   /* what the first run chose */
          snprintf(rows[0].note + strlen(rows[0].note), sizeof rows[0].note - strlen(rows[0].note),
                   c->ops[1]->sell ? " (SELL copy)" : " (CSR loops: rows average %d+ entries)",
                   RT_SELL_MAX_MEAN);
        timed[ntimed++] = (Timed){tj_run, &tr, reps_for(warm), &rows[0]};
      }
    } else {
      g_tj_errors++;
    }
    int n = 1;
    int one_t = -1;   /* the tj-1thread row */
    for (int p = 0; p < npeers; p++) {
      const Peer *pe = peers[p];
      if (nth > pe->max_threads) continue;
      if (pe == &P_TJ_1T) one_t = n;
      Row *r = &rows[n++];
      r->impl = pe->name;
      r->unranked = pe->unranked;
      c->note[0] = 0;
      g_cgen_last_cc_ms = 0;
      lib_set_threads(nth);
      void *st = pe->setup ? pe->setup(c, nth) : NULL;
      if (!st) { r->ok = 1; snprintf(r->note, sizeof r->note, "%s", c->note); continue; }
      states[p] = st;
      snprintf(r->note, sizeof r->note, "%s", c->note);   /* what the setup chose, if anything */
      r->compile_ms = g_cgen_last_cc_ms;
      double t0 = now_s();
      pe->run(st);
      double warm = now_s() - t0;
      Out o;
      memset(&o, 0, sizeof o);
      pe->out(st, &o);
      if (!have_ref) {
        if (o.n < 0) { snprintf(r->note, sizeof r->note, "run error"); continue; }
        ref = o; have_ref = 1; r->ok = 1;
        snprintf(r->note, sizeof r->note, "unchecked: no tensorjit result; reference for the others");
      } else {
        char why[128] = "";
        double err = compare(&ref, &o, why, sizeof why);
        double tol = c->is_f32 ? 1e-3 : 1e-8;
        r->err = err;
        if (err < 0 || !(err <= tol)) {
          if (err >= 0) snprintf(why, sizeof why, "max relative error %.3g > %.0e", err, tol);
          snprintf(r->note, sizeof r->note, "disagrees with %s: %s",
                   rows[0].ok ? "tensorjit" : "the reference peer", why);
          g_fails++;
          continue;
        }
        r->ok = 1;
      }
      timed[ntimed++] = (Timed){pe->run, st, reps_for(warm), r};
      if (pe == &P_TJ_C && r->note[0] == 0)
        snprintf(r->note, sizeof r->note, "cc -O3 -march=native %.0f ms", r->compile_ms);
    }
    time_rounds(timed, ntimed, g_set.cpu && nth == 1);
    if (rows[0].timed && tr.st != TJ_OK) {
      snprintf(rows[0].note, sizeof rows[0].note, "tensorjit run error: %.200s", tj_last_error());
      rows[0].timed = rows[0].ok = 0;
      g_tj_errors++;
    }
    if (one_t > 0 && rows[0].timed && rows[one_t].timed)
      snprintf(rows[one_t].note, sizeof rows[one_t].note,
               "1 thread / 2 threads (tensorjit): %.2fx (mins %.2fx)", rows[one_t].med / rows[0].med,
               rows[one_t].min / rows[0].min);
    if (g_extra[nth].impl) rows[n++] = g_extra[nth];
    emit_rows(c, nth, rows, n);
    for (int p = 0; p < npeers; p++)
      if (states[p]) peers[p]->done(states[p]);
    if (nth == 1) cx1 = cx;
    else tj_context_free(cx);
  }
  c->kernel_1t = NULL;
  tj_context_free(cx1);
}

/* ---- cases -------------------------------------------------------------- */

static Case *case_new(const char *kernel, const char *input, const char *expr, OutKind ok) {
  Case *c = xcalloc(1, sizeof *c);
  c->kernel = kernel;
  snprintf(c->input, sizeof c->input, "%s", input);
  c->expr = expr;
  c->okind = ok;
  return c;
}
/* Adds p to c's peers, unless p is absent (the suite's header said so). */
static void case_peer(Case *c, const Peer *p) {
  if (p->available && !p->available()) return;
  if (c->npeers == MAX_PEERS) {
    fprintf(stderr, "tjbench: %s has more than MAX_PEERS = %d peers\n", c->kernel, MAX_PEERS);
    exit(2);
  }
  c->peers[c->npeers++] = p;
}
/* Frees the tensors a case created (those not in keep[]). */
static void case_free(Case *c, tj_tensor *k1, tj_tensor *k2) {
  for (int i = 0; i < c->nops; i++)
    if (c->ops[i] != k1 && c->ops[i] != k2) tj_tensor_free(c->ops[i]);
  free(c->aux);
  free(c);
}
static int64_t nnz_of(const tj_tensor *t) { return t->st.vals_len; }

static void run_matrix(tj_context *cx, const char *input, tj_tensor *A, int level) {
  int64_t nr = A->st.dims[0], nc = A->st.dims[1], nnz = nnz_of(A);
  const int64_t R = 64;
  Case *c;
  /* SpMV CSR / CSC / COO */
  tj_tensor_rename(A, "A");
  c = case_new("spmv-csr", input, "y(i) = A(i,j) * x(j)", OUT_DENSE);
  c->ops[0] = in_empty("y", TJ_F64, 1, &nr, NULL); c->ops[1] = A;
  c->ops[2] = in_dense("x", TJ_F64, 1, &nc, 11); c->nops = 3;
  c->flops = 2.0 * (double)nnz;
  c->sched = "method(sell)";   /* a SELL-8 copy made once, as MKL's optimize does */
  case_peer(c, &P_HAND_SPMV_CSR); case_peer(c, &P_GRB_MXV); case_peer(c, &P_MKL_MV);
  case_peer(c, &P_MLIR); case_peer(c, &P_MLIR_VL8); case_peer(c, &P_TJ_C); case_peer(c, &P_TJ_LOOPS);
  run_case(cx, c);
  tj_tensor *x = c->ops[2], *y = c->ops[0];
  free(c);
  if (level >= 2) {
    const char *fmts[2] = {"ds:1,0", "uq"};
    const char *names[2] = {"spmv-csc", "spmv-coo"};
    for (int f = 0; f < 2; f++) {
      tj_tensor *B = in_convert(A, "A", fmts[f]);
      c = case_new(names[f], input, "y(i) = A(i,j) * x(j)", OUT_DENSE);
      c->ops[0] = y; c->ops[1] = B; c->ops[2] = x; c->nops = 3;
      c->flops = 2.0 * (double)nnz;
      case_peer(c, f ? &P_HAND_SPMV_COO : &P_HAND_SPMV_CSC);
      if (!f) case_peer(c, &P_GRB_MXV);
      case_peer(c, &P_MKL_MV);
      case_peer(c, &P_MLIR); case_peer(c, &P_MLIR_VL8);
      case_peer(c, &P_TJ_C);
      run_case(cx, c);
      free(c);
      tj_tensor_free(B);
    }
  }
  tj_tensor_free(x); tj_tensor_free(y);
  if (level < 1) return;
  /* SpMM */
  int64_t dC[2] = {nr, R}, dB[2] = {nc, R};
  c = case_new("spmm", input, "C(i,j) = A(i,k) * B(k,j)", OUT_DENSE);
  c->ops[0] = in_empty("C", TJ_F64, 2, dC, NULL); c->ops[1] = A;
  c->ops[2] = in_dense("B", TJ_F64, 2, dB, 12); c->nops = 3; c->R = R;
  c->flops = 2.0 * (double)nnz * R;
  case_peer(c, &P_HAND_SPMM); case_peer(c, &P_GRB_SPMM); case_peer(c, &P_MKL_MM);
  case_peer(c, &P_MLIR); case_peer(c, &P_MLIR_VL8); case_peer(c, &P_TJ_C);
  run_case(cx, c);
  case_free(c, A, NULL);
  if (level < 2) return;
  /* SDDMM */
  tj_tensor_rename(A, "B");
  int64_t dC2[2] = {nr, R}, dD[2] = {nc, R};
  c = case_new("sddmm", input, "A(i,j) = B(i,j) * C(i,k) * D(j,k)", OUT_CSR);
  c->ops[0] = in_empty("A", TJ_F64, 2, A->st.dims, "ds"); c->ops[1] = A;
  c->ops[2] = in_dense("C", TJ_F64, 2, dC2, 13); c->ops[3] = in_dense("D", TJ_F64, 2, dD, 14);
  c->nops = 4; c->R = R;
  c->flops = (2.0 * R + 1) * (double)nnz;
  case_peer(c, &P_HAND_SDDMM); case_peer(c, &P_MLIR); case_peer(c, &P_MLIR_VL8);
  case_peer(c, &P_TJ_C);
  run_case(cx, c);
  case_free(c, A, NULL);
}

static void run_add(tj_context *cx, const char *input, tj_tensor *A) {
  tj_tensor *C = in_csr_colperm("C", A);
  tj_tensor_rename(A, "B");
  Case *c = case_new("add", input, "A(i,j) = B(i,j) + C(i,j)", OUT_CSR);
  c->ops[0] = in_empty("A", TJ_F64, 2, A->st.dims, "ds"); c->ops[1] = A; c->ops[2] = C;
  c->nops = 3;
  c->flops = (double)(nnz_of(A) + nnz_of(C));
  case_peer(c, &P_HAND_ADD); case_peer(c, &P_GRB_ADD); case_peer(c, &P_MKL_ADD);
  case_peer(c, &P_MLIR); case_peer(c, &P_TJ_C);
  case_peer(c, &P_TJ_ASSEMBLE); case_peer(c, &P_TJ_COMPUTE); case_peer(c, &P_TJ_FRESH);
  run_case(cx, c);
  case_free(c, A, NULL);
}

static void run_spgemm(tj_context *cx, const char *input, tj_tensor *A) {
  tj_tensor *C = in_convert(A, "C", "ds");
  tj_tensor_rename(A, "B");
  Case *c = case_new("spgemm", input, "A(i,j) = B(i,k) * C(k,j)", OUT_CSR);
  c->ops[0] = in_empty("A", TJ_F64, 2, A->st.dims, "ds"); c->ops[1] = A; c->ops[2] = C;
  c->nops = 3;
  const int32_t *bc = A->st.levels[1].crd, *cp = C->st.levels[1].pos;
  double mults = 0;
  for (int64_t q = 0; q < nnz_of(A); q++) mults += cp[bc[q] + 1] - cp[bc[q]];
  c->flops = 2 * mults;
  case_peer(c, &P_HAND_SPGEMM); case_peer(c, &P_GRB_SPGEMM); case_peer(c, &P_MKL_SP2M_SORTED);
  case_peer(c, &P_MKL_SP2M); case_peer(c, &P_MLIR); case_peer(c, &P_TJ_C);
  case_peer(c, &P_TJ_UNSORTED); case_peer(c, &P_TJ_ASSEMBLE); case_peer(c, &P_TJ_COMPUTE);
  run_case(cx, c);
  case_free(c, A, NULL);
}

static void run_tensor3(tj_context *cx, const char *input, tj_tensor *B) {
  int64_t I = B->st.dims[0], J = B->st.dims[1], K = B->st.dims[2], nnz = nnz_of(B);
  int64_t nfib = B->st.levels[1].crd_len;
  Case *c;
  tj_tensor_rename(B, "B");
  /* TTV */
  c = case_new("ttv", input, "A(i,j) = B(i,j,k) * c(k)", OUT_VALS);
  int64_t d2[2] = {I, J};
  c->ops[0] = in_empty("A", TJ_F64, 2, d2, "ss"); c->ops[1] = B;
  c->ops[2] = in_dense("c", TJ_F64, 1, &K, 21); c->nops = 3;
  c->flops = 2.0 * (double)nnz;
  case_peer(c, &P_HAND_TTV); case_peer(c, &P_TJ_C);
  run_case(cx, c);
  case_free(c, B, NULL);
  /* TTM, 16 columns */
  c = case_new("ttm", input, "A(i,j,k) = B(i,j,l) * C(k,l)", OUT_VALS);
  int64_t R = 16, d3[3] = {I, J, R}, dC[2] = {R, K};
  c->ops[0] = in_empty("A", TJ_F64, 3, d3, "sss"); c->ops[1] = B;
  c->ops[2] = in_dense("C", TJ_F64, 2, dC, 22); c->nops = 3; c->R = R;
  c->flops = 2.0 * (double)nnz * R;
  case_peer(c, &P_HAND_TTM); case_peer(c, &P_TJ_C);
  run_case(cx, c);
  case_free(c, B, NULL);
  /* MTTKRP, rank 16 and 64 */
  for (int ri = 0; ri < 2; ri++) {
    int64_t r = ri ? 64 : 16, dA[2] = {I, r}, dCm[2] = {J, r}, dD[2] = {K, r};
    c = case_new(ri ? "mttkrp64" : "mttkrp16", input, "A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", OUT_DENSE);
    c->ops[0] = in_empty("A", TJ_F64, 2, dA, NULL); c->ops[1] = B;
    c->ops[2] = in_dense("C", TJ_F64, 2, dCm, 23); c->ops[3] = in_dense("D", TJ_F64, 2, dD, 24);
    c->nops = 4; c->R = r;
    c->flops = 2.0 * (double)r * (double)(nnz + nfib);
    case_peer(c, &P_HAND_MTTKRP); case_peer(c, &P_MLIR); case_peer(c, &P_MLIR_VL8);
    case_peer(c, &P_TJ_C);
    run_case(cx, c);
    case_free(c, B, NULL);
  }
  /* inner product with a copy of B (same pattern, renamed C) */
  tj_tensor *C = in_convert(B, "C", "sss");
  c = case_new("inner", input, "a = B(i,j,k) * C(i,j,k)", OUT_DENSE);
  c->ops[0] = in_empty("a", TJ_F64, 0, NULL, NULL); c->ops[1] = B; c->ops[2] = C; c->nops = 3;
  c->flops = 2.0 * (double)nnz;
  case_peer(c, &P_HAND_INNER); case_peer(c, &P_TJ_C);
  run_case(cx, c);
  case_free(c, B, NULL);
}

/* ---- dense: GEMM (with OpenBLAS SkylakeX in a child) and TCCG ---- */

typedef struct Child { double med[3], min[3], sum[3]; int ok; } Child;

static void blas_child(int n, int f32) {
  int64_t d[2] = {n, n};
  tj_dtype dt = f32 ? TJ_F32 : TJ_F64;
  Case c = {0};
  c.is_f32 = f32;
  c.ops[0] = in_empty("A", dt, 2, d, NULL);
  c.ops[1] = in_dense("B", dt, 2, d, f32 ? 41 : 31);
  c.ops[2] = in_dense("C", dt, 2, d, f32 ? 42 : 32);
  for (int nth = 1; nth <= 2; nth++) {
    void *st = P_BLAS_GEMM.setup(&c, nth);
    double t0 = now_s();
    P_BLAS_GEMM.run(st);
    Row r = {0};
    time_it(P_BLAS_GEMM.run, st, now_s() - t0, &r);
    Out o;
    P_BLAS_GEMM.out(st, &o);
    double s = 0;
    for (int64_t i = 0; i < o.n; i++) s += fabs(val_at(&o, i));
    printf("child %d %.6g %.6g %.17g\n", nth, r.med, r.min, s);
    P_BLAS_GEMM.done(st);
  }
}

static Child run_child(const char *self, int n, int f32) {
  Child ch = {0};
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "OPENBLAS_CORETYPE=SkylakeX '%s' --blas-child %d %d %s", self, n, f32,
           g_set.quick ? "--quick" : "");
  FILE *p = popen(cmd, "r");
  if (!p) return ch;
  char line[256];
  while (fgets(line, sizeof line, p)) {
    int t;
    double a, b, s;
    if (sscanf(line, "child %d %lf %lf %lf", &t, &a, &b, &s) == 4 && t >= 1 && t <= 2) {
      ch.med[t] = a; ch.min[t] = b; ch.sum[t] = s; ch.ok++;
    }
  }
  pclose(p);
  return ch;
}

static void run_gemm(tj_context *cx, const char *self, int n, int f32) {
  if (g_set.only && !strstr(f32 ? "sgemm" : "dgemm", g_set.only)) return;
  int64_t d[2] = {n, n};
  tj_dtype dt = f32 ? TJ_F32 : TJ_F64;
  char input[64];
  snprintf(input, sizeof input, "n=%d", n);
  Case *c = case_new(f32 ? "sgemm" : "dgemm", input, "A(i,j) = B(i,k) * C(k,j)", OUT_DENSE);
  c->is_f32 = f32;
  c->ops[0] = in_empty("A", dt, 2, d, NULL);
  c->ops[1] = in_dense("B", dt, 2, d, f32 ? 41 : 31);
  c->ops[2] = in_dense("C", dt, 2, d, f32 ? 42 : 32);
  c->nops = 3;
  c->flops = 2.0 * n * (double)n * n;
  case_peer(c, &P_BLAS_GEMM); case_peer(c, &P_MKL_GEMM); case_peer(c, &P_HAND_GEMM);
  case_peer(c, &P_TJ_C);
  /* OpenBLAS reads OPENBLAS_CORETYPE once at load: a child process runs
   * the same dgemm/sgemm with SkylakeX kernels and reports a checksum,
   * compared with the reference (same inputs, computed here by BLAS). */
  Child ch = run_child(self, n, f32);
  double s = 0;
  {
    void *st = P_BLAS_GEMM.setup(c, 1);
    P_BLAS_GEMM.run(st);
    Out o;
    P_BLAS_GEMM.out(st, &o);
    for (int64_t i = 0; i < o.n; i++) s += fabs(val_at(&o, i));
    P_BLAS_GEMM.done(st);
  }
  for (int nth = 1; nth <= 2; nth++) {
    Row *r = &g_extra[nth];
    memset(r, 0, sizeof *r);
    r->impl = "BLAS-SkylakeX";
    if (!ch.med[nth]) {
      r->ok = 1;
      snprintf(r->note, sizeof r->note, "child run with OPENBLAS_CORETYPE=SkylakeX failed");
    } else if (fabs(ch.sum[nth] - s) > (f32 ? 1e-3 : 1e-9) * s) {
      snprintf(r->note, sizeof r->note, "checksum disagrees with the reference (%.6g vs %.6g)", ch.sum[nth], s);
      g_fails++;
    } else {
      r->ok = r->timed = 1; r->med = ch.med[nth]; r->min = ch.min[nth]; r->reps = g_set.min_reps;
      snprintf(r->note, sizeof r->note, "OPENBLAS_CORETYPE=SkylakeX child (checksum-checked)");
    }
  }
  run_case(cx, c);
  memset(g_extra, 0, sizeof g_extra);
  case_free(c, NULL, NULL);
}

/* Parses "C(b,a) = A(c,a) * B(b,c)" into index letter lists. */
static int parse_acc(const char *s, char *idx) {
  const char *p = strchr(s, '(');
  int n = 0;
  for (p++; *p && *p != ')'; p++)
    if (*p >= 'a' && *p <= 'z') idx[n++] = *p;
  idx[n] = 0;
  return n;
}

static void run_tccg(tj_context *cx, const char *path, const char *want, double target_gflop) {
  if (g_set.only && !strstr("tccg", g_set.only)) return;
  FILE *f = fopen(path, "r");
  if (!f) { printf("tccg: %s missing, skipped\n", path); return; }
  char line[512];
  while (fgets(line, sizeof line, f)) {
    char *fld[5];
    int nf = 0;
    char *save = NULL;
    for (char *t = strtok_r(line, "\t\n", &save); t && nf < 5; t = strtok_r(NULL, "\t\n", &save))
      fld[nf++] = t;
    if (nf < 5 || strcmp(fld[1], want) != 0) continue;
    int64_t ext[26] = {0};
    char *sz = fld[2];
    for (char *t = strtok_r(sz, ";", &save); t; t = strtok_r(NULL, ";", &save))
      ext[t[0] - 'a'] = atoll(t + 2);
    double gflop = atof(fld[3]);
    char ci[16], ai[16], bi[16];
    const char *rhs = strchr(fld[4], '=');
    int nc = parse_acc(fld[4], ci), na = parse_acc(rhs, ai), nb = parse_acc(strchr(rhs, '*'), bi);
    char all[27] = "";
    int nidx = 0;
    for (int i = 0; i < nc - 1; i++) all[nidx++] = ci[i];
    for (const char *q = ai; *q; q++)
      if (!strchr(ci, *q)) all[nidx++] = *q;
    for (const char *q = bi; *q; q++)
      if (!strchr(ci, *q) && !memchr(all, *q, (size_t)nidx)) all[nidx++] = *q;
    all[nidx++] = ci[nc - 1];
    double scale = pow(target_gflop / gflop, 1.0 / nidx);
    for (int l = 0; l < 26; l++)
      if (ext[l]) ext[l] = llround(fmax(2.0, (double)ext[l] * scale));
    Tccg *tc = xcalloc(1, sizeof *tc);
    tc->nidx = nidx;
    double prod = 1;
    for (int d = 0; d < nidx; d++) { tc->ext[d] = ext[all[d] - 'a']; prod *= (double)tc->ext[d]; }
    const char *lists[3] = {ai, bi, ci};
    int64_t *strides[3] = {tc->sa, tc->sb, tc->sc};
    int64_t dims[3][8];
    for (int t = 0; t < 3; t++) {
      int m = (int)strlen(lists[t]);
      int64_t st = 1;
      for (int q = m - 1; q >= 0; q--) {
        int d = (int)(strchr(all, lists[t][q]) - all);
        strides[t][d] = st;
        dims[t][q] = ext[lists[t][q] - 'a'];
        st *= dims[t][q];
      }
    }
    char input[sizeof ((Case *)0)->input];
    snprintf(input, sizeof input, "%s", want);
    static char exprs[3][128];
    static int ne;
    char *expr = exprs[ne++ % 3];
    snprintf(expr, 128, "%s", fld[4]);
    Case *c = case_new("tccg", input, expr, OUT_DENSE);
    c->aux = tc;
    c->ops[0] = in_empty("C", TJ_F64, nc, dims[2], NULL);
    c->ops[1] = in_dense("A", TJ_F64, na, dims[0], 51);
    c->ops[2] = in_dense("B", TJ_F64, nb, dims[1], 52);
    c->nops = 3;
    c->flops = 2 * prod;
    case_peer(c, &P_HAND_TCCG); case_peer(c, &P_TJ_C);
    run_case(cx, c);
    case_free(c, NULL, NULL);
    break;
  }
  fclose(f);
}

/* ---- compile latency ----------------------------------------------------- */

typedef struct Lat {
  double first, warm_spmv, warm_mttkrp, hit, cc_spmv, cc_mttkrp;
  int hit_flag;
  tj_compile_times first_st, spmv_st, mttkrp_st;   /* stages: first, last warm */
} Lat;

static double compile_once(tj_context *cx, const char *expr, tj_tensor **ops, int n, tj_kernel **k,
                           int *hit) {
  tj_options o = tj_options_default();
  o.nthreads = 1;
  double t0 = now_s();
  if (tj_compile(cx, expr, ops, n, NULL, &o, k) != TJ_OK) {
    printf("compile-latency: %s: %s\n", expr, tj_last_error());
    return -1;
  }
  double ms = (now_s() - t0) * 1e3;
  if (hit) *hit = tj_kernel_times(*k).cache_hit;
  return ms;
}

static double median5(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_dbl);
  return v[n / 2];
}

static Lat compile_latency(void) {
  Lat L = {0};
  tj_tensor *sp[3], *mt[4];
  in_compile_operands(sp, mt);
  const char *e1 = "y(i) = A(i,j) * x(j)", *e2 = "A(i,j) = B(i,k,l) * C(k,j) * D(l,j)";
  tj_context *cx;
  tj_kernel *k;
  tj_context_new(&cx);
  L.first = compile_once(cx, e1, sp, 3, &k, NULL);
  if (L.first >= 0) L.first_st = tj_kernel_times(k);
  double w1[5], w2[5];
  tj_kernel *ks = NULL, *km = NULL;  /* kernels of cx (cache hit, MTTKRP) */
  for (int i = 0; i < 5; i++) {
    tj_context *c2;
    tj_context_new(&c2);
    w1[i] = compile_once(c2, e1, sp, 3, &k, NULL);
    if (w1[i] >= 0) L.spmv_st = tj_kernel_times(k);
    w2[i] = compile_once(c2, e2, mt, 4, &k, NULL);
    if (w2[i] >= 0) L.mttkrp_st = tj_kernel_times(k);
    tj_context_free(c2);
  }
  L.warm_spmv = median5(w1, 5);
  L.warm_mttkrp = median5(w2, 5);
  compile_once(cx, e2, mt, 4, &km, NULL);
  L.hit = compile_once(cx, e1, sp, 3, &ks, &L.hit_flag);
  char err[256];
  void *so;
  L.cc_spmv = cgen_build(ks, &so, err, sizeof err);
  if (so) dlclose(so);
  L.cc_mttkrp = km ? cgen_build(km, &so, err, sizeof err) : -1;
  if (so) dlclose(so);
  tj_context_free(cx);
  in_compile_operands_free(sp, mt);
  return L;
}

/* ---- main ----------------------------------------------------------------- */

static void usage(void) {
  fprintf(stderr, "usage: tjbench [--quick] [--only KERNEL|ratios] [--cpu] [--reps N] [--threads 1|2] "
          "[--out DIR] [--data DIR]\n");
  exit(2);
}

static void machine_json(FILE *f) {
  char model[256] = "unknown";
  FILE *c = fopen("/proc/cpuinfo", "r");
  if (c) {
    char line[512];
    while (fgets(line, sizeof line, c))
      if (!strncmp(line, "model name", 10)) {
        char *p = strchr(line, ':');
        if (p) { snprintf(model, sizeof model, "%s", p + 2); model[strcspn(model, "\n")] = 0; }
        break;
      }
    fclose(c);
  }
  fprintf(f, "  \"machine\": {\"cpu\": ");
  json_str(f, model);
  fprintf(f, ", \"cores\": %ld, \"avx512f\": %s, \"avx2\": %s, \"blas\": \"%s\", \"graphblas\": %s, "
          "\"mkl\": ", sysconf(_SC_NPROCESSORS_ONLN),
          __builtin_cpu_supports("avx512f") ? "true" : "false",
          __builtin_cpu_supports("avx2") ? "true" : "false", blas_name(),
          have_graphblas() ? "true" : "false");
  json_str(f, mkl_status());
  fprintf(f, ", \"mlir\": ");
  json_str(f, mlir_status());
  fprintf(f, "},\n");
}

static void table_header(void) {
  printf("\n%-8s %-16s %s  %-14s %10s %10s %8s %7s %6s %7s %9s  %s\n", "kernel", "input", "T",
         "impl", "median_ms", "min_ms", "GFLOP/s", "GB/s", "%roof", "vs-best", "compile", "note");
}

tj_tensor *real_matrix(const char *data, const char *file) {
  char path[1024];
  snprintf(path, sizeof path, "%s/matrices/%s", data, file);
  if (access(path, R_OK) != 0) { printf("(input %s missing: skipped)\n", path); return NULL; }
  tj_tensor *t = in_read(path, "A", "ds");
  if (!t) printf("(input %s unreadable: %s)\n", path, tj_last_error());
  else if (t->st.pos_width != 4 || t->st.crd_width != 4) { tj_tensor_free(t); return NULL; }
  return t;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The .mtx files of <data>/matrices, sorted by name, into *out (each and
 * the array the caller's to free); their count, 0 when none or unreadable. */
static int matrix_files(const char *data, char ***out) {
  char path[1024];
  snprintf(path, sizeof path, "%s/matrices", data);
  DIR *d = opendir(path);
  int n = 0, cap = 0;
  char **names = NULL;
  for (struct dirent *e; d && (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".mtx")) continue;
    if (n == cap) {
      char **grown = realloc(names, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *names);
      if (!grown) break;
      names = grown;
    }
    if (!(names[n] = strdup(e->d_name))) break;
    n++;
  }
  if (d) closedir(d);
  if (n) qsort(names, (size_t)n, sizeof *names, by_name);
  *out = names;
  return n;
}

int main(int argc, char **argv) {
  const char *data = TJ_BENCH_DATA;
  g_set.out_dir = "results";
  g_set.src_dir = TJ_SOURCE_DIR;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) g_set.quick = 1;
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) g_set.only = argv[++i];
    else if (!strcmp(argv[i], "--cpu")) g_set.cpu = 1;
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) g_set.reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      g_set.threads = atoi(argv[++i]);
      if (g_set.threads < 1 || g_set.threads > 2) usage();
    }
    else if (!strcmp(argv[i], "--out") && i + 1 < argc) g_set.out_dir = argv[++i];
    else if (!strcmp(argv[i], "--data") && i + 1 < argc) data = argv[++i];
    else if (!strcmp(argv[i], "--blas-child") && i + 2 < argc) {
      int n = atoi(argv[i + 1]), f32 = atoi(argv[i + 2]);
      for (int j = i + 3; j < argc; j++) if (!strcmp(argv[j], "--quick")) g_set.quick = 1;
      g_set.min_reps = g_set.quick ? 5 : 10;
      g_set.budget_s = g_set.quick ? 1.0 : 4.0;
      blas_child(n, f32);
      return 0;
    } else usage();
  }
  int q = g_set.quick;
  g_set.min_reps = g_set.reps > 0 ? g_set.reps : q ? 5 : 10;
  g_set.budget_s = q ? 1.0 : 4.0;
  double t_start = now_s();

  /* The very first compile of the process, before anything warms LLVM. */
  Lat L = compile_latency();

  for (int t = 1; t <= 2; t++) {
    g_bw[t] = probe_triad_gbs(t, q);
    g_peak_d[t] = probe_fma_gflops(t, 0);
    g_peak_f[t] = probe_fma_gflops(t, 1);
  }
  printf("tjbench %s (%s mode): %s, GraphBLAS %s\n", tj_version(), q ? "quick" : "full",
         blas_name(), have_graphblas() ? "yes" : "absent");
  printf("%s\n%s\n", mkl_status(), mlir_status());
  printf("machine limits (measured): triad %.1f / %.1f GB/s, FMA peak f64 %.1f / %.1f, "
         "f32 %.1f / %.1f GFLOP/s (1 / 2 threads)\n",
         g_bw[1], g_bw[2], g_peak_d[1], g_peak_d[2], g_peak_f[1], g_peak_f[2]);

  char path[1024];
  snprintf(path, sizeof path, "mkdir -p '%s'", g_set.out_dir);
  if (system(path) != 0) { fprintf(stderr, "tjbench: cannot create %s\n", g_set.out_dir); return 2; }
  snprintf(path, sizeof path, "%s/bench.json", g_set.out_dir);
  g_json = fopen(path, "w");
  if (!g_json) { fprintf(stderr, "tjbench: cannot write %s\n", path); return 2; }
  fprintf(g_json, "{\n  \"mode\": \"%s\",\n", q ? "quick" : "full");
  machine_json(g_json);
  fprintf(g_json,
          "  \"limits\": {\"triad_gbs\": [%.4g, %.4g], \"peak_gflops_f64\": [%.4g, %.4g], "
          "\"peak_gflops_f32\": [%.4g, %.4g]},\n  \"rows\": [",
          g_bw[1], g_bw[2], g_peak_d[1], g_peak_d[2], g_peak_f[1], g_peak_f[2]);

  tj_context *cx;
  if (tj_context_new(&cx) != TJ_OK) { fprintf(stderr, "tjbench: %s\n", tj_last_error()); return 2; }
  table_header();

  /* sparse matrices: (name, level) level 0 SpMV CSR, 1 + SpMM, 2 + CSC/COO/SDDMM */
  {
    int64_t nu = q ? 50000 : 200000;
    char name[32];
    snprintf(name, sizeof name, "u%lldk", (long long)(nu / 1000));
    tj_tensor *U = in_csr_uniform("A", nu, 16, 1);
    run_matrix(cx, name, U, 2);
    run_add(cx, name, U);
    tj_tensor_free(U);
    if (!q) {
      tj_tensor *M = in_csr_uniform("A", 1000000, 16, 2);
      run_matrix(cx, "u1M", M, 1);
      tj_tensor_free(M);
    }
    tj_tensor *P = in_csr_rmat("A", q ? 15 : 18, 16, 3);
    run_matrix(cx, q ? "rmat15" : "rmat18", P, q ? 0 : 2);
    tj_tensor_free(P);
    struct { const char *file, *name; int level, add, spgemm, quick; } real[] = {
        {"cage11.mtx", "cage11", 2, 1, 1, 1},
        {"bcsstk33.mtx", "bcsstk33", 2, 0, 1, 0},
        {"wiki-Vote.mtx", "wiki-Vote", 0, 0, 0, 0},
        {"luxembourg_osm.mtx", "luxembourg_osm", 0, 0, 1, 0},
    };
    for (size_t r = 0; r < sizeof real / sizeof real[0]; r++) {
      if (q && !real[r].quick) continue;
      tj_tensor *A = real_matrix(data, real[r].file);
      if (!A) continue;
      run_matrix(cx, real[r].name, A, q ? 1 : real[r].level);
      if (real[r].add) run_add(cx, real[r].name, A);
      if (real[r].spgemm) run_spgemm(cx, real[r].name, A);
      tj_tensor_free(A);
    }
    if (!q) { /* SpMV CSR over every other matrix of the data set (issue 18's "every matrix") */
      char **rest = NULL;
      int nrest = matrix_files(data, &rest);
      for (int f = 0; f < nrest; f++) {
        bool listed = false;
        for (size_t r = 0; r < sizeof real / sizeof real[0]; r++) listed |= !strcmp(rest[f], real[r].file);
        tj_tensor *A = listed ? NULL : real_matrix(data, rest[f]);
        if (A) {
          *strrchr(rest[f], '.') = '\0';
          run_matrix(cx, rest[f], A, 0);
          tj_tensor_free(A);
        }
        free(rest[f]);
      }
      free(rest);
    }
  }
  /* order-3 tensors */
  {
    snprintf(path, sizeof path, "%s/tensors/openflight_sym.tns", data);
    tj_tensor *T = access(path, R_OK) == 0 ? in_read(path, "B", "sss") : NULL;
    if (T) { run_tensor3(cx, "openflight_sym", T); tj_tensor_free(T); }
    else printf("(tensor %s missing: skipped)\n", path);
    tj_tensor *R3 = in_tensor3_random("B", q ? 200 : 1000, q ? 100000 : 1000000, 4);
    run_tensor3(cx, q ? "rand3-200" : "rand3-1000", R3);
    tj_tensor_free(R3);
  }
  /* dense */
  run_gemm(cx, argv[0], q ? 1024 : 2048, 0);
  run_gemm(cx, argv[0], q ? 1024 : 2048, 1);
  snprintf(path, sizeof path, "%s/tccg/contractions-f64.tsv", data);
  const char *tc[3] = {"abc-bda-dc", "abcd-ea-ebcd", "abc-adec-ebd"};
  for (int i = 0; i < 3; i++) run_tccg(cx, path, tc[i], q ? 0.05 : 0.5);

  fprintf(g_json, "\n  ],\n  \"ratios\": [");
  if (!g_set.only || strstr("ratios", g_set.only)) ratios_run(data);

  printf("\ncompile latency (ms, 1 thread): first compile in process %.1f; warm SpMV CSR %.1f, "
         "warm MTTKRP CSF %.1f (median of 5, fresh contexts); cache hit %.3f (hit=%d); "
         "cc -O3 -shared of the same C: SpMV %.1f, MTTKRP %.1f (ratio %.1fx / %.1fx)\n",
         L.first, L.warm_spmv, L.warm_mttkrp, L.hit, L.hit_flag, L.cc_spmv, L.cc_mttkrp,
         L.cc_spmv / L.warm_spmv, L.cc_mttkrp / L.warm_mttkrp);
  printf("  stages of the last warm compile (ms): SpMV setup %.2f, lower %.2f, llvm-ir %.2f, "
         "optimize %.2f, codegen %.2f; MTTKRP setup %.2f, lower %.2f, llvm-ir %.2f, optimize "
         "%.2f, codegen %.2f\n", L.spmv_st.setup_ms, L.spmv_st.lower_ms, L.spmv_st.llvm_ir_ms,
         L.spmv_st.optimize_ms, L.spmv_st.codegen_ms, L.mttkrp_st.setup_ms, L.mttkrp_st.lower_ms,
         L.mttkrp_st.llvm_ir_ms, L.mttkrp_st.optimize_ms, L.mttkrp_st.codegen_ms);
  fprintf(g_json,
          "\n  ],\n  \"compile\": {\"first_ms\": %.4g, \"warm_spmv_csr_ms\": %.4g, "
          "\"warm_mttkrp_csf_ms\": %.4g, \"cache_hit_ms\": %.4g, \"cache_hit_flag\": %d, "
          "\"cc_spmv_ms\": %.4g, \"cc_mttkrp_ms\": %.4g",
          L.first, L.warm_spmv, L.warm_mttkrp, L.hit, L.hit_flag, L.cc_spmv, L.cc_mttkrp);
  const char *names[3] = {"first", "warm_spmv_csr", "warm_mttkrp_csf"};
  const tj_compile_times *st[3] = {&L.first_st, &L.spmv_st, &L.mttkrp_st};
  for (int i = 0; i < 3; i++) {
    fprintf(g_json, ", \"%s\": {\"total_ms\": %.4g", names[i], st[i]->total_ms);
    json_stages(g_json, st[i]);
    fprintf(g_json, "}");
  }
  fprintf(g_json, "},\n");
  fprintf(g_json, "  \"summary\": {\"disagreements\": %d, \"tensorjit_errors\": %d, \"wall_s\": %.1f}\n}\n",
          g_fails, g_tj_errors, now_s() - t_start);
  fclose(g_json);
  tj_context_free(cx);
  printf("\n%d disagreement(s), %d tensorjit compile/run error(s), %.0f s; JSON in %s/bench.json\n",
         g_fails, g_tj_errors, now_s() - t_start, g_set.out_dir);
  return g_fails ? 1 : 0;
}

/* The "tensorjit-C" peer: tensorjit's own C rendering of a kernel
 * (tj_kernel_print TJ_STAGE_C) compiled at run time by `cc -O3
 * -march=native -shared -fPIC` into a .so, dlopen'ed and run on a fresh
 * output with the same inputs. It shows what a compiler that emits C
 * (TACO-style) gets, and what the system compiler costs in latency. The
 * runtime helpers the C calls (tj_rt_reserve, ...) resolve against this
 * binary, which is linked with -rdynamic.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#ifndef TJ_BENCH_CC
#define TJ_BENCH_CC "cc"
#endif

double g_cgen_last_cc_ms;
static int g_seq;

double cgen_build(tj_kernel *k, void **so, char *err, size_t n) {
  char dir[] = "/tmp/tjbench-cgen-XXXXXX";
  char src[128], lib[128], cmd[1024];
  *so = NULL;
  if (!mkdtemp(dir)) { snprintf(err, n, "mkdtemp failed"); return -1; }
  snprintf(src, sizeof src, "%s/k%d.c", dir, g_seq);
  snprintf(lib, sizeof lib, "%s/k%d.so", dir, g_seq++);
  FILE *f = fopen(src, "w");
  if (!f) { snprintf(err, n, "cannot write %s", src); return -1; }
  tj_status st = tj_kernel_print(k, TJ_STAGE_C, f);
  fclose(f);
  if (st != TJ_OK) { snprintf(err, n, "C rendering: %s", tj_last_error()); return -1; }
  snprintf(cmd, sizeof cmd, "%s -O3 -march=native -shared -fPIC -I'%s' -o %s %s 2>%s/cc.log",
           TJ_BENCH_CC, g_set.src_dir, lib, src, dir);
  double t0 = now_s();
  int rc = system(cmd);
  double ms = (now_s() - t0) * 1e3;
  if (rc != 0) {
    snprintf(err, n, "cc failed on the C rendering (see %s/cc.log)", dir);
    return -1;
  }
  *so = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!*so) { snprintf(err, n, "dlopen: %s", dlerror()); return -1; }
  unlink(src); unlink(lib);
  char log[160];
  snprintf(log, sizeof log, "%s/cc.log", dir);
  unlink(log);
  rmdir(dir);
  return ms;
}

typedef struct CG {
  Case *c;
  void *so;
  tj_kernel_fn fn;
  tj_tensor *out;
  tj_storage *ops[MAX_OPS];
  tj_format conv[MAX_OPS];   /* an operand the kernel reads converted: its format */
  bool converts[MAX_OPS];
  int rc;
} CG;

static void cg_done(void *p);

static void *cg_setup(Case *c, int nth) {
  if (nth > 1) { snprintf(c->note, sizeof c->note, "C rendering timed serially only"); return NULL; }
  if (!c->kernel_1t) { snprintf(c->note, sizeof c->note, "no tensorjit kernel to render"); return NULL; }
  CG *g = xcalloc(1, sizeof *g);
  g->c = c;
  double ms = cgen_build(c->kernel_1t, &g->so, c->note, sizeof c->note);
  if (ms < 0) { free(g); return NULL; }
  g_cgen_last_cc_ms = ms;
  g->fn = (tj_kernel_fn)dlsym(g->so, "evaluate");
  if (!g->fn) { snprintf(c->note, sizeof c->note, "no `evaluate` in the C rendering"); dlclose(g->so); free(g); return NULL; }
  const tj_tensor *o = c->ops[0];
  if (tj_tensor_new(o->name, (tj_dtype)o->st.dtype, o->st.order, o->st.dims, &o->fmt, &g->out) != TJ_OK ||
      tj_tensor_pack(g->out) != TJ_OK) {
    snprintf(c->note, sizeof c->note, "output: %s", tj_last_error());
    dlclose(g->so); free(g); return NULL;
  }
  g->ops[0] = &g->out->st;
  for (int i = 1; i < c->nops; i++) {
    g->ops[i] = &c->ops[i]->st;
    int how = 0;
    if (tj_kernel_operand_format(c->kernel_1t, tj_tensor_name(c->ops[i]), &g->conv[i], &how) != TJ_OK ||
        how > 1) {
      snprintf(c->note, sizeof c->note, "operand %s: %s", tj_tensor_name(c->ops[i]),
               how > 1 ? "read as a mask pattern" : tj_last_error());
      cg_done(g);
      return NULL;
    }
    g->converts[i] = how == 1;
  }
  return g;
}
/* Runs the rendered kernel on copies of the operands it reads converted,
 * made in the timed run as tensorjit's runtime makes them. */
static void cg_run(void *p) {
  CG *g = p;
  tj_tensor *copy[MAX_OPS] = {0};
  g->rc = 0;
  for (int i = 1; i < g->c->nops && g->rc == 0; i++)
    if (g->converts[i]) {
      g->rc = tj_tensor_convert(g->c->ops[i], &g->conv[i], &copy[i]) == TJ_OK ? 0 : -1;
      if (copy[i]) g->ops[i] = &copy[i]->st;
    }
  if (g->rc == 0) g->rc = g->fn(g->ops);
  for (int i = 1; i < g->c->nops; i++)
    if (copy[i]) {
      tj_tensor_free(copy[i]);
      g->ops[i] = &g->c->ops[i]->st;
    }
}
static void cg_out(void *p, Out *o) {
  CG *g = p;
  out_from_tensor(g->c, g->out, o);
  if (g->rc != 0) o->n = -1;   /* kernel error: forces a FAIL */
}
static void cg_done(void *p) {
  CG *g = p;
  tj_tensor_free(g->out);
  dlclose(g->so);
  free(g);
}
const Peer P_TJ_C = {.name = "tensorjit-C", .setup = cg_setup, .run = cg_run, .out = cg_out,
                     .done = cg_done, .max_threads = 1};

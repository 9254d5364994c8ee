/* MLIR sparsifier peers (LLVM 19, Debian mlir-19-tools: `scripts/deps.sh
 * --with-mlir`). The suite writes each kernel as a linalg.generic over
 * #sparse_tensor.encoding operands (the same formats as tensorjit's) and
 * builds it the way MLIR's own integration tests do, at setup (the compile
 * column holds the time):
 *
 *   mlir-opt-19 --sparse-assembler=direct-out=true
 *               --sparsifier="enable-runtime-library=false [vl=8 ...]"
 *   mlir-translate-19 --mlir-to-llvmir
 *   clang-19 -O3 -march=native -shared -fPIC   (the bench may use a system
 *                                               compiler; tensorjit never does)
 *
 * then dlopens the library and calls its C interface (_mlir_ciface_kernel,
 * memref descriptors by pointer) on the arrays tensorjit reads. The sparse
 * assembler gives the public function plain arrays for each sparse operand
 * (positions and coordinates per compressed level, then values), which
 * direct codegen wraps without a copy. A dense output is the caller's
 * buffer, zeroed by a linalg.fill in the kernel (tensorjit's kernels
 * overwrite their output too); a sparse one comes back as arrays the
 * kernel allocated, freed by the next run. The sparsifier's loops are
 * serial: its pipeline lowers scf.parallel to plain loops, so MLIR has
 * 1-thread rows only.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#if defined(TJ_MLIR_OPT) && defined(TJ_MLIR_TRANSLATE) && defined(TJ_MLIR_CLANG)

int mlir_available(void) {
  return access(TJ_MLIR_OPT, X_OK) == 0 && access(TJ_MLIR_TRANSLATE, X_OK) == 0 &&
         access(TJ_MLIR_CLANG, X_OK) == 0;
}
const char *mlir_status(void) {
  return mlir_available()
             ? "MLIR: " TJ_MLIR_OPT " --sparsifier (direct codegen; vl=0 and vl=8), built by "
               TJ_MLIR_CLANG " -O3 -march=native"
             : "MLIR: " TJ_MLIR_OPT ", " TJ_MLIR_TRANSLATE " or " TJ_MLIR_CLANG
               " missing; its rows are omitted";
}

/* A kernel as linalg.generic: loops in the order listed (the sparsifier
 * keeps a listed order its operands allow), each operand's indices (ins,
 * then the output) and the loops' iterator types. The payload multiplies
 * the inputs and accumulates (is_sum: adds them). */
typedef struct Spec {
  const char *kernel;          /* tjbench's kernel name it serves */
  const char *loops;
  const char *idx[MAX_OPS];    /* ins..., out */
  const char *iters;
  int is_sum;
} Spec;

/* SpMM and SpGEMM list i, k, j so the inner loop runs along rows of B and
 * C (i, j, k re-reads A's row for every column j: 2-6x slower); MTTKRP
 * likewise puts j innermost. */
static const Spec SPECS[] = {
    {"spmv", "i, j", {"i, j", "j", "i"}, "\"parallel\", \"reduction\"", 0},
    {"spmm", "i, k, j", {"i, k", "k, j", "i, j"}, "\"parallel\", \"reduction\", \"parallel\"", 0},
    {"spgemm", "i, k, j", {"i, k", "k, j", "i, j"}, "\"parallel\", \"reduction\", \"parallel\"", 0},
    {"add", "i, j", {"i, j", "i, j", "i, j"}, "\"parallel\", \"parallel\"", 1},
    {"sddmm", "i, j, k", {"i, j", "i, k", "j, k", "i, j"},
     "\"parallel\", \"parallel\", \"reduction\"", 0},
    {"mttkrp", "i, k, l, j", {"i, k, l", "k, j", "l, j", "i, j"},
     "\"parallel\", \"reduction\", \"reduction\", \"parallel\"", 0},
};

static const Spec *spec_of(const char *kernel) {
  for (size_t i = 0; i < sizeof SPECS / sizeof SPECS[0]; i++)
    if (!strncmp(kernel, SPECS[i].kernel, strlen(SPECS[i].kernel))) return &SPECS[i];
  return NULL;
}

static int is_sparse(const tj_storage *s) {
  for (int l = 0; l < s->order; l++)
    if (s->levels[l].kind != TJ_LVL_DENSE) return 1;
  return 0;
}

/* Level l of s in MLIR's spelling: "dense", "compressed(nonunique)",
 * "singleton(soa)" (tensorjit keeps each level's coordinates in its own
 * array; MLIR's singleton default interleaves them). */
static void write_level(FILE *f, const tj_storage *s, int l) {
  const tj_level_storage *lv = &s->levels[l];
  const char *props[3];
  int n = 0;
  if (lv->flags & TJ_LVL_NONUNIQUE) props[n++] = "nonunique";
  if (lv->flags & TJ_LVL_NONORDERED) props[n++] = "nonordered";
  if (lv->kind == TJ_LVL_SINGLETON) props[n++] = "soa";
  fprintf(f, "%s", lv->kind == TJ_LVL_DENSE ? "dense"
                   : lv->kind == TJ_LVL_COMPRESSED ? "compressed" : "singleton");
  for (int i = 0; i < n; i++) fprintf(f, "%s%s", i ? ", " : "(", props[i]);
  if (n) fprintf(f, ")");
}

/* s's encoding, "#sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense,
 * d1 : compressed), posWidth = 32, crdWidth = 32 }>". */
static void write_encoding(FILE *f, const tj_storage *s) {
  fprintf(f, "#sparse_tensor.encoding<{ map = (");
  for (int d = 0; d < s->order; d++) fprintf(f, "%sd%d", d ? ", " : "", d);
  fprintf(f, ") -> (");
  for (int l = 0; l < s->order; l++) {
    fprintf(f, "%sd%d : ", l ? ", " : "", s->map[l].dim);
    write_level(f, s, l);
  }
  fprintf(f, "), posWidth = 32, crdWidth = 32 }>");
}

/* Operand t's tensor type, "tensor<20x16xf64>" or with its encoding #e<t>. */
static void type_of(char *buf, size_t n, const Case *c, int t) {
  const tj_storage *s = &c->ops[t]->st;
  int len = snprintf(buf, n, "tensor<");
  for (int d = 0; d < s->order; d++)
    len += snprintf(buf + len, n - (size_t)len, "%lldx", (long long)s->dims[d]);
  if (is_sparse(s)) snprintf(buf + len, n - (size_t)len, "f64, #e%d>", t);
  else snprintf(buf + len, n - (size_t)len, "f64>");
}

/* Writes c's kernel to f. */
static void write_kernel(FILE *f, Case *c, const Spec *sp) {
  char ty[MAX_OPS][96];
  int nin = c->nops - 1, sparse_out = is_sparse(&c->ops[0]->st);
  for (int t = 0; t < c->nops; t++) {
    if (is_sparse(&c->ops[t]->st)) {
      fprintf(f, "#e%d = ", t);
      write_encoding(f, &c->ops[t]->st);
      fprintf(f, "\n");
    }
    type_of(ty[t], sizeof ty[t], c, t);
  }
  fprintf(f, "#trait = { indexing_maps = [");
  for (int t = 1; t <= c->nops; t++)
    fprintf(f, "%saffine_map<(%s) -> (%s)>", t > 1 ? ",\n    " : "", sp->loops,
            sp->idx[t - 1]);
  fprintf(f, "],\n  iterator_types = [%s] }\n", sp->iters);
  fprintf(f, "func.func @kernel(");
  for (int t = 1; t <= nin; t++) fprintf(f, "%s%%in%d: %s", t > 1 ? ", " : "", t, ty[t]);
  if (sparse_out) {
    fprintf(f, ") -> %s attributes { llvm.emit_c_interface } {\n", ty[0]);
    fprintf(f, "  %%o = tensor.empty() : %s\n", ty[0]);
  } else {
    fprintf(f, ", %%out: %s) -> %s attributes { llvm.emit_c_interface } {\n", ty[0], ty[0]);
    fprintf(f, "  %%zero = arith.constant 0.0 : f64\n"
               "  %%o = linalg.fill ins(%%zero : f64) outs(%%out : %s) -> %s\n", ty[0], ty[0]);
  }
  fprintf(f, "  %%r = linalg.generic #trait ins(");
  for (int t = 1; t <= nin; t++) fprintf(f, "%s%%in%d", t > 1 ? ", " : "", t);
  fprintf(f, " : ");
  for (int t = 1; t <= nin; t++) fprintf(f, "%s%s", t > 1 ? ", " : "", ty[t]);
  fprintf(f, ") outs(%%o : %s) {\n  ^bb0(", ty[0]);
  for (int t = 1; t <= nin; t++) fprintf(f, "%%x%d: f64, ", t);
  fprintf(f, "%%acc: f64):\n");
  const char *op = sp->is_sum ? "addf" : "mulf";   /* %v2 = x1 op x2, %v3 = %v2 op x3, ... */
  for (int t = 2; t <= nin; t++)
    fprintf(f, "    %%v%d = arith.%s %s%d, %%x%d : f64\n", t, op, t == 2 ? "%x" : "%v",
            t == 2 ? 1 : t - 1, t);
  if (sp->is_sum) fprintf(f, "    linalg.yield %%v%d : f64\n", nin);
  else fprintf(f, "    %%s = arith.addf %%acc, %%v%d : f64\n    linalg.yield %%s : f64\n", nin);
  fprintf(f, "  } -> %s\n  return %%r : %s\n}\n", ty[0], ty[0]);
}

/* The k-th item of a comma-separated list ("i, k, j", 1: "k") into buf. */
static void list_item(const char *list, int k, char *buf, size_t n) {
  for (; k > 0 && list; k--) {
    list = strchr(list, ',');
    if (list) list++;
  }
  buf[0] = 0;
  if (!list) return;
  list += strspn(list, " ");
  size_t len = strcspn(list, ",");
  snprintf(buf, n, "%.*s", (int)len, list);
}

/* Whether the sparsifier's outer loop, the one over the first level of
 * the first sparse input, is a reduction (CSC SpMV's j). LLVM 19's
 * parallelization strategies make that loop parallel all the same, a data
 * race on the output, so such a kernel gets no 2-thread build. */
static int outer_is_reduction(const Case *c, const Spec *sp) {
  for (int t = 1; t < c->nops; t++) {
    const tj_storage *s = &c->ops[t]->st;
    if (!is_sparse(s)) continue;
    char idx[8], loop[8], iter[32];
    list_item(sp->idx[t - 1], s->map[0].dim, idx, sizeof idx);
    for (int k = 0;; k++) {
      list_item(sp->loops, k, loop, sizeof loop);
      if (!loop[0]) return 0;
      if (!strcmp(loop, idx)) {
        list_item(sp->iters, k, iter, sizeof iter);
        return strstr(iter, "reduction") != NULL;
      }
    }
  }
  return 0;
}

/* Whether dir/kernel.ll starts OpenMP threads (__kmpc_fork_call). */
static int ll_forks(const char *dir) {
  char path[160], line[1024];
  snprintf(path, sizeof path, "%s/kernel.ll", dir);
  FILE *f = fopen(path, "r");
  int forks = 0;
  while (f && !forks && fgets(line, sizeof line, f)) forks = strstr(line, "__kmpc_fork_call") != NULL;
  if (f) fclose(f);
  return forks;
}

/* The rest of LLVM 19's --sparsifier pipeline after its
 * sparsification-and-bufferization pass (mlir-opt-19 --dump-pass-pipeline)
 * with convert-scf-to-openmp and convert-openmp-to-llvm added, memrefs
 * lowered before scf-to-cf (OpenMP's alloca scopes must not turn into
 * several blocks). LLVM 19's pipeline itself lowers scf.parallel serially. */
static const char OMP_REST[] =
    "builtin.module(sparse-storage-specifier-to-llvm,func.func(canonicalize),"
    "func.func(finalizing-bufferize),func.func(convert-linalg-to-loops),"
    "func.func(convert-vector-to-scf),func.func(expand-realloc),convert-scf-to-openmp,"
    "expand-strided-metadata,finalize-memref-to-llvm,func.func(convert-scf-to-cf),lower-affine,"
    "convert-vector-to-llvm{force-32bit-vector-indices=true},"
    "func.func(convert-complex-to-standard),func.func(arith-expand),"
    "func.func(convert-math-to-llvm),convert-math-to-libm,convert-complex-to-libm,"
    "convert-vector-to-llvm,convert-complex-to-llvm,convert-openmp-to-llvm,convert-func-to-llvm,"
    "reconcile-unrealized-casts)";

/* The shell command that lowers kernel.mlir to lowered.mlir in the
 * current folder. Serial: --sparsifier as is. Parallel: the sparsifier
 * with parallelization-strategy=any-storage-outer-loop up to its
 * bufferization (the IR printed after that pass), then OMP_REST. */
static void lower_cmd(char *buf, size_t n, const char *opts, int parallel) {
  if (!parallel)
    snprintf(buf, n,
             "'%s' kernel.mlir --sparse-assembler=direct-out=true"
             " --sparsifier='enable-runtime-library=false %s' -o lowered.mlir 2>log",
             TJ_MLIR_OPT, opts);
  else
    snprintf(buf, n,
             "'%s' kernel.mlir --sparse-assembler=direct-out=true"
             " --sparsifier='enable-runtime-library=false parallelization-strategy="
             "any-storage-outer-loop %s' --mlir-print-ir-after=sparsification-and-bufferization"
             " --mlir-print-ir-module-scope --mlir-disable-threading -o /dev/null 2>mid.mlir"
             " && '%s' mid.mlir --pass-pipeline='%s' -o lowered.mlir 2>log",
             TJ_MLIR_OPT, opts, TJ_MLIR_OPT, OMP_REST);
}

/* Lowers, translates and builds c's kernel with the sparsifier options
 * opts (parallel: OpenMP, linked against libomp); returns the dlopen
 * handle (NULL: c->note says why) and the tools' wall time in *ms;
 * *is_parallel tells whether the sparsifier made a loop parallel. */
static void *mlir_build(Case *c, const Spec *sp, const char *opts, int parallel, double *ms,
                        int *is_parallel) {
  char dir[] = "/tmp/tjbench-mlir-XXXXXX", path[128], cmd[2048];
  if (!mkdtemp(dir)) { snprintf(c->note, sizeof c->note, "mkdtemp failed"); return NULL; }
  snprintf(path, sizeof path, "%s/kernel.mlir", dir);
  FILE *f = fopen(path, "w");
  if (!f) { snprintf(c->note, sizeof c->note, "cannot write %s", path); return NULL; }
  write_kernel(f, c, sp);
  fclose(f);
  char lower[1536];
  lower_cmd(lower, sizeof lower, opts, parallel);
  snprintf(cmd, sizeof cmd,
           "cd %s && %s && '%s' --mlir-to-llvmir lowered.mlir -o kernel.ll 2>>log"
           " && '%s' -O3 -march=native -shared -fPIC -Wno-override-module %s kernel.ll"
           " -o kernel.so 2>>log",
           dir, lower, TJ_MLIR_TRANSLATE, TJ_MLIR_CLANG, parallel ? "-fopenmp" : "");
  double t0 = now_s();
  int rc = system(cmd);
  *ms = (now_s() - t0) * 1e3;
  if (rc != 0) {
    snprintf(c->note, sizeof c->note, "MLIR build failed: see %s/log", dir);
    return NULL;
  }
  snprintf(path, sizeof path, "%s/kernel.so", dir);
  void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!so) { snprintf(c->note, sizeof c->note, "dlopen: %.200s", dlerror()); return NULL; }
  *is_parallel = dlsym(so, "omp_set_num_threads") != NULL && ll_forks(dir);
  const char *files[] = {"kernel.mlir", "mid.mlir", "lowered.mlir", "kernel.ll", "kernel.so",
                         "log"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    unlink(path);
  }
  rmdir(dir);
  return so;
}

/* A memref descriptor as MLIR's C interface lays it out for rank r:
 * allocated and aligned pointers, offset, sizes[r], strides[r] (all 8-byte
 * words, so a rank-r descriptor is a prefix of this struct). */
enum { MAX_RANK = 3, MAX_ARGS = 12 };
typedef struct { void *alloc, *aligned; int64_t offset, dims[2 * MAX_RANK]; } Memref;
typedef struct { void *alloc, *aligned; int64_t offset, size, stride; } Memref1;
/* A CSR result as the sparse assembler returns it (direct-out): buffers
 * the kernel allocated, the caller frees. */
typedef struct { Memref1 pos, crd, val; } CsrResult;

static Memref memref(void *p, int rank, const int64_t *sizes) {
  Memref m = {p, p, 0, {0}};
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; d--) {
    m.dims[d] = sizes[d];
    m.dims[rank + d] = stride;
    stride *= sizes[d];
  }
  return m;
}

typedef struct ML {
  Case *c;
  void *so, *fn;
  Memref arg[MAX_ARGS];        /* the C interface's arguments after the result */
  int nargs;
  Memref res;                  /* dense output */
  CsrResult sres;              /* sparse output: the last run's */
  int sparse_out;
  double *out;                 /* dense output buffer */
  int64_t n;
} ML;

/* Appends the arguments operand s expands to: one memref if dense, else
 * positions (compressed levels) and coordinates (compressed and singleton
 * levels) level by level, then values. */
static int push_operand(ML *m, tj_storage *s) {
  if (!is_sparse(s)) {
    m->arg[m->nargs++] = memref(s->vals, s->order, s->dims);
    return 1;
  }
  if (s->pos_width != 4 || s->crd_width != 4) return 0;
  for (int l = 0; l < s->order; l++) {
    if (s->levels[l].kind == TJ_LVL_COMPRESSED)
      m->arg[m->nargs++] = memref(s->levels[l].pos, 1, &s->levels[l].pos_len);
    if (s->levels[l].kind != TJ_LVL_DENSE)
      m->arg[m->nargs++] = memref(s->levels[l].crd, 1, &s->levels[l].crd_len);
  }
  m->arg[m->nargs++] = memref(s->vals, 1, &s->vals_len);
  return 1;
}

/* Calls the C interface: every parameter is a pointer to a descriptor
 * (the result's first), so the function type is n + 1 pointers. */
typedef void *P;
static void call_kernel(void *fn, void *res, Memref *a, int n) {
  switch (n) {
  case 5: ((void (*)(P, P, P, P, P, P))fn)(res, &a[0], &a[1], &a[2], &a[3], &a[4]); break;
  case 6: ((void (*)(P, P, P, P, P, P, P))fn)(res, &a[0], &a[1], &a[2], &a[3], &a[4], &a[5]); break;
  case 10:
    ((void (*)(P, P, P, P, P, P, P, P, P, P, P))fn)(res, &a[0], &a[1], &a[2], &a[3], &a[4],
                                                    &a[5], &a[6], &a[7], &a[8], &a[9]);
    break;
  default: break;   /* refused by ml_setup */
  }
}
static int is_callable(int n) { return n == 5 || n == 6 || n == 10; }

/* nth > 1: the OpenMP build, on nth threads. */
static void *ml_setup(Case *c, const char *opts, int nth) {
  const Spec *sp = spec_of(c->kernel);
  if (!sp) { snprintf(c->note, sizeof c->note, "no MLIR kernel for %s", c->kernel); return NULL; }
  const tj_storage *O = &c->ops[0]->st;
  if (is_sparse(O) && c->okind != OUT_CSR) {
    snprintf(c->note, sizeof c->note, "MLIR results are read back as CSR only");
    return NULL;
  }
  if (nth > 1 && outer_is_reduction(c, sp)) {
    snprintf(c->note, sizeof c->note,
             "no 2-thread MLIR row: the sparsifier would run the outer reduction loop in "
             "parallel (a data race)");
    return NULL;
  }
  ML *m = xcalloc(1, sizeof *m);
  m->c = c;
  m->sparse_out = is_sparse(O);
  for (int t = 1; t < c->nops; t++)
    if (!push_operand(m, &c->ops[t]->st)) {
      snprintf(c->note, sizeof c->note, "the MLIR kernel is written for 32-bit positions");
      free(m);
      return NULL;
    }
  if (!m->sparse_out) {
    m->n = 1;
    for (int d = 0; d < O->order; d++) m->n *= O->dims[d];
    m->out = xcalloc((size_t)m->n, sizeof(double));
    m->arg[m->nargs++] = memref(m->out, O->order, O->dims);
  }
  if (!is_callable(m->nargs)) {
    snprintf(c->note, sizeof c->note, "call_kernel has no case for %d arguments", m->nargs);
    free(m->out); free(m);
    return NULL;
  }
  double ms;
  int is_parallel = 0;
  m->so = mlir_build(c, sp, opts, nth > 1, &ms, &is_parallel);
  if (m->so) m->fn = dlsym(m->so, "_mlir_ciface_kernel");
  if (!m->fn) {
    if (m->so) snprintf(c->note, sizeof c->note, "no _mlir_ciface_kernel in the MLIR build");
    if (m->so) dlclose(m->so);
    free(m->out); free(m);
    return NULL;
  }
  g_cgen_last_cc_ms = ms;
  if (is_parallel) {   /* the .so's own libomp: the process may run libgomp */
    void (*set_threads)(int) = (void (*)(int))dlsym(m->so, "omp_set_num_threads");
    set_threads(nth);
  }
  snprintf(c->note, sizeof c->note, "mlir-opt + translate + clang-19 %.0f ms%s", ms,
           nth == 1 ? "" : is_parallel ? "; OpenMP" : "; the sparsifier kept it serial");
  return m;
}
static void *scalar_setup(Case *c, int nth) { return ml_setup(c, "", nth); }
/* vl=8: the sparsifier's vectorizer with 8 lanes (AVX-512 f64), with the
 * reassociation and 32-bit index options it needs to vectorize reductions
 * and gathers. */
static void *vl8_setup(Case *c, int nth) {
  return ml_setup(c, "vl=8 reassociate-fp-reductions=true enable-index-optimizations=true", nth);
}

static void free_result(CsrResult *r) {
  free(r->pos.alloc); free(r->crd.alloc); free(r->val.alloc);
  memset(r, 0, sizeof *r);
}


/* A sparse output's previous buffers are freed inside the timed run, as a
 * program that keeps one result at a time would. */
static void ml_run(void *p) {
  ML *m = p;
  if (m->sparse_out) {
    free_result(&m->sres);
    call_kernel(m->fn, &m->sres, m->arg, m->nargs);
  } else {
    call_kernel(m->fn, &m->res, m->arg, m->nargs);
  }
}
/* The result as the kernel returned it (dense: the caller's buffer,
 * written in place). */
static void ml_out(void *p, Out *o) {
  ML *m = p;
  const tj_storage *O = &m->c->ops[0]->st;
  o->is_f32 = 0;
  if (!m->sparse_out) {
    o->kind = OUT_DENSE; o->n = m->res.aligned ? m->n : -1;
    o->vals = (const double *)m->res.aligned + m->res.offset;
    return;
  }
  o->kind = OUT_CSR; o->n = O->dims[0]; o->ncols = O->dims[1];
  o->pos = (const int32_t *)m->sres.pos.aligned + m->sres.pos.offset;
  o->crd = (const int32_t *)m->sres.crd.aligned + m->sres.crd.offset;
  o->vals = (const double *)m->sres.val.aligned + m->sres.val.offset;
  o->pw = o->cw = 4;
  if (m->sres.pos.size < o->n + 1) o->n = -1;   /* no result: forces a FAIL */
}
static void ml_done(void *p) {
  ML *m = p;
  free_result(&m->sres);
  dlclose(m->so);
  free(m->out);
  free(m);
}

const Peer P_MLIR = {.name = "MLIR", .setup = scalar_setup, .run = ml_run, .out = ml_out,
                     .done = ml_done, .max_threads = 2, .available = mlir_available};
const Peer P_MLIR_VL8 = {.name = "MLIR-vl8", .setup = vl8_setup, .run = ml_run, .out = ml_out,
                         .done = ml_done, .max_threads = 1, .available = mlir_available};
#else
int mlir_available(void) { return 0; }
const char *mlir_status(void) {
  return "MLIR: not configured (mlir-opt-19, mlir-translate-19 or clang-19 not found, or "
         "-DTJ_BENCH_MLIR=OFF; bash scripts/deps.sh --with-mlir installs them); its rows are omitted";
}
/* Never added to a case (mlir_available() is 0); defined for the link. */
const Peer P_MLIR = {.name = "MLIR", .available = mlir_available};
const Peer P_MLIR_VL8 = {.name = "MLIR-vl8", .available = mlir_available};
#endif

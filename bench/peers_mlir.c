/* MLIR sparsifier peers (LLVM 19, Debian mlir-19-tools: `scripts/deps.sh
 * --with-mlir`). The suite writes the kernel as a linalg.generic over a
 * #sparse_tensor.encoding operand and builds it the way MLIR's own
 * integration tests do, at setup (the compile column holds the time):
 *
 *   mlir-opt-19 --sparsifier="enable-runtime-library=false [vl=8 ...]"
 *   mlir-translate-19 --mlir-to-llvmir
 *   clang-19 -O3 -march=native -shared -fPIC   (the bench may use a system
 *                                               compiler; tensorjit never does)
 *
 * then dlopens the library and calls its C interface (_mlir_ciface_kernel,
 * memref descriptors by pointer) on the arrays tensorjit reads. The public
 * function takes the sparse operand's positions, coordinates and values as
 * plain 1-d tensors and builds the sparse tensor with sparse_tensor.assemble,
 * which in direct codegen (no runtime library) wraps the buffers without a
 * copy; the dense output is the caller's buffer, zeroed by a linalg.fill in
 * the kernel (tensorjit's kernels overwrite their output too). The
 * sparsifier's loops are serial here: its pipeline lowers scf.parallel to
 * plain loops, so MLIR has 1-thread rows only.
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

/* MLIR's memref descriptors of rank 1 and 2 (the C interface's layout). */
typedef struct { void *alloc, *aligned; int64_t offset, size[1], stride[1]; } Memref1;
typedef struct { void *alloc, *aligned; int64_t offset, size[2], stride[2]; } Memref2;
/* A CSR result as the sparse assembler returns it (direct-out): buffers
 * the kernel allocated, the caller frees. */
typedef struct { Memref1 pos, crd, val; } CsrResult;

static Memref1 memref1(void *p, int64_t n) { return (Memref1){p, p, 0, {n}, {1}}; }
static Memref2 memref2(void *p, int64_t r, int64_t c) { return (Memref2){p, p, 0, {r, c}, {c, 1}}; }

typedef enum { MK_SPMV, MK_SPMM, MK_ADD, MK_SPGEMM } MlirKind;

typedef void (*SpmvFn)(Memref1 *res, Memref1 *pos, Memref1 *crd, Memref1 *val, Memref1 *x,
                       Memref1 *y);
typedef void (*SpmmFn)(Memref2 *res, Memref1 *pos, Memref1 *crd, Memref1 *val, Memref2 *B,
                       Memref2 *C);
typedef void (*SparseFn)(CsrResult *res, Memref1 *bpos, Memref1 *bcrd, Memref1 *bval,
                         Memref1 *cpos, Memref1 *ccrd, Memref1 *cval);

typedef struct ML {
  Case *c;
  MlirKind kind;
  void *so, *fn;
  Memref1 pos, crd, val;        /* operand 1 (sparse) */
  Memref1 pos2, crd2, val2;     /* operand 2 when sparse (add, SpGEMM) */
  Memref1 x, y, res1;           /* SpMV */
  Memref2 B, C, res2;           /* SpMM */
  CsrResult res;                /* add, SpGEMM: the last run's result */
  double *out;                  /* dense output buffer */
  int64_t n;
} ML;

/* The sparse operand's level types as an encoding map. */
static const char *encoding_map(const tj_storage *s) {
  return s->map[0].dim == 1 ? "(i, j) -> (j : dense, i : compressed)"
                            : "(i, j) -> (i : dense, j : compressed)";
}

/* The linalg.generic trait of each kind: operand maps (ins, then outs)
 * over the loops in the order listed, and the loops' iterator types. */
static const char *trait_of(MlirKind k) {
  switch (k) {
  case MK_SPMV:
    return "indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,\n"
           "    affine_map<(i, j) -> (i)>], iterator_types = [\"parallel\", \"reduction\"]";
  /* Loops listed i, k, j: the sparsifier keeps that order, so the inner
   * loop runs along rows of B and C (i, j, k re-reads A's row for every
   * column j: 2-6x slower). */
  case MK_SPMM:
  case MK_SPGEMM:
    return "indexing_maps = [affine_map<(i, k, j) -> (i, k)>, affine_map<(i, k, j) -> (k, j)>,\n"
           "    affine_map<(i, k, j) -> (i, j)>],\n"
           "  iterator_types = [\"parallel\", \"reduction\", \"parallel\"]";
  case MK_ADD:
    return "indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,\n"
           "    affine_map<(i, j) -> (i, j)>], iterator_types = [\"parallel\", \"parallel\"]";
  }
  return "";
}

/* Writes the kernel of c to f. Dense outputs: the caller's buffer, zeroed
 * by linalg.fill. Sparse ones: a fresh tensor the sparse assembler hands
 * back as (positions, coordinates, values). Sparse inputs of a sparse
 * kernel are plain arguments (the assembler splits them); SpMV and SpMM
 * assemble theirs from 1-d tensors in the kernel itself. */
static void write_kernel(FILE *f, const Case *c, MlirKind k) {
  const tj_storage *A = &c->ops[1]->st, *D = &c->ops[2]->st, *O = &c->ops[0]->st;
  char at[64], dt[64], ot[64];   /* operand 1's, operand 2's and the output's types */
  snprintf(at, sizeof at, "tensor<%lldx%lldxf64, #A>", (long long)A->dims[0], (long long)A->dims[1]);
  if (O->order == 1) snprintf(ot, sizeof ot, "tensor<%lldxf64>", (long long)O->dims[0]);
  else snprintf(ot, sizeof ot, "tensor<%lldx%lldxf64%s>", (long long)O->dims[0],
                (long long)O->dims[1], k == MK_SPMM ? "" : ", #A");
  if (D->order == 1) snprintf(dt, sizeof dt, "tensor<%lldxf64>", (long long)D->dims[0]);
  else snprintf(dt, sizeof dt, "tensor<%lldx%lldxf64%s>", (long long)D->dims[0],
                (long long)D->dims[1], k == MK_SPMM ? "" : ", #A");
  fprintf(f, "#A = #sparse_tensor.encoding<{ map = %s, posWidth = 32, crdWidth = 32 }>\n",
          encoding_map(A));
  fprintf(f, "#trait = { %s }\n", trait_of(k));
  if (k == MK_SPMV || k == MK_SPMM)
    fprintf(f,
            "func.func @kernel(%%pos: tensor<?xi32>, %%crd: tensor<?xi32>, %%val: tensor<?xf64>,\n"
            "                  %%d: %s, %%out: %s) -> %s attributes { llvm.emit_c_interface } {\n"
            "  %%a = sparse_tensor.assemble (%%pos, %%crd), %%val\n"
            "      : (tensor<?xi32>, tensor<?xi32>), tensor<?xf64> to %s\n"
            "  %%zero = arith.constant 0.0 : f64\n"
            "  %%o = linalg.fill ins(%%zero : f64) outs(%%out : %s) -> %s\n",
            dt, ot, ot, at, ot, ot);
  else
    fprintf(f,
            "func.func @kernel(%%a: %s, %%d: %s) -> %s attributes { llvm.emit_c_interface } {\n"
            "  %%o = tensor.empty() : %s\n", at, dt, ot, ot);
  fprintf(f,
          "  %%r = linalg.generic #trait ins(%%a, %%d : %s, %s) outs(%%o : %s) {\n"
          "  ^bb0(%%x: f64, %%y: f64, %%acc: f64):\n", at, dt, ot);
  if (k == MK_ADD)
    fprintf(f, "    %%s = arith.addf %%x, %%y : f64\n");
  else
    fprintf(f, "    %%m = arith.mulf %%x, %%y : f64\n"
               "    %%s = arith.addf %%acc, %%m : f64\n");
  fprintf(f, "    linalg.yield %%s : f64\n  } -> %s\n  return %%r : %s\n}\n", ot, ot);
}

/* Lowers, translates and builds c's kernel with the sparsifier options
 * opts; returns the dlopen handle (NULL: c->note says why) and the three
 * tools' wall time in *ms. */
static void *mlir_build(Case *c, MlirKind k, const char *opts, double *ms) {
  char dir[] = "/tmp/tjbench-mlir-XXXXXX", path[128], cmd[2048];
  if (!mkdtemp(dir)) { snprintf(c->note, sizeof c->note, "mkdtemp failed"); return NULL; }
  snprintf(path, sizeof path, "%s/kernel.mlir", dir);
  FILE *f = fopen(path, "w");
  if (!f) { snprintf(c->note, sizeof c->note, "cannot write %s", path); return NULL; }
  write_kernel(f, c, k);
  fclose(f);
  snprintf(cmd, sizeof cmd,
           "cd %s && '%s' kernel.mlir --sparse-assembler=direct-out=true"
           " --sparsifier='enable-runtime-library=false %s' -o lowered.mlir 2>log"
           " && '%s' --mlir-to-llvmir lowered.mlir -o kernel.ll 2>>log"
           " && '%s' -O3 -march=native -shared -fPIC -Wno-override-module kernel.ll -o kernel.so"
           " 2>>log",
           dir, TJ_MLIR_OPT, opts, TJ_MLIR_TRANSLATE, TJ_MLIR_CLANG);
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
  const char *files[] = {"kernel.mlir", "lowered.mlir", "kernel.ll", "kernel.so", "log"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    unlink(path);
  }
  rmdir(dir);
  return so;
}

/* Descriptors over a CSR/CSC operand's arrays; 0 if its widths are not 32-bit. */
static int sparse_args(const tj_storage *s, Memref1 *pos, Memref1 *crd, Memref1 *val) {
  if (s->pos_width != 4 || s->crd_width != 4) return 0;
  *pos = memref1(s->levels[1].pos, s->levels[1].pos_len);
  *crd = memref1(s->levels[1].crd, s->levels[1].crd_len);
  *val = memref1(s->vals, s->vals_len);
  return 1;
}

static void *ml_setup(Case *c, MlirKind k, const char *opts) {
  ML *m = xcalloc(1, sizeof *m);
  m->c = c; m->kind = k;
  const tj_storage *A = &c->ops[1]->st, *D = &c->ops[2]->st;
  int sparse2 = k == MK_ADD || k == MK_SPGEMM;
  if (!sparse_args(A, &m->pos, &m->crd, &m->val) ||
      (sparse2 && !sparse_args(D, &m->pos2, &m->crd2, &m->val2))) {
    snprintf(c->note, sizeof c->note, "the MLIR kernel is written for 32-bit positions");
    free(m);
    return NULL;
  }
  double ms;
  m->so = mlir_build(c, k, opts, &ms);
  if (!m->so) { free(m); return NULL; }
  m->fn = dlsym(m->so, "_mlir_ciface_kernel");
  if (!m->fn) {
    snprintf(c->note, sizeof c->note, "no _mlir_ciface_kernel in the MLIR build");
    dlclose(m->so); free(m);
    return NULL;
  }
  g_cgen_last_cc_ms = ms;
  snprintf(c->note, sizeof c->note, "mlir-opt + translate + clang-19 %.0f ms", ms);
  int64_t N = A->dims[0];
  if (k == MK_SPMM) {
    m->n = N * c->R;
    m->out = xcalloc((size_t)m->n, sizeof(double));
    m->B = memref2(D->vals, D->dims[0], D->dims[1]);
    m->C = memref2(m->out, N, c->R);
  } else if (k == MK_SPMV) {
    m->n = N;
    m->out = xcalloc((size_t)m->n, sizeof(double));
    m->x = memref1(D->vals, D->dims[0]);
    m->y = memref1(m->out, N);
  }
  return m;
}
static void *spmv_setup(Case *c, int nth) { (void)nth; return ml_setup(c, MK_SPMV, ""); }
static void *spmm_setup(Case *c, int nth) { (void)nth; return ml_setup(c, MK_SPMM, ""); }
static void *add_setup(Case *c, int nth) { (void)nth; return ml_setup(c, MK_ADD, ""); }
static void *spgemm_setup(Case *c, int nth) { (void)nth; return ml_setup(c, MK_SPGEMM, ""); }
/* vl=8: the sparsifier's vectorizer with 8 lanes (AVX-512 f64), with the
 * reassociation and 32-bit index options it needs to vectorize reductions
 * and gathers. */
static const char VL8[] = "vl=8 reassociate-fp-reductions=true enable-index-optimizations=true";
static void *spmv_vl8_setup(Case *c, int nth) { (void)nth; return ml_setup(c, MK_SPMV, VL8); }
static void *spmm_vl8_setup(Case *c, int nth) { (void)nth; return ml_setup(c, MK_SPMM, VL8); }

static void free_result(CsrResult *r) {
  free(r->pos.alloc); free(r->crd.alloc); free(r->val.alloc);
  memset(r, 0, sizeof *r);
}
/* Sparse outputs: the previous run's buffers are freed inside the timed
 * run, as a program that keeps one result at a time would. */
static void ml_run(void *p) {
  ML *m = p;
  switch (m->kind) {
  case MK_SPMV: ((SpmvFn)m->fn)(&m->res1, &m->pos, &m->crd, &m->val, &m->x, &m->y); break;
  case MK_SPMM: ((SpmmFn)m->fn)(&m->res2, &m->pos, &m->crd, &m->val, &m->B, &m->C); break;
  case MK_ADD:
  case MK_SPGEMM:
    free_result(&m->res);
    ((SparseFn)m->fn)(&m->res, &m->pos, &m->crd, &m->val, &m->pos2, &m->crd2, &m->val2);
    break;
  }
}
/* The result as the kernel returned it (dense: the caller's buffer,
 * written in place). */
static void ml_out(void *p, Out *o) {
  ML *m = p;
  const tj_storage *O = &m->c->ops[0]->st;
  o->is_f32 = 0;
  switch (m->kind) {
  case MK_SPMV:
    o->kind = OUT_DENSE; o->n = m->n;
    o->vals = (const double *)m->res1.aligned + m->res1.offset;
    break;
  case MK_SPMM:
    o->kind = OUT_DENSE; o->n = m->n;
    o->vals = (const double *)m->res2.aligned + m->res2.offset;
    break;
  case MK_ADD:
  case MK_SPGEMM:
    o->kind = OUT_CSR; o->n = O->dims[0]; o->ncols = O->dims[1];
    o->pos = (const int32_t *)m->res.pos.aligned + m->res.pos.offset;
    o->crd = (const int32_t *)m->res.crd.aligned + m->res.crd.offset;
    o->vals = (const double *)m->res.val.aligned + m->res.val.offset;
    o->pw = o->cw = 4;
    if (m->res.pos.size[0] < o->n + 1) o->n = -1;   /* no result: forces a FAIL */
    break;
  }
}
static void ml_done(void *p) {
  ML *m = p;
  free_result(&m->res);
  dlclose(m->so);
  free(m->out);
  free(m);
}

#define MLIR_PEER(NAME, STR, SETUP)                                                  \
  const Peer NAME = {.name = STR, .setup = SETUP, .run = ml_run, .out = ml_out,     \
                     .done = ml_done, .max_threads = 1, .available = mlir_available};
#else
int mlir_available(void) { return 0; }
const char *mlir_status(void) {
  return "MLIR: not configured (mlir-opt-19, mlir-translate-19 or clang-19 not found, or "
         "-DTJ_BENCH_MLIR=OFF; bash scripts/deps.sh --with-mlir installs them); its rows are omitted";
}
/* Never added to a case (mlir_available() is 0); defined for the link. */
#define MLIR_PEER(NAME, STR, SETUP) const Peer NAME = {.name = STR, .available = mlir_available};
#endif

MLIR_PEER(P_MLIR_SPMV, "MLIR", spmv_setup)
MLIR_PEER(P_MLIR_SPMV_VL8, "MLIR-vl8", spmv_vl8_setup)
MLIR_PEER(P_MLIR_SPMM, "MLIR", spmm_setup)
MLIR_PEER(P_MLIR_SPMM_VL8, "MLIR-vl8", spmm_vl8_setup)
MLIR_PEER(P_MLIR_ADD, "MLIR", add_setup)
MLIR_PEER(P_MLIR_SPGEMM, "MLIR", spgemm_setup)

/* tjbench: shared types of the benchmark suite.
 *
 * A Case is one kernel on one input: the tensorjit expression, its operands
 * (operand 0 is the output), the flop and byte counts, and the peers that
 * have the kernel. A Peer is a setup (untimed: build library objects and
 * output buffers), a run (timed), a view of its result (checked against
 * tensorjit's before timing) and a release.
 */
#ifndef TJ_BENCH_H
#define TJ_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tensorjit.h"
#include "runtime/tensor.h"

/* How a result is compared: a dense array, a CSR matrix (rows may be in
 * any order of columns), or a values array in tensorjit's storage order. */
typedef enum { OUT_DENSE, OUT_CSR, OUT_VALS } OutKind;

typedef struct Out {
  OutKind kind;
  int is_f32;
  const void *vals;
  int64_t n;                   /* DENSE/VALS: values; CSR: rows */
  const void *pos, *crd;       /* CSR */
  int pw, cw;                  /* CSR index widths in bytes */
  int64_t ncols;
} Out;

typedef struct Case Case;

typedef struct Peer {
  const char *name;
  void *(*setup)(Case *c, int nth);   /* NULL: not available (c->note) */
  void (*run)(void *st);
  void (*out)(void *st, Out *o);
  void (*done)(void *st);
  int max_threads;                    /* 1: serial code only */
  int (*available)(void);             /* NULL or 1: a row; 0: no row (the suite's header says why) */
  int unranked;                       /* does less than tensorjit (unsorted output): not a best peer */
} Peer;

#define MAX_OPS 6
#define MAX_PEERS 10

struct Case {
  const char *kernel;
  char input[64];
  const char *expr;
  const char *sched;          /* base schedule or NULL */
  tj_tensor *ops[MAX_OPS];    /* ops[0] is the output */
  int nops;
  OutKind okind;
  int is_f32;
  double flops, bytes;
  int64_t R;                  /* dense columns / rank, where it applies */
  const Peer *peers[MAX_PEERS];
  int npeers;
  tj_kernel *kernel_1t;       /* the 1-thread kernel (its C rendering) */
  char note[256];
  void *aux;                  /* kernel-specific data (TCCG strides) */
};

/* ---- global settings (tjbench.c) ---- */
typedef struct Settings {
  int quick;
  int min_reps;
  double budget_s;            /* per row: fewer reps past this, never < 3 */
  const char *only;           /* run only kernels whose name contains it */
  int cpu;                    /* --cpu: 1-thread rows timed by thread CPU time */
  int reps;                   /* --reps N: repetitions per row (0: 10, quick 5) */
  int threads;                /* --threads N: only the N-thread tables (0: 1 and 2) */
  const char *src_dir;        /* for the C rendering's #include */
  const char *out_dir;
} Settings;
extern Settings g_set;

double now_s(void);
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t m);

/* ---- probes (probes.c) ---- */
double probe_triad_gbs(int nth, int quick);
double probe_fma_gflops(int nth, int f32);

/* ---- inputs (inputs.c) ---- */
tj_tensor *in_csr_uniform(const char *name, int64_t n, int per_row, uint64_t seed);
tj_tensor *in_csr_rmat(const char *name, int scale, int avg, uint64_t seed);
tj_tensor *in_csr_colperm(const char *name, const tj_tensor *a);
tj_tensor *in_read(const char *path, const char *name, const char *fmt);
tj_tensor *in_tensor3_random(const char *name, int64_t d, int64_t nnz, uint64_t seed);
tj_tensor *in_dense(const char *name, tj_dtype dt, int order, const int64_t *dims, uint64_t seed);
/* The compile-latency operands (tjbench's compile section, tjlatency):
 * sp = {y, A, x} of SpMV on a 1000 x 1000 CSR A, mt = {A, B, C, D} of
 * MTTKRP on a 100^3 sss B with rank 16; freed by in_compile_operands_free. */
void in_compile_operands(tj_tensor *sp[3], tj_tensor *mt[4]);
void in_compile_operands_free(tj_tensor *sp[3], tj_tensor *mt[4]);
tj_tensor *in_empty(const char *name, tj_dtype dt, int order, const int64_t *dims, const char *fmt);
tj_tensor *in_convert(const tj_tensor *t, const char *name, const char *fmt);

/* ---- peers (peers_hand.c, peers_lib.c, cgen.c) ---- */
extern const Peer P_HAND_SPMV_CSR, P_HAND_SPMV_CSC, P_HAND_SPMV_COO, P_HAND_SPMM,
    P_HAND_SDDMM, P_HAND_ADD, P_HAND_SPGEMM, P_HAND_TTV, P_HAND_TTM,
    P_HAND_MTTKRP, P_HAND_INNER, P_HAND_GEMM, P_HAND_TCCG;
extern const Peer P_BLAS_GEMM, P_GRB_MXV, P_GRB_SPMM, P_GRB_ADD, P_GRB_SPGEMM;
extern const Peer P_TJ_C;
/* tensorjit's variants of a case (peers_tj.c): into a `do` output, and
 * its assemble and compute phases alone; unranked. P_TJ_1T, the case's
 * 1-thread kernel, joins every 2-thread table (run_case). */
extern const Peer P_TJ_UNSORTED, P_TJ_ASSEMBLE, P_TJ_COMPUTE, P_TJ_FRESH, P_TJ_1T, P_TJ_LOOPS;
/* MKL (peers_mkl.c), loaded at run time when CMake found mkl_rt. */
extern const Peer P_MKL_GEMM, P_MKL_MV, P_MKL_MM, P_MKL_ADD, P_MKL_SP2M, P_MKL_SP2M_SORTED;
int mkl_available(void);
const char *mkl_status(void);    /* one line: the version, or why MKL is absent */
/* The MLIR sparsifier (peers_mlir.c), when CMake found its tools. */
extern const Peer P_MLIR, P_MLIR_VL8;
int mlir_available(void);
const char *mlir_status(void);   /* one line: the tools, or why MLIR is absent */
int have_graphblas(void);
void lib_set_threads(int nth);
const char *blas_name(void);
/* The cc -O3 time of the last C rendering compiled (ms), and of any key. */
extern double g_cgen_last_cc_ms;   /* cc time of the last rendering built */
/* Compiles k's C rendering to a .so; returns cc's wall time in ms (< 0 on
 * failure, message in err) and the dlopen handle in *so (may be NULL). */
double cgen_build(tj_kernel *k, void **so, char *err, size_t n);
/* The result view of a tensorjit output tensor. */
void out_from_tensor(const Case *c, const tj_tensor *t, Out *o);

/* ---- timing, checking, JSON (tjbench.c) ---- */
typedef struct Row {
  const char *impl;
  int ok, timed, reps;
  int unranked;                /* not counted as a best peer */
  double med, min, compile_ms, err;
  tj_compile_times stages;     /* tensorjit rows: the compile's breakdown */
  char note[256];
} Row;

/* A tensorjit kernel under time: TJ_EVALUATE, or TJ_COMPUTE for OUT_VALS
 * cases (values into the structure the first, evaluating run assembled:
 * the work their hand-written peers do, which fill a known structure). */
typedef struct TjRun { tj_kernel *k; tj_status st; tj_phase phase; } TjRun;

extern FILE *g_json;
extern int g_fails;             /* disagreements: a nonzero exit status */
extern int g_tj_errors;         /* tensorjit compile or run errors */
extern double g_bw[3];          /* measured triad GB/s at 1 and 2 threads */

/* Times fn(arg) after the caller's warm-up (whose time was warm_s). */
void time_it(void (*fn)(void *), void *arg, double warm_s, Row *r);
/* A row to time: fn(arg) reps times, into row. */
typedef struct Timed { void (*fn)(void *); void *arg; int reps; Row *row; } Timed;
/* Times the rows interleaved, one run of each a round (thread CPU time
 * when cpu is set), setting each row's median, first time and reps. */
void time_rounds(Timed *t, int n, int cpu);
/* Sorts n times (seconds) ascending; returns their median in ms. */
double median_sorted_ms(double *t, int n);
/* Max |ref - got| / max |ref|; < 0 when the shapes disagree (why says). */
double compare(const Out *ref, const Out *got, char *why, size_t n);
/* Bytes of t's arrays in use (lengths, not capacities). */
double used_bytes(const tj_tensor *t);
/* Compiles c in cx with opts (opts->nthreads > 1 adds parallelize of the
 * outer index), falling back to the base schedule, then to none; the
 * kernel is owned by cx. NULL on failure, with the reason in r->note. */
tj_kernel *tj_build(tj_context *cx, Case *c, const tj_options *opts, Row *r);
/* Runs a TjRun's kernel in its phase and keeps the status. */
void tj_run(void *p);
void json_str(FILE *f, const char *s);
/* <data>/matrices/<file> as CSR named "A"; NULL (a note printed) if missing. */
tj_tensor *real_matrix(const char *data, const char *file);

/* ---- vectorization and thread scaling (ratios.c) ---- */
/* Runs the ratio section: prints it and writes the "ratios" list entries. */
void ratios_run(const char *data);

/* TCCG contraction description (aux of a TCCG case). */
typedef struct Tccg {
  int nidx;
  int64_t ext[16];
  int64_t sa[16], sb[16], sc[16];   /* strides of each index in A, B, C */
} Tccg;

#endif

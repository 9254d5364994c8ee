/* The kernel ABI: the storage layout generated kernels read and write.
 *
 * A compiled kernel is `int32_t kernel(tj_storage **operands)`. Operand 0 is
 * the output, operands 1.. are the inputs in the order the expression binds
 * them. Every field a kernel touches lives in these two structs; `jit/`
 * addresses them by offsetof(), so changing a field here changes the ABI.
 *
 * A tensor of order n has n levels. Level l stores the dimension given by
 * map[l] (a level expression over dims; today always the identity on one
 * dim, which makes the map a permutation: the "mode order").
 *   dense:       no arrays; the level's size is dims[map[l].dim].
 *   compressed:  pos[p] .. pos[p+1] is the segment of parent position p;
 *                crd[q] is the coordinate at position q.
 *   singleton:   crd[q] only; one child per parent position (COO tails).
 *   loose_compressed: pos[2p] .. pos[2p+1] is the segment of parent p
 *                (lo and hi per segment: segments in any order, with gaps,
 *                so one can grow in place); crd as compressed.
 *   n_out_of_m:  crd only; segment p is p*n .. p*n+n (n = the level's n:
 *                exactly n coordinates per parent, ascending, zero values
 *                where a block stores fewer than n).
 * Position and coordinate arrays hold 8- or 16-bit unsigned, or 32- or
 * 64-bit signed integers (pos_width / crd_width bytes, per tensor).
 * Values live in one vals array.
 */
#ifndef TJ_RUNTIME_ABI_H
#define TJ_RUNTIME_ABI_H

#include <stdint.h>

#define TJ_MAX_ORDER 8

typedef enum {
  TJ_LVL_DENSE = 0,
  TJ_LVL_COMPRESSED = 1,
  TJ_LVL_SINGLETON = 2,
  TJ_LVL_LOOSE_COMPRESSED = 3,
  TJ_LVL_N_OUT_OF_M = 4
} tj_level_kind;

/* Level properties, one flags word per level. */
enum {
  TJ_LVL_NONUNIQUE = 1u << 0,  /* duplicates allowed in this level */
  TJ_LVL_NONORDERED = 1u << 1  /* coordinates not sorted in a segment */
};

/* A level expression: the coordinate of a level as a function of dims.
 * Only TJ_LX_DIM is produced today; the op/k pair exists so blocked
 * formats (d floordiv k, d mod k) drop in without changing the ABI. */
typedef enum { TJ_LX_DIM = 0, TJ_LX_FLOORDIV = 1, TJ_LX_MOD = 2 } tj_lx_op;

typedef struct tj_lvl_expr {
  int32_t dim;   /* which dimension */
  int32_t op;    /* tj_lx_op */
  int64_t k;     /* divisor for FLOORDIV / MOD */
} tj_lvl_expr;

typedef struct tj_level_storage {
  int32_t kind;     /* tj_level_kind */
  uint32_t flags;   /* TJ_LVL_* properties */
  int64_t size;     /* extent of this level's coordinates */
  void *pos;        /* compressed: pos_len entries of pos_width bytes */
  void *crd;        /* compressed, singleton: crd_len entries */
  int64_t pos_len, pos_cap;  /* entries used / allocated */
  int64_t crd_len, crd_cap;
  int64_t n;        /* n_out_of_m: coordinates per parent position */
} tj_level_storage;

typedef struct tj_storage {
  int32_t order;
  int32_t dtype;      /* tj_dtype of include/tensorjit.h */
  int32_t pos_width;  /* 1, 2, 4 or 8 bytes */
  int32_t crd_width;  /* 1, 2, 4 or 8 bytes */
  int64_t dims[TJ_MAX_ORDER];
  tj_lvl_expr map[TJ_MAX_ORDER];      /* level l stores map[l] */
  tj_level_storage levels[TJ_MAX_ORDER];
  void *vals;
  int64_t vals_len, vals_cap;         /* entries used / allocated */
  uint32_t foreign;   /* TJ_FOREIGN_* bits: arrays tensorjit did not allocate */
  int64_t slice[TJ_MAX_ORDER][3];     /* a view's offset, size and stride per
                                         dim (zeros: not sliced), read by
                                         kernels compiled for dynamic ('?')
                                         slice values */
} tj_storage;

/* Bits of tj_storage.foreign: an array the caller wrapped (tj_tensor_wrap).
 * Kernels read and write it in place but never free or realloc it:
 * tj_rt_reserve moves a foreign array that must grow into a fresh one of
 * tensorjit's own (and clears its bit), and freeing a storage skips it. */
#define TJ_FOREIGN_POS(l) (1u << (l))
#define TJ_FOREIGN_CRD(l) (1u << (TJ_MAX_ORDER + (l)))
#define TJ_FOREIGN_VALS (1u << (2 * TJ_MAX_ORDER))

/* Which array of a storage a runtime helper acts on. */
typedef enum { TJ_ARR_POS = 0, TJ_ARR_CRD = 1, TJ_ARR_VALS = 2 } tj_array_kind;
/* Or-ed into tj_rt_reserve's arr: the kernel writes every entry of the new
 * space before it reads it (it zeroes the array itself, or appends each
 * entry with its value), so the new space is left as the allocator gave
 * it: a fresh output's arrays are then touched once, by the kernel. */
#define TJ_ARR_NOZERO 0x100

/* Kernel return codes (0 = success). */
enum { TJ_KERNEL_OK = 0, TJ_KERNEL_NOMEM = 1, TJ_KERNEL_SHAPE = 2 };

typedef int32_t (*tj_kernel_fn)(tj_storage **operands);

/* Helpers generated code calls, resolved by the JIT's symbol table.
 * Each returns 0 or a TJ_KERNEL_* code; none aborts. */

/* Ensures level `level`'s array `arr` (or vals) of s holds at least `need`
 * entries, growing by doubling; new entries are zeroed (unless arr has
 * TJ_ARR_NOZERO). */
int32_t tj_rt_reserve(tj_storage *s, int32_t arr, int32_t level, int64_t need);
/* Allocates n zeroed bytes for a kernel workspace into *out (NULL if n==0). */
int32_t tj_rt_alloc(int64_t n, void **out);
/* Frees a workspace from tj_rt_alloc (NULL is fine). */
void tj_rt_free(void *p);
/* Sorts n coordinates of width w bytes in place, ascending. */
void tj_rt_sort_crd(void *crd, int64_t n, int32_t w);
/* Writes the coordinates marked in mark[0 .. 64 * words) whose touched
 * byte mark[64 * words + j / 64] is set into crd (width w bytes) in
 * ascending order, clears those touched bytes, and returns how many it
 * wrote. The touched bytes are readable 64 past their end. */
int64_t tj_rt_marked_crd(void *crd, const void *mark, int64_t words, int32_t w);


/* The body of a parallel loop, outlined by the JIT: runs iterations
 * [lo, hi) with the captured variables in ctx. */
typedef void (*tj_par_body)(void *ctx, int64_t lo, int64_t hi);
/* Runs body over [lo, hi) on the OpenMP runtime with the calling thread's
 * thread count (tj_rt_set_threads; 1 = a plain call, no OpenMP). When pos
 * is non-NULL (a pos array of width pos_width bytes over the same range),
 * chunks are balanced by pos[hi] - pos[lo] (nonzeros) plus rows, so skewed
 * rows do not leave a thread idle; otherwise chunks are scheduled
 * dynamically. */
void tj_rt_parallel_for(int64_t lo, int64_t hi, const void *pos,
                        int32_t pos_width, tj_par_body body, void *ctx);
/* The same, weighing row r by the entries two levels down: leaf[pos[r]]
 * (leaf: the pos array of the level below pos's, leaf_width bytes), so a
 * CSF tensor's rows are balanced by their leaves, not their fibers. */
void tj_rt_parallel_for_leaves(int64_t lo, int64_t hi, const void *pos, int32_t pos_width,
                               const void *leaf, int32_t leaf_width, tj_par_body body,
                               void *ctx);
/* How parallelize(i, strategy) splits rows among threads. */
enum {
  TJ_PAR_DEFAULT = 0,   /* by nonzeros when a pos array is given, else dynamic */
  TJ_PAR_STATIC = 1,    /* one equal block of rows per thread */
  TJ_PAR_BALANCED = 2,  /* 8 chunks per thread, equal in rows plus nonzeros */
  TJ_PAR_DYNAMIC = 3    /* 16 equal chunks of rows per thread, handed out as threads free up */
};
/* Or-ed into a strategy: each unit of the weights (a row or an entry the
 * pos/leaf arrays count) is one trip of the body's innermost loop, a few
 * nanoseconds (SpMV's multiply-add), so sharing the loop pays only from
 * twice the work of a body with loops under its entries (SpMM). */
#define TJ_PAR_LIGHT 0x100
/* tj_rt_parallel_for_leaves with an explicit strategy (TJ_PAR_*). */
void tj_rt_parallel_for_sched(int64_t lo, int64_t hi, const void *pos, int32_t pos_width,
                              const void *leaf, int32_t leaf_width, int32_t strategy,
                              tj_par_body body, void *ctx);
/* Sets the number of threads parallel loops use on this thread (<= 0:
 * TJ_NUM_THREADS or the OpenMP default). */
void tj_rt_set_threads(int n);
int tj_rt_threads(void);
/* The slot in [0, n) of the calling thread's per-thread data (a kernel's
 * workspace rows): its number in the team of the parallel loop running it,
 * which tj_rt_parallel_for sizes at most tj_rt_threads(); 0 outside one or
 * past n (a body run on the calling thread alone, which then owns every
 * slot). */
int64_t tj_rt_thread_slot(int64_t n);
/* Work (rows plus stored entries) below which a loop runs on one thread:
 * forking costs more than it saves there. TJ_PAR_MIN_WORK overrides. */
int64_t tj_rt_par_min_work(void);

/* ---- dense contractions (GETT, TTGT, LoG) ----
 *
 * C(I_m, I_n) (+)= A(I_m, I_k) * B(I_n, I_k) over dense operands of any
 * mode order, described by a plan of int32 words (TJ_GP_*) the compiler
 * fills in. The index sets are listed fastest first: I_m's first index is
 * the one split for the micro-kernel (C's unit-stride index when C has one
 * among I_m). Each index names its dimension in the tensors it appears in.
 * The micro-kernel multiplies packed panels: a holds kc columns of mr
 * values (a[p*mr + i]), b kc rows of nr values (b[p*nr + j]), and updates
 *   c[i + j*cs_c] = (beta ? c[i + j*cs_c] : 0) + sum_p a[p*mr+i] * b[p*nr+j]
 * for i < mr, j < nr (c unit-stride along i). */
enum {
  TJ_GETT_GETT = 0,   /* pack sub-tensors, macro-kernel over packed blocks */
  TJ_GETT_TTGT = 1,   /* transpose A, B to matrices, GEMM, fold C back */
  TJ_GETT_LOG = 2     /* loops over GEMMs on 2-D slices */
};
#define TJ_GETT_MAX_IDX 8
enum {
  TJ_GP_METHOD, TJ_GP_DTYPE, TJ_GP_BETA,   /* TJ_GETT_*, tj_dtype, 0 '=' or 1 '+=' */
  TJ_GP_A, TJ_GP_B,                        /* operand numbers of A and B (C is 0) */
  TJ_GP_MR, TJ_GP_NR, TJ_GP_MC, TJ_GP_KC, TJ_GP_NC,   /* blocking */
  TJ_GP_NM, TJ_GP_NN, TJ_GP_NK,            /* sizes of I_m, I_n, I_k */
  TJ_GP_VL,                                /* vector lanes of the micro-kernel */
  TJ_GP_TUNE,                              /* methods to time at the first run
                                              (bit per TJ_GETT_*), 0: the plan's */
  TJ_GP_M_C = 16,                          /* dim in C of each I_m index */
  TJ_GP_M_A = TJ_GP_M_C + TJ_GETT_MAX_IDX, /* dim in A of each I_m index */
  TJ_GP_N_C = TJ_GP_M_A + TJ_GETT_MAX_IDX, /* dim in C of each I_n index */
  TJ_GP_N_B = TJ_GP_N_C + TJ_GETT_MAX_IDX, /* dim in B of each I_n index */
  TJ_GP_K_A = TJ_GP_N_B + TJ_GETT_MAX_IDX, /* dim in A of each I_k index */
  TJ_GP_K_B = TJ_GP_K_A + TJ_GETT_MAX_IDX, /* dim in B of each I_k index */
  TJ_GP_WORDS = TJ_GP_K_B + TJ_GETT_MAX_IDX
};
typedef void (*tj_gett_ukernel)(int64_t kc, const void *a, const void *b, void *c,
                                int64_t cs_c, int32_t beta);
/* Runs the contraction `plan` describes on operands (C is operands[0],
 * sized by the caller), with micro-kernel uk, or the runtime's portable
 * one for the plan's mr x nr when uk is NULL. Threads: tj_rt_threads().
 * Returns 0, TJ_KERNEL_NOMEM (packing buffers) or TJ_KERNEL_SHAPE. */
int32_t tj_rt_gett(tj_storage **operands, const int32_t *plan, tj_gett_ukernel uk);

#endif

/* Lowering: checked index notation + formats -> concrete notation ->
 * loop IR kernels.
 *
 * lower_plan picks the loop order from the iteration graph (each tensor
 * with a sparse level must be traversed in its level order; all-dense
 * tensors are located and impose nothing), decides which operands must be
 * converted to another mode order because they would be traversed against
 * their storage order, and whether a sparse output needs a workspace
 * (a reduction loop between its levels: Gustavson's SpGEMM); planning
 * reads the Assignment, and lower_plan_notation writes the plan into the
 * concrete notation. lower_kernel then emits one of the three kernels for
 * that plan from the notation alone (its loops and its statement:
 * lower_nest) and the operand table.
 */
#ifndef TJ_LOWER_LOWER_H
#define TJ_LOWER_LOWER_H

#include <stdbool.h>
#include <stdio.h>

#include "../ir/loop_ir.h"
#include "../ir/notation.h"

/* The default of LowerOptions.lattice_max (see bench/README.md, wide unions). */
#define LOWER_LATTICE_MAX 8
/* The fewest additive terms a union scatters through a workspace with
 * (lower_plan_scatter_union; bench/README.md, wide unions); a plain sum of
 * operands into a sparse output from one more: at 3 its scattered
 * evaluate (assembly sorts each row) took 0.43 ms against the lattice's
 * 0.21, at 4 0.62 against 0.86 (2000 x 2000 at 0.005, thread CPU). */
#define LOWER_SCATTER_MIN 3
#define LOWER_SCATTER_MIN_SPARSE_SUM 4
/* The fewest terms a root sum over a union adds one loop nest each with
 * (split_sum; no workspace, no assembly: from 2 terms it computes 10x
 * faster than the lattice, bench/README.md, wide unions). */
#define LOWER_SPLIT_SUM_MIN 2

typedef enum { PHASE_ASSEMBLE, PHASE_COMPUTE, PHASE_EVALUATE } LowerPhase;

/* Why an operand is read through a copy that drops a level property: a
 * level stored without order is read in order, or a nonunique one as
 * unique (-print-cin says it). */
typedef struct CopyWhy {
  const char *why;             /* static text; NULL: another reason */
  const char *prop;            /* the property the copy drops ("nonordered",
                                  "nonunique") */
  int level;                   /* that level */
  const IndexVar *var;         /* its index (NULL: none) */
} CopyWhy;

typedef struct LowerPlan {
  int nloops;
  IndexVar *order[NT_MAX_INDICES];     /* loop order, outermost first */
  tj_format fmt[NT_MAX_TENSORS];       /* format each operand is read in */
  bool convert[NT_MAX_TENSORS];        /* fmt differs from the declared one */
  CopyWhy copy_why[NT_MAX_TENSORS];    /* with convert: why (its why NULL:
                                          another reason) */
  bool pattern[NT_MAX_TENSORS];        /* with convert: a sparse mask read as a
                                          dense 0/1 pattern (1 where it stores
                                          an entry), a valued mask located in
                                          O(1) instead of co-iterated again for
                                          every iteration of an outer loop */
  bool dups_walked[NT_MAX_TENSORS];    /* the operand's nonunique levels are walked
                                          entry by entry, each adding its share
                                          (lower/dup_walk.c): read in place, no
                                          sorted or merged copy for them */
  bool vec_layout[NT_MAX_TENSORS];     /* with convert: a dense operand read through
                                          a copy whose last mode is the vector
                                          loop's index (lower_plan_vector_layout) */
  int ws_depth;                        /* loop depth of the workspace, -1 none */
  IndexVar *ws_var;                    /* the output index scattered into it */
  const char *ws_name;                 /* precompute's name for it (NULL: w) */
  int vws_depth;                       /* precompute(e, {j}, w) of a subexpression
                                          into a dense output: the depth of its
                                          where() (lower/precompute.c), -1 none */
  IndexVar *vws_var;                   /* j: the innermost of its indices */
  int vws_nvars;                       /* its index set {i, j, ...}: this many */
  IndexVar *vws_vars[NT_MAX_INDICES];  /* in loop order (w's modes) */
  const Expr *vws_node;                /* e, a node of the rhs */
  const Expr *vws_sum;                 /* the sum whose body e is, when its loop
                                          moves into the producer (the consumer
                                          reads w in its place), else NULL */
  const char *vws_name;                /* w */
  bool split_sum;                      /* the root sum's temp adds a union's terms
                                          one loop nest each (lower/union_terms.c) */
  bool out_sparse;                     /* output has a compressed level */
  bool rangeable;                      /* sparse output whose first level is
                                          dense and walked by a dense loop:
                                          row-range kernels can build it in
                                          parallel chunks (lower_kernel_rows) */
  int pos_rows;                        /* > 0: a sparse output whose first level is
                                          compressed and shares the positions of
                                          operand pos_rows, the one operand the
                                          outermost loop walks (a product, each
                                          of its level-0 entries one output
                                          row): row-range compute kernels take
                                          ranges of that level's positions
                                          (lower_kernel_rows); 0 none */
  int seg_rows;                        /* > 0: a dense output that a root reduction
                                          (no inner sum) of a product fills, whose
                                          outermost loop walks operand seg_rows's
                                          level 0 alone, by positions (COO's rows,
                                          DCSR's): the driver runs the kernel on
                                          chunks of those positions, each into a
                                          partial output; 0 none */
  int out_like;                        /* > 0: a sparse output whose pattern is
                                          operand out_like's (a product of it
                                          with dense factors, same indices and
                                          format), under a schedule that repeats
                                          or fuses loops: its index arrays are
                                          copied from it and its values updated
                                          at its positions (lower/out_like.c) */
  bool reduce_rows;                    /* dense output, outermost loop a dense
                                          reduction loop: row-range kernels
                                          into per-chunk partial outputs; with
                                          out_sparse (parallelize(j, partials)
                                          alone sets it), sparse partials the
                                          driver merges (rt_storage_merge) */
  bool outer_dense;                    /* every operand the outermost loop walks
                                          is dense there: row ranges can bound it */
  ParStrategy row_strategy;            /* parallelize(i, s) of a row-chunked plan
                                          (rangeable, pos_rows, reduce_rows): how
                                          the driver cuts the chunks; PAR_DEFAULT
                                          is PAR_BALANCED */
} LowerPlan;

/* Code-generation switches, set by the driver from the options, the
 * target and the schedule; the plan above is analysis only. */
typedef struct LowerOptions {
  bool parallel;                       /* mark the outermost safe loop parallel */
  int vector_bits;                     /* explicit vectorization width in bits, 0 off */
  bool vector_gather;                  /* also vectorize loops that gather */
  int peel;                            /* fibers of up to this many entries
                                          computed branch-free (lower/peel.c),
                                          0 off */
  int prefetch;                        /* positions ahead that rows at sparse
                                          coordinates are prefetched
                                          (lower/prefetch.c), 0 off */
  bool masked_tail;                    /* a gather loop's remainder runs as one
                                          masked vector step in the JIT
                                          (LoopAttrs.masked_tail) */
  bool promote;                        /* keep fixed output updates in
                                          registers across a reduction loop
                                          (lower/promote.c; dense outputs) */
  int vec_width;                       /* vectorize(j, w): w lanes (the loops of j
                                          carry LoopAttrs.vectorize); 0 none */
  int unroll_jam;                      /* rows per unroll-and-jam block, 0 off */
  int lattice_max;                     /* a loop whose merge lattice may have more
                                          points is one merged co-iteration (a
                                          while per lattice point costs compile
                                          time exponential in the operands);
                                          0: LOWER_LATTICE_MAX */
  const Assignment *extents;           /* index extents known at compile time
                                          (NULL: none): a multi-register vector
                                          tier wider than lower_tier_cap of its
                                          index is never entered, so it is not
                                          emitted */
} LowerOptions;

/* The widest vector tier (lanes) worth emitting over an index of `extent`
 * iterations: the largest power of two <= extent, or 0 (no cap) when the
 * extent is unknown or at least LOWER_TIER_CAP_ALL. The driver keys its
 * cache by it, so one kernel serves every extent with the same cap. */
#define LOWER_TIER_CAP_ALL 128
int lower_tier_cap(int64_t extent);

/* The loop nest a concrete notation asks for (lower/nest.c): loops in
 * nesting order (outer foralls, then the producers of where()s), the
 * workspace where's depth and index (-1 / NULL without one), and the
 * statement its assignments compute together. */
typedef struct LoopNest {
  /* The statement, read from the notation's assignments alone: the
   * output's (the outermost consumer's) lhs, its rhs with each where()
   * folded back in (a sum's temp read as an EX_SUM node over the temp's
   * loop and statement, a workspace as what its producer computes), in
   * the normal form of Assignment (root reductions bound by no node) that
   * the emitter's scopes walk; its reduction operator (op, or def), the
   * semiring + and * are read in, and whether it keeps the output's
   * contents (`+=`). */
  const Expr *lhs, *rhs;
  OpKind op;
  const NtDef *def;
  const NtSemiring *semiring;
  bool keeps_old;
  int nloops;
  IndexVar *order[NT_MAX_INDICES];
  int ws_depth;
  IndexVar *ws_var;
  int unroll[NT_MAX_INDICES];          /* unroll(i, n): n, else 0 */
  int par[NT_MAX_INDICES];             /* parallelize(i, s): ParStrategy */
  int vec[NT_MAX_INDICES];             /* vectorize(i, w): w, else 0 */
  int par_asked;                       /* depth of the loop parallelize names, -1 */
  const CinLoopForm *form[NT_MAX_INDICES]; /* split / divide / pos / bound */
  int outer_at[NT_MAX_INDICES];        /* a split loop whose outer half sits
                                          above another loop: that loop's
                                          depth (above this one), else -1 */
  /* The where() of a subexpression's workspace (lower/precompute.c): the
   * loops from vws_depth down to vws_var's are its producer's; the
   * consumer's are those of the workspace's indices (vws_first's down to
   * vws_var's; others between them are the producer's alone) and those
   * below vws_var's. */
  int vws_depth;                       /* -1: none */
  IndexVar *vws_var;                   /* the workspace's innermost index */
  IndexVar *vws_first;                 /* its outermost (vws_var for a row) */
  int vws_end;                         /* one past the producer's last loop */
  const Expr *vws_node;                /* the producer's rhs: e, a node of the rhs */
  const Expr *vws_rhs;                 /* the consumer's: the rhs with w(j) for e */
  const Expr *vws_access;              /* that w(j) */
  bool vws_sums;                       /* the producer sums over its outer loops */
} LoopNest;
/* The nest and statement of c; folded expression nodes go into a. */
bool lower_nest(Arena *a, const Cin *c, LoopNest *n, Diag *d);
/* Whether v is summed in n's statement (not an index of its lhs), and
 * over the whole rhs (bound by no sum node: a root reduction). */
bool lower_nest_reduces(const LoopNest *n, const IndexVar *v);
bool lower_nest_root_reduces(const LoopNest *n, const IndexVar *v);
/* The identity of the statement's reduction operator (or definition). */
double lower_nest_identity(const LoopNest *n);

/* The kernel's operands by TensorId (0 the output): the symbol table the
 * notation's accesses point into, as the checker bound it (names,
 * declared formats, dtypes); the kernel's signature lists them in order. */
typedef struct LowerOperands {
  int ntensors;
  TensorVar *const *tensors;
} LowerOperands;
/* The operand table of as (pointing into it). */
static inline LowerOperands lower_operands(const Assignment *as) {
  return (LowerOperands){as->ntensors, as->tensors};
}

/* What one lowering reads: the concrete notation (the statement in its
 * assignments, the loops, their order, the where()s: lower_nest), the
 * operands its accesses name, the plan made for that order (formats,
 * conversions) and the options. The index notation the notation was made
 * from is not read: a notation edited by hand lowers as edited. */
typedef struct LowerInput {
  const Cin *cin;
  LowerOperands ops;
  const LowerPlan *plan;
  const LowerOptions *opt;
} LowerInput;

/* Plans the loops of as, staying as close to the requested order `want`
 * (nwant variables, outermost first) as the formats allow; with strict
 * (an explicit reorder) the order is kept and operands that disagree are
 * converted. Refuses what cannot be lowered with a message. */
bool lower_plan(const Assignment *as, IndexVar *const *want, int nwant,
                bool strict, LowerPlan *plan, Diag *d);

/* Whether operand t's nonunique levels may be walked entry by entry under
 * plan p (lower/dup_walk.c): its format's nonunique levels have positions
 * and own fibers or are last, it is read once, walked alone (every other
 * access dense over its indices), and each nonunique level's sum (the sum
 * node over its index, or the root's + into a dense output) is linear in
 * it, under plus.times, with no mask, bool output or workspace. */
bool lower_plan_dups_walked(const Assignment *as, const LowerPlan *p, TensorId t);
/* After the plan's conversions and the schedule's directives (workspaces,
 * split sums), or with keep_copy (a fuse or parallelize names the loops:
 * for operands that would be copied): an operand whose duplicates are no
 * longer walked one by one is read through the copy (sorted, its runs'
 * fibers merged) after all; a copy's are walked as its format allows. */
void lower_plan_recheck_dups(const Assignment *as, LowerPlan *p, bool keep_copy);

/* One comment line per operand the plan reads through an ordered copy of
 * a level stored without order: its stored and read formats and why the
 * loops need that level in order (what -print-cin shows under the
 * notation; other conversions show in the kernel's comments). */
void lower_plan_print_conversions(FILE *out, const Assignment *as, const LowerPlan *plan);

/* Whether a sparse output's kernel under plan p stores only coordinates
 * where the rhs may be present: its leaf (the last level that is not
 * full) is scattered through the workspace, or its loop walks a sparse
 * level wherever the rhs exists (no full point in the lattice there) and
 * every loop below it finds an entry under each stored coordinate (only
 * the accesses walked at the leaf, or full points, decide there), in each
 * case of the leaf's lattice that stores one (which of the accesses walked
 * there are present). False for SpGEMM into CSC or COO over CSR operands
 * (j, i, k): the sum below i makes every i a candidate, so every column
 * stores every row; for B(i,j,l) * C(l,k) into `ssd`: a fiber of B over
 * no entry of C; and for B(i,j,k) * C(k,l) + D(i,j,l) with j innermost
 * but k: where B's fiber stores j and D does not, the sum may find none. */
bool lower_plan_output_exact(const Assignment *as, const LowerPlan *p);

/* The notation rewritten to the plan (what is lowered): cin's loops in
 * the planner's order (the formats may have moved them), then the
 * workspace where() the plan chose (Gustavson's SpGEMM, or precompute);
 * NULL with d set. */
Cin *lower_plan_notation(Arena *a, const LowerPlan *p, const Cin *cin, Diag *d);

/* precompute(e, {j}, name) of a subexpression e (or the whole rhs) into
 * a dense output: places its where() in p's order (at j's loop, or above
 * the loops of indices summed only inside e right above it, when a sum
 * may move into e) and sets p->vws_*. Over {i, j, ...} (nvars > 1) the
 * where sits at the outermost one's loop (or above, as for j); the loops
 * between the indices' loops must be of indices summed only inside e
 * (the producer's alone); refused with a message (arg: the
 * directive's text) where it is not lowered (lower/precompute.c). */
bool lower_plan_subexpr_workspace(const Assignment *as, LowerPlan *p, const Expr *e,
                                  IndexVar *const *vars, int nvars, const char *name,
                                  const char *arg, Diag *d);

/* What the driver settles for a statement's plan apart from the notation
 * (from the target and the environment). */
typedef struct ScheduleSwitches {
  bool vectorizing;    /* explicit vectorization is on: vectorize(j, w) is
                          kept and a contraction takes its vector order */
  int scatter_min;     /* lower_plan_scatter_union's thresholds (0: defaults) */
  int split_sum_min;
} ScheduleSwitches;

/* The plan of one statement (lower/schedule.c): the notation of as under
 * schedule s, the loop order the formats allow for it (a sparse output's
 * outer loops in its level order where sums fix the order), the default
 * contraction order (added to s as a reorder, the plan made again), then
 * parallelize, fuse, precompute and vectorize (o->vec_width) checked
 * against the plan, and a wide union's workspace. Returns the notation
 * the directives named loops in (lower_plan_notation makes what is
 * lowered), or NULL with a message in d. */
Cin *lower_plan_schedule(Arena *a, const Assignment *as, Schedule *s,
                         const ScheduleSwitches *sw, LowerPlan *p, LowerOptions *o, Diag *d);

/* The default order of a contraction that will be vectorized, given the
 * plan of the user's schedule: adds reorder(output indices, reductions) to
 * s when the user gave no reorder or precompute, the order can be walked
 * without converting an operand and differs from the plan's; returns
 * whether it added it (lower/order.c). */
bool lower_order_contraction(const Assignment *as, const LowerPlan *plain, bool vectorizing,
                             Schedule *s);

/* The layout of dense operands for a vectorized contraction over one
 * sparse operand whose plan ends with the output's innermost index v, then
 * reductions (the vectorizer's outer vector loop over v): a dense operand
 * indexed by v in another than its last stored mode is read through a
 * copy with v's mode last (p->convert), so the vector lanes load
 * contiguous values instead of gathering (TTM's C(k,l): C^T). Not when v's
 * extent, known at compile time, is under `lanes` (0: not vectorizing).
 * Returns whether it changed p (lower/order.c). */
bool lower_plan_vector_layout(const Assignment *as, LowerPlan *p, int lanes);

/* ---- dense contractions by GETT / TTGT / LoG (lower/gett.c) ---- */

#define GETT_LOOPS (-1)   /* the method "loops": the loop-IR kernel */
#define GETT_MODEL (-3)   /* the method "model": the model's choice, never timed */
#define GETT_TUNE_MIN_FLOPS 2e7   /* smaller contractions take the model's choice */

/* How a pure dense contraction C(I_m, I_n) (+)= A(I_m, I_k) * B(I_n, I_k)
 * runs: the index sets (IndexIds, fastest first), which tensors are A and
 * B, the micro-kernel and cache blocking, the model's estimates and the
 * method, and the words of tj_rt_gett's plan (runtime/abi.h TJ_GP_*). */
typedef struct GettPlan {
  int method;                          /* TJ_GETT_* or GETT_LOOPS */
  bool forced;                         /* by method(...) in the schedule */
  int a, b;                            /* TensorIds of A and B */
  int nm, nn, nk;
  int m[NT_MAX_INDICES], n[NT_MAX_INDICES], k[NT_MAX_INDICES];
  int mr, nr, vl, mc, kc, nc;
  double cost[3];                      /* the model's seconds per method */
  unsigned tune;                       /* methods timed at the first run (bit per
                                          TJ_GETT_*): those the model puts within
                                          2x of its best; 0 when forced, under
                                          method(model) or below
                                          GETT_TUNE_MIN_FLOPS */
  int32_t words[LIR_GETT_WORDS];
} GettPlan;

/* True when as is a pure dense contraction (see lower/gett.c). */
bool lower_gett_form(const Assignment *as);
/* Plans as by GETT / TTGT / LoG for a vector width: the model's method
 * (with the close candidates timed at the first run), or `forced` (a
 * TJ_GETT_*; GETT_MODEL the model's method untimed; -2 none); false
 * (method GETT_LOOPS) when as is not a pure dense contraction or forced is
 * GETT_LOOPS. */
bool lower_gett_plan(const Assignment *as, int vector_bits, int forced, GettPlan *g);
/* The kernel of a planned contraction (every phase but assembly): the
 * dense output sized, then the tj_rt_gett call. */
LirKernel *lower_gett_kernel(Arena *a, const LowerInput *in, const GettPlan *g,
                             const char *name, Diag *d);
/* The tj_rt_gett call of a planned contraction (after a comment naming
 * its method); NULL with d set when out of memory. */
LirStmt *lower_gett_call(Arena *a, const GettPlan *g, Diag *d);
/* The plan as text (-print-gett). */
void lower_gett_print(FILE *f, const Assignment *as, const GettPlan *g);
/* "gett", "ttgt", "log", else "loops"; and back (-2 for an unknown name). */
const char *lower_gett_method_name(int m);
int lower_gett_method_of(const char *name);

/* The number of additive terms of e (in as) with products distributed over
 * sums ((B1 + B2) * C: two; a semiring's add and mul under one), 0 when e
 * cannot be split (a sum node or a mask inside, or more than 64 terms)
 * (lower/union_terms.c). */
int lower_union_term_count(const Assignment *as, const Expr *e);

/* Chooses how a wide union is lowered term by term: under a root sum of
 * the rhs, at least min_sum_terms additive terms add into its temp one
 * loop nest each (split_sum); else into a sparse or all-dense output
 * written by the innermost loop, with no reduction, at least min_terms (and
 * two; 0: the defaults above) terms each scatter their own fiber into a
 * workspace (O(nnz) per row, not O(k) per coordinate). Returns whether it
 * did either. */
bool lower_plan_scatter_union(const Assignment *as, LowerPlan *p, int min_terms,
                              int min_sum_terms);

/* The operand whose pattern a sparse output takes under cin's schedule
 * (LowerPlan.out_like, lower/out_like.c), or 0: taken where the schedule
 * repeats loops between a split's halves or fuses loops, which an output
 * appended in loop order cannot follow. */
int lower_plan_out_like(const Assignment *as, const LowerPlan *p, const Cin *cin);

/* Emits the kernel for one phase of the plan into arena memory: the loop
 * nest only; the loop-IR passes (LOWER_PASSES) run after it. */
LirKernel *lower_kernel(Arena *a, const LowerInput *in, LowerPhase phase, const char *name,
                        Diag *d);

/* The kernel of one phase of sequence(S1, S2, ...) into a dense output:
 * each statement's loop nest (or, where gett[p] has a method, its GETT
 * call) in turn in one kernel, S2.. updating (+=) what S1 defined. */
LirKernel *lower_kernel_seq(Arena *a, const LowerInput *parts, const GettPlan *const *gett,
                            int n, LowerPhase phase, const char *name, Diag *d);

/* The row-range variant of a rangeable (or reduce_rows) plan's kernel: an
 * extra last operand (the "range" descriptor, dims[0] = lo, dims[1] = hi)
 * limits the outermost loop to rows [lo, hi). A pos_rows plan has only a
 * compute variant, whose range is of operand pos_rows's level-0 positions,
 * which are the output's level-0 positions too. For sparse outputs, assemble
 * / evaluate build a chunk-local output (its first level has hi - lo rows),
 * which the driver concatenates; compute writes values straight into the
 * assembled global output, whose vals the caller has already reserved. For
 * reduce_rows plans the kernel writes a zeroed partial output (never
 * accumulating), which the driver sums in chunk order. */
LirKernel *lower_kernel_rows(Arena *a, const LowerInput *in, LowerPhase phase,
                             const char *name, Diag *d);
/* For a reduce_rows plan whose root reduction is a definition (root_def):
 * the kernel that combines one partial output (operand 1) into the output
 * (operand 0) by the definition, value by value, in place. */
LirKernel *lower_kernel_combine(Arena *a, const LowerInput *in, const char *name, Diag *d);

/* The loop-IR passes, in the order they run on a lowered kernel (QBE's
 * pass list): each takes the options it needs, keeps the kernel's meaning
 * (up to reassociation of sums) and returns how many places it rewrote.
 * A NULL name ends the list. */
typedef struct LowerPass {
  const char *name;                    /* "tile", "vectorize", "unroll-jam" */
  int (*run)(Arena *a, LirKernel *k, const LowerOptions *opt);
} LowerPass;
extern const LowerPass LOWER_PASSES[];

/* The explicit vectorization pass: every innermost `for` whose body is
 * straight-line (loads, unit-stride stores, reductions into scalars) is
 * split into a vector loop of the plan's width and a scalar remainder.
 * Requires a lowered kernel; keeps its meaning exactly (up to reassociation
 * of reductions). Returns how many loops it vectorized. */
int lower_vectorize(Arena *a, LirKernel *k, const LowerOptions *opt, LirType vtype);

/* Cache blocking of GEMM-shaped dense nests (lower/tile.c): the column
 * and reduction loops of a parallel row loop get block loops around it.
 * Runs before vectorization; keeps the meaning up to reassociation of the
 * reduction. Returns how many nests it blocked. */
int lower_tile(Arena *a, LirKernel *k);

/* Unroll-and-jam (register blocking): every parallel `for` whose inner
 * loops have bounds independent of it and whose body loads something it
 * does not index runs `factor` iterations at once, jammed into one copy of
 * the inner loops (lower/unroll_jam.c). Requires a lowered kernel; keeps
 * its meaning exactly. Returns how many loops it rewrote. */
int lower_unroll_jam(Arena *a, LirKernel *k, int factor);

/* The full unroll-and-jam of a loop of `trips` iterations (2 to
 * LOWER_JAM_MAX; the caller knows the count): its copies with iv = lo + r,
 * jammed as above (one copy of each inner loop, whose bounds must not
 * depend on iv; what does not depend on iv computed once). The loop must
 * assign no variable declared outside it but the nsums `sums`, which copy
 * r adds into parts[r * nsums + s] instead (split reductions); the caller
 * answers for its stores (the copies' statements interleave) and for the
 * sums being only added to. Returns the list that replaces the loop (in
 * a), or NULL when it does not qualify. */
#define LOWER_JAM_MAX 8
LirStmt *lower_jam_copies(Arena *a, LirKernel *k, const LirStmt *loop, int trips,
                          LirVar *const *sums, LirVar *const *parts, int nsums);
/* A copy of statement s (its next not followed) with a fresh variable for
 * every DECL; loops keep their ivs. For what lower_jam_copies takes (no
 * while, if or call); NULL otherwise. */
LirStmt *lower_clone_stmt(Arena *a, LirKernel *k, LirStmt *s);

/* Register promotion (lower/promote.c): a loop that adds into output
 * elements that stay put while it runs adds into accumulators declared
 * before it, and the elements get them after it; a loop of at most
 * LOWER_JAM_MAX constant trips that alone moves such an element is
 * jammed first. For dense outputs (an update after a loop of no trips
 * adds zero). A jammed loop of 8 trips (or of 4, below 512-bit vectors:
 * vector_bits) runs in groups of 4 (2) rows, chosen at run time by the
 * row's length (lower/promote.c). Keeps the meaning up to reassociation
 * of the sums. Returns how many loops it rewrote. */
int lower_promote(Arena *a, LirKernel *k, int vector_bits);

/* Peeling of short gather reductions: a scalar loop `t += e` over a
 * sparse fiber whose body gathers (x[crd[p]]) computes a fiber of 1 to
 * width (2..LOWER_PEEL_MAX) entries branch-free at clamped positions and
 * loops over longer ones (lower/peel.c). Keeps the meaning up to
 * reassociation of the sum. Returns how many loops it rewrote. */
int lower_peel(Arena *a, LirKernel *k, int width);
#define LOWER_PEEL_WIDTH 3
#define LOWER_PEEL_MAX 8

/* Software prefetch (lower/prefetch.c): a scalar loop over positions p
 * inside a vector loop over j, whose body loads B[f(crd[p], j)] (a row
 * segment at a sparse coordinate), first prefetches the lines of
 * B[f(crd[q], j)], q = min(p + ahead, crd_len - 1), in a copy of the vector
 * loop that runs when B holds at least LOWER_PREFETCH_MIN_BYTES. Where the
 * row is read in a constant loop over a block (BSR: B[(crd[p]*4 + j_i)*n +
 * j], j_i < LOWER_PREFETCH_BLOCK_TRIPS) and feeds LOWER_PREFETCH_BLOCK_USES
 * products or more, each of the block's rows is prefetched ahead / trips
 * blocks ahead, from LOWER_PREFETCH_BLOCK_MIN_BYTES. Keeps the meaning.
 * Returns how many loops it rewrote. */
#define LOWER_PREFETCH_AHEAD 8
#define LOWER_PREFETCH_MIN_BYTES ((int64_t)16 << 20)
#define LOWER_PREFETCH_BLOCK_TRIPS 8
#define LOWER_PREFETCH_BLOCK_USES 4
#define LOWER_PREFETCH_BLOCK_MIN_BYTES ((int64_t)1 << 20)
int lower_prefetch(Arena *a, LirKernel *k, int ahead);

/* Prints the merge lattice of every loop of the plan (-print-lattice). */
void lower_print_lattices(FILE *out, const LowerInput *in);

#endif

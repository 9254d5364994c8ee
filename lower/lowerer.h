/* Internal state of one lowering (one kernel of one phase), shared by
 * lattice.c, lower_loops.c and lower.c. Accesses are numbered: 0 is the
 * output, 1.. the rhs accesses in source order; masks over them are AMask. */
#ifndef TJ_LOWER_LOWERER_H
#define TJ_LOWER_LOWERER_H

#include <stdint.h>

#include "../ir/level.h"
#include "../runtime/abi.h"
#include "lower.h"

#define LW_MAX_ACCESS 64

typedef uint64_t AMask;

typedef struct Access {
  const Expr *e;
  TensorId t;
  const tj_format *f;      /* the format read (after conversions) */
  bool located;            /* all levels dense: located, not iterated */
  bool valued_mask;        /* located and a mask/except's first argument:
                              its value is read in the assemble phase too */
  int last_depth;          /* loop depth of its last-bound variable, -1 order 0 */
} Access;

/* A lattice point: the sparse iterators co-iterated (a mask of accesses
 * whose level at this loop is sparse) and whether it covers the whole
 * extent (a dense iterator or a missing variable makes it full). */
typedef struct LatPoint {
  AMask sparse;
  bool full;
} LatPoint;

/* Lattices larger than this are never built: a loop whose estimated
 * lattice exceeds it (or the plan's smaller threshold) is lowered as one
 * merged co-iteration instead (lw_wide_at). */
#define LAT_MAX_POINTS 64

typedef struct Lattice {
  int n;
  bool overflow;           /* a point was past LAT_MAX_POINTS: an internal error */
  LatPoint p[LAT_MAX_POINTS];
} Lattice;

enum { T_OUT, T_TEMP, T_WS, T_VWS, T_VWS_RESET, /* T_VWS: a subexpression's workspace */
       T_BOUND };  /* the workspace producer's loops count its products (lw_ws_bound) */

/* Rows with at most this many products keep the list and the sort; longer
 * ones scatter without the list and read the marks back (bench/README,
 * "SpGEMM chooses per row"). */
enum { WS_LIST_PRODUCTS = 64 };

/* A run of equal coordinates (a segmented level, e.g. COO's rows) whose
 * end is not scanned for ahead: the loop over its singleton child walks
 * the run and stops where the parent's coordinate changes, then sets seg.
 * Taken only when that loop is the one use of the run's end and runs
 * unconditionally (lower_loops.c, lazy_point_loop). */
typedef struct LazyRun {
  LirVar *seg, *c, *end;   /* the run's end (set by the child), coordinate, level end */
  int level;               /* the segmented level */
  int uses;                /* child loops that found the end */
  bool spoiled;            /* something else read the run's end */
  LirStmt *loop;           /* the child loop, when uses == 1 */
} LazyRun;

typedef struct Lowerer {
  Arena *a;
  Diag *d;
  LowerOperands ops;                       /* the operands (the statement is nest's) */
  const LowerPlan *plan;
  const LowerOptions *opt;
  LoopNest nest;                           /* from the concrete notation */
  LowerPhase phase;
  bool emit_index, emit_values;
  LirKernel *k;
  int nacc;
  Access acc[LW_MAX_ACCESS];
  int depth_of[NT_MAX_INDICES];            /* loop depth per IndexId */
  int first_red;                           /* depth of first reduction var */
  bool par_ok;                             /* the loop at par_depth may be parallel */
  bool partials;                           /* parallelize(k, partials) of an inner
                                              reduction loop: per-thread copies of
                                              the output (partials.c) */
  LirVar *part_rows, *part_vals, *part_slot, *part_q;
  LirVar *out_size;                        /* a dense output's entries */
  bool atomic;                             /* parallelize(k, atomics) of a root
                                              reduction loop: the output's
                                              updates are atomic */
  int par_depth;                           /* 0, or the depth parallelize names */
  bool ranged;                             /* row-range kernel (lower_kernel_rows) */
  bool pos_walked;                         /* a ranged pos_rows kernel's depth-0
                                              loop took the range's positions */
  bool stores_all;                         /* every output entry is stored once:
                                              nothing zeroed first */
  bool zero_rows;                          /* the depth-0 loop zeroes the dense
                                              output's rows it reaches (and the
                                              gaps before them), not the prologue */
  LirVar *range_lo, *range_hi;
  LirVar *fuse_f[NT_MAX_INDICES];          /* the inner loop of a fuse, by depth:
                                              the fused loop's variable f and */
  LirVar *fuse_n[NT_MAX_INDICES];          /* the inner extent (j = f % n), or NULL:
                                              f is a position of the level the
                                              inner loop walks (pos of a fuse) */
  LirVar *block_b[NT_MAX_INDICES];         /* a split loop whose loop over blocks */
  LirVar *block_e[NT_MAX_INDICES];         /* was emitted above other loops: the
                                              current block [b, e), by depth */
  /* per-access binding state while emitting */
  LirExpr *pos[LW_MAX_ACCESS];             /* position at the last bound level */
  LirVar *seg_end[LW_MAX_ACCESS];          /* end of a nonunique segment */
  bool slice_bounded;                      /* lw_pos_bounds' caller narrows a
                                              sliced level (lw_slice_bounds) */
  LirVar *lvl_size[NT_MAX_TENSORS][NT_MAX_ORDER]; /* a sliced dense level's
                                              stored size (levels[l].size) */
  LirVar *slice_val[NT_MAX_TENSORS][NT_MAX_ORDER][3]; /* a dynamic ('?') slice
                                              value of a dim: offset, size,
                                              stride, read from the operand */
  LazyRun lazy[LW_MAX_ACCESS];             /* a run whose end its child's
                                              loop finds (lower_loops.c) */
  LirVar *val[LW_MAX_ACCESS];              /* hoisted value */
  LirVar *live[LW_MAX_ACCESS];             /* under a merged loop: whether the
                                              access hit there (its levels below
                                              and its value are guarded by it);
                                              NULL: statically alive */
  LirVar *coord[NT_MAX_INDICES];           /* coordinate var per IndexId */
  struct LwHoist {
    int level;
    LirVar *p, *end;                       /* p NULL: none */
    const LirExpr *parent;                 /* the parent position it was made under */
    LirVar *mid, *mid_end;                 /* its whole blocks (edge_bounds) or NULL */
  } hoist[LW_MAX_ACCESS];                  /* per access: a sliced compressed level's
                                              segment narrowed where its parent
                                              was bound (lower_loops.c) */
  bool win_edge[NT_MAX_INDICES];           /* per IndexId: in a peeled edge block */
  bool win_whole[NT_MAX_INDICES];          /* per IndexId: the loop over it is in a
                                              block its window holds whole (the
                                              middle of a peeled block loop) */
  /* operand arrays and dims (entry-block pointer variables) */
  LirVar *vals_ptr[NT_MAX_TENSORS];
  LirVar *pos_ptr[NT_MAX_TENSORS][NT_MAX_ORDER];
  LirVar *crd_ptr[NT_MAX_TENSORS][NT_MAX_ORDER];
  LirVar *dim[NT_MAX_TENSORS][NT_MAX_ORDER];
  /* output assembly */
  LirVar *out_p[NT_MAX_ORDER];             /* append counters per level */
  LirVar *crd_cap[NT_MAX_ORDER], *pos_cap[NT_MAX_ORDER];
  int out_last;                            /* last output level */
  int target;                              /* T_OUT, T_TEMP, T_WS */
  LirVar *temp;
  /* Summation scopes (see ir/sums.c): the loops at depths [0, scope_end)
   * belong to the expression `root` (the rhs, or a sum node's body); each
   * sum node inside it nests its own loop below, summing into a temp that
   * the root's statement then reads in the sum's place. */
  const Expr *root;
  int scope_end;
  int nsum_temps;
  const Expr *sum_node[NT_MAX_INDICES];
  LirVar *sum_temp[NT_MAX_INDICES];
  LirVar *ws_vals, *ws_mark, *ws_list, *ws_n;
  /* A row's products bound (T_BOUND): the workspace's marks are followed by
   * a touched byte per 64 of them, mark[ws_touched + j / 64], ws_touched =
   * 64 * ws_words; a long row scatters without the list (ws_unlisted) and
   * reads its coordinates back from the marks. */
  LirVar *ws_bound, *ws_words, *ws_touched;
  bool ws_unlisted, ws_unbounded;
  /* A nonordered output's row accumulated in place (lw_ws_in_place): the
   * product's entry is vals[p + ws_at - 1], ws_at read from its mark; rows
   * count their products into ws_prods, and ws_branchless (set from the
   * row before) picks the copy of the producer without the first-touch
   * branch (ws_select while lowering it). */
  LirVar *ws_at, *ws_prods, *ws_branchless;
  bool ws_select;
  /* Rows whose loop above the workspace variable's runs at most this many
   * trips have at most WS_LIST_PRODUCTS products and are not counted
   * (lower.c, short_trips); NULL: every row is counted. */
  LirVar *ws_short_trips;
  /* A subexpression's workspace (precompute.c): read as access vws_x of
   * tensor slot vws_t (after the kernel's operands), a dense row. */
  int vws_x, vws_t;
  tj_format vws_fmt;
  bool vws_in;                             /* its producer or consumer is being emitted */
  bool vws_consumer;                       /* its consumer is: lw_subexpr_skips */
  bool vws_reset_on_read;                  /* the consumer resets each entry it reads */
  LirVar *vws_slots;                       /* the parallel loop runs around the where:
                                              the workspace has this many rows, one
                                              per thread (NULL: one row) */
  LirVar *vws_slot;                        /* inside the where: this thread's row */
  LirType vtype;                           /* value type of the expression */
  bool is_bool;                            /* bool dtype: vtype I8 0/1, + max, * min */
  bool root_reduces;                       /* the nest has root reductions */
  bool valued_masks;                       /* the rhs masks by an all-dense tensor
                                              (its values decide, at run time) */
  OpKind out_op;                           /* how the output is updated: the root
                                              operator (root reductions, +=), or
                                              OP_NONE: stored once */
  const NtDef *out_def;                    /* or a definition's (root_def):
                                              vals = def(vals, v) */
  double out_init;                         /* a dense output's (and the
                                              workspace's) start: the root
                                              operator's identity, or the zero */
  OpKind temp_op;                          /* T_TEMP: the reduction into temp */
  const NtDef *temp_def;                   /* or a definition's (temp_op OP_NONE) */
  LirVar *root_temp;                       /* the temp of the root reduction */
  LirVar *out_hit;                         /* set where the root reduction has a
                                              contribution: its sparse output
                                              entry exists (case_body) */
  LirVar *leaf_base;                       /* a dense loop over the output's leaf
                                              (lower_loops.c, dense_leaf_loop): */
  LirExpr *leaf_lo;                        /* its iteration iv appends at
                                              leaf_base + (iv - leaf_lo) */
  bool leaf_base_used;                     /* case_body appended there */
  int leaf_room;                           /* 1 + the depth of a merge over the
                                              output's leaf that made room for
                                              all its appends before its loops
                                              (merge_room): its cases append
                                              unchecked; 0: none */
  int nnames, names_cap;                   /* base names handed out (lw_name) */
  const char **names;
  int *name_uses;
} Lowerer;

/* level.c: level functions, asked of the level type (ir/level.h) */
/* Whether level `level` of access x is iterated (not full). */
bool lw_is_sparse_level(const Lowerer *lw, int x, int level);
/* Whether level l of f may repeat a coordinate inside its range: nonunique
 * levels, and singletons below them (COO keeps duplicate entries). */
bool lw_level_segmented(const tj_format *f, int l);
/* dup_walk.c: whether the loop over level l of access x, a nonunique
 * level, visits its duplicates one by one (as a unique level's loop does):
 * the plan's decision (LowerPlan.dups_walked): x walks it alone and its
 * value reaches a `+` update linearly, so the duplicates' shares add up to
 * their sum. */
bool lw_dups_walked(const Lowerer *lw, int x, int l);
/* Whether the loop at depth walks some access's duplicates one by one
 * (its iterations may then update the same output entry). */
bool lw_walks_dups_at(const Lowerer *lw, int depth);
/* Notes a read of access x's run end other than by the loop that finds it
 * lazily (LazyRun): the run's end is then scanned for ahead. */
void lw_seg_end_read(Lowerer *lw, int x);
/* Whether output level l of f can be written: located (dense), appended
 * with unique coordinates per segment (compressed), or part of a run that
 * reaches the last level (lw_out_run_start). */
bool lw_output_level_ok(const tj_format *f, int l);
/* The first level of the output run holding level l: a compressed level
 * with singletons below it (COO `uq`, `uqq`) shares one append position;
 * l itself when l is in no run. */
int lw_out_run_start(const tj_format *f, int l);
/* Whether level l of f is in such a run. */
bool lw_out_in_run(const tj_format *f, int l);
/* Whether row chunks of an output of format f concatenate
 * (rt_storage_concat): a dense first level, compressed unique below. */
bool lw_out_concat_ok(const tj_format *f);
/* Locate: the position of coordinate c in level l (LV_LOCATE) of access x
 * under parent position parent (NULL: the top level, c itself). */
LirExpr *lw_locate(Lowerer *lw, int x, int l, LirExpr *parent, LirExpr *c);
/* Coordinate access: the coordinate at position p of level l (LV_HAS_CRD)
 * of access x. */
LirExpr *lw_coord_at(Lowerer *lw, int x, int l, LirExpr *p);
/* A view's slices (level.c): the {offset, size, stride} of the dim level
 * l of access x stores, or NULL; whether the level's iterator must skip
 * positions outside the slice (stride > 1, or a singleton / unordered
 * level); whether some non-full level of x is sliced. */
const int64_t *lw_slice(const Lowerer *lw, int x, int l);
/* Value c (0 offset, 1 size, 2 stride) of the slice lw_slice gives: the
 * constant, or the operand's run-time value where it is dynamic ('?'). */
LirExpr *lw_slice_value(Lowerer *lw, int x, int l, int c);
bool lw_slice_filtered(const Lowerer *lw, int x, int l);
bool lw_access_sliced(const Lowerer *lw, int x);
/* Whether position p of sliced level l lies in the slice. */
LirExpr *lw_slice_valid(Lowerer *lw, int x, int l, LirExpr *p);
/* Moves p to the first position in [p, end) inside the slice (NULL when
 * the level needs no filter). */
LirStmt *lw_slice_skip(Lowerer *lw, int x, int l, LirVar *p, LirVar *end);
/* The block window the loop over index v reads through (tj_window: the
 * first access storing v at a window level) and its block's coordinate
 * variable; false when v has none. */
typedef struct LwHoist LwHoist;
typedef struct LwWindow {
  const tj_window *w;
  LirVar *block;
  bool edge;           /* in a cut edge block: no whole-block version */
} LwWindow;
bool lw_index_window(const Lowerer *lw, const IndexVar *v, LwWindow *out);
/* Emits the loop over a window's index (named name), in block b over
 * lo(b) .. hi(b) by the stride; with stride 1, a block whose window is
 * whole runs a loop of constant bounds 0 .. k instead (`if (lo == 0 &&
 * hi == k) full else edge`), so only the edge blocks take variable
 * bounds. body(lw, ctx, iv) makes each loop's body; *full (NULL when no
 * block can be whole) and *edge are the loops. */
typedef LirStmt *(*LwLoopBody)(Lowerer *lw, void *ctx, LirVar *iv);
/* For block index b of a stride-1 block window: its in-block index, the
 * frame's block count and whether its first / last block is cut (the
 * window holds only part of it); false when b is no window's block. */
typedef struct LwEdges {
  const IndexVar *inner;
  int64_t nb;
  bool first, last;
} LwEdges;
bool lw_window_edges(const Lowerer *lw, const IndexVar *b, LwEdges *out);
LirStmt *lw_window_loop(Lowerer *lw, const LwWindow *win, const char *name, LwLoopBody body,
                        void *ctx, LirStmt **full, LirStmt **edge);
/* For a window over a sparse (n_out_of_m) mod level, whose loop walks the
 * level's positions: appends to *s the window's bounds in its block and
 * returns whether coordinate c is the view's (lo <= c < hi, on the
 * stride from lo), named after name. */
LirExpr *lw_window_valid(Lowerer *lw, const LwWindow *win, const char *name, LirExpr *c,
                         LirStmt **s);
/* Narrows [p, end) of a sliced sparse level to its slice, then skips to
 * the first valid position (NULL when the level is not sliced). */
LirStmt *lw_slice_bounds(Lowerer *lw, int x, int l, LirVar *p, LirVar *end);
/* The output's leaf: its last level that is not full (-1: none). Dense
 * levels below it (a dense tail: `sd`, `ssd`) are located inside the
 * block of values of each leaf position. */
int lw_out_leaf(const tj_format *f);
/* Whether f has dense levels below its leaf. */
bool lw_out_dense_tail(const tj_format *f);
/* The first output level below l with positions (compressed), past dense
 * levels; -1 when another kind of level or none comes first. */
int lw_out_next_appended(const tj_format *f, int l);
/* The values of one leaf position of the output: the product of the sizes
 * of the levels below lw->out_last, or NULL when there are none (1). */
LirExpr *lw_out_block(Lowerer *lw);
/* The number of values of n leaf positions (n times the block). */
LirExpr *lw_out_vals(Lowerer *lw, LirExpr *n);
/* Sets the block of values of leaf position p to the output's start
 * (lw->out_init) before its dense levels are written; NULL when the output
 * has no dense tail or the phase writes no values. */
LirStmt *lw_out_block_init(Lowerer *lw, LirExpr *p);
/* [*lo, *hi): the positions of level l of access x under parent position
 * pp (pos[pp] .. pos[pp+1], the parent's segment, or pp .. pp+1). */
void lw_pos_bounds(Lowerer *lw, int x, int l, LirExpr *pp, LirExpr **lo, LirExpr **hi);

/* iter_graph.c */
/* Appends the access nodes of e, in source order, to out; false (out
 * holding the first max) when e has more than max. */
bool lw_collect_accesses(const Expr *e, const Expr **out, int *n, int max);

/* lattice.c */
/* Level of access x that the loop at depth stores, or -1. */
int lw_level_at(const Lowerer *lw, int x, int depth);
/* Accesses alive in mask whose level at depth is sparse. */
AMask lw_sparse_at(const Lowerer *lw, AMask alive, int depth);
/* Whether reduction node sum is zero (absent) where its body is: its
 * operator's identity is the semiring's zero (sums are; min is not). */
bool lw_reduces_to_zero(const Lowerer *lw, const Expr *sum);
/* lw_expr_zero, and also zero where an except(m, e) has m certainly
 * present: alive with every level bound by the loop at depth. Points that
 * are zero only so stay in the lattice (their co-iteration is what keeps
 * m's coordinates out); their cases are empty. */
bool lw_expr_excluded(const Lowerer *lw, const Expr *e, AMask alive, int depth);
/* Whether rhs is identically zero when only the accesses in alive exist. */
bool lw_expr_zero(const Lowerer *lw, const Expr *e, AMask alive);
/* The merge lattice of rhs at the loop at depth, ordered top first,
 * pruned (dense exhausts last) and without all-zero points. */
void lw_lattice(const Lowerer *lw, AMask alive, int depth, Lattice *out);
/* An upper bound of the lattice's point count (saturating), computed from
 * the expression without building the lattice. */
int64_t lw_lattice_bound(const Lowerer *lw, AMask alive, int depth);
/* Whether the loop at depth is lowered as one merged co-iteration: its
 * lattice could exceed the plan's threshold (or LAT_MAX_POINTS). */
bool lw_wide_at(const Lowerer *lw, AMask alive, int depth);
int lw_access_index(const Lowerer *lw, const Expr *e);
void lw_print_point(FILE *out, const Lowerer *lw, const LatPoint *p);

/* The value of sum node e in the scope being lowered (its temp), or NULL. */
LirVar *lw_sum_temp(const Lowerer *lw, const Expr *e);

/* union_terms.c */
/* Whether the loop at depth scatters the rhs into the workspace term by
 * term: the workspace's own innermost loop, no reduction or valued mask, += only
 * into a dense output, and at least two additive terms (a semiring's add
 * adds them). */
bool lw_scatters_terms(const Lowerer *lw, int depth);
/* Whether the compute phase drains the row workspace along the output's
 * assembled coordinates (no touched list, no marks). */
bool lw_ws_drains_assembled(const Lowerer *lw);
/* Whether the row workspace's touched list is kept in the output's crd at
 * the row's end (a sparse output whose coordinates this phase writes): no
 * list of its own, sorted in place. */
bool lw_ws_list_in_crd(const Lowerer *lw);
/* Whether a row's coordinates may be read back in order from the marks
 * (the list is the output's crd, its level ordered): the marks then carry
 * the touched bytes. */
bool lw_ws_reads_marks(const Lowerer *lw);
/* Whether a row accumulates straight into the output (a nonordered level
 * whose coordinates and values this phase writes): the marks hold each
 * touched coordinate's position in the row + 1, no workspace values. */
bool lw_ws_in_place(const Lowerer *lw);
/* Whether such a row may also take a copy of its producer without the
 * first-touch branch (the update is one loop-IR operation). */
bool lw_ws_in_place_selects(const Lowerer *lw);
/* The workspace's extent: the output dim its index runs over. */
LirExpr *lw_ws_extent(Lowerer *lw);
/* The additive terms of lw->root into out (LW_MAX_ACCESS entries):
 * their number, 0 when it has fewer than two, -1 with lw->d set. */
int lw_union_terms(Lowerer *lw, Expr **out);
/* The operator a union's terms add with: the semiring's add, else +. */
OpKind lw_term_add(const Lowerer *lw);

/* lower_loops.c */
/* The loop-IR operation of op (bool: + is max, * is min), or LOP_NONE. */
int lw_lir_op(const Lowerer *lw, OpKind op);
LirStmt *lw_loops(Lowerer *lw, int depth, AMask alive, bool in_temp);
/* The accesses of e among alive. */
AMask lw_accesses_in(const Lowerer *lw, const Expr *e, AMask alive);
/* Whether the loop at depth over the accesses in alive is one plain loop
 * (a dense range, or the positions of one unsegmented sparse level). */
bool lw_single_loop_at(const Lowerer *lw, AMask alive, int depth);

/* case_select.c */
/* The case chain of a lattice point (conds[k] guarding bodies[k], first
 * true wins, some case always runs when exhaustive) as straight code
 * whose stored value is a select, when every case is value loads and
 * then the same statements but for that value; else NULL (the caller
 * builds the chain). Takes the bodies' statements apart on success. */
LirStmt *lw_cases_as_selects(Lowerer *lw, int n, LirExpr *const *conds, LirStmt *const *bodies,
                             bool exhaustive);

/* strip.c: the loop rewrites (split, divide, pos, bound) of the loop at depth */
/* Whether the loop at depth can take its rewrites: how (not NULL) says why
 * it is not one for loop; sparse_x is the access whose sparse level the
 * for walks, -1 for a dense range. False with lw->d set when refused. */
bool lw_form_check(Lowerer *lw, int depth, const char *how, int sparse_x);
/* Whether the loop at depth is rewritten (split, divide, pos, bound, fuse). */
bool lw_form_rewritten(const Lowerer *lw, int depth);
/* The dense loop's upper bound: bound()'s constant, else extent. */
LirExpr *lw_form_extent(Lowerer *lw, int depth, LirExpr *extent);
/* lw_strip_loop with pre(lw, b, ctx), when not NULL, run at the start of
 * each block of a split loop (b: the block's first iteration), before the
 * loop over it; without a split it is not run. */
typedef LirStmt *(*LwBlockPre)(Lowerer *lw, LirVar *b, void *ctx);
LirStmt *lw_strip_loop_pre(Lowerer *lw, int depth, LirVar *iv, LirExpr *lo, LirExpr *hi,
                           LirStmt *body, LirStmt **outer, LirStmt **inner, LwBlockPre pre,
                           void *ctx);
/* The depth of the split loop whose outer half (its loop over blocks)
 * sits right above the loop at depth and is not emitted yet, or -1. */
int lw_outer_half_at(const Lowerer *lw, int depth);
/* The loop over blocks of the split loop at depth jd around the loops
 * from depth on (lw_loops), when other loops come between its halves;
 * NULL with lw->d set when refused. */
LirStmt *lw_outer_half(Lowerer *lw, int depth, int jd, AMask alive, bool in_temp);
/* The extent of index v: a dim of the first access using it. */
LirExpr *lw_extent_of(Lowerer *lw, const IndexVar *v);
/* for (iv = lo; iv < hi; iv++) body, strip-mined when the loop is split or
 * divided; *outer gets the outermost loop made, *inner the loop over iv
 * (both the one loop without a split). */
LirStmt *lw_strip_loop(Lowerer *lw, int depth, LirVar *iv, LirExpr *lo, LirExpr *hi,
                       LirStmt *body, LirStmt **outer, LirStmt **inner);

/* precompute.c: a subexpression's workspace */
/* Its values array, zeroed (at the start; freed at the end). */
LirStmt *lw_subexpr_alloc(Lowerer *lw);
/* The accesses the consumer reads among alive: those outside e, and w. */
AMask lw_subexpr_consumer(const Lowerer *lw, AMask alive);
/* The where() at depth: the producer's loops, the consumer's, the reset. */
LirStmt *lw_subexpr_where(Lowerer *lw, int depth, AMask alive, bool in_temp);
/* Whether the consumer being emitted skips the loop at depth: one between
 * the workspace's indices' loops that is the producer's alone. */
bool lw_subexpr_skips(const Lowerer *lw, int depth);

/* partials.c: per-thread partial outputs of a parallel inner reduction loop */
/* Checks parallelize(k, partials) of the loop at par_depth (reduction: k
 * is a reduction index); sets lw->partials, and a temp the loop is in
 * (*in_temp) becomes direct updates; false with lw->d set. */
bool lw_partials_setup(Lowerer *lw, bool reduction, bool *in_temp);
/* The prologue: part_rows copies of the output, at its start value. */
LirStmt *lw_partials_alloc(Lowerer *lw);
/* Whether lw_loops at depth (the parallel loop's body) declares the slot. */
bool lw_partials_here(const Lowerer *lw, int depth);
/* part_slot = this thread's copy; then the loops from depth. */
LirStmt *lw_partials_slot(Lowerer *lw, int depth, AMask alive, bool in_temp);
/* The output's position in this thread's copy. */
LirExpr *lw_partials_index(Lowerer *lw);
/* The epilogue: every copy folded into the output, in thread order. */
LirStmt *lw_partials_combine(Lowerer *lw);
/* vals[out_at] op= v by the output's update (lower_loops.c). */
LirStmt *lw_update_output(Lowerer *lw, LirVar *vals, LirExpr *(*out_at)(Lowerer *), LirExpr *v);

/* out_like.c: a sparse output shaped like an operand (LowerPlan.out_like) */
/* Whether the output is sparse and appended in loop order (not shaped
 * like an operand, whose values are then updated in place). */
bool lw_out_appended(const Lowerer *lw);
/* The prologue: the operand's index arrays copied into the output (when
 * the phase writes them), the values sized like the operand's and set to
 * the output's start. */
LirStmt *lw_out_like_prepare(Lowerer *lw);
/* The output's value position: the operand's position at its last level. */
LirExpr *lw_out_like_index(Lowerer *lw);

/* lower.c helpers used by lower_loops.c */
/* The value of absent entries: the semiring's zero (0 by default). */
double lw_fill_value(const Lowerer *lw);
/* ptr[lo..hi) = v (a memset when v is 0). Infinities of an integer type
 * are its extreme values. */
LirStmt *lw_fill(Lowerer *lw, LirVar *ptr, LirExpr *lo, LirExpr *hi, double v);
/* The constant v of type t; an integer type saturates (+inf: its max). */
LirExpr *lw_value(Lowerer *lw, LirType t, double v);
const char *lw_name(Lowerer *lw, const char *base);
LirVar *lw_var(Lowerer *lw, const char *base, LirType t);
/* Access x's tensor's dtype, its values' loop-IR type (lw->vtype unless a
 * mask of another dtype), and the value its absence reads as a mask (the
 * semiring's zero; 0 for a mask of its own dtype or a 0/1 pattern). */
tj_dtype lw_access_dtype(const Lowerer *lw, int x);
LirType lw_access_type(const Lowerer *lw, int x);
double lw_access_zero(const Lowerer *lw, int x);
/* def's body over x and y, inlined (lower_loops.c). */
LirExpr *lw_def_apply(Lowerer *lw, const NtDef *def, LirExpr *x, LirExpr *y);
LirExpr *lw_i64(Lowerer *lw, int64_t v);
LirExpr *lw_ref(Lowerer *lw, LirVar *v);
LirExpr *lw_level_size(Lowerer *lw, int x, int level);
LirExpr *lw_load_index(Lowerer *lw, LirVar *arr, LirExpr *idx);
LirStmt *lw_store_index(Lowerer *lw, LirVar *arr, LirExpr *idx, LirExpr *v);
LirStmt *lw_ensure_out_cap(Lowerer *lw, int level, LirExpr *index);
/* lw_ensure_out_cap growing to at least hint (NULL: none) entries, the
 * new space not zeroed when raw (every appended entry is written). */
LirStmt *lw_ensure_out_room(Lowerer *lw, int level, LirExpr *index, LirExpr *hint, bool raw);
/* tj_rt_reserve of the output's array arr (TJ_ARR_*) of level to need
 * entries; then the pointer variable ptr reloaded from field f. */
LirStmt *lw_reserve(Lowerer *lw, int arr, int level, LirExpr *need);
LirStmt *lw_reload(Lowerer *lw, LirVar *ptr, LirField f, int level);
LirStmt *lw_ensure_pos_cap(Lowerer *lw, int level, LirExpr *index);
LirExpr *lw_out_linear(Lowerer *lw);
/* The extent of the row workspace: the output's dim over its index (lower.c). */
LirExpr *lw_ws_extent(Lowerer *lw);

#endif

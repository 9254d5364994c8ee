/* Index notation: the checked AST of one assignment
 *   A(i,j) = B(i,k) * C(k,j)      (or +=)
 * and concrete index notation (forall / where) built from it.
 *
 * Every node is built through a constructor in an Arena and keeps its source
 * column (0 when built through the C builder API) for error messages.
 * Tensor and index variables are interned per assignment: the same name is
 * the same object, and each has a dense id (TensorId / IndexId).
 */
#ifndef TJ_IR_NOTATION_H
#define TJ_IR_NOTATION_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../include/tensorjit.h"
#include "arena.h"
#include "diag.h"
#include "ops.h"

#define NT_MAX_ORDER 8
#define NT_MAX_TENSORS 32
#define NT_MAX_INDICES 32
#define NT_MAX_NESTING 256   /* parentheses / unary minus / calls, nested */
#define NT_MAX_HEIGHT 1024   /* operator tree height (a+b+c+... chains) */

typedef int32_t TensorId;  /* 0 = the output; inputs 1.. in first-use order */
typedef int32_t IndexId;

/* A declared tensor: what the checker binds a name to. */
typedef struct TensorDecl {
  const char *name;
  int order;
  int64_t dims[NT_MAX_ORDER];   /* -1 where unknown (from -d= var extents) */
  tj_dtype dtype;
  tj_format format;             /* levels + mode order */
} TensorDecl;

typedef struct TensorVar {
  TensorId id;
  const char *name;
  TensorDecl decl;              /* copied from the binding at check time */
} TensorVar;

typedef struct IndexVar {
  IndexId id;
  const char *name;
  int64_t extent;               /* set by the checker */
} IndexVar;

/* An operator node is EX_OP whatever its operator: its id in the operator
 * table (ir/ops.def) says spelling, arity, algebra and loop-IR operation. */
#define NT_EXPR_KINDS(X) X(ACCESS) X(LITERAL) X(OP) X(SUM)
typedef enum {
#define X(k) EX_##k,
  NT_EXPR_KINDS(X)
#undef X
} ExprKind;

typedef struct Expr Expr;
struct Expr {
  ExprKind kind;
  int col;           /* 1-based source column, 0 if built by the API */
  tj_dtype dtype;    /* result type, set by the checker */
  union {
    struct { TensorVar *t; int n; IndexVar *idx[NT_MAX_ORDER]; } access; /* EX_ACCESS */
    struct { double value; bool is_int; } lit;                            /* EX_LITERAL */
    struct { OpKind id; Expr *a, *b; const struct NtDef *def; } op;
                                            /* EX_OP: operator id over a (and
                                               b when its arity is 2); def:
                                               OP_CASES's definition */
    struct { IndexVar *iv; Expr *a; bool implicit; OpKind op; const struct NtDef *def;
             const char *temp; } sum;
                                            /* EX_SUM: a reduced over iv by op
                                               (OP_ADD: a sum; nt_op_is_reduction),
                                               or by a definition with an identity
                                               (def; op is OP_NONE);
                                               implicit: placed by the checker;
                                               temp: the name precompute gave its
                                               workspace (NULL: t_<iv>) */
  } u;
};

/* One statement: lhs (an EX_ACCESS) = or += rhs.
 *
 * Summation (TACO's einsum rule): an index that appears only on the right
 * is summed over the smallest subexpression that contains every use of it;
 * `sum(j, e)` says so explicitly. After checking, the rhs is in normal form:
 * an index bound by no EX_SUM node and absent from the lhs is summed over
 * the whole rhs (a "root" reduction, the common case: no node); every
 * smaller scope is an EX_SUM node, nested sums outermost first. */
typedef struct Assignment {
  Expr *lhs;
  Expr *rhs;
  bool accumulate;                       /* += */
  const char *src;                       /* source text, if parsed */
  int ntensors;                          /* output + inputs */
  TensorVar *tensors[NT_MAX_TENSORS];    /* by TensorId */
  int nindices;
  IndexVar *indices[NT_MAX_INDICES];     /* by IndexId, first-use order */
  int nroot_sums;                        /* explicit sums around the whole rhs, */
  IndexVar *root_sums[NT_MAX_INDICES];   /* removed by the checker, printed back */
  OpKind root_op;                        /* the root reduction's operator:
                                            OP_ADD, or that of explicit
                                            reduce(op, ...) around the rhs */
  const struct NtDef *root_def;          /* or a definition's that reorders
                                            (nt_def_reorders; root_op is then
                                            OP_NONE) */
  const NtSemiring *semiring;            /* NULL: plus.times (nt_apply_semiring) */
  int old_output;                        /* `+=` into a sparse output, rewritten by
                                            nt_accumulate_as_union: the id of the
                                            tensor standing for the output's contents
                                            before the run; 0: none */
} Assignment;
/* The identity of the root reduction's operator (or definition). */
double nt_root_identity(const Assignment *as);
/* The identity of reduction operator op, or of definition def if set. */
double nt_reduction_identity(OpKind op, const struct NtDef *def);

/* ---- building ---- */
/* Constructors; they return NULL only when the arena is out of memory. */
Assignment *nt_assignment(Arena *a);
TensorVar *nt_tensor(Arena *a, Assignment *as, const char *name);  /* interned */
IndexVar *nt_index(Arena *a, Assignment *as, const char *name);    /* interned */
Expr *nt_access(Arena *a, TensorVar *t, int n, IndexVar *const *idx, int col);
Expr *nt_literal(Arena *a, double v, bool is_int, int col);
/* The node of operator op (ir/ops.def) over x (and y when binary). */
Expr *nt_op_node(Arena *a, OpKind op, Expr *x, Expr *y, int col);
/* The operator of e (an EX_OP node's id); OP_NONE for accesses, literals
 * and sums. */
OpKind nt_expr_op(const Expr *e);
/* Whether e is absent (zero, or the semiring sr's zero) wherever the
 * accesses for which absent(access, ctx) holds have no entry: the
 * operators' algebra (nt_op_algebra) walked over e. The lattices prune
 * points with it and the checker's division rule asks it; a literal is
 * absent only when it is the zero, a reduction where its body is and its
 * identity is the zero (min over nothing is +inf: present); except(m, e)
 * where e is or where p->present says m certainly has an entry. */
typedef struct NtPresence {
  bool (*absent)(const Expr *access, const void *ctx);   /* has no entry here */
  bool (*present)(const Expr *access, const void *ctx);  /* certainly has one
                                                            (NULL: never known) */
} NtPresence;
bool nt_expr_zero(const Expr *e, const NtSemiring *sr, const NtPresence *p, const void *ctx);
Expr *nt_sum(Arena *a, IndexVar *iv, Expr *x, bool implicit, int col);
/* reduce(op, iv, x): x reduced over iv by op (nt_op_is_reduction). */
Expr *nt_reduce(Arena *a, OpKind op, IndexVar *iv, Expr *x, bool implicit, int col);
/* The spellings of the explicit reductions: NT_SUM_NAME(j, k, e) sums,
 * NT_REDUCE_NAME(op, j, k, e) reduces by op (+ * min max or and). */
#define NT_SUM_NAME "sum"
#define NT_REDUCE_NAME "reduce"

/* Whether e reads parameter k of a definition's body. */
bool nt_uses_param(const Expr *e, int k);
/* The operands of e (0, 1 or 2 of them) in source order; returns how many. */
int nt_children(const Expr *e, Expr *kids[2]);
/* True when v occurs in an access of e. */
bool nt_uses_index(const Expr *e, const IndexVar *v);
/* True when e accesses the tensor whose id is id. */
bool nt_reads_tensor(const Expr *e, int id);

/* Rewrites a parsed, unchecked `A(i,j) += rhs` as `A(i,j) = old(i,j) + rhs`,
 * old a new tensor named `name` (as->old_output) that the caller declares
 * like A and binds to A's contents before the run: a sparse output then
 * takes the union of its old pattern and the rhs's as one more operand of
 * an addition (the semiring's add after nt_apply_semiring), and the sums
 * of the rhs are placed inside the addition. False with d set when out of
 * memory or of tensor slots. */
bool nt_accumulate_as_union(Arena *a, Assignment *as, const char *name, Diag *d);

/* Parses one assignment. On error returns NULL with d set ("1:7: ..."). */
Assignment *nt_parse(Arena *a, const char *src, Diag *d);

/* User-defined element operators, `relu(x) = max(x, 0)`: a name, one or
 * two parameters and a body over them (literals, operators, functions and
 * earlier definitions; no tensors or indices). A call is inlined where it
 * is written, each argument in place of its parameter, so the lattices
 * see the body's algebra: relu keeps zeros (max(0, 0) = 0, a union with
 * the literal 0), `sq(x) = x * x` intersects. */
#define NT_MAX_DEFS 32
typedef struct NtDef {
  const char *name;
  int arity;
  const char *param[2];
  Expr *body;          /* parameter k is an order-0 access with id -1 - k */
  int height;          /* of the body's tree */
  Expr *left, *right;  /* `f(x, y) = body left l right r`: f where only x
                          (l, over x) or only y (r, over y) exists; NULL:
                          absent there. A call is an OP_CASES node. */
  bool cased;          /* has a left or right case */
  bool reduces;        /* `f(x, y) = body identity v`: a reduction operator,
                          folded in loop order unless laws has both: */
  double identity;     /* f(x, v) = x, declared by the user */
  unsigned laws;       /* OL_COMM | OL_ASSOC as declared (`identity v
                          commutative associative`), checked on samples */
} NtDef;
/* Whether reductions by def may be reordered (the root reduction, split
 * across threads, vectorized): it declares an identity, commutativity
 * and associativity. */
bool nt_def_reorders(const NtDef *def);
/* def's body at (x, y), in long double as the reference interpreter. */
long double nt_def_apply(const NtDef *def, long double x, long double y);
/* Checks the laws def declares on sample values (to a relative 1e-9, for
 * rounding): false with d naming the law and the values where it fails. */
bool nt_def_check_laws(const NtDef *def, Diag *d);
/* The identity of reduction node e (EX_SUM): its operator's or its
 * definition's; the name it is printed with. */
double nt_sum_identity(const Expr *e);
/* The algebra of e's operator (nt_op_algebra), or of its definition's
 * cases for an OP_CASES call: both cases a union, one of them OA_LEFT /
 * OA_RIGHT, none an intersection. */
OpAlgebra nt_expr_algebra(const Expr *e, const NtSemiring *sr);
const char *nt_sum_name(const Expr *e);
typedef struct NtDefs {
  int n;
  NtDef d[NT_MAX_DEFS];
} NtDefs;
/* Appends the definitions in src, separated by ';' (or newlines), to defs;
 * false with d set ("relu: ...") on a malformed one or a name that is
 * taken (a function of ir/ops.def, sum, reduce, or defined before). */
bool nt_parse_defs(Arena *a, const char *src, NtDefs *defs, Diag *d);
/* Prints each definition back, one a line: `def f(x, y) = body left l
 * right r identity v` (the clauses it has). */
void nt_print_defs(FILE *out, const NtDefs *defs);
/* nt_parse with calls of defs (may be NULL) inlined. */
Assignment *nt_parse_with(Arena *a, const char *src, const NtDefs *defs, Diag *d);
/* A deep copy of e (accesses keep their tensor and index objects). */
Expr *nt_copy_expr(Arena *a, const Expr *e);
/* A deep copy of e in which replace(a, node, ctx), asked of every node
 * first, may return the node's replacement (NULL: copy it). NULL when
 * the arena is out of memory. */
typedef Expr *(*NtReplace)(Arena *a, const Expr *e, const void *ctx);
Expr *nt_map_expr(Arena *a, const Expr *e, NtReplace replace, const void *ctx);

/* Binds every tensor to decls[] by name, infers index extents and dtypes,
 * and refuses what cannot be computed (see the checker for the list).
 * decls for the output may have dims -1 where the extents imply them;
 * var_extents (may be NULL) gives extents by index name (-d=i:10). */
typedef struct VarExtent { const char *name; int64_t extent; } VarExtent;
bool nt_check(Arena *a, Assignment *as, const TensorDecl *decls, int ndecls,
              const VarExtent *ext, int next, Diag *d);

/* Index variables of the rhs that do not occur on the lhs (summed). */
bool nt_is_reduction_var(const Assignment *as, const IndexVar *v);
/* Reduction variables summed over the whole rhs (bound by no EX_SUM). */
bool nt_is_root_reduction(const Assignment *as, const IndexVar *v);
/* The same two questions of a statement lhs = rhs (an Assignment's, or
 * the one lowering folds from the concrete notation). */
bool nt_reduces(const Expr *lhs, const Expr *rhs, const IndexVar *v);
bool nt_root_reduces(const Expr *lhs, const Expr *rhs, const IndexVar *v);
/* The EX_SUM nodes of e in preorder (outer sums first), at most max;
 * returns how many there are. */
int nt_sums(const Expr *e, const Expr **out, int max);
/* Applies the summation rule to a checked rhs (see Assignment); refuses
 * explicit sums over an output index, over an index their body does not
 * use, or over an index also used outside them. Called by nt_check. */
bool nt_place_sums(Arena *a, Assignment *as, Diag *d);
/* Reinterprets a checked assignment's `+`, `*` and sums as sr's add and mul
 * (the default plus.times changes nothing); refuses `-` and `/`, which a
 * semiring has no inverse for. */
bool nt_apply_semiring(Arena *a, Assignment *as, const NtSemiring *sr, Diag *d);
/* Whether the kernels compute as's rhs (its semiring applied) exactly:
 * false, with d set, for a product over a sum under a semiring whose zero
 * does not annihilate its mul (the sum's temporary exists where no term
 * does; the reference interpreter tracks that, the kernels do not). */
bool nt_semiring_kernel_exact(const Assignment *as, Diag *d);

/* Prints "A(i,j) = B(i,k) * C(k,j)" with minimal parentheses; parsing the
 * output yields the same AST. */
void nt_print(FILE *out, const Assignment *as);
void nt_print_expr(FILE *out, const Expr *e);
/* e as nt_print_expr prints it, in malloc'd memory the caller frees (NULL
 * when out of memory): for messages that quote a subexpression. */
char *nt_expr_text(const Expr *e);
/* Structural equality by names (tensors, indices), literal values, kinds;
 * columns and dtypes are ignored. */
bool nt_expr_equal(const Expr *x, const Expr *y);
bool nt_equal(const Assignment *x, const Assignment *y);
/* "f64", "f32", "i64", "u8", ... (ir/ may not call the runtime's names). */
const char *nt_dtype_name(tj_dtype t);
/* Integer or bool (no floats); the width results wrap into (32, 16, 8; 1:
 * bool, nonzero is 1; 0: a floating dtype or i64, not narrowed). */
bool nt_dtype_is_int(tj_dtype t);
int nt_dtype_bits(tj_dtype t);
/* u64, u32, u16, u8: results wrap modulo 2^bits (nt_dtype_bits: 64 for
 * u64, which the reference interpreter narrows too). */
bool nt_dtype_is_unsigned(tj_dtype t);

/* ---- concrete index notation ---- */
/* forall(i, S), where(consumer, producer), lhs (op)= rhs, and
 * sequence(S1, S2): S1 defines the output, then S2 updates it (TACO's
 * sequence; made by nt_sequence_split for a dense output whose rhs is a sum
 * of terms with sums of their own, each statement lowered as its own loop
 * nest in one kernel). */
typedef enum { CIN_FORALL, CIN_WHERE, CIN_ASSIGN, CIN_SEQUENCE } CinKind;

enum { CIN_PARALLEL = 1u << 0 };
/* parallelize(i, strategy): how the loop's rows split among threads (the
 * runtime's TJ_PAR_* in the same order). */
typedef enum { PAR_DEFAULT, PAR_STATIC, PAR_BALANCED, PAR_DYNAMIC } ParStrategy;
/* "static", "balanced", "dynamic" ("" for the default). */
const char *cin_strategy_name(int strategy);

/* How a forall walks its index (TACO's index variable relations), set by
 * the schedule's loop rewrites (ir/cin_loops.c) and carried out by the
 * lowering, which strip-mines the one loop of the index in place:
 *   split(i, i0, i1, f)   i = i0 * f + i1 with 0 <= i1 < f: an outer loop
 *                         over blocks of f iterations, an inner one in them
 *   divide(i, i0, i1, n)  the same with n blocks of ceil(N / n) iterations
 *   pos(j, jp, A(i,j))    jp walks the positions of A's level of j (j =
 *                         A's crd[jp]); a split of jp then splits nonzeros
 *   bound(i, ib, n, max_exact)  the loop runs exactly n times (the extent
 *                         is promised to be n: checked at every run)
 *   bound(i, ib, n, max_constraint)  the extent is promised to be at most n
 *                         (checked at every run; the loop runs to the extent)
 *   fuse(i, j, f)         i's loop and the j loop directly inside it are one
 *                         loop over f in [0, I*J): i = f / J, j = f % J (i's
 *                         forall carries the form; j's is marked fused) */
typedef enum { BOUND_NONE, BOUND_MAX_EXACT, BOUND_MAX_CONSTRAINT } BoundKind;
/* "max_exact", "max_constraint" ("" for none). */
const char *cin_bound_name(BoundKind k);
typedef struct CinLoopForm {
  int split, divide;             /* split's factor or divide's parts (one, or 0) */
  const char *outer, *inner;     /* the names of the two halves */
  const char *pos;               /* pos: the position variable's name */
  const Expr *pos_access;        /* pos: the access whose level is walked */
  const char *bound_name;        /* bound: the bounded variable's name */
  int64_t bound;
  BoundKind bound_kind;
  bool par_outer;                /* the parallel loop is the outer half */
  const IndexVar *outer_at;      /* split: the loop the outer half sits right
                                    above when other loops come between the
                                    halves (TACO's SpMM order i0, i1, j0, k,
                                    j1); NULL: right above the inner half */
  const char *fuse;              /* fuse: the fused loop's name (on the outer) */
  const IndexVar *fuse_inner;    /* fuse: the inner index (on the outer) */
  bool fused;                    /* fuse: this is the inner loop, walked by
                                    the outer's fused loop */
  const char *race;              /* parallelize(i, ..., partials|atomics): how
                                    threads combine a reduction, or NULL */
} CinLoopForm;

typedef struct Cin Cin;
struct Cin {
  CinKind kind;
  union {
    struct { IndexVar *iv; Cin *body; unsigned flags; int vec_width, unroll, par;
             CinLoopForm form; } forall;
    struct { Cin *consumer, *producer; TensorVar *ws;
             bool subexpr; IndexVar *summed; } where;
                                           /* the consumer reads ws in place of
                                              a subexpression (cin_subexpr_workspace;
                                              with summed, in place of the sum over
                                              summed of it: the producer's loop of
                                              summed is that sum's), else drains it
                                              into the output; an order-0 ws (not
                                              subexpr) is a sum's temp, produced by
                                              a forall over the summed index */
    struct { Expr *lhs, *rhs; bool accumulate; OpKind op; const char *op_name;
             const struct NtDef *def; const NtSemiring *semiring; bool keeps_old; } assign;
                                           /* lhs op= rhs when accumulate (op: the
                                              reduction's, + by default; or the
                                              definition def's, named op_name, op
                                              OP_NONE); the statement's semiring
                                              (NULL: plus.times) reads + and *;
                                              keeps_old: the output starts from its
                                              contents (the statement's `+=`), not
                                              from the reduction's identity */
    struct { Cin *first, *second; } seq;  /* first, then second */
  } u;
};

/* Schedule directives, parsed from "reorder(i,k,j) parallelize(i) ...". */
typedef enum {
  SCHED_REORDER, SCHED_PRECOMPUTE, SCHED_PARALLELIZE, SCHED_VECTORIZE, SCHED_UNROLL,
  SCHED_METHOD,  /* method(gett|ttgt|log|loops): how a dense contraction runs */
  SCHED_SEQUENCE, SCHED_NOSEQUENCE,  /* sequence() / nosequence(): split a sum of
                                        terms into statements run in turn, or not */
  SCHED_SPLIT, SCHED_DIVIDE, SCHED_POS, SCHED_BOUND,  /* loop rewrites: keep them last */
  SCHED_FUSE
} SchedKind;

typedef struct SchedDirective {
  SchedKind kind;
  int nvars;
  const char *vars[NT_MAX_INDICES];  /* index names; pos(j, jp, A(i,j)):
                                        j, jp, A, i, j */
  int width;                         /* vectorize: lanes; unroll: factor;
                                        parallelize: ParStrategy; split:
                                        factor; divide: parts; bound: n;
                                        fuse(i, j, f): vars i, j, f */
  const char *arg;                   /* precompute: the text inside ();
                                        bound: the kind; method: its name */
  int col;                           /* 1-based column of the directive */
} SchedDirective;

typedef struct Schedule {
  int n;
  SchedDirective d[16];
  const char *src;                   /* the parsed text (for carets), or NULL */
} Schedule;

/* Uses of v in e outside node skip (ir/precompute.c). */
int nt_uses_outside(const Expr *e, const Expr *skip, const IndexVar *v);
/* Whether node p (an ancestor of c) lets a sum over its child c cover it
 * instead: a + sum, or an operator linear in that operand. */
bool nt_sum_passes(const Expr *p, const Expr *c);

/* precompute(e, I, w) (ir/precompute.c): e matched in the rhs by structure
 * (implicit sums looked through), the index set I ("{}", "{i,j}" or one
 * name) and the workspace's name. */
typedef struct Precompute {
  const Expr *expr;                  /* e as parsed */
  const Expr *node;                  /* the rhs node it matched */
  int nvars;
  IndexVar *vars[NT_MAX_INDICES];    /* I */
  const char *ws;
  int nstripped;                     /* sum(j, e) matched the root reduction: */
  const char *stripped[NT_MAX_INDICES]; /* its indices, which must move in */
  const struct Match *match;         /* the node's ancestors (internal) */
} Precompute;
/* Parses and matches one precompute directive against as; false with d
 * set (the subexpression is not in the rhs, occurs twice, an unknown
 * index, a malformed argument). */
bool nt_precompute_parse(Arena *a, const Assignment *as, const SchedDirective *sd,
                         Precompute *pc, Diag *d);
/* as with each scalar precompute (I = {}) of s applied: the indices summed
 * only inside e become sums around it (moved in from their scope where the
 * operators between distribute over them), the outermost named w, which
 * the concrete notation makes a where() of a scalar temp. as itself when s
 * has none; NULL with d set when one is refused. */
Assignment *nt_precompute_scalars(Arena *a, const Assignment *as, const Schedule *s, Diag *d);

/* Parses schedule text; unknown directives are errors with a column. */
bool nt_schedule_parse(const char *src, Schedule *out, Arena *a, Diag *d);
void nt_schedule_print(FILE *out, const Schedule *s);
/* One directive as nt_schedule_print prints it, in malloc'd memory the
 * caller frees (NULL when out of memory). */
char *nt_directive_text(const SchedDirective *sd);

/* The default concrete notation: forall over the lhs indices in order, then
 * the reduction indices in first-use order, around the assignment; then
 * reorder/parallelize/vectorize applied (unknown index names are errors). */
Cin *cin_from_assignment(Arena *a, const Assignment *as, const Schedule *s,
                         Diag *d);
/* Constructors (NULL only when the arena is out of memory). */
Cin *cin_forall(Arena *a, IndexVar *iv, Cin *body);
Cin *cin_where(Arena *a, Cin *consumer, Cin *producer, TensorVar *ws);
Cin *cin_assign(Arena *a, Expr *lhs, Expr *rhs, bool accumulate);
Cin *cin_sequence(Arena *a, Cin *first, Cin *second);

/* ---- sequence (ir/sequence.c) ---- */
#define NT_SEQ_MAX 16
/* Whether as splits into a sequence: a dense output, no semiring, a rhs
 * that is a + / - of at least two terms, one of them a plain sum (+) of
 * its own, no sum over the whole rhs, the output not read; false with
 * the reason in why (a phrase) otherwise. */
bool nt_sequence_why_not(const Assignment *as, char *why, size_t len);
/* Splits as into the statements of its sequence (at most NT_SEQ_MAX, each
 * over as's tensors and its own indices): first `lhs (+)= the terms without
 * a sum of their own` (or the first summed term), then `lhs += term` for
 * each summed term, its sums the statement's root reduction, negated when
 * subtracted. Returns their count (>= 2), or 0 with d set ("sequence(): ..."). */
int nt_sequence_split(Arena *a, const Assignment *as, Assignment **parts, Diag *d);
/* Loop order of the forall nest (outermost first), n of them. */
int cin_loop_order(const Cin *c, IndexVar **order, int max);
/* Rewrites: c with its outer forall chain (the loops above the first
 * where or assignment) in the given order, each loop keeping its flags;
 * NULL with d set when order is not a permutation of that chain. */
Cin *cin_reorder(Arena *a, const Cin *c, IndexVar *const *order, int n, Diag *d);
/* c (a forall chain around one assignment lhs (+)= rhs) with the loops from
 * depth on producing rhs into a dense workspace over j, which an output
 * loop over j then drains (w: name):
 *   forall(i, where(forall(j, A(i,j) = w(j)), forall(k, forall(j, w(j) += rhs))))
 * NULL with d set when c has another shape or j is not among those loops. */
Cin *cin_workspace(Arena *a, const Cin *c, IndexVar *j, int depth, const char *name, Diag *d);
/* Prints c; loops rewritten by split / divide / pos / bound print under
 * their new names, with the relations after the statement:
 *   suchthat(forall(i0, forall(i1, forall(j, ...))), split(i, i0, i1, 32)) */
/* The where() of a workspace w over vars (nvars indices, in loop order) of
 * the subexpression e (a node of the innermost assignment's rhs) in a nest
 * of foralls around one assignment: the loops from depth down to the last
 * var's produce w(vars) = e (+= when other loops lie between), the
 * consumer's foralls over vars with the loops below the last reads
 * w(vars) in e's place:
 *   forall(i, where(forall(j, y(i) += w(j) * x(j)), forall(j, w(j) = B(i,j) + C(i,j))))
 *   where(forall(i, forall(j, A(i,j) = w(i,j) * D(i,j))),
 *         forall(i, forall(k, forall(j, w(i,j) += B(i,k) * C(k,j)))))
 * With sum (the sum node whose body e is, or NULL) the producer also takes
 * the sum's loop and the consumer reads w in the sum's place:
 *   where(forall(i, forall(j, A(i,j) = w(i,j) + D(i,j))),
 *         forall(i, forall(j, forall(k, w(i,j) += B(i,k) * C(k,j)))))
 * NULL with d set. */
Cin *cin_subexpr_workspace(Arena *a, const Cin *c, const Expr *e, const Expr *sum,
                           IndexVar *const *vars, int nvars, int depth, const char *name,
                           Diag *d);
void cin_print(FILE *out, const Cin *c);
/* The index of the loop of c that name names (an index, a pos or bound
 * variable: *part 0; the outer / inner half of a split: 1 / 2), or NULL. */
IndexVar *cin_loop_named(const Cin *c, const char *name, int *part);

/* ---- reference interpreter ---- */
/* Evaluates as on dense row-major copies of the operands (index by TensorId;
 * dense[0] is the output, read when accumulating, overwritten otherwise),
 * in long double. Independent of lowering and the JIT: the test oracle.
 * stored (may be NULL, as may stored[t]) marks the entries a sparse
 * operand stores; the others are absent: they read as the semiring's zero
 * and a reduction skips them (see ref_eval.c). out_sparse: an output entry
 * that nothing reached is left at the zero (absent), not set to the root
 * reduction's identity as a dense output's is. out_stored (may be NULL)
 * receives 1 for each output entry that exists (was reached). */
typedef struct RefEvalIn {
  const uint8_t *const *stored;
  bool out_sparse;
  uint8_t *out_stored;
} RefEvalIn;
bool nt_ref_eval(const Assignment *as, double *const *dense, const RefEvalIn *in, Diag *d);

#endif

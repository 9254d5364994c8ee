/* The loop IR: a small typed imperative IR that keeps the merge-lattice
 * structure visible (for / while co-iteration / if-else chains) and talks to
 * tensors only through the kernel ABI (runtime/abi.h).
 *
 * A LirKernel is `int32_t name(tj_storage **operands)`. Operand k's fields
 * are read with FIELD expressions; array bases are copied into pointer
 * variables (typically once at entry, and again after a RESERVE call that
 * may move the array). Statements form singly linked lists (next).
 * Every node is built by a constructor in an Arena. Printers: lir_print
 * (readable, valid C against runtime/abi.h); lower/lir_interp.h runs it
 * (it lives in lower/ because it needs the storage layout).
 */
#ifndef TJ_IR_LOOP_IR_H
#define TJ_IR_LOOP_IR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "arena.h"
#include "diag.h"

/* Signed (I) and unsigned (U) integers of 8 to 64 bits, floats, and BOOL
 * (a comparison's i1, a byte in memory). A bool tensor's values are I8 0/1
 * (lowering makes its + max and its * min: or and and). Unsigned types
 * divide, compare, take min/max and convert to and from floats as
 * unsigned, and widen by zero extension; a U64 constant's int64 holds its
 * bits. */
typedef enum {
  LT_VOID, LT_BOOL, LT_I8, LT_I16, LT_I32, LT_I64, LT_U8, LT_U16, LT_U32, LT_U64,
  LT_F32, LT_F64,
  LT_PTR_I8, LT_PTR_I16, LT_PTR_I32, LT_PTR_I64, LT_PTR_U8, LT_PTR_U16, LT_PTR_U32,
  LT_PTR_U64, LT_PTR_F32, LT_PTR_F64, LT_PTR_BOOL
} LirType;

bool lir_type_is_ptr(LirType t);
bool lir_type_is_float(LirType t);
bool lir_type_is_int(LirType t);          /* I8 .. U64 (not BOOL) */
bool lir_type_is_unsigned(LirType t);     /* U8 .. U64 */
int lir_type_bytes(LirType t);            /* in memory: BOOL 1, I16 2, F64 8 */
int64_t lir_int_min(LirType t);           /* of an integer type (unsigned: 0) */
int64_t lir_int_max(LirType t);           /* (U64: -1, the bits of 2^64 - 1) */
/* The loop-IR type of a tj_dtype's values (bool: LT_I8), LT_VOID if none. */
LirType lir_dtype_type(int dtype);
LirType lir_elem_type(LirType ptr);       /* LT_PTR_F64 -> LT_F64 */
LirType lir_ptr_type(LirType elem);       /* LT_F64 -> LT_PTR_F64 */
const char *lir_type_c(LirType t);        /* "double", "int32_t *", ... */

typedef enum {
#define LIR_EXPR(k) LE_##k,
#include "loop_ir.def"
#undef LIR_EXPR
} LirExprKind;

typedef enum {
#define LIR_STMT(k) LS_##k,
#include "loop_ir.def"
#undef LIR_STMT
} LirStmtKind;

typedef enum {
#define LIR_BINOP(k, s, r) LOP_##k,
#include "loop_ir.def"
#undef LIR_BINOP
} LirBinOp;  /* comparisons yield LT_BOOL; AND/OR take and yield LT_BOOL */

typedef enum {
#define LIR_UNOP(k, s) LUN_##k,
#include "loop_ir.def"
#undef LIR_UNOP
} LirUnOp;

const char *lir_bin_name(LirBinOp op);   /* "+", "min", "&&" */
/* Whether `v op= e` reduces (+ * min max: loop_ir.def's reduces column). */
bool lir_bin_reduces(int op);
const char *lir_un_name(LirUnOp op);     /* "-", "!", "sqrt" */

/* Operand fields (FIELD expressions, SETFIELD statements). */
typedef enum {
  LF_DIM,       /* dims[level]  (here `level` is the dimension index), I64 */
  LF_LVL_SIZE,  /* levels[level].size, I64 */
  LF_POS,       /* levels[level].pos, pointer of the pos width */
  LF_CRD,       /* levels[level].crd, pointer of the crd width */
  LF_VALS,      /* vals, pointer of the dtype */
  LF_POS_LEN,   /* levels[level].pos_len, I64 (settable) */
  LF_CRD_LEN,   /* levels[level].crd_len, I64 (settable) */
  LF_VALS_LEN,  /* vals_len, I64 (settable) */
  LF_SLICE_OFF, /* slice[level][0]: a view's offset along dim `level`, I64 */
  LF_SLICE_SIZE, /* slice[level][1]: its size, I64 */
  LF_SLICE_STRIDE /* slice[level][2]: its stride, I64 */
} LirField;

/* Runtime helpers a CALL may invoke (all declared in runtime/abi.h). */
typedef enum {
  LH_RESERVE,   /* tj_rt_reserve(operand, arr, level, need): may fail */
  LH_ALLOC,     /* ptr var = tj_rt_alloc(bytes): may fail */
  LH_FREE,      /* tj_rt_free(ptr var) */
  LH_SORT_CRD,  /* tj_rt_sort_crd(ptr + lo, hi - lo, width) */
  LH_ZERO,      /* memset(ptr + lo, 0, (hi - lo) elements) */
  LH_GETT,      /* tj_rt_gett(operands, plan, micro-kernel): a dense
                   contraction by GETT / TTGT / LoG; may fail */
  LH_THREADS,   /* i64 var = tj_rt_threads(): slots of per-thread data */
  LH_THREAD_SLOT, /* i64 var = tj_rt_thread_slot(n): this thread's slot */
  LH_MARKED_CRD /* ret = tj_rt_marked_crd(ptr + lo, mark, words, width) */
} LirHelper;

/* The words of a GETT plan (TJ_GP_WORDS of runtime/abi.h, which ir/ does
 * not include; lower/gett.c checks that the two agree). */
#define LIR_GETT_WORDS 64

typedef struct LirVar {
  int id;            /* unique in the kernel */
  const char *name;  /* unique in the kernel (the C printer uses it) */
  LirType type;
} LirVar;

typedef struct LirExpr LirExpr;
struct LirExpr {
  LirExprKind kind;
  LirType type;
  union {
    struct { int64_t i; double f; } c;                          /* LE_CONST */
    LirVar *var;                                                 /* LE_VAR */
    struct { int operand; LirField field; int level; } field;    /* LE_FIELD */
    struct { LirExpr *ptr, *idx; } load;                         /* LE_LOAD */
    struct { LirBinOp op; LirExpr *a, *b; } bin;                 /* LE_BIN */
    struct { LirUnOp op; LirExpr *a; } un;                       /* LE_UN */
    LirExpr *cast;                                               /* LE_CAST */
    struct { LirExpr *cond, *a, *b; } sel;                       /* LE_SELECT */
  } u;
};

/* Loop attributes. A vector loop (vec_width W > 0) has step W and a trip
 * count that is a multiple of W; it means exactly the scalar loop, and its
 * body holds only DECL / ASSIGN / STORE / BLOCK / COMMENT. A parallel loop's
 * body assigns no variable declared outside it and makes no failing call. */
typedef struct LoopAttrs {
  bool parallel;     /* iterations independent; run on the OpenMP runtime */
  int schedule;      /* parallel: how rows split among threads (TJ_PAR_*) */
  int vec_width;     /* 0 = not vectorized; else lanes */
  int unroll;        /* 0 = no hint */
  int vectorize;     /* vectorize(i, w) of the notation: this loop, w lanes
                        (0: the vectorization pass chooses, unless another
                        loop of the kernel asks) */
  bool remainder;    /* the scalar remainder of a vector loop (< W trips):
                        LLVM should neither vectorize nor unroll it */
  bool masked_tail;  /* a vector loop up to vend = lo + (hi - lo) / W * W
                        whose remainder (vend..hi, < W trips, the same body)
                        follows it: the JIT runs that remainder as one
                        masked step of W lanes into the same accumulators
                        (other backends run it as written; a copy with its
                        own body runs as written everywhere) */
  bool scalar;       /* kept scalar: a short loop (a row's product count,
                        lower_loops.c count_products) that neither the
                        vectorization pass nor LLVM vectorizes or unrolls */
  LirExpr *balance;  /* parallel: a pos array (pointer expr) whose entries
                        weigh iterations for chunking, or NULL */
  LirExpr *leaves;   /* with balance: the pos array one level further down;
                        iteration r then weighs leaves[balance[r]] */
} LoopAttrs;

typedef struct LirStmt LirStmt;
struct LirStmt {
  LirStmtKind kind;
  LirStmt *next;
  union {
    struct { LirVar *var; LirExpr *init; } decl;                   /* LS_DECL */
    struct { LirVar *var; LirExpr *e; int op;             /* LS_ASSIGN; op -1 '=' or a LirBinOp */
             LirVar *with; LirExpr *identity; } assign;   /* with: a fold (lir_fold) */
    struct { LirExpr *ptr, *idx, *e; int op; bool atomic; LirVar *old; } store;
                                   /* LS_STORE; op as above; atomic: an update
                                      other threads make too (parallelize(k,
                                      atomics)); old (atomic, op -1): the
                                      variable e reads as the value there
                                      before, declared right above from a
                                      load (serial readers need nothing
                                      else; LLVM loops a compare-and-swap) */
    struct { int operand; LirField field; int level; LirExpr *e; } setfield; /* LS_SETFIELD */
    struct { LirVar *iv; LirExpr *lo, *hi, *step; LirStmt *body; LoopAttrs at; } loop; /* LS_FOR */
    struct { LirExpr *cond; LirStmt *body; } whl;                  /* LS_WHILE */
    struct { LirExpr *cond; LirStmt *then, *els; } cond;           /* LS_IF */
    struct { LirHelper h; int operand; int arr; int level;         /* LS_CALL */
             LirExpr *a, *b; LirVar *ptr; const int32_t *plan;
             LirVar *mark, *ret; bool raw; } call;
             /* RESERVE: operand, arr, level, a = need; raw: the kernel
                writes every new entry before reading it, so the new
                space is not zeroed (TJ_ARR_NOZERO).
                ALLOC: ptr = result, a = bytes. FREE: ptr.
                SORT_CRD and ZERO: ptr, a = lo, b = hi.
                MARKED_CRD: ret (i64) = count written to ptr from a on,
                from mark (bool pointer) of b words of 64 marks.
                GETT: plan = LIR_GETT_WORDS words (TJ_GP_*). */
    LirStmt *block;                                                /* LS_BLOCK */
    const char *comment;                                           /* LS_COMMENT */
    struct { LirExpr *ptr, *idx; } prefetch;                       /* LS_PREFETCH: no
                                      effect on the meaning; idx may lie past
                                      the array (nothing is read) */
  } u;
};

/* Operands of a kernel: NT_MAX_TENSORS tensors plus a row-range descriptor. */
#define LIR_MAX_OPERANDS 33

typedef struct LirOperand {
  const char *name;      /* tensor name, used for C identifiers */
  int order;
  int dtype;             /* tj_dtype */
  int pos_width, crd_width;  /* bytes */
  bool is_output;
} LirOperand;

typedef struct LirKernel {
  const char *name;      /* the C / LLVM symbol */
  int noperands;
  LirOperand operands[LIR_MAX_OPERANDS];
  int nvars;             /* LirVar ids are 0..nvars-1 */
  LirStmt *body;         /* runs, then returns 0 */
  LirStmt *cleanup;      /* runs on every exit, success or failure (frees) */
} LirKernel;

/* ---- constructors (NULL only when the arena is out of memory) ---- */
LirKernel *lir_kernel(Arena *a, const char *name);
LirVar *lir_var(Arena *a, LirKernel *k, const char *name, LirType t);
/* A new variable named base_<n> (n: k's variable count, so unique). */
LirVar *lir_var_numbered(Arena *a, LirKernel *k, const char *base, LirType t);
/* A copy of e where each variable v with v->id < nren and ren[v->id] set
 * reads ren[v->id] instead; constants, fields and variables not renamed
 * are shared (copies of loops' bodies: unroll-and-jam, peel). */
LirExpr *lir_clone_renamed(Arena *a, LirExpr *const *ren, int nren, const LirExpr *e);

LirExpr *lir_const_int(Arena *a, LirType t, int64_t v);
LirExpr *lir_const_fp(Arena *a, LirType t, double v);
LirExpr *lir_ref(Arena *a, LirVar *v);
LirExpr *lir_field(Arena *a, const LirKernel *k, int operand, LirField f, int level);
LirExpr *lir_load(Arena *a, LirExpr *ptr, LirExpr *idx);
LirExpr *lir_bin(Arena *a, LirBinOp op, LirExpr *x, LirExpr *y); /* types must match */
LirExpr *lir_un(Arena *a, LirUnOp op, LirExpr *x);
LirExpr *lir_cast(Arena *a, LirType t, LirExpr *x);
LirExpr *lir_select(Arena *a, LirExpr *c, LirExpr *x, LirExpr *y);

LirStmt *lir_decl(Arena *a, LirVar *v, LirExpr *init);
LirStmt *lir_assign(Arena *a, LirVar *v, LirExpr *e);
LirStmt *lir_update(Arena *a, LirVar *v, LirBinOp op, LirExpr *e);   /* v op= e */
/* v = e, a fold of the value in `with` into v by a user-defined operator
 * f(v, with) = e that is commutative and associative with the identity
 * (a constant): e reads only v, with and constants, so a pass may keep
 * per-lane or per-chunk accumulators from the identity and combine them
 * by e (the vector emitter does). */
LirStmt *lir_fold(Arena *a, LirVar *v, LirVar *with, LirExpr *e, LirExpr *identity);
LirStmt *lir_store(Arena *a, LirExpr *ptr, LirExpr *idx, LirExpr *e);
LirStmt *lir_store_update(Arena *a, LirExpr *ptr, LirExpr *idx, LirBinOp op, LirExpr *e);
LirStmt *lir_setfield(Arena *a, int operand, LirField f, int level, LirExpr *e);
LirStmt *lir_for(Arena *a, LirVar *iv, LirExpr *lo, LirExpr *hi, LirStmt *body);
LirStmt *lir_while(Arena *a, LirExpr *cond, LirStmt *body);
LirStmt *lir_if(Arena *a, LirExpr *cond, LirStmt *then, LirStmt *els);
LirStmt *lir_call(Arena *a, LirHelper h);
LirStmt *lir_block(Arena *a, LirStmt *body);
LirStmt *lir_comment(Arena *a, const char *text);
LirStmt *lir_prefetch(Arena *a, LirExpr *ptr, LirExpr *idx);

/* Appends the list s to the end of the list at *head. */
void lir_append(LirStmt **head, LirStmt *s);

/* A FOR whose step is 1 (a missing step means 1). */
bool lir_unit_step(const LirStmt *loop);
/* Are x and y the same expression, node by node (variables by identity,
 * NaN constants equal to each other)? */
bool lir_expr_equal(const LirExpr *x, const LirExpr *y);

/* ---- walks (ir/lir_walk.c) ---- */
/* The addresses of e's operand fields in order (LOAD: ptr, idx; SELECT:
 * cond, a, b); returns how many (0 for CONST, VAR, FIELD). */
int lir_expr_slots(LirExpr *e, LirExpr **slot[3]);
/* e's operands, in the same order. */
int lir_expr_kids(const LirExpr *e, LirExpr *kids[3]);
/* What a visitor asks next: visit e's operands, skip them, or stop. */
typedef enum { LV_DESCEND, LV_SKIP, LV_STOP } LirVisit;
typedef LirVisit (*LirExprVisit)(const LirExpr *e, void *cx);
/* Calls fn on e (NULL: nothing) and, as it asks, on its operands, pre-order
 * and left to right; true when fn stopped the walk. */
bool lir_expr_walk(const LirExpr *e, LirExprVisit fn, void *cx);
/* Whether e may run where it did not before: no integer division or
 * remainder (by a zero an absent entry would give) and no float-to-integer
 * conversion (out of range for a value never converted before); division
 * by a constant other than 0 and -1 is safe. */
bool lir_expr_speculable(const LirExpr *e);
/* The expressions statement s holds itself, in order (any may be NULL; a
 * FOR's lo, hi and step, not its balance arrays); returns how many. */
int lir_stmt_exprs(const LirStmt *s, LirExpr *x[4]);
/* The statement lists nested in s (FOR, WHILE: the body; IF: then, els;
 * BLOCK: its list; any may be NULL); returns how many. */
int lir_stmt_bodies(const LirStmt *s, LirStmt *body[2]);
/* Whether the parallel FOR loop's weights (its balance pos, and leaves;
 * passed for a unit step only) count the trips of its innermost loop: no
 * loop under the weighed level's (SpMV's row loop holds one loop; SpMM's
 * two). The runtime then shares it only from twice the work
 * (TJ_PAR_LIGHT). */
bool lir_par_light(const LirStmt *loop);
/* Does e read a variable v with v->id < nmark and mark[v->id] set? */
bool lir_reads_marked(const LirExpr *e, const char *mark, int nmark);
/* How many times e reads v. */
int lir_count_reads(const LirExpr *e, const LirVar *v);
/* Does e load from memory (at any depth)? */
bool lir_has_load(const LirExpr *e);

/* What a parallel loop's body (and step) takes from outside, for the
 * backends that outline it into a function over a range of iterations. */
typedef struct LirCapture {
  const LirVar **vars;  /* read but not declared in the body, first use first */
  int n;
  bool writes_outer;    /* assigns a variable declared outside: run it serially */
  bool may_fail;        /* makes a failing helper call: run it serially */
} LirCapture;
/* Fills c for the FOR loop; vars is malloc'd (lir_capture_free). False,
 * with c empty, when out of memory. */
bool lir_capture(const LirKernel *k, const LirStmt *loop, LirCapture *c);
void lir_capture_free(LirCapture *c);

/* Type of an operand field (pointer types from the operand's widths). */
LirType lir_field_type(const LirKernel *k, int operand, LirField f);

/* ---- printing, checking, running ---- */
enum {
  LIR_PRINT_HEADER = 1,    /* the #include lines first */
  LIR_PRINT_PARALLEL = 2   /* parallel loops outlined and run by the runtime,
                              atomic updates as atomics (else serial, readable) */
};
/* Writes the kernel as C against runtime/abi.h (flags: LIR_PRINT_*). */
void lir_print(FILE *out, const LirKernel *k, unsigned flags);
/* Checks types and variable scoping; false with d set on a violation. */
bool lir_verify(const LirKernel *k, Diag *d);

#endif

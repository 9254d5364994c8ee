/* What the three emitter files share: the Emitter state and the helpers of
 * jit/emit_llvm.c (prefix em_) that jit/emit_vector.c (vector loops) and
 * jit/emit_parallel.c (outlined parallel loops) build on. Not a public
 * interface: only jit/emit_*.c include it.
 */
#ifndef TJ_JIT_EMIT_INTERNAL_H
#define TJ_JIT_EMIT_INTERNAL_H

#include "emit_llvm.h"

#define NTYPES (LT_PTR_BOOL + 1)

/* The function being emitted is the kernel or, inside a parallel loop, its
 * outlined body; emit_parallel_for swaps the per-function fields. */
typedef struct Emitter {
  LLVMContextRef cx;
  LLVMModuleRef m;
  LLVMBuilderRef b;          /* the statement builder */
  LLVMBuilderRef eb;         /* appends to the entry block */
  LLVMValueRef fn, rc, alloc_out;
  LLVMValueRef ops[LIR_MAX_OPERANDS]; /* operands[k], loaded once at entry */
  LLVMValueRef operands;     /* the kernel's operands argument */
  LLVMValueRef *slots;       /* alloca per LirVar id, made on first use */
  LLVMBasicBlockRef cleanup; /* NULL in an outlined body: no failing calls */
  LLVMTypeRef i1, i8, i16, i32, i64, f32, f64, ptr, vd;
  LLVMValueRef tbaa[NTYPES], tbaa_field;
  unsigned tbaa_kind, loop_kind;
  const LirKernel *k;
  const EmitTarget *t;
  bool contract;             /* set the contract flag on fadd/fsub/fmul */
  bool no_llvm_vectorize;    /* scalar loops carry vectorize.enable=false */
  bool in_cleanup;           /* failing calls are not allowed in cleanup */
  bool in_parallel;          /* nested parallel loops run serially */
  int npar;                  /* outlined bodies so far (names .par<N>) */
  Diag *d;
} Emitter;

/* ---- jit/emit_llvm.c ---- */
LLVMTypeRef em_reg_type(Emitter *e, LirType t);
LLVMTypeRef em_mem_type(Emitter *e, LirType t);  /* bool is i8 in memory */
bool em_bug(Emitter *e, const char *what);       /* records, returns false */
LLVMMetadataRef em_md_str(Emitter *e, const char *s);
LLVMMetadataRef em_md_int(LLVMTypeRef t, long long v);
void em_tag(Emitter *e, LLVMValueRef inst, LLVMValueRef node);
/* The zero-initialized entry-block alloca of v in the current function. */
LLVMValueRef em_slot(Emitter *e, const LirVar *v);
LLVMValueRef em_intrinsic(Emitter *e, const char *name, LLVMTypeRef t,
                          LLVMValueRef *args, unsigned n);
LLVMBasicBlockRef em_new_block(Emitter *e, const char *name);
LLVMValueRef emit_expr(Emitter *e, const LirExpr *x);
bool emit_stmts(Emitter *e, const LirStmt *s);
/* a op b on registers (scalars or vectors) of element type t. */
LLVMValueRef em_binop(Emitter *e, LirBinOp op, LirType t, LLVMValueRef a,
                      LLVMValueRef b);
LLVMValueRef em_unop(Emitter *e, LirUnOp op, LirType t, LLVMValueRef a);
LLVMValueRef em_convert(Emitter *e, LLVMValueRef v, LirType from, LirType to);
/* True when evaluating x cannot trap (no loads, no integer division). */
bool em_is_speculatable(const LirExpr *x);
int em_elem_bytes(LirType ptr);
/* llvm.prefetch (read, keep in all levels, data) of ptr[idx], elements of
 * type elem; the address is not inbounds: it may lie past the array. */
void em_prefetch(Emitter *e, LLVMValueRef ptr, LirType elem, LLVMValueRef idx);
/* A call of the runtime helper `name` (declared on first use). */
LLVMValueRef em_helper(Emitter *e, const char *name, LLVMTypeRef ret, LLVMTypeRef *params,
                       unsigned n, LLVMValueRef *args);
/* if (rcv != 0) { rc = rcv; goto cleanup; } */
bool em_fail_if_nonzero(Emitter *e, LLVMValueRef rcv);
void em_add_fn_attrs(Emitter *e, LLVMValueRef fn);
/* Attaches !llvm.loop metadata: the attribute hints plus, when
 * no_vectorize, llvm.loop.vectorize.enable false. */
void em_loop_hints(Emitter *e, LLVMValueRef br, LoopAttrs at, bool no_vectorize);
/* for (iv = lo; iv < hi; iv += step) body as a scalar loop; hi NULL means
 * re-evaluate s's upper bound on every trip. */
bool em_scalar_for(Emitter *e, const LirStmt *s, LLVMValueRef lo,
                   LLVMValueRef hi);
/* The same loop with its body emitted by body_fn(cx, body list). */
typedef bool (*EmBody)(void *cx, const LirStmt *body);
bool em_loop_with(Emitter *e, const LirStmt *s, LLVMValueRef lo, LLVMValueRef hi,
                  EmBody body_fn, void *cx);

/* ---- jit/emit_vector.c ---- */
/* True when s (a FOR with vec_width W) has the vector-loop shape: step the
 * constant W, W a power of two. Otherwise it is emitted as a scalar loop. */
bool emit_is_vector_loop(const LirStmt *s);
/* One iteration per W lanes with <W x T> values, vector accumulators for
 * reductions into outer variables; false with e->d set on a body outside
 * the vector-loop contract. */
bool emit_vector_for(Emitter *e, const LirStmt *s);
/* The remainder loop after vector loop s that its emission takes as one
 * masked step (s has masked_tail; the remainder is s->next over the same iv
 * and body from s's bound), or NULL: the statement list then skips it. */
const LirStmt *emit_masked_tail(const LirStmt *s);

/* ---- jit/emit_gett.c ---- */
/* The LH_GETT call: the plan as a constant, the micro-kernel it names
 * (mr x nr, vector lanes TJ_GP_VL) as a function of the module, and
 * tj_rt_gett(operands, plan, micro-kernel). */
bool emit_gett_call(Emitter *e, const LirStmt *s);

/* ---- jit/emit_parallel.c ---- */
/* Outlines s's body into `void <kernel>.par<N>(ptr ctx, i64 lo, i64 hi)`
 * and calls tj_rt_parallel_for; bodies outside the parallel contract run
 * serially instead (always correct). */
bool emit_parallel_for(Emitter *e, const LirStmt *s);

#endif

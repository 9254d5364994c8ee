/* Parallel loops: the body of a FOR marked parallel is outlined into
 *   void <kernel>.par<N>(ptr ctx, i64 lo, i64 hi) {
 *     operands = ctx[0]; v_j = ctx[3 + j] for each captured variable;
 *     for (iv = lo; iv < hi; iv += step) body
 *   }
 * and the kernel fills ctx (8 bytes per entry, by value: the body assigns
 * no outer variable) and calls
 *   tj_rt_parallel_for_leaves(lo, hi, balance pos or NULL, width,
 *                             leaves pos or NULL, width, .par<N>, ctx).
 * A loop whose step is not the constant 1 is split by trip number instead:
 * the runtime sees [0, trips) and the body maps t to ctx[1] + t * ctx[2].
 * A body that breaks the parallel contract (assigns an outer variable, may
 * fail) runs serially, which is always correct; so do nested parallel loops.
 * What the body captures is lir_capture's (ir/lir_walk.c), which the C
 * printer's outlining shares.
 */
#include <stdio.h>
#include <stdlib.h>

#include "emit_internal.h"
#include "../runtime/abi.h"

enum { CTX_OPERANDS, CTX_LO, CTX_STEP, CTX_VARS };

static LLVMValueRef ctx_addr(Emitter *e, LLVMBuilderRef b, LLVMValueRef ctx, int q) {
  LLVMValueRef idx = LLVMConstInt(e->i64, (unsigned)q, 0);
  return LLVMBuildInBoundsGEP2(b, e->i64, ctx, &idx, 1, "");
}

/* The outlined function's entry: operand pointers and captured variables
 * copied from ctx into this function's own slots. */
static void load_ctx(Emitter *e, LLVMValueRef ctx, const LirCapture *c) {
  e->operands = LLVMBuildLoad2(e->eb, e->ptr, ctx_addr(e, e->eb, ctx, CTX_OPERANDS), "operands");
  for (int i = 0; i < e->k->noperands; i++) {
    LLVMValueRef idx = LLVMConstInt(e->i64, (unsigned)i, 0);
    LLVMValueRef p = LLVMBuildInBoundsGEP2(e->eb, e->ptr, e->operands, &idx, 1, "");
    e->ops[i] = LLVMBuildLoad2(e->eb, e->ptr, p, "");
  }
  for (int j = 0; j < c->n; j++) {
    LLVMValueRef a = em_slot(e, c->vars[j]);
    if (!a) return;
    LLVMTypeRef t = em_reg_type(e, c->vars[j]->type);
    LLVMValueRef x = LLVMBuildLoad2(e->eb, t, ctx_addr(e, e->eb, ctx, CTX_VARS + j), "");
    LLVMBuildStore(e->eb, x, a);
  }
}

/* [lo, hi) of the iv from the runtime's range (trip numbers unless the
 * step is 1), in the iv's type. */
static void iv_range(Emitter *e, const LirStmt *s, LLVMValueRef ctx,
                     LLVMValueRef *lo, LLVMValueRef *hi) {
  LLVMValueRef l = LLVMGetParam(e->fn, 1), h = LLVMGetParam(e->fn, 2);
  if (!lir_unit_step(s)) {
    LLVMValueRef l0 = LLVMBuildLoad2(e->b, e->i64, ctx_addr(e, e->b, ctx, CTX_LO), "");
    LLVMValueRef st = LLVMBuildLoad2(e->b, e->i64, ctx_addr(e, e->b, ctx, CTX_STEP), "");
    l = LLVMBuildAdd(e->b, l0, LLVMBuildMul(e->b, l, st, ""), "");
    h = LLVMBuildAdd(e->b, l0, LLVMBuildMul(e->b, h, st, ""), "");
  }
  LLVMTypeRef t = em_reg_type(e, s->u.loop.iv->type);
  *lo = LLVMBuildIntCast2(e->b, l, t, 1, "");
  *hi = LLVMBuildIntCast2(e->b, h, t, 1, "");
}

/* Builds .par<N> with the emitter switched to it; restores the kernel's
 * function state afterwards. */
static LLVMValueRef outline(Emitter *e, const LirStmt *s, const LirCapture *c) {
  char name[160];
  snprintf(name, sizeof name, "%s.par%d", e->t->symbol, e->npar++);
  LLVMTypeRef pt[] = {e->ptr, e->i64, e->i64};
  LLVMValueRef fn = LLVMAddFunction(e->m, name, LLVMFunctionType(e->vd, pt, 3, 0));
  LLVMSetLinkage(fn, LLVMInternalLinkage);
  em_add_fn_attrs(e, fn);
  Emitter saved = *e;
  LLVMBasicBlockRef back = LLVMGetInsertBlock(e->b);
  e->slots = calloc((size_t)e->k->nvars + 1, sizeof *e->slots);
  if (!e->slots) {
    diag_error(e->d, TJ_ERR_NOMEM, "out of memory outlining a parallel loop");
    *e = saved;
    return NULL;
  }
  e->fn = fn;
  e->eb = LLVMCreateBuilderInContext(e->cx);
  e->cleanup = NULL;
  e->rc = e->alloc_out = NULL;
  e->in_parallel = true;
  LLVMBasicBlockRef entry = em_new_block(e, "entry"), body = em_new_block(e, "body");
  LLVMPositionBuilderAtEnd(e->eb, entry);
  LLVMPositionBuilderAtEnd(e->b, body);
  LLVMValueRef ctx = LLVMGetParam(fn, 0), lo, hi;
  load_ctx(e, ctx, c);
  iv_range(e, s, ctx, &lo, &hi);
  bool ok = diag_ok(e->d) && em_scalar_for(e, s, lo, hi);
  if (ok) LLVMBuildRetVoid(e->b);
  LLVMBuildBr(e->eb, body);
  LLVMDisposeBuilder(e->eb);
  free(e->slots);
  int npar = e->npar;
  *e = saved;
  e->npar = npar;
  LLVMPositionBuilderAtEnd(e->b, back);
  return ok ? fn : NULL;
}

/* ctx[CTX_VARS + j] = captured variable j; ctx[0] = operands. */
static LLVMValueRef fill_ctx(Emitter *e, const LirCapture *c) {
  LLVMTypeRef at = LLVMArrayType(e->i64, (unsigned)(CTX_VARS + c->n));
  LLVMValueRef ctx = LLVMBuildAlloca(e->eb, at, "par.ctx");
  LLVMBuildStore(e->b, e->operands, ctx_addr(e, e->b, ctx, CTX_OPERANDS));
  for (int j = 0; j < c->n; j++) {
    LLVMValueRef a = em_slot(e, c->vars[j]);
    if (!a) return NULL;
    LLVMValueRef x = LLVMBuildLoad2(e->b, em_reg_type(e, c->vars[j]->type), a, "");
    LLVMBuildStore(e->b, x, ctx_addr(e, e->b, ctx, CTX_VARS + j));
  }
  return ctx;
}

/* The runtime's range: [lo, hi), or [0, trips) with lo and step in ctx. */
static bool run_range(Emitter *e, const LirStmt *s, LLVMValueRef ctx,
                      LLVMValueRef *lo, LLVMValueRef *hi) {
  LLVMValueRef l = emit_expr(e, s->u.loop.lo), h = l ? emit_expr(e, s->u.loop.hi) : NULL;
  if (!h) return false;
  l = LLVMBuildIntCast2(e->b, l, e->i64, 1, "");
  h = LLVMBuildIntCast2(e->b, h, e->i64, 1, "");
  if (lir_unit_step(s)) {
    *lo = l, *hi = h;
    return true;
  }
  LLVMValueRef st = emit_expr(e, s->u.loop.step);
  if (!st) return false;
  st = LLVMBuildIntCast2(e->b, st, e->i64, 1, "");
  LLVMBuildStore(e->b, l, ctx_addr(e, e->b, ctx, CTX_LO));
  LLVMBuildStore(e->b, st, ctx_addr(e, e->b, ctx, CTX_STEP));
  LLVMValueRef one = LLVMConstInt(e->i64, 1, 0);
  LLVMValueRef span = LLVMBuildSub(e->b, LLVMBuildAdd(e->b, LLVMBuildSub(e->b, h, l, ""), st, ""), one, "");
  LLVMValueRef trips = LLVMBuildSDiv(e->b, span, st, "");
  LLVMValueRef empty = LLVMBuildICmp(e->b, LLVMIntSLE, h, l, "");
  *lo = LLVMConstInt(e->i64, 0, 0);
  *hi = LLVMBuildSelect(e->b, empty, *lo, trips, "");
  return true;
}

/* A balance array as (pointer, width in bytes); null and 0 when absent. */
static bool weight_array(Emitter *e, const LirExpr *x, LLVMValueRef *p, LLVMValueRef *w) {
  *p = LLVMConstNull(e->ptr);
  *w = LLVMConstInt(e->i32, 0, 0);
  if (!x) return true;
  if (x->type != LT_PTR_I32 && x->type != LT_PTR_I64 && x->type != LT_PTR_U8 &&
      x->type != LT_PTR_U16)   /* 8- and 16-bit positions are unsigned */
    return em_bug(e, "parallel balance array is not an integer pointer");
  if (!(*p = emit_expr(e, x))) return false;
  *w = LLVMConstInt(e->i32, (unsigned)em_elem_bytes(x->type), 0);
  return true;
}

/* tj_rt_parallel_for_sched(lo, hi, pos, width, leaves, width, strategy, body, ctx) */
static bool call_runtime(Emitter *e, const LirStmt *s, LLVMValueRef fn,
                         LLVMValueRef ctx, LLVMValueRef lo, LLVMValueRef hi) {
  const LirExpr *bal = lir_unit_step(s) ? s->u.loop.at.balance : NULL;
  LLVMValueRef pos, pw, leaf, lw;
  if (!weight_array(e, bal, &pos, &pw) ||
      !weight_array(e, bal ? s->u.loop.at.leaves : NULL, &leaf, &lw))
    return false;
  LLVMTypeRef pt[] = {e->i64, e->i64, e->ptr, e->i32, e->ptr, e->i32, e->i32, e->ptr, e->ptr};
  LLVMTypeRef ft = LLVMFunctionType(e->vd, pt, 9, 0);
  LLVMValueRef rt = LLVMGetNamedFunction(e->m, "tj_rt_parallel_for_sched");
  if (!rt) rt = LLVMAddFunction(e->m, "tj_rt_parallel_for_sched", ft);
  unsigned how = (unsigned)s->u.loop.at.schedule | (lir_par_light(s) ? TJ_PAR_LIGHT : 0u);
  LLVMValueRef strategy = LLVMConstInt(e->i32, how, 0);
  LLVMValueRef args[] = {lo, hi, pos, pw, leaf, lw, strategy, fn, ctx};
  LLVMBuildCall2(e->b, ft, rt, args, 9, "");
  return true;
}

bool emit_parallel_for(Emitter *e, const LirStmt *s) {
  LirCapture c;
  if (!lir_capture(e->k, s, &c))
    return diag_error(e->d, TJ_ERR_NOMEM, "out of memory outlining a parallel loop");
  LLVMValueRef ctx = NULL, fn = NULL, lo, hi;
  bool ok;
  if (c.writes_outer || c.may_fail || !e->cleanup || e->in_cleanup)
    ok = em_scalar_for(e, s, emit_expr(e, s->u.loop.lo), NULL);
  else
    ok = (ctx = fill_ctx(e, &c)) && run_range(e, s, ctx, &lo, &hi) &&
         (fn = outline(e, s, &c)) && call_runtime(e, s, fn, ctx, lo, hi);
  lir_capture_free(&c);
  return ok;
}

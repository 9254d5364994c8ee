/* The GETT micro-kernel as LLVM vector IR, and the call that runs a dense
 * contraction through the runtime's packing and macro-kernel.
 *
 * The micro-kernel keeps an mr x nr tile of C in mr/VL x nr vector
 * registers (VL lanes each) across the k loop:
 *
 *   for p < kc:
 *     a_v = load <VL x T> a[p*mr + v*VL]          v < mr/VL
 *     for j < nr: b = splat b[p*nr + j]
 *                 acc[v][j] = fma(a_v, b, acc[v][j])
 *   c[v*VL + j*cs ...] = (beta ? c : 0) + acc[v][j]
 *
 * On AVX-512 (24x8 f64, 48x8 f32) that is 24 accumulators, three A
 * registers and a broadcast B operand: 28 of the 32 zmm registers, one
 * broadcast per three FMAs; the other AVX-512 shape (16x14, 32x14) has 28
 * accumulators and two A registers (lower/gett.c micro_shape picks). The lowering (lower/gett.c) picks mr, nr and VL for the
 * target's vector width; the function carries "min-legal-vector-width" so
 * LLVM keeps 512-bit registers on CPUs that prefer 256-bit vectorization.
 */
#include <stdio.h>
#include <string.h>

#include "../runtime/abi.h"
#include "emit_internal.h"

typedef struct Uk {
  int mr, nr, vl, nv;        /* nv = mr / vl registers per column */
  LLVMTypeRef t, vt;         /* element and vector types */
  int esz;
} Uk;

/* acc[v][j] += a_v * splat(b[j]) for one p. */
static void uk_step(Emitter *e, const Uk *u, LLVMValueRef a, LLVMValueRef b, LLVMValueRef p,
                    LLVMValueRef *acc) {
  LLVMValueRef av[8];
  LLVMValueRef pa = LLVMBuildMul(e->b, p, LLVMConstInt(e->i64, (unsigned)u->mr, 0), "");
  LLVMValueRef pb = LLVMBuildMul(e->b, p, LLVMConstInt(e->i64, (unsigned)u->nr, 0), "");
  for (int v = 0; v < u->nv; v++) {
    LLVMValueRef idx = LLVMBuildAdd(e->b, pa, LLVMConstInt(e->i64, (unsigned)(v * u->vl), 0), "");
    LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->b, u->t, a, &idx, 1, "");
    av[v] = LLVMBuildLoad2(e->b, u->vt, ptr, "a");
    LLVMSetAlignment(av[v], (unsigned)u->esz);
  }
  LLVMValueRef undef = LLVMGetUndef(u->vt);
  LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(e->i32, (unsigned)u->vl));
  for (int j = 0; j < u->nr; j++) {
    LLVMValueRef idx = LLVMBuildAdd(e->b, pb, LLVMConstInt(e->i64, (unsigned)j, 0), "");
    LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->b, u->t, b, &idx, 1, "");
    LLVMValueRef s = LLVMBuildLoad2(e->b, u->t, ptr, "b");
    LLVMValueRef ins = LLVMBuildInsertElement(e->b, undef, s, LLVMConstInt(e->i32, 0, 0), "");
    LLVMValueRef bv = LLVMBuildShuffleVector(e->b, ins, undef, zeros, "bs");
    for (int v = 0; v < u->nv; v++) {
      LLVMValueRef args[] = {av[v], bv, acc[v * u->nr + j]};
      acc[v * u->nr + j] = em_intrinsic(e, "llvm.fma", u->vt, args, 3);
    }
  }
}

/* c[v*VL + j*cs] = (beta ? c : 0) + acc for the whole tile. */
static void uk_store(Emitter *e, const Uk *u, LLVMValueRef c, LLVMValueRef cs, bool beta,
                     LLVMValueRef *acc) {
  for (int j = 0; j < u->nr; j++) {
    LLVMValueRef col = LLVMBuildMul(e->b, cs, LLVMConstInt(e->i64, (unsigned)j, 0), "");
    for (int v = 0; v < u->nv; v++) {
      LLVMValueRef idx =
          LLVMBuildAdd(e->b, col, LLVMConstInt(e->i64, (unsigned)(v * u->vl), 0), "");
      LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->b, u->t, c, &idx, 1, "");
      LLVMValueRef x = acc[v * u->nr + j];
      if (beta) {
        LLVMValueRef old = LLVMBuildLoad2(e->b, u->vt, ptr, "c");
        LLVMSetAlignment(old, (unsigned)u->esz);
        x = LLVMBuildFAdd(e->b, old, x, "");
      }
      LLVMSetAlignment(LLVMBuildStore(e->b, x, ptr), (unsigned)u->esz);
    }
  }
}

/* Prefetches the C tile for writing (its first and last element of each
 * column): the lines arrive while the k loop runs instead of stalling the
 * update at its end. */
static void uk_prefetch_c(Emitter *e, const Uk *u, LLVMValueRef c, LLVMValueRef cs) {
  LLVMTypeRef pt[] = {e->ptr, e->i32, e->i32, e->i32};
  LLVMValueRef f = LLVMGetNamedFunction(e->m, "llvm.prefetch.p0");
  LLVMTypeRef ft = LLVMFunctionType(e->vd, pt, 4, 0);
  if (!f) f = LLVMAddFunction(e->m, "llvm.prefetch.p0", ft);
  for (int j = 0; j < u->nr; j++) {
    LLVMValueRef col = LLVMBuildMul(e->b, cs, LLVMConstInt(e->i64, (unsigned)j, 0), "");
    for (int end = 0; end < 2; end++) {
      LLVMValueRef idx =
          LLVMBuildAdd(e->b, col, LLVMConstInt(e->i64, (unsigned)(end ? u->mr - 1 : 0), 0), "");
      LLVMValueRef args[] = {LLVMBuildGEP2(e->b, u->t, c, &idx, 1, ""),
                             LLVMConstInt(e->i32, 1, 0), LLVMConstInt(e->i32, 3, 0),
                             LLVMConstInt(e->i32, 1, 0)};
      LLVMBuildCall2(e->b, ft, f, args, 4, "");
    }
  }
}

static void add_str_attr(Emitter *e, LLVMValueRef fn, const char *k, const char *v) {
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateStringAttribute(e->cx, k, (unsigned)strlen(k), v,
                                                    (unsigned)strlen(v)));
}

/* void uk(i64 kc, ptr a, ptr b, ptr c, i64 cs, i32 beta), in e's module. */
static LLVMValueRef emit_ukernel(Emitter *e, const Uk *u, const char *name) {
  LLVMTypeRef pt[] = {e->i64, e->ptr, e->ptr, e->ptr, e->i64, e->i32};
  LLVMValueRef fn = LLVMAddFunction(e->m, name, LLVMFunctionType(e->vd, pt, 6, 0));
  LLVMSetLinkage(fn, LLVMInternalLinkage);
  em_add_fn_attrs(e, fn);
  char bits[16];
  snprintf(bits, sizeof bits, "%d", u->vl * u->esz * 8);
  add_str_attr(e, fn, "min-legal-vector-width", bits);
  add_str_attr(e, fn, "prefer-vector-width", bits);
  unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
  for (unsigned i = 2; i <= 4; i++)
    LLVMAddAttributeAtIndex(fn, i, LLVMCreateEnumAttribute(e->cx, noalias, 0));
  LLVMValueRef kc = LLVMGetParam(fn, 0), a = LLVMGetParam(fn, 1), b = LLVMGetParam(fn, 2),
               c = LLVMGetParam(fn, 3), cs = LLVMGetParam(fn, 4), beta = LLVMGetParam(fn, 5);
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(e->cx, fn, "entry"),
                    loop = LLVMAppendBasicBlockInContext(e->cx, fn, "k.loop"),
                    done = LLVMAppendBasicBlockInContext(e->cx, fn, "k.done"),
                    add = LLVMAppendBasicBlockInContext(e->cx, fn, "c.add"),
                    set = LLVMAppendBasicBlockInContext(e->cx, fn, "c.set");
  int nacc = u->nv * u->nr;
  LLVMValueRef acc[8 * 32], phi[8 * 32], out[8 * 32];
  LLVMValueRef zero = LLVMConstNull(u->vt);
  LLVMPositionBuilderAtEnd(e->b, entry);
  uk_prefetch_c(e, u, c, cs);
  LLVMValueRef any = LLVMBuildICmp(e->b, LLVMIntSGT, kc, LLVMConstInt(e->i64, 0, 0), "");
  LLVMBuildCondBr(e->b, any, loop, done);
  LLVMPositionBuilderAtEnd(e->b, loop);
  LLVMValueRef p = LLVMBuildPhi(e->b, e->i64, "p");
  for (int x = 0; x < nacc; x++) acc[x] = phi[x] = LLVMBuildPhi(e->b, u->vt, "acc");
  uk_step(e, u, a, b, p, acc);
  LLVMValueRef p1 = LLVMBuildAdd(e->b, p, LLVMConstInt(e->i64, 1, 0), "");
  LLVMValueRef more = LLVMBuildICmp(e->b, LLVMIntSLT, p1, kc, "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(e->b);
  LLVMBuildCondBr(e->b, more, loop, done);
  LLVMValueRef p0 = LLVMConstInt(e->i64, 0, 0);
  LLVMBasicBlockRef from[2] = {entry, latch};
  LLVMValueRef pin[2] = {p0, p1};
  LLVMAddIncoming(p, pin, from, 2);
  LLVMPositionBuilderAtEnd(e->b, done);
  for (int x = 0; x < nacc; x++) {
    LLVMValueRef in[2] = {zero, acc[x]};
    LLVMAddIncoming(phi[x], in, from, 2);
    out[x] = LLVMBuildPhi(e->b, u->vt, "sum");
    LLVMAddIncoming(out[x], in, from, 2);
  }
  LLVMValueRef has_beta = LLVMBuildICmp(e->b, LLVMIntNE, beta, LLVMConstInt(e->i32, 0, 0), "");
  LLVMBuildCondBr(e->b, has_beta, add, set);
  LLVMPositionBuilderAtEnd(e->b, add);
  uk_store(e, u, c, cs, true, out);
  LLVMBuildRetVoid(e->b);
  LLVMPositionBuilderAtEnd(e->b, set);
  uk_store(e, u, c, cs, false, out);
  LLVMBuildRetVoid(e->b);
  return fn;
}

bool emit_gett_call(Emitter *e, const LirStmt *s) {
  const int32_t *w = s->u.call.plan;
  if (!w) return em_bug(e, "GETT call without a plan");
  Uk u = {.mr = w[TJ_GP_MR], .nr = w[TJ_GP_NR], .vl = w[TJ_GP_VL]};
  bool f32 = w[TJ_GP_DTYPE] == 1;
  if (u.vl < 1 || u.mr % u.vl || u.mr / u.vl > 8 || u.nr < 1 || u.nr > 32)
    return em_bug(e, "GETT micro-kernel shape out of range");
  u.nv = u.mr / u.vl;
  u.t = f32 ? e->f32 : e->f64;
  u.esz = f32 ? 4 : 8;
  u.vt = LLVMVectorType(u.t, (unsigned)u.vl);
  char name[160];
  snprintf(name, sizeof name, "%s.uk", e->t->symbol);
  /* the micro-kernel is built with its own builder position */
  LLVMBasicBlockRef at = LLVMGetInsertBlock(e->b);
  LLVMValueRef uk = emit_ukernel(e, &u, name);
  LLVMPositionBuilderAtEnd(e->b, at);
  LLVMValueRef words[TJ_GP_WORDS];
  for (int x = 0; x < TJ_GP_WORDS; x++) words[x] = LLVMConstInt(e->i32, (unsigned)w[x], 1);
  LLVMValueRef init = LLVMConstArray2(e->i32, words, TJ_GP_WORDS);
  snprintf(name, sizeof name, "%s.plan", e->t->symbol);
  LLVMValueRef g = LLVMAddGlobal(e->m, LLVMTypeOf(init), name);
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  LLVMTypeRef pt[] = {e->ptr, e->ptr, e->ptr};
  LLVMValueRef args[] = {e->operands, g, uk};
  return em_fail_if_nonzero(e, em_helper(e, "tj_rt_gett", e->i32, pt, 3, args));
}

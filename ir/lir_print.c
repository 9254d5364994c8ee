/* The loop IR's C printer: writes a LirKernel as one readable C11 function
 * `int32_t name(tj_storage **operands)` against runtime/abi.h.
 *
 * Operands become locals (`tj_storage *A = operands[0];`), fields print as
 * `A->dims[0]`, `((int32_t *)A->levels[1].crd)`. Expressions print with C
 * precedence, so parentheses appear only where C needs them. Helpers that can
 * fail jump to `fail:`, where k->cleanup runs on every exit; the body's
 * top-level declarations that cleanup reads are hoisted to the function's
 * top (initialized to 0) so the jump never skips them.
 *
 * Readable (the stages -print-compute, -print-after) a parallel loop prints
 * as its serial loop under a comment, and an atomic update as a plain one.
 * With LIR_PRINT_PARALLEL (the C backend's source, -print-c) the C runs as
 * the LLVM backend's code does: each parallel loop's body is outlined into
 *   struct K_parN { captured values };
 *   static void K_parN(void *ctx, int64_t lo, int64_t hi) { for (iv ...) body }
 * printed above the kernel, which fills the struct and calls the runtime's
 * tj_rt_parallel_for_sched (same strategy, balance arrays and thread
 * count); a body that may fail or assigns an outer variable, a nested
 * parallel loop and one in cleanup stay serial, as there. Atomic updates
 * become __atomic_fetch_add (integer +) or a compare-and-swap loop.
 */
#include "loop_ir.h"
#include "notation.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Printer {
  FILE *out;
  const LirKernel *k;
  char (*opname)[48];      /* C name of each operand local */
  unsigned char *hoisted;  /* by LirVar id: declared at the function's top */
  bool parallel;           /* LIR_PRINT_PARALLEL */
  bool serial;             /* inside an outlined body or cleanup: loops stay serial */
  const struct ParList *pars;  /* the outlined loops (LIR_PRINT_PARALLEL) */
} Printer;

/* C precedence levels (higher binds tighter). */
enum { P_COND = 3, P_OR = 4, P_AND = 5, P_EQ = 9, P_REL = 10, P_ADD = 12,
       P_MUL = 13, P_UNARY = 14, P_POSTFIX = 15, P_PRIMARY = 16 };

static void print_expr(Printer *p, const LirExpr *e, int need);

static int binop_prec(LirBinOp op) {
  switch (op) {
  case LOP_ADD: case LOP_SUB: return P_ADD;
  case LOP_MUL: case LOP_DIV: case LOP_REM: return P_MUL;
  case LOP_MIN: case LOP_MAX: case LOP_POW: return P_PRIMARY;  /* parenthesized, a call */
  case LOP_LT: case LOP_LE: case LOP_GT: case LOP_GE: return P_REL;
  case LOP_EQ: case LOP_NE: return P_EQ;
  case LOP_AND: return P_AND;
  default: return P_OR;
  }
}

static int expr_prec(const LirExpr *e) {
  switch (e->kind) {
  case LE_CONST:
    if (lir_type_is_float(e->type)) return e->u.c.f < 0 ? P_UNARY : P_PRIMARY;
    return e->u.c.i < 0 && !lir_type_is_unsigned(e->type) ? P_UNARY : P_PRIMARY;
  case LE_VAR: case LE_FIELD: return P_PRIMARY;
  case LE_LOAD: return P_POSTFIX;
  case LE_BIN:  /* narrow integers print as a cast */
    return lir_type_is_int(e->type) && lir_type_bytes(e->type) < 4 ? P_UNARY
                                                                   : binop_prec(e->u.bin.op);
  case LE_UN:
    return e->u.un.op == LUN_NEG || e->u.un.op == LUN_NOT ? P_UNARY
                                                          : P_POSTFIX;
  case LE_CAST: return P_UNARY;
  default: return P_COND;
  }
}

static void print_float(FILE *out, double v, bool is_f32) {
  char buf[64];
  if (isnan(v)) {
    fputs(is_f32 ? "NAN" : "(double)NAN", out);
    return;
  }
  if (isinf(v)) {
    fputs(v < 0 ? "-" : "", out);
    fputs(is_f32 ? "INFINITY" : "(double)INFINITY", out);
    return;
  }
  if (is_f32)
    snprintf(buf, sizeof buf, "%.9g", (double)(float)v);
  else
    snprintf(buf, sizeof buf, "%.17g", v);
  fputs(buf, out);
  if (!strpbrk(buf, ".e")) fputs(".0", out);
  if (is_f32) fputc('f', out);
}

static void print_const(Printer *p, const LirExpr *e) {
  switch (e->type) {
  case LT_BOOL: fputs(e->u.c.i ? "true" : "false", p->out); break;
  case LT_F32: print_float(p->out, e->u.c.f, true); break;
  case LT_F64: print_float(p->out, e->u.c.f, false); break;
  case LT_I8: case LT_I16: fprintf(p->out, "%d", (int)e->u.c.i); break;
  case LT_I32:
    if ((int32_t)e->u.c.i == INT32_MIN) fputs("INT32_MIN", p->out);
    else fprintf(p->out, "%" PRId32, (int32_t)e->u.c.i);
    break;
  case LT_I64:
    if (e->u.c.i == INT64_MIN) fputs("INT64_MIN", p->out);
    else if (e->u.c.i > INT32_MAX || e->u.c.i < -INT32_MAX)
      fprintf(p->out, "INT64_C(%" PRId64 ")", e->u.c.i);
    else fprintf(p->out, "%" PRId64, e->u.c.i);
    break;
  case LT_U8: case LT_U16: case LT_U32:
    fprintf(p->out, "%" PRIu64 "u", (uint64_t)e->u.c.i);
    break;
  case LT_U64: fprintf(p->out, "UINT64_C(%" PRIu64 ")", (uint64_t)e->u.c.i); break;
  default: fputs("0", p->out); break;  /* null pointer */
  }
}

static const char *arr_name(LirField f) {
  return f == LF_POS ? "pos" : f == LF_CRD ? "crd" : "vals";
}

static void print_field(Printer *p, int op, LirField f, int level) {
  const char *o = p->opname[op];
  switch (f) {
  case LF_DIM: fprintf(p->out, "%s->dims[%d]", o, level); break;
  case LF_LVL_SIZE: fprintf(p->out, "%s->levels[%d].size", o, level); break;
  case LF_POS: case LF_CRD:
    fprintf(p->out, "((%s)%s->levels[%d].%s)",
            lir_type_c(lir_field_type(p->k, op, f)), o, level, arr_name(f));
    break;
  case LF_VALS:
    fprintf(p->out, "((%s)%s->vals)",
            lir_type_c(lir_field_type(p->k, op, f)), o);
    break;
  case LF_POS_LEN: fprintf(p->out, "%s->levels[%d].pos_len", o, level); break;
  case LF_CRD_LEN: fprintf(p->out, "%s->levels[%d].crd_len", o, level); break;
  case LF_VALS_LEN: fprintf(p->out, "%s->vals_len", o); break;
  case LF_SLICE_OFF: case LF_SLICE_SIZE: case LF_SLICE_STRIDE:
    fprintf(p->out, "%s->slice[%d][%d]", o, level, (int)(f - LF_SLICE_OFF));
    break;
  }
}

/* min/max print as `(a < b ? a : b)`; the interpreter uses the same rule. */
static void print_minmax(Printer *p, const LirExpr *e) {
  const char *cmp = e->u.bin.op == LOP_MIN ? " < " : " > ";
  fputc('(', p->out);
  print_expr(p, e->u.bin.a, P_REL + 1);
  fputs(cmp, p->out);
  print_expr(p, e->u.bin.b, P_REL + 1);
  fputs(" ? ", p->out);
  print_expr(p, e->u.bin.a, P_COND + 1);
  fputs(" : ", p->out);
  print_expr(p, e->u.bin.b, P_COND);
  fputc(')', p->out);
}

static void print_bin(Printer *p, const LirExpr *e) {
  LirBinOp op = e->u.bin.op;
  if (op == LOP_MIN || op == LOP_MAX) {
    print_minmax(p, e);
    return;
  }
  if (op == LOP_POW) {
    fputs(e->type == LT_F32 ? "powf(" : "pow(", p->out);
    print_expr(p, e->u.bin.a, 0);
    fputs(", ", p->out);
    print_expr(p, e->u.bin.b, 0);
    fputc(')', p->out);
    return;
  }
  int prec = binop_prec(op);
  /* Comparisons and logic operands are never bare comparisons / other
   * logic operators: C allows it, but it reads badly. */
  int lneed = prec, rneed = prec + 1;
  if (prec == P_REL || prec == P_EQ) lneed = rneed = P_ADD;
  if (op == LOP_OR) lneed = rneed = P_AND + 1;
  if (op == LOP_AND) lneed = P_AND, rneed = P_AND + 1;
  if (e->type == LT_I64 && e->u.bin.a->kind == LE_CONST &&
      e->u.bin.b->kind == LE_CONST)
    fputs("(int64_t)", p->out);  /* two int literals would compute in int */
  print_expr(p, e->u.bin.a, lneed);
  fprintf(p->out, " %s ", lir_bin_name(op));
  print_expr(p, e->u.bin.b, rneed);
}

static void print_un(Printer *p, const LirExpr *e) {
  const LirExpr *x = e->u.un.a;
  bool f32 = x->type == LT_F32;
  switch (e->u.un.op) {
  case LUN_NEG: case LUN_NOT:
    fputs(e->u.un.op == LUN_NEG ? "-" : "!", p->out);
    /* a nested unary minus or negative literal needs parentheses (--x) */
    print_expr(p, x, expr_prec(x) == P_UNARY ? P_PRIMARY : P_UNARY);
    return;
  case LUN_ABS:
    if (!lir_type_is_float(x->type)) {
      fputc('(', p->out);
      print_expr(p, x, P_REL + 1);
      fputs(" < 0 ? -", p->out);
      print_expr(p, x, P_PRIMARY);
      fputs(" : ", p->out);
      print_expr(p, x, P_COND);
      fputc(')', p->out);
      return;
    }
    fputs(f32 ? "fabsf(" : "fabs(", p->out);
    break;
  case LUN_SQRT: fputs(f32 ? "sqrtf(" : "sqrt(", p->out); break;
  case LUN_EXP: fputs(f32 ? "expf(" : "exp(", p->out); break;
  case LUN_LOG: fputs(f32 ? "logf(" : "log(", p->out); break;
  }
  print_expr(p, x, 0);
  fputc(')', p->out);
}

static void print_expr_bare(Printer *p, const LirExpr *e) {
  switch (e->kind) {
  case LE_CONST: print_const(p, e); break;
  case LE_VAR: fputs(e->u.var->name, p->out); break;
  case LE_FIELD:
    print_field(p, e->u.field.operand, e->u.field.field, e->u.field.level);
    break;
  case LE_LOAD:
    print_expr(p, e->u.load.ptr, P_POSTFIX);
    fputc('[', p->out);
    print_expr(p, e->u.load.idx, 0);
    fputc(']', p->out);
    break;
  case LE_BIN:
    if (lir_type_bytes(e->type) < 4 && lir_type_is_int(e->type)) {
      /* C computes int8/int16 arithmetic in int: wrap it as the IR does */
      fprintf(p->out, "(%s)(", lir_type_c(e->type));
      print_bin(p, e);
      fputc(')', p->out);
    } else {
      print_bin(p, e);
    }
    break;
  case LE_UN: print_un(p, e); break;
  case LE_CAST:
    fprintf(p->out, "(%s)", lir_type_c(e->type));
    print_expr(p, e->u.cast, P_UNARY);
    break;
  case LE_SELECT:
    print_expr(p, e->u.sel.cond, P_COND + 1);
    fputs(" ? ", p->out);
    print_expr(p, e->u.sel.a, P_COND + 1);
    fputs(" : ", p->out);
    print_expr(p, e->u.sel.b, P_COND);
    break;
  }
}

/* Prints e, parenthesized when it binds looser than `need`. */
static void print_expr(Printer *p, const LirExpr *e, int need) {
  if (!e) {
    fputs("/* missing */0", p->out);
    return;
  }
  bool paren = expr_prec(e) < need;
  if (paren) fputc('(', p->out);
  print_expr_bare(p, e);
  if (paren) fputc(')', p->out);
}

static void indent(Printer *p, int n) {
  for (int i = 0; i < n; i++) fputs("  ", p->out);
}

static void print_decl_head(Printer *p, const LirVar *v) {
  const char *t = lir_type_c(v->type);
  fprintf(p->out, "%s%s%s", t, t[strlen(t) - 1] == '*' ? "" : " ", v->name);
}

static void print_list(Printer *p, const LirStmt *s, int ind, bool top);

/* Prints `{`-body-`}` ending without a newline (so `else` can follow). */
static void print_body(Printer *p, const LirStmt *body, int ind) {
  fputs("{\n", p->out);
  print_list(p, body, ind + 1, false);
  indent(p, ind);
  fputc('}', p->out);
}

/* `x = e;`, `x += e;` or for min/max/and/or `x = x op e;`. */
static void print_update(Printer *p, int op, const LirExpr *e) {
  if (op < 0) {
    fputs(" = ", p->out);
    print_expr(p, e, P_COND);
  } else if (op <= LOP_REM) {
    fprintf(p->out, " %s= ", lir_bin_name(op));
    print_expr(p, e, P_COND);
  }
  fputs(";\n", p->out);
}

static void print_assign(Printer *p, const LirStmt *s) {
  int op = s->u.assign.op;
  fputs(s->u.assign.var->name, p->out);
  if (op > LOP_REM) {  /* no compound C operator: spell it out */
    LirExpr x = {.kind = LE_VAR, .type = s->u.assign.var->type};
    x.u.var = s->u.assign.var;
    LirExpr b = {.kind = LE_BIN, .type = x.type};
    b.u.bin.op = op, b.u.bin.a = &x, b.u.bin.b = s->u.assign.e;
    print_update(p, -1, &b);
  } else {
    print_update(p, op, s->u.assign.e);
  }
}

static void indent(Printer *p, int n);

/* An atomic update as C11-era builtins:
 *   __atomic_fetch_add(&ptr[idx], e, __ATOMIC_RELAXED);     integer +
 *   { T *tj_p = &ptr[idx]; T tj_x = e, tj_old, tj_new;      the others
 *     __atomic_load(tj_p, &tj_old, __ATOMIC_RELAXED);
 *     do tj_new = tj_old op tj_x; while (!__atomic_compare_exchange(...)); }
 * With the store's old variable (e reads it), old is the expected value and
 * tj_new = e. Relaxed, as the LLVM backend's: the parallel loop's end is
 * the only ordering point. */
static void print_atomic(Printer *p, const LirStmt *s, int ind) {
  int op = s->u.store.op;
  LirType t = lir_elem_type(s->u.store.ptr->type);
  LirExpr ld = {.kind = LE_LOAD, .type = t};
  ld.u.load.ptr = s->u.store.ptr, ld.u.load.idx = s->u.store.idx;
  if (op == LOP_ADD && lir_type_is_int(t) && !s->u.store.old) {
    fputs("__atomic_fetch_add(&", p->out);
    print_expr(p, &ld, P_UNARY);
    fputs(", ", p->out);
    print_expr(p, s->u.store.e, P_COND);
    fputs(", __ATOMIC_RELAXED);\n", p->out);
    return;
  }
  const char *tc = lir_type_c(t), *old = s->u.store.old ? s->u.store.old->name : "tj_old";
  fprintf(p->out, "{ /* atomic */\n");
  indent(p, ind + 1);
  fprintf(p->out, "%s *tj_p = &", tc);
  print_expr(p, &ld, P_UNARY);
  fprintf(p->out, ";\n");
  indent(p, ind + 1);
  LirVar vx = {.id = -1, .name = "tj_x", .type = t}, vo = {.id = -1, .name = old, .type = t};
  LirExpr x = {.kind = LE_VAR, .type = t}, o = {.kind = LE_VAR, .type = t};
  x.u.var = &vx, o.u.var = &vo;
  LirExpr b = {.kind = LE_BIN, .type = t};
  b.u.bin.op = op, b.u.bin.a = &o, b.u.bin.b = &x;
  if (s->u.store.old) {
    fprintf(p->out, "%s tj_new;\n", tc);
  } else {
    fprintf(p->out, "%s tj_x = ", tc);
    print_expr(p, s->u.store.e, P_COND);
    fprintf(p->out, ", tj_old, tj_new;\n");
  }
  indent(p, ind + 1);
  fprintf(p->out, "__atomic_load(tj_p, &%s, __ATOMIC_RELAXED);\n", old);
  indent(p, ind + 1);
  fputs("do tj_new = ", p->out);
  print_expr(p, s->u.store.old ? s->u.store.e : &b, P_COND);
  fprintf(p->out, ";\n");
  indent(p, ind + 1);
  fprintf(p->out, "while (!__atomic_compare_exchange(tj_p, &%s, &tj_new, true, __ATOMIC_RELAXED, "
                  "__ATOMIC_RELAXED));\n", old);
  indent(p, ind);
  fputs("}\n", p->out);
}

static void print_store(Printer *p, const LirStmt *s) {
  int op = s->u.store.op;
  LirExpr ld = {.kind = LE_LOAD, .type = lir_elem_type(s->u.store.ptr->type)};
  ld.u.load.ptr = s->u.store.ptr, ld.u.load.idx = s->u.store.idx;
  if (s->u.store.atomic) fputs("/* atomic */ ", p->out);  /* C renders serial loops */
  print_expr(p, &ld, P_POSTFIX);
  if (op > LOP_REM) {
    LirExpr b = {.kind = LE_BIN, .type = ld.type};
    b.u.bin.op = op, b.u.bin.a = &ld, b.u.bin.b = s->u.store.e;
    print_update(p, -1, &b);
  } else {
    print_update(p, op, s->u.store.e);
  }

}

/* __builtin_prefetch(&ptr[idx]): GCC's and clang's hint, which reads
 * nothing (the address may lie past the array). */
static void print_prefetch(Printer *p, const LirStmt *s) {
  LirExpr ld = {.kind = LE_LOAD, .type = lir_elem_type(s->u.prefetch.ptr->type)};
  ld.u.load.ptr = s->u.prefetch.ptr, ld.u.load.idx = s->u.prefetch.idx;
  fputs("__builtin_prefetch(&", p->out);
  print_expr(p, &ld, P_POSTFIX);
  fputs(");\n", p->out);
}

static void print_attrs(Printer *p, LoopAttrs at, int ind) {
  bool asked = at.vectorize && !at.vec_width;
  if (!at.parallel && !at.vec_width && !at.unroll && !at.remainder && !at.scalar && !asked)
    return;
  indent(p, ind);
  fputs("/*", p->out);
  if (at.parallel && at.schedule)
    fprintf(p->out, " parallel(%s) (#pragma omp parallel for)", cin_strategy_name(at.schedule));
  else if (at.parallel)
    fputs(" parallel (#pragma omp parallel for)", p->out);
  if (at.vec_width) fprintf(p->out, " vector(%d)", at.vec_width);
  if (asked) fprintf(p->out, " vectorize(%d) asked", at.vectorize);
  if (at.unroll) fprintf(p->out, " unroll(%d)", at.unroll);
  if (at.masked_tail) fputs(" masked-tail", p->out);
  if (at.remainder) fputs(" remainder", p->out);
  if (at.scalar) fputs(" scalar", p->out);
  fputs(" */\n", p->out);
}

static void print_for(Printer *p, const LirStmt *s, int ind) {
  const LirVar *iv = s->u.loop.iv;
  const LirExpr *st = s->u.loop.step;
  fputs("for (", p->out);
  print_decl_head(p, iv);
  fputs(" = ", p->out);
  print_expr(p, s->u.loop.lo, P_COND);
  fprintf(p->out, "; %s < ", iv->name);
  print_expr(p, s->u.loop.hi, P_REL + 1);
  /* A vector loop means the scalar loop: its lanes run in order. */
  if ((st && st->kind == LE_CONST && st->u.c.i == 1) || s->u.loop.at.vec_width > 0) {
    fprintf(p->out, "; %s++) ", iv->name);
  } else {
    fprintf(p->out, "; %s += ", iv->name);
    print_expr(p, st, P_COND);
    fputs(") ", p->out);
  }
  print_body(p, s->u.loop.body, ind);
  fputc('\n', p->out);
}

/* if / else if / else: an IF alone in els prints as `else if`. */
static void print_if(Printer *p, const LirStmt *s, int ind) {
  for (;;) {
    fputs("if (", p->out);
    print_expr(p, s->u.cond.cond, 0);
    fputs(") ", p->out);
    print_body(p, s->u.cond.then, ind);
    const LirStmt *els = s->u.cond.els;
    if (!els) break;
    if (els->kind == LS_IF && !els->next) {
      fputs(" else ", p->out);
      s = els;
      continue;
    }
    fputs(" else ", p->out);
    print_body(p, els, ind);
    break;
  }
  fputc('\n', p->out);
}

static const char *arr_const(int arr) {
  return arr == 0 ? "TJ_ARR_POS" : arr == 1 ? "TJ_ARR_CRD" : "TJ_ARR_VALS";
}

static bool is_zero_const(const LirExpr *e) {
  return e->kind == LE_CONST && lir_type_is_int(e->type) && e->u.c.i == 0;
}

static void print_call(Printer *p, const LirStmt *s) {
  const char *ptr = s->u.call.ptr ? s->u.call.ptr->name : "0";
  switch (s->u.call.h) {
  case LH_RESERVE:
    fprintf(p->out, "if ((rc = tj_rt_reserve(%s, %s%s, %d, ",
            p->opname[s->u.call.operand], arr_const(s->u.call.arr),
            s->u.call.raw ? " | TJ_ARR_NOZERO" : "", s->u.call.level);
    print_expr(p, s->u.call.a, P_COND);
    fputs(")) != 0) goto fail;\n", p->out);
    break;
  case LH_ALLOC:
    fputs("if ((rc = tj_rt_alloc(", p->out);
    print_expr(p, s->u.call.a, P_COND);
    fprintf(p->out, ", (void **)&%s)) != 0) goto fail;\n", ptr);
    break;
  case LH_FREE:
    fprintf(p->out, "tj_rt_free(%s);\n", ptr);
    break;
  case LH_SORT_CRD: /* tj_rt_sort_crd(ptr + lo, hi - lo, ...); lo 0: (ptr, hi, ...) */
    fprintf(p->out, "tj_rt_sort_crd(%s", ptr);
    if (!is_zero_const(s->u.call.a)) {
      fputs(" + ", p->out);
      print_expr(p, s->u.call.a, P_ADD + 1);
    }
    fputs(", ", p->out);
    print_expr(p, s->u.call.b, is_zero_const(s->u.call.a) ? P_COND : P_ADD);
    if (!is_zero_const(s->u.call.a)) {
      fputs(" - ", p->out);
      print_expr(p, s->u.call.a, P_ADD + 1);
    }
    fprintf(p->out, ", sizeof *%s);\n", ptr);
    break;
  case LH_ZERO:
    fprintf(p->out, "memset(%s + ", ptr);
    print_expr(p, s->u.call.a, P_ADD + 1);
    fputs(", 0, (", p->out);
    print_expr(p, s->u.call.b, P_ADD);
    fputs(" - ", p->out);
    print_expr(p, s->u.call.a, P_ADD + 1);
    fprintf(p->out, ") * sizeof *%s);\n", ptr);
    break;
  case LH_MARKED_CRD:
    fprintf(p->out, "%s = tj_rt_marked_crd(%s + ", s->u.call.ret->name, ptr);
    print_expr(p, s->u.call.a, P_ADD + 1);
    fprintf(p->out, ", %s, ", s->u.call.mark->name);
    print_expr(p, s->u.call.b, P_COND);
    fprintf(p->out, ", sizeof *%s);\n", ptr);
    break;
  case LH_THREADS:
    fprintf(p->out, "%s = tj_rt_threads();\n", ptr);
    break;
  case LH_THREAD_SLOT:
    fprintf(p->out, "%s = tj_rt_thread_slot(", ptr);
    print_expr(p, s->u.call.a, P_COND);
    fputs(");\n", p->out);
    break;
  case LH_GETT:
    fputs("if ((rc = tj_rt_gett(operands, (const int32_t[]){", p->out);
    for (int w = 0; w < LIR_GETT_WORDS; w++)
      fprintf(p->out, "%s%d", w ? "," : "", (int)s->u.call.plan[w]);
    fputs("}, 0)) != 0) goto fail;\n", p->out);
    break;
  }
}

static void print_decl(Printer *p, const LirStmt *s, bool top) {
  const LirVar *v = s->u.decl.var;
  const LirStmt *n = s->next;
  if (p->parallel && n && n->kind == LS_STORE && n->u.store.atomic && n->u.store.old == v) {
    print_decl_head(p, v);   /* print_atomic loads it atomically: no racing plain read */
    fputs(";\n", p->out);
    return;
  }
  if (top && p->hoisted[v->id]) {
    fprintf(p->out, "%s = ", v->name);   /* declared at the function's top */
  } else {
    print_decl_head(p, v);
    fputs(" = ", p->out);
  }
  if (s->u.decl.init) print_expr(p, s->u.decl.init, P_COND);
  else fputs(v->type == LT_BOOL ? "false" : "0", p->out);
  fputs(";\n", p->out);
}

static bool print_par_call(Printer *p, const LirStmt *s, int ind);

static void print_stmt(Printer *p, const LirStmt *s, int ind, bool top) {
  if (s->kind == LS_FOR && print_par_call(p, s, ind)) return;
  if (s->kind == LS_FOR) print_attrs(p, s->u.loop.at, ind);
  if (s->kind == LS_ASSIGN && s->u.assign.with) { /* a fold says so on the line above */
    indent(p, ind);
    fprintf(p->out, "/* fold of %s: commutative, associative, identity ", s->u.assign.with->name);
    print_expr(p, s->u.assign.identity, P_COND);
    fputs(" */\n", p->out);
  }
  indent(p, ind);
  switch (s->kind) {
  case LS_DECL: print_decl(p, s, top); break;
  case LS_ASSIGN: print_assign(p, s); break;
  case LS_STORE:
    if (p->parallel && s->u.store.atomic) print_atomic(p, s, ind);
    else print_store(p, s);
    break;
  case LS_SETFIELD:
    print_field(p, s->u.setfield.operand, s->u.setfield.field,
                s->u.setfield.level);
    print_update(p, -1, s->u.setfield.e);
    break;
  case LS_FOR: print_for(p, s, ind); break;
  case LS_WHILE:
    fputs("while (", p->out);
    print_expr(p, s->u.whl.cond, 0);
    fputs(") ", p->out);
    print_body(p, s->u.whl.body, ind);
    fputc('\n', p->out);
    break;
  case LS_IF: print_if(p, s, ind); break;
  case LS_CALL:
    print_call(p, s);
    if (s->u.call.h == LH_FREE && s->u.call.ptr) {
      indent(p, ind);
      fprintf(p->out, "%s = 0;\n", s->u.call.ptr->name);
    }
    break;
  case LS_BLOCK:
    print_body(p, s->u.block, ind);
    fputc('\n', p->out);
    break;
  case LS_COMMENT: fprintf(p->out, "/* %s */\n", s->u.comment); break;
  case LS_PREFETCH: print_prefetch(p, s); break;
  }
}

static void print_list(Printer *p, const LirStmt *s, int ind, bool top) {
  for (; s; s = s->next) print_stmt(p, s, ind, top);
}

/* ---- which operands and variables the function needs up front ---- */

typedef struct Uses {
  unsigned char *vars;   /* by LirVar id */
  bool ops[LIR_MAX_OPERANDS];
  bool can_fail;         /* a RESERVE or ALLOC is present */
} Uses;

static LirVisit use_expr(const LirExpr *e, void *cx) {
  Uses *u = cx;
  if (e->kind == LE_VAR && e->u.var) u->vars[e->u.var->id] = 1;
  if (e->kind == LE_FIELD && e->u.field.operand >= 0 && e->u.field.operand < LIR_MAX_OPERANDS)
    u->ops[e->u.field.operand] = true;
  return LV_DESCEND;
}

static void uses_expr(Uses *u, const LirExpr *e) { lir_expr_walk(e, use_expr, u); }

static void uses_list(Uses *u, const LirStmt *s);

static void uses_stmt(Uses *u, const LirStmt *s) {
  LirExpr *x[4];
  LirStmt *body[2];
  int n = lir_stmt_exprs(s, x);
  for (int i = 0; i < n; i++) uses_expr(u, x[i]);
  int op = s->kind == LS_SETFIELD ? s->u.setfield.operand
           : s->kind == LS_CALL && s->u.call.h == LH_RESERVE ? s->u.call.operand : -1;
  if (op >= 0 && op < LIR_MAX_OPERANDS) u->ops[op] = true;
  if (s->kind == LS_ASSIGN) u->vars[s->u.assign.var->id] = 1;
  if (s->kind == LS_CALL) {
    LirHelper h = s->u.call.h;
    u->can_fail |= h == LH_RESERVE || h == LH_ALLOC || h == LH_GETT;
    if (s->u.call.ptr) u->vars[s->u.call.ptr->id] = 1;
    if (s->u.call.mark) u->vars[s->u.call.mark->id] = 1;
    if (s->u.call.ret) u->vars[s->u.call.ret->id] = 1;
  }
  n = lir_stmt_bodies(s, body);
  for (int i = 0; i < n; i++) uses_list(u, body[i]);
}

static void uses_list(Uses *u, const LirStmt *s) {
  for (; s; s = s->next) uses_stmt(u, s);
}

/* Names operand locals after the tensors; a repeated or non-identifier name
 * becomes name_k / op_k. */
static void name_operands(Printer *p) {
  const LirKernel *k = p->k;
  for (int i = 0; i < k->noperands; i++) {
    const char *n = k->operands[i].name;
    bool ok = n && *n && strlen(n) < 40 && !(*n >= '0' && *n <= '9');
    for (const char *c = n; ok && *c; c++)
      ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
           (*c >= '0' && *c <= '9') || *c == '_';
    bool dup = false;
    for (int j = 0; ok && j < k->noperands; j++)
      dup |= j != i && k->operands[j].name && !strcmp(n, k->operands[j].name);
    if (!ok) snprintf(p->opname[i], 48, "op_%d", i);
    else if (dup) snprintf(p->opname[i], 48, "%s_%d", n, i);
    else snprintf(p->opname[i], 48, "%s", n);
  }
}

/* ---- parallel loops, outlined (LIR_PRINT_PARALLEL) ---- */

/* The outlined loops, in the order the kernel's body holds them. */
typedef struct ParList {
  const LirStmt **loop;
  int n, cap;
} ParList;

static bool unit_step(const LirStmt *s) {   /* a vector loop prints as its scalar loop */
  return lir_unit_step(s) || s->u.loop.at.vec_width > 0;
}

static const char *strategy_c(int strategy) {
  static const char *names[] = {"TJ_PAR_DEFAULT", "TJ_PAR_STATIC", "TJ_PAR_BALANCED",
                                "TJ_PAR_DYNAMIC"};
  return strategy >= 0 && strategy < 4 ? names[strategy] : "TJ_PAR_DEFAULT";
}

/* struct K_parN { tj_storage **operands; [int64_t tj_lo, tj_step;] captured; };
 * static void K_parN(void *tj_ctx, int64_t tj_lo, int64_t tj_hi) {
 *   operand locals and captured values from the struct;
 *   for (iv = tj_lo; iv < tj_hi; iv++) body      (or over trip numbers) } */
static void print_outlined(Printer *p, const LirStmt *s, int n, const LirCapture *c) {
  FILE *f = p->out;
  const char *kn = p->k->name;
  bool unit = unit_step(s);
  fprintf(f, "struct %s_par%d {\n  tj_storage **operands;\n", kn, n);
  if (!unit) fputs("  int64_t tj_lo, tj_step;\n", f);
  for (int i = 0; i < c->n; i++) {
    fputs("  ", f);
    print_decl_head(p, c->vars[i]);
    fputs(";\n", f);
  }
  fprintf(f, "};\n\nstatic void %s_par%d(void *tj_ctx, int64_t tj_lo, int64_t tj_hi) {\n",
          kn, n);
  unsigned char *vars = calloc((size_t)p->k->nvars + 1, 1);
  Uses u = {.vars = vars};
  bool all = !vars, any = all;   /* out of memory: every operand */
  if (vars) uses_stmt(&u, s);
  free(vars);
  for (int i = 0; i < p->k->noperands && i < LIR_MAX_OPERANDS; i++) any |= u.ops[i];
  if (any || c->n > 0 || !unit)
    fprintf(f, "  const struct %s_par%d *tj_c = tj_ctx;\n", kn, n);
  else
    fputs("  (void)tj_ctx;\n", f);
  if (any) fputs("  tj_storage **operands = tj_c->operands;\n", f);
  for (int i = 0; i < p->k->noperands && i < LIR_MAX_OPERANDS; i++)
    if (u.ops[i] || all) fprintf(f, "  tj_storage *%s = operands[%d];\n", p->opname[i], i);
  for (int i = 0; i < c->n; i++) {
    fputs("  ", f);
    print_decl_head(p, c->vars[i]);
    fprintf(f, " = tj_c->%s;\n", c->vars[i]->name);
  }
  const LirVar *iv = s->u.loop.iv;
  const char *ivt = lir_type_c(iv->type);
  if (unit) {
    fprintf(f, "  for (%s %s = (%s)tj_lo; %s < tj_hi; %s++) {\n", ivt, iv->name, ivt, iv->name,
            iv->name);
  } else {
    fprintf(f, "  for (int64_t tj_t = tj_lo; tj_t < tj_hi; tj_t++) {\n"
               "    %s %s = (%s)(tj_c->tj_lo + tj_t * tj_c->tj_step);\n", ivt, iv->name, ivt);
  }
  print_list(p, s->u.loop.body, 2, false);
  fputs("  }\n}\n\n", f);
}

/* Whether FOR s is outlined (filling c, to free, when it is). */
static bool outlines(const Printer *p, const LirStmt *s, LirCapture *c) {
  if (!p->parallel || p->serial || !s->u.loop.at.parallel || !lir_capture(p->k, s, c))
    return false;
  if (!c->writes_outer && !c->may_fail) return true;
  lir_capture_free(c);
  return false;
}

/* Prints the outlined bodies of the parallel loops in list s, noting them
 * in pl (the calls find their number there). */
static void print_outlined_list(Printer *p, ParList *pl, const LirStmt *s) {
  for (; s; s = s->next) {
    LirCapture c;
    if (s->kind == LS_FOR && outlines(p, s, &c)) {
      const LirStmt **grown = pl->n < pl->cap ? pl->loop
                              : realloc(pl->loop, (size_t)(pl->cap = 2 * pl->cap + 4) * sizeof *grown);
      if (grown) {
        pl->loop = grown;
        pl->loop[pl->n] = s;
        p->serial = true;   /* nested parallel loops run inside it, serially */
        print_outlined(p, s, pl->n++, &c);
        p->serial = false;
      }
      lir_capture_free(&c);
      continue;
    }
    switch (s->kind) {
    case LS_FOR: print_outlined_list(p, pl, s->u.loop.body); break;
    case LS_WHILE: print_outlined_list(p, pl, s->u.whl.body); break;
    case LS_IF:
      print_outlined_list(p, pl, s->u.cond.then);
      print_outlined_list(p, pl, s->u.cond.els);
      break;
    case LS_BLOCK: print_outlined_list(p, pl, s->u.block); break;
    default: break;
    }
  }
}

/* For an outlined loop s:
 *   { struct K_parN tj_cN = {.operands = operands, .v = v, ...};
 *     tj_rt_parallel_for_sched(lo, hi, balance, width, leaves, width,
 *                              strategy, K_parN, &tj_cN); }
 * over trip numbers [0, trips) with tj_lo and tj_step in the struct when
 * the step is not 1. False (printing nothing) for any other loop. */
static bool print_par_call(Printer *p, const LirStmt *s, int ind) {
  const ParList *pl = p->pars;
  int n = 0;
  while (pl && n < pl->n && pl->loop[n] != s) n++;
  LirCapture c;
  if (!pl || n == pl->n || !outlines(p, s, &c)) return false;
  FILE *f = p->out;
  const char *kn = p->k->name;
  const LoopAttrs *at = &s->u.loop.at;
  bool unit = unit_step(s);
  indent(p, ind);
  fprintf(f, "/* parallel%s%s%s: the body is %s_par%d */\n", at->schedule ? "(" : "",
          at->schedule ? cin_strategy_name(at->schedule) : "", at->schedule ? ")" : "", kn, n);
  indent(p, ind);
  fputs("{\n", f);
  if (!unit) {
    indent(p, ind + 1);
    fputs("int64_t tj_lo = ", f);
    print_expr(p, s->u.loop.lo, P_COND);
    fputs(", tj_step = ", f);
    print_expr(p, s->u.loop.step, P_COND);
    fputs(", tj_hi = ", f);
    print_expr(p, s->u.loop.hi, P_COND);
    fputs(";\n", f);
  }
  indent(p, ind + 1);
  fprintf(f, "struct %s_par%d tj_c%d = {.operands = operands", kn, n, n);
  if (!unit) fputs(", .tj_lo = tj_lo, .tj_step = tj_step", f);
  for (int i = 0; i < c.n; i++) {
    fputs(",\n", f);
    indent(p, ind + 3);
    fprintf(f, ".%s = %s", c.vars[i]->name, c.vars[i]->name);
  }
  fputs("};\n", f);
  indent(p, ind + 1);
  fputs("tj_rt_parallel_for_sched(", f);
  if (unit) {
    print_expr(p, s->u.loop.lo, P_COND);
    fputs(", ", f);
    print_expr(p, s->u.loop.hi, P_COND);
  } else {
    fputs("0, tj_hi > tj_lo ? (tj_hi - tj_lo + tj_step - 1) / tj_step : 0", f);
  }
  const LirExpr *w[2] = {unit ? at->balance : NULL, unit && at->balance ? at->leaves : NULL};
  for (int i = 0; i < 2; i++) {
    if (!w[i]) {
      fputs(", 0, 0", f);
      continue;
    }
    fputs(", ", f);
    print_expr(p, w[i], P_COND);
    fputs(", (int32_t)sizeof *", f);
    print_expr(p, w[i], P_UNARY);
  }
  fprintf(f, ", %s%s, %s_par%d, &tj_c%d);\n", strategy_c(at->schedule),
          lir_par_light(s) ? " | TJ_PAR_LIGHT" : "", kn, n, n);
  indent(p, ind);
  fputs("}\n", f);
  lir_capture_free(&c);
  return true;
}

static void print_prologue(Printer *p, const Uses *body, const Uses *clean) {
  const LirKernel *k = p->k;
  for (int i = 0; i < k->noperands && i < LIR_MAX_OPERANDS; i++)
    if (body->ops[i] || clean->ops[i])
      fprintf(p->out, "  tj_storage *%s = operands[%d];\n", p->opname[i], i);
  fputs("  int32_t rc = 0;\n", p->out);
  for (const LirStmt *s = k->body; s; s = s->next) {
    if (s->kind != LS_DECL || !clean->vars[s->u.decl.var->id]) continue;
    p->hoisted[s->u.decl.var->id] = 1;
    fputs("  ", p->out);
    print_decl_head(p, s->u.decl.var);
    fputs(" = 0;\n", p->out);
  }
}

void lir_print(FILE *out, const LirKernel *k, unsigned flags) {
  int n = k->nvars > 0 ? k->nvars : 1;
  char (*names)[48] = calloc(32, sizeof *names);
  unsigned char *hoisted = calloc((size_t)n, 1);
  unsigned char *bvars = calloc((size_t)n, 1), *cvars = calloc((size_t)n, 1);
  ParList pl = {0};
  if (!names || !hoisted || !bvars || !cvars) {
    fputs("/* lir_print: out of memory */\n", out);
    goto done;
  }
  Printer p = {out, k, names, hoisted, .parallel = flags & LIR_PRINT_PARALLEL};
  Uses body = {.vars = bvars}, clean = {.vars = cvars};
  uses_list(&body, k->body);
  uses_list(&clean, k->cleanup);
  name_operands(&p);
  if (flags & LIR_PRINT_HEADER)
    fputs("#include <math.h>\n#include <stdbool.h>\n#include <stdint.h>\n"
          "#include <string.h>\n\n#include \"runtime/abi.h\"\n\n", out);
  if (p.parallel) print_outlined_list(&p, &pl, k->body);
  p.pars = &pl;
  fprintf(out, "int32_t %s(tj_storage **operands) {\n", k->name);
  print_prologue(&p, &body, &clean);
  print_list(&p, k->body, 1, true);
  if (body.can_fail || clean.can_fail) fputs("fail:\n", out);
  p.serial = true;
  print_list(&p, k->cleanup, 1, false);
  fputs("  return rc;\n}\n", out);
done:
  free(pl.loop);
  free(names);
  free(hoisted);
  free(bvars);
  free(cvars);
}

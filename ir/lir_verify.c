/* The loop IR verifier: scoping and typing rules every consumer (the C
 * printer, the interpreter, the LLVM emitter) relies on.
 *
 * One walk over the kernel with a scope stack: a DECL puts its variable in
 * scope until the end of its statement list, a FOR puts its induction
 * variable in scope for its body, and cleanup sees the top-level body's
 * declarations (the printer hoists them). Every expression is checked
 * bottom-up against the types its constructor promised. The first
 * violation is reported as "loop IR: <what> in <statement>".
 */
#include "loop_ir.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct Verifier {
  const LirKernel *k;
  Diag *d;
  unsigned char *in_scope;  /* by LirVar id */
  int *stack, sp;           /* variables declared in the open scopes */
  char where[128];          /* the statement being checked */
  bool in_cleanup;
} Verifier;

static const char *tname(LirType t) {
  static const char *n[] = {
      [LT_VOID] = "void", [LT_BOOL] = "bool", [LT_I8] = "i8", [LT_I16] = "i16",
      [LT_I32] = "i32", [LT_I64] = "i64", [LT_U8] = "u8", [LT_U16] = "u16",
      [LT_U32] = "u32", [LT_U64] = "u64", [LT_F32] = "f32", [LT_F64] = "f64",
      [LT_PTR_I8] = "i8*", [LT_PTR_I16] = "i16*", [LT_PTR_I32] = "i32*",
      [LT_PTR_I64] = "i64*", [LT_PTR_U8] = "u8*", [LT_PTR_U16] = "u16*",
      [LT_PTR_U32] = "u32*", [LT_PTR_U64] = "u64*", [LT_PTR_F32] = "f32*",
      [LT_PTR_F64] = "f64*", [LT_PTR_BOOL] = "bool*"};
  return t >= LT_VOID && t <= LT_PTR_BOOL ? n[t] : "?";
}

static bool fail(Verifier *v, const char *what) {
  return diag_error(v->d, TJ_ERR_INTERNAL, "loop IR: %s in %s", what,
                    v->where);
}

static bool failf(Verifier *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static bool failf(Verifier *v, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return fail(v, buf);
}

static const char *opn(const LirKernel *k, int op) {
  return k->operands[op].name ? k->operands[op].name : "?";
}

static bool is_num(LirType t) { return lir_type_is_int(t) || lir_type_is_float(t); }
static bool is_scalar(LirType t) { return t == LT_BOOL || is_num(t); }

static bool check_var(Verifier *v, const LirVar *x) {
  if (!x) return fail(v, "missing variable");
  if (x->id < 0 || x->id >= v->k->nvars)
    return failf(v, "variable '%s' has an id outside the kernel's variables",
                 x->name ? x->name : "?");
  if (!v->in_scope[x->id])
    return failf(v, "variable '%s' used outside its scope", x->name);
  return true;
}

static bool check_expr(Verifier *v, const LirExpr *e);

static bool expect(Verifier *v, const LirExpr *e, LirType t, const char *what) {
  if (!check_expr(v, e)) return false;
  if (e->type != t)
    return failf(v, "%s has type %s, expected %s", what, tname(e->type),
                 tname(t));
  return true;
}

static bool expect_int(Verifier *v, const LirExpr *e, const char *what) {
  if (!check_expr(v, e)) return false;
  if (!lir_type_is_int(e->type))
    return failf(v, "%s has type %s, expected an integer", what,
                 tname(e->type));
  return true;
}

static bool check_field(Verifier *v, const LirExpr *e) {
  const LirKernel *k = v->k;
  int op = e->u.field.operand, lvl = e->u.field.level;
  if (op < 0 || op >= k->noperands)
    return fail(v, "field of an operand index outside the kernel's operands");
  int order = k->operands[op].order;
  bool needs_lvl = e->u.field.field != LF_VALS && e->u.field.field != LF_VALS_LEN;
  if (needs_lvl && (lvl < 0 || lvl >= order))
    return failf(v, "field of operand '%s' names a level outside its order",
                 opn(k, op));
  if (e->type != lir_field_type(k, op, e->u.field.field))
    return failf(v, "field of operand '%s' has type %s, expected %s",
                 opn(k, op), tname(e->type),
                 tname(lir_field_type(k, op, e->u.field.field)));
  return true;
}

static bool check_bin(Verifier *v, const LirExpr *e) {
  const LirExpr *a = e->u.bin.a, *b = e->u.bin.b;
  LirBinOp op = e->u.bin.op;
  if (!check_expr(v, a) || !check_expr(v, b)) return false;
  if (a->type != b->type)
    return failf(v, "type mismatch in '%s': %s vs %s", lir_bin_name(op), tname(a->type),
                 tname(b->type));
  LirType t = a->type;
  bool ok = op == LOP_REM                ? lir_type_is_int(t)
            : op == LOP_POW                 ? lir_type_is_float(t)
            : op == LOP_AND || op == LOP_OR ? t == LT_BOOL
            : op == LOP_EQ || op == LOP_NE  ? is_scalar(t)
                                             : is_num(t);
  if (!ok)
    return failf(v, "operator '%s' does not apply to %s", lir_bin_name(op), tname(t));
  LirType want = op >= LOP_LT ? LT_BOOL : t;
  if (e->type != want)
    return failf(v, "'%s' has type %s, expected %s", lir_bin_name(op), tname(e->type),
                 tname(want));
  return true;
}

static bool check_un(Verifier *v, const LirExpr *e) {
  const LirExpr *a = e->u.un.a;
  LirUnOp op = e->u.un.op;
  if (!check_expr(v, a)) return false;
  bool ok = op == LUN_NOT                   ? a->type == LT_BOOL
            : op == LUN_NEG || op == LUN_ABS ? is_num(a->type)
                                             : lir_type_is_float(a->type);
  if (!ok)
    return failf(v, "operator '%s' does not apply to %s", lir_un_name(op),
                 tname(a->type));
  if (e->type != (op == LUN_NOT ? LT_BOOL : a->type))
    return failf(v, "'%s' has the wrong result type %s", lir_un_name(op),
                 tname(e->type));
  return true;
}

static bool check_expr(Verifier *v, const LirExpr *e) {
  if (!e) return fail(v, "missing expression");
  switch (e->kind) {
  case LE_CONST:
    if (is_scalar(e->type)) return true;
    if (lir_type_is_ptr(e->type) && e->u.c.i == 0) return true;
    return failf(v, "constant of type %s", tname(e->type));
  case LE_VAR:
    if (!check_var(v, e->u.var)) return false;
    if (e->type != e->u.var->type)
      return failf(v, "reference to '%s' has type %s, expected %s",
                   e->u.var->name, tname(e->type), tname(e->u.var->type));
    return true;
  case LE_FIELD: return check_field(v, e);
  case LE_LOAD:
    if (!check_expr(v, e->u.load.ptr)) return false;
    if (!lir_type_is_ptr(e->u.load.ptr->type))
      return failf(v, "load through %s, which is not a pointer",
                   tname(e->u.load.ptr->type));
    if (e->type != lir_elem_type(e->u.load.ptr->type))
      return fail(v, "load result type differs from the element type");
    return expect_int(v, e->u.load.idx, "load index");
  case LE_BIN: return check_bin(v, e);
  case LE_UN: return check_un(v, e);
  case LE_CAST:
    if (!check_expr(v, e->u.cast)) return false;
    if (!is_scalar(e->type) || !is_scalar(e->u.cast->type))
      return failf(v, "cast from %s to %s", tname(e->u.cast->type),
                   tname(e->type));
    return true;
  case LE_SELECT:
    if (!expect(v, e->u.sel.cond, LT_BOOL, "select condition")) return false;
    if (!check_expr(v, e->u.sel.a) || !check_expr(v, e->u.sel.b)) return false;
    if (e->u.sel.a->type != e->u.sel.b->type || e->type != e->u.sel.a->type)
      return failf(v, "type mismatch in select: %s vs %s",
                   tname(e->u.sel.a->type), tname(e->u.sel.b->type));
    return true;
  }
  return fail(v, "unknown expression kind");
}

/* An update `x op= e` needs an operator with a result of x's type. */
static bool check_update(Verifier *v, int op, LirType t, const LirExpr *e) {
  if (!check_expr(v, e)) return false;
  if (op >= LOP_LT && op != LOP_AND && op != LOP_OR)
    return fail(v, "a comparison used as an update operator");
  if (op > LOP_OR || op < -1) return fail(v, "unknown update operator");
  if (e->type != t)
    return failf(v, "value of type %s assigned to %s", tname(e->type),
                 tname(t));
  if (op < 0) return true;
  LirExpr x = {.kind = LE_CONST, .type = t};
  LirExpr b = {.kind = LE_BIN, .type = op >= LOP_LT ? LT_BOOL : t};
  b.u.bin.op = op, b.u.bin.a = &x, b.u.bin.b = (LirExpr *)e;
  return check_bin(v, &b);
}

typedef struct Only {
  const LirVar *x, *y;
} Only;

static LirVisit other_read(const LirExpr *e, void *cx) {
  const Only *o = cx;
  bool ok = e->kind == LE_CONST || (e->kind == LE_VAR && (e->u.var == o->x || e->u.var == o->y)) ||
            e->kind == LE_BIN || e->kind == LE_UN || e->kind == LE_CAST || e->kind == LE_SELECT;
  return ok ? LV_DESCEND : LV_STOP;
}

/* Whether e reads only the variables x and y, and constants. */
static bool reads_only(const LirExpr *e, const LirVar *x, const LirVar *y) {
  Only o = {x, y};
  return !lir_expr_walk(e, other_read, &o);
}

/* A fold (lir_fold): '=', its operand a variable of the same type, its
 * identity a constant, its value over the two alone. */
static bool check_fold(Verifier *v, const LirStmt *s) {
  const LirVar *x = s->u.assign.var, *w = s->u.assign.with;
  const LirExpr *id = s->u.assign.identity;
  if (s->u.assign.op != -1 || !check_var(v, w) || w->type != x->type || !id ||
      id->kind != LE_CONST || id->type != x->type)
    return failf(v, "fold into %s: '=' of a same-typed operand with a constant identity",
                 x->name);
  if (!reads_only(s->u.assign.e, x, w))
    return failf(v, "fold into %s reads more than %s and %s", x->name, x->name, w->name);
  return true;
}

static void declare(Verifier *v, const LirVar *x) {
  v->in_scope[x->id] = 1;
  v->stack[v->sp++] = x->id;
}

static void close_scope(Verifier *v, int sp0) {
  while (v->sp > sp0) v->in_scope[v->stack[--v->sp]] = 0;
}

static bool check_new_var(Verifier *v, const LirVar *x) {
  if (!x) return fail(v, "missing variable");
  if (x->id < 0 || x->id >= v->k->nvars)
    return failf(v, "variable '%s' has an id outside the kernel's variables",
                 x->name ? x->name : "?");
  if (v->in_scope[x->id])
    return failf(v, "variable '%s' declared again while in scope", x->name);
  if (x->type == LT_VOID)
    return failf(v, "variable '%s' has type void", x->name);
  return true;
}

static bool check_list(Verifier *v, const LirStmt *s);

static bool check_call(Verifier *v, const LirStmt *s) {
  const LirKernel *k = v->k;
  LirHelper h = s->u.call.h;
  if (v->in_cleanup && (h == LH_RESERVE || h == LH_ALLOC || h == LH_GETT))
    return diag_error(v->d, TJ_ERR_INTERNAL,
                      "loop IR: %s in cleanup, which has no fail exit",
                      v->where);
  if (h == LH_RESERVE) {
    int op = s->u.call.operand, arr = s->u.call.arr;
    if (op < 0 || op >= k->noperands)
      return fail(v, "reserve on an operand outside the kernel's operands");
    if (arr < 0 || arr > 2) return fail(v, "reserve of an unknown array");
    if (arr != 2 && (s->u.call.level < 0 ||
                     s->u.call.level >= k->operands[op].order))
      return failf(v, "reserve names a level outside the order of '%s'",
                   opn(k, op));
    return expect_int(v, s->u.call.a, "reserve size");
  }
  if (h == LH_GETT) {
    const int32_t *w = s->u.call.plan;
    if (!w) return fail(v, "gett without a plan");
    for (int x = 3; x <= 4; x++)   /* the operands A and B (TJ_GP_A, TJ_GP_B) */
      if (w[x] < 1 || w[x] >= k->noperands)
        return fail(v, "gett names an operand outside the kernel's operands");
    return true;
  }
  if (!check_var(v, s->u.call.ptr)) return false;
  LirType pt = s->u.call.ptr->type;
  if (h == LH_THREADS || h == LH_THREAD_SLOT) {
    if (pt != LT_I64) return failf(v, "thread count or slot into '%s' of type %s",
                                   s->u.call.ptr->name, tname(pt));
    return h == LH_THREADS || expect_int(v, s->u.call.a, "thread slot count");
  }
  if (!lir_type_is_ptr(pt))
    return failf(v, "helper pointer '%s' has type %s", s->u.call.ptr->name,
                 tname(pt));
  switch (h) {
  case LH_ALLOC: return expect_int(v, s->u.call.a, "allocation size");
  case LH_FREE: return true;
  case LH_SORT_CRD:
    if (!lir_type_is_int(lir_elem_type(pt)))
      return fail(v, "sort of a non-integer array");
    return expect_int(v, s->u.call.a, "sort range start") &&
           expect_int(v, s->u.call.b, "sort range end");
  case LH_MARKED_CRD:
    if (!lir_type_is_int(lir_elem_type(pt)))
      return fail(v, "marked coordinates into a non-integer array");
    if (!check_var(v, s->u.call.mark) || !check_var(v, s->u.call.ret)) return false;
    if (s->u.call.mark->type != LT_PTR_BOOL || s->u.call.ret->type != LT_I64)
      return fail(v, "marked coordinates need bool marks and an i64 count");
    return expect_int(v, s->u.call.a, "marked coordinates' start") &&
           expect_int(v, s->u.call.b, "marked words");
  case LH_ZERO:
    return expect_int(v, s->u.call.a, "zero range start") &&
           expect_int(v, s->u.call.b, "zero range end");
  default: return fail(v, "unknown helper");
  }
}

static bool check_setfield(Verifier *v, const LirStmt *s) {
  LirField f = s->u.setfield.field;
  int op = s->u.setfield.operand;
  if (op < 0 || op >= v->k->noperands)
    return fail(v, "setfield on an operand outside the kernel's operands");
  if (f != LF_POS_LEN && f != LF_CRD_LEN && f != LF_VALS_LEN)
    return fail(v, "setfield of a field that is not a length");
  if (f != LF_VALS_LEN && (s->u.setfield.level < 0 ||
                           s->u.setfield.level >= v->k->operands[op].order))
    return fail(v, "setfield names a level outside the operand's order");
  return expect(v, s->u.setfield.e, LT_I64, "length");
}

static bool check_for(Verifier *v, const LirStmt *s) {
  const LirVar *iv = s->u.loop.iv;
  if (!check_new_var(v, iv)) return false;
  if (!lir_type_is_int(iv->type))
    return failf(v, "induction variable '%s' has type %s", iv->name,
                 tname(iv->type));
  if (!expect(v, s->u.loop.lo, iv->type, "lower bound") ||
      !expect(v, s->u.loop.hi, iv->type, "upper bound") ||
      !expect(v, s->u.loop.step, iv->type, "step"))
    return false;
  int sp0 = v->sp;
  declare(v, iv);
  bool ok = check_list(v, s->u.loop.body);
  close_scope(v, sp0);
  return ok;
}

/* A nested statement list checked as its own scope. */
static bool check_scope(Verifier *v, const LirStmt *s) {
  int sp0 = v->sp;
  bool ok = check_list(v, s);
  close_scope(v, sp0);
  return ok;
}

static void describe(Verifier *v, const LirStmt *s) {
  static const char *helper[] = {"tj_rt_reserve", "tj_rt_alloc", "tj_rt_free",
                                 "tj_rt_sort_crd", "zero", "tj_rt_gett",
                                 "tj_rt_threads", "tj_rt_thread_slot", "tj_rt_marked_crd"};
  const char *vn = NULL;
  switch (s->kind) {
  case LS_DECL: vn = s->u.decl.var ? s->u.decl.var->name : "?";
    snprintf(v->where, sizeof v->where, "declaration of '%s'", vn); break;
  case LS_ASSIGN: vn = s->u.assign.var ? s->u.assign.var->name : "?";
    snprintf(v->where, sizeof v->where, "assignment to '%s'", vn); break;
  case LS_FOR: vn = s->u.loop.iv ? s->u.loop.iv->name : "?";
    snprintf(v->where, sizeof v->where, "for loop over '%s'", vn); break;
  case LS_CALL:
    snprintf(v->where, sizeof v->where, "call of %s",
             s->u.call.h <= LH_MARKED_CRD ? helper[s->u.call.h] : "?");
    break;
  default: {
    static const char *kind[] = {"", "", "store", "setfield", "",
                                 "while loop", "if", "", "block", "comment", "prefetch"};
    snprintf(v->where, sizeof v->where, "%s", kind[s->kind]);
  }
  }
}

static bool check_stmt(Verifier *v, const LirStmt *s) {
  describe(v, s);
  switch (s->kind) {
  case LS_DECL:
    if (!check_new_var(v, s->u.decl.var)) return false;
    if (s->u.decl.init &&
        !expect(v, s->u.decl.init, s->u.decl.var->type, "initializer"))
      return false;
    declare(v, s->u.decl.var);
    return true;
  case LS_ASSIGN:
    if (s->u.assign.with && !check_fold(v, s)) return false;
    return check_var(v, s->u.assign.var) &&
           check_update(v, s->u.assign.op, s->u.assign.var->type,
                        s->u.assign.e);
  case LS_STORE:
    if (!check_expr(v, s->u.store.ptr)) return false;
    if (!lir_type_is_ptr(s->u.store.ptr->type))
      return failf(v, "store through %s, which is not a pointer",
                   tname(s->u.store.ptr->type));
    if (s->u.store.old && (!s->u.store.atomic || s->u.store.op >= 0 ||
                           s->u.store.old->type != lir_elem_type(s->u.store.ptr->type) ||
                           !check_var(v, s->u.store.old)))
      return failf(v, "store's old value %s: an atomic plain store of its element type, "
                   "declared in scope", s->u.store.old->name);
    return expect_int(v, s->u.store.idx, "store index") &&
           check_update(v, s->u.store.op, lir_elem_type(s->u.store.ptr->type),
                        s->u.store.e);
  case LS_SETFIELD: return check_setfield(v, s);
  case LS_FOR: return check_for(v, s);
  case LS_WHILE:
    return expect(v, s->u.whl.cond, LT_BOOL, "condition") &&
           check_scope(v, s->u.whl.body);
  case LS_IF:
    return expect(v, s->u.cond.cond, LT_BOOL, "condition") &&
           check_scope(v, s->u.cond.then) && check_scope(v, s->u.cond.els);
  case LS_CALL: return check_call(v, s);
  case LS_BLOCK: return check_scope(v, s->u.block);
  case LS_PREFETCH:
    if (!check_expr(v, s->u.prefetch.ptr)) return false;
    if (!lir_type_is_ptr(s->u.prefetch.ptr->type))
      return failf(v, "prefetch through %s, which is not a pointer",
                   tname(s->u.prefetch.ptr->type));
    return expect_int(v, s->u.prefetch.idx, "prefetch index");
  case LS_COMMENT:
    if (s->u.comment && strstr(s->u.comment, "*/"))
      return fail(v, "comment text containing '*/'");
    return true;
  }
  return fail(v, "unknown statement kind");
}

static bool check_list(Verifier *v, const LirStmt *s) {
  for (; s; s = s->next)
    if (!check_stmt(v, s)) return false;
  return true;
}

/* Names must be C identifiers that the printer does not use itself. */
static bool check_names(Verifier *v, const LirStmt *s);

static bool check_name(Verifier *v, const LirVar *x) {
  const char *n = x ? x->name : NULL;
  bool ok = n && *n && !(*n >= '0' && *n <= '9');
  for (const char *c = n; ok && *c; c++)
    ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
         (*c >= '0' && *c <= '9') || *c == '_';
  if (!ok)
    return failf(v, "variable name '%s' is not a C identifier",
                 n ? n : "(null)");
  if (!strcmp(n, "rc") || !strcmp(n, "operands") || !strcmp(n, "fail"))
    return failf(v, "variable name '%s' is reserved by the C printer", n);
  for (int i = 0; i < v->k->noperands; i++)
    if (v->k->operands[i].name && !strcmp(n, v->k->operands[i].name))
      return failf(v, "variable name '%s' is also an operand's name", n);
  return true;
}

static bool check_names(Verifier *v, const LirStmt *s) {
  for (; s; s = s->next) {
    describe(v, s);
    switch (s->kind) {
    case LS_DECL: if (!check_name(v, s->u.decl.var)) return false; break;
    case LS_FOR:
      if (!check_name(v, s->u.loop.iv) || !check_names(v, s->u.loop.body))
        return false;
      break;
    case LS_WHILE: if (!check_names(v, s->u.whl.body)) return false; break;
    case LS_IF:
      if (!check_names(v, s->u.cond.then) || !check_names(v, s->u.cond.els))
        return false;
      break;
    case LS_BLOCK: if (!check_names(v, s->u.block)) return false; break;
    default: break;
    }
  }
  return true;
}

bool lir_verify(const LirKernel *k, Diag *d) {
  int n = k->nvars > 0 ? k->nvars : 1;
  Verifier v = {.k = k, .d = d};
  snprintf(v.where, sizeof v.where, "kernel '%s'", k->name ? k->name : "?");
  if (k->noperands < 0 || k->noperands > LIR_MAX_OPERANDS)
    return diag_error(d, TJ_ERR_INTERNAL, "loop IR: kernel '%s' has %d operands",
                      k->name ? k->name : "?", k->noperands);
  v.in_scope = calloc((size_t)n, 1);
  v.stack = calloc((size_t)n, sizeof *v.stack);
  bool ok = false;
  if (!v.in_scope || !v.stack) {
    diag_error(d, TJ_ERR_NOMEM, "loop IR: out of memory while verifying");
    goto done;
  }
  if (!check_names(&v, k->body) || !check_names(&v, k->cleanup)) goto done;
  if (!check_list(&v, k->body)) goto done;
  close_scope(&v, 0);
  /* cleanup sees the top-level declarations (hoisted by the printer) */
  for (const LirStmt *s = k->body; s; s = s->next)
    if (s->kind == LS_DECL) declare(&v, s->u.decl.var);
  v.in_cleanup = true;
  ok = check_scope(&v, k->cleanup);
done:
  free(v.in_scope);
  free(v.stack);
  return ok;
}

/* The public expression builder: C calls that make the same index-notation
 * AST the parser makes (ir/notation.h constructors), without a string. A
 * built statement compiles through its printed form, which parses back to
 * the same AST (the printer's round-trip guarantee), so it shares the
 * string path's checking, messages and kernel cache entries.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

struct tj_builder {
  Arena arena;
  Assignment *as;
  Diag d;
  bool done;      /* tj_builder_assign succeeded */
};

tj_status tj_builder_new(tj_builder **out) {
  if (!out) return rt_set_error(TJ_ERR_INVALID, "tj_builder_new: out is NULL");
  tj_builder *b = calloc(1, sizeof *b);
  if (!b) return rt_set_error(TJ_ERR_NOMEM, "out of memory");
  arena_init(&b->arena);
  diag_init(&b->d);
  b->as = nt_assignment(&b->arena);
  if (!b->as) {
    free(b);
    return rt_set_error(TJ_ERR_NOMEM, "out of memory");
  }
  *out = b;
  return TJ_OK;
}

void tj_builder_free(tj_builder *b) {
  if (!b) return;
  arena_free(&b->arena);
  free(b);
}

static tj_expr *built(tj_builder *b, Expr *e) {
  if (!e) diag_error(&b->d, TJ_ERR_NOMEM, "builder: out of memory");
  return (tj_expr *)e;
}

static bool is_name(const char *s) {
  if (!s || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '_'))
      return false;
  return true;
}

tj_expr *tj_build_access(tj_builder *b, const char *tensor, int n, const char *const *indices) {
  if (!b) return NULL;
  if (!is_name(tensor))
    return diag_error(&b->d, TJ_ERR_INVALID, "builder: '%s' is not a tensor name",
                      tensor ? tensor : "(null)"), NULL;
  if (n < 0 || n > NT_MAX_ORDER || (n > 0 && !indices))
    return diag_error(&b->d, TJ_ERR_INVALID, "builder: %s accessed with %d indices", tensor, n),
           NULL;
  IndexVar *idx[NT_MAX_ORDER];
  for (int m = 0; m < n; m++) {
    if (!is_name(indices[m]))
      return diag_error(&b->d, TJ_ERR_INVALID, "builder: index %d of %s ('%s') is not a name",
                        m, tensor, indices[m] ? indices[m] : "(null)"), NULL;
    if (!(idx[m] = nt_index(&b->arena, b->as, indices[m])))
      return diag_error(&b->d, TJ_ERR_SHAPE, "builder: more than %d index variables "
                        "(NT_MAX_INDICES)", NT_MAX_INDICES), NULL;
  }
  TensorVar *t = nt_tensor(&b->arena, b->as, tensor);
  if (!t)
    return diag_error(&b->d, TJ_ERR_SHAPE, "builder: more than %d tensors (NT_MAX_TENSORS)",
                      NT_MAX_TENSORS), NULL;
  return built(b, nt_access(&b->arena, t, n, idx, 0));
}

tj_expr *tj_build_literal(tj_builder *b, double value) {
  if (!b) return NULL;
  return built(b, nt_literal(&b->arena, value, value == (double)(int64_t)value, 0));
}

tj_expr *tj_build_binary(tj_builder *b, char op, tj_expr *x, tj_expr *y) {
  if (!b || !x || !y) return NULL;
  OpKind k = nt_op_lookup(&op, 1, false);
  if (k == OP_NONE)
    return diag_error(&b->d, TJ_ERR_INVALID, "builder: '%c' is not an operator", op), NULL;
  return built(b, nt_op_node(&b->arena, k, (Expr *)x, (Expr *)y, 0));
}

tj_expr *tj_build_neg(tj_builder *b, tj_expr *x) {
  if (!b || !x) return NULL;
  return built(b, nt_op_node(&b->arena, OP_NEG, (Expr *)x, NULL, 0));
}

tj_expr *tj_build_call(tj_builder *b, const char *fn, tj_expr *x, tj_expr *y) {
  if (!b || !x || !fn) return NULL;
  OpKind f = nt_op_lookup(fn, (int)strlen(fn), true);
  if (f == OP_NONE)
    return diag_error(&b->d, TJ_ERR_INVALID, "builder: unknown function '%s'", fn), NULL;
  int arity = nt_op(f)->arity;
  if ((arity == 2) != (y != NULL))
    return diag_error(&b->d, TJ_ERR_INVALID, "builder: %s takes %d argument%s", fn, arity,
                      arity == 2 ? "s" : ""), NULL;
  return built(b, nt_op_node(&b->arena, f, (Expr *)x, (Expr *)y, 0));
}

const char *tj_function_name(int i) {
  for (int k = 0; k < OP_COUNT; k++)
    if (nt_op((OpKind)k)->is_call && *nt_op((OpKind)k)->spelling && i-- == 0)
      return nt_op((OpKind)k)->spelling;
  return NULL;
}

tj_expr *tj_build_sum(tj_builder *b, const char *index, tj_expr *x) {
  return tj_build_reduce(b, "+", index, x);
}

tj_expr *tj_build_reduce(tj_builder *b, const char *op, const char *index, tj_expr *x) {
  if (!b || !x || !op) return NULL;
  OpKind k = nt_op_lookup(op, (int)strlen(op), true);
  if (k == OP_NONE) k = nt_op_lookup(op, (int)strlen(op), false);
  if (k == OP_NONE || !nt_op_is_reduction(k))
    return diag_error(&b->d, TJ_ERR_INVALID, "builder: '%s' is not a reduction operator "
                      "(+ * min max or and)", op), NULL;
  if (!is_name(index))
    return diag_error(&b->d, TJ_ERR_INVALID, "builder: sum over '%s', which is not an index name",
                      index ? index : "(null)"), NULL;
  IndexVar *v = nt_index(&b->arena, b->as, index);
  if (!v) return diag_error(&b->d, TJ_ERR_SHAPE, "builder: too many index variables"), NULL;
  return built(b, nt_reduce(&b->arena, k, v, (Expr *)x, false, 0));
}

tj_status tj_builder_assign(tj_builder *b, tj_expr *lhs, tj_expr *rhs, int accumulate) {
  if (!b) return rt_set_error(TJ_ERR_INVALID, "tj_builder_assign: builder is NULL");
  if (!diag_ok(&b->d)) return drv_fail(&b->d);
  if (!lhs || !rhs) return rt_set_error(TJ_ERR_INVALID, "tj_builder_assign: NULL expression");
  if (((Expr *)lhs)->kind != EX_ACCESS)
    return rt_set_error(TJ_ERR_INVALID, "tj_builder_assign: the left side must be an access");
  b->as->lhs = (Expr *)lhs;
  b->as->rhs = (Expr *)rhs;
  b->as->accumulate = accumulate != 0;
  b->done = true;
  return TJ_OK;
}

/* The statement's text (malloc'd), or NULL with the error set. */
static char *statement_text(const tj_builder *b) {
  if (!b || !b->done) {
    rt_set_error(TJ_ERR_INVALID, "builder has no statement (call tj_builder_assign)");
    return NULL;
  }
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) {
    rt_set_error(TJ_ERR_NOMEM, "out of memory");
    return NULL;
  }
  nt_print(f, b->as);
  fclose(f);
  return buf;
}

tj_status tj_builder_print(const tj_builder *b, char *out, size_t n) {
  char *text = statement_text(b);
  if (!text) return TJ_ERR_INVALID;
  if (n) snprintf(out, n, "%s", text);
  free(text);
  return TJ_OK;
}

tj_status tj_compile_built(tj_context *cx, const tj_builder *b, tj_tensor *const *operands,
                           int n, const char *schedule, const tj_options *opts,
                           tj_kernel **out) {
  char *text = statement_text(b);
  if (!text) return TJ_ERR_INVALID;
  tj_status st = tj_compile(cx, text, operands, n, schedule, opts, out);
  free(text);
  return st;
}

/* Running compiled kernels: bind operands, check their shapes, convert the
 * operands the plan reads in another mode order, call the kernel through
 * the kernel ABI, turn its return code into a message. Also the reference
 * evaluation (dense, long double) the tests and the CLI compare against. */
#include <stdlib.h>
#include <string.h>

#include "../lower/lir_interp.h"
#include "driver.h"

/* Every index has one extent across the bound operands, and each operand
 * has the format and dtype the kernel was compiled for. */
static bool check_operands(const tj_kernel *k, tj_tensor **ops, Diag *d) {
  const Assignment *as = k->entry->as;
  int64_t ext[NT_MAX_INDICES];
  const char *who[NT_MAX_INDICES];
  for (int v = 0; v < as->nindices; v++) ext[v] = -1;
  for (int t = 0; t < as->ntensors; t++) {
    const TensorDecl *dc = &as->tensors[t]->decl;
    const tj_format *f = tj_tensor_format(ops[t]);
    if (tj_tensor_order(ops[t]) != dc->order || tj_tensor_dtype(ops[t]) != dc->dtype ||
        strcmp(f->levels, dc->format.levels) != 0 ||
        memcmp(f->mode_order, dc->format.mode_order, sizeof f->mode_order) != 0 ||
        f->pos_width != dc->format.pos_width || f->crd_width != dc->format.crd_width)
      return diag_error(d, TJ_ERR_FORMAT,
                        "operand %s does not have the order, format and dtype "
                        "the kernel was compiled for",
                        tj_tensor_name(ops[t]));
  }
  /* Extents by walking accesses of the binding's assignment. */
  const Assignment *bs = k->as;
  const Expr *stack[128];
  int top = 0;
  stack[top++] = bs->lhs;
  stack[top++] = bs->rhs;
  while (top) {
    const Expr *e = stack[--top];
    if (e->kind == EX_ACCESS) {
      for (int m = 0; m < e->u.access.n; m++) {
        int v = e->u.access.idx[m]->id;
        int64_t dim = tj_tensor_dim(ops[e->u.access.t->id], m);
        if (ext[v] < 0) {
          ext[v] = dim;
          who[v] = e->u.access.t->name;
        } else if (ext[v] != dim) {
          return diag_error(d, TJ_ERR_SHAPE,
                            "index %s has extent %lld in %s but %lld in %s",
                            e->u.access.idx[m]->name, (long long)ext[v], who[v],
                            (long long)dim, e->u.access.t->name);
        }
      }
    } else if (e->kind == EX_CALL) {
      stack[top++] = e->u.call.a;
      if (e->u.call.b) stack[top++] = e->u.call.b;
    } else if (e->kind != EX_LITERAL) {
      stack[top++] = e->u.bin.a;
      if (e->kind != EX_NEG) stack[top++] = e->u.bin.b;
    }
    if (top > 120) return diag_error(d, TJ_ERR_UNSUPPORTED, "expression too large to run");
  }
  return true;
}

static tj_status kernel_code(int32_t rc) {
  if (rc == TJ_KERNEL_NOMEM)
    return rt_set_error(TJ_ERR_NOMEM, "kernel ran out of memory growing its output");
  return rt_set_error(TJ_ERR_INTERNAL, "kernel returned error code %d", rc);
}

static tj_status run(tj_kernel *k, tj_phase phase, tj_tensor *const *operands,
                     int n, bool interpret) {
  if (!k || phase < TJ_ASSEMBLE || phase > TJ_EVALUATE)
    return rt_set_error(TJ_ERR_INVALID, "tj_kernel_run: bad kernel or phase");
  Diag d;
  diag_init(&d);
  tj_tensor *ops[NT_MAX_TENSORS];
  if (operands) {
    if (!drv_bind(k->as, operands, n, ops, &d)) return drv_fail(&d);
  } else {
    memcpy(ops, k->bound, sizeof ops);
  }
  if (!check_operands(k, ops, &d)) return drv_fail(&d);
  CacheEntry *e = k->entry;
  LowerPhase ph = phase == TJ_ASSEMBLE ? PHASE_ASSEMBLE
                  : phase == TJ_COMPUTE ? PHASE_COMPUTE : PHASE_EVALUATE;
  if (!interpret && !drv_ensure_compiled(e, ph, &d)) return drv_fail(&d);
  if (interpret && !drv_ensure_lowered(e, ph, &d)) return drv_fail(&d);
  tj_tensor *tmp[NT_MAX_TENSORS] = {0};
  tj_storage *st[NT_MAX_TENSORS];
  tj_status status = TJ_OK;
  for (int t = 0; t < e->as->ntensors && status == TJ_OK; t++) {
    if (e->plan.convert[t]) {
      status = tj_tensor_convert(ops[t], &e->plan.fmt[t], &tmp[t]);
      if (status == TJ_OK) st[t] = rt_tensor_storage(tmp[t]);
    } else {
      st[t] = rt_tensor_storage(ops[t]);
    }
  }
  if (status == TJ_OK) {
    tj_rt_set_threads(k->opts.nthreads);
    int32_t rc = interpret ? lir_interp(e->lir[ph], st, &d) : e->jk[ph].fn(st);
    if (!diag_ok(&d)) status = drv_fail(&d);
    else if (rc != 0) status = kernel_code(rc);
  }
  for (int t = 0; t < NT_MAX_TENSORS; t++) tj_tensor_free(tmp[t]);
  return status;
}

tj_status tj_kernel_run(tj_kernel *k, tj_phase phase, tj_tensor *const *operands, int n) {
  return run(k, phase, operands, n, false);
}

tj_status drv_kernel_interpret(tj_kernel *k, tj_phase phase, tj_tensor *const *operands,
                               int n) {
  return run(k, phase, operands, n, true);
}

tj_status tj_reference(const char *expr, tj_tensor *const *operands, int n) {
  if (!expr || (n > 0 && !operands))
    return rt_set_error(TJ_ERR_INVALID, "tj_reference: NULL argument");
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  TensorDecl decls[NT_MAX_TENSORS];
  int nd = 0;
  for (int k = 0; k < n && nd < NT_MAX_TENSORS; k++) {
    if (!operands[k]) continue;
    TensorDecl *dc = &decls[nd++];
    memset(dc, 0, sizeof *dc);
    dc->name = tj_tensor_name(operands[k]);
    dc->order = tj_tensor_order(operands[k]);
    for (int m = 0; m < dc->order; m++) dc->dims[m] = tj_tensor_dim(operands[k], m);
    dc->dtype = tj_tensor_dtype(operands[k]);
    dc->format = *tj_tensor_format(operands[k]);
  }
  double *dense[NT_MAX_TENSORS] = {0};
  tj_tensor *ops[NT_MAX_TENSORS];
  tj_status st = TJ_OK;
  Assignment *as = nt_parse(&a, expr, &d);
  if (!as || !nt_check(&a, as, decls, nd, NULL, 0, &d) ||
      !drv_bind(as, operands, n, ops, &d)) {
    st = drv_fail(&d);
    goto done;
  }
  for (int t = 0; t < as->ntensors && st == TJ_OK; t++) {
    int64_t size = 1;
    for (int m = 0; m < tj_tensor_order(ops[t]); m++) size *= tj_tensor_dim(ops[t], m);
    dense[t] = calloc((size_t)(size ? size : 1), sizeof(double));
    if (!dense[t]) st = rt_set_error(TJ_ERR_NOMEM, "reference: %s is too large to densify",
                                     tj_tensor_name(ops[t]));
    else if (t > 0 || as->accumulate) st = rt_tensor_to_dense(ops[t], dense[t]);
  }
  if (st == TJ_OK && !nt_ref_eval(as, dense, &d)) st = drv_fail(&d);
  if (st == TJ_OK) st = rt_tensor_from_dense(ops[0], dense[0]);
done:
  for (int t = 0; t < NT_MAX_TENSORS; t++) free(dense[t]);
  arena_free(&a);
  return st;
}

/* Kernel assembly around the loops: operand arrays and dims read once at
 * entry; the output prepared (dense: sized and zeroed; sparse: counters and
 * first capacity); workspaces allocated and freed in the cleanup path; the
 * output's lengths and position fix-ups written at the end. Three phases
 * share one emitter: assemble writes pos/crd only, compute writes vals into
 * an assembled output (walking the same positions), evaluate does both.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lowerer.h"

/* Doubles the name table (arena memory; on failure a->failed is set and
 * the lowering fails at its end). */
static bool grow_names(Lowerer *lw) {
  int cap = lw->names_cap ? 2 * lw->names_cap : 256;
  const char **names = arena_alloc(lw->a, sizeof *names * (size_t)cap);
  int *uses = arena_alloc(lw->a, sizeof *uses * (size_t)cap);
  if (!names || !uses) return false;
  if (lw->nnames) {
    memcpy(names, lw->names, sizeof *names * (size_t)lw->nnames);
    memcpy(uses, lw->name_uses, sizeof *uses * (size_t)lw->nnames);
  }
  lw->names = names;
  lw->name_uses = uses;
  lw->names_cap = cap;
  return true;
}

static int name_index(const Lowerer *lw, const char *name) {
  for (int i = 0; i < lw->nnames; i++)
    if (strcmp(lw->names[i], name) == 0) return i;
  return -1;
}

/* Registers name as taken (a copy); false when out of memory. */
static bool take_name(Lowerer *lw, const char *name) {
  if (lw->nnames >= lw->names_cap && !grow_names(lw)) return false;
  lw->names[lw->nnames] = arena_strdup(lw->a, name);
  lw->name_uses[lw->nnames++] = 0;
  return true;
}

/* base, or base_1, base_2, ...: never a name given before, generated ones
 * included (base "px0_2" after px0, px0_1, px0_2 had made two variables
 * px0_2, and the C rendering's `for (int64_t px0_2 = px0_2; ...)` read
 * itself). */
const char *lw_name(Lowerer *lw, const char *base) {
  int i = name_index(lw, base);
  if (i < 0) {
    take_name(lw, base);
    return arena_strdup(lw->a, base);
  }
  for (;;) {
    const char *c = arena_printf(lw->a, "%s_%d", base, ++lw->name_uses[i]);
    if (!c || name_index(lw, c) < 0) {
      if (c) take_name(lw, c);
      return c;
    }
  }
}

LirVar *lw_var(Lowerer *lw, const char *base, LirType t) {
  return lir_var(lw->a, lw->k, lw_name(lw, base), t);
}

LirExpr *lw_i64(Lowerer *lw, int64_t v) { return lir_const_int(lw->a, LT_I64, v); }
LirExpr *lw_ref(Lowerer *lw, LirVar *v) { return lir_ref(lw->a, v); }

LirExpr *lw_load_index(Lowerer *lw, LirVar *arr, LirExpr *idx) {
  return lir_cast(lw->a, LT_I64, lir_load(lw->a, lir_ref(lw->a, arr), idx));
}

LirStmt *lw_store_index(Lowerer *lw, LirVar *arr, LirExpr *idx, LirExpr *v) {
  return lir_store(lw->a, lir_ref(lw->a, arr), idx,
                   lir_cast(lw->a, lir_elem_type(arr->type), v));
}

/* Size of level l of access x: the dim that level stores. */
LirExpr *lw_level_size(Lowerer *lw, int x, int l) {
  const Access *ac = &lw->acc[x];
  if (lw->lvl_size[ac->t][l]) return lw_ref(lw, lw->lvl_size[ac->t][l]);   /* a slice's base */
  if (lw->ranged && lw->plan->rangeable && x == 0 && l == 0)
    return lir_bin(lw->a, LOP_SUB, lw_ref(lw, lw->range_hi), lw_ref(lw, lw->range_lo));
  /* A level indexed by a bound(i, ..., n) loop has size n: every run checks
   * that i's extent is n, and a constant lets LLVM fold the addressing of
   * small dense blocks (BSR's). */
  const IndexVar *v = ac->e->u.access.idx[ac->f->mode_order[l]];
  for (int k = 0; k < lw->nest.nloops; k++)
    if (lw->nest.order[k] == v && lw->nest.form[k] &&
        lw->nest.form[k]->bound_kind == BOUND_MAX_EXACT)
      return lw_i64(lw, lw->nest.form[k]->bound);
  return lw_ref(lw, lw->dim[ac->t][ac->f->mode_order[l]]);
}

LirExpr *lw_out_linear(Lowerer *lw) {
  const Access *ac = &lw->acc[0];
  LirExpr *p = NULL;
  for (int l = 0; l < ac->f->order; l++) {
    const IndexVar *v = ac->e->u.access.idx[ac->f->mode_order[l]];
    p = lw_locate(lw, 0, l, p, lw_ref(lw, lw->coord[v->id]));
  }
  return p ? p : lw_i64(lw, 0);
}

LirStmt *lw_reserve(Lowerer *lw, int arr, int level, LirExpr *need) {
  LirStmt *s = lir_call(lw->a, LH_RESERVE);
  s->u.call.operand = 0;
  s->u.call.arr = arr;
  s->u.call.level = level;
  s->u.call.a = need;
  return s;
}

/* lw_reserve; raw: the kernel writes the new space before it reads it,
 * so it is not zeroed (TJ_ARR_NOZERO). */
static LirStmt *reserve(Lowerer *lw, int arr, int level, LirExpr *need, bool raw) {
  LirStmt *s = lw_reserve(lw, arr, level, need);
  s->u.call.raw = raw;
  return s;
}

LirStmt *lw_reload(Lowerer *lw, LirVar *ptr, LirField f, int level) {
  return lir_assign(lw->a, ptr, lir_field(lw->a, lw->k, 0, f, level));
}

/* Emits: if (index >= cap) { cap = max(2 * cap, index + 1[, hint]);
 * reserve; reload the pointer }, for the output array `arr` of level l
 * (raw: the new space is not zeroed). */
static LirStmt *grow_if_full(Lowerer *lw, LirVar *cap, int arr, int l, LirExpr *index,
                             LirStmt *more, LirExpr *hint, bool raw) {
  Arena *a = lw->a;
  LirExpr *twice = lir_bin(a, LOP_MUL, lw_ref(lw, cap), lw_i64(lw, 2));
  LirExpr *ncap = lir_bin(a, LOP_MAX, twice, lir_bin(a, LOP_ADD, index, lw_i64(lw, 1)));
  if (hint) ncap = lir_bin(a, LOP_MAX, ncap, hint);
  LirStmt *grow = lir_assign(a, cap, ncap);
  lir_append(&grow, reserve(lw, arr, l, lw_ref(lw, cap), raw));
  if (arr == TJ_ARR_CRD) lir_append(&grow, lw_reload(lw, lw->crd_ptr[0][l], LF_CRD, l));
  else lir_append(&grow, lw_reload(lw, lw->pos_ptr[0][l], LF_POS, l));
  lir_append(&grow, more);
  return lir_if(a, lir_bin(a, LOP_GE, index, lw_ref(lw, cap)), grow, NULL);
}

/* Room for an output entry at index in level l (and its value). */
LirStmt *lw_ensure_out_cap(Lowerer *lw, int l, LirExpr *index) {
  return lw_ensure_out_room(lw, l, index, NULL, false);
}

LirStmt *lw_ensure_out_room(Lowerer *lw, int l, LirExpr *index, LirExpr *hint, bool raw) {
  if (lw->phase == PHASE_COMPUTE) return NULL;
  LirStmt *more = NULL;
  for (int k = lw_out_run_start(lw->acc[0].f, l); k < l; k++) { /* the run's crd grow together */
    lir_append(&more, reserve(lw, TJ_ARR_CRD, k, lw_ref(lw, lw->crd_cap[l]), raw));
    lir_append(&more, lw_reload(lw, lw->crd_ptr[0][k], LF_CRD, k));
  }
  if (l == lw->out_last && lw->emit_values) {
    lir_append(&more, reserve(lw, TJ_ARR_VALS, 0, lw_out_vals(lw, lw_ref(lw, lw->crd_cap[l])), raw));
    lir_append(&more, lw_reload(lw, lw->vals_ptr[0], LF_VALS, 0));
  }
  return grow_if_full(lw, lw->crd_cap[l], TJ_ARR_CRD, l, index, more, hint, raw);
}

/* Room for pos entry index of level l (a compressed level under a
 * compressed parent). */
LirStmt *lw_ensure_pos_cap(Lowerer *lw, int l, LirExpr *index) {
  if (lw->phase == PHASE_COMPUTE || !lw->pos_cap[l]) return NULL;
  return grow_if_full(lw, lw->pos_cap[l], TJ_ARR_POS, l, index, NULL, NULL, false);
}

/* ---- set-up ---- */


/* Flags the all-dense first arguments of mask/except in e (valued masks). */
static void mark_valued_masks(Lowerer *lw, const Expr *e) {
  Expr *k[2];
  int n = nt_children(e, k);
  OpKind op = nt_expr_op(e);
  if ((op == OP_MASK || op == OP_EXCEPT) && k[0]->kind == EX_ACCESS) {
    int x = lw_access_index(lw, k[0]);
    if (x > 0 && lw->acc[x].located) lw->acc[x].valued_mask = lw->valued_masks = true;
  }
  for (int i = 0; i < n; i++) mark_valued_masks(lw, k[i]);
}

/* parallelize(k, atomics): k a root reduction loop (not inside a temp)
 * into a dense output, which its updates then change atomically
 * (lw->atomic): + min max by atomicrmw, the others (*, a commutative
 * associative definition) by a compare-and-swap loop; false with lw->d set
 * otherwise. */
static bool atomics_ok(Lowerer *lw, bool reduction, bool in_temp) {
  const char *v = lw->nest.order[lw->par_depth]->name;
  const char *why = lw_out_appended(lw) ? "a sparse output's entries are appended, not updated"
                    : !reduction ? "its iterations write disjoint entries of the output: there "
                                   "is no race to guard"
                    : in_temp ? "it sums into a scalar temp below the output's last index; "
                                "reorder so it runs outside the output's loops"
                    : lw->out_op == OP_NONE && !lw->out_def
                        ? "the output is stored once, not updated"
                        : NULL;
  if (why)
    return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "parallelize(%s, atomics): %s", v, why);
  lw->atomic = true;
  return true;
}

static bool setup_accesses(Lowerer *lw) {
  const LowerPlan *p = lw->plan;
  const LoopNest *nest = &lw->nest;
  for (int k = 0; k < nest->nloops; k++) lw->depth_of[nest->order[k]->id] = k;
  /* Reductions go to a scalar temp at the first reduction loop, when every
   * output index is bound above it; otherwise (a dense output indexed below
   * a reduction loop) the body scatters into the output, through a temp for
   * the reduction loops below the output's last index. */
  /* The root scope owns the loops over the output's indices and the root
   * reductions; the loops of sum nodes follow (lower_plan checks that). */
  lw->root = nest->rhs;
  lw->scope_end = nest->nloops;
  for (int k = 0; k < nest->nloops; k++)
    if (lower_nest_reduces(nest, nest->order[k]) &&
        !lower_nest_root_reduces(nest, nest->order[k])) {
      lw->scope_end = k;
      break;
    }
  lw->first_red = nest->nloops;
  bool reduces = false;
  for (int k = nest->nloops - 1; k >= 0; k--)
    if (lower_nest_root_reduces(nest, nest->order[k])) lw->first_red = k, reduces = true;
  /* Root reductions (and +=) update the output with the root operator from
   * its identity; a plain assignment stores each entry once over the zero. */
  lw->root_reduces = reduces;
  lw->out_op = reduces || nest->keeps_old ? nest->op : OP_NONE;
  lw->out_def = reduces ? nest->def : NULL;
  lw->out_init = reduces ? lower_nest_identity(nest) : lw_fill_value(lw);
  const Expr *lhs = nest->lhs;
  int last_out = -1;
  for (int m = 0; m < lhs->u.access.n; m++) {
    int dd = lw->depth_of[lhs->u.access.idx[m]->id];
    if (dd > lw->first_red) lw->first_red = -1;
    if (dd > last_out) last_out = dd;
  }
  /* A dense output indexed below a reduction loop (MTTKRP in the order
   * i,k,j,l) still sums the reductions below its last index in a temp. */
  if (lw->first_red < 0 && !lw_out_appended(lw) && last_out + 1 < lw->scope_end)
    lw->first_red = last_out + 1;
  /* ... but not one walked by a fused loop: each f updates the output */
  if (lw->first_red >= 0 && lw->first_red < nest->nloops && nest->form[lw->first_red]->fused)
    lw->first_red = -1;
  const Expr *rhs[LW_MAX_ACCESS];
  int nrhs = 0;
  bool vws = nest->vws_depth >= 0;
  if (!lw_collect_accesses(nest->rhs, rhs, &nrhs, LW_MAX_ACCESS - 1 - vws))
    return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "more than %d accesses with a workspace",
                      LW_MAX_ACCESS - 2);
  lw->acc[lw->nacc++].e = nest->lhs;
  for (int x = 0; x < nrhs; x++) lw->acc[lw->nacc++].e = rhs[x];
  if (vws && lw->ops.ntensors >= NT_MAX_TENSORS)
    return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "%d operands and a workspace are more than a "
                      "kernel takes", lw->ops.ntensors);
  if (vws) { /* the workspace: a dense row in the slot after the operands */
    lw->vws_x = lw->nacc;
    lw->vws_t = lw->ops.ntensors;
    lw->acc[lw->nacc++].e = nest->vws_access;
    int m = nest->vws_access->u.access.n;   /* dense, its modes in loop order */
    lw->vws_fmt = (tj_format){.order = m};
    for (int l = 0; l < m; l++) lw->vws_fmt.levels[l] = 'd', lw->vws_fmt.mode_order[l] = l;
  }
  for (int x = 0; x < lw->nacc; x++) {
    Access *ac = &lw->acc[x];
    bool ws = vws && x == lw->vws_x;
    ac->t = ws ? lw->vws_t : ac->e->u.access.t->id;
    ac->f = ws ? &lw->vws_fmt : &p->fmt[ac->t];
    ac->located = !lv_format_has_sparse(ac->f);
    ac->last_depth = -1;
    for (int m = 0; m < ac->e->u.access.n; m++) {
      int dd = lw->depth_of[ac->e->u.access.idx[m]->id];
      if (dd > ac->last_depth) ac->last_depth = dd;
    }
  }
  lw->out_last = p->out_sparse ? lw_out_leaf(lw->acc[0].f) : lw->acc[0].f->order - 1;
  mark_valued_masks(lw, nest->rhs);
  /* The outermost loop may run in parallel when it walks an output index
   * of a dense output: iterations then write disjoint output elements. So
   * may an inner loop that parallelize names (the loops above it then run
   * serially), when it is not inside the root reduction's temp. */
  lw->par_depth = nest->par_asked > 0 ? nest->par_asked : 0;
  bool reduction = nest->nloops > 0 && lower_nest_reduces(nest, nest->order[lw->par_depth]);
  const CinLoopForm *pf = nest->nloops > 0 ? nest->form[lw->par_depth] : NULL;
  if (pf && pf->fuse) reduction |= lower_nest_reduces(nest, pf->fuse_inner);
  for (int k = 0; k < nest->nloops; k++)
    if (nest->form[k]->fuse && lw_out_appended(lw))
      return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "fuse(%s, %s, %s): the output is sparse "
                        "(appended row by row); fused loops write a dense output, or a "
                        "sparse one whose pattern is one operand's (a product of it and "
                        "dense factors, in its format)",
                        nest->order[k]->name, nest->form[k]->fuse_inner->name,
                        nest->form[k]->fuse);
  bool in_temp = lw->first_red >= 0 && lw->par_depth >= lw->first_red;
  const char *race = nest->par_asked >= 0 ? nest->form[lw->par_depth]->race : NULL;
  if (race && strcmp(race, "atomics") == 0 && !atomics_ok(lw, reduction, in_temp)) return false;
  if (race && strcmp(race, "partials") == 0 && lw->par_depth > 0 &&
      !lw_partials_setup(lw, reduction, &in_temp))
    return false;
  /* a subexpression's workspace has one row per thread when the parallel
   * loop runs around its where (lw_subexpr_alloc) */
  lw->par_ok = lw->opt->parallel && !lw_out_appended(lw) && nest->nloops > 0 &&
               nest->ws_depth < 0 && (!vws || lw->par_depth < nest->vws_depth) &&
               (!reduction || lw->atomic || lw->partials) &&
               (reduction || !lw_walks_dups_at(lw, lw->par_depth)); /* a row repeated */
  if (nest->par_asked >= 0 && pf && pf->fuse && reduction && !lw->atomic)
    return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "parallelize: the fused loop %s sums over "
                      "%s into entries other iterations update too; parallelize(..., atomics)",
                      pf->fuse, pf->fuse_inner->name);
  if (lw->par_depth > 0 && !lw->atomic && !lw->partials && (reduction || in_temp))
    return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "parallelize(%s): the loop over %s sums into "
                      "a shared value (a reduction's temp); per-thread partials or atomics for "
                      "an inner loop are not lowered", nest->order[lw->par_depth]->name,
                      nest->order[lw->par_depth]->name);
  return true;
}

static LirStmt *declare_operands(Lowerer *lw) {
  Arena *a = lw->a;
  LirStmt *s = NULL;
  char base[64];
  for (int t = 0; t < lw->ops.ntensors; t++) {
    const TensorVar *tv = lw->ops.tensors[t];
    const tj_format *f = &lw->plan->fmt[t];
    LirOperand *op = &lw->k->operands[t];
    op->name = tv->name;
    op->order = f->order;
    op->dtype = tv->decl.dtype;
    op->pos_width = f->pos_width ? f->pos_width / 8 : 4;   /* bits -> bytes */
    op->crd_width = f->crd_width ? f->crd_width / 8 : 4;
    op->is_output = t == 0;
    for (int m = 0; m < f->order; m++) {
      snprintf(base, sizeof base, "%s_dim%d", tv->name, m);
      lw->dim[t][m] = lw_var(lw, base, LT_I64);
      lir_append(&s, lir_decl(a, lw->dim[t][m], lir_field(a, lw->k, t, LF_DIM, m)));
    }
    static const LirField slice_field[3] = {LF_SLICE_OFF, LF_SLICE_SIZE, LF_SLICE_STRIDE};
    for (int d = 0; f->ndims == 0 && d < f->order; d++)
      for (int c = 0; c < 3; c++) {   /* dynamic slice values: read at each run */
        if (f->slice[d][c] != TJ_SLICE_DYNAMIC) continue;
        snprintf(base, sizeof base, "%s_sl%d_%s", tv->name, d, c == 0 ? "off" : c == 1 ? "size" : "stride");
        lw->slice_val[t][d][c] = lw_var(lw, base, LT_I64);
        lir_append(&s, lir_decl(a, lw->slice_val[t][d][c], lir_field(a, lw->k, t, slice_field[c], d)));
      }
    for (int l = 0; l < f->order; l++) {
      if (f->ndims == 0 && f->slice[f->mode_order[l]][2] && lv_at(f, l, LV_FULL)) {
        snprintf(base, sizeof base, "%s%d_size", tv->name, l);
        lw->lvl_size[t][l] = lw_var(lw, base, LT_I64);
        lir_append(&s, lir_decl(a, lw->lvl_size[t][l], lir_field(a, lw->k, t, LF_LVL_SIZE, l)));
      }
      if (lv_at(f, l, LV_HAS_POS)) {
        snprintf(base, sizeof base, "%s%d_pos", tv->name, l);
        lw->pos_ptr[t][l] = lw_var(lw, base, lir_field_type(lw->k, t, LF_POS));
        lir_append(&s, lir_decl(a, lw->pos_ptr[t][l], lir_field(a, lw->k, t, LF_POS, l)));
      }
      if (lv_at(f, l, LV_HAS_CRD)) {
        snprintf(base, sizeof base, "%s%d_crd", tv->name, l);
        lw->crd_ptr[t][l] = lw_var(lw, base, lir_field_type(lw->k, t, LF_CRD));
        lir_append(&s, lir_decl(a, lw->crd_ptr[t][l], lir_field(a, lw->k, t, LF_CRD, l)));
      }
    }
    snprintf(base, sizeof base, "%s_vals", tv->name);
    lw->vals_ptr[t] = lw_var(lw, base, lir_field_type(lw->k, t, LF_VALS));
    lir_append(&s, lir_decl(a, lw->vals_ptr[t], lir_field(a, lw->k, t, LF_VALS, 0)));
  }
  lw->k->noperands = lw->ops.ntensors;
  return s;
}

/* Product of the sizes of output levels [0, l). */
static LirExpr *out_prefix_size(Lowerer *lw, int l) {
  LirExpr *n = lw_i64(lw, 1);
  for (int k = 0; k < l; k++) n = lir_bin(lw->a, LOP_MUL, n, lw_level_size(lw, 0, k));
  return n;
}

/* How many positions output level l has when the output is built: a
 * compressed level's count, times the extents of the dense levels below
 * it down to l. */
static LirExpr *out_positions(Lowerer *lw, int l) {
  if (!lv_at(lw->acc[0].f, l, LV_FULL)) return lw_ref(lw, lw->out_p[l]);
  LirExpr *n = l > 0 ? out_positions(lw, l - 1) : lw_i64(lw, 1);
  return lir_bin(lw->a, LOP_MUL, n, lw_level_size(lw, 0, l));
}

static bool parents_dense(const tj_format *f, int l) {
  for (int k = 0; k < l; k++)
    if (!lv_at(f, k, LV_FULL)) return false;
  return true;
}

double lw_fill_value(const Lowerer *lw) { return nt_semiring_zero(lw->nest.semiring); }

tj_dtype lw_access_dtype(const Lowerer *lw, int x) {
  return lw->acc[x].e->u.access.t->decl.dtype;
}

/* A mask of another dtype than the expression's (the checker allows no
 * other operand that) has its own values: a bool mask's 0/1. */
LirType lw_access_type(const Lowerer *lw, int x) {
  tj_dtype dt = lw_access_dtype(lw, x);
  return dt == lw->nest.lhs->dtype ? lw->vtype : lir_dtype_type(dt);
}

double lw_access_zero(const Lowerer *lw, int x) {
  if (lw_access_dtype(lw, x) != lw->nest.lhs->dtype || lw->plan->pattern[lw->acc[x].t]) return 0;
  return lw_fill_value(lw);
}

LirStmt *lw_fill(Lowerer *lw, LirVar *ptr, LirExpr *lo, LirExpr *hi, double v) {
  Arena *a = lw->a;
  if (v == 0) {
    LirStmt *z = lir_call(a, LH_ZERO);
    z->u.call.ptr = ptr;
    z->u.call.a = lo;
    z->u.call.b = hi;
    return z;
  }
  LirVar *q = lw_var(lw, "fq", LT_I64);
  LirExpr *c = lw_value(lw, lir_elem_type(ptr->type), v);
  return lir_for(a, q, lo, hi, lir_store(a, lw_ref(lw, ptr), lw_ref(lw, q), c));
}

LirExpr *lw_value(Lowerer *lw, LirType t, double v) {
  if (lir_type_is_float(t)) return lir_const_fp(lw->a, t, v);
  if (lw->is_bool && t == lw->vtype)  /* 0/1; +inf (min's, and's identity) is 1 */
    return lir_const_int(lw->a, t, v != 0 && v == v && v != -(double)INFINITY);
  if (lir_type_is_unsigned(t)) { /* saturating into [0, max]; U64 max is 2^64 - 1 */
    double top = t == LT_U64 ? 0x1p64 : (double)lir_int_max(t) + 1;
    return lir_const_int(lw->a, t, isnan(v) || v <= 0 ? 0 : v >= top ? lir_int_max(t)
                                   : (int64_t)(uint64_t)v);
  }
  int64_t max = lir_int_max(t), min = lir_int_min(t);
  return lir_const_int(lw->a, t, isnan(v) ? 0 : v >= (double)max ? max
                                 : v <= (double)min ? min : (int64_t)v);
}

/* Zeroes the n values of a dense output. A parallel kernel zeroes them in
 * parallel blocks of ZERO_BLOCK values: one thread writing a large output
 * (SpMM's 200k x 64 doubles: 100 MB) would otherwise be the serial part
 * that caps its speed-up. A block is 1 MB of doubles, so an output under
 * that is one block, zeroed on this thread (tj_rt_parallel_for runs a
 * single iteration in place): forking for COO SpMV's 400 KB on u50k made
 * its 2-thread run 2.7x slower than the 1-thread one. */
enum { ZERO_BLOCK = 1 << 17 };
static LirStmt *zero_dense_output(Lowerer *lw, LirVar *n) {
  Arena *a = lw->a;
  if (!lw->par_ok || lw->ranged)
    return lw_fill(lw, lw->vals_ptr[0], lw_i64(lw, 0), lw_ref(lw, n), lw->out_init);
  LirVar *nb = lw_var(lw, "zero_blocks", LT_I64), *b = lw_var(lw, "zb", LT_I64);
  LirVar *lo = lw_var(lw, "zlo", LT_I64), *hi = lw_var(lw, "zhi", LT_I64);
  LirExpr *rounded_up = lir_bin(a, LOP_ADD, lw_ref(lw, n), lw_i64(lw, ZERO_BLOCK - 1));
  LirStmt *s = lir_decl(a, nb, lir_bin(a, LOP_DIV, rounded_up, lw_i64(lw, ZERO_BLOCK)));
  LirStmt *body = lir_decl(a, lo, lir_bin(a, LOP_MUL, lw_ref(lw, b), lw_i64(lw, ZERO_BLOCK)));
  LirExpr *end = lir_bin(a, LOP_ADD, lw_ref(lw, lo), lw_i64(lw, ZERO_BLOCK));
  lir_append(&body, lir_decl(a, hi, lir_bin(a, LOP_MIN, end, lw_ref(lw, n))));
  lir_append(&body, lw_fill(lw, lw->vals_ptr[0], lw_ref(lw, lo), lw_ref(lw, hi), lw->out_init));
  LirStmt *loop = lir_for(a, b, lw_i64(lw, 0), lw_ref(lw, nb), body);
  loop->u.loop.at.parallel = true;
  lir_append(&s, loop);
  return s;
}

/* Dense output: size, zero (unless +=), set length. */
static LirStmt *prepare_dense_output(Lowerer *lw) {
  Arena *a = lw->a;
  LirVar *n = lw->out_size = lw_var(lw, "out_size", LT_I64);
  LirStmt *s = lir_decl(a, n, out_prefix_size(lw, lw->acc[0].f->order));
  bool zero = (!lw->nest.keeps_old || lw->ranged) && lw->phase != PHASE_ASSEMBLE &&
              !lw->zero_rows && !lw->stores_all;
  /* the kernel's own zeroing, or its stores, write every entry first */
  bool raw = zero || (lw->stores_all && lw->phase != PHASE_ASSEMBLE);
  lir_append(&s, reserve(lw, TJ_ARR_VALS, 0, lw_ref(lw, n), raw));
  lir_append(&s, lw_reload(lw, lw->vals_ptr[0], LF_VALS, 0));
  if (zero) lir_append(&s, zero_dense_output(lw, n));
  lir_append(&s, lir_setfield(a, 0, LF_VALS_LEN, 0, lw_ref(lw, n)));
  return s;
}

/* Where a ranged compute kernel's chunk starts in the assembled output:
 * pOut1 = pos1[lo], pOut2 = pos2[pOut1], ... (lo is the chunk's first row,
 * or under a compressed level 0 its first position, pOut0). */
static LirExpr *ranged_start(Lowerer *lw, int l) {
  LirExpr *parent = l == 1 ? lw_ref(lw, lw->range_lo) : lw_ref(lw, lw->out_p[l - 1]);
  return lw_load_index(lw, lw->pos_ptr[0][l], parent);
}

static LirStmt *prepare_sparse_output(Lowerer *lw) {
  Arena *a = lw->a;
  const tj_format *f = lw->acc[0].f;
  LirStmt *s = NULL;
  char base[64];
  for (int l = 0; l < f->order; l++) {
    if (lv_at(f, l, LV_HAS_CRD) && !lv_at(f, l, LV_HAS_POS)) {
      /* a singleton of a run: the run's position and capacity */
      int r = lw_out_run_start(f, l);
      lw->out_p[l] = lw->out_p[r];
      if (lw->phase == PHASE_COMPUTE) continue;
      lw->crd_cap[l] = lw->crd_cap[r];
      lir_append(&s, lw_reserve(lw, TJ_ARR_CRD, l, lw_ref(lw, lw->crd_cap[l])));
      lir_append(&s, lw_reload(lw, lw->crd_ptr[0][l], LF_CRD, l));
    }
    if (!lv_at(f, l, LV_HAS_POS)) continue;
    snprintf(base, sizeof base, "pOut%d", l);
    lw->out_p[l] = lw_var(lw, base, LT_I64);
    bool chained = lw->ranged && lw->phase == PHASE_COMPUTE;
    LirExpr *start = !chained ? lw_i64(lw, 0)
                     : l == 0 ? lw_ref(lw, lw->range_lo)   /* pos_rows: shared positions */
                              : ranged_start(lw, l);
    lir_append(&s, lir_decl(a, lw->out_p[l], start));
    if (lw->phase == PHASE_COMPUTE) continue;
    snprintf(base, sizeof base, "out%d_crd_cap", l);
    lw->crd_cap[l] = lw_var(lw, base, LT_I64);
    lir_append(&s, lir_decl(a, lw->crd_cap[l], lw_i64(lw, 1024)));
    lir_append(&s, lw_reserve(lw, TJ_ARR_CRD, l, lw_ref(lw, lw->crd_cap[l])));
    lir_append(&s, lw_reload(lw, lw->crd_ptr[0][l], LF_CRD, l));
    LirExpr *plen;
    if (parents_dense(f, l)) {
      plen = lir_bin(a, LOP_ADD, out_prefix_size(lw, l), lw_i64(lw, 1));
    } else {
      snprintf(base, sizeof base, "out%d_pos_cap", l);
      lw->pos_cap[l] = lw_var(lw, base, LT_I64);
      lir_append(&s, lir_decl(a, lw->pos_cap[l], lw_i64(lw, 1024)));
      plen = lw_ref(lw, lw->pos_cap[l]);
    }
    lir_append(&s, reserve(lw, TJ_ARR_POS, l, plen, true));   /* zeroed right below */
    lir_append(&s, lw_reload(lw, lw->pos_ptr[0][l], LF_POS, l));
    LirStmt *z = lir_call(a, LH_ZERO);
    z->u.call.ptr = lw->pos_ptr[0][l];
    z->u.call.a = lw_i64(lw, 0);
    z->u.call.b = plen;
    lir_append(&s, z);
  }
  int last = lw->out_last;
  if (lw->emit_values && !(lw->ranged && lw->phase == PHASE_COMPUTE)) {
    LirExpr *need = lw->phase == PHASE_COMPUTE
                        ? lir_field(a, lw->k, 0, LF_CRD_LEN, last)
                        : lw_ref(lw, lw->crd_cap[last]);
    lir_append(&s, lw_reserve(lw, TJ_ARR_VALS, 0, lw_out_vals(lw, need)));
    lir_append(&s, lw_reload(lw, lw->vals_ptr[0], LF_VALS, 0));
  }
  return s;
}

/* Lengths, pos[0..1] of a top compressed level, and the running-max fix-up
 * of pos arrays under dense parents (rows the loops skipped). */
static LirStmt *finish_sparse_output(Lowerer *lw) {
  Arena *a = lw->a;
  const tj_format *f = lw->acc[0].f;
  int last = lw->out_last;
  LirStmt *s = NULL;
  if (lw->phase != PHASE_COMPUTE) {
    for (int l = 0; l < f->order; l++) {
      if (lv_at(f, l, LV_HAS_CRD) && !lv_at(f, l, LV_HAS_POS))
        lir_append(&s, lir_setfield(a, 0, LF_CRD_LEN, l, lw_ref(lw, lw->out_p[l])));
      if (!lv_at(f, l, LV_HAS_POS)) continue;
      LirVar *pos = lw->pos_ptr[0][l];
      LirExpr *plen;
      if (l == 0) {
        lir_append(&s, lw_store_index(lw, pos, lw_i64(lw, 1), lw_ref(lw, lw->out_p[0])));
        plen = lw_i64(lw, 2);
      } else if (parents_dense(f, l)) {
        plen = lir_bin(a, LOP_ADD, out_prefix_size(lw, l), lw_i64(lw, 1));
        LirVar *q = lw_var(lw, "q", LT_I64);
        LirExpr *prev = lw_load_index(lw, pos, lw_ref(lw, q));
        LirExpr *nq = lir_bin(a, LOP_ADD, lw_ref(lw, q), lw_i64(lw, 1));
        LirExpr *cur = lw_load_index(lw, pos, nq);
        LirStmt *fix = lir_if(a, lir_bin(a, LOP_LT, cur, prev),
                              lw_store_index(lw, pos, nq, prev), NULL);
        lir_append(&s, lir_for(a, q, lw_i64(lw, 0), out_prefix_size(lw, l), fix));
      } else {
        plen = lir_bin(a, LOP_ADD, out_positions(lw, l - 1), lw_i64(lw, 1));
      }
      lir_append(&s, lir_setfield(a, 0, LF_POS_LEN, l, plen));
      lir_append(&s, lir_setfield(a, 0, LF_CRD_LEN, l, lw_ref(lw, lw->out_p[l])));
    }
  }
  if (lw->phase == PHASE_ASSEMBLE) {
    LirExpr *n = lw_out_vals(lw, lw_ref(lw, lw->out_p[last]));
    lir_append(&s, reserve(lw, TJ_ARR_VALS, 0, n, true));   /* zeroed right below */
    lir_append(&s, lw_reload(lw, lw->vals_ptr[0], LF_VALS, 0));
    LirStmt *z = lir_call(a, LH_ZERO);
    z->u.call.ptr = lw->vals_ptr[0];
    z->u.call.a = lw_i64(lw, 0);
    z->u.call.b = n;
    lir_append(&s, z);
  }
  if (!(lw->ranged && lw->phase == PHASE_COMPUTE))
    lir_append(&s, lir_setfield(a, 0, LF_VALS_LEN, 0, lw_out_vals(lw, lw_ref(lw, lw->out_p[last]))));
  return s;
}

LirExpr *lw_ws_extent(Lowerer *lw) {
  IndexVar *j = lw->nest.ws_var;
  const Expr *lhs = lw->nest.lhs;
  int mode = 0;
  while (lhs->u.access.idx[mode] != j) mode++;
  return lw_ref(lw, lw->dim[0][mode]);
}

/* The marks' words of 64 and their touched bytes, when a row's coordinates
 * may be read back from the marks (lw_ws_reads_marks):
 *   ws_words = extent / 64 + 1; ws_touched = ws_words * 64;
 * the marks then take ws_touched + ws_words + 64 bytes (read 64 at a time). */
static LirStmt *mark_words(Lowerer *lw, LirExpr **mark_len) {
  Arena *a = lw->a;
  lw->ws_words = lw_var(lw, "ws_words", LT_I64);
  lw->ws_touched = lw_var(lw, "ws_touched", LT_I64);
  LirStmt *s = lir_decl(a, lw->ws_words, lir_bin(a, LOP_ADD, lir_bin(a, LOP_DIV, lw_ws_extent(lw),
                                                                    lw_i64(lw, 64)),
                                                 lw_i64(lw, 1)));
  lir_append(&s, lir_decl(a, lw->ws_touched, lir_bin(a, LOP_MUL, lw_ref(lw, lw->ws_words),
                                                     lw_i64(lw, 64))));
  *mark_len = lir_bin(a, LOP_ADD, lir_bin(a, LOP_ADD, lw_ref(lw, lw->ws_touched),
                                          lw_ref(lw, lw->ws_words)), lw_i64(lw, 64));
  return s;
}

/* The longest segment of access x's level l, found once per run:
 *   m = 0; for (r = 0; r < pos_len - 1; r++) m = max(m, pos[r + 1] - pos[r]) */
static LirStmt *longest_segment(Lowerer *lw, int x, int l, LirVar *m) {
  Arena *a = lw->a;
  LirVar *pos = lw->pos_ptr[lw->acc[x].t][l];
  LirVar *r = lw_var(lw, "r", LT_I64);
  LirExpr *len = lir_bin(a, LOP_SUB, lw_load_index(lw, pos, lir_bin(a, LOP_ADD, lw_ref(lw, r),
                                                                    lw_i64(lw, 1))),
                         lw_load_index(lw, pos, lw_ref(lw, r)));
  LirStmt *body = lir_assign(a, m, lir_bin(a, LOP_MAX, lw_ref(lw, m), len));
  LirExpr *segs = lir_bin(a, LOP_SUB, lir_field(a, lw->k, lw->acc[x].t, LF_POS_LEN, l),
                          lw_i64(lw, 1));
  LirStmt *s = lir_decl(a, m, lw_i64(lw, 0));
  lir_append(&s, lir_for(a, r, lw_i64(lw, 0), segs, body));
  return s;
}

/* Rows whose loop above the workspace variable's runs at most
 * ws_short_trips trips have at most WS_LIST_PRODUCTS products, so they
 * skip the count (lower_loops.c, scatter_by_length). From the longest
 * segment of each level walked at the workspace variable's loop (C's rows
 * in SpGEMM), summed:
 *   ws_seg_max = <longest segment of C1>; ws_short_trips = 64 / max(ws_seg_max, 1)
 * Nothing (ws_short_trips NULL) unless that loop is the producer's second
 * and every level it walks has a compact pos array. */
static LirStmt *short_trips(Lowerer *lw) {
  Arena *a = lw->a;
  int dw = lw->depth_of[lw->nest.ws_var->id];
  lw->ws_short_trips = NULL;
  if (dw != lw->nest.ws_depth + 1) return NULL;
  LirVar *sum = NULL;
  LirStmt *s = NULL;
  for (int x = 1; x < lw->nacc; x++) {
    int l = lw_level_at(lw, x, dw);
    if (l < 0) continue;
    if (!lv_at(lw->acc[x].f, l, LV_HAS_POS | LV_COMPACT)) return NULL;
    LirVar *m = lw_var(lw, "ws_seg_max", LT_I64);
    lir_append(&s, longest_segment(lw, x, l, m));
    if (sum) lir_append(&s, lir_update(a, sum, LOP_ADD, lw_ref(lw, m)));
    else sum = m;
  }
  if (!sum) return NULL;
  lw->ws_short_trips = lw_var(lw, "ws_short_trips", LT_I64);
  LirExpr *per_trip = lir_bin(a, LOP_MAX, lw_ref(lw, sum), lw_i64(lw, 1));
  lir_append(&s, lir_decl(a, lw->ws_short_trips,
                          lir_bin(a, LOP_DIV, lw_i64(lw, WS_LIST_PRODUCTS), per_trip)));
  return s;
}

/* Workspace arrays over the scattered index (values, marks, touched list;
 * no list where it is kept in the output's crd; values alone where the
 * compute phase drains along the assembled coordinates). */
static LirStmt *allocate_workspace(Lowerer *lw) {
  Arena *a = lw->a;
  LirExpr *n = lw_ws_extent(lw), *mark_len = n;
  /* a row accumulated in place marks positions in the row + 1 (at most
   * the extent: u32 under a crd of up to 32 bits), and has no values */
  bool in_place = lw_ws_in_place(lw);
  LirType mark_t = !in_place ? LT_PTR_BOOL
                   : lir_type_bytes(lir_elem_type(lw->crd_ptr[0][lw->out_last]->type)) <= 4
                       ? LT_PTR_U32 : LT_PTR_I64;
  struct { LirVar **v; const char *name; LirType t; int bytes; } ws[] = {
      {&lw->ws_vals, "ws_vals", lir_ptr_type(lw->vtype),
       lir_type_bytes(lw->vtype)},
      {&lw->ws_mark, "ws_mark", mark_t, lir_type_bytes(lir_elem_type(mark_t))},
      {&lw->ws_list, "ws_list", LT_PTR_I64, 8}};
  LirStmt *s = NULL;
  lw->ws_words = lw->ws_touched = NULL;
  lw->ws_short_trips = NULL;
  lw->ws_vals = lw->ws_mark = lw->ws_list = NULL;
  if (lw_ws_reads_marks(lw)) {
    s = mark_words(lw, &mark_len);
    lir_append(&s, short_trips(lw));
  }
  int nws = lw_ws_drains_assembled(lw) ? 1 : lw_ws_list_in_crd(lw) ? 2 : 3;
  for (int w = in_place ? 1 : 0; w < nws; w++) {
    *ws[w].v = lw_var(lw, ws[w].name, ws[w].t);
    lir_append(&s, lir_decl(a, *ws[w].v, NULL));
    LirStmt *al = lir_call(a, LH_ALLOC);
    al->u.call.ptr = *ws[w].v;
    /* the list has a spare slot: the branchless mark stores before it counts */
    LirExpr *len = w == 2 ? lir_bin(a, LOP_ADD, n, lw_i64(lw, 1)) : w == 1 ? mark_len : n;
    al->u.call.a = lir_bin(a, LOP_MUL, len, lw_i64(lw, ws[w].bytes));
    lir_append(&s, al);
    LirStmt *fr = lir_call(a, LH_FREE);
    fr->u.call.ptr = *ws[w].v;
    lir_append(&lw->k->cleanup, fr);
  }
  if (lw->out_init != 0 && lw->ws_vals)
    lir_append(&s, lw_fill(lw, lw->ws_vals, lw_i64(lw, 0), n, lw->out_init));
  lw->ws_n = lw_var(lw, "ws_n", LT_I64);
  lir_append(&s, lir_decl(a, lw->ws_n, lw_i64(lw, 0)));
  lw->ws_prods = lw->ws_branchless = NULL;
  lw->ws_select = false;
  if (in_place && lw_ws_in_place_selects(lw)) { /* rows choose (lower_loops.c, scatter_in_place) */
    lw->ws_prods = lw_var(lw, "ws_prods", LT_I64);
    lir_append(&s, lir_decl(a, lw->ws_prods, lw_i64(lw, 0)));
    lw->ws_branchless = lw_var(lw, "ws_branchless", LT_BOOL);
    lir_append(&s, lir_decl(a, lw->ws_branchless, lir_const_int(a, LT_BOOL, 0)));
  }
  return s;
}

/* Values of order-0 operands (scalars), read once at entry. */
static LirStmt *bind_scalars(Lowerer *lw) {
  LirStmt *s = NULL;
  for (int x = 1; x < lw->nacc; x++) {
    if (lw->acc[x].e->u.access.n != 0 || !lw->emit_values) continue;
    char base[64];
    snprintf(base, sizeof base, "%s_val", lw->acc[x].e->u.access.t->name);
    LirType vt = lw_access_type(lw, x);
    lw->val[x] = lw_var(lw, base, vt);
    LirExpr *ld = lir_load(lw->a, lw_ref(lw, lw->vals_ptr[lw->acc[x].t]), lw_i64(lw, 0));
    lir_append(&s, lir_decl(lw->a, lw->val[x], lir_cast(lw->a, vt, ld)));
  }
  return s;
}

static LirStmt *conversion_notes(Lowerer *lw) {
  LirStmt *s = NULL;
  for (int t = 1; t < lw->ops.ntensors; t++) {
    if (!lw->plan->convert[t]) continue;
    char from[640], to[640];
    tj_format_print(&lw->ops.tensors[t]->decl.format, from, sizeof from);
    tj_format_print(&lw->plan->fmt[t], to, sizeof to);
    const char *why = lw->plan->pattern[t]
        ? "as a 0/1 pattern: a mask located per coordinate, not walked again in every "
          "iteration of an outer loop (kept between runs while its structure is unchanged)"
        : lw->plan->vec_layout[t]
        ? "the vector loop over its last mode then loads contiguous values (a copy made "
          "at each run)"
        : "its levels would be traversed against their storage order";
    lir_append(&s, lir_comment(lw->a, arena_printf(lw->a, "operand %s is converted from %s to %s%s%s",
        lw->ops.tensors[t]->name, from, to, lw->plan->pattern[t] ? " " : ": ", why)));
  }
  return s;
}

/* The range descriptor operand of a row-range kernel (after the tensors). */
static LirStmt *declare_range(Lowerer *lw) {
  Arena *a = lw->a;
  int r = lw->ops.ntensors;
  LirOperand *op = &lw->k->operands[r];
  op->name = "range";
  op->order = 2;
  op->dtype = TJ_F64;
  op->pos_width = op->crd_width = 8;
  lw->k->noperands = r + 1;
  lw->range_lo = lw_var(lw, "row_lo", LT_I64);
  lw->range_hi = lw_var(lw, "row_hi", LT_I64);
  LirStmt *s = lir_decl(a, lw->range_lo, lir_field(a, lw->k, r, LF_DIM, 0));
  lir_append(&s, lir_decl(a, lw->range_hi, lir_field(a, lw->k, r, LF_DIM, 1)));
  return s;
}

/* Whether loop depth d is a plain loop over every value of its index, in
 * which every operand is dense (one lattice point, no case left out). */
static bool full_loop_at(const Lowerer *lw, AMask alive, int d) {
  if (!lw_single_loop_at(lw, alive, d)) return false;
  for (int x = 1; x < lw->nacc; x++) {
    int l = lw_level_at(lw, x, d);
    if (l >= 0 && !lv_at(lw->acc[x].f, l, LV_FULL)) return false;
  }
  return true;
}

/* Whether the kernel stores every entry of its dense output exactly once,
 * so nothing needs zeroing first: the output is walked by loops over every
 * value of its indices (the outermost ones; every operand dense there) and
 * stored once by `=` (no root reduction, +=, mask guard or workspace), the
 * reductions below them going through scope temps: PageRank's y(i) = t +
 * A(j,i) * w(j), a sequence's first statement A(i,j) = D(i,j). A matrix's
 * loops take no split, pos, bound or fuse. */
static bool stores_every_entry(const Lowerer *lw, AMask alive) {
  const tj_format *of = lw->acc[0].f;
  if (lw->plan->out_sparse || lw->nest.keeps_old || lw->ranged || lw->root_reduces ||
      lw->phase == PHASE_ASSEMBLE || lw->valued_masks || lw->nest.ws_depth >= 0 ||
      lw->nest.vws_depth >= 0 || of->order < 1 || lw->nest.nloops < of->order ||
      lw->out_op != OP_NONE)
    return false;
  if (of->order == 1)
    return lw->nest.lhs->u.access.idx[0] == lw->nest.order[0] && full_loop_at(lw, alive, 0);
  for (int d = 0; d < of->order; d++) {
    const CinLoopForm *f = lw->nest.form[d];
    if (!nt_uses_index(lw->nest.lhs, lw->nest.order[d]) ||
        (f && (f->split || f->divide || f->pos || f->bound_kind || f->fuse || f->fused ||
               f->outer_at)) ||
        !full_loop_at(lw, alive, d))
      return false;
  }
  return true;
}

/* A dense output whose first level is walked by the depth-0 loop, when
 * that loop is plain and the loops below it walk a sparse level under it
 * (so rows are irregular work, and never jammed): each iteration zeroes its
 * own output row, and the gap since the previous one, right before summing
 * into it — in cache, on the thread that owns the row, with no serial pass
 * over the whole output first. All-dense nests keep the prologue's zeroing:
 * tiling moves their row loop inside the column blocks. */
static bool rows_zeroed_in_loop(Lowerer *lw, AMask alive) {
  const LowerPlan *p = lw->plan;
  const tj_format *of = lw->acc[0].f;
  if (p->out_sparse || lw->nest.keeps_old || lw->ranged || lw->phase == PHASE_ASSEMBLE ||
      lw->nest.nloops == 0 || of->order == 0 || lw->nest.ws_depth >= 0 ||
      lw->nest.vws_depth >= 0 ||
      lw->nest.lhs->u.access.idx[of->mode_order[0]] != lw->nest.order[0] ||
      lw->first_red == 0 || !lw_single_loop_at(lw, alive, 0))
    return false;
  for (int k = 0; k < lw->nest.nloops; k++)   /* a loop over blocks above it repeats it; */
    if (lw->nest.outer_at[k] >= 0 || lw->nest.form[k]->fuse) return false; /* f is no row */
  bool sparse_rows = false;   /* some operand's row level, or the level below, is sparse */
  for (int x = 1; x < lw->nacc; x++) {
    int l = lw_level_at(lw, x, 0);
    const tj_format *f = lw->acc[x].f;
    if (lw_access_sliced(lw, x)) return false;   /* rows found by a slice's raw coordinates */
    if (l < 0) continue;
    if (!lv_at(f, l, LV_FULL) && !lv_at(f, l, LV_ORDERED | LV_UNIQUE))
      return false;   /* rows zeroed up to each coordinate, once: not a row repeated or out of order */
    if (!lv_at(f, l, LV_FULL) || (l + 1 < f->order && !lv_at(f, l + 1, LV_FULL))) sparse_rows = true;
  }
  return sparse_rows;
}

/* The loop nest of in's notation, which must be the order in's plan was
 * made for (its conversions follow that order). */
static bool read_nest(Lowerer *lw, const LowerInput *in, Diag *d) {
  if (!lower_nest(lw->a, in->cin, &lw->nest, d)) return false;
  const LowerPlan *p = in->plan;
  bool same = lw->nest.nloops == p->nloops;
  for (int k = 0; same && k < p->nloops; k++) same = lw->nest.order[k] == p->order[k];
  return same || TJ_BUG(d, "the plan was made for another loop order than the notation's");
}

/* The kernel of one phase of in's statement; with prev, the statement
 * follows prev's in prev's kernel (a sequence), its variables named apart
 * from prev's. Returns the Lowerer (its kernel lw->k), or NULL with d set. */
static Lowerer *lower_stmt(Arena *a, const LowerInput *in, LowerPhase phase, bool ranged,
                           const char *name, const Lowerer *prev, Diag *d) {
  const LowerOperands *ops = &in->ops;
  const LowerPlan *plan = in->plan;
  Lowerer *lw = arena_alloc(a, sizeof *lw);
  if (!lw) return diag_error(d, TJ_ERR_NOMEM, "out of memory while lowering"), NULL;
  if (prev) {   /* the names prev handed out stay taken */
    lw->names = prev->names, lw->name_uses = prev->name_uses;
    lw->nnames = prev->nnames, lw->names_cap = prev->names_cap;
  }
  lw->a = a;
  lw->d = d;
  lw->ops = *ops;
  lw->plan = plan;
  lw->opt = in->opt;
  if (!read_nest(lw, in, d)) return NULL;
  lw->phase = phase;
  lw->emit_index = phase != PHASE_COMPUTE;
  lw->emit_values = phase != PHASE_ASSEMBLE;
  lw->vtype = lir_dtype_type(lw->nest.lhs->dtype);
  lw->is_bool = lw->nest.lhs->dtype == TJ_BOOL;
  lw->k = prev ? prev->k : lir_kernel(a, name);
  if (!lw->k) return diag_error(d, TJ_ERR_NOMEM, "out of memory while lowering"), NULL;
  lw->ranged = ranged;
  if (!setup_accesses(lw)) return NULL;
  for (int t = 0; t < ops->ntensors; t++) /* B1's coordinate B11 is not tensor B11 */
    lw_name(lw, ops->tensors[t]->name);
  lw->ranged = ranged;
  if (ops->ntensors + ranged > LIR_MAX_OPERANDS)
    return diag_error(d, TJ_ERR_UNSUPPORTED, "%d operands and a row range are more than "
                      "a kernel takes (LIR_MAX_OPERANDS = %d)", ops->ntensors,
                      LIR_MAX_OPERANDS), NULL;
  bool pos_ranged = ranged && plan->pos_rows && !plan->rangeable && !plan->reduce_rows;
  if (ranged && !plan->rangeable && !plan->reduce_rows && !(pos_ranged && phase == PHASE_COMPUTE))
    return TJ_BUG(d, "row-range kernel of a plan that has none"), NULL;
  AMask alive = lw->nacc >= 64 ? ~(AMask)0 : (((AMask)1 << lw->nacc) - 1);
  lw->stores_all = stores_every_entry(lw, alive & ~(AMask)1);
  lw->zero_rows = !lw->stores_all && !lw->partials && rows_zeroed_in_loop(lw, alive & ~(AMask)1);
  LirStmt *body = conversion_notes(lw);
  lir_append(&body, declare_operands(lw));
  if (ranged) lir_append(&body, declare_range(lw));
  if (plan->out_like) {
    lir_append(&body, lw_out_like_prepare(lw));
  } else if (plan->out_sparse) {
    if (phase == PHASE_COMPUTE)
      lir_append(&body, lir_comment(a, "compute: the output's index arrays are assembled"));
    lir_append(&body, prepare_sparse_output(lw));
  } else {
    lir_append(&body, prepare_dense_output(lw));
  }
  if (lw->nest.ws_depth >= 0) lir_append(&body, allocate_workspace(lw));
  bool dense_assemble = (!plan->out_sparse || plan->out_like) && phase == PHASE_ASSEMBLE;
  if (lw->nest.vws_depth >= 0 && lw->emit_values) lir_append(&body, lw_subexpr_alloc(lw));
  bool partials = lw->partials && lw->emit_values && !dense_assemble;
  if (partials) lir_append(&body, lw_partials_alloc(lw));
  lir_append(&body, bind_scalars(lw));
  if (!dense_assemble) lir_append(&body, lw_loops(lw, 0, alive & ~(AMask)1, false));
  if (partials) lir_append(&body, lw_partials_combine(lw));
  if (lw_out_appended(lw)) lir_append(&body, finish_sparse_output(lw));
  if (!diag_ok(d)) return NULL;
  if (pos_ranged && !lw->pos_walked)
    return TJ_BUG(d, "the outermost loop of a pos_rows kernel walks no operand's positions"),
           NULL;
  if (prev) lir_append(&lw->k->body, body);
  else lw->k->body = body;
  if (a->failed) return diag_error(d, TJ_ERR_NOMEM, "out of memory while lowering"), NULL;
  return lw;
}

static LirKernel *lower_any(Arena *a, const LowerInput *in, LowerPhase phase, bool ranged,
                            const char *name, Diag *d) {
  Lowerer *lw = lower_stmt(a, in, phase, ranged, name, NULL, d);
  return lw ? lw->k : NULL;
}

LirKernel *lower_kernel(Arena *a, const LowerInput *in, LowerPhase phase, const char *name,
                        Diag *d) {
  return lower_any(a, in, phase, false, name, d);
}

LirKernel *lower_kernel_rows(Arena *a, const LowerInput *in, LowerPhase phase,
                             const char *name, Diag *d) {
  return lower_any(a, in, phase, true, name, d);
}

/* Emits, for sequence(S1, S2, ...) into a dense output:
 *   <S1's kernel: operands, the output sized (and zeroed unless +=), its nest>
 *   <S2's operands again, the output (sized, not zeroed: +=), its nest>
 *   ...
 * A statement with a GETT plan is its assembly plus the tj_rt_gett call
 * (beta 1 under +=). The assembly phase is S1's alone. */
LirKernel *lower_kernel_seq(Arena *a, const LowerInput *parts, const GettPlan *const *gett,
                            int n, LowerPhase phase, const char *name, Diag *d) {
  const Lowerer *prev = NULL;
  for (int p = 0; p < n && (p == 0 || phase != PHASE_ASSEMBLE); p++) {
    bool by_gett = gett[p] && gett[p]->method != GETT_LOOPS && phase != PHASE_ASSEMBLE;
    if (prev)
      lir_append(&prev->k->body, lir_comment(a, arena_printf(a, "sequence: statement %d", p + 1)));
    Lowerer *lw = lower_stmt(a, &parts[p], by_gett ? PHASE_ASSEMBLE : phase, false, name,
                             prev, d);
    if (!lw) return NULL;
    LirStmt *call = by_gett ? lower_gett_call(a, gett[p], d) : NULL;
    if (by_gett && !call) return NULL;
    lir_append(&lw->k->body, call);
    prev = lw;
  }
  return prev ? prev->k : NULL;
}

/* Emits, for the root reduction's definition f and a dense output:
 *   for (q = 0; q < size; q++) out_vals[q] = f(out_vals[q], part_vals[q]);
 * operand 0 the output, operand 1 one partial output of the same shape. */
LirKernel *lower_kernel_combine(Arena *a, const LowerInput *in, const char *name, Diag *d) {
  Lowerer *lw = arena_alloc(a, sizeof *lw);
  if (!lw || !(lw->k = lir_kernel(a, name)))
    return diag_error(d, TJ_ERR_NOMEM, "out of memory while lowering"), NULL;
  lw->a = a, lw->d = d, lw->ops = in->ops, lw->plan = in->plan, lw->opt = in->opt;
  if (!read_nest(lw, in, d)) return NULL;
  const LoopNest *st = &lw->nest;
  if (!st->def || in->plan->out_sparse)
    return TJ_BUG(d, "a combine kernel without a defined root reduction"), NULL;
  lw->vtype = lir_dtype_type(st->lhs->dtype);
  lw->is_bool = st->lhs->dtype == TJ_BOOL;
  LirKernel *k = lw->k;
  for (int t = 0; t < 2; t++) {
    LirOperand *op = &k->operands[t];
    op->name = t == 0 ? in->ops.tensors[0]->name : "part";
    op->order = in->plan->fmt[0].order;
    op->dtype = st->lhs->dtype;
    op->pos_width = op->crd_width = 8;
    op->is_output = t == 0;
  }
  k->noperands = 2;
  LirVar *n = lw_var(lw, "size", LT_I64), *q = lw_var(lw, "q", LT_I64);
  LirVar *vo = lw_var(lw, "vals", lir_field_type(k, 0, LF_VALS));
  LirVar *vp = lw_var(lw, "part_vals", lir_field_type(k, 1, LF_VALS));
  LirStmt *body = lir_decl(a, n, lw_i64(lw, 1));
  for (int m = 0; m < k->operands[0].order; m++)
    lir_append(&body, lir_update(a, n, LOP_MUL, lir_field(a, k, 0, LF_DIM, m)));
  lir_append(&body, lir_decl(a, vo, lir_field(a, k, 0, LF_VALS, 0)));
  lir_append(&body, lir_decl(a, vp, lir_field(a, k, 1, LF_VALS, 0)));
  LirExpr *r = lw_def_apply(lw, st->def, lir_load(a, lw_ref(lw, vo), lw_ref(lw, q)),
                            lir_load(a, lw_ref(lw, vp), lw_ref(lw, q)));
  if (!r) return NULL;
  lir_append(&body, lir_for(a, q, lw_i64(lw, 0), lw_ref(lw, n),
                            lir_store(a, lw_ref(lw, vo), lw_ref(lw, q), r)));
  k->body = body;
  if (a->failed) return diag_error(d, TJ_ERR_NOMEM, "out of memory while lowering"), NULL;
  return k;
}

static int run_tile(Arena *a, LirKernel *k, const LowerOptions *o) {
  return o->unroll_jam > 1 ? lower_tile(a, k) : 0;
}

/* The vector type is the output's: every value of a kernel has it. */
static int run_promote(Arena *a, LirKernel *k, const LowerOptions *o) {
  return o->promote ? lower_promote(a, k, o->vector_bits) : 0;
}

static int run_vectorize(Arena *a, LirKernel *k, const LowerOptions *o) {
  if (o->vector_bits <= 0 && o->vec_width <= 0) return 0;
  return lower_vectorize(a, k, o, lir_dtype_type(k->operands[0].dtype));
}

static int run_unroll_jam(Arena *a, LirKernel *k, const LowerOptions *o) {
  return o->unroll_jam > 1 ? lower_unroll_jam(a, k, o->unroll_jam) : 0;
}

static int run_peel(Arena *a, LirKernel *k, const LowerOptions *o) {
  return o->peel > 1 ? lower_peel(a, k, o->peel) : 0;
}

static int run_prefetch(Arena *a, LirKernel *k, const LowerOptions *o) {
  return o->prefetch > 0 ? lower_prefetch(a, k, o->prefetch) : 0;
}

/* Cache blocking needs the scalar nest (and blocks only when rows will be
 * jammed); promotion puts fixed output updates in accumulators that
 * vectorization then widens (with the blocked loops); unroll-and-jam
 * blocks rows around the vector loops; peeling takes the scalar loops
 * left (a vector tier's remainder among them); prefetching adds hints to
 * the loops the others left in place. */
const LowerPass LOWER_PASSES[] = {{"tile", run_tile},
                                  {"promote", run_promote},
                                  {"vectorize", run_vectorize},
                                  {"unroll-jam", run_unroll_jam},
                                  {"peel", run_peel},
                                  {"prefetch", run_prefetch},
                                  {NULL, NULL}};

/* A union scattered (or summed) term by term: each term's lattice, as its
 * loop walks it. */
static void print_scattered_terms(FILE *out, Lowerer *lw, AMask alive, int k, const char *how) {
  Expr *terms[LW_MAX_ACCESS];
  int n = lw_union_terms(lw, terms);
  fprintf(out, " %s, %d terms:", how, n);
  for (int t = 0; t < n; t++) {
    const Expr *acc[LW_MAX_ACCESS];
    int na = 0;
    lw_collect_accesses(terms[t], acc, &na, LW_MAX_ACCESS);
    AMask m = 0;
    for (int i = 0; i < na && i < LW_MAX_ACCESS; i++) m |= (AMask)1 << lw_access_index(lw, acc[i]);
    lw->root = terms[t];
    Lattice L;
    lw_lattice(lw, alive & m, k, &L);
    fprintf(out, " {");
    for (int q = 0; q < L.n; q++) {
      if (q) fputc(' ', out);
      lw_print_point(out, lw, &L.p[q]);
    }
    fputc('}', out);
  }
  fputc('\n', out);
}

/* The lattice of the loop at depth k over lw->root, on one line. */
static void print_lattice(FILE *out, Lowerer *lw, AMask alive, int k) {
  if (lw_scatters_terms(lw, k)) {
    print_scattered_terms(out, lw, alive, k, "scattered into a workspace");
    return;
  }
  if (lw->plan->split_sum && lw->first_red >= 0 && k >= lw->first_red) {
    print_scattered_terms(out, lw, alive, k, "summed term by term");
    return;
  }
  if (lw_wide_at(lw, alive, k)) {
    LatPoint every = {lw_sparse_at(lw, alive, k), false};
    fprintf(out, " merged over ");
    lw_print_point(out, lw, &every);
    fprintf(out, " (up to %lld lattice points)\n", (long long)lw_lattice_bound(lw, alive, k));
    return;
  }
  Lattice L;
  lw_lattice(lw, alive, k, &L);
  for (int q = 0; q < L.n; q++) {
    fputc(' ', out);
    lw_print_point(out, lw, &L.p[q]);
  }
  fputc('\n', out);
}

void lower_print_lattices(FILE *out, const LowerInput *in) {
  const LowerPlan *plan = in->plan;
  Arena a;
  arena_init(&a);
  Lowerer *lw = arena_alloc(&a, sizeof *lw);
  if (!lw) return;
  lw->a = &a;
  lw->ops = in->ops;
  lw->plan = plan;
  lw->opt = in->opt;
  Diag d;
  diag_init(&d);
  lw->d = &d;
  if (!read_nest(lw, in, &d) || !setup_accesses(lw)) {
    fprintf(out, "(no lattices: %s)\n", d.msg);
    arena_free(&a);
    return;
  }
  AMask alive = (lw->nacc >= 64 ? ~(AMask)0 : ((AMask)1 << lw->nacc) - 1) & ~(AMask)1;
  const Expr *sums[NT_MAX_INDICES];
  int ns = nt_sums(lw->nest.rhs, sums, NT_MAX_INDICES);
  const LoopNest *nest = &lw->nest;
  for (int k = 0; k < nest->nloops; k++) {
    IndexVar *v = nest->order[k];
    lw->root = nest->rhs;
    for (int i = 0; i < ns && i < NT_MAX_INDICES; i++)
      if (sums[i]->u.sum.iv == v) lw->root = sums[i]->u.sum.a;
    if (nest->vws_depth >= 0 && k >= nest->vws_depth && k < nest->vws_end) {  /* the producer's */
      lw->root = nest->vws_node;
      fprintf(out, "%s (produces %s):", v->name, nest->vws_access->u.access.t->name);
      print_lattice(out, lw, lw_accesses_in(lw, nest->vws_node, alive), k);
    }
    lw->vws_consumer = true;
    bool reads = nest->vws_depth >= 0 && k >= lw->depth_of[nest->vws_first->id] &&
                 !lw_subexpr_skips(lw, k);
    lw->vws_consumer = false;
    if (reads) {   /* the consumer's */
      lw->root = nest->vws_rhs;
      fprintf(out, "%s (reads %s):", v->name, nest->vws_access->u.access.t->name);
      print_lattice(out, lw, lw_subexpr_consumer(lw, alive), k);
    }
    if (nest->vws_depth >= 0 && k >= nest->vws_depth) continue;
    fprintf(out, "%s:", v->name);
    print_lattice(out, lw, alive, k);
  }
  arena_free(&a);
}

/* Kernels over blocked operands (formats with floordiv / mod levels: BSR).
 *
 * A blocked tensor is stored as the tensor of its levels (runtime/blocked.c),
 * so a kernel over it is a kernel over that tensor: the expression is
 * rewritten so every index a blocked operand stores as `i floordiv k` and
 * `i mod k` becomes two indices, i_b over blocks and i_i inside the block
 * (i = i_b * k + i_i), and the blocked operand is accessed in level order:
 *   y(i) = A(i,j) * x(j), A BSR 4x4
 *   ->  y(i_b,i_i) = A(i_b,j_b,i_i,j_i) * x(j_b,j_i)
 * The other operands indexed by a blocked index are dense and are seen as
 * reshaped views of their own arrays (x(j_b,j_i) is x(j_b*4 + j_i)); the
 * lowering then emits, from A's levels, a loop over block rows, over the
 * stored blocks of the row, and dense loops over the block whose extents
 * are the constant block size (a bound(...) directive), which the
 * vectorizer takes. The compile and every run build the views (nothing is
 * copied); the output's values go back to the caller's tensor. A blocked
 * output is written as the tensor of its levels too (A(i_b,j_b,i_i,j_i) =
 * B(...) + C(...): an ordinary dsdd output, whose stored blocks are the
 * union the loops over block coordinates reach, each block whole), then
 * takes the arrays its view holds and has its padding zeroed
 * (rt_tensor_view_levels_finish); an expression the rewritten kernel
 * cannot compute is refused naming the blocked output. An n_out_of_m
 * output runs on a stand-in whose n level is compressed, repacked into the
 * output after each run (pack fills the slots and fails the run, naming
 * the block, when one holds more than n nonzeros).
 * A view of a blocked tensor (a slice of BSR) runs on its base's level view
 * with each floordiv level narrowed to the blocks the slice touches
 * (rt_tensor_view_levels_sliced); every operand of a blocked index sees it
 * in one frame (RtBlockFrame: view coordinate i at lead + i * stride over
 * those blocks), dense operands put in it by their split, and where the
 * frame has positions that are not the view's (a cut edge block, a
 * stride) the loop over a dense mod level runs through a block window
 * (open_masks) or else the access is wrapped in bool masks added as
 * operands:
 *   y(i) = V(i,j) * x(j), V = A[1:6:1, 2:5:2], A BSR 2x2
 *   ->  y(i_b,i_i) = mask(V_m0(i_b,i_i), mask(V_m1(j_b,j_i), V(i_b,j_b,i_i,j_i)))
 *                    * x(j_b,j_i)
 * A dense input whose framed indices all run through windows is read in
 * place, its array shifted by the frame's lead (mark_in_place); other
 * framed dense operands are zero-filled copies (an `=` output's not
 * copied in).
 * A view whose frame disagrees with another operand's, or with '?' slice
 * values, runs on a converted copy made at every run (make_copy).
 * The rhs's top-level terms (term_kinds) steer the plan: with a 2:4 view,
 * an index a prefix of terms all sum is renamed per term
 * (split_shared_sums), so two views in two terms walk their windows
 * alone; a sum over blocks beside terms that read no blocked operand runs
 * as sequence() (wants_sequence: y = u, then y += V * x).
 * Refused with a message: a sparse operand indexed by a
 * blocked index, a blocked index outside an access (sum(j, ...)), two block
 * sizes for one index, extents that are not multiples of the block, and
 * schedules (their loop names would be the rewritten ones).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/level.h"
#include "driver.h"

#define BLK_NAME 64
#define BLK_MAX_IDS 256
#define BLK_MAX_ACC 256
/* Blocks per tile of n_out_of_m SpMM's block loop (loop_order): 2:4 SpMM
 * 2048^2 x 64 against dense GEMM went from 0.96x to 1.07x (medians of 15,
 * thread CPU, load ~20; tiles of 64, 128 and 256 blocks, single runs, did
 * not beat 32). */
#define BLK_TILE 32

/* What a given operand runs as. */
typedef struct BlkOperand {
  char name[BLK_NAME];
  bool levels;                 /* blocked: the tensor of its levels */
  bool view;                   /* a view of a blocked tensor: read in place
                                  through its base's levels, narrowed */
  bool copy;                   /* a view of a blocked tensor read through a
                                  converted copy (blocked, its own frame) */
  bool split_any;              /* dense: reshaped by split */
  bool framed;                 /* the split puts a dim in a view's frame */
  bool in_place;               /* framed, an input whose framed dims block
                                  windows keep to the view: read in place
                                  (RT_SPLIT_IN_PLACE) */
  uint32_t windowed;           /* a view's dims read through block windows */
  int32_t split[TJ_MAX_ORDER]; /* block size per dim (0: kept) */
  int64_t frame[TJ_MAX_ORDER][2]; /* per split dim {lead, stride} (stride 0: none) */
} BlkOperand;

/* A mask operand the kernel reads a masked view's dim through
 * (rt_block_frame_mask), made at every run from the view's frame. */
typedef struct BlkMask {
  char name[BLK_NAME];
  int op, dim;                 /* the view (operand index) and its dim */
} BlkMask;

struct DrvBlocked {
  int n;
  BlkOperand op[NT_MAX_TENSORS];
  char *expr;                  /* the rewritten expression (malloc'd) */
  char *schedule;              /* the bound(...) directives (malloc'd) */
  int nmask;
  BlkMask mask[NT_MAX_TENSORS];      /* operands n .. n + nmask - 1 of the kernel */
  const char *out_blocked;     /* the output's name when it is blocked (written
                                  through its levels), else NULL */
  bool out_structured;         /* it is n_out_of_m: written into a compressed
                                  stand-in, repacked after each run */
  bool out_accum;              /* `+=`: the stand-in starts with its contents */
  int out_op;                  /* the output's operand index; -1: none (`s = ...`) */
  bool out_keeps;              /* `+=`: a dense output's padded copy starts
                                  with its values (`=` overwrites it whole) */
  int norig;
  tj_tensor *orig[NT_MAX_TENSORS];   /* the compile's operands */
  tj_tensor views[NT_MAX_TENSORS];   /* the compile's views */
};

/* One access `T(i, j, ...)` found in the expression text. */
typedef struct BlkAccess {
  int op;                      /* index into the operand list */
  const char *start;           /* its tensor's name */
  const char *open, *close;    /* its '(' and ')' */
  int n;
  char idx[TJ_MAX_ORDER][BLK_NAME];
  int term;                    /* its top-level term of the rhs (term_kinds); 0: the output */
} BlkAccess;

typedef struct BlkIndex {
  char name[BLK_NAME], outer[BLK_NAME + 8], inner[BLK_NAME + 8];
  int32_t k;
  int64_t ext;         /* its extent (the first blocked operand's) */
  int ext_op, ext_mode;
  RtBlockFrame fr;     /* the frame blocked operands see it in (frames) */
  int fr_op;           /* the operand whose frame it is; -1 before one */
  bool sparse_inner;   /* a mod level of it is sparse (n_out_of_m): its loop
                          walks that level's positions, no bound(...) */
} BlkIndex;

typedef struct BlkScan {
  BlkAccess acc[BLK_MAX_ACC];
  int nacc;
  char ids[BLK_MAX_IDS][BLK_NAME];   /* identifiers outside access lists */
  int nids;
  BlkIndex ix[TJ_MAX_ORDER * NT_MAX_TENSORS];
  int nix;
} BlkScan;

bool drv_blocked_any(tj_tensor *const *ops, int n) {
  for (int k = 0; k < n; k++)
    if (ops[k] && ops[k]->blocked) return true;
  return false;
}

static const char *ident(const char *p, char *buf) {
  size_t k = 0;
  while (isalnum((unsigned char)*p) || *p == '_') {
    if (k + 1 < BLK_NAME) buf[k++] = *p;
    p++;
  }
  buf[k] = 0;
  return p;
}

static const char *skip_ws(const char *p) {
  while (isspace((unsigned char)*p)) p++;
  return p;
}

static int operand_named(tj_tensor *const *ops, int n, const char *name) {
  for (int k = 0; k < n; k++)
    if (ops[k] && !strcmp(tj_tensor_name(ops[k]), name)) return k;
  return -1;
}

/* Reads `(a, b, c)` at p into ac; NULL when it is no plain index list. */
static const char *index_list(const char *p, BlkAccess *ac) {
  ac->open = p;
  ac->n = 0;
  p = skip_ws(p + 1);
  if (*p == ')') return ac->close = p, p + 1;
  for (;;) {
    if (ac->n == TJ_MAX_ORDER || !(isalpha((unsigned char)*p) || *p == '_')) return NULL;
    p = skip_ws(ident(p, ac->idx[ac->n++]));
    if (*p == ')') return ac->close = p, p + 1;
    if (*p != ',') return NULL;
    p = skip_ws(p + 1);
  }
}

/* Past the numeric literal at p (`1.5e-3`), or p when none starts there. */
static const char *skip_number(const char *p) {
  if (!(isdigit((unsigned char)*p) || (*p == '.' && isdigit((unsigned char)p[1])))) return p;
  const char *q = p;
  while (isalnum((unsigned char)*q) || *q == '.' ||
         ((*q == '+' || *q == '-') && (q[-1] == 'e' || q[-1] == 'E')))
    q++;
  return q;
}

static bool scan(const char *expr, tj_tensor *const *ops, int n, BlkScan *s, Diag *d) {
  for (const char *p = expr; *p;) {
    const char *num = skip_number(p);
    if (num != p) {
      p = num;
      continue;
    }
    if (!(isalpha((unsigned char)*p) || *p == '_')) {
      p++;
      continue;
    }
    char name[BLK_NAME];
    const char *q = ident(p, name), *r = skip_ws(q);
    int op = operand_named(ops, n, name);
    BlkAccess ac;
    const char *end = op >= 0 && *r == '(' ? index_list(r, &ac) : NULL;
    if (end) {
      if (s->nacc == BLK_MAX_ACC)
        return diag_error(d, TJ_ERR_UNSUPPORTED, "more than %d accesses", BLK_MAX_ACC);
      ac.op = op;
      ac.start = p;
      s->acc[s->nacc++] = ac;
      p = end;
      continue;
    }
    if (s->nids < BLK_MAX_IDS) snprintf(s->ids[s->nids++], BLK_NAME, "%s", name);
    p = q;
  }
  return true;
}

static BlkIndex *index_of(BlkScan *s, const char *name) {
  for (int i = 0; i < s->nix; i++)
    if (!strcmp(s->ix[i].name, name)) return &s->ix[i];
  return NULL;
}

static bool used_name(const BlkScan *s, const char *name) {
  for (int i = 0; i < s->nids; i++)
    if (!strcmp(s->ids[i], name)) return true;
  for (int a = 0; a < s->nacc; a++)
    for (int m = 0; m < s->acc[a].n; m++)
      if (!strcmp(s->acc[a].idx[m], name)) return true;
  for (int i = 0; i < s->nix; i++)
    if (!strcmp(s->ix[i].outer, name) || !strcmp(s->ix[i].inner, name)) return true;
  return false;
}

/* A fresh index name: base + suffix, with '_' added until unused. */
static void fresh(const BlkScan *s, const char *base, const char *suffix, char *out) {
  char buf[BLK_NAME + 8];
  snprintf(buf, sizeof buf, "%.*s%.7s", BLK_NAME - 1, base, suffix);
  while (used_name(s, buf) && strlen(buf) + 1 < sizeof buf) strcat(buf, "_");
  snprintf(out, BLK_NAME + 8, "%s", buf);
}

/* The blocked indices: the index of every floordiv / mod level of a
 * blocked operand, with its block size (out: acc[0] is the output's). */
static bool find_blocked(BlkScan *s, tj_tensor *const *ops, bool out, bool accum, Diag *d) {
  for (int a = 0; a < s->nacc; a++) {
    const BlkAccess *ac = &s->acc[a];
    tj_tensor *t = ops[ac->op];
    if (!t->blocked) continue;
    if (ac->n != t->order) return true;   /* the checker names the arity error */
    for (int l = 0; l < t->ufmt.order; l++) {
      /* an output's sparse mod level (2:4's stand-in) is read too under
       * `+=`: its old entries are a union's operand, so the loop is no
       * constant range (O(i,j) += A(i,j) * 2 over a dense A was refused
       * naming a bound(j_i, ...) the plan had added) */
      if ((a > 0 || !out || accum) && t->ufmt.lvl_op[l] == TJ_LVL_MOD &&
          !lv_at(&t->ufmt, l, LV_FULL)) {
        BlkIndex *ix = index_of(s, ac->idx[t->ufmt.mode_order[l]]);
        if (ix) ix->sparse_inner = true;   /* its floordiv level comes first */
      }
      if (t->ufmt.lvl_op[l] != TJ_LVL_FLOORDIV) continue;
      int m = t->ufmt.mode_order[l];
      const char *name = ac->idx[m];
      BlkIndex *ix = index_of(s, name);
      if (ix && ix->ext != t->dims[m])
        return diag_error(d, TJ_ERR_SHAPE, "index %s has extent %lld in %s (mode %d) but "
                          "%lld in %s (mode %d)", name, (long long)ix->ext,
                          tj_tensor_name(ops[ix->ext_op]), ix->ext_mode, (long long)t->dims[m],
                          t->name, m);
      if (ix && ix->k != t->ufmt.lvl_k[l])
        return diag_error(d, TJ_ERR_UNSUPPORTED, "index %s is blocked by %d in one operand "
                          "and by %d in %s; one block size per index", name, ix->k,
                          t->ufmt.lvl_k[l], t->name);
      if (!ix) {
        ix = &s->ix[s->nix++];
        snprintf(ix->name, sizeof ix->name, "%s", name);
        ix->k = t->ufmt.lvl_k[l];
        ix->ext = t->dims[m], ix->ext_op = ac->op, ix->ext_mode = m;
      }
    }
  }
  for (int i = 0; i < s->nix; i++) {
    for (int k = 0; k < s->nids; k++)
      if (!strcmp(s->ids[k], s->ix[i].name))
        return diag_error(d, TJ_ERR_UNSUPPORTED, "index %s is blocked (a blocked operand "
                          "stores %s floordiv %d) and appears outside an access; write the "
                          "sum implicitly", s->ix[i].name, s->ix[i].name, s->ix[i].k);
    fresh(s, s->ix[i].name, "_b", s->ix[i].outer);
    fresh(s, s->ix[i].name, "_i", s->ix[i].inner);
  }
  return true;
}

/* The frame blocked operand t (its role bo) sees its dim m in: a view's
 * (rt_block_frame), or a converted copy's own blocks from 0. */
static bool operand_frame(const tj_tensor *t, const BlkOperand *bo, int m, RtBlockFrame *fr) {
  if (!rt_block_frame(t, m, fr)) return false;
  if (bo->copy) {
    int64_t n = t->dims[m], k = fr->k;
    *fr = (RtBlockFrame){.k = k, .nb = (n + k - 1) / k, .stride = 1, .size = n};
  }
  return true;
}

static bool same_frame(const RtBlockFrame *a, const RtBlockFrame *b) {
  return a->lead == b->lead && a->stride == b->stride && a->nb == b->nb;
}

/* Whether operand op is a view read in place whose frame fr does not start
 * at a block's start with stride 1 (a converted copy of it would). */
static bool shifted_view(const DrvBlocked *b, int op, const RtBlockFrame *fr) {
  return b->op[op].view && !b->op[op].copy && (fr->lead || fr->stride != 1);
}

/* Every blocked index is seen in one frame by all blocked operands (the
 * other operands are put in it by their split): where two differ (a view
 * starting inside a block beside an unsliced BSR operand, two views at
 * different offsets within their blocks), the shifted view is read
 * through a converted copy, until they agree. */
static bool resolve_frames(BlkScan *s, tj_tensor *const *ops, DrvBlocked *b, Diag *d) {
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 0; i < s->nix; i++) s->ix[i].fr_op = -1;
    for (int a = 0; a < s->nacc && !changed; a++) {
      const BlkAccess *ac = &s->acc[a];
      tj_tensor *t = ops[ac->op];
      if (!t->blocked || ac->n != t->order) continue;
      for (int m = 0; m < ac->n && !changed; m++) {
        BlkIndex *ix = index_of(s, ac->idx[m]);
        RtBlockFrame fr;
        if (!ix || !operand_frame(t, &b->op[ac->op], m, &fr)) continue;
        if (ix->fr_op < 0) {
          ix->fr = fr, ix->fr_op = ac->op;
          continue;
        }
        if (same_frame(&ix->fr, &fr)) continue;
        int pick = shifted_view(b, ac->op, &fr) ? ac->op
                   : shifted_view(b, ix->fr_op, &ix->fr) ? ix->fr_op : -1;
        if (pick < 0)   /* unshifted frames differ only with the extents, checked before */
          return TJ_BUG(d, "two frames for a blocked index and no shifted view");
        b->op[pick].copy = changed = true;
      }
    }
  }
  return true;
}

/* The position of the mod level storing index `name` in access ac's
 * tensor t (counted among its mod levels), or -1. */
static int mod_rank(const BlkAccess *ac, const tj_tensor *t, const char *name) {
  for (int l = 0, r = 0; l < t->ufmt.order; l++) {
    if (t->ufmt.lvl_op[l] != TJ_LVL_MOD) continue;
    if (!strcmp(ac->idx[t->ufmt.mode_order[l]], name)) return r;
    r++;
  }
  return -1;
}

/* Two blocked operands whose blocks store the indices they share in
 * different orders (A's `1%4,0%4` column-major blocks beside B's or the
 * output's row-major `0%4,1%4`) have no loop order over a block that both
 * walk: refused naming them (the planner's own error named a bound(...)
 * directive it had added, or a sum inside a function that is not there). */
static bool same_block_orders(const BlkScan *s, tj_tensor *const *ops, Diag *d) {
  for (int a = 0; a < s->nacc; a++)
    for (int b = a + 1; b < s->nacc; b++) {
      const BlkAccess *x = &s->acc[a], *y = &s->acc[b];
      const tj_tensor *tx = ops[x->op], *ty = ops[y->op];
      if (!tx->blocked || !ty->blocked || tx == ty || x->n != tx->order || y->n != ty->order)
        continue;
      for (int m = 0; m < x->n; m++)
        for (int q = 0; q < x->n; q++) {
          const char *u = x->idx[m], *v = x->idx[q];
          int xu = mod_rank(x, tx, u), xv = mod_rank(x, tx, v);
          int yu = mod_rank(y, ty, u), yv = mod_rank(y, ty, v);
          if (xu < 0 || xv < 0 || yu < 0 || yv < 0 || xu >= xv || yu < yv) continue;
          const BlkIndex *iu = index_of((BlkScan *)s, u), *iv = index_of((BlkScan *)s, v);
          return diag_error(d, TJ_ERR_UNSUPPORTED, "%s and %s store their blocks in different "
                            "orders (%s's %s mod %d above its %s mod %d, %s's below); give "
                            "them the same mod levels' order (convert one of them)",
                            tj_tensor_name(tx), tj_tensor_name(ty), tj_tensor_name(tx), u,
                            iu ? iu->k : 0, v, iv ? iv->k : 0, tj_tensor_name(ty));
        }
    }
  return true;
}

/* Appends `text` to the growing buffer. */
static bool put(char **buf, size_t *len, size_t *cap, const char *text, size_t n) {
  if (*len + n + 1 > *cap) {
    size_t c = (*cap + n + 1) * 2;
    char *b = realloc(*buf, c);
    if (!b) return false;
    *buf = b, *cap = c;
  }
  memcpy(*buf + *len, text, n);
  *len += n;
  (*buf)[*len] = 0;
  return true;
}

static bool puts_(char **buf, size_t *len, size_t *cap, const char *text) {
  return put(buf, len, cap, text, strlen(text));
}

/* The access list of ac, rewritten; records the operand's role in blk. */
static bool rewrite_access(const BlkScan *s, const BlkAccess *ac, tj_tensor *t, DrvBlocked *b,
                           char **buf, size_t *len, size_t *cap, Diag *d) {
  BlkOperand *bo = &b->op[ac->op];
  bool ok = puts_(buf, len, cap, "(");
  if (t->blocked && ac->n != t->order)
    return diag_error(d, TJ_ERR_SHAPE, "%s has %d dims but is accessed with %d indices",
                      t->name, t->order, ac->n);
  if (t->blocked) {
    bo->levels = true;
    for (int l = 0; l < t->ufmt.order && ok; l++) {
      const char *name = ac->idx[t->ufmt.mode_order[l]];
      BlkIndex *ix = index_of((BlkScan *)s, name);
      int op = t->ufmt.lvl_op[l];
      if (op == TJ_LVL_DIM && ix)
        return diag_error(d, TJ_ERR_UNSUPPORTED, "%s stores index %s unblocked, but another "
                          "operand blocks it by %d", t->name, name, ix->k);
      const char *word = op == TJ_LVL_FLOORDIV ? ix->outer : op == TJ_LVL_MOD ? ix->inner : name;
      ok = puts_(buf, len, cap, l ? "," : "") && puts_(buf, len, cap, word);
    }
    return ok && puts_(buf, len, cap, ")");
  }
  int32_t split[TJ_MAX_ORDER] = {0};
  int64_t frame[TJ_MAX_ORDER][2] = {{0}};
  bool framed = false;
  for (int m = 0; m < ac->n && ok; m++) {
    BlkIndex *ix = index_of((BlkScan *)s, ac->idx[m]);
    ok = puts_(buf, len, cap, m ? "," : "");
    if (ix && ix->ext != t->dims[m])
      return diag_error(d, TJ_ERR_SHAPE, "index %s has extent %lld in %s (mode %d) but "
                        "%lld in %s (mode %d)", ix->name, (long long)ix->ext,
                        b->op[ix->ext_op].name, ix->ext_mode, (long long)t->dims[m], t->name, m);
    if (ix && ix->fr_op >= 0 && (ix->fr.lead || ix->fr.stride != 1)) {
      framed = true;
      frame[m][0] = ix->fr.lead, frame[m][1] = ix->fr.stride;
    }
    if (ix) {
      split[m] = ix->k;
      ok = ok && puts_(buf, len, cap, ix->outer) && puts_(buf, len, cap, ",") &&
           puts_(buf, len, cap, ix->inner);
    } else {
      ok = ok && puts_(buf, len, cap, ac->idx[m]);
    }
  }
  bool any = false;
  for (int m = 0; m < ac->n; m++) any |= split[m] > 0;
  if (bo->split_any && memcmp(bo->split, split, sizeof split))
    return diag_error(d, TJ_ERR_UNSUPPORTED, "%s is accessed with different blocked "
                      "indices in one expression", t->name);
  /* one copy of t serves every access: each must see its dims in one frame */
  if (bo->split_any && (bo->framed != framed || memcmp(bo->frame, frame, sizeof frame)))
    return diag_error(d, TJ_ERR_UNSUPPORTED, "%s is accessed through blocked indices that "
                      "the views cut at different offsets or strides within a block; one "
                      "blocked copy of %s serves every access, so give those views the same cut",
                      t->name, t->name);
  if (any) {
    bo->split_any = true, memcpy(bo->split, split, sizeof split);
    bo->framed = framed, memcpy(bo->frame, frame, sizeof frame);
  }
  return ok && puts_(buf, len, cap, ")");
}

static bool in_access(const BlkAccess *ac, const char *name) {
  for (int m = 0; m < ac->n; m++)
    if (!strcmp(ac->idx[m], name)) return true;
  return false;
}

static bool dynamic_slices(const tj_tensor *t) {
  for (int m = 0; m < t->order; m++)
    for (int c = 0; c < 3; c++)
      if (t->ufmt.slice[m][c] == TJ_SLICE_DYNAMIC) return true;
  return false;
}

static bool operand_name_used(const BlkScan *s, tj_tensor *const *ops, const DrvBlocked *b,
                              const char *name) {
  for (int a = 0; a < s->nacc; a++)
    if (!strcmp(tj_tensor_name(ops[s->acc[a].op]), name)) return true;
  for (int i = 0; i < b->nmask; i++)
    if (!strcmp(b->mask[i].name, name)) return true;
  return used_name(s, name);
}

static bool in_access(const BlkAccess *ac, const char *name);

/* Whether blocked dim m of view t is stored by a sparse (n_out_of_m) mod
 * level, whose window filters the level's positions. */
static bool sparse_mod(const tj_tensor *t, int m) {
  const tj_format *f = &t->base->ufmt;
  for (int l = 0; l < f->order; l++)
    if (f->lvl_op[l] == TJ_LVL_MOD && f->mode_order[l] == m) return f->levels[l] == 'n';
  return false;
}

/* Whether ac is the only access of a blocked operand indexed by its m-th
 * index: a window over a sparse level walks it alone (another would be
 * co-iterated with it, which windows do not do: those get masks). */
static bool alone(const BlkScan *s, tj_tensor *const *ops, const BlkAccess *ac, int m) {
  for (int a = 0; a < s->nacc; a++)
    if (&s->acc[a] != ac && ops[s->acc[a].op]->blocked && in_access(&s->acc[a], ac->idx[m]))
      return false;
  return true;
}

/* Whether dim m of the access ac of a view read in place is read through
 * a bool mask (open_masks); *windowed: through a block window instead. */
static bool masked_dim(const BlkScan *s, const BlkAccess *ac, tj_tensor *const *ops, bool out,
                       const DrvBlocked *b, int m, bool *windowed) {
  tj_tensor *t = ops[ac->op];
  RtBlockFrame fr;
  *windowed = false;
  if (!b->op[ac->op].view || b->op[ac->op].copy || ac->n != t->order) return false;
  if (!index_of((BlkScan *)s, ac->idx[m]) || !rt_block_frame(t, m, &fr) || !fr.masked)
    return false;
  if (out && in_access(&s->acc[0], ac->idx[m])) return false;
  *windowed = rt_block_windowed(t, m) && (!sparse_mod(t, m) || alone(s, ops, ac, m));
  return !*windowed;
}

static bool term_uses(const BlkScan *s, const char *name, int term);
typedef struct BlkTerms BlkTerms;

/* A blocked index's loops visit every position of its blocks: past the
 * extent (the last block's padding) and, in a view read through masks,
 * the frame's positions outside the view. Blocked operands are zero
 * there, so a sum over the index adds nothing there, unless a top-level
 * term that reads no such index is inside that sum (u(i) in `y(i) = u(i)
 * + A(i,j) * x(j) + B(i,j) * z(j)`, whose sum over j is the whole rhs):
 * it would be added once per position, not per column. Refused, naming
 * the fix (block windows, which visit only the view's positions, need
 * none of this). */
/* Whether index v is used by two top-level terms or more, and the sum
 * over the prefix of terms up to the last of them (the smallest
 * subexpression of the left-to-right sum holding every use) holds a term
 * that does not read v. */
static bool term_without(const BlkScan *s, const char *v, int nterms) {
  int uses = 0, upto = 0;
  for (int t = 1; t <= nterms; t++)
    if (term_uses(s, v, t)) uses++, upto = t;
  return uses >= 2 && uses < upto;
}

static bool padded_sum_beside_terms(const BlkScan *s, tj_tensor *const *ops, bool out,
                                    int nterms, const DrvBlocked *b, Diag *d) {
  for (int a = 1; a < s->nacc; a++)
    for (int m = 0; m < s->acc[a].n; m++) {
      const BlkAccess *ac = &s->acc[a];
      const BlkOperand *bo = &b->op[ac->op];
      RtBlockFrame fr;
      if (!bo->levels || ac->n != ops[ac->op]->order || (out && in_access(&s->acc[0], ac->idx[m])) ||
          (bo->windowed >> m & 1) || !operand_frame(ops[ac->op], bo, m, &fr))
        continue;
      bool masked = bo->view && !bo->copy && fr.masked, padded = fr.nb * fr.k != fr.size;
      if ((masked || padded) && term_without(s, ac->idx[m], nterms))
        return diag_error(d, TJ_ERR_UNSUPPORTED, "index %s is summed over a sum of terms one of "
                          "which does not read it, and %s's loops over %s visit positions that "
                          "are not %s's (%s); write the terms that read %s first (y(i) = "
                          "%s(i,j) * x(j) + ... + u(i) sums only them)", ac->idx[m], bo->name,
                          ac->idx[m], bo->name, masked ? "a view that cuts its blocks"
                                                       : "the last block's padding",
                          ac->idx[m], bo->name);
    }
  return true;
}

/* Before the access ac of a view read in place, for each of its dims
 * whose frame is masked (an edge block partly outside the slice, a
 * stride), one of:
 *  - nothing, when the dim's index is the output's (out: the expression
 *    assigns an access): the output is a split dense tensor, whose frame
 *    positions outside the view are dropped, or blocked, whose padding is
 *    zeroed after the run, so what lands there is never read;
 *  - a block window (its dim in the operand's `windowed`): the loop over
 *    the dim's mod level runs only over the view's coordinates of each
 *    block (tj_window, lower/level.c), where the mod level is dense, or
 *    walks the block's positions skipping the others, where it is
 *    n_out_of_m and no other blocked access has the index;
 *  - else `mask(M(d_b, d_i), `, M a bool operand of the frame's points
 *    that are the view's (*closing counts the parentheses to close after
 *    the access): a masked-out position is no entry, so sums and unions
 *    skip it. */
static bool open_masks(const BlkScan *s, const BlkAccess *ac, tj_tensor *const *ops,
                       bool out, DrvBlocked *b, int *closing, char **buf, size_t *len,
                       size_t *cap, Diag *d) {
  tj_tensor *t = ops[ac->op];
  for (int m = 0; m < ac->n; m++) {
    bool windowed;
    if (!masked_dim(s, ac, ops, out, b, m, &windowed)) {
      b->op[ac->op].windowed |= (uint32_t)windowed << m;
      continue;
    }
    const BlkIndex *ix = index_of((BlkScan *)s, ac->idx[m]);
    if (b->n + b->nmask >= NT_MAX_TENSORS)
      return diag_error(d, TJ_ERR_UNSUPPORTED, "more than %d operands with the masks of "
                        "view %s", NT_MAX_TENSORS, t->name);
    BlkMask *mk = &b->mask[b->nmask];
    char name[BLK_NAME];
    snprintf(name, sizeof name, "%s_m%d", t->name, m);
    while (operand_name_used(s, ops, b, name) && strlen(name) + 1 < sizeof name) strcat(name, "_");
    snprintf(mk->name, sizeof mk->name, "%s", name);
    mk->op = ac->op, mk->dim = m;
    b->nmask++;
    char text[3 * BLK_NAME + 32];
    snprintf(text, sizeof text, "mask(%s(%s,%s), ", mk->name, ix->outer, ix->inner);
    if (!puts_(buf, len, cap, text)) return false;
    (*closing)++;
  }
  return true;
}

/* Whether some view's access reads index name through block windows. */
static bool windowed_index(const BlkScan *s, const DrvBlocked *b, const char *name) {
  for (int a = 0; a < s->nacc; a++)
    for (int m = 0; m < s->acc[a].n; m++)
      if ((b->op[s->acc[a].op].windowed >> m & 1) && !strcmp(s->acc[a].idx[m], name))
        return true;
  return false;
}

/* Marks the framed dense inputs read in place: every framed dim's index
 * is read through block windows (the loops over it visit only the view's
 * positions, so nothing before or past the input's array is read). An
 * operand that is also the output (out: its index) is written at every
 * frame position: never in place. */
static void mark_in_place(const BlkScan *s, int out, DrvBlocked *b) {
  for (int k = 0; k < b->n; k++) b->op[k].in_place = !b->op[k].levels && b->op[k].framed;
  if (out >= 0) b->op[out].in_place = false;
  for (int a = 0; a < s->nacc; a++) {
    const BlkAccess *ac = &s->acc[a];
    BlkOperand *bo = &b->op[ac->op];
    for (int m = 0; m < ac->n && bo->in_place; m++)
      if (bo->frame[m][1] > 0) bo->in_place = windowed_index(s, b, ac->idx[m]);
  }
}

/* With one blocked operand, the loops follow its levels, and the indices
 * it does not have (SpMM's k) go just above its first level of a
 * reduction index (j_b) when an output index's level comes before that:
 * reorder(i_b, k, j_b, i_i, j_i). The loop over k vectorizes around the
 * block row; register promotion (lower/promote.c) jams i_i and keeps the
 * k-panel of C's 4 rows in accumulators across the row's blocks, so each
 * block is 16 broadcasts of its values times 4 vectors of B's rows: the
 * register-blocked micro-kernel. When the first level is a reduction's
 * (C(i,k) = B(i,j) * A(j,k), A blocked), the others go just above the
 * first in-block loop of a reduction index instead. */
/* Whether the kernel's output (if any) stores every level dense. */
static bool dense_output(const BlkScan *s, tj_tensor *const *ops, bool out_access) {
  if (!out_access) return true;
  const tj_format *f = &ops[s->acc[0].op]->ufmt;
  for (int l = 0; l < f->order; l++)
    if (!lv_at(f, l, LV_FULL)) return false;
  return true;
}

static bool loop_order(const BlkScan *s, tj_tensor *const *ops, bool out_access, char **sch,
                       size_t *len, size_t *cap) {
  const BlkAccess *blk = NULL;
  for (int a = 1; a < s->nacc; a++)
    if (ops[s->acc[a].op]->blocked) {
      if (blk && ops[blk->op] != ops[s->acc[a].op]) return true;
      blk = &s->acc[a];
    }
  if (!blk || ops[blk->op]->order != blk->n) return true;
  const tj_format *f = &ops[blk->op]->ufmt;
  char order[2 * TJ_MAX_ORDER + NT_MAX_INDICES][BLK_NAME + 8];
  int n = 0, at = -1;
  bool structured = !lv_at(f, f->order - 1, LV_FULL) && f->lvl_op[f->order - 1] == TJ_LVL_MOD;
  for (int l = 0; l < f->order; l++) {
    const char *name = blk->idx[f->mode_order[l]];
    const BlkIndex *ix = index_of((BlkScan *)s, name);
    bool first_red = at < 0 && !in_access(&s->acc[0], name);
    if (first_red && (l > 0 || f->lvl_op[l] == TJ_LVL_MOD || structured)) at = n;
    snprintf(order[n++], BLK_NAME + 8, "%s", f->lvl_op[l] == TJ_LVL_FLOORDIV ? ix->outer
                                             : f->lvl_op[l] == TJ_LVL_MOD    ? ix->inner : name);
  }
  int levels = n;
  for (int a = 0; a < s->nacc; a++)   /* the other indices, as they appear */
    for (int m = 0; m < s->acc[a].n; m++) {
      const char *name = s->acc[a].idx[m];
      bool seen = index_of((BlkScan *)s, name) != NULL;
      for (int k = 0; k < n && !seen; k++) seen = !strcmp(order[k], name);
      if (!seen && n < (int)(sizeof order / sizeof order[0]))
        snprintf(order[n++], BLK_NAME + 8, "%s", name);
    }
  /* the levels' order is the default's, but for a sparse output the
   * planner may put a workspace's loop (j of Y(i,j) = T(i,j,k) * x(k))
   * below the blocks, reading a 2:4 T through a transposed copy that no
   * n_out_of_m format can hold: keep the levels' order then */
  bool dense_out = dense_output(s, ops, out_access);
  if (at < 0 || (n == levels && dense_out)) return true;
  /* n_out_of_m SpMM: the dense block loop (j_b) is tiled, its tiles
   * outermost, so B's rows of one tile (BLK_TILE blocks of 2:4: 128 rows,
   * 64 KB with 64 columns) stay in cache for every row of A. Not into a
   * sparse output, which is appended in loop order: the tiles above its
   * rows would be refused (2:4 SpMM into CSR, TTM into `sss`). */
  char tile[BLK_NAME + 8] = "", inner[BLK_NAME + 8] = "";
  bool ok = true;
  if (structured && f->lvl_op[at] == TJ_LVL_FLOORDIV && lv_at(f, at, LV_FULL) && dense_out) {
    fresh(s, order[at], "o", tile);
    fresh(s, order[at], "n", inner);
    char dir[4 * BLK_NAME + 64];
    snprintf(dir, sizeof dir, "split(%s, %s, %s, %d) ", order[at], tile, inner, BLK_TILE);
    ok = puts_(sch, len, cap, dir);
    snprintf(order[at], BLK_NAME + 8, "%s", inner);
  }
  ok = ok && puts_(sch, len, cap, "reorder(") &&
       (!*tile || (puts_(sch, len, cap, tile) && puts_(sch, len, cap, ", ")));
  for (int k = 0; k < n && ok; k++) {   /* levels before at, the others, the rest */
    int pick = k < at ? k : k < at + (n - levels) ? levels + (k - at) : k - (n - levels);
    ok = puts_(sch, len, cap, k ? ", " : "") && puts_(sch, len, cap, order[pick]);
  }
  return ok && puts_(sch, len, cap, ") ");
}

/* What one top-level term of the right-hand side reads (term_kinds). */
struct BlkTerms {
  bool blocked_sum;    /* a term with a blocked access and an index of its own (a sum) */
  bool unblocked;      /* a term with no blocked access (a dense operand, a literal) */
  int n;               /* the terms, numbered 1 .. n */
};

/* Records what term `term` [from, to) of the right-hand side reads, its
 * number in its accesses. */
static void note_term(BlkScan *s, tj_tensor *const *ops, const char *from, const char *to,
                      int term, BlkTerms *tk) {
  bool blocked = false, sums = false;
  tk->n = term;
  for (int a = 1; a < s->nacc; a++) {
    BlkAccess *ac = &s->acc[a];
    if (ac->start < from || ac->start >= to) continue;
    ac->term = term;
    blocked |= ops[ac->op]->blocked;
    for (int m = 0; m < ac->n; m++) sums |= !in_access(&s->acc[0], ac->idx[m]);
  }
  tk->blocked_sum |= blocked && sums;
  tk->unblocked |= !blocked;
}

/* The right-hand side after the output access acc[0] cut at its `+` and
 * `-` outside parentheses (a sign that follows an operator, a '(' or
 * nothing is unary; a literal's exponent is no cut), each term noted. */
static BlkTerms term_kinds(BlkScan *s, tj_tensor *const *ops) {
  BlkTerms tk = {0};
  int term = 1;
  const char *p = skip_ws(s->acc[0].close + 1);
  p += *p == '+' ? 2 : 1;   /* `+=` or `=` */
  const char *from = p;
  char last = 0;            /* the last character outside spaces */
  for (int depth = 0; *p;) {
    const char *num = skip_number(p);
    if (num != p) {
      p = num, last = '0';
      continue;
    }
    depth += *p == '(' ? 1 : *p == ')' ? -1 : 0;
    bool operand_end = isalnum((unsigned char)last) || last == '_' || last == ')';
    if (depth == 0 && (*p == '+' || *p == '-') && operand_end) {
      note_term(s, ops, from, p, term++, &tk);
      from = p + 1;
    }
    if (!isspace((unsigned char)*p)) last = *p;
    p++;
  }
  note_term(s, ops, from, p, term, &tk);
  return tk;
}


/* Whether an index of the rhs (not the output's) is used by two terms or
 * more, the last of them the last term: summed over the whole rhs, which
 * a sequence cannot cut into statements. */
static bool whole_rhs_sum(const BlkScan *s, int nterms) {
  for (int a = 1; a < s->nacc; a++)
    for (int m = 0; m < s->acc[a].n; m++) {
      const char *v = s->acc[a].idx[m];
      int uses = 0;
      for (int t = 1; t <= nterms; t++) uses += term_uses(s, v, t);
      if (!in_access(&s->acc[0], v) && uses >= 2 && term_uses(s, v, nterms)) return true;
    }
  return false;
}

/* Whether the expression runs as a sequence of statements (sequence(),
 * jit/driver_sequence.c): a dense output defined by a sum over a blocked
 * operand plus terms that read none (`y(i) = V(i,j) * x(j) + u(i)`).
 * One nest would run u's loop over i_i inside V's levels, which the
 * blocks' constant loops cannot take; as `y = u`, then `y += V * x`, each
 * statement keeps its own loops. */
static bool wants_sequence(BlkScan *s, tj_tensor *const *ops, bool out_access) {
  if (!out_access || ops[s->acc[0].op]->blocked) return false;
  BlkTerms tk = term_kinds(s, ops);
  return tk.blocked_sum && tk.unblocked && !whole_rhs_sum(s, tk.n);
}

/* Whether index name is in an access of term `term` (any term: -1). */
static bool term_uses(const BlkScan *s, const char *name, int term) {
  for (int a = 1; a < s->nacc; a++)
    if ((term < 0 || s->acc[a].term == term) && in_access(&s->acc[a], name)) return true;
  return false;
}

/* Whether some operand is a view of an n_out_of_m tensor (its cut dims
 * walk block windows only where no other blocked access shares them). */
static bool structured_view(tj_tensor *const *ops, int n) {
  for (int k = 0; k < n; k++)
    if (ops[k] && ops[k]->blocked && ops[k]->base && rt_format_structured(&ops[k]->ufmt))
      return true;
  return false;
}

/* Gives each term of the rhs its own copy of an index that every term of
 * a prefix t1 + ... + tk of the rhs sums, and no later term uses
 * (`y(i) = V(i,j) * x(j) + V2(i,j) * z(j)` reads as `V(i,j) * x(j) +
 * V2(i,j_t2) * z(j_t2)`): a sum over that prefix (the smallest
 * subexpression holding every use) is the sum of the terms' sums
 * (plus.times: the only semiring over blocked operands),
 * and two views of n_out_of_m tensors sharing no index walk their block
 * windows alone, where one index would co-iterate them through masks.
 * Only with such a view, for an index that walks its window, and where
 * every use of the index stands at its term's top: inside a function
 * (`max(V2(i,j) * z(j), 0)`) the term's own copy would move the sum into
 * the function. BSR views take windows in either form, and one loop over j
 * is one pass over the output. */
/* Whether access a stands at the top of its term: no parenthesis of the
 * rhs is open at its name (not inside a function, a parenthesized sum or
 * a denominator's parentheses), so its term's sum over an index of its is
 * over the whole term. */
static bool at_term_top(const BlkScan *s, const BlkAccess *a) {
  int depth = 0;
  for (const char *p = s->acc[0].close + 1; p < a->start; p++)
    depth += *p == '(' ? 1 : *p == ')' ? -1 : 0;
  return depth == 0;
}

/* Whether index v walks a block window of a view of an n_out_of_m tensor
 * (it indexes a dim of such a view that a mod level stores): the only
 * index whose own copy per term saves masks. */
static bool structured_window_index(const BlkScan *s, tj_tensor *const *ops, const char *v) {
  for (int a = 1; a < s->nacc; a++) {
    const tj_tensor *t = ops[s->acc[a].op];
    if (!t->blocked || !t->base || !rt_format_structured(&t->ufmt)) continue;
    for (int l = 0; l < t->ufmt.order; l++) {
      int m = t->ufmt.mode_order[l];
      if (t->ufmt.lvl_op[l] == TJ_LVL_MOD && m < s->acc[a].n && !strcmp(s->acc[a].idx[m], v))
        return true;
    }
  }
  return false;
}

/* Whether every use of v in terms 1..upto is at its term's top. */
static bool summed_at_term_tops(const BlkScan *s, const char *v, int upto) {
  for (int a = 1; a < s->nacc; a++)
    if (s->acc[a].term >= 1 && s->acc[a].term <= upto && in_access(&s->acc[a], v) &&
        !at_term_top(s, &s->acc[a]))
      return false;
  return true;
}

static void split_shared_sums(BlkScan *s, tj_tensor *const *ops, int n, bool out_access) {
  if (!out_access || !structured_view(ops, n)) return;
  BlkTerms tk = term_kinds(s, ops);
  if (tk.n < 2) return;
  char names[BLK_MAX_ACC][BLK_NAME];
  int nnames = 0, last[BLK_MAX_ACC];
  for (int a = 1; a < s->nacc; a++)   /* summed indices used by each term of a prefix */
    for (int m = 0; m < s->acc[a].n; m++) {
      const char *v = s->acc[a].idx[m];
      int upto = 0;   /* the last term using v */
      for (int t = 1; t <= tk.n; t++) upto = term_uses(s, v, t) ? t : upto;
      bool every = !in_access(&s->acc[0], v) && upto >= 2 &&
                   structured_window_index(s, ops, v) && summed_at_term_tops(s, v, upto);
      for (int t = 1; t <= upto && every; t++) every = term_uses(s, v, t);
      for (int k = 0; k < nnames && every; k++) every = strcmp(names[k], v) != 0;
      if (every && nnames < BLK_MAX_ACC)
        last[nnames] = upto, snprintf(names[nnames++], BLK_NAME, "%s", v);
    }
  for (int k = 0; k < nnames; k++) {
    char renamed[BLK_MAX_ACC][BLK_NAME + 8];
    bool fits = last[k] <= BLK_MAX_ACC;
    for (int t = 2; t <= last[k] && fits; t++) {
      char suffix[16];
      snprintf(suffix, sizeof suffix, "_t%d", t);
      fresh(s, names[k], suffix, renamed[t - 1]);
      fits = strlen(renamed[t - 1]) < BLK_NAME;
    }
    for (int t = 2; t <= last[k] && fits; t++)   /* else one index (correct, masked) */
      for (int a = 1; a < s->nacc; a++)
        for (int m = 0; s->acc[a].term == t && m < s->acc[a].n; m++)
          if (!strcmp(s->acc[a].idx[m], names[k]))
            memcpy(s->acc[a].idx[m], renamed[t - 1], strlen(renamed[t - 1]) + 1);
  }
}

void drv_blocked_free(DrvBlocked *b) {
  if (!b) return;
  free(b->expr);
  free(b->schedule);
  free(b);
}

DrvBlocked *drv_blocked_plan(const char *expr, tj_tensor *const *ops, int n,
                             const char *schedule, Diag *d) {
  if (schedule && *skip_ws(schedule))
    return diag_error(d, TJ_ERR_UNSUPPORTED, "schedules over blocked operands are not "
                      "supported yet (the kernel's loops are the blocks' i_b, i_i)"), NULL;
  if (n > NT_MAX_TENSORS)
    return diag_error(d, TJ_ERR_INVALID, "more than %d operands", NT_MAX_TENSORS), NULL;
  BlkScan *s = calloc(1, sizeof *s);
  DrvBlocked *b = calloc(1, sizeof *b);
  char *buf = NULL, *sch = NULL;
  size_t len = 0, cap = 0, slen = 0, scap = 0;
  bool ok = s && b;
  if (!ok) diag_error(d, TJ_ERR_NOMEM, "out of memory");
  if (b) b->n = n;
  for (int k = 0; ok && k < n; k++)
    if (ops[k]) {
      snprintf(b->op[k].name, BLK_NAME, "%s", tj_tensor_name(ops[k]));
      b->op[k].view = ops[k]->blocked && ops[k]->base;
      b->op[k].copy = b->op[k].view && dynamic_slices(ops[k]);
    }
  ok = ok && scan(expr, ops, n, s, d);
  bool out_access = ok && s->nacc > 0 && s->acc[0].start == skip_ws(expr);   /* not `s = ...` */
  if (ok) split_shared_sums(s, ops, n, out_access);
  bool accum = out_access && !strncmp(skip_ws(s->acc[0].close + 1), "+=", 2);
  ok = ok && find_blocked(s, ops, out_access, accum, d) && same_block_orders(s, ops, d);
  if (out_access && b->op[s->acc[0].op].view)
    ok = diag_error(d, TJ_ERR_UNSUPPORTED, "output %s is a view (a slice of blocked tensor "
                    "%s); views are read-only: compute into a tensor of its own",
                    b->op[s->acc[0].op].name, tj_tensor_name(ops[s->acc[0].op]->base));
  ok = ok && resolve_frames(s, ops, b, d);
  const char *p = expr;
  for (int a = 0; ok && a < s->nacc; a++) {
    const BlkAccess *ac = &s->acc[a];
    int closing = 0;
    ok = put(&buf, &len, &cap, p, (size_t)(ac->start - p)) &&
         open_masks(s, ac, ops, out_access, b, &closing, &buf, &len, &cap, d) &&
         put(&buf, &len, &cap, ac->start, (size_t)(ac->open - ac->start)) &&
         rewrite_access(s, ac, ops[ac->op], b, &buf, &len, &cap, d);
    while (ok && closing-- > 0) ok = puts_(&buf, &len, &cap, ")");
    p = ac->close + 1;
  }
  ok = ok && puts_(&buf, &len, &cap, p);
  ok = ok && padded_sum_beside_terms(s, ops, out_access, out_access ? term_kinds(s, ops).n : 0,
                                     b, d);
  if (ok) mark_in_place(s, out_access ? s->acc[0].op : -1, b);
  if (ok && wants_sequence(s, ops, out_access)) ok = puts_(&sch, &slen, &scap, "sequence() ");
  ok = ok && loop_order(s, ops, out_access, &sch, &slen, &scap);
  for (int i = 0; ok && i < s->nix; i++) {   /* the block loops run k times */
    if (s->ix[i].sparse_inner) continue;
    char dir[3 * BLK_NAME + 64];
    snprintf(dir, sizeof dir, "%sbound(%s, %s_k, %d, max_exact)", slen ? " " : "",
             s->ix[i].inner, s->ix[i].inner, s->ix[i].k);
    ok = puts_(&sch, &slen, &scap, dir);
  }
  if (ok && !buf) diag_error(d, TJ_ERR_NOMEM, "out of memory"), ok = false;
  if (!ok) {
    if (diag_ok(d)) diag_error(d, TJ_ERR_NOMEM, "out of memory");
    free(buf), free(sch), free(s), free(b);
    return NULL;
  }
  b->n = n;
  b->out_op = out_access ? s->acc[0].op : -1;
  b->out_keeps = out_access && !strncmp(skip_ws(s->acc[0].close + 1), "+=", 2);
  if (out_access && ops[s->acc[0].op]->blocked) {
    b->out_blocked = b->op[s->acc[0].op].name;
    b->out_structured = rt_format_structured(&ops[s->acc[0].op]->ufmt);
    b->out_accum = !strncmp(skip_ws(s->acc[0].close + 1), "+=", 2);
  }
  b->expr = buf;
  b->schedule = sch;
  b->norig = n;
  for (int k = 0; k < n; k++) b->orig[k] = ops[k];
  free(s);
  return b;
}

/* The first blocked input of b (its name), NULL when none. */
static const char *blocked_input(const DrvBlocked *b) {
  for (int k = 0; k < b->n; k++)
    if (b->op[k].levels && k != b->out_op) return b->op[k].name;
  return NULL;
}

tj_status drv_blocked_explain(const DrvBlocked *b, const char *expr, tj_status st) {
  const char *msg = tj_last_error(), *comma = strchr(msg, ',');
  const char *input = blocked_input(b);
  if (st == TJ_OK || st == TJ_ERR_NOMEM || !input || !b->schedule || strncmp(msg, "bound(", 6) ||
      !comma || !strstr(b->schedule, "bound("))
    return st;
  char directive[BLK_NAME + 16];   /* `bound(j_i`: one the plan added? */
  snprintf(directive, sizeof directive, "%.*s,", (int)(comma - msg), msg);
  if (!strstr(b->schedule, directive)) return st;
  /* the likeliest cause, and the planner's own words (on a directive the
   * user did not write) in case it is another */
  char said[512];
  snprintf(said, sizeof said, "%s", msg);
  return rt_set_error(TJ_ERR_UNSUPPORTED, "%s: a sum over the blocks of %s sits inside a "
                      "function, a product or a parenthesized sum with operands that are not "
                      "blocked, where the loops over its blocks cannot run; write the sum as a "
                      "term of the right-hand side (y(i) = %s(i,j) * x(j) + u(i) runs as "
                      "statements in turn) or convert %s to CSR (the planner, on a directive "
                      "tensorjit added for the blocks: %s)",
                      expr, input, input, input, said);
}

const char *drv_blocked_expr(const DrvBlocked *b) { return b->expr; }
const char *drv_blocked_output(const DrvBlocked *b) { return b->out_blocked; }
bool drv_blocked_rebuilds(const DrvBlocked *b) { return b->out_structured; }
const char *drv_blocked_schedule(const DrvBlocked *b) { return b->schedule; }
tj_tensor *const *drv_blocked_orig(const DrvBlocked *b, int *n) {
  *n = b->norig;
  return b->orig;
}
tj_tensor *drv_blocked_compile_views(DrvBlocked *b) { return b->views; }

static bool make_view(const DrvBlocked *b, tj_tensor *const *ops, int k, tj_tensor *store,
                      bool overwrite, tj_tensor **out, Diag *d);
static tj_status finish_views(const DrvBlocked *b, tj_tensor *const *ops,
                              tj_tensor *const *views, int n, int nmasks,
                              const char *out_name, bool ok);

/* Whether t is b's n_out_of_m output, which a kernel writes into a stand-in. */
static bool is_structured_out(const DrvBlocked *b, const tj_tensor *t) {
  return b->out_structured && t->blocked && !strcmp(tj_tensor_name(t), b->out_blocked);
}

int drv_blocked_masks(const DrvBlocked *b) { return b->nmask; }

/* The role of operand t (by name: a run may bind operands in any order). */
static const BlkOperand *role_of(const DrvBlocked *b, const tj_tensor *t) {
  for (int j = 0; t && j < b->n; j++)
    if (!strcmp(b->op[j].name, tj_tensor_name(t))) return &b->op[j];
  return NULL;
}

/* out[n + i] = mask i, from its view's frame at this run. */
static bool make_mask(const DrvBlocked *b, tj_tensor *const *ops, int n, int i,
                      tj_tensor **out, Diag *d) {
  const BlkMask *mk = &b->mask[i];
  RtBlockFrame fr;
  const tj_tensor *t = NULL;
  for (int k = 0; k < n; k++)
    if (ops[k] && !strcmp(tj_tensor_name(ops[k]), b->op[mk->op].name)) t = ops[k];
  if (!t || !t->base || !rt_block_frame(t, mk->dim, &fr))
    return diag_error(d, TJ_ERR_INVALID, "operand %s was compiled as a view of a blocked "
                      "tensor but is not", b->op[mk->op].name);
  tj_status st = rt_block_frame_mask(mk->name, &fr, &out[n + i]);
  return st == TJ_OK || diag_error(d, st, "%s", tj_last_error());
}

bool drv_blocked_views(const DrvBlocked *b, tj_tensor *const *ops, int n, tj_tensor *store,
                       bool overwrite, tj_tensor **out, Diag *d) {
  for (int k = 0; k < n + b->nmask; k++) out[k] = k < n ? ops[k] : NULL;
  for (int k = 0; k < n; k++) {
    if (!make_view(b, ops, k, store, overwrite, out, d)) {
      finish_views(b, ops, out, k, 0, NULL, false);   /* frees the copies made */
      return false;
    }
  }
  for (int i = 0; i < b->nmask; i++)
    if (!make_mask(b, ops, n, i, out, d)) {
      finish_views(b, ops, out, n, i, NULL, false);
      return false;
    }
  return true;
}

/* out[k] = a converted copy of view ops[k] (blocked, the view's extents,
 * its own blocks from 0) seen as the tensor of its levels; freed by
 * drv_blocked_finish. An n_out_of_m level is copied as a compressed one
 * (the output stand-in's format): the view's blocks from 0 are not the
 * base's, so one may hold more than n of the base's entries (1:4 over
 * columns 3 and 4, viewed from column 2); the plan treats both as a
 * sparse mod level. */
static bool make_copy(tj_tensor *const *ops, int k, tj_tensor **out, Diag *d) {
  tj_format f = ops[k]->ufmt;
  rt_format_unslice(&f);
  rt_format_unstructure(&f);
  tj_tensor *c;
  tj_status st = tj_tensor_convert(ops[k], &f, &c);
  if (st != TJ_OK) return diag_error(d, st, "%s", tj_last_error());
  rt_tensor_become_levels(c);
  out[k] = c;
  return true;
}

static bool make_view(const DrvBlocked *b, tj_tensor *const *ops, int k, tj_tensor *store,
                      bool overwrite, tj_tensor **out, Diag *d) {
  {
    if (!ops[k]) return true;
    const BlkOperand *bo = role_of(b, ops[k]);
    if (!bo || (!bo->levels && !bo->split_any)) {
      if (ops[k]->blocked)
        return diag_error(d, TJ_ERR_INVALID, "operand %s is blocked but was compiled "
                          "unblocked", tj_tensor_name(ops[k]));
      return true;
    }
    if (bo->levels) {
      if (!ops[k]->blocked)
        return diag_error(d, TJ_ERR_INVALID, "operand %s was compiled blocked but is not",
                          tj_tensor_name(ops[k]));
      if (bo->view != (ops[k]->base != NULL))
        return diag_error(d, TJ_ERR_INVALID, "operand %s was compiled %s a view of a "
                          "blocked tensor", tj_tensor_name(ops[k]), bo->view ? "as" : "as no");
      if (bo->copy) return make_copy(ops, k, out, d);
      if (bo->view) {
        rt_tensor_view_levels_sliced(ops[k], bo->windowed, &store[k]);
        out[k] = &store[k];
        return true;
      }
      if (is_structured_out(b, ops[k])) {   /* its stand-in, freed by finish */
        tj_status st = rt_tensor_structured_temp(ops[k], b->out_accum, &out[k]);
        return st == TJ_OK || diag_error(d, st, "%s", tj_last_error());
      }
      rt_tensor_view_levels(ops[k], &store[k]);
    } else {
      bool output = b->out_op >= 0 && bo == &b->op[b->out_op];
      unsigned how = (bo->in_place ? RT_SPLIT_IN_PLACE : 0) |
                     (overwrite && output && !b->out_keeps ? RT_SPLIT_NO_COPY_IN : 0);
      tj_status st = rt_tensor_view_split(ops[k], bo->split, bo->framed ? bo->frame : NULL,
                                          how, &store[k]);
      if (st != TJ_OK) return diag_error(d, st, "%s", tj_last_error());
    }
    out[k] = &store[k];
  }
  return true;
}

tj_status drv_blocked_finish(const DrvBlocked *b, tj_tensor *const *ops,
                             tj_tensor *const *views, int n, const char *out_name, bool ok) {
  return finish_views(b, ops, views, n, b->nmask, out_name, ok);
}

/* drv_blocked_finish with the first nmasks masks made. */
static tj_status finish_views(const DrvBlocked *b, tj_tensor *const *ops,
                              tj_tensor *const *views, int n, int nmasks,
                              const char *out_name, bool ok) {
  tj_status st = TJ_OK;
  for (int i = 0; i < nmasks; i++) tj_tensor_free(views[n + i]);
  for (int k = 0; k < n; k++) {
    if (!ops[k] || views[k] == ops[k]) continue;
    bool output = out_name && !strcmp(tj_tensor_name(ops[k]), out_name);
    if (ops[k]->base && ops[k]->blocked) {   /* a view: its converted copy goes */
      const BlkOperand *bo = role_of(b, ops[k]);
      if (bo && bo->copy) tj_tensor_free(views[k]);
    } else if (is_structured_out(b, ops[k])) {   /* repacked: a block that does not fit fails */
      if (output && ok) st = rt_tensor_assign_levels(ops[k], views[k], b->out_accum);
      tj_tensor_free(views[k]);
    } else if (ops[k]->blocked && output) {
      rt_tensor_view_levels_finish(ops[k], views[k]);
    } else if (!ops[k]->blocked) {
      rt_tensor_view_finish(ops[k], views[k], output && ok);
    }
  }
  return st;
}

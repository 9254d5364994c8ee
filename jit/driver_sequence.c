/* sequence(S1, S2, ...): a dense output defined by one statement and
 * updated by the next ones, each its own loop nest in one kernel.
 *
 *   A(i,j) = B(i,k) * C(k,j) + D(i,j)
 *   sequence(forall(i, forall(j, A(i,j) = D(i,j))),
 *            forall(i, forall(k, forall(j, A(i,j) += B(i,k) * C(k,j)))))
 *
 * ir/sequence.c splits the assignment; here each statement is planned as
 * a single statement is (its loop order, schedule, GETT method), and the
 * entry takes the statements' conversions. By default an assignment runs
 * as a sequence only when a statement is a dense contraction GETT takes
 * (bench/README.md, sequences: GEMM plus a matrix); elsewhere one nest with
 * a temp per sum costs one pass over the output fewer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/level.h"
#include "driver.h"

/* Whether only directives a sequence leaves alone by default are in s. */
static bool default_schedule(const Schedule *s) {
  for (int k = 0; k < s->n; k++) {
    SchedKind kd = s->d[k].kind;
    if (kd == SCHED_METHOD && strcmp(s->d[k].arg, "sell") == 0) return false;
    if (kd != SCHED_PARALLELIZE && kd != SCHED_METHOD) return false;
  }
  return true;
}

/* The fewest flops of a dense contraction statement for which the default
 * takes the sequence: GEMM plus a matrix, one thread, thread CPU, load 9
 * on 2 cores, against the one-nest form: n = 128 (4e6 flops) 0.7-0.8x,
 * 256 (3.4e7) 0.8-1.1x, 320 (6.6e7) and 384 (1.1e8) 1.0x, 448 1.2x, 512 1.1-1.2x,
 * 1024 2.7-2.8x; at load 6, 512 0.95-1.0x, 1024 1.4-1.8x (bench/README.md,
 * sequences). */
#define SEQ_MIN_FLOPS 1e8

/* 2 x the product of as's extents (unknown extents count 1). */
static double flops(const Assignment *as) {
  double f = 2;
  for (int v = 0; v < as->nindices; v++)
    if (as->indices[v]->extent > 0) f *= (double)as->indices[v]->extent;
  return f;
}

int drv_sequence_wanted(Arena *a, const Assignment *as, const Schedule *s, Assignment **parts,
                        Diag *d) {
  const SchedDirective *yes = NULL, *no = NULL;
  for (int k = 0; k < s->n; k++) {
    if (s->d[k].kind == SCHED_SEQUENCE) yes = &s->d[k];
    if (s->d[k].kind == SCHED_NOSEQUENCE) no = &s->d[k];
  }
  if (yes && no)
    return diag_error(d, TJ_ERR_INVALID, "sequence() and nosequence() in one schedule"), -1;
  char why[160];
  if (no || (!yes && (!default_schedule(s) || !nt_sequence_why_not(as, why, sizeof why))))
    return 0;
  int n = nt_sequence_split(a, as, parts, d);
  if (n == 0) return -1;
  if (yes) return n;
  for (int p = 0; p < n; p++)
    if (lower_gett_form(parts[p]) && flops(parts[p]) >= SEQ_MIN_FLOPS) return n;
  return 0;
}

/* The loop names of one statement: its indices, then the names the loop
 * rewrites it takes make (split's halves, pos's position variable, ...). */
typedef struct Names {
  int n;
  const char *name[NT_MAX_INDICES * 4];
} Names;

static bool named_in(const Names *nm, const char *v) {
  for (int k = 0; k < nm->n; k++)
    if (strcmp(nm->name[k], v) == 0) return true;
  return false;
}

static void add_name(Names *nm, const char *v) {
  if (nm->n < (int)(sizeof nm->name / sizeof nm->name[0])) nm->name[nm->n++] = v;
}

/* Whether part reads a tensor called name. */
static bool reads_named(const Assignment *part, const char *name) {
  for (int t = 1; t < part->ntensors; t++)
    if (strcmp(part->tensors[t]->name, name) == 0 && nt_reads_tensor(part->rhs, t)) return true;
  return false;
}

/* Whether the loop rewrite sd applies to a statement with the loops nm
 * (every loop it names is one of them; pos: the statement reads the
 * access's tensor), adding the names it makes. */
static bool takes_rewrite(const SchedDirective *sd, const Assignment *part, Names *nm) {
  switch (sd->kind) {
  case SCHED_SPLIT:
  case SCHED_DIVIDE:
    if (!named_in(nm, sd->vars[0])) return false;
    add_name(nm, sd->vars[1]);
    add_name(nm, sd->vars[2]);
    return true;
  case SCHED_BOUND:
    if (!named_in(nm, sd->vars[0])) return false;
    add_name(nm, sd->vars[1]);
    return true;
  case SCHED_POS:
    if (!named_in(nm, sd->vars[0]) || !reads_named(part, sd->vars[2])) return false;
    add_name(nm, sd->vars[1]);
    return true;
  case SCHED_FUSE:
    if (!named_in(nm, sd->vars[0]) || !named_in(nm, sd->vars[1])) return false;
    add_name(nm, sd->vars[2]);
    return true;
  default: return false;
  }
}

/* The directives of s for statement part: sequence() dropped, reorder
 * restricted to the statement's loops, parallelize / vectorize / unroll
 * where the statement has the loop, a loop rewrite where it has the loops
 * the rewrite names, precompute where its subexpression is in the
 * statement, method where it is a dense contraction (loops and model
 * everywhere); taken[k] set for each directive k the statement takes. */
static bool part_schedule(Arena *a, const Schedule *s, const Assignment *part, Schedule *out,
                          bool *taken, Diag *d) {
  *out = (Schedule){.src = s->src};
  Names nm = {0};
  for (int v = 0; v < part->nindices; v++) add_name(&nm, part->indices[v]->name);
  for (int k = 0; k < s->n; k++) {
    SchedDirective sd = s->d[k];
    switch (sd.kind) {
    case SCHED_SEQUENCE:
    case SCHED_NOSEQUENCE: continue;
    case SCHED_REORDER: {
      int m = 0;
      for (int q = 0; q < sd.nvars; q++)
        if (named_in(&nm, sd.vars[q])) sd.vars[m++] = sd.vars[q];
      sd.nvars = m;
      if (m < 2) continue;
      break;
    }
    case SCHED_PARALLELIZE:
    case SCHED_VECTORIZE:
    case SCHED_UNROLL:
      if (!named_in(&nm, sd.vars[0])) continue;
      break;
    case SCHED_SPLIT:
    case SCHED_DIVIDE:
    case SCHED_POS:
    case SCHED_BOUND:
    case SCHED_FUSE:
      if (!takes_rewrite(&sd, part, &nm)) continue;
      break;
    case SCHED_PRECOMPUTE: {
      Precompute pc;
      Diag none;
      diag_init(&none);
      if (!nt_precompute_parse(a, part, &sd, &pc, &none)) continue;
      break;
    }
    case SCHED_METHOD:
      if (strcmp(sd.arg, "sell") == 0)
        return diag_error(d, TJ_ERR_UNSUPPORTED, "sequence(): method(sell) runs one SpMV "
                          "statement; use nosequence()");
      if (strcmp(sd.arg, "loops") != 0 && strcmp(sd.arg, "model") != 0 && !lower_gett_form(part))
        continue;
      break;
    }
    taken[k] = true;
    out->d[out->n++] = sd;
  }
  return true;
}

/* A loop rewrite or precompute that no statement took names a loop or a
 * subexpression the sequence does not have. */
static bool all_taken(const Schedule *s, const bool *taken, Diag *d) {
  for (int k = 0; k < s->n; k++) {
    SchedKind kd = s->d[k].kind;
    if (taken[k] || (kd != SCHED_PRECOMPUTE && kd < SCHED_SPLIT)) continue;
    char *what = nt_directive_text(&s->d[k]);
    bool ok = diag_error(d, TJ_ERR_INVALID, "sequence(): no statement of the sequence has %s "
                         "of %s", kd == SCHED_PRECOMPUTE ? "the subexpression" : "the loops",
                         what ? what : "a directive");
    free(what);
    return ok;
  }
  return true;
}

/* Whether plan sp reads operand t in place through a level stored without
 * order (a `do` SpMV's), which a sorted copy would store in order. */
static bool unordered_in_place(const LowerPlan *sp, int t) {
  tj_format f = sp->fmt[t];
  return !sp->convert[t] && !sp->pattern[t] && lv_make_ordered(&f);
}

/* Where one statement reads an operand through a copy that another reads
 * in place (its duplicates walked one by one, lower/dup_walk.c, or a level
 * stored without order walked alone), the other reads the copy too: the
 * kernel holds one array set per operand. Repeated until no statement
 * changes (a copy only ever replaces). */
static void share_copies(CacheEntry *e, const Assignment *as) {
  for (bool changed = true; changed;) {
    changed = false;
    for (int t = 1; t < as->ntensors; t++) {
      bool in_place = false;
      const LowerPlan *copy = NULL;
      for (int q = 0; q < e->nseq; q++) {
        const LowerPlan *sp = &e->seq[q].plan;
        if (!nt_reads_tensor(e->seq[q].as->rhs, t)) continue;
        if (sp->convert[t] && !sp->pattern[t] && !copy) copy = sp;
        in_place |= (sp->dups_walked[t] && !sp->convert[t]) || unordered_in_place(sp, t);
      }
      if (!copy || !in_place) continue;
      for (int q = 0; q < e->nseq; q++) {
        LowerPlan *sp = &e->seq[q].plan;
        if (!nt_reads_tensor(e->seq[q].as->rhs, t) || sp->convert[t]) continue;
        if (sp->dups_walked[t]) {
          lower_plan_recheck_dups(e->seq[q].as, sp, true);
          changed = true;
        }
        if (unordered_in_place(sp, t)) {   /* reads the sorted copy */
          lv_make_ordered(&sp->fmt[t]);
          sp->convert[t] = true;
          sp->copy_why[t] = copy->copy_why[t];
          changed = true;
        }
      }
    }
  }
}

/* e->plan: the first statement's, with every statement's conversions; no
 * row chunks (the kernel runs whole, its nests' own loops in parallel). */
static bool merge_plans(CacheEntry *e, const Assignment *as, Diag *d) {
  LowerPlan *p = &e->plan;
  share_copies(e, as);
  *p = e->seq[0].plan;
  for (int t = 1; t < as->ntensors; t++) {
    const SeqStmt *by = NULL;
    for (int q = 0; q < e->nseq; q++) {
      const SeqStmt *st = &e->seq[q];
      if (!nt_reads_tensor(st->as->rhs, t)) continue;
      if (!by) {
        by = st;
        continue;
      }
      if (st->plan.convert[t] != by->plan.convert[t] || st->plan.pattern[t] != by->plan.pattern[t] ||
          memcmp(&st->plan.fmt[t], &by->plan.fmt[t], sizeof st->plan.fmt[t]) != 0)
        return diag_error(d, TJ_ERR_UNSUPPORTED, "sequence(): two statements read %s in "
                          "different formats (one converts it); use nosequence()",
                          as->tensors[t]->name);
    }
    if (!by) continue;
    p->fmt[t] = by->plan.fmt[t];
    p->convert[t] = by->plan.convert[t];
    p->pattern[t] = by->plan.pattern[t];
    p->vec_layout[t] = by->plan.vec_layout[t];
    p->copy_why[t] = by->plan.copy_why[t];
  }
  p->rangeable = p->reduce_rows = false;
  p->pos_rows = p->out_like = p->seg_rows = 0;
  return true;
}

bool drv_plan_sequence(CacheEntry *e, Assignment *as, const Schedule *s, Assignment **parts,
                       int n, DrvPlanStmt plan, Diag *d) {
  e->seq = arena_alloc(&e->arena, sizeof *e->seq * (size_t)n);
  CacheEntry *sub = malloc(sizeof *sub);   /* e's settings; its plan, options, method */
  if (!e->seq || !sub) {
    free(sub);
    return diag_error(d, TJ_ERR_NOMEM, "out of memory while planning");
  }
  bool ok = true, taken[sizeof s->d / sizeof s->d[0]] = {0};
  for (int q = 0; q < n && ok; q++) {
    Schedule ps;
    memcpy(sub, e, sizeof *sub);   /* its arena is e's: handed back below */
    sub->nseq = 0;
    Assignment *part = NULL;
    ok = part_schedule(&sub->arena, s, parts[q], &ps, taken, d) &&
         (part = nt_precompute_scalars(&sub->arena, parts[q], &ps, d)) &&
         plan(sub, part, &ps, d);
    e->arena = sub->arena;
    if (ok) e->seq[q] = (SeqStmt){sub->as, sub->cin, sub->plan, sub->opt, sub->gett, 0};
  }
  free(sub);
  if (!ok || !all_taken(s, taken, d)) return false;
  e->nseq = n;
  Cin *c = e->seq[n - 1].cin;
  for (int q = n - 2; q >= 0 && c; q--) c = cin_sequence(&e->arena, e->seq[q].cin, c);
  if (!c) return diag_error(d, TJ_ERR_NOMEM, "out of memory while planning");
  e->as = as;
  e->cin = c;
  e->opt = e->seq[0].opt;
  e->opt.extents = as;
  e->opt.vec_width = 0;
  for (int q = 0; q < n; q++)
    if (e->seq[q].opt.vec_width) e->opt.vec_width = e->seq[q].opt.vec_width;
  lower_gett_plan(as, e->opt.vector_bits, GETT_LOOPS, &e->gett);   /* the statements' own */
  return merge_plans(e, as, d);
}

LirKernel *drv_lower_sequence(CacheEntry *e, Arena *a, int v, const char *name, Diag *d) {
  bool plain = v >= DRV_PLAIN(0);
  if (!plain && v >= 3)
    return TJ_BUG(d, "a row-range or combine kernel of a sequence"), NULL;
  LowerPhase ph = (LowerPhase)(plain ? v - DRV_PLAIN(0) : v);
  LowerInput in[NT_SEQ_MAX];
  const GettPlan *g[NT_SEQ_MAX];
  for (int q = 0; q < e->nseq; q++) {
    SeqStmt *st = &e->seq[q];
    LowerPlan *pp = &st->plan;
    if (plain) {   /* as drv_lower_variant: the vec_layout copies undone */
      if (!(pp = arena_alloc(a, sizeof *pp))) return NULL;
      *pp = st->plan;
      for (int t = 0; t < st->as->ntensors; t++)
        if (pp->vec_layout[t]) {
          pp->fmt[t] = st->as->tensors[t]->decl.format;
          pp->convert[t] = pp->vec_layout[t] = false;
        }
    }
    in[q] = (LowerInput){st->cin, lower_operands(st->as), pp, &st->opt};
    g[q] = &st->gett;
  }
  return lower_kernel_seq(a, in, g, e->nseq, ph, name, d);
}

/* Concrete index notation and schedule directives.
 *
 * cin_from_assignment nests one forall per index variable around the
 * assignment: the output's indices in output order, then the summed
 * indices in first-use order; then reorder / parallelize / vectorize from
 * the schedule are applied to that loop list (precompute is kept as text
 * for lowering, which builds the where() around a workspace). Inside the
 * nest a reduction reads as `+=` (or `min=`, `*=`: its operator's): the
 * loops accumulate into the output, which `=` sets to the identity first. Schedules are text: "reorder(i,k,j)
 * parallelize(i) vectorize(j,8) precompute(B(i,k)*C(k,j), j, w)", the
 * directives separated by blanks, commas or semicolons.
 */
#include "notation.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* ---- constructors ---- */

Cin *cin_forall(Arena *a, IndexVar *iv, Cin *body) {
  Cin *c = arena_alloc(a, sizeof *c);
  if (!c) return NULL;
  c->kind = CIN_FORALL;
  c->u.forall.iv = iv;
  c->u.forall.body = body;
  return c;
}

Cin *cin_where(Arena *a, Cin *consumer, Cin *producer, TensorVar *ws) {
  Cin *c = arena_alloc(a, sizeof *c);
  if (!c) return NULL;
  c->kind = CIN_WHERE;
  c->u.where.consumer = consumer;
  c->u.where.producer = producer;
  c->u.where.ws = ws;
  return c;
}

Cin *cin_sequence(Arena *a, Cin *first, Cin *second) {
  Cin *c = arena_alloc(a, sizeof *c);
  if (!c) return NULL;
  c->kind = CIN_SEQUENCE;
  c->u.seq.first = first;
  c->u.seq.second = second;
  return c;
}

Cin *cin_assign(Arena *a, Expr *lhs, Expr *rhs, bool accumulate) {
  Cin *c = arena_alloc(a, sizeof *c);
  if (!c) return NULL;
  c->kind = CIN_ASSIGN;
  c->u.assign.lhs = lhs;
  c->u.assign.rhs = rhs;
  c->u.assign.accumulate = accumulate;
  c->u.assign.op = OP_ADD;
  return c;
}

/* ---- default loop order and schedule application ---- */

typedef struct Loops {
  int n;
  IndexVar *iv[NT_MAX_INDICES];
  unsigned flags[NT_MAX_INDICES];
  int vec_width[NT_MAX_INDICES];
  int unroll[NT_MAX_INDICES];
  int par[NT_MAX_INDICES];
} Loops;

static int loop_pos(const Loops *l, const char *name) {
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->iv[i]->name, name) == 0) return i;
  return -1;
}

static void add_loop(Loops *l, IndexVar *v) {
  for (int i = 0; i < l->n; i++)
    if (l->iv[i] == v) return;
  if (l->n < NT_MAX_INDICES) l->iv[l->n++] = v;
}

/* Appends e's indices in first-use order. */
static void collect(Loops *l, const Expr *e) {
  if (e->kind == EX_ACCESS) {
    for (int m = 0; m < e->u.access.n; m++) add_loop(l, e->u.access.idx[m]);
    return;
  }
  Expr *k[2];
  int n = nt_children(e, k);
  for (int i = 0; i < n; i++) collect(l, k[i]);
}

/* Moves the indices that sum nodes bind behind the others, in preorder of
 * the sums (outer sums first): each sum's loop nests inside its parent's. */
static void sums_last(Loops *l, const Expr *rhs) {
  const Expr *s[NT_MAX_INDICES];
  int ns = nt_sums(rhs, s, NT_MAX_INDICES);
  if (ns == 0) return;
  Loops kept = {0};
  for (int i = 0; i < l->n; i++) {
    bool bound = false;
    for (int k = 0; k < ns && k < NT_MAX_INDICES; k++) bound |= s[k]->u.sum.iv == l->iv[i];
    if (!bound) add_loop(&kept, l->iv[i]);
  }
  for (int k = 0; k < ns && k < NT_MAX_INDICES; k++) add_loop(&kept, s[k]->u.sum.iv);
  *l = kept;
}

static bool sched_err(const Schedule *s, const SchedDirective *sd, Diag *d,
                      const char *what, const char *name) {
  if (s->src && sd->col > 0)
    return diag_error_at(d, TJ_ERR_INVALID, s->src, sd->col,
                         "%s: unknown index '%s'", what, name);
  return diag_error(d, TJ_ERR_INVALID, "%s: unknown index '%s'", what, name);
}

/* Places sd's variables, in sd's order, into the slots they occupy. */
static bool apply_reorder(Loops *l, const Schedule *s,
                          const SchedDirective *sd, Diag *d) {
  int pos[NT_MAX_INDICES];
  for (int k = 0; k < sd->nvars; k++) {
    pos[k] = loop_pos(l, sd->vars[k]);
    if (pos[k] < 0) return sched_err(s, sd, d, "reorder", sd->vars[k]);
    for (int j = 0; j < k; j++)
      if (pos[j] == pos[k])
        return diag_error(d, TJ_ERR_INVALID, "reorder: index '%s' appears "
                          "twice", sd->vars[k]);
  }
  IndexVar *vars[NT_MAX_INDICES];
  for (int k = 0; k < sd->nvars; k++) vars[k] = l->iv[pos[k]];
  int sorted[NT_MAX_INDICES];
  memcpy(sorted, pos, sizeof(int) * (size_t)sd->nvars);
  for (int i = 1; i < sd->nvars; i++) /* insertion sort of the slots */
    for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
      int t = sorted[j];
      sorted[j] = sorted[j - 1];
      sorted[j - 1] = t;
    }
  for (int k = 0; k < sd->nvars; k++) l->iv[sorted[k]] = vars[k];
  return true;
}

static bool apply(Loops *l, const Schedule *s, Diag *d) {
  for (int i = 0; s && i < s->n; i++) {
    const SchedDirective *sd = &s->d[i];
    int p = sd->nvars > 0 ? loop_pos(l, sd->vars[0]) : -1;
    switch (sd->kind) {
    case SCHED_REORDER:
      if (!apply_reorder(l, s, sd, d)) return false;
      break;
    case SCHED_PARALLELIZE:
      if (p < 0) return sched_err(s, sd, d, "parallelize", sd->vars[0]);
      l->flags[p] |= CIN_PARALLEL;
      l->par[p] = sd->width;
      break;
    case SCHED_VECTORIZE:
      if (p < 0) return sched_err(s, sd, d, "vectorize", sd->vars[0]);
      l->vec_width[p] = sd->width;
      break;
    case SCHED_UNROLL:
      if (p < 0) return sched_err(s, sd, d, "unroll", sd->vars[0]);
      l->unroll[p] = sd->width;
      break;
    case SCHED_PRECOMPUTE: break; /* lowering builds the where() */
    case SCHED_METHOD: break;     /* the driver's choice of kernel */
    }
  }
  return true;
}

/* forall(v, body) with the flags the schedule gave v. */
static Cin *scheduled_forall(Arena *a, const Loops *l, IndexVar *v, Cin *body) {
  Cin *c = body ? cin_forall(a, v, body) : NULL;
  for (int i = 0; c && i < l->n; i++)
    if (l->iv[i] == v) {
      c->u.forall.flags = l->flags[i];
      c->u.forall.vec_width = l->vec_width[i];
      c->u.forall.unroll = l->unroll[i];
      c->u.forall.par = l->par[i];
    }
  return c;
}

/* forall over from's index with from's flags, around body. */
static Cin *forall_like(Arena *a, const Cin *from, Cin *body) {
  Cin *c = body ? cin_forall(a, from->u.forall.iv, body) : NULL;
  if (c) {
    c->u.forall.flags = from->u.forall.flags;
    c->u.forall.vec_width = from->u.forall.vec_width;
    c->u.forall.unroll = from->u.forall.unroll;
    c->u.forall.par = from->u.forall.par;
  }
  return c;
}

const char *cin_strategy_name(int strategy) {
  static const char *names[] = {"", "static", "balanced", "dynamic"};
  return strategy >= 0 && strategy < 4 ? names[strategy] : "?";
}

typedef struct Temps {
  int n;
  const Expr *sum[NT_MAX_INDICES];
  Expr *t[NT_MAX_INDICES];
} Temps;

/* e with each sum that no other sum of e encloses replaced by a scalar
 * temp `t_j` (recorded in tt); nodes without sums are shared, not copied. */
static Expr *with_temps(Arena *a, const Expr *e, Temps *tt) {
  Expr *k[2];
  int n = nt_children(e, k);
  if (e->kind == EX_SUM) {
    if (tt->n == NT_MAX_INDICES) return NULL;
    TensorVar *t = arena_alloc(a, sizeof *t);
    if (!t) return NULL;
    t->id = -1;
    t->name = arena_printf(a, "t_%s", e->u.sum.iv->name);
    tt->sum[tt->n] = e;
    return tt->t[tt->n++] = nt_access(a, t, 0, NULL, 0);
  }
  const Expr *none[1];
  if (n == 0 || nt_sums(e, none, 0) == 0) return (Expr *)e;
  Expr *c = arena_alloc(a, sizeof *c);
  if (!c) return NULL;
  *c = *e;
  Expr *ck[2] = {with_temps(a, k[0], tt), n > 1 ? with_temps(a, k[1], tt) : NULL};
  if (!ck[0] || (n > 1 && !ck[1])) return NULL;
  if (e->kind == EX_NEG) c->u.bin.a = ck[0];
  else if (e->kind == EX_CALL) c->u.call.a = ck[0], c->u.call.b = ck[1];
  else c->u.bin.a = ck[0], c->u.bin.b = ck[1];
  return c;
}

/* The statement of one summation scope (TACO's where): lhs (+)= rhs with
 * rhs's sums read from temps, each temp produced beside it:
 *   where(y(i) = b(i) - t_j, forall(j, t_j += A(i,j) * x(j))) */
static Cin *scope_stmt(Arena *a, const Loops *l, Expr *lhs, const Expr *rhs, bool acc,
                       OpKind op, const char *op_name) {
  Temps tt = {0};
  Expr *r = with_temps(a, rhs, &tt);
  Cin *c = r ? cin_assign(a, lhs, r, acc) : NULL;
  if (c) c->u.assign.op = op, c->u.assign.op_name = op_name;
  for (int k = 0; k < tt.n && c; k++) {
    const Expr *sum = tt.sum[k];
    Cin *body = scope_stmt(a, l, tt.t[k], sum->u.sum.a, true, sum->u.sum.op,
                           sum->u.sum.def ? sum->u.sum.def->name : NULL);
    Cin *producer = scheduled_forall(a, l, sum->u.sum.iv, body);
    c = producer ? cin_where(a, c, producer, tt.t[k]->u.access.t) : NULL;
  }
  return c;
}

Cin *cin_from_assignment(Arena *a, const Assignment *as, const Schedule *s,
                         Diag *d) {
  Loops l = {0};
  collect(&l, as->lhs);
  int nlhs = l.n;
  collect(&l, as->rhs);
  sums_last(&l, as->rhs);
  if (!apply(&l, s, d)) return NULL;
  const Expr *sums[NT_MAX_INDICES];
  int nroot = l.n - nt_sums(as->rhs, sums, NT_MAX_INDICES);
  Cin *c = scope_stmt(a, &l, as->lhs, as->rhs, as->accumulate || nroot > nlhs, as->root_op,
                      NULL);
  /* A sum's loop nests inside its scope: a reorder cannot move it out. */
  for (int k = 0; k < l.n - nroot; k++)
    if (l.iv[nroot + k] != sums[k]->u.sum.iv)
      return diag_error(d, TJ_ERR_UNSUPPORTED,
                        "reorder: index %s is summed over a subexpression (%s(%s, ...)), "
                        "so its loop must stay inside the loops of the indices around "
                        "that sum", sums[k]->u.sum.iv->name,
                        sums[k]->u.sum.implicit ? "an implicit sum" : "sum",
                        sums[k]->u.sum.iv->name), NULL;
  for (int i = nroot - 1; c && i >= 0; i--) c = scheduled_forall(a, &l, l.iv[i], c);
  if (!c) diag_error(d, TJ_ERR_NOMEM, "out of memory building the loop nest");
  return c;
}

/* Appends the loops of c in nesting order: a where's consumer, then its
 * producer; a sequence's first statement, then its second. */
static int loop_order(const Cin *c, IndexVar **order, int n, int max) {
  switch (c->kind) {
  case CIN_FORALL:
    if (n < max) order[n] = c->u.forall.iv;
    return loop_order(c->u.forall.body, order, n + 1, max);
  case CIN_WHERE:
    n = loop_order(c->u.where.consumer, order, n, max);
    return loop_order(c->u.where.producer, order, n, max);
  case CIN_SEQUENCE:
    n = loop_order(c->u.seq.first, order, n, max);
    return loop_order(c->u.seq.second, order, n, max);
  case CIN_ASSIGN: break;
  }
  return n;
}

int cin_loop_order(const Cin *c, IndexVar **order, int max) {
  int n = loop_order(c, order, 0, max);
  return n < max ? n : max;
}

Cin *cin_reorder(Arena *a, const Cin *c, IndexVar *const *order, int n, Diag *d) {
  const Cin *loops[NT_MAX_INDICES];
  int m = 0;
  const Cin *inner = c;
  for (; inner->kind == CIN_FORALL && m < NT_MAX_INDICES; inner = inner->u.forall.body)
    loops[m++] = inner;
  if (m != n)
    return diag_error(d, TJ_ERR_INTERNAL, "reorder: %d loops for a nest of %d", n, m), NULL;
  Cin *out = (Cin *)inner;
  for (int k = n - 1; k >= 0 && out; k--) {
    const Cin *from = NULL;
    for (int q = 0; q < m; q++)
      if (loops[q]->u.forall.iv == order[k]) from = loops[q];
    if (!from)
      return diag_error(d, TJ_ERR_INTERNAL, "reorder: %s is not a loop of the nest",
                        order[k]->name), NULL;
    out = forall_like(a, from, out);
  }
  if (!out) diag_error(d, TJ_ERR_NOMEM, "out of memory");
  return out;
}

Cin *cin_workspace(Arena *a, const Cin *c, IndexVar *j, int depth, Diag *d) {
  const Cin *loops[NT_MAX_INDICES];
  int n = 0;
  const Cin *assign = c;
  for (; assign->kind == CIN_FORALL && n < NT_MAX_INDICES; assign = assign->u.forall.body)
    loops[n++] = assign;
  bool inside = false;
  for (int k = depth; k < n; k++) inside |= loops[k]->u.forall.iv == j;
  if (assign->kind != CIN_ASSIGN || depth < 0 || depth >= n || !inside)
    return diag_error(d, TJ_ERR_INTERNAL, "workspace over %s at loop %d: the notation has "
                      "another shape", j->name, depth), NULL;
  TensorVar *w = arena_alloc(a, sizeof *w);
  if (!w) return diag_error(d, TJ_ERR_NOMEM, "out of memory"), NULL;
  w->id = -1;
  w->name = "w";
  w->decl.order = 1;
  Expr *wj = nt_access(a, w, 1, &j, 0);
  Cin *producer = cin_assign(a, wj, assign->u.assign.rhs, true);
  if (producer) producer->u.assign.op = assign->u.assign.op,
                producer->u.assign.op_name = assign->u.assign.op_name;
  for (int k = n - 1; k >= depth && producer; k--) producer = forall_like(a, loops[k], producer);
  Cin *consumer = cin_forall(a, j, cin_assign(a, assign->u.assign.lhs, wj, false));
  Cin *out = producer && consumer ? cin_where(a, consumer, producer, w) : NULL;
  for (int k = depth - 1; k >= 0 && out; k--) out = forall_like(a, loops[k], out);
  if (!out) diag_error(d, TJ_ERR_NOMEM, "out of memory");
  return out;
}

/* name(a, b) for the two-statement nodes. */
static void print_pair(FILE *out, const char *name, const Cin *a, const Cin *b) {
  fprintf(out, "%s(", name);
  cin_print(out, a);
  fputs(", ", out);
  cin_print(out, b);
  fputc(')', out);
}

void cin_print(FILE *out, const Cin *c) {
  switch (c->kind) {
  case CIN_FORALL:
    fprintf(out, "forall(%s", c->u.forall.iv->name);
    if (c->u.forall.flags & CIN_PARALLEL) fputs(":parallel", out);
    if (c->u.forall.par) fprintf(out, "(%s)", cin_strategy_name(c->u.forall.par));
    if (c->u.forall.vec_width > 0)
      fprintf(out, ":vectorize(%d)", c->u.forall.vec_width);
    if (c->u.forall.unroll > 0) fprintf(out, ":unroll(%d)", c->u.forall.unroll);
    fputs(", ", out);
    cin_print(out, c->u.forall.body);
    fputc(')', out);
    break;
  case CIN_WHERE: print_pair(out, "where", c->u.where.consumer, c->u.where.producer); break;
  case CIN_SEQUENCE: print_pair(out, "sequence", c->u.seq.first, c->u.seq.second); break;
  case CIN_ASSIGN:
    nt_print_expr(out, c->u.assign.lhs);
    if (c->u.assign.accumulate && c->u.assign.op_name)  /* a definition: t = f(t, ...) */
      fprintf(out, " %s= ", c->u.assign.op_name);
    else if (c->u.assign.accumulate)
      fprintf(out, " %s= ", nt_op(c->u.assign.op)->spelling);
    else fputs(" = ", out);
    nt_print_expr(out, c->u.assign.rhs);
    break;
  }
}

/* ---- schedule text ---- */

/* Directive names, by SchedKind. */
static const char *const SCHED_NAMES[] = {"reorder", "precompute", "parallelize", "vectorize",
                                          "unroll", "method"};
enum { NSCHED = sizeof SCHED_NAMES / sizeof *SCHED_NAMES };

typedef struct SchedParser {
  const char *src, *p;
  Arena *a;
  Diag *d;
} SchedParser;

static void skip_blank(SchedParser *sp) {
  while (*sp->p == ' ' || *sp->p == '\t' || *sp->p == '\n' || *sp->p == '\r')
    sp->p++;
}

static int col_of(const SchedParser *sp) { return (int)(sp->p - sp->src) + 1; }

static bool serr(SchedParser *sp, const char *msg, const char *arg) {
  return diag_error_at(sp->d, TJ_ERR_PARSE, sp->src, col_of(sp), msg, arg);
}

/* An identifier at sp->p (arena copy), or NULL with d set. */
static const char *ident(SchedParser *sp, const char *what) {
  skip_blank(sp);
  const char *q = sp->p;
  if (!isalpha((unsigned char)*q) && *q != '_') {
    serr(sp, "expected %s", what);
    return NULL;
  }
  while (isalnum((unsigned char)*q) || *q == '_') q++;
  char *s = arena_strndup(sp->a, sp->p, (size_t)(q - sp->p));
  if (!s) diag_error(sp->d, TJ_ERR_NOMEM, "out of memory");
  sp->p = q;
  return s;
}

static bool punct(SchedParser *sp, char c, const char *what) {
  skip_blank(sp);
  if (*sp->p == c) {
    sp->p++;
    return true;
  }
  return serr(sp, "expected %s", what);
}

/* precompute(...): keeps the balanced text inside the parentheses. */
static bool parse_raw_arg(SchedParser *sp, SchedDirective *sd) {
  const char *start = sp->p;
  int depth = 1;
  for (; *sp->p && depth > 0; sp->p++) {
    if (*sp->p == '(') depth++;
    if (*sp->p == ')') depth--;
  }
  if (depth > 0) return serr(sp, "unclosed '(' in %s", "precompute");
  sd->arg = arena_strndup(sp->a, start, (size_t)(sp->p - 1 - start));
  if (!sd->arg) return diag_error(sp->d, TJ_ERR_NOMEM, "out of memory");
  return true;
}

static bool parse_width(SchedParser *sp, SchedDirective *sd) {
  skip_blank(sp);
  int col = col_of(sp);
  char *end;
  long w = strtol(sp->p, &end, 10);
  if (end == sp->p || !isdigit((unsigned char)*sp->p))
    return serr(sp, "expected %s", "a vector width");
  sp->p = end;
  if (w < 1 || w > 64 || (w & (w - 1)) != 0)
    return diag_error_at(sp->d, TJ_ERR_PARSE, sp->src, col, "vectorize width "
                         "%ld is not a power of two between 1 and 64", w);
  sd->width = (int)w;
  return true;
}

static bool parse_factor(SchedParser *sp, SchedDirective *sd) {
  skip_blank(sp);
  int col = col_of(sp);
  char *end;
  long f = strtol(sp->p, &end, 10);
  if (end == sp->p || !isdigit((unsigned char)*sp->p))
    return serr(sp, "expected %s", "an unroll factor");
  sp->p = end;
  if (f < 2 || f > 64)
    return diag_error_at(sp->d, TJ_ERR_PARSE, sp->src, col, "unroll factor %ld is not "
                         "between 2 and 64", f);
  sd->width = (int)f;
  return true;
}

static bool parse_strategy(SchedParser *sp, SchedDirective *sd) {
  skip_blank(sp);
  int col = col_of(sp);
  const char *name = ident(sp, "a strategy (static, balanced or dynamic)");
  if (!name) return false;
  for (int k = PAR_STATIC; k <= PAR_DYNAMIC; k++)
    if (strcmp(name, cin_strategy_name(k)) == 0) {
      sd->width = k;
      return true;
    }
  return diag_error_at(sp->d, TJ_ERR_PARSE, sp->src, col, "parallelize: unknown strategy '%s' "
                       "(static, balanced or dynamic)", name);
}

/* The index list of reorder / parallelize / vectorize / unroll. */
static bool parse_vars(SchedParser *sp, SchedDirective *sd) {
  int maxv = sd->kind == SCHED_REORDER ? NT_MAX_INDICES : 1;
  do {
    if (sd->nvars == maxv)
      return serr(sp, "too many indices in %s",
                  sd->kind == SCHED_REORDER ? "reorder" : "this directive");
    if (!(sd->vars[sd->nvars++] = ident(sp, "an index variable")))
      return false;
    skip_blank(sp);
    if (sd->kind == SCHED_VECTORIZE)
      return punct(sp, ',', "',' and a vector width") && parse_width(sp, sd) &&
             punct(sp, ')', "')'");
    if (sd->kind == SCHED_UNROLL)
      return punct(sp, ',', "',' and an unroll factor") && parse_factor(sp, sd) &&
             punct(sp, ')', "')'");
    if (sd->kind == SCHED_PARALLELIZE && *sp->p == ',') {
      sp->p++;
      return parse_strategy(sp, sd) && punct(sp, ')', "')'");
    }
  } while (*sp->p == ',' && sp->p++);
  return punct(sp, ')', "',' or ')'");
}

static bool parse_directive(SchedParser *sp, SchedDirective *sd) {
  sd->col = col_of(sp);
  const char *name = ident(sp, "a schedule directive");
  if (!name) return false;
  int k = 0;
  while (k < NSCHED && strcmp(SCHED_NAMES[k], name) != 0) k++;
  if (k == NSCHED)
    return diag_error_at(sp->d, TJ_ERR_PARSE, sp->src, sd->col,
                         "unknown schedule directive '%s'", name);
  sd->kind = (SchedKind)k;
  if (!punct(sp, '(', "'('")) return false;
  if (sd->kind == SCHED_PRECOMPUTE) return parse_raw_arg(sp, sd);
  if (sd->kind == SCHED_METHOD)
    return (sd->arg = ident(sp, "a method (gett, ttgt, log or loops)")) && punct(sp, ')', "')'");
  return parse_vars(sp, sd);
}

bool nt_schedule_parse(const char *src, Schedule *out, Arena *a, Diag *d) {
  SchedParser sp = {.src = src, .p = src, .a = a, .d = d};
  memset(out, 0, sizeof *out);
  out->src = arena_strdup(a, src);
  for (;;) {
    while (*sp.p && strchr(" \t\r\n,;", *sp.p)) sp.p++;
    if (!*sp.p) return true;
    if (out->n == (int)(sizeof out->d / sizeof out->d[0]))
      return serr(&sp, "too many schedule directives (max %s)", "16");
    if (!parse_directive(&sp, &out->d[out->n])) return false;
    out->n++;
  }
}

void nt_schedule_print(FILE *out, const Schedule *s) {
  for (int i = 0; i < s->n; i++) {
    const SchedDirective *sd = &s->d[i];
    fprintf(out, "%s%s(", i ? " " : "", SCHED_NAMES[sd->kind]);
    if (sd->kind == SCHED_PRECOMPUTE || sd->kind == SCHED_METHOD) fputs(sd->arg, out);
    for (int k = 0; k < sd->nvars; k++)
      fprintf(out, "%s%s", k ? "," : "", sd->vars[k]);
    if (sd->kind == SCHED_VECTORIZE || sd->kind == SCHED_UNROLL) fprintf(out, ",%d", sd->width);
    if (sd->kind == SCHED_PARALLELIZE && sd->width)
      fprintf(out, ",%s", cin_strategy_name(sd->width));
    fputc(')', out);
  }
}

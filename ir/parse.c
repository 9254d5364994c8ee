/* Lexer and recursive-descent parser for one index-notation assignment:
 *
 *   assignment := access ('=' | '+=') expr
 *   expr  := term  (('+' | '-') term)*        left-associative
 *   term  := unary (('*' | '/') unary)*       left-associative
 *   unary := '-' unary | '-' NUMBER | primary  (-2 is one negative literal)
 *   primary := NUMBER | '(' expr ')' | FN '(' expr [',' expr] ')'
 *            | 'sum' '(' NAME (',' NAME)* ',' expr ')'
 *            | 'reduce' '(' OP ',' NAME (',' NAME)* ',' expr ')' | access
 *   access  := NAME [ '(' [NAME (',' NAME)*] ')' ]      (a and a() alike)
 *
 * FN is a function of ir/ops.def when followed by '('; `sum(j, k, e)` is the
 * explicit reduction sum(j, sum(k, e)), and reduce(OP, j, e) reduces by
 * OP (+ * or a function that is a reduction operator: min max or and). Nesting is bounded
 * (NT_MAX_NESTING) and so is the tree height (NT_MAX_HEIGHT), so no input
 * can exhaust the stack here or in the recursive walks that follow. An index
 * repeated in one access (B(i,i), a diagonal) is refused.
 */
#include "notation.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
  TK_EOF, TK_NAME, TK_NUM, TK_LPAREN, TK_RPAREN, TK_COMMA, TK_PLUS,
  TK_MINUS, TK_STAR, TK_SLASH, TK_ASSIGN, TK_PLUS_ASSIGN
} TokKind;

typedef struct Token {
  TokKind kind;
  int col;          /* 1-based */
  const char *s;    /* start in the source */
  int len;
  double num;
  bool is_int;
} Token;

typedef struct Parser {
  Arena *a;
  Diag *d;
  const char *src;
  const char *p;    /* lexer position */
  Token tok;        /* current token */
  int depth;        /* current nesting */
  Assignment *as;
  const NtDefs *defs;        /* callable definitions, or NULL */
  const char *params[2];     /* in a definition's body: its parameters */
  int nparams;
  const char *def_name;      /* the definition being parsed */
} Parser;

static const char *tok_names[] = {
  "end of input", "name", "number", "'('", "')'", "','", "'+'", "'-'",
  "'*'", "'/'", "'='", "'+='"};

static bool err_at(Parser *ps, int col, const char *msg) {
  return diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, col, "%s", msg);
}

/* "found 'x'" text for the current token. */
static const char *found(Parser *ps) {
  Token *t = &ps->tok;
  if (t->kind == TK_NAME || t->kind == TK_NUM) {
    const char *s =
        arena_printf(ps->a, "'%.*s'", t->len > 40 ? 40 : t->len, t->s);
    return s ? s : "a token";
  }
  return tok_names[t->kind];
}

static bool lex_number(Parser *ps, Token *t) {
  const char *q = ps->p;
  bool is_int = true;
  while (isdigit((unsigned char)*q)) q++;
  if (*q == '.') {
    is_int = false;
    q++;
    while (isdigit((unsigned char)*q)) q++;
  }
  if (*q == 'e' || *q == 'E') {
    is_int = false;
    q++;
    if (*q == '+' || *q == '-') q++;
    if (!isdigit((unsigned char)*q))
      return err_at(ps, t->col, "malformed number: exponent has no digits");
    while (isdigit((unsigned char)*q)) q++;
  }
  t->kind = TK_NUM;
  t->len = (int)(q - ps->p);
  char *text = arena_strndup(ps->a, ps->p, (size_t)t->len);
  if (!text) return diag_error(ps->d, TJ_ERR_NOMEM, "out of memory");
  errno = 0;
  t->num = strtod(text, NULL);
  if (isinf(t->num) || (errno == ERANGE && t->num == 0))
    return diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, t->col,
                         "literal %.40s is out of range for f64", text);
  t->is_int = is_int;
  ps->p = q;
  return true;
}

static bool lex_symbol(Parser *ps, Token *t) {
  static const char syms[] = "(),+-*/=";
  static const TokKind kinds[] = {TK_LPAREN, TK_RPAREN, TK_COMMA, TK_PLUS,
                                  TK_MINUS, TK_STAR, TK_SLASH, TK_ASSIGN};
  unsigned char c = (unsigned char)*ps->p;
  if (c == '+' && ps->p[1] == '=') {
    t->kind = TK_PLUS_ASSIGN;
    t->len = 2;
  } else if (c && strchr(syms, c)) {
    t->kind = kinds[strchr(syms, c) - syms];
    t->len = 1;
  } else if (c >= 0x80) {
    return diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, t->col,
                         "non-ASCII byte 0x%02X is not allowed", c);
  } else if (isprint(c)) {
    return diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, t->col,
                         "unexpected character '%c'", c);
  } else {
    return diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, t->col,
                         "unexpected control character 0x%02X", c);
  }
  ps->p += t->len;
  return true;
}

/* Reads the next token into ps->tok; false (d set) on a lexical error. */
static bool next(Parser *ps) {
  while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
    ps->p++;
  Token *t = &ps->tok;
  memset(t, 0, sizeof *t);
  t->s = ps->p;
  t->col = (int)(ps->p - ps->src) + 1;
  unsigned char c = (unsigned char)*ps->p;
  if (c == 0) {
    t->kind = TK_EOF;
    return true;
  }
  if (isalpha(c) || c == '_') {
    const char *q = ps->p;
    while (isalnum((unsigned char)*q) || *q == '_') q++;
    t->kind = TK_NAME;
    t->len = (int)(q - ps->p);
    ps->p = q;
    return true;
  }
  if (isdigit(c) || (c == '.' && isdigit((unsigned char)ps->p[1])))
    return lex_number(ps, t);
  return lex_symbol(ps, t);
}

static bool expect(Parser *ps, TokKind k, const char *what) {
  if (ps->tok.kind == k) return next(ps);
  return diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, ps->tok.col,
                       "expected %s, found %s", what, found(ps));
}

static bool nomem(Parser *ps) {
  return diag_error(ps->d, TJ_ERR_NOMEM, "out of memory while parsing");
}

/* Enters one nesting level; false (d set) past NT_MAX_NESTING. */
static bool enter(Parser *ps) {
  if (++ps->depth <= NT_MAX_NESTING) return true;
  return diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, ps->tok.col,
                       "expression nested too deeply (more than %d levels)",
                       NT_MAX_NESTING);
}

/* The next non-blank source character after the current token. */
static char peek_char(const Parser *ps) {
  const char *q = ps->p;
  while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r') q++;
  return *q;
}

static Expr *parse_expr(Parser *ps, int *h);

/* One index of an access to tensor nm: a fresh name for idx[0..n). */
static IndexVar *parse_index(Parser *ps, const char *nm, IndexVar **idx,
                             int n) {
  if (ps->tok.kind != TK_NAME) {
    diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, ps->tok.col,
                  "expected an index variable, found %s", found(ps));
    return NULL;
  }
  if (n == NT_MAX_ORDER) {
    diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, ps->tok.col,
                  "too many indices in %s (max %d)", nm, NT_MAX_ORDER);
    return NULL;
  }
  char *iname = arena_strndup(ps->a, ps->tok.s, (size_t)ps->tok.len);
  IndexVar *v = iname ? nt_index(ps->a, ps->as, iname) : NULL;
  if (!v) {
    if (iname && ps->as->nindices >= NT_MAX_INDICES)
      err_at(ps, ps->tok.col, "too many index variables (max 32)");
    else
      nomem(ps);
    return NULL;
  }
  for (int i = 0; i < n; i++)
    if (idx[i] == v) {
      diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, ps->tok.col,
                    "index %s appears twice in %s; diagonal access is not "
                    "supported", v->name, nm);
      return NULL;
    }
  return next(ps) ? v : NULL;
}

/* NAME ( '(' names ')' )? — the tensor name token is current. */
static Expr *parse_access(Parser *ps) {
  Token name = ps->tok;
  char *nm = arena_strndup(ps->a, name.s, (size_t)name.len);
  if (!nm) return nomem(ps), NULL;
  if (!next(ps)) return NULL;
  TensorVar *t = nt_tensor(ps->a, ps->as, nm);
  if (!t) {
    if (ps->as->ntensors >= NT_MAX_TENSORS)
      err_at(ps, name.col, "too many tensors in one expression (max 32)");
    else
      nomem(ps);
    return NULL;
  }
  IndexVar *idx[NT_MAX_ORDER];
  int n = 0;
  if (ps->tok.kind == TK_LPAREN) {
    if (!next(ps)) return NULL;
    while (ps->tok.kind != TK_RPAREN) {
      if (n > 0 && !expect(ps, TK_COMMA, "',' or ')'")) return NULL;
      IndexVar *v = parse_index(ps, nm, idx, n);
      if (!v) return NULL;
      idx[n++] = v;
    }
    if (!next(ps)) return NULL;
  }
  Expr *e = nt_access(ps->a, t, n, idx, name.col);
  if (!e) nomem(ps);
  return e;
}

/* FN '(' expr [',' expr] ')' — the function name is current. */
static Expr *parse_call(Parser *ps, OpKind fn, int *h) {
  int col = ps->tok.col, nargs = nt_op(fn)->arity;
  if (!next(ps) || !next(ps) || !enter(ps)) return NULL; /* name, '(' */
  int ha = 0, hb = 0;
  Expr *x = parse_expr(ps, &ha), *y = NULL;
  if (!x) return NULL;
  if (ps->tok.kind == TK_COMMA) {
    if (nargs == 1) {
      diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, ps->tok.col,
                    "%s takes 1 argument", nt_op(fn)->spelling);
      return NULL;
    }
    if (!next(ps) || !(y = parse_expr(ps, &hb))) return NULL;
  } else if (nargs == 2 && ps->tok.kind == TK_RPAREN) {
    diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, ps->tok.col,
                  "%s takes 2 arguments", nt_op(fn)->spelling);
    return NULL;
  }
  if (!expect(ps, TK_RPAREN, "')'")) return NULL;
  ps->depth--;
  *h = 1 + (ha > hb ? ha : hb);
  Expr *e = nt_op_node(ps->a, fn, x, y, col);
  if (!e) nomem(ps);
  return e;
}

static const NtDef *find_def(const NtDefs *defs, const char *s, int len);

/* The operator of reduce(op, ...): '+', '*' or a function name, which
 * must be a reduction operator (nt_op_is_reduction), or a definition with
 * an identity (*def; *op is then OP_NONE). op is current. */
static bool parse_reduce_op(Parser *ps, OpKind *op, const NtDef **def) {
  Token t = ps->tok;
  *op = t.kind == TK_NAME ? nt_op_lookup(t.s, t.len, true)
        : t.kind == TK_NUM || t.kind == TK_EOF ? OP_NONE : nt_op_lookup(t.s, t.len, false);
  *def = t.kind == TK_NAME && *op == OP_NONE ? find_def(ps->defs, t.s, t.len) : NULL;
  if (*def && !(*def)->reduces)
    return diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, t.col,
                         NT_REDUCE_NAME ": %s has no identity, so it is no reduction operator "
                         "(define it as %s(x, y) = ... identity <value>)", (*def)->name,
                         (*def)->name);
  if (!*def && (*op == OP_NONE || !nt_op_is_reduction(*op))) {
    char names[128] = "";
    for (int k = 0, n = 0; k < OP_COUNT && n < (int)sizeof names; k++)
      if (nt_op_is_reduction((OpKind)k))
        n += snprintf(names + n, sizeof names - (size_t)n, "%s, ", nt_op((OpKind)k)->spelling);
    return diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, t.col,
                         NT_REDUCE_NAME ": expected a reduction operator (%sor a definition "
                         "with an identity), found %s", names, found(ps));
  }
  return next(ps) && expect(ps, TK_COMMA, "',' and the index to reduce over");
}

/* 'sum' '(' NAME (',' NAME)* ',' expr ')' or
 * 'reduce' '(' op ',' NAME (',' NAME)* ',' expr ')'; the keyword is
 * current. Every argument but the last is an index (a name followed by
 * ','). */
static Expr *parse_reduction(Parser *ps, bool is_sum, int *h) {
  int col = ps->tok.col;
  const char *kw = is_sum ? NT_SUM_NAME : NT_REDUCE_NAME;
  if (!next(ps) || !next(ps) || !enter(ps)) return NULL; /* keyword, '(' */
  OpKind op = OP_ADD;
  const NtDef *def = NULL;
  if (!is_sum && !parse_reduce_op(ps, &op, &def)) return NULL;
  IndexVar *iv[NT_MAX_INDICES];
  int n = 0;
  do {
    if (ps->tok.kind != TK_NAME) {
      diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, ps->tok.col,
                    "%s: expected the index to %s over, found %s", kw,
                    is_sum ? "sum" : "reduce", found(ps));
      return NULL;
    }
    if (n == NT_MAX_INDICES) {
      diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, ps->tok.col, "%s: too many indices", kw);
      return NULL;
    }
    IndexVar *none[1];
    if (!(iv[n++] = parse_index(ps, kw, none, 0))) return NULL;
    if (!expect(ps, TK_COMMA, is_sum ? "',' and the expression to sum"
                                     : "',' and the expression to reduce"))
      return NULL;
  } while (ps->tok.kind == TK_NAME && peek_char(ps) == ',');
  Expr *e = parse_expr(ps, h);
  if (!e || !expect(ps, TK_RPAREN, "')'")) return NULL;
  ps->depth--;
  for (int k = n - 1; k >= 0 && e; k--) {
    (*h)++;
    e = nt_reduce(ps->a, op, iv[k], e, false, col);
    if (e) e->u.sum.def = def;
  }
  if (!e) nomem(ps);
  return e;
}

/* Whether the current token is the name kw followed by '('. */
static bool at_keyword(Parser *ps, const char *kw) {
  const Token *t = &ps->tok;
  return t->kind == TK_NAME && peek_char(ps) == '(' && t->len == (int)strlen(kw) &&
         strncmp(t->s, kw, strlen(kw)) == 0;
}

static const NtDef *find_def(const NtDefs *defs, const char *s, int len) {
  for (int k = 0; defs && k < defs->n; k++)
    if ((int)strlen(defs->d[k].name) == len && strncmp(defs->d[k].name, s, (size_t)len) == 0)
      return &defs->d[k];
  return NULL;
}

/* A parameter of the definition being parsed: an order-0 access whose
 * tensor id is -1 - k (the name token is current). */
static Expr *parse_param(Parser *ps) {
  Token t = ps->tok;
  for (int k = 0; k < ps->nparams; k++) {
    if ((int)strlen(ps->params[k]) != t.len || strncmp(ps->params[k], t.s, (size_t)t.len)) continue;
    if (peek_char(ps) == '(') break;
    TensorVar *v = arena_alloc(ps->a, sizeof *v);
    Expr *e = v ? nt_access(ps->a, v, 0, NULL, t.col) : NULL;
    if (!e) return nomem(ps), NULL;
    v->id = -1 - k;
    v->name = ps->params[k];
    return next(ps) ? e : NULL;
  }
  diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, t.col,
                "%s: %s is not a parameter (a definition's body uses only its "
                "parameters, numbers and functions)", ps->def_name, found(ps));
  return NULL;
}

/* A parameter access's argument (copied), for nt_map_expr. */
static Expr *argument(Arena *a, const Expr *e, const void *args) {
  if (e->kind != EX_ACCESS || e->u.access.t->id >= 0) return NULL;
  return nt_copy_expr(a, ((Expr *const *)args)[-1 - e->u.access.t->id]);
}

/* name '(' expr [',' expr] ')' of a definition: its body with the
 * arguments in place of the parameters (the name is current). */
static Expr *parse_def_call(Parser *ps, const NtDef *def, int *h) {
  int col = ps->tok.col;
  if (!next(ps) || !next(ps) || !enter(ps)) return NULL; /* name, '(' */
  Expr *args[2];
  int n = 0, hmax = 0;
  for (;;) {
    int ha = 0;
    if (n == def->arity) {
      diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, ps->tok.col, "%s takes %d argument%s",
                    def->name, def->arity, def->arity == 1 ? "" : "s");
      return NULL;
    }
    if (!(args[n++] = parse_expr(ps, &ha))) return NULL;
    if (ha > hmax) hmax = ha;
    if (ps->tok.kind != TK_COMMA) break;
    if (!next(ps)) return NULL;
  }
  if (n < def->arity) {
    diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, ps->tok.col, "%s takes %d arguments",
                  def->name, def->arity);
    return NULL;
  }
  if (!expect(ps, TK_RPAREN, "')'")) return NULL;
  ps->depth--;
  *h = def->height + hmax;
  if (*h > NT_MAX_HEIGHT) {
    diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, col,
                  "expression too large (operator tree deeper than %d)", NT_MAX_HEIGHT);
    return NULL;
  }
  if (def->cased && ps->def_name) {
    diag_error_at(ps->d, TJ_ERR_UNSUPPORTED, ps->src, col, "%s: a definition with cases is "
                  "called only in expressions, not in another definition", def->name);
    return NULL;
  }
  Expr *e = def->cased ? nt_op_node(ps->a, OP_CASES, args[0], args[1], col) /* its own node */
                       : nt_map_expr(ps->a, def->body, argument, args); /* the body, inlined */
  if (e && def->cased) e->u.op.def = def;
  if (!e) nomem(ps);
  return e;
}

static Expr *parse_primary(Parser *ps, int *h) {
  Token t = ps->tok;
  *h = 1;
  if (t.kind == TK_NUM) {
    if (!next(ps)) return NULL;
    Expr *e = nt_literal(ps->a, t.num, t.is_int, t.col);
    if (!e) nomem(ps);
    return e;
  }
  if (t.kind == TK_LPAREN) {
    if (!enter(ps) || !next(ps)) return NULL;
    Expr *e = parse_expr(ps, h);
    if (!e || !expect(ps, TK_RPAREN, "')'")) return NULL;
    ps->depth--;
    return e;
  }
  OpKind fn = t.kind == TK_NAME ? nt_op_lookup(t.s, t.len, true) : OP_NONE;
  if (fn != OP_NONE && peek_char(ps) == '(') return parse_call(ps, fn, h);
  if (at_keyword(ps, NT_SUM_NAME)) return parse_reduction(ps, true, h);
  if (at_keyword(ps, NT_REDUCE_NAME)) return parse_reduction(ps, false, h);
  const NtDef *def = t.kind == TK_NAME && peek_char(ps) == '(' ? find_def(ps->defs, t.s, t.len) : NULL;
  if (def) return parse_def_call(ps, def, h);
  if (t.kind == TK_NAME && ps->def_name) return parse_param(ps);
  if (t.kind == TK_NAME) {
    Expr *e = parse_access(ps);
    if (e && e->u.access.t->id == 0) {
      diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, e->col,
                    "%s is both output and operand", e->u.access.t->name);
      return NULL;
    }
    return e;
  }
  diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, t.col,
                "expected an expression, found %s", found(ps));
  return NULL;
}

static Expr *parse_unary(Parser *ps, int *h) {
  if (ps->tok.kind != TK_MINUS) return parse_primary(ps, h);
  int col = ps->tok.col;
  if (!next(ps)) return NULL;
  if (ps->tok.kind == TK_NUM) { /* -2: one negative literal */
    Token t = ps->tok;
    if (!next(ps)) return NULL;
    *h = 1;
    Expr *e = nt_literal(ps->a, -t.num, t.is_int, col);
    if (!e) nomem(ps);
    return e;
  }
  /* "-(" is one nesting level (the parenthesis counts it): the printer
   * writes a negated literal as "-(2)", and the printed form of every
   * accepted tree must parse back within the same bound. */
  bool paren = ps->tok.kind == TK_LPAREN;
  if (!paren && !enter(ps)) return NULL;
  Expr *x = parse_unary(ps, h);
  if (!x) return NULL;
  if (!paren) ps->depth--;
  (*h)++;
  Expr *e = nt_op_node(ps->a, OP_NEG, x, NULL, col);
  if (!e) nomem(ps);
  return e;
}

/* Folds `x op y` into a node, bounding the tree height. */
static Expr *fold(Parser *ps, OpKind op, Expr *x, Expr *y, int col, int *h,
                  int hy) {
  if (hy > *h) *h = hy;
  if (++*h > NT_MAX_HEIGHT) {
    diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, col,
                  "expression too large (operator tree deeper than %d)",
                  NT_MAX_HEIGHT);
    return NULL;
  }
  Expr *e = nt_op_node(ps->a, op, x, y, col);
  if (!e) nomem(ps);
  return e;
}

/* The infix operator of precedence prec at the current token, or OP_NONE. */
static OpKind infix_at(const Parser *ps, int prec) {
  if (ps->tok.kind == TK_NAME || ps->tok.kind == TK_NUM || ps->tok.kind == TK_EOF)
    return OP_NONE;
  OpKind op = nt_op_lookup(ps->tok.s, ps->tok.len, false);
  return op != OP_NONE && nt_op(op)->prec == prec ? op : OP_NONE;
}

enum { PREC_LOWEST = 1 };   /* infix levels: 1 (+ -), 2 (* /), then prefix - */

/* Parses operators of precedence prec and above (left-associative),
 * setting *h to the height of the tree. */
static Expr *parse_binary(Parser *ps, int prec, int *h) {
  if (prec >= nt_op(OP_NEG)->prec) return parse_unary(ps, h);
  Expr *x = parse_binary(ps, prec + 1, h);
  OpKind op;
  while (x && (op = infix_at(ps, prec)) != OP_NONE) {
    int col = ps->tok.col, hy = 0;
    if (!next(ps)) return NULL;
    Expr *y = parse_binary(ps, prec + 1, &hy);
    x = y ? fold(ps, op, x, y, col, h, hy) : NULL;
  }
  return x;
}

/* Parses expr, setting *h to the height of its tree. */
static Expr *parse_expr(Parser *ps, int *h) { return parse_binary(ps, PREC_LOWEST, h); }

static bool parse_lhs(Parser *ps) {
  if (ps->tok.kind != TK_NAME)
    return diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, ps->tok.col,
                         "expected the output tensor, found %s", found(ps));
  ps->as->lhs = parse_access(ps);
  if (!ps->as->lhs) return false;
  if (ps->tok.kind == TK_PLUS_ASSIGN) ps->as->accumulate = true;
  else if (ps->tok.kind != TK_ASSIGN)
    return diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, ps->tok.col,
                         "expected '=' or '+=', found %s", found(ps));
  return next(ps);
}

Assignment *nt_parse(Arena *a, const char *src, Diag *d) { return nt_parse_with(a, src, NULL, d); }

Assignment *nt_parse_with(Arena *a, const char *src, const NtDefs *defs, Diag *d) {
  Parser ps = {.a = a, .d = d, .src = src, .p = src, .defs = defs};
  ps.as = nt_assignment(a);
  if (!ps.as) return diag_error(d, TJ_ERR_NOMEM, "out of memory"), NULL;
  ps.as->src = arena_strdup(a, src);
  if (!next(&ps) || !parse_lhs(&ps)) return NULL;
  int h = 0;
  ps.as->rhs = parse_expr(&ps, &h);
  if (!ps.as->rhs) return NULL;
  if (ps.tok.kind != TK_EOF) {
    diag_error_at(d, TJ_ERR_PARSE, src, ps.tok.col,
                  "unexpected %s after the expression", found(&ps));
    return NULL;
  }
  return ps.as;
}

/* Whether name (len bytes) is taken by a function, a reduction keyword or
 * a definition. */
static bool name_taken(const NtDefs *defs, const char *name, int len) {
  return nt_op_lookup(name, len, true) != OP_NONE || find_def(defs, name, len) ||
         (len == (int)strlen(NT_SUM_NAME) && !strncmp(name, NT_SUM_NAME, (size_t)len)) ||
         (len == (int)strlen(NT_REDUCE_NAME) && !strncmp(name, NT_REDUCE_NAME, (size_t)len));
}

/* The laws a reduction operator declares after its identity:
 * ['commutative'] ['associative'], in either order. With both it may be
 * reordered: be the root reduction, split across threads and vectorized.
 * The declaration is checked on sample values (nt_def_check_laws). */
static bool parse_laws(Parser *ps, NtDef *def) {
  static const struct { const char *kw; unsigned law; } laws[] = {
    {"commutative", OL_COMM}, {"associative", OL_ASSOC}};
  for (;;) {
    int k = 0;
    while (k < 2 && !(ps->tok.kind == TK_NAME && ps->tok.len == (int)strlen(laws[k].kw) &&
                      !strncmp(ps->tok.s, laws[k].kw, strlen(laws[k].kw))))
      k++;
    if (k == 2) return true;
    if (def->laws & laws[k].law)
      return diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, ps->tok.col, "%s: %s twice",
                           def->name, laws[k].kw);
    def->laws |= laws[k].law;
    if (!next(ps)) return false;
  }
}

/* 'identity' [-] (number | inf) after a body of two parameters: the
 * definition is a reduction operator. 'identity' is current. */
static bool parse_identity(Parser *ps, NtDef *def) {
  int col = ps->tok.col;
  if (ps->nparams != 2)
    return diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, col, "%s: only a definition of two "
                         "parameters has an identity (a reduction operator)", def->name);
  if (!next(ps)) return false;
  double sign = 1;
  if (ps->tok.kind == TK_MINUS) {
    sign = -1;
    if (!next(ps)) return false;
  }
  if (ps->tok.kind == TK_NUM) def->identity = sign * ps->tok.num;
  else if (ps->tok.kind == TK_NAME && ps->tok.len == 3 && !strncmp(ps->tok.s, "inf", 3))
    def->identity = sign * (double)INFINITY;
  else
    return diag_error_at(ps->d, TJ_ERR_PARSE, ps->src, ps->tok.col, "%s: expected the "
                         "identity (a number, inf or -inf), found %s", def->name, found(ps));
  def->reduces = true;
  return next(ps) && parse_laws(ps, def);
}

/* name '(' param [',' param] ')' '=' expr ['left' expr] ['right' expr]
 * ['identity' value ['commutative'] ['associative']], the text of one
 * definition. */
static bool parse_def(Arena *a, const char *src, NtDefs *defs, Diag *d) {
  Parser ps = {.a = a, .d = d, .src = src, .p = src, .defs = defs};
  ps.as = nt_assignment(a);
  if (!ps.as) return diag_error(d, TJ_ERR_NOMEM, "out of memory");
  if (!next(&ps)) return false;
  if (ps.tok.kind != TK_NAME || peek_char(&ps) != '(')
    return diag_error_at(d, TJ_ERR_PARSE, src, ps.tok.col, "a definition is name(x) = "
                         "expression or name(x, y) = expression; found %s", found(&ps));
  if (name_taken(defs, ps.tok.s, ps.tok.len))
    return diag_error_at(d, TJ_ERR_PARSE, src, ps.tok.col, "%s is already a function; "
                         "give the definition another name", found(&ps));
  if (defs->n == NT_MAX_DEFS)
    return diag_error(d, TJ_ERR_UNSUPPORTED, "more than %d definitions", NT_MAX_DEFS);
  NtDef *def = &defs->d[defs->n];
  def->name = arena_strndup(a, ps.tok.s, (size_t)ps.tok.len);
  if (!def->name) return diag_error(d, TJ_ERR_NOMEM, "out of memory");
  ps.def_name = def->name;
  if (!next(&ps) || !next(&ps)) return false; /* name, '(' */
  while (ps.tok.kind == TK_NAME && ps.nparams < 2) {
    const char *pn = arena_strndup(a, ps.tok.s, (size_t)ps.tok.len);
    if (!pn) return diag_error(d, TJ_ERR_NOMEM, "out of memory");
    if (ps.nparams == 1 && !strcmp(pn, ps.params[0]))
      return diag_error_at(d, TJ_ERR_PARSE, src, ps.tok.col, "%s: parameter %s twice",
                           def->name, pn);
    ps.params[ps.nparams++] = pn;
    if (!next(&ps)) return false;
    if (ps.tok.kind != TK_COMMA) break;
    if (!next(&ps)) return false;
  }
  if (!expect(&ps, TK_RPAREN, "')' after one or two parameters") ||
      !expect(&ps, TK_ASSIGN, "'=' and the body"))
    return false;
  if (ps.nparams == 0)
    return diag_error_at(d, TJ_ERR_PARSE, src, 1, "%s: a definition takes one or two "
                         "parameters", def->name);
  int h = 0;
  Expr *body = parse_expr(&ps, &h);
  if (!body) return false;
  for (int c = 0; c < 2; c++) { /* left <expr>, right <expr> */
    const char *kw = c == 0 ? "left" : "right";
    if (ps.tok.kind != TK_NAME || ps.tok.len != (int)strlen(kw) || strncmp(ps.tok.s, kw, strlen(kw)))
      continue;
    if (ps.nparams != 2)
      return diag_error_at(d, TJ_ERR_PARSE, src, ps.tok.col, "%s: only a definition of two "
                           "parameters has a %s case", def->name, kw);
    int col = ps.tok.col, hc = 0;
    if (!next(&ps)) return false;
    Expr *k = parse_expr(&ps, &hc);
    if (!k) return false;
    if (nt_uses_param(k, 1 - c))
      return diag_error_at(d, TJ_ERR_PARSE, src, col, "%s: the %s case reads only %s (%s "
                           "does not exist there)", def->name, kw, ps.params[c], ps.params[1 - c]);
    *(c == 0 ? &def->left : &def->right) = k;
    def->cased = true;
    if (hc > h) h = hc;
  }
  if (ps.tok.kind == TK_NAME && ps.tok.len == 8 && !strncmp(ps.tok.s, "identity", 8) &&
      !parse_identity(&ps, def))
    return false;
  if (ps.tok.kind != TK_EOF)
    return diag_error_at(d, TJ_ERR_PARSE, src, ps.tok.col, "unexpected %s after %s's body",
                         found(&ps), def->name);
  def->arity = ps.nparams;
  def->param[0] = ps.params[0];
  def->param[1] = ps.params[1];
  def->body = body;
  def->height = h;
  if (def->laws && !nt_def_check_laws(def, d)) return false;
  defs->n++;
  return true;
}

bool nt_parse_defs(Arena *a, const char *src, NtDefs *defs, Diag *d) {
  for (const char *p = src; p && *p;) {
    size_t n = strcspn(p, ";\n");
    char *one = arena_strndup(a, p, n);
    if (!one) return diag_error(d, TJ_ERR_NOMEM, "out of memory");
    bool blank = strspn(one, " \t\r") == n;
    if (!blank && !parse_def(a, one, defs, d)) return false;
    p += n + (p[n] != 0);
  }
  return true;
}

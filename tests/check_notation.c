/* Index notation front-end: parser and printer corpora, round trips, the
 * checker's messages (column and caret), concrete index notation with
 * schedules, and the reference interpreter on hand-computed answers. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/notation.h"

/* ---- helpers ---- */

static char *print_as(const Assignment *as) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  nt_print(f, as);
  fclose(f);
  return buf;
}

static char *print_cin(const Cin *c) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  cin_print(f, c);
  fclose(f);
  return buf;
}

static TensorDecl mk(const char *name, tj_dtype dt, const char *levels,
                     int order, int64_t d0, int64_t d1, int64_t d2) {
  TensorDecl t;
  memset(&t, 0, sizeof t);
  t.name = name;
  t.order = order;
  t.dtype = dt;
  int64_t dims[3] = {d0, d1, d2};
  for (int m = 0; m < order && m < 3; m++) t.dims[m] = dims[m];
  t.format.order = order;
  for (int m = 0; m < order; m++) {
    t.format.levels[m] = levels ? levels[m] : 'd';
    t.format.mode_order[m] = m;
  }
  return t;
}

/* The standard declarations the checker tests bind against. */
static int std_decls(TensorDecl *d) {
  int n = 0;
  d[n++] = mk("A", TJ_F64, NULL, 2, 10, 20, 0);
  d[n++] = mk("B", TJ_F64, NULL, 2, 10, 30, 0);
  d[n++] = mk("C", TJ_F64, NULL, 2, 30, 20, 0);
  d[n++] = mk("x", TJ_F64, NULL, 1, 30, 0, 0);
  d[n++] = mk("y", TJ_F64, NULL, 1, 10, 0, 0);
  d[n++] = mk("S", TJ_F64, "ds", 2, 10, 30, 0);
  d[n++] = mk("F", TJ_F32, NULL, 2, 10, 30, 0);
  d[n++] = mk("G", TJ_F32, NULL, 2, 30, 20, 0);
  d[n++] = mk("I", TJ_I32, NULL, 1, 10, 0, 0);
  d[n++] = mk("J", TJ_I32, NULL, 1, 10, 0, 0);
  d[n++] = mk("a", TJ_F64, NULL, 0, 0, 0, 0);
  d[n++] = mk("O", TJ_F64, NULL, 2, -1, -1, 0);
  d[n++] = mk("w", TJ_F64, NULL, 1, -1, 0, 0);
  d[n++] = mk("P", TJ_BOOL, NULL, 1, 10, 0, 0);
  d[n++] = mk("Q", TJ_BOOL, NULL, 1, 10, 0, 0);
  return n;
}

/* ---- valid corpus: source -> printed form ---- */

static const char *valid[][2] = {
  {"A(i,j) = B(i,k) * C(k,j)", "A(i,j) = B(i,k) * C(k,j)"},
  {"A(i,j)=B(i,k)*C(k,j)", "A(i,j) = B(i,k) * C(k,j)"},
  {"  A ( i , j ) =\tB ( i , j ) ", "A(i,j) = B(i,j)"},
  {"y(i) += A(i,j) * x(j)", "y(i) += A(i,j) * x(j)"},
  {"a = b", "a = b"},
  {"a() = b()", "a = b"},
  {"a = B(i,j) * B(i,j)", "a = B(i,j) * B(i,j)"},
  {"A(i) = -B(i)", "A(i) = -B(i)"},
  {"A(i) = - - B(i)", "A(i) = --B(i)"},
  {"A(i) = -2 * B(i)", "A(i) = -2 * B(i)"},
  {"A(i) = -(2) * B(i)", "A(i) = -(2) * B(i)"},
  {"A(i) = -(-2)", "A(i) = -(-2)"},
  {"A(i) = B(i) - -C(i)", "A(i) = B(i) - -C(i)"},
  {"A(i) = B(i) - -2.5", "A(i) = B(i) - -2.5"},
  {"A(i) = a - (b - c(i))", "A(i) = a - (b - c(i))"},
  {"A(i) = (a - b) - c(i)", "A(i) = a - b - c(i)"},
  {"A(i) = a + (b + c(i))", "A(i) = a + (b + c(i))"},
  {"A(i) = a / (b * c(i))", "A(i) = a / (b * c(i))"},
  {"A(i) = (a * b) / c(i)", "A(i) = a * b / c(i)"},
  {"A(i) = (B(i) + C(i)) * D(i)", "A(i) = (B(i) + C(i)) * D(i)"},
  {"A(i) = B(i) + C(i) * D(i)", "A(i) = B(i) + C(i) * D(i)"},
  {"A(i) = -B(i) * C(i)", "A(i) = -B(i) * C(i)"},
  {"A(i) = -(B(i) * C(i))", "A(i) = -(B(i) * C(i))"},
  {"A(i) = ((((B(i)))))", "A(i) = B(i)"},
  {"A(i) = sqrt (B(i))", "A(i) = sqrt(B(i))"},
  {"A(i) = sqrt(B(i)) + min(C(i), 2.5) - max(abs(D(i)), exp(log(E(i))))",
   "A(i) = sqrt(B(i)) + min(C(i), 2.5) - max(abs(D(i)), exp(log(E(i))))"},
  {"A(i) = B(i) * 1.5e3", "A(i) = B(i) * 1500.0"},
  {"A(i) = B(i) * .5", "A(i) = B(i) * 0.5"},
  {"A(i) = B(i) * 1E-3", "A(i) = B(i) * 0.001"},
  {"A(i) = B(i) + 3", "A(i) = B(i) + 3"},
  {"A(i) = 1e300 * B(i)", "A(i) = 1e+300 * B(i)"},
  {"A(i) = 0.1 * B(i)", "A(i) = 0.1 * B(i)"},
  {"A(i) = 1000000000000000000000000", "A(i) = 999999999999999983222784"},
  {"exp = B(i) * c", "exp = B(i) * c"},
  {"_x1(i_2) = Y_(i_2)", "_x1(i_2) = Y_(i_2)"},
  {"A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", "A(i,j) = B(i,k,l) * C(k,j) * D(l,j)"},
  {"y(i) = b(i) - sum(j, A(i,j) * x(j))", "y(i) = b(i) - sum(j, A(i,j) * x(j))"},
  {"y(i) = sum ( j , k , B(i,j,k) )", "y(i) = sum(j, sum(k, B(i,j,k)))"},
  {"y(i) = -sum(j, A(i,j)) * 2", "y(i) = -sum(j, A(i,j)) * 2"},
  {"a = sum(i, b)", "a = sum(i, b)"},
};

START_TEST(test_valid_corpus) {
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  Assignment *as = nt_parse(&a, valid[_i][0], &d);
  ck_assert_msg(as, "%s: %s", valid[_i][0], d.msg);
  char *s = print_as(as);
  ck_assert_str_eq(s, valid[_i][1]);
  /* parse(print(x)) == x, and printing is a fixed point */
  Assignment *as2 = nt_parse(&a, s, &d);
  ck_assert_msg(as2, "%s: %s", s, d.msg);
  ck_assert_msg(nt_equal(as, as2), "round trip changed %s", s);
  char *s2 = print_as(as2);
  ck_assert_str_eq(s, s2);
  free(s);
  free(s2);
  arena_free(&a);
}
END_TEST

/* The tree shape of a parse, checked through the builder. */
START_TEST(test_precedence_shapes) {
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  Assignment *as = nt_parse(&a, "A(i) = a - b - c * -d / e", &d);
  ck_assert_ptr_nonnull(as);
  Expr *r = as->rhs; /* (a - b) - ((c * -d) / e) */
  ck_assert_int_eq(r->kind, EX_OP);
  ck_assert_int_eq(nt_expr_op(r), OP_SUB);
  ck_assert_int_eq(nt_expr_op(r->u.op.a), OP_SUB);
  ck_assert_int_eq(nt_expr_op(r->u.op.b), OP_DIV);
  ck_assert_int_eq(nt_expr_op(r->u.op.b->u.op.a), OP_MUL);
  ck_assert_int_eq(nt_expr_op(r->u.op.b->u.op.a->u.op.b), OP_NEG);
  ck_assert_ptr_null(r->u.op.b->u.op.a->u.op.b->u.op.b); /* unary: no second operand */
  ck_assert_int_eq(r->col, 14);
  Assignment *n = nt_parse(&a, "A(i) = -2 + 7", &d);
  ck_assert_int_eq(n->rhs->u.op.a->kind, EX_LITERAL);
  ck_assert(n->rhs->u.op.a->u.lit.value == -2.0);
  ck_assert(n->rhs->u.op.a->u.lit.is_int);
  ck_assert(!nt_parse(&a, "A(i) = 2.0", &d)->rhs->u.lit.is_int);
  /* interning: same names, same objects; ids in first-use order */
  Assignment *m = nt_parse(&a, "a = B(i,j) * B(i,j) + c", &d);
  ck_assert_int_eq(m->ntensors, 3);
  ck_assert_int_eq(m->nindices, 2);
  ck_assert_ptr_eq(m->rhs->u.op.a->u.op.a->u.access.t,
                   m->rhs->u.op.a->u.op.b->u.access.t);
  ck_assert_str_eq(m->tensors[2]->name, "c");
  ck_assert_int_eq(m->tensors[1]->id, 1);
  ck_assert(m->lhs->u.access.n == 0 && m->lhs->u.access.t->id == 0);
  arena_free(&a);
}
END_TEST

/* The builder API makes the same AST as the parser. */
START_TEST(test_builder) {
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  Assignment *as = nt_assignment(&a);
  TensorVar *A = nt_tensor(&a, as, "A"), *B = nt_tensor(&a, as, "B");
  TensorVar *C = nt_tensor(&a, as, "C");
  IndexVar *i = nt_index(&a, as, "i"), *j = nt_index(&a, as, "j");
  IndexVar *k = nt_index(&a, as, "k");
  ck_assert_ptr_eq(nt_index(&a, as, "i"), i);
  IndexVar *ij[] = {i, j}, *ik[] = {i, k}, *kj[] = {k, j};
  as->lhs = nt_access(&a, A, 2, ij, 0);
  Expr *prod = nt_op_node(&a, OP_MUL, nt_access(&a, B, 2, ik, 0),
                          nt_access(&a, C, 2, kj, 0), 0);
  as->rhs = nt_op_node(&a, OP_ADD, prod,
                       nt_op_node(&a, OP_MAX, nt_literal(&a, 1, true, 0),
                                  nt_op_node(&a, OP_NEG, nt_literal(&a, 2.5, false, 0), NULL, 0),
                                  0),
                       0);
  char *s = print_as(as);
  ck_assert_str_eq(s, "A(i,j) = B(i,k) * C(k,j) + max(1, -(2.5))");
  Assignment *p = nt_parse(&a, s, &d);
  ck_assert(p && nt_equal(as, p));
  free(s);
  TensorDecl decls[16];
  int nd = std_decls(decls);
  ck_assert_msg(nt_check(&a, as, decls, nd, NULL, 0, &d), "%s", d.msg);
  ck_assert_int_eq(k->extent, 30);
  ck_assert(nt_is_reduction_var(as, k) && !nt_is_reduction_var(as, i));
  /* builder errors carry no position */
  Assignment *bad = nt_assignment(&a);
  TensorVar *y = nt_tensor(&a, bad, "y"), *B2 = nt_tensor(&a, bad, "B");
  IndexVar *ii = nt_index(&a, bad, "i"), *jj = nt_index(&a, bad, "j");
  IndexVar *v1[] = {ii}, *v2[] = {ii, ii};
  (void)jj;
  bad->lhs = nt_access(&a, y, 1, v1, 0);
  bad->rhs = nt_access(&a, B2, 2, v2, 0);
  diag_init(&d);
  ck_assert(!nt_check(&a, bad, decls, nd, NULL, 0, &d));
  ck_assert_str_eq(d.msg, "index i appears twice in B; diagonal access is "
                          "not supported");
  arena_free(&a);
}
END_TEST

/* ---- invalid syntax: source -> message ---- */

static const char *invalid[][2] = {
  {"A(i) = ", "1:8: expected an expression, found end of input"},
  {"A(i) = B(i) +* C(i)", "1:14: expected an expression, found '*'"},
  {"A(i) = B(i) + ", "1:15: expected an expression, found end of input"},
  {"A(i) = B(i) \xc3\x97 C(i)", "1:13: non-ASCII byte 0xC3 is not allowed"},
  {"A(i) = 1e999 * B(i)", "1:8: literal 1e999 is out of range for f64"},
  {"A(i) = 1e-999 * B(i)", "1:8: literal 1e-999 is out of range for f64"},
  {"A(i) = B(i,i)", "1:12: index i appears twice in B; diagonal access is "
                    "not supported"},
  {"A(i) = A(i) + B(i)", "1:8: A is both output and operand"},
  {"a = 2 * a", "1:9: a is both output and operand"},
  {"A(i) B(i)", "1:6: expected '=' or '+=', found 'B'"},
  {"A(i) = B(i))", "1:12: unexpected ')' after the expression"},
  {"A(i) = B(i) C(i)", "1:13: unexpected 'C' after the expression"},
  {"A(i) = (B(i)", "1:13: expected ')', found end of input"},
  {"A(i) = sqrt(B(i), C(i))", "1:17: sqrt takes 1 argument"},
  {"A(i) = min(B(i))", "1:16: min takes 2 arguments"},
  {"A(i) = B(1)", "1:10: expected an index variable, found '1'"},
  {"A(i) = B(i j)", "1:12: expected ',' or ')', found 'j'"},
  {"A(i) = B(i) @ C(i)", "1:13: unexpected character '@'"},
  {"A(i) = 1e+ * B(i)", "1:8: malformed number: exponent has no digits"},
  {"= B(i)", "1:1: expected the output tensor, found '='"},
  {"", "1:1: expected the output tensor, found end of input"},
  {"A(i,j,k,l,m,n,o,p,q) = b", "1:19: too many indices in A (max 8)"},
  {"A(i) = B(i) += C(i)", "1:13: unexpected '+=' after the expression"},
  {"A(i) = B(i)\x01", "1:12: unexpected control character 0x01"},
  {"y(i) = sum(A(i,j))", "1:13: expected ',' and the expression to sum, found '('"},
  {"y(i) = sum(1, A(i))", "1:12: sum: expected the index to sum over, found '1'"},
  {"y(i) = sum(j, A(i,j)", "1:21: expected ')', found end of input"},
};

START_TEST(test_invalid_corpus) {
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  ck_assert_ptr_null(nt_parse(&a, invalid[_i][0], &d));
  ck_assert_int_eq(d.status, TJ_ERR_PARSE);
  ck_assert_msg(strstr(d.msg, invalid[_i][1]), "%s: got \"%s\"",
                invalid[_i][0], d.msg);
  ck_assert_msg(strncmp(d.msg, invalid[_i][1], strlen(invalid[_i][1])) == 0,
                "message must start with the position: %s", d.msg);
  arena_free(&a);
}
END_TEST

START_TEST(test_caret) {
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  ck_assert_ptr_null(nt_parse(&a, "A(i) = B(i) +* C(i)", &d));
  ck_assert_str_eq(d.msg, "1:14: expected an expression, found '*'\n"
                          "  A(i) = B(i) +* C(i)\n"
                          "               ^");
  arena_free(&a);
}
END_TEST

static char *repeat(const char *pre, char c, int n, const char *mid,
                    char c2, int n2) {
  size_t lp = strlen(pre), lm = strlen(mid);
  char *s = malloc(lp + (size_t)n + lm + (size_t)n2 + 1);
  memcpy(s, pre, lp);
  memset(s + lp, c, (size_t)n);
  memcpy(s + lp + n, mid, lm);
  memset(s + lp + n + lm, c2, (size_t)n2);
  s[lp + n + lm + n2] = 0;
  return s;
}

START_TEST(test_deep_nesting) {
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  char *s = repeat("A(i) = ", '(', 100000, "B(i)", ')', 100000);
  ck_assert_ptr_null(nt_parse(&a, s, &d));
  ck_assert_msg(strstr(d.msg, "1:264: expression nested too deeply (more "
                              "than 256 levels)"), "%s", d.msg);
  free(s);
  diag_init(&d);
  s = repeat("A(i) = ", '-', 100000, "B(i)", ' ', 0);
  ck_assert_ptr_null(nt_parse(&a, s, &d));
  ck_assert_msg(strstr(d.msg, "nested too deeply"), "%s", d.msg);
  free(s);
  diag_init(&d);
  s = repeat("A(i) = ", '(', 200, "B(i)", ')', 200); /* within bounds */
  Assignment *as = nt_parse(&a, s, &d);
  ck_assert_msg(as, "%s", d.msg);
  ck_assert_int_eq(as->rhs->kind, EX_ACCESS);
  free(s);
  /* At the nesting bound, the printed form still parses back: 256
   * negations of the literal -2 (257 minuses after the binary one) print
   * with "-(-2)" innermost (found by the fuzzer). */
  diag_init(&d);
  s = repeat("A(i) = b - ", '-', 257, "2", ' ', 0);
  as = nt_parse(&a, s, &d);
  ck_assert_msg(as, "%s", d.msg);
  char *printed = NULL;
  size_t plen = 0;
  FILE *pf = open_memstream(&printed, &plen);
  nt_print(pf, as);
  fclose(pf);
  Diag d2;
  diag_init(&d2);
  Assignment *back = nt_parse(&a, printed, &d2);
  ck_assert_msg(back && nt_equal(as, back), "%s", d2.msg);
  free(printed);
  free(s);
  /* a long chain a+a+...: the tree height is bounded too */
  size_t n = 100000;
  diag_init(&d);
  char *chain = malloc(16 + 4 * n);
  char *p = chain + sprintf(chain, "A(i) = b");
  for (size_t k = 0; k < n; k++) p += sprintf(p, " + b");
  ck_assert_ptr_null(nt_parse(&a, chain, &d));
  ck_assert_msg(strstr(d.msg, "expression too large (operator tree deeper "
                              "than 1024)"), "%s", d.msg);
  free(chain);
  /* interning limits */
  char many[512], *q = many + sprintf(many, "A = b0");
  for (int k = 1; k < 40; k++) q += sprintf(q, " + b%d", k);
  diag_init(&d);
  ck_assert_ptr_null(nt_parse(&a, many, &d));
  ck_assert_msg(strstr(d.msg, "too many tensors in one expression (max 32)"),
                "%s", d.msg);
  q = many + sprintf(many, "A = b(i0,i1,i2,i3,i4,i5,i6,i7)");
  for (int k = 1; k < 6; k++)
    q += sprintf(q, " + b%d(j%d,k%d,l%d,m%d,n%d,o%d,p%d)", k, k, k, k, k, k,
                 k, k);
  diag_init(&d);
  ck_assert_ptr_null(nt_parse(&a, many, &d));
  ck_assert_msg(strstr(d.msg, "too many index variables (max 32)"), "%s", d.msg);
  arena_free(&a);
}
END_TEST

/* ---- checker ---- */

typedef struct CheckCase {
  const char *src;
  const char *msg;
  tj_status st;
} CheckCase;

static const CheckCase check_bad[] = {
  {"y(i) = B(i,j) * z(j)", "1:17: unknown tensor 'z'", TJ_ERR_INVALID},
  {"q(i) = B(i,j) * x(j)", "1:1: unknown tensor 'q'", TJ_ERR_INVALID},
  {"y(i) = B(i,j,k) * x(j)", "1:8: B has order 2 but is accessed with 3 "
                             "indices", TJ_ERR_SHAPE},
  {"y(i,j) = B(i,j)", "1:1: y has order 1 but is accessed with 2 indices",
   TJ_ERR_SHAPE},
  {"A(i,j) = B(i,k) * x(j)", "1:19: index j has extent 20 in A (mode 1) but "
                             "30 in x (mode 0)", TJ_ERR_SHAPE},
  {"O(i,j) = y(i)", "1:1: index j is unbound: it appears only on the left "
                    "and O's mode 1 has no known dimension", TJ_ERR_SHAPE},
  {"y(i) = B(i,j) * w(k)", "1:17: index k has no extent: no operand with a "
                           "known dimension uses it and none was given",
   TJ_ERR_SHAPE},
  {"A(i,j) = F(i,k) * C(k,j)", "1:19: dtype mix f32 (F) and f64 (C) has no "
                               "defined promotion", TJ_ERR_DTYPE},
  {"J(i) = I(i) * 0.5", "1:15: dtype mix i32 (I) and f64 (literal 0.5) has "
                        "no defined promotion", TJ_ERR_DTYPE},
  {"J(i) = 1.5", "1:8: dtype mix i32 (J) and f64 (literal 1.5) has no "
                 "defined promotion", TJ_ERR_DTYPE},
  {"A(i,j) = F(i,k) * G(k,j)", "1:1: output A is f64 but the expression is "
                               "f32", TJ_ERR_DTYPE},
  {"y(i) = B(i,j) / S(i,j)", "1:17: division by sparse operand S is "
                             "undefined where S has no entry",
   TJ_ERR_UNSUPPORTED},
  {"y(i) = B(i,j) / (2 * -abs(S(i,j)))", "1:27: division by sparse operand "
   "S is undefined where S has no entry", TJ_ERR_UNSUPPORTED},
  {"J(i) = sqrt(I(i))", "1:8: sqrt of an i32 expression is undefined",
   TJ_ERR_DTYPE},
  {"J(i) = I(i) + pow(I(i), 2)", "1:15: pow of an i32 expression is undefined",
   TJ_ERR_DTYPE},
  {"P(i) = Q(i) - Q(i)", "1:13: - of a bool expression is undefined (bool + is or, "
                         "* is and)", TJ_ERR_DTYPE},
  {"P(i) = -Q(i)", "1:8: negation of a bool expression is undefined", TJ_ERR_DTYPE},
  {"P(i) = Q(i) / Q(i)", "1:13: / of a bool expression", TJ_ERR_DTYPE},
  {"P(i) = max(Q(i), 2)", "1:18: literal 2 in a bool expression (bool literals are 0 "
                          "and 1)", TJ_ERR_DTYPE},
  {"P(i) = exp(Q(i))", "1:8: exp of a bool expression is undefined", TJ_ERR_DTYPE},
  {"P(i) = I(i)", "1:1: output P is bool but the expression is i32", TJ_ERR_DTYPE},
};

START_TEST(test_check_errors) {
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  TensorDecl decls[16];
  int nd = std_decls(decls);
  const CheckCase *c = &check_bad[_i];
  Assignment *as = nt_parse(&a, c->src, &d);
  ck_assert_msg(as, "%s: %s", c->src, d.msg);
  ck_assert(!nt_check(&a, as, decls, nd, NULL, 0, &d));
  ck_assert_msg(strncmp(d.msg, c->msg, strlen(c->msg)) == 0, "%s: got \"%s\"",
                c->src, d.msg);
  ck_assert_msg(strchr(d.msg, '^'), "no caret: %s", d.msg);
  ck_assert_int_eq(d.status, c->st);
  arena_free(&a);
}
END_TEST

START_TEST(test_check_ok) {
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  TensorDecl decls[16];
  int nd = std_decls(decls);
  Assignment *as = nt_parse(&a, "O(i,j) = B(i,k) * C(k,j) + 1", &d);
  ck_assert_msg(nt_check(&a, as, decls, nd, NULL, 0, &d), "%s", d.msg);
  ck_assert_int_eq(as->tensors[0]->decl.dims[0], 10); /* filled */
  ck_assert_int_eq(as->tensors[0]->decl.dims[1], 20);
  ck_assert_int_eq(decls[11].dims[0], -1);            /* user's untouched */
  ck_assert_int_eq(as->indices[2]->extent, 30);
  ck_assert_int_eq(as->rhs->dtype, TJ_F64);
  ck_assert_int_eq(as->rhs->u.op.b->dtype, TJ_F64);
  ck_assert_int_eq(as->tensors[1]->decl.order, 2);
  /* sparse numerator is fine; integer literals fit integer dtypes */
  ck_assert(nt_check(&a, nt_parse(&a, "y(i) = S(i,j) / B(i,j)", &d), decls,
                     nd, NULL, 0, &d));
  /* a divisor that is not zero where the sparse operand has no entry */
  ck_assert_msg(nt_check(&a, nt_parse(&a, "w(i) = y(i) / (S(i,j) * x(j) + 2)", &d), decls,
                         nd, NULL, 0, &d), "%s", d.msg);
  ck_assert_msg(nt_check(&a, nt_parse(&a, "O(i,j) = B(i,j) / (exp(S(i,j)) - S(i,j))", &d), decls,
                         nd, NULL, 0, &d), "%s", d.msg);
  Assignment *ii = nt_parse(&a, "J(i) = -I(i) * 2 + abs(I(i))", &d);
  ck_assert_msg(nt_check(&a, ii, decls, nd, NULL, 0, &d), "%s", d.msg);
  ck_assert_int_eq(ii->rhs->u.op.a->u.op.b->dtype, TJ_I32);
  /* given extents */
  VarExtent ext[] = {{"j", 7}};
  Assignment *bc = nt_parse(&a, "O(i,j) = y(i)", &d);
  ck_assert_msg(nt_check(&a, bc, decls, nd, ext, 1, &d), "%s", d.msg);
  ck_assert_int_eq(bc->tensors[0]->decl.dims[1], 7);
  VarExtent bad[] = {{"i", 11}};
  Assignment *g = nt_parse(&a, "y(i) = B(i,j) * x(j)", &d);
  ck_assert(!nt_check(&a, g, decls, nd, bad, 1, &d));
  ck_assert_msg(strstr(d.msg, "1:1: index i has extent 11 (given) but 10 in y "
                              "(mode 0)"), "%s", d.msg);
  arena_free(&a);
}
END_TEST

/* TACO's rule: a summed index covers the smallest subexpression holding
 * every use of it; the checked form prints where each sum went. */
START_TEST(test_sum_placement) {
  static const char *cases[][2] = {
    {"y(i) = B(i,j) * x(j)", "y(i) = B(i,j) * x(j)"},
    {"w(i) = B(i,j) * x(j) + B(i,j) * x(j)", "w(i) = B(i,j) * x(j) + B(i,j) * x(j)"},
    {"w(i) = y(i) - B(i,j) * x(j)", "w(i) = y(i) - sum(j, B(i,j) * x(j))"},
    {"w(i) = (B(i,j) + B(i,j)) * x(j)", "w(i) = (B(i,j) + B(i,j)) * x(j)"},
    {"O(i,j) = B(i,k) * C(k,j) + A(i,j)", "O(i,j) = sum(k, B(i,k) * C(k,j)) + A(i,j)"},
    {"w(i) = B(i,j) * (C(j,k) * A(i,k) + 1)", "w(i) = B(i,j) * (sum(k, C(j,k) * A(i,k)) + 1)"},
    {"w(i) = y(i) + B(i,j)", "w(i) = y(i) + sum(j, B(i,j))"},
    {"w(i) = sum(j, y(i) - B(i,j) * x(j))", "w(i) = sum(j, y(i) - B(i,j) * x(j))"},
    {"a = y(i) * y(i) * 2 + 1", "a = sum(i, y(i) * y(i) * 2) + 1"},
    /* a product distributes over a sum: the sum covers the whole product */
    {"O(i,j) = B(i,k) * C(k,j) * A(i,j)", "O(i,j) = B(i,k) * C(k,j) * A(i,j)"},
    {"w(i) = y(i) * (B(i,j) * x(j))", "w(i) = y(i) * (B(i,j) * x(j))"},
    {"w(i) = -(B(i,j) * x(j)) + y(i)", "w(i) = sum(j, -(B(i,j) * x(j))) + y(i)"},
    {"w(i) = B(i,j) * x(j) / y(i) + 1", "w(i) = sum(j, B(i,j) * x(j) / y(i)) + 1"},
    {"w(i) = y(i) / (B(i,j) * x(j))", "w(i) = y(i) / sum(j, B(i,j) * x(j))"},
    {"w(i) = sqrt(B(i,j) * x(j)) * y(i)", "w(i) = sqrt(sum(j, B(i,j) * x(j))) * y(i)"},
  };
  TensorDecl decls[16];
  int nd = std_decls(decls);
  for (size_t q = 0; q < sizeof cases / sizeof *cases; q++) {
    
    Arena a;
    arena_init(&a);
    Diag d;
    diag_init(&d);
    Assignment *as = nt_parse(&a, cases[q][0], &d);
    ck_assert_msg(as && nt_check(&a, as, decls, nd, NULL, 0, &d), "%s: %s", cases[q][0], d.msg);
    char *got = print_as(as);
    ck_assert_msg(strcmp(got, cases[q][1]) == 0, "%s: got %s", cases[q][0], got);
    free(got);
    arena_free(&a);
  }
}
END_TEST

/* ---- concrete index notation and schedules ---- */

typedef struct CinCase {
  const char *src, *sched, *cin;
} CinCase;

static const CinCase cin_cases[] = {
  {"A(i,j) = B(i,k) * C(k,j)", "",
   "forall(i, forall(j, forall(k, A(i,j) += B(i,k) * C(k,j))))"},
  {"A(i,j) = B(i,k) * C(k,j)", "reorder(i,k,j) parallelize(i)",
   "forall(i:parallel, forall(k, forall(j, A(i,j) += B(i,k) * C(k,j))))"},
  {"A(i,j) = B(i,k) * C(k,j)", "reorder(k,i); vectorize(j,8)",
   "forall(k, forall(j:vectorize(8), forall(i, A(i,j) += B(i,k) * C(k,j))))"},
  {"A(i,j) = B(i,j)", "parallelize(j), vectorize(j,4)",
   "forall(i, forall(j:parallel:vectorize(4), A(i,j) = B(i,j)))"},
  {"A(i,j) = B(i,j)", "parallelize(i, dynamic)",
   "forall(i:parallel(dynamic), forall(j, A(i,j) = B(i,j)))"},
  {"A(i,j) = B(i,j)", "unroll(j, 8) unroll(i,2)",
   "forall(i:unroll(2), forall(j:unroll(8), A(i,j) = B(i,j)))"},
  {"y(i) += B(i,j) * x(j)", "reorder(j,i)",
   "keep(y, forall(j, forall(i, y(i) += B(i,j) * x(j))))"},
  {"y(i) = B(i,j) * x(j)", "reorder(j,i)",   /* y starts from 0: no keep() */
   "forall(j, forall(i, y(i) += B(i,j) * x(j)))"},
  {"a = B(i,j) * C(j,k) * D(k,l)", "",
   "forall(i, forall(j, forall(k, forall(l, a += B(i,j) * C(j,k) * D(k,l)))))"},
  {"a = b", "", "a = b"},
};

START_TEST(test_cin) {
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  const CinCase *c = &cin_cases[_i];
  Assignment *as = nt_parse(&a, c->src, &d);
  Schedule s;
  ck_assert_msg(nt_schedule_parse(c->sched, &s, &a, &d), "%s", d.msg);
  Cin *cin = cin_from_assignment(&a, as, &s, &d);
  ck_assert_msg(cin, "%s", d.msg);
  char *p = print_cin(cin);
  ck_assert_str_eq(p, c->cin);
  free(p);
  arena_free(&a);
}
END_TEST

START_TEST(test_cin_structure) {
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  Assignment *as = nt_parse(&a, "A(i,j) = B(i,k) * C(k,j)", &d);
  Schedule s;
  ck_assert(nt_schedule_parse("reorder(j,k)", &s, &a, &d));
  Cin *c = cin_from_assignment(&a, as, &s, &d);
  IndexVar *order[8];
  ck_assert_int_eq(cin_loop_order(c, order, 8), 3);
  ck_assert_str_eq(order[0]->name, "i");
  ck_assert_str_eq(order[1]->name, "j");
  ck_assert_str_eq(order[2]->name, "k");
  ck_assert_int_eq(cin_loop_order(c, order, 2), 2);
  /* unknown index in a directive: error with the directive's column */
  ck_assert(nt_schedule_parse("parallelize(i) reorder(i,q)", &s, &a, &d));
  ck_assert_ptr_null(cin_from_assignment(&a, as, &s, &d));
  ck_assert_msg(strstr(d.msg, "1:16: reorder: unknown index 'q'"), "%s", d.msg);
  diag_init(&d);
  ck_assert(nt_schedule_parse("reorder(i,i)", &s, &a, &d));
  ck_assert_ptr_null(cin_from_assignment(&a, as, &s, &d));
  ck_assert_str_eq(d.msg, "reorder: index 'i' appears twice");
  /* a where built through the constructors */
  Expr *w = as->rhs->u.op.a;
  Cin *prod = cin_forall(&a, as->indices[2], cin_assign(&a, w, as->rhs, true));
  Cin *cons = cin_assign(&a, as->lhs, w, false);
  Cin *where = cin_where(&a, cons, prod, as->tensors[1]);
  char *p = print_cin(where);
  ck_assert_str_eq(p, "where(A(i,j) = B(i,k), forall(k, B(i,k) += B(i,k) * C(k,j)))");
  free(p);
  arena_free(&a);
}
END_TEST

static const char *sched_bad[][2] = {
  {"foo(i)", "1:1: unknown schedule directive 'foo'"},
  {"sequence(i)", "1:10: expected ')'"},
  {"nosequence", "1:11: expected '('"},
  {"reorder(i,k) bar(j)", "1:14: unknown schedule directive 'bar'"},
  {"vectorize(j,12)", "1:13: vectorize width 12 is not a power of two "
                      "between 1 and 64"},
  {"vectorize(j,128)", "1:13: vectorize width 128 is not a power of two"},
  {"vectorize(j,0)", "1:13: vectorize width 0 is not a power of two"},
  {"vectorize(j)", "1:12: expected ',' and a vector width"},
  {"vectorize(j,x)", "1:13: expected a vector width"},
  {"parallelize(i,j)", "1:15: parallelize: unknown strategy 'j' (static, balanced or dynamic; or partials or atomics)"},
  {"reorder(i,k", "1:12: expected ',' or ')'"},
  {"reorder(1)", "1:9: expected an index variable"},
  {"reorder i", "1:9: expected '('"},
  {"precompute(B(i,k)*C(k,j), j, w", "1:31: unclosed '(' in precompute"},
  {"(i)", "1:1: expected a schedule directive"},
};

START_TEST(test_schedule_errors) {
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  Schedule s;
  ck_assert(!nt_schedule_parse(sched_bad[_i][0], &s, &a, &d));
  ck_assert_msg(strncmp(d.msg, sched_bad[_i][1], strlen(sched_bad[_i][1])) == 0,
                "%s: got \"%s\"", sched_bad[_i][0], d.msg);
  ck_assert(strchr(d.msg, '^'));
  arena_free(&a);
}
END_TEST

START_TEST(test_schedule_print) {
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  Schedule s;
  ck_assert(nt_schedule_parse(" reorder( i , k,j ),parallelize(i);vectorize(j, 8)"
                              "  precompute(B(i,k) * C(k,j), j, w)",
                              &s, &a, &d));
  ck_assert_int_eq(s.n, 4);
  ck_assert_int_eq(s.d[0].kind, SCHED_REORDER);
  ck_assert_int_eq(s.d[0].nvars, 3);
  ck_assert_int_eq(s.d[2].width, 8);
  ck_assert_str_eq(s.d[3].arg, "B(i,k) * C(k,j), j, w");
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  nt_schedule_print(f, &s);
  fclose(f);
  ck_assert_str_eq(buf, "reorder(i,k,j) parallelize(i) vectorize(j,8) "
                        "precompute(B(i,k) * C(k,j), j, w)");
  free(buf);
  ck_assert(nt_schedule_parse("", &s, &a, &d) && s.n == 0);
  ck_assert(nt_schedule_parse("sequence( ) nosequence()", &s, &a, &d) && s.n == 2);
  ck_assert(s.d[0].kind == SCHED_SEQUENCE && s.d[1].kind == SCHED_NOSEQUENCE);
  f = open_memstream(&buf, &n);
  nt_schedule_print(f, &s);
  fclose(f);
  ck_assert_str_eq(buf, "sequence() nosequence()");
  free(buf);
  arena_free(&a);
}
END_TEST

/* ---- reference interpreter ---- */

typedef struct Run {
  Arena a;
  Diag d;
  Assignment *as;
} Run;

/* Parses, checks and evaluates src; arrays[k] belongs to decls[k] and is
 * passed to the interpreter by TensorId. */
static bool run(Run *r, const char *src, const TensorDecl *decls, int nd,
                double *const *arrays) {
  arena_init(&r->a);
  diag_init(&r->d);
  r->as = nt_parse(&r->a, src, &r->d);
  if (!r->as || !nt_check(&r->a, r->as, decls, nd, NULL, 0, &r->d))
    return false;
  double *dense[NT_MAX_TENSORS] = {0};
  for (int t = 0; t < r->as->ntensors; t++)
    for (int k = 0; k < nd; k++)
      if (strcmp(decls[k].name, r->as->tensors[t]->name) == 0)
        dense[t] = arrays[k];
  return nt_ref_eval(r->as, dense, NULL, &r->d);
}

static void assert_close(const double *got, const double *want, int n) {
  for (int k = 0; k < n; k++)
    ck_assert_msg(fabs(got[k] - want[k]) <= 1e-12 * (1 + fabs(want[k])),
                  "element %d: got %.17g want %.17g", k, got[k], want[k]);
}

START_TEST(test_ref_spmv_gemm) {
  TensorDecl dc[] = {mk("y", TJ_F64, NULL, 1, 3, 0, 0),
                     mk("A", TJ_F64, "ds", 2, 3, 4, 0),
                     mk("x", TJ_F64, NULL, 1, 4, 0, 0)};
  double y[3] = {9, 9, 9};
  double A[12] = {1, 0, 2, 0,   0, 0, 0, 0,   0, 3, 0, 4};
  double x[4] = {1, 2, 3, 4};
  Run r;
  ck_assert_msg(run(&r, "y(i) = A(i,j) * x(j)", dc, 3,
                    (double *[8]){y, A, x}), "%s", r.d.msg);
  assert_close(y, (double[]){7, 0, 22}, 3);
  arena_free(&r.a);
  /* += keeps the old values */
  ck_assert(run(&r, "y(i) += A(i,j) * x(j)", dc, 3, (double *[8]){y, A, x}));
  assert_close(y, (double[]){14, 0, 44}, 3);
  arena_free(&r.a);

  TensorDecl g[] = {mk("C", TJ_F64, NULL, 2, 2, 2, 0),
                    mk("A", TJ_F64, NULL, 2, 2, 3, 0),
                    mk("B", TJ_F64, NULL, 2, 3, 2, 0)};
  double C[4], GA[6] = {1, 2, 3, 4, 5, 6}, GB[6] = {7, 8, 9, 10, 11, 12};
  ck_assert(run(&r, "C(i,j) = A(i,k) * B(k,j)", g, 3, (double *[8]){C, GA, GB}));
  assert_close(C, (double[]){58, 64, 139, 154}, 4);
  arena_free(&r.a);
}
END_TEST

START_TEST(test_ref_mttkrp) {
  enum { I = 2, J = 3, K = 2, L = 3 };
  TensorDecl dc[] = {mk("A", TJ_F64, NULL, 2, I, J, 0),
                     mk("B", TJ_F64, "sss", 3, I, K, L),
                     mk("C", TJ_F64, NULL, 2, K, J, 0),
                     mk("D", TJ_F64, NULL, 2, L, J, 0)};
  double A[I * J], B[I * K * L], C[K * J], D[L * J], want[I * J] = {0};
  for (int n = 0; n < I * K * L; n++) B[n] = (n % 3 == 0) ? 0 : n * 0.5;
  for (int n = 0; n < K * J; n++) C[n] = n + 1;
  for (int n = 0; n < L * J; n++) D[n] = 2 - n;
  for (int i = 0; i < I; i++)
    for (int j = 0; j < J; j++)
      for (int k = 0; k < K; k++)
        for (int l = 0; l < L; l++)
          want[i * J + j] += B[(i * K + k) * L + l] * C[k * J + j] * D[l * J + j];
  Run r;
  ck_assert_msg(run(&r, "A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", dc, 4,
                    (double *[8]){A, B, C, D}), "%s", r.d.msg);
  assert_close(A, want, I * J);
  /* one element by hand: A(0,0) = sum_kl B(0,k,l) C(k,0) D(l,0)
   * B(0,..) = {0,.5,1, 0,2,2.5}; C(.,0) = {1,4}; D(.,0) = {2,-1,-4} */
  ck_assert(fabs(A[0] - ((0 * 2 + .5 * -1 + 1 * -4) * 1 +
                         (0 * 2 + 2 * -1 + 2.5 * -4) * 4)) < 1e-12);
  ck_assert(fabs(A[0] - -52.5) < 1e-12);
  arena_free(&r.a);
}
END_TEST

START_TEST(test_ref_scalars_broadcast) {
  TensorDecl dc[] = {mk("a", TJ_F64, NULL, 0, 0, 0, 0),
                     mk("B", TJ_F64, NULL, 2, 2, 3, 0),
                     mk("C", TJ_F64, "ds", 2, 2, 3, 0),
                     mk("b", TJ_F64, NULL, 1, 2, 0, 0),
                     mk("M", TJ_F64, NULL, 2, 2, 4, 0)};
  double a = 5, B[6] = {1, 2, 3, 4, 5, 6}, C[6] = {1, 0, -1, 2, 0, 1};
  double b[2] = {7, -1}, M[8];
  double *all[] = {&a, B, C, b, M};
  Run r;
  ck_assert(run(&r, "a = B(i,j) * C(i,j)", dc, 5, all));
  ck_assert(a == 1 - 3 + 8 + 6);
  arena_free(&r.a);
  ck_assert(run(&r, "a() = B(i,j)", dc, 5, all));
  ck_assert(a == 21);
  arena_free(&r.a);
  ck_assert(run(&r, "a += B(i,j) / 2", dc, 5, all));
  ck_assert(a == 31.5);
  arena_free(&r.a);
  ck_assert(run(&r, "a = 2 * 3 + -1", dc, 5, all));
  ck_assert(a == 5);
  arena_free(&r.a);
  ck_assert(run(&r, "M(i,j) = b(i)", dc, 5, all));
  assert_close(M, (double[]){7, 7, 7, 7, -1, -1, -1, -1}, 8);
  arena_free(&r.a);
}
END_TEST

START_TEST(test_ref_functions) {
  TensorDecl dc[] = {mk("y", TJ_F64, NULL, 1, 4, 0, 0),
                     mk("x", TJ_F64, NULL, 1, 4, 0, 0),
                     mk("z", TJ_F64, NULL, 1, 4, 0, 0)};
  double y[4], x[4] = {4, 9, 0.25, 1}, z[4] = {-1, 2, -3, 0.5};
  Run r;
  ck_assert(run(&r, "y(i) = sqrt(x(i)) + abs(z(i))", dc, 3, (double *[8]){y, x, z}));
  assert_close(y, (double[]){3, 5, 3.5, 1.5}, 4);
  arena_free(&r.a);
  ck_assert(run(&r, "y(i) = min(x(i), z(i)) - max(x(i), 2 * z(i))", dc, 3,
                (double *[8]){y, x, z}));
  assert_close(y, (double[]){-1 - 4, 2 - 9, -3 - 0.25, 0.5 - 1}, 4);
  arena_free(&r.a);
  ck_assert(run(&r, "y(i) = log(exp(z(i))) - -(x(i) - (z(i) - 1))", dc, 3,
                (double *[8]){y, x, z}));
  assert_close(y, (double[]){5, 10, 1.25, 2}, 4); /* x + 1 */
  arena_free(&r.a);
}
END_TEST

/* ---- the operator table (ir/ops.def) ---- */

static double c_neg(double x, double y) { (void)y; return -x; }
static double c_add(double x, double y) { return x + y; }
static double c_sub(double x, double y) { return x - y; }
static double c_mul(double x, double y) { return x * y; }
static double c_div(double x, double y) { return x / y; }
static double c_sqrt(double x, double y) { (void)y; return sqrt(x); }
static double c_fabs(double x, double y) { (void)y; return fabs(x); }
static double c_exp(double x, double y) { (void)y; return exp(x); }
static double c_log(double x, double y) { (void)y; return log(x); }
static double c_or(double x, double y) { return x != 0 || y != 0; }
static double c_and(double x, double y) { return x != 0 && y != 0; }
static double c_pair(double x, double y) { (void)x, (void)y; return 1; }
static double c_second(double x, double y) { (void)x; return y; }

/* The C library's value of each row, by the row's name: a new row fails
 * test_op_table until it is given one here. */
static const struct { const char *name; double (*f)(double, double); } c_ref[] = {
  {"NEG", c_neg}, {"ADD", c_add}, {"SUB", c_sub}, {"MUL", c_mul}, {"DIV", c_div},
  {"SQRT", c_sqrt}, {"ABS", c_fabs}, {"EXP", c_exp}, {"LOG", c_log},
  {"MIN", fmin}, {"MAX", fmax}, {"POW", pow}, {"OR", c_or}, {"AND", c_and}, {"PAIR", c_pair},
  {"MASK", c_second}, {"EXCEPT", c_second},
};

/* y(i) = x(i) + z(i), -x(i), sqrt(x(i)), min(x(i), z(i)), ... */
static void op_source(const NtOp *op, char *buf, size_t n) {
  if (op->is_call)
    snprintf(buf, n, "y(i) = %s(x(i)%s)", op->spelling, op->arity == 2 ? ", z(i)" : "");
  else if (op->arity == 1)
    snprintf(buf, n, "y(i) = %sx(i)", op->spelling);
  else
    snprintf(buf, n, "y(i) = x(i) %s z(i)", op->spelling);
}

static double op_eval(const NtOp *op, double x, double y) { return (double)op->eval(x, y); }

/* The facts a row claims about zeros, identities and laws hold for its
 * reference value. */
static void assert_algebra(const NtOp *op) {
  const double nums[] = {0.75, 2.5, 3}, truths[] = {0, 1, 1};
  const double *xs = op->laws & OL_BOOL ? truths : nums;
  double f00 = op_eval(op, 0, 0);  /* 0 / 0 is NaN: OA_NUMERATOR checks 0 / y below */
  if (op->algebra == OA_DENSE) ck_assert_msg(f00 != 0, "%s: OA_DENSE but f(0) = 0", op->name);
  else if (op->algebra != OA_NUMERATOR && !(op->laws & OL_PATTERN))
    ck_assert_msg(f00 == 0, "%s: preserves zero but f(0, 0) = %g", op->name, f00);
  for (int k = 0; k < 3; k++) {
    double x = xs[k], y = xs[(k + 1) % 3];
    if (op->laws & OL_PATTERN) {
      ck_assert_msg(op_eval(op, x, y) == op_eval(op, y, 0.5), "%s: not constant", op->name);
      continue;
    }
    if (op->laws & OL_STRUCT_X) { /* only x's existence matters */
      ck_assert_msg(op_eval(op, x, y) == y && op_eval(op, 0, y) == y, "%s: not y", op->name);
      continue;
    }
    if (op->algebra == OA_INTERSECT || op->algebra == OA_NUMERATOR)
      ck_assert_msg(op_eval(op, 0, y) == 0, "%s: f(0, %g) != 0", op->name, y);
    if (op->algebra == OA_INTERSECT)
      ck_assert_msg(op_eval(op, x, 0) == 0, "%s: f(%g, 0) != 0", op->name, x);
    if (op->laws & OL_COMM) ck_assert(op_eval(op, x, y) == op_eval(op, y, x));
    if (op->laws & OL_ASSOC)
      ck_assert(op_eval(op, op_eval(op, x, y), 1.5) == op_eval(op, x, op_eval(op, y, 1.5)));
    if (op->laws & OL_LINEAR_X)
      ck_assert_msg(op_eval(op, x + y, 2) == op_eval(op, x, 2) + op_eval(op, y, 2) &&
                    op_eval(op, 4 * x, 2) == 4 * op_eval(op, x, 2), "%s: linear in x", op->name);
    if (op->laws & OL_LINEAR_Y)
      ck_assert_msg(op_eval(op, 2, x + y) == op_eval(op, 2, x) + op_eval(op, 2, y) &&
                    op_eval(op, 2, 4 * x) == 4 * op_eval(op, 2, x), "%s: linear in y", op->name);
    if (!isnan(op->identity)) {
      ck_assert_msg(op_eval(op, x, op->identity) == x, "%s: identity", op->name);
      if (op->laws & OL_COMM) ck_assert(op_eval(op, op->identity, x) == x);
    }
    if (!isnan(op->annihilator))
      ck_assert_msg(op_eval(op, op->annihilator, x) == op->annihilator &&
                    op_eval(op, x, op->annihilator) == op->annihilator,
                    "%s: annihilator", op->name);
  }
}

/* Every row parses to its node, prints back, checks (float-only rows are
 * refused for integers), evaluates to the C library's value, and its
 * algebra holds. */
START_TEST(test_op_table) {
  const NtOp *op = nt_op((OpKind)_i);
  double (*ref)(double, double) = NULL;
  for (size_t k = 0; k < sizeof c_ref / sizeof *c_ref; k++)
    if (!strcmp(c_ref[k].name, op->name)) ref = c_ref[k].f;
  ck_assert_msg(ref, "%s has no C reference in test_op_table", op->name);
  char src[64];
  op_source(op, src, sizeof src);
  TensorDecl dc[] = {mk("y", TJ_F64, NULL, 1, 4, 0, 0), mk("x", TJ_F64, NULL, 1, 4, 0, 0),
                     mk("z", TJ_F64, NULL, 1, 4, 0, 0)};
  double y[4], x[4] = {4, 0.5, 2.25, 7}, z[4] = {-1, 2, 3, 0.125};
  Run r;
  ck_assert_msg(run(&r, src, dc, 3, (double *[8]){y, x, z}), "%s: %s", src, r.d.msg);
  ck_assert_int_eq(nt_expr_op(r.as->rhs), _i);
  char *printed = print_as(r.as);
  ck_assert_str_eq(printed, src);
  free(printed);
  for (int k = 0; k < 4; k++) /* x is dense: except(x, z) keeps nothing out of x's entries */
    assert_close(&y[k], (double[]){op->algebra == OA_EXCEPT ? 0 : ref(x[k], z[k])}, 1);
  arena_free(&r.a);
  for (int k = 0; k < 3; k++) dc[k].dtype = TJ_I64;
  bool ok = run(&r, src, dc, 3, (double *[8]){y, x, z});
  ck_assert_msg(ok != op->float_only, "%s: %s", src, r.d.msg);
  if (!ok) ck_assert_ptr_nonnull(strstr(r.d.msg, "of an i64 expression is undefined"));
  arena_free(&r.a);
  assert_algebra(op);
}
END_TEST

START_TEST(test_ref_int_empty_order8) {
  TensorDecl dc[] = {mk("J", TJ_I32, NULL, 1, 4, 0, 0),
                     mk("I", TJ_I32, NULL, 1, 4, 0, 0)};
  double J[4], I[4] = {7, -7, 4, 0};
  Run r;
  ck_assert_msg(run(&r, "J(i) = I(i) / 2 + 1", dc, 2, (double *[8]){J, I}), "%s",
                r.d.msg);
  assert_close(J, (double[]){4, -2, 3, 1}, 4);
  arena_free(&r.a);
  double keep[4] = {1, 2, 3, 4};
  ck_assert(!run(&r, "J(i) = 2 / I(i)", dc, 2, (double *[8]){keep, I}));
  ck_assert_str_eq(r.d.msg, "nt_ref_eval: integer division by zero");
  assert_close(keep, (double[]){1, 2, 3, 4}, 4); /* untouched on error */
  arena_free(&r.a);
  /* an empty reduction: '=' still zeroes the output */
  TensorDecl e[] = {mk("y", TJ_F64, NULL, 1, 2, 0, 0),
                    mk("A", TJ_F64, NULL, 2, 2, 0, 0),
                    mk("x", TJ_F64, NULL, 1, 0, 0, 0)};
  double y[2] = {3, 3}, dummy = 0;
  ck_assert(run(&r, "y(i) = A(i,j) * x(j)", e, 3, (double *[8]){y, &dummy, &dummy}));
  assert_close(y, (double[]){0, 0}, 2);
  arena_free(&r.a);
  /* order 8: A = 2 * B + the sum of B over the last mode, extents 2 */
  TensorDecl o[2];
  o[0] = mk("A", TJ_F64, NULL, 0, 0, 0, 0);
  o[1] = mk("B", TJ_F64, NULL, 0, 0, 0, 0);
  o[0].order = 7;
  o[1].order = 8;
  for (int m = 0; m < 8; m++) o[0].dims[m] = o[1].dims[m] = 2;
  double A[128], B[256], want[128];
  for (int n = 0; n < 256; n++) B[n] = n;
  for (int n = 0; n < 128; n++) want[n] = B[2 * n] + B[2 * n + 1];
  ck_assert_msg(run(&r, "A(a,b,c,d,e,f,g) = B(a,b,c,d,e,f,g,h)", o, 2,
                    (double *[8]){A, B}), "%s", r.d.msg);
  assert_close(A, want, 128);
  arena_free(&r.a);
}
END_TEST

START_TEST(test_ref_unchecked) {
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  Assignment *as = nt_parse(&a, "y(i) = x(i)", &d);
  double y[1], x[1];
  ck_assert(!nt_ref_eval(as, (double *[8]){y, x}, NULL, &d));
  ck_assert_str_eq(d.msg, "nt_ref_eval needs a checked assignment: index i "
                          "has no extent");
  arena_free(&a);
}
END_TEST

static Suite *notation_suite(void) {
  Suite *s = suite_create("notation");
  TCase *tc = tcase_create("parse");
  tcase_add_loop_test(tc, test_valid_corpus, 0, sizeof valid / sizeof valid[0]);
  tcase_add_test(tc, test_precedence_shapes);
  tcase_add_test(tc, test_builder);
  tcase_add_loop_test(tc, test_invalid_corpus, 0,
                      sizeof invalid / sizeof invalid[0]);
  tcase_add_test(tc, test_caret);
  tcase_add_test(tc, test_deep_nesting);
  suite_add_tcase(s, tc);
  tc = tcase_create("check");
  tcase_add_loop_test(tc, test_check_errors, 0,
                      sizeof check_bad / sizeof check_bad[0]);
  tcase_add_test(tc, test_check_ok);
  tcase_add_test(tc, test_sum_placement);
  suite_add_tcase(s, tc);
  tc = tcase_create("cin");
  tcase_add_loop_test(tc, test_cin, 0, sizeof cin_cases / sizeof cin_cases[0]);
  tcase_add_test(tc, test_cin_structure);
  tcase_add_loop_test(tc, test_schedule_errors, 0,
                      sizeof sched_bad / sizeof sched_bad[0]);
  tcase_add_test(tc, test_schedule_print);
  suite_add_tcase(s, tc);
  tc = tcase_create("ref_eval");
  tcase_add_test(tc, test_ref_spmv_gemm);
  tcase_add_test(tc, test_ref_mttkrp);
  tcase_add_test(tc, test_ref_scalars_broadcast);
  tcase_add_test(tc, test_ref_functions);
  tcase_add_loop_test(tc, test_op_table, 0, OP_CASES);  /* CASES: a definition's, tested there */
  tcase_add_test(tc, test_ref_int_empty_order8);
  tcase_add_test(tc, test_ref_unchecked);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(notation_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

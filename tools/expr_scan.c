/* A light scanner for index-notation expressions: tensor names, orders and
 * index lists, so the tool can create tensors of the right shape.
 *
 * It follows the library's grammar only as far as accesses go: a NAME
 * followed by '(' is an access (its arguments are index names) unless the
 * name is one of the library's functions (tj_function_name); a bare NAME is an
 * order-0 access. In `sum(j, k, e)` the names before the expression are
 * indices, not tensors. Everything else (numbers, operators) is skipped: the
 * library parses and checks the expression properly at compile time and
 * reports its own errors with a column.
 */
#include "tool.h"

#include <ctype.h>
#include <string.h>

typedef struct Scanner {
  const char *p;
  const char *src;
  XsScan *s;
} Scanner;

static void skip_space(Scanner *sc) {
  while (isspace((unsigned char)*sc->p)) sc->p++;
}

/* Reads a NAME at sc->p into buf: 1 if read, 0 if none is there, -1 if
 * it is too long (tool_fail). */
static int read_name(Scanner *sc, char *buf) {
  const char *b = sc->p;
  if (!isalpha((unsigned char)*b) && *b != '_') return 0;
  while (isalnum((unsigned char)*sc->p) || *sc->p == '_') sc->p++;
  size_t n = (size_t)(sc->p - b);
  if (n >= TOOL_NAME) {
    tool_fail("expression: name '%.20s...' is too long", b);
    return -1;
  }
  memcpy(buf, b, n);
  buf[n] = 0;
  return 1;
}

/* Whether name is a function of the library or one that defs defines
 * (the name before '(' at the start of a ';'- or newline-separated part). */
static bool is_function(const char *name, const char *defs) {
  const char *f;
  for (int i = 0; (f = tj_function_name(i)); i++)
    if (!strcmp(name, f)) return true;
  size_t len = strlen(name);
  for (const char *p = defs; p && *p;) {
    p += strspn(p, " \t\r\n;");
    if (!strncmp(p, name, len) && (p[len] == '(' || p[len] == ' ')) return true;
    p += strcspn(p, ";\n");
  }
  return false;
}

int xs_tensor(const XsScan *s, const char *name) {
  for (int i = 0; i < s->ntensors; i++)
    if (!strcmp(s->tensors[i].name, name)) return i;
  return -1;
}

int xs_index(const XsScan *s, const char *name) {
  for (int i = 0; i < s->nindex; i++)
    if (!strcmp(s->index[i], name)) return i;
  return -1;
}

static int intern_index(XsScan *s, const char *name) {
  int i = xs_index(s, name);
  if (i >= 0) return i;
  if (s->nindex == TOOL_MAX_INDICES) {
    tool_fail("expression: more than %d index variables", TOOL_MAX_INDICES);
    return -1;
  }
  strcpy(s->index[s->nindex], name);
  return s->nindex++;
}

/* Reads the index list after an access's '(' up to and including ')'. */
static bool read_indices(Scanner *sc, const char *tensor, XsAccess *a) {
  sc->p++;
  skip_space(sc);
  if (*sc->p == ')') {
    sc->p++;
    return true;
  }
  for (;;) {
    char name[TOOL_NAME];
    skip_space(sc);
    int r = read_name(sc, name);
    if (r <= 0)
      return r < 0 ? false
                   : tool_fail("expression: %s(...) at column %d: expected an "
                               "index name", tensor, (int)(sc->p - sc->src) + 1);
    if (a->order == TJ_MAX_ORDER_PUBLIC)
      return tool_fail("expression: %s has more than %d indices", tensor,
                       TJ_MAX_ORDER_PUBLIC);
    int id = intern_index(sc->s, name);
    if (id < 0) return false;
    a->idx[a->order++] = id;
    skip_space(sc);
    if (*sc->p == ')') {
      sc->p++;
      return true;
    }
    if (*sc->p != ',')
      return tool_fail("expression: %s(...) at column %d: expected ',' or ')'",
                       tensor, (int)(sc->p - sc->src) + 1);
    sc->p++;
  }
}

/* Records one access of tensor `name`, reading its index list if any. */
static bool add_access(Scanner *sc, const char *name) {
  XsScan *s = sc->s;
  if (s->nacc == TOOL_MAX_ACCESSES)
    return tool_fail("expression: more than %d tensor accesses", TOOL_MAX_ACCESSES);
  XsAccess *a = &s->acc[s->nacc];
  memset(a, 0, sizeof *a);
  skip_space(sc);
  if (*sc->p == '(' && !read_indices(sc, name, a)) return false;
  int t = xs_tensor(s, name);
  if (t < 0) {
    if (s->ntensors == TOOL_MAX_TENSORS)
      return tool_fail("expression: more than %d tensors", TOOL_MAX_TENSORS);
    t = s->ntensors++;
    strcpy(s->tensors[t].name, name);
    s->tensors[t].order = a->order;
  } else if (s->tensors[t].order != a->order) {
    return tool_fail("expression: tensor %s is used with %d and with %d indices",
                     name, s->tensors[t].order, a->order);
  }
  a->tensor = t;
  s->nacc++;
  return true;
}

/* After "sum(" or "reduce(op,": skips the index names that precede the
 * reduced expression. (The spellings are the library's NT_SUM_NAME and
 * NT_REDUCE_NAME; tools/ sees only the public header, and
 * tests/cli_basic.sh runs both through this scanner.) */
static void skip_sum_indices(Scanner *sc) {
  for (;;) {
    skip_space(sc);
    const char *at = sc->p;
    char name[TOOL_NAME];
    if (read_name(sc, name) <= 0) {
      sc->p = at;
      return;
    }
    skip_space(sc);
    if (*sc->p != ',') {
      sc->p = at;
      return;
    }
    sc->p++;
  }
}

/* Skips a number literal (digits, '.', exponent). */
static void skip_number(Scanner *sc) {
  while (isalnum((unsigned char)*sc->p) || *sc->p == '.' ||
         ((*sc->p == '+' || *sc->p == '-') &&
          (sc->p[-1] == 'e' || sc->p[-1] == 'E')))
    sc->p++;
}

bool xs_scan(const char *expr, const char *defs, XsScan *s) {
  memset(s, 0, sizeof *s);
  Scanner sc = {expr, expr, s};
  char name[TOOL_NAME];
  skip_space(&sc);
  int r = read_name(&sc, name);
  if (r <= 0)
    return r < 0 ? false
                 : tool_fail("expression '%s': expected the output tensor's name "
                           "at column %d", expr, (int)(sc.p - expr) + 1);
  if (!add_access(&sc, name)) return false;
  skip_space(&sc);
  s->accumulate = sc.p[0] == '+' && sc.p[1] == '=';
  if (*sc.p != '=' && !s->accumulate)
    return tool_fail("expression '%s': expected '=' or '+=' at column %d", expr,
                     (int)(sc.p - expr) + 1);
  sc.p += s->accumulate ? 2 : 1;
  while (*sc.p) {
    if (isdigit((unsigned char)*sc.p) || (*sc.p == '.' && isdigit((unsigned char)sc.p[1]))) {
      skip_number(&sc);
    } else if (isalpha((unsigned char)*sc.p) || *sc.p == '_') {
      if (read_name(&sc, name) < 0) return false;
      skip_space(&sc);
      if (!strcmp(name, "sum") && *sc.p == '(') {
        sc.p++;
        skip_sum_indices(&sc);
      } else if (!strcmp(name, "reduce") && *sc.p == '(') {
        sc.p++; /* the operator: + * or a name */
        skip_space(&sc);
        if (*sc.p == '+' || *sc.p == '*') sc.p++;
        else if (read_name(&sc, name) < 0) return false;
        skip_space(&sc);
        if (*sc.p == ',') sc.p++;
        skip_sum_indices(&sc);
      } else if (!(is_function(name, defs) && *sc.p == '(') && !add_access(&sc, name))
        return false;
    } else {
      sc.p++;
    }
  }
  return true;
}

void xs_extents(const XsScan *s, tj_tensor *const *tensors, int64_t *ext) {
  for (int a = 0; a < s->nacc; a++) {
    const XsAccess *ac = &s->acc[a];
    const tj_tensor *t = tensors[ac->tensor];
    if (!t || tj_tensor_order(t) != ac->order) continue;
    for (int m = 0; m < ac->order; m++)
      if (ext[ac->idx[m]] < 0) ext[ac->idx[m]] = tj_tensor_dim(t, m);
  }
}

bool xs_dims_from_extents(const XsScan *s, int t, const int64_t *ext,
                          int64_t *dims) {
  for (int a = 0; a < s->nacc; a++) {
    const XsAccess *ac = &s->acc[a];
    if (ac->tensor != t) continue;
    for (int m = 0; m < ac->order; m++) {
      if (ext[ac->idx[m]] < 0)
        return tool_fail("the extent of index %s (mode %d of %s) is unknown",
                         s->index[ac->idx[m]], m, s->tensors[t].name);
      dims[m] = ext[ac->idx[m]];
    }
    return true;
  }
  return tool_fail("tensor %s is not in the expression", s->tensors[t].name);
}

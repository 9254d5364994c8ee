/* Storage formats: parsing, checking and printing tj_format.
 *
 * Two spellings describe the same object: taco letters per level with an
 * optional mode order ("ds", "ds:1,0" = CSC), and MLIR's map syntax
 * "(i,j) -> (j : dense, i : compressed)". Letters: d dense, s compressed,
 * u compressed-nonunique, o compressed-nonordered (coordinates of a segment
 * in any order: what a kernel writes without sorting), q singleton, c
 * singleton-nonunique. A singleton
 * needs a nonunique parent (u, q or c): COO is "uq", COO-3 "uqq", where a
 * singleton above another singleton is implicitly nonunique.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#include "tensor.h"

/* The level types as the runtime stores them: letter, MLIR spelling, ABI
 * kind and flags. Adding a level type adds a row here (the parser, the
 * storage set-up and the printer read it), its storage in pack.c /
 * iterate.c, and its lowering properties in ir/level.c. */
static const RtLevelType level_types[] = {
  {'d', "dense", "", TJ_LVL_DENSE, 0},
  {'s', "compressed", "", TJ_LVL_COMPRESSED, 0},
  {'u', "compressed", "nonunique", TJ_LVL_COMPRESSED, TJ_LVL_NONUNIQUE},
  {'o', "compressed", "nonordered", TJ_LVL_COMPRESSED, TJ_LVL_NONORDERED},
  {'q', "singleton", "", TJ_LVL_SINGLETON, 0},
  {'c', "singleton", "nonunique", TJ_LVL_SINGLETON, TJ_LVL_NONUNIQUE},
};
#define NLEVEL_TYPES ((int)(sizeof level_types / sizeof level_types[0]))

const RtLevelType *rt_level_type(char c) {
  for (int k = 0; k < NLEVEL_TYPES && c; k++)
    if (level_types[k].letter == c) return &level_types[k];
  return NULL;
}

static bool is_letter(char c) { return rt_level_type(c) != NULL; }

/* "d, s, u, o, q or c": the letters, for messages. */
static const char *letter_list(void) {
  static char buf[4 * NLEVEL_TYPES + 8];
  if (buf[0]) return buf;
  size_t k = 0;
  for (int t = 0; t < NLEVEL_TYPES; t++)
    k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%c",
                          t == 0 ? "" : t + 1 == NLEVEL_TYPES ? " or " : ", ",
                          level_types[t].letter);
  return buf;
}

/* Whether level l of f may repeat a coordinate: a nonunique level, or a
 * singleton with a singleton below it (COO-3's middle level). */
bool rt_format_level_nonunique(const tj_format *f, int l) {
  const RtLevelType *lt = rt_level_type(f->levels[l]);
  const RtLevelType *below = l + 1 < f->order ? rt_level_type(f->levels[l + 1]) : NULL;
  return (lt->flags & TJ_LVL_NONUNIQUE) ||
         (lt->kind == TJ_LVL_SINGLETON && below && below->kind == TJ_LVL_SINGLETON);
}

/* The structural checks shared by parse and rt_format_check. */
static tj_status check_levels(const tj_format *f) {
  if (f->order < 0 || f->order > TJ_MAX_ORDER)
    return rt_set_error(TJ_ERR_FORMAT, "format has %d levels; at most %d are "
                        "supported", f->order, TJ_MAX_ORDER);
  if ((int)strlen(f->levels) != f->order)
    return rt_set_error(TJ_ERR_FORMAT, "format \"%s\" has %d level letters "
                        "but order %d", f->levels, (int)strlen(f->levels),
                        f->order);
  bool seen[TJ_MAX_ORDER] = {0};
  for (int l = 0; l < f->order; l++) {
    char c = f->levels[l];
    if (!is_letter(c))
      return rt_set_error(TJ_ERR_FORMAT, "format \"%s\": bad level letter "
                          "'%c' (expected %s)", f->levels, c, letter_list());
    int m = f->mode_order[l];
    if (m < 0 || m >= f->order || seen[m])
      return rt_set_error(TJ_ERR_FORMAT, "format \"%s\": mode order is not a "
                          "permutation of 0..%d", f->levels, f->order - 1);
    seen[m] = true;
    if (rt_level_type(c)->kind == TJ_LVL_SINGLETON &&
        (l == 0 || !(rt_level_type(f->levels[l - 1])->kind == TJ_LVL_SINGLETON ||
                     (rt_level_type(f->levels[l - 1])->flags & TJ_LVL_NONUNIQUE))))
      return rt_set_error(TJ_ERR_FORMAT, "format \"%s\": singleton level %d "
                          "needs a nonunique level (u, q or c) above it",
                          f->levels, l);
  }
  if ((f->pos_width != 0 && f->pos_width != 32 && f->pos_width != 64) ||
      (f->crd_width != 0 && f->crd_width != 32 && f->crd_width != 64))
    return rt_set_error(TJ_ERR_FORMAT, "position and coordinate widths must "
                        "be 32 or 64 (got %d, %d)", f->pos_width, f->crd_width);
  return TJ_OK;
}

tj_status rt_format_check(const tj_format *f, int order) {
  tj_status st = check_levels(f);
  if (st != TJ_OK) return st;
  if (f->order != order)
    return rt_set_error(TJ_ERR_SHAPE, "format \"%s\" has %d levels but the "
                        "tensor has order %d", f->levels, f->order, order);
  return TJ_OK;
}

tj_format tj_format_dense(int order) {
  tj_format f;
  memset(&f, 0, sizeof f);
  if (order < 0) order = 0;
  if (order > TJ_MAX_ORDER) order = TJ_MAX_ORDER;
  f.order = order;
  for (int l = 0; l < order; l++) f.levels[l] = 'd', f.mode_order[l] = l;
  return f;
}

tj_format rt_format_default(int order) {
  tj_format f = tj_format_dense(order);
  for (int l = 0; l < f.order; l++) f.levels[l] = 's';
  if (order == 2) f.levels[0] = 'd';
  return f;
}

bool rt_format_all_dense(const tj_format *f) {
  for (int l = 0; l < f->order; l++)
    if (!rt_level_type(f->levels[l]) || rt_level_type(f->levels[l])->kind != TJ_LVL_DENSE)
      return false;
  return true;
}

static const char *skip_ws(const char *p) {
  while (isspace((unsigned char)*p)) p++;
  return p;
}

/* "ds" or "ds:1,0". */
static tj_status parse_taco(const char *spec, tj_format *f) {
  const char *p = spec;
  int n = 0;
  while (*p && *p != ':' && !isspace((unsigned char)*p)) {
    if (n == TJ_MAX_ORDER)
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\" has more than %d "
                          "levels", spec, TJ_MAX_ORDER);
    if (!is_letter(*p))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": bad level letter "
                          "'%c' at column %d (expected %s)",
                          spec, *p, (int)(p - spec) + 1, letter_list());
    f->levels[n++] = *p++;
  }
  f->order = n;
  for (int l = 0; l < n; l++) f->mode_order[l] = l;
  p = skip_ws(p);
  if (*p == ':') {
    int k = 0;
    p++;
    for (;;) {
      p = skip_ws(p);
      if (!isdigit((unsigned char)*p))
        return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected a mode "
                            "number at column %d", spec, (int)(p - spec) + 1);
      long m = strtol(p, (char **)&p, 10);
      if (k == TJ_MAX_ORDER || k == n)
        return rt_set_error(TJ_ERR_PARSE, "format \"%s\": mode order has "
                            "more entries than the %d levels", spec, n);
      f->mode_order[k++] = (int32_t)(m > 99 ? 99 : m);
      p = skip_ws(p);
      if (*p != ',') break;
      p++;
    }
    if (k != n)
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": mode order has %d "
                          "entries but the format has %d levels", spec, k, n);
  }
  if (*skip_ws(p))
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": unexpected '%c' at "
                        "column %d", spec, *skip_ws(p),
                        (int)(skip_ws(p) - spec) + 1);
  return TJ_OK;
}

/* Reads an identifier at *p into buf (at most n-1 chars). */
static bool read_ident(const char **p, char *buf, size_t n) {
  const char *s = skip_ws(*p);
  size_t k = 0;
  while (isalnum((unsigned char)*s) || *s == '_') {
    if (k + 1 < n) buf[k++] = *s;
    s++;
  }
  buf[k] = 0;
  *p = s;
  return k > 0;
}

static bool eat(const char **p, const char *tok) {
  const char *s = skip_ws(*p);
  size_t n = strlen(tok);
  if (strncmp(s, tok, n) != 0) return false;
  *p = s + n;
  return true;
}

/* One MLIR level type: dense, compressed, compressed(nonunique),
 * compressed(nonordered), singleton, singleton(nonunique); returns the
 * letter or 0. */
static char level_letter(const char **p) {
  char word[32], prop[32] = "";
  if (!read_ident(p, word, sizeof word)) return 0;
  const char *save = *p;
  if (eat(p, "(") && (!read_ident(p, prop, sizeof prop) || !eat(p, ")"))) {
    *p = save;
    return 0;
  }
  for (int t = 0; t < NLEVEL_TYPES; t++)
    if (!strcmp(word, level_types[t].word) && !strcmp(prop, level_types[t].prop))
      return level_types[t].letter;
  return 0;
}

/* "(i,j) -> (j : dense, i : compressed)". */
static tj_status parse_mlir(const char *spec, tj_format *f) {
  char names[TJ_MAX_ORDER][32];
  int nd = 0, nl = 0;
  const char *p = spec;
  if (eat(&p, "map")) eat(&p, "=");
  if (!eat(&p, "("))
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected '(' at column "
                        "%d", spec, (int)(skip_ws(p) - spec) + 1);
  while (!eat(&p, ")")) {
    if (nd == TJ_MAX_ORDER)
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\" has more than %d "
                          "dims", spec, TJ_MAX_ORDER);
    if (!read_ident(&p, names[nd], sizeof names[nd]))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected a dim name "
                          "at column %d", spec, (int)(skip_ws(p) - spec) + 1);
    nd++;
    if (!eat(&p, ",") && !eat(&p, ")"))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected ',' or ')' "
                          "at column %d", spec, (int)(skip_ws(p) - spec) + 1);
    else if (*(p - 1) == ')') break;
  }
  if (!eat(&p, "->") || !eat(&p, "("))
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected '-> (' at "
                        "column %d", spec, (int)(skip_ws(p) - spec) + 1);
  while (!eat(&p, ")")) {
    char dim[32];
    if (nl == TJ_MAX_ORDER || !read_ident(&p, dim, sizeof dim) ||
        !eat(&p, ":"))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected 'dim : "
                          "level-type' at column %d", spec,
                          (int)(skip_ws(p) - spec) + 1);
    int d = 0;
    while (d < nd && strcmp(names[d], dim) != 0) d++;
    if (d == nd)
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": unknown dim '%s'",
                          spec, dim);
    const char *at = skip_ws(p);
    char c = level_letter(&p);
    if (!c)
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": unknown level type at "
                          "column %d (expected dense, compressed, "
                          "compressed(nonunique), compressed(nonordered), singleton or "
                          "singleton(nonunique))", spec, (int)(at - spec) + 1);
    f->levels[nl] = c;
    f->mode_order[nl++] = d;
    if (!eat(&p, ",") && !eat(&p, ")"))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected ',' or ')' "
                          "at column %d", spec, (int)(skip_ws(p) - spec) + 1);
    else if (*(p - 1) == ')') break;
  }
  if (nl != nd)
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": %d dims but %d levels",
                        spec, nd, nl);
  if (*skip_ws(p))
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": unexpected text at "
                        "column %d", spec, (int)(skip_ws(p) - spec) + 1);
  f->order = nl;
  return TJ_OK;
}

tj_status tj_format_parse(const char *spec, tj_format *out) {
  if (!spec || !out)
    return rt_set_error(TJ_ERR_INVALID, "tj_format_parse: NULL argument");
  tj_format f;
  memset(&f, 0, sizeof f);
  const char *s = skip_ws(spec);
  tj_status st = strstr(s, "->") ? parse_mlir(s, &f) : parse_taco(s, &f);
  if (st != TJ_OK) return st;
  st = check_levels(&f);
  if (st != TJ_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tj_last_error());
    return rt_set_error(TJ_ERR_PARSE, "%s", msg);
  }
  *out = f;
  return TJ_OK;
}

void tj_format_print(const tj_format *f, char *buf, size_t n) {
  if (!buf || n == 0) return;
  int k = snprintf(buf, n, "%s", f->levels);
  bool identity = true;
  for (int l = 0; l < f->order; l++)
    if (f->mode_order[l] != l) identity = false;
  for (int l = 0; !identity && l < f->order && k >= 0 && (size_t)k < n; l++)
    k += snprintf(buf + k, n - (size_t)k, "%c%d", l ? ',' : ':',
                  f->mode_order[l]);
}

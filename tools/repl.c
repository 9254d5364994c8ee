/* The interactive session: named tensors, expressions evaluated as they
 * are typed, and views of the last kernel.
 *
 * A line is a builtin assignment (A = load(...), x = random(...),
 * y = zeros(...)), an index-notation expression (y(i) = A(i,j)*x(j)), a
 * word command (print, info, save, format, dtype, drop, list) or a colon
 * command (:cin, :time 10, :help, ...). A failing line prints "error: ..."
 * and changes nothing: a new tensor replaces the old one of its name only
 * after it has been built (and, for an expression, evaluated). Lines come
 * from libedit's readline() on a terminal, from getline() otherwise (no
 * prompt); a piped script exits 1 if any of its lines failed.
 */
#include "tool.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef TJ_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

#define MAX_ARGS 12

typedef struct Pending {             /* format / dtype set before creation */
  char name[TOOL_NAME];
  bool has_fmt, has_dtype;
  tj_format fmt;
  tj_dtype dtype;
} Pending;

struct Repl {
  tj_tensor **t;                     /* the session's tensors (grown as needed) */
  int n, cap;
  Pending *pend;
  int npend, pcap;
  tj_context *cx;
  tj_kernel *k;                      /* last kernel (owned by cx) */
  char *last_expr;
  XsScan last;                       /* the last kernel's tensors */
  bool stale;                        /* an expression failed after it: the
                                        commands on it say which they use */
  tj_tensor *before;                 /* its output before it ran, when it
                                        accumulated (+=): what :check adds to */
  char schedule[512];
  tj_options opts;
  char semiring[32];
  char defs[4096];          /* :def texts joined by ';' */
  uint64_t seed;
  bool quit;
};

typedef struct Arg {
  bool is_str;
  char text[512];
} Arg;

static const char *help_text =
    "tensors:\n"
    "  A = load(\"m.mtx\"[, \"ds\"])            read .mtx/.tns (default CSR / all sparse)\n"
    "  x = random(n1, n2, ...[, \"fmt\"[, density[, \"p\"]]])\n"
    "                                       random data: all entries if no density;\n"
    "                                       else uniform (\"p\": power-law rows)\n"
    "  y = zeros(n1, ...[, \"fmt\"])          an empty tensor\n"
    "  y(i) = A(i,j) * x(j)                 evaluate (creates y from index extents)\n"
    "  format y \"s\"    dtype y f32           set for the next creation (or convert)\n"
    "  print y [n]   info y   list   drop y   save y \"y.tns\"\n"
    "last kernel:\n"
    "  :notation :cin :lattice :assembly :compute :ir (C) :llvm :llvm-opt :asm\n"
    "  :time [reps]   :check   :schedule [directives]\n"
    "  :backend [llvm|c]                    code generator for the next kernels\n"
    "  :semiring [add.mul]                  semiring of the next kernels (min.plus, ...)\n"
    "  :def f(x) = <expr>                   define an element operator (:def alone lists);\n"
    "       f(x, y) = <expr> [left <expr>] [right <expr>] [identity <v>]: cases, reduction\n"
    "  :help   :quit\n";

static int find(const Repl *r, const char *name) {
  for (int i = 0; i < r->n; i++)
    if (!strcmp(tj_tensor_name(r->t[i]), name)) return i;
  return -1;
}

/* Room for one more element in *arr (n used of *cap, elements of size
 * bytes): false when memory runs out. */
static bool room(void **arr, int n, int *cap, size_t size) {
  if (n < *cap) return true;
  if (*cap > INT_MAX / 2) return false;
  int want = *cap ? 2 * *cap : 16;
  void *p = realloc(*arr, (size_t)want * size);
  if (!p) return false;
  *arr = p;
  *cap = want;
  return true;
}

static Pending *pending(Repl *r, const char *name, bool add) {
  for (int i = 0; i < r->npend; i++)
    if (!strcmp(r->pend[i].name, name)) return &r->pend[i];
  if (!add || !room((void **)&r->pend, r->npend, &r->pcap, sizeof *r->pend)) return NULL;
  Pending *p = &r->pend[r->npend++];
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", name);
  return p;
}

/* Puts t in the session, freeing a tensor of the same name it replaces. */
static bool put(Repl *r, tj_tensor *t) {
  int i = find(r, tj_tensor_name(t));
  if (i >= 0) {
    if (r->t[i] != t) tj_tensor_free(r->t[i]);
    r->t[i] = t;
    return true;
  }
  if (!room((void **)&r->t, r->n, &r->cap, sizeof *r->t)) {
    tj_tensor_free(t);
    return tool_fail("out of memory");
  }
  r->t[r->n++] = t;
  return true;
}

static tj_tensor *get(const Repl *r, const char *name) {
  int i = find(r, name);
  if (i < 0) tool_fail("no tensor named '%s' (see list)", name);
  return i < 0 ? NULL : r->t[i];
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
  return s;
}

/* Splits "word rest" at the first space; *rest is trimmed ("" if none). */
static char *split_word(char *s, char **rest) {
  char *p = s;
  while (*p && !isspace((unsigned char)*p)) p++;
  if (*p) *p++ = 0;
  *rest = trim(p);
  return s;
}

/* Unquotes "text" (or takes a bare word) into buf. */
static bool unquote(const char *s, char *buf, size_t n) {
  size_t len = strlen(s);
  if (len >= 2 && s[0] == '"' && s[len - 1] == '"') s++, len -= 2;
  if (!len || len >= n) return tool_fail("expected a quoted string, got '%s'", s);
  memcpy(buf, s, len);
  buf[len] = 0;
  return true;
}

/* Parses "fn(a, "b", ...)" into args; false (tool_fail) if malformed. */
static bool parse_call(const char *s, const char *fn, Arg *args, int *nargs) {
  const char *p = s + strlen(fn);
  while (isspace((unsigned char)*p)) p++;
  if (*p++ != '(') return tool_fail("%s: expected '('", fn);
  *nargs = 0;
  for (;;) {
    while (isspace((unsigned char)*p)) p++;
    if (*p == ')' && *nargs == 0) break;
    if (*nargs == MAX_ARGS) return tool_fail("%s: too many arguments", fn);
    Arg *a = &args[(*nargs)++];
    a->is_str = *p == '"';
    const char *b = a->is_str ? ++p : p;
    while (*p && (a->is_str ? *p != '"' : (*p != ',' && *p != ')'))) p++;
    if (a->is_str && *p != '"') return tool_fail("%s: unterminated string", fn);
    size_t len = (size_t)(p - b);
    if (len >= sizeof a->text) return tool_fail("%s: argument too long", fn);
    memcpy(a->text, b, len);
    a->text[len] = 0;
    if (a->is_str) p++;
    else {
      char *t = trim(a->text);
      memmove(a->text, t, strlen(t) + 1);
    }
    while (isspace((unsigned char)*p)) p++;
    if (*p == ')') break;
    if (*p++ != ',') return tool_fail("%s: expected ',' or ')' between arguments", fn);
  }
  for (p++; isspace((unsigned char)*p); p++) {}
  if (*p)
    return tool_fail("%s(...): unexpected text after ')'", fn);
  return true;
}

static bool parse_format_arg(const char *spec, tj_format *f) {
  return tj_format_parse(spec, f) == TJ_OK || tool_fail("%s", tj_last_error());
}

static tj_dtype dtype_for(Repl *r, const char *name) {
  Pending *p = pending(r, name, false);
  return p && p->has_dtype ? p->dtype : TJ_F64;
}

/* NAME = load("file"[, "fmt"]). */
static bool do_load(Repl *r, const char *name, Arg *args, int n) {
  if (n < 1 || n > 2 || !args[0].is_str || (n == 2 && !args[1].is_str))
    return tool_fail("usage: %s = load(\"file\"[, \"format\"])", name);
  tj_format f;
  Pending *p = pending(r, name, false);
  const tj_format *fp = p && p->has_fmt ? &p->fmt : NULL;
  if (n == 2 && !parse_format_arg(args[1].text, &f)) return false;
  if (n == 2) fp = &f;
  tj_tensor *t;
  if (tj_tensor_read_as(args[0].text, name, fp, dtype_for(r, name), &t) != TJ_OK)
    return tool_fail_lib("load");
  return put(r, t);
}

/* NAME = random(dims..., ["fmt"[, density[, "p"]]]) or zeros(dims..., ["fmt"]). */
static bool do_create(Repl *r, const char *name, bool random, Arg *args, int n) {
  int64_t dims[TJ_MAX_ORDER_PUBLIC];
  int order = 0, i = 0;
  for (; i < n && !args[i].is_str; i++) {
    if (order == TJ_MAX_ORDER_PUBLIC) return tool_fail("too many dims (at most %d)", order);
    if (!tool_parse_int(args[i].text, 0, &dims[order++]))
      return tool_fail("'%s' is not a dimension (a whole number >= 0)", args[i].text);
  }
  tj_format f = tj_format_dense(order);
  Pending *p = pending(r, name, false);
  if (p && p->has_fmt) f = p->fmt;
  if (i < n && !parse_format_arg(args[i++].text, &f)) return false;
  if ((f.ndims ? f.ndims : f.order) != order)   /* a blocked format: its dims */
    return tool_fail("format has %d %s but %d dims were given", f.ndims ? f.ndims : f.order,
                     f.ndims ? "dims" : "levels", order);
  double density = 0;
  GenKind kind = GEN_DENSE;
  if (random && i < n) {
    if (args[i].is_str || !tool_parse_double(args[i].text, &density))
      return tool_fail("density '%s' is not a number", args[i].text);
    kind = GEN_SPARSE, i++;
  }
  if (random && i < n && args[i].is_str && !strcmp(args[i].text, "p")) kind = GEN_POWERLAW, i++;
  if (i < n)
    return tool_fail("usage: %s = %s", name, random ? "random(n1, ..., \"fmt\", density, \"p\")"
                                                      : "zeros(n1, ..., \"fmt\")");
  tj_tensor *t;
  if (tj_tensor_new(name, dtype_for(r, name), order, dims, &f, &t) != TJ_OK)
    return tool_fail_lib(name);
  if (random && !gen_fill(t, kind, density, r->seed)) {
    tj_tensor_free(t);
    return false;
  }
  return put(r, t);
}

/* The output of an expression: the existing tensor when it is read too
 * ("+=", or on the right-hand side), else a new one from index extents in
 * its pending (or previous) format and dtype. */
static tj_tensor *make_output(Repl *r, const XsScan *s, tj_tensor **ops, bool *fresh) {
  const char *name = s->tensors[0].name;
  tj_tensor *old = find(r, name) >= 0 ? r->t[find(r, name)] : NULL;
  bool reads = s->accumulate;
  for (int a = 1; a < s->nacc; a++) reads = reads || s->acc[a].tensor == 0;
  *fresh = !(reads && old);
  if (!*fresh) return old;
  int64_t ext[TOOL_MAX_INDICES], dims[TJ_MAX_ORDER_PUBLIC];
  for (int i = 0; i < s->nindex; i++) ext[i] = -1;
  xs_extents(s, ops, ext);
  if (!xs_dims_from_extents(s, 0, ext, dims)) return NULL;
  int order = s->tensors[0].order;
  bool same = old && tj_tensor_order(old) == order;
  tj_format f = same ? *tj_tensor_format(old) : tj_format_dense(order);
  tj_dtype dt = same ? tj_tensor_dtype(old) : s->ntensors > 1 ? tj_tensor_dtype(ops[1]) : TJ_F64;
  Pending *p = pending(r, name, false);
  if (p && p->has_fmt) f = p->fmt;
  if (p && p->has_dtype) dt = p->dtype;
  tj_tensor *t;
  if (tj_tensor_new(name, dt, order, dims, &f, &t) != TJ_OK) {
    tool_fail_lib(name);
    return NULL;
  }
  return t;
}

/* Binds the session tensors named in s into ops (ops[0] may stay NULL). */
static bool bind(const Repl *r, const XsScan *s, tj_tensor **ops) {
  for (int t = 0; t < s->ntensors; t++) {
    int i = find(r, s->tensors[t].name);
    ops[t] = i >= 0 ? r->t[i] : NULL;
    if (t > 0 && !ops[t])
      return tool_fail("no tensor named '%s' (create it with load, random or zeros)",
                       s->tensors[t].name);
  }
  return true;
}

static bool do_expression(Repl *r, const char *expr) {
  XsScan s;
  tj_tensor *ops[TOOL_MAX_TENSORS];
  bool fresh;
  if (!xs_scan(expr, r->opts.defs, &s) || !bind(r, &s, ops)) return false;
  tj_tensor *out = make_output(r, &s, ops, &fresh);
  if (!out) return false;
  ops[0] = out;
  tj_kernel *k;
  tj_tensor *before = NULL;
  bool ok = tj_compile(r->cx, expr, ops, s.ntensors, r->schedule[0] ? r->schedule : NULL,
                       &r->opts, &k) == TJ_OK || tool_fail_lib("compile");
  bool kept = ok && (!s.accumulate || tj_tensor_cast(out, tj_tensor_dtype(out), &before) == TJ_OK ||
                     tool_fail_lib("copying the output"));
  bool ran = kept && (tj_kernel_run(k, TJ_EVALUATE, NULL, 0) == TJ_OK || tool_fail_lib("evaluate"));
  if (!ran) {
    if (ok) tj_kernel_free(k);
    if (fresh) tj_tensor_free(out);
    tj_tensor_free(before);
    return false;
  }
  tj_tensor_free(r->before);
  r->before = before;
  char *copy = strdup(expr);
  if (!copy || !put(r, out)) {
    free(copy);
    tj_kernel_free(k);
    return copy ? false : tool_fail("out of memory");
  }
  free(r->last_expr);
  r->last_expr = copy;
  r->last = s;
  /* Only the last kernel is kept: the cache may evict the others (a long
   * session's memory stays bounded, TJ_KERNEL_CACHE_MAX). */
  tj_kernel_free(r->k);
  r->k = k;
  kop_info(out, stdout);
  double v;
  if (tj_tensor_order(out) == 0 && tj_tensor_get(out, NULL, &v) == TJ_OK)
    printf("%s = %.17g\n", tj_tensor_name(out), v);
  printf("(compile %.3f ms)\n", tj_kernel_times(k).total_ms);
  return true;
}

/* Says which kernel the commands use when the last expression failed. */
static void note_stale(const Repl *r) {
  if (r->stale) printf("note: the last expression failed; this is the kernel of %s\n", r->last_expr);
}

/* Binds the last kernel's tensors as they are now in the session. */
static bool last_ops(Repl *r, tj_tensor **ops) {
  if (!r->k) return tool_fail("no kernel yet: evaluate an expression first");
  note_stale(r);
  for (int t = 0; t < r->last.ntensors; t++)
    if (!(ops[t] = get(r, r->last.tensors[t].name))) return false;
  return true;
}

/* Adds the definition text to the session's after the library accepts
 * the whole list (compiling `s = 0` under it): a definition that names a
 * taken function or a name that is not its parameter is refused at once
 * and the session keeps its definitions. */
static bool add_definition(Repl *r, const char *text) {
  char trial[sizeof r->defs];
  size_t used = strlen(r->defs);
  if (used + strlen(text) + 2 > sizeof trial) return tool_fail(":def: definitions too long");
  snprintf(trial, sizeof trial, "%s%s%s", r->defs, used ? ";" : "", text);
  tj_tensor *s;
  if (tj_tensor_new("s", TJ_F64, 0, NULL, NULL, &s) != TJ_OK) return tool_fail_lib(":def");
  tj_options opts = r->opts;
  opts.defs = trial;
  tj_kernel *k = NULL;
  bool ok = tj_compile(r->cx, "s = 0", &s, 1, NULL, &opts, &k) == TJ_OK;
  if (!ok) tool_fail(":def: %s", tj_last_error());
  tj_kernel_free(k);
  tj_tensor_free(s);
  if (!ok) return false;
  memcpy(r->defs, trial, sizeof trial);
  r->opts.defs = r->defs;
  return true;
}

static bool colon_command(Repl *r, const char *cmd, const char *rest) {
  tj_stage st;
  tj_tensor *ops[TOOL_MAX_TENSORS];
  if (!strcmp(cmd, "help")) {
    fputs(help_text, stdout);
  } else if (!strcmp(cmd, "quit") || !strcmp(cmd, "q") || !strcmp(cmd, "exit")) {
    r->quit = true;
  } else if (!strcmp(cmd, "schedule")) {
    if (strlen(rest) >= sizeof r->schedule) return tool_fail("schedule too long");
    strcpy(r->schedule, rest);
    printf(*rest ? "schedule: %s\n" : "schedule: (none)\n", rest);
  } else if (!strcmp(cmd, "backend")) {
    if (*rest && strcmp(rest, "llvm") && strcmp(rest, "c"))
      return tool_fail(":backend %s: the backend must be llvm or c", rest);
    if (*rest) r->opts.backend = strcmp(rest, "c") ? TJ_BACKEND_LLVM : TJ_BACKEND_C;
    printf("backend: %s\n", r->opts.backend == TJ_BACKEND_C ? "c" : "llvm");
  } else if (!strcmp(cmd, "def")) {
    if (*rest && !add_definition(r, rest)) return false;
    printf("definitions: %s\n", r->defs[0] ? r->defs : "(none)");
  } else if (!strcmp(cmd, "semiring")) {
    if (strlen(rest) >= sizeof r->semiring) return tool_fail(":semiring: name too long");
    if (*rest) strcpy(r->semiring, rest);
    r->opts.semiring = r->semiring[0] ? r->semiring : NULL;
    printf("semiring: %s\n", r->semiring[0] ? r->semiring : "plus.times");
  } else if (!strcmp(cmd, "time")) {
    int64_t reps = 10;
    if (*rest && (!tool_parse_int(rest, 1, &reps) || reps > 1000000))
      return tool_fail(":time: repetitions must be a whole number in 1..1000000");
    TimeStats ts;
    if (!last_ops(r, ops) || !kop_time(r->k, ops, r->last.ntensors, (int)reps, &ts)) return false;
    kop_print_time(&ts, stdout);
  } else if (!strcmp(cmd, "check")) {
    if (!last_ops(r, ops)) return false;
    tj_tensor *start[TOOL_MAX_TENSORS];   /* += starts from the output before the run */
    memcpy(start, ops, sizeof start);
    if (r->before) start[0] = r->before;
    tj_tensor *ref = kop_reference(r->last_expr, start, r->last.ntensors, 0, &r->opts);
    bool ok = ref && kop_compare(ops[0], ref, stdout);
    tj_tensor_free(ref);
    return ok;
  } else if (kop_stage(cmd, &st)) {
    if (!r->k) return tool_fail("no kernel yet: evaluate an expression first");
    note_stale(r);
    fflush(stdout);
    if (tj_kernel_print(r->k, st, stdout) != TJ_OK) return tool_fail_lib(cmd);
  } else {
    return tool_fail("unknown command ':%s' (see :help)", cmd);
  }
  return true;
}

/* format NAME "spec" / dtype NAME f32: converts NAME if it exists, and
 * remembers the choice for tensors created under that name later. */
static bool set_property(Repl *r, bool is_fmt, char *args) {
  char *value, *name = split_word(args, &value), buf[512];
  if (!*name || !*value || !unquote(value, buf, sizeof buf))
    return tool_fail(is_fmt ? "usage: format NAME \"levels\""
                            : "usage: dtype NAME f64|f32|i64|i32|i16|i8|bool|u64|u32|u16|u8");
  Pending p = {0};
  if (is_fmt && !parse_format_arg(buf, &p.fmt)) return false;
  tj_dtype d = TJ_F64;
  if (!is_fmt && tj_dtype_parse(buf, &d) != TJ_OK) return tool_fail("%s", tj_last_error());
  int i = find(r, name);
  if (i >= 0) {
    tj_tensor *c;
    tj_status st = is_fmt ? tj_tensor_convert(r->t[i], &p.fmt, &c)
                          : tj_tensor_cast(r->t[i], d, &c);
    if (st != TJ_OK) return tool_fail_lib(name);
    put(r, c);
  }
  Pending *q = pending(r, name, true);
  if (!q) return tool_fail("out of memory");
  if (is_fmt) q->has_fmt = true, q->fmt = p.fmt;
  else q->has_dtype = true, q->dtype = d;
  return true;
}

static bool word_command(Repl *r, char *line, bool *handled) {
  char *rest, *cmd;
  char copy[4096];
  snprintf(copy, sizeof copy, "%s", line);
  cmd = split_word(copy, &rest);
  *handled = true;
  if (!strcmp(cmd, "quit") || !strcmp(cmd, "exit")) {
    r->quit = true;
    return true;
  }
  if (!strcmp(cmd, "list")) {
    if (!r->n) printf("(no tensors)\n");
    for (int i = 0; i < r->n; i++) kop_info(r->t[i], stdout);
    return true;
  }
  if (!strcmp(cmd, "format") || !strcmp(cmd, "dtype"))
    return set_property(r, cmd[0] == 'f', rest);
  char *arg, *name = split_word(rest, &arg);
  tj_tensor *t;
  if (!strcmp(cmd, "print") || !strcmp(cmd, "info") || !strcmp(cmd, "drop") ||
      !strcmp(cmd, "save")) {
    if (!*name) return tool_fail("usage: %s NAME%s", cmd, cmd[0] == 's' ? " \"file\"" : "");
    if (!(t = get(r, name))) return false;
    int64_t max = TOOL_PRINT_MAX;
    char file[1024];
    if (cmd[0] == 'p' && *arg && !tool_parse_int(arg, 0, &max))
      return tool_fail("usage: print NAME [max entries, 0 = all]");
    if (cmd[0] == 'p') tj_tensor_print(t, stdout, max);
    else if (cmd[0] == 'i') kop_info(t, stdout);
    else if (cmd[0] == 'd') {
      int i = find(r, name);   /* before the free: find reads names */
      tj_tensor_free(t);
      r->t[i] = r->t[--r->n];
    } else if (!unquote(arg, file, sizeof file)) {
      return tool_fail("usage: save NAME \"file\"");
    } else if (tj_tensor_write(t, file) != TJ_OK) {
      return tool_fail_lib("save");
    }
    return true;
  }
  *handled = false;
  return true;
}

/* NAME = builtin(...) or an expression. */
static bool assignment(Repl *r, char *line) {
  const char *p = line;
  while (isalnum((unsigned char)*p) || *p == '_') p++;
  size_t len = (size_t)(p - line);
  while (isspace((unsigned char)*p)) p++;
  if (len && len < TOOL_NAME && *p == '=') {
    char name[TOOL_NAME], *rhs = trim((char *)p + 1);
    memcpy(name, line, len);
    name[len] = 0;
    Arg args[MAX_ARGS];
    int n;
    static const char *fns[] = {"load", "random", "zeros"};
    for (int f = 0; f < 3; f++) {
      size_t fl = strlen(fns[f]);
      if (strncmp(rhs, fns[f], fl) || (rhs[fl] != '(' && !isspace((unsigned char)rhs[fl]))) continue;
      if (!parse_call(rhs, fns[f], args, &n)) return false;
      bool ok = f == 0 ? do_load(r, name, args, n) : do_create(r, name, f == 1, args, n);
      if (ok) kop_info(get(r, name), stdout);
      return ok;
    }
  }
  if (!strchr(line, '=')) return tool_fail("unknown command '%s' (see :help)", line);
  bool ok = do_expression(r, line);
  r->stale = !ok && r->k;
  return ok;
}

static bool execute(Repl *r, char *line) {
  if (line[0] == ':') {
    char *rest, *cmd = split_word(line + 1, &rest);
    return colon_command(r, cmd, rest);
  }
  bool handled;
  bool ok = word_command(r, line, &handled);
  return handled ? ok : assignment(r, line);
}

/* The next line (malloc'd, owned by the caller) or NULL at end of input. */
static char *read_line(bool interactive) {
#ifdef TJ_HAVE_LIBEDIT
  if (interactive) {
    char *l = readline("tensorjit> ");
    if (l && *l) add_history(l);
    return l;
  }
#endif
  if (interactive) {
    fputs("tensorjit> ", stdout);
    fflush(stdout);
  }
  char *l = NULL;
  size_t cap = 0;
  if (getline(&l, &cap, stdin) < 0) {
    free(l);
    return NULL;
  }
  return l;
}

Repl *repl_new(const CliArgs *a) {
  Repl *r = calloc(1, sizeof *r);
  if (!r) {
    tool_fail("out of memory");
    return NULL;
  }
  r->opts = a->opts;
  snprintf(r->defs, sizeof r->defs, "%s", a->defs);
  r->opts.defs = r->defs[0] ? r->defs : NULL;
  if (a->opts.semiring && strlen(a->opts.semiring) < sizeof r->semiring) {
    strcpy(r->semiring, a->opts.semiring);
    r->opts.semiring = r->semiring;
  }
  r->seed = a->seed;
  if (a->schedule) snprintf(r->schedule, sizeof r->schedule, "%s", a->schedule);
  if (tj_context_new(&r->cx) != TJ_OK) {
    tool_fail_lib("context");
    free(r);
    return NULL;
  }
  return r;
}

void repl_free(Repl *r) {
  if (!r) return;
  for (int i = 0; i < r->n; i++) tj_tensor_free(r->t[i]);
  free(r->t);
  free(r->pend);
  free(r->last_expr);
  tj_tensor_free(r->before);
  tj_context_free(r->cx);
  free(r);
}

bool repl_line(Repl *r, char *line, bool *quit) {
  line = trim(line);
  bool ok = !*line || *line == '#' || execute(r, line);
  *quit = r->quit;
  return ok;
}

int repl_run(const CliArgs *a) {
  Repl *r = repl_new(a);
  if (!r) {
    fprintf(stderr, "tensorjit: %s\n", tool_msg());
    return 1;
  }
  bool interactive = isatty(0), quit = false;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (interactive) printf("tensorjit %s (type :help for commands, :quit to leave)\n", tj_version());
  int errors = 0;
  char *l;
  while (!quit && (l = read_line(interactive))) {
    if (!repl_line(r, l, &quit)) {
      fflush(stdout);
      fprintf(stderr, "error: %s\n", tool_msg());
      errors++;
    }
    free(l);
  }
  if (interactive && !quit) putchar('\n');
  repl_free(r);
  return !interactive && errors ? 1 : 0;
}

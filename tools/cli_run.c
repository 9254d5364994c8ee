/* Runs one command line: build the expression's tensors, compile, then
 * print stages, time, evaluate, check and write as the flags ask.
 *
 *   scan expr -> resolve flags to tensors / indices -> read files (-i),
 *   create tensors with explicit dims (-d) -> index extents -> create the
 *   rest -> random data (-g) -> tj_compile -> -print-* / -write-source ->
 *   reference copy (-check) -> -time or one EVALUATE -> compare -> -o.
 *
 * With no print, time, check or output flag it prints a summary (tensors,
 * compile time) and, when every input has data, the evaluated result.
 */
#include "tool.h"

#include <stdlib.h>
#include <string.h>

typedef struct Cli {
  CliArgs *a;
  XsScan s;
  const CliTensor *spec[TOOL_MAX_TENSORS];  /* per scanned tensor, or NULL */
  tj_format fmt[TOOL_MAX_TENSORS];
  tj_tensor *t[TOOL_MAX_TENSORS];
  tj_tensor *base[TOOL_MAX_TENSORS];        /* a view's base (a format with slices) */
  int64_t ext[TOOL_MAX_INDICES];
  tj_context *cx;
  tj_kernel *k;
} Cli;

/* A run that prints stages and evaluates nothing (no data, no -o, -check
 * or -time) needs no real dims: extents nobody gives default to this. */
#define DEFAULT_EXTENT 1000

static bool print_only(const Cli *c) {
  const CliArgs *a = c->a;
  if (a->check || a->time || !(a->stages || a->write_source || a->print_after)) return false;
  for (int i = 0; i < a->nt; i++)
    if (a->t[i].out || a->t[i].file || a->t[i].gen) return false;
  return true;
}

/* Matches each flag's name to a tensor or (for -d=<index>:<n>) an index. */
static bool resolve_names(Cli *c) {
  for (int i = 0; i < c->s.nindex; i++) c->ext[i] = -1;
  for (int i = 0; i < c->a->nt; i++) {
    const CliTensor *f = &c->a->t[i];
    int t = xs_tensor(&c->s, f->name), x = xs_index(&c->s, f->name);
    bool only_dims = !f->format && !f->has_dtype && !f->file && !f->gen && !f->out;
    if (t >= 0) {
      c->spec[t] = f;
      if (f->ndims && f->ndims != c->s.tensors[t].order)
        return tool_fail("-d=%s: %d dims given, but %s has order %d in the expression",
                         f->name, f->ndims, f->name, c->s.tensors[t].order);
      if (f->file && f->gen)
        return tool_fail("%s has both -i and -g: give one source of data", f->name);
    } else if (x >= 0 && only_dims) {
      if (f->ndims != 1)
        return tool_fail("-d=%s: index %s takes one extent", f->name, f->name);
      c->ext[x] = f->dims[0];
    } else {
      return tool_fail("'%s' (named in a flag) is not a tensor%s of the expression '%s'",
                       f->name, only_dims ? " or index" : "", c->a->expr);
    }
  }
  return true;
}

/* Parses each -f format and checks its order against the expression. */
static bool parse_formats(Cli *c) {
  for (int t = 0; t < c->s.ntensors; t++) {
    int order = c->s.tensors[t].order;
    c->fmt[t] = tj_format_dense(order);
    const CliTensor *f = c->spec[t];
    if (!f || !f->format) continue;
    if (tj_format_parse(f->format, &c->fmt[t]) != TJ_OK)
      return tool_fail("-f=%s:%s: %s", f->name, f->format, tj_last_error());
    int nd = c->fmt[t].ndims ? c->fmt[t].ndims : c->fmt[t].order;   /* blocked: dims */
    if (nd != order)
      return tool_fail("-f=%s:%s: the format has %d %s, but %s has order %d in "
                       "the expression", f->name, f->format, nd,
                       c->fmt[t].ndims ? "dims" : "levels", f->name, order);
  }
  return true;
}

/* Replaces *t by a copy with dims `dims` (from -d), same entries. */
static bool redim(tj_tensor **t, const int64_t *dims) {
  int order = tj_tensor_order(*t);
  bool same = true;
  for (int m = 0; m < order; m++) same = same && dims[m] == tj_tensor_dim(*t, m);
  if (same) return true;
  const char *name = tj_tensor_name(*t);
  int64_t *coords = NULL, nnz = 0;
  double *vals = NULL;
  tj_tensor *n = NULL;
  bool ok = tj_tensor_unpack(*t, &coords, &vals, &nnz) == TJ_OK &&
            tj_tensor_new(name, tj_tensor_dtype(*t), order, dims, tj_tensor_format(*t), &n) == TJ_OK;
  for (int64_t e = 0; ok && e < nnz; e++)
    ok = tj_tensor_insert(n, coords + e * order, vals[e]) == TJ_OK;
  ok = ok && tj_tensor_pack(n) == TJ_OK;
  free(coords);
  free(vals);
  if (!ok) {
    tj_tensor_free(n);
    return tool_fail_lib(name);
  }
  tj_tensor_free(*t);
  *t = n;
  return true;
}

static bool sliced(const tj_format *f) {
  for (int d = 0; d < TJ_MAX_ORDER_PUBLIC; d++)
    if (f->slice[d][2]) return true;
  return false;
}

/* Reads tensor t from its -i file in its -f format, dtype and dims. A
 * format with slices reads the file's tensor (-d gives its dims) as the
 * base of the view the expression reads. */
static bool load(Cli *c, int t) {
  const CliTensor *f = c->spec[t];
  const char *name = c->s.tensors[t].name;
  tj_format own = c->fmt[t];
  memset(own.slice, 0, sizeof own.slice);
  bool view = f->format && sliced(&c->fmt[t]);
  tj_tensor **at = view ? &c->base[t] : &c->t[t];
  if (tj_tensor_read_as(f->file, name, f->format ? &own : NULL,
                        f->has_dtype ? f->dtype : TJ_F64, at) != TJ_OK)
    return tool_fail("-i=%s:%s: %s", name, f->file, tj_last_error());
  if (tj_tensor_order(*at) != c->s.tensors[t].order)
    return tool_fail("-i=%s:%s: the file holds a tensor of order %d, but %s has order %d "
                     "in the expression", name, f->file, tj_tensor_order(*at), name,
                     c->s.tensors[t].order);
  if (f->ndims && !redim(at, f->dims)) return false;
  if (view && tj_tensor_view(c->base[t], name, &c->fmt[t], &c->t[t]) != TJ_OK)
    return tool_fail("-f=%s:%s: %s", name, f->format, tj_last_error());
  return true;
}

/* A format with slices (-f=A:ds[0:4:1,:]) makes the tensor of dims `dims`
 * (-g fills it) and the view of it the expression reads. */
static bool create(Cli *c, int t, const int64_t *dims) {
  const CliTensor *f = c->spec[t];
  tj_dtype dt = f && f->has_dtype ? f->dtype : TJ_F64;
  const char *name = c->s.tensors[t].name;
  tj_format own = c->fmt[t];
  bool view = sliced(&own);
  memset(own.slice, 0, sizeof own.slice);
  tj_tensor **at = view ? &c->base[t] : &c->t[t];
  if (tj_tensor_new(name, dt, c->s.tensors[t].order, dims, &own, at) != TJ_OK ||
      (view && tj_tensor_view(c->base[t], name, &c->fmt[t], &c->t[t]) != TJ_OK))
    return tool_fail_lib(name);
  return true;
}

/* Creates every tensor: files and explicit dims first, then the rest from
 * index extents; then fills -g tensors. */
static bool build_tensors(Cli *c) {
  for (int t = 0; t < c->s.ntensors; t++) {
    const CliTensor *f = c->spec[t];
    if (f && !f->file && f->ndims && !create(c, t, f->dims)) return false;
  }
  xs_extents(&c->s, c->t, c->ext);
  for (int t = 0; t < c->s.ntensors; t++)
    if (c->spec[t] && c->spec[t]->file && !load(c, t)) return false;
  xs_extents(&c->s, c->t, c->ext);
  for (int i = 0; print_only(c) && i < c->s.nindex; i++)
    if (c->ext[i] < 0) c->ext[i] = DEFAULT_EXTENT;
  for (int t = 0; t < c->s.ntensors; t++) {
    int64_t dims[TJ_MAX_ORDER_PUBLIC];
    if (c->t[t]) continue;
    if (!xs_dims_from_extents(&c->s, t, c->ext, dims)) {
      char why[512];
      snprintf(why, sizeof why, "%s", tool_msg());
      return tool_fail("%s: give -d=<index>:<n> or -d=%s:<n1>,...", why,
                       c->s.tensors[t].name);
    }
    if (!create(c, t, dims)) return false;
  }
  for (int t = 0; t < c->s.ntensors; t++) {
    const CliTensor *f = c->spec[t];
    tj_tensor *fill = c->base[t] ? c->base[t] : c->t[t];   /* a view: its base */
    if (f && f->gen && !gen_fill(fill, f->gen, f->density, c->a->seed)) return false;
  }
  return true;
}

static bool has_data(const Cli *c, int t) {
  return c->spec[t] && (c->spec[t]->file || c->spec[t]->gen);
}

/* The first input without data, or -1 when every input has some. */
static int missing_input(const Cli *c) {
  for (int t = 1; t < c->s.ntensors; t++)
    if (!has_data(c, t)) return t;
  return -1;
}

static const char *output_flag(const CliArgs *a) {
  for (int i = 0; i < a->nt; i++)
    if (a->t[i].out) return "-o";
  return a->check ? "-check" : a->time ? "-time" : NULL;
}

static bool print_stages(Cli *c) {
  static const char *names[] = {"notation", "cin", "lattice", "assembly", "compute",
                                "c", "llvm", "llvm-opt", "asm", "gett"};
  int count = 0;
  for (int st = 0; st <= TJ_STAGE_GETT; st++) count += (c->a->stages >> st) & 1;
  for (int st = 0; st <= TJ_STAGE_GETT; st++) {
    if (!((c->a->stages >> st) & 1)) continue;
    if (count > 1) printf("--- %s ---\n", names[st]);
    fflush(stdout);
    if (tj_kernel_print(c->k, (tj_stage)st, stdout) != TJ_OK)
      return tool_fail("-print-%s: %s", names[st], tj_last_error());
  }
  if (c->a->print_after && tj_kernel_print_after(c->k, c->a->print_after, stdout) != TJ_OK)
    return tool_fail("-print-after=%s: %s", c->a->print_after, tj_last_error());
  if (c->a->write_source) {
    FILE *f = fopen(c->a->write_source, "w");
    if (!f) return tool_fail("-write-source=%s: cannot open for writing", c->a->write_source);
    tj_status st = tj_kernel_print(c->k, TJ_STAGE_C, f);
    if (fclose(f) != 0 && st == TJ_OK)
      return tool_fail("-write-source=%s: write failed", c->a->write_source);
    if (st != TJ_OK) return tool_fail("-write-source=%s: %s", c->a->write_source, tj_last_error());
  }
  return true;
}

/* One line per tensor (name, dims, format, dtype, nnz, data source), then
 * the compile time. */
static void print_summary(const Cli *c) {
  printf("tensors:\n");
  for (int t = 0; t < c->s.ntensors; t++) {
    const CliTensor *f = c->spec[t];
    const tj_tensor *x = c->t[t];
    char dims[128] = "scalar", fs[128], where[300] = "(output)";
    size_t used = 0;
    for (int m = 0; m < tj_tensor_order(x) && used < sizeof dims; m++)
      used += (size_t)snprintf(dims + used, sizeof dims - used, "%s%lld", m ? "x" : "",
                               (long long)tj_tensor_dim(x, m));
    tj_format_print(tj_tensor_format(x), fs, sizeof fs);
    if (f && f->file) snprintf(where, sizeof where, "from %s", f->file);
    else if (f && f->gen) snprintf(where, sizeof where, "random %c", f->gen);
    else if (t > 0) snprintf(where, sizeof where, "(no data)");
    printf("  %-8s %-14s %-8s %-4s nnz %-10lld %s\n", tj_tensor_name(x), dims,
           fs[0] ? fs : "-", tj_dtype_name(tj_tensor_dtype(x)),
           (long long)tj_tensor_nnz(x), where);
  }
  printf("compile: %.3f ms\n", tj_kernel_times(c->k).total_ms);
}

/* Evaluates (or times) the kernel, checks and writes as asked. */
static bool evaluate(Cli *c) {
  tj_tensor *ref = NULL;
  if (c->a->check && !(ref = kop_reference(c->a->expr, c->t, c->s.ntensors, 0, &c->a->opts))) return false;
  bool ok;
  if (c->a->time) {
    TimeStats ts;
    ok = kop_time(c->k, NULL, 0, c->a->reps, &ts);
    if (ok) kop_print_time(&ts, stdout);
  } else {
    ok = tj_kernel_run(c->k, TJ_EVALUATE, NULL, 0) == TJ_OK || tool_fail_lib("evaluate");
  }
  if (ok && ref) ok = kop_compare(c->t[0], ref, stdout);
  tj_tensor_free(ref);
  for (int i = 0; ok && i < c->a->nt; i++) {
    const CliTensor *f = &c->a->t[i];
    int t = xs_tensor(&c->s, f->name);
    if (f->out && tj_tensor_write(c->t[t], f->out) != TJ_OK)
      ok = tool_fail("-o=%s:%s: %s", f->name, f->out, tj_last_error());
  }
  return ok;
}

static bool run(Cli *c) {
  CliArgs *a = c->a;
  if (!xs_scan(a->expr, a->opts.defs, &c->s) || !resolve_names(c) || !parse_formats(c) ||
      !build_tensors(c))
    return false;
  const char *needs = output_flag(a);
  bool plain = !needs && !a->stages && !a->write_source && !a->print_after;
  int missing = missing_input(c);
  if (needs && missing >= 0)
    return tool_fail("%s needs evaluation, but input %s has no data: give -i=%s:<file> "
                     "or -g=%s:<kind>", needs, c->s.tensors[missing].name,
                     c->s.tensors[missing].name, c->s.tensors[missing].name);
  if (tj_context_new(&c->cx) != TJ_OK) return tool_fail_lib("context");
  if (tj_compile(c->cx, a->expr, c->t, c->s.ntensors, a->schedule, &a->opts, &c->k) != TJ_OK)
    return tool_fail("%s", tj_last_error());
  if (!print_stages(c)) return false;
  if (plain) print_summary(c);
  if (needs || (plain && missing < 0)) {
    if (!evaluate(c)) return false;
    if (plain) tj_tensor_print(c->t[0], stdout, TOOL_PRINT_MAX);
  }
  return true;
}

int cli_run(CliArgs *a) {
  Cli c;
  memset(&c, 0, sizeof c);
  c.a = a;
  bool ok = run(&c);
  fflush(stdout);
  if (!ok) fprintf(stderr, "tensorjit: %s\n", tool_msg());
  for (int t = 0; t < TOOL_MAX_TENSORS; t++) tj_tensor_free(c.t[t]);   /* views first */
  for (int t = 0; t < TOOL_MAX_TENSORS; t++) tj_tensor_free(c.base[t]);
  tj_context_free(c.cx);
  return ok ? 0 : 1;
}

/* The MLIR encoding spelling (issue 15), round trip: every encoding of a
 * list taken from the MLIR sparse-encoding note (../shared/seeds/004_*)
 * and MLIR's own tests (mlir/test/Dialect/SparseTensor/
 * roundtrip_encoding.mlir: aliases, comments, the explicit map form with
 * level variables and the inverse map, widths, BSR, BCSR, 2:4 in three
 * placements, slices) parses to the format written beside it, prints back
 * in MLIR's spelling, and the printed text parses to the same format; so
 * does the taco spelling. The encodings tensorjit cannot store (ELL's
 * symbols, loose_compressed(nonunique)) are
 * refused with a message naming what and where. The old spelling (LLVM
 * 15-17: dimLevelType / lvlTypes, dimOrdering / dimToLvl, pointerBitWidth /
 * indexBitWidth) parses and prints back the same way. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "tensorjit.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

typedef struct Enc {
  const char *mlir;    /* as written in the source */
  const char *taco;    /* the format it is, taco spelling */
  const char *back;    /* tj_format_print_mlir of it */
} Enc;

static const Enc encs[] = {
    {"#SV = #sparse_tensor.encoding<{ map = (d0) -> (d0 : compressed) }>", "s",
     "(d0) -> (d0 : compressed)"},
    {"#sparse_tensor.encoding<{\n  map = (d0, d1) -> (d0 : dense, d1 : compressed),\n"
     "  posWidth = 64,\n  crdWidth = 64\n}>",
     "ds", "(d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64, crdWidth = 64"},
    {"#CSR_explicit = #sparse_tensor.encoding<{\n  map = {l0, l1} (d0 = l0, d1 = l1) -> "
     "(l0 = d0 : dense, l1 = d1 : compressed)\n}>",
     "ds", "(d0, d1) -> (d0 : dense, d1 : compressed)"},
    {"#CSC = #sparse_tensor.encoding<{\n  map = (d0, d1) -> (d1 : dense, d0 : compressed),\n"
     "  posWidth = 0,\n  crdWidth = 0\n}>",
     "ds:1,0", "(d0, d1) -> (d1 : dense, d0 : compressed)"},
    {"#DCSC = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : compressed, d0 : compressed), "
     "posWidth = 0, crdWidth = 64 }>",
     "ss:1,0", "(d0, d1) -> (d1 : compressed, d0 : compressed), crdWidth = 64"},
    {"#sparse_tensor.encoding<{ map = (j, i) -> (i : compressed, j : compressed), "
     "posWidth = 32, crdWidth = 8 }>",   /* the seed note's DCSC */
     "ss:1,0", "(d0, d1) -> (d1 : compressed, d0 : compressed), crdWidth = 8"},
    {"#SortedCOO = #sparse_tensor.encoding<{\n  map = (d0, d1) -> (d0 : compressed(nonunique), "
     "d1 : singleton)\n}>",
     "uq", "(d0, d1) -> (d0 : compressed(nonunique), d1 : singleton)"},
    {"(i, j, k) -> (i : compressed(nonunique), j : singleton(nonunique), k : singleton)", "ucq",
     "(d0, d1, d2) -> (d0 : compressed(nonunique), d1 : singleton(nonunique), d2 : singleton)"},
    /* issue 15: a nonunique level over a compressed or dense one */
    {"(d0, d1) -> (d0 : compressed(nonunique), d1 : compressed)", "us",
     "(d0, d1) -> (d0 : compressed(nonunique), d1 : compressed)"},
    {"(d0, d1) -> (d0 : compressed(nonunique), d1 : dense)", "ud",
     "(d0, d1) -> (d0 : compressed(nonunique), d1 : dense)"},
    {"(i, j, k) -> (i : compressed(nonunique, nonordered), k : compressed(nonunique), "
     "j : compressed)", "wus:0,2,1",
     "(d0, d1, d2) -> (d0 : compressed(nonunique, nonordered), d2 : compressed(nonunique), "
     "d1 : compressed)"},
    {"(i, j) -> (i : dense, j : compressed(nonordered))", "do",
     "(d0, d1) -> (d0 : dense, d1 : compressed(nonordered))"},
    {"#COO = #sparse_tensor.encoding<{\n  map = (d0, d1) -> (d0 : compressed(nonunique, "
     "nonordered), d1 : singleton(nonordered))\n}>", "wz",
     "(d0, d1) -> (d0 : compressed(nonunique, nonordered), d1 : singleton(nonordered))"},
    {"(i, j) -> (i : dense, j : loose_compressed)", "dl",
     "(d0, d1) -> (d0 : dense, d1 : loose_compressed)"},
    {"#BSR = #sparse_tensor.encoding<{\n   map = ( i, j ) ->\n      ( i floordiv 2 : dense,\n"
     "        j floordiv 3 : compressed,\n        i mod 2      : dense,\n"
     "        j mod 3      : dense\n      )\n}>",
     "dsdd:0/2,1/3,0%2,1%3",
     "(d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 3 : compressed, d0 mod 2 : dense, "
     "d1 mod 3 : dense)"},
    {"#BSR_explicit = #sparse_tensor.encoding<{\n  map =\n  {il, jl, ii, jj}\n"
     "  ( i = il * 2 + ii,\n    j = jl * 3 + jj\n  ) ->\n  ( il = i floordiv 2 : dense,\n"
     "    jl = j floordiv 3 : compressed,\n    ii = i mod 2      : dense,\n"
     "    jj = j mod 3      : dense\n  )\n}>",
     "dsdd:0/2,1/3,0%2,1%3",
     "(d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 3 : compressed, d0 mod 2 : dense, "
     "d1 mod 3 : dense)"},
    {"#BCSR = #sparse_tensor.encoding<{\n  map = ( i, j, k ) ->\n  ( i floordiv 2 : dense,\n"
     "    j floordiv 3 : dense,\n    k floordiv 4 : compressed,\n    i mod 2      : dense,\n"
     "    j mod 3      : dense,\n    k mod 4      : dense\n  )\n}>",
     "ddsddd:0/2,1/3,2/4,0%2,1%3,2%4",
     "(d0, d1, d2) -> (d0 floordiv 2 : dense, d1 floordiv 3 : dense, d2 floordiv 4 : "
     "compressed, d0 mod 2 : dense, d1 mod 3 : dense, d2 mod 4 : dense)"},
    {"#NV_24 = #sparse_tensor.encoding<{\n  map = ( i, j ) ->\n  ( i            : dense,\n"
     "    j floordiv 4 : dense,\n    j mod 4      : block2_4\n  ),\n"
     "  crdWidth = 8  // we would even like just 2-bits\n}>",
     "ddn2:0,1/4,1%4",
     "(d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), "
     "crdWidth = 8"},
    {"#NV_24 = #sparse_tensor.encoding<{\n  map = ( i, j, k ) ->\n  ( i            : dense,\n"
     "    j            : dense,\n    k floordiv 4 : dense,\n    k mod 4      : block2_4\n  )\n}>",
     "dddn2:0,1,2/4,2%4",
     "(d0, d1, d2) -> (d0 : dense, d1 : dense, d2 floordiv 4 : dense, d2 mod 4 : "
     "structured[2, 4])"},
    {"#NV_24 = #sparse_tensor.encoding<{\n  map = ( i, j, k ) ->\n  ( i            : dense,\n"
     "    k floordiv 4 : dense,\n    j            : dense,\n    k mod 4      : block2_4\n  )\n}>",
     "dddn2:0,2/4,1,2%4",
     "(d0, d1, d2) -> (d0 : dense, d2 floordiv 4 : dense, d1 : dense, d2 mod 4 : "
     "structured[2, 4])"},
    {"#CSR_SLICE = #sparse_tensor.encoding<{\n  map = (d0 : #sparse_tensor<slice(1, 4, 1)>, "
     "d1 : #sparse_tensor<slice(1, 4, 2)>) -> (d0 : dense, d1 : compressed)\n}>",
     "ds[1:4:1,1:4:2]",
     "(d0 : #sparse_tensor<slice(1, 4, 1)>, d1 : #sparse_tensor<slice(1, 4, 2)>) -> "
     "(d0 : dense, d1 : compressed)"},
    {"#sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed), "
     "dimSlices = [(0, 4, 1), (0, 8, 3)] }>",
     "ds[0:4:1,0:8:3]",
     "(d0 : #sparse_tensor<slice(0, 4, 1)>, d1 : #sparse_tensor<slice(0, 8, 3)>) -> "
     "(d0 : dense, d1 : compressed)"},
    {"(i, j) -> (i : dense, j : structured[3, 8]), posWidth = 16", NULL, NULL},   /* refused */
};
#define NENC ((int)(sizeof encs / sizeof encs[0]) - 1)

static bool same(const tj_format *a, const tj_format *b) {
  return a->order == b->order && !strcmp(a->levels, b->levels) && a->ndims == b->ndims &&
         !memcmp(a->mode_order, b->mode_order, sizeof a->mode_order) &&
         !memcmp(a->lvl_op, b->lvl_op, sizeof a->lvl_op) &&
         !memcmp(a->lvl_k, b->lvl_k, sizeof a->lvl_k) &&
         !memcmp(a->lvl_n, b->lvl_n, sizeof a->lvl_n) &&
         !memcmp(a->slice, b->slice, sizeof a->slice) &&
         (a->pos_width ? a->pos_width : 32) == (b->pos_width ? b->pos_width : 32) &&
         (a->crd_width ? a->crd_width : 32) == (b->crd_width ? b->crd_width : 32);
}

START_TEST(round_trip) {
  const Enc *e = &encs[_i];
  tj_format f, g, h;
  OK(tj_format_parse(e->mlir, &f));
  OK(tj_format_parse(e->taco, &g));
  /* the taco spelling carries no widths: compare the rest */
  tj_format fw = f;
  fw.pos_width = g.pos_width, fw.crd_width = g.crd_width;
  ck_assert_msg(same(&fw, &g), "%s is not %s", e->mlir, e->taco);
  char buf[1024];
  tj_format_print_mlir(&f, buf, sizeof buf);
  ck_assert_str_eq(buf, e->back);
  OK(tj_format_parse(buf, &h));
  ck_assert_msg(same(&f, &h), "%s printed as %s parses differently", e->mlir, buf);
  tj_format_print(&f, buf, sizeof buf);
  ck_assert_str_eq(buf, e->taco);
}
END_TEST

static void refused(const char *spec, tj_status want, const char *part) {
  tj_format f;
  tj_status st = tj_format_parse(spec, &f);
  ck_assert_msg(st == want, "\"%s\": status %d, want %d (%s)", spec, (int)st, (int)want,
                tj_last_error());
  ck_assert_msg(strstr(tj_last_error(), part), "\"%s\": %s", spec, tj_last_error());
}

START_TEST(refusals) {
  refused("#ELL = #sparse_tensor.encoding<{\n  map = [s0](d0, d1) -> (d0 * (s0 * 4) : dense, "
          "d0 : dense, d1 : compressed)\n}>", TJ_ERR_UNSUPPORTED,
          "symbols at column 42 ('[s0]', as in ELL's");
  refused("(d0, d1, d2) -> (d0 : dense, d1 : loose_compressed(nonunique), d2 : singleton)",
          TJ_ERR_UNSUPPORTED, "unsupported level type at column 35");
  refused("(d0) -> (d0 : sparse)", TJ_ERR_PARSE, "unknown level type at column 15");
  refused("#sparse_tensor.encoding<{ map = {l0 (d0) -> (d0 : dense) }>", TJ_ERR_PARSE,
          "expected '}' after the level variables");
  refused("(i, j) -> (i : dense, j : compressed), posWidth = 12", TJ_ERR_PARSE,
          "must be 8, 16, 32 or 64 bits");
  /* the last row of the table: structured must store 'j mod 8' */
  refused(encs[NENC].mlir, TJ_ERR_PARSE, "structured[3, 8] at column 27 must store 'j mod 8'");
}
END_TEST

/* LLVM 15-16's spelling (roundtrip_encoding.mlir of those releases) and
 * LLVM 17's renaming of its fields: each parses to the format beside it
 * and tj_format_print_mlir_legacy writes what LLVM 15-16 prints, which
 * parses back to the same format. */
static const Enc legacy[] = {
    {"#sparse_tensor.encoding<{ dimLevelType = [\"compressed\"] }>", "s",
     "#sparse_tensor.encoding<{ dimLevelType = [ \"compressed\" ] }>"},
    {"#CSR = #sparse_tensor.encoding<{\n  dimLevelType = [ \"dense\", \"compressed\" ],\n"
     "  dimOrdering = affine_map<(i,j) -> (i,j)>,\n  pointerBitWidth = 64,\n"
     "  indexBitWidth = 64\n}>", "ds",
     "#sparse_tensor.encoding<{ dimLevelType = [ \"dense\", \"compressed\" ], "
     "pointerBitWidth = 64, indexBitWidth = 64 }>"},
    {"#CSC = #sparse_tensor.encoding<{\n  dimLevelType = [ \"dense\", \"compressed\" ],\n"
     "  dimOrdering = affine_map<(i,j) -> (j,i)>,\n  pointerBitWidth = 0,\n"
     "  indexBitWidth = 0\n}>", "ds:1,0",
     "#sparse_tensor.encoding<{ dimLevelType = [ \"dense\", \"compressed\" ], "
     "dimOrdering = affine_map<(d0, d1) -> (d1, d0)> }>"},
    {"#DCSC = #sparse_tensor.encoding<{\n  dimLevelType = [ \"compressed\", \"compressed\" ],\n"
     "  dimOrdering = affine_map<(i,j) -> (j,i)>,\n  pointerBitWidth = 0,\n"
     "  indexBitWidth = 16\n}>", "ss:1,0",
     "#sparse_tensor.encoding<{ dimLevelType = [ \"compressed\", \"compressed\" ], "
     "dimOrdering = affine_map<(d0, d1) -> (d1, d0)>, indexBitWidth = 16 }>"},
    {"#COO = #sparse_tensor.encoding<{\n  dimLevelType = [ \"compressed-nu-no\", \"singleton-no\" ]\n}>",
     "wz", "#sparse_tensor.encoding<{ dimLevelType = [ \"compressed-nu-no\", \"singleton-no\" ] }>"},
    {"#SortedCOO = #sparse_tensor.encoding<{\n  dimLevelType = [ \"compressed-nu\", \"singleton\" ]\n}>",
     "uq", "#sparse_tensor.encoding<{ dimLevelType = [ \"compressed-nu\", \"singleton\" ] }>"},
    {"#sparse_tensor.encoding<{ pointerBitWidth = 8, dimLevelType = [ \"compressed-nu\", "
     "\"singleton-nu\", \"singleton\" ], dimOrdering = affine_map<(i,j,k) -> (k,i,j)> }>",
     "ucq:2,0,1",
     "#sparse_tensor.encoding<{ dimLevelType = [ \"compressed-nu\", \"singleton-nu\", "
     "\"singleton\" ], dimOrdering = affine_map<(d0, d1, d2) -> (d2, d0, d1)>, "
     "pointerBitWidth = 8 }>"},
    {"#sparse_tensor.encoding<{ lvlTypes = [ \"dense\", \"compressed-no\" ], "
     "dimToLvl = affine_map<(i,j) -> (j,i)>, posWidth = 16, crdWidth = 8 }>", "do:1,0",
     "#sparse_tensor.encoding<{ dimLevelType = [ \"dense\", \"compressed-no\" ], "
     "dimOrdering = affine_map<(d0, d1) -> (d1, d0)>, pointerBitWidth = 16, "
     "indexBitWidth = 8 }>"},
    /* blocked and sliced: parsed; LLVM 15-16 cannot print them */
    {"#BCSR = #sparse_tensor.encoding<{\n   lvlTypes = [ \"compressed\", \"compressed\", "
     "\"dense\", \"dense\" ],\n   dimToLvl  = affine_map<(i, j) -> (i floordiv 2, j floordiv 3, "
     "i mod 2, j mod 3)>\n}>", "ssdd:0/2,1/3,0%2,1%3", NULL},
    {"#sparse_tensor.encoding<{ dimLevelType = [ \"dense\", \"compressed\", \"dense\", \"dense\" ], "
     "dimOrdering = affine_map<(a, b, c, d) -> (a, b, c, d)>, higherOrdering = affine_map<(i, j) "
     "-> (i floordiv 4, j floordiv 4, i mod 4, j mod 4)> }>", "dsdd:0/4,1/4,0%4,1%4", NULL},
    {"#CSR_SLICE = #sparse_tensor.encoding<{\n  lvlTypes = [ \"dense\", \"compressed\" ],\n"
     "  dimSlices = [ (1, 4, 1), (1, 4, 2) ]\n}>", "ds[1:4:1,1:4:2]", NULL},
    {"#sparse_tensor.encoding<{ lvlTypes = [ \"dense\", \"loose_compressed\" ] }>", NULL, NULL},
};
#define NLEGACY_ENC ((int)(sizeof legacy / sizeof legacy[0]) - 1)

START_TEST(legacy_round_trip) {
  const Enc *e = &legacy[_i];
  tj_format f, g, h;
  OK(tj_format_parse(e->mlir, &f));
  OK(tj_format_parse(e->taco, &g));
  tj_format fw = f;
  fw.pos_width = g.pos_width, fw.crd_width = g.crd_width;
  ck_assert_msg(same(&fw, &g), "%s is not %s", e->mlir, e->taco);
  char buf[1024];
  tj_format_print(&f, buf, sizeof buf);
  ck_assert_str_eq(buf, e->taco);
  if (!e->back) {
    ck_assert_int_eq(tj_format_print_mlir_legacy(&f, buf, sizeof buf), TJ_ERR_UNSUPPORTED);
    ck_assert_str_eq(buf, "");
    ck_assert_msg(strstr(tj_last_error(), "tj_format_print_mlir spells it"), "%s",
                  tj_last_error());
    return;
  }
  OK(tj_format_print_mlir_legacy(&f, buf, sizeof buf));
  ck_assert_str_eq(buf, e->back);
  OK(tj_format_parse(buf, &h));
  ck_assert_msg(same(&f, &h), "%s printed as %s parses differently", e->mlir, buf);
  /* the new spelling of the same format parses to it too */
  tj_format_print_mlir(&f, buf, sizeof buf);
  OK(tj_format_parse(buf, &h));
  ck_assert_msg(same(&f, &h), "%s printed as %s parses differently", e->mlir, buf);
}
END_TEST

START_TEST(legacy_refusals) {
  refused(legacy[NLEGACY_ENC].mlir, TJ_ERR_PARSE,
          "unknown level type \"loose_compressed\" at column 49");
  refused("#sparse_tensor.encoding<{ dimLevelType = [ \"singleton-nu-no\" ] }>",
          TJ_ERR_UNSUPPORTED, "unsupported level type \"singleton-nu-no\" at column 44");
  refused("#sparse_tensor.encoding<{ dimLevelType = [ \"dense\", \"compressed\" ], "
          "dimOrdering = affine_map<(i,j) -> (j,k)> }>", TJ_ERR_PARSE,
          "unknown dim 'k' at column 106");
  refused("#sparse_tensor.encoding<{ dimLevelType = [ \"dense\", \"compressed\" ], "
          "dimOrdering = affine_map<(i,j) -> (j)> }>", TJ_ERR_PARSE,
          "2 level types but the maps give 1 levels");
  refused("#sparse_tensor.encoding<{ dimLevelType = [ \"dense\", \"compressed\" ], "
          "dimOrdering = affine_map<(i,j) -> (j,j)> }>", TJ_ERR_PARSE,
          "mode order is not a permutation");
  refused("#sparse_tensor.encoding<{ dimLevelType = [ \"dense\", \"compressed\" ], "
          "indexBitWidth = 12 }>", TJ_ERR_PARSE, "must be 8, 16, 32 or 64 bits");
  refused("#sparse_tensor.encoding<{ dimLevelType = [ \"dense\" ], sparsity = 3 }>",
          TJ_ERR_PARSE, "unknown field 'sparsity' at column 55");
  refused("#sparse_tensor.encoding<{ lvlTypes = [ \"dense\", \"compressed\" ], "
          "dimToLvl = affine_map<(i,j)[s0] -> (i, j)> }>", TJ_ERR_UNSUPPORTED,
          "symbols at column 92");
  refused("#sparse_tensor.encoding<{ dimLevelType = [ \"dense\" \"compressed\" ] }>",
          TJ_ERR_PARSE, "expected a quoted level type at column 52");
  refused("#sparse_tensor.encoding<{ dimLevelType = [ \"dense\" ]", TJ_ERR_PARSE,
          "expected '}>' at column");
  /* n_out_of_m: no LLVM 15-16 spelling */
  tj_format f;
  char buf[256];
  OK(tj_format_parse("ddn2:0,1/4,1%4", &f));
  ck_assert_int_eq(tj_format_print_mlir_legacy(&f, buf, sizeof buf), TJ_ERR_UNSUPPORTED);
  OK(tj_format_parse("ds:1,0", &f));
  ck_assert_int_eq(tj_format_print_mlir_legacy(&f, buf, 20), TJ_ERR_INVALID);
  ck_assert_str_eq(buf, "");
}
END_TEST

int main(void) {
  Suite *s = suite_create("encoding");
  TCase *tc = tcase_create("encoding");
  tcase_add_loop_test(tc, round_trip, 0, NENC);
  tcase_add_test(tc, refusals);
  tcase_add_loop_test(tc, legacy_round_trip, 0, NLEGACY_ENC);
  tcase_add_test(tc, legacy_refusals);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}

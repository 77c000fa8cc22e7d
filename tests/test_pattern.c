/* test_pattern.c — tests of src/pattern: every spec of the reference table at awkward
 * sizes, row by row, against brute force (public rows, segments, columns); explicit
 * masks from arrays and .npy files; unions and intersections; random expressions;
 * parse and argument errors; and a timing printout of row evaluation. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "harness.h"
#include "pattern/pattern.h"
#include "splat.h"
#include "support/reference_patterns.h"

static uint64_t rng_state = 12345;
static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* 1 when the segment is in one of the canonical forms of pattern.h and inside [0, seq_k). */
static int canonical(splat__segment s, int64_t seq_k) {
  if (s.count < 1 || s.start < 0 || splat__segment_last(s) >= seq_k) return 0;
  if (s.stride == 1) return s.width == 1;
  return s.stride > 1 && s.count >= 2 && s.width >= 1 && s.width < s.stride;
}

/* Brute-force oracle for one row: want[j] for j < seq_k. */
typedef int (*row_oracle)(const void *ctx, int64_t i, int64_t j, int64_t seq_q, int64_t seq_k);

typedef struct scratch {
  unsigned char *want, *got;
  splat__segment *segs;
  int32_t *cols32;
  int64_t *cols64;
} scratch;

static scratch scratch_new(int64_t seq_k) {
  scratch s;
  s.want = malloc((size_t)seq_k);
  s.got = malloc((size_t)seq_k);
  s.segs = malloc((size_t)(seq_k + 1) * sizeof *s.segs);
  s.cols32 = malloc((size_t)seq_k * sizeof *s.cols32);
  s.cols64 = malloc((size_t)seq_k * sizeof *s.cols64);
  return s;
}
static void scratch_free(scratch *s) {
  free(s->want), free(s->got), free(s->segs), free(s->cols32), free(s->cols64);
}

/* Checks every row of p against the oracle through splat__row_segments,
 * splat__row_columns and (when check_public) splat_pattern_row. One CHECKF per path
 * and pattern, naming the first bad row. Returns the largest segment count seen. */
static int check_rows(const char *label, const splat_pattern *p, row_oracle oracle, const void *ctx,
                      int check_public) {
  const int64_t seq_q = splat_pattern_seq_q(p), seq_k = splat_pattern_seq_k(p);
  scratch s = scratch_new(seq_k);
  splat__row_eval *e = NULL;
  CHECK(splat__row_eval_create(p, &e) == SPLAT_OK);
  int64_t bad_seg = -1, bad_col = -1, bad_pub = -1;
  const char *why = "";
  int max_segs = 0;
  for (int64_t i = 0; i < seq_q && e; i++) {
    int64_t nnz = 0;
    for (int64_t j = 0; j < seq_k; j++)
      nnz += s.want[j] = (unsigned char)!!oracle(ctx, i, j, seq_q, seq_k);
    /* segments */
    int n = splat__row_segments(e, i, s.segs, (int)(seq_k + 1));
    if (n > max_segs) max_segs = n;
    if (bad_seg < 0) {
      memset(s.got, 0, (size_t)seq_k);
      int ok = n >= 0;
      int64_t prev_last = -1, total = 0;
      for (int t = 0; ok && t < n; t++) {
        splat__segment g = s.segs[t];
        if (!canonical(g, seq_k))
          ok = 0, why = "not canonical";
        else if (g.start <= prev_last)
          ok = 0, why = "spans not disjoint / increasing";
        if (!ok) break;
        prev_last = splat__segment_last(g);
        for (int64_t q = 0; q < g.count; q++)
          for (int64_t u = 0; u < g.width; u++) s.got[g.start + q * g.stride + u] = 1;
        total += splat__segment_nnz(g);
        for (int64_t j = g.start; j <= prev_last; j++) {
          if (splat__segment_contains(g, j) != s.got[j]) ok = 0, why = "segment_contains";
        }
      }
      if (ok && (total != nnz || memcmp(s.got, s.want, (size_t)seq_k) != 0)) {
        ok = 0, why = "columns differ from brute force";
      }
      if (!ok) bad_seg = i;
    }
    /* columns */
    if (bad_col < 0) {
      int64_t c = splat__row_columns(e, i, s.cols32);
      int ok = c == nnz;
      for (int64_t t = 0, j = 0; ok && t < c; t++, j++) {
        while (j < seq_k && !s.want[j]) j++;
        ok = j < seq_k && s.cols32[t] == j;
      }
      if (!ok) bad_col = i;
    }
    /* public row */
    if (check_public && bad_pub < 0) {
      int64_t c = -1;
      int ok = splat_pattern_row(p, i, s.cols64, seq_k, &c) == SPLAT_OK && c == nnz;
      for (int64_t t = 0, j = 0; ok && t < c; t++, j++) {
        while (j < seq_k && !s.want[j]) j++;
        ok = j < seq_k && s.cols64[t] == j;
      }
      int64_t c2 = -1;
      if (ok && nnz > 1) { /* a short buffer still reports the full count */
        ok = splat_pattern_row(p, i, s.cols64, 1, &c2) == SPLAT_OK && c2 == nnz;
      }
      if (ok) ok = splat_pattern_row(p, i, NULL, 0, &c2) == SPLAT_OK && c2 == nnz;
      if (!ok) bad_pub = i;
    }
  }
  CHECKF(bad_seg < 0, "%s %lldx%lld: row %lld segments: %s", label, (long long)seq_q,
         (long long)seq_k, (long long)bad_seg, why);
  CHECKF(bad_col < 0, "%s %lldx%lld: row %lld splat__row_columns differs", label, (long long)seq_q,
         (long long)seq_k, (long long)bad_col);
  if (check_public) {
    CHECKF(bad_pub < 0, "%s %lldx%lld: row %lld splat_pattern_row differs", label, (long long)seq_q,
           (long long)seq_k, (long long)bad_pub);
  }
  splat__row_eval_destroy(e);
  scratch_free(&s);
  return max_segs;
}

static int ref_oracle(const void *ctx, int64_t i, int64_t j, int64_t seq_q, int64_t seq_k) {
  const ref_pattern *rp = ctx;
  return rp->contains(rp, i, j, seq_q, seq_k);
}

/* ---------------------------------------------------------------- the table */

static void test_reference_table(void) {
  static const int64_t shapes[][2] = {{1, 1},       {2, 2},     {97, 97},  {1000, 1000},
                                      {4097, 4097}, {97, 1000}, {1000, 97}};
  double t0 = now_ms();
  for (int k = 0; k < splat_ref_pattern_count; k++) {
    const ref_pattern *rp = &splat_ref_patterns[k];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      splat_pattern *p = NULL;
      splat_status st = splat_pattern_parse(rp->spec, shapes[s][0], shapes[s][1], &p);
      CHECKF(st == SPLAT_OK, "parse '%s': %s", rp->spec, splat__thread_error());
      if (st != SPLAT_OK) continue;
      CHECK(splat_pattern_seq_q(p) == shapes[s][0] && splat_pattern_seq_k(p) == shapes[s][1]);
      /* The canonical text parses back to itself. */
      splat_pattern *p2 = NULL;
      CHECKF(
          splat_pattern_parse(splat_pattern_spec(p), shapes[s][0], shapes[s][1], &p2) == SPLAT_OK &&
              strcmp(splat_pattern_spec(p2), splat_pattern_spec(p)) == 0,
          "canonical '%s' of '%s' does not round-trip", splat_pattern_spec(p), rp->spec);
      splat_pattern_destroy(p2);
      check_rows(rp->spec, p, ref_oracle, rp, 1);
      splat_pattern_destroy(p);
    }
  }
  printf("reference table: %d specs x %zu shapes checked in %.0f ms\n", splat_ref_pattern_count,
         sizeof shapes / sizeof shapes[0], now_ms() - t0);
}

/* ---------------------------------------------------------------- repeated rows */

/* Row q (through splat__row_segments at cap) equals row i's n segments g moved right by
 * d columns, or is -1 like it. */
static int row_repeats(splat__row_eval *e, int64_t q, int cap, const splat__segment *g, int n,
                       int64_t d) {
  splat__segment h[64];
  if (splat__row_segments(e, q, h, cap) != n) return 0;
  for (int s = 0; s < n; s++) {
    if (h[s].start != g[s].start + d || h[s].stride != g[s].stride || h[s].count != g[s].count ||
        h[s].width != g[s].width)
      return 0;
  }
  return 1;
}

/* splat__row_run against the rows it claims to repeat, from every start row (every 7th
 * at 4097), at several caps (rows past the cap and the bit fallback repeat too). */
static void test_row_runs(void) {
  static const int64_t shapes[][2] = {{97, 97}, {1000, 1000}, {97, 1000}, {1000, 97}, {4097, 4097}};
  static const int caps[] = {64, SPLAT_MAX_SEGMENTS, 2, 1};
  int64_t runs = 0, bad = 0;
  for (int k = 0; k < splat_ref_pattern_count; k++) {
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
      splat_pattern *p = NULL;
      if (splat_pattern_parse(splat_ref_patterns[k].spec, shapes[sh][0], shapes[sh][1], &p))
        continue;
      splat__row_eval *e = NULL;
      CHECK(splat__row_eval_create(p, &e) == SPLAT_OK);
      const int64_t sq = shapes[sh][0], step = sq > 1000 ? 7 : 1;
      for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        for (int64_t i = 0; i < sq; i += step) {
          splat__segment g[64];
          const int n = splat__row_segments(e, i, g, caps[c]);
          int shift = -1;
          const int64_t end = splat__row_run(e, i, &shift);
          if (end < i || end >= sq || (shift != 0 && shift != 1)) {
            bad++;
            continue;
          }
          runs += end > i;
          /* The first 64 rows of the run and its last. */
          for (int64_t q = i + 1; q <= end; q = q < i + 64 ? q + 1 : (q < end ? end : q + 1)) {
            if (!row_repeats(e, q, caps[c], g, n, shift ? q - i : 0)) {
              if (bad++ < 5)
                fprintf(stderr, "  '%s' %lldx%lld cap %d: row %lld does not repeat row %lld\n",
                        splat_ref_patterns[k].spec, (long long)sq, (long long)shapes[sh][1],
                        caps[c], (long long)q, (long long)i);
              break;
            }
          }
        }
      }
      splat__row_eval_destroy(e);
      splat_pattern_destroy(p);
    }
  }
  CHECKF(bad == 0, "%lld rows do not repeat the row their run starts at", (long long)bad);
  CHECKF(runs > 0, "no row starts a run");
}

/* ---------------------------------------------------------------- shapes of rows */

/* Row i of spec at seq x seq as segments (cap 64). */
static int segs_of(const char *spec, int64_t seq, int64_t i, splat__segment *out) {
  splat_pattern *p = NULL;
  if (splat_pattern_parse(spec, seq, 0, &p) != SPLAT_OK) return -2;
  splat__row_eval *e = NULL;
  int n = -3;
  if (splat__row_eval_create(p, &e) == SPLAT_OK) n = splat__row_segments(e, i, out, 64);
  splat__row_eval_destroy(e);
  splat_pattern_destroy(p);
  return n;
}

static int seg_eq(splat__segment s, int start, int stride, int count, int width) {
  return s.start == start && s.stride == stride && s.count == count && s.width == width;
}

static void test_segment_forms(void) {
  splat__segment g[64];
  CHECK(segs_of("window(3)", 100, 50, g) == 1 && seg_eq(g[0], 47, 1, 7, 1));
  CHECK(segs_of("causal", 100, 0, g) == 1 && seg_eq(g[0], 0, 1, 1, 1));
  CHECK(segs_of("dilated(4,3)", 100, 50, g) == 1 && seg_eq(g[0], 38, 3, 9, 1));
  CHECK(segs_of("dilated(4,1)", 100, 50, g) == 1 && seg_eq(g[0], 46, 1, 9, 1));
  CHECK(segs_of("strided(10)", 100, 23, g) == 1 && seg_eq(g[0], 3, 10, 10, 1));
  CHECK(segs_of("strided(1)", 100, 23, g) == 1 && seg_eq(g[0], 0, 1, 100, 1));
  CHECK(segs_of("strided(60)", 100, 70, g) == 1 && seg_eq(g[0], 10, 60, 2, 1));
  CHECK(segs_of("strided(60)", 100, 45, g) == 1 && seg_eq(g[0], 45, 1, 1, 1));
  /* fixed(16,3) row 40, seq 100: runs {13,16,2,3}, own block [32,48), runs 61,77 and
   * the run 93..95 is whole, so one runs segment 61 + 16t, t < 3. */
  CHECK(segs_of("fixed(16,3)", 100, 40, g) == 3 && seg_eq(g[0], 13, 16, 2, 3) &&
        seg_eq(g[1], 32, 1, 16, 1) && seg_eq(g[2], 61, 16, 3, 3));
  /* seq 94 cuts the last run: 93 alone becomes a range. */
  CHECK(segs_of("fixed(16,3)", 94, 40, g) == 4 && seg_eq(g[2], 61, 16, 2, 3) &&
        seg_eq(g[3], 93, 1, 1, 1));
  CHECK(segs_of("longformer(256,64)", 4096, 1000, g) == 2 && seg_eq(g[0], 0, 1, 64, 1) &&
        seg_eq(g[1], 744, 1, 513, 1));
  CHECK(segs_of("longformer(256,64)", 4096, 300, g) == 1 && seg_eq(g[0], 0, 1, 557, 1));
  CHECK(segs_of("strided(64) | window(64)", 4096, 1000, g) == 3 && seg_eq(g[0], 40, 64, 14, 1) &&
        seg_eq(g[1], 936, 1, 129, 1) && seg_eq(g[2], 1128, 64, 47, 1));
  CHECK(segs_of("dilated(2,4) | dilated(3,4)", 100, 50, g) == 1 && seg_eq(g[0], 38, 4, 7, 1));
  CHECK(segs_of("causal & window(5,0)", 100, 50, g) == 1 && seg_eq(g[0], 45, 1, 6, 1));
  CHECK(segs_of("(blocked(8) | global(3)) & causal", 100, 50, g) == 2 && seg_eq(g[0], 0, 1, 3, 1) &&
        seg_eq(g[1], 48, 1, 3, 1));
  CHECK(segs_of("dilated(4,3) & window(6)", 100, 50, g) == 1 && seg_eq(g[0], 44, 3, 5, 1));
  /* Lattices that differ go through bits and still come out exact and compact. */
  CHECK(segs_of("dilated(3,2) | dilated(2,3)", 100, 50, g) == 5);
  CHECK(segs_of("strided(4) & strided(6)", 100, 50, g) == 1 && seg_eq(g[0], 2, 12, 9, 1));
  /* Bigbird rows have at most r + 2 segments. */
  for (int64_t i = 0; i < 4097; i += 61) {
    int n = segs_of("bigbird(16,1,2,3,7)", 4097, i, g);
    CHECKF(n >= 1 && n <= 5, "bigbird row %lld has %d segments", (long long)i, n);
  }
  /* Random blocks that take every candidate: each row sees every column, found without
   * drawing them (the analysis of the whole mask drew 65535 a row before: ~4e9 draws). */
  splat_pattern *every = NULL;
  CHECK(splat_pattern_parse("bigbird(1,0,0,70000,1)", 65536, 0, &every) == SPLAT_OK);
  splat_report rep;
  CHECK(splat_analyze(every, 0, 0, 0, &rep) == SPLAT_OK);
  CHECKF(rep.nnz == (int64_t)65536 * 65536 && rep.rows_by_segments[1] == 65536,
         "nnz %lld, rows of one segment %lld", (long long)rep.nnz,
         (long long)rep.rows_by_segments[1]);
  splat_pattern_destroy(every);
  CHECK(segs_of("bigbird(4,1,1,1000,3)", 97, 60, g) == 1 && seg_eq(g[0], 0, 1, 97, 1));
}

static void test_cap(void) {
  splat_pattern *p = NULL;
  CHECK(splat_pattern_parse("dilated(3,2) | dilated(2,3)", 100, 0, &p) == SPLAT_OK);
  splat__row_eval *e = NULL;
  CHECK(splat__row_eval_create(p, &e) == SPLAT_OK);
  splat__segment g[8];
  CHECK(splat__row_segments(e, 50, g, 8) == 5);
  CHECK(splat__row_segments(e, 50, g, 4) == -1);
  CHECK(splat__row_segments(e, 50, g, 0) == -1);
  splat__row_eval_destroy(e);
  splat_pattern_destroy(p);

  CHECK(splat_pattern_parse("window(2) | global(3)", 100, 0, &p) == SPLAT_OK);
  CHECK(splat__row_eval_create(p, &e) == SPLAT_OK);
  CHECK(splat__row_segments(e, 50, g, 2) == 2);
  CHECK(splat__row_segments(e, 50, g, 1) == -1);
  CHECK(splat__row_segments(e, 1, g, 1) == 1); /* global row: one range */
  splat__row_eval_destroy(e);
  splat_pattern_destroy(p);

  CHECK(splat_pattern_parse("window(-3,1)", 100, 0, &p) == SPLAT_OK);
  CHECK(splat__row_eval_create(p, &e) == SPLAT_OK);
  CHECK(splat__row_segments(e, 50, g, 0) == 0); /* empty row */
  splat__row_eval_destroy(e);
  splat_pattern_destroy(p);
}

/* ---------------------------------------------------------------- random expressions */

/* Leaves usable in random expressions: index into the reference table. */
static const char *const LEAVES[] = {
    "causal",          "window(3)",           "window(2,5)", "window(-2,4)",     "dilated(3,2)",
    "dilated(2,1)",    "dilated(4,7)",        "strided(3)",  "strided(64)",      "fixed(8,0)",
    "fixed(16,3)",     "fixed(7,6)",          "blocked(8)",  "blocked(37)",      "global(3)",
    "longformer(3,2)", "bigbird(4,1,1,2,42)", "dense",       "window(37)",       "strided(97)",
    "dilated(5,100)",  "fixed(4,1)",          "global(0)",   "window(100,-100)",
};
#define N_LEAVES ((int)(sizeof LEAVES / sizeof LEAVES[0]))

typedef struct rexpr {
  int kind; /* 0 leaf, 1 or, 2 and */
  const ref_pattern *leaf;
  int l, r;
} rexpr;

typedef struct rtree {
  rexpr n[64];
  int count;
  char text[2048];
} rtree;

static int build(rtree *t, int depth) {
  int k = t->count++;
  if (depth == 0 || rnd() % 3 == 0) {
    t->n[k].kind = 0;
    t->n[k].leaf = splat_ref_pattern_find(LEAVES[rnd() % N_LEAVES]);
    return k;
  }
  t->n[k].kind = 1 + (int)(rnd() % 2);
  t->n[k].l = build(t, depth - 1);
  t->n[k].r = build(t, depth - 1);
  return k;
}

static void print_tree(const rtree *t, int k, char *buf, size_t cap) {
  const rexpr *e = &t->n[k];
  if (e->kind == 0) {
    strncat(buf, e->leaf->spec, cap - strlen(buf) - 1);
    return;
  }
  strncat(buf, "(", cap - strlen(buf) - 1);
  print_tree(t, e->l, buf, cap);
  strncat(buf, e->kind == 1 ? " | " : " & ", cap - strlen(buf) - 1);
  print_tree(t, e->r, buf, cap);
  strncat(buf, ")", cap - strlen(buf) - 1);
}

static int eval_tree(const rtree *t, int k, int64_t i, int64_t j, int64_t sq, int64_t sk) {
  const rexpr *e = &t->n[k];
  if (e->kind == 0) return e->leaf->contains(e->leaf, i, j, sq, sk);
  if (e->kind == 1) return eval_tree(t, e->l, i, j, sq, sk) || eval_tree(t, e->r, i, j, sq, sk);
  return eval_tree(t, e->l, i, j, sq, sk) && eval_tree(t, e->r, i, j, sq, sk);
}

static int tree_oracle(const void *ctx, int64_t i, int64_t j, int64_t sq, int64_t sk) {
  return eval_tree(ctx, 0, i, j, sq, sk);
}

static void test_random_expressions(void) {
  rng_state = 777;
  for (int it = 0; it < 300; it++) {
    rtree t;
    t.count = 0;
    build(&t, 3);
    t.text[0] = 0;
    print_tree(&t, 0, t.text, sizeof t.text);
    int64_t sq = 50 + (int64_t)(rnd() % 200), sk = rnd() % 2 ? sq : 50 + (int64_t)(rnd() % 200);
    splat_pattern *p = NULL;
    splat_status st = splat_pattern_parse(t.text, sq, sk, &p);
    CHECKF(st == SPLAT_OK, "parse '%s': %s", t.text, splat__thread_error());
    if (st) continue;
    check_rows(t.text, p, tree_oracle, &t, it % 10 == 0);
    splat_pattern_destroy(p);
  }
}

/* ---------------------------------------------------------------- masks */

typedef struct mask_ctx {
  const unsigned char *m;
  int64_t seq_k;
  const ref_pattern *spec; /* NULL: the mask alone */
  int op;                  /* 1 or, 2 and */
} mask_ctx;

static int mask_oracle(const void *ctx, int64_t i, int64_t j, int64_t sq, int64_t sk) {
  const mask_ctx *c = ctx;
  int a = c->m[i * c->seq_k + j] != 0;
  if (!c->spec) return a;
  int b = c->spec->contains(c->spec, i, j, sq, sk);
  return c->op == 1 ? (a || b) : (a && b);
}

/* A random mask with special rows: 0 empty, 1 full, 2 many irregular runs, 3 periodic
 * runs (width 3, stride 7), 4 isolated columns at irregular gaps. */
static unsigned char *random_mask(int64_t sq, int64_t sk, double density, uint8_t one) {
  unsigned char *m = malloc((size_t)(sq * sk));
  for (int64_t i = 0; i < sq; i++) {
    for (int64_t j = 0; j < sk; j++) {
      int v;
      if (i == 0)
        v = 0;
      else if (i == 1)
        v = 1;
      else if (i == 2)
        v = (j * j + 3 * j) % 11 < 4;
      else if (i == 3)
        v = j % 7 < 3;
      else if (i == 4)
        v = (j * 7 + j / 5) % 13 == 0;
      else
        v = (double)(rnd() >> 11) / 9007199254740992.0 < density;
      m[i * sk + j] = v ? one : 0;
    }
  }
  return m;
}

/* Writes m as a .npy file. version 1..3, descr e.g. "|b1", fortran order or not. */
static int write_npy(const char *path, const unsigned char *m, int64_t sq, int64_t sk, int version,
                     const char *descr, int fortran, const char *shape_text) {
  char dict[256];
  char shape[64];
  if (shape_text) {
    snprintf(shape, sizeof shape, "%s", shape_text);
  } else {
    snprintf(shape, sizeof shape, "(%lld, %lld)", (long long)sq, (long long)sk);
  }
  int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr,
                    fortran ? "True" : "False", shape);
  int pre = version == 1 ? 10 : 12;
  int total = pre + dl + 1;
  int pad = (64 - total % 64) % 64;
  int hlen = dl + pad + 1;
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  unsigned char head[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)version, 0};
  if (version == 1) {
    head[8] = (unsigned char)(hlen & 255), head[9] = (unsigned char)(hlen >> 8);
  } else {
    for (int b = 0; b < 4; b++) head[8 + b] = (unsigned char)(hlen >> (8 * b));
  }
  fwrite(head, 1, (size_t)pre, f);
  fwrite(dict, 1, (size_t)dl, f);
  for (int k = 0; k < pad; k++) fputc(' ', f);
  fputc('\n', f);
  if (m) {
    if (!fortran) {
      fwrite(m, 1, (size_t)(sq * sk), f);
    } else {
      for (int64_t j = 0; j < sk; j++)
        for (int64_t i = 0; i < sq; i++) fputc(m[i * sk + j], f);
    }
  }
  fclose(f);
  return 1;
}

static char tmpdir[256];

static void test_masks(void) {
  static const int64_t shapes[][2] = {{64, 64}, {97, 1000}, {1000, 97}, {130, 200}, {1, 1}};
  static const double dens[] = {0.0, 0.02, 0.3, 0.5, 0.97, 1.0};
  static const char *const descrs[] = {"|b1", "|u1", "|i1", "<u1"};
  rng_state = 99;
  int variant = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    for (size_t d = 0; d < sizeof dens / sizeof dens[0]; d++, variant++) {
      const int64_t sq = shapes[s][0], sk = shapes[s][1];
      uint8_t one = (uint8_t)(variant % 3 == 2 ? 0xff : 1); /* int8 -1 counts as visible */
      unsigned char *m = random_mask(sq, sk, dens[d], one);
      mask_ctx ctx = {m, sk, NULL, 0};
      char label[128];
      snprintf(label, sizeof label, "mask density %.2f", dens[d]);
      splat_pattern *p = NULL;
      CHECK(splat_pattern_from_mask(m, sq, sk, &p) == SPLAT_OK);
      if (!p) continue;
      char want_spec[64];
      snprintf(want_spec, sizeof want_spec, "mask(%lldx%lld)", (long long)sq, (long long)sk);
      CHECK(strcmp(splat_pattern_spec(p), want_spec) == 0);
      int maxs = check_rows(label, p, mask_oracle, &ctx, 1);
      if (sq >= 64 && sk >= 64 && dens[d] > 0.1 && dens[d] < 0.9) CHECK(maxs > 8);
      /* the same through a .npy file: every version, dtype and order */
      char path[512];
      snprintf(path, sizeof path, "%s/m%d.npy", tmpdir, variant);
      int version = 1 + variant % 3, fortran = variant % 2;
      const char *descr = descrs[variant % 4];
      CHECK(write_npy(path, m, sq, sk, version, descr, fortran, NULL));
      splat_pattern *pf = NULL;
      splat_status st = splat_pattern_from_npy(path, &pf);
      CHECKF(st == SPLAT_OK, "npy v%d %s fortran=%d: %s", version, descr, fortran,
             splat__thread_error());
      if (pf) {
        snprintf(label, sizeof label, "npy v%d %s fortran=%d", version, descr, fortran);
        check_rows(label, pf, mask_oracle, &ctx, 0);
      }
      /* unions and intersections with specs, through the API and the grammar */
      static const char *const specs[] = {"window(3)", "dilated(3,2) | dilated(2,3)", "strided(3)",
                                          "fixed(16,3)", "causal"};
      for (int k = 0; k < 5; k++) {
        const ref_pattern *rp = splat_ref_pattern_find(specs[k]);
        splat_pattern *q = NULL, *u = NULL, *x = NULL;
        CHECK(splat_pattern_parse(specs[k], sq, sk, &q) == SPLAT_OK);
        CHECK(splat_pattern_union(p, q, &u) == SPLAT_OK);
        CHECK(splat_pattern_intersect(q, p, &x) == SPLAT_OK);
        mask_ctx cu = {m, sk, rp, 1}, cx = {m, sk, rp, 2};
        if (u) {
          snprintf(label, sizeof label, "%s | mask", specs[k]);
          check_rows(label, u, mask_oracle, &cu, k == 0);
        }
        if (x) {
          snprintf(label, sizeof label, "%s & mask", specs[k]);
          check_rows(label, x, mask_oracle, &cx, k == 0);
        }
        if (u && k == 0) {
          char want[96];
          snprintf(want, sizeof want, "mask(%lldx%lld) | window(3,3)", (long long)sq,
                   (long long)sk);
          CHECKF(strcmp(splat_pattern_spec(u), want) == 0, "spec '%s'", splat_pattern_spec(u));
        }
        if (k == 1 && pf) {
          char spec[700];
          snprintf(spec, sizeof spec, "(%s) & mask(\"%s\")", specs[k], path);
          splat_pattern *g = NULL;
          st = splat_pattern_parse(spec, sq, sk, &g);
          CHECKF(st == SPLAT_OK, "%s: %s", spec, splat__thread_error());
          if (g) check_rows("grammar mask", g, mask_oracle, &cx, 0);
          splat_pattern_destroy(g);
        }
        splat_pattern_destroy(q), splat_pattern_destroy(u), splat_pattern_destroy(x);
      }
      splat_pattern_destroy(pf);
      splat_pattern_destroy(p); /* unions above held their own references */
      remove(path);
      free(m);
    }
  }
  /* A union outliving its operands. */
  unsigned char m2[6] = {1, 0, 1, 0, 1, 0};
  splat_pattern *a = NULL, *b = NULL, *u = NULL, *uu = NULL;
  CHECK(splat_pattern_from_mask(m2, 2, 3, &a) == SPLAT_OK);
  CHECK(splat_pattern_parse("causal", 2, 3, &b) == SPLAT_OK);
  CHECK(splat_pattern_union(a, b, &u) == SPLAT_OK);
  CHECK(splat_pattern_intersect(u, u, &uu) == SPLAT_OK);
  splat_pattern_destroy(a), splat_pattern_destroy(b);
  int64_t cols[3], c = 0;
  CHECK(splat_pattern_row(u, 1, cols, 3, &c) == SPLAT_OK && c == 2 && cols[1] == 1);
  CHECK(splat_pattern_row(uu, 0, cols, 3, &c) == SPLAT_OK && c == 2 && cols[0] == 0 &&
        cols[1] == 2);
  CHECKF(strcmp(splat_pattern_spec(uu), "(mask(2x3) | causal) & (mask(2x3) | causal)") == 0,
         "spec '%s'", splat_pattern_spec(uu));
  splat_pattern_destroy(u), splat_pattern_destroy(uu);
}

/* ---------------------------------------------------------------- errors */

static int ends_with_caret(const char *msg, int column) {
  char want[256];
  snprintf(want, sizeof want, "\n  %*s^", column - 1, "");
  size_t lm = strlen(msg), lw = strlen(want);
  return lm >= lw && strcmp(msg + lm - lw, want) == 0;
}

static void test_parse_errors(void) {
  static const struct {
    const char *spec;
    splat_status st;
    int column;
    const char *needle;
  } cases[] = {
      {"window(12 5)", SPLAT_ERR_PARSE, 11, "expected ',' or ')' in the arguments of window"},
      {"", SPLAT_ERR_PARSE, 1, "expected a pattern name or '('"},
      {"   ", SPLAT_ERR_PARSE, 4, "found end of spec"},
      {"windo(3)", SPLAT_ERR_PARSE, 1, "unknown pattern 'windo' (known patterns: dense, causal"},
      {"w\xc3\xafndow(3)", SPLAT_ERR_PARSE, 2, "ASCII letters, digits and '_' (found byte 0xc3)"},
      {"window(3", SPLAT_ERR_PARSE, 9, "expected ',' or ')'"},
      {"window(3))", SPLAT_ERR_PARSE, 10, "unbalanced ')'"},
      {"(window(3)", SPLAT_ERR_PARSE, 11, "expected ')' to close the '(' at column 1"},
      {"window(3) |", SPLAT_ERR_PARSE, 12, "expected a pattern name"},
      {"window(3) || causal", SPLAT_ERR_PARSE, 12, "expected a pattern name"},
      {"causal & & window(2)", SPLAT_ERR_PARSE, 10, "expected a pattern name"},
      {"dilated(3)", SPLAT_ERR_PARSE, 1, "dilated takes 2 arguments (dilated(w,d)), got 1"},
      {"window(1,2,3)", SPLAT_ERR_PARSE, 1, "window takes 1 or 2 arguments"},
      {"dense(3)", SPLAT_ERR_PARSE, 1, "dense takes 0 arguments"},
      {"dilated(3,0)", SPLAT_ERR_PARSE, 11, "dilated: d=0 must be >= 1"},
      {"dilated(-1,2)", SPLAT_ERR_PARSE, 9, "dilated: w=-1 must be >= 0"},
      {"fixed(4,5)", SPLAT_ERR_PARSE, 9, "fixed: c=5 must be <= b=4"},
      {"fixed(4,-1)", SPLAT_ERR_PARSE, 9, "fixed: c=-1 must be >= 0"},
      {"fixed(0,0)", SPLAT_ERR_PARSE, 7, "fixed: b=0 must be >= 1"},
      {"strided(0)", SPLAT_ERR_PARSE, 9, "strided: s=0 must be >= 1"},
      {"blocked(-4)", SPLAT_ERR_PARSE, 9, "blocked: b=-4 must be >= 1"},
      {"global(-1)", SPLAT_ERR_PARSE, 8, "global: g=-1 must be >= 0"},
      {"longformer(3,-2)", SPLAT_ERR_PARSE, 14, "longformer: g=-2 must be >= 0"},
      {"bigbird(0,1,1,1,1)", SPLAT_ERR_PARSE, 9, "bigbird: b=0 must be >= 1"},
      {"bigbird(4,1,1,-2,1)", SPLAT_ERR_PARSE, 15, "bigbird: r=-2 must be >= 0"},
      {"bigbird(4,1,1,2,-1)", SPLAT_ERR_PARSE, 17, "bigbird: seed=-1 must be >= 0"},
      {"bigbird(4,1,1,2,18446744073709551616)", SPLAT_ERR_PARSE, 17, "integer out of range"},
      {"window(a)", SPLAT_ERR_PARSE, 8, "expected an integer in the arguments of window"},
      {"window(3,)", SPLAT_ERR_PARSE, 10, "expected an integer"},
      {"window", SPLAT_ERR_PARSE, 7, "expected '(' after window, as in window(w) or window(l,r)"},
      {"window(9007199254740993)", SPLAT_ERR_PARSE, 8, "magnitude must be <= 2^53"},
      {"\twindow(3) $", SPLAT_ERR_PARSE, 12, "(found '$')"},
      {"causal 3", SPLAT_ERR_PARSE, 8, "expected '|', '&' or end of spec"},
      {"mask(m.npy)", SPLAT_ERR_PARSE, 6, "expected a quoted .npy path"},
      {"mask(\"m.npy", SPLAT_ERR_PARSE, 6, "unterminated string"},
      /* Columns count characters: two-byte UTF-8 sequences before the error. */
      {"mask(\"\xc3\xa9\xc3\xa9.npy\",)", SPLAT_ERR_PARSE, 14, "expected ')' after the path"},
      {"window(3) | mask(\"/nonexistent/dir/x.npy\")", SPLAT_ERR_IO, 13, "cannot open"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    splat_pattern *p = (splat_pattern *)&p; /* must be reset to NULL */
    splat_status st = splat_pattern_parse(cases[k].spec, 100, 0, &p);
    const char *msg = splat_last_error(NULL);
    CHECKF(st == cases[k].st && p == NULL, "'%s': status %d", cases[k].spec, (int)st);
    CHECKF(strstr(msg, cases[k].needle) != NULL, "'%s': message '%s' lacks '%s'", cases[k].spec,
           msg, cases[k].needle);
    char col[32];
    snprintf(col, sizeof col, "at column %d\n", cases[k].column);
    CHECKF(strstr(msg, col) != NULL && ends_with_caret(msg, cases[k].column),
           "'%s': message '%s' should point at column %d", cases[k].spec, msg, cases[k].column);
  }
  /* A long spec shows an excerpt that still points at the right character. */
  char longspec[1024];
  strcpy(longspec, "window(1)");
  for (int k = 0; k < 40; k++) strcat(longspec, " | window(1)");
  strcat(longspec, " | window(1 2)");
  for (int k = 0; k < 10; k++) strcat(longspec, " | window(1)");
  splat_pattern *p = NULL;
  CHECK(splat_pattern_parse(longspec, 100, 0, &p) == SPLAT_ERR_PARSE);
  const char *msg = splat_last_error(NULL);
  const char *bad = strstr(longspec, "1 2)") + 2;
  char col[32];
  snprintf(col, sizeof col, "at column %d\n", (int)(bad - longspec) + 1);
  CHECKF(strstr(msg, col) != NULL, "long spec: '%s'", msg);
  const char *line = strchr(msg, '\n');
  const char *caret = line ? strchr(line + 1, '\n') : NULL;
  if (line && caret) {
    int caret_col = (int)(strlen(caret + 1) - 1);
    CHECKF(caret_col >= 0 && line[1 + caret_col] == '2', "long spec caret under '%c': %s",
           line[1 + caret_col], msg);
  } else {
    CHECK(0);
  }
  /* A long spec of UTF-8 text: the excerpt cuts no character, and the caret stands under
   * the offending character counting characters. */
  char utf8spec[512] = "mask(\"";
  for (int k = 0; k < 150; k++) strcat(utf8spec, "\xc3\xa9"); /* e-acute */
  strcat(utf8spec, ".npy\" x)");
  CHECK(splat_pattern_parse(utf8spec, 100, 0, &p) == SPLAT_ERR_PARSE);
  msg = splat_last_error(NULL);
  snprintf(col, sizeof col, "at column %d\n", 6 + 150 + 6 + 1);
  CHECKF(strstr(msg, col) != NULL, "UTF-8 spec: '%s'", msg);
  line = strchr(msg, '\n');
  caret = line ? strchr(line + 1, '\n') : NULL;
  if (line && caret) {
    const int caret_col = (int)(strlen(caret + 1) - 1) - 2; /* less the indent */
    const unsigned char *c = (const unsigned char *)line + 3;
    int bad_utf8 = (*c & 0xc0) == 0x80;               /* the excerpt starts inside a character */
    for (int k = 0; k < caret_col && *c != '\n'; k++) /* step over caret_col characters */
      for (c++; (*c & 0xc0) == 0x80; c++) {
      }
    CHECKF(!bad_utf8 && *c == 'x', "UTF-8 spec: caret at column %d not under 'x': %s", caret_col,
           msg);
  } else {
    CHECK(0);
  }
  /* Invalid UTF-8 (long runs of continuation bytes, as Latin-1 text gives) around the
   * error: the excerpt stays bounded, the status is the parse error's or the file's. */
  char latin1[2048] = "x";
  memset(latin1 + 1, 0xb0, 1500);
  latin1[1501] = 0;
  CHECK(splat_pattern_parse(latin1, 16, 0, &p) == SPLAT_ERR_PARSE);
  msg = splat_last_error(NULL);
  CHECKF(strlen(msg) < 400 && strstr(msg, "(found byte 0xb0) at column 2\n") != NULL,
         "Latin-1 spec: %.600s", msg);
  char latin1_mask[2048] = "window(1) | mask(\"/nonexistent/";
  const size_t n = strlen(latin1_mask);
  memset(latin1_mask + n, 0xb0, 1200);
  strcpy(latin1_mask + n + 1200, ".npy\")");
  const splat_status st = splat_pattern_parse(latin1_mask, 16, 0, &p);
  CHECKF(st == SPLAT_ERR_IO && strlen(splat_last_error(NULL)) < 800, "%s: %.900s",
         splat_status_name(st), splat_last_error(NULL));
}

static void test_argument_errors(void) {
  splat_pattern *p = NULL, *q = NULL;
  CHECK(splat_pattern_parse("causal", -3, 0, &p) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(splat_last_error(NULL), "splat_pattern_parse: seq_q=-3 must be positive") != NULL);
  CHECK(splat_pattern_parse("causal", 0, 0, &p) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_pattern_parse("causal", SPLAT__MAX_SEQ + 1, 0, &p) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(splat_last_error(NULL), "seq_q=1073741825") != NULL);
  CHECK(splat_pattern_parse("causal", 10, SPLAT__MAX_SEQ + 1, &p) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(splat_last_error(NULL), "seq_k=1073741825") != NULL);
  CHECK(splat_pattern_parse(NULL, 10, 0, &p) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(splat_last_error(NULL), "spec is NULL") != NULL);
  CHECK(splat_pattern_parse("causal", 10, 0, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
  /* seq_k <= 0 means seq_k = seq_q */
  CHECK(splat_pattern_parse("causal", 10, -5, &p) == SPLAT_OK && splat_pattern_seq_k(p) == 10);
  splat_pattern_destroy(p);

  uint8_t m[4] = {1, 0, 0, 1};
  CHECK(splat_pattern_from_mask(NULL, 2, 2, &p) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_pattern_from_mask(m, 0, 2, &p) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(splat_last_error(NULL), "seq_q=0") != NULL);
  CHECK(splat_pattern_from_mask(m, 2, -1, &p) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_pattern_from_mask(m, 2, 2, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_pattern_from_npy(NULL, &p) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_pattern_from_npy("x.npy", NULL) == SPLAT_ERR_INVALID_ARGUMENT);

  CHECK(splat_pattern_from_mask(m, 2, 2, &p) == SPLAT_OK);
  CHECK(splat_pattern_parse("causal", 3, 0, &q) == SPLAT_OK);
  splat_pattern *u = NULL;
  CHECK(splat_pattern_union(p, q, &u) == SPLAT_ERR_INVALID_ARGUMENT && u == NULL);
  CHECK(strstr(splat_last_error(NULL), "a is 2x2 but b is 3x3") != NULL);
  CHECK(splat_pattern_intersect(p, NULL, &u) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_pattern_union(NULL, q, &u) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_pattern_union(p, p, NULL) == SPLAT_ERR_INVALID_ARGUMENT);

  int64_t cols[4], c;
  CHECK(splat_pattern_row(NULL, 0, cols, 4, &c) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_pattern_row(p, 2, cols, 4, &c) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(splat_last_error(NULL), "row=2 must be in 0..1") != NULL);
  CHECK(splat_pattern_row(p, -1, cols, 4, &c) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_pattern_row(p, 0, cols, 4, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_pattern_row(p, 0, NULL, 4, &c) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_pattern_row(p, 0, cols, -1, &c) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_pattern_row(p, 1, cols, 4, &c) == SPLAT_OK && c == 1 && cols[0] == 1);

  splat__row_eval *e = NULL;
  CHECK(splat__row_eval_create(NULL, &e) == SPLAT_ERR_INVALID_ARGUMENT);
  splat__row_eval_destroy(NULL);
  splat_pattern_destroy(NULL);
  CHECK(splat_pattern_seq_q(NULL) == 0 && splat_pattern_seq_k(NULL) == 0);
  CHECK(strcmp(splat_pattern_spec(NULL), "") == 0);
  splat_pattern_destroy(p), splat_pattern_destroy(q);

  /* .npy errors */
  char path[512];
  snprintf(path, sizeof path, "%s/bad.npy", tmpdir);
  CHECK(splat_pattern_from_npy("/nonexistent/dir/x.npy", &p) == SPLAT_ERR_IO && p == NULL);
  CHECK(strstr(splat_last_error(NULL), "cannot open '/nonexistent/dir/x.npy'") != NULL);
  uint8_t data[24] = {0};
  write_npy(path, data, 2, 3, 1, "<f4", 0, NULL);
  CHECK(splat_pattern_from_npy(path, &p) == SPLAT_ERR_UNSUPPORTED);
  CHECK(strstr(splat_last_error(NULL), "dtype '<f4'") != NULL);
  write_npy(path, data, 2, 3, 1, "|b1", 0, "(2, 3, 4)");
  CHECK(splat_pattern_from_npy(path, &p) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(splat_last_error(NULL), "is 3-d, shape (2, 3, 4)") != NULL);
  write_npy(path, data, 2, 3, 1, "|b1", 0, "(6,)");
  CHECK(splat_pattern_from_npy(path, &p) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(splat_last_error(NULL), "must be 2-d") != NULL);
  write_npy(path, data, 2, 3, 1, "|b1", 0, "(2 3)"); /* no comma between the dimensions */
  CHECK(splat_pattern_from_npy(path, &p) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECKF(strstr(splat_last_error(NULL), "malformed 'shape'") != NULL, "%s", splat_last_error(NULL));
  write_npy(path, data, 2, 3, 1, "|b1", 0, "(2, 3), 'shape': (3, 2)"); /* a key twice */
  CHECK(splat_pattern_from_npy(path, &p) == SPLAT_ERR_INVALID_ARGUMENT && p == NULL);
  CHECKF(strstr(splat_last_error(NULL), "'shape' appears more than once") != NULL, "%s",
         splat_last_error(NULL));
  write_npy(path, data, 2, 3, 1, "|b1", 0, "(2, 3), \"descr\": '<f4'"); /* in other quotes */
  CHECK(splat_pattern_from_npy(path, &p) == SPLAT_ERR_INVALID_ARGUMENT && p == NULL);
  CHECKF(strstr(splat_last_error(NULL), "'descr' appears more than once") != NULL, "%s",
         splat_last_error(NULL));
  write_npy(path, data, 2, 3, 1, "|b1", 0, NULL); /* then "False," made "Falsey" in place */
  FILE *fh = fopen(path, "r+b");
  char header[128] = {0};
  CHECK(fh && fread(header, 1, sizeof header - 1, fh) > 0);
  const char *word = strstr(header + 10, "False,"); /* the dict, after the magic and length */
  if (fh && word) {
    fseek(fh, (long)(word - header) + 5, SEEK_SET);
    fputc('y', fh);
  }
  if (fh) fclose(fh);
  CHECK(word != NULL && splat_pattern_from_npy(path, &p) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECKF(strstr(splat_last_error(NULL), "neither True nor False") != NULL, "%s",
         splat_last_error(NULL));
  write_npy(path, NULL, 2, 3, 2, "|u1", 0, NULL); /* header, no data */
  CHECK(splat_pattern_from_npy(path, &p) == SPLAT_ERR_IO);
  CHECK(strstr(splat_last_error(NULL), "truncated") != NULL);
  /* A header of a huge shape over no data: truncated, said before any allocation. */
  write_npy(path, NULL, (int64_t)1 << 30, (int64_t)1 << 30, 1, "|b1", 0, NULL);
  CHECK(splat_pattern_from_npy(path, &p) == SPLAT_ERR_IO && p == NULL);
  CHECKF(strstr(splat_last_error(NULL),
                "truncated: expected 1073741824 x 1073741824 data bytes, it has 0"),
         "%s", splat_last_error(NULL));
  write_npy(path, data, 2, 3, 7, "|u1", 0, NULL);
  CHECK(splat_pattern_from_npy(path, &p) == SPLAT_ERR_UNSUPPORTED);
  FILE *f = fopen(path, "wb");
  fputs("not a numpy file at all", f);
  fclose(f);
  CHECK(splat_pattern_from_npy(path, &p) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(splat_last_error(NULL), "not a valid .npy file") != NULL);
  f = fopen(path, "wb"); /* empty: truncated, as documented (docs/patterns.md) */
  fclose(f);
  CHECK(splat_pattern_from_npy(path, &p) == SPLAT_ERR_IO);
  CHECK(strstr(splat_last_error(NULL), "is truncated: 0 bytes") != NULL);
  CHECK(splat_pattern_from_npy("/", &p) == SPLAT_ERR_IO); /* a directory opens, then says so */
  CHECK(strstr(splat_last_error(NULL), "'/' is a directory") != NULL);
  /* shape mismatch in the grammar */
  write_npy(path, data, 2, 3, 1, "|b1", 1, NULL);
  char spec[600];
  snprintf(spec, sizeof spec, "causal | mask(\"%s\")", path);
  CHECK(splat_pattern_parse(spec, 4, 4, &p) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECKF(strstr(splat_last_error(NULL), "has shape 2x3 but the pattern is 4x4") != NULL &&
             ends_with_caret(splat_last_error(NULL), 10),
         "%s", splat_last_error(NULL));
  CHECK(splat_pattern_parse(spec, 2, 3, &p) == SPLAT_OK);
  splat_pattern_destroy(p);
  remove(path);
}

/* ---------------------------------------------------------------- timing */

static void time_rows(const char *spec, int64_t seq) {
  splat_pattern *p = NULL;
  if (splat_pattern_parse(spec, seq, 0, &p) != SPLAT_OK) {
    CHECK(0);
    return;
  }
  splat__row_eval *e = NULL;
  CHECK(splat__row_eval_create(p, &e) == SPLAT_OK);
  splat__segment g[SPLAT_MAX_SEGMENTS];
  double best = 1e30;
  int64_t total = 0;
  for (int rep = 0; rep < 7; rep++) {
    double t0 = now_ms();
    int64_t segs = 0;
    for (int64_t i = 0; i < seq; i++) segs += splat__row_segments(e, i, g, SPLAT_MAX_SEGMENTS);
    double t = now_ms() - t0;
    if (t < best) best = t;
    total = segs;
  }
  printf(
      "timing: %-32s seq %lld: all rows through splat__row_segments in %.3f ms (best of 7, "
      "%.1f ns/row, %lld segments)\n",
      spec, (long long)seq, best, best * 1e6 / (double)seq, (long long)total);
  splat__row_eval_destroy(e);
  splat_pattern_destroy(p);
}

/* A flat chain of terms is as deep as it is long: its canonical text must not cost the
 * caller's stack a frame per term. Parsed on a thread with a 256 KiB stack (a 50000-term
 * chain took over 2 MiB when the text was written recursively). */
enum { CHAIN_TERMS = 49999 };
typedef struct chain_job {
  const char *spec;
  splat_status parsed, joined;
  int text_ok;
} chain_job;

static void *parse_chain(void *arg) {
  chain_job *job = (chain_job *)arg;
  splat_pattern *p = NULL, *u = NULL;
  job->parsed = splat_pattern_parse(job->spec, 64, 0, &p);
  if (job->parsed == SPLAT_OK) {
    job->text_ok = !strcmp(splat_pattern_spec(p), job->spec);
    job->joined = splat_pattern_intersect(p, p, &u);
  }
  splat_pattern_destroy(u);
  splat_pattern_destroy(p);
  return NULL;
}

static void test_long_chain(void) {
  static const char term[] = "causal | ";
  const size_t tl = sizeof term - 1;
  char *spec = malloc(tl * CHAIN_TERMS + sizeof "window(2,2)");
  CHECK(spec != NULL);
  if (!spec) return;
  for (int t = 0; t < CHAIN_TERMS; t++) memcpy(spec + t * tl, term, tl);
  strcpy(spec + tl * CHAIN_TERMS, "window(2,2)");
  chain_job job = {spec, SPLAT_ERR_INTERNAL, SPLAT_ERR_INTERNAL, 0};
  pthread_attr_t attr;
  pthread_t th;
  CHECK(pthread_attr_init(&attr) == 0);
  CHECK(pthread_attr_setstacksize(&attr, 256 * 1024) == 0);
  CHECK(pthread_create(&th, &attr, parse_chain, &job) == 0 && pthread_join(th, NULL) == 0);
  pthread_attr_destroy(&attr);
  CHECKF(job.parsed == SPLAT_OK, "%s", splat_last_error(NULL));
  CHECK(job.text_ok);
  CHECK(job.joined == SPLAT_OK);
  free(spec);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/splat_test_pattern_XXXXXX");
  if (!mkdtemp(tmpdir)) snprintf(tmpdir, sizeof tmpdir, ".");
  test_segment_forms();
  test_cap();
  test_parse_errors();
  test_long_chain();
  test_argument_errors();
  test_masks();
  test_random_expressions();
  test_reference_table();
  test_row_runs();
  time_rows("longformer(256,64)", 131072);
  time_rows("window(256) | global(64)", 131072);
  time_rows("strided(64) | window(64)", 131072);
  time_rows("bigbird(64,1,2,3,7)", 131072);
  time_rows("fixed(128,16)", 131072);
  rmdir(tmpdir);
  return harness_finish();
}

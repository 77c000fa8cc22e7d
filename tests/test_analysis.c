/* test_analysis.c — ACSR, tile plan and report against brute force: every row's
 * columns (and every ACSR row against row evaluation), every plan expanded back to a
 * count matrix (each mask element exactly once) and its runs against the smallest plan
 * worked out row by row (reference patterns, random and affine synthetic rows), alignment of
 * dilated / strided patterns, report fields, formatting and misuse. Also prints the analysis time
 * of longformer(256,64) at 131072 and tile waste figures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/acsr.h"
#include "analysis/report.h"
#include "analysis/tile_plan.h"
#include "harness.h"
#include "splat.h"
#include "support/reference_patterns.h"

/* ------------------------------------------------------------ brute-force helpers */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static int64_t rnd_in(int64_t lo, int64_t hi) {
  return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

/* The truth of a test case: a dense uint8 matrix. */
typedef struct dense_mask {
  int64_t sq, sk;
  uint8_t *m;
} dense_mask;

static dense_mask dense_from_ref(const ref_pattern *r, int64_t sq, int64_t sk) {
  dense_mask d = {sq, sk, calloc((size_t)(sq * sk > 0 ? sq * sk : 1), 1)};
  for (int64_t i = 0; i < sq; i++)
    for (int64_t j = 0; j < sk; j++) d.m[i * sk + j] = (uint8_t)(r->contains(r, i, j, sq, sk) != 0);
  return d;
}

/* Own containment check (independent of src/pattern). */
static int seg_has(splat__segment s, int64_t j) {
  if (j < s.start) return 0;
  const int64_t d = j - s.start;
  const int64_t t = s.stride > 0 ? d / s.stride : 0, u = s.stride > 0 ? d % s.stride : d;
  return t < s.count && u < s.width;
}

static int same_group(splat__key_group a, splat__key_group b) {
  return a.phase == b.phase && a.stride == b.stride && a.width == b.width;
}

/* ------------------------------------------------------------ ACSR exactness */

/* Compares ACSR rows with the dense truth; returns 1 when all match. */
static int check_acsr_exact(const splat__acsr *a, const dense_mask *d, const char *what) {
  int ok = 1;
  int32_t *cols = malloc((size_t)(a->width > 0 ? a->width : 1) * sizeof *cols);
  int64_t nnz = 0, w = 0, irr = 0, nseg = 0;
  for (int64_t i = 0; i < d->sq && ok; i++) {
    int64_t bn = 0;
    for (int64_t j = 0; j < d->sk; j++) bn += d->m[i * d->sk + j];
    nnz += bn;
    if (bn > w) w = bn;
    const int64_t n = splat__acsr_row_nnz(a, i);
    if (n != bn) {
      fprintf(stderr, "  %s: row %lld nnz %lld, brute %lld\n", what, (long long)i, (long long)n,
              (long long)bn);
      ok = 0;
      break;
    }
    const int64_t n2 = splat__acsr_row_columns(a, i, cols);
    int64_t k = 0;
    for (int64_t j = 0; j < d->sk && ok; j++) {
      if (!d->m[i * d->sk + j]) continue;
      if (k >= n2 || cols[k] != j) {
        fprintf(stderr, "  %s: row %lld column #%lld is %d, brute %lld\n", what, (long long)i,
                (long long)k, k < n2 ? cols[k] : -1, (long long)j);
        ok = 0;
      }
      k++;
    }
    if (splat__acsr_row_irregular(a, i)) {
      irr++;
      if (a->row_seg[i + 1] != a->row_seg[i]) ok = 0;
    } else {
      const int64_t ns = a->row_seg[i + 1] - a->row_seg[i];
      if (ns > a->max_segments) ok = 0;
      nseg += ns;
      /* segments sorted with disjoint increasing spans */
      for (int64_t s = a->row_seg[i]; s + 1 < a->row_seg[i + 1]; s++)
        if (splat__segment_last(a->segs[s]) >= a->segs[s + 1].start) ok = 0;
    }
  }
  if (ok && (a->nnz != nnz || a->width != (w > 0 ? w : 1) || a->rem_rows != irr)) {
    fprintf(stderr, "  %s: nnz %lld/%lld W %lld/%lld irregular %lld/%lld\n", what,
            (long long)a->nnz, (long long)nnz, (long long)a->width, (long long)w,
            (long long)a->rem_rows, (long long)irr);
    ok = 0;
  }
  free(cols);
  return ok;
}

/* ------------------------------------------------------------ plan exactness */

/* Checks the plan's structure and adds how often it computes each (row, key) of the mask
 * to cnt ([seq_q x seq_k]); returns 1 when the structure is sound. */
static int count_plan(const splat__acsr *a, const splat__tile_plan *t, uint8_t *cnt,
                      const char *what) {
  const int64_t sq = a->seq_q, sk = a->seq_k;
  int ok = 1;
  /* perm is a permutation; regular rows first */
  uint8_t *seen = calloc((size_t)(sq > 0 ? sq : 1), 1);
  for (int64_t p = 0; p < sq; p++) {
    const int32_t r = t->perm[p];
    if (r < 0 || r >= sq || seen[r]) ok = 0;
    if (r >= 0 && r < sq) seen[r] = 1;
    if ((p < t->regular_rows) != !splat__acsr_row_irregular(a, r)) ok = 0;
  }
  free(seen);
  if (!ok) {
    fprintf(stderr, "  %s: perm is not a valid permutation\n", what);
    return 0;
  }
  int identity = 1;
  for (int64_t p = 0; p < sq; p++) identity &= t->perm[p] == p;
  if (identity == t->permuted) {
    fprintf(stderr, "  %s: permuted=%d but perm identity=%d\n", what, t->permuted, identity);
    ok = 0;
  }
  int64_t next_row = 0, tiles_full = 0, tiles_pred = 0;
  for (int64_t q = 0; q < t->ntiles && ok; q++) {
    const splat__query_tile *qt = &t->tiles[q];
    if (qt->row_begin != next_row || qt->nrows < 1 || qt->nrows > t->tile_q) ok = 0;
    next_row = qt->row_begin + qt->nrows;
    if (q > 0 && qt->run_begin != t->tiles[q - 1].run_begin + t->tiles[q - 1].nruns) ok = 0;
    for (int64_t ri = qt->run_begin; ri < qt->run_begin + qt->nruns && ok; ri++) {
      const splat__key_run run = t->runs[ri];
      if (run.ntiles < 1) ok = 0;
      if (run.predicate)
        tiles_pred += run.ntiles;
      else
        tiles_full += run.ntiles;
      for (int64_t g = run.base; g < run.base + (int64_t)run.ntiles * t->tile_k; g++) {
        const int64_t key = splat__group_key(run.group, g);
        for (int32_t r = 0; r < qt->nrows; r++) {
          const int64_t row = t->perm[qt->row_begin + r];
          if (!run.predicate) {
            if (key >= sk || key < 0) {
              fprintf(stderr, "  %s: full run reaches key %lld >= seq_k %lld\n", what,
                      (long long)key, (long long)sk);
              ok = 0;
              break;
            }
            cnt[row * sk + key]++;
          } else {
            int in = 0;
            for (int64_t s = a->row_seg[row]; s < a->row_seg[row + 1]; s++)
              if (same_group(splat__segment_group(a->segs[s]), run.group) &&
                  seg_has(a->segs[s], key))
                in = 1;
            if (in) cnt[row * sk + key]++;
          }
        }
      }
    }
  }
  if (ok && next_row != t->regular_rows) {
    fprintf(stderr, "  %s: tiles cover %lld rows of %lld regular\n", what, (long long)next_row,
            (long long)t->regular_rows);
    ok = 0;
  }
  if (ok && (tiles_full != t->full_tiles || tiles_pred != t->predicated_tiles ||
             t->computed != (tiles_full + tiles_pred) * t->tile_q * t->tile_k)) {
    fprintf(stderr, "  %s: tile counts disagree\n", what);
    ok = 0;
  }
  return ok;
}

/* Whether cnt holds every (row, key) of the regular rows of the truth exactly once and
 * nothing else (the truth given as a function of (row, key) through the ACSR itself when
 * d is NULL). */
static int counts_exact(const splat__acsr *a, const uint8_t *cnt, const dense_mask *d,
                        const char *what) {
  const int64_t sq = a->seq_q, sk = a->seq_k;
  int ok = 1;
  for (int64_t i = 0; i < sq && ok; i++) {
    const int reg = !splat__acsr_row_irregular(a, i);
    for (int64_t j = 0; j < sk; j++) {
      int want;
      if (d) {
        want = reg ? d->m[i * sk + j] : 0;
      } else {
        want = 0;
        for (int64_t s = a->row_seg[i]; s < a->row_seg[i + 1]; s++) want |= seg_has(a->segs[s], j);
      }
      if (cnt[i * sk + j] != want) {
        fprintf(stderr, "  %s: element (%lld,%lld) counted %d times, want %d\n", what, (long long)i,
                (long long)j, cnt[i * sk + j], want);
        ok = 0;
        break;
      }
    }
  }
  return ok;
}

/* Expands the plan into counts and compares with the regular rows of the truth (d, or
 * the ACSR itself when d is NULL). */
static int check_plan_exact(const splat__acsr *a, const splat__tile_plan *t, const dense_mask *d,
                            const char *what) {
  uint8_t *cnt = calloc((size_t)(a->seq_q * a->seq_k > 0 ? a->seq_q * a->seq_k : 1), 1);
  const int ok = cnt && count_plan(a, t, cnt, what) && counts_exact(a, cnt, d, what);
  free(cnt);
  return ok;
}

/* Gathered interval [*x, *y] of segment s in its group (independent of the library). */
static void gathered(splat__segment s, int64_t *x, int64_t *y) {
  *x = s.stride > 1 ? (int64_t)(s.start / s.stride) * s.width : s.start;
  *y = *x + (int64_t)s.count * s.width - 1;
}

/* The plan's runs, tile by tile, against the smallest plan worked out row by row: per
 * tile, its groups in (stride, phase, width) order; per group, from the lowest gathered
 * index of its rows' segments, every key tile a row's segment touches, full when every
 * row has a segment wholly containing it; consecutive tiles alike as one run. */
static int plan_runs_minimal(const splat__acsr *a, const splat__tile_plan *t, const char *what) {
  const int64_t tk = t->tile_k;
  for (int64_t q = 0; q < t->ntiles; q++) {
    const splat__query_tile *qt = &t->tiles[q];
    int64_t ri = qt->run_begin, ri_end = qt->run_begin + qt->nruns;
    splat__key_group prev = {0, 0, 0};
    for (;;) { /* the next group after prev, in plan order */
      splat__key_group g = {0, 0, 0};
      int have = 0;
      int64_t lo = INT64_MAX, hi = -1;
      for (int32_t r = 0; r < qt->nrows; r++) {
        const int64_t row = t->perm[qt->row_begin + r];
        for (int64_t si = a->row_seg[row]; si < a->row_seg[row + 1]; si++) {
          const splat__key_group h = splat__segment_group(a->segs[si]);
          const int after =
              prev.stride == 0 || h.stride > prev.stride ||
              (h.stride == prev.stride &&
               (h.phase > prev.phase || (h.phase == prev.phase && h.width > prev.width)));
          const int before = !have || h.stride < g.stride ||
                             (h.stride == g.stride &&
                              (h.phase < g.phase || (h.phase == g.phase && h.width < g.width)));
          if (after && before) g = h, have = 1;
        }
      }
      if (!have) break;
      for (int32_t r = 0; r < qt->nrows; r++) {
        const int64_t row = t->perm[qt->row_begin + r];
        for (int64_t si = a->row_seg[row]; si < a->row_seg[row + 1]; si++) {
          if (!same_group(splat__segment_group(a->segs[si]), g)) continue;
          int64_t x, y;
          gathered(a->segs[si], &x, &y);
          if (x < lo) lo = x;
          if (y > hi) hi = y;
        }
      }
      int64_t run_tile = -1, run_n = 0, run_pred = 0;
      for (int64_t kt = 0; kt <= (hi - lo) / tk + 1; kt++) {
        const int64_t k0 = lo + kt * tk, k1 = k0 + tk - 1;
        int touched = 0, full_rows = 0;
        for (int32_t r = 0; r < qt->nrows && kt <= (hi - lo) / tk; r++) {
          const int64_t row = t->perm[qt->row_begin + r];
          for (int64_t si = a->row_seg[row]; si < a->row_seg[row + 1]; si++) {
            if (!same_group(splat__segment_group(a->segs[si]), g)) continue;
            int64_t x, y;
            gathered(a->segs[si], &x, &y);
            touched |= x <= k1 && y >= k0;
            full_rows += x <= k0 && y >= k1;
          }
        }
        const int pred = full_rows != qt->nrows;
        if (run_n > 0 && (!touched || pred != run_pred)) { /* the run ends: compare */
          const splat__key_run want = {g, (int32_t)(lo + run_tile * tk), (int32_t)run_n,
                                       (int32_t)run_pred};
          if (ri >= ri_end || !same_group(t->runs[ri].group, want.group) ||
              t->runs[ri].base != want.base || t->runs[ri].ntiles != want.ntiles ||
              t->runs[ri].predicate != want.predicate) {
            fprintf(stderr,
                    "  %s: tile %lld: run #%lld is not (group %d/%d/%d base %d, %d tiles, "
                    "predicate %d)\n",
                    what, (long long)q, (long long)(ri - qt->run_begin), g.phase, g.stride, g.width,
                    want.base, want.ntiles, want.predicate);
            return 0;
          }
          ri++;
          run_n = 0;
        }
        if (touched && run_n == 0) run_tile = kt, run_pred = pred;
        if (touched) run_n++;
      }
      prev = g;
    }
    if (ri != ri_end) {
      fprintf(stderr, "  %s: tile %lld has %lld runs more than the smallest plan\n", what,
              (long long)q, (long long)(ri_end - ri));
      return 0;
    }
  }
  return 1;
}

/* The two-pass plans of the fused attention (splat__tile_plan_passes): when chosen, both
 * passes' tiles together compute every (row, key) of the mask exactly once, each pass
 * covers every regular row, and they compute at most 3/4 of the single plan. Returns 1
 * when two passes were chosen. */
static int check_passes(const splat__acsr *a, const splat__tile_plan *single, const dense_mask *d,
                        const char *what) {
  splat__tile_plan pass[2];
  splat__acsr part[2];
  int np = -1;
  CHECKF(splat__tile_plan_passes(a, single, pass, part, &np) == SPLAT_OK && (np == 0 || np == 2),
         "%s: passes failed", what);
  if (np != 2) return 0;
  uint8_t *cnt = calloc((size_t)(a->seq_q * a->seq_k > 0 ? a->seq_q * a->seq_k : 1), 1);
  char w[340];
  int ok = cnt != NULL;
  for (int k = 0; k < 2 && ok; k++) {
    /* Each pass's predicates follow its own ACSR: contiguous segments in pass 0, strided
     * ones in pass 1, at most K a row, in order of their first keys. */
    for (int64_t x = 0; x < part[k].row_seg[a->seq_q]; x++) {
      CHECKF((part[k].segs[x].stride > 1) == (k == 1), "%s: pass %d has a segment of stride %d",
             what, k, part[k].segs[x].stride);
    }
    for (int64_t i = 0; i < a->seq_q; i++) {
      const int64_t b = part[k].row_seg[i], e = part[k].row_seg[i + 1];
      CHECKF(e - b <= a->max_segments, "%s: pass %d row %lld has %lld segments", what, k,
             (long long)i, (long long)(e - b));
      for (int64_t x = b + 1; x < e; x++) {
        CHECKF(part[k].segs[x].start > part[k].segs[x - 1].start,
               "%s: pass %d row %lld: segments out of order", what, k, (long long)i);
      }
    }
    snprintf(w, sizeof w, "%s pass %d", what, k);
    ok = count_plan(&part[k], &pass[k], cnt, w);
  }
  snprintf(w, sizeof w, "%s two passes", what);
  CHECKF(ok && counts_exact(a, cnt, d, w), "%s: two passes not exact", what);
  CHECKF(4 * (pass[0].computed + pass[1].computed) <= 3 * single->computed,
         "%s: two passes compute %lld, the single plan %lld", what,
         (long long)(pass[0].computed + pass[1].computed), (long long)single->computed);
  free(cnt);
  for (int k = 0; k < 2; k++) {
    splat__tile_plan_free(&pass[k]);
    splat__pass_acsr_free(&part[k]);
  }
  return 1;
}

static const int tile_shapes[][2] = {{128, 128}, {64, 128}, {16, 16}, {7, 5}};
static int two_pass_plans; /* reference plans for which two passes were chosen */
static int cut_plans;      /* reference plans that a cut at the rows' stretches changes */
#define NSHAPES ((int)(sizeof tile_shapes / sizeof tile_shapes[0]))

/* Full check of one reference pattern at one shape. */
static void check_ref(const ref_pattern *r, int64_t sq, int64_t sk, int plan_shapes) {
  char what[256];
  splat_pattern *p = NULL;
  splat_status st = splat_pattern_parse(r->spec, sq, sk, &p);
  CHECKF(st == SPLAT_OK, "parse '%s': %s", r->spec, splat_last_error(NULL));
  if (st != SPLAT_OK) return;
  dense_mask d = dense_from_ref(r, sq, sk);
  const int ks[] = {SPLAT_MAX_SEGMENTS, 1, 2};
  for (int ki = 0; ki < 3; ki++) {
    splat__acsr a;
    snprintf(what, sizeof what, "'%s' %lldx%lld K=%d", r->spec, (long long)sq, (long long)sk,
             ks[ki]);
    st = splat__acsr_build(p, ks[ki], &a);
    CHECKF(st == SPLAT_OK, "%s: acsr build failed: %s", what, splat_last_error(NULL));
    if (st != SPLAT_OK) continue;
    CHECKF(check_acsr_exact(&a, &d, what), "%s: ACSR not exact", what);
    const int nshape = ki == 0 ? plan_shapes : (plan_shapes > 0 ? 1 : 0);
    for (int sh = 0; sh < nshape; sh++) {
      splat__tile_plan t;
      char w2[300];
      snprintf(w2, sizeof w2, "%s tile %dx%d", what, tile_shapes[sh][0], tile_shapes[sh][1]);
      st = splat__tile_plan_build(&a, tile_shapes[sh][0], tile_shapes[sh][1], &t);
      CHECKF(st == SPLAT_OK, "%s: plan failed: %s", w2, splat_last_error(NULL));
      if (st != SPLAT_OK) continue;
      CHECKF(check_plan_exact(&a, &t, &d, w2), "%s: plan not exact", w2);
      CHECKF(plan_runs_minimal(&a, &t, w2), "%s: runs are not the smallest plan's", w2);
      two_pass_plans += check_passes(&a, &t, &d, w2);
      /* The plan cut at the rows' stretches, where it differs: exact and minimal too. */
      splat__tile_plan tc;
      int made = 0;
      CHECKF(splat__tile_plan_build_cut(&a, tile_shapes[sh][0], tile_shapes[sh][1], &tc, &made) ==
                 SPLAT_OK,
             "%s: cut plan failed: %s", w2, splat_last_error(NULL));
      if (made) {
        cut_plans++;
        CHECKF(check_plan_exact(&a, &tc, &d, w2) && plan_runs_minimal(&a, &tc, w2),
               "%s: the cut plan is not exact or not minimal", w2);
        splat__tile_plan_free(&tc);
      }
      /* Histogram and totals of the report. */
      splat_report rep;
      st = splat__report_build(&a, &t, &rep);
      CHECK(st == SPLAT_OK);
      int64_t hsum = 0;
      for (int s = 0; s <= a.max_segments + 1; s++) hsum += rep.rows_by_segments[s];
      CHECKF(hsum == sq && rep.rows_by_segments[a.max_segments + 1] == a.rem_rows &&
                 rep.nnz == a.nnz && rep.max_row_nnz == (a.nnz > 0 ? a.width : 0),
             "%s: report histogram/totals", w2);
      CHECKF(rep.row_width == (a.width >= 128 ? (a.width + 15) / 16 * 16 : a.width),
             "%s: row width %lld for rows of at most %lld", w2, (long long)rep.row_width,
             (long long)a.width);
      splat__tile_plan_free(&t);
    }
    splat__acsr_free(&a);
  }
  free(d.m);
  splat_pattern_destroy(p);
}

static void test_reference_patterns(void) {
  const int64_t shapes[][2] = {{1, 1},     {2, 2},     {97, 97},    {1000, 1000},
                               {97, 1000}, {1000, 97}, {4097, 4097}};
  for (int i = 0; i < splat_ref_pattern_count; i++) {
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      /* Plans at 4097 are expanded for the first tile shape only (time). */
      const int nplan = shapes[s][0] == 4097 ? 1 : NSHAPES;
      check_ref(&splat_ref_patterns[i], shapes[s][0], shapes[s][1], nplan);
    }
  }
  /* strided | window mixes at least must take two passes. */
  CHECKF(two_pass_plans > 0, "no reference plan took two passes");
  printf("two-pass attention plans: %d of the reference plans\n", two_pass_plans);
  CHECKF(cut_plans > 0, "no reference plan was cut at its rows' stretches");
  printf("plans cut at the rows' stretches: %d of the reference plans\n", cut_plans);
}

/* Query tiles cut at the rows' stretches (splat__tile_plan_build_cut): blocked(512) on
 * 192-row tiles gets 192, 192 and 128 rows a block, every tile inside one block and full,
 * where tiles laid from row 0 straddle blocks and are predicated; a block that ends early
 * (seq 1000) its own shorter tile. Nothing where no stretch edge falls inside a tile:
 * windows (no two rows alike), blocks that 192 divides, blocks on 128-row tiles; nor for
 * patterns with strided segments (their rows may be regrouped). */
static void test_cut_tiles(void) {
  static const struct {
    const char *spec;
    int64_t seq;
    int tile_q, made;
    int32_t rows[6]; /* the first tiles' rows (0: not checked) */
  } cases[] = {{"blocked(512)", 4096, 192, 1, {192, 192, 128, 192, 192, 128}},
               {"blocked(512)", 1000, 192, 1, {192, 192, 128, 192, 192, 104}},
               {"blocked(1024)", 4096, 192, 1, {192, 192, 192, 192, 192, 64}},
               /* many blocks: the bounds' buffer grows (15 and 31 cuts) */
               {"blocked(512)", 8192, 192, 1, {192, 192, 128, 192, 192, 128}},
               {"blocked(512)", 16384, 192, 1, {192, 192, 128, 192, 192, 128}},
               {"blocked(256)", 4096, 192, 1, {192, 64, 192, 64, 192, 64}},
               {"blocked(640)", 65536, 192, 1, {192, 192, 192, 64, 192, 192}},
               {"window(256)", 4096, 192, 0, {0}},
               {"blocked(384)", 4096, 192, 0, {0}},
               {"blocked(512)", 4096, 128, 0, {0}},
               {"strided(64) | window(64)", 4096, 192, 0, {0}},
               {"dilated(256,2)", 4096, 192, 0, {0}},
               {"fixed(256,32)", 4096, 192, 0, {0}}}; /* strided columns: regrouped */
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    splat_pattern *p = NULL;
    splat__acsr a;
    splat__tile_plan plain, cut;
    int made = -1;
    CHECK(splat_pattern_parse(cases[c].spec, cases[c].seq, 0, &p) == SPLAT_OK);
    CHECK(splat__acsr_build(p, SPLAT_MAX_SEGMENTS, &a) == SPLAT_OK);
    CHECK(splat__tile_plan_build(&a, cases[c].tile_q, 128, &plain) == SPLAT_OK);
    CHECK(splat__tile_plan_build_cut(&a, cases[c].tile_q, 128, &cut, &made) == SPLAT_OK);
    CHECKF(made == cases[c].made, "%s at %lld, tiles of %d: made %d", cases[c].spec,
           (long long)cases[c].seq, cases[c].tile_q, made);
    if (made == 1) {
      int rows_ok = 1, inside = 1;
      int64_t covered = 0;
      for (int64_t q = 0; q < cut.ntiles; q++) {
        const splat__query_tile *t = &cut.tiles[q];
        if (q < 6 && t->nrows != cases[c].rows[q]) rows_ok = 0;
        covered += t->nrows;
        /* Its first and last rows have the same segments (one block). */
        const int64_t r0 = cut.perm[t->row_begin], r1 = cut.perm[t->row_begin + t->nrows - 1];
        const int64_t n = a.row_seg[r0 + 1] - a.row_seg[r0];
        if (n != a.row_seg[r1 + 1] - a.row_seg[r1] ||
            memcmp(a.segs + a.row_seg[r0], a.segs + a.row_seg[r1], (size_t)n * sizeof *a.segs))
          inside = 0;
      }
      CHECKF(rows_ok && inside && covered == cases[c].seq && cut.tile_q == cases[c].tile_q,
             "%s at %lld: tiles' rows %d, inside blocks %d, rows covered %lld", cases[c].spec,
             (long long)cases[c].seq, rows_ok, inside, (long long)covered);
      /* Predicated key tiles: none where blocks and keys end at multiples of 128. */
      if (!strncmp(cases[c].spec, "blocked", 7))
        CHECKF(cut.predicated_tiles < plain.predicated_tiles &&
                   (cases[c].seq % 128 || cut.predicated_tiles == 0),
               "%s at %lld: predicated key tiles %lld cut, %lld plain", cases[c].spec,
               (long long)cases[c].seq, (long long)cut.predicated_tiles,
               (long long)plain.predicated_tiles);
      splat__tile_plan_free(&cut);
    } else {
      CHECK(cut.tiles == NULL && cut.ntiles == 0 && cut.perm == NULL);
    }
    splat__tile_plan_free(&plain);
    splat__acsr_free(&a);
    splat_pattern_destroy(p);
  }
}

/* The ACSR build copies rows that repeat an evaluated one (splat__row_run): every row
 * must still be exactly what row evaluation gives, segment for segment, at awkward
 * sizes, shapes and K (irregular rows included). */
static void test_acsr_rows_as_evaluated(void) {
  const int64_t shapes[][2] = {{97, 97},   {1000, 1000}, {4097, 4097},
                               {97, 1000}, {1000, 97},   {4097, 1000}};
  const int ks[] = {SPLAT_MAX_SEGMENTS, 1, 2, 3};
  int64_t bad = 0;
  for (int r = 0; r < splat_ref_pattern_count; r++) {
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
      splat_pattern *p = NULL;
      if (splat_pattern_parse(splat_ref_patterns[r].spec, shapes[sh][0], shapes[sh][1], &p))
        continue;
      splat__row_eval *e = NULL;
      CHECK(splat__row_eval_create(p, &e) == SPLAT_OK);
      for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        splat__acsr a;
        if (splat__acsr_build(p, ks[ki], &a) != SPLAT_OK) {
          bad++;
          continue;
        }
        for (int64_t i = 0; i < a.seq_q; i++) {
          splat__segment g[SPLAT_MAX_SEGMENTS];
          const int n = splat__row_segments(e, i, g, ks[ki]);
          const int64_t have = a.row_seg[i + 1] - a.row_seg[i];
          const int ok = n < 0 ? have == 0 && splat__acsr_row_irregular(&a, i)
                               : have == n && !splat__acsr_row_irregular(&a, i) &&
                                     memcmp(g, a.segs + a.row_seg[i], (size_t)n * sizeof *g) == 0;
          if (!ok && bad++ < 5)
            fprintf(stderr, "  '%s' %lldx%lld K=%d: ACSR row %lld is not the evaluated row\n",
                    splat_ref_patterns[r].spec, (long long)shapes[sh][0], (long long)shapes[sh][1],
                    ks[ki], (long long)i);
        }
        splat__acsr_free(&a);
      }
      splat__row_eval_destroy(e);
      splat_pattern_destroy(p);
    }
  }
  CHECKF(bad == 0, "%lld ACSR rows differ from row evaluation", (long long)bad);
}

/* K = 1 sends rows of two segments to the remainder: the union stays exact. */
static void test_irregular_rows(void) {
  splat_pattern *p = NULL;
  CHECK(splat_pattern_parse("longformer(5,3)", 200, 0, &p) == SPLAT_OK);
  if (!p) return;
  splat__acsr a;
  CHECK(splat__acsr_build(p, 1, &a) == SPLAT_OK);
  CHECKF(a.rem_rows > 0, "longformer(5,3) at K=1 has no irregular rows");
  splat__tile_plan t;
  CHECK(splat__tile_plan_build(&a, 16, 16, &t) == SPLAT_OK);
  CHECK(t.permuted == 0); /* the irregular rows (9..199) already come last */
  CHECK(t.regular_rows == 200 - a.rem_rows);
  CHECK(check_plan_exact(&a, &t, NULL, "longformer K=1"));
  splat_report r;
  CHECK(splat__report_build(&a, &t, &r) == SPLAT_OK);
  CHECK(r.irregular_rows == a.rem_rows && r.rows_by_segments[2] == a.rem_rows);
  CHECK(r.regular_nnz == a.nnz - a.rem_nnz);
  CHECK(r.regular_fraction > 0.0 && r.regular_fraction < 1.0);
  CHECK(r.acsr_bytes == 201 * 4 + r.segments * 16 + 201 * 4 + a.rem_nnz * 4);
  splat__tile_plan_free(&t);
  splat__acsr_free(&a);
  splat_pattern_destroy(p);
}

/* ------------------------------------------------------------ random explicit masks */

static void test_random_masks(void) {
  for (int it = 0; it < 40; it++) {
    const int64_t sq = rnd_in(1, 150), sk = rnd_in(1, 150);
    uint8_t *m = calloc((size_t)(sq * sk), 1);
    const int kind = it % 4;
    for (int64_t i = 0; i < sq; i++) {
      if (kind == 0) { /* random bits */
        for (int64_t j = 0; j < sk; j++) m[i * sk + j] = (rnd() % 5) == 0;
      } else if (kind == 1) { /* a random window per row plus a strided comb */
        const int64_t d = rnd_in(2, 9), lo = rnd_in(0, sk - 1), len = rnd_in(0, 40);
        for (int64_t j = lo; j < lo + len && j < sk; j++) m[i * sk + j] = 1;
        for (int64_t j = i % d; j < sk; j += d) m[i * sk + j] = 1;
      } else if (kind == 2) { /* rows with runs of width w, stride d */
        const int64_t d = rnd_in(2, 12), w = rnd_in(1, d - 1), o = rnd_in(0, d);
        for (int64_t j = o; j < sk; j += d)
          for (int64_t u = 0; u < w && j + u < sk; u++) m[i * sk + j + u] = 1;
      } else { /* empty rows, single dense rows, singles */
        const int64_t c = rnd() % 4;
        if (c == 1)
          for (int64_t j = 0; j < sk; j++) m[i * sk + j] = 1;
        else if (c == 2)
          m[i * sk + rnd_in(0, sk - 1)] = 1;
      }
    }
    splat_pattern *p = NULL;
    CHECK(splat_pattern_from_mask(m, sq, sk, &p) == SPLAT_OK);
    if (p) {
      dense_mask d = {sq, sk, m};
      const int K = (int)rnd_in(1, SPLAT_MAX_SEGMENTS);
      splat__acsr a;
      char what[128];
      snprintf(what, sizeof what, "random mask #%d %lldx%lld K=%d", it, (long long)sq,
               (long long)sk, K);
      CHECK(splat__acsr_build(p, K, &a) == SPLAT_OK);
      CHECKF(check_acsr_exact(&a, &d, what), "%s", what);
      for (int sh = 0; sh < NSHAPES; sh++) {
        splat__tile_plan t;
        CHECK(splat__tile_plan_build(&a, tile_shapes[sh][0], tile_shapes[sh][1], &t) == SPLAT_OK);
        CHECKF(check_plan_exact(&a, &t, &d, what), "%s tile %d", what, sh);
        splat__tile_plan_free(&t);
      }
      splat__acsr_free(&a);
      splat_pattern_destroy(p);
    }
    free(m);
  }
}

/* An empty hand-built ACSR of sq x sk with room for segs_per_row segments a row (no
 * remainder): the tests fill row_seg and segs. */
static splat__acsr synthetic_acsr(int64_t sq, int64_t sk, int segs_per_row) {
  splat__acsr a;
  memset(&a, 0, sizeof a);
  a.seq_q = sq;
  a.seq_k = sk;
  a.max_segments = SPLAT_MAX_SEGMENTS;
  a.row_seg = malloc((size_t)(sq + 1) * sizeof *a.row_seg);
  a.rem_row = calloc((size_t)(sq + 1), sizeof *a.rem_row);
  a.segs = malloc((size_t)(sq * segs_per_row) * sizeof *a.segs);
  return a;
}

/* Finishes a synthetic ACSR (its width from the rows; row_seg complete), then builds its
 * plan in every tile shape and checks it exact and minimal in runs; frees the ACSR. */
static void check_synthetic_plans(splat__acsr *a, const char *kind, int it) {
  a->width = 1;
  for (int64_t i = 0; i < a->seq_q; i++)
    if (splat__acsr_row_nnz(a, i) > a->width) a->width = splat__acsr_row_nnz(a, i);
  for (int sh = 0; sh < NSHAPES; sh++) {
    splat__tile_plan t;
    char what[128];
    snprintf(what, sizeof what, "%s #%d %lldx%lld tile %dx%d", kind, it, (long long)a->seq_q,
             (long long)a->seq_k, tile_shapes[sh][0], tile_shapes[sh][1]);
    CHECK(splat__tile_plan_build(a, tile_shapes[sh][0], tile_shapes[sh][1], &t) == SPLAT_OK);
    CHECKF(check_plan_exact(a, &t, NULL, what), "%s", what);
    CHECKF(plan_runs_minimal(a, &t, what), "%s: runs are not the smallest plan's", what);
    splat__tile_plan_free(&t);
  }
  splat__acsr_free(a);
}

/* Hand-built ACSR with every canonical segment form (runs of width > 1, mixed strides
 * and phases in one tile): the plan alone, against the segments. */
static void test_synthetic_segments(void) {
  for (int it = 0; it < 60; it++) {
    const int64_t sq = rnd_in(1, 300), sk = rnd_in(1, 400);
    splat__acsr a = synthetic_acsr(sq, sk, SPLAT_MAX_SEGMENTS);
    int64_t n = 0;
    /* a few row "styles" so tiles share classes sometimes */
    const int64_t base_d = rnd_in(2, 16);
    for (int64_t i = 0; i < sq; i++) {
      a.row_seg[i] = n;
      int64_t pos = rnd_in(0, 20);
      const int nseg = (int)rnd_in(0, 4);
      for (int s = 0; s < nseg && pos < sk; s++) {
        splat__segment g;
        const int form = (int)(rnd() % 3);
        if (form == 0) {
          const int64_t len = rnd_in(1, 60);
          g = (splat__segment){(int32_t)pos, 1, (int32_t)(pos + len <= sk ? len : sk - pos), 1};
        } else {
          const int64_t d = (rnd() % 2) ? base_d : rnd_in(2, 20);
          const int64_t w = form == 1 ? 1 : rnd_in(1, d - 1);
          const int64_t o = pos + ((rnd() % 2) ? (i % d) : rnd_in(0, d - 1));
          int64_t cnt = rnd_in(2, 30);
          while (cnt >= 2 && o + (cnt - 1) * d + w - 1 >= sk) cnt--;
          if (cnt < 2) break;
          g = (splat__segment){(int32_t)o, (int32_t)d, (int32_t)cnt, (int32_t)w};
        }
        a.segs[n++] = g;
        a.nnz += splat__segment_nnz(g);
        pos = splat__segment_last(g) + 1 + rnd_in(0, 30);
      }
    }
    a.row_seg[sq] = n;
    check_synthetic_plans(&a, "synthetic", it);
  }
}

/* Hand-built ACSR whose rows come in runs where each segment's start and count move by
 * a fixed step a row (forwards or backwards, strided segments by whole strides or not),
 * as the tile plan reads them: the plan against the segments and against the smallest
 * plan worked out row by row. Slot k of a row stays in its own band of columns. */
static void test_affine_rows(void) {
  for (int it = 0; it < 200; it++) {
    const int64_t sq = rnd_in(1, 400), sk = rnd_in(8, 600);
    const int nslot = (int)rnd_in(1, 4);
    const int64_t band = sk / nslot;
    splat__acsr a = synthetic_acsr(sq, sk, nslot);
    int64_t n = 0, left = 0; /* rows left in the current run */
    int64_t o[4], d[4], c[4], w[4], ds[4], dc[4];
    for (int64_t i = 0; i < sq; i++) {
      a.row_seg[i] = n;
      if (left == 0) { /* a new run: each slot's first segment and steps */
        left = rnd_in(1, 150);
        for (int k = 0; k < nslot; k++) {
          d[k] = (rnd() % 2) ? 1 : rnd_in(2, 9);
          w[k] = d[k] > 1 && rnd() % 3 == 0 ? rnd_in(2, d[k]) - 1 : 1;
          o[k] = k * band + rnd_in(0, band / 2);
          c[k] = rnd_in(1, 12);
          const int64_t u = (rnd() % 4 == 0) ? rnd_in(1, 3) : 0; /* extra, off the stride */
          ds[k] = (int64_t)rnd_in(-2, 2) * (d[k] > 1 ? d[k] : rnd_in(0, 70)) + u;
          dc[k] = rnd_in(-2, 2);
        }
      }
      left--;
      for (int k = 0; k < nslot; k++) {
        /* stay a canonical segment inside band k, else this run ends with the row */
        const int64_t cnt = d[k] > 1 && c[k] < 2 ? 2 : c[k];
        if (o[k] < k * band || cnt < 1 || o[k] + (cnt - 1) * d[k] + w[k] > (k + 1) * band) left = 0;
        if (o[k] < k * band) o[k] = k * band;
        int64_t cc = cnt;
        while (cc > 1 && o[k] + (cc - 1) * d[k] + w[k] > (k + 1) * band) cc--;
        if (o[k] + w[k] > (k + 1) * band) continue;
        if (cc < 1 || (d[k] > 1 && cc < 2)) continue;
        const splat__segment g = {(int32_t)o[k], (int32_t)d[k], (int32_t)cc, (int32_t)w[k]};
        a.segs[n++] = g;
        a.nnz += splat__segment_nnz(g);
        o[k] += ds[k];
        c[k] += dc[k];
      }
    }
    a.row_seg[sq] = n;
    check_synthetic_plans(&a, "affine rows", it);
  }
}

/* ------------------------------------------------------------ alignment */

static int analyze_spec(const char *spec, int64_t seq, int tq, int tk, splat_report *r) {
  splat_pattern *p = NULL;
  splat_status st = splat_pattern_parse(spec, seq, 0, &p);
  if (st != SPLAT_OK) {
    fprintf(stderr, "  parse '%s': %s\n", spec, splat_last_error(NULL));
    return 0;
  }
  st = splat_analyze(p, tq, tk, 0, r);
  splat_pattern_destroy(p);
  if (st != SPLAT_OK) fprintf(stderr, "  analyze '%s': %s\n", spec, splat_last_error(NULL));
  return st == SPLAT_OK;
}

static void test_alignment(void) {
  splat_report w, dl, sd, sw;
  if (!analyze_spec("window(64)", 4096, 128, 128, &w) ||
      !analyze_spec("dilated(64,4)", 4096, 128, 128, &dl) ||
      !analyze_spec("strided(16)", 4096, 128, 128, &sd) ||
      !analyze_spec("strided(64) | window(64)", 4096, 128, 128, &sw)) {
    CHECK(0);
    return;
  }
  CHECK(w.rows_permuted == 0);
  CHECK(dl.rows_permuted == 1);
  CHECK(sd.rows_permuted == 1);
  CHECKF(dl.tile_waste <= 1.3 * w.tile_waste, "dilated(64,4) waste %.3f vs window(64) %.3f",
         dl.tile_waste, w.tile_waste);
  CHECKF(sd.tile_waste <= 1.3 * w.tile_waste && sd.tile_waste < 1.5,
         "strided(16) waste %.3f vs window(64) %.3f", sd.tile_waste, w.tile_waste);
  CHECK(sd.full_tiles > 0 && sd.predicated_tiles == 0);
  printf(
      "tile waste at 4096, 128x128: window(64) %.3f, dilated(64,4) %.3f (permuted %d), "
      "strided(16) %.3f (permuted %d), strided(64)|window(64) %.3f (permuted %d)\n",
      w.tile_waste, dl.tile_waste, dl.rows_permuted, sd.tile_waste, sd.rows_permuted, sw.tile_waste,
      sw.rows_permuted);
}

/* ------------------------------------------------------------ report */

static void test_report_bytes(void) {
  const char *specs[] = {"window(3)",        "dilated(20,130)", "strided(200)",
                         "longformer(40,7)", "dense",           "strided(256)"};
  const int64_t sizes[][2] = {{300, 300}, {129, 700}, {700, 129}, {1, 1}};
  for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
      const int64_t sq = sizes[z][0], sk = sizes[z][1];
      splat_pattern *p = NULL;
      if (splat_pattern_parse(specs[s], sq, sk, &p) != SPLAT_OK) {
        CHECKF(0, "parse %s", specs[s]);
        continue;
      }
      for (int K = 1; K <= SPLAT_MAX_SEGMENTS; K += 7) {
        splat_report r;
        CHECK(splat_analyze(p, 0, 0, K, &r) == SPLAT_OK);
        int64_t nnz = 0;
        const int64_t bq = (sq + 127) / 128, bk = (sk + 127) / 128;
        uint8_t *blk = calloc((size_t)(bq * bk), 1);
        int64_t *cols = malloc((size_t)sk * sizeof *cols);
        for (int64_t i = 0; i < sq; i++) {
          int64_t n = 0;
          splat_pattern_row(p, i, cols, sk, &n);
          nnz += n;
          for (int64_t k = 0; k < n; k++) blk[(i / 128) * bk + cols[k] / 128] = 1;
        }
        int64_t blocks = 0;
        for (int64_t b = 0; b < bq * bk; b++) blocks += blk[b];
        CHECKF(r.nnz == nnz, "%s %lldx%lld nnz", specs[s], (long long)sq, (long long)sk);
        CHECK(r.csr_bytes == (sq + 1 + nnz) * 4);
        CHECKF(r.bsr_blocks == blocks, "%s %lldx%lld K=%d: bsr_blocks %lld, brute %lld", specs[s],
               (long long)sq, (long long)sk, K, (long long)r.bsr_blocks, (long long)blocks);
        CHECK(r.bsr_bytes == (bq + 1 + blocks) * 4);
        const int64_t want_acsr =
            (sq + 1) * 4 + r.segments * 16 +
            (r.irregular_rows > 0 ? (sq + 1) * 4 + (nnz - r.regular_nnz) * 4 : 0);
        CHECK(r.acsr_bytes == want_acsr);
        CHECK(r.density == (double)nnz / ((double)sq * (double)sk));
        CHECK(r.regular_fraction == (nnz ? (double)r.regular_nnz / (double)nnz : 1.0));
        CHECK(r.tile_q == 128 && r.tile_k == 128 && r.max_segments == K);
        CHECK(r.tile_waste == (r.regular_nnz ? (double)r.computed / (double)r.regular_nnz : 0.0));
        free(blk);
        free(cols);
      }
      splat_pattern_destroy(p);
    }
  }
  /* An empty mask: regular_fraction 1, waste 0, no tiles computed. */
  uint8_t zero[6 * 5] = {0};
  splat_pattern *p = NULL;
  CHECK(splat_pattern_from_mask(zero, 6, 5, &p) == SPLAT_OK);
  splat_report r;
  CHECK(p && splat_analyze(p, 0, 0, 0, &r) == SPLAT_OK);
  CHECK(r.nnz == 0 && r.regular_fraction == 1.0 && r.tile_waste == 0.0 && r.computed == 0);
  CHECK(r.max_row_nnz == 0 && r.row_width == 1 && r.rows_by_segments[0] == 6 && r.bsr_blocks == 0);
  splat_pattern_destroy(p);
}

static const char *field_names[] = {"seq_q",
                                    "seq_k",
                                    "nnz",
                                    "density",
                                    "max_row_nnz",
                                    "row_width",
                                    "max_segments",
                                    "rows_by_segments",
                                    "segments",
                                    "regular_nnz",
                                    "regular_fraction",
                                    "irregular_rows",
                                    "acsr_bytes",
                                    "csr_bytes",
                                    "bsr_blocks",
                                    "bsr_bytes",
                                    "tile_q",
                                    "tile_k",
                                    "rows_permuted",
                                    "query_tiles",
                                    "key_runs",
                                    "full_tiles",
                                    "predicated_tiles",
                                    "computed",
                                    "tile_waste",
                                    "analysis_ms",
                                    "plan_ms",
                                    "report_ms",
                                    "kernels_ms",
                                    "kernels_compiled",
                                    "device_bytes",
                                    "workspace_bytes"};

static void test_format(void) {
  splat_report r;
  if (!analyze_spec("longformer(16,4)", 1000, 64, 64, &r)) {
    CHECK(0);
    return;
  }
  size_t len = 0;
  CHECK(splat_report_format(&r, 1, NULL, 0, &len) == SPLAT_OK);
  CHECK(len > 0);
  char *js = malloc(len + 1);
  size_t len2 = 0;
  CHECK(splat_report_format(&r, 1, js, len + 1, &len2) == SPLAT_OK);
  CHECK(len2 == len && strlen(js) == len);
  /* one line, balanced braces and brackets, every field name as a key */
  int depth = 0, ok = 1, in_str = 0;
  for (size_t i = 0; i < len; i++) {
    const char c = js[i];
    if (c == '"') in_str = !in_str;
    if (in_str) continue;
    if (c == '{' || c == '[') depth++;
    if (c == '}' || c == ']') depth--;
    if (depth < 0 || c == '\n') ok = 0;
    if (depth == 0 && i + 1 < len) ok = 0; /* one object, nothing after it */
  }
  CHECKF(ok && depth == 0 && js[0] == '{' && js[len - 1] == '}', "bad JSON: %s", js);
  for (size_t f = 0; f < sizeof field_names / sizeof field_names[0]; f++) {
    char key[64];
    snprintf(key, sizeof key, "\"%s\":", field_names[f]);
    CHECKF(strstr(js, key) != NULL, "JSON lacks %s", key);
  }
  CHECK(strstr(js, "nan") == NULL && strstr(js, "inf") == NULL);
  /* rows_by_segments has K + 2 entries */
  const char *h = strstr(js, "\"rows_by_segments\":[");
  if (h) {
    int commas = 0;
    for (const char *c = h; *c && *c != ']'; c++) commas += *c == ',';
    CHECK(commas == r.max_segments + 1);
  }
  free(js);

  /* text: readable, multi-line; a tiny buffer truncates and reports the length */
  CHECK(splat_report_format(&r, 0, NULL, 0, &len) == SPLAT_OK);
  char *txt = malloc(len + 1);
  CHECK(splat_report_format(&r, 0, txt, len + 1, &len2) == SPLAT_OK && len2 == len);
  CHECK(strlen(txt) == len);
  CHECK(strstr(txt, "density") && strstr(txt, "ACSR") && strstr(txt, "CSR") && strstr(txt, "BSR") &&
        strstr(txt, "tile waste") && strstr(txt, "irregular"));
  char tiny[8];
  memset(tiny, 'x', sizeof tiny);
  size_t tl = 0;
  CHECK(splat_report_format(&r, 0, tiny, sizeof tiny, &tl) == SPLAT_OK);
  CHECK(tl == len && tiny[7] == '\0' && strncmp(tiny, txt, 7) == 0);
  char one[1] = {'x'};
  CHECK(splat_report_format(&r, 1, one, 1, NULL) == SPLAT_OK && one[0] == '\0');
  printf("---- report of longformer(16,4) at 1000, tile 64x64 ----\n%s", txt);
  /* an analysis holds no device memory and says none; a CUDA plan's report does */
  CHECK(r.device_bytes == 0 && r.workspace_bytes == 0 && strstr(txt, "device") == NULL &&
        strstr(txt, "workspace") == NULL);
  free(txt);
  r.device_bytes = (int64_t)3 << 20;
  char held[4096];
  CHECK(splat_report_format(&r, 0, held, sizeof held, NULL) == SPLAT_OK);
  CHECKF(strstr(held, "3.00 MiB held by the plan") != NULL && strstr(held, "workspace") == NULL,
         "%s", held);
  CHECK(splat_report_format(&r, 1, held, sizeof held, NULL) == SPLAT_OK);
  CHECKF(strstr(held, "\"device_bytes\":3145728,\"workspace_bytes\":0}") != NULL, "%s", held);
  /* a two-pass plan's: the workspace its calls take */
  r.workspace_bytes = (int64_t)160 << 20;
  CHECK(splat_report_format(&r, 0, held, sizeof held, NULL) == SPLAT_OK);
  CHECKF(strstr(held, "160.00 MiB an attention call takes from the context's pool") != NULL, "%s",
         held);
  CHECK(splat_report_format(&r, 1, held, sizeof held, NULL) == SPLAT_OK);
  CHECKF(strstr(held, "\"workspace_bytes\":167772160}") != NULL, "%s", held);
}

/* ------------------------------------------------------------ misuse */

static void test_misuse(void) {
  splat_pattern *p = NULL;
  CHECK(splat_pattern_parse("window(4)", 64, 0, &p) == SPLAT_OK);
  splat_report r;
  CHECK(splat_analyze(NULL, 0, 0, 0, &r) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_analyze(p, 0, 0, 0, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_analyze(p, -1, 0, 0, &r) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(splat_last_error(NULL), "tile_q") != NULL);
  CHECK(splat_analyze(p, 1025, 0, 0, &r) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(splat_last_error(NULL), "splat_analyze: tile_q=1025") != NULL);
  CHECK(splat_analyze(p, 0, -3, 0, &r) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(splat_last_error(NULL), "tile_k=-3") != NULL);
  CHECK(splat_analyze(p, 0, 2000, 0, &r) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_analyze(p, 0, 0, -1, &r) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(splat_last_error(NULL), "max_segments") != NULL);
  CHECK(splat_analyze(p, 0, 0, SPLAT_MAX_SEGMENTS + 1, &r) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_analyze(p, 1024, 1024, SPLAT_MAX_SEGMENTS, &r) == SPLAT_OK);
  CHECK(splat_analyze(p, 1, 1, 1, &r) == SPLAT_OK);
  CHECK(splat_analyze(p, 0, 0, 0, &r) == SPLAT_OK);
  CHECK(r.tile_q == 128 && r.tile_k == 128 && r.max_segments == SPLAT_MAX_SEGMENTS);
  CHECK(splat_report_format(NULL, 0, NULL, 0, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(splat_last_error(NULL), "splat_report_format: report is NULL") != NULL);
  char buf[4];
  CHECK(splat_report_format(&r, 0, NULL, sizeof buf, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
  splat_report bad = r;
  bad.max_segments = 99;
  CHECK(splat_report_format(&bad, 1, buf, sizeof buf, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
  /* internal entry points */
  splat__acsr a;
  CHECK(splat__acsr_build(NULL, 1, &a) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat__acsr_build(p, SPLAT_MAX_SEGMENTS + 1, &a) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat__acsr_build(p, 2, &a) == SPLAT_OK);
  splat__tile_plan t;
  CHECK(splat__tile_plan_build(&a, -1, 8, &t) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat__tile_plan_build(&a, 8, 1025, &t) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat__tile_plan_build(NULL, 8, 8, &t) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat__report_build(&a, NULL, &r) == SPLAT_ERR_INVALID_ARGUMENT);
  splat__acsr_free(&a);
  splat__acsr_free(NULL);
  splat__tile_plan_free(NULL);
  splat_pattern_destroy(p);
}

/* ------------------------------------------------------------ speed (printed) */

static void test_speed(void) {
  const char *specs[] = {"longformer(256,64)", "window(256)", "dilated(256,2)",
                         "strided(64) | window(64)"};
  for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
    splat_pattern *p = NULL;
    if (splat_pattern_parse(specs[s], 131072, 0, &p) != SPLAT_OK) {
      CHECKF(0, "parse %s: %s", specs[s], splat_last_error(NULL));
      continue;
    }
    double best_a = 1e30, best_p = 1e30, best_r = 1e30;
    splat_report r;
    memset(&r, 0, sizeof r);
    for (int rep = 0; rep < 5; rep++) {
      CHECK(splat_analyze(p, 128, 128, 0, &r) == SPLAT_OK);
      if (r.analysis_ms + r.plan_ms < best_a + best_p) best_a = r.analysis_ms, best_p = r.plan_ms;
      if (r.report_ms < best_r) best_r = r.report_ms;
    }
    printf(
        "speed %-26s seq 131072 tile 128x128: analysis %.3f ms + plan %.3f ms = %.3f ms "
        "(report %.3f ms); waste %.3f, permuted %d, runs %lld\n",
        specs[s], best_a, best_p, best_a + best_p, best_r, r.tile_waste, r.rows_permuted,
        (long long)r.key_runs);
    splat_pattern_destroy(p);
  }
}

/* A pattern whose analysis this machine's memory cannot hold is refused with the sizes
 * named, before any allocation (the kernel would grant it and end the process later).
 * window(3) at 2^30 rows needs ~36.5 GB: checked only where the machine has less than 30. */
static void test_memory_refused(void) {
  const double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
  if (!(have > 0 && have < 30e9)) {
    printf("skipped: test_memory_refused (%.1f GB of memory)\n", have / 1e9);
    return;
  }
  splat_pattern *p = NULL;
  CHECK(splat_pattern_parse("window(3)", (int64_t)1 << 30, 0, &p) == SPLAT_OK);
  splat_report r;
  CHECK(splat_analyze(p, 0, 0, 0, &r) == SPLAT_ERR_OUT_OF_MEMORY);
  CHECK(strstr(splat_last_error(NULL), "1073741824 rows needs about") != NULL);
  splat_pattern_destroy(p);
}

/* ------------------------------------------------------------ row width */

/* W per pattern (docs/format.md "Row width"): the largest row, from 128 entries on rounded up
 * to a multiple of 16. */
static void test_row_width(void) {
  static const struct {
    const char *spec;
    int64_t seq, max_nnz, width;
  } cases[] = {
      {"window(256)", 4096, 513, 528},
      {"window(100)", 4096, 201, 208},
      {"causal & window(512,0)", 4096, 513, 528},
      {"dilated(256,2)", 4096, 513, 528},
      {"blocked(512)", 4096, 512, 512},
      {"longformer(256,64)", 4096, 4096, 4096},
      {"strided(64) | window(64)", 4096, 190, 192},
      {"window(63)", 1000, 127, 127},
      {"window(64)", 1000, 129, 144},
      {"window(3)", 4096, 7, 7},
      {"dense", 97, 97, 97},
      {"window(-1)", 50, 0, 1},
      {"dense", 1000, 1000, 1008},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    splat_report r;
    if (!analyze_spec(cases[c].spec, cases[c].seq, 0, 0, &r)) {
      CHECK(0);
      continue;
    }
    CHECKF(r.max_row_nnz == cases[c].max_nnz && r.row_width == cases[c].width,
           "%s at %lld: largest row %lld, row width %lld; want %lld", cases[c].spec,
           (long long)cases[c].seq, (long long)r.max_row_nnz, (long long)r.row_width,
           (long long)cases[c].width);
  }
}

/* ------------------------------------------------------------ a pass's key tile */

/* strided(64) | window(64): at 4096 each phase class of the strided pass has 64 keys, which
 * half-fill the plan's 128-key tiles: that pass takes 64-key tiles, every run whole (no
 * predicate); at 16384 (256 keys a class) both passes keep 128; plans of tiles that are not
 * a multiple of 128 keys keep theirs (the warp-specialised kernel needs whole 64-key
 * sub-tiles). */
static void test_pass_key_tiles(void) {
  static const struct {
    int64_t seq;
    int plan_k, tile_k[2];
    int64_t strided_predicated;
  } cases[] = {{4096, 128, {128, 64}, 0},
               {16384, 128, {128, 128}, 0},
               {4096, 256, {256, 128}, 64},
               {4096, 192, {192, 192}, 64},
               {4096, 144, {144, 144}, 64}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    splat_pattern *p = NULL;
    splat__acsr a;
    splat__tile_plan single, pass[2];
    splat__acsr part[2];
    int np = 0;
    CHECK(splat_pattern_parse("strided(64) | window(64)", cases[c].seq, 0, &p) == SPLAT_OK);
    CHECK(splat__acsr_build(p, SPLAT_MAX_SEGMENTS, &a) == SPLAT_OK);
    CHECK(splat__tile_plan_build(&a, 128, cases[c].plan_k, &single) == SPLAT_OK);
    CHECK(splat__tile_plan_passes(&a, &single, pass, part, &np) == SPLAT_OK && np == 2);
    if (np == 2) {
      int64_t predicated = 0;
      for (int64_t r = 0; r < pass[1].nruns; r++) predicated += pass[1].runs[r].predicate != 0;
      CHECKF(pass[0].tile_k == cases[c].tile_k[0] && pass[1].tile_k == cases[c].tile_k[1] &&
                 predicated == cases[c].strided_predicated,
             "seq %lld, plan tiles %d: key tiles %d + %d, %lld predicated strided runs; want %d + "
             "%d, %lld",
             (long long)cases[c].seq, cases[c].plan_k, pass[0].tile_k, pass[1].tile_k,
             (long long)predicated, cases[c].tile_k[0], cases[c].tile_k[1],
             (long long)cases[c].strided_predicated);
      for (int k = 0; k < 2; k++) {
        splat__tile_plan_free(&pass[k]);
        splat__pass_acsr_free(&part[k]);
      }
    }
    splat__tile_plan_free(&single);
    splat__acsr_free(&a);
    splat_pattern_destroy(p);
  }
}

int main(void) {
  test_misuse();
  test_memory_refused();
  test_irregular_rows();
  test_synthetic_segments();
  test_affine_rows();
  test_random_masks();
  test_reference_patterns();
  test_acsr_rows_as_evaluated();
  test_alignment();
  test_row_width();
  test_pass_key_tiles();
  test_cut_tiles();
  test_report_bytes();
  test_format();
  test_speed();
  return harness_finish();
}

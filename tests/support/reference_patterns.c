/* reference_patterns.c — brute-force predicates for the spec table in
 * reference_patterns.h, written from the semantics table of docs/patterns.md. */
#include "support/reference_patterns.h"

#include <stdlib.h>
#include <string.h>

/* Floor division and modulo (b > 0). */
static int64_t fdiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && a < 0) q--;
  return q;
}
static int64_t fmod64(int64_t a, int64_t b) {
  return a - fdiv(a, b) * b;
}
static int64_t iabs(int64_t a) {
  return a < 0 ? -a : a;
}

/* ---- the rules, one per spec name */
static int r_window(int64_t i, int64_t j, int64_t l, int64_t r) {
  return i - l <= j && j <= i + r;
}
static int r_dilated(int64_t i, int64_t j, int64_t w, int64_t d) {
  int64_t diff = j - i;
  return fmod64(diff, d) == 0 && iabs(diff / d) <= w;
}
static int r_strided(int64_t i, int64_t j, int64_t s) {
  return fmod64(i - j, s) == 0;
}
static int r_fixed(int64_t i, int64_t j, int64_t b, int64_t c) {
  return fdiv(i, b) == fdiv(j, b) || fmod64(j, b) >= b - c;
}
static int r_blocked(int64_t i, int64_t j, int64_t b) {
  return fdiv(i, b) == fdiv(j, b);
}
static int r_global(int64_t i, int64_t j, int64_t g) {
  return i < g || j < g;
}

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Straight from docs/patterns.md: list the candidate blocks explicitly, run Floyd's
 * algorithm with a linear membership test, mark the chosen candidates. */
static _Thread_local struct {
  int valid;
  int64_t b, w, g, r, qb, seq_k;
  uint64_t seed;
  int64_t nkb;
  unsigned char *chosen; /* [nkb] */
} bb_cache;

int splat_ref_bigbird(int64_t b, int64_t w, int64_t g, int64_t r, uint64_t seed, int64_t i,
                      int64_t j, int64_t seq_k) {
  int64_t qb = fdiv(i, b), kb = fdiv(j, b);
  if (iabs(kb - qb) <= w || kb < g || qb < g) return 1;
  if (!(bb_cache.valid && bb_cache.b == b && bb_cache.w == w && bb_cache.g == g &&
        bb_cache.r == r && bb_cache.seed == seed && bb_cache.qb == qb && bb_cache.seq_k == seq_k)) {
    int64_t nkb = (seq_k + b - 1) / b;
    free(bb_cache.chosen);
    bb_cache.chosen = calloc((size_t)nkb, 1);
    int64_t *cand = malloc((size_t)nkb * sizeof *cand);
    int64_t m = 0;
    for (int64_t c = 0; c < nkb; c++) {
      if (!(c < g || iabs(c - qb) <= w)) cand[m++] = c;
    }
    int64_t k = r < m ? r : m;
    int64_t *sel = malloc((size_t)(k > 0 ? k : 1) * sizeof *sel);
    int64_t ns = 0;
    uint64_t state = seed ^ ((uint64_t)qb * 0xD1342543DE82EF95ull);
    for (int64_t jj = m - k; jj < m; jj++) {
      int64_t t = (int64_t)(splitmix64(&state) % (uint64_t)(jj + 1));
      int seen = 0;
      for (int64_t q = 0; q < ns; q++) seen |= sel[q] == t;
      sel[ns++] = seen ? jj : t;
    }
    for (int64_t q = 0; q < ns; q++) bb_cache.chosen[cand[sel[q]]] = 1;
    free(cand);
    free(sel);
    bb_cache.valid = 1;
    bb_cache.b = b, bb_cache.w = w, bb_cache.g = g, bb_cache.r = r, bb_cache.seed = seed;
    bb_cache.qb = qb, bb_cache.seq_k = seq_k, bb_cache.nkb = nkb;
  }
  return kb < bb_cache.nkb && bb_cache.chosen[kb];
}

/* ---- predicates of the table (arguments in p->a, in spec order) */
#define PRED(name) \
  static int name(const ref_pattern *p, int64_t i, int64_t j, int64_t seq_q, int64_t seq_k)
#define UNUSED (void)p, (void)i, (void)j, (void)seq_q, (void)seq_k
#define A p->a

PRED(p_dense) {
  UNUSED;
  return 1;
}
PRED(p_causal) {
  UNUSED;
  return j <= i;
}
PRED(p_window) {
  UNUSED;
  return r_window(i, j, A[0], A[1]);
}
PRED(p_dilated) {
  UNUSED;
  return r_dilated(i, j, A[0], A[1]);
}
PRED(p_strided) {
  UNUSED;
  return r_strided(i, j, A[0]);
}
PRED(p_fixed) {
  UNUSED;
  return r_fixed(i, j, A[0], A[1]);
}
PRED(p_blocked) {
  UNUSED;
  return r_blocked(i, j, A[0]);
}
PRED(p_global) {
  UNUSED;
  return r_global(i, j, A[0]);
}
PRED(p_longformer) {
  UNUSED;
  return r_window(i, j, A[0], A[0]) || r_global(i, j, A[1]);
}
PRED(p_bigbird) {
  UNUSED;
  return splat_ref_bigbird(A[0], A[1], A[2], A[3], (uint64_t)A[4], i, j, seq_k);
}
/* combinations */
PRED(p_strided_or_window) {
  UNUSED;
  return r_strided(i, j, A[0]) || r_window(i, j, A[1], A[1]);
}
PRED(p_causal_and_window) {
  UNUSED;
  return j <= i && r_window(i, j, A[0], A[1]);
}
PRED(p_dil_or_dil) {
  UNUSED;
  return r_dilated(i, j, A[0], A[1]) || r_dilated(i, j, A[2], A[3]);
}
PRED(p_dil_and_dil) {
  UNUSED;
  return r_dilated(i, j, A[0], A[1]) && r_dilated(i, j, A[2], A[3]);
}
PRED(p_blocked_or_global_and_causal) {
  UNUSED;
  return (r_blocked(i, j, A[0]) || r_global(i, j, A[1])) && j <= i;
}
PRED(p_window_and_strided) {
  UNUSED;
  return r_window(i, j, A[0], A[0]) && r_strided(i, j, A[1]);
}
PRED(p_fixed_or_window) {
  UNUSED;
  return r_fixed(i, j, A[0], A[1]) || r_window(i, j, A[2], A[2]);
}
PRED(p_dilated_and_window) {
  UNUSED;
  return r_dilated(i, j, A[0], A[1]) && r_window(i, j, A[2], A[2]);
}
PRED(p_strided_and_strided) {
  UNUSED;
  return r_strided(i, j, A[0]) && r_strided(i, j, A[1]);
}
PRED(p_strided_or_strided) {
  UNUSED;
  return r_strided(i, j, A[0]) || r_strided(i, j, A[1]);
}
PRED(p_global_or_window_or_strided) {
  UNUSED;
  return r_global(i, j, A[0]) || r_window(i, j, A[1], A[1]) || r_strided(i, j, A[2]);
}
PRED(p_blocked_and_dilated) {
  UNUSED;
  return r_blocked(i, j, A[0]) && r_dilated(i, j, A[1], A[2]);
}
PRED(p_bigbird_and_causal) {
  UNUSED;
  return splat_ref_bigbird(A[0], A[1], A[2], A[3], (uint64_t)A[4], i, j, seq_k) && j <= i;
}
PRED(p_longformer_and_strided) {
  UNUSED;
  return (r_window(i, j, A[0], A[0]) || r_global(i, j, A[1])) && r_strided(i, j, A[2]);
}
PRED(p_fixed_and_fixed) {
  UNUSED;
  return r_fixed(i, j, A[0], A[1]) && r_fixed(i, j, A[2], A[3]);
}
PRED(p_fixed_or_fixed) {
  UNUSED;
  return r_fixed(i, j, A[0], A[1]) || r_fixed(i, j, A[2], A[3]);
}
PRED(p_window_or_window) {
  UNUSED;
  return r_window(i, j, A[0], A[1]) || r_window(i, j, A[2], A[3]);
}
PRED(p_window_and_window) {
  UNUSED;
  return r_window(i, j, A[0], A[1]) && r_window(i, j, A[2], A[3]);
}
PRED(p_dilated_or_global) {
  UNUSED;
  return r_dilated(i, j, A[0], A[1]) || r_global(i, j, A[2]);
}
PRED(p_strided_minus_causal_ish) {
  /* strided(s) & (window(0,n) | global(g)) */
  UNUSED;
  return r_strided(i, j, A[0]) && (r_window(i, j, 0, A[1]) || r_global(i, j, A[2]));
}
PRED(p_or_of_and) {
  /* causal & strided(s) | blocked(b) & dilated(w,d) */
  UNUSED;
  return (j <= i && r_strided(i, j, A[0])) ||
         (r_blocked(i, j, A[1]) && r_dilated(i, j, A[2], A[3]));
}

const ref_pattern splat_ref_patterns[] = {
    {"dense", p_dense, {0}},
    {"dense()", p_dense, {0}},
    {"causal", p_causal, {0}},
    {" causal ( ) ", p_causal, {0}},
    {"window(0)", p_window, {0, 0}},
    {"window(3)", p_window, {3, 3}},
    {"window(37)", p_window, {37, 37}},
    {"window(2,5)", p_window, {2, 5}},
    {"window(5,0)", p_window, {5, 0}},
    {"window(-2,4)", p_window, {-2, 4}},
    {"window(3,-1)", p_window, {3, -1}},
    {"window(-3,1)", p_window, {-3, 1}},
    {"window(100,-100)", p_window, {100, -100}},
    {"window(-1)", p_window, {-1, -1}},
    {"window(5000)", p_window, {5000, 5000}},
    {"dilated(0,1)", p_dilated, {0, 1}},
    {"dilated(3,2)", p_dilated, {3, 2}},
    {"dilated(4,7)", p_dilated, {4, 7}},
    {"dilated(2,1)", p_dilated, {2, 1}},
    {"dilated(5,100)", p_dilated, {5, 100}},
    {"dilated(1000,3)", p_dilated, {1000, 3}},
    {"strided(1)", p_strided, {1}},
    {"strided(3)", p_strided, {3}},
    {"strided(64)", p_strided, {64}},
    {"strided(97)", p_strided, {97}},
    {"fixed(4,1)", p_fixed, {4, 1}},
    {"fixed(8,0)", p_fixed, {8, 0}},
    {"fixed(8,8)", p_fixed, {8, 8}},
    {"fixed(16,3)", p_fixed, {16, 3}},
    {"fixed(7,6)", p_fixed, {7, 6}},
    {"fixed(100,10)", p_fixed, {100, 10}},
    {"fixed(1,0)", p_fixed, {1, 0}},
    {"blocked(1)", p_blocked, {1}},
    {"blocked(8)", p_blocked, {8}},
    {"blocked(37)", p_blocked, {37}},
    {"blocked(512)", p_blocked, {512}}, /* 192-row tiles cut at its blocks (tile_rows.h) */
    {"blocked(5000)", p_blocked, {5000}},
    {"global(0)", p_global, {0}},
    {"global(3)", p_global, {3}},
    {"global(64)", p_global, {64}},
    {"longformer(3,2)", p_longformer, {3, 2}},
    {"longformer(256,64)", p_longformer, {256, 64}},
    {"longformer(0,0)", p_longformer, {0, 0}},
    {"longformer(5,20)", p_longformer, {5, 20}},
    {"bigbird(4,1,1,2,42)", p_bigbird, {4, 1, 1, 2, 42}},
    {"bigbird(16,1,2,3,7)", p_bigbird, {16, 1, 2, 3, 7}},
    {"bigbird(7,0,0,3,123)", p_bigbird, {7, 0, 0, 3, 123}},
    {"bigbird(8,2,1,100,5)", p_bigbird, {8, 2, 1, 100, 5}},
    {"bigbird(3,1,1,40,99)", p_bigbird, {3, 1, 1, 40, 99}},
    {"bigbird(64,1,1,3,18446744073709551615)", p_bigbird, {64, 1, 1, 3, (int64_t)-1}},
    {"bigbird(10,0,3,0,1)", p_bigbird, {10, 0, 3, 0, 1}},
    {"strided(64) | window(64)", p_strided_or_window, {64, 64}},
    {"strided(8)|window(8)", p_strided_or_window, {8, 8}},
    {"strided(5) | window(1)", p_strided_or_window, {5, 1}},
    {"causal & window(5,0)", p_causal_and_window, {5, 0}},
    {"causal & window(512,0)", p_causal_and_window, {512, 0}},
    {"causal & window(3,3)", p_causal_and_window, {3, 3}},
    {"dilated(3,2) | dilated(2,3)", p_dil_or_dil, {3, 2, 2, 3}},
    {"dilated(2,4) | dilated(3,4)", p_dil_or_dil, {2, 4, 3, 4}},
    {"dilated(6,2) & dilated(4,3)", p_dil_and_dil, {6, 2, 4, 3}},
    {"(blocked(8) | global(3)) & causal", p_blocked_or_global_and_causal, {8, 3}},
    {"window(4) & strided(3)", p_window_and_strided, {4, 3}},
    {"fixed(8,2) | window(3)", p_fixed_or_window, {8, 2, 3}},
    {"dilated(4,3) & window(6)", p_dilated_and_window, {4, 3, 6}},
    {"strided(4) & strided(6)", p_strided_and_strided, {4, 6}},
    {"strided(4) | strided(6)", p_strided_or_strided, {4, 6}},
    {"global(5) | window(2) | strided(10)", p_global_or_window_or_strided, {5, 2, 10}},
    {"blocked(16) & dilated(8,2)", p_blocked_and_dilated, {16, 8, 2}},
    {"bigbird(4,1,1,2,42) & causal", p_bigbird_and_causal, {4, 1, 1, 2, 42}},
    {"longformer(3,2) & strided(2)", p_longformer_and_strided, {3, 2, 2}},
    {"fixed(4,2) & fixed(8,3)", p_fixed_and_fixed, {4, 2, 8, 3}},
    {"fixed(4,1) | fixed(6,2)", p_fixed_or_fixed, {4, 1, 6, 2}},
    {"window(1) | window(20,-18)", p_window_or_window, {1, 1, 20, -18}},
    {"window(7,2) & window(-1,9)", p_window_and_window, {7, 2, -1, 9}},
    {"dilated(10,3) | global(4)", p_dilated_or_global, {10, 3, 4}},
    {"strided(3) & (window(0,40) | global(5))", p_strided_minus_causal_ish, {3, 40, 5}},
    {"causal & strided(7) | blocked(12) & dilated(3,2)", p_or_of_and, {7, 12, 3, 2}},
};
const int splat_ref_pattern_count = (int)(sizeof splat_ref_patterns / sizeof splat_ref_patterns[0]);

const ref_pattern *splat_ref_pattern_find(const char *spec) {
  for (int k = 0; k < splat_ref_pattern_count; k++) {
    if (strcmp(splat_ref_patterns[k].spec, spec) == 0) return &splat_ref_patterns[k];
  }
  return NULL;
}

/* closed_form.c — per-spec row generators: row i of dense, causal, window, dilated,
 * strided, fixed, blocked, global, longformer and bigbird as canonical segments in
 * O(1) each (bigbird: O(r^2) per query block, O(1) where r takes every candidate), plus bigbird's
 * seeded random blocks, and for each leaf the rows after a given one that repeat it (unchanged or
 * moved right). */
#include "pattern/pattern_impl.h"

/* Appends the range [lo, hi] (nothing when empty), merged into a preceding range it
 * touches. Leaves emit in increasing order, so that is the only merge they need. */
static inline int push_range(splat__segment *out, int n, int cap, int64_t lo, int64_t hi) {
  if (n < 0 || lo > hi) return n;
  if (n > 0 && out[n - 1].stride == 1 && (int64_t)out[n - 1].start + out[n - 1].count == lo) {
    out[n - 1].count += (int32_t)(hi - lo + 1);
    return n;
  }
  if (n >= cap) return -1;
  out[n].start = (int32_t)lo, out[n].stride = 1, out[n].count = (int32_t)(hi - lo + 1);
  out[n].width = 1;
  return n + 1;
}

uint64_t splat__splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* bigbird(b, w, g, r, seed), row i. See docs/patterns.md, "bigbird", for the exact
 * procedure; the test reference re-implements it from there. */
static int bigbird_row(const splat__pnode *nd, int64_t i, int64_t seq_k, splat__segment *out,
                       int cap, splat__bigbird_scratch *bb) {
  const int64_t b = nd->a[0], w = nd->a[1], g = nd->a[2], r = nd->a[3];
  const int64_t qb = i / b, nkb = (seq_k + b - 1) / b;
  if (qb < g) return push_range(out, 0, cap, 0, seq_k - 1);
  /* Excluded (already visible) block intervals, sorted and merged: e[0..ne). */
  int64_t e_lo[2], e_hi[2];
  int ne = 0;
  int64_t glo = 0, ghi = imin(g, nkb) - 1;
  int64_t wlo = imax(0, qb - w), whi = imin(nkb - 1, qb + w);
  if (glo <= ghi) e_lo[ne] = glo, e_hi[ne] = ghi, ne++;
  if (wlo <= whi) {
    if (ne && wlo <= e_hi[0] + 1) {
      e_hi[0] = imax(e_hi[0], whi);
    } else {
      e_lo[ne] = wlo, e_hi[ne] = whi, ne++;
    }
  }
  int64_t excluded = 0;
  for (int t = 0; t < ne; t++) excluded += e_hi[t] - e_lo[t] + 1;
  const int64_t m = nkb - excluded;
  const int64_t k = imin(r, m);
  /* Every candidate drawn (Floyd's sampling of m ranks of m takes them all): the row sees
   * every block, without the m draws (r near the number of blocks made the analysis
   * quadratic in seq). */
  if (k == m) return push_range(out, 0, cap, 0, seq_k - 1);
  /* Floyd's sampling of k distinct ranks in [0, m). */
  uint64_t state = nd->seed ^ ((uint64_t)qb * 0xD1342543DE82EF95ull);
  int64_t *ranks = bb->blocks;
  const int use_bits = k > 32;
  for (int64_t jj = m - k, c = 0; jj < m; jj++, c++) {
    int64_t t = (int64_t)(splat__splitmix64(&state) % (uint64_t)(jj + 1));
    int seen = 0;
    if (use_bits) {
      seen = (int)((bb->taken[t >> 6] >> (t & 63)) & 1);
    } else {
      for (int64_t q = 0; q < c; q++) seen |= ranks[q] == t;
    }
    int64_t pick = seen ? jj : t;
    if (use_bits) {
      bb->taken[pick >> 6] |= (uint64_t)1 << (pick & 63);
    } else {
      ranks[c] = pick;
    }
  }
  /* Ranks in increasing order. */
  if (use_bits) {
    int64_t c = 0;
    for (int64_t q = 0; q < (m + 63) / 64; q++) {
      uint64_t x = bb->taken[q];
      bb->taken[q] = 0;
      while (x) {
        ranks[c++] = q * 64 + __builtin_ctzll(x);
        x &= x - 1;
      }
    }
  } else {
    for (int64_t p = 1; p < k; p++) {
      int64_t v = ranks[p], q = p;
      while (q > 0 && ranks[q - 1] > v) ranks[q] = ranks[q - 1], q--;
      ranks[q] = v;
    }
  }
  /* Rank -> block: skip the excluded intervals (O(1)); then merge everything. */
  int n = 0, ei = 0;
  for (int64_t p = 0; p <= k; p++) {
    int64_t blk = -1;
    if (p < k) {
      blk = ranks[p];
      for (int t = 0; t < ne; t++) {
        if (blk >= e_lo[t]) blk += e_hi[t] - e_lo[t] + 1;
      }
    }
    while (ei < ne && (p == k || e_lo[ei] < blk)) {
      n = push_range(out, n, cap, e_lo[ei] * b, imin((e_hi[ei] + 1) * b, seq_k) - 1);
      ei++;
    }
    if (p < k) n = push_range(out, n, cap, blk * b, imin((blk + 1) * b, seq_k) - 1);
    if (n < 0) return -1;
  }
  return n;
}

int splat__leaf_segments(const splat__pnode *nd, int64_t i, int64_t seq_k, splat__segment *out,
                         int cap, splat__bigbird_scratch *bb) {
  const int64_t last = seq_k - 1;
  switch (nd->kind) {
    case SPLAT__PN_DENSE:
      return push_range(out, 0, cap, 0, last);
    case SPLAT__PN_CAUSAL:
      return push_range(out, 0, cap, 0, imin(i, last));
    case SPLAT__PN_WINDOW:
      return push_range(out, 0, cap, imax(0, i - nd->a[0]), imin(last, i + nd->a[1]));
    case SPLAT__PN_BLOCKED: {
      int64_t lo = i - i % nd->a[0];
      return push_range(out, 0, cap, lo, imin(last, lo + nd->a[0] - 1));
    }
    case SPLAT__PN_GLOBAL:
      return push_range(out, 0, cap, 0, i < nd->a[0] ? last : imin(nd->a[0], seq_k) - 1);
    case SPLAT__PN_LONGFORMER: {
      const int64_t w = nd->a[0], g = nd->a[1];
      if (i < g) return push_range(out, 0, cap, 0, last);
      int n = push_range(out, 0, cap, 0, imin(g, seq_k) - 1);
      int64_t lo = imax(0, i - w), hi = imin(last, i + w);
      if (n == 1 && lo <= hi && lo <= out[0].count) { /* overlaps or touches [0, g) */
        out[0].count = (int32_t)imax(out[0].count, hi + 1);
        return 1;
      }
      return push_range(out, n, cap, lo, hi);
    }
    case SPLAT__PN_STRIDED: {
      const int64_t s = nd->a[0], j0 = i % s;
      if (j0 > last) return 0;
      return cap < 1 ? -1 : (out[0] = splat__seg_canon(j0, s, (last - j0) / s + 1, 1), 1);
    }
    case SPLAT__PN_DILATED: {
      const int64_t w = nd->a[0], d = nd->a[1];
      int64_t t0 = imax(-w, -(i / d)), t1 = imin(w, fdiv(last - i, d));
      if (t0 > t1) return 0;
      return cap < 1 ? -1 : (out[0] = splat__seg_canon(i + d * t0, d, t1 - t0 + 1, 1), 1);
    }
    case SPLAT__PN_FIXED: {
      const int64_t b = nd->a[0], c = nd->a[1];
      if (c == b) return push_range(out, 0, cap, 0, last);
      const int64_t blk = i / b, lo = blk * b;
      int n = 0;
      if (c > 0 && blk > 0) { /* summary runs of the blocks before */
        n = splat__seg_push_clipped(out, n, cap, b - c, b, blk, c, 0, imin(last, lo - 1));
      }
      n = push_range(out, n, cap, lo, imin(last, lo + b - 1));
      if (n < 0) return -1;
      const int64_t first = lo + b + (b - c); /* summary run of the next block */
      if (c > 0 && first <= last) {
        int64_t cnt = fdiv(last - first, b) + 1;
        n = splat__seg_push_clipped(out, n, cap, first, b, cnt, c, 0, last);
      }
      return n;
    }
    case SPLAT__PN_BIGBIRD:
      return bigbird_row(nd, i, seq_k, out, cap, bb);
    default:
      return -1;
  }
}

/* Rows of the clamped range [max(0, r + p), min(last, r + q)] that repeat row i: see
 * splat__leaf_run. Rows past a row whose range is empty (p > q, or r + p > last) stay
 * empty; rows before r + q reaches 0 are empty too. */
static void range_run(int64_t i, int64_t p, int64_t q, int64_t last, int64_t *same,
                      int64_t *shifted) {
  if (p > q || i + p > last) {
    *same = *shifted = INT64_MAX;
  } else if (i + q < 0) {
    *same = *shifted = -q - 1;
  } else {
    *same = i + p <= 0 && i + q >= last ? -p : i;          /* both ends clamped */
    *shifted = i + p >= 0 && i + q <= last ? last - q : i; /* neither end clamped */
  }
}

void splat__leaf_run(const splat__pnode *nd, int64_t i, int64_t seq_k, int64_t *same,
                     int64_t *shifted) {
  const int64_t last = seq_k - 1;
  *same = *shifted = i;
  switch (nd->kind) {
    case SPLAT__PN_DENSE:
      *same = INT64_MAX;
      break;
    case SPLAT__PN_CAUSAL: /* p: far enough below every row that r + p <= 0 */
      range_run(i, -2 * SPLAT__MAX_SEQ, 0, last, same, shifted);
      break;
    case SPLAT__PN_WINDOW:
      range_run(i, -nd->a[0], nd->a[1], last, same, shifted);
      break;
    case SPLAT__PN_GLOBAL:
    case SPLAT__PN_LONGFORMER: { /* rows below g: every column; longformer's others move */
      const int64_t g = nd->kind == SPLAT__PN_GLOBAL ? nd->a[0] : nd->a[1];
      if (i < g) {
        *same = g - 1;
      } else if (nd->kind == SPLAT__PN_GLOBAL || nd->a[0] < 0) { /* [0, g) alone */
        *same = INT64_MAX;
      }
      break;
    }
    case SPLAT__PN_BLOCKED:
    case SPLAT__PN_FIXED:
    case SPLAT__PN_BIGBIRD: /* a function of the row's block i / b */
      *same = (i / nd->a[0] + 1) * nd->a[0] - 1;
      break;
    case SPLAT__PN_STRIDED: {
      const int64_t s = nd->a[0], j0 = i % s;
      if (j0 > last) { /* empty until the phase wraps */
        *same = *shifted = (i / s + 1) * s - 1;
      } else if (s == 1) {
        *same = INT64_MAX;
      } else { /* the phase moves without wrapping and the count stays */
        const int64_t c = (last - j0) / s;
        *shifted = i + imin(s - 1 - j0, last - c * s - j0);
      }
      break;
    }
    case SPLAT__PN_DILATED: { /* interior rows: every one of the 2w + 1 terms in range */
      const int64_t w = nd->a[0], d = nd->a[1];
      if (i / d >= w && fdiv(last - i, d) >= w) *shifted = last - w * d;
      break;
    }
    default:
      break;
  }
}

int64_t splat__leaf_max_segments(const splat__pnode *nd, int64_t seq_k) {
  if (nd->kind == SPLAT__PN_BIGBIRD) {
    int64_t nkb = (seq_k + nd->a[0] - 1) / nd->a[0];
    return imin(nd->a[3], nkb) + 2;
  }
  return 5;
}
